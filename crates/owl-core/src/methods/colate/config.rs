//! What a COLATE point is configured with, and what two points must agree on.
//!
//! The four parameters `n`, `m`, `b`, `T` come from the plan of §5 ([`super::plan`]) for a
//! requirement (`alpha`, `beta`, `memory`, `t_min`, `t_max`, `ratio`, `form`); any of them
//! can be set outright (`n=`, `m=`, `b=`, `threshold=`), which then wins over the plan. The
//! defaults are the paper's **medium** requirement (α = 0.95, β = 0.05) at M = 10 MiB with the
//! `t_min` and `t_max` its example implies.
//!
//! `mean=raw` (default) is owl's variant ([`Estimator::Raw`]), which measured better than the
//! paper's in every setting of the `colate-*` experiments (README); `mean=paper` estimates as
//! §4 writes it. `std=counters` (default) is owl's std from the spread of the flow's
//! counters, with a 95 % interval ([`StdEstimator::Counters`]); `std=paper` is Theorem 4 as
//! written, kept for comparison.
//!
//! Two points may differ in `n`, `b`, `T` and the timestamp unit (§5.3: "each observation
//! point can choose its own values"); they must agree on `m`, the seed and the sampling
//! vectors — Theorem 4 needs the same packets in the same `j` at both points, and the loss
//! strategy of §1.4 the same packets in the same vector.

use crate::method::{MethodError, config_value, unknown_field};

use super::cells::{Cells, Memory, Spill};
use super::coding::Coding;
use super::epoch::MAX_COUNTERS;
use super::estimate::{Estimator, StdEstimator};
use super::plan::{self, Form, Level, MIB_BITS, Plan, Requirement};
use super::vector::Placement;

/// Default timestamp unit: 1 µs (module doc of [`super`]: the unit trades epoch length for
/// resolution; COLATE targets microsecond latencies, §1.1).
pub const DEFAULT_UNIT_NS: u64 = 1_000;
/// Default virtual repetitions (§6.2.2: "with only 1000 virtual repetitions").
pub const DEFAULT_GAMMA: u32 = 1_000;
/// Default RAM budget: 10 MiB (the paper's medium M).
pub const DEFAULT_MEMORY_BYTES: u64 = 10 << 20;
/// Most sampling vectors.
pub const MAX_VECTORS: usize = 16;
/// Default width of the packet counters in RAM ([`super::cells`]): 8 bits beside the `b` of
/// each timestamp counter; a count above 255 spills like a timestamp counter above `2^b − 1`.
pub const DEFAULT_COUNT_BITS: u8 = 8;
/// Default spill bound: one entry per 64 counters (12 bytes at a load of 3/4: 2 bits per
/// counter beside `M`).
pub const SPILL_PER_COUNTERS: u32 = 64;

/// A validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    n: u32,
    m: u32,
    b: u8,
    threshold: u64,
    unit_ns: u64,
    vectors: Vec<f64>,
    seed: u64,
    gamma: u32,
    mean: Estimator,
    std: StdEstimator,
    requirement: Requirement,
    count_bits: u8,
    /// Spill entries; `None`: `n/64`.
    spill: Option<u32>,
    /// How a flow's counters are chosen: anywhere (the paper's, default) or in one block.
    placement: Placement,
    /// How epochs store their counters: Rice-coded (default) or in fixed cells.
    coding: Coding,
}

const FIELDS: &[&str] = &[
    "n",
    "m",
    "b",
    "threshold",
    "unit_ns",
    "vectors",
    "seed",
    "gamma",
    "mean",
    "std",
    "alpha",
    "beta",
    "memory",
    "t_min",
    "t_max",
    "ratio",
    "form",
    "count_bits",
    "spill",
    "placement",
    "coding",
];

fn invalid(s: String) -> MethodError {
    MethodError::Invalid(format!("colate: {s}"))
}

impl Config {
    /// The plan's parameters for `req`, the default unit, γ and a single vector.
    pub fn from_plan(p: &Plan, seed: u64) -> Result<Config, MethodError> {
        let c = Config {
            n: u32::try_from(p.n)
                .map_err(|_| invalid(format!("the plan asks for {} counters", p.n)))?,
            m: p.m,
            b: p.b.min(63) as u8,
            threshold: p.threshold,
            unit_ns: DEFAULT_UNIT_NS,
            vectors: vec![1.0],
            seed,
            gamma: DEFAULT_GAMMA,
            mean: Estimator::Raw,
            std: StdEstimator::Counters,
            requirement: p.requirement,
            count_bits: DEFAULT_COUNT_BITS,
            spill: None,
            placement: Placement::default(),
            coding: Coding::default(),
        };
        c.validate()?;
        Ok(c)
    }

