//! Helpers shared by the command-line test files: run `owl`, demand success or one clear error.

// Each test file compiles this module on its own and uses a part of it.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Run the `owl` binary built for these tests.
pub fn owl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_owl"))
        .args(args)
        .output()
        .expect("run owl")
}

/// Run a command that must succeed; its standard output.
pub fn ok(args: &[&str]) -> String {
    let o = owl(args);
    assert!(
        o.status.success(),
        "owl {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Run a command that must fail: exit status 1, exactly one line on stderr, naming `want`.
pub fn fails(args: &[&str], want: &str) -> String {
    let o = owl(args);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(1), "owl {args:?}: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "one line expected: {err}"
    );
    assert!(err.starts_with("owl: error: "), "{err}");
    assert!(err.contains(want), "owl {args:?}: '{want}' not in: {err}");
    err
}

/// `owl simulate` of 20 000 packets at 100 kpps into `dir`, with `extra` flags: the two
/// captures and the simulator's books (`sim.json`).
pub fn simulate(
    dir: &std::path::Path,
    extra: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf, serde_json::Value) {
    let d = dir.to_str().unwrap();
    let mut args = vec!["simulate", "--out", d, "--packets", "20k", "--rate", "100k"];
    args.extend_from_slice(extra);
    ok(&args);
    let books: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sim.json")).unwrap()).unwrap();
    (dir.join("sender.pcap"), dir.join("receiver.pcap"), books)
}

/// Copy capture `src` to `dst` (pcap) keeping `snaplen` bytes of each frame (0: all) and only
/// the frames `keep(index, ts_ns)` accepts: a capture taken with another snaplen, started late
/// or stopped early.
pub fn recapture(
    src: &std::path::Path,
    dst: &std::path::Path,
    snaplen: u32,
    keep: impl Fn(u64, u64) -> bool,
) {
    use owl_trace::capture::{CaptureFormat, CaptureReader, CaptureWriter};
    let mut r = CaptureReader::open(src).unwrap();
    let f = std::io::BufWriter::new(std::fs::File::create(dst).unwrap());
    let mut w: Option<CaptureWriter<_>> = None;
    let mut f = Some(f);
    let mut i = 0;
    while let Some(p) = r.next_packet().unwrap() {
        let w = w.get_or_insert_with(|| {
            CaptureWriter::new(f.take().unwrap(), CaptureFormat::Pcap, p.linktype, snaplen).unwrap()
        });
        if keep(i, p.ts_ns) {
            w.write_packet(p.ts_ns, p.data, p.orig_len).unwrap();
        }
        i += 1;
    }
    w.unwrap().finish().unwrap();
}
