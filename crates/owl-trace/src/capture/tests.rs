use super::*;
use proptest::prelude::*;

/// `v` in a capture's byte order (big-endian or little-endian).
fn be_or_le32(big: bool, v: u32) -> [u8; 4] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

fn be_or_le16(big: bool, v: u16) -> [u8; 2] {
    if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

fn pcap_bytes(big: bool, nano: bool, linktype: u32, recs: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let (w32, w16) = (|v| be_or_le32(big, v), |v| be_or_le16(big, v));
    let mut b = Vec::new();
    b.extend_from_slice(&w32(if nano { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    b.extend_from_slice(&w16(2));
    b.extend_from_slice(&w16(4));
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&w32(65535));
    b.extend_from_slice(&w32(linktype));
    for (sec, frac, data) in recs {
        b.extend_from_slice(&w32(*sec));
        b.extend_from_slice(&w32(*frac));
        b.extend_from_slice(&w32(data.len() as u32));
        b.extend_from_slice(&w32(data.len() as u32 + 10));
        b.extend_from_slice(data);
    }
    b
}

type Packets = Vec<(u64, u32, Vec<u8>, u32)>;

fn read_all(b: &[u8]) -> Result<Packets, CaptureError> {
    let mut r = CaptureReader::new(b)?;
    let mut v = Vec::new();
    while let Some(p) = r.next_packet()? {
        v.push((p.ts_ns, p.linktype, p.data.to_vec(), p.orig_len));
    }
    Ok(v)
}

#[test]
fn pcap_all_four_magics() {
    for big in [false, true] {
        for nano in [false, true] {
            let b = pcap_bytes(big, nano, 1, &[(10, 5, b"abc"), (11, 999, b"")]);
            let v = read_all(&b).unwrap();
            let unit = if nano { 1 } else { 1000 };
            assert_eq!(v.len(), 2);
            assert_eq!(v[0], (10_000_000_000 + 5 * unit, 1, b"abc".to_vec(), 13));
            assert_eq!(v[1].0, 11_000_000_000 + 999 * unit);
            let r = CaptureReader::new(&b[..]).unwrap();
            assert_eq!(
                r.container(),
                Container::Pcap {
                    nanosecond: nano,
                    big_endian: big,
                    modified: false,
                }
            );
        }
    }
}

#[test]
fn pcap_linktype_fcs_bits_are_masked() {
    let b = pcap_bytes(false, false, 1 | (0x5 << 28), &[(1, 1, b"x")]);
    assert_eq!(read_all(&b).unwrap()[0].1, 1);
}

#[test]
fn empty_and_foreign_files() {
    assert!(matches!(read_all(&[]), Err(CaptureError::Empty)));
    let e = read_all(b"GIF89a....").unwrap_err();
    assert!(matches!(e, CaptureError::NotACapture(_)), "{e}");
    assert!(e.to_string().contains("0x474946"), "{e}");
    assert!(matches!(read_all(b"ab"), Err(CaptureError::NotACapture(_))));
}

#[test]
fn pcap_truncations_name_the_offset() {
    let b = pcap_bytes(false, true, 1, &[(1, 1, b"hello"), (2, 2, b"world!")]);
    // cut inside the second record's data: record 2 starts at 24 + 16 + 5 = 45
    let e = read_all(&b[..b.len() - 2]).unwrap_err();
    assert!(e.is_truncation());
    assert_eq!(e.offset(), Some(45));
    // cut inside the second record header
    let e = read_all(&b[..50]).unwrap_err();
    assert_eq!(e.offset(), Some(45));
    // cut inside the file header
    let e = read_all(&b[..10]).unwrap_err();
    assert!(e.is_truncation(), "{e}");
}

/// Found by fuzzing: a header snaplen of 4 GiB let a record claim gigabytes.
#[test]
fn pcap_huge_snaplen_does_not_allow_huge_records() {
    let mut b = pcap_bytes(false, true, 1, &[(1, 1, b"hello")]);
    b[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    b[24 + 8..24 + 12].copy_from_slice(&0xf000_0000u32.to_le_bytes());
    let e = read_all(&b).unwrap_err();
    assert!(
        matches!(e, CaptureError::BadRecordLength { offset: 24, .. }),
        "{e}"
    );
}

#[test]
fn pcap_absurd_caplen_is_corrupt_not_an_allocation() {
    let mut b = pcap_bytes(false, true, 1, &[(1, 1, b"hello")]);
    b[24 + 8..24 + 12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let e = read_all(&b).unwrap_err();
    assert!(
        matches!(e, CaptureError::BadRecordLength { offset: 24, .. }),
        "{e}"
    );
}

struct Ng {
    big: bool,
    b: Vec<u8>,
}

impl Ng {
    fn w32(&self, v: u32) -> [u8; 4] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn w16(&self, v: u16) -> [u8; 2] {
        if self.big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }
    fn block(&mut self, t: u32, body: &[u8]) {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let len = 12 + body.len() as u32;
        let (a, l) = (self.w32(t), self.w32(len));
        self.b.extend_from_slice(&a);
        self.b.extend_from_slice(&l);
        self.b.extend_from_slice(&body);
        self.b.extend_from_slice(&l);
    }
    fn shb(&mut self) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.w32(0x1a2b_3c4d));
        body.extend_from_slice(&self.w16(1));
        body.extend_from_slice(&self.w16(0));
        body.extend_from_slice(&[0xff; 8]);
        self.block(0x0a0d_0d0a, &body);
    }
    fn idb(&mut self, linktype: u16, tsresol: Option<u8>, tsoffset: Option<i64>) {
        self.idb_named(linktype, tsresol, tsoffset, None);
    }
    fn idb_named(
        &mut self,
        linktype: u16,
        tsresol: Option<u8>,
        tsoffset: Option<i64>,
        name: Option<&str>,
    ) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.w16(linktype));
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&self.w32(65535));
        if let Some(n) = name {
            body.extend_from_slice(&self.w16(2));
            body.extend_from_slice(&self.w16(n.len() as u16));
            body.extend_from_slice(n.as_bytes());
            while !body.len().is_multiple_of(4) {
                body.push(0);
            }
        }
        if let Some(r) = tsresol {
            body.extend_from_slice(&self.w16(9));
            body.extend_from_slice(&self.w16(1));
            body.extend_from_slice(&[r, 0, 0, 0]);
        }
        if let Some(o) = tsoffset {
            body.extend_from_slice(&self.w16(14));
            body.extend_from_slice(&self.w16(8));
            let ob = if self.big {
                o.to_be_bytes()
            } else {
                o.to_le_bytes()
            };
            body.extend_from_slice(&ob);
        }
        body.extend_from_slice(&[0; 4]);
        self.block(1, &body);
    }
    fn epb(&mut self, iface: u32, ts: u64, data: &[u8]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.w32(iface));
        body.extend_from_slice(&self.w32((ts >> 32) as u32));
        body.extend_from_slice(&self.w32(ts as u32));
        body.extend_from_slice(&self.w32(data.len() as u32));
        body.extend_from_slice(&self.w32(data.len() as u32));
        body.extend_from_slice(data);
        self.block(6, &body);
    }
    fn pb(&mut self, iface: u16, ts: u64, data: &[u8]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.w16(iface));
        body.extend_from_slice(&self.w16(0));
        body.extend_from_slice(&self.w32((ts >> 32) as u32));
        body.extend_from_slice(&self.w32(ts as u32));
        body.extend_from_slice(&self.w32(data.len() as u32));
        body.extend_from_slice(&self.w32(data.len() as u32));
        body.extend_from_slice(data);
        self.block(2, &body);
    }
    fn spb(&mut self, data: &[u8]) {
        let mut body = Vec::new();
        body.extend_from_slice(&self.w32(data.len() as u32));
        body.extend_from_slice(data);
        self.block(3, &body);
    }
}

