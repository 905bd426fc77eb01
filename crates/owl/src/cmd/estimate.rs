//! `owl estimate`: two synopsis files (one per point) into estimates, interval by interval.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use clap::Args;
use owl_core::method::{Combiner, Estimate, Method, PointSynopsis, Role};
use owl_core::units::{format_bytes, format_ns};
use owl_core::wire::{StreamReader, SynopsisFile};
use owl_trace::lockstep::Source;
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
    /// Print one JSON object per interval as it is estimated, then a summary object.
    #[arg(long, conflicts_with = "json")]
    pub jsonl: bool,
}

fn open(path: &Path) -> Result<StreamReader<Box<dyn std::io::Read + Send>>> {
    let src = Source::parse(path);
    let r = src
        .open()
        .map_err(|e| anyhow!("{}: cannot read: {e}", path.display()))?;
    StreamReader::open(Box::new(std::io::BufReader::new(r)) as Box<dyn std::io::Read + Send>)
        .map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// The next block of a file, warning once where a cut-short or torn file ends.
fn next(
    f: &mut StreamReader<Box<dyn std::io::Read + Send>>,
    path: &Path,
) -> Option<(u64, Vec<u8>)> {
    match f.next_block() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("owl: warning: {}: {e}", path.display());
            None
        }
    }
}

/// One point's synopsis of interval `k`: the file's current block if it is `k` (then the next
/// block is read), else an empty synopsis (that point recorded nothing in `k`).
fn point(
    method: &dyn Method,
    role: Role,
    k: u64,
    current: &mut Option<(u64, Vec<u8>)>,
    f: &mut StreamReader<Box<dyn std::io::Read + Send>>,
    path: &Path,
) -> Result<Box<dyn PointSynopsis>> {
    match current.take_if(|x| x.0 == k) {
        Some((_, b)) => {
            let p = method
                .decode_point(role, &b)
                .map_err(|e| anyhow!("{}: interval {k}: {e}", path.display()))?;
            *current = next(f, path);
            Ok(p)
        }
        None => Ok(method.new_point(role)),
    }
}

pub fn run(a: EstimateArgs) -> Result<()> {
    if a.sender.as_os_str() == "-" && a.receiver.as_os_str() == "-" {
        return Err(anyhow!(
            "only one of the two files can be standard input (-)"
        ));
    }
    let mut s = open(&a.sender)?;
    let mut r = open(&a.receiver)?;
    SynopsisFile::check_pair(&s.header, &r.header)
        .map_err(|e| anyhow!("{} and {}: {e}", a.sender.display(), a.receiver.display()))?;
    let method = methods::from_config(&s.header.method, &s.header.config)
        .with_context(|| a.sender.display().to_string())?;
    let header = s.header.clone();
    let iv = header.intervals;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let est = |e: &Estimate| {
        json!({
            "mean_ns": e.mean_ns, "std_ns": e.std_ns, "samples": e.samples,
            "bytes": e.bytes, "lost": e.lost, "mean_ci98_ns": e.mean_ci98_ns,
            "std_ci95_ns": e.std_ci95_ns,
            "notes": e.notes,
        })
    };
    let f = |x: Option<f64>| x.map(format_ns).unwrap_or_else(|| "-".into());
    let row = |out: &mut dyn Write, label: &str, e: &Estimate| -> std::io::Result<()> {
        writeln!(
            out,
            "{:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
            label,
            f(e.mean_ns),
            f(e.std_ns),
            e.samples,
            e.lost.map(|l| l.to_string()).unwrap_or_else(|| "-".into()),
            format_bytes(e.bytes)
        )
    };
    if !a.json && !a.jsonl {
        writeln!(out, "method {}", header.method)?;
        writeln!(
            out,
            "{:>12} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "interval", "mean", "std", "samples", "lost", "bytes"
        )?;
    }
    // Merge-join the two files' intervals (ascending in each), one pair in memory at a time;
    // each interval is printed as it is estimated.
    let mut combiner = Combiner::default();
    let mut kept: Vec<Value> = Vec::new();
    let mut sb = next(&mut s, &a.sender);
    let mut rb = next(&mut r, &a.receiver);
    loop {
        let k = match (&sb, &rb) {
            (None, None) => break,
            (Some(x), None) => x.0,
            (None, Some(y)) => y.0,
            (Some(x), Some(y)) => x.0.min(y.0),
        };
        let sp = point(&*method, Role::Sender, k, &mut sb, &mut s, &a.sender)?;
        let rp = point(&*method, Role::Receiver, k, &mut rb, &mut r, &a.receiver)?;
        let e = method
            .estimate(sp, rp)
            .map_err(|e| anyhow!("interval {k}: {e}"))?;
        combiner.add(&e);
        let mut v = est(&e);
        v["index"] = json!(k);
        v["start_ns"] = json!(iv.start_ns(k));
        if a.json {
            kept.push(v);
        } else if a.jsonl {
            v["type"] = json!("interval");
            serde_json::to_writer(&mut out, &v)?;
            writeln!(out)?;
        } else {
            row(&mut out, &k.to_string(), &e)?;
            if let Some([lo, hi]) = e.std_ci95_ns {
                writeln!(
                    out,
                    "             std 95 % interval {} to {}",
                    format_ns(lo),
                    format_ns(hi)
                )?;
            }
            for n in &e.notes {
                writeln!(out, "             {n}")?;
            }
        }
    }
    let overall = combiner.combined();
    let mut doc = json!({
        "method": header.method,
        "config": header.config.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "interval_ns": iv.length_ns,
        "origin_ns": iv.origin_ns,
        "overall": est(&overall),
    });
    if a.json {
        doc["intervals"] = Value::Array(kept);
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
    } else if a.jsonl {
        doc["type"] = json!("summary");
        doc["intervals"] = json!(combiner.parts());
        serde_json::to_writer(&mut out, &doc)?;
        writeln!(out)?;
    } else if combiner.parts() > 1 {
        row(&mut out, &format!("all {}", combiner.parts()), &overall)?;
    }
    Ok(())
}
