//! The counter epoch (COLATE §1.4, §3.1): one counter vector dumped to permanent storage, with
//! everything a query needs to read it on its own — its time frame (first and last packet),
//! the base and unit its timestamps are relative to, the mapping (`n`, `m`, seed), and the
//! vector's sampling probability and packet counter (§1.4 "Packet Losses").
//!
//! # Layout (`CLE3` and `CLE4`, fixed cells, little-endian)
//!
//! ```text
//! "CLE3" | u64 seq | u16 vector | u16 vectors | f64 probability | u64 seed
//! | u32 n | u32 m | u8 b | u8 bc | u64 unit_ns | u64 base_ns | u64 first_ns | u64 last_ns
//! | u64 packets | u64 sum low | u64 sum high | u64 early | u32 e | u32 ec
//! | u64 xxh3 of the header bytes before it
//! | ⌈n·(b + bc)/8⌉ bytes: n cells, each a b-bit timestamp counter then a bc-bit packet counter
//! | e × (u32 index, u64 value)     timestamp counters that did not fit, by index
//! | ec × (u32 index, u32 value)    packet counters that did not fit, by index
//! | u64 xxh3 of every byte before it
//! ```
//!
//! The tag names how flows' counters were placed ([`Placement`]): `CLE4` in one block,
//! `CLE3` anywhere (the paper's `H(f, j)`), both by owl's folded flow hash; `CLE2` anywhere by
//! the older xxh3 of the canonical key, with its packet counters' width by its own rule. All
//! three are read, and re-encoded as they were. `CLR3` and `CLR4` place counters as `CLE3` and
//! `CLE4` and share this header, but Rice-code the counters after it ([`super::coding`], whose
//! module doc gives that layout); `CLH3` and `CLH4` Huffman-code them in byte-aligned blocks
//! and `CLP3` and `CLP4` (the default since) in blocks packed bit by bit, with a packed index
//! ([`super::huffman`]).
//!
//! Cells are packed least significant bit first. A counter whose value does not fit
//! (`≥ 2^b − 1`) is written as all ones and its value in the list that follows — the paper's
//! split of a counter into SRAM low bits and DRAM high bits (§1.4, "Recording Phase"), stored:
//! the timestamp counters use the configured `b`; the packet counters the width `bc` that
//! holds twice the mean count.
//!
//! **Random access.** Every offset follows from the header: cell `i` is at bit `i·(b + bc)`
//! of the cells, and the escape lists are sorted by index. A query reads the header and the
//! `m` cells of its flow ([`EpochReader`], one read each, over any [`ReadAt`] — a byte slice,
//! or an SQLite blob in the epoch store), never the whole vector. The header has its own
//! checksum, so a torn or corrupted header is one clear error before any offset is trusted,
//! and every offset is checked against the epoch's length; the checksum of the whole epoch is
//! checked when it is decoded whole ([`Epoch::decode`]: `owl query --verify`, the synopsis
//! files of `owl compare`).

use std::ops::{Deref, DerefMut};

use xxhash_rust::xxh3::xxh3_64;

use crate::wire::{DecodeError, WireReader, WireWriter};

use super::cells::Cells;
use super::coding::{self, Coding};
use super::huffman;
use super::vector::{Mapping, Placement};

/// Tag of the epochs placed by [`Placement::Blocked`].
pub const TAG: &[u8; 4] = b"CLE4";
/// Tag of the epochs placed by [`Placement::Folded`] (the paper's `H(f, j)`, owl's flow hash;
/// the default).
pub const TAG_FOLDED: &[u8; 4] = b"CLE3";
/// Tag of the epochs placed by [`Placement::Canonical`] (owl before the folded flow hash).
pub const TAG_CANONICAL: &[u8; 4] = b"CLE2";
/// Tags of the Rice-coded epochs ([`Coding::Rice`]), placed by [`Placement::Folded`] and
/// [`Placement::Blocked`].
pub const TAG_RICE_FOLDED: &[u8; 4] = b"CLR3";
pub const TAG_RICE_BLOCKED: &[u8; 4] = b"CLR4";
/// Tags of the Huffman-coded epochs in byte-aligned blocks ([`Coding::Huffman`]), placed by
/// [`Placement::Folded`] and [`Placement::Blocked`].
pub const TAG_HUFFMAN_FOLDED: &[u8; 4] = b"CLH3";
pub const TAG_HUFFMAN_BLOCKED: &[u8; 4] = b"CLH4";
/// Tags of the Huffman-coded epochs with bit-packed blocks and a packed index
/// ([`Coding::Packed`], the default), placed by [`Placement::Folded`] and
/// [`Placement::Blocked`].
pub const TAG_PACKED_FOLDED: &[u8; 4] = b"CLP3";
pub const TAG_PACKED_BLOCKED: &[u8; 4] = b"CLP4";

fn tag_of(placement: Placement, coding: Coding) -> &'static [u8; 4] {
    match (placement, coding) {
        (Placement::Blocked, Coding::Fixed) => TAG,
        (Placement::Folded, Coding::Fixed) => TAG_FOLDED,
        (Placement::Canonical, _) => TAG_CANONICAL,
        (Placement::Folded, Coding::Rice) => TAG_RICE_FOLDED,
        (Placement::Blocked, Coding::Rice) => TAG_RICE_BLOCKED,
        (Placement::Folded, Coding::Huffman) => TAG_HUFFMAN_FOLDED,
        (Placement::Blocked, Coding::Huffman) => TAG_HUFFMAN_BLOCKED,
        (Placement::Folded, Coding::Packed) => TAG_PACKED_FOLDED,
        (Placement::Blocked, Coding::Packed) => TAG_PACKED_BLOCKED,
    }
}
/// Bytes of the header, its checksum included.
pub const HEADER_BYTES: usize = 4 + 8 + 2 + 2 + 8 + 8 + 4 + 4 + 1 + 1 + 8 * 8 + 4 + 4 + 8;
/// Offset of the header's `bc` byte.
const BC_AT: usize = 4 + 8 + 2 + 2 + 8 + 8 + 4 + 4 + 1;
/// Most counters an epoch may have (2²⁸: a 256 M-counter vector is already absurd).
pub const MAX_COUNTERS: u32 = 1 << 28;

/// An epoch's counters in order, `(timestamp counter, packet counter)`, visited by a closure:
/// the packed cells in RAM ([`Cells`]) or decoded vectors. Internal iteration keeps an
/// encoder's pass over millions of cells one tight loop.
pub trait CellSource {
    /// Counters.
    fn count(&self) -> usize;
    /// Visit every counter in order.
    fn each(&self, f: impl FnMut(u64, u32));
    /// Counter `i`: `(timestamp counter, packet counter)`.
    fn cell_at(&self, i: usize) -> (u64, u32);
    /// [`each`](Self::each) with runs of zero counters: `f(t, c, 1)` is one counter and
    /// `f(0, 0, k)` stands for `k` zeros. RAM cells give each whole
    /// [`BLOCK_CELLS`](super::coding::BLOCK_CELLS)-aligned block of zeros as one run, so a
    /// sparse vector is coded at the cost of its blocks, not of its cells; by default, runs of 1.
    fn each_run(&self, mut f: impl FnMut(u64, u32, usize)) {
        self.each(|t, c| f(t, c, 1))
    }
}

