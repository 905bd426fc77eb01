//! LDA as an object-safe [`Method`] for `owl compare`, `owl record` and `owl estimate`.

use std::sync::Arc;

use super::synopsis::Shared;
use super::{Config, Synopsis, estimate};
use crate::PacketRecord;
use crate::method::{Estimate, MethodError, MethodInfo, TypedMethod, TypedSynopsis};
use crate::wire::DecodeError;

/// The `lda` method: one [`Config`] shared by every point and interval.
pub struct LdaMethod {
    shared: Arc<Shared>,
}

impl LdaMethod {
    pub fn new(config: Config) -> LdaMethod {
        LdaMethod {
            shared: Shared::new(config),
        }
    }
    pub fn config(&self) -> &Config {
        &self.shared.config
    }
}

impl TypedSynopsis for Synopsis {
    const METHOD: &'static str = "lda";
    fn record(&mut self, rec: &PacketRecord) {
        Synopsis::record(self, rec.id, rec.ts_ns);
    }
    fn record_batch(&mut self, recs: &[PacketRecord]) {
        self.record_batch(recs);
    }
    fn encoded_len(&self) -> usize {
        Synopsis::encoded_len(self)
    }
    fn encode(&self, out: &mut Vec<u8>) {
        Synopsis::encode(self, out)
    }
    /// Rows added to rows (timestamp sums, counters and digests, wrapping as recording adds):
    /// an aggregator is a sum over its packets, whatever their order. The configuration (rows,
    /// sampling, seed, …) must be the same, and both must carry digests or neither
    /// ([`Synopsis::merge_rows`]).
    fn merge(&mut self, later: Synopsis) -> Result<(), MethodError> {
        self.merge_rows(&later)
    }
}

impl crate::method::MethodConfig for Config {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        Config::pairs(self)
    }
}

impl TypedMethod for LdaMethod {
    type Config = Config;
    type Sender = Synopsis;
    type Receiver = Synopsis;
    fn name(&self) -> &str {
        "lda"
    }

    fn config(&self) -> &Config {
        &self.shared.config
    }
    fn foreign(&self) -> crate::method::Foreign {
        if self.shared.config.digest() {
            crate::method::Foreign::Detects(
                "a row is usable when its counters and its identity digest agree; lda:digest=off, the paper's, assumes none",
            )
        } else {
            crate::method::Foreign::AssumesNone(
                "the paper's LDA: a row whose counters agree is used, whatever packets it holds",
            )
        }
    }

    fn new_sender(&self) -> Synopsis {
        Synopsis::with_shared(self.shared.clone())
    }
    fn new_receiver(&self) -> Synopsis {
        Synopsis::with_shared(self.shared.clone())
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        Synopsis::decode_shared(self.shared.clone(), bytes)
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        Synopsis::decode_shared(self.shared.clone(), bytes)
    }

    fn estimate(&self, s: Synopsis, r: Synopsis) -> Result<Estimate, MethodError> {
        let e = estimate(&s, &r)?;
        let mut est = to_estimate(&e, s.encoded_len() as u64);
        if s.config().digest() && !e.digest_used {
            let which = match (s.has_digests(), r.has_digests()) {
                (false, false) => "neither synopsis carries one (LDA1 payloads",
                (false, true) => "the sender's synopsis carries none (an LDA1 payload",
                _ => "the receiver's synopsis carries none (an LDA1 payload",
            };
            est.notes.push(format!(
                "identity digest not used: {which}, recorded before the digest existed); rows are checked by their counters only"
            ));
        }
        Ok(est)
    }
}

