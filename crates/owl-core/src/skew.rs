//! Relative clock skew and clock adjustments (steps) of R's clock against S's, from the lower
//! envelope (the **floor**) of the one-way delays, and their removal from R's timestamps.
//!
//! A delay `d = r − s` is a difference of two clocks. If R's clock runs fast by a relative
//! skew `β` and is stepped by `σ` at some moment (an NTP step), every delay carries
//! `θ₀ + β·(s − s₀) + σ·[after the step]` besides the path's delay: a line with jumps. Packets
//! that found every queue empty touch the path's smallest delay, so the lower envelope of the
//! points `(s, d)` draws that line, whatever the queues add above it.
//!
//! The papers, by title:
//!
//! - **Paxson** — V. Paxson, *On Calibrating Measurements of Packet Transit Times*, ACM
//!   SIGMETRICS 1998: clock *adjustments* (abrupt level shifts of the minimum delay) and relative
//!   *skew* (its trend) are common, NTP or not, and must be told apart from the network's
//!   delays. <https://dblp.org/search?q=On+Calibrating+Measurements+of+Packet+Transit+Times>
//! - **Moon** — S. B. Moon, P. Skelly, D. Towsley, *Estimation and Removal of Clock Skew from
//!   Network Delay Measurements*, IEEE INFOCOM 1999: the skew line `α + β·t` as the linear
//!   program `minimise Σᵢ (dᵢ − α − β·tᵢ) subject to dᵢ ≥ α + β·tᵢ for every i` — the line
//!   below every point, as close to all of them as can be.
//!   <https://dblp.org/search?q=Estimation+and+Removal+of+Clock+Skew+from+Network+Delay+Measurements>
//! - **Zhang** — L. Zhang, Z. Liu, C. H. Xia, *Clock Synchronization Algorithms for Network
//!   Measurements*, IEEE INFOCOM 2002: the optimum of that program lies on the edge of the
//!   points' lower convex hull above the mean `t̄` of their times (the objective is
//!   `Σd − n·(α + β·t̄)`, so the best line below every point is the highest at `t̄`), which gives
//!   a linear algorithm; clock resets split the trace into segments, each with its own
//!   offset. <https://dblp.org/search?q=Clock+Synchronization+Algorithms+for+Network+Measurements>
//!
//! # What is computed
//!
//! [`DelayFloor`] takes the matched packets as `(send time at S, delay)` in any order near
//! S's, and keeps, per fixed time bucket, the **lower convex hull** of the bucket's points, the
//! count and the sum of their times. The lower hull of all the points is the lower hull of
//! the buckets' hulls (a vertex of the whole is a vertex of its bucket's), and Moon's
//! objective needs of the points no more than the hull, `n` and `Σt`; so the fit below is
//! Moon's program over *every* matched packet, not over a sample.
//!
//! [`DelayFloor::fit`] then:
//!
//! 1. takes a rough skew `β₀`, the median of Moon's fit over 8–32 consecutive segments (a step
//!    spoils one of them, not the median);
//! 2. looks for steps in the floor with that trend removed: at each bucket boundary, the
//!    lowest point of the `W` buckets after it less the lowest of the `W` before it (Paxson's
//!    level shift). A run of boundaries whose jumps exceed [`STEP_NOISE_FACTOR`] times the
//!    95th percentile of the jumps (the floor's noise) is a step, at the run's first boundary for a forward
//!    step and its last for a backward one (where the windows stop straddling it);
//! 3. places each step at the last packet below the middle of the two levels before a forward
//!    step (the first after a backward one), in the buckets around it: each bucket keeps its
//!    suffix minima and prefix minima, the only points that can be that packet;
//! 4. fits one skew `β` and one offset `α_k` per segment between steps: Moon's program with an
//!    offset per segment (Zhang's segments; one skew for all, since a step moves a clock's
//!    reading and not its rate), `minimise Σ_k Σ_{i∈k} (dᵢ − α_k − β·tᵢ)` subject to
//!    `dᵢ ≥ α_k + β·tᵢ`. For a fixed `β` the best `α_k` is `min_{i∈k} (dᵢ − β·tᵢ)` (attained on the
//!    segment's lower hull), leaving a convex piecewise-linear function of `β` alone, minimised
//!    by golden-section search to far below a nanosecond over the capture; with one segment
//!    this is exactly Zhang's hull edge over `t̄`. A step's size is `α_{k+1} − α_k`; steps
//!    smaller than the threshold are merged away and the fit repeated;
//! 5. gives the skew's uncertainty as the standard deviation of `β` over
//!    [`BOOTSTRAP_REPLICATES`] bootstrap replicates that resample the buckets (with their hulls,
//!    counts and time sums) with replacement, steps held where they were found.
//!
//! # Memory
//!
//! At most [`MAX_BUCKETS`] buckets: when a point falls past the last, the bucket width doubles
//! and neighbouring buckets merge (the hull of two hulls, the staircases joined), so the width
//! is the smallest power of two microseconds that spans the capture in that many buckets (4 ms
//! for 10 s, 33 ms for 2 min). A bucket keeps its hull and its two staircases, each `O(log n)`
//! points for a floor with noise above it and at most [`MAX_HULL_VERTICES`] (beyond, every other
//! inner point is dropped: a floor shaped like a convex curve, or a queue filling for a whole
//! bucket, which costs the step's placement some precision there). So the state is at most
//! `MAX_BUCKETS × (3 × MAX_HULL_VERTICES × 16 + 96)` bytes (13 MiB) whatever the capture's
//! length, and about 2 MiB for the simulator's Weibull queues over 2 minutes
//! ([`DelayFloor::memory_bytes`]); nothing grows with the packets.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;

