//! Captures to records, end to end through the public API: what is measured, what is counted,
//! what is refused. Inputs are written with owl-trace's own writer or byte by byte.

use owl_core::PacketRecord;
use owl_trace::capture::{
    CaptureError, CaptureFormat, CaptureReader, CaptureWriter, InterfaceInfo,
};
use owl_trace::dissect::{
    LINKTYPE_ETHERNET, LINKTYPE_IEEE802_11_RADIOTAP, LINKTYPE_LINUX_SLL2, LINKTYPE_RAW,
};
use owl_trace::identity::{DEFAULT_IDENTITY_SEED, common_identity_bytes};
use owl_trace::records::{InputStats, ReadOptions, RecordReader};

/// An IPv4 UDP packet of `total` bytes, numbered `n` (in the IP identification field).
fn ipv4_udp(n: u16, total: usize) -> Vec<u8> {
    let mut ip = vec![
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        (n >> 8) as u8,
        n as u8,
        0,
        0,
        64,
        17,
        0,
        0,
        10,
        0,
        0,
        1,
        10,
        0,
        0,
        2,
    ];
    let udp_len = (total - 20) as u16;
    ip.extend_from_slice(&[0x30, 0x39, 0x00, 0x35]);
    ip.extend_from_slice(&udp_len.to_be_bytes());
    ip.extend_from_slice(&[0, 0]);
    ip.extend((0..total - 28).map(|i| (i as u8) ^ (n as u8)));
    ip
}

fn ethernet(ip: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    f.extend_from_slice(ip);
    f
}

fn records(
    bytes: &[u8],
    options: &ReadOptions,
) -> Result<(Vec<PacketRecord>, InputStats), CaptureError> {
    let mut rr = RecordReader::with_options(CaptureReader::new(bytes)?, options)?;
    let mut all = Vec::new();
    let mut batch = Vec::new();
    while rr.next_batch(&mut batch, 7)? > 0 {
        all.extend_from_slice(&batch);
    }
    Ok((all, rr.stats()))
}

fn seed() -> ReadOptions {
    ReadOptions::with_seed(DEFAULT_IDENTITY_SEED)
}

/// Item 11 through the record reader: the record with an invalid time is malformed, not a
/// packet 2 147 s late.
#[test]
fn invalid_timestamps_are_malformed_records() {
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::Pcap, LINKTYPE_RAW, 0).unwrap();
    for n in 0..3u16 {
        w.write_packet(1_000_000_000 + u64::from(n), &ipv4_udp(n, 60), 60)
            .unwrap();
    }
    let mut b = w.finish().unwrap();
    // second record's nanosecond field: 2^31 (what a corrupt writer left there)
    let rec2 = 24 + 16 + 60;
    b[rec2 + 4..rec2 + 8].copy_from_slice(&0x8000_0000u32.to_le_bytes());
    let (recs, st) = records(&b, &seed()).unwrap();
    assert_eq!(recs.len(), 2);
    assert!(recs.iter().all(|r| r.ts_ns < 1_000_000_010));
    assert_eq!(
        (st.frames, st.ip_packets, st.malformed, st.bad_timestamp),
        (3, 2, 1, 1)
    );
}

/// pcapng bytes with the interfaces and packets given: `(linktype)` and `(interface, frame)`.
fn pcapng(ifaces: &[u16], packets: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    let block = |b: &mut Vec<u8>, t: u32, body: &[u8]| {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let len = 12 + body.len() as u32;
        b.extend_from_slice(&t.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&body);
        b.extend_from_slice(&len.to_le_bytes());
    };
    let mut shb = 0x1a2b_3c4du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&[0xff; 8]);
    block(&mut b, 0x0a0d_0d0a, &shb);
    for &lt in ifaces {
        let mut idb = lt.to_le_bytes().to_vec();
        idb.extend_from_slice(&[0, 0]);
        idb.extend_from_slice(&0u32.to_le_bytes());
        block(&mut b, 1, &idb);
    }
    for (k, (iface, frame)) in packets.iter().enumerate() {
        let mut epb = iface.to_le_bytes().to_vec();
        epb.extend_from_slice(&0u32.to_le_bytes());
        epb.extend_from_slice(&(1_000_000 + k as u32).to_le_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        epb.extend_from_slice(frame);
        block(&mut b, 6, &epb);
    }
    b
}

