//! The streaming pipeline: two time-ordered record streams in, one result per closed interval
//! out, in memory bounded by the traffic in flight — never by the length of the run.
//!
//! ```text
//!  S records ─┬─► PointStream(S): every method's synopsis per open interval ─┐ closed at S
//!             │                                                              ├─► pair ─► estimate ─┐
//!  R records ─┼─► PointStream(R): every method's synopsis per open interval ─┘ closed at R         │
//!             │                                                                                   ├─► IntervalOutcome
//!             └─► StreamingTruth: exact matching within the horizon ──────────── closed interval ─┘
//! ```
//!
//! - Each point cuts its stream into intervals on the agreed grid (RDA §III-A, §VIII-A) and
//!   closes interval `i` once its stream has passed the interval's end plus the capture-disorder
//!   tolerance ([`point::PointStream`]); under a delimiter cut ([`crate::cut`]) S names each
//!   interval's first packets and R holds the packets around each boundary until they are cut
//!   at those delimiters, where the two points' intervals meet ([`join_interval`]), so both hold
//!   the same packets.
//! - A closed interval pair is estimated by every method at once ([`estimate_pair`]) and freed.
//! - The exact truth ([`truth::StreamingTruth`]) waits a **horizon** (the largest one-way delay
//!   accepted) for each packet's second sighting; its interval `i` is final about two horizons
//!   after the interval's end. Estimates, which are small, wait for it.
//!
//! The caller reads the two captures in lock-step (the one whose newest timestamp is behind
//! first), pushes batches, and drains [`IntervalOutcome`]s as they are ready. This module does
//! no I/O and never reads a clock: method timings, when wanted, come through a [`Timer`].

pub mod join;
pub mod point;
pub mod truth;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::cut::{Cut, IntervalCut, Named, Neighbours, PointCut};
use crate::exact::IntervalTruth;
use crate::interval::Intervals;
use crate::method::{Estimate, Method, MethodError, PointSynopsis, Role};
use crate::record::PacketRecord;

pub use point::{ClosedInterval, PointCounters, PointStream, Synopses};
pub use truth::{StreamTruth, StreamingTruth, TruthConfig};

/// Charges the work of method `k` to it (a wall clock in the command line; nothing in tests).
/// Methods run in parallel ([`Parallel`]), so `charge` is called from several threads at once.
pub trait Timer: Sync + Send {
    /// Run `f`, method `k`'s work, and charge its time to `k`.
    fn charge(&self, k: usize, f: &mut dyn FnMut());
    /// Run `f`, the exact truth's work on one batch (beside the methods' sections).
    fn truth(&self, f: &mut dyn FnMut()) {
        f()
    }
    /// Run `f`, the methods' work on one batch or interval (several [`charge`](Self::charge)s,
    /// perhaps in parallel): what the methods cost in wall time, beside the sum of theirs.
    fn section(&self, f: &mut dyn FnMut()) {
        f()
    }
}

/// A [`Timer`] that only runs the work.
pub struct NoTimer;

impl Timer for NoTimer {
    fn charge(&self, _k: usize, f: &mut dyn FnMut()) {
        f()
    }
}

/// How an interval's methods run: each method's work on a synopsis is independent of the
/// others', so they run on the threads of the current rayon pool — the caller's
/// (`rayon::ThreadPool::install`, `owl compare --threads N`) or rayon's global one (every
/// core). The results are the same on any number of threads: each method sees the same
/// records in the same order, and results are collected in the methods' order.
pub struct Parallel;

impl Parallel {
    /// Below this many records a run is recorded on the calling thread: handing it to the pool
    /// and waiting costs more than it saves (a point with many paths records small runs).
    pub const MIN_RECORDS: usize = 512;

