//! No silent wrong answers: each broken assumption of a capture pair (different snaplens,
//! capture windows that do not overlap, an origin inside the capture, swapped roles, the same
//! capture twice, …) is measured around, reported in the checks, or refused — never turned
//! into a plausible wrong figure.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

mod common;
use common::{fails, ok, owl, recapture, simulate, to_sll2, two_interfaces};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn compare_json(sender: &Path, receiver: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["compare", s(sender), s(receiver), "--json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&ok(&args)).expect("one JSON document")
}

/// A lossless pair of 20 000 packets (IMIX sizes, snaplen 128) with exponential delays.
fn pair(dir: &Path) -> (PathBuf, PathBuf, Value) {
    simulate(dir, &["--delay", "exp:40us", "--seed", "3"])
}

#[test]
fn different_snaplens_identify_on_the_common_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, books) = pair(dir.path());
    let r100 = dir.path().join("r100.pcap");
    recapture(&rp, &r100, 100, |_, _| true);
    let j = compare_json(&sp, &r100, &["--methods", "exact,lda"]);
    let t = &j["truth"];
    // before: 41.7 % lost and as many unexpected (every packet longer than 100 bytes)
    assert_eq!(t["lost"], books["report"]["lost"], "{t}");
    assert_eq!(t["unexpected"], 0, "{t}");
    let c = &j["checks"]["snaplen"];
    assert_eq!(c["status"], "adjusted", "{c}");
    // both Ethernet: 100 − 14 IP bytes are what both keep
    assert_eq!(c["identity_bytes"], 86);
    assert_eq!(c["snaplen"], serde_json::json!([128, 100]));
    assert!(c["identity_cut"][0].as_u64().unwrap() > 1000, "{c}");
    // the same figures as the pair captured alike
    let alike = compare_json(&sp, &rp, &["--methods", "exact"]);
    assert_eq!(t["mean_ns"], alike["truth"]["mean_ns"]);
    // the packets only one point saw are found again with the same identities
    let unmatched = dir.path().join("unmatched");
    ok(&["compare", s(&sp), s(&r100), "--unmatched", s(&unmatched)]);
}

#[test]
fn capture_windows_that_do_not_overlap_are_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, books) = pair(dir.path());
    assert_eq!(books["report"]["lost"], 0);
    // R started 6 000 packets late
    let late = dir.path().join("late.pcap");
    recapture(&rp, &late, 128, |i, _| i >= 6_000);
    let j = compare_json(&sp, &late, &["--methods", "exact,lda"]);
    let t = &j["truth"];
    // what was sent within the largest delay (~0.45 ms, ~45 packets) of R's first record
    // may have been lost: it stays counted lost; everything earlier is trimmed
    let lost = t["lost"].as_u64().unwrap();
    assert!(lost < 100, "lead-in taken for loss: {t}");
    assert_eq!(t["unexpected"], 0, "{t}");
    let c = &j["checks"];
    assert_eq!(c["trimmed"]["status"], "adjusted");
    let trimmed = c["trimmed"]["packets"][0].as_u64().unwrap();
    assert!((5_900..=6_000).contains(&trimmed), "{trimmed}");
    assert_eq!(lost + trimmed, 6_000);
    assert_eq!(t["sent"].as_u64().unwrap() + trimmed, 20_000);
    assert_eq!(c["spans"]["lead_in"][0], "sender");
    assert!(c["spans"]["lead_in"][1].as_u64().unwrap() > 50_000_000);
    // the methods measured the common window too: LDA's loss estimate is not the lead-in
    let lda = &j["methods"][1];
    assert!(lda["lost"].as_u64().unwrap() < 500, "{lda}");
    // --no-trim keeps the old behaviour: the lead-in counts lost
    let raw = compare_json(&sp, &late, &["--methods", "exact", "--no-trim"]);
    assert!(raw["truth"]["lost"].as_u64().unwrap() >= 5_990);
    // R stopped 6 000 packets early: at most the packets in flight when it stopped count lost
    let early = dir.path().join("early.pcap");
    recapture(&rp, &early, 128, |i, _| i < 14_000);
    let j = compare_json(&sp, &early, &["--methods", "exact", "--interval", "20ms"]);
    let lost = j["truth"]["lost"].as_u64().unwrap();
    assert!(lost < 100, "{}", j["truth"]);
    let trimmed = j["checks"]["trimmed"]["packets"][0].as_u64().unwrap();
    assert!((5_900..=6_000).contains(&trimmed), "{trimmed}");
    assert_eq!(j["checks"]["spans"]["lead_out"][0], "sender");
    // intervals wholly after R stopped are not reported as lost intervals
    for it in j["intervals"].as_array().unwrap() {
        assert!(it["truth"]["lost"].as_u64().unwrap() < 100, "{it}");
    }
}

