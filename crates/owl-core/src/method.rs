//! The contract every method follows, and the object-safe interface `owl` runs them through.
//!
//! A method is a factory of per-point synopses (one per observation point and measurement
//! interval) plus a pair estimator. Every record is dissected and hashed once, then fed to every
//! synopsis ("hash once, feed many sketches").
//!
//! # The contract
//!
//! Each method is one module under `src/methods/` with the same shape and the same names:
//!
//! - **`Config`** — everything both points must agree on, a [`MethodConfig`] (its fields by
//!   name). Fields are private; it is built by `Config::new(…)` (or a builder) that calls
//!   `validate()`, so a `Config` that exists is sound. Where its fields are plain values it is
//!   declared once with [`method_config!`](crate::method_config), which gives its pairs, its
//!   parser and its unknown-field error ([`DeclaredConfig`]).
//!   The pair check is named `check_pair` everywhere and names the first field that differs
//!   ([`MethodError::ConfigMismatch`]): `Config::check_pair(&sender, &receiver)` where the
//!   synopses carry their configuration (LDA, RDA, LDS, FineComb); for the others, both points'
//!   configurations are compared field by field from their synopsis files
//!   ([`crate::wire::SynopsisFile::check_pair`]).
//! - **The per-point synopsis** — `Synopsis` when both points keep the same structure,
//!   `SenderSynopsis` / `ReceiverSynopsis` when they differ (probing, RLI, SDS). Its doc names
//!   the paper's structure (aggregator, sketch, cache, …). It records packets through one entry
//!   point, `record_batch(&[PacketRecord])`, and implements [`TypedSynopsis`] (and so, through
//!   the generic adapter, [`PointSynopsis`]).
//! - **The payload** — written with [`crate::wire::WireWriter`] and read with
//!   [`crate::wire::WireReader`] (which checks every length against what is left); its layout
//!   is in the module doc and pinned byte for byte by a golden file
//!   (`crates/owl-core/tests/golden/`). Changing a layout changes its golden file and the
//!   synopsis file version ([`crate::wire::STREAM_VERSION`]), with a test that files of the old
//!   version are refused with a clear message.
//! - **The method** — a `NameMethod` implementing [`TypedMethod`]: its `Config`, `Sender` and
//!   `Receiver` types and one pair estimator [`TypedMethod::estimate`] on them (it calls
//!   `check_pair` first), with per-flow and per-packet answers as optional parts. One generic
//!   adapter makes it a [`Method`], the only code that turns a `dyn PointSynopsis` back into
//!   its type ([`sender_of`], [`receiver_of`] for code that drives one method's points
//!   itself); no method module downcasts.
//! - **The descriptor** — a [`MethodInfo`] (`pub const INFO`, or one constant per variant)
//!   listed once in [`crate::registry::METHODS`], passing [`crate::registry::check`]. Adding a
//!   method is its module and that one line.
//! - **Quantiles** — a method that recovers individual delays fills [`Estimate::quantiles`]
//!   (nearest rank over the interval's delays, each with its 95 % interval where sound) and
//!   [`Estimate::recovered`]: the same delays in a [`DelayHistogram`], each weighted by the
//!   packets it stands for, and how they were obtained ([`DelayBasis`]). [`Combiner`] merges
//!   the histograms of the intervals (it never averages quantiles), so the quantiles over many
//!   intervals are those of every interval's delays together, within the histogram's relative
//!   accuracy, in memory bounded by its cap whatever the number of intervals. Such a method
//!   also answers [`Method::recovered_packets`] (the same delays with their packets'
//!   identities), which breaks them down by flow class ([`crate::flow_class`]).
//! - **Citations** — the module doc cites the paper's section and equation for each step (the
//!   papers' titles are in the crate doc).
use std::any::Any;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::delay_histogram::DelayHistogram;
use crate::record::{FlowKey, PacketRecord};

/// Which observation point a synopsis belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Sender,
    Receiver,
}

/// What an aggregate method estimates for one interval, and what the estimate rests on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Estimated mean one-way delay, ns.
    pub mean_ns: Option<f64>,
    /// Estimated standard deviation of the delay, ns (population), `None` where the method has
    /// none.
    pub std_ns: Option<f64>,
    /// Number of packets the mean rests on (the effective sample size for LDA, decoded-and-kept
    /// packets for RDA, matched probes for probing).
    pub samples: u64,
    /// Bytes that would cross the network between the points for this interval.
    pub bytes: u64,
    /// Estimated number of lost packets, where the method gives one.
    pub lost: Option<u64>,
    /// Confidence interval of the mean where the paper gives a bound (98 %, ns).
    pub mean_ci98_ns: Option<[f64; 2]>,
    /// 95 % confidence interval of the standard deviation, ns, where the method's samples allow
    /// a sound one (each method's documentation says which interval, or why none).
    pub std_ci95_ns: Option<[f64; 2]>,
    /// Human-readable remarks (decoding failures, unusable rows, …).
    pub notes: Vec<String>,
    /// Why figures the method normally gives are withheld (`null`) in this interval: the
    /// interval breaks a rule its estimate rests on (a cut that fell back, for a method that
    /// assumes both points aggregate the same packets; too few packets placed, …). `None`
    /// where nothing is withheld.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Delay quantiles, from methods that recover individual delays (in the JSON, the fields of
    /// [`Quantiles`] sit beside `mean_ns`, and are absent for methods without them).
    #[serde(flatten)]
    pub quantiles: Option<Quantiles>,
    /// The interval's recovered delays, for [`Combiner`] to merge with other intervals' (not
    /// in the JSON; `None` for methods that recover no individual delay). A consumer that keeps
    /// many estimates drops it once it has added them to its combiner.
    #[serde(skip)]
    pub recovered: Option<RecoveredDelays>,
}

/// The delays a method recovered over an interval, as a mergeable histogram, and what they
/// rest on: what [`Combiner`] needs for quantiles over many intervals.
#[derive(Clone, Debug, PartialEq)]
pub struct RecoveredDelays {
    /// Each recovered delay, weighted by the delivered packets it stands for.
    pub histogram: DelayHistogram,
    pub basis: DelayBasis,
}

/// How a method's recovered delays relate to the delivered packets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DelayBasis {
    /// Every delivered packet the method placed, weight 1 each (OPA): `unplaced` received
    /// packets got no delay, and each placed delay is off by at most `max_error_ns` (the
    /// timestamp codec's; 0 when lossless).
    Placed { unplaced: u64, max_error_ns: u64 },
    /// A uniform random sample of the delivered packets, each included with probability
    /// `fraction`, weight `1/fraction` each (`sample`'s coordinated sampling); each delay off by
    /// at most `max_error_ns` (timestamps shipped at a coarser resolution; 0 at 1 ns).
    Sampled { fraction: f64, max_error_ns: u64 },
}

/// One delivered packet whose delay a method recovered, with its identity: what
/// [`crate::flow_class`] needs to put the delay in its packet's class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveredPacket {
    pub id: u64,
    pub delay_ns: i64,
}

/// The packets behind one interval's [`RecoveredDelays`] ([`Method::recovered_packets`]): the
/// same delays, each with its identity, and the same basis.
#[derive(Clone, Debug, PartialEq)]
pub struct RecoveredPackets {
    pub basis: DelayBasis,
    pub packets: Vec<RecoveredPacket>,
}

