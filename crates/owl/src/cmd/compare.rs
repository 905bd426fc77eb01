//! `owl compare`: ground truth and every method on the same capture pair, side by side.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use owl_core::exact::{IntervalTruth, MatchedPacket, Truth};
use owl_core::interval::Intervals;
use owl_core::method::{Combiner, Estimate, Method, PointSynopsis, Role};
use owl_core::pipeline::truth::{DEFAULT_EXACT_QUANTILES, QUANTILE_RELATIVE_ERROR};
use owl_core::pipeline::{
    IntervalOutcome, PairHook, PairPipeline, PipelineConfig, PointCounters, StreamTruth, Timer,
    TruthConfig,
};
use owl_core::stats::{DelaySummary, relative_error};
use owl_core::units::{format_bytes, format_ns, parse_duration_u64};
use owl_trace::capture::CaptureError;
use owl_trace::lockstep::{End, Event, LockStep, Source};
use owl_trace::records::InputStats;
use serde_json::{Value, json};

use super::agreed::Agreed;
use crate::methods::{self, EXACT};
use crate::progress;

const AFTER_HELP: &str = "How it works:
  Both captures are read at once, in lock-step (the one whose packets are older first), so
  memory follows the traffic in flight, not the length of the captures; a capture can be a
  FIFO or standard input (-). Every packet is dissected and hashed once into its identity (a
  hash of the bytes routers do not change) and fed to the exact matcher and to every method's
  sender or receiver synopsis. The exact matcher is the ground truth: relative errors are
  |estimate − truth| / truth against the packets both points recorded in the same interval.

Horizon:
  The truth waits --horizon (default 1s) for each packet's sighting at R: a packet R sees
  later than that after S is counted lost and late (reported, never silently matched), so set
  it above the path's largest one-way delay, clock offset included. Each point closes an
  interval once its capture has passed the interval's end plus --disorder (default 10ms, the
  timestamp disorder a capture may have); a record older than that is counted, in no interval.

Intervals:
  --interval 0 (default) measures the whole capture as one interval. --interval T cuts each
  capture by its own clock into [t0 + iT, t0 + (i+1)T), t0 = 0 (aligned to T since the epoch)
  unless --origin-ns is given: packets in flight at a boundary look lost at S and unexpected at
  R, as in a real deployment, and the JSON gets a per-interval breakdown.

Per flow (--per-flow):
  Truth per flow is the exact match over the whole capture. Every method with per-flow
  estimates ({PER_FLOW}) is asked, in each
  interval, about the flows S saw in it; over several intervals a flow's mean is the mean of
  its interval means weighted by the method's own packet estimate. The summary gives median
  and 95th-percentile relative error by flow size (<100, 100-999, 1000-9999, >=10000 packets).

Per packet (--per-packet FILE):
  Every per-packet method ({PER_PACKET}) gives, in each interval, its packets: FILE gets
  method,sender_ns,receiver_ns,delay_ns per packet (receiver_ns and delay_ns empty for a packet
  lost or not placed), and the summary (and each such method's JSON: p50_ns, p90_ns, p99_ns,
  p999_ns, per_packet{delivered, lost, unplaced, recovered_fraction, bytes_per_packet,
  anomalies[]}) the quantiles of its delays, the packets it placed and its largest delays.

