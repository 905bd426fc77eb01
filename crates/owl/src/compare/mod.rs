//! A two-capture comparison: the exact truth and every method on the same capture pair.
//!
//! [`compare`] reads both captures at once in lock-step ([`LockStep`]: the one whose packets
//! are older first, so memory follows the traffic in flight), trims a lead-in or lead-out only
//! one capture has, feeds every record to the [`PairPipeline`] (each method's sender or
//! receiver synopsis, and the exact [`StreamingTruth`](owl_core::pipeline::truth::StreamingTruth))
//! and files each closed interval's outcome. Per-flow ([`perflow`]) and per-packet
//! ([`perpacket`]) queries ride on each closed pair. It returns one [`CompareReport`]; what
//! streams while the captures are read (interval reports, the truth's matched packets,
//! per-packet CSV, the packets only one point saw, notices) goes to the [`CompareSinks`] the
//! caller passes. `owl compare` and `owl demo` are this call and a renderer.

pub mod perclass;
pub mod perflow;
pub mod perpacket;
mod select;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use owl_core::PacketRecord;
use owl_core::cut::{Cut, CutTally};
use owl_core::exact::{IntervalTruth, MatchedPacket, Truth};
use owl_core::interval::Intervals;
use owl_core::method::{Combiner, Estimate, Method, PointSynopsis, Role};
use owl_core::pipeline::{
    IntervalOutcome, PairHook, PairPipeline, PipelineConfig, Timer, TruthConfig,
};
use owl_core::units::{format_bytes, format_ns};
use owl_trace::capture::CaptureError;
use owl_trace::lockstep::{End, Event, LockStep, Source};
use owl_trace::records::ReadOptions;

use crate::methods::{self, EXACT};
use crate::progress;
use crate::report::{
    self, CaptureReport, CompareReport, IntervalReport, MethodReport, MethodRun, NoteTally, Status,
    TruthReport,
};
use perclass::PerClass;
use perflow::PerFlow;
use perpacket::PerPacket;

/// What to compare and how (`owl compare`'s flags, parsed).
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// Capture taken at the sender point S (a path, or `-` for standard input).
    pub sender: PathBuf,
    /// Capture taken at the receiver point R.
    pub receiver: PathBuf,
    /// Methods in report order, the exact one included where listed
    /// ([`methods::parse_list`]).
    pub methods: Vec<&'static str>,
    /// Seed and `--memory` budget the methods are built with.
    pub build: methods::Options,
    /// `--method-config` fields, each of a method among `methods`.
    pub overrides: methods::Overrides,
    pub intervals: Intervals,
    /// How both points cut their streams into intervals (`--cut`).
    pub cut: Cut,
    /// How S's and R's captures are read (identity seed and bytes, interface). Without
    /// `identity_bytes` the two readers agree on the IP bytes both captures keep.
    pub read: [ReadOptions; 2],
    /// Largest one-way delay the truth waits for (`--horizon`).
    pub horizon_ns: u64,
    /// Timestamp disorder tolerated within one capture (`--disorder`).
    pub disorder_ns: u64,
    /// Whole-run delays kept for exact quantiles (`--exact-quantiles`).
    pub exact_quantiles: usize,
    /// Per-flow truth and per-flow methods (`--per-flow`).
    pub per_flow: bool,
    /// Per-class quantiles (`--per-class`).
    pub per_class: bool,
    /// Flows listed in the report, the largest first (`None`: every one).
    pub flows_limit: Option<usize>,
    /// Trim a lead-in or lead-out only one capture has (not `--no-trim`).
    pub trim: bool,
    pub allow_truncated: bool,
    pub allow_negative_delay: bool,
    pub allow_short_intervals: bool,
    /// Keep every interval's report in [`CompareReport::intervals`] (the single JSON document).
    pub keep_intervals: bool,
    /// Report R's clock against S's, or also remove its skew and steps (`--clock`).
    pub clock: ClockMode,
    /// Measure only the packets this selects, at both points (`--filter`); the reverse
    /// direction (the filter's mirror image) gives the clocks' offset.
    pub filter: Option<owl_trace::filter::Filter>,
}

/// What `owl compare` does with R's clock (`--clock`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClockMode {
    /// Fit R's clock against S's from the floor of the delays ([`owl_core::skew`]) and report
    /// it in `checks.clock`.
    #[default]
    Report,
    /// Fit it in a first pass over both captures, then run the comparison with R's
    /// timestamps corrected ([`owl_core::skew::ClockCorrection`]): the truth and every method
    /// see R's clock as it stood at the first matched packet, without skew or steps.
    Correct,
}

