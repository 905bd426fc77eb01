//! Recovery aligned on the timestamps (owl's extension of §IV-C/D; `search=timestamps`).
//!
//! Algorithm 1 enumerates mappings blind: every position for every loss, every shift for every
//! move, by increasing error count. Its cost grows as `w^(losses)·(w·d)^(moves)`, so a group
//! holding a loss *and* a reordered packet — common on a router at 1 % loss — exhausts any
//! sensible budget, and a group with more than `E` errors is given up.
//!
//! The receiver, however, can decode the sender's timestamps (the second layer, §V-A) *before*
//! recovery: it then knows when each of the `w` positions was sent and when each of its own
//! `w′` packets arrived. On a FIFO-like path a received packet cannot arrive before it was
//! sent, and its delay looks like the other packets' delays, so lining the two sequences up —
//! a loss is a skipped sender position, a late packet a position whose packet comes a few
//! places later, an insertion a received packet of no position — says where the errors most
//! likely are. Where delays vary over many inter-packet gaps (a queue building up) the
//! timestamps alone leave a loss's position uncertain by several places, and with several
//! errors in a group the combinations multiply; so the sender also sends a few **label** bits
//! of each packet's hash in its sending order (`labels`, 2 by default, 0.25 B a packet): an
//! alignment may only match a received packet to a position of the same label, and a loss
//! misplaced by `δ` positions survives with probability `2^(−labels·δ)`. This module
//!
//! 1. scores an alignment by its likelihood: each matched packet's delay under the interval's
//!    delay distribution (a histogram of the delays of the groups that arrived whole), a loss
//!    at the measured loss rate, a late packet or an insertion as rare events;
//! 2. enumerates alignments from the most likely down — the `K` shortest paths of the
//!    alignment lattice (Jiménez & Marzal's recursive enumeration, lazily, so the `K`-th path
//!    costs little more than the first) — in lattices of growing size: losses only, then late
//!    packets within the shift bound, then insertions near the ends of the received list
//!    (packets of the neighbouring segments), then insertions anywhere;
//! 3. checks each exactly with the CAH: an insertion next to a loss is first tried as one
//!    reordered packet (§V-B, no unknown), the remaining losses are the unknowns of Eq. 5,
//!    solved and checked by the other rows (Eq. 6; [`cah::solve_checked`]). A wrong alignment
//!    passes a checking row with probability `1/p ≈ 4·10⁻¹⁹`, so the likelihood only orders the
//!    work: what is accepted is what the CAH proves.
//!
//! A group's losses are bounded by its rows (`α < k`, sized by the design loss rate), not by
//! `E`; every alignment considered counts against the group's cap as Algorithm 1's mappings
//! do, and its work (the lattice's nodes, the packets each alignment walks, the prefix sums it
//! adds) against the interval's budget. Groups larger than [`MAX_ALIGNED`] are left to the
//! paper's enumeration.

use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

use hashbrown::HashMap;

use super::cah::{self, Cah, MAX_ROWS};
use super::recovery::{
    Errors, GroupRecovery, Limits, Mapping, Meter, Unrecovered, arrived_whole, work,
};

/// Largest group aligned (the lattice holds `(w + 1)·(bandwidth)` nodes).
pub const MAX_ALIGNED: usize = 1 << 15;
/// Most packets of other segments (insertions) an alignment may contain.
pub const MAX_INSERTIONS: usize = 4;
/// Most alignments enumerated in one group, per stage: losses only, with late packets, with
/// insertions near the ends of the received list (packets of the segments before and after),
/// with insertions anywhere.
pub const STAGE_PATHS: [u64; 4] = [64, 1 << 10, 1 << 10, 1 << 12];
/// Largest shift (positions a late packet is overtaken by) the lattice models as a move; a
/// larger configured shift is searched as an insertion and a loss.
pub const MAX_SHIFT: usize = 32;
/// A priori chance that a packet arrives late (a move), that a received packet near either
/// end of its segment belongs to the segment before or after (an insertion), and that one
/// elsewhere does.
const P_MOVE: f64 = 1e-3;
const P_INSERT: f64 = 1e-4;
const P_INSERT_ANYWHERE: f64 = 1e-5;

/// The interval's delay distribution and error rates, as alignment costs (negative log
/// likelihoods, in nats).
#[derive(Clone, Debug)]
pub struct DelayModel {
    /// Smallest and median delay of the sample, ns.
    base: i64,
    median: i64,
    /// Width of the first bin, ns; bins grow geometrically, [`BINS_PER_OCTAVE`] per octave.
    unit: f64,
    /// Cost of a delay in each bin.
    cost: Vec<f64>,
    /// Cost of a delay below the sample's smallest, per `unit`, on top of the first bin's.
    below: f64,
    /// Cost of a matched packet besides its delay, of a loss, of a move (besides the late
    /// packet's delay), of an insertion near the ends of its segment.
    matched: f64,
    lost: f64,
    moved: f64,
    inserted: f64,
}

