//! The counter vector in RAM (COLATE §3.1, §5): `n` counters of `b` bits, as the paper's `M =
//! n·b` counts them, each packed beside its packet counter of `c` bits, and a bounded spill of
//! the counters that outgrow their bits.
//!
//! # Cells
//!
//! Cell `i` is `b + c` bits at bit offset `i·(b + c)` of one byte array, least significant bit
//! first: the timestamp counter in its low `b` bits, the packet counter (owl's count vector,
//! the source of `p_f`, of an epoch's absolute time and of §1.4's loss check) in the next `c`.
//! A packet's update is one unaligned 64-bit load, one add of `rel | 1 << b` at the cell's
//! shift, one store — one memory access, as §1.3 asks, and the RAM is exactly
//! `⌈n·(b + c)/8⌉` bytes (plus 16 bytes of padding for the unaligned access at the end).
//!
//! # Spill (the paper's SRAM/DRAM split)
//!
//! §3.1: "we can store its less significant bits as a counter in SRAM and the more significant
//! bits as a counter in DRAM – when the counter in SRAM overflows, we increment the
//! corresponding counter in DRAM". Here the cells are the SRAM, and the DRAM is a bounded
//! open-addressing table ([`Spill`]) of the high parts of the counters that overflowed —
//! `spill` entries at most, 12 bytes each (index, high timestamp bits, high count bits) at a
//! load of 3/4. When a counter would overflow and the spill cannot take it (full, or its
//! high part would outgrow 32 bits), [`Cells::add`] refuses and the recorder dumps the vector
//! first — the paper's rule, "before any counter overflows, COLATE dumps the counter vector",
//! applied to the whole SRAM + DRAM counter. `spill = 0` is that rule with no DRAM at all.

use super::coding::BLOCK_CELLS;
use super::epoch::CellSource;
use super::vector::mix;

/// Bytes of padding after the cells: a 128-bit access at the last cell stays in bounds.
const PAD: usize = 16;

/// Where the RAM of one point's counter vectors goes (what `owl record` and `owl compare`
/// print).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// `n·b` bits per vector: the paper's `M`.
    pub timestamp_bits: u64,
    /// `n·h` bits per vector: the timestamp counters' high bits beside `M` (§3.1's DRAM part,
    /// [`Config::ram_b`](super::Config::ram_b)).
    pub high_bits: u64,
    /// `n·c` bits per vector: the packet counters, beside `M`.
    pub count_bits: u64,
    /// Bytes of the spill tables at their bound (allocated on the first overflow).
    pub spill_bytes: u64,
    /// Bytes of the cells as allocated (`⌈n·(b + h + c)/8⌉` + padding per vector).
    pub cell_bytes: u64,
}

impl Memory {
    /// Every byte the vectors may use: cells and spill at its bound.
    pub fn total_bytes(&self) -> u64 {
        self.cell_bytes + self.spill_bytes
    }

    /// One line: the total, then where it goes.
    pub fn describe(&self) -> String {
        use crate::units::format_bytes;
        format!(
            "RAM {}: timestamp counters n·b = {} (the paper's M) and their high bits n·h = {} (§3.1's DRAM part), packet counters n·c = {} (beside M: p_f, absolute time, §1.4 loss check), spill ≤ {} (counters that outgrow their bits)",
            format_bytes(self.total_bytes()),
            format_bytes(self.timestamp_bits.div_ceil(8)),
            format_bytes(self.high_bits.div_ceil(8)),
            format_bytes(self.count_bits.div_ceil(8)),
            format_bytes(self.spill_bytes)
        )
    }
}

/// One high part: which counter (`index + 1`, 0 = empty slot), its timestamp and count bits
/// above `b` and `c`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    key: u32,
    ts: u32,
    count: u32,
}

/// The spill: at most `cap` high parts, linear probing at a load of at most 3/4.
#[derive(Clone, Debug)]
pub struct Spill {
    slots: Vec<Slot>,
    cap: usize,
    len: usize,
}