#[test]
fn an_origin_inside_the_capture_drops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    // the capture starts at 2026-01-01T00:00:00Z; the origin is 103 ms later
    let origin = (1_767_225_600_000_000_000u64 + 103_000_000).to_string();
    let j = compare_json(
        &sp,
        &rp,
        &[
            "--methods",
            "exact,lda",
            "--interval",
            "10ms",
            "--origin-ns",
            &origin,
        ],
    );
    assert_eq!(j["sender"]["before_origin"], 0, "{}", j["sender"]);
    assert_eq!(j["receiver"]["before_origin"], 0);
    let ivs = j["intervals"].as_array().unwrap();
    let sent: u64 = ivs
        .iter()
        .map(|i| i["truth"]["sent"].as_u64().unwrap())
        .sum();
    assert_eq!(sent, 20_000);
    // boundaries at the origin: 3 ms past a multiple of 10 ms
    for it in ivs {
        assert_eq!(it["start_ns"].as_u64().unwrap() % 10_000_000, 3_000_000);
    }
    // the same grid with the origin an interval earlier: the same figures
    let before = (1_767_225_600_000_000_000u64 + 3_000_000).to_string();
    let k = compare_json(
        &sp,
        &rp,
        &[
            "--methods",
            "exact",
            "--interval",
            "10ms",
            "--origin-ns",
            &before,
        ],
    );
    assert_eq!(j["truth"]["in_interval"], k["truth"]["in_interval"]);
}

fn record(dir: &Path, method: &str, cap: &Path, role: &str, out: &str) -> PathBuf {
    record_with(dir, method, cap, role, out, &[])
}

/// `owl record` at 50 ms intervals with `extra` flags; the file written.
fn record_with(
    dir: &Path,
    method: &str,
    cap: &Path,
    role: &str,
    out: &str,
    extra: &[&str],
) -> PathBuf {
    let o = dir.join(out);
    let mut args = vec![
        "record",
        "--method",
        method,
        "--role",
        role,
        s(cap),
        "--interval",
        "50ms",
        "-o",
        s(&o),
    ];
    args.extend_from_slice(extra);
    ok(&args);
    o
}

#[test]
fn estimate_refuses_swapped_roles_for_every_method() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    for m in ["exact", "lda", "rda", "lds", "mpe"] {
        // R's capture recorded as the sender's, S's as the receiver's
        let so = record(dir.path(), m, &rp, "sender", &format!("{m}-s.owl"));
        let ro = record(dir.path(), m, &sp, "receiver", &format!("{m}-r.owl"));
        fails(&["estimate", s(&so), s(&ro)], "swapped");
        let j: Value = serde_json::from_str(&ok(&[
            "estimate",
            s(&so),
            s(&ro),
            "--json",
            "--allow-negative-delay",
        ]))
        .unwrap();
        assert_eq!(j["checks"]["clock"]["status"], "warning", "{m}");
        assert!(j["overall"]["mean_ns"].as_f64().unwrap() < 0.0, "{m}");
    }
}

#[test]
fn estimate_trims_intervals_one_point_did_not_record() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    let late = dir.path().join("late.pcap");
    // R starts 160 ms late: S alone recorded the intervals [0, 50) and [50, 100) ms (the one
    // just before R's first, [100, 150), is kept: packets in flight cross into R's next)
    recapture(&rp, &late, 128, |i, _| i >= 16_000);
    let so = record(dir.path(), "exact", &sp, "sender", "s.owl");
    let ro = record(dir.path(), "exact", &late, "receiver", "r.owl");
    let j: Value = serde_json::from_str(&ok(&["estimate", s(&so), s(&ro), "--json"])).unwrap();
    let c = &j["checks"]["trimmed"];
    assert_eq!(c["status"], "adjusted", "{c}");
    assert_eq!(c["intervals"][0], 2, "{c}");
    // before: the intervals before R started were estimated as 100 % lost
    assert!(j["intervals"][0]["mean_ns"].is_null());
    for it in &j["intervals"].as_array().unwrap()[1..] {
        assert!(it["mean_ns"].is_number(), "{it}");
    }
    let raw: Value =
        serde_json::from_str(&ok(&["estimate", s(&so), s(&ro), "--json", "--no-trim"])).unwrap();
    assert_eq!(
        raw["intervals"].as_array().unwrap().len(),
        j["intervals"].as_array().unwrap().len() + 2
    );
}