/// Most buckets kept; past it the width doubles.
pub const MAX_BUCKETS: usize = 4096;
/// Most hull vertices kept per bucket.
pub const MAX_HULL_VERTICES: usize = 64;
/// Smallest bucket width, ns (the width is this times a power of two).
pub const BASE_BUCKET_NS: u64 = 1_000;
/// Buckets on each side of a boundary compared for a step.
pub const STEP_WINDOW: usize = 16;
/// A step is a jump of the floor at least this many times the 95th percentile of its jumps
/// (over 40 skew-free simulated pairs, the largest jump was at most 7.7 times it).
pub const STEP_NOISE_FACTOR: f64 = 16.0;
/// Bootstrap replicates for the skew's uncertainty.
pub const BOOTSTRAP_REPLICATES: usize = 64;
/// A skew is taken for R's (reported as a drift, removed by the correction) only beyond this
/// many bootstrap standard deviations from 0.
pub const RESOLVED_SD: f64 = 3.0;
/// Buckets with points needed before a skew is fitted.
pub const MIN_BUCKETS: usize = 8;

/// A point of the floor: time relative to the first point's send time, and delay, ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pt {
    t: i64,
    d: i64,
}

/// Is `b` on the wrong side of the line `a → c` for a lower hull (on it or above)?
fn not_convex(a: Pt, b: Pt, c: Pt) -> bool {
    // cross product of (b − a) and (c − a); ≤ 0: `b` is not strictly below the chord a–c
    let cross =
        (b.t - a.t) as i128 * (c.d - a.d) as i128 - (b.d - a.d) as i128 * (c.t - a.t) as i128;
    cross <= 0
}

/// Push `p` (no earlier than the last vertex) onto a lower hull.
fn hull_push(h: &mut Vec<Pt>, p: Pt) {
    if let Some(l) = h.last()
        && l.t == p.t
    {
        if p.d >= l.d {
            return;
        }
        h.pop();
    }
    while h.len() >= 2 && not_convex(h[h.len() - 2], h[h.len() - 1], p) {
        h.pop();
    }
    h.push(p);
}

/// The lower hull of points sorted by time.
fn lower_hull(pts: impl IntoIterator<Item = Pt>) -> Vec<Pt> {
    let mut h = Vec::new();
    for p in pts {
        hull_push(&mut h, p);
    }
    h
}

