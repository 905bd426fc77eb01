//! The per-point aggregator: `n × m` rows of (timestamp accumulator, packet counter, identity
//! digest), the update procedure of §III-C, and the wire encoding.

use std::sync::Arc;

use super::{Config, Sampling};
use crate::hash::{HashFn, reduce};
use crate::method::MethodError;
use crate::wire::{DecodeError, WireReader, WireWriter};

/// Bytes of one encoded row without the identity digest (`digest=off`, tag `LDA1`, the paper's
/// layout): `u64` timestamp accumulator + `u32` packet counter.
pub const BYTES_PER_ROW: usize = 12;
/// Bytes of one encoded row with the identity digest (`digest=on`, tag `LDA2`): `u64`
/// timestamp accumulator + `u32` packet counter + `u32` digest.
pub const BYTES_PER_ROW_DIGEST: usize = 16;
/// Bytes of the encoded header: the tag (`"LDA1"` or `"LDA2"`), `u16` banks, `u32` rows.
pub const HEADER_BYTES: usize = 10;
/// Tag of a payload without digests (12-byte rows).
const TAG_PLAIN: &[u8; 4] = b"LDA1";
/// Tag of a payload with digests (16-byte rows).
const TAG_DIGEST: &[u8; 4] = b"LDA2";

/// Bytes of one encoded row of the layout with or without the digest.
pub(crate) const fn row_bytes(digest: bool) -> usize {
    if digest {
        BYTES_PER_ROW_DIGEST
    } else {
        BYTES_PER_ROW
    }
}

/// One row of one bank: the timestamp accumulator `T[i, j]` (wrapping sum of ns timestamps,
/// see the module doc), the packet counter `S[i, j]` and the identity digest (wrapping sum of
/// the packets' 32-bit identity values; 0 in a synopsis without digests). In memory a row is
/// 16 bytes with or without the digest (it was 12 bytes and 4 of padding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Bucket {
    pub ts_sum: u64,
    pub count: u32,
    pub digest: u32,
}

impl Bucket {
    #[inline]
    fn add(&mut self, ts_ns: u64, digest: u32) {
        self.ts_sum = self.ts_sum.wrapping_add(ts_ns);
        self.count = self.count.wrapping_add(1);
        self.digest = self.digest.wrapping_add(digest);
    }
}

/// How `g(x)` is evaluated, precomputed from [`Sampling`].
#[derive(Clone, Debug)]
pub(crate) enum BankSampler {
    /// `by_zeros[z]` = bank + 1 for a hash with `z` leading zeros, 0 = not sampled.
    LeadingZeros { by_zeros: [u8; 65] },
    /// Bank `j` takes `u` in `[upper[j−1], upper[j])`; `u ≥ total` is not sampled.
    Thresholds { upper: Vec<u128>, total: u128 },
}

/// Cumulative upper thresholds (exclusive, over `[0, 2⁶⁴]`) of probability sampling.
pub(crate) fn thresholds(s: &Sampling) -> Vec<u128> {
    let Sampling::Probabilities(ps) = s else {
        return Vec::new();
    };
    let two64 = 2f64.powi(64);
    let mut cum = 0.0f64;
    let mut prev = 0u128;
    ps.iter()
        .map(|&p| {
            cum += p;
            let u = ((cum.min(1.0) * two64).round() as u128).min(1u128 << 64);
            // a bank never gets an empty range because of rounding (p ≥ 2^-64 is validated)
            let u = u.max(prev + 1);
            prev = u;
            u
        })
        .collect()
}

impl BankSampler {
    pub(crate) fn new(s: &Sampling) -> BankSampler {
        match s {
            Sampling::Probabilities(_) => {
                let upper = thresholds(s);
                let total = *upper.last().unwrap_or(&0);
                BankSampler::Thresholds { upper, total }
            }
            Sampling::LeadingZeros(ks) => {
                let mut by_zeros = [0u8; 65];
                for (z, slot) in by_zeros.iter_mut().enumerate() {
                    let best = ks
                        .iter()
                        .enumerate()
                        .filter(|&(_, &k)| k as usize <= z)
                        .max_by_key(|&(_, &k)| k);
                    if let Some((j, _)) = best {
                        *slot = j as u8 + 1;
                    }
                }
                BankSampler::LeadingZeros { by_zeros }
            }
        }
    }

