//! [`DelayStore`]: the whole-run delays behind exact quantiles, packed and in insertion order.
//!
//! A store of millions of `i64` delays in one `Vec` doubles its buffer as it grows (holding two
//! for a moment) and spends 8 bytes on values that span a few milliseconds. Here every block of
//! [`BLOCK`] delays is stored as offsets from its smallest, in as many bits as its range needs
//! (frame of reference: 23 bits for delays within 8 ms), in a buffer of exactly that size; only
//! the block being filled is plain. The order is kept, so the standard deviation's
//! floating-point sum is the one a plain `Vec` gives, and order statistics are found exactly by
//! narrowing histograms over passes of the store ([`DelayStore::select`]), without unpacking it
//! whole.

/// Delays per packed block.
pub const BLOCK: usize = 4096;
/// Histogram buckets per narrowing pass of [`DelayStore::select`].
const BUCKET_BITS: u32 = 14;
/// A rank whose candidates are at most this many is answered by sorting them.
const COLLECT: usize = 1 << 16;

/// One full block: `BLOCK` offsets from `base`, `width` bits each, little-endian in `words`.
#[derive(Debug)]
struct Block {
    base: i64,
    width: u32,
    words: Box<[u64]>,
}

impl Block {
    fn pack(xs: &[i64]) -> Block {
        debug_assert_eq!(xs.len(), BLOCK);
        let base = *xs.iter().min().expect("a full block");
        let max = *xs.iter().max().expect("a full block");
        let width = 64 - (max.wrapping_sub(base) as u64).leading_zeros();
        let mut words = vec![0u64; (BLOCK * width as usize).div_ceil(64)].into_boxed_slice();
        if width > 0 {
            for (i, &x) in xs.iter().enumerate() {
                let v = x.wrapping_sub(base) as u64;
                let bit = i * width as usize;
                let (w, o) = (bit / 64, (bit % 64) as u32);
                words[w] |= v << o;
                if o + width > 64 {
                    words[w + 1] |= v >> (64 - o);
                }
            }
        }
        Block { base, width, words }
    }

    fn unpack(&self, out: &mut [i64; BLOCK]) {
        if self.width == 0 {
            out.fill(self.base);
            return;
        }
        let mask = if self.width == 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        };
        for (i, x) in out.iter_mut().enumerate() {
            let bit = i * self.width as usize;
            let (w, o) = (bit / 64, (bit % 64) as u32);
            let mut v = self.words[w] >> o;
            if o + self.width > 64 {
                v |= self.words[w + 1] << (64 - o);
            }
            *x = self.base.wrapping_add((v & mask) as i64);
        }
    }
}

/// Delays in the order pushed, packed by blocks; see the module doc.
#[derive(Debug, Default)]
pub struct DelayStore {
    blocks: Vec<Block>,
    /// The block being filled (its capacity is allocated whole with the first delay).
    tail: Vec<i64>,
}

/// An order-preserving key: `i64` order as `u64` order.
fn key(x: i64) -> u64 {
    (x as u64) ^ (1 << 63)
}

fn unkey(k: u64) -> i64 {
    (k ^ (1 << 63)) as i64
}

/// One rank being narrowed: its value's key is in `[lo, hi]`, where `candidates` values lie,
/// `below` of them under `lo`.
#[derive(Clone, Copy, Debug)]
struct Narrowing {
    rank: usize,
    lo: u64,
    hi: u64,
    below: usize,
    candidates: usize,
    found: Option<i64>,
}

impl DelayStore {
    pub fn new() -> DelayStore {
        DelayStore::default()
    }