#[test]
fn pcapng_interfaces_resolutions_sections_and_block_kinds() {
    let mut ng = Ng {
        big: false,
        b: Vec::new(),
    };
    ng.shb();
    ng.idb(1, None, None); // default µs
    ng.idb(101, Some(9), Some(100)); // ns, +100 s
    ng.idb(113, Some(0x80 | 10), None); // 2^-10 s
    ng.epb(0, 1_500_000, b"eth");
    ng.epb(1, 7, b"raw");
    ng.spb(b"no time");
    ng.block(5, &[0; 8]); // interface statistics: skipped
    ng.epb(2, 1024 * 3, b"sll");
    ng.pb(0, 2, b"old");
    // a second, big-endian section with its own interfaces
    let mut be = Ng {
        big: true,
        b: Vec::new(),
    };
    be.shb();
    be.idb(276, Some(3), None); // ms
    be.epb(0, 42, b"sll2");
    ng.b.extend_from_slice(&be.b);

    let mut r = CaptureReader::new(&ng.b[..]).unwrap();
    assert_eq!(r.container(), Container::Pcapng);
    let mut got = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        got.push((p.ts_ns, p.linktype, p.data.to_vec()));
    }
    assert_eq!(
        got,
        vec![
            (1_500_000_000, 1, b"eth".to_vec()),
            (100_000_000_007, 101, b"raw".to_vec()),
            (3_000_000_000, 113, b"sll".to_vec()),
            (2_000, 1, b"old".to_vec()),
            (42_000_000, 276, b"sll2".to_vec()),
        ]
    );
    let st = r.stats();
    assert_eq!((st.packets, st.no_timestamp, st.other_blocks), (5, 1, 1));
}

