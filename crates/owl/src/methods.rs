//! The methods `owl compare` can run, by name.
//!
//! `exact` is the store-everything matcher that also provides the ground truth; every other
//! name maps to an [`owl_core::method::Method`]. A method that is not finished is not listed.
//!
//! # `--memory` for the per-flow methods
//!
//! - `lds`, `lds-mb`, `lds-mb-dense`: 4 rows of `memory / (4 × 16 B)` cells (the multi-bank
//!   ones need at least 5).
//! - `countmin`: 4 rows of `memory / (4 × 20 B)` counters.
//! - `sds`: the receiver's sketch, 4 rows of `memory / (4 × 12 B)` cells (what crosses the
//!   network is the in-band timestamp of every packet, whatever the budget).
//! - `rli`, `mpe`, `mpe1`: not sizeable by memory — their cost follows their probe or sampling
//!   rate (the estimate reports the bytes).
//!
//! Not listed on purpose: the "ideal" FineComb of RDA §VII, which repairs with the ground truth
//! and cannot exist in a deployment; the `rda-set-difference` experiment runs it directly
//! (`owl_core::finecomb::estimate_ideal`).

use anyhow::{Result, bail};
use owl_core::lda::{self, LdaMethod};
use owl_core::method::Method;
use owl_core::probe::{self, ProbeMethod};
use owl_core::{countmin, finecomb, lds, mpe, rda, rli, sds};

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
        name: "lda",
        summary: "Lossy Difference Aggregator (Kompella et al.): 2 banks x 512 rows tuned toward 0.5 % and 10 % loss of 5 M packets, 12 B a row (--memory sets the rows); mean, loss, std with a 95 % interval by the between-row estimator (lda:std=rows, default; lda:std=paper is eq. 5, lda:std=centred); assumes FIFO",
    },
    Entry {
        name: "probe",
        summary: "Poisson active probing at 144 Hz (LDA paper's baseline), each probe emulated by the packet after its instant; 64 B a probe (--memory ignored)",
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

/// The default configuration of an LDS method (its `--method-config` base).
fn lds_default(name: &str, columns: Option<usize>, seed: u64) -> lds::Config {
    match name {
        "lds" => lds::Config::single_bank(4, columns.unwrap_or(17_500), seed),
        _ => {
            let mut c = lds::Config::multi_bank(columns.unwrap_or(87_500), seed);
            if name == "lds-mb-dense" {
                c.selection = lds::Selection::Densest;
            }
            c
        }
    }
}

/// The default configuration of an MPE method.
fn mpe_default(name: &str, seed: u64) -> mpe::Config {
    mpe::Config {
        rate: if name == "mpe1" { 0.01 } else { 0.1 },
        seed,
    }
}

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

/// Build a synopsis method by name for `owl compare` (`exact` is not built here: compare's
/// exact row is the ground-truth matcher itself).
///
/// - `lda`: the paper's recommended two banks tuned toward loss rates 0.005 and 0.1 for 5 M
///   packets per interval (§IV-B); `--memory B` gives each bank `⌊(B − 10)/24⌋` rows (even),
///   12 bytes a row, and retunes the sampling for that many rows.
/// - `probe`: 144 Hz, the paper's equal-bandwidth rate for 1 s intervals. Its bandwidth is
///   `rate × 64 B` per second, so a byte budget per interval does not size it without the
///   interval length: `--memory` leaves it alone.
/// - `rda-fixed`: 3 banks of 1 666 buckets (≈ the §VII 120 000 B); `--memory B` gives
///   `m = ⌊B / 72⌋` buckets per bank (3 banks × 24 B).
/// - `rda` (late binding): `--memory B` caps what crosses per interval — the receiver's strata
///   sketch (20 736 B) first, then at most `⌊(B − 20 736) / 72⌋` buckets per bank, the floor
///   of 683 lowered to that cap if needed; a quiet interval uses less.
/// - `finecomb`: 5 000 buckets and a stash of 5 000 packets; `--memory B` gives `⌊B / 24⌋`
///   buckets and a stash of as many packets.
pub fn build(name: &str, opts: &Options) -> Result<Box<dyn Method>> {
    match name {
        "lda" => {
            let cfg = match opts.memory {
                None => lda::Config::paper_default(opts.seed),
                Some(b) => lda::Config::for_memory(
                    b,
                    &lda::DEFAULT_TARGETS,
                    lda::PAPER_PACKETS,
                    opts.seed,
                )?,
            };
            Ok(Box::new(LdaMethod::new(cfg)))
        }
        "probe" => Ok(Box::new(ProbeMethod::new(probe::Config::new(
            probe::DEFAULT_RATE_HZ,
            opts.seed,
        )?))),
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
        "lds" => {
            let c = per_row(opts.memory, 4, lds::config::CELL_BYTES as u64, 17_500)?;
            Ok(Box::new(lds::LdsMethod::new(
                name,
                lds_default(name, Some(c), opts.seed),
            )?))
        }
        "lds-mb" | "lds-mb-dense" => {
            let c = match opts.memory {
                None => None,
                Some(m) => Some(lds::Config::columns_for_memory(m, 4, 5)?),
            };
            Ok(Box::new(lds::LdsMethod::new(
                name,
                lds_default(name, c, opts.seed),
            )?))
        }
        "sds" => {
            let c = per_row(opts.memory, 4, sds::CELL_BYTES as u64, 17_500)?;
            Ok(Box::new(sds::SdsMethod::new(sds::Config {
                rows: 4,
                columns: c,
                seed: opts.seed,
            })?))
        }
        "rli" => Ok(Box::new(rli::RliMethod::new(rli::Config::paper(
            opts.seed,
        ))?)),
        "mpe" | "mpe1" => Ok(Box::new(mpe::MpeMethod::new(
            name,
            mpe_default(name, opts.seed),
        )?)),
        "countmin" => {
            let w = per_row(opts.memory, 4, countmin::CELL_BYTES as u64, 17_500)?;
            Ok(Box::new(countmin::CountMinMethod::new(countmin::Config {
                rows: 4,
                width: w,
                seed: opts.seed,
            })?))
        }
        _ => bail!("method '{name}' has no synopsis"),
    }
}

/// `--method-config METHOD:KEY=VALUE` settings, by method.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pairs: Vec<(String, String, String)>,
}

