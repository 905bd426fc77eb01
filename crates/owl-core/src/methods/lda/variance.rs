//! The three estimators of the delay variance that LDA offers (`--method-config
//! lda:std=paper|centred|rows`), each with a jackknife estimate of its own variance, the
//! effective degrees of freedom that follow, and a 95 % interval for the standard deviation.
//!
//! # Model
//!
//! Write each received packet's delay as `w_x = μ + e_x`. The row hash `h` and the bank hash
//! `g` place packets independently of their delays. Take the `e_x` independent with mean 0 and
//! variance `σ²`, and condition on everything the hashes decided (which rows are usable, the
//! packet counts `n_i` of the rows, which row of a collapsed pair each packet is in): every
//! expectation below is exact under that conditioning. (With the trace held fixed and only the
//! hash random — what a seeded experiment varies — the packets of the usable rows are a simple
//! random sample of the `R` received packets and the same results hold with `σ²` the
//! population variance times `R/(R − 1)`, exactly for the rows estimator and up to `O(1/R)` terms
//! for the pair estimators. The ground truth owl reports is the population std, divisor `R`; the
//! relative difference `1/(R − 1)` is below `1/ν` — smaller than the estimator's own spread
//! `√(2/ν)` by far — and is not corrected.)
//!
//! Notation: a usable row `i` (§III-D, `S_A[i, j] = S_B[i, j]`, and equal identity digests when
//! both points keep them: a foreign row, equal counters over different packets, is never a
//! unit of any estimator below, nor are the collapsed rows it belongs to under the default
//! per-row rule) holds `n_i` packets and the exact difference
//! `Δ_i = T_B[i, j] − T_A[i, j] = Σ_{x∈i} w_x`; `S = Σ n_i` is the effective
//! sample size, `T = Σ Δ_i`, and `D = T/S` the mean of §III-D. A usable collapsed row `k`
//! (§III-E) holds `ñ_k = n₊ + n₋` packets, `n₊` in its odd row (sign `+`) and `n₋` in its even
//! row; its difference is `d_k = T̃_B(k) − T̃_A(k) = Σ_x s_x w_x`, and `c_k = n₊ − n₋` is its
//! row-count **imbalance**; `S̃ = Σ ñ_k`.
//!
//! # `paper`: eq. (5) and (3), `σ̂² = F − D²`
//!
//! `d_k = μ·c_k + Σ s_x e_x`, and over the signs `E[c_k²] = ñ_k`, so
//! `E[d_k²] = ñ_k (μ² + σ²)`, `E[F] = μ² + σ²` (the paper's "`E[F] = (1/R) Σ w_x²`") and
//! `F − D²` is unbiased up to `Var(D) = σ²/S`. Its spread is the problem: `d_k` is roughly
//! normal with variance `ñ_k(μ² + σ²)`, so `Var(d_k²) ≈ 2ñ_k²(μ² + σ²)²` and the relative
//! standard deviation of `σ̂²` is about `(1 + μ²/σ²)·√(2/ν)`, `ν = S̃²/Σ ñ_k²` the effective
//! number of collapsed rows. The `μ²` term is `μ·c_k`: hash noise in the row counts, which the
//! counters know exactly. On a path with a propagation delay (`μ/σ` of 10–1000) the estimate is
//! noise, and at `μ/σ ≈ 2` it is already off by tens of percent at 2 × 512 rows and negative
//! (`F − D² < 0`, formerly clamped to 0) in some intervals. Its interval is the normal one on `σ̂²` with the
//! jackknife standard error (a difference of two moments is not χ²-like), clamped at 0.
//!
//! # `centred`: subtract `D·c_k` before squaring
//!
//! Two passes over the banks: `D` first, then `d'_k = d_k − D·c_k`, computed exactly as
//! `(S·d_k − T·c_k)/S` in `i128`. With `δ = D − μ = Σ_{x∈U} e_x / S` (`U` the packets of the
//! usable rows, which include those of every usable collapsed row) and `A_k = Σ_{x∈k} s_x e_x`,
//! `d'_k = A_k − δ·c_k`, and conditionally on the hash
//!
//! ```text
//! E[A_k²] = ñ_k σ²,   E[A_k δ] = σ² c_k / S,   E[δ²] = σ² / S
//! E[d'_k²] = ñ_k σ² − 2σ² c_k²/S + σ² c_k²/S = σ² (ñ_k − c_k²/S)
//! ```
//!
//! so `Σ d'_k² / S̃` is biased low by the factor `1 − Σc_k²/(S·S̃)` (about `1 − 1/S`, since
//! `E[c_k²] = ñ_k`: `D` is estimated from the same rows) and the unbiased estimator is
//!
//! ```text
//! σ̂² = Σ d'_k² / (S̃ − Σ c_k² / S).
//! ```
//!
//! `μ` is gone: `Var(A_k²) = σ⁴(2ñ_k² + (γ₄ − 3)ñ_k)` (`γ₄` the kurtosis of the delays), so
//! the relative standard deviation is about `√(2/ν + (γ₄ − 3)/S̃)` whatever `μ/σ`.
//!
//! # `rows`: the between-row estimator
//!
//! Every usable row with `n_i > 0` — not only the rows of usable pairs, and with no sign — gives
//! the residual `r_i = Δ_i − n_i·D = E_i − n_i δ` (`E_i = Σ_{x∈i} e_x`), computed exactly as
//! `(S·Δ_i − n_i·T)/S`. Conditionally on the hash,
//!
//! ```text
//! E[r_i²] = n_i σ² − 2 n_i² σ²/S + n_i² σ²/S = n_i σ² (1 − n_i/S)
//! E[Σ_i r_i²/n_i] = σ² Σ_i (1 − n_i/S) = σ² (K − 1)
//! ```
//!
//! with `K` the usable rows holding a packet. So
//!
//! ```text
//! σ̂² = Σ_i (Δ_i − n_i D)²/n_i ÷ (K − 1)
//! ```
//!
//! is **exactly** unbiased for any `K ≥ 2` and any unequal `n_i`: the weight `1/n_i` makes row
//! `i` lose exactly its share `n_i/S` of the one degree of freedom spent on `D`, and the shares
//! add up to one. (Dividing by `K` would be biased by `−1/K`, 20 % at `K = 5`; weighting the
//! squares by anything else than `1/n_i` leaves a bias that depends on how unequal the `n_i`
//! are — `Σ r_i² / S` has expectation `σ²(1 − Σn_i²/S²)`.) For normal delays `z_i = E_i/√n_i` are
//! independent `N(0, σ²)` and `Σ r_i²/n_i` is the squared length of their projection orthogonal
//! to `(√n_i)`: exactly `σ²·χ²_{K−1}`, so `ν = K − 1` whatever the `n_i`. With heavier tails
//! `Var(z_i²) = σ⁴(2 + (γ₄ − 3)/n_i)`: rows of one or two packets (a sparsely sampled bank)
//! carry the kurtosis undiluted, which the jackknife below sees.
//!
//! What remains for small `K` is the bias of the square root: `σ̂ = √σ̂²` is biased low by about
//! `1/(4ν)` (for normal delays `E[σ̂]/σ = √(2/ν)·Γ((ν+1)/2)/Γ(ν/2)`: 0.94 at `ν = 4`, 0.995 at
//! `ν = 50`). owl reports `√σ̂²` like every other std it prints (the exact matcher's
//! included); the 95 % interval, from the χ² distribution, carries that small-`ν` asymmetry.
//!
//! # The interval: jackknife and Satterthwaite
//!
//! Each estimator's own variance is estimated by the delete-one jackknife over its units
//! (usable rows for `rows`; usable collapsed rows for `paper` and `centred`, deleting a collapsed
//! row also removing its rows from `D`), in closed form (`O(K)`; for `rows`,
//! `SS₍₋ᵢ₎ = SS − r_i²/n_i − r_i²/(S − n_i)` with `SS = Σ r_i²/n_i`). For the two quadratic
//! forms (`centred`, `rows`) the estimate is treated as `σ²·χ²_ν/ν` with Satterthwaite's
//! effective degrees of freedom `ν = 2σ̂⁴ / Var_jack(σ̂²)` — `K − 1` for normal delays and equal
//! information per unit, fewer when heavy tails make some units noisier — and the interval is
//! `σ² ∈ [ν σ̂²/χ²_ν(0.975), ν σ̂²/χ²_ν(0.025)]`, square-rooted. This was chosen over a bootstrap
//! over rows because the estimator's spread is a known function of its units (the jackknife is
//! deterministic, `O(K)`, and consistent for smooth functions of means) and because the χ² shape
//! keeps the interval asymmetric and positive at small `ν`, where a normal or a percentile
//! bootstrap interval is poor. `lda-std` measures its coverage.
//!
//! For `rows`, the interval is the wider of that one and Bonett's (D. G. Bonett, *Approximate
//! confidence interval for standard deviation of nonnormal distributions*, CSDA 50, 2006) on the
//! rows' standardised residuals `z_i = r_i/√n_i` — a log-scale interval from their kurtosis
//! around a trimmed mean, with his small-sample factor `c = K/(K − t)` and Student's `t` on
//! `K − 1` degrees of freedom ([`ci::bonett_t_std_ci95`]). Measured per interval (`owl
//! experiment intervals`: 50 ms–1 s intervals of FIFO queue delays, 20–100 usable rows), the
//! Satterthwaite interval alone covered 85–94 %: a kurtosis (or a jackknife variance) estimated
//! from a few dozen heavy-tailed units is low more often than high, so the interval is short
//! exactly when it matters. The union is conservative where either is.
//!
//! # When the std is not reported
//!
//! A std is withheld (`std_ns: None`, a note saying why) instead of being clamped to 0 when the
//! estimator has fewer than two degrees of freedom to rest on: fewer than [`MIN_ROWS`] usable
//! rows holding packets (`rows`), fewer than [`MIN_COLLAPSED`] usable collapsed rows holding
//! packets (`paper`, `centred`), or, for `paper`, `F − D² ≤ 0` (its noise exceeds the variance:
//! a 0 would claim a constant delay the data do not show). A `centred` or `rows` estimate of
//! exactly 0 (every row's delays average exactly `D`) is reported as 0, without an interval.

