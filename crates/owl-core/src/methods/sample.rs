//! `sample` — coordinated packet sampling for one-way delay quantiles.
//!
//! None of the five papers estimates delay quantiles (LDA §III-A shows the maximum needs Ω(N)
//! space). Coordinated sampling does, with a distribution-free interval: both points select a
//! packet when a hash of its identity falls under a threshold, so they select **the same**
//! packets (trajectory sampling: N. G. Duffield, M. Grossglauser, *Trajectory Sampling for
//! Direct Traffic Observation*, IEEE/ACM Transactions on Networking 9(3), 2001,
//! doi:10.1109/90.929851), and the matched samples are the exact delays of a uniform random
//! sample of the delivered packets.
//!
//! # The synopsis: bottom-k by identity hash
//!
//! A stream cannot know in advance how many packets an interval will carry, so instead of a
//! fixed threshold each point keeps the `capacity` packets of smallest hash (a bottom-k sample,
//! which the threshold of its k-th hash describes exactly), `(identity, timestamp)`. What it
//! ships is compressed ([`payload`]'s doc): each sample's hash as a *cell* (the hash's top bits,
//! `cell_bits` finer than the samples' spacing), the cells sorted and Elias–Fano coded, and the
//! timestamps in the same order in the bits of the sampled time span — about
//! `cell_bits + 2.5 + log₂(span / resolution)` bits a sample, 40 at the defaults for a 1 s
//! interval of nanosecond timestamps (16 B before). The budget is `--memory` bytes per point
//! and interval, sized for that expectation; the bytes reported are the payload's.
//!
//! # Matching by cells
//!
//! With the common grid the coarser point's cells, each point is complete below its last cell
//! (a point that kept fewer than `capacity` packets kept all of them: everywhere), and every
//! packet whose cell is below the lower of the two is in both samples when both points saw it.
//! The matched delays below it are therefore every delivered packet whose cell is below it — a
//! uniform sample of the delivered packets, independent of the delays — and the sender's
//! unmatched samples below it are the lost ones, scaled by the sampled fraction to estimate the
//! loss.
//!
//! Within a cell both points list their samples in the order of their full hashes. A cell with
//! as many samples at both points pairs them in that order; a cell with more at one point holds
//! a packet seen there only, and its samples are left out (*ambiguous*: the surplus counts as
//! lost or unexpected). A false match therefore needs a packet seen only at the sender *and* one
//! seen only at the receiver in the same cell: with `n_S` and `n_R` such samples, `n` samples a
//! point and `U` cells (hashes independent and uniform), the expected number of false pairs is
//! at most `n_S·n_R/U·(1 + n/U)` — zero when the receiver saw nothing the sender did not (pure
//! loss), and about `n·a_S·a_R/2^cell_bits` for fractions `a` of one-sided samples. The
//! estimate reports it at the observed counts. (Requiring it for any traffic, `n²/U ≤ ε` as if
//! the two points shared no packet, would cost `log₂(n/ε)` bits a cell instead of
//! `cell_bits`: 24 bits for 20 000 samples at ε = 10⁻³.)
//!
//! # The estimate
//!
//! Quantiles are nearest-rank over the `n` matched delays. The 95 % interval of the
//! `p`-quantile is `[x₍ₗ₎, x₍ᵤ₎]` with ranks from the binomial distribution of the number of
//! samples below the true quantile, `K ~ Bin(n, p)`: `P(l ≤ K < u) ≥ 0.95`, the classical
//! distribution-free interval for a quantile from order statistics (e.g. H. A. David,
//! H. N. Nagaraja, *Order Statistics*, §7.1). It holds for any delay distribution, and is
//! conservative: its tails are at most 2.5 %, less by up to one rank's probability, so it
//! covers 95.4 % for the median and 96.8 % for p99 on 2 460 samples (`ci=order`). By default
//! (`ci=interpolated`) each end is interpolated between two neighbouring order statistics so
//! that its tail is 2.5 % ([`interpolated_interval`]): coverage about 95 % for continuous
//! delays (measured by `owl experiment tails`, file `tails-coverage.csv`), no longer a
//! guarantee for every distribution. Where `n` is too small for a two-sided interval (p99.9 on
//! a few hundred samples), none is given.
//! Timestamps shipped at a resolution `q` coarser than 1 ns (`resolution_ns`, rounded down)
//! put each delay within `q − 1` ns of its own, hence each order statistic within `q − 1` of
//! the true one's: the intervals are widened by as much on both sides, and cover as before.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::hash::{HashFamily, HashFn};
use crate::method::{
    BuildOptions, DelayBasis, Estimate, Method, MethodError, MethodInfo, PointSynopsis, Quantiles,
    RecoveredPacket, RecoveredPackets, Role, config_value, downcast, downcast_ref, unknown_field,
};
use crate::methods::lda::ci::ln_gamma;
use crate::record::PacketRecord;
use crate::wire::DecodeError;