    pub fn len(&self) -> usize {
        self.blocks.len() * BLOCK + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn push(&mut self, d: i64) {
        if self.tail.capacity() == 0 {
            self.tail.reserve_exact(BLOCK);
        }
        self.tail.push(d);
        if self.tail.len() == BLOCK {
            self.blocks.push(Block::pack(&self.tail));
            self.tail.clear();
        }
    }

    /// Bytes held (packed blocks, their index and the block being filled).
    pub fn heap_bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.words.len() * 8).sum::<usize>()
            + self.blocks.capacity() * std::mem::size_of::<Block>()
            + self.tail.capacity() * 8
    }

    /// Every delay, in the order pushed.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            store: self,
            block: 0,
            at: 0,
            buf: None,
        }
    }

    /// Calls `f` with every delay in the order pushed, a block at a time.
    pub fn for_each_chunk(&self, mut f: impl FnMut(&[i64])) {
        let mut buf = Box::new([0i64; BLOCK]);
        for b in &self.blocks {
            b.unpack(&mut buf);
            f(&buf[..]);
        }
        if !self.tail.is_empty() {
            f(&self.tail);
        }
    }

    /// The values at 0-based `ranks` of the sorted delays (each below [`len`](Self::len)),
    /// exactly. Each pass over the store narrows every rank's value range by a histogram of
    /// 2¹⁴ buckets, until its candidates are few enough to sort (at most 2¹⁶) or one value:
    /// two or three passes, whatever the distribution, and memory of a histogram and 2¹⁶
    /// values per rank.
    pub fn select(&self, ranks: &[usize]) -> Vec<i64> {
        let n = self.len();
        let mut ns: Vec<Narrowing> = ranks
            .iter()
            .map(|&rank| {
                assert!(rank < n, "rank {rank} of {n} delays");
                Narrowing {
                    rank,
                    lo: 0,
                    hi: u64::MAX,
                    below: 0,
                    candidates: n,
                    found: None,
                }
            })
            .collect();
        let mut hists: Vec<Vec<u64>> = vec![Vec::new(); ns.len()];
        let mut held: Vec<Vec<i64>> = vec![Vec::new(); ns.len()];
        while ns.iter().any(|s| s.found.is_none()) {
            // what each rank does in this pass: a histogram of its range (by `shift`), or
            // holding its candidates
            let shifts: Vec<Option<u32>> = ns
                .iter()
                .map(|s| {
                    if s.found.is_some() || s.candidates <= COLLECT {
                        return None;
                    }
                    let span = s.hi - s.lo;
                    Some((64 - span.leading_zeros()).saturating_sub(BUCKET_BITS))
                })
                .collect();
            for (k, s) in ns.iter().enumerate() {
                hists[k].clear();
                held[k].clear();
                match shifts[k] {
                    Some(sh) => hists[k].resize(((s.hi - s.lo) >> sh) as usize + 1, 0),
                    None if s.found.is_none() => held[k].reserve_exact(s.candidates),
                    None => {}
                }
            }
            self.for_each_chunk(|xs| {
                for (k, s) in ns.iter().enumerate() {
                    if s.found.is_some() {
                        continue;
                    }
                    match shifts[k] {
                        Some(sh) => {
                            let h = &mut hists[k];
                            for &x in xs {
                                let y = key(x);
                                if y >= s.lo && y <= s.hi {
                                    h[((y - s.lo) >> sh) as usize] += 1;
                                }
                            }
                        }
                        None => held[k].extend(xs.iter().filter(|&&x| {
                            let y = key(x);
                            y >= s.lo && y <= s.hi
                        })),
                    }
                }
            });
            for (k, s) in ns.iter_mut().enumerate() {
                if s.found.is_some() {
                    continue;
                }
                let want = s.rank - s.below;
                match shifts[k] {
                    None => {
                        let (_, v, _) = held[k].select_nth_unstable(want);
                        s.found = Some(*v);
                    }
                    Some(sh) => {
                        let mut seen = 0usize;
                        for (b, &c) in hists[k].iter().enumerate() {
                            let c = c as usize;
                            if seen + c > want {
                                let lo = s.lo + ((b as u64) << sh);
                                // the bucket's last key, within the range
                                let hi = lo.saturating_add((1u64 << sh) - 1).min(s.hi);
                                *s = Narrowing {
                                    lo,
                                    hi,
                                    below: s.below + seen,
                                    candidates: c,
                                    found: (lo == hi).then(|| unkey(lo)),
                                    ..*s
                                };
                                break;
                            }
                            seen += c;
                        }
                    }
                }
            }
        }
        ns.iter()
            .map(|s| s.found.expect("every rank found"))
            .collect()
    }
}