const BINS_PER_OCTAVE: f64 = 4.0;
const MAX_BINS: usize = 64 * 4;

impl DelayModel {
    /// The model of a sample of delays (any order) and the measured loss rate. With fewer
    /// than a few delays the distribution is flat above the smallest one.
    pub fn fit(delays: &mut [i64], loss_rate: f64) -> DelayModel {
        let p_l = loss_rate.clamp(1e-5, 0.5);
        delays.sort_unstable();
        let n = delays.len();
        let base = delays.first().copied().unwrap_or(0);
        let at = |q: f64| delays[((n - 1) as f64 * q) as usize];
        let unit = if n >= 16 {
            (((at(0.5) - base) as f64) / 64.0).max(16.0)
        } else {
            1_000.0
        };
        let bin = |u: f64| ((BINS_PER_OCTAVE * (1.0 + u / unit).log2()) as usize).min(MAX_BINS - 1);
        let mut counts = vec![0u64; MAX_BINS];
        for &d in delays.iter() {
            counts[bin((d - base) as f64)] += 1;
        }
        let last = counts.iter().rposition(|&c| c > 0).unwrap_or(0);
        let pseudo = 0.5;
        let total = n as f64 + pseudo * (last + 2) as f64;
        let cost: Vec<f64> = (0..MAX_BINS)
            .map(|b| {
                let lo = unit * ((b as f64 / BINS_PER_OCTAVE).exp2() - 1.0);
                let hi = unit * (((b + 1) as f64 / BINS_PER_OCTAVE).exp2() - 1.0);
                let c = if b <= last + 1 {
                    counts[b] as f64 + pseudo
                } else {
                    pseudo / (b - last) as f64
                };
                -(c / total / (hi - lo).max(1.0)).ln()
            })
            .collect();
        DelayModel {
            base,
            median: if n > 0 { at(0.5) } else { 0 },
            unit,
            below: 1.0,
            cost,
            matched: -(1.0 - p_l).ln(),
            lost: -p_l.ln(),
            moved: -P_MOVE.ln(),
            inserted: -P_INSERT.ln(),
        }
    }

    /// The sample's median delay, ns.
    pub fn median(&self) -> i64 {
        self.median
    }

    /// Cost of a matched packet with delay `d`.
    #[inline]
    fn delay_cost(&self, d: i64) -> f64 {
        let u = d.saturating_sub(self.base);
        if u < 0 {
            // below every delay seen: a packet does not arrive before it left
            return self.cost[0] + 10.0 + self.below * ((-u) as f64 / self.unit).min(1e6);
        }
        let b =
            ((BINS_PER_OCTAVE * (1.0 + u as f64 / self.unit).log2()) as usize).min(MAX_BINS - 1);
        self.cost[b]
    }
}

/// A candidate path into a node: its cost, the node it comes from and which of that node's
/// paths (1-based).
#[derive(Clone, Copy, Debug)]
struct Cand {
    cost: f64,
    from: u32,
    k: u32,
}

impl PartialEq for Cand {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Cand {}
impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Cand {
    /// Reversed (a min-heap), ties by node and index so the order is reproducible.
    fn cmp(&self, o: &Self) -> Ordering {
        o.cost
            .total_cmp(&self.cost)
            .then(o.from.cmp(&self.from))
            .then(o.k.cmp(&self.k))
    }
}

const NONE: u32 = u32::MAX;

/// The cost of each match `(i, j)` with `−below ≤ i − j ≤ above`, computed when a lattice
/// first asks for it and kept for every later stage's lattice (the first stage, losses only,
/// asks for a narrow band; the table spans the widest).
struct Costs {
    below: usize,
    width: usize,
    /// NaN until computed.
    table: Vec<Cell<f64>>,
}

impl Costs {
    fn new(w: usize, below: usize, above: usize) -> Costs {
        let width = below + above + 1;
        Costs {
            below,
            width,
            table: vec![Cell::new(f64::NAN); w * width],
        }
    }

    /// Cost of matching position `i` with received packet `j` (1-based); infinite when their
    /// labels differ.
    fn compute(i: usize, j: usize, p: &Points, model: &DelayModel) -> f64 {
        if !p.labels.is_empty() && p.labels[j - 1] != p.sent_labels[i - 1] {
            return f64::INFINITY;
        }
        let d = p.arrived[j - 1].wrapping_sub(p.sent[i - 1]) as i64;
        model.matched + model.delay_cost(d)
    }

