//! Reliability-centred parameter selection (COLATE §5): from a RAM budget `M`, the required
//! reliability `α` and confidence interval `β`, and the smallest and largest per-flow
//! timestamp sums `t_min`, `t_max` of the network, the four parameters `n`, `m`, `b`, `T`.
//!
//! - Eq. 11: each point's estimate `t̃_{f,X}` must hold its interval with `A = (1 + α)/2`;
//!   Eq. 20: `k = √2·erf⁻¹(A)`.
//! - Eq. 12: its interval is `B = β·r`, with `r` the network's measured
//!   `(t_{f,R} − t_{f,S})/(t_{f,R} + t_{f,S})` ([`Requirement::ratio`]).
//! - Eq. 13: `n·b = M`; Eq. 14: `b = log₂(T/n) + 1`; Eq. 15:
//!   `t_max/m + (T − t_max)/n = 2^b − 1`. With Eq. 14, Eq. 15 gives
//!   `m = t_max / (2^(b−1) − 1 + t_max/n)`.
//! - Eq. 22: `B²·t_min² = k²·n²·m/(n − m)^e · {(t_min/m)(1 − 1/m) + ((T − t_min)/n)(1 − 1/n)}`.
//!
//! Everything is then a function of `n`, and Eq. 22 is solved for `n` by bisection on its
//! sign change (§5.2, "we numerically solve this expression to obtain n"), over the `n` for
//! which Eq. 15 gives `2 ≤ m < n/2`. In that range the right-hand side *grows* with `n`:
//! narrower counters force a larger `m` through Eq. 15, and `m·T/n ≈ t_max` stays put, so
//! the noise barely moves while the signal per counter shrinks. The root is therefore the
//! largest `n` that meets the requirement, and the equation is flat near it — `n` is very
//! sensitive to `t_min` (the paper's example moves by a factor 2 when `t_min` moves by a
//! few per cent). When every `n` meets it, the widest counters are taken (largest `T`).
//!
//! # Eq. 21 as printed, and as derived
//!
//! The paper prints Eq. 21 (and Eq. 22) with `(n − m)` in the denominator. Its own derivation
//! (Eq. 18: the bound `g((1 + B)t) − g(t) = B·t·(n − m)/(n·m)` over the standard deviation
//! `h/√m` of the mean of `m` counters) gives `(n − m)²`: `B²t² = k²n²m·h²/(n − m)²`. Only
//! the derived form reproduces the paper's example: at `M` = 1 MiB, `α` = 0.95,
//! `β` = 0.05 (`r` = 1) and `m` = 20, `n` = 455 334 needs `t_min` ≈ 8.5·10⁴ with the
//! derived form, but `t_min` ≈ 8.7·10⁸ with the printed one — far above the `t_max` ≈ 3.5·10⁶
//! that `m` = 20 implies, so no flow could meet it. [`Form::Derived`] is the default;
//! [`Form::Printed`] is kept selectable.
//!
//! # What a plan promises, and under which noise
//!
//! Eq. 22 is an inequality in the flow's timestamp sum: a deployed plan (`n`, `m`, `T`) holds
//! Eq. 11's interval for every flow whose sum is at least some `t_min` ([`promise`]; the
//! quadratic of [`t_min_for_m`] at the deployed parameters). Two things decide that `t_min`:
//!
//! - **Eq. 12's ratio** `r = (t_{f,R} − t_{f,S})/(t_{f,R} + t_{f,S})`, which §5.1 measures on
//!   the network "so that Eq. 12 statistically holds". With timestamps relative to an epoch's
//!   base it is about the delay over twice the flow's time into the epoch: 10⁻⁵–10⁻³, not the
//!   1 that [`Requirement::paper`] keeps to size the example. [`DEFAULT_RATIO`] is the 5th
//!   percentile measured on owl's CHIC-like trace; `owl colate plan --ratio-from` measures it
//!   from two epoch stores ([`counter_ratios`]).
//! - **The noise model** ([`Model`]). Theorem 1 treats the other flows' share of a counter as
//!   `Binom(t_X − t_f, 1/n)`: time smeared unit by unit, variance `(T − t)/n`. A packet's
//!   timestamp lands whole in one counter, so the variance is §3.2's `Σ t_p²/n` over the
//!   other packets — and the packets come in flows: another flow `g` that shares a counter
//!   brings `1/m` of its sum `t_g` at once. Per counter the variance is
//!   `(1/n)·Σ_g [Σ_{p∈g} t_p² + (t_g² − Σ_{p∈g} t_p²)/m]`, at most `((T − t)/n)·(2L/3 +
//!   t_max/m)`: `Σ t_p²/Σ t_p` is `2L/3` for arrivals spread over an epoch of `L = √(2T/ρ)`
//!   units (`ρ` packets a unit), and `Σ_g t_g² ≤ t_max·T`. [`Model::Corrected`] scales Eq.
//!   22's foreign term by that factor and drops its own term `(t/m)(1 − 1/m)` — the spread
//!   of the flow's packets over its `m` counters, which Theorem 2's `t̃` does not see since it
//!   adds all `m`; [`Model::Paper`] keeps Theorem 1's. Packet-level `Σ t_p²/n` alone fell
//!   short: 35 of 74 flows of a heavy-tailed mix within `B` where it promised 97.5 %.
//!
//! Both bound each point's own estimate `t̃_{f,X}` (the test `the_corrected_plan_keeps_its_promise`
//! measures the per-point errors against them). Neither sees that the two points' noise is
//! the same packets and cancels in `t̃_R − t̃_S` (what makes `colate:mean=raw` accurate), so
//! what they promise for the mean is far less than what COLATE delivers, and at a real ratio
//! the corrected plan promises nothing to any flow an epoch can hold.
//!
//! # Rounding
//!
//! The solution is continuous. The paper's example rounds `b` up (`b` = 19 beside
//! `n` = 455 334, where `M/n` = 18.42) and keeps `n` — 8.65 Mbit of counters for a 8.39 Mbit
//! `M`. The deployed configuration rounds `b` up too (a wider counter never overflows sooner)
//! and `m` up to an even number (§4.2.2 needs `m/2` pairs), but keeps within `M`: `n =
//! ⌊M/b⌋`, and `T` scaled by the same factor, so `T/n` — each counter's share, hence the noise
//! term of Eq. 22 — is the continuous solution's (and `T/n ≤ 2^(b−1)` still holds, Eq. 14).

