//! What `owl compare` and `owl estimate` found, as data.
//!
//! One serialisable report per command ([`CompareReport`], [`EstimateReport`]), built once; the
//! text tables ([`text`]), the JSON document and the JSON Lines stream all read it, so the three
//! outputs cannot disagree. Interval entries ([`IntervalReport`], [`EstimateInterval`]) are built
//! as each interval closes, rendered at once (a text row, a JSON line) and kept only for the
//! single JSON document.

pub mod checks;
pub mod text;

use std::collections::BTreeMap;

use owl_core::cut::{Cut, CutTally, IntervalCut};
use owl_core::exact::{IntervalTruth, Truth};
use owl_core::method::{Estimate, FlowEstimate, Quantiles};
use owl_core::pipeline::truth::QUANTILE_RELATIVE_ERROR;
use owl_core::pipeline::{PointCounters, StreamTruth};
use owl_core::stats::{DelaySummary, relative_error};
use owl_trace::records::InputStats;
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

/// A list serialised as a JSON object keyed by name, in list order.
#[derive(Clone, Debug, Default)]
pub struct Named<T>(pub Vec<(String, T)>);

impl<T: Serialize> Serialize for Named<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// One line of a JSON Lines stream: `{"type": KIND, …the fields of the body}`.
#[derive(Serialize)]
pub struct Line<'a, T: Serialize> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    #[serde(flatten)]
    pub body: &'a T,
}

/// One capture: where it came from, what it held, what no interval took.
#[derive(Clone, Debug, Serialize)]
pub struct CaptureReport {
    pub path: String,
    /// Records before the interval origin: in no interval.
    pub before_origin: u64,
    /// Records behind their capture's newest timestamp by more than `--disorder`: in no interval.
    pub out_of_order: u64,
    /// Records outside the window both points captured, kept from the methods.
    pub trimmed: u64,
    #[serde(flatten)]
    pub stats: InputStats,
    /// The truncation that ended the capture early, when it was allowed.
    pub truncated: Option<String>,
}

impl CaptureReport {
    pub fn new(
        path: String,
        stats: InputStats,
        points: &PointCounters,
        truncated: Option<String>,
    ) -> CaptureReport {
        CaptureReport {
            path,
            before_origin: points.before_origin,
            out_of_order: points.out_of_order,
            trimmed: points.trimmed,
            stats,
            truncated,
        }
    }
}

/// The figures of a delay summary, flat (`mean_ns`, `std_ns`, …), `null` without one.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct DelayFields {
    pub mean_ns: Option<f64>,
    pub std_ns: Option<f64>,
    pub min_ns: Option<i64>,
    pub max_ns: Option<i64>,
    pub p50_ns: Option<i64>,
    pub p90_ns: Option<i64>,
    pub p99_ns: Option<i64>,
    pub p999_ns: Option<i64>,
}

impl From<Option<DelaySummary>> for DelayFields {
    fn from(d: Option<DelaySummary>) -> DelayFields {
        DelayFields {
            mean_ns: d.map(|d| d.mean_ns),
            std_ns: d.map(|d| d.std_ns),
            min_ns: d.map(|d| d.min_ns),
            max_ns: d.map(|d| d.max_ns),
            p50_ns: d.map(|d| d.p50_ns),
            p90_ns: d.map(|d| d.p90_ns),
            p99_ns: d.map(|d| d.p99_ns),
            p999_ns: d.map(|d| d.p999_ns),
        }
    }
}

/// The exact truth of the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct TruthReport {
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub loss_rate: f64,
    pub duplicated: u64,
    pub sender_duplicates: u64,
    pub reordered: u64,
    pub unexpected: u64,
    pub negative_delays: u64,
    /// Delays of every matched packet.
    #[serde(flatten)]
    pub delay_fields: DelayFields,
    /// Delays of the packets matched within their interval: what the methods are judged against.
    pub in_interval: Option<DelaySummary>,
    /// Packets R saw later than the horizon (counted lost).
    pub late: u64,
    pub quantiles_exact: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantiles_relative_error: Option<f64>,
    #[serde(skip)]
    pub delay: Option<DelaySummary>,
}

