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

use std::net::IpAddr;

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::record::FlowKey;

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

/// A seeded hash of a flow's 5-tuple read as machine words, for the one flow hash per packet
/// of a line-rate recorder (COLATE §1.4 "Deployability"): an IPv4 key's 13 bytes are two
/// words (the addresses; protocol and ports), an IPv6 key's 37 bytes five. Words are combined
/// by folded multiplies — the 128-bit product of two words, its halves xor-ed (the "mum" of
/// Wang Yi's wyhash) — each operand keyed by a secret drawn from the seed, then folded once
/// more with the key's length. About a third of the time of xxh3 over
/// [`FlowKey::canonical_bytes`] (which builds 37 bytes first). Keys equal in
/// `canonical_bytes` hash the same: an IPv4-mapped IPv6 address is its IPv4 address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHasher {
    secret: [u64; 6],
}

/// Family members of [`KeyHasher`]'s secrets.
const KEY_SECRETS: u64 = 0x6b65_7900;

/// The 128-bit product of `a` and `b`, its halves xor-ed.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = a as u128 * b as u128;
    (p as u64) ^ (p >> 64) as u64
}

impl KeyHasher {
    pub fn new(seed: u64) -> KeyHasher {
        let f = HashFamily::new(seed);
        KeyHasher {
            secret: std::array::from_fn(|i| f.member(KEY_SECRETS + i as u64).hash(0)),
        }
    }

    #[inline]
    pub fn hash(&self, f: &FlowKey) -> u64 {
        let k = &self.secret;
        let tail = (f.proto as u64) << 32 | (f.sport as u64) << 16 | f.dport as u64;
        let (h, len) = match (f.src.to_canonical(), f.dst.to_canonical()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let addrs = (s.to_bits() as u64) << 32 | d.to_bits() as u64;
                (fold(addrs ^ k[0], tail ^ k[1]), 13)
            }
            (s, d) => {
                let bits = |a: IpAddr| match a {
                    IpAddr::V4(a) => a.to_ipv6_mapped().to_bits(),
                    IpAddr::V6(a) => a.to_bits(),
                };
                let (s, d) = (bits(s), bits(d));
                let a = fold((s >> 64) as u64 ^ k[0], s as u64 ^ k[1]);
                let b = fold((d >> 64) as u64 ^ k[2], d as u64 ^ k[3]);
                (fold(a ^ k[4], b ^ tail ^ k[5]), 37)
            }
        };
        fold(h ^ k[4], len ^ k[5])
    }
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

    fn v4_key(i: u32) -> FlowKey {
        FlowKey {
            proto: 6,
            src: IpAddr::V4((0x0a00_0000 + i).into()),
            dst: IpAddr::V4(0xac10_0001u32.into()),
            sport: (i % 60_000) as u16,
            dport: 443,
        }
    }

    /// A million keys that differ in a few low bits (sequential addresses and ports, the
    /// structured input a fold can mishandle): no two hash alike, and their counters over
    /// 4 096 buckets are as even as independent draws (χ² within 5 standard deviations of
    /// its mean, 4 095 degrees of freedom), for two seeds.
    #[test]
    fn key_hashes_of_structured_keys_are_distinct_and_even() {
        for seed in [1u64, 0xdead_beef] {
            let h = KeyHasher::new(seed);
            let mut all: Vec<u64> = (0..1_000_000).map(|i| h.hash(&v4_key(i))).collect();
            let buckets = 4_096usize;
            let mut count = vec![0u64; buckets];
            for &x in &all {
                count[reduce(x, buckets)] += 1;
            }
            let e = all.len() as f64 / buckets as f64;
            let chi2: f64 = count.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
            let df = (buckets - 1) as f64;
            assert!((chi2 - df).abs() < 5.0 * (2.0 * df).sqrt(), "χ² {chi2}");
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), 1_000_000);
        }
    }

    #[test]
    fn key_hash_reads_keys_as_canonical_bytes_do() {
        let h = KeyHasher::new(7);
        let a = v4_key(3);
        let IpAddr::V4(src) = a.src else {
            unreachable!()
        };
        let mapped = FlowKey {
            src: IpAddr::V6(src.to_ipv6_mapped()),
            ..a
        };
        assert_eq!(a.canonical_bytes(), mapped.canonical_bytes());
        assert_eq!(h.hash(&a), h.hash(&mapped));
        // every field counts, and direction does
        let mut b = a;
        std::mem::swap(&mut b.src, &mut b.dst);
        let v6 = FlowKey {
            src: IpAddr::V6("2001:db8::1".parse().unwrap()),
            ..a
        };
        let v6b = FlowKey {
            dst: IpAddr::V6("2001:db8::2".parse().unwrap()),
            ..v6
        };
        let others = [
            b,
            FlowKey { proto: 17, ..a },
            FlowKey {
                sport: a.sport + 1,
                ..a
            },
            FlowKey { dport: 444, ..a },
            v6,
            v6b,
        ];
        for o in others {
            assert_ne!(h.hash(&a), h.hash(&o), "{o:?}");
        }
        assert_ne!(h.hash(&v6), h.hash(&v6b));
        assert_ne!(h.hash(&a), KeyHasher::new(8).hash(&a));
    }
}
