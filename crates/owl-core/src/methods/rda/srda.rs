//! sRDA, the naive Reconcilable Difference Aggregator of §IV, kept to show why RDA is built
//! the way it is.
//!
//! One flat array of buckets (ID xor, TS sum, IDSH xor, Δ count); a packet goes to the (at most
//! `k`, "unique") buckets its `k` hash functions pick (§IV-B). The subtraction `I_r − I_s`
//! XORs ID and IDSH and subtracts Δ (§IV-C); a bucket is pure when `H(ID) = IDSH` and
//! `|Δ| = 1`; `Δ = +1` means only the receiver has the packet (reordered), `Δ = −1` only the
//! sender (lost). After repair, the mean is `Σ(TS_R − TS_S) / Σ Δ` over all buckets (§IV-D).
//!
//! Its two flaws (§IV-D): the IDSH field is redundant with ID (RDA's pure test `h_l(ID) = i`
//! needs no extra field), and collapsing *adjacent* buckets for the std is wrong, because one
//! packet can sit in both buckets of a pair and cancel out of the collapsed difference —
//! [`Srda::adjacent_collapse_variance`] reproduces the paper's −6089.6.

use crate::hash::{HashFamily, HashFn};

/// Hash-family members: position hashes `SRDA_MEMBER + j`, the IDSH hash `SRDA_MEMBER + 64`.
pub const SRDA_MEMBER: u64 = 0x7372_6461_0000; // "srda"

/// One sRDA bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SBucket {
    pub id: u64,
    pub ts: u64,
    pub idsh: u64,
    pub delta: i64,
}

/// A naive RDA: one flat array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Srda {
    pos: Vec<HashFn>,
    idsh: HashFn,
    buckets: Vec<SBucket>,
}

/// What sRDA decoding found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SrdaDecoded {
    pub lost: Vec<u64>,
    pub reordered: Vec<u64>,
    pub complete: bool,
}

impl Srda {
    /// `m ≥ 1` buckets, `1 ≤ k ≤ 16` hash positions per packet.
    pub fn new(m: usize, k: usize, seed: u64) -> Srda {
        let f = HashFamily::new(seed);
        Srda {
            pos: (0..k.clamp(1, 16) as u64)
                .map(|j| f.member(SRDA_MEMBER + j))
                .collect(),
            idsh: f.member(SRDA_MEMBER + 64),
            buckets: vec![SBucket::default(); m.max(1)],
        }
    }

    /// The distinct buckets of `id` ("at most k different buckets").
    pub fn positions(&self, id: u64) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .pos
            .iter()
            .map(|h| h.index(id, self.buckets.len()))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    fn update(&mut self, id: u64, ts: u64, sign: i64) {
        let chk = self.idsh.hash(id);
        for p in self.positions(id) {
            let b = &mut self.buckets[p];
            b.id ^= id;
            b.idsh ^= chk;
            b.ts = if sign > 0 {
                b.ts.wrapping_add(ts)
            } else {
                b.ts.wrapping_sub(ts)
            };
            b.delta += sign;
        }
    }

    pub fn insert(&mut self, id: u64, ts: u64) {
        self.update(id, ts, 1)
    }
    pub fn delete(&mut self, id: u64, ts: u64) {
        self.update(id, ts, -1)
    }
    pub fn buckets(&self) -> &[SBucket] {
        &self.buckets
    }

    /// Decode `receiver − sender` (§IV-C) by peeling pure buckets (`H(ID) = IDSH`,
    /// `|Δ| = 1`); at most `m` peels.
    pub fn decode(receiver: &Srda, sender: &Srda) -> SrdaDecoded {
        let mut sub: Vec<SBucket> = receiver
            .buckets
            .iter()
            .zip(&sender.buckets)
            .map(|(r, s)| SBucket {
                id: r.id ^ s.id,
                ts: 0,
                idsh: r.idsh ^ s.idsh,
                delta: r.delta.wrapping_sub(s.delta),
            })
            .collect();
        let pure =
            |b: &SBucket, h: &HashFn| (b.delta == 1 || b.delta == -1) && h.hash(b.id) == b.idsh;
        let mut out = SrdaDecoded::default();
        let mut budget = sub.len();
        let mut progress = true;
        while progress && budget > 0 {
            progress = false;
            for i in 0..sub.len() {
                let b = sub[i];
                if !pure(&b, &receiver.idsh) || budget == 0 {
                    continue;
                }
                budget -= 1;
                progress = true;
                if b.delta > 0 {
                    out.reordered.push(b.id);
                } else {
                    out.lost.push(b.id);
                }
                let chk = receiver.idsh.hash(b.id);
                for p in receiver.positions(b.id) {
                    sub[p].id ^= b.id;
                    sub[p].idsh ^= chk;
                    sub[p].delta = sub[p].delta.wrapping_sub(b.delta);
                }
            }
        }
        out.complete = sub.iter().all(|b| b.id == 0 && b.idsh == 0 && b.delta == 0);
        out
    }