    #[inline]
    fn get(&self, i: usize, j: usize, p: &Points, model: &DelayModel) -> f64 {
        let d = i as i64 - j as i64 + self.below as i64;
        if i >= 1 && (0..self.width as i64).contains(&d) {
            let cell = &self.table[(i - 1) * self.width + d as usize];
            let c = cell.get();
            if !c.is_nan() {
                return c;
            }
            let c = Self::compute(i, j, p, model);
            cell.set(c);
            c
        } else {
            Self::compute(i, j, p, model)
        }
    }
}

/// The alignment lattice of one group and its paths, best first.
///
/// Node `(i, j, s, p)`: the first `i` sender positions and `j` received packets are aligned;
/// `s = 1` if the last step was a loss; `p > 0` if position `i − p + 1` is *pending*: its
/// packet was overtaken and arrives later (a move, §V-B). Steps:
///
/// - a match of position `i + 1` with received packet `j + 1`;
/// - a loss of position `i + 1`;
/// - an insertion of received packet `j + 1` (a packet of no position here), only before the
///   losses between two matches, so that each alignment is one path;
/// - a deferral of position `i + 1` (when nothing is pending): its packet will come later;
/// - the late arrival of the pending packet as received packet `j + 1`, after at least one
///   later position and at most `d + 1` (the shift bound).
///
/// A path ends at `(w, w′)` with nothing pending. The offset `i − j` stays within
/// `[−MAX_INSERTIONS, losses + 1]`.
struct Lattice<'a> {
    w: usize,
    n: usize,
    /// Offsets `i − j` from `-ins` to `los`.
    ins: usize,
    los: usize,
    /// Largest `p`: a pending packet arrives after at most `d` later positions.
    most: usize,
    /// Insertions anywhere, not only near the ends of the received list.
    inserts_anywhere: bool,
    /// Values of `s`: 2 with insertions (they come before the losses between two matches), 1
    /// without (every step after a loss is then as after a match).
    flags: usize,
    pts: &'a Points<'a>,
    model: &'a DelayModel,
    /// Cost of an insertion.
    insert_cost: f64,
    /// Cost of each match.
    costs: &'a Costs,
    /// Shortest distance from the source, and the best predecessor.
    best: Vec<f64>,
    pred: Vec<u32>,
    /// Each node's index in `more` once its paths beyond the first are asked for (`NONE`
    /// before): a dense table, so the deep recursions of the enumeration hash nothing.
    slot: Vec<u32>,
    more: Vec<MorePaths>,
}

impl<'a> Lattice<'a> {
    fn band(&self) -> usize {
        self.ins + self.los + 1
    }

    fn id(&self, i: usize, j: usize, s: usize, p: usize) -> Option<u32> {
        let o = i as i64 - j as i64 + self.ins as i64;
        if i > self.w || j > self.n || o < 0 || o as usize >= self.band() || p > self.most {
            return None;
        }
        if s >= self.flags {
            return None;
        }
        let cell = (i * self.band() + o as usize) * self.flags + s;
        Some((cell * (self.most + 1) + p) as u32)
    }

    fn coords(&self, v: u32) -> (usize, usize, usize, usize) {
        // node numbers fit 32 bits (a lattice of at most MAX_ALIGNED positions), and 32-bit
        // division is the cheaper: the enumeration decodes every node of every path
        let (most, flags, band) = (
            (self.most + 1) as u32,
            self.flags as u32,
            self.band() as u32,
        );
        let (cell, p) = (v / most, v % most);
        let (r, s) = (cell / flags, cell % flags);
        let (i, o) = ((r / band) as usize, (r % band) as usize);
        (i, (i + self.ins) - o, s as usize, p as usize)
    }

    /// Whether received packet `j` (1-based) may be an insertion: a packet of the segment
    /// before or after, held or hurried across the delimiter by at most the shift bound, sits
    /// among the first or last packets of the segment at R.
    fn near_edge(&self, j: usize) -> bool {
        let edge = self.most.max(MAX_INSERTIONS);
        self.inserts_anywhere || j <= edge || j + edge > self.n
    }

    fn sink(&self) -> u32 {
        ((self.w + 1) * self.band() * self.flags * (self.most + 1)) as u32
    }

    /// Cost of matching position `i` with received packet `j` (1-based).
    fn match_cost(&self, i: usize, j: usize) -> f64 {
        self.costs.get(i, j, self.pts, self.model)
    }

