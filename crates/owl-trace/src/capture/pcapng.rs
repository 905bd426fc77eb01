//! pcapng files (draft-ietf-opsawg-pcapng): sections, interfaces, EPB, PB and SPB.

use std::io::Read;

use super::bytes::ByteSource;
use super::compressed::Input;
use super::{
    CaptureError, Endian, InterfaceInfo, MAX_BLOCK, RawPacket, ReaderStats, cut, end_of_input,
};

pub(crate) const SHB_TYPE: u32 = 0x0a0d_0d0a;
const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;
const IDB_TYPE: u32 = 1;
const PB_TYPE: u32 = 2;
const SPB_TYPE: u32 = 3;
const EPB_TYPE: u32 = 6;

/// Most interfaces owl keeps track of in one file (each costs a few bytes; a hostile file must
/// not grow that list without end).
pub const MAX_INTERFACES: usize = 1 << 16;

const OPT_END: u16 = 0;
const OPT_IF_NAME: u16 = 2;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_IF_TSOFFSET: u16 = 14;

#[derive(Clone, Debug)]
struct Interface {
    linktype: u32,
    snaplen: u32,
    /// Timestamp resolution: `(binary, exponent)`: units of 10^-e or 2^-e seconds.
    resol: (bool, u8),
    offset_s: i64,
    /// `if_name`, for messages.
    name: Option<String>,
}

pub(crate) struct PcapngState {
    endian: Endian,
    /// This section's interfaces.
    interfaces: Vec<Interface>,
    /// Interfaces described by the sections before this one: interface `i` of this section is
    /// number `base + i` of the file.
    base: u32,
    /// Every interface of the file so far, in file order, with its timestamp resolution.
    all: Vec<InterfaceInfo>,
    all_resol: Vec<(bool, u8)>,
}

impl PcapngState {
    pub fn start<R: Read>(src: &mut ByteSource<Input<R>>) -> Result<PcapngState, CaptureError> {
        let mut st = PcapngState {
            endian: Endian { big: false },
            interfaces: Vec::new(),
            base: 0,
            all: Vec::new(),
            all_resol: Vec::new(),
        };
        st.section_header(src)?;
        Ok(st)
    }

    pub fn interfaces(&self) -> Vec<InterfaceInfo> {
        self.all.clone()
    }

    /// Interface `n`'s timestamp resolution: `(binary, exponent)`, units of 2^-e or 10^-e s.
    pub fn resolution(&self, n: u32) -> Option<(bool, u8)> {
        self.all_resol.get(n as usize).copied()
    }

    /// Read a Section Header Block at the current offset.
    fn section_header<R: Read>(
        &mut self,
        src: &mut ByteSource<Input<R>>,
    ) -> Result<(), CaptureError> {
        let offset = src.offset();
        let have = src.ensure(12)?;
        if have < 12 {
            return Err(cut(src, offset, "pcapng section header", 12, have));
        }
        let p = src.peek();
        let bom = u32::from_le_bytes(p[8..12].try_into().unwrap());
        let big = match bom {
            BYTE_ORDER_MAGIC => false,
            m if m.swap_bytes() == BYTE_ORDER_MAGIC => true,
            _ => {
                return Err(CaptureError::corrupt(
                    offset + 8,
                    format!("pcapng section header has no byte-order magic (0x{bom:08x})"),
                ));
            }
        };
        self.endian = Endian { big };
        self.base = self.all.len() as u32;
        self.interfaces.clear();
        let body = self.block(src, "pcapng section header")?;
        if body.len() < 16 {
            return Err(CaptureError::corrupt(
                offset,
                "pcapng section header too short",
            ));
        }
        let (major, minor) = (self.endian.u16(&body[4..]), self.endian.u16(&body[6..]));
        // libpcap reads 1.0, and 1.2 which some writers put in by mistake
        if major != 1 || !(minor == 0 || minor == 2) {
            return Err(CaptureError::corrupt(
                offset + 12,
                format!(
                    "pcapng version {major}.{minor}; owl, like libpcap, reads versions 1.0 and 1.2"
                ),
            ));
        }
        Ok(())
    }

