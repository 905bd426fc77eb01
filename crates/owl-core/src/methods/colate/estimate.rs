//! The querying phase (COLATE §4): a flow's mean and standard deviation of delay between two
//! points, from the epochs of each point that overlap the flow's time range.
//!
//! For each point `X` and each epoch `e` of the flow's range:
//!
//! - **Theorem 2** (Eq. 4): `t̃_{f,X} = (n·Σ_j S_X^f[j] − m·t_X)/(n − m)` — the epoch's
//!   counters are relative timestamps (`⌊(ts − base_e)/unit⌋`), so each counter is first made
//!   absolute with the count vector of the same mapping, `A[j] = unit·S[j] + (base_e −
//!   R₀)·N[j]`, relative to one reference `R₀` (the query's start) common to both points; the
//!   same estimator over the packet counters gives `p̃_f` (§4.1: "p_f can be measured by …";
//!   here it is a count vector with the same mapping, so no per-flow state is kept).
//!   Theorem 2 is linear, so the epochs' estimates add up.
//! - **Eq. 3**: `μ̃_f = (t̃_{f,R} − t̃_{f,S}) / p̃_f`, `p̃_f` at the sender.
//! - **Theorem 3** (Eq. 7): the maximum-likelihood part of each counter that is `f`'s own,
//!   `w̃[j]`, the root in `ξ = S[j] − w̃[j]` of `ψ(τ − ξ + 1) − ψ(ξ + 1) = ln(n − 1)` with
//!   `τ = t_X − t̃_f` ([`mle_noise`], digamma from [`crate::stats::special`], bisection: the left side falls
//!   strictly in `ξ`); the same for the packet counters, whose noise *is* binomial.
//! - **Theorem 4** (Eq. 9, 10): γ random permutations `Q` of the `m` counters; each gives
//!   `Σ_l (v_R[l] − v_S[l])²` with `v_X[l] = w̃_X[Q[2l]] − w̃_X[Q[2l−1]]`, an estimate of
//!   `Σ_z (u_R[z] − u_S[z])²`; their mean, over `p̃_f`, minus `μ̃²` is the variance (Eq. 5).
//!
//! # The confidence interval (owl's, beyond the paper)
//!
//! §5's plan promises reliability from Theorem 1's noise model, which undercounts the noise
//! (module doc of [`super`]), so owl measures each query's noise instead. What the estimator
//! read from the flow's `m` counters (at both points, over the queried epochs) is its
//! numerator `num = p'·μ + F` and the sender's packets `R = p + φ`, where `p` is the flow's
//! own packet count, `p' = p` (raw) or `p·n/(n − m)` (Theorem 2 subtracts the flow's own share
//! of `t_X` too), and `(φ, F)` is the *foreign* part: the other packets in those counters —
//! other flows', and packets only one point saw — their count and their part in `num`. Each
//! cell's part is additive (Theorem 2 is linear in the counters; the raw variant is a plain
//! sum), and a flow's counters are `m` random cells of the vector, so the query tabulates
//! every cell of the queried epochs at both points ([`NoiseTable`]) and draws `m` cells at a
//! time (20 000 draws, the flow's own cells left out, draws whose packet counts differ between
//! the points left out as the flow's own estimate needs its counts to agree): each draw is a
//! foreign part the flow could have had.
//!
//! The interval at confidence `c` inverts a region fixed by the draws alone, whatever the
//! flow: the likeliest foreign counts `φ`, holding `1 − δ` of the draws, and for each the
//! central `1 − 2t` of `F` given `φ`, with `δ = (1 − c)/2` and `(1 − δ)(1 − 2t) = c`. The flow's
//! own `(φ, F)` falls in it with probability at least `c` (up to the region's estimate from the
//! draws; a group that crosses `1 − δ` is taken whole), and then its mean is among
//! `(num − F)/p'` with `p = R − φ`, so the interval is the hull of those over the region's
//! `φ < R`. It is always bounded (`p ≥ 1`), and a flow whose own foreign part could not lie in
//! the region gets none (a note) — which only raises the coverage of those reported. It is
//! widened by the timestamp unit (each point floors a timestamp to its unit, so a delay in the
//! counters is off by less than one unit, and so is the mean — certain, not drawn). No model
//! enters: the interval is as wide as the query's own noise, timestamp-sized where packets do
//! not cancel (the triangle), tight where they do, and not centred on `μ̃` where colliding
//! flows drag the raw mean toward theirs. A flow whose interval lies within
//! `[μ̃/(1 + β), μ̃/(1 − β)]` is **certified** at `(c, β)`: when the interval holds `μ`, `μ̃` is
//! within `β` of it. Certifying selects flows, so "certified flows are within β a fraction
//! `c` of the time" is measured, not guaranteed (test `the_interval_covers_its_confidence`,
//! experiment `colate-reliability`).
//!
//! Two constructions that failed, measured, so they are not tried again: a block of a few
//! thousand consecutive cells instead of the whole vector (a heavy-tailed mix's tails are set
//! by a few cells of the largest flows, and a block held a different handful of them for each
//! flow: 0.76 for a 0.90 interval on a crowded vector); and a test on `F − μ·G` alone, which
//! lets the packet count cancel but is bounded only when the counters hold more packets than
//! most draws, so the intervals it reported were those of the flows whose counters hold
//! foreign packets (0.77–0.80 for 0.90, though 0.916 over all flows).
//!
//! Each point's part is summed counter by counter as its epochs come, one at a time (16 bytes
//! a counter, [`PointNoise`]); the joined table lists only the cells some packet touched, plus
//! one value for all the empty ones. It is built once per set of epochs and shared by the flows
//! that query them ([`NoiseCache`]). The two points must use the same `n` (a cell is then the
//! same cell at both), and the epochs are needed whole ([`query_flow`], over a flow's cells
//! alone, gives no interval).
//!
//! # The std (owl's, beyond the paper)
//!
//! Theorem 4 pairs the flow's counters at random and reads `Σ (D_a − D_b)²` as the sum of the
//! squared delays; that holds only through the counts' own randomness (`E[(N_a − N_b)²]`), so
//! its error grows with `μ²`: at `μ/σ` of 3–15 it is off by more than 25 % for 95 % of flows,
//! and a negative variance is common. Each counter's packet count is known at both points, so
//! owl weighs each counter by it instead ([`counter_spread`], `colate:std=counters`, the
//! default): `σ̂² = Σ_j (D_j − N_j·μ̂)²/N_j / (k − 1)` over the `k` counters that hold packets,
//! with a 95 % interval from `χ²_{k−1}`, the timestamp units' rounding taken off. `μ` drops
//! out, whatever `μ/σ`. A std whose interval is wider than itself (fewer than about 12
//! counters) is withheld with a reason; none is ever 0 from a clamp. Theorem 4 stays as
//! `colate:std=paper` (`owl query --std paper`), with no interval. The spread is that of every
//! packet in the flow's counters — colliders' too, as for the raw mean.
//!
//! # Packet losses (§1.4)
//!
//! With several sampling vectors, the estimator takes, among the vectors whose packet counters
//! over the flow's subvector agree at both points, the one of the highest sampling
//! probability. The agreement is checked on the flow's own `m` counters (the paper compares
//! whole vectors, which assumes the two points' epochs hold the same packets — epochs are not
//! coordinated, so they rarely do): equal counts mean no packet of those counters was lost,
//! the flow's or a colliding one's. When no vector agrees whole, owl (beyond §1.4) takes the
//! highest-probability vector where at least [`MIN_AGREEING_COUNTERS`] of the flow's counters
//! that hold packets agree, and estimates from those: the raw mean of their packets' delays
//! (Theorem 2 would subtract whole vectors, which differ at the two points by the lost
//! packets' timestamps), the interval drawn over as many counters, the std from their spread.
//! It says how many counters lost packets; a queue that drops when it is long takes its
//! longest delays with it, so such a mean can lean low. Without enough agreeing counters there
//! is no estimate, and the reason says how many counters lost packets.

