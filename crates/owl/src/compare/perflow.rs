//! `owl compare --per-flow`: per-flow truth beside every per-flow method's estimate.
//!
//! The truth of a flow is the exact match of its packets over the whole capture (sent,
//! received, mean and standard deviation of the delays of its matched packets). Every method
//! whose [`Method::estimate_flows`] answers is asked, in each measurement interval, about the
//! flows the sender saw in that interval. A flow's estimates over several intervals
//! (`--interval T > 0`) combine into one: the mean is the mean of the interval means weighted
//! by the method's own estimate of the flow's packets in each interval (1 where it gives none),
//! packets and losses add up. A flow is never asked about in an interval where the sender did
//! not see it: a sketch answers any question, and for an absent flow its answer is the
//! colliding flows' delay.
//!
//! The summary bins flows by their packets at the sender, like LDS Fig. 10 (`<100`,
//! `100–999`, `1000–9999`, `≥10000`), and gives per method the median and 95th percentile of
//! the relative error `|estimate − truth| / truth` of the flow means, over the flows of the bin
//! the method gave an estimate for (the others are counted as `missing`).

use hashbrown::HashMap;
use owl_core::FlowKey;
use owl_core::PacketRecord;
use owl_core::exact::{FlowTruth, Truth};
use owl_core::interval::Intervals;
use owl_core::method::{FlowEstimate, Method, PointSynopsis};
use owl_core::stats::relative_error;

use crate::report::{
    BinMethodReport, BinReport, FlowMethodReport, FlowReport, FlowTruthReport, Named,
};

/// Flow-size bins of the summary (packets at the sender): `[lo, hi)`.
pub const BINS: [(u64, u64, &str); 4] = [
    (0, 100, "<100"),
    (100, 1_000, "100-999"),
    (1_000, 10_000, "1000-9999"),
    (10_000, u64::MAX, ">=10000"),
];

/// Which flows the sender saw in which interval.
#[derive(Debug)]
pub struct Presence {
    iv: Intervals,
    seen: HashMap<u64, hashbrown::HashSet<FlowKey>>,
}

impl Presence {
    pub fn new(iv: Intervals) -> Presence {
        Presence {
            iv,
            seen: HashMap::new(),
        }
    }

    /// Note the flows of a batch of sender records.
    pub fn observe(&mut self, batch: &[PacketRecord]) {
        for r in batch {
            if let Some(i) = self.iv.index(r.ts_ns) {
                self.seen.entry(i).or_default().insert(r.flow);
            }
        }
    }

    /// Drop what was noted of interval `i` (once it is estimated).
    pub fn forget(&mut self, i: u64) {
        self.seen.remove(&i);
    }

    /// The flows seen in interval `i`, in a fixed order.
    pub fn flows(&self, i: u64) -> Vec<FlowKey> {
        let mut v: Vec<FlowKey> = self
            .seen
            .get(&i)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        v.sort_unstable();
        v
    }
}

/// One flow's estimates combined over intervals.
#[derive(Clone, Debug, Default)]
struct Acc {
    weight: f64,
    weighted_mean: f64,
    weighted_sq: f64,
    has_std: bool,
    /// `Σ w·(lo² + m²)` and `Σ w·(hi² + m²)` of the std's intervals, and whether some
    /// interval's std had none (then the combination has none either).
    weighted_ci: (f64, f64),
    ci_missing: bool,
    /// Intervals with a mean, and with a std.
    means: u64,
    stds: u64,
    /// The latest reason the method gave (for a missing mean or std).
    reason: Option<String>,
    packets: Option<f64>,
    lost: Option<f64>,
    /// Interval means left out as no delay at all (beyond the horizon, or not finite), and the
    /// farthest of them.
    unusable: u64,
    farthest: f64,
}

