//! Operator flow weights (LDS §4.1).
//!
//! "Policies can define a flow's weight according to any information present on packet
//! headers. The default weight for non-policed flows is defined as 1." When a packet of a flow
//! with weight `w` arrives, every cell it hits gets `s += w·t` and `n += w`; the estimator is
//! unchanged, so a weighted flow counts `w` times against the flows it collides with and its
//! estimate is dragged `w` times less by them.
//!
//! # Text form
//!
//! A policy is a comma-separated list of rules `CONDITION[+CONDITION…]=WEIGHT`; the **first**
//! rule whose conditions all hold gives the weight (like an access list), else the weight is 1.
//! Conditions:
//!
//! | condition | holds when |
//! |---|---|
//! | `src:PREFIX` | the source address is in `PREFIX` (`10.1.0.0/16`, `2001:db8::/32`, or one address) |
//! | `dst:PREFIX` | the destination address is in `PREFIX` |
//! | `net:PREFIX` | either address is in `PREFIX` |
//! | `sport:P` / `sport:LO-HI` | the source port is `P` / in `[LO, HI]` |
//! | `dport:…`, `port:…` | the destination port / either port |
//! | `proto:N` | the IP protocol is `N` (`tcp`, `udp`, `icmp`, `icmp6` or a number) |
//!
//! Example: `dst:10.9.0.0/16=100,proto:udp+dport:53=25`. `none` (or the empty string) is the
//! empty policy. Weights are whole numbers ≥ 1: the cells hold integer sums (exact timestamp
//! arithmetic), and a weight below 1 would lower a flow's accuracy, which is what the other
//! flows' weight 1 already does relative to a heavier one.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use crate::method::MethodError;
use crate::record::FlowKey;

/// Largest weight a rule may give (a cell counter is 32 bits; see `sketch`).
pub const MAX_WEIGHT: u32 = 1 << 20;

/// An address prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// Whether `a` lies in the prefix (an IPv4 prefix never matches an IPv6 address).
    pub fn contains(&self, a: IpAddr) -> bool {
        match (self.addr, a) {
            (IpAddr::V4(p), IpAddr::V4(x)) => {
                let m = if self.len == 0 {
                    0
                } else {
                    u32::MAX << (32 - self.len)
                };
                u32::from(p) & m == u32::from(x) & m
            }
            (IpAddr::V6(p), IpAddr::V6(x)) => {
                let m = if self.len == 0 {
                    0
                } else {
                    u128::MAX << (128 - self.len)
                };
                u128::from(p) & m == u128::from(x) & m
            }
            _ => false,
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Prefix, String> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| format!("'{a}' is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&x| x <= max)
                .ok_or_else(|| format!("prefix length '{l}' must be 0..={max}"))?,
        };
        Ok(Prefix { addr, len })
    }
}

/// One condition of a rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    Src(Prefix),
    Dst(Prefix),
    Net(Prefix),
    Sport(u16, u16),
    Dport(u16, u16),
    Port(u16, u16),
    Proto(u8),
}

impl Condition {
    #[inline]
    pub fn holds(&self, f: &FlowKey) -> bool {
        match *self {
            Condition::Src(p) => p.contains(f.src),
            Condition::Dst(p) => p.contains(f.dst),
            Condition::Net(p) => p.contains(f.src) || p.contains(f.dst),
            Condition::Sport(lo, hi) => (lo..=hi).contains(&f.sport),
            Condition::Dport(lo, hi) => (lo..=hi).contains(&f.dport),
            Condition::Port(lo, hi) => (lo..=hi).contains(&f.sport) || (lo..=hi).contains(&f.dport),
            Condition::Proto(p) => f.proto == p,
        }
    }
}

