//! A mergeable relative-error histogram of one-way delays: DDSketch (C. Masson, J. E. Rim,
//! H. K. Lee, *DDSketch: A Fast and Fully-Mergeable Quantile Sketch with Relative-Error
//! Guarantees*, PVLDB 12(12), 2019, §2).
//!
//! # Buckets (§2)
//!
//! With `γ = (1 + α) / (1 − α)`, a delay of magnitude `m ≥ 1` ns falls in bucket
//! `i = ⌈log_γ m⌉`, which holds the magnitudes in `(γ^{i−1}, γ^i]`, and the bucket answers with
//! `2γ^i / (γ + 1)`, within `α·m` of every `m` it holds. Delays are signed: clock offsets make
//! negative one-way delays real, so a negative delay goes to the bucket of its magnitude on a
//! mirrored, negative side (its answer negative), and a zero delay to a bucket of its own, which
//! answers 0 exactly. Buckets are kept in value order (negative side, largest magnitude first;
//! zero; positive side), so the cumulative weight over them is the empirical distribution
//! function of the delays at bucket resolution.
//!
//! # The guarantee
//!
//! [`DelayHistogram::quantile`]`(p)` answers `x̂` with `|x̂ − x_p| ≤ α·|x_p|`, where `x_p` is
//! the exact nearest-rank quantile of the inserted delays: the smallest inserted `x` with
//! `W(≤ x) ≥ p·W` (`W`: total weight; with unit weights the delay of rank `⌈p·n⌉`, as
//! [`crate::stats::nearest_rank`]). The proof is one line: buckets are ordered like the delays
//! they hold, so the bucket where the cumulative weight first reaches `p·W` holds `x_p`. The
//! sign is always right and a zero quantile is exact. (Bucket indexes are computed from `α`
//! less one part in 10⁹, so floating-point rounding of `log_γ` cannot push a delay past the
//! stated `α`.)
//!
//! # Weights
//!
//! A delay may stand for `w > 0` packets ([`DelayHistogram::insert_weighted`]): a packet
//! sampled with probability `f` counts `1/f`. The guarantee holds for the weighted quantile
//! above, of the inserted delays with their weights.
//!
//! # Merging (§2)
//!
//! Bucket weights add, so the merge of two histograms of the same `α` and cap is the histogram
//! of the union of their delays, bucket for bucket (exact with unit weights: integer sums in
//! `f64` below 2⁵³).
//!
//! # The cap
//!
//! A histogram keeps at most [`DelayHistogram::max_buckets`] non-empty buckets
//! ([`DEFAULT_MAX_BUCKETS`] = 2 048: 12 B of key and weight each in a `BTreeMap`, a few tens of
//! KiB at most). Integer nanoseconds of one sign at α = 1 % need at most 2 185 buckets between
//! 1 ns and 2⁶³ ns, and 2 048 buckets of one sign span
//! a ratio of `γ^2048 ≈ 6·10¹⁷` (1 ns to 19 years), so the cap binds only for delays of both
//! signs, each spread over many decades. When an insertion or a merge would exceed it, the
//! lowest buckets (in value order) are collapsed, as DDSketch's collapsing store does (§2):
//! their weight leaves the buckets and is counted in [`DelayHistogram::collapsed_weight`], and
//! every later delay below the lowest kept bucket is counted there too. Every collapsed delay
//! is below every delay the kept buckets hold, so a quantile whose target weight `p·W` exceeds
//! the collapsed weight keeps the guarantee; one that does not is not answered (`None`): never a
//! silent wrong answer, and the upper quantiles (the tail) are the ones kept.

use std::collections::BTreeMap;

use thiserror::Error;

/// Relative accuracy owl's methods build their histograms with: 1 %.
pub const DEFAULT_RELATIVE_ACCURACY: f64 = 0.01;
/// Non-empty buckets a histogram keeps by default (see the module doc's cap).
pub const DEFAULT_MAX_BUCKETS: usize = 2048;
/// Smallest and largest relative accuracy accepted.
pub const RELATIVE_ACCURACY_RANGE: (f64, f64) = (1e-6, 0.5);

/// How much smaller than the stated `α` the bucket mapping's own is (module doc).
const SLACK: f64 = 1e-9;