use crate::stats::ci;

/// Fewest usable rows holding packets for the `rows` estimator: `K − 1 ≥ 2` degrees of freedom.
pub const MIN_ROWS: usize = 3;
/// Fewest usable collapsed rows holding packets for the pair estimators (about one degree of
/// freedom each).
pub const MIN_COLLAPSED: usize = 2;

/// Which estimator of the delay variance LDA reports (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StdEstimator {
    /// eq. (5) then eq. (3): `σ̂² = F − D²` (§III-E as printed).
    Paper,
    /// Collapsed rows centred by their imbalance: `Σ (d_k − D·c_k)² / (S̃ − Σ c_k²/S)`.
    Centred,
    /// Between-row: `Σ (Δ_i − n_i D)²/n_i ÷ (K − 1)` over every usable row holding packets.
    #[default]
    Rows,
}

impl StdEstimator {
    pub const ALL: [StdEstimator; 3] = [
        StdEstimator::Paper,
        StdEstimator::Centred,
        StdEstimator::Rows,
    ];
}

impl std::fmt::Display for StdEstimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StdEstimator::Paper => "paper",
            StdEstimator::Centred => "centred",
            StdEstimator::Rows => "rows",
        })
    }
}

impl std::str::FromStr for StdEstimator {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "paper" => Ok(StdEstimator::Paper),
            "centred" => Ok(StdEstimator::Centred),
            "rows" => Ok(StdEstimator::Rows),
            _ => Err(format!("expected paper, centred or rows, got '{s}'")),
        }
    }
}