    /// The paper's `level` at `memory_bytes`.
    pub fn for_level(level: Level, memory_bytes: u64, seed: u64) -> Result<Config, MethodError> {
        let req = Requirement::paper(level, memory_bytes as f64 * 8.0);
        Config::from_plan(&plan::solve(&req)?, seed)
    }

    /// The defaults: medium at 10 MiB.
    pub fn paper_default(seed: u64) -> Config {
        Config::for_level(Level::Medium, DEFAULT_MEMORY_BYTES, seed)
            .expect("the default requirement is feasible")
    }

    /// Set the four parameters outright (the plan's requirement is kept as provenance).
    pub fn with_parameters(
        mut self,
        n: u32,
        m: u32,
        b: u8,
        threshold: u64,
    ) -> Result<Config, MethodError> {
        self.n = n;
        self.m = m;
        self.b = b;
        self.threshold = threshold;
        self.validate()?;
        Ok(self)
    }

    pub fn with_unit(mut self, unit_ns: u64) -> Result<Config, MethodError> {
        self.unit_ns = unit_ns;
        self.validate()?;
        Ok(self)
    }

    pub fn with_vectors(mut self, p: Vec<f64>) -> Result<Config, MethodError> {
        self.vectors = p;
        self.validate()?;
        Ok(self)
    }

    /// The mean's estimator (the paper's, or owl's raw variant).
    pub fn with_mean(mut self, mean: Estimator) -> Config {
        self.mean = mean;
        self
    }

    /// Packet counters of `bits` bits in RAM, and a spill of at most `entries`.
    pub fn with_ram(mut self, count_bits: u8, spill: u32) -> Result<Config, MethodError> {
        self.count_bits = count_bits;
        self.spill = Some(spill);
        self.validate()?;
        Ok(self)
    }

    /// The std's estimator (owl's counters' spread, or the paper's Theorem 4).
    pub fn with_std(mut self, std: StdEstimator) -> Config {
        self.std = std;
        self
    }

    pub fn with_gamma(mut self, gamma: u32) -> Result<Config, MethodError> {
        self.gamma = gamma;
        self.validate()?;
        Ok(self)
    }

    pub fn validate(&self) -> Result<(), MethodError> {
        if self.m < 2 || !self.m.is_multiple_of(2) {
            return Err(invalid(format!(
                "m = {} must be even and at least 2 (§4.2.2 pairs the m counters)",
                self.m
            )));
        }
        if self.n <= 2 * self.m || self.n > MAX_COUNTERS {
            return Err(invalid(format!(
                "n = {} counters must be above 2m = {} and at most {MAX_COUNTERS}",
                self.n,
                2 * self.m
            )));
        }
        if !(1..=63).contains(&self.b) {
            return Err(invalid(format!("b = {} bits must be 1..=63", self.b)));
        }
        if self.threshold == 0 {
            return Err(invalid("the threshold T must be at least 1".into()));
        }
        if self.unit_ns == 0 {
            return Err(invalid("the timestamp unit must be at least 1 ns".into()));
        }
        if self.vectors.is_empty() || self.vectors.len() > MAX_VECTORS {
            return Err(invalid(format!(
                "between 1 and {MAX_VECTORS} sampling vectors, got {}",
                self.vectors.len()
            )));
        }
        if self.vectors.iter().any(|p| !(*p > 0.0 && *p <= 1.0)) {
            return Err(invalid(format!(
                "sampling probabilities {:?} must be in (0, 1]",
                self.vectors
            )));
        }
        let s: f64 = self.vectors.iter().sum();
        if (s - 1.0).abs() > 1e-9 {
            return Err(invalid(format!(
                "sampling probabilities sum to {s}: §1.4 wants them to sum to 1"
            )));
        }
        if !(1..=32).contains(&self.count_bits) {
            return Err(invalid(format!(
                "count_bits = {} must be 1..=32",
                self.count_bits
            )));
        }
        if self.spill.is_some_and(|s| s > self.n) {
            return Err(invalid(format!(
                "spill = {} entries is more than the n = {} counters",
                self.spill.unwrap_or(0),
                self.n
            )));
        }
        if self.gamma == 0 || self.gamma > 10_000_000 {
            return Err(invalid(format!(
                "gamma = {} virtual repetitions must be 1..=10000000",
                self.gamma
            )));
        }
        Ok(())
    }

