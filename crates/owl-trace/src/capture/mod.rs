//! Capture files: reading pcap and pcapng, writing both.
//!
//! The reader streams: it holds one buffer (1 MiB, grown only for a block larger than that,
//! never beyond [`MAX_BLOCK`]) whatever the number of packets, and hands out zero-copy
//! [`RawPacket`]s borrowed from it. Every error names the byte offset in the file where it was
//! found, so a user can look at the file with `xxd -s OFFSET`.
//!
//! Supported: pcap with microsecond and nanosecond magic in both byte orders; pcapng with any
//! number of sections (each with its own byte order) and interfaces, `if_tsresol` (decimal and
//! binary) and `if_tsoffset`, Enhanced Packet Blocks, obsolete Packet Blocks, and Simple Packet
//! Blocks (which carry no timestamp: they are counted in [`ReaderStats::no_timestamp`] and
//! skipped, since a packet without a time cannot be measured). Other pcapng blocks are skipped.

mod bytes;
mod pcap;
mod pcapng;
mod writer;

use std::fs::File;
use std::io::Read;
use std::path::Path;

use thiserror::Error;

pub use writer::{CaptureFormat, CaptureWriter};

use bytes::ByteSource;

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
    #[error("not a pcap or pcapng capture (starts with {0})")]
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
    #[error("offset {offset}: {what}")]
    Corrupt { offset: u64, what: String },
    #[error(
        "offset {offset}: unsupported link type {linktype} ({name}); owl reads Ethernet, Linux SLL/SLL2, raw IPv4/IPv6 and BSD loopback"
    )]
    UnsupportedLinkType {
        offset: u64,
        linktype: u32,
        name: &'static str,
    },
}

impl CaptureError {
    /// The file offset the error refers to, if any.
    pub fn offset(&self) -> Option<u64> {
        match self {
            CaptureError::Truncated { offset, .. }
            | CaptureError::Corrupt { offset, .. }
            | CaptureError::UnsupportedLinkType { offset, .. } => Some(*offset),
            _ => None,
        }
    }

    /// True for a capture that simply ends inside a record (the usual result of killing a
    /// capture process); everything before it is intact.
    pub fn is_truncation(&self) -> bool {
        matches!(self, CaptureError::Truncated { .. })
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
    /// LINKTYPE_* value of the frame's interface.
    pub linktype: u32,
    /// Captured bytes (at most the snaplen).
    pub data: &'a [u8],
    /// Length of the frame on the wire.
    pub orig_len: u32,
    /// Offset of the record (pcap) or block (pcapng) in the file.
    pub offset: u64,
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
}

/// Which container a capture uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    Pcap { nanosecond: bool, big_endian: bool },
    Pcapng,
}

enum Inner {
    Pcap(pcap::PcapState),
    Pcapng(pcapng::PcapngState),
}

/// Streaming reader of pcap and pcapng captures (format detected from the first bytes).
pub struct CaptureReader<R: Read> {
    src: ByteSource<R>,
    inner: Inner,
    stats: ReaderStats,
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
        let mut src = ByteSource::new(reader);
        let have = src.ensure(4)?;
        if have == 0 {
            return Err(CaptureError::Empty);
        }
        if have < 4 {
            return Err(CaptureError::NotACapture(hex_prefix(src.peek())));
        }
        let magic: [u8; 4] = src.peek()[..4].try_into().unwrap();
        let inner = if magic == pcapng::SHB_TYPE.to_le_bytes() {
            Inner::Pcapng(pcapng::PcapngState::start(&mut src)?)
        } else if let Some(p) = pcap::PcapState::start(&mut src, magic)? {
            Inner::Pcap(p)
        } else {
            return Err(CaptureError::NotACapture(hex_prefix(&magic)));
        };
        Ok(CaptureReader {
            src,
            inner,
            stats: ReaderStats::default(),
        })
    }

    pub fn container(&self) -> Container {
        match &self.inner {
            Inner::Pcap(p) => Container::Pcap {
                nanosecond: p.nanosecond,
                big_endian: p.endian.big,
            },
            Inner::Pcapng(_) => Container::Pcapng,
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

    /// Bytes consumed so far (for progress).
    pub fn bytes_read(&self) -> u64 {
        self.src.offset()
    }

    pub fn stats(&self) -> ReaderStats {
        self.stats
    }

    /// The next packet, `Ok(None)` at the end of the capture.
    pub fn next_packet(&mut self) -> Result<Option<RawPacket<'_>>, CaptureError> {
        let r = match &mut self.inner {
            Inner::Pcap(p) => p.next(&mut self.src, &mut self.stats)?,
            Inner::Pcapng(p) => p.next(&mut self.src, &mut self.stats)?,
        };
        if r.is_some() {
            self.stats.packets += 1;
        }
        Ok(r)
    }
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
