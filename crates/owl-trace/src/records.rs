//! Captures to packet records: read, dissect, identify, in batches.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use owl_core::PacketRecord;
use serde::Serialize;

use crate::capture::{CaptureError, CaptureReader, Container, ReaderStats};
use crate::dissect::{Skip, dissect, linktype_name};
use crate::identity::frame_identity_within;

/// Counts of what a capture held besides measurable packets.
///
/// `frames = ip_packets + non_ip + malformed`: every packet record of the interfaces measured.
/// Records skipped before dissection (no timestamp, another interface, a link type owl cannot
/// read) are counted apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct InputStats {
    /// Frames read from the capture (on the interfaces measured).
    pub frames: u64,
    /// IP packets turned into records.
    pub ip_packets: u64,
    /// Frames that are not IP (ARP, LLDP, …), skipped.
    pub non_ip: u64,
    /// Records too broken to measure (IP packets too damaged to identify, records with an
    /// invalid timestamp), skipped.
    pub malformed: u64,
    /// Of `malformed`: pcap records whose timestamp is invalid (fraction of a second ≥ 1 s).
    pub bad_timestamp: u64,
    /// pcapng Simple Packet Blocks (no timestamp), skipped.
    pub no_timestamp: u64,
    /// pcapng packets on interfaces whose link type owl cannot read, skipped (the interfaces
    /// owl reads are measured); `unsupported_linktype` names the first such link type.
    pub unsupported_link: u64,
    pub unsupported_linktype: Option<u32>,
    /// Packets on interfaces other than the one selected, skipped.
    pub other_interface: u64,
    /// Of `frames`: frames whose trailing FCS was removed (the pcap header gave its length).
    pub fcs_stripped: u64,
    /// Of `ip_packets`: packets whose identity covers fewer IP bytes than
    /// min(IP length, identity byte limit), because the snaplen cut them shorter. Two points
    /// that cut a packet at different places give it different identities: when one point
    /// counts these and the other does not, set the identity byte limit
    /// ([`crate::identity::common_identity_bytes`]).
    pub identity_short: u64,
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

/// How a capture is turned into records: what both points must agree on (the identity) and
/// what selects the packets of this capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadOptions {
    /// Seed of the packet identity (both points must use the same).
    pub identity_seed: u64,
    /// Hash at most this many bytes of each IP packet (both points must use the same); `None`
    /// hashes every captured byte. See [`crate::identity::common_identity_bytes`].
    pub identity_bytes: Option<u32>,
    /// Keep only this pcapng interface's packets (see [`CaptureReader::select_interface`]).
    pub interface: Option<u32>,
}

impl ReadOptions {
    pub fn with_seed(identity_seed: u64) -> ReadOptions {
        ReadOptions {
            identity_seed,
            identity_bytes: None,
            interface: None,
        }
    }
}

/// Reads records from a capture.
pub struct RecordReader<R: Read> {
    reader: CaptureReader<R>,
    seed: u64,
    identity_bytes: Option<u32>,
    stats: InputStats,
    /// Offset of the first packet skipped for its link type.
    first_unsupported_offset: u64,
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
            identity_bytes: None,
            stats: InputStats::default(),
            first_unsupported_offset: 0,
            held: None,
        }
    }

    /// A reader with all of `options` applied.
    pub fn with_options(
        mut reader: CaptureReader<R>,
        options: &ReadOptions,
    ) -> Result<RecordReader<R>, CaptureError> {
        reader.select_interface(options.interface)?;
        let mut rr = RecordReader::new(reader, options.identity_seed);
        rr.identity_bytes = options.identity_bytes;
        Ok(rr)
    }

    pub fn capture(&self) -> &CaptureReader<R> {
        &self.reader
    }

    pub fn stats(&self) -> InputStats {
        let ReaderStats {
            no_timestamp,
            bad_timestamp,
            fcs_stripped,
            other_interface,
            ..
        } = self.reader.stats();
        InputStats {
            frames: self.stats.frames + bad_timestamp,
            malformed: self.stats.malformed + bad_timestamp,
            bad_timestamp,
            no_timestamp,
            fcs_stripped,
            other_interface,
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
        let pcap = matches!(self.reader.container(), Container::Pcap { .. });
        let (seed, limit) = (self.seed, self.identity_bytes);
        if let Some(h) = self.held.take() {
            let f = Frame {
                ts_ns: h.ts_ns,
                linktype: h.linktype,
                data: &h.data,
                offset: h.offset,
            };
            record(
                &mut self.stats,
                &mut self.first_unsupported_offset,
                pcap,
                seed,
                limit,
                f,
                out,
            )?;
        }
        while out.len() < max {
            let Some(p) = self.reader.next_packet()? else {
                // a pcapng file all of whose packets are on interfaces owl cannot read
                if let (0, Some(linktype)) = (self.stats.frames, self.stats.unsupported_linktype) {
                    return Err(CaptureError::UnsupportedLinkType {
                        offset: self.first_unsupported_offset,
                        linktype,
                        name: linktype_name(linktype),
                    });
                }
                break;
            };
            let f = Frame {
                ts_ns: p.ts_ns,
                linktype: p.linktype,
                data: p.data,
                offset: p.offset,
            };
            record(
                &mut self.stats,
                &mut self.first_unsupported_offset,
                pcap,
                seed,
                limit,
                f,
                out,
            )?;
        }
        Ok(out.len())
    }
}

