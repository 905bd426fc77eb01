//! Exact per-packet matching: the store-everything method every synopsis is judged against.
//!
//! The naive solution of LDA §III-A: each point keeps the identity and timestamp of every
//! packet; the sender ships all of them (16 bytes a packet) and the receiver matches them by
//! identity. owl uses it as the ground truth of every comparison, on the same records the
//! synopses see.
//!
//! # Duplicate identities
//!
//! Within one point, the **first sighting** of an identity (in capture order) is the packet;
//! later sightings are counted as duplicates of that point and take no part in delays:
//! - at R they are network duplicates (`duplicated`);
//! - at S they are either a packet the sender emitted twice with identical bytes, or two
//!   different packets whose 64-bit identities collide (probability about `N²/2⁶⁵` for `N`
//!   packets, ~7·10⁻⁷ for 5 M packets); either way `sender_duplicates` counts them.
//!
//! A delay is therefore `first sighting at R − first sighting at S`.
//!
//! # Reordering
//!
//! A received packet is *reordered* in the sense of RFC 4737 (type-P-Reordered): its sending
//! position (its rank in S's capture order) is lower than that of a packet R already received.
//!
//! # Intervals
//!
//! With clock-delimited intervals (see [`crate::interval`]) each interval's truth is the set of
//! packets matched *within the interval*: recorded in interval `i` at S and in interval `i` by
//! R's clock. That is what a synopsis built per interval can measure; packets crossing a boundary
//! are counted in `left` (at S) and `unexpected` (at R) of their intervals.

use hashbrown::HashMap;
use serde::Serialize;
use thiserror::Error;

use crate::interval::Intervals;
use crate::record::{FlowKey, PacketRecord};
use crate::stats::DelaySummary;

/// What the exact matcher computes besides the overall numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TruthOptions {
    pub intervals: Intervals,
    /// Compute per-flow truth (a sort of all delays by flow).
    pub per_flow: bool,
    /// Keep the identities of unmatched packets of each side.
    pub keep_unmatched: bool,
    /// Keep each packet's flow for [`Matcher::matched`] (implied by `per_flow`).
    pub keep_flows: bool,
}

impl Default for TruthOptions {
    fn default() -> Self {
        TruthOptions {
            intervals: Intervals::WHOLE,
            per_flow: false,
            keep_unmatched: false,
            keep_flows: false,
        }
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum MatchError {
    #[error(
        "the sender capture holds more than {max} distinct packets, the most exact matching can index"
    )]
    TooManyPackets { max: u64 },
}

const NOT_RECEIVED: u64 = u64::MAX;
const NO_FLOW: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Sent {
    ts_ns: u64,
    id: u64,
    recv_ns: u64,
    flow: u32,
}

#[derive(Clone, Copy, Debug)]
struct Unexpected {
    ts_ns: u64,
    id: u64,
}

/// The read-everything exact matcher. Feed every sender record, then every receiver record,
/// then [`finish`]. owl's commands, the exact method and the experiments use the streaming
/// [`crate::pipeline::truth`] instead, which gives the same figures in bounded memory; this one
/// stays as the plain reference the streaming truth is tested against.
///
/// Memory is about 50 bytes per distinct sender packet.
///
/// [`finish`]: Matcher::finish
pub struct Matcher {
    opts: TruthOptions,
    sent: Vec<Sent>,
    by_id: HashMap<u64, u32>,
    flow_index: HashMap<FlowKey, u32>,
    flows: Vec<FlowKey>,
    sender_records: u64,
    sender_duplicates: u64,
    receiver_records: u64,
    receiver_duplicates: u64,
    reordered: u64,
    max_send_rank: Option<u32>,
    unexpected: Vec<Unexpected>,
    unexpected_ids: HashMap<u64, ()>,
}

/// One matched packet, for per-packet output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MatchedPacket {
    pub id: u64,
    pub sender_ns: u64,
    pub receiver_ns: u64,
    pub flow: FlowKey,
}