    /// The bank `g(x)` of a packet whose bank hash is `u`, or `None` (not sampled).
    #[inline(always)]
    pub(crate) fn bank(&self, u: u64) -> Option<usize> {
        match self {
            BankSampler::LeadingZeros { by_zeros } => {
                let b = by_zeros[u.leading_zeros() as usize];
                if b == 0 { None } else { Some(b as usize - 1) }
            }
            BankSampler::Thresholds { upper, total } => {
                let u = u as u128;
                if u >= *total {
                    return None;
                }
                upper.iter().position(|&t| u < t)
            }
        }
    }
}

/// What every aggregator of one configuration shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) sampler: BankSampler,
    pub(crate) row_hash: HashFn,
    pub(crate) bank_hash: HashFn,
}

impl Shared {
    pub(crate) fn new(config: Config) -> Arc<Shared> {
        let (row_hash, bank_hash) = config.hashes();
        Arc::new(Shared {
            sampler: BankSampler::new(config.sampling()),
            row_hash,
            bank_hash,
            config,
        })
    }
}

/// One point's lossy difference aggregator (the paper's LDA, §3) for one interval:
/// `banks × rows` buckets, bank-major (`buckets[j·m + i]` is row `i` of bank `j`).
#[derive(Clone, Debug)]
pub struct Synopsis {
    shared: Arc<Shared>,
    buckets: Vec<Bucket>,
    /// `u32::MAX` when the rows keep identity digests, 0 when not (`digest=off`, or an `LDA1`
    /// payload decoded under `digest=on`): the update adds `δ(x) & mask`, so no branch.
    digest_mask: u32,
}

impl Synopsis {
    /// An empty aggregator.
    pub fn new(config: &Config) -> Synopsis {
        Self::with_shared(Shared::new(config.clone()))
    }

    pub(crate) fn with_shared(shared: Arc<Shared>) -> Synopsis {
        let n = shared.config.rows() * shared.config.banks();
        let digests = shared.config.digest();
        Synopsis {
            buckets: vec![Bucket::default(); n],
            shared,
            digest_mask: mask(digests),
        }
    }

    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Whether this synopsis keeps identity digests: its configuration says `digest=on` and it
    /// was not decoded from an `LDA1` payload (one recorded before the field existed). The
    /// estimator uses digests only when both synopses keep them.
    pub fn has_digests(&self) -> bool {
        self.digest_mask != 0
    }

    /// Where a packet goes: `(bank, row)`, or `None` when no bank samples it.
    #[inline]
    pub fn locate(&self, id: u64) -> Option<(usize, usize)> {
        let s = &*self.shared;
        let j = s.sampler.bank(s.bank_hash.hash(id))?;
        Some((j, reduce(s.row_hash.hash(id), s.config.rows())))
    }

    /// The 32-bit identity value `δ(x)` a packet adds to its row's digest: the low 32 bits of
    /// its row hash value `h_0(x)` (whether or not this synopsis keeps digests).
    pub fn identity_value(&self, id: u64) -> u32 {
        self.shared.row_hash.hash(id) as u32
    }

    /// The update procedure of §III-C: `j ← g(x)`; if sampled, `i ← h(x)`,
    /// `T[i, j] += τ`, `S[i, j] += 1`, and, with the digest, `d[i, j] += δ(x)` (mod 2³²).
    ///
    /// `δ(x)` is the low 32 bits of the same 64-bit row hash value `v = h_0(x)` whose row index
    /// is `reduce(v, m) = ⌊v·m / 2⁶⁴⌋` ([`crate::hash::reduce`]): no second hash. The row is
    /// decided by the high bits of `v`, so `δ(x)` is a uniform 32-bit value independent of the
    /// row: exactly when `m` is a power of two (the row is then the top `log₂ m` bits of `v`, and
    /// `m ≤ 2²⁴`), and up to a negligible error otherwise — row `i` is the range of `v` in
    /// `[i·2⁶⁴/m, (i + 1)·2⁶⁴/m)`, at least 2⁴⁰ values long, which is whole runs of 2³²
    /// consecutive values (each holding every low-32-bit value once) plus at most two partial
    /// runs at its ends (the carry of the low bits' product into the high word), so given the
    /// row `δ(x)` is uniform within a total variation distance of `m·2⁻³¹` (2.4·10⁻⁷ at 512
    /// rows). The bank hash is another member of the family, independent of both.
    #[inline]
    pub fn record(&mut self, id: u64, ts_ns: u64) {
        let s = &*self.shared;
        if let Some(j) = s.sampler.bank(s.bank_hash.hash(id)) {
            let m = s.config.rows();
            let v = s.row_hash.hash(id);
            self.buckets[j * m + reduce(v, m)].add(ts_ns, v as u32 & self.digest_mask);
        }
    }

