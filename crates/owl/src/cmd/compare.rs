//! `owl compare`: ground truth and every method on the same capture pair, side by side.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use owl_core::PacketRecord;
use owl_core::exact::{IntervalTruth, MatchedPacket, Truth};
use owl_core::interval::Intervals;
use owl_core::method::{Combiner, Estimate, Method, PointSynopsis, Role};
use owl_core::pipeline::truth::DEFAULT_EXACT_QUANTILES;
use owl_core::pipeline::{
    IntervalOutcome, PairHook, PairPipeline, PipelineConfig, Timer, TruthConfig,
};
use owl_core::units::{format_bytes, format_ns, parse_duration_u64};
use owl_trace::capture::CaptureError;
use owl_trace::lockstep::{End, Event, LockStep, Source};
use owl_trace::records::ReadOptions;

use super::agreed::Agreed;
use crate::methods::{self, EXACT};
use crate::progress;
use crate::report::text::{self, IntervalTable};
use crate::report::{
    self, CaptureReport, CompareReport, IntervalReport, Line, MethodReport, MethodRun, NoteTally,
    Status, TruthReport,
};

/// How long compare waits for each capture's first batch to learn where it starts.
const FIRST_PATIENCE: Duration = Duration::from_secs(2);

/// Where each point's records start counting for the methods, given both captures' first
/// batches: a point that started first loses what it saw before the other started, less (at
/// S) the largest delay of the packets both batches hold, which were in flight; with none in
/// common, the later start itself.
fn lead_in(s: &[PacketRecord], r: &[PacketRecord]) -> [(u64, u64); 2] {
    let first = |b: &[PacketRecord]| b.iter().map(|x| x.ts_ns).min().unwrap_or(0);
    let (s0, r0) = (first(s), first(r));
    let sent: hashbrown::HashMap<u64, u64> = s.iter().map(|x| (x.id, x.ts_ns)).collect();
    let in_flight = r
        .iter()
        .filter_map(|x| Some(x.ts_ns.saturating_sub(*sent.get(&x.id)?)))
        .max()
        .unwrap_or(0);
    [
        (r0.saturating_sub(in_flight).max(s0), u64::MAX),
        (s0.max(r0), u64::MAX),
    ]
}

/// Are `a` and `b` the same regular file, whatever the paths say?
fn same_file(a: &Path, b: &Path) -> bool {
    a.is_file()
        && matches!(
            (std::fs::canonicalize(a), std::fs::canonicalize(b)),
            (Ok(x), Ok(y)) if x == y
        )
}

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
  capture by its own clock into [t0 + iT, t0 + (i+1)T) for every integer i, t0 = 0 (aligned to
  T since the epoch) unless --origin-ns shifts the grid (a packet before t0 is in the interval
  before it): packets in flight at a boundary look lost at S and unexpected at R, as in a real
  deployment, and the JSON gets a per-interval breakdown.

Checks:
  The text starts with a checks block, the JSON has a checks object: snaplen (captures that
  keep different numbers of IP bytes of a long packet, by snaplen or link header, e.g.
  Ethernet at 128 bytes and Linux SLL2 at 100, are identified on the IP bytes both keep, 80
  here; --identity-bytes N sets the number), spans (when each capture ran), trimmed (a lead-in
  or lead-out only one capture has is not loss: it is trimmed for the truth and the methods
  alike, and counted; --no-trim keeps it), late, invalid records, clock (negative delays, the
  same capture twice).

