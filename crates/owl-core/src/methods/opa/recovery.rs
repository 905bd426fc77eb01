//! OPA recovery (§IV-C/D, Algorithm 1; §V-B; §VI-A Eq. 10): the positions at S of one group's
//! received packets, and the positions of its lost ones, from the sender's tuple `(B, w)`.
//!
//! # Mappings
//!
//! A mapping σ gives each received packet its 1-based position at S, or 0 for a packet S did
//! not put in this group (Definition 1). owl enumerates σ as a few *errors* away from the
//! order-preserving mapping:
//!
//! - a **loss**: a position of S no received packet takes (its augmented hash is an unknown of
//!   Eq. 4);
//! - an **insertion**: a received packet of no position (σ_j = 0: a packet of another segment
//!   or interval, or one S never saw);
//! - a **move**: a received packet `j` placed at a position `q` with `|q − j| ≤ d`, the shift
//!   bound of §V-B (reordering).
//!
//! Every other received packet keeps the received order. A hypothesis with `a` losses and `r`
//! insertions must satisfy `w − w′ = a − r`, and at most `k − 1` of its positions may be
//! unknown (α < k, §IV-D): the first α rows of `B − A_σ·H_σ` give the unknowns (the mapping
//! equation, Eq. 5, a Vandermonde system), the remaining `k − α` rows check them (the checking
//! equation, Eq. 6). Moves and insertions add no unknown, so they are checked by all `k − α`
//! rows.
//!
//! # Cost, and its cap
//!
//! Hypotheses are tried by increasing number of errors, cheapest pattern first, and stop at the
//! first that checks. Each costs `O(k·(errors + 1))` field operations: the received packets'
//! augmented hashes at every shift `−E…E` are summed into prefix sums once per group (`E` the
//! error budget), so a hypothesis adds a few runs of constant shift. The budget is the paper's
//! §VI-A: groups with more than `E` errors are not recovered (Eq. 10, the paper's
//! implementation uses two), and a hard cap on the mappings tested per group bounds the work
//! whatever the input (hostile or heavily reordered traffic): a group past it is reported
//! unrecovered with its packet counts, never searched further. Every step is also counted in
//! [`work`] units (about a nanosecond of one core each) against [`Limits::max_work`], what is
//! left of the interval's budget (owl's: a share of a core per second of traffic,
//! [`super::Config::cpu`], for the whole pair side), so that recovery's time follows the
//! traffic, not the errors.

use super::cah::{self, Cah, MAX_ROWS};

/// How far recovery searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `E`: most errors (losses + insertions + moves) considered in a group (§VI-A).
    pub max_errors: usize,
    /// `d`: most positions a reordered packet moved within its group (§V-B).
    pub shift: usize,
    /// Most mappings tested in one group.
    pub max_mappings: u64,
    /// Most work, in [`work`] steps, one group may spend: what is left of the interval's
    /// budget (`u64::MAX` for none).
    pub max_work: u64,
}

