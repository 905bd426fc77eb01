//! Dissection: link layer → IP → transport, zero-copy.
//!
//! Link types: Ethernet, Linux cooked capture SLL and SLL2, raw IP (LINKTYPE_RAW and the
//! IPv4/IPv6-only variants), BSD loopback (LINKTYPE_NULL, LINKTYPE_LOOP), PPP (with or without
//! HDLC-like framing, RFC 1661/1662), PPP-in-HDLC and Cisco HDLC, Linux NFLOG (`tcpdump -i
//! nflog`), IP over InfiniBand, bare MPLS, IEEE 802.11 data frames, bare or behind radiotap
//! (`dissect/ieee802_11.rs`: LLC/SNAP to an EtherType; the FCS radiotap announces is cut), and
//! macOS PKTAP (`tcpdump -k`), whose inner link type is any of these. Wherever an EtherType or
//! PPP protocol names the payload, any stack of 802.1Q / 802.1ad / QinQ tags, an MPLS label
//! stack (RFC 3032, any depth up to [`MAX_MPLS_LABELS`], explicit null included) and a PPPoE
//! session (RFC 2516) are skipped like the link layer: routers swap labels at every hop, so
//! identity must not see them.
//! Network layer: IPv4 (with options and fragments) and IPv6
//! (walking hop-by-hop, routing, fragment, destination-options, mobility, HIP, shim6, AH and
//! experimental extension headers). Transport: TCP and UDP ports, ICMP / ICMPv6 type, code and
//! echo identifier; anything else is opaque IP payload with ports 0.
//!
//! Frames that are not IP are [`Skip::NotIp`]; IP packets too broken to identify are
//! [`Skip::Malformed`]. Neither is fatal: the caller counts them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use owl_core::FlowKey;

mod ieee802_11;
mod linktypes;

pub const LINKTYPE_NULL: u32 = 0;
pub const LINKTYPE_ETHERNET: u32 = 1;
pub const LINKTYPE_PPP: u32 = 9;
pub const LINKTYPE_PPP_HDLC: u32 = 50;
pub const LINKTYPE_RAW: u32 = 101;
pub const LINKTYPE_C_HDLC: u32 = 104;
pub const LINKTYPE_IEEE802_11: u32 = 105;
pub const LINKTYPE_LOOP: u32 = 108;
pub const LINKTYPE_LINUX_SLL: u32 = 113;
pub const LINKTYPE_IEEE802_11_RADIOTAP: u32 = 127;
pub const LINKTYPE_MPLS: u32 = 219;
pub const LINKTYPE_IPV4: u32 = 228;
pub const LINKTYPE_IPV6: u32 = 229;
pub const LINKTYPE_NFLOG: u32 = 239;
pub const LINKTYPE_IPOIB: u32 = 242;
pub const LINKTYPE_PKTAP: u32 = 258;
pub const LINKTYPE_LINUX_SLL2: u32 = 276;
/// OpenBSD's raw-IP link types that some files carry instead of `LINKTYPE_RAW` (DLT_RAW values).
pub const DLT_RAW_BSD: u32 = 12;
pub const DLT_RAW_OPENBSD: u32 = 14;

/// Deepest MPLS label stack owl walks before calling the frame malformed.
pub const MAX_MPLS_LABELS: usize = 16;
/// Most VLAN tags owl walks before calling the frame malformed.
pub const MAX_VLAN_TAGS: usize = 8;

/// IANA EtherType values the dissector reads.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86dd;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (QinQ).
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard QinQ tags.
    pub const QINQ_OLD_9100: u16 = 0x9100;
    pub const QINQ_OLD_9200: u16 = 0x9200;
    /// MPLS unicast and multicast (RFC 5332).
    pub const MPLS: u16 = 0x8847;
    pub const MPLS_MULTICAST: u16 = 0x8848;
    /// PPPoE session stage (RFC 2516).
    pub const PPPOE_SESSION: u16 = 0x8864;
}

/// PPP protocol numbers (IANA "PPP DLL protocol numbers") the dissector reads.
pub mod ppp_protocol {
    pub const IPV4: u16 = 0x0021;
    pub const IPV6: u16 = 0x0057;
    pub const MPLS: u16 = 0x0281;
    pub const MPLS_MULTICAST: u16 = 0x0283;
}