/// Decoded counters: `(timestamp counters, packet counters)`.
pub struct Counters<'a>(pub &'a [u64], pub &'a [u32]);

impl CellSource for Counters<'_> {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn each(&self, mut f: impl FnMut(u64, u32)) {
        for (&t, &c) in self.0.iter().zip(self.1) {
            f(t, c)
        }
    }
    fn cell_at(&self, i: usize) -> (u64, u32) {
        (self.0[i], self.1[i])
    }
}

/// What an epoch says about itself: everything but its counters.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochHead {
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
    /// The flow hash its counters were placed by (from the tag).
    pub placement: Placement,
    /// How its counters are stored (from the tag; `CLE2` epochs are always fixed).
    pub coding: Coding,
}

impl EpochHead {
    /// Whether the counters are written entropy-coded in blocks (Rice or Huffman): asked
    /// for, and not `CLE2` (whose tag names fixed cells).
    pub fn block_coded(&self) -> bool {
        self.coding != Coding::Fixed && self.placement != Placement::Canonical
    }

    /// Whether the epoch's time frame meets `[from, to]` (ns).
    pub fn overlaps(&self, from: u64, to: u64) -> bool {
        self.first_ns <= to && self.last_ns >= from
    }
}

/// One dumped counter vector.
#[derive(Clone, Debug, PartialEq)]
pub struct Epoch {
    pub head: EpochHead,
    /// The timestamp counters.
    pub ts: Vec<u64>,
    /// The packet counters (same mapping): the flow's packet count `p_f` (§4.1) and the
    /// absolute time of a relative sum.
    pub counts: Vec<u32>,
}

impl Deref for Epoch {
    type Target = EpochHead;
    fn deref(&self) -> &EpochHead {
        &self.head
    }
}

impl DerefMut for Epoch {
    fn deref_mut(&mut self) -> &mut EpochHead {
        &mut self.head
    }
}

/// One epoch as a flow's query sees it: its head and the flow's `m` cells, `j` = 0..m.
///
/// Two of a flow's `j` may map to one counter (`H(f, j) = H(f, j')`: about `m²/2n` of the
/// flows under the paper's placement, 9 % under [`Placement::Blocked`], whose 20 counters lie
/// in 2 048). That counter holds both `j`'s packets, so it is read once, at its first `j`, and
/// the later `j` reads as an empty counter; `distinct` counts the counters read. Read twice,
/// its packets would weigh double in the flow's mean.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowEpoch {
    pub head: EpochHead,
    pub ts: Vec<u64>,
    pub counts: Vec<u32>,
    /// Distinct counters among the `m`.
    pub distinct: usize,
}

impl FlowEpoch {
    /// The cells read at counters `idx`, each counter once (type doc).
    fn read_once(
        head: EpochHead,
        idx: &[usize],
        mut ts: Vec<u64>,
        mut counts: Vec<u32>,
    ) -> FlowEpoch {
        let mut distinct = 0;
        for j in 0..idx.len() {
            if idx[..j].contains(&idx[j]) {
                ts[j] = 0;
                counts[j] = 0;
            } else {
                distinct += 1;
            }
        }
        FlowEpoch {
            head,
            ts,
            counts,
            distinct,
        }
    }
}

/// Width that holds `v`.
fn bits_for(v: u64) -> u8 {
    (64 - v.leading_zeros()).max(1) as u8
}

impl Epoch {
    /// Width of the stored packet counters ([`stored_count_bits`]).
    pub fn count_bits(&self) -> u8 {
        stored_count_bits(&self.head, &Counters(&self.ts, &self.counts))
    }

    /// Timestamp counters that did not fit in `b` bits (what the paper calls an overflow).
    pub fn overflows(&self) -> usize {
        let top = escape(self.b);
        self.ts.iter().filter(|&&v| v >= top).count()
    }

    /// Bytes [`encode`](Self::encode) writes.
    pub fn encoded_len(&self) -> usize {
        encoded_len(&self.head, &self.ts, &self.counts)
    }

    /// Stored bits per recorded packet.
    pub fn bits_per_packet(&self) -> f64 {
        self.encoded_len() as f64 * 8.0 / self.packets.max(1) as f64
    }

    /// The cells of a flow (`H(f, 0..m)` of `map`).
    pub fn flow(&self, map: &Mapping, flow_hash: u64) -> FlowEpoch {
        let n = self.n as usize;
        let idx: Vec<usize> = (0..map.m as usize)
            .map(|j| map.index(flow_hash, j, n))
            .collect();
        let (ts, counts) = idx.iter().map(|&i| (self.ts[i], self.counts[i])).unzip();
        FlowEpoch::read_once(self.head.clone(), &idx, ts, counts)
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_cells(&self.head, &Counters(&self.ts, &self.counts), out);
    }

    /// Decode one epoch (exactly `bytes`) whole, checking the tag, the header and whole
    /// checksums, every length against what is left before allocating, the escapes, and the
    /// counters against the totals.
    pub fn decode(bytes: &[u8]) -> Result<Epoch, DecodeError> {
        let layout = CellLayout::read(bytes)?;
        if bytes.len() < 8 {
            return Err(WireReader::new(bytes).invalid("epoch shorter than its checksum"));
        }
        let (body, tail) = bytes.split_at(bytes.len() - 8);
        let want = u64::from_le_bytes(tail.try_into().expect("8 bytes"));
        if xxh3_64(body) != want {
            return Err(DecodeError::Invalid {
                offset: body.len(),
                what: "epoch checksum does not match: the epoch is torn or corrupted".into(),
            });
        }
        if bytes.len() != layout.len() {
            return Err(DecodeError::Invalid {
                offset: HEADER_BYTES,
                what: format!(
                    "epoch of {} bytes, its header describes {}: torn or corrupted",
                    bytes.len(),
                    layout.len()
                ),
            });
        }
        let (ts, counts) = match layout.head.coding {
            Coding::Fixed => decode_fixed(&layout, body)?,
            Coding::Rice => coding::decode(
                &layout.head,
                layout.bc,
                &body[HEADER_BYTES..],
                layout.blocks_len(),
            )?,
            Coding::Huffman => {
                huffman::decode(&layout.head, &body[HEADER_BYTES..], huffman::Index::Bytes)?
            }
            Coding::Packed => {
                huffman::decode(&layout.head, &body[HEADER_BYTES..], huffman::Index::Packed)?
            }
        };
        let head = &layout.head;
        // the counters must add up to the header's totals
        let total: u128 = ts.iter().map(|&v| v as u128).sum();
        let total_c: u64 = counts.iter().map(|&c| c as u64).sum();
        if total != head.sum || total_c != head.packets {
            return Err(DecodeError::Invalid {
                offset: HEADER_BYTES,
                what: format!(
                    "counters add up to {total} and {total_c} packets, the header says {} and {}",
                    head.sum, head.packets
                ),
            });
        }
        Ok(Epoch {
            head: layout.head,
            ts,
            counts,
        })
    }
}

