//! LDA — the Lossy Difference Aggregator (Kompella, Levchenko, Snoeren, Varghese;
//! LDA §III; the papers are listed in `owl_core`'s crate doc).
//!
//! Each observation point keeps `n` **banks** of `m` **rows**; a row is a (timestamp accumulator,
//! packet counter) pair (§III-B, Fig. 3). A packet `x` is hashed once to a **row** `h(x)` shared
//! by every bank and once to a **bank** `g(x)` chosen with probability `p_j` (or to no bank:
//! the packet is not sampled and costs nothing but that hash). Banks have *disjoint* sample sets,
//! so a packet updates at most one row (§III-B.4, §III-C). At the end of the interval the sender's
//! aggregator travels to the receiver, and the pair estimator of [`estimate`] keeps the
//! **usable** rows (equal packet counters at both points), whose timestamp differences add up
//! to the delays of exactly the packets they hold (§III-D). The standard deviation comes from
//! the same rows by one of three estimators ([`variance`], `--method-config
//! lda:std=paper|centred|rows`): the paper's collapsed rows, eq. (5) then `σ² = F − D²`
//! (§III-E); the same collapsed rows centred on the mean; or the spread of the usable rows
//! around the mean, owl's default. Each comes with a 95 % interval of the std.
//!
//! # Standard deviation: why not eq. (5) as printed
//!
//! Eq. (5) is unbiased, but its relative standard deviation is about `(1 + μ²/σ²)·√(2/ν)`, `ν`
//! the effective number of usable collapsed rows: the `μ²` term is each collapsed row's
//! row-count imbalance `n₊ − n₋` times the mean, hash noise the counters already know. At
//! `μ/σ ≈ 2.3` and the default 2 × 512 rows the std is off by tens of percent and some
//! intervals get `F − D² < 0`; on real paths, where a propagation delay makes `μ/σ` 10–1000,
//! it is noise. Subtracting `D·(n₊ − n₋)` before squaring removes the `μ` term (`centred`);
//! using every usable row's deviation from `n_i·D` (`rows`) also about doubles the degrees of
//! freedom. [`variance`] derives each estimator's expectation and corrects its bias; the
//! `lda-std` experiment measures all three.
//!
//! # Hashes
//!
//! Both hashes derive from the 64-bit packet identity with the seeded [`HashFamily`]:
//! the row hash is member [`ROW_HASH`] (`h(x) = reduce(h_0(x), m)`, multiply-shift into
//! `[0, m)`), the bank-sampling hash is member [`BANK_HASH`] (`g(x)` from the uniform 64-bit
//! `h_1(x)`, see [`Sampling`]). The bank hash is computed first and the row hash only for a
//! sampled packet. The ±1 sign of the standard-deviation estimator is the low bit of the row
//! index (§III-E: rows `2k` and `2k + 1` collapse; odd rows count `+`, even rows `−`), so no third
//! hash and no extra memory is needed, exactly as the paper says.
//!
//! # Identity digest (`lda:digest=on`, owl's default; not in the paper)
//!
//! LDA's only check of a row is that its packet counters agree (§III-D). A row at R that lost
//! one packet and gained one S did not record in the interval (a packet reordered across an
//! interval cut, a duplicate, a cut that fell back to a clock) passes it, and its difference is
//! off by the two packets' timestamp difference — up to an interval, which corrupts the mean
//! and, squared, the std (see [Assumptions](#assumptions-and-what-breaks-them)). With the
//! digest each row also keeps `d = Σ δ(x) mod 2³²` over the packets it recorded, `δ(x)` the low
//! 32 bits of the row hash value `h_0(x)` that the update computes anyway (no extra hash; why
//! these bits are independent of the row: [`Synopsis::record`]). A row is **usable** only when
//! its counters *and* its digests agree; a row whose counters agree and digests differ is a
//! **foreign row** ([`BankReport::foreign_rows`]): never used for the mean or any std, and
//! noted. A row whose packet multisets differ at S and R with equal counts escapes with
//! probability about 2⁻³² (the difference of the digests is a sum of independent uniform
//! values). A wrapping sum rather than an XOR, so that a duplicated packet does not cancel
//! itself out. `lda:digest=off` is the paper's LDA exactly (12-byte rows, payload `LDA1`).
//! The estimator uses digests only when both synopses carry them (a payload recorded before
//! the field existed carries none).
//!
//! # Accumulator arithmetic (why sums stay exact)
//!
//! Timestamps are `u64` nanoseconds since the epoch (≈ 1.8·10¹⁸ in 2026, < 2⁶¹). A timestamp
//! accumulator is a `u64` that adds timestamps **wrapping modulo 2⁶⁴**; a packet counter is a
//! `u32` that also wraps. The estimators only ever use *differences* of accumulators holding the
//! same packets (a usable row, or the collapsed difference `T[2k+1] − T[2k]` of §III-E), and a
//! difference computed modulo 2⁶⁴ equals the true integer difference whenever that true
//! difference lies in `[−2⁶³, 2⁶³)`. For a usable row the true difference is the sum of the
//! delays of its packets: it is exact while that sum stays below 2⁶³ ns ≈ 292 years — for the
//! paper's design point of 125 M packets per interval (40 Gb/s of 40-B packets, §III-A) that is
//! a mean delay of up to 73 s, with every packet in one row. The per-row differences are then
//! summed in `i128` (no overflow for any number of rows), and converted to `f64` only for the
//! final division. A 128-bit accumulator would cost twice the memory and bandwidth for no gain.
//! The `u32` counter is exact up to 4 294 967 295 sampled packets per row per interval, 34 times
//! the 125 M design point even if every packet landed in one row. The paper's hardware uses 40-bit
//! timestamp sums and 32-bit counters (§V); owl ships the full 64-bit sum so that absolute
//! timestamps need no agreed epoch.
//!
//! # Wire format and size
//!
//! `encode` writes a 10-byte header (a 4-byte tag, u16 banks, u32 rows) and then, bank by bank
//! and row by row, little-endian:
//!
//! | `digest` | tag | row | bytes a row |
//! |---|---|---|---|
//! | `on` (default) | `"LDA2"` | `u64` timestamp accumulator, `u32` counter, `u32` digest | **16** ([`BYTES_PER_ROW_DIGEST`]) |
//! | `off` | `"LDA1"` | `u64` timestamp accumulator, `u32` counter (the paper's hardware: 72 bits) | **12** ([`BYTES_PER_ROW`]) |
//!
//! The default two banks of 512 rows are 16 394 bytes (12 298 with `digest=off`). `--memory B`
//! gives each bank `⌊(B − 10) / (r·n)⌋` rows rounded down to an even number, `r` the row size of
//! the configuration ([`Config::for_memory`], [`Config::for_memory_layout`]). An `LDA1`
//! payload decodes under either setting as a synopsis without digests (files recorded before
//! the field existed, whose configuration lacks `digest`, read as `on`); an `LDA2` payload under
//! `digest=off` is an error naming the field. Every length is checked before it is read.
//!
//! **What the digest costs.** 4 bytes a row on the wire (12 → 16, a third more: 12 298 →
//! 16 394 bytes for the default, or a quarter fewer rows at equal `--memory`); nothing in
//! memory (a row was already 16 bytes in memory, 4 of them padding); one wrapping 32-bit add
//! per sampled packet on the cache line the update touches anyway, and no extra hash. Measured
//! with the `lda` bench (2-core machine, medians of alternating runs against the code without
//! the digest): recording the default two banks 1–2 % slower (≈ 312 vs 317 M records/s), the
//! every-packet one-bank worst case 3–10 % slower, the estimate unchanged within noise (≈ 29 µs
//! for 2 × 512 rows), decoding ≈ 0.9 vs 0.7 µs (a third more bytes). It costs no usable row
//! where the points saw the same packets (equal counters then mean equal packets, hence equal
//! digests); where they did not, it removes exactly the rows that would corrupt the estimate:
//! on 200 000 packets with 1 % of R's replaced by foreign ones, the default two banks without
//! the digest use ≈ 89 foreign rows and miss the mean by ≈ 2 000 times its value (the std by
//! ≈ 10⁴), with it they keep ≈ 531 of 1 024 rows and stay within their 98 % interval (the test
//! `foreign_packets_break_the_paper_lda_but_not_the_digest`).
//!
//! # Tuning (§III-D, §IV-B)
//!
//! A bank tuned to a design number of losses `L` samples with `p = α·m/(L + 1)`, `α = 0.5`
//! ([`ALPHA`]), which maximises the bound of eq. (2) on the expected effective sample size,
//! `E[S] ≥ α(1 − α)·m/(L + 1)·R`. With a target loss *rate* `l` and `N` expected packets per
//! interval, `L = l·N` ([`tuned_probability`]). The default configuration is the paper's
//! recommended two-bank LDA of §IV-B: 1024 counters as two banks of 512 rows tuned toward loss
//! rates 0.005 and 0.1 ([`DEFAULT_TARGETS`]) for 5 M packets per interval ([`PAPER_PACKETS`],
//! the §IV-A setup: a 10 Gb/s link of 250-B packets, 1 s intervals).
//!
//! # Assumptions (and what breaks them)
//!
//! LDA assumes FIFO delivery and that both points record the same packets except for losses
//! (§III-B). A packet that crosses an interval boundary — recorded by S in one interval and by R
//! in the next — can meet a lost packet in the same row: the counters agree, the row is deemed
//! usable, and its difference is silently wrong (RDA §III-C, Fig. 2; see the test
//! `rda_fig2_reordering_fools_lda`). The estimator notes rows where R holds *more* packets than
//! S, the visible trace of such packets; with the identity digest (the default) it also finds
//! the rows where they hide behind equal counters, leaves them out and notes them.