#[derive(Clone, Debug, Default)]
struct Bucket {
    /// The lower convex hull of the bucket's points.
    hull: Vec<Pt>,
    /// Its prefix minima (each point lower than every earlier one) and suffix minima (each
    /// lower than every later one): the first point below any level and the last one, which
    /// place a step.
    first_below: Vec<Pt>,
    last_below: Vec<Pt>,
    n: u64,
    sum_t: i128,
}

/// Keep every other inner point of a list past [`MAX_HULL_VERTICES`].
fn thin(v: &mut Vec<Pt>) {
    if v.len() > MAX_HULL_VERTICES {
        let last = v.len() - 1;
        let mut i = 0;
        v.retain(|_| {
            let keep = i == 0 || i == last || i % 2 == 0;
            i += 1;
            keep
        });
    }
}

impl Bucket {
    fn insert(&mut self, p: Pt) {
        self.n += 1;
        self.sum_t += p.t as i128;
        // the staircases, by time order (a point out of order is placed where it belongs)
        let at = self.first_below.partition_point(|q| q.t <= p.t);
        if at == 0 || self.first_below[at - 1].d > p.d {
            self.first_below.insert(at, p);
            while at + 1 < self.first_below.len() && self.first_below[at + 1].d >= p.d {
                self.first_below.remove(at + 1);
            }
        }
        let at = self.last_below.partition_point(|q| q.t <= p.t);
        if at == self.last_below.len() || self.last_below[at].d > p.d {
            let mut j = at;
            while j > 0 && self.last_below[j - 1].d >= p.d {
                j -= 1;
            }
            self.last_below.drain(j..at);
            self.last_below.insert(j, p);
        }
        thin(&mut self.first_below);
        thin(&mut self.last_below);
        match self.hull.last() {
            Some(l) if p.t < l.t => {
                // out of time order (capture disorder): rebuild with the point in place
                let at = self.hull.partition_point(|q| q.t <= p.t);
                self.hull.insert(at, p);
                self.hull = lower_hull(self.hull.iter().copied());
            }
            _ => hull_push(&mut self.hull, p),
        }
        if self.hull.len() > MAX_HULL_VERTICES {
            // a convex floor: keep the ends and every other inner vertex
            thin(&mut self.hull);
            self.hull = lower_hull(std::mem::take(&mut self.hull));
        }
    }

    fn merge(a: Bucket, b: Bucket) -> Bucket {
        let mut pts = a.hull;
        pts.extend(b.hull);
        pts.sort_by_key(|p| (p.t, p.d));
        // b's points are all later than a's: a's prefix minima, then b's below a's lowest;
        // b's suffix minima, then a's below b's lowest
        let a_low = a.first_below.last().map_or(i64::MAX, |p| p.d);
        let b_low = b.last_below.first().map_or(i64::MAX, |p| p.d);
        let mut first_below = a.first_below;
        first_below.extend(b.first_below.into_iter().filter(|p| p.d < a_low));
        let mut last_below: Vec<Pt> = a.last_below.into_iter().filter(|p| p.d < b_low).collect();
        last_below.extend(b.last_below);
        let mut hull = lower_hull(pts);
        hull.shrink_to_fit();
        first_below.shrink_to_fit();
        last_below.shrink_to_fit();
        Bucket {
            hull,
            first_below,
            last_below,
            n: a.n + b.n,
            sum_t: a.sum_t + b.sum_t,
        }
    }

    fn floor(&self, beta: f64) -> f64 {
        self.hull
            .iter()
            .map(|p| p.d as f64 - beta * p.t as f64)
            .fold(f64::INFINITY, f64::min)
    }
}

/// The streaming lower envelope of `(send time, delay)` points; see the module doc.
#[derive(Clone, Debug, Default)]
pub struct DelayFloor {
    origin: Option<u64>,
    width_ns: u64,
    buckets: Vec<Bucket>,
    points: u64,
    last_t: i64,
}

