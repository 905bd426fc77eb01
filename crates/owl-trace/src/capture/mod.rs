//! Capture files: reading pcap and pcapng (plain, gzip or zstd compressed), writing both.
//!
//! The reader streams: it holds one buffer (1 MiB, grown only for a block larger than that,
//! never beyond [`MAX_BLOCK`]) whatever the number of packets, and hands out zero-copy
//! [`RawPacket`]s borrowed from it. Every error names the byte offset in the file where it was
//! found (in the decompressed stream, for a compressed capture), so a user can look at the file
//! with `xxd -s OFFSET`.
//!
//! Supported, checked against libpcap (`sf-pcap.c`, `sf-pcapng.c`) so that owl reads what
//! tcpdump reads and refuses what it refuses:
//! - pcap 2.0–2.4 with microsecond and nanosecond magic in both byte orders (caplen and len
//!   swapped before 2.3, and when they look swapped in 2.3, as libpcap does), and Kuznetzov's
//!   modified pcap (magic `0xa1b2cd34`, microseconds, 24-byte record headers whose last 8
//!   bytes are skipped; an Ethernet capture's snaplen grows by 14, as libpcap's does). The link-type
//!   field's upper bits (pcap-savefile(5)): the link type is its low 16 bits; with the P bit
//!   set, the FCS length in 16-bit words (bits 28–31) is stripped from every frame
//!   ([`ReaderStats::fcs_stripped`]); non-zero reserved bits are refused. A record whose
//!   fraction of a second is not below 10⁶ µs (10⁹ ns) has no valid time (tcpdump prints it
//!   as invalid): it is counted in [`ReaderStats::bad_timestamp`] and left out. A record
//!   longer than any snaplen allows ends the file ([`CaptureError::BadRecordLength`], a kind
//!   of truncation): tcpdump prints the packets before it, then the error.
//! - pcapng 1.0 and 1.2 with any number of sections (each with its own byte order) and
//!   interfaces, `if_tsresol` (decimal and binary) and `if_tsoffset`, Enhanced Packet Blocks,
//!   obsolete Packet Blocks, and Simple Packet Blocks (which carry no timestamp: they are
//!   counted in [`ReaderStats::no_timestamp`] and skipped, since a packet without a time cannot
//!   be measured). Other pcapng blocks are skipped. Interfaces are numbered across sections in
//!   file order; [`CaptureReader::select_interface`] keeps one and counts the others' packets.
//! - gzip and zstd compression of either, found by magic number ([`compressed`]).

mod bytes;
pub mod compressed;
mod pcap;
mod pcapng;
mod writer;

use std::fs::File;
use std::io::Read;
use std::path::Path;

use thiserror::Error;

pub use compressed::Compression;
pub use writer::{CaptureFormat, CaptureWriter};

use bytes::ByteSource;
use compressed::Input;

/// Largest pcapng block or pcap record owl accepts (a corrupt length field must not make it
/// allocate gigabytes).
pub const MAX_BLOCK: usize = 64 << 20;
/// Largest captured length of one packet owl accepts when the file's snaplen is smaller
/// (libpcap's own limit).
pub const MAX_SNAPLEN: u32 = 262_144;

