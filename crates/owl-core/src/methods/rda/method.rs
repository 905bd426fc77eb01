//! RDA as an object-safe [`Method`] for `owl compare` (and `owl record` / `owl estimate`).

use super::exchange::reconcile;
use super::point::Synopsis;
use super::{Config, Sizing};
use crate::method::{Estimate, Method, MethodConfig, MethodError, MethodInfo, Role};
use crate::wire::DecodeError;

/// RDA under a name (`rda` for late binding, `rda-fixed` for the fixed size of §V/§VII).
#[derive(Clone, Debug)]
pub struct RdaMethod {
    name: &'static str,
    cfg: Config,
}

impl RdaMethod {
    /// A method of a valid configuration.
    pub fn new(name: &'static str, cfg: Config) -> Result<RdaMethod, MethodError> {
        cfg.validate()?;
        Ok(RdaMethod { name, cfg })
    }
    pub fn config_struct(&self) -> &Config {
        &self.cfg
    }
    /// The name a configuration is registered under.
    pub fn name_of(cfg: &Config) -> &'static str {
        match cfg.sizing {
            Sizing::Fixed { .. } => "rda-fixed",
            Sizing::Late(_) => "rda",
        }
    }
}

impl MethodConfig for Config {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        Config::pairs(self)
    }
}

impl crate::method::TypedMethod for RdaMethod {
    type Config = Config;
    type Sender = Synopsis;
    type Receiver = Synopsis;
    fn name(&self) -> &str {
        self.name
    }
    fn config(&self) -> &Config {
        &self.cfg
    }
    fn foreign(&self) -> crate::method::Foreign {
        crate::method::Foreign::Matches(
            "the set difference decodes the packets only one point has, and they are repaired or left out",
        )
    }
    // the configuration was validated in `new`
    fn new_sender(&self) -> Synopsis {
        Synopsis::new(&self.cfg, Role::Sender).expect("validated configuration")
    }
    fn new_receiver(&self) -> Synopsis {
        Synopsis::new(&self.cfg, Role::Receiver).expect("validated configuration")
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        Synopsis::decode(&self.cfg, Role::Sender, bytes)
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        Synopsis::decode(&self.cfg, Role::Receiver, bytes)
    }
    fn estimate(&self, mut s: Synopsis, mut r: Synopsis) -> Result<Estimate, MethodError> {
        Config::check_pair(&self.cfg, s.config())?;
        Ok(reconcile(&mut s, &mut r)?.to_estimate(&self.cfg))
    }
}

/// Rebuild `name` (`rda` or `rda-fixed`) from configuration fields; the name says the sizing
/// when the fields do not.
fn rda_from_config(
    name: &'static str,
    pairs: &[(String, String)],
) -> Result<Box<dyn Method>, MethodError> {
    let mut pairs = pairs.to_vec();
    if !pairs.iter().any(|(k, _)| k == "sizing") {
        let sizing = if name == "rda" { "late" } else { "fixed" };
        pairs.push(("sizing".into(), sizing.into()));
    }
    let cfg = Config::from_pairs(&pairs)?;
    let n = RdaMethod::name_of(&cfg);
    if n != name {
        return Err(MethodError::Invalid(format!(
            "a synopsis file of method '{name}' carries the configuration of '{n}'"
        )));
    }
    Ok(Box::new(RdaMethod::new(n, cfg)?))
}

/// `rda` (late binding): `--memory B` caps what crosses per interval — the receiver's strata
/// sketch (20 736 B) first, then at most `⌊(B − 20 736) / 72⌋` buckets per bank, the floor of
/// 683 lowered to that cap if needed; a quiet interval uses less.
pub const LATE: MethodInfo = MethodInfo {
    name: "rda",
    summary: "RDA, late binding (§VIII): 3 banks of d̂ buckets from a strata estimate, decode \
                  lost and reordered packets, repair, exact mean; --memory caps the RDA",
    samples: "packets decoded at both points (timestamps recovered)",
    per_flow: false,
    crosses: "a round trip: a strata sketch of the set difference, then RDA banks sized from it, then a request and a response for the timestamps of decoded packets (`bytes` counts all of it); the file holds the point's timestamp cache (16 B a packet), local state that a deployed point never sends",
    per_packet: false,
    recovers_delays: false,
    build: |o| {
        let mut cfg = Config {
            seed: o.seed,
            ..Config::default()
        };
        if let Some(b) = o.memory {
            cfg = cfg.with_memory(b)?;
        }
        Ok(Box::new(RdaMethod::new("rda", cfg)?))
    },
    from_config: |pairs| rda_from_config("rda", pairs),
};

