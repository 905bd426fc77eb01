//! The two special functions COLATE needs: the digamma function `ψ` of Theorem 3's root
//! (Eq. 7) and the inverse error function of Eq. 20 (`k = √2·erf⁻¹(A)`). owl-core keeps no
//! statistics dependency; these follow the textbook expansions, and the tests check them
//! against closed forms at many points.

use crate::methods::lda::ci::{gamma_p, normal_quantile};

/// Euler–Mascheroni constant `γ = −ψ(1)`.
pub const EULER_GAMMA: f64 = 0.577_215_664_901_532_9;

/// `ψ(x) = d/dx ln Γ(x)` for real `x` (NaN at the poles `0, −1, −2, …`).
///
/// - `x < 0`: the reflection `ψ(x) = ψ(1 − x) − π·cot(πx)` (Abramowitz & Stegun 6.3.7);
/// - `x < 10`: the recurrence `ψ(x) = ψ(x + 1) − 1/x` (A&S 6.3.5) up to `x ≥ 10`;
/// - then the asymptotic series (A&S 6.3.18) `ψ(x) = ln x − 1/(2x) − Σ_k B_2k/(2k·x^2k)`
///   to `k = 7`, whose first omitted term at `x = 10` is below 10⁻¹⁶ of `ψ`.
pub fn digamma(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x <= 0.0 {
        if x == x.floor() {
            return f64::NAN;
        }
        let pi = std::f64::consts::PI;
        return digamma(1.0 - x) - pi / (pi * x).tan();
    }
    let (mut x, mut acc) = (x, 0.0);
    while x < 10.0 {
        acc -= 1.0 / x;
        x += 1.0;
    }
    let r = 1.0 / (x * x);
    // −Σ B_2k/(2k) r^k, k = 1..7: B = 1/6, −1/30, 1/42, −1/30, 5/66, −691/2730, 7/6
    let series = r
        * (-1.0 / 12.0
            + r * (1.0 / 120.0
                + r * (-1.0 / 252.0
                    + r * (1.0 / 240.0
                        + r * (-1.0 / 132.0 + r * (691.0 / 32_760.0 + r * (-1.0 / 12.0)))))));
    acc + x.ln() - 0.5 / x + series
}

/// `erf(x)` through the regularised incomplete gamma function: `erf(x) = P(1/2, x²)` for
/// `x ≥ 0` (A&S 7.1.1 with 6.5.16), odd.
pub fn erf(x: f64) -> f64 {
    let v = gamma_p(0.5, x * x);
    if x < 0.0 { -v } else { v }
}

