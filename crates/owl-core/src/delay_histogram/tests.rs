use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, LogNormal, Normal, Pareto, Weibull};
use rand_pcg::Pcg64Mcg;

use super::*;
use crate::stats::nearest_rank;

/// `n` delays (ns) of distribution `kind`, seeded: heavy tails, both signs, zeros, ties.
fn delays(kind: usize, n: usize, seed: u64) -> Vec<i64> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let exp = Exp::new(1.0 / 40_000.0).unwrap();
    let weib = Weibull::new(10_000.0, 0.6).unwrap();
    let pareto = Pareto::new(5_000.0, 1.2).unwrap();
    let logn = LogNormal::new(9.0, 2.5).unwrap();
    let offset = Normal::new(-2_000.0, 3_000.0).unwrap();
    (0..n)
        .map(|_| match kind {
            0 => exp.sample(&mut rng) as i64,
            1 => weib.sample(&mut rng) as i64,
            2 => f64::min(pareto.sample(&mut rng), 1e15) as i64,
            3 => logn.sample(&mut rng) as i64,
            // bimodal: a fast path and a slow one
            4 => {
                if rng.random_range(0.0..1.0) < 0.9 {
                    20_000 + rng.random_range(0..2_000)
                } else {
                    5_000_000 + rng.random_range(0..500_000)
                }
            }
            // a clock offset: negative, zero and positive delays
            5 => offset.sample(&mut rng) as i64,
            // a few values, many ties, zero among them
            6 => [0, 0, 1, 7, 1_000, -3][rng.random_range(0..6usize)],
            // the extremes of the range
            _ => [i64::MIN, i64::MAX, -1, 1, 0][rng.random_range(0..5usize)],
        })
        .collect()
}

const KINDS: usize = 8;

fn within(est: f64, exact: i64, alpha: f64) -> bool {
    (est - exact as f64).abs() <= alpha * (exact as f64).abs()
}

/// The stated guarantee: every quantile within α of the exact nearest-rank quantile, over many
/// seeded distributions, sizes and accuracies.
#[test]
fn quantiles_within_alpha_of_the_exact_ones() {
    let mut rng = Pcg64Mcg::seed_from_u64(7);
    for alpha in [0.01, 0.001, 0.05, 0.2] {
        for kind in 0..KINDS {
            for seed in 0..25u64 {
                let n = rng.random_range(1..4000usize);
                let mut d = delays(kind, n, seed * 31 + kind as u64);
                let mut h = DelayHistogram::new(alpha, 1 << 20).unwrap();
                for &x in &d {
                    h.insert(x);
                }
                d.sort_unstable();
                let mut ps = vec![0.0, 0.5, 0.9, 0.99, 0.999, 1.0];
                ps.extend((0..20).map(|_| rng.random_range(0.0..1.0)));
                for p in ps {
                    let exact = nearest_rank(&d, p);
                    let est = h.quantile(p).unwrap();
                    assert!(
                        within(est, exact, alpha),
                        "α {alpha} kind {kind} seed {seed} n {n} p {p}: {est} vs exact {exact}"
                    );
                    assert_eq!(est == 0.0, exact == 0, "zero is exact");
                    assert_eq!(est < 0.0, exact < 0, "the sign is kept");
                }
                assert_eq!(h.count(), n as u64);
                assert_eq!(h.collapsed_weight(), 0.0);
            }
        }
    }
}

/// Weighted insertion: a delay of weight w counts as w copies (integer weights, so the exact
/// quantile is that of the repeated delays).
#[test]
fn weights_count_as_copies() {
    let mut rng = Pcg64Mcg::seed_from_u64(11);
    for kind in 0..KINDS {
        for seed in 0..20u64 {
            let d = delays(kind, rng.random_range(1..800usize), seed);
            let mut h = DelayHistogram::default();
            let mut copies = Vec::new();
            for &x in &d {
                let w = rng.random_range(1..6u32);
                h.insert_weighted(x, w as f64);
                copies.extend(std::iter::repeat_n(x, w as usize));
            }
            copies.sort_unstable();
            for p in [0.0, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
                let exact = nearest_rank(&copies, p);
                let est = h.quantile(p).unwrap();
                assert!(
                    within(est, exact, DEFAULT_RELATIVE_ACCURACY),
                    "kind {kind} seed {seed} p {p}: {est} vs {exact}"
                );
            }
            assert_eq!(h.total_weight(), copies.len() as f64);
            assert_eq!(h.count(), d.len() as u64);
        }
    }
}

/// Merging histograms of the parts of a set gives the histogram of the whole set, bucket for
/// bucket — with the cap binding too.
#[test]
fn merge_equals_inserting_the_union() {
    let mut rng = Pcg64Mcg::seed_from_u64(3);
    for cap in [DEFAULT_MAX_BUCKETS, 40, 3, 1] {
        for kind in 0..KINDS {
            for seed in 0..10u64 {
                let d = delays(kind, rng.random_range(1..3000usize), seed);
                let parts = rng.random_range(1..8usize);
                let mut hs = vec![DelayHistogram::new(0.01, cap).unwrap(); parts];
                let mut whole = DelayHistogram::new(0.01, cap).unwrap();
                for &x in &d {
                    hs[rng.random_range(0..parts)].insert(x);
                    whole.insert(x);
                }
                let mut merged = DelayHistogram::new(0.01, cap).unwrap();
                // merge in a random order, some parts into each other first
                while let Some(h) = hs.pop() {
                    if let Some(other) = hs.last_mut()
                        && rng.random_range(0..2) == 0
                    {
                        other.merge(&h).unwrap();
                    } else {
                        merged.merge(&h).unwrap();
                    }
                }
                assert_eq!(merged, whole, "cap {cap} kind {kind} seed {seed}");
            }
        }
    }
}