mod estimate;
mod method;
mod synopsis;
pub mod variance;

#[cfg(test)]
mod digest_tests;
#[cfg(test)]
mod tests;

use std::fmt::Write as _;

pub use estimate::{
    BankReport, CollapseRule, LdaEstimate, estimate, estimate_with, hoeffding_half_width,
};
pub use method::{INFO, LdaMethod};
pub use synopsis::{BYTES_PER_ROW, BYTES_PER_ROW_DIGEST, Bucket, HEADER_BYTES, Synopsis};
pub use variance::{StdEstimator, VarianceEstimate};

use crate::hash::HashFamily;
use crate::method::MethodError;

/// Family member of the row hash `h(x)`.
pub const ROW_HASH: u64 = 0;
/// Family member of the bank-sampling hash `g(x)`.
pub const BANK_HASH: u64 = 1;
/// The paper's tuning constant: `p = α·m/(L + 1)` with `α = 0.5` maximises eq. (2).
pub const ALPHA: f64 = 0.5;
/// Packets per interval of the paper's evaluation (§IV-A): 5 M packets in a 1 s interval.
pub const PAPER_PACKETS: u64 = 5_000_000;
/// Loss rates the default two banks are tuned toward (§IV-B: "two banks of 512 counters tuned
/// toward loss rates of 0.005 and 0.1").
pub const DEFAULT_TARGETS: [f64; 2] = [0.005, 0.1];
/// Rows per bank of the default configuration (two banks of 512: 1024 counters, §IV-B).
pub const DEFAULT_ROWS: usize = 512;
/// Most banks a configuration may have.
pub const MAX_BANKS: usize = 16;
/// Most rows over all banks (16 M rows = 256 MiB of memory at a point): beyond is absurd.
pub const MAX_TOTAL_ROWS: usize = 1 << 24;

