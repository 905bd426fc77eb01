//! OPA's pair side on simulated traces (issue 29, item 2): `owl demo`'s pair (200 000 packets
//! at 100 kpps, FIFO queue, 1 % loss, 0.1 % reordering by ≤ 8, 0.05 % duplicates) and a 1 Mpps
//! FIFO pair (1 M packets, 10⁻³ loss, 0.1 % reordering by ≤ 8), each point's synopsis recorded
//! once, then the recovery and the estimate (`recover_pair_on` on one thread, `to_estimate`)
//! for `opa` and `opa-wavelet` at `cpu=1` (the default budget) and, for `opa`, `cpu=1000`
//! (searching until every group is settled: the same work before and after a change, so its
//! time is the speed of recovery). Each run prints the packets placed and the budget's work, so a faster
//! recovery that places fewer packets shows.
//!
//!   cargo bench -p owl-trace --bench opa_traces

use std::sync::Arc;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use owl_core::PacketRecord;
use owl_core::method::PointSynopsis;
use owl_core::opa::method::recover_pair_on;
use owl_core::opa::{Config, Receiver, Sender, to_estimate};
use owl_trace::identity::DEFAULT_IDENTITY_SEED;
use owl_trace::sim::{
    DelayModel, LossModel, PathConfig, Reorder, SimConfig, Simulation, TrafficConfig, TrafficSource,
};

fn trace(
    packets: u64,
    rate: f64,
    delay_ns: f64,
    loss: f64,
    dup: f64,
) -> (Vec<PacketRecord>, Vec<PacketRecord>) {
    let cfg = SimConfig {
        seed: 1,
        traffic: TrafficSource::Synthetic(TrafficConfig {
            packets,
            rate_pps: rate,
            ..TrafficConfig::default()
        }),
        path: PathConfig {
            delay: DelayModel::weibull_with_mean(delay_ns, 0.7),
            fifo: true,
            loss: LossModel::Uniform(loss),
            reorder: Some(Reorder {
                fraction: 0.001,
                max_displacement: 8,
            }),
            duplicate: dup,
            ..PathConfig::default()
        },
        ..SimConfig::default()
    };
    Simulation::run(&cfg)
        .expect("a valid simulation")
        .records(DEFAULT_IDENTITY_SEED)
}

fn points(cfg: Config, s: &[PacketRecord], r: &[PacketRecord]) -> (Sender, Receiver) {
    let cfg = Arc::new(cfg);
    let mut a = Sender::new(cfg.clone());
    let mut b = Receiver::new(cfg);
    a.record_batch(s);
    b.record_batch(r);
    // what the sender sends is computed when it is sent, not at the pair
    let _ = a.wire();
    (a, b)
}

fn pair_side(c: &mut Criterion) {
    for (name, (s, r)) in [
        ("demo", trace(200_000, 100_000.0, 10_000.0, 0.01, 0.0005)),
        (
            "fifo_1Mpps",
            trace(1_000_000, 1_000_000.0, 100_000.0, 0.001, 0.0),
        ),
    ] {
        let mut g = c.benchmark_group(format!("opa_traces/{name}"));
        g.sample_size(10);
        for (method, base) in [
            ("opa", Config::lossless(1)),
            ("opa-wavelet", Config::wavelet(1)),
        ] {
            // Algorithm 1 on 3 rows spends any budget on groups it cannot solve (a minute at
            // cpu=1000 on the 1 Mpps pair): the wavelet at the default budget only
            let cpus: &[f64] = if method == "opa" {
                &[1.0, 1000.0]
            } else {
                &[1.0]
            };
            for &cpu in cpus {
                let cfg = Config {
                    cpu,
                    ..base.clone()
                };
                let (a, b) = points(cfg.clone(), &s, &r);
                let rec = recover_pair_on(&a, &b.clone(), 1).expect("a recovery");
                eprintln!(
                    "{name} {method} cpu={cpu}: {} of {} received placed, work {:.1} % of {:.0} ms ({:.1} % of it fixed)",
                    rec.delays().count(),
                    rec.stats.receiver_packets,
                    100.0 * rec.stats.work as f64 / rec.stats.work_budget as f64,
                    rec.stats.work_budget as f64 / 1e6,
                    100.0 * rec.stats.fixed_work as f64 / rec.stats.work.max(1) as f64,
                );
                g.bench_function(format!("{method}_cpu{cpu}"), |bn| {
                    // a fresh receiver each time: it keeps its last recovery
                    bn.iter_batched(
                        || b.clone(),
                        |b| {
                            let rec = recover_pair_on(&a, &b, 1).expect("a recovery");
                            to_estimate(&cfg, &rec)
                        },
                        BatchSize::LargeInput,
                    )
                });
            }
        }
        g.finish();
    }
}

criterion_group!(benches, pair_side);
criterion_main!(benches);
