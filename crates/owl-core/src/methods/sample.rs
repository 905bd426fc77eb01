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
//! `cell_bits + 2.5 + log₂(span / resolution)` bits a sample: 54 at the defaults for a 1 s
//! interval of nanosecond timestamps (22-bit cells, sized for at most 10⁻³ false matches an
//! interval: *Sizing the cells*), 40 with the compact `cell_bits=8`, 128 (16 B) before any
//! compression. The budget is `--memory` bytes per point and interval, sized for that
//! expectation; the bytes reported are the payload's.
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
//! seen only at the receiver in the same cell: with `a_S` and `a_R` such samples below the
//! common threshold, `m` samples a point there and `U` cells (hashes independent and uniform),
//! the expected number of false pairs is at most `a_S·a_R/U·(1 + m/U)` — zero when the receiver
//! saw nothing the sender did not (pure loss), about `m·α_S·α_R/2^cell_bits` for fractions `α`
//! of one-sided samples. The estimate reports it at the unmatched counts it sees
//! ([`SampleEstimate::false_matches`]), and the same bound whatever the one-sided counts,
//! every sample taken as one-sided: `F̂ = m_S·m_R/U·(1 + max(m_S, m_R)/U)`
//! ([`SampleEstimate::false_matches_bound`]).
//!
//! # Sizing the cells: at most ε false matches an interval
//!
//! One-sided samples are not rare: a packet in flight at an interval's cut is seen at one point
//! in this interval and at the other in the next, and drops add to them (measured on real
//! paths: 750 samples only at S and 577 only at R in an interval of 4 096). With cells 2⁸ finer
//! than the samples' spacing (`cell_bits=8`) that interval expected 0.83 false matches, and one
//! put a delay of the interval's length into the standard deviation (8.2 ms reported, 0.81 ms
//! true). A point cannot know the other's counts, so by default the cells are sized for the
//! worst case, every sample one-sided.
//!
//! With `false_matches=ε` (default [`DEFAULT_FALSE_MATCHES`], 10⁻³), a point with `n` samples
//! spanning the hash range `R` (all of it until the point is full, `[0, τ]` after) ships cells
//! of width `w ≤ R/(n·2ᵇ)`, `b` the least integer with `k·(1 + 2⁻ᵇ) ≤ ε·2ᵇ`, `k` the capacity
//! ([`cell_bits_for`]): `b ≈ log₂(k/ε)`, 22 bits at the default 4 096 samples. The points match
//! on the coarser grid, the width `w_X` of one point `X`, over the common range `[0, T)` below
//! both thresholds, `U = T/w_X` cells, where the other point `Y` has `m_Y ≤ k` samples:
//!
//! ```text
//! F̂ = m_X·m_Y/U·(1 + m/U) ≤ ρ · (m_Y/k) · k(1 + 2⁻ᵇ)/2ᵇ ≤ ρ·ε,    ρ = (m_X/T) / (n_X/R_X),
//! ```
//!
//! `ρ` the density of X's samples below the common threshold over their density on X's own
//! range: at most 1 (up to a cell) where X's threshold is the common one, 1 in expectation
//! otherwise (uniform hashes), within a few % for thousands of samples. So that the bound holds
//! in every interval and not only on average over `ρ`, the estimator then lowers the common
//! threshold, a cell at a time from the top, while `F̂ > ε`: a threshold set by hashes only, so
//! the matched delays stay a uniform sample of the delivered packets; the samples above it are
//! left out, counted ([`SampleEstimate::trimmed_sampled`]) and noted. Measured: none in 200
//! intervals of equal counts, 0.3 % of the samples where one point saw 3 times the other's
//! packets (tests).
//!
//! **What is guaranteed.** Under `false_matches=ε` every estimate rests on samples with
//! `F̂ ≤ ε`: whatever number of them was seen at one point only — all of them, the points
//! sharing no packet — the expected number of false pairs among them is at most ε (over the
//! hash seed, the hashes of distinct packets independent and uniform), whether either point is
//! full or not and whatever their counts. It bounds an expectation: over many intervals, at
//! most about ε false pairs an interval (tests: none in 400 intervals where at least half
//! of each point's packets were unseen by the other, at equal and unequal counts).
//!
//! Why the capacity `k` and not the point's own count (`log₂(n/ε)` bits, `n²/U ≤ ε` as if
//! `n_S = n_R = n`): with own counts the coarser grid is that of the point with fewer samples,
//! and points of different counts get `F̂ ≈ ε·n_Y/n_X` — 2ε where one point saw twice the
//! other's packets, 400ε for a point of 10 packets against one that kept 4 096. Sized by `k`,
//! a point that is not full pays `log₂(k/ε)` rather than `log₂(n/ε)` bits a cell on its fewer
//! than `k` samples: never more than a full point's payload, which is what `--memory` sizes.
//!
//! **Cost.** At 4 096 samples of a 1 s interval of nanosecond timestamps: 54.5 bits a sample
//! expected (22 + 2.5 + 30), 54.3 measured (27 854 B), against 40.5 (40.3 measured, 20 686 B)
//! with `cell_bits=8`: 35 % more, so `--memory` buys as many fewer samples (618 instead of 802
//! at 4 096 B; quantile intervals about √(802/618) = 1.14 times wider). Where a fifth of each
//! point's 200 000 packets are unseen by the other, the expected false matches the estimate
//! reports fall from 0.49 to 3·10⁻⁵ an interval (`F̂` 7.4·10⁻⁴), and the false matches
//! counted from 93 in 200 intervals to none (`measure_cost_and_false_matches`, run by hand).
//!
//! **Fixed cells.** `cell_bits=B` ships cells `2^B` finer than the samples' spacing whatever the
//! counts; the threshold is not lowered, and the expected false matches are stated, not
//! bounded. `cell_bits=8` is the compact format of before, byte for byte. The two are one
//! rule: a configuration holds `cell_bits=auto` with `false_matches=ε`, or `cell_bits=B` with
//! `false_matches=off`, and giving both numbers is an error; a configuration written before
//! `false_matches` existed (`cell_bits=8`, no `false_matches`) is the fixed one. The points
//! agree on the rule ([`check_pair`]), hence on the bits; the shift each payload uses travels
//! in it ([`payload`]), so the format did not change.
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
//!
//! **Horizon.** A matched pair whose delay lies beyond `[−H, H]` (`horizon_ns`, default
//! [`DEFAULT_HORIZON_NS`], 1 s; `owl` sets it from `--horizon`) is no delay but a false match
//! or a late packet, which the truth ([`crate::pipeline::truth`]) never matches either: it is
//! left out of the delays, counted lost (as the truth counts a late packet;
//! [`SampleEstimate::beyond_horizon`]) and noted ("N matches with delays beyond the ±H horizon
//! left out (false or late matches)"). A false match within the horizon stays a delay: the
//! sizing of the cells is what bounds those.