impl Overrides {
    /// Parse every `--method-config` value: `METHOD:KEY=VALUE` (the value may hold commas).
    pub fn parse(items: &[String]) -> Result<Overrides> {
        let mut pairs = Vec::new();
        for it in items {
            let Some((m, kv)) = it.split_once(':') else {
                bail!("--method-config '{it}': expected METHOD:KEY=VALUE, e.g. lda:rows=1024");
            };
            let Some((k, v)) = kv.split_once('=') else {
                bail!("--method-config '{it}': expected METHOD:KEY=VALUE, e.g. lda:rows=1024");
            };
            let m = m.trim();
            if ALL.iter().all(|e| e.name != m) {
                bail!(
                    "--method-config '{it}': unknown method '{m}'; available: {}",
                    ALL.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
                );
            }
            pairs.push((m.to_string(), k.trim().to_string(), v.trim().to_string()));
        }
        Ok(Overrides { pairs })
    }

    /// Methods that have settings.
    pub fn methods(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.pairs.iter().map(|p| p.0.as_str()).collect();
        v.dedup();
        v
    }

    fn for_method(&self, name: &str) -> Vec<(String, String)> {
        self.pairs
            .iter()
            .filter(|p| p.0 == name)
            .map(|p| (p.1.clone(), p.2.clone()))
            .collect()
    }
}

