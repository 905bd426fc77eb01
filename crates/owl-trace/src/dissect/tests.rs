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
    fn arbitrary_frames_never_panic(lt in prop::sample::select(vec![0u32, 1, 101, 108, 113, 228, 229, 276]),
                                    v in prop::sample::select(vec![0x45u8, 0x4f, 0x60, 0x00]),
                                    mut f in proptest::collection::vec(any::<u8>(), 0..200)) {
        if !f.is_empty() { let i = f.len() / 3; f[i] = v; }
        if let Ok(d) = dissect(lt, &f) {
            prop_assert!(d.ip_offset <= d.ip_end && d.ip_end <= f.len());
            let _ = frame_identity(&f, &d, DEFAULT_IDENTITY_SEED);
        }
    }
}
