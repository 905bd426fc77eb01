use super::*;
use crate::identity::{DEFAULT_IDENTITY_SEED, frame_identity};
use proptest::prelude::*;

fn ipv4_tcp(total_extra: usize) -> Vec<u8> {
    let total = 40 + total_extra;
    let mut ip = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0x40,
        0,
        64,
        6,
        0,
        0,
        192,
        0,
        2,
        1,
        198,
        51,
        100,
        7,
    ];
    ip.extend_from_slice(&[0x04, 0xd2, 0x01, 0xbb]); // 1234 -> 443
    ip.extend_from_slice(&[0; 16]);
    ip.extend(std::iter::repeat_n(0x55, total_extra));
    ip
}

fn ipv6_with(next: u8, ext: &[u8], l4: &[u8]) -> Vec<u8> {
    let payload = ext.len() + l4.len();
    let mut ip = vec![0x60, 0, 0, 0, (payload >> 8) as u8, payload as u8, next, 64];
    let mut src = [0u8; 16];
    src[0] = 0x20;
    src[1] = 0x01;
    src[2] = 0x0d;
    src[3] = 0xb8;
    src[15] = 1;
    let mut dst = src;
    dst[15] = 2;
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    ip.extend_from_slice(ext);
    ip.extend_from_slice(l4);
    ip
}

