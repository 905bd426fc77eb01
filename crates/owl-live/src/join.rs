//! The receiver's join of the two points' intervals as they close: which interval can be
//! decided now, and how — estimated, left out as a lead-in or lead-out, or missing.
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

use std::collections::BTreeMap;

/// What one point did with one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// Closed with packets in it.
    Data,
    /// Closed with packets, then dropped (queue full): its synopsis is lost.
    Dropped,
}

/// The decision for one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Estimate it; which points hold a synopsis (the other gets an empty one).
    Estimate { sender: bool, receiver: bool },
    /// Only one point recorded it, before the other started or after it stopped.
    Trimmed { sender: bool },
    /// A point recorded it but dropped it: say so.
    Missing {
        sender_dropped: bool,
        receiver_dropped: bool,
    },
}

#[derive(Clone, Copy, Debug, Default)]
struct Side {
    first: Option<u64>,
    last: Option<u64>,
    below: u64,
    done: bool,
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
}

/// Index of a side: 0 the sender, 1 the receiver.
pub const SENDER: usize = 0;
pub const RECEIVER: usize = 1;

impl Join {
    pub fn new() -> Join {
        Join::default()
    }

    /// Side `p` closed interval `k` with packets (announcements come in ascending order).
    pub fn have(&mut self, p: usize, k: u64, h: Held) -> Result<(), String> {
        let s = &mut self.sides[p];
        if s.last.is_some_and(|l| k <= l) || k < s.below {
            return Err(format!(
                "interval {k} announced out of order (after {:?}, below {})",
                s.last, s.below
            ));
        }
        s.first.get_or_insert(k);
        s.last = Some(k);
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
        if k >= self.sides[0].bound() || k >= self.sides[1].bound() {
            return None;
        }
        let v = match h {
            [Some(a), Some(b)] if a == Held::Dropped || b == Held::Dropped => Verdict::Missing {
                sender_dropped: a == Held::Dropped,
                receiver_dropped: b == Held::Dropped,
            },
            [Some(Held::Dropped), None] => Verdict::Missing {
                sender_dropped: true,
                receiver_dropped: false,
            },
            [None, Some(Held::Dropped)] => Verdict::Missing {
                sender_dropped: false,
                receiver_dropped: true,
            },
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
        };
        self.held.pop_first();
        Some((k, v))
    }

    /// Was point `p` not recording at `k` (which only the other point holds)? `None`: not
    /// known yet. As `owl estimate`: `k + before < first` or (`p` ended before `k` and
    /// `k > last + after`), with `before = 1` for R and `after = 1` for S.
    fn outside(&self, p: usize, k: u64) -> Option<bool> {
        let s = &self.sides[p];
        let (before, after) = if p == RECEIVER { (1, 0) } else { (0, 1) };
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

    /// `owl estimate`'s merge-join over two complete lists of recorded intervals.
    fn files(s: &[u64], r: &[u64]) -> Vec<(u64, Verdict)> {
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
                let (before, after) = if p == 1 { (1, 0) } else { (0, 1) };
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
            let want = files(&s, &r);
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
            let mut j = Join::new();
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
                Verdict::Missing {
                    sender_dropped: true,
                    receiver_dropped: false
                }
            ))
        );
        assert_eq!(
            j.decide(),
            Some((
                6,
                Verdict::Missing {
                    sender_dropped: false,
                    receiver_dropped: true
                }
            ))
        );
        assert!(j.finished());
    }
}
