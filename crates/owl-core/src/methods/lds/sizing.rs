//! Dimensioning (§3): how many rows and counters keep large collisions rare.
//!
//! Vocabulary of the paper: `n` flows are stored in `C` counters (in total, over all rows);
//! flow sizes are Pareto; a flow is *large* when it has more than `x` packets, which happens
//! with probability `P = Pr[T₁ > x]`; it suffers only *small collisions* when the flows sharing
//! its cell bring at most `x` packets (at most `x/k` per vLDA location for the LDS). By the
//! subexponential property of the Pareto law, `i` colliding flows bring more than `x` packets
//! with probability ≈ `i·P`, so one row of `C` counters gives `Q ≈ 1 − (n/C)·P`.
//!
//! - SDS, `R` rows sharing `C` counters (§3.1): `Q(R) = 1 − (nPR/C)^R`; with the offered load
//!   of large flows `z = nP/C`, `q(z, R) = 1 − (zR)^R`, maximal at `R = 1/(e·z)`; a target
//!   probability `ε` of large collisions wants `R = −ln ε` rows and `z ≤ −1/(e·ln ε)`.
//! - LDS with vLDAs of length `k` (§3.2): `Q(Rk) = 1 − (nkRP/C)^{Rk}`; choose `k` for loss
//!   resilience, then `R = round(max{1, −ln(ε)/k})`.

use std::f64::consts::E;

/// `Pr[T₁ > x]` for Pareto flow sizes with scale `x_m` and shape `a`: `(x_m/x)^a` (1 below
/// the scale).
pub fn pareto_tail(scale: f64, shape: f64, x: f64) -> f64 {
    if x <= scale {
        1.0
    } else {
        (scale / x).powf(shape)
    }
}

/// Offered load of large flows per counter, `z = nP/C` (§3.1).
pub fn offered_load(flows: f64, counters: f64, p_large: f64) -> f64 {
    flows * p_large / counters
}

/// Probability of only small collisions for an SDS of `rows` rows sharing `counters` counters
/// (§3.1): `Q(R) = 1 − (nPR/C)^R`, clamped to `[0, 1]`.
pub fn sds_small_collisions(flows: f64, counters: f64, rows: usize, p_large: f64) -> f64 {
    let z = offered_load(flows, counters, p_large);
    (1.0 - (z * rows as f64).powi(rows as i32)).clamp(0.0, 1.0)
}

/// The row count maximising `q(z, R)`: `max{1, 1/(e·z)}`, before rounding (§3.1).
pub fn sds_optimal_rows(z: f64) -> f64 {
    (1.0 / (E * z)).max(1.0)
}

/// For a target probability `ε < 1/e` of large collisions (§3.1): the rows `R = −ln ε`
/// (rounded, at least 1) and the largest offered load `z_max = −1/(e·ln ε)` they support.
pub fn sds_rows_for_target(epsilon: f64) -> (usize, f64) {
    let r = (-epsilon.ln()).round().max(1.0) as usize;
    (r, -1.0 / (E * epsilon.ln()))
}

/// Probability of only small collisions for an LDS of `rows` rows and vLDA length `k` over
/// `counters` counters in total (§3.2): `Q(Rk) = 1 − (nkRP/C)^{Rk}`, clamped to `[0, 1]`.
pub fn lds_small_collisions(flows: f64, counters: f64, rows: usize, k: usize, p_large: f64) -> f64 {
    let rk = (rows * k) as f64;
    let base = flows * rk * p_large / counters;
    (1.0 - base.powf(rk)).clamp(0.0, 1.0)
}

/// Rows of an LDS for a target probability `ε` of large collisions (§3.2, step ii):
/// `max{1, −ln(ε)/k}` rounded to the nearest integer.
pub fn lds_rows_for_target(epsilon: f64, k: usize) -> usize {
    (-epsilon.ln() / k as f64).max(1.0).round().max(1.0) as usize
}

/// Counters (in total) an LDS of `rows × k` needs so that `1 − Q(Rk) ≤ ε`:
/// `C ≥ nkRP / ε^{1/(Rk)}`.
pub fn lds_counters_for_target(
    flows: f64,
    p_large: f64,
    rows: usize,
    k: usize,
    epsilon: f64,
) -> f64 {
    let rk = (rows * k) as f64;
    flows * rk * p_large / epsilon.powf(1.0 / rk)
}

/// A dimensioning of an LDS.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    pub rows: usize,
    pub columns: usize,
    /// `Q(Rk)` of the plan.
    pub small_collisions: f64,
    /// Bytes of one point's sketch.
    pub bytes: u64,
}

/// Dimension an LDS (§3.2): `k` chosen for loss, rows from `ε`, then enough columns per row
/// that large collisions stay below `ε` for `flows` flows of which a fraction `p_large` are
/// large.
pub fn plan(flows: f64, p_large: f64, k: usize, epsilon: f64) -> Plan {
    let rows = lds_rows_for_target(epsilon, k);
    let c = lds_counters_for_target(flows, p_large, rows, k, epsilon);
    let columns = ((c / rows as f64).ceil() as usize).max(k);
    Plan {
        rows,
        columns,
        small_collisions: lds_small_collisions(flows, (rows * columns) as f64, rows, k, p_large),
        bytes: (rows * columns * super::config::CELL_BYTES) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// §3.1's worked example: with the trace's Pareto fit, half as many counters as flows in
    /// one row gives Q ≈ 91 % (z = nP/C = 0.0875); the best row count is 4.20, and 4 rows give
    /// q(4, z) = 0.9850.
    #[test]
    fn the_papers_worked_example() {
        let z = 0.0875;
        let p = z / 2.0; // n/C = 2
        let q1 = sds_small_collisions(2.0, 1.0, 1, p);
        assert!((q1 - 0.9125).abs() < 1e-12, "{q1}");
        assert!((sds_optimal_rows(z) - 4.20).abs() < 0.005);
        let q4 = sds_small_collisions(2.0, 1.0, 4, p);
        assert!((q4 - 0.9850).abs() < 5e-5, "{q4}");
        // R = −ln ε and z_max = −1/(e ln ε): the optimum at z is reached for ε = e^{−1/(ez)}
        let eps = (-1.0 / (E * z)).exp();
        let (r, zmax) = sds_rows_for_target(eps);
        assert_eq!(r, 4);
        assert!((zmax - z).abs() < 1e-12);
    }

    #[test]
    fn lds_with_k_one_is_the_sds_and_plans_meet_their_target() {
        for rows in 1..6 {
            let a = lds_small_collisions(146_000.0, 70_000.0, rows, 1, 0.01);
            let b = sds_small_collisions(146_000.0, 70_000.0, rows, 0.01);
            assert!((a - b).abs() < 1e-12);
        }
        assert_eq!(lds_rows_for_target(0.01, 1), 5);
        assert_eq!(lds_rows_for_target(0.01, 5), 1);
        assert_eq!(lds_rows_for_target(0.5, 5), 1);
        let p = plan(146_000.0, pareto_tail(1.0, 0.93, 50.0), 1, 0.02);
        assert!(p.small_collisions >= 0.98 - 1e-9, "{p:?}");
        // one column fewer misses the target
        let worse = lds_small_collisions(
            146_000.0,
            (p.rows * (p.columns - 1)) as f64,
            p.rows,
            1,
            pareto_tail(1.0, 0.93, 50.0),
        );
        assert!(worse < p.small_collisions);
        assert_eq!(pareto_tail(2.0, 1.0, 1.0), 1.0);
        assert!((pareto_tail(1.0, 1.0, 50.0) - 0.02).abs() < 1e-12);
    }
}