#[test]
fn pcapng_errors() {
    let mut ng = Ng {
        big: false,
        b: Vec::new(),
    };
    ng.shb();
    ng.idb(1, None, None);
    let good_len = ng.b.len();
    ng.epb(3, 1, b"x"); // no interface 3
    let e = read_all(&ng.b).unwrap_err();
    assert_eq!(e.offset(), Some(good_len as u64 + 8), "{e}");

    // truncated block
    let mut ng2 = Ng {
        big: false,
        b: Vec::new(),
    };
    ng2.shb();
    ng2.idb(1, None, None);
    ng2.epb(0, 1, b"abcdef");
    let e = read_all(&ng2.b[..ng2.b.len() - 3]).unwrap_err();
    assert!(e.is_truncation());
    assert_eq!(e.offset(), Some(good_len as u64));

    // block length not a multiple of 4 / trailer mismatch
    let mut bad = ng2.b.clone();
    bad[good_len + 4] = 0x21;
    assert!(matches!(read_all(&bad), Err(CaptureError::Corrupt { .. })));
    let mut bad = ng2.b.clone();
    let n = bad.len();
    bad[n - 4] ^= 0x04;
    let e = read_all(&bad).unwrap_err();
    assert!(e.to_string().contains("trailer"), "{e}");

    // huge block length
    let mut bad = ng2.b.clone();
    bad[good_len + 4..good_len + 8].copy_from_slice(&0x7fff_fffcu32.to_le_bytes());
    assert!(matches!(read_all(&bad), Err(CaptureError::Corrupt { .. })));

    // captured length larger than the block
    let mut bad = ng2.b.clone();
    bad[good_len + 20..good_len + 24].copy_from_slice(&1000u32.to_le_bytes());
    assert!(matches!(read_all(&bad), Err(CaptureError::Corrupt { .. })));
}

#[test]
fn writer_roundtrip_both_formats() {
    for fmt in [CaptureFormat::Pcap, CaptureFormat::Pcapng] {
        let mut w = CaptureWriter::new(Vec::new(), fmt, 1, 8).unwrap();
        w.write_packet(1_700_000_000_123_456_789, b"0123456789", 1500)
            .unwrap();
        w.write_packet(1_700_000_001_000_000_001, b"abc", 3)
            .unwrap();
        let b = w.finish().unwrap();
        let v = read_all(&b).unwrap();
        assert_eq!(
            v,
            vec![
                (1_700_000_000_123_456_789, 1, b"01234567".to_vec(), 1500),
                (1_700_000_001_000_000_001, 1, b"abc".to_vec(), 3),
            ],
            "{fmt:?}"
        );
    }
}

#[test]
fn large_capture_streams_through_a_small_buffer() {
    // 50 000 records of 100 bytes: 5 MB through the 1 MiB window.
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::Pcap, 1, 0).unwrap();
    for i in 0..50_000u64 {
        let d = [(i % 251) as u8; 100];
        w.write_packet(i, &d, 100).unwrap();
    }
    let b = w.finish().unwrap();
    let mut r = CaptureReader::new(&b[..]).unwrap();
    let mut n = 0u64;
    while let Some(p) = r.next_packet().unwrap() {
        assert_eq!(p.ts_ns, n);
        assert_eq!(p.data[99], (n % 251) as u8);
        n += 1;
    }
    assert_eq!(n, 50_000);
    assert_eq!(r.bytes_read(), b.len() as u64);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    /// Hostile bytes never panic: every outcome is a packet, the end, or an error.
    #[test]
    fn arbitrary_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..600),
                                   head in 0usize..4) {
        let mut b = match head {
            0 => pcap_bytes(false, true, 1, &[]),
            1 => pcap_bytes(true, false, 1, &[]),
            2 => { let mut ng = Ng { big: false, b: Vec::new() }; ng.shb(); ng.idb(1, Some(0x85), None); ng.b }
            _ => Vec::new(),
        };
        b.extend_from_slice(&tail);
        if let Ok(mut r) = CaptureReader::new(&b[..]) {
            for _ in 0..1000 {
                match r.next_packet() {
                    Ok(Some(p)) => { let _ = p.data.len(); }
                    _ => break,
                }
            }
        }
    }
}

fn pcap_with_version(major: u16, minor: u16, linktype: u32, recs: &[(u32, u32, &[u8])]) -> Vec<u8> {
    let mut b = pcap_bytes(false, false, linktype, recs);
    b[4..6].copy_from_slice(&major.to_le_bytes());
    b[6..8].copy_from_slice(&minor.to_le_bytes());
    b
}

