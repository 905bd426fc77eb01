//! A network of points (`owl agent --config FILE`): three points A, B and C, each replaying
//! its one capture, measure three paths A→B, A→C and B→C; B is the receiver of one path and
//! the sender of another at once. Each path's results equal what `owl record` and `owl
//! estimate` give on that path's own two captures.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::{Guard, ok};
use serde_json::Value;

/// Copy Ethernet/IPv4 capture `src` to `dst` with every source address moved to 10.`net`.x.y
/// (its last two bytes kept): one path's traffic, told apart by `src net 10.NET.0.0/16`.
fn renet(src: &Path, dst: &Path, net: u8) {
    use owl_trace::capture::{CaptureFormat, CaptureReader, CaptureWriter};
    let mut r = CaptureReader::open(src).unwrap();
    let f = std::io::BufWriter::new(std::fs::File::create(dst).unwrap());
    let mut w = CaptureWriter::new(f, CaptureFormat::Pcap, 1, 0).unwrap();
    while let Some(p) = r.next_packet().unwrap() {
        let mut d = p.data.to_vec();
        assert_eq!(d[14] >> 4, 4, "IPv4 only (simulate --ipv6 0)");
        d[26] = 10;
        d[27] = net;
        w.write_packet(p.ts_ns, &d, p.orig_len).unwrap();
    }
    w.finish().unwrap();
}

/// One path's pair of captures: simulated, moved to its own source net.
fn path(dir: &Path, name: &str, net: u8, seed: &str, loss: &str) -> (PathBuf, PathBuf) {
    path_of(dir, name, net, &["--seed", seed, "--loss", loss])
}

/// [`path`] with `owl simulate`'s own flags (default: 20 000 packets at 100 000 a second).
fn path_of(dir: &Path, name: &str, net: u8, flags: &[&str]) -> (PathBuf, PathBuf) {
    let d = dir.join(name);
    let mut args = vec!["simulate", "--out", d.to_str().unwrap(), "--ipv6", "0"];
    if !flags.contains(&"--packets") {
        args.extend(["--packets", "20k", "--rate", "100k"]);
    }
    args.extend(flags);
    ok(&args);
    let (s, r) = (d.join("sender.pcap"), d.join("receiver.pcap"));
    let (s2, r2) = (d.join("s.pcap"), d.join("r.pcap"));
    renet(&s, &s2, net);
    renet(&r, &r2, net);
    (s2, r2)
}

/// Start `owl agent --config FILE`; its stderr is read until it says where it listens (a
/// point with receiver paths), then drained to a file.
fn point(config: &Path, log: &Path, listens: bool) -> (Child, Option<String>) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_owl"))
        .args(["agent", "--config", config.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(c.stderr.take().unwrap());
    let mut addr = None;
    let mut seen = String::new();
    if listens {
        loop {
            let mut l = String::new();
            assert!(
                err.read_line(&mut l).unwrap() > 0,
                "{config:?} said: {seen}"
            );
            seen.push_str(&l);
            if let Some(a) = l.trim().strip_prefix("owl: agent: listening on ") {
                addr = Some(a.to_string());
                break;
            }
        }
    }
    let log = log.to_path_buf();
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        std::fs::write(log, seen + &rest).unwrap();
    });
    (c, addr)
}

/// A point's file: `paths` are (name, role, peer, source net); `top` and `capture` are more
/// lines for the top and for `[capture]`.
#[allow(clippy::too_many_arguments)]
fn config(
    dir: &Path,
    name: &str,
    capture: &Path,
    listen: bool,
    key: &Path,
    paths: &[(&str, &str, Option<&str>, u8)],
    top: &str,
    capture_extra: &str,
) -> PathBuf {
    let mut t = format!(
        "name = \"{name}\"\nkey_file = \"{}\"\n{}\n{top}\n[capture]\nreplay = \"{}\"\n{capture_extra}\n[defaults]\nmethods = \"rda,lda\"\ninterval = \"{INTERVAL}\"\nqueue = 4\n",
        key.display(),
        if listen {
            "listen = \"127.0.0.1:0\""
        } else {
            ""
        },
        capture.display()
    );
    for (path, role, peer, net) in paths {
        t.push_str(&format!(
            "\n[[path]]\nname = \"{path}\"\nrole = \"{role}\"\nfilter = \"src net 10.{net}.0.0/16\"\n"
        ));
        if let Some(p) = peer {
            t.push_str(&format!("peer = \"{p}\"\n"));
        }
    }
    let f = dir.join(format!("{name}.toml"));
    std::fs::write(&f, t).unwrap();
    f
}