/// One estimator's result for one interval.
#[derive(Clone, Debug, PartialEq)]
pub struct VarianceEstimate {
    pub estimator: StdEstimator,
    /// Units it averages over: usable collapsed rows holding packets (`paper`, `centred`) or
    /// usable rows holding packets (`rows`).
    pub units: usize,
    /// The variance estimate, ns² (unbiased: module documentation); `paper`'s may be negative.
    pub variance_ns2: Option<f64>,
    /// Jackknife standard error of `variance_ns2`, ns².
    pub variance_se_ns2: Option<f64>,
    /// Effective degrees of freedom `ν = 2σ̂⁴/Var_jack(σ̂²)` (`centred`, `rows`).
    pub dof: Option<f64>,
    /// `√σ̂²`, ns, or `None` when withheld (module documentation).
    pub std_ns: Option<f64>,
    /// 95 % interval of the standard deviation, ns.
    pub std_ci95_ns: Option<[f64; 2]>,
    /// Why `std_ns` is `None`, when it is.
    pub withheld: Option<String>,
}

impl VarianceEstimate {
    fn withheld(estimator: StdEstimator, units: usize, why: String) -> VarianceEstimate {
        VarianceEstimate {
            estimator,
            units,
            variance_ns2: None,
            variance_se_ns2: None,
            dof: None,
            std_ns: None,
            std_ci95_ns: None,
            withheld: Some(why),
        }
    }
}

