//! Algorithm 1 (§V-B (ii)): list the lost and the reordered packets of a subtraction RDA by
//! peeling pure buckets.
//!
//! A bucket `(i, l)` (index `i` in bank `l`) is **pure** when `h_l(ID) = i` and `|Δ| = 1`: a
//! bucket holding exactly one identity `x` has `ID = x`, and `x` hashes to its own bucket;
//! a mixture hashes to `i` only by chance (probability `1/m`). Peeling a pure bucket removes its
//! identity from its bucket in every bank, which may make other buckets pure, until none is
//! left.
//!
//! # Sign convention (the paper disagrees with itself)
//!
//! The decoder works on `I_B − I_A`, receiver minus sender ([`Subtraction::of`]). A packet only
//! the sender recorded contributes `Δ = −1`: it is **lost** (or left the interval in flight,
//! `ID_{AB̄}` in the paper's notation). A packet only the receiver recorded contributes
//! `Δ = +1`: it is **reordered** into the interval (unexpected, `ID_{ĀB}`). This is what §IV-C
//! says in words; Algorithm 1 lines 13–16 assign `Δ = 1` to the lost set, which is the sign of
//! `I_A − I_B`, not of the `I_B − I_A` its own input line names. [`Class::of_delta`] is the one
//! place the sign is decided, and `decode_classifies_by_the_subtraction_sign` tests it.
//!
//! # Departures from the listing, all for robustness
//!
//! - A bucket taken from the pure set is tested for purity again before it is peeled (line 9
//!   only tests emptiness): with consistent input a pure bucket only changes by its own peel,
//!   but hostile input must not make the decoder extract a mixture.
//! - A caller may veto a candidate (the `accept` callback), e.g. a "lost" identity that is not
//!   in the sender's cache is a false pure bucket (a mixture whose XOR happened to hash to its
//!   own index), and peeling it would corrupt `k` other buckets. [`decode_faithful`] accepts
//!   everything, as the listing does.
//! - Work and memory are bounded whatever the cells hold: every peel empties the pure bucket
//!   it came from, and with consistent input an emptied bucket stays empty, so at most
//!   `k·m` peels can be genuine; the decoder stops after that many, or at the first identity
//!   decoded twice, and reports the input as inconsistent. The pure-set stack receives at most
//!   `k·m` initial entries and `k` per peel, so it stays below `(k + 1)·k·m` entries.

use hashbrown::HashSet;

use super::bank::Subtraction;

/// Which side recorded a decoded packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Only at the sender: lost on the way, or still in flight when the interval ended.
    Lost,
    /// Only at the receiver: reordered into the interval (sent in an earlier one), or never
    /// seen by the sender.
    Reordered,
}

impl Class {
    /// The class of a pure cell of `I_B − I_A` by its `Δ` (±1).
    #[inline]
    pub fn of_delta(delta: i64) -> Class {
        if delta > 0 {
            Class::Reordered
        } else {
            Class::Lost
        }
    }
}

/// Why decoding stopped before the pure set ran dry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abort {
    /// More peels than buckets: the input cannot come from two consistent RDAs.
    TooManyPeels,
    /// The same identity was decoded twice: the input cannot come from two consistent RDAs.
    Repeated,
}

/// What Algorithm 1 found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// Identities only the sender recorded (`ID_{AB̄}`).
    pub lost: Vec<u64>,
    /// Identities only the receiver recorded (`ID_{ĀB}`).
    pub reordered: Vec<u64>,
    /// Cells still holding something after peeling (0 when decoding is complete).
    pub residual: usize,
    /// Candidates the caller vetoed.
    pub vetoed: u64,
    /// Set when decoding stopped on inconsistent input.
    pub aborted: Option<Abort>,
}

