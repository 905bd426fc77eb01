//! LDS costs: recording (per packet, both points do it) and querying every flow.
//!
//! Goals of issue 5: ≥ 20 M records/s/core for R = 4, k = 5; every one of 146 000 flows
//! queried in under a second.

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use owl_core::lds::{Config, FlowQuery, Layout, Synopsis};
use owl_core::{FlowKey, PacketRecord};

const FLOWS: u32 = 146_000;

fn key(i: u32) -> FlowKey {
    FlowKey {
        proto: 6,
        src: IpAddr::V4((0x0a00_0000 | (i & 0x00ff_ffff)).into()),
        dst: IpAddr::V4((0xac10_0000 | (i.wrapping_mul(7919) & 0x000f_ffff)).into()),
        sport: 1024 + (i % 60_000) as u16,
        dport: 443,
    }
}

/// `n` records of 146 000 flows with a Zipf-like skew (flow `i` ∝ 1/(i+1)), 27 kpps apart.
fn records(n: usize) -> Vec<PacketRecord> {
    let keys: Vec<FlowKey> = (0..FLOWS).map(key).collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..n)
        .map(|i| {
            let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
            let f = ((FLOWS as f64).powf(u) - 1.0) as usize % FLOWS as usize;
            PacketRecord {
                ts_ns: 1_767_225_600_000_000_000 + i as u64 * 37_000,
                id: next(),
                flow: keys[f],
                len: 500,
            }
        })
        .collect()
}

fn record(c: &mut Criterion) {
    let recs = records(1 << 20);
    let hot = &recs[..4096];
    let mut g = c.benchmark_group("lds_record");
    g.sample_size(20);
    for (name, cfg) in [
        ("R4_k5_multibank_87500", Config::multi_bank(87_500, 1)),
        (
            "R4_k5_full_rate_87500",
            Config::multi_bank(87_500, 1)
                .with_uniform_sampling(1.0)
                .unwrap(),
        ),
        ("R4_k1_17500", Config::single_bank(4, 17_500, 1)),
        // a sketch that fits in L1: the cost of the hashes alone
        (
            "R4_k5_in_cache_256",
            Config::multi_bank(256, 1)
                .with_uniform_sampling(1.0)
                .unwrap(),
        ),
    ] {
        let l = Layout::new(cfg);
        // what `owl` does: batches of records (two passes per block of 32)
        g.throughput(Throughput::Elements(recs.len() as u64));
        g.bench_function(format!("{name}_batch"), |b| {
            let mut s = Synopsis::new(l.clone());
            b.iter(|| s.record_batch(black_box(&recs)))
        });
        // what `owl compare` and `owl record` do: a batch of 4 096 records fresh from the
        // dissector, still in cache, fed to every method in turn
        g.throughput(Throughput::Elements(hot.len() as u64));
        g.bench_function(format!("{name}_hot_batch_4096"), |b| {
            let mut s = Synopsis::new(l.clone());
            b.iter(|| s.record_batch(black_box(hot)))
        });
        // one call per packet
        g.throughput(Throughput::Elements(recs.len() as u64));
        g.bench_function(format!("{name}_one_by_one"), |b| {
            let mut s = Synopsis::new(l.clone());
            b.iter(|| {
                for r in &recs {
                    s.record(black_box(r));
                }
            })
        });
    }
    g.finish();
}

fn query(c: &mut Criterion) {
    let recs = records(2_000_000);
    let keys: Vec<FlowKey> = (0..FLOWS).map(key).collect();
    let mut g = c.benchmark_group("lds_query_all_flows");
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.sample_size(10);
    for (name, cfg) in [
        ("R4_k5_multibank_87500", Config::multi_bank(87_500, 1)),
        ("R4_k1_17500", Config::single_bank(4, 17_500, 1)),
    ] {
        let l = Layout::new(cfg);
        let (mut s, mut r) = (Synopsis::new(l.clone()), Synopsis::new(l));
        for p in &recs {
            s.record(p);
            r.record(&PacketRecord {
                ts_ns: p.ts_ns + 100_000 + (p.id % 50_000),
                ..*p
            });
        }
        g.bench_function(format!("{name}_delay"), |b| {
            b.iter(|| {
                let mut q = FlowQuery::new(&s, &r).unwrap();
                let mut acc = 0.0;
                for k in &keys {
                    acc += q.delay(k).mean_ns.unwrap_or(0.0);
                }
                black_box(acc)
            })
        });
        g.bench_function(format!("{name}_everything"), |b| {
            b.iter(|| {
                let mut q = FlowQuery::new(&s, &r).unwrap();
                let mut acc = 0.0;
                for k in &keys {
                    let e = q.flow(k);
                    acc += e.mean_ns.unwrap_or(0.0) + e.packets.unwrap_or(0.0);
                }
                black_box(acc)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, record, query);
criterion_main!(benches);