Output:
  Interval rows are printed as the intervals close (--rows N limits them), then the summary.
  --jsonl streams one JSON object per closed interval (type interval: index, start_ns,
  truth{…}, methods[…]) and ends with a summary object (type summary, the --json fields): use it for long runs.
  With --json, exactly one JSON document: truth{sent, received, lost,
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
  owl compare S.pcap R.pcap --unmatched debug/ --delays delays.csv
  owl compare S.pcap R.pcap --methods exact,opa --per-packet packets.csv";

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP
    .replace("{PER_FLOW}", &methods::per_flow_names())
    .replace("{PER_PACKET}", &super::perpacket::names()))]
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
    /// Write every packet of each per-packet method to FILE (CSV:
    /// method,sender_ns,receiver_ns,delay_ns).
    #[arg(long = "per-packet", value_name = "FILE")]
    pub per_packet: Option<PathBuf>,
    /// Measure the complete records of a capture that ends inside a record, instead of failing.
    #[arg(long)]
    pub allow_truncated: bool,
    /// Accept captures where most delays are negative (R's clock known to lag S's).
    #[arg(long)]
    pub allow_negative_delay: bool,
    /// Print one JSON object per interval as it closes, then a summary object (JSON Lines).
    #[arg(long, conflicts_with = "json")]
    pub jsonl: bool,
    /// Largest one-way delay accepted (plus reordering): later sightings count lost and late.
    #[arg(long, default_value = "1s", value_parser = parse_duration_u64, value_name = "T")]
    pub horizon: u64,
    /// Timestamp disorder tolerated within one capture before an interval closes.
    #[arg(long, default_value = "10ms", value_parser = parse_duration_u64, value_name = "T")]
    pub disorder: u64,
    /// Keep up to N whole-run delays for exact quantiles; past it they come from a histogram
    /// (relative error under 0.05 %), and the output says so.
    #[arg(long, default_value_t = DEFAULT_EXACT_QUANTILES, value_name = "N")]
    pub exact_quantiles: usize,
    /// Interval rows of the text report (default: every one).
    #[arg(long, value_name = "N")]
    pub rows: Option<usize>,
    /// Accept intervals so short that the synopses dwarf the traffic (refused by default).
    #[arg(long)]
    pub allow_short_intervals: bool,
}

/// Charges method work to wall-clock time per method.
struct WallTimer(Vec<Duration>);

impl Timer for WallTimer {
    fn charge(&mut self, k: usize, f: &mut dyn FnMut()) {
        let t = Instant::now();
        f();
        self.0[k] += t.elapsed();
    }
}

/// Per-flow and per-packet queries on each closed pair, before the estimators consume it.
struct FlowHook<'a>(
    Option<&'a mut super::perflow::PerFlow>,
    Option<&'a mut super::perpacket::PerPacket>,
);

impl PairHook for FlowHook<'_> {
    fn closed_pair(
        &mut self,
        index: u64,
        methods: &[Arc<dyn Method>],
        sender: &[Box<dyn PointSynopsis>],
        receiver: &[Box<dyn PointSynopsis>],
    ) {
        if let Some(pf) = self.0.as_deref_mut() {
            for (k, m) in methods.iter().enumerate() {
                pf.add_interval(&**m, &*sender[k], &*receiver[k], index);
            }
            pf.presence.forget(index);
        }
        if let Some(pp) = self.1.as_deref_mut() {
            pp.add_interval(index, methods, sender, receiver);
        }
    }
}

/// One method's results.
pub struct MethodResult {
    pub name: String,
    pub overall: Estimate,
    /// Per-interval estimates, kept only for the single-document `--json`.
    pub intervals: BTreeMap<u64, Estimate>,
    pub time: Duration,
    pub error: Option<String>,
    combiner: Combiner,
}

impl MethodResult {
    fn new(name: &str) -> MethodResult {
        MethodResult {
            name: name.to_string(),
            overall: Estimate::default(),
            intervals: BTreeMap::new(),
            time: Duration::ZERO,
            error: None,
            combiner: Combiner::default(),
        }
    }
}

/// What one capture held and how its reading ended.
pub struct InputReport {
    pub path: String,
    pub stats: InputStats,
    pub truncated: Option<String>,
}

/// Everything `compare` found.
pub struct Comparison {
    pub sender: InputReport,
    pub receiver: InputReport,
    pub intervals: Intervals,
    pub truth: Truth,
    /// What the streaming truth adds: late packets, horizon, exactness of quantiles.
    pub stream: StreamTruth,
    pub points: [PointCounters; 2],
    pub methods: Vec<MethodResult>,
    /// Per-flow estimates (with `--per-flow`).
    pub per_flow: Option<super::perflow::PerFlow>,
    /// Per-packet methods' delays.
    pub per_packet: Option<super::perpacket::PerPacket>,
    /// Intervals reported.
    pub interval_count: u64,
}