impl MatchedPacket {
    pub fn delay_ns(&self) -> i64 {
        self.receiver_ns.wrapping_sub(self.sender_ns) as i64
    }
}

impl Matcher {
    pub fn new(opts: TruthOptions) -> Matcher {
        Matcher {
            opts,
            sent: Vec::new(),
            by_id: HashMap::new(),
            flow_index: HashMap::new(),
            flows: Vec::new(),
            sender_records: 0,
            sender_duplicates: 0,
            receiver_records: 0,
            receiver_duplicates: 0,
            reordered: 0,
            max_send_rank: None,
            unexpected: Vec::new(),
            unexpected_ids: HashMap::new(),
        }
    }

    /// Expected number of sender packets, to size the tables once.
    pub fn reserve(&mut self, packets: usize) {
        self.sent.reserve(packets);
        self.by_id.reserve(packets);
    }

    fn flow_of(&mut self, key: &FlowKey) -> u32 {
        if let Some(&i) = self.flow_index.get(key) {
            return i;
        }
        let i = self.flows.len() as u32;
        self.flows.push(*key);
        self.flow_index.insert(*key, i);
        i
    }

    /// Record one packet seen at the sender.
    pub fn add_sender(&mut self, rec: &PacketRecord) -> Result<(), MatchError> {
        self.sender_records += 1;
        let rank = self.sent.len();
        if rank >= u32::MAX as usize {
            return Err(MatchError::TooManyPackets {
                max: u32::MAX as u64,
            });
        }
        match self.by_id.entry(rec.id) {
            hashbrown::hash_map::Entry::Occupied(_) => {
                self.sender_duplicates += 1;
                return Ok(());
            }
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(rank as u32);
            }
        }
        let flow = if self.opts.per_flow || self.opts.keep_flows {
            self.flow_of(&rec.flow)
        } else {
            NO_FLOW
        };
        self.sent.push(Sent {
            ts_ns: rec.ts_ns,
            id: rec.id,
            recv_ns: NOT_RECEIVED,
            flow,
        });
        Ok(())
    }

    /// Record one packet seen at the receiver (after every sender packet).
    pub fn add_receiver(&mut self, rec: &PacketRecord) {
        self.receiver_records += 1;
        match self.by_id.get(&rec.id) {
            Some(&rank) => {
                let s = &mut self.sent[rank as usize];
                if s.recv_ns != NOT_RECEIVED {
                    self.receiver_duplicates += 1;
                    return;
                }
                // A timestamp of u64::MAX would read as "not received": nudge it (2554 AD).
                s.recv_ns = rec.ts_ns.min(NOT_RECEIVED - 1);
                match self.max_send_rank {
                    Some(m) if rank < m => self.reordered += 1,
                    _ => self.max_send_rank = Some(rank),
                }
            }
            None => {
                if self.unexpected_ids.insert(rec.id, ()).is_some() {
                    self.receiver_duplicates += 1;
                } else {
                    self.unexpected.push(Unexpected {
                        ts_ns: rec.ts_ns,
                        id: rec.id,
                    });
                }
            }
        }
    }

    /// Every matched packet, in sender order (flows are default keys unless `keep_flows` or
    /// `per_flow` was set).
    pub fn matched(&self) -> impl Iterator<Item = MatchedPacket> + '_ {
        self.sent
            .iter()
            .filter(|s| s.recv_ns != NOT_RECEIVED)
            .map(|s| MatchedPacket {
                id: s.id,
                sender_ns: s.ts_ns,
                receiver_ns: s.recv_ns,
                flow: self.flows.get(s.flow as usize).copied().unwrap_or_default(),
            })
    }

    /// Compute the truth.
    pub fn finish(&self) -> Truth {
        let iv = self.opts.intervals;
        let mut delays: Vec<i64> = Vec::with_capacity(self.sent.len());
        let mut negative = 0u64;
        let mut lost_ids = Vec::new();
        for s in &self.sent {
            if s.recv_ns == NOT_RECEIVED {
                if self.opts.keep_unmatched {
                    lost_ids.push(s.id);
                }
                continue;
            }
            let d = s.recv_ns.wrapping_sub(s.ts_ns) as i64;
            negative += (d < 0) as u64;
            delays.push(d);
        }
        let received = delays.len() as u64;
        let delay = DelaySummary::from_delays(&mut delays);
        drop(delays);

        let (intervals, in_interval) = if iv.is_whole() {
            (Vec::new(), delay)
        } else {
            self.interval_truth()
        };

        let flows = if self.opts.per_flow {
            self.flow_truth()
        } else {
            Vec::new()
        };

        Truth {
            sender_records: self.sender_records,
            receiver_records: self.receiver_records,
            sent: self.sent.len() as u64,
            received,
            lost: self.sent.len() as u64 - received,
            sender_duplicates: self.sender_duplicates,
            duplicated: self.receiver_duplicates,
            unexpected: self.unexpected.len() as u64,
            reordered: self.reordered,
            negative_delays: negative,
            delay,
            in_interval,
            intervals,
            flows,
            lost_ids,
            unexpected_ids: if self.opts.keep_unmatched {
                self.unexpected.iter().map(|u| u.id).collect()
            } else {
                Vec::new()
            },
        }
    }

    fn interval_truth(&self) -> (Vec<IntervalTruth>, Option<DelaySummary>) {
        let iv = self.opts.intervals;
        let mut acc: std::collections::BTreeMap<u64, IntervalTruth> = Default::default();
        fn at(
            acc: &mut std::collections::BTreeMap<u64, IntervalTruth>,
            iv: Intervals,
            i: u64,
        ) -> &mut IntervalTruth {
            acc.entry(i).or_insert_with(|| IntervalTruth {
                index: i,
                start_ns: iv.start_ns(i),
                ..Default::default()
            })
        }
        let mut pairs: Vec<(u64, i64)> = Vec::new();
        for s in &self.sent {
            // Packets before the agreed origin belong to no interval.
            let Some(si) = iv.index(s.ts_ns) else {
                continue;
            };
            at(&mut acc, iv, si).sent += 1;
            if s.recv_ns == NOT_RECEIVED {
                at(&mut acc, iv, si).lost += 1;
                continue;
            }
            match iv.index(s.recv_ns) {
                Some(ri) if ri == si => {
                    let e = at(&mut acc, iv, si);
                    e.received += 1;
                    e.matched += 1;
                    pairs.push((si, s.recv_ns.wrapping_sub(s.ts_ns) as i64));
                }
                Some(ri) => {
                    at(&mut acc, iv, si).left += 1;
                    let e = at(&mut acc, iv, ri);
                    e.received += 1;
                    e.unexpected += 1;
                }
                None => at(&mut acc, iv, si).left += 1,
            }
        }
        for u in &self.unexpected {
            if let Some(ri) = iv.index(u.ts_ns) {
                let e = at(&mut acc, iv, ri);
                e.received += 1;
                e.unexpected += 1;
            }
        }
        pairs.sort_unstable();
        let mut all: Vec<i64> = pairs.iter().map(|p| p.1).collect();
        for group in pairs.chunk_by(|a, b| a.0 == b.0) {
            let ds: Vec<i64> = group.iter().map(|p| p.1).collect();
            acc.get_mut(&group[0].0).unwrap().delay = Some(DelaySummary::from_sorted(&ds));
        }
        let overall = DelaySummary::from_delays(&mut all);
        (acc.into_values().collect(), overall)
    }

    fn flow_truth(&self) -> Vec<FlowTruth> {
        let mut sent = vec![0u64; self.flows.len()];
        let mut pairs: Vec<(u32, i64)> = Vec::with_capacity(self.sent.len());
        for s in &self.sent {
            sent[s.flow as usize] += 1;
            if s.recv_ns != NOT_RECEIVED {
                pairs.push((s.flow, s.recv_ns.wrapping_sub(s.ts_ns) as i64));
            }
        }
        flow_truth(&self.flows, &sent, pairs)
    }
}