/// The common [`Estimate`] of an [`LdaEstimate`](super::LdaEstimate); `bytes` is the sender's
/// encoded aggregator, the only thing that crosses the network (§III: the sender ships its LDA
/// to the receiver in the End control message).
pub fn to_estimate(e: &super::LdaEstimate, bytes: u64) -> Estimate {
    let mut notes = Vec::new();
    for (j, b) in e.banks.iter().enumerate() {
        let foreign = if b.foreign_rows > 0 {
            format!(", {} foreign", b.foreign_rows)
        } else {
            String::new()
        };
        notes.push(format!(
            "bank {} (p = {:.3e}): {}/{} rows usable{foreign}, {} samples",
            j + 1,
            b.probability,
            b.usable_rows,
            b.rows,
            b.samples
        ));
    }
    let foreign: usize = e.banks.iter().map(|b| b.foreign_rows).sum();
    let sent: u64 = e.banks.iter().map(|b| b.sent_sampled).sum();
    let received: u64 = e.banks.iter().map(|b| b.received_sampled).sum();
    // why what LDA normally gives is withheld: the mean's reason, else the std's
    let mut reason = None;
    if e.mean_ns.is_none() {
        // advice from the evidence: nothing sampled, packets R has and S has not, or losses
        let rows: usize = e.banks.iter().map(|b| b.rows).sum();
        let usable: usize = e.banks.iter().map(|b| b.usable_rows).sum();
        let excess: usize = e.banks.iter().map(|b| b.excess_rows).sum();
        let lossy = rows - usable - excess - foreign;
        notes.push(if sent == 0 && received == 0 {
            "no packet sampled at either point: nothing to measure in this interval".into()
        } else if sent == 0 {
            format!(
                "no packet sampled at the sender, {received} at the receiver: S recorded nothing of this interval (a point not capturing, or unrelated captures)"
            )
        } else if received == 0 {
            format!(
                "no packet sampled at the receiver, {sent} at the sender: every packet lost, or R recorded nothing of this interval (a point not capturing)"
            )
        } else if excess + foreign >= lossy {
            format!(
                "no usable row: {excess} rows hold more packets at the receiver than at the sender, {foreign} other packets than the sender's with equal counters (identity digest), {lossy} fewer: the points did not see the same packets (unrelated captures, or intervals that do not line up)"
            )
        } else {
            "no usable row holds a packet: every sampled row saw a loss (tune a bank toward a higher loss rate)".into()
        });
        reason = notes.last().map(|n| format!("mean withheld: {n}"));
    }
    if received > sent {
        notes.push(format!(
            "the receiver sampled more packets than the sender ({received} > {sent}): loss is shown as 0, a floor, not a measurement"
        ));
    }
    let v = e.variance_by(e.std_estimator);
    match (&v.withheld, v.dof) {
        (Some(why), _) => {
            notes.push(why.clone());
            if reason.is_none() && e.mean_ns.is_some() {
                reason = Some(format!("std withheld: {why}"));
            }
        }
        (None, Some(nu)) => notes.push(format!(
            "std by the {} estimator over {} {}, {nu:.0} effective degrees of freedom",
            v.estimator,
            v.units,
            if v.estimator == super::StdEstimator::Rows {
                "usable rows"
            } else {
                "usable collapsed rows"
            }
        )),
        (None, None) => notes.push(format!(
            "std by the {} estimator over {} units",
            v.estimator, v.units
        )),
    }
    if foreign > 0 {
        notes.push(format!(
            "{foreign} rows hold packets the other point did not see with equal counters: left out (identity digest)"
        ));
    }
    let excess: usize = e.banks.iter().map(|b| b.excess_rows).sum();
    if excess > 0 {
        notes.push(format!(
            "{excess} rows hold more packets at the receiver than at the sender: packets crossed the interval boundary or were duplicated, which LDA assumes away; {}",
            if e.digest_used {
                "rows where such packets hide behind equal counters are found by the identity digest and left out"
            } else {
                "rows with equal counters may hide such packets too (RDA §III-C; lda:digest=on finds them)"
            }
        ));
    }
    let (mut mean_ci98_ns, mut std_ci95_ns) = (e.mean_ci98_ns, e.std_ci95_ns);
    if e.mean_ns.is_some()
        && e.effective_samples < MIN_BOUND_SAMPLES
        && (mean_ci98_ns.is_some() || std_ci95_ns.is_some())
    {
        (mean_ci98_ns, std_ci95_ns) = (None, None);
        let why = format!(
            "bounds withheld: {} effective samples, fewer than the {MIN_BOUND_SAMPLES} on which its 98 % bound and 95 % interval hold (below, they missed the truth in up to 1 interval in 10 and 3 in 10); {}",
            e.effective_samples,
            too_few_advice(e)
        );
        notes.push(why.clone());
        reason.get_or_insert(why);
    }
    Estimate {
        reason,
        quantiles: None,
        recovered: None,
        mean_ns: e.mean_ns,
        std_ns: e.std_ns,
        samples: e.effective_samples,
        bytes,
        lost: e.lost.map(|l| l.round() as u64),
        mean_ci98_ns,
        std_ci95_ns,
        notes,
    }
}