/// How the report is written while the captures stream.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Text,
    Json,
    Jsonl,
}

/// Intervals opened before the per-interval size guard judges (see [`check_sizes`]).
const GUARD_AFTER: u64 = 16;
/// Synopsis bytes per captured byte above which an interval is refused as too short.
const GUARD_RATIO: u64 = 100;

pub fn run(args: CompareArgs) -> Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mode = if args.jsonl {
        Mode::Jsonl
    } else if args.json {
        Mode::Json
    } else {
        Mode::Text
    };
    let c = compare(&args, mode, &mut out)?;
    match mode {
        Mode::Json => {
            serde_json::to_writer_pretty(&mut out, &to_json(&c, &args))?;
            writeln!(out)?;
        }
        Mode::Jsonl => {
            let mut doc = to_json(&c, &args);
            doc["type"] = json!("summary");
            serde_json::to_writer(&mut out, &doc)?;
            writeln!(out)?;
        }
        Mode::Text => print_text(&mut out, &c, &args)?,
    }
    Ok(())
}

/// Refuse intervals so short that the synopses dwarf the traffic they measure: fewer than two
/// packets an interval, or synopsis bytes above [`GUARD_RATIO`] times the captured IP bytes.
/// Judged on the intervals the sender point has opened (not those reported, which come a
/// horizon later), so a run that would hold thousands of synopses stops after a few.
fn check_sizes(
    args: &CompareArgs,
    intervals: u64,
    packets: u64,
    synopsis: u64,
    captured: u64,
) -> Result<()> {
    if args.allow_short_intervals || intervals < GUARD_AFTER || synopsis == 0 {
        return Ok(());
    }
    if intervals * 2 > packets {
        bail!(
            "--interval {} is about the packet spacing: {intervals} intervals for {packets} sender packets so far, so no synopsis sees enough packets to estimate anything; use a longer --interval, or --methods exact (or --allow-short-intervals)",
            format_ns(args.agreed.interval as f64)
        );
    }
    if synopsis > GUARD_RATIO * captured {
        bail!(
            "--interval {} is so short that the synopses would be {}x the traffic they measure ({} of synopses for {} of IP packets over {intervals} intervals); use a longer --interval, fewer --methods or a --memory budget (or --allow-short-intervals)",
            format_ns(args.agreed.interval as f64),
            synopsis / captured.max(1),
            format_bytes(synopsis),
            format_bytes(captured)
        );
    }
    Ok(())
}