/// Per-flow truth from each flow's sender count and `(flow index, delay)` of every matched
/// packet: delays summarised per flow in sorted order.
pub(crate) fn flow_truth(
    keys: &[FlowKey],
    sent: &[u64],
    mut pairs: Vec<(u32, i64)>,
) -> Vec<FlowTruth> {
    let mut out: Vec<FlowTruth> = keys
        .iter()
        .zip(sent)
        .map(|(k, &sent)| FlowTruth {
            key: *k,
            sent,
            received: 0,
            delay: None,
            records: 1,
        })
        .collect();
    pairs.sort_unstable();
    for group in pairs.chunk_by(|a, b| a.0 == b.0) {
        let ds: Vec<i64> = group.iter().map(|p| p.1).collect();
        let f = &mut out[group[0].0 as usize];
        f.received = ds.len() as u64;
        f.delay = Some(DelaySummary::from_sorted(&ds));
    }
    out
}

/// Exact truth of a capture pair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Truth {
    /// All records at S, duplicates included.
    pub sender_records: u64,
    /// All records at R, duplicates included.
    pub receiver_records: u64,
    /// Distinct packets at S.
    pub sent: u64,
    /// Distinct packets of S that reached R.
    pub received: u64,
    /// Distinct packets of S that never reached R.
    pub lost: u64,
    /// Extra sightings of an identity at S (see the module doc).
    pub sender_duplicates: u64,
    /// Extra copies of a packet at R (network duplicates).
    pub duplicated: u64,
    /// Distinct packets at R never seen at S.
    pub unexpected: u64,
    /// Received packets overtaken by a later-sent packet (RFC 4737).
    pub reordered: u64,
    /// Matched packets whose R timestamp precedes their S timestamp.
    pub negative_delays: u64,
    /// Delays of every matched packet.
    pub delay: Option<DelaySummary>,
    /// Delays of packets matched within their interval (equal to `delay` for one interval):
    /// what per-interval synopses can measure.
    pub in_interval: Option<DelaySummary>,
    /// Per-interval truth (empty for one interval).
    pub intervals: Vec<IntervalTruth>,
    /// Per-flow truth (empty unless asked for).
    pub flows: Vec<FlowTruth>,
    /// Identities sent and never received (only if asked for).
    #[serde(skip)]
    pub lost_ids: Vec<u64>,
    /// Identities received and never sent (only if asked for).
    #[serde(skip)]
    pub unexpected_ids: Vec<u64>,
}