use serde::Serialize;

use crate::method::MethodError;

/// Which denominator Eq. 21/22 use (module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    /// `(n − m)²`, as Eq. 18 derives it (owl's default).
    #[default]
    Derived,
    /// `(n − m)`, as Eq. 21 and 22 are printed.
    Printed,
}

impl std::str::FromStr for Form {
    type Err = MethodError;
    fn from_str(s: &str) -> Result<Form, MethodError> {
        match s {
            "derived" => Ok(Form::Derived),
            "printed" => Ok(Form::Printed),
            _ => Err(MethodError::Invalid(format!(
                "colate: equation form '{s}' is not derived or printed"
            ))),
        }
    }
}

impl std::fmt::Display for Form {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Form::Derived => "derived",
            Form::Printed => "printed",
        })
    }
}

/// The paper's three accuracy requirements (§6.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// α = 0.90, β = 0.10.
    Low,
    /// α = 0.95, β = 0.05.
    Medium,
    /// α = 0.99, β = 0.01.
    High,
}

impl Level {
    pub const ALL: [Level; 3] = [Level::Low, Level::Medium, Level::High];

    /// `(α, β)`.
    pub fn alpha_beta(self) -> (f64, f64) {
        match self {
            Level::Low => (0.90, 0.10),
            Level::Medium => (0.95, 0.05),
            Level::High => (0.99, 0.01),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Low => "low",
            Level::Medium => "medium",
            Level::High => "high",
        }
    }
}

