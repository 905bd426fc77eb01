//! `owl experiment tails` (issue 15): one-way delay quantiles from two-point synopses — the
//! p99 and p99.9 error and the coverage of their stated 95 % intervals against the bits per
//! packet that cross the network, for `sample` (coordinated sampling at budgets of 0.1 to 16
//! bits a packet, its capacity sized by the expected bits a sample for the trace's span;
//! `sample-us` the same with timestamps shipped in microseconds), `opa-wavelet` (the paper's
//! configuration) and `opa` (lossless), on four delay models with loss and reordering.
//!
//! The traces: Poisson arrivals at 1 Mpps (random identities), uniform loss 10⁻³, and 10⁻⁴ of
//! the delivered packets overtaken by 1 to 3 later ones; R sees the packets in sending order
//! but for those. The delay models:
//!
//! - `weibull`: Weibull of mean 100 µs and shape 0.6 drawn per packet (LDA §IV, OPA §VII-A);
//! - `pareto`: Pareto of mean 100 µs and shape 2.5 (heavy tail, finite variance);
//! - `bimodal`: 95 % Weibull of mean 40 µs (shape 1.5), 5 % of mean 1 ms (shape 1.5) — two
//!   paths or a slow path for a class;
//! - `fifo`: a FIFO queue at load 0.9 (Lindley's recursion: exponential service of mean 0.9 µs
//!   at 1 Mpps) behind a 20 µs link — no packet overtakes another but the reordered ones.
//!
//! The truth is each delivered packet's delay; its quantiles are nearest-rank over them, as
//! the methods report theirs. Bits per packet are the bytes each estimate says cross the
//! network, over the packets S sent.

use std::path::PathBuf;

use anyhow::{Result, anyhow};
use owl_core::PacketRecord;
use owl_core::method::{Estimate, Method, Role};
use owl_core::opa::{Config as OpaConfig, OpaMethod};
use owl_core::sample::{self, SampleMethod};
use owl_core::stats::nearest_rank;
use owl_trace::sim::DelayModel;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use super::opa::searched;
use super::{Ctx, Experiment, Panel, Series, overtake, plot_png, write_csv};

pub const TAILS: Experiment = Experiment {
    name: "tails",
    summary: "Tails: p99/p99.9 error and 95 % interval coverage vs bits per packet (0.1-16) of sample, opa-wavelet and opa on Weibull 0.6, Pareto, bimodal and FIFO-queue delays with loss and reordering",
    files: "tails.csv, tails-summary.csv, tails.png, tails-coverage.csv",
    run: tails,
};

/// Packets per second.
const RATE_PPS: f64 = 1e6;
/// Loss rate and fraction of delivered packets reordered.
const LOSS: f64 = 1e-3;
const REORDER: f64 = 1e-4;
/// `sample`'s budgets, bits per packet sent.
const SAMPLE_BITS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0];

/// A delay model of the experiment.
#[derive(Clone, Copy, Debug)]
enum Model {
    Weibull,
    Pareto,
    Bimodal,
    Fifo,
}

impl Model {
    const ALL: [Model; 4] = [Model::Weibull, Model::Pareto, Model::Bimodal, Model::Fifo];
    fn name(self) -> &'static str {
        match self {
            Model::Weibull => "weibull",
            Model::Pareto => "pareto",
            Model::Bimodal => "bimodal",
            Model::Fifo => "fifo",
        }
    }
}

/// Both points' records and the true delays of the delivered packets, sorted.
struct Trace {
    sender: Vec<PacketRecord>,
    receiver: Vec<PacketRecord>,
    delays: Vec<i64>,
}