    /// §IV-D: `Σ(TS_R − TS_S) / Σ Δ` over buckets whose ID and Δ agree.
    pub fn mean(sender: &Srda, receiver: &Srda) -> Option<f64> {
        let (mut sum, mut n) = (0i128, 0i128);
        for (s, r) in sender.buckets.iter().zip(&receiver.buckets) {
            if s.id == r.id && s.delta == r.delta && s.delta > 0 {
                sum += r.ts.wrapping_sub(s.ts) as i64 as i128;
                n += s.delta as i128;
            }
        }
        (n > 0).then(|| sum as f64 / n as f64)
    }

    /// The flawed std of §IV-D: collapse adjacent buckets `(2j−1, 2j)` as in eq. (1)
    /// (`TS' = TS[2j] − TS[2j−1]`, `C' = C[2j] + C[2j−1]`) and apply eq. (3)
    /// `σ² = Σ(TS'_R − TS'_S)² / Σ C' − μ²`. Returns the variance, which can be negative.
    pub fn adjacent_collapse_variance(sender: &Srda, receiver: &Srda, mu: f64) -> Option<f64> {
        let (mut sq, mut c) = (0f64, 0f64);
        for (s, r) in sender
            .buckets
            .chunks_exact(2)
            .zip(receiver.buckets.chunks_exact(2))
        {
            let xs = s[1].ts.wrapping_sub(s[0].ts);
            let xr = r[1].ts.wrapping_sub(r[0].ts);
            let x = xr.wrapping_sub(xs) as i64 as f64;
            sq += x * x;
            c += (s[0].delta + s[1].delta) as f64;
        }
        (c > 0.0).then(|| sq / c - mu * mu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An identity whose two hash positions are exactly `want` (searched, so that the example
    /// runs through the real hash functions and decoder).
    fn id_at(s: &Srda, want: &[usize], start: u64) -> u64 {
        let mut want = want.to_vec();
        want.sort_unstable();
        (start..)
            .find(|&x| x != 0 && s.positions(x) == want)
            .unwrap()
    }

    /// Figures 3 and 4: five buckets, two positions per packet. Delivered packets (S, R
    /// timestamps): P1 (70, 110) in buckets 1, 2; P2 (150, 260) in 4, 5; P4 (250, 390) in 3, 4;
    /// P6 (330, 450) in 2, 5 — the only layout consistent with the repaired sums of Fig. 4 and
    /// with the cancellations §IV-D describes (P1 in buckets 1 and 2, P4 in 3 and 4). P3 and P5
    /// are lost, P9 reordered; the text does not give their buckets, any decodable layout does.
    #[test]
    fn worked_example_of_figures_3_and_4() {
        let (mut s, mut r) = (Srda::new(5, 2, 77), Srda::new(5, 2, 77));
        let p1 = id_at(&s, &[0, 1], 1);
        let p2 = id_at(&s, &[3, 4], 1);
        let p4 = id_at(&s, &[2, 3], 1);
        let p6 = id_at(&s, &[1, 4], 1);
        let p3 = id_at(&s, &[0, 2], 1);
        let p5 = id_at(&s, &[1, 3], 1);
        let p9 = id_at(&s, &[2, 4], 1);
        for (id, ts, tr) in [
            (p1, 70, 110),
            (p2, 150, 260),
            (p4, 250, 390),
            (p6, 330, 450),
        ] {
            s.insert(id, ts);
            r.insert(id, tr);
        }
        s.insert(p3, 200);
        s.insert(p5, 300);
        r.insert(p9, 480);
        // Fig. 3: every bucket pair differs, all useless as they stand
        for (a, b) in s.buckets().iter().zip(r.buckets()) {
            assert!(a.id != b.id || a.delta != b.delta);
        }
        let d = Srda::decode(&r, &s);
        assert!(d.complete);
        let mut lost = d.lost.clone();
        lost.sort_unstable();
        let mut want = vec![p3, p5];
        want.sort_unstable();
        assert_eq!(lost, want, "P3 and P5 only at the sender: lost");
        assert_eq!(d.reordered, vec![p9], "P9 only at the receiver: reordered");
        // repair: S deletes its lost packets, R its reordered one
        s.delete(p3, 200);
        s.delete(p5, 300);
        r.delete(p9, 480);
        // Fig. 4
        let ts_s: Vec<u64> = s.buckets().iter().map(|b| b.ts).collect();
        let ts_r: Vec<u64> = r.buckets().iter().map(|b| b.ts).collect();
        let cnt: Vec<i64> = s.buckets().iter().map(|b| b.delta).collect();
        assert_eq!(ts_s, vec![70, 400, 250, 400, 480]);
        assert_eq!(ts_r, vec![110, 560, 390, 650, 710]);
        assert_eq!(cnt, vec![1, 2, 1, 2, 2]);
        // §IV-D: 820 / 8 = 102.5, the true mean of P1, P2, P4, P6
        let mu = Srda::mean(&s, &r).unwrap();
        assert_eq!(mu, 102.5);
        // the flaw: ((450−330)² + (260−150)²)/(3+3) − 102.5² = −6089.6
        let v = Srda::adjacent_collapse_variance(&s, &r, mu).unwrap();
        assert!((v - -6089.583).abs() < 1e-3, "{v}");
        // while the delays 40, 110, 140, 120 have std 37.67 (population; the paper's 43.49
        // is the n − 1 sample std)
        let ds = [40.0f64, 110.0, 140.0, 120.0];
        let pop = (ds.iter().map(|d| (d - 102.5f64).powi(2)).sum::<f64>() / 4.0).sqrt();
        let smp = (ds.iter().map(|d| (d - 102.5f64).powi(2)).sum::<f64>() / 3.0).sqrt();
        assert!((pop - 37.67).abs() < 0.01 && (smp - 43.49).abs() < 0.01);
    }

    /// The same four packets under random layouts. In a flat sRDA some packet often lands in
    /// both buckets of an adjacent pair and cancels out of the collapse (§IV-D); in an RDA a
    /// packet sits in exactly one bucket per bank, so Algorithm 2's pairs never cancel one, and
    /// the unbiased estimator averages near the true variance (1418.75 population, 1891.67
    /// for n − 1: the pairs sample without replacement) instead of going negative.
    #[test]
    fn banked_layout_avoids_the_adjacent_collapse_flaw() {
        use crate::rda::bank::Rda;
        use crate::rda::estimate::{Pairing, StdEstimator, clean_buckets, collapse, variance};
        let pkts = [(70u64, 110u64), (150, 260), (250, 390), (330, 450)];
        let runs = 400u64;
        let (mut cancelling, mut sum_v, mut n_v) = (0, 0.0, 0);
        for seed in 0..runs {
            let s2 = Srda::new(6, 2, seed);
            let ids: Vec<u64> = (0..4).map(|i| 1000 + i + 10 * seed).collect();
            if ids.iter().any(|&id| {
                let p = s2.positions(id);
                p.len() == 2 && p[0] / 2 == p[1] / 2
            }) {
                cancelling += 1;
            }
            let (mut s, mut r) = (Rda::new(2, 3, seed).unwrap(), Rda::new(2, 3, seed).unwrap());
            for (&id, &(ts, tr)) in ids.iter().zip(&pkts) {
                s.insert(id, ts);
                r.insert(id, tr);
            }
            let clean = clean_buckets(&s, &r).unwrap();
            if let Some(v) = variance(
                &collapse(&s, &r, &clean, Pairing::EqualCount),
                102.5,
                StdEstimator::Unbiased,
            ) {
                sum_v += v;
                n_v += 1;
            }
        }
        // P(one packet's two positions share a pair of 6 buckets) = 1/6 each, ~52 % for four
        assert!(cancelling > runs / 4, "{cancelling} of {runs}");
        let avg = sum_v / n_v as f64;
        assert!((1000.0..2500.0).contains(&avg), "{avg}");
    }
}
