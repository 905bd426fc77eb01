//! Can two filters select the same packet? A filter looks at the flow's 5-tuple only, so
//! "`a and b` selects some flow" is decided exactly: the conjunction goes to disjunctive normal
//! form, and each term is satisfiable when every field (protocol, each port, each address in
//! one family) has a value its literals allow. A point's paths to one peer must not overlap
//! (`owl agent --config`): a packet in both would be measured twice on one connection.

use std::net::IpAddr;

use owl_core::record::ipproto;

use super::{Dir, Filter};

/// Most terms the normal form may have; beyond it the answer is "may overlap".
const MAX_TERMS: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Src,
    Dst,
}

#[derive(Clone, Copy, Debug)]
enum Atom {
    /// The address on one side is in a prefix (a host: the full length).
    Addr(Side, IpAddr, u8),
    /// The port on one side (of a protocol with ports).
    Port(Side, u16),
    Proto(u8),
    /// The protocol is one whose flow key ports are ports (`port` matches only those).
    PortProto,
    V4,
}

#[derive(Clone, Copy, Debug)]
struct Lit {
    atom: Atom,
    neg: bool,
}

type Terms = Vec<Vec<Lit>>;

impl Filter {
    /// Could a flow match both `self` and `other`? Exact, unless the normal form of the two
    /// exceeds [`MAX_TERMS`] conjunctions, when the answer is `true` (may).
    pub fn may_overlap(&self, other: &Filter) -> bool {
        let both = Filter::And(Box::new(self.clone()), Box::new(other.clone()));
        match dnf(&both, false) {
            Some(terms) => terms.iter().any(|t| satisfiable(t)),
            None => true,
        }
    }
}

fn one(atom: Atom, neg: bool) -> Terms {
    vec![vec![Lit { atom, neg }]]
}

fn either(d: Dir, atom: impl Fn(Side) -> Atom, neg: bool) -> Terms {
    match (d, neg) {
        (Dir::Src, _) => one(atom(Side::Src), neg),
        (Dir::Dst, _) => one(atom(Side::Dst), neg),
        // src or dst
        (Dir::Either, false) => or(one(atom(Side::Src), false), one(atom(Side::Dst), false)),
        // neither
        (Dir::Either, true) => vec![vec![
            Lit {
                atom: atom(Side::Src),
                neg: true,
            },
            Lit {
                atom: atom(Side::Dst),
                neg: true,
            },
        ]],
    }
}

fn or(mut a: Terms, b: Terms) -> Terms {
    a.extend(b);
    a
}

fn and(a: Terms, b: Terms) -> Option<Terms> {
    if a.len().saturating_mul(b.len()) > MAX_TERMS {
        return None;
    }
    Some(
        a.iter()
            .flat_map(|x| {
                b.iter().map(move |y| {
                    let mut t = x.clone();
                    t.extend_from_slice(y);
                    t
                })
            })
            .collect(),
    )
}

/// The normal form of `f` (of `not f` when `neg`); `None`: too large.
fn dnf(f: &Filter, neg: bool) -> Option<Terms> {
    let t = match f {
        Filter::Not(x) => dnf(x, !neg)?,
        Filter::And(a, b) if !neg => and(dnf(a, false)?, dnf(b, false)?)?,
        Filter::And(a, b) => or(dnf(a, true)?, dnf(b, true)?),
        Filter::Or(a, b) if !neg => or(dnf(a, false)?, dnf(b, false)?),
        Filter::Or(a, b) => and(dnf(a, true)?, dnf(b, true)?)?,
        Filter::Host(d, a) => {
            let bits = if a.is_ipv4() { 32 } else { 128 };
            either(*d, |s| Atom::Addr(s, *a, bits), neg)
        }
        Filter::Net(d, a, n) => either(*d, |s| Atom::Addr(s, *a, *n), neg),
        Filter::Port(d, p) => {
            // a protocol with ports, and the port
            let port = either(*d, |s| Atom::Port(s, *p), neg);
            if neg {
                or(one(Atom::PortProto, true), port)
            } else {
                and(one(Atom::PortProto, false), port)?
            }
        }
        Filter::Proto(p) => one(Atom::Proto(*p), neg),
        Filter::Ip4 => one(Atom::V4, neg),
        Filter::Ip6 => one(Atom::V4, !neg),
    };
    (t.len() <= MAX_TERMS).then_some(t)
}

