//! The whole exchange between the two points at the end of an interval (§VIII-A "Latency
//! Aggregation"), played out in one place with every message counted in bytes.
//!
//! ```text
//! 1. end of interval: each point seals its cache (first sightings kept, duplicates
//!    counted); R → S its sampling level (1 byte); both keep the larger level
//! 2. late binding: R → S  set-difference sketch            (sketch bytes)
//!                  S      d̂, m = clamp(factor·d̂, floor, max)
//!                  S → R  m                                 (8 bytes)
//!                  S, R   build their RDAs from their caches
//!    fixed:        the RDAs were filled as packets passed
//! 3. R → S  R's RDA                                          (24 bytes a bucket)
//! 4. S      I_R − I_S, Algorithm 1; a "lost" candidate must be in S's cache, a "reordered"
//!           one must not be (else it is a false pure bucket and is vetoed)
//! 5. S → R  timestamp request for the new reordered identities   (4 + 8 per identity)
//!    R → S  response; an identity R does not hold is a false pure  (4 + ⌈n/8⌉ + 8 per found)
//!           bucket: S decodes again with it vetoed (at most 8 rounds)
//! 6. late binding, decoding incomplete, retries left: m ← 2m, back to 2 (S → R: m)
//! 7. S      deletes its lost packets from its RDA (own cache) and the reordered ones from R's
//!           RDA (response); mean and std over the clean buckets ([`super::estimate`])
//! ```
//!
//! The caches never cross. Only S decodes, as in the paper; the request/response step is
//! the explicit backward message the architecture allows.

use super::Config;
use super::bank::Rda;
use super::decode::Decoded;
use super::estimate::{self, Collapsed, Mean, Pairing, StdEstimator};
use super::point::Synopsis;
use super::session::{Decoder, Responder, Step};
use crate::method::{Estimate, MethodError, Role};

/// Most decode/request rounds per attempt (each round vetoes at least one false pure bucket).
pub const MAX_ROUNDS: u32 = 8;

/// What crossed the network, by message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bytes {
    /// R's set-difference sketch (late binding).
    pub sketch: u64,
    /// R's sampling level (1 byte) and S's choice of `m`, 8 bytes per attempt (late binding).
    pub sizing: u64,
    /// R's RDA, every attempt.
    pub rda: u64,
    /// Timestamp requests.
    pub request: u64,
    /// Timestamp responses.
    pub response: u64,
}

impl Bytes {
    pub fn total(&self) -> u64 {
        self.sketch + self.sizing + self.rda + self.request + self.response
    }
}

/// A reconciled interval: the repaired pair and everything learned on the way.
#[derive(Clone, Debug)]
pub struct Reconciled {
    /// S's RDA with its decoded lost packets deleted.
    pub sender: Rda,
    /// R's RDA with its decoded reordered packets deleted.
    pub receiver: Rda,
    /// Which buckets hold the same packets at both points.
    pub clean: Vec<bool>,
    /// The last decode.
    pub decoded: Decoded,
    /// Distinct packets with at least one clean bucket (what the mean rests on).
    pub packets: u64,
    /// Distinct packets cached at S and at R (after sampling).
    pub cached: [u64; 2],
    /// Duplicates seen at S and at R.
    pub duplicates: [u64; 2],
    /// The common sampling level.
    pub level: u8,
    /// Estimated set difference (late binding).
    pub d_hat: Option<f64>,
    /// Attempts (1 + retries used) and decode rounds over all attempts.
    pub attempts: u32,
    pub rounds: u32,
    /// False pure buckets vetoed in the last decode.
    pub vetoed: u64,
    pub bytes: Bytes,
}

impl Reconciled {
    /// Buckets that are not clean.
    pub fn dirty(&self) -> usize {
        self.clean.iter().filter(|c| !**c).count()
    }
    /// The mean over clean buckets.
    pub fn mean(&self) -> Option<Mean> {
        estimate::mean(&self.sender, &self.receiver, &self.clean)
    }
    /// Algorithm 2's collapsed pairs.
    pub fn collapsed(&self, pairing: Pairing) -> Vec<Collapsed> {
        estimate::collapse(&self.sender, &self.receiver, &self.clean, pairing)
    }
    /// The variance of the delay (Algorithm 3 or its unbiased form), around the RDA mean.
    pub fn variance(&self, std: StdEstimator, pairing: Pairing) -> Option<f64> {
        let mu = self.mean()?.mean_ns;
        estimate::variance(&self.collapsed(pairing), mu, std)
    }

