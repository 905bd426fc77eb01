//! Noisy accumulation of timestamps (COLATE §3.1) and the dump of counter epochs.
//!
//! Each point keeps one [`CounterVector`] of `n` counters per sampling vector (one by
//! default). A packet of flow `f`:
//!
//! 1. picks a vector by its identity, the same at every point (§1.4 "Packet Losses");
//! 2. picks `j ∈ [0, m)` by its identity — the paper's "random number j", drawn from the
//!    packet so that both points put it in the same counter of its subvector, which Theorem 4
//!    needs ("the two sets 𝒴_lS and 𝒴_lR contain the time stamps from the same set of
//!    packets");
//! 3. adds `⌊(ts − base)/unit⌋` to counter `H(f, j)` and 1 to the packet counter of the same
//!    index (the count vector that gives `p_f`, §4.1).
//!
//! `H(f, j) = reduce(mix(h(f) ⊕ s_j), n)` where `h(f)` is the seeded flow hash (the one hash
//! per packet of §1.4 "Deployability": [`Placement`] says which), `s_j` a per-`j` salt derived from the seed, and
//! `mix` the SplitMix64 finaliser; `j` and the vector come from the packet identity (already
//! a hash) through `mix` with their own salts. Every constant is fixed here, so two points
//! (and two versions of owl) agree.
//!
//! The vector is dumped as an [`Epoch`] when its sum reaches `T` (§5.2: "when the sum of all
//! n counters in a counter vector reaches T, COLATE dumps the counter vector"); the base of
//! the next epoch is its first packet's timestamp.

use std::sync::Arc;

use crate::hash::{HashFamily, KeyHasher, reduce};
use crate::record::{FlowKey, PacketRecord};

use super::cells::{Cells, Memory};
use super::coding::Coding;
use super::config::Config;
use super::epoch::{Epoch, EpochHead, Sealed, encode_cells};

/// Family members of the salts.
const SALT_J: u64 = 0xc01a_7e00;
const SALT_VECTOR: u64 = 0xc01a_7e01;
const SALT_H: u64 = 0xc01a_7e02;
const SALT_BLOCK: u64 = 0xc01a_7e03;

/// The SplitMix64 finaliser (Steele, Lea, Flood 2014): a fixed bijective 64-bit mixer.
#[inline]
pub fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// How a flow's `m` counters are chosen (fixed by the epoch's format).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// `CLE2` epochs: `h(f)` the xxh3 of the 37-byte [`FlowKey::canonical_bytes`]; the `m`
    /// counters anywhere among the `n` (the paper's `H(f, j)`).
    Canonical,
    /// `CLE3` epochs: `h(f)` from [`KeyHasher`] (folded multiplies of the 5-tuple's words, 13
    /// bytes for IPv4: a third of the time); the `m` counters anywhere (the paper's `H(f, j)`,
    /// `colate:placement=independent`, the default).
    #[default]
    Folded,
    /// `CLE4` epochs: `h(f)` from [`KeyHasher`]; the `m` counters inside one block of about
    /// [`BLOCK`] counters that `h(f)` picks, so that a query reads one or two pages of an epoch
    /// rather than `m` (owl's, `colate:placement=blocked`). Every counter is as likely as
    /// under the paper's `H(f, j)`, so Theorem 2's expected share is unchanged; flows in one
    /// block share `m²/BLOCK` ≈ 0.2 counters where the paper's share `m²/n`, and 9 % of the
    /// flows have two `j` on one counter (read once: [`super::FlowEpoch`]). Not the default:
    /// `--confidence`'s interval holds less often than under the paper's placement in sparse
    /// vectors (`colate-reliability --quick`, 1 460 flows: at 100 MiB the raw mean's held
    /// 99.2 % of the flows where the paper's placement holds 100 %, Theorem 2's mean's 93.8–95.3 %
    /// at every confidence up to 0.99) — the noise draws do not yet model the blocks.
    Blocked,
}