use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::method::{Estimate, MethodError};
use crate::record::FlowKey;

use super::epoch::{Epoch, EpochHead, FlowEpoch};
use super::vector::{Mapping, Placement, mix};
use crate::stats::special::digamma;

/// A flow's latency query (§1.4 "Querying Phase").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Query {
    pub flow: FlowKey,
    /// The flow's time range at the sender, ns.
    pub from_ns: u64,
    pub to_ns: u64,
    /// Largest one-way delay: the receiver's range is `[from, to + horizon]`.
    pub horizon_ns: u64,
    /// Virtual repetitions γ; 0 = no standard deviation.
    pub gamma: u32,
    pub estimator: Estimator,
    /// The std's estimator (owl's counters' spread, or Theorem 4).
    pub std: StdEstimator,
    /// Confidence of the mean's interval, in (0, 1); 0 = no interval. The interval needs the
    /// epochs whole ([`query`], [`query_cached`]).
    pub confidence: f64,
}

/// Subvector draws of the interval (module doc).
pub const NOISE_DRAWS: usize = 20_000;
/// Confidence of the interval when nothing else is asked.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;
/// Noise tables a [`NoiseCache`] keeps (each one set of epochs); past it, it starts again.
pub const NOISE_TABLES: usize = 64;

/// Which counters' values the mean and std rest on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Estimator {
    /// As the paper writes it: Theorem 2 (the expected share of other flows subtracted from
    /// the subvector), Eq. 3, Theorems 3 and 4 on the denoised counters.
    Paper,
    /// owl's variant: the subvector's sums as they are, `Σ_j (A_R[j] − A_S[j]) / Σ_j N_S[j]`,
    /// and Theorem 4 on the raw counters. When both points saw the same packets in the same
    /// counters (same `n` and seed, one link, same epochs), every packet in the flow's
    /// counters cancels down to its delay, so this is the mean delay of the packets in the
    /// flow's counters — the flow's own and the colliding ones' — with nothing subtracted: no
    /// timestamp-sized noise, no division by a noisy `p̃` (module doc). The default: it
    /// measured better than [`Estimator::Paper`] on every trace of the `colate-*` experiments.
    #[default]
    Raw,
}

/// How the per-flow std is estimated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StdEstimator {
    /// owl's: the spread of the flow's counters, each weighed by its own packets
    /// ([`counter_spread`]), with a 95 % interval (χ² with `k − 1` degrees of freedom); withheld
    /// with a reason when the interval is wider than the estimate.
    #[default]
    Counters,
    /// As the paper writes it: Theorems 3 and 4 (γ virtual repetitions), no interval.
    Paper,
}

impl std::fmt::Display for StdEstimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StdEstimator::Counters => "counters",
            StdEstimator::Paper => "paper",
        })
    }
}

impl std::str::FromStr for StdEstimator {
    type Err = MethodError;
    fn from_str(s: &str) -> Result<StdEstimator, MethodError> {
        match s.trim() {
            "counters" => Ok(StdEstimator::Counters),
            "paper" => Ok(StdEstimator::Paper),
            _ => Err(MethodError::Invalid(format!(
                "colate: std estimator '{s}' is not counters or paper"
            ))),
        }
    }
}

impl std::fmt::Display for Estimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Estimator::Paper => "paper",
            Estimator::Raw => "raw",
        })
    }
}

impl std::str::FromStr for Estimator {
    type Err = MethodError;
    fn from_str(s: &str) -> Result<Estimator, MethodError> {
        match s.trim() {
            "paper" => Ok(Estimator::Paper),
            "raw" => Ok(Estimator::Raw),
            _ => Err(MethodError::Invalid(format!(
                "colate: mean estimator '{s}' is not paper or raw"
            ))),
        }
    }
}

/// What a query gives.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowLatency {
    pub mean_ns: Option<f64>,
    pub std_ns: Option<f64>,
    /// The std's 95 % interval, ns ([`StdEstimator::Counters`]).
    pub std_interval_ns: Option<(f64, f64)>,
    /// Counters the std's spread was measured over.
    pub std_counters: usize,
    /// Why there is no mean.
    pub reason: Option<String>,
    /// Why there is no std (when one was asked for).
    pub std_reason: Option<String>,
    /// The flow's counters whose packet counts differ at the two points (the mean is then
    /// over the others).
    pub counters_lost: usize,
    /// `p̃_f` at the sender.
    pub packets: Option<f64>,
    /// Packets the flow's counters lost between the points (sender minus receiver counts).
    pub lost: Option<f64>,
    /// The sampling vector used.
    pub vector: Option<u16>,
    pub sender_epochs: usize,
    pub receiver_epochs: usize,
    /// `t̃_{f,S}` in timestamp units (relative to each epoch's base, summed): what the plan's
    /// `t_min` bounds from below.
    pub t_units: f64,
    /// The mean's interval at [`Query::confidence`], ns (module doc).
    pub mean_interval_ns: Option<(f64, f64)>,
    /// Noise draws the interval kept, of [`NOISE_DRAWS`].
    pub noise_draws: usize,
    pub notes: Vec<String>,
}

impl FlowLatency {
    /// Whether the mean is certified within `β`: its interval lies within
    /// `[μ̃/(1 + β), μ̃/(1 − β)]`, so that when the interval holds the true mean, the estimate
    /// is within `β` of it.
    pub fn certified(&self, beta: f64) -> bool {
        match (self.mean_ns, self.mean_interval_ns) {
            (Some(m), Some((lo, hi))) if m > 0.0 && beta < 1.0 => {
                lo >= m / (1.0 + beta) && hi <= m / (1.0 - beta)
            }
            _ => false,
        }
    }
}

