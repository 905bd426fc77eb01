//! The interval cache each point keeps (§IV-A, §VIII-A): identity → timestamp of every packet
//! of the interval, so that the sender can delete its lost packets from its own RDA and the
//! receiver can answer for the timestamps of its reordered ones. The cache never crosses the
//! network; it is flushed after the interval's estimate.
//!
//! # Duplicates (§III-B)
//!
//! The paper leaves duplicates open and suggests keeping "the packets with unique identifiers
//! in a cache" and discarding the others. owl's rule, the same as the exact matcher's
//! ([`crate::exact`]): the **first sighting** of an identity at a point is the packet; later
//! sightings at the same point are not aggregated (an RDA bucket would otherwise hold the
//! identity twice, XOR it out and count it twice) and are counted in
//! [`duplicates`](IntervalCache::duplicates). A delay is therefore "first sighting at R − first
//! sighting at S", exactly what the ground truth measures.
//!
//! # Bounded size: coordinated hash sampling (§VIII-B "Cache Size")
//!
//! When an interval holds more than `capacity` distinct packets, the cache halves its sampling
//! rate: at level `j` a packet is kept iff `h_s(id) < 2^{64−j}` (rate `2^{−j}`), and raising
//! the level evicts the packets above the new threshold. `h_s` is a member of the
//! configuration's hash family, so both points keep the same packets at the same level; at
//! estimate time both are brought to the larger of their two levels, whose kept set is a
//! subset of the other's. The sample is drawn by packet identity rather than by flow identifier
//! (the paper's suggestion): identity is what both points already agree on, and a packet
//! sample keeps the mean an unbiased estimate of the mean over all packets, whereas a flow
//! sample weights flows and evicts whole flows at once.

use hashbrown::HashMap;

use crate::hash::{HashFamily, HashFn};

/// Hash-family member of the sampling hash `h_s`.
pub const SAMPLING_MEMBER: u64 = 0x7264_6173; // "rdas"
/// Highest sampling level (rate 2⁻⁶³).
pub const MAX_LEVEL: u8 = 63;

/// What recording one packet did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// A new identity, now cached.
    New,
    /// An identity already cached: counted, not aggregated.
    Duplicate,
    /// Not in the sample at the current level.
    Unsampled,
}

/// identity → first timestamp, for one point and one interval.
#[derive(Clone, Debug)]
pub struct IntervalCache {
    map: HashMap<u64, u64>,
    capacity: usize,
    level: u8,
    sampler: HashFn,
    duplicates: u64,
    unsampled: u64,
}

/// Whether `id` is kept at sampling `level`.
#[inline]
pub fn sampled(sampler: &HashFn, level: u8, id: u64) -> bool {
    level == 0 || sampler.hash(id) >> (64 - level as u32) == 0
}

impl IntervalCache {
    /// An empty cache holding at most `capacity` packets (≥ 1), sampling hash from `seed`.
    pub fn new(capacity: usize, seed: u64) -> IntervalCache {
        IntervalCache {
            map: HashMap::new(),
            capacity: capacity.max(1),
            level: 0,
            sampler: HashFamily::new(seed).member(SAMPLING_MEMBER),
            duplicates: 0,
            unsampled: 0,
        }
    }