/// The delays of a [`DelayStore`] in the order pushed, unpacked a block at a time.
#[derive(Clone)]
pub struct Iter<'a> {
    store: &'a DelayStore,
    block: usize,
    at: usize,
    buf: Option<Box<[i64; BLOCK]>>,
}

impl Iterator for Iter<'_> {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        if self.block < self.store.blocks.len() {
            let buf = self.buf.get_or_insert_with(|| Box::new([0; BLOCK]));
            if self.at == 0 {
                self.store.blocks[self.block].unpack(buf);
            }
            let x = buf[self.at];
            self.at += 1;
            if self.at == BLOCK {
                (self.block, self.at) = (self.block + 1, 0);
            }
            return Some(x);
        }
        let x = self.store.tail.get(self.at).copied();
        self.at += x.is_some() as usize;
        x
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.store.len() - (self.block * BLOCK + self.at);
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64;

    fn check(xs: &[i64], rng: &mut Pcg64) {
        let mut s = DelayStore::new();
        for &x in xs {
            s.push(x);
        }
        assert_eq!(s.len(), xs.len());
        assert!(s.iter().eq(xs.iter().copied()), "order kept");
        let mut chunks = Vec::new();
        s.for_each_chunk(|c| chunks.extend_from_slice(c));
        assert_eq!(chunks, xs);
        if xs.is_empty() {
            return;
        }
        let mut sorted = xs.to_vec();
        sorted.sort_unstable();
        let n = xs.len();
        let mut ranks = vec![0, n - 1, n / 2];
        ranks.extend(crate::stats::quantile_ranks(n));
        ranks.extend((0..8).map(|_| rng.random_range(0..n)));
        let got = s.select(&ranks);
        for (r, v) in ranks.iter().zip(got) {
            assert_eq!(v, sorted[*r], "rank {r} of {n}");
        }
    }

    #[test]
    fn order_statistics_equal_the_sorted_ones_across_block_boundaries() {
        let mut rng = Pcg64::seed_from_u64(29);
        // lengths around the block size and the sorting threshold, wide and narrow ranges,
        // extremes, constants and a few heavy ties
        for n in [
            0,
            1,
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            3 * BLOCK + 17,
            COLLECT + 5,
            40 * BLOCK + 3,
        ] {
            let narrow: Vec<i64> = (0..n)
                .map(|_| 1_000_000 + rng.random_range(0..400_000))
                .collect();
            check(&narrow, &mut rng);
            let wide: Vec<i64> = (0..n).map(|_| rng.random::<i64>()).collect();
            check(&wide, &mut rng);
            let mut extremes = narrow.clone();
            for (i, x) in extremes.iter_mut().enumerate() {
                match i % 997 {
                    0 => *x = i64::MIN,
                    1 => *x = i64::MAX,
                    2 => *x = -*x,
                    _ => {}
                }
            }
            check(&extremes, &mut rng);
            check(&vec![-7; n], &mut rng);
            let ties: Vec<i64> = (0..n).map(|_| rng.random_range(-3..3) * 1_000).collect();
            check(&ties, &mut rng);
        }
    }

    #[test]
    fn packs_millisecond_delays_in_three_bytes() {
        let mut rng = Pcg64::seed_from_u64(7);
        let mut s = DelayStore::new();
        let n = 64 * BLOCK;
        for _ in 0..n {
            s.push(rng.random_range(0..8_000_000));
        }
        // 23 bits a delay, plus the block being filled
        assert!(
            s.heap_bytes() <= n * 23 / 8 + 8 * BLOCK + 64 * 64,
            "{}",
            s.heap_bytes()
        );
    }
}