/// One point's view of a flow in one vector, summed over epochs.
#[derive(Clone, Debug, Default)]
pub struct PointSums {
    /// `t̃_f`, ns relative to the query's reference `R₀`.
    pub t: f64,
    /// `p̃_f`.
    pub p: f64,
    /// `t̃_f` in each epoch's units, summed.
    pub t_units: f64,
    /// `Σ_j N[j]`: raw packet counters of the subvector.
    pub raw_counts: u64,
    /// `Σ_j A[j]`: the subvector's absolute sums as they are, noise included (ns relative to
    /// `R₀`).
    pub raw_t: f64,
    /// Theorem 3: `f`'s own part of each counter, made absolute (ns relative to `R₀`).
    pub w: Vec<f64>,
    /// Each counter of the subvector as it is, made absolute: `A[j]` (ns relative to `R₀`).
    pub a: Vec<f64>,
    /// Each counter's packets as they are, `N[j]`.
    pub n: Vec<u64>,
    /// The largest timestamp unit of the epochs, ns.
    pub unit_ns: u64,
    pub epochs: usize,
}

/// Theorem 3's root: the most likely noise `ξ ∈ [0, min(s, τ)]` in a counter of value `s`
/// when `τ` units of other flows are spread binomially over `n` counters, i.e. the root of
/// `ψ(τ − ξ + 1) − ψ(ξ + 1) − ln(n − 1)`, which falls strictly in `ξ`. Clamped to the ends
/// when it has no root inside.
pub fn mle_noise(s: f64, tau: f64, n: f64) -> f64 {
    let hi = s.min(tau).max(0.0);
    let target = (n - 1.0).ln();
    let g = |xi: f64| digamma(tau - xi + 1.0) - digamma(xi + 1.0) - target;
    if hi <= 0.0 || g(0.0) <= 0.0 {
        return 0.0;
    }
    if g(hi) >= 0.0 {
        return hi;
    }
    let (mut a, mut z) = (0.0, hi);
    for _ in 0..200 {
        let mid = 0.5 * (a + z);
        if g(mid) > 0.0 {
            a = mid;
        } else {
            z = mid;
        }
        if z - a <= 1e-9 * z.max(1.0) {
            break;
        }
    }
    0.5 * (a + z)
}

/// Theorem 2 and (optionally) Theorem 3 over `epochs` (one point, one vector).
pub fn point_sums(
    epochs: &[&Epoch],
    map: &Mapping,
    flow_hash: u64,
    r0: u64,
    mle: bool,
) -> PointSums {
    let cells: Vec<FlowEpoch> = epochs.iter().map(|e| e.flow(map, flow_hash)).collect();
    flow_sums(&cells.iter().collect::<Vec<_>>(), map.m as usize, r0, mle)
}

/// [`point_sums`] over the flow's cells of each epoch (`m` each).
pub fn flow_sums(epochs: &[&FlowEpoch], m: usize, r0: u64, mle: bool) -> PointSums {
    let mut out = PointSums {
        w: if mle { vec![0.0; m] } else { Vec::new() },
        a: vec![0.0; m],
        n: vec![0; m],
        epochs: epochs.len(),
        ..PointSums::default()
    };
    for fe in epochs {
        let e = &fe.head;
        let n = e.n as usize;
        let unit = e.unit_ns as i128;
        let shift = e.base_ns as i128 - r0 as i128;
        out.unit_ns = out.unit_ns.max(e.unit_ns);
        let (mut sa, mut ss, mut sn) = (0i128, 0u128, 0u64);
        for j in 0..m {
            let (s, c) = (fe.ts[j], fe.counts[j]);
            let a = unit * s as i128 + shift * c as i128;
            out.a[j] += a as f64;
            out.n[j] += c as u64;
            sa += a;
            ss += s as u128;
            sn += c as u64;
        }
        let tot = unit * e.sum as i128 + shift * e.packets as i128;
        // the counters read: a counter two j share is read once (FlowEpoch)
        let md = fe.distinct;
        let (nf, mf) = (n as f64, md as f64);
        // (n ΣA − m A_tot)/(n − m), exact up to the division
        let num = n as i128 * sa - md as i128 * tot;
        out.t += num as f64 / (nf - mf);
        let p = (n as i128 * sn as i128 - md as i128 * e.packets as i128) as f64 / (nf - mf);
        out.p += p;
        let t_units = (n as i128 * ss as i128 - md as i128 * e.sum as i128) as f64 / (nf - mf);
        out.t_units += t_units;
        out.raw_counts += sn;
        out.raw_t += sa as f64;
        if mle {
            let tau = (e.sum as f64 - t_units).max(0.0);
            let nu = (e.packets as f64 - p).max(0.0);
            for j in 0..m {
                let s = fe.ts[j] as f64;
                let c = fe.counts[j] as f64;
                let w = s - mle_noise(s, tau, nf);
                let k = c - mle_noise(c, nu, nf);
                out.w[j] += e.unit_ns as f64 * w + shift as f64 * k;
            }
        }
    }
    out
}

/// Theorem 4: the mean over `gamma` random permutations of `Σ_l (v_R[l] − v_S[l])²`, an
/// estimate of `Σ_z (u_R[z] − u_S[z])²`.
pub fn virtual_repetitions(ws: &[f64], wr: &[f64], gamma: u32, seed: u64) -> f64 {
    let m = ws.len().min(wr.len());
    let d: Vec<f64> = (0..m).map(|j| wr[j] - ws[j]).collect();
    let mut q: Vec<usize> = (0..m).collect();
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let mut total = 0.0;
    for _ in 0..gamma {
        q.shuffle(&mut rng);
        let mut s = 0.0;
        for pair in q.chunks_exact(2) {
            let x = d[pair[1]] - d[pair[0]];
            s += x * x;
        }
        total += s;
    }
    total / gamma.max(1) as f64
}

/// The limit of [`virtual_repetitions`] as `γ → ∞`: over all pairings,
/// `E[Σ_l (D_a − D_b)²] = (m·Σ D_j² − (Σ D_j)²)/(m − 1)` with `D = w̃_R − w̃_S`.
pub fn repetitions_limit(ws: &[f64], wr: &[f64]) -> f64 {
    let m = ws.len().min(wr.len());
    let d = (0..m).map(|j| wr[j] - ws[j]);
    let (s1, s2) = d.fold((0.0, 0.0), |(a, b), x| (a + x, b + x * x));
    (m as f64 * s2 - s1 * s1) / (m as f64 - 1.0)
}

