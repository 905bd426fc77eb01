//! Confidence intervals for a standard deviation: the χ² distribution (quantiles through the
//! regularised incomplete gamma function), the Satterthwaite interval of a variance estimate
//! with an estimated effective number of degrees of freedom, the normal interval, and
//! Bonett's kurtosis-adjusted interval for a sample of exact delays.
//!
//! These serve LDA's three standard-deviation estimators ([`super::StdEstimator`]) and the other
//! methods that report a std from exact delay samples (probing, MPE) or from collapsed pairs
//! (RDA, FineComb). owl-core has no statistics dependency; the few special functions needed are
//! here, each checked against tabulated values in the tests.

/// The 0.975 quantile of the standard normal distribution.
pub const Z_975: f64 = 1.959_963_984_540_054;

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, nine coefficients: relative error below 10⁻¹³).
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // reflection: Γ(x)Γ(1 − x) = π / sin(πx)
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, &c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularised lower incomplete gamma function `P(a, x) = γ(a, x)/Γ(a)`, `a > 0`, `x ≥ 0`:
/// its series below `x = a + 1`, the continued fraction of `Q = 1 − P` above (Lentz).
pub fn gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let lead = a * x.ln() - x - ln_gamma(a);
    if x < a + 1.0 {
        let (mut term, mut sum, mut n) = (1.0 / a, 1.0 / a, a);
        for _ in 0..10_000 {
            n += 1.0;
            term *= x / n;
            sum += term;
            if term.abs() < sum.abs() * 1e-16 {
                break;
            }
        }
        (sum.ln() + lead).exp().min(1.0)
    } else {
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        (1.0 - (h.ln() + lead).exp()).max(0.0)
    }
}

/// `Pr[χ²_ν ≤ x]` for any real `ν > 0`.
pub fn chi2_cdf(nu: f64, x: f64) -> f64 {
    gamma_p(nu / 2.0, x / 2.0)
}

/// The `p`-quantile of χ² with `ν > 0` (real) degrees of freedom, `0 < p < 1`: safeguarded
/// Newton iterations on [`chi2_cdf`] from the Wilson–Hilferty approximation, inside a bracket
/// that falls back to bisection, to a relative step of 10⁻¹² (a few iterations: an LDA
/// estimate computes four of these).
pub fn chi2_quantile(nu: f64, p: f64) -> f64 {
    assert!(nu > 0.0 && p > 0.0 && p < 1.0, "chi2_quantile({nu}, {p})");
    // bracket
    let (mut lo, mut hi) = (0.0f64, nu.max(1.0));
    while chi2_cdf(nu, hi) < p {
        lo = hi;
        hi *= 2.0;
    }
    // Wilson–Hilferty start: ν(1 − 2/(9ν) + z√(2/(9ν)))³, z the normal p-quantile
    let z = normal_quantile(p);
    let c = 2.0 / (9.0 * nu);
    let wh = nu * (1.0 - c + z * c.sqrt()).powi(3);
    let mut x = if wh > lo && wh < hi {
        wh
    } else {
        0.5 * (lo + hi)
    };
    let a = nu / 2.0;
    let ln_norm = a * 2f64.ln() + ln_gamma(a);
    for _ in 0..200 {
        let f = chi2_cdf(nu, x) - p;
        if f < 0.0 {
            lo = x;
        } else {
            hi = x;
        }
        let pdf = ((a - 1.0) * x.ln() - x / 2.0 - ln_norm).exp();
        let mut next = x - f / pdf;
        if !(next > lo && next < hi && next.is_finite()) {
            next = 0.5 * (lo + hi);
        }
        if (next - x).abs() <= 1e-12 * x || hi - lo <= 1e-12 * hi {
            return next;
        }
        x = next;
    }
    x
}

/// The standard normal `p`-quantile (Acklam's rational approximation, relative error below
/// 1.2·10⁻⁹: a starting point for [`chi2_quantile`], which refines on the exact χ²).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.02425 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

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

/// The 0.975 quantile of Student's t with `nu` degrees of freedom, by the Cornish–Fisher
/// expansion around the normal's (Abramowitz & Stegun 26.7.5; within 0.2 % of the exact value
/// for `nu ≥ 3`, 2 % at `nu = 2`).
pub fn t_975(nu: f64) -> f64 {
    let z = Z_975;
    let (z3, z5) = (z.powi(3), z.powi(5));
    z + (z3 + z) / (4.0 * nu)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * nu * nu)
        + (3.0 * z.powi(7) + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * nu.powi(3))
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
    fn t_quantiles_match_tables() {
        // Student's t 0.975 quantiles (tables): 12.706 at 1, 4.303 at 2, 2.571 at 5, 2.228 at
        // 10, 2.042 at 30, 1.984 at 100
        for (nu, want, tol) in [
            (2.0, 4.303, 0.1),
            (5.0, 2.571, 0.005),
            (10.0, 2.228, 0.002),
            (30.0, 2.042, 0.001),
            (100.0, 1.984, 0.001),
        ] {
            let got = t_975(nu);
            assert!(
                (got - want).abs() <= tol * want,
                "t({nu}) = {got}, want {want}"
            );
        }
    }

    #[test]
    fn gamma_matches_known_values() {
        // Γ(1) = Γ(2) = 1, Γ(5) = 24, Γ(1/2) = √π, Γ(0.1) = 9.513507698668732
        assert!(ln_gamma(1.0).abs() < 1e-13);
        assert!(ln_gamma(2.0).abs() < 1e-13);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
        assert!((ln_gamma(0.1) - 9.513_507_698_668_732f64.ln()).abs() < 1e-11);
        assert!((ln_gamma(171.5) - 709.143_163_030_928).abs() < 1e-9);
    }

    /// Quantiles against tabulated values (computed to 10 digits with mpmath's regularised
    /// incomplete gamma function; the integer-ν ones agree with Abramowitz & Stegun Table 26.8).
    #[test]
    fn chi2_quantiles_match_tables() {
        for (nu, p, want) in [
            (1.0, 0.025, 0.000_982_069_1),
            (1.0, 0.975, 5.023_886),
            (2.0, 0.025, 0.050_635_62),
            (2.0, 0.975, 7.377_759),
            (10.0, 0.025, 3.246_973),
            (10.0, 0.975, 20.483_18),
            (100.0, 0.025, 74.221_93),
            (100.0, 0.975, 129.561_2),
            (1000.0, 0.975, 1_089.531),
            (2.5, 0.5, 1.873_848),
        ] {
            let q = chi2_quantile(nu, p);
            assert!(
                (q - want).abs() < 2e-6 * want.max(1.0),
                "ν={nu} p={p}: {q} vs {want}"
            );
            assert!((chi2_cdf(nu, q) - p).abs() < 1e-9);
        }
        // the quantile inverts the cdf over the range of effective degrees of freedom
        for nu in [0.3, 0.5, 3.7, 47.2, 812.5, 1e5] {
            for p in [0.025, 0.5, 0.975] {
                let q = chi2_quantile(nu, p);
                assert!((chi2_cdf(nu, q) - p).abs() < 1e-9, "ν={nu} p={p}: {q}");
            }
        }
    }

    #[test]
    fn normal_quantiles() {
        assert!((normal_quantile(0.975) - Z_975).abs() < 1e-8);
        assert!((normal_quantile(0.5)).abs() < 1e-12);
        assert!((normal_quantile(0.001) + 3.090_232_306_167_813).abs() < 1e-8);
        assert!((normal_quantile(0.9) - 1.281_551_565_544_601).abs() < 1e-8);
    }

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