impl Decoded {
    /// Every cell was peeled empty: the whole set difference is listed.
    pub fn complete(&self) -> bool {
        self.residual == 0 && self.aborted.is_none()
    }
    /// Size of the listed set difference.
    pub fn len(&self) -> usize {
        self.lost.len() + self.reordered.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[inline]
fn pure(sub: &Subtraction, l: usize, i: usize) -> bool {
    let m = sub.hashes().per_bank();
    let c = sub.cells()[l * m + i];
    (c.delta == 1 || c.delta == -1) && sub.hashes().index(l, c.id) == i
}

/// Algorithm 1 as listed (with the sign fixed and the work bounded): every pure bucket is
/// trusted.
pub fn decode_faithful(sub: &mut Subtraction) -> Decoded {
    decode(sub, |_, _| true)
}

/// Algorithm 1, peeling `sub` in place. `accept(id, class)` may veto a candidate before it is
/// peeled (see the module documentation); a vetoed identity is never offered again.
pub fn decode(sub: &mut Subtraction, mut accept: impl FnMut(u64, Class) -> bool) -> Decoded {
    let k = sub.hashes().banks();
    let m = sub.hashes().per_bank();
    let total = k * m;
    let mut out = Decoded::default();

    // lines 3–6: the pure set Υ, as a stack of (bank, index)
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for l in 0..k {
        for i in 0..m {
            if pure(sub, l, i) {
                stack.push((l as u32, i as u32));
            }
        }
    }
    let mut seen: HashSet<u64> = HashSet::new();
    let mut vetoed: HashSet<u64> = HashSet::new();
    let mut peels = 0usize;

    // lines 7–23
    while let Some((l, i)) = stack.pop() {
        let (l, i) = (l as usize, i as usize);
        // line 9 (empty) and the purity re-test
        if !pure(sub, l, i) {
            continue;
        }
        let cell = sub.cells()[l * m + i];
        let id = cell.id;
        let class = Class::of_delta(cell.delta);
        if vetoed.contains(&id) {
            continue;
        }
        if !accept(id, class) {
            vetoed.insert(id);
            out.vetoed += 1;
            continue;
        }
        if peels == total {
            out.aborted = Some(Abort::TooManyPeels);
            break;
        }
        if !seen.insert(id) {
            out.aborted = Some(Abort::Repeated);
            break;
        }
        peels += 1;
        // lines 12–16, with the sign of I_B − I_A
        match class {
            Class::Lost => out.lost.push(id),
            Class::Reordered => out.reordered.push(id),
        }
        // lines 17–23: delete the packet from every bank
        let delta = cell.delta;
        for b in 0..k {
            let q = sub.hashes().index(b, id);
            let c = &mut sub.cells_mut()[b * m + q];
            c.id ^= id;
            c.delta = c.delta.wrapping_sub(delta);
            if pure(sub, b, q) {
                stack.push((b as u32, q as u32));
            }
        }
    }
    out.residual = sub.non_empty();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rda::bank::{Cell, Rda, Subtraction};
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    fn pair(banks: usize, m: usize, common: &[u64], only_s: &[u64], only_r: &[u64]) -> (Rda, Rda) {
        let mut s = Rda::new(banks, m, 11).unwrap();
        let mut r = Rda::new(banks, m, 11).unwrap();
        for &x in common {
            s.insert(x, x);
            r.insert(x, x + 100);
        }
        for &x in only_s {
            s.insert(x, x);
        }
        for &x in only_r {
            r.insert(x, x);
        }
        (s, r)
    }

    #[test]
    fn decode_classifies_by_the_subtraction_sign() {
        let common: Vec<u64> = (1..=500).collect();
        let (s, r) = pair(2, 64, &common, &[10_001, 10_002, 10_003], &[20_001, 20_002]);
        let mut sub = Subtraction::of(&r, &s).unwrap();
        let mut d = decode_faithful(&mut sub);
        assert!(d.complete(), "{d:?}");
        d.lost.sort_unstable();
        d.reordered.sort_unstable();
        // only at the sender → lost; only at the receiver → reordered (§IV-C's words)
        assert_eq!(d.lost, vec![10_001, 10_002, 10_003]);
        assert_eq!(d.reordered, vec![20_001, 20_002]);
        assert_eq!(Class::of_delta(-1), Class::Lost);
        assert_eq!(Class::of_delta(1), Class::Reordered);
    }

    #[test]
    fn empty_difference_decodes_to_nothing() {
        let common: Vec<u64> = (1..=1000).collect();
        let (s, r) = pair(2, 8, &common, &[], &[]);
        let mut sub = Subtraction::of(&r, &s).unwrap();
        let d = decode_faithful(&mut sub);
        assert!(d.complete() && d.is_empty());
    }

    /// Decoding recovers exactly the set difference when each bank holds m ≥ 2d buckets, with a
    /// failure rate within what the peeling analysis allows.
    ///
    /// Theorem 2 claims a failure probability `O(d^{-k})` at `m = 2d`. The smallest structure
    /// that stops peeling is two differing identities sharing their bucket in every bank, which
    /// happens with probability about `C(d,2)·m^{-k} = d^{2−k}/2^{k+1}` — so the failure rate
    /// is `Θ(d^{2−k})` (the IBLT bound of Goodrich and Mitzenmacher), not `O(d^{-k})`; for
    /// `k = 2` it does not vanish at all: any cycle in the random bipartite graph stops
    /// peeling, and at `m = 2d` the expected number of cycles is `−½·ln(1 − 1/4) ≈ 0.144`.
    /// The test checks, over many seeded trials, with the decoder as the exchange runs it
    /// (candidates checked against the caches, i.e. the true sets):
    /// - a decode never lists an identity outside the difference, nor in the wrong class;
    /// - `k = 2`: the failure rate stays near the cycle bound (≤ 0.25, expected ~0.13) and a
    ///   failed decode leaves only a few identities (a short cycle);
    /// - `k = 3, 4`: failures are at most `4·d^{2−k}`.
    ///
    /// It also counts how often the unchecked listing (Algorithm 1 as printed) peels a false
    /// pure bucket — a mixture of three or more identities with `|Δ| = 1` whose XOR hashes to
    /// its own index, probability `1/m` for each such bucket met. Measured (seed 2024): 1 % of
    /// trials for k = 2, 3, 4 (k = 2 failure rates 0.14 at d = 50 and 0.12 at d = 500, with
    /// 2.5–2.8 identities left per failure; no failure for k = 3, 4). The test allows 5 %:
    /// rare, but the reason the exchange checks candidates against the caches.
    #[test]
    fn decoding_recovers_the_set_difference_when_m_is_twice_d() {
        let mut rng = Pcg64Mcg::seed_from_u64(2024);
        for (k, d, trials) in [
            (2usize, 50usize, 400usize),
            (2, 500, 100),
            (3, 50, 400),
            (4, 20, 400),
        ] {
            let m = 2 * d;
            let (mut failures, mut left_total, mut phantom_trials) = (0usize, 0usize, 0usize);
            for _ in 0..trials {
                let seed: u64 = rng.random();
                let only_s: HashSet<u64> = (0..d / 2).map(|_| rng.random::<u64>() | 1).collect();
                let only_r: HashSet<u64> =
                    (0..d - d / 2).map(|_| rng.random::<u64>() | 1).collect();
                let mut s = Rda::new(k, m, seed).unwrap();
                let mut r = Rda::new(k, m, seed).unwrap();
                for i in 0..3000u64 {
                    let x = rng.random::<u64>();
                    s.insert(x, i);
                    r.insert(x, i + 7);
                }
                only_s.iter().for_each(|&x| s.insert(x, 1));
                only_r.iter().for_each(|&x| r.insert(x, 2));
                let sub = Subtraction::of(&r, &s).unwrap();
                let raw = decode_faithful(&mut sub.clone());
                if raw.lost.iter().any(|x| !only_s.contains(x))
                    || raw.reordered.iter().any(|x| !only_r.contains(x))
                {
                    phantom_trials += 1;
                }
                let dec = decode(&mut sub.clone(), |x, c| match c {
                    Class::Lost => only_s.contains(&x),
                    Class::Reordered => only_r.contains(&x),
                });
                assert!(dec.lost.iter().all(|x| only_s.contains(x)));
                assert!(dec.reordered.iter().all(|x| only_r.contains(x)));
                if !dec.complete() {
                    failures += 1;
                    left_total += d - dec.len();
                } else {
                    assert_eq!(dec.len(), d);
                }
            }
            let rate = failures as f64 / trials as f64;
            if k == 2 {
                assert!(rate <= 0.25, "k=2 d={d}: failure rate {rate}");
                if failures > 0 {
                    let per_failure = left_total as f64 / failures as f64;
                    assert!(
                        per_failure < 12.0,
                        "k=2 d={d}: {per_failure} left per failure"
                    );
                }
            } else {
                let bound = 4.0 * (d as f64).powi(2 - k as i32);
                assert!(rate <= bound, "k={k} d={d}: failure rate {rate} > {bound}");
            }
            assert!(
                phantom_trials * 20 <= trials,
                "k={k} d={d}: {phantom_trials} of {trials} trials peeled a false pure bucket"
            );
        }
    }

    /// Garbage cells must not loop forever or allocate without bound.
    #[test]
    fn hostile_cells_terminate_with_bounded_work() {
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        for trial in 0..200 {
            let (k, m) = (1 + trial % 4, 1 + (trial * 7) % 300);
            let cells: Vec<Cell> = (0..k * m)
                .map(|_| Cell {
                    id: if rng.random::<bool>() {
                        rng.random()
                    } else {
                        rng.random_range(0..4)
                    },
                    delta: match rng.random_range(0..4) {
                        0 => 1,
                        1 => -1,
                        2 => i64::MIN,
                        _ => rng.random(),
                    },
                })
                .collect();
            let mut sub = Subtraction::from_cells(trial as u64, k, m, cells).unwrap();
            let d = decode_faithful(&mut sub);
            assert!(d.len() <= k * m);
        }
        // A crafted cycle: a single identity planted as "pure" in every bank with Δ = 1, then
        // re-planted by a cell with Δ = 2 so that peeling it leaves another pure copy.
        let h = crate::rda::bank::BankHashes::new(3, 2, 4);
        let x = 0xdead_beef_u64;
        let mut cells = vec![Cell::default(); 8];
        cells[h.index(0, x)] = Cell { id: x, delta: 1 };
        cells[4 + h.index(1, x)] = Cell { id: 0, delta: 2 };
        let mut sub = Subtraction::from_cells(3, 2, 4, cells).unwrap();
        let d = decode_faithful(&mut sub);
        assert!(d.len() <= 8);
    }

    #[test]
    fn vetoed_candidates_are_not_peeled() {
        let common: Vec<u64> = (1..=100).collect();
        let (s, r) = pair(2, 32, &common, &[777], &[888]);
        let mut sub = Subtraction::of(&r, &s).unwrap();
        let d = decode(&mut sub, |id, _| id != 888);
        assert_eq!(d.lost, vec![777]);
        assert!(d.reordered.is_empty());
        assert!(d.vetoed >= 1);
        assert!(!d.complete());
    }
}