/// Counters of a block ([`Placement::Blocked`]): 2 048 cells of 19–32 bits are 5–8 KiB.
pub const BLOCK: usize = 2_048;

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::Canonical => "xxh3 of the canonical key, counters anywhere (CLE2)",
            Placement::Folded => "folded 5-tuple hash, counters anywhere (CLE3)",
            Placement::Blocked => "folded 5-tuple hash, counters in one block (CLE4)",
        }
    }

    /// The placements a configuration may ask for (`colate:placement=`).
    pub fn config_name(self) -> &'static str {
        match self {
            Placement::Canonical => "canonical",
            Placement::Folded => "independent",
            Placement::Blocked => "blocked",
        }
    }
}

impl std::str::FromStr for Placement {
    type Err = crate::method::MethodError;
    fn from_str(s: &str) -> Result<Placement, Self::Err> {
        match s.trim() {
            "blocked" => Ok(Placement::Blocked),
            "independent" => Ok(Placement::Folded),
            _ => Err(crate::method::MethodError::Invalid(format!(
                "colate: placement '{s}' is not blocked or independent"
            ))),
        }
    }
}

/// The mapping both points share: flow hash, `j` of a packet, `H(f, j)`, vector of a packet.
#[derive(Clone, Debug, PartialEq)]
pub struct Mapping {
    pub seed: u64,
    pub m: u32,
    pub placement: Placement,
    hasher: KeyHasher,
    salt_block: u64,
    salt_j: u64,
    salt_vector: u64,
    salts: Vec<u64>,
    /// Upper thresholds of the vectors' shares of the 64-bit space.
    cuts: Vec<u64>,
}

impl Mapping {
    pub fn new(seed: u64, m: u32, probabilities: &[f64], placement: Placement) -> Mapping {
        let fam = HashFamily::new(seed);
        let key_h = fam.member(SALT_H).hash(0);
        let mut acc = 0.0;
        let cuts = probabilities
            .iter()
            .enumerate()
            .map(|(i, p)| {
                acc += p;
                if i + 1 == probabilities.len() {
                    u64::MAX
                } else {
                    (acc.min(1.0) * u64::MAX as f64) as u64
                }
            })
            .collect();
        Mapping {
            seed,
            m,
            placement,
            hasher: KeyHasher::new(seed),
            salt_block: fam.member(SALT_BLOCK).hash(0),
            salt_j: fam.member(SALT_J).hash(0),
            salt_vector: fam.member(SALT_VECTOR).hash(0),
            salts: (0..m as u64).map(|j| mix(key_h.wrapping_add(j))).collect(),
            cuts,
        }
    }

    #[inline]
    pub fn flow_hash(&self, f: &FlowKey) -> u64 {
        match self.placement {
            Placement::Folded | Placement::Blocked => self.hasher.hash(f),
            Placement::Canonical => f.hash(self.seed),
        }
    }

    /// `j` of a packet (0-based).
    #[inline]
    pub fn j(&self, id: u64) -> usize {
        reduce(mix(id ^ self.salt_j), self.m as usize)
    }

    /// The vector a packet goes to.
    #[inline]
    pub fn vector(&self, id: u64) -> usize {
        if self.cuts.len() == 1 {
            return 0;
        }
        let u = mix(id ^ self.salt_vector);
        self.cuts.iter().position(|&c| u <= c).unwrap_or(0)
    }

    /// `H(f, j)` in a vector of `n` counters.
    #[inline]
    pub fn index(&self, flow_hash: u64, j: usize, n: usize) -> usize {
        if self.placement == Placement::Blocked {
            let (start, len) = self.block_of(flow_hash, n);
            return start + reduce(mix(flow_hash ^ self.salts[j]), len);
        }
        reduce(mix(flow_hash ^ self.salts[j]), n)
    }

    /// Blocks of `n` counters ([`Placement::Blocked`]): `⌈n/BLOCK⌉`, block `k` the counters
    /// `[k·n/B, (k + 1)·n/B)`.
    pub fn blocks(n: usize) -> usize {
        n.div_ceil(BLOCK).max(1)
    }

    /// Block `k` of `n` counters: its first counter and its length.
    #[inline]
    pub fn block(k: usize, n: usize) -> (usize, usize) {
        let b = Mapping::blocks(n);
        let start = k * n / b;
        (start, (k + 1) * n / b - start)
    }