impl Acc {
    /// Add one interval's estimate; a mean beyond `±limit` ns (the horizon: no matched packet
    /// has such a delay) is no delay and is left out, counted.
    fn add(&mut self, e: &FlowEstimate, limit: f64) {
        if let Some(m) = e.mean_ns
            && !(m.is_finite() && m.abs() <= limit)
        {
            self.unusable += 1;
            if m.is_nan() || m.abs() > self.farthest.abs() {
                self.farthest = m;
            }
        }
        if let Some(m) = e.mean_ns.filter(|m| m.is_finite() && m.abs() <= limit) {
            let w = e.packets.filter(|p| *p > 0.0).unwrap_or(1.0);
            self.weight += w;
            self.weighted_mean += w * m;
            self.means += 1;
            if let Some(sd) = e.std_ns {
                self.has_std = true;
                self.stds += 1;
                self.weighted_sq += w * (sd * sd + m * m);
                match e.std_ci95_ns {
                    Some([lo, hi]) => {
                        self.weighted_ci.0 += w * (lo * lo + m * m);
                        self.weighted_ci.1 += w * (hi * hi + m * m);
                    }
                    None => self.ci_missing = true,
                }
            }
        }
        if let Some(why) = &e.reason {
            self.reason = Some(why.clone());
        }
        if let Some(p) = e.packets {
            *self.packets.get_or_insert(0.0) += p;
        }
        if let Some(l) = e.lost {
            *self.lost.get_or_insert(0.0) += l;
        }
    }

    fn estimate(&self) -> FlowEstimate {
        let mean = (self.weight > 0.0).then(|| self.weighted_mean / self.weight);
        let combined = |sq: f64, m: f64| (sq / self.weight - m * m).max(0.0).sqrt();
        // the std of every interval together, as the intervals' stds and means make it; its
        // interval the same from each interval's ends (it grows with each interval's std)
        let std_ok = self.has_std && self.stds == self.means;
        FlowEstimate {
            mean_ns: mean,
            std_ns: match (mean, std_ok) {
                (Some(m), true) => Some(combined(self.weighted_sq, m)),
                _ => None,
            },
            std_ci95_ns: match (mean, std_ok && !self.ci_missing) {
                (Some(m), true) => {
                    let (lo, hi) = self.weighted_ci;
                    Some([combined(lo, m), combined(hi, m)])
                }
                _ => None,
            },
            packets: self.packets,
            lost: self.lost,
            reason: if mean.is_none() || !std_ok {
                self.reason.clone()
            } else {
                None
            },
        }
    }
}

/// One method's per-flow estimates.
#[derive(Debug)]
pub struct MethodFlows {
    pub name: String,
    flows: HashMap<FlowKey, Acc>,
    pub error: Option<String>,
}

impl MethodFlows {
    /// The combined estimate of a flow, if the method gave one.
    pub fn get(&self, f: &FlowKey) -> Option<FlowEstimate> {
        self.flows.get(f).map(|a| a.estimate())
    }

    /// Why a flow's estimate lacks interval means the method gave, if it does.
    pub fn note(&self, f: &FlowKey, horizon_ns: u64) -> Option<String> {
        let a = self.flows.get(f).filter(|a| a.unusable > 0)?;
        Some(format!(
            "{} interval mean(s) left out, down to {}: beyond the {} horizon, no delay",
            a.unusable,
            owl_core::units::format_ns(a.farthest),
            owl_core::units::format_ns(horizon_ns as f64)
        ))
    }

    /// Flows whose every interval mean was left out as no delay, and the farthest such mean.
    pub fn unusable(&self) -> (usize, f64) {
        let mut n = 0;
        let mut far = 0.0f64;
        for a in self.flows.values().filter(|a| a.unusable > 0) {
            if a.weight == 0.0 {
                n += 1;
            }
            if a.farthest.is_nan() || a.farthest.abs() > far.abs() {
                far = a.farthest;
            }
        }
        (n, far)
    }
}

/// Per-flow estimates of every method that gives them.
#[derive(Debug)]
pub struct PerFlow {
    pub presence: Presence,
    pub methods: Vec<MethodFlows>,
    /// The truth's horizon: a flow mean beyond it is no delay.
    pub horizon_ns: u64,
}

impl PerFlow {
    pub fn new(iv: Intervals, horizon_ns: u64) -> PerFlow {
        PerFlow {
            presence: Presence::new(iv),
            methods: Vec::new(),
            horizon_ns,
        }
    }