pub mod payload;
pub use payload::{HEADER_BYTES, Shipped, TAG};

/// Default capacity: 4 096 packets (about 20 KiB a point and one-second interval).
pub const DEFAULT_CAPACITY: usize = 4096;
/// Largest capacity accepted.
pub const MAX_CAPACITY: usize = 1 << 26;
/// Default cell bits: a sample's hash cell is 2⁸ times finer than the samples' spacing.
pub const DEFAULT_CELL_BITS: u8 = 8;
/// Largest cell bits accepted.
pub const MAX_CELL_BITS: u8 = 40;
/// The interval [`Config::for_memory`] sizes for: one second of nanosecond timestamps.
pub const SIZING_SPAN_NS: u64 = 1_000_000_000;

/// What both points must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    capacity: usize,
    seed: u64,
    cell_bits: u8,
    resolution_ns: u64,
    ci: Interval,
}

/// How the 95 % interval of a quantile is read off the order statistics (module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Interval {
    /// Between the order statistics of the binomial ranks, interpolated so each tail is 2.5 %
    /// (coverage about 95 %, not guaranteed).
    #[default]
    Interpolated,
    /// The order statistics of the binomial ranks: at least 95 % for any distribution, more by
    /// the discreteness of the ranks (up to 97 % for p99 on 2 500 samples).
    Order,
}

impl Interval {
    fn name(self) -> &'static str {
        match self {
            Interval::Interpolated => "interpolated",
            Interval::Order => "order",
        }
    }
}

impl Config {
    /// A configuration keeping `capacity` packets a point and interval, shipping cells of
    /// [`DEFAULT_CELL_BITS`] and exact timestamps.
    pub fn new(capacity: usize, seed: u64) -> Result<Config, MethodError> {
        if !(1..=MAX_CAPACITY).contains(&capacity) {
            return Err(MethodError::Invalid(format!(
                "sample capacity {capacity} is outside 1..={MAX_CAPACITY}"
            )));
        }
        Ok(Config {
            capacity,
            seed,
            cell_bits: DEFAULT_CELL_BITS,
            resolution_ns: 1,
            ci: Interval::default(),
        })
    }
    /// How the quantiles' 95 % intervals are made (the estimate's choice: the points need not
    /// agree on it).
    pub fn with_interval(self, ci: Interval) -> Config {
        Config { ci, ..self }
    }
    pub fn interval(&self) -> Interval {
        self.ci
    }
    /// Cells `2^bits` times finer than the samples' spacing (payload module doc): each bit
    /// costs one bit a sample and halves the expected false matches.
    pub fn with_cell_bits(self, bits: u8) -> Result<Config, MethodError> {
        if !(1..=MAX_CELL_BITS).contains(&bits) {
            return Err(MethodError::Invalid(format!(
                "sample cell_bits {bits} is outside 1..={MAX_CELL_BITS}"
            )));
        }
        Ok(Config {
            cell_bits: bits,
            ..self
        })
    }
    /// Timestamps rounded down to multiples of `ns` before they are shipped (1: exact); each
    /// delay is then within `ns − 1` of the true one, and the stated intervals are widened by
    /// as much.
    pub fn with_resolution_ns(self, ns: u64) -> Result<Config, MethodError> {
        if !(1..=1_000_000_000).contains(&ns) {
            return Err(MethodError::Invalid(format!(
                "sample resolution_ns {ns} is outside 1..=1000000000"
            )));
        }
        Ok(Config {
            resolution_ns: ns,
            ..self
        })
    }
    /// The capacity whose expected payload fits in `memory` bytes for an interval of
    /// [`SIZING_SPAN_NS`] ([`Config::expected_bits_per_sample`]; the bytes reported are the
    /// payload's real length).
    pub fn for_memory(memory: u64, seed: u64) -> Result<Config, MethodError> {
        let per = Config::new(1, seed)?.expected_bits_per_sample(SIZING_SPAN_NS);
        let bits = memory.saturating_sub(HEADER_BYTES as u64) as f64 * 8.0;
        let k = (bits / per).floor() as u64;
        if k == 0 {
            return Err(MethodError::Invalid(format!(
                "--memory {memory} bytes is below one sampled packet ({HEADER_BYTES} bytes of header and about {per:.0} bits a sample)"
            )));
        }
        Config::new(k.min(MAX_CAPACITY as u64) as usize, seed)
    }
    /// Expected bits a sample costs on the wire when the samples span `span_ns`: Elias–Fano
    /// cells, `cell_bits + 2` to `cell_bits + 3` (taken as `+ 2.5`), and a timestamp of the
    /// bits of the span at the resolution.
    pub fn expected_bits_per_sample(&self, span_ns: u64) -> f64 {
        let ts = 64 - (span_ns / self.resolution_ns).leading_zeros();
        self.cell_bits as f64 + 2.5 + ts as f64
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn cell_bits(&self) -> u8 {
        self.cell_bits
    }
    pub fn resolution_ns(&self) -> u64 {
        self.resolution_ns
    }
    fn hash(&self) -> HashFn {
        HashFamily::new(self.seed).member(0x5a4d_504c)
    }
    fn pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("capacity", self.capacity.to_string()),
            ("seed", self.seed.to_string()),
            ("cell_bits", self.cell_bits.to_string()),
            ("resolution_ns", self.resolution_ns.to_string()),
            ("ci", self.ci.name().to_string()),
        ]
    }
}