    /// The in-edges of `v`: `(from, weight)`.
    fn edges_into(&self, v: u32, out: &mut Vec<(u32, f64)>) {
        out.clear();
        if v == self.sink() {
            for s in 0..2 {
                if let Some(u) = self.id(self.w, self.n, s, 0) {
                    out.push((u, 0.0));
                }
            }
            return;
        }
        let (i, j, s, p) = self.coords(v);
        self.relax_into(i, j, s, p, |e| out.push(e));
    }

    /// The in-edges of node `(i, j, s, p)` (not the sink), in [`Lattice::edges_into`]'s order,
    /// each given to `f`: the build relaxes them without decoding the node or keeping a list.
    #[inline]
    fn relax_into(&self, i: usize, j: usize, s: usize, p: usize, mut f: impl FnMut((u32, f64))) {
        // the pending state before a step that advanced i: none stays none, p came from p − 1
        let before = match p {
            0 => Some(0),
            1 => None,
            p => Some(p - 1),
        };
        let loss_into = self.flags - 1;
        if s == loss_into {
            if i >= 1
                && let Some(pb) = before
            {
                for s2 in 0..2 {
                    if let Some(u) = self.id(i - 1, j, s2, pb) {
                        f((u, self.model.lost));
                    }
                }
            }
            if self.flags == 2 {
                return;
            }
        }
        if i >= 1
            && j >= 1
            && let Some(pb) = before
        {
            let c = self.match_cost(i, j);
            for s2 in 0..2 {
                if c.is_finite()
                    && let Some(u) = self.id(i - 1, j - 1, s2, pb)
                {
                    f((u, c));
                }
            }
        }
        if j >= 1
            && self.flags == 2
            && self.near_edge(j)
            && let Some(u) = self.id(i, j - 1, 0, p)
        {
            f((u, self.insert_cost));
        }
        if p == 1 && i >= 1 {
            for s2 in 0..2 {
                if let Some(u) = self.id(i - 1, j, s2, 0) {
                    f((u, self.model.moved));
                }
            }
        }
        if p == 0 && j >= 1 {
            for pp in 2..=self.most.min(i) {
                let c = self.match_cost(i + 1 - pp, j);
                for s2 in 0..2 {
                    if c.is_finite()
                        && let Some(u) = self.id(i, j - 1, s2, pp)
                    {
                        f((u, c));
                    }
                }
            }
        }
    }