    /// The block of a flow ([`Placement::Blocked`]).
    #[inline]
    pub fn block_of(&self, flow_hash: u64, n: usize) -> (usize, usize) {
        Mapping::block(
            reduce(mix(flow_hash ^ self.salt_block), Mapping::blocks(n)),
            n,
        )
    }

    /// Where a packet of identity `id` and flow hash `flow_hash` goes in vectors of `n`
    /// counters: its vector, and `H(f, j)` of its `j`.
    #[inline]
    pub fn locate(&self, flow_hash: u64, id: u64, n: usize) -> (usize, usize) {
        (self.vector(id), self.index(flow_hash, self.j(id), n))
    }

    /// The counter subvector of a flow: `H(f, 1..m)`.
    pub fn subvector(&self, flow_hash: u64, n: usize) -> Vec<usize> {
        (0..self.m as usize)
            .map(|j| self.index(flow_hash, j, n))
            .collect()
    }
}

/// `⌊x / d⌋` for a divisor fixed at run time, by one multiply-high, a shift and an add
/// (libdivide's branch-free unsigned algorithm: Granlund and Montgomery, "Division by
/// invariant integers using multiplication", PLDI 1994, §4, with the 65-bit magic's top bit
/// folded into the `(x − q)/2 + q` step). The timestamp unit divides every packet's
/// timestamp; a hardware 64-bit division costs more than the rest of the update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnitDivisor {
    d: u64,
    magic: u64,
    more: u32,
}

impl UnitDivisor {
    pub fn new(d: u64) -> UnitDivisor {
        assert!(d > 0, "division by zero");
        let l = 63 - d.leading_zeros();
        if d.is_power_of_two() {
            // q = 0, t = x/2, x/2 >> (l − 1) = x >> l (d = 1 is special-cased in div)
            return UnitDivisor {
                d,
                magic: 0,
                more: l.saturating_sub(1),
            };
        }
        // m = ⌊2^(64+l)/d⌋ doubled, plus one when the doubled remainder reaches d
        let num = 1u128 << (64 + l);
        let (m, rem) = ((num / d as u128) as u64, (num % d as u128) as u64);
        let mut m = m.wrapping_add(m);
        let twice = rem.wrapping_add(rem);
        if twice >= d || twice < rem {
            m = m.wrapping_add(1);
        }
        UnitDivisor {
            d,
            magic: m.wrapping_add(1),
            more: l,
        }
    }

    #[inline]
    pub fn div(&self, x: u64) -> u64 {
        if self.d == 1 {
            return x;
        }
        let q = ((self.magic as u128 * x as u128) >> 64) as u64;
        (((x - q) >> 1) + q) >> self.more
    }
}

/// One vector of `n` counters in RAM between two dumps ([`Cells`]: the `b`-bit timestamp
/// counters packed beside their packet counters, and the spill).
#[derive(Clone, Debug)]
pub struct CounterVector {
    pub cells: Cells,
    pub sum: u128,
    pub packets: u64,
    pub base_ns: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub early: u64,
    /// Counter and timestamp of each packet counted in `early`, in RAM only (never dumped):
    /// what a merge needs to give them their relative timestamp against an earlier base.
    /// Shorter than `early` in a vector reopened from its epoch.
    pub early_at: Vec<(u32, u64)>,
}

impl CounterVector {
    /// An empty vector; its counters are allocated with its first packet.
    fn new(cfg: &Config) -> CounterVector {
        CounterVector {
            cells: Cells::new(0, cfg.ram_b(), cfg.count_bits(), 0),
            sum: 0,
            packets: 0,
            base_ns: 0,
            first_ns: u64::MAX,
            last_ns: 0,
            early: 0,
            early_at: Vec::new(),
        }
    }

    /// Empty again, keeping the cells' memory.
    fn reset(&mut self) {
        self.cells.clear();
        self.sum = 0;
        self.packets = 0;
        self.base_ns = 0;
        self.first_ns = u64::MAX;
        self.last_ns = 0;
        self.early = 0;
        self.early_at.clear();
    }
}

/// The shared parts of every recorder of one configuration.
#[derive(Debug)]
pub struct Layout {
    pub cfg: Config,
    pub map: Mapping,
    pub unit: UnitDivisor,
}

