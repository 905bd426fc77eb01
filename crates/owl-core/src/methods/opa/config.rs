//! What both points of an OPA must agree on.

use crate::method::{MethodError, config_value, unknown_field};

use super::cah::MAX_ROWS;
use super::recovery::{Limits, MAX_ERRORS};
use super::timestamps::Codec;

/// Longest delimiter prefix: a delimiter every 2⁴⁰ packets is no delimiter at all.
pub const MAX_DELIMITER_BITS: u32 = 40;
/// The interval's search budget, in mappings per sender packet: hostile or heavily reordered
/// traffic costs at most this much recovery work per packet (about 2 µs on one core).
pub const MAPPINGS_PER_PACKET: u64 = 64;
/// Most groups per segment.
pub const MAX_GROUPS: u32 = 1 << 20;

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
    /// Most mappings tested in one group before it is given up (the enumeration's hard cap);
    /// an interval also stops searching once it has tested [`MAPPINGS_PER_PACKET`] per sender
    /// packet (or `max_mappings`, if more).
    pub max_mappings: u64,
    /// How the sender's timestamps travel (§V-A).
    pub codec: Codec,
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
    "timestamps",
    "ratio",
    "seed",
];

impl Config {
    /// owl's default (`opa`): segments of about 128 packets between delimiters (b = 7), one
    /// group each, k = 3 rows (the paper's 24-byte CAH), at most E = 2 errors per group as the
    /// paper's implementation, a shift of 16 positions, 2²⁰ mappings per group at most, and
    /// lossless timestamps.
    pub fn lossless(seed: u64) -> Config {
        Config {
            groups: 1,
            rows: 3,
            delimiter_bits: 7,
            max_errors: 2,
            shift: 16,
            max_mappings: 1 << 20,
            codec: Codec::Lossless,
            seed,
        }
    }

    /// `opa-wavelet`: the paper's wavelet compression at ratio θ = 1/10 (§VI-B), in segments
    /// of about 256 packets (b = 8) so that tuples and timestamps stay within the paper's
    /// overhead (§VI-B: about 3 packets of 1 500 B per 10⁴, 0.45 B a packet).
    pub fn wavelet(seed: u64) -> Config {
        Config {
            codec: Codec::Wavelet { ratio: 0.1 },
            delimiter_bits: 8,
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
        if self.shift > 1 << 16 {
            return bad(format!("shift {} must be at most 65536", self.shift));
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
        }
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
            ("timestamps", ts.into()),
            ("ratio", ratio),
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
                "seed" => c.seed = config_value("opa", k, v)?,
                "ratio" => ratio = Some(config_value::<f64>("opa", k, v)?),
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
                Codec::Lossless => 0.1,
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