/// A step of R's clock found in the floor.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ClockStep {
    /// When R's clock stepped, by S's clock less the floor's delay: a packet at the floor sent
    /// before this reached R before the step, ns since the epoch.
    pub at_ns: u64,
    /// How far R's clock jumped (later minus earlier floor), ns.
    pub size_ns: i64,
}

/// What [`DelayFloor::fit`] found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SkewFit {
    /// Send time of the first point, ns (the origin of the lines).
    pub origin_ns: u64,
    /// First to last send time of the points, ns.
    pub span_ns: u64,
    pub points: u64,
    /// Buckets with points, and their width, ns.
    pub buckets: usize,
    pub bucket_ns: u64,
    /// R's clock rate less S's, parts per million (positive: R runs fast, delays grow).
    pub skew_ppm: f64,
    /// Standard deviation of `skew_ppm` over the bootstrap replicates.
    pub skew_uncertainty_ppm: f64,
    /// Offset of the floor at the origin per segment (`α_k`, the line `α_k + β·(s − origin)`),
    /// ns: one more than the steps.
    pub offsets_ns: Vec<f64>,
    pub steps: Vec<ClockStep>,
    /// 95th percentile of the floor's jumps between neighbouring windows (its noise), ns.
    pub floor_noise_ns: f64,
    /// Smallest jump taken for a step, ns.
    pub step_threshold_ns: f64,
}

impl SkewFit {
    /// The skew's drift over the span, ns.
    pub fn drift_ns(&self) -> f64 {
        self.skew_ppm * 1e-6 * self.span_ns as f64
    }

    /// Is the skew told from the floor's wander: more than [`RESOLVED_SD`] standard deviations
    /// from 0? (Where the queue seldom empties, the floor wanders and the fitted line leans
    /// with it: the bootstrap's spread says so.)
    pub fn skew_resolved(&self) -> bool {
        self.skew_uncertainty_ppm.is_finite()
            && self.skew_ppm.abs() > RESOLVED_SD * self.skew_uncertainty_ppm
    }

    /// The map that takes R's timestamps to R's clock as it stood at the origin, without skew
    /// or steps (the skew only when [resolved](Self::skew_resolved); the lines being parallel,
    /// the steps' sizes do not depend on it).
    pub fn correction(&self) -> ClockCorrection {
        ClockCorrection::new(self)
    }
}

impl DelayFloor {
    pub fn new() -> DelayFloor {
        DelayFloor {
            width_ns: BASE_BUCKET_NS,
            ..Default::default()
        }
    }

    /// Points taken so far.
    pub fn points(&self) -> u64 {
        self.points
    }

