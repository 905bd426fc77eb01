//! Classic pcap (libpcap) files, read as libpcap's `sf-pcap.c` reads them.

use std::io::Read;

use super::bytes::ByteSource;
use super::compressed::Input;
use super::{
    CaptureError, Endian, InterfaceInfo, MAX_BLOCK, MAX_SNAPLEN, RawPacket, ReaderStats, cut,
    end_of_input,
};
use crate::dissect::LINKTYPE_ETHERNET;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Alexey Kuznetzov's modified pcap (libpcap's `KUZNETZOV_TCPDUMP_MAGIC`): microseconds, and
/// each record header 8 bytes longer ([`RECORD_MODIFIED`]).
const MAGIC_MODIFIED: u32 = 0xa1b2_cd34;
const HEADER: usize = 24;
const RECORD: usize = 16;
/// A modified pcap's record header: the usual 16 bytes, then the interface index (u32), the
/// protocol (u16), the packet type (u8) and a pad byte, which owl skips.
const RECORD_MODIFIED: usize = 24;

/// The link-type field of the file header (pcap-savefile(5), libpcap's `LT_*` macros): the link
/// type in bits 0–15, ten reserved bits, the P bit (26) saying the FCS length is present, a
/// reserved R bit (27) and the FCS length in 16-bit words (bits 28–31).
const LT_LINKTYPE: u32 = 0x0000_ffff;
const LT_RESERVED: u32 = 0x03ff_0000 | 0x0800_0000;
const LT_FCS_LENGTH_PRESENT: u32 = 0x0400_0000;
const LT_FCS_LENGTH_SHIFT: u32 = 28;

/// How the caplen and len fields of a record are ordered (they were interchanged in 2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lengths {
    Normal,
    Swapped,
    /// 2.3 files written both ways: swapped when caplen > len.
    MaybeSwapped,
}

pub(crate) struct PcapState {
    pub endian: Endian,
    pub nanosecond: bool,
    /// Kuznetzov's modified format ([`MAGIC_MODIFIED`]).
    pub modified: bool,
    /// Length of a record header: [`RECORD`], or [`RECORD_MODIFIED`].
    record: usize,
    snaplen: u32,
    linktype: u32,
    /// Bytes of FCS at the end of every frame.
    fcs_len: u32,
    lengths: Lengths,
}

impl PcapState {
    /// Parse the global header if `magic` is a pcap magic; `Ok(None)` if it is not.
    pub fn start<R: Read>(
        src: &mut ByteSource<Input<R>>,
        magic: [u8; 4],
    ) -> Result<Option<PcapState>, CaptureError> {
        let le = u32::from_le_bytes(magic);
        let (big, magic) = if [MAGIC_US, MAGIC_NS, MAGIC_MODIFIED].contains(&le) {
            (false, le)
        } else if [MAGIC_US, MAGIC_NS, MAGIC_MODIFIED].contains(&le.swap_bytes()) {
            (true, le.swap_bytes())
        } else {
            return Ok(None);
        };
        let (nanosecond, modified) = (magic == MAGIC_NS, magic == MAGIC_MODIFIED);
        let have = src.ensure(HEADER)?;
        if have < HEADER {
            return Err(cut(src, 0, "pcap file header", HEADER as u64, have));
        }
        let e = Endian { big };
        let h = src.take(HEADER);
        let (major, minor) = (e.u16(&h[4..]), e.u16(&h[6..]));
        // libpcap reads 2.0 to 2.4 (and DG/UX's 543.0, with pre-2.3 lengths)
        let lengths = match (major, minor) {
            (2, 0..=2) | (543, 0) => Lengths::Swapped,
            (2, 3) => Lengths::MaybeSwapped,
            (2, 4) => Lengths::Normal,
            _ => {
                return Err(CaptureError::corrupt(
                    4,
                    format!(
                        "pcap version {major}.{minor}; owl, like libpcap, reads versions 2.0 to 2.4"
                    ),
                ));
            }
        };
        let mut snaplen = e.u32(&h[16..]);
        let field = e.u32(&h[20..]);
        if field & LT_RESERVED != 0 {
            return Err(CaptureError::corrupt(
                20,
                format!(
                    "pcap link-type field 0x{field:08x} has reserved bits set (0x{:08x}): not a file libpcap writes",
                    field & LT_RESERVED
                ),
            ));
        }
        let fcs_len = if field & LT_FCS_LENGTH_PRESENT != 0 {
            2 * (field >> LT_FCS_LENGTH_SHIFT)
        } else {
            0
        };
        let linktype = field & LT_LINKTYPE;
        if modified && linktype == LINKTYPE_ETHERNET && snaplen != 0 {
            // as libpcap: a capture in cooked mode added a 14-byte Ethernet header to up to
            // snaplen bytes
            snaplen = snaplen.saturating_add(14);
        }
        Ok(Some(PcapState {
            endian: e,
            nanosecond,
            modified,
            record: if modified { RECORD_MODIFIED } else { RECORD },
            snaplen,
            linktype,
            fcs_len,
            lengths,
        }))
    }

