//! How an epoch's counters are stored: in fixed-width cells (§1.4's SRAM low bits, with the
//! DRAM high bits as escapes: [`Coding::Fixed`]) or entropy-coded in blocks
//! ([`Coding::Rice`], owl's default until the Huffman code of [`super::huffman`], which keeps
//! this model and these blocks).
//!
//! # Why a code
//!
//! §1.4 sizes storage as `b` bits a counter. On the CHIC-like trace at the CAIDA link's
//! 484 kpps (`owl experiment colate-bits`) a 1 MiB vector in µs units is dumped every 0.57 s
//! with 0.62 packets a counter: four counters in five are zero, and a counter that took two
//! packets (or one of a heavy flow's) no longer fits 19 bits. Fixed cells then cost 46–51
//! bits a packet. In 1 ms units the vector holds 19.6 packets a counter for 18 s, and what a
//! counter carries is mostly predictable: `t ≈ c·t̄` (its packet count times the epoch's mean
//! timestamp, both in the header), with the rest a spread of about `√c` timestamps.
//!
//! # The code
//!
//! Each cell is two Rice codes, least significant bit first:
//! - its packet count `c`, folded around the epoch's mean count `λ = round(packets / n)`
//!   ([`fold`]: `λ, λ+1, λ−1, λ+2, …` get `0, 2, 1, 4, …`; past `2λ` the count itself), with one
//!   Rice parameter for the epoch;
//! - its timestamp counter's residual `t − ⌊c·sum/packets⌋`, zigzag-coded (wrapping, so every
//!   64-bit counter has one code), with a Rice parameter per **count group** (`c` below 32,
//!   then one group per power of two): the spread grows with `c`.
//!
//! A Rice code of `v` with parameter `k` is `q = v >> k` one-bits, a zero, then `v`'s low `k`
//! bits; from `q = 32` on it is 32 one-bits and `v` in 64 bits (an escape, as §1.4's DRAM). Each
//! parameter is the one that makes its codes smallest (priced from their sums by bit length,
//! over every [`TALLY_STRIDE`]-th cell), a function of the counters, so an epoch has one
//! encoding and the decoder checks it.
//!
//! # Random access
//!
//! Cells are coded in **blocks** of [`BLOCK_CELLS`], each starting on a byte. A table gives
//! every block's start (u32, relative to its superblock of [`SUPER_BLOCKS`] blocks) and a
//! smaller one every superblock's (u64). A query's cell costs two reads — the two table entries
//! around its block, then the block's bytes — and the decoding of the cells before it in the
//! block.
//!
//! # Layout after the header (tags `CLR3`, `CLR4`)
//!
//! ```text
//! | 64 bytes: the Rice parameter of each count group's residuals
//! | (s + 1) × u64: superblock starts, bytes from the first block; the last is the blocks' length
//! | (k + 1) × u32: block starts, from their superblock's start (block i's superblock is i/1024)
//! | the blocks
//! ```
//!
//! with `k = ⌈n/64⌉` blocks and `s = ⌈k/1024⌉` superblocks; the header's `bc` byte holds the
//! packet counts' Rice parameter and its two escape counts the blocks' length (low, high).

use crate::wire::DecodeError;

use super::epoch::{CellSource, EpochHead};

/// How an epoch's counters are stored (fixed by its tag).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Coding {
    /// `CLE2`–`CLE4`: `n` cells of `b + bc` bits, counters that do not fit listed after them
    /// (§1.4's SRAM/DRAM split; `colate:coding=fixed`).
    Fixed,
    /// `CLR3`, `CLR4`: Rice codes in blocks (module doc; `colate:coding=rice`).
    Rice,
    /// `CLH3`, `CLH4`: canonical Huffman codes in byte-aligned blocks, runs of empty cells as
    /// one code ([`super::huffman`]; `colate:coding=huffman`, the default before `Packed`).
    Huffman,
    /// `CLP3`, `CLP4`: the same Huffman codes in blocks packed bit by bit, found by a packed
    /// index of deviations from evenly spaced starts ([`super::huffman::Index::Packed`];
    /// `colate:coding=packed`, the default).
    #[default]
    Packed,
}

