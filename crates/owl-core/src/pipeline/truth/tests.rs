use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use super::*;
use crate::exact::{Matcher, Truth, TruthOptions};

/// A random pair: sender packets with random gaps and flows; each delivered with a delay in
/// `[lo, hi]`, lost with probability `loss`, duplicated with probability `dup`; some packets
/// only at R. Receiver records sorted by arrival.
fn pair(seed: u64, n: usize, lo: i64, hi: i64) -> (Vec<PacketRecord>, Vec<PacketRecord>) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut s: Vec<PacketRecord> = Vec::with_capacity(n);
    let mut r = Vec::new();
    let mut t = 1_000_000_000u64;
    for k in 0..n {
        t += rng.random_range(0..2_000u64);
        let mut rec = PacketRecord {
            ts_ns: t,
            id: rng.random(),
            ..Default::default()
        };
        rec.flow.sport = rng.random_range(0..20);
        if k > 0 && rng.random_bool(0.002) {
            rec.id = s[k - 1].id; // a sender duplicate
        }
        s.push(rec);
        if rng.random_bool(0.03) {
            continue;
        }
        let d = rng.random_range(lo..=hi);
        let mut a = rec;
        a.ts_ns = (t as i64 + d) as u64;
        r.push(a);
        if rng.random_bool(0.01) {
            a.ts_ns += rng.random_range(0..5_000);
            r.push(a);
        }
        if rng.random_bool(0.005) {
            r.push(PacketRecord {
                ts_ns: t + 10,
                id: rng.random(),
                ..Default::default()
            });
        }
    }
    r.sort_by_key(|x| x.ts_ns);
    (s, r)
}

fn batch_truth(s: &[PacketRecord], r: &[PacketRecord], iv: Intervals) -> Truth {
    let mut m = Matcher::new(TruthOptions {
        intervals: iv,
        per_flow: true,
        keep_unmatched: true,
        keep_flows: false,
    });
    for x in s {
        m.add_sender(x).unwrap();
    }
    for x in r {
        m.add_receiver(x);
    }
    m.finish()
}

/// Push the two streams in lock-step (the side whose next record is older first), in batches
/// of random sizes; collect the closed intervals as they come.
fn stream_truth(
    s: &[PacketRecord],
    r: &[PacketRecord],
    cfg: TruthConfig,
    seed: u64,
) -> (StreamTruth, Vec<IntervalTruth>, usize) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut st = StreamingTruth::new(cfg);
    let (mut i, mut j) = (0, 0);
    let mut closed = Vec::new();
    let mut peak = 0;
    while i < s.len() || j < r.len() {
        let take_s = j >= r.len() || (i < s.len() && s[i].ts_ns <= r[j].ts_ns);
        let k = rng.random_range(1..64);
        if take_s {
            let e = (i + k).min(s.len());
            st.push_sender(&s[i..e]);
            i = e;
            if i == s.len() {
                st.finish_sender();
            }
        } else {
            let e = (j + k).min(r.len());
            st.push_receiver(&r[j..e]);
            j = e;
            if j == r.len() {
                st.finish_receiver();
            }
        }
        peak = peak.max(st.in_flight());
        closed.extend(st.drain_closed());
    }
    st.finish_sender();
    st.finish_receiver();
    closed.extend(st.drain_closed());
    let (t, rest) = st.finish();
    closed.extend(rest);
    (t, closed, peak)
}

fn cfg(iv: Intervals, horizon: u64) -> TruthConfig {
    TruthConfig {
        per_flow: true,
        keep_unmatched: true,
        ..TruthConfig::new(iv, horizon)
    }
}

fn assert_same(a: &Truth, b: &StreamTruth, closed: &[IntervalTruth], iv: Intervals) {
    assert_eq!(a.sent, b.sent);
    assert_eq!(a.received, b.received);
    assert_eq!(a.lost, b.lost);
    assert_eq!(a.sender_duplicates, b.sender_duplicates);
    assert_eq!(a.duplicated, b.duplicated);
    assert_eq!(a.unexpected, b.unexpected);
    assert_eq!(a.reordered, b.reordered);
    assert_eq!(a.negative_delays, b.negative_delays);
    assert_eq!(a.delay, b.delay, "whole-run delays bit for bit");
    assert_eq!(a.in_interval, b.in_interval);
    assert_eq!(a.flows, b.flows);
    let mut lost = a.lost_ids.clone();
    let mut lost2 = b.lost_ids.clone();
    lost.sort_unstable();
    lost2.sort_unstable();
    assert_eq!(lost, lost2);
    assert_eq!(b.late, 0);
    if !iv.is_whole() {
        assert_eq!(a.intervals, closed, "per-interval truth");
    }
}

