//! Dissection: link layer → IP → transport, zero-copy.
//!
//! Link types: Ethernet (with any stack of 802.1Q / 802.1ad / QinQ tags), Linux cooked capture
//! SLL and SLL2, raw IP (LINKTYPE_RAW and the IPv4/IPv6-only variants) and BSD loopback
//! (LINKTYPE_NULL, LINKTYPE_LOOP). Network layer: IPv4 (with options and fragments) and IPv6
//! (walking hop-by-hop, routing, fragment, destination-options, mobility, HIP, shim6, AH and
//! experimental extension headers). Transport: TCP and UDP ports, ICMP / ICMPv6 type, code and
//! echo identifier; anything else is opaque IP payload with ports 0.
//!
//! Frames that are not IP are [`Skip::NotIp`]; IP packets too broken to identify are
//! [`Skip::Malformed`]. Neither is fatal: the caller counts them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use owl_core::FlowKey;

pub const LINKTYPE_NULL: u32 = 0;
pub const LINKTYPE_ETHERNET: u32 = 1;
pub const LINKTYPE_RAW: u32 = 101;
pub const LINKTYPE_LOOP: u32 = 108;
pub const LINKTYPE_LINUX_SLL: u32 = 113;
pub const LINKTYPE_IPV4: u32 = 228;
pub const LINKTYPE_IPV6: u32 = 229;
pub const LINKTYPE_LINUX_SLL2: u32 = 276;
/// OpenBSD's raw-IP link types that some files carry instead of `LINKTYPE_RAW` (DLT_RAW values).
pub const DLT_RAW_BSD: u32 = 12;
pub const DLT_RAW_OPENBSD: u32 = 14;

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
}

/// IANA IP protocol numbers, kept beside the flow key in `owl_core::record`.
pub use owl_core::record::ipproto;

/// Whether owl can dissect a link type.
pub fn supports_linktype(linktype: u32) -> bool {
    matches!(
        linktype,
        LINKTYPE_NULL
            | LINKTYPE_ETHERNET
            | LINKTYPE_RAW
            | 12
            | 14
            | LINKTYPE_LOOP
            | LINKTYPE_LINUX_SLL
            | LINKTYPE_IPV4
            | LINKTYPE_IPV6
            | LINKTYPE_LINUX_SLL2
    )
}

/// A short name for a link type, for error messages.
pub fn linktype_name(linktype: u32) -> &'static str {
    match linktype {
        LINKTYPE_NULL => "LINKTYPE_NULL",
        LINKTYPE_ETHERNET => "LINKTYPE_ETHERNET",
        6 => "LINKTYPE_IEEE802_5",
        9 => "LINKTYPE_PPP",
        DLT_RAW_BSD | DLT_RAW_OPENBSD | LINKTYPE_RAW => "LINKTYPE_RAW",
        50 => "LINKTYPE_PPP_HDLC",
        105 => "LINKTYPE_IEEE802_11",
        LINKTYPE_LOOP => "LINKTYPE_LOOP",
        LINKTYPE_LINUX_SLL => "LINKTYPE_LINUX_SLL",
        127 => "LINKTYPE_IEEE802_11_RADIOTAP",
        147..=162 => "LINKTYPE_USERn",
        187 => "LINKTYPE_BLUETOOTH_HCI_H4",
        195 => "LINKTYPE_IEEE802_15_4",
        LINKTYPE_IPV4 => "LINKTYPE_IPV4",
        LINKTYPE_IPV6 => "LINKTYPE_IPV6",
        LINKTYPE_LINUX_SLL2 => "LINKTYPE_LINUX_SLL2",
        _ => "unknown",
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
    let (ip_offset, hint) = link_layer(linktype, frame)?;
    let ip = &frame[ip_offset..];
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

/// Skip the link layer: the IP header offset and the IP version the link layer announces.
fn link_layer(linktype: u32, f: &[u8]) -> Result<(usize, Option<IpVersion>), Skip> {
    let from_ethertype = |t: u16| match t {
        ethertype::IPV4 => Ok(Some(IpVersion::V4)),
        ethertype::IPV6 => Ok(Some(IpVersion::V6)),
        _ => Err(Skip::NotIp),
    };
    match linktype {
        LINKTYPE_ETHERNET => {
            let mut off = 12;
            loop {
                let Some(t) = be16(f, off) else {
                    return Err(Skip::Malformed("truncated Ethernet header"));
                };
                match t {
                    // 802.1Q, 802.1ad, and the pre-standard QinQ tags
                    ethertype::VLAN
                    | ethertype::QINQ
                    | ethertype::QINQ_OLD_9100
                    | ethertype::QINQ_OLD_9200 => {
                        off += 4;
                        if off > 12 + 4 * 8 {
                            return Err(Skip::Malformed("more than 8 VLAN tags"));
                        }
                    }
                    _ => return from_ethertype(t).map(|v| (off + 2, v)),
                }
            }
        }
        LINKTYPE_LINUX_SLL => match be16(f, 14) {
            Some(t) => from_ethertype(t).map(|v| (16, v)),
            None => Err(Skip::Malformed("truncated Linux cooked (SLL) header")),
        },
        LINKTYPE_LINUX_SLL2 => {
            if f.len() < 20 {
                return Err(Skip::Malformed("truncated Linux cooked (SLL2) header"));
            }
            from_ethertype(be16(f, 0).unwrap_or(0)).map(|v| (20, v))
        }
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
        _ => Err(Skip::UnsupportedLinkType),
    }
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
