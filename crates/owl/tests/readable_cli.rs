//! Output a person can read (the operators' issue, item 7), each pinned by running the
//! binary: what the text says, and that `--json` keeps its numbers.

mod common;
use common::{ok, owl, simulate};

/// countmin and colate give no aggregate mean once a packet is lost (their sketches cannot
/// leave lost packets out): `owl compare`'s table says so once below it, with each one's
/// reason, instead of a row of `-` each; `--json` still lists them. Without loss their rows
/// are in the table.
#[test]
fn per_flow_methods_without_an_aggregate_are_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r, _) = simulate(&dir.path().join("lossy"), &["--loss", "uniform:0.02"]);
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let methods = ["--methods", "exact,lda,countmin,colate"];
    let text = ok(&[&["compare", s, r][..], &methods[..]].concat());
    // a row starts at the line's start; the reasons below the table are indented
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.split_whitespace().next() == Some(name))
            .map(str::to_string)
    };
    assert!(row("lda").is_some_and(|l| !l.contains(" - ")), "{text}");
    assert_eq!(row("countmin"), None, "{text}");
    assert_eq!(row("colate"), None, "{text}");
    assert!(
        text.contains("countmin, colate: per-flow methods, no aggregate estimate"),
        "{text}"
    );
    let why = text
        .lines()
        .find(|l| l.trim_start().starts_with("countmin "))
        .unwrap_or_else(|| panic!("countmin's reason: {text}"));
    assert!(why.contains("packets at the sender"), "{why}");
    // the JSON keeps every method, with null where there is no value
    let json: serde_json::Value =
        serde_json::from_str(&ok(
            &[&["compare", s, r, "--json"][..], &methods[..]].concat()
        ))
        .unwrap();
    let names: Vec<&str> = json["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["exact", "lda", "countmin", "colate"]);
    assert!(json["methods"][2]["mean_ns"].is_null());
    assert!(json["methods"][2]["bytes"].as_u64().unwrap() > 0);

    // without loss countmin and colate answer, and keep their rows
    let (s, r, _) = simulate(&dir.path().join("clean"), &["--loss", "none"]);
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let text = ok(&[&["compare", s, r][..], &methods[..]].concat());
    for m in ["countmin", "colate"] {
        let line = text
            .lines()
            .find(|l| l.starts_with(m) && l.split_whitespace().next() == Some(m))
            .unwrap_or_else(|| panic!("{m}'s row: {text}"));
        assert!(line.contains("us "), "{line}");
    }
    assert!(!text.contains("no aggregate estimate"), "{text}");
}

/// A warning that a method withheld its figures names the intervals by their start in UTC,
/// not by their index.
#[test]
fn withheld_intervals_are_named_by_their_start() {
    let dir = tempfile::tempdir().unwrap();
    let (s, r, _) = simulate(dir.path(), &["--loss", "uniform:0.02"]);
    let (s, r) = (s.to_str().unwrap(), r.to_str().unwrap());
    let o = owl(&[
        "compare",
        s,
        r,
        "--methods",
        "exact,countmin",
        "--interval",
        "50ms",
    ]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let w = err
        .lines()
        .find(|l| l.contains("countmin: figures withheld in 4 of 4 intervals"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        w.contains(
            "(starting 2026-01-01 00:00:00.000000, 2026-01-01 00:00:00.050000, \
             2026-01-01 00:00:00.100000, 2026-01-01 00:00:00.150000 UTC)"
        ),
        "{w}"
    );
    assert!(!w.contains("35344512000"), "{w}");
    // the interval table's column of '-' is said once below it
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("countmin: no mean in any interval shown ('-'): the warnings"),
        "{text}"
    );
    // one interval, the whole run: no start to name (it used to say 1970)
    let o = owl(&["compare", s, r, "--methods", "exact,countmin"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("countmin: figures withheld: no estimate: "),
        "{err}"
    );
    assert!(!err.contains("1970"), "{err}");
}
