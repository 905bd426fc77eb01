//! Synopsis files written by earlier versions of owl, checked in as their writers wrote them
//! (`tests/old-files/vN/`, with the commit in `WRITTEN_BY` and what `owl estimate` printed for
//! them then in `estimate.json`): today's owl reads them and gives the same figures.
//!
//! - `v3/`: format version 3, `owl record --method lda --memory 1KiB --interval 100ms` at both
//!   points of a 3 000-packet simulated pair; clock cuts (version 3 has none other) and the
//!   paper's LDA rows (tag `LDA1`, before the identity digest).

mod common;

use std::path::PathBuf;

use common::ok;
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
