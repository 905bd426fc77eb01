//! RDA — the Reconcilable Difference Aggregator (Fu, Barlet-Ros, Li; see `owl_core`'s list of papers).
//!
//! Aggregating timestamps (LDA, FineComb) is fast and small, but one packet recorded at only
//! one point — lost, reordered across an interval boundary, or rewritten so that its identity
//! changes — spoils every bucket it falls in. RDA treats those packets as the **set
//! difference** `S_S ⊕ S_R` of the two points' packet sets and lists them by set reconciliation
//! (an invertible Bloom lookup table in all but name), then removes them and aggregates the
//! rest exactly.
//!
//! | concern | file | paper |
//! |---|---|---|
//! | sRDA, the naive flat synopsis and its flaw | [`srda`] | §IV |
//! | the RDA: k banks × m buckets of (ID, TS, Δ), subtraction | [`bank`] | §V-A, §V-B (i) |
//! | listing lost and reordered packets | [`decode`] | Algorithm 1 |
//! | deleting them, the timestamp request/response | [`repair`] | §V-C, §VIII-A |
//! | mean, selective collapse, std | [`estimate`] | §V-C, Algorithms 2–3 |
//! | set-difference size: MinHash, strata | [`setdiff`] | §VIII-A |
//! | the interval cache, duplicates, sampling | [`cache`] | §III-B, §VIII-B |
//! | one point's synopsis and its file payload | [`point`] | §VIII-A |
//! | the whole exchange between S and R | [`exchange`] | §VIII-A |
//! | the exchange as two message-driven halves (`owl agent`) | [`session`] | §VIII-A |
//! | `owl compare` integration | [`method`] | |
//!
//! # Two sizings
//!
//! - **Fixed** (§V, the §VII evaluation): each point inserts every packet into an RDA of `k`
//!   banks of `m` buckets as it passes, and keeps its interval cache for the repair.
//! - **Late binding** (§VIII-A, the paper's system): each point only caches identity →
//!   timestamp during the interval; afterwards the sender estimates `d` from the receiver's
//!   sketch, sizes each bank to `m = factor·d̂` (Theorem 2: `2d` with k = 2; owl's default is
//!   k = 3 and `m = d̂`, see [`Config::default`]) but never below `floor` (what the std
//!   estimator needs: its relative error is about `1/√(k·m)`), both points build their RDAs
//!   from their caches, and if decoding fails the sender asks for a twice larger RDA, up to
//!   `retries` times (beyond the paper; `retries = 0` is the paper's procedure).
//!
//! # What crosses the network
//!
//! The receiver's set-difference sketch (late binding), the bank size the sender chose (8
//! bytes), the receiver's RDA (24 bytes a bucket), the timestamp request and its response.
//! The caches never do; a point's payload for `owl record` / `owl estimate` nevertheless
//! carries its cache (16 bytes a packet), since estimating offline needs it — see
//! [`point`]. `Estimate::bytes` counts only what would cross.

pub mod bank;
pub mod cache;
pub mod decode;
pub mod estimate;
pub mod exchange;
pub mod method;
pub mod point;
pub mod repair;
pub mod session;
pub mod setdiff;
pub mod srda;

use crate::method::MethodError;

pub use bank::{BUCKET_BYTES, Bucket, Rda, Subtraction};
pub use decode::{Class, Decoded, decode_faithful};
pub use estimate::{Pairing, StdEstimator};
pub use exchange::{Bytes, Reconciled, reconcile};
pub use method::RdaMethod;
pub use point::Synopsis;
pub use setdiff::SetDiffEstimator;

/// How each bank is sized.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sizing {
    /// `m` buckets per bank, fixed in advance; packets are inserted as they pass (§V).
    Fixed { buckets_per_bank: usize },
    /// Sized after the interval from the estimated set difference (§VIII-A).
    Late(LateBinding),
}