/// Truth of one interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IntervalTruth {
    pub index: u64,
    pub start_ns: u64,
    /// Distinct packets S recorded in this interval.
    pub sent: u64,
    /// Distinct packets R recorded in this interval.
    pub received: u64,
    /// Packets recorded in this interval at both points.
    pub matched: u64,
    /// Sent in this interval and never received.
    pub lost: u64,
    /// Sent in this interval and received in another one (in flight at the boundary).
    pub left: u64,
    /// Received in this interval but not sent in it (sent earlier, or never seen at S).
    pub unexpected: u64,
    /// Packets of this interval only one point could have seen (outside the other capture's
    /// span): in no other figure ([`crate::pipeline::TruthConfig::trim`]).
    pub trimmed: u64,
    /// Delays of the `matched` packets.
    pub delay: Option<DelaySummary>,
}

/// Truth of one flow.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowTruth {
    pub key: FlowKey,
    pub sent: u64,
    pub received: u64,
    pub delay: Option<DelaySummary>,
    /// Flow records merged into this one: 1, unless the flow fell idle for longer than the
    /// streaming truth's horizon and came back (each stretch is closed and freed as it ends,
    /// like NetFlow's inactive timeout). Count, mean, std, min and max are merged exactly (up to
    /// rounding); the quantiles are those of the record with the most matched packets.
    pub records: u32,
}

