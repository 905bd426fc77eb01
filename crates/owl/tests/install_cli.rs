//! What an installed `owl` brings beside its binary: shell completions and man pages,
//! generated from the command line's own definition.

use std::process::Command;

mod common;
use common::{fails, ok};

/// `owl completions SHELL` prints a script that names every command; bash's is valid bash
/// (checked by `bash -n` where bash is installed).
#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let s = ok(&["completions", shell]);
        for cmd in [
            "compare",
            "record",
            "estimate",
            "agent",
            "collector",
            "colate",
        ] {
            assert!(s.contains(cmd), "{shell}: {cmd} missing");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("owl.bash");
    std::fs::write(&script, ok(&["completions", "bash"])).unwrap();
    if let Ok(o) = Command::new("bash").arg("-n").arg(&script).output() {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    fails(&["completions", "tcsh"], "'tcsh'");
}

/// `owl manpages DIR` writes owl.1 and a page per command (and per `colate` subcommand), each
/// a roff page with its options; `man -l` renders one where man is installed.
#[test]
fn man_pages_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("man1");
    ok(&["manpages", d.to_str().unwrap()]);
    for page in [
        "owl",
        "owl-compare",
        "owl-agent",
        "owl-colate-plan",
        "owl-keygen",
    ] {
        let p = d.join(format!("{page}.1"));
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page}: not roff"
        );
        assert!(text.contains(page), "{page}: its name");
    }
    let compare = std::fs::read_to_string(d.join("owl-compare.1")).unwrap();
    assert!(compare.contains("interval") && compare.contains("methods"));
    if let Ok(o) = Command::new("man")
        .arg("-l")
        .arg(d.join("owl-compare.1"))
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .output()
        && o.status.success()
    {
        let shown = String::from_utf8_lossy(&o.stdout);
        assert!(shown.contains("owl-compare"), "{shown:.300}");
    }
}