    pub fn interface(&self) -> InterfaceInfo {
        InterfaceInfo {
            linktype: self.linktype,
            snaplen: self.snaplen,
        }
    }

    /// The snaplen of the file header (`None` for 0, which some writers use for "unlimited").
    pub fn snaplen(&self) -> Option<u32> {
        (self.snaplen != 0).then_some(self.snaplen)
    }

    pub fn next<'a, R: Read>(
        &mut self,
        src: &'a mut ByteSource<Input<R>>,
        stats: &mut ReaderStats,
    ) -> Result<Option<RawPacket<'a>>, CaptureError> {
        let record = self.record;
        loop {
            let offset = src.offset();
            let have = src.ensure(record)?;
            if have == 0 {
                end_of_input(src)?;
                return Ok(None);
            }
            if have < record {
                return Err(cut(src, offset, "pcap record header", record as u64, have));
            }
            let e = self.endian;
            let h = &src.peek()[..record];
            let sec = e.u32(h) as u64;
            let frac = e.u32(&h[4..]) as u64;
            let (mut caplen, mut orig_len) = (e.u32(&h[8..]), e.u32(&h[12..]));
            if self.lengths == Lengths::Swapped
                || (self.lengths == Lengths::MaybeSwapped && caplen > orig_len)
            {
                (caplen, orig_len) = (orig_len, caplen);
            }
            if caplen > self.snaplen.max(MAX_SNAPLEN) || caplen as usize > MAX_BLOCK - record {
                // libpcap stops here too: the records after it cannot be found
                return Err(CaptureError::BadRecordLength {
                    offset,
                    caplen,
                    snaplen: self.snaplen,
                });
            }
            let total = record + caplen as usize;
            let have = src.ensure(total)?;
            if have < total {
                return Err(cut(src, offset, "pcap record", total as u64, have));
            }
            let unit = if self.nanosecond { 1 } else { 1_000 };
            if frac * unit >= 1_000_000_000 {
                // tcpdump prints such a time as invalid; carried on, it would be up to 4295 s off
                let _ = src.take(total);
                stats.bad_timestamp += 1;
                continue;
            }
            let ts_ns = sec * 1_000_000_000 + frac * unit;
            let rec = src.take(total);
            let mut data = &rec[record..];
            if self.fcs_len > 0 {
                // the FCS is the last fcs_len bytes of the frame on the wire; keep what was
                // captured before it
                let keep = (orig_len.saturating_sub(self.fcs_len) as usize).min(data.len());
                if keep < data.len() {
                    stats.fcs_stripped += 1;
                }
                data = &data[..keep];
                orig_len = orig_len.saturating_sub(self.fcs_len);
            }
            return Ok(Some(RawPacket {
                ts_ns,
                linktype: self.linktype,
                data,
                orig_len,
                offset,
                interface: 0,
            }));
        }
    }
}
