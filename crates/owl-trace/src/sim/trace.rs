//! `--from`: the sender's traffic taken from a real single-point capture.

use std::path::Path;

use crate::capture::{CaptureError, CaptureReader};
use crate::dissect::{Skip, dissect, linktype_name};
use crate::records::InputStats;

use super::SimError;

#[derive(Clone, Copy, Debug)]
pub(crate) struct TracePacket {
    pub ts_ns: u64,
    pub start: usize,
    pub caplen: u32,
    pub orig_len: u32,
    pub ip_offset: u16,
    pub flow_hash: u64,
}

/// A capture held in memory (one arena of frame bytes).
pub(crate) struct TraceSource {
    pub arena: Vec<u8>,
    pub packets: Vec<TracePacket>,
    pub linktype: u32,
    pub stats: InputStats,
}

impl TraceSource {
    /// Load the IP packets of `path` (of pcapng interface `interface` only, when given; else
    /// of every interface, which must be alike: one link type and snaplen; timestamps are read
    /// at each interface's own resolution).
    pub fn load(path: &Path, interface: Option<u32>) -> Result<TraceSource, SimError> {
        let wrap = |e: CaptureError| SimError::Capture {
            path: path.display().to_string(),
            source: e,
        };
        let mut r = CaptureReader::open(path).map_err(wrap)?;
        r.select_interface(interface).map_err(wrap)?;
        // interfaces packets came from, checked alike at the end
        let mut seen: Vec<u32> = Vec::new();
        let mut t = TraceSource {
            arena: Vec::new(),
            packets: Vec::new(),
            linktype: u32::MAX,
            stats: InputStats::default(),
        };
        while let Some(p) = r.next_packet().map_err(wrap)? {
            if seen.last() != Some(&p.interface) && !seen.contains(&p.interface) {
                seen.push(p.interface);
            }
            t.stats.frames += 1;
            let d = match dissect(p.linktype, p.data) {
                Ok(d) => d,
                Err(Skip::NotIp) => {
                    t.stats.non_ip += 1;
                    continue;
                }
                Err(Skip::Malformed(_)) => {
                    t.stats.malformed += 1;
                    continue;
                }
                Err(Skip::UnsupportedLinkType) => {
                    return Err(wrap(CaptureError::UnsupportedLinkType {
                        offset: p.offset,
                        linktype: p.linktype,
                        name: linktype_name(p.linktype),
                    }));
                }
            };
            if t.linktype == u32::MAX {
                t.linktype = p.linktype;
            } else if t.linktype != p.linktype {
                return Err(SimError::Invalid(format!(
                    "{}: offset {}: --from needs a capture with one link type, found {} after {} (pick one interface with --interface N)",
                    path.display(),
                    p.offset,
                    linktype_name(p.linktype),
                    linktype_name(t.linktype)
                )));
            }
            if t.packets.len() >= u32::MAX as usize - 1 {
                return Err(SimError::Invalid(format!(
                    "{}: more packets than the simulator can hold",
                    path.display()
                )));
            }
            // link headers of PKTAP or NFLOG frames could in principle end beyond 64 KiB
            let Ok(ip_offset) = u16::try_from(d.ip_offset) else {
                t.stats.malformed += 1;
                continue;
            };
            t.stats.ip_packets += 1;
            t.stats.first_ns.get_or_insert(p.ts_ns);
            t.stats.last_ns = Some(p.ts_ns);
            t.packets.push(TracePacket {
                ts_ns: p.ts_ns,
                start: t.arena.len(),
                caplen: p.data.len() as u32,
                orig_len: p.orig_len,
                ip_offset,
                flow_hash: d.flow.hash(0x666c_6f77),
            });
            t.arena.extend_from_slice(p.data);
        }
        let kind = |n: u32| r.interfaces().get(n as usize).copied();
        if let Some(&other) = seen.iter().find(|&&n| kind(n) != kind(seen[0])) {
            return Err(SimError::Invalid(format!(
                "{}: interfaces {} and {other} differ in snaplen: --from takes one stream of packets; pick one with --interface N",
                path.display(),
                seen[0]
            )));
        }
        let rs = r.stats();
        t.stats.no_timestamp = rs.no_timestamp;
        t.stats.bad_timestamp = rs.bad_timestamp;
        t.stats.malformed += rs.bad_timestamp;
        t.stats.frames += rs.bad_timestamp;
        if t.packets.is_empty() {
            return Err(SimError::Invalid(format!(
                "{}: no IP packets with timestamps to take traffic from ({} frames, {} not IP)",
                path.display(),
                t.stats.frames,
                t.stats.non_ip
            )));
        }
        Ok(t)
    }

    pub fn frame(&self, i: usize, snaplen: u32, buf: &mut Vec<u8>) -> (usize, u32) {
        let p = &self.packets[i];
        let mut end = p.start + p.caplen as usize;
        if snaplen != 0 {
            end = end.min(p.start + snaplen as usize);
        }
        buf.clear();
        buf.extend_from_slice(&self.arena[p.start..end]);
        (p.ip_offset as usize, p.orig_len)
    }
}
