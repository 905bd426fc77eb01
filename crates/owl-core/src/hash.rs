//! The seeded hash family every synopsis derives its hashes from.
//!
//! A packet is hashed once, into its 64-bit identity. Every method then derives the hashes it
//! needs (row, bank sampling, sign, digest, bank index, flow columns) from that identity with
//! member `i` of a [`HashFamily`]: `h_i(x) = xxh3_64(x as 8 little-endian bytes, seed = k_i)`
//! where `k_i = xxh3_64(i as 8 little-endian bytes, seed = family seed)`.
//!
//! xxh3 is a fixed, specified algorithm: the same seed gives the same hashes at S and R, on every
//! platform and every version of owl, which is what two observation points need to agree on
//! rows and samples. Different members behave as independent random functions for practical
//! purposes (the papers assume 2- or 4-universal families; xxh3's avalanche is stronger than that
//! needs, though it is not a proven k-universal family).

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// A seeded family of 64-bit hash functions of a 64-bit key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashFamily {
    seed: u64,
}

impl HashFamily {
    pub fn new(seed: u64) -> Self {
        HashFamily { seed }
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Member `index` of the family, as a stand-alone function object.
    pub fn member(&self, index: u64) -> HashFn {
        HashFn {
            key: xxh3_64_with_seed(&index.to_le_bytes(), self.seed),
        }
    }
}

/// One member of a [`HashFamily`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashFn {
    key: u64,
}

impl HashFn {
    /// Hash a 64-bit key (a packet identity or a flow hash).
    #[inline]
    pub fn hash(&self, x: u64) -> u64 {
        xxh3_64_with_seed(&x.to_le_bytes(), self.key)
    }

    /// Hash into `[0, n)` without modulo bias worth speaking of (Lemire's multiply-shift).
    #[inline]
    pub fn index(&self, x: u64, n: usize) -> usize {
        reduce(self.hash(x), n)
    }
}

/// Map a uniform 64-bit value to `[0, n)` by multiply-shift (Lemire 2019).
#[inline]
pub fn reduce(h: u64, n: usize) -> usize {
    ((h as u128 * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_deterministic_and_distinct() {
        let f = HashFamily::new(42);
        let (a, b) = (f.member(0), f.member(1));
        assert_eq!(a.hash(7), HashFamily::new(42).member(0).hash(7));
        assert_ne!(a.hash(7), b.hash(7));
        assert_ne!(a.hash(7), HashFamily::new(43).member(0).hash(7));
    }

    #[test]
    fn index_is_in_range_and_roughly_uniform() {
        let h = HashFamily::new(1).member(3);
        let n = 10;
        let mut counts = [0u32; 10];
        for x in 0..100_000u64 {
            let i = h.index(x, n);
            counts[i] += 1;
        }
        // Each bin expects 10 000 with sd ~95: 6 sd is a test that cannot fail by chance.
        for c in counts {
            assert!((9_400..=10_600).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn reduce_edges() {
        assert_eq!(reduce(0, 5), 0);
        assert_eq!(reduce(u64::MAX, 5), 4);
        assert_eq!(reduce(u64::MAX, 1), 0);
    }
}
