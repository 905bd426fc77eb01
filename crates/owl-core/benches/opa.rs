//! OPA costs (issue 12, item 10): recording per packet at each point, compressing the
//! sender's timestamps when the interval is sent (`seal_*`), recovery of one group
//! with 0, 1 and 2 errors (Algorithm 1), and a whole 1 M-packet interval at 10⁻⁴ and 10⁻³
//! loss (recovery, timestamp decoding and pairing) — the work `owl compare` does for OPA.
//!
//! Goals: ≥ 30 M records/s on one core at the sender; recovery never the bottleneck at 10⁻³
//! loss (an interval's recovery well below the time its packets took to record).

use std::sync::Arc;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use owl_core::PacketRecord;
use owl_core::hash::HashFamily;
use owl_core::method::PointSynopsis;
use owl_core::opa::cah::{self, MAX_ROWS};
use owl_core::opa::recovery::{Limits, recover};
use owl_core::opa::{Config, Receiver, Sender, recover_pair};
use std::hint::black_box;

/// `n` (identity, timestamp) records about 1 µs apart.
fn records(n: usize, seed: u64) -> Vec<(u64, u64)> {
    let h = HashFamily::new(seed).member(0);
    (0..n as u64)
        .map(|i| {
            (
                h.hash(i),
                1_800_000_000_000_000_000 + i * 1000 + h.hash(!i) % 700,
            )
        })
        .collect()
}

fn record(c: &mut Criterion) {
    let recs = records(1 << 20, 1);
    let mut g = c.benchmark_group("opa/record");
    g.throughput(Throughput::Elements(recs.len() as u64));
    for (name, cfg) in [
        ("sender_lossless", Config::lossless(1)),
        ("sender_wavelet", Config::wavelet(1)),
        (
            "sender_paper_g1000",
            Config {
                groups: 1000,
                delimiter_bits: 0,
                ..Config::lossless(1)
            },
        ),
    ] {
        let cfg = Arc::new(cfg);
        g.bench_function(name, |b| {
            b.iter_batched(
                || Sender::new(cfg.clone()),
                |mut s| {
                    for &(i, t) in &recs {
                        s.record_packet(i, t);
                    }
                    s
                },
                BatchSize::LargeInput,
            )
        });
    }
    // compressing the interval's timestamps when it is sent (once per interval)
    for (name, cfg) in [
        ("seal_lossless", Config::lossless(1)),
        ("seal_wavelet", Config::wavelet(1)),
    ] {
        let mut s = Sender::new(Arc::new(cfg));
        for &(i, t) in &recs {
            s.record_packet(i, t);
        }
        g.bench_function(name, |b| {
            b.iter_batched(|| s.clone(), |s| s.wire(), BatchSize::LargeInput)
        });
    }
    let cfg = Arc::new(Config::lossless(1));
    g.bench_function("receiver", |b| {
        b.iter_batched(
            || Receiver::new(cfg.clone()),
            |mut r| {
                for &(i, t) in &recs {
                    r.record_packet(i, t);
                }
                r
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// A group of `w` packets and what arrives of it: `lost` losses and `moved` packets each
/// overtaken by the next one.
fn group(w: usize, lost: usize, moved: usize) -> (cah::Cah, Vec<u64>) {
    let h = HashFamily::new(7).member(1);
    let xs: Vec<u64> = (0..w as u64).map(|i| h.hash(i)).collect();
    let mut b = [0u64; MAX_ROWS];
    for (j, &x) in xs.iter().enumerate() {
        cah::accumulate(&mut b, 3, j as u64 + 1, cah::augmented(x, j as u64 + 1));
    }
    let mut got = xs;
    for k in 0..lost {
        got.remove((k + 1) * w / (lost + 2));
    }
    for k in 0..moved {
        let i = (2 * k + 1) * got.len() / (2 * moved + 1);
        got.swap(i, i + 1);
    }
    (b, got)
}

fn recovery(c: &mut Criterion) {
    let lim = Limits {
        max_errors: 2,
        shift: 16,
        max_mappings: 1 << 24,
        max_work: u64::MAX,
    };
    let mut g = c.benchmark_group("opa/recover_group");
    for w in [128usize, 1000] {
        for (name, lost, moved) in [
            ("0_errors", 0, 0),
            ("1_loss", 1, 0),
            ("2_losses", 2, 0),
            ("1_move", 0, 1),
            ("loss_and_move", 1, 1),
        ] {
            let (b, got) = group(w, lost, moved);
            let r = recover(&b, 3, w, &got, &cah::augmented, &lim);
            assert!(r.result.is_ok(), "{name} w {w}");
            g.bench_function(format!("w{w}_{name}"), |bn| {
                bn.iter(|| recover(black_box(&b), 3, w, black_box(&got), &cah::augmented, &lim))
            });
        }
    }
    g.finish();
}

/// One interval of 1 M packets at each point, `loss` of them lost and `reorder` overtaken by
/// the next packet.
fn interval(cfg: &Arc<Config>, loss: f64, reorder: f64) -> (Sender, Receiver) {
    let recs = records(1_000_000, 3);
    let h = HashFamily::new(9).member(2);
    let every = (1.0 / loss) as u64;
    let swap_every = if reorder > 0.0 {
        (1.0 / reorder) as u64
    } else {
        u64::MAX
    };
    let mut s = Sender::new(cfg.clone());
    let mut r = Receiver::new(cfg.clone());
    let mut got: Vec<PacketRecord> = Vec::with_capacity(recs.len());
    for &(i, t) in &recs {
        s.record_packet(i, t);
        if !h.hash(i).is_multiple_of(every) {
            got.push(PacketRecord {
                ts_ns: t + 50_000 + h.hash(!i) % 20_000,
                id: i,
                ..Default::default()
            });
        }
    }
    let mut k = 0;
    while k + 1 < got.len() {
        if h.hash(k as u64) % swap_every == 1 {
            got.swap(k, k + 1);
            k += 2;
        } else {
            k += 1;
        }
    }
    r.record_batch(&got);
    (s, r)
}

fn pair(c: &mut Criterion) {
    let mut g = c.benchmark_group("opa/interval_1M");
    g.sample_size(10);
    g.throughput(Throughput::Elements(1_000_000));
    let cfg = Arc::new(Config::lossless(1));
    for (loss, reorder) in [(1e-4, 1e-4), (1e-3, 0.0), (1e-3, 1e-3)] {
        let (s, r) = interval(&cfg, loss, reorder);
        let rec = recover_pair(&s, &r).unwrap();
        eprintln!(
            "loss {loss:e} reorder {reorder:e}: {} of {} received placed, {} unrecovered groups ({} past the search budget), {} mappings, search work {:.1} % of {:.0} ms",
            rec.delays().count(),
            rec.stats.receiver_packets,
            rec.stats.unrecovered_groups,
            rec.stats.over_budget,
            rec.stats.mappings,
            100.0 * rec.stats.work as f64 / rec.stats.work_budget as f64,
            rec.stats.work_budget as f64 / 1e6
        );
        g.bench_function(
            format!("recover_pair_loss_{loss:e}_reorder_{reorder:e}"),
            |b| {
                // a fresh receiver each time: it keeps its last recovery
                b.iter_batched(
                    || r.clone(),
                    |r| recover_pair(&s, &r),
                    BatchSize::LargeInput,
                )
            },
        );
    }
    g.finish();
}

criterion_group!(benches, record, recovery, pair);
criterion_main!(benches);
