//! The per-point sketch: R rows × C cells of `(s, n, d)` (§2.3.4, Fig. 4/5).

use std::sync::Arc;

use crate::hash::{HashFamily, HashFn};
use crate::method::TypedSynopsis;
use crate::record::{FlowKey, PacketRecord};
use crate::wire::{DecodeError, WireReader, WireWriter};

use super::config::{CELL_BYTES, Config};

/// One cell: timestamp sum, packet count, digest.
///
/// - `s` is the sum of `w·t` over the packets (and weights `w`, §4.1) that hit the cell, in
///   wrapping `u64` arithmetic: the receiver's sum minus the sender's is exact modulo 2⁶⁴, and
///   so is the delay sum as long as the true (weighted) delay sum of a cell stays below 2⁶³ ns
///   (292 years).
/// - `n` is the (weighted) packet count. It saturates at `u32::MAX`, which marks the cell as
///   overflowed: the estimator never uses it.
/// - `d` is the XOR of the packets' 32-bit digests (§2.3.2, after [27, 20]): equal counts with
///   different packet sets are caught with probability `1 − 2⁻³²`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Cell {
    pub s: u64,
    pub n: u32,
    pub d: u32,
}

impl Cell {
    /// `n` at its ceiling: the count overflowed and the cell is unusable.
    pub const OVERFLOW: u32 = u32::MAX;
}

// Members of the hash family (seeded by `Config::seed`), so every hash of both points agrees:
//   flow hash        fh = FlowKey::hash(seed)                 (xxh3 of the canonical 5-tuple)
//   base columns     member(BASE + j).hash(fh): 32-bit halves give rows 2j and 2j+1,
//                    base_r = ⌊half · C / 2³²⌋                                  (h_r)
//   vLDA offsets     member(OFFSET + j).hash(id): 16-bit quarters give rows 4j..4j+3,
//                    offset_r = ⌊quarter · k / 2¹⁶⌋                              (h'_r)
//   sampling         member(SAMPLE + j).hash(id): 32-bit halves for rows 2j, 2j+1; a row
//                    with rate p takes the packet when half < p·2³²
//   digest           member(DIGEST).hash(id) >> 32
const BASE: u64 = 0x1d5_0100;
const OFFSET: u64 = 0x1d5_0200;
const SAMPLE: u64 = 0x1d5_0300;
const DIGEST: u64 = 0x1d5_0400;

/// A configuration with its hash functions, shared by the method and its points.
#[derive(Debug)]
pub struct Layout {
    pub cfg: Config,
    base: Vec<HashFn>,
    offset: Vec<HashFn>,
    sample: Vec<HashFn>,
    /// Per row: the packet is sampled when its 32-bit sampling half is below this.
    cut: Vec<u64>,
    all_sampled: bool,
    digest: HashFn,
}

/// Ask the processor to bring `cells[i]` into cache (a hint; no effect on results).
#[inline(always)]
fn prefetch(cells: &[Cell], i: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: a prefetch is a hint that never faults and reads nothing into the program;
        // `wrapping_add` keeps the pointer computation defined, and `i` is in bounds anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(cells.as_ptr().wrapping_add(i) as *const i8) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (cells, i);
}

#[inline]
fn reduce32(h: u32, n: usize) -> usize {
    ((h as u64 * n as u64) >> 32) as usize
}

impl Layout {
    /// Build the hash functions of a validated configuration.
    pub fn new(cfg: Config) -> Arc<Layout> {
        let fam = HashFamily::new(cfg.seed);
        let r = cfg.rows as u64;
        let cut: Vec<u64> = cfg
            .sampling
            .iter()
            .map(|&p| ((p * 4_294_967_296.0).round() as u64).min(1 << 32))
            .collect();
        Arc::new(Layout {
            base: (0..r.div_ceil(2)).map(|j| fam.member(BASE + j)).collect(),
            offset: (0..r.div_ceil(4)).map(|j| fam.member(OFFSET + j)).collect(),
            sample: (0..r.div_ceil(2)).map(|j| fam.member(SAMPLE + j)).collect(),
            all_sampled: cut.iter().all(|&c| c == 1 << 32),
            cut,
            digest: fam.member(DIGEST),
            cfg,
        })
    }

