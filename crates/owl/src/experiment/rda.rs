//! RDA's evaluation (§VII), regenerated on simulated traffic.
//!
//! - `rda-set-difference` (Fig. 7/8): relative error of the mean and the std of LDA, FineComb
//!   and RDA as the set difference grows from 0 to 10 000 packets, at equal storage (RDA: 2
//!   banks × 2 500 buckets of 24 B = 120 000 B as in the paper, and owl's 3 banks × 1 666;
//!   FineComb: 5 000 buckets of 24 B and a stash of 5 000 packets; LDA: 2 × 4 998 rows of
//!   12 B). The late-binding RDA, which takes the bytes it needs, is plotted beside them
//!   with its bytes. Half the difference is lost packets (random), half reordered across the
//!   interval's start boundary (the last packets of the previous interval arrive in this one).
//!   Weibull delays (mean 100 µs, shape 0.65), 10 runs per point, 95 % intervals.
//! - `rda-decode-time` (Fig. 6): time to list and repair the problematic packets, RDA's
//!   Algorithm 1 against FineComb's stash enumeration, as the number of problematic packets
//!   grows.
//!
//! LDA runs at the same 120 000 B: the LDA paper's recommended two banks (tuned toward 0.5 %
//! and 10 % loss, §IV-B there) of 4 998 rows, tuned for the interval's packet count.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use hashbrown::HashMap;
use owl_core::finecomb::{self, IdealTruth};
use owl_core::hash::HashFamily;
use owl_core::lda;
use owl_core::method::Role;
use owl_core::rda::{self, Pairing, StdEstimator, Subtraction, decode_faithful};
use owl_trace::sim::{DelayModel, PathConfig, SimConfig, Simulation, TrafficConfig, TrafficSource};

use super::{Ctx, Experiment, Panel, Series, mean_ci95, plot_png, write_csv};

pub const SET_DIFFERENCE: Experiment = Experiment {
    name: "rda-set-difference",
    summary: "RDA §VII Fig. 7/8: mean/std error of RDA and FineComb vs set difference, equal storage",
    files: "rda-set-difference.csv, rda-set-difference-summary.csv, rda-set-difference.png",
    run: set_difference,
};

pub const DECODE_TIME: Experiment = Experiment {
    name: "rda-decode-time",
    summary: "RDA §VII Fig. 6: decoding time of RDA vs FineComb's stash enumeration",
    files: "rda-decode-time.csv, rda-decode-time.png",
    run: decode_time,
};

const IDENTITY_SEED: u64 = 0x6f77_6c21;
/// Relative errors of exactly 0 are drawn here on the log axis.
const ZERO_FLOOR: f64 = 1e-17;

/// One interval of the §VII setup.
struct Interval {
    /// (identity, S timestamp), in sending order.
    sender: Vec<(u64, u64)>,
    /// (identity, R timestamp), in arrival order.
    receiver: Vec<(u64, u64)>,
    ideal: IdealTruth,
    mean: f64,
    std: f64,
}

/// A simulated trace: `tail` packets of the previous interval, then the interval's packets.
struct Trace {
    sent: Vec<(u64, u64)>,
    arrival: HashMap<u64, u64>,
    tail: usize,
}

fn simulate(seed: u64, packets: usize, tail: usize) -> Result<Trace> {
    let cfg = SimConfig {
        seed,
        traffic: TrafficSource::Synthetic(TrafficConfig {
            packets: (packets + tail) as u64,
            rate_pps: 1e6,
            flows: 1000,
            ..Default::default()
        }),
        path: PathConfig {
            delay: DelayModel::weibull_with_mean(100_000.0, 0.65),
            ..Default::default()
        },
        snaplen: 128,
    };
    let (s, r) = Simulation::run(&cfg)?.records(IDENTITY_SEED);
    Ok(Trace {
        sent: s.iter().map(|x| (x.id, x.ts_ns)).collect(),
        arrival: r.iter().map(|x| (x.id, x.ts_ns)).collect(),
        tail,
    })
}

