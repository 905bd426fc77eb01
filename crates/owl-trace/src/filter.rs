//! `--filter`: which packets of a point's capture are the measured path, decided on the
//! dissected record in userspace (no BPF, no libpcap): an agent's capture, and both captures
//! of `owl compare`.
//!
//! A small subset of tcpdump's expression language, over the record's flow key (protocol,
//! addresses, ports — [`owl_core::record::FlowKey`]):
//!
//! ```text
//! expr := and { ("or" | "||") and }
//! and  := not { ("and" | "&&") not }
//! not  := ("not" | "!") not | "(" expr ")" | prim
//! prim := [src | dst] host ADDR            IPv4 or IPv6 address
//!       | [src | dst] net ADDR/N           prefix
//!       | [src | dst] port P               TCP, UDP, SCTP or UDP-Lite port
//!       | proto NAME|N                     tcp, udp, icmp, icmp6, sctp, or a number
//!       | tcp | udp | icmp | icmp6 | sctp  shorthand for proto NAME
//!       | ip | ip6                         IPv4 / IPv6 packets
//! ```
//!
//! Without `src`/`dst` a primitive matches either side. `icmp` is ICMP for IPv4 only (as in
//! tcpdump); `icmp6` is ICMPv6. Both points of a pair must select the same packets: give both
//! agents the same filter (`owl compare` applies one filter to both captures).

use std::net::IpAddr;

use owl_core::record::{FlowKey, ipproto};

mod overlap;

/// A parsed filter expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    Host(Dir, IpAddr),
    /// Address and prefix length (bits).
    Net(Dir, IpAddr, u8),
    Port(Dir, u16),
    Proto(u8),
    Ip4,
    Ip6,
    Not(Box<Filter>),
    And(Box<Filter>, Box<Filter>),
    Or(Box<Filter>, Box<Filter>),
}

/// Which side of the flow a primitive looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Src,
    Dst,
    Either,
}

/// Why a filter does not parse; each names the offending word.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("the filter is empty")]
    Empty,
    #[error("unexpected '{0}' after a complete expression (combine with and/or)")]
    Trailing(String),
    #[error("the filter ends where {0} was expected")]
    Ends(&'static str),
    #[error("expected ')', found '{0}'")]
    Unclosed(String),
    #[error("'{word}' is not an IPv4 or IPv6 address ({primitive})")]
    Address {
        word: String,
        primitive: &'static str,
    },
    #[error("'{0}' is not a prefix ADDR/N (net)")]
    Prefix(String),
    #[error("'/{bits}' is not a prefix length 0..={max} (net)")]
    PrefixLength { bits: String, max: u8 },
    #[error("'{0}' is not a port number 0..=65535")]
    Port(String),
    #[error("'{0}' after src/dst: expected host, net or port")]
    Undirected(String),
    #[error("'{0}' is not a protocol (tcp, udp, icmp, icmp6, sctp or a number 0..=255)")]
    Protocol(String),
    #[error(
        "'{0}' is not a filter primitive (host, net, port, proto, tcp, udp, icmp, icmp6, sctp, ip, ip6, not, and, or)"
    )]
    Primitive(String),
}

impl std::str::FromStr for Filter {
    type Err = FilterError;
    fn from_str(s: &str) -> Result<Filter, FilterError> {
        Filter::parse(s)
    }
}

impl Filter {
    /// Parse `text`; the error names the offending word.
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        let tokens = tokenize(text);
        if tokens.is_empty() {
            return Err(FilterError::Empty);
        }
        let mut p = Parser { tokens, at: 0 };
        let f = p.or()?;
        if let Some(t) = p.peek() {
            return Err(FilterError::Trailing(t.to_string()));
        }
        Ok(f)
    }

    /// Does the packet with this flow key match?
    pub fn matches(&self, f: &FlowKey) -> bool {
        match self {
            Filter::Host(d, a) => side(*d, f, |x| x == *a),
            Filter::Net(d, a, n) => side(*d, f, |x| in_prefix(x, *a, *n)),
            Filter::Port(d, p) => {
                has_ports(f.proto)
                    && match d {
                        Dir::Src => f.sport == *p,
                        Dir::Dst => f.dport == *p,
                        Dir::Either => f.sport == *p || f.dport == *p,
                    }
            }
            Filter::Proto(p) => f.proto == *p,
            Filter::Ip4 => f.src.is_ipv4(),
            Filter::Ip6 => f.src.is_ipv6(),
            Filter::Not(a) => !a.matches(f),
            Filter::And(a, b) => a.matches(f) && b.matches(f),
            Filter::Or(a, b) => a.matches(f) || b.matches(f),
        }
    }
}