/// What a recovery's steps cost, in units of about a nanosecond of one core: the interval's
/// budget is counted in these, so the time recovery takes follows the traffic whatever the
/// errors, the group sizes or the search. Fitted (`scripts/opa-budget.sh`, `owl estimate` at
/// `--threads 1`) so that the CPU time of the whole pair side, over the steps it counted, is
/// about one nanosecond a step on the demo's pair, 1 Mpps FIFO pairs at 10⁻³ and 10⁻² loss,
/// and pairs with independent per-packet delays, for both `opa` and `opa-wavelet`.
pub mod work {
    /// One node of an alignment lattice, built (its in-edges relaxed).
    pub const LATTICE_NODE: u64 = 12;
    /// One packet (sent or received) of an alignment, enumerated and walked.
    pub const ALIGNED_PACKET: u64 = 24;
    /// One row of one pairing of late packets with lost positions tried on an alignment.
    pub const VARIANT_ROW: u64 = 6;
    /// One row of one mapping of Algorithm 1's enumeration.
    pub const MAPPING_ROW: u64 = 12;
    /// One order-preserving run of a mapping Algorithm 1 tests, walked (a run between two of
    /// its errors).
    pub const MAPPING_RUN: u64 = 10;
    /// One row of one received packet's column at one position, in prefix sums (Algorithm
    /// 1's at every shift, an alignment's at each of its offsets).
    pub const PREFIX_ROW: u64 = 7;
    /// One row of one packet of the exact check of §IV-C (`B′ = B`).
    pub const WHOLE_ROW: u64 = 5;
    /// One row of one kept packet of the running sum a scan of the last loss starts from
    /// (Algorithm 1).
    pub const SCAN_ROW: u64 = 7;
    /// One cell of an alignment's table of match costs (made once a group).
    pub const COST_CELL: u64 = 1;
    /// One pairing of an alignment's insertions with lost positions, enumerated.
    pub const VARIANT: u64 = 12;
    /// One (insertion, lost position) pair looked at to find an insertion's candidates.
    pub const NEAR: u64 = 2;
    /// One packet of a group's lists for its search (hashes, arrival times, labels), each
    /// time it is searched.
    pub const JOB_PACKET: u64 = 9;
    /// One solved position an insertion's hash is looked up at (re-matching across
    /// delimiters).
    pub const REMATCH: u64 = 24;
    /// Fixed costs an interval's pair side has whatever the budget: a sender packet
    /// (decoding its timestamp and label, the entropy of the gaps, its fate in the output, the
    /// estimate's sort), a received packet (its hash, the duplicate check, R's lists and the
    /// delay model), a group of a segment at either point.
    pub const SENT_PACKET: u64 = 170;
    pub const RECEIVED_PACKET: u64 = 95;
    pub const GROUP: u64 = 200;
}

/// The work a group's search spent, beside its limit.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Meter {
    pub spent: u64,
    /// The largest total the search asked for: what it spent and the step it was about to
    /// take. A search given at least this much takes the same steps.
    pub reached: u64,
    pub limit: u64,
}

impl Meter {
    pub fn new(limit: u64) -> Meter {
        Meter {
            spent: 0,
            reached: 0,
            limit,
        }
    }

    /// Spend `c`, or `false` (nothing spent) when it would exceed the limit.
    #[inline]
    pub fn take(&mut self, c: u64) -> bool {
        let t = self.spent.saturating_add(c);
        self.reached = self.reached.max(t);
        if t > self.limit {
            return false;
        }
        self.spent = t;
        true
    }
}

/// The errors a recovered mapping found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Errors {
    pub lost: u32,
    pub inserted: u32,
    pub moved: u32,
}

impl Errors {
    pub fn total(&self) -> u32 {
        self.lost + self.inserted + self.moved
    }
}

/// A mapping that satisfies every row of the group's CAH.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// σ: the 1-based position at S of each received packet, 0 for none.
    pub sigma: Vec<u32>,
    /// The lost positions and their augmented hashes, solved from Eq. 5.
    pub lost: Vec<(u32, u64)>,
    pub errors: Errors,
}

/// Why a group was not recovered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unrecovered {
    /// `|w − w′|` exceeds the error budget: no mapping within it exists.
    TooManyErrors,
    /// The cap on mappings per group was reached first.
    Cap,
    /// The interval's work budget ran out first.
    Budget,
    /// No mapping within the budget checks (more errors, or reordering beyond the shift).
    NoMapping,
}

/// What recovery found for one group, and the mappings it tested (Algorithm 1's loops, the
/// computation overhead of §VI-A).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRecovery {
    pub result: Result<Mapping, Unrecovered>,
    pub tested: u64,
    /// Work spent, in [`work`] steps, and the most the search asked for (what it spent and the
    /// step it was about to take): the same search under any limit of at least `reached`
    /// finds the same.
    pub work: u64,
    pub reached: u64,
}

impl GroupRecovery {
    pub(super) fn of(
        result: Result<Mapping, Unrecovered>,
        tested: u64,
        meter: &Meter,
    ) -> GroupRecovery {
        GroupRecovery {
            result,
            tested,
            work: meter.spent,
            reached: meter.reached,
        }
    }
}