fn has_ports(p: u8) -> bool {
    matches!(
        p,
        ipproto::TCP | ipproto::UDP | ipproto::SCTP | ipproto::UDPLITE
    )
}

fn satisfiable(t: &[Lit]) -> bool {
    // the protocol
    let mut proto = [true; 256];
    for l in t {
        for (p, ok) in proto.iter_mut().enumerate() {
            let hit = match l.atom {
                Atom::Proto(q) => p == usize::from(q),
                Atom::PortProto => has_ports(p as u8),
                _ => continue,
            };
            *ok &= hit != l.neg;
        }
    }
    if !proto.iter().any(|&ok| ok) {
        return false;
    }
    // each port
    for side in [Side::Src, Side::Dst] {
        let lits = t.iter().filter_map(|l| match l.atom {
            Atom::Port(s, p) if s == side => Some((p, l.neg)),
            _ => None,
        });
        let (mut eq, mut ne) = (None, Vec::new());
        for (p, neg) in lits {
            if neg {
                ne.push(p);
            } else if eq.is_some_and(|e| e != p) {
                return false;
            } else {
                eq = Some(p);
            }
        }
        match eq {
            Some(e) if ne.contains(&e) => return false,
            None if ne.len() >= 1 << 16 => return false,
            _ => {}
        }
    }
    // the addresses, in one family for both sides
    let family: Vec<bool> = t
        .iter()
        .filter_map(|l| match l.atom {
            Atom::V4 => Some(!l.neg),
            Atom::Addr(_, a, _) if !l.neg => Some(a.is_ipv4()),
            _ => None,
        })
        .collect();
    [true, false].into_iter().any(|v4| {
        family.iter().all(|&f| f == v4)
            && [Side::Src, Side::Dst]
                .into_iter()
                .all(|side| addresses(t, side, v4))
    })
}

/// A prefix as (bits of the family, value, length).
#[derive(Clone, Copy)]
struct Prefix {
    value: u128,
    len: u8,
}

impl Prefix {
    fn of(a: IpAddr, n: u8) -> Prefix {
        let (value, width) = match a {
            IpAddr::V4(x) => (u128::from(u32::from(x)), 32),
            IpAddr::V6(x) => (u128::from(x), 128),
        };
        let len = n.min(width);
        Prefix {
            value: mask(value, len, width),
            len,
        }
    }

    /// Does `self` contain `other` (same family)?
    fn contains(self, other: Prefix, width: u8) -> bool {
        self.len <= other.len && mask(other.value, self.len, width) == self.value
    }
}

/// `v` (a `width`-bit address) with only its first `len` bits kept.
fn mask(v: u128, len: u8, width: u8) -> u128 {
    if len == 0 {
        return 0;
    }
    let all = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    v & (u128::MAX << (width - len)) & all
}

/// Is some address of the family on `side` allowed by `t`'s literals?
fn addresses(t: &[Lit], side: Side, v4: bool) -> bool {
    let width = if v4 { 32 } else { 128 };
    let mut within = Prefix { value: 0, len: 0 };
    let mut not = Vec::new();
    for l in t {
        let Atom::Addr(s, a, n) = l.atom else {
            continue;
        };
        if s != side || a.is_ipv4() != v4 {
            continue;
        }
        let p = Prefix::of(a, n);
        if l.neg {
            not.push(p);
        } else if within.contains(p, width) {
            within = p;
        } else if !p.contains(within, width) {
            return false;
        }
    }
    !covered(within, &not, width)
}

/// Do the prefixes `not` together cover all of `p`?
fn covered(p: Prefix, not: &[Prefix], width: u8) -> bool {
    if not.iter().any(|n| n.contains(p, width)) {
        return true;
    }
    let inside: Vec<Prefix> = not
        .iter()
        .copied()
        .filter(|n| p.contains(*n, width))
        .collect();
    if inside.is_empty() || p.len >= width {
        return false;
    }
    let bit = 1u128 << (width - p.len - 1);
    let halves = [
        Prefix {
            value: p.value,
            len: p.len + 1,
        },
        Prefix {
            value: p.value | bit,
            len: p.len + 1,
        },
    ];
    halves.iter().all(|h| covered(*h, &inside, width))
}