    /// `f(k, item)` for every item, on the pool's threads.
    pub fn each_mut<T: Send>(items: &mut [T], f: impl Fn(usize, &mut T) + Sync + Send) {
        use rayon::prelude::*;
        if rayon::current_num_threads() <= 1 || items.len() <= 1 {
            items.iter_mut().enumerate().for_each(|(k, x)| f(k, x));
        } else {
            items.par_iter_mut().enumerate().for_each(|(k, x)| f(k, x));
        }
    }

    /// `f(k, item)` of every item, in order, on the pool's threads.
    pub fn map<T: Send, U: Send>(items: Vec<T>, f: impl Fn(usize, T) -> U + Sync + Send) -> Vec<U> {
        use rayon::prelude::*;
        if rayon::current_num_threads() <= 1 || items.len() <= 1 {
            items
                .into_iter()
                .enumerate()
                .map(|(k, x)| f(k, x))
                .collect()
        } else {
            items
                .into_par_iter()
                .enumerate()
                .map(|(k, x)| f(k, x))
                .collect()
        }
    }
}

/// Looks at a closed interval pair before the estimators consume it (per-flow queries).
pub trait PairHook {
    fn closed_pair(
        &mut self,
        index: u64,
        methods: &[Arc<dyn Method>],
        sender: &[Box<dyn PointSynopsis>],
        receiver: &[Box<dyn PointSynopsis>],
    );
}

/// A [`PairHook`] that looks at nothing.
pub struct NoHook;

impl PairHook for NoHook {
    fn closed_pair(
        &mut self,
        _: u64,
        _: &[Arc<dyn Method>],
        _: &[Box<dyn PointSynopsis>],
        _: &[Box<dyn PointSynopsis>],
    ) {
    }
}

/// Estimate one closed interval pair with every method (the synopses are consumed); a
/// receiver synopsis that could not be assembled gives its method that error.
pub fn estimate_pair(
    methods: &[Arc<dyn Method>],
    sender: Synopses,
    receiver: Vec<Result<Box<dyn PointSynopsis>, MethodError>>,
    timer: &mut dyn Timer,
) -> Vec<Result<Estimate, MethodError>> {
    let timer: &dyn Timer = timer;
    let mut pairs: Option<Vec<_>> = Some(sender.into_iter().zip(receiver).collect());
    let mut out = Vec::new();
    timer.section(&mut || {
        out = Parallel::map(pairs.take().expect("one section"), |k, (s, r)| {
            let m = &methods[k];
            let r = r?;
            let mut out = None;
            let mut pair = Some((s, r));
            timer.charge(k, &mut || {
                if let Some((s, r)) = pair.take() {
                    out = Some(m.estimate(s, r));
                }
            });
            let mut e = out.expect("the timer runs the work")?;
            // a missing mean always says why (methods set their own reason; this is the net)
            if e.mean_ns.is_none() && e.reason.is_none() {
                e.reason = Some(match e.notes.last() {
                    Some(n) => format!("no estimate: {n}"),
                    None => "no estimate".into(),
                });
            }
            Ok(e)
        })
    });
    out
}

/// Withhold what `method` estimated of an interval whose cut fell back to R's clock, when the
/// method assumes both points aggregate the same packets ([`crate::method::Foreign`]): its
/// mean, std and quantiles become `None`, with the reason. Methods that match or detect
/// packets keep their figures (they cope, and say how in their notes).
pub fn withhold_unpaired(method: &dyn Method, cut: Option<&IntervalCut>, e: &mut Estimate) {
    let Some(why) = cut.and_then(IntervalCut::fell_back) else {
        return;
    };
    let crate::method::Foreign::AssumesNone(_) = method.foreign() else {
        return;
    };
    e.mean_ns = None;
    e.std_ns = None;
    e.mean_ci98_ns = None;
    e.std_ci95_ns = None;
    e.quantiles = None;
    e.recovered = None;
    e.reason = Some(format!(
        "withheld: a cut of this interval fell back to R's clock ({}), so its packets at R may not be S's, and {} assumes both points aggregate the same packets",
        why.reason(),
        method.name()
    ));
}

