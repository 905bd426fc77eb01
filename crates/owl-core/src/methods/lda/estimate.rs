//! The pair estimators of §III-D (mean, effective sample size, eq. (1) bound) and §III-E
//! (second moment from collapsed rows, eq. (3)–(5), and the standard deviation by the estimator
//! the configuration names, [`super::variance`]), and the loss count from the counters.
//!
//! A row is usable when its packet counters agree (§III-D) and, when both synopses carry
//! identity digests (`digest=on`, the module doc), its digests agree too; a row whose counters
//! agree and digests differ is a *foreign row*, counted and left out of everything.

use super::variance::{Pair, Row, StdEstimator, Usable, VarianceEstimate};
use super::{Bucket, Config, Synopsis};
use crate::method::MethodError;

/// Confidence of the interval reported for the mean (Fig. 4(b): 98 %).
pub const CONFIDENCE: f64 = 0.98;

/// What one bank contributed.
#[derive(Clone, Debug, PartialEq)]
pub struct BankReport {
    /// Probability with which the bank samples a packet.
    pub probability: f64,
    pub rows: usize,
    /// Rows with equal packet counters at both points (`u_ij = 1`), and equal identity digests
    /// when the digests are used ([`LdaEstimate::digest_used`]).
    pub usable_rows: usize,
    /// Rows with equal packet counters but different identity digests: R recorded packets S
    /// did not (in exchange for as many S recorded and R did not) — a packet reordered across
    /// an interval cut, a duplicate, a cut that fell back to a clock. LDA alone would use them
    /// and be off by their timestamp differences; they are left out of the mean and the std.
    /// Always 0 when the digests are not used.
    pub foreign_rows: usize,
    /// Rows where R counted *more* packets than S: packets R saw and S did not (reordering
    /// across an interval boundary, duplicates), which LDA's FIFO assumption excludes.
    pub excess_rows: usize,
    /// Packets in the usable rows.
    pub samples: u64,
    /// Packets the bank sampled at S and at R.
    pub sent_sampled: u64,
    pub received_sampled: u64,
}

/// Everything the LDA pair estimator computes for one interval.
#[derive(Clone, Debug, PartialEq)]
pub struct LdaEstimate {
    pub banks: Vec<BankReport>,
    /// Whether rows were checked by their identity digests too: both synopses carry digests
    /// (`digest=on`, and neither decoded from an `LDA1` payload recorded before the field).
    pub digest_used: bool,
    /// Effective sample size `S = Σ u_ij S_A[i, j]` (§III-D).
    pub effective_samples: u64,
    /// `T_B − T_A` over the usable rows, ns (exact: module doc).
    pub delay_sum_ns: i128,
    /// `D = (T_B − T_A) / S`, ns; `None` when no usable row holds a packet.
    pub mean_ns: Option<f64>,
    /// Usable collapsed rows (`ũ_ij = 1`, §III-E) that hold at least one packet.
    pub collapsed_usable: usize,
    /// `S̃ = Σ ũ_ij S̃_A(i, j)`.
    pub collapsed_samples: u64,
    /// `F = (1/S̃) Σ ũ_ij (T̃_B(i, j) − T̃_A(i, j))²`, eq. (5), ns².
    pub second_moment_ns2: Option<f64>,
    /// The estimator `std_ns` comes from (the configuration's, [`Config::std`]).
    pub std_estimator: StdEstimator,
    /// Its variance estimate, ns² (`paper`'s `F − D²`, eq. (3) with its typo corrected — the
    /// paper prints `(Σ w² − μ²)/N` — may be negative).
    pub variance_ns2: Option<f64>,
    /// Its standard deviation, ns; `None` when withheld (too few usable rows, or a
    /// non-positive `F − D²`: [`super::variance`]), never a clamped 0.
    pub std_ns: Option<f64>,
    /// Its 95 % interval of the standard deviation, ns.
    pub std_ci95_ns: Option<[f64; 2]>,
    /// `D ± h` with `h` from eq. (1) at 98 % ([`hoeffding_half_width`]) and `σ` estimated;
    /// `None` when the std is withheld.
    pub mean_ci98_ns: Option<[f64; 2]>,
    /// Lost packets estimated from the counters (§III-B.2: the difference of the counter sums
    /// is the number of lost packets the LDA sampled): `Σ_j (Σ_i S_A[i, j] − Σ_i S_B[i, j])`
    /// scaled by `1 / Σ_j p_j`, since every packet is sampled by some bank with probability
    /// `Σ_j p_j` (the banks' sample sets are disjoint). Exact when `Σ_j p_j = 1`.
    pub lost: Option<f64>,
    /// All three variance estimators on the same rows (the reported one is among them).
    pub paper: VarianceEstimate,
    pub centred: VarianceEstimate,
    pub rows: VarianceEstimate,
}