/// One point's bottom-k sample for one interval: recording, or decoded from what a point
/// shipped (then its hashes are cells and its identities are gone: it records nothing more).
#[derive(Clone, Debug)]
pub struct Synopsis {
    cfg: Config,
    hash: HashFn,
    /// (hash, identity) → first timestamp, the `capacity` smallest hashes.
    kept: BTreeMap<(u64, u64), u64>,
    /// Packets offered.
    seen: u64,
    /// The decoded payload, for a synopsis that came from one.
    decoded: Option<Shipped>,
}

impl Synopsis {
    pub fn new(cfg: Config) -> Synopsis {
        Synopsis {
            cfg,
            hash: cfg.hash(),
            kept: BTreeMap::new(),
            seen: 0,
            decoded: None,
        }
    }
    /// Whether the point kept only its smallest hashes (its sample is complete only below its
    /// threshold).
    fn full(&self) -> bool {
        self.len() >= self.cfg.capacity
    }
    /// The largest hash this recording sample is complete up to: every packet the point saw
    /// with a hash at or below it is kept.
    pub fn threshold(&self) -> u64 {
        match self.kept.last_key_value() {
            Some((&(h, _), _)) if self.full() => h,
            _ => u64::MAX,
        }
    }
    /// Record one packet (the first sighting of an identity is kept).
    #[inline]
    pub fn record_packet(&mut self, id: u64, ts_ns: u64) {
        debug_assert!(self.decoded.is_none(), "a decoded sample records nothing");
        self.seen += 1;
        let h = self.hash.hash(id);
        if self.full() && h >= self.threshold() {
            return;
        }
        self.kept.entry((h, id)).or_insert(ts_ns);
        if self.kept.len() > self.cfg.capacity {
            self.kept.pop_last();
        }
    }
    pub fn record_batch(&mut self, recs: &[PacketRecord]) {
        for r in recs {
            self.record_packet(r.id, r.ts_ns);
        }
    }
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    pub fn len(&self) -> usize {
        match &self.decoded {
            Some(d) => d.len(),
            None => self.kept.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What this point ships: its samples as cells and timestamps (the payload module).
    pub fn shipped(&self) -> Cow<'_, Shipped> {
        match &self.decoded {
            Some(d) => Cow::Borrowed(d),
            None => Cow::Owned(Shipped::of(
                self.kept.iter().map(|(&(h, _), &ts)| (h, ts)),
                self.seen,
                self.full(),
                self.cfg.cell_bits,
                self.cfg.resolution_ns,
            )),
        }
    }

    /// The payload (layout in the payload module's doc).
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.shipped().encode(out)
    }
    pub fn encoded_len(&self) -> usize {
        self.shipped().encoded_len()
    }
    /// Decode a payload of this configuration: the count must fit the capacity and the bytes.
    pub fn decode(cfg: Config, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        let d = Shipped::decode(bytes, cfg.capacity)?;
        Ok(Synopsis {
            seen: d.seen,
            decoded: Some(d),
            ..Synopsis::new(cfg)
        })
    }
}

