//! The RDA synopsis itself (§V-A): `k` banks of `m` buckets of (ID, TS, Δ) in one contiguous
//! array, one independent hash function per bank; insertion, deletion, and the subtraction
//! `I_B − I_A` of §V-B (i) that the decoder works on.
//!
//! # Arithmetic
//!
//! - `ID` is the XOR of the identities in the bucket (§IV-B): a common packet cancels out of a
//!   subtraction.
//! - `TS` is the sum of timestamps in wrapping `u64` arithmetic. A difference of two sums over
//!   the same packets, `TS_R − TS_S`, is therefore the exact sum of their delays modulo 2⁶⁴,
//!   read as an `i64`: exact while the true delay sum of one bucket stays below 2⁶³ ns (292
//!   years), whatever the absolute timestamps are. Deletion subtracts with the same wrapping.
//! - `Δ` is a signed 64-bit packet count (§VIII-B "Bucket Width": 3 × 64 bits a bucket).
//!
//! Bucket `i` of bank `l` (both 0-based) is element `l·m + i` of the array (§V-A: "the i-th bank
//! consists of the buckets of [(i−1)·m + 1, i·m]"). Bank `l` hashes identities with member
//! [`BANK_MEMBER`]` + l` of the configuration's [`HashFamily`].

use crate::hash::{HashFamily, HashFn};
use crate::wire::{DecodeError, WireReader, WireWriter};

/// Bytes of one bucket on the wire: ID, TS and Δ, 64 bits each (§VIII-B).
pub const BUCKET_BYTES: u64 = 24;
/// Most banks an RDA may have (the paper recommends 2; §VIII-B finds more than 2 worse).
pub const MAX_BANKS: usize = 16;
/// Most buckets one RDA may hold over all its banks (1.5 GiB): anything above is an absurd
/// configuration or a hostile payload, refused before allocating.
pub const MAX_TOTAL_BUCKETS: usize = 1 << 26;
/// Hash-family member of bank 0; bank `l` uses `BANK_MEMBER + l`.
pub const BANK_MEMBER: u64 = 0x7264_6100; // "rda\0"

/// One RDA bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    /// XOR of the identities aggregated here.
    pub id: u64,
    /// Wrapping sum of their timestamps, ns.
    pub ts: u64,
    /// Number of packets aggregated here (negative only in a subtraction).
    pub delta: i64,
}

impl Bucket {
    /// A bucket that holds nothing (ID 0, Δ 0): Algorithm 1 line 9's test.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.id == 0 && self.delta == 0
    }
}

/// Why an RDA cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("an RDA needs between 1 and {MAX_BANKS} banks, got {0}")]
    Banks(usize),
    #[error("an RDA needs at least 1 bucket per bank, got {0}")]
    Empty(usize),
    #[error(
        "{banks} banks × {per_bank} buckets is more than the {MAX_TOTAL_BUCKETS} buckets an RDA may hold"
    )]
    TooLarge { banks: usize, per_bank: usize },
}

/// Check a shape before allocating it.
pub fn check_shape(banks: usize, per_bank: usize) -> Result<(), ShapeError> {
    if banks == 0 || banks > MAX_BANKS {
        return Err(ShapeError::Banks(banks));
    }
    if per_bank == 0 {
        return Err(ShapeError::Empty(per_bank));
    }
    if banks
        .checked_mul(per_bank)
        .is_none_or(|t| t > MAX_TOTAL_BUCKETS)
    {
        return Err(ShapeError::TooLarge { banks, per_bank });
    }
    Ok(())
}

/// The bank hash functions of a configuration seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BankHashes {
    fns: Vec<HashFn>,
    m: usize,
}

impl BankHashes {
    pub fn new(seed: u64, banks: usize, m: usize) -> BankHashes {
        let fam = HashFamily::new(seed);
        BankHashes {
            fns: (0..banks as u64)
                .map(|l| fam.member(BANK_MEMBER + l))
                .collect(),
            m,
        }
    }
    /// `h_l(id)`: the bucket of `id` in bank `l`, in `[0, m)`.
    #[inline]
    pub fn index(&self, l: usize, id: u64) -> usize {
        self.fns[l].index(id, self.m)
    }
    pub fn banks(&self) -> usize {
        self.fns.len()
    }
    pub fn per_bank(&self) -> usize {
        self.m
    }
}

/// A Reconcilable Difference Aggregator: `k` banks × `m` buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rda {
    hashes: BankHashes,
    buckets: Vec<Bucket>,
}

impl Rda {
    /// An empty RDA of `banks` banks of `per_bank` buckets whose bank hashes derive from `seed`.
    pub fn new(banks: usize, per_bank: usize, seed: u64) -> Result<Rda, ShapeError> {
        check_shape(banks, per_bank)?;
        Ok(Rda {
            hashes: BankHashes::new(seed, banks, per_bank),
            buckets: vec![Bucket::default(); banks * per_bank],
        })
    }

