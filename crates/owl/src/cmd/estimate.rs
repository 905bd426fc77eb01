//! `owl estimate`: two synopsis files (one per point) into estimates, interval by interval.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use clap::Args;
use owl_core::method::{Estimate, Role};
use owl_core::units::{format_bytes, format_ns};
use owl_core::wire::SynopsisFile;
use serde_json::{Value, json};

use crate::methods;

#[derive(Args, Clone, Debug)]
#[command(
    after_help = "The files come from `owl record` at each point. A pair recorded with \
different methods, configurations, intervals or identity seeds is refused with the name of the \
field that differs. Intervals only one point recorded are estimated against an empty synopsis \
of the other (everything lost, or everything unexpected).

Examples:
  owl estimate S.owl R.owl
  owl estimate S.owl R.owl --json | jq '.intervals[] | [.start_ns, .mean_ns]'"
)]
pub struct EstimateArgs {
    /// Synopsis file recorded at the sender point.
    pub sender: PathBuf,
    /// Synopsis file recorded at the receiver point.
    pub receiver: PathBuf,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn find(f: &SynopsisFile, k: u64) -> Option<&Vec<u8>> {
    f.points.iter().find(|p| p.0 == k).map(|p| &p.1)
}

fn load(path: &Path) -> Result<SynopsisFile> {
    let b = std::fs::read(path).map_err(|e| anyhow!("{}: cannot read: {e}", path.display()))?;
    SynopsisFile::decode(&b).map_err(|e| anyhow!("{}: {e}", path.display()))
}

pub fn run(a: EstimateArgs) -> Result<()> {
    let s = load(&a.sender)?;
    let r = load(&a.receiver)?;
    SynopsisFile::check_pair(&s, &r)
        .map_err(|e| anyhow!("{} and {}: {e}", a.sender.display(), a.receiver.display()))?;
    let method = methods::from_config(&s.method, &s.config)
        .with_context(|| a.sender.display().to_string())?;
    let mut keys: Vec<u64> = s.points.iter().chain(&r.points).map(|p| p.0).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut rows: Vec<(u64, Estimate)> = Vec::new();
    for k in keys {
        let sp = match find(&s, k) {
            Some(b) => method
                .decode_point(Role::Sender, b)
                .map_err(|e| anyhow!("{}: interval {k}: {e}", a.sender.display()))?,
            None => method.new_point(Role::Sender),
        };
        let rp = match find(&r, k) {
            Some(b) => method
                .decode_point(Role::Receiver, b)
                .map_err(|e| anyhow!("{}: interval {k}: {e}", a.receiver.display()))?,
            None => method.new_point(Role::Receiver),
        };
        let e = method
            .estimate(sp, rp)
            .map_err(|e| anyhow!("interval {k}: {e}"))?;
        rows.push((k, e));
    }
    let parts: Vec<Estimate> = rows.iter().map(|r| r.1.clone()).collect();
    let overall = Estimate::combine(&parts);
    let iv = s.intervals;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if a.json {
        let est = |e: &Estimate| {
            json!({
                "mean_ns": e.mean_ns, "std_ns": e.std_ns, "samples": e.samples,
                "bytes": e.bytes, "lost": e.lost, "mean_ci98_ns": e.mean_ci98_ns,
                "std_ci95_ns": e.std_ci95_ns,
                "notes": e.notes,
            })
        };
        let ivs: Vec<Value> = rows
            .iter()
            .map(|(k, e)| {
                let mut v = est(e);
                v["index"] = json!(k);
                v["start_ns"] = json!(iv.start_ns(*k));
                v
            })
            .collect();
        let doc = json!({
            "method": s.method,
            "config": s.config.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "interval_ns": iv.length_ns,
            "origin_ns": iv.origin_ns,
            "overall": est(&overall),
            "intervals": ivs,
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "method {} ({} interval(s))", s.method, rows.len())?;
    writeln!(
        out,
        "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "interval", "mean", "std", "samples", "lost", "bytes"
    )?;
    let f = |x: Option<f64>| x.map(format_ns).unwrap_or_else(|| "-".into());
    for (k, e) in &rows {
        writeln!(
            out,
            "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
            k - rows[0].0,
            f(e.mean_ns),
            f(e.std_ns),
            e.samples,
            e.lost.map(|l| l.to_string()).unwrap_or_else(|| "-".into()),
            format_bytes(e.bytes)
        )?;
        for n in &e.notes {
            writeln!(out, "         {n}")?;
        }
    }
    if rows.len() > 1 {
        writeln!(
            out,
            "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "all",
            f(overall.mean_ns),
            f(overall.std_ns),
            overall.samples,
            overall
                .lost
                .map(|l| l.to_string())
                .unwrap_or_else(|| "-".into()),
            format_bytes(overall.bytes)
        )?;
    }
    Ok(())
}