/// With every delay within the horizon, the streaming truth is the read-everything truth, bit
/// for bit, whatever the batch sizes — negative delays (clock offsets) included.
#[test]
fn agrees_with_the_batch_matcher() {
    for seed in 0..12 {
        let (s, r) = pair(seed, 20_000, -30_000, 200_000);
        for iv in [
            Intervals::WHOLE,
            Intervals::aligned(1_000_000),
            Intervals::aligned(7_000_000),
        ] {
            let a = batch_truth(&s, &r, iv);
            let (b, closed, _) = stream_truth(&s, &r, cfg(iv, 300_000), seed);
            assert_same(&a, &b, &closed, iv);
            assert!(b.quantiles_exact);
        }
    }
}

/// State is bounded by the horizon: at most the packets of a few horizons are held, however
/// long the run.
#[test]
fn memory_follows_the_horizon_not_the_run() {
    let (s, r) = pair(3, 200_000, 0, 100_000);
    // ~1 000 ns between packets: 2 horizons of 200 µs hold ~400 sender packets and ~200
    // receiver packets; batches add up to 63 records each side
    let small = |iv| TruthConfig {
        disorder_ns: 10_000,
        ..cfg(iv, 200_000)
    };
    let (_, _, peak) = stream_truth(&s, &r, small(Intervals::aligned(1_000_000)), 1);
    assert!(peak < 1_500, "peak {peak} packets held");
    let (_, _, peak_whole) = stream_truth(&s, &r, small(Intervals::WHOLE), 1);
    assert!(peak_whole < 1_500, "peak {peak_whole}");
}

/// A packet later than the horizon is lost *and* late, never matched nor unexpected; the count
/// of late packets is exact.
#[test]
fn late_packets_are_counted() {
    let mut s = Vec::new();
    let mut r = Vec::new();
    for k in 0..1_000u64 {
        let rec = PacketRecord {
            ts_ns: 1_000 * k,
            id: k + 1,
            ..Default::default()
        };
        s.push(rec);
        let d = if k % 10 == 0 { 500_000 } else { 5_000 };
        r.push(PacketRecord {
            ts_ns: rec.ts_ns + d,
            ..rec
        });
    }
    r.sort_by_key(|x| x.ts_ns);
    let (t, _, _) = stream_truth(&s, &r, cfg(Intervals::WHOLE, 100_000), 2);
    assert_eq!(t.late, 100);
    assert_eq!(t.lost, 100);
    assert_eq!(t.received, 900);
    assert_eq!(t.unexpected, 0);
    assert_eq!(t.delay.unwrap().max_ns, 5_000);
    // a horizon above the delays takes them all
    let (t, _, _) = stream_truth(&s, &r, cfg(Intervals::WHOLE, 1_000_000), 2);
    assert_eq!((t.late, t.lost, t.received), (0, 0, 1_000));
}

/// Past the exact budget, whole-run quantiles come from the histogram within its stated
/// relative error, and the mean and std stay exact.
#[test]
fn histogram_quantiles_within_their_bound() {
    let (s, r) = pair(5, 50_000, 1_000, 3_000_000);
    let iv = Intervals::aligned(5_000_000);
    let a = batch_truth(&s, &r, iv);
    let mut c = cfg(iv, 4_000_000);
    c.exact_quantiles = 1_000;
    let (b, _, _) = stream_truth(&s, &r, c, 5);
    assert!(!b.quantiles_exact);
    for (x, y) in [
        (a.delay.unwrap(), b.delay.unwrap()),
        (a.in_interval.unwrap(), b.in_interval.unwrap()),
    ] {
        assert_eq!(x.count, y.count);
        assert_eq!(x.mean_ns, y.mean_ns);
        assert!((x.std_ns - y.std_ns).abs() <= 1e-9 * x.std_ns);
        assert_eq!((x.min_ns, x.max_ns), (y.min_ns, y.max_ns));
        for (p, q) in [
            (x.p50_ns, y.p50_ns),
            (x.p90_ns, y.p90_ns),
            (x.p99_ns, y.p99_ns),
            (x.p999_ns, y.p999_ns),
        ] {
            let err = (p - q).abs() as f64 / p.abs() as f64;
            assert!(err <= QUANTILE_RELATIVE_ERROR, "{p} vs {q}: {err}");
        }
    }
}

