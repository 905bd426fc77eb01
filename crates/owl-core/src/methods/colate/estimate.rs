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
//!   `τ = t_X − t̃_f` ([`mle_noise`], digamma from [`super::special`], bisection: the left side falls
//!   strictly in `ξ`); the same for the packet counters, whose noise *is* binomial.
//! - **Theorem 4** (Eq. 9, 10): γ random permutations `Q` of the `m` counters; each gives
//!   `Σ_l (v_R[l] − v_S[l])²` with `v_X[l] = w̃_X[Q[2l]] − w̃_X[Q[2l−1]]`, an estimate of
//!   `Σ_z (u_R[z] − u_S[z])²`; their mean, over `p̃_f`, minus `μ̃²` is the variance (Eq. 5).
//!
//! # The confidence interval (owl's, beyond the paper)
//!
//! §5's plan promises reliability from Theorem 1's noise model, which undercounts the noise
//! (module doc of [`super`]), so owl measures each query's noise instead. A flow's estimate is
//! `μ = (num_f − F)/(den_f − G)` exactly, where `num_f`, `den_f` are what the estimator read
//! from the flow's `m` counters (at both points, over the queried epochs) and `(F, G)` is the
//! unknown *foreign* part of them — other flows' packets, and packets only one point saw. Each
//! cell's part in `num` and `den` is additive (Theorem 2 is linear in the counters; the raw
//! variant is a plain sum), and a flow's counters are random cells. So the query reads a
//! **noise block** of `L` consecutive cells of the same epochs at both points (4 096, or up to
//! 16 times more where an epoch is so sparse that 4 096 cells would hold fewer than 512
//! packets; its start a hash of the flow; the flow's own cells left out) and draws `m` of them
//! at a time: each draw `b` is a foreign part `(F_b, G_b)` the flow could have had. Under a
//! hypothesised mean `μ`, the flow's own statistic `num_f − μ·den_f` *is* `F − μG` — its packet
//! count cancels — so `μ` is accepted when that statistic is not in either `(1 − c)/2` tail of
//! the draws' `F_b − μ·G_b` (ties count for `μ`); the interval is the hull of the accepted `μ`
//! (found by sweeping the draws' crossing points `(num_f − F_b)/(den_f − G_b)`), and a flow
//! whose noise could hide it entirely has an unbounded set: no interval, and a note. Draws
//! whose packet counts differ between the points are left out, as the flow's own estimate
//! needs its counts to agree. The interval is widened by the timestamp unit (each point floors
//! a timestamp to its unit, so a delay in the counters is off by less than one unit, and so is
//! the mean — certain, not drawn). No model enters: the interval is as wide as the query's own
//! noise, timestamp-sized where packets do not cancel (the triangle), tight where they do, and
//! it is not centred on `μ̃` where colliding flows drag the raw mean toward theirs. A flow whose
//! interval lies within `[μ̃/(1 + β), μ̃/(1 − β)]` is **certified** at `(c, β)`: when the
//! interval holds `μ`, `μ̃` is within `β` of it.
//!
//! **Not calibrated yet, so not offered by `owl query`.** The test holds when the block
//! describes the foreign part well. In a heavy-tailed mix the tails of a subvector's foreign
//! part are set by a few cells of the largest flows, and a block of a few thousand cells holds
//! a different handful of them for each flow: `colate-reliability --quick` measures coverage
//! of 0.96–0.999 at 10 and 100 MiB (α = 0.90–0.99) but 0.85–0.90 at 1 MiB for α = 0.90–0.95,
//! and the test `the_interval_covers_its_confidence` (ignored) measures 0.76 for a 0.90
//! interval on a crowded vector. The fix is to draw from every cell of the queried epochs
//! (one table per set of epochs, shared by the flows that query it). Until then the interval
//! is computed only where a caller asks ([`Query::confidence`]) — the experiment, to measure
//! it.
//!
//! # Packet losses (§1.4)
//!
//! With several sampling vectors, the estimator takes, among the vectors whose packet counters
//! over the flow's subvector agree at both points, the one of the highest sampling
//! probability. The agreement is checked on the flow's own `m` counters (the paper compares
//! whole vectors, which assumes the two points' epochs hold the same packets — epochs are not
//! coordinated, so they rarely do): equal counts mean no packet of those counters was lost,
//! the flow's or a colliding one's. Without an agreeing vector there is no estimate, and the
//! difference is reported as the flow's loss.

use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::method::{Estimate, MethodError};
use crate::record::FlowKey;

use super::epoch::{Epoch, EpochHead, FlowEpoch};
use super::special::digamma;
use super::vector::{Mapping, mix};

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
    /// Confidence of the mean's interval, in (0, 1); 0 = no interval (the epochs' noise
    /// blocks are then not needed).
    pub confidence: f64,
}

