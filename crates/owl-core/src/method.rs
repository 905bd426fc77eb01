//! The contract every method follows, and the object-safe interface `owl` runs them through.
//!
//! A method is a factory of per-point synopses (one per observation point and measurement
//! interval) plus a pair estimator. Every record is dissected and hashed once, then fed to every
//! synopsis ("hash once, feed many sketches").
//!
//! # The contract
//!
//! Each method is one module under `src/methods/` with the same shape and the same names:
//!
//! - **`Config`** — everything both points must agree on. Fields are private; it is built by
//!   `Config::new(…)` (or a builder) that calls `validate()`, so a `Config` that exists is sound.
//!   The pair check is named `check_pair` everywhere and names the first field that differs
//!   ([`MethodError::ConfigMismatch`]): `Config::check_pair(&sender, &receiver)` where the
//!   synopses carry their configuration (LDA, RDA, LDS, FineComb); for the others, both points'
//!   configurations are compared field by field from their synopsis files
//!   ([`crate::wire::SynopsisFile::check_pair`]).
//! - **The per-point synopsis** — `Synopsis` when both points keep the same structure,
//!   `SenderSynopsis` / `ReceiverSynopsis` when they differ (probing, RLI, SDS). Its doc names
//!   the paper's structure (aggregator, sketch, cache, …). It records packets through one entry
//!   point, `record_batch(&[PacketRecord])`, and implements [`PointSynopsis`].
//! - **The payload** — written with [`crate::wire::WireWriter`] and read with
//!   [`crate::wire::WireReader`] (which checks every length against what is left); its layout
//!   is in the module doc and pinned byte for byte by a golden file
//!   (`crates/owl-core/tests/golden/`). Changing a layout changes its golden file and the
//!   synopsis file version ([`crate::wire::STREAM_VERSION`]), with a test that files of the old
//!   version are refused with a clear message.
//! - **The pair estimator** — a free function `estimate(&sender, &receiver)` returning the
//!   method's own typed estimate; it calls `check_pair` first.
//! - **The adapter** — a `NameMethod` implementing [`Method`], and a [`MethodInfo`] descriptor
//!   (`pub const INFO`, or one constant per variant) listed once in
//!   [`crate::registry::METHODS`]. Adding a method is its module and that one line.
//! - **Citations** — the module doc cites the paper's section and equation for each step (the
//!   papers' titles are in the crate doc).
use std::any::Any;

use serde::Serialize;
use thiserror::Error;

use crate::record::{FlowKey, PacketRecord};

/// Which observation point a synopsis belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Sender,
    Receiver,
}

/// What an aggregate method estimates for one interval, and what the estimate rests on.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Estimate {
    /// Estimated mean one-way delay, ns.
    pub mean_ns: Option<f64>,
    /// Estimated standard deviation of the delay, ns (population), `None` where the method has
    /// none.
    pub std_ns: Option<f64>,
    /// Number of packets the mean rests on (the effective sample size for LDA, decoded-and-kept
    /// packets for RDA, matched probes for probing).
    pub samples: u64,
    /// Bytes that would cross the network between the points for this interval.
    pub bytes: u64,
    /// Estimated number of lost packets, where the method gives one.
    pub lost: Option<u64>,
    /// Confidence interval of the mean where the paper gives a bound (98 %, ns).
    pub mean_ci98_ns: Option<[f64; 2]>,
    /// 95 % confidence interval of the standard deviation, ns, where the method's samples allow
    /// a sound one (each method's documentation says which interval, or why none).
    pub std_ci95_ns: Option<[f64; 2]>,
    /// Human-readable remarks (decoding failures, unusable rows, …).
    pub notes: Vec<String>,
    /// Delay quantiles, from methods that recover individual delays (in the JSON, the fields of
    /// [`Quantiles`] sit beside `mean_ns`, and are absent for methods without them).
    #[serde(flatten)]
    pub quantiles: Option<Quantiles>,
}

/// Delay quantiles (nearest rank), each with a 95 % confidence interval where the method's
/// samples allow a sound one, ns.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Quantiles {
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub p50_ci95_ns: Option<[f64; 2]>,
    pub p90_ci95_ns: Option<[f64; 2]>,
    pub p99_ci95_ns: Option<[f64; 2]>,
    pub p999_ci95_ns: Option<[f64; 2]>,
}

