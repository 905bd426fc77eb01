//! LDS §5 on simulated traces: `lds-accuracy` (Fig. 9/10), `lds-loss` (Fig. 11),
//! `lds-weights` (Fig. 12).
//!
//! # The trace
//!
//! The paper's trace (7.76 M packets, ~146 000 flows, 27 kpackets/s, §5) is replaced by the
//! simulator's [`TrafficConfig::lds_trace`] (Pareto flow sizes fitted to what §3 and §5 say of
//! it), through a path whose delays are *not* temporally correlated across flows — the case
//! LDS was built for (§1) and what the paper's inbound traffic shows (two delay modes, Fig. 8):
//! two priority queues (70 % of the flows in a queue of Weibull delays with mean 100 µs, 30 % in
//! one with mean 500 µs, shape 0.7 both) and 4 ECMP paths adding 0, 50, 100 or 150 µs. Each
//! flow is pinned to one queue and one path by hash, so flows' mean delays spread over
//! 100–650 µs and neighbouring packets of other flows say nothing about a flow's delay.
//! `--quick` scales the trace (and every sketch) to 2 % (155 000 packets, 2 920 flows).
//!
//! # Scoring
//!
//! A flow's error is `|estimate − truth| / truth` of its mean delay, the truth being the exact
//! per-packet match. A method that gives a flow no estimate scores 1 (100 %) for it (LDS §5.1
//! gives MPE's unsampled flows the aggregate mean "instead of simply assigning an error of 1";
//! MPE does that itself here, so only LDS can be missing). Bins follow Fig. 10: 1–9, 10–99,
//! 100–499, 500–999, 1000–9999 and ≥ 10 000 packets at the sender.

use std::path::PathBuf;

use anyhow::{Context, Result};
use owl_core::exact::{FlowTruth, Matcher, TruthOptions};
use owl_core::lds::{Config as LdsConfig, LdsMethod, Selection, Weights};
use owl_core::method::{Method, Role};
use owl_core::stats::relative_error;
use owl_core::{FlowKey, PacketRecord, mpe, rli};
use owl_trace::identity::DEFAULT_IDENTITY_SEED;
use owl_trace::sim::{
    DelayModel, LossModel, PathConfig, SimConfig, Simulation, TrafficConfig, TrafficSource,
    parse_ecmp,
};

use super::{Ctx, Panel, Series, plot_png, write_csv};

/// Flow-size bins of Fig. 10 (packets at the sender), `[lo, hi)`.
pub const FIG10_BINS: [(u64, u64, &str); 6] = [
    (1, 10, "1-9"),
    (10, 100, "10-99"),
    (100, 500, "100-499"),
    (500, 1_000, "500-999"),
    (1_000, 10_000, "1000-9999"),
    (10_000, u64::MAX, ">=10000"),
];

/// The trace scale: the paper's size, or 2 % with `--quick`.
fn scale(ctx: &Ctx) -> f64 {
    if ctx.quick { 0.02 } else { 1.0 }
}

/// Columns of a paper sketch size at this scale (at least `k`).
fn columns(paper: usize, scale: f64, k: usize) -> usize {
    ((paper as f64 * scale).round() as usize).max(k)
}

/// The path of every LDS experiment: two priority classes and four ECMP paths. `spread`
/// scales how far apart flows' mean delays are: the second queue's mean is
/// `100 µs + spread·400 µs` and the paths add `0 … spread·150 µs` (`spread = 1` is the
/// experiments' path; 0 would give every flow the same mean delay).
pub fn uncorrelated_path(loss: f64, spread: f64) -> PathConfig {
    PathConfig {
        delay: DelayModel::weibull_with_mean(100_000.0, 0.7),
        class: Some((
            DelayModel::weibull_with_mean(100_000.0 + spread * 400_000.0, 0.7),
            0.3,
        )),
        ecmp: parse_ecmp(&format!("4:{}ns", (spread * 150_000.0).round()))
            .expect("a valid ECMP spec"),
        loss: if loss > 0.0 {
            LossModel::Uniform(loss)
        } else {
            LossModel::None
        },
        ..PathConfig::default()
    }
}