/// Cells of the noise block a query reads from each epoch (module doc).
pub const NOISE_CELLS: usize = 4096;
/// Draws of a subvector from the noise block.
pub const NOISE_DRAWS: usize = 4000;
/// Confidence of the interval when nothing else is asked.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

impl Query {
    /// Noise-block cells each epoch must carry for this query.
    pub fn noise_cells(&self) -> usize {
        if self.confidence > 0.0 {
            NOISE_CELLS
        } else {
            0
        }
    }
}

/// Which counters' values the mean and std rest on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Estimator {
    /// As the paper writes it: Theorem 2 (the expected share of other flows subtracted from
    /// the subvector), Eq. 3, Theorems 3 and 4 on the denoised counters.
    #[default]
    Paper,
    /// owl's variant: the subvector's sums as they are, `Σ_j (A_R[j] − A_S[j]) / Σ_j N_S[j]`,
    /// and Theorem 4 on the raw counters. When both points saw the same packets in the same
    /// counters (same `n` and seed, one link, same epochs), every packet in the flow's
    /// counters cancels down to its delay, so this is the mean delay of the packets in the
    /// flow's counters — the flow's own and the colliding ones' — with nothing subtracted: no
    /// timestamp-sized noise, no division by a noisy `p̃` (module doc).
    Raw,
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
        epochs: epochs.len(),
        ..PointSums::default()
    };
    for fe in epochs {
        let e = &fe.head;
        let n = e.n as usize;
        let unit = e.unit_ns as i128;
        let shift = e.base_ns as i128 - r0 as i128;
        let (mut sa, mut ss, mut sn) = (0i128, 0u128, 0u64);
        for j in 0..m {
            let (s, c) = (fe.ts[j], fe.counts[j]);
            let a = unit * s as i128 + shift * c as i128;
            out.a[j] += a as f64;
            sa += a;
            ss += s as u128;
            sn += c as u64;
        }
        let tot = unit * e.sum as i128 + shift * e.packets as i128;
        let (nf, mf) = (n as f64, m as f64);
        // (n ΣA − m A_tot)/(n − m), exact up to the division
        let num = n as i128 * sa - m as i128 * tot;
        out.t += num as f64 / (nf - mf);
        let p = (n as i128 * sn as i128 - m as i128 * e.packets as i128) as f64 / (nf - mf);
        out.p += p;
        let t_units = (n as i128 * ss as i128 - m as i128 * e.sum as i128) as f64 / (nf - mf);
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
    Ok(Some((Mapping::new(first.seed, first.m, &[1.0]), probs)))
}

/// Answer `q` from the two points' epochs (any order; those outside the range are skipped).
pub fn query(sender: &[Epoch], receiver: &[Epoch], q: &Query) -> Result<FlowLatency, MethodError> {
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
    let cells = |v: &[&Epoch]| {
        v.iter()
            .map(|e| e.flow_with_noise(&map, fh, q.noise_cells()))
            .collect::<Vec<_>>()
    };
    query_flow(&cells(&s), &cells(&r), q)
}