/// A usable row holding packets: `Δ_i` (exact) and `n_i`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Row {
    pub delta: i64,
    pub n: u64,
}

/// A usable collapsed row holding packets: its difference `d_k = Σ s_x w_x` (exact), its
/// packets `ñ_k`, its imbalance `c_k = n₊ − n₋` (from the sender's counters), and what its
/// individually usable rows put into `T` and `S` (for the jackknife's `D₍₋ₖ₎`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pair {
    pub d: i64,
    pub n: u64,
    pub imbalance: i64,
    pub t: i128,
    pub s: u64,
}

/// Everything the variance estimators need from one interval's usable rows.
pub(crate) struct Usable<'a> {
    pub rows: &'a [Row],
    pub pairs: &'a [Pair],
    /// `T = Σ Δ_i` over the usable rows.
    pub t: i128,
    /// `S = Σ n_i`.
    pub s: u64,
}

impl Usable<'_> {
    fn mean(&self) -> f64 {
        to_f64(self.t) / self.s as f64
    }

    /// `S·x − n·T`, exact (`|T| < 2⁸⁷`, `n < 2³³`, `S < 2⁵⁶`: well inside `i128`), as `f64`.
    fn scaled_residual(&self, x: i128, n: i128) -> f64 {
        to_f64((self.s as i128) * x - n * self.t)
    }

    pub fn estimate(&self, which: StdEstimator) -> VarianceEstimate {
        match which {
            StdEstimator::Paper => self.paper(),
            StdEstimator::Centred => self.centred(),
            StdEstimator::Rows => self.rows(),
        }
    }

    fn too_few_pairs(&self, which: StdEstimator) -> Option<VarianceEstimate> {
        let k = self.pairs.len();
        (k < MIN_COLLAPSED || self.s == 0).then(|| {
            VarianceEstimate::withheld(
                which,
                k,
                format!(
                    "std not reported: {k} usable collapsed rows hold packets; the {which} estimator needs at least {MIN_COLLAPSED} (§III-E)"
                ),
            )
        })
    }

    /// eq. (5), eq. (3).
    fn paper(&self) -> VarianceEstimate {
        let which = StdEstimator::Paper;
        if let Some(w) = self.too_few_pairs(which) {
            return w;
        }
        let k = self.pairs.len();
        let (mut q, mut st) = (0f64, 0u64);
        for p in self.pairs {
            let d = p.d as f64;
            q += d * d;
            st += p.n;
        }
        let d_mean = self.mean();
        let v = q / st as f64 - d_mean * d_mean;
        let loo: Vec<f64> = self
            .pairs
            .iter()
            .map(|p| {
                let f = (q - (p.d as f64) * (p.d as f64)) / (st - p.n) as f64;
                let s = self.s - p.s;
                let dm = if s > 0 {
                    to_f64(self.t - p.t) / s as f64
                } else {
                    d_mean
                };
                f - dm * dm
            })
            .collect();
        let se = ci::jackknife_variance(&loo).map(f64::sqrt);
        if v <= 0.0 {
            return VarianceEstimate {
                variance_ns2: Some(v),
                variance_se_ns2: se,
                ..VarianceEstimate::withheld(
                    which,
                    k,
                    format!(
                        "std not reported: the paper's F − D² = {v:.3e} ns² ≤ 0 over {k} collapsed rows (its spread grows as 1 + μ²/σ²; try std=rows)"
                    ),
                )
            };
        }
        VarianceEstimate {
            estimator: which,
            units: k,
            variance_ns2: Some(v),
            variance_se_ns2: se,
            dof: None,
            std_ns: Some(v.sqrt()),
            std_ci95_ns: se.and_then(|se| ci::normal_std_ci95(v, se)),
            withheld: None,
        }
    }

    /// `Σ (d_k − D c_k)² / (S̃ − Σ c_k²/S)`.
    fn centred(&self) -> VarianceEstimate {
        let which = StdEstimator::Centred;
        if let Some(w) = self.too_few_pairs(which) {
            return w;
        }
        let k = self.pairs.len();
        let s = self.s as f64;
        // d'_k = (S·d_k − T·c_k)/S, exact before the division
        let dc: Vec<f64> = self
            .pairs
            .iter()
            .map(|p| self.scaled_residual(p.d as i128, p.imbalance as i128) / s)
            .collect();
        let (mut q, mut pc, mut c2, mut st) = (0f64, 0f64, 0f64, 0u64);
        for (p, &d) in self.pairs.iter().zip(&dc) {
            let c = p.imbalance as f64;
            q += d * d;
            pc += d * c;
            c2 += c * c;
            st += p.n;
        }
        let denom = st as f64 - c2 / s;
        if denom <= 0.0 {
            return VarianceEstimate::withheld(
                which,
                k,
                "std not reported: the collapsed rows' packets all sit on one side".into(),
            );
        }
        let v = q / denom;
        // leave collapsed row k out: D moves by ε = −(S t_k − s_k T)/(S (S − s_k)), and
        // Σ_{j≠k} (d'_j − ε c_j)² = (Q − d'_k²) − 2ε(P − d'_k c_k) + ε²(C2 − c_k²)
        let loo: Vec<f64> = self
            .pairs
            .iter()
            .zip(&dc)
            .map(|(p, &d)| {
                let c = p.imbalance as f64;
                let s_k = (self.s - p.s) as f64;
                let eps = if s_k > 0.0 {
                    -self.scaled_residual(p.t, p.s as i128) / (s * s_k)
                } else {
                    0.0
                };
                let num = (q - d * d) - 2.0 * eps * (pc - d * c) + eps * eps * (c2 - c * c);
                let den = (st - p.n) as f64 - (c2 - c * c) / s_k.max(1.0);
                num / den
            })
            .collect();
        self.quadratic(which, k, v, &loo)
    }

    /// `Σ (Δ_i − n_i D)²/n_i ÷ (K − 1)`.
    fn rows(&self) -> VarianceEstimate {
        let which = StdEstimator::Rows;
        let k = self.rows.len();
        if k < MIN_ROWS {
            return VarianceEstimate::withheld(
                which,
                k,
                format!(
                    "std not reported: {k} usable rows hold packets; the rows estimator needs at least {MIN_ROWS} (2 degrees of freedom)"
                ),
            );
        }
        let s = self.s as f64;
        let terms: Vec<(f64, f64)> = self
            .rows
            .iter()
            .map(|r| {
                let res = self.scaled_residual(r.delta as i128, r.n as i128) / s;
                (res, r.n as f64)
            })
            .collect();
        let b = between_rows(&terms, s).expect("at least MIN_ROWS rows");
        VarianceEstimate {
            estimator: which,
            units: k,
            variance_ns2: Some(b.variance),
            variance_se_ns2: b.jackknife.map(f64::sqrt),
            dof: b.dof,
            std_ns: Some(b.variance.max(0.0).sqrt()),
            std_ci95_ns: b.ci95,
            withheld: None,
        }
    }

    /// Report of a non-negative quadratic-form estimate `v` with leave-one-out values `loo`:
    /// Satterthwaite's interval (module documentation).
    fn quadratic(&self, which: StdEstimator, k: usize, v: f64, loo: &[f64]) -> VarianceEstimate {
        let var = ci::jackknife_variance(loo);
        let dof = var.and_then(|var| ci::effective_dof(v, var));
        VarianceEstimate {
            estimator: which,
            units: k,
            variance_ns2: Some(v),
            variance_se_ns2: var.map(f64::sqrt),
            dof,
            std_ns: Some(v.max(0.0).sqrt()),
            std_ci95_ns: dof.and_then(|nu| ci::satterthwaite_std_ci95(v, nu)),
            withheld: None,
        }
    }
}