impl Quantiles {
    /// The nearest-rank quantiles of sorted, non-empty delays, with no interval (exact for the
    /// delays themselves; a method whose delays are a sample adds its intervals).
    pub fn of_sorted(sorted: &[i64]) -> Quantiles {
        let q = |p| crate::stats::nearest_rank(sorted, p) as f64;
        Quantiles {
            p50_ns: q(0.50),
            p90_ns: q(0.90),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            ..Default::default()
        }
    }
}

impl Estimate {
    /// Combine per-interval estimates into one over all intervals: the mean is weighted by
    /// samples, the variance pooled as `E[w²] − μ²` over the parts that have one, bytes and
    /// samples summed. Confidence intervals (of the mean and of the std) are not combined: the
    /// result has none.
    pub fn combine(parts: &[Estimate]) -> Estimate {
        let mut c = Combiner::default();
        for p in parts {
            c.add(p);
        }
        c.combined()
    }
}

/// [`Estimate::combine`] one interval at a time, so a stream of intervals needs no list of
/// them: the same sums in the same order, hence the same figures.
#[derive(Clone, Debug, Default)]
pub struct Combiner {
    samples: u64,
    bytes: u64,
    n: f64,
    s1: f64,
    n2: f64,
    s2: f64,
    s2m: f64,
    lost: Option<u64>,
    parts: u64,
    /// The only part, while there is one.
    first: Option<Estimate>,
}

impl Combiner {
    pub fn add(&mut self, p: &Estimate) {
        self.first = (self.parts == 0).then(|| p.clone());
        self.lost = match (if self.parts == 0 { Some(0) } else { self.lost }, p.lost) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.parts += 1;
        self.samples += p.samples;
        self.bytes += p.bytes;
        if let Some(m) = p.mean_ns {
            let w = p.samples as f64;
            self.n += w;
            self.s1 += w * m;
            if let Some(sd) = p.std_ns {
                self.n2 += w;
                self.s2 += w * (sd * sd + m * m);
                self.s2m += w * m;
            }
        }
    }

    /// Intervals added.
    pub fn parts(&self) -> u64 {
        self.parts
    }

    /// The combination of every part (see [`Estimate::combine`]).
    pub fn combined(&self) -> Estimate {
        let mut out = Estimate {
            samples: self.samples,
            bytes: self.bytes,
            lost: if self.parts == 0 { None } else { self.lost },
            ..Default::default()
        };
        if self.n > 0.0 {
            out.mean_ns = Some(self.s1 / self.n);
        }
        if self.n2 > 0.0 {
            let mu = self.s2m / self.n2;
            out.std_ns = Some((self.s2 / self.n2 - mu * mu).max(0.0).sqrt());
        }
        out
    }

    /// The one part itself when there is one (its notes and bounds kept), else the combination.
    pub fn overall(&self) -> Estimate {
        match &self.first {
            Some(e) if self.parts == 1 => e.clone(),
            _ => self.combined(),
        }
    }
}

/// Errors a pair estimator can report.
#[derive(Debug, Error, PartialEq)]
pub enum MethodError {
    /// The two synopses were built with different configurations; names the first field that
    /// differs.
    #[error(
        "configuration mismatch between sender and receiver: {field} is {sender} at the sender but {receiver} at the receiver"
    )]
    ConfigMismatch {
        field: String,
        sender: String,
        receiver: String,
    },
    /// The synopses handed to the estimator are not of this method.
    #[error("synopsis of the wrong method handed to {method}")]
    WrongSynopsis { method: &'static str },
    #[error("{0}")]
    Invalid(String),
}

/// One point's synopsis for one interval, as `owl compare` sees it. Estimators get their own
/// type back by upcasting to [`Any`] ([`downcast`], [`downcast_ref`]).
pub trait PointSynopsis: Any + Send {
    /// Record one packet.
    fn record(&mut self, rec: &PacketRecord);
    /// Record a batch of packets (methods override this to keep the loop monomorphic).
    fn record_batch(&mut self, recs: &[PacketRecord]) {
        for r in recs {
            self.record(r);
        }
    }
    /// Bytes of this synopsis on the wire (what `encode` writes).
    fn encoded_len(&self) -> usize;
    /// Append the method payload of this synopsis (see [`crate::wire`]).
    fn encode(&self, out: &mut Vec<u8>);
    /// Bytes this point would put on the network for this interval in a deployment: its
    /// synopsis message, or the probes, references or in-packet timestamps it injects. The rest
    /// of the payload is local state or emulation data kept only so that `owl estimate` can run
    /// offline ([`MethodInfo::crosses`] says which). Where both points keep a synopsis, one
    /// sends it to the other, so a pair's [`Estimate::bytes`] is the larger point's (tested for
    /// every method in the registry). `None` when only the exchange between the two points
    /// decides it (RDA's round trip): the pair estimate's `bytes` reports it.
    fn shipped_len(&self) -> Option<u64> {
        Some(self.encoded_len() as u64)
    }
}

