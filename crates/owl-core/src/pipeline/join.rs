//! The join of the two points' intervals as they close: which interval can be decided now,
//! and how — estimated, left out as a lead-in or lead-out, or missing. The live receiver
//! (`owl_live`) decides by it as the two streams announce their intervals.
//!
//! The rule is `owl estimate`'s for two files, decided as early as the streams allow: an
//! interval only one point recorded is estimated against an empty synopsis of the other
//! (everything lost, or everything unexpected) unless it lies before the other point's first
//! interval or after its last — that point was not recording. Packets in flight cross into the
//! next interval at R, so S's interval just before R's first and R's just after S's last are
//! kept. An interval a point recorded but lost to overload is **missing**, never estimated.
//!
//! What each side tells: the intervals it closed with packets in them (in order, so the first
//! one it announces is its first), `below` — it will announce nothing under this index — and
//! when its capture is done. A point whose stream has passed index `n` has a packet at or
//! after `n` (its newest), so while it is not done it is still recording at any `k < below`.
//!
//! **Restarts and broken connections.** The join of a run that lost its connection, or one
//! of whose agents was restarted, keeps the same rule and says what it could not estimate:
//!
//! - [`forget`](Join::forget): the connection to S broke; what S announced and R has not
//!   decided is forgotten, since S announces it again, synopses and all.
//! - [`restart`](Join::restart): a point's agent was not running from interval `from` on,
//!   until it started again during interval `started` (a live capture; it recorded only part
//!   of that one) or, replaying a file, until the first interval it announces again. An
//!   interval in that stretch is **missing** ("not running"), whichever point holds it; it is
//!   never estimated against an empty synopsis, which would call every packet lost.
//! - [`reported_below`](Join::reported_below): a restarted receiver resumes where the previous
//!   one released S: intervals below are [`Verdict::Reported`] already and written no more.

use std::collections::BTreeMap;

/// What one point did with one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// Closed with packets in it.
    Data,
    /// Closed with packets, then dropped (queue full): its synopsis is lost.
    Dropped,
}

/// Why an interval is missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// A point dropped its synopsis (overload).
    Dropped { sender: bool, receiver: bool },
    /// A point's agent was not running.
    NotRunning { sender: bool },
    /// A point's agent started again during it and recorded only part of it.
    Restarted { sender: bool },
}

impl Why {
    /// The reason a missing line gives.
    pub fn reason(self) -> &'static str {
        match self {
            Why::Dropped {
                sender: true,
                receiver: true,
            } => "dropped at both points (overload)",
            Why::Dropped { sender: true, .. } => "dropped at the sender (overload)",
            Why::Dropped { .. } => "dropped at the receiver (overload)",
            Why::NotRunning { sender: true } => "the sender agent was not running",
            Why::NotRunning { sender: false } => "the receiver agent was not running",
            Why::Restarted { sender: true } => {
                "the sender agent started again during it (recorded only part of it)"
            }
            Why::Restarted { sender: false } => {
                "the receiver agent started again during it (recorded only part of it)"
            }
        }
    }
}

/// The decision for one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Estimate it; which points hold a synopsis (the other gets an empty one).
    Estimate { sender: bool, receiver: bool },
    /// Only one point recorded it, before the other started or after it stopped.
    Trimmed { sender: bool },
    /// No estimate, and why: say so.
    Missing(Why),
    /// A previous receiver decided it before it was restarted: nothing more to say.
    Reported,
}

#[derive(Clone, Copy, Debug, Default)]
struct Side {
    first: Option<u64>,
    last: Option<u64>,
    below: u64,
    done: bool,
    restart: Option<Restart>,
}

/// A point's agent was not running from `from` on, until it started again.
#[derive(Clone, Copy, Debug)]
struct Restart {
    from: u64,
    /// The interval its live capture started in, if known.
    started: Option<u64>,
    /// The first interval it announced since (a replay has no start time).
    back: Option<u64>,
}

impl Side {
    /// Nothing will be announced below this.
    fn bound(&self) -> u64 {
        if self.done { u64::MAX } else { self.below }
    }
}

/// Both points' announcements and the intervals not yet decided.
#[derive(Debug, Default)]
pub struct Join {
    sides: [Side; 2],
    held: BTreeMap<u64, [Option<Held>; 2]>,
    /// Every interval below this is decided (or was, by a previous receiver).
    decided: u64,
    /// A delimiter cut: R's interval just after S's last holds none of S's packets.
    delimited: bool,
}

/// Index of a side: 0 the sender, 1 the receiver.
pub const SENDER: usize = 0;
pub const RECEIVER: usize = 1;