/// Item 15: a pcapng file with a Wi-Fi monitor interface (Prism headers, which owl does not
/// read) beside two it can read is measured on
/// those two; the other's packets are counted. `--interface` keeps one. Two it can read but
/// of different link types are not mixed.
#[test]
fn pcapng_interfaces_owl_cannot_read_are_counted_not_fatal() {
    let prism = vec![0u8, 0, 8, 0, 0, 0, 0, 0, 0x80, 0];
    let file = pcapng(
        &[1, 119, 1],
        &[
            (0, ethernet(&ipv4_udp(1, 40))),
            (1, prism.clone()),
            (2, ethernet(&ipv4_udp(2, 40))),
            (1, prism.clone()),
            (0, ethernet(&ipv4_udp(3, 40))),
        ],
    );
    let (recs, st) = records(&file, &seed()).unwrap();
    assert_eq!(recs.len(), 3);
    assert_eq!(
        (st.frames, st.unsupported_link, st.unsupported_linktype),
        (3, 2, Some(119))
    );
    assert_eq!(st.interfaces, 2);
    let unlike = pcapng(
        &[1, 119, 101],
        &[
            (1, prism.clone()),
            (0, ethernet(&ipv4_udp(1, 40))),
            (2, ipv4_udp(2, 40)),
        ],
    );
    let e = records(&unlike, &seed()).unwrap_err();
    assert!(
        matches!(
            e,
            CaptureError::MixedInterfaces {
                first: 0,
                other: 2,
                ..
            }
        ),
        "{e}"
    );

    let (recs, st) = records(
        &file,
        &ReadOptions {
            interface: Some(2),
            ..seed()
        },
    )
    .unwrap();
    assert_eq!(recs.len(), 1);
    assert_eq!(
        (st.frames, st.other_interface, st.unsupported_link),
        (1, 4, 0)
    );
    let e = records(
        &file,
        &ReadOptions {
            interface: Some(1),
            ..seed()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("LINKTYPE_IEEE802_11_PRISM"), "{e}");

    // nothing readable at all: the error names the link type
    let only = pcapng(&[119], &[(0, prism.clone())]);
    let e = records(&only, &seed()).unwrap_err();
    assert!(
        e.to_string()
            .contains("unsupported link type 119 (LINKTYPE_IEEE802_11_PRISM)"),
        "{e}"
    );
    // a pcap file has one link type: refused at its first packet, as before
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::Pcap, 119, 0).unwrap();
    w.write_packet(1, &prism, 10).unwrap();
    let e = records(&w.finish().unwrap(), &seed()).unwrap_err();
    assert!(e.to_string().contains("LINKTYPE_IEEE802_11_PRISM"), "{e}");
}

/// Item 14: Linux SLL2 (`tcpdump -i any` since libpcap 1.10) end to end, with the same
/// identities as the Ethernet capture of the same packets.
#[test]
fn sll2_capture_matches_ethernet_capture() {
    let mut eth =
        CaptureWriter::new(Vec::new(), CaptureFormat::Pcap, LINKTYPE_ETHERNET, 0).unwrap();
    let mut sll2 =
        CaptureWriter::new(Vec::new(), CaptureFormat::Pcapng, LINKTYPE_LINUX_SLL2, 0).unwrap();
    for n in 0..50u16 {
        let ip = ipv4_udp(n, 100);
        eth.write_packet(u64::from(n), &ethernet(&ip), 114).unwrap();
        let mut f = vec![
            0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0,
        ];
        f.extend_from_slice(&ip);
        sll2.write_packet(u64::from(n) + 5, &f, 120).unwrap();
    }
    let (a, _) = records(&eth.finish().unwrap(), &seed()).unwrap();
    let (b, st) = records(&sll2.finish().unwrap(), &seed()).unwrap();
    assert_eq!(st.ip_packets, 50);
    let ids = |v: &[PacketRecord]| v.iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b));
}

/// A radiotap header (TSFT, Flags `flags`, Rate, Channel, antenna signal: 23 bytes), then
/// `frame`, then a made-up FCS when the flags say there is one.
fn radiotap(flags: u8, frame: &[u8]) -> Vec<u8> {
    let mut f = vec![0, 0, 23, 0, 0x2f, 0, 0, 0];
    f.extend_from_slice(&7u64.to_le_bytes());
    f.extend_from_slice(&[flags, 12, 0x85, 0x09, 0xc0, 0x00, 0xc4]);
    f.extend_from_slice(frame);
    if flags & 0x10 != 0 {
        f.extend_from_slice(&[0x12, 0x34, 0x56, 0x78]);
    }
    f
}