fn eth(ethertype: u16, tags: &[u16], payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0xaa; 12];
    for t in tags {
        f.extend_from_slice(&t.to_be_bytes());
        f.extend_from_slice(&[0x00, 0x64]);
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

#[test]
fn ethernet_ipv4_tcp() {
    let f = eth(0x0800, &[], &ipv4_tcp(10));
    let d = dissect(LINKTYPE_ETHERNET, &f).unwrap();
    assert_eq!(
        (d.ip_offset, d.ip_end, d.ip_len, d.header_len),
        (14, 64, 50, 20)
    );
    assert_eq!(d.flow.to_string(), "tcp 192.0.2.1:1234 > 198.51.100.7:443");
}

#[test]
fn vlan_and_qinq_tags() {
    let ip = ipv4_tcp(0);
    let plain = dissect(LINKTYPE_ETHERNET, &eth(0x0800, &[], &ip)).unwrap();
    let one = dissect(LINKTYPE_ETHERNET, &eth(0x0800, &[0x8100], &ip)).unwrap();
    let two = dissect(LINKTYPE_ETHERNET, &eth(0x0800, &[0x88a8, 0x8100], &ip)).unwrap();
    assert_eq!(one.ip_offset, 18);
    assert_eq!(two.ip_offset, 22);
    assert_eq!(plain.flow, two.flow);
    // identity does not see link-layer bytes, tags included
    let f0 = eth(0x0800, &[], &ip);
    let f2 = eth(0x0800, &[0x88a8, 0x8100], &ip);
    assert_eq!(frame_identity(&f0, &plain, 1), frame_identity(&f2, &two, 1));
}

#[test]
fn ethernet_padding_is_not_ip() {
    let mut f = eth(0x0800, &[], &ipv4_tcp(0));
    f.extend_from_slice(&[0; 6]);
    let d = dissect(LINKTYPE_ETHERNET, &f).unwrap();
    assert_eq!(d.ip_end, 14 + 40);
}

#[test]
fn cooked_raw_and_loopback_headers() {
    let ip = ipv4_tcp(0);
    let mut sll = vec![0u8; 14];
    sll.extend_from_slice(&0x0800u16.to_be_bytes());
    sll.extend_from_slice(&ip);
    let mut sll2 = 0x0800u16.to_be_bytes().to_vec();
    sll2.extend_from_slice(&[0; 18]);
    sll2.extend_from_slice(&ip);
    let mut null = 2u32.to_le_bytes().to_vec();
    null.extend_from_slice(&ip);
    let mut null_be = 2u32.to_be_bytes().to_vec();
    null_be.extend_from_slice(&ip);
    let mut lo = 2u32.to_be_bytes().to_vec();
    lo.extend_from_slice(&ip);
    let want = dissect(LINKTYPE_RAW, &ip).unwrap().flow;
    for (lt, f, off) in [
        (LINKTYPE_LINUX_SLL, &sll, 16),
        (LINKTYPE_LINUX_SLL2, &sll2, 20),
        (LINKTYPE_NULL, &null, 4),
        (LINKTYPE_NULL, &null_be, 4),
        (LINKTYPE_LOOP, &lo, 4),
        (LINKTYPE_IPV4, &ip, 0),
        (12, &ip, 0),
    ] {
        let d = dissect(lt, f).unwrap();
        assert_eq!((d.ip_offset, d.flow), (off, want), "linktype {lt}");
    }
    assert_eq!(
        dissect(LINKTYPE_IPV6, &ip),
        Err(Skip::Malformed(
            "IP version does not match the link-layer protocol"
        ))
    );
}

#[test]
fn ipv6_extension_headers_are_walked() {
    let udp = [0x13, 0x88, 0x00, 0x35, 0, 8, 0, 0];
    // hop-by-hop (8 bytes) then destination options (16 bytes) then UDP
    let mut ext = vec![60, 0, 1, 4, 0, 0, 0, 0];
    ext.extend_from_slice(&[17, 1, 1, 12]);
    ext.extend_from_slice(&[0; 12]);
    let ip = ipv6_with(0, &ext, &udp);
    let d = dissect(LINKTYPE_RAW, &ip).unwrap();
    assert_eq!(
        d.flow.to_string(),
        "udp [2001:db8::1]:5000 > [2001:db8::2]:53"
    );
    // first fragment has ports, a later fragment has none
    let frag0 = [17, 0, 0x00, 0x01, 0, 0, 0, 7];
    let d = dissect(LINKTYPE_RAW, &ipv6_with(44, &frag0, &udp)).unwrap();
    assert_eq!((d.flow.proto, d.flow.sport), (17, 5000));
    let frag1 = [17, 0, 0x00, 0x09, 0, 0, 0, 7];
    let d = dissect(LINKTYPE_RAW, &ipv6_with(44, &frag1, &udp)).unwrap();
    assert_eq!((d.flow.proto, d.flow.sport, d.flow.dport), (17, 0, 0));
    // AH: length in 4-byte units minus 2
    let ah = [6, 1, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8];
    let tcp = [0x00, 0x50, 0x1f, 0x90];
    let d = dissect(LINKTYPE_RAW, &ipv6_with(51, &ah, &tcp)).unwrap();
    assert_eq!((d.flow.proto, d.flow.sport, d.flow.dport), (6, 80, 8080));
    // extension header cut by the snaplen: protocol unknown beyond it, no ports, not fatal
    let ip = ipv6_with(0, &ext, &udp);
    let d = dissect(LINKTYPE_RAW, &ip[..44]).unwrap();
    assert_eq!(d.flow.sport, 0);
}

#[test]
fn icmp_flows() {
    let mut ip = ipv4_tcp(0);
    ip[9] = 1;
    ip[20..28].copy_from_slice(&[8, 0, 0, 0, 0x12, 0x34, 0, 1]);
    let d = dissect(LINKTYPE_RAW, &ip).unwrap();
    assert_eq!((d.flow.sport, d.flow.dport), (0x1234, 0x0800));
    ip[20] = 3; // destination unreachable: no identifier
    ip[21] = 1;
    let d = dissect(LINKTYPE_RAW, &ip).unwrap();
    assert_eq!((d.flow.sport, d.flow.dport), (0, 0x0301));
    let d = dissect(
        LINKTYPE_RAW,
        &ipv6_with(58, &[], &[128, 0, 0, 0, 0, 9, 0, 1]),
    )
    .unwrap();
    assert_eq!(
        (d.flow.proto, d.flow.sport, d.flow.dport),
        (58, 9, 128 << 8)
    );
}

#[test]
fn ipv4_fragments_and_opaque_protocols() {
    let mut ip = ipv4_tcp(0);
    ip[6] = 0x00;
    ip[7] = 0x10; // offset 16*8: not the first fragment
    let d = dissect(LINKTYPE_RAW, &ip).unwrap();
    assert_eq!((d.flow.sport, d.flow.dport), (0, 0));
    let mut ip = ipv4_tcp(0);
    ip[9] = 47; // GRE: opaque
    let d = dissect(LINKTYPE_RAW, &ip).unwrap();
    assert_eq!((d.flow.proto, d.flow.sport), (47, 0));
}

#[test]
fn zero_total_length_means_captured_length() {
    let mut ip = ipv4_tcp(20);
    ip[2] = 0;
    ip[3] = 0;
    let d = dissect(LINKTYPE_RAW, &ip).unwrap();
    assert_eq!(d.ip_len as usize, ip.len());
}

#[test]
fn skips() {
    assert_eq!(
        dissect(LINKTYPE_ETHERNET, &eth(0x0806, &[], &[0; 28])),
        Err(Skip::NotIp)
    );
    assert_eq!(
        dissect(LINKTYPE_ETHERNET, &eth(0x0026, &[], &[0; 28])),
        Err(Skip::NotIp)
    );
    assert!(matches!(
        dissect(LINKTYPE_ETHERNET, &[0; 10]),
        Err(Skip::Malformed(_))
    ));
    assert!(matches!(
        dissect(LINKTYPE_ETHERNET, &eth(0x0800, &[], &[0x45, 0, 0])),
        Err(Skip::Malformed(_))
    ));
    let mut bad_ihl = ipv4_tcp(0);
    bad_ihl[0] = 0x42;
    assert!(matches!(
        dissect(LINKTYPE_RAW, &bad_ihl),
        Err(Skip::Malformed(_))
    ));
    let mut short_total = ipv4_tcp(0);
    short_total[3] = 10;
    assert!(matches!(
        dissect(LINKTYPE_RAW, &short_total),
        Err(Skip::Malformed(_))
    ));
    assert_eq!(dissect(LINKTYPE_RAW, &[0x10; 30]), Err(Skip::NotIp));
    assert_eq!(dissect(147, &ipv4_tcp(0)), Err(Skip::UnsupportedLinkType));
    assert!(!supports_linktype(147));
    assert_eq!(linktype_name(147), "LINKTYPE_USER0");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    /// Hostile frames never panic, and whatever is dissected stays inside the frame.
    #[test]
    fn arbitrary_frames_never_panic(lt in prop::sample::select(vec![0u32, 1, 9, 50, 101, 104, 105, 108, 113, 127, 219, 228, 229, 239, 242, 258, 276]),
                                    v in prop::sample::select(vec![0x45u8, 0x4f, 0x60, 0x00]),
                                    mut f in proptest::collection::vec(any::<u8>(), 0..200)) {
        if !f.is_empty() { let i = f.len() / 3; f[i] = v; }
        if let Ok(d) = dissect(lt, &f) {
            prop_assert!(d.ip_offset <= d.ip_end && d.ip_end <= f.len());
            let _ = frame_identity(&f, &d, DEFAULT_IDENTITY_SEED);
        }
    }
}

/// One MPLS label stack entry: label, traffic class 0, bottom-of-stack bit, TTL.
fn label(l: u32, bottom: bool, ttl: u8) -> [u8; 4] {
    let v = (l << 12) | (u32::from(bottom) << 8) | u32::from(ttl);
    v.to_be_bytes()
}

fn identity(lt: u32, f: &[u8]) -> u64 {
    let d = dissect(lt, f).unwrap_or_else(|e| panic!("linktype {lt}: {e:?}"));
    frame_identity(f, &d, DEFAULT_IDENTITY_SEED)
}

/// Item 13: IP under any MPLS label stack is IP, and its identity is the IP packet's: labels
/// swapped at every hop do not change it.
#[test]
fn mpls_label_stacks_are_skipped() {
    let ip = ipv4_tcp(8);
    let plain = identity(LINKTYPE_ETHERNET, &eth(0x0800, &[], &ip));
    for depth in [1usize, 2, 5, MAX_MPLS_LABELS] {
        for ethertype in [0x8847u16, 0x8848] {
            let mut stack = Vec::new();
            for k in 0..depth {
                stack.extend_from_slice(&label(16 + k as u32 * 1000, k + 1 == depth, 64));
            }
            let mut payload = stack.clone();
            payload.extend_from_slice(&ip);
            let f = eth(ethertype, &[], &payload);
            let d = dissect(LINKTYPE_ETHERNET, &f).unwrap();
            assert_eq!(d.ip_offset, 14 + 4 * depth);
            assert_eq!(d.flow.to_string(), "tcp 192.0.2.1:1234 > 198.51.100.7:443");
            assert_eq!(identity(LINKTYPE_ETHERNET, &f), plain, "depth {depth}");
            // the next hop swapped every label and decremented every TTL
            let mut g = f.clone();
            for k in 0..depth {
                g[14 + 4 * k..18 + 4 * k].copy_from_slice(&label(
                    99_000 + k as u32,
                    k + 1 == depth,
                    9,
                ));
            }
            assert_eq!(identity(LINKTYPE_ETHERNET, &g), plain);
        }
    }
    // explicit null: label 0 announces IPv4, label 2 IPv6
    let mut p = label(0, true, 1).to_vec();
    p.extend_from_slice(&ip);
    assert_eq!(identity(LINKTYPE_ETHERNET, &eth(0x8847, &[], &p)), plain);
    let v6 = ipv6_with(17, &[], &[0, 1, 0, 2, 0, 8, 0, 0]);
    let mut p = label(2, true, 1).to_vec();
    p.extend_from_slice(&v6);
    assert_eq!(
        dissect(LINKTYPE_ETHERNET, &eth(0x8847, &[], &p))
            .unwrap()
            .version,
        IpVersion::V6
    );
    let mut p = label(2, true, 1).to_vec();
    p.extend_from_slice(&ip);
    assert!(matches!(
        dissect(LINKTYPE_ETHERNET, &eth(0x8847, &[], &p)),
        Err(Skip::Malformed(_))
    ));
    // under a VLAN tag, and on bare MPLS links
    let mut p = label(100, true, 1).to_vec();
    p.extend_from_slice(&ip);
    assert_eq!(
        identity(LINKTYPE_ETHERNET, &eth(0x8847, &[0x8100], &p)),
        plain
    );
    assert_eq!(identity(LINKTYPE_MPLS, &p), plain);
    // a pseudowire control word (first nibble 0) carries Ethernet, not IP
    let mut p = label(100, true, 1).to_vec();
    p.extend_from_slice(&[0, 0, 0, 0]);
    p.extend_from_slice(&eth(0x0800, &[], &ip));
    assert_eq!(
        dissect(LINKTYPE_ETHERNET, &eth(0x8847, &[], &p)),
        Err(Skip::NotIp)
    );
}

#[test]
fn hostile_mpls_stacks_are_malformed() {
    // no bottom of stack within the limit, then the frame ends
    let mut p = Vec::new();
    for _ in 0..MAX_MPLS_LABELS + 1 {
        p.extend_from_slice(&label(5, false, 1));
    }
    p.extend_from_slice(&ipv4_tcp(0));
    assert!(matches!(
        dissect(LINKTYPE_ETHERNET, &eth(0x8847, &[], &p)),
        Err(Skip::Malformed(_))
    ));
    let p = [label(5, false, 1), label(6, false, 1)].concat();
    assert!(matches!(
        dissect(LINKTYPE_ETHERNET, &eth(0x8847, &[], &p)),
        Err(Skip::Malformed(_))
    ));
    assert!(matches!(
        dissect(LINKTYPE_ETHERNET, &eth(0x8847, &[], &[0x00, 0x01])),
        Err(Skip::Malformed(_))
    ));
    assert!(matches!(
        dissect(LINKTYPE_ETHERNET, &eth(0x8847, &[], &label(5, true, 1))),
        Err(Skip::Malformed(_))
    ));
    assert!(matches!(
        dissect(LINKTYPE_MPLS, &[]),
        Err(Skip::Malformed(_))
    ));
}

/// PPPoE sessions carry PPP, which carries IP (or MPLS).
#[test]
fn pppoe_sessions_are_skipped() {
    let ip = ipv4_tcp(0);
    let plain = identity(LINKTYPE_RAW, &ip);
    let pppoe = |proto: &[u8], payload: &[u8]| {
        let mut p = vec![0x11, 0x00, 0x12, 0x34];
        p.extend_from_slice(&((proto.len() + payload.len()) as u16).to_be_bytes());
        p.extend_from_slice(proto);
        p.extend_from_slice(payload);
        p
    };
    let f = eth(0x8864, &[0x8100], &pppoe(&[0x00, 0x21], &ip));
    assert_eq!(dissect(LINKTYPE_ETHERNET, &f).unwrap().ip_offset, 18 + 8);
    assert_eq!(identity(LINKTYPE_ETHERNET, &f), plain);
    let v6 = ipv6_with(17, &[], &[0, 1, 0, 2, 0, 8, 0, 0]);
    let f = eth(0x8864, &[], &pppoe(&[0x00, 0x57], &v6));
    assert_eq!(
        dissect(LINKTYPE_ETHERNET, &f).unwrap().version,
        IpVersion::V6
    );
    let mpls_ip = [&label(7, true, 3)[..], &ip].concat();
    let f = eth(0x8864, &[], &pppoe(&[0x02, 0x81], &mpls_ip));
    assert_eq!(identity(LINKTYPE_ETHERNET, &f), plain);
    // LCP, discovery stage, zero-length PPP
    let f = eth(0x8864, &[], &pppoe(&[0xc0, 0x21], &[1, 2, 3, 4]));
    assert_eq!(dissect(LINKTYPE_ETHERNET, &f), Err(Skip::NotIp));
    assert_eq!(
        dissect(
            LINKTYPE_ETHERNET,
            &eth(0x8863, &[], &[0x11, 0x09, 0, 0, 0, 0])
        ),
        Err(Skip::NotIp)
    );
    let f = eth(0x8864, &[], &pppoe(&[], &[]));
    assert!(matches!(
        dissect(LINKTYPE_ETHERNET, &f),
        Err(Skip::Malformed(_))
    ));
    assert!(matches!(
        dissect(LINKTYPE_ETHERNET, &eth(0x8864, &[], &[0x11])),
        Err(Skip::Malformed(_))
    ));
}

/// Item 14: the link types of PPP links, Cisco routers, NFLOG, InfiniBand and macOS.
#[test]
fn more_link_types() {
    let ip = ipv4_tcp(4);
    let plain = identity(LINKTYPE_RAW, &ip);
    let with = |head: &[u8]| [head, &ip[..]].concat();
    for (lt, f, off) in [
        (LINKTYPE_PPP, with(&[0xff, 0x03, 0x00, 0x21]), 4),
        (LINKTYPE_PPP, with(&[0x00, 0x21]), 2), // no HDLC framing
        (LINKTYPE_PPP, with(&[0x21]), 1),       // protocol-field compression
        (LINKTYPE_PPP, with(&[0x01, 0x03, 0x21]), 3), // pppd's "out" direction byte
        (LINKTYPE_PPP_HDLC, with(&[0xff, 0x03, 0x00, 0x21]), 4),
        (LINKTYPE_PPP_HDLC, with(&[0x0f, 0x00, 0x08, 0x00]), 4), // Cisco PPP with HDLC framing
        (LINKTYPE_C_HDLC, with(&[0x0f, 0x00, 0x08, 0x00]), 4),
        (LINKTYPE_C_HDLC, with(&[0x8f, 0x00, 0x08, 0x00]), 4),
    ] {
        let d = dissect(lt, &f).unwrap_or_else(|e| panic!("{lt} {f:02x?}: {e:?}"));
        assert_eq!(d.ip_offset, off, "{lt} {:02x?}", &f[..4]);
        assert_eq!(identity(lt, &f), plain);
    }
    let mpls_ip = [&label(7, true, 3)[..], &ip].concat();
    assert_eq!(
        identity(
            LINKTYPE_PPP,
            &[&[0xff, 0x03, 0x02, 0x81][..], &mpls_ip].concat()
        ),
        plain
    );
    assert_eq!(
        identity(
            LINKTYPE_C_HDLC,
            &[&[0x0f, 0x00, 0x88, 0x47][..], &mpls_ip].concat()
        ),
        plain
    );
    // LCP, SLARP, zero-length PPP
    assert_eq!(
        dissect(LINKTYPE_PPP, &[0xff, 0x03, 0xc0, 0x21, 1]),
        Err(Skip::NotIp)
    );
    assert_eq!(
        dissect(LINKTYPE_C_HDLC, &[0x8f, 0x00, 0x80, 0x35, 0]),
        Err(Skip::NotIp)
    );
    for lt in [LINKTYPE_PPP, LINKTYPE_PPP_HDLC, LINKTYPE_C_HDLC] {
        for f in [
            &[][..],
            &[0xff][..],
            &[0xff, 0x03][..],
            &[0xff, 0x03, 0x00][..],
        ] {
            // (a lone 0xff is PPP protocol 0xff, compressed, with nothing in it: not IP)
            let want_not_ip = lt == LINKTYPE_PPP && f.len() == 1;
            match dissect(lt, f) {
                Err(Skip::NotIp) if want_not_ip => {}
                Err(Skip::Malformed(_)) if !want_not_ip => {}
                other => panic!("{lt} {f:02x?}: {other:?}"),
            }
        }
    }

    // IPoIB: 40-byte pseudo-header, EtherType, 2 reserved bytes
    let mut f = vec![0u8; 40];
    f.extend_from_slice(&[0x08, 0x00, 0, 0]);
    f.extend_from_slice(&ip);
    assert_eq!(dissect(LINKTYPE_IPOIB, &f).unwrap().ip_offset, 44);
    assert_eq!(identity(LINKTYPE_IPOIB, &f), plain);
    assert!(matches!(
        dissect(LINKTYPE_IPOIB, &f[..43]),
        Err(Skip::Malformed(_))
    ));

    // PKTAP: 108-byte little-endian header naming the inner DLT (Ethernet here)
    let inner = eth(0x0800, &[0x8100], &ip);
    let mut f = vec![0u8; 108];
    f[0..4].copy_from_slice(&108u32.to_le_bytes());
    f[4..8].copy_from_slice(&1u32.to_le_bytes());
    f[8..12].copy_from_slice(&1u32.to_le_bytes());
    f[12..15].copy_from_slice(b"en0");
    f.extend_from_slice(&inner);
    assert_eq!(dissect(LINKTYPE_PKTAP, &f).unwrap().ip_offset, 108 + 18);
    assert_eq!(identity(LINKTYPE_PKTAP, &f), plain);
    let mut g = f.clone();
    g[8..12].copy_from_slice(&LINKTYPE_PKTAP.to_le_bytes()); // no PKTAP inside PKTAP
    assert_eq!(dissect(LINKTYPE_PKTAP, &g), Err(Skip::NotIp));
    let mut g = f.clone();
    g[0..4].copy_from_slice(&4000u32.to_le_bytes());
    assert!(matches!(
        dissect(LINKTYPE_PKTAP, &g),
        Err(Skip::Malformed(_))
    ));
}

/// NFLOG: TLVs in the capturing host's byte order, whichever it is.
#[test]
fn nflog_in_both_byte_orders() {
    let ip = ipv4_tcp(4);
    let plain = identity(LINKTYPE_RAW, &ip);
    for big in [false, true] {
        let w16 = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let tlv = |t: u16, value: &[u8]| {
            let mut b = w16(4 + value.len() as u16).to_vec();
            b.extend_from_slice(&w16(t));
            b.extend_from_slice(value);
            while !b.len().is_multiple_of(4) {
                b.push(0);
            }
            b
        };
        let mut f = vec![2, 0, 0, 5]; // AF_INET, version 0, resource id 5
        f.extend(tlv(1, &[0x08, 0x00, 3, 0])); // NFULA_PACKET_HDR
        f.extend(tlv(10, b"prefix\0")); // NFULA_PREFIX, padded
        f.extend(tlv(9, &ip)); // NFULA_PAYLOAD
        let d = dissect(LINKTYPE_NFLOG, &f).unwrap();
        assert_eq!(d.ip_offset, 4 + 8 + 12 + 4, "big {big}");
        assert_eq!(identity(LINKTYPE_NFLOG, &f), plain);
        // no payload TLV, a TLV shorter than its header
        let g = [&[2u8, 0, 0, 5][..], &tlv(1, &[0, 0, 0, 0])].concat();
        assert!(matches!(
            dissect(LINKTYPE_NFLOG, &g),
            Err(Skip::Malformed(_))
        ));
        let mut g = f.clone();
        g[12..14].copy_from_slice(&w16(2));
        assert!(matches!(
            dissect(LINKTYPE_NFLOG, &g),
            Err(Skip::Malformed(_))
        ));
    }
    assert!(matches!(
        dissect(LINKTYPE_NFLOG, &[2, 1, 0, 0, 8, 0, 1, 0]),
        Err(Skip::Malformed(_))
    ));
}

#[test]
fn refused_link_types_carry_libpcap_names() {
    for (lt, name) in [
        (127, "LINKTYPE_IEEE802_11_RADIOTAP"),
        (105, "LINKTYPE_IEEE802_11"),
        (6, "LINKTYPE_IEEE802_5"),
        (117, "LINKTYPE_PFLOG"),
        (192, "LINKTYPE_PPI"),
        (249, "LINKTYPE_USBPCAP"),
        (276, "LINKTYPE_LINUX_SLL2"),
        (12, "DLT_RAW"),
    ] {
        assert_eq!(linktype_name(lt), name);
    }
    assert_eq!(linktype_name(60_000), "a value libpcap does not define");
    for lt in [9, 50, 104, 105, 127, 239, 242, 258, 276, 219] {
        assert!(supports_linktype(lt), "{lt}");
    }
}

/// Frame control byte 0 (IEEE 802.11-2020 §9.2.4.1.1): version 0, type, subtype.
const fn fc(kind: u8, subtype: u8) -> u8 {
    (subtype << 4) | (kind << 2)
}
const DATA: u8 = fc(2, 0);
const NULL: u8 = fc(2, 4);
const QOS_DATA: u8 = fc(2, 8);
const QOS_NULL: u8 = fc(2, 12);
const BEACON: u8 = fc(0, 8);
const ACK: u8 = fc(1, 13);
/// Frame control byte 1 flags.
const TO_DS: u8 = 0x01;
const FROM_DS: u8 = 0x02;
const MORE_FRAGMENTS: u8 = 0x04;
const RETRY: u8 = 0x08;
const PROTECTED: u8 = 0x40;
const ORDER: u8 = 0x80;

/// An 802.11 frame: frame control, duration, three addresses (four with ToDS and FromDS),
/// sequence control (fragment `frag`), QoS Control (its first byte `qos`) and HT Control as
/// the frame control asks, then `body`.
fn wifi_frame(fc0: u8, fc1: u8, qos: Option<u8>, frag: u8, body: &[u8]) -> Vec<u8> {
    let mut f = vec![fc0, fc1, 0x2c, 0x00];
    for a in 1..=3u8 {
        f.extend_from_slice(&[0x02, 0x11, 0x22, 0x33, 0x44, a]);
    }
    f.extend_from_slice(&[0x70 | frag, 0x1b]); // sequence number 0x1b7, fragment
    if fc1 & (TO_DS | FROM_DS) == TO_DS | FROM_DS {
        f.extend_from_slice(&[0x02, 0x11, 0x22, 0x33, 0x44, 4]);
    }
    if let Some(q) = qos {
        f.extend_from_slice(&[q, 0x00]);
        if fc1 & ORDER != 0 {
            f.extend_from_slice(&[0x00, 0x00, 0x0c, 0x00]); // HT Control
        }
    }
    f.extend_from_slice(body);
    f
}

/// An RFC 1042 LLC/SNAP header (OUI `oui`) and EtherType, then `payload`.
fn snap(oui: [u8; 3], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0xaa, 0xaa, 0x03];
    b.extend_from_slice(&oui);
    b.extend_from_slice(&ethertype.to_be_bytes());
    b.extend_from_slice(payload);
    b
}
const RFC1042: [u8; 3] = [0, 0, 0];

