//! `owl compare`: ground truth and every method on the same capture pair, side by side.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use owl_core::PacketRecord;
use owl_core::exact::{Matcher, Truth, TruthOptions};
use owl_core::interval::Intervals;
use owl_core::method::{Estimate, Method, PointSynopsis, Role};
use owl_core::stats::{DelaySummary, relative_error};
use owl_core::units::{format_bytes, format_ns};
use owl_trace::records::InputStats;
use serde_json::{Value, json};

use super::agreed::Agreed;
use crate::input::read_capture;
use crate::methods::{self, EXACT};

const AFTER_HELP: &str = "How it works:
  Both captures are read once; every packet is dissected and hashed once into its identity
  (a hash of the bytes routers do not change) and fed to the exact matcher and to every
  method's sender or receiver synopsis. The exact matcher is the ground truth: relative errors
  are |estimate − truth| / truth against the packets both points recorded in the same interval.

Intervals:
  --interval 0 (default) measures the whole capture as one interval. --interval T cuts each
  capture by its own clock into [t0 + iT, t0 + (i+1)T), t0 = 0 (aligned to T since the epoch)
  unless --origin-ns is given: packets in flight at a boundary look lost at S and unexpected at
  R, as in a real deployment, and the JSON gets a per-interval breakdown.

Per flow (--per-flow):
  Truth per flow is the exact match over the whole capture. Every method with per-flow
  estimates (lds, lds-mb, lds-mb-dense, sds, rli, mpe, mpe1, countmin) is asked, in each
  interval, about the flows S saw in it; over several intervals a flow's mean is the mean of
  its interval means weighted by the method's own packet estimate. The summary gives median
  and 95th-percentile relative error by flow size (<100, 100-999, 1000-9999, >=10000 packets).

Output:
  A table on stdout, or with --json exactly one JSON document: truth{sent, received, lost,
  mean_ns, std_ns, p99_ns, …}, methods[]{name, mean_ns, std_ns, samples, bytes, …},
  intervals[] (when T > 0), flows[]{proto, src, dst, sport, dport, truth{sent, received,
  mean_ns, std_ns}, methods{NAME: {mean_ns, packets, mean_rel_err}}} and flow_error_bins[]
  (with --per-flow). Exit status 1 with one line on
  stderr for unreadable captures, captures with no IP packets, captures that share no packet,
  and S/R given in the wrong order (most delays negative).

Examples:
  owl compare sender.pcap receiver.pcap
  owl compare S.pcapng R.pcapng --interval 100ms --json | jq '.intervals[].truth.mean_ns'
  owl compare S.pcap R.pcap --per-flow --top 20
  owl compare S.pcap R.pcap --unmatched debug/ --delays delays.csv";

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct CompareArgs {
    /// Capture taken at the sender point S (pcap or pcapng).
    pub sender: PathBuf,
    /// Capture taken at the receiver point R.
    pub receiver: PathBuf,
    /// Methods to run beside the truth: a comma list or `all`.
    #[arg(long, default_value = "all", value_name = "LIST", long_help = methods::help(true))]
    pub methods: String,
    #[command(flatten)]
    pub agreed: Agreed,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Report per-flow truth (and per-flow methods).
    #[arg(long)]
    pub per_flow: bool,
    /// With --per-flow: only the N flows with the most packets (tables default to 10).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Write the packets only S saw (lost) and only R saw (unexpected) to DIR as pcap files.
    #[arg(long, value_name = "DIR")]
    pub unmatched: Option<PathBuf>,
    /// Write every matched packet's delay to FILE (CSV).
    #[arg(long, value_name = "FILE")]
    pub delays: Option<PathBuf>,
    /// Measure the complete records of a capture that ends inside a record, instead of failing.
    #[arg(long)]
    pub allow_truncated: bool,
    /// Accept captures where most delays are negative (R's clock known to lag S's).
    #[arg(long)]
    pub allow_negative_delay: bool,
}