    pub fn banks(&self) -> usize {
        self.hashes.banks()
    }
    pub fn per_bank(&self) -> usize {
        self.hashes.m
    }
    pub fn hashes(&self) -> &BankHashes {
        &self.hashes
    }
    /// All buckets, bank after bank.
    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }
    /// Bucket `i` of bank `l`.
    pub fn bucket(&self, l: usize, i: usize) -> &Bucket {
        &self.buckets[l * self.hashes.m + i]
    }
    /// The buckets of bank `l`.
    pub fn bank(&self, l: usize) -> &[Bucket] {
        let m = self.hashes.m;
        &self.buckets[l * m..(l + 1) * m]
    }

    /// Insert a packet (§V-A): in each bank, `ID ⊕= id`, `TS += ts`, `Δ += 1`.
    #[inline]
    pub fn insert(&mut self, id: u64, ts: u64) {
        let m = self.hashes.m;
        for l in 0..self.hashes.fns.len() {
            let b = &mut self.buckets[l * m + self.hashes.fns[l].index(id, m)];
            b.id ^= id;
            b.ts = b.ts.wrapping_add(ts);
            b.delta += 1;
        }
    }

    /// Delete a packet (§V-A): in each bank, `ID ⊕= id`, `TS −= ts`, `Δ −= 1`.
    #[inline]
    pub fn delete(&mut self, id: u64, ts: u64) {
        let m = self.hashes.m;
        for l in 0..self.hashes.fns.len() {
            let b = &mut self.buckets[l * m + self.hashes.fns[l].index(id, m)];
            b.id ^= id;
            b.ts = b.ts.wrapping_sub(ts);
            b.delta -= 1;
        }
    }

    /// Insert many packets.
    pub fn insert_all(&mut self, packets: impl IntoIterator<Item = (u64, u64)>) {
        for (id, ts) in packets {
            self.insert(id, ts);
        }
    }

    /// Same shape and hashes (the precondition of a subtraction).
    pub fn same_shape(&self, other: &Rda) -> bool {
        self.hashes == other.hashes
    }

    /// Bytes of this RDA on the wire (what R sends to S, §VIII-A "Latency Aggregation").
    pub fn wire_bytes(&self) -> u64 {
        self.buckets.len() as u64 * BUCKET_BYTES
    }

    /// Append the buckets (bank after bank; ID, TS, Δ little-endian). The shape and seed are the
    /// configuration's, agreed beforehand, and not repeated.
    pub fn encode(&self, w: &mut WireWriter) {
        w.reserve(self.buckets.len() * BUCKET_BYTES as usize);
        for b in &self.buckets {
            w.u64(b.id);
            w.u64(b.ts);
            w.i64(b.delta);
        }
    }

    /// Read an RDA of the agreed shape written by [`encode`](Self::encode). The length is
    /// checked before anything is allocated; bucket contents are not trusted (the decoder copes
    /// with garbage).
    pub fn decode(
        r: &mut WireReader<'_>,
        banks: usize,
        per_bank: usize,
        seed: u64,
    ) -> Result<Rda, DecodeError> {
        check_shape(banks, per_bank).map_err(|e| r.invalid(e.to_string()))?;
        let n = banks * per_bank;
        let bytes = r.take(n * BUCKET_BYTES as usize, "RDA buckets")?;
        let buckets = bytes
            .chunks_exact(BUCKET_BYTES as usize)
            .map(|c| Bucket {
                id: u64::from_le_bytes(c[0..8].try_into().unwrap()),
                ts: u64::from_le_bytes(c[8..16].try_into().unwrap()),
                delta: i64::from_le_bytes(c[16..24].try_into().unwrap()),
            })
            .collect();
        Ok(Rda {
            hashes: BankHashes::new(seed, banks, per_bank),
            buckets,
        })
    }
}

/// One cell of a subtraction RDA: the TS field is left out (§IV-C: "We do not modify the TS
/// field, since our goal is to list the identifiers of packets in the set difference").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cell {
    pub id: u64,
    pub delta: i64,
}

/// A subtraction RDA `I_B − I_A` (§V-B (i)): receiver minus sender, bucket by bucket,
/// `ID = ID_R ⊕ ID_S`, `Δ = Δ_R − Δ_S`.
///
/// # Sign convention
///
/// With B the receiver and A the sender, a packet recorded only at the sender (lost, or sent
/// just before the interval ended) leaves `Δ = −1` in each of its buckets; a packet recorded
/// only at the receiver (reordered into the interval, §III-B) leaves `Δ = +1`. This agrees with
/// the text of §IV-C ("Δ = 1 … this packet is reordered; Δ = −1 … lost"); Algorithm 1
/// (lines 13–16) states the opposite for the same `I_B − I_A` and is wrong. See
/// [`super::decode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subtraction {
    hashes: BankHashes,
    cells: Vec<Cell>,
}

impl Subtraction {
    /// `receiver − sender`; `None` when the two RDAs differ in shape or hashes.
    pub fn of(receiver: &Rda, sender: &Rda) -> Option<Subtraction> {
        if !receiver.same_shape(sender) {
            return None;
        }
        let cells = receiver
            .buckets
            .iter()
            .zip(&sender.buckets)
            .map(|(r, s)| Cell {
                id: r.id ^ s.id,
                delta: r.delta.wrapping_sub(s.delta),
            })
            .collect();
        Some(Subtraction {
            hashes: receiver.hashes.clone(),
            cells,
        })
    }

