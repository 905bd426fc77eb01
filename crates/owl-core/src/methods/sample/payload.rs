//! What a point ships: its samples as hash cells and timestamps, compressed (tag `SMP2`).
//!
//! ```text
//! "SMP2" | u64 packets seen | u32 n | u8 shift | u8 low bits l | u8 width w
//! | u64 t0 | u64 unit | bit stream, least significant bit first, zero-padded to a byte:
//!     n × l bits   the low parts of the cells             (Elias–Fano)
//!     n ones       the high parts, each after as many zeros as it exceeds the previous one
//!     n × w bits   the timestamps, (t − t0) / unit
//! ```
//!
//! **Cells.** A sample's cell is its identity hash shifted right by `shift`: the point picks the
//! largest shift that leaves at least `n · 2^cell_bits` cells in the hash range its samples
//! span (all of it until the point is full, `[0, τ]` after), so the cells of `n` uniform hashes
//! are `2^cell_bits` times finer than their spacing. Sorted, they are coded by Elias–Fano
//! (P. Elias, *Efficient storage and retrieval by content and address of static files*, JACM
//! 21(2), 1974; R. M. Fano, 1971): the low `l = ⌊log₂(U/n)⌋` bits as they are, the high parts as
//! unary gaps — at most `2 + log₂(U/n)` bits a sample, `cell_bits + 2` to `cell_bits + 3` here.
//! Samples sharing a cell keep the order of their full hashes at both points, which is what
//! lets the estimator pair them (see the estimator in the parent module).
//!
//! `cell_bits` is the configuration's: derived from `false_matches` and the capacity (22 at the
//! defaults, `log₂(capacity/ε)`: the parent module's *Sizing the cells*) or fixed
//! (`cell_bits=8`, the compact cells). Only the shift it gives crosses, in each payload, so the
//! decoder needs neither rule and the layout is `SMP2` as before: `cell_bits=8` ships the
//! bytes it always did.
//!
//! **Timestamps**, in the cells' order (hash order: random in time, so each costs the bits of
//! the sampled time span): rounded down to the configuration's resolution (1 ns: exact), then
//! offsets from the earliest, divided by their greatest common divisor `unit` (a capture of
//! microsecond resolution ships microseconds with no loss) and written in the width of the
//! largest.
//!
//! Decoding checks every count against the bytes left before it allocates, every shift and
//! width against 64 bits, that the cells ascend, every timestamp against overflow, and that
//! the stream ends exactly where its padding does.

use crate::wire::{DecodeError, WireReader, WireWriter};

/// First bytes of a payload.
pub const TAG: &[u8; 4] = b"SMP2";
/// The tag of the earlier format: `(identity, timestamp)` pairs of 16 B.
pub const TAG_V1: &[u8; 4] = b"SMP1";
/// Bytes before the bit stream.
pub const HEADER_BYTES: usize = 4 + 8 + 4 + 3 + 8 + 8;

/// One point's samples as they cross the network (and as a decoded payload holds them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shipped {
    /// Packets the point was offered.
    pub seen: u64,
    /// Cells are `hash >> shift`.
    pub shift: u8,
    /// Elias–Fano split of the cells.
    pub low_bits: u8,
    /// Bits of each timestamp offset.
    pub width: u8,
    /// The earliest timestamp (at the resolution), ns.
    pub t0: u64,
    /// The offsets' common divisor, ns.
    pub unit: u64,
    /// Cells, non-decreasing (ties in the order of the full hashes).
    pub cells: Vec<u64>,
    /// Timestamps at the resolution, ns, in the cells' order.
    pub times: Vec<u64>,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Bits needed to write `v`.
fn bit_len(v: u64) -> u8 {
    (64 - v.leading_zeros()) as u8
}