/// [`query`] over the flow's cells of the epochs already chosen (those that overlap the
/// query's range at each point: what the epoch store reads).
pub fn query_flow(s: &[FlowEpoch], r: &[FlowEpoch], q: &Query) -> Result<FlowLatency, MethodError> {
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
        out.notes
            .push("no epoch overlaps the range at either point".into());
        return Ok(out);
    };
    if s.is_empty() || r.is_empty() {
        out.notes.push(format!(
            "no epoch overlaps the range at the {}",
            if s.is_empty() { "sender" } else { "receiver" }
        ));
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
    let mut lost: Option<f64> = None;
    let mut absent: Option<f64> = None;
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
        let want_std = q.gamma > 0;
        let paper = q.estimator == Estimator::Paper;
        let m = map.m as usize;
        let ps = flow_sums(&sv, m, r0, want_std && paper);
        let pr = flow_sums(&rv, m, r0, want_std && paper);
        let (cs, cr) = if same_n {
            (ps.raw_counts, pr.raw_counts)
        } else {
            (
                sv.iter().map(|e| e.head.packets).sum::<u64>(),
                rv.iter().map(|e| e.head.packets).sum::<u64>(),
            )
        };
        if cs != cr {
            let d = cs as f64 - cr as f64;
            lost = Some(lost.map_or(d, |l: f64| l.min(d)));
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
        let mean = if paper {
            (pr.t - ps.t) / p
        } else {
            (pr.raw_t - ps.raw_t) / p
        };
        out.mean_ns = Some(mean);
        out.packets = Some(ps.p.max(0.0));
        if q.confidence > 0.0 {
            let (num, den) = if paper {
                (pr.t - ps.t, ps.p)
            } else {
                (pr.raw_t - ps.raw_t, ps.raw_counts as f64)
            };
            let noise = Noise {
                sender: &sv,
                receiver: &rv,
                flow_hash: fh,
                map: &map,
                r0,
                paper,
                same_n,
            };
            match noise.interval(num, den, q.confidence) {
                Ok((lo, hi, kept)) => {
                    out.mean_interval_ns = Some((lo, hi));
                    out.noise_draws = kept;
                }
                Err(why) => out.notes.push(format!("no interval for the mean: {why}")),
            }
        }
        if want_std {
            let seed = mix(fh ^ map.seed ^ 0x7669_7274);
            let (ws, wr) = if paper {
                (&ps.w, &pr.w)
            } else {
                (&ps.a, &pr.a)
            };
            let f = virtual_repetitions(ws, wr, q.gamma, seed);
            let var = f / p - mean * mean;
            if var < 0.0 {
                out.notes.push(format!(
                    "the variance estimate is negative ({var:.3e} ns²): std taken as 0"
                ));
            }
            out.std_ns = Some(var.max(0.0).sqrt());
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
    out.notes.push(match (absent, lost) {
        (Some(p), None) => {
            out.packets = Some(p.max(0.0));
            out.lost = Some(0.0);
            format!("the flow's packet estimate is {p:.2}: it is absent from these epochs")
        }
        (_, Some(l)) => format!(
            "the flow's counters disagree in every vector where it is present ({l} packets lost at best): no estimate"
        ),
        (None, None) => "no vector has epochs at both points".into(),
    });
    Ok(out)
}

/// What the noise blocks of one vector's epochs at both points say about a flow's foreign
/// content (module doc, "The confidence interval").
struct Noise<'a> {
    sender: &'a [&'a FlowEpoch],
    receiver: &'a [&'a FlowEpoch],
    flow_hash: u64,
    map: &'a Mapping,
    r0: u64,
    paper: bool,
    same_n: bool,
}

impl Noise<'_> {
    /// Each usable block position's part in the estimator's numerator and denominator, and in
    /// the sender's minus the receiver's packet counts.
    fn cells(&self) -> Result<Vec<(f64, f64, i64)>, String> {
        let all = || self.sender.iter().chain(self.receiver);
        let len = all().map(|e| e.noise.len()).min().unwrap_or(0);
        if len == 0 {
            return Err("the epochs were read without their noise blocks".into());
        }
        let m = self.map.m as usize;
        // (num, den, diff) per position, and positions holding one of the flow's own cells
        let mut acc = vec![(0.0f64, 0.0f64, 0i64); len];
        let mut own = vec![false; len];
        for (point, sign) in [(self.sender, -1.0), (self.receiver, 1.0)] {
            for fe in point {
                let e = &fe.head;
                let n = e.n as usize;
                let start = super::epoch::noise_start(self.flow_hash, n);
                for j in 0..m {
                    let k = (self.map.index(self.flow_hash, j, n) + n - start) % n;
                    if k < len {
                        own[k] = true;
                    }
                }
                let (nf, mf) = (n as f64, m as f64);
                let unit = e.unit_ns as f64;
                let shift = e.base_ns as f64 - self.r0 as f64;
                let a_tot = unit * e.sum as f64 + shift * e.packets as f64;
                for (k, &(s, c)) in fe.noise[..len].iter().enumerate() {
                    let a = unit * s as f64 + shift * c as f64;
                    let (dn, dd) = if self.paper {
                        // Theorem 2, one cell: (n·A[k] − A_tot)/(n − m)
                        (
                            (nf * a - a_tot) / (nf - mf),
                            (nf * c as f64 - e.packets as f64) / (nf - mf),
                        )
                    } else {
                        (a, c as f64)
                    };
                    let x = &mut acc[k];
                    x.0 += sign * dn;
                    if sign < 0.0 {
                        x.1 += dd;
                        x.2 += c as i64;
                    } else {
                        x.2 -= c as i64;
                    }
                }
            }
        }
        let usable: Vec<(f64, f64, i64)> = acc
            .into_iter()
            .zip(own)
            .filter(|(_, own)| !own)
            .map(|((num, den, diff), _)| (num, den, if self.same_n { diff } else { 0 }))
            .collect();
        if usable.len() < 4 * m {
            return Err(format!(
                "a noise block of {} cells is too small for subvectors of {m}",
                usable.len()
            ));
        }
        Ok(usable)
    }

    /// The interval at confidence `c` from the flow's numerator and denominator, and the
    /// draws kept: the `μ` a two-sided test of level `1 − c` does not reject (module doc).
    fn interval(&self, num: f64, den: f64, c: f64) -> Result<(f64, f64, usize), String> {
        let cells = self.cells()?;
        let m = self.map.m as usize;
        let mut rng = Pcg64Mcg::seed_from_u64(mix(self.flow_hash ^ self.map.seed ^ 0x6e6f_6973));
        // each agreeing draw as (a, c): its e_b < e_f(μ) exactly when μ·a < c
        let mut draws = Vec::with_capacity(NOISE_DRAWS);
        let mut disagree = 0usize;
        for _ in 0..NOISE_DRAWS {
            let (mut f, mut g, mut d) = (0.0, 0.0, 0i64);
            for _ in 0..m {
                let x = cells[rng.random_range(0..cells.len())];
                f += x.0;
                g += x.1;
                d += x.2;
            }
            if d != 0 {
                disagree += 1;
            } else {
                draws.push((den - g, num - f));
            }
        }
        let tail = (1.0 - c) / 2.0;
        // at least 20 draws beyond each end, so an end is not a single draw
        let need = ((20.0 / tail).ceil() as usize)
            .min(NOISE_DRAWS / 4)
            .max(100);
        if draws.len() < need {
            return Err(format!(
                "{} of {NOISE_DRAWS} noise draws have packet counts that differ between the points: the flow's counters are mostly traffic only one point saw",
                disagree
            ));
        }
        let Some((lo, hi)) = accepted(&draws, tail) else {
            return Err(
                "the noise could hide the flow entirely (the interval is unbounded)".into(),
            );
        };
        // each point floors a timestamp to its unit, so every delay in the counters is off by
        // less than the larger unit, and so is their mean: certain, added whole
        let unit = self
            .sender
            .iter()
            .chain(self.receiver)
            .map(|e| e.head.unit_ns)
            .max()
            .unwrap_or(0) as f64;
        Ok((lo - unit, hi + unit, draws.len()))
    }
}