impl RecoveredDelays {
    /// Delays on `basis`: each weighted 1 when placed, `1/fraction` when sampled.
    pub fn of(delays: &[i64], basis: DelayBasis) -> RecoveredDelays {
        match basis {
            DelayBasis::Placed {
                unplaced,
                max_error_ns,
            } => RecoveredDelays::placed(delays, unplaced, max_error_ns),
            DelayBasis::Sampled {
                fraction,
                max_error_ns,
            } => RecoveredDelays::sampled(delays, fraction, max_error_ns),
        }
    }
    /// Placed delays (see [`DelayBasis::Placed`]).
    pub fn placed(delays: &[i64], unplaced: u64, max_error_ns: u64) -> RecoveredDelays {
        let mut histogram = DelayHistogram::default();
        for &d in delays {
            histogram.insert(d);
        }
        RecoveredDelays {
            histogram,
            basis: DelayBasis::Placed {
                unplaced,
                max_error_ns,
            },
        }
    }
    /// Sampled delays, each standing for `1/fraction` packets (`0 < fraction ≤ 1`), each off by
    /// at most `max_error_ns`.
    pub fn sampled(delays: &[i64], fraction: f64, max_error_ns: u64) -> RecoveredDelays {
        let mut histogram = DelayHistogram::default();
        for &d in delays {
            histogram.insert_weighted(d, 1.0 / fraction);
        }
        RecoveredDelays {
            histogram,
            basis: DelayBasis::Sampled {
                fraction,
                max_error_ns,
            },
        }
    }

    /// The quantiles of the histogram, each within its relative accuracy `α` of the
    /// (weighted) nearest-rank quantile of the delays in it, with 95 % intervals
    /// ([`RecoveredDelays::interval`]); `None` when it is empty or its cap collapsed a
    /// quantile's rank.
    pub fn quantiles(&self) -> Option<Quantiles> {
        let h = &self.histogram;
        Some(Quantiles {
            p50_ns: h.quantile(0.50)?,
            p90_ns: h.quantile(0.90)?,
            p99_ns: h.quantile(0.99)?,
            p999_ns: h.quantile(0.999)?,
            p50_ci95_ns: self.interval(0.50),
            p90_ci95_ns: self.interval(0.90),
            p99_ci95_ns: self.interval(0.99),
            p999_ci95_ns: self.interval(0.999),
            quantiles_relative_error: Some(h.alpha()),
        })
    }

    /// A 95 % interval of the true `p`-quantile of the delivered packets' delays.
    ///
    /// - [`DelayBasis::Placed`]: the argument of OPA's per-interval interval over the merged
    ///   delays. Of `n` placed delays and `u` received packets left unplaced, the true quantile,
    ///   rank `k = ⌈p(n + u′)⌉` among the `n + u′ ≤ n + u` delivered, lies between the placed
    ///   order statistics of ranks `⌈p(n + u)⌉ − u` and `⌈p(n + u)⌉`, each read off the
    ///   histogram within `α` ([`DelayHistogram::widen`] turns an answer into the values it can
    ///   stand for), each placed delay off by at most the codec's largest error `E` (subtracted
    ///   below, added above). It holds with certainty; none where a rank falls outside the
    ///   placed delays.
    /// - [`DelayBasis::Sampled`] with fraction 1 (every packet kept): the quantile widened by
    ///   `α` and by the timestamps' largest error `E`, with certainty.
    /// - [`DelayBasis::Sampled`] with fraction `f < 1`, the smallest of the intervals merged
    ///   (intervals sampled at different fractions: a stratified sample): Woodruff's interval
    ///   (R. S. Woodruff, *Confidence Intervals for Medians and Other Position Measures*, JASA
    ///   47, 1952), the interval of the distribution function at the quantile inverted through
    ///   the weighted histogram. The weighted estimate of `F(x)` over intervals `i` of `Nᵢ`
    ///   delivered packets, `Nᵢfᵢ` sampled, has variance `Σ Nᵢ² Fᵢ(1 − Fᵢ) / (Nᵢfᵢ) / N² ≤
    ///   F(1 − F) / (N f_min)` (concavity of `F(1 − F)`): no more than that of a uniform sample
    ///   of `n_eff = N̂·f_min` packets (`N̂`: the total weight), as if every interval were
    ///   sampled at the sparsest fraction. So the ranks are those of the distribution-free
    ///   interval of an `n_eff` sample ([`crate::sample::order_statistic_ranks`]), read off the
    ///   weighted histogram as fractions of its weight, and widened by `α` and `E`. It is exact
    ///   (distribution-free) when every interval has the same fraction, conservative otherwise,
    ///   but approximate in that the stratified estimate's distribution is taken to be the
    ///   binomial of that sample; none when `n_eff` is too small for a two-sided interval.
    pub fn interval(&self, p: f64) -> Option<[f64; 2]> {
        let h = &self.histogram;
        if h.is_empty() {
            return None;
        }
        match self.basis {
            DelayBasis::Placed {
                unplaced,
                max_error_ns,
            } => {
                let n = h.count();
                let k = (p * (n + unplaced) as f64).ceil() as u64;
                let (lo, hi) = (k.checked_sub(unplaced)?, k);
                if lo < 1 || hi > n {
                    return None;
                }
                let e = max_error_ns as f64;
                Some([
                    h.widen(h.at_weight(lo as f64)?)[0] - e,
                    h.widen(h.at_weight(hi as f64)?)[1] + e,
                ])
            }
            DelayBasis::Sampled {
                fraction,
                max_error_ns,
            } if fraction >= 1.0 => {
                let [lo, hi] = h.widen(h.quantile(p)?);
                let e = max_error_ns as f64;
                Some([lo - e, hi + e])
            }
            DelayBasis::Sampled {
                fraction,
                max_error_ns,
            } => {
                let w = h.total_weight();
                // (a hair above, so that N̂·f = n for one fraction is not rounded to n − 1)
                let n_eff = (w * fraction * (1.0 + 1e-12)).floor();
                if !(1.0..=usize::MAX as f64).contains(&n_eff) {
                    return None;
                }
                let (l, u) = crate::sample::order_statistic_ranks(n_eff as usize, p)?;
                // rank r of n_eff is the fraction r / n_eff of the weight; a hair outwards on
                // each side, so that summation order cannot pick the next bucket inwards
                let t = |r: usize| r as f64 / n_eff * w;
                let e = max_error_ns as f64;
                Some([
                    h.widen(h.at_weight(t(l) * (1.0 - 1e-12))?)[0] - e,
                    h.widen(h.at_weight(t(u) * (1.0 + 1e-12))?)[1] + e,
                ])
            }
        }
    }

    /// The sample size the 95 % intervals of [`DelayBasis::Sampled`] rest on (`n_eff`).
    fn effective_sample(&self) -> Option<f64> {
        match self.basis {
            DelayBasis::Sampled { fraction, .. } if fraction < 1.0 => {
                Some((self.histogram.total_weight() * fraction * (1.0 + 1e-12)).floor())
            }
            _ => None,
        }
    }

