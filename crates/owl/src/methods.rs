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
#[allow(dead_code)] // read by the synopsis methods as they land
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

/// Build a synopsis method by name for `owl compare` (`exact` is not built here: compare's
/// exact row is the ground-truth matcher itself).
pub fn build(name: &str, opts: &Options) -> Result<Box<dyn Method>> {
    let _ = opts;
    bail!("method '{name}' has no synopsis")
}

/// Build a method for `owl record`, where `exact` is a synopsis like any other (every identity
/// and timestamp, 16 bytes a packet).
pub fn build_for_record(name: &str, opts: &Options) -> Result<Box<dyn Method>> {
    if name == EXACT {
        return Ok(Box::new(owl_core::exact::method::ExactMethod));
    }
    build(name, opts)
}

/// Rebuild a method from the configuration stored in a synopsis file (`owl estimate`).
pub fn from_config(name: &str, pairs: &[(String, String)]) -> Result<Box<dyn Method>> {
    match name {
        EXACT => {
            if let Some((k, _)) = pairs.first() {
                bail!("the exact method has no configuration, but the file sets '{k}'");
            }
            Ok(Box::new(owl_core::exact::method::ExactMethod))
        }
        other => bail!(
            "the file was recorded with method '{other}', which this owl does not know; available: {}",
            ALL.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The `--methods` help line.
pub fn help() -> String {
    let mut s = String::from("Methods (comma list, or `all`):\n");
    for e in ALL {
        s.push_str(&format!("  {:<10} {}\n", e.name, e.summary));
    }
    s
}
