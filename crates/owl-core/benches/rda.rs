//! RDA costs (issue 4, item 9): recording (k = 2) on pre-built records, decoding d = 1 000 and
//! 10 000 (m = 2d per bank), averaging and the std over 20 000 buckets, and a whole
//! late-binding interval of 1 M packets at each point.
//!
//! Goals: ≥ 30 M records/s/core; decode of d = 10 000 under 5 ms; averaging 20 000 buckets well
//! under the paper's 3 ms (§IX, Fig. 15).

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use owl_core::finecomb;
use owl_core::hash::HashFamily;
use owl_core::method::Role;
use owl_core::rda::estimate::{self, Pairing, StdEstimator};
use owl_core::rda::{self, Rda, Subtraction, decode_faithful};
use std::hint::black_box;

/// `n` (identity, timestamp) records.
fn records(n: usize, seed: u64) -> Vec<(u64, u64)> {
    let h = HashFamily::new(seed).member(0);
    (0..n as u64)
        .map(|i| (h.hash(i), 1_800_000_000_000_000_000 + i * 1000))
        .collect()
}

fn record(c: &mut Criterion) {
    let recs = records(1 << 20, 1);
    let mut g = c.benchmark_group("rda/record");
    g.throughput(Throughput::Elements(recs.len() as u64));
    g.bench_function("rda_insert_k2_m2500", |b| {
        let mut r = Rda::new(2, 2500, 1).unwrap();
        b.iter(|| {
            for &(i, t) in &recs {
                r.insert(i, t);
            }
            black_box(&r);
        })
    });
    for (name, cfg) in [
        (
            "point_fixed_k3_m1666_cache_and_rda",
            rda::Config::fixed(1666),
        ),
        (
            "point_fixed_k2_m2500_cache_and_rda",
            rda::Config::paper_fixed(),
        ),
        ("point_late_binding_cache_only", rda::Config::default()),
    ] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || rda::Synopsis::new(&cfg, Role::Sender).unwrap(),
                |mut p| {
                    for &(i, t) in &recs {
                        p.record_packet(i, t);
                    }
                    p
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.bench_function("seal_1M_sightings_1pct_duplicates", |b| {
        let cfg = rda::Config::default();
        let mut p = rda::Synopsis::new(&cfg, Role::Sender).unwrap();
        for (k, &(i, t)) in recs.iter().enumerate() {
            p.record_packet(i, t);
            if k % 100 == 0 {
                p.record_packet(i, t + 5);
            }
        }
        b.iter_batched(
            || p.clone(),
            |mut p| {
                p.seal();
                p
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("finecomb_5000", |b| {
        let cfg = finecomb::Config::default();
        let mut p = finecomb::Synopsis::new(&cfg, Role::Sender).unwrap();
        b.iter(|| {
            for &(i, t) in &recs {
                p.record_packet(i, t);
            }
            black_box(&p);
        })
    });
    g.finish();
}

/// Sender and receiver RDAs with `n` common packets and a difference of `d` (half each way).
fn pair(n: usize, d: usize, m: usize) -> (Rda, Rda) {
    let recs = records(n + d, 2);
    let mut s = Rda::new(2, m, 3).unwrap();
    let mut r = Rda::new(2, m, 3).unwrap();
    for (k, &(i, t)) in recs.iter().enumerate() {
        if k < n || k % 2 == 0 {
            s.insert(i, t);
        }
        if k < n || k % 2 == 1 {
            r.insert(i, t + 100_000);
        }
    }
    (s, r)
}

fn decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("rda/decode");
    for d in [1_000usize, 10_000] {
        let (s, r) = pair(200_000, d, 2 * d);
        // k = 2 as in the goal
        // a decodable instance (k = 2 at m = 2d fails ~13 % of the time: check this one)
        let dec = decode_faithful(&mut Subtraction::of(&r, &s).unwrap());
        assert!(dec.complete(), "d = {d}: pick another seed");
        g.throughput(Throughput::Elements(d as u64));
        g.bench_function(format!("d{d}_m{}x2", 2 * d), |b| {
            b.iter(|| {
                let mut sub = Subtraction::of(black_box(&r), black_box(&s)).unwrap();
                decode_faithful(&mut sub)
            })
        });
    }
    g.finish();
}

fn aggregate(c: &mut Criterion) {
    let (s, r) = pair(1_000_000, 0, 10_000);
    let clean = estimate::clean_buckets(&s, &r).unwrap();
    let mut g = c.benchmark_group("rda/aggregate_20000_buckets");
    g.bench_function("mean", |b| {
        b.iter(|| estimate::mean(black_box(&s), black_box(&r), black_box(&clean)))
    });
    g.bench_function("clean_and_mean", |b| {
        b.iter(|| {
            let c = estimate::clean_buckets(black_box(&s), black_box(&r)).unwrap();
            estimate::mean(&s, &r, &c)
        })
    });
    g.bench_function("std_equal_count_unbiased", |b| {
        b.iter(|| {
            let p = estimate::collapse(&s, &r, &clean, Pairing::EqualCount);
            estimate::variance(&p, 100_000.0, StdEstimator::Unbiased)
        })
    });
    g.bench_function("std_index_algorithm3", |b| {
        b.iter(|| {
            let p = estimate::collapse(&s, &r, &clean, Pairing::IndexOrder);
            estimate::variance(&p, 100_000.0, StdEstimator::Algorithm3)
        })
    });
    g.finish();
}

fn late_binding_interval(c: &mut Criterion) {
    let n = 1_000_000;
    let recs = records(n + 2_000, 4);
    let cfg = rda::Config::default();
    let fill = || {
        let mut s = rda::Synopsis::new(&cfg, Role::Sender).unwrap();
        let mut r = rda::Synopsis::new(&cfg, Role::Receiver).unwrap();
        for (k, &(i, t)) in recs.iter().enumerate() {
            if k < n || k % 2 == 0 {
                s.record_packet(i, t);
            }
            if k < n || k % 2 == 1 {
                r.record_packet(i, t + 50_000 + (i % 100_000));
            }
        }
        (s, r)
    };
    let mut g = c.benchmark_group("rda/late_binding_1M_packets_d2000");
    g.sample_size(10);
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("record_both_points_and_estimate", |b| {
        b.iter(|| {
            let (mut s, mut r) = fill();
            rda::reconcile(&mut s, &mut r).unwrap().to_estimate(&cfg)
        })
    });
    let (mut s, mut r) = fill();
    s.seal();
    r.seal();
    g.bench_function("estimate_only_sealed", |b| {
        b.iter_batched(
            || (s.clone(), r.clone()),
            |(mut s, mut r)| rda::reconcile(&mut s, &mut r).unwrap().to_estimate(&cfg),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, record, decode, aggregate, late_binding_interval);
criterion_main!(benches);