const INTERVAL: &str = "20ms";

/// What `owl estimate` gives for `method` on a path's own two captures, by interval.
fn estimate(dir: &Path, s: &Path, r: &Path, method: &str, interval: &str) -> Vec<Value> {
    let agreed = ["--interval", interval];
    let (fs, _) = common::record(dir, method, s, "sender", "s.owl", &agreed);
    let (fr, _) = common::record(dir, method, r, "receiver", "r.owl", &agreed);
    ok(&[
        "estimate",
        fs.to_str().unwrap(),
        fr.to_str().unwrap(),
        "--jsonl",
    ])
    .lines()
    .map(|l| serde_json::from_str::<Value>(l).unwrap())
    .filter(|v| v["type"] == "interval")
    .collect()
}

/// Wait for a point to exit: its status and its standard output's lines.
fn finish(g: &mut Guard) -> (std::process::ExitStatus, Vec<Value>) {
    let mut child = g.0.take().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let lines = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect();
    (child.wait().unwrap(), lines)
}

/// Path `name`'s estimated intervals in `lines` are those `owl estimate` gives on the path's
/// own pair (`s`, `r`, recorded in `dir`): the same indices, and for each of `methods` (in the
/// lines' order) the same `keys`; at least `min` intervals.
fn assert_path_as_its_pair(
    lines: &[Value],
    name: &str,
    (dir, s, r): (&Path, &Path, &Path),
    methods: &[&str],
    keys: &[&str],
    min: usize,
) {
    let got: Vec<&Value> = lines
        .iter()
        .filter(|l| l["path"] == name && l["type"] == "interval" && l["status"] == "estimated")
        .collect();
    for (i, m) in methods.iter().enumerate() {
        let want = estimate(dir, s, r, m, INTERVAL);
        assert!(want.len() >= min, "{name} {m}: {} intervals", want.len());
        assert_eq!(
            got.iter().map(|l| l["index"].clone()).collect::<Vec<_>>(),
            want.iter().map(|l| l["index"].clone()).collect::<Vec<_>>(),
            "{name} {m}: intervals"
        );
        for (g, w) in got.iter().zip(&want) {
            let g = &g["methods"][i];
            assert_eq!(g["method"], *m);
            for k in keys {
                assert_eq!(g[*k], w[*k], "{name} {m} interval {}: {k}", w["index"]);
            }
        }
    }
}

