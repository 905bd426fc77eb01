//! One observation point's RDA state for one interval: its interval cache and, in the fixed
//! sizing, the RDA it fills as packets pass.
//!
//! # The point payload (for `owl record` / `owl estimate`)
//!
//! RDA cannot be estimated from the RDA alone: the repair needs the sender's timestamps of its
//! lost packets and the receiver's timestamps of its reordered ones, and late binding builds
//! the RDA only after the interval. A point's payload therefore carries **its cache**
//! (16 bytes a cached packet, sorted by identity) — in a real deployment that cache stays at
//! its point and only the messages of [`super::exchange`] cross, which is what
//! `Estimate::bytes` counts; the payload is what lets `owl estimate` replay that exchange
//! offline. The fixed-size RDA is not stored: it is a deterministic function of the cache and
//! the configuration, rebuilt on decoding.
//!
//! ```text
//! "RDA1" | u8 sizing (0 fixed, 1 late) | u8 banks | u64 buckets per bank (0 for late)
//! | u8 sampling level | u64 duplicates | u64 unsampled | u64 n | n × (u64 id, u64 ts)
//! ```
//!
//! Decoding checks the tag, that the shape is the configuration's, the count against the bytes
//! left and the cache capacity, that identities are strictly increasing (distinct) and that
//! each one is in the sample of the stated level.

use super::bank::Rda;
use super::cache::{IntervalCache, MAX_LEVEL, sampled};
use super::{Config, Sizing};
use crate::method::{MethodError, Role};
use crate::record::PacketRecord;
use crate::wire::{DecodeError, WireReader, WireWriter};

/// First bytes of an RDA point payload.
pub const TAG: &[u8; 4] = b"RDA1";
const HEADER: usize = 4 + 1 + 1 + 8 + 1 + 8 + 8 + 8;

/// A point's synopsis: cache (+ RDA when fixed).
#[derive(Clone, Debug)]
pub struct Synopsis {
    pub(crate) cfg: Config,
    pub(crate) role: Role,
    pub(crate) cache: IntervalCache,
    pub(crate) rda: Option<Rda>,
}

impl Synopsis {
    /// A fresh point for one interval.
    pub fn new(cfg: &Config, role: Role) -> Result<Synopsis, MethodError> {
        cfg.validate()?;
        let rda = match cfg.sizing {
            Sizing::Fixed { buckets_per_bank } => Some(
                Rda::new(cfg.banks, buckets_per_bank, cfg.seed)
                    .map_err(|e| MethodError::Invalid(e.to_string()))?,
            ),
            Sizing::Late(_) => None,
        };
        Ok(Synopsis {
            cfg: *cfg,
            role,
            cache: IntervalCache::new(cfg.cache_capacity, cfg.seed),
            rda,
        })
    }

    /// Record one packet: logged in the cache (unless sampled out) and inserted into the fixed
    /// RDA. Returns whether it was kept. Duplicates are resolved by [`seal`](Self::seal).
    #[inline]
    pub fn record_packet(&mut self, id: u64, ts: u64) -> bool {
        let Synopsis { cache, rda, .. } = self;
        match rda {
            Some(rda) => {
                let kept = cache.record(id, ts, &mut |eid, ets| rda.delete(eid, ets));
                if kept {
                    rda.insert(id, ts);
                }
                kept
            }
            None => cache.record(id, ts, &mut |_, _| {}),
        }
    }

    /// End of the interval: seal the cache (first sightings kept, duplicates counted) and
    /// delete the duplicate sightings from the fixed RDA. Idempotent.
    pub fn seal(&mut self) {
        let Synopsis { cache, rda, .. } = self;
        match rda {
            Some(rda) => cache.seal(&mut |id, ts| rda.delete(id, ts)),
            None => cache.seal(&mut |_, _| {}),
        }
    }