/// `erf⁻¹(y)` for `−1 < y < 1`: the normal quantile `Φ⁻¹((1 + y)/2)/√2` (Acklam's rational
/// approximation, relative error 1.2·10⁻⁹) polished by two Newton steps on `erf(x) − y`
/// (`erf′(x) = 2e^(−x²)/√π`). ±∞ at ±1, NaN outside.
pub fn erf_inv(y: f64) -> f64 {
    if !(-1.0..=1.0).contains(&y) {
        return f64::NAN;
    }
    if y == 1.0 || y == -1.0 {
        return y * f64::INFINITY;
    }
    if y == 0.0 {
        return 0.0;
    }
    let mut x = normal_quantile((1.0 + y) / 2.0) / std::f64::consts::SQRT_2;
    let two_over_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI;
    for _ in 0..2 {
        let d = two_over_sqrt_pi * (-x * x).exp();
        if d == 0.0 {
            break;
        }
        x -= (erf(x) - y) / d;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::lda::ci::ln_gamma;
    use std::f64::consts::{LN_2, PI};

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1.0)
    }

    /// Closed forms (A&S 6.3.2–6.3.4, Gauss's digamma theorem): `ψ(n) = H_{n−1} − γ`,
    /// `ψ(n + ½) = −γ − 2 ln 2 + Σ_{k=1..n} 2/(2k − 1)`, `ψ(¼)`, `ψ(¾)`, `ψ(⅓)`.
    #[test]
    fn digamma_closed_forms() {
        let mut h = 0.0;
        for n in 1..=300u32 {
            assert!(close(digamma(n as f64), h - EULER_GAMMA, 1e-14), "ψ({n})");
            h += 1.0 / n as f64;
        }
        let mut s = -EULER_GAMMA - 2.0 * LN_2;
        for n in 0..=200u32 {
            if n > 0 {
                s += 2.0 / (2 * n - 1) as f64;
            }
            assert!(close(digamma(n as f64 + 0.5), s, 1e-14), "ψ({n}.5)");
        }
        let (g, l3) = (EULER_GAMMA, 3f64.ln());
        assert!(close(digamma(0.25), -g - PI / 2.0 - 3.0 * LN_2, 1e-14));
        assert!(close(digamma(0.75), -g + PI / 2.0 - 3.0 * LN_2, 1e-14));
        assert!(close(
            digamma(1.0 / 3.0),
            -g - PI / (2.0 * 3f64.sqrt()) - 1.5 * l3,
            1e-14
        ));
        // reflection and recurrence below 0
        assert!(close(digamma(-0.5), digamma(0.5) + 2.0, 1e-13));
        assert!(close(
            digamma(-2.5),
            digamma(0.5) + 2.0 + 1.0 / 1.5 + 1.0 / 2.5,
            1e-13
        ));
        assert!(digamma(0.0).is_nan() && digamma(-3.0).is_nan());
    }

    /// The recurrence, the derivative of `ln Γ` (central difference of owl's Lanczos `ln Γ`)
    /// and the asymptotic behaviour over the arguments Theorem 3 meets (up to 10¹³ units).
    #[test]
    fn digamma_at_many_points() {
        let mut x = 1e-3;
        while x < 1e14 {
            assert!(
                close(digamma(x + 1.0), digamma(x) + 1.0 / x, 1e-12),
                "recurrence at {x}"
            );
            if x < 1e6 {
                // truncation h²ψ‴/6 and rounding of ln Γ over 2h both stay below 10⁻⁶ of ψ
                let h = 3e-5 * x;
                let d = (ln_gamma(x + h) - ln_gamma(x - h)) / (2.0 * h);
                assert!(close(digamma(x), d, 1e-6), "ψ({x}) = {} vs {d}", digamma(x));
            } else {
                let a = x.ln() - 0.5 / x - 1.0 / (12.0 * x * x);
                assert!(close(digamma(x), a, 1e-15), "ψ({x})");
            }
            x *= 1.37;
        }
    }

    /// `erf⁻¹` against the normal quantiles of statistical tables (`Φ⁻¹(p)/√2 =
    /// erf⁻¹(2p − 1)`) and as the inverse of `erf` over (−1, 1). Near ±1 the tolerance is the
    /// conditioning of the problem: one ulp of `y` moves `erf⁻¹(y)` by `ulp/erf′(x)`.
    #[test]
    fn erf_inv_matches_tables_and_inverts_erf() {
        for (p, z) in [
            (0.75, 0.674_489_750_196_081_7),
            (0.9, 1.281_551_565_544_600_4),
            (0.95, 1.644_853_626_951_472_2),
            (0.975, 1.959_963_984_540_054),
            (0.995, 2.575_829_303_548_900_4),
            (0.999, 3.090_232_306_167_813_5),
            (0.999_5, 3.290_526_731_491_89),
        ] {
            let y = 2.0 * p - 1.0;
            assert!(
                close(erf_inv(y), z / std::f64::consts::SQRT_2, 1e-13),
                "erf⁻¹({y}) = {} vs {}",
                erf_inv(y),
                z / std::f64::consts::SQRT_2
            );
            assert!(close(erf_inv(-y), -z / std::f64::consts::SQRT_2, 1e-13));
        }
        // erf(0.5) and erf(1) to 16 digits (A&S Table 7.1)
        assert!(close(erf(0.5), 0.520_499_877_813_046_5, 1e-15));
        assert!(close(erf(1.0), 0.842_700_792_949_714_9, 1e-15));
        for i in 1..2_000 {
            let x = i as f64 * 0.002;
            let y = erf(x);
            // a few ulps of y, through the slope of erf at x
            let tol = 1e-13 * x
                + 4.0 * f64::EPSILON / (std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp());
            if y < 1.0 {
                assert!(
                    (erf_inv(y) - x).abs() <= tol,
                    "erf⁻¹(erf({x})) = {}",
                    erf_inv(y)
                );
            }
        }
        assert_eq!(erf_inv(0.0), 0.0);
        assert!(erf_inv(1.5).is_nan() && erf_inv(1.0).is_infinite());
    }
}