    /// [`record`](Self::record) over parallel slices of identities and timestamps.
    pub fn record_all(&mut self, ids: &[u64], ts_ns: &[u64]) {
        debug_assert_eq!(ids.len(), ts_ns.len());
        let s = &*self.shared;
        let m = s.config.rows();
        let mask = self.digest_mask;
        for (&id, &ts) in ids.iter().zip(ts_ns) {
            if let Some(j) = s.sampler.bank(s.bank_hash.hash(id)) {
                let v = s.row_hash.hash(id);
                self.buckets[j * m + reduce(v, m)].add(ts, v as u32 & mask);
            }
        }
    }

    /// Record packet records (one hash of the identity decides; unsampled packets cost only it).
    pub fn record_batch(&mut self, recs: &[crate::PacketRecord]) {
        let s = &*self.shared;
        let m = s.config.rows();
        let mask = self.digest_mask;
        for r in recs {
            if let Some(j) = s.sampler.bank(s.bank_hash.hash(r.id)) {
                let v = s.row_hash.hash(r.id);
                self.buckets[j * m + reduce(v, m)].add(r.ts_ns, v as u32 & mask);
            }
        }
    }

    /// Row `i` of bank `j`.
    pub fn bucket(&self, bank: usize, row: usize) -> Bucket {
        self.buckets[bank * self.shared.config.rows() + row]
    }

    /// The rows of bank `j`.
    pub fn bank(&self, j: usize) -> &[Bucket] {
        let m = self.shared.config.rows();
        &self.buckets[j * m..(j + 1) * m]
    }

    /// Set a row directly (worked examples and tests build the paper's figures with it). In a
    /// synopsis without digests the row's digest is kept at 0.
    pub fn set_bucket(&mut self, bank: usize, row: usize, b: Bucket) {
        let m = self.shared.config.rows();
        self.buckets[bank * m + row] = Bucket {
            digest: b.digest & self.digest_mask,
            ..b
        };
    }

    /// Add `later`'s rows to these, row by row (wrapping, as recording adds: timestamp sums,
    /// counters and digests): the aggregator of both streams. The configurations must be the
    /// same (the error names the first field that differs), and both synopses must keep
    /// digests or neither (a synopsis without digests cannot vouch for its packets' identities,
    /// so the sum could not either).
    pub fn merge_rows(&mut self, later: &Synopsis) -> Result<(), MethodError> {
        Config::check_pair(self.config(), later.config()).map_err(crate::method::as_merge)?;
        if self.has_digests() != later.has_digests() {
            let has = |d: bool| {
                if d {
                    "with identity digests (LDA2)"
                } else {
                    "without identity digests (LDA1)"
                }
            };
            return Err(MethodError::Invalid(format!(
                "cannot merge an LDA synopsis {} into one {}: both must carry the digest or neither",
                has(later.has_digests()),
                has(self.has_digests())
            )));
        }
        for (b, l) in self.buckets.iter_mut().zip(&later.buckets) {
            b.ts_sum = b.ts_sum.wrapping_add(l.ts_sum);
            b.count = b.count.wrapping_add(l.count);
            b.digest = b.digest.wrapping_add(l.digest);
        }
        Ok(())
    }

    /// Packets recorded (sampled) in all banks.
    pub fn sampled(&self) -> u64 {
        self.buckets.iter().map(|b| b.count as u64).sum()
    }