/// `rda-fixed`: 3 banks of 1 666 buckets (≈ the §VII 120 000 B); `--memory B` gives
/// `m = ⌊B / 72⌋` buckets per bank (3 banks × 24 B).
pub const FIXED: MethodInfo = MethodInfo {
    name: "rda-fixed",
    summary: "RDA of fixed size (§V/§VII): 3 banks × 1666 buckets (120 kB), or --memory / 72 B",
    samples: "packets decoded at both points (timestamps recovered)",
    per_flow: false,
    crosses: "a round trip: the RDA banks, then a request and a response for the timestamps of decoded packets (`bytes` counts all of it); the file holds the point's timestamp cache (16 B a packet), local state that a deployed point never sends",
    per_packet: false,
    recovers_delays: false,
    build: |o| {
        let mut cfg = Config {
            seed: o.seed,
            ..Config::fixed(1666)
        };
        if let Some(b) = o.memory {
            cfg = cfg.with_memory(b)?;
        }
        Ok(Box::new(RdaMethod::new("rda-fixed", cfg)?))
    },
    from_config: |pairs| rda_from_config("rda-fixed", pairs),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::PacketRecord;

    #[test]
    fn compare_style_roundtrip_through_payloads() {
        let m = RdaMethod::new("rda", Config::default()).unwrap();
        let mut s = m.new_point(Role::Sender);
        let mut r = m.new_point(Role::Receiver);
        for i in 0..2_000u64 {
            let id = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x55;
            s.record(&PacketRecord {
                ts_ns: 1_000_000 + i * 100,
                id,
                ..Default::default()
            });
            if i % 50 != 0 {
                r.record(&PacketRecord {
                    ts_ns: 1_000_000 + i * 100 + 5_000 + i % 7,
                    id,
                    ..Default::default()
                });
            }
        }
        let (mut bs, mut br) = (Vec::new(), Vec::new());
        s.encode(&mut bs);
        r.encode(&mut br);
        assert_eq!(bs.len(), s.encoded_len());
        let s2 = m.decode_point(Role::Sender, &bs).unwrap();
        let r2 = m.decode_point(Role::Receiver, &br).unwrap();
        let e1 = m.estimate(s, r).unwrap();
        let e2 = m.estimate(s2, r2).unwrap();
        assert_eq!(e1, e2);
        assert_eq!(e1.lost, Some(40));
        assert_eq!(e1.samples, 1960);
        let expect = (0..2_000u64)
            .filter(|i| i % 50 != 0)
            .map(|i| 5_000.0 + (i % 7) as f64)
            .sum::<f64>()
            / 1960.0;
        assert!((e1.mean_ns.unwrap() - expect).abs() < 1e-9);
    }

    #[test]
    fn wrong_synopses_are_errors() {
        let m = RdaMethod::new("rda", Config::fixed(8)).unwrap();
        let other = RdaMethod::new("rda", Config::fixed(9)).unwrap();
        let e = m
            .estimate(m.new_point(Role::Sender), other.new_point(Role::Receiver))
            .unwrap_err();
        assert!(
            matches!(e, MethodError::ConfigMismatch { ref field, .. } if field == "buckets_per_bank"),
            "{e}"
        );
        assert!(RdaMethod::new("rda", Config::fixed(0)).is_err());
        assert_eq!(RdaMethod::name_of(&Config::default()), "rda");
    }
}