/// Level 0 (§IV-C): `w′ = w` and `B′ = B`, every packet arrived and in order — the identity
/// mapping, or `None` (one mapping tested when `w′ = w`).
pub fn arrived_whole(
    b: &Cah,
    k: usize,
    w: usize,
    xs: &[u64],
    aug: &dyn Fn(u64, u64) -> u64,
) -> Option<Mapping> {
    if xs.len() != w {
        return None;
    }
    let mut bb = [0u64; MAX_ROWS];
    for (i, &x) in xs.iter().enumerate() {
        let j = i as u64 + 1;
        cah::accumulate(&mut bb, k, j, aug(x, j));
    }
    (bb[..k] == b[..k]).then(|| Mapping {
        sigma: (1..=w as u32).collect(),
        lost: Vec::new(),
        errors: Errors::default(),
    })
}

/// Recover one group: the sender's CAH `b` (rows `0..k`) over `w` packets, the received
/// packets' hashes `xs` in received order, and the augmented hash `aug(x, j)` both points use.
pub fn recover(
    b: &Cah,
    k: usize,
    w: usize,
    xs: &[u64],
    aug: &dyn Fn(u64, u64) -> u64,
    limits: &Limits,
) -> GroupRecovery {
    let k = k.clamp(1, MAX_ROWS);
    let limits = &Limits {
        max_errors: limits.max_errors.min(MAX_ERRORS),
        ..*limits
    };
    let n = xs.len();
    let mut meter = Meter::new(limits.max_work);
    if n == w && !meter.take((k * w) as u64 * work::WHOLE_ROW) {
        return GroupRecovery::of(Err(Unrecovered::Budget), 0, &meter);
    }
    if let Some(m) = arrived_whole(b, k, w, xs, aug) {
        return GroupRecovery::of(Ok(m), 1, &meter);
    }
    let delta = w as i64 - n as i64;
    let e_max = limits.max_errors;
    if delta.unsigned_abs() as usize > e_max {
        return GroupRecovery::of(Err(Unrecovered::TooManyErrors), u64::from(n == w), &meter);
    }
    // the prefix sums at every shift, then a few rows a mapping
    if !meter.take(((2 * e_max + 1) * n * k) as u64 * work::PREFIX_ROW) {
        return GroupRecovery::of(Err(Unrecovered::Budget), u64::from(n == w), &meter);
    }
    let mut s = Search::new(b, k, w, xs, aug, limits, meter);
    s.tested = u64::from(n == w);
    for e in 1..=e_max {
        let mut patterns = Vec::new();
        for m in 0..=e {
            // a + r − m = e, a − r = delta
            let twice_a = e as i64 + m as i64 + delta;
            if twice_a < 0 || twice_a % 2 != 0 {
                continue;
            }
            let a = (twice_a / 2) as usize;
            let Some(r) = (a as i64 - delta).try_into().ok() else {
                continue;
            };
            let r: usize = r;
            if m > a.min(r) || a - m >= k || (m > 0 && limits.shift == 0) {
                continue;
            }
            if a > w || r > n {
                continue;
            }
            patterns.push((s.cost(a, r, m), a, r, m));
        }
        patterns.sort_by(|x, y| x.0.total_cmp(&y.0));
        for (_, a, r, m) in patterns {
            match s.pattern(a, r, m) {
                Step::Found(map) => return GroupRecovery::of(Ok(map), s.tested, &s.meter),
                Step::Stop(why) => return GroupRecovery::of(Err(why), s.tested, &s.meter),
                Step::Next => {}
            }
        }
    }
    GroupRecovery::of(Err(Unrecovered::NoMapping), s.tested, &s.meter)
}

/// Check one explicit mapping σ (1-based positions, 0 for an insertion) against the CAH: the
/// lost positions' solved hashes (Eq. 5) and, for each checking row (Eq. 6), the row of
/// `A·H` with the solved hashes filled in, beside the sender's `b_x`. `None` when σ is not a mapping into `1..=w` or leaves `k` or more unknowns.
/// What [`check_mapping`] finds: the solved `(position, hash)` of each lost packet, and each
/// checking row's `(A·H, b_x)`.
pub type Checked = (Vec<(u32, u64)>, Vec<(u64, u64)>);