/// One point's side of an interval, as it closed there: its packets, synopses and cut data.
pub struct PointSide {
    pub packets: u64,
    pub synopses: Synopses,
    pub cut: PointCut,
}

impl From<ClosedInterval> for PointSide {
    fn from(c: ClosedInterval) -> PointSide {
        PointSide {
            packets: c.packets,
            synopses: c.synopses,
            cut: c.cut,
        }
    }
}

/// An interval with both points' synopses over the same packets, ready for
/// [`estimate_pair`].
pub struct JoinedInterval {
    pub sender: Synopses,
    /// R's synopses, assembled at the cut ([`crate::cut::assemble`]).
    pub receiver: Vec<Result<Box<dyn PointSynopsis>, MethodError>>,
    /// Packets each point's interval took.
    pub packets: [u64; 2],
    /// How R's side was cut (a delimiter cut and a receiver side).
    pub cut: Option<IntervalCut>,
}

/// The join of interval `index` at both points, the one rule `owl compare`, `owl estimate` and
/// the live receiver share: a point with no side gets empty synopses; under a delimiter cut
/// R's windows are cut at S's delimiters of the interval's two boundaries — S's own, or where S
/// has no side, what its neighbours named: `neighbours` are what S named of this interval's
/// start with its interval `index − 1` (its delimiters, or its last packets where its stream
/// ended there) and of its end with its interval `index + 1`, each [`Named::SILENT`] where S
/// is known to have sent nothing there and `None` where unknown (R's clock then cuts, and says
/// so).
pub fn join_interval(
    methods: &[Arc<dyn Method>],
    intervals: &Intervals,
    index: u64,
    sender: Option<PointSide>,
    receiver: Option<PointSide>,
    neighbours: [Option<&Named>; 2],
    timer: &mut dyn Timer,
) -> JoinedInterval {
    let fresh = |role| -> Synopses { methods.iter().map(|m| m.new_point(role)).collect() };
    let (lists, sent, s) = match sender {
        Some(PointSide {
            packets,
            synopses,
            cut: PointCut::Sender { start, end },
        }) => (
            Some((Some(Named::First(start)), Some(end))),
            packets,
            synopses,
        ),
        Some(p) => (None, p.packets, p.synopses),
        None => (
            Some((neighbours[0].cloned(), neighbours[1].cloned())),
            0,
            fresh(Role::Sender),
        ),
    };
    let Some(r) = receiver else {
        return JoinedInterval {
            sender: s,
            receiver: fresh(Role::Receiver).into_iter().map(Ok).collect(),
            packets: [sent, 0],
            cut: None,
        };
    };
    let PointCut::Receiver { head, tail } = &r.cut else {
        return JoinedInterval {
            sender: s,
            receiver: r.synopses.into_iter().map(Ok).collect(),
            packets: [sent, r.packets],
            cut: None,
        };
    };
    let (start, end) = lists.unwrap_or((None, None));
    let split = crate::cut::split(intervals, index, head, tail, start.as_ref(), end.as_ref());
    let receiver = methods
        .iter()
        .zip(r.synopses)
        .enumerate()
        .map(|(k, (m, core))| {
            let mut out = None;
            let mut core = Some(core);
            timer.charge(k, &mut || {
                if let Some(c) = core.take() {
                    out = Some(crate::cut::assemble(&**m, Some(c), &split));
                }
            });
            out.expect("the timer runs the work")
        })
        .collect();
    JoinedInterval {
        sender: s,
        receiver,
        packets: [sent, r.packets + split.packets()],
        cut: Some(IntervalCut {
            start: split.start,
            end: split.end,
            held_in: split.packets(),
        }),
    }
}

/// How a pair pipeline cuts and bounds (the cut itself: [`PairPipeline::with_cut`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineConfig {
    pub intervals: Intervals,
    /// Capture disorder tolerated before a point closes an interval, ns.
    pub disorder_ns: u64,
}

