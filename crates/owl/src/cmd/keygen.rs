//! `owl keygen`: the shared secret of a live deployment (`owl agent`, `owl collector`).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use owl_live::key::Key;

const AFTER_HELP: &str = "The key authenticates every frame between the two agents and from
the agents to the collector (HMAC-SHA256 under a key derived afresh for each connection): give
the same file to all of them with --key-file. A peer with another key is refused at the
handshake, with a one-line reason on both sides. The key does not encrypt: anyone on the path
can read the synopses; tunnel the connections if that matters.

The file is one line, `owl-key-v1` and 64 hexadecimal digits (32 random bytes from the
operating system). With -o it is created readable by its owner only (mode 600) and an existing
file is never overwritten.

Examples:
  owl keygen -o owl.key
  owl keygen > owl.key && chmod 600 owl.key
  scp owl.key receiver-host:/etc/owl/owl.key";

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct KeygenArgs {
    /// Write the key to this new file (mode 600) instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(a: KeygenArgs) -> Result<()> {
    let key = Key::generate()?;
    let text = key.to_file_text();
    match a.output {
        None => {
            std::io::stdout().write_all(text.as_bytes())?;
            Ok(())
        }
        Some(path) => {
            let mut o = std::fs::OpenOptions::new();
            o.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o600);
            }
            let mut f = match o.open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    bail!(
                        "{}: exists; owl keygen never overwrites a key",
                        path.display()
                    )
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("{}: cannot create", path.display()));
                }
            };
            f.write_all(text.as_bytes())
                .and_then(|_| f.sync_all())
                .with_context(|| format!("{}: cannot write", path.display()))
        }
    }
}
