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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
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
}

/// The last [`FILTER`] samples and the counts.
#[derive(Clone, Debug, Default)]
pub struct ClockFilter {
    recent: VecDeque<Sample>,
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
            }
            None => self.discarded += 1,
        }
    }

    /// The sample of least round trip among the recent ones, if any.
    pub fn report(&self) -> Option<ClockReport> {
        let best = self.recent.iter().min_by_key(|s| s.rtt_ns)?;
        Some(ClockReport {
            offset_ns: best.offset_ns,
            uncertainty_ns: best.rtt_ns / 2 + best.rtt_ns % 2,
            rtt_ns: best.rtt_ns,
            exchanges: self.exchanges,
            discarded: self.discarded,
        })
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

    #[test]
    fn the_filter_reports_the_least_delayed_exchange_and_drops_stepped_clocks() {
        let mut f = ClockFilter::default();
        assert_eq!(f.report(), None);
        let t = 1_000_000_000i64;
        f.add(t, t + 500 + 90, t + 600, t + 910); // rtt 900: queued on the way
        f.add(t, t + 100 + 90, t + 210, t + 220); // rtt 200: the best
        f.add(t, t + 10_000, t + 10_001, t - 50); // negative round trip: a step
        let r = f.report().unwrap();
        assert_eq!((r.rtt_ns, r.uncertainty_ns), (200, 100));
        assert_eq!(r.offset_ns, 90);
        assert_eq!((r.exchanges, r.discarded), (3, 1));
        // the best leaves the window after FILTER more
        for _ in 0..FILTER {
            f.add(t, t + 500, t + 500, t + 1_000);
        }
        assert_eq!(f.report().unwrap().rtt_ns, 1_000);
    }
}