impl Layout {
    pub fn new(cfg: Config) -> Arc<Layout> {
        Arc::new(Layout {
            map: Mapping::new(cfg.seed(), cfg.m(), cfg.vectors(), cfg.placement()),
            unit: UnitDivisor::new(cfg.unit_ns()),
            cfg,
        })
    }

    /// This layout placing flows as `placement` does (epochs of another format, decoded).
    pub fn with_placement(self: &Arc<Layout>, placement: Placement) -> Arc<Layout> {
        if self.map.placement == placement {
            return self.clone();
        }
        let mut map = self.map.clone();
        map.placement = placement;
        Arc::new(Layout {
            cfg: self.cfg.clone(),
            map,
            unit: self.unit,
        })
    }
}

/// One observation point's recording phase: its counter vectors and the epochs dumped so far
/// and not yet taken.
#[derive(Clone, Debug)]
pub struct Recorder {
    layout: Arc<Layout>,
    vectors: Vec<CounterVector>,
    sealed: Vec<Sealed>,
    seq: u64,
    /// Packets recorded, and epochs dumped, over the recorder's life.
    pub packets: u64,
    pub dumps: u64,
    /// Dumps forced before `T` because a counter would overflow with the spill full (§3.1).
    pub overflow_dumps: u64,
    /// Decoded from a point's own file ([`Recorder::early_packets`]): the early packets of its
    /// open vectors, `(vector, counter, timestamp)`, given back to them when they are reopened.
    pub carried_early: Vec<(u32, u32, u64)>,
}

impl Recorder {
    pub fn new(layout: Arc<Layout>) -> Recorder {
        Recorder {
            vectors: (0..layout.cfg.vectors().len())
                .map(|_| CounterVector::new(&layout.cfg))
                .collect(),
            layout,
            sealed: Vec::new(),
            seq: 0,
            packets: 0,
            dumps: 0,
            overflow_dumps: 0,
            carried_early: Vec::new(),
        }
    }

    /// The early packets (older than their vector's base, counted as 0) of every open vector,
    /// `(vector, counter, timestamp)`: what a point's own file keeps beside its epochs so that a
    /// decoded recorder merges exactly.
    pub fn early_packets(&self) -> Vec<(u32, u32, u64)> {
        self.vectors
            .iter()
            .enumerate()
            .filter(|(_, v)| v.packets > 0)
            .flat_map(|(k, v)| v.early_at.iter().map(move |&(i, ts)| (k as u32, i, ts)))
            .collect()
    }

    /// A recorder holding `epochs` as dumped and nothing open (a decoded synopsis), placing
    /// flows as its epochs did (one [`Placement`]: [`decode_sealed`](super::epoch::decode_sealed)
    /// checks).
    pub fn with_epochs(layout: Arc<Layout>, epochs: Vec<Sealed>) -> Recorder {
        let layout = match epochs.first() {
            Some(e) => layout.with_placement(e.head.placement),
            None => layout,
        };
        let mut r = Recorder::new(layout);
        r.packets = epochs.iter().map(|e| e.head.packets).sum();
        r.sealed = epochs;
        r
    }

    /// Open vectors holding a packet.
    pub fn open_vectors(&self) -> usize {
        self.vectors.iter().filter(|v| v.packets > 0).count()
    }

    /// Continue the epoch numbering at `seq` (a store reopened).
    pub fn resume_at(&mut self, seq: u64) {
        self.seq = seq;
    }

    pub fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    /// Record one packet (§3.1): one hash of the flow, one counter update.
    #[inline]
    pub fn record(&mut self, rec: &PacketRecord) {
        let fh = self.layout.map.flow_hash(&rec.flow);
        self.record_hashed(rec.ts_ns, rec.id, fh);
    }

    /// Record a packet whose flow hash is known.
    #[inline]
    pub fn record_hashed(&mut self, ts_ns: u64, id: u64, flow_hash: u64) {
        let (v, i) = self
            .layout
            .map
            .locate(flow_hash, id, self.layout.cfg.n() as usize);
        self.update(v, i, ts_ns);
    }