#[test]
fn three_points_measure_three_paths_each_as_its_own_pair_would() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("k");
    ok(&["keygen", "-o", key.to_str().unwrap()]);
    let ab = path(d, "ab", 1, "11", "uniform:0.01");
    let ac = path(d, "ac", 2, "12", "none");
    let bc = path(d, "bc", 3, "13", "uniform:0.02");
    // each point's one capture: what leaves it and what reaches it
    let (a, b, c) = (d.join("a.pcap"), d.join("b.pcap"), d.join("c.pcap"));
    common::merge(&ab.0, &ac.0, &a);
    common::merge(&ab.1, &bc.0, &b);
    common::merge(&ac.1, &bc.1, &c);
    // C's receiver paths deliver to a collector too
    let db = d.join("owl.db");
    let (collector, said) = common::first_line(
        Command::new(env!("CARGO_BIN_EXE_owl"))
            .args(["collector", "--listen", "127.0.0.1:0", "--db"])
            .arg(&db)
            .args(["--key-file", key.to_str().unwrap()])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        "owl: collector: listening on ",
    );
    let mut collector = Guard(Some(collector));
    let addr = said.split(',').next().unwrap();
    let to_collector = format!("collector = \"{addr}\"");
    let cc = config(
        d,
        "c",
        &c,
        true,
        &key,
        &[
            ("a-to-c", "receiver", None, 2),
            ("b-to-c", "receiver", None, 3),
        ],
        &to_collector,
        "",
    );
    let (pc, c_addr) = point(&cc, &d.join("c.log"), true);
    let mut pc = Guard(Some(pc));
    let c_addr = c_addr.unwrap();
    let bcf = config(
        d,
        "b",
        &b,
        true,
        &key,
        &[
            ("a-to-b", "receiver", None, 1),
            ("b-to-c", "sender", Some(&c_addr), 3),
        ],
        "",
        "",
    );
    let (pb, b_addr) = point(&bcf, &d.join("b.log"), true);
    let mut pb = Guard(Some(pb));
    let b_addr = b_addr.unwrap();
    let acf = config(
        d,
        "a",
        &a,
        false,
        &key,
        &[
            ("a-to-b", "sender", Some(&b_addr), 1),
            ("a-to-c", "sender", Some(&c_addr), 2),
        ],
        "",
        "",
    );
    let (pa, _) = point(&acf, &d.join("a.log"), false);
    let mut pa = Guard(Some(pa));
    let mut lines: Vec<Value> = Vec::new();
    for (g, name) in [(&mut pc, "c"), (&mut pb, "b"), (&mut pa, "a")] {
        let (status, out) = finish(g);
        let log = || std::fs::read_to_string(d.join(format!("{name}.log"))).unwrap_or_default();
        assert!(status.success(), "point {name}: {status}\n{}", log());
        lines.extend(out);
    }
    // the collector stored C's two paths, each with its two points
    collector.0.as_mut().unwrap().kill().unwrap();
    collector.0.take().unwrap().wait().unwrap();
    let pairs: Value = serde_json::from_str(&ok(&[
        "report",
        "--db",
        db.to_str().unwrap(),
        "--pairs",
        "--json",
    ]))
    .unwrap();
    let listed: Vec<(String, String, String)> = pairs["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap().to_string();
            (s("pair"), s("sender_point"), s("receiver_point"))
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("a-to-c".into(), "a".into(), "c".into()),
            ("b-to-c".into(), "b".into(), "c".into())
        ]
    );
    for (name, short, (s, r)) in [
        ("a-to-b", "ab", &ab),
        ("a-to-c", "ac", &ac),
        ("b-to-c", "bc", &bc),
    ] {
        let mine: Vec<&Value> = lines.iter().filter(|l| l["path"] == name).collect();
        let summary = mine
            .iter()
            .find(|l| l["type"] == "summary")
            .unwrap_or_else(|| panic!("{name}: no summary"));
        assert_eq!(summary["missing"], 0, "{name}: {summary}");
        assert_path_as_its_pair(
            &lines,
            name,
            (&d.join(short), s, r),
            &["rda", "lda"],
            &["mean_ns", "samples", "lost"],
            8,
        );
    }
}

/// The shipped example (`deploy/systemd/point-example.toml`) passes `--check`, which lists its
/// paths for scripts (name, role, peer, filter, methods; tab-separated).
#[test]
fn the_shipped_point_file_checks() {
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd/point-example.toml");
    let out = ok(&[
        "agent",
        "--config",
        example.to_str().unwrap(),
        "--check",
        "--key-file",
        "/nonexistent",
    ]);
    let rows: Vec<Vec<&str>> = out.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 2, "{out}");
    assert_eq!(rows[0][..3], ["a-to-b", "receiver", "-"]);
    assert_eq!(rows[1][..3], ["b-to-c", "sender", "10.0.0.3:7707"]);
    assert!(rows[1][3].contains("not port 7707"), "{out}");
}

