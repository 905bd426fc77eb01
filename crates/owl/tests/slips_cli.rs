//! Small slips a new user met (the operators' issue, item 8 and the version), each pinned:
//! standard output for `--delays -`, the valid values of a mistyped flag, a torn synopsis
//! file, a collector that cannot listen, an interface that does not exist, `--help` examples,
//! and `--version` naming the commit.

use std::net::TcpListener;

mod common;
use common::{fails, ok, owl, record, simulate};

/// `--delays -` writes the CSV on standard output and the report on standard error;
/// `--delays -` and `--per-packet -` together are refused.
#[test]
fn delays_to_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r, _) = simulate(dir.path(), &[]);
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let o = owl(&["compare", s, r, "--methods", "exact", "--delays", "-"]);
    assert!(o.status.success());
    let csv = String::from_utf8(o.stdout).unwrap();
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().contains("delay"), "{csv:.200}");
    assert!(lines.count() > 19_000, "one line a matched packet");
    assert!(!csv.contains("exact"), "the report is not in the CSV");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("exact"),
        "the report goes to standard error: {err:.300}"
    );
    assert!(!dir.path().join("-").exists());
    fails(
        &[
            "compare",
            s,
            r,
            "--methods",
            "opa",
            "--delays",
            "-",
            "--per-packet",
            "-",
        ],
        "only one of them can go to standard output",
    );
}

/// A mistyped value names the valid ones.
#[test]
fn an_invalid_value_lists_the_valid_ones() {
    let e = fails(&["record", "--role", "snd", "x.pcap", "-o", "y"], "'snd'");
    assert!(e.contains("valid: sender, receiver"), "{e}");
}

/// A synopsis file torn before its first complete interval is an error, not a table of `-`.
#[test]
fn a_torn_synopsis_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r, _) = simulate(dir.path(), &[]);
    let d = dir.path();
    let so = record(d, "lda", &s, "sender", "s.owl", &[]).0;
    let ro = record(d, "lda", &r, "receiver", "r.owl", &[]).0;
    let whole = std::fs::read(&so).unwrap();
    // the whole run is one interval: cut inside its block
    let torn = d.join("torn.owl");
    std::fs::write(&torn, &whole[..whole.len() - 40]).unwrap();
    let o = owl(&[
        "estimate",
        torn.to_str().unwrap(),
        ro.to_str().unwrap(),
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no complete interval"), "{err}");
    assert!(err.contains("torn.owl"), "{err}");
}

/// A collector whose `--metrics` port is taken fails before it creates its database.
#[test]
fn a_collector_that_cannot_listen_creates_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k");
    ok(&["keygen", "-o", key.to_str().unwrap()]);
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let db = dir.path().join("owl.db");
    fails(
        &[
            "collector",
            "--listen",
            "127.0.0.1:0",
            "--db",
            db.to_str().unwrap(),
            "--key-file",
            key.to_str().unwrap(),
            "--metrics",
            &addr,
        ],
        "--metrics",
    );
    assert!(!db.exists(), "the database was created");
}

/// An interface that does not exist is refused before a sender connects anywhere (its peer
/// here is a port nobody listens on: the error is the interface's, at once).
#[test]
#[cfg(target_os = "linux")]
fn a_missing_interface_is_refused_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("k");
    ok(&["keygen", "-o", key.to_str().unwrap()]);
    let free = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    fails(
        &[
            "agent",
            "--role",
            "sender",
            "--peer",
            &addr,
            "--iface",
            "owlnosuch0",
            "--interval",
            "1s",
            "--key-file",
            key.to_str().unwrap(),
        ],
        "--iface owlnosuch0: no such interface",
    );
}

/// `owl colate`, `colate plan` and `colate stats` teach by example.
#[test]
fn colate_help_has_examples() {
    for args in [
        &["colate", "--help"][..],
        &["colate", "plan", "--help"],
        &["colate", "stats", "--help"],
    ] {
        let h = ok(args);
        assert!(h.contains("Examples:"), "{args:?}: {h}");
        assert!(h.contains("owl colate "), "{args:?}");
    }
}

/// `owl --version` names the version and the commit it was built from.
#[test]
fn version_names_the_commit() {
    let v = ok(&["--version"]);
    assert!(v.starts_with("owl "), "{v}");
    assert!(v.contains("(commit "), "{v}");
}