impl PointSynopsis for Synopsis {
    #[inline]
    fn record(&mut self, rec: &PacketRecord) {
        self.record_packet(rec.id, rec.ts_ns);
    }
    fn record_batch(&mut self, recs: &[PacketRecord]) {
        Synopsis::record_batch(self, recs)
    }
    fn encoded_len(&self) -> usize {
        Synopsis::encoded_len(self)
    }
    fn encode(&self, out: &mut Vec<u8>) {
        Synopsis::encode(self, out)
    }
    /// The whole payload crosses (its header is 35 bytes).
    fn shipped_len(&self) -> Option<u64> {
        Some(self.encoded_len() as u64)
    }
}

/// What the pair of samples says.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleEstimate {
    /// Matched delays below the common threshold, ascending.
    pub delays: Vec<i64>,
    /// Sender samples below the common threshold that the receiver did not see.
    pub lost_sampled: u64,
    /// Receiver samples below the threshold that the sender did not see.
    pub unexpected_sampled: u64,
    /// Samples seen at both points but left out: their cell holds a different number of
    /// samples at the two points, so which pairs with which is not known.
    pub ambiguous_sampled: u64,
    /// The sampled fraction of the hash range (1 when both points kept everything).
    pub fraction: f64,
    /// Cells below the common threshold.
    pub cells: f64,
    /// Expected false matches, `n_S·n_R/U·(1 + n/U)` at the samples found at one point only
    /// (module doc).
    pub false_matches: f64,
    pub quantiles: Option<Quantiles>,
}

/// The pair check.
pub fn check_pair(sender: &Config, receiver: &Config) -> Result<(), MethodError> {
    for ((k, a), (_, b)) in sender.pairs().into_iter().zip(receiver.pairs()) {
        if a != b {
            return Err(MethodError::ConfigMismatch {
                field: k.into(),
                sender: a,
                receiver: b,
            });
        }
    }
    Ok(())
}

/// The two samples matched below their common threshold (module doc).
struct Matching {
    /// Matched samples, `(sender index, receiver index)` in the shipped order, which is the
    /// order of the recording samples' `(hash, identity)` keys.
    pairs: Vec<(usize, usize)>,
    lost: u64,
    unexpected: u64,
    ambiguous: u64,
    /// Samples below the threshold at each point.
    below: (usize, usize),
    /// The common threshold, in cells.
    cells: f64,
    /// Cells in the hash range.
    all: u128,
}

/// Match the two samples below their common threshold, cell by cell (module doc).
fn matching(s: &Shipped, r: &Shipped, full: (bool, bool)) -> Matching {
    // the common grid: the coarser point's cells
    let shift = s.shift.max(r.shift);
    let cell = |x: &Shipped, i: usize| x.cells[i] >> (shift - x.shift);
    // each point is complete below its last cell when full, everywhere otherwise
    let all = 1u128 << (64 - shift as u32);
    let bound = |x: &Shipped, full: bool| match x.cells.len() {
        n if full && n > 0 => cell(x, n - 1) as u128,
        _ => all,
    };
    let b = bound(s, full.0).min(bound(r, full.1));
    let below = |x: &Shipped| {
        (0..x.len())
            .take_while(|&i| (cell(x, i) as u128) < b)
            .count()
    };
    let (ns, nr) = (below(s), below(r));
    let mut pairs = Vec::with_capacity(ns.min(nr));
    let (mut lost, mut unexpected, mut ambiguous) = (0u64, 0u64, 0u64);
    let (mut i, mut j) = (0, 0);
    while i < ns || j < nr {
        let c = match (i < ns, j < nr) {
            (true, true) => cell(s, i).min(cell(r, j)),
            (true, false) => cell(s, i),
            _ => cell(r, j),
        };
        let run = |x: &Shipped, from: usize, to: usize| {
            (from..to).take_while(|&k| cell(x, k) == c).count()
        };
        let (a, bn) = (run(s, i, ns), run(r, j, nr));
        if a == bn {
            // the same packets at both points, in the order of their full hashes
            pairs.extend((0..a).map(|k| (i + k, j + k)));
        } else {
            let m = a.min(bn);
            ambiguous += m as u64;
            lost += (a - m) as u64;
            unexpected += (bn - m) as u64;
        }
        i += a;
        j += bn;
    }
    Matching {
        pairs,
        lost,
        unexpected,
        ambiguous,
        below: (ns, nr),
        cells: b as f64,
        all,
    }
}