    /// The flow hash every row's base column derives from.
    #[inline]
    pub fn flow_hash(&self, f: &FlowKey) -> u64 {
        f.hash(self.cfg.seed)
    }

    /// Base column `h_r(f)` of each row, into `out` (cleared first).
    pub fn bases(&self, fh: u64, out: &mut Vec<usize>) {
        out.clear();
        let c = self.cfg.columns;
        let mut g = 0u64;
        for r in 0..self.cfg.rows {
            if r & 1 == 0 {
                g = self.base[r >> 1].hash(fh);
            }
            out.push(reduce32((g >> (32 * (r & 1))) as u32, c));
        }
    }

    /// Whether row `r` samples the packet with identity `id`.
    pub fn sampled(&self, r: usize, id: u64) -> bool {
        let g = self.sample[r >> 1].hash(id);
        (((g >> (32 * (r & 1))) as u32) as u64) < self.cut[r]
    }

    /// vLDA offset `h'_r(x)` of packet `id` in row `r`.
    pub fn offset(&self, r: usize, id: u64) -> usize {
        let g = self.offset[r >> 2].hash(id);
        ((((g >> (16 * (r & 3))) & 0xffff) * self.cfg.k as u64) >> 16) as usize
    }

    /// The 32-bit digest of packet `id`.
    pub fn digest(&self, id: u64) -> u32 {
        (self.digest.hash(id) >> 32) as u32
    }

    /// Index into the cell array of row `r`, column `base + o` (mod C).
    #[inline]
    pub fn cell_index(&self, r: usize, base: usize, o: usize) -> usize {
        let c = self.cfg.columns;
        let mut j = base + o;
        if j >= c {
            j -= c;
        }
        r * c + j
    }
}

/// Packets per block of [`Synopsis::record_batch`] (with 4 rows or fewer).
pub const BLOCK: usize = 32;

/// One point's lossy difference sketch (LDS §3) for one interval.
#[derive(Clone, Debug)]
pub struct Synopsis {
    layout: Arc<Layout>,
    cells: Vec<Cell>,
}

impl Synopsis {
    pub fn new(layout: Arc<Layout>) -> Synopsis {
        let n = layout.cfg.rows * layout.cfg.columns;
        Synopsis {
            layout,
            cells: vec![Cell::default(); n],
        }
    }

    pub fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    pub fn config(&self) -> &Config {
        &self.layout.cfg
    }

    /// All cells, row after row.
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// Cells of row `r`.
    pub fn row(&self, r: usize) -> &[Cell] {
        let c = self.layout.cfg.columns;
        &self.cells[r * c..(r + 1) * c]
    }

    /// UPDATE STATE (Fig. 5, with the per-row packet hash `h'_r` of §2.3.4, the per-row
    /// sampling stage of §4.2 and the weights of §4.1): for every row that samples the packet,
    /// cell `(r, (h_r(f) + h'_r(x)) mod C)` gets `s += w·t`, `n += w`, `d ^= digest(x)`.
    #[inline]
    pub fn record(&mut self, rec: &PacketRecord) {
        self.record_batch(std::slice::from_ref(rec));
    }

    /// [`Synopsis::record`] for many packets, in two passes over blocks of [`BLOCK`] packets: first
    /// every hash and cell index, then every cell update. The updates of a block are
    /// independent memory accesses the processor overlaps (a sketch of megabytes lives in L3
    /// or DRAM), instead of each waiting for its hashes. With the misses overlapped, the
    /// hashes are the cost — the 5-tuple hash alone about a third. Same result as recording
    /// one packet after the other.
    pub fn record_batch(&mut self, recs: &[PacketRecord]) {
        let cfg = &self.layout.cfg;
        if cfg.rows == 4 && cfg.weights.is_empty() {
            self.record_many_four_rows(recs)
        } else {
            self.record_many_any(recs)
        }
    }

