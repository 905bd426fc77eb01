//! Throughput of the shared pipeline: reading + dissecting + identity hashing a capture, and
//! exact ground-truth matching of a capture pair, read-everything and streaming.
//!
//! Run with `cargo bench -p owl-trace --bench pipeline`. Setup (simulating the traces) is not
//! timed.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use owl_core::exact::{Matcher, TruthOptions};
use owl_core::interval::Intervals;
use owl_core::pipeline::{StreamingTruth, TruthConfig};
use owl_trace::capture::CaptureFormat;
use owl_trace::identity::DEFAULT_IDENTITY_SEED;
use owl_trace::records::RecordReader;
use owl_trace::sim::{SimConfig, Simulation, TrafficConfig, TrafficSource};

fn sim(packets: u64) -> Simulation {
    let cfg = SimConfig {
        traffic: TrafficSource::Synthetic(TrafficConfig {
            packets,
            rate_pps: 1e6,
            ..Default::default()
        }),
        path: owl_trace::sim::PathConfig {
            loss: owl_trace::sim::LossModel::Uniform(0.01),
            fifo: true,
            ..Default::default()
        },
        ..Default::default()
    };
    Simulation::run(&cfg).expect("simulate")
}

fn read_dissect_identify(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let s = sim(1_000_000);
    let (sp, _) = s
        .write(dir.path(), CaptureFormat::Pcap, &mut |_, _| {})
        .unwrap();
    let mut g = c.benchmark_group("capture");
    g.throughput(Throughput::Elements(1_000_000));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(10));
    g.bench_function(
        "read+dissect+identity 1M packets (pcap, snaplen 128)",
        |b| {
            b.iter(|| {
                let mut r = RecordReader::open(&sp, DEFAULT_IDENTITY_SEED).unwrap();
                let mut batch = Vec::with_capacity(4096);
                let mut n = 0usize;
                let mut x = 0u64;
                while r.next_batch(&mut batch, 4096).unwrap() > 0 {
                    n += batch.len();
                    x ^= batch[0].id;
                }
                black_box((n, x))
            })
        },
    );
    g.finish();
}

fn exact_truth(c: &mut Criterion) {
    let s = sim(5_000_000);
    let (snd, rcv) = s.records(DEFAULT_IDENTITY_SEED);
    let mut g = c.benchmark_group("exact");
    g.throughput(Throughput::Elements((snd.len() + rcv.len()) as u64));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(30));
    g.bench_function("match 5M-packet pair + finish", |b| {
        b.iter(|| {
            let mut m = Matcher::new(TruthOptions::default());
            m.reserve(snd.len());
            for r in &snd {
                m.add_sender(r).unwrap();
            }
            for r in &rcv {
                m.add_receiver(r);
            }
            black_box(m.finish().delay)
        })
    });
    // The streaming truth on the same pair, fed in lock-step batches of 4096 as `owl compare`
    // does, with 1 s intervals and a 1 s horizon (the 5 s pair is longer than two horizons, so
    // the tables reach their steady size).
    g.bench_function("streaming truth 5M-packet pair, 1s intervals", |b| {
        b.iter(|| {
            let iv = Intervals::aligned(1_000_000_000);
            let mut t = StreamingTruth::new(TruthConfig::new(iv, 1_000_000_000));
            let (mut i, mut j) = (0, 0);
            let mut closed = 0usize;
            while i < snd.len() || j < rcv.len() {
                if j >= rcv.len() || (i < snd.len() && snd[i].ts_ns <= rcv[j].ts_ns) {
                    let e = (i + 4096).min(snd.len());
                    t.push_sender(&snd[i..e]);
                    i = e;
                } else {
                    let e = (j + 4096).min(rcv.len());
                    t.push_receiver(&rcv[j..e]);
                    j = e;
                }
                closed += t.drain_closed().count();
            }
            let (w, rest) = t.finish();
            black_box((w.delay, closed + rest.len()))
        })
    });
    g.finish();
}

criterion_group!(benches, read_dissect_identify, exact_truth);
criterion_main!(benches);
