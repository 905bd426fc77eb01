//! Canonical Huffman coding of an epoch's counters ([`Coding::Packed`](super::Coding), tags
//! `CLP3` and `CLP4`, owl's default, and [`Coding::Huffman`](super::Coding), tags `CLH3` and
//! `CLH4`, the default before it: the same codes, laid out in packed or byte-aligned blocks):
//! the cells of [`super::coding`]'s Rice code — a packet
//! count folded around the epoch's mean count, a timestamp counter's residual past `c·t̄` per
//! count group — each coded by a table built for this epoch, and runs of empty cells as one
//! code.
//!
//! # Why
//!
//! At 484 kpps in 1 ms units (`owl experiment colate-bits`) the Rice code of the packet counts
//! paid 0.065 bits a packet above their entropy (a Rice code is a geometric distribution's;
//! the counts are a Poisson's around their mean), and random access 0.028 (a u32 a block of 64
//! cells). In sparse vectors (µs units, 10 and 100 MiB) an empty cell cost 2 bits, one per
//! Rice code, where its entropy is a fraction of a bit.
//!
//! # The code
//!
//! A block's cells are **items**, each a Huffman code of the epoch's **count table**, then:
//! - a packet count `c ≥ 1`: its folded value `fold(c, λ)` ([`super::coding::fold`]) as a
//!   [`bucket`] symbol with [`COUNT_MANTISSA`] mantissa bits (raw bits after the code), then the
//!   timestamp counter's residual `zigzag(t − ⌊c·sum/packets⌋)` as a bucket symbol of the
//!   **residual table** of `c`'s count group (raw bits after), or that table's escape and the
//!   residual in 64 bits;
//! - an empty cell `(0, 0)`: the bucket of `fold(0, λ)`, nothing after;
//! - a run of `L ≥ 2` empty cells, within the block and as long as it goes (run class
//!   `⌊log₂ L⌋ − 1`, then `L − 2^(class+1)` in `class + 1` raw bits; a whole block is class 5
//!   with no bits);
//! - the count table's escape, then the count's bucket symbol in 10 bits: a count the table has
//!   no code for (its residual follows as above), or a cell with no packets whose timestamp
//!   counter is not 0 (what a recorder never writes), the counter in 64 bits.
//!
//! A bucket symbol is the value itself below `2^(M+1)`, and above it the value's bit length
//! and its `M` bits below the top one: the raw bits left are coded as they are. With
//! [`RESIDUAL_MANTISSA`] = 3 a residual of spread σ is coded within ~0.01 bit of its
//! entropy (a bucket is at most a sixteenth of its values' size), with a table of a few
//! dozen symbols.
//!
//! A residual table's escape is followed by the bucket symbol in 9 bits and its raw bits.
//!
//! Code lengths are at most [`MAX_LEN`]; codes are canonical (by length, then symbol), written
//! most significant bit first into the least-significant-first stream. The tables are built
//! from the cells of every [`TALLY_STRIDE`]-th block (every block up to [`SMALL`] cells),
//! read at random (a size choice, as the
//! Rice parameters': an eighth of a pass over the vector, where a full one would slow the
//! recorder's dumps), with each escape weighed as the symbols seen once (Good–Turing: the
//! unseen symbols' mass), and an empty cell and every run class given a code whether seen or
//! not. The tables are a function of the counters, so an epoch has one encoding, and the
//! decoder rebuilds them from the counters it decoded and compares.
//!
//! # Layout after the header (tags `CLH3`, `CLH4`)
//!
//! ```text
//! | u32 T: bytes of the tables
//! | T bytes: u64, a bit for each of the GROUPS count groups whose residual table is stored
//! |   (the others have only an escape, of no bits); the count table, then those residual
//! |   tables; a table is u16 h, then the code lengths of symbols 0..h, a nibble each (low
//! |   first; 0: no code, else the length + 1), padded to a byte; symbol 0 is the escape,
//! |   the count table's 1..=6 the run classes, then come the buckets
//! | (s + 1) × u64: superblock starts, bytes from the first block; the last is the blocks' length
//! | (k + 1) × u16: block starts, from their superblock's start (block i's is i/32)
//! | the blocks
//! ```
//!
//! with `k = ⌈n/64⌉` blocks and `s = ⌈k/32⌉` superblocks (a block is at most
//! [`MAX_BLOCK_BYTES`], so 31 of them fit a u16: 18 bits of index a block where the Rice
//! code spends 32). The header's two escape counts hold the bytes after the header (low,
//! high), its `bc` byte is 0.
//!
//! # Layout after the header (tags `CLP3`, `CLP4`: packed blocks)
//!
//! ```text
//! | u32 T, T bytes: the tables, as above
//! | u8 w1 | u8 w2
//! | s records, each: a unit's start (w1 bits, bits from the first block), then the 31 later
//! |   units' deviations from evenly spaced starts (w2 bits each, zigzag)
//! | the blocks' length in bits (w1 bits); zeros to a byte
//! | the blocks, one after the other bit by bit; zeros to a byte
//! ```
//!
//! An index entry finds a **unit** of [`PACKED_UNIT`] = 2 blocks (`u = ⌈k/2⌉` units, `s =
//! ⌈u/32⌉` superblocks of [`PACKED_SUPER`] units). Unit `j` of a superblock spanning bits
//! `a..e` with `q` units starts at `a + ⌊j·(e − a)/q⌋` plus its deviation; `w1` is the width
//! of the blocks' length and `w2` of the widest deviation, so an epoch has one encoding. A
//! block's items are those of the byte-aligned layout (a run never crosses a block); only where
//! a block starts changes: right after the one before, and found through its unit. Why: at
//! 484 kpps in 1 ms units the byte-aligned index (18 bits a block) and its padding (4 bits on
//! average) were 0.017 bits a packet. A packed record costs `w1/32 + w2·31/32` bits a unit
//! (~12 there, with `w2` = 11), and a query decodes on average half a block more to reach a
//! cell. A record is read whole for a unit's start, one read a counter; the whole index of a
//! 1 MiB plan (~9 KiB in 1 ms units) usually comes with the opening read.

use std::cell::OnceCell;

use crate::wire::DecodeError;

use super::coding::{BLOCK_CELLS, BitReader, BitWriter, GROUPS, Model, fold, group, unfold};
use super::epoch::{CellSource, EpochHead};

/// Most bits of a code.
pub const MAX_LEN: u32 = 14;
/// Mantissa bits of a residual's bucket.
pub const RESIDUAL_MANTISSA: u32 = 3;
/// Mantissa bits of a folded count's bucket.
pub const COUNT_MANTISSA: u32 = 4;
/// Blocks in a superblock.
pub const SUPER_BLOCKS: usize = 32;