fn trace(model: Model, packets: usize, seed: u64) -> Result<Trace> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let check = |m: DelayModel| -> Result<DelayModel> {
        m.validate().map_err(|e| anyhow!("{e}"))?;
        Ok(m)
    };
    let weibull = check(DelayModel::weibull_with_mean(100_000.0, 0.6))?.sampler();
    let pareto = check(DelayModel::pareto_with_mean(100_000.0, 2.5))?.sampler();
    let fast = check(DelayModel::weibull_with_mean(40_000.0, 1.5))?.sampler();
    let slow = check(DelayModel::weibull_with_mean(1_000_000.0, 1.5))?.sampler();
    let mut t = 1_767_225_600_000_000_000u64;
    let mut sender = Vec::with_capacity(packets);
    let mut receiver = Vec::with_capacity(packets);
    let mut delays = Vec::with_capacity(packets);
    // FIFO queue: the waiting time of the previous packet and its arrival
    let (mut wait_ns, mut last_t) = (0.0f64, t);
    for _ in 0..packets {
        let u: f64 = rng.random();
        t += ((-(1.0 - u).ln() * 1e9 / RATE_PPS) as u64).max(1);
        let id: u64 = rng.random();
        sender.push(PacketRecord {
            ts_ns: t,
            id,
            ..Default::default()
        });
        let d = match model {
            Model::Weibull => weibull.sample(&mut rng) as f64,
            Model::Pareto => pareto.sample(&mut rng) as f64,
            Model::Bimodal => {
                if rng.random_bool(0.05) {
                    slow.sample(&mut rng) as f64
                } else {
                    fast.sample(&mut rng) as f64
                }
            }
            Model::Fifo => {
                // Lindley: W_n = max(0, W_{n−1} + S_{n−1} − A_n); delay = W + S + link
                let service = -(1.0 - rng.random::<f64>()).ln() * 900.0;
                wait_ns = (wait_ns - (t - last_t) as f64).max(0.0);
                last_t = t;
                let d = wait_ns + service + 20_000.0;
                wait_ns += service;
                d
            }
        };
        let d = (d.round() as i64).max(1);
        if rng.random_bool(LOSS) {
            continue;
        }
        delays.push(d);
        receiver.push(PacketRecord {
            ts_ns: t + d as u64,
            id,
            ..Default::default()
        });
    }
    // reordering: a packet overtaken by 1 to 3 later ones (arrival order only)
    overtake(&mut receiver, REORDER, &mut rng);
    delays.sort_unstable();
    Ok(Trace {
        sender,
        receiver,
        delays,
    })
}

fn estimate(m: &dyn Method, t: &Trace) -> Result<Estimate> {
    let mut s = m.new_point(Role::Sender);
    let mut r = m.new_point(Role::Receiver);
    s.record_batch(&t.sender);
    r.record_batch(&t.receiver);
    m.estimate(s, r).map_err(|e| anyhow!("{}: {e}", m.name()))
}

/// The hash seed of arm `i` in the run of trace seed `seed`: distinct for every (run, arm).
fn arm_seed(seed: u64, i: usize) -> u64 {
    seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i as u64 + 1).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
}

/// One method at one budget: its label and how it is built for a trace of `packets`.
struct Arm {
    method: &'static str,
    /// The budget asked for, bits a packet (`sample`), or `None` (OPA: what it takes).
    budget_bits: Option<f64>,
}

/// `sample` with timestamps shipped in microseconds (what a capture of microsecond
/// resolution ships anyway), its intervals widened by 999 ns.
const SAMPLE_US: &str = "sample-us";

/// `arm` built for a trace of `packets`; `seed` seeds its hash, and each arm of a run is given
/// its own ([`arm_seed`]): arms sharing a hash would sample nested subsets of one trace, and
/// their interval coverages would not be independent trials.
fn build(arm: &Arm, packets: usize, seed: u64) -> Result<Box<dyn Method>> {
    Ok(match arm.method {
        "sample" | SAMPLE_US => {
            let bits = arm.budget_bits.expect("sample has a budget");
            let resolution = if arm.method == SAMPLE_US { 1_000 } else { 1 };
            let cfg = sample::Config::new(2, seed)?.with_resolution_ns(resolution)?;
            // the samples span the trace: its duration at the rate; a sample's cells grow with
            // the capacity (the false-match target), so the largest capacity that fits is found
            let span_ns = (packets as f64 / RATE_PPS * 1e9) as u64;
            let payload = bits * packets as f64 - 8.0 * sample::HEADER_BYTES as f64;
            let cfg = cfg.for_payload_bits(payload, span_ns).unwrap_or(cfg);
            Box::new(SampleMethod::new(cfg))
        }
        "opa-wavelet" => Box::new(OpaMethod::new(searched(OpaConfig::wavelet(seed)))?),
        "opa" => Box::new(OpaMethod::new(searched(OpaConfig::lossless(seed)))?),
        other => return Err(anyhow!("no arm {other}")),
    })
}

