//! A point's dispatch and recording path alone (issue 31 item 2): one capture replayed at full
//! speed (read, dissect, identify once), shared out to 1, 4, 16 or 64 paths of disjoint
//! filters (`src net 10.K.0.0/N`, each packet to exactly one path), each path recording `rda`
//! and `lda` in 100 ms intervals as a sender point does. No peer: a consumer takes and releases
//! every closed interval at once. The question: does a packet cost more with more paths? The
//! time reported is the process's CPU time (user and system, every thread: getrusage), not the
//! wall clock — per packet, what the point costs the machine.
//!
//! Run with `cargo bench -p owl-live --bench point_dispatch`. Setup (simulating the capture)
//! is not timed.

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use owl_core::cut::Cut;
use owl_core::interval::Intervals;
use owl_core::method::{BuildOptions, Method, Role};
use owl_live::capture::{self, CaptureOptions, Handoff, Input, Speed, Tap};
use owl_live::filter::Filter;
use owl_trace::capture::CaptureFormat;
use owl_trace::identity::DEFAULT_IDENTITY_SEED;
use owl_trace::sim::{SimConfig, Simulation, TrafficConfig, TrafficSource};

const PACKETS: u64 = 1_000_000;

fn methods() -> Vec<Arc<dyn Method>> {
    ["rda", "lda"]
        .iter()
        .map(|n| {
            let info = owl_core::registry::find(n).unwrap();
            Arc::from(
                (info.build)(&BuildOptions {
                    seed: 1,
                    memory: None,
                })
                .unwrap(),
            )
        })
        .collect()
}

/// `paths` disjoint filters covering the simulated sources (10.0.0.0/8).
fn filters(paths: usize) -> Vec<Filter> {
    let bits = paths.trailing_zeros() as u8;
    (0..paths)
        .map(|k| {
            let second = (k << (8 - bits)) as u8;
            Filter::parse(&format!("src net 10.{second}.0.0/{}", 8 + bits)).unwrap()
        })
        .collect()
}

/// CPU time of the whole process so far (every thread).
fn cpu() -> Duration {
    // SAFETY: getrusage writes the struct it is given
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| Duration::new(v.tv_sec as u64, v.tv_usec as u32 * 1000);
    t(u.ru_utime) + t(u.ru_stime)
}

/// Replay `file` through a point with `paths` paths; the CPU time it took.
fn run(file: &std::path::Path, paths: usize) -> Duration {
    let o = CaptureOptions {
        input: Input::Replay {
            path: file.to_path_buf(),
            speed: Speed::Max,
        },
        stop: None,
        duration: None,
        disorder_ns: 10_000_000,
        identity_seed: DEFAULT_IDENTITY_SEED,
        identity_bytes: None,
        log: Arc::new(|_| {}),
    };
    let m = methods();
    let mut shares = Vec::new();
    let taps: Vec<Tap> = filters(paths)
        .into_iter()
        .enumerate()
        .map(|(k, f)| {
            let (h, wake) = Handoff::new(8);
            shares.push((h.clone(), wake));
            Tap {
                name: format!("p{k}"),
                filter: Some(f),
                role: Role::Sender,
                intervals: Intervals::aligned(100_000_000),
                cut: Cut::Clock,
                methods: m.clone(),
                handoff: h,
            }
        })
        .collect();
    let t0 = cpu();
    // one consumer a path, as a point runs one agent a path: take and release every closed
    // interval at once, until the capture is done
    let consumers: Vec<_> = shares
        .into_iter()
        .map(|(h, wake)| {
            std::thread::spawn(move || {
                loop {
                    let _ = wake.recv();
                    let got = h.take();
                    h.release(got.closed.iter().filter(|c| c.synopses.is_some()).count());
                    if let Some(d) = got.done {
                        d.expect("the capture");
                        return;
                    }
                }
            })
        })
        .collect();
    capture::start(o, taps).join().unwrap();
    for c in consumers {
        c.join().unwrap();
    }
    cpu() - t0
}

fn dispatch(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = SimConfig {
        traffic: TrafficSource::Synthetic(TrafficConfig {
            packets: PACKETS,
            rate_pps: 1e6,
            ipv6_fraction: 0.0,
            ..Default::default()
        }),
        ..Default::default()
    };
    let (s, _) = Simulation::run(&cfg)
        .expect("simulate")
        .write(dir.path(), CaptureFormat::Pcap, &mut |_, _| {})
        .unwrap();
    let mut g = c.benchmark_group("point");
    g.throughput(Throughput::Elements(PACKETS));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    for paths in [1, 4, 16, 64] {
        g.bench_function(format!("record rda,lda, 1M packets, {paths} paths"), |b| {
            b.iter_custom(|n| (0..n).map(|_| run(&s, paths)).sum())
        });
    }
    g.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
