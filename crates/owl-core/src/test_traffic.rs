//! Synthetic per-flow traffic for the methods' unit tests (test builds only): flow keys,
//! Pareto-sized flows with their own mean delays and exponential jitter, interleaved at random,
//! with uniform loss, and each flow's truth. Shared so that no method's tests import another
//! method's.

use std::net::IpAddr;

use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, Pareto};
use rand_pcg::Pcg64Mcg;

use crate::record::{FlowKey, PacketRecord};

/// A flow of the synthetic test traffic, with its truth.
#[derive(Clone, Debug)]
pub(crate) struct TestFlow {
    pub key: FlowKey,
    pub sent: u64,
    pub received: u64,
    pub delay_sum: i128,
}

impl TestFlow {
    pub fn mean(&self) -> f64 {
        self.delay_sum as f64 / self.received as f64
    }
}

pub(crate) fn key(i: u32) -> FlowKey {
    FlowKey {
        proto: if i.is_multiple_of(3) { 17 } else { 6 },
        src: IpAddr::V4(0x0a00_0000u32.wrapping_add(i).into()),
        dst: IpAddr::V4((0xac10_0000 + i.wrapping_mul(7919) % 65_536).into()),
        sport: 1024 + (i.wrapping_mul(2_654_435_761) % 60_000) as u16,
        dport: 443,
    }
}

/// `flows` flows with Pareto(scale, 1.1) sizes (capped), each with its own mean delay (uniform in
/// 50–500 µs) and exponential per-packet jitter around it; packets interleaved at random;
/// `loss` of them dropped uniformly. Returns (sender, receiver, flows).
pub(crate) fn traffic(
    seed: u64,
    flows: u32,
    max_size: u64,
    loss: f64,
) -> (Vec<PacketRecord>, Vec<PacketRecord>, Vec<TestFlow>) {
    traffic_scaled(seed, flows, 1.0, max_size, loss)
}

/// Flow `i` repeated `sizes[i]` times, shuffled (Fisher–Yates): the flows' packets
/// interleaved at random.
pub(crate) fn interleaved(sizes: impl Iterator<Item = u64>, rng: &mut Pcg64Mcg) -> Vec<u32> {
    let mut order: Vec<u32> = Vec::new();
    for (i, n) in sizes.enumerate() {
        order.extend(std::iter::repeat_n(i as u32, n as usize));
    }
    for i in (1..order.len()).rev() {
        let j = rng.random_range(0..=i);
        order.swap(i, j);
    }
    order
}

pub(crate) fn traffic_scaled(
    seed: u64,
    flows: u32,
    scale: f64,
    max_size: u64,
    loss: f64,
) -> (Vec<PacketRecord>, Vec<PacketRecord>, Vec<TestFlow>) {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let pareto = Pareto::new(scale, 1.1).unwrap();
    let mut truth: Vec<TestFlow> = (0..flows)
        .map(|i| TestFlow {
            key: key(i + (seed as u32).wrapping_mul(1_000_003)),
            sent: (pareto.sample(&mut rng) as u64).clamp(1, max_size),
            received: 0,
            delay_sum: 0,
        })
        .collect();
    let means: Vec<f64> = (0..flows)
        .map(|_| rng.random_range(50_000.0..500_000.0))
        .collect();
    let order = interleaved(truth.iter().map(|f| f.sent), &mut rng);
    let t0 = 1_767_225_600_000_000_000u64;
    let (mut s, mut r) = (Vec::new(), Vec::new());
    for (n, &fi) in order.iter().enumerate() {
        let f = &mut truth[fi as usize];
        let ts = t0 + n as u64 * 10_000;
        let rec = PacketRecord {
            ts_ns: ts,
            id: rng.random(),
            flow: f.key,
            len: 500,
        };
        s.push(rec);
        if rng.random::<f64>() < loss {
            continue;
        }
        let jitter = Exp::new(1.0 / (0.5 * means[fi as usize])).unwrap();
        let d = (0.5 * means[fi as usize] + jitter.sample(&mut rng)) as u64;
        f.received += 1;
        f.delay_sum += d as i128;
        r.push(PacketRecord {
            ts_ns: ts + d,
            ..rec
        });
    }
    r.sort_by_key(|x| x.ts_ns);
    (s, r, truth)
}
