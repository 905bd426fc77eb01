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
//! which the threshold of its k-th hash describes exactly), `(identity, timestamp)`, 16 B a
//! packet. The budget is `--memory` bytes per point and interval.
//!
//! # The estimate
//!
//! With `τ` the smaller of the two points' thresholds (a point that kept fewer than `capacity`
//! packets kept all of them: its threshold is the top of the hash range), every packet with hash
//! `≤ τ` is in both samples when both points saw it. The matched delays below `τ` are therefore
//! every delivered packet whose hash is below `τ` — a uniform sample of the delivered packets,
//! independent of the delays — and the sender's unmatched samples below `τ` are the lost ones,
//! scaled by the sampled fraction `τ / 2⁶⁴` to estimate the loss.
//!
//! Quantiles are nearest-rank over the `n` matched delays. The 95 % interval of the
//! `p`-quantile is `[x₍ₗ₎, x₍ᵤ₎]` with ranks from the binomial distribution of the number of
//! samples below the true quantile, `K ~ Bin(n, p)`: `P(l ≤ K < u) ≥ 0.95`, the classical
//! distribution-free interval for a quantile from order statistics (e.g. H. A. David,
//! H. N. Nagaraja, *Order Statistics*, §7.1). It holds for any delay distribution; where `n`
//! is too small for a two-sided interval (p99.9 on a few hundred samples), none is given.

use std::collections::BTreeMap;

use crate::hash::{HashFamily, HashFn};
use crate::method::{
    BuildOptions, Estimate, Method, MethodError, MethodInfo, PointSynopsis, Quantiles, Role,
    config_value, downcast, unknown_field,
};
use crate::methods::lda::ci::ln_gamma;
use crate::record::PacketRecord;
use crate::wire::{DecodeError, WireReader, WireWriter};

/// Bytes a sampled packet costs: identity and timestamp.
pub const BYTES_PER_SAMPLE: u64 = 16;
/// Default capacity: 4 096 packets (64 KiB a point and interval).
pub const DEFAULT_CAPACITY: usize = 4096;
/// Largest capacity accepted (a 1 GiB synopsis).
pub const MAX_CAPACITY: usize = 1 << 26;
/// First bytes of a payload.
pub const TAG: &[u8; 4] = b"SMP1";

/// What both points must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    capacity: usize,
    seed: u64,
}

impl Config {
    /// A configuration keeping `capacity` packets a point and interval.
    pub fn new(capacity: usize, seed: u64) -> Result<Config, MethodError> {
        if !(1..=MAX_CAPACITY).contains(&capacity) {
            return Err(MethodError::Invalid(format!(
                "sample capacity {capacity} is outside 1..={MAX_CAPACITY}"
            )));
        }
        Ok(Config { capacity, seed })
    }
    /// The capacity that fits in `memory` bytes.
    pub fn for_memory(memory: u64, seed: u64) -> Result<Config, MethodError> {
        let k = memory / BYTES_PER_SAMPLE;
        if k == 0 {
            return Err(MethodError::Invalid(format!(
                "--memory {memory} bytes is below one sampled packet ({BYTES_PER_SAMPLE} bytes)"
            )));
        }
        Config::new(k.min(MAX_CAPACITY as u64) as usize, seed)
    }
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    fn hash(&self) -> HashFn {
        HashFamily::new(self.seed).member(0x5a4d_504c)
    }
    fn pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("capacity", self.capacity.to_string()),
            ("seed", self.seed.to_string()),
        ]
    }
}

/// One point's bottom-k sample for one interval.
#[derive(Clone, Debug)]
pub struct Synopsis {
    cfg: Config,
    hash: HashFn,
    /// (hash, identity) → first timestamp, the `capacity` smallest hashes.
    kept: BTreeMap<(u64, u64), u64>,
    /// Packets offered.
    seen: u64,
}