/// Match the two samples below their common threshold, cell by cell (module doc).
pub fn estimate(sender: &Synopsis, receiver: &Synopsis) -> Result<SampleEstimate, MethodError> {
    check_pair(&sender.cfg, &receiver.cfg)?;
    let (s, r) = (sender.shipped(), receiver.shipped());
    let m = matching(&s, &r, (sender.full(), receiver.full()));
    let (lost, unexpected, ambiguous) = (m.lost, m.unexpected, m.ambiguous);
    let (ns, nr) = m.below;
    let mut delays: Vec<i64> = m
        .pairs
        .iter()
        .map(|&(i, j)| r.times[j].wrapping_sub(s.times[i]) as i64)
        .collect();
    delays.sort_unstable();
    let cells = m.cells;
    let fraction = cells / m.all as f64;
    let false_matches = if cells > 0.0 {
        lost as f64 * unexpected as f64 / cells * (1.0 + ns.max(nr) as f64 / cells)
    } else {
        0.0
    };
    // the delivered packets the sample is drawn from: its size over the sampled fraction (all
    // of them when both points kept everything)
    let population = (fraction > 0.0)
        .then(|| ((delays.len() as f64 / fraction).round() as u64).max(delays.len() as u64));
    let mut quantiles = Quantiles::of_sample_from(&delays, population, sender.cfg.ci);
    // rounded timestamps: each delay within resolution − 1 ns of its own, and so each order
    // statistic of its true one
    let slack = (sender.cfg.resolution_ns - 1) as f64;
    if let Some(q) = quantiles.as_mut().filter(|_| slack > 0.0) {
        for ci in [
            &mut q.p50_ci95_ns,
            &mut q.p90_ci95_ns,
            &mut q.p99_ci95_ns,
            &mut q.p999_ci95_ns,
        ]
        .into_iter()
        .flatten()
        {
            *ci = [ci[0] - slack, ci[1] + slack];
        }
    }
    Ok(SampleEstimate {
        delays,
        lost_sampled: lost,
        unexpected_sampled: unexpected,
        ambiguous_sampled: ambiguous,
        fraction,
        cells,
        false_matches,
        quantiles,
    })
}

/// `P(K ≤ k)`, `k = 0..=n`, from the pmf at its `mode` (`ln_mode` its logarithm) walked out
/// over its support `lo..=hi` by the ratio `up(k) = P(K = k+1) / P(K = k)`, each way until it
/// underflows.
fn cdf_from_mode(
    n: usize,
    (lo, hi): (usize, usize),
    mode: usize,
    ln_mode: f64,
    up: impl Fn(usize) -> f64,
) -> Vec<f64> {
    let mut pmf = vec![0.0f64; n + 1];
    pmf[mode] = ln_mode.exp();
    for k in mode..hi {
        pmf[k + 1] = pmf[k] * up(k);
        if pmf[k + 1] < 1e-300 {
            break;
        }
    }
    for k in (lo + 1..=mode).rev() {
        pmf[k - 1] = pmf[k] / up(k - 1);
        if pmf[k - 1] < 1e-300 {
            break;
        }
    }
    let mut cdf = pmf;
    for k in 1..=n {
        cdf[k] += cdf[k - 1];
    }
    cdf
}

fn ln_choose(a: f64, b: f64) -> f64 {
    ln_gamma(a + 1.0) - ln_gamma(b + 1.0) - ln_gamma(a - b + 1.0)
}

/// `P(K ≤ k)` for `K ~ Bin(n, p)`, `k = 0..=n`.
fn binomial_cdf(n: usize, p: f64) -> Vec<f64> {
    let nf = n as f64;
    let mode = (((nf + 1.0) * p).floor() as usize).min(n);
    let m = mode as f64;
    let ln_mode = ln_choose(nf, m) + m * p.ln() + (nf - m) * (1.0 - p).ln();
    let odds = p / (1.0 - p);
    cdf_from_mode(n, (0, n), mode, ln_mode, |k| {
        (nf - k as f64) / (k as f64 + 1.0) * odds
    })
}

/// `P(K ≤ k)`, `k = 0..=n`, for `K ~ Hypergeometric(N, M, n)`: the number of a uniform sample
/// of `n` out of `N` drawn from the `M` marked ones (`P(k+1)/P(k) = (M−k)(n−k) / ((k+1)(N−M−n+k+1))`).
fn hypergeometric_cdf(population: u64, marked: u64, n: usize) -> Vec<f64> {
    let (big_n, m, nf) = (population as f64, marked as f64, n as f64);
    let lo = n.saturating_sub((population - marked).min(n as u64) as usize);
    let hi = (marked.min(n as u64)) as usize;
    let mode = ((((nf + 1.0) * (m + 1.0)) / (big_n + 2.0)).floor() as usize).clamp(lo, hi);
    let k = mode as f64;
    let ln_mode = ln_choose(m, k) + ln_choose(big_n - m, nf - k) - ln_choose(big_n, nf);
    cdf_from_mode(n, (lo, hi), mode, ln_mode, |k| {
        let kf = k as f64;
        (m - kf) * (nf - kf) / ((kf + 1.0) * (big_n - m - nf + kf + 1.0))
    })
}