/// A radiotap header as a Linux monitor interface writes it (TSFT, Flags `flags`, Rate,
/// Channel, antenna signal, antenna, RX flags: 26 bytes), then `frame`, then an FCS when
/// the flags say the frame has one.
fn radiotap(flags: u8, frame: &[u8]) -> Vec<u8> {
    let present: u32 = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5) | (1 << 11) | (1 << 14);
    let mut h = vec![0, 0, 26, 0];
    h.extend_from_slice(&present.to_le_bytes());
    h.extend_from_slice(&0x0001_0203_0405_0607u64.to_le_bytes()); // TSFT
    h.push(flags);
    h.push(12); // 6 Mb/s
    h.extend_from_slice(&2437u16.to_le_bytes());
    h.extend_from_slice(&0x00c0u16.to_le_bytes()); // 2 GHz, OFDM
    h.push(0xc4); // -60 dBm
    h.push(1); // antenna 1
    h.extend_from_slice(&0u16.to_le_bytes());
    assert_eq!(h.len(), 26);
    h.extend_from_slice(frame);
    if flags & 0x10 != 0 {
        h.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    }
    h
}

/// Item 11: the IP packet of an 802.11 data frame is the IP packet an Ethernet capture of it
/// holds: same offsets into the IP bytes, same flow, same identity, the FCS left out.
#[test]
fn ieee802_11_data_frames_carry_the_ethernet_packet() {
    let v4 = ipv4_tcp(6);
    let v6 = ipv6_with(17, &[], &[0x13, 0x88, 0x00, 0x35, 0, 8, 0, 0]);
    for ip in [&v4, &v6] {
        let ethertype = if ip[0] >> 4 == 4 { 0x0800 } else { 0x86dd };
        let want = dissect(LINKTYPE_ETHERNET, &eth(ethertype, &[], ip)).unwrap();
        let want_id = identity(LINKTYPE_ETHERNET, &eth(ethertype, &[], ip));
        let body = snap(RFC1042, ethertype, ip);
        for (what, lt, f, off) in [
            // QoS data to the AP, radiotap with the FCS flag
            (
                "qos+fcs",
                LINKTYPE_IEEE802_11_RADIOTAP,
                radiotap(0x10, &wifi_frame(QOS_DATA, TO_DS, Some(0x05), 0, &body)),
                26 + 26 + 8,
            ),
            // the same, a retry, without an FCS
            (
                "qos retry",
                LINKTYPE_IEEE802_11_RADIOTAP,
                radiotap(0, &wifi_frame(QOS_DATA, TO_DS | RETRY, Some(0), 0, &body)),
                26 + 26 + 8,
            ),
            // +HTC: HT Control after QoS Control
            (
                "qos+htc",
                LINKTYPE_IEEE802_11,
                wifi_frame(QOS_DATA, FROM_DS | ORDER, Some(0), 0, &body),
                30 + 8,
            ),
            // WDS: four addresses, plain data (Order on non-QoS data adds nothing)
            (
                "wds",
                LINKTYPE_IEEE802_11,
                wifi_frame(DATA, TO_DS | FROM_DS | ORDER, None, 0, &body),
                30 + 8,
            ),
            // the data-pad flag: a 26-byte QoS header padded to 28
            (
                "pad",
                LINKTYPE_IEEE802_11_RADIOTAP,
                radiotap(
                    0x20,
                    &wifi_frame(
                        QOS_DATA,
                        FROM_DS,
                        Some(0),
                        0,
                        &[&[0, 0][..], &body].concat(),
                    ),
                ),
                26 + 28 + 8,
            ),
            // 802.1H bridge-tunnel OUI
            (
                "bridge-tunnel",
                LINKTYPE_IEEE802_11,
                wifi_frame(DATA, 0, None, 0, &snap([0, 0, 0xf8], ethertype, ip)),
                24 + 8,
            ),
        ] {
            let d = dissect(lt, &f).unwrap_or_else(|e| panic!("{what}: {e:?}"));
            assert_eq!(d.ip_offset, off, "{what}");
            assert_eq!(
                (
                    d.ip_end - d.ip_offset,
                    d.ip_len,
                    d.version,
                    d.header_len,
                    d.flow
                ),
                (
                    want.ip_end - want.ip_offset,
                    want.ip_len,
                    want.version,
                    want.header_len,
                    want.flow
                ),
                "{what}"
            );
            assert_eq!(identity(lt, &f), want_id, "{what}");
        }
    }
    // the FCS is cut before the IP length is read: a total length of 0 is the captured length
    let mut ip = ipv4_tcp(6);
    ip[2..4].copy_from_slice(&[0, 0]);
    let f = radiotap(
        0x10,
        &wifi_frame(QOS_DATA, TO_DS, Some(0), 0, &snap(RFC1042, 0x0800, &ip)),
    );
    let d = dissect(LINKTYPE_IEEE802_11_RADIOTAP, &f).unwrap();
    assert_eq!((d.ip_len as usize, d.ip_end), (ip.len(), f.len() - 4));
    // ... and PKTAP may carry radiotap (with its FCS) too
    let mut p = vec![0u8; 108];
    p[0..4].copy_from_slice(&108u32.to_le_bytes());
    p[4..8].copy_from_slice(&1u32.to_le_bytes());
    p[8..12].copy_from_slice(&LINKTYPE_IEEE802_11_RADIOTAP.to_le_bytes());
    p.extend_from_slice(&f);
    let d = dissect(LINKTYPE_PKTAP, &p).unwrap();
    assert_eq!((d.ip_offset, d.ip_end), (108 + 60, p.len() - 4));
}