impl Coding {
    pub fn config_name(self) -> &'static str {
        match self {
            Coding::Fixed => "fixed",
            Coding::Rice => "rice",
            Coding::Huffman => "huffman",
            Coding::Packed => "packed",
        }
    }
}

impl std::str::FromStr for Coding {
    type Err = crate::method::MethodError;
    fn from_str(s: &str) -> Result<Coding, Self::Err> {
        match s.trim() {
            "fixed" => Ok(Coding::Fixed),
            "rice" => Ok(Coding::Rice),
            "huffman" => Ok(Coding::Huffman),
            "packed" => Ok(Coding::Packed),
            _ => Err(crate::method::MethodError::Invalid(format!(
                "colate: coding '{s}' is not packed, huffman, rice or fixed"
            ))),
        }
    }
}

/// Cells in a block.
pub const BLOCK_CELLS: usize = 64;
/// Blocks in a superblock.
pub const SUPER_BLOCKS: usize = 1024;
/// Count groups (each with its residuals' Rice parameter).
pub const GROUPS: usize = 64;
/// One-bits from which a Rice code is an escape.
const UNARY_CAP: u64 = 32;
/// The Rice parameters are chosen from every `TALLY_STRIDE`-th cell (a size choice: a sample
/// serves, and the decoder recomputes it from the same cells).
pub const TALLY_STRIDE: usize = 8;
/// Longest block: every cell two escapes of 96 bits.
pub const MAX_BLOCK_BYTES: usize = BLOCK_CELLS * 2 * 96 / 8;

/// Blocks and superblocks of `n` cells.
pub fn blocks(n: usize) -> (usize, usize) {
    let k = n.div_ceil(BLOCK_CELLS);
    (k, k.div_ceil(SUPER_BLOCKS))
}

/// Bytes of the tables (Rice parameters, superblock and block starts) of `n` cells.
pub fn tables_len(n: usize) -> usize {
    let (k, s) = blocks(n);
    GROUPS + 8 * (s + 1) + 4 * (k + 1)
}

/// Count group of a packet count: `c` below 32, then one per power of two.
pub fn group(c: u32) -> usize {
    if c < 32 {
        c as usize
    } else {
        (32 + c.ilog2() as usize - 5).min(GROUPS - 1)
    }
}

/// `c` folded around `l`: `l → 0`, `l+1 → 2`, `l−1 → 1`, …, and past `2l` the count itself.
pub fn fold(c: u32, l: u32) -> u64 {
    let (c, l) = (c as u64, l as u64);
    if c >= l {
        let d = c - l;
        if d <= l { 2 * d } else { c }
    } else {
        2 * (l - c) - 1
    }
}

/// Inverse of [`fold`]; `None` for a code no count has.
pub fn unfold(v: u64, l: u32) -> Option<u32> {
    let l = l as u64;
    let c = if v > 2 * l {
        v
    } else if v.is_multiple_of(2) {
        l + v / 2
    } else {
        l - v.div_ceil(2)
    };
    u32::try_from(c).ok()
}

fn zigzag(r: u64) -> u64 {
    let r = r as i64;
    ((r << 1) ^ (r >> 63)) as u64
}

fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// What the header gives the code: the mean count and the mean timestamp (32.32 fixed point).
#[derive(Clone, Copy, Debug)]
pub struct Model {
    /// `λ = round(packets / n)`.
    pub center: u32,
    mean_fx: u128,
}

impl Model {
    pub fn of(head: &EpochHead) -> Model {
        let n = head.n.max(1) as u64;
        let center = (head.packets.saturating_add(n / 2) / n).min(u32::MAX as u64) as u32;
        let mean_fx = match head.packets {
            0 => 0,
            p if head.sum >> 96 == 0 => (head.sum << 32) / p as u128,
            _ => u128::MAX >> 32,
        };
        Model { center, mean_fx }
    }

    /// `⌊c·sum/packets⌋` (32 fractional bits), saturated.
    pub fn predict(&self, c: u32) -> u64 {
        match u64::try_from(self.mean_fx) {
            // the common case: one 64 × 64-bit multiply
            Ok(m) => ((c as u128 * m as u128) >> 32).min(u64::MAX as u128) as u64,
            Err(_) => ((c as u128).saturating_mul(self.mean_fx) >> 32).min(u64::MAX as u128) as u64,
        }
    }