use std::borrow::Cow;
use std::collections::BTreeMap;

use crate::hash::{HashFamily, HashFn};
use crate::method::{
    BuildOptions, DelayBasis, Estimate, MethodConfig, MethodError, MethodInfo, Quantiles,
    RecoveredPacket, RecoveredPackets, TypedSynopsis, config_value, unknown_field,
};
use crate::pipeline::truth::DEFAULT_HORIZON_NS;
use crate::record::PacketRecord;
use crate::stats::special::{binomial_cdf, hypergeometric_cdf};
use crate::wire::DecodeError;

pub mod payload;
pub use payload::{HEADER_BYTES, Shipped, TAG};

/// First bytes of a sample kept whole in a point's own file ([`Synopsis::encode_local`]).
pub const LOCAL_TAG: &[u8; 4] = b"SMPL";

/// Default capacity: 4 096 packets (about 27 KiB a point and one-second interval).
pub const DEFAULT_CAPACITY: usize = 4096;
/// Largest capacity accepted.
pub const MAX_CAPACITY: usize = 1 << 26;
/// Default target of expected false matches an interval, whatever the one-sided counts
/// (`false_matches`, module doc): 10⁻³.
pub const DEFAULT_FALSE_MATCHES: f64 = 1e-3;
/// The fixed cells of the compact format, the default before `false_matches` (`cell_bits=8`):
/// cells 2⁸ times finer than the samples' spacing, about 40 bits a sample at 1 s and ns.
pub const COMPACT_CELL_BITS: u8 = 8;
/// Largest fixed cell bits accepted (`cell_bits=B`; derived cells go up to 64).
pub const MAX_CELL_BITS: u8 = 40;
/// The interval [`Config::for_memory`] sizes for: one second of nanosecond timestamps.
pub const SIZING_SPAN_NS: u64 = 1_000_000_000;

