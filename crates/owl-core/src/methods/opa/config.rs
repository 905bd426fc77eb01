//! What both points of an OPA must agree on.

use crate::method::{MethodError, config_value, unknown_field};

use super::cah::MAX_ROWS;
use super::recovery::{Limits, MAX_ERRORS};
use super::timestamps::Codec;

/// Longest delimiter prefix: a delimiter every 2⁴⁰ packets is no delimiter at all.
pub const MAX_DELIMITER_BITS: u32 = 40;
/// The share of one core the pair side may spend per second of traffic, by default: one, so
/// recovery keeps up with the traffic on one core whatever the errors, the group sizes or the
/// search (see [`Config::cpu`]).
pub const CPU: f64 = 1.0;
/// Most search work per sender packet whatever the interval's span (about 100 µs): what a
/// sender's timestamps spread over a long time can ask for.
pub const MAX_WORK_PER_PACKET: u64 = 100_000;
/// The smallest interval search budget (about 10 ms of one core).
pub const MIN_WORK: u64 = 10_000_000;
/// Largest `cpu`.
pub const MAX_CPU: f64 = 1_000.0;
/// Most groups per segment.
pub const MAX_GROUPS: u32 = 1 << 20;
/// The chance, at the design loss rate, that a group loses more packets than its rows can
/// solve for (`k − 1`): what [`Config::rows_for`] sizes each group to.
pub const RESIDUAL: f64 = 1e-4;
/// Largest design loss rate.
pub const MAX_DESIGN_LOSS: f64 = 0.2;
/// Most label bits a packet.
pub const MAX_LABEL_BITS: u32 = 8;

/// How recovery looks for a group's mapping (§IV-C/D).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// Algorithm 1 as the paper writes it: mappings by increasing number of errors, at most
    /// `max_errors`, losses at every position, moves within the shift bound.
    Paper,
    /// owl's extension: the receiver decodes the sender's timestamps first and aligns them with
    /// its arrival times (losses are skipped sender positions, insertions skipped received
    /// packets); the most likely alignments are proposed first and the CAH checks each exactly
    /// (see [`super::align`]). Errors are bounded by the group's rows, not by `max_errors`.
    Timestamps,
}

/// Configuration of an OPA (§II, §IV-B, §V, §VI-A).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// g: groups per segment (§IV-B); a packet's group is a hash of its identity.
    pub groups: u32,
    /// k: rows of the CAH (§IV-B, Eq. 1): a group with α < k unknown positions is recovered,
    /// `k − α` rows checking the solution (Eq. 6).
    pub rows: u32,
    /// b: a packet whose identity has its top `b` bits zero is a delimiter (§II), opening a
    /// segment at both points; 0: no delimiters, each measurement interval is one segment.
    pub delimiter_bits: u32,
    /// E: most errors (losses, insertions, moves) recovery considers in a group (§VI-A, Eq. 10:
    /// the paper's implementation recovers groups of at most two).
    pub max_errors: u32,
    /// d: most positions a reordered packet moves within its group (§V-B).
    pub shift: u32,
    /// Most mappings tested in one group before it is given up (the enumeration's hard cap).
    pub max_mappings: u64,
    /// The interval's budget, as a share of one core per second of the traffic it covers
    /// (from the sender's first to its last timestamp): `cpu ×` that span in work steps
    /// (about a nanosecond of one core each, [`super::recovery::work`]; at least
    /// [`MIN_WORK`], at most [`MAX_WORK_PER_PACKET`] a packet) for the whole pair side —
    /// decoding the sender's timestamps and labels, R's lists, each group's exact check
    /// (§IV-C), the alignment lattices, the pairings of late packets, Algorithm 1's mappings,
    /// the re-matching across delimiters and the estimate — so recovery keeps up with the
    /// traffic ([`CPU`] by default). The phases no budget cuts (decoding, the lists, the exact
    /// checks, the estimate: a few hundred steps a packet) are charged first; the search has
    /// what they leave, and stops when it is spent. The first pass of the search gives a group at most
    /// [`FIRST_SHARE`](super::method::FIRST_SHARE) times the interval's budget a packet for
    /// each of its packets, sixteen times more each pass after, so that a few hard groups
    /// cannot spend what the easy ones need. Groups the budget left are counted; a larger
    /// `cpu` places them, offline, given the time. Recovery runs at the receiver, but like
    /// every field both points must agree on it (`owl record` at both, or `--method-config`
    /// in `owl compare`).
    pub cpu: f64,
    /// How the sender's timestamps travel (§V-A).
    pub codec: Codec,
    /// ρ: the loss rate groups are sized for (§VI-A, Eq. 10: errors per group decide what is
    /// recovered). A group of `w` packets carries the fewest rows `k ≥ rows` such that losing
    /// `k` or more of its packets at that rate has probability at most [`RESIDUAL`]
    /// ([`Config::rows_for`]); 0: every group has `rows` rows, as in the paper.
    pub design_loss: f64,
    /// How recovery searches (the paper's enumeration, or aligned on the timestamps).
    pub search: Search,
    /// Bits of each packet's hash the sender sends in its sending order (owl's extension, 0
    /// in the paper): an alignment may match a received packet only to a position of the same
    /// label, so a loss misplaced by `δ` positions survives with probability `2^(−bits·δ)` and
    /// the search aligned on the timestamps tries few alignments. Unused by `search=paper`.
    pub labels: u32,
    /// Seed of the group and augmented hashes (both points must use the same).
    pub seed: u64,
}