/// One frame as read.
struct Frame<'a> {
    ts_ns: u64,
    linktype: u32,
    data: &'a [u8],
    offset: u64,
}

/// Dissect and identify one frame into `out`, or count why not (a link type owl cannot read
/// is an error in a pcap file, and a counted skip on one pcapng interface).
fn record(
    stats: &mut InputStats,
    first_unsupported_offset: &mut u64,
    pcap: bool,
    seed: u64,
    identity_bytes: Option<u32>,
    f: Frame<'_>,
    out: &mut Vec<PacketRecord>,
) -> Result<(), CaptureError> {
    let data = match stats.identified_within {
        Some(n) if f.data.len() > n as usize => {
            stats.cut_to_common += 1;
            &f.data[..n as usize]
        }
        _ => f.data,
    };
    let d = match dissect(f.linktype, data) {
        Ok(d) => d,
        Err(Skip::UnsupportedLinkType) if pcap => {
            return Err(CaptureError::UnsupportedLinkType {
                offset: f.offset,
                linktype: f.linktype,
                name: linktype_name(f.linktype),
            });
        }
        Err(Skip::UnsupportedLinkType) => {
            stats.unsupported_link += 1;
            if stats.unsupported_linktype.is_none() {
                stats.unsupported_linktype = Some(f.linktype);
                *first_unsupported_offset = f.offset;
            }
            return Ok(());
        }
        Err(Skip::NotIp) => {
            stats.frames += 1;
            stats.non_ip += 1;
            return Ok(());
        }
        Err(Skip::Malformed(_)) => {
            stats.frames += 1;
            stats.malformed += 1;
            return Ok(());
        }
    };
    stats.frames += 1;
    stats.longest_frame = stats
        .longest_frame
        .max(u32::try_from(f.data.len()).unwrap_or(u32::MAX));
    let captured = (d.ip_end - d.ip_offset) as u64;
    let wanted = u64::from(d.ip_len).min(identity_bytes.map_or(u64::MAX, u64::from));
    if captured < wanted {
        stats.identity_short += 1;
    }
    let id = frame_identity_within(data, &d, seed, identity_bytes);
    stats.ip_packets += 1;
    stats.first_ns.get_or_insert(f.ts_ns);
    stats.last_ns = Some(f.ts_ns);
    out.push(PacketRecord {
        ts_ns: f.ts_ns,
        id,
        flow: d.flow,
        len: d.ip_len,
    });
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
    extract_with(
        src,
        dst,
        &ReadOptions::with_seed(identity_seed),
        within,
        ids,
    )
}

/// [`extract`] with the identity and interface of `options`, which must be those the
/// identities in `ids` were computed with.
pub fn extract_with(
    src: &Path,
    dst: &Path,
    options: &ReadOptions,
    within: Option<u32>,
    ids: &hashbrown::HashSet<u64>,
) -> Result<Extracted, CaptureError> {
    use crate::capture::{CaptureFormat, CaptureWriter};
    let mut r = CaptureReader::open(src)?;
    r.select_interface(options.interface)?;
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
        let id = frame_identity_within(cut, &d, options.identity_seed, options.identity_bytes);
        if !ids.contains(&id) {
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