impl Spill {
    pub fn new(cap: usize) -> Spill {
        Spill {
            slots: Vec::new(),
            cap,
            len: 0,
        }
    }

    /// Slots for `cap` entries (load ≤ 3/4).
    pub fn slots_for(cap: usize) -> usize {
        if cap == 0 { 0 } else { (cap * 4).div_ceil(3) }
    }

    /// Bytes at the bound.
    pub fn bytes_for(cap: usize) -> u64 {
        (Spill::slots_for(cap) * std::mem::size_of::<Slot>()) as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn find(&self, i: u32) -> Result<usize, usize> {
        let s = self.slots.len();
        let mut at = crate::hash::reduce(mix(i as u64), s);
        loop {
            let k = self.slots[at].key;
            if k == i + 1 {
                return Ok(at);
            }
            if k == 0 {
                return Err(at);
            }
            at += 1;
            if at == s {
                at = 0;
            }
        }
    }

    /// High parts of counter `i`.
    pub fn get(&self, i: u32) -> (u32, u32) {
        if self.len == 0 {
            return (0, 0);
        }
        match self.find(i) {
            Ok(at) => (self.slots[at].ts, self.slots[at].count),
            Err(_) => (0, 0),
        }
    }

    /// Set the high parts of counter `i`; `false` (nothing changed) when it is new and the
    /// spill is full.
    fn set(&mut self, i: u32, ts: u32, count: u32) -> bool {
        if self.slots.is_empty() {
            if self.cap == 0 {
                return false;
            }
            self.slots = vec![Slot::default(); Spill::slots_for(self.cap)];
        }
        match self.find(i) {
            Ok(at) => {
                self.slots[at].ts = ts;
                self.slots[at].count = count;
                true
            }
            Err(_) if self.len == self.cap => false,
            Err(at) => {
                self.slots[at] = Slot {
                    key: i + 1,
                    ts,
                    count,
                };
                self.len += 1;
                true
            }
        }
    }

    fn clear(&mut self) {
        if self.len > 0 {
            self.slots.fill(Slot::default());
            self.len = 0;
        }
    }
}

/// `n` packed cells and their spill.
#[derive(Clone, Debug)]
pub struct Cells {
    n: usize,
    b: u32,
    c: u32,
    /// `b + c`.
    w: u32,
    bytes: Vec<u8>,
    spill: Spill,
}

#[inline]
fn ones(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

impl Cells {
    /// `n` cells of `b`-bit timestamp counters and `c`-bit packet counters (`b ≤ 63`,
    /// `c ≤ 32`), a spill of at most `spill` entries; all zero.
    pub fn new(n: usize, b: u8, c: u8, spill: usize) -> Cells {
        let (b, c) = (b as u32, c as u32);
        assert!(
            (1..=63).contains(&b) && (1..=32).contains(&c),
            "widths {b} {c}"
        );
        Cells {
            n,
            b,
            c,
            w: b + c,
            bytes: vec![0; Cells::allocated(n, b + c)],
            spill: Spill::new(spill),
        }
    }

    /// Bytes of `n` cells of `w` bits.
    pub fn packed_len(n: usize, w: u32) -> usize {
        (n * w as usize).div_ceil(8)
    }

    /// Bytes allocated for `n` cells of `w` bits.
    pub fn allocated(n: usize, w: u32) -> usize {
        Cells::packed_len(n, w) + PAD
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Counters whose high parts are in the spill.
    pub fn spilled(&self) -> usize {
        self.spill.len()
    }

    /// Bytes allocated for the cells.
    pub fn cell_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Ask the processor to bring cell `i` into cache (a hint; no effect on results).
    #[inline(always)]
    pub fn prefetch(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            let at = (i * self.w as usize) >> 3;
            // SAFETY: a prefetch is a hint that never faults and reads nothing into the
            // program; `wrapping_add` keeps the pointer computation defined.
            unsafe {
                _mm_prefetch::<_MM_HINT_T0>(self.bytes.as_ptr().wrapping_add(at) as *const i8)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    /// Add a packet of relative timestamp `rel` to cell `i`: `rel` to its timestamp counter
    /// and 1 to its packet counter. `false` (nothing changed) when a counter would overflow
    /// and the spill cannot take its high part: the caller dumps the vector first.
    #[inline]
    pub fn add(&mut self, i: usize, rel: u64) -> bool {
        let bit = i * self.w as usize;
        let (at, sh) = (bit >> 3, (bit & 7) as u32);
        let (bm, cm) = (ones(self.b), ones(self.c));
        if self.w <= 56 {
            let p: &mut [u8; 8] = (&mut self.bytes[at..at + 8]).try_into().expect("8 bytes");
            let word = u64::from_le_bytes(*p);
            let cell = word >> sh;
            let (ts, cnt) = (cell & bm, (cell >> self.b) & cm);
            if rel <= bm - ts && cnt < cm {
                *p = (word + ((rel | 1 << self.b) << sh)).to_le_bytes();
                return true;
            }
        } else {
            let p: &mut [u8; 16] = (&mut self.bytes[at..at + 16]).try_into().expect("16 bytes");
            let word = u128::from_le_bytes(*p);
            let cell = word >> sh;
            let (ts, cnt) = (cell as u64 & bm, (cell >> self.b) as u64 & cm);
            if rel <= bm - ts && cnt < cm {
                *p = (word + (((1u128 << self.b) | rel as u128) << sh)).to_le_bytes();
                return true;
            }
        }
        self.add_spilling(i, rel)
    }

    /// [`add`](Self::add) when a counter overflows its bits: the carry goes to the spill.
    #[cold]
    fn add_spilling(&mut self, i: usize, rel: u64) -> bool {
        let (ts, cnt) = self.get(i);
        let ts = ts as u128 + rel as u128;
        let cnt = cnt as u64 + 1;
        // the whole counter must stay a u64 / u32, and its high part fit the spill's 32 bits
        if ts > u64::MAX as u128 || cnt > u32::MAX as u64 {
            return false;
        }
        let (ts, cnt) = (ts as u64, cnt);
        let (hi_ts, hi_c) = (ts >> self.b, cnt >> self.c);
        if hi_ts > u32::MAX as u64 || hi_c > u32::MAX as u64 {
            return false;
        }
        if (hi_ts, hi_c) != (0, 0) || self.spill.get(i as u32) != (0, 0) {
            let key = u32::try_from(i).expect("n ≤ 2²⁸");
            if !self.spill.set(key, hi_ts as u32, hi_c as u32) {
                return false;
            }
        }
        self.write_low(i, ts & ones(self.b), cnt & ones(self.c));
        true
    }

    /// Set counter `i` to `(ts, cnt)`, the high parts to the spill where they are not 0
    /// (where [`add`](Self::add) would have put them); `false` (nothing changed) where a high
    /// part outgrows 32 bits or the spill cannot take a new one. The counters only grow, so a
    /// value `add` reaches, `put` takes, and what `put` refuses `add` refused on the way.
    pub(crate) fn put(&mut self, i: usize, ts: u64, cnt: u32) -> bool {
        let (hi_ts, hi_c) = (ts >> self.b, (cnt as u64) >> self.c);
        let (Ok(hi_ts), Ok(hi_c), Ok(key)) =
            (u32::try_from(hi_ts), u32::try_from(hi_c), u32::try_from(i))
        else {
            return false;
        };
        if ((hi_ts, hi_c) != (0, 0) || self.spill.get(key) != (0, 0))
            && !self.spill.set(key, hi_ts, hi_c)
        {
            return false;
        }
        self.write_low(i, ts & ones(self.b), cnt as u64 & ones(self.c));
        true
    }

    fn write_low(&mut self, i: usize, ts: u64, cnt: u64) {
        let bit = i * self.w as usize;
        let (at, sh) = (bit >> 3, (bit & 7) as u32);
        let p: &mut [u8; 16] = (&mut self.bytes[at..at + 16]).try_into().expect("16 bytes");
        let mask = (ones(self.w) as u128) << sh;
        let v = ((ts as u128) | ((cnt as u128) << self.b)) << sh;
        *p = ((u128::from_le_bytes(*p) & !mask) | v).to_le_bytes();
    }

    /// Counter `i`: `(timestamp counter, packet counter)`, spill included.
    #[inline]
    pub fn get(&self, i: usize) -> (u64, u32) {
        let bit = i * self.w as usize;
        let (at, sh) = (bit >> 3, (bit & 7) as u32);
        let p: [u8; 16] = self.bytes[at..at + 16].try_into().expect("16 bytes");
        let cell = u128::from_le_bytes(p) >> sh;
        let ts = cell as u64 & ones(self.b);
        let cnt = (cell >> self.b) as u64 & ones(self.c);
        let (hi_ts, hi_c) = self.spill.get(i as u32);
        (
            ts | ((hi_ts as u64) << self.b),
            (cnt | ((hi_c as u64) << self.c)) as u32,
        )
    }

    /// Low parts of cell `i`.
    #[inline]
    fn low(&self, i: usize) -> (u64, u64) {
        let bit = i * self.w as usize;
        let (at, sh) = (bit >> 3, bit & 7);
        let cell = if self.w <= 56 {
            let p: [u8; 8] = self.bytes[at..at + 8].try_into().expect("8 bytes");
            (u64::from_le_bytes(p) >> sh) as u128
        } else {
            let p: [u8; 16] = self.bytes[at..at + 16].try_into().expect("16 bytes");
            u128::from_le_bytes(p) >> sh
        };
        (
            cell as u64 & ones(self.b),
            (cell >> self.b) as u64 & ones(self.c),
        )
    }

    /// Every counter, in order, spill included (one pass: the spill's entries sorted and
    /// merged in).
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (u64, u32)> + Clone + '_ {
        let hi = self.high_parts();
        let mut k = 0;
        (0..self.n).map(move |i| {
            let (mut ts, mut c) = self.low(i);
            if let Some(&(at, t, n)) = hi.get(k)
                && at as usize == i
            {
                ts |= (t as u64) << self.b;
                c |= (n as u64) << self.c;
                k += 1;
            }
            (ts, c as u32)
        })
    }

    /// The spill's high parts `(counter, timestamp bits, count bits)`, by counter.
    fn high_parts(&self) -> Vec<(u32, u32, u32)> {
        let mut hi: Vec<(u32, u32, u32)> = self
            .spill
            .slots
            .iter()
            .filter(|s| s.key != 0)
            .map(|s| (s.key - 1, s.ts, s.count))
            .collect();
        hi.sort_unstable();
        hi
    }

    /// Every counter as plain vectors.
    pub fn to_vectors(&self) -> (Vec<u64>, Vec<u32>) {
        self.iter().unzip()
    }

    /// All counters to zero, writing only the 64-byte chunks that hold a bit: a vector of few
    /// packets is cleared by a read of its cells, and the pages no packet touched stay
    /// unwritten (not resident), so its RAM follows its packets.
    pub fn clear(&mut self) {
        for chunk in self.bytes.chunks_mut(64) {
            if chunk.iter().any(|&b| b != 0) {
                chunk.fill(0);
            }
        }
        self.spill.clear();
    }
}

impl CellSource for Cells {
    fn count(&self) -> usize {
        self.n
    }

    /// One pass over the packed cells ([`low`](Self::low): one 64-bit word read per cell where
    /// a cell and its shift fit one), the spill's high parts merged in by counter.
    fn each(&self, mut f: impl FnMut(u64, u32)) {
        let hi = self.high_parts();
        let (b, c) = (self.b, self.c);
        // the next counter with high parts, and its position among them
        let (mut k, mut next) = (0usize, hi.first().map_or(usize::MAX, |h| h.0 as usize));
        for i in 0..self.n {
            let (mut ts, mut cnt) = self.low(i);
            if i == next {
                let (_, t, n) = hi[k];
                ts |= (t as u64) << b;
                cnt |= (n as u64) << c;
                k += 1;
                next = hi.get(k).map_or(usize::MAX, |h| h.0 as usize);
            }
            f(ts, cnt as u32);
        }
    }

    fn cell_at(&self, i: usize) -> (u64, u32) {
        self.get(i)
    }

    /// [`each`](CellSource::each), a block of [`BLOCK_CELLS`] cells whose `8·(b + c)` bytes are
    /// zero and that no high part falls in given as one run.
    fn each_run(&self, mut f: impl FnMut(u64, u32, usize)) {
        let hi = self.high_parts();
        let (b, c) = (self.b, self.c);
        let block_bytes = BLOCK_CELLS * self.w as usize / 8;
        let (mut k, mut next) = (0usize, hi.first().map_or(usize::MAX, |h| h.0 as usize));
        let mut i = 0;
        while i < self.n {
            if i.is_multiple_of(BLOCK_CELLS) && i + BLOCK_CELLS <= self.n && next >= i + BLOCK_CELLS
            {
                let at = i / 8 * self.w as usize;
                if self.bytes[at..at + block_bytes].iter().all(|&x| x == 0) {
                    f(0, 0, BLOCK_CELLS);
                    i += BLOCK_CELLS;
                    continue;
                }
            }
            let (mut ts, mut cnt) = self.low(i);
            if i == next {
                let (_, t, n) = hi[k];
                ts |= (t as u64) << b;
                cnt |= (n as u64) << c;
                k += 1;
                next = hi.get(k).map_or(usize::MAX, |h| h.0 as usize);
            }
            f(ts, cnt as u32, 1);
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    /// Packed cells with a spill agree with plain counters, at every width and across
    /// overflows, and refuse (changing nothing) exactly when the spill cannot take a carry.
    #[test]
    fn cells_match_plain_counters() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        for (b, c, spill) in [
            (19u8, 8u8, 1_000usize),
            (3, 1, 1_000),
            (1, 1, 50),
            (40, 16, 100),
            (41, 16, 100),
            (63, 32, 10),
            (50, 20, 10),
            (19, 8, 0),
        ] {
            let n = 997;
            let mut cells = Cells::new(n, b, c, spill);
            let mut plain = vec![(0u64, 0u32); n];
            let top = 1u64 << b.min(40);
            let mut refused = 0;
            for _ in 0..20_000 {
                let i = rng.random_range(0..n);
                let rel = rng.random_range(0..top);
                let before = cells.get(i);
                if cells.add(i, rel) {
                    plain[i].0 += rel;
                    plain[i].1 += 1;
                } else {
                    refused += 1;
                    assert_eq!(cells.get(i), before);
                    // a refusal is a counter that would overflow with a full spill
                    let s = plain[i].0 + rel;
                    let k = plain[i].1 + 1;
                    assert!(s >= 1 << b || k >= 1 << c, "{b} {c}: refused {s} {k}");
                }
                assert_eq!(cells.get(i), plain[i], "b={b} c={c} i={i}");
            }
            for (i, &p) in plain.iter().enumerate() {
                assert_eq!(cells.get(i), p);
            }
            let (ts, counts) = cells.to_vectors();
            assert_eq!(ts, plain.iter().map(|p| p.0).collect::<Vec<_>>());
            assert_eq!(counts, plain.iter().map(|p| p.1).collect::<Vec<_>>());
            assert!(cells.spilled() <= spill);
            if spill == 0 {
                assert!(refused > 0);
            }
            cells.clear();
            assert!(cells.iter().all(|x| x == (0, 0)));
            assert_eq!(cells.spilled(), 0);
        }
    }
}
