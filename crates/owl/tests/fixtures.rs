//! Results do not change: `owl compare`, `owl record` and `owl estimate` on simulated pairs give
//! the figures pinned in `tests/fixtures/*.json`, recorded before the streaming pipeline replaced
//! the read-everything-then-estimate code. Every value a fixture holds must be in today's output,
//! bit for bit (floats included: serde_json round-trips `f64` exactly); keys a fixture does not
//! hold (fields added since) are not compared, nor are wall-clock times and paths.
//!
//! `OWL_BLESS=1 cargo test -p owl --test fixtures` rewrites the fixtures from today's output —
//! only for a deliberate change of results, said in the commit message.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::{ok, simulate};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Drop what legitimately differs between runs: times and file paths.
fn scrub(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("time_s");
            m.remove("path");
            for x in m.values_mut() {
                scrub(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(scrub),
        _ => {}
    }
}

/// Every value of `want` is in `got` at the same place; `got` may hold more keys.
fn check_subset(want: &Value, got: &Value, at: &str) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let gv = g
                    .get(k)
                    .unwrap_or_else(|| panic!("{at}.{k}: missing in today's output"));
                check_subset(wv, gv, &format!("{at}.{k}"));
            }
        }
        (Value::Array(w), Value::Array(g)) => {
            assert_eq!(w.len(), g.len(), "{at}: array length");
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                check_subset(wv, gv, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(want, got, "{at}"),
    }
}

fn pinned(name: &str, mut got: Value) {
    scrub(&mut got);
    let path = fixture(name);
    if std::env::var_os("OWL_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
        return;
    }
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap();
    check_subset(&want, &got, name);
}

/// The pair every fixture is computed on: loss, reordering, duplicates, router rewrites and a
/// clock offset, 20 000 packets over 0.2 s.
fn pair(dir: &Path) -> (String, String) {
    let (s, r, _) = simulate(
        dir,
        &[
            "--loss",
            "uniform:0.02",
            "--reorder",
            "0.01:5",
            "--duplicate",
            "0.002",
            "--rewrite",
            "ttl,mac,ecn=0.1",
            "--clock-offset",
            "-3us",
            "--delay",
            "exp:40us",
            "--seed",
            "5",
            // the fixtures were recorded on i.i.d. delays (the simulator's default then)
            "--independent-delays",
        ],
    );
    (
        s.to_str().unwrap().to_string(),
        r.to_str().unwrap().to_string(),
    )
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).expect("one JSON document")
}

#[test]
fn compare_results_are_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r) = pair(dir.path());
    pinned(
        "compare-whole.json",
        json(&["compare", &s, &r, "--json", "--methods", "all"]),
    );
    pinned(
        "compare-50ms.json",
        json(&[
            "compare",
            &s,
            &r,
            "--json",
            "--methods",
            "all",
            "--interval",
            "50ms",
        ]),
    );
    pinned(
        "compare-per-flow.json",
        json(&[
            "compare",
            &s,
            &r,
            "--json",
            "--methods",
            "exact,lds,countmin,mpe",
            "--interval",
            "100ms",
            "--per-flow",
            "--top",
            "5",
        ]),
    );
}

/// `owl demo --json`: the built-in example's figures; each per-packet method's largest delays
/// are distinct sending times (RLI once listed one ten times).
#[test]
fn demo_is_pinned() {
    let v = json(&["demo", "--json"]);
    for m in v["methods"].as_array().unwrap() {
        if let Some(a) = m["per_packet"]["anomalies"].as_array() {
            let mut sent: Vec<u64> = a.iter().map(|x| x["sender_ns"].as_u64().unwrap()).collect();
            let n = sent.len();
            sent.sort_unstable();
            sent.dedup();
            assert_eq!(sent.len(), n, "{}: {a:?}", m["name"]);
        }
    }
    pinned("demo.json", v);
}

#[test]
fn record_estimate_results_are_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r) = pair(dir.path());
    for method in ["exact", "lda", "rda", "lds"] {
        let so = dir.path().join(format!("{method}-s.owl"));
        let ro = dir.path().join(format!("{method}-r.owl"));
        for (role, cap, out) in [("sender", &s, &so), ("receiver", &r, &ro)] {
            ok(&[
                "record",
                "--method",
                method,
                "--role",
                role,
                cap,
                "--interval",
                "50ms",
                "-o",
                out.to_str().unwrap(),
            ]);
        }
        pinned(
            &format!("estimate-{method}.json"),
            json(&[
                "estimate",
                so.to_str().unwrap(),
                ro.to_str().unwrap(),
                "--json",
            ]),
        );
    }
}

/// `--threads`: the methods run side by side on any number of threads, and the output is the
/// same byte for byte, times aside — every method, whole run and 50 ms intervals, per-flow
/// figures included.
#[test]
fn compare_output_is_the_same_on_any_number_of_threads() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r) = pair(dir.path());
    for extra in [
        &["--methods", "all"][..],
        &[
            "--methods",
            "all",
            "--interval",
            "50ms",
            "--per-flow",
            "--top",
            "5",
        ][..],
    ] {
        let runs: Vec<String> = ["1", "2", "8"]
            .iter()
            .map(|t| {
                let mut args = vec!["compare", &s, &r, "--json", "--threads", t];
                args.extend_from_slice(extra);
                let mut v = json(&args);
                scrub(&mut v);
                serde_json::to_string(&v).unwrap()
            })
            .collect();
        assert_eq!(runs[0], runs[1], "{extra:?}: 1 and 2 threads");
        assert_eq!(runs[0], runs[2], "{extra:?}: 1 and 8 threads");
    }
}