/// The ranks of the `p`-quantile's 95 % interval, and `P(K ≤ k)` they come from: `K` the
/// number of samples below the true quantile, binomial for a sample of an unbounded population,
/// hypergeometric for `n` drawn from a `population` of `N > n` (the nearest-rank quantile has
/// `⌈pN⌉ − 1` delays below it), which is narrower by the finite-population factor
/// `√((N − n)/(N − 1))` — that matters once the sample is more than a few % of the packets.
fn ranks_and_cdf(n: usize, p: f64, population: Option<u64>) -> Option<(usize, usize, Vec<f64>)> {
    if n == 0 || !(0.0..1.0).contains(&p) || p == 0.0 {
        return None;
    }
    let cdf = match population {
        Some(big_n) if big_n > n as u64 => {
            let below = ((p * big_n as f64).ceil() as u64).saturating_sub(1);
            hypergeometric_cdf(big_n, below, n)
        }
        _ => binomial_cdf(n, p),
    };
    // l: the largest rank with P(K < l) = P(K ≤ l − 1) ≤ 2.5 %; u: the smallest with
    // P(K ≥ u) = 1 − P(K ≤ u − 1) ≤ 2.5 %.
    let l = (1..=n).rev().find(|&l| cdf[l - 1] <= 0.025)?;
    let u = (1..=n).find(|&u| 1.0 - cdf[u - 1] <= 0.025)?;
    Some((l, u, cdf))
}

/// The distribution-free 95 % interval of the `p`-quantile from `n` sorted samples: 1-based
/// ranks `(l, u)` with `P(l ≤ K < u) ≥ 0.95` for `K ~ Bin(n, p)`, split evenly between the
/// tails (each at most 2.5 %); `None` when either tail needs a rank outside `1..=n`.
pub fn order_statistic_ranks(n: usize, p: f64) -> Option<(usize, usize)> {
    ranks_and_cdf(n, p, None).map(|(l, u, _)| (l, u))
}

/// The 95 % interval of the `p`-quantile from `sorted` samples, each end interpolated between
/// two neighbouring order statistics so that its tail is 2.5 % (the order-statistic interval's
/// tails are at most 2.5 %, short by up to one rank's probability). Linear interpolation
/// between order statistics, as for fractional order statistics in A. D. Hutson, *Calculating
/// nonparametric confidence intervals for quantiles using fractional order statistics*,
/// Journal of Applied Statistics 26(3), 1999 (T. P. Hettmansperger and S. J. Sheather did the
/// median, Statistics & Probability Letters 4, 1986): the lower end is
/// `x₍ₗ₎ + λ (x₍ₗ₊₁₎ − x₍ₗ₎)` with `λ = (0.025 − P(K < l)) / P(K = l)`, the upper end alike
/// from `x₍ᵤ₎` towards `x₍ᵤ₋₁₎`. Coverage about 95 % for a continuous distribution, not
/// guaranteed; `None` where the order-statistic interval is `None`. With a `population` of
/// `N > n`, the ranks are the hypergeometric ones ([`ranks_and_cdf`]).
pub fn interpolated_interval(sorted: &[i64], p: f64, population: Option<u64>) -> Option<[f64; 2]> {
    let n = sorted.len();
    let (l, u, cdf) = ranks_and_cdf(n, p, population)?;
    let x = |rank: usize| sorted[rank - 1] as f64;
    let lo = if l < n {
        let lambda = ((0.025 - cdf[l - 1]) / (cdf[l] - cdf[l - 1])).clamp(0.0, 1.0);
        x(l) + lambda * (x(l + 1) - x(l))
    } else {
        x(l)
    };
    let hi = if u >= 2 {
        let lambda = ((0.025 - (1.0 - cdf[u - 1])) / (cdf[u - 1] - cdf[u - 2])).clamp(0.0, 1.0);
        x(u) - lambda * (x(u) - x(u - 1))
    } else {
        x(u)
    };
    Some([lo, hi])
}

impl Quantiles {
    /// Nearest-rank quantiles of a uniform sample of delays (sorted ascending), each with its
    /// distribution-free 95 % interval where the sample allows one; `None` when empty.
    pub fn of_sample(sorted: &[i64]) -> Option<Quantiles> {
        Quantiles::of_sample_from(sorted, None, Interval::Order)
    }