/// How the bank-sampling hash `g(x)` picks a bank (or none).
#[derive(Clone, Debug, PartialEq)]
pub enum Sampling {
    /// Arbitrary probabilities `p_1..p_n`, `Σ p_j ≤ 1`: the uniform 64-bit value `u = h_1(x)`
    /// selects bank `j` when `P_{j−1}·2⁶⁴ ≤ u < P_j·2⁶⁴` with `P_j = p_1 + … + p_j` (rounded to
    /// the nearest integer threshold; [`Config::bank_probabilities`] gives the exact values
    /// used), and no bank when `u ≥ P_n·2⁶⁴`.
    Probabilities(Vec<f64>),
    /// The paper's powers of 1/2 through leading zeros (§III-B.4): bank `j` has exponent `k_j`
    /// (distinct, `0 ≤ k_j ≤ 63`) and a packet whose `h_1(x)` has `z` leading zero bits goes to
    /// the bank with the largest `k_j ≤ z`, if any ("if the first seven bits are zero, then bank
    /// 2 is updated. Otherwise, if the first three bits are zero, then bank 1 is updated"). The
    /// sample sets are disjoint, so a bank's actual probability is `2^−k_j − 2^−k'` where `k'`
    /// is the next larger exponent (`1/8 − 1/128` for bank 1 of the paper's example).
    LeadingZeros(Vec<u32>),
}