/// R's capture begins after S's (two captures started by hand): the intervals at the edge of
/// R's capture — S's just before R's first, where R has at most the packets in flight, and R's
/// first, where R started inside it — are shown with their loss withheld and left out of the
/// totals, under either cut, R starting at a boundary or inside an interval. Before, the totals
/// counted the edges: 25 % "lost" with R starting at the second of four 50 ms boundaries, 12.6 %
/// for a receiver starting 25 ms in. (R's first interval is whole when R starts at its
/// boundary: no synopsis tells that apart, so its loss is withheld too.)
#[test]
fn the_edges_of_a_late_receiver_stay_out_of_the_totals() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    const T: u64 = 50_000_000;
    for (cut, offset, edges) in [
        ("clock", 0, [0, 2]),
        ("clock", T / 2, [0, 2]),
        ("delimiter", 0, [0, 2]),
        ("delimiter", T / 2, [0, 2]),
    ] {
        // R starts `offset` after the first boundary past its first packet
        let first = std::cell::Cell::new(None);
        let late = dir.path().join("late.pcap");
        recapture(&rp, &late, 0, |_, ts| {
            let f = first.get().unwrap_or(ts);
            first.set(Some(f));
            ts >= (f / T + 1) * T + offset
        });
        let flags = ["--cut", cut];
        let so = record_with(dir.path(), "rda", &sp, "sender", "s.owl", &flags);
        let ro = record_with(dir.path(), "rda", &late, "receiver", "r.owl", &flags);
        let j: Value = serde_json::from_str(&ok(&["estimate", s(&so), s(&ro), "--json"])).unwrap();
        let case = format!("{cut}, R {} ms in", offset / 1_000_000);
        let c = &j["checks"]["intervals"];
        assert_eq!(c["edges"], serde_json::json!(edges), "{case}: {c}");
        let summary = c["summary"].as_str().unwrap();
        assert!(summary.contains("left out of the totals"), "{case}: {c}");
        let lines = j["intervals"].as_array().unwrap();
        let (edge, inside): (Vec<&Value>, Vec<&Value>) =
            lines.iter().partition(|l| l.get("edge").is_some());
        assert_eq!(edge.len(), 2, "{case}");
        for l in &edge {
            assert!(l["loss_rate"].is_null(), "{case}: {l}");
        }
        let sum = |k: &str| -> u64 { inside.iter().map(|l| l[k].as_u64().unwrap()).sum() };
        let o = &j["overall"];
        assert_eq!(o["sent"].as_u64(), Some(sum("sent")), "{case}: {o}");
        assert_eq!(o["received"].as_u64(), Some(sum("received")), "{case}: {o}");
        let loss = o["loss_rate"].as_f64().unwrap();
        // what the edges leave: packets in flight at R's first boundary, a few of 15 000
        assert!(loss.abs() < 0.01, "{case}: overall loss {loss}: {o}");
    }
}

/// R's capture ends first, inside an interval S recorded to its end: that interval is an edge
/// (what reached R's link after it stopped is not lost), under either cut; S's later intervals
/// are left out as before. Before, the totals counted R's last interval half empty (16.8 %
/// "lost" at 50 ms intervals, R stopping 25 ms into the third; now 0.15 % under the clock cut,
/// the packets in flight at the last boundary, and 0 under the delimiter cut).
#[test]
fn the_last_interval_of_a_receiver_that_stopped_first_stays_out_of_the_totals() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    const T: u64 = 50_000_000;
    let first = std::cell::Cell::new(None);
    let early = dir.path().join("early.pcap");
    recapture(&rp, &early, 0, |_, ts| {
        let f = first.get().unwrap_or(ts);
        first.set(Some(f));
        ts < (f / T + 2) * T + T / 2
    });
    for cut in ["clock", "delimiter"] {
        let flags = ["--cut", cut];
        let so = record_with(dir.path(), "rda", &sp, "sender", "s.owl", &flags);
        let ro = record_with(dir.path(), "rda", &early, "receiver", "r.owl", &flags);
        let j: Value = serde_json::from_str(&ok(&["estimate", s(&so), s(&ro), "--json"])).unwrap();
        let c = &j["checks"]["intervals"];
        assert_eq!(c["edges"], serde_json::json!([0, 1]), "{cut}: {c}");
        let lines = j["intervals"].as_array().unwrap();
        let last = lines.last().unwrap();
        assert!(
            last["edge"]
                .as_str()
                .unwrap()
                .contains("ended inside its last interval"),
            "{cut}: {last}"
        );
        assert!(last["loss_rate"].is_null(), "{cut}: {last}");
        let loss = j["overall"]["loss_rate"].as_f64().unwrap();
        assert!(
            loss.abs() < 0.01,
            "{cut}: overall loss {loss}: {}",
            j["overall"]
        );
    }
}

#[test]
fn the_same_capture_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, _, _) = pair(dir.path());
    fails(&["compare", s(&sp), s(&sp)], "same file");
    // a copy: said, in the checks and on stderr
    let copy = dir.path().join("copy.pcap");
    std::fs::copy(&sp, &copy).unwrap();
    let o = owl(&["compare", s(&sp), s(&copy), "--json", "--methods", "exact"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("same capture"), "{err}");
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["checks"]["clock"]["status"], "warning");
    assert!(
        j["checks"]["clock"]["summary"]
            .as_str()
            .unwrap()
            .contains("same capture")
    );
}

#[test]
fn checks_are_printed_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    let text = ok(&["compare", s(&sp), s(&rp), "--methods", "exact,lda"]);
    for name in ["snaplen", "spans", "trimmed", "late", "invalid", "clock"] {
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().take(3).any(|w| w == name)),
            "{name}: {text}"
        );
    }
    let j = compare_json(&sp, &rp, &["--methods", "exact"]);
    for name in ["snaplen", "spans", "trimmed", "late", "invalid", "clock"] {
        assert_eq!(j["checks"][name]["status"], "ok", "{name}: {}", j["checks"]);
    }
    let so = record(dir.path(), "lda", &sp, "sender", "s.owl");
    let ro = record(dir.path(), "lda", &rp, "receiver", "r.owl");
    let text = ok(&["estimate", s(&so), s(&ro)]);
    assert!(text.contains("checks"), "{text}");
    let j: Value = serde_json::from_str(&ok(&["estimate", s(&so), s(&ro), "--json"])).unwrap();
    for name in ["intervals", "trimmed", "clock"] {
        assert_eq!(j["checks"][name]["status"], "ok", "{name}: {}", j["checks"]);
    }
}