fn compare(args: &CompareArgs, mode: Mode, out: &mut impl Write) -> Result<Comparison> {
    let names = methods::parse_list(&args.methods)?;
    let iv = args.agreed.intervals()?;
    let opts = args.agreed.options();
    let overrides = args.agreed.overrides()?;
    for m in overrides.methods() {
        if !names.contains(&m) {
            bail!("--method-config sets {m}, which is not among --methods");
        }
    }
    if args.top.is_some() && !args.per_flow {
        bail!("--top selects flows of the --per-flow report: pass --per-flow too");
    }
    let mut built: Vec<Arc<dyn Method>> = Vec::new();
    for &n in &names {
        if n != EXACT {
            built.push(Arc::from(methods::build_configured(n, &opts, &overrides)?));
        }
    }
    let mut results: Vec<MethodResult> =
        built.iter().map(|m| MethodResult::new(m.name())).collect();
    let mut exact = MethodResult::new(EXACT);
    let mut timer = WallTimer(vec![Duration::ZERO; built.len()]);
    let truth_cfg = TruthConfig {
        per_flow: args.per_flow,
        keep_unmatched: args.unmatched.is_some(),
        keep_matched: args.delays.is_some(),
        exact_quantiles: args.exact_quantiles,
        disorder_ns: args.disorder,
        ..TruthConfig::new(iv, args.horizon)
    };
    let mut pipeline = PairPipeline::new(
        PipelineConfig {
            intervals: iv,
            disorder_ns: args.disorder,
        },
        built.clone(),
        Some(truth_cfg),
    );
    let mut per_flow = args.per_flow.then(|| super::perflow::PerFlow::new(iv));
    let mut per_packet =
        super::perpacket::PerPacket::new(args.per_packet.as_deref(), &built, args.exact_quantiles)?;
    let mut delays = match &args.delays {
        Some(p) => Some(DelaysCsv::create(p)?),
        None => None,
    };
    let sources = [Source::parse(&args.sender), Source::parse(&args.receiver)];
    if sources[0] == Source::Stdin && sources[1] == Source::Stdin {
        bail!("only one of SENDER and RECEIVER can be standard input (-)");
    }
    let bars = [
        progress::bar(sources[0].size().unwrap_or(0), "reading sender", true),
        progress::bar(sources[1].size().unwrap_or(0), "reading receiver", true),
    ];
    let mut reader = LockStep::start(
        sources.clone(),
        args.agreed.identity_seed,
        args.allow_truncated,
    );
    let mut ends: [Option<End>; 2] = [None, None];
    let mut exact_time = Duration::ZERO;
    let (mut packets, mut captured, mut synopsis, mut reported) = (0u64, 0u64, 0u64, 0u64);
    let mut rows = RowPrinter::new(args, &built, names.contains(&EXACT));
    // What one interval's synopses take at least, both points (sizes of empty synopses).
    let fresh_bytes: u64 = built
        .iter()
        .map(|m| {
            (m.new_point(Role::Sender).encoded_len() + m.new_point(Role::Receiver).encoded_len())
                as u64
        })
        .sum();
    let roles = [Role::Sender, Role::Receiver];
    while let Some(ev) = reader.next_event() {
        let t = Instant::now();
        let before: Duration = timer.0.iter().sum();
        let per_packet_before = per_packet
            .as_ref()
            .map_or(Duration::ZERO, |p| p.total_time());
        match ev {
            Event::Batch(k, batch, bytes) => {
                bars[k].set_position(bytes);
                if k == 0 {
                    packets += batch.len() as u64;
                    captured += batch.iter().map(|r| r.len as u64).sum::<u64>();
                    if let Some(pf) = per_flow.as_mut() {
                        pf.presence.observe(&batch);
                    }
                }
                let mut hook = FlowHook(per_flow.as_mut(), per_packet.as_mut());
                pipeline.push(roles[k], &batch, &mut timer, &mut hook);
            }
            Event::End(k, end) => {
                bars[k].finish_and_clear();
                if let Some(e) = end.error {
                    let name = sources[k].name();
                    return Err(match e {
                        e if e.is_truncation() => anyhow!(
                            "{name}: {e} (pass --allow-truncated to measure the complete records before it)"
                        ),
                        CaptureError::Io(io) => anyhow!("{name}: cannot read: {io}"),
                        e => anyhow!("{name}: {e}"),
                    });
                }
                ends[k] = Some(End { error: None, ..end });
                let mut hook = FlowHook(per_flow.as_mut(), per_packet.as_mut());
                pipeline.finish_point(roles[k], &mut timer, &mut hook);
            }
        }
        if let Some(d) = delays.as_mut()
            && let Some(tr) = pipeline.truth_mut()
        {
            d.write(tr.drain_matched())?;
        }
        let per_packet_time = per_packet
            .as_ref()
            .map_or(Duration::ZERO, |p| p.total_time());
        exact_time += t
            .elapsed()
            .saturating_sub(timer.0.iter().sum::<Duration>() - before)
            .saturating_sub(per_packet_time - per_packet_before);
        for o in pipeline.drain() {
            reported += 1;
            synopsis += o
                .estimates
                .iter()
                .flatten()
                .flatten()
                .map(|e| e.bytes)
                .sum::<u64>();
            take_outcome(o, iv, mode, &mut results, &mut exact, &mut rows, out)?;
        }
        let opened = pipeline.point(Role::Sender).counters().intervals;
        check_sizes(
            args,
            opened,
            packets,
            synopsis.max(opened * fresh_bytes),
            captured,
        )?;
    }
    let [Some(s_end), Some(r_end)] = ends else {
        bail!("a capture reader stopped without saying why");
    };
    for (k, e) in [&s_end, &r_end].into_iter().enumerate() {
        if e.stats.ip_packets == 0 {
            let s = e.stats;
            bail!(
                "{}: no IP packets to measure ({} frames: {} not IP, {} malformed IP, {} without timestamp)",
                sources[k].name(),
                s.frames,
                s.non_ip,
                s.malformed,
                s.no_timestamp
            );
        }
        if let Some(t) = &e.truncated {
            eprintln!(
                "owl: warning: {}: {t}; measuring the {} complete packets before it",
                sources[k].name(),
                e.stats.ip_packets
            );
        }
    }
    let t = Instant::now();
    let (rest, stream, points) = pipeline.finish();
    for o in rest {
        reported += 1;
        take_outcome(o, iv, mode, &mut results, &mut exact, &mut rows, out)?;
    }
    let mut stream = stream.expect("compare runs the truth");
    if let Some(d) = delays.as_mut() {
        d.finish()?;
    }
    if let Some(pp) = per_packet.as_mut() {
        pp.finish()?;
    }
    exact_time += t.elapsed();
    rows.finish(out)?;
    if stream.received == 0 {
        bail!(
            "no packet of {} appears in {} within the {} horizon ({} distinct packets at S, {} at R, {} later than the horizon): these are not captures of the same traffic, or they were taken with different snaplens or identity seeds{}",
            sources[0].name(),
            sources[1].name(),
            format_ns(stream.horizon_ns as f64),
            stream.sent,
            stream.unexpected,
            stream.late,
            if stream.late > 0 {
                "; raise --horizon if the delay is that long"
            } else {
                ""
            }
        );
    }
    if stream.negative_delays * 2 > stream.received && !args.allow_negative_delay {
        bail!(
            "{} of {} matched packets reach the receiver before they leave the sender (median delay {}): are SENDER and RECEIVER swapped? (pass --allow-negative-delay if R's clock is known to lag S's)",
            stream.negative_delays,
            stream.received,
            format_ns(stream.delay.map(|d| d.p50_ns as f64).unwrap_or(0.0))
        );
    }
    if stream.late > 0 {
        eprintln!(
            "owl: warning: {} packets reached R later than the {} horizon: counted lost (and late), not in the delays; raise --horizon to measure them",
            stream.late,
            format_ns(stream.horizon_ns as f64)
        );
    }
    let truth = Truth {
        sender_records: stream.sender_records,
        receiver_records: stream.receiver_records,
        sent: stream.sent,
        received: stream.received,
        lost: stream.lost,
        sender_duplicates: stream.sender_duplicates,
        duplicated: stream.duplicated,
        unexpected: stream.unexpected,
        reordered: stream.reordered,
        negative_delays: stream.negative_delays,
        delay: stream.delay,
        in_interval: stream.in_interval,
        intervals: std::mem::take(&mut rows.kept),
        flows: std::mem::take(&mut stream.flows),
        lost_ids: std::mem::take(&mut stream.lost_ids),
        unexpected_ids: std::mem::take(&mut stream.unexpected_ids),
    };
    if let Some(dir) = &args.unmatched {
        write_unmatched(dir, args, &truth)?;
    }
    exact.time = exact_time;
    exact.overall = exact_overall(&exact, &truth, iv);
    for (m, time) in results.iter_mut().zip(&timer.0) {
        // a per-packet method's answer to the per-packet query is its work too
        m.time = *time
            + per_packet
                .as_ref()
                .map_or(Duration::ZERO, |p| p.time_of(&m.name));
        m.overall = m.combiner.overall();
    }
    let mut all = Vec::new();
    let mut results = results.into_iter();
    for &n in &names {
        if n == EXACT {
            all.push(std::mem::replace(&mut exact, MethodResult::new(EXACT)));
        } else if let Some(m) = results.next() {
            all.push(m);
        }
    }
    Ok(Comparison {
        sender: InputReport {
            path: args.sender.display().to_string(),
            stats: s_end.stats,
            truncated: s_end.truncated,
        },
        receiver: InputReport {
            path: args.receiver.display().to_string(),
            stats: r_end.stats,
            truncated: r_end.truncated,
        },
        intervals: iv,
        truth,
        stream,
        points,
        methods: all,
        per_flow,
        per_packet,
        interval_count: reported,
    })
}

