//! The counter epoch (COLATE §1.4, §3.1): one counter vector dumped to permanent storage, with
//! everything a query needs to read it on its own — its time frame (first and last packet),
//! the base and unit its timestamps are relative to, the mapping (`n`, `m`, seed), and the
//! vector's sampling probability and packet counter (§1.4 "Packet Losses").
//!
//! # Layout (`CLE1`, little-endian)
//!
//! ```text
//! "CLE1" | u64 seq | u16 vector | u16 vectors | f64 probability | u64 seed
//! | u32 n | u32 m | u8 b | u8 bc | u64 unit_ns | u64 base_ns | u64 first_ns | u64 last_ns
//! | u64 packets | u64 sum low | u64 sum high | u64 early
//! | ⌈n·b/8⌉ bytes: n timestamp counters of b bits   | u32 e, e × (u32 index, u64 value)
//! | ⌈n·bc/8⌉ bytes: n packet counters of bc bits    | u32 e, e × (u32 index, u32 value)
//! | u64 xxh3 of every byte before it
//! ```
//!
//! Counters are packed `b` bits each, least significant bit first. A counter whose value does
//! not fit (`≥ 2^b − 1`) is written as all ones and its value in the list that follows — the
//! paper's split of a counter into SRAM low bits and DRAM high bits (§1.4, "Recording Phase"),
//! stored: the timestamp counters use the configured `b`; the packet counters the width
//! `bc` that holds twice the mean count. The checksum makes a torn or corrupted epoch one
//! clear error, never a wrong counter.

use xxhash_rust::xxh3::xxh3_64;

use crate::wire::{DecodeError, WireReader, WireWriter};

pub const TAG: &[u8; 4] = b"CLE1";
/// Bytes before the packed counters.
pub const HEADER_BYTES: usize = 4 + 8 + 2 + 2 + 8 + 8 + 4 + 4 + 1 + 1 + 8 * 8;
/// Most counters an epoch may have (2²⁸: a 256 M-counter vector is already absurd).
pub const MAX_COUNTERS: u32 = 1 << 28;

/// One dumped counter vector.
#[derive(Clone, Debug, PartialEq)]
pub struct Epoch {
    /// Dump number at this point (over all its vectors).
    pub seq: u64,
    /// Which of the point's vectors (§1.4), and how many it keeps.
    pub vector: u16,
    pub vectors: u16,
    /// Fraction of packets this vector samples.
    pub probability: f64,
    /// Seed of the mapping `H(f, j)` and of the packet's choice of `j`.
    pub seed: u64,
    /// Counters `n`, subvector length `m`, stored counter width `b` (bits).
    pub n: u32,
    pub m: u32,
    pub b: u8,
    /// Timestamps are `⌊(ts − base_ns) / unit_ns⌋`.
    pub unit_ns: u64,
    pub base_ns: u64,
    /// First and last recorded packet (capture time, ns).
    pub first_ns: u64,
    pub last_ns: u64,
    /// The vector's packet counter.
    pub packets: u64,
    /// `t_X`: the sum of every counter.
    pub sum: u128,
    /// Packets older than `base_ns` (capture disorder), recorded as 0.
    pub early: u64,
    /// The timestamp counters.
    pub ts: Vec<u64>,
    /// The packet counters (same mapping): the flow's packet count `p_f` (§4.1) and the
    /// absolute time of a relative sum.
    pub counts: Vec<u32>,
}

/// Width that holds `v`.
fn bits_for(v: u64) -> u8 {
    (64 - v.leading_zeros()).max(1) as u8
}

impl Epoch {
    /// Width of the stored packet counters: twice the mean count fits.
    pub fn count_bits(&self) -> u8 {
        count_bits(self.packets, self.n)
    }

    /// Timestamp counters that did not fit in `b` bits (what the paper calls an overflow).
    pub fn overflows(&self) -> usize {
        let top = escape(self.b);
        self.ts.iter().filter(|&&v| v >= top).count()
    }

    /// Bytes [`encode`](Self::encode) writes.
    pub fn encoded_len(&self) -> usize {
        encoded_len(self.b, self.packets, &self.ts, &self.counts)
    }