    /// The lattice's shape, unbuilt: what it will cost is [`Lattice::nodes`].
    #[allow(clippy::too_many_arguments)]
    fn new(
        w: usize,
        n: usize,
        ins: usize,
        los: usize,
        shift: usize,
        inserts_anywhere: bool,
        pts: &'a Points<'a>,
        model: &'a DelayModel,
        costs: &'a Costs,
    ) -> Lattice<'a> {
        Lattice {
            w,
            n,
            ins: ins.min(n),
            los,
            most: if shift == 0 {
                0
            } else {
                (shift + 1).min(MAX_SHIFT + 1)
            },
            inserts_anywhere,
            flags: if ins > 0 || inserts_anywhere { 2 } else { 1 },
            pts,
            model,
            insert_cost: if inserts_anywhere {
                -P_INSERT_ANYWHERE.ln()
            } else {
                model.inserted
            },
            costs,
            best: Vec::new(),
            pred: Vec::new(),
            slot: Vec::new(),
            more: Vec::new(),
        }
    }

    /// Nodes of the lattice (what [`Lattice::build`] relaxes).
    fn nodes(&self) -> u64 {
        u64::from(self.sink()) + 1
    }

    /// Shortest paths into every node.
    fn build(mut self) -> Lattice<'a> {
        let l = &mut self;
        let (w, n, los) = (l.w, l.n, l.los);
        let nodes = l.sink() as usize + 1;
        l.best = vec![f64::INFINITY; nodes];
        l.pred = vec![NONE; nodes];
        l.slot = vec![NONE; nodes];
        // shortest paths (Viterbi): nodes in order of i, then j (every edge goes to a larger
        // i, or the same i and a larger j)
        let mut edges = Vec::with_capacity(8);
        let src = l.id(0, 0, 0, 0).expect("the source is in the band");
        l.best[src as usize] = 0.0;
        for i in 0..=w {
            let j_lo = i.saturating_sub(los);
            let j_hi = (i + l.ins).min(n);
            for j in j_lo..=j_hi {
                for s in 0..2 {
                    for p in 0..=l.most {
                        let Some(v) = l.id(i, j, s, p) else { continue };
                        if v == src {
                            continue;
                        }
                        let (mut bv, mut pv) = (l.best[v as usize], l.pred[v as usize]);
                        l.relax_into(i, j, s, p, |(u, c)| {
                            let t = l.best[u as usize] + c;
                            if t < bv {
                                bv = t;
                                pv = u;
                            }
                        });
                        l.best[v as usize] = bv;
                        l.pred[v as usize] = pv;
                    }
                }
            }
        }
        let sink = l.sink();
        l.edges_into(sink, &mut edges);
        for &(u, c) in &edges {
            let t = l.best[u as usize] + c;
            if t < l.best[sink as usize] {
                l.best[sink as usize] = t;
                l.pred[sink as usize] = u;
            }
        }
        self
    }

    /// Path `k` (1-based) into `v`, if there is one.
    fn path(&self, v: u32, k: u32) -> Option<Cand> {
        if k == 1 {
            let b = self.best[v as usize];
            return b.is_finite().then_some(Cand {
                cost: b,
                from: self.pred[v as usize],
                k: 1,
            });
        }
        let m = self.more.get(self.slot[v as usize] as usize)?;
        m.paths.get(k as usize - 2).copied()
    }

    fn known(&self, v: u32) -> u32 {
        self.more
            .get(self.slot[v as usize] as usize)
            .map_or(0, |m| m.paths.len() as u32)
            + u32::from(self.best[v as usize].is_finite())
    }

    fn done(&self, v: u32) -> bool {
        self.more
            .get(self.slot[v as usize] as usize)
            .is_some_and(|m| m.done)
    }

    /// `v`'s entry in `more`, made on first use.
    fn more_of(&mut self, v: u32) -> &mut MorePaths {
        let s = &mut self.slot[v as usize];
        if *s == NONE {
            *s = self.more.len() as u32;
            self.more.push(MorePaths::default());
        }
        &mut self.more[*s as usize]
    }

    /// Compute path `k0` into `v0` (Jiménez & Marzal's NextPath, with an explicit stack: a
    /// path is as long as the group).
    fn next_path(&mut self, v0: u32, k0: u32) {
        let mut stack = vec![(v0, k0)];
        let mut edges = Vec::with_capacity(8);
        while let Some(&(v, k)) = stack.last() {
            if self.known(v) >= k || self.done(v) || k == 1 {
                stack.pop();
                continue;
            }
            if !self.best[v as usize].is_finite() {
                self.more_of(v).done = true;
                stack.pop();
                continue;
            }
            let prev = self.path(v, k - 1).expect("paths are computed in order");
            if !self.more_of(v).heap_built {
                let mut h = BinaryHeap::new();
                self.edges_into(v, &mut edges);
                for &(u, c) in &edges {
                    let b = self.best[u as usize];
                    if b.is_finite() && u != self.pred[v as usize] {
                        h.push(Cand {
                            cost: b + c,
                            from: u,
                            k: 1,
                        });
                    }
                }
                let m = self.more_of(v);
                m.heap = h;
                m.heap_built = true;
            }
            if prev.from != NONE {
                let u = prev.from;
                let want = prev.k + 1;
                if self.known(u) < want && !self.done(u) {
                    stack.push((u, want));
                    continue;
                }
                if let Some(p) = self.path(u, want) {
                    // the edge's weight: the previous path's cost less its prefix's
                    let c = prev.cost - self.path(u, prev.k).expect("a path's prefix").cost;
                    self.more_of(v).heap.push(Cand {
                        cost: p.cost + c,
                        from: u,
                        k: want,
                    });
                }
            }
            let m = self.more_of(v);
            match m.heap.pop() {
                Some(c) => m.paths.push(c),
                None => m.done = true,
            }
            stack.pop();
        }
    }

    /// The `k`-th best alignment, or `false` past the last.
    fn alignment(&mut self, k: u32, out: &mut Alignment) -> bool {
        let sink = self.sink();
        self.next_path(sink, k);
        let Some(mut c) = self.path(sink, k) else {
            return false;
        };
        out.clear(self.n);
        let mut v = sink;
        loop {
            let u = c.from;
            if u == NONE {
                break;
            }
            if v != sink {
                let (i, j, _, p) = self.coords(v);
                let (iu, ju, _, pu) = self.coords(u);
                if iu + 1 == i && ju + 1 == j {
                    out.position[j - 1] = i as u32;
                } else if iu + 1 == i {
                    // a loss, or a deferral whose packet is the late arrival further on
                    if p != 1 {
                        out.lost.push(i as u32);
                    }
                } else if pu >= 2 && p == 0 {
                    out.position[j - 1] = (i + 1 - pu) as u32;
                    out.moved += 1;
                } else {
                    debug_assert!(iu == i && ju + 1 == j);
                    out.inserted.push((j - 1) as u32);
                    out.position[j - 1] = 0;
                }
            }
            v = u;
            c = self.path(u, c.k).expect("a path's prefix exists");
        }
        out.lost.reverse();
        out.inserted.reverse();
        true
    }
}