/// IANA IP protocol numbers, kept beside the flow key in `owl_core::record`.
pub use owl_core::record::ipproto;

/// Whether owl can dissect a link type.
pub fn supports_linktype(linktype: u32) -> bool {
    matches!(
        linktype,
        LINKTYPE_NULL
            | LINKTYPE_ETHERNET
            | LINKTYPE_PPP
            | LINKTYPE_PPP_HDLC
            | LINKTYPE_RAW
            | DLT_RAW_BSD
            | DLT_RAW_OPENBSD
            | LINKTYPE_C_HDLC
            | LINKTYPE_IEEE802_11
            | LINKTYPE_LOOP
            | LINKTYPE_LINUX_SLL
            | LINKTYPE_IEEE802_11_RADIOTAP
            | LINKTYPE_MPLS
            | LINKTYPE_IPV4
            | LINKTYPE_IPV6
            | LINKTYPE_NFLOG
            | LINKTYPE_IPOIB
            | LINKTYPE_PKTAP
            | LINKTYPE_LINUX_SLL2
    )
}

/// libpcap's name of a link type (`LINKTYPE_IEEE802_11_RADIOTAP`, …), for error messages.
pub fn linktype_name(linktype: u32) -> &'static str {
    match linktype {
        DLT_RAW_BSD | DLT_RAW_OPENBSD => "DLT_RAW",
        _ => linktypes::LINKTYPE_NAMES
            .binary_search_by_key(&linktype, |&(v, _)| v)
            .map(|i| linktypes::LINKTYPE_NAMES[i].1)
            .unwrap_or("a value libpcap does not define"),
    }
}

/// IP version of a dissected packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpVersion {
    V4,
    V6,
}

/// Where the IP packet sits in a frame, and its flow key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dissected {
    /// Offset of the IP header in the frame.
    pub ip_offset: usize,
    /// End of the IP packet in the frame: the captured end or the IP length, whichever is
    /// first (so link-layer padding and trailers are excluded).
    pub ip_end: usize,
    pub version: IpVersion,
    /// Fixed IP header length: IHL·4 for IPv4, 40 for IPv6.
    pub header_len: usize,
    /// IP length on the wire, from the header (the captured length when the header says 0,
    /// as with segmentation offload or jumbograms).
    pub ip_len: u32,
    pub flow: FlowKey,
}

/// Why a frame yields no packet record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Not an IP packet (ARP, LLDP, STP, …).
    NotIp,
    /// An IP packet too damaged or too truncated to identify.
    Malformed(&'static str),
    /// The link type is not one owl reads.
    UnsupportedLinkType,
}

/// Dissect one frame.
pub fn dissect(linktype: u32, frame: &[u8]) -> Result<Dissected, Skip> {
    let (ip_offset, hint, end) = link_layer(linktype, frame)?;
    // the link layer's trailer (an FCS) is not IP, nor is anything it left out
    let Some(ip) = frame.get(ip_offset..end) else {
        return Err(Skip::Malformed("link layer points past the frame"));
    };
    let version = match ip.first().map(|b| b >> 4) {
        Some(4) => IpVersion::V4,
        Some(6) => IpVersion::V6,
        Some(_) if hint.is_some() => {
            return Err(Skip::Malformed(
                "IP version does not match the link-layer protocol",
            ));
        }
        Some(_) => return Err(Skip::NotIp),
        None => return Err(Skip::Malformed("frame ends before the IP header")),
    };
    if let Some(h) = hint
        && h != version
    {
        return Err(Skip::Malformed(
            "IP version does not match the link-layer protocol",
        ));
    }
    let mut d = match version {
        IpVersion::V4 => ipv4(ip)?,
        IpVersion::V6 => ipv6(ip)?,
    };
    d.ip_offset = ip_offset;
    d.ip_end += ip_offset;
    Ok(d)
}

/// Where the link layer leaves off: the IP header offset, and the IP version the link layer
/// announces (if it does).
type Link = Result<(usize, Option<IpVersion>), Skip>;

/// The link layer of a frame that may have a trailer: the IP header offset, the IP version the
/// link layer announces, and where the frame ends before its trailer (an 802.11 FCS).
type Framed = Result<(usize, Option<IpVersion>, usize), Skip>;

