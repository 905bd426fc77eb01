//! The methods `owl compare` can run, by name.
//!
//! `exact` is the store-everything matcher that also provides the ground truth; every other
//! name maps to an [`owl_core::method::Method`]. A method that is not finished is not listed.
//!
//! Not listed on purpose: the "ideal" FineComb of RDA §VII, which repairs with the ground truth
//! and cannot exist in a deployment; the `rda-set-difference` experiment runs it directly
//! (`owl_core::finecomb::estimate_ideal`).

use anyhow::{Result, bail};
use owl_core::method::Method;
use owl_core::{finecomb, rda};

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
        name: "rda",
        summary: "RDA, late binding (§VIII): 3 banks of d̂ buckets from a strata estimate, decode \
                  lost and reordered packets, repair, exact mean; --memory caps the RDA",
    },
    Entry {
        name: "rda-fixed",
        summary: "RDA of fixed size (§V/§VII): 3 banks × 1666 buckets (120 kB), or --memory / 72 B",
    },
    Entry {
        name: "finecomb",
        summary: "FineComb (RDA §III-C): 5000 buckets with parity, receiver stash repairs \
                  reordered packets, lost ones spoil their bucket; --memory / 24 B buckets",
    },
];

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

/// Build a synopsis method by name (`exact` is not one: the caller runs the matcher).
///
/// `--memory` sizing: `rda-fixed` gets `m = ⌊B / 72⌋` buckets per bank (3 banks × 24 B); `rda`
/// (late binding) takes the budget as a cap on what crosses per interval — the receiver's
/// strata sketch (20 736 B) first, then at most `⌊(B − 20 736) / 72⌋` buckets per bank, the
/// floor of 683 lowered to that cap if needed; a quiet interval uses less. `finecomb` gets
/// `⌊B / 24⌋` buckets and a stash of as many packets.
pub fn build(name: &str, opts: &Options) -> Result<Box<dyn Method>> {
    match name {
        "rda" | "rda-fixed" => {
            let mut cfg = if name == "rda" {
                rda::Config::default()
            } else {
                rda::Config::fixed(1666)
            };
            cfg.seed = opts.seed;
            if let Some(b) = opts.memory {
                cfg = cfg.with_memory(b)?;
            }
            let n = if name == "rda" { "rda" } else { "rda-fixed" };
            Ok(Box::new(rda::RdaMethod::new(n, cfg)?))
        }
        "finecomb" => {
            let mut cfg = finecomb::Config {
                seed: opts.seed,
                ..Default::default()
            };
            if let Some(b) = opts.memory {
                cfg = cfg.with_memory(b)?;
            }
            Ok(Box::new(finecomb::FineCombMethod::new(cfg)?))
        }
        _ => bail!("method '{name}' has no synopsis"),
    }
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
        "rda" | "rda-fixed" => {
            let cfg = rda::Config::from_pairs(pairs)?;
            let n = rda::RdaMethod::name_of(&cfg);
            if n != name {
                bail!("a synopsis file of method '{name}' carries the configuration of '{n}'");
            }
            Ok(Box::new(rda::RdaMethod::new(n, cfg)?))
        }
        "finecomb" => Ok(Box::new(finecomb::FineCombMethod::new(
            finecomb::Config::from_pairs(pairs)?,
        )?)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_synopsis_method_rebuilds_from_its_configuration() {
        let opts = Options {
            seed: 7,
            memory: Some(200_000),
        };
        for e in ALL.iter().filter(|e| e.name != EXACT) {
            let m = build(e.name, &opts).unwrap();
            assert_eq!(m.name(), e.name);
            let pairs: Vec<(String, String)> = m
                .config()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            let back = from_config(e.name, &pairs).unwrap();
            assert_eq!(back.config(), m.config(), "{}", e.name);
        }
        let rda_pairs: Vec<(String, String)> = build("rda", &opts)
            .unwrap()
            .config()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert!(from_config("rda-fixed", &rda_pairs).is_err());
        assert!(from_config("finecomb", &rda_pairs).is_err());
        assert!(
            build(
                "rda-fixed",
                &Options {
                    seed: 1,
                    memory: Some(10)
                }
            )
            .is_err()
        );
    }
}
