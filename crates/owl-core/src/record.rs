//! The packet record: what one observation point knows of one packet.

use std::fmt;

use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr};

/// IANA IP protocol numbers (IPv4 protocol, IPv6 next header) the dissector reads and tables name.
pub mod ipproto {
    pub const HOPOPTS: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const DSTOPTS: u8 = 60;
    pub const SCTP: u8 = 132;
    pub const MOBILITY: u8 = 135;
    pub const UDPLITE: u8 = 136;
    pub const HIP: u8 = 139;
    pub const SHIM6: u8 = 140;
    /// RFC 3692 experimentation and testing.
    pub const EXPERIMENT1: u8 = 253;
    pub const EXPERIMENT2: u8 = 254;
}

/// A 5-tuple flow key.
///
/// For TCP and UDP the ports are the transport ports. For ICMP and ICMPv6 echo-like messages
/// `sport` carries the identifier and `dport` carries `type << 8 | code`, so that a ping session
/// is one flow per direction; other ICMP messages have `sport = 0`. For any other protocol, and
/// for non-first IP fragments, both ports are 0.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub struct FlowKey {
    /// IP protocol number (IPv6: the upper-layer protocol after extension headers).
    pub proto: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
}

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey {
            proto: 0,
            src: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            sport: 0,
            dport: 0,
        }
    }
}

impl FlowKey {
    /// A canonical 37-byte encoding (protocol, addresses as 16 bytes each with IPv4 mapped into
    /// IPv6, ports big-endian), the input of every flow hash so that S and R agree.
    pub fn canonical_bytes(&self) -> [u8; 37] {
        let mut b = [0u8; 37];
        b[0] = self.proto;
        b[1..17].copy_from_slice(&v6_octets(self.src));
        b[17..33].copy_from_slice(&v6_octets(self.dst));
        b[33..35].copy_from_slice(&self.sport.to_be_bytes());
        b[35..37].copy_from_slice(&self.dport.to_be_bytes());
        b
    }

    /// The key [`canonical_bytes`](Self::canonical_bytes) encoded. An IPv4-mapped IPv6
    /// address (`::ffff:a.b.c.d`) reads back as IPv4, like every IPv4 address written.
    pub fn from_canonical_bytes(b: &[u8; 37]) -> FlowKey {
        let addr = |o: &[u8]| -> IpAddr {
            let v6 = std::net::Ipv6Addr::from(<[u8; 16]>::try_from(o).unwrap());
            match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            }
        };
        FlowKey {
            proto: b[0],
            src: addr(&b[1..17]),
            dst: addr(&b[17..33]),
            sport: u16::from_be_bytes([b[33], b[34]]),
            dport: u16::from_be_bytes([b[35], b[36]]),
        }
    }

    /// The same conversation the other way: addresses and ports swapped.
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            proto: self.proto,
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
        }
    }

    /// Seeded 64-bit flow hash (xxh3 of [`canonical_bytes`](Self::canonical_bytes)).
    pub fn hash(&self, seed: u64) -> u64 {
        xxhash_rust::xxh3::xxh3_64_with_seed(&self.canonical_bytes(), seed)
    }

    /// Short protocol name for tables.
    pub fn proto_name(&self) -> String {
        match self.proto {
            ipproto::ICMP => "icmp".into(),
            ipproto::TCP => "tcp".into(),
            ipproto::UDP => "udp".into(),
            ipproto::ICMPV6 => "icmp6".into(),
            p => format!("ip{p}"),
        }
    }
}

/// The address as 16 bytes, IPv4 mapped into IPv6 (`::ffff:a.b.c.d`, RFC 4291 §2.5.5.2),
/// written out directly: this runs for every packet of every sketch.
#[inline]
fn v6_octets(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            [
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, o[0], o[1], o[2], o[3],
            ]
        }
        IpAddr::V6(v6) => v6.octets(),
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, d) = (self.src, self.dst);
        match (s, d) {
            (IpAddr::V6(_), _) | (_, IpAddr::V6(_)) => write!(
                f,
                "{} [{}]:{} > [{}]:{}",
                self.proto_name(),
                s,
                self.sport,
                d,
                self.dport
            ),
            _ => write!(
                f,
                "{} {}:{} > {}:{}",
                self.proto_name(),
                s,
                self.sport,
                d,
                self.dport
            ),
        }
    }
}

/// One packet as seen at one observation point.
///
/// `id` is the packet identity: a seeded 64-bit hash of the bytes routers do not change (see
/// `owl_trace::identity`), equal at S and R for the same packet. Every per-method hash (row,
/// bank, sampling, sign, digest) is derived from it through [`crate::hash::HashFamily`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PacketRecord {
    /// Capture timestamp in nanoseconds since the Unix epoch, by this point's clock.
    pub ts_ns: u64,
    /// Packet identity.
    pub id: u64,
    /// 5-tuple flow key.
    pub flow: FlowKey,
    /// IP length of the packet on the wire (header included), from the IP header.
    pub len: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    #[test]
    fn canonical_bytes_distinguish_v4_and_v6_and_direction() {
        let a = FlowKey {
            proto: 6,
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            sport: 1000,
            dport: 443,
        };
        let mut b = a;
        std::mem::swap(&mut b.src, &mut b.dst);
        assert_ne!(a.canonical_bytes(), b.canonical_bytes());
        let c = FlowKey {
            src: IpAddr::V6(Ipv6Addr::LOCALHOST),
            ..a
        };
        assert_ne!(a.hash(1), c.hash(1));
        assert_eq!(a.hash(7), a.hash(7));
        assert_ne!(a.hash(7), a.hash(8));
        for k in [a, b, c] {
            assert_eq!(FlowKey::from_canonical_bytes(&k.canonical_bytes()), k);
        }
        let v4: std::net::Ipv4Addr = "10.0.0.1".parse().unwrap();
        assert_eq!(v6_octets(IpAddr::V4(v4)), v4.to_ipv6_mapped().octets());
    }

    #[test]
    fn display_uses_rfc5952_for_v6() {
        let k = FlowKey {
            proto: 17,
            src: "2001:db8:0:0:0:0:0:1".parse().unwrap(),
            dst: "2001:db8::2".parse().unwrap(),
            sport: 53,
            dport: 5353,
        };
        assert_eq!(k.to_string(), "udp [2001:db8::1]:53 > [2001:db8::2]:5353");
    }
}