/// Skip the link layer: the IP header offset, the IP version the link layer announces, and
/// where the frame ends before the link layer's trailer (the frame's end unless it has one).
fn link_layer(linktype: u32, f: &[u8]) -> Framed {
    let whole = |(off, hint)| (off, hint, f.len());
    match linktype {
        LINKTYPE_IEEE802_11_RADIOTAP => ieee802_11::radiotap(f),
        LINKTYPE_IEEE802_11 => ieee802_11::mac(f, false).map(whole),
        LINKTYPE_PKTAP => pktap(f),
        _ => header(linktype, f).map(whole),
    }
}

/// The link types without a trailer: the IP header offset and the IP version the link layer
/// announces.
fn header(linktype: u32, f: &[u8]) -> Link {
    match linktype {
        LINKTYPE_ETHERNET => match be16(f, 12) {
            Some(t) => by_ethertype(f, 14, t),
            None => Err(Skip::Malformed("truncated Ethernet header")),
        },
        LINKTYPE_LINUX_SLL => match be16(f, 14) {
            Some(t) => by_ethertype(f, 16, t),
            None => Err(Skip::Malformed("truncated Linux cooked (SLL) header")),
        },
        LINKTYPE_LINUX_SLL2 => match be16(f, 0) {
            Some(t) if f.len() >= 20 => by_ethertype(f, 20, t),
            _ => Err(Skip::Malformed("truncated Linux cooked (SLL2) header")),
        },
        LINKTYPE_RAW | DLT_RAW_BSD | DLT_RAW_OPENBSD => Ok((0, None)),
        LINKTYPE_IPV4 => Ok((0, Some(IpVersion::V4))),
        LINKTYPE_IPV6 => Ok((0, Some(IpVersion::V6))),
        LINKTYPE_NULL | LINKTYPE_LOOP => {
            let Some(b) = f.get(..4) else {
                return Err(Skip::Malformed("truncated loopback header"));
            };
            let raw = [b[0], b[1], b[2], b[3]];
            // NULL: host byte order of the writer; LOOP: network byte order.
            let fam = if linktype == LINKTYPE_LOOP {
                u32::from_be_bytes(raw)
            } else {
                let le = u32::from_le_bytes(raw);
                if le > 0xffff { le.swap_bytes() } else { le }
            };
            match fam {
                2 => Ok((4, Some(IpVersion::V4))),
                10 | 24 | 28 | 30 => Ok((4, Some(IpVersion::V6))),
                _ => Err(Skip::NotIp),
            }
        }
        LINKTYPE_PPP => {
            // RFC 1662 address and control (ff 03), or pppd's direction byte and control
            // (00 03 in, 01 03 out), or nothing (RFC 1661 without framing), as tcpdump reads it.
            let off = match f.get(..2) {
                Some([0xff | 0x00 | 0x01, 0x03]) => 2,
                _ => 0,
            };
            by_ppp_protocol(f, off)
        }
        LINKTYPE_PPP_HDLC => match f.first() {
            // RFC 1662 HDLC-like framing: address ff, control 03, then a two-byte protocol
            Some(0xff) => match be16(f, 2) {
                Some(p) => by_ppp_number(f, 4, p),
                None => Err(Skip::Malformed("truncated PPP-in-HDLC header")),
            },
            // Cisco PPP with HDLC framing (RFC 1547 section 4.3.1)
            Some(0x0f | 0x8f) => cisco_hdlc(f),
            Some(_) => Err(Skip::NotIp),
            None => Err(Skip::Malformed("empty PPP-in-HDLC frame")),
        },
        LINKTYPE_C_HDLC => cisco_hdlc(f),
        LINKTYPE_MPLS => mpls(f, 0),
        LINKTYPE_IPOIB => match be16(f, IPOIB_HEADER - 4) {
            // a 40-byte pseudo-header (GRH or destination address), EtherType, 2 reserved
            Some(t) if f.len() >= IPOIB_HEADER => by_ethertype(f, IPOIB_HEADER, t),
            _ => Err(Skip::Malformed("truncated IP-over-InfiniBand header")),
        },
        LINKTYPE_NFLOG => nflog(f),
        _ => Err(Skip::UnsupportedLinkType),
    }
}

