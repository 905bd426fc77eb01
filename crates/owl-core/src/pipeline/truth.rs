//! The exact ground truth over two record streams, bounded by the horizon.
//!
//! The store-everything matcher of LDA §III-A, reshaped for streams: a sender packet waits at
//! most a **horizon** `H` (in the receiver's time) for its sighting at R; a receiver packet is
//! matched once the sender's stream has passed its timestamp plus `H`, so that every sender
//! packet it could belong to (one-way delay down to `−H`, for clocks that disagree) has been seen.
//! Then:
//!
//! - a sender packet whose `ts + H` the receiver's stream has passed without a sighting is
//!   **lost**; its identity is remembered (up to [`TruthConfig::late_memory`] identities, the
//!   oldest forgotten first and counted) so that a sighting that comes later still is counted as
//!   **late**, never silently merged with the packet nor taken for a stranger;
//! - a receiver packet with no sender packet is **unexpected**.
//!
//! Within one point the first sighting of an identity is the packet (the rule of
//! [`crate::exact`]); later sightings within the horizon are duplicates. Reordering is RFC 4737's
//! (a received packet is reordered if a packet sent after it was received before it). Receiver
//! packets are matched in the receiver's capture order and sender packets are resolved in the
//! sender's, so every figure is the one the read-everything [`crate::exact::Matcher`] gives
//! whenever every delay lies in `[−H, H]` — the same numbers, in the same floating-point order.
//!
//! Memory is the traffic of about two horizons (the sender table and the receiver queue), the
//! delays of the intervals not yet closed, and, for the whole-run quantiles, at most
//! [`TruthConfig::exact_quantiles`] delays: past that, whole-run quantiles come from a
//! log-linear histogram with a relative error of at most [`QUANTILE_RELATIVE_ERROR`], said in
//! the result ([`StreamTruth::quantiles_exact`]). Mean, standard deviation, minimum and maximum
//! stay exact (integer sums). Per-interval quantiles are always exact.

use std::collections::{BTreeSet, VecDeque};

use hashbrown::{HashMap, HashSet};
use queue::{ChunkedQueue, IdIndex};
use serde::Serialize;
use store::DelayStore;

use crate::exact::{FlowTruth, IntervalTruth, MatchedPacket};
use crate::interval::Intervals;
use crate::record::{FlowKey, PacketRecord};
use crate::stats::DelaySummary;

/// Relative error bound of whole-run quantiles once the delays no longer fit the exact budget
/// (the histogram keeps 2¹¹ sub-buckets per power of two).
pub const QUANTILE_RELATIVE_ERROR: f64 = 1.0 / 2048.0;

/// How the streaming truth is cut and bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TruthConfig {
    pub intervals: Intervals,
    /// Largest one-way delay (plus reordering) accepted, ns.
    pub horizon_ns: u64,
    /// How far back in time a capture may step (records out of timestamp order), ns.
    pub disorder_ns: u64,
    /// Per-flow truth (keeps a flow index and a delay per matched packet until the end).
    pub per_flow: bool,
    /// Keep the identities of lost and unexpected packets (`--unmatched`).
    pub keep_unmatched: bool,
    /// Hand out every matched packet ([`StreamingTruth::drain_matched`], for `--delays`).
    pub keep_matched: bool,
    /// Whole-run delays kept for exact quantiles; past it, the histogram answers.
    pub exact_quantiles: usize,
    /// Identities of lost packets remembered to recognise late arrivals.
    pub late_memory: usize,
    /// Count a packet only one point could have seen as **trimmed**, not lost or unexpected:
    /// a sender packet R never saw, sent so long before R's first record that even the
    /// largest delay measured would have brought it before that record, or sent later than
    /// R's last record by more than that delay (R saw nothing for that long while S sent: it
    /// was not capturing); a receiver packet S never sent, recorded before S's first record
    /// or later than its last by more than the largest delay, or received after S's last
    /// packet once S's stream has ended (FIFO: sent after S stopped). What falls outside is the
    /// lead-in or lead-out of two captures started or stopped at different times; a lost
    /// packet within the largest delay of the other point's first or last record stays lost,
    /// so two captures of the same span lose no real loss to trimming.
    pub trim: bool,
    /// Fit R's clock against S's from the floor of the matched delays ([`crate::skew`]:
    /// bounded state, [`StreamTruth::clock`]).
    pub clock_fit: bool,
}

impl TruthConfig {
    /// Defaults for `intervals` and `horizon_ns`: 10 ms of capture disorder,
    /// [`DEFAULT_EXACT_QUANTILES`] delays for exact quantiles, 1 Mi lost identities remembered.
    pub fn new(intervals: Intervals, horizon_ns: u64) -> TruthConfig {
        TruthConfig {
            intervals,
            horizon_ns,
            disorder_ns: DEFAULT_DISORDER_NS,
            per_flow: false,
            keep_unmatched: false,
            keep_matched: false,
            exact_quantiles: DEFAULT_EXACT_QUANTILES,
            late_memory: 1 << 20,
            trim: false,
            clock_fit: false,
        }
    }
}

/// Default budget of whole-run delays kept for exact quantiles: 4 Mi (packed, 11.5 MiB each for
/// the whole-run and the within-interval summaries when delays span under 8 ms; 32 MiB at most).
pub const DEFAULT_EXACT_QUANTILES: usize = 4 << 20;
/// Default horizon: 1 s of one-way delay.
pub const DEFAULT_HORIZON_NS: u64 = 1_000_000_000;
/// Default capture disorder tolerated: 10 ms.
pub const DEFAULT_DISORDER_NS: u64 = 10_000_000;