impl TruthReport {
    pub fn new(t: &Truth, stream: &StreamTruth) -> TruthReport {
        TruthReport {
            sent: t.sent,
            received: t.received,
            lost: t.lost,
            loss_rate: t.lost as f64 / t.sent.max(1) as f64,
            duplicated: t.duplicated,
            sender_duplicates: t.sender_duplicates,
            reordered: t.reordered,
            unexpected: t.unexpected,
            negative_delays: t.negative_delays,
            delay_fields: t.delay.into(),
            in_interval: t.in_interval,
            late: stream.late,
            quantiles_exact: stream.quantiles_exact,
            quantiles_relative_error: (!stream.quantiles_exact).then_some(QUANTILE_RELATIVE_ERROR),
            delay: t.delay,
        }
    }
}

/// How a method ran over the whole run (absent from interval entries).
#[derive(Clone, Debug, Serialize)]
pub struct MethodRun {
    /// Wall-clock time spent in the method, seconds.
    pub time_s: f64,
    /// The first error the method's estimator returned, with its interval.
    pub error: Option<String>,
    /// What `samples` counts for this method.
    pub samples_are: &'static str,
}

/// One method's estimate, judged against the truth of the same packets.
#[derive(Clone, Debug, Serialize)]
pub struct MethodReport {
    pub name: String,
    #[serde(flatten)]
    pub estimate: Estimate,
    /// `|estimate − truth| / truth` of the mean (relative).
    pub mean_rel_err: Option<f64>,
    /// `|estimate − truth| / truth` of the standard deviation (relative).
    pub std_rel_err: Option<f64>,
    /// `|estimate − truth| / truth` of the 99th percentile, for methods with quantiles.
    pub p99_rel_err: Option<f64>,
    #[serde(flatten)]
    pub run: Option<MethodRun>,
    /// A per-packet method's packets (`owl compare`, whole run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_packet: Option<PerPacketReport>,
}

/// One of the largest delays a per-packet method gave (OPA §VII-C's anomalies).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Anomaly {
    pub sender_ns: u64,
    pub receiver_ns: u64,
    pub delay_ns: i64,
}

/// What a per-packet method said packet by packet (`Method::estimate_packets`).
#[derive(Clone, Debug, Serialize)]
pub struct PerPacketReport {
    /// Sender packets it reported.
    pub packets: u64,
    /// Placed with a delay.
    pub delivered: u64,
    /// Located as lost.
    pub lost: u64,
    /// Neither (e.g. an OPA group it could not recover).
    pub unplaced: u64,
    /// `delivered` / the truth's received packets.
    pub recovered_fraction: f64,
    /// The method's bytes / the truth's sent packets.
    pub bytes_per_packet: f64,
    /// Delays of the packets placed with a delay.
    #[serde(flatten)]
    pub delay_fields: DelayFields,
    /// Quantiles exact (else from a log-linear histogram, within `QUANTILE_RELATIVE_ERROR`).
    pub quantiles_exact: bool,
    /// The largest delays, largest first.
    pub anomalies: Vec<Anomaly>,
    /// The first error its per-packet answer returned, with its interval.
    pub error: Option<String>,
}

impl PerPacketReport {
    /// The quantiles of its delays, as an estimate carries them.
    pub fn quantiles(&self) -> Option<owl_core::method::Quantiles> {
        let d = &self.delay_fields;
        Some(owl_core::method::Quantiles {
            p50_ns: d.p50_ns? as f64,
            p90_ns: d.p90_ns? as f64,
            p99_ns: d.p99_ns? as f64,
            p999_ns: d.p999_ns? as f64,
            ..Default::default()
        })
    }
}

