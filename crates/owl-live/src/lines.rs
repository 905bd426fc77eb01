//! What a receiver agent writes: one JSON line per interval and a summary, read by the collector
//! (its store and metrics) and by scripts.

use owl_core::cut::{CutTally, IntervalCut};
use owl_core::method::Estimate;
use serde::Serialize;

use crate::clock::ClockReport;

/// The bounds of `owl_one_way_delay_seconds`, ns: 1 µs to 10 s in 1-2-5 steps.
pub const DELAY_BOUNDS_NS: [f64; 22] = [
    1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 2e8, 5e8, 1e9,
    2e9, 5e9, 1e10,
];

/// What became of an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Estimated by every method (each may still report an error).
    Estimated,
    /// A point recorded it but could not keep it: no estimate.
    Missing,
    /// Only one point recorded it, before the other started or after it stopped.
    LeftOut,
}

/// One interval's result as R writes it (one JSON line).
#[derive(Clone, Debug, Serialize)]
pub struct IntervalLine {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub index: u64,
    pub start_ns: u64,
    pub status: Status,
    /// Why it is missing or left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Packets S and R recorded in the interval.
    pub sent: u64,
    pub received: u64,
    /// Live capture: packets the kernel at S and at R dropped (ring full) since that point's
    /// previous interval closed — in no synopsis; `null` for a point replaying a file or
    /// that closed no interval `index` (no packet in it). Absent when neither point has a
    /// count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_drops: Option<[Option<u64>; 2]>,
    /// The agents' clock offset (S's clock minus R's) measured over their connection, as of
    /// this line ([`crate::clock`]); absent until the first exchange is answered. Reported,
    /// never applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockReport>,
    /// How R cut its side (a delimiter cut, estimated intervals): each boundary's rule, the
    /// packets R held there and those in flight at it ([`owl_core::cut`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<IntervalCut>,
    /// One per method, in the agents' order (estimated intervals only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<MethodResult>,
}

/// Intervals `[from, to)` in which neither point recorded a packet (between two written
/// intervals: every index is accounted for).
#[derive(Clone, Debug, Serialize)]
pub struct QuietLine {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub from: u64,
    pub to: u64,
    pub start_ns: u64,
}

/// One method's result for one interval.
#[derive(Clone, Debug, Serialize)]
pub struct MethodResult {
    pub method: String,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The delays the method recovered (`sample`, `opa`, `opa-wavelet`), in the collector's
    /// fixed buckets: what `owl_one_way_delay_seconds` adds up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_histogram: Option<DelayBuckets>,
    /// With `--per-class`: the same delays by flow class, one entry per class with delays
    /// (what `owl_class_one_way_delay_seconds` adds up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_histograms: Option<Vec<ClassBuckets>>,
    /// With `--per-class`: recovered delays of packets whose class R's tap did not hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unclassified: Option<u64>,
}

/// One flow class's recovered delays in the collector's fixed buckets.
#[derive(Clone, Debug, Serialize)]
pub struct ClassBuckets {
    /// `udp/53`, `tcp/443`, `icmp`, or `other` (classes past the receiver's cap of
    /// [`owl_core::flow_class::DEFAULT_MAX_CLASSES`]).
    pub class: String,
    #[serde(flatten)]
    pub buckets: DelayBuckets,
}

/// Recovered delays in fixed buckets ([`DELAY_BOUNDS_NS`]): `weights[j]` the
/// delivered packets (each recovered delay weighted by the packets it stands for: 1 placed by
/// OPA, 1/f sampled at fraction f) with a delay in `(le_ns[j−1], le_ns[j]]`, and one more
/// weight above the last bound; `sum_ns` their delays' weighted sum. Each delay placed within
/// α = 1 % ([`owl_core::delay_histogram`]).
#[derive(Clone, Debug, Serialize)]
pub struct DelayBuckets {
    pub le_ns: Vec<f64>,
    pub weights: Vec<f64>,
    pub sum_ns: f64,
}

impl DelayBuckets {
    pub(crate) fn of(e: &Estimate) -> Option<DelayBuckets> {
        DelayBuckets::of_histogram(&e.recovered.as_ref()?.histogram)
    }
    pub(crate) fn of_histogram(
        h: &owl_core::delay_histogram::DelayHistogram,
    ) -> Option<DelayBuckets> {
        if h.is_empty() {
            return None;
        }
        let le_ns = DELAY_BOUNDS_NS.to_vec();
        Some(DelayBuckets {
            weights: h.weights_in(&le_ns),
            sum_ns: h.weighted_sum(),
            le_ns,
        })
    }
}

/// Where the receiver's lines also go (the collector's queue).
pub type LineSink = Box<dyn FnMut(&str) + Send>;

/// What the receiver did, written as the last line.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReceiverSummary {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Intervals estimated.
    pub intervals: u64,
    /// Intervals only S / only R recorded, before the other started or after it stopped.
    pub trimmed: [u64; 2],
    /// Intervals a point recorded and dropped (overload): reported missing.
    pub missing: u64,
    /// Intervals dropped at S and at R.
    pub dropped: [u64; 2],
    /// Connections from the sender that broke, and senders that connected after one did.
    pub reconnects: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// How the boundaries were cut (a delimiter cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuts: Option<CutTally>,
}
