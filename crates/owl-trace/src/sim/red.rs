//! A bottleneck queue managed by random early detection (RED, Floyd and Jacobson 1993), the
//! queue COLATE §6.1 (after RLI and MAPLE) passes its traces through: "a queue size that can
//! hold 0.5 seconds of traffic at their maximum line rates", `min_th = 0.475 × queue size`,
//! `max_th = 0.95 × queue size`, `w_q = 0.002`, `max_p = 1/50`.
//!
//! The queue is a FIFO link of `capacity` bits per second. Its load is the simulated packets
//! plus **cross traffic**: fluid that takes a fraction `x(t)` of the capacity, switching between
//! a low and a high fraction at exponential times of mean `period` (an on/off source). While
//! cross traffic and the packets together offer more than the capacity, the backlog grows, RED
//! starts dropping once its average backlog passes `min_th`, and the tail drops what exceeds
//! the buffer; in between, it drains. The cross traffic is served first-come first-served
//! with the packets, so a packet's delay is exactly the backlog ahead of it (cross traffic and
//! packets) plus its own size, over the capacity: `(q + L)·8/C`.
//!
//! RED's average follows the standard rules: `avg ← (1 − w_q)·avg + w_q·q` at each arrival,
//! and after an idle period of `m` typical packet times `avg ← (1 − w_q)^m·avg`; between
//! `min_th` and `max_th` a packet is dropped with `p_a = p_b/(1 − count·p_b)`, `p_b = max_p·(avg −
//! min_th)/(max_th − min_th)`, `count` the packets since the last drop; above `max_th`, every
//! packet. Thresholds are in bytes of the buffer.

use std::fmt;
use std::str::FromStr;

use owl_core::units::{format_ns, parse_duration_ns};
use rand::{Rng, RngExt};

use super::SimError;

/// What the queue is configured with.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedQueue {
    /// Link capacity, bits per second.
    pub capacity_bps: f64,
    /// Buffer, in seconds of traffic at the capacity (§6.1: 0.5 s).
    pub buffer_ns: u64,
    /// Cross traffic's share of the capacity in its low and high states.
    pub cross: (f64, f64),
    /// Mean time in each cross-traffic state, ns.
    pub period_ns: u64,
    /// `min_th` and `max_th` as fractions of the buffer (0.475, 0.95).
    pub thresholds: (f64, f64),
    /// RED's averaging weight `w_q` (0.002).
    pub w_q: f64,
    /// RED's largest early-drop probability `max_p` (1/50).
    pub max_p: f64,
}

impl RedQueue {
    /// §6.1's RED over a link of `capacity_bps`, with cross traffic between `cross.0` and
    /// `cross.1` of the capacity, switching every `period_ns` on average.
    pub fn paper(capacity_bps: f64, cross: (f64, f64), period_ns: u64) -> RedQueue {
        RedQueue {
            capacity_bps,
            buffer_ns: 500_000_000,
            cross,
            period_ns,
            thresholds: (0.475, 0.95),
            w_q: 0.002,
            max_p: 1.0 / 50.0,
        }
    }

    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |s: String| Err(SimError::Invalid(format!("red queue: {s}")));
        if !(self.capacity_bps.is_finite() && self.capacity_bps >= 1e3) {
            return bad(format!(
                "capacity {} bit/s must be at least 1 kbit/s",
                self.capacity_bps
            ));
        }
        if self.buffer_ns == 0 || self.buffer_ns > 60_000_000_000 {
            return bad(format!(
                "buffer {} must be above 0 and at most 60 s of traffic",
                format_ns(self.buffer_ns as f64)
            ));
        }
        let (lo, hi) = self.cross;
        if !(0.0..1.0).contains(&lo) || !(0.0..1.0).contains(&hi) || lo > hi {
            return bad(format!(
                "cross traffic {lo}-{hi} must be fractions of the capacity in [0, 1), low ≤ high"
            ));
        }
        if self.period_ns < 1_000_000 {
            return bad(format!(
                "the cross traffic's period {} must be at least 1ms",
                format_ns(self.period_ns as f64)
            ));
        }
        let (a, b) = self.thresholds;
        if !(a > 0.0 && a < b && b <= 1.0) {
            return bad(format!(
                "thresholds {a} and {b} must satisfy 0 < min_th < max_th ≤ 1"
            ));
        }
        if !(self.w_q > 0.0 && self.w_q <= 1.0 && self.max_p > 0.0 && self.max_p <= 1.0) {
            return bad(format!(
                "w_q {} and max_p {} must be in (0, 1]",
                self.w_q, self.max_p
            ));
        }
        Ok(())
    }

    fn buffer_bytes(&self) -> f64 {
        self.capacity_bps / 8.0 * self.buffer_ns as f64 / 1e9
    }
}