#[test]
fn histogram_keys_order_like_values() {
    let xs = [
        i64::MIN + 1,
        -1 << 40,
        -5_000,
        -2_048,
        -2_047,
        -1,
        0,
        1,
        2_047,
        2_048,
        4_097,
        1 << 40,
        i64::MAX,
    ];
    for w in xs.windows(2) {
        assert!(LogHistogram::key(w[0]) <= LogHistogram::key(w[1]), "{w:?}");
    }
    for &x in &xs[1..xs.len() - 1] {
        let v = LogHistogram::value(LogHistogram::key(x));
        let err = (v - x).abs() as f64 / x.abs().max(1) as f64;
        assert!(err <= QUANTILE_RELATIVE_ERROR, "{x} -> {v}");
    }
}

/// Packets before the origin, and records beyond the disorder tolerance, are counted and in
/// no interval.
#[test]
fn before_origin_and_out_of_order_are_counted() {
    let iv = Intervals::with_origin(1_000_000, 5_000_000).unwrap();
    let mut st = StreamingTruth::new(cfg(iv, 100_000));
    let rec = |ts, id| PacketRecord {
        ts_ns: ts,
        id,
        ..Default::default()
    };
    st.push_sender(&[rec(4_000_000, 1), rec(5_500_000, 2), rec(30_000_000, 3)]);
    st.push_receiver(&[rec(4_000_100, 1), rec(5_500_100, 2), rec(30_000_100, 3)]);
    // a sender record 25 ms behind its capture's newest timestamp: its interval has closed
    st.push_sender(&[rec(5_600_000, 4)]);
    let (t, ivs) = st.finish();
    assert_eq!(t.before_origin, [1, 1]);
    assert_eq!(t.out_of_order, [1, 0]);
    assert_eq!(t.sent, 4);
    // packets 2 and 3 are in intervals; 1 before the origin, 4 out of order
    assert_eq!(ivs.iter().map(|i| i.sent).sum::<u64>(), 2, "{ivs:?}");
}

/// Per-flow truth is bounded: a flow idle for longer than the horizon is closed and freed, and
/// when it comes back its second record is merged into the first (counts and mean exact, std to
/// rounding). Many short flows one after another never pile up.
#[test]
fn idle_flows_are_closed_and_merged() {
    let mut s = Vec::new();
    let mut r = Vec::new();
    let mut id = 1u64;
    // 2 000 flows of 50 packets each, one after another (1 µs apart), then flow 0 again
    let mut push =
        |flow: u16, t: u64, d: u64, s: &mut Vec<PacketRecord>, r: &mut Vec<PacketRecord>| {
            let mut rec = PacketRecord {
                ts_ns: t,
                id,
                ..Default::default()
            };
            rec.flow.sport = flow;
            id += 1;
            s.push(rec);
            r.push(PacketRecord {
                ts_ns: t + d,
                ..rec
            });
        };
    let mut t = 1_000_000u64;
    for f in 0..2_000u16 {
        for k in 0..50u64 {
            push(f, t, 1_000 + 37 * k, &mut s, &mut r);
            t += 1_000;
        }
    }
    for k in 0..10u64 {
        push(0, t, 5_000 + k, &mut s, &mut r);
        t += 1_000;
    }
    r.sort_by_key(|x| x.ts_ns);
    let iv = Intervals::WHOLE;
    let a = batch_truth(&s, &r, iv);
    let mut st = StreamingTruth::new(TruthConfig {
        disorder_ns: 10_000,
        ..cfg(iv, 200_000)
    });
    let mut peak_flows = 0;
    for (cs, cr) in s.chunks(500).zip(r.chunks(500)) {
        st.push_sender(cs);
        st.push_receiver(cr);
        peak_flows = peak_flows.max(st.open_flows());
    }
    let (b, _) = st.finish();
    // a horizon of 200 µs, sweeps every 1 ms: a few dozen 50 µs flows at most, not 2 000
    assert!(peak_flows < 50, "{peak_flows} flows open at once");
    assert_eq!(a.flows.len(), b.flows.len());
    let key0 = a.flows.iter().find(|f| f.key.sport == 0).unwrap();
    let got0 = b.flows.iter().find(|f| f.key.sport == 0).unwrap();
    assert_eq!(got0.records, 2);
    assert_eq!((got0.sent, got0.received), (key0.sent, key0.received));
    let (x, y) = (key0.delay.unwrap(), got0.delay.unwrap());
    assert_eq!((x.count, x.min_ns, x.max_ns), (y.count, y.min_ns, y.max_ns));
    assert!((x.mean_ns - y.mean_ns).abs() <= 1e-9 * x.mean_ns);
    assert!((x.std_ns - y.std_ns).abs() <= 1e-9 * x.std_ns);
    for f in b.flows.iter().filter(|f| f.key.sport != 0) {
        let w = a.flows.iter().find(|g| g.key == f.key).unwrap();
        assert_eq!(f, w, "a flow closed once is exactly the batch truth");
    }
}