    pub fn n(&self) -> u32 {
        self.n
    }
    pub fn m(&self) -> u32 {
        self.m
    }
    pub fn b(&self) -> u8 {
        self.b
    }
    pub fn threshold(&self) -> u64 {
        self.threshold
    }
    pub fn unit_ns(&self) -> u64 {
        self.unit_ns
    }
    pub fn vectors(&self) -> &[f64] {
        &self.vectors
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn gamma(&self) -> u32 {
        self.gamma
    }
    pub fn mean(&self) -> Estimator {
        self.mean
    }
    pub fn std(&self) -> StdEstimator {
        self.std
    }
    pub fn requirement(&self) -> &Requirement {
        &self.requirement
    }
    /// How a flow's counters are chosen.
    pub fn placement(&self) -> Placement {
        self.placement
    }
    /// With flows' counters chosen as `p` ([`Placement::Blocked`]: in one block, for fast
    /// queries).
    pub fn with_placement(mut self, p: Placement) -> Config {
        self.placement = p;
        self
    }
    /// How epochs store their counters.
    pub fn coding(&self) -> Coding {
        self.coding
    }
    /// With epochs storing their counters as `c` ([`Coding::Fixed`]: §1.4's cells).
    pub fn with_coding(mut self, c: Coding) -> Config {
        self.coding = c;
        self
    }
    /// Width of the packet counters in RAM.
    pub fn count_bits(&self) -> u8 {
        self.count_bits
    }
    /// Width of the timestamp counters in RAM: the plan's `b`, widened to fill a 32-bit cell
    /// beside the packet counter where they are narrower. The extra bits are §3.1's DRAM
    /// high part ("the more significant bits as a counter in DRAM") kept for every counter:
    /// at 484 kpps in µs a single packet late in an epoch is near `2^19`, so with `b` = 19 bits
    /// alone a counter's second late packet overflows and the spill fills in a fraction of
    /// the epoch. Epochs still store `b` bits (and escape what does not fit).
    pub fn ram_b(&self) -> u8 {
        if (self.b as u32 + self.count_bits as u32) < 32 {
            32 - self.count_bits
        } else {
            self.b
        }
    }
    /// Most counters whose high parts the spill holds ([`super::cells`]).
    pub fn spill(&self) -> u32 {
        self.spill.unwrap_or(self.n / SPILL_PER_COUNTERS)
    }
    /// RAM of the timestamp counters as the paper counts it, `n·b` bits, in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory().timestamp_bits.div_ceil(8)
    }
    /// The RAM the vectors take once allocated: the paper's `M` (`n·b`), the packet counters
    /// beside it (`n·c`), the cells as allocated and the spill at its bound — per vector,
    /// times the vectors.
    pub fn memory(&self) -> Memory {
        let (n, k) = (self.n as u64, self.vectors.len() as u64);
        let w = self.ram_b() as u32 + self.count_bits as u32;
        Memory {
            timestamp_bits: n * self.b as u64 * k,
            high_bits: n * (self.ram_b() - self.b) as u64 * k,
            count_bits: n * self.count_bits as u64 * k,
            spill_bytes: Spill::bytes_for(self.spill() as usize) * k,
            cell_bytes: Cells::allocated(self.n as usize, w) as u64 * k,
        }
    }