/// The field names, in the order [`Config::pairs`] writes them.
const FIELDS: &[&str] = &[
    "groups",
    "rows",
    "delimiter_bits",
    "max_errors",
    "shift",
    "max_mappings",
    "cpu",
    "timestamps",
    "ratio",
    "design_loss",
    "search",
    "labels",
    "seed",
];

impl Config {
    /// owl's default (`opa`): segments of about 128 packets between delimiters (b = 7), one
    /// group each, at least k = 3 rows (the paper's 24-byte CAH) and more in a group whose
    /// size makes more losses likely at the design loss rate of 1 % (the rate of `owl demo`),
    /// the search aligned on the timestamps, a shift of 16 positions, 2²⁴ mappings per group
    /// at most, and lossless timestamps. With `search=paper`, at most E = 2 errors per group
    /// as the paper's implementation.
    pub fn lossless(seed: u64) -> Config {
        Config {
            groups: 1,
            rows: 3,
            delimiter_bits: 7,
            max_errors: 2,
            shift: 16,
            max_mappings: 1 << 24,
            cpu: CPU,
            codec: Codec::Lossless,
            design_loss: 0.01,
            search: Search::Timestamps,
            labels: 2,
            seed,
        }
    }

    /// `k(w)`: the rows of a group of `w` packets — the fewest `k ≥ rows` with
    /// `P(Binomial(w, ρ) ≥ k) ≤ RESIDUAL` at the design loss rate ρ, at most [`MAX_ROWS`];
    /// `rows` when ρ = 0. Both points compute it from `w` (the sender's count, in the tuple) in
    /// IEEE arithmetic without library functions, so they agree on every platform.
    pub fn rows_for(&self, w: u32) -> usize {
        let k0 = self.rows as usize;
        let p = self.design_loss;
        if p <= 0.0 || w == 0 {
            return k0;
        }
        // pmf(0) = (1 − p)^w by squaring
        let (mut base, mut e, mut pmf) = (1.0 - p, w, 1.0f64);
        while e > 0 {
            if e & 1 == 1 {
                pmf *= base;
            }
            base *= base;
            e >>= 1;
        }
        let ratio = p / (1.0 - p);
        let mut below = 0.0; // P(X < k)
        for k in 0..MAX_ROWS {
            // here pmf = P(X = k)
            below += pmf;
            if k + 1 >= k0 && 1.0 - below <= RESIDUAL {
                return k + 1;
            }
            pmf *= (w as f64 - k as f64) / (k as f64 + 1.0) * ratio;
        }
        MAX_ROWS
    }