/// Late-binding parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LateBinding {
    /// `m = ⌈factor · d̂⌉` (Theorem 2 uses 2).
    pub factor: f64,
    /// Smallest `m`, whatever `d̂`: the collapsed pairs of Algorithm 2 are the std estimator's
    /// samples (`k·m/2` of them), so its relative error is about `1/√(k·m)` (≈ 2 % for
    /// `k·m ≈ 2 048`).
    pub floor: usize,
    /// Largest `m` (from `--memory`, or a sanity bound).
    pub max_buckets_per_bank: usize,
    /// Further attempts, each with twice the buckets, when decoding fails (0: the paper's
    /// single attempt).
    pub retries: u32,
    /// How `d` is estimated.
    pub setdiff: SetDiffEstimator,
}

/// Everything both points must agree on.
///
/// The fields are private: a configuration starts from a preset ([`Config::default`],
/// [`Config::fixed`], [`Config::paper_fixed`], [`Config::paper_late_binding`]) or from a
/// synopsis file ([`Config::from_pairs`]), and every change goes through a `with_*` method that
/// validates, so no `Config` outside this module holds a value [`Config::validate`] refuses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// Banks `k` (one hash function each; the paper recommends 2, §VIII-B).
    banks: usize,
    sizing: Sizing,
    /// Seed of the hash family (banks, sampling, sketches).
    seed: u64,
    /// Most distinct packets a point caches per interval before sampling (§VIII-B).
    cache_capacity: usize,
    std: StdEstimator,
    pairing: Pairing,
}

/// Most retries a late-binding configuration may ask for.
pub const MAX_RETRIES: u32 = 16;
/// Largest interval cache (packets) a configuration may ask for.
pub const MAX_CACHE: usize = 1 << 28;

impl Default for Config {
    /// owl's late binding: k = 3 banks of m = d̂ buckets each (3 cells per differing packet,
    /// 2.5× the k = 3 peeling threshold of 1.22), at least 683 per bank (≈ 2 048 buckets for
    /// the std), at most 2²² per bank, 3 retries, strata estimator, 4 Mi cached packets, the
    /// unbiased std estimator with equal-count pairing.
    ///
    /// Why not the paper's k = 2 (§VIII-B): with two banks the peeling graph is an ordinary
    /// random bipartite graph, and any cycle among the differing packets stops the decoder.
    /// At `m = 2d` a cycle exists with probability ≈ 13 % whatever `d` (measured in
    /// `decoding_recovers_the_set_difference_when_m_is_twice_d`), and at 5 000 buckets
    /// (`owl experiment rda-set-difference`, 10 runs a point) decoding is complete in every run
    /// only up to d = 1 000 (20 % of the buckets) with k = 2 (half the runs at d = 1 500–2 000,
    /// none from 2 500) but up to d = 4 000 (80 %) with k = 3 at the same bytes (none at 5 000).
    /// [`Config::paper_fixed`]
    /// and [`Config::paper_late_binding`] keep the paper's k = 2.
    fn default() -> Self {
        Config {
            banks: 3,
            sizing: Sizing::Late(LateBinding {
                factor: 1.0,
                floor: 683,
                max_buckets_per_bank: 1 << 22,
                retries: 3,
                setdiff: SetDiffEstimator::STRATA_DEFAULT,
            }),
            seed: 1,
            cache_capacity: 1 << 22,
            std: StdEstimator::Unbiased,
            pairing: Pairing::EqualCount,
        }
    }
}

impl Config {
    /// Banks `k`.
    pub fn banks(&self) -> usize {
        self.banks
    }
    /// How each bank is sized.
    pub fn sizing(&self) -> Sizing {
        self.sizing
    }
    /// Seed of the hash family.
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Most distinct packets a point caches per interval.
    pub fn cache_capacity(&self) -> usize {
        self.cache_capacity
    }
    /// The std estimator.
    pub fn std(&self) -> StdEstimator {
        self.std
    }
    /// How Algorithm 2 pairs the collapsed buckets.
    pub fn pairing(&self) -> Pairing {
        self.pairing
    }