    /// Stored bits per recorded packet.
    pub fn bits_per_packet(&self) -> f64 {
        self.encoded_len() as f64 * 8.0 / self.packets.max(1) as f64
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let bc = self.count_bits();
        let mut w = WireWriter::new(out);
        w.bytes(TAG);
        w.u64(self.seq);
        w.u16(self.vector);
        w.u16(self.vectors);
        w.f64(self.probability);
        w.u64(self.seed);
        w.u32(self.n);
        w.u32(self.m);
        w.u8(self.b);
        w.u8(bc);
        w.u64(self.unit_ns);
        w.u64(self.base_ns);
        w.u64(self.first_ns);
        w.u64(self.last_ns);
        w.u64(self.packets);
        w.u64(self.sum as u64);
        w.u64((self.sum >> 64) as u64);
        w.u64(self.early);
        pack(&mut w, self.ts.iter().copied(), self.b, |w, i, v| {
            w.u32(i);
            w.u64(v)
        });
        pack(
            &mut w,
            self.counts.iter().map(|&c| c as u64),
            bc,
            |w, i, v| {
                w.u32(i);
                w.u32(v as u32)
            },
        );
        let sum = xxh3_64(&w.written()[start..]);
        w.u64(sum);
    }

    /// Decode one epoch (exactly `bytes`), checking the tag, every length against what is
    /// left before allocating, the escapes, the counters against the totals, and the checksum.
    pub fn decode(bytes: &[u8]) -> Result<Epoch, DecodeError> {
        let mut r = WireReader::new(bytes);
        if r.take(4, "epoch tag")? != TAG {
            return Err(DecodeError::Invalid {
                offset: 0,
                what: "not a COLATE counter epoch (tag is not CLE1)".into(),
            });
        }
        if bytes.len() < 8 {
            return Err(r.invalid("epoch shorter than its checksum"));
        }
        let (body, tail) = bytes.split_at(bytes.len() - 8);
        let want = u64::from_le_bytes(tail.try_into().expect("8 bytes"));
        if xxh3_64(body) != want {
            return Err(DecodeError::Invalid {
                offset: body.len(),
                what: "epoch checksum does not match: the epoch is torn or corrupted".into(),
            });
        }
        let mut r = WireReader::new(body);
        r.take(4, "epoch tag")?;
        let seq = r.u64("seq")?;
        let vector = r.u16("vector")?;
        let vectors = r.u16("vectors")?;
        let probability = r.f64("probability")?;
        let seed = r.u64("seed")?;
        let n = r.u32("n")?;
        let m = r.u32("m")?;
        let b = r.u8("b")?;
        let bc = r.u8("bc")?;
        if vectors == 0 || vector >= vectors {
            return Err(r.invalid(format!("vector {vector} of {vectors}")));
        }
        if !(probability > 0.0 && probability <= 1.0) {
            return Err(r.invalid(format!("sampling probability {probability}")));
        }
        if n == 0 || n > MAX_COUNTERS || m < 2 || m >= n || !m.is_multiple_of(2) {
            return Err(r.invalid(format!(
                "n = {n}, m = {m}: need an even m ≥ 2 and m < n ≤ {MAX_COUNTERS}"
            )));
        }
        if !(1..=63).contains(&b) || !(1..=32).contains(&bc) {
            return Err(r.invalid(format!("counter widths {b} and {bc} bits")));
        }
        let unit_ns = r.u64("unit")?;
        if unit_ns == 0 {
            return Err(r.invalid("a timestamp unit of 0 ns"));
        }
        let base_ns = r.u64("base")?;
        let first_ns = r.u64("first timestamp")?;
        let last_ns = r.u64("last timestamp")?;
        if last_ns < first_ns {
            return Err(r.invalid(format!("last timestamp {last_ns} before first {first_ns}")));
        }
        let packets = r.u64("packets")?;
        if bc != count_bits(packets, n) {
            return Err(r.invalid(format!(
                "packet counters of {bc} bits, but {packets} packets in {n} counters are stored in {}",
                count_bits(packets, n)
            )));
        }
        let sum = r.u64("sum")? as u128 | (r.u64("sum")? as u128) << 64;
        let early = r.u64("early")?;
        let ts = unpack(&mut r, n, b, |r| r.u64("escaped counter"))?;
        let counts = unpack(&mut r, n, bc, |r| Ok(r.u32("escaped count")? as u64))?;
        r.finish("epoch")?;
        // the counters must add up to the header's totals
        let total: u128 = ts.iter().map(|&v| v as u128).sum();
        let total_c: u64 = counts.iter().sum();
        if total != sum || total_c != packets {
            return Err(DecodeError::Invalid {
                offset: HEADER_BYTES,
                what: format!(
                    "counters add up to {total} and {total_c} packets, the header says {sum} and {packets}"
                ),
            });
        }
        Ok(Epoch {
            seq,
            vector,
            vectors,
            probability,
            seed,
            n,
            m,
            b,
            unit_ns,
            base_ns,
            first_ns,
            last_ns,
            packets,
            sum,
            early,
            ts,
            counts: counts.into_iter().map(|c| c as u32).collect(),
        })
    }