impl MethodReport {
    pub fn new(name: &str, e: Estimate, truth: Option<DelaySummary>) -> MethodReport {
        MethodReport {
            name: name.to_string(),
            mean_rel_err: relative_error(e.mean_ns, truth.map(|t| t.mean_ns)),
            std_rel_err: relative_error(e.std_ns, truth.map(|t| t.std_ns)),
            p99_rel_err: p99_rel_err(&e, truth),
            estimate: e,
            run: None,
            per_packet: None,
        }
    }
}

/// `|p99 − truth's p99| / truth's p99`, where the estimate has quantiles.
pub fn p99_rel_err(e: &Estimate, truth: Option<DelaySummary>) -> Option<f64> {
    relative_error(
        e.quantiles.as_ref().map(|q| q.p99_ns),
        truth.map(|t| t.p99_ns as f64),
    )
}

/// The truth of one interval.
#[derive(Clone, Debug, Serialize)]
pub struct IntervalTruthReport {
    pub sent: u64,
    pub received: u64,
    pub matched: u64,
    pub lost: u64,
    pub left: u64,
    pub unexpected: u64,
    pub mean_ns: Option<f64>,
    pub std_ns: Option<f64>,
    pub p99_ns: Option<i64>,
}

/// One closed interval: its truth and each method's estimate against it.
#[derive(Clone, Debug, Serialize)]
pub struct IntervalReport {
    pub index: u64,
    pub start_ns: u64,
    pub truth: IntervalTruthReport,
    /// How R cut its side (a delimiter cut): each boundary's rule, the packets R held there and
    /// those in flight at it (`crossed`), and the packets the windows added.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<IntervalCut>,
    /// The methods that gave an estimate, in the order of `--methods`.
    pub methods: Vec<MethodReport>,
}

impl IntervalReport {
    pub fn new(it: &IntervalTruth, estimates: Vec<(&str, Estimate)>) -> IntervalReport {
        IntervalReport {
            index: it.index,
            start_ns: it.start_ns,
            truth: IntervalTruthReport {
                sent: it.sent,
                received: it.received,
                matched: it.matched,
                lost: it.lost,
                left: it.left,
                unexpected: it.unexpected,
                mean_ns: it.delay.map(|d| d.mean_ns),
                std_ns: it.delay.map(|d| d.std_ns),
                p99_ns: it.delay.map(|d| d.p99_ns),
            },
            methods: estimates
                .into_iter()
                .map(|(n, e)| MethodReport::new(n, e, it.delay))
                .collect(),
            cut: None,
        }
    }
}

/// The truth of one flow.
#[derive(Clone, Debug, Serialize)]
pub struct FlowTruthReport {
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub records: u32,
    pub mean_ns: Option<f64>,
    pub std_ns: Option<f64>,
    pub p99_ns: Option<i64>,
}

