//! The two agents' clock offset, measured NTP-style over their own connection and reported
//! beside every interval — never used to correct a delay.
//!
//! One-way delays rest on the two points' clocks agreeing (RDA §II-B assumes PTP or NTP keeps
//! them within a microsecond or so); every delay owl measures is the true delay less the
//! sender's clock's lead over the receiver's. The receiver agent asks the sender for the time
//! (a `Ping` with its send time `t1`; the sender's `Pong` carries when it received it, `t2`,
//! and when it answered, `t3`; the receiver notes its arrival, `t4`, all from the hosts'
//! real-time clocks, the clocks a live capture stamps packets with). As in NTP (RFC 5905 §8):
//!
//! ```text
//! offset θ = ((t2 − t1) + (t3 − t4)) / 2     the sender's clock minus the receiver's
//! rtt    δ = (t4 − t1) − (t3 − t2)           the round trip, less the sender's turnaround
//! ```
//!
//! Whatever the two directions' delays, the true offset lies within `θ ± δ/2`; the estimate is
//! exact only for a symmetric path. Of the last [`FILTER`] exchanges the one with the smallest
//! round trip is reported (NTP's clock filter: queueing only adds to `δ`). A sample whose round
//! trip comes out negative (a clock stepped during the exchange) is discarded and counted.
//!
//! Over time the exchanges give the clocks' relative **skew** and their **steps**
//! ([`SkewTrack`]): each exchange bounds the offset at its time, and the skew is the range of
//! slopes of the lines through every bound kept (the narrowest exchange of each 10 s, the last
//! 15 minutes); an exchange no such line reaches is a step, and the fit starts again from it.
//!
//! With `--replay`, the offset is the hosts' and says nothing of the clocks that stamped the
//! files.

use std::collections::VecDeque;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Exchanges the reported offset is the best of.
pub const FILTER: usize = 8;

/// The real-time clock, ns since the Unix epoch (0 before 1970, saturated after 2262).
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// One exchange's offset and round trip, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub offset_ns: i64,
    pub rtt_ns: i64,
}

impl Sample {
    /// The sample of an exchange (`t1`, `t4` at the receiver, `t2`, `t3` at the sender), or
    /// `None` when its round trip is negative.
    pub fn of(t1: i64, t2: i64, t3: i64, t4: i64) -> Option<Sample> {
        let (t1, t2, t3, t4) = (t1 as i128, t2 as i128, t3 as i128, t4 as i128);
        let rtt = (t4 - t1) - (t3 - t2);
        if rtt < 0 {
            return None;
        }
        let offset = ((t2 - t1) + (t3 - t4)) / 2;
        Some(Sample {
            offset_ns: i64::try_from(offset).ok()?,
            rtt_ns: i64::try_from(rtt).ok()?,
        })
    }
}

/// What an interval line says of the clocks (JSON `clock`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ClockReport {
    /// The sender's clock minus the receiver's: a true one-way delay is the measured one plus
    /// this, within `± uncertainty_ns`.
    pub offset_ns: i64,
    /// Half the round trip of the exchange reported: the offset's bound whatever the path.
    pub uncertainty_ns: i64,
    /// The exchange's round trip.
    pub rtt_ns: i64,
    /// Exchanges so far, and those discarded (a negative round trip: a clock stepped).
    pub exchanges: u64,
    pub discarded: u64,
    /// The skew of the sender's clock against the receiver's, once the exchanges kept span
    /// 30 s ([`SkewTrack`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skew: Option<SkewReport>,
    /// The least the two clocks drift apart over one interval at every skew that fits, ns
    /// (with the skew). Larger than `uncertainty_ns`, the offset moves beyond its own bound
    /// within an interval: the agent warns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_ns: Option<i64>,
    /// Steps (or changes of rate) found since the receiver agent started, and the last one.
    #[serde(default)]
    pub steps: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_step: Option<ClockStep>,
}