    /// `opa-wavelet`: the paper's configuration (§V-A, §VI-B) — wavelet-compressed timestamps
    /// keeping θ = 6 % of the coefficients, a fixed k = 3 rows per group (`design_loss=0`), no
    /// labels and the paper's enumeration (Algorithm 1, `search=paper`): 0.44 B a packet, the
    /// paper's overhead of about 3 packets of 1 500 B per 10⁴ (0.45 B), for paths with the
    /// paper's loss rates (≤ 10⁻³; every delivered packet placed at 10⁻⁴ loss). On lossier
    /// paths use [`Config::wavelet_robust`] (`design_loss=0.01,labels=2,search=timestamps`,
    /// about 1 B a packet); the paper's θ = 1/10 is `ratio=0.1`.
    pub fn wavelet(seed: u64) -> Config {
        Config {
            design_loss: 0.0,
            labels: 0,
            search: Search::Paper,
            ..Config::wavelet_robust(seed)
        }
    }

    /// Wavelet timestamps with `opa`'s groups, rows and labels and the search aligned on the
    /// timestamps: it places what `opa` places at 1 % loss (positions exact, delays within the
    /// reported timestamp error), for about 1 B a packet.
    pub fn wavelet_robust(seed: u64) -> Config {
        Config {
            codec: Codec::Wavelet { ratio: 0.06 },
            ..Config::lossless(seed)
        }
    }

    pub fn validate(&self) -> Result<(), MethodError> {
        let bad = |s: String| Err(MethodError::Invalid(format!("opa: {s}")));
        if !(1..=MAX_GROUPS).contains(&self.groups) {
            return bad(format!(
                "groups {} must be between 1 and {MAX_GROUPS}",
                self.groups
            ));
        }
        if !(2..=MAX_ROWS as u32).contains(&self.rows) {
            return bad(format!(
                "rows {} must be between 2 (one unknown, one checking row) and {MAX_ROWS}",
                self.rows
            ));
        }
        if self.delimiter_bits > MAX_DELIMITER_BITS || (1..4).contains(&self.delimiter_bits) {
            return bad(format!(
                "delimiter_bits {} must be 0 (no delimiters) or between 4 and {MAX_DELIMITER_BITS}",
                self.delimiter_bits
            ));
        }
        if self.max_errors as usize > MAX_ERRORS {
            return bad(format!(
                "max_errors {} must be at most {MAX_ERRORS}",
                self.max_errors
            ));
        }
        if self.max_mappings == 0 {
            return bad("max_mappings must be at least 1".into());
        }
        if !(self.cpu.is_finite() && self.cpu > 0.0 && self.cpu <= MAX_CPU) {
            return bad(format!(
                "cpu {} must be above 0 and at most {MAX_CPU} (the share of one core recovery may search for, per second of traffic)",
                self.cpu
            ));
        }
        if self.shift > 1 << 16 {
            return bad(format!("shift {} must be at most 65536", self.shift));
        }
        if !(self.design_loss.is_finite() && (0.0..=MAX_DESIGN_LOSS).contains(&self.design_loss)) {
            return bad(format!(
                "design_loss {} must be between 0 (fixed rows) and {MAX_DESIGN_LOSS}",
                self.design_loss
            ));
        }
        if self.labels > MAX_LABEL_BITS {
            return bad(format!(
                "labels {} must be at most {MAX_LABEL_BITS} bits a packet",
                self.labels
            ));
        }
        if let Codec::Wavelet { ratio } = self.codec
            && !(ratio.is_finite() && (0.01..=1.0).contains(&ratio))
        {
            return bad(format!(
                "wavelet ratio {ratio} must be between 0.01 and 1 (the fraction of coefficients kept)"
            ));
        }
        Ok(())
    }

    /// The recovery's search bounds.
    pub fn limits(&self) -> Limits {
        Limits {
            max_errors: self.max_errors as usize,
            shift: self.shift as usize,
            max_mappings: self.max_mappings,
            max_work: u64::MAX,
        }
    }