impl FlowTruth {
    /// Merge a later record of the same flow into this one.
    pub fn merge(&mut self, b: FlowTruth) {
        self.sent += b.sent;
        self.received += b.received;
        self.records += b.records;
        self.delay = match (self.delay, b.delay) {
            (Some(x), Some(y)) => {
                let (n1, n2) = (x.count as f64, y.count as f64);
                let n = n1 + n2;
                let mean = (x.mean_ns * n1 + y.mean_ns * n2) / n;
                let var = (n1 * (x.std_ns.powi(2) + (x.mean_ns - mean).powi(2))
                    + n2 * (y.std_ns.powi(2) + (y.mean_ns - mean).powi(2)))
                    / n;
                let big = if y.count > x.count { y } else { x };
                Some(DelaySummary {
                    count: x.count + y.count,
                    mean_ns: mean,
                    std_ns: var.max(0.0).sqrt(),
                    min_ns: x.min_ns.min(y.min_ns),
                    max_ns: x.max_ns.max(y.max_ns),
                    ..big
                })
            }
            (a, b) => a.or(b),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, ts: u64) -> PacketRecord {
        PacketRecord {
            ts_ns: ts,
            id,
            ..Default::default()
        }
    }

    #[test]
    fn counts_loss_duplicates_reordering() {
        let mut m = Matcher::new(TruthOptions::default());
        for i in 0..10 {
            m.add_sender(&rec(i, 100 * i)).unwrap();
        }
        m.add_sender(&rec(3, 999)).unwrap(); // a sender duplicate: ignored
        // R: 0,1,2 in order, 4 overtakes 3, 5 duplicated, 6 lost, 7,8,9, unexpected 77 twice
        for (id, ts) in [
            (0, 10),
            (1, 110),
            (2, 210),
            (4, 410),
            (3, 420),
            (5, 510),
            (5, 515),
            (7, 710),
            (8, 810),
            (9, 910),
            (77, 920),
            (77, 930),
        ] {
            m.add_receiver(&rec(id, ts));
        }
        let t = m.finish();
        assert_eq!(t.sent, 10);
        assert_eq!(t.sender_duplicates, 1);
        assert_eq!(t.received, 9);
        assert_eq!(t.lost, 1);
        assert_eq!(t.duplicated, 2);
        assert_eq!(t.unexpected, 1);
        assert_eq!(t.reordered, 1);
        let d = t.delay.unwrap();
        // delays: 10 each except packet 3: 420 − 300 = 120
        assert_eq!(d.count, 9);
        assert_eq!(d.max_ns, 120);
        assert!((d.mean_ns - (8.0 * 10.0 + 120.0) / 9.0).abs() < 1e-12);
    }

    #[test]
    fn interval_boundaries_split_truth() {
        let mut m = Matcher::new(TruthOptions {
            intervals: Intervals::aligned(1000),
            ..Default::default()
        });
        // packet 1 sent at 990, received at 1010: crosses the boundary
        m.add_sender(&rec(1, 990)).unwrap();
        m.add_sender(&rec(2, 500)).unwrap();
        m.add_sender(&rec(3, 1500)).unwrap();
        m.add_receiver(&rec(2, 520));
        m.add_receiver(&rec(1, 1010));
        m.add_receiver(&rec(3, 1530));
        let t = m.finish();
        assert_eq!(t.intervals.len(), 2);
        let (a, b) = (&t.intervals[0], &t.intervals[1]);
        assert_eq!(
            (a.sent, a.received, a.matched, a.left, a.unexpected),
            (2, 1, 1, 1, 0)
        );
        assert_eq!(
            (b.sent, b.received, b.matched, b.left, b.unexpected),
            (1, 2, 1, 0, 1)
        );
        assert_eq!(a.delay.unwrap().mean_ns, 20.0);
        assert_eq!(b.delay.unwrap().mean_ns, 30.0);
        assert_eq!(t.in_interval.unwrap().count, 2);
        assert_eq!(t.delay.unwrap().count, 3);
    }

    #[test]
    fn per_flow_and_unmatched() {
        let mut m = Matcher::new(TruthOptions {
            per_flow: true,
            keep_unmatched: true,
            ..Default::default()
        });
        let mut a = rec(1, 0);
        a.flow.sport = 1;
        let mut b = rec(2, 0);
        b.flow.sport = 2;
        let mut c = rec(3, 0);
        c.flow.sport = 2;
        for r in [a, b, c] {
            m.add_sender(&r).unwrap();
        }
        m.add_receiver(&rec(1, 5));
        m.add_receiver(&rec(2, 7));
        m.add_receiver(&rec(9, 7));
        let t = m.finish();
        assert_eq!(t.flows.len(), 2);
        assert_eq!((t.flows[1].sent, t.flows[1].received), (2, 1));
        assert_eq!(t.lost_ids, vec![3]);
        assert_eq!(t.unexpected_ids, vec![9]);
        assert_eq!(m.matched().count(), 2);
    }

    #[test]
    fn negative_delays_are_counted() {
        let mut m = Matcher::new(TruthOptions::default());
        m.add_sender(&rec(1, 100)).unwrap();
        m.add_receiver(&rec(1, 40));
        let t = m.finish();
        assert_eq!(t.negative_delays, 1);
        assert_eq!(t.delay.unwrap().mean_ns, -60.0);
    }
}

/// The exact method as a point synopsis, so that `owl record` / `owl estimate` can run the
/// store-everything baseline between two real points: each point keeps every (identity,
/// timestamp), 16 bytes a packet, and the estimate is the [`Matcher`] over them.
pub mod method {