/// `owl compare … | head -1`: the reader closes the pipe; owl stops quietly with status 0.
#[test]
fn a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_owl"))
        .args([
            "compare",
            s(&sp),
            s(&rp),
            "--interval",
            "1ms",
            "--jsonl",
            "--allow-short-intervals",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with('{'));
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{:?}: {err}", o.status);
    assert!(err.trim().is_empty(), "{err}");
}

/// Each cause said once; the path given, not a temporary one.
#[test]
fn errors_name_the_file_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let e = fails(&["simulate", "--out", s(&file)], "a-file");
    assert_eq!(e.matches("os error").count(), 1, "{e}");
    let e = fails(
        &[
            "simulate",
            "--out",
            s(&dir.path().join("x")),
            "--from",
            "missing.pcap",
        ],
        "missing.pcap",
    );
    assert_eq!(e.matches("os error").count(), 1, "{e}");
    let (sp, _, _) = pair(dir.path());
    let e = fails(
        &[
            "record",
            "--method",
            "lda",
            "--role",
            "sender",
            s(&sp),
            "-o",
            "/nonexistent/x.owl",
        ],
        "/nonexistent/x.owl",
    );
    assert_eq!(e.matches("os error").count(), 1, "{e}");
}

/// Argument errors: one line, exit status 1, saying what is wrong with the value.
#[test]
fn argument_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    let (sp, rp) = (s(&sp), s(&rp));
    for (args, want) in [
        (vec!["compare", sp, rp, "--seed", "-1"], "negative"),
        (
            vec!["compare", sp, rp, "--origin-ns", "99999999999999999999"],
            "too large",
        ),
        (vec!["compare", sp, rp, "--interval", "1e30s"], "too long"),
        (vec!["compare", sp, rp, "--interval", "-1s"], "negative"),
        (
            vec!["compare", sp, rp, "--top", "-3", "--per-flow"],
            "negative",
        ),
        (vec!["compare", sp], "RECEIVER"),
        (vec!["compare", sp, rp, "--bogus"], "--bogus"),
        (
            vec!["simulate", "--out", "x", "--packets", "-5"],
            "non-negative",
        ),
        (
            vec!["simulate", "--out", "x", "--snaplen", "5000000000"],
            "too large",
        ),
    ] {
        let e = fails(&args, want);
        assert!(!e.contains("'-- "), "clap's tip: {e}");
    }
    // help and version are not errors
    let o = owl(&["compare", "--help"]);
    assert!(o.status.success());
}

/// The pair of the fixtures: loss, reordering, duplicates and a clock offset.
fn lossy_pair(dir: &Path) -> (PathBuf, PathBuf, Value) {
    simulate(
        dir,
        &[
            "--loss",
            "uniform:0.02",
            "--reorder",
            "0.01:5",
            "--duplicate",
            "0.002",
            "--clock-offset",
            "-3us",
            "--delay",
            "exp:40us",
            "--seed",
            "5",
        ],
    )
}

#[test]
fn per_flow_estimates_that_are_no_delay_are_left_out_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = lossy_pair(dir.path());
    let args = [
        "--methods",
        "exact,countmin,lds",
        "--interval",
        "100ms",
        "--per-flow",
    ];
    let j = compare_json(&sp, &rp, &args);
    let mut noted = 0;
    for f in j["flows"].as_array().unwrap() {
        let cm = &f["methods"]["countmin"];
        if let Some(m) = cm["mean_ns"].as_f64() {
            assert!(m.abs() <= 1e9, "countmin mean {m} beyond the horizon: {f}");
        }
        noted += cm.get("note").is_some() as usize;
    }
    assert!(
        noted > 0,
        "no flow says why its countmin estimate is missing"
    );
    for b in j["flow_error_bins"].as_array().unwrap() {
        for (_, m) in b["methods"].as_object().unwrap() {
            for k in ["median_rel_err", "p95_rel_err"] {
                // before: 9223372.036854776, a saturated cast
                assert!(m[k].as_f64().is_none_or(|e| e < 9e6), "{b}");
            }
        }
    }
    let mut targs = vec!["compare", s(&sp), s(&rp)];
    targs.extend_from_slice(&args);
    let text = ok(&targs);
    assert!(!text.contains("9223372x"), "{text}");
    assert!(text.contains("countmin: "), "{text}");
    assert!(text.contains("flows without an estimate"), "{text}");
}