/// A method run over both captures.
struct Running {
    method: Box<dyn Method>,
    points: [BTreeMap<u64, Box<dyn PointSynopsis>>; 2],
    time: Duration,
}

impl Running {
    fn feed(&mut self, role: Role, iv: &Intervals, batch: &[PacketRecord]) {
        let t = Instant::now();
        let slot = role as usize;
        let mut start = 0;
        while start < batch.len() {
            let Some(i) = iv.index(batch[start].ts_ns) else {
                start += 1;
                continue;
            };
            let mut end = start + 1;
            while end < batch.len() && iv.index(batch[end].ts_ns) == Some(i) {
                end += 1;
            }
            let method = &self.method;
            self.points[slot]
                .entry(i)
                .or_insert_with(|| method.new_point(role))
                .record_batch(&batch[start..end]);
            start = end;
        }
        self.time += t.elapsed();
    }
}

/// One method's results.
pub struct MethodResult {
    pub name: String,
    pub overall: Estimate,
    pub intervals: BTreeMap<u64, Estimate>,
    pub time: Duration,
    pub error: Option<String>,
}

/// Everything `compare` found.
pub struct Comparison {
    pub sender: (PathBuf, InputStats, Option<String>),
    pub receiver: (PathBuf, InputStats, Option<String>),
    pub intervals: Intervals,
    pub truth: Truth,
    pub methods: Vec<MethodResult>,
    /// Per-flow estimates (with `--per-flow`).
    pub per_flow: Option<super::perflow::PerFlow>,
}

pub fn run(args: CompareArgs) -> Result<()> {
    let c = compare(&args)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &to_json(&c, &args))?;
        writeln!(out)?;
    } else {
        print_text(&mut out, &c, &args)?;
    }
    Ok(())
}

pub fn compare(args: &CompareArgs) -> Result<Comparison> {
    let names = methods::parse_list(&args.methods)?;
    let iv = args.agreed.intervals()?;
    let opts = args.agreed.options();
    let overrides = args.agreed.overrides()?;
    for m in overrides.methods() {
        if !names.contains(&m) {
            bail!("--method-config sets {m}, which is not among --methods");
        }
    }
    let mut running: Vec<Running> = Vec::new();
    for &n in &names {
        if n != EXACT {
            running.push(Running {
                method: methods::build_configured(n, &opts, &overrides)?,
                points: [BTreeMap::new(), BTreeMap::new()],
                time: Duration::ZERO,
            });
        }
    }

    let mut matcher = Matcher::new(TruthOptions {
        intervals: iv,
        per_flow: args.per_flow,
        keep_unmatched: args.unmatched.is_some(),
        keep_flows: args.delays.is_some(),
    });
    // Size the identity table once instead of rehashing as it grows: a capture record is
    // rarely under 100 bytes, so this rarely over-reserves by more than a few times.
    if let Ok(m) = std::fs::metadata(&args.sender) {
        matcher.reserve(((m.len() / 100) as usize).min(64 << 20));
    }
    let mut exact_time = Duration::ZERO;
    let mut per_flow = args.per_flow.then(|| super::perflow::PerFlow::new(iv));
    let s = read_capture(
        &args.sender,
        args.agreed.identity_seed,
        args.allow_truncated,
        "sender",
        |batch| {
            let t = Instant::now();
            for r in batch {
                matcher
                    .add_sender(r)
                    .with_context(|| args.sender.display().to_string())?;
            }
            exact_time += t.elapsed();
            if let Some(pf) = per_flow.as_mut() {
                pf.presence.observe(batch);
            }
            for m in running.iter_mut() {
                m.feed(Role::Sender, &iv, batch);
            }
            Ok(())
        },
    )?;
    let r = read_capture(
        &args.receiver,
        args.agreed.identity_seed,
        args.allow_truncated,
        "receiver",
        |batch| {
            let t = Instant::now();
            for r in batch {
                matcher.add_receiver(r);
            }
            exact_time += t.elapsed();
            for m in running.iter_mut() {
                m.feed(Role::Receiver, &iv, batch);
            }
            Ok(())
        },
    )?;
    for (who, read) in [(&args.sender, &s), (&args.receiver, &r)] {
        if let Some(t) = &read.truncated {
            eprintln!(
                "owl: warning: {}: {t}; measuring the {} complete packets before it",
                who.display(),
                read.stats.ip_packets
            );
        }
    }
    let t = Instant::now();
    let truth = matcher.finish();
    exact_time += t.elapsed();
    if truth.received == 0 {
        bail!(
            "no packet of {} appears in {} ({} distinct packets at S, {} at R): these are not captures of the same traffic, or they were taken with different snaplens or identity seeds",
            args.sender.display(),
            args.receiver.display(),
            truth.sent,
            truth.unexpected
        );
    }
    if truth.negative_delays * 2 > truth.received && !args.allow_negative_delay {
        bail!(
            "{} of {} matched packets reach the receiver before they leave the sender (median delay {}): are SENDER and RECEIVER swapped? (pass --allow-negative-delay if R's clock is known to lag S's)",
            truth.negative_delays,
            truth.received,
            format_ns(truth.delay.map(|d| d.p50_ns as f64).unwrap_or(0.0))
        );
    }

    if let Some(dir) = &args.unmatched {
        write_unmatched(dir, args, &truth)?;
    }
    if let Some(path) = &args.delays {
        write_delays(path, &matcher)?;
    }
    drop(matcher);

    let mut results = Vec::new();
    for &n in &names {
        if n == EXACT {
            results.push(exact_result(&truth, &iv, exact_time));
        }
    }
    for m in running {
        results.push(estimate_all(m, per_flow.as_mut()));
    }
    // keep the order the user asked for
    results.sort_by_key(|r| {
        names
            .iter()
            .position(|n| *n == r.name)
            .unwrap_or(usize::MAX)
    });
    Ok(Comparison {
        sender: (args.sender.clone(), s.stats, s.truncated),
        receiver: (args.receiver.clone(), r.stats, r.truncated),
        intervals: iv,
        truth,
        methods: results,
        per_flow,
    })
}