    /// Bring the point to sampling `level` (no-op if it is already there), deleting evicted
    /// packets from the fixed RDA.
    pub fn raise_level(&mut self, level: u8) {
        let Synopsis { cache, rda, .. } = self;
        match rda {
            Some(rda) => cache.raise_level(level, &mut |id, ts| rda.delete(id, ts)),
            None => cache.raise_level(level, &mut |_, _| {}),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }
    pub fn role(&self) -> Role {
        self.role
    }
    pub fn cache(&self) -> &IntervalCache {
        &self.cache
    }
    /// The RDA filled online (fixed sizing only; duplicates are only removed by
    /// [`seal`](Self::seal)).
    pub fn rda(&self) -> Option<&Rda> {
        self.rda.as_ref()
    }

    /// Bytes of [`encode`](Self::encode).
    pub fn payload_len(&self) -> usize {
        let distinct = self.cache.len()
            - (self.cache.duplicates_after_seal() - self.cache.duplicates()) as usize;
        HEADER + 16 * distinct
    }

    /// Append the point payload (see the module documentation).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = WireWriter::new(out);
        w.reserve(self.payload_len());
        w.bytes(TAG);
        match self.cfg.sizing {
            Sizing::Fixed { buckets_per_bank } => {
                w.u8(0);
                w.u8(self.cfg.banks as u8);
                w.u64(buckets_per_bank as u64);
            }
            Sizing::Late(_) => {
                w.u8(1);
                w.u8(self.cfg.banks as u8);
                w.u64(0);
            }
        }
        w.u8(self.cache.level());
        let entries = self.cache.sealed_entries();
        w.u64(self.cache.duplicates_after_seal());
        w.u64(self.cache.unsampled());
        w.u64(entries.len() as u64);
        for &(id, ts) in entries.iter() {
            w.u64(id);
            w.u64(ts);
        }
    }

    /// Read a payload written by [`encode`](Self::encode) under the same configuration.
    pub fn decode(cfg: &Config, role: Role, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        let mut r = WireReader::new(bytes);
        cfg.validate().map_err(|e| r.invalid(e.to_string()))?;
        if bytes.len() < TAG.len() || &bytes[..TAG.len()] != TAG {
            return Err(r.invalid("not an RDA point payload (no RDA1 tag)"));
        }
        r.take(TAG.len(), "tag")?;
        let sizing = r.u8("sizing")?;
        let banks = r.u8("banks")? as usize;
        let m = r.u64("buckets per bank")?;
        let (want_sizing, want_m) = match cfg.sizing {
            Sizing::Fixed { buckets_per_bank } => (0, buckets_per_bank as u64),
            Sizing::Late(_) => (1, 0),
        };
        if sizing != want_sizing || banks != cfg.banks || m != want_m {
            return Err(r.invalid(format!(
                "payload of an RDA with sizing {sizing}, {banks} banks × {m} buckets; the configuration says sizing {want_sizing}, {} banks × {want_m}",
                cfg.banks
            )));
        }
        let level = r.u8("sampling level")?;
        if level > MAX_LEVEL {
            return Err(r.invalid(format!("sampling level {level} is above {MAX_LEVEL}")));
        }
        let duplicates = r.u64("duplicates")?;
        let unsampled = r.u64("unsampled")?;
        let n = r.u64("cache size")?;
        if n > cfg.cache_capacity as u64 {
            return Err(r.invalid(format!(
                "{n} cached packets exceed the configured capacity {}",
                cfg.cache_capacity
            )));
        }
        let n = n as usize;
        if r.remaining() != 16 * n {
            return Err(r.invalid(format!(
                "{n} cached packets need {} bytes, {} left",
                16 * n,
                r.remaining()
            )));
        }
        let mut entries = Vec::with_capacity(n);
        let sampler = *IntervalCache::new(1, cfg.seed).sampler();
        let mut prev: Option<u64> = None;
        for _ in 0..n {
            let off = r.offset();
            let id = r.u64("identity")?;
            let ts = r.u64("timestamp")?;
            if prev.is_some_and(|p| id <= p) {
                return Err(DecodeError::Invalid {
                    offset: off,
                    what: "cached identities are not strictly increasing".into(),
                });
            }
            if !sampled(&sampler, level, id) {
                return Err(DecodeError::Invalid {
                    offset: off,
                    what: format!("identity {id:#x} is not in the sample of level {level}"),
                });
            }
            prev = Some(id);
            entries.push((id, ts));
        }
        r.finish("cache")?;
        let rda = match cfg.sizing {
            Sizing::Fixed { buckets_per_bank } => {
                let mut rda = Rda::new(cfg.banks, buckets_per_bank, cfg.seed)
                    .map_err(|e| r.invalid(e.to_string()))?;
                rda.insert_all(entries.iter().copied());
                Some(rda)
            }
            Sizing::Late(_) => None,
        };
        let cache = IntervalCache::from_parts(
            cfg.cache_capacity,
            cfg.seed,
            level,
            entries,
            duplicates,
            unsampled,
        );
        Ok(Synopsis {
            cfg: *cfg,
            role,
            cache,
            rda,
        })
    }
}