/// The between-row estimate of `σ²` from units `(r_i, n_i)` — each a row's (or a bucket's)
/// residual `Δ_i − n_i·D` and its packets, out of `s` packets in all (module documentation:
/// `rows`): the estimate, its jackknife variance, Satterthwaite's degrees of freedom and the
/// wider of Satterthwaite's and Bonett's 95 % intervals of the std. FineComb's buckets use it
/// too (`crate::finecomb`). `None` under three units.
pub(crate) fn between_rows(terms: &[(f64, f64)], s: f64) -> Option<BetweenRows> {
    let k = terms.len();
    if k < MIN_ROWS {
        return None;
    }
    let ss: f64 = terms.iter().map(|&(r, n)| r * r / n).sum();
    let v = ss / (k - 1) as f64;
    let loo: Vec<f64> = terms
        .iter()
        .map(|&(r, n)| (ss - r * r / n - r * r / (s - n)) / (k - 2) as f64)
        .collect();
    let jackknife = ci::jackknife_variance(&loo);
    let dof = jackknife.and_then(|var| ci::effective_dof(v, var));
    let satt = dof.and_then(|nu| ci::satterthwaite_std_ci95(v, nu));
    // the wider of Satterthwaite's interval and Bonett's on the standardised residuals
    // (module documentation: small samples of heavy-tailed delays)
    let zs: Vec<f64> = terms.iter().map(|&(r, n)| r / n.sqrt()).collect();
    let ci95 = match (satt, ci::bonett_t_std_ci95(v, &zs)) {
        (Some([a, b]), Some([c, d])) => Some([a.min(c), b.max(d)]),
        (x, y) => x.or(y),
    };
    Some(BetweenRows {
        variance: v,
        jackknife,
        dof,
        ci95,
    })
}

/// What [`between_rows`] gives.
pub(crate) struct BetweenRows {
    pub variance: f64,
    pub jackknife: Option<f64>,
    pub dof: Option<f64>,
    pub ci95: Option<[f64; 2]>,
}

/// `i128` to `f64` through `i64` when it fits (the common case: one instruction instead of
/// the general conversion's library call).
fn to_f64(x: i128) -> f64 {
    i64::try_from(x).map_or_else(|_| x as f64, |v| v as f64)
}
