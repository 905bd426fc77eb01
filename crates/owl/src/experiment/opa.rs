//! OPA's evaluation (§VI-A, §VII), regenerated on simulated traffic.
//!
//! The traces: Poisson arrivals at 1 Mpps (packet identities random), a Weibull delay of mean
//! 100 µs and shape 0.6 drawn for each packet (the model of §VII-A, after LDA and RLI), uniform
//! loss, and — where said — bounded reordering (a packet overtaken by 1 to 3 later ones) and
//! rare large delays (§VII-C: with probability 10⁻⁴ a packet is held 1 ms more, and the ~1 000
//! packets sent in that millisecond overtake it). As in the paper, which adds "random losses
//! and reorderings according to a specified loss and reordering rate", the receiver sees the
//! packets in sending order but for those: the delay is drawn per packet, not queued, so R's
//! timestamps are not in capture order (every method takes the records as they come). Every
//! method sees the same records; the truth is every packet's delay.
//!
//! - `opa-groups` (Fig. 3/4): one segment of 10⁶ packets hashed into `g` groups, loss 10⁻⁵
//!   and 10⁻⁴; the fraction of delivered packets whose delay is recovered, and the mappings
//!   Algorithm 1 tested, as `g` grows, for error budgets of one and two per group (the paper's
//!   implementation: two).
//! - `opa-per-packet` (Fig. 5–7): per-packet relative error `(d̂ − d)/d` (Eq. 11) of OPA
//!   (lossless and wavelet) and RLI (one reference per 1 000 packets, as §VII-C) over all
//!   packets and over the large delays; the large delays and their estimates.
//! - `opa-vs` (Fig. 8): error of the mean (Eq. 12) and of the std, overhead (bytes per packet,
//!   and in 1 500-byte packets per packet as the paper counts it) and fraction of delays
//!   recovered, of LDA, FineComb, RLI and OPA, loss 10⁻⁵ to 10⁻³, large delays injected.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use hashbrown::{HashMap, HashSet};
use owl_core::PacketRecord;
use owl_core::method::{BuildOptions, Method, PointSynopsis, Role};
use owl_core::opa::{self, Config, OpaMethod};
use owl_core::{registry, rli};
use owl_trace::sim::DelayModel;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use super::{Ctx, Experiment, Panel, Series, mean_ci95, overtake, plot_png, write_csv};

pub const GROUPS: Experiment = Experiment {
    name: "opa-groups",
    summary: "OPA Fig. 3/4: delays recovered vs groups and vs mappings tested, 1e6 packets, loss 1e-5 and 1e-4",
    files: "opa-groups.csv, opa-groups.png",
    run: groups,
};

pub const PER_PACKET: Experiment = Experiment {
    name: "opa-per-packet",
    summary: "OPA Fig. 5-7: CDF of per-packet relative error, OPA vs RLI, large delays at 1e-4",
    files: "opa-per-packet.csv, opa-per-packet.png",
    run: per_packet,
};

pub const VERSUS: Experiment = Experiment {
    name: "opa-vs",
    summary: "OPA Fig. 8: mean/std error, overhead and delays recovered of LDA, FineComb, RLI, OPA over loss 1e-5..1e-3",
    files: "opa-vs.csv, opa-vs.png",
    run: versus,
};

/// Packets per second of the traces.
const RATE_PPS: f64 = 1e6;
/// Mean delay, ns, and the Weibull shape.
const MEAN_DELAY_NS: f64 = 100_000.0;
const SHAPE: f64 = 0.6;
/// The extra hold of a large delay, ns.
const LARGE_NS: u64 = 1_000_000;

/// OPA as the figures run it: offline, every group searched to its cap (`cpu` = 1 000, the
/// search budget's ceiling of [`MAX_WORK_PER_PACKET`](owl_core::opa::config::MAX_WORK_PER_PACKET)
/// a packet), as the paper's evaluation does. These traces draw each delay independently in
/// sending order (and add rare large delays): their search costs about 5 µs of one core a
/// packet at 1 Mpps, more than the default budget of one core.
pub(super) fn searched(cfg: Config) -> Config {
    Config {
        cpu: 1_000.0,
        ..cfg
    }
}