/// The mapping every epoch of a query shares, or the mismatch.
pub fn shared_mapping(
    sender: &[&EpochHead],
    receiver: &[&EpochHead],
) -> Result<Option<(Mapping, Vec<f64>)>, MethodError> {
    let Some(first) = sender.first().or(receiver.first()) else {
        return Ok(None);
    };
    let mut probs = vec![0.0; first.vectors as usize];
    for (who, e) in sender
        .iter()
        .map(|e| ("sender", e))
        .chain(receiver.iter().map(|e| ("receiver", e)))
    {
        let differ = |field: &str, a: String, b: String| MethodError::ConfigMismatch {
            field: field.into(),
            sender: if who == "sender" {
                b.clone()
            } else {
                a.clone()
            },
            receiver: if who == "sender" { a } else { b },
        };
        if e.m != first.m {
            return Err(differ("m", first.m.to_string(), e.m.to_string()));
        }
        if e.seed != first.seed {
            return Err(differ("seed", first.seed.to_string(), e.seed.to_string()));
        }
        if e.placement != first.placement {
            // epochs written before and after owl's flow hash changed (CLE2, CLE3)
            return Err(differ(
                "flow hash (epochs of two owl versions: query the ranges before and after the upgrade apart)",
                first.placement.name().into(),
                e.placement.name().into(),
            ));
        }
        if e.vectors != first.vectors {
            return Err(differ(
                "vectors",
                first.vectors.to_string(),
                e.vectors.to_string(),
            ));
        }
        let p = &mut probs[e.vector as usize];
        if *p == 0.0 {
            *p = e.probability;
        } else if *p != e.probability {
            return Err(differ("vectors", p.to_string(), e.probability.to_string()));
        }
    }
    Ok(Some((
        Mapping::new(first.seed, first.m, &[1.0], first.placement),
        probs,
    )))
}

/// Answer `q` from the two points' epochs (any order; those outside the range are skipped).
pub fn query(sender: &[Epoch], receiver: &[Epoch], q: &Query) -> Result<FlowLatency, MethodError> {
    query_cached(sender, receiver, q, &mut NoiseCache::default())
}

/// [`query`], keeping the noise tables of the epochs it reads in `cache` for the next flow's
/// query over the same epochs.
pub fn query_cached(
    sender: &[Epoch],
    receiver: &[Epoch],
    q: &Query,
    cache: &mut NoiseCache,
) -> Result<FlowLatency, MethodError> {
    let s: Vec<&Epoch> = sender
        .iter()
        .filter(|e| e.overlaps(q.from_ns, q.to_ns))
        .collect();
    let r_to = q.to_ns.saturating_add(q.horizon_ns);
    let r: Vec<&Epoch> = receiver
        .iter()
        .filter(|e| e.overlaps(q.from_ns, r_to))
        .collect();
    fn heads<'a>(v: &[&'a Epoch]) -> Vec<&'a EpochHead> {
        v.iter().map(|e| &e.head).collect()
    }
    let Some((map, _)) = shared_mapping(&heads(&s), &heads(&r))? else {
        return query_flow(&[], &[], q);
    };
    let fh = map.flow_hash(&q.flow);
    let cells = |v: &[&Epoch]| v.iter().map(|e| e.flow(&map, fh)).collect::<Vec<_>>();
    fn of<'a>(all: &[&'a Epoch], v: usize) -> Vec<&'a Epoch> {
        all.iter()
            .copied()
            .filter(|e| e.vector as usize == v)
            .collect()
    }
    let m = map.m;
    query_flow_with(&cells(&s), &cells(&r), q, &mut |v, paper| {
        cache.table(&of(&s, v), &of(&r, v), m, paper)
    })
}

/// [`query`] over the flow's cells of the epochs already chosen (those that overlap the
/// query's range at each point: what the epoch store reads). It gives no interval: that needs
/// the epochs whole.
pub fn query_flow(s: &[FlowEpoch], r: &[FlowEpoch], q: &Query) -> Result<FlowLatency, MethodError> {
    query_flow_with(s, r, q, &mut |_, _| {
        Err("it needs the epochs whole (owl query --confidence reads them)".into())
    })
}

/// Where a query's noise tables come from: the vector and the estimator (`true`: Theorem 2's,
/// `false`: raw) in, the table or why there is none out.
pub type Tables<'a> = dyn FnMut(usize, bool) -> Result<std::sync::Arc<NoiseTable>, String> + 'a;