/// One mebibyte in bits: the paper's "M = 1MB" is 2²³ bits (its example's `n·b` with the
/// continuous `b` = 18.42 is 8 388 608 bits).
pub const MIB_BITS: f64 = 8_388_608.0;

/// `t_min` the paper's example implies (module doc), in timestamp units.
pub const EXAMPLE_T_MIN: f64 = 85_003.0;
/// `m` of the paper's example.
pub const EXAMPLE_M: f64 = 20.0;
/// `t_max` the paper's example implies (`m` = 20 at `M` = 1 MiB), in timestamp units.
pub const EXAMPLE_T_MAX: f64 = 3_514_677.0;

/// Eq. 12's ratio when none is measured: 4.8·10⁻⁴, the 5th percentile of `(t_R − t_S)/(t_R +
/// t_S)` over the agreeing counters of 8 epoch pairs of owl's CHIC-like pair (`owl simulate
/// --flow-preset chic --queue red:580Mbit,cross=0.1-0.45,period=0.5s --delay const:1ms`:
/// 124 kpps, delays 22.7 ± 32.9 ms; recorded with the default medium plan at 10 MiB, 1 µs
/// unit, 3.5 s epochs; `owl colate plan --ratio-from`; median 0.021). A path's own value
/// scales with its delay over its epochs' length: measure it.
pub const DEFAULT_RATIO: f64 = 4.8e-4;

/// Packets a second [`promise`] assumes when none is given: the paper's CHIC trace (§6.1).
pub const DEFAULT_RATE_PPS: f64 = 124_000.0;

/// The noise Eq. 22 is built on (module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Model {
    /// Theorem 1: the other flows' units spread binomially over the counters.
    Paper,
    /// §3.2's `Σ t_p²/n`: whole timestamps in whole counters (owl's default).
    #[default]
    Corrected,
}

impl std::str::FromStr for Model {
    type Err = MethodError;
    fn from_str(s: &str) -> Result<Model, MethodError> {
        match s {
            "paper" => Ok(Model::Paper),
            "corrected" => Ok(Model::Corrected),
            _ => Err(MethodError::Invalid(format!(
                "colate: noise model '{s}' is not paper or corrected"
            ))),
        }
    }
}

impl std::fmt::Display for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Model::Paper => "paper",
            Model::Corrected => "corrected",
        })
    }
}

/// What a deployed plan promises (module doc): Eq. 11's interval at each point, with
/// probability `A`, for every flow whose timestamp sum is at least `t_min`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Promise {
    pub model: Model,
    /// Eq. 12's ratio `r`, and `B = β·r`.
    pub ratio: f64,
    pub big_b: f64,
    /// Packets per timestamp unit `ρ`, and the epoch length `L = √(2T/ρ)` it gives (units).
    pub packets_per_unit: f64,
    pub epoch_units: f64,
    /// Factors on Eq. 22's own and foreign noise terms (1 and 1 for [`Model::Paper`], 0 and
    /// `2L/3 + t_max/m` for [`Model::Corrected`]).
    pub own_factor: f64,
    pub foreign_factor: f64,
    /// The smallest timestamp sum covered (units), and about how many packets that is for a
    /// flow in the middle of an epoch (`t_min/(L/2)`).
    pub t_min: f64,
    pub packets_min: f64,
    /// Whether any flow the plan was made for can reach `t_min` (`t_min ≤ t_max`).
    pub covers_any: bool,
}