/// Item 11: what 802.11 carries besides unencrypted IP in LLC/SNAP is counted non-IP.
#[test]
fn ieee802_11_frames_without_ip_are_not_ip() {
    let ip = ipv4_tcp(0);
    let body = snap(RFC1042, 0x0800, &ip);
    let beacon_body = [0u8; 12]
        .iter()
        .chain(&[0x64, 0, 0x11, 0x04, 0, 3])
        .chain(b"owl")
        .copied()
        .collect::<Vec<_>>();
    for (what, f) in [
        ("beacon", wifi_frame(BEACON, 0, None, 0, &beacon_body)),
        ("ack", vec![ACK, 0, 0, 0, 2, 0, 0, 0, 0, 1]),
        ("null", wifi_frame(NULL, TO_DS, None, 0, &[])),
        ("qos null", wifi_frame(QOS_NULL, TO_DS, Some(0), 0, &[])),
        // CCMP header then ciphertext
        (
            "protected",
            wifi_frame(
                QOS_DATA,
                TO_DS | PROTECTED,
                Some(0),
                0,
                &[&[1, 0, 0, 0x20, 0, 0, 0, 0][..], &body].concat(),
            ),
        ),
        (
            "a-msdu",
            wifi_frame(QOS_DATA, FROM_DS, Some(0x80), 0, &body),
        ),
        (
            "first fragment",
            wifi_frame(DATA, MORE_FRAGMENTS, None, 0, &body),
        ),
        ("last fragment", wifi_frame(DATA, 0, None, 1, &ip)),
        (
            "eapol",
            wifi_frame(
                QOS_DATA,
                FROM_DS,
                Some(0),
                0,
                &snap(RFC1042, 0x888e, &[2, 3, 0, 0]),
            ),
        ),
        (
            "arp",
            wifi_frame(DATA, FROM_DS, None, 0, &snap(RFC1042, 0x0806, &[0; 28])),
        ),
        (
            "other llc",
            wifi_frame(DATA, FROM_DS, None, 0, &[0x42, 0x42, 0x03, 0, 0, 0, 0, 0]),
        ),
        ("version 1", {
            let mut f = wifi_frame(DATA, 0, None, 0, &body);
            f[0] |= 1;
            f
        }),
    ] {
        assert_eq!(dissect(LINKTYPE_IEEE802_11, &f), Err(Skip::NotIp), "{what}");
        assert_eq!(
            dissect(LINKTYPE_IEEE802_11_RADIOTAP, &radiotap(0x10, &f)),
            Err(Skip::NotIp),
            "{what} over radiotap"
        );
    }
    // a frame that failed its FCS check is not measured, IP or not
    let f = radiotap(0x50, &wifi_frame(QOS_DATA, TO_DS, Some(0), 0, &body));
    assert_eq!(dissect(LINKTYPE_IEEE802_11_RADIOTAP, &f), Err(Skip::NotIp));
}