/// Why a capture cannot be read.
#[derive(Debug, Error)]
pub enum CaptureError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("empty file: no pcap or pcapng header")]
    Empty,
    #[error("not a pcap or pcapng capture ({0})")]
    NotACapture(String),
    #[error(
        "offset {offset}: truncated {what}: needs {needed} bytes but the file ends after {available}"
    )]
    Truncated {
        offset: u64,
        what: &'static str,
        needed: u64,
        available: u64,
    },
    #[error(
        "offset {offset} of the decompressed capture: the {compression} stream ends early (the compressed file is truncated)"
    )]
    TruncatedStream {
        offset: u64,
        compression: &'static str,
    },
    #[error("offset {offset}: {what}")]
    Corrupt { offset: u64, what: String },
    /// The two points keep different IP bytes of a long packet, and the fewer are too few to
    /// tell packets apart ([`crate::identity::MIN_IDENTITY_BYTES`]).
    #[error(
        "its snaplen {snaplen} ({linktype}, a link header of up to {header} bytes) keeps at most {kept} IP bytes of a packet, fewer than the other capture, and too few to tell packets apart (at least {min}): capture this point with a larger snaplen (tcpdump -s 0), or pass --identity-bytes N (at least {min}) if its link headers are shorter"
    )]
    TooFewIdentityBytes {
        snaplen: u32,
        linktype: &'static str,
        header: u32,
        kept: u32,
        min: u32,
    },
    /// A pcap record whose captured length no snaplen allows: a damaged length field, after
    /// which no record can be found (libpcap stops there too). The records before it are
    /// intact, so it ends the capture early like a truncation ([`CaptureError::is_truncation`]).
    #[error(
        "offset {offset}: corrupt pcap record: it claims {caplen} captured bytes, more than the snaplen {snaplen} allows; the file cannot be read past it"
    )]
    BadRecordLength {
        offset: u64,
        caplen: u32,
        snaplen: u32,
    },
    #[error(
        "offset {offset}: unsupported link type {linktype} ({name}); owl reads Ethernet, Linux SLL/SLL2, raw IP, BSD loopback, PPP, Cisco HDLC, NFLOG, IPoIB, MPLS, PKTAP and 802.11 (bare or radiotap)"
    )]
    UnsupportedLinkType {
        offset: u64,
        linktype: u32,
        name: &'static str,
    },
    #[error("no interface {wanted}: the capture describes {count} (numbered from 0)")]
    NoSuchInterface { wanted: u32, count: u32 },
    /// A pcapng file whose packets come from interfaces of different kinds (link type or
    /// snaplen): measured together they would mix packets identified on different bytes.
    /// (Timestamp resolutions may differ: each packet is timed at its own interface's.)
    #[error(
        "offset {offset}: interface {other} ({other_kind}) is not like interface {first} ({first_kind}), whose packets are measured: owl measures the interfaces of one capture together only when they are alike; select one"
    )]
    MixedInterfaces {
        offset: u64,
        first: u32,
        first_kind: String,
        other: u32,
        other_kind: String,
    },
}

impl CaptureError {
    /// The file offset the error refers to, if any.
    pub fn offset(&self) -> Option<u64> {
        match self {
            CaptureError::Truncated { offset, .. }
            | CaptureError::TruncatedStream { offset, .. }
            | CaptureError::Corrupt { offset, .. }
            | CaptureError::BadRecordLength { offset, .. }
            | CaptureError::UnsupportedLinkType { offset, .. }
            | CaptureError::MixedInterfaces { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// True for a capture that ends early with everything before it intact: one that simply
    /// ends inside a record (the usual result of killing a capture process, compressed or
    /// not), or a pcap whose next record's length field is damaged
    /// ([`CaptureError::BadRecordLength`]: nothing after it can be read).
    pub fn is_truncation(&self) -> bool {
        matches!(
            self,
            CaptureError::Truncated { .. }
                | CaptureError::TruncatedStream { .. }
                | CaptureError::BadRecordLength { .. }
        )
    }

    pub(crate) fn corrupt(offset: u64, what: impl Into<String>) -> CaptureError {
        CaptureError::Corrupt {
            offset,
            what: what.into(),
        }
    }
}

/// One captured frame, borrowed from the reader's buffer.
#[derive(Clone, Copy, Debug)]
pub struct RawPacket<'a> {
    /// Capture timestamp, ns since the epoch.
    pub ts_ns: u64,
    /// LINKTYPE_* value of the frame's interface (the low 16 bits of a pcap header's field).
    pub linktype: u32,
    /// Captured bytes (at most the snaplen), without the FCS when the file says one is there.
    pub data: &'a [u8],
    /// Length of the frame on the wire (without the FCS when it was stripped).
    pub orig_len: u32,
    /// Offset of the record (pcap) or block (pcapng) in the (decompressed) file.
    pub offset: u64,
    /// Interface the frame was captured on: 0 for pcap, the interface's number in file order
    /// (across sections) for pcapng.
    pub interface: u32,
}

/// What the reader saw besides packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReaderStats {
    /// Packet records returned.
    pub packets: u64,
    /// pcapng Simple Packet Blocks skipped for lack of a timestamp.
    pub no_timestamp: u64,
    /// Other pcapng blocks skipped (statistics, name resolution, custom, …).
    pub other_blocks: u64,
    /// pcap records left out because their timestamp is invalid (fraction of a second ≥ 1 s).
    pub bad_timestamp: u64,
    /// Packets returned with their FCS removed (the pcap header announced its length).
    pub fcs_stripped: u64,
    /// Packets left out because they were captured on an interface other than the selected one.
    pub other_interface: u64,
}

/// Which container a capture uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    Pcap {
        nanosecond: bool,
        big_endian: bool,
        /// Kuznetzov's modified pcap (magic `0xa1b2cd34`): 8 more bytes per record header.
        modified: bool,
    },
    Pcapng,
}