/// A simulated capture pair and its per-flow truth.
pub struct Trace {
    pub sender: Vec<PacketRecord>,
    pub receiver: Vec<PacketRecord>,
    /// Flows with at least one matched packet.
    pub flows: Vec<FlowTruth>,
    /// Mean delay of every matched packet.
    pub aggregate_mean: f64,
}

impl Trace {
    pub fn keys(&self) -> Vec<FlowKey> {
        self.flows.iter().map(|f| f.key).collect()
    }

    fn truth_mean(&self, i: usize) -> f64 {
        self.flows[i].delay.map(|d| d.mean_ns).unwrap_or(f64::NAN)
    }
}

/// Simulate the LDS trace at `scale` with uniform `loss` and the path's `spread`.
pub fn make_trace(scale: f64, seed: u64, loss: f64, spread: f64) -> Result<Trace> {
    let cfg = SimConfig {
        seed,
        traffic: TrafficSource::Synthetic(TrafficConfig::lds_trace(scale)),
        path: uncorrelated_path(loss, spread),
        snaplen: 128,
    };
    let sim = Simulation::run(&cfg).context("simulating the LDS trace")?;
    let (sender, receiver) = sim.records(DEFAULT_IDENTITY_SEED);
    drop(sim);
    let mut m = Matcher::new(TruthOptions {
        per_flow: true,
        ..Default::default()
    });
    m.reserve(sender.len());
    for r in &sender {
        m.add_sender(r)?;
    }
    for r in &receiver {
        m.add_receiver(r);
    }
    let t = m.finish();
    let flows: Vec<FlowTruth> = t.flows.into_iter().filter(|f| f.delay.is_some()).collect();
    Ok(Trace {
        sender,
        receiver,
        flows,
        aggregate_mean: t.delay.map(|d| d.mean_ns).unwrap_or(f64::NAN),
    })
}

/// Run a per-flow method over the trace: its mean estimate of every flow (in `trace.flows`
/// order), `None` where it gives none.
pub fn run_method(m: &dyn Method, t: &Trace) -> Result<Vec<Option<f64>>> {
    let mut a = m.new_point(Role::Sender);
    let mut b = m.new_point(Role::Receiver);
    for c in t.sender.chunks(4096) {
        a.record_batch(c);
    }
    for c in t.receiver.chunks(4096) {
        b.record_batch(c);
    }
    let est = m
        .estimate_flows(&*a, &*b, &t.keys())
        .context("method gives no per-flow estimates")??;
    Ok(est.into_iter().map(|e| e.mean_ns).collect())
}

/// Relative errors of estimates against the truth (a missing estimate scores 1).
pub fn errors(t: &Trace, est: &[Option<f64>]) -> Vec<f64> {
    est.iter()
        .enumerate()
        .map(|(i, e)| relative_error(*e, Some(t.truth_mean(i))).unwrap_or(1.0))
        .collect()
}

/// Nearest-rank quantile of unsorted values (`None` if empty).
pub fn quantile(v: &[f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = ((p * s.len() as f64).ceil() as usize).clamp(1, s.len());
    Some(s[rank - 1])
}

/// A CDF of errors on a log grid from 10⁻⁵ to 10 (points where it moves).
fn cdf(errs: &[f64]) -> Vec<(f64, f64)> {
    let mut s = errs.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len().max(1) as f64;
    (0..=36)
        .map(|i| {
            let x = 10f64.powf(-5.0 + i as f64 / 6.0);
            (x, s.partition_point(|&e| e <= x) as f64 / n)
        })
        .collect()
}

fn fmt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.6}")).unwrap_or_default()
}