#[test]
fn lda_advice_follows_from_the_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    // S stopped at 100 ms; R's intervals after that have nothing at S
    let early = dir.path().join("early.pcap");
    recapture(&sp, &early, 128, |i, _| i < 10_000);
    let so = record(dir.path(), "lda", &early, "sender", "s.owl");
    let ro = record(dir.path(), "lda", &rp, "receiver", "r.owl");
    let j: Value =
        serde_json::from_str(&ok(&["estimate", s(&so), s(&ro), "--json", "--no-trim"])).unwrap();
    let notes = j["intervals"].to_string();
    assert!(notes.contains("no packet sampled at the sender"), "{notes}");
    assert!(!notes.contains("every sampled row saw a loss"), "{notes}");
    // unrelated captures: R holds packets S never sent, and a loss of 0 is no measurement
    let other = tempfile::tempdir().unwrap();
    let (_, orp, _) = simulate(other.path(), &["--seed", "9"]);
    let sa = record(dir.path(), "lda", &sp, "sender", "sa.owl");
    let ra = record(dir.path(), "lda", &orp, "receiver", "ra.owl");
    let j: Value = serde_json::from_str(&ok(&[
        "estimate",
        s(&sa),
        s(&ra),
        "--json",
        "--allow-negative-delay",
    ]))
    .unwrap();
    let notes = j["intervals"].to_string();
    assert!(
        notes.contains("not a measurement") || notes.contains("did not see the same packets"),
        "{notes}"
    );
}

#[test]
fn notes_are_shown_with_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    let text = ok(&[
        "compare",
        s(&sp),
        s(&rp),
        "--methods",
        "exact,lda,mpe",
        "--interval",
        "50ms",
    ]);
    assert!(text.contains("intervals, first"), "{text}");
    assert!(text.contains("rows usable"), "{text}");
    let j = compare_json(&sp, &rp, &["--methods", "exact,lda", "--interval", "50ms"]);
    assert!(!j["methods"][1]["notes"].as_array().unwrap().is_empty());
}

#[test]
fn samples_are_explained() {
    let help = ok(&["compare", "--help"]);
    assert!(help.contains("`samples` counts"), "{help}");
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    let j = compare_json(&sp, &rp, &["--methods", "exact,mpe,mpe1"]);
    for m in j["methods"].as_array().unwrap() {
        assert!(
            m["samples_are"].as_str().is_some_and(|x| !x.is_empty()),
            "{m}"
        );
    }
    assert!(
        j["methods"][1]["samples_are"]
            .as_str()
            .unwrap()
            .contains("per flow")
    );
}

/// Options that do nothing where they are given are refused or warned about.
#[test]
fn options_without_effect_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    let out = dir.path().join("x");
    let out = s(&out);
    fails(&["compare", s(&sp), s(&rp), "--top", "3"], "--per-flow");
    fails(
        &["compare", s(&sp), s(&rp), "--rows", "3", "--json"],
        "cannot be used with",
    );
    fails(
        &["simulate", "--out", out, "--class-fraction", "0.2"],
        "--class-delay",
    );
    fails(
        &["simulate", "--out", out, "--from", s(&sp), "--packets", "5"],
        "cannot be used with",
    );
    let o = owl(&["simulate", "--out", out, "--packets", "100", "--sizes", "5"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--sizes 5") && err.contains("written longer"),
        "{err}"
    );
    // the default mix says nothing
    let o = owl(&["simulate", "--out", out, "--packets", "100"]);
    assert!(String::from_utf8_lossy(&o.stderr).is_empty());
}

/// Text tables fit 120 columns; IPv6 flows keep the columns aligned; error columns say they
/// are relative.
#[test]
fn text_tables_fit_120_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = simulate(dir.path(), &["--ipv6", "0.5", "--seed", "4"]);
    let text = ok(&[
        "compare",
        s(&sp),
        s(&rp),
        "--methods",
        "all",
        "--interval",
        "50ms",
        "--per-flow",
        "--top",
        "20",
    ]);
    assert!(text.contains("mean rel.err"), "{text}");
    assert!(
        text.contains("relative error of each method's mean"),
        "{text}"
    );
    assert!(
        text.contains("relative error of each method's flow mean"),
        "{text}"
    );
    let mut in_flows = false;
    let mut v6 = 0;
    for line in text.lines() {
        let width = line.chars().count();
        // notes and checks are sentences; table lines (continuations too) must fit
        let prose = line.contains(": ")
            || line.starts_with("checks")
            || (line.starts_with(' ')
                && line.trim_start().starts_with(|c: char| c.is_alphabetic()));
        assert!(prose || width <= 120, "{width} columns: {line}");
        if line.starts_with("flow ") {
            in_flows = true;
            continue;
        }
        if line.starts_with('…') {
            in_flows = false;
        }
        if in_flows && line.contains('[') {
            v6 += 1;
            assert!(width <= 120, "{line}");
        } else if in_flows && line.len() > 56 && !line[..47].trim().is_empty() {
            // the sent column: right-aligned at the same place for every flow
            assert!(
                line[47..55].trim().parse::<u64>().is_ok(),
                "misaligned: {line}"
            );
        }
    }
    assert!(v6 > 0, "no IPv6 flow among the largest: {text}");
}

