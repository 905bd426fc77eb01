//! Progress bars on a terminal; nothing when stderr is not one (scripts, CI, pipes).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A byte- or item-count progress bar that only shows on an interactive terminal.
pub fn bar(total: u64, message: &str, bytes: bool) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(total);
    let tmpl = if bytes {
        "{msg:30} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}"
    } else {
        "{msg:30} [{bar:30}] {pos}/{len} eta {eta}"
    };
    pb.set_style(
        ProgressStyle::with_template(tmpl)
            .expect("static template")
            .progress_chars("=> "),
    );
    pb.set_message(message.to_string());
    pb
}
