//! One observation point's synopses, cut into intervals and closed as the point's own stream
//! passes them: by its clock, or, at a receiver under a delimiter cut, with the packets around
//! each boundary held until the sender's delimiters place the cut ([`crate::cut`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::cut::{Cut, HOLD_CAP, Held, Named, PointCut};
use crate::interval::Intervals;
use crate::method::{Method, PointSynopsis, Role};
use crate::record::PacketRecord;

use super::Timer;

/// The synopses of every method for one interval at one point, in the order of the methods.
pub type Synopses = Vec<Box<dyn PointSynopsis>>;

/// One interval closed at a point: its index, the packets it took (every method's synopsis
/// recorded each of them: the point's packet counter, which `owl record` writes beside the
/// synopses so that `owl estimate` reports what was sent and received), the synopses, and what
/// the cut needs ([`PointCut`]). At a receiver under a delimiter cut, `packets` and `synopses`
/// are the interval's core: its windows' packets are added once the cut is known
/// ([`crate::cut::split`], [`crate::cut::assemble`]).
pub struct ClosedInterval {
    pub index: u64,
    pub packets: u64,
    pub synopses: Synopses,
    pub cut: PointCut,
}

/// An interval still open at a point.
struct Open {
    packets: u64,
    synopses: Synopses,
    /// Sender, delimiter cut: its first packets' identities (the delimiters of its start).
    delimiters: Vec<u64>,
    /// ... and its last ones so far, in capture order: what it names of its end if its stream
    /// ends before it can name the next interval's delimiters ([`Named::Last`]).
    last: Vec<u64>,
}

/// What a point's stream held besides the records its intervals took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PointCounters {
    /// Records pushed.
    pub records: u64,
    /// Records before the interval origin: in no interval.
    pub before_origin: u64,
    /// Records whose interval had already closed (more than the disorder tolerance behind the
    /// newest timestamp of their capture): in no interval.
    pub out_of_order: u64,
    /// Intervals opened.
    pub intervals: u64,
    /// Records outside the window set by [`PointStream::trim`]: in no interval.
    pub trimmed: u64,
    /// Receiver, delimiter cut: records held around a boundary until the cut is known.
    pub held: u64,
    /// ... and records past a window's cap ([`HOLD_CAP`]), put in intervals by the clock.
    pub held_overflow: u64,
}

/// Where one record goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dest {
    /// Counted, in no interval.
    Skip,
    /// Into interval `i`'s synopses.
    Interval(u64),
    /// Held in a boundary's window (done by [`PointStream::dest`]).
    Held,
}

/// Every method's synopsis of each open interval at one point.
///
/// Interval `i` closes once this point's stream has passed its end plus the disorder tolerance
/// (the records of a capture are nearly, not exactly, in timestamp order); under a delimiter
/// cut, a sender also waits until it has its delimiters of the next interval (or has passed the
/// next boundary by the cut's window), and a receiver until it has passed its window of the
/// next boundary. Memory: the open intervals, about `1 + (disorder + window) / T` of them,
/// times the methods' synopses, and at a receiver the packets of at most two windows.
pub struct PointStream {
    role: Role,
    intervals: Intervals,
    disorder_ns: u64,
    cut: Cut,
    methods: Vec<Arc<dyn Method>>,
    open: BTreeMap<u64, Open>,
    /// Receiver, delimiter cut: windows still filling, by boundary.
    held: BTreeMap<u64, Held>,
    /// ... and windows complete, kept for the interval they open.
    frozen: BTreeMap<u64, Arc<Held>>,
    watermark: Option<u64>,
    closed_below: u64,
    counters: PointCounters,
    done: bool,
    /// Records are taken only within `[window.0, window.1]`.
    window: (u64, u64),
    /// Where each record of the batch being pushed goes (kept to reuse its allocation).
    dests: Vec<Dest>,
}