/// Fewest effective samples (packets in usable rows) on which LDA states its bounds, the
/// 98 % bound on the mean (eq. 1) and the std's 95 % interval; below it both are withheld and
/// the mean and std are reported bare. owl's rule, measured: both bounds rest on the sample's
/// own spread, which a handful of packets from a skewed delay distribution understates. Over
/// 40 seeds of FIFO paths at 4 k packets/s (Weibull 0.7 and 0.6 delays, 0.5 % loss, the
/// default LDA, 250 ms to 5 s intervals: 3 500 intervals by effective samples), the mean's
/// bound held in 91–97 % of intervals with 5–9 samples and 95–99 % with 10–19, and in 97–100 %
/// from 20 up; the std's interval in 69–84 %, 89–96 % and 88–97 %. (Pareto delays of shape
/// 2.5, whose fourth moment is infinite, stay below that at any sample an interval gives:
/// 89–94 % and 76–80 % from 20 to 99 samples.) `scripts/lda-bounds-by-samples.sh` made these
/// numbers; the README's *Per-interval accuracy* has them.
pub const MIN_BOUND_SAMPLES: u64 = 20;

/// What would give an interval more effective samples: a configuration tuned for the packets S
/// had, or toward a higher loss rate when most rows saw a loss.
fn too_few_advice(e: &super::LdaEstimate) -> String {
    let rows: usize = e.banks.iter().map(|b| b.rows).sum();
    let usable: usize = e.banks.iter().map(|b| b.usable_rows).sum();
    let sent: u64 = e.banks.iter().map(|b| b.sent_sampled).sum();
    let p: f64 = e.banks.iter().map(|b| b.probability).sum();
    if 2 * usable < rows {
        return format!(
            "{} of {rows} rows saw a loss or other packets: tune a bank toward a higher loss rate (--method-config lda:targets=…)",
            rows - usable
        );
    }
    let packets = if p > 0.0 { sent as f64 / p } else { 0.0 };
    // two significant figures: 874 → 870, 12 345 → 12 000
    let scale = 10f64.powi((packets.max(1.0).log10().floor() as i32 - 1).max(0));
    let packets = ((packets / scale).round() * scale).max(1.0) as u64;
    format!(
        "S had about {packets} packets in this interval and LDA samples a fraction {p:.2e} of them: tune it for them (--method-config lda:packets={packets}, on both points)"
    )
}

/// `lda`: the paper's recommended two banks tuned toward loss rates 0.005 and 0.1 for 5 M
/// packets per interval (§IV-B), with owl's identity digest; `--memory B` gives each bank
/// `⌊(B − 10)/32⌋` rows (even), 16 bytes a row, and retunes the sampling for that many rows.
/// `lda:digest=off` is the paper's LDA (12-byte rows).
pub const INFO: MethodInfo = MethodInfo {
    name: "lda",
    summary: "Lossy Difference Aggregator (Kompella et al.): 2 banks x 512 rows tuned toward 0.5 % and 10 % loss of 5 M packets an interval (lda:packets=N tunes them for N; below 20 effective samples an interval's bounds are withheld), 16 B a row with an identity digest that leaves out rows holding packets the other point did not see (lda:digest=off: the paper's 12 B rows; --memory sets the rows); mean, loss, std with a 95 % interval by the between-row estimator (lda:std=rows, default; lda:std=paper is eq. 5, lda:std=centred); assumes FIFO",
    samples: "effective sample size: packets in the rows whose counters agree at both points (LDA §III-D)",
    per_flow: false,
    crosses: "each point's aggregator (16 B a row; 12 B with lda:digest=off), one way; no round trip",
    per_packet: false,
    recovers_delays: false,
    build: |o| {
        let cfg = match o.memory {
            None => Config::paper_default(o.seed),
            Some(b) => {
                Config::for_memory(b, &super::DEFAULT_TARGETS, super::PAPER_PACKETS, o.seed)?
            }
        };
        Ok(Box::new(LdaMethod::new(cfg)))
    },
    from_config: |pairs| Ok(Box::new(LdaMethod::new(Config::from_pairs(pairs)?))),
};