impl Sampling {
    pub fn banks(&self) -> usize {
        match self {
            Sampling::Probabilities(p) => p.len(),
            Sampling::LeadingZeros(k) => k.len(),
        }
    }
}

/// Everything both points must agree on. Build with [`Config::new`], [`Config::tuned`],
/// [`Config::paper_default`], [`Config::for_memory`] or [`Config::from_pairs`]; all validate.
/// Every constructor keeps the identity digest on (owl's default) except
/// [`Config::for_memory_layout`] and [`Config::from_pairs`] when asked;
/// [`Config::with_digest`]`(false)` gives the paper's LDA.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    rows: usize,
    sampling: Sampling,
    seed: u64,
    std: StdEstimator,
    digest: bool,
}

/// `p = α·m/(L + 1)` with `L = loss_rate·packets` (§III-D, §IV-A), capped at 1.
pub fn tuned_probability(rows: usize, loss_rate: f64, packets: u64) -> f64 {
    let l = (loss_rate * packets as f64).round();
    (ALPHA * rows as f64 / (l + 1.0)).min(1.0)
}

fn invalid(msg: impl Into<String>) -> MethodError {
    MethodError::Invalid(msg.into())
}

impl Config {
    /// A configuration of `rows` rows per bank (even, ≥ 2) and one bank per sampling entry.
    pub fn new(rows: usize, sampling: Sampling, seed: u64) -> Result<Config, MethodError> {
        let n = sampling.banks();
        if n == 0 || n > MAX_BANKS {
            return Err(invalid(format!(
                "LDA needs between 1 and {MAX_BANKS} banks, got {n}"
            )));
        }
        if rows < 2 || !rows.is_multiple_of(2) {
            return Err(invalid(format!(
                "LDA rows per bank must be even and at least 2 (the standard deviation collapses rows in pairs, §III-E), got {rows}"
            )));
        }
        if rows.saturating_mul(n) > MAX_TOTAL_ROWS {
            return Err(invalid(format!(
                "{n} banks of {rows} rows is more than {MAX_TOTAL_ROWS} rows in all"
            )));
        }
        match &sampling {
            Sampling::Probabilities(ps) => {
                for &p in ps {
                    if !(p.is_finite() && p > 0.0 && p <= 1.0) {
                        return Err(invalid(format!(
                            "LDA bank sampling probability {p} must be in (0, 1]"
                        )));
                    }
                }
                let sum: f64 = ps.iter().sum();
                if sum > 1.0 + 1e-9 {
                    return Err(invalid(format!(
                        "LDA bank sampling probabilities sum to {sum}: banks sample disjoint sets, so the sum must be at most 1"
                    )));
                }
                if ps.iter().any(|&p| (p * 2f64.powi(64)) < 1.0) {
                    return Err(invalid("LDA bank sampling probability below 2^-64"));
                }
            }
            Sampling::LeadingZeros(ks) => {
                for (i, &k) in ks.iter().enumerate() {
                    if k > 63 {
                        return Err(invalid(format!(
                            "LDA bank exponent {k} must be at most 63 (p = 2^-k of a 64-bit hash)"
                        )));
                    }
                    if ks[..i].contains(&k) {
                        return Err(invalid(format!(
                            "LDA bank exponent {k} appears twice: banks need distinct powers of 1/2"
                        )));
                    }
                }
            }
        }
        Ok(Config {
            rows,
            sampling,
            seed,
            std: StdEstimator::default(),
            digest: true,
        })
    }

