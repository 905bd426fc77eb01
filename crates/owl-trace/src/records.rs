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
        let pcap = matches!(self.reader.container(), Container::Pcap { .. });
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
            let d = match dissect(p.linktype, p.data) {
                Ok(d) => d,
                Err(Skip::UnsupportedLinkType) if pcap => {
                    return Err(CaptureError::UnsupportedLinkType {
                        offset: p.offset,
                        linktype: p.linktype,
                        name: linktype_name(p.linktype),
                    });
                }
                Err(Skip::UnsupportedLinkType) => {
                    self.stats.unsupported_link += 1;
                    if self.stats.unsupported_linktype.is_none() {
                        self.stats.unsupported_linktype = Some(p.linktype);
                        self.first_unsupported_offset = p.offset;
                    }
                    continue;
                }
                Err(Skip::NotIp) => {
                    self.stats.frames += 1;
                    self.stats.non_ip += 1;
                    continue;
                }
                Err(Skip::Malformed(_)) => {
                    self.stats.frames += 1;
                    self.stats.malformed += 1;
                    continue;
                }
            };
            self.stats.frames += 1;
            let captured = (d.ip_end - d.ip_offset) as u64;
            let wanted = u64::from(d.ip_len).min(self.identity_bytes.map_or(u64::MAX, u64::from));
            if captured < wanted {
                self.stats.identity_short += 1;
            }
            let id = frame_identity_within(p.data, &d, self.seed, self.identity_bytes);
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
    extract_with(src, dst, &ReadOptions::with_seed(identity_seed), ids)
}

/// [`extract`] with the identity and interface of `options`, which must be those the
/// identities in `ids` were computed with.
pub fn extract_with(
    src: &Path,
    dst: &Path,
    options: &ReadOptions,
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
        let Ok(d) = dissect(p.linktype, p.data) else {
            continue;
        };
        let id = frame_identity_within(p.data, &d, options.identity_seed, options.identity_bytes);
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