/// The fixed cells and escapes of an epoch (`body`: every byte before the whole checksum).
fn decode_fixed(layout: &CellLayout, body: &[u8]) -> Result<(Vec<u64>, Vec<u32>), DecodeError> {
    let mut r = WireReader::new(body);
    r.take(HEADER_BYTES, "epoch header")?;
    let head = &layout.head;
    let (n, b, bc) = (head.n as usize, head.b as u32, layout.bc as u32);
    let cells = r.take(Cells::packed_len(n, b + bc), "cells")?;
    let (top, top_c) = (escape(head.b), escape(layout.bc));
    let mut ts = Vec::with_capacity(n);
    let mut counts = Vec::with_capacity(n);
    let (mut acc, mut have, mut k) = (0u128, 0u32, 0usize);
    while ts.len() < n {
        while have < b + bc {
            acc |= (cells[k] as u128) << have;
            k += 1;
            have += 8;
        }
        ts.push(acc as u64 & top);
        counts.push((acc >> b) as u64 & top_c);
        acc >>= b + bc;
        have -= b + bc;
    }
    // one encoding per epoch: the padding of the last byte is zero
    if acc != 0 {
        return Err(r.invalid("non-zero padding after the cells"));
    }
    escapes(&mut r, &mut ts, layout.escapes, top, |r| {
        r.u64("escaped counter")
    })?;
    escapes(&mut r, &mut counts, layout.escapes_c, top_c, |r| {
        Ok(r.u32("escaped count")? as u64)
    })?;
    r.finish("epoch")?;
    let counts: Vec<u32> = counts.into_iter().map(|c| c as u32).collect();
    // one encoding per epoch: the packet counters' width is the one the writer chooses
    let chosen = stored_count_bits(head, &Counters(&ts, &counts));
    if bc as u8 != chosen {
        return Err(DecodeError::Invalid {
            offset: HEADER_BYTES,
            what: format!("packet counters stored in {bc} bits where the writer chooses {chosen}"),
        });
    }
    Ok((ts, counts))
}

/// Encode an epoch of `head` whose `n` cells `(timestamp counter, packet counter)` come in
/// order (module doc: the layout; [`coding`] for Rice-coded epochs); the number of timestamp
/// counters that do not fit `b` bits (escaped, in fixed cells). Two passes: the packet
/// counters' width (or the Rice parameters), then the cells; the header's escape counts (or
/// the blocks' length) and checksum are written once the cells are.
pub fn encode_cells(head: &EpochHead, cells: &impl CellSource, out: &mut Vec<u8>) -> usize {
    debug_assert!(head.placement != Placement::Canonical || head.coding == Coding::Fixed);
    if !head.block_coded() {
        return encode_fixed(head, cells, out);
    }
    let start = out.len();
    if let Some(index) = match head.coding {
        Coding::Huffman => Some(huffman::Index::Bytes),
        Coding::Packed => Some(huffman::Index::Packed),
        _ => None,
    } {
        write_head(head, 0, out);
        let (len, overflows) = huffman::encode(head, cells, escape(head.b), out, index);
        seal_head(out, start, len as u32, (len >> 32) as u32);
        return overflows;
    }
    write_head(head, 0, out);
    let (count_k, len, overflows) = coding::encode(head, cells, escape(head.b), out);
    out[start + BC_AT] = count_k;
    seal_head(out, start, len as u32, (len >> 32) as u32);
    overflows
}

/// The header, its escape counts and checksum zero (patched by [`seal_head`]).
fn write_head(head: &EpochHead, bc: u8, out: &mut Vec<u8>) {
    let mut w = WireWriter::new(out);
    w.bytes(tag_of(head.placement, head.coding));
    w.u64(head.seq);
    w.u16(head.vector);
    w.u16(head.vectors);
    w.f64(head.probability);
    w.u64(head.seed);
    w.u32(head.n);
    w.u32(head.m);
    w.u8(head.b);
    w.u8(bc);
    w.u64(head.unit_ns);
    w.u64(head.base_ns);
    w.u64(head.first_ns);
    w.u64(head.last_ns);
    w.u64(head.packets);
    w.u64(head.sum as u64);
    w.u64((head.sum >> 64) as u64);
    w.u64(head.early);
    w.u32(0);
    w.u32(0);
    w.u64(0);
}

/// Patch the header's two escape fields and checksum, and append the whole checksum.
fn seal_head(out: &mut Vec<u8>, start: usize, e: u32, ec: u32) {
    let h = start + HEADER_BYTES - 16;
    out[h..h + 4].copy_from_slice(&e.to_le_bytes());
    out[h + 4..h + 8].copy_from_slice(&ec.to_le_bytes());
    let head_sum = xxh3_64(&out[start..h + 8]);
    out[h + 8..h + 16].copy_from_slice(&head_sum.to_le_bytes());
    let sum = xxh3_64(&out[start..]);
    out.extend_from_slice(&sum.to_le_bytes());
}

/// [`encode_cells`] in fixed cells.
fn encode_fixed(head: &EpochHead, cells: &impl CellSource, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    let bc = stored_count_bits(head, cells);
    let (top, top_c) = (escape(head.b), escape(bc));
    let (b, wbits) = (head.b as u32, head.b as u32 + bc as u32);
    out.reserve(HEADER_BYTES + Cells::packed_len(head.n as usize, wbits) + 8);
    write_head(head, bc, out);
    let (mut esc, mut esc_c) = (Vec::new(), Vec::new());
    // the cells, a 64-bit word at a time, into bytes made ready for them (the last word may
    // be partial: cut to the packed length after)
    let cells_at = out.len();
    let packed = Cells::packed_len(head.n as usize, wbits);
    out.resize(cells_at + packed.next_multiple_of(8) + 8, 0);
    let mut words = out[cells_at..].chunks_exact_mut(8);
    let mut put = |word: u64| {
        words
            .next()
            .expect("room for every word")
            .copy_from_slice(&word.to_le_bytes())
    };
    let (mut acc, mut have) = (0u128, 0u32);
    let mut i = 0u32;
    // the counters that do not fit, listed after the cells
    let mut escape = |t: u64, c: u32| {
        if t >= top {
            esc.push((i, t));
        }
        if c as u64 >= top_c {
            esc_c.push((i, c));
        }
        i += 1;
    };
    if wbits < 64 {
        // the common case (b + bc < 64): a 64-bit accumulator
        let mut acc64 = 0u64;
        cells.each(|t, c| {
            escape(t, c);
            let cell = t.min(top) | (c as u64).min(top_c) << b;
            acc64 |= cell << have;
            if have + wbits >= 64 {
                // have ≥ 1 here, so the shift is at most 63
                put(acc64);
                acc64 = cell >> (64 - have);
                have = have + wbits - 64;
            } else {
                have += wbits;
            }
        });
        acc = acc64 as u128;
    } else {
        cells.each(|t, c| {
            escape(t, c);
            // have < 64 here and a cell is at most 95 bits: what does not fit the 128-bit
            // accumulator (`lost`) goes in after the first flush
            let cell = (t.min(top) as u128) | ((c as u64).min(top_c) as u128) << b;
            let lost = if have + wbits > 128 {
                cell >> (128 - have)
            } else {
                0
            };
            acc |= cell << have;
            have += wbits;
            if have >= 64 {
                put(acc as u64);
                acc = (acc >> 64) | (lost << 64);
                have -= 64;
            }
            if have >= 64 {
                put(acc as u64);
                acc >>= 64;
                have -= 64;
            }
        });
    }
    // have < 64: the bits left, then the cut (the padding of the last byte is zero)
    if have > 0 {
        put(acc as u64);
    }
    out.truncate(cells_at + packed);
    let mut w = WireWriter::new(out);
    for &(i, v) in &esc {
        w.u32(i);
        w.u64(v);
    }
    for &(i, v) in &esc_c {
        w.u32(i);
        w.u32(v);
    }
    seal_head(out, start, esc.len() as u32, esc_c.len() as u32);
    esc.len()
}