impl Shipped {
    /// The shipped form of `samples` — `(hash, timestamp)` in ascending hash order — of a point
    /// that saw `seen` packets; `full` when it kept only the smallest hashes (its range is then
    /// `[0, last hash]`, else the whole hash range).
    pub fn of(
        samples: impl ExactSizeIterator<Item = (u64, u64)> + Clone,
        seen: u64,
        full: bool,
        cell_bits: u8,
        resolution_ns: u64,
    ) -> Shipped {
        let n = samples.len();
        let last = samples.clone().last().map_or(u64::MAX, |(h, _)| h);
        let range: u128 = if full { last as u128 + 1 } else { 1 << 64 };
        let target = (n.max(1) as u128) << cell_bits;
        let shift = (0..64u8).rev().find(|&s| range >> s >= target).unwrap_or(0);
        let q = resolution_ns.max(1);
        let mut cells = Vec::with_capacity(n);
        let mut times = Vec::with_capacity(n);
        for (h, ts) in samples {
            cells.push(h >> shift);
            times.push(ts - ts % q);
        }
        let max_cell = cells.last().copied().unwrap_or(0);
        let low_bits = if n == 0 {
            0
        } else {
            let spacing = (max_cell as u128 + 1) / n as u128;
            if spacing == 0 {
                0
            } else {
                ((127 - spacing.leading_zeros()) as u8).min(63)
            }
        };
        let t0 = times.iter().copied().min().unwrap_or(0);
        let unit = times.iter().fold(0, |g, &t| gcd(g, t - t0)).max(1);
        let width = bit_len(times.iter().map(|&t| (t - t0) / unit).max().unwrap_or(0));
        Shipped {
            seen,
            shift,
            low_bits,
            width,
            t0,
            unit,
            cells,
            times,
        }
    }

    pub fn len(&self) -> usize {
        self.cells.len()
    }
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Bits of the stream after the header.
    pub fn stream_bits(&self) -> u64 {
        let n = self.cells.len() as u64;
        let high = self.cells.last().map_or(0, |&c| c >> self.low_bits);
        n * self.low_bits as u64 + n + high + n * self.width as u64
    }

    /// The encoded length, bytes.
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + self.stream_bits().div_ceil(8) as usize
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = WireWriter::new(out);
        w.reserve(self.encoded_len());
        w.bytes(TAG);
        w.u64(self.seen);
        w.u32(self.cells.len() as u32);
        w.u8(self.shift);
        w.u8(self.low_bits);
        w.u8(self.width);
        w.u64(self.t0);
        w.u64(self.unit);
        let mut b = BitWriter::default();
        let low_mask = mask(self.low_bits);
        for &c in &self.cells {
            b.put(c & low_mask, self.low_bits);
        }
        let mut prev = 0;
        for &c in &self.cells {
            let hi = c >> self.low_bits;
            b.zeros(hi - prev);
            b.put(1, 1);
            prev = hi;
        }
        for &t in &self.times {
            b.put((t - self.t0) / self.unit, self.width);
        }
        w.bytes(&b.finish());
    }

    /// Decode a payload of at most `capacity` samples.
    pub fn decode(bytes: &[u8], capacity: usize) -> Result<Shipped, DecodeError> {
        let mut r = WireReader::new(bytes);
        let tag = r.take(4, "tag")?;
        if tag == TAG_V1 {
            return Err(r.invalid(
                "a sample payload of the earlier format (SMP1, 16-byte samples): this owl reads \
                 SMP2 (compressed samples); record the captures again",
            ));
        }
        if tag != TAG {
            return Err(r.invalid("not a sample payload (tag)"));
        }
        let seen = r.u64("packets seen")?;
        let n = r.u32("sample count")? as usize;
        if n > capacity || n as u64 > seen {
            return Err(r.invalid(format!(
                "{n} samples of {seen} packets with a capacity of {capacity}"
            )));
        }
        let shift = r.u8("shift")?;
        let low_bits = r.u8("low bits")?;
        let width = r.u8("timestamp width")?;
        if shift > 63 || low_bits > 63 || low_bits as u32 + shift as u32 > 64 || width > 64 {
            return Err(r.invalid(format!(
                "shift {shift}, low bits {low_bits}, timestamp width {width}: beyond 64-bit values"
            )));
        }
        let t0 = r.u64("first timestamp")?;
        let unit = r.u64("timestamp unit")?;
        if unit == 0 {
            return Err(r.invalid("timestamp unit 0"));
        }
        let at = r.offset();
        let stream = r.take(r.remaining(), "samples")?;
        let invalid = |what: String| DecodeError::Invalid { offset: at, what };
        // each sample takes at least its low bits, a one and its timestamp
        let least = n as u128 * (low_bits as u128 + 1 + width as u128);
        if least > 8 * stream.len() as u128 {
            return Err(invalid(format!(
                "{n} samples need at least {least} bits, {} bytes follow",
                stream.len()
            )));
        }
        let mut b = BitReader::new(stream);
        let truncated = || invalid(format!("the bit stream of {n} samples ends early"));
        let mut cells = Vec::with_capacity(n);
        for _ in 0..n {
            cells.push(b.get(low_bits).ok_or_else(truncated)?);
        }
        // cells stay below 2^(64 − shift): the high parts below 2^(64 − shift − l)
        let high_limit = 64 - shift as u32 - low_bits as u32;
        let mut hi = 0u64;
        for c in cells.iter_mut() {
            hi += b.unary().ok_or_else(truncated)?;
            if high_limit < 64 && hi >> high_limit != 0 {
                return Err(invalid(format!(
                    "a cell beyond the hash range (shift {shift})"
                )));
            }
            *c |= hi << low_bits;
        }
        // the estimator walks the cells in order: a low part below the previous one's in the
        // same high part is no sorted list
        if !cells.is_sorted() {
            return Err(invalid("cells out of order".into()));
        }
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let off = b.get(width).ok_or_else(truncated)?;
            let t = off
                .checked_mul(unit)
                .and_then(|o| o.checked_add(t0))
                .ok_or_else(|| invalid(format!("timestamp {t0} + {off} × {unit} overflows")))?;
            times.push(t);
        }
        b.finish()
            .map_err(|rest| invalid(format!("{rest} bits after the samples are not padding")))?;
        Ok(Shipped {
            seen,
            shift,
            low_bits,
            width,
            t0,
            unit,
            cells,
            times,
        })
    }
}