/// One method's estimate of one flow (every field `null` where it gave none).
#[derive(Clone, Debug, Default, Serialize)]
pub struct FlowMethodReport {
    #[serde(flatten)]
    pub estimate: FlowEstimate,
    /// `|estimate − truth| / truth` of the flow's mean (relative).
    pub mean_rel_err: Option<f64>,
    /// Why interval means the method gave were left out (no delay: beyond the horizon).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One flow: its truth and each per-flow method's estimate.
#[derive(Clone, Debug, Serialize)]
pub struct FlowReport {
    pub proto: u8,
    pub src: String,
    pub dst: String,
    pub sport: u16,
    pub dport: u16,
    pub truth: FlowTruthReport,
    pub methods: Named<FlowMethodReport>,
    #[serde(skip)]
    pub key: owl_core::FlowKey,
}

/// One method's relative errors over the flows of one size bin.
#[derive(Clone, Debug, Serialize)]
pub struct BinMethodReport {
    pub estimated: usize,
    pub missing: usize,
    pub median_rel_err: Option<f64>,
    pub p95_rel_err: Option<f64>,
}

/// Flows of one size bin (packets at the sender) and each method's errors over them.
#[derive(Clone, Debug, Serialize)]
pub struct BinReport {
    pub bin: &'static str,
    pub min_packets: u64,
    pub max_packets: Option<u64>,
    pub flows: usize,
    pub methods: Named<BinMethodReport>,
}

/// The truth of one flow class: the delays of its packets both points recorded in the same
/// interval.
#[derive(Clone, Debug, Serialize)]
pub struct ClassTruthReport {
    pub delays: u64,
    #[serde(flatten)]
    pub delay: DelayFields,
    /// Where the quantiles come from a histogram (past `--exact-quantiles`), its relative error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantiles_relative_error: Option<f64>,
}

/// One method's quantiles of one flow class, from the class's recovered delays merged over
/// the intervals.
#[derive(Clone, Debug, Serialize)]
pub struct ClassMethodReport {
    /// Delays recovered of the class's packets.
    pub delays: u64,
    /// Delivered packets they stand for (each sample for 1/its interval's sampling fraction).
    pub packets: f64,
    /// `p50_ns` … `p999_ns`, their `_ci95_ns` intervals and the histogram's relative accuracy.
    #[serde(flatten)]
    pub quantiles: Option<Quantiles>,
    pub p50_rel_err: Option<f64>,
    pub p99_rel_err: Option<f64>,
    pub p999_rel_err: Option<f64>,
}

/// One flow class (protocol and service port, or `other`): its truth and each method's
/// quantiles.
#[derive(Clone, Debug, Serialize)]
pub struct ClassReport {
    /// `udp/53`, `tcp/443`, `icmp`, … or `other` (the classes past the cap).
    pub class: String,
    /// `null` for `other`.
    pub proto: Option<u8>,
    pub port: Option<u16>,
    pub truth: ClassTruthReport,
    pub methods: Named<ClassMethodReport>,
}

/// Everything `owl compare` found.
#[derive(Clone, Debug, Serialize)]
pub struct CompareReport {
    pub owl_version: &'static str,
    pub sender: CaptureReport,
    pub receiver: CaptureReport,
    /// What owl verified about the pair.
    pub checks: Checks,
    pub horizon_ns: u64,
    pub interval_ns: u64,
    pub origin_ns: u64,
    /// How the two points cut intervals (`rule`: `delimiter` or `clock`).
    pub cut: Cut,
    pub seed: u64,
    pub identity_seed: u64,
    pub memory: Option<u64>,
    pub truth: TruthReport,
    /// Every method asked for, the exact one included when listed, in the order of `--methods`.
    pub methods: Vec<MethodReport>,
    /// Per-interval breakdown (with `--interval T > 0`, in the single JSON document).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<Vec<IntervalReport>>,
    /// Per-flow breakdown (with `--per-flow`), the largest flows first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows: Option<Vec<FlowReport>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_error_bins: Option<Vec<BinReport>>,
    /// Per-class quantiles (with `--per-class`), the busiest classes first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<ClassReport>>,
    /// What the per-class breakdown left out, and why (with `--per-class`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub class_notes: Vec<String>,
    /// Intervals reported.
    #[serde(skip)]
    pub interval_count: u64,
    /// Flows in the truth (`flows` may hold only the largest).
    #[serde(skip)]
    pub flows_total: usize,
    /// Per-flow methods' errors (with `--per-flow`).
    #[serde(skip)]
    pub flow_errors: Vec<(String, String)>,
    /// Per-flow methods' flows without a usable estimate, and why.
    #[serde(skip)]
    pub flow_notes: Vec<(String, String)>,
}

/// The packets each point took, from their packet counters (`owl estimate`).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct PacketCounts {
    /// Packets S took (`null` for files recorded before owl counted them).
    pub sent: Option<u64>,
    /// Packets R took.
    pub received: Option<u64>,
    /// `(sent − received) / sent`: the loss the counters show. Per interval, packets in flight
    /// at a boundary count in S's interval and in R's next one (a negative rate is such an
    /// interval); over the whole run it is the loss, less what R saw more than once.
    pub loss_rate: Option<f64>,
}