/// An 802.11 data frame (frame control `fc`, `qos` for a QoS subtype) with an LLC/SNAP IPv4
/// body, four addresses when `fc` has ToDS and FromDS.
fn wifi_ipv4(fc: [u8; 2], qos: bool, ip: &[u8]) -> Vec<u8> {
    let mut f = fc.to_vec();
    f.extend_from_slice(&[0x2c, 0]);
    for a in 1..=3u8 {
        f.extend_from_slice(&[2, 0, 0, 0, 0, a]);
    }
    f.extend_from_slice(&[0x10, 0x00]);
    if fc[1] & 3 == 3 {
        f.extend_from_slice(&[2, 0, 0, 0, 0, 4]);
    }
    if qos {
        f.extend_from_slice(&[0, 0]);
    }
    f.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
    f.extend_from_slice(ip);
    f
}

/// Item 11 (issue 33): a Wi-Fi monitor capture (radiotap) is measured on its unencrypted IP
/// data frames, with the identities the Ethernet capture of the same packets gives; beacons,
/// Null frames, protected frames and frames that failed their FCS are counted non-IP. With
/// tcpdump installed, it prints as many IP packets with a good FCS as owl records.
#[test]
fn radiotap_capture_matches_ethernet_capture_and_tcpdump() {
    let mut eth =
        CaptureWriter::new(Vec::new(), CaptureFormat::Pcap, LINKTYPE_ETHERNET, 0).unwrap();
    let mut wlan = CaptureWriter::new(
        Vec::new(),
        CaptureFormat::Pcap,
        LINKTYPE_IEEE802_11_RADIOTAP,
        0,
    )
    .unwrap();
    let mut beacon = vec![0x80, 0, 0, 0];
    beacon.extend_from_slice(&[0xff; 6]);
    beacon.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0x20, 0]);
    beacon.extend_from_slice(&[0; 8]); // timestamp
    beacon.extend_from_slice(&[0x64, 0, 0x01, 0x04, 0, 3]);
    beacon.extend_from_slice(b"owl");
    for n in 0..60u16 {
        let ip = ipv4_udp(n, 60 + usize::from(n));
        let frame = match n % 6 {
            0 => radiotap(0x10, &beacon),
            // QoS data to the AP, with its FCS
            1 => radiotap(0x10, &wifi_ipv4([0x88, 0x01], true, &ip)),
            // Null function (power save)
            2 => radiotap(
                0,
                &[
                    0x48, 0x11, 0, 0, 2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0, 0,
                ],
            ),
            // WDS: four addresses
            3 => radiotap(0, &wifi_ipv4([0x08, 0x03], false, &ip)),
            // protected: the same bytes would be ciphertext
            4 => radiotap(0x10, &wifi_ipv4([0x88, 0x41], true, &ip)),
            // the FCS check failed
            _ => radiotap(0x50, &wifi_ipv4([0x88, 0x01], true, &ip)),
        };
        wlan.write_packet(u64::from(n) * 1000, &frame, frame.len() as u32)
            .unwrap();
        if n % 6 == 1 || n % 6 == 3 {
            let e = ethernet(&ip);
            eth.write_packet(u64::from(n) * 1000, &e, e.len() as u32)
                .unwrap();
        }
    }
    let wlan = wlan.finish().unwrap();
    let (a, _) = records(&eth.finish().unwrap(), &seed()).unwrap();
    let (b, st) = records(&wlan, &seed()).unwrap();
    assert_eq!(
        (st.frames, st.ip_packets, st.non_ip, st.malformed),
        (60, 20, 40, 0)
    );
    let fields = |v: &[PacketRecord]| {
        v.iter()
            .map(|r| (r.id, r.flow, r.len, r.ts_ns))
            .collect::<Vec<_>>()
    };
    assert_eq!(fields(&a), fields(&b));

    if std::process::Command::new("tcpdump")
        .arg("--version")
        .output()
        .is_err()
    {
        assert!(
            std::env::var_os("OWL_REQUIRE_TCPDUMP").is_none(),
            "tcpdump is required (OWL_REQUIRE_TCPDUMP is set) but not installed"
        );
        eprintln!("skipping the tcpdump check: tcpdump not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wlan.pcap");
    std::fs::write(&path, &wlan).unwrap();
    let t = std::process::Command::new("tcpdump")
        .arg("-nr")
        .arg(&path)
        .output()
        .unwrap();
    assert!(t.status.success(), "{}", String::from_utf8_lossy(&t.stderr));
    let text = String::from_utf8_lossy(&t.stdout);
    assert_eq!(text.lines().count(), 60, "{text}");
    // tcpdump prints a frame that failed its FCS check, flagged: owl does not measure it
    let ip = text.lines().filter(|l| l.contains(" IP ")).count();
    let bad = text.lines().filter(|l| l.contains(" bad-fcs ")).count();
    assert_eq!((ip, bad), (30, 10), "{text}");
    assert_eq!((ip - bad) as u64, st.ip_packets, "{text}");
}