    /// Bytes held now (the buckets and their hulls).
    pub fn memory_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
            + self
                .buckets
                .iter()
                .map(|b| {
                    (b.hull.capacity() + b.first_below.capacity() + b.last_below.capacity())
                        * std::mem::size_of::<Pt>()
                })
                .sum::<usize>()
    }

    /// Take one matched packet: sent at `send_ns` by S's clock, `delay_ns` later by R's.
    pub fn push(&mut self, send_ns: u64, delay_ns: i64) {
        if self.width_ns == 0 {
            self.width_ns = BASE_BUCKET_NS;
        }
        let origin = *self.origin.get_or_insert(send_ns);
        let t = (send_ns as i128 - origin as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        let mut idx = (t.max(0) as u64 / self.width_ns) as usize;
        while idx >= MAX_BUCKETS {
            self.compact();
            idx = (t.max(0) as u64 / self.width_ns) as usize;
        }
        if self.buckets.len() <= idx {
            self.buckets.resize_with(idx + 1, Bucket::default);
        }
        self.buckets[idx].insert(Pt { t, d: delay_ns });
        self.points += 1;
        self.last_t = self.last_t.max(t);
    }

    /// Double the width: bucket `i` becomes the merge of `2i` and `2i + 1`.
    fn compact(&mut self) {
        self.width_ns *= 2;
        let old = std::mem::take(&mut self.buckets);
        let mut it = old.into_iter();
        while let Some(a) = it.next() {
            let b = it.next().unwrap_or_default();
            self.buckets.push(Bucket::merge(a, b));
        }
    }

    /// Fit skew and steps (`None` with fewer than [`MIN_BUCKETS`] buckets holding points).
    pub fn fit(&self) -> Option<SkewFit> {
        let origin = self.origin?;
        let bs: Vec<&Bucket> = self.buckets.iter().filter(|b| b.n > 0).collect();
        if bs.len() < MIN_BUCKETS {
            return None;
        }
        let first_t = bs.iter().flat_map(|b| b.hull.first()).map(|p| p.t).min()?;
        let span = (self.last_t - first_t).max(0) as u64;
        // 1. a rough skew: the median of Moon's fit over consecutive segments
        let k = (bs.len() / (2 * STEP_WINDOW)).clamp(1, 32);
        let mut rough: Vec<f64> = (0..k)
            .filter_map(|j| {
                let part = &bs[j * bs.len() / k..(j + 1) * bs.len() / k];
                moon_fit(&[Segment::of(part.iter().copied())]).map(|(b, _)| b)
            })
            .collect();
        rough.sort_by(f64::total_cmp);
        let beta0 = match rough.len() {
            0 => 0.0,
            n => rough[n / 2],
        };
        // 2. candidate steps: level shifts of the detrended floor
        let r: Vec<f64> = bs.iter().map(|b| b.floor(beta0)).collect();
        let w = STEP_WINDOW;
        // (boundary, jump, the floor's level before and after)
        let mut jumps: Vec<(usize, f64, f64, f64)> = Vec::new();
        if r.len() > 2 * w {
            for b in w..=r.len() - w {
                let left = r[b - w..b].iter().copied().fold(f64::INFINITY, f64::min);
                let right = r[b..b + w].iter().copied().fold(f64::INFINITY, f64::min);
                jumps.push((b, right - left, left, right));
            }
        }
        let mut mags: Vec<f64> = jumps.iter().map(|j| j.1.abs()).collect();
        mags.sort_by(f64::total_cmp);
        // the floor's noise: the 95th percentile of the jumps (a step's plateau is `W` of
        // some 2 500 boundaries: up to 7 steps leave it to the noise)
        let noise = if mags.is_empty() {
            0.0
        } else {
            mags[(mags.len() - 1) * 95 / 100]
        };
        let threshold = (STEP_NOISE_FACTOR * noise).max(1.0);
        // A step at bucket `b*` makes a plateau of jumps of its size `W` buckets long: after
        // it for a forward step (the left window's lowest point is before the step until the
        // left window has passed it), before it for a backward one. Its first (forward) or
        // last (backward) boundary is the step's.
        let mut cuts: Vec<(usize, f64, f64)> = Vec::new();
        let mut i = 0;
        while i < jumps.len() {
            let j = jumps[i].1;
            if j.abs() < threshold {
                i += 1;
                continue;
            }
            let mut e = i;
            while e + 1 < jumps.len()
                && jumps[e + 1].1.abs() >= threshold
                && (jumps[e + 1].1 > 0.0) == (j > 0.0)
            {
                e += 1;
            }
            // the plateau of the run's largest jump (a run may begin with noise above the
            // threshold)
            let big = jumps[i..=e].iter().map(|x| x.1.abs()).fold(0.0, f64::max);
            let on = |x: &usize| jumps[*x].1.abs() >= big / 2.0;
            let k = if j > 0.0 {
                (i..=e).find(on)
            } else {
                (i..=e).rev().find(on)
            }
            .unwrap_or(i);
            cuts.push((jumps[k].0, jumps[k].2, jumps[k].3));
            i = e + 1;
        }
        // 3. each step between the last point near the old level and the first near the new
        let mut places: Vec<Place> = cuts
            .iter()
            .map(|&(b, old, new)| {
                let mut p = Place::between(&bs, b);
                p.refine(&bs, beta0, old, new);
                p
            })
            .collect();
        // 4. one skew, an offset per segment; drop steps below the threshold and refit
        let (beta, alphas) = loop {
            let segs = segments(&bs, &places);
            let (beta, alphas) = match moon_fit(&segs) {
                Some(f) => f,
                None => (beta0, vec![bs[0].floor(beta0); places.len() + 1]),
            };
            let small = (0..places.len()).find(|&i| {
                let z = alphas[i + 1] - alphas[i];
                z.is_nan() || z.abs() < threshold
            });
            match small {
                Some(i) => {
                    places.remove(i);
                }
                None => break (beta, alphas),
            }
        };
        let steps: Vec<ClockStep> = places
            .iter()
            .enumerate()
            .map(|(i, p)| ClockStep {
                at_ns: (origin as i128 + p.at as i128).max(0) as u64,
                size_ns: (alphas[i + 1] - alphas[i]).round() as i64,
            })
            .collect();
        // 5. the bootstrap over buckets
        let mut rng = Pcg64Mcg::seed_from_u64(0x736b_6577 ^ self.points);
        let mut betas = Vec::with_capacity(BOOTSTRAP_REPLICATES);
        for _ in 0..BOOTSTRAP_REPLICATES {
            let mut pick: Vec<usize> = (0..bs.len())
                .map(|_| rng.random_range(0..bs.len()))
                .collect();
            pick.sort_unstable();
            let sample: Vec<&Bucket> = pick.iter().map(|&i| bs[i]).collect();
            let segs = segments(&sample, &places);
            if let Some((b, _)) = moon_fit(&segs) {
                betas.push(b);
            }
        }
        let sd = if betas.len() >= 2 {
            let m = betas.iter().sum::<f64>() / betas.len() as f64;
            (betas.iter().map(|b| (b - m) * (b - m)).sum::<f64>() / (betas.len() - 1) as f64).sqrt()
        } else {
            f64::NAN
        };
        Some(SkewFit {
            origin_ns: origin,
            span_ns: span,
            points: self.points,
            buckets: bs.len(),
            bucket_ns: self.width_ns,
            skew_ppm: beta * 1e6,
            skew_uncertainty_ppm: sd * 1e6,
            offsets_ns: alphas,
            steps,
            floor_noise_ns: noise,
            step_threshold_ns: threshold,
        })
    }
}