    /// A packet's label: the low `labels` bits of its hash (the group and augmented hashes
    /// use the high bits and a mix of all of them).
    #[inline]
    pub fn label(&self, x: u64) -> u8 {
        (x & ((1u64 << self.labels) - 1)) as u8
    }

    /// A packet is a delimiter when the top `b` bits of its identity are zero.
    #[inline]
    pub fn is_delimiter(&self, id: u64) -> bool {
        self.delimiter_bits > 0 && id >> (64 - self.delimiter_bits) == 0
    }

    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let (ts, ratio) = match self.codec {
            Codec::Lossless => ("lossless", "0".to_string()),
            Codec::Wavelet { ratio } => ("wavelet", ratio.to_string()),
        };
        vec![
            ("groups", self.groups.to_string()),
            ("rows", self.rows.to_string()),
            ("delimiter_bits", self.delimiter_bits.to_string()),
            ("max_errors", self.max_errors.to_string()),
            ("shift", self.shift.to_string()),
            ("max_mappings", self.max_mappings.to_string()),
            ("cpu", self.cpu.to_string()),
            ("timestamps", ts.into()),
            ("ratio", ratio),
            ("design_loss", self.design_loss.to_string()),
            (
                "search",
                match self.search {
                    Search::Paper => "paper",
                    Search::Timestamps => "timestamps",
                }
                .into(),
            ),
            ("labels", self.labels.to_string()),
            ("seed", self.seed.to_string()),
        ]
    }

    /// `base` with the fields named in `pairs` replaced; an unknown field is an error naming
    /// it. `ratio` sets the wavelet's ratio (it is 0 for lossless timestamps).
    pub fn from_pairs_over(
        base: Config,
        pairs: &[(String, String)],
    ) -> Result<Config, MethodError> {
        let mut c = base;
        let mut ratio = None;
        let mut wavelet = matches!(c.codec, Codec::Wavelet { .. });
        for (k, v) in pairs {
            match k.as_str() {
                "groups" => c.groups = config_value("opa", k, v)?,
                "rows" => c.rows = config_value("opa", k, v)?,
                "delimiter_bits" => c.delimiter_bits = config_value("opa", k, v)?,
                "max_errors" => c.max_errors = config_value("opa", k, v)?,
                "shift" => c.shift = config_value("opa", k, v)?,
                "max_mappings" => c.max_mappings = config_value("opa", k, v)?,
                "cpu" => c.cpu = config_value("opa", k, v)?,
                "seed" => c.seed = config_value("opa", k, v)?,
                "ratio" => ratio = Some(config_value::<f64>("opa", k, v)?),
                "design_loss" => c.design_loss = config_value("opa", k, v)?,
                "labels" => c.labels = config_value("opa", k, v)?,
                "search" => {
                    c.search = match v.trim() {
                        "paper" => Search::Paper,
                        "timestamps" => Search::Timestamps,
                        x => {
                            return Err(MethodError::Invalid(format!(
                                "opa search '{x}' is neither paper nor timestamps"
                            )));
                        }
                    }
                }
                "timestamps" => {
                    wavelet = match v.trim() {
                        "lossless" => false,
                        "wavelet" => true,
                        x => {
                            return Err(MethodError::Invalid(format!(
                                "opa timestamps '{x}' is neither lossless nor wavelet"
                            )));
                        }
                    }
                }
                _ => return Err(unknown_field("opa", k, FIELDS)),
            }
        }
        c.codec = if wavelet {
            let old = match c.codec {
                Codec::Wavelet { ratio } => ratio,
                Codec::Lossless => 0.06,
            };
            Codec::Wavelet {
                ratio: ratio.unwrap_or(old),
            }
        } else {
            if let Some(r) = ratio
                && r != 0.0
            {
                return Err(MethodError::Invalid(format!(
                    "opa ratio {r} is for wavelet timestamps; these are lossless"
                )));
            }
            Codec::Lossless
        };
        c.validate()?;
        Ok(c)
    }

    /// The first field whose value differs between the two points' configurations.
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