    /// The estimate `owl compare` reports, with the configuration's std estimator.
    pub fn to_estimate(&self, cfg: &Config) -> Estimate {
        let mean = self.mean();
        let var = self.variance(cfg.std, cfg.pairing);
        let std_ci = self
            .mean()
            .and_then(|m| estimate::std_ci95(&self.collapsed(cfg.pairing), m.mean_ns, cfg.std));
        let complete = self.decoded.complete();
        let mut notes = Vec::new();
        let m = self.sender.per_bank();
        if let Some(d) = self.d_hat {
            notes.push(format!(
                "late binding: d̂ = {d:.0}, {} banks × {m} buckets{}",
                self.sender.banks(),
                if self.attempts > 1 {
                    format!(" after {} retries", self.attempts - 1)
                } else {
                    String::new()
                }
            ));
        }
        if !complete {
            notes.push(format!(
                "decoding incomplete: {} of {} buckets hold undecoded packets and are left out; the mean rests on {} of {} packets",
                self.dirty(),
                self.clean.len(),
                self.packets,
                self.cached[0]
            ));
        }
        if self.vetoed > 0 {
            notes.push(format!(
                "{} false pure buckets vetoed by the caches",
                self.vetoed
            ));
        }
        if self.level > 0 {
            notes.push(format!(
                "interval caches sampled at 1/{} (more packets than the cache capacity)",
                1u64 << self.level.min(63)
            ));
        }
        if self.duplicates != [0, 0] {
            notes.push(format!(
                "duplicates kept once: {} at S, {} at R",
                self.duplicates[0], self.duplicates[1]
            ));
        }
        if let Some(v) = var
            && v < 0.0
        {
            notes.push(format!(
                "negative variance estimate {v:.3e} ns² reported as std 0"
            ));
        }
        Estimate {
            // the loss rests on a complete decode: without one it is withheld, and the mean
            // rests on the clean buckets' packets (a sample by hash)
            reason: (!complete).then(|| {
                format!(
                    "loss withheld: decoding incomplete ({} of {} buckets left out); the mean rests on {} of {} packets",
                    self.dirty(),
                    self.clean.len(),
                    self.packets,
                    self.cached[0]
                )
            }),
            quantiles: None,
            recovered: None,
            mean_ns: mean.map(|m| m.mean_ns),
            std_ns: var.map(estimate::std_from_variance),
            samples: self.packets,
            bytes: self.bytes.total(),
            lost: complete.then_some(self.decoded.lost.len() as u64),
            mean_ci98_ns: None,
            std_ci95_ns: std_ci,
            notes,
        }
    }
}

