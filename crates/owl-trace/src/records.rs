//! Captures to packet records: read, dissect, identify, in batches.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use owl_core::PacketRecord;
use serde::Serialize;

use crate::capture::{CaptureError, CaptureReader, ReaderStats};
use crate::dissect::{Skip, dissect, linktype_name};
use crate::identity::frame_identity;

/// Counts of what a capture held besides measurable packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InputStats {
    /// Frames read from the capture.
    pub frames: u64,
    /// IP packets turned into records.
    pub ip_packets: u64,
    /// Frames that are not IP (ARP, LLDP, …), skipped.
    pub non_ip: u64,
    /// IP packets too broken to identify, skipped.
    pub malformed: u64,
    /// pcapng Simple Packet Blocks (no timestamp), skipped.
    pub no_timestamp: u64,
    /// First and last record timestamps, ns.
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
}

/// Reads records from a capture.
pub struct RecordReader<R: Read> {
    reader: CaptureReader<R>,
    seed: u64,
    stats: InputStats,
}

impl RecordReader<File> {
    pub fn open(path: &Path, identity_seed: u64) -> Result<RecordReader<File>, CaptureError> {
        Ok(RecordReader::new(CaptureReader::open(path)?, identity_seed))
    }
}

impl<R: Read> RecordReader<R> {
    pub fn new(reader: CaptureReader<R>, identity_seed: u64) -> RecordReader<R> {
        RecordReader {
            reader,
            seed: identity_seed,
            stats: InputStats::default(),
        }
    }

    pub fn stats(&self) -> InputStats {
        let ReaderStats { no_timestamp, .. } = self.reader.stats();
        InputStats {
            no_timestamp,
            ..self.stats
        }
    }

    pub fn bytes_read(&self) -> u64 {
        self.reader.bytes_read()
    }

    /// Append up to `max` records to `out` (cleared first); returns how many. 0 means the end of
    /// the capture.
    pub fn next_batch(
        &mut self,
        out: &mut Vec<PacketRecord>,
        max: usize,
    ) -> Result<usize, CaptureError> {
        out.clear();
        while out.len() < max {
            let Some(p) = self.reader.next_packet()? else {
                break;
            };
            self.stats.frames += 1;
            match dissect(p.linktype, p.data) {
                Ok(d) => {
                    let id = frame_identity(p.data, &d, self.seed);
                    self.stats.ip_packets += 1;
                    self.stats.first_ns.get_or_insert(p.ts_ns);
                    self.stats.last_ns = Some(p.ts_ns);
                    out.push(PacketRecord {
                        ts_ns: p.ts_ns,
                        id,
                        flow: d.flow,
                        len: d.ip_len,
                    });
                }
                Err(Skip::NotIp) => self.stats.non_ip += 1,
                Err(Skip::Malformed(_)) => self.stats.malformed += 1,
                Err(Skip::UnsupportedLinkType) => {
                    return Err(CaptureError::UnsupportedLinkType {
                        offset: p.offset,
                        linktype: p.linktype,
                        name: linktype_name(p.linktype),
                    });
                }
            }
        }
        Ok(out.len())
    }
}

/// What [`extract`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extracted {
    pub written: u64,
    /// Matching frames left out because their link type differs from the first one written
    /// (a pcap file holds one link type).
    pub other_linktype: u64,
}

/// Copy the frames of capture `src` whose identity is in `ids` to a new pcap file `dst`,
/// unchanged (same link layer, same timestamps). Used to hand a user the packets only one point
/// saw.
pub fn extract(
    src: &Path,
    dst: &Path,
    identity_seed: u64,
    ids: &hashbrown::HashSet<u64>,
) -> Result<Extracted, CaptureError> {
    use crate::capture::{CaptureFormat, CaptureWriter};
    let mut r = CaptureReader::open(src)?;
    let mut w: Option<CaptureWriter<std::io::BufWriter<File>>> = None;
    let mut linktype = 0;
    let mut out = Extracted::default();
    let mut pending_header = true;
    loop {
        let p = match r.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(e) if e.is_truncation() => break,
            Err(e) => return Err(e),
        };
        let Ok(d) = dissect(p.linktype, p.data) else {
            continue;
        };
        if !ids.contains(&frame_identity(p.data, &d, identity_seed)) {
            continue;
        }
        if pending_header {
            linktype = p.linktype;
            let f = std::io::BufWriter::new(File::create(dst)?);
            w = Some(CaptureWriter::new(f, CaptureFormat::Pcap, linktype, 0)?);
            pending_header = false;
        }
        if p.linktype != linktype {
            out.other_linktype += 1;
            continue;
        }
        if let Some(w) = w.as_mut() {
            w.write_packet(p.ts_ns, p.data, p.orig_len)?;
            out.written += 1;
        }
    }
    match w {
        Some(w) => {
            w.finish()?;
        }
        None => {
            // an empty but valid capture, so scripts always find the file
            let f = std::io::BufWriter::new(File::create(dst)?);
            CaptureWriter::new(f, CaptureFormat::Pcap, crate::dissect::LINKTYPE_ETHERNET, 0)?
                .finish()?;
        }
    }
    Ok(out)
}