/// Where a step lies: between buckets `b − 1` and `b` of the buckets with points, at `at`
/// (relative time, ns) once refined.
#[derive(Clone, Copy, Debug)]
struct Place {
    b: usize,
    at: i64,
    /// The two buckets around the step, `[from, to)`: left out of the fit, where a packet
    /// queued on the old clock may sit as low as one at the floor on the new.
    from: i64,
    to: i64,
}

impl Place {
    /// Between the two buckets' lowest points, until refined.
    fn between(bs: &[&Bucket], b: usize) -> Place {
        let low = |x: &Bucket| x.hull.iter().min_by_key(|p| p.d).map_or(0, |p| p.t);
        let (a, c) = (low(bs[b - 1]), low(bs[b]));
        Place {
            b,
            at: a + (c - a) / 2,
            from: bs[b - 1].hull.first().map_or(a, |p| p.t),
            to: bs[b].hull.last().map_or(c, |p| p.t) + 1,
        }
    }

    /// At the last point below the middle of the two levels (`old`, `new`: floors less
    /// `β·t`) before a forward step, at the first below it after a backward one, over the
    /// two buckets on each side: a suffix minimum (prefix minimum) of its bucket. The place is
    /// on the axis of arrivals less the floor (a packet's send time plus its delay above the
    /// floor), where R's records are placed ([`ClockCorrection`]): a forward step comes after
    /// the last packet that arrived on the old clock.
    fn refine(&mut self, bs: &[&Bucket], beta: f64, old: f64, new: f64) {
        let lo = self.b.saturating_sub(2);
        let hi = (self.b + 2).min(bs.len());
        let mid = (old + new) / 2.0;
        let level = |p: &Pt| p.d as f64 - beta * p.t as f64;
        let below = |p: &&Pt| level(p) < mid;
        if new > old {
            if let Some(p) = bs[lo..hi]
                .iter()
                .flat_map(|x| x.last_below.iter())
                .filter(below)
                .max_by_key(|p| p.t)
            {
                self.at = p.t + (level(p) - old).max(0.0).round() as i64 + 1;
            }
        } else if let Some(p) = bs[lo..hi]
            .iter()
            .flat_map(|x| x.first_below.iter())
            .filter(below)
            .min_by_key(|p| p.t)
        {
            // (its send time: the step came before it arrived, and a record of R after the
            // step is placed by R's clock falling back, ClockCorrection)
            self.at = p.t;
        }
    }
}