Interfaces:
  The interfaces of a pcapng file are measured as one stream only when they are alike (link
  type, snaplen, timestamp resolution); otherwise compare stops naming both: pick one with
  --interface N (both captures), --sender-interface N or --receiver-interface N (numbered from
  0 in file order, as `tshark -D` lists a dumpcap capture's). Interfaces of link types owl
  cannot read are counted and skipped.

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
  owl compare S.pcap R.pcap --methods exact,opa --per-packet packets.csv
  owl compare both.pcapng R.pcap --sender-interface 1";

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
    #[arg(long, value_parser = crate::numbers::usize_arg, value_name = "N")]
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
    #[arg(long, value_parser = crate::numbers::usize_arg, default_value_t = DEFAULT_EXACT_QUANTILES, value_name = "N")]
    pub exact_quantiles: usize,
    /// Interval rows of the text report (default: every one).
    #[arg(long, value_parser = crate::numbers::usize_arg, value_name = "N", conflicts_with_all = ["json", "jsonl"])]
    pub rows: Option<usize>,
    /// Accept intervals so short that the synopses dwarf the traffic (refused by default).
    #[arg(long)]
    pub allow_short_intervals: bool,
    /// Measure packets outside the window both points captured too (by default a lead-in or
    /// lead-out only one capture has is trimmed and counted, not taken for loss).
    #[arg(long)]
    pub no_trim: bool,
    /// Measure only pcapng interface N (numbered from 0 in file order) of both captures.
    #[arg(long, value_parser = crate::numbers::u32_arg, value_name = "N")]
    pub interface: Option<u32>,
    /// Measure only interface N of the sender's capture (overrides --interface for S).
    #[arg(long, value_parser = crate::numbers::u32_arg, value_name = "N")]
    pub sender_interface: Option<u32>,
    /// Measure only interface N of the receiver's capture (overrides --interface for R).
    #[arg(long, value_parser = crate::numbers::u32_arg, value_name = "N")]
    pub receiver_interface: Option<u32>,
}