/// What a trace is made of.
#[derive(Clone, Copy, Debug)]
struct TraceSpec {
    packets: usize,
    loss: f64,
    /// Fraction of delivered packets overtaken by 1 to 3 later packets.
    reorder: f64,
    /// Fraction of packets held [`LARGE_NS`] more.
    large: f64,
}

/// Both points' records and the truth.
struct Trace {
    sender: Vec<PacketRecord>,
    receiver: Vec<PacketRecord>,
    /// True delay by identity (delivered packets).
    delay: HashMap<u64, i64>,
    /// Identities of the packets given a large delay and delivered.
    large: HashSet<u64>,
}

fn trace(spec: TraceSpec, seed: u64) -> Result<Trace> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let model = DelayModel::weibull_with_mean(MEAN_DELAY_NS, SHAPE);
    model.validate().map_err(|e| anyhow!("{e}"))?;
    let sampler = model.sampler();
    let mut t = 1_767_225_600_000_000_000u64;
    let mut sender = Vec::with_capacity(spec.packets);
    // (order key, record): R sees packets in sending order, a held packet among those sent
    // [`LARGE_NS`] after it
    let mut arrivals: Vec<(u64, PacketRecord)> = Vec::with_capacity(spec.packets);
    let mut delay = HashMap::with_capacity(spec.packets);
    let mut large = HashSet::new();
    for _ in 0..spec.packets {
        let u: f64 = rng.random();
        t += ((-(1.0 - u).ln() * 1e9 / RATE_PPS) as u64).max(1);
        let id: u64 = rng.random();
        sender.push(PacketRecord {
            ts_ns: t,
            id,
            ..Default::default()
        });
        let mut d = sampler.sample(&mut rng).max(1);
        let held = rng.random_bool(spec.large);
        if rng.random_bool(spec.loss) {
            continue;
        }
        let mut key = t;
        if held {
            large.insert(id);
            d += LARGE_NS;
            key += LARGE_NS;
        }
        delay.insert(id, d as i64);
        arrivals.push((
            key,
            PacketRecord {
                ts_ns: t + d,
                id,
                ..Default::default()
            },
        ));
    }
    arrivals.sort_by_key(|a| a.0);
    let mut receiver: Vec<PacketRecord> = arrivals.into_iter().map(|a| a.1).collect();
    // bounded reordering: a packet overtaken by 1 to 3 later ones
    overtake(&mut receiver, spec.reorder, &mut rng);
    Ok(Trace {
        sender,
        receiver,
        delay,
        large,
    })
}

/// Both points of `m` over the whole trace.
fn points(m: &dyn Method, t: &Trace) -> (Box<dyn PointSynopsis>, Box<dyn PointSynopsis>) {
    let mut s = m.new_point(Role::Sender);
    let mut r = m.new_point(Role::Receiver);
    s.record_batch(&t.sender);
    r.record_batch(&t.receiver);
    (s, r)
}

// ---------------------------------------------------------------------------------------------