/// What the plan with parameters `n`, `m`, `T` promises at `k` (Eq. 20) and `β`, Eq. 12's
/// `ratio`, `packets_per_unit` (`ρ`), the largest flow sum `t_max` and `model` (module doc):
/// the smallest `t_min` for which Eq. 22 holds, its noise terms scaled by the model's factors.
#[allow(clippy::too_many_arguments)]
pub fn promise(
    n: f64,
    m: f64,
    threshold: f64,
    t_max: f64,
    k: f64,
    beta: f64,
    ratio: f64,
    packets_per_unit: f64,
    form: Form,
    model: Model,
) -> Promise {
    let epoch_units = (2.0 * threshold / packets_per_unit).sqrt();
    let (own_factor, foreign_factor) = match model {
        Model::Paper => (1.0, 1.0),
        // the flow's own packets all add into t̃; the others' squared timestamps over their
        // sum is 2L/3 for arrivals spread over the epoch, and another flow brings 1/m of its
        // sum (≤ t_max) into a counter it shares
        Model::Corrected => (0.0, (2.0 * epoch_units / 3.0).max(1.0) + t_max / m),
    };
    let big_b = beta * ratio;
    let t_min = eq22_t_min(
        n,
        m,
        threshold,
        k,
        big_b,
        form,
        (own_factor, foreign_factor),
    );
    Promise {
        model,
        ratio,
        big_b,
        packets_per_unit,
        epoch_units,
        own_factor,
        foreign_factor,
        t_min,
        packets_min: t_min / (epoch_units / 2.0),
        covers_any: t_min <= t_max,
    }
}

impl Plan {
    /// [`promise`] of the deployed parameters.
    pub fn promise(&self, ratio: f64, packets_per_unit: f64, model: Model) -> Promise {
        let r = &self.requirement;
        promise(
            self.n as f64,
            self.m as f64,
            self.threshold as f64,
            r.t_max,
            self.k,
            r.beta,
            ratio,
            packets_per_unit,
            r.form,
            model,
        )
    }
}

/// Eq. 12's ratio `(t_R − t_S)/(t_R + t_S)` of every counter of an epoch pair (§5.1: "we
/// conduct measurement ... on the network") whose packet counts agree and are not 0, the
/// sums taken relative to the sender epoch's base. Counters stand in for flows: a counter
/// holds a few flows' packets of the same epoch, so its ratio is theirs, averaged. Nothing
/// where the two epochs' `n` or vector differ.
pub fn counter_ratios(s: &super::Epoch, r: &super::Epoch) -> Vec<f64> {
    if s.n != r.n || s.vector != r.vector {
        return Vec::new();
    }
    let base = s.base_ns as i128;
    let abs = |e: &super::Epoch, j: usize| {
        e.unit_ns as i128 * e.ts[j] as i128 + (e.base_ns as i128 - base) * e.counts[j] as i128
    };
    (0..s.n as usize)
        .filter(|&j| s.counts[j] > 0 && s.counts[j] == r.counts[j])
        .filter_map(|j| {
            let (a, b) = (abs(s, j) as f64, abs(r, j) as f64);
            (a + b > 0.0).then(|| (b - a) / (b + a))
        })
        .collect()
}

/// What an operator asks for (§5.2: "COLATE takes M, α, β, t_min, and t_max as input").
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Requirement {
    /// RAM for the counter vector, bits (`M`).
    pub memory_bits: f64,
    /// Required reliability α ∈ [0, 1).
    pub alpha: f64,
    /// Confidence interval β ∈ (0, 1].
    pub beta: f64,
    /// Eq. 12's measured `(t_{f,R} − t_{f,S})/(t_{f,R} + t_{f,S})`: `B = β·r`.
    pub ratio: f64,
    /// Smallest per-flow timestamp sum the guarantee must cover, timestamp units.
    pub t_min: f64,
    /// Largest per-flow timestamp sum, timestamp units.
    pub t_max: f64,
    pub form: Form,
}

