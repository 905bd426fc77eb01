//! `owl compare --per-class`: delay quantiles per flow class, truth beside each method that
//! recovers individual delays (`sample`, `opa`, `opa-wavelet`).
//!
//! A flow class is a protocol and its service port ([`owl_core::flow_class`]): `udp/53`,
//! `tcp/443`, `icmp`. The first [`DEFAULT_MAX_CLASSES`] classes R's capture shows are named, in
//! that order (within an interval, the busiest first); the traffic of any class after them is
//! reported as `other`, with the number of classes and packets folded into it.
//!
//! In each interval, every method whose [`Method::recovered_packets`] answers gives the
//! delivered packets behind its quantiles, each with its identity; the identity's class comes
//! from R's records of that interval (kept, identity → class, only while the interval is open:
//! memory follows the packets of the open intervals). Each class's delays go into the
//! method's relative-error histogram for that class, merged over the intervals, so a class's
//! quantiles and their 95 % intervals are those of [`owl_core::method::RecoveredDelays`] over
//! the class's own delays: a class's samples are a uniform sample of its delivered packets,
//! since the sampling hash does not depend on the class.
//!
//! The truth of a class is the exact match of its packets that both points recorded in the
//! same interval (as the whole-run quantiles' truth), exact up to `--exact-quantiles` shared
//! among the classes, from a log-linear histogram past it.

use std::sync::Arc;
use std::time::Duration;

use hashbrown::HashMap;
use owl_core::PacketRecord;
use owl_core::cut::{Cut, Delimiters};
use owl_core::exact::MatchedPacket;
use owl_core::flow_class::{
    ClassBook, ClassDelays, ClassTap, DEFAULT_MAX_CLASSES, DEFAULT_TAP_CAPACITY, FlowClass,
};
use owl_core::interval::Intervals;
use owl_core::method::{Method, PointSynopsis, Quantiles};
use owl_core::pipeline::truth::{DelayAcc, QUANTILE_RELATIVE_ERROR};
use owl_core::stats::relative_error;

use crate::report::{ClassMethodReport, ClassReport, ClassTruthReport, Named};

/// One method's delays per class.
struct MethodAcc {
    name: String,
    delays: ClassDelays,
    error: Option<String>,
}

/// The classes' truth and every recovering method's delays per class.
pub struct PerClass {
    iv: Intervals,
    /// A delimiter cut: R's records within its window of a boundary may belong to the
    /// interval on either side, so they are noted in both.
    cut: Option<Delimiters>,
    book: ClassBook,
    /// R's records of each open interval: identity → class.
    taps: HashMap<u64, ClassTap>,
    /// Identities R recorded twice in one interval with different classes (a hash collision),
    /// and packets past a tap's capacity: their delays are in no class.
    collisions: u64,
    overflow: u64,
    truth: Vec<DelayAcc>,
    truth_limit: usize,
    /// Indexed like the methods; `None` until a method's first answer, and for methods
    /// without recovered packets.
    methods: Vec<Option<MethodAcc>>,
}

impl PerClass {
    /// Books for `methods`' classes; the truth keeps up to `exact_quantiles` delays for exact
    /// quantiles, shared among the classes.
    pub fn new(
        iv: Intervals,
        cut: &Cut,
        methods: &[Arc<dyn Method>],
        exact_quantiles: usize,
    ) -> PerClass {
        let book = ClassBook::new(DEFAULT_MAX_CLASSES);
        PerClass {
            iv,
            cut: cut.delimiters().copied(),
            truth_limit: (exact_quantiles / book.slots()).max(1),
            book,
            taps: HashMap::new(),
            collisions: 0,
            overflow: 0,
            truth: Vec::new(),
            methods: methods.iter().map(|_| None).collect(),
        }
    }

    /// Note the class of each of a batch of R's records, by the interval R's clock puts it in
    /// (and under a delimiter cut, within a boundary's window, in the interval on its other
    /// side too: the cut may put it there).
    pub fn observe_receiver(&mut self, batch: &[PacketRecord]) {
        for r in batch {
            let Some(i) = self.iv.index(r.ts_ns) else {
                continue;
            };
            let other = self
                .cut
                .and_then(|d| d.window_of(&self.iv, r.ts_ns))
                .and_then(|j| if j == i { i.checked_sub(1) } else { Some(j) });
            for k in std::iter::once(i).chain(other) {
                self.taps
                    .entry(k)
                    .or_insert_with(|| ClassTap::new(DEFAULT_TAP_CAPACITY))
                    .record_packet(r);
            }
        }
    }

    /// Add a matched packet to its class's truth, when both points recorded it in the same
    /// interval: under a clock cut, the two clocks' intervals; under a delimiter cut, which
    /// puts a delivered packet in the interval S sent it in, every one (but those reordered
    /// across a cut, a handful).
    pub fn add_matched(&mut self, m: &MatchedPacket) {
        if self.cut.is_none() && self.iv.index(m.sender_ns) != self.iv.index(m.receiver_ns) {
            return;
        }
        let s = self.book.slot_of(FlowClass::of(&m.flow), 0);
        if self.truth.len() <= s {
            let limit = self.truth_limit;
            self.truth.resize_with(s + 1, || DelayAcc::new(limit));
        }
        self.truth[s].push(m.delay_ns());
    }

