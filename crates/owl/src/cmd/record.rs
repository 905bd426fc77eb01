//! `owl record`: one observation point's synopses, interval by interval, into a file.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use clap::{Args, ValueEnum};
use owl_core::method::{PointSynopsis, Role};
use owl_core::units::format_bytes;
use owl_core::wire::SynopsisFile;

use super::agreed::Agreed;
use crate::input::read_capture;
use crate::methods;

const AFTER_HELP: &str = "Each observation point records its own capture; only the synopsis
files meet (`owl estimate SENDER_FILE RECEIVER_FILE`). Both points must use the same method,
configuration (--memory, --seed), --interval, --origin-ns and --identity-seed: estimate refuses a
pair that differs and names the field.

If the capture turns out truncated or corrupt half-way, the intervals recorded before the error are
still written to FILE, and owl exits with status 1 saying so (with --allow-truncated, a capture
that merely ends inside a record is accepted with a warning).

Examples:
  owl record --method lda --role sender   S.pcap --interval 1s -o S.owl
  owl record --method lda --role receiver R.pcap --interval 1s -o R.owl
  owl estimate S.owl R.owl";

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RoleArg {
    Sender,
    Receiver,
}

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct RecordArgs {
    /// Capture of this observation point (pcap or pcapng).
    pub capture: PathBuf,
    /// Synopsis file to write.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Method whose synopsis to record.
    #[arg(long, long_help = methods::help(false))]
    pub method: String,
    /// Which point this capture was taken at.
    #[arg(long, value_enum)]
    pub role: RoleArg,
    #[command(flatten)]
    pub agreed: Agreed,
    /// Accept a capture that ends inside a record (measure what is complete).
    #[arg(long)]
    pub allow_truncated: bool,
}

pub fn run(a: RecordArgs) -> Result<()> {
    if methods::ALL.iter().all(|e| e.name != a.method) {
        return Err(anyhow!(
            "unknown method '{}'; available: {}",
            a.method,
            methods::ALL
                .iter()
                .map(|e| e.name)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let overrides = a.agreed.overrides()?;
    if let Some(m) = overrides.methods().into_iter().find(|m| *m != a.method) {
        return Err(anyhow!(
            "--method-config sets {m}, but the method recorded is {}",
            a.method
        ));
    }
    let method = methods::build_configured(&a.method, &a.agreed.options(), &overrides)?;
    let iv = a.agreed.intervals()?;
    let role = match a.role {
        RoleArg::Sender => Role::Sender,
        RoleArg::Receiver => Role::Receiver,
    };
    let mut points: BTreeMap<u64, Box<dyn PointSynopsis>> = BTreeMap::new();
    let read = read_capture(
        &a.capture,
        a.agreed.identity_seed,
        a.allow_truncated,
        "capture",
        |batch| {
            for r in batch {
                if let Some(i) = iv.index(r.ts_ns) {
                    points
                        .entry(i)
                        .or_insert_with(|| method.new_point(role))
                        .record(r);
                }
            }
            Ok(())
        },
    );
    let file = SynopsisFile {
        method: method.name().to_string(),
        role,
        intervals: iv,
        identity_seed: a.agreed.identity_seed,
        config: method
            .config()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        points: points
            .iter()
            .map(|(i, p)| {
                let mut b = Vec::with_capacity(p.encoded_len());
                p.encode(&mut b);
                (*i, b)
            })
            .collect(),
    };
    match read {
        Ok(r) => {
            if let Some(t) = &r.truncated {
                eprintln!(
                    "owl: warning: {}: {t}; recorded the {} complete packets before it",
                    a.capture.display(),
                    r.stats.ip_packets
                );
            }
            let bytes = write_atomically(&a.output, &file.encode())?;
            println!(
                "wrote {}: {} synopsis of {} interval(s), {} IP packets, {}",
                a.output.display(),
                file.method,
                file.points.len(),
                r.stats.ip_packets,
                format_bytes(bytes)
            );
            Ok(())
        }
        Err(e) if !file.points.is_empty() => {
            // keep what was recorded before the error, and say so
            write_atomically(&a.output, &file.encode())?;
            Err(e.context(format!(
                "{} holds the {} interval(s) recorded before the error",
                a.output.display(),
                file.points.len()
            )))
        }
        Err(e) => Err(e),
    }
}

/// Write via a temporary file and a rename, so a reader never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<u64> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("{}: cannot create a file there", dir.display()))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path)
        .map_err(|e| anyhow!("{}: cannot write: {}", path.display(), e.error))?;
    Ok(bytes.len() as u64)
}