fn fmt_range(f: &mut fmt::Formatter<'_>, kind: &str, lo: u16, hi: u16) -> fmt::Result {
    if lo == hi {
        write!(f, "{kind}:{lo}")
    } else {
        write!(f, "{kind}:{lo}-{hi}")
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Condition::Src(p) => write!(f, "src:{p}"),
            Condition::Dst(p) => write!(f, "dst:{p}"),
            Condition::Net(p) => write!(f, "net:{p}"),
            Condition::Sport(a, b) => fmt_range(f, "sport", a, b),
            Condition::Dport(a, b) => fmt_range(f, "dport", a, b),
            Condition::Port(a, b) => fmt_range(f, "port", a, b),
            Condition::Proto(p) => write!(f, "proto:{p}"),
        }
    }
}

fn parse_range(s: &str) -> Result<(u16, u16), String> {
    let p = |x: &str| {
        x.trim()
            .parse::<u16>()
            .map_err(|_| format!("'{x}' is not a port number (0..=65535)"))
    };
    let (lo, hi) = match s.split_once('-') {
        Some((a, b)) => (p(a)?, p(b)?),
        None => {
            let v = p(s)?;
            (v, v)
        }
    };
    if lo > hi {
        return Err(format!("port range '{s}' is empty (low above high)"));
    }
    Ok((lo, hi))
}

impl FromStr for Condition {
    type Err = String;
    fn from_str(s: &str) -> Result<Condition, String> {
        let (kind, v) = s
            .split_once(':')
            .ok_or_else(|| format!("condition '{s}' needs KIND:VALUE"))?;
        Ok(match kind.trim() {
            "src" => Condition::Src(v.parse()?),
            "dst" => Condition::Dst(v.parse()?),
            "net" => Condition::Net(v.parse()?),
            "sport" => {
                let (a, b) = parse_range(v)?;
                Condition::Sport(a, b)
            }
            "dport" => {
                let (a, b) = parse_range(v)?;
                Condition::Dport(a, b)
            }
            "port" => {
                let (a, b) = parse_range(v)?;
                Condition::Port(a, b)
            }
            "proto" => Condition::Proto(match v.trim() {
                "tcp" => 6,
                "udp" => 17,
                "icmp" => 1,
                "icmp6" => 58,
                n => n.parse::<u8>().map_err(|_| {
                    format!("protocol '{n}' is not tcp, udp, icmp, icmp6 or 0..=255")
                })?,
            }),
            k => {
                return Err(format!(
                    "unknown condition kind '{k}' (src, dst, net, sport, dport, port, proto)"
                ));
            }
        })
    }
}

/// A rule: all conditions hold → this weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub conditions: Vec<Condition>,
    pub weight: u32,
}

/// An ordered list of rules; the first that matches gives the weight, else 1.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Weights {
    pub rules: Vec<Rule>,
}

impl Weights {
    /// No rule: every flow weighs 1 (the plain LDS).
    pub fn none() -> Weights {
        Weights::default()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The weight of a flow.
    #[inline]
    pub fn weight_of(&self, f: &FlowKey) -> u32 {
        for r in &self.rules {
            if r.conditions.iter().all(|c| c.holds(f)) {
                return r.weight;
            }
        }
        1
    }
}

impl fmt::Display for Weights {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rules.is_empty() {
            return write!(f, "none");
        }
        for (i, r) in self.rules.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            for (j, c) in r.conditions.iter().enumerate() {
                if j > 0 {
                    write!(f, "+")?;
                }
                write!(f, "{c}")?;
            }
            write!(f, "={}", r.weight)?;
        }
        Ok(())
    }
}

/// Parse a weight: a whole number in `1..=MAX_WEIGHT`.
pub fn parse_weight(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let v: f64 = t
        .parse()
        .map_err(|_| format!("weight '{t}' is not a number"))?;
    if v.is_nan() || v <= 0.0 {
        return Err(format!(
            "weight {t} must be > 0 (a whole number ≥ 1; unweighted flows weigh 1)"
        ));
    }
    if v.fract() != 0.0 || v < 1.0 {
        return Err(format!(
            "weight {t} must be a whole number ≥ 1 (cells hold integer sums; raise the other rules instead)"
        ));
    }
    if v > MAX_WEIGHT as f64 {
        return Err(format!(
            "weight {t} is above the largest weight {MAX_WEIGHT}"
        ));
    }
    Ok(v as u32)
}

