//! Confidence intervals for a standard deviation: the Satterthwaite interval of a variance
//! estimate with an estimated effective number of degrees of freedom, the normal interval, and
//! Bonett's kurtosis-adjusted interval for a sample of exact delays (the χ², normal and t
//! quantiles they rest on are [`super::special`]'s).
//!
//! These serve LDA's three standard-deviation estimators and the other methods that report a
//! std from exact delay samples (probing, MPE, `sample`), from collapsed pairs (RDA, FineComb)
//! or from counter sums (COLATE).

use super::special::{Z_975, chi2_quantile, t_975};

/// The 95 % interval of a standard deviation from a variance estimate `v > 0` that is
/// distributed as `σ²·χ²_ν/ν` (Satterthwaite's approximation, with `ν` the effective number
/// of degrees of freedom, not necessarily an integer): `σ² ∈ [ν·v/χ²_ν(0.975),
/// ν·v/χ²_ν(0.025)]`, square-rooted. `None` unless `v > 0` and `ν > 0` are finite.
pub fn satterthwaite_std_ci95(v: f64, nu: f64) -> Option<[f64; 2]> {
    if !(v.is_finite() && v > 0.0 && nu.is_finite() && nu > 0.0) {
        return None;
    }
    let lo = nu * v / chi2_quantile(nu, 0.975);
    let hi = nu * v / chi2_quantile(nu, 0.025);
    Some([lo.sqrt(), hi.sqrt()])
}

/// Satterthwaite's effective degrees of freedom of a variance estimate `v` whose own variance
/// is estimated as `var_v`: `ν = 2v²/Var(v)` (what a `σ²χ²_ν/ν` variable has).
pub fn effective_dof(v: f64, var_v: f64) -> Option<f64> {
    (v > 0.0 && var_v > 0.0 && v.is_finite() && var_v.is_finite()).then(|| 2.0 * v * v / var_v)
}

/// The normal-theory 95 % interval of a standard deviation from a variance estimate `v` (any
/// sign) with standard error `se`: `σ² ∈ [v − z·se, v + z·se]`, the lower end clamped at 0,
/// square-rooted. `None` when the upper end is not positive.
pub fn normal_std_ci95(v: f64, se: f64) -> Option<[f64; 2]> {
    if !(v.is_finite() && se.is_finite() && se >= 0.0) {
        return None;
    }
    let hi = v + Z_975 * se;
    (hi > 0.0).then(|| [(v - Z_975 * se).max(0.0).sqrt(), hi.sqrt()])
}

/// The delete-one jackknife variance `(K − 1)/K · Σ (θ₍₋ᵢ₎ − θ̄)²` of a statistic from its `K`
/// leave-one-out values.
pub fn jackknife_variance(leave_one_out: &[f64]) -> Option<f64> {
    let k = leave_one_out.len();
    if k < 2 {
        return None;
    }
    let mean = leave_one_out.iter().sum::<f64>() / k as f64;
    let ss: f64 = leave_one_out.iter().map(|t| (t - mean) * (t - mean)).sum();
    Some(ss * (k - 1) as f64 / k as f64)
}

/// Bonett's 95 % interval for the standard deviation of the distribution a sample of exact
/// values was drawn from (D. G. Bonett, "Approximate confidence interval for standard deviation
/// of nonnormal distributions", Comput. Stat. Data Anal. 50 (2006) 775–782): the log of the
/// sample variance is asymptotically normal with variance `(γ₄ − (n − 3)/n)/(n − 1)`, where the
/// kurtosis `γ₄ = n·Σ(x − m)⁴ / (Σ(x − x̄)²)²` is estimated around a trimmed mean `m` (trim
/// proportion `1/(2√(n − 4))`), and a small-sample factor `c = n/(n − z)` widens it:
/// `σ² ∈ exp(ln(c·s²) ∓ z·c·√((γ₄ − (n − 3)/n)/(n − 1)))`, `s²` with divisor `n − 1`.
///
/// Unlike the χ² interval on `n − 1` degrees of freedom, which is exact only for normal
/// samples and badly short for skewed, heavy-tailed delays (the χ² interval assumes
/// `γ₄ = 3`; Weibull delays of shape 0.6 have `γ₄ ≈ 22`), this one is asymptotically
/// distribution-free: it needs only a finite fourth moment and independent samples. It is not
/// exact for any finite `n` (no interval for a std is, without a distributional assumption).
/// `None` for fewer than 10 samples (the trim needs `n > 4`, and the kurtosis estimate is
/// meaningless below ~10) or no spread.
pub fn bonett_std_ci95(xs: &[f64]) -> Option<[f64; 2]> {
    let n = xs.len();
    if n < 10 {
        return None;
    }
    let nf = n as f64;
    let mean = xs.iter().sum::<f64>() / nf;
    let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
    if ss <= 0.0 || !ss.is_finite() {
        return None;
    }
    let s2 = ss / (nf - 1.0);
    // trimmed mean, trim proportion 1/(2√(n − 4)) from each end
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let trim = ((nf / (2.0 * (nf - 4.0).sqrt())).floor() as usize).min((n - 1) / 2);
    let kept = &sorted[trim..n - trim];
    let m = kept.iter().sum::<f64>() / kept.len() as f64;
    let m4: f64 = xs.iter().map(|x| (x - m).powi(4)).sum();
    let g4 = nf * m4 / (ss * ss);
    let z = Z_975;
    let c = nf / (nf - z);
    let se = c * ((g4 - (nf - 3.0) / nf).max(0.0) / (nf - 1.0)).sqrt();
    let centre = (c * s2).ln();
    Some([
        (centre - z * se).exp().sqrt(),
        (centre + z * se).exp().sqrt(),
    ])
}