/// Item 1 at the identity level: S captured with a 96-byte snaplen, R whole packets. Without a
/// limit every long packet has two identities; with the common limit they agree, short
/// packets keep the identity they always had, and the cut packets are counted.
#[test]
fn different_snaplens_agree_on_the_common_identity_bytes() {
    let write = |snaplen: u32| {
        let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::Pcap, LINKTYPE_ETHERNET, snaplen)
            .unwrap();
        for n in 0..40u16 {
            let total = if n % 2 == 0 { 60 } else { 1200 };
            w.write_packet(
                u64::from(n),
                &ethernet(&ipv4_udp(n, total)),
                total as u32 + 14,
            )
            .unwrap();
        }
        w.finish().unwrap()
    };
    let (s_file, r_file) = (write(96), write(0));
    let ids = |b: &[u8], o: &ReadOptions| {
        let (v, st) = records(b, o).unwrap();
        (v.iter().map(|r| r.id).collect::<Vec<_>>(), st)
    };
    let (s, s_st) = ids(&s_file, &seed());
    let (r, r_st) = ids(&r_file, &seed());
    let same = s.iter().zip(&r).filter(|(a, b)| a == b).count();
    assert_eq!(same, 20, "only the short packets agree without a limit");
    assert_eq!((s_st.identity_short, r_st.identity_short), (20, 0));

    let info = |b: &[u8]| CaptureReader::new(b).unwrap().interfaces()[0];
    let (si, ri) = (info(&s_file), info(&r_file));
    assert_eq!(
        si,
        InterfaceInfo {
            linktype: 1,
            snaplen: 96
        }
    );
    let limit = common_identity_bytes(si, ri);
    assert_eq!(limit, Some(82));
    let o = ReadOptions {
        identity_bytes: limit,
        ..seed()
    };
    let (s2, s2_st) = ids(&s_file, &o);
    let (r2, _) = ids(&r_file, &o);
    assert_eq!(s2, r2);
    assert_eq!(s2_st.identity_short, 0);
    // packets shorter than the limit keep the identity they have without it (the golden ones)
    for k in (0..40).step_by(2) {
        assert_eq!(s2[k], r[k]);
    }
}

#[test]
fn compressed_capture_through_the_record_reader() {
    use std::io::Write;
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::Pcap, LINKTYPE_RAW, 0).unwrap();
    for n in 0..100u16 {
        w.write_packet(u64::from(n), &ipv4_udp(n, 80), 80).unwrap();
    }
    let plain = w.finish().unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    let gz = gz.finish().unwrap();
    let (a, _) = records(&plain, &seed()).unwrap();
    let (b, _) = records(&gz, &seed()).unwrap();
    assert_eq!(a, b);
    // a file named .pcap holding gzip is read by its magic
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("capture.pcap");
    std::fs::write(&path, &gz).unwrap();
    let mut rr = RecordReader::open(&path, DEFAULT_IDENTITY_SEED).unwrap();
    let mut batch = Vec::new();
    assert_eq!(rr.next_batch(&mut batch, 1000).unwrap(), 100);
}