    /// Bytes [`encode`](Self::encode) writes: the header and 16 bytes a row with digests, 12
    /// without.
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + row_bytes(self.has_digests()) * self.buckets.len()
    }

    /// Append the encoding (module doc: header, then 16 bytes a row under tag `LDA2` with
    /// digests, 12 bytes a row under tag `LDA1` without, byte for byte the paper's layout).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let c = &self.shared.config;
        let digests = self.has_digests();
        let mut w = WireWriter::new(out);
        w.reserve(self.encoded_len());
        w.bytes(if digests { TAG_DIGEST } else { TAG_PLAIN });
        w.u16(c.banks() as u16);
        w.u32(c.rows() as u32);
        for b in &self.buckets {
            w.u64(b.ts_sum);
            w.u32(b.count);
            if digests {
                w.u32(b.digest);
            }
        }
    }

    /// Decode an aggregator of `config`; the header must match the configuration and the length
    /// must be exact. An `LDA1` payload gives a synopsis without digests (under `digest=on`
    /// too: a file recorded before the field existed); an `LDA2` payload under `digest=off` is
    /// an error naming the field.
    pub fn decode(config: &Config, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        Self::decode_shared(Shared::new(config.clone()), bytes)
    }

    pub(crate) fn decode_shared(
        shared: Arc<Shared>,
        bytes: &[u8],
    ) -> Result<Synopsis, DecodeError> {
        let c = &shared.config;
        let mut r = WireReader::new(bytes);
        let tag = r.take(4, "LDA tag")?;
        let digests = if tag == TAG_DIGEST {
            true
        } else if tag == TAG_PLAIN {
            false
        } else {
            return Err(DecodeError::Invalid {
                offset: 0,
                what: "not an LDA synopsis (no LDA1 or LDA2 tag)".into(),
            });
        };
        if digests && !c.digest() {
            return Err(DecodeError::Invalid {
                offset: 0,
                what: "an LDA2 synopsis carries identity digests, but the configuration says digest=off".into(),
            });
        }
        let banks = r.u16("LDA bank count")? as usize;
        let rows = r.u32("LDA row count")? as usize;
        if banks != c.banks() || rows != c.rows() {
            return Err(r.invalid(format!(
                "LDA synopsis of {banks} banks × {rows} rows, but the configuration says {} × {}",
                c.banks(),
                c.rows()
            )));
        }
        // banks × rows is the configuration's, validated (≤ 2²⁴ rows): no overflow
        let n = banks * rows;
        let size = row_bytes(digests);
        let body = r.take(n * size, "LDA rows")?;
        r.finish("LDA rows")?;
        let buckets = body
            .chunks_exact(size)
            .map(|ch| Bucket {
                ts_sum: u64::from_le_bytes(ch[..8].try_into().unwrap()),
                count: u32::from_le_bytes(ch[8..12].try_into().unwrap()),
                digest: if digests {
                    u32::from_le_bytes(ch[12..16].try_into().unwrap())
                } else {
                    0
                },
            })
            .collect();
        Ok(Synopsis {
            shared,
            buckets,
            digest_mask: mask(digests),
        })
    }
}