    /// Name the first field the two points must agree on that differs (module doc).
    pub fn check_pair(s: &Config, r: &Config) -> Result<(), MethodError> {
        let mism = |field: &str, a: String, b: String| {
            Err(MethodError::ConfigMismatch {
                field: field.into(),
                sender: a,
                receiver: b,
            })
        };
        if s.m != r.m {
            return mism("m", s.m.to_string(), r.m.to_string());
        }
        if s.seed != r.seed {
            return mism("seed", s.seed.to_string(), r.seed.to_string());
        }
        if s.vectors != r.vectors {
            return mism("vectors", fmt_list(&s.vectors), fmt_list(&r.vectors));
        }
        if s.placement != r.placement {
            return mism(
                "placement",
                s.placement.config_name().into(),
                r.placement.config_name().into(),
            );
        }
        Ok(())
    }

    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let q = &self.requirement;
        vec![
            ("n", self.n.to_string()),
            ("m", self.m.to_string()),
            ("b", self.b.to_string()),
            ("threshold", self.threshold.to_string()),
            ("unit_ns", self.unit_ns.to_string()),
            ("vectors", fmt_list(&self.vectors)),
            ("seed", self.seed.to_string()),
            ("gamma", self.gamma.to_string()),
            ("mean", self.mean.to_string()),
            ("std", self.std.to_string()),
            ("alpha", q.alpha.to_string()),
            ("beta", q.beta.to_string()),
            ("memory", ((q.memory_bits / 8.0).round() as u64).to_string()),
            ("t_min", q.t_min.to_string()),
            ("t_max", q.t_max.to_string()),
            ("ratio", q.ratio.to_string()),
            ("form", q.form.to_string()),
            ("count_bits", self.count_bits.to_string()),
            ("spill", self.spill().to_string()),
            ("placement", self.placement.config_name().to_string()),
            ("coding", self.coding.config_name().to_string()),
        ]
    }

    /// Rebuild from `(field, value)` pairs over the defaults: requirement fields re-solve the
    /// plan, parameter fields then override it; an unknown field is an error naming it.
    pub fn from_pairs(pairs: &[(String, String)], seed: u64) -> Result<Config, MethodError> {
        let v = |k: &str, s: &str| -> Result<f64, MethodError> { config_value("colate", k, s) };
        let mut req = Requirement::paper(Level::Medium, DEFAULT_MEMORY_BYTES as f64 * 8.0);
        let (mut n, mut m, mut b, mut t) = (None, None, None, None);
        let (mut unit, mut vectors, mut gamma, mut seed) = (None, None, None, seed);
        let mut mean = Estimator::Raw;
        let mut std = StdEstimator::Counters;
        let (mut count_bits, mut spill) = (DEFAULT_COUNT_BITS, None);
        let mut placement = Placement::default();
        let mut coding = Coding::default();
        for (k, s) in pairs {
            match k.as_str() {
                "alpha" => req.alpha = v(k, s)?,
                "beta" => req.beta = v(k, s)?,
                "memory" => {
                    let bytes = crate::units::parse_bytes(s)
                        .map_err(|_| invalid(format!("memory '{s}' is not a size (e.g. 10MiB)")))?;
                    req.memory_bits = bytes as f64 * 8.0
                }
                "t_min" => req.t_min = v(k, s)?,
                "t_max" => req.t_max = v(k, s)?,
                "ratio" => req.ratio = v(k, s)?,
                "form" => req.form = s.trim().parse::<Form>()?,
                "n" => n = Some(config_value::<u32>("colate", k, s)?),
                "m" => m = Some(config_value::<u32>("colate", k, s)?),
                "b" => b = Some(config_value::<u8>("colate", k, s)?),
                "threshold" => t = Some(config_value::<u64>("colate", k, s)?),
                "unit_ns" => unit = Some(config_value::<u64>("colate", k, s)?),
                "gamma" => gamma = Some(config_value::<u32>("colate", k, s)?),
                "mean" => mean = s.parse()?,
                "std" => std = s.parse()?,
                "seed" => seed = config_value("colate", k, s)?,
                "count_bits" => count_bits = config_value::<u8>("colate", k, s)?,
                "spill" => spill = Some(config_value::<u32>("colate", k, s)?),
                "placement" => placement = s.parse()?,
                "coding" => coding = s.parse()?,
                "vectors" => {
                    vectors = Some(
                        s.split(['/', ' '])
                            .filter(|x| !x.trim().is_empty())
                            .map(|x| v(k, x))
                            .collect::<Result<Vec<f64>, _>>()?,
                    )
                }
                _ => return Err(unknown_field("colate", k, FIELDS)),
            }
        }
        // the plan, unless every parameter is given (then it is provenance only)
        let given = (n, m, b, t);
        let (n, m, b, t) = match given {
            (Some(n), Some(m), Some(b), Some(t)) => (n, m, b, t),
            _ => {
                let p = plan::solve(&req)?;
                let n_plan = u32::try_from(p.n)
                    .map_err(|_| invalid(format!("the plan asks for {} counters", p.n)))?;
                let b = b.unwrap_or(p.b.min(63) as u8);
                (
                    n.unwrap_or(n_plan),
                    m.unwrap_or(p.m),
                    b,
                    t.unwrap_or(p.threshold),
                )
            }
        };
        let mut c = Config {
            n,
            m,
            b,
            threshold: t,
            unit_ns: DEFAULT_UNIT_NS,
            vectors: vec![1.0],
            seed,
            gamma: DEFAULT_GAMMA,
            mean,
            std,
            requirement: req,
            count_bits,
            spill,
            placement,
            coding,
        };
        c.unit_ns = unit.unwrap_or(c.unit_ns);
        c.gamma = gamma.unwrap_or(c.gamma);
        // the default bound, spelled out (as `pairs` writes it), stays the default
        if c.spill == Some(c.n / SPILL_PER_COUNTERS) {
            c.spill = None;
        }
        if let Some(vs) = vectors {
            c.vectors = vs;
        }
        c.validate()?;
        Ok(c)
    }
}

/// Probabilities as `0.5/0.25/0.25` (no comma: `--method-config` values may hold commas, but
/// a slash reads as a list everywhere).
fn fmt_list(v: &[f64]) -> String {
    v.iter().map(f64::to_string).collect::<Vec<_>>().join("/")
}

/// The RAM budget in bits of `bytes`, and in MiB for reports.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 * 8.0 / MIB_BITS
}