impl LdaEstimate {
    /// The result of one variance estimator.
    pub fn variance_by(&self, which: StdEstimator) -> &VarianceEstimate {
        match which {
            StdEstimator::Paper => &self.paper,
            StdEstimator::Centred => &self.centred,
            StdEstimator::Rows => &self.rows,
        }
    }
}

/// Half-width of the eq. (1) interval: `Pr[|D − μ| ≥ εμ] ≤ 2·exp(−ε²Sμ²/2σ²)`. Setting the
/// right side to `1 − confidence` and solving for the absolute error `εμ` gives
/// `h = σ·√(2·ln(2/(1 − confidence)) / S)` — μ cancels, so the bound needs only the true
/// standard deviation σ of the delays and the effective sample size S. The estimator plugs in
/// its own σ estimate (§III-E), which is what an operator has; the statistical tests check the
/// bound with the true σ as well. (eq. (1) is the paper's sub-Gaussian form of Hoeffding's
/// inequality; it is taken as stated.)
pub fn hoeffding_half_width(sigma: f64, samples: u64, confidence: f64) -> f64 {
    if samples == 0 {
        return f64::INFINITY;
    }
    let delta = 1.0 - confidence;
    sigma * (2.0 * (2.0 / delta).ln() / samples as f64).sqrt()
}

/// Which collapsed row pairs the second-moment estimator (§III-E) uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CollapseRule {
    /// As the paper writes it: a collapsed pair is usable when its *summed* counters agree,
    /// `S̃_A(i, j) = S̃_B(i, j)` (and, when the digests are used, its summed digests: the pair
    /// is a merged row).
    Paper,
    /// owl's default: both rows of the pair must be usable on their own
    /// (`S_A[2i−1, j] = S_B[2i−1, j]` and `S_A[2i, j] = S_B[2i, j]`). Under LDA's assumptions
    /// (R only ever misses packets) the two rules select the same pairs, since a summed
    /// counter can only balance if neither row lost anything. They differ when R holds packets
    /// S did not count in the interval (reordering across the boundary, duplicates): a pair with
    /// a lost packet in one row and an extra one in the other balances its sum while the two
    /// absolute timestamps add instead of cancelling, and a single such pair inflates `F` by
    /// ~10¹⁸ ns² (the relative std error of 10¹¹ the RDA experiments showed). The per-row rule
    /// drops such pairs. With the identity digests "usable" is the digest rule too: a pair
    /// whose rows are both usable by their counters but one of which is foreign is dropped.
    #[default]
    PerRow,
}

/// The LDA pair estimator: the sender's and the receiver's aggregators of one interval, with
/// owl's default [`CollapseRule::PerRow`] and the configuration's std estimator
/// ([`Config::std`]).
pub fn estimate(sender: &Synopsis, receiver: &Synopsis) -> Result<LdaEstimate, MethodError> {
    estimate_with(sender, receiver, CollapseRule::default())
}

