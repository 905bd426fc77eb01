//! The collector's Prometheus/OpenMetrics endpoint (`owl collector --metrics ADDR`): the latest
//! interval of every pair and method as gauges, and what went wrong as counters, for
//! Prometheus (or anything that scrapes OpenMetrics text) to keep, aggregate and alert on.
//!
//! ```text
//! owl_one_way_delay_mean_seconds{pair,method}       gauge    the latest estimated interval's mean
//! owl_one_way_delay_std_seconds{pair,method}        gauge    its standard deviation
//! owl_one_way_delay_quantile_seconds{pair,method,quantile}  gauge  p50/p90/p99/p99.9 where the method gives them
//! owl_samples{pair,method}                          gauge    delays the estimate rests on
//! owl_lost_packets{pair,method}                     gauge    the method's loss estimate
//! owl_loss_ratio{pair}                              gauge    1 − received/sent, the packets each point recorded
//!                                                            (absent for an unpaired interval: a cut by R's clock)
//! owl_sent_packets{pair}, owl_received_packets{pair} gauges  the interval's packets at S and R
//! owl_interval_start_seconds{pair}                  gauge    start of the interval the gauges describe
//! owl_path_info{pair,sender_point,receiver_point}   gauge    1 for a point's path (owl agent --config): its
//!                                                            two points, to join on `pair` (group_left)
//! owl_clock_offset_seconds{pair}                    gauge    the sender's clock minus the receiver's (crate::clock)
//! owl_clock_offset_uncertainty_seconds{pair}        gauge    its bound: half the exchange's round trip
//! owl_clock_skew_ppm{pair,sender_point,receiver_point}  gauge  how fast S's clock gains on R's (middle
//!                                                            of the range every exchange of the last
//!                                                            15 min allows; points empty for --role)
//! owl_clock_skew_bound_ppm{pair,sender_point,receiver_point}  gauge  half that range
//! owl_clock_steps{pair,sender_point,receiver_point}  gauge   offset steps the receiver agent found
//! owl_one_way_delay_seconds{pair,method}           histogram  every recovered delay so far (sample, opa,
//!                                                            opa-wavelet), weighted by the packets it stands for
//! owl_class_one_way_delay_seconds{pair,method,class} histogram  the same by flow class (receiver --per-class)
//! owl_intervals_total{pair,status}                  counter  intervals stored: estimated, missing, left_out
//!                                                            (all three from the pair's first line, at 0)
//! owl_decode_failures_total{pair,method}            counter  intervals the method could not estimate
//!                                                            (from the method's first line, at 0)
//! owl_kernel_drops_total{pair,point}                counter  packets the capture ring dropped at S, R
//! owl_cut_boundaries_total{pair,by}                 counter  interval boundaries R cut: delimiter, silent, fallback
//! owl_cut_crossed_packets_total{pair}               counter  packets in flight at a cut, put where S sent them
//! owl_cut_unpaired_intervals_total{pair}            counter  intervals a boundary of which fell back to R's clock
//! owl_reports_refused_total                         counter  reports the collector could not store
//! owl_metric_pairs_dropped_total                    counter  reports of pairs beyond the cap, left out of the metrics
//! owl_metric_class_series_dropped_total             counter  class histograms beyond their cap, left out
//! ```
//!
//! The histogram adds up the delays each interval's line carries in fixed buckets
//! ([`DELAY_BOUNDS_NS`], 1 µs to 10 s in 1-2-5 steps; a delay within α = 1 % of a bound may be
//! counted on its other side): its counts are delivered packets (a `sample` delay stands for
//! 1/f of them, so they are estimates, rounded), for `histogram_quantile()` over any time range
//! and any set of pairs — the merge of quantiles across intervals, pairs and collectors that
//! averaging the quantile gauges cannot give.
//!
//! A gauge shows the pair's latest interval by index: an interval an agent resends after a
//! reconnect, or delivers late, is stored (the database keeps everything) but moves no gauge
//! back in time and is counted once. A method that fails in the latest interval loses its
//! gauges (no stale figure stays up) and counts a decode failure.
//!
//! Bounded: at most [`MAX_PAIRS`] pairs are tracked (later ones are counted in
//! `owl_metric_pairs_dropped_total` and stay in the database), at most [`MAX_CLASS_SERIES`]
//! class histograms (pair, method, class) are (later ones counted in
//! `owl_metric_class_series_dropped_total`), and the endpoint reads at most
//! [`MAX_REQUEST`] bytes of a request; scrapes are answered at once under [`crate::admission`]'s
//! cap and deadline.

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use crate::admission::Admission;