fn mask(bits: u8) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Bits appended least significant first.
#[derive(Default)]
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    used: u32,
}

impl BitWriter {
    /// The low `bits` bits of `v`.
    fn put(&mut self, v: u64, bits: u8) {
        let mut v = v & mask(bits);
        let mut bits = bits as u32;
        while bits > 0 {
            let take = bits.min(64 - self.used);
            let part = if take == 64 { v } else { v & ((1 << take) - 1) };
            self.acc |= part << self.used;
            self.used += take;
            bits -= take;
            v = if take == 64 { 0 } else { v >> take };
            if self.used == 64 {
                self.out.extend_from_slice(&self.acc.to_le_bytes());
                (self.acc, self.used) = (0, 0);
            }
        }
    }
    fn zeros(&mut self, mut k: u64) {
        while k > 0 {
            let take = k.min(64) as u8;
            self.put(0, take);
            k -= take as u64;
        }
    }
    fn finish(mut self) -> Vec<u8> {
        let bytes = self.used.div_ceil(8) as usize;
        self.out.extend_from_slice(&self.acc.to_le_bytes()[..bytes]);
        self.out
    }
}

/// Reads what [`BitWriter`] wrote.
struct BitReader<'a> {
    b: &'a [u8],
    /// Next bit.
    pos: u64,
}

impl<'a> BitReader<'a> {
    fn new(b: &'a [u8]) -> Self {
        BitReader { b, pos: 0 }
    }
    fn bit(&self, i: u64) -> Option<bool> {
        let byte = self.b.get((i / 8) as usize)?;
        Some(byte >> (i % 8) & 1 == 1)
    }
    /// The next `bits` bits, or `None` past the end.
    fn get(&mut self, bits: u8) -> Option<u64> {
        if self.pos + bits as u64 > 8 * self.b.len() as u64 {
            return None;
        }
        let mut v = 0u64;
        let mut got = 0u32;
        while got < bits as u32 {
            let i = self.pos + got as u64;
            let in_byte = (i % 8) as u32;
            let take = (8 - in_byte).min(bits as u32 - got);
            let byte = self.b[(i / 8) as usize] as u64;
            v |= (byte >> in_byte & ((1 << take) - 1)) << got;
            got += take;
        }
        self.pos += bits as u64;
        Some(v)
    }
    /// Zeros before the next one (the one consumed).
    fn unary(&mut self) -> Option<u64> {
        let start = self.pos;
        while !self.bit(self.pos)? {
            self.pos += 1;
        }
        self.pos += 1;
        Some(self.pos - 1 - start)
    }
    /// `Ok` when only zero padding (less than a byte) is left, else the bits left.
    fn finish(&self) -> Result<(), u64> {
        let total = 8 * self.b.len() as u64;
        let rest = total - self.pos;
        if rest >= 8 || (self.pos..total).any(|i| self.bit(i) == Some(true)) {
            return Err(rest);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip_at_every_width() {
        let mut w = BitWriter::default();
        let vals: Vec<(u64, u8)> = (0..=64u8)
            .map(|b| (0x9e37_79b9_7f4a_7c15u64.rotate_left(b as u32) & mask(b), b))
            .collect();
        for &(v, b) in &vals {
            w.put(v, b);
            w.zeros(b as u64 % 5);
            w.put(1, 1);
        }
        let bytes = w.finish();
        let mut r = BitReader::new(&bytes);
        for &(v, b) in &vals {
            assert_eq!(r.get(b), Some(v), "width {b}");
            assert_eq!(r.unary(), Some(b as u64 % 5));
        }
        assert_eq!(r.finish(), Ok(()));
        assert_eq!(r.get(8), None);
    }
}