/// Build a method from the defaults and `--memory`, or, when `--method-config` gives settings
/// for it, from exactly those settings (plus `--seed` unless they set `seed`): the method's own
/// configuration parser then fills in its defaults and refuses unknown fields by name.
pub fn build_configured(name: &str, opts: &Options, over: &Overrides) -> Result<Box<dyn Method>> {
    let mut pairs = over.for_method(name);
    if pairs.is_empty() {
        return if name == EXACT {
            Ok(Box::new(owl_core::exact::method::ExactMethod))
        } else {
            build(name, opts)
        };
    }
    if opts.memory.is_some() {
        bail!("give either --memory or --method-config for {name}, not both");
    }
    if !pairs.iter().any(|(k, _)| k == "seed") {
        pairs.push(("seed".into(), opts.seed.to_string()));
    }
    from_config(name, &pairs).map_err(|e| anyhow::anyhow!("--method-config for {name}: {e}"))
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
        "lda" => Ok(Box::new(LdaMethod::new(lda::Config::from_pairs(pairs)?))),
        "probe" => Ok(Box::new(ProbeMethod::new(probe::Config::from_pairs(
            pairs,
        )?))),
        "rda" | "rda-fixed" => {
            // the name says the sizing when the pairs (from --method-config) do not
            let mut pairs = pairs.to_vec();
            if !pairs.iter().any(|(k, _)| k == "sizing") {
                let sizing = if name == "rda" { "late" } else { "fixed" };
                pairs.push(("sizing".into(), sizing.into()));
            }
            let cfg = rda::Config::from_pairs(&pairs)?;
            let n = rda::RdaMethod::name_of(&cfg);
            if n != name {
                bail!("a synopsis file of method '{name}' carries the configuration of '{n}'");
            }
            Ok(Box::new(rda::RdaMethod::new(n, cfg)?))
        }
        "finecomb" => Ok(Box::new(finecomb::FineCombMethod::new(
            finecomb::Config::from_pairs(pairs)?,
        )?)),
        "lds" | "lds-mb" | "lds-mb-dense" => Ok(Box::new(lds::LdsMethod::new(
            name,
            lds::Config::from_pairs_over(lds_default(name, None, 1), pairs)?,
        )?)),
        "sds" => Ok(Box::new(sds::SdsMethod::new(sds::Config::from_pairs(
            pairs,
        )?)?)),
        "rli" => Ok(Box::new(rli::RliMethod::new(rli::Config::from_pairs(
            pairs,
        )?)?)),
        "mpe" | "mpe1" => Ok(Box::new(mpe::MpeMethod::new(
            name,
            mpe::Config::from_pairs_over(mpe_default(name, 1), pairs)?,
        )?)),
        "countmin" => Ok(Box::new(countmin::CountMinMethod::new(
            countmin::Config::from_pairs(pairs)?,
        )?)),
        other => bail!(
            "the file was recorded with method '{other}', which this owl does not know; available: {}",
            ALL.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The help of `--methods` (a list) or `--method` (one).
pub fn help(list: bool) -> String {
    let mut s = String::from(if list {
        "Methods to run beside the truth, a comma list or `all`:\n"
    } else {
        "Method whose synopsis to record, one of:\n"
    });
    let w = ALL.iter().map(|e| e.name.len()).max().unwrap_or(0);
    for e in ALL {
        s.push_str(&format!("  {:<w$}  {}\n", e.name, e.summary));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use owl_core::method::Role;

    #[test]
    fn every_listed_method_builds_and_rebuilds_from_its_config() {
        let opts = Options {
            seed: 5,
            memory: None,
        };
        for e in ALL.iter().filter(|e| e.name != EXACT) {
            let m = build(e.name, &opts).unwrap();
            assert_eq!(m.name(), e.name);
            let pairs: Vec<(String, String)> = m
                .config()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            let again = from_config(e.name, &pairs).unwrap();
            assert_eq!(again.config(), m.config());
            let mut b = Vec::new();
            m.new_point(Role::Sender).encode(&mut b);
            assert!(again.decode_point(Role::Sender, &b).is_ok());
        }
        assert!(from_config("lda", &[("rows".into(), "3".into())]).is_err());
        assert!(from_config("nope", &[]).is_err());
    }

    #[test]
    fn method_config_overrides_defaults() {
        let o = Overrides::parse(&[
            "lda:rows=1024".into(),
            "lda:targets=0.2".into(),
            "lda:packets=5M".into(),
        ])
        .unwrap();
        let opts = Options {
            seed: 9,
            memory: None,
        };
        let m = build_configured("lda", &opts, &o).unwrap();
        let c = m.config();
        assert!(c.contains(&("rows", "1024".to_string())), "{c:?}");
        assert!(c.contains(&("banks", "1".to_string())), "{c:?}");
        assert!(c.contains(&("seed", "9".to_string())), "{c:?}");
        assert!(Overrides::parse(&["lda rows=3".into()]).is_err());
        assert!(Overrides::parse(&["magic:rows=3".into()]).is_err());
        let bad = Overrides::parse(&["lda:colour=blue".into()]).unwrap();
        let e = build_configured("lda", &opts, &bad)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("colour"), "{e}");
        let both = Options {
            seed: 1,
            memory: Some(4096),
        };
        assert!(build_configured("lda", &both, &o).is_err());
    }

    #[test]
    fn per_flow_methods_are_sized_by_memory_and_configurable() {
        for e in ALL
            .iter()
            .filter(|e| !["exact", "lda", "probe"].contains(&e.name))
        {
            let m = build(
                e.name,
                &Options {
                    seed: 7,
                    memory: Some(64 * 1024),
                },
            )
            .unwrap();
            let pairs: Vec<(String, String)> = m
                .config()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            assert_eq!(from_config(e.name, &pairs).unwrap().config(), m.config());
        }
        let b = |name: &str, memory| build(name, &Options { seed: 1, memory });
        assert!(b("lds-mb", Some(100)).is_err());
        assert!(b("lds", Some(10)).is_err());
        let lds = b("lds", Some(64 * 1024)).unwrap();
        assert_eq!(lds.new_point(Role::Sender).encoded_len(), 64 * 1024);
        let o = Overrides::parse(&["lds:k=3".into(), "lds:alpha=0.2".into()]).unwrap();
        let opts = Options {
            seed: 9,
            memory: None,
        };
        let c = build_configured("lds", &opts, &o).unwrap().config();
        assert!(c.contains(&("k", "3".to_string())), "{c:?}");
        assert!(c.contains(&("columns", "17500".to_string())), "{c:?}");
        assert!(c.contains(&("seed", "9".to_string())), "{c:?}");
        let dense = from_config("lds-mb-dense", &[]).unwrap().config();
        assert!(dense.contains(&("selection", "densest".to_string())));
        for bad in [
            "lds:colour=blue",
            "lds:k=0",
            "mpe:rate=2",
            "rli:lower_gap=1",
        ] {
            let o = Overrides::parse(&[bad.into()]).unwrap();
            let name = bad.split(':').next().unwrap();
            assert!(build_configured(name, &opts, &o).is_err(), "{bad}");
        }
    }

    #[test]
    fn lda_is_sized_by_memory() {
        let m = build(
            "lda",
            &Options {
                seed: 1,
                memory: Some(24 * 1024 + 10),
            },
        )
        .unwrap();
        assert!(m.config().contains(&("rows", "1024".to_string())));
        assert_eq!(m.new_point(Role::Sender).encoded_len(), 24 * 1024 + 10);
        let tiny = Options {
            seed: 1,
            memory: Some(20),
        };
        let e = build("lda", &tiny).err().unwrap().to_string();
        assert!(e.contains("too small"), "{e}");
    }

    #[test]
    fn rda_and_finecomb_rebuild_from_their_configuration() {
        let opts = Options {
            seed: 7,
            memory: Some(200_000),
        };
        for name in ["rda", "rda-fixed", "finecomb"] {
            let m = build(name, &opts).unwrap();
            assert_eq!(m.name(), name);
            let pairs: Vec<(String, String)> = m
                .config()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
            let back = from_config(name, &pairs).unwrap();
            assert_eq!(back.config(), m.config(), "{name}");
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
        // --method-config: the given fields over the method's defaults
        let o = Overrides::parse(&[
            "rda-fixed:banks=2".into(),
            "rda-fixed:buckets_per_bank=2500".into(),
            "rda-fixed:std=algorithm3".into(),
            "finecomb:enumeration=whole".into(),
        ])
        .unwrap();
        let plain = Options {
            seed: 3,
            memory: None,
        };
        let m = build_configured("rda-fixed", &plain, &o).unwrap();
        let c = m.config();
        assert!(c.contains(&("banks", "2".to_string())), "{c:?}");
        assert!(
            c.contains(&("buckets_per_bank", "2500".to_string())),
            "{c:?}"
        );
        assert!(c.contains(&("seed", "3".to_string())), "{c:?}");
        let f = build_configured("finecomb", &plain, &o).unwrap();
        assert!(f.config().contains(&("enumeration", "whole".to_string())));
        let bad = Overrides::parse(&["rda:rows=3".into()]).unwrap();
        let e = build_configured("rda", &plain, &bad)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("rows"), "{e}");
    }
}