/// README, --help and behaviour agree.
#[test]
fn help_and_behaviour_agree() {
    // only implemented methods are named
    let help = ok(&["--help"]);
    for m in ["OPA", "COLATE", "opa", "colate"] {
        let listed = ok(&["compare", "--help"]).contains(&format!("  {} ", m.to_lowercase()));
        assert!(listed || !help.contains(m), "owl --help names {m}: {help}");
    }
    // every command has examples; experiment names its files
    for cmd in [
        "demo",
        "simulate",
        "compare",
        "record",
        "estimate",
        "experiment",
    ] {
        let h = ok(&[cmd, "--help"]);
        assert!(h.contains("Examples:"), "{cmd} --help: {h}");
    }
    let h = ok(&["experiment", "--help"]);
    assert!(h.contains("lda-loss-summary.csv"), "{h}");
    assert!(h.contains("lds-weights-cdf.csv"), "{h}");
    // demo --keep writes the simulator's books like simulate
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("demo");
    ok(&["demo", "--keep", s(&keep), "--json"]);
    assert!(keep.join("sim.json").is_file());
    // the simulate summary does not call the delays after the queue "drawn"
    let out = ok(&[
        "simulate",
        "--out",
        s(&dir.path().join("f")),
        "--packets",
        "1000",
        "--fifo",
    ]);
    assert!(!out.contains("drawn"), "{out}");
    // intervals: the text's rows are labelled by the UTC start of the JSON's intervals
    let (sp, rp, _) = pair(dir.path());
    let text = ok(&[
        "compare",
        s(&sp),
        s(&rp),
        "--methods",
        "exact",
        "--interval",
        "50ms",
    ]);
    let j = compare_json(&sp, &rp, &["--methods", "exact", "--interval", "50ms"]);
    let first = owl::report::checks::format_utc(j["intervals"][0]["start_ns"].as_u64().unwrap());
    assert!(
        text.lines().any(|l| l.starts_with(&format!("{first} "))),
        "{first}: {text}"
    );
    // estimate's text: each interval's start time and LDA's 98 % bound
    let so = record(dir.path(), "lda", &sp, "sender", "s.owl");
    let ro = record(dir.path(), "lda", &rp, "receiver", "r.owl");
    let text = ok(&["estimate", s(&so), s(&ro)]);
    assert!(text.contains("2026-01-01 00:00:00.050000"), "{text}");
    assert!(text.contains("mean 98 % interval"), "{text}");
}

/// The default simulated path is a FIFO queue with rare reordering, as on routers; i.i.d.
/// per-packet delays (heavy reordering) are asked for by name.
#[test]
fn the_default_path_reorders_rarely() {
    let dir = tempfile::tempdir().unwrap();
    let share = |extra: &[&str], sub: &str| {
        let (_, _, books) = simulate(&dir.path().join(sub), extra);
        let b = &books["report"];
        b["reordered"].as_f64().unwrap() / b["delivered"].as_f64().unwrap()
    };
    let default = share(&[], "default");
    assert!(default > 0.0 && default < 0.01, "{default}");
    assert_eq!(share(&["--reorder", "none"], "strict"), 0.0);
    let iid = share(&["--independent-delays"], "iid");
    assert!(iid > 0.3, "{iid}");
    let o = owl(&[
        "simulate",
        "--out",
        s(&dir.path().join("old")),
        "--packets",
        "100",
        "--fifo",
    ]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("default"));
    assert!(ok(&["simulate", "--help"]).contains("--independent-delays"));
}

/// The lead-out of a capture that ran longer is trimmed for the methods exactly as for the
/// truth: R stops 30 000 of 100 000 packets early, and every method measures the window both
/// captured. Before, the lock-step handed the methods up to a batch (4 096 records) of S past
/// R's end before that end was known: 26 272 records kept from them instead of 29 953, and
/// LDA counted 2 232 lost, RDA and LDS 3 728, where the truth has 47.
#[test]
fn the_methods_measure_the_lead_out_the_truth_trims() {
    let dir = tempfile::tempdir().unwrap();
    let d = s(dir.path());
    ok(&[
        "simulate",
        "--out",
        d,
        "--packets",
        "100k",
        "--rate",
        "100k",
        "--delay",
        "exp:40us",
        "--seed",
        "3",
    ]);
    let (sp, rp) = (
        dir.path().join("sender.pcap"),
        dir.path().join("receiver.pcap"),
    );
    let early = dir.path().join("early.pcap");
    recapture(&rp, &early, 128, |i, _| i < 70_000);
    let j = compare_json(&sp, &early, &["--methods", "exact,lda,rda,lds"]);
    let c = &j["checks"]["trimmed"];
    assert_eq!(
        c["records"][0], c["packets"][0],
        "the methods' window is the truth's: {c}"
    );
    assert!(c["packets"][0].as_u64().unwrap() > 29_900, "{c}");
    let truth = j["truth"]["lost"].as_u64().unwrap();
    assert!(truth < 100, "{}", j["truth"]);
    let lost = |name: &str| {
        let m = j["methods"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name);
        m.unwrap()["lost"].as_u64().unwrap()
    };
    // RDA and LDS count every packet S recorded and R did not: the truth's own figure
    assert_eq!((lost("rda"), lost("lds")), (truth, truth));
    // LDA sees a loss only in its sampled rows (1 % and 0.05 % of packets), each worth about
    // 100 packets: within that of the truth
    assert!(
        lost("lda").abs_diff(truth) <= 200,
        "lda {} vs {truth}",
        lost("lda")
    );
}