/// How an epoch's blocks are laid out and found (module doc, "Layout").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Index {
    /// `CLH3`/`CLH4`: blocks start on a byte; u64 superblock starts, u16 block starts.
    Bytes,
    /// `CLP3`/`CLP4`: blocks follow each other bit by bit; a record per superblock of its
    /// start and its blocks' deviations from evenly spaced starts, in widths the epoch gives.
    Packed,
}

/// Blocks an entry of the packed index finds (a query decodes the first to reach a cell of
/// the second: the index costs half as much).
pub const PACKED_UNIT: usize = 2;
/// Entries (units of [`PACKED_UNIT`] blocks) in a superblock of the packed index.
pub const PACKED_SUPER: usize = 32;
/// Longest unit in bits.
const MAX_UNIT_BITS: u64 = PACKED_UNIT as u64 * MAX_BLOCK_BITS;
/// Longest block in bits (every cell escaped: [`MAX_BLOCK_BYTES`]).
pub const MAX_BLOCK_BITS: u64 = (BLOCK_CELLS * 136) as u64;
/// Widest field of the packed index: a start (an epoch of `MAX_COUNTERS` counters of 136 bits
/// is below 2^36 bits), a deviation (within a superblock, below 2^20).
pub const MAX_START_BITS: u32 = 40;
pub const MAX_DEVIATION_BITS: u32 = 24;
/// The tables are built from every `TALLY_STRIDE`-th block (every block of a vector of at
/// most [`SMALL`] cells).
pub const TALLY_STRIDE: usize = 8;
pub const SMALL: usize = 1 << 16;
/// Bits of an escaped symbol: a count's bucket, a residual's.
const COUNT_ESCAPE_BITS: u32 = 10;
const RESIDUAL_ESCAPE_BITS: u32 = 9;
/// Longest block: every cell an escaped count (14 + 10 + 29 bits) and an escaped residual
/// (14 + 9 + 60), 136 bits (an escaped cell with no packets is 14 + 10 + 64).
pub const MAX_BLOCK_BYTES: usize = (BLOCK_CELLS * 136).div_ceil(8);
const _: () = assert!((SUPER_BLOCKS - 1) * MAX_BLOCK_BYTES <= u16::MAX as usize);

/// The escape's symbol, in every table.
const ESC: usize = 0;
/// The count table's run classes: symbols `1..=RUNS`.
const RUNS: usize = 6;
/// The count table's first bucket symbol.
const COUNT_BASE: usize = 1 + RUNS;
/// The residual tables' first bucket symbol.
const RESIDUAL_BASE: usize = 1;

/// Bucket symbols of 64-bit values with `m` mantissa bits.
pub const fn buckets(m: u32) -> usize {
    (1 << (m + 1)) + (64 - m as usize - 1) * (1 << m)
}

const COUNT_SYMBOLS: usize = COUNT_BASE + buckets(COUNT_MANTISSA);
const RESIDUAL_SYMBOLS: usize = RESIDUAL_BASE + buckets(RESIDUAL_MANTISSA);
const _: () = assert!(buckets(COUNT_MANTISSA) <= 1 << COUNT_ESCAPE_BITS);
const _: () = assert!(buckets(RESIDUAL_MANTISSA) <= 1 << RESIDUAL_ESCAPE_BITS);

/// `v`'s bucket with `m` mantissa bits, and how many raw low bits follow its code.
#[inline(always)]
pub fn bucket(v: u64, m: u32) -> (usize, u32) {
    if v < 1 << (m + 1) {
        return (v as usize, 0);
    }
    let l = 64 - v.leading_zeros();
    let raw = l - 1 - m;
    let mant = (v >> raw) as usize & ((1 << m) - 1);
    ((1 << (m + 1)) + (l - m - 2) as usize * (1 << m) + mant, raw)
}

/// The smallest value of bucket `s` (`m` mantissa bits) and its raw bits.
#[inline(always)]
pub fn bucket_base(s: usize, m: u32) -> (u64, u32) {
    if s < 1 << (m + 1) {
        return (s as u64, 0);
    }
    let x = s - (1 << (m + 1));
    let (l, mant) = ((x >> m) as u32 + m + 2, (x & ((1 << m) - 1)) as u64);
    let raw = l - 1 - m;
    (((1 << m) | mant) << raw, raw)
}

/// Run class of `L ≥ 2` empty cells, and its raw bits.
#[inline]
fn run_class(len: usize) -> (usize, u32) {
    debug_assert!((2..=BLOCK_CELLS).contains(&len));
    if len == BLOCK_CELLS {
        return (RUNS - 1, 0);
    }
    let c = len.ilog2() as usize - 1;
    (c, c as u32 + 1)
}

fn zigzag(r: u64) -> u64 {
    let r = r as i64;
    ((r << 1) ^ (r >> 63)) as u64
}

fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// Symbol weights, to build the tables.
#[derive(Clone, Debug)]
pub struct Tally {
    count: Vec<u64>,
    /// Sampled residual symbols of each count group (empty until one is seen).
    residual: Vec<Vec<u32>>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            count: vec![0; COUNT_SYMBOLS],
            residual: vec![Vec::new(); GROUPS],
        }
    }

    #[inline]
    fn run(&mut self, model: &Model, len: usize) {
        match len {
            0 => {}
            1 => self.count[COUNT_BASE + bucket(fold(0, model.center), COUNT_MANTISSA).0] += 1,
            _ => self.count[1 + run_class(len).0] += 1,
        }
    }

    /// The cells of every [`TALLY_STRIDE`]-th block of `cells` (module doc: what is
    /// tallied): runs, counts and residuals of the same cells, read at random, so that
    /// choosing the tables costs an eighth of a pass.
    pub fn of(model: &Model, cells: &impl CellSource) -> Tally {
        let mut tally = Tally::new();
        let n = cells.count();
        // a small vector whole: its sample would be a handful of blocks
        let stride = if n <= SMALL { 1 } else { TALLY_STRIDE };
        for first in (0..n).step_by(BLOCK_CELLS * stride) {
            let mut run = 0usize;
            for i in first..(first + BLOCK_CELLS).min(n) {
                let (t, c) = cells.cell_at(i);
                if t == 0 && c == 0 {
                    run += 1;
                    continue;
                }
                tally.run(model, run);
                run = 0;
                let f = fold(c, model.center);
                tally.count[COUNT_BASE + bucket(f, COUNT_MANTISSA).0] += 1;
                if c == 0 {
                    continue;
                }
                let v = zigzag(t.wrapping_sub(model.predict(c)));
                let h = &mut tally.residual[group(c)];
                if h.is_empty() {
                    h.resize(RESIDUAL_SYMBOLS, 0);
                }
                h[RESIDUAL_BASE + bucket(v, RESIDUAL_MANTISSA).0] += 1;
            }
            tally.run(model, run);
        }
        tally
    }

    /// The tables' code lengths.
    pub fn tables(&self, model: &Model) -> Tables {
        let mut lens = Vec::with_capacity(1 + GROUPS);
        // every table has an escape (weighed as the symbols seen once: the unseen symbols'
        // mass, Good–Turing); an empty cell and every run always have a code
        let mut w = self.count.clone();
        w[ESC] = w.iter().filter(|&&x| x == 1).count().max(1) as u64;
        let zero = COUNT_BASE + bucket(fold(0, model.center), COUNT_MANTISSA).0;
        for s in (1..COUNT_BASE).chain([zero]) {
            w[s] = w[s].max(1);
        }
        lens.push(code_lengths(&w));
        for h in &self.residual {
            let mut w: Vec<u64> = h.iter().map(|&y| y as u64).collect();
            w.resize(RESIDUAL_SYMBOLS, 0);
            w[ESC] = h.iter().filter(|&&x| x == 1).count().max(1) as u64;
            lens.push(code_lengths(&w));
        }
        Tables { lens }
    }
}