/// The exact method's estimate of one interval: its matched packets.
fn exact_estimate(it: &IntervalTruth) -> Estimate {
    Estimate {
        mean_ns: it.delay.map(|d| d.mean_ns),
        std_ns: it.delay.map(|d| d.std_ns),
        samples: it.delay.map(|d| d.count).unwrap_or(0),
        bytes: 16 * it.sent,
        lost: Some(it.lost + it.left),
        ..Default::default()
    }
}

fn exact_overall(exact: &MethodResult, truth: &Truth, iv: Intervals) -> Estimate {
    let d = truth.in_interval;
    Estimate {
        mean_ns: d.map(|d| d.mean_ns),
        std_ns: d.map(|d| d.std_ns),
        samples: d.map(|d| d.count).unwrap_or(0),
        bytes: 16 * truth.sent,
        lost: Some(if iv.is_whole() {
            truth.lost
        } else {
            exact.combiner.combined().lost.unwrap_or(0)
        }),
        ..Default::default()
    }
}

/// File one closed interval: per-method totals, and the row, line or document entry.
fn take_outcome(
    o: IntervalOutcome,
    iv: Intervals,
    mode: Mode,
    results: &mut [MethodResult],
    exact: &mut MethodResult,
    rows: &mut RowPrinter,
    out: &mut impl Write,
) -> Result<()> {
    if let Some(t) = &o.truth
        && !iv.is_whole()
    {
        let e = exact_estimate(t);
        exact.combiner.add(&e);
        if mode == Mode::Json {
            exact.intervals.insert(o.index, e);
        }
    }
    let mut ests: Vec<Option<&Estimate>> = Vec::new();
    for (m, e) in results.iter_mut().zip(&o.estimates) {
        match e {
            Some(Ok(e)) => {
                m.combiner.add(e);
                ests.push(Some(e));
            }
            Some(Err(err)) => {
                m.error
                    .get_or_insert_with(|| format!("interval {}: {err}", o.index));
                ests.push(None);
            }
            None => ests.push(None),
        }
    }
    if iv.is_whole() {
        return Ok(());
    }
    let truth = o.truth.clone().unwrap_or_else(|| IntervalTruth {
        index: o.index,
        start_ns: o.start_ns,
        ..Default::default()
    });
    match mode {
        Mode::Json => {
            for (m, e) in results.iter_mut().zip(&ests) {
                if let Some(e) = e {
                    m.intervals.insert(o.index, (*e).clone());
                }
            }
            rows.kept.push(truth);
        }
        Mode::Jsonl => {
            let mut named: Vec<(&str, &Estimate)> = Vec::new();
            let ex = exact_estimate(&truth);
            if rows.exact_listed {
                named.push((EXACT, &ex));
            }
            for (m, e) in results.iter().zip(&ests) {
                if let Some(e) = e {
                    named.push((&m.name, e));
                }
            }
            let mut v = interval_json(&truth, &named);
            v["type"] = json!("interval");
            serde_json::to_writer(&mut *out, &v)?;
            writeln!(out)?;
        }
        Mode::Text => rows.row(out, &truth, &ests)?,
    }
    Ok(())
}