/// Item 1 across link types: S captured on Ethernet at 128 bytes, R with `tcpdump -i any`
/// (Linux SLL2, a 20-byte link header) at 100. Both keep 80 IP bytes of a long packet at most;
/// identified on those, every packet matches. (Cutting both frames at 100 bytes hashed 86 IP
/// bytes at S and 80 at R: every packet longer than 80 bytes counted lost and unexpected.)
#[test]
fn ethernet_and_sll2_with_different_snaplens_agree_on_ip_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, books) = pair(dir.path());
    let sll2 = dir.path().join("any.pcapng");
    to_sll2(&rp, &sll2, 100);
    let j = compare_json(&sp, &sll2, &["--methods", "exact,lda"]);
    let t = &j["truth"];
    assert_eq!(t["lost"], books["report"]["lost"], "{t}");
    assert_eq!(t["unexpected"], 0, "{t}");
    let c = &j["checks"]["snaplen"];
    assert_eq!(c["status"], "adjusted", "{c}");
    assert_eq!(c["identity_bytes"], 80, "{c}");
    assert_eq!(c["linktype"], serde_json::json!([1, 276]));
    let summary = c["summary"].as_str().unwrap();
    assert!(
        summary.contains("LINUX_SLL2") && summary.contains("80 IP bytes"),
        "{summary}"
    );
    // the delays are those of the pair captured alike
    let alike = compare_json(&sp, &rp, &["--methods", "exact"]);
    assert_eq!(t["mean_ns"], alike["truth"]["mean_ns"]);
    // --identity-bytes gives the same figures; more bytes than R keeps is a warning
    let k = compare_json(
        &sp,
        &sll2,
        &["--methods", "exact", "--identity-bytes", "80"],
    );
    assert_eq!(k["truth"]["mean_ns"], t["mean_ns"]);
    let w = compare_json(
        &sp,
        &sll2,
        &["--methods", "exact", "--identity-bytes", "114"],
    );
    let c = &w["checks"]["snaplen"];
    assert_eq!(c["status"], "warning", "{c}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("--identity-bytes 80 or less"),
        "{c}"
    );
    // --unmatched finds the packets again with the identities measured
    let unmatched = dir.path().join("unmatched");
    ok(&["compare", s(&sp), s(&sll2), "--unmatched", s(&unmatched)]);
    // too few bytes to keep packets apart: refused
    fails(
        &["compare", s(&sp), s(&sll2), "--identity-bytes", "20"],
        "at least 40",
    );
}

/// Item 1 for points recorded apart: the identity byte limit is agreed with --identity-bytes,
/// written into each synopsis file, and estimate refuses a pair recorded with different values;
/// record warns when its capture keeps fewer bytes than the limit.
#[test]
fn recorded_points_agree_on_identity_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, books) = pair(dir.path());
    let sll2 = dir.path().join("any.pcapng");
    to_sll2(&rp, &sll2, 100);
    let agreed = ["--identity-bytes", "80"];
    let so = record_with(dir.path(), "rda", &sp, "sender", "s.owl", &agreed);
    let ro = record_with(dir.path(), "rda", &sll2, "receiver", "r.owl", &agreed);
    let j: Value = serde_json::from_str(&ok(&["estimate", s(&so), s(&ro), "--json"])).unwrap();
    // the figures of the pair captured alike (no packet is lost: RDA's lost are the packets
    // in flight at the 50 ms boundaries)
    assert_eq!(books["report"]["lost"], 0);
    let alike_s = record(dir.path(), "rda", &sp, "sender", "alike-s.owl");
    let alike_r = record(dir.path(), "rda", &rp, "receiver", "alike-r.owl");
    let alike: Value =
        serde_json::from_str(&ok(&["estimate", s(&alike_s), s(&alike_r), "--json"])).unwrap();
    let lost = alike["overall"]["lost"].as_u64().unwrap();
    assert!(lost < 100, "{}", alike["overall"]);
    assert_eq!(j["overall"]["lost"], lost, "{}", j["overall"]);
    assert_eq!(j["overall"]["mean_ns"], alike["overall"]["mean_ns"]);
    // recorded without the limit at R: refused, naming both values
    let bare = record(dir.path(), "rda", &sll2, "receiver", "bare.owl");
    fails(
        &["estimate", s(&so), s(&bare)],
        "identity bytes is 80 (--identity-bytes) at the sender but every captured byte (no --identity-bytes) at the receiver",
    );
    // and without it at both, the long packets would not have matched
    let bare_s = record(dir.path(), "rda", &sp, "sender", "bare-s.owl");
    let k: Value =
        serde_json::from_str(&ok(&["estimate", s(&bare_s), s(&bare), "--json"])).unwrap();
    assert!(
        k["overall"]["lost"].as_u64().unwrap() > lost + 5_000,
        "{}",
        k["overall"]
    );
    // R keeps 80 IP bytes: a limit of 114 is more than it has
    let o = owl(&[
        "record",
        "--method",
        "rda",
        "--role",
        "receiver",
        s(&sll2),
        "--interval",
        "50ms",
        "--identity-bytes",
        "114",
        "-o",
        s(&dir.path().join("x.owl")),
    ]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("keeps 80 IP bytes") && err.contains("--identity-bytes 80 or less"),
        "{err}"
    );
}