    /// Merge `other` into these delays: histograms added, unplaced packets summed, the largest
    /// timestamp error kept, the smallest sampling fraction of the intervals with samples kept.
    pub fn merge(&mut self, other: &RecoveredDelays) -> Result<(), String> {
        self.basis = match (self.basis, other.basis) {
            (
                DelayBasis::Placed {
                    unplaced: a,
                    max_error_ns: e,
                },
                DelayBasis::Placed {
                    unplaced: b,
                    max_error_ns: f,
                },
            ) => DelayBasis::Placed {
                unplaced: a + b,
                max_error_ns: e.max(f),
            },
            (
                DelayBasis::Sampled {
                    fraction: a,
                    max_error_ns: e,
                },
                DelayBasis::Sampled {
                    fraction: b,
                    max_error_ns: f,
                },
            ) => DelayBasis::Sampled {
                fraction: match (self.histogram.is_empty(), other.histogram.is_empty()) {
                    (true, _) => b,
                    (false, true) => a,
                    (false, false) => a.min(b),
                },
                max_error_ns: e.max(f),
            },
            (a, b) => return Err(format!("intervals of different kinds ({a:?}, {b:?})")),
        };
        self.histogram
            .merge(&other.histogram)
            .map_err(|e| e.to_string())
    }
}

/// Delay quantiles (nearest rank), each with a 95 % confidence interval where the method's
/// samples allow a sound one, ns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Quantiles {
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub p50_ci95_ns: Option<[f64; 2]>,
    pub p90_ci95_ns: Option<[f64; 2]>,
    pub p99_ci95_ns: Option<[f64; 2]>,
    pub p999_ci95_ns: Option<[f64; 2]>,
    /// Where the quantiles come from a relative-error histogram (over many intervals), its
    /// relative accuracy: each quantile within this fraction of the nearest-rank quantile of
    /// the delays merged. Absent where they are nearest-rank over the delays themselves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantiles_relative_error: Option<f64>,
}

impl Quantiles {
    /// The nearest-rank quantiles of sorted, non-empty delays, with no interval (exact for the
    /// delays themselves; a method whose delays are a sample adds its intervals).
    pub fn of_sorted(sorted: &[i64]) -> Quantiles {
        let q = |p| crate::stats::nearest_rank(sorted, p) as f64;
        Quantiles {
            p50_ns: q(0.50),
            p90_ns: q(0.90),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            ..Default::default()
        }
    }
}

impl Estimate {
    /// Combine per-interval estimates into one over all intervals: the mean is weighted by
    /// samples (by the packets they stand for, `samples / fraction`, for sampled delays), the
    /// variance pooled as `E[w²] − μ²` over the parts that have one, bytes and samples summed.
    /// Confidence intervals of the mean and of the std are not combined: the result has none.
    /// Quantiles come from the merged histograms of the recovered delays
    /// ([`RecoveredDelays::quantiles`], with their 95 % intervals), never from averaging the
    /// parts' quantiles, with a note stating the histogram's relative accuracy.
    pub fn combine(parts: &[Estimate]) -> Estimate {
        let mut c = Combiner::default();
        for p in parts {
            c.add(p);
        }
        c.combined()
    }
}

/// [`Estimate::combine`] one interval at a time, so a stream of intervals needs no list of
/// them: the same sums in the same order, hence the same figures.
#[derive(Clone, Debug, Default)]
pub struct Combiner {
    samples: u64,
    bytes: u64,
    n: f64,
    s1: f64,
    n2: f64,
    s2: f64,
    s2m: f64,
    lost: Option<u64>,
    parts: u64,
    /// The only part, while there is one.
    first: Option<Estimate>,
    /// The recovered delays of every part merged (bounded by the histogram's cap).
    recovered: Option<RecoveredDelays>,
    /// Parts that carried recovered delays.
    recovered_parts: u64,
    /// Why the parts' recovered delays could not be merged.
    unmergeable: Option<String>,
}

impl Combiner {
    pub fn add(&mut self, p: &Estimate) {
        self.first = (self.parts == 0).then(|| p.clone());
        self.lost = match (if self.parts == 0 { Some(0) } else { self.lost }, p.lost) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.parts += 1;
        self.samples += p.samples;
        self.bytes += p.bytes;
        if let Some(r) = &p.recovered {
            self.recovered_parts += 1;
            match self.recovered.as_mut() {
                _ if self.unmergeable.is_some() => {}
                None => self.recovered = Some(r.clone()),
                Some(acc) => {
                    if let Err(e) = acc.merge(r) {
                        self.unmergeable = Some(e);
                        self.recovered = None;
                    }
                }
            }
        }
        if let Some(m) = p.mean_ns {
            // the packets the part's mean stands for
            let w = match p.recovered.as_ref().map(|r| r.basis) {
                Some(DelayBasis::Sampled { fraction, .. }) => p.samples as f64 / fraction,
                _ => p.samples as f64,
            };
            self.n += w;
            self.s1 += w * m;
            if let Some(sd) = p.std_ns {
                self.n2 += w;
                self.s2 += w * (sd * sd + m * m);
                self.s2m += w * m;
            }
        }
    }

    /// Intervals added.
    pub fn parts(&self) -> u64 {
        self.parts
    }

    /// The combination of every part (see [`Estimate::combine`]).
    pub fn combined(&self) -> Estimate {
        let mut out = Estimate {
            samples: self.samples,
            bytes: self.bytes,
            lost: if self.parts == 0 { None } else { self.lost },
            ..Default::default()
        };
        if self.n > 0.0 {
            out.mean_ns = Some(self.s1 / self.n);
        }
        if self.n2 > 0.0 {
            let mu = self.s2m / self.n2;
            out.std_ns = Some((self.s2 / self.n2 - mu * mu).max(0.0).sqrt());
        }
        out.quantiles = self.merged_quantiles(&mut out.notes);
        out
    }

    /// The quantiles of every part's recovered delays merged, and a note saying how they were
    /// obtained (or why there are none).
    fn merged_quantiles(&self, notes: &mut Vec<String>) -> Option<Quantiles> {
        if self.recovered_parts == 0 {
            return None;
        }
        if let Some(why) = &self.unmergeable {
            notes.push(format!("no quantiles over the intervals: {why}"));
            return None;
        }
        if self.recovered_parts < self.parts {
            notes.push(format!(
                "no quantiles over the intervals: {} of {} intervals recovered no delays to merge",
                self.parts - self.recovered_parts,
                self.parts
            ));
            return None;
        }
        let r = self.recovered.as_ref()?;
        let h = &r.histogram;
        if h.is_empty() {
            return None;
        }
        let alpha = 100.0 * h.alpha();
        let Some(q) = r.quantiles() else {
            notes.push(format!(
                "no quantiles over the intervals: the histogram's cap of {} buckets collapsed the lowest delays, {:.4} % of the weight, and a quantile falls among them",
                h.max_buckets(),
                100.0 * h.collapsed_weight() / h.total_weight()
            ));
            return None;
        };
        let head = format!(
            "quantiles over {} intervals from their merged delays in a relative-error histogram (DDSketch, α = {alpha} %): each within {alpha} % of the",
            self.parts
        );
        notes.push(match r.basis {
            DelayBasis::Placed {
                unplaced,
                max_error_ns,
            } => format!(
                "{head} nearest-rank quantile of the {} placed delays; 95 % intervals widened by it{}",
                h.count(),
                if unplaced > 0 || max_error_ns > 0 {
                    format!(
                        ", by the {unplaced} received packets left unplaced and by the timestamp codec's largest error ({max_error_ns} ns)"
                    )
                } else {
                    String::new()
                }
            ),
            DelayBasis::Sampled {
                fraction,
                max_error_ns,
            } if fraction >= 1.0 => format!(
                "{head} nearest-rank quantile of the {} delays (every packet sampled); 95 % intervals widened by it{}",
                h.count(),
                timestamp_error(max_error_ns)
            ),
            DelayBasis::Sampled {
                fraction,
                max_error_ns,
            } => format!(
                "{head} quantile of the {} samples weighted by 1/(their interval's sampling fraction); 95 % intervals approximate (Woodruff): the order-statistic interval of {} samples, as if every interval were sampled at the sparsest fraction ({fraction:.3e}), read off the weighted histogram and widened by α{}",
                h.count(),
                r.effective_sample().unwrap_or(0.0),
                timestamp_error(max_error_ns)
            ),
        });
        Some(q)
    }