    /// The two codes of a cell.
    fn codes(&self, t: u64, c: u32) -> (u64, u64) {
        (
            fold(c, self.center),
            zigzag(t.wrapping_sub(self.predict(c))),
        )
    }
}

/// The Rice parameters: packet counts', and each count group's residuals'.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    pub count: u8,
    pub residual: [u8; GROUPS],
}

/// Codes of one kind by bit length: how many, and their sum — enough to price a Rice code of
/// every parameter.
#[derive(Clone, Debug)]
struct Lengths {
    count: [u64; 65],
    sum: [u128; 65],
}

impl Default for Lengths {
    fn default() -> Lengths {
        Lengths {
            count: [0; 65],
            sum: [0; 65],
        }
    }
}

impl Lengths {
    #[inline]
    fn add(&mut self, v: u64) {
        self.add_n(v, 1);
    }

    #[inline]
    fn add_n(&mut self, v: u64, k: u64) {
        let l = (64 - v.leading_zeros()) as usize;
        self.count[l] += k;
        self.sum[l] += v as u128 * k as u128;
    }

    /// The parameter whose codes are smallest, the smallest on a tie: bits of parameter `k`
    /// are `(v >> k) + 1 + k`, or 96 for an escape (`v >> k ≥ 32`: bit length past `k + 5`),
    /// with `Σ (v >> k)` priced as `(Σ v) >> k` within each bit length (a size choice: the
    /// decoder recomputes it from the same counters, so an epoch has one encoding).
    fn best(&self) -> u8 {
        let mut best = (0u8, u128::MAX);
        for k in 0..64u32 {
            let mut bits = 0u128;
            for l in 1..=64u32 {
                let (c, sum) = (self.count[l as usize] as u128, self.sum[l as usize]);
                if c == 0 {
                    continue;
                }
                bits += if l > k + 5 {
                    96 * c
                } else {
                    (sum >> k) + c * (1 + k as u128)
                };
            }
            bits += self.count[0] as u128 * (1 + k as u128);
            if bits < best.1 {
                best = (k as u8, bits);
            }
        }
        best.0
    }
}

/// Codes by kind and group, to choose [`Params`].
#[derive(Clone, Debug, Default)]
pub struct Tally {
    count: Lengths,
    residual: Vec<Lengths>,
}

impl Tally {
    pub fn new() -> Tally {
        Tally {
            count: Lengths::default(),
            residual: vec![Lengths::default(); GROUPS],
        }
    }

    #[inline]
    pub fn add(&mut self, model: &Model, t: u64, c: u32) {
        let (vc, vt) = model.codes(t, c);
        self.count.add(vc);
        self.residual[group(c)].add(vt);
    }

    /// [`add`](Self::add) of `k` zero cells.
    pub fn add_zeros(&mut self, model: &Model, k: usize) {
        let (vc, vt) = model.codes(0, 0);
        self.count.add_n(vc, k as u64);
        self.residual[group(0)].add_n(vt, k as u64);
    }

    pub fn params(&self) -> Params {
        let mut residual = [0u8; GROUPS];
        for (k, g) in residual.iter_mut().zip(&self.residual) {
            *k = g.best();
        }
        Params {
            count: self.count.best(),
            residual,
        }
    }
}

/// Bits into bytes, least significant first.
pub(super) struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    have: u32,
}