/// An epoch as it is dumped and stored: its encoding, with its head and escape count at
/// hand. A recorder keeps what it dumped this way (a fifth of the decoded [`Epoch`]'s 12
/// bytes per counter), and a flow's query reads its cells in place.
#[derive(Clone, Debug, PartialEq)]
pub struct Sealed {
    pub head: EpochHead,
    pub bytes: Vec<u8>,
    /// Timestamp counters that did not fit `b` bits.
    pub overflows: usize,
}

impl Sealed {
    /// Check `bytes` whole (as [`Epoch::decode`]) and keep them.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Sealed, DecodeError> {
        let e = Epoch::decode(&bytes)?;
        Ok(Sealed {
            overflows: e.overflows(),
            head: e.head,
            bytes,
        })
    }

    /// The epoch decoded (bytes this type checked or encoded itself).
    pub fn decode(&self) -> Epoch {
        Epoch::decode(&self.bytes).expect("a sealed epoch decodes: owl encoded or checked it")
    }

    /// The epoch's cells, read in place.
    pub fn reader(&self) -> EpochReader<&[u8]> {
        EpochReader::open(&self.bytes[..]).expect("a sealed epoch's header reads")
    }
}

/// Replace the `top` values of `out` by the `e` escapes that follow, checking that each is
/// listed once, in order, and does not fit.
fn escapes(
    r: &mut WireReader,
    out: &mut [u64],
    e: u32,
    top: u64,
    mut value: impl FnMut(&mut WireReader) -> Result<u64, DecodeError>,
) -> Result<(), DecodeError> {
    let need = out.iter().filter(|&&v| v == top).count();
    if e as usize != need {
        return Err(r.invalid(format!("{e} escaped counters listed, {need} marked")));
    }
    let mut last = None;
    for _ in 0..e {
        let i = r.u32("escape index")?;
        let v = value(r)?;
        if i as usize >= out.len()
            || last.is_some_and(|l| i <= l)
            || out[i as usize] != top
            || v < top
        {
            return Err(r.invalid(format!("escape of counter {i} (value {v}) is not valid")));
        }
        last = Some(i);
        out[i as usize] = v;
    }
    Ok(())
}

/// Bytes at any offset of an epoch's encoding: a byte slice, or an SQLite blob.
pub trait ReadAt {
    /// Length of the epoch's encoding.
    fn size(&self) -> usize;
    /// Fill `buf` from `offset` (within [`size`](Self::size); the reader checks).
    fn read_at(&mut self, offset: usize, buf: &mut [u8]) -> Result<(), DecodeError>;
}

impl ReadAt for &[u8] {
    fn size(&self) -> usize {
        self.len()
    }
    fn read_at(&mut self, offset: usize, buf: &mut [u8]) -> Result<(), DecodeError> {
        let end = offset.checked_add(buf.len()).filter(|&e| e <= self.len());
        match end {
            Some(e) => {
                buf.copy_from_slice(&self[offset..e]);
                Ok(())
            }
            None => Err(DecodeError::Truncated {
                offset,
                what: "epoch bytes",
                needed: buf.len(),
                available: self.len().saturating_sub(offset),
            }),
        }
    }
}

/// Where everything is in an encoded epoch (read from its header).
#[derive(Clone, Debug)]
struct CellLayout {
    head: EpochHead,
    bc: u8,
    escapes: u32,
    escapes_c: u32,
}