/// The packed whole-run store summarises exactly as the plain `Vec` did: the same quantiles and
/// the same floating-point mean and std, bit for bit, on both sides of the sorting threshold
/// and of the store's blocks.
#[test]
fn packed_whole_run_delays_summarise_as_a_plain_vec() {
    let mut rng = Pcg64::seed_from_u64(2929);
    for n in [1, 4095, 4096, 4097, 3 * store::BLOCK + 1, 200_003] {
        let ds: Vec<i64> = (0..n)
            .map(|k| {
                let d = 80_000 + rng.random_range(0..3_000_000i64);
                if k % 1_009 == 0 { -d } else { d }
            })
            .collect();
        let mut acc = DelayAcc::new(usize::MAX);
        for &d in &ds {
            acc.push(d);
        }
        let (got, exact) = acc.summary();
        let want = DelaySummary::from_delays(&mut ds.clone());
        assert!(exact);
        let (got, want) = (got.unwrap(), want.unwrap());
        assert_eq!(got, want, "n = {n}");
        assert_eq!(got.std_ns.to_bits(), want.std_ns.to_bits(), "n = {n}");
        assert_eq!(got.mean_ns.to_bits(), want.mean_ns.to_bits(), "n = {n}");
    }
}

/// S's capture stops while the traffic goes on, over a FIFO path whose delays reach 8 ms: the
/// packets R receives after S's last packet were sent after S stopped, so they are trimmed
/// (S was not capturing), not counted unexpected. By the largest delay alone, those within it
/// of S's end — about 8 ms of traffic — were "unexpected".
#[test]
fn a_sender_that_stops_first_leaves_no_unexpected_packets_on_a_fifo_path() {
    let mut rng = Pcg64::seed_from_u64(9);
    let (mut s, mut r) = (Vec::new(), Vec::new());
    let mut last_arrival = 0u64;
    for k in 0..30_000u64 {
        let ts = 1_000_000_000 + k * 10_000;
        let rec = PacketRecord {
            ts_ns: ts,
            id: rng.random(),
            ..Default::default()
        };
        if ts < 1_200_000_000 {
            s.push(rec);
        }
        // FIFO: a queue that drains in order
        let arrival = (ts + 1_000_000 + rng.random_range(0..7_000_000)).max(last_arrival + 1);
        last_arrival = arrival;
        r.push(PacketRecord {
            ts_ns: arrival,
            ..rec
        });
    }
    let iv = Intervals::aligned(50_000_000);
    let c = TruthConfig {
        trim: true,
        ..cfg(iv, 1_000_000_000)
    };
    let (t, _, _) = stream_truth(&s, &r, c, 3);
    assert_eq!(t.unexpected, 0, "{t:?}");
    assert_eq!(t.received, s.len() as u64);
    assert_eq!(t.trimmed[1], (r.len() - s.len()) as u64);
}
