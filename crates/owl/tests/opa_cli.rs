//! OPA through the command line: `compare --per-packet`, and `record` / `estimate`.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

mod common;
use common::{fails, ok, simulate};

/// A FIFO path with rare loss and bounded reordering, 20 000 packets.
fn pair(dir: &Path) -> (String, String) {
    let (s, r, _) = simulate(
        dir,
        &[
            "--fifo",
            "--delay",
            "weibull-mean:100us:2",
            "--loss",
            "uniform:2e-4",
            "--reorder",
            "2e-4:3",
            "--seed",
            "12",
        ],
    );
    (
        s.to_str().unwrap().to_string(),
        r.to_str().unwrap().to_string(),
    )
}

#[test]
fn per_packet_csv_and_summary_match_the_truth() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r) = pair(dir.path());
    let pp = dir.path().join("pp.csv");
    let dl = dir.path().join("delays.csv");
    let j: Value = serde_json::from_str(&ok(&[
        "compare",
        &s,
        &r,
        "--methods",
        "exact,opa,rli",
        "--per-packet",
        pp.to_str().unwrap(),
        "--delays",
        dl.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let truth = &j["truth"];
    let opa = &j["methods"][1];
    assert_eq!(opa["name"], "opa");
    // every delivered packet placed: its quantiles are the truth's
    let ppk = &opa["per_packet"];
    assert_eq!(ppk["delivered"], truth["received"], "{ppk}");
    assert_eq!(ppk["lost"], truth["lost"]);
    assert_eq!(ppk["unplaced"], 0);
    for q in ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "mean_ns", "std_ns"] {
        assert_eq!(opa[q].as_f64(), truth[q].as_f64(), "{q}");
    }
    assert!(ppk["bytes_per_packet"].as_f64().unwrap() < 3.0);
    assert_eq!(ppk["anomalies"][0]["delay_ns"], truth["max_ns"]);
    // the CSV: the header, one row per sender packet of opa, one per received one of rli,
    // and opa's delays are the truth's, packet by packet (joined on the sending time)
    let text = std::fs::read_to_string(&pp).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("method,sender_ns,receiver_ns,delay_ns"));
    let truth_delays: HashMap<String, String> = std::fs::read_to_string(&dl)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[1].to_string(), f[3].to_string())
        })
        .collect();
    let (mut opa_rows, mut rli_rows, mut lost) = (0u64, 0u64, 0u64);
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), 4, "{l}");
        match f[0] {
            "opa" => {
                opa_rows += 1;
                if f[3].is_empty() {
                    assert!(f[2].is_empty());
                    assert!(!truth_delays.contains_key(f[1]), "{l}: delivered");
                    lost += 1;
                } else {
                    assert_eq!(truth_delays[f[1]], f[3], "{l}");
                }
            }
            "rli" => rli_rows += 1,
            m => panic!("row of {m}"),
        }
    }
    assert_eq!(opa_rows, truth["sent"].as_u64().unwrap());
    assert_eq!(lost, truth["lost"].as_u64().unwrap());
    assert_eq!(rli_rows, truth["received"].as_u64().unwrap());
    // the text report lists them
    let t = ok(&["compare", &s, &r, "--methods", "exact,opa"]);
    assert!(t.contains("per packet") && t.contains("largest "), "{t}");
    // no per-packet method, no CSV
    fails(
        &[
            "compare",
            &s,
            &r,
            "--methods",
            "exact,lda",
            "--per-packet",
            pp.to_str().unwrap(),
        ],
        "--per-packet needs a per-packet method",
    );
}

#[test]
fn record_and_estimate_carry_opa() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r) = pair(dir.path());
    let d = dir.path();
    let (so, ro) = (d.join("s.owl"), d.join("r.owl"));
    for (cap, role, out) in [(&s, "sender", &so), (&r, "receiver", &ro)] {
        ok(&[
            "record",
            "--method",
            "opa-wavelet",
            "--role",
            role,
            cap,
            "-o",
            out.to_str().unwrap(),
        ]);
    }
    let e: Value = serde_json::from_str(&ok(&[
        "estimate",
        so.to_str().unwrap(),
        ro.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let c: Value = serde_json::from_str(&ok(&[
        "compare",
        &s,
        &r,
        "--methods",
        "opa-wavelet",
        "--json",
    ]))
    .unwrap();
    let (a, b) = (&e["intervals"][0], &c["methods"][0]);
    for k in ["mean_ns", "std_ns", "samples", "bytes", "lost"] {
        assert_eq!(a[k], b[k], "{k}: {a} vs {b}");
    }
    // a receiver recorded with another configuration is refused, naming the field
    let r2 = d.join("r2.owl");
    ok(&[
        "record",
        "--method",
        "opa-wavelet",
        "--method-config",
        "opa-wavelet:ratio=0.2",
        "--role",
        "receiver",
        &r,
        "-o",
        r2.to_str().unwrap(),
    ]);
    fails(
        &["estimate", so.to_str().unwrap(), r2.to_str().unwrap()],
        "ratio",
    );
}
