//! The per-point aggregator: `n × m` rows of (timestamp accumulator, packet counter), the
//! update procedure of §III-C, and the wire encoding.

use std::sync::Arc;

use super::{Config, Sampling};
use crate::hash::{HashFn, reduce};
use crate::wire::{DecodeError, WireReader, WireWriter};

/// Bytes of one encoded row: `u64` timestamp accumulator + `u32` packet counter.
pub const BYTES_PER_ROW: usize = 12;
/// Bytes of the encoded header: `"LDA1"`, `u16` banks, `u32` rows.
pub const HEADER_BYTES: usize = 10;
const TAG: &[u8; 4] = b"LDA1";

/// One row of one bank: the timestamp accumulator `T[i, j]` (wrapping sum of ns timestamps,
/// see the module doc) and the packet counter `S[i, j]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Bucket {
    pub ts_sum: u64,
    pub count: u32,
}

impl Bucket {
    #[inline]
    fn add(&mut self, ts_ns: u64) {
        self.ts_sum = self.ts_sum.wrapping_add(ts_ns);
        self.count = self.count.wrapping_add(1);
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
}

impl Synopsis {
    /// An empty aggregator.
    pub fn new(config: &Config) -> Synopsis {
        Self::with_shared(Shared::new(config.clone()))
    }

    pub(crate) fn with_shared(shared: Arc<Shared>) -> Synopsis {
        let n = shared.config.rows() * shared.config.banks();
        Synopsis {
            buckets: vec![Bucket::default(); n],
            shared,
        }
    }

    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Where a packet goes: `(bank, row)`, or `None` when no bank samples it.
    #[inline]
    pub fn locate(&self, id: u64) -> Option<(usize, usize)> {
        let s = &*self.shared;
        let j = s.sampler.bank(s.bank_hash.hash(id))?;
        Some((j, reduce(s.row_hash.hash(id), s.config.rows())))
    }

    /// The update procedure of §III-C: `j ← g(x)`; if sampled, `i ← h(x)`,
    /// `T[i, j] += τ`, `S[i, j] += 1`.
    #[inline]
    pub fn record(&mut self, id: u64, ts_ns: u64) {
        if let Some((j, i)) = self.locate(id) {
            let m = self.shared.config.rows();
            self.buckets[j * m + i].add(ts_ns);
        }
    }

    /// [`record`](Self::record) over parallel slices of identities and timestamps.
    pub fn record_all(&mut self, ids: &[u64], ts_ns: &[u64]) {
        debug_assert_eq!(ids.len(), ts_ns.len());
        let s = &*self.shared;
        let m = s.config.rows();
        for (&id, &ts) in ids.iter().zip(ts_ns) {
            if let Some(j) = s.sampler.bank(s.bank_hash.hash(id)) {
                let i = reduce(s.row_hash.hash(id), m);
                self.buckets[j * m + i].add(ts);
            }
        }
    }

    /// Record packet records (one hash of the identity decides; unsampled packets cost only it).
    pub fn record_batch(&mut self, recs: &[crate::PacketRecord]) {
        let s = &*self.shared;
        let m = s.config.rows();
        for r in recs {
            if let Some(j) = s.sampler.bank(s.bank_hash.hash(r.id)) {
                let i = reduce(s.row_hash.hash(r.id), m);
                self.buckets[j * m + i].add(r.ts_ns);
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

    /// Set a row directly (worked examples and tests build the paper's figures with it).
    pub fn set_bucket(&mut self, bank: usize, row: usize, b: Bucket) {
        let m = self.shared.config.rows();
        self.buckets[bank * m + row] = b;
    }

    /// Packets recorded (sampled) in all banks.
    pub fn sampled(&self) -> u64 {
        self.buckets.iter().map(|b| b.count as u64).sum()
    }

    /// Bytes [`encode`](Self::encode) writes.
    pub fn encoded_len(&self) -> usize {
        self.shared.config.encoded_len()
    }

    /// Append the encoding (module doc: header, then 12 bytes per row).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let c = &self.shared.config;
        let mut w = WireWriter::new(out);
        w.reserve(self.encoded_len());
        w.bytes(TAG);
        w.u16(c.banks() as u16);
        w.u32(c.rows() as u32);
        for b in &self.buckets {
            w.u64(b.ts_sum);
            w.u32(b.count);
        }
    }

    /// Decode an aggregator of `config`; the header must match the configuration and the length
    /// must be exact.
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
        if tag != TAG {
            return Err(DecodeError::Invalid {
                offset: 0,
                what: "not an LDA synopsis (no LDA1 tag)".into(),
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
        let n = banks * rows;
        let body = r.take(n * BYTES_PER_ROW, "LDA rows")?;
        r.finish("LDA rows")?;
        let buckets = body
            .chunks_exact(BYTES_PER_ROW)
            .map(|ch| Bucket {
                ts_sum: u64::from_le_bytes(ch[..8].try_into().unwrap()),
                count: u32::from_le_bytes(ch[8..].try_into().unwrap()),
            })
            .collect();
        Ok(Synopsis { shared, buckets })
    }
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
        assert_eq!(b.len(), 10 + 12 * 16);
        let d = Synopsis::decode(&c, &b).unwrap();
        assert_eq!(d.buckets, a.buckets);
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
        // another configuration's shape
        let other = Config::tuned(16, &[0.01, 0.1], 1000, 3).unwrap();
        let e = Synopsis::decode(&other, &b).unwrap_err();
        assert!(e.to_string().contains("2 banks × 8 rows"), "{e}");
        // a hostile header that claims a huge size is refused before any allocation
        let mut hostile = b"LDA1\xff\xff\xff\xff\xff\xff".to_vec();
        hostile.extend_from_slice(&[0; 12]);
        assert!(Synopsis::decode(&c, &hostile).is_err());
    }
}