impl PointStream {
    pub fn new(
        role: Role,
        intervals: Intervals,
        disorder_ns: u64,
        methods: Vec<Arc<dyn Method>>,
    ) -> PointStream {
        PointStream {
            role,
            intervals,
            disorder_ns,
            cut: Cut::Clock,
            methods,
            open: BTreeMap::new(),
            held: BTreeMap::new(),
            frozen: BTreeMap::new(),
            watermark: None,
            closed_below: 0,
            counters: PointCounters::default(),
            done: false,
            window: (0, u64::MAX),
            dests: Vec::new(),
        }
    }

    /// Cut intervals by `cut` (a clock cut unless set; one interval over the whole capture
    /// has no boundary to cut).
    pub fn with_cut(mut self, cut: Cut) -> PointStream {
        if !self.intervals.is_whole() {
            self.cut = cut;
        }
        self
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn cut(&self) -> &Cut {
        &self.cut
    }

    /// Packets held in windows now (a receiver under a delimiter cut).
    pub fn held_now(&self) -> usize {
        self.held.values().map(|h| h.records.len()).sum::<usize>()
            + self.frozen.values().map(|h| h.records.len()).sum::<usize>()
    }

    pub fn counters(&self) -> PointCounters {
        self.counters
    }

    /// Newest timestamp seen.
    pub fn watermark(&self) -> Option<u64> {
        self.watermark
    }

    /// The stream has ended ([`finish`](Self::finish)).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Every interval below this index is closed (or never held a record).
    pub fn closed_below(&self) -> u64 {
        if self.done {
            u64::MAX
        } else {
            self.closed_below
        }
    }

    /// Intervals open now.
    pub fn open_intervals(&self) -> usize {
        self.open.len()
    }

    /// Take from now on only records with timestamps in `[from, to]` (the span both points
    /// were capturing); the others are counted ([`PointCounters::trimmed`]).
    pub fn trim(&mut self, from: u64, to: u64) {
        self.window = (from, to);
    }

    /// Where record `r` goes (a record a window holds is held here and now).
    #[inline]
    fn dest(&mut self, r: &PacketRecord, seq: u64) -> Dest {
        let (lo, hi) = self.window;
        if r.ts_ns < lo || r.ts_ns > hi {
            self.counters.trimmed += 1;
            return Dest::Skip;
        }
        if let (Role::Receiver, Cut::Delimiter(d)) = (self.role, &self.cut)
            && let Some(j) = d.window_of(&self.intervals, r.ts_ns)
        {
            if self.done || self.closed_below >= j.max(1) {
                self.counters.out_of_order += 1;
                return Dest::Skip;
            }
            let h = self.held.entry(j).or_default();
            if h.records.len() < HOLD_CAP {
                h.records.push(*r);
                h.seqs.push(seq);
                self.counters.held += 1;
                return Dest::Held;
            }
            h.overflowed = true;
            self.counters.held_overflow += 1;
        }
        match self.intervals.index(r.ts_ns) {
            None => {
                self.counters.before_origin += 1;
                Dest::Skip
            }
            Some(i) if i < self.closed_below || self.done => {
                self.counters.out_of_order += 1;
                Dest::Skip
            }
            Some(i) => Dest::Interval(i),
        }
    }

    /// Feed a batch in capture order: each run of records of one interval goes to every
    /// method's synopsis of that interval (hash once, feed many); a receiver under a delimiter
    /// cut holds the records of its windows.
    pub fn push(&mut self, batch: &[PacketRecord], timer: &dyn Timer) {
        let first_seq = self.counters.records;
        self.counters.records += batch.len() as u64;
        if let Some(newest) = batch.iter().map(|r| r.ts_ns).max() {
            self.watermark = Some(self.watermark.map_or(newest, |w| w.max(newest)));
        }
        let mut dests = std::mem::take(&mut self.dests);
        dests.clear();
        dests.extend(
            batch
                .iter()
                .enumerate()
                .map(|(k, r)| self.dest(r, first_seq + k as u64)),
        );
        let mut start = 0;
        while start < batch.len() {
            let i = match dests[start] {
                Dest::Skip | Dest::Held => {
                    start += 1;
                    continue;
                }
                Dest::Interval(i) => i,
            };
            let mut end = start + 1;
            while end < batch.len() && dests[end] == Dest::Interval(i) {
                end += 1;
            }
            self.take_run(i, &batch[start..end], timer);
            start = end;
        }
        self.dests = dests;
    }

    /// Every method's synopsis of interval `i` takes `run`.
    fn take_run(&mut self, i: u64, run: &[PacketRecord], timer: &dyn Timer) {
        let delimiting = match (self.role, &self.cut) {
            (Role::Sender, Cut::Delimiter(d)) => Some((
                d.count as usize,
                self.intervals.start_ns(i).saturating_add(d.after_ns),
            )),
            _ => None,
        };
        let open = match self.open.entry(i) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                self.counters.intervals += 1;
                let role = self.role;
                let mut made = Vec::with_capacity(self.methods.len());
                for (k, m) in self.methods.iter().enumerate() {
                    let mut s = None;
                    timer.charge(k, &mut || s = Some(m.new_point(role)));
                    made.extend(s);
                }
                v.insert(Open {
                    packets: 0,
                    synopses: made,
                    delimiters: Vec::new(),
                    last: Vec::new(),
                })
            }
        };
        open.packets += run.len() as u64;
        if let Some((count, until)) = delimiting {
            for r in run {
                if open.delimiters.len() >= count {
                    break;
                }
                if r.ts_ns < until && !open.delimiters.contains(&r.id) {
                    open.delimiters.push(r.id);
                }
            }
            let last = &run[run.len().saturating_sub(count)..];
            open.last.extend(last.iter().map(|r| r.id));
            let over = open.last.len().saturating_sub(count);
            open.last.drain(..over);
        }
        let timer: &dyn Timer = timer;
        let synopses = &mut open.synopses;
        timer.section(&mut || {
            if run.len() < super::Parallel::MIN_RECORDS {
                for (k, s) in synopses.iter_mut().enumerate() {
                    timer.charge(k, &mut || s.record_batch(run));
                }
            } else {
                super::Parallel::each_mut(synopses, |k, s| {
                    timer.charge(k, &mut || s.record_batch(run))
                })
            }
        });
    }

    /// The point's clock reads `now_ns` and no record older than it is still to come (a live
    /// capture whose link is quiet): the stream passes `now_ns` as a record stamped then would,
    /// so [`drain_closed`](Self::drain_closed) closes the intervals it ends.
    pub fn advance(&mut self, now_ns: u64) {
        self.watermark = Some(self.watermark.map_or(now_ns, |w| w.max(now_ns)));
    }

    /// How far past an interval's end this point waits before closing it: the disorder
    /// tolerance, and under a delimiter cut the window past the next boundary (a sender waits
    /// that long only while it lacks its delimiters of the next interval).
    fn lag(&self) -> u64 {
        match &self.cut {
            Cut::Clock => self.disorder_ns,
            Cut::Delimiter(d) => self.disorder_ns.saturating_add(d.after_ns),
        }
    }

    /// The next interval a receiver under a delimiter cut has to close: its first open
    /// interval, or the interval a held window opens or ends.
    fn next_receiver_candidate(&self) -> Option<u64> {
        let open = self.open.keys().next().copied();
        let frozen = self.frozen.keys().next().copied();
        let held = self
            .held
            .keys()
            .next()
            .map(|&j| j.saturating_sub(1).max(self.closed_below));
        [open, frozen, held].into_iter().flatten().min()
    }

    /// Close receiver interval `c` (delimiter cut): its core, the window it opens and the one
    /// it ends (kept for the next interval). Nothing is emitted when all three are empty.
    fn close_receiver(&mut self, c: u64, out: &mut Vec<ClosedInterval>) {
        let core = self.open.remove(&c);
        let head = self
            .frozen
            .remove(&c)
            .or_else(|| self.held.remove(&c).map(Arc::new))
            .unwrap_or_default();
        let tail = match self.held.remove(&(c + 1)) {
            Some(h) => {
                let h = Arc::new(h);
                self.frozen.insert(c + 1, h.clone());
                h
            }
            None => Arc::new(Held::default()),
        };
        self.closed_below = self.closed_below.max(c + 1);
        if core.is_none() && head.is_empty() && tail.is_empty() {
            return;
        }
        let (packets, synopses) = match core {
            Some(o) => (o.packets, o.synopses),
            None => (
                0,
                self.methods
                    .iter()
                    .map(|m| m.new_point(Role::Receiver))
                    .collect(),
            ),
        };
        out.push(ClosedInterval {
            index: c,
            packets,
            synopses,
            cut: PointCut::Receiver { head, tail },
        });
    }

    /// Close the first open interval (a sender, or any point under a clock cut). A sender
    /// names the end by the next interval's delimiters; without a next interval, it names none
    /// (silent) once its stream has passed the next boundary's window, its last packets where
    /// the stream reached the boundary and stopped short of the window's end
    /// ([`Named::Stopped`]), and where it ended before the boundary ([`Named::Last`]).
    fn close_first(&mut self, out: &mut Vec<ClosedInterval>) {
        let Some((i, o)) = self.open.pop_first() else {
            return;
        };
        self.closed_below = self.closed_below.max(i + 1);
        let cut = match &self.cut {
            Cut::Clock => PointCut::None,
            Cut::Delimiter(d) => PointCut::Sender {
                start: o.delimiters,
                end: match self.open.get(&(i + 1)) {
                    Some(n) => Named::First(n.delimiters.clone()),
                    None => {
                        let boundary = self.intervals.start_ns(i.saturating_add(1));
                        match self.watermark {
                            Some(w) if w >= boundary.saturating_add(d.after_ns) => Named::SILENT,
                            Some(w) if w >= boundary => Named::Stopped(o.last),
                            _ => Named::Last(o.last),
                        }
                    }
                },
            },
        };
        out.push(ClosedInterval {
            index: i,
            packets: o.packets,
            synopses: o.synopses,
            cut,
        });
    }

    /// Close the intervals this point's stream has passed, in index order.
    pub fn drain_closed(&mut self, out: &mut Vec<ClosedInterval>) {
        if self.intervals.is_whole() {
            return;
        }
        let Some(w) = self.watermark else { return };
        let end_of = |iv: &Intervals, i: u64| iv.start_ns(i).saturating_add(iv.length_ns);
        match (self.role, self.cut) {
            (Role::Receiver, Cut::Delimiter(_)) => {
                while let Some(c) = self.next_receiver_candidate() {
                    if w < end_of(&self.intervals, c).saturating_add(self.lag()) {
                        break;
                    }
                    self.close_receiver(c, out);
                }
            }
            (_, cut) => {
                while let Some((&i, _)) = self.open.first_key_value() {
                    let end = end_of(&self.intervals, i);
                    if w < end.saturating_add(self.disorder_ns) {
                        break;
                    }
                    if let Cut::Delimiter(d) = cut {
                        // the delimiters of the next interval's start, unless the stream has
                        // passed the time S names them in
                        let named = self
                            .open
                            .get(&(i + 1))
                            .is_some_and(|n| n.delimiters.len() >= d.count as usize);
                        if !named && w < end.saturating_add(self.lag()) {
                            break;
                        }
                    }
                    self.close_first(out);
                }
            }
        }
        // intervals with no record are closed too, as the stream passes them
        if let Some(i) = self.intervals.index(w.saturating_sub(self.lag())) {
            self.closed_below = self.closed_below.max(i);
        }
    }

    /// The stream has ended: every open interval, in index order.
    pub fn finish(&mut self, out: &mut Vec<ClosedInterval>) {
        self.done = true;
        match (self.role, self.cut) {
            (Role::Receiver, Cut::Delimiter(_)) => {
                while let Some(c) = self.next_receiver_candidate() {
                    self.close_receiver(c, out);
                }
            }
            _ => {
                while !self.open.is_empty() {
                    self.close_first(out);
                }
            }
        }
    }
}
