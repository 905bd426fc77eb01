//! Synopsis files written by earlier versions of owl, checked in as their writers wrote them
//! (`tests/old-files/vN/`, with the commit in `WRITTEN_BY` and what `owl estimate` printed for
//! them then in `estimate.json`): today's owl reads them and gives the same figures.
//!
//! - `v1/`: format version 1 (one checksummed document), `owl record --method exact
//!   --interval 100ms` (the only method `owl record` knew then) at both points of the same
//!   3 000-packet simulated pair;
//! - `v2/`: format version 2 (the first streamed one: no identity byte limit, no packet counts),
//!   `owl record --method lda --memory 1KiB --interval 100ms` (tag `LDA1`);
//! - `v3/`: format version 3, `owl record --method lda --memory 1KiB --interval 100ms` at both
//!   points of a 3 000-packet simulated pair; clock cuts (version 3 has none other) and the
//!   paper's LDA rows (tag `LDA1`, before the identity digest);
//! - `v4/`: format version 4 (the current one: the delimiter cut), the same recording (tag
//!   `LDA2`, with the identity digest); read, then written again byte for byte;
//! - `smp1/`: version 3 files holding `sample`'s first payload format (`SMP1`), no longer read:
//!   refused, naming it.

mod common;

use std::path::PathBuf;

use common::ok;
use owl_core::wire::{StreamReader, SynopsisFile};
use serde_json::Value;

fn old(version: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/old-files")
        .join(version)
        .join(name)
}