    use crate::method::{Estimate, MethodError, TypedMethod, TypedSynopsis};
    use crate::record::PacketRecord;
    use crate::wire::{DecodeError, WireReader, WireWriter};

    use crate::interval::Intervals;
    use crate::pipeline::truth::{TruthConfig, truth_of};

    /// Bytes a packet costs on the wire: identity and timestamp.
    pub const BYTES_PER_PACKET: u64 = 16;

    /// The exact method.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ExactMethod;

    /// Every (identity, timestamp) one point saw in an interval, in capture order.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct Synopsis {
        pub packets: Vec<(u64, u64)>,
    }

    impl TypedSynopsis for Synopsis {
        const METHOD: &'static str = "exact";
        fn record(&mut self, rec: &PacketRecord) {
            self.packets.push((rec.id, rec.ts_ns));
        }
        fn encoded_len(&self) -> usize {
            8 + 16 * self.packets.len()
        }
        fn shipped_len(&self) -> Option<u64> {
            Some(BYTES_PER_PACKET * self.packets.len() as u64)
        }
        fn encode(&self, out: &mut Vec<u8>) {
            let mut w = WireWriter::new(out);
            w.reserve(self.encoded_len());
            w.u64(self.packets.len() as u64);
            for &(id, ts) in &self.packets {
                w.u64(id);
                w.u64(ts);
            }
        }
        /// Both logs one after the other: `later`'s packets appended in their capture order.
        fn merge(&mut self, later: Synopsis) -> Result<(), MethodError> {
            self.packets.extend_from_slice(&later.packets);
            Ok(())
        }
    }

    /// `exact`: the store-everything method, which has no configuration.
    pub const INFO: crate::method::MethodInfo = crate::method::MethodInfo {
        name: "exact",
        summary: "store every (identity, timestamp) and match them: the ground truth, 16 B a packet",
        samples: "packets matched within their interval",
        per_flow: false,
        crosses: "every (identity, timestamp) of both points, 16 B a packet each, to one place; no round trip",
        per_packet: false,
        recovers_delays: false,
        build: |_| Ok(Box::new(ExactMethod)),
        from_config: |pairs| match pairs.first() {
            Some((k, _)) => Err(MethodError::Invalid(format!(
                "the exact method has no configuration, but the file sets '{k}'"
            ))),
            None => Ok(Box::new(ExactMethod)),
        },
    };