/// Radiotap's presence words: extension words are walked to find the fields, TSFT's
/// alignment is kept, and a header without Flags has no FCS.
#[test]
fn radiotap_presence_words_are_walked() {
    let ip = ipv4_tcp(2);
    let mac = wifi_frame(DATA, FROM_DS, None, 0, &snap(RFC1042, 0x0800, &ip));
    let want = identity(LINKTYPE_RAW, &ip);
    // word 0: TSFT, Flags, radiotap namespace next, extended; word 1: extended; word 2: none
    let w0: u32 = 1 | 2 | (1 << 29) | (1 << 31);
    let mut f = vec![0, 0, 40, 0];
    f.extend_from_slice(&w0.to_le_bytes());
    f.extend_from_slice(&(1u32 << 31).to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.extend_from_slice(&[0; 24]); // pad to 24 (8-aligned TSFT), TSFT, Flags at 32, 7 more
    assert_eq!(f.len(), 40);
    f[32] = 0x10;
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0; 4]);
    let d = dissect(LINKTYPE_IEEE802_11_RADIOTAP, &f).unwrap();
    assert_eq!((d.ip_offset, d.ip_end), (40 + 24 + 8, f.len() - 4));
    assert_eq!(identity(LINKTYPE_IEEE802_11_RADIOTAP, &f), want);
    // Flags without TSFT: right after the presence words; no Flags: no FCS
    let mut g = vec![0, 0, 9, 0, 2, 0, 0, 0, 0x10];
    g.extend_from_slice(&mac);
    g.extend_from_slice(&[0; 4]);
    assert_eq!(identity(LINKTYPE_IEEE802_11_RADIOTAP, &g), want);
    let mut g = vec![0, 0, 8, 0, 0, 0, 0, 0];
    g.extend_from_slice(&mac);
    assert_eq!(identity(LINKTYPE_IEEE802_11_RADIOTAP, &g), want);
}

