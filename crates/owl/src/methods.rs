//! The methods `owl compare`, `owl record` and `owl estimate` can run, by name: a thin layer
//! over [`owl_core::registry`], where every method's descriptor (name, help line, defaults and
//! `--memory` sizing, rebuilding from a configuration) lives beside its code.
//!
//! `exact` is the store-everything method; in `owl compare` its row is the ground truth itself.

use anyhow::{Result, anyhow, bail};
use owl_core::method::{BuildOptions, Method, MethodInfo};
use owl_core::registry;

/// Name of the exact per-packet method (the ground truth itself).
pub const EXACT: &str = "exact";

/// Every method, in the order reports list them.
pub const ALL: &[&MethodInfo] = registry::METHODS;

/// Knobs every method is built from.
pub type Options = BuildOptions;

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
        match registry::find(name) {
            Some(e) if !out.contains(&e.name) => out.push(e.name),
            Some(_) => {}
            None => bail!("unknown method '{name}'; available: {}", registry::names()),
        }
    }
    if out.is_empty() {
        bail!("--methods lists no method");
    }
    Ok(out)
}

/// The descriptor of `name`, or an error listing the methods.
pub fn info(name: &str) -> Result<&'static MethodInfo> {
    registry::find(name)
        .ok_or_else(|| anyhow!("unknown method '{name}'; available: {}", registry::names()))
}

/// Build a method by name from its defaults and `--memory` (each method's descriptor says how
/// the budget sizes it).
pub fn build(name: &str, opts: &Options) -> Result<Box<dyn Method>> {
    Ok((info(name)?.build)(opts)?)
}

/// The per-flow methods' names, for help texts.
pub fn per_flow_names() -> String {
    ALL.iter()
        .filter(|m| m.per_flow)
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The methods that recover individual delays (quantiles, `--per-class`), for help texts.
pub fn recovering_names() -> String {
    ALL.iter()
        .filter(|m| m.recovers_delays)
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
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
            if registry::find(m).is_none() {
                bail!(
                    "--method-config '{it}': unknown method '{m}'; available: {}",
                    registry::names()
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

    /// The `(field, value)` settings given for `name`.
    pub fn pairs_for(&self, name: &str) -> Vec<(String, String)> {
        self.for_method(name)
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
        return build(name, opts);
    }
    if opts.memory.is_some() {
        bail!("give either --memory or --method-config for {name}, not both");
    }
    if !pairs.iter().any(|(k, _)| k == "seed") {
        pairs.push(("seed".into(), opts.seed.to_string()));
    }
    from_config(name, &pairs).map_err(|e| anyhow::anyhow!("--method-config for {name}: {e}"))
}

/// [`build_configured`], then with the run's `--horizon` for every method whose configuration
/// has a `horizon_ns` field (`sample`: a match whose delay is beyond it is no delay), unless
/// `--method-config` set that field itself.
pub fn build_with_horizon(
    name: &str,
    opts: &Options,
    over: &Overrides,
    horizon_ns: u64,
) -> Result<Box<dyn Method>> {
    let m = build_configured(name, opts, over)?;
    let pairs: Vec<(String, String)> = m
        .config()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    if !pairs.iter().any(|(k, _)| k == "horizon_ns")
        || over.for_method(name).iter().any(|(k, _)| k == "horizon_ns")
    {
        return Ok(m);
    }
    let pairs: Vec<(String, String)> = pairs
        .into_iter()
        .map(|(k, v)| {
            let v = if k == "horizon_ns" {
                horizon_ns.to_string()
            } else {
                v
            };
            (k, v)
        })
        .collect();
    from_config(name, &pairs)
}

/// Rebuild a method from the configuration stored in a synopsis file (`owl estimate`).
pub fn from_config(name: &str, pairs: &[(String, String)]) -> Result<Box<dyn Method>> {
    let Some(m) = registry::find(name) else {
        bail!(
            "the file was recorded with method '{name}', which this owl does not know; available: {}",
            registry::names()
        );
    };
    Ok((m.from_config)(pairs)?)
}

/// What a method's `samples` counts (the packets, probes or flows its mean rests on), for the
/// help and the JSON: its descriptor's [`MethodInfo::samples`].
pub fn samples_meaning(name: &str) -> &'static str {
    registry::find(name).map_or("packets the mean rests on", |m| m.samples)
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
    if list {
        s.push_str("\nWhat each method's `samples` counts (the samples column, and `samples` in the JSON):\n");
        for e in ALL {
            s.push_str(&format!("  {:<w$}  {}\n", e.name, samples_meaning(e.name)));
        }
    }
    s.push_str(&foreign_help());
    s
}

/// How each method copes with packets only one point's interval holds (in flight across a cut
/// that fell back to R's clock, reordered across a cut, duplicated, or never seen by the other
/// point), at its defaults.
pub fn foreign_help() -> String {
    let mut s = String::from(
        "\nPackets only one point's interval holds (a cut that fell back to R's clock, reordering \
         across a cut, duplicates), per method:\n",
    );
    let w = ALL.iter().map(|e| e.name.len()).max().unwrap_or(0);
    for e in ALL {
        let Ok(m) = (e.build)(&Options::default()) else {
            continue;
        };
        s.push_str(&format!("  {:<w$}  {}\n", e.name, m.foreign().describe()));
    }
    s
}

/// What crosses the network for each method, and what a synopsis file holds beyond it
/// (`owl record --help`).
pub fn crosses_help() -> String {
    let mut s = String::from(
        "What crosses the network between the points, per method (a synopsis file can hold more: \
         local state or emulation data that a deployed point keeps or never has; `owl record` \
         reports both sizes):\n",
    );
    for e in ALL {
        s.push_str(&format!("  {}: {}\n", e.name, e.crosses));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's methods table lists exactly the registry's methods, in its order.
    #[test]
    fn readme_methods_table_is_the_registry() {
        let readme = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
        )
        .unwrap();
        let table = readme
            .split("## Methods")
            .nth(1)
            .expect("a Methods section")
            .split("\n\n")
            .find(|b| b.trim_start().starts_with("| name"))
            .expect("the methods table");
        let mut listed: Vec<String> = Vec::new();
        for line in table.lines().skip(2) {
            let cell = line.split('|').nth(1).unwrap_or("").trim();
            for name in cell.split(',') {
                listed.push(name.trim().trim_matches('`').to_string());
            }
        }
        let names: Vec<String> = ALL.iter().map(|m| m.name.to_string()).collect();
        assert_eq!(
            listed, names,
            "README methods table vs owl_core::registry::METHODS"
        );
    }
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
                memory: Some(32 * 1024 + 10),
            },
        )
        .unwrap();
        // two banks of 16-byte rows (12 without the identity digest)
        assert!(m.config().contains(&("rows", "1024".to_string())));
        assert_eq!(m.new_point(Role::Sender).encoded_len(), 32 * 1024 + 10);
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