/// Item 11: a microsecond field of 10⁶ or more (10⁹ ns) is no time at all; carried on, it put a
/// packet 2 147 s late. It is left out and counted.
#[test]
fn pcap_invalid_fraction_of_a_second_is_left_out_and_counted() {
    for (nano, bad) in [
        (false, 1_000_000u32),
        (false, u32::MAX),
        (true, 1_000_000_000),
    ] {
        let b = pcap_bytes(
            false,
            nano,
            1,
            &[(10, 5, b"a"), (10, bad, b"b"), (11, 7, b"c")],
        );
        let mut r = CaptureReader::new(&b[..]).unwrap();
        let mut got = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            got.push(p.data.to_vec());
        }
        assert_eq!(
            got,
            vec![b"a".to_vec(), b"c".to_vec()],
            "nano {nano} frac {bad}"
        );
        assert_eq!((r.stats().packets, r.stats().bad_timestamp), (2, 1));
    }
    // the largest valid fraction is kept
    let b = pcap_bytes(false, false, 1, &[(10, 999_999, b"a")]);
    assert_eq!(read_all(&b).unwrap()[0].0, 10_999_999_000);
}

/// Item 12: libpcap takes the link type from the low 16 bits and, with the P bit, the FCS
/// length in 16-bit words from bits 28–31.
#[test]
fn pcap_link_type_field_flags_and_fcs() {
    let frame = b"0123456789FCS!";
    for (field, fcs) in [
        (0x0400_0001u32, 0usize), // P set, FCS length 0
        (0x2400_0001, 4),         // Ethernet's 4-byte FCS
        (0x4400_0001, 8),
        (0x4000_0001, 0), // FCS length without the P bit: unknown, nothing stripped
    ] {
        let b = pcap_bytes(false, true, field, &[(1, 1, frame)]);
        let mut r = CaptureReader::new(&b[..]).unwrap();
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(p.linktype, 1, "0x{field:08x}");
        // pcap_bytes writes orig_len = caplen + 10: the FCS is not in the captured bytes
        assert_eq!(p.data, frame, "0x{field:08x}");
        assert_eq!(r.stats().fcs_stripped, 0);
        drop(r);
        // with the whole frame captured, the FCS is removed and counted
        let mut b2 = b.clone();
        b2[24 + 12..24 + 16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        let mut r = CaptureReader::new(&b2[..]).unwrap();
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(p.data, &frame[..frame.len() - fcs], "0x{field:08x}");
        assert_eq!(p.orig_len as usize, frame.len() - fcs);
        assert_eq!(r.stats().fcs_stripped, u64::from(fcs > 0));
    }
    // a frame cut inside its FCS keeps what precedes the FCS
    let mut b = pcap_bytes(false, true, 0x2400_0001, &[(1, 1, b"0123456789FC")]);
    b[24 + 12..24 + 16].copy_from_slice(&14u32.to_le_bytes());
    assert_eq!(read_all(&b).unwrap()[0].2, b"0123456789".to_vec());
}

#[test]
fn pcap_reserved_bits_and_versions_libpcap_refuses() {
    for field in [0x0001_0001u32, 0x0200_0001, 0x0800_0001] {
        let e = read_all(&pcap_bytes(false, true, field, &[])).unwrap_err();
        assert!(matches!(e, CaptureError::Corrupt { offset: 20, .. }), "{e}");
        assert!(e.to_string().contains("reserved"), "{e}");
    }
    for (major, minor) in [(2, 5), (3, 0), (1, 0), (2, 0xffff)] {
        let e = read_all(&pcap_with_version(major, minor, 1, &[])).unwrap_err();
        assert!(
            e.to_string().contains(&format!("version {major}.{minor}")),
            "{e}"
        );
    }
    // 2.0–2.2 wrote len before caplen; 2.3 either way (swapped when caplen > len)
    let mut b = pcap_with_version(2, 2, 1, &[(1, 1, b"abc")]);
    b[24 + 8..24 + 12].copy_from_slice(&60u32.to_le_bytes());
    b[24 + 12..24 + 16].copy_from_slice(&3u32.to_le_bytes());
    let v = read_all(&b).unwrap();
    assert_eq!((v[0].2.as_slice(), v[0].3), (&b"abc"[..], 60));
    b[6] = 3;
    assert_eq!(read_all(&b).unwrap()[0].3, 60);
    b[6] = 4;
    assert!(
        read_all(&b).is_err(),
        "2.4 takes caplen 60 from the first field"
    );
}

#[test]
fn pcapng_versions_libpcap_refuses() {
    for (minor, ok) in [(0u16, true), (1, false), (2, true), (3, false)] {
        let mut ng = Ng {
            big: false,
            b: Vec::new(),
        };
        ng.shb();
        ng.b[14..16].copy_from_slice(&minor.to_le_bytes());
        ng.idb(1, None, None);
        ng.epb(0, 1, b"x");
        let r = read_all(&ng.b);
        assert_eq!(r.is_ok(), ok, "1.{minor}: {r:?}");
        if let Err(e) = r {
            assert!(e.to_string().contains(&format!("version 1.{minor}")), "{e}");
        }
    }
}

/// Item 15: interfaces are numbered across sections in file order, and one can be selected.
#[test]
fn pcapng_interfaces_are_numbered_and_selectable() {
    let mut ng = Ng {
        big: false,
        b: Vec::new(),
    };
    ng.shb();
    ng.idb(1, None, None);
    ng.idb(127, None, None);
    ng.epb(0, 1, b"a");
    ng.epb(1, 2, b"b");
    ng.shb();
    ng.idb(101, None, None);
    ng.epb(0, 3, b"c");
    ng.pb(0, 4, b"d");
    let ifaces = |b: &[u8], sel: Option<u32>| {
        let mut r = CaptureReader::new(b).unwrap();
        r.select_interface(sel).unwrap();
        let mut v = Vec::new();
        loop {
            match r.next_packet() {
                Ok(Some(p)) => v.push((p.interface, p.data.to_vec())),
                Ok(None) => return Ok((v, r.stats().other_interface, r.interfaces().len())),
                Err(e) => return Err(e),
            }
        }
    };
    let (all, other, n) = ifaces(&ng.b, None).unwrap();
    assert_eq!(
        all,
        vec![
            (0, b"a".to_vec()),
            (1, b"b".to_vec()),
            (2, b"c".to_vec()),
            (2, b"d".to_vec())
        ]
    );
    assert_eq!((other, n), (0, 3));
    let (v, other, _) = ifaces(&ng.b, Some(2)).unwrap();
    assert_eq!(v, vec![(2, b"c".to_vec()), (2, b"d".to_vec())]);
    assert_eq!(other, 2);
    let e = ifaces(&ng.b, Some(3)).unwrap_err();
    assert!(
        matches!(
            e,
            CaptureError::NoSuchInterface {
                wanted: 3,
                count: 3
            }
        ),
        "{e}"
    );
    let empty = pcap_bytes(false, true, 1, &[]);
    let mut r = CaptureReader::new(&empty[..]).unwrap();
    assert!(r.select_interface(Some(1)).is_err());
    assert!(r.select_interface(Some(0)).is_ok());
}

fn gzip(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn zstd(b: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(b, ruzstd::encoding::CompressionLevel::Fastest)
}

fn sample_capture(n: u64, fmt: CaptureFormat) -> Vec<u8> {
    let mut w = CaptureWriter::new(Vec::new(), fmt, 1, 0).unwrap();
    for i in 0..n {
        let d = [(i % 251) as u8; 300];
        w.write_packet(1_000_000_000 + i, &d, 300).unwrap();
    }
    w.finish().unwrap()
}

/// Item 16: gzip and zstd captures are read by their magic number, whatever their name.
#[test]
fn compressed_captures_read_like_plain_ones() {
    for fmt in [CaptureFormat::Pcap, CaptureFormat::Pcapng] {
        let plain = sample_capture(10_000, fmt); // 3 MB: several refills of the 1 MiB window
        let want = read_all(&plain).unwrap();
        let (half_a, half_b) = plain.split_at(plain.len() / 3);
        // concatenated gzip members and zstd frames, and a skippable frame, are one stream
        let mut gz2 = gzip(half_a);
        gz2.extend_from_slice(&gzip(half_b));
        let mut zs2 = zstd(half_a);
        zs2.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 9, 9, 9]);
        zs2.extend_from_slice(&zstd(half_b));
        for (c, bytes) in [
            (Compression::Gzip, gzip(&plain)),
            (Compression::Gzip, gz2),
            (Compression::Zstd, zstd(&plain)),
            (Compression::Zstd, zs2),
        ] {
            assert!(bytes.len() < plain.len() / 10);
            let r = CaptureReader::new(&bytes[..]).unwrap();
            assert_eq!(r.compression(), c);
            assert_eq!(read_all(&bytes).unwrap(), want, "{c:?} {fmt:?}");
            let mut r = CaptureReader::new(&bytes[..]).unwrap();
            while r.next_packet().unwrap().is_some() {}
            assert_eq!(
                r.bytes_read(),
                bytes.len() as u64,
                "progress counts compressed bytes"
            );
        }
    }
}