    /// Ask every method for its recovered packets of one closed interval pair, put each in its
    /// class, and forget R's records of the interval (and of any before it); the time each
    /// method spends is added to `spent` (by method index).
    pub fn add_interval(
        &mut self,
        index: u64,
        methods: &[Arc<dyn Method>],
        sender: &[Box<dyn PointSynopsis>],
        receiver: &[Box<dyn PointSynopsis>],
        spent: &mut [Duration],
    ) {
        let tap = self.taps.remove(&index).unwrap_or_else(|| ClassTap::new(0));
        self.taps.retain(|&i, _| i > index);
        self.collisions += tap.collisions;
        self.overflow += tap.overflow;
        let received = self.book.note(&tap);
        for (k, m) in methods.iter().enumerate() {
            let started = std::time::Instant::now();
            let Some(answer) = m.recovered_packets(&*sender[k], &*receiver[k]) else {
                continue;
            };
            let acc = self.methods[k].get_or_insert_with(|| MethodAcc {
                name: m.name().to_string(),
                delays: ClassDelays::default(),
                error: None,
            });
            match answer {
                Ok(p) => acc.delays.add_interval(&self.book, &tap, &received, &p),
                Err(e) => {
                    acc.error
                        .get_or_insert_with(|| format!("interval {index}: {e}"));
                }
            }
            spent[k] += started.elapsed();
        }
    }

    /// The classes with a truth or an estimate, the busiest (by the truth's delays) first, and
    /// notes on what was left out.
    pub fn report(&mut self) -> (Vec<ClassReport>, Vec<String>) {
        let mut out = Vec::new();
        for s in 0..self.book.slots() {
            let (truth, exact) = match self.truth.get_mut(s) {
                Some(t) => t.summary(),
                None => (None, true),
            };
            let methods: Vec<(String, ClassMethodReport)> = self
                .methods
                .iter()
                .flatten()
                .filter_map(|m| {
                    let r = m.delays.slot(s)?;
                    let q = r.quantiles();
                    let err =
                        |f: fn(&Quantiles) -> f64, t: fn(&owl_core::stats::DelaySummary) -> i64| {
                            relative_error(q.as_ref().map(f), truth.map(|d| t(&d) as f64))
                        };
                    Some((
                        m.name.clone(),
                        ClassMethodReport {
                            delays: r.histogram.count(),
                            packets: r.histogram.total_weight(),
                            p50_rel_err: err(|q| q.p50_ns, |d| d.p50_ns),
                            p99_rel_err: err(|q| q.p99_ns, |d| d.p99_ns),
                            p999_rel_err: err(|q| q.p999_ns, |d| d.p999_ns),
                            quantiles: q,
                        },
                    ))
                })
                .collect();
            if truth.is_none() && methods.is_empty() {
                continue;
            }
            let class = self.book.class(s);
            out.push(ClassReport {
                class: self.book.label(s),
                proto: class.map(|c| c.proto),
                port: class.map(|c| c.port),
                truth: ClassTruthReport {
                    delays: truth.map_or(0, |d| d.count),
                    delay: truth.into(),
                    quantiles_relative_error: (!exact).then_some(QUANTILE_RELATIVE_ERROR),
                },
                methods: Named(methods),
            });
        }
        out.sort_by_key(|c| std::cmp::Reverse(c.truth.delays));
        let mut notes = Vec::new();
        if self.methods.iter().all(Option::is_none) {
            notes.push(format!(
                "no method among --methods recovers individual delays ({}): the classes show the truth only",
                crate::methods::recovering_names()
            ));
        }
        let (classes, packets) = self.book.folded();
        if packets > 0 {
            notes.push(format!(
                "only the first {} classes are named: {classes} more classes ({packets} packets at R) are reported as other",
                self.book.named()
            ));
        }
        if self.overflow > 0 {
            notes.push(format!(
                "{} packets at R past the {DEFAULT_TAP_CAPACITY} identities kept per interval for their class: their delays are in no class",
                self.overflow
            ));
        }
        if self.collisions > 0 {
            notes.push(format!(
                "{} identities recorded at R twice in an interval with different classes: their delays are in no class",
                self.collisions
            ));
        }
        for m in self.methods.iter().flatten() {
            if let Some(e) = &m.error {
                notes.push(format!("{}: ! {e}", m.name));
            }
            if let Some(e) = &m.delays.unmergeable {
                notes.push(format!("{}: no classes over the intervals: {e}", m.name));
            }
            if m.delays.unclassified > 0 {
                notes.push(format!(
                    "{}: {} recovered delays of packets not among R's records of their interval, in no class",
                    m.name, m.delays.unclassified
                ));
            }
        }
        (out, notes)
    }
}