/// Interfaces of one pcapng file are measured together only when alike: two Ethernet
/// interfaces of one snaplen are one stream, whatever their timestamp resolutions (each packet
/// is timed at its own interface's, as libpcap does); an interface whose snaplen or link type
/// differs is refused, naming both, unless one is selected.
#[test]
fn unlike_pcapng_interfaces_are_not_mixed() {
    let write = |second: (u32, u32, u8)| {
        let mut w =
            CaptureWriter::new(Vec::new(), CaptureFormat::Pcapng, LINKTYPE_ETHERNET, 0).unwrap();
        let (lt, snap, exp) = second;
        assert_eq!(w.add_interface(lt, snap, exp).unwrap(), 1);
        for n in 0..20u16 {
            let ip = ipv4_udp(n, 80);
            let iface = u32::from(n % 2);
            let frame = if iface == 1 && lt == LINKTYPE_RAW {
                ip
            } else {
                ethernet(&ip)
            };
            w.write_packet_on(iface, 1_000_000 * u64::from(n), &frame, frame.len() as u32)
                .unwrap();
        }
        w.finish().unwrap()
    };
    for exp in [9, 6] {
        let alike = write((LINKTYPE_ETHERNET, 0, exp));
        let (recs, st) = records(&alike, &seed()).unwrap();
        assert_eq!((recs.len(), st.interfaces), (20, 2));
        let ts: Vec<u64> = recs.iter().map(|r| r.ts_ns).collect();
        assert_eq!(ts, (0..20).map(|n| 1_000_000 * n).collect::<Vec<_>>());
    }
    for (second, kind) in [
        ((LINKTYPE_ETHERNET, 96, 9), "snaplen 96"),
        ((LINKTYPE_RAW, 0, 9), "LINKTYPE_RAW"),
    ] {
        let file = write(second);
        let e = records(&file, &seed()).unwrap_err();
        assert!(
            matches!(
                e,
                CaptureError::MixedInterfaces {
                    first: 0,
                    other: 1,
                    ..
                }
            ),
            "{e}"
        );
        let msg = e.to_string();
        assert!(msg.contains(kind) && msg.contains("select one"), "{msg}");
        for n in 0..2 {
            let one = ReadOptions {
                interface: Some(n),
                ..seed()
            };
            let (recs, st) = records(&file, &one).unwrap();
            assert_eq!((recs.len(), st.interfaces, st.other_interface), (10, 1, 10));
        }
    }
    // the µs interface's timestamps are read at its resolution
    let us = write((LINKTYPE_ETHERNET, 0, 6));
    let one = ReadOptions {
        interface: Some(1),
        ..seed()
    };
    let (recs, _) = records(&us, &one).unwrap();
    assert_eq!(recs[0].ts_ns, 1_000_000);
}

/// The link type and snaplen of the interface measured are what two points agree on: an
/// Ethernet capture at 128 bytes and a Linux SLL2 one at 100 keep 114 and 80 IP bytes, and
/// identified on the first 80 the long packets agree.
#[test]
fn ethernet_and_sll2_agree_on_ip_bytes() {
    let mut eth =
        CaptureWriter::new(Vec::new(), CaptureFormat::Pcap, LINKTYPE_ETHERNET, 128).unwrap();
    let mut sll2 =
        CaptureWriter::new(Vec::new(), CaptureFormat::Pcapng, LINKTYPE_LINUX_SLL2, 100).unwrap();
    for n in 0..40u16 {
        let ip = ipv4_udp(n, if n % 2 == 0 { 60 } else { 600 });
        eth.write_packet(u64::from(n), &ethernet(&ip), 14 + ip.len() as u32)
            .unwrap();
        let mut f = vec![
            0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0,
        ];
        f.extend_from_slice(&ip);
        sll2.write_packet(u64::from(n), &f, f.len() as u32).unwrap();
    }
    let (eth, sll2) = (eth.finish().unwrap(), sll2.finish().unwrap());
    let first = |b: &[u8]| {
        let mut rr = RecordReader::with_options(CaptureReader::new(b).unwrap(), &seed()).unwrap();
        rr.first_interface().unwrap().unwrap()
    };
    let (a, b) = (first(&eth), first(&sll2));
    assert_eq!(
        (a.linktype, a.snaplen, b.linktype, b.snaplen),
        (1, 128, 276, 100)
    );
    let limit = common_identity_bytes(a, b);
    assert_eq!(limit, Some(80));
    let o = ReadOptions {
        identity_bytes: limit,
        ..seed()
    };
    let (x, xs) = records(&eth, &o).unwrap();
    let (y, ys) = records(&sll2, &o).unwrap();
    let ids = |v: &[PacketRecord]| v.iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(ids(&x), ids(&y));
    assert_eq!((xs.identity_cut, ys.identity_cut), (20, 20));
    assert_eq!(
        (xs.identity_bytes, xs.linktype, ys.linktype),
        (Some(80), Some(1), Some(276))
    );
    // a frame cut at 100 bytes at both (the old agreement) would hash 86 IP bytes of an
    // Ethernet frame and 80 of an SLL2 one: they would not agree
    let (x, _) = records(
        &eth,
        &ReadOptions {
            identity_bytes: Some(86),
            ..seed()
        },
    )
    .unwrap();
    assert_ne!(ids(&x), ids(&y));
}