impl PacketCounts {
    pub fn new(sent: Option<u64>, received: Option<u64>) -> PacketCounts {
        PacketCounts {
            sent,
            received,
            loss_rate: match (sent, received) {
                (Some(s), Some(r)) if s > 0 => Some((s as f64 - r as f64) / s as f64),
                _ => None,
            },
        }
    }
}

/// One interval of `owl estimate`.
#[derive(Clone, Debug, Serialize)]
pub struct EstimateInterval {
    pub index: u64,
    pub start_ns: u64,
    #[serde(flatten)]
    pub packets: PacketCounts,
    /// Why the interval lies at the edge of one point's capture, where its counters cover
    /// only part of it: its `loss_rate` is withheld and its packets are not in the totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub edge: Option<&'static str>,
    /// How R's side was cut (a delimiter cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<IntervalCut>,
    #[serde(flatten)]
    pub estimate: Estimate,
}

/// Every interval of `owl estimate` together.
#[derive(Clone, Debug, Serialize)]
pub struct EstimateOverall {
    #[serde(flatten)]
    pub packets: PacketCounts,
    #[serde(flatten)]
    pub estimate: Estimate,
}

/// The intervals of `owl estimate`: every one (one JSON document) or how many (JSON Lines).
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum EstimateIntervals {
    List(Vec<EstimateInterval>),
    Count(u64),
}

/// Intervals recorded at one or both points (`owl estimate`).
#[derive(Clone, Debug, Serialize)]
pub struct IntervalsCheck {
    pub both: u64,
    pub sender_only: u64,
    pub receiver_only: u64,
    /// Intervals at the edge of S's, R's capture, where the other point recorded beyond it:
    /// shown with their loss withheld, and left out of the totals.
    #[serde(skip_serializing_if = "is_zero_pair")]
    pub edges: [u64; 2],
}

fn is_zero_pair(x: &[u64; 2]) -> bool {
    *x == [0, 0]
}

/// Intervals left out: only one point recorded them, before the other started or after it
/// stopped (per point: sender, receiver).
#[derive(Clone, Debug, Serialize)]
pub struct EstimateTrimCheck {
    pub enabled: bool,
    pub intervals: [u64; 2],
}

/// Negative estimated means.
#[derive(Clone, Debug, Serialize)]
pub struct EstimateClockCheck {
    pub negative_intervals: u64,
    pub intervals_with_mean: u64,
}

/// What owl verified about a pair of synopsis files (`owl estimate`).
#[derive(Clone, Debug, Serialize)]
pub struct EstimateChecks {
    pub intervals: Check<IntervalsCheck>,
    pub trimmed: Check<EstimateTrimCheck>,
    pub clock: Check<EstimateClockCheck>,
    /// Absent for one interval over the whole capture (no boundary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuts: Option<Check<CutCheck>>,
}

impl EstimateChecks {
    pub fn lines(&self) -> Vec<(&'static str, Status, &str)> {
        let mut v = vec![
            (
                "intervals",
                self.intervals.status,
                self.intervals.summary.as_str(),
            ),
            ("trimmed", self.trimmed.status, &self.trimmed.summary),
            ("clock", self.clock.status, &self.clock.summary),
        ];
        if let Some(c) = &self.cuts {
            v.push(("cuts", c.status, &c.summary));
        }
        v
    }
}

/// Everything `owl estimate` found.
#[derive(Clone, Debug, Serialize)]
pub struct EstimateReport {
    pub checks: EstimateChecks,
    pub method: String,
    pub config: BTreeMap<String, String>,
    pub interval_ns: u64,
    pub origin_ns: u64,
    pub overall: EstimateOverall,
    pub intervals: EstimateIntervals,
}

/// How one check of the input came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The assumption holds.
    Ok,
    /// It did not hold, and owl measured around it (said how in the summary).
    Adjusted,
    /// It did not hold: figures may be off (the summary says which).
    Warning,
}

