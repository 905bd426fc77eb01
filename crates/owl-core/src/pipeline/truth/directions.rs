//! Which way each host pair's packets travel between the points, and the clock offset that the
//! two directions give together.
//!
//! Two tcpdumps without a filter hold both directions of every conversation: S→R packets (S
//! sees them first) and R→S ones (R sees them first: TCP's acknowledgements, replies). The
//! truth pairs every packet the two captures share, so an R→S packet counts as "sent" at S when
//! it *arrives* there, and its "delay" is minus its reverse delay. With θ the offset of R's
//! clock (R's reading minus S's), a forward packet shows `d_f + θ` and a reverse one
//! `θ − d_r`: the two directions' delays lie on either side of θ, never mixed, so within a host
//! pair seen both ways the direction with the larger delays is S→R. Every method aggregates
//! both directions just as blindly, so owl says so (the `directions` check of `owl compare`).
//!
//! The same two directions measure θ, as NTP does with a request and its reply: with `m_f` the
//! smallest forward delay and `m_r` the smallest reverse one (`d_r − θ`, measured S's time
//! minus R's), and the assumption that the two directions' smallest true delays are equal,
//! θ = (m_f − m_r) / 2, within ± (m_f + m_r) / 2 whatever the asymmetry (both true delays are
//! at least 0). [`ReverseOffset`] states it as S's clock minus R's, as the agents do
//! (`owl_live::clock`): a true delay is the measured one plus it.

use std::net::IpAddr;

use hashbrown::HashMap;
use serde::Serialize;

use crate::record::FlowKey;

/// Host pairs tallied; packets of later ones are counted, not tallied (bounded state).
pub const MAX_HOST_PAIRS: usize = 4096;
/// Host pairs listed in [`Directions::both_ways`]; the rest are counted.
pub const LISTED: usize = 8;
/// A packet of no tallied host pair.
pub const UNTALLIED: u16 = u16::MAX;

/// Matched delays of one directed host pair.
#[derive(Clone, Copy, Debug)]
struct PairStats {
    matched: u64,
    min: i64,
    max: i64,
    sum: i128,
}

/// The per-direction tally the truth keeps as it matches packets.
#[derive(Debug, Default)]
pub struct DirectionTally {
    slots: HashMap<(IpAddr, IpAddr), u16>,
    keys: Vec<(IpAddr, IpAddr)>,
    stats: Vec<PairStats>,
    /// The last pair looked up and its slot (consecutive packets mostly share one).
    last: Option<((IpAddr, IpAddr), u16)>,
    untallied: u64,
}

impl DirectionTally {
    pub fn new() -> DirectionTally {
        DirectionTally::default()
    }

    /// The slot of a packet's directed host pair ([`UNTALLIED`] past [`MAX_HOST_PAIRS`]).
    pub fn slot(&mut self, flow: &FlowKey) -> u16 {
        let key = (flow.src, flow.dst);
        if let Some((k, s)) = self.last
            && k == key
        {
            return s;
        }
        let s = match self.slots.get(&key) {
            Some(&s) => s,
            None if self.keys.len() < MAX_HOST_PAIRS => {
                let s = self.keys.len() as u16;
                self.slots.insert(key, s);
                self.keys.push(key);
                self.stats.push(PairStats {
                    matched: 0,
                    min: i64::MAX,
                    max: i64::MIN,
                    sum: 0,
                });
                s
            }
            None => UNTALLIED,
        };
        self.last = Some((key, s));
        s
    }

    /// A packet of slot `s` matched with delay `d` (R's time minus S's).
    pub fn matched(&mut self, s: u16, d: i64) {
        match self.stats.get_mut(s as usize) {
            Some(p) => {
                p.matched += 1;
                p.min = p.min.min(d);
                p.max = p.max.max(d);
                p.sum += i128::from(d);
            }
            None => self.untallied += 1,
        }
    }

    /// The host pairs seen both ways, and what the two directions say of the clocks.
    pub fn finish(&self) -> Directions {
        let mut out = Directions {
            untallied: self.untallied,
            ..Directions::default()
        };
        let mut both = Vec::new();
        for (i, &(a, b)) in self.keys.iter().enumerate() {
            let ab = self.stats[i];
            let Some(&j) = self.slots.get(&(b, a)) else {
                out.forward_packets += ab.matched;
                out.forward_min_ns = min_of(out.forward_min_ns, ab.matched, ab.min);
                continue;
            };
            let ba = self.stats[j as usize];
            if ab.matched == 0 || ba.matched == 0 {
                out.forward_packets += ab.matched;
                out.forward_min_ns = min_of(out.forward_min_ns, ab.matched, ab.min);
                continue;
            }
            // each pair of directions once, from the side with the larger mean delay (S→R)
            let mean = |p: PairStats| p.sum as f64 / p.matched as f64;
            if mean(ab) < mean(ba) || (mean(ab) == mean(ba) && i > j as usize) {
                continue;
            }
            out.forward_packets += ab.matched;
            out.forward_min_ns = min_of(out.forward_min_ns, ab.matched, ab.min);
            out.reverse_packets += ba.matched;
            // the reverse direction's delay, S's time minus R's: minus what the truth measured
            out.reverse_min_ns = min_of(out.reverse_min_ns, ba.matched, ba.max.saturating_neg());
            both.push(BothWays {
                sender: a,
                receiver: b,
                forward_packets: ab.matched,
                reverse_packets: ba.matched,
            });
        }
        out.split = split_of(&both);
        both.sort_by(|x, y| {
            (y.forward_packets + y.reverse_packets)
                .cmp(&(x.forward_packets + x.reverse_packets))
                .then((x.sender, x.receiver).cmp(&(y.sender, y.receiver)))
        });
        out.host_pairs_both_ways = both.len() as u64;
        both.truncate(LISTED);
        out.both_ways = both;
        out.offset = match (out.forward_min_ns, out.reverse_min_ns) {
            (Some(f), Some(r)) => Some(ReverseOffset::of_minima(f, r)),
            _ => None,
        };
        out
    }
}

