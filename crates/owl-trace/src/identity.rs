//! Packet identity: one 64-bit value, equal at S and R for the same packet although a router
//! sits between them.
//!
//! # What is hashed
//!
//! The IP packet from its first header byte to the captured end or the IP length, whichever is
//! first, with the fields a router changes zeroed:
//! - IPv4: DSCP/ECN (byte 1), TTL (byte 8) and the header checksum (bytes 10–11);
//! - IPv6: the traffic class (DSCP/ECN, the low nibble of byte 0 and the high nibble of byte 1)
//!   and the hop limit (byte 7).
//!
//! Every link-layer byte is excluded, and so are Ethernet padding and trailers (the IP length
//! bounds the range). Everything else is included: addresses, IPv4 identification and fragment
//! fields, IPv4 options, IPv6 flow label and extension headers, the transport header and the
//! captured payload. Two points that capture with the same snaplen therefore compute the same
//! identity. With different snaplens they would not: a packet cut at 96 bytes at S and kept
//! whole at R hashes different bytes. The identity must then cover only bytes both points can
//! have captured: [`frame_identity_within`] hashes at most `N` bytes of the IP packet, and
//! [`common_identity_bytes`] gives the `N` two captures' snaplens allow. A packet shorter than
//! `N` is hashed whole, so its identity is the same with and without the limit.
//!
//! What a path may legitimately change and would break identity: NAT, MSS clamping, in-path
//! fragmentation, IPv4 record-route or timestamp options, IPv6 hop-by-hop options marked
//! mutable. Such packets look lost at S and unexpected at R, which the exact truth reports.
//!
//! # The hash
//!
//! `h0 = xxh3_64(masked fixed header, seed)`, `identity = xxh3_64(rest of the packet, h0)`:
//! xxh3 is fixed and specified, so both points (and every owl version) agree for a given seed.
//!
//! # Collisions
//!
//! For `N` distinct packets the expected number of colliding pairs is `N(N−1)/2⁶⁵`: about 7·10⁻⁷
//! for 5 M packets, 4·10⁻⁴ for the 125 M packets of a saturated 40 Gb/s second. A collision makes
//! two packets one identity: the exact matcher keeps the first sighting and counts the second as a
//! duplicate of that point, and a synopsis sees the same effect as a duplicate. Identical bytes
//! (a sender retransmitting an unchanged IPv6 UDP datagram, say) are the same identity by
//! design and are handled as duplicates too.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::dissect::{Dissected, IpVersion};

/// The identity seed owl uses unless told otherwise (both points must use the same).
pub const DEFAULT_IDENTITY_SEED: u64 = 0x6f77_6c2d_6964_0001;

/// Identity of the IP packet `ip` (from the IP header to the end of the hashed range).
#[inline]
pub fn packet_identity(ip: &[u8], version: IpVersion, header_len: usize, seed: u64) -> u64 {
    let mut hdr = [0u8; 60];
    let hl = header_len.min(ip.len()).min(60);
    hdr[..hl].copy_from_slice(&ip[..hl]);
    match version {
        IpVersion::V4 => {
            hdr[1] = 0; // DSCP/ECN
            hdr[8] = 0; // TTL
            hdr[10] = 0; // header checksum
            hdr[11] = 0;
        }
        IpVersion::V6 => {
            hdr[0] &= 0xf0; // traffic class, high nibble
            hdr[1] &= 0x0f; // traffic class, low nibble
            hdr[7] = 0; // hop limit
        }
    }
    let h0 = xxh3_64_with_seed(&hdr[..hl], seed);
    xxh3_64_with_seed(&ip[hl..], h0)
}

/// Identity of a dissected frame.
#[inline]
pub fn frame_identity(frame: &[u8], d: &Dissected, seed: u64) -> u64 {
    packet_identity(&frame[d.ip_offset..d.ip_end], d.version, d.header_len, seed)
}

/// Identity of a dissected frame over at most `max_ip_bytes` bytes of its IP packet (`None`:
/// every captured byte, as [`frame_identity`]).
#[inline]
pub fn frame_identity_within(
    frame: &[u8],
    d: &Dissected,
    seed: u64,
    max_ip_bytes: Option<u32>,
) -> u64 {
    let end = match max_ip_bytes {
        Some(n) => d.ip_end.min(d.ip_offset.saturating_add(n as usize)),
        None => d.ip_end,
    };
    packet_identity(&frame[d.ip_offset..end], d.version, d.header_len, seed)
}

/// Fewest IP bytes two points may identify packets on: an IPv4 header's (addresses, length,
/// identification). Below it, packets collide (at 0 bytes every packet has one identity).
pub const MIN_IDENTITY_BYTES: u32 = 20;

/// IP bytes a capture with this snaplen keeps of every packet of link type `linktype` whose
/// link header has its usual length (no VLAN tag, no MPLS label; for 802.11, a QoS data frame
/// with three addresses and LLC/SNAP; 128 bytes for link types whose header length varies from
/// packet to packet, NFLOG, PKTAP and radiotap); `None` when the snaplen cuts nothing (0, or at
/// least libpcap's 262 144-byte maximum).
pub fn identity_bytes(snaplen: u32, linktype: u32) -> Option<u32> {
    if snaplen == 0 || snaplen >= crate::capture::MAX_SNAPLEN {
        return None;
    }
    Some(snaplen.saturating_sub(link_header_bytes(linktype)))
}