    /// The same configuration with another hash seed (any seed is sound).
    pub fn with_seed(self, seed: u64) -> Config {
        Config { seed, ..self }
    }
    /// The same configuration with `k` banks (a fixed size stays per bank), validated.
    pub fn with_banks(self, banks: usize) -> Result<Config, MethodError> {
        let c = Config { banks, ..self };
        c.validate()?;
        Ok(c)
    }
    /// The same configuration with another sizing, validated.
    pub fn with_sizing(self, sizing: Sizing) -> Result<Config, MethodError> {
        let c = Config { sizing, ..self };
        c.validate()?;
        Ok(c)
    }
    /// The same configuration with another interval cache, validated.
    pub fn with_cache_capacity(self, cache_capacity: usize) -> Result<Config, MethodError> {
        let c = Config {
            cache_capacity,
            ..self
        };
        c.validate()?;
        Ok(c)
    }
    /// The same configuration with another std estimator and pairing.
    pub fn with_std(self, std: StdEstimator, pairing: Pairing) -> Config {
        Config {
            std,
            pairing,
            ..self
        }
    }

    /// A fixed-size RDA of `m` buckets per bank with owl's defaults (k = 3, unbiased std);
    /// `fixed(1666)` holds 4 998 buckets, the §VII storage.
    pub fn fixed(buckets_per_bank: usize) -> Config {
        Config {
            sizing: Sizing::Fixed { buckets_per_bank },
            ..Config::default()
        }
    }

    /// The §VII setup as the paper runs it: k = 2 banks of 2 500 buckets, Algorithm 2 in
    /// index order, Algorithm 3.
    pub fn paper_fixed() -> Config {
        Config {
            banks: 2,
            ..Config::fixed(2500).paper_estimators()
        }
    }

    /// The paper's procedures as listed: Algorithm 2 in index order, Algorithm 3.
    pub fn paper_estimators(self) -> Config {
        Config {
            std: StdEstimator::Algorithm3,
            pairing: Pairing::IndexOrder,
            ..self
        }
    }

    /// The paper's late binding: k = 2, MinHash, `m = 2·d̂`, no retry, Algorithms 2–3 as
    /// listed (the floor stays, at 1 024 per bank: without it a near-zero `d̂` leaves no
    /// collapsed pairs for the std).
    pub fn paper_late_binding() -> Config {
        let mut c = Config::default().paper_estimators();
        c.banks = 2;
        if let Sizing::Late(lb) = &mut c.sizing {
            lb.factor = 2.0;
            lb.floor = 1024;
            lb.retries = 0;
            lb.setdiff = SetDiffEstimator::MINHASH_DEFAULT;
        }
        c
    }

    /// Size the RDA to a byte budget for what crosses the network per interval.
    ///
    /// - Fixed: `m = ⌊budget / (24·k)⌋` buckets per bank (the receiver's RDA is what crosses;
    ///   the timestamp messages, a few bytes per decoded reordered packet, come on top).
    /// - Late binding: the budget caps each interval's RDA: the receiver's sketch is paid
    ///   first, then `m ≤ ⌊(budget − sketch) / (24·k)⌋`, and the floor is lowered to that cap
    ///   if needed. An interval whose difference needs more is decoded partly (undecodable
    ///   buckets left out). A quiet interval uses less than the budget.
    pub fn with_memory(mut self, budget: u64) -> Result<Config, MethodError> {
        let per_bucket = bank::BUCKET_BYTES * self.banks as u64;
        match &mut self.sizing {
            Sizing::Fixed { buckets_per_bank } => {
                let m = budget / per_bucket;
                if m == 0 {
                    return Err(MethodError::Invalid(format!(
                        "a {budget}-byte budget cannot hold one bucket per bank ({per_bucket} bytes)"
                    )));
                }
                *buckets_per_bank =
                    m.min(bank::MAX_TOTAL_BUCKETS as u64 / self.banks as u64) as usize;
            }
            Sizing::Late(lb) => {
                let sketch = sketch_bytes(&lb.setdiff);
                let m = budget.saturating_sub(sketch) / per_bucket;
                if m == 0 {
                    return Err(MethodError::Invalid(format!(
                        "a {budget}-byte budget cannot hold the {sketch}-byte set-difference sketch and one bucket per bank"
                    )));
                }
                let m = m.min(bank::MAX_TOTAL_BUCKETS as u64 / self.banks as u64) as usize;
                lb.max_buckets_per_bank = m;
                lb.floor = lb.floor.min(m);
            }
        }
        Ok(self)
    }