pub fn check_mapping(
    b: &Cah,
    k: usize,
    w: usize,
    xs: &[u64],
    sigma: &[u32],
    aug: &dyn Fn(u64, u64) -> u64,
) -> Option<Checked> {
    let mut taken = vec![false; w + 1];
    let mut acc = [0u64; MAX_ROWS];
    for (&x, &q) in xs.iter().zip(sigma) {
        if q == 0 {
            continue;
        }
        let q = q as usize;
        if q > w || taken[q] {
            return None;
        }
        taken[q] = true;
        let c = cah::column(k, q as u64, aug(x, q as u64));
        for i in 0..k {
            acc[i] = cah::add(acc[i], c[i]);
        }
    }
    let unknown: Vec<u64> = (1..=w as u64).filter(|&q| !taken[q as usize]).collect();
    if unknown.len() >= k {
        return None;
    }
    let res: Vec<u64> = (0..k).map(|x| cah::sub(b[x], acc[x])).collect();
    let u = cah::solve_vandermonde(&unknown, &res)?;
    let checks = (unknown.len()..k)
        .map(|x| {
            let lhs = unknown.iter().zip(&u).fold(acc[x], |s, (&q, &v)| {
                cah::add(s, cah::mul(cah::pow(q, x as u64), v))
            });
            (lhs, b[x])
        })
        .collect();
    Some((unknown.iter().map(|&q| q as u32).zip(u).collect(), checks))
}

/// Walks `from, from + 1, …` skipping a few sorted values.
#[derive(Clone, Copy)]
struct Cursor<'a> {
    skip: &'a [u32],
    at: usize,
    next: usize,
}

impl<'a> Cursor<'a> {
    fn new(skip: &'a [u32], from: usize) -> Cursor<'a> {
        Cursor {
            skip,
            at: 0,
            next: from,
        }
    }

    #[inline]
    fn next(&mut self) -> usize {
        while self.at < self.skip.len() && self.skip[self.at] as usize == self.next {
            self.at += 1;
            self.next += 1;
        }
        let v = self.next;
        self.next += 1;
        v
    }
}

/// Most errors a configuration may budget per group.
pub const MAX_ERRORS: usize = 4;

/// The unknown hashes at positions `q` from the residual `res = B − A_σ·H_σ` (Eq. 5, first
/// `α = |q|` rows), if the remaining rows check them (Eq. 6). One or two unknowns — all but
/// every case — are checked without a field inversion (Cramer's rule with the determinant
/// multiplied through); the inversion is paid once the mapping checks.
fn solve_and_check(q: &[u32], res: &[u64]) -> Option<Vec<u64>> {
    let k = res.len();
    match q.len() {
        0 => res.iter().all(|&r| r == 0).then(Vec::new),
        1 => {
            // row 0 is all ones: u = r_0; row x: q^x · u = r_x
            let (q, u) = (q[0] as u64, res[0]);
            let mut t = u;
            for &r in &res[1..] {
                t = cah::mul(t, q);
                if t != r {
                    return None;
                }
            }
            Some(vec![u])
        }
        2 => {
            let (q1, q2) = (q[0] as u64, q[1] as u64);
            let d = cah::sub(q2, q1);
            if d == 0 {
                return None;
            }
            // D·u2 = r1 − q1·r0, D·u1 = q2·r0 − r1
            let n2 = cah::sub(res[1], cah::mul(q1, res[0]));
            let n1 = cah::sub(cah::mul(q2, res[0]), res[1]);
            let (mut p1, mut p2) = (cah::mul(q1, q1), cah::mul(q2, q2));
            for &r in &res[2..] {
                if cah::add(cah::mul(p1, n1), cah::mul(p2, n2)) != cah::mul(d, r) {
                    return None;
                }
                p1 = cah::mul(p1, q1);
                p2 = cah::mul(p2, q2);
            }
            let di = cah::inv(d);
            Some(vec![cah::mul(n1, di), cah::mul(n2, di)])
        }
        a => {
            let qs: Vec<u64> = q.iter().map(|&x| x as u64).collect();
            let u = cah::solve_vandermonde(&qs, res)?;
            for (x, &rx) in res.iter().enumerate().take(k).skip(a) {
                let lhs = qs.iter().zip(&u).fold(0, |s, (&q, &v)| {
                    cah::add(s, cah::mul(cah::pow(q, x as u64), v))
                });
                if lhs != rx {
                    return None;
                }
            }
            Some(u)
        }
    }
}

enum Step {
    Found(Mapping),
    /// The cap or the budget: nothing more is tested.
    Stop(Unrecovered),
    Next,
}

/// One group's enumeration state: prefix sums of the received packets' columns at every shift.
struct Search<'a> {
    b: &'a Cah,
    k: usize,
    w: usize,
    xs: &'a [u64],
    aug: &'a dyn Fn(u64, u64) -> u64,
    limits: &'a Limits,
    /// `pre[(s + E)·(n + 1)·k + i·k + x]`: row `x` of the sum of the columns of received packets
    /// `0..i`, packet `t` taken at position `t + 1 + s`.
    pre: Vec<u64>,
    tested: u64,
    meter: Meter,
}