impl CellLayout {
    /// Parse and check the header (tag, fields, its checksum) at the start of `h`.
    fn read(h: &[u8]) -> Result<CellLayout, DecodeError> {
        let mut r = WireReader::new(h);
        let (placement, coding) = match r.take(4, "epoch tag")? {
            t if t == TAG => (Placement::Blocked, Coding::Fixed),
            t if t == TAG_FOLDED => (Placement::Folded, Coding::Fixed),
            t if t == TAG_CANONICAL => (Placement::Canonical, Coding::Fixed),
            t if t == TAG_RICE_FOLDED => (Placement::Folded, Coding::Rice),
            t if t == TAG_RICE_BLOCKED => (Placement::Blocked, Coding::Rice),
            t if t == TAG_HUFFMAN_FOLDED => (Placement::Folded, Coding::Huffman),
            t if t == TAG_HUFFMAN_BLOCKED => (Placement::Blocked, Coding::Huffman),
            t if t == TAG_PACKED_FOLDED => (Placement::Folded, Coding::Packed),
            t if t == TAG_PACKED_BLOCKED => (Placement::Blocked, Coding::Packed),
            _ => {
                return Err(DecodeError::Invalid {
                    offset: 0,
                    what: "not a COLATE counter epoch (tag is none of CLP4, CLP3, CLH4, CLH3, CLR4, CLR3, \
                           CLE4, CLE3, CLE2)"
                        .into(),
                });
            }
        };
        let seq = r.u64("seq")?;
        let vector = r.u16("vector")?;
        let vectors = r.u16("vectors")?;
        let probability = r.f64("probability")?;
        let seed = r.u64("seed")?;
        let n = r.u32("n")?;
        let m = r.u32("m")?;
        let b = r.u8("b")?;
        let bc = r.u8("bc")?;
        let unit_ns = r.u64("unit")?;
        let base_ns = r.u64("base")?;
        let first_ns = r.u64("first timestamp")?;
        let last_ns = r.u64("last timestamp")?;
        let packets = r.u64("packets")?;
        let sum = r.u64("sum")? as u128 | (r.u64("sum")? as u128) << 64;
        let early = r.u64("early")?;
        let escapes = r.u32("escapes")?;
        let escapes_c = r.u32("count escapes")?;
        let at = r.offset();
        let want = r.u64("header checksum")?;
        if xxh3_64(&h[..at]) != want {
            return Err(DecodeError::Invalid {
                offset: at,
                what: "epoch header checksum does not match: the epoch is torn or corrupted".into(),
            });
        }
        let bad = |what: String| DecodeError::Invalid { offset: 0, what };
        if vectors == 0 || vector >= vectors {
            return Err(bad(format!("vector {vector} of {vectors}")));
        }
        if !(probability > 0.0 && probability <= 1.0) {
            return Err(bad(format!("sampling probability {probability}")));
        }
        if n == 0 || n > MAX_COUNTERS || m < 2 || m >= n || !m.is_multiple_of(2) {
            return Err(bad(format!(
                "n = {n}, m = {m}: need an even m ≥ 2 and m < n ≤ {MAX_COUNTERS}"
            )));
        }
        if !(1..=63).contains(&b) {
            return Err(bad(format!("counter width {b} bits")));
        }
        match coding {
            Coding::Fixed if !(1..=32).contains(&bc) => {
                return Err(bad(format!("packet counter width {bc} bits")));
            }
            Coding::Rice if bc > 63 => {
                return Err(bad(format!("packet counts' Rice parameter {bc}")));
            }
            Coding::Huffman | Coding::Packed if bc != 0 => {
                return Err(bad(format!(
                    "a count width of {bc} in a Huffman-coded epoch"
                )));
            }
            _ => {}
        }
        if unit_ns == 0 {
            return Err(bad("a timestamp unit of 0 ns".into()));
        }
        if last_ns < first_ns {
            return Err(bad(format!(
                "last timestamp {last_ns} before first {first_ns}"
            )));
        }
        if placement == Placement::Canonical && bc != count_bits_canonical(packets, n) {
            return Err(bad(format!(
                "packet counters of {bc} bits, but {packets} packets in {n} counters are stored in {}",
                count_bits_canonical(packets, n)
            )));
        }
        if coding == Coding::Fixed && (escapes > n || escapes_c > n) {
            return Err(bad(format!(
                "{escapes} and {escapes_c} escaped counters of {n}"
            )));
        }
        Ok(CellLayout {
            head: EpochHead {
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
                placement,
                coding,
            },
            bc,
            escapes,
            escapes_c,
        })
    }

    /// `b + bc`.
    fn width(&self) -> u32 {
        self.head.b as u32 + self.bc as u32
    }

    fn escapes_at(&self) -> usize {
        HEADER_BYTES + Cells::packed_len(self.head.n as usize, self.width())
    }

    fn escapes_c_at(&self) -> usize {
        self.escapes_at() + 12 * self.escapes as usize
    }

    /// Bytes of a Rice-coded epoch's blocks, or of everything after a Huffman-coded epoch's
    /// header (its header's two escape fields).
    fn blocks_len(&self) -> u64 {
        self.escapes as u64 | (self.escapes_c as u64) << 32
    }

    /// Bytes of the whole encoding (saturated: a hostile header describes no real length).
    fn len(&self) -> usize {
        match self.head.coding {
            Coding::Fixed => self.escapes_c_at() + 8 * self.escapes_c as usize + 8,
            Coding::Rice => usize::try_from(self.blocks_len())
                .ok()
                .and_then(|l| {
                    (HEADER_BYTES + coding::tables_len(self.head.n as usize) + 8).checked_add(l)
                })
                .unwrap_or(usize::MAX),
            Coding::Huffman | Coding::Packed => usize::try_from(self.blocks_len())
                .ok()
                .and_then(|l| (HEADER_BYTES + 8).checked_add(l))
                .unwrap_or(usize::MAX),
        }
    }
}

/// An encoded epoch read in place: its header, then any cell (module doc, "Random access").
pub struct EpochReader<R: ReadAt> {
    src: R,
    layout: CellLayout,
    /// What a block-coded epoch's cells need beside the header.
    index: Option<BlockIndex>,
    /// The bytes the opening read took after the header (from [`HEADER_BYTES`]): later reads
    /// that fall within them are served from them.
    ahead: Vec<u8>,
}

/// How a block-coded epoch's cells are coded.
enum BlockCodes {
    Rice(coding::Params),
    Huffman(Box<huffman::Codes>),
}

/// A block-coded epoch's codes, where its index and blocks are, the superblock starts read so
/// far, and a block's bytes.
struct BlockIndex {
    codes: BlockCodes,
    model: coding::Model,
    /// Offsets in the epoch of the superblock starts (u64 each), of the block starts (`entry`
    /// bytes each, relative to their superblock of `super_blocks`) and of the first block.
    supers_at: usize,
    table_at: usize,
    blocks_at: usize,
    entry: usize,
    super_blocks: usize,
    blocks_len: u64,
    max_block: u64,
    /// Superblock starts, `u64::MAX` until read.
    supers: Vec<u64>,
    block: Vec<u8>,
    /// The packed index (`CLP3`/`CLP4`; the fields above then unused): its widths and length,
    /// where its records are in the epoch, and the records whole when the opening read held them.
    packed: Option<(huffman::PackedIndex, usize, Vec<u8>)>,
}

/// Bytes read after a Huffman-coded epoch's header when it is opened (its tables and
/// superblock starts, when they fit: a 1 MiB plan's are about 2 KiB).
const HUFFMAN_AHEAD: usize = 4096;

/// Bytes read after a packed epoch's header when it is opened: its tables and packed index
/// when they fit (a 1 MiB plan's are 10–12 KiB in 1 ms units), and the blocks after them
/// within these bytes.
const PACKED_AHEAD: usize = 16384;

/// Blocks a flow's cells may span and still be read in one span (one flow's [`BLOCK`]
/// counters, `crate::colate::vector::BLOCK`, are 32 blocks).
const CONTIGUOUS_BLOCKS: usize = 48;

impl<R: ReadAt> EpochReader<R> {
    /// Read and check the header; the epoch's length must be the one its header implies.
    pub fn open(src: R) -> Result<EpochReader<R>, DecodeError> {
        EpochReader::open_ahead(src, PACKED_AHEAD)
    }