/// The link header [`identity_bytes`] allows for `linktype`.
pub fn link_header_bytes(linktype: u32) -> u32 {
    use crate::dissect::*;
    match linktype {
        LINKTYPE_RAW | DLT_RAW_BSD | DLT_RAW_OPENBSD | LINKTYPE_IPV4 | LINKTYPE_IPV6 => 0,
        LINKTYPE_NULL | LINKTYPE_LOOP | LINKTYPE_C_HDLC | LINKTYPE_PPP | LINKTYPE_PPP_HDLC
        | LINKTYPE_MPLS => 4,
        LINKTYPE_ETHERNET => 14,
        LINKTYPE_LINUX_SLL => 16,
        LINKTYPE_LINUX_SLL2 => 20,
        LINKTYPE_IPOIB => 44,
        // 24-byte MAC header, QoS Control, LLC/SNAP
        LINKTYPE_IEEE802_11 => 34,
        _ => 128,
    }
}

/// The identity byte limit two points must agree on: the fewer IP bytes either capture keeps
/// (see [`identity_bytes`]), `None` when neither cuts packets. Frames with longer link headers
/// than usual (VLAN tags, MPLS labels) keep fewer bytes still: those are counted in
/// [`crate::records::InputStats::identity_short`].
pub fn common_identity_bytes(
    a: crate::capture::InterfaceInfo,
    b: crate::capture::InterfaceInfo,
) -> Option<u32> {
    match (
        identity_bytes(a.snaplen, a.linktype),
        identity_bytes(b.snaplen, b.linktype),
    ) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dissect::{LINKTYPE_ETHERNET, dissect};

    fn v4_frame() -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12] = 0x08;
        let mut ip = vec![
            0x45, 0x00, 0, 48, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        ip.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 28, 0, 0]);
        ip.extend_from_slice(&[0xab; 20]);
        f.extend_from_slice(&ip);
        f
    }

    fn id_of(f: &[u8]) -> u64 {
        let d = dissect(LINKTYPE_ETHERNET, f).unwrap();
        frame_identity(f, &d, DEFAULT_IDENTITY_SEED)
    }

    #[test]
    fn router_rewrites_keep_identity() {
        let a = v4_frame();
        let mut b = a.clone();
        b[0..12].copy_from_slice(&[9; 12]); // new MACs
        b[14 + 8] -= 1; // TTL
        b[14 + 10] = 0xde; // checksum
        b[14 + 11] = 0xad;
        b[14 + 1] = 0xbb; // DSCP + ECN CE
        b.extend_from_slice(&[0; 6]); // Ethernet padding after the IP packet
        assert_eq!(id_of(&a), id_of(&b));
    }

    #[test]
    fn other_fields_change_identity() {
        let a = v4_frame();
        for pos in [14 + 4, 14 + 9, 14 + 12, 14 + 20, 14 + 27, 14 + 40] {
            let mut b = a.clone();
            b[pos] ^= 1;
            assert_ne!(id_of(&a), id_of(&b), "byte {pos}");
        }
        let d = dissect(LINKTYPE_ETHERNET, &a).unwrap();
        assert_ne!(frame_identity(&a, &d, 1), frame_identity(&a, &d, 2));
    }

    #[test]
    fn same_snaplen_same_identity() {
        let a = v4_frame();
        let cut = &a[..40];
        let mut b = a.clone();
        b[14 + 8] = 3;
        assert_eq!(id_of(cut), id_of(&b[..40]));
        assert_ne!(id_of(cut), id_of(&a));
    }

    #[test]
    fn ipv6_traffic_class_and_hop_limit_are_masked() {
        let mut f = vec![0u8; 14];
        f[12] = 0x86;
        f[13] = 0xdd;
        let mut ip = vec![0x60, 0x01, 0x23, 0x45, 0, 8, 17, 64];
        ip.extend_from_slice(&[0x20; 32]);
        ip.extend_from_slice(&[0, 1, 0, 2, 0, 8, 0, 0]);
        f.extend_from_slice(&ip);
        let mut g = f.clone();
        g[14] = 0x6f; // traffic class high nibble
        g[15] = 0xf1; // traffic class low nibble, flow label kept
        g[14 + 7] = 1;
        assert_eq!(id_of(&f), id_of(&g));
        let mut h = f.clone();
        h[15] = 0x02; // flow label changed
        assert_ne!(id_of(&f), id_of(&h));
    }

    /// A bare 802.11 capture keeps what follows a QoS data header and LLC/SNAP; radiotap's
    /// length varies, so it counts as 128 bytes.
    #[test]
    fn ieee802_11_identity_bytes() {
        use crate::dissect::{LINKTYPE_IEEE802_11, LINKTYPE_IEEE802_11_RADIOTAP};
        assert_eq!(identity_bytes(200, LINKTYPE_IEEE802_11), Some(166));
        assert_eq!(identity_bytes(200, LINKTYPE_IEEE802_11_RADIOTAP), Some(72));
    }
}