/// What both points must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    capacity: usize,
    seed: u64,
    /// How the cells are sized; [`Config::cell_bits`] resolves it.
    cells: Cells,
    /// The cell bits the rule gives at this capacity.
    cell_bits: u8,
    resolution_ns: u64,
    horizon_ns: u64,
    ci: Interval,
}

/// How finely a point ships its hashes (module doc, *Sizing the cells*).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cells {
    /// `false_matches=ε`: cells `log₂(capacity/ε)` bits finer than the samples' spacing, and
    /// the common threshold lowered where needed, so that the expected false matches of an
    /// interval stay within ε whatever the one-sided counts.
    FalseMatches(f64),
    /// `cell_bits=B`: cells `2^B` times finer than the samples' spacing, whatever the counts;
    /// the expected false matches are stated, not bounded.
    Bits(u8),
}

// ε is checked finite (in (0, 1)) when a configuration is made: equality is an equivalence.
impl Eq for Cells {}

/// The cell bits `false_matches=ε` gives at `capacity`: the least `b` with
/// `capacity·(1 + 2⁻ᵇ) ≤ ε·2ᵇ` (module doc), at most 64 (cells as fine as the hashes).
pub fn cell_bits_for(capacity: usize, false_matches: f64) -> u8 {
    let k = capacity as f64;
    (1..=64u8)
        .find(|&b| {
            let cells = (b as f64).exp2();
            k * (1.0 + 1.0 / cells) <= false_matches * cells
        })
        .unwrap_or(64)
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
    /// A configuration keeping `capacity` packets a point and interval, shipping cells sized
    /// for [`DEFAULT_FALSE_MATCHES`] and exact timestamps, matches beyond the default horizon
    /// ([`DEFAULT_HORIZON_NS`]) left out.
    pub fn new(capacity: usize, seed: u64) -> Result<Config, MethodError> {
        if !(1..=MAX_CAPACITY).contains(&capacity) {
            return Err(MethodError::Invalid(format!(
                "sample capacity {capacity} is outside 1..={MAX_CAPACITY}"
            )));
        }
        let cells = Cells::FalseMatches(DEFAULT_FALSE_MATCHES);
        Ok(Config {
            capacity,
            seed,
            cells,
            cell_bits: cell_bits_for(capacity, DEFAULT_FALSE_MATCHES),
            resolution_ns: 1,
            horizon_ns: DEFAULT_HORIZON_NS,
            ci: Interval::default(),
        })
    }
    /// This configuration at another capacity (the cell rule re-resolved).
    fn with_capacity(self, capacity: usize) -> Result<Config, MethodError> {
        Config::new(capacity, self.seed)?;
        Ok(Config {
            capacity,
            cell_bits: match self.cells {
                Cells::FalseMatches(e) => cell_bits_for(capacity, e),
                Cells::Bits(b) => b,
            },
            ..self
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
    /// Fixed cells, `2^bits` times finer than the samples' spacing (`cell_bits=B`, payload
    /// module doc): each bit costs one bit a sample and halves the expected false matches,
    /// which are then stated but not bounded ([`COMPACT_CELL_BITS`]: the earlier default).
    pub fn with_cell_bits(self, bits: u8) -> Result<Config, MethodError> {
        if !(1..=MAX_CELL_BITS).contains(&bits) {
            return Err(MethodError::Invalid(format!(
                "sample cell_bits {bits} is outside 1..={MAX_CELL_BITS}"
            )));
        }
        Ok(Config {
            cells: Cells::Bits(bits),
            cell_bits: bits,
            ..self
        })
    }
    /// Cells sized so that the expected false matches of an interval stay within `eps`
    /// whatever the one-sided counts (`false_matches=ε`, module doc), `eps` in (0, 1).
    pub fn with_false_matches(self, eps: f64) -> Result<Config, MethodError> {
        if !(eps > 0.0 && eps < 1.0) {
            return Err(MethodError::Invalid(format!(
                "sample false_matches {eps} is outside (0, 1)"
            )));
        }
        Ok(Config {
            cells: Cells::FalseMatches(eps),
            cell_bits: cell_bits_for(self.capacity, eps),
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
    /// Matched pairs whose delay lies beyond `[−ns, ns]` are false or late matches, left out
    /// of the delays and counted (module doc, *The estimate*); `owl` sets it from `--horizon`.
    pub fn with_horizon_ns(self, ns: u64) -> Result<Config, MethodError> {
        if !(1..=i64::MAX as u64).contains(&ns) {
            return Err(MethodError::Invalid(format!(
                "sample horizon_ns {ns} is outside 1..={}",
                i64::MAX
            )));
        }
        Ok(Config {
            horizon_ns: ns,
            ..self
        })
    }
    /// The capacity whose expected payload fits in `memory` bytes for an interval of
    /// [`SIZING_SPAN_NS`] ([`Config::for_payload_bits`]; the bytes reported are the payload's
    /// real length). At the default `false_matches=10⁻³` a sample costs `log₂(k/ε) + 32.5`
    /// bits at capacity `k` (52.5 at `--memory 4096`: 618 samples; 54.5 at the default 4 096);
    /// with `cell_bits=8`, 40.5 (802 samples at `--memory 4096`).
    pub fn for_memory(memory: u64, seed: u64) -> Result<Config, MethodError> {
        let bits = memory.saturating_sub(HEADER_BYTES as u64) as f64 * 8.0;
        Config::new(1, seed)?
            .for_payload_bits(bits, SIZING_SPAN_NS)
            .ok_or_else(|| {
                let per = Config::new(1, seed)
                    .map_or(0.0, |c| c.expected_bits_per_sample(SIZING_SPAN_NS));
                MethodError::Invalid(format!(
                    "--memory {memory} bytes is below one sampled packet ({HEADER_BYTES} bytes of header and about {per:.0} bits a sample)"
                ))
            })
    }
    /// This configuration (cell rule, resolution, horizon, interval, seed) at the largest
    /// capacity whose expected bit stream, [`expected_bits_per_sample`] a sample for samples
    /// spanning `span_ns`, fits in `bits`; `None` when not even one sample does. Under
    /// `false_matches` a sample's cost grows with the capacity (`log₂(k/ε)` bits of cell), so
    /// the capacity is searched, not divided out.
    ///
    /// [`expected_bits_per_sample`]: Config::expected_bits_per_sample
    pub fn for_payload_bits(self, bits: f64, span_ns: u64) -> Option<Config> {
        let fits = |k: usize| {
            self.with_capacity(k)
                .is_ok_and(|c| k as f64 * c.expected_bits_per_sample(span_ns) <= bits)
        };
        if !fits(1) {
            return None;
        }
        // k · bits(k) grows with k: the largest k that fits, by bisection
        let (mut lo, mut hi) = (1usize, MAX_CAPACITY);
        if fits(hi) {
            lo = hi;
        }
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if fits(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        self.with_capacity(lo).ok()
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
    /// The cells' bits finer than the samples' spacing: fixed, or derived from
    /// `false_matches` and the capacity ([`cell_bits_for`]).
    pub fn cell_bits(&self) -> u8 {
        self.cell_bits
    }
    pub fn cells(&self) -> Cells {
        self.cells
    }
    /// The target of expected false matches an interval, when the cells are sized for one.
    pub fn false_matches(&self) -> Option<f64> {
        match self.cells {
            Cells::FalseMatches(e) => Some(e),
            Cells::Bits(_) => None,
        }
    }
    pub fn resolution_ns(&self) -> u64 {
        self.resolution_ns
    }
    pub fn horizon_ns(&self) -> u64 {
        self.horizon_ns
    }
    fn hash(&self) -> HashFn {
        HashFamily::new(self.seed).member(0x5a4d_504c)
    }
    /// The fields, always the same ones in the same order: `cell_bits` is `auto` (derived
    /// from `false_matches`) or fixed, `false_matches` is ε or `off` (fixed cells).
    fn pairs(&self) -> Vec<(&'static str, String)> {
        let (bits, eps) = match self.cells {
            Cells::FalseMatches(e) => ("auto".to_string(), e.to_string()),
            Cells::Bits(b) => (b.to_string(), "off".to_string()),
        };
        vec![
            ("capacity", self.capacity.to_string()),
            ("seed", self.seed.to_string()),
            ("cell_bits", bits),
            ("false_matches", eps),
            ("resolution_ns", self.resolution_ns.to_string()),
            ("horizon_ns", self.horizon_ns.to_string()),
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
    /// What a receiver's file holds ([`TypedSynopsis::encode_local`]): the recording sample
    /// as it is, so that `owl estimate` can merge it with the packets held at the interval's
    /// cuts — tag `SMPL`, `u64 packets seen | u32 n | n × (u64 hash, u64 identity, u64
    /// timestamp)`, ascending by (hash, identity). 24 B a sample, local state: what crosses
    /// is still the shipped payload.
    pub fn encode_local(&self, out: &mut Vec<u8>) {
        if self.decoded.is_some() {
            return self.encode(out);
        }
        let mut w = crate::wire::WireWriter::new(out);
        w.bytes(LOCAL_TAG);
        w.u64(self.seen);
        w.u32(self.kept.len() as u32);
        for (&(h, id), &ts) in &self.kept {
            w.u64(h);
            w.u64(id);
            w.u64(ts);
        }
    }

    /// A sample as [`encode_local`](Self::encode_local) wrote it: hashes must be the
    /// configuration's hashes of their identities, ascending, at most `capacity` of them.
    fn decode_local(cfg: Config, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        let mut r = crate::wire::WireReader::new(bytes);
        r.take(4, "tag")?;
        let seen = r.u64("packets seen")?;
        let n = r.u32("samples")? as usize;
        if n > cfg.capacity || n.saturating_mul(24) != r.remaining() {
            return Err(r.invalid(format!(
                "{n} samples: more than the capacity ({}) or not the bytes left",
                cfg.capacity
            )));
        }
        let mut s = Synopsis::new(cfg);
        s.seen = seen;
        let mut last = None;
        for _ in 0..n {
            let (h, id, ts) = (r.u64("hash")?, r.u64("identity")?, r.u64("timestamp")?);
            if s.hash.hash(id) != h || last.is_some_and(|l| l >= (h, id)) {
                return Err(r.invalid("a sample whose hash is not its identity's, or out of order"));
            }
            last = Some((h, id));
            s.kept.insert((h, id), ts);
        }
        if (n as u64) > seen {
            return Err(r.invalid(format!("{n} samples of {seen} packets seen")));
        }
        Ok(s)
    }

    /// Decode a payload of this configuration: the count must fit the capacity and the bytes.
    /// A receiver's local form ([`encode_local`](Self::encode_local)) decodes into a
    /// recording sample.
    pub fn decode(cfg: Config, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        if bytes.starts_with(LOCAL_TAG) {
            return Synopsis::decode_local(cfg, bytes);
        }
        let d = Shipped::decode(bytes, cfg.capacity)?;
        Ok(Synopsis {
            seen: d.seen,
            decoded: Some(d),
            ..Synopsis::new(cfg)
        })
    }
}

impl TypedSynopsis for Synopsis {
    const METHOD: &'static str = "sample";
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
    fn encode_local(&self, out: &mut Vec<u8>) {
        Synopsis::encode_local(self, out)
    }
    /// The whole payload crosses (its header is 35 bytes).
    fn shipped_len(&self) -> Option<u64> {
        Some(self.encoded_len() as u64)
    }
    /// The bottom-k of both streams: the `capacity` smallest `(hash, identity)` of the union
    /// of both samples (the smallest of both streams are among each one's smallest), an
    /// identity both kept with this point's timestamp (its first sighting), packets seen
    /// added. A decoded sample holds hash cells, not the hashes and identities this needs
    /// (nor can it record after), so merging one is refused with an error saying so, unless
    /// one side saw no packet (an empty `later` changes nothing; an empty point becomes a
    /// recording `later`).
    fn merge(&mut self, later: Synopsis) -> Result<(), MethodError> {
        check_pair(&self.cfg, &later.cfg).map_err(crate::method::as_merge)?;
        if later.seen == 0 {
            return Ok(());
        }
        if self.seen == 0 && later.decoded.is_none() {
            *self = later;
            return Ok(());
        }
        if self.decoded.is_some() || later.decoded.is_some() {
            return Err(MethodError::Invalid(
                "sample: a decoded sample holds its hashes as cells and no identities: it cannot be merged with another (merge the recording points)".into(),
            ));
        }
        self.seen = self
            .seen
            .checked_add(later.seen)
            .ok_or_else(|| MethodError::Invalid("sample: merged packet count overflows".into()))?;
        for (k, ts) in later.kept {
            self.kept.entry(k).or_insert(ts);
        }
        while self.kept.len() > self.cfg.capacity {
            self.kept.pop_last();
        }
        Ok(())
    }
}

/// What the pair of samples says.
#[derive(Clone, Debug, PartialEq)]
pub struct SampleEstimate {
    /// Matched delays below the common threshold and within the horizon, ascending.
    pub delays: Vec<i64>,
    /// Sender samples below the common threshold that the receiver did not see (within the
    /// horizon: the matches beyond it count here too, as the truth counts a late packet lost).
    pub lost_sampled: u64,
    /// Receiver samples below the threshold that the sender did not see.
    pub unexpected_sampled: u64,
    /// Samples seen at both points but left out: their cell holds a different number of
    /// samples at the two points, so which pairs with which is not known.
    pub ambiguous_sampled: u64,
    /// Matched pairs whose delay lies beyond `[−horizon, horizon]`: false or late matches,
    /// left out of the delays (and counted in `lost_sampled`).
    pub beyond_horizon: u64,
    /// Samples of either point left out above a threshold lowered to keep the expected false
    /// matches within `false_matches` (module doc; 0 with fixed cells).
    pub trimmed_sampled: u64,
    /// The sampled fraction of the hash range (1 when both points kept everything).
    pub fraction: f64,
    /// Cells below the common threshold.
    pub cells: f64,
    /// Expected false matches, `a_S·a_R/U·(1 + m/U)` at the samples found at one point only
    /// (module doc).
    pub false_matches: f64,
    /// The same bound whatever the one-sided counts, `m_S·m_R/U·(1 + max(m_S, m_R)/U)` at the
    /// samples below the threshold: at most `false_matches` of the configuration when it has
    /// one.
    pub false_matches_bound: f64,
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

/// The two samples matched below their common threshold.
struct Matching {
    /// Matched samples within the horizon, `(sender index, receiver index, delay)` in the
    /// shipped order, which is the order of the recording samples' `(hash, identity)` keys.
    pairs: Vec<(usize, usize, i64)>,
    lost: u64,
    unexpected: u64,
    ambiguous: u64,
    beyond_horizon: u64,
    trimmed: u64,
    /// Samples below the threshold at each point.
    below: (usize, usize),
    /// The common threshold, in cells.
    cells: f64,
    /// Cells in the hash range.
    all: u128,
}

/// The expected false pairs, at most, of `a` and `b` samples one-sided at each point among
/// `m` samples a point in `u` cells (module doc).
fn false_pairs(a: usize, b: usize, m: usize, u: f64) -> f64 {
    if a == 0 || b == 0 || u <= 0.0 {
        return 0.0;
    }
    a as f64 * b as f64 / u * (1.0 + m as f64 / u)
}

/// Match the two samples below their common threshold, cell by cell, lowering it first under
/// `false_matches` until the bound whatever the one-sided counts holds, and leave out the
/// matches beyond the horizon (module doc).
fn matching(cfg: &Config, s: &Shipped, r: &Shipped, full: (bool, bool)) -> Matching {
    // the common grid: the coarser point's cells
    let shift = s.shift.max(r.shift);
    let cell = |x: &Shipped, i: usize| x.cells[i] >> (shift - x.shift);
    // each point is complete below its last cell when full, everywhere otherwise
    let all = 1u128 << (64 - shift as u32);
    let bound = |x: &Shipped, full: bool| match x.cells.len() {
        n if full && n > 0 => cell(x, n - 1) as u128,
        _ => all,
    };
    let mut b = bound(s, full.0).min(bound(r, full.1));
    let below = |x: &Shipped, b: u128| {
        x.cells
            .partition_point(|&c| ((c >> (shift - x.shift)) as u128) < b)
    };
    let (mut ns, mut nr) = (below(s, b), below(r, b));
    let mut trimmed = 0u64;
    if let Some(eps) = cfg.false_matches() {
        // the highest cell below the threshold at either point becomes the threshold until
        // the bound whatever the one-sided counts holds: each step leaves out a cell's samples
        while false_pairs(ns, nr, ns.max(nr), b as f64) > eps {
            let top = |x: &Shipped, n: usize| (n > 0).then(|| cell(x, n - 1));
            b = top(s, ns).max(top(r, nr)).unwrap_or(0) as u128;
            let (ns2, nr2) = (below(s, b), below(r, b));
            trimmed += (ns - ns2 + nr - nr2) as u64;
            (ns, nr) = (ns2, nr2);
        }
    }
    let horizon = cfg.horizon_ns;
    let mut pairs = Vec::with_capacity(ns.min(nr));
    let (mut lost, mut unexpected, mut ambiguous, mut beyond) = (0u64, 0u64, 0u64, 0u64);
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
            // the same packets at both points, in the order of their full hashes; a delay
            // beyond the horizon is no delay but a false or late match
            for k in 0..a {
                let d = r.times[j + k].wrapping_sub(s.times[i + k]) as i64;
                if d.unsigned_abs() <= horizon {
                    pairs.push((i + k, j + k, d));
                } else {
                    beyond += 1;
                }
            }
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
        lost: lost + beyond,
        unexpected,
        ambiguous,
        beyond_horizon: beyond,
        trimmed,
        below: (ns, nr),
        cells: b as f64,
        all,
    }
}

/// Match the two samples below their common threshold, cell by cell (module doc).
pub fn estimate(sender: &Synopsis, receiver: &Synopsis) -> Result<SampleEstimate, MethodError> {
    check_pair(&sender.cfg, &receiver.cfg)?;
    let (s, r) = (sender.shipped(), receiver.shipped());
    let m = matching(&sender.cfg, &s, &r, (sender.full(), receiver.full()));
    let (ns, nr) = m.below;
    let mut delays: Vec<i64> = m.pairs.iter().map(|&(_, _, d)| d).collect();
    delays.sort_unstable();
    let cells = m.cells;
    let fraction = cells / m.all as f64;
    let n = ns.max(nr);
    let false_matches = false_pairs(m.lost as usize, m.unexpected as usize, n, cells);
    let false_matches_bound = false_pairs(ns, nr, n, cells);
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
        lost_sampled: m.lost,
        unexpected_sampled: m.unexpected,
        ambiguous_sampled: m.ambiguous,
        beyond_horizon: m.beyond_horizon,
        trimmed_sampled: m.trimmed,
        fraction,
        cells,
        false_matches,
        false_matches_bound,
        quantiles,
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
/// `N > n`, the ranks are the hypergeometric ones (`ranks_and_cdf`).
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
    summary: "coordinated packet sampling (trajectory sampling): the 4096 packets of smallest identity hash a point and interval (about 27 KiB shipped for a 1 s interval; --memory / ~7 B), exact delays of a uniform sample; mean, std, loss, p50/p90/p99/p99.9 with 95 % intervals from order statistics (interpolated; ci=order: distribution-free)",
    samples: "packets the mean rests on",
    per_flow: false,
    per_packet: false,
    recovers_delays: true,
    crosses: "each point's samples compressed: hash cells (Elias-Fano, cell_bits + 2-3 bits; cell_bits from false_matches=1e-3 and the capacity, 22 at 4096 samples) and timestamps (the bits of the sampled span), about 54 bits a sample at 1 s and ns (40 with cell_bits=8), one way; no round trip",
    build: |o: &BuildOptions| {
        let cfg = match o.memory {
            Some(m) => Config::for_memory(m, o.seed)?,
            None => Config::new(DEFAULT_CAPACITY, o.seed)?,
        };
        Ok(Box::new(SampleMethod::new(cfg)))
    },
    from_config: |pairs| {
        let (mut capacity, mut seed) = (DEFAULT_CAPACITY, 0u64);
        let (mut resolution_ns, mut horizon_ns) = (1u64, DEFAULT_HORIZON_NS);
        // cell_bits: None for auto (absent too); false_matches: Some(None) for off
        let (mut cell_bits, mut false_matches) = (None::<u8>, None::<Option<f64>>);
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
                "cell_bits" => {
                    cell_bits = match v.trim() {
                        "auto" => None,
                        _ => Some(config_value("sample", k, v)?),
                    }
                }
                "false_matches" => {
                    false_matches = Some(match v.trim() {
                        "off" => None,
                        _ => Some(config_value("sample", k, v)?),
                    })
                }
                "resolution_ns" => resolution_ns = config_value("sample", k, v)?,
                "horizon_ns" => horizon_ns = config_value("sample", k, v)?,
                _ => {
                    return Err(unknown_field(
                        "sample",
                        k,
                        &[
                            "capacity",
                            "seed",
                            "cell_bits",
                            "false_matches",
                            "resolution_ns",
                            "horizon_ns",
                            "ci",
                        ],
                    ));
                }
            }
        }
        // one rule for the cells: fixed bits (false_matches off or absent), or derived from
        // false_matches (cell_bits auto or absent)
        let base = Config::new(capacity, seed)?;
        let cfg = match (cell_bits, false_matches) {
            (Some(b), None | Some(None)) => base.with_cell_bits(b)?,
            (None, None) => base,
            (None, Some(Some(eps))) => base.with_false_matches(eps)?,
            (None, Some(None)) => {
                return Err(MethodError::Invalid(
                    "sample false_matches=off needs fixed cells: give cell_bits a number of bits (8: the compact cells)".into(),
                ));
            }
            (Some(b), Some(Some(eps))) => {
                return Err(MethodError::Invalid(format!(
                    "sample cell_bits={b} fixes the cells and false_matches={eps} sizes them: give one of them (cell_bits=auto sizes them from false_matches)"
                )));
            }
        };
        let cfg = cfg
            .with_resolution_ns(resolution_ns)?
            .with_horizon_ns(horizon_ns)?
            .with_interval(ci);
        Ok(Box::new(SampleMethod::new(cfg)))
    },
};

impl MethodConfig for Config {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        Config::pairs(self)
    }
}

impl crate::method::TypedMethod for SampleMethod {
    type Config = Config;
    type Sender = Synopsis;
    type Receiver = Synopsis;
    fn name(&self) -> &str {
        "sample"
    }
    fn config(&self) -> &Config {
        &self.cfg
    }
    fn foreign(&self) -> crate::method::Foreign {
        crate::method::Foreign::Matches(
            "samples are paired by hash cell, with at most the configured false matches",
        )
    }
    fn new_sender(&self) -> Synopsis {
        Synopsis::new(self.cfg)
    }
    fn new_receiver(&self) -> Synopsis {
        Synopsis::new(self.cfg)
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        Synopsis::decode(self.cfg, bytes)
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        Synopsis::decode(self.cfg, bytes)
    }
    fn estimate(&self, s: Synopsis, r: Synopsis) -> Result<Estimate, MethodError> {
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
                "hashes shipped as {:.3e} cells ({} bits finer than the samples' spacing, {}): expected false matches {:.1e} ({} samples only at the sender × {} only at the receiver / cells), at most {:.1e} whatever the one-sided counts",
                e.cells,
                self.cfg.cell_bits,
                match self.cfg.cells {
                    Cells::FalseMatches(eps) => format!("false_matches={eps}: at most that"),
                    Cells::Bits(_) => "fixed: not bounded".to_string(),
                },
                e.false_matches,
                e.lost_sampled,
                e.unexpected_sampled,
                e.false_matches_bound
            ),
        ];
        if e.ambiguous_sampled > 0 {
            notes.push(format!(
                "samples left out, their cells holding a packet seen at one point only: {}",
                e.ambiguous_sampled
            ));
        }
        if e.trimmed_sampled > 0 {
            notes.push(format!(
                "{} samples left out above a common threshold lowered to keep the expected false matches within false_matches={} whatever the one-sided counts",
                e.trimmed_sampled,
                self.cfg.false_matches().unwrap_or(0.0)
            ));
        }
        if e.beyond_horizon > 0 {
            notes.push(format!(
                "{} matches with delays beyond the ±{} horizon left out (false or late matches)",
                e.beyond_horizon,
                crate::units::format_ns(self.cfg.horizon_ns as f64)
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
        sender: &Synopsis,
        receiver: &Synopsis,
    ) -> Option<Result<RecoveredPackets, MethodError>> {
        Some((|| {
            let (s, r) = (sender, receiver);
            check_pair(&s.cfg, &r.cfg)?;
            if r.decoded.is_some() {
                return Err(MethodError::Invalid(
                    "the receiver's sample was decoded from what it shipped: the identities of its packets stayed at the point".into(),
                ));
            }
            let (ss, rs) = (s.shipped(), r.shipped());
            let m = matching(&self.cfg, &ss, &rs, (s.full(), r.full()));
            let ids: Vec<u64> = r.kept.keys().map(|&(_, id)| id).collect();
            Ok(RecoveredPackets {
                basis: DelayBasis::Sampled {
                    fraction: m.cells / m.all as f64,
                    max_error_ns: self.cfg.resolution_ns - 1,
                },
                packets: m
                    .pairs
                    .iter()
                    .map(|&(_, j, delay_ns)| RecoveredPacket {
                        id: ids[j],
                        delay_ns,
                    })
                    .collect(),
            })
        })())
    }
}

#[cfg(test)]
mod tests;