    /// Ask `method` about the flows of interval `i`, before its synopses are consumed.
    pub fn add_interval(
        &mut self,
        method: &dyn Method,
        sender: &dyn PointSynopsis,
        receiver: &dyn PointSynopsis,
        i: u64,
    ) {
        let keys = self.presence.flows(i);
        if keys.is_empty() {
            return;
        }
        let Some(res) = method.estimate_flows(sender, receiver, &keys) else {
            return;
        };
        let pos = match self.methods.iter().position(|m| m.name == method.name()) {
            Some(p) => p,
            None => {
                self.methods.push(MethodFlows {
                    name: method.name().to_string(),
                    flows: HashMap::new(),
                    error: None,
                });
                self.methods.len() - 1
            }
        };
        let m = &mut self.methods[pos];
        match res {
            Ok(est) => {
                let limit = self.horizon_ns as f64;
                for (k, e) in keys.iter().zip(&est) {
                    m.flows.entry(*k).or_default().add(e, limit);
                }
            }
            Err(e) => {
                m.error.get_or_insert_with(|| format!("interval {i}: {e}"));
            }
        }
    }
}

/// Flows by packets sent, largest first (ties by key), the first `top` of them.
pub fn top_flows(t: &Truth, top: Option<usize>) -> Vec<&FlowTruth> {
    let mut v: Vec<_> = t.flows.iter().collect();
    v.sort_by(|a, b| b.sent.cmp(&a.sent).then(a.key.cmp(&b.key)));
    if let Some(n) = top {
        v.truncate(n);
    }
    v
}

fn truth_mean(f: &FlowTruth) -> Option<f64> {
    f.delay.map(|d| d.mean_ns)
}

/// The flows of the report, largest first, the first `top` of them: their truth and each
/// per-flow method's estimate.
pub fn flows_report(t: &Truth, pf: Option<&PerFlow>, top: Option<usize>) -> Vec<FlowReport> {
    top_flows(t, top)
        .into_iter()
        .map(|f| {
            let methods = pf
                .map(|p| p.methods.as_slice())
                .unwrap_or_default()
                .iter()
                .map(|m| {
                    let r = match m.get(&f.key) {
                        Some(e) => FlowMethodReport {
                            mean_rel_err: relative_error(e.mean_ns, truth_mean(f)),
                            estimate: e,
                            note: pf.and_then(|p| m.note(&f.key, p.horizon_ns)),
                        },
                        None => FlowMethodReport::default(),
                    };
                    (m.name.clone(), r)
                })
                .collect();
            FlowReport {
                proto: f.key.proto,
                src: f.key.src.to_string(),
                dst: f.key.dst.to_string(),
                sport: f.key.sport,
                dport: f.key.dport,
                truth: FlowTruthReport {
                    sent: f.sent,
                    received: f.received,
                    lost: f.sent - f.received,
                    records: f.records,
                    mean_ns: f.delay.map(|d| d.mean_ns),
                    std_ns: f.delay.map(|d| d.std_ns),
                    p99_ns: f.delay.map(|d| d.p99_ns),
                },
                methods: Named(methods),
                key: f.key,
            }
        })
        .collect()
}

/// Relative-error quantiles of one method in one bin.
#[derive(Clone, Debug, PartialEq)]
pub struct BinStats {
    pub flows: usize,
    pub estimated: usize,
    pub median: Option<f64>,
    pub p95: Option<f64>,
}

/// Quantiles of relative errors (nearest rank, [`owl_core::stats::nearest_rank`]'s rule), on
/// errors rounded to 1e-12 (in floating point: no error, however large, saturates).
fn quantiles(errs: &mut [f64]) -> (Option<f64>, Option<f64>) {
    if errs.is_empty() {
        return (None, None);
    }
    errs.sort_by(f64::total_cmp);
    let rank = |p: f64| {
        let n = errs.len();
        let k = ((p * n as f64).ceil() as usize).clamp(1, n);
        (errs[k - 1] * 1e12).round() / 1e12
    };
    (Some(rank(0.5)), Some(rank(0.95)))
}