/// Huffman code lengths of `weights` (at most [`MAX_LEN`]), as nibbles: 0 for no code (weight
/// 0), else the length + 1 (a lone symbol has length 0). Ties break by symbol; a tree deeper
/// than [`MAX_LEN`] is rebuilt from halved weights.
pub fn code_lengths(weights: &[u64]) -> Vec<u8> {
    let mut w: Vec<(u64, usize)> = weights
        .iter()
        .enumerate()
        .filter(|x| *x.1 > 0)
        .map(|(s, &x)| (x, s))
        .collect();
    let hi = w.last().map_or(0, |x| x.1 + 1);
    let mut out = vec![0u8; hi];
    if w.is_empty() {
        return out;
    }
    if w.len() == 1 {
        out[w[0].1] = 1;
        return out;
    }
    loop {
        w.sort_unstable();
        let depth = huffman_depths(&w.iter().map(|x| x.0).collect::<Vec<_>>());
        if depth.iter().all(|&d| d <= MAX_LEN) {
            for (&(_, s), &d) in w.iter().zip(&depth) {
                out[s] = d as u8 + 1;
            }
            return out;
        }
        for x in &mut w {
            x.0 = x.0.div_ceil(2);
        }
    }
}

/// Depths of the leaves of a Huffman tree of `w` (ascending, two or more): the two-queue
/// construction, leaves before internal nodes on a tie.
fn huffman_depths(w: &[u64]) -> Vec<u32> {
    let k = w.len();
    // nodes 0..k are the leaves, k.. the internal ones in order of creation
    let mut weight: Vec<u64> = w.to_vec();
    let mut parent = vec![usize::MAX; 2 * k - 1];
    let (mut leaf, mut inner) = (0usize, k);
    let pick = |weight: &Vec<u64>, leaf: &mut usize, inner: &mut usize| {
        if *leaf < k && (*inner >= weight.len() || weight[*leaf] <= weight[*inner]) {
            *leaf += 1;
            *leaf - 1
        } else {
            *inner += 1;
            *inner - 1
        }
    };
    for _ in 0..k - 1 {
        let a = pick(&weight, &mut leaf, &mut inner);
        let b = pick(&weight, &mut leaf, &mut inner);
        let p = weight.len();
        weight.push(weight[a] + weight[b]);
        parent[a] = p;
        parent[b] = p;
    }
    let mut depth = vec![0u32; 2 * k - 1];
    for i in (0..2 * k - 2).rev() {
        depth[i] = depth[parent[i]] + 1;
    }
    depth.truncate(k);
    depth
}

/// The code lengths of an epoch's tables: the count table, then each count group's residuals'.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tables {
    pub lens: Vec<Vec<u8>>,
}

impl Tables {
    /// `u64` mask of the residual tables stored (the others are a lone escape); then each
    /// table stored, the count table first: `u16 h`, the nibbles of symbols `0..h`, padded to
    /// a byte. (No offset of a first symbol: an offset one bit off would shift a whole
    /// group's residuals by a bucket, which a small group's sum may not catch.)
    fn write(&self, out: &mut Vec<u8>) {
        let lone: &[u8] = &[1];
        let mut mask = 0u64;
        for (g, l) in self.lens[1..].iter().enumerate() {
            mask |= ((l.as_slice() != lone) as u64) << g;
        }
        out.extend_from_slice(&mask.to_le_bytes());
        for (t, l) in self.lens.iter().enumerate() {
            if t > 0 && mask >> (t - 1) & 1 == 0 {
                continue;
            }
            out.extend_from_slice(&(l.len() as u16).to_le_bytes());
            for p in l.chunks(2) {
                out.push(p[0] | p.get(1).copied().unwrap_or(0) << 4);
            }
        }
    }

    /// Parse the tables, exactly `b`: each in canonical form (its last symbol coded, padding
    /// zero, no symbol past its alphabet, a lone escape not stored) and complete (Kraft's sum
    /// is 1).
    pub fn read(b: &[u8]) -> Result<Tables, DecodeError> {
        let bad = |offset: usize, what: String| DecodeError::Invalid { offset, what };
        let Some(m) = b.get(..8) else {
            return Err(bad(0, "code tables cut short".into()));
        };
        let mask = u64::from_le_bytes(m.try_into().expect("8 bytes"));
        let mut lens = Vec::with_capacity(1 + GROUPS);
        let mut at = 8usize;
        for t in 0..1 + GROUPS {
            if t > 0 && mask >> (t - 1) & 1 == 0 {
                lens.push(vec![1]);
                continue;
            }
            let Some(h) = b.get(at..at + 2) else {
                return Err(bad(at, "code tables cut short".into()));
            };
            let h = u16::from_le_bytes([h[0], h[1]]) as usize;
            let symbols = if t == 0 {
                COUNT_SYMBOLS
            } else {
                RESIDUAL_SYMBOLS
            };
            at += 2;
            let bytes = h.div_ceil(2);
            let Some(x) = b.get(at..at + bytes) else {
                return Err(bad(at, "code tables cut short".into()));
            };
            let l: Vec<u8> = (0..h).map(|s| x[s / 2] >> (4 * (s % 2)) & 15).collect();
            if h > symbols
                || (h > 0 && l[h - 1] == 0)
                || (h % 2 == 1 && x[bytes - 1] >> 4 != 0)
                || (t > 0 && l == [1])
            {
                return Err(bad(at, format!("code table {t} is not in canonical form")));
            }
            at += bytes;
            check_kraft(&l).map_err(|what| bad(at, format!("code table {t}: {what}")))?;
            lens.push(l);
        }
        if at != b.len() {
            return Err(bad(at, "bytes after the code tables".into()));
        }
        Ok(Tables { lens })
    }
}

