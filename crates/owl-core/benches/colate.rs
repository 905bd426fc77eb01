//! COLATE's costs (issue 13): recording (≥ 50 M records/s on one core: one flow hash and one
//! counter update per packet, §1.4; a dump is one pass over the packed cells), a one-flow
//! query over 24 h of epochs (< 10 ms), and the standard deviation with γ = 1 000 virtual
//! repetitions (< 100 ms).
//!
//! "24 h of epochs": the 1 MiB plan (n = 441 505 = ⌊M/b⌋, T ≈ 7.8·10¹⁰) on an ICSI-like link
//! (§6.1: 46.9 M packets in 41.1 h, 317 packets/s) with a 1 ms unit dumps every
//! `√(2·u·T/rate)` ≈ 700 s: 122 epochs a day at each point. The epochs here hold 2 000
//! packets each — a query's cost depends on the epochs and `m`, not on what they hold. The
//! queries here run on epochs in RAM, decoded or (`*_in_place`) read in place from their
//! encodings; `owl experiment colate-query` times the same from two SQLite epoch stores.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use owl_core::colate::{
    Config, Epoch, EpochReader, Estimator, Layout, Mapping, Query, Recorder, query, query_flow,
};
use owl_core::{FlowKey, PacketRecord};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

const N: usize = 1 << 20;
const T0: u64 = 1_767_225_600_000_000_000;

fn key(i: u32) -> FlowKey {
    FlowKey {
        proto: 6,
        src: std::net::IpAddr::V4((0x0a00_0000 + i).into()),
        dst: std::net::IpAddr::V4(0xac10_0001u32.into()),
        sport: (i % 60_000) as u16,
        dport: 443,
    }
}

/// 1 M records of `flows` flows, 200 ns apart.
fn records(flows: u32) -> Vec<PacketRecord> {
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    (0..N)
        .map(|i| PacketRecord {
            ts_ns: T0 + 200 * i as u64,
            id: rng.random(),
            flow: key(rng.random_range(0..flows)),
            len: 500,
        })
        .collect()
}

fn plan(mib: u64) -> Config {
    Config::for_level(owl_core::colate::Level::Medium, mib << 20, 1).unwrap()
}

/// Flows of the records: a million spread packets over every counter (the load the plan
/// assumes: `T` shared by all `n` counters); 10 000 flows put the whole load on ~40 % of the
/// 1 MiB plan's counters (and ~4 % of the 10 MiB plan's), which then overflow their `b` bits.
const FLOWS: u32 = 1_000_000;
const FEW_FLOWS: u32 = 10_000;

fn record(c: &mut Criterion) {
    let recs = records(FLOWS);
    let few = records(FEW_FLOWS);
    let mut g = c.benchmark_group("colate_record");
    g.throughput(Throughput::Elements(N as u64));
    // the one hash per packet alone: the recorder's (folded words of the 5-tuple), and the
    // CLE2 epochs' xxh3 of the 37-byte canonical key
    let hasher = owl_core::hash::KeyHasher::new(1);
    g.bench_function("flow_hash_only", |b| {
        b.iter(|| {
            black_box(&recs)
                .iter()
                .fold(0u64, |a, x| a ^ hasher.hash(&x.flow))
        });
    });
    g.bench_function("flow_hash_only_cle2", |b| {
        b.iter(|| {
            black_box(&recs)
                .iter()
                .fold(0u64, |a, x| a ^ x.flow.hash(1))
        });
    });
    for mib in [1u64, 10] {
        let layout = Layout::new(plan(mib));
        g.bench_function(format!("{mib}MiB/records"), |b| {
            let mut r = Recorder::new(layout.clone());
            b.iter(|| {
                for x in black_box(&recs) {
                    r.record(x);
                }
                r.take_sealed()
            });
        });
        // hashes of 128 packets first, then their updates (what record_batch does)
        g.bench_function(format!("{mib}MiB/record_batch"), |b| {
            let mut r = Recorder::new(layout.clone());
            b.iter(|| {
                r.record_batch(black_box(&recs));
                r.take_sealed()
            });
        });
        g.bench_function(format!("{mib}MiB/record_batch_10k_flows"), |b| {
            let mut r = Recorder::new(layout.clone());
            b.iter(|| {
                r.record_batch(black_box(&few));
                r.take_sealed()
            });
        });
        // the counter update alone, flow hashes precomputed (a switch hashes the 5-tuple once
        // for forwarding already)
        let hashes: Vec<(u64, u64, u64)> = recs
            .iter()
            .map(|x| (x.ts_ns, x.id, layout.map.flow_hash(&x.flow)))
            .collect();
        g.bench_function(format!("{mib}MiB/hashed"), |b| {
            let mut r = Recorder::new(layout.clone());
            b.iter(|| {
                for &(ts, id, fh) in black_box(&hashes) {
                    r.record_hashed(ts, id, fh);
                }
                r.take_sealed()
            });
        });
    }
    g.finish();
}