#[cfg(test)]
mod tests {
    use super::*;
    use owl_core::record::FlowKey;
    use rand::{RngExt, SeedableRng};

    fn f(s: &str) -> Filter {
        Filter::parse(s).unwrap()
    }

    #[test]
    fn disjoint_and_overlapping_filters() {
        for (a, b, overlap) in [
            ("dst net 10.2.0.0/16", "dst net 10.3.0.0/16", false),
            ("dst net 10.2.0.0/16", "dst net 10.2.128.0/17", true),
            ("dst net 10.2.0.0/16", "net 10.3.0.0/16", true),
            ("udp and dst port 53", "tcp", false),
            ("port 80", "icmp", false),
            ("not port 80", "icmp", true),
            ("dst port 80", "dst port 443", false),
            ("port 80", "port 443", true),
            ("ip", "ip6", false),
            ("host 10.0.0.1", "dst net 10.0.0.0/8", true),
            ("src host 10.0.0.1", "src host 10.0.0.2", false),
            (
                "dst net 10.0.0.0/8 and not dst net 10.0.0.0/9",
                "dst net 10.0.0.0/9",
                false,
            ),
            (
                "dst net 10.0.0.0/8 and not dst net 10.0.0.0/9 and not dst net 10.128.0.0/9",
                "ip",
                false,
            ),
            ("dst net 10.0.0.0/8 and not dst net 10.0.0.0/9", "ip", true),
            ("dst net fd00::/8", "dst net 10.0.0.0/8", false),
            ("not udp", "udp", false),
            ("udp or tcp", "tcp and port 22", true),
        ] {
            assert_eq!(f(a).may_overlap(&f(b)), overlap, "{a} / {b}");
            assert_eq!(f(b).may_overlap(&f(a)), overlap, "{b} / {a}");
        }
    }

    /// Where the answer is "disjoint", no flow matches both (random flows near the filters'
    /// addresses and ports); where a random flow matches both, the answer is "overlap".
    #[test]
    fn the_answer_agrees_with_matching() {
        let filters = [
            "dst net 10.2.0.0/16",
            "dst net 10.2.128.0/17",
            "src net 10.0.0.0/8 and not src net 10.1.0.0/16",
            "udp and dst port 53",
            "tcp or dst port 9000",
            "not (udp or icmp)",
            "host 10.2.0.1",
            "port 9000 and not src host 10.1.0.1",
            "ip6 and dst net fd00::/8",
            "icmp",
        ];
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(7);
        let flows: Vec<FlowKey> = (0..200_000)
            .map(|_| {
                let addr = |rng: &mut rand_pcg::Pcg64Mcg| -> IpAddr {
                    if rng.random_bool(0.1) {
                        IpAddr::V6(std::net::Ipv6Addr::new(
                            0xfd00,
                            0,
                            0,
                            0,
                            0,
                            0,
                            0,
                            rng.random(),
                        ))
                    } else {
                        IpAddr::V4(std::net::Ipv4Addr::new(
                            10,
                            rng.random_range(0..4),
                            rng.random_range(0..=255),
                            rng.random_range(0..3),
                        ))
                    }
                };
                let src = addr(&mut rng);
                let mut dst = addr(&mut rng);
                if dst.is_ipv4() != src.is_ipv4() {
                    dst = src;
                }
                FlowKey {
                    proto: [6, 17, 1][rng.random_range(0..3)],
                    src,
                    dst,
                    sport: [53, 9000, 1234][rng.random_range(0..3)],
                    dport: [53, 9000, 443][rng.random_range(0..3)],
                }
            })
            .collect();
        for a in filters {
            for b in filters {
                let (fa, fb) = (f(a), f(b));
                let both = flows.iter().any(|k| fa.matches(k) && fb.matches(k));
                if both {
                    assert!(fa.may_overlap(&fb), "{a} / {b}: a flow matches both");
                }
            }
        }
    }
}