mod endpoint;
use crate::lines::IntervalLine;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Most pairs the metrics describe.
pub const MAX_PAIRS: usize = 4096;
/// Most class histograms (pair, method, class) the metrics keep: a receiver names at most 33
/// classes, so this is about 160 pairs' worth of three recovering methods each.
pub const MAX_CLASS_SERIES: usize = 16_384;
/// Longest request head read from a scraper.
pub const MAX_REQUEST: usize = 8192;
/// How long a scraper may take to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

type FGauge = Gauge<f64, AtomicU64>;

pub use crate::lines::DELAY_BOUNDS_NS;

/// A histogram whose observations carry weights (the packets a recovered delay stands for),
/// exposed with its counts rounded.
#[derive(Clone, Debug, Default)]
struct WeightedHistogram {
    inner: std::sync::Arc<Mutex<Weighted>>,
}

#[derive(Debug, Default)]
struct Weighted {
    /// Upper bounds, seconds (the +Inf bucket is implicit).
    bounds: Vec<f64>,
    /// Weight in each bucket, the last above every bound.
    weights: Vec<f64>,
    sum: f64,
}

impl WeightedHistogram {
    /// Add an interval's bucket weights; `false` (nothing added) when its bounds are not the
    /// ones this histogram has.
    fn add(&self, le_ns: &[f64], weights: &[f64], sum_ns: f64) -> bool {
        let mut h = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let bounds: Vec<f64> = le_ns.iter().map(|b| b / 1e9).collect();
        let weight_ok = |w: &f64| w.is_finite() && *w >= 0.0;
        if weights.len() != bounds.len() + 1
            || !weights.iter().all(weight_ok)
            || !sum_ns.is_finite()
            || !bounds.windows(2).all(|b| b[0] < b[1])
        {
            return false;
        }
        if h.weights.is_empty() {
            h.bounds = bounds;
            h.weights = vec![0.0; weights.len()];
        } else if h.bounds != bounds {
            return false;
        }
        for (a, b) in h.weights.iter_mut().zip(weights) {
            *a += b;
        }
        h.sum += sum_ns / 1e9;
        true
    }
}

impl prometheus_client::metrics::TypedMetric for WeightedHistogram {
    const TYPE: prometheus_client::metrics::MetricType =
        prometheus_client::metrics::MetricType::Histogram;
}