/// Hostile radiotap and 802.11 headers are malformed frames, never a panic.
#[test]
fn hostile_ieee802_11_headers_are_malformed() {
    let mac = wifi_frame(
        QOS_DATA,
        TO_DS,
        Some(0),
        0,
        &snap(RFC1042, 0x0800, &ipv4_tcp(0)),
    );
    let good = radiotap(0x10, &mac);
    let with = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut f = good.clone();
        edit(&mut f);
        f
    };
    let rt = LINKTYPE_IEEE802_11_RADIOTAP;
    for (what, lt, f, want) in [
        (
            "version 1",
            rt,
            with(&|f| f[0] = 1),
            "radiotap version is not 0",
        ),
        (
            "it_len 7",
            rt,
            with(&|f| f[2] = 7),
            "radiotap length below 8 bytes",
        ),
        (
            "it_len past the frame",
            rt,
            with(&|f| f[2..4].copy_from_slice(&4000u16.to_le_bytes())),
            "radiotap length past the captured frame",
        ),
        (
            "extension words past it_len",
            rt,
            vec![0, 0, 12, 0, 0, 0, 0, 0x80, 0, 0, 0, 0x80, 0, 0, 0, 0],
            "radiotap presence words run past its length",
        ),
        (
            "flags past it_len",
            rt,
            with(&|f| f[2] = 16),
            "radiotap Flags field past its length",
        ),
        (
            "no room for the FCS",
            rt,
            radiotap(0x10, &[])[..27].to_vec(),
            "802.11 frame shorter than its FCS",
        ),
        (
            "four-address header cut",
            rt,
            radiotap(0, &wifi_frame(DATA, TO_DS | FROM_DS, None, 0, &[])[..28]),
            "802.11 header shorter than its frame type",
        ),
        (
            "HT Control cut",
            LINKTYPE_IEEE802_11,
            wifi_frame(QOS_DATA, ORDER, Some(0), 0, &[])[..29].to_vec(),
            "802.11 header shorter than its frame type",
        ),
        (
            "no LLC/SNAP",
            rt,
            radiotap(0, &wifi_frame(DATA, 0, None, 0, &[0xaa, 0xaa, 0x03])),
            "truncated LLC/SNAP header",
        ),
    ] {
        assert_eq!(dissect(lt, &f), Err(Skip::Malformed(want)), "{what}");
    }
}