fn tails(ctx: &Ctx) -> Result<Vec<PathBuf>> {
    let packets = if ctx.quick { 20_000 } else { 1_000_000 };
    let runs = ctx.runs_or(20, 2);
    let mut arms: Vec<Arm> = ["sample", SAMPLE_US]
        .into_iter()
        .flat_map(|method| {
            SAMPLE_BITS.iter().map(move |&b| Arm {
                method,
                budget_bits: Some(b),
            })
        })
        .collect();
    arms.push(Arm {
        method: "opa-wavelet",
        budget_bits: None,
    });
    arms.push(Arm {
        method: "opa",
        budget_bits: None,
    });
    ctx.progress
        .set_length((Model::ALL.len() * runs * arms.len()) as u64);
    let quantiles = [(0.99, "p99"), (0.999, "p99.9")];
    let mut rows = Vec::new();
    for model in Model::ALL {
        for run in 0..runs {
            let seed = ctx.seed + run as u64;
            let t = trace(model, packets, seed)?;
            for (i, arm) in arms.iter().enumerate() {
                let m = build(arm, packets, arm_seed(seed, i))?;
                let e = estimate(&*m, &t)?;
                let bits = 8.0 * e.bytes as f64 / t.sender.len() as f64;
                let q = e.quantiles.as_ref();
                for (p, label) in quantiles {
                    let truth = nearest_rank(&t.delays, p) as f64;
                    let (est, ci) = match (q, label) {
                        (Some(q), "p99") => (Some(q.p99_ns), q.p99_ci95_ns),
                        (Some(q), _) => (Some(q.p999_ns), q.p999_ci95_ns),
                        (None, _) => (None, None),
                    };
                    let rel = est.map(|v| (v - truth) / truth);
                    let covered = ci.map(|[lo, hi]| lo <= truth && truth <= hi);
                    let f = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
                    rows.push(vec![
                        model.name().to_string(),
                        arm.method.to_string(),
                        f(arm.budget_bits),
                        run.to_string(),
                        bits.to_string(),
                        label.to_string(),
                        truth.to_string(),
                        f(est),
                        f(rel),
                        f(ci.map(|c| c[0])),
                        f(ci.map(|c| c[1])),
                        covered.map(|c| (c as u8).to_string()).unwrap_or_default(),
                        e.samples.to_string(),
                    ]);
                }
                ctx.progress.inc(1);
            }
        }
    }
    let csv = ctx.path("tails.csv");
    write_csv(
        &csv,
        &[
            "model",
            "method",
            "budget_bits",
            "run",
            "bits_per_packet",
            "quantile",
            "truth_ns",
            "estimate_ns",
            "relative_error",
            "ci95_lo_ns",
            "ci95_hi_ns",
            "covered",
            "samples",
        ],
        &rows,
    )?;
    let summary = summarise(&rows);
    let sum_csv = ctx.path("tails-summary.csv");
    write_csv(
        &sum_csv,
        &[
            "model",
            "method",
            "budget_bits",
            "quantile",
            "runs",
            "bits_per_packet",
            "median_abs_relative_error",
            "p95_abs_relative_error",
            "within_5pct",
            "within_1pct",
            "intervals_given",
            "coverage",
        ],
        &summary.iter().map(Summary::row).collect::<Vec<_>>(),
    )?;
    // the frontier: 95th percentile of |p99 error| over runs against bits a packet
    let png = ctx.path("tails.png");
    let panels: Vec<Panel> = Model::ALL
        .iter()
        .map(|m| {
            let mut series: Vec<Series> = ["sample", SAMPLE_US, "opa-wavelet", "opa"]
                .iter()
                .map(|method| Series {
                    name: method.to_string(),
                    points: summary
                        .iter()
                        .filter(|s| s.model == m.name() && s.method == *method && s.q == "p99")
                        // an exact quantile (0) is drawn at the axis' floor
                        .map(|s| (s.bits, s.p95_abs.max(EXACT_FLOOR)))
                        .collect(),
                    err: None,
                })
                .filter(|s| !s.points.is_empty())
                .collect();
            if let Some(floor) = super::plot::exact_floor(&series, EXACT_FLOOR) {
                series.push(floor);
            }
            Panel {
                title: format!("{}: p99, 95th pct of |error| over runs", m.name()),
                x_label: "bits per packet crossing the network".into(),
                y_label: "|relative error| of p99".into(),
                log_x: true,
                log_y: true,
                series,
            }
        })
        .collect();
    plot_png(&png, &panels)?;
    let cov = coverage(ctx)?;
    Ok(vec![csv, sum_csv, png, cov])
}

/// Where an exact quantile (error 0, which a log axis cannot show) is drawn.
const EXACT_FLOOR: f64 = 1e-5;

/// `sample`'s budgets in the coverage study, bits a packet.
const COVERAGE_BITS: &[f64] = &[1.0, 4.0];