    /// [`open`](Self::open), reading `packed_ahead` bytes after a packed epoch's header at
    /// first (tests: 0 reads its index and blocks piece by piece, as a large vector's are).
    pub fn open_ahead(mut src: R, packed_ahead: usize) -> Result<EpochReader<R>, DecodeError> {
        let mut h = [0u8; HEADER_BYTES];
        if src.size() < HEADER_BYTES {
            return Err(DecodeError::Truncated {
                offset: 0,
                what: "epoch header",
                needed: HEADER_BYTES,
                available: src.size(),
            });
        }
        src.read_at(0, &mut h)?;
        let layout = CellLayout::read(&h)?;
        if layout.len() != src.size() {
            return Err(DecodeError::Invalid {
                offset: HEADER_BYTES,
                what: format!(
                    "epoch of {} bytes, its header describes {}: torn or corrupted",
                    src.size(),
                    layout.len()
                ),
            });
        }
        let n = layout.head.n as usize;
        let model = coding::Model::of(&layout.head);
        let mut ahead = Vec::new();
        let index = match layout.head.coding {
            Coding::Fixed => None,
            Coding::Rice => {
                let mut residual = [0u8; coding::GROUPS];
                src.read_at(HEADER_BYTES, &mut residual)?;
                if let Some(&k) = residual.iter().find(|&&k| k > 63) {
                    return Err(DecodeError::Invalid {
                        offset: HEADER_BYTES,
                        what: format!("a residual Rice parameter of {k}"),
                    });
                }
                let (k, s) = coding::blocks(n);
                let supers_at = HEADER_BYTES + coding::GROUPS;
                let table_at = supers_at + 8 * (s + 1);
                Some(BlockIndex {
                    codes: BlockCodes::Rice(coding::Params {
                        count: layout.bc,
                        residual,
                    }),
                    model,
                    supers_at,
                    table_at,
                    blocks_at: table_at + 4 * (k + 1),
                    entry: 4,
                    super_blocks: coding::SUPER_BLOCKS,
                    blocks_len: layout.blocks_len(),
                    max_block: coding::MAX_BLOCK_BYTES as u64,
                    supers: vec![u64::MAX; s + 1],
                    block: Vec::new(),
                    packed: None,
                })
            }
            Coding::Huffman => {
                // one read for the tables' length, the tables and (when they are small) the
                // superblock starts: a query opens every epoch, and each read of an SQLite
                // blob costs
                let want = (4 + HUFFMAN_AHEAD).min(src.size() - HEADER_BYTES);
                let mut buf = vec![0u8; want];
                src.read_at(HEADER_BYTES, &mut buf)?;
                let Some(t) = buf.get(..4) else {
                    return Err(DecodeError::Invalid {
                        offset: HEADER_BYTES,
                        what: "epoch shorter than its tables' length".into(),
                    });
                };
                let t_len = u32::from_le_bytes(t.try_into().expect("4 bytes"));
                let (index_at, blocks_at, blocks_len) =
                    huffman::body_parts(n, t_len, layout.blocks_len())?;
                let tables = match buf.get(4..index_at) {
                    Some(t) => huffman::Tables::read(t)?,
                    None => {
                        let mut t = vec![0u8; t_len as usize];
                        src.read_at(HEADER_BYTES + 4, &mut t)?;
                        huffman::Tables::read(&t)?
                    }
                };
                let (k, s) = huffman::blocks(n);
                let supers_at = HEADER_BYTES + index_at;
                let table_at = supers_at + 8 * (s + 1);
                debug_assert_eq!(table_at + 2 * (k + 1), HEADER_BYTES + blocks_at);
                let supers = match buf.get(index_at..index_at + 8 * (s + 1)) {
                    Some(b) => b
                        .chunks_exact(8)
                        .map(|e| {
                            u64::from_le_bytes(e.try_into().expect("8 bytes")).min(u64::MAX - 1)
                        })
                        .collect(),
                    None => vec![u64::MAX; s + 1],
                };
                ahead = buf;
                Some(BlockIndex {
                    codes: BlockCodes::Huffman(Box::new(huffman::Codes::of(tables))),
                    model,
                    supers_at,
                    table_at,
                    blocks_at: HEADER_BYTES + blocks_at,
                    entry: 2,
                    super_blocks: huffman::SUPER_BLOCKS,
                    blocks_len,
                    max_block: huffman::MAX_BLOCK_BYTES as u64,
                    supers,
                    block: Vec::new(),
                    packed: None,
                })
            }
            Coding::Packed => {
                // one read for the tables, the index and what fits of the blocks
                let want = packed_ahead.min(src.size() - HEADER_BYTES);
                ahead = vec![0u8; want];
                src.read_at(HEADER_BYTES, &mut ahead)?;
                let short = |what: &str| DecodeError::Invalid {
                    offset: HEADER_BYTES,
                    what: format!("epoch shorter than its {what}"),
                };
                let mut body =
                    |at: usize, len: usize, what: &str| -> Result<Vec<u8>, DecodeError> {
                        let end = at.checked_add(len).ok_or_else(|| short(what))?;
                        if let Some(b) = ahead.get(at..end) {
                            return Ok(b.to_vec());
                        }
                        if HEADER_BYTES + end > src.size() {
                            return Err(short(what));
                        }
                        let mut b = vec![0u8; len];
                        src.read_at(HEADER_BYTES + at, &mut b)?;
                        Ok(b)
                    };
                let t = body(0, 4, "tables' length")?;
                let t_len = u32::from_le_bytes(t[..4].try_into().expect("4 bytes"));
                let w = body(4usize.saturating_add(t_len as usize), 2, "block index")?;
                let (index_at, mut x, blocks_at) =
                    huffman::packed_parts(n, t_len, [w[0], w[1]], layout.blocks_len())?;
                let tables = huffman::Tables::read(&body(4, t_len as usize, "code tables")?)?;
                let end = x.end_bits();
                let records = if blocks_at <= ahead.len() {
                    ahead[index_at + 2..blocks_at].to_vec()
                } else {
                    Vec::new()
                };
                // the blocks' length: the index's last field
                let (a, b) = ((end - x.w1 as usize) / 8, end.div_ceil(8));
                let last = body(index_at + 2 + a, b - a, "block index")?;
                x.total = {
                    let mut r = coding::BitReader::new(&last);
                    r.skip(end - x.w1 as usize - a * 8, "the blocks' length")?;
                    r.bits(x.w1, "the blocks' length")?
                };
                let blocks_len = layout.blocks_len() - blocks_at as u64;
                if x.total.div_ceil(8) != blocks_len {
                    return Err(DecodeError::Invalid {
                        offset: HEADER_BYTES + index_at,
                        what: format!("blocks of {} bits in {blocks_len} bytes", x.total),
                    });
                }
                Some(BlockIndex {
                    codes: BlockCodes::Huffman(Box::new(huffman::Codes::of(tables))),
                    model,
                    supers_at: 0,
                    table_at: 0,
                    blocks_at: HEADER_BYTES + blocks_at,
                    entry: 0,
                    super_blocks: huffman::PACKED_SUPER,
                    blocks_len,
                    max_block: huffman::MAX_BLOCK_BYTES as u64,
                    supers: Vec::new(),
                    block: Vec::new(),
                    packed: Some((x, HEADER_BYTES + index_at + 2, records)),
                })
            }
        };
        Ok(EpochReader {
            src,
            layout,
            index,
            ahead,
        })
    }