    /// A subtraction from raw cells (tests and hostile-input checks); `cells.len()` must be
    /// `banks · per_bank`.
    pub fn from_cells(
        seed: u64,
        banks: usize,
        per_bank: usize,
        cells: Vec<Cell>,
    ) -> Result<Subtraction, ShapeError> {
        check_shape(banks, per_bank)?;
        if cells.len() != banks * per_bank {
            return Err(ShapeError::Empty(0));
        }
        Ok(Subtraction {
            hashes: BankHashes::new(seed, banks, per_bank),
            cells,
        })
    }

    pub fn hashes(&self) -> &BankHashes {
        &self.hashes
    }
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }
    pub(crate) fn cells_mut(&mut self) -> &mut [Cell] {
        &mut self.cells
    }
    /// Cells that still hold something.
    pub fn non_empty(&self) -> usize {
        self.cells
            .iter()
            .filter(|c| c.id != 0 || c.delta != 0)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_then_delete_is_identity_and_banks_are_disjoint() {
        let mut r = Rda::new(2, 16, 7).unwrap();
        let empty = r.clone();
        r.insert(42, 1_000);
        // exactly one bucket per bank holds the packet
        for l in 0..2 {
            let held: Vec<_> = r.bank(l).iter().filter(|b| !b.is_empty()).collect();
            assert_eq!(held.len(), 1);
            assert_eq!(
                *held[0],
                Bucket {
                    id: 42,
                    ts: 1_000,
                    delta: 1
                }
            );
            assert_eq!(*r.bucket(l, r.hashes().index(l, 42)), *held[0]);
        }
        r.delete(42, 1_000);
        assert_eq!(r, empty);
    }

    #[test]
    fn timestamp_sums_wrap_but_differences_are_exact() {
        let mut s = Rda::new(1, 1, 1).unwrap();
        let mut r = Rda::new(1, 1, 1).unwrap();
        for (i, t) in [u64::MAX - 5, u64::MAX - 1, 3].into_iter().enumerate() {
            s.insert(i as u64 + 1, t);
            r.insert(i as u64 + 1, t.wrapping_add(10 + i as u64));
        }
        let d = r.bucket(0, 0).ts.wrapping_sub(s.bucket(0, 0).ts) as i64;
        assert_eq!(d, 10 + 11 + 12);
    }

    #[test]
    fn subtraction_cancels_common_packets() {
        let mut s = Rda::new(3, 64, 9).unwrap();
        let mut r = Rda::new(3, 64, 9).unwrap();
        for id in 1..=100u64 {
            s.insert(id, id * 10);
            r.insert(id, id * 10 + 5);
        }
        s.insert(1000, 1); // only at S
        r.insert(2000, 2); // only at R
        let sub = Subtraction::of(&r, &s).unwrap();
        let h = sub.hashes().clone();
        for l in 0..3 {
            let a = h.index(l, 1000);
            let b = h.index(l, 2000);
            let c = sub.cells()[l * 64 + a];
            if a != b {
                assert_eq!(
                    c,
                    Cell {
                        id: 1000,
                        delta: -1
                    }
                );
                assert_eq!(sub.cells()[l * 64 + b], Cell { id: 2000, delta: 1 });
            }
        }
        assert!(sub.non_empty() <= 6);
        assert!(Subtraction::of(&r, &Rda::new(3, 64, 10).unwrap()).is_none());
        assert!(Subtraction::of(&r, &Rda::new(2, 64, 9).unwrap()).is_none());
    }

    #[test]
    fn wire_roundtrip_and_truncation() {
        let mut r = Rda::new(2, 5, 3).unwrap();
        r.insert(5, 6);
        r.insert(7, 8);
        let mut buf = Vec::new();
        r.encode(&mut WireWriter::new(&mut buf));
        assert_eq!(buf.len() as u64, r.wire_bytes());
        let back = Rda::decode(&mut WireReader::new(&buf), 2, 5, 3).unwrap();
        assert_eq!(back, r);
        for cut in 0..buf.len() {
            assert!(Rda::decode(&mut WireReader::new(&buf[..cut]), 2, 5, 3).is_err());
        }
        // an absurd shape is refused before allocating
        assert!(Rda::decode(&mut WireReader::new(&buf), 16, 1 << 40, 3).is_err());
    }

    #[test]
    fn shapes_are_checked() {
        assert_eq!(Rda::new(0, 4, 1).unwrap_err(), ShapeError::Banks(0));
        assert_eq!(Rda::new(17, 4, 1).unwrap_err(), ShapeError::Banks(17));
        assert_eq!(Rda::new(2, 0, 1).unwrap_err(), ShapeError::Empty(0));
        assert!(matches!(
            Rda::new(2, usize::MAX, 1),
            Err(ShapeError::TooLarge { .. })
        ));
    }
}
