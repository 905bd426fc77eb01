//! One observation point's synopses, cut into clock-delimited intervals and closed as the point's
//! own stream passes them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::interval::Intervals;
use crate::method::{Method, PointSynopsis, Role};
use crate::record::PacketRecord;

use super::Timer;

/// The synopses of every method for one interval at one point, in the order of the methods.
pub type Synopses = Vec<Box<dyn PointSynopsis>>;

/// One interval closed at a point: its index, the packets it took (every method's synopsis
/// recorded each of them: the point's packet counter, which `owl record` writes beside the
/// synopses so that `owl estimate` reports what was sent and received), and the synopses.
pub struct ClosedInterval {
    pub index: u64,
    pub packets: u64,
    pub synopses: Synopses,
}

/// An interval still open at a point.
struct Open {
    packets: u64,
    synopses: Synopses,
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
}

/// Every method's synopsis of each open interval at one point.
///
/// Interval `i` closes once this point's stream has passed its end plus the disorder tolerance
/// (the records of a capture are nearly, not exactly, in timestamp order). Memory: the open
/// intervals, about `1 + disorder / T` of them, times the methods' synopses.
pub struct PointStream {
    role: Role,
    intervals: Intervals,
    disorder_ns: u64,
    methods: Vec<Arc<dyn Method>>,
    open: BTreeMap<u64, Open>,
    watermark: Option<u64>,
    closed_below: u64,
    counters: PointCounters,
    done: bool,
    /// Records are taken only within `[window.0, window.1]`.
    window: (u64, u64),
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
            methods,
            open: BTreeMap::new(),
            watermark: None,
            closed_below: 0,
            counters: PointCounters::default(),
            done: false,
            window: (0, u64::MAX),
        }
    }

    pub fn role(&self) -> Role {
        self.role
    }

    pub fn counters(&self) -> PointCounters {
        self.counters
    }

    /// Newest timestamp seen.
    pub fn watermark(&self) -> Option<u64> {
        self.watermark
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

    /// Feed a batch in capture order: each run of records of one interval goes to every
    /// method's synopsis of that interval (hash once, feed many).
    pub fn push(&mut self, batch: &[PacketRecord], timer: &mut dyn Timer) {
        self.counters.records += batch.len() as u64;
        if let Some(newest) = batch.iter().map(|r| r.ts_ns).max() {
            self.watermark = Some(self.watermark.map_or(newest, |w| w.max(newest)));
        }
        let (lo, hi) = self.window;
        let inside = |ts: u64| lo <= ts && ts <= hi;
        let mut start = 0;
        while start < batch.len() {
            let ts = batch[start].ts_ns;
            if !inside(ts) {
                self.counters.trimmed += 1;
                start += 1;
                continue;
            }
            let i = match self.intervals.index(ts) {
                None => {
                    self.counters.before_origin += 1;
                    start += 1;
                    continue;
                }
                Some(i) if i < self.closed_below || self.done => {
                    self.counters.out_of_order += 1;
                    start += 1;
                    continue;
                }
                Some(i) => i,
            };
            let mut end = start + 1;
            while end < batch.len()
                && inside(batch[end].ts_ns)
                && self.intervals.index(batch[end].ts_ns) == Some(i)
            {
                end += 1;
            }
            let run = &batch[start..end];
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
                    })
                }
            };
            open.packets += run.len() as u64;
            for (k, s) in open.synopses.iter_mut().enumerate() {
                timer.charge(k, &mut || s.record_batch(run));
            }
            start = end;
        }
    }

    /// The point's clock reads `now_ns` and no record older than it is still to come (a live
    /// capture whose link is quiet): the stream passes `now_ns` as a record stamped then would,
    /// so [`drain_closed`](Self::drain_closed) closes the intervals it ends.
    pub fn advance(&mut self, now_ns: u64) {
        self.watermark = Some(self.watermark.map_or(now_ns, |w| w.max(now_ns)));
    }

    /// Close the intervals this point's stream has passed, in index order.
    pub fn drain_closed(&mut self, out: &mut Vec<ClosedInterval>) {
        if self.intervals.is_whole() {
            return;
        }
        let Some(w) = self.watermark else { return };
        while let Some((&i, _)) = self.open.first_key_value() {
            let end = self
                .intervals
                .start_ns(i)
                .saturating_add(self.intervals.length_ns);
            if w < end.saturating_add(self.disorder_ns) {
                break;
            }
            let (i, o) = self.open.pop_first().unwrap();
            self.closed_below = i + 1;
            out.push(o.close(i));
        }
        // intervals with no record are closed too, as the stream passes them
        if let Some(i) = self.intervals.index(w.saturating_sub(self.disorder_ns)) {
            self.closed_below = self.closed_below.max(i);
        }
    }

    /// The stream has ended: every open interval, in index order.
    pub fn finish(&mut self, out: &mut Vec<ClosedInterval>) {
        self.done = true;
        while let Some((i, o)) = self.open.pop_first() {
            out.push(o.close(i));
        }
    }
}

impl Open {
    fn close(self, index: u64) -> ClosedInterval {
        ClosedInterval {
            index,
            packets: self.packets,
            synopses: self.synopses,
        }
    }
}