    /// The one part itself when there is one (its notes and bounds kept), else the combination.
    pub fn overall(&self) -> Estimate {
        match &self.first {
            Some(e) if self.parts == 1 => e.clone(),
            _ => self.combined(),
        }
    }
}

/// `, and by the timestamps' largest error (E ns)` where there is one.
fn timestamp_error(max_error_ns: u64) -> String {
    if max_error_ns > 0 {
        format!(" and by the timestamps' largest error ({max_error_ns} ns)")
    } else {
        String::new()
    }
}

/// Errors a pair estimator can report.
#[derive(Debug, Error, PartialEq)]
pub enum MethodError {
    /// The two synopses were built with different configurations; names the first field that
    /// differs.
    #[error(
        "configuration mismatch between sender and receiver: {field} is {sender} at the sender but {receiver} at the receiver"
    )]
    ConfigMismatch {
        field: String,
        sender: String,
        receiver: String,
    },
    /// Two synopses of one point merged ([`PointSynopsis::merge`]) were built with different
    /// configurations; names the first field that differs.
    #[error(
        "cannot merge synopses of different configurations: {field} is {ours} in this one but {later} in the later one"
    )]
    MergeMismatch {
        field: String,
        ours: String,
        later: String,
    },
    /// The synopses handed to the estimator are not of this method.
    #[error("synopsis of the wrong method handed to {method}")]
    WrongSynopsis { method: &'static str },
    #[error("{0}")]
    Invalid(String),
}

/// One point's synopsis for one interval, as `owl compare` sees it. Every [`TypedSynopsis`] is
/// one; the generic adapter gives a [`TypedMethod`] its own types back.
pub trait PointSynopsis: Any + Send {
    /// Record one packet.
    fn record(&mut self, rec: &PacketRecord);
    /// Record a batch of packets (methods override this to keep the loop monomorphic).
    fn record_batch(&mut self, recs: &[PacketRecord]) {
        for r in recs {
            self.record(r);
        }
    }
    /// Bytes of this synopsis on the wire (what `encode` writes).
    fn encoded_len(&self) -> usize;
    /// Append the method payload of this synopsis (see [`crate::wire`]).
    fn encode(&self, out: &mut Vec<u8>);
    /// Bytes this point would put on the network for this interval in a deployment: its
    /// synopsis message, or the probes, references or in-packet timestamps it injects. The rest
    /// of the payload is local state or emulation data kept only so that `owl estimate` can run
    /// offline ([`MethodInfo::crosses`] says which). Where both points keep a synopsis, one
    /// sends it to the other, so a pair's [`Estimate::bytes`] is the larger point's (tested for
    /// every method in the registry). `None` when only the exchange between the two points
    /// decides it (RDA's round trip): the pair estimate's `bytes` reports it.
    fn shipped_len(&self) -> Option<u64> {
        Some(self.encoded_len() as u64)
    }
    /// Take in `later`, a synopsis of the same method, configuration and point whose packets
    /// all came after this one's: the result is the synopsis of the two streams one after the
    /// other, byte for byte what recording them in that order gives (`later` may have been
    /// decoded from its payload, and recording may go on after). A receiver point builds an
    /// interval from the packets it held around the interval's first cut, the rest of the
    /// interval and the packets it held around the next cut this way, once the sender has
    /// named the cuts' delimiters ([`crate::cut`]). An error names why (`later` is of another
    /// method, configuration or point).
    fn merge(&mut self, later: Box<dyn PointSynopsis>) -> Result<(), MethodError>;
    /// What a point's own synopsis file holds for it (`owl record`): the payload, unless the
    /// payload is lossy and a receiver's file must let `owl estimate` go on recording and
    /// merge (its interval's core, assembled with the packets held at the cuts): then a form it
    /// can, which [`Method::decode_point`] reads too. Local state, never shipped:
    /// [`shipped_len`](Self::shipped_len) still says what would cross.
    fn encode_local(&self, out: &mut Vec<u8>) {
        self.encode(out)
    }
}

/// A per-flow estimate, from methods that give one.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FlowEstimate {
    /// Estimated mean delay of the flow, ns.
    pub mean_ns: Option<f64>,
    /// Estimated (rough) standard deviation of the flow's delay, ns.
    pub std_ns: Option<f64>,
    /// The std's 95 % interval, ns, where the method states one.
    pub std_ci95_ns: Option<[f64; 2]>,
    /// Estimated packets of the flow (at the sender).
    pub packets: Option<f64>,
    /// Estimated packets of the flow lost.
    pub lost: Option<f64>,
    /// Why the mean (or, with a mean, the std) is missing, where the method says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One sender packet as a per-packet method reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PacketEstimate {
    /// The packet's identity, where the method knows it (a packet R received).
    pub id: Option<u64>,
    /// When S sent it, ns, as the method has it (decoded, or reconstructed).
    pub sender_ns: u64,
    /// When R received it; `None` for a packet found lost, or not placed.
    pub receiver_ns: Option<u64>,
    /// Whether the method placed the packet (as received or as lost); `false` where it could
    /// not tell.
    pub placed: bool,
}

impl PacketEstimate {
    pub fn delay_ns(&self) -> Option<i64> {
        self.receiver_ns
            .map(|r| r.wrapping_sub(self.sender_ns) as i64)
    }
}