/// [`query_flow`] with the noise tables of the epochs, for the interval.
pub fn query_flow_with(
    s: &[FlowEpoch],
    r: &[FlowEpoch],
    q: &Query,
    tables: &mut Tables,
) -> Result<FlowLatency, MethodError> {
    let s: Vec<&FlowEpoch> = s.iter().collect();
    let r: Vec<&FlowEpoch> = r.iter().collect();
    let (s, r) = (&s[..], &r[..]);
    let mut out = FlowLatency {
        sender_epochs: s.len(),
        receiver_epochs: r.len(),
        ..FlowLatency::default()
    };
    fn heads<'a>(v: &[&'a FlowEpoch]) -> Vec<&'a EpochHead> {
        v.iter().map(|e| &e.head).collect()
    }
    let Some((map, probs)) = shared_mapping(&heads(s), &heads(r))? else {
        let why = "no epoch overlaps the range at either point";
        out.notes.push(why.into());
        out.reason = Some(why.into());
        return Ok(out);
    };
    if s.is_empty() || r.is_empty() {
        let why = format!(
            "no epoch overlaps the range at the {}",
            if s.is_empty() { "sender" } else { "receiver" }
        );
        out.notes.push(why.clone());
        out.reason = Some(why);
        return Ok(out);
    }
    let fh = map.flow_hash(&q.flow);
    // one reference for both points, near the data (sums relative to it stay small, so the
    // f64 division keeps nanoseconds)
    let r0 = s
        .iter()
        .map(|e| e.head.first_ns)
        .min()
        .unwrap_or(0)
        .max(q.from_ns);
    // the same n everywhere: a packet sits in the same counter at both points, and the
    // flow's own counters tell its losses; otherwise only whole vectors can (§1.4)
    let same_n = s.iter().chain(r).all(|e| e.head.n == s[0].head.n);
    if !same_n {
        out.notes.push(
            "the points use different n: losses are checked on whole vectors (§1.4), and traffic both points saw no longer cancels".into(),
        );
    }
    // vectors by decreasing sampling probability
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
    let want_std = q.gamma > 0;
    let paper = q.estimator == Estimator::Paper;
    let theorem4 = want_std && q.std == StdEstimator::Paper;
    let m = map.m as usize;
    let seed = mix(fh ^ map.seed ^ 0x7669_7274);
    let mut lost: Option<f64> = None;
    let mut absent: Option<f64> = None;
    // the first vector (highest probability) where some of the flow's counters lost packets
    // but enough agree: its index, sums, and the agreeing counters that hold packets
    let mut partial: Option<(usize, PointSums, PointSums, Vec<usize>)> = None;
    // the first vector with too few agreeing counters: (counters that lost packets, agreeing
    // counters that hold packets)
    let mut short: Option<(usize, usize)> = None;
    for v in order {
        let sv: Vec<&FlowEpoch> = s
            .iter()
            .copied()
            .filter(|e| e.head.vector as usize == v)
            .collect();
        let rv: Vec<&FlowEpoch> = r
            .iter()
            .copied()
            .filter(|e| e.head.vector as usize == v)
            .collect();
        if sv.is_empty() || rv.is_empty() {
            continue;
        }
        let ps = flow_sums(&sv, m, r0, theorem4 && paper);
        let pr = flow_sums(&rv, m, r0, theorem4 && paper);
        let (cs, cr) = if same_n {
            (ps.raw_counts, pr.raw_counts)
        } else {
            (
                sv.iter().map(|e| e.head.packets).sum::<u64>(),
                rv.iter().map(|e| e.head.packets).sum::<u64>(),
            )
        };
        // with the same n, counter by counter: a packet lost from one counter and a duplicate
        // in another leave the totals equal and both counters wrong by a whole timestamp
        let bad = if same_n {
            (0..m).filter(|&j| ps.n[j] != pr.n[j]).count()
        } else {
            usize::from(cs != cr)
        };
        if bad > 0 {
            let d = cs as f64 - cr as f64;
            lost = Some(lost.map_or(d, |l: f64| l.min(d)));
            if same_n {
                let usable: Vec<usize> = (0..m)
                    .filter(|&j| ps.n[j] == pr.n[j] && ps.n[j] > 0)
                    .collect();
                if usable.len() >= MIN_AGREEING_COUNTERS {
                    if partial.is_none() {
                        partial = Some((v, ps, pr, usable));
                    }
                } else if short.is_none() {
                    short = Some((bad, usable.len()));
                }
            }
            continue;
        }
        // the packets the mean is over: p̃ (paper) or every packet in the counters (raw)
        let p = if paper { ps.p } else { ps.raw_counts as f64 };
        if p < 0.5 {
            // the flow has no packet in this vector (or in these epochs)
            absent = Some(absent.map_or(ps.p, |a: f64| a.max(ps.p)));
            continue;
        }
        out.vector = Some(v as u16);
        out.lost = Some(0.0);
        out.t_units = ps.t_units;
        let num = if paper {
            pr.t - ps.t
        } else {
            pr.raw_t - ps.raw_t
        };
        let mean = num / p;
        out.mean_ns = Some(mean);
        out.packets = Some(ps.p.max(0.0));
        let (ts, tr) = (
            sv.iter().map(|e| e.head.packets).sum::<u64>(),
            rv.iter().map(|e| e.head.packets).sum::<u64>(),
        );
        if paper && ts != tr {
            out.notes.push(format!(
                "the queried epochs hold {ts} packets at the sender and {tr} at the receiver (losses, or epochs that do not line up): Theorem 2 subtracts their timestamps' expected share, which no longer cancels, so this mean can be far off (colate:mean=raw does not subtract it)"
            ));
        }
        if q.confidence > 0.0 {
            let interval = tables(v, paper)
                .and_then(|t| t.interval(num, ps.raw_counts, r0, fh, &map, q.confidence, m));
            set_interval(&mut out, interval);
        }
        if want_std {
            if theorem4 {
                let (ws, wr) = if paper {
                    (&ps.w, &pr.w)
                } else {
                    (&ps.a, &pr.a)
                };
                let f = virtual_repetitions(ws, wr, q.gamma, seed);
                let var = f / p - mean * mean;
                if var < 0.0 {
                    out.std_reason = Some(format!(
                        "Theorem 4's variance estimate is negative ({var:.3e} ns²): no std"
                    ));
                } else {
                    out.std_ns = Some(var.sqrt());
                    out.notes.push(
                        "std by Theorem 4 as the paper writes it (colate:std=paper): it states no interval".into(),
                    );
                }
            } else if !same_n {
                out.std_reason = Some(
                    "the counters' spread needs the same n at both points (a packet in the same counter at both)".into(),
                );
            } else {
                let all: Vec<usize> = (0..m).filter(|&j| ps.n[j] > 0).collect();
                spread_std(&mut out, &ps, &pr, &all);
            }
        }
        if probs.len() > 1 {
            out.notes.push(format!(
                "vector {v} (sampling probability {}) used",
                probs[v]
            ));
        }
        return Ok(out);
    }
    if let Some((v, ps, pr, usable)) = partial {
        // owl's, beyond §1.4: no vector agrees whole, so the mean is over the flow's counters
        // that agree at both points (no packet of theirs was lost), raw: their packets' delays
        let bad = (0..m).filter(|&j| ps.n[j] != pr.n[j]).count();
        let short_by: i64 = (0..m).map(|j| ps.n[j] as i64 - pr.n[j] as i64).sum();
        let num: f64 = usable.iter().map(|&j| pr.a[j] - ps.a[j]).sum();
        let raw: u64 = usable.iter().map(|&j| ps.n[j]).sum();
        let mean = num / raw as f64;
        out.vector = Some(v as u16);
        out.lost = Some(short_by as f64);
        out.t_units = ps.t_units;
        out.packets = Some(ps.p.max(0.0));
        out.mean_ns = Some(mean);
        out.counters_lost = bad;
        out.notes.push(format!(
            "{bad} of its {m} counters lost packets ({short_by} short at the receiver, the flow's or colliding flows'): the mean is over the {} counters that agree, the raw sum of their {raw} packets' delays (owl's, beyond §1.4); packets a queue dropped took their delays with them, so on a path that drops when its queue is long the mean can lean low",
            usable.len()
        ));
        if paper {
            out.notes.push(
                "Theorem 2 is not used for this flow: it subtracts whole vectors, which differ at the two points by the lost packets' timestamps".into(),
            );
        }
        if q.confidence > 0.0 {
            let interval = tables(v, false)
                .and_then(|t| t.interval(num, raw, r0, fh, &map, q.confidence, usable.len()));
            set_interval(&mut out, interval);
        }
        if want_std {
            if theorem4 {
                out.std_reason = Some(format!(
                    "Theorem 4 needs all {m} counters and {bad} lost packets: no std"
                ));
            } else {
                spread_std(&mut out, &ps, &pr, &usable);
            }
        }
        if probs.len() > 1 {
            out.notes.push(format!(
                "vector {v} (sampling probability {}) used",
                probs[v]
            ));
        }
        return Ok(out);
    }
    out.lost = lost;
    let why = match (absent, lost, short) {
        (Some(p), None, _) => {
            out.packets = Some(p.max(0.0));
            out.lost = Some(0.0);
            format!("the flow's packet estimate is {p:.2}: it is absent from these epochs")
        }
        (_, Some(l), Some((bad, good))) => format!(
            "{bad} of its {m} counters lost packets ({l} short at the receiver) and {good} that agree hold packets, fewer than {MIN_AGREEING_COUNTERS}: no estimate"
        ),
        (_, Some(l), None) if same_n => format!(
            "no vector with equal counts, and its counters agree nowhere they hold packets ({l} short at the receiver): no estimate"
        ),
        (_, Some(l), None) => format!(
            "no vector with equal counts ({l} short at the receiver); the points use different n, so only whole vectors can be checked: no estimate"
        ),
        (None, None, _) => "no vector has epochs at both points".into(),
    };
    out.notes.push(why.clone());
    out.reason = Some(why);
    Ok(out)
}