/// One scored method of an experiment.
struct Scored {
    name: String,
    errs: Vec<f64>,
    /// Flows the method gave no estimate (scored 1).
    none: Vec<bool>,
}

fn score(t: &Trace, name: &str, est: &[Option<f64>]) -> Scored {
    Scored {
        name: name.into(),
        none: est.iter().map(|e| e.is_none()).collect(),
        errs: errors(t, est),
    }
}

fn lds(name: &str, cfg: LdsConfig) -> Result<LdsMethod> {
    Ok(LdsMethod::new(name, cfg)?)
}

/// `lds-accuracy`: Fig. 9 (CDF of per-flow relative error for flows > 1000 packets, > 100
/// packets, all) and Fig. 10 (median and 95th percentile by flow size): LDS of 1 750 × 4,
/// 17 500 × 4 and 175 000 × 4 cells (`k = 1`, every packet, α = 0.1, §5.1) against MPE at 1 %
/// and 10 %, RLI (1:300–1:10) and "every flow = the aggregate mean".
pub fn accuracy(ctx: &Ctx) -> Result<Vec<PathBuf>> {
    let sc = scale(ctx);
    let runs = ctx.runs_or(1, 1);
    let sizes = [1_750usize, 17_500, 175_000];
    let spreads = [0.125, 0.25, 0.5, 1.0];
    let steps = (runs * (1 + sizes.len() + 3) + spreads.len() * 2) as u64;
    ctx.progress.set_length(steps);
    let mut all: Vec<Scored> = Vec::new();
    let mut sent: Vec<u64> = Vec::new();
    let merge = |all: &mut Vec<Scored>, s: Scored| match all.iter_mut().find(|x| x.name == s.name) {
        Some(x) => {
            x.errs.extend(s.errs);
            x.none.extend(s.none);
        }
        None => all.push(s),
    };
    for run in 0..runs {
        let seed = ctx.seed + run as u64;
        ctx.progress
            .set_message(format!("lds-accuracy: trace {run}"));
        let t = make_trace(sc, seed, 0.0, 1.0)?;
        ctx.progress.inc(1);
        sent.extend(t.flows.iter().map(|f| f.sent));
        for &c in &sizes {
            let m = lds("lds", LdsConfig::single_bank(4, columns(c, sc, 1), seed))?;
            let name = format!("LDS {c}x4");
            merge(&mut all, score(&t, &name, &run_method(&m, &t)?));
            ctx.progress.inc(1);
        }
        for (name, rate) in [("MPE 10%", 0.1), ("MPE 1%", 0.01)] {
            let m = mpe::MpeMethod::new(name, mpe::Config { rate, seed })?;
            merge(&mut all, score(&t, name, &run_method(&m, &t)?));
            ctx.progress.inc(1);
        }
        let m = rli::RliMethod::new(rli::Config::paper(seed))?;
        merge(&mut all, score(&t, "RLI", &run_method(&m, &t)?));
        let agg: Vec<Option<f64>> = vec![Some(t.aggregate_mean); t.flows.len()];
        merge(&mut all, score(&t, "aggregate mean", &agg));
        ctx.progress.inc(1);
    }

    // Fig. 10: bins
    let mut rows = Vec::new();
    let mut med_series = Vec::new();
    let mut p95_series = Vec::new();
    for s in &all {
        let (mut med, mut p95) = (Vec::new(), Vec::new());
        for &(lo, hi, label) in &FIG10_BINS {
            let e: Vec<f64> = sent
                .iter()
                .zip(&s.errs)
                .filter(|(n, _)| (lo..hi).contains(*n))
                .map(|(_, e)| *e)
                .collect();
            let (m, p) = (quantile(&e, 0.5), quantile(&e, 0.95));
            rows.push(vec![
                s.name.clone(),
                label.to_string(),
                lo.to_string(),
                e.len().to_string(),
                fmt(m),
                fmt(p),
            ]);
            // log axes: errors below 10⁻⁴ (exact estimates) are drawn at 10⁻⁴
            if let (Some(m), Some(p)) = (m, p) {
                med.push((lo as f64, m.max(1e-4)));
                p95.push((lo as f64, p.max(1e-4)));
            }
        }
        med_series.push(Series {
            name: s.name.clone(),
            points: med,
            err: None,
        });
        p95_series.push(Series {
            name: s.name.clone(),
            points: p95,
            err: None,
        });
    }
    let csv = ctx.path("lds-accuracy.csv");
    write_csv(
        &csv,
        &[
            "method",
            "bin",
            "min_packets",
            "flows",
            "median_rel_err",
            "p95_rel_err",
        ],
        &rows,
    )?;

    // Fig. 9: CDFs
    // (label, flows with more packets than this)
    let subsets: [(&str, u64); 3] = [
        ("flows > 1000 packets", 1_000),
        ("flows > 100 packets", 100),
        ("all flows", 0),
    ];
    let mut cdf_rows = Vec::new();
    let mut panels = Vec::new();
    for (label, above) in subsets {
        let mut series = Vec::new();
        for s in &all {
            let e: Vec<f64> = sent
                .iter()
                .zip(&s.errs)
                .filter(|(n, _)| above == 0 || **n > above)
                .map(|(_, e)| *e)
                .collect();
            let c = cdf(&e);
            for &(x, y) in &c {
                cdf_rows.push(vec![
                    s.name.clone(),
                    label.into(),
                    format!("{x:.6e}"),
                    format!("{y:.6}"),
                ]);
            }
            series.push(Series {
                name: s.name.clone(),
                points: c,
                err: None,
            });
        }
        panels.push(Panel {
            title: format!("Fig. 9: {label}"),
            x_label: "relative error of the flow's mean delay".into(),
            y_label: "CDF (fraction of flows)".into(),
            log_x: true,
            log_y: false,
            series,
        });
    }
    let cdf_csv = ctx.path("lds-accuracy-cdf.csv");
    write_csv(&cdf_csv, &["method", "subset", "rel_err", "cdf"], &cdf_rows)?;
    let png = ctx.path("lds-accuracy.png");
    plot_png(&png, &panels)?;
    let bins_png = ctx.path("lds-accuracy-bins.png");
    plot_png(
        &bins_png,
        &[
            Panel {
                title: "Fig. 10: median relative error by flow size".into(),
                x_label: "flow size (packets, bin start)".into(),
                y_label: "median relative error".into(),
                log_x: true,
                log_y: true,
                series: med_series,
            },
            Panel {
                title: "Fig. 10: 95th percentile by flow size".into(),
                x_label: "flow size (packets, bin start)".into(),
                y_label: "95th-percentile relative error".into(),
                log_x: true,
                log_y: true,
                series: p95_series,
            },
        ],
    )?;
    let (spread_csv, spread_png) = spread_sweep(ctx, sc, &spreads)?;
    Ok(vec![csv, cdf_csv, png, bins_png, spread_csv, spread_png])
}