/// A node's paths beyond its best, the candidates for the next, and whether there are no
/// more.
#[derive(Debug, Default)]
struct MorePaths {
    paths: Vec<Cand>,
    heap: BinaryHeap<Cand>,
    heap_built: bool,
    done: bool,
}

/// One alignment of a group.
#[derive(Clone, Debug, Default)]
struct Alignment {
    /// Lost sender positions (1-based), increasing.
    lost: Vec<u32>,
    /// Inserted received packets (0-based), increasing.
    inserted: Vec<u32>,
    /// Each received packet's sender position (0 for an insertion).
    position: Vec<u32>,
    /// Late arrivals (moves).
    moved: u32,
}

impl Alignment {
    fn clear(&mut self, n: usize) {
        self.lost.clear();
        self.inserted.clear();
        self.position.clear();
        self.position.resize(n, 0);
        self.moved = 0;
    }
}

/// Row sums of the received packets' columns at a constant offset, computed when an alignment
/// first needs the offset: `pre[o][t·k + x]` is row `x` of the sum over received packets
/// `0..t` of the column at position `t + 1 + o`.
struct Prefix<'a> {
    k: usize,
    w: usize,
    xs: &'a [u64],
    aug: &'a dyn Fn(u64, u64) -> u64,
    pre: HashMap<i64, Vec<u64>>,
    /// Columns computed so far (the work of [`Prefix::sum`]).
    columns: u64,
}

impl Prefix<'_> {
    fn sum(&mut self, o: i64, from: usize, to: usize, acc: &mut [u64; MAX_ROWS]) {
        let k = self.k;
        if to - from <= 2 {
            // a late packet or two: their own columns
            self.columns += (to - from) as u64;
            for t in from..to {
                let q = (t as i64 + 1 + o) as u64;
                let c = cah::column(k, q, (self.aug)(self.xs[t], q));
                for x in 0..k {
                    acc[x] = cah::add(acc[x], c[x]);
                }
            }
            return;
        }
        let (xs, w, aug) = (self.xs, self.w, self.aug);
        // the sums are extended as far as an alignment asks, not over the whole group
        let p = self.pre.entry(o).or_insert_with(|| vec![0u64; k]);
        let mut t = p.len() / k - 1;
        if t < to {
            self.columns += (to - t) as u64;
            p.resize((to + 1) * k, 0);
            while t < to {
                let pos = t as i64 + 1 + o;
                let (a, b) = (t * k, (t + 1) * k);
                if (1..=w as i64).contains(&pos) {
                    let c = cah::column(k, pos as u64, aug(xs[t], pos as u64));
                    for x in 0..k {
                        p[b + x] = cah::add(p[a + x], c[x]);
                    }
                } else {
                    p.copy_within(a..a + k, b);
                }
                t += 1;
            }
        }
        for x in 0..k {
            acc[x] = cah::add(acc[x], cah::sub(p[to * k + x], p[from * k + x]));
        }
    }
}

/// What the receiver knows of one group's packets at both points: the sender's timestamps and
/// labels by position, its own packets' arrival times and labels in received order. Labels are
/// empty when the configuration has none.
pub struct Points<'a> {
    pub sent: &'a [u64],
    pub sent_labels: &'a [u8],
    pub arrived: &'a [u64],
    pub labels: &'a [u8],
}

