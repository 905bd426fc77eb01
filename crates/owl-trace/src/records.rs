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
    /// The capture's snaplen (see [`CaptureReader::snaplen`]); `None` for no limit.
    pub snaplen: Option<u32>,
    /// Largest captured length of a frame, bytes.
    pub longest_frame: u32,
    /// Frames were dissected and identified on their first this many bytes (the smaller
    /// snaplen of two captures, so that both points hash the same bytes).
    pub identified_within: Option<u32>,
    /// Frames captured longer than `identified_within`, identified on fewer bytes than captured.
    pub cut_to_common: u64,
}

/// A packet read ahead (to learn the snaplen of a pcapng interface) and not yet turned into a
/// record.
struct Held {
    ts_ns: u64,
    linktype: u32,
    data: Vec<u8>,
    offset: u64,
}

/// Reads records from a capture.
pub struct RecordReader<R: Read> {
    reader: CaptureReader<R>,
    seed: u64,
    stats: InputStats,
    held: Option<Held>,
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
            held: None,
        }
    }

    pub fn stats(&self) -> InputStats {
        let ReaderStats { no_timestamp, .. } = self.reader.stats();
        InputStats {
            no_timestamp,
            snaplen: self.reader.snaplen(),
            ..self.stats
        }
    }

    /// Read the first packet ahead (it stays first in line for [`next_batch`](Self::next_batch))
    /// and return the capture's snaplen as it is then known (a pcapng declares it in the
    /// interface block before its packets).
    pub fn first_snaplen(&mut self) -> Result<Option<u32>, CaptureError> {
        if self.held.is_none()
            && self.stats.frames == 0
            && let Some(p) = self.reader.next_packet()?
        {
            self.held = Some(Held {
                ts_ns: p.ts_ns,
                linktype: p.linktype,
                data: p.data.to_vec(),
                offset: p.offset,
            });
        }
        Ok(self.reader.snaplen())
    }

    /// Dissect and identify every frame on at most its first `bytes` bytes, as if the capture
    /// had that snaplen: two points captured with different snaplens then hash the same bytes
    /// of each packet (`None`: every captured byte).
    pub fn identify_within(&mut self, bytes: Option<u32>) {
        self.stats.identified_within = bytes;
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
        if let Some(h) = self.held.take() {
            record(
                &mut self.stats,
                self.seed,
                h.ts_ns,
                h.linktype,
                &h.data,
                h.offset,
                out,
            )?;
        }
        while out.len() < max {
            let Some(p) = self.reader.next_packet()? else {
                break;
            };
            record(
                &mut self.stats,
                self.seed,
                p.ts_ns,
                p.linktype,
                p.data,
                p.offset,
                out,
            )?;
        }
        Ok(out.len())
    }
}

/// Dissect and identify one frame into `out` (or count why not).
fn record(
    stats: &mut InputStats,
    seed: u64,
    ts_ns: u64,
    linktype: u32,
    data: &[u8],
    offset: u64,
    out: &mut Vec<PacketRecord>,
) -> Result<(), CaptureError> {
    stats.frames += 1;
    stats.longest_frame = stats
        .longest_frame
        .max(u32::try_from(data.len()).unwrap_or(u32::MAX));
    let data = match stats.identified_within {
        Some(n) if data.len() > n as usize => {
            stats.cut_to_common += 1;
            &data[..n as usize]
        }
        _ => data,
    };
    match dissect(linktype, data) {
        Ok(d) => {
            let id = frame_identity(data, &d, seed);
            stats.ip_packets += 1;
            stats.first_ns.get_or_insert(ts_ns);
            stats.last_ns = Some(ts_ns);
            out.push(PacketRecord {
                ts_ns,
                id,
                flow: d.flow,
                len: d.ip_len,
            });
        }
        Err(Skip::NotIp) => stats.non_ip += 1,
        Err(Skip::Malformed(_)) => stats.malformed += 1,
        Err(Skip::UnsupportedLinkType) => {
            return Err(CaptureError::UnsupportedLinkType {
                offset,
                linktype,
                name: linktype_name(linktype),
            });
        }
    }
    Ok(())
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
/// saw. `within`: identities were taken on at most that many bytes of each frame
/// ([`RecordReader::identify_within`]).
pub fn extract(
    src: &Path,
    dst: &Path,
    identity_seed: u64,
    within: Option<u32>,
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
        let cut = match within {
            Some(n) => &p.data[..p.data.len().min(n as usize)],
            None => p.data,
        };
        let Ok(d) = dissect(p.linktype, cut) else {
            continue;
        };
        if !ids.contains(&frame_identity(cut, &d, identity_seed)) {
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