/// Interval rows of the text report, printed as the intervals close.
struct RowPrinter {
    limit: usize,
    printed: usize,
    names: Vec<String>,
    exact_listed: bool,
    /// Interval truths kept for the single JSON document.
    kept: Vec<IntervalTruth>,
}

impl RowPrinter {
    fn new(args: &CompareArgs, built: &[Arc<dyn Method>], exact_listed: bool) -> RowPrinter {
        RowPrinter {
            limit: args.rows.unwrap_or(usize::MAX),
            printed: 0,
            names: built.iter().map(|m| m.name().to_string()).collect(),
            exact_listed,
            kept: Vec::new(),
        }
    }

    fn row(
        &mut self,
        out: &mut impl Write,
        it: &IntervalTruth,
        ests: &[Option<&Estimate>],
    ) -> Result<()> {
        if self.printed >= self.limit {
            self.printed += 1;
            return Ok(());
        }
        if self.printed == 0 {
            write!(
                out,
                "{:>8} {:>9} {:>9} {:>9} {:>10}",
                "interval", "sent", "matched", "crossing", "truth mean"
            )?;
            for n in &self.names {
                write!(out, " {:>12}", format!("{n} err"))?;
            }
            writeln!(out)?;
        }
        write!(
            out,
            "{:>8} {:>9} {:>9} {:>9} {:>10}",
            it.index,
            it.sent,
            it.matched,
            it.left,
            fmt_opt_ns(it.delay.map(|d| d.mean_ns))
        )?;
        for e in ests {
            write!(
                out,
                " {:>12}",
                fmt_err(relative_error(
                    e.and_then(|e| e.mean_ns),
                    it.delay.map(|d| d.mean_ns)
                ))
            )?;
        }
        writeln!(out)?;
        out.flush()?;
        self.printed += 1;
        Ok(())
    }