    /// [`Synopsis::record_batch`] for any number of rows, sampling and weights.
    fn record_many_any(&mut self, recs: &[PacketRecord]) {
        let l = &*self.layout;
        let cfg = &l.cfg;
        let rows = cfg.rows;
        let c = cfg.columns;
        let k = cfg.k as u64;
        let weighted = !cfg.weights.is_empty();
        let mut idx = [0u32; BLOCK * 4];
        let mut meta = [(0u64, 0u32, 0u32); BLOCK];
        // more than 4 rows: blocks of fewer packets, same index buffer
        let per_block = (BLOCK * 4 / rows).max(1);
        for chunk in recs.chunks(per_block) {
            for (i, rec) in chunk.iter().enumerate() {
                let w = if weighted {
                    cfg.weights.weight_of(&rec.flow)
                } else {
                    1
                };
                let fh = rec.flow.hash(cfg.seed);
                let dig = (l.digest.hash(rec.id) >> 32) as u32;
                meta[i] = ((w as u64).wrapping_mul(rec.ts_ns), w, dig);
                let (mut gb, mut go, mut gs) = (0u64, 0u64, 0u64);
                for r in 0..rows {
                    if r & 1 == 0 {
                        gb = l.base[r >> 1].hash(fh);
                        if !l.all_sampled {
                            gs = l.sample[r >> 1].hash(rec.id);
                        }
                    }
                    if k > 1 && r & 3 == 0 {
                        go = l.offset[r >> 2].hash(rec.id);
                    }
                    let slot = &mut idx[i * rows + r];
                    if !l.all_sampled && (((gs >> (32 * (r & 1))) as u32) as u64) >= l.cut[r] {
                        *slot = u32::MAX;
                        continue;
                    }
                    let mut j = reduce32((gb >> (32 * (r & 1))) as u32, c);
                    if k > 1 {
                        j += ((((go >> (16 * (r & 3))) & 0xffff) * k) >> 16) as usize;
                        if j >= c {
                            j -= c;
                        }
                    }
                    *slot = (r * c + j) as u32;
                    prefetch(&self.cells, r * c + j);
                }
            }
            for (i, &(add, w, dig)) in meta[..chunk.len()].iter().enumerate() {
                for &j in &idx[i * rows..(i + 1) * rows] {
                    if j == u32::MAX {
                        continue;
                    }
                    let cell = &mut self.cells[j as usize];
                    cell.s = cell.s.wrapping_add(add);
                    cell.n = cell.n.saturating_add(w);
                    cell.d ^= dig;
                }
            }
        }
    }

    /// [`Synopsis::record_batch`] for the common case — 4 rows, no weights — with the per-row
    /// choices unrolled: two base hashes, one offset hash, one digest, and two sampling
    /// hashes when a row samples. Same cells, same order of updates as the general loop.
    fn record_many_four_rows(&mut self, recs: &[PacketRecord]) {
        let l = &*self.layout;
        let c = l.cfg.columns;
        let k = l.cfg.k as u64;
        let seed = l.cfg.seed;
        let mut idx = [[0u32; 4]; BLOCK];
        let mut meta = [(0u64, 0u32); BLOCK];
        for chunk in recs.chunks(BLOCK) {
            for (i, rec) in chunk.iter().enumerate() {
                let fh = rec.flow.hash(seed);
                let g = [l.base[0].hash(fh), l.base[1].hash(fh)];
                let go = if k > 1 { l.offset[0].hash(rec.id) } else { 0 };
                let gs = if l.all_sampled {
                    [0, 0]
                } else {
                    [l.sample[0].hash(rec.id), l.sample[1].hash(rec.id)]
                };
                meta[i] = (rec.ts_ns, (l.digest.hash(rec.id) >> 32) as u32);
                for r in 0..4 {
                    let half = |x: u64| (x >> (32 * (r & 1))) as u32;
                    if !l.all_sampled && half(gs[r >> 1]) as u64 >= l.cut[r] {
                        idx[i][r] = u32::MAX;
                        continue;
                    }
                    let mut j = reduce32(half(g[r >> 1]), c)
                        + ((((go >> (16 * r)) & 0xffff) * k) >> 16) as usize;
                    if j >= c {
                        j -= c;
                    }
                    idx[i][r] = (r * c + j) as u32;
                    prefetch(&self.cells, r * c + j);
                }
            }
            for (ix, &(t, dig)) in idx.iter().zip(&meta[..chunk.len()]) {
                for &j in ix {
                    if j == u32::MAX {
                        continue;
                    }
                    let cell = &mut self.cells[j as usize];
                    cell.s = cell.s.wrapping_add(t);
                    cell.n = cell.n.saturating_add(1);
                    cell.d ^= dig;
                }
            }
        }
    }