fn min_of(acc: Option<i64>, n: u64, v: i64) -> Option<i64> {
    if n == 0 {
        return acc;
    }
    Some(acc.map_or(v, |a| a.min(v)))
}

/// What the truth's matches say of the directions (one capture pair, whole run).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Directions {
    /// Host pairs seen both ways between the points, the busiest first (at most [`LISTED`]).
    pub both_ways: Vec<BothWays>,
    /// All host pairs seen both ways.
    pub host_pairs_both_ways: u64,
    /// Matched packets travelling S→R, and R→S (those of host pairs seen both ways, in the
    /// direction of the smaller delays).
    pub forward_packets: u64,
    pub reverse_packets: u64,
    /// Smallest delay S→R (R's time minus S's) and R→S (S's time minus R's), ns.
    pub forward_min_ns: Option<i64>,
    pub reverse_min_ns: Option<i64>,
    /// Matched packets of host pairs past [`MAX_HOST_PAIRS`]: in no figure here.
    pub untallied: u64,
    /// The clocks' offset from the two directions, where both were matched.
    pub offset: Option<ReverseOffset>,
    /// Per address family, the prefixes holding every S-side and every R-side host of the
    /// pairs seen both ways, where the two are disjoint: `src net A and dst net B` keeps their
    /// S→R packets and none of their R→S ones.
    pub split: Vec<(Prefix, Prefix)>,
}

/// An address prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Prefix {
    pub addr: IpAddr,
    pub bits: u8,
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

fn bits_of(a: IpAddr) -> (u128, u8) {
    match a {
        IpAddr::V4(v) => (u128::from(u32::from(v)), 32),
        IpAddr::V6(v) => (u128::from(v), 128),
    }
}

fn prefix_of(x: u128, width: u8, bits: u8, v6: bool) -> Prefix {
    let mask = if bits == 0 {
        0
    } else {
        (u128::MAX << (width - bits)) & (u128::MAX >> (128 - width))
    };
    let n = x & mask;
    Prefix {
        addr: if v6 {
            IpAddr::V6(n.into())
        } else {
            IpAddr::V4((n as u32).into())
        },
        bits,
    }
}

/// The longest prefix holding `x` and `y` (same family, `width` bits).
fn common_bits(x: u128, y: u128, width: u8, bits: u8) -> u8 {
    let lead = ((x ^ y) << (128 - width))
        .leading_zeros()
        .min(u32::from(width)) as u8;
    lead.min(bits)
}

/// A running common prefix: an address of it and its length, in `width`-bit addresses.
#[derive(Clone, Copy)]
struct Common {
    addr: u128,
    bits: u8,
}

impl Common {
    fn of(a: IpAddr) -> Common {
        let (addr, bits) = bits_of(a);
        Common { addr, bits }
    }
    fn with(self, a: IpAddr, width: u8) -> Common {
        Common {
            addr: self.addr,
            bits: common_bits(self.addr, bits_of(a).0, width, self.bits),
        }
    }
}

/// Per family, the S-side and R-side prefixes of the pairs seen both ways, if disjoint.
fn split_of(both: &[BothWays]) -> Vec<(Prefix, Prefix)> {
    let mut out = Vec::new();
    for (v6, width) in [(false, 32u8), (true, 128)] {
        let mut acc: Option<(Common, Common)> = None;
        for b in both
            .iter()
            .filter(|b| b.sender.is_ipv6() == v6 && b.receiver.is_ipv6() == v6)
        {
            acc = Some(match acc {
                None => (Common::of(b.sender), Common::of(b.receiver)),
                Some((s, r)) => (s.with(b.sender, width), r.with(b.receiver, width)),
            });
        }
        let Some((s, r)) = acc else {
            continue;
        };
        // disjoint: they differ within the shorter prefix
        let shorter = s.bits.min(r.bits);
        if common_bits(s.addr, r.addr, width, shorter) < shorter {
            out.push((
                prefix_of(s.addr, width, s.bits, v6),
                prefix_of(r.addr, width, r.bits, v6),
            ));
        }
    }
    out
}