const NOT_RECEIVED: u64 = u64::MAX;
const NO_INTERVAL: u64 = u64::MAX;
const NO_FLOW: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Sent {
    ts: u64,
    id: u64,
    recv: u64,
    interval: u64,
    flow: u32,
    /// Its directed host pair's slot in the direction tally.
    dir: u16,
    /// Seen at R outside the horizon (counted late once).
    late: bool,
}

/// A flow still open in the per-flow truth.
#[derive(Debug)]
struct FlowState {
    key: FlowKey,
    sent: u64,
    /// Sender packets of the flow not yet resolved.
    pending: u64,
    /// Delays of its matched packets.
    delays: Vec<i64>,
    last_ts: u64,
}

/// The id of the sender packet in flight at position `q` (low 32 bits of its sequence number)
/// of `sent`, whose front is at `first` (low 32 bits).
fn id_at(sent: &ChunkedQueue<Sent>, first: u32, q: u32) -> u64 {
    sent.get(q.wrapping_sub(first) as usize)
        .expect("an indexed packet is in flight")
        .id
}

#[derive(Clone, Copy, Debug)]
struct Arrival {
    ts: u64,
    id: u64,
    /// The interval R's clock puts it in.
    interval: u64,
    /// Under R's cuts: the boundary whose window holds it, and the other interval it may
    /// belong to (pending there too until its cut is known); `NO_INTERVAL` otherwise.
    window: u64,
    other: u64,
    /// Its position in R's stream.
    seq: u64,
}

#[derive(Debug, Default)]
struct OpenInterval {
    truth: IntervalTruth,
    delays: Vec<i64>,
    /// Sender packets of this interval not yet resolved, receiver packets not yet matched.
    pending: u64,
}

/// Exact mean/std by integer sums, min/max, and either every delay (up to a budget) or a
/// histogram past it.
#[derive(Debug)]
pub struct DelayAcc {
    /// Every delay so far, packed in order ([`store`]): no doubling of one buffer of
    /// millions, about 3 bytes a millisecond-scale delay instead of 8.
    exact: Option<DelayStore>,
    limit: usize,
    count: u64,
    sum: i128,
    sum_sq: Option<i128>,
    min: i64,
    max: i64,
    hist: LogHistogram,
}

impl DelayAcc {
    /// Keep up to `limit` delays for exact quantiles.
    pub fn new(limit: usize) -> DelayAcc {
        DelayAcc {
            exact: Some(DelayStore::new()),
            limit,
            count: 0,
            sum: 0,
            sum_sq: Some(0),
            min: i64::MAX,
            max: i64::MIN,
            hist: LogHistogram::default(),
        }
    }

    pub fn push(&mut self, d: i64) {
        self.count += 1;
        self.sum += d as i128;
        self.sum_sq = self
            .sum_sq
            .and_then(|s| s.checked_add((d as i128).checked_mul(d as i128)?));
        self.min = self.min.min(d);
        self.max = self.max.max(d);
        match self.exact.as_mut() {
            Some(store) if self.count <= self.limit as u64 => store.push(d),
            Some(store) => {
                // past the budget: the histogram takes over, from every delay so far
                store.for_each_chunk(|xs| xs.iter().for_each(|&x| self.hist.record(x)));
                self.hist.record(d);
                self.exact = None;
            }
            None => self.hist.record(d),
        }
    }

    fn extend_sorted(&mut self, ds: &[i64]) {
        for &d in ds {
            self.push(d);
        }
    }

    /// The summary, and whether its quantiles are exact.
    pub fn summary(&mut self) -> (Option<DelaySummary>, bool) {
        if self.count == 0 {
            return (None, true);
        }
        if let Some(store) = self.exact.as_ref() {
            let n = store.len();
            if n <= 4096 {
                let mut v: Vec<i64> = store.iter().collect();
                return (DelaySummary::from_delays(&mut v), true);
            }
            let q = store.select(&crate::stats::quantile_ranks(n));
            let q = [q[0], q[1], q[2], q[3]];
            let s = DelaySummary::from_held(n, store.iter(), self.min, self.max, q);
            return (Some(s), true);
        }
        let n = self.count as f64;
        let mean = self.sum as f64 / n;
        let var = match self
            .sum_sq
            .and_then(|s| s.checked_mul(self.count as i128))
            .and_then(|a| a.checked_sub(self.sum.checked_mul(self.sum)?))
        {
            Some(num) => num as f64 / (n * n),
            None => self.hist.variance_about(mean),
        };
        let q = |p: f64| {
            self.hist
                .nearest_rank(p, self.count)
                .clamp(self.min, self.max)
        };
        let s = DelaySummary {
            count: self.count,
            mean_ns: mean,
            std_ns: var.max(0.0).sqrt(),
            min_ns: self.min,
            max_ns: self.max,
            p50_ns: q(0.50),
            p90_ns: q(0.90),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
        };
        (Some(s), false)
    }
}

/// A mergeable log-linear histogram of signed delays: exact below 2¹¹ ns in magnitude, then
/// 2¹¹ buckets per power of two, so a bucket's representative is within
/// [`QUANTILE_RELATIVE_ERROR`] of every value in it.
#[derive(Clone, Debug, Default)]
pub struct LogHistogram {
    /// `(signed bucket key, count)`; a key orders like the values it holds.
    counts: HashMap<i64, u64>,
}

const SUB_BITS: u32 = 11;

impl LogHistogram {
    fn key_of_magnitude(m: u64) -> i64 {
        if m < (1 << SUB_BITS) {
            return m as i64;
        }
        let e = 63 - m.leading_zeros(); // ≥ SUB_BITS
        let shift = e - SUB_BITS;
        let mant = (m >> shift) as i64; // in [2^11, 2^12)
        (((shift + 1) as i64) << SUB_BITS) + (mant - (1 << SUB_BITS))
    }