/// A table's lengths make a complete prefix code (or a lone symbol of length 0, or none).
fn check_kraft(l: &[u8]) -> Result<(), String> {
    let mut coded = l.iter().copied().filter(|&x| x > 0);
    match (coded.next(), coded.next()) {
        (None, _) | (Some(1), None) => return Ok(()),
        _ => {}
    }
    let mut sum = 0u64;
    for x in l.iter().copied().filter(|&x| x > 0) {
        if x < 2 || x as u32 > MAX_LEN + 1 {
            return Err(format!("a code of {} bits", x as i32 - 1));
        }
        sum += 1 << (MAX_LEN + 1 - x as u32);
    }
    if sum != 1 << MAX_LEN {
        return Err("its codes are not a complete prefix code".into());
    }
    Ok(())
}

/// A table to encode with: each symbol's code, bit-reversed for the stream, and its length
/// (`u8::MAX`: no code).
struct Encoder {
    code: Vec<(u16, u8)>,
}

/// A table to decode with (canonical decoding: codes of each length are consecutive).
#[derive(Clone, Debug)]
pub struct Decoder {
    /// `limit[l]`: the first `MAX_LEN`-bit window past the codes of `l` bits or fewer.
    limit: [u32; MAX_LEN as usize + 1],
    /// `first[l] - offset[l]`, with codes of `l` bits `first[l]..`, symbols `offset[l]..` in
    /// `symbols`, kept as one difference per length.
    base: [i32; MAX_LEN as usize + 1],
    min_len: u32,
    symbols: Vec<u16>,
    /// A lone symbol (length 0), or none at all.
    lone: Option<u16>,
    empty: bool,
    /// The symbol and length of the code each window of [`LUT_BITS`] bits starts with (the
    /// stream's order: least significant first), `symbol << 4 | length`; 0 where the code is
    /// longer.
    lut: Vec<u16>,
}

/// Bits a decoder's lookup table resolves at once.
const LUT_BITS: u32 = 9;
const _: () = assert!(COUNT_SYMBOLS < 1 << 12 && RESIDUAL_SYMBOLS < 1 << 12);

/// Canonical codes of `lens` (nibbles), as `(code, length)` per symbol.
fn canonical(lens: &[u8]) -> (Vec<(u32, u32)>, [u32; MAX_LEN as usize + 1]) {
    let mut count = [0u32; MAX_LEN as usize + 1];
    for &x in lens {
        if x > 1 {
            count[x as usize - 1] += 1;
        }
    }
    let mut first = [0u32; MAX_LEN as usize + 1];
    let mut code = 0u32;
    for l in 1..=MAX_LEN as usize {
        code = (code + count[l - 1]) << 1;
        first[l] = code;
    }
    let mut next = first;
    let codes = lens
        .iter()
        .map(|&x| {
            if x > 1 {
                let l = x as usize - 1;
                next[l] += 1;
                (next[l] - 1, l as u32)
            } else {
                (0, 0)
            }
        })
        .collect();
    (codes, first)
}

impl Encoder {
    fn new(lens: &[u8], symbols: usize) -> Encoder {
        let (codes, _) = canonical(lens);
        let mut code = vec![(0u16, u8::MAX); symbols];
        for (s, (&x, &(c, l))) in lens.iter().zip(&codes).enumerate() {
            if x > 0 {
                let rev = if l == 0 {
                    0
                } else {
                    (c as u16).reverse_bits() >> (16 - l)
                };
                code[s] = (rev, l as u8);
            }
        }
        Encoder { code }
    }

    #[inline(always)]
    fn has(&self, s: usize) -> bool {
        self.code[s].1 != u8::MAX
    }

    #[inline(always)]
    fn put(&self, w: &mut BitWriter, s: usize) {
        let (c, l) = self.code[s];
        debug_assert!(l != u8::MAX, "symbol {s} has a code");
        w.put(c as u64, l as u32);
    }

    /// Symbol `s`'s code, then the low `raw` bits of `v` (`raw` < 64), in one write where
    /// they fit a word.
    #[inline(always)]
    fn put_raw(&self, w: &mut BitWriter, s: usize, v: u64, raw: u32) {
        let (c, l) = self.code[s];
        debug_assert!(l != u8::MAX, "symbol {s} has a code");
        let low = v & ((1u64 << raw) - 1);
        if l as u32 + raw <= 64 {
            w.put(c as u64 | low << l, l as u32 + raw);
        } else {
            w.put(c as u64, l as u32);
            w.put(low, raw);
        }
    }
}

impl Decoder {
    pub fn new(lens: &[u8]) -> Decoder {
        let mut count = [0u32; MAX_LEN as usize + 2];
        let mut last = 0usize;
        for (s, &x) in lens.iter().enumerate() {
            if x > 0 {
                count[x as usize - 1] += 1;
                last = s;
            }
        }
        let coded: u32 = count.iter().sum();
        let mut d = Decoder {
            limit: [0; MAX_LEN as usize + 1],
            base: [0; MAX_LEN as usize + 1],
            min_len: MAX_LEN,
            symbols: Vec::new(),
            lone: None,
            empty: coded == 0,
            lut: Vec::new(),
        };
        if coded == 1 && lens[last] == 1 {
            d.lone = Some(last as u16);
            return d;
        }
        count[0] = 0;
        // canonical codes: those of each length consecutive, from `first`
        let mut first = [0u32; MAX_LEN as usize + 1];
        let mut code = 0u32;
        for l in 1..=MAX_LEN as usize {
            code = (code + count[l - 1]) << 1;
            first[l] = code;
        }
        // symbols by length, then symbol (a counting sort)
        let mut at = [0usize; MAX_LEN as usize + 2];
        for l in 1..=MAX_LEN as usize {
            at[l + 1] = at[l] + count[l] as usize;
        }
        d.symbols = vec![0u16; at[MAX_LEN as usize + 1]];
        d.lut = vec![0u16; 1 << LUT_BITS];
        let mut next = first;
        for (s, &x) in lens.iter().enumerate() {
            if x > 1 {
                let l = x as usize - 1;
                d.symbols[at[l]] = s as u16;
                at[l] += 1;
                // every window of LUT_BITS bits that starts with this code (reversed: codes
                // are read most significant bit first)
                if l <= LUT_BITS as usize {
                    let rev = (next[l] as u16).reverse_bits() as usize >> (16 - l);
                    for hi in 0..1usize << (LUT_BITS as usize - l) {
                        d.lut[rev | hi << l] = (s as u16) << 4 | l as u16;
                    }
                }
                next[l] += 1;
            }
        }
        let mut offset = 0i32;
        for l in 1..=MAX_LEN as usize {
            d.base[l] = first[l] as i32 - offset;
            offset += count[l] as i32;
            d.limit[l] = (first[l] + count[l]) << (MAX_LEN as usize - l);
            if count[l] > 0 && (l as u32) < d.min_len {
                d.min_len = l as u32;
            }
        }
        d
    }