#[test]
fn truncated_and_corrupt_compressed_captures_are_errors() {
    let plain = sample_capture(2_000, CaptureFormat::Pcap);
    for bytes in [gzip(&plain), zstd(&plain)] {
        for cut in [bytes.len() / 2, bytes.len() - 3, 12] {
            let e = match CaptureReader::new(&bytes[..cut]) {
                Err(e) => e,
                Ok(mut r) => loop {
                    match r.next_packet() {
                        Ok(Some(_)) => {}
                        Ok(None) => panic!("a truncated stream read to its end"),
                        Err(e) => break e,
                    }
                },
            };
            assert!(e.is_truncation(), "cut at {cut}: {e}");
        }
        // a flipped byte in the middle: an error, never a panic or a silent end
        let mut bad = bytes.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 0x55;
        bad[mid + 1] ^= 0xaa;
        if let Ok(mut r) = CaptureReader::new(&bad[..]) {
            let res = loop {
                match r.next_packet() {
                    Ok(Some(_)) => {}
                    other => break other.map(|p| p.is_some()),
                }
            };
            assert!(res.is_err(), "corruption went unnoticed");
        }
    }
    // compressed nothing, compressed garbage, another compressor
    let e = read_all(&gzip(b"")).unwrap_err();
    assert!(e.to_string().contains("decompresses to nothing"), "{e}");
    let e = read_all(&zstd(b"GIF89a")).unwrap_err();
    assert!(
        e.to_string()
            .contains("decompressed zstd data starts with 0x474946"),
        "{e}"
    );
    let e = read_all(b"\xfd7zXZ\x00\x00\x04").unwrap_err();
    assert!(e.to_string().contains("xz"), "{e}");
}

