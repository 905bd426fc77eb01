//! What an installed `owl` brings beside its binary: shell completions and man pages,
//! generated from the command line's own definition.

use std::process::Command;

mod common;
use common::{fails, have_tool, ok};

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

/// The shipped systemd units (`deploy/systemd/`) pass `systemd-analyze verify` (every key
/// known, the command executable: the built binary stands in for /usr/local/bin/owl) with no
/// warning, and `systemd-analyze security` rates each exposure 2.5 or less. Skipped where
/// systemd-analyze is missing, unless OWL_REQUIRE_SYSTEMD_ANALYZE=1 (`.ci/run` sets it when the
/// machine has it).
#[test]
fn systemd_units_verify() {
    if !have_tool(
        "systemd-analyze",
        "OWL_REQUIRE_SYSTEMD_ANALYZE",
        "systemd_units_verify",
    ) {
        return;
    }
    let units = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/systemd");
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (name, as_name) in [
        ("owl-agent@.service", "owl-agent@test.service"),
        ("owl-collector.service", "owl-collector.service"),
    ] {
        let text = std::fs::read_to_string(units.join(name)).unwrap();
        assert!(text.contains("ExecStart=/usr/local/bin/owl "), "{name}");
        let path = dir.path().join(as_name);
        std::fs::write(
            &path,
            text.replace("/usr/local/bin/owl", env!("CARGO_BIN_EXE_owl")),
        )
        .unwrap();
        files.push(path);
    }
    let o = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&files)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && said.trim().is_empty(), "{said}");
    for f in &files {
        let o = Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--threshold=25"])
            .arg(f)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&o.stdout)
        );
    }
    // only the agent gets a capability, and only CAP_NET_RAW
    let agent = std::fs::read_to_string(&files[0]).unwrap();
    let collector = std::fs::read_to_string(&files[1]).unwrap();
    assert!(agent.contains("AmbientCapabilities=CAP_NET_RAW\n"));
    assert!(collector.contains("AmbientCapabilities=\n"));
}

/// The shipped Prometheus rules (`deploy/prometheus/owl-rules.yml`) pass `promtool check rules`
/// and their unit tests (`owl-rules.test.yml`: each alert fires on the pair it should, after its
/// `for`, and not on the other; each recording rule's value). Skipped where promtool is missing,
/// unless OWL_REQUIRE_PROMETHEUS=1 (`.ci/run` sets it when it could install Debian's
/// prometheus package).
#[test]
fn prometheus_rules_check_and_pass_their_tests() {
    if !have_tool(
        "promtool",
        "OWL_REQUIRE_PROMETHEUS",
        "prometheus_rules_check_and_pass_their_tests",
    ) {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus");
    for (args, file, want) in [
        (
            ["check", "rules"],
            "owl-rules.yml",
            "SUCCESS: 8 rules found",
        ),
        (["test", "rules"], "owl-rules.test.yml", "SUCCESS"),
    ] {
        let o = Command::new("promtool")
            .args(args)
            .arg(file)
            .current_dir(&dir)
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            o.status.success() && said.contains(want),
            "promtool {args:?} {file}: {said}"
        );
    }
}