    /// Record a batch, software-pipelined: packet `k + AHEAD`'s flow hash, vector and counter
    /// are computed and its cell prefetched while packet `k`'s counter is updated, so that a
    /// vector larger than the caches costs one memory latency per `AHEAD` packets, not one
    /// per packet. The same updates in the same order as [`record`](Self::record).
    pub fn record_batch(&mut self, recs: &[PacketRecord]) {
        const AHEAD: usize = 16;
        let n = self.layout.cfg.n() as usize;
        let mut ring = [(0u32, 0usize); AHEAD];
        let locate = |map: &Mapping, r: &PacketRecord| {
            let (v, i) = map.locate(map.flow_hash(&r.flow), r.id, n);
            (v as u32, i)
        };
        for (k, r) in recs.iter().take(AHEAD).enumerate() {
            let (v, i) = locate(&self.layout.map, r);
            self.vectors[v as usize].cells.prefetch(i);
            ring[k] = (v, i);
        }
        for (k, r) in recs.iter().enumerate() {
            let slot = k % AHEAD;
            let (v, i) = ring[slot];
            if let Some(next) = recs.get(k + AHEAD) {
                let (nv, ni) = locate(&self.layout.map, next);
                self.vectors[nv as usize].cells.prefetch(ni);
                ring[slot] = (nv, ni);
            }
            self.update(v as usize, i, r.ts_ns);
        }
    }

    /// Add a packet at `ts_ns` to counter `i` of vector `v`; dump the vector when its sum
    /// reaches `T` (§5.2), or first when the packet would overflow a counter the spill cannot
    /// take (§3.1: "before any counter overflows, COLATE dumps the counter vector").
    #[inline]
    fn update(&mut self, v: usize, i: usize, ts_ns: u64) {
        let layout = &*self.layout;
        let vec = &mut self.vectors[v];
        if vec.packets == 0 {
            let n = layout.cfg.n() as usize;
            if vec.cells.len() != n {
                let cfg = &layout.cfg;
                vec.cells = Cells::new(n, cfg.ram_b(), cfg.count_bits(), cfg.spill() as usize);
            }
            // on the unit's grid, so that the relative timestamps of two recorders of one
            // stream add up exactly ([`Recorder::append`]: a receiver's interval is assembled
            // from its parts at the cuts)
            vec.base_ns = ts_ns - ts_ns % layout.cfg.unit_ns();
            vec.first_ns = ts_ns;
        }
        let rel = match ts_ns.checked_sub(vec.base_ns) {
            Some(d) => layout.unit.div(d),
            None => 0,
        };
        if !vec.cells.add(i, rel) {
            return self.dump_then_update(v, i, ts_ns);
        }
        if ts_ns < vec.base_ns {
            vec.early += 1;
            vec.early_at.push((i as u32, ts_ns));
        }
        vec.first_ns = vec.first_ns.min(ts_ns);
        vec.last_ns = vec.last_ns.max(ts_ns);
        vec.sum += rel as u128;
        vec.packets += 1;
        self.packets += 1;
        if vec.sum >= layout.cfg.threshold() as u128 {
            self.dump(v);
        }
    }

    /// [`update`](Self::update) of a packet that would overflow a counter the spill cannot
    /// take: dump first; a fresh vector takes any packet (its base is this packet's
    /// timestamp, so it adds 0).
    #[cold]
    #[inline(never)]
    fn dump_then_update(&mut self, v: usize, i: usize, ts_ns: u64) {
        self.overflow_dumps += 1;
        self.dump(v);
        self.update(v, i, ts_ns);
    }

    /// Dump vector `v` as an epoch and reset it.
    #[cold]
    #[inline(never)]
    fn dump(&mut self, v: usize) {
        let e = self.seal(v, self.seq);
        self.seq += 1;
        self.dumps += 1;
        self.vectors[v].reset();
        self.sealed.push(e);
    }

    /// Vector `v` encoded as epoch `seq` (it stays as it is): straight from the packed cells.
    fn seal(&self, v: usize, seq: u64) -> Sealed {
        let c = &self.vectors[v];
        let head = EpochHead {
            seq,
            ..self.head_of(v)
        };
        let mut bytes = Vec::new();
        let overflows = encode_cells(&head, &c.cells, &mut bytes);
        Sealed {
            head,
            bytes,
            overflows,
        }
    }