/// The canonical text of a filter: every binary operation parenthesized, one spelling per
/// operator, so two agents' filters compare equal when they parse to the same expression.
impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dir = |d: &Dir| match d {
            Dir::Src => "src ",
            Dir::Dst => "dst ",
            Dir::Either => "",
        };
        match self {
            Filter::Host(d, a) => write!(f, "{}host {a}", dir(d)),
            Filter::Net(d, a, n) => write!(f, "{}net {a}/{n}", dir(d)),
            Filter::Port(d, p) => write!(f, "{}port {p}", dir(d)),
            Filter::Proto(p) => write!(f, "proto {p}"),
            Filter::Ip4 => write!(f, "ip"),
            Filter::Ip6 => write!(f, "ip6"),
            Filter::Not(a) => write!(f, "not {a}"),
            Filter::And(a, b) => write!(f, "({a} and {b})"),
            Filter::Or(a, b) => write!(f, "({a} or {b})"),
        }
    }
}

fn side(d: Dir, f: &FlowKey, test: impl Fn(IpAddr) -> bool) -> bool {
    match d {
        Dir::Src => test(f.src),
        Dir::Dst => test(f.dst),
        Dir::Either => test(f.src) || test(f.dst),
    }
}

/// Protocols whose flow key ports are transport ports (for ICMP they are the identifier and
/// type/code, which `port` must not match).
fn has_ports(proto: u8) -> bool {
    matches!(
        proto,
        ipproto::TCP | ipproto::UDP | ipproto::SCTP | ipproto::UDPLITE
    )
}