#[test]
fn version_3_files_estimate_as_they_did() {
    let (s, r) = (old("v3", "lda-sender.owl"), old("v3", "lda-receiver.owl"));
    let now: Value = serde_json::from_str(&ok(&[
        "estimate",
        s.to_str().unwrap(),
        r.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let then: Value =
        serde_json::from_str(&std::fs::read_to_string(old("v3", "estimate.json")).unwrap())
            .unwrap();
    let (a, b) = (
        now["intervals"].as_array().unwrap(),
        then["intervals"].as_array().unwrap(),
    );
    assert_eq!(a.len(), b.len());
    assert!(a.len() >= 3);
    for (x, y) in a.iter().zip(b) {
        for k in [
            "index",
            "start_ns",
            "sent",
            "received",
            "mean_ns",
            "std_ns",
            "samples",
            "lost",
            "mean_ci98_ns",
            "std_ci95_ns",
        ] {
            assert_eq!(x[k], y[k], "interval {}: {k}", y["index"]);
        }
        // cut by each point's clock, as they were recorded: no cut data
        assert!(x.get("cut").is_none(), "{x}");
    }
    assert_eq!(now["overall"]["mean_ns"], then["overall"]["mean_ns"]);
    // the cuts check says how they were cut
    let cuts = &now["checks"]["cuts"];
    assert_eq!(cuts["rule"], "clock", "{cuts}");
    // a version 3 file paired with a version 4 one of another cut is refused, naming the cut
    let dir = tempfile::tempdir().unwrap();
    let (sp, _, _) = common::simulate(dir.path(), &[]);
    let new = dir.path().join("new.owl");
    ok(&[
        "record",
        "--method",
        "lda",
        "--memory",
        "1KiB",
        "--role",
        "sender",
        sp.to_str().unwrap(),
        "--interval",
        "100ms",
        "-o",
        new.to_str().unwrap(),
    ]);
    common::fails(
        &["estimate", new.to_str().unwrap(), r.to_str().unwrap()],
        "cut is delimiter at the sender but clock at the receiver",
    );
}

/// `owl estimate --json` today on `vN/{method}-sender.owl` and `-receiver.owl`, held to what
/// the writing commit printed (`vN/estimate.json`) field by field, for each of `keys` that
/// commit printed, and for each of `or_withheld` where today's is not withheld (`null`);
/// today's report.
fn estimates_as_then(version: &str, method: &str, keys: &[&str], or_withheld: &[&str]) -> Value {
    let s = old(version, &format!("{method}-sender.owl"));
    let r = old(version, &format!("{method}-receiver.owl"));
    let now: Value = serde_json::from_str(&ok(&[
        "estimate",
        s.to_str().unwrap(),
        r.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let then: Value =
        serde_json::from_str(&std::fs::read_to_string(old(version, "estimate.json")).unwrap())
            .unwrap();
    let (a, b) = (
        now["intervals"].as_array().unwrap(),
        then["intervals"].as_array().unwrap(),
    );
    assert_eq!(a.len(), b.len(), "{version}");
    assert!(a.len() >= 3, "{version}");
    let mut compared = 0;
    for (x, y) in a.iter().zip(b) {
        for k in keys {
            if let Some(want) = y.get(k) {
                assert_eq!(&x[k], want, "{version}: interval {}: {k}", y["index"]);
                compared += 1;
            }
        }
        for k in or_withheld {
            if !x[k].is_null() {
                assert_eq!(&x[k], &y[k], "{version}: interval {}: {k}", y["index"]);
            }
        }
    }
    assert!(
        compared >= 4 * a.len(),
        "{version}: {compared} figures compared"
    );
    assert_eq!(
        now["overall"]["mean_ns"], then["overall"]["mean_ns"],
        "{version}"
    );
    now
}

/// Version 1 (one checksummed document, written whole at the end), recorded with the exact
/// method: the same figures today.
#[test]
fn version_1_files_estimate_as_they_did() {
    let now = estimates_as_then(
        "v1",
        "exact",
        &[
            "index",
            "start_ns",
            "mean_ns",
            "std_ns",
            "samples",
            "lost",
            "mean_ci98_ns",
        ],
        &[],
    );
    assert_eq!(now["checks"]["cuts"]["rule"], "clock");
    // no packet counts in version 1
    let r =
        StreamReader::open(std::fs::File::open(old("v1", "exact-sender.owl")).unwrap()).unwrap();
    assert_eq!(r.version, 1);
}

/// Version 2 (the first streamed one: no identity byte limit, no packet counts), recorded
/// with the paper's LDA rows (`LDA1`): the same figures today. The std and the mean's bound
/// are held to what was printed where today states them: LDA now withholds a std on fewer
/// than 3 usable rows (d50ff6c, merged after version 2) and its bound below 20 effective
/// samples (3180062), which every interval of this small recording is.
#[test]
fn version_2_files_estimate_as_they_did() {
    let now = estimates_as_then(
        "v2",
        "lda",
        &["index", "start_ns", "mean_ns", "samples", "lost"],
        &["std_ns", "mean_ci98_ns"],
    );
    assert_eq!(now["checks"]["cuts"]["rule"], "clock");
    let mut r =
        StreamReader::open(std::fs::File::open(old("v2", "lda-sender.owl")).unwrap()).unwrap();
    assert_eq!(r.version, 2);
    assert_eq!(r.header.identity_bytes, None);
    let b = r.next_block().unwrap().unwrap();
    assert_eq!(b.packets, None);
    assert_eq!(&b.payload[..4], b"LDA1");
}

/// A method payload no longer read: `sample`'s first format (`SMP1`, 16-byte samples), in the
/// version 3 files of the last commit that wrote it. The container reads; `owl estimate` refuses
/// the payload in one line naming the tag and what to do.
#[test]
fn sample_payloads_of_the_first_format_are_refused_naming_it() {
    let (s, r) = (
        old("smp1", "sample-sender.owl"),
        old("smp1", "sample-receiver.owl"),
    );
    let mut reader = StreamReader::open(std::fs::File::open(&s).unwrap()).unwrap();
    assert_eq!(
        (reader.version, reader.header.method.as_str()),
        (3, "sample")
    );
    let b = reader.next_block().unwrap().unwrap();
    assert_eq!(&b.payload[..4], b"SMP1");
    let e = common::fails(
        &["estimate", s.to_str().unwrap(), r.to_str().unwrap()],
        "a sample payload of the earlier format (SMP1, 16-byte samples)",
    );
    assert!(e.contains("record the captures again"), "{e}");
}

/// `bytes` read as a streamed synopsis file and written again with today's writer (header,
/// every block, the closing block); every block's payload decoded with the method the header
/// names and encoded again, and its cut data decoded. The blocks read.
fn rewritten(bytes: &[u8]) -> (Vec<u8>, Vec<owl_core::wire::Block>) {
    let mut r = StreamReader::open(bytes).unwrap();
    assert_eq!(r.version, owl_core::wire::STREAM_VERSION);
    let h = r.header.clone();
    let info = owl_core::registry::find(&h.method).unwrap();
    let m = (info.from_config)(&h.config).unwrap();
    let mut out = h.encode_stream_header();
    let mut blocks = Vec::new();
    while let Some(b) = r.next_block().unwrap() {
        let p = m.decode_point(h.role, &b.payload).unwrap();
        let mut again = Vec::new();
        p.encode(&mut again);
        assert_eq!(
            again, b.payload,
            "interval {}: payload encoded again",
            b.index
        );
        let mut cr = owl_core::wire::WireReader::new(&b.cut);
        let cut = owl_core::cut::decode_point_cut(&mut cr).unwrap();
        cr.finish("cut data").unwrap();
        if let owl_core::cut::PointCut::Sender { .. } = &cut {
            let mut again = Vec::new();
            owl_core::cut::encode_point_cut(&cut, 0, &mut again);
            assert_eq!(again, b.cut, "interval {}: cut data encoded again", b.index);
        }
        out.extend(SynopsisFile::encode_stream_block(
            b.index,
            b.packets.unwrap(),
            &b.payload,
            &b.cut,
        ));
        blocks.push(b);
    }
    out.extend(SynopsisFile::encode_stream_end(blocks.len() as u64));
    (out, blocks)
}

/// Version 4 (the current one), as the commit that introduced it wrote it: the same figures
/// today, cut at S's delimiters; read and written again, byte for byte.
#[test]
fn version_4_files_estimate_as_they_did_and_write_again_byte_for_byte() {
    let now = estimates_as_then(
        "v4",
        "lda",
        &[
            "index",
            "start_ns",
            "sent",
            "received",
            "mean_ns",
            "std_ns",
            "samples",
            "lost",
            "mean_ci98_ns",
            "std_ci95_ns",
            "cut",
        ],
        &[],
    );
    assert_eq!(now["checks"]["cuts"]["rule"], "delimiter");
    for role in ["sender", "receiver"] {
        let bytes = std::fs::read(old("v4", &format!("lda-{role}.owl"))).unwrap();
        let (again, blocks) = rewritten(&bytes);
        assert!(blocks.len() >= 3, "{role}");
        assert!(
            blocks.iter().all(|b| &b.payload[..4] == b"LDA2"),
            "{role}: the digest's rows"
        );
        assert_eq!(again.len(), bytes.len(), "{role}");
        assert!(again == bytes, "{role}: written again, the bytes differ");
    }
}
