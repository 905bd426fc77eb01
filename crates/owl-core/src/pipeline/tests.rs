use std::collections::BTreeMap;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

use super::*;
use crate::exact::method::ExactMethod;
use crate::lda::{self, LdaMethod};
use crate::rda::{self, RdaMethod};

/// S and R records of a path with 2 % loss, delays of 5–80 µs, at ~1 Mpps over 20 ms.
fn pair(seed: u64) -> (Vec<PacketRecord>, Vec<PacketRecord>) {
    let mut rng = Pcg64::seed_from_u64(seed);
    let (mut s, mut r) = (Vec::new(), Vec::new());
    let mut t = 7_000_000_000u64;
    for _ in 0..20_000 {
        t += rng.random_range(1..2_000u64);
        let rec = PacketRecord {
            ts_ns: t,
            id: rng.random(),
            len: 100,
            ..Default::default()
        };
        s.push(rec);
        if !rng.random_bool(0.02) {
            r.push(PacketRecord {
                ts_ns: t + rng.random_range(5_000..80_000),
                ..rec
            });
        }
    }
    r.sort_by_key(|x| x.ts_ns);
    (s, r)
}

fn methods() -> Vec<Arc<dyn Method>> {
    vec![
        Arc::new(ExactMethod),
        Arc::new(LdaMethod::new(lda::Config::paper_default(3))),
        Arc::new(RdaMethod::new("rda-fixed", rda::Config::default()).unwrap()),
    ]
}

/// What `owl compare` did before the pipeline: every interval's synopses of both points kept
/// to the end, then estimated.
fn read_everything(
    methods: &[Arc<dyn Method>],
    iv: Intervals,
    s: &[PacketRecord],
    r: &[PacketRecord],
) -> BTreeMap<u64, Vec<Result<Estimate, MethodError>>> {
    let mut points: [BTreeMap<u64, Synopses>; 2] = Default::default();
    for (side, (role, recs)) in [(Role::Sender, s), (Role::Receiver, r)]
        .into_iter()
        .enumerate()
    {
        for x in recs {
            let Some(i) = iv.index(x.ts_ns) else { continue };
            points[side]
                .entry(i)
                .or_insert_with(|| methods.iter().map(|m| m.new_point(role)).collect())
                .iter_mut()
                .for_each(|p| p.record(x));
        }
    }
    let mut keys: Vec<u64> = points[0].keys().chain(points[1].keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let a = points[0]
                .remove(&k)
                .unwrap_or_else(|| methods.iter().map(|m| m.new_point(Role::Sender)).collect());
            let b = points[1].remove(&k).unwrap_or_else(|| {
                methods
                    .iter()
                    .map(|m| m.new_point(Role::Receiver))
                    .collect()
            });
            (
                k,
                estimate_pair(methods, a, b.into_iter().map(Ok).collect(), &mut NoTimer),
            )
        })
        .collect()
}

fn run(
    methods: Vec<Arc<dyn Method>>,
    iv: Intervals,
    s: &[PacketRecord],
    r: &[PacketRecord],
    batch: usize,
) -> (Vec<IntervalOutcome>, StreamTruth, usize) {
    let mut p = PairPipeline::new(
        PipelineConfig {
            intervals: iv,
            disorder_ns: 10_000,
        },
        methods,
        Some(TruthConfig {
            disorder_ns: 10_000,
            ..TruthConfig::new(iv, 200_000)
        }),
    );
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    let mut last = None;
    while i < s.len() || j < r.len() {
        if j >= r.len() || (i < s.len() && s[i].ts_ns <= r[j].ts_ns) {
            let e = (i + batch).min(s.len());
            p.push(Role::Sender, &s[i..e], &mut NoTimer, &mut NoHook);
            i = e;
        } else {
            let e = (j + batch).min(r.len());
            p.push(Role::Receiver, &r[j..e], &mut NoTimer, &mut NoHook);
            j = e;
        }
        for o in p.drain() {
            assert!(last < Some(o.index), "outcomes in index order");
            last = Some(o.index);
            out.push(o);
        }
    }
    p.finish_point(Role::Sender, &mut NoTimer, &mut NoHook);
    p.finish_point(Role::Receiver, &mut NoTimer, &mut NoHook);
    let peak = p.peak_held;
    let (rest, truth, _) = p.finish();
    for o in rest {
        assert!(last < Some(o.index));
        last = Some(o.index);
        out.push(o);
    }
    (out, truth.unwrap(), peak)
}

/// The pipeline's estimates are those of the read-everything order, interval by interval, for
/// any batch size; each interval carries its truth.
#[test]
fn same_estimates_as_reading_everything() {
    let (s, r) = pair(1);
    for iv in [Intervals::WHOLE, Intervals::aligned(1_000_000)] {
        let want = read_everything(&methods(), iv, &s, &r);
        for batch in [1, 7, 4096] {
            let (got, truth, _) = run(methods(), iv, &s, &r, batch);
            assert_eq!(got.len(), want.len());
            for (o, (k, w)) in got.iter().zip(&want) {
                assert_eq!(o.index, *k);
                let est: Vec<Estimate> = o
                    .estimates
                    .iter()
                    .map(|e| e.as_ref().unwrap().as_ref().unwrap().clone())
                    .collect();
                let w: Vec<Estimate> = w.iter().map(|e| e.as_ref().unwrap().clone()).collect();
                assert_eq!(est, w, "interval {k}, batch {batch}");
                if !iv.is_whole() {
                    let t = o.truth.as_ref().expect("truth of the interval");
                    // the exact method's estimate is the interval's matched packets... plus
                    // those crossing; the truth's matched count is what both points hold
                    assert!(t.matched <= est[0].samples);
                }
            }
            assert_eq!(truth.sent, s.len() as u64);
        }
    }
}