/// Bonett's 95 % interval (see [`bonett_std_ci95`]) around a variance estimate `v` whose units
/// are `zs` (each with variance about `σ²`; the kurtosis is theirs, around a trimmed mean),
/// with Student's `t` on `n − 1` degrees of freedom in place of the normal quantile: wider at
/// small `n`, where a kurtosis estimated from few heavy-tailed units is low. `None` for fewer
/// than 10 units or no spread.
pub fn bonett_t_std_ci95(v: f64, zs: &[f64]) -> Option<[f64; 2]> {
    let n = zs.len();
    if n < 10 || !(v.is_finite() && v > 0.0) {
        return None;
    }
    let nf = n as f64;
    let mean = zs.iter().sum::<f64>() / nf;
    let ss: f64 = zs.iter().map(|x| (x - mean) * (x - mean)).sum();
    if ss <= 0.0 || !ss.is_finite() {
        return None;
    }
    let mut sorted = zs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let trim = ((nf / (2.0 * (nf - 4.0).sqrt())).floor() as usize).min((n - 1) / 2);
    let kept = &sorted[trim..n - trim];
    let m = kept.iter().sum::<f64>() / kept.len() as f64;
    let m4: f64 = zs.iter().map(|x| (x - m).powi(4)).sum();
    let g4 = nf * m4 / (ss * ss);
    let t = t_975(nf - 1.0);
    let c = nf / (nf - t);
    let se = c * ((g4 - (nf - 3.0) / nf).max(0.0) / (nf - 1.0)).sqrt();
    let centre = (c * v).ln();
    Some([
        (centre - t * se).exp().sqrt(),
        (centre + t * se).exp().sqrt(),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_ordered_and_degenerate_inputs_have_none() {
        let [lo, hi] = satterthwaite_std_ci95(100.0, 50.0).unwrap();
        assert!(lo < 10.0 && 10.0 < hi, "{lo} {hi}");
        // ν = 50: σ² ∈ [50·100/71.42, 50·100/32.36]
        assert!((lo - (5000.0f64 / 71.420_2).sqrt()).abs() < 1e-3);
        assert!((hi - (5000.0f64 / 32.357_4).sqrt()).abs() < 1e-3);
        assert_eq!(satterthwaite_std_ci95(0.0, 10.0), None);
        assert_eq!(satterthwaite_std_ci95(1.0, 0.0), None);
        assert_eq!(normal_std_ci95(-5.0, 1.0), None);
        assert_eq!(normal_std_ci95(1.0, 1.0).unwrap()[0], 0.0);
        assert_eq!(effective_dof(2.0, 0.5), Some(16.0));
        assert_eq!(jackknife_variance(&[1.0]), None);
        // leave-one-out means of {1, 2, 3}: 2.5, 2, 1.5 → jackknife variance of the mean 1/3
        let v = jackknife_variance(&[2.5, 2.0, 1.5]).unwrap();
        assert!((v - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(bonett_std_ci95(&[1.0; 9]), None);
        assert_eq!(bonett_std_ci95(&[1.0; 20]), None);
    }

    /// Bonett's interval on samples of 200 exponential values (kurtosis 9): its coverage,
    /// measured at 0.928 over 20 000 seeds, is asserted over 2 000 seeds to lie within 3.5
    /// binomial standard errors (0.58 %) of that, [0.908, 0.948] rounded out to [0.905, 0.955];
    /// the χ² interval on n − 1 degrees of freedom from the same samples (kurtosis 3 assumed)
    /// covers far less, below 85 %. (Bonett's interval is slightly short for skewed delays at a
    /// few hundred samples — 93 % rather than 95 % here — and improves with n.)
    #[test]
    fn bonett_covers_heavy_tailed_samples() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(77);
        let runs = 2000;
        let (mut inside, mut inside_chi2) = (0, 0);
        for _ in 0..runs {
            let xs: Vec<f64> = (0..200)
                .map(|_| -(1.0 - rng.random::<f64>()).ln())
                .collect();
            let [lo, hi] = bonett_std_ci95(&xs).unwrap();
            inside += (lo <= 1.0 && 1.0 <= hi) as u32;
            let m = xs.iter().sum::<f64>() / 200.0;
            let s2 = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 199.0;
            let [lo, hi] = satterthwaite_std_ci95(s2, 199.0).unwrap();
            inside_chi2 += (lo <= 1.0 && 1.0 <= hi) as u32;
        }
        let cov = inside as f64 / runs as f64;
        assert!((0.905..=0.955).contains(&cov), "coverage {cov}");
        let cov_chi2 = inside_chi2 as f64 / runs as f64;
        assert!(cov_chi2 < 0.85, "χ² coverage {cov_chi2}");
    }
}