    fn magnitude_of_key(k: i64) -> u64 {
        if k < (1 << SUB_BITS) {
            return k as u64;
        }
        let shift = ((k >> SUB_BITS) - 1) as u32;
        let mant = ((k & ((1 << SUB_BITS) - 1)) + (1 << SUB_BITS)) as u64;
        // the middle of the bucket
        (mant << shift) + ((1u64 << shift) >> 1)
    }

    fn key(d: i64) -> i64 {
        let k = Self::key_of_magnitude(d.unsigned_abs());
        if d < 0 { -k - 1 } else { k }
    }

    fn value(k: i64) -> i64 {
        if k < 0 {
            -(Self::magnitude_of_key((-k - 1) as u64 as i64) as i64)
        } else {
            Self::magnitude_of_key(k) as i64
        }
    }

    pub fn record(&mut self, d: i64) {
        *self.counts.entry(Self::key(d)).or_insert(0) += 1;
    }

    /// Add every count of `other`.
    pub fn merge(&mut self, other: &LogHistogram) {
        for (k, c) in &other.counts {
            *self.counts.entry(*k).or_insert(0) += c;
        }
    }

    /// The value of nearest rank `⌈p·n⌉` (bucket representative).
    pub fn nearest_rank(&self, p: f64, n: u64) -> i64 {
        let rank = ((p * n as f64).ceil() as u64).clamp(1, n.max(1));
        let mut keys: Vec<(i64, u64)> = self.counts.iter().map(|(k, c)| (*k, *c)).collect();
        keys.sort_unstable();
        let mut seen = 0;
        for (k, c) in &keys {
            seen += c;
            if seen >= rank {
                return Self::value(*k);
            }
        }
        keys.last().map(|k| Self::value(k.0)).unwrap_or(0)
    }

    fn variance_about(&self, mean: f64) -> f64 {
        let (mut n, mut s) = (0.0, 0.0);
        for (k, c) in &self.counts {
            let x = Self::value(*k) as f64 - mean;
            s += *c as f64 * x * x;
            n += *c as f64;
        }
        if n > 0.0 { s / n } else { 0.0 }
    }
}

/// The truth of two record sets held in memory (experiments, the exact method's pair
/// estimator): the streaming truth with an unbounded horizon, fed every sender record, then every
/// receiver record — what the read-everything [`crate::exact::Matcher`] computes. Returns the
/// whole-run truth and every interval's.
pub fn truth_of(
    sender: &[PacketRecord],
    receiver: &[PacketRecord],
    cfg: TruthConfig,
) -> (StreamTruth, Vec<IntervalTruth>) {
    let mut t = StreamingTruth::new(TruthConfig {
        horizon_ns: u64::MAX,
        exact_quantiles: usize::MAX,
        ..cfg
    });
    t.reserve_sender(sender.len());
    t.push_sender(sender);
    t.finish_sender();
    t.push_receiver(receiver);
    t.finish_receiver();
    let mut closed: Vec<IntervalTruth> = t.drain_closed().collect();
    let (whole, rest) = t.finish();
    closed.extend(rest);
    (whole, closed)
}

/// Whole-run results of the streaming truth (the per-interval ones are handed out as the
/// intervals close, [`StreamingTruth::drain_closed`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamTruth {
    pub sender_records: u64,
    pub receiver_records: u64,
    /// Distinct packets at S.
    pub sent: u64,
    /// Distinct packets of S seen at R within the horizon.
    pub received: u64,
    /// Distinct packets of S not seen at R within the horizon (late ones included).
    pub lost: u64,
    pub sender_duplicates: u64,
    pub duplicated: u64,
    /// Distinct packets at R never seen at S (late ones excluded).
    pub unexpected: u64,
    pub reordered: u64,
    pub negative_delays: u64,
    /// Sightings at R of a packet already counted lost: later than the horizon.
    pub late: u64,
    /// Lost identities forgotten (beyond `late_memory`) before the run ended.
    pub late_memory_evicted: u64,
    /// Records more than the disorder tolerance behind their capture's newest timestamp, whose
    /// interval had closed: counted in the whole-run figures, not in any interval.
    pub out_of_order: [u64; 2],
    /// Records before the interval origin: in the whole-run figures, in no interval.
    pub before_origin: [u64; 2],
    /// Packets only one point could have seen ([`TruthConfig::trim`]), per point: in no figure.
    pub trimmed: [u64; 2],
    /// Oldest and newest record timestamp per point, ns.
    pub span_ns: [Option<(u64, u64)>; 2],
    pub horizon_ns: u64,
    /// Delays of every matched packet.
    pub delay: Option<DelaySummary>,
    /// Delays of packets matched within their interval.
    pub in_interval: Option<DelaySummary>,
    /// False when the whole-run quantiles (`delay`, `in_interval`) come from the histogram.
    pub quantiles_exact: bool,
    pub flows: Vec<FlowTruth>,
    /// R's clock against S's, from the floor of the delays (with [`TruthConfig::clock_fit`],
    /// and enough of them).
    #[serde(skip)]
    pub clock: Option<crate::skew::SkewFit>,
    /// Which way the matched packets travel: both directions in the captures, and the clocks'
    /// offset they give ([`directions`]).
    #[serde(skip)]
    pub directions: directions::Directions,
    #[serde(skip)]
    pub lost_ids: Vec<u64>,
    #[serde(skip)]
    pub unexpected_ids: Vec<u64>,
}