/// The first pass of `--clock correct`: read both captures and fit R's clock against S's
/// from the floor of the matched delays (the streaming truth alone, with the same horizon,
/// disorder and trimming). `None` when too few packets matched to fit; read errors are left
/// to the main pass, which reports them.
fn fit_clock(opts: &CompareOptions, sources: &[Source; 2]) -> Option<owl_core::skew::SkewFit> {
    let cfg = TruthConfig {
        disorder_ns: opts.disorder_ns,
        trim: opts.trim,
        clock_fit: true,
        exact_quantiles: 0,
        ..TruthConfig::new(Intervals::WHOLE, opts.horizon_ns)
    };
    let mut truth = owl_core::pipeline::StreamingTruth::new(cfg);
    let mut reader = LockStep::start_with(
        sources.clone(),
        opts.read,
        opts.allow_truncated,
        opts.read[0].identity_bytes.is_none(),
    );
    while let Some(ev) = reader.next_event() {
        match ev {
            Event::Batch(k, mut b, _) => {
                if let Some(f) = &opts.filter {
                    b.retain(|r| f.matches(&r.flow));
                }
                if k == 0 {
                    truth.push_sender(&b);
                } else {
                    truth.push_receiver(&b);
                }
            }
            Event::End(k, end) => {
                if end.error.is_some() {
                    return None;
                }
                if k == 0 {
                    truth.finish_sender();
                } else {
                    truth.finish_receiver();
                }
            }
        }
    }
    truth.finish().0.clock
}

/// Where each closed interval's report goes as it closes, in index order (when T > 0).
pub trait IntervalSink {
    fn interval(&mut self, report: &IntervalReport) -> Result<()>;
    /// Every interval is in (called before the run's checks, which may refuse it).
    fn end(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Where a CSV output goes: a file created once the methods are built, or a writer.
pub enum CsvOut<'w> {
    File(PathBuf),
    /// A writer, and the name its errors give.
    Writer(String, &'w mut dyn Write),
}

/// An open CSV output.
pub(crate) struct Csv<'w> {
    pub(crate) name: String,
    pub(crate) w: BufWriter<Box<dyn Write + 'w>>,
}

impl<'w> CsvOut<'w> {
    pub(crate) fn open(self) -> Result<Csv<'w>> {
        let (name, w): (String, Box<dyn Write + 'w>) = match self {
            CsvOut::File(path) => {
                let f = std::fs::File::create(&path)
                    .with_context(|| format!("{}: cannot create", path.display()))?;
                (path.display().to_string(), Box::new(f))
            }
            CsvOut::Writer(name, w) => (name, Box::new(w)),
        };
        Ok(Csv {
            name,
            w: BufWriter::new(w),
        })
    }
}

impl Csv<'_> {
    pub(crate) fn line(&mut self, line: std::fmt::Arguments) -> Result<()> {
        writeln!(self.w, "{line}").with_context(|| format!("{}: cannot write", self.name))
    }

    pub(crate) fn flush(&mut self) -> Result<()> {
        self.w
            .flush()
            .with_context(|| format!("{}: cannot write", self.name))
    }
}

/// Something the user should know while a comparison runs; the report holds the same.
pub enum Notice {
    Warning(String),
    Note(String),
    /// `packets` written to `path` (`unmatched`).
    Wrote {
        path: PathBuf,
        packets: u64,
    },
}

/// The streaming outputs of a comparison; each is optional.
#[derive(Default)]
pub struct CompareSinks<'a> {
    /// Each closed interval's report (`--interval T > 0`).
    pub intervals: Option<&'a mut dyn IntervalSink>,
    /// Every matched packet's delay, as the truth resolves it (`--delays`, CSV:
    /// `id,sender_ns,receiver_ns,delay_ns,proto,src,sport,dst,dport`).
    pub delays: Option<CsvOut<'a>>,
    /// Every packet of each per-packet method (`--per-packet`, CSV, see [`perpacket`]).
    pub per_packet: Option<CsvOut<'a>>,
    /// A directory for the packets only S saw and only R saw (`--unmatched`):
    /// `sender-only.pcap`, `receiver-only.pcap`.
    pub unmatched: Option<PathBuf>,
    /// Reading progress bars (shown only when standard error is a terminal).
    pub progress: bool,
    /// Warnings and notes as they arise.
    pub notices: Option<&'a mut dyn FnMut(Notice)>,
}

impl CompareSinks<'_> {
    fn notice(&mut self, n: Notice) {
        if let Some(f) = self.notices.as_mut() {
            f(n);
        }
    }
}