/// A file with a mistake is one error naming the file and the path, and a non-zero exit:
/// nothing starts.
#[test]
fn a_bad_point_file_is_one_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("p.toml");
    let base = "name = \"a\"\nkey_file = \"k\"\n[capture]\nreplay = \"a.pcap\"\n[defaults]\ninterval = \"1s\"\n[[path]]\nname = \"x\"\nrole = \"sender\"\npeer = \"127.0.0.1:1\"\nfilter = \"udp\"\n";
    for (text, want) in [
        (
            format!(
                "{base}[[path]]\nname = \"y\"\nrole = \"sender\"\npeer = \"127.0.0.1:1\"\nfilter = \"udp and port 53\"\n"
            ),
            "paths x and y both send to 127.0.0.1:1 and their filters overlap",
        ),
        (
            base.replace("interval = \"1s\"", "interval = \"soon\""),
            "path x: invalid value 'soon' for '--interval <T>'",
        ),
        (
            base.replace("interval = \"1s\"", "intervall = \"1s\""),
            "path x: unexpected argument '--intervall'",
        ),
        (
            base.replace("[capture]", "[capture]\nspeed = \"fast\""),
            "[capture]: invalid value 'fast' for '--speed",
        ),
        (
            base.replace("name = \"x\"", "name = \"x y\""),
            "path x y: a path's name is",
        ),
        (base.replace("key_file = \"k\"\n", ""), "no key_file"),
    ] {
        std::fs::write(&f, text).unwrap();
        let e = common::fails(&["agent", "--config", f.to_str().unwrap(), "--check"], want);
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(e.contains("p.toml"), "{e}");
    }
}

/// One point's death costs only its own paths: C's agent is killed mid-run; A→B, whose points
/// both live, loses no interval and equals its own pair's result, while A and B each report
/// their path to C failed (exit status 1, naming it) after their patience.
#[test]
fn a_dead_point_costs_only_its_own_paths() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("k");
    ok(&["keygen", "-o", key.to_str().unwrap()]);
    // 2.4 s of traffic a path, replayed in real time
    let flags = |seed| ["--packets", "48k", "--rate", "20k", "--seed", seed];
    let ab = path_of(d, "ab", 1, &flags("21"));
    let ac = path_of(d, "ac", 2, &flags("22"));
    let bc = path_of(d, "bc", 3, &flags("23"));
    let (a, b, c) = (d.join("a.pcap"), d.join("b.pcap"), d.join("c.pcap"));
    common::merge(&ab.0, &ac.0, &a);
    common::merge(&ab.1, &bc.0, &b);
    common::merge(&ac.1, &bc.1, &c);
    let (top, paced) = ("connect_timeout = \"1s\"", "speed = \"1\"");
    // paced replays start when their agents do (up to a second apart here, where live captures
    // run side by side): room for that many intervals, so the queue drops none
    let roomy = |f: PathBuf| {
        let t = std::fs::read_to_string(&f).unwrap();
        std::fs::write(&f, t.replace("queue = 4", "queue = 200")).unwrap();
        f
    };
    let cc = config(
        d,
        "c",
        &c,
        true,
        &key,
        &[
            ("a-to-c", "receiver", None, 2),
            ("b-to-c", "receiver", None, 3),
        ],
        top,
        paced,
    );
    let cc = roomy(cc);
    let (pc, c_addr) = point(&cc, &d.join("c.log"), true);
    let mut pc = Guard(Some(pc));
    let c_addr = c_addr.unwrap();
    let bf = config(
        d,
        "b",
        &b,
        true,
        &key,
        &[
            ("a-to-b", "receiver", None, 1),
            ("b-to-c", "sender", Some(&c_addr), 3),
        ],
        top,
        paced,
    );
    let bf = roomy(bf);
    let (pb, b_addr) = point(&bf, &d.join("b.log"), true);
    let mut pb = Guard(Some(pb));
    let af = config(
        d,
        "a",
        &a,
        false,
        &key,
        &[
            ("a-to-b", "sender", Some(&b_addr.unwrap()), 1),
            ("a-to-c", "sender", Some(&c_addr), 2),
        ],
        top,
        paced,
    );
    let af = roomy(af);
    let (pa, _) = point(&af, &d.join("a.log"), false);
    let mut pa = Guard(Some(pa));
    std::thread::sleep(std::time::Duration::from_millis(900));
    pc.0.as_mut().unwrap().kill().unwrap();
    let (b_status, lines) = finish(&mut pb);
    let a_status = pa.0.as_mut().unwrap().wait().unwrap();
    let log = |n: &str| std::fs::read_to_string(d.join(format!("{n}.log"))).unwrap_or_default();
    // the logs are written by the drain threads: wait for them
    std::thread::sleep(std::time::Duration::from_millis(300));
    for (name, status, dead) in [("a", a_status, "a-to-c"), ("b", b_status, "b-to-c")] {
        let l = log(name);
        assert_eq!(status.code(), Some(1), "point {name}: {l}");
        assert!(
            l.contains(&format!("1 of 2 paths failed: {dead}: ")),
            "point {name}: {l}"
        );
        assert!(
            l.contains(&format!("path {dead}: stopped: "))
                && l.contains("the point's other paths go on"),
            "point {name}: {l}"
        );
    }
    assert!(lines.iter().all(|l| l["path"] == "a-to-b"), "{lines:?}");
    let summary = lines.iter().find(|l| l["type"] == "summary").unwrap();
    assert_eq!(summary["missing"], 0, "{summary}");
    assert_path_as_its_pair(
        &lines,
        "a-to-b",
        (&d.join("ab"), &ab.0, &ab.1),
        &["rda"],
        &["mean_ns"],
        100,
    );
}