/// The exact matcher over two streams; see the module doc.
#[derive(Debug)]
pub struct StreamingTruth {
    cfg: TruthConfig,
    /// A matched packet counts in the interval S sent it in (a delimiter cut whose cuts the
    /// truth is not told).
    sender_cut: bool,
    /// R's stream is cut where the methods' pair pipeline cut it (a delimiter cut): the
    /// windows, each boundary's decision once known, and the boundaries below which every
    /// decision is known (an unknown one is R's clock).
    receiver_cuts: Option<crate::cut::Delimiters>,
    decisions: std::collections::BTreeMap<u64, crate::cut::Decision>,
    decided_below: u64,
    sent: ChunkedQueue<Sent>,
    first_seq: u64,
    by_id: IdIndex,
    arrivals: ChunkedQueue<Arrival>,
    wm: [Option<u64>; 2],
    /// Oldest timestamp per point.
    first: [Option<u64>; 2],
    trimmed: [u64; 2],
    /// Largest delay of a matched packet so far, ns (0 before any).
    max_delay: u64,
    done: [bool; 2],
    max_send_rank: Option<u64>,
    /// When R received the sender packet of [`max_send_rank`](Self::max_send_rank).
    max_send_rank_recv: u64,
    sender_records: u64,
    sender_duplicates: u64,
    receiver_records: u64,
    receiver_duplicates: u64,
    received: u64,
    lost: u64,
    unexpected: u64,
    reordered: u64,
    negative: u64,
    late: u64,
    out_of_order: [u64; 2],
    before_origin: [u64; 2],
    lost_recent: HashSet<u64>,
    lost_order: VecDeque<u64>,
    lost_evicted: u64,
    strangers: HashSet<u64>,
    stranger_order: VecDeque<(u64, u64)>,
    /// Open intervals by index, and their indices in order (to close them in order).
    open: HashMap<u64, OpenInterval>,
    open_order: BTreeSet<u64>,
    /// Every interval below this index is closed.
    closed_below: u64,
    /// [`closed_below()`](Self::closed_below) as of the start of the batch being pushed.
    closed_below_cached: u64,
    closed: VecDeque<IntervalTruth>,
    all: DelayAcc,
    in_interval: DelayAcc,
    /// Active flows (slots reused once closed) and their slot by key.
    flow_slots: Vec<Option<FlowState>>,
    flow_free: Vec<u32>,
    flow_index: HashMap<FlowKey, u32>,
    /// Closed flows, one record per key (a flow that comes back is merged into its record).
    closed_flows: Vec<FlowTruth>,
    closed_flow_index: HashMap<FlowKey, usize>,
    /// Newest sender timestamp resolved, and when the next sweep of idle flows is due.
    resolved_ts: u64,
    flow_sweep_at: u64,
    lost_ids: Vec<u64>,
    unexpected_ids: Vec<u64>,
    matched: Vec<MatchedPacket>,
    /// The floor of the matched delays, for the clock fit.
    floor: Option<crate::skew::DelayFloor>,
    /// Matched delays by directed host pair: both directions in the captures, and the offset
    /// they give.
    directions: directions::DirectionTally,
}

impl StreamingTruth {
    pub fn new(cfg: TruthConfig) -> StreamingTruth {
        StreamingTruth {
            cfg,
            sender_cut: false,
            receiver_cuts: None,
            decisions: std::collections::BTreeMap::new(),
            decided_below: 0,
            sent: ChunkedQueue::new(),
            first_seq: 0,
            by_id: IdIndex::new(),
            arrivals: ChunkedQueue::new(),
            wm: [None; 2],
            first: [None; 2],
            trimmed: [0; 2],
            max_delay: 0,
            done: [false; 2],
            max_send_rank: None,
            max_send_rank_recv: 0,
            sender_records: 0,
            sender_duplicates: 0,
            receiver_records: 0,
            receiver_duplicates: 0,
            received: 0,
            lost: 0,
            unexpected: 0,
            reordered: 0,
            negative: 0,
            late: 0,
            out_of_order: [0; 2],
            before_origin: [0; 2],
            lost_recent: HashSet::new(),
            lost_order: VecDeque::new(),
            lost_evicted: 0,
            strangers: HashSet::new(),
            stranger_order: VecDeque::new(),
            open: HashMap::new(),
            open_order: BTreeSet::new(),
            closed_below: 0,
            closed_below_cached: 0,
            closed: VecDeque::new(),
            all: DelayAcc::new(cfg.exact_quantiles),
            in_interval: DelayAcc::new(cfg.exact_quantiles),
            flow_slots: Vec::new(),
            flow_free: Vec::new(),
            flow_index: HashMap::new(),
            closed_flows: Vec::new(),
            closed_flow_index: HashMap::new(),
            resolved_ts: 0,
            flow_sweep_at: 0,
            lost_ids: Vec::new(),
            unexpected_ids: Vec::new(),
            matched: Vec::new(),
            floor: cfg.clock_fit.then(crate::skew::DelayFloor::new),
            directions: directions::DirectionTally::new(),
        }
    }

    pub fn config(&self) -> &TruthConfig {
        &self.cfg
    }

    /// Count each matched packet in the interval S sent it in, as a delimiter cut does
    /// ([`crate::cut`]): interval `i` is then the packets S sent in it, wherever R's clock put
    /// them, and none is "left" for the next interval. (Packets only R saw stay where R's clock
    /// puts them.) Set it before the first record.
    pub fn set_sender_cut(&mut self, on: bool) {
        self.sender_cut = on;
    }

    /// Cut R's stream where the pair pipeline cut it ([`crate::cut`]): a receiver record within
    /// `d`'s window of a boundary counts in the interval before or after it as that boundary's
    /// [`learn_cut`](Self::learn_cut) says (it waits for it), so that the truth of interval `i`
    /// holds exactly the packets the methods' interval `i` holds at R — packets reordered across
    /// a cut are `left`, as they are for the methods. Set it before the first record.
    pub fn set_receiver_cuts(&mut self, d: crate::cut::Delimiters) {
        self.receiver_cuts = Some(d);
    }

    /// Where R's stream was cut at boundary `j` (the first word is kept).
    pub fn learn_cut(&mut self, j: u64, d: crate::cut::Decision) {
        self.decisions.entry(j).or_insert(d);
        self.advance();
    }