/// A per-flow estimate, from methods that give one.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FlowEstimate {
    /// Estimated mean delay of the flow, ns.
    pub mean_ns: Option<f64>,
    /// Estimated (rough) standard deviation of the flow's delay, ns.
    pub std_ns: Option<f64>,
    /// Estimated packets of the flow (at the sender).
    pub packets: Option<f64>,
    /// Estimated packets of the flow lost.
    pub lost: Option<f64>,
}

/// One sender packet as a per-packet method reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PacketEstimate {
    /// The packet's identity, where the method knows it (a packet R received).
    pub id: Option<u64>,
    /// When S sent it, ns, as the method has it (decoded, or reconstructed).
    pub sender_ns: u64,
    /// When R received it; `None` for a packet found lost, or not placed.
    pub receiver_ns: Option<u64>,
    /// Whether the method placed the packet (as received or as lost); `false` where it could
    /// not tell.
    pub placed: bool,
}

impl PacketEstimate {
    pub fn delay_ns(&self) -> Option<i64> {
        self.receiver_ns
            .map(|r| r.wrapping_sub(self.sender_ns) as i64)
    }
}

/// An aggregate latency method, object-safe.
pub trait Method: Send + Sync {
    /// Short name used on the command line and in reports (`lda`, `rda`, …).
    fn name(&self) -> &str;
    /// Everything both points must agree on, by field name (written into synopsis files and
    /// compared field by field).
    fn config(&self) -> Vec<(&'static str, String)>;
    /// A fresh synopsis for one point and one interval.
    fn new_point(&self, role: Role) -> Box<dyn PointSynopsis>;
    /// Decode a payload written by [`PointSynopsis::encode`] of this method and configuration.
    fn decode_point(
        &self,
        role: Role,
        bytes: &[u8],
    ) -> Result<Box<dyn PointSynopsis>, crate::wire::DecodeError>;
    /// Turn the sender's and the receiver's synopses of one interval into an estimate.
    fn estimate(
        &self,
        sender: Box<dyn PointSynopsis>,
        receiver: Box<dyn PointSynopsis>,
    ) -> Result<Estimate, MethodError>;
    /// Per-flow estimates for `flows`, one per key in order, for methods that keep per-flow
    /// information; `None` for aggregate-only methods.
    fn estimate_flows(
        &self,
        _sender: &dyn PointSynopsis,
        _receiver: &dyn PointSynopsis,
        _flows: &[FlowKey],
    ) -> Option<Result<Vec<FlowEstimate>, MethodError>> {
        None
    }
    /// Every packet of the interval, in sending order, for methods that give per-packet
    /// delays; `None` for the others.
    fn estimate_packets(
        &self,
        _sender: &dyn PointSynopsis,
        _receiver: &dyn PointSynopsis,
    ) -> Option<Result<Vec<PacketEstimate>, MethodError>> {
        None
    }
}

/// What every method is built from on the command line: the seed of its hashes and an optional
/// synopsis budget per interval (`--memory`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuildOptions {
    pub seed: u64,
    pub memory: Option<u64>,
}

/// One method as owl presents it: its name, a line of help, what it estimates, how to build it
/// from the defaults and `--memory`, and how to rebuild it from its configuration fields (a
/// synopsis file, `--method-config`). Each method module exports its descriptor(s); the list
/// of them is [`crate::registry::METHODS`], and every list owl prints or checks (help, name
/// lookup, the README's methods table, the fuzz target) iterates it.
pub struct MethodInfo {
    pub name: &'static str,
    pub summary: &'static str,
    /// Answers [`Method::estimate_flows`].
    pub per_flow: bool,
    /// Answers [`Method::estimate_packets`].
    pub per_packet: bool,
    /// What crosses the network between the points for each interval, whether it needs a round
    /// trip, and what a synopsis file holds beyond it (`owl record --help` lists these).
    pub crosses: &'static str,
    pub build: BuildFn,
    pub from_config: FromConfigFn,
}