/// How long compare waits for each capture's first batch to learn where it starts.
const FIRST_PATIENCE: Duration = Duration::from_secs(2);

/// Cut R's lead-out at S's last timestamp plus the largest delay known now, counting R's
/// records held since S's end (whose sender packets the truth still holds), and hand those
/// records to the pipeline.
fn release_lead_out(
    held: &mut Option<(u64, Vec<Vec<PacketRecord>>)>,
    pipeline: &mut PairPipeline,
    windows: &mut [(u64, u64); 2],
    timer: &mut dyn Timer,
    hook: &mut FlowHook,
) {
    let Some((last, batches)) = held.take() else {
        return;
    };
    let mut d = 0;
    if let Some(t) = pipeline.truth() {
        d = t.delay_bound();
        for r in batches.iter().flatten() {
            if let Some(sent) = t.sender_ts(r.id) {
                d = d.max(r.ts_ns.saturating_sub(sent));
            }
        }
    }
    let w = &mut windows[1];
    w.1 = w.1.min(last.saturating_add(d));
    pipeline.trim(Role::Receiver, w.0, w.1);
    for b in batches {
        pipeline.push(Role::Receiver, &b, timer, hook);
    }
}

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

/// Charges method work to wall-clock time per method, summed over the threads the methods
/// run on (a method's time is its own, however many run beside it).
struct WallTimer {
    per_method: Vec<AtomicU64>,
    /// Wall time of the methods' sections (their work, however many threads ran it).
    sections: AtomicU64,
    /// Time of the exact truth's work on the batches (beside the methods').
    truth: AtomicU64,
}

impl WallTimer {
    fn new(methods: usize) -> WallTimer {
        WallTimer {
            per_method: (0..methods).map(|_| AtomicU64::new(0)).collect(),
            sections: AtomicU64::new(0),
            truth: AtomicU64::new(0),
        }
    }

    fn spent(&self, k: usize) -> Duration {
        Duration::from_nanos(self.per_method[k].load(Ordering::Relaxed))
    }

    fn truth_time(&self) -> Duration {
        Duration::from_nanos(self.truth.load(Ordering::Relaxed))
    }
}