impl Requirement {
    /// The paper's `level` at `memory_bits`, shaped like its example: `r` = 1, the example's
    /// `t_max`, and the `t_min` for which Eq. 22 holds where Eq. 15 gives the example's
    /// `m` = 20 ([`t_min_for_m`]; at medium and 1 MiB that is the example's own 85 003). The
    /// guarantee then covers flows whose timestamp sum is at least that `t_min`, and the plan
    /// keeps `m` = 20 at every level and memory (more memory buys a larger `T`, Fig. 4).
    pub fn paper(level: Level, memory_bits: f64) -> Requirement {
        let (alpha, beta) = level.alpha_beta();
        let mut r = Requirement {
            memory_bits,
            alpha,
            beta,
            ratio: 1.0,
            t_min: EXAMPLE_T_MIN,
            t_max: EXAMPLE_T_MAX,
            form: Form::Derived,
        };
        if let Some(t) = t_min_for_m(&r, EXAMPLE_M) {
            r.t_min = t;
        }
        r
    }

    pub fn validate(&self) -> Result<(), MethodError> {
        let bad = |s: String| Err(MethodError::Invalid(format!("colate plan: {s}")));
        if !(self.memory_bits.is_finite() && self.memory_bits >= 64.0) {
            return bad(format!(
                "memory {} bits must be at least 64 bits",
                self.memory_bits
            ));
        }
        if self.memory_bits > 64.0 * 8.0 * (1u64 << 30) as f64 {
            return bad(format!(
                "memory {} bits is more than 64 GiB",
                self.memory_bits
            ));
        }
        if !(0.0..1.0).contains(&self.alpha) {
            return bad(format!("alpha {} must be in [0, 1)", self.alpha));
        }
        if !(self.beta > 0.0 && self.beta <= 1.0) {
            return bad(format!("beta {} must be in (0, 1]", self.beta));
        }
        if !(self.ratio > 0.0 && self.ratio <= 1.0) {
            return bad(format!("ratio {} must be in (0, 1]", self.ratio));
        }
        if !(self.t_min.is_finite() && self.t_min > 0.0) {
            return bad(format!("t_min {} must be > 0", self.t_min));
        }
        if !(self.t_max.is_finite() && self.t_max >= 1.0) {
            return bad(format!("t_max {} must be ≥ 1", self.t_max));
        }
        Ok(())
    }

    /// Eq. 11.
    pub fn individual_reliability(&self) -> f64 {
        (1.0 + self.alpha) / 2.0
    }

    /// Eq. 20: `k = √2·erf⁻¹(A)`.
    pub fn k(&self) -> f64 {
        std::f64::consts::SQRT_2 * crate::stats::special::erf_inv(self.individual_reliability())
    }

    /// Eq. 12: `B = β·r`.
    pub fn individual_interval(&self) -> f64 {
        self.beta * self.ratio
    }
}

/// A solution of Eq. 13–15 and 22.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Plan {
    pub requirement: Requirement,
    /// The continuous solution.
    pub n_exact: f64,
    pub m_exact: f64,
    pub b_exact: f64,
    pub threshold_exact: f64,
    /// The deployed parameters (module doc: rounding).
    pub n: u64,
    pub m: u32,
    pub b: u32,
    pub threshold: u64,
    /// `A`, `B`, `k` of Eq. 11, 12, 20.
    pub a: f64,
    pub big_b: f64,
    pub k: f64,
}

impl Plan {
    /// Bits the deployed vector uses, `n·b`.
    pub fn memory_bits(&self) -> u64 {
        self.n * self.b as u64
    }
}

/// `b`, `T`, `m` of a given `n` (Eq. 13, 14, 15).
fn derived(req: &Requirement, n: f64) -> (f64, f64, f64) {
    let b = req.memory_bits / n;
    let half = (b - 1.0).exp2();
    let t = n * half;
    let m = req.t_max / (half - 1.0 + req.t_max / n);
    (b, t, m)
}