    /// One bank per target loss rate, each of `rows` rows sampling with
    /// `p_j = α·m/(l_j·packets + 1)` (§III-D, §IV-B). If the targets ask for more than every
    /// packet (`Σ p_j > 1`: only when the expected traffic is small against the rows), the
    /// probabilities are scaled down to sum to 1, so every packet is sampled by some bank.
    pub fn tuned(
        rows: usize,
        targets: &[f64],
        packets: u64,
        seed: u64,
    ) -> Result<Config, MethodError> {
        let ps = tuned_probabilities(rows, targets, packets)?;
        Config::new(rows, Sampling::Probabilities(ps), seed)
    }

    /// Like [`Config::tuned`], but each probability rounded to the nearest power of 1/2 and
    /// sampled through leading zeros, the paper's hardware-friendly form (§III-B.4, §V).
    pub fn tuned_leading_zeros(
        rows: usize,
        targets: &[f64],
        packets: u64,
        seed: u64,
    ) -> Result<Config, MethodError> {
        let ps = tuned_probabilities(rows, targets, packets)?;
        let ks: Vec<u32> = ps
            .iter()
            .map(|p| (-p.log2()).round().clamp(0.0, 63.0) as u32)
            .collect();
        Config::new(rows, Sampling::LeadingZeros(ks), seed).map_err(|e| {
            invalid(format!(
                "targets {targets:?} do not give distinct powers of 1/2 ({e}); use probabilities"
            ))
        })
    }

    /// The paper's recommended two-bank LDA (§IV-B): two banks of 512 rows tuned toward loss
    /// rates 0.005 and 0.1 for [`PAPER_PACKETS`] packets per interval.
    pub fn paper_default(seed: u64) -> Config {
        Config::tuned(DEFAULT_ROWS, &DEFAULT_TARGETS, PAPER_PACKETS, seed)
            .expect("the paper's configuration is valid")
    }

    /// Banks tuned toward `targets` for `packets` per interval, with as many rows as `bytes`
    /// of encoded synopsis allow with the default identity digest (16-byte rows):
    /// `⌊(bytes − 10) / (16·n)⌋` rows per bank, rounded down to even.
    pub fn for_memory(
        bytes: u64,
        targets: &[f64],
        packets: u64,
        seed: u64,
    ) -> Result<Config, MethodError> {
        Config::for_memory_layout(bytes, targets, packets, seed, true)
    }

    /// [`Config::for_memory`] with the identity digest on (16-byte rows) or off (the paper's
    /// 12-byte rows): `⌊(bytes − 10) / (r·n)⌋` rows per bank, rounded down to even.
    pub fn for_memory_layout(
        bytes: u64,
        targets: &[f64],
        packets: u64,
        seed: u64,
        digest: bool,
    ) -> Result<Config, MethodError> {
        let n = targets.len().max(1) as u64;
        let row = synopsis::row_bytes(digest) as u64;
        let per_bank = bytes.saturating_sub(HEADER_BYTES as u64) / (row * n);
        let rows = (per_bank.min(MAX_TOTAL_ROWS as u64) as usize) & !1;
        if rows < 2 {
            return Err(invalid(format!(
                "a memory budget of {bytes} B is too small for {n} LDA banks: each needs at least 2 rows of {row} B plus a {HEADER_BYTES}-B header ({} B)",
                HEADER_BYTES as u64 + 2 * row * n
            )));
        }
        Ok(Config::tuned(rows, targets, packets, seed)?.with_digest(digest))
    }