    /// The head vector `v` would have as an epoch (numbered 0).
    fn head_of(&self, v: usize) -> EpochHead {
        let cfg = &self.layout.cfg;
        let c = &self.vectors[v];
        EpochHead {
            seq: 0,
            vector: v as u16,
            vectors: cfg.vectors().len() as u16,
            probability: cfg.vectors()[v],
            seed: cfg.seed(),
            n: cfg.n(),
            m: cfg.m(),
            b: cfg.b(),
            unit_ns: cfg.unit_ns(),
            base_ns: c.base_ns,
            first_ns: c.first_ns,
            last_ns: c.last_ns,
            packets: c.packets,
            sum: c.sum,
            early: c.early,
            placement: self.layout.map.placement,
            // `CLE2` epochs (owl before the folded hash, resumed) are fixed cells only
            coding: match self.layout.map.placement {
                Placement::Canonical => Coding::Fixed,
                _ => cfg.coding(),
            },
        }
    }

    /// Dump every vector that holds a packet (the end of a recording, or of an interval).
    pub fn dump_open(&mut self) {
        for v in 0..self.vectors.len() {
            if self.vectors[v].packets > 0 {
                self.dump(v);
            }
        }
    }

    /// The epochs dumped since the last call, oldest first, decoded.
    pub fn take_epochs(&mut self) -> Vec<Epoch> {
        self.take_sealed().iter().map(Sealed::decode).collect()
    }

    /// The epochs dumped since the last call, oldest first, as they are stored.
    pub fn take_sealed(&mut self) -> Vec<Sealed> {
        std::mem::take(&mut self.sealed)
    }

    /// Epochs dumped and not taken.
    pub fn sealed(&self) -> &[Sealed] {
        &self.sealed
    }

    /// The epochs dumped and not taken, then the open vectors as epochs, without resetting
    /// anything (what a synopsis of this point holds right now).
    pub fn snapshot_sealed(&self) -> Vec<Sealed> {
        let mut out = self.sealed.clone();
        out.extend(self.seal_open());
        out
    }

    /// The open vectors as the epochs that follow [`sealed`](Self::sealed) in a snapshot,
    /// without resetting them (with `sealed`, a snapshot that copies no dumped epoch).
    pub fn seal_open(&self) -> Vec<Sealed> {
        let mut out = Vec::new();
        let mut seq = self.seq;
        for v in 0..self.vectors.len() {
            if self.vectors[v].packets > 0 {
                out.push(self.seal(v, seq));
                seq += 1;
            }
        }
        out
    }

    /// [`snapshot_sealed`](Self::snapshot_sealed) of a recorder no longer needed: the same
    /// epochs, moved rather than copied.
    pub fn into_sealed(mut self) -> Vec<Sealed> {
        self.dump_open();
        self.sealed
    }

    /// [`snapshot_sealed`](Self::snapshot_sealed), decoded.
    pub fn snapshot(&self) -> Vec<Epoch> {
        self.snapshot_sealed().iter().map(Sealed::decode).collect()
    }

    /// Packets in the open vectors.
    pub fn open_packets(&self) -> u64 {
        self.vectors.iter().map(|v| v.packets).sum()
    }

    /// Bytes the open vectors would take once dumped (without copying them).
    pub fn open_encoded_len(&self) -> usize {
        (0..self.vectors.len())
            .filter(|&v| self.vectors[v].packets > 0)
            .map(|v| super::epoch::encoded_len_of(&self.head_of(v), &self.vectors[v].cells))
            .sum()
    }