/// Everything known of one interval once it is closed at both points and in the truth.
#[derive(Debug)]
pub struct IntervalOutcome {
    pub index: u64,
    pub start_ns: u64,
    /// The exact truth of the interval (`None` without truth, or when no packet of the truth
    /// fell in it).
    pub truth: Option<IntervalTruth>,
    /// One per method, in the order given; `None` where neither point had a record in the
    /// interval.
    pub estimates: Vec<Option<Result<Estimate, MethodError>>>,
    /// Packets each point's interval took (S's, and R's once cut), where a point had any.
    pub packets: Option<[u64; 2]>,
    /// How R's side was cut, under a delimiter cut.
    pub cut: Option<IntervalCut>,
}

/// An interval estimated, waiting for its truth.
struct Estimated {
    estimates: Vec<Option<Result<Estimate, MethodError>>>,
    packets: [u64; 2],
    cut: Option<IntervalCut>,
}

/// Two point streams, the truth, and the join of their closed intervals.
pub struct PairPipeline {
    cfg: PipelineConfig,
    methods: Vec<Arc<dyn Method>>,
    points: [PointStream; 2],
    truth: Option<StreamingTruth>,
    /// Closed at one point, waiting for the other.
    waiting: BTreeMap<u64, [Option<ClosedInterval>; 2]>,
    /// What S named of the boundaries of the intervals it closed (pruned as they are joined).
    neighbours: Neighbours,
    /// Estimated, waiting for the truth.
    estimated: BTreeMap<u64, Estimated>,
    /// Truth closed, waiting for the estimates.
    truths: BTreeMap<u64, IntervalTruth>,
    ready: VecDeque<IntervalOutcome>,
    closed: Vec<ClosedInterval>,
    /// Most intervals held at once in `waiting` + `estimated` + `truths` (for reports).
    pub peak_held: usize,
}

impl PairPipeline {
    pub fn new(
        cfg: PipelineConfig,
        methods: Vec<Arc<dyn Method>>,
        truth: Option<TruthConfig>,
    ) -> PairPipeline {
        let point = |role| PointStream::new(role, cfg.intervals, cfg.disorder_ns, methods.clone());
        PairPipeline {
            cfg,
            points: [point(Role::Sender), point(Role::Receiver)],
            methods,
            truth: truth.map(StreamingTruth::new),
            waiting: BTreeMap::new(),
            neighbours: Neighbours::default(),
            estimated: BTreeMap::new(),
            truths: BTreeMap::new(),
            ready: VecDeque::new(),
            closed: Vec::new(),
            peak_held: 0,
        }
    }

    /// Cut intervals by `cut` at both points (a clock cut unless set). Under a delimiter cut
    /// the truth counts a matched packet in the interval S sent it in.
    pub fn with_cut(mut self, cut: Cut) -> PairPipeline {
        let [s, r] = std::mem::replace(
            &mut self.points,
            [
                PointStream::new(Role::Sender, self.cfg.intervals, 0, Vec::new()),
                PointStream::new(Role::Receiver, self.cfg.intervals, 0, Vec::new()),
            ],
        );
        self.points = [s.with_cut(cut), r.with_cut(cut)];
        if let (Some(t), Cut::Delimiter(d)) = (self.truth.as_mut(), *self.points[0].cut()) {
            // the truth cuts R's stream where the methods do; with no method, where S does
            if self.methods.is_empty() {
                t.set_sender_cut(true);
            } else {
                t.set_receiver_cuts(d);
            }
        }
        self
    }

    pub fn cut(&self) -> &Cut {
        self.points[0].cut()
    }

    pub fn methods(&self) -> &[Arc<dyn Method>] {
        &self.methods
    }

    pub fn point(&self, role: Role) -> &PointStream {
        &self.points[role as usize]
    }

    pub fn truth(&self) -> Option<&StreamingTruth> {
        self.truth.as_ref()
    }