/// How LDS's error follows the spread of flows' mean delays: the 17 500 × 4 LDS and the
/// aggregate mean on the same trace with the path's spread scaled (see [`uncorrelated_path`]).
/// A collision mixes a flow with others, so LDS's error is a fraction of how far the others'
/// delays are — the spread — and shrinks with it; the paper's numbers (1.2 % median at
/// 500–999 packets) are a property of its trace's spread as much as of the sketch.
fn spread_sweep(ctx: &Ctx, sc: f64, spreads: &[f64]) -> Result<(PathBuf, PathBuf)> {
    let mut rows = Vec::new();
    let bins = &FIG10_BINS[2..];
    let mut lds_series: Vec<Series> = bins
        .iter()
        .map(|b| Series {
            name: format!("LDS 17500x4, {} pkts", b.2),
            points: Vec::new(),
            err: None,
        })
        .collect();
    let mut agg_series = Series {
        name: "aggregate mean, >=100 pkts".into(),
        points: Vec::new(),
        err: None,
    };
    for &spread in spreads {
        ctx.progress
            .set_message(format!("lds-accuracy: spread {spread}"));
        let t = make_trace(sc, ctx.seed, 0.0, spread)?;
        ctx.progress.inc(1);
        let m = lds(
            "lds",
            LdsConfig::single_bank(4, columns(17_500, sc, 1), ctx.seed),
        )?;
        let l = score(&t, "LDS 17500x4", &run_method(&m, &t)?);
        let a = score(
            &t,
            "aggregate mean",
            &vec![Some(t.aggregate_mean); t.flows.len()],
        );
        ctx.progress.inc(1);
        let sent: Vec<u64> = t.flows.iter().map(|f| f.sent).collect();
        let pick = |errs: &[f64], lo: u64, hi: u64| -> Vec<f64> {
            sent.iter()
                .zip(errs)
                .filter(|(n, _)| (lo..hi).contains(*n))
                .map(|(_, e)| *e)
                .collect()
        };
        for (i, &(lo, hi, label)) in bins.iter().enumerate() {
            for s in [&l, &a] {
                let e = pick(&s.errs, lo, hi);
                rows.push(vec![
                    spread.to_string(),
                    s.name.clone(),
                    label.into(),
                    e.len().to_string(),
                    fmt(quantile(&e, 0.5)),
                    fmt(quantile(&e, 0.95)),
                ]);
            }
            if let Some(m) = quantile(&pick(&l.errs, lo, hi), 0.5) {
                lds_series[i].points.push((spread, m.max(1e-4)));
            }
        }
        if let Some(m) = quantile(&pick(&a.errs, 100, u64::MAX), 0.5) {
            agg_series.points.push((spread, m));
        }
    }
    let csv = ctx.path("lds-accuracy-spread.csv");
    write_csv(
        &csv,
        &[
            "spread",
            "method",
            "bin",
            "flows",
            "median_rel_err",
            "p95_rel_err",
        ],
        &rows,
    )?;
    lds_series.push(agg_series);
    let png = ctx.path("lds-accuracy-spread.png");
    plot_png(
        &png,
        &[Panel {
            title: "median relative error vs spread of flows' mean delays".into(),
            x_label: "spread (1 = the experiments' path)".into(),
            y_label: "median relative error".into(),
            log_x: false,
            log_y: true,
            series: lds_series,
        }],
    )?;
    Ok((csv, png))
}