    /// Take in `later`, a recorder of the same configuration whose packets all came after
    /// this one's (the method's [`PointSynopsis::merge`](crate::method::PointSynopsis::merge)):
    /// what recording both streams in order gives, or an error saying why it cannot be had.
    ///
    /// A decoded recorder holds only epochs: its last epoch of each vector that stayed below
    /// `T` (its tail) was its open vector, dumped for the payload, and is reopened first, on
    /// both sides. Then, vector by vector:
    ///
    /// - this vector empty: `later`'s packets of it started afresh, as recording them here
    ///   would: its dumps and its open vector are taken as they are, the dumps numbered on
    ///   from this recorder's;
    /// - this vector open and `later` holding packets of it: recording would have added them
    ///   to this vector, each `⌊(ts − base)/unit⌋` against this vector's base. That is
    ///   `later`'s relative timestamp plus `(base′ − base)/unit` when the bases are a whole
    ///   number of units apart and `base′ ≥ base`, and for each packet `later` recorded as
    ///   early (before its own base, as 0) its own timestamp against this base (kept in RAM:
    ///   a vector reopened from its epoch has lost them). Each counter is then set to its sum
    ///   (spilling as recording does). Recording would have dumped this vector within
    ///   `later`'s packets where the merged sum reaches `T`, where a counter outgrows the
    ///   spill, or where `later` itself dumped it; those dumps fall at packets `later` no
    ///   longer has, and are refused.
    ///
    /// So merging is exact unless it is refused: it is refused where the bases are not a
    /// whole number of units apart or `later`'s base is the earlier (a unit of 1 ns, or
    /// timestamps in order across the split, avoid both), where a decoded `later` recorded
    /// early packets in a vector this recorder has open, and where a vector would have been
    /// dumped within `later`'s packets. (A recorder whose epochs were dumped by
    /// [`dump_open`](Self::dump_open), not by `T`, is reopened like a decoded one.)
    pub fn append(&mut self, later: Recorder) -> Result<(), String> {
        let mut later = later;
        self.reopen()?;
        later.reopen()?;
        let cfg = &self.layout.cfg;
        let (unit, threshold) = (cfg.unit_ns(), cfg.threshold() as u128);
        let mut merged = Vec::with_capacity(self.vectors.len());
        for (v, (a, o)) in self.vectors.iter().zip(&later.vectors).enumerate() {
            let dumped = later.sealed.iter().any(|e| e.head.vector as usize == v);
            if a.packets == 0 || (o.packets == 0 && !dumped) {
                merged.push(None);
                continue;
            }
            let fail = |why: &str| Err(format!("colate: vector {v}: {why}"));
            if dumped {
                return fail(
                    "the later recorder dumped it, so recording both streams would have dumped it at a packet the later one no longer has",
                );
            }
            let gap = o.base_ns.checked_sub(a.base_ns).filter(|d| d % unit == 0);
            let Some(gap) = gap.map(|d| d / unit) else {
                return fail(
                    "the later base is earlier, or not a whole number of units after this one: its relative timestamps cannot be moved to this base",
                );
            };
            if o.early_at.len() as u64 != o.early {
                return fail(
                    "the later recorder was decoded with packets older than its base, whose timestamps its epoch no longer has",
                );
            }
            // each packet of `o` adds its relative timestamp plus `gap`; an early one (0 in
            // `o`) adds its own timestamp against this base instead, and stays early if it is
            // older than this base too
            let mut cv = a.clone();
            let mut early: hashbrown::HashMap<u32, (u128, u128)> = hashbrown::HashMap::new();
            for &(i, ts) in &o.early_at {
                let e = early.entry(i).or_default();
                e.0 += 1;
                e.1 += ts.checked_sub(a.base_ns).map_or(0, |d| d / unit) as u128;
                if ts < a.base_ns {
                    cv.early += 1;
                    cv.early_at.push((i, ts));
                }
            }
            let mut sum = a.sum;
            for (i, (ts, count)) in o.cells.iter().enumerate() {
                if count == 0 {
                    continue;
                }
                let (k, own) = early.get(&(i as u32)).copied().unwrap_or_default();
                let extra = ts as u128 + (count as u128).saturating_sub(k) * gap as u128 + own;
                let (ats, acount) = cv.cells.get(i);
                let (Ok(total), Some(n)) = (
                    u64::try_from(ats as u128 + extra),
                    acount.checked_add(count),
                ) else {
                    return fail("a counter outgrows 64 bits");
                };
                if !cv.cells.put(i, total, n) {
                    return fail(
                        "a counter outgrows the spill: recording both streams would have dumped it within the later packets",
                    );
                }
                sum += extra;
            }
            if sum >= threshold {
                return fail(
                    "both streams' sum reaches T: recording them would have dumped it within the later packets",
                );
            }
            cv.sum = sum;
            cv.packets += o.packets;
            cv.first_ns = a.first_ns.min(o.first_ns);
            cv.last_ns = a.last_ns.max(o.last_ns);
            merged.push(Some(cv));
        }
        // nothing refused: commit
        for (v, m) in merged.into_iter().enumerate() {
            let o = std::mem::replace(&mut later.vectors[v], CounterVector::new(cfg));
            match m {
                Some(cv) => self.vectors[v] = cv,
                None if o.packets > 0 => self.vectors[v] = o,
                None => {}
            }
        }
        for e in later.sealed {
            let seq = self.seq;
            self.seq += 1;
            self.sealed.push(if e.head.seq == seq {
                e
            } else {
                let mut ep = e.decode();
                ep.head.seq = seq;
                let mut bytes = Vec::new();
                ep.encode(&mut bytes);
                Sealed {
                    head: ep.head,
                    bytes,
                    overflows: e.overflows,
                }
            });
        }
        self.packets += later.packets;
        self.dumps += later.dumps;
        self.overflow_dumps += later.overflow_dumps;
        Ok(())
    }