/// How a method copes with packets that only one point's interval holds (in flight across a
/// cut that fell back to a clock, reordered across a cut, duplicated, or never seen by the
/// other point): what its descriptor and `--help` state ([`Method::foreign`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foreign {
    /// It pairs packets by identity: such a packet is unmatched (lost or unexpected), never
    /// taken for another — and what it compares says how.
    Matches(&'static str),
    /// It aggregates, with an identity digest beside each aggregate: an aggregate that holds
    /// such a packet is detected and left out.
    Detects(&'static str),
    /// It aggregates with no identity: it assumes both points aggregate the same packets but
    /// for losses, and cannot tell such a packet from one of the interval. Its estimate of an
    /// interval whose cut fell back is withheld.
    AssumesNone(&'static str),
}

impl Foreign {
    /// The sentence `--help` prints.
    pub fn describe(&self) -> String {
        match self {
            Foreign::Matches(how) => format!("matches packets by identity ({how})"),
            Foreign::Detects(how) => format!("detects them ({how})"),
            Foreign::AssumesNone(why) => format!(
                "assumes none ({why}): its estimate of an interval whose cut fell back is withheld"
            ),
        }
    }
}

/// An aggregate latency method, object-safe.
pub trait Method: Send + Sync {
    /// Short name used on the command line and in reports (`lda`, `rda`, …).
    fn name(&self) -> &str;
    /// Everything both points must agree on, by field name (written into synopsis files and
    /// compared field by field).
    fn config(&self) -> Vec<(&'static str, String)>;
    /// How it copes with packets only one point's interval holds ([`Foreign`]).
    fn foreign(&self) -> Foreign;
    /// A fresh synopsis for one point and one interval.
    fn new_point(&self, role: Role) -> Box<dyn PointSynopsis>;
    /// Decode a payload written by [`PointSynopsis::encode`] of this method and configuration.
    fn decode_point(
        &self,
        role: Role,
        bytes: &[u8],
    ) -> Result<Box<dyn PointSynopsis>, crate::wire::DecodeError>;
    /// Turn the sender's and the receiver's synopses of one interval into an estimate.
    fn estimate(
        &self,
        sender: Box<dyn PointSynopsis>,
        receiver: Box<dyn PointSynopsis>,
    ) -> Result<Estimate, MethodError>;
    /// Per-flow estimates for `flows`, one per key in order, for methods that keep per-flow
    /// information; `None` for aggregate-only methods.
    fn estimate_flows(
        &self,
        _sender: &dyn PointSynopsis,
        _receiver: &dyn PointSynopsis,
        _flows: &[FlowKey],
    ) -> Option<Result<Vec<FlowEstimate>, MethodError>> {
        None
    }
    /// Every packet of the interval, in sending order, for methods that give per-packet
    /// delays; `None` for the others.
    fn estimate_packets(
        &self,
        _sender: &dyn PointSynopsis,
        _receiver: &dyn PointSynopsis,
    ) -> Option<Result<Vec<PacketEstimate>, MethodError>> {
        None
    }
    /// The delivered packets behind [`Estimate::recovered`], each with its identity, for
    /// methods that recover individual delays (per-class quantiles, [`crate::flow_class`]);
    /// `None` for the others. It needs the synopses as recorded: where the receiver's came from
    /// what it shipped, the identities stayed at the point and it answers an error.
    fn recovered_packets(
        &self,
        _sender: &dyn PointSynopsis,
        _receiver: &dyn PointSynopsis,
    ) -> Option<Result<RecoveredPackets, MethodError>> {
        None
    }
}

/// A method's configuration as its two points compare it: every field, by name, in the order
/// synopsis files write them.
pub trait MethodConfig {
    /// Every field both points must agree on, by name.
    fn pairs(&self) -> Vec<(&'static str, String)>;
}

/// A configuration declared by [`method_config!`](crate::method_config): its fields once, and
/// from them its pairs, its parser of `--method-config` and synopsis-file fields, and its
/// "unknown field" error.
pub trait DeclaredConfig: MethodConfig + Sized {
    /// The method named in its errors.
    const METHOD: &'static str;
    /// Every field, in the order of [`MethodConfig::pairs`].
    const FIELDS: &'static [&'static str];
    /// Set `field` from `value`, or the error naming the field (and the value, or the fields
    /// it knows).
    fn set(&mut self, field: &str, value: &str) -> Result<(), MethodError>;
    /// `base` with the fields named in `pairs` replaced, in order (the caller validates).
    fn over(mut base: Self, pairs: &[(String, String)]) -> Result<Self, MethodError> {
        for (k, v) in pairs {
            base.set(k, v)?;
        }
        Ok(base)
    }
}

/// Declare a method's configuration once: the struct (its fields private) and, from its
/// fields, [`MethodConfig::pairs`] (each field's `Display`, in order) and [`DeclaredConfig`]
/// (each field parsed by [`config_value`], any other named by [`unknown_field`]).
///
/// ```
/// use owl_core::method::{DeclaredConfig, MethodConfig};
/// owl_core::method_config! {
///     /// What both points agree on.
///     #[derive(Clone, Debug, PartialEq, Eq)]
///     pub struct Config for "countmin" {
///         /// d: rows.
///         rows: usize,
///         seed: u64,
///     }
/// }
/// let c = Config::over(Config { rows: 4, seed: 1 }, &[("rows".into(), "8".into())]).unwrap();
/// assert_eq!(c.pairs(), [("rows", "8".to_string()), ("seed", "1".to_string())]);
/// let e = Config::over(c, &[("banks".into(), "2".into())]).err().unwrap();
/// assert_eq!(e.to_string(), "unknown countmin config field 'banks' (known: rows, seed)");
/// ```
#[macro_export]
macro_rules! method_config {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident for $method:literal {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $field: $ty, )*
        }
        impl $crate::method::MethodConfig for $name {
            fn pairs(&self) -> Vec<(&'static str, String)> {
                vec![$((stringify!($field), self.$field.to_string())),*]
            }
        }
        impl $crate::method::DeclaredConfig for $name {
            const METHOD: &'static str = $method;
            const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];
            fn set(
                &mut self,
                field: &str,
                value: &str,
            ) -> Result<(), $crate::method::MethodError> {
                match field {
                    $(stringify!($field) => {
                        self.$field = $crate::method::config_value($method, field, value)?
                    })*
                    _ => return Err($crate::method::unknown_field($method, field, Self::FIELDS)),
                }
                Ok(())
            }
        }
    };
}

/// A method without configuration (`exact`).
impl MethodConfig for () {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

/// One point's synopsis of one interval, typed: what a [`TypedMethod`] builds and estimates
/// from. Every such type is a [`PointSynopsis`] (the generic adapter below), which is how the
/// pipeline, files and agents hold it.
pub trait TypedSynopsis: Send + Sized + 'static {
    /// The method named in the error for a synopsis of another method.
    const METHOD: &'static str;
    /// Record one packet.
    fn record(&mut self, rec: &PacketRecord);
    /// Record a batch of packets (see [`PointSynopsis::record_batch`]).
    fn record_batch(&mut self, recs: &[PacketRecord]) {
        for r in recs {
            self.record(r);
        }
    }
    /// See [`PointSynopsis::encoded_len`].
    fn encoded_len(&self) -> usize;
    /// See [`PointSynopsis::encode`].
    fn encode(&self, out: &mut Vec<u8>);
    /// See [`PointSynopsis::shipped_len`].
    fn shipped_len(&self) -> Option<u64> {
        Some(self.encoded_len() as u64)
    }
    /// Take in `later`, a synopsis of the same configuration and point whose packets all came
    /// after this one's (see [`PointSynopsis::merge`]).
    fn merge(&mut self, later: Self) -> Result<(), MethodError>;
    /// See [`PointSynopsis::encode_local`].
    fn encode_local(&self, out: &mut Vec<u8>) {
        self.encode(out)
    }
}