/// One segment of Moon's program: its buckets' joint lower hull, its point count and the sum
/// of its points' times.
struct Segment {
    hull: Vec<Pt>,
    n: f64,
    sum_t: f64,
}

impl Segment {
    fn of<'a>(bs: impl Iterator<Item = &'a Bucket>) -> Segment {
        let (mut pts, mut n, mut sum_t) = (Vec::new(), 0u64, 0i128);
        for b in bs {
            pts.extend_from_slice(&b.hull);
            n += b.n;
            sum_t += b.sum_t;
        }
        pts.sort_by_key(|p| (p.t, p.d));
        Segment {
            hull: lower_hull(pts),
            n: n as f64,
            sum_t: sum_t as f64,
        }
    }

    /// `α(β) = min (d − β·t)` over the segment.
    fn alpha(&self, beta: f64) -> f64 {
        self.hull
            .iter()
            .map(|p| p.d as f64 - beta * p.t as f64)
            .fold(f64::INFINITY, f64::min)
    }
}

/// The segments between steps, less the two buckets around each step (their points could be
/// on either clock): a bucket's points, count and time sum go to the segment of its time.
fn segments(bs: &[&Bucket], places: &[Place]) -> Vec<Segment> {
    let mut segs: Vec<(Vec<Pt>, f64, f64)> = vec![(Vec::new(), 0.0, 0.0); places.len() + 1];
    for b in bs {
        let Some(first) = b.hull.first() else {
            continue;
        };
        if places.iter().any(|p| first.t >= p.from && first.t < p.to) {
            continue;
        }
        let k = places.iter().filter(|p| p.at <= first.t).count();
        segs[k].0.extend_from_slice(&b.hull);
        segs[k].1 += b.n as f64;
        segs[k].2 += b.sum_t as f64;
    }
    segs.into_iter()
        .map(|(mut pts, n, sum_t)| {
            pts.sort_by_key(|p| (p.t, p.d));
            Segment {
                hull: lower_hull(pts),
                n,
                sum_t,
            }
        })
        .collect()
}