    /// Quantiles of a uniform sample of `population` delays (`None`: of an unbounded one),
    /// their intervals interpolated ([`interpolated_interval`]) or the order statistics'. A
    /// sample of the whole population gives its quantiles exactly, each interval its point.
    pub fn of_sample_from(
        sorted: &[i64],
        population: Option<u64>,
        ci: Interval,
    ) -> Option<Quantiles> {
        if sorted.is_empty() {
            return None;
        }
        let whole = population == Some(sorted.len() as u64);
        let ci = |p: f64| match ci {
            _ if whole => Some([crate::stats::nearest_rank(sorted, p) as f64; 2]),
            Interval::Interpolated => interpolated_interval(sorted, p, population),
            Interval::Order => ranks_and_cdf(sorted.len(), p, population)
                .map(|(l, u, _)| [sorted[l - 1] as f64, sorted[u - 1] as f64]),
        };
        Some(Quantiles {
            p50_ci95_ns: ci(0.50),
            p90_ci95_ns: ci(0.90),
            p99_ci95_ns: ci(0.99),
            p999_ci95_ns: ci(0.999),
            ..Quantiles::of_sorted(sorted)
        })
    }
}

/// `sampled / fraction`, the count in the whole interval a sample count stands for; `None`
/// where it would not fit a `u64`.
fn scaled_count(sampled: u64, fraction: f64) -> Option<u64> {
    let x = (sampled as f64 / fraction).round();
    (x.is_finite() && x < u64::MAX as f64).then_some(x as u64)
}

/// The `sample` method.
#[derive(Clone, Debug)]
pub struct SampleMethod {
    cfg: Config,
}

impl SampleMethod {
    pub fn new(cfg: Config) -> SampleMethod {
        SampleMethod { cfg }
    }
    pub fn config_ref(&self) -> &Config {
        &self.cfg
    }
}

/// `sample`: coordinated bottom-k sampling for quantiles.
pub const INFO: MethodInfo = MethodInfo {
    name: "sample",
    summary: "coordinated packet sampling (trajectory sampling): the 4096 packets of smallest identity hash a point and interval (about 20 KiB shipped for a 1 s interval; --memory / ~5 B), exact delays of a uniform sample; mean, std, loss, p50/p90/p99/p99.9 with 95 % intervals from order statistics (interpolated; ci=order: distribution-free)",
    per_flow: false,
    per_packet: false,
    recovers_delays: true,
    crosses: "each point's samples compressed: hash cells (Elias-Fano, cell_bits + 2-3 bits) and timestamps (the bits of the sampled span), about 40 bits a sample at 1 s and ns, one way; no round trip",
    build: |o: &BuildOptions| {
        let cfg = match o.memory {
            Some(m) => Config::for_memory(m, o.seed)?,
            None => Config::new(DEFAULT_CAPACITY, o.seed)?,
        };
        Ok(Box::new(SampleMethod::new(cfg)))
    },
    from_config: |pairs| {
        let (mut capacity, mut seed) = (DEFAULT_CAPACITY, 0u64);
        let (mut cell_bits, mut resolution_ns) = (DEFAULT_CELL_BITS, 1u64);
        let mut ci = Interval::default();
        for (k, v) in pairs {
            match k.as_str() {
                "ci" => {
                    ci = match v.as_str() {
                        "interpolated" => Interval::Interpolated,
                        "order" => Interval::Order,
                        _ => {
                            return Err(MethodError::Invalid(format!(
                                "sample ci '{v}' is neither interpolated nor order"
                            )));
                        }
                    }
                }
                "capacity" => capacity = config_value("sample", k, v)?,
                "seed" => seed = config_value("sample", k, v)?,
                "cell_bits" => cell_bits = config_value("sample", k, v)?,
                "resolution_ns" => resolution_ns = config_value("sample", k, v)?,
                _ => {
                    return Err(unknown_field(
                        "sample",
                        k,
                        &["capacity", "seed", "cell_bits", "resolution_ns", "ci"],
                    ));
                }
            }
        }
        let cfg = Config::new(capacity, seed)?
            .with_cell_bits(cell_bits)?
            .with_resolution_ns(resolution_ns)?
            .with_interval(ci);
        Ok(Box::new(SampleMethod::new(cfg)))
    },
};