    /// No decision will come for a boundary below `b`: R's records of such a window (none the
    /// methods held) are cut by R's clock.
    pub fn cuts_known_below(&mut self, b: u64) {
        if b > self.decided_below {
            self.decided_below = b;
            self.advance();
        }
    }

    /// The interval an arrival counts in, given the interval S sent its packet in (`si`).
    fn receiver_interval(&self, a: &Arrival, si: u64) -> u64 {
        use crate::cut::Decision;
        if a.window != NO_INTERVAL {
            let j = a.window;
            return match self.decisions.get(&j) {
                Some(Decision::At(p)) if a.seq >= *p => j,
                Some(Decision::At(_)) | Some(Decision::Before) if j > 0 => j - 1,
                _ => a.interval,
            };
        }
        if self.sender_cut && si != NO_INTERVAL {
            si
        } else {
            a.interval
        }
    }

    /// Packets held: sender packets awaiting resolution and receiver packets awaiting a match.
    pub fn in_flight(&self) -> usize {
        self.sent.len() + self.arrivals.len()
    }

    /// The interval a record of point `p` is accounted in, or `NO_INTERVAL` (before the origin,
    /// or its interval already closed).
    fn interval_of(&mut self, p: usize, ts: u64) -> u64 {
        match self.cfg.intervals.index(ts) {
            None => {
                self.before_origin[p] += 1;
                NO_INTERVAL
            }
            Some(i) if i < self.closed_below_cached => {
                self.out_of_order[p] += 1;
                NO_INTERVAL
            }
            Some(i) => i,
        }
    }

    fn open_at(&mut self, i: u64) -> &mut OpenInterval {
        let iv = self.cfg.intervals;
        let order = &mut self.open_order;
        self.open.entry(i).or_insert_with(|| {
            order.insert(i);
            OpenInterval {
                truth: IntervalTruth {
                    index: i,
                    start_ns: iv.start_ns(i),
                    ..Default::default()
                },
                ..Default::default()
            }
        })
    }

    fn note_wm(&mut self, p: usize, ts: u64) {
        self.wm[p] = Some(self.wm[p].map_or(ts, |w| w.max(ts)));
        self.first[p] = Some(self.first[p].map_or(ts, |f| f.min(ts)));
    }

    /// Was the other point not capturing when a packet seen only at point `p`, at `ts`, could
    /// have been seen there ([`TruthConfig::trim`])? Never while the other point has no record
    /// at all (then nothing is shared, which the caller reports). A sender packet is resolved
    /// only once every receiver packet up to a horizon after it is matched, so the largest
    /// delay is known over at least a horizon of traffic by then.
    fn outside(&self, p: usize, ts: u64) -> bool {
        let o = 1 - p;
        let d = self.max_delay;
        // a sender packet arrives at most d after it left; a receiver packet left before it came
        let early = if p == 0 { ts.saturating_add(d) } else { ts };
        self.cfg.trim
            && self.first[o].is_some_and(|f| {
                early < f
                    || (self.done[o] && self.wm[o].is_some_and(|l| ts > l.saturating_add(d)))
                    || (p == 1 && self.after_senders_last(ts))
            })
    }

    /// S's stream has ended and R received S's last packet before `ts`: on a FIFO path a
    /// packet R received later was sent after it, so S (which saw nothing after it) was no
    /// longer capturing — the lead-out of a sender that stopped first, told by the packets'
    /// order where the largest delay would leave up to that delay of them "unexpected".
    fn after_senders_last(&self, ts: u64) -> bool {
        let last = self.sent_total().checked_sub(1);
        self.done[0] && last.is_some() && self.max_send_rank == last && ts > self.max_send_rank_recv
    }

    /// Record packets seen at the sender.
    pub fn push_sender(&mut self, batch: &[PacketRecord]) {
        self.closed_below_cached = self.closed_below();
        for rec in batch {
            self.sender_records += 1;
            self.note_wm(0, rec.ts_ns);
            if self.seq_of(rec.id).is_some() {
                self.sender_duplicates += 1;
                continue;
            }
            let flow = if self.cfg.per_flow || self.cfg.keep_matched {
                let slot = self.flow_of(&rec.flow);
                let f = self.flow_slots[slot as usize]
                    .as_mut()
                    .expect("an active flow's slot");
                f.sent += 1;
                f.pending += 1;
                f.last_ts = f.last_ts.max(rec.ts_ns);
                slot
            } else {
                NO_FLOW
            };
            let interval = self.interval_of(0, rec.ts_ns);
            if interval != NO_INTERVAL {
                let o = self.open_at(interval);
                o.truth.sent += 1;
                o.pending += 1;
            }
            let dir = self.directions.slot(&rec.flow);
            self.sent.push_back(Sent {
                ts: rec.ts_ns,
                id: rec.id,
                recv: NOT_RECEIVED,
                interval,
                flow,
                dir,
                late: false,
            });
            let seq = (self.sent_total() - 1) as u32;
            let (sent, first) = (&self.sent, self.first_seq as u32);
            self.by_id.insert(rec.id, seq, |q| id_at(sent, first, q));
        }
        self.advance();
    }

