//! `owl report`: the per-interval series an `owl collector` stored.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};
use clap::Args;
use owl_core::units::format_ns;
use owl_live::store::{Row, Store};
use serde::Serialize;

const AFTER_HELP: &str = "One row per method and interval, in interval order: the mean and
standard deviation of the one-way delay, what the mean rests on (samples), the loss the method
estimates, and the packets each point recorded (sent at S, received at R). An interval a point
recorded but could not keep, or that no agent delivered (an agent was down), is a row with
status missing and its reason, never left out; one only a point recorded before the other
started or after it stopped is left_out. Intervals without a packet at either point are not
listed.

--json prints {\"intervals\": [{\"pair\", \"method\", \"start_ns\", \"mean_ns\", \"std_ns\", \"samples\",
\"lost\", \"sent\", \"received\", \"status\", \"reason\"}, …]} (null where there is no value).

Examples:
  owl report --db owl.db
  owl report --db owl.db --pair 'lon→fra' --json | jq '.intervals[] | [.start_ns, .mean_ns]'";

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
}

#[derive(Serialize)]
struct Report {
    intervals: Vec<Row>,
}

pub fn run(a: ReportArgs) -> Result<()> {
    let store = Store::open_read(&a.db).map_err(|e| anyhow!("{e}"))?;
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
        "{:<16} {:>20} {:<13} {:>10} {:>10} {:>8} {:>6} {:>8} {:>8}  status",
        "pair", "start (s)", "method", "mean", "std", "samples", "lost", "sent", "received"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<16} {:>10}.{:09} {:<13} {:>10} {:>10} {:>8} {:>6} {:>8} {:>8}  {}{}",
            r.pair,
            r.start_ns / 1_000_000_000,
            r.start_ns % 1_000_000_000,
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