/// Length of the LINKTYPE_IPOIB header (tcpdump's `IPOIB_HDRLEN`, Wireshark's GRH + 4).
const IPOIB_HEADER: usize = 44;

/// Follow an EtherType `t` whose payload starts at `off`: through VLAN tags, an MPLS label stack
/// or a PPPoE session to IP.
fn by_ethertype(f: &[u8], mut off: usize, mut t: u16) -> Link {
    let mut tags = 0;
    loop {
        match t {
            ethertype::IPV4 => return Ok((off, Some(IpVersion::V4))),
            ethertype::IPV6 => return Ok((off, Some(IpVersion::V6))),
            // 802.1Q, 802.1ad, and the pre-standard QinQ tags: 2 bytes of TCI, then the next type
            ethertype::VLAN
            | ethertype::QINQ
            | ethertype::QINQ_OLD_9100
            | ethertype::QINQ_OLD_9200 => {
                tags += 1;
                if tags > MAX_VLAN_TAGS {
                    return Err(Skip::Malformed("more than 8 VLAN tags"));
                }
                let Some(next) = be16(f, off + 2) else {
                    return Err(Skip::Malformed("truncated VLAN tag"));
                };
                t = next;
                off += 4;
            }
            ethertype::MPLS | ethertype::MPLS_MULTICAST => return mpls(f, off),
            ethertype::PPPOE_SESSION => {
                // RFC 2516 section 4: VER/TYPE (0x11), CODE (0x00), SESSION_ID, LENGTH
                return match f.get(off..off + 6) {
                    Some([0x11, 0x00, ..]) => by_ppp_protocol(f, off + 6),
                    Some(_) => Err(Skip::NotIp),
                    None => Err(Skip::Malformed("truncated PPPoE header")),
                };
            }
            _ => return Err(Skip::NotIp),
        }
    }
}

/// A PPP protocol field at `off`, one byte when protocol-field compression made it so (an odd
/// first byte, RFC 1661 section 6.5), then its payload.
fn by_ppp_protocol(f: &[u8], off: usize) -> Link {
    match f.get(off) {
        Some(&b) if b & 1 == 1 => by_ppp_number(f, off + 1, b as u16),
        Some(_) => match be16(f, off) {
            Some(p) => by_ppp_number(f, off + 2, p),
            None => Err(Skip::Malformed("truncated PPP protocol field")),
        },
        None => Err(Skip::Malformed("truncated PPP header")),
    }
}

fn by_ppp_number(f: &[u8], off: usize, protocol: u16) -> Link {
    match protocol {
        ppp_protocol::IPV4 => Ok((off, Some(IpVersion::V4))),
        ppp_protocol::IPV6 => Ok((off, Some(IpVersion::V6))),
        ppp_protocol::MPLS | ppp_protocol::MPLS_MULTICAST => mpls(f, off),
        _ => Err(Skip::NotIp),
    }
}

/// Cisco HDLC: address (0x0f unicast, 0x8f broadcast), control, EtherType.
fn cisco_hdlc(f: &[u8]) -> Link {
    match be16(f, 2) {
        Some(t) => by_ethertype(f, 4, t),
        None => Err(Skip::Malformed("truncated Cisco HDLC header")),
    }
}

/// An MPLS label stack at `off` (RFC 3032): 4-byte entries until the bottom-of-stack bit; the
/// payload is IP when an explicit-null label says so or its first nibble is 4 or 6 (RFC 4928's
/// heuristic, as routers use it); a pseudowire control word (nibble 0) or anything else is not IP.
fn mpls(f: &[u8], mut off: usize) -> Link {
    for _ in 0..MAX_MPLS_LABELS {
        let Some(e) = f.get(off..off + 4) else {
            return Err(Skip::Malformed("MPLS label stack cut before its bottom"));
        };
        let label = (u32::from(e[0]) << 12) | (u32::from(e[1]) << 4) | (u32::from(e[2]) >> 4);
        let bottom = e[2] & 1 == 1;
        off += 4;
        if bottom {
            let announced = match label {
                0 => Some(IpVersion::V4), // IPv4 explicit null
                2 => Some(IpVersion::V6), // IPv6 explicit null
                _ => None,
            };
            return match (f.get(off).map(|b| b >> 4), announced) {
                (None, _) => Err(Skip::Malformed("MPLS payload cut off")),
                (Some(_), Some(v)) => Ok((off, Some(v))),
                (Some(4), None) => Ok((off, Some(IpVersion::V4))),
                (Some(6), None) => Ok((off, Some(IpVersion::V6))),
                (Some(_), None) => Err(Skip::NotIp),
            };
        }
    }
    Err(Skip::Malformed(
        "MPLS label stack without bottom of stack within 16 labels",
    ))
}