    /// Record packets seen at the receiver.
    pub fn push_receiver(&mut self, batch: &[PacketRecord]) {
        self.closed_below_cached = self.closed_below();
        for rec in batch {
            let seq = self.receiver_records;
            self.receiver_records += 1;
            self.note_wm(1, rec.ts_ns);
            let interval = self.interval_of(1, rec.ts_ns);
            if interval != NO_INTERVAL {
                self.open_at(interval).pending += 1;
            }
            let (mut window, mut other) = (NO_INTERVAL, NO_INTERVAL);
            if interval != NO_INTERVAL
                && let Some(j) = self
                    .receiver_cuts
                    .and_then(|d| d.window_of(&self.cfg.intervals, rec.ts_ns))
            {
                window = j;
                // the clock's interval is j − 1 or j; the cut may put it in the other
                other = if interval == j {
                    j.checked_sub(1).unwrap_or(NO_INTERVAL)
                } else {
                    j
                };
                if other != NO_INTERVAL && other >= self.closed_below_cached {
                    self.open_at(other).pending += 1;
                } else {
                    other = NO_INTERVAL;
                }
            }
            self.arrivals.push_back(Arrival {
                ts: rec.ts_ns,
                id: rec.id,
                interval,
                window,
                other,
                seq,
            });
        }
        self.advance();
    }

    /// The sender's stream has ended.
    pub fn finish_sender(&mut self) {
        self.done[0] = true;
        self.advance();
    }

    /// The receiver's stream has ended.
    pub fn finish_receiver(&mut self) {
        self.done[1] = true;
        self.advance();
    }

    fn flow_of(&mut self, key: &FlowKey) -> u32 {
        if let Some(&i) = self.flow_index.get(key) {
            return i;
        }
        let state = FlowState {
            key: *key,
            sent: 0,
            pending: 0,
            delays: Vec::new(),
            last_ts: 0,
        };
        let i = match self.flow_free.pop() {
            Some(i) => {
                self.flow_slots[i as usize] = Some(state);
                i
            }
            None => {
                self.flow_slots.push(Some(state));
                (self.flow_slots.len() - 1) as u32
            }
        };
        self.flow_index.insert(*key, i);
        i
    }

    /// Close flow `slot`: its record joins the closed flows (merged with an earlier record of
    /// the same key).
    fn close_flow(&mut self, slot: u32) {
        let Some(mut f) = self.flow_slots[slot as usize].take() else {
            return;
        };
        self.flow_index.remove(&f.key);
        self.flow_free.push(slot);
        if !self.cfg.per_flow {
            return;
        }
        f.delays.sort_unstable();
        let rec = FlowTruth {
            key: f.key,
            sent: f.sent,
            received: f.delays.len() as u64,
            delay: (!f.delays.is_empty()).then(|| DelaySummary::from_sorted(&f.delays)),
            records: 1,
        };
        match self.closed_flow_index.get(&f.key) {
            Some(&k) => self.closed_flows[k].merge(rec),
            None => {
                self.closed_flow_index
                    .insert(f.key, self.closed_flows.len());
                self.closed_flows.push(rec);
            }
        }
    }

    /// Close the flows with nothing pending and no packet for a horizon.
    fn sweep_flows(&mut self) {
        let h = self.cfg.horizon_ns;
        if self.flow_slots.is_empty() || self.resolved_ts < self.flow_sweep_at {
            return;
        }
        self.flow_sweep_at = self.resolved_ts.saturating_add((h / 4).max(1_000_000));
        let idle: Vec<u32> = self
            .flow_slots
            .iter()
            .enumerate()
            .filter_map(|(i, f)| {
                let f = f.as_ref()?;
                (f.pending == 0 && f.last_ts.saturating_add(h) < self.resolved_ts)
                    .then_some(i as u32)
            })
            .collect();
        for i in idle {
            self.close_flow(i);
        }
    }

    /// Largest delay of a packet matched so far, ns (negative delays count as 0).
    pub fn max_delay(&self) -> u64 {
        self.max_delay
    }

    /// The largest delay known now, ns: of the packets matched so far and of the receiver
    /// packets still waiting to be matched whose sender packet is known (a receiver packet is
    /// matched only once S has passed it by a horizon, so at the end of a capture the newest
    /// horizon of delays is waiting). Negative delays count as 0. One look-up per waiting
    /// receiver packet: for the moment a capture ends (to trim the other's lead-out as
    /// [`TruthConfig::trim`] will), not for every batch.
    pub fn delay_bound(&self) -> u64 {
        let pending = self
            .arrivals
            .iter()
            .filter_map(|a| Some(a.ts.saturating_sub(self.sender_ts(a.id)?)));
        pending.fold(self.max_delay, u64::max)
    }

    /// The timestamp at S of the sender packet with `id`, while it is in flight (not yet
    /// resolved: R has not passed it by a horizon).
    pub fn sender_ts(&self, id: u64) -> Option<u64> {
        let seq = self.seq_of(id)?;
        self.sent.get((seq - self.first_seq) as usize).map(|s| s.ts)
    }

    /// Flows held open now.
    pub fn open_flows(&self) -> usize {
        self.flow_index.len()
    }

    /// Has point `p`'s stream passed `t` (plus the disorder tolerance)?
    fn passed(&self, p: usize, t: u64) -> bool {
        self.done[p] || self.wm[p].is_some_and(|w| w >= t.saturating_add(self.cfg.disorder_ns))
    }

    fn advance(&mut self) {
        let h = self.cfg.horizon_ns;
        // Receiver packets, in R's order, once S has passed every timestamp they could match
        // (and, under R's cuts, once their window's cut is known).
        while let Some(a) = self.arrivals.front().copied() {
            if !self.passed(0, a.ts.saturating_add(h)) {
                break;
            }
            if a.window != NO_INTERVAL
                && a.window >= self.decided_below
                && !self.decisions.contains_key(&a.window)
            {
                break;
            }
            self.arrivals.pop_front();
            self.match_arrival(a);
        }
        // Sender packets, in S's order, once R has passed their timestamp plus the horizon and
        // every receiver packet before that is matched.
        while let Some(s) = self.sent.front().copied() {
            let limit = s.ts.saturating_add(h);
            let ready =
                self.passed(1, limit) && self.arrivals.front().is_none_or(|a| a.ts >= limit);
            if !ready {
                break;
            }
            self.sent.pop_front();
            self.by_id.remove(s.id, self.first_seq as u32);
            self.first_seq += 1;
            self.resolve_sent(s);
        }
        self.sweep_flows();
        // Strangers are remembered for a horizon, to count their duplicates.
        let frontier = self.arrivals.front().map(|a| a.ts);
        while let Some(&(ts, id)) = self.stranger_order.front() {
            let gone = match frontier {
                Some(f) => f > ts.saturating_add(h),
                None => self.passed(1, ts.saturating_add(h)),
            };
            if !gone {
                break;
            }
            self.stranger_order.pop_front();
            self.strangers.remove(&id);
        }
        self.close_intervals();
    }