/// The last [`FILTER`] samples, the skew fit over every sample, and the counts.
#[derive(Clone, Debug, Default)]
pub struct ClockFilter {
    recent: VecDeque<Sample>,
    track: SkewTrack,
    exchanges: u64,
    discarded: u64,
}

impl ClockFilter {
    /// One exchange's times.
    pub fn add(&mut self, t1: i64, t2: i64, t3: i64, t4: i64) {
        self.exchanges += 1;
        match Sample::of(t1, t2, t3, t4) {
            Some(s) => {
                if self.recent.len() == FILTER {
                    self.recent.pop_front();
                }
                self.recent.push_back(s);
                self.track.add(t4, s);
            }
            None => self.discarded += 1,
        }
    }

    /// The sample of least round trip among the recent ones, if any, with the skew and the
    /// least drift it implies over an interval of `interval_ns`.
    pub fn report(&self, interval_ns: u64) -> Option<ClockReport> {
        let best = self.recent.iter().min_by_key(|s| s.rtt_ns)?;
        let skew = self.track.skew();
        let (steps, last_step) = self.track.steps();
        Some(ClockReport {
            offset_ns: best.offset_ns,
            uncertainty_ns: best.rtt_ns / 2 + best.rtt_ns % 2,
            rtt_ns: best.rtt_ns,
            exchanges: self.exchanges,
            discarded: self.discarded,
            skew,
            drift_ns: skew.map(|k| k.least_drift_ns(interval_ns).round() as i64),
            steps,
            last_step,
        })
    }
}

impl ClockReport {
    /// The offset moves by more than its bound within one interval.
    pub fn drifts(&self) -> bool {
        self.drift_ns.is_some_and(|d| d > self.uncertainty_ns)
    }
}

/// Time over which the least-delayed exchange stands for all of it in the skew fit, ns.
pub const SKEW_BUCKET_NS: i64 = 10_000_000_000;
/// Buckets the skew fit keeps: the last 15 minutes.
pub const SKEW_BUCKETS: usize = 90;
/// Least span of the kept buckets for a skew to be reported, ns.
pub const SKEW_MIN_SPAN_NS: i64 = 30_000_000_000;

/// One exchange as the skew fit keeps it: when (R's clock, its `t4`) and the range the true
/// offset lies in (`θ ± δ/2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bound {
    at_ns: i64,
    lo_ns: i64,
    hi_ns: i64,
}

impl Bound {
    fn mid(&self) -> f64 {
        (self.lo_ns as f64 + self.hi_ns as f64) / 2.0
    }
}

/// The slopes (ns of offset per ns) of every line through every bound, `(least, most)`, or
/// `None` when no line passes through them all. A line `a + s·t` meets every `[lo_i, hi_i]`
/// iff `max_i (lo_i − s·t_i) ≤ min_j (hi_j − s·t_j)`, that is iff
/// `s·(t_j − t_i) ≤ hi_j − lo_i` for every pair `i, j`: the skew range below is exact (the
/// feasible region of Moon, Skelly and Towsley's linear programme, INFOCOM 1999, with the
/// exchanges' hard bounds in place of a delay floor).
fn slope_range(b: &[Bound]) -> Option<(f64, f64)> {
    let (mut least, mut most) = (f64::NEG_INFINITY, f64::INFINITY);
    for (j, bj) in b.iter().enumerate() {
        for bi in &b[..j] {
            let dt = (bj.at_ns - bi.at_ns) as f64;
            if dt <= 0.0 {
                // the same instant: the two ranges must meet
                if bj.lo_ns > bi.hi_ns || bi.lo_ns > bj.hi_ns {
                    return None;
                }
                continue;
            }
            most = most.min((bj.hi_ns - bi.lo_ns) as f64 / dt);
            least = least.max((bj.lo_ns - bi.hi_ns) as f64 / dt);
        }
    }
    (least <= most).then_some((least, most))
}