    /// Check every parameter; the error names it and its range.
    pub fn validate(&self) -> Result<(), MethodError> {
        let bad = |s: String| Err(MethodError::Invalid(s));
        if self.banks == 0 || self.banks > bank::MAX_BANKS {
            return bad(format!(
                "rda banks {} must be between 1 and {}",
                self.banks,
                bank::MAX_BANKS
            ));
        }
        if self.cache_capacity == 0 || self.cache_capacity > MAX_CACHE {
            return bad(format!(
                "rda cache capacity {} must be between 1 and {MAX_CACHE} packets",
                self.cache_capacity
            ));
        }
        let max_m = bank::MAX_TOTAL_BUCKETS / self.banks;
        match self.sizing {
            Sizing::Fixed { buckets_per_bank } => {
                if buckets_per_bank == 0 || buckets_per_bank > max_m {
                    return bad(format!(
                        "rda buckets per bank {buckets_per_bank} must be between 1 and {max_m}"
                    ));
                }
            }
            Sizing::Late(lb) => {
                if !(lb.factor.is_finite() && (1.0..=64.0).contains(&lb.factor)) {
                    return bad(format!(
                        "rda late-binding factor {} must be between 1 and 64",
                        lb.factor
                    ));
                }
                if lb.max_buckets_per_bank == 0 || lb.max_buckets_per_bank > max_m {
                    return bad(format!(
                        "rda max buckets per bank {} must be between 1 and {max_m}",
                        lb.max_buckets_per_bank
                    ));
                }
                if lb.floor == 0 || lb.floor > lb.max_buckets_per_bank {
                    return bad(format!(
                        "rda floor {} must be between 1 and the max buckets per bank {}",
                        lb.floor, lb.max_buckets_per_bank
                    ));
                }
                if lb.retries > MAX_RETRIES {
                    return bad(format!(
                        "rda retries {} must be at most {MAX_RETRIES}",
                        lb.retries
                    ));
                }
                lb.setdiff.validate().map_err(MethodError::Invalid)?;
            }
        }
        Ok(())
    }