    /// Record a packet; packets evicted by a sampling-level change are handed to `evicted`
    /// (identity, timestamp) so that an RDA built online can delete them too.
    #[inline]
    pub fn record(&mut self, id: u64, ts: u64, evicted: &mut impl FnMut(u64, u64)) -> Recorded {
        if !sampled(&self.sampler, self.level, id) {
            self.unsampled += 1;
            return Recorded::Unsampled;
        }
        while self.map.len() >= self.capacity && !self.map.contains_key(&id) {
            if self.level == MAX_LEVEL {
                self.unsampled += 1;
                return Recorded::Unsampled;
            }
            self.raise_level(self.level + 1, evicted);
            if !sampled(&self.sampler, self.level, id) {
                self.unsampled += 1;
                return Recorded::Unsampled;
            }
        }
        match self.map.entry(id) {
            hashbrown::hash_map::Entry::Occupied(_) => {
                self.duplicates += 1;
                Recorded::Duplicate
            }
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(ts);
                Recorded::New
            }
        }
    }

    /// Raise the sampling level to `level` (no-op if not higher), evicting what falls out.
    pub fn raise_level(&mut self, level: u8, evicted: &mut impl FnMut(u64, u64)) {
        let level = level.min(MAX_LEVEL);
        if level <= self.level {
            return;
        }
        self.level = level;
        let s = self.sampler;
        let before = self.map.len();
        self.map.retain(|&id, &mut ts| {
            let keep = sampled(&s, level, id);
            if !keep {
                evicted(id, ts);
            }
            keep
        });
        self.unsampled += (before - self.map.len()) as u64;
    }

    /// Timestamp of `id`, if cached.
    #[inline]
    pub fn get(&self, id: u64) -> Option<u64> {
        self.map.get(&id).copied()
    }
    #[inline]
    pub fn contains(&self, id: u64) -> bool {
        self.map.contains_key(&id)
    }
    /// Distinct packets cached.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    /// Every cached (identity, timestamp), in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.map.iter().map(|(&i, &t)| (i, t))
    }
    /// Cached packets sorted by identity (a canonical order for files).
    pub fn sorted(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self.iter().collect();
        v.sort_unstable();
        v
    }
    pub fn level(&self) -> u8 {
        self.level
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Extra sightings of cached identities (see the module documentation).
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }
    /// Packets left out by sampling (including evicted ones).
    pub fn unsampled(&self) -> u64 {
        self.unsampled
    }
    pub fn sampler(&self) -> &HashFn {
        &self.sampler
    }

    /// Rebuild a cache from its parts (decoding a point file). The caller has checked that
    /// entries are distinct, within capacity and sampled at `level`.
    pub(crate) fn from_parts(
        capacity: usize,
        seed: u64,
        level: u8,
        entries: &[(u64, u64)],
        duplicates: u64,
        unsampled: u64,
    ) -> IntervalCache {
        let mut c = IntervalCache::new(capacity, seed);
        c.level = level;
        c.map.reserve(entries.len());
        c.map.extend(entries.iter().copied());
        c.duplicates = duplicates;
        c.unsampled = unsampled;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_kept_once_and_counted() {
        let mut c = IntervalCache::new(100, 1);
        let mut ev = |_: u64, _: u64| panic!("nothing to evict");
        assert_eq!(c.record(5, 100, &mut ev), Recorded::New);
        assert_eq!(c.record(5, 170, &mut ev), Recorded::Duplicate);
        assert_eq!(c.record(5, 90, &mut ev), Recorded::Duplicate);
        assert_eq!(c.get(5), Some(100), "the first sighting is the packet");
        assert_eq!((c.len(), c.duplicates()), (1, 2));
    }

    #[test]
    fn sampling_bounds_the_cache_and_is_coordinated() {
        let cap = 1000;
        let mut a = IntervalCache::new(cap, 9);
        let mut b = IntervalCache::new(cap, 9);
        let mut evicted = 0u64;
        for id in 0..20_000u64 {
            a.record(id, id, &mut |_, _| evicted += 1);
            // b sees only every other packet (loss): it reaches a lower level
            if id % 2 == 0 {
                b.record(id, id + 5, &mut |_, _| {});
            }
        }
        assert!(a.len() <= cap && b.len() <= cap);
        assert!(
            a.level() >= 4,
            "20 000 packets into 1 000: level {}",
            a.level()
        );
        assert!(evicted > 0);
        assert_eq!(a.len() as u64 + a.unsampled(), 20_000);
        // bring both to the same level: b's kept even packets are exactly a's even packets
        let lv = a.level().max(b.level());
        a.raise_level(lv, &mut |_, _| {});
        b.raise_level(lv, &mut |_, _| {});
        let mut ea: Vec<u64> = a.iter().map(|p| p.0).filter(|i| i % 2 == 0).collect();
        let mut eb: Vec<u64> = b.iter().map(|p| p.0).collect();
        ea.sort_unstable();
        eb.sort_unstable();
        assert_eq!(ea, eb);
        // the sample rate is about 2^-level
        let expect = 20_000.0 / 2f64.powi(lv as i32);
        assert!((a.len() as f64 - expect).abs() < 6.0 * expect.sqrt() + 1.0);
    }
}