/// The mean's interval and the draws it kept, or why there is none (a note).
fn set_interval(out: &mut FlowLatency, interval: Result<(f64, f64, usize), String>) {
    match interval {
        Ok((lo, hi, kept)) => {
            out.mean_interval_ns = Some((lo, hi));
            out.noise_draws = kept;
        }
        Err(why) => out.notes.push(format!("no interval for the mean: {why}")),
    }
}

/// Fewest of a flow's counters that must agree at both points (and hold packets) for a mean
/// from them when some of its counters lost packets.
pub const MIN_AGREEING_COUNTERS: usize = 2;

/// The std and its interval from the spread of `counters` ([`counter_spread`]), or why not.
fn spread_std(out: &mut FlowLatency, ps: &PointSums, pr: &PointSums, counters: &[usize]) {
    let d: Vec<f64> = counters.iter().map(|&j| pr.a[j] - ps.a[j]).collect();
    let n: Vec<u64> = counters.iter().map(|&j| ps.n[j]).collect();
    let (us, ur) = (ps.unit_ns as f64, pr.unit_ns as f64);
    match counter_spread(&d, &n, (us * us + ur * ur) / 12.0) {
        Ok(c) => {
            out.std_counters = c.counters;
            let (lo, hi) = c.ci95_ns;
            if hi - lo > c.std_ns {
                use crate::units::format_ns;
                out.std_reason = Some(format!(
                    "withheld: its 95 % interval {} .. {} is wider than the estimate {} ({} of the flow's counters hold packets; 12 or more give an interval narrower than the std)",
                    format_ns(lo),
                    format_ns(hi),
                    format_ns(c.std_ns),
                    c.counters
                ));
            } else {
                out.std_ns = Some(c.std_ns);
                out.std_interval_ns = Some(c.ci95_ns);
            }
        }
        Err(why) => out.std_reason = Some(why),
    }
}

/// owl's per-flow std (beyond the paper; `colate:std=counters`, the default).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CounterSpread {
    pub std_ns: f64,
    /// 95 % interval, ns.
    pub ci95_ns: (f64, f64),
    /// Counters that hold packets: the interval has one degree of freedom fewer.
    pub counters: usize,
}

/// The std of the delays in a flow's counters from their own spread. Each counter `j` holds
/// `N_j` packets (the same at both points) whose delays sum to `D_j = A_R[j] − A_S[j]`: every
/// packet both points put in the counter cancels down to its delay. With delays of mean `μ`
/// and variance `σ²`, `D_j − N_j·μ` has variance `N_j·σ²`, so
/// `σ̂² = Σ_j (D_j − N_j·μ̂)²/N_j / (k − 1)` with `μ̂ = ΣD/ΣN` over the `k` counters that hold
/// packets, and `(k − 1)·σ̂²/σ²` is about `χ²_{k−1}` (each counter a sum of packets: near
/// normal). The counts are known per counter, so `μ` drops out whatever `μ/σ` — which is
/// what Theorem 4's pairing cannot do (it leans on the counts' own randomness, and its error
/// grows with `μ²`). Each point floors a timestamp to its unit, which adds `rounding_var`
/// (`(u_S² + u_R²)/12`) to each delay's variance; it is taken off the estimate and the
/// interval's ends.
pub fn counter_spread(d: &[f64], n: &[u64], rounding_var: f64) -> Result<CounterSpread, String> {
    let used: Vec<(f64, f64)> = d
        .iter()
        .zip(n)
        .filter(|(_, n)| **n > 0)
        .map(|(d, n)| (*d, *n as f64))
        .collect();
    let k = used.len();
    if k < 2 {
        return Err(format!(
            "the flow's packets are in {k} counter{}: no spread to measure a std from",
            if k == 1 { "" } else { "s" }
        ));
    }
    let (sd, sn) = used
        .iter()
        .fold((0.0, 0.0), |(a, b), (d, n)| (a + d, b + n));
    let mu = sd / sn;
    let ss: f64 = used.iter().map(|(d, n)| (d - n * mu).powi(2) / n).sum();
    let v = ss / (k - 1) as f64;
    if v <= rounding_var {
        return Err(format!(
            "the delays' spread is below the timestamp units' resolution (variance {v:.3e} ns², rounding alone {rounding_var:.3e} ns²): no std"
        ));
    }
    let Some([lo, hi]) = crate::stats::ci::satterthwaite_std_ci95(v, (k - 1) as f64) else {
        return Err("no interval for the counters' spread".into());
    };
    let off = |x: f64| (x * x - rounding_var).max(0.0).sqrt();
    Ok(CounterSpread {
        std_ns: (v - rounding_var).sqrt(),
        ci95_ns: (off(lo), off(hi)),
        counters: k,
    })
}

/// What one counter's sum weighs in the estimator's numerator: `n/(n − m)` in Theorem 2 (each
/// counter's `n·A[i]` over `n − m`), 1 in the raw variant.
fn counter_scale(paper: bool, n: usize, m: usize) -> f64 {
    if paper {
        n as f64 / (n - m) as f64
    } else {
        1.0
    }
}

/// One point's epochs of one vector summed counter by counter, for a [`NoiseTable`]: each
/// counter's part in the estimator's numerator (relative to `r_ref`) and its packets. Epochs
/// are added one at a time, so a point's part costs 16 bytes a counter whatever the number of
/// epochs.
#[derive(Clone, Debug)]
pub struct PointNoise {
    n: usize,
    m: usize,
    paper: bool,
    sender: bool,
    r_ref: u64,
    x: Vec<f64>,
    c: Vec<u64>,
    /// An empty counter's part in the numerator, and its coefficient of `r₀ − r_ref`.
    empty: (f64, f64),
    unit: u64,
}