    /// Rows per bank (`m`).
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Number of banks (`n`).
    pub fn banks(&self) -> usize {
        self.sampling.banks()
    }
    pub fn sampling(&self) -> &Sampling {
        &self.sampling
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// The estimator of the standard deviation (§III-E and [`variance`]); the synopses do not
    /// depend on it, only the estimate does.
    pub fn std(&self) -> StdEstimator {
        self.std
    }
    /// The same configuration with another std estimator.
    pub fn with_std(self, std: StdEstimator) -> Config {
        Config { std, ..self }
    }
    /// Whether the synopses keep the identity digest (module doc; default `true`).
    pub fn digest(&self) -> bool {
        self.digest
    }
    /// The same configuration with the identity digest on or off (`off`: the paper's LDA).
    pub fn with_digest(self, digest: bool) -> Config {
        Config { digest, ..self }
    }
    /// Bytes of one encoded row: [`BYTES_PER_ROW_DIGEST`] with the digest, [`BYTES_PER_ROW`]
    /// without.
    pub fn bytes_per_row(&self) -> usize {
        synopsis::row_bytes(self.digest)
    }
    /// Bytes of one encoded aggregator of this configuration: header plus 16 bytes per row
    /// (12 with `digest=off`).
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + self.bytes_per_row() * self.rows * self.banks()
    }

    /// The exact probability with which each bank samples a packet (what the thresholds or the
    /// leading-zero rule implement, not what was asked).
    pub fn bank_probabilities(&self) -> Vec<f64> {
        match &self.sampling {
            Sampling::Probabilities(_) => {
                let up = synopsis::thresholds(&self.sampling);
                let two64 = 2f64.powi(64);
                let mut prev = 0u128;
                up.iter()
                    .map(|&u| {
                        let p = (u - prev) as f64 / two64;
                        prev = u;
                        p
                    })
                    .collect()
            }
            Sampling::LeadingZeros(ks) => ks
                .iter()
                .map(|&k| {
                    let next = ks.iter().filter(|&&k2| k2 > k).min();
                    2f64.powi(-(k as i32)) - next.map_or(0.0, |&k2| 2f64.powi(-(k2 as i32)))
                })
                .collect(),
        }
    }

    /// The row hash `h` and the bank-sampling hash's function `h_1`.
    pub(crate) fn hashes(&self) -> (crate::hash::HashFn, crate::hash::HashFn) {
        let f = HashFamily::new(self.seed);
        (f.member(ROW_HASH), f.member(BANK_HASH))
    }