/// `red:CAPACITY[,cross=LO-HI][,period=T][,buffer=T]`, capacity in bit/s with an optional
/// `k`, `M` or `G` and `bit` (`red:50Mbit,cross=0.2-0.6,period=2s`).
impl FromStr for RedQueue {
    type Err = SimError;
    fn from_str(s: &str) -> Result<RedQueue, SimError> {
        let bad = |why: String| {
            SimError::Invalid(format!(
                "queue '{s}': {why} (expected red:CAPACITY[,cross=LO-HI][,period=T][,buffer=T], e.g. red:50Mbit,cross=0.2-0.6,period=2s)"
            ))
        };
        let body = s
            .strip_prefix("red:")
            .ok_or_else(|| bad("only red is known".into()))?;
        let mut parts = body.split(',');
        let cap = parts.next().unwrap_or_default().trim();
        let mut q = RedQueue::paper(parse_bits(cap).map_err(bad)?, (0.0, 0.0), 1_000_000_000);
        for p in parts {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| bad(format!("'{p}' is not KEY=VALUE")))?;
            let dur = |v: &str| parse_duration_ns(v).map_err(|e| bad(format!("{k}: {e}")));
            match k.trim() {
                "cross" => {
                    let (a, b) = v.split_once('-').unwrap_or((v, v));
                    let f = |x: &str| {
                        x.trim()
                            .parse::<f64>()
                            .map_err(|_| bad(format!("cross '{v}' is not LO-HI fractions")))
                    };
                    q.cross = (f(a)?, f(b)?);
                }
                "period" => q.period_ns = dur(v)?.round() as u64,
                "buffer" => q.buffer_ns = dur(v)?.round() as u64,
                other => return Err(bad(format!("unknown key '{other}'"))),
            }
        }
        q.validate()?;
        Ok(q)
    }
}

impl fmt::Display for RedQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "red:{}bit,cross={}-{},period={},buffer={}",
            self.capacity_bps,
            self.cross.0,
            self.cross.1,
            format_ns(self.period_ns as f64).replace(' ', ""),
            format_ns(self.buffer_ns as f64).replace(' ', "")
        )
    }
}

/// `50Mbit`, `1.5Gbit`, `800kbit`, `2e7` (bit/s).
fn parse_bits(s: &str) -> Result<f64, String> {
    let t = s.trim().trim_end_matches("/s");
    let t = t.strip_suffix("bit").unwrap_or(t);
    let (num, mul) = match t.chars().last() {
        Some('k') | Some('K') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    num.trim()
        .parse::<f64>()
        .map(|x| x * mul)
        .map_err(|_| format!("capacity '{s}' is not a rate in bit/s (e.g. 50Mbit)"))
}

/// What happened to one packet at the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Queued: its delay through the queue (waiting and transmission), ns.
    Queued(u64),
    /// Dropped early by RED.
    EarlyDrop,
    /// Dropped at the tail: the buffer was full.
    TailDrop,
}