fn groups(ctx: &Ctx) -> Result<Vec<PathBuf>> {
    let packets = if ctx.quick { 50_000 } else { 1_000_000 };
    let runs = ctx.runs_or(3, 1);
    // the paper's 10 and 100 losses per segment: 10⁻⁵ and 10⁻⁴ of 10⁶ packets (twenty times
    // the rates on the quick twentieth)
    let losses = if ctx.quick {
        [2e-4, 2e-3]
    } else {
        [1e-5, 1e-4]
    };
    let gs: &[u32] = if ctx.quick {
        &[5, 20, 100, 500, 1000]
    } else {
        &[5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
    };
    let budgets = [1u32, 2];
    ctx.progress
        .set_length((runs * losses.len() * gs.len() * budgets.len()) as u64);
    let mut rows = Vec::new();
    // (loss, E) → (g, fraction, mappings) per run
    type Point = (u32, f64, f64);
    let mut pts: HashMap<(usize, u32), Vec<Point>> = HashMap::new();
    for run in 0..runs {
        for (li, &loss) in losses.iter().enumerate() {
            let t = trace(
                TraceSpec {
                    packets,
                    loss,
                    reorder: 0.0,
                    large: 0.0,
                },
                ctx.seed + run as u64,
            )?;
            for &g in gs {
                for &e in &budgets {
                    // the paper's setup: one segment in g groups, k = 3 rows, Algorithm 1
                    let cfg = Config {
                        groups: g,
                        delimiter_bits: 0,
                        max_errors: e,
                        design_loss: 0.0,
                        labels: 0,
                        search: opa::config::Search::Paper,
                        seed: ctx.seed + run as u64,
                        ..Config::lossless(1)
                    };
                    let cfg = Arc::new(cfg);
                    let mut s = opa::Sender::new(cfg.clone());
                    let mut r = opa::Receiver::new(cfg);
                    s.record_batch(&t.sender);
                    r.record_batch(&t.receiver);
                    let rec = opa::recover_pair(&s, &r)?;
                    let st = &rec.stats;
                    let placed = rec.delays().count() as f64;
                    let frac = placed / t.receiver.len() as f64;
                    pts.entry((li, e))
                        .or_default()
                        .push((g, frac, st.mappings as f64));
                    rows.push(vec![
                        loss.to_string(),
                        g.to_string(),
                        e.to_string(),
                        run.to_string(),
                        packets.to_string(),
                        t.receiver.len().to_string(),
                        placed.to_string(),
                        frac.to_string(),
                        st.mappings.to_string(),
                        st.unrecovered_groups.to_string(),
                        (st.tuple_bytes as f64 / packets as f64).to_string(),
                    ]);
                    ctx.progress.inc(1);
                }
            }
        }
    }
    let csv = ctx.path("opa-groups.csv");
    write_csv(
        &csv,
        &[
            "loss",
            "groups",
            "max_errors",
            "run",
            "packets",
            "received",
            "recovered",
            "recovered_fraction",
            "mappings_tested",
            "unrecovered_groups",
            "tuple_bytes_per_packet",
        ],
        &rows,
    )?;
    // Fig. 3: recovered vs computation; Fig. 4: recovered vs groups, one panel per loss
    let mut panels = Vec::new();
    for (li, &loss) in losses.iter().enumerate() {
        let mut by_groups = Vec::new();
        let mut by_cost = Vec::new();
        for &e in &budgets {
            let v = pts.get(&(li, e)).cloned().unwrap_or_default();
            let mean_at = |g: u32, f: &dyn Fn(&Point) -> f64| {
                let xs: Vec<f64> = v.iter().filter(|p| p.0 == g).map(f).collect();
                mean_ci95(&xs).0
            };
            by_groups.push(Series {
                name: format!("at most {e} error(s) per group"),
                points: gs
                    .iter()
                    .map(|&g| (g as f64, 100.0 * mean_at(g, &|p| p.1)))
                    .collect(),
                err: None,
            });
            let mut c: Vec<(f64, f64)> = gs
                .iter()
                .map(|&g| (mean_at(g, &|p| p.2).max(1.0), 100.0 * mean_at(g, &|p| p.1)))
                .collect();
            c.sort_by(|a, b| a.0.total_cmp(&b.0));
            by_cost.push(Series {
                name: format!("at most {e} error(s) per group"),
                points: c,
                err: None,
            });
        }
        panels.push(Panel {
            title: format!("Fig. 3: loss {loss:e}, one point per group count"),
            x_label: "mappings tested (computation)".into(),
            y_label: "delays recovered (%)".into(),
            log_x: true,
            log_y: false,
            series: by_cost,
        });
        panels.push(Panel {
            title: format!("Fig. 4: loss {loss:e}, {packets} packets"),
            x_label: "number of groups".into(),
            y_label: "delays recovered (%)".into(),
            log_x: true,
            log_y: false,
            series: by_groups,
        });
    }
    let png = ctx.path("opa-groups.png");
    plot_png(&png, &panels)?;
    Ok(vec![csv, png])
}

// ---------------------------------------------------------------------------------------------

/// RLI with references at the fixed rate of §VII-C, one per 1 000 packets.
fn rli_fixed(seed: u64) -> Result<rli::RliMethod> {
    let p = rli::Config::paper(seed);
    Ok(rli::RliMethod::new(rli::Config::new(
        1000,
        1000,
        p.capacity_bps(),
        p.window_ns(),
        seed,
    )?)?)
}

/// `(identity, estimated delay)` of every delivered packet `m` places.
fn per_packet_delays(m: &dyn Method, t: &Trace) -> Result<Vec<(u64, i64)>> {
    let (s, r) = points(m, t);
    let p = m
        .estimate_packets(&*s, &*r)
        .ok_or_else(|| anyhow!("{} gives no per-packet delays", m.name()))??;
    Ok(p.iter()
        .filter_map(|p| Some((p.id?, p.delay_ns()?)))
        .collect())
}

/// The empirical CDF of `xs` at about 200 points.
fn cdf(mut xs: Vec<f64>) -> Vec<(f64, f64)> {
    xs.retain(|x| x.is_finite());
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n == 0 {
        return Vec::new();
    }
    let step = (n / 200).max(1);
    let mut out: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (xs[i], (i + 1) as f64 / n as f64))
        .collect();
    out.push((xs[n - 1], 1.0));
    out
}

