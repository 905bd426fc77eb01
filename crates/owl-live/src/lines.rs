//! What a receiver agent writes: one JSON line per interval and a summary, read by the collector
//! (its store and metrics) and by scripts. One set of types for both sides: the agent
//! serialises a [`Line`], the collector deserialises the same [`Line`] — no field is named by a
//! string anywhere else. Unknown fields are ignored when reading (a newer agent may add some).

use owl_core::cut::{CutTally, IntervalCut};
use owl_core::method::Estimate;
use serde::{Deserialize, Serialize};

use crate::clock::ClockReport;

/// The bounds of `owl_one_way_delay_seconds`, ns: 1 µs to 10 s in 1-2-5 steps.
pub const DELAY_BOUNDS_NS: [f64; 22] = [
    1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 2e8, 5e8, 1e9,
    2e9, 5e9, 1e10,
];

/// One line of a receiver agent: `{"type": "interval" | "quiet" | "summary", …}`.
// a line is read, handled and dropped one at a time: no collection holds many of them
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    Interval(IntervalLine),
    Quiet(QuietLine),
    Summary(ReceiverSummary),
}

impl Line {
    /// The line as JSON, on one line (no newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a line serialises: no map with non-string keys")
    }
}

/// What became of an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Estimated by every method (each may still report an error).
    Estimated,
    /// A point recorded it but could not keep it: no estimate.
    Missing,
    /// Only one point recorded it, before the other started or after it stopped.
    LeftOut,
}

impl Status {
    /// As the JSON and the collector's database say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Estimated => "estimated",
            Status::Missing => "missing",
            Status::LeftOut => "left_out",
        }
    }
}

/// One interval's result as R writes it (one JSON line).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IntervalLine {
    /// The path (a point's `[[path]]` name); absent for the single pair of `--role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A path's two points: the sender point's name (as it named itself in the handshake) and
    /// the receiver point's; absent for the single pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub points: Option<[String; 2]>,
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<MethodResult>,
}

impl IntervalLine {
    /// What the types cannot say: a method result holds an estimate or an error, one of the
    /// two (a result whose estimate does not parse has neither).
    pub fn check(&self) -> Result<(), String> {
        for m in &self.methods {
            match (&m.estimate, &m.error) {
                (Some(_), None) | (None, Some(_)) => {}
                (None, None) => {
                    return Err(format!(
                        "interval {}, method {}: neither an estimate nor an error",
                        self.index, m.method
                    ));
                }
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "interval {}, method {}: both an estimate and an error",
                        self.index, m.method
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Intervals `[from, to)` in which neither point recorded a packet (between two written
/// intervals: every index is accounted for).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QuietLine {
    /// The path (a point's `[[path]]` name); absent for the single pair of `--role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub from: u64,
    pub to: u64,
    pub start_ns: u64,
}

/// One method's result for one interval.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ReceiverSummary {
    /// The path (a point's `[[path]]` name); absent for the single pair of `--role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use owl_core::cut::{BoundaryCut, BoundaryReport, Fallback};
    use owl_core::method::Quantiles;

    /// What the agent writes, the collector reads back to the same line: every field of every
    /// kind of line survives the round trip, byte for byte.
    #[test]
    fn every_line_reads_back_as_written() {
        let estimate = Estimate {
            mean_ns: Some(1500.25),
            std_ns: None,
            samples: 90,
            bytes: 4096,
            lost: Some(2),
            mean_ci98_ns: Some([1400.0, 1600.5]),
            std_ci95_ns: None,
            notes: vec!["a note".into()],
            reason: Some("withheld".into()),
            quantiles: Some(Quantiles {
                p50_ns: 1.0,
                p90_ns: 2.0,
                p99_ns: 3.0,
                p999_ns: 4.0,
                p99_ci95_ns: Some([2.5, 3.5]),
                quantiles_relative_error: Some(0.01),
                ..Default::default()
            }),
            recovered: None,
        };
        let buckets = DelayBuckets {
            le_ns: DELAY_BOUNDS_NS.to_vec(),
            weights: (0..=DELAY_BOUNDS_NS.len())
                .map(|k| k as f64 / 3.0)
                .collect(),
            sum_ns: 1e-3 / 7.0,
        };
        let interval = IntervalLine {
            path: Some("a-to-b".into()),
            points: Some(["a".into(), "b".into()]),
            index: 7,
            start_ns: 1_767_225_600_000_000_000,
            status: Status::Estimated,
            reason: None,
            sent: 100,
            received: 98,
            kernel_drops: Some([Some(3), None]),
            clock: Some(ClockReport {
                offset_ns: -2500,
                uncertainty_ns: 40,
                rtt_ns: 80,
                exchanges: 3,
                discarded: 1,
                skew: Some(crate::clock::SkewReport {
                    ppm: 12.5,
                    low_ppm: 12.25,
                    high_ppm: 12.75,
                    span_s: 300.0,
                }),
                drift_ns: Some(12_250),
                steps: 1,
                last_step: Some(crate::clock::ClockStep {
                    at_ns: 1_767_225_590_000_000_000,
                    size_ns: 1_000_000,
                    bound_ns: 90,
                }),
            }),
            cut: Some(IntervalCut {
                start: Some(BoundaryReport {
                    cut: BoundaryCut::Delimiter { nth: 1 },
                    decision: None,
                    held: 12,
                    crossed: 4,
                }),
                end: Some(BoundaryReport {
                    cut: BoundaryCut::Fallback {
                        why: Fallback::NotSeen,
                    },
                    decision: None,
                    held: 3,
                    crossed: 0,
                }),
                held_in: 9,
            }),
            methods: vec![
                MethodResult {
                    method: "opa".into(),
                    estimate: Some(estimate),
                    error: None,
                    delay_histogram: Some(buckets.clone()),
                    class_histograms: Some(vec![ClassBuckets {
                        class: "udp/53".into(),
                        buckets,
                    }]),
                    unclassified: Some(5),
                },
                MethodResult {
                    method: "rda".into(),
                    estimate: None,
                    error: Some("decoding failed".into()),
                    delay_histogram: None,
                    class_histograms: None,
                    unclassified: None,
                },
            ],
        };
        let missing = IntervalLine {
            path: None,
            points: None,
            status: Status::Missing,
            reason: Some("dropped at the sender (overload)".into()),
            kernel_drops: None,
            clock: None,
            cut: None,
            methods: Vec::new(),
            ..interval.clone()
        };
        let summary = ReceiverSummary {
            intervals: 4,
            trimmed: [1, 0],
            cuts: Some(CutTally {
                boundaries: 3,
                unpaired_intervals: vec![2],
                ..Default::default()
            }),
            ..Default::default()
        };
        let quiet = QuietLine {
            path: Some("a-to-b".into()),
            from: 8,
            to: 10,
            start_ns: 5,
        };
        for line in [
            Line::Interval(interval),
            Line::Interval(missing),
            Line::Quiet(quiet),
            Line::Summary(summary),
        ] {
            let json = line.to_json();
            let back: Line = serde_json::from_str(&json).unwrap();
            assert_eq!(back.to_json(), json);
            if let Line::Interval(l) = &back {
                l.check().unwrap();
            }
        }
    }
}
