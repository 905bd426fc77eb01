//! LDS — the Lossy Difference Sketch (Sanjuàs-Cuxart, Duffield, Barlet-Ros, Kompella, IMC'11):
//! per-flow mean delay between two points without per-flow state and without relying on
//! packets close in time having similar delays.
//!
//! Both points keep the same `R × C` matrix of cells `⟨s, n, d⟩` (timestamp sum, packet count,
//! digest) and update it identically (§2.3.4, Fig. 5): a packet `x` of flow `f` hits, in every
//! row `r`, the cell `(h_r(f) + h'_r(x)) mod C` — the flow hash picks a base column, the packet
//! hash an offset in `[0, k)`, so a flow's packets spread over a *virtual LDA* of `k`
//! consecutive cells (Fig. 4) — and adds its timestamp to `s`, 1 to `n`, and XORs its digest
//! into `d`. The sender ships its matrix; the receiver subtracts (§2.3.1). A cell whose `n` or
//! `d` differ between the points lost or swapped packets and is unusable (§2.3.2); among a
//! flow's usable cells, the one with the fewest packets has the least interference from
//! colliding flows, and every cell with at most `(1 + α)` times as many joins the estimate
//! (Fig. 6).
//!
//! Modules: [`config`] (what both points agree on), [`weights`] (operator flow weights, §4.1),
//! [`sketch`] (the per-point matrix and its update), [`estimate`] (Fig. 6 and the aggregate),
//! [`mining`] (counts, loss, heavy hitters, rough variance, §4.3), [`sizing`] (§3).
//!
//! Variants: [`Config::single_bank`] is §5.1's evaluation setup (`k = 1`, every packet, the
//! SDS layout with timestamp sums); [`Config::multi_bank`] is §5.2's (`k = 5`, one sampling
//! rate per row, §4.2). Weight rules (§4.1) combine with either.

pub mod config;
pub mod estimate;
pub mod mining;
pub mod sizing;
pub mod sketch;
pub mod weights;

use std::sync::Arc;

use crate::method::{BuildOptions, MethodInfo, columns_for_memory};

pub use config::{Config, Selection};
pub use estimate::{FlowDelay, FlowQuery, aggregate};
pub use mining::heavy_hitters;
pub use sketch::{Cell, Layout, Synopsis};
pub use weights::Weights;

use crate::method::{Estimate, FlowEstimate, Method, MethodConfig, MethodError};
use crate::record::FlowKey;
use crate::wire::DecodeError;

/// The LDS as an [`owl_core::method::Method`](crate::method::Method).
#[derive(Debug)]
pub struct LdsMethod {
    name: String,
    layout: Arc<Layout>,
}

impl LdsMethod {
    /// An LDS method named `name` (`lds`, `lds-mb`, …) with a validated configuration.
    pub fn new(name: &str, cfg: Config) -> Result<LdsMethod, MethodError> {
        cfg.validate()?;
        Ok(LdsMethod {
            name: name.to_string(),
            layout: Layout::new(cfg),
        })
    }

    pub fn config(&self) -> &Config {
        &self.layout.cfg
    }

    pub fn layout(&self) -> &Arc<Layout> {
        &self.layout
    }

    /// A fresh sketch of this configuration.
    pub fn sketch(&self) -> Synopsis {
        Synopsis::new(self.layout.clone())
    }
}

impl MethodConfig for Config {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        Config::pairs(self)
    }
}

impl crate::method::TypedMethod for LdsMethod {
    type Config = Config;
    type Sender = Synopsis;
    type Receiver = Synopsis;
    fn name(&self) -> &str {
        &self.name
    }
    fn config(&self) -> &Config {
        &self.layout.cfg
    }
    fn foreign(&self) -> crate::method::Foreign {
        crate::method::Foreign::Detects(
            "a cell is usable when its count and the XOR of its packets' 32-bit digests agree (§2.3.2)",
        )
    }

    fn new_sender(&self) -> Synopsis {
        self.sketch()
    }
    fn new_receiver(&self) -> Synopsis {
        self.sketch()
    }