fn per_packet(ctx: &Ctx) -> Result<Vec<PathBuf>> {
    let packets = if ctx.quick { 100_000 } else { 1_000_000 };
    let spec = TraceSpec {
        packets,
        loss: 1e-4,
        reorder: 1e-4,
        large: 1e-4,
    };
    let t = trace(spec, ctx.seed)?;
    let methods: Vec<(&str, Box<dyn Method>)> = vec![
        ("RLI 1/1000", Box::new(rli_fixed(ctx.seed)?)),
        (
            "OPA wavelet",
            Box::new(OpaMethod::new(searched(Config::wavelet(ctx.seed)))?),
        ),
        (
            "OPA",
            Box::new(OpaMethod::new(searched(Config::lossless(ctx.seed)))?),
        ),
    ];
    ctx.progress.set_length(methods.len() as u64);
    let mut rows = Vec::new();
    let mut all_cdf = Vec::new();
    let mut large_cdf = Vec::new();
    let mut scatter = Vec::new();
    let mut large_truth: Vec<(u64, i64)> = t.large.iter().map(|&id| (id, t.delay[&id])).collect();
    large_truth.sort_by_key(|x| x.1);
    for (name, m) in &methods {
        let est = per_packet_delays(&**m, &t)?;
        let got: HashMap<u64, i64> = est.iter().copied().collect();
        let rel = |id: u64, d: i64| {
            let truth = t.delay[&id] as f64;
            (d as f64 - truth) / truth
        };
        let all: Vec<f64> = est.iter().map(|&(id, d)| rel(id, d)).collect();
        let large: Vec<f64> = est
            .iter()
            .filter(|(id, _)| t.large.contains(id))
            .map(|&(id, d)| rel(id, d))
            .collect();
        let abs_mean = all.iter().map(|x| x.abs()).sum::<f64>() / all.len().max(1) as f64;
        for (set, xs) in [("all", &all), ("large", &large)] {
            let mut s = xs.clone();
            s.sort_by(f64::total_cmp);
            for q in [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99] {
                let v = if s.is_empty() {
                    f64::NAN
                } else {
                    s[((q * s.len() as f64) as usize).min(s.len() - 1)]
                };
                rows.push(vec![
                    name.to_string(),
                    set.into(),
                    q.to_string(),
                    v.to_string(),
                    s.len().to_string(),
                    t.receiver.len().to_string(),
                    abs_mean.to_string(),
                ]);
            }
        }
        all_cdf.push(Series {
            name: format!("{name} (mean |err| {abs_mean:.2e})"),
            points: cdf(all.iter().map(|x| x.clamp(-1.0, 1.0)).collect()),
            err: None,
        });
        large_cdf.push(Series {
            name: (*name).into(),
            points: cdf(large.iter().map(|x| x.clamp(-1.0, 1.0)).collect()),
            err: None,
        });
        scatter.push(Series {
            name: (*name).into(),
            points: large_truth
                .iter()
                .enumerate()
                .filter_map(|(i, (id, _))| Some((i as f64, *got.get(id)? as f64 / 1e3)))
                .collect(),
            err: None,
        });
        ctx.progress.inc(1);
    }
    scatter.push(Series {
        name: "true delay".into(),
        points: large_truth
            .iter()
            .enumerate()
            .map(|(i, (_, d))| (i as f64, *d as f64 / 1e3))
            .collect(),
        err: None,
    });
    let csv = ctx.path("opa-per-packet.csv");
    write_csv(
        &csv,
        &[
            "method",
            "packets",
            "quantile",
            "relative_error",
            "placed",
            "received",
            "mean_abs_relative_error",
        ],
        &rows,
    )?;
    let png = ctx.path("opa-per-packet.png");
    plot_png(
        &png,
        &[
            Panel {
                title: "Fig. 5: per-packet relative error, every packet".into(),
                x_label: "relative error (d^ - d)/d".into(),
                y_label: "CDF".into(),
                log_x: false,
                log_y: false,
                series: all_cdf,
            },
            Panel {
                title: "Fig. 6: large delays and their estimates".into(),
                x_label: "large-delay packet (by true delay)".into(),
                y_label: "delay (us)".into(),
                log_x: false,
                log_y: false,
                series: scatter,
            },
            Panel {
                title: "Fig. 7: relative error of the large delays".into(),
                x_label: "relative error (d^ - d)/d".into(),
                y_label: "CDF".into(),
                log_x: false,
                log_y: false,
                series: large_cdf,
            },
        ],
    )?;
    Ok(vec![csv, png])
}