/// A side announced an interval at or before one it announced already, or below where it said
/// it would announce nothing more.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("interval {index} announced out of order (after {last:?}, below {below})")]
pub struct OutOfOrder {
    pub index: u64,
    pub last: Option<u64>,
    pub below: u64,
}

impl Join {
    pub fn new() -> Join {
        Join::default()
    }

    /// The join of a delimiter cut ([`crate::cut`]): R's interval just after S's last is a
    /// lead-out like the later ones, since the cut put S's packets in flight at S's last
    /// boundary in S's last interval (under a clock cut they are in R's next one: it is kept).
    pub fn delimited() -> Join {
        Join {
            delimited: true,
            ..Join::default()
        }
    }

    /// Side `p` closed interval `k` with packets (announcements come in ascending order).
    pub fn have(&mut self, p: usize, k: u64, h: Held) -> Result<(), OutOfOrder> {
        let s = &mut self.sides[p];
        if s.last.is_some_and(|l| k <= l) || k < s.below {
            return Err(OutOfOrder {
                index: k,
                last: s.last,
                below: s.below,
            });
        }
        s.first.get_or_insert(k);
        s.last = Some(k);
        if let Some(r) = s.restart.as_mut() {
            r.back.get_or_insert(k);
        }
        self.held.entry(k).or_insert([None, None])[p] = Some(h);
        Ok(())
    }

    /// Side `p` will announce nothing below `n`.
    pub fn below(&mut self, p: usize, n: u64) {
        let s = &mut self.sides[p];
        s.below = s.below.max(n);
    }

    /// Side `p`'s capture ended: everything is announced.
    pub fn done(&mut self, p: usize) {
        self.sides[p].done = true;
    }

    pub fn is_done(&self, p: usize) -> bool {
        self.sides[p].done
    }

    /// Side `p`, still recording, has passed interval `n` without announcing it: it said it
    /// will announce nothing below a later one, or announced a later one (announcements come
    /// in order). A side that is done has passed nothing: its capture stopped, it saw nothing.
    pub fn passed(&self, p: usize, n: u64) -> bool {
        let s = &self.sides[p];
        !s.done && (s.below > n || s.last.is_some_and(|l| l > n))
    }

    /// Side `p` is done and every interval it announced is decided: nothing more is needed
    /// from it.
    pub fn is_through(&self, p: usize) -> bool {
        self.sides[p].done && self.held.values().all(|h| h[p].is_none())
    }

    /// Every interval below this is decided.
    pub fn decided_below(&self) -> u64 {
        self.decided
    }

    /// The connection to side `p` broke: forget what it announced and was not decided (it
    /// announces that again), and expect its announcements from the first undecided interval.
    pub fn forget(&mut self, p: usize) {
        for h in self.held.values_mut() {
            h[p] = None;
        }
        self.held.retain(|_, h| h.iter().any(Option::is_some));
        let s = &mut self.sides[p];
        s.last = None;
        s.below = self.decided;
        s.done = false;
    }

    /// Side `p`'s agent was not running from interval `from` on; it started again during
    /// `started` (a live capture), or, if that is unknown, at the first interval it announced
    /// since it last connected (a receiver's own first, for its own restart; a sender's next,
    /// after [`forget`](Join::forget)).
    pub fn restart(&mut self, p: usize, from: u64, started: Option<u64>) {
        let s = &self.sides[p];
        let back = if s.last.is_some() { s.first } else { None };
        self.sides[p].restart = Some(Restart {
            from,
            started,
            back,
        });
    }

    /// Side `p`'s live capture opened during interval `k`: if it restarted and that was not
    /// known yet, this is where it started again.
    pub fn started(&mut self, p: usize, k: u64) {
        if let Some(r) = self.sides[p].restart.as_mut() {
            r.started.get_or_insert(k);
        }
    }

    /// A previous receiver decided every interval below `n`.
    pub fn reported_below(&mut self, n: u64) {
        self.decided = self.decided.max(n);
    }

    /// Was side `p` not running (or running for part of the interval only) at `k`?
    fn down(&self, p: usize, k: u64) -> Option<Why> {
        let r = self.sides[p].restart?;
        let sender = p == SENDER;
        if k < r.from {
            return None;
        }
        match (r.started, r.back) {
            (Some(st), _) if k < st => Some(Why::NotRunning { sender }),
            (Some(st), _) if k == st => Some(Why::Restarted { sender }),
            (Some(_), _) => None,
            (None, Some(b)) if k >= b => None,
            (None, _) => Some(Why::NotRunning { sender }),
        }
    }

    /// Intervals announced and not yet decided.
    pub fn pending(&self) -> usize {
        self.held.len()
    }