/// Recover one group by alignment: the sender's CAH `b` (`k` rows) over `w` packets, the
/// received packets' hashes `xs` (in received order), and the timestamps and labels of both.
#[allow(clippy::too_many_arguments)]
pub fn recover_aligned(
    b: &Cah,
    k: usize,
    w: usize,
    xs: &[u64],
    pts: &Points,
    model: &DelayModel,
    aug: &dyn Fn(u64, u64) -> u64,
    limits: &Limits,
) -> GroupRecovery {
    let k = k.clamp(1, MAX_ROWS);
    let n = xs.len();
    debug_assert_eq!(pts.arrived.len(), n);
    debug_assert_eq!(pts.sent.len(), w);
    // Level 0: w′ = w and B′ = B (§IV-C), one mapping tested when the counts agree
    let mut tested = u64::from(n == w);
    let mut meter = Meter::new(limits.max_work);
    if n == w && !meter.take((k * w) as u64 * work::WHOLE_ROW) {
        return GroupRecovery::of(Err(Unrecovered::Budget), 0, &meter);
    }
    if let Some(m) = arrived_whole(b, k, w, xs, aug) {
        return GroupRecovery::of(Ok(m), tested, &meter);
    }
    // unknowns are the losses left once moves are paired: fewer than k
    if w > n + (k - 1) || n > w + MAX_INSERTIONS {
        return GroupRecovery::of(Err(Unrecovered::TooManyErrors), tested, &meter);
    }
    let mut pre = Prefix {
        k,
        w,
        xs,
        aug,
        pre: HashMap::new(),
        columns: 0,
    };
    let mut al = Alignment::default();
    let cap = limits.max_mappings;
    let mut result = Err(Unrecovered::NoMapping);
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let mut near = Variants::default();
    // the likely errors first, in lattices of growing size: losses only (and the insertions
    // the counts force), then late packets, then packets of other segments
    let must_insert = n.saturating_sub(w);
    let losses_max = (k - 1).min(w);
    let mut stages = vec![
        (must_insert, 0, false, STAGE_PATHS[0]),
        (must_insert, limits.shift, false, STAGE_PATHS[1]),
        (MAX_INSERTIONS, limits.shift, false, STAGE_PATHS[2]),
        (MAX_INSERTIONS, limits.shift, true, STAGE_PATHS[3]),
    ];
    let most = limits.shift.min(MAX_SHIFT) + 1;
    let (below, above) = (MAX_INSERTIONS + most, losses_max + MAX_INSERTIONS + 1);
    if !meter.take((w * (below + above + 1)) as u64 * work::COST_CELL) {
        return GroupRecovery::of(Err(Unrecovered::Budget), tested, &meter);
    }
    let costs = Costs::new(w, below, above);
    // a stage identical to the one before it adds nothing
    stages.dedup_by(|later, earlier| later.0 == earlier.0 && later.1 == earlier.1 && !later.2);
    let lattice = |&(ins, shift, anywhere, _): &(usize, usize, bool, u64)| {
        // the offset i − j runs from −ins to the losses: w − n + ins at the end, at most
        // k − 1 + ins on the way (one more while a late packet is pending)
        let los = if anywhere || ins > must_insert {
            losses_max + ins
        } else {
            (w + ins).saturating_sub(n)
        }
        .min(w)
            + usize::from(shift > 0);
        Lattice::new(w, n, ins, los, shift, anywhere, pts, model, &costs)
    };
    'stages: for spec in &stages {
        let paths = spec.3;
        let lat = lattice(spec);
        if !meter.take(lat.nodes() * work::LATTICE_NODE) {
            result = Err(Unrecovered::Budget);
            break 'stages;
        }
        let mut lat = lat.build();
        for p in 1..=paths as u32 {
            // every alignment considered counts against the cap, tested or not, and walks
            // the group
            if tested >= cap {
                result = Err(Unrecovered::Cap);
                break 'stages;
            }
            if !meter.take((w + n) as u64 * work::ALIGNED_PACKET) {
                result = Err(Unrecovered::Budget);
                break 'stages;
            }
            if !lat.alignment(p, &mut al) {
                break;
            }
            tested += 1;
            if al.lost.len() > k - 1 + al.inserted.len() {
                continue;
            }
            // the matched packets, by runs of constant offset
            let mut matched = [0u64; MAX_ROWS];
            let mut t = 0;
            while t < n {
                if al.position[t] == 0 {
                    t += 1;
                    continue;
                }
                let o = al.position[t] as i64 - (t as i64 + 1);
                let mut e = t + 1;
                while e < n && al.position[e] != 0 && al.position[e] as i64 - (e as i64 + 1) == o {
                    e += 1;
                }
                pre.sum(o, t, e, &mut matched);
                t = e;
            }
            if !meter.take(std::mem::take(&mut pre.columns) * k as u64 * work::PREFIX_ROW) {
                result = Err(Unrecovered::Budget);
                break 'stages;
            }
            // each insertion may be a packet moved from a lost position nearby (§V-B): try the
            // pairings with the most moves first, then fewer
            let reach = limits.shift + (w + spec.0).saturating_sub(n);
            near.clear();
            for &j in &al.inserted {
                near.add_insertion(
                    al.lost
                        .iter()
                        .copied()
                        .filter(|&q| (q as i64 - (j as i64 + 1)).unsigned_abs() as usize <= reach),
                );
            }
            near.enumerate();
            let looked = (al.inserted.len() * al.lost.len()) as u64 * work::NEAR
                + near.moves.len() as u64 * work::VARIANT;
            if !meter.take(looked) {
                result = Err(Unrecovered::Budget);
                break 'stages;
            }
            // a pairing of `c` moves leaves `lost − c` unknowns: fewer than k are solvable
            let fewest = al.lost.len().saturating_sub(k - 1);
            for (vi, v) in near.in_order() {
                if near.moves[v] < fewest {
                    continue;
                }
                pairs.clear();
                for (i, &c) in near.state(v).iter().enumerate() {
                    if c > 0 {
                        pairs.push((al.inserted[i], near.cand(i, c as usize - 1)));
                    }
                }
                // a position paired twice is no mapping
                if (1..pairs.len()).any(|a| pairs[..a].iter().any(|p| p.1 == pairs[a].1)) {
                    continue;
                }
                let mut unknown = [0u64; MAX_ROWS];
                let mut nu = 0;
                for &q in &al.lost {
                    if !pairs.iter().any(|p| p.1 == q) {
                        unknown[nu] = q as u64;
                        nu += 1;
                    }
                }
                debug_assert!(nu < k);
                if vi > 0 {
                    if tested >= cap {
                        result = Err(Unrecovered::Cap);
                        break 'stages;
                    }
                    if !meter.take(k as u64 * work::VARIANT_ROW) {
                        result = Err(Unrecovered::Budget);
                        break 'stages;
                    }
                    tested += 1;
                }
                let mut res = [0u64; MAX_ROWS];
                for x in 0..k {
                    res[x] = cah::sub(b[x], matched[x]);
                }
                for &(j, q) in &pairs {
                    let c = cah::column(k, q as u64, aug(xs[j as usize], q as u64));
                    for x in 0..k {
                        res[x] = cah::sub(res[x], c[x]);
                    }
                }
                if let Some(u) = cah::solve_checked(&unknown[..nu], &res[..k]) {
                    let mut sigma = al.position.clone();
                    for &(j, q) in &pairs {
                        sigma[j as usize] = q;
                    }
                    result = Ok(Mapping {
                        sigma,
                        lost: unknown[..nu].iter().map(|&q| q as u32).zip(u).collect(),
                        errors: Errors {
                            lost: nu as u32,
                            inserted: (al.inserted.len() - pairs.len()) as u32,
                            moved: al.moved + pairs.len() as u32,
                        },
                    });
                    break 'stages;
                }
            }
        }
    }
    GroupRecovery::of(result, tested, &meter)
}