/// A method, typed: its configuration, its two points' synopses and one pair estimator, with
/// per-flow and per-packet answers as optional parts. Every such type is a [`Method`] through
/// one generic adapter, the only code that turns a `dyn PointSynopsis` back into its type.
pub trait TypedMethod: Send + Sync + 'static {
    type Config: MethodConfig;
    type Sender: TypedSynopsis;
    type Receiver: TypedSynopsis;
    /// See [`Method::name`].
    fn name(&self) -> &str;
    /// What both points must agree on.
    fn config(&self) -> &Self::Config;
    /// See [`Method::foreign`].
    fn foreign(&self) -> Foreign;
    /// A fresh sender synopsis for one interval.
    fn new_sender(&self) -> Self::Sender;
    /// A fresh receiver synopsis for one interval.
    fn new_receiver(&self) -> Self::Receiver;
    /// Decode what [`TypedSynopsis::encode`] (or `encode_local`) of a sender wrote.
    fn decode_sender(&self, bytes: &[u8]) -> Result<Self::Sender, crate::wire::DecodeError>;
    /// Decode what [`TypedSynopsis::encode`] (or `encode_local`) of a receiver wrote.
    fn decode_receiver(&self, bytes: &[u8]) -> Result<Self::Receiver, crate::wire::DecodeError>;
    /// The pair estimator: both points' synopses of one interval into an estimate.
    fn estimate(
        &self,
        sender: Self::Sender,
        receiver: Self::Receiver,
    ) -> Result<Estimate, MethodError>;
    /// Optional: see [`Method::estimate_flows`].
    fn estimate_flows(
        &self,
        _sender: &Self::Sender,
        _receiver: &Self::Receiver,
        _flows: &[FlowKey],
    ) -> Option<Result<Vec<FlowEstimate>, MethodError>> {
        None
    }
    /// Optional: see [`Method::estimate_packets`].
    fn estimate_packets(
        &self,
        _sender: &Self::Sender,
        _receiver: &Self::Receiver,
    ) -> Option<Result<Vec<PacketEstimate>, MethodError>> {
        None
    }
    /// Optional: see [`Method::recovered_packets`].
    fn recovered_packets(
        &self,
        _sender: &Self::Sender,
        _receiver: &Self::Receiver,
    ) -> Option<Result<RecoveredPackets, MethodError>> {
        None
    }
}

/// The generic adapter, synopses: a typed synopsis as the pipeline holds it.
impl<T: TypedSynopsis> PointSynopsis for T {
    fn record(&mut self, rec: &PacketRecord) {
        TypedSynopsis::record(self, rec)
    }
    fn record_batch(&mut self, recs: &[PacketRecord]) {
        TypedSynopsis::record_batch(self, recs)
    }
    fn encoded_len(&self) -> usize {
        TypedSynopsis::encoded_len(self)
    }
    fn encode(&self, out: &mut Vec<u8>) {
        TypedSynopsis::encode(self, out)
    }
    fn shipped_len(&self) -> Option<u64> {
        TypedSynopsis::shipped_len(self)
    }
    fn merge(&mut self, later: Box<dyn PointSynopsis>) -> Result<(), MethodError> {
        TypedSynopsis::merge(self, *typed::<T>(later)?)
    }
    fn encode_local(&self, out: &mut Vec<u8>) {
        TypedSynopsis::encode_local(self, out)
    }
}

/// The generic adapter, methods: a typed method as `owl` runs it, by name. A synopsis of
/// another method is [`MethodError::WrongSynopsis`], named by the expected synopsis's
/// [`TypedSynopsis::METHOD`] (for the optional answers too, whether or not the method gives
/// them: only a caller's mistake hands one over).
impl<M: TypedMethod> Method for M {
    fn name(&self) -> &str {
        TypedMethod::name(self)
    }
    fn config(&self) -> Vec<(&'static str, String)> {
        TypedMethod::config(self).pairs()
    }
    fn foreign(&self) -> Foreign {
        TypedMethod::foreign(self)
    }
    fn new_point(&self, role: Role) -> Box<dyn PointSynopsis> {
        match role {
            Role::Sender => Box::new(self.new_sender()),
            Role::Receiver => Box::new(self.new_receiver()),
        }
    }
    fn decode_point(
        &self,
        role: Role,
        bytes: &[u8],
    ) -> Result<Box<dyn PointSynopsis>, crate::wire::DecodeError> {
        Ok(match role {
            Role::Sender => Box::new(self.decode_sender(bytes)?),
            Role::Receiver => Box::new(self.decode_receiver(bytes)?),
        })
    }
    fn estimate(
        &self,
        sender: Box<dyn PointSynopsis>,
        receiver: Box<dyn PointSynopsis>,
    ) -> Result<Estimate, MethodError> {
        let s = typed::<M::Sender>(sender)?;
        let r = typed::<M::Receiver>(receiver)?;
        TypedMethod::estimate(self, *s, *r)
    }
    fn estimate_flows(
        &self,
        sender: &dyn PointSynopsis,
        receiver: &dyn PointSynopsis,
        flows: &[FlowKey],
    ) -> Option<Result<Vec<FlowEstimate>, MethodError>> {
        match pair_ref::<M>(sender, receiver) {
            Ok((s, r)) => TypedMethod::estimate_flows(self, s, r, flows),
            Err(e) => Some(Err(e)),
        }
    }
    fn estimate_packets(
        &self,
        sender: &dyn PointSynopsis,
        receiver: &dyn PointSynopsis,
    ) -> Option<Result<Vec<PacketEstimate>, MethodError>> {
        match pair_ref::<M>(sender, receiver) {
            Ok((s, r)) => TypedMethod::estimate_packets(self, s, r),
            Err(e) => Some(Err(e)),
        }
    }
    fn recovered_packets(
        &self,
        sender: &dyn PointSynopsis,
        receiver: &dyn PointSynopsis,
    ) -> Option<Result<RecoveredPackets, MethodError>> {
        match pair_ref::<M>(sender, receiver) {
            Ok((s, r)) => TypedMethod::recovered_packets(self, s, r),
            Err(e) => Some(Err(e)),
        }
    }
}

/// Both synopses of a pair as `M`'s, borrowed.
fn pair_ref<'a, M: TypedMethod>(
    sender: &'a dyn PointSynopsis,
    receiver: &'a dyn PointSynopsis,
) -> Result<(&'a M::Sender, &'a M::Receiver), MethodError> {
    Ok((typed_ref(sender)?, typed_ref(receiver)?))
}

/// A synopsis as its own type, or the error naming `T`'s method: the adapter's one way back
/// from `dyn PointSynopsis` (trait upcasting to [`Any`]).
fn typed<T: TypedSynopsis>(s: Box<dyn PointSynopsis>) -> Result<Box<T>, MethodError> {
    let any: Box<dyn Any> = s;
    any.downcast::<T>()
        .map_err(|_| MethodError::WrongSynopsis { method: T::METHOD })
}

/// [`typed`], borrowed.
fn typed_ref<T: TypedSynopsis>(s: &dyn PointSynopsis) -> Result<&T, MethodError> {
    let any: &dyn Any = s;
    any.downcast_ref::<T>()
        .ok_or(MethodError::WrongSynopsis { method: T::METHOD })
}

/// `synopsis` as method `M`'s sender synopsis (for code that drives one method's points
/// itself: RDA's exchange across a connection), or the error for another method's.
pub fn sender_of<M: TypedMethod>(
    synopsis: Box<dyn PointSynopsis>,
) -> Result<Box<M::Sender>, MethodError> {
    typed(synopsis)
}