impl crate::method::TypedSynopsis for Synopsis {
    const METHOD: &'static str = "rda";
    #[inline]
    fn record(&mut self, rec: &PacketRecord) {
        self.record_packet(rec.id, rec.ts_ns);
    }
    fn encoded_len(&self) -> usize {
        self.payload_len()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        Synopsis::encode(self, out)
    }
    /// The payload is the point's cache, which stays at the point; what crosses is the round
    /// trip of [`super::exchange`], decided by both points.
    fn shipped_len(&self) -> Option<u64> {
        None
    }
    /// The cache's own rules replayed: this point is first brought to `later`'s sampling
    /// level (recording both streams reaches at least it), then `later`'s cached packets are
    /// recorded here in their order (its log, or its sealed first sightings), so the capacity
    /// raises the level where recording would and the fixed RDA gets and loses what the
    /// cache does; `later`'s duplicates and unsampled packets are added to this point's. An
    /// identity seen on both sides keeps this point's sighting, the first.
    ///
    /// Exact (payload, fixed RDA, and recording after) when `later` is a recording point:
    /// its log holds every sighting of an identity sampled at its level, which are all the
    /// sightings of it that recording both streams keeps. The corner: a sealed point (decoded
    /// from its payload, or sealed to estimate) has removed its duplicate sightings from its
    /// log and only counts them, where recording keeps them in the log until the end of the
    /// interval and counts them against the capacity. Merging such a point that holds `D`
    /// duplicates (or into one) can leave the cache at a *lower* level than recording, never a
    /// higher one, and only when some level's sightings come within `D` of the capacity;
    /// brought to the same level (as the pair estimate brings both points), the cached packets
    /// are the same, and `duplicates + unsampled` is too (a duplicate counted at the seal of
    /// an identity later evicted stays in `duplicates` where recording counts it unsampled).
    /// With no duplicates, or far from the capacity (the 4 Mi packets of the default), it is
    /// exact. (`rda::point::tests::merging_a_sealed_cache_near_its_capacity` shows it.)
    fn merge(&mut self, later: Synopsis) -> Result<(), MethodError> {
        Config::check_pair(&self.cfg, &later.cfg).map_err(crate::method::as_merge)?;
        if later.role != self.role {
            return Err(MethodError::Invalid(format!(
                "rda: a {:?} synopsis cannot be merged into a {:?} one",
                later.role, self.role
            )));
        }
        // counted first, with room for every sighting the replay and a seal may count
        let headroom = (self.cache.len() + later.cache.len()) as u64;
        let (d, u) = (later.cache.duplicates(), later.cache.unsampled());
        self.cache.add_counts(d, u, headroom).ok_or_else(|| {
            MethodError::Invalid("rda: merged duplicate or unsampled counts overflow".into())
        })?;
        self.raise_level(later.cache.level());
        for (id, ts) in later.cache.iter() {
            self.record_packet(id, ts);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(cfg: &Config) -> Synopsis {
        let mut p = Synopsis::new(cfg, Role::Sender).unwrap();
        for i in 0..500u64 {
            p.record_packet(i.wrapping_mul(0x9e37_79b9_7f4a_7c15), 1_000 + i);
        }
        p.record_packet(0, 5); // a duplicate of i = 0
        p
    }

    #[test]
    fn payload_roundtrip_rebuilds_the_fixed_rda() {
        for cfg in [Config::fixed(64), Config::default()] {
            let mut p = filled(&cfg);
            assert_eq!(p.cache().duplicates_after_seal(), 1);
            let mut b = Vec::new();
            p.encode(&mut b);
            assert_eq!(b.len(), p.payload_len());
            let q = Synopsis::decode(&cfg, Role::Sender, &b).unwrap();
            p.seal();
            assert_eq!(p.cache().duplicates(), 1);
            assert_eq!(
                q.cache().iter().collect::<Vec<_>>(),
                p.cache().iter().collect::<Vec<_>>()
            );
            assert_eq!(q.cache().duplicates(), 1);
            assert_eq!(
                q.rda(),
                p.rda(),
                "sealing removed the duplicate from the online RDA"
            );
            let mut b2 = Vec::new();
            q.encode(&mut b2);
            assert_eq!(b, b2);
            let mut b3 = Vec::new();
            p.encode(&mut b3);
            assert_eq!(b, b3);
        }
    }

    fn bytes(p: &Synopsis) -> Vec<u8> {
        let mut b = Vec::new();
        p.encode(&mut b);
        b
    }

    /// Merging replays the cache's rules: the level the capacity forces, first sightings
    /// across the split, duplicates and unsampled packets counted, the fixed RDA filled as it
    /// is — byte for byte the synopsis of recording in order, recording going on after.
    #[test]
    fn merging_replays_the_cache_rules() {
        use crate::method::PointSynopsis;
        // 1 100 sightings into 100: several levels; every 9th packet seen again 40 later
        let mut recs: Vec<(u64, u64)> = (0..1_000u64)
            .map(|i| {
                (
                    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 7,
                    1_000 + i * 10 - i % 3,
                )
            })
            .collect();
        for k in (0..900).step_by(9).rev() {
            let (id, ts) = recs[k];
            recs.insert(k + 40, (id, ts + 400));
        }
        for cfg in [
            Config::fixed(64).with_cache_capacity(100).unwrap(),
            Config::default().with_cache_capacity(100).unwrap(),
        ] {
            let record = |p: &mut Synopsis, r: &[(u64, u64)]| {
                r.iter().for_each(|&(id, ts)| {
                    p.record_packet(id, ts);
                })
            };
            let mut whole = Synopsis::new(&cfg, Role::Receiver).unwrap();
            record(&mut whole, &recs);
            assert!(whole.cache().level() >= 3 && whole.cache().duplicates_after_seal() > 0);
            for (x, y) in [(0, 600), (30, 31), (300, 900), (500, 1_100), (1_100, 1_100)] {
                let mut head = Synopsis::new(&cfg, Role::Receiver).unwrap();
                record(&mut head, &recs[..x]);
                let mut mid = Synopsis::new(&cfg, Role::Receiver).unwrap();
                record(&mut mid, &recs[x..y]);
                head.merge(Box::new(mid)).unwrap();
                record(&mut head, &recs[y..]);
                assert_eq!(bytes(&head), bytes(&whole), "split {x}, {y}");
                assert_eq!(head.rda(), whole.rda(), "split {x}, {y}");
                assert_eq!(head.cache().level(), whole.cache().level());
            }
            // a point of the other role, or of another sizing, is refused
            let mut s = Synopsis::new(&cfg, Role::Sender).unwrap();
            let r = Synopsis::new(&cfg, Role::Receiver).unwrap();
            assert!(s.merge(Box::new(r)).is_err());
            let other = Config::fixed(65).with_cache_capacity(100).unwrap();
            let e = s
                .merge(Box::new(Synopsis::new(&other, Role::Sender).unwrap()))
                .unwrap_err();
            assert!(
                e.to_string().contains("buckets") || e.to_string().contains("sizing"),
                "{e}"
            );
        }
    }

    /// The corner of the merge's doc: a sealed (decoded) cache counts its duplicates without
    /// holding their sightings, which recording counts against the capacity. Near the
    /// capacity the merged cache stays at a lower level than recording; brought to the same
    /// level, it holds the same packets, and `duplicates + unsampled` is the same.
    #[test]
    fn merging_a_sealed_cache_near_its_capacity() {
        use crate::method::PointSynopsis;
        let cfg = Config::default().with_cache_capacity(8).unwrap();
        let id = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let a: Vec<(u64, u64)> = (0..4).map(|i| (id(i), 100 + i)).collect();
        // b: two packets, each seen twice; c: one more packet
        let b: Vec<(u64, u64)> = [4, 5, 4, 5].iter().map(|&i| (id(i), 200 + i)).collect();
        let c = [(id(6), 300)];
        let mut whole = Synopsis::new(&cfg, Role::Receiver).unwrap();
        for &(i, t) in a.iter().chain(&b).chain(&c) {
            whole.record_packet(i, t);
        }
        let mut part = Synopsis::new(&cfg, Role::Receiver).unwrap();
        for &(i, t) in &b {
            part.record_packet(i, t);
        }
        let decoded = Synopsis::decode(&cfg, Role::Receiver, &bytes(&part)).unwrap();
        assert_eq!(decoded.cache().duplicates(), 2);
        let mut merged = Synopsis::new(&cfg, Role::Receiver).unwrap();
        for &(i, t) in &a {
            merged.record_packet(i, t);
        }
        merged.merge(Box::new(decoded)).unwrap();
        merged.record_packet(c[0].0, c[0].1);
        // recording held 8 sightings when c came and raised the level; the merge held 6
        let level = whole.cache().level();
        assert!(merged.cache().level() < level, "{level}");
        merged.raise_level(level);
        merged.seal();
        whole.seal();
        assert_eq!(
            merged.cache().iter().collect::<Vec<_>>(),
            whole.cache().iter().collect::<Vec<_>>()
        );
        let left_out = |p: &Synopsis| p.cache().duplicates() + p.cache().unsampled();
        assert_eq!(left_out(&merged), left_out(&whole));
    }

    #[test]
    fn truncated_foreign_and_inconsistent_payloads_are_errors() {
        let cfg = Config::fixed(64);
        let p = filled(&cfg);
        let mut b = Vec::new();
        p.encode(&mut b);
        for cut in 0..b.len() {
            assert!(
                Synopsis::decode(&cfg, Role::Sender, &b[..cut]).is_err(),
                "cut {cut}"
            );
        }
        let e = Synopsis::decode(
            &cfg,
            Role::Sender,
            b"LDA1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        )
        .unwrap_err();
        assert!(e.to_string().contains("not an RDA point payload"), "{e}");
        // another shape
        let e = Synopsis::decode(&Config::fixed(65), Role::Sender, &b).unwrap_err();
        assert!(e.to_string().contains("64 buckets"), "{e}");
        let e = Synopsis::decode(&Config::default(), Role::Sender, &b).unwrap_err();
        assert!(e.to_string().contains("sizing"), "{e}");
        // swapped entries: not increasing
        let mut c = b.clone();
        let first = HEADER;
        let (x, y) = c[first..first + 32].split_at_mut(16);
        x.swap_with_slice(y);
        assert!(Synopsis::decode(&cfg, Role::Sender, &c).is_err());
        // a huge count
        let mut c = b.clone();
        c[HEADER - 8..HEADER].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Synopsis::decode(&cfg, Role::Sender, &c).is_err());
        // a sampling level the identities do not satisfy
        let mut c = b.clone();
        c[14] = 40;
        let e = Synopsis::decode(&cfg, Role::Sender, &c).unwrap_err();
        assert!(e.to_string().contains("not in the sample"), "{e}");
        c[14] = 200;
        assert!(Synopsis::decode(&cfg, Role::Sender, &c).is_err());
    }
}