/// The hull of the `μ` that a two-sided test at `tail` on each side accepts, given draws
/// `(a, c)` of `den − G_b` and `num − F_b`: under `μ`, draw `b`'s foreign part falls below the
/// flow's (`F_b − μG_b < num − μ·den`) exactly when `μ·a < c`. `μ` is rejected when more than
/// `(1 − tail)` of the draws fall strictly below the flow's, or strictly above (ties count for
/// `μ`: conservative where draws repeat, as empty subvectors do). `None` when the accepted set
/// reaches ±∞.
pub(crate) fn accepted(draws: &[(f64, f64)], tail: f64) -> Option<(f64, f64)> {
    let (mut pos, mut neg) = (Vec::new(), Vec::new());
    let (mut flat_below, mut flat_above) = (0usize, 0usize);
    for &(a, c) in draws {
        if a > 0.0 {
            pos.push(c / a);
        } else if a < 0.0 {
            neg.push(c / a);
        } else if c > 0.0 {
            flat_below += 1;
        } else if c < 0.0 {
            flat_above += 1;
        }
    }
    pos.sort_unstable_by(f64::total_cmp);
    neg.sort_unstable_by(f64::total_cmp);
    let limit = (1.0 - tail) * draws.len() as f64;
    let lt = |v: &[f64], x: f64| v.partition_point(|&y| y < x);
    let gt = |v: &[f64], x: f64| v.len() - v.partition_point(|&y| y <= x);
    let ok = |mu: f64| {
        // a > 0: below when μ < c/a; a < 0: below when μ > c/a
        let below = gt(&pos, mu) + lt(&neg, mu) + flat_below;
        let above = lt(&pos, mu) + gt(&neg, mu) + flat_above;
        below as f64 <= limit && above as f64 <= limit
    };
    let mut xs: Vec<f64> = pos.iter().chain(&neg).copied().collect();
    xs.sort_unstable_by(f64::total_cmp);
    xs.dedup();
    let (first, last) = (*xs.first()?, *xs.last()?);
    // beyond every crossing, the counts are those of ±∞
    if ok(first - 1.0 - first.abs()) || ok(last + 1.0 + last.abs()) {
        return None;
    }
    let mut lo: Option<f64> = None;
    let mut hi = f64::NAN;
    for (i, &x) in xs.iter().enumerate() {
        let between = xs.get(i + 1).map(|&y| 0.5 * (x + y));
        for mu in std::iter::once(x).chain(between) {
            if ok(mu) {
                lo.get_or_insert(mu);
                hi = mu;
            }
        }
    }
    // an accepted open segment reaches its crossings
    let lo = lo?;
    let widen = |mu: f64, dir: f64| -> f64 {
        let i = xs.partition_point(|&y| y < mu);
        match (dir < 0.0, xs.get(i)) {
            (true, Some(&y)) if y == mu => y,
            (true, _) => xs[i.saturating_sub(1)],
            (false, Some(&y)) => y,
            (false, None) => mu,
        }
    };
    Some((widen(lo, -1.0), widen(hi, 1.0)))
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
    est.notes.push(
        "no vector holds the same number of packets at both points: no aggregate mean".into(),
    );
    Ok(est)
}