    /// Both sides done and every interval decided.
    pub fn finished(&self) -> bool {
        self.sides[0].done && self.sides[1].done && self.held.is_empty()
    }

    /// The oldest interval not yet decided, with its decision, if it can be decided now.
    pub fn decide(&mut self) -> Option<(u64, Verdict)> {
        let (&k, &h) = self.held.first_key_value()?;
        if k < self.decided {
            self.held.pop_first();
            return Some((k, Verdict::Reported));
        }
        if k >= self.sides[0].bound() || k >= self.sides[1].bound() {
            return None;
        }
        let dropped = |x: Option<Held>| x == Some(Held::Dropped);
        let v = if let Some(w) = self.down(SENDER, k).or_else(|| self.down(RECEIVER, k)) {
            Verdict::Missing(w)
        } else if dropped(h[0]) || dropped(h[1]) {
            Verdict::Missing(Why::Dropped {
                sender: dropped(h[0]),
                receiver: dropped(h[1]),
            })
        } else {
            self.rule(k, h)?
        };
        self.held.pop_first();
        self.decided = k + 1;
        Some((k, v))
    }

    /// `owl estimate`'s rule for an interval with no synopsis lost.
    fn rule(&self, k: u64, h: [Option<Held>; 2]) -> Option<Verdict> {
        Some(match h {
            [Some(_), Some(_)] => Verdict::Estimate {
                sender: true,
                receiver: true,
            },
            [Some(_), None] => match self.outside(RECEIVER, k)? {
                true => Verdict::Trimmed { sender: true },
                false => Verdict::Estimate {
                    sender: true,
                    receiver: false,
                },
            },
            [None, Some(_)] => match self.outside(SENDER, k)? {
                true => Verdict::Trimmed { sender: false },
                false => Verdict::Estimate {
                    sender: false,
                    receiver: true,
                },
            },
            [None, None] => unreachable!("an interval is held because a side announced it"),
        })
    }