impl Timer for WallTimer {
    fn charge(&self, k: usize, f: &mut dyn FnMut()) {
        let t = Instant::now();
        f();
        self.per_method[k].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn section(&self, f: &mut dyn FnMut()) {
        let t = Instant::now();
        f();
        self.sections
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn truth(&self, f: &mut dyn FnMut()) {
        let t = Instant::now();
        f();
        self.truth
            .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// Per-flow, per-packet and per-class queries on each closed pair, before the estimators
/// consume it.
struct FlowHook<'h, 'w> {
    per_flow: Option<&'h mut PerFlow>,
    per_packet: Option<&'h mut PerPacket<'w>>,
    per_class: Option<&'h mut PerClass>,
    /// Time each method spends answering the per-packet and per-class queries, by index
    /// (added to its time in the report, taken from the truth's).
    spent: &'h mut [Duration],
}

impl PairHook for FlowHook<'_, '_> {
    fn closed_pair(
        &mut self,
        index: u64,
        methods: &[Arc<dyn Method>],
        sender: &[Box<dyn PointSynopsis>],
        receiver: &[Box<dyn PointSynopsis>],
    ) {
        if let Some(pf) = self.per_flow.as_deref_mut() {
            for (k, m) in methods.iter().enumerate() {
                pf.add_interval(&**m, &*sender[k], &*receiver[k], index);
            }
            pf.presence.forget(index);
        }
        if let Some(pp) = self.per_packet.as_deref_mut() {
            pp.add_interval(index, methods, sender, receiver, self.spent);
        }
        if let Some(pc) = self.per_class.as_deref_mut() {
            pc.add_interval(index, methods, sender, receiver, self.spent);
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
    /// Intervals whose figures the method withheld (their estimate's reason), the first few
    /// listed, with the first reason.
    withheld: Withheld,
}

/// Intervals in which a method withheld figures it normally gives, and why (`owl compare`,
/// `owl estimate`).
#[derive(Default)]
pub struct Withheld {
    pub count: u64,
    /// The first few intervals' starts, ns since the Unix epoch.
    pub listed: Vec<u64>,
    pub first: Option<String>,
}

impl Withheld {
    /// Intervals listed by their start.
    const LISTED: usize = 5;

    /// An interval, starting at `start_ns`, whose figures were withheld for `reason`.
    pub fn add(&mut self, start_ns: u64, reason: &str) {
        self.count += 1;
        if self.listed.len() < Self::LISTED {
            self.listed.push(start_ns);
        }
        self.first.get_or_insert_with(|| reason.to_string());
    }

    /// The warning for `method` over `intervals`, when it withheld anything: the intervals
    /// named by their start in UTC.
    pub fn warning(&self, method: &str, intervals: u64) -> Option<String> {
        let first = self.first.as_ref()?;
        if intervals <= 1 {
            // the one interval is the whole run: no start to name
            return Some(format!("{method}: figures withheld: {first}"));
        }
        let listed = self
            .listed
            .iter()
            .map(|&ns| crate::report::checks::format_utc(ns))
            .collect::<Vec<_>>()
            .join(", ");
        Some(format!(
            "{method}: figures withheld in {} of {intervals} intervals (starting {listed}{} UTC); the first: {first}",
            self.count,
            if self.count as usize > self.listed.len() {
                ", …"
            } else {
                ""
            }
        ))
    }
}

impl MethodResult {
    fn new(name: &str) -> MethodResult {
        MethodResult {
            name: name.to_string(),
            time: Duration::ZERO,
            error: None,
            combiner: Combiner::default(),
            notes: NoteTally::default(),
            withheld: Withheld::default(),
        }
    }
}

/// Intervals opened before the per-interval size guard judges (see [`check_sizes`]).
const GUARD_AFTER: u64 = 16;
/// Synopsis bytes per captured byte above which an interval is refused as too short.
const GUARD_RATIO: u64 = 100;

/// Refuse intervals so short that the synopses dwarf the traffic they measure: fewer than two
/// packets an interval, or synopsis bytes above [`GUARD_RATIO`] times the captured IP bytes.
/// Judged on the intervals the sender point has opened (not those reported, which come a
/// horizon later), so a run that would hold thousands of synopses stops after a few.
fn check_sizes(
    opts: &CompareOptions,
    intervals: u64,
    packets: u64,
    synopsis: u64,
    captured: u64,
) -> Result<()> {
    if opts.allow_short_intervals || intervals < GUARD_AFTER || synopsis == 0 {
        return Ok(());
    }
    if intervals * 2 > packets {
        bail!(
            "--interval {} is about the packet spacing: {intervals} intervals for {packets} sender packets so far, so no synopsis sees enough packets to estimate anything; use a longer --interval, or --methods exact (or --allow-short-intervals)",
            format_ns(opts.intervals.length_ns as f64)
        );
    }
    if synopsis > GUARD_RATIO * captured {
        bail!(
            "--interval {} is so short that the synopses would be {}x the traffic they measure ({} of synopses for {} of IP packets over {intervals} intervals); use a longer --interval, fewer --methods or a --memory budget (or --allow-short-intervals)",
            format_ns(opts.intervals.length_ns as f64),
            synopsis / captured.max(1),
            format_bytes(synopsis),
            format_bytes(captured)
        );
    }
    Ok(())
}

/// What the run has filed of its closed intervals.
struct Filed {
    results: Vec<MethodResult>,
    exact: MethodResult,
    /// Interval reports kept for the single JSON document.
    kept: Vec<IntervalReport>,
    /// Intervals reported.
    reported: u64,
    /// How R's side of each interval was cut.
    cuts: CutTally,
    /// Packets the truth saw R put in a later interval than S.
    left: u64,
}

/// Compare the captures `opts` names: the exact truth and every method, interval by interval.
/// Refuses (one error) unreadable captures, captures with no IP packets, captures that share
/// no packet, S and R swapped (most delays negative) and intervals the synopses would dwarf.
pub fn compare(opts: &CompareOptions, sinks: &mut CompareSinks) -> Result<CompareReport> {
    let names = &opts.methods;
    let iv = opts.intervals;
    let mut built: Vec<Arc<dyn Method>> = Vec::new();
    for &n in names {
        if n != EXACT {
            built.push(Arc::from(methods::build_with_horizon(
                n,
                &opts.build,
                &opts.overrides,
                opts.horizon_ns,
            )?));
        }
    }
    let mut filed = Filed {
        results: built.iter().map(|m| MethodResult::new(m.name())).collect(),
        exact: MethodResult::new(EXACT),
        kept: Vec::new(),
        reported: 0,
        cuts: CutTally::default(),
        left: 0,
    };
    let mut timer = WallTimer::new(built.len());
    let mut hook_time = vec![Duration::ZERO; built.len()];
    let truth_cfg = TruthConfig {
        per_flow: opts.per_flow,
        keep_unmatched: sinks.unmatched.is_some(),
        keep_matched: sinks.delays.is_some() || opts.per_class,
        exact_quantiles: opts.exact_quantiles,
        disorder_ns: opts.disorder_ns,
        trim: opts.trim,
        clock_fit: true,
        ..TruthConfig::new(iv, opts.horizon_ns)
    };
    let mut pipeline = PairPipeline::new(
        PipelineConfig {
            intervals: iv,
            disorder_ns: opts.disorder_ns,
        },
        built.clone(),
        Some(truth_cfg),
    )
    .with_cut(opts.cut);
    let mut per_flow = opts.per_flow.then(|| PerFlow::new(iv, opts.horizon_ns));
    let mut per_packet = PerPacket::new(sinks.per_packet.take(), &built, opts.exact_quantiles)?;
    let mut per_class = opts
        .per_class
        .then(|| PerClass::new(iv, &opts.cut, &built, opts.exact_quantiles));
    let mut delays = match sinks.delays.take() {
        Some(out) => {
            let mut csv = out.open()?;
            csv.line(format_args!(
                "id,sender_ns,receiver_ns,delay_ns,proto,src,sport,dst,dport"
            ))?;
            Some(csv)
        }
        None => None,
    };
    let sources = [Source::parse(&opts.sender), Source::parse(&opts.receiver)];
    if sources[0] == Source::Stdin && sources[1] == Source::Stdin {
        bail!("only one of SENDER and RECEIVER can be standard input (-)");
    }
    if same_file(&opts.sender, &opts.receiver) {
        bail!(
            "{} and {} are the same file: S and R must be captures taken at two points (every delay would be 0)",
            opts.sender.display(),
            opts.receiver.display()
        );
    }
    let clock_fit = match opts.clock {
        ClockMode::Report => None,
        ClockMode::Correct => {
            if let Some(k) = (0..2).find(|&k| sources[k].size().is_none()) {
                bail!(
                    "--clock correct reads both captures twice (to fit R's clock, then to measure): {} is not a regular file",
                    sources[k].name()
                );
            }
            fit_clock(opts, &sources)
        }
    };
    let bar = |k: usize, msg: &str| match sinks.progress {
        true => progress::bar(sources[k].size().unwrap_or(0), msg, true),
        false => indicatif::ProgressBar::hidden(),
    };
    let bars = [bar(0, "reading sender"), bar(1, "reading receiver")];
    let roles = [Role::Sender, Role::Receiver];
    let mut reader = LockStep::start_with(
        sources.clone(),
        opts.read,
        opts.allow_truncated,
        opts.read[0].identity_bytes.is_none(),
    );
    if let Some(fit) = &clock_fit {
        let mut c = fit.correction();
        if !c.is_identity() {
            reader.map_side(
                1,
                Box::new(move |b: &mut [PacketRecord]| {
                    for r in b {
                        r.ts_ns = c.correct(r.ts_ns);
                    }
                }),
            );
        }
    }
    // The methods take only the window both points captured (the truth takes every record
    // and trims exactly, TruthConfig::trim): from where the later capture starts, less the
    // largest delay of the packets both first batches hold (those in flight when it started),
    // to where the earlier one stops, plus the largest delay matched by then.
    let mut windows = [(0, u64::MAX); 2];
    if opts.trim
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
    // What one interval's synopses take at least, both points (sizes of empty synopses).
    let fresh_bytes: u64 = built
        .iter()
        .map(|m| {
            (m.new_point(Role::Sender).encoded_len() + m.new_point(Role::Receiver).encoded_len())
                as u64
        })
        .sum();
    // When S's capture ends first, R's lead-out is cut at S's last timestamp plus the largest
    // delay of S's packets still in flight, which R's records yet to come tell: they are held
    // (at most a horizon of R's traffic) until R passes S's end by the horizon or ends, the
    // margin is taken from those whose sender packet the truth holds, and they go on. (Cut at
    // once, with the delays known then, a capture read in one batch lost R's last packets to
    // the methods, not to the truth: 72 of 200 "lost" by RDA where the truth lost none.)
    let mut held: Option<(u64, Vec<Vec<PacketRecord>>)> = None;
    let mut selection = opts
        .filter
        .clone()
        .map(|f| select::Selection::new(f, opts.horizon_ns, opts.disorder_ns));
    while let Some(ev) = reader.next_event() {
        match ev {
            Event::Batch(k, mut batch, bytes) => {
                bars[k].set_position(bytes);
                if let Some(s) = selection.as_mut() {
                    s.select(k, &mut batch);
                }
                newest[k] = newest[k].max(batch.iter().map(|r| r.ts_ns).max());
                if k == 0 {
                    packets += batch.len() as u64;
                    captured += batch.iter().map(|r| r.len as u64).sum::<u64>();
                    if let Some(pf) = per_flow.as_mut() {
                        pf.presence.observe(&batch);
                    }
                } else if let Some(pc) = per_class.as_mut() {
                    pc.observe_receiver(&batch);
                }
                let mut hook = FlowHook {
                    per_flow: per_flow.as_mut(),
                    per_packet: per_packet.as_mut(),
                    per_class: per_class.as_mut(),
                    spent: &mut hook_time,
                };
                match held.as_mut() {
                    Some((last, h)) if k == 1 => {
                        h.push(batch);
                        let last = *last;
                        if newest[1].is_some_and(|n| n > last.saturating_add(opts.horizon_ns)) {
                            release_lead_out(
                                &mut held,
                                &mut pipeline,
                                &mut windows,
                                &mut timer,
                                &mut hook,
                            );
                        }
                    }
                    _ => pipeline.push(roles[k], &batch, &mut timer, &mut hook),
                }
            }
            Event::End(k, end) => {
                bars[k].finish_and_clear();
                if let Some(e) = end.error {
                    let name = sources[k].name();
                    let flag = ["--sender-interface", "--receiver-interface"][k];
                    return Err(match e {
                        e if e.is_truncation() && !opts.allow_truncated => {
                            crate::input::ends_early(&name, &e, end.stats.ip_packets)
                        }
                        CaptureError::Io(io) => anyhow!("{name}: cannot read: {io}"),
                        e @ CaptureError::MixedInterfaces { .. } => {
                            anyhow!("{name}: {e} with {flag} N (or --interface N for both)")
                        }
                        e => anyhow!("{name}: {e}"),
                    });
                }
                ends[k] = Some(End { error: None, ..end });
                if let Some(s) = selection.as_mut() {
                    s.end(k);
                }
                let mut hook = FlowHook {
                    per_flow: per_flow.as_mut(),
                    per_packet: per_packet.as_mut(),
                    per_class: per_class.as_mut(),
                    spent: &mut hook_time,
                };
                if k == 1 {
                    // R's records held for S's end go on first
                    release_lead_out(
                        &mut held,
                        &mut pipeline,
                        &mut windows,
                        &mut timer,
                        &mut hook,
                    );
                }
                pipeline.finish_point(roles[k], &mut timer, &mut hook);
                // The other point's lead-out: the lock-step hands out no record past this
                // capture's end before the end itself, so the window is set before the methods
                // see any record it leaves out; its margin is the largest delay known, as the
                // truth's (TruthConfig::trim). R's, after S's end, once R's next records tell
                // the delays of S's last packets (`held`).
                if opts.trim
                    && k == 0
                    && ends[1].is_none()
                    && pipeline.truth().is_some()
                    && let Some(last) = newest[k]
                {
                    held = Some((last, Vec::new()));
                } else if opts.trim
                    && let Some(last) = newest[k]
                {
                    let d = pipeline.truth().map_or(0, |t| t.delay_bound());
                    let w = &mut windows[1 - k];
                    w.1 = w.1.min(last.saturating_add(d));
                    pipeline.trim(roles[1 - k], w.0, w.1);
                }
            }
        }
        // the matched packets the truth keeps for them (keep_matched), once each: the truth's
        // work too
        let t = Instant::now();
        if let Some(tr) = pipeline.truth_mut() {
            let matched = tr.drain_matched().inspect(|m| {
                if let Some(pc) = per_class.as_mut() {
                    pc.add_matched(m)
                }
            });
            match delays.as_mut() {
                Some(d) => write_delays(d, matched)?,
                None => matched.for_each(drop),
            }
        }
        exact_time += t.elapsed();
        for o in pipeline.drain() {
            synopsis += o
                .estimates
                .iter()
                .flatten()
                .flatten()
                .map(|e| e.bytes)
                .sum::<u64>();
            take_outcome(o, opts, &mut filed, sinks)?;
        }
        let opened = pipeline.point(Role::Sender).counters().intervals;
        check_sizes(
            opts,
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
            return Err(crate::input::no_ip_packets(
                &sources[k].name(),
                &e.stats,
                e.truncated.as_deref(),
            ));
        }
        if let Some(t) = &e.truncated {
            sinks.notice(Notice::Warning(format!(
                "{}: {t}; measuring the {} complete packets before it",
                sources[k].name(),
                e.stats.ip_packets
            )));
        }
    }
    let t = Instant::now();
    let (rest, stream, points) = pipeline.finish();
    for o in rest {
        take_outcome(o, opts, &mut filed, sinks)?;
    }
    let mut stream = stream.expect("compare runs the truth");
    let selected = selection.map(|s| (s.filter.to_string(), s.finish()));
    let filter_input = selected
        .as_ref()
        .map(|(expression, s)| report::checks::FilterInput {
            expression,
            kept: s.kept,
            left_out: s.left_out,
            reverse_matched: s.reverse_matched,
            reverse_min_ns: s.reverse_min_ns,
        });
    if let Some(d) = delays.as_mut() {
        d.flush()?;
    }
    if let Some(pp) = per_packet.as_mut() {
        pp.finish()?;
    }
    exact_time += t.elapsed();
    if let Some(s) = sinks.intervals.as_mut() {
        s.end()?;
    }
    if let Some((expression, s)) = &selected
        && (s.kept[0] == 0 || s.kept[1] == 0)
    {
        bail!(
            "--filter '{expression}' kept {} of the {} packets at S and {} of the {} at R: nothing to measure (it selects by address, port and protocol; the captures' traffic is in their checks: owl compare without --filter)",
            s.kept[0],
            s.kept[0] + s.left_out[0],
            s.kept[1],
            s.kept[1] + s.left_out[1]
        );
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
    // (with both directions in the captures, the R→S packets' delays are negative: the
    // directions check says so, and --filter keeps one)
    if stream.negative_delays * 2 > stream.received
        && !opts.allow_negative_delay
        && stream.directions.host_pairs_both_ways == 0
    {
        bail!(
            "{} of {} matched packets reach the receiver before they leave the sender (median delay {}): are SENDER and RECEIVER swapped? (pass --allow-negative-delay if R's clock is known to lag S's)",
            stream.negative_delays,
            stream.received,
            format_ns(stream.delay.map(|d| d.p50_ns as f64).unwrap_or(0.0))
        );
    }
    let cuts =
        (!iv.is_whole()).then(|| report::checks::cuts(&opts.cut, &filed.cuts, Some(filed.left)));
    let checks = report::checks::compare(
        [&s_end.stats, &r_end.stats],
        &points,
        &stream,
        opts.trim,
        opts.read[0].identity_bytes,
        cuts,
        report::checks::ClockInput {
            fit: clock_fit.as_ref(),
            correct: opts.clock == ClockMode::Correct,
            filter: filter_input.as_ref(),
        },
    );
    for (name, status, summary) in checks.lines() {
        if status == Status::Warning {
            sinks.notice(Notice::Warning(format!("{name}: {summary}")));
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
    if let Some(dir) = sinks.unmatched.clone() {
        write_unmatched(&dir, opts, s_end.stats.identity_bytes, &truth, sinks)?;
    }
    let Filed {
        mut results,
        mut exact,
        kept,
        reported,
        ..
    } = filed;
    exact.time = exact_time + timer.truth_time();
    for (k, (m, hook)) in results.iter_mut().zip(&hook_time).enumerate() {
        // a method's answers to the per-packet and per-class queries are its work too
        m.time = timer.spent(k) + *hook;
    }
    for m in &results {
        if let Some(w) = m.withheld.warning(&m.name, m.combiner.parts()) {
            sinks.notice(Notice::Warning(w));
        }
    }
    let mut reports = Vec::new();
    let mut results = results.iter();
    for &n in names {
        let (m, e) = if n == EXACT {
            (&exact, exact_overall(&exact, &truth, iv))
        } else {
            let m = results.next().expect("one result per built method");
            let mut e = m.combiner.overall();
            if m.combiner.parts() > 1 {
                // the intervals' notes summarised, then the combination's own
                let mut notes = m.notes.summary(m.combiner.parts());
                notes.append(&mut e.notes);
                e.notes = notes;
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
                r.p99_rel_err = report::p99_rel_err(&r.estimate, truth.in_interval);
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
    let (classes, class_notes) = match per_class.as_mut() {
        Some(pc) => {
            let (c, n) = pc.report();
            (Some(c), n)
        }
        None => (None, Vec::new()),
    };
    if kept.len() > 10_000 {
        sinks.notice(Notice::Note(format!(
            "--json held all {} intervals in memory to print one document; --jsonl streams them as they close",
            kept.len()
        )));
    }
    Ok(CompareReport {
        owl_version: env!("CARGO_PKG_VERSION"),
        sender: CaptureReport::new(
            opts.sender.display().to_string(),
            s_end.stats,
            &points[0],
            s_end.truncated,
        ),
        receiver: CaptureReport::new(
            opts.receiver.display().to_string(),
            r_end.stats,
            &points[1],
            r_end.truncated,
        ),
        checks,
        horizon_ns: stream.horizon_ns,
        interval_ns: iv.length_ns,
        origin_ns: iv.origin_ns,
        cut: opts.cut,
        seed: opts.build.seed,
        identity_seed: opts.read[0].identity_seed,
        memory: opts.build.memory,
        truth: TruthReport::new(&truth, &stream),
        methods: reports,
        intervals: (opts.keep_intervals && !iv.is_whole()).then_some(kept),
        flows: opts
            .per_flow
            .then(|| perflow::flows_report(&truth, per_flow.as_ref(), opts.flows_limit)),
        flow_error_bins: per_flow
            .as_ref()
            .map(|pf| perflow::bins_report(&truth, pf)),
        classes,
        class_notes,
        interval_count: reported,
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

/// File one closed interval: per-method totals, and its report to the interval sink (and
/// kept, with `keep_intervals`).
fn take_outcome(
    o: IntervalOutcome,
    opts: &CompareOptions,
    filed: &mut Filed,
    sinks: &mut CompareSinks,
) -> Result<()> {
    let iv = opts.intervals;
    // an interval wholly outside the window both points captured, or one R's clock opened
    // for packets a delimiter cut put in the interval before: nothing to measure
    if let Some(t) = &o.truth
        && (t.trimmed > 0 || o.packets.is_none())
        && t.sent == 0
        && t.received == 0
        && t.unexpected == 0
    {
        return Ok(());
    }
    filed.reported += 1;
    if let Some(t) = &o.truth
        && !iv.is_whole()
    {
        filed.exact.combiner.add(&exact_estimate(t));
        filed.left += t.left;
    }
    if let Some(c) = &o.cut {
        filed.cuts.add(o.index, c);
    }
    let mut ests: Vec<Option<Estimate>> = Vec::new();
    for (m, e) in filed.results.iter_mut().zip(o.estimates) {
        match e {
            Some(Ok(mut e)) => {
                m.combiner.add(&e);
                m.notes.add(o.index, o.start_ns, &e.notes);
                if let Some(why) = &e.reason {
                    m.notes.add(o.index, o.start_ns, std::slice::from_ref(why));
                    m.withheld.add(o.start_ns, why);
                }
                // merged: an interval's report need not hold its histogram
                e.recovered = None;
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
    for &n in &opts.methods {
        if n == EXACT {
            named.push((EXACT, exact_estimate(&truth)));
        } else if let Some(Some(e)) = ests.next() {
            named.push((n, e));
        }
    }
    let mut report = IntervalReport::new(&truth, named);
    report.cut = o.cut;
    if let Some(s) = sinks.intervals.as_mut() {
        s.interval(&report)?;
    }
    if opts.keep_intervals {
        filed.kept.push(report);
    }
    Ok(())
}

/// Every matched packet's delay, as the truth resolves them (`delays`).
fn write_delays(csv: &mut Csv, matched: impl Iterator<Item = MatchedPacket>) -> Result<()> {
    for m in matched {
        csv.line(format_args!(
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
        ))?;
    }
    Ok(())
}

/// Write the packets only one point saw, identified as they were measured: `identity_bytes`
/// is the limit both readers took.
fn write_unmatched(
    dir: &Path,
    opts: &CompareOptions,
    identity_bytes: Option<u32>,
    truth: &Truth,
    sinks: &mut CompareSinks,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    for (k, (src, ids, name)) in [
        (&opts.sender, &truth.lost_ids, "sender-only.pcap"),
        (&opts.receiver, &truth.unexpected_ids, "receiver-only.pcap"),
    ]
    .into_iter()
    .enumerate()
    {
        let set: hashbrown::HashSet<u64> = ids.iter().copied().collect();
        let dst = dir.join(name);
        let options = ReadOptions {
            identity_bytes,
            ..opts.read[k]
        };
        let x = owl_trace::records::extract_with(src, &dst, &options, &set)
            .with_context(|| format!("writing {}", dst.display()))?;
        if x.other_linktype > 0 {
            sinks.notice(Notice::Warning(format!(
                "{}: {} packets on interfaces of another link type left out",
                dst.display(),
                x.other_linktype
            )));
        }
        sinks.notice(Notice::Wrote {
            path: dst,
            packets: x.written,
        });
    }
    Ok(())
}