    pub fn truth_mut(&mut self) -> Option<&mut StreamingTruth> {
        self.truth.as_mut()
    }

    /// Feed a batch of one point, in that point's capture order.
    pub fn push(
        &mut self,
        role: Role,
        batch: &[PacketRecord],
        timer: &mut dyn Timer,
        hook: &mut dyn PairHook,
    ) {
        // the truth beside the methods: neither reads what the other writes
        let truth = self.truth.as_mut();
        let p = &mut self.points[role as usize];
        let closed = &mut self.closed;
        let methods = !self.methods.is_empty();
        let shared: &dyn Timer = timer;
        rayon::join(
            || {
                if let Some(t) = truth {
                    shared.truth(&mut || match role {
                        Role::Sender => t.push_sender(batch),
                        Role::Receiver => t.push_receiver(batch),
                    })
                }
            },
            || {
                if methods {
                    p.push(batch, shared);
                    p.drain_closed(closed);
                }
            },
        );
        self.collect(role, timer, hook);
    }

    /// The methods take from now on only records of `role` in `[from, to]` (the truth takes
    /// every record: see [`TruthConfig::trim`]).
    pub fn trim(&mut self, role: Role, from: u64, to: u64) {
        self.points[role as usize].trim(from, to);
    }

    /// One point's stream has ended.
    pub fn finish_point(&mut self, role: Role, timer: &mut dyn Timer, hook: &mut dyn PairHook) {
        if let Some(t) = self.truth.as_mut() {
            match role {
                Role::Sender => t.finish_sender(),
                Role::Receiver => t.finish_receiver(),
            }
        }
        self.points[role as usize].finish(&mut self.closed);
        self.collect(role, timer, hook);
    }

    fn collect(&mut self, role: Role, timer: &mut dyn Timer, hook: &mut dyn PairHook) {
        let side = role as usize;
        for c in std::mem::take(&mut self.closed) {
            let i = c.index;
            if role == Role::Sender {
                self.neighbours.note_cut(i, &c.cut);
            }
            self.waiting.entry(i).or_insert([None, None])[side] = Some(c);
        }
        // a pair is complete once both points closed it (an empty side gets fresh synopses)
        let below = self.points[0]
            .closed_below()
            .min(self.points[1].closed_below());
        let delimited = matches!(self.cut(), Cut::Delimiter(_));
        while let Some((&i, w)) = self.waiting.first_key_value() {
            let both = w[0].is_some() && w[1].is_some();
            if !both && i >= below {
                break;
            }
            // R's side without S's, under a delimiter cut: the end is cut at S's delimiters
            // of the next interval, so wait until S has closed it or passed it
            let next_sender = self.waiting.get(&(i + 1)).is_some_and(|n| n[0].is_some());
            if delimited
                && w[0].is_none()
                && w[1].is_some()
                && !next_sender
                && self.points[0].closed_below() <= i + 1
            {
                break;
            }
            let (_, [s, r]) = self.waiting.pop_first().unwrap();
            // S closed nothing at `i + 1` while its stream went past it: it sent nothing there
            let s_passed =
                !self.points[0].is_done() && self.points[0].closed_below() > i.saturating_add(1);
            let [previous_end, next_start] = self.neighbours.around(i, s_passed);
            let sender_absent = s.is_none();
            let joined = join_interval(
                &self.methods,
                &self.cfg.intervals,
                i,
                s.map(PointSide::from),
                r.map(PointSide::from),
                [previous_end.as_ref(), next_start.as_ref()],
                timer,
            );
            self.neighbours.forget_below(i);
            if let (Some(t), Some(c)) = (self.truth.as_mut(), joined.cut) {
                for (j, b) in [(i, c.start), (i + 1, c.end)] {
                    if let Some(d) = b.and_then(|b| b.decision) {
                        t.learn_cut(j, d);
                    }
                }
            }
            // an interval S never had whose held packets all belong to its neighbours
            if delimited && sender_absent && joined.packets == [0, 0] {
                continue;
            }
            // the hook reads every receiver synopsis: one that could not be assembled is
            // shown to it empty, and its method's estimate is the error
            let mut failed = Vec::new();
            let receiver: Synopses = joined
                .receiver
                .into_iter()
                .enumerate()
                .map(|(k, r)| {
                    r.unwrap_or_else(|e| {
                        failed.push((k, e));
                        self.methods[k].new_point(Role::Receiver)
                    })
                })
                .collect();
            hook.closed_pair(i, &self.methods, &joined.sender, &receiver);
            let mut est = estimate_pair(
                &self.methods,
                joined.sender,
                receiver.into_iter().map(Ok).collect(),
                timer,
            );
            for (k, e) in failed {
                est[k] = Err(e);
            }
            for (m, e) in self.methods.iter().zip(est.iter_mut()) {
                if let Ok(e) = e {
                    withhold_unpaired(&**m, joined.cut.as_ref(), e);
                }
            }
            self.estimated.insert(
                i,
                Estimated {
                    estimates: est.into_iter().map(Some).collect(),
                    packets: joined.packets,
                    cut: joined.cut,
                },
            );
        }
        if let Some(t) = self.truth.as_mut() {
            // every pair below the first still waiting is done: the boundaries up to it that
            // no pair cut held no record of the methods
            let done = below.min(self.waiting.keys().next().copied().unwrap_or(u64::MAX));
            t.cuts_known_below(done.saturating_add(1));
            for it in t.drain_closed() {
                self.truths.insert(it.index, it);
            }
        }
        self.peak_held = self
            .peak_held
            .max(self.waiting.len() + self.estimated.len() + self.truths.len());
        self.emit(false);
    }