    /// Every field both points must agree on, by name: `rows` (per bank), `banks`, `sampling`
    /// (`probabilities` or `leading-zeros`), `probabilities` or `exponents` (comma lists, one
    /// per bank, printed so that they parse back exactly), `seed`, `std` (the std estimator:
    /// `paper`, `centred` or `rows`), `digest` (`on` or `off`: the identity digest).
    ///
    /// `std` changes no byte of a synopsis, but it is written into synopsis files so that `owl
    /// estimate` computes what the recording asked for, and a pair whose points asked for
    /// different estimators is refused naming it. Files written before the field existed have
    /// no `std`: alone or in pairs they read with the default ([`Config::from_pairs`]); a pair
    /// mixing such a file with a newer one is refused as `std is absent at the sender but rows
    /// at the receiver` (record both points with the same owl). `digest` is read the same way:
    /// absent means `on`, and the `LDA1` payloads of such files decode as synopses without
    /// digests, which the estimator then does not use.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut v = vec![
            ("rows", self.rows.to_string()),
            ("banks", self.banks().to_string()),
        ];
        match &self.sampling {
            Sampling::Probabilities(ps) => {
                v.push(("sampling", "probabilities".into()));
                v.push(("probabilities", join(ps)));
            }
            Sampling::LeadingZeros(ks) => {
                v.push(("sampling", "leading-zeros".into()));
                v.push(("exponents", join(ks)));
            }
        }
        v.push(("seed", self.seed.to_string()));
        v.push(("std", self.std.to_string()));
        v.push(("digest", if self.digest { "on" } else { "off" }.into()));
        v
    }

    /// Rebuild a configuration from `(field, value)` pairs: those of [`Config::pairs`], or a
    /// user's `--lda-config`. Fields: `rows` (per bank, default 512), `seed` (default 1), and at
    /// most one of `probabilities=P1,P2,…`, `exponents=K1,K2,…` (powers of 1/2 through leading
    /// zeros) or `targets=L1,L2,…` (loss rates, default the paper's 0.005 and 0.1), tuned for
    /// `packets=N` packets an interval (default 5 M); none of them gives the paper's two banks
    /// tuned toward 0.005 and 0.1 for 5 M packets. `std` picks the std estimator (`paper`, `centred` or `rows`; default
    /// [`StdEstimator::default`], also for files recorded before the field existed). `digest`
    /// is `on` (default, also for files recorded before the field existed) or `off` (the
    /// paper's LDA: no identity digest, 12-byte rows).
    /// `banks`, if given, must equal the list's length; `sampling`, if given, must agree
    /// with the list given. Unknown fields are errors naming the field.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Config, MethodError> {
        let mut rows = DEFAULT_ROWS;
        let mut seed = 1u64;
        let mut banks: Option<usize> = None;
        let mut sampling_name: Option<String> = None;
        let mut probs: Option<Vec<f64>> = None;
        let mut exps: Option<Vec<u32>> = None;
        let mut targets: Option<Vec<f64>> = None;
        let mut packets: Option<u64> = None;
        let mut std = StdEstimator::default();
        let mut digest = true;
        for (k, v) in pairs {
            let bad = |what: &str| invalid(format!("LDA config {k}={v}: {what}"));
            match k.as_str() {
                "rows" => rows = v.trim().parse().map_err(|_| bad("not a row count"))?,
                "seed" => seed = v.trim().parse().map_err(|_| bad("not a 64-bit seed"))?,
                "banks" => banks = Some(v.trim().parse().map_err(|_| bad("not a bank count"))?),
                "sampling" => sampling_name = Some(v.trim().to_string()),
                "std" => std = v.parse().map_err(|e: String| bad(&e))?,
                "digest" => {
                    digest = match v.trim() {
                        "on" => true,
                        "off" => false,
                        _ => return Err(bad("expected on or off")),
                    }
                }
                "probabilities" => probs = Some(parse_list(v).map_err(|_| bad("not numbers"))?),
                "exponents" => exps = Some(parse_list(v).map_err(|_| bad("not integers"))?),
                "targets" => targets = Some(parse_list(v).map_err(|_| bad("not loss rates"))?),
                "packets" => {
                    packets = Some(
                        parse_packets(v)
                            .ok_or_else(|| bad("not a packet count (e.g. 5000000 or 5M)"))?,
                    )
                }
                _ => {
                    return Err(invalid(format!(
                        "unknown LDA config field '{k}' (known: rows, banks, seed, probabilities, exponents, targets, packets, sampling, std, digest)"
                    )));
                }
            }
        }
        let given = probs.is_some() as u8 + exps.is_some() as u8 + targets.is_some() as u8;
        if given > 1 {
            return Err(invalid(
                "LDA config: give at most one of probabilities, exponents and targets",
            ));
        }
        if packets.is_some() && (probs.is_some() || exps.is_some()) {
            return Err(invalid(
                "LDA config: packets tunes the banks' probabilities toward targets; it cannot go with probabilities or exponents",
            ));
        }
        let cfg = if let Some(ps) = probs {
            Config::new(rows, Sampling::Probabilities(ps), seed)?
        } else if let Some(ks) = exps {
            Config::new(rows, Sampling::LeadingZeros(ks), seed)?
        } else {
            let t = targets.unwrap_or_else(|| DEFAULT_TARGETS.to_vec());
            for &l in &t {
                if !(l.is_finite() && (0.0..1.0).contains(&l)) {
                    return Err(invalid(format!(
                        "LDA target loss rate {l} must be in [0, 1)"
                    )));
                }
            }
            let n = packets.unwrap_or(PAPER_PACKETS);
            if n == 0 {
                return Err(invalid("LDA config: packets must be at least 1"));
            }
            Config::tuned(rows, &t, n, seed)?
        };
        if let Some(b) = banks
            && b != cfg.banks()
        {
            return Err(invalid(format!(
                "LDA config: banks={b} but {} sampling entries given",
                cfg.banks()
            )));
        }
        if let Some(s) = sampling_name {
            let want = match cfg.sampling {
                Sampling::Probabilities(_) => "probabilities",
                Sampling::LeadingZeros(_) => "leading-zeros",
            };
            if s != want {
                return Err(invalid(format!(
                    "LDA config: sampling={s} but the banks are given as {want}"
                )));
            }
        }
        Ok(cfg.with_std(std).with_digest(digest))
    }

    /// Compare two configurations field by field; the error names the first field that differs.
    /// ([`Config::pairs`] prints every field, probabilities in round-trip form, so equal pairs
    /// mean equal configurations.)
    pub fn check_pair(sender: &Config, receiver: &Config) -> Result<(), MethodError> {
        for ((k, a), (_, b)) in sender.pairs().into_iter().zip(receiver.pairs()) {
            if a != b {
                return Err(MethodError::ConfigMismatch {
                    field: k.to_string(),
                    sender: a,
                    receiver: b,
                });
            }
        }
        Ok(())
    }
}