#[test]
fn zstd_window_beyond_the_limit_is_refused_before_allocating() {
    // frame header: magic, descriptor with single-segment off, window descriptor 0xf8
    // (exponent 31: a 2 GiB window), then nothing
    let b = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 0xf8, 0, 0, 0, 0, 0, 0];
    let e = read_all(&b).unwrap_err();
    assert!(matches!(e, CaptureError::Io(_)), "{e}");
    assert!(e.to_string().contains("zstd"), "{e}");
}

/// The packets of a capture with the offset where each record ends in the (decompressed) file.
fn packets_and_ends(plain: &[u8]) -> (Packets, Vec<u64>) {
    let mut r = CaptureReader::new(plain).unwrap();
    let (mut v, mut ends) = (Vec::new(), Vec::new());
    while let Some(p) = r.next_packet().unwrap() {
        v.push((p.ts_ns, p.linktype, p.data.to_vec(), p.orig_len));
        ends.push(0);
    }
    // every record of `sample_capture` is a 16-byte header and its data after the 24-byte header
    let mut end = 24;
    for (e, p) in ends.iter_mut().zip(&v) {
        end += 16 + p.2.len() as u64;
        *e = end;
    }
    (v, ends)
}

/// Read a cut capture to its error: the packets before it, and the error.
fn read_to_error(b: &[u8]) -> (Packets, CaptureError) {
    let mut v = Vec::new();
    let mut r = match CaptureReader::new(b) {
        Ok(r) => r,
        Err(e) => return (v, e),
    };
    loop {
        match r.next_packet() {
            Ok(Some(p)) => v.push((p.ts_ns, p.linktype, p.data.to_vec(), p.orig_len)),
            Ok(None) => panic!("a cut stream read to its end"),
            Err(e) => return (v, e),
        }
    }
}

/// A zstd frame of raw blocks of `block` bytes declaring an 8 MiB window (as `zstd -19`
/// does), with a content checksum field when `checksum` (zeros: only cut copies are read).
fn zstd_raw_frame(content: &[u8], block: usize, checksum: bool) -> Vec<u8> {
    let mut z = vec![
        0x28,
        0xb5,
        0x2f,
        0xfd,
        if checksum { 0x04 } else { 0 },
        0x68,
    ];
    let chunks: Vec<&[u8]> = content.chunks(block).collect();
    for (i, c) in chunks.iter().enumerate() {
        let last = u32::from(i + 1 == chunks.len());
        z.extend_from_slice(&(last | (c.len() as u32) << 3).to_le_bytes()[..3]);
        z.extend_from_slice(c);
    }
    if checksum {
        z.extend_from_slice(&[0; 4]);
    }
    z
}