/// The queue as packets pass through it, in sending order.
#[derive(Clone, Debug)]
pub struct RedState {
    q: RedQueue,
    /// Backlog ahead of the next arrival, bytes (packets and cross traffic).
    backlog: f64,
    /// RED's average backlog, bytes.
    avg: f64,
    /// Packets since the last drop (RED's `count`), -1 when the average is below `min_th`.
    count: i64,
    /// Time of the last arrival, ns.
    last_ns: u64,
    /// When the backlog last emptied (for the idle adjustment), if it did since then.
    idle_since: Option<f64>,
    /// Current cross-traffic state (`true`: high) and when it switches, ns.
    high: bool,
    switch_ns: f64,
    started: bool,
    /// Books: early drops, tail drops, largest backlog (bytes).
    pub early_drops: u64,
    pub tail_drops: u64,
    pub max_backlog: f64,
}

/// A typical packet's transmission time for RED's idle adjustment: 500 bytes.
const TYPICAL_BYTES: f64 = 500.0;

impl RedState {
    pub fn new(q: RedQueue) -> RedState {
        RedState {
            q,
            backlog: 0.0,
            avg: 0.0,
            count: -1,
            last_ns: 0,
            idle_since: None,
            high: false,
            switch_ns: 0.0,
            started: false,
            early_drops: 0,
            tail_drops: 0,
            max_backlog: 0.0,
        }
    }

    /// Drain (and fill with cross traffic) from the last arrival to `t`, switching the cross
    /// traffic's state at its exponential times.
    fn advance(&mut self, t: u64, rng: &mut impl Rng) {
        let rate = self.q.capacity_bps / 8.0 / 1e9; // bytes per ns
        let buffer = self.q.buffer_bytes();
        let mut now = self.last_ns as f64;
        let end = t as f64;
        while now < end {
            let seg_end = end.min(self.switch_ns);
            let x = if self.high {
                self.q.cross.1
            } else {
                self.q.cross.0
            };
            // cross traffic in at x·C, everything out at C
            let dt = seg_end - now;
            let next = self.backlog - (1.0 - x) * rate * dt;
            if next <= 0.0 && self.backlog > 0.0 {
                let empty_at = now + self.backlog / ((1.0 - x) * rate);
                self.idle_since = Some(empty_at);
            }
            self.backlog = next.clamp(0.0, buffer);
            now = seg_end;
            if now >= self.switch_ns {
                self.high = !self.high;
                let u: f64 = rng.random::<f64>().max(1e-300);
                self.switch_ns = now - u.ln() * self.q.period_ns as f64;
            }
        }
        self.last_ns = t;
    }