    /// Append the wire form: every cell, row after row, as `s` u64, `n` u32, `d` u32
    /// (little-endian); `rows × columns × 16` bytes.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let mut w = WireWriter::new(out);
        w.reserve(self.cells.len() * CELL_BYTES);
        for c in &self.cells {
            w.u64(c.s);
            w.u32(c.n);
            w.u32(c.d);
        }
    }

    /// Decode what [`Synopsis::encode_into`] wrote for this layout; the length must be exact.
    pub fn decode(layout: Arc<Layout>, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        let n = layout.cfg.rows * layout.cfg.columns;
        let want = n * CELL_BYTES;
        let mut r = WireReader::new(bytes);
        if bytes.len() != want {
            return Err(r.invalid(format!(
                "an LDS of {} × {} cells is {want} bytes, got {}: not this configuration's sketch",
                layout.cfg.rows,
                layout.cfg.columns,
                bytes.len()
            )));
        }
        let mut cells = Vec::with_capacity(n);
        for _ in 0..n {
            cells.push(Cell {
                s: r.u64("cell sum")?,
                n: r.u32("cell count")?,
                d: r.u32("cell digest")?,
            });
        }
        r.finish("LDS cells")?;
        Ok(Synopsis { layout, cells })
    }
}

impl TypedSynopsis for Synopsis {
    const METHOD: &'static str = "lds";
    fn record(&mut self, rec: &PacketRecord) {
        Synopsis::record(self, rec);
    }
    fn record_batch(&mut self, recs: &[PacketRecord]) {
        self.record_batch(recs);
    }
    fn encoded_len(&self) -> usize {
        self.cells.len() * CELL_BYTES
    }
    fn encode(&self, out: &mut Vec<u8>) {
        self.encode_into(out);
    }
    /// Cells added to cells: sums wrapping, counts saturating at the overflow mark (both as
    /// recording adds, and a saturated sum of non-negative counts is the same in any
    /// grouping), digests XORed. The three variants share this sketch and differ in their
    /// configuration, which must be the same.
    fn merge(&mut self, later: Synopsis) -> Result<(), crate::method::MethodError> {
        super::estimate::check_pair(self, &later).map_err(crate::method::as_merge)?;
        for (c, l) in self.cells.iter_mut().zip(&later.cells) {
            c.s = c.s.wrapping_add(l.s);
            c.n = c.n.saturating_add(l.n);
            c.d ^= l.d;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn flow(i: u32) -> FlowKey {
        FlowKey {
            proto: 6,
            src: IpAddr::V4((0x0a00_0000 + i).into()),
            dst: "10.255.0.1".parse().unwrap(),
            sport: 1000 + (i % 50_000) as u16,
            dport: 443,
        }
    }

    #[test]
    fn record_hits_one_cell_per_sampled_row_in_the_flows_vlda() {
        let mut cfg = Config::multi_bank(1000, 3);
        cfg.sampling = vec![1.0, 0.5, 1.0, 0.25];
        let l = Layout::new(cfg);
        let mut s = Synopsis::new(l.clone());
        let f = flow(7);
        let mut bases = Vec::new();
        l.bases(l.flow_hash(&f), &mut bases);
        let mut expect_n = [0u32; 4];
        for i in 0..2000u64 {
            let id = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            s.record(&PacketRecord {
                ts_ns: 1_000 + i,
                id,
                flow: f,
                len: 100,
            });
            for (r, e) in expect_n.iter_mut().enumerate() {
                *e += l.sampled(r, id) as u32;
            }
        }
        for r in 0..4 {
            let row = s.row(r);
            let total: u32 = row.iter().map(|c| c.n).sum();
            assert_eq!(total, expect_n[r], "row {r}");
            // only the flow's k cells are touched
            let inside: u32 = (0..5)
                .map(|o| s.cells()[l.cell_index(r, bases[r], o)].n)
                .sum();
            assert_eq!(inside, total);
            // and all k of them get packets (2000 packets over 5 cells)
            if l.cfg.sampling[r] == 1.0 {
                assert!((0..5).all(|o| s.cells()[l.cell_index(r, bases[r], o)].n > 300));
            }
        }
        // sampling rates are honoured (binomial, 6 sd)
        assert!((expect_n[1] as f64 - 1000.0).abs() < 6.0 * 22.4);
        assert!((expect_n[3] as f64 - 500.0).abs() < 6.0 * 19.4);
    }

    /// The unrolled four-row loop, the general loop and a packet-by-packet reference built
    /// from the layout's own hash functions fill the same cells, with and without the vLDA
    /// and row sampling.
    #[test]
    fn four_row_loop_matches_the_general_loop_and_the_hash_definitions() {
        let mut sampled = Config::multi_bank(97, 5);
        sampled.sampling = vec![1.0, 0.5, 0.1, 0.9];
        for cfg in [
            Config::single_bank(4, 101, 1),
            Config::multi_bank(103, 2),
            sampled,
        ] {
            let l = Layout::new(cfg);
            let recs: Vec<PacketRecord> = (0..3000u64)
                .map(|i| PacketRecord {
                    ts_ns: 1_000_000 + i * 37,
                    id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x55,
                    flow: flow((i % 211) as u32),
                    len: 60,
                })
                .collect();
            let (mut fast, mut any) = (Synopsis::new(l.clone()), Synopsis::new(l.clone()));
            fast.record_batch(&recs);
            any.record_many_any(&recs);
            let mut reference = vec![Cell::default(); 4 * l.cfg.columns];
            let mut bases = Vec::new();
            for p in &recs {
                l.bases(l.flow_hash(&p.flow), &mut bases);
                for r in 0..4 {
                    if !l.sampled(r, p.id) {
                        continue;
                    }
                    let c = &mut reference[l.cell_index(r, bases[r], l.offset(r, p.id))];
                    c.s = c.s.wrapping_add(p.ts_ns);
                    c.n += 1;
                    c.d ^= l.digest(p.id);
                }
            }
            assert_eq!(fast.cells(), any.cells(), "{:?}", l.cfg);
            assert_eq!(fast.cells(), &reference[..], "{:?}", l.cfg);
        }
    }

    #[test]
    fn encode_decode_roundtrip_and_hostile_bytes() {
        let l = Layout::new(Config::single_bank(3, 50, 1));
        let mut s = Synopsis::new(l.clone());
        for i in 0..500u64 {
            s.record(&PacketRecord {
                ts_ns: (u64::MAX - 10).wrapping_add(i), // wraps: sums are modular
                id: i * 7919,
                flow: flow((i % 17) as u32),
                len: 60,
            });
        }
        let mut b = Vec::new();
        s.encode_into(&mut b);
        assert_eq!(b.len(), TypedSynopsis::encoded_len(&s));
        let d = Synopsis::decode(l.clone(), &b).unwrap();
        assert_eq!(d.cells(), s.cells());
        for cut in [0, 1, b.len() - 1] {
            assert!(Synopsis::decode(l.clone(), &b[..cut]).is_err());
        }
        let mut longer = b.clone();
        longer.push(0);
        let e = Synopsis::decode(l, &longer).unwrap_err().to_string();
        assert!(e.contains("not this configuration"), "{e}");
    }

    #[test]
    fn counts_saturate_into_overflow() {
        let mut cfg = Config::single_bank(1, 4, 1);
        cfg.weights = "port:443=1048576".parse().unwrap();
        let mut s = Synopsis::new(Layout::new(cfg));
        for i in 0..5000u64 {
            s.record(&PacketRecord {
                ts_ns: i,
                id: i,
                flow: flow(1),
                len: 60,
            });
        }
        assert!(s.cells().iter().any(|c| c.n == Cell::OVERFLOW));
    }
}