impl PointNoise {
    /// An empty part for the `sender` point (or the receiver) of vectors of `n` counters,
    /// subvectors of `m`, `paper`'s estimator or the raw one, sums relative to `r_ref`.
    pub fn new(n: usize, m: usize, paper: bool, sender: bool, r_ref: u64) -> PointNoise {
        PointNoise {
            n,
            m,
            paper,
            sender,
            r_ref,
            x: vec![0.0; n],
            c: vec![0; n],
            empty: (0.0, 0.0),
            unit: 0,
        }
    }

    /// Add one epoch.
    pub fn add(&mut self, e: &Epoch) -> Result<(), String> {
        if e.n as usize != self.n {
            return Err(
                "the epochs do not all have the same n, so a counter is not the same counter at both points"
                    .into(),
            );
        }
        let sign = if self.sender { -1.0 } else { 1.0 };
        let (nf, mf) = (self.n as f64, self.m as f64);
        let unit = e.unit_ns as f64;
        let shift = e.base_ns as f64 - self.r_ref as f64;
        if self.paper {
            // Theorem 2, one counter: (n·A[i] − A_tot)/(n − m); an empty one keeps −A_tot/(n − m)
            let a_tot = unit * e.sum as f64 + shift * e.packets as f64;
            self.empty.0 -= sign * a_tot / (nf - mf);
            self.empty.1 -= sign * e.packets as f64 / (nf - mf);
        }
        let scale = counter_scale(self.paper, self.n, self.m);
        for (i, (&ts, &c)) in e.ts.iter().zip(&e.counts).enumerate() {
            if c == 0 && ts == 0 {
                continue;
            }
            self.x[i] += sign * scale * (unit * ts as f64 + shift * c as f64);
            self.c[i] += c as u64;
        }
        self.unit = self.unit.max(e.unit_ns);
        Ok(())
    }
}

/// Every counter of one vector's queried epochs at both points, as a flow's foreign part (module
/// doc, "The confidence interval"): each counter's part in the estimator's numerator — `x − (r₀
/// − r_ref)·y`, linear in the query's reference `r₀`, with `y` following from its packet counts
/// — its packets at the sender, and its sender's minus receiver's packet counts. Only counters a
/// packet touched are listed; every other counter has the `empty` part.
#[derive(Clone, Debug)]
pub struct NoiseTable {
    n: usize,
    m: usize,
    paper: bool,
    r_ref: u64,
    /// `(x, y)` of an empty counter.
    empty: (f64, f64),
    /// `(index, x, sender packets, sender minus receiver packets)`, by index.
    cells: Vec<(u32, f64, u64, i64)>,
    /// The largest timestamp unit of the epochs.
    unit: f64,
}

impl NoiseTable {
    /// Tabulate `sender`'s and `receiver`'s epochs (one vector) for `paper`'s estimator or the
    /// raw one, with subvectors of `m`.
    pub fn build(
        sender: &[&Epoch],
        receiver: &[&Epoch],
        m: u32,
        paper: bool,
    ) -> Result<NoiseTable, String> {
        let Some(first) = sender.first() else {
            return Err("no epoch at the sender".into());
        };
        let (n, m) = (first.n as usize, m as usize);
        let r_ref = sender.iter().map(|e| e.first_ns).min().unwrap_or(0);
        let mut s = PointNoise::new(n, m, paper, true, r_ref);
        let mut r = PointNoise::new(n, m, paper, false, r_ref);
        for e in sender {
            s.add(e)?;
        }
        for e in receiver {
            r.add(e)?;
        }
        NoiseTable::from_points(s, r)
    }

    /// The table of a sender's and a receiver's parts (built apart, each with its own
    /// reference).
    pub fn from_points(s: PointNoise, mut r: PointNoise) -> Result<NoiseTable, String> {
        if !s.sender || r.sender || s.n != r.n || s.m != r.m || s.paper != r.paper {
            return Err("the two parts are not a sender's and a receiver's of one vector".into());
        }
        let scale = counter_scale(s.paper, s.n, s.m);
        // the receiver's sums, moved to the sender's reference
        let delta = s.r_ref as f64 - r.r_ref as f64;
        r.empty.0 -= delta * r.empty.1;
        let mut cells = Vec::new();
        for i in 0..s.n {
            let (cs, cr) = (s.c[i], r.c[i]);
            if cs == 0 && cr == 0 {
                continue;
            }
            let xr = r.x[i] - delta * scale * cr as f64;
            cells.push((
                i as u32,
                s.x[i] + xr + s.empty.0 + r.empty.0,
                cs,
                cs as i64 - cr as i64,
            ));
        }
        Ok(NoiseTable {
            n: s.n,
            m: s.m,
            paper: s.paper,
            r_ref: s.r_ref,
            empty: (s.empty.0 + r.empty.0, s.empty.1 + r.empty.1),
            cells,
            unit: s.unit.max(r.unit) as f64,
        })
    }