impl FromStr for Weights {
    type Err = MethodError;
    fn from_str(s: &str) -> Result<Weights, MethodError> {
        let t = s.trim();
        if t.is_empty() || t == "none" {
            return Ok(Weights::none());
        }
        let mut rules = Vec::new();
        for part in t.split(',') {
            let err = |e: String| MethodError::Invalid(format!("weight rule '{part}': {e}"));
            let (conds, w) = part
                .rsplit_once('=')
                .ok_or_else(|| err("expected CONDITION[+CONDITION…]=WEIGHT".into()))?;
            let weight = parse_weight(w).map_err(err)?;
            let conditions = conds
                .split('+')
                .map(|c| c.parse::<Condition>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(err)?;
            rules.push(Rule { conditions, weight });
        }
        if rules.len() > 1024 {
            return Err(MethodError::Invalid(format!(
                "{} weight rules is absurd (at most 1024)",
                rules.len()
            )));
        }
        Ok(Weights { rules })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(src: &str, dst: &str, proto: u8, sport: u16, dport: u16) -> FlowKey {
        FlowKey {
            proto,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            sport,
            dport,
        }
    }

    #[test]
    fn first_matching_rule_wins_default_one() {
        let w: Weights = "dst:10.9.0.0/16=100,proto:udp+dport:53=25,net:2001:db8::/32=7"
            .parse()
            .unwrap();
        assert_eq!(w.weight_of(&key("1.2.3.4", "10.9.3.3", 6, 1, 2)), 100);
        assert_eq!(w.weight_of(&key("1.2.3.4", "10.8.3.3", 17, 1, 53)), 25);
        assert_eq!(w.weight_of(&key("1.2.3.4", "10.8.3.3", 6, 1, 53)), 1);
        assert_eq!(w.weight_of(&key("2001:db8::1", "fd00::1", 6, 1, 2)), 7);
        assert_eq!(w.weight_of(&key("2001:db9::1", "fd00::1", 6, 1, 2)), 1);
        // an IPv4 prefix never matches an IPv6 address and vice versa
        let w: Weights = "net:0.0.0.0/0=3".parse().unwrap();
        assert_eq!(w.weight_of(&key("fd00::1", "fd00::2", 6, 1, 2)), 1);
        assert_eq!(w.weight_of(&key("9.9.9.9", "8.8.8.8", 6, 1, 2)), 3);
    }

    #[test]
    fn port_ranges_and_text_roundtrip() {
        let s = "sport:1024-1669=2500,port:443=10,src:192.168.1.7/32=2,proto:1=3";
        let w: Weights = s.parse().unwrap();
        assert_eq!(w.to_string(), s);
        assert_eq!(w.to_string().parse::<Weights>().unwrap(), w);
        assert_eq!(w.weight_of(&key("1.1.1.1", "2.2.2.2", 6, 1500, 80)), 2500);
        assert_eq!(w.weight_of(&key("1.1.1.1", "2.2.2.2", 6, 1700, 443)), 10);
        assert_eq!("none".parse::<Weights>().unwrap(), Weights::none());
        assert_eq!(Weights::none().to_string(), "none");
    }

    #[test]
    fn bad_weights_and_rules_are_clear_errors() {
        for (s, needle) in [
            ("port:80=0", "must be > 0"),
            ("port:80=-3", "must be > 0"),
            ("port:80=2.5", "whole number"),
            ("port:80=x", "not a number"),
            ("port:80", "CONDITION"),
            ("port:70000=2", "port number"),
            ("port:90-80=2", "empty"),
            ("dst:10.0.0.0/33=2", "prefix length"),
            ("vlan:3=2", "unknown condition kind"),
            ("proto:xyz=2", "protocol"),
        ] {
            let e = s.parse::<Weights>().unwrap_err().to_string();
            assert!(e.contains(needle), "{s}: {e}");
        }
    }
}
