//! Reading a capture into batches of packet records, with progress, clear errors and the
//! truncation policy.

use std::path::Path;

use anyhow::{Result, anyhow, bail};
use owl_core::PacketRecord;
use owl_trace::capture::{CaptureError, CaptureReader};
use owl_trace::lockstep::Source;
use owl_trace::records::{InputStats, RecordReader};

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
        e => anyhow!("{}: {e}", path.display()),
    }
}

/// Stream `path` (a file, a FIFO, or `-` for standard input) through `consume`, one batch at a
/// time.
pub fn read_capture(
    path: &Path,
    identity_seed: u64,
    allow_truncated: bool,
    label: &str,
    mut consume: impl FnMut(&[PacketRecord]) -> Result<()>,
) -> Result<Read> {
    let src = Source::parse(path);
    let size = src.size().unwrap_or(0);
    let reader = src
        .open()
        .and_then(CaptureReader::new)
        .map_err(|e| open_error(path, e))?;
    let mut rr = RecordReader::new(reader, identity_seed);
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
                return Err(anyhow!(
                    "{}: {e} (pass --allow-truncated to measure the complete records before it)",
                    path.display()
                ));
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
        bail!(
            "{}: no IP packets to measure ({} frames: {} not IP, {} malformed IP, {} without timestamp)",
            path.display(),
            stats.frames,
            stats.non_ip,
            stats.malformed,
            stats.no_timestamp
        );
    }
    Ok(Read { stats, truncated })
}