/// Linux NFLOG (LINKTYPE_NFLOG): a 4-byte header (address family, version 0, resource id), then
/// netlink TLVs until NFULA_PAYLOAD, which holds the IP packet.
///
/// The TLV length and type are in the byte order of the capturing host. The first TLV's type
/// tells which: NFLOG types are small non-zero numbers (1..=255 without the netlink flag bits),
/// so exactly one byte order reads it as one.
fn nflog(f: &[u8]) -> Link {
    const NFULA_PAYLOAD: u16 = 9;
    let Some(&[family, version, _, _]) = f.get(..4) else {
        return Err(Skip::Malformed("truncated NFLOG header"));
    };
    if version != 0 {
        return Err(Skip::Malformed("NFLOG header version is not 0"));
    }
    let Some(t) = f.get(6..8) else {
        return Err(Skip::Malformed("truncated NFLOG TLV"));
    };
    let plausible = |v: u16| (1..=0xff).contains(&(v & 0x3fff));
    let big = match (
        plausible(u16::from_le_bytes([t[0], t[1]])),
        plausible(u16::from_be_bytes([t[0], t[1]])),
    ) {
        (true, false) => false,
        (false, true) => true,
        _ => return Err(Skip::Malformed("NFLOG TLV byte order cannot be told")),
    };
    let rd = |o: usize| {
        f.get(o..o + 2).map(|b| {
            if big {
                u16::from_be_bytes([b[0], b[1]])
            } else {
                u16::from_le_bytes([b[0], b[1]])
            }
        })
    };
    let mut off = 4;
    loop {
        let (Some(len), Some(typ)) = (rd(off), rd(off + 2)) else {
            return Err(Skip::Malformed("NFLOG frame ends before its payload TLV"));
        };
        if len < 4 {
            return Err(Skip::Malformed("NFLOG TLV shorter than its header"));
        }
        if typ & 0x3fff == NFULA_PAYLOAD {
            let hint = match family {
                2 => Some(IpVersion::V4),  // AF_INET
                10 => Some(IpVersion::V6), // Linux AF_INET6
                _ => None,
            };
            return Ok((off + 4, hint));
        }
        off += (len as usize).div_ceil(4) * 4;
    }
}

/// macOS PKTAP (LINKTYPE_PKTAP): a little-endian header (`pth_length`, `pth_type_next`,
/// `pth_dlt`, …) in front of a frame of link type `pth_dlt`, as tcpdump reads it.
fn pktap(f: &[u8]) -> Framed {
    const PKTAP_MIN_HEADER: usize = 108;
    const PTH_TYPE_PACKET: u32 = 1;
    let le32 = |o: usize| {
        f.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (Some(len), Some(rectype), Some(dlt)) = (le32(0), le32(4), le32(8)) else {
        return Err(Skip::Malformed("truncated PKTAP header"));
    };
    let len = len as usize;
    if len < PKTAP_MIN_HEADER || len > f.len() {
        return Err(Skip::Malformed("PKTAP header length out of range"));
    }
    if rectype != PTH_TYPE_PACKET {
        return Err(Skip::NotIp);
    }
    if dlt == LINKTYPE_PKTAP || !supports_linktype(dlt) {
        return Err(Skip::NotIp);
    }
    let (off, hint, end) = link_layer(dlt, &f[len..])?;
    Ok((len + off, hint, len + end))
}

#[inline]
fn be16(b: &[u8], off: usize) -> Option<u16> {
    b.get(off..off + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
}

fn ipv4(ip: &[u8]) -> Result<Dissected, Skip> {
    if ip.len() < 20 {
        return Err(Skip::Malformed("truncated IPv4 header"));
    }
    let ihl = ((ip[0] & 0x0f) as usize) * 4;
    if ihl < 20 {
        return Err(Skip::Malformed("IPv4 header length below 20 bytes"));
    }
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    let ip_len = if total == 0 { ip.len() } else { total };
    if ip_len < ihl {
        return Err(Skip::Malformed("IPv4 total length below its header length"));
    }
    let end = ip.len().min(ip_len);
    let proto = ip[9];
    let frag_offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
    let src = IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]));
    let dst = IpAddr::V4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]));
    let (sport, dport) = if frag_offset != 0 || end < ihl {
        (0, 0)
    } else {
        ports(proto, &ip[ihl..end])
    };
    Ok(Dissected {
        ip_offset: 0,
        ip_end: end,
        version: IpVersion::V4,
        header_len: ihl,
        ip_len: ip_len as u32,
        flow: FlowKey {
            proto,
            src,
            dst,
            sport,
            dport,
        },
    })
}