/// An interface of a capture: the only one of a pcap file, one IDB of a pcapng file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct InterfaceInfo {
    pub linktype: u32,
    /// Largest captured length the capture allows (the header's snaplen; 0 means unlimited).
    pub snaplen: u32,
}

enum Inner {
    Pcap(pcap::PcapState),
    Pcapng(pcapng::PcapngState),
}

/// Streaming reader of pcap and pcapng captures, plain or compressed (format and compression
/// detected from the first bytes).
pub struct CaptureReader<R: Read> {
    src: ByteSource<Input<R>>,
    compression: Compression,
    inner: Inner,
    stats: ReaderStats,
    /// Keep only this interface's packets.
    selected: Option<u32>,
}

impl CaptureReader<File> {
    /// Open a capture file.
    pub fn open(path: &Path) -> Result<CaptureReader<File>, CaptureError> {
        CaptureReader::new(File::open(path)?)
    }
}

impl<R: Read> CaptureReader<R> {
    /// Start reading a capture from any byte stream.
    pub fn new(reader: R) -> Result<CaptureReader<R>, CaptureError> {
        let (input, compression) = Input::new(reader)?;
        let mut src = ByteSource::new(input);
        let have = src.ensure(4)?;
        if have < 4 && src.inner().truncated {
            end_of_input(&src)?;
        }
        if have == 0 {
            return match compression {
                Compression::None => Err(CaptureError::Empty),
                c => Err(CaptureError::NotACapture(format!(
                    "the {} data decompresses to nothing",
                    c.name()
                ))),
            };
        }
        let inside = match compression {
            Compression::None => String::new(),
            c => format!("the decompressed {} data ", c.name()),
        };
        if let Some(what) = compressed::unsupported_compression(src.peek()) {
            return Err(CaptureError::NotACapture(format!(
                "{inside}is compressed with {what}"
            )));
        }
        if have < 4 {
            return Err(CaptureError::NotACapture(format!(
                "{inside}starts with {}",
                hex_prefix(src.peek())
            )));
        }
        let magic: [u8; 4] = [src.peek()[0], src.peek()[1], src.peek()[2], src.peek()[3]];
        let inner = if magic == pcapng::SHB_TYPE.to_le_bytes() {
            Inner::Pcapng(pcapng::PcapngState::start(&mut src)?)
        } else if let Some(p) = pcap::PcapState::start(&mut src, magic)? {
            Inner::Pcap(p)
        } else {
            return Err(CaptureError::NotACapture(format!(
                "{inside}starts with {}",
                hex_prefix(&magic)
            )));
        };
        Ok(CaptureReader {
            src,
            compression,
            inner,
            stats: ReaderStats::default(),
            selected: None,
        })
    }