/// A change of the offset no constant skew explains: a step of either clock (or a change of
/// its rate), between two exchanges.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct ClockStep {
    /// R's clock at the first exchange that showed it, ns since the Unix epoch.
    pub at_ns: i64,
    /// The offset then less the offset the fit before it predicted, ns (positive: the sender's
    /// clock jumped ahead, or the receiver's back).
    pub size_ns: i64,
    /// How far the size may be off: the two exchanges' bounds.
    pub bound_ns: i64,
}

/// The relative skew of the two clocks, from the offset's hard bounds over time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct SkewReport {
    /// The middle of the range below: how fast the sender's clock gains on the receiver's,
    /// parts per million.
    pub ppm: f64,
    /// Every constant skew that fits every kept exchange lies in `[low_ppm, high_ppm]`.
    pub low_ppm: f64,
    pub high_ppm: f64,
    /// Span of the exchanges it rests on, s.
    pub span_s: f64,
}

impl SkewReport {
    /// The least drift over `ns` every fitting skew implies: 0 when the range holds 0.
    pub fn least_drift_ns(&self, ns: u64) -> f64 {
        let least = if self.low_ppm > 0.0 {
            self.low_ppm
        } else if self.high_ppm < 0.0 {
            -self.high_ppm
        } else {
            0.0
        };
        least * 1e-6 * ns as f64
    }
}

/// The offset's bounds over time, a bucket's least-delayed exchange each ([`SKEW_BUCKET_NS`],
/// at most [`SKEW_BUCKETS`]): the skew is the range of slopes of the lines through all of
/// them, and an exchange no such line reaches is a step (the fit starts again from it).
#[derive(Clone, Debug, Default)]
pub struct SkewTrack {
    kept: VecDeque<Bound>,
    steps: u64,
    last_step: Option<ClockStep>,
}

impl SkewTrack {
    /// One exchange's sample, received at `at_ns` (R's clock).
    pub fn add(&mut self, at_ns: i64, s: Sample) {
        let half = s.rtt_ns / 2 + s.rtt_ns % 2;
        let b = Bound {
            at_ns,
            lo_ns: s.offset_ns.saturating_sub(half),
            hi_ns: s.offset_ns.saturating_add(half),
        };
        let before = self.kept.clone();
        match self.kept.back_mut() {
            // the bucket's narrower exchange stands for it
            Some(last)
                if last.at_ns.div_euclid(SKEW_BUCKET_NS) == at_ns.div_euclid(SKEW_BUCKET_NS) =>
            {
                if b.hi_ns - b.lo_ns < last.hi_ns - last.lo_ns {
                    *last = b;
                } else {
                    // a wider one must still agree with the fit
                    self.kept.push_back(b);
                    let fits = slope_range(self.kept.make_contiguous()).is_some();
                    self.kept.pop_back();
                    if fits {
                        return;
                    }
                    self.step(&before, b);
                    return;
                }
            }
            _ => {
                self.kept.push_back(b);
                if self.kept.len() > SKEW_BUCKETS {
                    self.kept.pop_front();
                }
            }
        }
        if slope_range(self.kept.make_contiguous()).is_none() {
            self.step(&before, b);
        }
    }

    /// `b` fits no line through `before`: a step, sized against the fit of `before`.
    fn step(&mut self, before: &VecDeque<Bound>, b: Bound) {
        let prior: Vec<Bound> = before.iter().copied().collect();
        let predicted = match (prior.last(), slope_range(&prior)) {
            (Some(p), Some((lo, hi))) => p.mid() + (lo + hi) / 2.0 * (b.at_ns - p.at_ns) as f64,
            (Some(p), None) => p.mid(),
            (None, _) => b.mid(),
        };
        let bound = prior
            .last()
            .map_or(0, |p| (p.hi_ns - p.lo_ns) / 2 + (b.hi_ns - b.lo_ns) / 2);
        self.steps += 1;
        self.last_step = Some(ClockStep {
            at_ns: b.at_ns,
            size_ns: (b.mid() - predicted).round() as i64,
            bound_ns: bound,
        });
        self.kept.clear();
        self.kept.push_back(b);
    }