    fn match_arrival(&mut self, a: Arrival) {
        let found = self.seq_of(a.id);
        let sent_in = found
            .and_then(|q| self.sent.get((q - self.first_seq) as usize))
            .map_or(NO_INTERVAL, |s| s.interval);
        let ri = self.receiver_interval(&a, sent_in);
        let Some(seq) = found else {
            if self.lost_recent.contains(&a.id) {
                self.late += 1;
                self.settle_arrival(&a);
                return;
            }
            if !self.strangers.insert(a.id) {
                self.receiver_duplicates += 1;
                self.settle_arrival(&a);
                return;
            }
            self.stranger_order.push_back((a.ts, a.id));
            if self.outside(1, a.ts) {
                self.trimmed[1] += 1;
                if ri != NO_INTERVAL {
                    self.open_at(ri).truth.trimmed += 1;
                }
                self.settle_arrival(&a);
                return;
            }
            self.unexpected += 1;
            if self.cfg.keep_unmatched {
                self.unexpected_ids.push(a.id);
            }
            if ri != NO_INTERVAL {
                let o = self.open_at(ri);
                o.truth.received += 1;
                o.truth.unexpected += 1;
            }
            self.settle_arrival(&a);
            return;
        };
        let h = self.cfg.horizon_ns;
        let s = self
            .sent
            .get_mut((seq - self.first_seq) as usize)
            .expect("a sender packet in flight is in the queue");
        if s.recv != NOT_RECEIVED {
            self.receiver_duplicates += 1;
            self.settle_arrival(&a);
            return;
        }
        // Outside [−H, H]: the packet is lost to the truth and this sighting is late, whatever
        // order the streams were read in.
        if a.ts > s.ts.saturating_add(h) || a.ts.saturating_add(h) < s.ts {
            if !s.late {
                s.late = true;
                self.late += 1;
            } else {
                self.receiver_duplicates += 1;
            }
            self.settle_arrival(&a);
            return;
        }
        // A timestamp of u64::MAX would read as "not received": nudge it (2554 AD).
        s.recv = a.ts.min(NOT_RECEIVED - 1);
        let si = s.interval;
        let delay = s.recv.wrapping_sub(s.ts) as i64;
        self.max_delay = self.max_delay.max(delay.max(0) as u64);
        self.received += 1;
        match self.max_send_rank {
            Some(m) if seq < m => self.reordered += 1,
            _ => {
                self.max_send_rank = Some(seq);
                self.max_send_rank_recv = a.ts;
            }
        }
        let whole = self.cfg.intervals.is_whole();
        if ri != NO_INTERVAL {
            self.open_at(ri).truth.received += 1;
        }
        if si != NO_INTERVAL && si == ri {
            let o = self.open_at(si);
            o.truth.matched += 1;
            // one interval: its delays are the whole run's, kept once
            if !whole {
                o.delays.push(delay);
            }
        } else {
            if si != NO_INTERVAL {
                self.open_at(si).truth.left += 1;
            }
            if ri != NO_INTERVAL {
                self.open_at(ri).truth.unexpected += 1;
            }
        }
        self.settle_arrival(&a);
    }

    /// A receiver packet is accounted for: in the interval its clock gave it, and in the other
    /// one its window's cut could have given it.
    fn settle_arrival(&mut self, a: &Arrival) {
        self.settle(a.interval);
        self.settle(a.other);
    }

    /// One pending packet of interval `i` is accounted for.
    fn settle(&mut self, i: u64) {
        if i != NO_INTERVAL
            && let Some(o) = self.open.get_mut(&i)
        {
            o.pending -= 1;
        }
    }

    fn resolve_sent(&mut self, s: Sent) {
        if s.recv == NOT_RECEIVED && !s.late && self.outside(0, s.ts) {
            self.trimmed[0] += 1;
            if s.interval != NO_INTERVAL {
                let o = self.open_at(s.interval);
                o.truth.sent -= 1;
                o.truth.trimmed += 1;
            }
            if let Some(Some(f)) = self.flow_slots.get_mut(s.flow as usize) {
                f.sent -= 1;
            }
        } else if s.recv == NOT_RECEIVED {
            self.lost += 1;
            if s.interval != NO_INTERVAL {
                self.open_at(s.interval).truth.lost += 1;
            }
            if self.cfg.keep_unmatched {
                self.lost_ids.push(s.id);
            }
            if self.cfg.late_memory > 0 {
                if self.lost_order.len() >= self.cfg.late_memory
                    && let Some(old) = self.lost_order.pop_front()
                {
                    self.lost_recent.remove(&old);
                    self.lost_evicted += 1;
                }
                if !s.late && self.lost_recent.insert(s.id) {
                    self.lost_order.push_back(s.id);
                }
            }
        } else {
            let d = s.recv.wrapping_sub(s.ts) as i64;
            self.negative += (d < 0) as u64;
            self.all.push(d);
            if let Some(f) = self.floor.as_mut() {
                f.push(s.ts, d);
            }
            self.directions.matched(s.dir, d);
            let flow = self
                .flow_slots
                .get_mut(s.flow as usize)
                .and_then(|f| f.as_mut());
            let key = flow.as_ref().map(|f| f.key).unwrap_or_default();
            if self.cfg.per_flow
                && let Some(f) = flow
            {
                f.delays.push(d);
            }
            if self.cfg.keep_matched {
                self.matched.push(MatchedPacket {
                    id: s.id,
                    sender_ns: s.ts,
                    receiver_ns: s.recv,
                    flow: key,
                });
            }
        }
        if let Some(Some(f)) = self.flow_slots.get_mut(s.flow as usize) {
            f.pending -= 1;
        }
        self.resolved_ts = self.resolved_ts.max(s.ts);
        self.settle(s.interval);
    }