    /// Bytes at `at` of the epoch: from what the opening read took when they are within it.
    fn read_at(&mut self, at: usize, buf: &mut [u8]) -> Result<(), DecodeError> {
        let from = at.wrapping_sub(HEADER_BYTES);
        if at >= HEADER_BYTES
            && let Some(b) = self.ahead.get(from..from.saturating_add(buf.len()))
        {
            buf.copy_from_slice(b);
            return Ok(());
        }
        self.src.read_at(at, buf)
    }

    pub fn head(&self) -> &EpochHead {
        &self.layout.head
    }

    /// Cell `i`: `(timestamp counter, packet counter)`.
    pub fn cell(&mut self, i: usize) -> Result<(u64, u32), DecodeError> {
        let l = &self.layout;
        if i >= l.head.n as usize {
            return Err(DecodeError::Invalid {
                offset: HEADER_BYTES,
                what: format!("cell {i} of {}", l.head.n),
            });
        }
        if self.index.is_some() {
            return Ok(self.block_cells(&[i])?[0]);
        }
        let (b, w) = (l.head.b as u32, l.width());
        let bit = i * w as usize;
        let at = HEADER_BYTES + bit / 8;
        // the bytes holding the cell (at most 13 for 95 bits at a shift of 7)
        let len = ((bit % 8) + w as usize).div_ceil(8);
        let mut buf = [0u8; 16];
        self.src.read_at(at, &mut buf[..len])?;
        let cell = u128::from_le_bytes(buf) >> (bit % 8);
        let (top, top_c) = (escape(l.head.b), escape(l.bc));
        let mut ts = cell as u64 & top;
        let mut c = (cell >> b) as u64 & top_c;
        if ts == top {
            ts = self.escaped(i, l.escapes_at(), l.escapes, 12, top)?;
        }
        if c == top_c {
            let l = &self.layout;
            c = self.escaped(i, l.escapes_c_at(), l.escapes_c, 8, top_c)?;
        }
        Ok((ts, c as u32))
    }

    /// Absolute starts of blocks `lo..=hi` (bits from the first block), checked: in order,
    /// within the blocks, none longer than a block can be; one read of the entries (reading a
    /// 1 MiB plan's 27 KiB table whole per epoch made a day's query 1.4 times slower from
    /// SQLite blobs), none where the opening read took the packed index whole.
    fn block_starts(&mut self, lo: usize, hi: usize) -> Result<Vec<u64>, DecodeError> {
        let x = self
            .index
            .as_mut()
            .expect("a block-coded epoch has its index");
        if let Some((p, at, records)) = &x.packed {
            let bad = |what: String| DecodeError::Invalid { offset: *at, what };
            if !records.is_empty() {
                return p.starts(records, 0, lo, hi).map_err(bad);
            }
            let (a, b) = p.span(lo, hi);
            let (a, b) = (a / 8, b.div_ceil(8));
            let mut bytes = vec![0u8; b - a];
            let at = *at;
            let p = huffman::PackedIndex { ..*p };
            self.read_at(at + a, &mut bytes)?;
            return p
                .starts(&bytes, a * 8, lo, hi)
                .map_err(|what| DecodeError::Invalid { offset: at, what });
        }
        let e = x.entry;
        let (table_at, supers_at, super_blocks) = (x.table_at, x.supers_at, x.super_blocks);
        let mut rel = vec![0u8; e * (hi - lo + 1)];
        self.read_at(table_at + e * lo, &mut rel)?;
        let mut starts = Vec::with_capacity(hi - lo + 1);
        for (h, b) in rel.chunks_exact(e).enumerate() {
            let si = (lo + h) / super_blocks;
            let sup = self.index.as_ref().expect("index").supers[si];
            let sup = if sup == u64::MAX {
                let mut s = [0u8; 8];
                self.read_at(supers_at + 8 * si, &mut s)?;
                let v = u64::from_le_bytes(s).min(u64::MAX - 1);
                self.index.as_mut().expect("index").supers[si] = v;
                v
            } else {
                sup
            };
            let x = self.index.as_ref().expect("index");
            let r = if e == 4 {
                u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64
            } else {
                u16::from_le_bytes(b.try_into().expect("2 bytes")) as u64
            };
            let at = sup.saturating_add(r);
            let prev = starts.last().copied().unwrap_or(0) / 8;
            if at > x.blocks_len || (h > 0 && (at < prev || at - prev > x.max_block)) {
                return Err(DecodeError::Invalid {
                    offset: x.table_at + e * (lo + h),
                    what: format!("block {} starts at {at}: torn or corrupted", lo + h),
                });
            }
            starts.push(at * 8);
        }
        Ok(starts)
    }

    /// Cells `idx` of a block-coded epoch, each block read and decoded once up to the last
    /// cell asked of it: blocks close together (one flow's in [`Placement::Blocked`]) in one
    /// read, others one read each.
    fn block_cells(&mut self, idx: &[usize]) -> Result<Vec<(u64, u32)>, DecodeError> {
        let n = self.layout.head.n as usize;
        if let Some(&i) = idx.iter().find(|&&i| i >= n) {
            return Err(DecodeError::Invalid {
                offset: HEADER_BYTES,
                what: format!("cell {i} of {n}"),
            });
        }
        let mut order: Vec<usize> = (0..idx.len()).collect();
        order.sort_unstable_by_key(|&j| idx[j]);
        let mut out = vec![(0u64, 0u32); idx.len()];
        let Some(&first) = order.first() else {
            return Ok(out);
        };
        // an index entry finds a unit of blocks (one, or a packed index's PACKED_UNIT)
        let unit = match self.index.as_ref().expect("index").packed {
            Some(_) => huffman::PACKED_UNIT,
            None => 1,
        };
        let per = coding::BLOCK_CELLS * unit;
        let bk = |i: usize| i / per;
        let (lo, hi) = (bk(idx[first]), bk(idx[order[order.len() - 1]]));
        // the units' bytes: one span, or unit by unit
        let spans: Vec<(usize, usize)> = if hi - lo < CONTIGUOUS_BLOCKS.div_ceil(unit) {
            vec![(lo, hi)]
        } else {
            let mut b: Vec<usize> = order.iter().map(|&j| bk(idx[j])).collect();
            b.dedup();
            b.into_iter().map(|b| (b, b)).collect()
        };
        let mut next = 0usize;
        let mut block = std::mem::take(
            &mut self
                .index
                .as_mut()
                .expect("a block-coded epoch has its index")
                .block,
        );
        for (a, b) in spans {
            // bits from the first block
            let starts = self.block_starts(a, b + 1)?;
            let blocks_at = self.index.as_ref().expect("index").blocks_at;
            let base = (starts[0] / 8) as usize;
            // 16 bytes of zeros after the span: the bit reader looks ahead a word
            let len = starts[b + 1 - a].div_ceil(8) as usize - base;
            block.clear();
            block.resize(len + 16, 0);
            self.read_at(blocks_at + base, &mut block[..len])?;
            let x = self.index.as_ref().expect("index");
            while next < order.len() && bk(idx[order[next]]) <= b {
                let u = bk(idx[order[next]]);
                let (from, to) = (
                    starts[u - a] - base as u64 * 8,
                    starts[u + 1 - a] - base as u64 * 8,
                );
                let mut r = coding::BitReader::window_bits(&block, from as usize, to as usize);
                // the block being read, the next cell of it, where the reader is within it
                let mut first = u * per;
                let mut at = first;
                let mut state = huffman::RunState::default();
                while next < order.len() && bk(idx[order[next]]) == u {
                    let (j, i) = (order[next], idx[order[next]]);
                    if i < at {
                        // the same cell asked twice
                        out[j] = out[order[next - 1]];
                        next += 1;
                        continue;
                    }
                    // past the blocks before the cell's, within the unit
                    while i >= first + coding::BLOCK_CELLS {
                        let block_len = coding::BLOCK_CELLS.min(n - first);
                        if let BlockCodes::Huffman(c) = &x.codes
                            && at < first + block_len
                        {
                            c.cell_after(
                                &mut r,
                                &x.model,
                                &mut state,
                                first + block_len - at - 1,
                                block_len,
                            )?;
                        }
                        first += coding::BLOCK_CELLS;
                        at = first;
                        state = huffman::RunState::default();
                    }
                    let block_len = coding::BLOCK_CELLS.min(n - first);
                    out[j] = match &x.codes {
                        BlockCodes::Rice(p) => r.cell_after(i - at, &x.model, p)?,
                        BlockCodes::Huffman(c) => {
                            c.cell_after(&mut r, &x.model, &mut state, i - at, block_len)?
                        }
                    };
                    at = i + 1;
                    next += 1;
                }
            }
        }
        self.index.as_mut().expect("index").block = block;
        Ok(out)
    }