/// A histogram built wrongly, or two that cannot merge.
#[derive(Debug, Error, PartialEq)]
pub enum HistogramError {
    #[error("relative accuracy {0} is outside 1e-6..=0.5")]
    Accuracy(f64),
    #[error("a delay histogram needs at least 1 bucket")]
    Buckets,
    #[error("histograms of relative accuracy {0} and {1}, or of {2} and {3} buckets, do not merge")]
    Mismatch(f64, f64, usize, usize),
}

/// A DDSketch of signed delays in nanoseconds (module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct DelayHistogram {
    alpha: f64,
    max_buckets: usize,
    /// `ln γ` of the mapping (from `α` less [`SLACK`]).
    ln_gamma: f64,
    /// Ordered bucket key → weight: `0` for zero, `i + 1` for positive bucket `i`, `−(i + 1)`
    /// for negative bucket `i` (so keys order like the delays).
    buckets: BTreeMap<i32, f64>,
    /// Keys below this one were collapsed (`None`: none ever was).
    floor: Option<i32>,
    /// Weight of the collapsed delays (all below the lowest kept bucket).
    collapsed: f64,
    total: f64,
    count: u64,
}

impl Default for DelayHistogram {
    fn default() -> DelayHistogram {
        DelayHistogram::new(DEFAULT_RELATIVE_ACCURACY, DEFAULT_MAX_BUCKETS)
            .expect("the defaults are valid")
    }
}

impl DelayHistogram {
    /// An empty histogram of relative accuracy `alpha` keeping at most `max_buckets` buckets.
    pub fn new(alpha: f64, max_buckets: usize) -> Result<DelayHistogram, HistogramError> {
        let (lo, hi) = RELATIVE_ACCURACY_RANGE;
        if !(lo..=hi).contains(&alpha) {
            return Err(HistogramError::Accuracy(alpha));
        }
        if max_buckets == 0 {
            return Err(HistogramError::Buckets);
        }
        let a = alpha * (1.0 - SLACK);
        Ok(DelayHistogram {
            alpha,
            max_buckets,
            ln_gamma: ((1.0 + a) / (1.0 - a)).ln(),
            buckets: BTreeMap::new(),
            floor: None,
            collapsed: 0.0,
            total: 0.0,
            count: 0,
        })
    }