    /// The skew, once the kept exchanges span [`SKEW_MIN_SPAN_NS`].
    pub fn skew(&self) -> Option<SkewReport> {
        let (first, last) = (self.kept.front()?, self.kept.back()?);
        let span = last.at_ns - first.at_ns;
        if span < SKEW_MIN_SPAN_NS {
            return None;
        }
        let kept: Vec<Bound> = self.kept.iter().copied().collect();
        let (lo, hi) = slope_range(&kept)?;
        Some(SkewReport {
            ppm: (lo + hi) / 2.0 * 1e6,
            low_ppm: lo * 1e6,
            high_ppm: hi * 1e6,
            span_s: span as f64 / 1e9,
        })
    }

    /// Steps found so far, and the last.
    pub fn steps(&self) -> (u64, Option<ClockStep>) {
        (self.steps, self.last_step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sender `lead` ns ahead, forward and backward delays `fwd` and `back`, a turnaround of
    /// `turn`: the offset is within half the round trip of the lead, and exact when the path
    /// is symmetric.
    #[test]
    fn the_offset_is_within_half_the_round_trip() {
        for (lead, fwd, back, turn) in [
            (0i64, 100i64, 100i64, 5i64),
            (1_000_000, 100, 100, 50),
            (-2_500_000, 300, 100, 7),
            (40, 1_000, 10, 0),
        ] {
            let t1 = 1_700_000_000_000_000_000i64;
            let t2 = t1 + fwd + lead;
            let t3 = t2 + turn;
            let t4 = t3 - lead + back;
            let s = Sample::of(t1, t2, t3, t4).unwrap();
            assert_eq!(s.rtt_ns, fwd + back);
            assert!(
                (s.offset_ns - lead).abs() <= s.rtt_ns / 2 + 1,
                "{s:?} {lead}"
            );
            if fwd == back {
                assert_eq!(s.offset_ns, lead);
            }
        }
    }

    /// Exchanges every `every` s for `secs` s over a path of `fwd`/`back` ns plus up to
    /// `jitter` ns of queueing each way, the sender's clock `lead0` ahead and gaining `ppm`,
    /// stepping by `step` at `step_at` s: what R's filter makes of them.
    fn exchanges(
        f: &mut ClockFilter,
        secs: i64,
        every: i64,
        ppm: f64,
        lead0: i64,
        step: Option<(i64, i64)>,
        seed: u64,
    ) {
        let mut x = seed | 1;
        let mut jitter = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 40_000) as i64
        };
        let t0 = 1_767_225_600_000_000_000i64;
        for k in 0..secs / every {
            let t1 = t0 + k * every * 1_000_000_000;
            let lead = |t: i64| {
                let stepped = step.filter(|&(at, _)| t >= t0 + at * 1_000_000_000);
                lead0 + ((t - t0) as f64 * ppm * 1e-6) as i64 + stepped.map_or(0, |s| s.1)
            };
            let arrive = t1 + 60_000 + jitter();
            let t2 = arrive + lead(arrive);
            let t3 = t2 + 5_000;
            let t4 = arrive + 5_000 + 40_000 + jitter();
            f.add(t1, t2, t3, t4);
        }
    }

