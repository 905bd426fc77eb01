//! A real Prometheus scrapes `owl collector --metrics` while a replayed agent pair reports to
//! the collector, and answers every PromQL expression that owl ships — the README's, the
//! dashboard's (`deploy/grafana/owl.json`) and the rules' (`deploy/prometheus/owl-rules.yml`)
//! — with what `owl report` reads from the same database.
//!
//! Needs Debian's `prometheus` package (`/usr/bin/prometheus`): skipped without it, with a
//! SKIPPED line, unless OWL_REQUIRE_PROMETHEUS=1 (`.ci/run` sets it when it could install it).

mod common;
use common::{Guard, drain, first_line, have_tool, ok, replay_agent};

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The pair's label at the collector.
const PAIR: &str = "s→r";
/// The receiver's interval.
const INTERVAL: &str = "200ms";
/// How long a step that waits for another process may take before the test fails with the
/// processes' logs (a few seconds on a quiet machine; generous for a loaded one).
const DEADLINE: Duration = Duration::from_secs(120);

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `s` percent-encoded for a URL's query (everything but RFC 3986's unreserved characters).
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// GET `path` at `addr` over HTTP/1.0 (the answer ends where the connection closes: no chunks):
/// the status code and the body.
fn get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let out = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((code, body.to_string()))
}

/// A Prometheus started by the test: its address and its log file.
struct Prometheus {
    addr: String,
    log: PathBuf,
    _child: Guard,
}

impl Prometheus {
    /// Start `prometheus` on a free loopback port, its storage and configuration in `dir`,
    /// scraping `target` every second and evaluating `rules` every second; once it is ready.
    fn start(dir: &Path, target: &str, rules: &Path) -> Prometheus {
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - '{}'\n\
                 scrape_configs:\n  - job_name: owl\n    static_configs:\n      - targets: ['{target}']\n",
                rules.display()
            ),
        )
        .unwrap();
        // a free port: bound by the test, released, taken by prometheus
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let log = dir.join("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start prometheus");
        let p = Prometheus {
            addr,
            log,
            _child: Guard(Some(child)),
        };
        p.wait_for("ready", || {
            matches!(get(&p.addr, "/-/ready"), Ok((200, _))).then_some(())
        });
        p
    }

    /// Poll `f` every 100 ms until it gives something; fail with prometheus's log past
    /// [`DEADLINE`].
    fn wait_for<T>(&self, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let t0 = Instant::now();
        loop {
            if let Some(x) = f() {
                return x;
            }
            assert!(
                t0.elapsed() < DEADLINE,
                "prometheus: no {what} after {DEADLINE:?}; its log:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// An API call's `data`, which must succeed.
    fn api(&self, path: &str) -> Value {
        let (code, body) = get(&self.addr, path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let v: Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        assert!(
            code == 200 && v["status"] == "success",
            "{path}: {code} {body}"
        );
        v["data"].clone()
    }

    /// `expr` evaluated now (`/api/v1/query`): the instant vector's samples as (labels, value).
    fn query(&self, expr: &str) -> Vec<(Value, f64)> {
        let data = self.api(&format!("/api/v1/query?query={}", urlencode(expr)));
        assert_eq!(data["resultType"], "vector", "{expr}: {data}");
        data["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let v = s["value"][1].as_str().unwrap();
                (s["metric"].clone(), v.parse().unwrap_or(f64::NAN))
            })
            .collect()
    }

    /// `expr` evaluated every second from `start` (Unix seconds) to now, as a dashboard's
    /// panel evaluates it over its time range (`/api/v1/query_range`): each series' values.
    fn query_range(&self, expr: &str, start: f64) -> Vec<(Value, Vec<f64>)> {
        let end = unix_now();
        let data = self.api(&format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step=1",
            urlencode(expr)
        ));
        assert_eq!(data["resultType"], "matrix", "{expr}: {data}");
        data["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let values = s["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v[1].as_str().unwrap().parse().unwrap_or(f64::NAN))
                    .collect();
                (s["metric"].clone(), values)
            })
            .collect()
    }

    /// `expr`'s one sample, which must exist and be a number.
    fn one(&self, expr: &str) -> f64 {
        let r = self.query(expr);
        assert_eq!(r.len(), 1, "{expr}: {r:?}");
        assert!(r[0].1.is_finite(), "{expr}: {r:?}");
        r[0].1
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The PromQL expressions in the README's ```promql blocks (one a line; `#` starts a comment).
fn readme_expressions() -> Vec<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut out = Vec::new();
    let mut inside = false;
    for line in readme.lines() {
        let t = line.trim();
        if inside && t.starts_with("```") {
            inside = false;
        } else if inside {
            if !t.is_empty() && !t.starts_with('#') {
                out.push(t.to_string());
            }
        } else if t == "```promql" {
            inside = true;
        }
    }
    out
}