    fn decode_sender(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        Synopsis::decode(self.layout.clone(), bytes)
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        Synopsis::decode(self.layout.clone(), bytes)
    }

    fn estimate(&self, s: Synopsis, r: Synopsis) -> Result<Estimate, MethodError> {
        aggregate(&s, &r)
    }

    fn estimate_flows(
        &self,
        sender: &Synopsis,
        receiver: &Synopsis,
        flows: &[FlowKey],
    ) -> Option<Result<Vec<FlowEstimate>, MethodError>> {
        let run = || -> Result<Vec<FlowEstimate>, MethodError> {
            let mut q = FlowQuery::new(sender, receiver)?;
            Ok(flows.iter().map(|f| q.flow(f)).collect())
        };
        Some(run())
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// The default configuration of an LDS method (its `--method-config` base).
fn lds_default(name: &str, columns: Option<usize>, seed: u64) -> Config {
    match name {
        "lds" => Config::single_bank(4, columns.unwrap_or(17_500), seed),
        _ => {
            let mut c = Config::multi_bank(columns.unwrap_or(87_500), seed);
            if name == "lds-mb-dense" {
                c.selection = Selection::Densest;
            }
            c
        }
    }
}

fn lds_build(name: &'static str, o: &BuildOptions) -> Result<Box<dyn Method>, MethodError> {
    let columns = match (name, o.memory) {
        (_, None) => None,
        ("lds", m) => Some(columns_for_memory(m, 4, config::CELL_BYTES as u64, 17_500)?),
        (_, Some(m)) => Some(Config::columns_for_memory(m, 4, 5)?),
    };
    Ok(Box::new(LdsMethod::new(
        name,
        lds_default(name, columns, o.seed),
    )?))
}

fn lds_from_config(
    name: &'static str,
    pairs: &[(String, String)],
) -> Result<Box<dyn Method>, MethodError> {
    Ok(Box::new(LdsMethod::new(
        name,
        Config::from_pairs_over(lds_default(name, None, 1), pairs)?,
    )?))
}

/// `lds`: 4 rows of `memory / (4 × 16 B)` cells.
pub const SINGLE_BANK: MethodInfo = MethodInfo {
    name: "lds",
    summary: "Lossy Difference Sketch (LDS §5.1): per-flow delay, 4 rows x 17 500 cells, k = 1, 1.1 MB",
    samples: "packets in the usable cells of the row the estimate comes from",
    per_flow: true,
    crosses: "each point's sketch (16 B a cell), one way; no round trip",
    per_packet: false,
    recovers_delays: false,
    build: |o| lds_build("lds", o),
    from_config: |p| lds_from_config("lds", p),
};

/// `lds-mb`: multi-bank, as written; at least 5 columns within `--memory`.
pub const MULTI_BANK: MethodInfo = MethodInfo {
    name: "lds-mb",
    summary: "multi-bank LDS (LDS §5.2): k = 5, row sampling 0.01/0.1/0.5/1, 4 x 87 500 cells, loss-tolerant",
    samples: "packets in the usable cells of the row the estimate comes from",
    per_flow: true,
    crosses: "each point's sketch (16 B a cell), one way; no round trip",
    per_packet: false,
    recovers_delays: false,
    build: |o| lds_build("lds-mb", o),
    from_config: |p| lds_from_config("lds-mb", p),
};

/// `lds-mb-dense`: multi-bank, estimating from the densest surviving bank.
pub const MULTI_BANK_DENSE: MethodInfo = MethodInfo {
    name: "lds-mb-dense",
    summary: "multi-bank LDS estimating from the densest surviving bank (owl's variant of §4.2)",
    samples: "packets in the usable cells of the row the estimate comes from",
    per_flow: true,
    crosses: "each point's sketch (16 B a cell), one way; no round trip",
    per_packet: false,
    recovers_delays: false,
    build: |o| lds_build("lds-mb-dense", o),
    from_config: |p| lds_from_config("lds-mb-dense", p),
};