impl CompareArgs {
    /// How capture `k` (0 = S, 1 = R) is read.
    fn read_options(&self, k: usize) -> ReadOptions {
        let own = [self.sender_interface, self.receiver_interface][k];
        self.agreed.read_options(own.or(self.interface))
    }
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

/// One method's results over the run.
struct MethodResult {
    name: String,
    time: Duration,
    error: Option<String>,
    combiner: Combiner,
    notes: NoteTally,
}

impl MethodResult {
    fn new(name: &str) -> MethodResult {
        MethodResult {
            name: name.to_string(),
            time: Duration::ZERO,
            error: None,
            combiner: Combiner::default(),
            notes: NoteTally::default(),
        }
    }
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
    let report = compare(&args, mode, &mut out)?;
    match mode {
        Mode::Json => {
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        Mode::Jsonl => {
            serde_json::to_writer(
                &mut out,
                &Line {
                    kind: "summary",
                    body: &report,
                },
            )?;
            writeln!(out)?;
        }
        Mode::Text => text::compare(&mut out, &report, args.top.unwrap_or(TEXT_TOP))?,
    }
    Ok(())
}

/// Flows the text report lists without `--top`.
const TEXT_TOP: usize = 10;

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

fn compare(args: &CompareArgs, mode: Mode, out: &mut impl Write) -> Result<CompareReport> {
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
        trim: !args.no_trim,
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
    let mut per_flow = args
        .per_flow
        .then(|| super::perflow::PerFlow::new(iv, args.horizon));
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
    if same_file(&args.sender, &args.receiver) {
        bail!(
            "{} and {} are the same file: S and R must be captures taken at two points (every delay would be 0)",
            args.sender.display(),
            args.receiver.display()
        );
    }
    let bars = [
        progress::bar(sources[0].size().unwrap_or(0), "reading sender", true),
        progress::bar(sources[1].size().unwrap_or(0), "reading receiver", true),
    ];
    let roles = [Role::Sender, Role::Receiver];
    // Without --identity-bytes the two readers agree on the IP bytes both captures keep.
    let mut reader = LockStep::start_with(
        sources.clone(),
        [args.read_options(0), args.read_options(1)],
        args.allow_truncated,
        args.agreed.identity_bytes.is_none(),
    );
    // The methods take only the window both points captured (the truth takes every record
    // and trims exactly, TruthConfig::trim): from where the later capture starts, less the
    // largest delay of the packets both first batches hold (those in flight when it started),
    // to where the earlier one stops, plus the largest delay matched by then.
    let mut windows = [(0, u64::MAX); 2];
    if !args.no_trim
        && let [Some(sb), Some(rb)] = reader.first_batches(FIRST_PATIENCE)
    {
        windows = lead_in(sb, rb);
        for (k, role) in roles.into_iter().enumerate() {
            pipeline.trim(role, windows[k].0, windows[k].1);
        }
    }
    let mut ends: [Option<End>; 2] = [None, None];
    // Newest timestamp of each capture so far (its records are nearly, not exactly, in order).
    let mut newest: [Option<u64>; 2] = [None, None];
    let mut exact_time = Duration::ZERO;
    let (mut packets, mut captured, mut synopsis) = (0u64, 0u64, 0u64);
    let mut closed = Closed {
        mode,
        names: names.clone(),
        table: IntervalTable::new(
            args.rows,
            built.iter().map(|m| m.name().to_string()).collect(),
        ),
        kept: Vec::new(),
        reported: 0,
    };
    // What one interval's synopses take at least, both points (sizes of empty synopses).
    let fresh_bytes: u64 = built
        .iter()
        .map(|m| {
            (m.new_point(Role::Sender).encoded_len() + m.new_point(Role::Receiver).encoded_len())
                as u64
        })
        .sum();
    while let Some(ev) = reader.next_event() {
        let t = Instant::now();
        let before: Duration = timer.0.iter().sum();
        let per_packet_before = per_packet
            .as_ref()
            .map_or(Duration::ZERO, |p| p.total_time());
        match ev {
            Event::Batch(k, batch, bytes) => {
                bars[k].set_position(bytes);
                newest[k] = newest[k].max(batch.iter().map(|r| r.ts_ns).max());
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
                    let flag = ["--sender-interface", "--receiver-interface"][k];
                    return Err(match e {
                        e if e.is_truncation() => anyhow!(
                            "{name}: {e} (pass --allow-truncated to measure the complete records before it)"
                        ),
                        CaptureError::Io(io) => anyhow!("{name}: cannot read: {io}"),
                        e @ CaptureError::MixedInterfaces { .. } => {
                            anyhow!("{name}: {e} with {flag} N (or --interface N for both)")
                        }
                        e => anyhow!("{name}: {e}"),
                    });
                }
                ends[k] = Some(End { error: None, ..end });
                let mut hook = FlowHook(per_flow.as_mut(), per_packet.as_mut());
                pipeline.finish_point(roles[k], &mut timer, &mut hook);
                // The other point's lead-out: the lock-step hands out no record past this
                // capture's end before the end itself, so the window is set before the methods
                // see any record it leaves out; its margin is the largest delay known, as the
                // truth's (TruthConfig::trim).
                if !args.no_trim
                    && let Some(last) = newest[k]
                {
                    let d = pipeline.truth().map_or(0, |t| t.delay_bound());
                    let w = &mut windows[1 - k];
                    w.1 = w.1.min(last.saturating_add(d));
                    pipeline.trim(roles[1 - k], w.0, w.1);
                }
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
            synopsis += o
                .estimates
                .iter()
                .flatten()
                .flatten()
                .map(|e| e.bytes)
                .sum::<u64>();
            take_outcome(o, iv, &mut results, &mut exact, &mut closed, out)?;
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
            return Err(crate::input::no_ip_packets(&sources[k].name(), &e.stats));
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
        take_outcome(o, iv, &mut results, &mut exact, &mut closed, out)?;
    }
    let mut stream = stream.expect("compare runs the truth");
    if let Some(d) = delays.as_mut() {
        d.finish()?;
    }
    if let Some(pp) = per_packet.as_mut() {
        pp.finish()?;
    }
    exact_time += t.elapsed();
    if mode == Mode::Text {
        closed.table.finish(out)?;
    }
    if stream.received == 0 {
        bail!(
            "no packet of {} appears in {} within the {} horizon ({} distinct packets at S, {} at R, {} later than the horizon{}): these are not captures of the same traffic, or they were taken with different identity seeds{}",
            sources[0].name(),
            sources[1].name(),
            format_ns(stream.horizon_ns as f64),
            stream.sent,
            stream.unexpected,
            stream.late,
            if stream.trimmed != [0, 0] {
                format!(
                    ", {} at S and {} at R while the other point was not capturing",
                    stream.trimmed[0], stream.trimmed[1]
                )
            } else {
                String::new()
            },
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
    let checks = report::checks::compare(
        [&s_end.stats, &r_end.stats],
        &points,
        &stream,
        !args.no_trim,
        args.agreed.identity_bytes,
    );
    for (name, status, summary) in checks.lines() {
        if status == Status::Warning {
            eprintln!("owl: warning: {name}: {summary}");
        }
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
        intervals: Vec::new(),
        flows: std::mem::take(&mut stream.flows),
        lost_ids: std::mem::take(&mut stream.lost_ids),
        unexpected_ids: std::mem::take(&mut stream.unexpected_ids),
    };
    if let Some(dir) = &args.unmatched {
        write_unmatched(dir, args, s_end.stats.identity_bytes, &truth)?;
    }
    exact.time = exact_time;
    for (m, time) in results.iter_mut().zip(&timer.0) {
        // a per-packet method's answer to the per-packet query is its work too
        m.time = *time
            + per_packet
                .as_ref()
                .map_or(Duration::ZERO, |p| p.time_of(&m.name));
    }
    let mut reports = Vec::new();
    let mut results = results.iter();
    for &n in &names {
        let (m, e) = if n == EXACT {
            (&exact, exact_overall(&exact, &truth, iv))
        } else {
            let m = results.next().expect("one result per built method");
            let mut e = m.combiner.overall();
            if m.combiner.parts() > 1 {
                e.notes = m.notes.summary(m.combiner.parts());
            }
            (m, e)
        };
        let per_packet = per_packet
            .as_ref()
            .and_then(|pp| pp.report(&m.name, e.bytes, &truth));
        let mut r = MethodReport::new(&m.name, e, truth.in_interval);
        if let Some(pp) = per_packet {
            // the quantiles of the delays it gave, when its estimate has none of its own
            if r.estimate.quantiles.is_none() {
                r.estimate.quantiles = pp.quantiles();
            }
            r.per_packet = Some(pp);
        }
        r.run = Some(MethodRun {
            time_s: m.time.as_secs_f64(),
            error: m.error.clone(),
            samples_are: methods::samples_meaning(&m.name),
        });
        reports.push(r);
    }
    if closed.kept.len() > 10_000 {
        eprintln!(
            "owl: note: --json held all {} intervals in memory to print one document; --jsonl streams them as they close",
            closed.kept.len()
        );
    }
    let flows_limit = match mode {
        Mode::Text => Some(args.top.unwrap_or(TEXT_TOP)),
        _ => args.top,
    };
    Ok(CompareReport {
        owl_version: env!("CARGO_PKG_VERSION"),
        sender: CaptureReport::new(
            args.sender.display().to_string(),
            s_end.stats,
            &points[0],
            s_end.truncated,
        ),
        receiver: CaptureReport::new(
            args.receiver.display().to_string(),
            r_end.stats,
            &points[1],
            r_end.truncated,
        ),
        checks,
        horizon_ns: stream.horizon_ns,
        interval_ns: iv.length_ns,
        origin_ns: iv.origin_ns,
        seed: args.agreed.seed,
        identity_seed: args.agreed.identity_seed,
        memory: args.agreed.memory,
        truth: TruthReport::new(&truth, &stream),
        methods: reports,
        intervals: (mode == Mode::Json && !iv.is_whole()).then_some(closed.kept),
        flows: args
            .per_flow
            .then(|| super::perflow::flows_report(&truth, per_flow.as_ref(), flows_limit)),
        flow_error_bins: per_flow
            .as_ref()
            .map(|pf| super::perflow::bins_report(&truth, pf)),
        interval_count: closed.reported,
        flows_total: truth.flows.len(),
        flow_errors: per_flow
            .iter()
            .flat_map(|pf| &pf.methods)
            .filter_map(|m| Some((m.name.clone(), m.error.clone()?)))
            .collect(),
        flow_notes: per_flow
            .iter()
            .flat_map(|pf| {
                pf.methods.iter().filter_map(|m| {
                    let (n, far) = m.unusable();
                    (n > 0).then(|| {
                        (
                            m.name.clone(),
                            format!(
                                "{n} flows without an estimate: every interval mean it gave them was beyond the {} horizon (down to {}), which no delay is",
                                format_ns(pf.horizon_ns as f64),
                                format_ns(far)
                            ),
                        )
                    })
                })
            })
            .collect(),
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

/// What becomes of each closed interval: a text row, a JSON line, or an entry kept for the
/// single JSON document.
struct Closed {
    mode: Mode,
    /// `--methods`, in order, the exact one included where listed.
    names: Vec<&'static str>,
    table: IntervalTable,
    kept: Vec<IntervalReport>,
    /// Intervals reported.
    reported: u64,
}

/// File one closed interval: per-method totals, and the row, line or document entry.
fn take_outcome(
    o: IntervalOutcome,
    iv: Intervals,
    results: &mut [MethodResult],
    exact: &mut MethodResult,
    closed: &mut Closed,
    out: &mut impl Write,
) -> Result<()> {
    // an interval wholly outside the window both points captured: nothing to measure
    if let Some(t) = &o.truth
        && t.trimmed > 0
        && t.sent == 0
        && t.received == 0
    {
        return Ok(());
    }
    closed.reported += 1;
    if let Some(t) = &o.truth
        && !iv.is_whole()
    {
        exact.combiner.add(&exact_estimate(t));
    }
    let mut ests: Vec<Option<Estimate>> = Vec::new();
    for (m, e) in results.iter_mut().zip(o.estimates) {
        match e {
            Some(Ok(e)) => {
                m.combiner.add(&e);
                m.notes.add(o.index, &e.notes);
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
    let truth = o.truth.unwrap_or_else(|| IntervalTruth {
        index: o.index,
        start_ns: o.start_ns,
        ..Default::default()
    });
    let mut ests = ests.into_iter();
    let mut named: Vec<(&str, Estimate)> = Vec::new();
    for &n in &closed.names {
        if n == EXACT {
            named.push((EXACT, exact_estimate(&truth)));
        } else if let Some(Some(e)) = ests.next() {
            named.push((n, e));
        }
    }
    let report = IntervalReport::new(&truth, named);
    match closed.mode {
        Mode::Text => closed.table.row(out, &report)?,
        Mode::Jsonl => {
            serde_json::to_writer(
                &mut *out,
                &Line {
                    kind: "interval",
                    body: &report,
                },
            )?;
            writeln!(out)?;
        }
        Mode::Json => closed.kept.push(report),
    }
    Ok(())
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

/// Write the packets only one point saw, identified as they were measured: `identity_bytes`
/// is the limit both readers took.
fn write_unmatched(
    dir: &Path,
    args: &CompareArgs,
    identity_bytes: Option<u32>,
    truth: &Truth,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    for (k, (src, ids, name)) in [
        (&args.sender, &truth.lost_ids, "sender-only.pcap"),
        (&args.receiver, &truth.unexpected_ids, "receiver-only.pcap"),
    ]
    .into_iter()
    .enumerate()
    {
        let set: hashbrown::HashSet<u64> = ids.iter().copied().collect();
        let dst = dir.join(name);
        let options = ReadOptions {
            identity_bytes,
            ..args.read_options(k)
        };
        let x = owl_trace::records::extract_with(src, &dst, &options, &set)
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