/// `lds-loss`: Fig. 11 — uniform loss of 0.1 %, 0.5 % and 1 % (and none, for reference) on
/// LDS with `k = 5` and rows 5 × wider (87 500 × 4): the multi-bank LDS (row sampling rates
/// 0.01, 0.1, 0.5, 1; §5.2) against single-bank LDS sampling 5 % and 100 % in every row; the
/// §5.1 LDS (`k = 1`, 17 500 × 4) as a reference. CDFs of flows ≥ 1000 packets and > 100.
pub fn loss(ctx: &Ctx) -> Result<Vec<PathBuf>> {
    let sc = scale(ctx);
    let losses = [0.0, 0.001, 0.005, 0.01];
    let runs = ctx.runs_or(1, 1);
    ctx.progress.set_length((runs * losses.len() * 6) as u64);
    let wide = columns(87_500, sc, 5);
    let mut rows = Vec::new();
    let mut cdf_rows = Vec::new();
    let mut panels = Vec::new();
    let mut panels_100 = Vec::new();
    for &l in &losses {
        let mut scored: Vec<(Scored, Vec<u64>)> = Vec::new();
        for run in 0..runs {
            let seed = ctx.seed + run as u64;
            ctx.progress
                .set_message(format!("lds-loss: {}% loss", l * 100.0));
            let t = make_trace(sc, seed, l, 1.0)?;
            ctx.progress.inc(1);
            let sent: Vec<u64> = t.flows.iter().map(|f| f.sent).collect();
            let single = |p: f64| {
                let mut c = LdsConfig::multi_bank(wide, seed);
                c.sampling = vec![p; 4];
                c
            };
            let mut dense = LdsConfig::multi_bank(wide, seed);
            dense.selection = Selection::Densest;
            let configs = [
                ("multi-bank", LdsConfig::multi_bank(wide, seed)),
                ("multi-bank densest", dense),
                ("single 5%", single(0.05)),
                ("single 100%", single(1.0)),
                (
                    "k=1 (Sec. 5.1)",
                    LdsConfig::single_bank(4, columns(17_500, sc, 1), seed),
                ),
            ];
            for (name, cfg) in configs {
                let s = score(&t, name, &run_method(&lds(name, cfg)?, &t)?);
                match scored.iter_mut().find(|x| x.0.name == name) {
                    Some(x) => {
                        x.0.errs.extend(s.errs);
                        x.0.none.extend(s.none);
                        x.1.extend(&sent);
                    }
                    None => scored.push((s, sent.clone())),
                }
                ctx.progress.inc(1);
            }
        }
        let (mut series, mut series_100) = (Vec::new(), Vec::new());
        for (s, sent) in &scored {
            for (label, min) in [(">=1000 pkts", 1_000u64), (">100 pkts", 101)] {
                let e = subset_of(sent, &s.errs, min);
                let missing = sent
                    .iter()
                    .zip(&s.none)
                    .filter(|(n, none)| **n >= min && **none)
                    .count();
                rows.push(vec![
                    format!("{l}"),
                    s.name.clone(),
                    label.into(),
                    e.len().to_string(),
                    missing.to_string(),
                    fmt(quantile(&e, 0.5)),
                    fmt(quantile(&e, 0.95)),
                ]);
                let c = cdf(&e);
                for &(x, y) in &c {
                    cdf_rows.push(vec![
                        format!("{l}"),
                        s.name.clone(),
                        label.into(),
                        format!("{x:.6e}"),
                        format!("{y:.6}"),
                    ]);
                }
                let dst = if min == 1_000 {
                    &mut series
                } else {
                    &mut series_100
                };
                dst.push(Series {
                    name: s.name.clone(),
                    points: c,
                    err: None,
                });
            }
        }
        for (dst, ser, what) in [
            (&mut panels, series, "flows >= 1000 packets"),
            (&mut panels_100, series_100, "flows > 100 packets"),
        ] {
            dst.push(Panel {
                title: format!("Fig. 11: {}% loss, {what}", l * 100.0),
                x_label: "relative error of the flow's mean delay".into(),
                y_label: "CDF (fraction of flows)".into(),
                log_x: true,
                log_y: false,
                series: ser,
            });
        }
    }
    let csv = ctx.path("lds-loss.csv");
    write_csv(
        &csv,
        &[
            "loss",
            "config",
            "subset",
            "flows",
            "no_estimate",
            "median_rel_err",
            "p95_rel_err",
        ],
        &rows,
    )?;
    let cdf_csv = ctx.path("lds-loss-cdf.csv");
    write_csv(
        &cdf_csv,
        &["loss", "config", "subset", "rel_err", "cdf"],
        &cdf_rows,
    )?;
    let png = ctx.path("lds-loss.png");
    plot_png(&png, &panels)?;
    let png_100 = ctx.path("lds-loss-100.png");
    plot_png(&png_100, &panels_100)?;
    Ok(vec![csv, cdf_csv, png, png_100])
}

