//! Classic pcap (libpcap) files.

use std::io::Read;

use super::bytes::ByteSource;
use super::{CaptureError, Endian, MAX_BLOCK, MAX_SNAPLEN, RawPacket, ReaderStats};

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
const HEADER: usize = 24;
const RECORD: usize = 16;

pub(crate) struct PcapState {
    pub endian: Endian,
    pub nanosecond: bool,
    snaplen: u32,
    linktype: u32,
}

impl PcapState {
    /// Parse the global header if `magic` is a pcap magic; `Ok(None)` if it is not.
    pub fn start<R: Read>(
        src: &mut ByteSource<R>,
        magic: [u8; 4],
    ) -> Result<Option<PcapState>, CaptureError> {
        let le = u32::from_le_bytes(magic);
        let (big, nanosecond) = match le {
            MAGIC_US => (false, false),
            MAGIC_NS => (false, true),
            m if m.swap_bytes() == MAGIC_US => (true, false),
            m if m.swap_bytes() == MAGIC_NS => (true, true),
            _ => return Ok(None),
        };
        let have = src.ensure(HEADER)?;
        if have < HEADER {
            return Err(CaptureError::Truncated {
                offset: 0,
                what: "pcap file header",
                needed: HEADER as u64,
                available: have as u64,
            });
        }
        let e = Endian { big };
        let h = src.take(HEADER);
        let major = e.u16(&h[4..]);
        if major != 2 {
            return Err(CaptureError::corrupt(
                4,
                format!("pcap major version {major}, owl reads version 2"),
            ));
        }
        let snaplen = e.u32(&h[16..]);
        // Upper bits of the link-type field carry FCS information (pcap-savefile(5)).
        let linktype = e.u32(&h[20..]) & 0x0fff_ffff;
        Ok(Some(PcapState {
            endian: e,
            nanosecond,
            snaplen,
            linktype,
        }))
    }

    /// The snaplen of the file header (`None` for 0, which some writers use for "unlimited").
    pub fn snaplen(&self) -> Option<u32> {
        (self.snaplen != 0).then_some(self.snaplen)
    }

    pub fn next<'a, R: Read>(
        &mut self,
        src: &'a mut ByteSource<R>,
        _stats: &mut ReaderStats,
    ) -> Result<Option<RawPacket<'a>>, CaptureError> {
        let offset = src.offset();
        let have = src.ensure(RECORD)?;
        if have == 0 {
            return Ok(None);
        }
        if have < RECORD {
            return Err(CaptureError::Truncated {
                offset,
                what: "pcap record header",
                needed: RECORD as u64,
                available: have as u64,
            });
        }
        let e = self.endian;
        let h = &src.peek()[..RECORD];
        let sec = e.u32(h) as u64;
        let frac = e.u32(&h[4..]) as u64;
        let caplen = e.u32(&h[8..]);
        let orig_len = e.u32(&h[12..]);
        if caplen > self.snaplen.max(MAX_SNAPLEN) || caplen as usize > MAX_BLOCK - RECORD {
            return Err(CaptureError::corrupt(
                offset,
                format!(
                    "pcap record claims {caplen} captured bytes, more than the snaplen {} allows: corrupt file",
                    self.snaplen
                ),
            ));
        }
        let ts_ns = sec * 1_000_000_000 + if self.nanosecond { frac } else { frac * 1_000 };
        let total = RECORD + caplen as usize;
        let have = src.ensure(total)?;
        if have < total {
            return Err(CaptureError::Truncated {
                offset,
                what: "pcap record",
                needed: total as u64,
                available: have as u64,
            });
        }
        let rec = src.take(total);
        Ok(Some(RawPacket {
            ts_ns,
            linktype: self.linktype,
            data: &rec[RECORD..],
            orig_len,
            offset,
        }))
    }
}