/// `k` epochs of the 1 MiB plan (1 ms unit) at each point, each holding 2 000 packets of
/// 2 000 flows (flow 0 among them) over 710 s, with delays of 100–200 µs.
fn epochs(k: usize) -> (Vec<Epoch>, Vec<Epoch>) {
    let cfg = plan(1).with_unit(1_000_000).unwrap();
    let layout = Layout::new(cfg);
    let mut rng = Pcg64Mcg::seed_from_u64(2);
    let (mut s, mut r) = (Recorder::new(layout.clone()), Recorder::new(layout));
    let per = 2_000u64;
    let span = 710_000_000_000u64;
    let gap = span / per;
    for e in 0..k as u64 {
        for i in 0..per {
            let ts = T0 + e * span + i * gap;
            let rec = PacketRecord {
                ts_ns: ts,
                id: rng.random(),
                flow: key(rng.random_range(0..2_000)),
                len: 500,
            };
            s.record(&rec);
            r.record(&PacketRecord {
                ts_ns: ts + rng.random_range(100_000..200_000),
                ..rec
            });
        }
        s.dump_open();
        r.dump_open();
    }
    (s.take_epochs(), r.take_epochs())
}

fn queries(c: &mut Criterion) {
    let mut g = c.benchmark_group("colate_query");
    g.sample_size(20);
    // a day of epochs at each point
    let k = 122usize;
    let (s, r) = epochs(k);
    let q = Query {
        flow: key(0),
        from_ns: 0,
        to_ns: u64::MAX,
        horizon_ns: 0,
        gamma: 0,
        estimator: Estimator::Paper,
        std: Default::default(),
        confidence: 0.0,
    };
    g.bench_function(format!("mean/{k}_epochs"), |b| {
        b.iter(|| query(black_box(&s), black_box(&r), &q).unwrap())
    });
    g.bench_function(format!("mean_raw/{k}_epochs"), |b| {
        let q = Query {
            estimator: Estimator::Raw,
            std: Default::default(),
            ..q
        };
        b.iter(|| query(black_box(&s), black_box(&r), &q).unwrap())
    });
    g.bench_function(format!("std_gamma_1000/{k}_epochs"), |b| {
        let q = Query { gamma: 1_000, ..q };
        b.iter(|| query(black_box(&s), black_box(&r), &q).unwrap())
    });
    // what `owl query` does with the store: each epoch read in place, the header and the
    // flow's m cells (here from encoded bytes in RAM; the store reads them by blob I/O)
    let enc = |v: &[Epoch]| -> Vec<Vec<u8>> {
        v.iter()
            .map(|e| {
                let mut b = Vec::new();
                e.encode(&mut b);
                b
            })
            .collect()
    };
    let (se, re) = (enc(&s), enc(&r));
    let map = Mapping::new(s[0].seed, s[0].m, &[1.0], s[0].placement);
    let fh = map.flow_hash(&q.flow);
    let cells = |v: &[Vec<u8>]| {
        v.iter()
            .map(|b| EpochReader::open(&b[..]).unwrap().flow(&map, fh).unwrap())
            .collect::<Vec<_>>()
    };
    for (name, gamma) in [("mean_in_place", 0u32), ("std_gamma_1000_in_place", 1_000)] {
        g.bench_function(format!("{name}/{k}_epochs"), |b| {
            let q = Query { gamma, ..q };
            b.iter(|| query_flow(&cells(black_box(&se)), &cells(black_box(&re)), &q).unwrap())
        });
    }
    g.bench_function(format!("std_gamma_1000_raw/{k}_epochs"), |b| {
        let q = Query {
            gamma: 1_000,
            estimator: Estimator::Raw,
            std: Default::default(),
            ..q
        };
        b.iter(|| query(black_box(&s), black_box(&r), &q).unwrap())
    });
    g.finish();
}

criterion_group!(benches, record, queries);
criterion_main!(benches);