fn in_prefix(x: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (x, net) {
        (IpAddr::V4(x), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(x) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(x), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(x) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

fn tokenize(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let single = matches!(c, '(' | ')') || (c == '!' && chars.peek() != Some(&'='));
        if c.is_whitespace() || single {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            if single {
                out.push(c.to_string());
            }
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

struct Parser {
    tokens: Vec<String>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn next(&mut self, wanted: &'static str) -> Result<String, FilterError> {
        let t = self
            .tokens
            .get(self.at)
            .cloned()
            .ok_or(FilterError::Ends(wanted))?;
        self.at += 1;
        Ok(t)
    }

    fn or(&mut self) -> Result<Filter, FilterError> {
        let mut f = self.and()?;
        while matches!(self.peek(), Some("or" | "||")) {
            self.at += 1;
            f = Filter::Or(Box::new(f), Box::new(self.and()?));
        }
        Ok(f)
    }

    fn and(&mut self) -> Result<Filter, FilterError> {
        let mut f = self.not()?;
        while matches!(self.peek(), Some("and" | "&&")) {
            self.at += 1;
            f = Filter::And(Box::new(f), Box::new(self.not()?));
        }
        Ok(f)
    }

    fn not(&mut self) -> Result<Filter, FilterError> {
        match self.peek() {
            Some("not" | "!") => {
                self.at += 1;
                Ok(Filter::Not(Box::new(self.not()?)))
            }
            Some("(") => {
                self.at += 1;
                let f = self.or()?;
                match self.next("')'")?.as_str() {
                    ")" => Ok(f),
                    t => Err(FilterError::Unclosed(t.to_string())),
                }
            }
            _ => self.primitive(),
        }
    }

    fn primitive(&mut self) -> Result<Filter, FilterError> {
        let first = self.next("a primitive (host, net, port, proto, tcp, udp, icmp, …)")?;
        let (dir, kind) = match first.as_str() {
            "src" => (Dir::Src, self.next("host, net or port after 'src'")?),
            "dst" => (Dir::Dst, self.next("host, net or port after 'dst'")?),
            _ => (Dir::Either, first),
        };
        let directed = dir != Dir::Either;
        match kind.as_str() {
            "host" => {
                let a = self.next("an address after 'host'")?;
                let ip = a.parse::<IpAddr>().map_err(|_| FilterError::Address {
                    word: a.clone(),
                    primitive: "host",
                })?;
                Ok(Filter::Host(dir, ip))
            }
            "net" => {
                let a = self.next("a prefix ADDR/N after 'net'")?;
                let (addr, bits) = a
                    .split_once('/')
                    .ok_or_else(|| FilterError::Prefix(a.clone()))?;
                let ip = addr.parse::<IpAddr>().map_err(|_| FilterError::Address {
                    word: addr.to_string(),
                    primitive: "net",
                })?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                let n = bits
                    .parse::<u8>()
                    .ok()
                    .filter(|&n| n <= max)
                    .ok_or_else(|| FilterError::PrefixLength {
                        bits: bits.to_string(),
                        max,
                    })?;
                Ok(Filter::Net(dir, ip, n))
            }
            "port" => {
                let p = self.next("a port number after 'port'")?;
                let n = p.parse::<u16>().map_err(|_| FilterError::Port(p.clone()))?;
                Ok(Filter::Port(dir, n))
            }
            _ if directed => Err(FilterError::Undirected(kind)),
            "proto" => {
                let p = self.next("a protocol after 'proto'")?;
                proto(&p).map(Filter::Proto).ok_or(FilterError::Protocol(p))
            }
            "ip" => Ok(Filter::Ip4),
            "ip6" => Ok(Filter::Ip6),
            k => match proto(k) {
                Some(p) if k.parse::<u8>().is_err() => Ok(Filter::Proto(p)),
                _ => Err(FilterError::Primitive(k.to_string())),
            },
        }
    }
}

fn proto(name: &str) -> Option<u8> {
    match name {
        "tcp" => Some(ipproto::TCP),
        "udp" => Some(ipproto::UDP),
        "icmp" => Some(ipproto::ICMP),
        "icmp6" => Some(ipproto::ICMPV6),
        "sctp" => Some(ipproto::SCTP),
        n => n.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(proto: u8, src: &str, sport: u16, dst: &str, dport: u16) -> FlowKey {
        FlowKey {
            proto,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            sport,
            dport,
        }
    }

    fn m(expr: &str, f: &FlowKey) -> bool {
        Filter::parse(expr).unwrap().matches(f)
    }

    #[test]
    fn primitives_match_their_side() {
        let u = flow(17, "10.0.0.1", 4000, "10.0.1.2", 9000);
        assert!(m("host 10.0.0.1", &u));
        assert!(m("host 10.0.1.2", &u));
        assert!(m("src host 10.0.0.1", &u));
        assert!(!m("dst host 10.0.0.1", &u));
        assert!(m("net 10.0.0.0/16", &u));
        assert!(m("dst net 10.0.1.0/24", &u));
        assert!(!m("src net 10.0.1.0/24", &u));
        assert!(m("net 0.0.0.0/0", &u));
        assert!(m("port 9000", &u));
        assert!(m("dst port 9000", &u));
        assert!(!m("src port 9000", &u));
        assert!(m("udp", &u) && m("proto udp", &u) && m("proto 17", &u));
        assert!(!m("tcp", &u) && !m("icmp", &u));
        assert!(m("ip", &u) && !m("ip6", &u));
    }

    #[test]
    fn ipv6_and_prefixes() {
        let t = flow(6, "2001:db8::1", 443, "2001:db8:1::5", 50000);
        assert!(m("host 2001:db8::1", &t));
        assert!(m("src net 2001:db8::/32", &t));
        assert!(!m("net 2001:db9::/32", &t));
        assert!(!m("net 10.0.0.0/8", &t));
        assert!(m("net 2001:db8:1::5/128", &t));
        assert!(m("ip6 and tcp and src port 443", &t));
    }

    /// ICMP's flow-key ports are its identifier and type/code: `port` never matches them.
    #[test]
    fn port_matches_only_protocols_with_ports() {
        let ping = flow(1, "10.0.0.1", 9000, "10.0.0.2", 0x0800);
        assert!(!m("port 9000", &ping));
        assert!(m("icmp", &ping));
        assert!(!m("icmp6", &ping));
    }

    #[test]
    fn combinations_bind_as_in_tcpdump() {
        let u = flow(17, "10.0.0.1", 4000, "10.0.1.2", 9000);
        let t = flow(6, "10.0.0.1", 22, "10.0.1.2", 5555);
        let e = "udp and dst port 9000 or tcp and port 22";
        assert!(m(e, &u) && m(e, &t));
        assert!(m("not tcp", &u) && !m("not tcp", &t));
        assert!(m("! tcp && host 10.0.0.1", &u));
        assert!(!m("udp and (port 1 || port 2)", &u));
        assert!(m("udp and (port 1 || port 9000)", &u));
        assert!(m("not (tcp or icmp)", &u));
        // and binds tighter than or
        assert!(m("tcp and port 1 or udp", &u));
        assert!(!m("tcp and (port 1 or udp)", &u));
    }

    #[test]
    fn the_canonical_text_parses_back_to_the_same_filter() {
        for e in [
            "udp and dst port 9000",
            "udp && dst port 9000",
            "not (tcp or icmp) and src net 10.0.0.0/8 || ip6 and host ::1",
            "! ! proto 132",
        ] {
            let f = Filter::parse(e).unwrap();
            assert_eq!(Filter::parse(&f.to_string()).unwrap(), f, "{e} → {f}");
        }
        assert_eq!(
            Filter::parse("udp and dst port 9000").unwrap().to_string(),
            Filter::parse("proto 17 && dst port 9000")
                .unwrap()
                .to_string()
        );
    }

    #[test]
    fn errors_name_the_word() {
        for (bad, says) in [
            ("", "empty"),
            ("host", "ends"),
            ("host 10.0.0.300", "10.0.0.300"),
            ("net 10.0.0.0", "ADDR/N"),
            ("net 10.0.0.0/33", "/33"),
            ("port 70000", "70000"),
            ("src tcp", "'tcp' after src/dst"),
            ("proto gre", "gre"),
            ("udp port 9", "unexpected 'port'"),
            ("(udp", "')'"),
            ("udp )", "unexpected ')'"),
            ("17", "'17' is not a filter primitive"),
            ("udp and", "ends"),
        ] {
            let e = Filter::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }
}