    /// The next symbol.
    #[inline]
    fn symbol(&self, r: &mut BitReader, what: &str) -> Result<usize, DecodeError> {
        if let Some(s) = self.lone {
            return Ok(s as usize);
        }
        if self.empty {
            return Err(r.invalid(format!("{what} of a group the epoch has no code for")));
        }
        let w = r.peek();
        let e = self.lut[w as usize & ((1 << LUT_BITS) - 1)];
        if e != 0 {
            r.skip(e as usize & 15, what)?;
            return Ok(e as usize >> 4);
        }
        let win = ((w as u16).reverse_bits() >> (16 - MAX_LEN)) as u32;
        let mut l = self.min_len as usize;
        while win >= self.limit[l] {
            l += 1;
        }
        r.skip(l, what)?;
        let i = (win >> (MAX_LEN as usize - l)) as i32 - self.base[l];
        // a checked table is complete: every window is a code
        match self.symbols.get(i as usize) {
            Some(&s) => Ok(s as usize),
            None => Err(r.invalid(format!("{what}: no code"))),
        }
    }
}

/// The tables an epoch's blocks are read with.
#[derive(Clone, Debug)]
pub struct Codes {
    count: Decoder,
    /// Each count group's residual decoder, built when a cell of the group is first read (a
    /// query reads a few blocks of an epoch: building all 64 on opening it cost more than
    /// reading them).
    residual: Vec<OnceCell<Decoder>>,
    /// The code lengths (an escape is valid only where its value's bucket has no code).
    lens: Vec<Vec<u8>>,
}

impl Codes {
    pub fn new(t: &Tables) -> Codes {
        Codes::of(t.clone())
    }

    /// [`new`](Self::new), taking the tables.
    pub fn of(t: Tables) -> Codes {
        Codes {
            count: Decoder::new(&t.lens[0]),
            residual: (0..GROUPS).map(|_| OnceCell::new()).collect(),
            lens: t.lens,
        }
    }

    /// Whether table `t` (0: the counts', `1 + g`: group `g`'s residuals') codes `s`.
    #[inline]
    fn coded(&self, t: usize, s: usize) -> bool {
        self.lens[t].get(s).is_some_and(|&x| x > 0)
    }

    #[inline]
    fn residual(&self, g: usize) -> &Decoder {
        self.residual[g].get_or_init(|| Decoder::new(&self.lens[1 + g]))
    }

    /// The next item of a block whose `left` cells are still to come: `(timestamp counter,
    /// packet counter, cells)`, a run of empty cells as one item. `after_empty`: the item
    /// before was empty cells (a run is as long as it goes).
    #[inline]
    pub fn item(
        &self,
        r: &mut BitReader,
        model: &Model,
        left: usize,
        after_empty: bool,
    ) -> Result<(u64, u32, usize), DecodeError> {
        let mut s = self.count.symbol(r, "a packet count")?;
        let escaped = s == ESC;
        if escaped {
            s = COUNT_BASE + r.bits(COUNT_ESCAPE_BITS, "an escaped packet count")? as usize;
            if s >= COUNT_SYMBOLS {
                return Err(r.invalid(format!("count symbol {s} escaped")));
            }
        } else if s < COUNT_BASE {
            let class = s - 1;
            let (len, raw) = if class == RUNS - 1 {
                (BLOCK_CELLS, 0)
            } else {
                (2usize << class, class as u32 + 1)
            };
            let len = len + r.bits(raw, "a run of empty cells")? as usize;
            if after_empty || len > left {
                return Err(r.invalid(format!("a run of {len} empty cells where it cannot be")));
            }
            return Ok((0, 0, len));
        }
        let (base, raw) = bucket_base(s - COUNT_BASE, COUNT_MANTISSA);
        let v = base | r.bits(raw, "a packet count")?;
        let c = unfold(v, model.center)
            .ok_or_else(|| r.invalid(format!("packet count code {v} is no count")))?;
        if c == 0 {
            // an empty cell has a code; escaped, a cell with no packets and a timestamp
            if !escaped {
                if after_empty {
                    return Err(r.invalid("an empty cell where it cannot be".into()));
                }
                return Ok((0, 0, 1));
            }
            let t = r.bits(64, "an escaped counter")?;
            if t == 0 {
                return Err(r.invalid("an empty cell escaped".into()));
            }
            return Ok((t, 0, 1));
        }
        if escaped && self.coded(0, s) {
            return Err(r.invalid(format!("packet count {c} escaped where it has a code")));
        }
        let g = group(c);
        let mut rs = self.residual(g).symbol(r, "a timestamp counter")?;
        if rs == ESC {
            rs = RESIDUAL_BASE + r.bits(RESIDUAL_ESCAPE_BITS, "an escaped residual")? as usize;
            if rs >= RESIDUAL_SYMBOLS || self.coded(1 + g, rs) {
                return Err(r.invalid(format!("residual symbol {rs} escaped")));
            }
        }
        let (base, raw) = bucket_base(rs - RESIDUAL_BASE, RESIDUAL_MANTISSA);
        let v = base | r.bits(raw, "a timestamp counter")?;
        Ok((model.predict(c).wrapping_add(unzigzag(v)), c, 1))
    }

    /// Cell `skip` cells on in a block whose first cell is `at` cells from the block's start
    /// and whose items are read from `r` (`state`: the run of empty cells the reader is in,
    /// cells left of it, and whether the item before was empty; updated).
    #[inline]
    pub fn cell_after(
        &self,
        r: &mut BitReader,
        model: &Model,
        state: &mut RunState,
        skip: usize,
        block_len: usize,
    ) -> Result<(u64, u32), DecodeError> {
        let mut skip = skip;
        loop {
            if state.run_left > 0 {
                if skip < state.run_left {
                    state.run_left -= skip + 1;
                    state.at += skip + 1;
                    return Ok((0, 0));
                }
                skip -= state.run_left;
                state.at += state.run_left;
                state.run_left = 0;
            }
            if state.at >= block_len {
                return Err(r.invalid("a cell past its block".into()));
            }
            let (t, c, len) = self.item(r, model, block_len - state.at, state.after_empty)?;
            state.after_empty = t == 0 && c == 0;
            if len > 1 {
                state.run_left = len;
                continue;
            }
            state.at += 1;
            if skip == 0 {
                return Ok((t, c));
            }
            skip -= 1;
        }
    }
}

/// Where a reader is within a block (see [`Codes::cell_after`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct RunState {
    pub at: usize,
    pub run_left: usize,
    pub after_empty: bool,
}

/// Blocks and superblocks of `n` cells.
pub fn blocks(n: usize) -> (usize, usize) {
    let k = n.div_ceil(BLOCK_CELLS);
    (k, k.div_ceil(SUPER_BLOCKS))
}

/// Bytes of the block index (superblock and block starts) of `n` cells.
pub fn index_len(n: usize) -> usize {
    let (k, s) = blocks(n);
    8 * (s + 1) + 2 * (k + 1)
}