/// The interval with `d` problematic packets: `d/2` random losses, `d − d/2` packets of the
/// previous interval arriving in this one.
fn interval(t: &Trace, d: usize, seed: u64) -> Interval {
    let body = &t.sent[t.tail..];
    let (n_lost, n_reord) = (d / 2, d - d / 2);
    let h = HashFamily::new(seed).member(d as u64);
    let mut rank: Vec<(u64, usize)> = body
        .iter()
        .enumerate()
        .map(|(i, p)| (h.hash(p.0), i))
        .collect();
    let mut lost = vec![false; body.len()];
    if n_lost > 0 {
        rank.select_nth_unstable(n_lost - 1);
        for &(_, i) in &rank[..n_lost] {
            lost[i] = true;
        }
    }
    let mut ideal = IdealTruth::default();
    let mut receiver = Vec::with_capacity(body.len() + n_reord);
    for &(id, _) in &t.sent[t.tail - n_reord..t.tail] {
        let ts = t.arrival[&id];
        receiver.push((id, ts));
        ideal.receiver_only.push((id, ts));
    }
    let mut delays: Vec<i64> = Vec::with_capacity(body.len());
    for (i, &(id, ts)) in body.iter().enumerate() {
        if lost[i] {
            ideal.sender_only.push(id);
            continue;
        }
        let r = t.arrival[&id];
        receiver.push((id, r));
        delays.push(r as i64 - ts as i64);
    }
    receiver.sort_by_key(|p| p.1);
    let n = delays.len() as f64;
    let mean = delays.iter().map(|&x| x as i128).sum::<i128>() as f64 / n;
    let std = (delays
        .iter()
        .map(|&x| (x as f64 - mean).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    Interval {
        sender: body.to_vec(),
        receiver,
        ideal,
        mean,
        std,
    }
}

fn rel(est: Option<f64>, truth: f64) -> f64 {
    match est {
        Some(e) if e.is_finite() => (e - truth).abs() / truth.abs(),
        _ => f64::NAN,
    }
}

/// One method's result at one point of one run.
struct Row {
    method: &'static str,
    mean_err: f64,
    std_err: f64,
    samples: u64,
    bytes: u64,
    note: String,
}

fn evaluate(iv: &Interval, seed: u64) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    // RDA at 120 000 B: the paper's 2 banks × 2 500 buckets and owl's 3 banks × 1 666; and the
    // late-binding RDA, which takes the bytes it needs
    let paper = rda::Config::paper_fixed().with_seed(seed);
    let owl3 = rda::Config::fixed(1666).with_seed(seed);
    let late = rda::Config::default().with_seed(seed);
    type StdVariant = (&'static str, StdEstimator, Pairing);
    let variants: [(&rda::Config, &[StdVariant]); 3] = [
        (
            &paper,
            &[
                (
                    "RDA k=2 (Alg. 3 std)",
                    StdEstimator::Algorithm3,
                    Pairing::IndexOrder,
                ),
                (
                    "RDA k=2 (unbiased std)",
                    StdEstimator::Unbiased,
                    Pairing::EqualCount,
                ),
            ],
        ),
        (
            &owl3,
            &[(
                "RDA k=3 (unbiased std)",
                StdEstimator::Unbiased,
                Pairing::EqualCount,
            )],
        ),
        (
            &late,
            &[(
                "RDA late binding",
                StdEstimator::Unbiased,
                Pairing::EqualCount,
            )],
        ),
    ];
    for (cfg, stds) in variants {
        let mut s = rda::Synopsis::new(cfg, Role::Sender)?;
        let mut r = rda::Synopsis::new(cfg, Role::Receiver)?;
        iv.sender.iter().for_each(|&(i, t)| {
            s.record_packet(i, t);
        });
        iv.receiver.iter().for_each(|&(i, t)| {
            r.record_packet(i, t);
        });
        let rec = rda::reconcile(&mut s, &mut r)?;
        let mean = rec.mean().map(|m| m.mean_ns);
        let note = format!(
            "{}decoded {} of {}; {} dirty of {} buckets; {} attempts",
            if rec.decoded.complete() {
                "complete; "
            } else {
                "partial; "
            },
            rec.decoded.len(),
            iv.ideal.receiver_only.len() + iv.ideal.sender_only.len(),
            rec.dirty(),
            rec.clean.len(),
            rec.attempts
        );
        for &(method, std, pairing) in stds {
            let v = rec.variance(std, pairing);
            rows.push(Row {
                method,
                mean_err: rel(mean, iv.mean),
                std_err: rel(v.map(|v| v.max(0.0).sqrt()), iv.std),
                samples: rec.packets,
                bytes: rec.bytes.total(),
                note: note.clone(),
            });
        }
    }
    // LDA at 120 000 B: the paper's recommended two banks tuned toward 0.5 % and 10 % loss
    // (§IV-B of the LDA paper), for the interval's packet count
    let lc = lda::Config::for_memory(120_000, &lda::DEFAULT_TARGETS, iv.sender.len() as u64, seed)?;
    let mut s = lda::Synopsis::new(&lc);
    let mut r = lda::Synopsis::new(&lc);
    iv.sender.iter().for_each(|&(i, t)| s.record(i, t));
    iv.receiver.iter().for_each(|&(i, t)| r.record(i, t));
    let e = lda::estimate(&s, &r)?;
    rows.push(Row {
        method: "LDA",
        mean_err: rel(e.mean_ns, iv.mean),
        std_err: rel(e.std_ns, iv.std),
        samples: e.effective_samples,
        bytes: lc.encoded_len() as u64,
        note: format!(
            "{} of {} rows usable",
            e.banks.iter().map(|b| b.usable_rows).sum::<usize>(),
            lc.rows() * lc.banks()
        ),
    });
    // FineComb, 5 000 buckets, stash of 5 000
    let fc = finecomb::Config::default().with_seed(seed);
    let mut s = finecomb::Synopsis::new(&fc, Role::Sender)?;
    let mut r = finecomb::Synopsis::new(&fc, Role::Receiver)?;
    iv.sender.iter().for_each(|&(i, t)| s.record_packet(i, t));
    iv.receiver.iter().for_each(|&(i, t)| r.record_packet(i, t));
    for (method, o) in [
        (
            "FineComb (ideal)",
            finecomb::estimate_ideal(&fc, &s, &r, &iv.ideal)?,
        ),
        ("FineComb (stash)", finecomb::estimate(&fc, &s, &r)?),
    ] {
        rows.push(Row {
            method,
            mean_err: rel(o.mean_ns, iv.mean),
            std_err: rel(o.variance.map(|v| v.max(0.0).sqrt()), iv.std),
            samples: o.packets,
            bytes: fc.buckets() as u64 * finecomb::BUCKET_BYTES,
            note: format!(
                "{} usable buckets; {} repaired of {} impaired",
                o.usable, o.repair.repaired, o.repair.impaired
            ),
        });
    }
    Ok(rows)
}

fn set_difference(ctx: &Ctx) -> Result<Vec<PathBuf>> {
    let (n, ds): (usize, &[usize]) = if ctx.quick {
        (100_000, &[0, 1000, 4000, 10_000])
    } else {
        (
            1_000_000,
            &[
                0, 250, 500, 1000, 1500, 2000, 2500, 3000, 4000, 5000, 6000, 8000, 10_000,
            ],
        )
    };
    let runs = ctx.runs_or(10, 2);
    let tail = ds.iter().max().unwrap().div_ceil(2);
    ctx.progress.set_length((runs * ds.len()) as u64);
    let mut rows = Vec::new();
    // (method, d, mean errors, std errors, bytes, runs decoded completely)
    type Acc = (&'static str, usize, Vec<f64>, Vec<f64>, Vec<f64>, usize);
    let mut acc: Vec<Acc> = Vec::new();
    for run in 0..runs {
        let seed = ctx.seed.wrapping_add(run as u64);
        let trace = simulate(seed, n, tail)?;
        for &d in ds {
            let iv = interval(&trace, d, seed);
            for row in evaluate(&iv, seed)? {
                let complete = row.note.contains("complete;") as usize;
                rows.push(vec![
                    run.to_string(),
                    d.to_string(),
                    row.method.to_string(),
                    format!("{:e}", row.mean_err),
                    format!("{:e}", row.std_err),
                    row.samples.to_string(),
                    row.bytes.to_string(),
                    row.note,
                ]);
                match acc.iter_mut().find(|a| a.0 == row.method && a.1 == d) {
                    Some(a) => {
                        a.2.push(row.mean_err);
                        a.3.push(row.std_err);
                        a.4.push(row.bytes as f64);
                        a.5 += complete;
                    }
                    None => acc.push((
                        row.method,
                        d,
                        vec![row.mean_err],
                        vec![row.std_err],
                        vec![row.bytes as f64],
                        complete,
                    )),
                }
            }
            ctx.progress.inc(1);
        }
    }
    let csv = ctx.path("rda-set-difference.csv");
    write_csv(
        &csv,
        &[
            "run",
            "set_difference",
            "method",
            "mean_rel_err",
            "std_rel_err",
            "samples",
            "bytes",
            "note",
        ],
        &rows,
    )?;
    // per method and set difference: how often RDA decoded everything (the figure the README
    // quotes for RDA's decode limit) and the median errors
    let median = |v: &[f64]| {
        let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            f64::NAN
        } else {
            v[v.len() / 2]
        }
    };
    let summary_csv = ctx.path("rda-set-difference-summary.csv");
    write_csv(
        &summary_csv,
        &[
            "method",
            "set_difference",
            "runs",
            "complete_fraction",
            "median_mean_rel_err",
            "median_std_rel_err",
            "median_bytes",
        ],
        &acc.iter()
            .map(|a| {
                let is_rda = a.0.starts_with("RDA");
                vec![
                    a.0.to_string(),
                    a.1.to_string(),
                    a.2.len().to_string(),
                    if is_rda {
                        format!("{:.3}", a.5 as f64 / a.2.len().max(1) as f64)
                    } else {
                        String::new()
                    },
                    format!("{:e}", median(&a.2)),
                    format!("{:e}", median(&a.3)),
                    format!("{}", median(&a.4)),
                ]
            })
            .collect::<Vec<_>>(),
    )?;
    // what to plot: 0 = mean error, 1 = std error, 2 = bytes
    let series = |methods: &[(&'static str, &str)], what: usize| -> Vec<Series> {
        let mut v: Vec<Series> = methods
            .iter()
            .map(|&(m, label)| {
                let mut points = Vec::new();
                let mut err = Vec::new();
                for a in acc.iter().filter(|a| a.0 == m) {
                    let xs: Vec<f64> = [&a.2, &a.3, &a.4][what]
                        .iter()
                        .copied()
                        .filter(|x| x.is_finite())
                        .collect();
                    let (mu, h) = mean_ci95(&xs);
                    points.push((a.1 as f64, mu.max(ZERO_FLOOR)));
                    err.push((mu - h, (mu + h).max(ZERO_FLOOR)));
                }
                Series {
                    name: label.to_string(),
                    points,
                    err: (what < 2).then_some(err),
                }
            })
            .collect();
        // an error of 0 sits on the axis' floor, named in the legend
        if what < 2
            && let Some(floor) = super::plot::exact_floor(&v, ZERO_FLOOR)
        {
            v.push(floor);
        }
        v
    };
    const K2: (&str, &str) = ("RDA k=2 (Alg. 3 std)", "RDA k=2 (paper)");
    const K3: (&str, &str) = ("RDA k=3 (unbiased std)", "RDA k=3");
    const LATE: (&str, &str) = ("RDA late binding", "RDA late binding (bytes as needed)");
    const FCI: (&str, &str) = ("FineComb (ideal)", "FineComb ideal (uses truth)");
    const FCS: (&str, &str) = ("FineComb (stash)", "FineComb (stash)");
    const LDA: (&str, &str) = ("LDA", "LDA");
    let png = ctx.path("rda-set-difference.png");
    plot_png(
        &png,
        &[
            Panel {
                title: format!("(a) average latency, {n} packets, 120 000 B"),
                x_label: "set difference (lost + reordered packets)".into(),
                y_label: "relative error".into(),
                log_x: false,
                log_y: true,
                series: series(&[K2, K3, LATE, FCI, FCS, LDA], 0),
            },
            Panel {
                title: "(b) standard deviation".into(),
                x_label: "set difference (lost + reordered packets)".into(),
                y_label: "relative error".into(),
                log_x: false,
                log_y: true,
                series: series(
                    &[
                        ("RDA k=2 (Alg. 3 std)", "RDA k=2, Alg. 3 (paper)"),
                        ("RDA k=2 (unbiased std)", "RDA k=2, unbiased"),
                        ("RDA k=3 (unbiased std)", "RDA k=3, unbiased"),
                        LATE,
                        FCI,
                        FCS,
                        LDA,
                    ],
                    1,
                ),
            },
            Panel {
                title: "(c) bytes crossing the network".into(),
                x_label: "set difference (lost + reordered packets)".into(),
                y_label: "bytes per interval".into(),
                log_x: false,
                log_y: true,
                series: series(&[K2, K3, LATE, FCS, LDA], 2),
            },
        ],
    )?;
    Ok(vec![csv, summary_csv, png])
}

/// Median wall time of `reps` runs of `f`, in milliseconds (the work is done on fresh clones
/// made outside the timed region; with more than one rep, one untimed run warms caches first).
fn time_ms<T: Clone, R>(input: &T, reps: usize, mut f: impl FnMut(T) -> R) -> (f64, R) {
    let mut times = Vec::with_capacity(reps);
    let mut last = None;
    if reps > 1 {
        f(input.clone());
    }
    for _ in 0..reps.max(1) {
        let x = input.clone();
        let t = Instant::now();
        let r = f(x);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        last = Some(r);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], last.unwrap())
}

/// `n` common packets, `d/2` lost, `d − d/2` reordered; the reordered ones arrive first at R.
/// (identity, timestamp) records of one point.
type Records = Vec<(u64, u64)>;

fn problem(n: usize, d: usize, seed: u64) -> (Records, Records) {
    let h = HashFamily::new(seed).member(0xdec0de);
    let (mut s, mut r) = (Vec::new(), Vec::new());
    for i in 0..(d - d / 2) as u64 {
        r.push((h.hash(i ^ 1 << 40), i));
    }
    for i in 0..n as u64 {
        let id = h.hash(i);
        let t = 1_000_000 + i * 1000;
        s.push((id, t));
        if (i as usize) < d / 2 {
            continue;
        }
        r.push((id, t + 50_000 + h.hash(i ^ 1 << 41) % 100_000));
    }
    (s, r)
}

fn decode_time(ctx: &Ctx) -> Result<Vec<PathBuf>> {
    let n = if ctx.quick { 20_000 } else { 100_000 };
    let small: Vec<usize> = if ctx.quick {
        (1..=6).map(|i| 2 * i).collect()
    } else {
        (1..=13).map(|i| 2 * i).collect()
    };
    let large: &[usize] = if ctx.quick {
        &[100, 1000, 10_000]
    } else {
        &[100, 300, 1000, 3000, 10_000]
    };
    let reps = if ctx.quick { 3 } else { 7 };
    let cap: u64 = if ctx.quick { 1 << 22 } else { 1 << 27 };
    ctx.progress.set_length((small.len() + large.len()) as u64);
    let mut rows = Vec::new();
    // (method, large panel, points)
    type Curve = (&'static str, bool, Vec<(f64, f64)>);
    let mut curves: Vec<Curve> = Vec::new();
    let mut push = |name: &'static str, large: bool, d: usize, ms: f64| match curves
        .iter_mut()
        .find(|c| c.0 == name && c.1 == large)
    {
        Some(c) => c.2.push((d as f64, ms)),
        None => curves.push((name, large, vec![(d as f64, ms)])),
    };
    for (panel, ds) in [(false, &small[..]), (true, large)] {
        for &d in ds {
            let seed = ctx.seed;
            let (s_pk, r_pk) = problem(n, d, seed);
            // RDA: k = 2 banks of 2 000 buckets as in Fig. 6, and (large panel) of 2d each
            let mut sizes = vec![("RDA, 4000 buckets", 2000usize)];
            if panel {
                sizes.push(("RDA, 2 × 2d buckets", 2 * d));
            }
            for (name, m) in sizes {
                let cfg = rda::Config::fixed(m).with_seed(seed).with_banks(2)?;
                let mut s = rda::Synopsis::new(&cfg, Role::Sender)?;
                let mut r = rda::Synopsis::new(&cfg, Role::Receiver)?;
                s_pk.iter().for_each(|&(i, t)| {
                    s.record_packet(i, t);
                });
                r_pk.iter().for_each(|&(i, t)| {
                    r.record_packet(i, t);
                });
                let pair = (s.rda().unwrap().clone(), r.rda().unwrap().clone());
                let (ms, dec) = time_ms(&pair, reps, |(a, b)| {
                    let mut sub = Subtraction::of(&b, &a).unwrap();
                    decode_faithful(&mut sub)
                });
                push(name, panel, d, ms);
                rows.push(vec![
                    name.to_string(),
                    d.to_string(),
                    format!("{ms:.6}"),
                    format!("decoded {} of {d}; complete {}", dec.len(), dec.complete()),
                ]);
            }
            // FineComb, 4 000 buckets, a stash of d packets (the reordered ones among them)
            let mut encs = vec![(
                "FineComb, per-bucket enumeration",
                finecomb::Enumeration::PerBucket,
            )];
            if !panel {
                encs.push((
                    "FineComb, whole stash (§III-C)",
                    finecomb::Enumeration::Whole,
                ));
            }
            for (name, enumeration) in encs {
                let fc = finecomb::Config::new(4000, d, seed, enumeration, cap)?;
                let mut s = finecomb::Synopsis::new(&fc, Role::Sender)?;
                let mut r = finecomb::Synopsis::new(&fc, Role::Receiver)?;
                s_pk.iter().for_each(|&(i, t)| s.record_packet(i, t));
                r_pk.iter().for_each(|&(i, t)| r.record_packet(i, t));
                let reps = if enumeration == finecomb::Enumeration::Whole && d >= 18 {
                    1
                } else {
                    reps
                };
                let (ms, o) = time_ms(&(s, r), reps, |(s, r)| {
                    finecomb::estimate(&fc, &s, &r).unwrap()
                });
                push(name, panel, d, ms);
                rows.push(vec![
                    name.to_string(),
                    d.to_string(),
                    format!("{ms:.6}"),
                    format!(
                        "{} subsets; repaired {} of {} impaired; gave up on {}",
                        o.repair.subsets, o.repair.repaired, o.repair.impaired, o.repair.gave_up
                    ),
                ]);
            }
            ctx.progress.inc(1);
        }
    }
    let csv = ctx.path("rda-decode-time.csv");
    write_csv(
        &csv,
        &["method", "problematic_packets", "time_ms", "note"],
        &rows,
    )?;
    let panel = |large: bool| -> Vec<Series> {
        curves
            .iter()
            .filter(|c| c.1 == large)
            .map(|c| Series {
                name: c.0.to_string(),
                points: c.2.iter().map(|&(x, y)| (x, y.max(1e-5))).collect(),
                err: None,
            })
            .collect()
    };
    let png = ctx.path("rda-decode-time.png");
    plot_png(
        &png,
        &[
            Panel {
                title: format!(
                    "(a) few problematic packets (FineComb capped at 2^{} subsets)",
                    cap.trailing_zeros()
                ),
                x_label: "lost + reordered packets (= FineComb stash)".into(),
                y_label: "decoding time, ms".into(),
                log_x: false,
                log_y: true,
                series: panel(false),
            },
            Panel {
                title: "(b) many problematic packets".into(),
                x_label: "lost + reordered packets".into(),
                y_label: "decoding time, ms".into(),
                log_x: true,
                log_y: true,
                series: panel(true),
            },
        ],
    )?;
    Ok(vec![csv, png])
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::experiment::testing::quick_ctx;

    /// The quick context with one run a point.
    fn ctx(dir: &std::path::Path) -> Ctx {
        Ctx {
            runs: Some(1),
            ..quick_ctx(dir)
        }
    }

    #[test]
    fn set_difference_quick_runs_and_rda_is_exact_when_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let files = set_difference(&ctx(dir.path())).unwrap();
        assert!(files.iter().all(|f| f.exists()));
        let csv = std::fs::read_to_string(&files[0]).unwrap();
        let mut seen = 0;
        for line in csv.lines().skip(1) {
            let f: Vec<&str> = line.split(',').collect();
            let (d, method, mean_err) = (f[1], f[2], f[3].parse::<f64>().unwrap());
            // decoded completely ⇒ exact, whatever the seed; with nothing to decode, always
            // complete (how often a full decode happens is a rate: see the test below)
            if method.starts_with("RDA") && line.contains("complete;") {
                assert!(mean_err < 1e-9, "{line}");
                seen += 1;
            }
            if method.starts_with("RDA") && d == "0" {
                assert!(line.contains("complete;"), "{line}");
            }
            if method == "LDA" && d == "1000" {
                assert!(
                    mean_err > 1e-9,
                    "LDA is fooled by reordered packets: {line}"
                );
            }
            if method == "FineComb (ideal)" && d == "4000" {
                assert!(
                    mean_err > 1e-9,
                    "FineComb loses buckets to lost packets: {line}"
                );
            }
        }
        // d = 0 (4 variants) at least, and d = 1 000 in the large majority of seeds
        assert!(seen >= 4, "{seen}");
    }

    /// How often RDA decodes d = 1 000 problematic packets of 100 000 completely, over seeds.
    /// Measured over seeds 1–200 (this test with 200 seeds): k = 2 (2 × 2 500 buckets, no retry)
    /// completes in 182 (91 %), k = 3 and late binding in all 200. With 20 seeds, k = 2 must
    /// complete at least 13 times: at p = 0.91 fewer happens with probability 2·10⁻⁴ (binomial
    /// tail; mean 18.2, sd 1.3); k = 3 and late binding must complete at least 19 times.
    #[test]
    fn rda_completes_d_1000_at_its_measured_rate() {
        let mut complete: Vec<(&'static str, u32)> = Vec::new();
        for seed in 1..=20u64 {
            let trace = simulate(seed, 100_000, 500).unwrap();
            let iv = interval(&trace, 1000, seed);
            for row in evaluate(&iv, seed).unwrap() {
                if !row.method.starts_with("RDA") {
                    continue;
                }
                let done = row.note.contains("complete;");
                if done {
                    assert!(row.mean_err < 1e-9, "{} {}", row.method, row.note);
                }
                match complete.iter_mut().find(|c| c.0 == row.method) {
                    Some(c) => c.1 += done as u32,
                    None => complete.push((row.method, done as u32)),
                }
            }
        }
        assert_eq!(complete.len(), 4, "{complete:?}");
        for (method, n) in complete {
            let need = if method.starts_with("RDA k=2") {
                13
            } else {
                19
            };
            assert!(n >= need, "{method}: {n} of 20 complete");
        }
    }

    #[test]
    fn decode_time_quick_runs() {
        let dir = tempfile::tempdir().unwrap();
        let files = decode_time(&ctx(dir.path())).unwrap();
        assert!(files.iter().all(|f| f.exists()));
        let csv = std::fs::read_to_string(&files[0]).unwrap();
        assert!(csv.contains("\"RDA, 2 × 2d buckets\",10000,"), "{csv}");
        assert!(csv.contains("FineComb, whole stash"));
    }
}