impl<'a> BitWriter<'a> {
    pub(super) fn new(out: &'a mut Vec<u8>) -> BitWriter<'a> {
        BitWriter {
            out,
            acc: 0,
            have: 0,
        }
    }

    /// Bytes written whole (all of them after [`align`](Self::align)).
    pub(super) fn len(&self) -> usize {
        self.out.len()
    }

    /// Bits written so far, the ones not yet flushed to a byte included.
    pub(super) fn bit_len(&self) -> u64 {
        self.out.len() as u64 * 8 + self.have as u64
    }

    /// The low `len` bits of `v` (`len` ≤ 64, `v` has no bits above them).
    #[inline(always)]
    pub(super) fn put(&mut self, v: u64, len: u32) {
        if len == 0 {
            return;
        }
        self.acc |= v << self.have;
        if self.have + len >= 64 {
            self.out.extend_from_slice(&self.acc.to_le_bytes());
            self.acc = if self.have == 0 {
                0
            } else {
                v >> (64 - self.have)
            };
            self.have = self.have + len - 64;
        } else {
            self.have += len;
        }
    }

    #[inline(always)]
    fn rice(&mut self, v: u64, k: u8) {
        let q = v >> k;
        if q < UNARY_CAP && q + 1 + k as u64 <= 64 {
            // q ones, a zero, the low k bits: one word
            let low = v & ((1u64 << k) - 1);
            let code = ((1u64 << q) - 1) | low << (q + 1);
            self.put(code, q as u32 + 1 + k as u32);
        } else if q < UNARY_CAP {
            self.put((1u64 << q) - 1, q as u32 + 1);
            self.put(v & ((1u64 << k) - 1), k as u32);
        } else {
            self.put(u32::MAX as u64, UNARY_CAP as u32);
            self.put(v, 64);
        }
    }

    /// Pad to a byte with zeros.
    pub(super) fn align(&mut self) {
        let bytes = self.have.div_ceil(8) as usize;
        self.out.extend_from_slice(&self.acc.to_le_bytes()[..bytes]);
        self.acc = 0;
        self.have = 0;
    }
}

/// Encode the cells after the header: tables then blocks (module doc); the packet counts' Rice
/// parameter and the blocks' length, for the header, and the timestamp counters of `top` or
/// more (those that do not fit `b` bits).
pub fn encode(
    head: &EpochHead,
    cells: &impl CellSource,
    top: u64,
    out: &mut Vec<u8>,
) -> (u8, u64, usize) {
    let model = Model::of(head);
    let n = cells.count();
    // every TALLY_STRIDE-th cell; a run of zeros (aligned to a block) holds run/TALLY_STRIDE
    let mut tally = Tally::new();
    let mut i = 0usize;
    cells.each_run(|t, c, run| {
        if run > 1 {
            tally.add_zeros(&model, run / TALLY_STRIDE);
        } else if i.is_multiple_of(TALLY_STRIDE) {
            tally.add(&model, t, c);
        }
        i += run;
    });
    let p = tally.params();
    let (k, s) = blocks(n);
    out.extend_from_slice(&p.residual);
    let supers_at = out.len();
    out.resize(supers_at + 8 * (s + 1) + 4 * (k + 1), 0);
    let blocks_at = out.len();
    let mut starts: Vec<u64> = Vec::with_capacity(k + 1);
    let mut w = BitWriter {
        out,
        acc: 0,
        have: 0,
    };
    // a block of zero cells codes to the same bytes wherever it is
    let zero_block = {
        let (vc, vt) = model.codes(0, 0);
        let mut bytes = Vec::new();
        let mut z = BitWriter {
            out: &mut bytes,
            acc: 0,
            have: 0,
        };
        for _ in 0..BLOCK_CELLS {
            z.rice(vc, p.count);
            z.rice(vt, p.residual[group(0)]);
        }
        z.align();
        bytes
    };
    let (mut i, mut overflows) = (0usize, 0usize);
    cells.each_run(|t, c, run| {
        if run > 1 {
            debug_assert!(run == BLOCK_CELLS && i.is_multiple_of(BLOCK_CELLS));
            w.align();
            starts.push((w.out.len() - blocks_at) as u64);
            w.out.extend_from_slice(&zero_block);
            i += run;
            return;
        }
        overflows += (t >= top) as usize;
        if i.is_multiple_of(BLOCK_CELLS) {
            w.align();
            starts.push((w.out.len() - blocks_at) as u64);
        }
        let (vc, vt) = model.codes(t, c);
        w.rice(vc, p.count);
        w.rice(vt, p.residual[group(c)]);
        i += 1;
    });
    w.align();
    let len = (out.len() - blocks_at) as u64;
    starts.push(len);
    // the tables
    for si in 0..=s {
        let v = starts[(si * SUPER_BLOCKS).min(k)];
        let at = supers_at + 8 * si;
        out[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    let blocks_table = supers_at + 8 * (s + 1);
    for (bi, &v) in starts.iter().enumerate() {
        let rel = v - starts[(bi / SUPER_BLOCKS * SUPER_BLOCKS).min(k)];
        let at = blocks_table + 4 * bi;
        // a superblock is at most 1 024 blocks of MAX_BLOCK_BYTES: 1.5 MiB
        out[at..at + 4].copy_from_slice(&(rel as u32).to_le_bytes());
    }
    (p.count, len, overflows)
}

/// Bits of a byte slice, least significant first, from bit `pos` to bit `end` (the bytes
/// after `end`, when there are, are only looked at, never read as codes).
pub struct BitReader<'a> {
    b: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> BitReader<'a> {
    pub fn new(b: &'a [u8]) -> BitReader<'a> {
        BitReader::window(b, 0, b.len())
    }

    /// Bytes `from..to` of `b`.
    pub fn window(b: &'a [u8], from: usize, to: usize) -> BitReader<'a> {
        debug_assert!(from <= to && to <= b.len());
        BitReader {
            b,
            pos: from * 8,
            end: to * 8,
        }
    }

    /// Bits `from..to` of `b` (the bit-packed blocks of `CLP3`/`CLP4`).
    pub fn window_bits(b: &'a [u8], from: usize, to: usize) -> BitReader<'a> {
        debug_assert!(from <= to && to <= b.len() * 8);
        BitReader {
            b,
            pos: from,
            end: to,
        }
    }

    /// Bits read from the start of the bytes.
    pub fn bit_pos(&self) -> usize {
        self.pos
    }

    /// Whether every bit of the window has been read (a bit-packed block's end).
    pub fn at_bit_end(&self) -> bool {
        self.pos == self.end
    }

    /// The next 64 bits (zeros past the end).
    #[inline]
    pub(super) fn peek(&self) -> u64 {
        let at = self.pos / 8;
        if let Some(w) = self.b.get(at..at + 16) {
            let w = u128::from_le_bytes(w.try_into().expect("16 bytes"));
            return (w >> (self.pos % 8)) as u64;
        }
        self.peek_tail(at)
    }

    #[cold]
    fn peek_tail(&self, at: usize) -> u64 {
        let mut w = [0u8; 16];
        let end = (at + 16).min(self.b.len());
        if at < end {
            w[..end - at].copy_from_slice(&self.b[at..end]);
        }
        (u128::from_le_bytes(w) >> (self.pos % 8)) as u64
    }

    pub(super) fn invalid(&self, what: String) -> DecodeError {
        DecodeError::Invalid {
            offset: self.pos / 8,
            what,
        }
    }

    /// Step over `len` bits (read with [`peek`](Self::peek)), within the window.
    #[inline]
    pub(super) fn skip(&mut self, len: usize, what: &str) -> Result<(), DecodeError> {
        if self.pos + len > self.end {
            return Err(self.short(what));
        }
        self.pos += len;
        Ok(())
    }

    /// The next `len` bits (`len` ≤ 64) as a number.
    #[inline]
    pub(super) fn bits(&mut self, len: u32, what: &str) -> Result<u64, DecodeError> {
        self.take(len, what)
    }

    fn short(&self, what: &str) -> DecodeError {
        DecodeError::Invalid {
            offset: self.pos / 8,
            what: format!("{what} runs past its block"),
        }
    }

    #[inline]
    fn take(&mut self, len: u32, what: &str) -> Result<u64, DecodeError> {
        if len == 0 {
            return Ok(0);
        }
        if self.pos + len as usize > self.end {
            return Err(self.short(what));
        }
        let v = self.peek();
        self.pos += len as usize;
        Ok(if len == 64 {
            v
        } else {
            v & ((1u64 << len) - 1)
        })
    }

    /// A Rice code of parameter `k`.
    #[inline]
    pub fn rice(&mut self, k: u8, what: &str) -> Result<u64, DecodeError> {
        let w = self.peek();
        let q = w.trailing_ones() as u64;
        let len = q as usize + 1 + k as usize;
        // the common case: the whole code in the bits at hand, within the block
        if q < UNARY_CAP && len <= 64 && self.pos + len <= self.end {
            self.pos += len;
            return Ok(q << k | (w >> (q + 1)) & ((1u64 << k) - 1));
        }
        self.rice_slow(k, q, what)
    }

    #[cold]
    fn rice_slow(&mut self, k: u8, q: u64, what: &str) -> Result<u64, DecodeError> {
        if q < UNARY_CAP {
            if self.pos + q as usize + 1 > self.end {
                return Err(self.short(what));
            }
            self.pos += q as usize + 1;
            let low = self.take(k as u32, what)?;
            if k > 63 || q > u64::MAX >> k {
                return Err(DecodeError::Invalid {
                    offset: self.pos / 8,
                    what: format!("{what} does not fit 64 bits"),
                });
            }
            Ok(q << k | low)
        } else {
            self.pos += UNARY_CAP as usize;
            let v = self.take(64, what)?;
            if v >> k < UNARY_CAP {
                return Err(DecodeError::Invalid {
                    offset: self.pos / 8,
                    what: format!("{what} {v} escaped where its short code fits"),
                });
            }
            Ok(v)
        }
    }

    /// The next cell: `(timestamp counter, packet counter)`.
    #[inline]
    pub fn cell(&mut self, model: &Model, p: &Params) -> Result<(u64, u32), DecodeError> {
        let vc = self.rice(p.count, "a packet count")?;
        let c = unfold(vc, model.center).ok_or_else(|| DecodeError::Invalid {
            offset: self.pos / 8,
            what: format!("packet count code {vc} is no count"),
        })?;
        let vt = self.rice(p.residual[group(c)], "a timestamp counter")?;
        Ok((model.predict(c).wrapping_add(unzigzag(vt)), c))
    }

    /// Cell `skip` cells on (the ones between are decoded and dropped).
    #[inline]
    pub fn cell_after(
        &mut self,
        skip: usize,
        model: &Model,
        p: &Params,
    ) -> Result<(u64, u32), DecodeError> {
        for _ in 0..skip {
            let vc = self.rice(p.count, "a packet count")?;
            let c = unfold(vc, model.center).ok_or_else(|| DecodeError::Invalid {
                offset: self.pos / 8,
                what: format!("packet count code {vc} is no count"),
            })?;
            self.rice(p.residual[group(c)], "a timestamp counter")?;
        }
        self.cell(model, p)
    }

    /// Whether only zero padding is left (the block's end).
    pub fn at_end(&self) -> bool {
        let left = self.end.saturating_sub(self.pos);
        left < 8 && self.peek() & ((1u64 << left) - 1) == 0
    }
}

/// Decode the tables and blocks of `n` cells (exactly `body`, whose blocks are `len` bytes),
/// checking every start, every block's end and padding, and the parameters against the ones
/// the writer chooses.
pub fn decode(
    head: &EpochHead,
    count_k: u8,
    body: &[u8],
    len: u64,
) -> Result<(Vec<u64>, Vec<u32>), DecodeError> {
    let n = head.n as usize;
    let (k, s) = blocks(n);
    let bad = |offset: usize, what: String| DecodeError::Invalid { offset, what };
    let tables = tables_len(n);
    if body.len() as u64 != tables as u64 + len {
        return Err(bad(0, "epoch length does not match its tables".into()));
    }
    let mut residual = [0u8; GROUPS];
    residual.copy_from_slice(&body[..GROUPS]);
    if let Some(&k) = residual.iter().find(|&&k| k > 63) {
        return Err(bad(0, format!("a residual Rice parameter of {k}")));
    }
    let p = Params {
        count: count_k,
        residual,
    };
    let u64_at = |i: usize| u64::from_le_bytes(body[i..i + 8].try_into().expect("8 bytes"));
    let u32_at = |i: usize| u32::from_le_bytes(body[i..i + 4].try_into().expect("4 bytes"));
    let supers: Vec<u64> = (0..=s).map(|i| u64_at(GROUPS + 8 * i)).collect();
    let table = GROUPS + 8 * (s + 1);
    let start = |bi: usize| supers[bi / SUPER_BLOCKS] + u32_at(table + 4 * bi) as u64;
    if supers[0] != 0 || supers[s] != len {
        return Err(bad(
            GROUPS,
            "superblock table does not span the blocks".into(),
        ));
    }
    let blocks = &body[tables..];
    let model = Model::of(head);
    let (mut ts, mut counts) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for bi in 0..k {
        let (a, b) = (start(bi), start(bi + 1));
        if (bi % SUPER_BLOCKS == 0 && u32_at(table + 4 * bi) != 0)
            || a > b
            || b > len
            || b - a > MAX_BLOCK_BYTES as u64
        {
            return Err(bad(
                table + 4 * bi,
                format!("block {bi} starts at {a}, ends at {b}"),
            ));
        }
        let mut r = BitReader::window(blocks, a as usize, b as usize);
        for _ in 0..BLOCK_CELLS.min(n - bi * BLOCK_CELLS) {
            let (t, c) = r.cell(&model, &p)?;
            ts.push(t);
            counts.push(c);
        }
        if !r.at_end() {
            return Err(bad(
                tables + b as usize,
                format!("block {bi} does not end where its table says"),
            ));
        }
    }
    if (k % SUPER_BLOCKS == 0 && u32_at(table + 4 * k) != 0) || start(k) != len {
        return Err(bad(
            table + 4 * k,
            "the block table's last entry is not the blocks' length".into(),
        ));
    }
    let mut tally = Tally::new();
    for i in (0..n).step_by(TALLY_STRIDE) {
        tally.add(&model, ts[i], counts[i]);
    }
    if tally.params() != p {
        return Err(bad(
            0,
            "Rice parameters are not the ones the writer chooses for these counters".into(),
        ));
    }
    Ok((ts, counts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_is_a_bijection_around_the_mean() {
        for l in [0u32, 1, 5, 20] {
            let mut seen = std::collections::HashSet::new();
            for c in 0..200u32 {
                let v = fold(c, l);
                assert_eq!(unfold(v, l), Some(c), "l {l} c {c}");
                assert!(seen.insert(v));
            }
            // the codes near the mean are the small ones
            assert_eq!(fold(l, l), 0);
        }
        assert_eq!(unfold(u64::MAX, 3), None);
    }

    #[test]
    fn zigzag_wraps_every_counter() {
        for r in [0u64, 1, u64::MAX, 1 << 63, 12345, u64::MAX - 7] {
            assert_eq!(unzigzag(zigzag(r)), r);
        }
        assert_eq!(zigzag(u64::MAX), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn rice_codes_read_back_escapes_included() {
        let vals = [0u64, 1, 2, 31, 32, 1000, 1 << 40, u64::MAX, 7];
        for k in [0u8, 3, 17, 63] {
            let mut out = Vec::new();
            let mut w = BitWriter {
                out: &mut out,
                acc: 0,
                have: 0,
            };
            for &v in &vals {
                w.rice(v, k);
            }
            w.align();
            let mut r = BitReader::new(&out);
            for &v in &vals {
                assert_eq!(r.rice(k, "v").unwrap(), v, "k {k}");
            }
            assert!(r.at_end());
        }
    }

    #[test]
    fn an_escape_where_the_short_code_fits_is_refused() {
        let mut out = Vec::new();
        let mut w = BitWriter {
            out: &mut out,
            acc: 0,
            have: 0,
        };
        w.put(u32::MAX as u64, 32);
        w.put(5, 64);
        w.align();
        assert!(BitReader::new(&out).rice(0, "v").is_err());
        // and a code cut short is an error, not a panic
        assert!(BitReader::new(&out[..5]).rice(0, "v").is_err());
    }

    #[test]
    fn count_groups_cover_every_count() {
        assert_eq!(group(0), 0);
        assert_eq!(group(31), 31);
        assert_eq!(group(32), 32);
        assert_eq!(group(63), 32);
        assert_eq!(group(64), 33);
        assert!(group(u32::MAX) < GROUPS);
    }
}