    /// Whether the epoch's time frame meets `[from, to]` (ns).
    pub fn overlaps(&self, from: u64, to: u64) -> bool {
        self.first_ns <= to && self.last_ns >= from
    }
}

/// Width of the stored packet counters of `packets` in `n` counters: twice the mean fits.
pub fn count_bits(packets: u64, n: u32) -> u8 {
    bits_for(2 * (packets / n.max(1) as u64) + 1).min(32)
}

/// Bytes of an epoch of these counters (`b`-bit timestamp counters).
pub fn encoded_len(b: u8, packets: u64, ts: &[u64], counts: &[u32]) -> usize {
    encoded_len_of(b, packets, ts.iter().copied().zip(counts.iter().copied()))
}

/// [`encoded_len`] of `(timestamp counter, packet counter)` pairs.
pub fn encoded_len_of(
    b: u8,
    packets: u64,
    cells: impl ExactSizeIterator<Item = (u64, u32)>,
) -> usize {
    let n = cells.len() as u32;
    let bc = count_bits(packets, n);
    let (top, top_c) = (escape(b), escape(bc));
    let (mut esc, mut esc_c) = (0, 0);
    for (t, c) in cells {
        esc += (t >= top) as usize;
        esc_c += (c as u64 >= top_c) as usize;
    }
    HEADER_BYTES + packed_len(n, b) + 4 + 12 * esc + packed_len(n, bc) + 4 + 8 * esc_c + 8
}

/// The all-ones value of `b` bits: the escape.
fn escape(b: u8) -> u64 {
    if b >= 64 { u64::MAX } else { (1u64 << b) - 1 }
}

fn packed_len(n: u32, b: u8) -> usize {
    (n as usize * b as usize).div_ceil(8)
}

fn pack(
    w: &mut WireWriter,
    values: impl Iterator<Item = u64> + Clone,
    b: u8,
    mut esc: impl FnMut(&mut WireWriter, u32, u64),
) {
    let top = escape(b);
    let (mut acc, mut have) = (0u128, 0u32);
    for v in values.clone() {
        acc |= (v.min(top) as u128) << have;
        have += b as u32;
        while have >= 8 {
            w.u8(acc as u8);
            acc >>= 8;
            have -= 8;
        }
    }
    if have > 0 {
        w.u8(acc as u8);
    }
    let escaped: Vec<(u32, u64)> = values
        .enumerate()
        .filter(|&(_, v)| v >= top)
        .map(|(i, v)| (i as u32, v))
        .collect();
    w.u32(escaped.len() as u32);
    for (i, v) in escaped {
        esc(w, i, v);
    }
}

fn unpack(
    r: &mut WireReader,
    n: u32,
    b: u8,
    mut esc: impl FnMut(&mut WireReader) -> Result<u64, DecodeError>,
) -> Result<Vec<u64>, DecodeError> {
    let bytes = r.take(packed_len(n, b), "packed counters")?;
    let top = escape(b);
    let mut out = Vec::with_capacity(n as usize);
    let (mut acc, mut have, mut k) = (0u128, 0u32, 0usize);
    while out.len() < n as usize {
        while have < b as u32 {
            acc |= (bytes[k] as u128) << have;
            k += 1;
            have += 8;
        }
        out.push((acc as u64) & top);
        acc >>= b;
        have -= b as u32;
    }
    // one encoding per epoch: the padding of the last byte is zero
    if acc != 0 {
        return Err(r.invalid("non-zero padding after the packed counters"));
    }
    let e = r.u32("escapes")?;
    let need = out.iter().filter(|&&v| v == top).count();
    if e as usize != need {
        return Err(r.invalid(format!("{e} escaped counters listed, {need} marked")));
    }
    let mut last = None;
    for _ in 0..e {
        let i = r.u32("escape index")?;
        let v = esc(r)?;
        if i >= n || last.is_some_and(|l| i <= l) || out[i as usize] != top || v < top {
            return Err(r.invalid(format!("escape of counter {i} (value {v}) is not valid")));
        }
        last = Some(i);
        out[i as usize] = v;
    }
    Ok(out)
}
