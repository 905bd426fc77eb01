//! Captures to packet records: read, dissect, identify, in batches.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use owl_core::PacketRecord;
use serde::Serialize;

use crate::capture::{CaptureError, CaptureReader, Container, InterfaceInfo, ReaderStats};
use crate::dissect::{Skip, dissect, linktype_name, supports_linktype};
use crate::identity::frame_identity_within;

/// Counts of what a capture held besides measurable packets.
///
/// `frames = ip_packets + non_ip + malformed`: every packet record of the interfaces measured.
/// Records skipped before dissection (no timestamp, another interface, a link type owl cannot
/// read) are counted apart. A pcapng file's interfaces are measured together only when they
/// are alike (link type and snaplen; each packet's timestamp is read at its own interface's
/// resolution and offset, as libpcap does, so resolutions may differ); packets from an
/// interface unlike the
/// first one measured are [`CaptureError::MixedInterfaces`] unless one is selected
/// ([`ReadOptions::interface`]).
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
    /// Identities covered at most this many bytes of each IP packet (the identity byte limit,
    /// [`ReadOptions::identity_bytes`]); `None`: every captured byte.
    pub identity_bytes: Option<u32>,
    /// Of `ip_packets`: packets longer than `identity_bytes`, identified on their first
    /// `identity_bytes` bytes.
    pub identity_cut: u64,
    /// First and last record timestamps, ns.
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    /// The snaplen of the interface measured (see [`CaptureReader::snaplen`]); `None` for no
    /// limit.
    pub snaplen: Option<u32>,
    /// The link type of the interface measured.
    pub linktype: Option<u32>,
    /// Interfaces whose packets were measured (more than one: alike interfaces of a pcapng
    /// file, measured as one stream).
    pub interfaces: u32,
    /// Largest captured length of a frame, bytes.
    pub longest_frame: u32,
}

/// A packet read ahead (to learn the snaplen of a pcapng interface) and not yet turned into a
/// record.
struct Held {
    ts_ns: u64,
    linktype: u32,
    data: Vec<u8>,
    offset: u64,
}

impl Held {
    fn of(p: &crate::capture::RawPacket<'_>) -> Held {
        Held {
            ts_ns: p.ts_ns,
            linktype: p.linktype,
            data: p.data.to_vec(),
            offset: p.offset,
        }
    }

    fn frame(&self) -> Frame<'_> {
        Frame {
            ts_ns: self.ts_ns,
            linktype: self.linktype,
            data: &self.data,
            offset: self.offset,
        }
    }
}

/// What makes two interfaces' packets one stream: the link type and snaplen, which decide the
/// bytes a packet is identified on. Timestamp resolutions may differ: the reader gives every
/// packet's time in ns at its own interface's resolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Kind {
    info: InterfaceInfo,
}

impl Kind {
    fn of<R: Read>(r: &CaptureReader<R>, n: u32, linktype: u32) -> Kind {
        Kind {
            info: r
                .interfaces()
                .get(n as usize)
                .copied()
                .unwrap_or(InterfaceInfo {
                    linktype,
                    snaplen: 0,
                }),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, ", linktype_name(self.info.linktype))?;
        match self.info.snaplen {
            0 => write!(f, "no snaplen"),
            n => write!(f, "snaplen {n}"),
        }
    }
}

/// The interfaces whose packets are measured: the first one owl can read, and those alike.
#[derive(Default)]
struct Measured {
    first: Option<(u32, Kind)>,
    alike: Vec<u32>,
    /// Interface of the last packet measured (packets mostly follow one from the same).
    last: Option<u32>,
}

impl Measured {
    /// Is interface `n` not measured yet (its kind still to be checked)?
    fn is_new(&mut self, n: u32) -> bool {
        if self.last == Some(n) {
            return false;
        }
        if self.first.is_some_and(|(f, _)| f == n) || self.alike.contains(&n) {
            self.last = Some(n);
            return false;
        }
        true
    }

