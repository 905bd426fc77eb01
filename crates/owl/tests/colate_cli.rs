//! COLATE on the command line: `owl record --method colate --store`, `owl query`,
//! `owl colate plan|stats`, and the epoch store's crash safety (the writer killed mid-run, then
//! the write-ahead log cut mid-transaction, as a power cut would).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::{fails, ok, simulate};

/// Small vectors dumped often: many epochs from a short capture.
const SMALL: [&str; 8] = [
    "--method-config",
    "colate:n=20000",
    "--method-config",
    "colate:m=10",
    "--method-config",
    "colate:b=24",
    "--method-config",
    "colate:threshold=200000000",
];

fn record(cap: &Path, store: &Path, point: &str) -> String {
    let mut args = vec![
        "record",
        "--method",
        "colate",
        "--store",
        store.to_str().unwrap(),
        "--point",
        point,
        cap.to_str().unwrap(),
    ];
    args.extend_from_slice(&SMALL);
    ok(&args)
}

fn epochs_in(store: &Path) -> u64 {
    let out = ok(&["colate", "stats", store.to_str().unwrap()]);
    out.lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn record_query_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r, _) = simulate(dir.path(), &["--flows", "50"]);
    let (ss, rs) = (dir.path().join("s.db"), dir.path().join("r.db"));
    let out = record(&s, &ss, "s");
    assert!(out.contains("bits per packet"), "{out}");
    record(&r, &rs, "r");
    assert!(epochs_in(&ss) >= 3);
    // the largest flow, from the exact per-flow truth
    let cmp = ok(&[
        "compare",
        s.to_str().unwrap(),
        r.to_str().unwrap(),
        "--methods",
        "exact",
        "--per-flow",
        "--top",
        "1",
        "--json",
    ]);
    let j: Value = serde_json::from_str(&cmp).unwrap();
    let f = &j["flows"][0];
    let flow = format!(
        "{} {} {} {} {}",
        f["proto"],
        f["src"].as_str().unwrap(),
        f["sport"],
        f["dst"].as_str().unwrap(),
        f["dport"]
    );
    // `owl query --flow FLOW ARGS… S.db R.db`
    let stores = [ss.to_str().unwrap(), rs.to_str().unwrap()];
    let query = |args: &[&str]| -> Vec<String> {
        ["query", "--flow", &flow]
            .iter()
            .chain(args)
            .chain(&stores)
            .map(|a| a.to_string())
            .collect()
    };
    let run = |args: &[&str]| ok(&query(args).iter().map(String::as_str).collect::<Vec<_>>());
    let q = run(&["--json"]);
    let v: Value = serde_json::from_str(&q).unwrap();
    let (t, e) = (
        f["truth"]["mean_ns"].as_f64().unwrap(),
        v["mean_ns"].as_f64().unwrap(),
    );
    assert!((e - t).abs() / t < 0.05, "{e} vs {t}: {v}");
    // m = 10 counters: 9 degrees of freedom give a 95 % interval wider than the std itself,
    // so it is withheld, and says why
    assert!(v["std_ns"].is_null() && v["std_ci95_ns"].is_null(), "{v}");
    let why = v["std_reason"].as_str().unwrap();
    assert!(why.contains("wider than the estimate"), "{why}");
    assert!(
        v["mean_interval_ns"].is_null() && v["certified"].is_null(),
        "{v}"
    );
    // the measured interval, asked for: it holds the truth here, and the same mean
    let w: Value = serde_json::from_str(&run(&["--confidence", "0.95", "--json"])).unwrap();
    assert_eq!(w["mean_ns"], v["mean_ns"]);
    let iv = &w["mean_interval_ns"];
    let (lo, hi) = (iv[0].as_f64().unwrap(), iv[1].as_f64().unwrap());
    assert!(lo <= t && t <= hi, "{lo} {t} {hi}: {w}");
    assert!(w["noise_draws"].as_u64().unwrap() > 1_000, "{w}");
    assert!(w["certified"]["within"].is_boolean(), "{w}");
    let bad = query(&["--confidence", "1.5"]);
    fails(
        &bad.iter().map(String::as_str).collect::<Vec<_>>(),
        "--confidence 1.5",
    );
    assert!(v["reliability"]["alpha"].as_f64().is_some());
    assert!(v["sender"]["epochs"].as_u64().unwrap() >= 3);
    // a time range before the capture holds no epoch
    let none = run(&["--to", "1000s"]);
    assert!(none.contains("mean     -"), "{none}");
    // text
    let text = run(&[]);
    assert!(text.contains("mean") && text.contains("plan"), "{text}");
    let text = run(&["--confidence", "0.9"]);
    assert!(
        text.contains("interval ") && text.contains("90 % confidence"),
        "{text}"
    );
    // a reader that stops early (`owl query … | head -1`) ends owl quietly, not in a panic
    let mut child = Command::new(env!("CARGO_BIN_EXE_owl"))
        .args(query(&["--json"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("panicked"), "{err}");
    // appending to a point keeps numbering; another configuration is refused by field
    record(&s, &ss, "s");
    fails(
        &[
            "record",
            "--method",
            "colate",
            "--store",
            ss.to_str().unwrap(),
            "--point",
            "s",
            s.to_str().unwrap(),
        ],
        "point s was recorded with n = 20000",
    );
    // the plan of the paper's example; what it promises at the default (real) ratio and the
    // corrected noise: nothing
    let plan = ok(&["colate", "plan", "--memory", "1MiB"]);
    assert!(plan.contains("m = 20, b = 19"), "{plan}");
    assert!(plan.contains("promise      corrected noise"), "{plan}");
    assert!(plan.contains("nothing: Eq. 22 needs"), "{plan}");
    // the paper's own promise at ratio 1: the example's t_min (8.5e4)
    let v: Value = serde_json::from_str(&ok(&[
        "colate", "plan", "--memory", "1MiB", "--model", "paper", "--ratio", "1", "--json",
    ]))
    .unwrap();
    let t_min = v["promise"]["t_min"].as_f64().unwrap();
    assert!((t_min / 85_003.0 - 1.0).abs() < 0.05, "{v}");
    assert_eq!(v["promise"]["covers_any"], true, "{v}");
    assert_eq!(v["plan"]["m"], 20);
    // Eq. 12's ratio measured from the two stores just recorded: delays of 5–80 µs over
    // epochs of seconds
    let v: Value = serde_json::from_str(&ok(&[
        "colate",
        "plan",
        "--memory",
        "1MiB",
        "--ratio-from",
        ss.to_str().unwrap(),
        rs.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let m = &v["ratio_measured"];
    let p5 = m["p5"].as_f64().unwrap();
    assert!(
        p5 > 0.0 && p5 < 0.01 && p5 <= m["median"].as_f64().unwrap(),
        "{v}"
    );
    assert!(m["counters"].as_u64().unwrap() > 1_000, "{v}");
    assert_eq!(v["promise"]["ratio"], m["p5"]);
    fails(
        &[
            "colate",
            "plan",
            "--ratio-from",
            ss.to_str().unwrap(),
            "/nonexistent.db",
        ],
        "no such epoch store",
    );
}

#[test]
fn bad_inputs_give_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let (s, _, _) = simulate(dir.path(), &[]);
    let db = dir.path().join("x.db");
    let (s, dbs) = (s.to_str().unwrap(), db.to_str().unwrap());
    fails(
        &["record", "--method", "lda", "--store", dbs, s],
        "use --method colate",
    );
    fails(
        &[
            "record",
            "--method",
            "colate",
            "--store",
            dbs,
            "--interval",
            "1s",
            s,
        ],
        "coordinates no intervals",
    );
    fails(
        &["query", "--flow", "tcp 1.2.3.4 80", dbs, dbs],
        "expected 'PROTO SRC SPORT DST DPORT'",
    );
    fails(
        &["query", "--flow", "tcp 1.2.3.4 80 5.6.7.8 99999", dbs, dbs],
        "port '99999'",
    );
    fails(
        &["query", "--flow", "tcp 1.2.3.4 80 5.6.7.8 90", dbs, dbs],
        "no such epoch store",
    );
    std::fs::write(&db, b"hello").unwrap();
    fails(
        &["query", "--flow", "tcp 1.2.3.4 80 5.6.7.8 90", dbs, dbs],
        "not an epoch store",
    );
    fails(
        &[
            "colate", "plan", "--memory", "1KiB", "--alpha", "0.99", "--beta", "0.01", "--t-min",
            "10",
        ],
        "no n meets",
    );
    fails(&["colate", "plan", "--rate", "0"], "--rate 0 must be");
    fails(&["colate", "plan", "--ratio", "2"], "must be in (0, 1]");
    fails(
        &["colate", "plan", "--model", "exact"],
        "is not paper or corrected",
    );
}

/// Kill the writer (SIGKILL) while it records from a FIFO: every epoch it had appended is
/// there and readable. Then cut the write-ahead log mid-transaction, as a power cut during a
/// dump would: at most that last epoch is lost, never an earlier one.
#[test]
#[cfg(unix)]
fn the_store_survives_a_killed_writer_and_a_torn_log() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    ok(&[
        "simulate",
        "--out",
        d,
        "--packets",
        "200k",
        "--rate",
        "100k",
        "--flows",
        "100",
    ]);
    let s = dir.path().join("sender.pcap");
    let fifo = dir.path().join("cap.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let db = dir.path().join("k.db");
    let mut args = vec![
        "record".to_string(),
        "--method".into(),
        "colate".into(),
        "--store".into(),
        db.to_str().unwrap().into(),
        "--point".into(),
        "k".into(),
        fifo.to_str().unwrap().into(),
    ];
    args.extend(SMALL.iter().map(|s| s.to_string()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_owl"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // feed 70 % of the capture, then wait until some epochs are in the store
    let bytes = std::fs::read(&s).unwrap();
    let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    w.write_all(&bytes[..bytes.len() * 7 / 10]).unwrap();
    w.flush().unwrap();
    let start = Instant::now();
    while epochs_in_quiet(&db) < 5 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no epochs appeared"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    drop(w);
    let before = epochs_in(&db);
    assert!(before >= 5, "{before}");
    let all = ok(&[
        "query",
        "--flow",
        "tcp 1.2.3.4 1 5.6.7.8 2",
        db.to_str().unwrap(),
        db.to_str().unwrap(),
        "--gamma",
        "0",
    ]);
    assert!(all.contains(&format!("{before} at the sender")), "{all}");
    // a power cut during the last dump: the log loses the tail of its last transaction
    let wal = dir.path().join("k.db-wal");
    let len = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    eprintln!("{before} epochs; write-ahead log of {len} bytes");
    assert!(len > 4096, "the killed writer left a log of {len} bytes");
    {
        let f = std::fs::OpenOptions::new().write(true).open(&wal).unwrap();
        f.set_len(len - 1000).unwrap();
        // the shared-memory index describes the old log: a rebooted machine has none
        let _ = std::fs::remove_file(dir.path().join("k.db-shm"));
        let after = epochs_in(&db);
        assert!(
            after == before || after + 1 == before,
            "{before} epochs before the cut, {after} after"
        );
        let q = ok(&[
            "query",
            "--flow",
            "tcp 1.2.3.4 1 5.6.7.8 2",
            db.to_str().unwrap(),
            db.to_str().unwrap(),
            "--gamma",
            "0",
        ]);
        assert!(q.contains(&format!("{after} at the sender")), "{q}");
    }
}

fn epochs_in_quiet(store: &Path) -> u64 {
    let o = common::owl(&["colate", "stats", store.to_str().unwrap()]);
    if !o.status.success() {
        return 0;
    }
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Flows as `PROTO SRC SPORT DST DPORT` and their true mean delays.
type Flows = Vec<(String, f64)>;

/// A pair of captures whose 240 packets span 13 days (a 9 KB public capture of that kind took
/// 6 s and 1 GB): 12 bursts of 20 UDP packets hours apart, the last 13 days after the one
/// before; R sees each packet 100–900 µs (whole µs) after S. The captures, each flow's
/// `PROTO SRC SPORT DST DPORT` with its true mean delay, and the true mean of all packets.
fn sparse_pair(dir: &Path) -> (PathBuf, PathBuf, Flows, f64) {
    use owl_trace::capture::{CaptureFormat, CaptureWriter};
    const HOUR: u64 = 3_600_000_000_000;
    let open = |name: &str| {
        let f = std::fs::File::create(dir.join(name)).unwrap();
        CaptureWriter::new(std::io::BufWriter::new(f), CaptureFormat::Pcap, 1, 0).unwrap()
    };
    let (mut s, mut r) = (open("s.pcap"), open("r.pcap"));
    let mut x = 33u64;
    let mut next = move || {
        // xorshift64*: seeded, no crate needed
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut flows = [(0u64, 0u64); 4];
    let mut at = 1_767_225_600_000_000_000u64;
    let (mut received, mut total) = (Vec::new(), 0.0);
    for burst in 0..12u64 {
        at += match burst {
            0 => 0,
            11 => 13 * 24 * HOUR,
            _ => (1 + next() % 30) * HOUR,
        };
        for k in 0..20u64 {
            let f = (next() % 4) as usize;
            let id = (burst * 20 + k) as u16;
            let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0];
            frame.extend_from_slice(&[0x45, 0, 0, 44]);
            frame.extend_from_slice(&id.to_be_bytes());
            frame.extend_from_slice(&[0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
            frame.extend_from_slice(&(5_000 + f as u16).to_be_bytes());
            frame.extend_from_slice(&[0, 53, 0, 24, 0, 0]);
            frame.extend_from_slice(&next().to_be_bytes());
            frame.extend_from_slice(&next().to_be_bytes());
            let ts = at + k * 1_000_000;
            let d = 1_000 * (100 + next() % 800);
            s.write_packet(ts, &frame, frame.len() as u32).unwrap();
            received.push((ts + d, frame));
            flows[f].0 += 1;
            flows[f].1 += d;
            total += d as f64 / 240.0;
        }
    }
    received.sort_by_key(|p| p.0);
    for (ts, frame) in &received {
        r.write_packet(*ts, frame, frame.len() as u32).unwrap();
    }
    s.finish().unwrap();
    r.finish().unwrap();
    let flows = flows
        .iter()
        .enumerate()
        .filter(|(_, f)| f.0 > 0)
        .map(|(k, f)| {
            (
                format!("udp 10.0.0.1 {} 10.0.0.2 53", 5_000 + k),
                f.1 as f64 / f.0 as f64,
            )
        })
        .collect();
    (dir.join("s.pcap"), dir.join("r.pcap"), flows, total)
}

/// Packets weeks apart: COLATE's commands finish with the packets' delays, in an epoch per
/// burst at most (the gaps cost nothing beyond that), whether through stores or synopsis files.
#[test]
fn a_capture_spanning_13_days() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r, flows, truth) = sparse_pair(dir.path());
    let (ss, rs) = (dir.path().join("s.db"), dir.path().join("r.db"));
    for (cap, store, point) in [(&s, &ss, "s"), (&r, &rs, "r")] {
        let out = ok(&[
            "record",
            "--method",
            "colate",
            "--store",
            store.to_str().unwrap(),
            "--point",
            point,
            cap.to_str().unwrap(),
        ]);
        assert!(out.contains("240 packets"), "{out}");
        let epochs = epochs_in(store);
        assert!(
            (1..=13).contains(&epochs),
            "{epochs} epochs for 12 bursts: {out}"
        );
    }
    let (sd, rd) = (ss.to_str().unwrap(), rs.to_str().unwrap());
    for (flow, truth) in &flows {
        let v: Value =
            serde_json::from_str(&ok(&["query", "--flow", flow, "--json", sd, rd])).unwrap();
        let mean = v["mean_ns"].as_f64().unwrap();
        assert!(
            (mean - truth).abs() < 1e-6 * truth,
            "{flow}: {mean} vs {truth}: {v}"
        );
    }
    // the synopsis files, one interval: the mean of every packet
    let (so, ro) = (dir.path().join("s.owl"), dir.path().join("r.owl"));
    for (cap, role, out) in [(&s, "sender", &so), (&r, "receiver", &ro)] {
        ok(&[
            "record",
            "--method",
            "colate",
            "--role",
            role,
            cap.to_str().unwrap(),
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
    let o = &e["overall"];
    assert_eq!(o["samples"], 240, "{e}");
    let mean = o["mean_ns"].as_f64().unwrap();
    assert!(
        (mean - truth).abs() < 1e-6 * truth,
        "{mean} vs {truth}: {e}"
    );
}