/// One check: its outcome, one line saying it, and its figures.
#[derive(Clone, Debug, Serialize)]
pub struct Check<T: Serialize> {
    pub status: Status,
    pub summary: String,
    #[serde(flatten)]
    pub data: T,
}

/// Snaplens of the two captures and the bytes packets were identified on.
#[derive(Clone, Debug, Serialize)]
pub struct SnaplenCheck {
    /// Per point (sender, receiver); `null`: no limit.
    pub snaplen: [Option<u32>; 2],
    /// Link type of the interface measured, per point.
    pub linktype: [Option<u32>; 2],
    /// Both identified every packet on at most this many IP bytes (`--identity-bytes`, or the
    /// IP bytes both captures keep when they keep different numbers).
    pub identity_bytes: Option<u32>,
    /// Packets per point longer than that.
    pub identity_cut: [u64; 2],
    /// Packets per point identified on fewer bytes than that (or than their length) because
    /// the snaplen cut them shorter.
    pub identity_short: [u64; 2],
    /// Interfaces measured per point (several: alike interfaces of a pcapng file).
    pub interfaces: [u32; 2],
}

/// When each capture ran, and the window both did.
#[derive(Clone, Debug, Serialize)]
pub struct SpanCheck {
    /// Oldest and newest record per point, ns since the epoch.
    pub sender_ns: Option<(u64, u64)>,
    pub receiver_ns: Option<(u64, u64)>,
    /// Length of the window both captured, ns (0 when they do not overlap).
    pub overlap_ns: u64,
    /// Time only one point was capturing before the other started, and after the other
    /// stopped, ns, with the point that was (`sender`, `receiver`).
    pub lead_in: Option<(String, u64)>,
    pub lead_out: Option<(String, u64)>,
}

/// Packets outside the window both points captured.
#[derive(Clone, Debug, Serialize)]
pub struct TrimCheck {
    /// Trimming was on (`--no-trim` turns it off).
    pub enabled: bool,
    /// Packets only one point could have seen, per point, in no figure of the truth.
    pub packets: [u64; 2],
    /// Records kept from the methods, per point.
    pub records: [u64; 2],
}

/// Packets later than the horizon.
#[derive(Clone, Debug, Serialize)]
pub struct LateCheck {
    pub late: u64,
    pub horizon_ns: u64,
    /// Lost identities forgotten before the run ended (a later sighting would be unexpected).
    pub late_memory_evicted: u64,
}

/// Records no figure could use, per point.
#[derive(Clone, Debug, Default, Serialize)]
pub struct InvalidCheck {
    pub non_ip: [u64; 2],
    pub malformed: [u64; 2],
    pub no_timestamp: [u64; 2],
    pub out_of_order: [u64; 2],
    pub before_origin: [u64; 2],
}

/// Do the two clocks make sense together: no delay below zero, and R's clock against S's
/// from the floor of the delays ([`owl_core::skew`]): its relative skew and its steps.
#[derive(Clone, Debug, Serialize)]
pub struct ClockCheck {
    pub negative_delays: u64,
    pub matched: u64,
    pub min_delay_ns: Option<i64>,
    /// R's clock rate less S's, ppm, as the captures show it (before any correction); `None`
    /// with too few matched packets to fit.
    pub skew_ppm: Option<f64>,
    /// Standard deviation of `skew_ppm` over a bootstrap of the floor's buckets.
    pub skew_uncertainty_ppm: Option<f64>,
    /// `skew_ppm` times the span of the matched packets: what the skew adds to the last delay
    /// over the first, ns.
    pub drift_ns: Option<f64>,
    /// Steps of R's clock found in the floor, in time order.
    pub steps: Vec<owl_core::skew::ClockStep>,
    /// What `--clock correct` removed from R's timestamps (`None`: nothing, `--clock report`).
    pub applied: Option<ClockApplied>,
    /// S's clock minus R's from the two directions between the points (R→S packets matched
    /// beside the S→R ones: [`owl_core::pipeline::truth::directions`]): a true one-way delay is
    /// the measured one plus it, within ± `offset_bound_ns` whatever the paths' asymmetry
    /// (exact when the two directions' smallest delays are equal). `None` without reverse
    /// traffic in both captures.
    pub offset_ns: Option<i64>,
    pub offset_bound_ns: Option<i64>,
}