/// The digest mask of a synopsis that keeps digests or not.
const fn mask(digests: bool) -> u32 {
    if digests { u32::MAX } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_leading_zero_example() {
        // §III-B.4: p1 = 1/2^3, p2 = 1/2^7. Seven leading zeros → bank 2; else three → bank 1.
        let s = BankSampler::new(&Sampling::LeadingZeros(vec![3, 7]));
        assert_eq!(s.bank(u64::MAX), None);
        assert_eq!(s.bank(1 << 61), None); // 2 leading zeros: not sampled
        assert_eq!(s.bank(1 << 60), Some(0)); // 3 zeros
        assert_eq!(s.bank(1 << 57), Some(0)); // 6 zeros
        assert_eq!(s.bank(1 << 56), Some(1)); // 7 zeros
        assert_eq!(s.bank(0), Some(1)); // 64 zeros
        let c = Config::new(4, Sampling::LeadingZeros(vec![3, 7]), 1).unwrap();
        let p = c.bank_probabilities();
        assert_eq!(p, vec![1.0 / 8.0 - 1.0 / 128.0, 1.0 / 128.0]);
    }

    #[test]
    fn thresholds_partition_the_hash_space() {
        let s = BankSampler::new(&Sampling::Probabilities(vec![0.5, 0.25]));
        assert_eq!(s.bank(0), Some(0));
        assert_eq!(s.bank((1 << 63) - 1), Some(0));
        assert_eq!(s.bank(1 << 63), Some(1));
        assert_eq!(s.bank((1 << 63) + (1 << 62) - 1), Some(1));
        assert_eq!(s.bank((1 << 63) + (1 << 62)), None);
        let all = BankSampler::new(&Sampling::Probabilities(vec![1.0]));
        assert_eq!(all.bank(u64::MAX), Some(0));
        let c = Config::new(2, Sampling::Probabilities(vec![0.5, 0.25]), 1).unwrap();
        assert_eq!(c.bank_probabilities(), vec![0.5, 0.25]);
    }

    #[test]
    fn sampling_frequencies_match_the_probabilities() {
        for sampling in [
            Sampling::Probabilities(vec![0.1, 0.02]),
            Sampling::LeadingZeros(vec![2, 5]),
        ] {
            let c = Config::new(64, sampling, 9).unwrap();
            let a = Synopsis::new(&c);
            let n = 400_000u64;
            let mut counts = [0u64; 2];
            for id in 0..n {
                if let Some((j, i)) = a.locate(id) {
                    assert!(i < 64);
                    counts[j] += 1;
                }
            }
            for (j, p) in c.bank_probabilities().into_iter().enumerate() {
                let expect = p * n as f64;
                let sd = (expect * (1.0 - p)).sqrt();
                assert!(
                    (counts[j] as f64 - expect).abs() < 6.0 * sd,
                    "bank {j}: {} vs {expect}",
                    counts[j]
                );
            }
        }
    }

    #[test]
    fn encode_decode_roundtrip_and_errors() {
        let c = Config::tuned(8, &[0.01, 0.1], 1000, 3).unwrap();
        let mut a = Synopsis::new(&c);
        for id in 0..5000u64 {
            a.record(
                id.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                1_767_225_600_000_000_000 + id,
            );
        }
        assert!(a.sampled() > 0);
        let mut b = Vec::new();
        a.encode(&mut b);
        assert_eq!(b.len(), a.encoded_len());
        assert_eq!(b.len(), 10 + 16 * 16);
        assert_eq!(&b[..4], b"LDA2");
        let d = Synopsis::decode(&c, &b).unwrap();
        assert_eq!(d.buckets, a.buckets);
        assert!(d.has_digests());
        // every truncation is an error, never a panic
        for cut in 0..b.len() {
            assert!(Synopsis::decode(&c, &b[..cut]).is_err(), "cut {cut}");
        }
        let mut long = b.clone();
        long.push(0);
        assert!(Synopsis::decode(&c, &long).is_err());
        // foreign payloads
        let e = Synopsis::decode(&c, b"RDA1\x02\x00\x08\x00\x00\x00").unwrap_err();
        assert!(e.to_string().contains("not an LDA synopsis"), "{e}");
        // LDA2 under digest=off names the field
        let off = c.clone().with_digest(false);
        let e = Synopsis::decode(&off, &b).unwrap_err();
        assert!(e.to_string().contains("digest=off"), "{e}");
        // another configuration's shape
        let other = Config::tuned(16, &[0.01, 0.1], 1000, 3).unwrap();
        let e = Synopsis::decode(&other, &b).unwrap_err();
        assert!(e.to_string().contains("2 banks × 8 rows"), "{e}");
        // a hostile header that claims a huge size is refused before any allocation
        for tag in [b"LDA1", b"LDA2"] {
            let mut hostile = tag.to_vec();
            hostile.extend_from_slice(b"\xff\xff\xff\xff\xff\xff");
            hostile.extend_from_slice(&[0; 16]);
            assert!(Synopsis::decode(&c, &hostile).is_err());
        }
    }
}