/// Most pairings of an alignment's insertions with lost positions tried.
const MAX_VARIANTS: usize = 64;

/// The pairings of an alignment's insertions with the lost positions near each (§V-B): the
/// first [`MAX_VARIANTS`] states of the odometer over each insertion's candidates (0: not a
/// move, `c`: moved from its `c`-th candidate), tried with the most moves first (in odometer
/// order among as many). Its buffers are kept from one alignment to the next.
#[derive(Debug, Default)]
struct Variants {
    /// Insertions.
    len: usize,
    /// Insertion `i`'s candidates: `cands[start[i]..start[i + 1]]`.
    start: Vec<usize>,
    cands: Vec<u32>,
    /// State `s`'s digits: `states[s·len..(s + 1)·len]`; its moves: `moves[s]`.
    states: Vec<u32>,
    moves: Vec<usize>,
}

impl Variants {
    fn clear(&mut self) {
        self.len = 0;
        self.start.clear();
        self.start.push(0);
        self.cands.clear();
        self.states.clear();
        self.moves.clear();
    }

    fn add_insertion(&mut self, near: impl Iterator<Item = u32>) {
        self.cands.extend(near);
        self.start.push(self.cands.len());
        self.len += 1;
    }

    fn cand(&self, i: usize, c: usize) -> u32 {
        self.cands[self.start[i] + c]
    }

    /// The odometer's first states (the first digit turning fastest).
    fn enumerate(&mut self) {
        let len = self.len;
        let mut v = vec![0u32; len];
        let mut moves = 0;
        loop {
            self.states.extend_from_slice(&v);
            self.moves.push(moves);
            if self.moves.len() >= MAX_VARIANTS {
                break;
            }
            let mut d = 0;
            while d < len {
                v[d] += 1;
                if v[d] as usize <= self.start[d + 1] - self.start[d] {
                    moves += usize::from(v[d] == 1);
                    break;
                }
                // a digit with no candidate never left 0
                moves -= usize::from(v[d] > 1);
                v[d] = 0;
                d += 1;
            }
            if d == len {
                break;
            }
        }
    }

    /// The states with the most moves first, ties in odometer order: `(rank, state)`.
    fn in_order(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let most = self.moves.iter().copied().max().unwrap_or(0);
        (0..=most)
            .rev()
            .flat_map(move |m| (0..self.moves.len()).filter(move |&s| self.moves[s] == m))
            .enumerate()
    }

    /// State `s`'s digits.
    fn state(&self, s: usize) -> &[u32] {
        &self.states[s * self.len..(s + 1) * self.len]
    }
}