/// `synopsis` as method `M`'s receiver synopsis (see [`sender_of`]).
pub fn receiver_of<M: TypedMethod>(
    synopsis: Box<dyn PointSynopsis>,
) -> Result<Box<M::Receiver>, MethodError> {
    typed(synopsis)
}

/// [`sender_of`], borrowed.
pub fn sender_ref<M: TypedMethod>(synopsis: &dyn PointSynopsis) -> Result<&M::Sender, MethodError> {
    typed_ref(synopsis)
}

/// [`receiver_of`], borrowed.
pub fn receiver_ref<M: TypedMethod>(
    synopsis: &dyn PointSynopsis,
) -> Result<&M::Receiver, MethodError> {
    typed_ref(synopsis)
}

/// What every method is built from on the command line: the seed of its hashes and an optional
/// synopsis budget per interval (`--memory`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildOptions {
    pub seed: u64,
    pub memory: Option<u64>,
}

/// One method as owl presents it: its name, a line of help, what it estimates, how to build it
/// from the defaults and `--memory`, and how to rebuild it from its configuration fields (a
/// synopsis file, `--method-config`). Each method module exports its descriptor(s); the list
/// of them is [`crate::registry::METHODS`], and every list owl prints or checks (help, name
/// lookup, the README's methods table, the fuzz target) iterates it.
pub struct MethodInfo {
    pub name: &'static str,
    pub summary: &'static str,
    /// What its estimates' [`Estimate::samples`] counts (the packets, probes or flows its mean
    /// rests on; `owl compare --help` and the JSON's `samples_are` say it).
    pub samples: &'static str,
    /// Answers [`Method::estimate_flows`].
    pub per_flow: bool,
    /// Answers [`Method::estimate_packets`].
    pub per_packet: bool,
    /// Answers [`Method::recovered_packets`] (its estimates carry recovered delays, and their
    /// quantiles).
    pub recovers_delays: bool,
    /// What crosses the network between the points for each interval, whether it needs a round
    /// trip, and what a synopsis file holds beyond it (`owl record --help` lists these).
    pub crosses: &'static str,
    pub build: BuildFn,
    pub from_config: FromConfigFn,
}

/// A method from its defaults and [`BuildOptions`].
pub type BuildFn = fn(&BuildOptions) -> Result<Box<dyn Method>, MethodError>;
/// A method from its configuration fields, by name.
pub type FromConfigFn = fn(&[(String, String)]) -> Result<Box<dyn Method>, MethodError>;

impl std::fmt::Debug for MethodInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MethodInfo")
            .field("name", &self.name)
            .field("per_flow", &self.per_flow)
            .field("per_packet", &self.per_packet)
            .finish()
    }
}

/// Columns per row of a `rows`-row sketch of `cell`-byte cells within `memory` bytes, or
/// `default` without a budget.
pub fn columns_for_memory(
    memory: Option<u64>,
    rows: u64,
    cell: u64,
    default: usize,
) -> Result<usize, MethodError> {
    match memory {
        None => Ok(default),
        Some(m) => {
            let c = m / (rows * cell);
            if c == 0 {
                return Err(MethodError::Invalid(format!(
                    "--memory {m} bytes is below one column of {rows} rows × {cell} B ({} bytes)",
                    rows * cell
                )));
            }
            Ok(c.min(1 << 26) as usize)
        }
    }
}