/// Eq. 22's right side minus its left side at `n`: positive while `n` is too small.
fn residual(req: &Requirement, n: f64) -> f64 {
    let (_, t, m) = derived(req, n);
    let (k, bb, tmin) = (req.k(), req.individual_interval(), req.t_min);
    let d = match req.form {
        Form::Derived => (n - m) * (n - m),
        Form::Printed => n - m,
    };
    let var = (tmin / m) * (1.0 - 1.0 / m) + ((t - tmin) / n) * (1.0 - 1.0 / n);
    k * k * n * n * m / d * var - bb * bb * tmin * tmin
}

/// Eq. 22 solved for the flow sum `t` at `n`, `m`, `T`, `k` and `B`, its own and foreign noise
/// terms scaled by `factors` (1 and 1: the paper's): the positive root of
/// `B²t² = c·{own·(t/m)(1 − 1/m) + foreign·((T − t)/n)(1 − 1/n)}`, `c = k²n²m/d`.
fn eq22_t_min(
    n: f64,
    m: f64,
    threshold: f64,
    k: f64,
    big_b: f64,
    form: Form,
    (own, foreign): (f64, f64),
) -> f64 {
    let d = match form {
        Form::Derived => (n - m) * (n - m),
        Form::Printed => n - m,
    };
    let c = k * k * n * n * m / d;
    let a1 = c * (own * (1.0 / m) * (1.0 - 1.0 / m) - foreign * (1.0 / n) * (1.0 - 1.0 / n));
    let a0 = c * foreign * (threshold / n) * (1.0 - 1.0 / n);
    let bb = big_b * big_b;
    // bb·t² − a1·t − a0 = 0
    (a1 + (a1 * a1 + 4.0 * bb * a0).sqrt()) / (2.0 * bb)
}

/// The `t_min` for which Eq. 22 holds at the `n` where Eq. 15 gives `m` (Eq. 22 solved for
/// `t_min` instead of `n`: a quadratic), or `None` when no `n` gives that `m`.
pub fn t_min_for_m(req: &Requirement, m: f64) -> Option<f64> {
    // m(n) grows with n: bisect between the widest and the narrowest counters
    let (mut a, mut z) = (req.memory_bits / 62.0, req.memory_bits / 2.0);
    let m_of = |n: f64| derived(req, n).2;
    if !(m_of(a) <= m && m_of(z) >= m) {
        return None;
    }
    for _ in 0..200 {
        let mid = (a * z).sqrt();
        if m_of(mid) < m {
            a = mid;
        } else {
            z = mid;
        }
    }
    let n = z;
    let (_, t, m) = derived(req, n);
    Some(eq22_t_min(
        n,
        m,
        t,
        req.k(),
        req.individual_interval(),
        req.form,
        (1.0, 1.0),
    ))
}