/// The dashboard's queries: every panel's targets' `expr` (with the `pair` variable at "All",
/// `.+`) and its template variable's query.
fn dashboard_expressions() -> (Vec<(String, String)>, Vec<String>) {
    let path = repo().join("deploy/grafana/owl.json");
    let d: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // an importable dashboard: a Prometheus datasource input every panel and target uses
    assert_eq!(d["__inputs"][0]["name"], "DS_PROMETHEUS", "{d}");
    assert_eq!(d["__inputs"][0]["pluginId"], "prometheus");
    assert!(d["title"].is_string() && d["uid"].is_string() && d["schemaVersion"].is_u64());
    let ds = serde_json::json!({"type": "prometheus", "uid": "${DS_PROMETHEUS}"});
    let mut exprs = Vec::new();
    let mut ids = std::collections::HashSet::new();
    let panels = d["panels"].as_array().unwrap();
    assert!(panels.len() >= 6, "{} panels", panels.len());
    for p in panels {
        let title = p["title"].as_str().unwrap().to_string();
        assert!(ids.insert(p["id"].as_u64().unwrap()), "{title}: id again");
        assert!(
            p["type"].is_string() && p["gridPos"]["w"].is_u64(),
            "{title}"
        );
        assert_eq!(p["datasource"], ds, "{title}");
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            assert_eq!(t["datasource"], ds, "{title}");
            assert!(t["refId"].is_string(), "{title}");
            let e = t["expr"].as_str().unwrap();
            exprs.push((title.clone(), e.replace("$pair", ".+")));
        }
    }
    let vars = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            assert_eq!(v["datasource"], ds);
            v["query"]["query"].as_str().unwrap().to_string()
        })
        .collect();
    (exprs, vars)
}

/// The bucket of the histogram's bounds (`bounds`, seconds, increasing) that holds `x`:
/// (lower, upper].
fn bucket(bounds: &[f64], x: f64) -> (f64, f64) {
    let i = bounds.partition_point(|&b| b < x);
    (
        if i == 0 { 0.0 } else { bounds[i - 1] },
        bounds.get(i).copied().unwrap_or(f64::INFINITY),
    )
}

/// The `q` quantile of cumulative-bucket counts as Prometheus's `histogram_quantile` gives it:
/// linear within the bucket that holds the rank.
fn quantile(q: f64, bounds: &[f64], counts: &[f64]) -> f64 {
    let total: f64 = counts.iter().sum();
    let rank = q * total;
    let mut below = 0.0;
    for (i, &c) in counts.iter().enumerate() {
        if below + c >= rank && c > 0.0 {
            let lo = if i == 0 { 0.0 } else { bounds[i - 1] };
            return lo + (bounds[i] - lo) * (rank - below) / c;
        }
        below += c;
    }
    f64::NAN
}