    /// The configuration by field name, as synopsis files carry it.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            ("banks", self.banks.to_string()),
            (
                "sizing",
                match self.sizing {
                    Sizing::Fixed { .. } => "fixed".to_string(),
                    Sizing::Late(_) => "late".to_string(),
                },
            ),
        ];
        match self.sizing {
            Sizing::Fixed { buckets_per_bank } => {
                v.push(("buckets_per_bank", buckets_per_bank.to_string()));
            }
            Sizing::Late(lb) => {
                v.push(("factor", lb.factor.to_string()));
                v.push(("floor", lb.floor.to_string()));
                v.push(("max_buckets_per_bank", lb.max_buckets_per_bank.to_string()));
                v.push(("retries", lb.retries.to_string()));
                v.push(("setdiff", lb.setdiff.to_string()));
            }
        }
        v.push(("seed", self.seed.to_string()));
        v.push(("cache_capacity", self.cache_capacity.to_string()));
        v.push(("std", self.std.to_string()));
        v.push(("pairing", self.pairing.to_string()));
        v
    }

    /// Rebuild a configuration from [`pairs`](Self::pairs) (a synopsis file's, complete) or
    /// from `--method-config` settings: `sizing` (`fixed` or `late`) is required, every other
    /// field defaults to [`Config::default`] (late) or [`Config::fixed`]`(1666)`; an unknown
    /// field, or a field of the other sizing, is an error naming it.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Config, MethodError> {
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        fn num<T: std::str::FromStr>(k: &str, v: &str) -> Result<T, MethodError> {
            v.parse::<T>().map_err(|_| {
                MethodError::Invalid(format!("rda configuration: {k} = '{v}' is not a number"))
            })
        }
        let (mut c, known): (Config, &[&str]) = match get("sizing") {
            Some("fixed") => (Config::fixed(1666), &["buckets_per_bank"]),
            Some("late") => (
                Config::default(),
                &[
                    "factor",
                    "floor",
                    "max_buckets_per_bank",
                    "retries",
                    "setdiff",
                ],
            ),
            Some(s) => {
                return Err(MethodError::Invalid(format!(
                    "rda configuration: sizing '{s}' is neither fixed nor late"
                )));
            }
            None => {
                return Err(MethodError::Invalid(
                    "rda configuration lacks 'sizing'".into(),
                ));
            }
        };
        let common = [
            "banks",
            "sizing",
            "seed",
            "cache_capacity",
            "std",
            "pairing",
        ];
        for (k, v) in pairs {
            let (k, v) = (k.as_str(), v.as_str());
            if !common.contains(&k) && !known.contains(&k) {
                return Err(MethodError::Invalid(format!(
                    "rda configuration: unknown field '{k}' for sizing '{}'",
                    get("sizing").unwrap_or_default()
                )));
            }
            match (k, &mut c.sizing) {
                ("banks", _) => c.banks = num(k, v)?,
                ("sizing", _) => {}
                ("seed", _) => c.seed = num(k, v)?,
                ("cache_capacity", _) => c.cache_capacity = num(k, v)?,
                ("std", _) => c.std = v.parse().map_err(MethodError::Invalid)?,
                ("pairing", _) => c.pairing = v.parse().map_err(MethodError::Invalid)?,
                ("buckets_per_bank", Sizing::Fixed { buckets_per_bank }) => {
                    *buckets_per_bank = num(k, v)?
                }
                ("factor", Sizing::Late(lb)) => lb.factor = num(k, v)?,
                ("floor", Sizing::Late(lb)) => lb.floor = num(k, v)?,
                ("max_buckets_per_bank", Sizing::Late(lb)) => lb.max_buckets_per_bank = num(k, v)?,
                ("retries", Sizing::Late(lb)) => lb.retries = num(k, v)?,
                ("setdiff", Sizing::Late(lb)) => {
                    lb.setdiff = v.parse().map_err(MethodError::Invalid)?
                }
                _ => unreachable!("field {k} checked above"),
            }
        }
        c.validate()?;
        Ok(c)
    }

    /// The pair check: the first field in which the sender's and the receiver's configurations
    /// differ, as a configuration mismatch.
    pub fn check_pair(sender: &Config, receiver: &Config) -> Result<(), MethodError> {
        let (a, b) = (sender.pairs(), receiver.pairs());
        for (k, v) in &a {
            let w = b
                .iter()
                .find(|(k2, _)| k2 == k)
                .map(|(_, w)| w.clone())
                .unwrap_or_else(|| "absent".into());
            if *v != w {
                return Err(MethodError::ConfigMismatch {
                    field: (*k).to_string(),
                    sender: v.clone(),
                    receiver: w,
                });
            }
        }
        if let Some((k, w)) = b.iter().find(|(k, _)| !a.iter().any(|(k2, _)| k2 == k)) {
            return Err(MethodError::ConfigMismatch {
                field: (*k).to_string(),
                sender: "absent".into(),
                receiver: w.clone(),
            });
        }
        Ok(())
    }
}