/// Which way the measured packets travel (`owl compare`). Two captures of both directions hold
/// R→S packets too (S sees them last): unless a filter keeps one direction, they are in every
/// figure as S→R packets with negative delays.
#[derive(Clone, Debug, Serialize)]
pub struct DirectionsCheck {
    /// Host pairs whose measured packets travel both ways, the busiest first (a few listed).
    pub both_ways: Vec<owl_core::pipeline::truth::directions::BothWays>,
    pub host_pairs_both_ways: u64,
    /// Matched packets S→R and R→S among the measured ones.
    pub forward_packets: u64,
    pub reverse_packets: u64,
    /// `--filter`: what it kept, and its mirror image's packets matched R→S.
    pub filter: Option<FilterCheck>,
}

/// What `owl compare --filter` selected.
#[derive(Clone, Debug, Serialize)]
pub struct FilterCheck {
    pub expression: String,
    /// Packets it kept and left out, at S and at R.
    pub kept: [u64; 2],
    pub left_out: [u64; 2],
    /// Packets of its mirror image (the same conversations R→S) seen at R, then at S.
    pub reverse_matched: u64,
}

/// The correction `owl compare --clock correct` applied to R's timestamps before the truth
/// and the methods saw them.
#[derive(Clone, Debug, Serialize)]
pub struct ClockApplied {
    pub skew_ppm: f64,
    pub steps: Vec<owl_core::skew::ClockStep>,
    /// The floor's skew and steps left in the corrected delays (the fit of the second pass).
    pub residual_skew_ppm: Option<f64>,
    pub residual_drift_ns: Option<f64>,
    pub residual_steps: usize,
}

/// How the intervals were cut: each boundary's rule, the packets in flight at the cuts, the
/// intervals left unpaired (`owl compare`, `owl estimate`, agents).
#[derive(Clone, Debug, Serialize)]
pub struct CutCheck {
    /// `delimiter` or `clock`.
    pub rule: &'static str,
    #[serde(flatten)]
    pub tally: CutTally,
    /// Clock cut, `owl compare`: packets the truth saw R put in a later interval than S's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left: Option<u64>,
}

/// What owl verified about the pair of captures (`owl compare`).
#[derive(Clone, Debug, Serialize)]
pub struct Checks {
    pub snaplen: Check<SnaplenCheck>,
    pub spans: Check<SpanCheck>,
    pub trimmed: Check<TrimCheck>,
    pub late: Check<LateCheck>,
    pub invalid: Check<InvalidCheck>,
    pub clock: Check<ClockCheck>,
    pub directions: Check<DirectionsCheck>,
    /// Absent for one interval over the whole capture (no boundary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuts: Option<Check<CutCheck>>,
}

impl Checks {
    /// `(name, status, summary)` of every check, in order.
    pub fn lines(&self) -> Vec<(&'static str, Status, &str)> {
        let mut v = vec![
            (
                "snaplen",
                self.snaplen.status,
                self.snaplen.summary.as_str(),
            ),
            ("spans", self.spans.status, &self.spans.summary),
            ("trimmed", self.trimmed.status, &self.trimmed.summary),
            ("late", self.late.status, &self.late.summary),
            ("invalid", self.invalid.status, &self.invalid.summary),
            ("clock", self.clock.status, &self.clock.summary),
            (
                "directions",
                self.directions.status,
                &self.directions.summary,
            ),
        ];
        if let Some(c) = &self.cuts {
            v.push(("cuts", c.status, &c.summary));
        }
        v
    }
}

/// A method's notes over many intervals, summarised: notes that differ only in the figures
/// after their subject (the text before the first `:`, kept whole) are one kind, counted once
/// per interval, with the first as an example.
#[derive(Clone, Debug, Default)]
pub struct NoteTally {
    /// `(kind, intervals, first note, its interval, last interval counted, the first's start
    /// in ns)`, in order of first appearance.
    kinds: Vec<(String, u64, String, u64, u64, u64)>,
}