    /// Was point `p` not recording at `k` (which only the other point holds)? `None`: not
    /// known yet. As `owl estimate`: `k + before < first` or (`p` ended before `k` and
    /// `k > last + after`), with `before = 1` for R and `after = 1` for S (0 under a
    /// delimiter cut).
    fn outside(&self, p: usize, k: u64) -> Option<bool> {
        let s = &self.sides[p];
        let (before, after) = if p == RECEIVER {
            (1, 0)
        } else {
            (0, u64::from(!self.delimited))
        };
        match s.first {
            // p has recorded: its first is final (intervals close in order)
            Some(f) => {
                // not done: p's stream is past k, so it holds a packet after k (not ended)
                let ended = s.done && s.last.is_none_or(|l| l < k);
                Some(
                    k.saturating_add(before) < f
                        || (ended && s.last.is_some_and(|l| k > l.saturating_add(after))),
                )
            }
            // p recorded nothing at all: it has no first, nothing is outside it
            None if s.done => Some(false),
            // p will record from `below` on (or later): decided once that is past k + before
            None if s.below > k.saturating_add(before) => Some(true),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A side has passed an interval it skipped or said it is below; a side that is done, or
    /// whose connection broke, has passed nothing it did not announce.
    #[test]
    fn a_side_passes_what_it_skips() {
        let mut j = Join::new();
        j.have(SENDER, 3, Held::Data).unwrap();
        assert!(!j.passed(SENDER, 3) && !j.passed(SENDER, 4));
        assert!(j.passed(SENDER, 2));
        j.below(SENDER, 6);
        assert!(j.passed(SENDER, 5) && !j.passed(SENDER, 6));
        j.have(SENDER, 9, Held::Data).unwrap();
        assert!(j.passed(SENDER, 8));
        j.done(SENDER);
        assert!(!j.passed(SENDER, 8), "done: its capture stopped");
        let mut j = Join::new();
        j.have(SENDER, 3, Held::Data).unwrap();
        j.forget(SENDER);
        assert!(!j.passed(SENDER, 2));
    }

    /// `owl estimate`'s merge-join over two complete lists of recorded intervals.
    fn files(s: &[u64], r: &[u64], delimited: bool) -> Vec<(u64, Verdict)> {
        let mut all: Vec<u64> = s.iter().chain(r).copied().collect();
        all.sort_unstable();
        all.dedup();
        let first = [s.first().copied(), r.first().copied()];
        let mut last = first;
        let mut out = Vec::new();
        for &k in &all {
            let has = [s.contains(&k), r.contains(&k)];
            for p in 0..2 {
                if has[p] {
                    last[p] = Some(k);
                }
            }
            let ended = [!s.iter().any(|&x| x >= k), !r.iter().any(|&x| x >= k)];
            let outside = |p: usize| {
                let (before, after) = if p == 1 {
                    (1, 0)
                } else {
                    (0, u64::from(!delimited))
                };
                first[p].is_some_and(|f| {
                    k + before < f || (ended[p] && last[p].is_some_and(|l| k > l + after))
                })
            };
            let v = if has[0] != has[1] && outside(usize::from(has[0])) {
                Verdict::Trimmed { sender: has[0] }
            } else {
                Verdict::Estimate {
                    sender: has[0],
                    receiver: has[1],
                }
            };
            out.push((k, v));
        }
        out
    }

    /// R's interval just after S's last: estimated under a clock cut (S's packets in flight
    /// at its last boundary are in it at R), a lead-out under a delimiter cut (the cut put
    /// them in S's last interval).
    #[test]
    fn the_interval_after_the_senders_last_is_a_lead_out_under_a_delimiter_cut() {
        assert_eq!(
            files(&[3, 4], &[3, 4, 5, 6], false)[2..],
            [
                (
                    5,
                    Verdict::Estimate {
                        sender: false,
                        receiver: true
                    }
                ),
                (6, Verdict::Trimmed { sender: false })
            ]
        );
        assert_eq!(
            files(&[3, 4], &[3, 4, 5, 6], true)[2..],
            [
                (5, Verdict::Trimmed { sender: false }),
                (6, Verdict::Trimmed { sender: false })
            ]
        );
    }

    /// The join, fed as two streams would feed it (below advancing to each side's newest
    /// interval), decides every interval as the files' merge-join does.
    #[test]
    fn live_decisions_equal_the_file_merge_join() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(1);
        for trial in 0..3000 {
            let pick = |rng: &mut rand_pcg::Pcg64Mcg| -> Vec<u64> {
                let lo = rng.random_range(0..6u64);
                let hi = lo + rng.random_range(0..8u64);
                (lo..hi).filter(|_| rng.random_range(0..4) > 0).collect()
            };
            let (s, r) = (pick(&mut rng), pick(&mut rng));
            let delimited = trial % 2 == 1;
            let want = files(&s, &r, delimited);
            // each side's stream: a `below` up to its first interval, then each interval
            // announced as the stream passes it (below somewhere up to the next one), the
            // last one at the end of the capture
            let events = |list: &[u64], rng: &mut rand_pcg::Pcg64Mcg| {
                let mut ev = Vec::new();
                if let Some(&f) = list.first() {
                    ev.push((None, rng.random_range(0..=f)));
                }
                for (n, &k) in list.iter().enumerate() {
                    match list.get(n + 1) {
                        Some(&next) => ev.push((Some(k), rng.random_range(k + 1..=next))),
                        None => ev.push((Some(k), u64::MAX)),
                    }
                }
                if list.is_empty() {
                    ev.push((None, u64::MAX));
                }
                ev
            };
            let streams = [events(&s, &mut rng), events(&r, &mut rng)];
            let mut pos = [0, 0];
            let mut j = if delimited {
                Join::delimited()
            } else {
                Join::new()
            };
            let mut got = Vec::new();
            while pos[0] < streams[0].len() || pos[1] < streams[1].len() {
                let side = rng.random_range(0..2usize);
                let Some(&(k, b)) = streams[side].get(pos[side]) else {
                    continue;
                };
                pos[side] += 1;
                if let Some(k) = k {
                    j.have(side, k, Held::Data).unwrap();
                }
                if b == u64::MAX {
                    j.done(side);
                } else {
                    j.below(side, b);
                }
                while let Some(d) = j.decide() {
                    got.push(d);
                }
            }
            assert!(j.finished());
            assert_eq!(got, want, "trial {trial}: S {s:?} R {r:?}");
        }
    }

    #[test]
    fn dropped_intervals_are_missing_and_order_is_enforced() {
        let mut j = Join::new();
        j.have(SENDER, 5, Held::Dropped).unwrap();
        j.have(RECEIVER, 5, Held::Data).unwrap();
        j.have(RECEIVER, 6, Held::Dropped).unwrap();
        assert!(j.have(RECEIVER, 6, Held::Data).is_err());
        j.done(SENDER);
        j.done(RECEIVER);
        assert_eq!(
            j.decide(),
            Some((
                5,
                Verdict::Missing(Why::Dropped {
                    sender: true,
                    receiver: false
                })
            ))
        );
        assert_eq!(
            j.decide(),
            Some((
                6,
                Verdict::Missing(Why::Dropped {
                    sender: false,
                    receiver: true
                })
            ))
        );
        assert!(j.finished());
    }

    fn drain(j: &mut Join) -> Vec<(u64, Verdict)> {
        std::iter::from_fn(|| j.decide()).collect()
    }

    const BOTH: Verdict = Verdict::Estimate {
        sender: true,
        receiver: true,
    };

    /// The connection breaks with S's intervals 3 and 4 announced and undecided; S announces
    /// them again, then 5: all are estimated as if nothing had happened.
    #[test]
    fn a_broken_connection_is_decided_as_if_nothing_happened() {
        let mut j = Join::new();
        for k in 1..=5 {
            j.have(RECEIVER, k, Held::Data).unwrap();
        }
        j.below(RECEIVER, 6);
        for k in 1..=4 {
            j.have(SENDER, k, Held::Data).unwrap();
        }
        j.below(SENDER, 3);
        assert_eq!(drain(&mut j), vec![(1, BOTH), (2, BOTH)]);
        j.forget(SENDER);
        assert_eq!(j.decided_below(), 3);
        // S, resuming from its last release (2), announces 2 again: R ignores what it decided
        // (the agent does), and the join refuses it
        assert!(j.have(SENDER, 2, Held::Data).is_err());
        j.have(SENDER, 3, Held::Data).unwrap();
        j.have(SENDER, 4, Held::Data).unwrap();
        j.have(SENDER, 5, Held::Data).unwrap();
        j.done(SENDER);
        j.done(RECEIVER);
        assert_eq!(drain(&mut j), vec![(3, BOTH), (4, BOTH), (5, BOTH)]);
        assert!(j.finished());
    }

    /// A restarted receiver (a new process) resumes at S's last release, 10: S's 10, 11
    /// (dropped at S: the down time says why first) and 12 are missing as the receiver was not
    /// running, 13 (R's capture started during it) is missing, 14 on is estimated; 9, which
    /// the previous receiver reported, is not written again.
    #[test]
    fn a_restarted_receiver_reports_only_its_down_time_missing() {
        let mut j = Join::new();
        j.reported_below(10);
        j.restart(RECEIVER, 10, Some(13));
        for k in 13..=15 {
            j.have(RECEIVER, k, Held::Data).unwrap();
        }
        j.have(SENDER, 10, Held::Data).unwrap();
        j.have(SENDER, 11, Held::Dropped).unwrap();
        for k in 12..=15 {
            j.have(SENDER, k, Held::Data).unwrap();
        }
        j.done(SENDER);
        j.done(RECEIVER);
        let not_running = Verdict::Missing(Why::NotRunning { sender: false });
        assert_eq!(
            drain(&mut j),
            vec![
                (10, not_running),
                (11, not_running),
                (12, not_running),
                (13, Verdict::Missing(Why::Restarted { sender: false })),
                (14, BOTH),
                (15, BOTH)
            ]
        );
        // an interval only R holds, below the resume point (R captured before S connected)
        let mut j = Join::new();
        j.reported_below(10);
        j.have(RECEIVER, 9, Held::Data).unwrap();
        j.have(RECEIVER, 10, Held::Data).unwrap();
        j.have(SENDER, 10, Held::Data).unwrap();
        j.done(SENDER);
        j.done(RECEIVER);
        assert_eq!(drain(&mut j), vec![(9, Verdict::Reported), (10, BOTH)]);
    }

    /// A restarted sender replaying a file (no start time): R's intervals from where the
    /// connection broke until S's first new one are missing, not estimated as all unexpected.
    #[test]
    fn a_restarted_sender_without_a_start_time_is_down_until_it_announces() {
        let mut j = Join::new();
        for k in 0..=6 {
            j.have(RECEIVER, k, Held::Data).unwrap();
        }
        j.below(RECEIVER, 7);
        j.have(SENDER, 0, Held::Data).unwrap();
        j.have(SENDER, 1, Held::Data).unwrap();
        j.below(SENDER, 1);
        assert_eq!(drain(&mut j), vec![(0, BOTH)]);
        j.forget(SENDER);
        j.restart(SENDER, j.decided_below(), None);
        j.have(SENDER, 4, Held::Data).unwrap();
        j.have(SENDER, 5, Held::Data).unwrap();
        j.done(SENDER);
        j.done(RECEIVER);
        let down = Verdict::Missing(Why::NotRunning { sender: true });
        assert_eq!(
            drain(&mut j),
            vec![
                (1, down),
                (2, down),
                (3, down),
                (4, BOTH),
                (5, BOTH),
                (
                    6,
                    Verdict::Estimate {
                        sender: false,
                        receiver: true
                    }
                )
            ]
        );
    }
}
