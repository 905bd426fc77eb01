//! LDA per-packet record cost and estimate cost (issue 3: ≥ 100 M records/s on one core for the
//! default two-bank LDA; estimate of 1024 rows in microseconds), and the probe emulation's
//! sender for comparison. The default carries the identity digest (16-byte rows); the
//! `*_digest_off` cases are the paper's LDA (12-byte rows), for the digest's cost.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use owl_core::PacketRecord;
use owl_core::lda::{Config, Sampling, Synopsis, estimate};
use owl_core::probe;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

const N: usize = 1 << 20;
/// A batch that fits in L2 (4096 records × 64 B = 256 KiB).
const HOT: usize = 4096;
const T0: u64 = 1_767_225_600_000_000_000;

/// Pre-built records: random identities, 200-ns spacing (5 M packets/s, the paper's setup).
/// A `PacketRecord` is 64 bytes (timestamp, identity, flow key, length), so a 1 M-record
/// batch streams 64 MiB from memory; `id_ts_slices` reads only the 16 bytes LDA needs.
fn records() -> Vec<PacketRecord> {
    let mut rng = Pcg64Mcg::seed_from_u64(1);
    (0..N)
        .map(|i| PacketRecord {
            ts_ns: T0 + 200 * i as u64,
            id: rng.random(),
            ..Default::default()
        })
        .collect()
}

fn record(c: &mut Criterion) {
    eprintln!(
        "PacketRecord is {} bytes",
        std::mem::size_of::<PacketRecord>()
    );
    let recs = records();
    let ids: Vec<u64> = recs.iter().map(|r| r.id).collect();
    let ts: Vec<u64> = recs.iter().map(|r| r.ts_ns).collect();
    let mut g = c.benchmark_group("lda_record");
    g.throughput(Throughput::Elements(N as u64));
    let configs = [
        ("default_2x512", Config::paper_default(1)),
        (
            "default_2x512_digest_off",
            Config::paper_default(1).with_digest(false),
        ),
        (
            "leading_zeros_2x512",
            Config::tuned_leading_zeros(512, &[0.005, 0.1], 5_000_000, 1).unwrap(),
        ),
        (
            "every_packet_1x1024",
            Config::new(1024, Sampling::Probabilities(vec![1.0]), 1).unwrap(),
        ),
        (
            "every_packet_1x1024_digest_off",
            Config::new(1024, Sampling::Probabilities(vec![1.0]), 1)
                .unwrap()
                .with_digest(false),
        ),
    ];
    for (name, cfg) in &configs {
        g.bench_function(format!("{name}/records"), |b| {
            let mut a = Synopsis::new(cfg);
            b.iter(|| a.record_batch(black_box(&recs)));
        });
        g.bench_function(format!("{name}/id_ts_slices"), |b| {
            let mut a = Synopsis::new(cfg);
            b.iter(|| a.record_all(black_box(&ids), black_box(&ts)));
        });
    }
    // the same loop over a batch that stays in cache (the dissector hands batches over hot):
    // what one record costs when memory bandwidth is not the limit
    let hot = &recs[..HOT];
    for (name, cfg) in &configs {
        g.throughput(Throughput::Elements(HOT as u64));
        g.bench_function(format!("{name}/records_hot_{HOT}"), |b| {
            let mut a = Synopsis::new(cfg);
            b.iter(|| a.record_batch(black_box(hot)));
        });
    }
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("probe_sender_144Hz/records", |b| {
        let cfg = probe::Config::new(144.0, 1).unwrap();
        b.iter(|| {
            let mut s = probe::SenderSynopsis::new(&cfg);
            for r in black_box(&recs) {
                s.record(r.id, r.ts_ns);
            }
            s.probes().len()
        });
    });
    g.finish();
}

fn estimate_cost(c: &mut Criterion) {
    let recs = records();
    let cfg = Config::new(1024, Sampling::Probabilities(vec![0.05]), 1).unwrap();
    let mut s = Synopsis::new(&cfg);
    let mut r = Synopsis::new(&cfg);
    for (i, rec) in recs.iter().enumerate() {
        s.record(rec.id, rec.ts_ns);
        if i % 500 != 0 {
            r.record(rec.id, rec.ts_ns + 200);
        }
    }
    c.bench_function("lda_estimate/1x1024_rows", |b| {
        b.iter(|| estimate(black_box(&s), black_box(&r)).unwrap())
    });
    for (name, cfg) in [
        ("default_2x512_rows", Config::paper_default(1)),
        (
            "default_2x512_rows_digest_off",
            Config::paper_default(1).with_digest(false),
        ),
    ] {
        let (mut s, mut r) = (Synopsis::new(&cfg), Synopsis::new(&cfg));
        for (i, rec) in recs.iter().enumerate() {
            s.record(rec.id, rec.ts_ns);
            if i % 500 != 0 {
                r.record(rec.id, rec.ts_ns + 200);
            }
        }
        c.bench_function(&format!("lda_estimate/{name}"), |b| {
            b.iter(|| estimate(black_box(&s), black_box(&r)).unwrap())
        });
        let mut bytes = Vec::new();
        s.encode(&mut bytes);
        c.bench_function(&format!("lda_decode/{name}"), |b| {
            b.iter(|| Synopsis::decode(&cfg, black_box(&bytes)).unwrap())
        });
    }
}

criterion_group!(benches, record, estimate_cost);
criterion_main!(benches);