/// At the cap, the lowest buckets are collapsed and counted; quantiles above the collapsed
/// weight keep the guarantee, those within it are not answered.
#[test]
fn the_cap_collapses_the_lowest_buckets_and_says_so() {
    for kind in 0..KINDS {
        for seed in 0..20u64 {
            let mut d = delays(kind, 3000, seed);
            let mut h = DelayHistogram::new(0.01, 50).unwrap();
            for &x in &d {
                h.insert(x);
            }
            d.sort_unstable();
            assert!(h.buckets() <= 50);
            let c = h.collapsed_weight();
            for k in 0..=1000 {
                let p = k as f64 / 1000.0;
                let exact = nearest_rank(&d, p);
                match h.quantile(p) {
                    Some(est) => {
                        assert!(
                            c == 0.0 || p * d.len() as f64 > c,
                            "answered within the collapsed weight"
                        );
                        assert!(within(est, exact, 0.01), "kind {kind} p {p}");
                    }
                    None => assert!(p * d.len() as f64 <= c, "kind {kind} p {p}: unanswered"),
                }
            }
        }
    }
    // a wide two-signed spread binds the default cap
    let mut h = DelayHistogram::default();
    for m in 1..=3000u32 {
        let x = (1.0202f64.powi(m as i32)).min(9e18) as i64;
        h.insert(x);
        h.insert(-x);
    }
    assert_eq!(h.buckets(), DEFAULT_MAX_BUCKETS);
    assert!(h.collapsed_weight() > 0.0);
    assert!(h.quantile(0.01).is_none(), "the low end was collapsed");
    assert!(h.quantile(0.99).is_some_and(|q| q > 0.0));
}

#[test]
fn empty_zero_and_refused() {
    let h = DelayHistogram::default();
    assert_eq!(h.quantile(0.5), None);
    assert!(h.is_empty());
    let mut h = DelayHistogram::default();
    h.insert(0);
    assert_eq!(h.quantile(0.99), Some(0.0));
    assert_eq!(h.quantile(1.5), None);
    assert_eq!(
        DelayHistogram::new(0.0, 10),
        Err(HistogramError::Accuracy(0.0))
    );
    assert_eq!(
        DelayHistogram::new(0.9, 10),
        Err(HistogramError::Accuracy(0.9))
    );
    assert_eq!(DelayHistogram::new(0.01, 0), Err(HistogramError::Buckets));
    let mut a = DelayHistogram::new(0.01, 10).unwrap();
    assert!(a.merge(&DelayHistogram::new(0.02, 10).unwrap()).is_err());
    assert!(a.merge(&DelayHistogram::new(0.01, 11).unwrap()).is_err());
    // the widened answer holds the exact value
    let mut h = DelayHistogram::default();
    for x in [-123_456i64, 987_654_321] {
        h.insert(x);
        let q = h.quantile(if x < 0 { 0.0 } else { 1.0 }).unwrap();
        let [lo, hi] = h.widen(q);
        assert!(lo <= x as f64 && x as f64 <= hi, "{x}: {lo} {hi}");
    }
}

/// Fixed buckets: every delay lands in the bucket of its bound unless it is within α of one;
/// the weights sum to the total; the weighted sum is within α of the exact one.
#[test]
fn fixed_buckets_hold_their_delays_within_alpha() {
    let bounds = [1_000.0, 10_000.0, 100_000.0];
    let mut h = DelayHistogram::default();
    let ds: [i64; 8] = [-5, 0, 500, 999, 5_000, 50_000, 99_500, 2_000_000];
    for d in ds {
        h.insert_weighted(d, 2.0);
    }
    let w = h.weights_in(&bounds);
    assert_eq!(w.len(), 4);
    assert!((w.iter().sum::<f64>() - h.total_weight()).abs() < 1e-9);
    // ≤ 1 µs: −5, 0, 500, 999 (999 within α of the bound may go either way); 5 µs; 50 µs and
    // 99.5 µs (within α of 100 µs: either side); 2 ms
    let exact = [8.0, 2.0, 4.0, 2.0];
    for j in 0..4 {
        assert!((w[j] - exact[j]).abs() <= 2.0, "bucket {j}: {w:?}");
    }
    assert_eq!(w[3], 2.0, "{w:?}");
    let sum: f64 = ds.iter().map(|&d| 2.0 * d as f64).sum();
    let tol: f64 = ds
        .iter()
        .map(|&d| 2.0 * 0.01 * d.unsigned_abs() as f64)
        .sum();
    assert!(
        (h.weighted_sum() - sum).abs() <= tol,
        "{} vs {sum}",
        h.weighted_sum()
    );
    // delays far from every bound land exactly
    let mut h = DelayHistogram::default();
    for d in [10, 20_000, 20_001, 300_000] {
        h.insert(d);
    }
    assert_eq!(h.weights_in(&bounds), vec![1.0, 0.0, 2.0, 1.0]);
}
