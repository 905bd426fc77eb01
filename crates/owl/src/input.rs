//! Reading a capture into batches of packet records, with progress, clear errors and the
//! truncation policy.

use std::path::Path;

use anyhow::{Result, anyhow};
use owl_core::PacketRecord;
use owl_trace::capture::{CaptureError, CaptureReader};
use owl_trace::dissect::linktype_name;
use owl_trace::lockstep::Source;
use owl_trace::records::{InputStats, ReadOptions, RecordReader};

use crate::progress;

/// Records per batch handed to consumers.
pub const BATCH: usize = 4096;

/// What happened while reading a capture.
pub struct Read {
    pub stats: InputStats,
    /// The truncation that ended the capture early, if it was allowed.
    pub truncated: Option<String>,
}

fn open_error(path: &Path, e: CaptureError) -> anyhow::Error {
    match e {
        CaptureError::Io(io) => anyhow!("{}: cannot read: {io}", path.display()),
        e @ CaptureError::MixedInterfaces { .. } => {
            anyhow!("{}: {e} with --interface N", path.display())
        }
        e => anyhow!("{}: {e}", path.display()),
    }
}

/// The error for a capture that ends early (`is_truncation`) without `--allow-truncated`; the
/// flag is advised only when there are packets before the end for it to measure.
pub fn ends_early(name: &str, e: &CaptureError, packets_before: u64) -> anyhow::Error {
    match packets_before {
        0 => anyhow!("{name}: {e}"),
        n => anyhow!(
            "{name}: {e} (pass --allow-truncated to measure the {n} complete packets before it)"
        ),
    }
}

/// The error for a capture that held no IP packet, saying what it held instead (and, for one
/// that ended early under `--allow-truncated`, where it ended).
pub fn no_ip_packets(name: &str, s: &InputStats, truncated: Option<&str>) -> anyhow::Error {
    let mut held = format!(
        "{} frames: {} not IP, {} malformed IP, {} without timestamp",
        s.frames, s.non_ip, s.malformed, s.no_timestamp
    );
    if s.unsupported_link > 0 {
        held.push_str(&format!(
            ", {} on interfaces of link type {}, which owl cannot read",
            s.unsupported_link,
            s.unsupported_linktype.map_or("?", linktype_name)
        ));
    }
    if s.other_interface > 0 {
        held.push_str(&format!(
            ", {} on interfaces not selected (--interface)",
            s.other_interface
        ));
    }
    match truncated {
        Some(t) => {
            anyhow!("{name}: no IP packets to measure before the capture ends ({held}): {t}")
        }
        None => anyhow!("{name}: no IP packets to measure ({held})"),
    }
}

/// Stream `path` (a file, a FIFO, or `-` for standard input) through `consume`, one batch at a
/// time.
pub fn read_capture(
    path: &Path,
    options: &ReadOptions,
    allow_truncated: bool,
    label: &str,
    mut consume: impl FnMut(&[PacketRecord]) -> Result<()>,
) -> Result<Read> {
    let src = Source::parse(path);
    let size = src.size().unwrap_or(0);
    let name = path.display().to_string();
    let opened = src
        .open()
        .and_then(CaptureReader::new)
        .and_then(|r| RecordReader::with_options(r, options));
    let mut rr = match opened {
        Ok(rr) => rr,
        Err(e) if e.is_truncation() && allow_truncated => {
            let t = e.to_string();
            return Err(no_ip_packets(&name, &InputStats::default(), Some(&t)));
        }
        Err(e) => return Err(open_error(path, e)),
    };
    let pb = progress::bar(size, &format!("reading {label}"), true);
    let mut batch = Vec::with_capacity(BATCH);
    let mut truncated = None;
    loop {
        match rr.next_batch(&mut batch, BATCH) {
            Ok(0) => break,
            Ok(_) => {
                consume(&batch)?;
                pb.set_position(rr.bytes_read());
            }
            Err(e) if e.is_truncation() && allow_truncated => {
                // the complete records before the truncation are in `batch`
                if !batch.is_empty() {
                    consume(&batch)?;
                }
                truncated = Some(e.to_string());
                break;
            }
            Err(e) if e.is_truncation() => {
                pb.finish_and_clear();
                return Err(ends_early(&name, &e, rr.stats().ip_packets));
            }
            Err(e) => {
                pb.finish_and_clear();
                return Err(open_error(path, e));
            }
        }
    }
    pb.finish_and_clear();
    let stats = rr.stats();
    if stats.ip_packets == 0 {
        return Err(no_ip_packets(&name, &stats, truncated.as_deref()));
    }
    Ok(Read { stats, truncated })
}