    fn close_intervals(&mut self) {
        let iv = self.cfg.intervals;
        while let Some(&i) = self.open_order.first() {
            let o = &self.open[&i];
            let end = if iv.is_whole() {
                u64::MAX
            } else {
                iv.start_ns(i).saturating_add(iv.length_ns)
            };
            // (both streams done: every interval closes, once no receiver packet waits for
            // its window's cut)
            let both_done = self.done[0] && self.done[1] && self.arrivals.is_empty();
            if !both_done
                && (iv.is_whole() || o.pending > 0 || !self.passed(0, end) || !self.passed(1, end))
            {
                break;
            }
            self.open_order.pop_first();
            let mut o = self
                .open
                .remove(&i)
                .expect("ordered index of an open interval");
            o.delays.sort_unstable();
            if !o.delays.is_empty() {
                o.truth.delay = Some(DelaySummary::from_sorted(&o.delays));
            }
            self.in_interval.extend_sorted(&o.delays);
            self.closed_below = i + 1;
            // a boundary's cut is needed until both intervals it separates are closed
            while let Some((&j, _)) = self.decisions.first_key_value() {
                if j > i {
                    break;
                }
                self.decisions.pop_first();
            }
            self.closed.push_back(o.truth);
        }
    }

    /// Every interval below this index is final: closed, or passed by both streams with nothing
    /// pending (then it held no packet and never will).
    pub fn closed_below(&self) -> u64 {
        let passed = |p: usize| {
            if self.done[p] {
                return u64::MAX;
            }
            self.wm[p]
                .and_then(|w| {
                    self.cfg
                        .intervals
                        .index(w.saturating_sub(self.cfg.disorder_ns))
                })
                .unwrap_or(0)
        };
        let mut b = passed(0).min(passed(1));
        if let Some(&i) = self.open_order.first() {
            b = b.min(i);
        }
        b.max(self.closed_below)
    }

    /// Intervals whose truth is final, in index order.
    pub fn drain_closed(&mut self) -> impl Iterator<Item = IntervalTruth> + '_ {
        self.closed.drain(..)
    }

    /// Matched packets resolved since the last call, in sender order (with `keep_matched`).
    pub fn drain_matched(&mut self) -> impl Iterator<Item = MatchedPacket> + '_ {
        self.matched.drain(..)
    }

    /// Both streams have ended: every packet resolved, every interval closed (drain them
    /// first), the whole-run truth.
    pub fn finish(mut self) -> (StreamTruth, Vec<IntervalTruth>) {
        self.done = [true, true];
        self.decided_below = u64::MAX;
        self.advance();
        let rest: Vec<IntervalTruth> = self.closed.drain(..).collect();
        let (delay, exact_a) = self.all.summary();
        let (in_interval, exact_b) = if self.cfg.intervals.is_whole() {
            (delay, exact_a)
        } else {
            self.in_interval.summary()
        };
        let flows = if self.cfg.per_flow {
            self.flow_truth()
        } else {
            Vec::new()
        };
        let t = StreamTruth {
            sender_records: self.sender_records,
            receiver_records: self.receiver_records,
            sent: self.sent_total() - self.trimmed[0],
            received: self.received,
            lost: self.lost,
            sender_duplicates: self.sender_duplicates,
            duplicated: self.receiver_duplicates,
            unexpected: self.unexpected,
            reordered: self.reordered,
            negative_delays: self.negative,
            late: self.late,
            late_memory_evicted: self.lost_evicted,
            out_of_order: self.out_of_order,
            before_origin: self.before_origin,
            trimmed: self.trimmed,
            span_ns: [0, 1].map(|p| self.first[p].zip(self.wm[p])),
            horizon_ns: self.cfg.horizon_ns,
            delay,
            in_interval,
            quantiles_exact: exact_a && exact_b,
            flows,
            clock: self.floor.as_ref().and_then(|f| f.fit()),
            directions: self.directions.finish(),
            lost_ids: std::mem::take(&mut self.lost_ids),
            unexpected_ids: std::mem::take(&mut self.unexpected_ids),
        };
        (t, rest)
    }

    /// The sequence number of the sender packet in flight with `id`.
    fn seq_of(&self, id: u64) -> Option<u64> {
        let (sent, first) = (&self.sent, self.first_seq);
        let q = self.by_id.find(id, |q| id_at(sent, first as u32, q))?;
        Some(first + u64::from(q.wrapping_sub(first as u32)))
    }

    /// Room in the index for `n` more sender packets.
    fn reserve_sender(&mut self, n: usize) {
        let (sent, first) = (&self.sent, self.first_seq as u32);
        self.by_id.reserve(n, |q| id_at(sent, first, q));
    }

    fn sent_total(&self) -> u64 {
        self.first_seq + self.sent.len() as u64
    }

    fn flow_truth(&mut self) -> Vec<FlowTruth> {
        for i in 0..self.flow_slots.len() {
            self.close_flow(i as u32);
        }
        std::mem::take(&mut self.closed_flows)
    }
}

pub mod directions;
mod queue;
pub mod store;
#[cfg(test)]
mod tests;
