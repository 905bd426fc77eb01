//! The methods `owl compare` can run, by name.
//!
//! `exact` is the store-everything matcher that also provides the ground truth; every other
//! name maps to an [`owl_core::method::Method`]. A method that is not finished is not listed.
//!
//! # `--memory`
//!
//! `memory` is the byte budget of what crosses the network per interval; each method sizes
//! itself to it as its entry says. Without it, each method takes its paper's reference size.
//! - `lds`, `lds-mb`, `lds-mb-dense`: 4 rows of `memory / (4 × 16 B)` cells (the multi-bank
//!   ones need at least 5).
//! - `countmin`: 4 rows of `memory / (4 × 20 B)` counters.
//! - `sds`: the receiver's sketch, 4 rows of `memory / (4 × 12 B)` cells (what crosses the
//!   network is the in-band timestamp of every packet, whatever the budget).
//! - `rli`, `mpe`, `mpe1`: not sizeable by memory — their cost follows their probe or sampling
//!   rate (the estimate reports the bytes).

use anyhow::{Result, bail};
use owl_core::method::Method;
use owl_core::{countmin, lds, mpe, rli, sds};

/// Name of the exact per-packet method (the ground truth itself).
pub const EXACT: &str = "exact";

/// A method the command line knows.
pub struct Entry {
    pub name: &'static str,
    pub summary: &'static str,
}

/// Every method, in the order reports list them.
pub const ALL: &[Entry] = &[
    Entry {
        name: EXACT,
        summary: "store every (identity, timestamp) and match them: the ground truth, 16 B a packet",
    },
    Entry {
        name: "lds",
        summary: "Lossy Difference Sketch (LDS §5.1): per-flow delay, 4 rows x 17 500 cells, k = 1, 1.1 MB",
    },
    Entry {
        name: "lds-mb",
        summary: "multi-bank LDS (LDS §5.2): k = 5, row sampling 0.01/0.1/0.5/1, 4 x 87 500 cells, loss-tolerant",
    },
    Entry {
        name: "lds-mb-dense",
        summary: "multi-bank LDS estimating from the densest surviving bank (owl's variant of §4.2)",
    },
    Entry {
        name: "sds",
        summary: "Simple Delay Sketch (LDS §2.2): NEEDS sender timestamps in packets (emulated), per-flow",
    },
    Entry {
        name: "rli",
        summary: "Reference Latency Interpolation: references 1:300-1:10 by load, interpolated, per-flow",
    },
    Entry {
        name: "mpe",
        summary: "NetFlow multi-point estimator, 10% coordinated packet sampling, per-flow",
    },
    Entry {
        name: "mpe1",
        summary: "NetFlow multi-point estimator, 1% coordinated packet sampling, per-flow",
    },
    Entry {
        name: "countmin",
        summary: "Count-Min of timestamp sums (COLATE §6.5's strawman), 4 x 17 500 counters, per-flow",
    },
];

/// Knobs every method is built from.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Seed of the methods' hash family (both points must agree).
    pub seed: u64,
    /// Synopsis budget in bytes for every method, if given.
    pub memory: Option<u64>,
}