/// Item 9: a zstd capture cut short gives every byte the decoder could produce before the cut,
/// as `zstd -dc` does (it streams a raw block's bytes as they come), then the truncation.
/// Before, up to a window (8 MiB here, 128 MiB at most) was held back: nothing of this 1 MB
/// capture was read at any cut.
#[test]
fn zstd_cut_inside_a_large_window_gives_every_byte_before_the_cut() {
    let plain = sample_capture(3_000, CaptureFormat::Pcap);
    let (want, ends) = packets_and_ends(&plain);
    for checksum in [false, true] {
        let z = zstd_raw_frame(&plain, 100_000, checksum);
        let header = 6;
        let mut cuts: Vec<usize> = (7..z.len()).step_by(49_999).collect();
        // inside the first block's header, at a block's end, inside the next block's header,
        // inside the checksum
        cuts.extend([8, header + 3 + 100_000, header + 3 + 100_000 + 2]);
        if checksum {
            cuts.push(z.len() - 2);
        }
        for cut in cuts {
            // content bytes before the cut: the cut less the frame header and block headers
            let full_blocks = (cut - header) / (100_003);
            let in_block = ((cut - header) % 100_003).saturating_sub(3);
            let content = (full_blocks * 100_000 + in_block).min(plain.len()) as u64;
            let n = ends.iter().take_while(|&&e| e <= content).count();
            let (got, e) = read_to_error(&z[..cut]);
            assert!(e.is_truncation(), "cut at {cut}: {e}");
            assert_eq!(got.len(), n, "cut at {cut} (content {content})");
            assert_eq!(got[..], want[..n], "cut at {cut}");
            if n > 0 {
                assert!(
                    e.to_string().contains("zstd stream ends early"),
                    "cut at {cut}: {e}"
                );
            }
        }
    }
}

/// The zstd blocks of a one-frame stream wholly before `cut`, in decompressed bytes (a
/// compressed block of ruzstd's holds 128 KiB but the last), and the bytes of a raw block the
/// cut splits.
fn zstd_bytes_before(z: &[u8], cut: usize) -> u64 {
    let fhd = z[4];
    let mut p = 5 + usize::from(fhd & 0x20 == 0) + [0, 1, 2, 4][usize::from(fhd & 3)];
    p += [usize::from(fhd & 0x20 != 0), 2, 4, 8][usize::from(fhd >> 6)];
    let mut bytes = 0;
    while p + 3 <= cut {
        let h = u32::from_le_bytes([z[p], z[p + 1], z[p + 2], 0]);
        let (last, kind, size) = (h & 1 == 1, (h >> 1) & 3, (h >> 3) as usize);
        let stored = if kind == 1 { 1 } else { size };
        if p + 3 + stored > cut {
            if kind == 0 {
                bytes += (cut - p - 3) as u64;
            }
            break;
        }
        bytes += match kind {
            2 => {
                assert!(!last, "the test cuts before the last block");
                128 << 10
            }
            _ => size as u64,
        };
        p += 3 + stored;
        if last {
            break;
        }
    }
    bytes
}

/// Item 9 with compressed blocks: a cut keeps every whole block before it (a compressed block
/// decodes only whole; `zstd -dc` loses the same bytes).
#[test]
fn zstd_cut_keeps_every_whole_compressed_block() {
    let plain = sample_capture(10_000, CaptureFormat::Pcap);
    let (want, ends) = packets_and_ends(&plain);
    let z = zstd(&plain);
    for pct in [10, 50, 90, 99] {
        let cut = z.len() * pct / 100;
        let content = zstd_bytes_before(&z, cut);
        let n = ends.iter().take_while(|&&e| e <= content).count();
        assert!(n > 0);
        let (got, e) = read_to_error(&z[..cut]);
        assert!(e.is_truncation(), "{pct}%: {e}");
        assert_eq!(got.len(), n, "{pct}%");
        assert_eq!(got[..], want[..n]);
    }
}

