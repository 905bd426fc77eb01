//! Several observation points fed by one traffic mix: the triangle of COLATE §6.2.1 ("three
//! observation points forming a triangle topology where everyone sends to and receives from
//! everyone else", six directed links).
//!
//! One [`Simulation`] draws the traffic and each packet's path delay as usual; each flow is
//! then pinned, by a hash of its key, to one directed link `X → Y` of the mesh. Point `X`
//! records the packet when it leaves (its sending time) and point `Y` when it arrives (its
//! arrival time plus the link's own propagation offset). Each point therefore sees its
//! outgoing and incoming links' traffic in one stream — the traffic of the links it is not on
//! never reaches it, and of the traffic it does see, only one link's is also seen by a given
//! peer.

use owl_core::PacketRecord;
use owl_core::hash::reduce;

use super::{SimConfig, SimError, Simulation, mix};

/// Seed of the flow-to-link hash.
const LINK_SEED: u64 = 0x6d65_7368_6c69_6e6b;

/// A directed link of the mesh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub from: usize,
    pub to: usize,
    /// Added to every arrival on this link (propagation), ns.
    pub offset_ns: u64,
}

/// Every point's stream, and each link's own sender and receiver records (for the truth).
pub struct Mesh {
    /// Point `i`'s records, in capture-time order.
    pub points: Vec<Vec<PacketRecord>>,
    pub links: Vec<Link>,
    /// Link `k`'s records at its sender and at its receiver (arrival times with the offset).
    pub link_records: Vec<(Vec<PacketRecord>, Vec<PacketRecord>)>,
}

impl Mesh {
    /// The link index of a flow.
    pub fn link_of(flow: &owl_core::FlowKey, links: usize) -> usize {
        reduce(mix(flow.hash(LINK_SEED)), links)
    }
}

/// Run `cfg` once and spread its flows over every directed link between `points` points; link
/// `k` adds `k·link_step_ns` of propagation.
pub fn mesh(
    cfg: &SimConfig,
    points: usize,
    link_step_ns: u64,
    identity_seed: u64,
) -> Result<Mesh, SimError> {
    if !(2..=16).contains(&points) {
        return Err(SimError::Invalid(format!(
            "a mesh needs 2 to 16 points, got {points}"
        )));
    }
    let links: Vec<Link> = (0..points)
        .flat_map(|a| (0..points).filter(move |&b| b != a).map(move |b| (a, b)))
        .enumerate()
        .map(|(k, (from, to))| Link {
            from,
            to,
            offset_ns: k as u64 * link_step_ns,
        })
        .collect();
    let sim = Simulation::run(cfg)?;
    let (s, r) = sim.records(identity_seed);
    drop(sim);
    let mut link_records = vec![(Vec::new(), Vec::new()); links.len()];
    let mut streams = vec![Vec::new(); points];
    for rec in s {
        let k = Mesh::link_of(&rec.flow, links.len());
        streams[links[k].from].push(rec);
        link_records[k].0.push(rec);
    }
    for rec in r {
        let k = Mesh::link_of(&rec.flow, links.len());
        let shifted = PacketRecord {
            ts_ns: rec.ts_ns.saturating_add(links[k].offset_ns),
            ..rec
        };
        streams[links[k].to].push(shifted);
        link_records[k].1.push(shifted);
    }
    for s in &mut streams {
        s.sort_by_key(|r| r.ts_ns);
    }
    for (_, r) in &mut link_records {
        r.sort_by_key(|r| r.ts_ns);
    }
    Ok(Mesh {
        points: streams,
        links,
        link_records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{TrafficConfig, TrafficSource};

    #[test]
    fn a_triangle_has_six_links_and_every_packet_twice() {
        let cfg = SimConfig {
            traffic: TrafficSource::Synthetic(TrafficConfig {
                packets: 6_000,
                flows: 120,
                ..TrafficConfig::default()
            }),
            ..SimConfig::default()
        };
        let m = mesh(&cfg, 3, 10_000, 1).unwrap();
        assert_eq!(m.links.len(), 6);
        let total: usize = m.points.iter().map(|p| p.len()).sum();
        assert_eq!(total, 2 * 6_000);
        for (k, l) in m.links.iter().enumerate() {
            let (s, r) = &m.link_records[k];
            assert!(!s.is_empty(), "link {k} carries no flow");
            assert_eq!(s.len(), r.len());
            // a link's packets are in its sender's and its receiver's streams, nowhere else
            let other = 3 - l.from - l.to;
            assert!(!m.points[other].iter().any(|x| x.id == s[0].id));
            assert!(m.points[l.from].iter().any(|x| x.id == s[0].id));
            assert!(m.points[l.to].iter().any(|x| x.id == s[0].id));
        }
        for p in &m.points {
            assert!(p.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
        }
        assert!(mesh(&cfg, 1, 0, 1).is_err());
    }
}