fn ipv6(ip: &[u8]) -> Result<Dissected, Skip> {
    if ip.len() < 40 {
        return Err(Skip::Malformed("truncated IPv6 header"));
    }
    let payload = u16::from_be_bytes([ip[4], ip[5]]) as usize;
    let ip_len = if payload == 0 { ip.len() } else { 40 + payload };
    let end = ip.len().min(ip_len);
    let src = IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap()));
    let dst = IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap()));
    let mut nh = ip[6];
    let mut off = 40;
    let mut first_fragment = true;
    let mut complete = true;
    for _ in 0..16 {
        let hdr_len = match nh {
            // hop-by-hop, routing, destination options, mobility, HIP, shim6, experimental
            ipproto::HOPOPTS
            | ipproto::ROUTING
            | ipproto::DSTOPTS
            | ipproto::MOBILITY
            | ipproto::HIP
            | ipproto::SHIM6
            | ipproto::EXPERIMENT1
            | ipproto::EXPERIMENT2 => match ip.get(off + 1) {
                Some(&l) if off + 2 <= end => (l as usize + 1) * 8,
                _ => {
                    complete = false;
                    break;
                }
            },
            ipproto::FRAGMENT => {
                match be16(&ip[..end], off + 2) {
                    Some(fo) => first_fragment &= (fo >> 3) == 0,
                    None => {
                        complete = false;
                        break;
                    }
                }
                8
            }
            ipproto::AH => match ip.get(off + 1) {
                Some(&l) if off + 2 <= end => (l as usize + 2) * 4,
                _ => {
                    complete = false;
                    break;
                }
            },
            _ => break,
        };
        nh = ip[off];
        off += hdr_len;
        if off > end {
            complete = false;
            break;
        }
    }
    let (sport, dport) = if complete && first_fragment && off <= end {
        ports(nh, &ip[off..end])
    } else {
        (0, 0)
    };
    Ok(Dissected {
        ip_offset: 0,
        ip_end: end,
        version: IpVersion::V6,
        header_len: 40,
        ip_len: ip_len as u32,
        flow: FlowKey {
            proto: nh,
            src,
            dst,
            sport,
            dport,
        },
    })
}

/// Ports (or ICMP identifier and type/code) from the transport header, 0 where absent.
fn ports(proto: u8, l4: &[u8]) -> (u16, u16) {
    match proto {
        ipproto::TCP | ipproto::UDP | ipproto::SCTP | ipproto::UDPLITE => {
            match (be16(l4, 0), be16(l4, 2)) {
                (Some(s), Some(d)) => (s, d),
                _ => (0, 0),
            }
        }
        ipproto::ICMP | ipproto::ICMPV6 => {
            let (Some(&t), Some(&c)) = (l4.first(), l4.get(1)) else {
                return (0, 0);
            };
            let echo_like = if proto == ipproto::ICMP {
                matches!(t, 0 | 8 | 13 | 14 | 15 | 16 | 17 | 18)
            } else {
                matches!(t, 128 | 129)
            };
            let id = if echo_like {
                be16(l4, 4).unwrap_or(0)
            } else {
                0
            };
            (id, (t as u16) << 8 | c as u16)
        }
        _ => (0, 0),
    }
}

#[cfg(test)]
mod tests;
