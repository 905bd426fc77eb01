//! `owl estimate`: two synopsis files (one per point) into estimates, interval by interval.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use clap::Args;
use owl_core::method::{Combiner, Method, PointSynopsis, Role};
use owl_core::wire::{StreamReader, SynopsisFile};
use owl_trace::lockstep::Source;

use crate::methods;
use crate::report::{self, EstimateInterval, EstimateIntervals, EstimateReport, Line};

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
    let text = !a.json && !a.jsonl;
    if text {
        report::text::estimate_head(&mut out, &header.method)?;
    }
    // Merge-join the two files' intervals (ascending in each), one pair in memory at a time;
    // each interval is printed as it is estimated.
    let mut combiner = Combiner::default();
    let mut kept: Vec<EstimateInterval> = Vec::new();
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
        let it = EstimateInterval {
            index: k,
            start_ns: iv.start_ns(k),
            estimate: e,
        };
        if a.json {
            kept.push(it);
        } else if a.jsonl {
            serde_json::to_writer(
                &mut out,
                &Line {
                    kind: "interval",
                    body: &it,
                },
            )?;
            writeln!(out)?;
        } else {
            report::text::estimate_interval(&mut out, &it)?;
        }
    }
    let mut report = EstimateReport {
        method: header.method.clone(),
        config: header.config.iter().cloned().collect(),
        interval_ns: iv.length_ns,
        origin_ns: iv.origin_ns,
        overall: combiner.combined(),
        intervals: EstimateIntervals::List(kept),
    };
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else if a.jsonl {
        report.intervals = EstimateIntervals::Count(combiner.parts());
        serde_json::to_writer(
            &mut out,
            &Line {
                kind: "summary",
                body: &report,
            },
        )?;
        writeln!(out)?;
    } else {
        report::text::estimate_overall(&mut out, combiner.parts(), &report.overall)?;
    }
    Ok(())
}