    pub fn container(&self) -> Container {
        match &self.inner {
            Inner::Pcap(p) => Container::Pcap {
                nanosecond: p.nanosecond,
                big_endian: p.endian.big,
                modified: p.modified,
            },
            Inner::Pcapng(_) => Container::Pcapng,
        }
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Keep only the packets of interface `n` (numbered from 0 in file order across pcapng
    /// sections; a pcap file has only interface 0); the others are counted in
    /// [`ReaderStats::other_interface`]. A capture that never describes interface `n` ends in
    /// [`CaptureError::NoSuchInterface`].
    pub fn select_interface(&mut self, n: Option<u32>) -> Result<(), CaptureError> {
        if let (Some(n), Inner::Pcap(_)) = (n, &self.inner)
            && n != 0
        {
            return Err(CaptureError::NoSuchInterface {
                wanted: n,
                count: 1,
            });
        }
        self.selected = n;
        Ok(())
    }

    /// The interfaces described so far, in file order (a pcapng file may describe more later).
    pub fn interfaces(&self) -> Vec<InterfaceInfo> {
        match &self.inner {
            Inner::Pcap(p) => vec![p.interface()],
            Inner::Pcapng(p) => p.interfaces(),
        }
    }

    /// Interface `n`'s timestamp resolution as `(binary, exponent)`: units of 2^-e seconds
    /// when binary, else 10^-e (a pcap file: microseconds or nanoseconds); `None` for an
    /// interface not described (yet).
    pub fn resolution(&self, n: u32) -> Option<(bool, u8)> {
        match &self.inner {
            Inner::Pcap(p) => (n == 0).then_some((false, if p.nanosecond { 9 } else { 6 })),
            Inner::Pcapng(p) => p.resolution(n),
        }
    }

    /// The most bytes of a frame the capture keeps: the pcap header's snaplen, or the smallest
    /// of the pcapng interfaces read so far (read a packet first). `None` for no limit.
    pub fn snaplen(&self) -> Option<u32> {
        match &self.inner {
            Inner::Pcap(p) => p.snaplen(),
            Inner::Pcapng(p) => p.snaplen(),
        }
    }

    /// Bytes taken from the input so far (compressed bytes for a compressed capture), to set
    /// against the file size for progress.
    pub fn bytes_read(&self) -> u64 {
        match self.compression {
            Compression::None => self.src.offset(),
            _ => self.src.inner().raw_bytes(),
        }
    }

    pub fn stats(&self) -> ReaderStats {
        self.stats
    }

    /// The next packet, `Ok(None)` at the end of the capture.
    pub fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, CaptureError> {
        let r = match &mut self.inner {
            Inner::Pcap(p) => p.next(&mut self.src, &mut self.stats)?,
            Inner::Pcapng(p) => p.next(&mut self.src, &mut self.stats, self.selected)?,
        };
        if r.is_some() {
            self.stats.packets += 1;
        }
        Ok(r)
    }
}

/// A record or block that the end of the input cuts: the compressed stream's truncation when
/// that is why the input ended.
pub(crate) fn cut<R: Read>(
    src: &ByteSource<Input<R>>,
    offset: u64,
    what: &'static str,
    needed: u64,
    have: usize,
) -> CaptureError {
    let input = src.inner();
    if input.truncated {
        return CaptureError::TruncatedStream {
            offset,
            compression: input.compression().name(),
        };
    }
    CaptureError::Truncated {
        offset,
        what,
        needed,
        available: have as u64,
    }
}

/// At the end of the input: a cut compressed stream is an error (the container parsers call
/// this where they find the end between two records).
pub(crate) fn end_of_input<R: Read>(src: &ByteSource<Input<R>>) -> Result<(), CaptureError> {
    let input = src.inner();
    if input.truncated {
        return Err(CaptureError::TruncatedStream {
            offset: src.offset(),
            compression: input.compression().name(),
        });
    }
    Ok(())
}

fn hex_prefix(b: &[u8]) -> String {
    let mut s: String = b.iter().take(8).map(|x| format!("{x:02x}")).collect();
    if s.is_empty() {
        s.push_str("nothing");
    } else {
        s.insert_str(0, "0x");
    }
    s
}

/// Endianness of a capture's integer fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Endian {
    pub big: bool,
}

impl Endian {
    #[inline]
    pub fn u16(self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        if self.big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        }
    }
    #[inline]
    pub fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        if self.big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    }
    #[inline]
    pub fn u64(self, b: &[u8]) -> u64 {
        let a: [u8; 8] = b[..8].try_into().unwrap();
        if self.big {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        }
    }
}

#[cfg(test)]
mod tests;