    /// Read one whole block at the current offset; returns its body (after type and length,
    /// before the trailing length).
    fn block<'a, R: Read>(
        &self,
        src: &'a mut ByteSource<Input<R>>,
        what: &'static str,
    ) -> Result<&'a [u8], CaptureError> {
        let offset = src.offset();
        let have = src.ensure(8)?;
        if have < 8 {
            return Err(cut(src, offset, what, 8, have));
        }
        let len = self.endian.u32(&src.peek()[4..]) as usize;
        if len < 12 || !len.is_multiple_of(4) || len > MAX_BLOCK {
            return Err(CaptureError::corrupt(
                offset + 4,
                format!(
                    "pcapng block length {len} is invalid (must be a multiple of 4 between 12 and {MAX_BLOCK})"
                ),
            ));
        }
        let have = src.ensure(len)?;
        if have < len {
            return Err(cut(src, offset, what, len as u64, have));
        }
        let e = self.endian;
        let b = src.take(len);
        let trailer = e.u32(&b[len - 4..]) as usize;
        if trailer != len {
            return Err(CaptureError::corrupt(
                offset + len as u64 - 4,
                format!(
                    "pcapng block trailer length {trailer} differs from its header length {len}"
                ),
            ));
        }
        Ok(&b[8..len - 4])
    }

    /// The smallest snaplen of the interfaces of the current section (`None` before any, or
    /// when every one is 0, pcapng's "no limit").
    pub fn snaplen(&self) -> Option<u32> {
        self.interfaces
            .iter()
            .map(|i| i.snaplen)
            .filter(|&s| s != 0)
            .min()
    }

    /// The next packet (of interface `selected` only, when given).
    pub fn next<'a, R: Read>(
        &mut self,
        src: &'a mut ByteSource<Input<R>>,
        stats: &mut ReaderStats,
        selected: Option<u32>,
    ) -> Result<Option<RawPacket<'a>>, CaptureError> {
        loop {
            let offset = src.offset();
            let have = src.ensure(8)?;
            if have == 0 {
                end_of_input(src)?;
                if let Some(n) = selected
                    && n as usize >= self.all.len()
                {
                    return Err(CaptureError::NoSuchInterface {
                        wanted: n,
                        count: self.all.len() as u32,
                    });
                }
                return Ok(None);
            }
            if have < 8 {
                return Err(cut(src, offset, "pcapng block header", 8, have));
            }
            let btype = self.endian.u32(src.peek());
            if btype == SHB_TYPE {
                self.section_header(src)?;
                continue;
            }
            match btype {
                IDB_TYPE => {
                    let e = self.endian;
                    let body = self.block(src, "pcapng interface description")?;
                    let iface = parse_idb(e, body, offset)?;
                    if self.all.len() >= MAX_INTERFACES {
                        return Err(CaptureError::corrupt(
                            offset,
                            format!("more than {MAX_INTERFACES} pcapng interfaces"),
                        ));
                    }
                    self.all.push(InterfaceInfo {
                        linktype: iface.linktype,
                        snaplen: iface.snaplen,
                    });
                    self.all_resol.push(iface.resol);
                    self.interfaces.push(iface);
                }
                EPB_TYPE | PB_TYPE
                    if selected.is_some() && !self.is_selected(src, btype, selected) =>
                {
                    let _ = self.block(src, "pcapng packet block")?;
                    stats.other_interface += 1;
                }
                EPB_TYPE | PB_TYPE => {
                    let e = self.endian;
                    let ifaces = &self.interfaces;
                    let body = self.block(src, "pcapng packet block")?;
                    if body.len() < 20 {
                        return Err(CaptureError::corrupt(
                            offset,
                            "pcapng packet block too short",
                        ));
                    }
                    let iface_id = if btype == EPB_TYPE {
                        e.u32(body)
                    } else {
                        e.u16(body) as u32
                    };
                    let Some(iface) = ifaces.get(iface_id as usize) else {
                        return Err(CaptureError::corrupt(
                            offset + 8,
                            format!(
                                "pcapng packet refers to interface {iface_id}, but the section describes {}",
                                ifaces.len()
                            ),
                        ));
                    };
                    let ts = ((e.u32(&body[4..]) as u64) << 32) | e.u32(&body[8..]) as u64;
                    let caplen = e.u32(&body[12..]) as usize;
                    let orig_len = e.u32(&body[16..]);
                    if caplen > body.len() - 20 {
                        return Err(CaptureError::corrupt(
                            offset + 20,
                            format!(
                                "pcapng packet claims {caplen} captured bytes but its block holds {}",
                                body.len() - 20
                            ),
                        ));
                    }
                    let interface = self.base.saturating_add(iface_id);
                    let ts_ns = to_ns(ts, iface)
                        .ok_or_else(|| out_of_range(ts, iface, interface, offset + 12))?;
                    return Ok(Some(RawPacket {
                        ts_ns,
                        linktype: iface.linktype,
                        data: &body[20..20 + caplen],
                        orig_len,
                        offset,
                        interface,
                    }));
                }
                SPB_TYPE => {
                    let _ = self.block(src, "pcapng simple packet block")?;
                    if self.interfaces.is_empty() {
                        return Err(CaptureError::corrupt(
                            offset,
                            "pcapng simple packet block before any interface description",
                        ));
                    }
                    stats.no_timestamp += 1;
                }
                _ => {
                    let _ = self.block(src, "pcapng block")?;
                    stats.other_blocks += 1;
                }
            }
        }
    }
}