/// Item 10: Kuznetzov's modified pcap (magic 0xa1b2cd34, libpcap's KUZNETZOV_TCPDUMP_MAGIC):
/// microseconds, 24-byte record headers; an Ethernet capture's snaplen grows by 14.
#[test]
fn modified_pcap_is_read_in_both_byte_orders() {
    for big in [false, true] {
        let (w32, w16) = (|v| be_or_le32(big, v), |v| be_or_le16(big, v));
        let mut b = Vec::new();
        b.extend_from_slice(&w32(0xa1b2_cd34));
        b.extend_from_slice(&w16(2));
        b.extend_from_slice(&w16(4));
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&w32(1500));
        b.extend_from_slice(&w32(1));
        for (sec, us, data) in [(10u32, 5u32, &b"abc"[..]), (11, 999_999, b"hello")] {
            b.extend_from_slice(&w32(sec));
            b.extend_from_slice(&w32(us));
            b.extend_from_slice(&w32(data.len() as u32));
            b.extend_from_slice(&w32(data.len() as u32 + 4));
            b.extend_from_slice(&w32(3)); // ifindex
            b.extend_from_slice(&w16(0x0800)); // protocol
            b.extend_from_slice(&[4, 0]); // packet type, pad
            b.extend_from_slice(data);
        }
        let r = CaptureReader::new(&b[..]).unwrap();
        assert_eq!(
            r.container(),
            Container::Pcap {
                nanosecond: false,
                big_endian: big,
                modified: true
            }
        );
        assert_eq!(r.snaplen(), Some(1514));
        drop(r);
        let v = read_all(&b).unwrap();
        assert_eq!(
            v,
            vec![
                (10_000_005_000, 1, b"abc".to_vec(), 7),
                (11_999_999_000, 1, b"hello".to_vec(), 9)
            ],
            "big endian {big}"
        );
        // cut inside the second record's extra header bytes: a truncation at its offset
        let second = 24 + 24 + 3;
        let e = read_all(&b[..second + 20]).unwrap_err();
        assert!(e.is_truncation(), "{e}");
        assert_eq!(e.offset(), Some(second as u64));
    }
}

/// Item 10: a record whose length field is damaged ends the file where libpcap ends it: the
/// packets before it are read, then `BadRecordLength` at its offset, a kind of truncation (so
/// `--allow-truncated` measures the packets before it). tcpdump prints 1 000 packets of a
/// capture whose record 1 000 claims 2 GiB, then "invalid packet capture length".
#[test]
fn pcap_corrupt_record_length_keeps_the_packets_before_it() {
    let recs: Vec<(u32, u32, &[u8])> = vec![(1, 1, b"one"), (2, 2, b"two"), (3, 3, b"three")];
    for caplen in [0x7fff_0000u32, 300_000, u32::MAX] {
        let mut b = pcap_bytes(false, false, 1, &recs);
        let third = 24 + 16 + 3 + 16 + 3;
        b[third + 8..third + 12].copy_from_slice(&caplen.to_le_bytes());
        let (got, e) = read_to_error(&b);
        assert_eq!(got.len(), 2, "{e}");
        assert!(
            matches!(e, CaptureError::BadRecordLength { offset, caplen: c, snaplen: 65535 }
                if offset == third as u64 && c == caplen),
            "{e}"
        );
        assert!(e.is_truncation());
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("offset {third}")) && msg.contains(&caplen.to_string()),
            "{msg}"
        );
    }
}

/// Item 10: interfaces that differ only in timestamp resolution are read each at its own
/// (libpcap scales every packet with its interface's if_tsresol and if_tsoffset).
#[test]
fn pcapng_packets_are_timed_at_their_own_interface_resolution() {
    let mut ng = Ng {
        big: false,
        b: Vec::new(),
    };
    ng.shb();
    ng.idb(1, None, None); // µs
    ng.idb(1, Some(9), None); // ns
    ng.idb(1, Some(0x80 | 20), Some(-1)); // 2^-20 s, one second earlier
    ng.epb(0, 1_000_001, b"a");
    ng.epb(1, 1_000_002_003, b"b");
    ng.epb(2, 3 << 20, b"c");
    let v = read_all(&ng.b).unwrap();
    let ts: Vec<u64> = v.iter().map(|p| p.0).collect();
    assert_eq!(ts, vec![1_000_001_000, 1_000_002_003, 2_000_000_000]);
}

/// Item 10: a timestamp out of range names its interface (number in file order, and if_name).
#[test]
fn pcapng_timestamp_out_of_range_names_the_interface() {
    let mut ng = Ng {
        big: false,
        b: Vec::new(),
    };
    ng.shb();
    ng.idb(1, None, None);
    ng.epb(0, 1, b"ok");
    ng.shb();
    ng.idb(1, None, None);
    ng.idb_named(1, Some(0), Some(-10), Some("eth1"));
    let at = ng.b.len() as u64;
    ng.epb(1, 5, b"before 1970");
    let (got, e) = read_to_error(&ng.b);
    assert_eq!(got.len(), 1);
    let msg = e.to_string();
    assert!(
        matches!(e, CaptureError::Corrupt { offset, .. } if offset == at + 12),
        "{msg}"
    );
    assert!(msg.contains("interface 2 (eth1)"), "{msg}");
    // without if_name: the number
    let mut ng = Ng {
        big: true,
        b: Vec::new(),
    };
    ng.shb();
    ng.idb(1, Some(0), None);
    ng.epb(0, u64::MAX, b"after 2554");
    let e = read_all(&ng.b).unwrap_err();
    assert!(
        e.to_string()
            .contains("timestamp out of range on interface 0:"),
        "{e}"
    );
}