/// Every truncation of an 802.11 frame is a per-frame outcome: malformed until the IP header
/// (and, with radiotap's FCS flag, the 4 bytes after it) is captured, then the packet, cut.
#[test]
fn truncated_ieee802_11_frames() {
    let ip = ipv4_tcp(12);
    let body = snap(RFC1042, 0x0800, &ip);
    let frames = [
        (
            LINKTYPE_IEEE802_11,
            wifi_frame(QOS_DATA, TO_DS, Some(0), 0, &body),
            26 + 8,
            0,
        ),
        (
            LINKTYPE_IEEE802_11,
            wifi_frame(DATA, TO_DS | FROM_DS, None, 0, &body),
            30 + 8,
            0,
        ),
        (
            LINKTYPE_IEEE802_11_RADIOTAP,
            radiotap(
                0x10,
                &wifi_frame(QOS_DATA, FROM_DS | ORDER, Some(0), 0, &body),
            ),
            26 + 30 + 8,
            4,
        ),
    ];
    for (lt, f, off, fcs) in frames {
        for n in 0..=f.len() {
            let got = dissect(lt, &f[..n]);
            if n < off + 20 + fcs {
                assert!(
                    matches!(got, Err(Skip::Malformed(_))),
                    "{lt} cut at {n}: {got:?}"
                );
            } else {
                let d = got.unwrap_or_else(|e| panic!("{lt} cut at {n}: {e:?}"));
                assert_eq!((d.ip_offset, d.ip_end), (off, n - fcs), "{lt} cut at {n}");
                assert_eq!(d.flow.src.to_string(), "192.0.2.1");
            }
        }
    }
    // frames that are not IP stay so as soon as their frame control says it
    for f in [
        wifi_frame(BEACON, 0, None, 0, &[0; 20]),
        wifi_frame(NULL, TO_DS, None, 0, &[]),
    ] {
        for n in 0..=f.len() {
            let want = if n < 2 { None } else { Some(Skip::NotIp) };
            match dissect(LINKTYPE_IEEE802_11, &f[..n]) {
                Err(Skip::NotIp) if want.is_some() => {}
                Err(Skip::Malformed(_)) if want.is_none() => {}
                other => panic!("cut at {n}: {other:?}"),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]
    /// Radiotap headers of any length and presence words, over data frames of any bytes,
    /// never panic, and what is dissected stays inside the frame before the FCS.
    #[test]
    fn arbitrary_radiotap_frames_never_panic(present in any::<u32>(),
                                             it_len in 0u16..80,
                                             flags in any::<u8>(),
                                             fc1 in any::<u8>(),
                                             subtype in 0u8..16,
                                             mut f in proptest::collection::vec(any::<u8>(), 8..160)) {
        f[0] = 0;
        f[2..4].copy_from_slice(&it_len.to_le_bytes());
        f[4..8].copy_from_slice(&present.to_le_bytes());
        for at in [8, 12, 16, 24] {
            if at < f.len() && present & 2 != 0 {
                f[at] = flags;
            }
        }
        let mac = usize::from(it_len);
        if mac + 1 < f.len() {
            f[mac] = fc(2, subtype);
            f[mac + 1] = fc1;
        }
        if mac + 34 < f.len() && flags & 1 == 0 {
            f[mac + 26..mac + 32].copy_from_slice(&[0xaa, 0xaa, 3, 0, 0, 0]);
        }
        if let Ok(d) = dissect(LINKTYPE_IEEE802_11_RADIOTAP, &f) {
            prop_assert!(mac <= d.ip_offset && d.ip_offset <= d.ip_end && d.ip_end <= f.len());
            let _ = frame_identity(&f, &d, DEFAULT_IDENTITY_SEED);
        }
    }
}