/// A collector with `--metrics` stores a replayed agent pair's intervals (methods rda, lda,
/// lds and sample; 240 000 packets at 40 000 a second, 2 % loss, delays of 0.3–15 ms through a
/// FIFO queue, p99 8.3 ms; the sender stopped for 2.5 s mid-run, so that the receiver's paced
/// capture drops intervals it reports missing) while a real Prometheus scrapes it every second
/// with the shipped rules loaded. Then every expression the
/// README, the dashboard and the rules use is evaluated through Prometheus's HTTP API and
/// answers (the alerts: those that should fire and only those), and the answers agree with
/// `owl report` on the collector's database: the loss gauge and the clock offset and its bound
/// exactly, the 5-minute loss within the intervals' range, the missing intervals in number,
/// the delay histogram's mean within 2 %, and its p99 within the bucket that holds the p99 of
/// the database's own histograms.
#[test]
fn prometheus_evaluates_every_shipped_query() {
    if !have_tool(
        "prometheus",
        "OWL_REQUIRE_PROMETHEUS",
        "prometheus_evaluates_every_shipped_query",
    ) {
        return;
    }
    let t0 = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("p");
    ok(&[
        "simulate",
        "--out",
        d.to_str().unwrap(),
        "--packets",
        "240k",
        "--rate",
        "40k",
        "--delay",
        "weibull-mean:500us:0.7",
        "--loss",
        "uniform:0.02",
    ]);
    let (s, r) = (d.join("sender.pcap"), d.join("receiver.pcap"));
    let key = dir.path().join("k");
    ok(&["keygen", "-o", key.to_str().unwrap()]);
    let db = dir.path().join("owl.db");
    let collector = Command::new(env!("CARGO_BIN_EXE_owl"))
        .args(["collector", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .args(["--key-file", key.to_str().unwrap()])
        .args(["--metrics", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut collector, said) = first_line(collector, "owl: collector: listening on ");
    let _collector_log = drain(collector.stderr.take().unwrap());
    let _collector = Guard(Some(collector));
    let caddr = said.split(',').next().unwrap().to_string();
    let maddr = said
        .split("metrics on http://")
        .nth(1)
        .and_then(|m| m.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("said: {said}"))
        .to_string();
    let rules = repo().join("deploy/prometheus/owl-rules.yml");
    let prom = Prometheus::start(dir.path(), &maddr, &rules);
    // scraped once before any report
    prom.wait_for("scrape of the collector", || {
        (prom.query("up{job=\"owl\"} == 1").len() == 1).then_some(())
    });

    // the agent pair: R replays at the capture's pace (a paced capture drops an interval when
    // its queue is full), S as fast as the exchange lets it
    let common = ["--methods", "rda,lda,lds,sample", "--interval", INTERVAL];
    let agent = |role: &[&str], capture: &Path| replay_agent(role, capture, &key, &common);
    let run_start = unix_now();
    let rx = agent(&["--role", "receiver", "--listen", "127.0.0.1:0"], &r)
        .args(["--speed", "1", "--queue", "4"])
        .args(["--collector", &caddr, "--pair", PAIR])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut rx, raddr) = first_line(rx, "owl: agent: listening on ");
    let rx_log = drain(rx.stderr.take().unwrap());
    let mut rx = Guard(Some(rx));
    let mut tx = agent(&["--role", "sender", "--peer", &raddr], &s)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let tx_log = drain(tx.stderr.take().unwrap());
    let tx_pid = tx.id() as libc::pid_t;
    let mut tx = Guard(Some(tx));
    // 2 s into the 6 s of traffic, the sender stops for 2.5 s: R's RDA exchanges wait, its
    // queue of 4 intervals fills and its capture drops the next ones
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on the sender this test started, which has not been waited for
    assert_eq!(unsafe { libc::kill(tx_pid, libc::SIGSTOP) }, 0);
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: as above
    assert_eq!(unsafe { libc::kill(tx_pid, libc::SIGCONT) }, 0);
    let waited = Instant::now();
    let statuses = loop {
        let a = tx.0.as_mut().unwrap().try_wait().unwrap();
        let b = rx.0.as_mut().unwrap().try_wait().unwrap();
        if let (Some(a), Some(b)) = (a, b) {
            break Some((a, b));
        }
        if waited.elapsed() > DEADLINE {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop((tx, rx)); // kills whichever still runs, so the pipes close
    let logs = format!(
        "sender: {}\nreceiver: {}",
        tx_log.join().unwrap(),
        rx_log.join().unwrap()
    );
    let (tx_status, rx_status) =
        statuses.unwrap_or_else(|| panic!("the agents ran past {DEADLINE:?}: {logs}"));
    assert!(tx_status.success() && rx_status.success(), "{logs}");
    assert!(logs.contains("lines delivered to the collector"), "{logs}");

    // Prometheus has scraped the collector's final state, and evaluated the rules on it
    let scraped = get(&maddr, "/metrics").unwrap().1;
    let stored: f64 = scraped
        .lines()
        .filter(|l| l.starts_with(&format!("owl_intervals_total{{pair=\"{PAIR}\"")))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum();
    let total = format!("sum(owl_intervals_total{{pair=\"{PAIR}\"}})");
    prom.wait_for("scrape of the final state", || {
        let r = prom.query(&total);
        (r.len() == 1 && r[0].1 == stored).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2)); // two more rule evaluations

    let report: Value = serde_json::from_str(&ok(&[
        "report",
        "--db",
        db.to_str().unwrap(),
        "--pair",
        PAIR,
        "--json",
    ]))
    .unwrap();
    let rows = report["intervals"].as_array().unwrap();
    // one row per interval (and method): the intervals by start, in order
    let mut intervals: Vec<&Value> = Vec::new();
    for row in rows {
        if intervals.last().map(|l| &l["start_ns"]) != Some(&row["start_ns"]) {
            intervals.push(row);
        }
    }

    // every expression the README, the dashboard and the rules use answers
    let readme = readme_expressions();
    let p99 = "histogram_quantile(0.99, sum by (le) (rate(owl_one_way_delay_seconds_bucket[5m])))";
    assert!(readme.iter().any(|e| e == p99), "{readme:?}");
    for e in ["owl_loss_ratio", "owl_intervals_total", "owl_clock_offset"] {
        assert!(
            readme.iter().any(|x| x.contains(e)),
            "{e} not in {readme:?}"
        );
    }
    for e in &readme {
        let r = prom.query(e);
        assert!(
            !r.is_empty() && r.iter().all(|s| s.1.is_finite()),
            "README: {e}: {r:?}"
        );
    }
    let (panels, variables) = dashboard_expressions();
    // a panel shows its query over the dashboard's time range: here, the run
    for (title, e) in &panels {
        let r = prom.query_range(e, run_start);
        assert!(
            r.iter().any(|s| s.1.iter().any(|v| v.is_finite())),
            "dashboard panel {title}: {e}: {r:?}"
        );
    }
    for v in &variables {
        let metric = v
            .strip_prefix("label_values(")
            .and_then(|v| v.strip_suffix(", pair)"))
            .unwrap_or_else(|| panic!("dashboard variable: {v}"));
        let values = prom.api(&format!(
            "/api/v1/label/pair/values?match[]={}",
            urlencode(metric)
        ));
        assert_eq!(values, serde_json::json!([PAIR]), "{v}");
    }
    // the rules as Prometheus loaded them: each healthy; a recording rule's expression and the
    // series it records answer; an alert's expression answers for this pair exactly when it
    // should (2 % loss, intervals missing; p99 about 4 ms and the clock bound, on one host,
    // far below the delay), and the alert is pending or firing accordingly
    let groups = prom.api("/api/v1/rules");
    let mut alerts = Vec::new();
    let mut recorded = 0;
    for g in groups["groups"].as_array().unwrap() {
        for rule in g["rules"].as_array().unwrap() {
            let (name, e) = (
                rule["name"].as_str().unwrap(),
                rule["query"].as_str().unwrap(),
            );
            assert_eq!(rule["health"], "ok", "{name}: {rule}");
            let r = prom.query(e);
            assert!(r.iter().all(|s| s.1.is_finite()), "{name}: {e}: {r:?}");
            if rule["type"] == "recording" {
                assert!(!r.is_empty(), "{name}: {e}");
                assert!(!prom.query(name).is_empty(), "{name} not recorded");
                recorded += 1;
            } else {
                let fires = match name {
                    "OwlLossHigh" | "OwlIntervalsMissing" => true,
                    // no clock steps in a run of seconds
                    "OwlDelayP99High" | "OwlClockUncertaintyAboveDelay" | "OwlClockStepped" => {
                        false
                    }
                    _ => panic!("an alert this test does not know: {name}"),
                };
                assert_eq!(!r.is_empty(), fires, "{name}: {e}: {r:?}");
                let state = rule["state"].as_str().unwrap();
                let want: &[&str] = match (fires, rule["duration"].as_f64()) {
                    (false, _) => &["inactive"],
                    (true, Some(d)) if d > 0.0 => &["pending"],
                    (true, _) => &["firing"],
                };
                assert!(want.contains(&state), "{name}: {state}: {rule}");
                alerts.push(name.to_string());
            }
        }
    }
    assert_eq!((recorded, alerts.len()), (3, 5), "{groups}");

    // and they agree with owl report on the same database
    let sel = format!("{{pair=\"{PAIR}\"}}");
    // loss: the gauge is the latest interval's 1 - received/sent
    let ratio = |row: &Value| {
        let (s, r) = (row["sent"].as_f64()?, row["received"].as_f64()?);
        (s > 0.0).then(|| (s - r) / s)
    };
    let last = intervals.last().unwrap();
    let want = ratio(last).unwrap_or_else(|| panic!("last interval: {last}"));
    let loss = prom.one(&format!("owl_loss_ratio{sel}"));
    assert!((loss - want).abs() < 1e-12, "loss {loss} vs report {want}");
    // its 5-minute average lies within the intervals' losses
    let losses: Vec<f64> = intervals.iter().filter_map(|r| ratio(r)).collect();
    let (lmin, lmax) = losses
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    let avg = prom.one(&format!("pair:owl_loss_ratio:avg_5m{sel}"));
    assert!(
        lmin <= avg && avg <= lmax,
        "5-minute loss {avg}, intervals {lmin}..{lmax}"
    );
    // missing intervals: as many as the report lists, each one a drop the receiver reported;
    // increase() over 10 minutes sees each (the counter exists from the pair's first line)
    let missing: Vec<&&Value> = intervals
        .iter()
        .filter(|r| r["status"] == "missing")
        .collect();
    assert!(!missing.is_empty(), "nothing missing: {logs}");
    for m in &missing {
        assert!(
            m["reason"]
                .as_str()
                .unwrap()
                .contains("dropped at the receiver"),
            "{m}"
        );
    }
    let counted = prom.one(&format!(
        "owl_intervals_total{{pair=\"{PAIR}\",status=\"missing\"}}"
    ));
    assert_eq!(counted, missing.len() as f64, "{missing:?}");
    // (increase() extrapolates from the counter's first sample, at 0 when the pair's first line
    // came, to the window's end: at most 1.1 scrape intervals, 1 s, past samples that span the
    // run's 6 s, so at most 20 % more; without the counter at 0 from the first line, the missing
    // intervals all arriving between two scrapes would read as an increase of 0)
    let increase = prom.one(&format!("pair:owl_intervals_missing:increase_10m{sel}"));
    assert!(
        counted <= increase && increase <= 1.5 * counted,
        "increase {increase} of {counted}"
    );
    // the clock offset and its bound: the latest interval's that has them
    let clocked = intervals
        .iter()
        .rfind(|r| r["clock_offset_ns"].is_i64())
        .expect("no interval with a clock offset");
    for (gauge, field) in [
        ("owl_clock_offset_seconds", "clock_offset_ns"),
        (
            "owl_clock_offset_uncertainty_seconds",
            "clock_uncertainty_ns",
        ),
    ] {
        let got = prom.one(&format!("{gauge}{sel}")) * 1e9;
        let want = clocked[field].as_i64().unwrap() as f64;
        assert!(
            (got - want).abs() < 1e-3,
            "{gauge}: {got} ns vs report {want} ns"
        );
    }
    // the delay histogram's mean: the report's sample means weighted by their samples
    let (mut sum, mut n) = (0.0, 0.0);
    for r in rows.iter().filter(|r| r["method"] == "sample") {
        if let (Some(m), Some(k)) = (r["mean_ns"].as_f64(), r["samples"].as_f64()) {
            sum += m * k;
            n += k;
        }
    }
    let report_mean = sum / n / 1e9;
    let mean = prom.one(
        "sum(rate(owl_one_way_delay_seconds_sum[5m])) / sum(rate(owl_one_way_delay_seconds_count[5m]))",
    );
    assert!(
        (mean - report_mean).abs() <= 0.02 * report_mean,
        "mean {mean} vs report {report_mean}"
    );
    // p99: the database's own histograms (the sample estimates the collector stored; owl report
    // prints no quantile), added up and read as histogram_quantile reads them; Prometheus's
    // answer, from the scrapes' increase over the run, lies in the same bucket
    let conn =
        rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut q = conn
        .prepare("SELECT estimate FROM results WHERE pair = ?1 AND method = 'sample' AND estimate IS NOT NULL")
        .unwrap();
    let estimates: Vec<String> = q
        .query_map([PAIR], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut bounds: Vec<f64> = Vec::new();
    let mut counts: Vec<f64> = Vec::new();
    for e in &estimates {
        let e: Value = serde_json::from_str(e).unwrap();
        let h = &e["delay_histogram"];
        let Some(w) = h["weights"].as_array() else {
            continue;
        };
        if bounds.is_empty() {
            bounds = h["le_ns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_f64().unwrap() / 1e9)
                .chain([f64::INFINITY])
                .collect();
            counts = vec![0.0; w.len()];
        }
        for (c, w) in counts.iter_mut().zip(w) {
            *c += w.as_f64().unwrap();
        }
    }
    assert!(
        counts.iter().sum::<f64>() > 1000.0,
        "{} stored histograms",
        estimates.len()
    );
    let stored_p99 = quantile(0.99, &bounds, &counts);
    let got = prom.one(p99);
    let (lo, hi) = bucket(&bounds, stored_p99);
    assert!(
        lo < got && got <= hi,
        "p99 {got} s, the database's {stored_p99} s in ({lo}, {hi}]"
    );
    eprintln!(
        "prometheus vs owl report: p99 {got:.6} s vs the stored histograms' {stored_p99:.6} s \
         (bucket ({lo}, {hi}]); mean {mean:.7} s vs {report_mean:.7} s; loss {loss:.5} vs \
         {want:.5}, 5 min {avg:.5} in {lmin:.5}..{lmax:.5}; missing {counted} (increase {increase:.3}); \
         {} README, {} dashboard and {} rule expressions; {:.1} s",
        readme.len(),
        panels.len() + variables.len(),
        recorded + alerts.len(),
        t0.elapsed().as_secs_f64(),
    );
}
