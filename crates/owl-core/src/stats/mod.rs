//! Exact delay statistics and the error measures every comparison uses; the special functions
//! ([`special`]) and standard-deviation intervals ([`ci`]) the estimators share.
//!
//! Conventions, used by every method and by the ground truth alike:
//! - the standard deviation is the population one, `σ² = E[w²] − μ²` (LDA eq. 3 as corrected,
//!   RDA Algorithm 3), not the `n − 1` sample one;
//! - quantiles are nearest-rank: the p-quantile of n sorted values is the value of rank
//!   `⌈p·n⌉` (1-based), so it is always an observed delay.

pub mod ci;
pub mod special;

use serde::Serialize;

/// Summary of a set of one-way delays in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DelaySummary {
    pub count: u64,
    pub mean_ns: f64,
    pub std_ns: f64,
    pub min_ns: i64,
    pub max_ns: i64,
    pub p50_ns: i64,
    pub p90_ns: i64,
    pub p99_ns: i64,
    pub p999_ns: i64,
}

impl DelaySummary {
    /// Summarise `delays`, sorting them in place. `None` when empty.
    ///
    /// The mean is exact (an `i128` sum divided once); the variance is a second pass over the
    /// deviations from that mean, so it does not suffer the cancellation of `E[w²] − μ²` when
    /// the mean is large against the spread.
    /// Summarise `delays`, reordering them in place (quantiles by selection, O(n), so large
    /// sets are not sorted).
    pub fn from_delays(delays: &mut [i64]) -> Option<DelaySummary> {
        let n = delays.len();
        if n == 0 {
            return None;
        }
        if n <= 4096 {
            delays.sort_unstable();
            return Some(Self::from_sorted(delays));
        }
        let (mean, std) = mean_std_exact(delays.iter().copied());
        // select ascending ranks, each within the part above the previous one
        let mut q = [0i64; 4];
        let mut lo = 0;
        for (k, r) in quantile_ranks(n).into_iter().enumerate() {
            let r = r.max(lo);
            let (_, v, _) = delays[lo..].select_nth_unstable(r - lo);
            q[k] = *v;
            lo = r;
        }
        let (min, max) = (*delays.iter().min().unwrap(), *delays.iter().max().unwrap());
        Some(Self::from_parts(n, (mean, std), min, max, q))
    }

    /// Summarise more than 4 096 delays held elsewhere, as [`from_delays`](Self::from_delays)
    /// would: `xs` yields them in the order whose floating-point sum it takes (the order they
    /// were given in), `q` are the values of [`quantile_ranks`].
    pub fn from_held(
        n: usize,
        xs: impl Iterator<Item = i64> + Clone,
        min: i64,
        max: i64,
        q: [i64; 4],
    ) -> DelaySummary {
        debug_assert!(n > 4096);
        Self::from_parts(n, mean_std_exact(xs), min, max, q)
    }

    fn from_parts(n: usize, (mean, std): (f64, f64), min: i64, max: i64, q: [i64; 4]) -> Self {
        DelaySummary {
            count: n as u64,
            mean_ns: mean,
            std_ns: std,
            min_ns: min,
            max_ns: max,
            p50_ns: q[0],
            p90_ns: q[1],
            p99_ns: q[2],
            p999_ns: q[3],
        }
    }

    /// Summarise delays that are already sorted ascending.
    pub fn from_sorted(sorted: &[i64]) -> DelaySummary {
        debug_assert!(!sorted.is_empty());
        let n = sorted.len();
        let (mean, std) = mean_std_exact(sorted.iter().copied());
        DelaySummary {
            count: n as u64,
            mean_ns: mean,
            std_ns: std,
            min_ns: sorted[0],
            max_ns: sorted[n - 1],
            p50_ns: nearest_rank(sorted, 0.50),
            p90_ns: nearest_rank(sorted, 0.90),
            p99_ns: nearest_rank(sorted, 0.99),
            p999_ns: nearest_rank(sorted, 0.999),
        }
    }
}

/// The 0-based positions, among `n > 0` sorted values, of the nearest-rank p50, p90, p99 and
/// p99.9.
pub fn quantile_ranks(n: usize) -> [usize; 4] {
    [0.50, 0.90, 0.99, 0.999].map(|p: f64| ((p * n as f64).ceil() as usize).clamp(1, n) - 1)
}

/// Exact mean (`i128` sum) and population std (second pass over deviations, in `xs`' order).
fn mean_std_exact(xs: impl Iterator<Item = i64> + Clone) -> (f64, f64) {
    let mut count = 0usize;
    let sum: i128 = xs
        .clone()
        .map(|d| {
            count += 1;
            d as i128
        })
        .sum();
    let n = count as f64;
    let mean = sum as f64 / n;
    let ss: f64 = xs
        .map(|d| {
            let x = d as f64 - mean;
            x * x
        })
        .sum();
    (mean, (ss / n).sqrt())
}

/// Nearest-rank quantile of sorted, non-empty values.
pub fn nearest_rank(sorted: &[i64], p: f64) -> i64 {
    let n = sorted.len();
    let rank = (p * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// `|estimate − truth| / |truth|`; `None` when either is missing or the truth is 0.
pub fn relative_error(estimate: Option<f64>, truth: Option<f64>) -> Option<f64> {
    match (estimate, truth) {
        (Some(e), Some(t)) if t != 0.0 && e.is_finite() => Some((e - t).abs() / t.abs()),
        _ => None,
    }
}

/// Mean and population standard deviation of a finished sample (used for run-to-run spreads
/// in experiments). Returns `(mean, std)`; `(NaN, NaN)` for an empty slice.
pub fn mean_std(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    (m, v.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_values() {
        let mut d: Vec<i64> = (1..=1000).rev().collect();
        let s = DelaySummary::from_delays(&mut d).unwrap();
        assert_eq!(s.count, 1000);
        assert_eq!(s.mean_ns, 500.5);
        // population variance of 1..=n is (n²−1)/12
        assert!((s.std_ns - ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt()).abs() < 1e-9);
        assert_eq!((s.min_ns, s.max_ns), (1, 1000));
        assert_eq!(
            (s.p50_ns, s.p90_ns, s.p99_ns, s.p999_ns),
            (500, 900, 990, 999)
        );
    }

    #[test]
    fn selection_agrees_with_sorting() {
        let mut x: Vec<i64> = (0..100_003i64)
            .map(|i| (i * 7919) % 100_003 - 500)
            .collect();
        let mut y = x.clone();
        y.sort_unstable();
        let a = DelaySummary::from_delays(&mut x).unwrap();
        let b = DelaySummary::from_sorted(&y);
        assert_eq!(a, b);
    }

    #[test]
    fn mean_is_exact_for_huge_delays() {
        let mut d = vec![i64::MAX / 2, i64::MAX / 2 + 2];
        let s = DelaySummary::from_delays(&mut d).unwrap();
        assert_eq!(s.mean_ns, (i64::MAX / 2 + 1) as f64);
    }

    #[test]
    fn empty_and_single() {
        assert!(DelaySummary::from_delays(&mut []).is_none());
        let s = DelaySummary::from_delays(&mut [-5]).unwrap();
        assert_eq!((s.mean_ns, s.std_ns, s.p999_ns), (-5.0, 0.0, -5));
    }

    #[test]
    fn relative_error_edges() {
        assert_eq!(relative_error(Some(11.0), Some(10.0)), Some(0.1));
        assert_eq!(relative_error(Some(1.0), Some(0.0)), None);
        assert_eq!(relative_error(None, Some(1.0)), None);
        assert_eq!(relative_error(Some(f64::NAN), Some(1.0)), None);
    }
}