/// Kinds of note listed in a summary; the rest are counted.
const NOTE_KINDS: usize = 8;

/// A note with its figures (numbers, after the subject) replaced by `#`.
fn note_kind(n: &str) -> String {
    let (subject, rest) = match n.split_once(':') {
        Some((a, b)) => (a, b),
        None => ("", n),
    };
    let mut kind = String::from(subject);
    let mut in_number = false;
    let mut chars = rest.chars().peekable();
    while let Some(c) = chars.next() {
        let part_of_number = c.is_ascii_digit()
            || (in_number
                && (c == '.' || c == 'e' || c == '-')
                && chars
                    .peek()
                    .is_some_and(|d| d.is_ascii_digit() || *d == '-'));
        if part_of_number {
            if !in_number {
                kind.push('#');
            }
            in_number = true;
        } else {
            in_number = false;
            kind.push(c);
        }
    }
    kind
}

impl NoteTally {
    /// The notes of interval `interval` (its index), which starts at `start_ns`.
    pub fn add(&mut self, interval: u64, start_ns: u64, notes: &[String]) {
        for n in notes {
            let kind = note_kind(n);
            match self.kinds.iter_mut().find(|k| k.0 == kind) {
                Some(k) if k.4 == interval => {}
                Some(k) => {
                    k.1 += 1;
                    k.4 = interval;
                }
                None => self
                    .kinds
                    .push((kind, 1, n.clone(), interval, interval, start_ns)),
            }
        }
    }

    /// One line per kind: in how many of `intervals` it came, and the first one, by its start
    /// in UTC (what a person reads) and its index (what `--json`'s intervals carry).
    pub fn summary(&self, intervals: u64) -> Vec<String> {
        let mut v: Vec<String> = self
            .kinds
            .iter()
            .take(NOTE_KINDS)
            .map(|(_, n, first, i, _, start)| {
                format!(
                    "in {n} of {intervals} intervals, first at {} UTC (interval {i}): {first}",
                    checks::format_utc(*start)
                )
            })
            .collect();
        if self.kinds.len() > NOTE_KINDS {
            v.push(format!(
                "… {} other kinds of note (--json or --jsonl gives every interval's)",
                self.kinds.len() - NOTE_KINDS
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_differing_in_figures_are_one_kind() {
        let mut t = NoteTally::default();
        t.add(
            7,
            7_000_000_000,
            &["bank 1 (p = 1.024e-2): 512/512 rows usable, 52 samples".into()],
        );
        t.add(
            7,
            7_000_000_000,
            &["bank 2 (p = 5.120e-4): 510/512 rows usable, 3 samples".into()],
        );
        t.add(
            8,
            8_000_000_000,
            &["bank 1 (p = 1.024e-2): 511/512 rows usable, 49 samples".into()],
        );
        t.add(
            8,
            8_000_000_000,
            &["decoding incomplete: 21 860 of 1 000 000 packets".into()],
        );
        t.add(
            9,
            9_000_000_000,
            &["decoding incomplete: 20 001 of 1 000 000 packets".into()],
        );
        let s = t.summary(3);
        assert_eq!(s.len(), 3, "{s:?}");
        assert!(
            s[0].starts_with(
                "in 2 of 3 intervals, first at 1970-01-01 00:00:07.000000 UTC (interval 7): bank 1"
            ),
            "{s:?}"
        );
        assert!(
            s[1].starts_with(
                "in 1 of 3 intervals, first at 1970-01-01 00:00:07.000000 UTC (interval 7): bank 2"
            ),
            "{s:?}"
        );
        assert!(
            s[2].starts_with("in 2 of 3 intervals, first at 1970-01-01 00:00:08.000000 UTC (interval 8): decoding"),
            "{s:?}"
        );
    }
}