    impl TypedMethod for ExactMethod {
        type Config = ();
        type Sender = Synopsis;
        type Receiver = Synopsis;
        fn name(&self) -> &str {
            "exact"
        }
        fn config(&self) -> &() {
            &()
        }
        fn foreign(&self) -> crate::method::Foreign {
            crate::method::Foreign::Matches("every packet")
        }
        fn new_sender(&self) -> Synopsis {
            Synopsis::default()
        }
        fn new_receiver(&self) -> Synopsis {
            Synopsis::default()
        }
        fn decode_sender(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
            decode(bytes)
        }
        fn decode_receiver(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
            decode(bytes)
        }
        fn estimate(&self, s: Synopsis, r: Synopsis) -> Result<Estimate, MethodError> {
            estimate(&s, &r)
        }
    }

    /// A point's log from its payload.
    pub fn decode(bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        let mut r = WireReader::new(bytes);
        let n = r.u64("packet count")?;
        if n.checked_mul(16) != Some(r.remaining() as u64) {
            return Err(r.invalid(format!(
                "exact synopsis claims {n} packets but holds {} bytes",
                r.remaining()
            )));
        }
        let mut p = Synopsis {
            packets: Vec::with_capacity(n as usize),
        };
        for _ in 0..n {
            p.packets.push((r.u64("identity")?, r.u64("timestamp")?));
        }
        Ok(p)
    }

    /// The pair estimator: the exact match of both logs.
    pub fn estimate(s: &Synopsis, r: &Synopsis) -> Result<Estimate, MethodError> {
        let recs = |v: &[(u64, u64)]| -> Vec<PacketRecord> {
            v.iter()
                .map(|&(id, ts)| PacketRecord {
                    ts_ns: ts,
                    id,
                    ..Default::default()
                })
                .collect()
        };
        let (t, _) = truth_of(
            &recs(&s.packets),
            &recs(&r.packets),
            TruthConfig::new(Intervals::WHOLE, u64::MAX),
        );
        let mut notes = Vec::new();
        if t.unexpected > 0 {
            notes.push(format!("{} packets only at the receiver", t.unexpected));
        }
        Ok(Estimate {
            reason: None,
            quantiles: None,
            recovered: None,
            mean_ns: t.delay.map(|d| d.mean_ns),
            std_ns: t.delay.map(|d| d.std_ns),
            samples: t.received,
            bytes: BYTES_PER_PACKET * s.packets.len() as u64,
            lost: Some(t.lost),
            mean_ci98_ns: None,
            std_ci95_ns: None,
            notes,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::method::{Method, Role};

        #[test]
        fn exact_method_roundtrip_and_estimate() {
            let m: &dyn Method = &ExactMethod;
            let mut s = m.new_point(Role::Sender);
            let mut r = m.new_point(Role::Receiver);
            for i in 0..100u64 {
                let rec = PacketRecord {
                    ts_ns: 1000 * i,
                    id: i,
                    ..Default::default()
                };
                s.record(&rec);
                if i % 10 != 0 {
                    r.record(&PacketRecord {
                        ts_ns: rec.ts_ns + 50 + i,
                        ..rec
                    });
                }
            }
            let mut b = Vec::new();
            s.encode(&mut b);
            assert_eq!(b.len(), s.encoded_len());
            let s2 = m.decode_point(Role::Sender, &b).unwrap();
            let e = m.estimate(s2, r).unwrap();
            assert_eq!(e.samples, 90);
            assert_eq!(e.lost, Some(10));
            let want = (1..100)
                .filter(|i| i % 10 != 0)
                .map(|i| 50.0 + i as f64)
                .sum::<f64>()
                / 90.0;
            assert!((e.mean_ns.unwrap() - want).abs() < 1e-9);
            assert!(m.decode_point(Role::Sender, &b[..b.len() - 1]).is_err());
            assert!(m.decode_point(Role::Sender, &[0xff; 8]).is_err());
        }
    }
}
