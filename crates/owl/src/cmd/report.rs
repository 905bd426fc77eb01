//! `owl report`: the per-interval series an `owl collector` stored.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use clap::Args;
use owl_core::units::format_ns;
use owl_live::store::{Row, Store};
use serde::Serialize;

const AFTER_HELP: &str = "One row per method and interval, in interval order: the interval's
start (UTC, to the nanosecond; --json gives start_ns, nanoseconds since the Unix epoch), the
mean and standard deviation of the one-way delay, what the mean rests on (samples), the loss
the method estimates, and the packets each point recorded (sent at S, received at R). An
interval a point recorded but could not keep, or that no agent delivered (an agent was down),
is a row with status missing and its reason, never left out; one only a point recorded before
the other started or after it stopped is left_out. Intervals without a packet at either point
are not listed.

--json prints {\"intervals\": [{\"pair\", \"method\", \"start_ns\", \"mean_ns\", \"std_ns\", \"samples\",
\"lost\", \"sent\", \"received\", \"status\", \"reason\", \"clock_offset_ns\", \"clock_uncertainty_ns\"},
…]} (null where there is no value; the clock offset is S's clock minus R's, as the agents
measured it, never applied).

--plot FILE.png draws the series instead of printing the table (with --json, both): the mean
delay of each method (and pair) against time with ± one standard deviation as bars, and the
loss 1 − received/sent of each pair. A missing interval, or one without an estimate, breaks
the line: no line bridges a gap.

--pairs lists what the database holds instead, one pair a row: for a point's path (owl agent
--config) its sender and receiver points (\"-\" for a single pair), its first and last interval
(UTC), its intervals by status and its methods; with --json, {\"pairs\": [{\"pair\",
\"sender_point\", \"receiver_point\", \"first_start_ns\", \"last_start_ns\", \"estimated\",
\"missing\", \"left_out\", \"methods\"}]}.

Examples:
  owl report --db owl.db
  owl report --db owl.db --pairs
  owl report --db owl.db --pair 'lon→fra' --json | jq '.intervals[] | [.start_ns, .mean_ns]'
  owl report --db owl.db --pair 'lon→fra' --plot lon-fra.png";

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct ReportArgs {
    /// The collector's database.
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// Only this pair (default: every pair).
    #[arg(long, value_name = "LABEL")]
    pub pair: Option<String>,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Draw the series into this PNG (mean delay per method, loss per pair) instead of
    /// printing the table.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// List what the database holds instead, one pair a row: its points (a point's path:
    /// sender and receiver point), first and last interval, intervals by status, methods.
    #[arg(long, conflicts_with_all = ["pair", "plot"])]
    pub pairs: bool,
}

#[derive(Serialize)]
struct Report {
    intervals: Vec<Row>,
}

pub fn run(a: ReportArgs) -> Result<()> {
    let store = Store::open_read(&a.db).map_err(|e| anyhow!("{e}"))?;
    if a.pairs {
        return list_pairs(&a, &store);
    }
    let pairs = store
        .pairs()
        .map_err(|e| anyhow!("{}: {e}", a.db.display()))?;
    let pairs = match &a.pair {
        None => pairs,
        Some(p) if pairs.contains(p) => vec![p.clone()],
        Some(p) => bail!(
            "{}: no pair '{p}' (pairs: {})",
            a.db.display(),
            if pairs.is_empty() {
                "none yet".to_string()
            } else {
                pairs.join(", ")
            }
        ),
    };
    let mut rows = Vec::new();
    for p in &pairs {
        rows.extend(
            store
                .series(p)
                .map_err(|e| anyhow!("{}: {e}", a.db.display()))?,
        );
    }
    if let Some(path) = &a.plot {
        plot(path, &rows, pairs.len() > 1)?;
        eprintln!("owl: report: wrote {}", path.display());
        if !a.json {
            return Ok(());
        }
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &Report { intervals: rows })?;
        writeln!(out)?;
        return Ok(());
    }
    let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
    let dur = |v: Option<f64>| v.map(format_ns).unwrap_or_else(|| "-".into());
    writeln!(
        out,
        "{:<16} {:<29} {:<13} {:>10} {:>10} {:>8} {:>6} {:>8} {:>8}  status",
        "pair", "start (UTC)", "method", "mean", "std", "samples", "lost", "sent", "received"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<16} {:<29} {:<13} {:>10} {:>10} {:>8} {:>6} {:>8} {:>8}  {}{}",
            r.pair,
            crate::report::checks::format_utc_ns(r.start_ns),
            r.method,
            dur(r.mean_ns),
            dur(r.std_ns),
            opt(r.samples),
            opt(r.lost),
            opt(r.sent),
            opt(r.received),
            r.status,
            r.reason
                .as_deref()
                .map(|x| format!(": {x}"))
                .unwrap_or_default()
        )?;
    }
    Ok(())
}