    fn finish(&self, out: &mut impl Write) -> Result<()> {
        if self.printed > self.limit {
            writeln!(
                out,
                "… {} more intervals (--rows N prints more; --jsonl streams every interval)",
                self.printed - self.limit
            )?;
        }
        if self.printed > 0 {
            writeln!(out)?;
        }
        Ok(())
    }
}

/// Every matched packet's delay, written as the truth resolves them (`--delays`).
struct DelaysCsv {
    path: PathBuf,
    w: std::io::BufWriter<std::fs::File>,
}

impl DelaysCsv {
    fn create(path: &Path) -> Result<DelaysCsv> {
        let f = std::fs::File::create(path)
            .with_context(|| format!("{}: cannot create", path.display()))?;
        let mut w = std::io::BufWriter::new(f);
        writeln!(
            w,
            "id,sender_ns,receiver_ns,delay_ns,proto,src,sport,dst,dport"
        )?;
        Ok(DelaysCsv {
            path: path.to_path_buf(),
            w,
        })
    }

    fn write(&mut self, matched: impl Iterator<Item = MatchedPacket>) -> Result<()> {
        for m in matched {
            writeln!(
                self.w,
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
            )
            .with_context(|| format!("{}: cannot write", self.path.display()))?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        self.w
            .flush()
            .with_context(|| format!("{}: cannot write", self.path.display()))
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

fn input_json(x: &InputReport, points: &PointCounters) -> Value {
    let (p, s, t) = (&x.path, &x.stats, &x.truncated);
    json!({
        "path": p,
        "before_origin": points.before_origin,
        "out_of_order": points.out_of_order,
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

/// One interval: its truth and each method's estimate against it.
fn interval_json(it: &IntervalTruth, named: &[(&str, &Estimate)]) -> Value {
    let ms: Vec<Value> = named
        .iter()
        .map(|(n, e)| estimate_json(n, e, &it.delay))
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
    truth["late"] = json!(c.stream.late);
    truth["quantiles_exact"] = json!(c.stream.quantiles_exact);
    if !c.stream.quantiles_exact {
        truth["quantiles_relative_error"] = json!(QUANTILE_RELATIVE_ERROR);
    }
    let methods: Vec<Value> = c
        .methods
        .iter()
        .map(|m| {
            let mut v = estimate_json(&m.name, &m.overall, &t.in_interval);
            v["time_s"] = json!(m.time.as_secs_f64());
            v["error"] = json!(m.error);
            if let Some(pp) = &c.per_packet {
                pp.annotate(&m.name, m.overall.bytes, t, &mut v);
            }
            v
        })
        .collect();
    let mut doc = json!({
        "owl_version": env!("CARGO_PKG_VERSION"),
        "sender": input_json(&c.sender, &c.points[0]),
        "receiver": input_json(&c.receiver, &c.points[1]),
        "horizon_ns": c.stream.horizon_ns,
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
                let named: Vec<(&str, &Estimate)> = c
                    .methods
                    .iter()
                    .filter_map(|m| m.intervals.get(&it.index).map(|e| (m.name.as_str(), e)))
                    .collect();
                interval_json(it, &named)
            })
            .collect();
        if ivs.len() > 10_000 {
            eprintln!(
                "owl: note: --json held all {} intervals in memory to print one document; --jsonl streams them as they close",
                ivs.len()
            );
        }
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
        c.sender.path,
        c.sender.stats.ip_packets,
        skipped(&c.sender.stats, &c.points[0])
    )?;
    writeln!(
        out,
        "receiver {}: {} IP packets{}",
        c.receiver.path,
        c.receiver.stats.ip_packets,
        skipped(&c.receiver.stats, &c.points[1])
    )?;
    let span = if iv.is_whole() {
        "one interval over the whole capture".to_string()
    } else {
        format!(
            "{} intervals of {} (relative errors against packets matched within their interval)",
            c.interval_count,
            format_ns(iv.length_ns as f64)
        )
    };
    writeln!(out, "measured as {span}")?;
    writeln!(
        out,
        "horizon  {}: a packet counts as received if R sees it within that of S{}",
        format_ns(c.stream.horizon_ns as f64),
        if c.stream.late > 0 {
            format!(" ({} packets came later: counted lost)", c.stream.late)
        } else {
            String::new()
        }
    )?;
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
        if !c.stream.quantiles_exact {
            writeln!(
                out,
                "         (quantiles from a histogram, within {:.2} % of the exact ones; --exact-quantiles N keeps up to N delays)",
                100.0 * QUANTILE_RELATIVE_ERROR
            )?;
        }
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
        if let Some([lo, hi]) = e.std_ci95_ns {
            writeln!(
                out,
                "{:w$}  std 95 % interval {} to {}",
                "",
                format_ns(lo),
                format_ns(hi)
            )?;
        }
        for n in &e.notes {
            writeln!(out, "{:w$}  {n}", "")?;
        }
    }
    if args.per_flow {
        super::perflow::print(out, t, c.per_flow.as_ref(), args.top.unwrap_or(10))?;
    }
    if let Some(pp) = &c.per_packet {
        let bytes = |n: &str| {
            c.methods
                .iter()
                .find(|m| m.name == n)
                .map_or(0, |m| m.overall.bytes)
        };
        pp.print(out, t, &bytes)?;
    }
    Ok(())
}

fn skipped(s: &InputStats, p: &PointCounters) -> String {
    let mut parts = Vec::new();
    if p.before_origin > 0 {
        parts.push(format!(
            "{} before --origin-ns, in no interval",
            p.before_origin
        ));
    }
    if p.out_of_order > 0 {
        parts.push(format!(
            "{} out of timestamp order beyond --disorder, in no interval",
            p.out_of_order
        ));
    }
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