/// A method from its defaults and [`BuildOptions`].
pub type BuildFn = fn(&BuildOptions) -> Result<Box<dyn Method>, MethodError>;
/// A method from its configuration fields, by name.
pub type FromConfigFn = fn(&[(String, String)]) -> Result<Box<dyn Method>, MethodError>;

impl std::fmt::Debug for MethodInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MethodInfo")
            .field("name", &self.name)
            .field("per_flow", &self.per_flow)
            .field("per_packet", &self.per_packet)
            .finish()
    }
}

/// Columns per row of a `rows`-row sketch of `cell`-byte cells within `memory` bytes, or
/// `default` without a budget.
pub fn columns_for_memory(
    memory: Option<u64>,
    rows: u64,
    cell: u64,
    default: usize,
) -> Result<usize, MethodError> {
    match memory {
        None => Ok(default),
        Some(m) => {
            let c = m / (rows * cell);
            if c == 0 {
                return Err(MethodError::Invalid(format!(
                    "--memory {m} bytes is below one column of {rows} rows × {cell} B ({} bytes)",
                    rows * cell
                )));
            }
            Ok(c.min(1 << 26) as usize)
        }
    }
}

/// Borrow a synopsis as the method's concrete type (for estimators that only read).
pub fn downcast_ref<'a, T: 'static>(
    s: &'a dyn PointSynopsis,
    method: &'static str,
) -> Result<&'a T, MethodError> {
    let any: &dyn Any = s;
    any.downcast_ref::<T>()
        .ok_or(MethodError::WrongSynopsis { method })
}

/// Parse one configuration value of `method` (`--method-config`, synopsis files), or an error
/// naming the field and the value.
pub fn config_value<T: std::str::FromStr>(
    method: &str,
    field: &str,
    value: &str,
) -> Result<T, MethodError> {
    value
        .trim()
        .parse()
        .map_err(|_| MethodError::Invalid(format!("{method} {field} '{value}' is not valid")))
}

/// The error for a configuration field `method` does not know, listing those it does.
pub fn unknown_field(method: &str, field: &str, known: &[&str]) -> MethodError {
    MethodError::Invalid(format!(
        "unknown {method} config field '{field}' (known: {})",
        known.join(", ")
    ))
}

/// Downcast a boxed synopsis to the method's concrete type.
pub fn downcast<T: 'static>(
    s: Box<dyn PointSynopsis>,
    method: &'static str,
) -> Result<Box<T>, MethodError> {
    let any: Box<dyn Any> = s;
    any.downcast::<T>()
        .map_err(|_| MethodError::WrongSynopsis { method })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_pools_mean_and_variance() {
        // Two groups: {0, 2} (mean 1, sd 1) and {10, 10, 10, 10} (mean 10, sd 0).
        let a = Estimate {
            mean_ns: Some(1.0),
            std_ns: Some(1.0),
            samples: 2,
            bytes: 5,
            lost: Some(1),
            ..Default::default()
        };
        let b = Estimate {
            mean_ns: Some(10.0),
            std_ns: Some(0.0),
            std_ci95_ns: Some([0.0, 0.5]),
            samples: 4,
            bytes: 7,
            lost: Some(2),
            ..Default::default()
        };
        let c = Estimate::combine(&[a, b]);
        let all = [0.0f64, 2.0, 10.0, 10.0, 10.0, 10.0];
        let m = all.iter().sum::<f64>() / 6.0;
        let sd = (all.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 6.0).sqrt();
        assert!((c.mean_ns.unwrap() - m).abs() < 1e-12);
        assert!((c.std_ns.unwrap() - sd).abs() < 1e-12);
        assert_eq!((c.samples, c.bytes, c.lost), (6, 12, Some(3)));
        // intervals are per interval: not combined
        assert_eq!((c.mean_ci98_ns, c.std_ci95_ns), (None, None));
    }

    #[test]
    fn combine_of_nothing() {
        let c = Estimate::combine(&[]);
        assert_eq!(c.mean_ns, None);
        assert_eq!(c.lost, None);
    }
}