/// Solve §5.2's four equations for `n`, `m`, `b`, `T`.
pub fn solve(req: &Requirement) -> Result<Plan, MethodError> {
    req.validate()?;
    // b between 2 and 62 bits keeps T = n·2^(b−1) a u64 and m meaningful
    let lo = req.memory_bits / 62.0;
    let hi = req.memory_bits / 2.0;
    let ok = |n: f64| {
        let (_, _, m) = derived(req, n);
        m.is_finite() && m >= 2.0 && m < n / 2.0
    };
    let infeasible = |why: &str| {
        Err(MethodError::Invalid(format!(
            "colate plan: no n meets α = {}, β = {} with M = {} bits, t_min = {}, t_max = {} ({why})",
            req.alpha, req.beta, req.memory_bits, req.t_min, req.t_max
        )))
    };
    // the feasible range of n (m ≥ 2 and m ≪ n) is an interval: find it on a log grid
    let steps = 400;
    let grid: Vec<f64> = (0..=steps)
        .map(|i| lo * (hi / lo).powf(i as f64 / steps as f64))
        .collect();
    let Some(first) = grid.iter().position(|&n| ok(n)) else {
        return infeasible("t_max gives no m between 2 and n/2 for any counter width");
    };
    let last = grid.iter().rposition(|&n| ok(n)).unwrap_or(first);
    let (mut a, mut z) = (grid[first], grid[last]);
    let (ra, rz) = (residual(req, a), residual(req, z));
    if ra > 0.0 && rz > 0.0 {
        return infeasible(
            "no counter width leaves little enough noise: more memory, a larger t_min or a looser requirement",
        );
    }
    if ra <= 0.0 && rz <= 0.0 {
        // met everywhere: the widest counters (largest T, least storage)
        z = a;
    } else {
        // bisect on the sign change, keeping the side that meets the requirement
        let a_meets = ra <= 0.0;
        for _ in 0..200 {
            let mid = (a * z).sqrt();
            if (residual(req, mid) <= 0.0) == a_meets {
                a = mid;
            } else {
                z = mid;
            }
            if z / a < 1.0 + 1e-12 {
                break;
            }
        }
        z = a;
    }
    let n_exact = z;
    let (b_exact, t_exact, m_exact) = derived(req, n_exact);
    let m = (m_exact.ceil() as u32).next_multiple_of(2).max(2);
    let b = b_exact.ceil();
    let n = ((req.memory_bits / b).floor())
        .min(n_exact.round())
        .max(1.0);
    Ok(Plan {
        requirement: *req,
        n_exact,
        m_exact,
        b_exact,
        threshold_exact: t_exact,
        n: n as u64,
        m,
        b: b as u32,
        threshold: (t_exact * n / n_exact).floor() as u64,
        a: req.individual_reliability(),
        big_b: req.individual_interval(),
        k: req.k(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// §6.2.1: "for M = 1MB, α = 0.95, and β = 0.05, typical values of these parameters are
    /// b = 19, m = 20, n = 455334, and T = 8 × 10¹⁰". The paper does not publish its t_min
    /// and t_max; EXAMPLE_T_MIN/MAX are the values its example implies (module doc).
    #[test]
    fn reproduces_the_paper_example() {
        let p = solve(&Requirement::paper(Level::Medium, MIB_BITS)).unwrap();
        assert_eq!((p.b, p.m), (19, 20), "{p:?}");
        assert!((p.n_exact - 455_334.0).abs() < 455_334.0 * 0.002, "{p:?}");
        assert!((p.threshold_exact / 8e10 - 1.0).abs() < 0.01, "{p:?}");
        assert!((p.k - 2.2414).abs() < 1e-3);
        // Eq. 13–15 and 22 hold at the continuous solution
        assert!((p.n_exact * p.b_exact - MIB_BITS).abs() < 1e-3);
        assert!(((p.threshold_exact / p.n_exact).log2() + 1.0 - p.b_exact).abs() < 1e-9);
        let lhs15 = EXAMPLE_T_MAX / p.m_exact + (p.threshold_exact - EXAMPLE_T_MAX) / p.n_exact;
        assert!((lhs15 - (p.b_exact.exp2() - 1.0)).abs() < 1e-6 * lhs15);
        assert!(residual(&p.requirement, p.n_exact).abs() < 1e-6 * 0.0025 * 85_003f64.powi(2));
        // deployed within M: n = ⌊M/b⌋, T/n kept
        assert_eq!(p.n, (MIB_BITS / 19.0).floor() as u64);
        assert!(p.memory_bits() as f64 <= MIB_BITS);
        let share = |t: f64, n: f64| t / n;
        assert!(
            (share(p.threshold as f64, p.n as f64) / share(p.threshold_exact, p.n_exact) - 1.0)
                .abs()
                < 1e-6
        );
    }

    /// With Eq. 21 as printed, the example's n needs a t_min above its own t_max.
    #[test]
    fn the_printed_form_contradicts_the_example() {
        let req = Requirement {
            form: Form::Printed,
            ..Requirement::paper(Level::Medium, MIB_BITS)
        };
        // at the example's t_min, the printed form asks for far more counters
        let p = solve(&req);
        if let Ok(p) = p {
            assert!(p.n_exact > 2.0 * 455_334.0, "{p:?}");
        }
        // and to land on n = 455 334 it needs t_min ≈ 8.7e8 > t_max
        let at = |t_min: f64| residual(&Requirement { t_min, ..req }, 455_334.0);
        assert!(
            at(8.6e8) > 0.0 && at(8.8e8) < 0.0,
            "and 8.6e8 > t_max = {EXAMPLE_T_MAX}"
        );
    }

    #[test]
    fn more_memory_gives_a_larger_threshold_and_stricter_levels_a_larger_t_min() {
        let plan = |l, mb: f64| solve(&Requirement::paper(l, mb * MIB_BITS)).unwrap();
        let (a, b, c) = (
            plan(Level::Medium, 1.0),
            plan(Level::Medium, 10.0),
            plan(Level::Medium, 100.0),
        );
        // Fig. 4: T grows with M
        assert!(a.threshold_exact < b.threshold_exact && b.threshold_exact < c.threshold_exact);
        for mb in [1.0, 10.0, 100.0] {
            let (l, m, h) = (
                plan(Level::Low, mb),
                plan(Level::Medium, mb),
                plan(Level::High, mb),
            );
            // stricter levels cover only larger flows
            assert!(l.requirement.t_min < m.requirement.t_min, "{mb}");
            assert!(m.requirement.t_min < h.requirement.t_min, "{mb}");
        }
    }

    /// The paper's model at ratio 1 promises the example's own t_min to the example's plan.
    #[test]
    fn the_paper_promise_is_the_example() {
        let p = solve(&Requirement::paper(Level::Medium, MIB_BITS)).unwrap();
        let pr = promise(
            p.n_exact,
            p.m_exact,
            p.threshold_exact,
            EXAMPLE_T_MAX,
            p.k,
            0.05,
            1.0,
            0.1,
            Form::Derived,
            Model::Paper,
        );
        assert!((pr.t_min / EXAMPLE_T_MIN - 1.0).abs() < 0.01, "{pr:?}");
        // a real ratio, or the corrected noise, asks for far larger flows
        let real = p.promise(DEFAULT_RATIO, 0.124, Model::Paper);
        assert!(real.t_min > 300.0 * pr.t_min, "{real:?}");
        let corrected = p.promise(1.0, 0.124, Model::Corrected);
        assert!(corrected.t_min > 10.0 * pr.t_min, "{corrected:?}");
        let both = p.promise(DEFAULT_RATIO, 0.124, Model::Corrected);
        assert!(!both.covers_any, "{both:?}");
    }

    /// The level defaults keep the example's shape: medium at 1 MiB is the example itself.
    #[test]
    fn level_defaults_keep_m_twenty() {
        let r = Requirement::paper(Level::Medium, MIB_BITS);
        assert!((r.t_min / EXAMPLE_T_MIN - 1.0).abs() < 1e-4, "{}", r.t_min);
        for l in Level::ALL {
            for mb in [1.0, 10.0, 100.0] {
                let p = solve(&Requirement::paper(l, mb * MIB_BITS)).unwrap();
                assert_eq!(p.m, 20, "{l:?} {mb}: {p:?}");
            }
        }
    }

    #[test]
    fn refuses_what_cannot_be_met() {
        let mut r = Requirement {
            t_min: 1_000.0,
            ..Requirement::paper(Level::High, MIB_BITS)
        };
        assert!(solve(&r).is_err());
        r.alpha = 1.0;
        assert!(solve(&r).is_err());
        let r = Requirement {
            beta: 0.0,
            ..Requirement::paper(Level::Low, MIB_BITS)
        };
        assert!(solve(&r).is_err());
    }
}
