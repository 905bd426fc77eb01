//! Packet identities pinned to fixed values: two points running different owl versions must
//! compute the same identity of the same packet, so a change here is a change of the wire
//! contract (bump the synopsis file version and say so). The frames are written out byte by
//! byte; the expected identities were computed once and are constants.

use owl_trace::dissect::{LINKTYPE_ETHERNET, dissect};
use owl_trace::identity::{DEFAULT_IDENTITY_SEED, frame_identity};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// (what, link type, frame, identity with the default seed)
fn frames() -> Vec<(&'static str, u32, Vec<u8>, u64)> {
    vec![
        (
            "Ethernet, IPv4, UDP 10.0.0.1:1234 -> 10.0.0.2:53, 4 payload bytes",
            LINKTYPE_ETHERNET,
            hex("020000000002 020000000001 0800
                 45 00 0020 1c46 4000 40 11 0000 0a000001 0a000002
                 04d2 0035 000c 0000 deadbeef"),
            0x93ab_0154_3708_9dba,
        ),
        (
            "the same packet one router later: TTL 63, ECN CE, new checksum and MACs",
            LINKTYPE_ETHERNET,
            hex("0a0000000009 0a0000000008 0800
                 45 03 0020 1c46 4000 3f 11 1234 0a000001 0a000002
                 04d2 0035 000c 0000 deadbeef"),
            0x93ab_0154_3708_9dba,
        ),
        (
            "802.1Q-tagged Ethernet, IPv6, TCP SYN 2001:db8::1:40000 -> 2001:db8::2:443",
            LINKTYPE_ETHERNET,
            hex("020000000002 020000000001 8100 0064 86dd
                 60000000 0014 06 40
                 20010db8000000000000000000000001 20010db8000000000000000000000002
                 9c40 01bb 00000001 00000000 5002 ffff 0000 0000"),
            0xf532_9d41_c271_423b,
        ),
        (
            "Ethernet, IPv4, ICMP echo request id 7 seq 1",
            LINKTYPE_ETHERNET,
            hex("020000000002 020000000001 0800
                 45 00 001c 0001 0000 40 01 0000 c0a80001 c0a80002
                 08 00 0000 0007 0001"),
            0x2d02_cb98_1441_6c8a,
        ),
    ]
}

#[test]
fn identities_are_pinned() {
    let mut got = Vec::new();
    for (what, lt, f, _) in frames() {
        let d = dissect(lt, &f).unwrap_or_else(|e| panic!("{what}: {e:?}"));
        got.push(frame_identity(&f, &d, DEFAULT_IDENTITY_SEED));
    }
    if std::env::var_os("OWL_BLESS").is_some() {
        for (g, (what, ..)) in got.iter().zip(frames()) {
            println!("{what}: {g:#018x}");
        }
        return;
    }
    for (g, (what, _, _, want)) in got.iter().zip(frames()) {
        assert_eq!(*g, want, "{what}: {g:#018x}");
    }
}