/// Parse `--methods`: a comma list of names, or `all`.
pub fn parse_list(s: &str) -> Result<Vec<&'static str>> {
    let mut out: Vec<&'static str> = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if name == "all" {
            for e in ALL {
                if !out.contains(&e.name) {
                    out.push(e.name);
                }
            }
            continue;
        }
        match ALL.iter().find(|e| e.name == name) {
            Some(e) if !out.contains(&e.name) => out.push(e.name),
            Some(_) => {}
            None => bail!(
                "unknown method '{name}'; available: {}",
                ALL.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    if out.is_empty() {
        bail!("--methods lists no method");
    }
    Ok(out)
}

/// Columns per row for a budget, or the default.
fn per_row(memory: Option<u64>, rows: u64, cell: u64, default: usize) -> Result<usize> {
    match memory {
        None => Ok(default),
        Some(m) => {
            let c = m / (rows * cell);
            if c == 0 {
                bail!(
                    "--memory {m} bytes is below one column of {rows} rows × {cell} B ({} bytes)",
                    rows * cell
                );
            }
            Ok(c.min(1 << 26) as usize)
        }
    }
}

/// Build a synopsis method by name (`exact` is not one: the caller runs the matcher).
pub fn build(name: &str, opts: &Options) -> Result<Box<dyn Method>> {
    let seed = opts.seed;
    Ok(match name {
        "lds" => {
            let c = per_row(opts.memory, 4, lds::config::CELL_BYTES as u64, 17_500)?;
            Box::new(lds::LdsMethod::new(
                "lds",
                lds::Config::single_bank(4, c, seed),
            )?)
        }
        "lds-mb" | "lds-mb-dense" => {
            let c = match opts.memory {
                None => 87_500,
                Some(m) => lds::Config::columns_for_memory(m, 4, 5)?,
            };
            let mut cfg = lds::Config::multi_bank(c, seed);
            if name == "lds-mb-dense" {
                cfg.selection = lds::Selection::Densest;
            }
            Box::new(lds::LdsMethod::new(name, cfg)?)
        }
        "sds" => {
            let c = per_row(opts.memory, 4, sds::CELL_BYTES as u64, 17_500)?;
            Box::new(sds::SdsMethod::new(sds::Config {
                rows: 4,
                columns: c,
                seed,
            })?)
        }
        "rli" => Box::new(rli::RliMethod::new(rli::Config::paper(seed))?),
        "mpe" | "mpe1" => Box::new(mpe::MpeMethod::new(
            name,
            mpe::Config {
                rate: if name == "mpe" { 0.1 } else { 0.01 },
                seed,
            },
        )?),
        "countmin" => {
            let w = per_row(opts.memory, 4, countmin::CELL_BYTES as u64, 17_500)?;
            Box::new(countmin::CountMinMethod::new(countmin::Config {
                rows: 4,
                width: w,
                seed,
            })?)
        }
        _ => bail!("method '{name}' has no synopsis"),
    })
}

/// Rebuild a method from the configuration pairs its synopses carry (for `owl estimate`).
#[cfg_attr(not(test), allow(dead_code))]
pub fn from_config(name: &str, pairs: &[(String, String)]) -> Result<Box<dyn Method>> {
    Ok(match name {
        "lds" | "lds-mb" | "lds-mb-dense" => {
            Box::new(lds::LdsMethod::new(name, lds::Config::from_pairs(pairs)?)?)
        }
        "sds" => Box::new(sds::SdsMethod::new(sds::Config::from_pairs(pairs)?)?),
        "rli" => Box::new(rli::RliMethod::new(rli::Config::from_pairs(pairs)?)?),
        "mpe" | "mpe1" => Box::new(mpe::MpeMethod::new(name, mpe::Config::from_pairs(pairs)?)?),
        "countmin" => Box::new(countmin::CountMinMethod::new(
            countmin::Config::from_pairs(pairs)?,
        )?),
        _ => bail!("method '{name}' has no synopsis"),
    })
}

/// The `--methods` help line.
pub fn help() -> String {
    let mut s = String::from("Methods (comma list, or `all`):\n");
    for e in ALL {
        s.push_str(&format!("  {:<10} {}\n", e.name, e.summary));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_method_builds_and_rebuilds_from_its_config() {
        for e in ALL.iter().filter(|e| e.name != EXACT) {
            for memory in [None, Some(64 * 1024)] {
                let m = build(e.name, &Options { seed: 7, memory }).unwrap();
                assert_eq!(m.name(), e.name);
                let pairs: Vec<(String, String)> = m
                    .config()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                let again = from_config(e.name, &pairs).unwrap();
                assert_eq!(again.config(), m.config());
            }
        }
        assert!(
            build(
                "lds-mb",
                &Options {
                    seed: 1,
                    memory: Some(100)
                }
            )
            .is_err()
        );
        assert!(
            build(
                "lds",
                &Options {
                    seed: 1,
                    memory: Some(10)
                }
            )
            .is_err()
        );
    }
}