/// For [`PointSynopsis::merge`]: the error naming the first field in which the later
/// synopsis's configuration (`later`) differs from this one's (`ours`), both as
/// `Config::pairs` lists them.
pub fn check_merge(
    ours: Vec<(&'static str, String)>,
    later: Vec<(&'static str, String)>,
) -> Result<(), MethodError> {
    match ours
        .into_iter()
        .zip(later)
        .find(|(a, b)| a.0 != b.0 || a.1 != b.1)
    {
        Some(((field, a), (_, b))) => Err(MethodError::MergeMismatch {
            field: field.into(),
            ours: a,
            later: b,
        }),
        None => Ok(()),
    }
}

/// A pair check's mismatch (`check_pair(ours, later)`) said as a merge's.
pub fn as_merge(e: MethodError) -> MethodError {
    match e {
        MethodError::ConfigMismatch {
            field,
            sender,
            receiver,
        } => MethodError::MergeMismatch {
            field,
            ours: sender,
            later: receiver,
        },
        e => e,
    }
}

/// Parse one configuration value of `method` (`--method-config`, synopsis files), or an error
/// naming the field and the value.
pub fn config_value<T: std::str::FromStr>(
    method: &str,
    field: &str,
    value: &str,
) -> Result<T, MethodError> {
    value
        .trim()
        .parse()
        .map_err(|_| MethodError::Invalid(format!("{method} {field} '{value}' is not valid")))
}

/// The error for a configuration field `method` does not know, listing those it does.
pub fn unknown_field(method: &str, field: &str, known: &[&str]) -> MethodError {
    MethodError::Invalid(format!(
        "unknown {method} config field '{field}' (known: {})",
        known.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_pools_mean_and_variance() {
        // Two groups: {0, 2} (mean 1, sd 1) and {10, 10, 10, 10} (mean 10, sd 0).
        let a = Estimate {
            mean_ns: Some(1.0),
            std_ns: Some(1.0),
            samples: 2,
            bytes: 5,
            lost: Some(1),
            ..Default::default()
        };
        let b = Estimate {
            mean_ns: Some(10.0),
            std_ns: Some(0.0),
            std_ci95_ns: Some([0.0, 0.5]),
            samples: 4,
            bytes: 7,
            lost: Some(2),
            ..Default::default()
        };
        let c = Estimate::combine(&[a, b]);
        let all = [0.0f64, 2.0, 10.0, 10.0, 10.0, 10.0];
        let m = all.iter().sum::<f64>() / 6.0;
        let sd = (all.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 6.0).sqrt();
        assert!((c.mean_ns.unwrap() - m).abs() < 1e-12);
        assert!((c.std_ns.unwrap() - sd).abs() < 1e-12);
        assert_eq!((c.samples, c.bytes, c.lost), (6, 12, Some(3)));
        // intervals are per interval: not combined
        assert_eq!((c.mean_ci98_ns, c.std_ci95_ns), (None, None));
    }

    /// An estimate of placed delays, as OPA gives one.
    fn placed(delays: &[i64], unplaced: u64, max_error_ns: u64) -> Estimate {
        let mut sorted = delays.to_vec();
        sorted.sort_unstable();
        let summary = crate::stats::DelaySummary::from_sorted(&sorted);
        Estimate {
            mean_ns: Some(summary.mean_ns),
            std_ns: Some(summary.std_ns),
            samples: delays.len() as u64,
            quantiles: Some(Quantiles::of_sorted(&sorted)),
            recovered: Some(RecoveredDelays::placed(delays, unplaced, max_error_ns)),
            ..Default::default()
        }
    }

    /// Quantiles over intervals are those of the merged delays (within the histogram's α, the
    /// exact ones inside their intervals), not averages of the intervals' quantiles.
    #[test]
    fn combine_merges_quantiles() {
        let a: Vec<i64> = (1..=900).map(|i| 1_000 + i).collect();
        let b: Vec<i64> = (1..=100).map(|i| 1_000_000 + 37 * i).collect();
        let c = Estimate::combine(&[placed(&a, 0, 0), placed(&b, 0, 0)]);
        let mut all = [a.clone(), b.clone()].concat();
        all.sort_unstable();
        let q = c.quantiles.expect("merged quantiles");
        let alpha = crate::delay_histogram::DEFAULT_RELATIVE_ACCURACY;
        assert_eq!(q.quantiles_relative_error, Some(alpha));
        for (p, est, ci) in [
            (0.50, q.p50_ns, q.p50_ci95_ns),
            (0.90, q.p90_ns, q.p90_ci95_ns),
            (0.99, q.p99_ns, q.p99_ci95_ns),
            (0.999, q.p999_ns, q.p999_ci95_ns),
        ] {
            let exact = crate::stats::nearest_rank(&all, p) as f64;
            assert!(
                (est - exact).abs() <= alpha * exact,
                "p{p}: {est} vs {exact}"
            );
            let [lo, hi] = ci.expect("an interval");
            assert!(
                lo <= exact && exact <= hi,
                "p{p}: {exact} outside {lo}..{hi}"
            );
            assert!(hi - lo <= 2.1 * alpha * exact, "p{p}: only the α band");
        }
        // averaging the two p99s would say about 500 µs; the merged p99 is in b
        assert!(q.p99_ns > 0.99 * 1_000_000.0);
        assert!(
            c.notes.iter().any(|n| n.contains("α = 1 %")),
            "{:?}",
            c.notes
        );
        // one part: its own exact figures, untouched
        let mut k = Combiner::default();
        k.add(&placed(&a, 0, 0));
        assert_eq!(k.overall(), placed(&a, 0, 0));
    }

    /// Unplaced packets and a codec error widen the merged intervals as OPA's per-interval
    /// ones; they still hold the true quantile of every delivered packet.
    #[test]
    fn placed_intervals_allow_for_unplaced_packets_and_codec_error() {
        let all: Vec<i64> = (0..3000).map(|i| 5_000 + (i * 7919) % 4001).collect();
        // the packets at every 200th position were not placed; placed delays off by up to 3 ns
        let mut parts = Vec::new();
        for chunk in all.chunks(1000) {
            let placed_delays: Vec<i64> = chunk
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 200 != 0)
                .map(|(i, &d)| d + (i as i64 % 7) - 3)
                .collect();
            parts.push(placed(&placed_delays, 5, 3));
        }
        let c = Estimate::combine(&parts);
        let mut sorted = all.clone();
        sorted.sort_unstable();
        let q = c.quantiles.unwrap();
        for (p, ci) in [
            (0.5, q.p50_ci95_ns),
            (0.9, q.p90_ci95_ns),
            (0.99, q.p99_ci95_ns),
        ] {
            let exact = crate::stats::nearest_rank(&sorted, p) as f64;
            let [lo, hi] = ci.unwrap();
            assert!(
                lo <= exact && exact <= hi,
                "p{p}: {exact} outside {lo}..{hi}"
            );
        }
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("15 received packets left unplaced"))
        );
    }

    /// Samples of intervals sampled at different fractions count 1/fraction each, in the
    /// quantiles and in the mean.
    #[test]
    fn sampled_parts_are_weighted_by_their_fraction() {
        let sampled = |d: i64, n: usize, fraction: f64| {
            let delays = vec![d; n];
            Estimate {
                mean_ns: Some(d as f64),
                std_ns: Some(0.0),
                samples: n as u64,
                quantiles: Quantiles::of_sample(&delays),
                recovered: Some(RecoveredDelays::sampled(&delays, fraction, 0)),
                ..Default::default()
            }
        };
        // 100 samples of all of 100 packets at 10 ns, 100 of 1/4 of 400 packets at 1 000 ns:
        // 4 packets in 5 at 1 000 ns (unweighted, the samples would put p50 at 10 ns)
        let c = Estimate::combine(&[sampled(10, 100, 1.0), sampled(1_000, 100, 0.25)]);
        let q = c.quantiles.unwrap();
        assert!((q.p50_ns - 1_000.0).abs() <= 10.0, "{q:?}");
        assert!((c.mean_ns.unwrap() - (100.0 * 10.0 + 400.0 * 1_000.0) / 500.0).abs() < 1e-9);
        // the effective sample: 500 packets at the sparsest fraction 1/4
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("interval of 125 samples")),
            "{:?}",
            c.notes
        );
        // one fraction everywhere: the pooled sample's own order-statistic interval
        let mut rng = 0x1234_5678u64;
        let mut next = || {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 40) as i64
        };
        let a: Vec<i64> = (0..700).map(|_| next()).collect();
        let b: Vec<i64> = (0..500).map(|_| next()).collect();
        let part = |d: &[i64]| {
            let mut s = d.to_vec();
            s.sort_unstable();
            Estimate {
                samples: d.len() as u64,
                quantiles: Quantiles::of_sample(&s),
                recovered: Some(RecoveredDelays::sampled(d, 0.125, 0)),
                ..Default::default()
            }
        };
        let c = Estimate::combine(&[part(&a), part(&b)]);
        let mut pooled = [a, b].concat();
        pooled.sort_unstable();
        let want = Quantiles::of_sample(&pooled).unwrap();
        let q = c.quantiles.unwrap();
        for (got, want) in [
            (q.p50_ci95_ns, want.p50_ci95_ns),
            (q.p99_ci95_ns, want.p99_ci95_ns),
        ] {
            let ([lo, hi], [wlo, whi]) = (got.unwrap(), want.unwrap());
            assert!(lo <= wlo && whi <= hi, "{lo}..{hi} holds {wlo}..{whi}");
            assert!(wlo - lo <= 0.011 * wlo.abs() && hi - whi <= 0.011 * whi.abs());
        }
        // timestamps off by up to 5 ns widen every interval by 5 ns on each side
        let r = RecoveredDelays {
            basis: DelayBasis::Sampled {
                fraction: 0.125,
                max_error_ns: 5,
            },
            ..part(&pooled).recovered.unwrap()
        };
        let (a, b) = (q.p99_ci95_ns.unwrap(), r.quantiles().unwrap().p99_ci95_ns);
        assert_eq!(b, Some([a[0] - 5.0, a[1] + 5.0]));
    }

    #[test]
    fn unmergeable_parts_give_no_quantiles_and_say_why() {
        let mut s = placed(&[1, 2, 3], 0, 0);
        s.recovered = Some(RecoveredDelays::sampled(&[1, 2, 3], 0.5, 0));
        let c = Estimate::combine(&[placed(&[1, 2, 3], 0, 0), s]);
        assert_eq!(c.quantiles, None);
        assert!(
            c.notes[0].starts_with("no quantiles over the intervals: intervals of different kinds")
        );
        let mut none = placed(&[1, 2, 3], 0, 0);
        none.recovered = None;
        let c = Estimate::combine(&[placed(&[1, 2, 3], 0, 0), none]);
        assert_eq!(c.quantiles, None);
        assert!(c.notes[0].contains("1 of 2 intervals recovered no delays"));
    }

    #[test]
    fn combine_of_nothing() {
        let c = Estimate::combine(&[]);
        assert_eq!(c.mean_ns, None);
        assert_eq!(c.lost, None);
    }
}