/// Encode the cells after the header (module doc) with `index`'s layout; the bytes written and
/// the timestamp counters of `top` or more.
pub fn encode(
    head: &EpochHead,
    cells: &impl CellSource,
    top: u64,
    out: &mut Vec<u8>,
    index: Index,
) -> (u64, usize) {
    let model = Model::of(head);
    let n = cells.count();
    let tables = Tally::of(&model, cells).tables(&model);
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    tables.write(out);
    let t_len = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&t_len.to_le_bytes());
    let count = Encoder::new(&tables.lens[0], COUNT_SYMBOLS);
    let residual: Vec<Encoder> = tables.lens[1..]
        .iter()
        .map(|l| Encoder::new(l, RESIDUAL_SYMBOLS))
        .collect();
    let (k, _) = blocks(n);
    // the blocks apart, then the index before them: its size follows from the starts
    let mut blocks_b: Vec<u8> = Vec::with_capacity(k * 16);
    // block starts: bytes (Index::Bytes) or bits (Index::Packed) from the first block
    let mut starts: Vec<u64> = Vec::with_capacity(k + 1);
    let zero = COUNT_BASE + bucket(fold(0, model.center), COUNT_MANTISSA).0;
    let zero_raw = bucket(fold(0, model.center), COUNT_MANTISSA);
    let packed = index == Index::Packed;
    let mut w = BitWriter::new(&mut blocks_b);
    let mut run = 0usize;
    let flush = |w: &mut BitWriter, run: usize| match run {
        0 => {}
        1 => count.put_raw(w, zero, fold(0, model.center), zero_raw.1),
        _ => {
            let (class, raw) = run_class(run);
            count.put_raw(w, 1 + class, (run - (2 << class)) as u64, raw);
        }
    };
    let (mut i, mut overflows) = (0usize, 0usize);
    cells.each_run(|t, c, r| {
        if i.is_multiple_of(BLOCK_CELLS) {
            flush(&mut w, run);
            run = 0;
            if packed {
                if (i / BLOCK_CELLS).is_multiple_of(PACKED_UNIT) {
                    starts.push(w.bit_len());
                }
            } else {
                w.align();
                starts.push(w.len() as u64);
            }
        }
        if r > 1 || (t == 0 && c == 0) {
            run += r;
            i += r;
            return;
        }
        flush(&mut w, run);
        run = 0;
        overflows += (t >= top) as usize;
        i += 1;
        let f = fold(c, model.center);
        let (s, raw) = bucket(f, COUNT_MANTISSA);
        if c != 0 && count.has(COUNT_BASE + s) {
            count.put_raw(&mut w, COUNT_BASE + s, f, raw);
        } else {
            count.put(&mut w, ESC);
            w.put(s as u64, COUNT_ESCAPE_BITS);
            w.put(f & ((1u64 << raw) - 1), raw);
            if c == 0 {
                w.put(t, 64);
                return;
            }
        }
        let v = zigzag(t.wrapping_sub(model.predict(c)));
        let (s, raw) = bucket(v, RESIDUAL_MANTISSA);
        let e = &residual[group(c)];
        if e.has(RESIDUAL_BASE + s) {
            e.put_raw(&mut w, RESIDUAL_BASE + s, v, raw);
        } else {
            e.put(&mut w, ESC);
            w.put(s as u64, RESIDUAL_ESCAPE_BITS);
            w.put(v & ((1u64 << raw) - 1), raw);
        }
    });
    flush(&mut w, run);
    let end = w.bit_len();
    w.align();
    if packed {
        starts.push(end);
        write_packed_index(&starts, out);
    } else {
        starts.push(blocks_b.len() as u64);
        write_byte_index(&starts, out);
    }
    out.extend_from_slice(&blocks_b);
    ((out.len() - start) as u64, overflows)
}

/// The u64 superblock and u16 block starts of `CLH3`/`CLH4` (`k + 1` byte starts).
fn write_byte_index(starts: &[u64], out: &mut Vec<u8>) {
    let k = starts.len() - 1;
    let s = k.div_ceil(SUPER_BLOCKS);
    for si in 0..=s {
        out.extend_from_slice(&starts[(si * SUPER_BLOCKS).min(k)].to_le_bytes());
    }
    for (bi, &v) in starts.iter().enumerate() {
        let rel = v - starts[(bi / SUPER_BLOCKS * SUPER_BLOCKS).min(k)];
        out.extend_from_slice(&(rel as u16).to_le_bytes());
    }
}