/// The LDA pair estimator with an explicit collapse rule ([`CollapseRule::Paper`] is the
/// faithful eq. (5)).
///
/// One pass over the banks collects the usable rows (§III-D) and the usable collapsed rows
/// (§III-E) with their exact differences; `D` follows, then all three variance estimators of
/// [`super::variance`] (a second pass over the collected rows, centred on `D`), and the
/// configuration's [`StdEstimator`] is the one reported.
pub fn estimate_with(
    sender: &Synopsis,
    receiver: &Synopsis,
    rule: CollapseRule,
) -> Result<LdaEstimate, MethodError> {
    Config::check_pair(sender.config(), receiver.config())?;
    let c = sender.config();
    let m = c.rows();
    let probs = c.bank_probabilities();
    // digests only when both points kept them (an LDA1 payload, recorded before the field,
    // has none; comparing its zeros with real digests would reject every row)
    let digest_used = sender.has_digests() && receiver.has_digests();
    let same = |x: &Bucket, y: &Bucket| !digest_used || x.digest == y.digest;
    let usable = |x: &Bucket, y: &Bucket| x.count == y.count && same(x, y);
    let mut banks = Vec::with_capacity(c.banks());
    let mut s_total = 0u64;
    let mut sum: i128 = 0;
    let mut s_tilde = 0u64;
    let mut f_sum = 0.0f64;
    let mut lost_sampled = 0i64;
    let mut rows: Vec<Row> = Vec::new();
    let mut pairs: Vec<Pair> = Vec::new();
    for (j, &p) in probs.iter().enumerate() {
        let (a, b) = (sender.bank(j), receiver.bank(j));
        let mut rep = BankReport {
            probability: p,
            rows: m,
            usable_rows: 0,
            foreign_rows: 0,
            excess_rows: 0,
            samples: 0,
            sent_sampled: 0,
            received_sampled: 0,
        };
        // §III-D: usable rows and the difference of their accumulators.
        for (x, y) in a.iter().zip(b) {
            rep.sent_sampled += x.count as u64;
            rep.received_sampled += y.count as u64;
            if x.count == y.count {
                if !same(x, y) {
                    rep.foreign_rows += 1;
                    continue;
                }
                rep.usable_rows += 1;
                rep.samples += x.count as u64;
                // exact while the row's delay sum is in [−2⁶³, 2⁶³) (module doc)
                let delta = y.ts_sum.wrapping_sub(x.ts_sum) as i64;
                sum += delta as i128;
                if x.count > 0 {
                    rows.push(Row {
                        delta,
                        n: x.count as u64,
                    });
                }
            } else if y.count > x.count {
                rep.excess_rows += 1;
            }
        }
        // §III-E: collapse rows 2k and 2k+1; the low bit of the row index is the sign.
        for k in 0..m / 2 {
            let (x0, x1, y0, y1) = (a[2 * k], a[2 * k + 1], b[2 * k], b[2 * k + 1]);
            let sa = x0.count as u64 + x1.count as u64;
            let sb = y0.count as u64 + y1.count as u64;
            if sa != sb || sa == 0 {
                continue;
            }
            let (u0, u1) = (usable(&x0, &y0), usable(&x1, &y1));
            match rule {
                CollapseRule::PerRow if !(u0 && u1) => continue,
                CollapseRule::Paper
                    if digest_used
                        && x0.digest.wrapping_add(x1.digest)
                            != y0.digest.wrapping_add(y1.digest) =>
                {
                    continue;
                }
                _ => {}
            }
            let ta = x1.ts_sum.wrapping_sub(x0.ts_sum);
            let tb = y1.ts_sum.wrapping_sub(y0.ts_sum);
            // Σ s_x (b_x − a_x), exact as i64 while Σ |w_x| < 2⁶³
            let d = tb.wrapping_sub(ta) as i64;
            f_sum += (d as f64) * (d as f64);
            s_tilde += sa;
            // what the pair's individually usable rows put into T and S
            let (mut t, mut s) = (0i128, 0u64);
            for (u, x, y) in [(u0, x0, y0), (u1, x1, y1)] {
                if u {
                    t += y.ts_sum.wrapping_sub(x.ts_sum) as i64 as i128;
                    s += x.count as u64;
                }
            }
            pairs.push(Pair {
                d,
                n: sa,
                imbalance: x1.count as i64 - x0.count as i64,
                t,
                s,
            });
        }
        lost_sampled += rep.sent_sampled as i64 - rep.received_sampled as i64;
        s_total += rep.samples;
        banks.push(rep);
    }
    let p_any: f64 = probs.iter().sum();
    let lost = lost_sampled.max(0) as f64 / p_any;
    let mean = (s_total > 0).then(|| sum as f64 / s_total as f64);
    let second = (s_tilde > 0).then(|| f_sum / s_tilde as f64);
    let usable = Usable {
        rows: &rows,
        pairs: &pairs,
        t: sum,
        s: s_total,
    };
    let [paper, centred, by_rows] = StdEstimator::ALL.map(|w| usable.estimate(w));
    let std_estimator = c.std();
    let chosen = match std_estimator {
        StdEstimator::Paper => &paper,
        StdEstimator::Centred => &centred,
        StdEstimator::Rows => &by_rows,
    };
    let ci = match (mean, chosen.std_ns) {
        (Some(d), Some(sd)) => {
            let h = hoeffding_half_width(sd, s_total, CONFIDENCE);
            Some([d - h, d + h])
        }
        _ => None,
    };
    Ok(LdaEstimate {
        banks,
        digest_used,
        effective_samples: s_total,
        delay_sum_ns: sum,
        mean_ns: mean,
        collapsed_usable: pairs.len(),
        collapsed_samples: s_tilde,
        second_moment_ns2: second,
        std_estimator,
        variance_ns2: chosen.variance_ns2,
        std_ns: chosen.std_ns,
        std_ci95_ns: chosen.std_ci95_ns,
        mean_ci98_ns: ci,
        lost: Some(lost),
        paper,
        centred,
        rows: by_rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_width_solves_eq1() {
        // 2·exp(−h²S/2σ²) = 0.02 at the half-width
        let (sigma, s) = (350.0, 40_000u64);
        let h = hoeffding_half_width(sigma, s, 0.98);
        let p = 2.0 * (-(h * h) * s as f64 / (2.0 * sigma * sigma)).exp();
        assert!((p - 0.02).abs() < 1e-12, "{p}");
        assert!(hoeffding_half_width(1.0, 0, 0.98).is_infinite());
    }
}