impl prometheus_client::encoding::EncodeMetric for WeightedHistogram {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::MetricEncoder,
    ) -> Result<(), std::fmt::Error> {
        let h = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let buckets: Vec<(f64, u64)> = h
            .bounds
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(h.weights.iter().map(|w| w.round() as u64))
            .collect();
        let count = buckets.iter().map(|b| b.1).sum();
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            h.sum, count, &buckets, None,
        )
    }

    fn metric_type(&self) -> prometheus_client::metrics::MetricType {
        prometheus_client::metrics::MetricType::Histogram
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectionLabels {
    /// `collector` (agents reporting) or `metrics` (scrapes).
    port: String,
    /// `accepted`, `admitted`, `refused`, `shed`, `timed_out` ([`crate::admission::Counts`]).
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PairLabel {
    pair: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PathLabels {
    pair: String,
    sender_point: String,
    receiver_point: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    pair: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuantileLabels {
    pair: String,
    method: String,
    quantile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    pair: String,
    method: String,
    class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    pair: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PointLabels {
    pair: String,
    point: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CutLabels {
    pair: String,
    by: String,
}

/// The quantiles exported (`quantile` label).
const QUANTILES: [&str; 4] = ["0.5", "0.9", "0.99", "0.999"];

/// The collector's metrics.
pub struct Metrics {
    registry: Registry,
    mean: Family<MethodLabels, FGauge>,
    std: Family<MethodLabels, FGauge>,
    quantile: Family<QuantileLabels, FGauge>,
    delay: Family<MethodLabels, WeightedHistogram>,
    class_delay: Family<ClassLabels, WeightedHistogram>,
    /// The class histograms that exist (counted against [`MAX_CLASS_SERIES`]).
    class_series: Mutex<std::collections::HashSet<ClassLabels>>,
    class_series_dropped: Counter,
    samples: Family<MethodLabels, FGauge>,
    lost: Family<MethodLabels, FGauge>,
    loss_ratio: Family<PairLabel, FGauge>,
    sent: Family<PairLabel, FGauge>,
    received: Family<PairLabel, FGauge>,
    start: Family<PairLabel, FGauge>,
    clock_offset: Family<PairLabel, FGauge>,
    clock_uncertainty: Family<PairLabel, FGauge>,
    clock_skew: Family<PathLabels, FGauge>,
    clock_skew_bound: Family<PathLabels, FGauge>,
    clock_steps: Family<PathLabels, Gauge>,
    path_info: Family<PathLabels, Gauge>,
    intervals: Family<StatusLabels, Counter>,
    decode_failures: Family<MethodLabels, Counter>,
    kernel_drops: Family<PointLabels, Counter>,
    cut_boundaries: Family<CutLabels, Counter>,
    cut_crossed: Family<PairLabel, Counter>,
    cut_unpaired: Family<PairLabel, Counter>,
    refused: Counter,
    pairs_dropped: Counter,
    connections: Family<ConnectionLabels, Counter>,
    /// Each tracked pair's latest interval index and the methods its gauges show.
    latest: Mutex<HashMap<String, (u64, Vec<String>)>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            mean: Family::default(),
            std: Family::default(),
            quantile: Family::default(),
            delay: Family::default(),
            class_delay: Family::default(),
            class_series: Mutex::new(std::collections::HashSet::new()),
            class_series_dropped: Counter::default(),
            samples: Family::default(),
            lost: Family::default(),
            loss_ratio: Family::default(),
            sent: Family::default(),
            received: Family::default(),
            start: Family::default(),
            clock_offset: Family::default(),
            clock_uncertainty: Family::default(),
            clock_skew: Family::default(),
            clock_skew_bound: Family::default(),
            clock_steps: Family::default(),
            path_info: Family::default(),
            intervals: Family::default(),
            decode_failures: Family::default(),
            kernel_drops: Family::default(),
            cut_boundaries: Family::default(),
            cut_crossed: Family::default(),
            cut_unpaired: Family::default(),
            refused: Counter::default(),
            pairs_dropped: Counter::default(),
            connections: Family::default(),
            latest: Mutex::new(HashMap::new()),
            registry: Registry::default(),
        };
        registry.register(
            "owl_one_way_delay_mean_seconds",
            "Mean one-way delay of the pair's latest estimated interval, by method",
            m.mean.clone(),
        );
        registry.register(
            "owl_one_way_delay_std_seconds",
            "Standard deviation of the one-way delay in the pair's latest interval, by method",
            m.std.clone(),
        );
        registry.register(
            "owl_one_way_delay_quantile_seconds",
            "One-way delay quantiles of the latest interval, from the methods that give them",
            m.quantile.clone(),
        );
        registry.register(
            "owl_one_way_delay_seconds",
            "One-way delays recovered so far (sample, opa, opa-wavelet), each weighted by the delivered packets it stands for, counts rounded",
            m.delay.clone(),
        );
        registry.register(
            "owl_class_one_way_delay_seconds",
            "One-way delays recovered so far by flow class (protocol and service port, or other), from receivers run with --per-class, weighted like owl_one_way_delay_seconds",
            m.class_delay.clone(),
        );
        registry.register(
            "owl_samples",
            "Delays the latest interval's estimate rests on, by method",
            m.samples.clone(),
        );
        registry.register(
            "owl_lost_packets",
            "Packets the method estimates lost in the latest interval",
            m.lost.clone(),
        );
        registry.register(
            "owl_loss_ratio",
            "1 - received/sent over the packets the two points recorded in the latest interval",
            m.loss_ratio.clone(),
        );
        registry.register(
            "owl_sent_packets",
            "Packets the sender point recorded in the latest interval",
            m.sent.clone(),
        );
        registry.register(
            "owl_received_packets",
            "Packets the receiver point recorded in the latest interval",
            m.received.clone(),
        );
        registry.register(
            "owl_interval_start_seconds",
            "Start of the interval the pair's gauges describe (receiver's clock, Unix time)",
            m.start.clone(),
        );
        registry.register(
            "owl_path_info",
            "1 for a pair that is a point's path: its sender and receiver points (join on pair with group_left)",
            m.path_info.clone(),
        );
        registry.register(
            "owl_clock_offset_seconds",
            "The sender agent's clock minus the receiver's, measured NTP-style over their connection (reported, never applied: a true delay is the measured one plus this)",
            m.clock_offset.clone(),
        );
        registry.register(
            "owl_clock_offset_uncertainty_seconds",
            "Bound on the clock offset's error: half the round trip of the exchange it comes from",
            m.clock_uncertainty.clone(),
        );
        registry.register(
            "owl_clock_skew_ppm",
            "How fast the sender's clock gains on the receiver's, parts per million: the middle of the range of constant skews every clock exchange of the last 15 minutes allows",
            m.clock_skew.clone(),
        );
        registry.register(
            "owl_clock_skew_bound_ppm",
            "Half the range of skews every clock exchange of the last 15 minutes allows, ppm",
            m.clock_skew_bound.clone(),
        );
        registry.register(
            "owl_clock_steps",
            "Steps of the clock offset (or changes of a clock's rate) the receiver agent found since it started",
            m.clock_steps.clone(),
        );
        registry.register(
            "owl_intervals",
            "Intervals stored, by status (estimated, missing, left_out)",
            m.intervals.clone(),
        );
        registry.register(
            "owl_decode_failures",
            "Intervals a method could not estimate (its error is in the database)",
            m.decode_failures.clone(),
        );
        registry.register(
            "owl_kernel_drops",
            "Packets the capture ring dropped, at the sender (S) or receiver (R) point",
            m.kernel_drops.clone(),
        );
        registry.register(
            "owl_cut_boundaries",
            "Interval boundaries the receiver cut, by how: at S's delimiters, where S sent nothing (silent), or by its clock (fallback: a lost or late delimiter)",
            m.cut_boundaries.clone(),
        );
        registry.register(
            "owl_cut_crossed_packets",
            "Packets in flight at an interval cut, which the delimiter put in the interval S sent them in",
            m.cut_crossed.clone(),
        );
        registry.register(
            "owl_cut_unpaired_intervals",
            "Intervals one of whose boundaries fell back to the receiver's clock: their packets at R may not be S's",
            m.cut_unpaired.clone(),
        );
        registry.register(
            "owl_reports_refused",
            "Reports the collector could not store",
            m.refused.clone(),
        );
        registry.register(
            "owl_metric_pairs_dropped",
            "Reports of pairs beyond the metrics' cap (stored, not in the metrics)",
            m.pairs_dropped.clone(),
        );
        registry.register(
            "owl_metric_class_series_dropped",
            "Class histograms (pair, method, class) beyond the metrics' cap, left out",
            m.class_series_dropped.clone(),
        );
        registry.register(
            "owl_connections",
            "Connections to a port (collector, metrics) by what admission did with them: accepted, then admitted, refused, shed (handshakes over the cap) or timed_out (past the handshake deadline)",
            m.connections.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The admission counters of `port` (`collector`, `metrics`), exposed as
    /// `owl_connections_total{port, outcome}`.
    pub fn admission(&self, port: &str) -> crate::admission::Counts {
        let c = |outcome: &str| {
            self.connections
                .get_or_create(&ConnectionLabels {
                    port: port.into(),
                    outcome: outcome.into(),
                })
                .clone()
        };
        crate::admission::Counts {
            accepted: c("accepted"),
            admitted: c("admitted"),
            refused: c("refused"),
            shed: c("shed"),
            timed_out: c("timed_out"),
        }
    }

    /// A report the collector could not store.
    pub fn refused(&self) {
        self.refused.inc();
    }

    /// An interval line the collector stored for `pair` (an `owl agent` receiver's).
    pub fn observe(&self, pair: &str, line: &IntervalLine) {
        let index = line.index;
        let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        let methods_before = match latest.get(pair) {
            Some((last, _)) if index <= *last => return, // a resend or a late delivery
            Some((_, m)) => m.clone(),
            None if latest.len() >= MAX_PAIRS => {
                self.pairs_dropped.inc();
                return;
            }
            None => {
                // a pair's interval counters exist from its first line, at 0, so that
                // increase() and rate() see its first missing interval
                for status in ["estimated", "missing", "left_out"] {
                    let _ = self.intervals.get_or_create(&StatusLabels {
                        pair: pair.into(),
                        status: status.into(),
                    });
                }
                Vec::new()
            }
        };
        let p = PairLabel { pair: pair.into() };
        if let Some([sender, receiver]) = &line.points {
            self.path_info
                .get_or_create(&PathLabels {
                    pair: pair.into(),
                    sender_point: sender.clone(),
                    receiver_point: receiver.clone(),
                })
                .set(1);
        }
        self.intervals
            .get_or_create(&StatusLabels {
                pair: pair.into(),
                status: line.status.as_str().into(),
            })
            .inc();
        for (point, d) in ["S", "R"].iter().zip(line.kernel_drops.unwrap_or_default()) {
            if let Some(d) = d {
                self.kernel_drops
                    .get_or_create(&PointLabels {
                        pair: pair.into(),
                        point: (*point).into(),
                    })
                    .inc_by(d);
            }
        }
        if let Some(cut) = &line.cut {
            if let Some(start) = &cut.start {
                self.cut_boundaries
                    .get_or_create(&CutLabels {
                        pair: pair.into(),
                        by: start.cut.by().into(),
                    })
                    .inc();
                self.cut_crossed.get_or_create(&p).inc_by(start.crossed);
            }
            if cut.fell_back().is_some() {
                self.cut_unpaired.get_or_create(&p).inc();
            }
        }
        let (s, r) = (line.sent, line.received);
        self.sent.get_or_create(&p).set(s as f64);
        self.received.get_or_create(&p).set(r as f64);
        // an unpaired interval's packets at R may not be S's (owl_cut_unpaired_total says so)
        let unpaired = line.cut.as_ref().is_some_and(|c| c.fell_back().is_some());
        if s > 0 && !unpaired {
            self.loss_ratio
                .get_or_create(&p)
                .set((s as f64 - r as f64) / s as f64);
        } else {
            self.loss_ratio.remove(&p);
        }
        self.start.get_or_create(&p).set(line.start_ns as f64 / 1e9);
        if let Some(c) = &line.clock {
            self.clock_offset
                .get_or_create(&p)
                .set(c.offset_ns as f64 / 1e9);
            self.clock_uncertainty
                .get_or_create(&p)
                .set(c.uncertainty_ns as f64 / 1e9);
            let [sender_point, receiver_point] = line.points.clone().unwrap_or_default();
            let path = PathLabels {
                pair: pair.into(),
                sender_point,
                receiver_point,
            };
            match c.skew {
                Some(k) => {
                    self.clock_skew.get_or_create(&path).set(k.ppm);
                    self.clock_skew_bound
                        .get_or_create(&path)
                        .set((k.high_ppm - k.low_ppm) / 2.0);
                }
                None => {
                    self.clock_skew.remove(&path);
                    self.clock_skew_bound.remove(&path);
                }
            }
            self.clock_steps
                .get_or_create(&path)
                .set(i64::try_from(c.steps).unwrap_or(i64::MAX));
        }
        // the gauges of every method shown before are replaced by this interval's
        for method in &methods_before {
            self.clear_method(pair, method);
        }
        let mut shown = Vec::new();
        for m in &line.methods {
            let l = MethodLabels {
                pair: pair.into(),
                method: m.method.clone(),
            };
            // from the method's first line, at 0 (as the interval counters)
            let failures = self.decode_failures.get_or_create(&l).clone();
            let Some(e) = m.estimate.as_ref().filter(|_| m.error.is_none()) else {
                failures.inc();
                continue;
            };
            let set = |family: &Family<MethodLabels, FGauge>, v: Option<f64>| {
                if let Some(v) = v {
                    family.get_or_create(&l).set(v);
                }
            };
            if let Some(h) = &m.delay_histogram {
                self.delay
                    .get_or_create(&l)
                    .add(&h.le_ns, &h.weights, h.sum_ns);
            }
            for h in m.class_histograms.iter().flatten() {
                let cl = ClassLabels {
                    pair: pair.into(),
                    method: m.method.clone(),
                    class: h.class.clone(),
                };
                let mut series = self.class_series.lock().unwrap_or_else(|p| p.into_inner());
                if !series.contains(&cl) {
                    if series.len() >= MAX_CLASS_SERIES {
                        self.class_series_dropped.inc();
                        continue;
                    }
                    series.insert(cl.clone());
                }
                let b = &h.buckets;
                self.class_delay
                    .get_or_create(&cl)
                    .add(&b.le_ns, &b.weights, b.sum_ns);
            }
            set(&self.mean, e.mean_ns.map(|x| x / 1e9));
            set(&self.std, e.std_ns.map(|x| x / 1e9));
            set(&self.samples, Some(e.samples as f64));
            set(&self.lost, e.lost.map(|x| x as f64));
            if let Some(q) = &e.quantiles {
                for (label, v) in QUANTILES
                    .into_iter()
                    .zip([q.p50_ns, q.p90_ns, q.p99_ns, q.p999_ns])
                {
                    self.quantile
                        .get_or_create(&QuantileLabels {
                            pair: pair.into(),
                            method: m.method.clone(),
                            quantile: label.into(),
                        })
                        .set(v / 1e9);
                }
            }
            shown.push(m.method.clone());
        }
        latest.insert(pair.to_string(), (index, shown));
    }

    fn clear_method(&self, pair: &str, method: &str) {
        // (the histograms stay: they add up every interval so far)
        let l = MethodLabels {
            pair: pair.into(),
            method: method.into(),
        };
        for f in [&self.mean, &self.std, &self.samples, &self.lost] {
            f.remove(&l);
        }
        for q in QUANTILES {
            self.quantile.remove(&QuantileLabels {
                pair: pair.into(),
                method: method.into(),
                quantile: q.into(),
            });
        }
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // writing into a String cannot fail
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Serve the metrics over HTTP/1.1 (hyper) on `listener` forever: `GET /metrics` (or `/`)
/// answers the OpenMetrics text, anything else 404 or 405. Scrapes are answered at once, each
/// on its own thread under [`crate::admission`]'s cap and deadline (a client that has not had
/// its answer within [`REQUEST_TIMEOUT`] is closed; idle connections cannot hold the port), and
/// a request head is read to at most [`MAX_REQUEST`] bytes (431 past it).
pub fn serve(listener: TcpListener, metrics: Arc<Metrics>, log: Arc<dyn Fn(&str) + Send + Sync>) {
    let rules = Admission {
        deadline: REQUEST_TIMEOUT,
        counts: Arc::new(metrics.admission("metrics")),
        ..Admission::default()
    };
    crate::admission::serve(
        listener,
        rules,
        move |s| endpoint::answer(s, &metrics),
        |()| {},
        Arc::new(move |m: &str| log(&format!("metrics: {m}"))),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::Line;
    use serde_json::{Value, json};

    /// A test's line as an agent writes it: the fields a test leaves out take zeros.
    fn il(mut v: Value) -> IntervalLine {
        for k in ["start_ns", "sent", "received"] {
            if v.get(k).is_none() {
                v[k] = json!(0);
            }
        }
        for m in v["methods"].as_array_mut().into_iter().flatten() {
            if m.get("error").is_none() {
                for (k, zero) in [
                    ("samples", json!(0)),
                    ("bytes", json!(0)),
                    ("notes", json!([])),
                ] {
                    if m.get(k).is_none() {
                        m[k] = zero;
                    }
                }
            }
        }
        match serde_json::from_value(v).unwrap() {
            Line::Interval(l) => l,
            l => panic!("{l:?}"),
        }
    }

    fn interval(index: u64, mean: Option<f64>) -> Value {
        let m = match mean {
            Some(x) => {
                json!({"method": "rda", "mean_ns": x, "std_ns": 10.0, "samples": 90, "lost": 2,
                       "p50_ns": 500.0, "p90_ns": 800.0, "p99_ns": 900.0, "p999_ns": 950.0})
            }
            None => json!({"method": "rda", "error": "decode failed"}),
        };
        json!({"type": "interval", "index": index, "start_ns": 2_000_000_000u64 + index,
               "status": "estimated", "sent": 100, "received": 98, "kernel_drops": [3, null],
               "clock": {"offset_ns": -2500, "uncertainty_ns": 40, "rtt_ns": 80,
                         "exchanges": 3, "discarded": 0},
               "methods": [m]})
    }

    #[test]
    fn the_latest_interval_shows_and_failures_count() {
        let m = Metrics::new();
        m.observe("a→b", &il(interval(5, Some(1500.0))));
        let t = m.encode();
        assert!(
            t.contains("owl_one_way_delay_mean_seconds{pair=\"a→b\",method=\"rda\"} 0.0000015"),
            "{t}"
        );
        assert!(t.contains("owl_one_way_delay_quantile_seconds{pair=\"a→b\",method=\"rda\",quantile=\"0.99\"} 9e-7"), "{t}");
        assert!(t.contains("owl_loss_ratio{pair=\"a→b\"} 0.02"), "{t}");
        assert!(
            t.contains("owl_clock_offset_seconds{pair=\"a→b\"} -0.0000025"),
            "{t}"
        );
        assert!(
            t.contains("owl_clock_offset_uncertainty_seconds{pair=\"a→b\"} 4e-8"),
            "{t}"
        );
        assert!(
            t.contains("owl_kernel_drops_total{pair=\"a→b\",point=\"S\"} 3"),
            "{t}"
        );
        assert!(
            t.contains("owl_intervals_total{pair=\"a→b\",status=\"estimated\"} 1"),
            "{t}"
        );
        // the counters an alert watches with increase() exist from the pair's (and the
        // method's) first line, at 0, so their first increment is an increase
        for zero in [
            "owl_intervals_total{pair=\"a→b\",status=\"missing\"} 0\n",
            "owl_intervals_total{pair=\"a→b\",status=\"left_out\"} 0\n",
            "owl_decode_failures_total{pair=\"a→b\",method=\"rda\"} 0\n",
        ] {
            assert!(t.contains(zero), "{zero} in {t}");
        }
        assert!(t.ends_with("# EOF\n"), "{t}");
        // a single pair has no points; no skew before the exchanges span 30 s
        assert!(!t.contains("owl_path_info{"), "{t}");
        assert!(!t.contains("owl_clock_skew_ppm{"), "{t}");
        assert!(
            t.contains("owl_clock_steps{pair=\"a→b\",sender_point=\"\",receiver_point=\"\"} 0\n"),
            "{t}"
        );
        // a resend of an older interval moves nothing and counts nothing
        m.observe("a→b", &il(interval(4, Some(9999.0))));
        let t = m.encode();
        assert!(t.contains("} 0.0000015"), "{t}");
        assert!(t.contains("status=\"estimated\"} 1"), "{t}");
        // a failure removes the stale gauges and counts
        m.observe("a→b", &il(interval(6, None)));
        let t = m.encode();
        assert!(!t.contains("owl_one_way_delay_mean_seconds{"), "{t}");
        assert!(
            t.contains("owl_decode_failures_total{pair=\"a→b\",method=\"rda\"} 1"),
            "{t}"
        );
        assert!(t.contains("status=\"estimated\"} 2"), "{t}");
        // with a skew, labelled by the path's points
        let mut v = interval(9, Some(1500.0));
        v["points"] = json!(["a", "b"]);
        v["clock"]["skew"] =
            json!({"ppm": 12.5, "low_ppm": 12.0, "high_ppm": 13.0, "span_s": 300.0});
        v["clock"]["steps"] = json!(2);
        m.observe("a→b", &il(v));
        let t = m.encode();
        for want in [
            "owl_clock_skew_ppm{pair=\"a→b\",sender_point=\"a\",receiver_point=\"b\"} 12.5\n",
            "owl_clock_skew_bound_ppm{pair=\"a→b\",sender_point=\"a\",receiver_point=\"b\"} 0.5\n",
            "owl_clock_steps{pair=\"a→b\",sender_point=\"a\",receiver_point=\"b\"} 2\n",
        ] {
            assert!(t.contains(want), "{want} in {t}");
        }
    }

    /// A point's path names its two points once, in an info gauge to join on `pair`.
    #[test]
    fn a_path_names_its_points() {
        let m = Metrics::new();
        let mut path = interval(5, Some(1500.0));
        path["points"] = json!(["a", "b"]);
        m.observe("a-to-b", &il(path));
        let t = m.encode();
        assert!(
            t.contains(
                "owl_path_info{pair=\"a-to-b\",sender_point=\"a\",receiver_point=\"b\"} 1\n"
            ),
            "{t}"
        );
    }

    /// An unpaired interval (a cut by R's clock: its packets at R may not be S's) shows no
    /// loss ratio, and counts as unpaired; the next paired one shows it again.
    #[test]
    fn an_unpaired_interval_shows_no_loss_ratio() {
        let m = Metrics::new();
        let mut v = interval(5, Some(1500.0));
        v["sent"] = json!(100);
        v["received"] = json!(140);
        v["cut"] = json!({"start": {"cut": {"by": "delimiter", "nth": 0}, "held": 9, "crossed": 0},
                          "end": {"cut": {"by": "fallback", "why": "ended"}, "held": 50, "crossed": 40},
                          "held_in": 9});
        m.observe("a→b", &il(v));
        let t = m.encode();
        assert!(!t.contains("owl_loss_ratio{"), "{t}");
        assert!(
            t.contains("owl_cut_unpaired_intervals_total{pair=\"a→b\"} 1"),
            "{t}"
        );
        m.observe("a→b", &il(interval(6, Some(1500.0))));
        assert!(m.encode().contains("owl_loss_ratio{pair=\"a→b\"} 0.02"));
    }

    /// Two intervals' recovered delays add up into one cumulative histogram, counts rounded;
    /// a resend adds nothing; a line with other bounds or a bad weight is left out.
    #[test]
    fn recovered_delays_add_up_in_a_histogram() {
        let line = |index: u64, weights: Vec<f64>, sum_ns: f64| {
            let mut w = vec![0.0; DELAY_BOUNDS_NS.len() + 1];
            w[..weights.len()].copy_from_slice(&weights);
            json!({"type": "interval", "index": index, "status": "estimated",
                   "methods": [{"method": "sample", "mean_ns": 1500.0,
                       "delay_histogram": {"le_ns": DELAY_BOUNDS_NS, "weights": w,
                                           "sum_ns": sum_ns}}]})
        };
        let m = Metrics::new();
        // 10.4 packets at ≤ 1 µs, 20 in (1, 2] µs
        m.observe("a→b", &il(line(1, vec![10.4, 20.0], 45_000.0)));
        m.observe("a→b", &il(line(2, vec![0.0, 0.0, 5.0], 20_000.0)));
        m.observe("a→b", &il(line(2, vec![1e6], 1.0))); // a resend
        let mut bad = line(3, vec![1.0], 1.0);
        bad["methods"][0]["delay_histogram"]["weights"][0] = json!(-1.0);
        m.observe("a→b", &il(bad));
        let t = m.encode();
        let l = "pair=\"a→b\",method=\"sample\"";
        for want in [
            format!("owl_one_way_delay_seconds_bucket{{le=\"0.000001\",{l}}} 10\n"),
            format!("owl_one_way_delay_seconds_bucket{{le=\"0.000002\",{l}}} 30\n"),
            format!("owl_one_way_delay_seconds_bucket{{le=\"0.000005\",{l}}} 35\n"),
            format!("owl_one_way_delay_seconds_bucket{{le=\"+Inf\",{l}}} 35\n"),
            format!("owl_one_way_delay_seconds_count{{{l}}} 35\n"),
        ] {
            assert!(t.contains(&want), "{want} in {t}");
        }
        let sum: f64 = t
            .lines()
            .find_map(|x| x.strip_prefix(&format!("owl_one_way_delay_seconds_sum{{{l}}} ")))
            .unwrap()
            .parse()
            .unwrap();
        assert!((sum - 65e-6).abs() < 1e-15, "{sum}");
    }

    /// Class histograms add up per (pair, method, class) like the pair's; past their cap they
    /// are counted, not kept.
    #[test]
    fn class_histograms_add_up_per_class_and_are_capped() {
        let line = |index: u64, classes: &[(&str, f64)]| {
            let hist = |w0: f64| {
                let mut w = vec![0.0; DELAY_BOUNDS_NS.len() + 1];
                w[1] = w0;
                json!({"le_ns": DELAY_BOUNDS_NS, "weights": w, "sum_ns": w0 * 1500.0})
            };
            let classes: Vec<Value> = classes
                .iter()
                .map(|(c, w)| {
                    let mut h = hist(*w);
                    h["class"] = json!(c);
                    h
                })
                .collect();
            json!({"type": "interval", "index": index, "status": "estimated",
                   "methods": [{"method": "opa", "mean_ns": 1500.0,
                       "delay_histogram": hist(classes.len() as f64),
                       "class_histograms": classes}]})
        };
        let m = Metrics::new();
        m.observe("a→b", &il(line(1, &[("udp/53", 3.0), ("tcp/443", 4.0)])));
        m.observe("a→b", &il(line(2, &[("udp/53", 2.0), ("other", 1.0)])));
        let t = m.encode();
        let l = |c: &str| format!("pair=\"a→b\",method=\"opa\",class=\"{c}\"");
        for (c, n) in [("udp/53", 5), ("tcp/443", 4), ("other", 1)] {
            let want = format!("owl_class_one_way_delay_seconds_count{{{}}} {n}\n", l(c));
            assert!(t.contains(&want), "{want} in {t}");
        }
        // 8 classes a pair (pairs are capped too: fewer than MAX_PAIRS of them)
        let eight: Vec<(String, f64)> = (0..8).map(|k| (format!("udp/{k}"), 1.0)).collect();
        let eight: Vec<(&str, f64)> = eight.iter().map(|(c, w)| (c.as_str(), *w)).collect();
        let pairs = MAX_CLASS_SERIES / 8 + 52;
        assert!(pairs < MAX_PAIRS);
        for p in 0..pairs {
            m.observe(&format!("p{p}"), &il(line(1, &eight)));
        }
        let t = m.encode();
        let dropped = 3 + 8 * pairs - MAX_CLASS_SERIES;
        assert!(
            t.contains(&format!(
                "owl_metric_class_series_dropped_total {dropped}\n"
            )),
            "{}",
            t.lines()
                .filter(|l| l.contains("dropped"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    #[test]
    fn pairs_beyond_the_cap_are_counted_not_tracked() {
        let m = Metrics::new();
        for p in 0..MAX_PAIRS + 3 {
            m.observe(&format!("p{p}"), &il(interval(1, Some(1.0))));
        }
        let t = m.encode();
        assert!(t.contains("owl_metric_pairs_dropped_total 3"), "{t}");
        assert!(!t.contains(&format!("pair=\"p{MAX_PAIRS}\"")));
    }
}