fn subset_of(sent: &[u64], errs: &[f64], min: u64) -> Vec<f64> {
    sent.iter()
        .zip(errs)
        .filter(|(n, _)| **n >= min)
        .map(|(_, e)| *e)
        .collect()
}

/// Customer classes of Fig. 12 by source port (the simulator draws source ports uniformly in
/// 1024–65535, so a port range is a random class independent of flow size): gold 1 % of the
/// flows, silver 9 %, bronze the rest.
pub const GOLD: (u16, u16) = (1024, 1668);
pub const SILVER: (u16, u16) = (1669, 7474);

fn class_of(f: &FlowKey) -> &'static str {
    if (GOLD.0..=GOLD.1).contains(&f.sport) {
        "gold"
    } else if (SILVER.0..=SILVER.1).contains(&f.sport) {
        "silver"
    } else {
        "bronze"
    }
}

/// `lds-weights`: Fig. 12 — flows split at random into gold (1 %), silver (9 %) and bronze
/// (90 %) customers by an operator rule (here: source-port ranges), weights 1/25/100,
/// 1/10/100 and 1/50/2500 (bronze/silver/gold), on LDS of 40 000 and 100 000 cells (4 rows,
/// `k = 1`); the unweighted LDS as the reference. CDFs of all flows and of flows > 100 packets.
pub fn weights(ctx: &Ctx) -> Result<Vec<PathBuf>> {
    let sc = scale(ctx);
    let weightings: [(u32, u32, u32); 3] = [(1, 25, 100), (1, 10, 100), (1, 50, 2_500)];
    let sizes = [40_000usize, 100_000];
    ctx.progress
        .set_length(1 + (sizes.len() * (weightings.len() + 1)) as u64);
    ctx.progress.set_message("lds-weights: trace");
    let seed = ctx.seed;
    let t = make_trace(sc, seed, 0.0, 1.0)?;
    ctx.progress.inc(1);
    let classes: Vec<&str> = t.flows.iter().map(|f| class_of(&f.key)).collect();
    let sent: Vec<u64> = t.flows.iter().map(|f| f.sent).collect();
    let mut rows = Vec::new();
    let mut cdf_rows = Vec::new();
    let mut files = Vec::new();
    for &size in &sizes {
        let cols = columns(size / 4, sc, 1);
        let plain = score(
            &t,
            "unweighted",
            &run_method(&lds("lds", LdsConfig::single_bank(4, cols, seed))?, &t)?,
        );
        ctx.progress.inc(1);
        let mut panels = Vec::new();
        for &(b, s, g) in &weightings {
            let mut cfg = LdsConfig::single_bank(4, cols, seed);
            let rule = format!(
                "sport:{}-{}={g},sport:{}-{}={s}",
                GOLD.0, GOLD.1, SILVER.0, SILVER.1
            );
            cfg.weights = rule.parse::<Weights>()?;
            debug_assert_eq!(b, 1, "bronze is the default weight");
            let w = score(&t, "weighted", &run_method(&lds("lds", cfg)?, &t)?);
            ctx.progress.inc(1);
            let mut series = Vec::new();
            for (label, min) in [("all", 0u64), (">100 pkts", 101)] {
                let mut push = |name: String, errs: &[f64], class: Option<&str>| {
                    let e: Vec<f64> = errs
                        .iter()
                        .zip(&sent)
                        .zip(&classes)
                        .filter(|((_, n), c)| **n >= min && class.is_none_or(|k| k == **c))
                        .map(|((e, _), _)| *e)
                        .collect();
                    rows.push(vec![
                        size.to_string(),
                        format!("{b}/{s}/{g}"),
                        name.clone(),
                        label.into(),
                        e.len().to_string(),
                        fmt(quantile(&e, 0.5)),
                        fmt(quantile(&e, 0.95)),
                    ]);
                    let c = cdf(&e);
                    for &(x, y) in &c {
                        cdf_rows.push(vec![
                            size.to_string(),
                            format!("{b}/{s}/{g}"),
                            name.clone(),
                            label.into(),
                            format!("{x:.6e}"),
                            format!("{y:.6}"),
                        ]);
                    }
                    series.push(Series {
                        name: format!("{name} ({label})"),
                        points: c,
                        err: None,
                    });
                };
                for class in ["gold", "silver", "bronze"] {
                    push(class.to_string(), &w.errs, Some(class));
                }
                push("no weights".into(), &plain.errs, None);
            }
            panels.push(Panel {
                title: format!("Fig. 12: {size} cells, weights {b}/{s}/{g}"),
                x_label: "relative error of the flow's mean delay".into(),
                y_label: "CDF (fraction of flows)".into(),
                log_x: true,
                log_y: false,
                series,
            });
        }
        let png = ctx.path(&format!("lds-weights-{size}.png"));
        plot_png(&png, &panels)?;
        files.push(png);
    }
    let csv = ctx.path("lds-weights.csv");
    write_csv(
        &csv,
        &[
            "cells",
            "weights",
            "class",
            "subset",
            "flows",
            "median_rel_err",
            "p95_rel_err",
        ],
        &rows,
    )?;
    let cdf_csv = ctx.path("lds-weights-cdf.csv");
    write_csv(
        &cdf_csv,
        &["cells", "weights", "class", "subset", "rel_err", "cdf"],
        &cdf_rows,
    )?;
    files.insert(0, cdf_csv);
    files.insert(0, csv);
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Ctx;

    fn ctx(dir: &std::path::Path) -> Ctx {
        Ctx {
            out_dir: dir.to_path_buf(),
            quick: true,
            runs: None,
            seed: 1,
            progress: indicatif::ProgressBar::hidden(),
        }
    }

    fn read(p: &std::path::Path) -> Vec<Vec<String>> {
        let mut r = csv::Reader::from_path(p).unwrap();
        r.records()
            .map(|x| x.unwrap().iter().map(str::to_string).collect())
            .collect()
    }

    /// The quick accuracy run: files written, every method scored in every bin, and LDS with
    /// the most cells beats MPE and RLI on the flows it should (≥ 100 packets).
    #[test]
    fn accuracy_quick() {
        let dir = tempfile::tempdir().unwrap();
        let files = accuracy(&ctx(dir.path())).unwrap();
        for f in &files {
            assert!(std::fs::metadata(f).unwrap().len() > 100, "{}", f.display());
        }
        let rows = read(&files[0]);
        let med = |m: &str, bin: &str| -> Option<f64> {
            rows.iter()
                .find(|r| r[0] == m && r[1] == bin)
                .and_then(|r| r[4].parse().ok())
        };
        for bin in ["100-499", "500-999", "1000-9999"] {
            let l = med("LDS 175000x4", bin).unwrap();
            for other in ["MPE 10%", "MPE 1%", "RLI", "aggregate mean"] {
                assert!(l < med(other, bin).unwrap(), "{bin}: LDS {l} vs {other}");
            }
        }
    }

    #[test]
    fn loss_and_weights_quick() {
        let dir = tempfile::tempdir().unwrap();
        let files = loss(&ctx(dir.path())).unwrap();
        let rows = read(&files[0]);
        assert_eq!(rows.len(), 4 * 5 * 2);
        // without loss every configuration estimates every large flow
        for r in rows.iter().filter(|r| r[0] == "0") {
            assert_eq!(r[4], "0", "{r:?}");
        }
        let files = weights(&ctx(dir.path())).unwrap();
        let rows = read(&files[0]);
        assert_eq!(rows.len(), 2 * 3 * 2 * 4);
    }

    #[test]
    fn classes_split_ports_one_nine_ninety() {
        let span = (65_535 - 1024 + 1) as f64;
        let gold = (GOLD.1 - GOLD.0 + 1) as f64 / span;
        let silver = (SILVER.1 - SILVER.0 + 1) as f64 / span;
        assert!((gold - 0.01).abs() < 1e-4, "{gold}");
        assert!((silver - 0.09).abs() < 1e-4, "{silver}");
        assert_eq!(
            class_of(&FlowKey {
                sport: 1024,
                ..Default::default()
            }),
            "gold"
        );
    }
}