/// Closed intervals are freed: the pipeline holds a few intervals at a time, not the run.
#[test]
fn holds_a_few_intervals_at_a_time() {
    let (s, r) = pair(2);
    let iv = Intervals::aligned(100_000); // 200 intervals over 20 ms
    let (out, _, peak) = run(methods(), iv, &s, &r, 64);
    assert!(out.len() >= 190, "{}", out.len());
    // the truth closes an interval two horizons (400 µs) after its end: ~5 intervals of
    // estimates wait for it
    assert!(peak <= 10, "peak {peak} intervals held");
}

/// Without methods the pipeline is the truth alone; intervals still come out in order.
#[test]
fn truth_only() {
    let (s, r) = pair(4);
    let (out, truth, _) = run(Vec::new(), Intervals::aligned(1_000_000), &s, &r, 100);
    let sent: u64 = out.iter().map(|o| o.truth.as_ref().unwrap().sent).sum();
    assert_eq!(sent, truth.sent);
}

/// The method contract is all a method needs: a trivial method defined here (each point counts
/// its packets; the estimate is the difference, as lost packets) runs through the pipeline
/// beside the real ones with no edit anywhere else. Listing it for the command line would be
/// one line in `registry::METHODS`.
mod contract {
    use super::*;
    use crate::method::{BuildOptions, MethodInfo, TypedMethod, TypedSynopsis};
    use crate::wire::{DecodeError, WireReader, WireWriter};

    struct Count;
    #[derive(Default)]
    struct Counted(u64);

    impl TypedSynopsis for Counted {
        const METHOD: &'static str = "count";
        fn record(&mut self, _rec: &PacketRecord) {
            self.0 += 1;
        }
        fn encoded_len(&self) -> usize {
            8
        }
        fn encode(&self, out: &mut Vec<u8>) {
            WireWriter::new(out).u64(self.0);
        }
        /// The counts added.
        fn merge(&mut self, later: Counted) -> Result<(), MethodError> {
            self.0 += later.0;
            Ok(())
        }
    }

    impl Count {
        fn decode(b: &[u8]) -> Result<Counted, DecodeError> {
            let mut r = WireReader::new(b);
            let n = r.u64("count")?;
            r.finish("count")?;
            Ok(Counted(n))
        }
    }

    impl TypedMethod for Count {
        type Config = ();
        type Sender = Counted;
        type Receiver = Counted;
        fn name(&self) -> &str {
            "count"
        }
        fn config(&self) -> &() {
            &()
        }
        fn foreign(&self) -> crate::method::Foreign {
            crate::method::Foreign::AssumesNone("test: one sum")
        }
        fn new_sender(&self) -> Counted {
            Counted::default()
        }
        fn new_receiver(&self) -> Counted {
            Counted::default()
        }
        fn decode_sender(&self, b: &[u8]) -> Result<Counted, DecodeError> {
            Count::decode(b)
        }
        fn decode_receiver(&self, b: &[u8]) -> Result<Counted, DecodeError> {
            Count::decode(b)
        }
        fn estimate(&self, s: Counted, r: Counted) -> Result<Estimate, MethodError> {
            Ok(Estimate {
                lost: Some(s.0.saturating_sub(r.0)),
                samples: r.0,
                bytes: 16,
                ..Default::default()
            })
        }
    }

    const COUNT: MethodInfo = MethodInfo {
        name: "count",
        summary: "packets at each point; their difference",
        samples: "packets at the receiver",
        per_flow: false,
        crosses: "nothing (a test method)",
        per_packet: false,
        recovers_delays: false,
        build: |_| Ok(Box::new(Count)),
        from_config: |_| Ok(Box::new(Count)),
    };

    #[test]
    fn a_new_method_is_its_module() {
        let (s, r) = pair(9);
        let m: Arc<dyn Method> = Arc::from((COUNT.build)(&BuildOptions::default()).unwrap());
        let (out, truth, _) = run(vec![m], Intervals::WHOLE, &s, &r, 512);
        let e = out[0].estimates[0].as_ref().unwrap().as_ref().unwrap();
        assert_eq!(e.lost, Some(truth.lost));
        assert_eq!(e.samples, truth.received);
    }
}

/// A quiet stretch (a live capture's clock passing with no packet) closes the intervals it
/// ends, as a record stamped then would, and no earlier.
#[test]
fn advancing_the_clock_closes_quiet_intervals() {
    use crate::interval::Intervals;
    let ms = 1_000_000;
    let mut p = PointStream::new(
        Role::Receiver,
        Intervals::aligned(100 * ms),
        10 * ms,
        methods(),
    );
    let rec = PacketRecord {
        ts_ns: 1_000 * ms + 5 * ms,
        id: 1,
        len: 100,
        ..Default::default()
    };
    p.push(&[rec], &NoTimer);
    let mut out = Vec::new();
    p.advance(1_100 * ms + 9 * ms);
    p.drain_closed(&mut out);
    assert!(out.is_empty(), "within the disorder tolerance");
    p.advance(1_100 * ms + 10 * ms);
    p.drain_closed(&mut out);
    assert_eq!(
        out.iter().map(|c| (c.index, c.packets)).collect::<Vec<_>>(),
        [(10, 1)]
    );
    // an older clock reading does not move the stream back
    p.advance(0);
    p.advance(1_500 * ms + 10 * ms);
    p.drain_closed(&mut out);
    assert_eq!(p.closed_below(), 15);
}