fn tuned_probabilities(
    rows: usize,
    targets: &[f64],
    packets: u64,
) -> Result<Vec<f64>, MethodError> {
    if targets.is_empty() {
        return Err(invalid("LDA tuning needs at least one target loss rate"));
    }
    if packets == 0 {
        return Err(invalid("LDA tuning needs at least 1 expected packet"));
    }
    for &l in targets {
        if !(l.is_finite() && (0.0..1.0).contains(&l)) {
            return Err(invalid(format!(
                "LDA target loss rate {l} must be in [0, 1)"
            )));
        }
    }
    let mut ps: Vec<f64> = targets
        .iter()
        .map(|&l| tuned_probability(rows, l, packets))
        .collect();
    let sum: f64 = ps.iter().sum();
    if sum > 1.0 {
        for p in ps.iter_mut() {
            *p /= sum;
        }
    }
    Ok(ps)
}

fn join<T: std::fmt::Display>(xs: &[T]) -> String {
    let mut s = String::new();
    for (i, x) in xs.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{x}");
    }
    s
}

/// A packet count: an integer, optionally with a `k`, `M` or `G` suffix (`5M`).
fn parse_packets(s: &str) -> Option<u64> {
    let t = s.trim();
    let (num, scale) = match t.char_indices().last()? {
        (i, 'k' | 'K') => (&t[..i], 1e3),
        (i, 'M') => (&t[..i], 1e6),
        (i, 'G') => (&t[..i], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().ok()?;
    let n = v * scale;
    ((0.0..1.8e19).contains(&n) && n.fract() == 0.0).then_some(n as u64)
}

fn parse_list<T: std::str::FromStr>(s: &str) -> Result<Vec<T>, ()> {
    s.split(',')
        .map(|x| x.trim().parse::<T>().map_err(|_| ()))
        .collect()
}