    /// A recorder holding epochs and no open vector (decoded): its tail of epochs below `T`,
    /// one per vector at most, in vector order and numbered on — the open vectors its payload
    /// dumped ([`snapshot_sealed`](Self::snapshot_sealed)) — reopened as vectors, and its
    /// numbering and counts of dumps set from the rest.
    fn reopen(&mut self) -> Result<(), String> {
        if self.open_packets() > 0 || self.sealed.is_empty() {
            return Ok(());
        }
        let cfg = &self.layout.cfg;
        let mut tail = self.sealed.len();
        while tail > 0 {
            let h = &self.sealed[tail - 1].head;
            let next = self.sealed.get(tail).map(|e| &e.head);
            if h.sum >= cfg.threshold() as u128
                || next.is_some_and(|n| n.vector <= h.vector || n.seq != h.seq.wrapping_add(1))
            {
                break;
            }
            tail -= 1;
        }
        let fits = |h: &EpochHead| {
            (h.vector as usize) < self.vectors.len()
                && (h.n, h.b, h.unit_ns) == (cfg.n(), cfg.b(), cfg.unit_ns())
        };
        if !self.sealed[tail..].iter().all(|e| fits(&e.head)) {
            return Err("colate: an epoch of another shape than the configuration's".into());
        }
        let mut reopened = Vec::with_capacity(self.sealed.len() - tail);
        for e in &self.sealed[tail..] {
            let ep = e.decode();
            let mut v = CounterVector::new(cfg);
            v.cells = Cells::new(
                cfg.n() as usize,
                cfg.ram_b(),
                cfg.count_bits(),
                cfg.spill() as usize,
            );
            for (i, (&ts, &count)) in ep.ts.iter().zip(&ep.counts).enumerate() {
                if !v.cells.put(i, ts, count) {
                    return Err("colate: an epoch's counter outgrows the spill".into());
                }
            }
            let h = &ep.head;
            (v.sum, v.packets, v.base_ns) = (h.sum, h.packets, h.base_ns);
            (v.first_ns, v.last_ns, v.early) = (h.first_ns, h.last_ns, h.early);
            v.early_at = self
                .carried_early
                .iter()
                .filter(|e| e.0 as usize == h.vector as usize)
                .map(|&(_, i, ts)| (i, ts))
                .collect();
            reopened.push((h.vector as usize, v));
        }
        // numbered on from the open vectors' first number, or from the last dump
        self.seq = match self.sealed.get(tail) {
            Some(e) => e.head.seq,
            None => self
                .sealed
                .last()
                .map_or(self.seq, |e| e.head.seq.wrapping_add(1)),
        };
        self.sealed.truncate(tail);
        for (v, cv) in reopened {
            self.vectors[v] = cv;
        }
        if self.dumps == 0 {
            let t = cfg.threshold() as u128;
            self.dumps = self.sealed.len() as u64;
            self.overflow_dumps = self.sealed.iter().filter(|e| e.head.sum < t).count() as u64;
        }
        Ok(())
    }

    /// The RAM of the vectors as configured ([`Config::memory`]) and as allocated now.
    pub fn memory(&self) -> Memory {
        let mut m = self.layout.cfg.memory();
        m.cell_bytes = self
            .vectors
            .iter()
            .map(|v| v.cells.cell_bytes() as u64)
            .sum();
        m
    }
}
