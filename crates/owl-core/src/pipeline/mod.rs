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
//! - Each point cuts its own stream into clock-delimited intervals (RDA §III-A, §VIII-A) and
//!   closes interval `i` once its stream has passed the interval's end plus the capture-disorder
//!   tolerance ([`point::PointStream`]). Packets in flight at a boundary land in the next interval
//!   at R, as in a deployment; waiting longer would not change any synopsis.
//! - A closed interval pair is estimated by every method at once ([`estimate_pair`]) and freed.
//! - The exact truth ([`truth::StreamingTruth`]) waits a **horizon** (the largest one-way delay
//!   accepted) for each packet's second sighting; its interval `i` is final about two horizons
//!   after the interval's end. Estimates, which are small, wait for it.
//!
//! The caller reads the two captures in lock-step (the one whose newest timestamp is behind
//! first), pushes batches, and drains [`IntervalOutcome`]s as they are ready. This module does
//! no I/O and never reads a clock: method timings, when wanted, come through a [`Timer`].

pub mod point;
pub mod truth;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::exact::IntervalTruth;
use crate::interval::Intervals;
use crate::method::{Estimate, Method, MethodError, PointSynopsis, Role};
use crate::record::PacketRecord;

pub use point::{ClosedInterval, PointCounters, PointStream, Synopses};
pub use truth::{StreamTruth, StreamingTruth, TruthConfig};

/// Charges the work of method `k` to it (a wall clock in the command line; nothing in tests).
pub trait Timer {
    fn charge(&mut self, k: usize, f: &mut dyn FnMut());
}

/// A [`Timer`] that only runs the work.
pub struct NoTimer;

impl Timer for NoTimer {
    fn charge(&mut self, _k: usize, f: &mut dyn FnMut()) {
        f()
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

/// Estimate one closed interval pair with every method (the synopses are consumed).
pub fn estimate_pair(
    methods: &[Arc<dyn Method>],
    sender: Synopses,
    receiver: Synopses,
    timer: &mut dyn Timer,
) -> Vec<Result<Estimate, MethodError>> {
    methods
        .iter()
        .zip(sender.into_iter().zip(receiver))
        .enumerate()
        .map(|(k, (m, (s, r)))| {
            let mut out = None;
            let mut pair = Some((s, r));
            timer.charge(k, &mut || {
                if let Some((s, r)) = pair.take() {
                    out = Some(m.estimate(s, r));
                }
            });
            out.expect("the timer runs the work")
        })
        .collect()
}

/// How a pair pipeline cuts and bounds.
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
}

/// Two point streams, the truth, and the join of their closed intervals.
pub struct PairPipeline {
    cfg: PipelineConfig,
    methods: Vec<Arc<dyn Method>>,
    points: [PointStream; 2],
    truth: Option<StreamingTruth>,
    /// Closed at one point, waiting for the other.
    waiting: BTreeMap<u64, [Option<Synopses>; 2]>,
    /// Estimated, waiting for the truth.
    estimated: BTreeMap<u64, Vec<Option<Result<Estimate, MethodError>>>>,
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
            estimated: BTreeMap::new(),
            truths: BTreeMap::new(),
            ready: VecDeque::new(),
            closed: Vec::new(),
            peak_held: 0,
        }
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
        if let Some(t) = self.truth.as_mut() {
            match role {
                Role::Sender => t.push_sender(batch),
                Role::Receiver => t.push_receiver(batch),
            }
        }
        let p = &mut self.points[role as usize];
        if !self.methods.is_empty() {
            p.push(batch, timer);
            p.drain_closed(&mut self.closed);
        }
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
            self.waiting.entry(c.index).or_insert([None, None])[side] = Some(c.synopses);
        }
        // a pair is complete once both points closed it (an empty side gets fresh synopses)
        let below = self.points[0]
            .closed_below()
            .min(self.points[1].closed_below());
        while let Some((&i, w)) = self.waiting.first_key_value() {
            let both = w[0].is_some() && w[1].is_some();
            if !both && i >= below {
                break;
            }
            let (_, [s, r]) = self.waiting.pop_first().unwrap();
            let fresh =
                |role| -> Synopses { self.methods.iter().map(|m| m.new_point(role)).collect() };
            let s = s.unwrap_or_else(|| fresh(Role::Sender));
            let r = r.unwrap_or_else(|| fresh(Role::Receiver));
            hook.closed_pair(i, &self.methods, &s, &r);
            let est = estimate_pair(&self.methods, s, r, timer);
            self.estimated
                .insert(i, est.into_iter().map(Some).collect());
        }
        if let Some(t) = self.truth.as_mut() {
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
            let estimates = self
                .estimated
                .remove(&next)
                .unwrap_or_else(|| self.methods.iter().map(|_| None).collect());
            let truth = self.truths.remove(&next);
            self.ready.push_back(IntervalOutcome {
                index: next,
                start_ns: self.cfg.intervals.start_ns(next),
                truth,
                estimates,
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