impl<'a> Search<'a> {
    fn new(
        b: &'a Cah,
        k: usize,
        w: usize,
        xs: &'a [u64],
        aug: &'a dyn Fn(u64, u64) -> u64,
        limits: &'a Limits,
        meter: Meter,
    ) -> Search<'a> {
        let n = xs.len();
        let e = limits.max_errors as i64;
        let shifts = (2 * e + 1) as usize;
        let mut pre = vec![0u64; shifts * (n + 1) * k];
        for si in 0..shifts {
            let s = si as i64 - e;
            let base = si * (n + 1) * k;
            for (t, &x) in xs.iter().enumerate() {
                let pos = t as i64 + 1 + s;
                let (from, to) = (base + t * k, base + (t + 1) * k);
                if (1..=w as i64).contains(&pos) {
                    let c = cah::column(k, pos as u64, aug(x, pos as u64));
                    for r in 0..k {
                        pre[to + r] = cah::add(pre[from + r], c[r]);
                    }
                } else {
                    pre.copy_within(from..from + k, to);
                }
            }
        }
        Search {
            b,
            k,
            w,
            xs,
            aug,
            limits,
            pre,
            tested: 0,
            meter,
        }
    }

    /// Count one more mapping against the group's cap and its work (its rows, and `runs`
    /// order-preserving runs walked), or say which ran out.
    #[inline]
    fn charge(&mut self, runs: usize) -> Result<(), Unrecovered> {
        if self.tested >= self.limits.max_mappings {
            Err(Unrecovered::Cap)
        } else if !self
            .meter
            .take(self.k as u64 * work::MAPPING_ROW + runs as u64 * work::MAPPING_RUN)
        {
            Err(Unrecovered::Budget)
        } else {
            Ok(())
        }
    }

    /// Hypotheses a pattern has (to try the cheap ones first).
    fn cost(&self, a: usize, r: usize, m: usize) -> f64 {
        let n = self.xs.len() as f64;
        let window = (2 * self.limits.shift + 1) as f64;
        let choose =
            |n: f64, k: usize| (0..k).fold(1.0, |c, i| c * (n - i as f64) / (i + 1) as f64);
        choose(self.w as f64, a - m) * choose(n, r - m) * choose(n * window, m)
    }

    /// Every hypothesis of `m` moves, `a − m` further losses and `r − m` further insertions.
    fn pattern(&mut self, a: usize, r: usize, m: usize) -> Step {
        self.pattern_moves(m, a - m, r - m)
    }

    /// Moves by increasing largest displacement (reordering is mostly by a position or two, so
    /// the true mapping comes early), each move's packet after the previous one's.
    fn pattern_moves(&mut self, m: usize, losses: usize, inserts: usize) -> Step {
        let mut moves: Vec<(u32, u32)> = Vec::with_capacity(m);
        if m == 0 {
            return self.moves(0, 0, 0, false, &mut moves, losses, inserts);
        }
        for most in 1..=self.limits.shift {
            match self.moves(m, 0, most, false, &mut moves, losses, inserts) {
                Step::Next => {}
                s => return s,
            }
        }
        Step::Next
    }

    /// `left` more moves, each by at most `most` positions, one of them (if none yet, `hit`)
    /// by exactly `most`.
    #[allow(clippy::too_many_arguments)]
    fn moves(
        &mut self,
        left: usize,
        from_j: usize,
        most: usize,
        hit: bool,
        moves: &mut Vec<(u32, u32)>,
        losses: usize,
        inserts: usize,
    ) -> Step {
        if left == 0 {
            let mut rm = Vec::with_capacity(inserts);
            return self.inserts(inserts, 0, &mut rm, moves, losses);
        }
        let n = self.xs.len();
        let dists = if left == 1 && !hit {
            most..=most
        } else {
            1..=most
        };
        for dist in dists {
            for j in from_j..n {
                for q in [(j + 1).checked_sub(dist), Some(j + 1 + dist)] {
                    let Some(q) = q.filter(|&q| (1..=self.w).contains(&q)) else {
                        continue;
                    };
                    if moves.iter().any(|&(_, q2)| q2 as usize == q) {
                        continue;
                    }
                    moves.push((j as u32, q as u32));
                    let step = self.moves(
                        left - 1,
                        j + 1,
                        most,
                        hit || dist == most,
                        moves,
                        losses,
                        inserts,
                    );
                    match step {
                        Step::Next => {}
                        s => return s,
                    }
                    moves.pop();
                }
            }
        }
        Step::Next
    }

    /// `left` more insertions (received indices from `from`), then the losses.
    fn inserts(
        &mut self,
        left: usize,
        from: usize,
        rm: &mut Vec<u32>,
        moves: &[(u32, u32)],
        losses: usize,
    ) -> Step {
        if left == 0 {
            let mut lp = Vec::with_capacity(losses);
            return self.losses(losses, 1, &mut lp, rm, moves);
        }
        for j in from..self.xs.len() {
            if moves.iter().any(|&(j2, _)| j2 as usize == j) {
                continue;
            }
            rm.push(j as u32);
            match self.inserts(left - 1, j + 1, rm, moves, losses) {
                Step::Next => {}
                s => return s,
            }
            rm.pop();
        }
        Step::Next
    }

    /// `left` more free losses (positions from `from`); the last one is scanned, not
    /// enumerated ([`Self::scan_last_loss`]).
    fn losses(
        &mut self,
        left: usize,
        from: usize,
        lp: &mut Vec<u32>,
        rm: &[u32],
        moves: &[(u32, u32)],
    ) -> Step {
        match left {
            0 => return self.test(lp, rm, moves),
            1 => return self.scan_last_loss(from, lp, rm, moves),
            _ => {}
        }
        for q in from..=self.w {
            if moves.iter().any(|&(_, q2)| q2 as usize == q) {
                continue;
            }
            lp.push(q as u32);
            match self.losses(left - 1, q + 1, lp, rm, moves) {
                Step::Next => {}
                s => return s,
            }
            lp.pop();
        }
        Step::Next
    }

    /// Row `x` of received packet `i`'s column at position `pos`, from the prefix sums when
    /// the shift is within them.
    #[inline]
    fn col(&self, i: usize, pos: usize, out: &mut [u64; MAX_ROWS]) {
        let k = self.k;
        let e = self.limits.max_errors as i64;
        let s = pos as i64 - (i as i64 + 1);
        if s.abs() <= e {
            let base = ((s + e) as usize) * (self.xs.len() + 1) * k;
            let (hi, lo) = (&self.pre[base + (i + 1) * k..], &self.pre[base + i * k..]);
            for x in 0..k {
                out[x] = cah::sub(hi[x], lo[x]);
            }
        } else {
            *out = cah::column(k, pos as u64, (self.aug)(self.xs[i], pos as u64));
        }
    }

    /// Every position `p ≥ from` of the last free loss at once. With the other errors fixed,
    /// the packets kept in order take the free positions in order, skipping `p`: packet `m` sits
    /// at the `m`-th free position before `p` and at the next one after it. The sum of their
    /// columns moves by one packet's difference from one `p` to the next, so each `p` costs a
    /// few field additions instead of a hypothesis walk.
    fn scan_last_loss(
        &mut self,
        from: usize,
        lp: &[u32],
        rm: &[u32],
        moves: &[(u32, u32)],
    ) -> Step {
        let (k, n, w) = (self.k, self.xs.len(), self.w);
        // the positions and received indices out of the runs: a handful, sorted
        let mut gap = [0u32; 2 * MAX_ERRORS];
        let mut out = [0u32; 2 * MAX_ERRORS];
        let ng = lp.len() + moves.len();
        let no = rm.len() + moves.len();
        for (g, q) in gap
            .iter_mut()
            .zip(lp.iter().chain(moves.iter().map(|m| &m.1)))
        {
            *g = *q;
        }
        for (o, j) in out
            .iter_mut()
            .zip(rm.iter().chain(moves.iter().map(|m| &m.0)))
        {
            *o = *j;
        }
        gap[..ng].sort_unstable();
        out[..no].sort_unstable();
        if w - ng != n - no + 1 {
            return Step::Next;
        }
        // the running sum it starts from
        if !self.meter.take(((n - no) * k) as u64 * work::SCAN_ROW) {
            return Step::Stop(Unrecovered::Budget);
        }
        // the free positions and the kept packets, in order, without building them
        let free = Cursor::new(&gap[..ng], 1);
        let kept = Cursor::new(&out[..no], 0);
        // the fixed part: B minus the moved packets' columns
        let mut fixed = [0u64; MAX_ROWS];
        fixed[..k].copy_from_slice(&self.b[..k]);
        for &(j, q) in moves {
            let c = cah::column(k, q as u64, (self.aug)(self.xs[j as usize], q as u64));
            for x in 0..k {
                fixed[x] = cah::sub(fixed[x], c[x]);
            }
        }
        // total(0): every kept packet one free position later
        let mut total = [0u64; MAX_ROWS];
        let mut c = [0u64; MAX_ROWS];
        {
            let (mut f, mut m) = (free, kept);
            f.next();
            for _ in 0..n - no {
                let (j, pos) = (m.next(), f.next());
                self.col(j, pos, &mut c);
                for x in 0..k {
                    total[x] = cah::add(total[x], c[x]);
                }
            }
        }
        let mut unknown = [0u32; 2 * MAX_ERRORS];
        unknown[..lp.len()].copy_from_slice(lp);
        let nu = lp.len() + 1;
        let mut res = [0u64; MAX_ROWS];
        let (mut f, mut m) = (free, kept);
        let mut p = f.next();
        for t in 0..=n - no {
            if p >= from {
                if let Err(why) = self.charge(0) {
                    return Step::Stop(why);
                }
                self.tested += 1;
                for x in 0..k {
                    res[x] = cah::sub(fixed[x], total[x]);
                }
                unknown[nu - 1] = p as u32;
                if let Some(u) = solve_and_check(&unknown[..nu], &res[..k]) {
                    let mut sigma = vec![0u32; n];
                    let (mut f2, mut m2) = (free, kept);
                    for i in 0..n - no {
                        let mut pos = f2.next();
                        if i == t {
                            pos = f2.next();
                        }
                        sigma[m2.next()] = pos as u32;
                    }
                    for &(j, q) in moves {
                        sigma[j as usize] = q;
                    }
                    return Step::Found(Mapping {
                        sigma,
                        lost: unknown[..nu].iter().copied().zip(u).collect(),
                        errors: Errors {
                            lost: nu as u32,
                            inserted: rm.len() as u32,
                            moved: moves.len() as u32,
                        },
                    });
                }
            }
            // kept packet t moves from the free position after p to p itself
            if t < n - no {
                let j = m.next();
                let next = f.next();
                self.col(j, p, &mut c);
                let mut c2 = [0u64; MAX_ROWS];
                self.col(j, next, &mut c2);
                for x in 0..k {
                    total[x] = cah::add(cah::sub(total[x], c2[x]), c[x]);
                }
                p = next;
            }
        }
        Step::Next
    }

    /// Test one hypothesis: free losses `lp`, insertions `rm`, moves (received index, position).
    fn test(&mut self, lp: &[u32], rm: &[u32], moves: &[(u32, u32)]) -> Step {
        if let Err(why) = self.charge(lp.len() + rm.len() + 2 * moves.len() + 1) {
            return Step::Stop(why);
        }
        self.tested += 1;
        let k = self.k;
        // positions and received indices out of the order-preserving runs (at most 2E each)
        let mut gap = [0u32; 2 * MAX_ERRORS];
        let mut out = [0u32; 2 * MAX_ERRORS];
        let ng = lp.len() + moves.len();
        let no = rm.len() + moves.len();
        for (g, q) in gap
            .iter_mut()
            .zip(lp.iter().chain(moves.iter().map(|m| &m.1)))
        {
            *g = *q;
        }
        for (o, j) in out
            .iter_mut()
            .zip(rm.iter().chain(moves.iter().map(|m| &m.0)))
        {
            *o = *j;
        }
        gap[..ng].sort_unstable();
        out[..no].sort_unstable();
        let (gap, out) = (&gap[..ng], &out[..no]);
        let mut acc = [0u64; MAX_ROWS];
        let n1k = (self.xs.len() + 1) * k;
        let e = self.limits.max_errors as i64;
        if !self.runs(gap, out, |i, len, s, this| {
            let base = ((s + e) as usize) * n1k;
            let (hi, lo) = (&this.pre[base + (i + len) * k..], &this.pre[base + i * k..]);
            for (a, (&h, &l)) in acc.iter_mut().zip(hi.iter().zip(lo)).take(k) {
                *a = cah::add(*a, cah::sub(h, l));
            }
        }) {
            return Step::Next;
        }
        for &(j, q) in moves {
            let c = cah::column(k, q as u64, (self.aug)(self.xs[j as usize], q as u64));
            for (a, &cx) in acc.iter_mut().zip(&c).take(k) {
                *a = cah::add(*a, cx);
            }
        }
        let mut res = [0u64; MAX_ROWS];
        for x in 0..k {
            res[x] = cah::sub(self.b[x], acc[x]);
        }
        let Some(u) = solve_and_check(lp, &res[..k]) else {
            return Step::Next;
        };
        // it checks: write σ out
        let mut sigma = vec![0u32; self.xs.len()];
        self.runs(gap, out, |i, len, s, _| {
            for (t, v) in sigma.iter_mut().enumerate().skip(i).take(len) {
                *v = (t as i64 + 1 + s) as u32;
            }
        });
        for &(j, q) in moves {
            sigma[j as usize] = q;
        }
        Step::Found(Mapping {
            sigma,
            lost: lp.iter().copied().zip(u).collect(),
            errors: Errors {
                lost: lp.len() as u32,
                inserted: rm.len() as u32,
                moved: moves.len() as u32,
            },
        })
    }

    /// Walk the order-preserving runs left once the sorted positions `gap` and received
    /// indices `out` are taken out: `f(first received index, length, shift)` per run, where
    /// packet `t` of the run sits at position `t + 1 + shift`. `false` when the counts do not
    /// line up.
    fn runs(&self, gap: &[u32], out: &[u32], mut f: impl FnMut(usize, usize, i64, &Self)) -> bool {
        let (n, w) = (self.xs.len(), self.w);
        let (mut i, mut pos, mut gi, mut oi) = (0usize, 1usize, 0usize, 0usize);
        loop {
            if gi < gap.len() && gap[gi] as usize == pos {
                pos += 1;
                gi += 1;
                continue;
            }
            if oi < out.len() && out[oi] as usize == i {
                i += 1;
                oi += 1;
                continue;
            }
            if i == n && pos == w + 1 {
                return true;
            }
            if i >= n || pos > w {
                return false;
            }
            let mut len = (n - i).min(w + 1 - pos);
            if gi < gap.len() {
                len = len.min(gap[gi] as usize - pos);
            }
            if oi < out.len() {
                len = len.min(out[oi] as usize - i);
            }
            let s = pos as i64 - (i as i64 + 1);
            if s.unsigned_abs() as usize > self.limits.max_errors {
                return false;
            }
            f(i, len, s, self);
            i += len;
            pos += len;
        }
    }
}