    /// The stated relative accuracy `α`.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    pub fn max_buckets(&self) -> usize {
        self.max_buckets
    }
    /// Non-empty buckets kept.
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }
    /// Delays inserted (each counted once, whatever its weight).
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Total weight inserted.
    pub fn total_weight(&self) -> f64 {
        self.total
    }
    /// Weight of the delays the cap collapsed (module doc); 0 while the cap has not bound.
    pub fn collapsed_weight(&self) -> f64 {
        self.collapsed
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The ordered key of delay `d`.
    fn key(&self, d: i64) -> i32 {
        if d == 0 {
            return 0;
        }
        let m = d.unsigned_abs() as f64;
        // ⌈log_γ m⌉ ≥ 0 for m ≥ 1; at most ~2.2·10⁷ for α ≥ 1e-6, so it fits an i32.
        let i = (m.ln() / self.ln_gamma).ceil().max(0.0) as i32;
        if d > 0 { i + 1 } else { -(i + 1) }
    }

    /// The delay bucket `key` answers with: `±2γ^i/(γ + 1)`, 0 for the zero bucket.
    fn value(&self, key: i32) -> f64 {
        if key == 0 {
            return 0.0;
        }
        let i = key.unsigned_abs() - 1;
        let g = self.ln_gamma.exp();
        let v = 2.0 * (i as f64 * self.ln_gamma).exp() / (g + 1.0);
        if key > 0 { v } else { -v }
    }

    /// Insert one delay of weight 1.
    pub fn insert(&mut self, d: i64) {
        self.insert_weighted(d, 1.0);
    }

    /// Insert one delay standing for `weight` packets (finite and positive; a sample of
    /// sampling fraction `f` has weight `1/f`).
    pub fn insert_weighted(&mut self, d: i64, weight: f64) {
        assert!(
            weight.is_finite() && weight > 0.0,
            "delay weight {weight} is not a positive number"
        );
        self.count += 1;
        self.total += weight;
        let k = self.key(d);
        if self.floor.is_some_and(|f| k < f) {
            self.collapsed += weight;
            return;
        }
        *self.buckets.entry(k).or_insert(0.0) += weight;
        self.enforce_cap();
    }

    /// Collapse the lowest buckets until at most `max_buckets` remain.
    fn enforce_cap(&mut self) {
        while self.buckets.len() > self.max_buckets {
            let (_, w) = self.buckets.pop_first().expect("more buckets than the cap");
            self.collapsed += w;
            self.floor = self.buckets.first_key_value().map(|(k, _)| *k);
        }
    }

    /// Add every delay of `other` (same `α` and cap): the result is the histogram of the union.
    pub fn merge(&mut self, other: &DelayHistogram) -> Result<(), HistogramError> {
        if self.alpha != other.alpha || self.max_buckets != other.max_buckets {
            return Err(HistogramError::Mismatch(
                self.alpha,
                other.alpha,
                self.max_buckets,
                other.max_buckets,
            ));
        }
        for (k, w) in &other.buckets {
            *self.buckets.entry(*k).or_insert(0.0) += w;
        }
        self.collapsed += other.collapsed;
        self.total += other.total;
        self.count += other.count;
        // what either side collapsed lies below its floor: fold everything below the higher
        // floor into the collapsed weight
        let floor = self.floor.max(other.floor);
        if let Some(f) = floor {
            while let Some((&k, &w)) = self.buckets.first_key_value()
                && k < f
            {
                self.buckets.pop_first();
                self.collapsed += w;
            }
            self.floor = Some(f);
        }
        self.enforce_cap();
        Ok(())
    }

    /// The delay at cumulative weight `t`: the answer of the lowest bucket where the weight of
    /// the delays up to it reaches `t` (the nearest-rank delay of rank `t` with unit weights).
    /// `None` when empty, or when `t` falls within the collapsed weight.
    pub fn at_weight(&self, t: f64) -> Option<f64> {
        if self.count == 0 || t.is_nan() || (self.collapsed > 0.0 && t <= self.collapsed) {
            return None;
        }
        let mut seen = self.collapsed;
        for (&k, &w) in &self.buckets {
            seen += w;
            if seen >= t {
                return Some(self.value(k));
            }
        }
        // `t` at the total, which sums in another order than the buckets: the last bucket
        self.buckets.last_key_value().map(|(&k, _)| self.value(k))
    }

    /// The `p`-quantile (`0 ≤ p ≤ 1`), within `α` of the exact nearest-rank quantile (module
    /// doc); `None` when empty or collapsed.
    pub fn quantile(&self, p: f64) -> Option<f64> {
        if !(0.0..=1.0).contains(&p) {
            return None;
        }
        self.at_weight(p * self.total)
    }

    /// The interval of delays that hold the exact value of a delay `x̂` this histogram answered
    /// with: `|x̂ − x| ≤ α|x|` gives `|x| ≤ |x̂|/(1 − α)`, hence `x ∈ x̂ ± α|x̂|/(1 − α)`.
    pub fn widen(&self, x: f64) -> [f64; 2] {
        let d = self.alpha * x.abs() / (1.0 - self.alpha);
        [x - d, x + d]
    }

    /// The weight of the delays in each bucket of a fixed, Prometheus-style histogram:
    /// `bounds` ascending, bucket `j` holding the delays in `(bounds[j−1], bounds[j]]`, and a
    /// last one above every bound (`bounds.len() + 1` weights). Each of this histogram's buckets
    /// goes by the delay it answers with, within α of its delays: a delay within a relative α
    /// of a bound may land on its other side. Collapsed weight (below the lowest kept bucket)
    /// goes to the first bucket.
    pub fn weights_in(&self, bounds: &[f64]) -> Vec<f64> {
        let mut w = vec![0.0; bounds.len() + 1];
        w[0] += self.collapsed;
        for (&k, &x) in &self.buckets {
            let v = self.value(k);
            let j = bounds.partition_point(|&b| b < v);
            w[j] += x;
        }
        w
    }

    /// The weighted sum of the delays, each taken as the value its bucket answers with (within
    /// a relative α of its own); collapsed delays as the lowest kept bucket's.
    pub fn weighted_sum(&self) -> f64 {
        let low = self
            .buckets
            .first_key_value()
            .map_or(0.0, |(&k, _)| self.value(k));
        self.collapsed * low
            + self
                .buckets
                .iter()
                .map(|(&k, &x)| self.value(k) * x)
                .sum::<f64>()
    }
}

#[cfg(test)]
mod tests;