    /// Measure interface `n` too, if it is like the first one.
    fn admit<R: Read>(
        &mut self,
        r: &CaptureReader<R>,
        n: u32,
        linktype: u32,
        offset: u64,
    ) -> Result<(), CaptureError> {
        let kind = Kind::of(r, n, linktype);
        match self.first {
            None => self.first = Some((n, kind)),
            Some((_, k)) if k == kind => self.alike.push(n),
            Some((f, k)) => {
                return Err(CaptureError::MixedInterfaces {
                    offset,
                    first: f,
                    first_kind: k.to_string(),
                    other: n,
                    other_kind: kind.to_string(),
                });
            }
        }
        self.last = Some(n);
        Ok(())
    }
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
    /// Keep only this pcapng interface's packets (see [`CaptureReader::select_interface`]);
    /// `None`: every interface owl can read, provided they are alike.
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
    measured: Measured,
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
            measured: Measured::default(),
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
            snaplen: match self.measured.first {
                Some((_, k)) => (k.info.snaplen != 0).then_some(k.info.snaplen),
                None => self.reader.snaplen(),
            },
            linktype: self.measured.first.map(|(_, k)| k.info.linktype),
            interfaces: self
                .measured
                .first
                .map_or(0, |_| 1 + self.measured.alike.len() as u32),
            identity_bytes: self.identity_bytes,
            ..self.stats
        }
    }

    /// Read ahead to the first packet of a link type owl reads (it stays first in line for
    /// [`next_batch`](Self::next_batch)) and return its interface: link type and snaplen, what
    /// two points must know of each other to agree on the bytes identities cover
    /// ([`crate::identity::common_identity_bytes`]). `None` for a capture without packets.
    pub fn first_interface(&mut self) -> Result<Option<InterfaceInfo>, CaptureError> {
        if self.held.is_none() && self.stats.frames == 0 {
            let pcap = matches!(self.reader.container(), Container::Pcap { .. });
            while let Some(p) = self.reader.next_packet()? {
                let (n, linktype, offset) = (p.interface, p.linktype, p.offset);
                let h = Held::of(&p);
                if !supports_linktype(linktype) && !pcap {
                    // counted as on an interface owl cannot read
                    record(
                        &mut self.stats,
                        &mut self.first_unsupported_offset,
                        pcap,
                        self.seed,
                        self.identity_bytes,
                        h.frame(),
                        &mut Vec::new(),
                    )?;
                    continue;
                }
                if supports_linktype(linktype) && self.measured.is_new(n) {
                    self.measured.admit(&self.reader, n, linktype, offset)?;
                }
                self.held = Some(h);
                break;
            }
        }
        Ok(self.measured.first.map(|(_, k)| k.info))
    }

    /// Identify every packet on at most its first `bytes` IP bytes from now on (`None`: every
    /// captured byte): two points agree on it before their first packet
    /// ([`ReadOptions::identity_bytes`] when it is known beforehand).
    pub fn set_identity_bytes(&mut self, bytes: Option<u32>) {
        self.identity_bytes = bytes;
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
            record(
                &mut self.stats,
                &mut self.first_unsupported_offset,
                pcap,
                seed,
                limit,
                h.frame(),
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
            if supports_linktype(p.linktype) && self.measured.is_new(p.interface) {
                // an interface not measured yet: its kind decides (the frame is copied out of
                // the reader's buffer to ask the reader about it, once per interface)
                let (n, linktype, offset) = (p.interface, p.linktype, p.offset);
                let h = Held::of(&p);
                self.measured.admit(&self.reader, n, linktype, offset)?;
                record(
                    &mut self.stats,
                    &mut self.first_unsupported_offset,
                    pcap,
                    seed,
                    limit,
                    h.frame(),
                    out,
                )?;
                continue;
            }
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

/// Frames captured live, one at a time (no file), turned into records exactly as
/// [`RecordReader`] turns a capture's: the same dissection, identity and counts, so a live
/// point's synopses are the ones `owl record` makes from a capture of the same packets.
pub struct FrameRecords {
    stats: InputStats,
    seed: u64,
    identity_bytes: Option<u32>,
    first_unsupported_offset: u64,
}

impl FrameRecords {
    pub fn new(options: &ReadOptions) -> FrameRecords {
        FrameRecords {
            stats: InputStats::default(),
            seed: options.identity_seed,
            identity_bytes: options.identity_bytes,
            first_unsupported_offset: 0,
        }
    }

    /// Dissect and identify one frame of link type `linktype` captured at `ts_ns`, appending
    /// its record to `out` (or counting why not).
    pub fn push(&mut self, ts_ns: u64, linktype: u32, data: &[u8], out: &mut Vec<PacketRecord>) {
        let f = Frame {
            ts_ns,
            linktype,
            data,
            offset: self.stats.frames,
        };
        // only a pcap file's link type is an error; here it is a counted skip
        let _ = record(
            &mut self.stats,
            &mut self.first_unsupported_offset,
            false,
            self.seed,
            self.identity_bytes,
            f,
            out,
        );
    }

    pub fn stats(&self) -> InputStats {
        InputStats {
            identity_bytes: self.identity_bytes,
            ..self.stats
        }
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
    let data = f.data;
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
    if identity_bytes.is_some_and(|n| d.ip_len > n) {
        stats.identity_cut += 1;
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