/// A host pair whose packets travel both ways between the points.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BothWays {
    /// Its host on S's side, and on R's side.
    pub sender: IpAddr,
    pub receiver: IpAddr,
    pub forward_packets: u64,
    pub reverse_packets: u64,
}

/// The offset of the two points' clocks from traffic in both directions (module doc).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ReverseOffset {
    /// S's clock minus R's: a true one-way delay is the measured one plus this, ns.
    pub offset_ns: i64,
    /// Whatever the two directions' asymmetry, the offset is within ± this, ns (half the
    /// smallest round trip); equal smallest delays both ways make it exact.
    pub bound_ns: i64,
}

impl ReverseOffset {
    /// From the smallest forward delay `f` (R's time minus S's) and the smallest reverse one
    /// `r` (S's time minus R's).
    pub fn of_minima(f: i64, r: i64) -> ReverseOffset {
        let (f, r) = (i128::from(f), i128::from(r));
        let half = |x: i128| i64::try_from(x.div_euclid(2)).unwrap_or(i64::MAX);
        ReverseOffset {
            offset_ns: half(r - f),
            bound_ns: half(f + r + 1).max(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: &str, dst: &str) -> FlowKey {
        FlowKey {
            proto: 6,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            sport: 1,
            dport: 2,
        }
    }

    /// Forward delays `d_f + θ`, reverse ones `θ − d_r`: the tally tells the directions apart
    /// and the offset comes back within its bound, exact when the smallest delays are equal.
    #[test]
    fn two_directions_give_the_offset_within_half_the_round_trip() {
        // R's clock reads θ = +2 ms more than S's
        for (theta, df_min, dr_min) in [
            (2_000_000i64, 100_000i64, 100_000i64),
            (2_000_000, 50_000, 300_000),
            (-700_000, 10_000, 10_000),
        ] {
            let mut t = DirectionTally::new();
            let (ab, ba) = (flow("10.0.0.1", "10.0.0.2"), flow("10.0.0.2", "10.0.0.1"));
            let other = flow("10.0.0.1", "10.0.0.9");
            for k in 0..100 {
                let s = t.slot(&ab);
                t.matched(s, df_min + k * 1000 + theta);
                let s = t.slot(&ba);
                t.matched(s, theta - (dr_min + k * 700));
                let s = t.slot(&other);
                t.matched(s, df_min + theta + 5);
            }
            let d = t.finish();
            assert_eq!(d.host_pairs_both_ways, 1);
            assert_eq!((d.forward_packets, d.reverse_packets), (200, 100));
            assert_eq!(
                (d.both_ways[0].sender, d.both_ways[0].receiver),
                (ab.src, ab.dst)
            );
            let o = d.offset.unwrap();
            // S's clock minus R's is −θ
            assert!((o.offset_ns + theta).abs() <= o.bound_ns, "{o:?} θ={theta}");
            assert_eq!(o.bound_ns, (df_min + dr_min) / 2);
            if df_min == dr_min {
                assert_eq!(o.offset_ns, -theta);
            }
        }
    }

    /// One direction only: no host pair both ways, no offset; past the cap, counted.
    #[test]
    fn one_way_traffic_has_no_offset_and_the_tally_is_bounded() {
        let mut t = DirectionTally::new();
        for k in 0..(MAX_HOST_PAIRS + 10) {
            let f = FlowKey {
                src: IpAddr::from([10, 0, (k >> 8) as u8, k as u8]),
                ..flow("10.0.0.1", "10.9.9.9")
            };
            let s = t.slot(&f);
            t.matched(s, 1000);
        }
        let d = t.finish();
        assert_eq!((d.host_pairs_both_ways, d.offset), (0, None));
        assert_eq!(
            (d.forward_packets, d.untallied),
            (MAX_HOST_PAIRS as u64, 10)
        );
    }

    /// The S-side and R-side prefixes of the pairs seen both ways, per family, when disjoint.
    #[test]
    fn the_split_names_disjoint_prefixes_per_family() {
        let b = |s: &str, r: &str| BothWays {
            sender: s.parse().unwrap(),
            receiver: r.parse().unwrap(),
            forward_packets: 1,
            reverse_packets: 1,
        };
        let split = split_of(&[
            b("10.1.2.3", "172.20.0.1"),
            b("10.9.0.1", "172.31.255.1"),
            b("fd6f::1", "fd77::2"),
        ]);
        let text: Vec<String> = split.iter().map(|(s, r)| format!("{s} {r}")).collect();
        assert_eq!(
            text,
            ["10.0.0.0/12 172.16.0.0/12", "fd6f::1/128 fd77::2/128"]
        );
        // hosts on both sides of one prefix: no split
        assert!(split_of(&[b("10.0.0.1", "10.0.0.2"), b("10.0.0.2", "10.0.0.3")]).is_empty());
    }
}