// ---------------------------------------------------------------------------------------------

fn versus(ctx: &Ctx) -> Result<Vec<PathBuf>> {
    let packets = if ctx.quick { 100_000 } else { 1_000_000 };
    let runs = ctx.runs_or(3, 1);
    let losses = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3];
    let names = ["LDA", "FineComb", "RLI", "OPA", "OPA wavelet"];
    ctx.progress
        .set_length((runs * losses.len() * names.len()) as u64);
    let mut rows = Vec::new();
    // (method, loss index) → per run (mean err, std err, bytes/packet, fraction)
    let mut acc: HashMap<(usize, usize), Vec<[f64; 4]>> = HashMap::new();
    for run in 0..runs {
        let seed = ctx.seed + run as u64;
        for (li, &loss) in losses.iter().enumerate() {
            let t = trace(
                TraceSpec {
                    packets,
                    loss,
                    reorder: 0.0,
                    large: 1e-4,
                },
                seed,
            )?;
            let ds: Vec<f64> = t.delay.values().map(|&d| d as f64).collect();
            let n = ds.len() as f64;
            let mean = ds.iter().sum::<f64>() / n;
            let std = (ds.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n).sqrt();
            let opts = BuildOptions { seed, memory: None };
            let lda = (registry::find("lda").expect("lda").build)(&opts)?;
            let fc = (registry::find("finecomb").expect("finecomb").build)(&opts)?;
            let methods: Vec<Box<dyn Method>> = vec![
                lda,
                fc,
                Box::new(rli_fixed(seed)?),
                Box::new(OpaMethod::new(searched(Config::lossless(seed)))?),
                Box::new(OpaMethod::new(searched(Config::wavelet(seed)))?),
            ];
            for (k, m) in methods.iter().enumerate() {
                let (s, r) = points(&**m, &t);
                let e = m.estimate(s, r)?;
                // RLI's "samples" are its references; every received packet gets a delay
                let placed = if names[k] == "RLI" {
                    t.receiver.len() as f64
                } else {
                    e.samples as f64
                };
                let mean_err = e.mean_ns.map_or(f64::NAN, |m| (m - mean).abs() / mean);
                let std_err = e.std_ns.map_or(f64::NAN, |s| (s - std).abs() / std);
                let per = e.bytes as f64 / packets as f64;
                let frac = placed / t.receiver.len() as f64;
                acc.entry((k, li))
                    .or_default()
                    .push([mean_err, std_err, per, frac]);
                rows.push(vec![
                    names[k].into(),
                    loss.to_string(),
                    run.to_string(),
                    mean_err.to_string(),
                    std_err.to_string(),
                    e.bytes.to_string(),
                    per.to_string(),
                    (per / 1500.0).to_string(),
                    frac.to_string(),
                ]);
                ctx.progress.inc(1);
            }
        }
    }
    let csv = ctx.path("opa-vs.csv");
    write_csv(
        &csv,
        &[
            "method",
            "loss",
            "run",
            "mean_rel_err",
            "std_rel_err",
            "bytes",
            "bytes_per_packet",
            "overhead_packets_per_packet",
            "fraction_recovered",
        ],
        &rows,
    )?;
    let panel = |col: usize, title: &str, y: &str, log_y: bool| {
        let mut series: Vec<Series> = names
            .iter()
            .enumerate()
            .map(|(k, name)| {
                let mut points = Vec::new();
                let mut err = Vec::new();
                for (li, &loss) in losses.iter().enumerate() {
                    let xs: Vec<f64> = acc
                        .get(&(k, li))
                        .map(|v| v.iter().map(|a| a[col]).collect())
                        .unwrap_or_default();
                    let (m, h) = mean_ci95(&xs);
                    let m = if col == 2 { m / 1500.0 } else { m };
                    let h = if col == 2 { h / 1500.0 } else { h };
                    let lo = (m - h).max(1e-12);
                    points.push((loss, m.max(1e-12)));
                    err.push((lo, (m + h).max(lo)));
                }
                Series {
                    name: (*name).into(),
                    points,
                    err: Some(err),
                }
            })
            .collect();
        // an error of 0 (OPA's) sits on the axis' floor, named in the legend
        if col < 2
            && let Some(floor) = super::plot::exact_floor(&series, 1e-12)
        {
            series.push(floor);
        }
        Panel::over_loss_rate(title, y, log_y, series)
    };
    let png = ctx.path("opa-vs.png");
    plot_png(
        &png,
        &[
            panel(
                0,
                "(a) error of the average delay",
                "|relative error|",
                true,
            ),
            panel(
                1,
                "(b) error of the standard deviation",
                "|relative error|",
                true,
            ),
            panel(2, "(c) overhead", "1500-byte packets per packet", true),
            panel(3, "(d) delays recovered", "fraction", false),
        ],
    )?;
    Ok(vec![csv, png])
}