/// Paths in a point's file are relative to the file's directory: a replay and a key beside it
/// are found from any working directory.
#[test]
fn a_point_file_finds_its_files_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ok(&["keygen", "-o", d.join("k").to_str().unwrap()]);
    let f = d.join("p.toml");
    std::fs::write(
        &f,
        "name = \"a\"\nkey_file = \"k\"\n[capture]\nreplay = \"nothing.pcap\"\n[defaults]\ninterval = \"1s\"\n[[path]]\nname = \"x\"\nrole = \"sender\"\npeer = \"127.0.0.1:9\"\n",
    )
    .unwrap();
    // the key is read from beside the file; the replay's path names the file's directory
    let e = common::fails(&["agent", "--config", f.to_str().unwrap()], "nothing.pcap");
    assert!(
        e.contains(&d.join("nothing.pcap").display().to_string()),
        "{e}"
    );
}

/// The handshake compares each path's configuration and names the path that differs; a sender
/// naming a path the point does not receive is refused with the paths it has.
#[test]
fn a_path_that_differs_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("k");
    ok(&["keygen", "-o", key.to_str().unwrap()]);
    let (s, r) = path(d, "x", 1, "31", "none");
    let rf = config(
        d,
        "r",
        &r,
        true,
        &key,
        &[("x", "receiver", None, 1), ("y", "receiver", None, 2)],
        "",
        "",
    );
    let (pr, addr) = point(&rf, &d.join("r.log"), true);
    let _pr = Guard(Some(pr));
    let addr = addr.unwrap();
    for (path_name, interval, want) in [
        (
            "x",
            "50ms",
            "path x: configuration mismatch between sender and receiver: interval",
        ),
        (
            "z",
            INTERVAL,
            "this point (r) receives no path 'z': its receiver paths are x, y",
        ),
    ] {
        let sf = config(
            d,
            "s",
            &s,
            false,
            &key,
            &[(path_name, "sender", Some(&addr), 1)],
            "connect_timeout = \"2s\"",
            "",
        );
        let t = std::fs::read_to_string(&sf).unwrap();
        std::fs::write(
            &sf,
            t.replace(
                &format!("interval = \"{INTERVAL}\""),
                &format!("interval = \"{interval}\""),
            ),
        )
        .unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_owl"))
            .args(["agent", "--config", sf.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains(want), "{err}");
    }
}

/// Two paths between the same two points, told apart by their filters: each has its own
/// connection, routed by the path it names, and each equals its own pair.
#[test]
fn two_paths_between_the_same_points_are_measured_apart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("k");
    ok(&["keygen", "-o", key.to_str().unwrap()]);
    let x = path(d, "x", 1, "41", "uniform:0.01");
    let y = path(d, "y", 2, "42", "none");
    let (a, b) = (d.join("a.pcap"), d.join("b.pcap"));
    common::merge(&x.0, &y.0, &a);
    common::merge(&x.1, &y.1, &b);
    let bf = config(
        d,
        "b",
        &b,
        true,
        &key,
        &[("x", "receiver", None, 1), ("y", "receiver", None, 2)],
        "",
        "",
    );
    let (pb, addr) = point(&bf, &d.join("b.log"), true);
    let mut pb = Guard(Some(pb));
    let addr = addr.unwrap();
    let af = config(
        d,
        "a",
        &a,
        false,
        &key,
        &[
            ("x", "sender", Some(&addr), 1),
            ("y", "sender", Some(&addr), 2),
        ],
        "",
        "",
    );
    let (pa, _) = point(&af, &d.join("a.log"), false);
    let mut pa = Guard(Some(pa));
    let log = |n: &str| std::fs::read_to_string(d.join(format!("{n}.log"))).unwrap_or_default();
    let (b_status, lines) = finish(&mut pb);
    assert!(b_status.success(), "{}", log("b"));
    assert!(
        pa.0.take().unwrap().wait().unwrap().success(),
        "{}",
        log("a")
    );
    for (name, (s, r)) in [("x", &x), ("y", &y)] {
        assert!(
            lines
                .iter()
                .filter(|l| l["path"] == name && l["type"] == "interval")
                .all(|l| l["status"] != "estimated" || l["points"] == serde_json::json!(["a", "b"])),
            "{name}"
        );
        assert_path_as_its_pair(
            &lines,
            name,
            (&d.join(name), s, r),
            &["rda"],
            &["mean_ns", "samples", "lost"],
            8,
        );
    }
}