/// Bytes of the receiver's set-difference sketch on the wire (at most, for MinHash).
pub fn sketch_bytes(e: &SetDiffEstimator) -> u64 {
    match *e {
        SetDiffEstimator::MinHash { k } => 8 + 4 + 8 * k as u64,
        SetDiffEstimator::Strata { strata, cells } => {
            (strata * cells.div_ceil(setdiff::STRATA_HASHES) * setdiff::STRATA_HASHES) as u64
                * setdiff::STRATA_CELL_BYTES
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owned(p: Vec<(&'static str, String)>) -> Vec<(String, String)> {
        p.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    #[test]
    fn pairs_roundtrip() {
        for c in [
            Config::default(),
            Config::fixed(2500),
            Config::paper_fixed(),
            Config::paper_late_binding(),
            Config::default().with_memory(120_000).unwrap(),
        ] {
            c.validate().unwrap();
            assert_eq!(Config::from_pairs(&owned(c.pairs())).unwrap(), c);
        }
    }

    #[test]
    fn bad_configurations_are_refused_with_the_field() {
        let mut p = owned(Config::fixed(10).pairs());
        p.push(("rows".into(), "3".into()));
        let e = Config::from_pairs(&p).unwrap_err().to_string();
        assert!(e.contains("unknown field 'rows'"), "{e}");
        let mut p = owned(Config::default().pairs());
        p.retain(|(k, _)| k != "sizing");
        assert!(
            Config::from_pairs(&p)
                .unwrap_err()
                .to_string()
                .contains("lacks 'sizing'")
        );
        // a field of the other sizing
        let mut p = owned(Config::fixed(10).pairs());
        p.push(("floor".into(), "3".into()));
        let e = Config::from_pairs(&p).unwrap_err().to_string();
        assert!(
            e.contains("unknown field 'floor' for sizing 'fixed'"),
            "{e}"
        );
        // missing fields take the defaults
        let c = Config::from_pairs(&[
            ("sizing".into(), "late".into()),
            ("banks".into(), "2".into()),
        ])
        .unwrap();
        assert_eq!(
            c,
            Config {
                banks: 2,
                ..Config::default()
            }
        );
        for (k, v, msg) in [
            ("banks", "0", "banks"),
            ("banks", "x", "not a number"),
            ("factor", "0.5", "factor"),
            ("factor", "NaN", "factor"),
            ("retries", "99", "retries"),
            ("floor", "0", "floor"),
            ("setdiff", "bloom", "set-difference"),
            ("std", "median", "std estimator"),
            ("sizing", "elastic", "sizing"),
        ] {
            let mut p = owned(Config::default().pairs());
            for (k2, v2) in p.iter_mut() {
                if k2 == k {
                    *v2 = v.into();
                }
            }
            let e = Config::from_pairs(&p).unwrap_err().to_string();
            assert!(e.contains(msg), "{k}={v}: {e}");
        }
        let e = Config::fixed(usize::MAX)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("buckets per bank"), "{e}");
    }

    #[test]
    fn memory_sizing() {
        let c = Config::fixed(1).with_memory(120_000).unwrap();
        assert_eq!(
            c.sizing,
            Sizing::Fixed {
                buckets_per_bank: 1666
            }
        );
        let c = Config::paper_fixed().with_memory(120_000).unwrap();
        assert_eq!(
            c.sizing,
            Sizing::Fixed {
                buckets_per_bank: 2500
            }
        );
        assert!(Config::fixed(1).with_memory(71).is_err());
        let c = Config::default().with_memory(120_000).unwrap();
        let Sizing::Late(lb) = c.sizing else { panic!() };
        assert_eq!(lb.max_buckets_per_bank, (120_000 - 20_736) / 72);
        assert_eq!(lb.floor, 683);
        let c = Config::default().with_memory(30_000).unwrap();
        let Sizing::Late(lb) = c.sizing else { panic!() };
        assert_eq!(lb.floor, lb.max_buckets_per_bank);
        assert!(Config::default().with_memory(20_000).is_err());
    }

    #[test]
    fn mismatch_names_the_field() {
        let a = Config::fixed(100);
        let mut b = a;
        b.seed = 2;
        let e = Config::check_pair(&a, &b).unwrap_err().to_string();
        assert!(
            e.contains("seed is 1 at the sender but 2 at the receiver"),
            "{e}"
        );
        assert!(Config::check_pair(&a, &a).is_ok());
        let e = Config::check_pair(&a, &Config::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("sizing"), "{e}");
    }
}