#[cfg(test)]
mod tests {
    use super::super::testing::{csv_rows, quick_ctx};
    use super::*;

    #[test]
    fn traces_are_what_they_say() {
        let t = trace(
            TraceSpec {
                packets: 50_000,
                loss: 1e-3,
                reorder: 1e-3,
                large: 1e-3,
            },
            3,
        )
        .unwrap();
        assert_eq!(t.sender.len(), 50_000);
        let lost = t.sender.len() - t.receiver.len();
        assert!((20..=90).contains(&lost), "{lost}");
        assert!(!t.large.is_empty());
        for id in &t.large {
            assert!(t.delay[id] >= LARGE_NS as i64);
        }
        assert!(t.delay.values().all(|&d| d > 0));
    }

    #[test]
    fn quick_experiments_run() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = quick_ctx(dir.path());
        for run in [groups, per_packet, versus] {
            for f in run(&ctx).unwrap() {
                assert!(
                    std::fs::metadata(&f).unwrap().len() > 100,
                    "{}",
                    f.display()
                );
            }
        }
        // Fig. 4's trend: with enough groups every delay is recovered, with too few none
        let rows = csv_rows(&dir.path().join("opa-groups.csv"));
        let frac = |loss: &str, g: &str, e: &str| -> f64 {
            rows.iter()
                .find(|r| &r[0] == loss && &r[1] == g && &r[2] == e)
                .map(|r| r[7].parse().unwrap())
                .unwrap()
        };
        assert!(frac("0.002", "1000", "2") > 0.99);
        assert!(frac("0.002", "5", "2") < 0.01);
        assert!(frac("0.002", "100", "2") > frac("0.002", "100", "1"));
        // OPA's per-packet delays are exact; RLI's are not
        let rows = csv_rows(&dir.path().join("opa-per-packet.csv"));
        for r in rows.iter().filter(|r| &r[0] == "OPA") {
            assert_eq!(r[3].parse::<f64>().unwrap(), 0.0, "{r:?}");
        }
        let rli_large = rows
            .iter()
            .find(|r| &r[0] == "RLI 1/1000" && &r[1] == "large" && &r[2] == "0.5")
            .unwrap();
        assert!(rli_large[3].parse::<f64>().unwrap() < -0.5, "{rli_large:?}");
        // Fig. 8: OPA recovers nearly every delay (all of them up to 3·10⁻⁴ loss) with the
        // exact mean; LDA far fewer
        let rows = csv_rows(&dir.path().join("opa-vs.csv"));
        for r in &rows {
            let f: f64 = r[8].parse().unwrap();
            let loss: f64 = r[1].parse().unwrap();
            match &r[0] {
                "OPA" if loss < 5e-4 => {
                    assert!(f > 0.999, "{r:?}");
                    assert_eq!(r[3].parse::<f64>().unwrap(), 0.0, "{r:?}");
                }
                "OPA" => assert!(f > 0.99, "{r:?}"),
                "LDA" => assert!(f < 0.5, "{r:?}"),
                _ => {}
            }
        }
    }
}