    /// A packet of `bytes` arriving at `t` ns (in sending order).
    pub fn arrive(&mut self, t: u64, bytes: u32, rng: &mut impl Rng) -> Verdict {
        if !self.started {
            self.started = true;
            self.last_ns = t;
            let u: f64 = rng.random::<f64>().max(1e-300);
            self.switch_ns = t as f64 - u.ln() * self.q.period_ns as f64;
        }
        self.advance(t.max(self.last_ns), rng);
        let buffer = self.q.buffer_bytes();
        let (min_th, max_th) = (self.q.thresholds.0 * buffer, self.q.thresholds.1 * buffer);
        // RED's average, with the idle adjustment
        if self.backlog <= 0.0 {
            if let Some(since) = self.idle_since.take() {
                let typical = TYPICAL_BYTES * 8.0 / self.q.capacity_bps * 1e9;
                let m = ((t as f64 - since).max(0.0) / typical).min(1e9);
                self.avg *= (1.0 - self.q.w_q).powf(m);
            }
        } else {
            self.avg = (1.0 - self.q.w_q) * self.avg + self.q.w_q * self.backlog;
        }
        let size = bytes as f64;
        let early = if self.avg >= max_th {
            true
        } else if self.avg >= min_th {
            self.count += 1;
            let pb = self.q.max_p * (self.avg - min_th) / (max_th - min_th);
            let pa = if (self.count as f64) * pb >= 1.0 {
                1.0
            } else {
                pb / (1.0 - self.count as f64 * pb)
            };
            rng.random::<f64>() < pa
        } else {
            self.count = -1;
            false
        };
        if early {
            self.count = 0;
            self.early_drops += 1;
            return Verdict::EarlyDrop;
        }
        if self.backlog + size > buffer {
            self.tail_drops += 1;
            return Verdict::TailDrop;
        }
        self.backlog += size;
        self.max_backlog = self.max_backlog.max(self.backlog);
        let delay = self.backlog * 8.0 / self.q.capacity_bps * 1e9;
        Verdict::Queued(delay.round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn parse_and_print() {
        let q: RedQueue = "red:50Mbit,cross=0.2-0.6,period=2s".parse().unwrap();
        assert_eq!(q.capacity_bps, 50e6);
        assert_eq!(q.cross, (0.2, 0.6));
        assert_eq!(q.period_ns, 2_000_000_000);
        assert_eq!(q.buffer_ns, 500_000_000);
        let again: RedQueue = q.to_string().parse().unwrap();
        assert_eq!(again, q);
        for bad in [
            "fifo:1Mbit",
            "red:fast",
            "red:1Mbit,cross=0.7-0.2",
            "red:1Mbit,cross=1.2",
            "red:1Mbit,period=0s",
            "red:1Mbit,period=10us",
            "red:1Mbit,color=red",
        ] {
            assert!(bad.parse::<RedQueue>().is_err(), "{bad}");
        }
    }

    /// An idle link: the delay is the packet's own transmission time, nothing dropped.
    #[test]
    fn an_idle_link_transmits() {
        let q = RedQueue::paper(8e6, (0.0, 0.0), 1_000_000_000); // 1 byte per µs
        let mut s = RedState::new(q);
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        for i in 0..100u64 {
            assert_eq!(
                s.arrive(i * 10_000_000, 1_000, &mut rng),
                Verdict::Queued(1_000_000)
            );
        }
    }

    /// Overload: the backlog grows to RED's thresholds, RED drops early, delays approach the
    /// buffer's 0.5 s and never exceed it; the average stays between the thresholds' ends.
    #[test]
    fn overload_reaches_red_and_the_buffer_bounds_delay() {
        // 1 Mbit/s, 1 000-byte packets every 6 ms (1.33 Mbit/s offered)
        let q = RedQueue::paper(1e6, (0.0, 0.0), 1_000_000_000);
        let mut s = RedState::new(q);
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        let mut delays = Vec::new();
        for i in 0..20_000u64 {
            if let Verdict::Queued(d) = s.arrive(i * 6_000_000, 1_000, &mut rng) {
                delays.push(d);
            }
        }
        assert!(s.early_drops > 0, "{s:?}");
        let max = *delays.iter().max().unwrap();
        assert!(max <= 500_000_000 && max as f64 > 0.4 * 5e8, "{max}");
        // long-run: the link carries 1 Mbit/s, so about a quarter of the packets are dropped
        let dropped = (s.early_drops + s.tail_drops) as f64 / 20_000.0;
        assert!((dropped - 0.25).abs() < 0.03, "{dropped}");
    }

    /// Cross traffic alone, below capacity, makes no backlog; with the packets on top it
    /// builds one only in its high state.
    #[test]
    fn cross_traffic_builds_a_queue_in_its_high_state() {
        let q = RedQueue::paper(8e6, (0.1, 0.95), 200_000_000);
        let mut s = RedState::new(q);
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        // 500-byte packets every 1 ms: 4 Mbit/s, half the link
        let mut delays = Vec::new();
        for i in 0..20_000u64 {
            if let Verdict::Queued(d) = s.arrive(i * 1_000_000, 500, &mut rng) {
                delays.push(d as f64);
            }
        }
        let (lo, hi) = (
            delays.iter().cloned().fold(f64::INFINITY, f64::min),
            delays.iter().cloned().fold(0.0, f64::max),
        );
        assert_eq!(lo, 500_000.0);
        assert!(hi > 50_000_000.0, "{hi}");
    }
}