    /// Skews from 0.5 to 200 ppm either way over 15 minutes of exchanges with 100 µs round
    /// trips: the range holds the true skew, in every seed, and narrows to about the bound
    /// over the span (2 × 70 µs / 900 s ≈ 0.16 ppm).
    #[test]
    fn the_skew_range_holds_the_true_skew() {
        for (seed, ppm) in [0.5, -0.5, 3.0, -20.0, 100.0, -200.0]
            .into_iter()
            .enumerate()
        {
            for s in 0..5u64 {
                let mut f = ClockFilter::default();
                exchanges(&mut f, 900, 1, ppm, 2_000_000, None, 11 * seed as u64 + s);
                let r = f.report(1_000_000_000).unwrap();
                let k = r.skew.expect("a skew after 15 minutes");
                assert!(k.low_ppm <= ppm && ppm <= k.high_ppm, "{ppm} ppm: {k:?}");
                assert!(k.high_ppm - k.low_ppm < 0.3, "{ppm} ppm: {k:?}");
                assert_eq!(r.steps, 0, "{ppm} ppm");
                // 1 s intervals: 0.5 ppm drifts 0.5 µs, within the ~50 µs bound; 100 ppm does not
                assert_eq!(r.drifts(), ppm.abs() >= 100.0, "{ppm} ppm: {r:?}");
            }
        }
        // too short a span: no skew yet
        let mut f = ClockFilter::default();
        exchanges(&mut f, 20, 1, 50.0, 0, None, 3);
        assert!(f.report(1_000_000_000).unwrap().skew.is_none());
    }

    /// A step of 1 ms (and of −300 µs) 400 s in: found at the first exchange after it, sized
    /// within the bound, and the skew fitted again from there still holds the truth.
    #[test]
    fn a_step_is_found_and_sized() {
        for step in [1_000_000i64, -300_000] {
            let mut f = ClockFilter::default();
            exchanges(&mut f, 900, 1, 10.0, 0, Some((400, step)), 7);
            let r = f.report(1_000_000_000).unwrap();
            assert_eq!(r.steps, 1, "{step}: {r:?}");
            let st = r.last_step.unwrap();
            let t0 = 1_767_225_600_000_000_000i64;
            assert!(
                (st.at_ns - t0 - 400_000_000_000).abs() <= 1_100_000_000,
                "{st:?}"
            );
            assert!(
                (st.size_ns - step).abs() <= st.bound_ns + 1_000,
                "{step}: {st:?}"
            );
            let k = r.skew.unwrap();
            assert!(k.low_ppm <= 10.0 && 10.0 <= k.high_ppm, "{k:?}");
            assert!(k.span_s > 400.0 && k.span_s < 501.0, "{k:?}");
        }
    }

    /// No step, no skew: no step is found and no drift said, over many seeds.
    #[test]
    fn steady_clocks_raise_nothing() {
        for seed in 0..50 {
            let mut f = ClockFilter::default();
            exchanges(&mut f, 120, 1, 0.0, -5_000_000, None, seed);
            let r = f.report(60_000_000_000).unwrap();
            assert_eq!(r.steps, 0, "seed {seed}");
            assert!(!r.drifts(), "seed {seed}: {r:?}");
            assert_eq!(r.drift_ns, Some(0), "seed {seed}");
        }
    }

    #[test]
    fn the_filter_reports_the_least_delayed_exchange_and_drops_stepped_clocks() {
        let mut f = ClockFilter::default();
        assert_eq!(f.report(1), None);
        let t = 1_000_000_000i64;
        f.add(t, t + 500 + 90, t + 600, t + 910); // rtt 900: queued on the way
        f.add(t, t + 100 + 90, t + 210, t + 220); // rtt 200: the best
        f.add(t, t + 10_000, t + 10_001, t - 50); // negative round trip: a step
        let r = f.report(1).unwrap();
        assert_eq!((r.rtt_ns, r.uncertainty_ns), (200, 100));
        assert_eq!(r.offset_ns, 90);
        assert_eq!((r.exchanges, r.discarded), (3, 1));
        // the best leaves the window after FILTER more
        for _ in 0..FILTER {
            f.add(t, t + 500, t + 500, t + 1_000);
        }
        assert_eq!(f.report(1).unwrap().rtt_ns, 1_000);
    }
}