impl Synopsis {
    pub fn new(cfg: Config) -> Synopsis {
        Synopsis {
            cfg,
            hash: cfg.hash(),
            kept: BTreeMap::new(),
            seen: 0,
        }
    }
    fn full(&self) -> bool {
        self.kept.len() >= self.cfg.capacity
    }
    /// The largest hash this sample is complete up to: every packet the point saw with a hash
    /// at or below it is kept.
    pub fn threshold(&self) -> u64 {
        match self.kept.last_key_value() {
            Some((&(h, _), _)) if self.full() => h,
            _ => u64::MAX,
        }
    }
    /// Record one packet (the first sighting of an identity is kept).
    #[inline]
    pub fn record_packet(&mut self, id: u64, ts_ns: u64) {
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
        self.kept.len()
    }
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// `"SMP1" | u64 packets seen | u64 n | n × (u64 identity, u64 timestamp)`, by hash.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = WireWriter::new(out);
        w.reserve(self.encoded_len());
        w.bytes(TAG);
        w.u64(self.seen);
        w.u64(self.kept.len() as u64);
        for (&(_, id), &ts) in &self.kept {
            w.u64(id);
            w.u64(ts);
        }
    }
    pub fn encoded_len(&self) -> usize {
        4 + 8 + 8 + BYTES_PER_SAMPLE as usize * self.kept.len()
    }
    /// Decode a payload of this configuration: the count must fit the capacity and the bytes,
    /// identities must be distinct.
    pub fn decode(cfg: Config, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        let mut r = WireReader::new(bytes);
        if r.take(4, "tag")? != TAG {
            return Err(r.invalid("not a sample payload (tag)"));
        }
        let seen = r.u64("packets seen")?;
        let n = r.u64("sample count")?;
        if n > cfg.capacity as u64 || n > seen {
            return Err(r.invalid(format!(
                "{n} samples of {seen} packets with a capacity of {}",
                cfg.capacity
            )));
        }
        if n.checked_mul(BYTES_PER_SAMPLE) != Some(r.remaining() as u64) {
            return Err(r.invalid(format!(
                "{n} samples announced, {} bytes follow",
                r.remaining()
            )));
        }
        let mut s = Synopsis::new(cfg);
        s.seen = seen;
        for _ in 0..n {
            let id = r.u64("identity")?;
            let ts = r.u64("timestamp")?;
            if s.kept.insert((s.hash.hash(id), id), ts).is_some() {
                return Err(r.invalid(format!("identity {id:#x} sampled twice")));
            }
        }
        Ok(s)
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
    /// The samples (the header's two counts are file bookkeeping).
    fn shipped_len(&self) -> Option<u64> {
        Some(BYTES_PER_SAMPLE * self.kept.len() as u64)
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
    /// The sampled fraction of the hash range, `τ / 2⁶⁴` (1 when both points kept everything).
    pub fraction: f64,
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

/// Match the two samples below their common threshold (module doc).
pub fn estimate(sender: &Synopsis, receiver: &Synopsis) -> Result<SampleEstimate, MethodError> {
    check_pair(&sender.cfg, &receiver.cfg)?;
    let tau = sender.threshold().min(receiver.threshold());
    let below = |s: &Synopsis| -> Vec<(u64, u64)> {
        s.kept
            .range(..=(tau, u64::MAX))
            .map(|(&(_, id), &ts)| (id, ts))
            .collect()
    };
    let (mut s, mut r) = (below(sender), below(receiver));
    s.sort_unstable();
    r.sort_unstable();
    let (mut i, mut j) = (0, 0);
    let mut delays = Vec::with_capacity(s.len().min(r.len()));
    let (mut lost, mut unexpected) = (0u64, 0u64);
    while i < s.len() || j < r.len() {
        match (s.get(i), r.get(j)) {
            (Some(a), Some(b)) if a.0 == b.0 => {
                delays.push(b.1.wrapping_sub(a.1) as i64);
                i += 1;
                j += 1;
            }
            (Some(a), Some(b)) if a.0 < b.0 => {
                lost += 1;
                i += 1;
            }
            (Some(_), None) => {
                lost += 1;
                i += 1;
            }
            _ => {
                unexpected += 1;
                j += 1;
            }
        }
    }
    delays.sort_unstable();
    let fraction = if tau == u64::MAX {
        1.0
    } else {
        (tau as f64 + 1.0) / 2f64.powi(64)
    };
    let quantiles = Quantiles::of_sample(&delays);
    Ok(SampleEstimate {
        delays,
        lost_sampled: lost,
        unexpected_sampled: unexpected,
        fraction,
        quantiles,
    })
}

/// The distribution-free 95 % interval of the `p`-quantile from `n` sorted samples: 1-based
/// ranks `(l, u)` with `P(l ≤ K < u) ≥ 0.95` for `K ~ Bin(n, p)`, split evenly between the
/// tails (each at most 2.5 %); `None` when either tail needs a rank outside `1..=n`.
pub fn order_statistic_ranks(n: usize, p: f64) -> Option<(usize, usize)> {
    if n == 0 || !(0.0..1.0).contains(&p) || p == 0.0 {
        return None;
    }
    // Bin(n, p) pmf from its mode outwards by the ratio recurrence, in logs at the mode.
    let nf = n as f64;
    let mode = (((nf + 1.0) * p).floor() as usize).min(n);
    let ln_pmf_mode =
        ln_gamma(nf + 1.0) - ln_gamma(mode as f64 + 1.0) - ln_gamma(nf - mode as f64 + 1.0)
            + mode as f64 * p.ln()
            + (nf - mode as f64) * (1.0 - p).ln();
    let mut pmf = vec![0.0f64; n + 1];
    pmf[mode] = ln_pmf_mode.exp();
    let odds = p / (1.0 - p);
    for k in mode..n {
        pmf[k + 1] = pmf[k] * (nf - k as f64) / (k as f64 + 1.0) * odds;
        if pmf[k + 1] < 1e-300 {
            break;
        }
    }
    for k in (1..=mode).rev() {
        pmf[k - 1] = pmf[k] * k as f64 / (nf - k as f64 + 1.0) / odds;
        if pmf[k - 1] < 1e-300 {
            break;
        }
    }
    // cdf[k] = P(K ≤ k)
    let mut cdf = pmf;
    for k in 1..=n {
        cdf[k] += cdf[k - 1];
    }
    // l: the largest rank with P(K < l) = P(K ≤ l − 1) ≤ 2.5 %; u: the smallest with
    // P(K ≥ u) = 1 − P(K ≤ u − 1) ≤ 2.5 %.
    let l = (1..=n).rev().find(|&l| cdf[l - 1] <= 0.025)?;
    let u = (1..=n).find(|&u| 1.0 - cdf[u - 1] <= 0.025)?;
    Some((l, u))
}

impl Quantiles {
    /// Nearest-rank quantiles of a uniform sample of delays (sorted ascending), each with its
    /// distribution-free 95 % interval where the sample allows one; `None` when empty.
    pub fn of_sample(sorted: &[i64]) -> Option<Quantiles> {
        if sorted.is_empty() {
            return None;
        }
        let ci = |p: f64| {
            order_statistic_ranks(sorted.len(), p)
                .map(|(l, u)| [sorted[l - 1] as f64, sorted[u - 1] as f64])
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
}

/// `sample`: coordinated bottom-k sampling for quantiles.
pub const INFO: MethodInfo = MethodInfo {
    name: "sample",
    summary: "coordinated packet sampling (trajectory sampling): the 4096 packets of smallest identity hash a point and interval (64 KiB; --memory / 16 B), exact delays of a uniform sample; mean, std, loss, p50/p90/p99/p99.9 with distribution-free 95 % intervals",
    per_flow: false,
    per_packet: false,
    crosses: "each point's sampled (identity, timestamp) pairs, 16 B a sample, one way; no round trip",
    build: |o: &BuildOptions| {
        let cfg = match o.memory {
            Some(m) => Config::for_memory(m, o.seed)?,
            None => Config::new(DEFAULT_CAPACITY, o.seed)?,
        };
        Ok(Box::new(SampleMethod::new(cfg)))
    },
    from_config: |pairs| {
        let (mut capacity, mut seed) = (DEFAULT_CAPACITY, 0u64);
        for (k, v) in pairs {
            match k.as_str() {
                "capacity" => capacity = config_value("sample", k, v)?,
                "seed" => seed = config_value("sample", k, v)?,
                _ => return Err(unknown_field("sample", k, &["capacity", "seed"])),
            }
        }
        Ok(Box::new(SampleMethod::new(Config::new(capacity, seed)?)))
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
        let mut notes = vec![format!(
            "{} matched samples below the common threshold ({:.3e} of the hash range)",
            e.delays.len(),
            e.fraction
        )];
        if e.unexpected_sampled > 0 {
            notes.push(format!(
                "{} sampled packets only at the receiver",
                e.unexpected_sampled
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
            recovered: Some(crate::method::RecoveredDelays::sampled(
                &e.delays, e.fraction, 0,
            )),
            quantiles: e.quantiles,
            notes,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests;