    /// The value of escaped counter `i`, by binary search of its escape list (`k` entries of
    /// `size` bytes at `at`).
    fn escaped(
        &mut self,
        i: usize,
        at: usize,
        k: u32,
        size: usize,
        top: u64,
    ) -> Result<u64, DecodeError> {
        let (mut lo, mut hi) = (0usize, k as usize);
        let mut e = [0u8; 12];
        while lo < hi {
            let mid = (lo + hi) / 2;
            self.src.read_at(at + mid * size, &mut e[..size])?;
            let idx = u32::from_le_bytes(e[..4].try_into().expect("4 bytes")) as usize;
            if idx == i {
                let v = if size == 12 {
                    u64::from_le_bytes(e[4..12].try_into().expect("8 bytes"))
                } else {
                    u32::from_le_bytes(e[4..8].try_into().expect("4 bytes")) as u64
                };
                if v < top {
                    break;
                }
                return Ok(v);
            }
            if idx < i {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Err(DecodeError::Invalid {
            offset: at,
            what: format!("counter {i} is marked escaped but its escape is missing or invalid"),
        })
    }

    /// The cells of a flow (`H(f, 0..m)` of `map`).
    pub fn flow(&mut self, map: &Mapping, flow_hash: u64) -> Result<FlowEpoch, DecodeError> {
        let n = self.layout.head.n as usize;
        let m = map.m as usize;
        let idx: Vec<usize> = (0..m).map(|j| map.index(flow_hash, j, n)).collect();
        let (mut ts, mut counts) = (Vec::with_capacity(m), Vec::with_capacity(m));
        if self.index.is_some() {
            (ts, counts) = self.block_cells(&idx)?.into_iter().unzip();
        } else {
            for &i in &idx {
                let (t, c) = self.cell(i)?;
                ts.push(t);
                counts.push(c);
            }
        }
        Ok(FlowEpoch::read_once(
            self.layout.head.clone(),
            &idx,
            ts,
            counts,
        ))
    }
}

/// Width of the stored packet counters of a `CLE2` epoch of `packets` in `n` counters: twice
/// the (truncated) mean fits. With a mean near 1.5 that is 2 bits, and a quarter of the
/// counters then escape at 64 bits each; `CLE3` chooses by [`stored_count_bits`].
pub fn count_bits_canonical(packets: u64, n: u32) -> u8 {
    bits_for(2 * (packets / n.max(1) as u64) + 1).min(32)
}

/// Counters [`stored_count_bits`] reads: every `COUNT_STRIDE`-th.
pub const COUNT_STRIDE: usize = 8;

/// Width of the stored packet counters of an epoch of `head` with these counters: for `CLE3`,
/// the width `w` that makes the counters smallest — `w` bits a counter plus 64 bits per
/// counter that escapes (`c ≥ 2^w − 1`), over every [`COUNT_STRIDE`]-th counter (a size
/// choice, so a sample serves; the reader recomputes it from the same counters), the narrowest
/// on a tie; for `CLE2`, [`count_bits_canonical`].
pub fn stored_count_bits(head: &EpochHead, cells: &impl CellSource) -> u8 {
    if head.placement == Placement::Canonical {
        return count_bits_canonical(head.packets, head.n);
    }
    // counters by bit length of c + 1: c escapes at width w when that length exceeds w
    let mut len = [0u64; 34];
    let n = cells.count();
    for i in (0..n).step_by(COUNT_STRIDE) {
        len[bits_for(cells.cell_at(i).1 as u64 + 1) as usize] += 1;
    }
    let read = n.div_ceil(COUNT_STRIDE) as u64;
    let mut escaped: u64 = len[2..].iter().sum();
    let (mut best, mut best_bits) = (1u8, u64::MAX);
    for w in 1..=32u8 {
        let bits = read * w as u64 + 64 * escaped;
        if bits < best_bits {
            (best, best_bits) = (w, bits);
        }
        escaped -= len[w as usize + 1];
    }
    best
}

/// Bytes of an epoch of `head` with these counters.
pub fn encoded_len(head: &EpochHead, ts: &[u64], counts: &[u32]) -> usize {
    encoded_len_of(head, &Counters(ts, counts))
}

/// [`encoded_len`] of any counters.
pub fn encoded_len_of(head: &EpochHead, cells: &impl CellSource) -> usize {
    if head.block_coded() {
        let mut out = Vec::new();
        encode_cells(head, cells, &mut out);
        return out.len();
    }
    let n = cells.count();
    let bc = stored_count_bits(head, cells);
    let (top, top_c) = (escape(head.b), escape(bc));
    let (mut esc, mut esc_c) = (0, 0);
    cells.each(|t, c| {
        esc += (t >= top) as usize;
        esc_c += (c as u64 >= top_c) as usize;
    });
    HEADER_BYTES + Cells::packed_len(n, head.b as u32 + bc as u32) + 12 * esc + 8 * esc_c + 8
}

/// The all-ones value of `b` bits: the escape.
fn escape(b: u8) -> u64 {
    if b >= 64 { u64::MAX } else { (1u64 << b) - 1 }
}
