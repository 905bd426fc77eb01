//! The methods `owl compare` can run, by name.
//!
//! `exact` is the store-everything matcher that also provides the ground truth; every other
//! name maps to an [`owl_core::method::Method`]. A method that is not finished is not listed.

use anyhow::{Result, bail};
use owl_core::method::Method;

/// Name of the exact per-packet method (the ground truth itself).
pub const EXACT: &str = "exact";

/// A method the command line knows.
pub struct Entry {
    pub name: &'static str,
    pub summary: &'static str,
}

/// Every method, in the order reports list them.
pub const ALL: &[Entry] = &[Entry {
    name: EXACT,
    summary: "store every (identity, timestamp) and match them: the ground truth, 16 B a packet",
}];

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

/// Build a synopsis method by name (`exact` is not one: the caller runs the matcher).
pub fn build(name: &str, _opts: &Options) -> Result<Box<dyn Method>> {
    bail!("method '{name}' has no synopsis")
}

/// The `--methods` help line.
pub fn help() -> String {
    let mut s = String::from("Methods (comma list, or `all`):\n");
    for e in ALL {
        s.push_str(&format!("  {:<10} {}\n", e.name, e.summary));
    }
    s
}