impl PcapngState {
    /// Whether the packet block at the current offset (whose first 8 bytes are available) was
    /// captured on interface `selected`. A block too short to say is left to the normal path,
    /// which reports it.
    fn is_selected<R: Read>(
        &self,
        src: &mut ByteSource<Input<R>>,
        btype: u32,
        selected: Option<u32>,
    ) -> bool {
        let Some(n) = selected else { return true };
        if !matches!(src.ensure(12), Ok(12)) {
            return true;
        }
        let b = &src.peek()[8..12];
        let id = if btype == EPB_TYPE {
            self.endian.u32(b)
        } else {
            self.endian.u16(b) as u32
        };
        self.base.checked_add(id) == Some(n) || id as usize >= self.interfaces.len()
    }
}

fn parse_idb(e: Endian, body: &[u8], offset: u64) -> Result<Interface, CaptureError> {
    if body.len() < 8 {
        return Err(CaptureError::corrupt(
            offset,
            "pcapng interface description too short",
        ));
    }
    let mut iface = Interface {
        linktype: e.u16(body) as u32,
        snaplen: e.u32(&body[4..]),
        resol: (false, 6),
        offset_s: 0,
        name: None,
    };
    let mut p = 8;
    while p + 4 <= body.len() {
        let code = e.u16(&body[p..]);
        let len = e.u16(&body[p + 2..]) as usize;
        let v = p + 4;
        if code == OPT_END {
            break;
        }
        if v + len > body.len() {
            return Err(CaptureError::corrupt(
                offset + 8 + p as u64,
                format!("pcapng option {code} runs past the end of its block"),
            ));
        }
        match code {
            OPT_IF_TSRESOL if len >= 1 => {
                let r = body[v];
                iface.resol = (r & 0x80 != 0, r & 0x7f);
            }
            OPT_IF_TSOFFSET if len >= 8 => iface.offset_s = e.u64(&body[v..]) as i64,
            OPT_IF_NAME => {
                let name = String::from_utf8_lossy(&body[v..v + len]);
                iface.name = Some(name.trim_end_matches('\0').to_string());
            }
            _ => {}
        }
        p = v + len.div_ceil(4) * 4;
    }
    let (binary, exp) = iface.resol;
    if (binary && exp > 63) || (!binary && exp > 19) {
        return Err(CaptureError::corrupt(
            offset,
            format!(
                "pcapng if_tsresol of {}^-{exp} is not representable",
                if binary { 2 } else { 10 }
            ),
        ));
    }
    Ok(iface)
}

/// A timestamp that is no time in ns since the epoch (before 1970 or after 2554, once its
/// interface's `if_tsresol` and `if_tsoffset` are applied), naming its interface (`n` in file
/// order) and where its timestamp is.
fn out_of_range(ts: u64, iface: &Interface, n: u32, offset: u64) -> CaptureError {
    let (binary, exp) = iface.resol;
    let name = iface
        .name
        .as_ref()
        .map_or(String::new(), |s| format!(" ({s})"));
    CaptureError::corrupt(
        offset,
        format!(
            "pcapng timestamp out of range on interface {n}{name}: {ts} units of {}^-{exp} s plus an if_tsoffset of {} s is not a time between 1970 and 2554",
            if binary { 2 } else { 10 },
            iface.offset_s
        ),
    )
}

/// Convert interface timestamp units to ns since the epoch.
fn to_ns(ts: u64, iface: &Interface) -> Option<u64> {
    let (binary, exp) = iface.resol;
    let ns: u64 = if binary {
        u64::try_from(((ts as u128) * 1_000_000_000) >> exp).ok()?
    } else if exp <= 9 {
        ts.checked_mul(10u64.pow(9 - exp as u32))?
    } else {
        ts / 10u64.pow(exp as u32 - 9)
    };
    let off = (iface.offset_s as i128) * 1_000_000_000;
    u64::try_from(ns as i128 + off).ok()
}