/// `--pairs`: what the database holds, one pair a row.
fn list_pairs(a: &ReportArgs, store: &Store) -> Result<()> {
    let pairs = store
        .pair_summaries()
        .map_err(|e| anyhow!("{}: {e}", a.db.display()))?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &serde_json::json!({ "pairs": pairs }))?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<16} {:<10} {:<10} {:<30} {:<30} {:>9} {:>7} {:>8}  methods",
        "pair",
        "sender",
        "receiver",
        "first interval (UTC)",
        "last interval (UTC)",
        "estimated",
        "missing",
        "left_out"
    )?;
    for p in &pairs {
        writeln!(
            out,
            "{:<16} {:<10} {:<10} {:<30} {:<30} {:>9} {:>7} {:>8}  {}",
            p.pair,
            p.sender_point.as_deref().unwrap_or("-"),
            p.receiver_point.as_deref().unwrap_or("-"),
            crate::report::checks::format_utc_ns(p.first_start_ns),
            crate::report::checks::format_utc_ns(p.last_start_ns),
            p.estimated,
            p.missing,
            p.left_out,
            p.methods.join(",")
        )?;
    }
    if pairs.is_empty() {
        writeln!(out, "(no pair yet)")?;
    }
    Ok(())
}

/// The series as a PNG: mean delay per method (± std) and loss per pair, against seconds since
/// the first interval; a row without a value breaks its line.
fn plot(path: &std::path::Path, rows: &[Row], several: bool) -> Result<()> {
    use crate::experiment::{Panel, Series, plot_png};
    use std::collections::BTreeMap;
    if rows.is_empty() {
        bail!("nothing to plot: no interval stored");
    }
    let t0 = rows.iter().map(|r| r.start_ns).min().unwrap_or(0);
    let x = |r: &Row| (r.start_ns - t0) as f64 / 1e9;
    let mut delay: BTreeMap<(String, String), Series> = BTreeMap::new();
    let mut loss: BTreeMap<String, (Option<u64>, Series)> = BTreeMap::new();
    for r in rows {
        let name = if several {
            format!("{} {}", r.pair, r.method)
        } else {
            r.method.clone()
        };
        let s = delay
            .entry((r.pair.clone(), r.method.clone()))
            .or_insert_with(|| Series {
                name,
                points: Vec::new(),
                err: Some(Vec::new()),
            });
        let (m, sd) = match r.mean_ns {
            Some(m) => (m / 1e3, r.std_ns.unwrap_or(0.0) / 1e3),
            None => (f64::NAN, 0.0),
        };
        s.points.push((x(r), m));
        if let Some(e) = s.err.as_mut() {
            e.push((m - sd, m + sd));
        }
        // one loss point per interval (rows repeat it per method)
        let (last, l) = loss.entry(r.pair.clone()).or_insert_with(|| {
            (
                None,
                Series {
                    name: r.pair.clone(),
                    points: Vec::new(),
                    err: None,
                },
            )
        });
        if *last != Some(r.start_ns) {
            *last = Some(r.start_ns);
            let y = match (r.sent, r.received) {
                (Some(s), Some(rc)) if s > 0 && r.status != "missing" => {
                    (s as f64 - rc as f64) / s as f64
                }
                _ => f64::NAN,
            };
            l.points.push((x(r), y));
        }
    }
    let panels = [
        Panel {
            title: "one-way delay (mean ± std per interval)".into(),
            x_label: "time since the first interval (s)".into(),
            y_label: "delay (µs)".into(),
            log_x: false,
            log_y: false,
            series: delay.into_values().collect(),
        },
        Panel {
            title: "loss (1 − received/sent)".into(),
            x_label: "time since the first interval (s)".into(),
            y_label: "loss".into(),
            log_x: false,
            log_y: false,
            series: loss.into_values().map(|(_, s)| s).collect(),
        },
    ];
    plot_png(path, &panels)
}