    /// Move every interval known to be complete to `ready`, in index order.
    fn emit(&mut self, all: bool) {
        let methods_below = if self.methods.is_empty() {
            u64::MAX
        } else {
            self.points[0]
                .closed_below()
                .min(self.points[1].closed_below())
                .min(self.waiting.keys().next().copied().unwrap_or(u64::MAX))
        };
        let truth_below = match &self.truth {
            None => u64::MAX,
            Some(t) => t.closed_below(),
        };
        loop {
            let next = match (self.estimated.keys().next(), self.truths.keys().next()) {
                (None, None) => break,
                (Some(&a), None) => a,
                (None, Some(&b)) => b,
                (Some(&a), Some(&b)) => a.min(b),
            };
            if !all && (next >= methods_below || next >= truth_below) {
                break;
            }
            let (estimates, packets, cut) = match self.estimated.remove(&next) {
                Some(e) => (e.estimates, Some(e.packets), e.cut),
                None => (self.methods.iter().map(|_| None).collect(), None, None),
            };
            let truth = self.truths.remove(&next);
            self.ready.push_back(IntervalOutcome {
                index: next,
                start_ns: self.cfg.intervals.start_ns(next),
                truth,
                estimates,
                packets,
                cut,
            });
        }
    }

    /// Intervals complete so far, in index order.
    pub fn drain(&mut self) -> impl Iterator<Item = IntervalOutcome> + '_ {
        self.ready.drain(..)
    }

    /// Both streams have ended (call [`finish_point`](Self::finish_point) for each first):
    /// the last intervals and the whole-run truth.
    pub fn finish(
        mut self,
    ) -> (
        Vec<IntervalOutcome>,
        Option<StreamTruth>,
        [PointCounters; 2],
    ) {
        let truth = self.truth.take().map(|t| {
            let (whole, rest) = t.finish();
            for it in rest {
                self.truths.insert(it.index, it);
            }
            whole
        });
        self.emit(true);
        let counters = [self.points[0].counters(), self.points[1].counters()];
        (self.ready.into_iter().collect(), truth, counters)
    }
}

#[cfg(test)]
mod tests;