/// SIGHUP reloads nothing and loses nothing: a point hung up on mid-run (twice: its file as
/// it was, then broken) logs that it goes on, with what the file says now, and measures its
/// path as its own pair would; so does a sender hung up on.
#[test]
fn a_hangup_reloads_nothing_and_loses_no_interval() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = d.join("k");
    ok(&["keygen", "-o", key.to_str().unwrap()]);
    let x = path(d, "x", 1, "51", "uniform:0.01");
    // 0.2 s of traffic replayed over 2 s: the hangups come well inside it, after each point
    // has had time to start (a loaded machine included)
    let slow = "speed = \"0.1\"";
    let bf = config(
        d,
        "b",
        &x.1,
        true,
        &key,
        &[("x", "receiver", None, 1)],
        "",
        slow,
    );
    let (pb, addr) = point(&bf, &d.join("b.log"), true);
    let mut pb = Guard(Some(pb));
    let addr = addr.unwrap();
    let af = config(
        d,
        "a",
        &x.0,
        false,
        &key,
        &[("x", "sender", Some(&addr), 1)],
        "",
        slow,
    );
    let (pa, _) = point(&af, &d.join("a.log"), false);
    let mut pa = Guard(Some(pa));
    let hup = |c: &Guard| {
        let pid = c.0.as_ref().unwrap().id().to_string();
        assert!(
            Command::new("kill")
                .args(["-HUP", &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    std::thread::sleep(std::time::Duration::from_millis(700));
    hup(&pb);
    hup(&pa);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let good = std::fs::read_to_string(&bf).unwrap();
    std::fs::write(
        &bf,
        good.replace("role = \"receiver\"", "role = \"listener\""),
    )
    .unwrap();
    hup(&pb);
    let said = "SIGHUP: an agent reloads nothing; this one goes on with the paths it started with";
    // a point's log is written by its reader once the point's stderr ends, after it exited:
    // wait (a little) until it holds the hangups
    let log = |n: &str, hangups: usize| {
        let path = d.join(format!("{n}.log"));
        let t0 = std::time::Instant::now();
        loop {
            let l = std::fs::read_to_string(&path).unwrap_or_default();
            if l.matches(said).count() >= hangups || t0.elapsed().as_secs() >= 10 {
                return l;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let (b_status, lines) = finish(&mut pb);
    let a_status = pa.0.take().unwrap().wait().unwrap();
    let (a_log, b_log) = (log("a", 1), log("b", 2));
    assert!(b_status.success(), "{b_log}");
    assert!(a_status.success(), "{a_log}");
    assert_eq!(b_log.matches(said).count(), 2, "{b_log}");
    assert!(b_log.contains("as it is now it checks (1 path)"), "{b_log}");
    assert!(
        b_log.contains("as it is now it does not check, fix it first")
            && b_log.contains("listener"),
        "{b_log}"
    );
    assert_eq!(a_log.matches(said).count(), 1, "{a_log}");
    assert_path_as_its_pair(
        &lines,
        "x",
        (&d.join("x"), &x.0, &x.1),
        &["rda", "lda"],
        &["mean_ns", "samples", "lost"],
        8,
    );
    assert!(
        lines
            .iter()
            .filter(|l| l["type"] == "interval")
            .all(|l| l["status"] != "missing"),
        "{lines:?}"
    );
}