/// Moon's program with an offset per segment: the `β` minimising
/// `F(β) = Σ_k (−n_k·α_k(β) − β·Σt_k)` (convex), and each segment's `α_k`. `None` when no
/// segment spans two distinct times.
fn moon_fit(segs: &[Segment]) -> Option<(f64, Vec<f64>)> {
    let usable = segs
        .iter()
        .any(|s| s.n > 0.0 && s.hull.len() >= 2 && s.hull[0].t != s.hull[s.hull.len() - 1].t);
    if !usable {
        return None;
    }
    let f = |beta: f64| -> f64 {
        segs.iter()
            .filter(|s| s.n > 0.0 && !s.hull.is_empty())
            .map(|s| -s.n * s.alpha(beta) - beta * s.sum_t)
            .sum()
    };
    // golden-section search over ±0.1 (100 000 ppm: no clock is that far off)
    let (mut a, mut b) = (-0.1f64, 0.1f64);
    let g = (5f64.sqrt() - 1.0) / 2.0;
    let mut c = b - g * (b - a);
    let mut d = a + g * (b - a);
    let (mut fc, mut fd) = (f(c), f(d));
    for _ in 0..120 {
        if fc <= fd {
            b = d;
            d = c;
            fd = fc;
            c = b - g * (b - a);
            fc = f(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + g * (b - a);
            fd = f(d);
        }
    }
    let beta = (a + b) / 2.0;
    let alphas = segs
        .iter()
        .map(|s| {
            if s.hull.is_empty() {
                f64::NAN
            } else {
                s.alpha(beta)
            }
        })
        .collect();
    Some((beta, alphas))
}

/// Takes R's timestamps, in R's capture order, to R's clock as it stood at the fit's origin:
/// less the skew's drift since then and the steps before them. The offset at the origin stays
/// (one-way traffic cannot tell it from the path's delay).
///
/// A timestamp `r` of segment `k` (after `k` steps) sits at `x = (r − origin − α_k) / (1 + β)`
/// on S's axis (the send time of a packet at the floor that arrived at `r`; a queued packet's
/// `x` is later by its wait), and its correction is `β·x + α_k − α_0`. Segments are entered in
/// R's order. Around a step of size `σ` placed at `a`: a forward step is entered once the old
/// segment's `x` passes `a + σ/2` (every record after the step is at least `σ` past the last
/// one before it; a record before it is past `a + σ/2` only when the placement is more than
/// `σ/2` early); a backward step once `x` falls back by more than `|σ|/2` within `|σ|` of `a`
/// (the same readings come twice around it and only the capture's order tells them apart;
/// within one clock R's records never go back), or passes `a + |σ|/2`.
#[derive(Clone, Debug)]
pub struct ClockCorrection {
    origin: u64,
    beta: f64,
    alphas: Vec<f64>,
    /// Step `k` (between segments `k` and `k + 1`): relative time and size, ns.
    steps: Vec<(f64, f64)>,
    cur: usize,
    /// Largest `x` seen in the current segment.
    max_x: f64,
}

impl ClockCorrection {
    fn new(fit: &SkewFit) -> ClockCorrection {
        ClockCorrection {
            origin: fit.origin_ns,
            beta: if fit.skew_resolved() {
                fit.skew_ppm * 1e-6
            } else {
                0.0
            },
            alphas: fit.offsets_ns.clone(),
            steps: fit
                .steps
                .iter()
                .map(|s| (s.at_ns as f64 - fit.origin_ns as f64, s.size_ns as f64))
                .collect(),
            cur: 0,
            max_x: f64::NEG_INFINITY,
        }
    }

    /// The correction removes nothing.
    pub fn is_identity(&self) -> bool {
        self.beta == 0.0 && self.steps.is_empty()
    }

    fn x(&self, r: u64, k: usize) -> f64 {
        // (differences of timestamps in integers: an f64 holds one since the epoch to 256 ns)
        ((r as i128 - self.origin as i128) as f64 - self.alphas[k]) / (1.0 + self.beta)
    }

    /// R's timestamp `r` corrected; call in R's capture order.
    pub fn correct(&mut self, r: u64) -> u64 {
        while let Some(&(at, size)) = self.steps.get(self.cur) {
            let x = self.x(r, self.cur);
            let half = size.abs() / 2.0;
            // (a forward jump of R's timestamps is also a gap in the traffic: only a fall back
            // tells the step)
            let fell_back = size < 0.0 && self.max_x >= at - size.abs() && x < self.max_x - half;
            if x >= at + half || fell_back {
                self.cur += 1;
                self.max_x = f64::NEG_INFINITY;
            } else {
                break;
            }
        }
        let x = self.x(r, self.cur);
        self.max_x = self.max_x.max(x);
        let c = (self.beta * x + self.alphas[self.cur] - self.alphas[0]).round() as i128;
        (r as i128 - c).clamp(0, u64::MAX as i128) as u64
    }
}

#[cfg(test)]
mod tests;