/// Per bin, per method: how many flows, how many estimated, median and p95 relative error.
pub fn bins(t: &Truth, pf: &PerFlow) -> Vec<(&'static str, Vec<(String, BinStats)>)> {
    BINS.iter()
        .map(|&(lo, hi, label)| {
            let flows: Vec<&FlowTruth> = t
                .flows
                .iter()
                .filter(|f| f.sent >= lo && f.sent < hi && f.delay.is_some())
                .collect();
            let per: Vec<(String, BinStats)> = pf
                .methods
                .iter()
                .map(|m| {
                    let mut errs: Vec<f64> = flows
                        .iter()
                        .filter_map(|f| {
                            relative_error(m.get(&f.key).and_then(|e| e.mean_ns), truth_mean(f))
                        })
                        .collect();
                    let estimated = errs.len();
                    let (median, p95) = quantiles(&mut errs);
                    (
                        m.name.clone(),
                        BinStats {
                            flows: flows.len(),
                            estimated,
                            median,
                            p95,
                        },
                    )
                })
                .collect();
            (label, per)
        })
        .collect()
}

/// The flow-size bins of the report: per method, median and p95 relative error.
pub fn bins_report(t: &Truth, pf: &PerFlow) -> Vec<BinReport> {
    bins(t, pf)
        .into_iter()
        .zip(BINS.iter())
        .map(|((label, per), &(lo, hi, _))| BinReport {
            bin: label,
            min_packets: lo,
            max_packets: (hi != u64::MAX).then(|| hi - 1),
            flows: per.first().map(|p| p.1.flows).unwrap_or(0),
            methods: Named(
                per.into_iter()
                    .map(|(name, s)| {
                        (
                            name,
                            BinMethodReport {
                                estimated: s.estimated,
                                missing: s.flows - s.estimated,
                                median_rel_err: s.median,
                                p95_rel_err: s.p95,
                            },
                        )
                    })
                    .collect(),
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_combine_weighted_by_packets() {
        let mut a = Acc::default();
        let e = |m: f64, p: f64, l: f64| FlowEstimate {
            mean_ns: Some(m),
            std_ns: Some(0.0),
            std_ci95_ns: Some([0.0, 10.0]),
            packets: Some(p),
            lost: Some(l),
            reason: None,
        };
        a.add(&e(100.0, 1.0, 0.0), 1e9);
        a.add(&e(200.0, 3.0, 1.0), 1e9);
        // no delay: beyond the horizon, left out and counted
        a.add(&e(-1.8e16, 2.0, 0.0), 1e9);
        let r = a.estimate();
        assert_eq!(r.mean_ns, Some(175.0));
        assert_eq!(r.packets, Some(6.0));
        assert_eq!(r.lost, Some(1.0));
        // {100, 200, 200, 200}: sd = sqrt(1875)
        assert!((r.std_ns.unwrap() - 1875f64.sqrt()).abs() < 1e-9);
        // each interval's std in [0, 10]: the combined one between the ends' combinations
        let [lo, hi] = r.std_ci95_ns.unwrap();
        assert!((lo - 1875f64.sqrt()).abs() < 1e-9);
        assert!((hi - (1875f64 + 100.0).sqrt()).abs() < 1e-9, "{hi}");
        // an interval with a mean but no std: no combined std, and the reason stays
        a.add(
            &FlowEstimate {
                mean_ns: Some(150.0),
                packets: Some(1.0),
                reason: Some("no std: too few counters".into()),
                ..Default::default()
            },
            1e9,
        );
        let r = a.estimate();
        assert_eq!((r.std_ns, r.std_ci95_ns), (None, None));
        assert_eq!(r.reason.as_deref(), Some("no std: too few counters"));
        assert_eq!((a.unusable, a.farthest), (1, -1.8e16));
        assert_eq!(Acc::default().estimate().mean_ns, None);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let mut v: Vec<f64> = (1..=20).map(|i| i as f64 / 100.0).collect();
        let (m, p) = quantiles(&mut v);
        assert_eq!(m, Some(0.10));
        assert_eq!(p, Some(0.19));
        assert_eq!(quantiles(&mut []), (None, None));
        // errors beyond 9.2e6 do not saturate
        let (m, _) = quantiles(&mut [1e10, 3e10, 2e10]);
        assert_eq!(m, Some(2e10));
    }
}