/// Run the exchange of the module documentation on a sender and a receiver point. The points
/// are sealed (end of interval) and brought to their common sampling level in place.
///
/// This pumps the messages of the two halves of [`super::session`] in memory: `owl agent`
/// runs the same halves across a connection, so both reconcile identically.
pub fn reconcile(
    sender: &mut Synopsis,
    receiver: &mut Synopsis,
) -> Result<Reconciled, MethodError> {
    if sender.role() != Role::Sender || receiver.role() != Role::Receiver {
        return Err(MethodError::Invalid(
            "rda: the first synopsis must be the sender's and the second the receiver's".into(),
        ));
    }
    Config::check_pair(sender.config(), receiver.config())?;
    let (mut r, mut msg) = Responder::new(receiver)?;
    let mut s = Decoder::new(sender)?;
    loop {
        match s.on(msg)? {
            Step::Send(m) => msg = r.on(m)?,
            Step::Done(rec) => return Ok(*rec),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rda::{LateBinding, SetDiffEstimator, Sizing};
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    /// S records `n` packets; R records them minus `lost`, with delays, plus `extra` of its
    /// own; returns the true mean and population std of the common delays.
    fn scenario(
        cfg: &Config,
        n: usize,
        lost: usize,
        extra: usize,
        offset: i64,
        seed: u64,
    ) -> (Synopsis, Synopsis, f64, f64) {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut s = Synopsis::new(cfg, Role::Sender).unwrap();
        let mut r = Synopsis::new(cfg, Role::Receiver).unwrap();
        let mut delays = Vec::new();
        let t0 = 1_800_000_000_000_000_000u64;
        for i in 0..n {
            let id: u64 = rng.random();
            let t = t0 + i as u64 * 997;
            s.record_packet(id, t);
            if i < lost {
                continue;
            }
            let d = 20_000 + rng.random_range(0..200_000u64);
            r.record_packet(id, (t + d).wrapping_add_signed(offset));
            delays.push(d as f64 + offset as f64);
        }
        for i in 0..extra {
            r.record_packet(rng.random(), t0 + i as u64);
        }
        let k = delays.len() as f64;
        let mu = delays.iter().sum::<f64>() / k;
        let sd = (delays.iter().map(|x| (x - mu) * (x - mu)).sum::<f64>() / k).sqrt();
        (s, r, mu, sd)
    }

    #[test]
    fn fixed_rda_is_exact_when_the_difference_decodes() {
        let cfg = Config::fixed(2500);
        let (mut s, mut r, mu, sd) = scenario(&cfg, 100_000, 600, 600, 0, 1);
        let rec = reconcile(&mut s, &mut r).unwrap();
        assert!(rec.decoded.complete());
        assert_eq!(rec.decoded.lost.len(), 600);
        assert_eq!(rec.decoded.reordered.len(), 600);
        assert_eq!(rec.dirty(), 0);
        assert_eq!(rec.packets, 99_400);
        let e = rec.to_estimate(&cfg);
        assert!((e.mean_ns.unwrap() - mu).abs() / mu < 1e-12);
        assert!((e.std_ns.unwrap() - sd).abs() / sd < 0.1);
        assert_eq!(e.lost, Some(600));
        // bytes: R's RDA, a request for 600 ids, a response with 600 timestamps
        assert_eq!(rec.bytes.rda, 3 * 2500 * 24);
        assert_eq!(rec.bytes.request, 4 + 600 * 8);
        assert_eq!(rec.bytes.response, 4 + 75 + 600 * 8);
        assert_eq!(e.bytes, rec.bytes.total());
    }

    /// Lemma 2: a clock offset δ between the points shifts the mean by exactly δ.
    #[test]
    fn clock_offset_shifts_the_mean_by_delta() {
        let cfg = Config::fixed(1000);
        let (mut s, mut r, mu0, _) = scenario(&cfg, 20_000, 100, 100, 0, 7);
        let (mut s2, mut r2, mu1, _) = scenario(&cfg, 20_000, 100, 100, -3_000_000, 7);
        assert!((mu1 - (mu0 - 3_000_000.0)).abs() < 1e-6);
        let a = reconcile(&mut s, &mut r).unwrap().to_estimate(&cfg);
        let b = reconcile(&mut s2, &mut r2).unwrap().to_estimate(&cfg);
        let shift = b.mean_ns.unwrap() - a.mean_ns.unwrap();
        assert!((shift + 3_000_000.0).abs() < 1e-6, "shift {shift}");
        // the unbiased std does not move beyond its noise (Lemma 2's "2δμ(n−1)" is about
        // Algorithm 3's bias term, not about σ)
        let (sa, sb) = (a.std_ns.unwrap(), b.std_ns.unwrap());
        assert!((sa - sb).abs() / sa < 0.1, "{sa} vs {sb}");
    }

    #[test]
    fn partial_decoding_excludes_dirty_buckets_and_says_so() {
        let cfg = Config::fixed(300);
        let (mut s, mut r, mu, _) = scenario(&cfg, 50_000, 700, 700, 0, 3);
        let rec = reconcile(&mut s, &mut r).unwrap();
        assert!(!rec.decoded.complete());
        let e = rec.to_estimate(&cfg);
        assert!(rec.packets < 49_300);
        assert_eq!(e.samples, rec.packets);
        assert_eq!(e.lost, None);
        assert!(
            e.notes.iter().any(|n| n.contains("decoding incomplete")),
            "{:?}",
            e.notes
        );
        // an unbiased estimate from the clean remainder (delays uniform, sd ≈ 58 µs)
        assert!(rec.packets > 1_000, "{}", rec.packets);
        let m = e.mean_ns.expect("a mean from the clean remainder");
        let se = 58_000.0 / (rec.packets as f64).sqrt();
        assert!((m - mu).abs() < 6.0 * se, "{m} vs {mu}");
    }

    #[test]
    fn late_binding_sizes_from_the_estimate_and_retries() {
        let cfg = Config::default();
        let (mut s, mut r, mu, _) = scenario(&cfg, 60_000, 3_000, 3_000, 0, 4);
        let rec = reconcile(&mut s, &mut r).unwrap();
        assert!(rec.decoded.complete(), "attempts {}", rec.attempts);
        let d = rec.d_hat.unwrap();
        assert!((3_000.0..=12_000.0).contains(&d), "d̂ = {d}");
        assert!(rec.sender.per_bank() >= 1024);
        let e = rec.to_estimate(&cfg);
        assert!((e.mean_ns.unwrap() - mu).abs() / mu < 1e-12);
        assert!(rec.bytes.sketch > 0 && rec.bytes.sizing == 1 + 8 * rec.attempts as u64);

        // a sizing far too small with no retry fails partly; with retries it recovers
        let tight = |retries| Config {
            sizing: Sizing::Late(LateBinding {
                factor: 1.0,
                floor: 16,
                max_buckets_per_bank: 1 << 20,
                retries,
                setdiff: SetDiffEstimator::MinHash { k: 16 },
            }),
            ..Config::default()
        };
        let (mut s, mut r, _, _) = scenario(&tight(0), 60_000, 300, 300, 0, 5);
        let once = reconcile(&mut s, &mut r).unwrap();
        let (mut s, mut r, _, _) = scenario(&tight(6), 60_000, 300, 300, 0, 5);
        let retried = reconcile(&mut s, &mut r).unwrap();
        assert!(
            !once.decoded.complete(),
            "the tight sizing decodes only partly"
        );
        assert!(retried.decoded.complete());
        assert!(retried.attempts > 1);
    }

    #[test]
    fn sampling_levels_are_brought_together() {
        let cfg = Config {
            cache_capacity: 5_000,
            ..Config::fixed(2000)
        };
        let (mut s, mut r, _, _) = scenario(&cfg, 40_000, 2_000, 0, 0, 6);
        assert!(s.cache().level() >= 3);
        let rec = reconcile(&mut s, &mut r).unwrap();
        assert!(rec.decoded.complete());
        assert_eq!(rec.level, s.cache().level().max(r.cache().level()));
        let e = rec.to_estimate(&cfg);
        assert!(e.notes.iter().any(|n| n.contains("sampled")));
        assert!(e.samples < 6_000);
    }

    /// §III-B: duplicate sightings at either point (first sighting kept) leave the estimate
    /// exactly as without them, and are counted.
    #[test]
    fn duplicates_change_nothing_but_the_count() {
        for cfg in [Config::fixed(500), Config::default()] {
            let (mut s, mut r, mu, _) = scenario(&cfg, 20_000, 100, 100, 0, 8);
            let (mut s2, mut r2, _, _) = scenario(&cfg, 20_000, 100, 100, 0, 8);
            // replay some sightings later, with later timestamps, at both points
            let again: Vec<(u64, u64)> = s2.cache().iter().step_by(50).collect();
            for &(id, ts) in &again {
                s2.record_packet(id, ts + 7);
            }
            let again_r: Vec<(u64, u64)> = r2.cache().iter().step_by(40).collect();
            for &(id, ts) in &again_r {
                r2.record_packet(id, ts + 1_000);
            }
            let a = reconcile(&mut s, &mut r).unwrap();
            let b = reconcile(&mut s2, &mut r2).unwrap();
            assert_eq!(b.duplicates, [again.len() as u64, again_r.len() as u64]);
            let (ea, eb) = (a.to_estimate(&cfg), b.to_estimate(&cfg));
            assert_eq!(
                (ea.mean_ns, ea.std_ns, ea.samples),
                (eb.mean_ns, eb.std_ns, eb.samples)
            );
            assert!((eb.mean_ns.unwrap() - mu).abs() / mu < 1e-12);
            assert!(eb.notes.iter().any(|n| n.contains("duplicates kept once")));
        }
    }

    #[test]
    fn roles_and_configurations_are_checked() {
        let cfg = Config::fixed(10);
        let mut s = Synopsis::new(&cfg, Role::Sender).unwrap();
        let mut r = Synopsis::new(&cfg, Role::Receiver).unwrap();
        assert!(reconcile(&mut r, &mut s).is_err());
        let mut other = cfg;
        other.seed = 9;
        let mut r2 = Synopsis::new(&other, Role::Receiver).unwrap();
        let e = reconcile(&mut s, &mut r2).unwrap_err();
        assert!(matches!(e, MethodError::ConfigMismatch { ref field, .. } if field == "seed"));
        // empty interval: nothing to say, no panic
        let e = reconcile(&mut s, &mut r).unwrap().to_estimate(&cfg);
        assert_eq!((e.mean_ns, e.samples), (None, 0));
    }
}
