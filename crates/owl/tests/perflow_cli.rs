//! CLI checks of the per-flow methods, `compare --per-flow` and the simulator's ECMP and
//! flow-size presets.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::{fails, ok, owl};

fn simulate(dir: &Path, extra: &[&str]) -> (PathBuf, PathBuf) {
    let d = dir.to_str().unwrap();
    let mut args = vec!["simulate", "--out", d];
    args.extend_from_slice(extra);
    ok(&args);
    (dir.join("sender.pcap"), dir.join("receiver.pcap"))
}

/// Two queues and four ECMP paths: per-flow delays differ and neighbouring packets of other
/// flows say nothing about them. LDS (a roomy sketch here) nails the flows; RLI and MPE, which
/// interpolate between other flows' delays, do not.
#[test]
fn per_flow_report_with_every_method() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r) = simulate(
        dir.path(),
        &[
            "--packets",
            "60k",
            "--flows",
            "600",
            "--rate",
            "50k",
            "--delay",
            "weibull-mean:100us:0.7",
            "--class-delay",
            "weibull-mean:400us:0.7",
            "--class-fraction",
            "0.3",
            "--ecmp",
            "4:150us",
        ],
    );
    let out = ok(&[
        "compare",
        s.to_str().unwrap(),
        r.to_str().unwrap(),
        "--per-flow",
        "--top",
        "20",
        "--methods",
        "exact,lds,lds-mb,sds,rli,mpe,mpe1,countmin",
        "--json",
    ]);
    let j: Value = serde_json::from_str(&out).unwrap();
    let flows = j["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 20);
    for f in flows {
        for m in ["lds", "lds-mb", "sds", "rli", "mpe", "mpe1", "countmin"] {
            assert!(f["methods"][m].is_object(), "{m} missing in {f}");
        }
        let t = f["truth"]["mean_ns"].as_f64().unwrap();
        let e = f["methods"]["lds"]["mean_ns"].as_f64().unwrap();
        assert!((e - t).abs() / t < 0.05, "lds {e} vs truth {t}");
        // SDS has the true delays; every top flow has a cell to itself in a roomy sketch
        let e = f["methods"]["sds"]["mean_ns"].as_f64().unwrap();
        assert!((e - t).abs() / t < 1e-9);
        assert!(
            f["methods"]["lds"]["packets"].as_f64().unwrap()
                >= f["truth"]["sent"].as_f64().unwrap()
        );
        assert!(
            f["src"]
                .as_str()
                .unwrap()
                .parse::<std::net::IpAddr>()
                .is_ok()
        );
        assert!(f["dport"].is_u64() && f["sport"].is_u64() && f["proto"].is_u64());
    }
    let bins = j["flow_error_bins"].as_array().unwrap();
    assert_eq!(bins.len(), 4);
    let total: u64 = bins.iter().map(|b| b["flows"].as_u64().unwrap()).sum();
    assert_eq!(total, 600);
    // the bins of flows with ≥ 100 packets: LDS beats RLI and MPE by far
    for b in &bins[1..] {
        if b["flows"].as_u64().unwrap() < 5 {
            continue;
        }
        let med = |m: &str| b["methods"][m]["median_rel_err"].as_f64().unwrap();
        assert!(med("lds") * 5.0 < med("rli"), "{b}");
        assert!(med("lds") * 5.0 < med("mpe"), "{b}");
    }
    // the text report has the bins table
    let text = ok(&[
        "compare",
        s.to_str().unwrap(),
        r.to_str().unwrap(),
        "--per-flow",
        "--methods",
        "lds,rli",
    ]);
    assert!(text.contains("by flow size"), "{text}");
    assert!(text.contains("1000-9999"));
    // intervals: estimates still come, combined over intervals
    let out = ok(&[
        "compare",
        s.to_str().unwrap(),
        r.to_str().unwrap(),
        "--per-flow",
        "--top",
        "3",
        "--methods",
        "lds-mb,rli",
        "--interval",
        "300ms",
        "--json",
    ]);
    let j: Value = serde_json::from_str(&out).unwrap();
    for f in j["flows"].as_array().unwrap() {
        assert!(f["methods"]["rli"]["mean_ns"].as_f64().is_some());
        let p = f["methods"]["lds-mb"]["packets"].as_f64().unwrap();
        assert!(p >= f["truth"]["sent"].as_f64().unwrap());
    }
}

#[test]
fn simulator_presets_and_bad_ecmp() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    // an argument error: one line, status 1
    fails(
        &[
            "simulate",
            "--out",
            d,
            "--flow-preset",
            "lds-small",
            "--flows",
            "10",
        ],
        "cannot be used with",
    );
    for (bad, want) in [
        ("0:5us", "paths"),
        ("4:soon", "not a duration"),
        ("1us@x:1", "delay model"),
    ] {
        let o = owl(&["simulate", "--out", d, "--packets", "100", "--ecmp", bad]);
        assert!(!o.status.success());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(want), "{bad}: {e}");
    }
    let o = owl(&[
        "simulate",
        "--out",
        d,
        "--packets",
        "100",
        "--flow-max-weight",
        "1",
    ]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("largest flow weight"));
    let out = ok(&[
        "simulate",
        "--out",
        d,
        "--packets",
        "2000",
        "--ecmp",
        "0;20us@const:1us",
        "--json",
    ]);
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["ecmp"], "0ns;20.00us@const:1.000us");
}

/// COLATE in the per-flow table and in `flows[].methods.colate` {mean_ns, std_ns, packets}.
/// One lossless link with the same plan at both points: the flows' packets cancel down to
/// their delays, so the large flows' means are close; the std is Theorem 4's (a rough one from
/// m = 20 counters), only checked to be there.
#[test]
fn colate_in_the_per_flow_report() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r) = simulate(
        dir.path(),
        &["--packets", "40k", "--flows", "300", "--rate", "50k"],
    );
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let out = ok(&[
        "compare",
        s,
        r,
        "--per-flow",
        "--top",
        "10",
        "--methods",
        "exact,colate",
        "--json",
        "--method-config",
        "colate:memory=1MiB",
    ]);
    let j: Value = serde_json::from_str(&out).unwrap();
    for f in j["flows"].as_array().unwrap() {
        let c = &f["methods"]["colate"];
        let t = f["truth"]["mean_ns"].as_f64().unwrap();
        let e = c["mean_ns"].as_f64().unwrap();
        assert!((e - t).abs() / t < 0.05, "colate {e} vs truth {t}");
        assert!(c["std_ns"].as_f64().unwrap() >= 0.0);
        let p = c["packets"].as_f64().unwrap();
        let sent = f["truth"]["sent"].as_f64().unwrap();
        assert!((p - sent).abs() < 0.05 * sent, "{p} vs {sent}");
    }
    let text = ok(&["compare", s, r, "--per-flow", "--methods", "exact,colate"]);
    assert!(
        text.contains("relative error of each method's flow mean") && text.contains(" colate\n"),
        "{text}"
    );
}