fn exact_result(truth: &Truth, iv: &Intervals, time: Duration) -> MethodResult {
    let est = |d: Option<DelaySummary>, sent: u64| Estimate {
        mean_ns: d.map(|d| d.mean_ns),
        std_ns: d.map(|d| d.std_ns),
        samples: d.map(|d| d.count).unwrap_or(0),
        bytes: 16 * sent,
        lost: None,
        ..Default::default()
    };
    let mut intervals = BTreeMap::new();
    if !iv.is_whole() {
        for it in &truth.intervals {
            let mut e = est(it.delay, it.sent);
            e.lost = Some(it.lost + it.left);
            intervals.insert(it.index, e);
        }
    }
    let mut overall = est(truth.in_interval, truth.sent);
    overall.lost = Some(if iv.is_whole() {
        truth.lost
    } else {
        truth.intervals.iter().map(|i| i.lost + i.left).sum()
    });
    MethodResult {
        name: EXACT.into(),
        overall,
        intervals,
        time,
        error: None,
    }
}

fn estimate_all(m: Running, mut per_flow: Option<&mut super::perflow::PerFlow>) -> MethodResult {
    let Running {
        method,
        points: [mut s, mut r],
        mut time,
    } = m;
    let t = Instant::now();
    let mut keys: Vec<u64> = s.keys().chain(r.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    let mut intervals = BTreeMap::new();
    let mut error = None;
    for k in keys {
        let a = s
            .remove(&k)
            .unwrap_or_else(|| method.new_point(Role::Sender));
        let b = r
            .remove(&k)
            .unwrap_or_else(|| method.new_point(Role::Receiver));
        if let Some(pf) = per_flow.as_deref_mut() {
            pf.add_interval(&*method, &*a, &*b, k);
        }
        match method.estimate(a, b) {
            Ok(e) => {
                intervals.insert(k, e);
            }
            Err(e) => {
                error.get_or_insert_with(|| format!("interval {k}: {e}"));
            }
        }
    }
    time += t.elapsed();
    let parts: Vec<Estimate> = intervals.values().cloned().collect();
    let overall = if parts.len() == 1 {
        parts[0].clone()
    } else {
        Estimate::combine(&parts)
    };
    MethodResult {
        name: method.name().to_string(),
        overall,
        intervals,
        time,
        error,
    }
}

fn write_unmatched(dir: &Path, args: &CompareArgs, truth: &Truth) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    for (src, ids, name) in [
        (&args.sender, &truth.lost_ids, "sender-only.pcap"),
        (&args.receiver, &truth.unexpected_ids, "receiver-only.pcap"),
    ] {
        let set: hashbrown::HashSet<u64> = ids.iter().copied().collect();
        let dst = dir.join(name);
        let x = owl_trace::records::extract(src, &dst, args.agreed.identity_seed, &set)
            .with_context(|| format!("writing {}", dst.display()))?;
        if x.other_linktype > 0 {
            eprintln!(
                "owl: warning: {}: {} packets on interfaces of another link type left out",
                dst.display(),
                x.other_linktype
            );
        }
        if !args.json {
            eprintln!("owl: wrote {} packets to {}", x.written, dst.display());
        }
    }
    Ok(())
}