/// Bits of `v`.
fn bit_width(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// Where block `j` of a superblock of `blocks` blocks spanning `a..e` bits would start were the
/// blocks of equal length.
#[inline]
fn evenly(a: u64, e: u64, j: usize, blocks: usize) -> u64 {
    a + ((e - a) as u128 * j as u128 / blocks as u128) as u64
}

/// The packed index of `CLP3`/`CLP4` (`k + 1` bit starts, the last the blocks' length): u8
/// `w1`, u8 `w2`, then per superblock its start in `w1` bits and each later block's deviation
/// from [`evenly`] spaced starts, zigzag, in `w2` bits (the last superblock's missing blocks
/// 0), then the blocks' length in `w1` bits; padded to a byte with zeros. `w1` is the length's
/// width, `w2` the widest deviation's: one encoding per epoch.
fn write_packed_index(starts: &[u64], out: &mut Vec<u8>) {
    let k = starts.len() - 1;
    let s = k.div_ceil(PACKED_SUPER);
    let total = starts[k];
    let dev = |bi: usize| -> u64 {
        let sb = bi / PACKED_SUPER;
        let (first, last) = (sb * PACKED_SUPER, ((sb + 1) * PACKED_SUPER).min(k));
        let want = evenly(starts[first], starts[last], bi - first, last - first);
        zigzag(starts[bi].wrapping_sub(want))
    };
    let w1 = bit_width(total);
    let w2 = (0..k)
        .filter(|bi| bi % PACKED_SUPER != 0)
        .map(|bi| bit_width(dev(bi)))
        .max()
        .unwrap_or(0);
    out.push(w1 as u8);
    out.push(w2 as u8);
    let mut w = BitWriter::new(out);
    for sb in 0..s {
        w.put(starts[sb * PACKED_SUPER], w1);
        for j in 1..PACKED_SUPER {
            let bi = sb * PACKED_SUPER + j;
            w.put(if bi < k { dev(bi) } else { 0 }, w2);
        }
    }
    w.put(total, w1);
    w.align();
}

/// Bytes of a packed index of `k` blocks with widths `w1`, `w2` (its two width bytes included).
pub fn packed_index_len(k: usize, w1: u32, w2: u32) -> usize {
    let s = k.div_ceil(PACKED_SUPER);
    2 + ((s + 1) * w1 as usize + s * (PACKED_SUPER - 1) * w2 as usize).div_ceil(8)
}

/// A packed index's unit starts (each unit [`PACKED_UNIT`] blocks), read from its records
/// (module doc).
pub struct PackedIndex {
    /// Units.
    pub k: usize,
    pub w1: u32,
    pub w2: u32,
    /// The blocks' length in bits (the last field).
    pub total: u64,
}

impl PackedIndex {
    /// Bits of one superblock's record.
    pub fn record_bits(&self) -> usize {
        self.w1 as usize + (PACKED_SUPER - 1) * self.w2 as usize
    }

    /// Bit range of the records that give the starts of blocks `lo..=hi` (`hi ≤ k`): the
    /// records of their superblocks and the next superblock's start.
    pub fn span(&self, lo: usize, hi: usize) -> (usize, usize) {
        let r = self.record_bits();
        let (a, b) = (lo / PACKED_SUPER, hi / PACKED_SUPER);
        (a * r, ((b + 1) * r + self.w1 as usize).min(self.end_bits()))
    }

    /// Bits of all the records (the final length field included).
    pub fn end_bits(&self) -> usize {
        self.k.div_ceil(PACKED_SUPER) * self.record_bits() + self.w1 as usize
    }

    /// Starts of units `lo..=hi` in bits, checked (each within the blocks, in order, none
    /// longer than a unit can be); `bits` holds the records from bit `from` (a
    /// [`span`](Self::span)).
    pub fn starts(
        &self,
        bits: &[u8],
        from: usize,
        lo: usize,
        hi: usize,
    ) -> Result<Vec<u64>, String> {
        let r = self.record_bits();
        let field = |at: usize, w: u32| -> Result<u64, String> {
            if w == 0 {
                return Ok(0);
            }
            let at = at.checked_sub(from).ok_or("index field before its read")?;
            let mut x = [0u8; 16];
            let end = (at / 8 + 16).min(bits.len());
            let src = bits.get(at / 8..end).ok_or("index field past its read")?;
            x[..src.len()].copy_from_slice(src);
            let v = (u128::from_le_bytes(x) >> (at % 8)) as u64;
            Ok(if w == 64 { v } else { v & ((1u64 << w) - 1) })
        };
        let sb_start = |sb: usize| -> Result<u64, String> {
            if sb * PACKED_SUPER >= self.k {
                Ok(self.total)
            } else {
                field(sb * r, self.w1)
            }
        };
        let mut out: Vec<u64> = Vec::with_capacity(hi - lo + 1);
        for bi in lo..=hi {
            let (sb, j) = (bi / PACKED_SUPER, bi % PACKED_SUPER);
            let a = sb_start(sb)?;
            let at = if j == 0 || bi >= self.k {
                if bi >= self.k { self.total } else { a }
            } else {
                let last = ((sb + 1) * PACKED_SUPER).min(self.k);
                let e = sb_start(sb + 1)?;
                if e < a {
                    return Err(format!("superblock {sb} ends before it starts"));
                }
                let d = unzigzag(field(
                    sb * r + self.w1 as usize + (j - 1) * self.w2 as usize,
                    self.w2,
                )?);
                evenly(a, e, j, last - sb * PACKED_SUPER).wrapping_add(d)
            };
            if at > self.total {
                return Err(format!("unit {bi} starts at bit {at}, past the blocks"));
            }
            if let Some(&prev) = out.last()
                && (at < prev || at - prev > MAX_UNIT_BITS)
            {
                return Err(format!("unit {bi} starts at bit {at}, after one at {prev}"));
            }
            out.push(at);
        }
        Ok(out)
    }
}

/// Where the parts of a body of `len` bytes after the header are: the tables' bytes
/// (`4..4 + T`), the index's offset, the blocks' offset and length; checked against `len`.
pub fn body_parts(n: usize, t_len: u32, len: u64) -> Result<(usize, usize, u64), DecodeError> {
    let index_at = 4 + t_len as u64;
    let blocks_at = index_at + index_len(n) as u64;
    if blocks_at > len {
        return Err(DecodeError::Invalid {
            offset: 0,
            what: format!("code tables of {t_len} bytes and the block index outrun the epoch"),
        });
    }
    Ok((index_at as usize, blocks_at as usize, len - blocks_at))
}

/// Where a packed body's parts are (`body`: from the tables' length on): the index's offset
/// (its width bytes), its widths, the blocks' offset and length in bytes; checked.
pub fn packed_parts(
    n: usize,
    t_len: u32,
    head2: [u8; 2],
    len: u64,
) -> Result<(usize, PackedIndex, usize), DecodeError> {
    let bad = |what: String| DecodeError::Invalid { offset: 0, what };
    let (w1, w2) = (head2[0] as u32, head2[1] as u32);
    if w1 > MAX_START_BITS || w2 > MAX_DEVIATION_BITS {
        return Err(bad(format!("block index fields of {w1} and {w2} bits")));
    }
    let k = blocks(n).0.div_ceil(PACKED_UNIT);
    let index_at = 4 + t_len as u64;
    let blocks_at = index_at + packed_index_len(k, w1, w2) as u64;
    if blocks_at > len {
        return Err(bad(format!(
            "code tables of {t_len} bytes and the block index outrun the epoch"
        )));
    }
    let x = PackedIndex {
        k,
        w1,
        w2,
        total: 0,
    };
    Ok((index_at as usize, x, blocks_at as usize))
}

/// Decode the body after the header (exactly `body`) laid out as `index` says, checking the
/// tables, every start, every block's end and padding, and the tables against the ones the
/// writer builds.
pub fn decode(
    head: &EpochHead,
    body: &[u8],
    index: Index,
) -> Result<(Vec<u64>, Vec<u32>), DecodeError> {
    let n = head.n as usize;
    let bad = |offset: usize, what: String| DecodeError::Invalid { offset, what };
    let Some(t) = body.get(..4) else {
        return Err(bad(0, "epoch body shorter than its tables' length".into()));
    };
    let t_len = u32::from_le_bytes(t.try_into().expect("4 bytes"));
    let (k, s) = blocks(n);
    // (absolute starts of blocks 0..=k in bits of `blocks_b`, the blocks, where they are)
    let (tables_end, starts, blocks_b, blocks_at) = match index {
        Index::Bytes => {
            let (index_at, blocks_at, len) = body_parts(n, t_len, body.len() as u64)?;
            let u64_at = |i: usize| u64::from_le_bytes(body[i..i + 8].try_into().expect("8 bytes"));
            let u16_at = |i: usize| u16::from_le_bytes(body[i..i + 2].try_into().expect("2 bytes"));
            let supers: Vec<u64> = (0..=s).map(|i| u64_at(index_at + 8 * i)).collect();
            let table = index_at + 8 * (s + 1);
            let start =
                |bi: usize| supers[bi / SUPER_BLOCKS].saturating_add(u16_at(table + 2 * bi) as u64);
            if supers[0] != 0 || supers[s] != len {
                return Err(bad(
                    index_at,
                    "superblock table does not span the blocks".into(),
                ));
            }
            let mut starts = Vec::with_capacity(k + 1);
            for bi in 0..k {
                let (a, b) = (start(bi), start(bi + 1));
                if (bi % SUPER_BLOCKS == 0 && u16_at(table + 2 * bi) != 0)
                    || a > b
                    || b > len
                    || b - a > MAX_BLOCK_BYTES as u64
                {
                    return Err(bad(
                        table + 2 * bi,
                        format!("block {bi} starts at {a}, ends at {b}"),
                    ));
                }
                starts.push(a * 8);
            }
            if (k % SUPER_BLOCKS == 0 && u16_at(table + 2 * k) != 0) || start(k) != len {
                return Err(bad(
                    table + 2 * k,
                    "the block table's last entry is not the blocks' length".into(),
                ));
            }
            starts.push(len * 8);
            (index_at, starts, &body[blocks_at..], blocks_at)
        }
        Index::Packed => {
            let at = 4 + t_len as usize;
            let Some(w) = body.get(at..at + 2) else {
                return Err(bad(at, "epoch shorter than its block index".into()));
            };
            let (index_at, mut x, blocks_at) =
                packed_parts(n, t_len, [w[0], w[1]], body.len() as u64)?;
            let records = &body[index_at + 2..blocks_at];
            let end = x.end_bits();
            // the last field: the blocks' length, in bits
            x.total = {
                let mut r = BitReader::new(records);
                r.skip(end - x.w1 as usize, "the block index")?;
                r.bits(x.w1, "the blocks' length")?
            };
            let blocks_b = &body[blocks_at..];
            if x.total.div_ceil(8) != blocks_b.len() as u64 {
                return Err(bad(
                    index_at,
                    format!("blocks of {} bits in {} bytes", x.total, blocks_b.len()),
                ));
            }
            // one encoding: padding zero, widths the narrowest, the last superblock's missing
            // blocks 0, the first block at 0
            let pad_zero = |b: &[u8], bits: u64| {
                let rem = (bits % 8) as u32;
                rem == 0 || b[b.len() - 1] >> rem == 0
            };
            if !pad_zero(records, end as u64) || !pad_zero(blocks_b, x.total) {
                return Err(bad(
                    index_at,
                    "non-zero padding in the block index or blocks".into(),
                ));
            }
            if x.w1 != bit_width(x.total) {
                return Err(bad(
                    index_at,
                    format!("blocks' length {} in {} bits", x.total, x.w1),
                ));
            }
            let starts = x.starts(records, 0, 0, x.k).map_err(|e| bad(index_at, e))?;
            let r = x.record_bits();
            let mut widest = 0;
            let mut f = BitReader::new(records);
            for sb in 0..x.k.div_ceil(PACKED_SUPER) {
                f.skip(x.w1 as usize, "the block index")?;
                for j in 1..PACKED_SUPER {
                    let v = f.bits(x.w2, "the block index")?;
                    if sb * PACKED_SUPER + j >= x.k && v != 0 {
                        return Err(bad(
                            index_at,
                            format!("superblock {sb}: a block past the last"),
                        ));
                    }
                    widest = widest.max(bit_width(v));
                }
                debug_assert_eq!(f.bit_pos(), (sb + 1) * r);
            }
            if starts[0] != 0 || widest != x.w2 {
                return Err(bad(
                    index_at,
                    format!(
                        "block index of {}-bit deviations, the widest is {widest} bits",
                        x.w2
                    ),
                ));
            }
            (index_at, starts, blocks_b, blocks_at)
        }
    };
    let tables = Tables::read(&body[4..tables_end])?;
    let codes = Codes::new(&tables);
    let model = Model::of(head);
    let (mut ts, mut counts) = (Vec::with_capacity(n), Vec::with_capacity(n));
    // blocks an index entry finds
    let unit = match index {
        Index::Bytes => 1,
        Index::Packed => PACKED_UNIT,
    };
    let mut r = BitReader::new(blocks_b);
    for bi in 0..k {
        let (u, b) = (bi / unit, starts[bi / unit + 1] as usize);
        if bi % unit == 0 {
            r = BitReader::window_bits(blocks_b, starts[u] as usize, b);
        }
        let cells = BLOCK_CELLS.min(n - bi * BLOCK_CELLS);
        let (mut at, mut after_empty) = (0usize, false);
        while at < cells {
            let (t, c, len) = codes.item(&mut r, &model, cells - at, after_empty)?;
            after_empty = t == 0 && c == 0;
            for _ in 0..len {
                ts.push(t);
                counts.push(c);
            }
            at += len;
        }
        let ended = match index {
            Index::Bytes => r.at_end(),
            Index::Packed => (bi + 1) % unit != 0 && bi + 1 < k || r.at_bit_end(),
        };
        if !ended {
            return Err(bad(
                blocks_at + b / 8,
                format!("block {bi} does not end where its index says"),
            ));
        }
    }
    let want = Tally::of(&model, &super::epoch::Counters(&ts, &counts)).tables(&model);
    if want != tables {
        return Err(bad(
            4,
            "code tables are not the ones the writer builds for these counters".into(),
        ));
    }
    Ok((ts, counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_once() {
        for m in [RESIDUAL_MANTISSA, COUNT_MANTISSA] {
            let mut vals = vec![0u64, 1, 2, 15, 16, 17, 31, 32, 33, 1000, u64::MAX, 1 << 63];
            vals.extend((0..200).map(|i| (i * 7919) as u64));
            for v in vals {
                let (s, raw) = bucket(v, m);
                assert!(s < buckets(m), "{v}");
                let (base, raw2) = bucket_base(s, m);
                assert_eq!(raw, raw2);
                assert_eq!(base | (v & ((1u64 << raw) - 1)), v, "{v} m {m}");
            }
            assert_eq!(bucket(u64::MAX, m).0, buckets(m) - 1);
        }
    }

    #[test]
    fn code_lengths_are_complete_and_limited() {
        // a skewed distribution deeper than MAX_LEN
        let w: Vec<u64> = (0..40).map(|i| 1u64 << i.min(39)).collect();
        let l = code_lengths(&w);
        assert!(check_kraft(&l).is_ok());
        assert!(l.iter().all(|&x| x as u32 <= MAX_LEN + 1));
        assert_eq!(code_lengths(&[0, 5, 0]), vec![0, 1]);
        assert!(code_lengths(&[0, 0]).is_empty());
        // canonical codes decode to their symbols
        let w = [3u64, 0, 9, 1, 1, 40, 2, 7];
        let l = code_lengths(&w);
        let e = Encoder::new(&l, w.len());
        let d = Decoder::new(&l);
        let mut out = Vec::new();
        let mut bw = BitWriter::new(&mut out);
        let seq = [0usize, 2, 3, 4, 5, 6, 7, 5, 5, 0];
        for &s in &seq {
            e.put(&mut bw, s);
        }
        bw.align();
        let mut r = BitReader::new(&out);
        for &s in &seq {
            assert_eq!(d.symbol(&mut r, "s").unwrap(), s);
        }
    }
}