/// Item 21's estimate figures: each interval's sent and received packets (each point's packet
/// counter, written beside its synopsis) and the loss rate they give, in text and JSON.
#[test]
fn estimate_reports_sent_received_and_loss() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, books) = lossy_pair(dir.path());
    let so = record(dir.path(), "lda", &sp, "sender", "s.owl");
    let ro = record(dir.path(), "lda", &rp, "receiver", "r.owl");
    let j: Value = serde_json::from_str(&ok(&["estimate", s(&so), s(&ro), "--json"])).unwrap();
    let o = &j["overall"];
    let (sent, received) = (o["sent"].as_u64().unwrap(), o["received"].as_u64().unwrap());
    let r = &books["report"];
    assert_eq!(sent, r["sent"].as_u64().unwrap(), "{o} {r}");
    // R's counter counts every copy it recorded
    let copies = r["delivered"].as_u64().unwrap() + r["duplicated"].as_u64().unwrap();
    assert_eq!(received, copies, "{o} {r}");
    let rate = o["loss_rate"].as_f64().unwrap();
    assert!((rate - (sent - received) as f64 / sent as f64).abs() < 1e-12);
    assert!(rate > 0.015, "{o}");
    let ivs = j["intervals"].as_array().unwrap();
    let sum = |k: &str| ivs.iter().map(|i| i[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!((sum("sent"), sum("received")), (sent, received));
    let text = ok(&["estimate", s(&so), s(&ro)]);
    let head = text.lines().nth(1).unwrap();
    for col in ["sent", "received", "loss", "lost"] {
        assert!(head.split_whitespace().any(|c| c == col), "{head}");
    }
    let all = text
        .lines()
        .find(|l| l.trim_start().starts_with("all"))
        .unwrap();
    assert!(
        all.contains(&sent.to_string()) && all.contains(&received.to_string()),
        "{all}"
    );
    assert!(all.contains(&format!("{:.2}%", 100.0 * rate)), "{all}");
    // the table's rows fit 120 columns (notes under them are prose)
    for l in text.lines().skip(1).take_while(|l| !l.is_empty()) {
        // (a row's first column is 12 wide; notes are indented by 13)
        if l.len() - l.trim_start().len() < 12 {
            assert!(l.chars().count() <= 120, "{l}");
        }
    }
}

/// Item 15's --interface: a pcapng holding S's packets on interface 0 and, on interface 1,
/// the receiver's cut at 96 bytes (`dumpcap -i a -s 0 -i b -s 96`). Measured together they
/// would identify packets on different bytes and count every packet twice: refused with a
/// message naming the option; --sender-interface 0 measures S's interface alone, as the plain
/// capture.
#[test]
fn unlike_interfaces_are_refused_and_one_is_selected() {
    let dir = tempfile::tempdir().unwrap();
    let (sp, rp, _) = pair(dir.path());
    let both = dir.path().join("both.pcapng");
    two_interfaces(&sp, &rp, &both, 6, 96);
    let e = fails(
        &["compare", s(&both), s(&rp), "--methods", "exact"],
        "--sender-interface N",
    );
    assert!(e.contains("interface 1") && e.contains("snaplen 96"), "{e}");
    let j = compare_json(
        &both,
        &rp,
        &["--methods", "exact,lda", "--sender-interface", "0"],
    );
    let plain = compare_json(&sp, &rp, &["--methods", "exact,lda"]);
    assert_eq!(j["truth"], plain["truth"]);
    assert_eq!(j["methods"][1]["mean_ns"], plain["methods"][1]["mean_ns"]);
    assert_eq!(j["sender"]["other_interface"], j["receiver"]["ip_packets"]);
    // record: the same refusal and selection
    fails(
        &[
            "record",
            "--method",
            "lda",
            "--role",
            "sender",
            s(&both),
            "-o",
            s(&dir.path().join("x.owl")),
        ],
        "with --interface N",
    );
    record_with(
        dir.path(),
        "lda",
        &both,
        "sender",
        "s.owl",
        &["--interface", "0"],
    );
    fails(
        &["compare", s(&both), s(&rp), "--interface", "7"],
        "no interface 7",
    );
    // simulate --from: the same (the interfaces differ in snaplen)
    let out = dir.path().join("sim");
    fails(
        &["simulate", "--from", s(&both), "--out", s(&out)],
        "--interface N",
    );
    ok(&[
        "simulate",
        "--from",
        s(&both),
        "--interface",
        "0",
        "--out",
        s(&out),
    ]);
    // alike interfaces (one link type and snaplen; one at ns, one at µs, each packet timed at
    // its own) are one stream, and the checks say so
    let alike = dir.path().join("alike.pcapng");
    two_interfaces(&sp, &sp, &alike, 6, 262_144);
    let j = compare_json(&alike, &rp, &["--methods", "exact"]);
    let c = &j["checks"]["snaplen"];
    assert_eq!(c["interfaces"], serde_json::json!([2, 1]), "{c}");
    assert!(
        c["summary"]
            .as_str()
            .unwrap()
            .contains("2 alike interfaces"),
        "{c}"
    );
}