    /// The interval at confidence `c` for a flow whose counters gave the estimator's numerator
    /// `num` (relative to `r0`) and `raw` packets at the sender, and the draws kept (module
    /// doc): the union, over the foreign packet counts `φ < raw` the region admits, of the means
    /// `(num − F)/p` with `p = raw − φ` and `F` in its central range given `φ`. The estimate
    /// read `k` counters: all `m`, or those of a lossy flow that agree at both points (each
    /// draw then takes `k` cells, so the interval is as wide as `k` counters' noise).
    #[allow(clippy::too_many_arguments)]
    fn interval(
        &self,
        num: f64,
        raw: u64,
        r0: u64,
        flow_hash: u64,
        map: &Mapping,
        c: f64,
        k: usize,
    ) -> Result<(f64, f64, usize), String> {
        let (n, m) = (self.n, self.m);
        if n < 4 * m {
            return Err(format!("{n} counters are too few for subvectors of {m}"));
        }
        // the flow's own counters are not foreign: leave them out of the draws
        let own: Vec<usize> = (0..m)
            .filter_map(|j| {
                let i = map.index(flow_hash, j, n) as u32;
                self.cells.binary_search_by_key(&i, |c| c.0).ok()
            })
            .collect();
        let scale = counter_scale(self.paper, n, m);
        let shift = r0 as f64 - self.r_ref as f64;
        let empty = self.empty.0 - shift * self.empty.1;
        let mut rng = Pcg64Mcg::seed_from_u64(mix(flow_hash ^ map.seed ^ 0x6e6f_6973));
        let blocked = map.placement == Placement::Blocked;
        // draws (φ, F) whose packet counts agree at both points, as the flow's must
        let mut draws: Vec<(u64, f64)> = Vec::with_capacity(NOISE_DRAWS);
        for _ in 0..NOISE_DRAWS {
            let (mut f, mut phi, mut d) = (0.0, 0u64, 0i64);
            let mut taken = 0;
            // a flow's counters lie in one block when the placement is blocked: draw them
            // from one block at random, as the flow's own block is
            let block = blocked.then(|| Mapping::block(rng.random_range(0..Mapping::blocks(n)), n));
            while taken < k {
                let u = match block {
                    // the counter's place among the touched ones, or past them (empty)
                    Some((start, len)) => {
                        let i = (start + rng.random_range(0..len)) as u32;
                        self.cells
                            .binary_search_by_key(&i, |c| c.0)
                            .unwrap_or(self.cells.len())
                    }
                    // the touched counters first, then the empty ones: a uniform counter
                    None => rng.random_range(0..n),
                };
                match self.cells.get(u) {
                    Some(_) if own.contains(&u) => continue,
                    Some(&(_, x, cs, diff)) => {
                        // y: the receiver's minus the sender's packets, scaled, and the empty part
                        let y = -scale * diff as f64 + self.empty.1;
                        f += x - shift * y;
                        phi += cs;
                        d += diff;
                    }
                    None => f += empty,
                }
                taken += 1;
            }
            if d == 0 {
                draws.push((phi, f));
            }
        }
        let kept = draws.len();
        if kept < NOISE_DRAWS / 4 {
            return Err(format!(
                "{} of {NOISE_DRAWS} noise draws have packet counts that differ between the points: the counters are mostly traffic only one point saw",
                NOISE_DRAWS - kept
            ));
        }
        // the region: the likeliest foreign counts, holding 1 − δ of the draws, and within
        // each the central 1 − 2·tail of F; (1 − δ)(1 − 2·tail) = c
        let delta = (1.0 - c) / 2.0;
        let tail = (1.0 - c / (1.0 - delta)) / 2.0;
        draws.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let mut groups: Vec<&[(u64, f64)]> = draws.chunk_by(|a, b| a.0 == b.0).collect();
        groups.sort_by_key(|g| std::cmp::Reverse(g.len()));
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let mut held = 0usize;
        for g in groups {
            if held as f64 >= (1.0 - delta) * kept as f64 {
                break;
            }
            held += g.len();
            let phi = g[0].0;
            if phi >= raw {
                continue;
            }
            // Theorem 2 subtracts the flow's own share of t_X too: its packets count n/(n − m)
            let p = (raw - phi) as f64 * scale;
            // F sorted within the group: its tails at `tail`, the extremes when it is small
            let at = |q: f64| g[((q * (g.len() - 1) as f64).round() as usize).min(g.len() - 1)].1;
            lo = lo.min((num - at(1.0 - tail)) / p);
            hi = hi.max((num - at(tail)) / p);
        }
        if lo > hi {
            return Err(
                "the flow's packet count is below every foreign count the noise admits at this confidence"
                    .into(),
            );
        }
        // each point floors a timestamp to its unit, so every delay in the counters is off by
        // less than the larger unit, and so is their mean: certain, added whole
        Ok((lo - self.unit, hi + self.unit, kept))
    }
}

/// Noise tables by the epochs they tabulate, for the flows that query the same epochs; at
/// most [`NOISE_TABLES`], then it starts again (counted).
#[derive(Debug, Default)]
pub struct NoiseCache {
    tables: hashbrown::HashMap<(Vec<u64>, Vec<u64>, bool), std::sync::Arc<NoiseTable>>,
    /// Tables built, and times the cache was emptied to stay within its cap.
    pub built: u64,
    pub cleared: u64,
}

impl NoiseCache {
    fn table(
        &mut self,
        sender: &[&Epoch],
        receiver: &[&Epoch],
        m: u32,
        paper: bool,
    ) -> Result<std::sync::Arc<NoiseTable>, String> {
        let seqs = |v: &[&Epoch]| v.iter().map(|e| e.seq).collect::<Vec<_>>();
        let key = (seqs(sender), seqs(receiver), paper);
        if let Some(t) = self.tables.get(&key) {
            return Ok(t.clone());
        }
        let t = std::sync::Arc::new(NoiseTable::build(sender, receiver, m, paper)?);
        if self.tables.len() >= NOISE_TABLES {
            self.tables.clear();
            self.cleared += 1;
        }
        self.built += 1;
        self.tables.insert(key, t.clone());
        Ok(t)
    }
}

/// The aggregate mean of every packet (not per flow): the vector of the highest sampling
/// probability whose packet counters agree at both points over all epochs.
pub fn aggregate(sender: &[Epoch], receiver: &[Epoch]) -> Result<Estimate, MethodError> {
    let heads = |v: &[Epoch]| v.iter().map(|e| e.head.clone()).collect::<Vec<_>>();
    aggregate_heads(&heads(sender), &heads(receiver))
}

/// [`aggregate`] from the epochs' heads (it reads no counter).
pub fn aggregate_heads(
    sender: &[EpochHead],
    receiver: &[EpochHead],
) -> Result<Estimate, MethodError> {
    let s: Vec<&EpochHead> = sender.iter().collect();
    let r: Vec<&EpochHead> = receiver.iter().collect();
    let mut est = Estimate::default();
    let Some((_, probs)) = shared_mapping(&s, &r)? else {
        est.reason = Some("no estimate: no epoch recorded at either point (no packet)".into());
        return Ok(est);
    };
    let r0 = s.iter().chain(&r).map(|e| e.first_ns).min().unwrap_or(0);
    let total = |es: &[&EpochHead], v: usize| -> (i128, u64) {
        es.iter()
            .filter(|e| e.vector as usize == v)
            .fold((0i128, 0u64), |(a, n), e| {
                (
                    a + e.unit_ns as i128 * e.sum as i128
                        + (e.base_ns as i128 - r0 as i128) * e.packets as i128,
                    n + e.packets,
                )
            })
    };
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
    let (ns_all, nr_all): (u64, u64) = (
        s.iter().map(|e| e.packets).sum(),
        r.iter().map(|e| e.packets).sum(),
    );
    est.lost = Some(ns_all.saturating_sub(nr_all));
    for v in order {
        let (ts, ns) = total(&s, v);
        let (tr, nr) = total(&r, v);
        if ns == 0 || ns != nr {
            continue;
        }
        est.mean_ns = Some((tr - ts) as f64 / ns as f64);
        est.samples = ns;
        return Ok(est);
    }
    let why = "no vector holds the same number of packets at both points (COLATE's vectors cannot leave lost packets out)";
    est.notes.push(format!("{why}: no aggregate mean"));
    est.reason = Some(format!("no estimate: {why}"));
    Ok(est)
}