fn write_delays(path: &Path, matcher: &Matcher) -> Result<()> {
    let f = std::fs::File::create(path)
        .with_context(|| format!("{}: cannot create", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    writeln!(
        w,
        "id,sender_ns,receiver_ns,delay_ns,proto,src,sport,dst,dport"
    )?;
    for m in matcher.matched() {
        writeln!(
            w,
            "{:016x},{},{},{},{},{},{},{},{}",
            m.id,
            m.sender_ns,
            m.receiver_ns,
            m.delay_ns(),
            m.flow.proto,
            m.flow.src,
            m.flow.sport,
            m.flow.dst,
            m.flow.dport
        )?;
    }
    w.flush()?;
    Ok(())
}

fn summary_json(d: &Option<DelaySummary>) -> Value {
    match d {
        Some(d) => json!({
            "count": d.count,
            "mean_ns": d.mean_ns, "std_ns": d.std_ns,
            "min_ns": d.min_ns, "max_ns": d.max_ns,
            "p50_ns": d.p50_ns, "p90_ns": d.p90_ns, "p99_ns": d.p99_ns, "p999_ns": d.p999_ns,
        }),
        None => Value::Null,
    }
}

fn input_json(x: &(PathBuf, InputStats, Option<String>)) -> Value {
    let (p, s, t) = x;
    json!({
        "path": p.display().to_string(),
        "frames": s.frames, "ip_packets": s.ip_packets, "non_ip": s.non_ip,
        "malformed": s.malformed, "no_timestamp": s.no_timestamp,
        "first_ns": s.first_ns, "last_ns": s.last_ns, "truncated": t,
    })
}

fn estimate_json(name: &str, e: &Estimate, truth: &Option<DelaySummary>) -> Value {
    json!({
        "name": name,
        "mean_ns": e.mean_ns,
        "std_ns": e.std_ns,
        "mean_rel_err": relative_error(e.mean_ns, truth.map(|t| t.mean_ns)),
        "std_rel_err": relative_error(e.std_ns, truth.map(|t| t.std_ns)),
        "samples": e.samples,
        "bytes": e.bytes,
        "lost": e.lost,
        "mean_ci98_ns": e.mean_ci98_ns,
        "std_ci95_ns": e.std_ci95_ns,
        "notes": e.notes,
    })
}

pub fn to_json(c: &Comparison, args: &CompareArgs) -> Value {
    let t = &c.truth;
    let d = t.delay;
    let mut truth = json!({
        "sent": t.sent,
        "received": t.received,
        "lost": t.lost,
        "loss_rate": t.lost as f64 / t.sent.max(1) as f64,
        "duplicated": t.duplicated,
        "sender_duplicates": t.sender_duplicates,
        "reordered": t.reordered,
        "unexpected": t.unexpected,
        "negative_delays": t.negative_delays,
        "mean_ns": d.map(|d| d.mean_ns),
        "std_ns": d.map(|d| d.std_ns),
        "min_ns": d.map(|d| d.min_ns),
        "max_ns": d.map(|d| d.max_ns),
        "p50_ns": d.map(|d| d.p50_ns),
        "p90_ns": d.map(|d| d.p90_ns),
        "p99_ns": d.map(|d| d.p99_ns),
        "p999_ns": d.map(|d| d.p999_ns),
    });
    truth["in_interval"] = summary_json(&t.in_interval);
    let methods: Vec<Value> = c
        .methods
        .iter()
        .map(|m| {
            let mut v = estimate_json(&m.name, &m.overall, &t.in_interval);
            v["time_s"] = json!(m.time.as_secs_f64());
            v["error"] = json!(m.error);
            v
        })
        .collect();
    let mut doc = json!({
        "owl_version": env!("CARGO_PKG_VERSION"),
        "sender": input_json(&c.sender),
        "receiver": input_json(&c.receiver),
        "interval_ns": c.intervals.length_ns,
        "origin_ns": c.intervals.origin_ns,
        "seed": args.agreed.seed,
        "identity_seed": args.agreed.identity_seed,
        "memory": args.agreed.memory,
        "truth": truth,
        "methods": methods,
    });
    if !c.intervals.is_whole() {
        let ivs: Vec<Value> = t
            .intervals
            .iter()
            .map(|it| {
                let ms: Vec<Value> = c
                    .methods
                    .iter()
                    .filter_map(|m| {
                        m.intervals
                            .get(&it.index)
                            .map(|e| estimate_json(&m.name, e, &it.delay))
                    })
                    .collect();
                json!({
                    "index": it.index,
                    "start_ns": it.start_ns,
                    "truth": {
                        "sent": it.sent, "received": it.received, "matched": it.matched,
                        "lost": it.lost, "left": it.left, "unexpected": it.unexpected,
                        "mean_ns": it.delay.map(|d| d.mean_ns),
                        "std_ns": it.delay.map(|d| d.std_ns),
                        "p99_ns": it.delay.map(|d| d.p99_ns),
                    },
                    "methods": ms,
                })
            })
            .collect();
        doc["intervals"] = Value::Array(ivs);
    }
    if args.per_flow {
        doc["flows"] = super::perflow::flows_json(t, c.per_flow.as_ref(), args.top);
        if let Some(pf) = &c.per_flow {
            doc["flow_error_bins"] = super::perflow::bins_json(t, pf);
        }
    }
    doc
}

fn fmt_opt_ns(x: Option<f64>) -> String {
    x.map(format_ns).unwrap_or_else(|| "-".into())
}

fn fmt_err(x: Option<f64>) -> String {
    match x {
        None => "-".into(),
        Some(0.0) => "0".into(),
        Some(e) => format!("{e:.2e}"),
    }
}

fn fmt_time(d: Duration) -> String {
    format_ns(d.as_nanos() as f64)
}

pub fn print_text(out: &mut impl Write, c: &Comparison, args: &CompareArgs) -> Result<()> {
    let t = &c.truth;
    let iv = &c.intervals;
    writeln!(
        out,
        "sender   {}: {} IP packets{}",
        c.sender.0.display(),
        c.sender.1.ip_packets,
        skipped(&c.sender.1)
    )?;
    writeln!(
        out,
        "receiver {}: {} IP packets{}",
        c.receiver.0.display(),
        c.receiver.1.ip_packets,
        skipped(&c.receiver.1)
    )?;
    let span = if iv.is_whole() {
        "one interval over the whole capture".to_string()
    } else {
        format!(
            "{} intervals of {} (relative errors against packets matched within their interval)",
            t.intervals.len(),
            format_ns(iv.length_ns as f64)
        )
    };
    writeln!(out, "measured as {span}")?;
    writeln!(out)?;
    writeln!(
        out,
        "truth    sent {}  received {}  lost {} ({:.3}%)  duplicated {}  reordered {}  unexpected {}",
        t.sent,
        t.received,
        t.lost,
        100.0 * t.lost as f64 / t.sent.max(1) as f64,
        t.duplicated,
        t.reordered,
        t.unexpected
    )?;
    if let Some(d) = t.delay {
        writeln!(
            out,
            "delay    mean {}  std {}  min {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            format_ns(d.mean_ns),
            format_ns(d.std_ns),
            format_ns(d.min_ns as f64),
            format_ns(d.p50_ns as f64),
            format_ns(d.p90_ns as f64),
            format_ns(d.p99_ns as f64),
            format_ns(d.p999_ns as f64),
            format_ns(d.max_ns as f64)
        )?;
    }
    writeln!(out)?;
    let w = c
        .methods
        .iter()
        .map(|m| m.name.len())
        .max()
        .unwrap_or(0)
        .max(6);
    writeln!(
        out,
        "{:<w$} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>9}",
        "method", "mean", "std", "mean err", "std err", "samples", "bytes", "time"
    )?;
    for m in &c.methods {
        let e = &m.overall;
        writeln!(
            out,
            "{:<w$} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>9}",
            m.name,
            fmt_opt_ns(e.mean_ns),
            fmt_opt_ns(e.std_ns),
            fmt_err(relative_error(e.mean_ns, t.in_interval.map(|d| d.mean_ns))),
            fmt_err(relative_error(e.std_ns, t.in_interval.map(|d| d.std_ns))),
            e.samples,
            format_bytes(e.bytes),
            fmt_time(m.time)
        )?;
        if let Some(err) = &m.error {
            writeln!(out, "{:w$}  ! {err}", "")?;
        }
        for n in &e.notes {
            writeln!(out, "{:w$}  {n}", "")?;
        }
    }
    if !iv.is_whole() {
        const ROWS: usize = 20;
        writeln!(out)?;
        write!(
            out,
            "{:>8} {:>9} {:>9} {:>9} {:>10}",
            "interval", "sent", "matched", "crossing", "truth mean"
        )?;
        for m in &c.methods {
            write!(out, " {:>12}", format!("{} err", m.name))?;
        }
        writeln!(out)?;
        for it in t.intervals.iter().take(ROWS) {
            write!(
                out,
                "{:>8} {:>9} {:>9} {:>9} {:>10}",
                it.index - t.intervals[0].index,
                it.sent,
                it.matched,
                it.left,
                fmt_opt_ns(it.delay.map(|d| d.mean_ns))
            )?;
            for m in &c.methods {
                let e = m.intervals.get(&it.index).and_then(|e| e.mean_ns);
                write!(
                    out,
                    " {:>12}",
                    fmt_err(relative_error(e, it.delay.map(|d| d.mean_ns)))
                )?;
            }
            writeln!(out)?;
        }
        if t.intervals.len() > ROWS {
            writeln!(
                out,
                "… {} more intervals in --json",
                t.intervals.len() - ROWS
            )?;
        }
    }
    if args.per_flow {
        super::perflow::print(out, t, c.per_flow.as_ref(), args.top.unwrap_or(10))?;
    }
    Ok(())
}

fn skipped(s: &InputStats) -> String {
    let mut parts = Vec::new();
    if s.non_ip > 0 {
        parts.push(format!("{} non-IP frames skipped", s.non_ip));
    }
    if s.malformed > 0 {
        parts.push(format!("{} malformed skipped", s.malformed));
    }
    if s.no_timestamp > 0 {
        parts.push(format!("{} without timestamp skipped", s.no_timestamp));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}