/// The coverage of `sample`'s stated 95 % intervals over many independent seeds (a new trace
/// and a new hash each), where the frontier's 20 runs can only say "about 95 %": for each
/// model, budget and quantile, the share of seeds whose interval holds the true quantile, with
/// the Wilson 95 % interval of that share. Intervals of 100 000 packets (1 bit a packet: about
/// 2 500 samples, too few for a p99.9 interval; 4 bits: about 10 000).
fn coverage(ctx: &Ctx) -> Result<PathBuf> {
    let packets = if ctx.quick { 20_000 } else { 100_000 };
    let seeds = if ctx.quick { 8 } else { 400 };
    let quantiles = [(0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99.9")];
    // (model, budget, quantile) → (intervals given, covered)
    let mut tally = vec![[0usize; 2]; Model::ALL.len() * COVERAGE_BITS.len() * quantiles.len()];
    for (mi, model) in Model::ALL.into_iter().enumerate() {
        for i in 0..seeds {
            let seed = ctx.seed.wrapping_add(1_000_000 + i as u64);
            let t = trace(model, packets, seed)?;
            for (bi, &bits) in COVERAGE_BITS.iter().enumerate() {
                let arm = Arm {
                    method: "sample",
                    budget_bits: Some(bits),
                };
                let m = build(&arm, packets, arm_seed(seed, bi))?;
                let Some(q) = estimate(&*m, &t)?.quantiles else {
                    continue;
                };
                let cis = [q.p50_ci95_ns, q.p90_ci95_ns, q.p99_ci95_ns, q.p999_ci95_ns];
                for (qi, ((p, _), ci)) in quantiles.iter().zip(cis).enumerate() {
                    let Some([lo, hi]) = ci else { continue };
                    let truth = nearest_rank(&t.delays, *p) as f64;
                    let cell = &mut tally[(mi * COVERAGE_BITS.len() + bi) * quantiles.len() + qi];
                    cell[0] += 1;
                    cell[1] += usize::from(lo <= truth && truth <= hi);
                }
            }
        }
    }
    let mut rows = Vec::new();
    for (mi, model) in Model::ALL.into_iter().enumerate() {
        for (bi, bits) in COVERAGE_BITS.iter().enumerate() {
            for (qi, (_, label)) in quantiles.iter().enumerate() {
                let [given, covered] =
                    tally[(mi * COVERAGE_BITS.len() + bi) * quantiles.len() + qi];
                let (rate, lo, hi) = wilson(covered, given);
                rows.push(vec![
                    model.name().to_string(),
                    "sample".to_string(),
                    bits.to_string(),
                    label.to_string(),
                    packets.to_string(),
                    seeds.to_string(),
                    given.to_string(),
                    covered.to_string(),
                    rate.map(|r| r.to_string()).unwrap_or_default(),
                    lo.map(|r| r.to_string()).unwrap_or_default(),
                    hi.map(|r| r.to_string()).unwrap_or_default(),
                ]);
            }
        }
    }
    let path = ctx.path("tails-coverage.csv");
    write_csv(
        &path,
        &[
            "model",
            "method",
            "budget_bits",
            "quantile",
            "packets",
            "seeds",
            "intervals_given",
            "covered",
            "coverage",
            "coverage_wilson95_lo",
            "coverage_wilson95_hi",
        ],
        &rows,
    )?;
    Ok(path)
}

/// `k` of `n` and the Wilson score 95 % interval of the proportion (`None` when `n` = 0).
fn wilson(k: usize, n: usize) -> (Option<f64>, Option<f64>, Option<f64>) {
    if n == 0 {
        return (None, None, None);
    }
    let (k, n, z) = (k as f64, n as f64, 1.959_963_984_540_054);
    let p = k / n;
    let centre = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    (Some(p), Some(centre - half), Some(centre + half))
}

/// One (model, method, budget, quantile) over its runs.
struct Summary {
    model: String,
    method: String,
    budget: String,
    q: String,
    runs: usize,
    bits: f64,
    median_abs: f64,
    p95_abs: f64,
    within5: f64,
    within1: f64,
    given: usize,
    coverage: Option<f64>,
}

impl Summary {
    fn row(&self) -> Vec<String> {
        vec![
            self.model.clone(),
            self.method.clone(),
            self.budget.clone(),
            self.q.clone(),
            self.runs.to_string(),
            self.bits.to_string(),
            self.median_abs.to_string(),
            self.p95_abs.to_string(),
            self.within5.to_string(),
            self.within1.to_string(),
            self.given.to_string(),
            self.coverage.map(|c| c.to_string()).unwrap_or_default(),
        ]
    }
}

fn summarise(rows: &[Vec<String>]) -> Vec<Summary> {
    let mut keys: Vec<(String, String, String, String)> = Vec::new();
    for r in rows {
        let k = (r[0].clone(), r[1].clone(), r[2].clone(), r[5].clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .map(|(model, method, budget, q)| {
            let rs: Vec<&Vec<String>> = rows
                .iter()
                .filter(|r| r[0] == model && r[1] == method && r[2] == budget && r[5] == q)
                .collect();
            let num = |s: &str| s.parse::<f64>().ok();
            let mut abs: Vec<f64> = rs
                .iter()
                .map(|r| num(&r[8]).map_or(f64::INFINITY, f64::abs))
                .collect();
            abs.sort_by(f64::total_cmp);
            let at = |p: f64| abs[((p * abs.len() as f64).ceil() as usize).clamp(1, abs.len()) - 1];
            let frac = |x: f64| abs.iter().filter(|&&a| a <= x).count() as f64 / abs.len() as f64;
            let covered: Vec<bool> = rs
                .iter()
                .filter_map(|r| num(&r[11]))
                .map(|c| c == 1.0)
                .collect();
            Summary {
                bits: rs.iter().filter_map(|r| num(&r[4])).sum::<f64>() / rs.len() as f64,
                runs: rs.len(),
                median_abs: at(0.5),
                p95_abs: at(0.95),
                within5: frac(0.05),
                within1: frac(0.01),
                given: covered.len(),
                coverage: (!covered.is_empty())
                    .then(|| covered.iter().filter(|&&c| c).count() as f64 / covered.len() as f64),
                model,
                method,
                budget,
                q,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_interval_matches_the_textbook() {
        // 95 of 100: 0.8883 to 0.9785 (Wilson 1927, as tabulated by Newcombe 1998)
        let (p, lo, hi) = wilson(95, 100);
        assert_eq!(p, Some(0.95));
        assert!((lo.unwrap() - 0.8883).abs() < 1e-4, "{lo:?}");
        assert!((hi.unwrap() - 0.9785).abs() < 1e-4, "{hi:?}");
        assert_eq!(wilson(0, 0), (None, None, None));
    }

    #[test]
    fn traces_have_their_loss_and_the_fifo_keeps_order() {
        for model in Model::ALL {
            let t = trace(model, 50_000, 3).unwrap();
            let lost = t.sender.len() - t.receiver.len();
            // 50 expected; Poisson sd ≈ 7
            assert!((20..=90).contains(&lost), "{model:?}: {lost} lost");
            assert_eq!(t.delays.len(), t.receiver.len());
            assert!(t.delays[0] >= 1);
        }
        // FIFO: arrival times increase along sending order (reordering aside)
        let t = trace(Model::Fifo, 20_000, 1).unwrap();
        let inversions = t
            .receiver
            .windows(2)
            .filter(|w| w[1].ts_ns < w[0].ts_ns)
            .count();
        assert!(inversions <= 10, "{inversions}");
    }

    #[test]
    fn tails_quick_runs_and_opa_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = super::super::testing::quick_ctx(dir.path());
        let files = tails(&ctx).unwrap();
        assert_eq!(files.len(), 4);
        // four panels in a 2×2 grid a screen shows whole, not a 2560×480 strip
        let png = std::fs::read(&files[2]).unwrap();
        let be = |k: usize| u32::from_be_bytes(png[k..k + 4].try_into().unwrap());
        assert_eq!((be(16), be(20)), (1280, 960));
        // the coverage study: every model, budget and quantile, a share of 8 quick seeds
        let cov = super::super::testing::csv_rows(&files[3]);
        assert_eq!(cov.len(), 4 * 2 * 4);
        for r in cov.iter().filter(|r| &r[3] == "p50") {
            assert_eq!(&r[6], "8", "{r:?}");
            let c: f64 = r[8].parse().unwrap();
            assert!(c >= 0.5, "{r:?}");
        }
        let rows = super::super::testing::csv_rows(&files[1]);
        // opa places every packet of these paths: p99 and p99.9 exact, intervals the point
        let opa: Vec<_> = rows.iter().filter(|r| &r[1] == "opa").collect();
        assert_eq!(opa.len(), 4 * 2);
        for r in opa {
            assert_eq!(&r[6], "0", "{r:?}");
            assert_eq!(&r[11], "1", "{r:?}");
        }
        // sample's budget is what crosses: 1 and 16 bits a packet asked, within 10 % measured
        let budgets = rows
            .iter()
            .filter(|r| r[1].starts_with("sample") && (&r[2] == "1" || &r[2] == "16"));
        assert_eq!(budgets.clone().count(), 4 * 2 * 2 * 2);
        for r in budgets {
            let (asked, bits): (f64, f64) = (r[2].parse().unwrap(), r[5].parse().unwrap());
            assert!((bits - asked).abs() < 0.1 * asked, "{r:?}");
        }
    }
}