impl Method for SampleMethod {
    fn name(&self) -> &str {
        "sample"
    }
    fn config(&self) -> Vec<(&'static str, String)> {
        self.cfg.pairs()
    }
    fn new_point(&self, _role: Role) -> Box<dyn PointSynopsis> {
        Box::new(Synopsis::new(self.cfg))
    }
    fn decode_point(
        &self,
        _role: Role,
        bytes: &[u8],
    ) -> Result<Box<dyn PointSynopsis>, DecodeError> {
        Ok(Box::new(Synopsis::decode(self.cfg, bytes)?))
    }
    fn estimate(
        &self,
        sender: Box<dyn PointSynopsis>,
        receiver: Box<dyn PointSynopsis>,
    ) -> Result<Estimate, MethodError> {
        let s = downcast::<Synopsis>(sender, "sample")?;
        let r = downcast::<Synopsis>(receiver, "sample")?;
        let e = estimate(&s, &r)?;
        let summary =
            (!e.delays.is_empty()).then(|| crate::stats::DelaySummary::from_sorted(&e.delays));
        let mut notes = vec![
            format!(
                "{} matched samples below the common threshold ({:.3e} of the hash range)",
                e.delays.len(),
                e.fraction
            ),
            format!(
                "hashes shipped as {:.3e} cells: expected false matches {:.1e} ({} samples only at the sender × {} only at the receiver / cells)",
                e.cells, e.false_matches, e.lost_sampled, e.unexpected_sampled
            ),
        ];
        if e.ambiguous_sampled > 0 {
            notes.push(format!(
                "samples left out, their cells holding a packet seen at one point only: {}",
                e.ambiguous_sampled
            ));
        }
        if e.quantiles.is_some() {
            notes.push(
                match self.cfg.ci {
                    Interval::Interpolated => {
                        "95 % intervals: between the order statistics of the samples' hypergeometric ranks (a sample of the delivered packets), interpolated to 2.5 % a tail (about 95 %; ci=order keeps the distribution-free order statistics)"
                    }
                    Interval::Order => {
                        "95 % intervals: the order statistics of the samples' hypergeometric ranks (a sample of the delivered packets): at least 95 % for any delay distribution"
                    }
                }
                .to_string(),
            );
        }
        let q = self.cfg.resolution_ns;
        if q > 1 {
            notes.push(format!(
                "timestamps shipped at {q} ns: each delay within {} ns, the intervals widened by as much",
                q - 1
            ));
        }
        if let Some(q) = &e.quantiles
            && q.p999_ci95_ns.is_none()
        {
            notes.push(format!(
                "p99.9 has no 95 % interval from {} samples (more memory gives one)",
                e.delays.len()
            ));
        }
        Ok(Estimate {
            mean_ns: summary.map(|d| d.mean_ns),
            std_ns: summary.map(|d| d.std_ns),
            samples: e.delays.len() as u64,
            bytes: s
                .shipped_len()
                .unwrap_or(0)
                .max(r.shipped_len().unwrap_or(0)),
            lost: scaled_count(e.lost_sampled, e.fraction),
            // rounded timestamps: each delay within resolution − 1 ns, which the merged
            // intervals widen by too
            recovered: Some(crate::method::RecoveredDelays::sampled(
                &e.delays,
                e.fraction,
                q - 1,
            )),
            quantiles: e.quantiles,
            notes,
            ..Default::default()
        })
    }
    /// The matched samples with the receiver's identities: its recording sample lists them in
    /// the order it ships its cells (ascending `(hash, identity)`).
    fn recovered_packets(
        &self,
        sender: &dyn PointSynopsis,
        receiver: &dyn PointSynopsis,
    ) -> Option<Result<RecoveredPackets, MethodError>> {
        Some((|| {
            let s = downcast_ref::<Synopsis>(sender, "sample")?;
            let r = downcast_ref::<Synopsis>(receiver, "sample")?;
            check_pair(&s.cfg, &r.cfg)?;
            if r.decoded.is_some() {
                return Err(MethodError::Invalid(
                    "the receiver's sample was decoded from what it shipped: the identities of its packets stayed at the point".into(),
                ));
            }
            let (ss, rs) = (s.shipped(), r.shipped());
            let m = matching(&ss, &rs, (s.full(), r.full()));
            let ids: Vec<u64> = r.kept.keys().map(|&(_, id)| id).collect();
            Ok(RecoveredPackets {
                basis: DelayBasis::Sampled {
                    fraction: m.cells / m.all as f64,
                    max_error_ns: self.cfg.resolution_ns - 1,
                },
                packets: m
                    .pairs
                    .iter()
                    .map(|&(i, j)| RecoveredPacket {
                        id: ids[j],
                        delay_ns: rs.times[j].wrapping_sub(ss.times[i]) as i64,
                    })
                    .collect(),
            })
        })())
    }
}

#[cfg(test)]
mod tests;
