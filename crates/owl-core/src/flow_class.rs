//! Flow classes: the recovered delays of the quantile methods broken down by the kind of
//! traffic they belong to.
//!
//! A **flow class** is a packet's IP protocol and its *service port*, the smaller of its two
//! transport ports. For client–server traffic that is the server's port, since clients draw
//! theirs from the ephemeral range above the common services (Linux 32768–60999, IANA
//! 49152–65535): `tcp/443` holds the requests to a web server and its replies alike, whichever
//! way the measured path carries them. (A client bound to a low port, or two high service
//! ports, are classed by the smaller one all the same.) Protocols
//! without ports (ICMP, ESP, …) are one class each. Operators page on "p99 of DNS" or "p99 of
//! the video port", not on one 5-tuple, and classes stay few where flows do not.
//!
//! Both points see the same packets, so the class of a recovered delay is read where the
//! packet's identity is known: R's records of the interval ([`crate::method::RecoveredPacket`]
//! carries the identity), which a [`ClassTap`] keeps, identity → class, for the interval while
//! it is open (capped at [`DEFAULT_TAP_CAPACITY`] identities, the rest counted). Nothing about
//! classes crosses the network; the synopses are the same with or without them. The tap is a
//! point synopsis of its own ([`ClassTapMethod`]), so a point's pipeline cuts it into intervals
//! exactly as it cuts the methods' synopses.
//!
//! [`ClassBook`] names the classes in the order they are first seen (within an interval, the
//! busiest first), up to a cap; the traffic of every class past it is folded into one `other`
//! slot, and the classes and packets folded are counted. [`ClassDelays`] keeps one mergeable [`RecoveredDelays`] (a relative-error
//! histogram, with what its intervals rest on) per slot, merged interval after interval, so a
//! class's quantiles over the whole run are those of its delays together (never an average of
//! per-interval quantiles), in memory bounded by the cap times the histogram's.
//!
//! The quantile intervals per class are those of [`RecoveredDelays::interval`] with the
//! interval's basis: a class's samples are a uniform sample of the class's delivered packets
//! (the sampling hash is independent of the class), so the sampled fraction is the interval's;
//! for placed delays (OPA), the received packets of the class left unplaced are allowed for:
//! the class's received packets (counted from R's records) less those placed, or, where they
//! are not counted, every packet the interval left unplaced (sound, and wider than need be).

use std::fmt;

use hashbrown::HashMap;
use serde::Serialize;

use crate::method::{
    DelayBasis, Estimate, MethodError, RecoveredDelays, RecoveredPacket, RecoveredPackets,
    TypedSynopsis,
};
use crate::record::{FlowKey, PacketRecord, ipproto};
use crate::wire::DecodeError;

/// Identities a [`ClassTap`] keeps per interval (a hash table of at most about 34 MiB: 2²¹ slots of 17 bytes).
pub const DEFAULT_TAP_CAPACITY: usize = 1 << 20;

/// Classes named before the rest is folded into `other` ([`ClassBook::new`]'s default).
pub const DEFAULT_MAX_CLASSES: usize = 32;

/// A protocol and its service port (0 for protocols without ports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FlowClass {
    pub proto: u8,
    pub port: u16,
}

impl FlowClass {
    /// The class of a flow: its protocol and the smaller of its ports where the protocol has
    /// ports (TCP, UDP, UDP-Lite, SCTP, DCCP); a port of 0 on one side (a non-first fragment
    /// has none) gives the other one.
    pub fn of(flow: &FlowKey) -> FlowClass {
        const DCCP: u8 = 33;
        let port = match flow.proto {
            ipproto::TCP | ipproto::UDP | ipproto::UDPLITE | ipproto::SCTP | DCCP => {
                match (flow.sport, flow.dport) {
                    (0, p) | (p, 0) => p,
                    (a, b) => a.min(b),
                }
            }
            _ => 0,
        };
        FlowClass {
            proto: flow.proto,
            port,
        }
    }
}

impl fmt::Display for FlowClass {
    /// `udp/53`, `tcp/443`, `icmp`, `ip47`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = FlowKey {
            proto: self.proto,
            ..Default::default()
        }
        .proto_name();
        match self.port {
            0 => f.write_str(&name),
            p => write!(f, "{name}/{p}"),
        }
    }
}

/// Where a class's delays go: a named class's slot, or the `other` slot past the cap.
pub type Slot = usize;

/// The classes seen so far, each given a slot in the order first seen; past `max_classes`
/// every new class goes to the `other` slot (slot `max_classes`), counted.
#[derive(Clone, Debug)]
pub struct ClassBook {
    max: usize,
    slots: HashMap<FlowClass, Slot>,
    names: Vec<FlowClass>,
    /// Classes folded into `other` (distinct, up to a cap of their own) and their packets.
    folded: hashbrown::HashSet<FlowClass>,
    folded_packets: u64,
}

/// Distinct folded classes remembered for the count (beyond it, the count is a lower bound).
const FOLDED_REMEMBERED: usize = 4096;

impl ClassBook {
    /// A book naming up to `max_classes` classes (at least 1).
    pub fn new(max_classes: usize) -> ClassBook {
        ClassBook {
            max: max_classes.max(1),
            slots: HashMap::new(),
            names: Vec::new(),
            folded: hashbrown::HashSet::new(),
            folded_packets: 0,
        }
    }

    /// The slot of class `c`, naming it if there is room; `packets` of it are counted as
    /// folded into `other` when there is not.
    pub fn slot_of(&mut self, c: FlowClass, packets: u64) -> Slot {
        if let Some(&s) = self.slots.get(&c) {
            return s;
        }
        if self.names.len() < self.max {
            let s = self.names.len();
            self.names.push(c);
            self.slots.insert(c, s);
            return s;
        }
        self.folded_packets += packets;
        if self.folded.len() < FOLDED_REMEMBERED {
            self.folded.insert(c);
        }
        self.max
    }

    /// Name the classes of an interval's packets at R, the busiest first (the packets of
    /// classes folded into `other` counted): once per interval, whatever the methods. Returns
    /// the tap's packets per slot, what [`ClassDelays::add_interval`] counts a class's
    /// unplaced packets from.
    pub fn note(&mut self, tap: &ClassTap) -> Vec<u64> {
        let mut received = vec![0u64; self.slots()];
        for (c, n) in tap.counts() {
            received[self.slot_of(c, n)] += n;
        }
        received
    }

    /// The slot of class `c` as named so far: its own, or `other`.
    pub fn slot_for(&self, c: FlowClass) -> Slot {
        self.slots.get(&c).copied().unwrap_or(self.max)
    }

    /// The `other` slot.
    pub fn other(&self) -> Slot {
        self.max
    }
    /// Slots in use or possible: the named classes and `other`.
    pub fn slots(&self) -> usize {
        self.max + 1
    }
    /// The class of a named slot; `None` for `other`.
    pub fn class(&self, slot: Slot) -> Option<FlowClass> {
        self.names.get(slot).copied()
    }
    /// The slot's name: its class, or `other`.
    pub fn label(&self, slot: Slot) -> String {
        self.class(slot)
            .map_or_else(|| "other".to_string(), |c| c.to_string())
    }
    /// Classes named.
    pub fn named(&self) -> usize {
        self.names.len()
    }
    /// Distinct classes folded into `other` (a lower bound past 4 096) and the packets seen of
    /// them.
    pub fn folded(&self) -> (usize, u64) {
        (self.folded.len(), self.folded_packets)
    }
}

/// R's packets of one interval, identity → class: where a recovered delay's class is read.
/// Holds at most `capacity` identities (the packets past it are counted, and their delays go
/// in no class); an identity recorded twice with different classes (a hash collision, or a
/// duplicate rewritten in between) is in no class either.
#[derive(Clone, Debug)]
pub struct ClassTap {
    classes: HashMap<u64, Option<FlowClass>>,
    capacity: usize,
    /// Packets not kept, the tap being full.
    pub overflow: u64,
    /// Identities seen with two classes.
    pub collisions: u64,
}

impl ClassTap {
    pub fn new(capacity: usize) -> ClassTap {
        ClassTap {
            classes: HashMap::new(),
            capacity,
            overflow: 0,
            collisions: 0,
        }
    }
    pub fn record_packet(&mut self, rec: &PacketRecord) {
        let c = FlowClass::of(&rec.flow);
        let full = self.classes.len() >= self.capacity;
        match self.classes.entry(rec.id) {
            hashbrown::hash_map::Entry::Vacant(_) if full => self.overflow += 1,
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(Some(c));
            }
            hashbrown::hash_map::Entry::Occupied(mut o) => {
                if o.get().is_some_and(|k| k != c) {
                    self.collisions += 1;
                    o.insert(None);
                }
            }
        }
    }
    /// The class of the packet of identity `id`, where the tap knows it.
    pub fn class_of(&self, id: u64) -> Option<FlowClass> {
        self.classes.get(&id).copied().flatten()
    }
    /// Packets kept of each class, the busiest first (ties in class order): the order in
    /// which [`ClassBook::note`] names them, the same on every run.
    pub fn counts(&self) -> Vec<(FlowClass, u64)> {
        let mut n: HashMap<FlowClass, u64> = HashMap::new();
        for c in self.classes.values().flatten() {
            *n.entry(*c).or_insert(0) += 1;
        }
        let mut n: Vec<(FlowClass, u64)> = n.into_iter().collect();
        n.sort_unstable_by_key(|&(c, k)| (std::cmp::Reverse(k), c));
        n
    }
}

impl TypedSynopsis for ClassTap {
    const METHOD: &'static str = "class-tap";
    fn record(&mut self, rec: &PacketRecord) {
        self.record_packet(rec);
    }
    /// Nothing: the tap is local state, and never leaves the point.
    fn encoded_len(&self) -> usize {
        0
    }
    fn encode(&self, _out: &mut Vec<u8>) {}
    fn shipped_len(&self) -> Option<u64> {
        Some(0)
    }
    /// `later`'s identities taken in as if its packets came after this tap's: an identity
    /// both hold keeps its class here and loses it (a collision) where `later` saw it with
    /// another; a new one is kept while there is room and counted in `overflow` past it;
    /// counts are added. As recording in order gives (identities, classes, `overflow`,
    /// `collisions`) while the merged tap stays within its capacity and `later` overflowed
    /// nothing. Past the capacity, recording keeps `later`'s new identities in the order of
    /// their packets, which `later`'s table no longer has: as many are kept (the capacity),
    /// but which ones follows the table, and each one left out counts once in `overflow`,
    /// however often it was seen (and `later`'s own overflowed packets count as overflow even
    /// where their identity is here). The tap has no payload; its classes are local state.
    fn merge(&mut self, later: ClassTap) -> Result<(), MethodError> {
        if later.capacity != self.capacity {
            return Err(MethodError::ConfigMismatch {
                field: "capacity".into(),
                sender: self.capacity.to_string(),
                receiver: later.capacity.to_string(),
            });
        }
        self.overflow += later.overflow;
        self.collisions += later.collisions;
        for (id, c) in later.classes {
            let full = self.classes.len() >= self.capacity;
            match self.classes.entry(id) {
                hashbrown::hash_map::Entry::Occupied(mut o) => match (*o.get(), c) {
                    // `later` counted a collision this tap had already counted
                    (None, None) => self.collisions = self.collisions.saturating_sub(1),
                    (Some(a), Some(b)) if a != b => {
                        self.collisions += 1;
                        o.insert(None);
                    }
                    // `later` saw two classes: its collision is the one recording counts
                    (Some(_), None) => {
                        o.insert(None);
                    }
                    _ => {}
                },
                hashbrown::hash_map::Entry::Vacant(_) if full => self.overflow += 1,
                hashbrown::hash_map::Entry::Vacant(v) => {
                    v.insert(c);
                }
            }
        }
        Ok(())
    }
}

/// The [`ClassTap`] as a point's pipeline takes it: a [`Method`](crate::method::Method) whose synopses are taps,
/// beside the methods a point records (it is no latency method: it is in no registry, has no
/// payload, and has no pair estimate).
pub struct ClassTapMethod {
    pub capacity: usize,
}

/// Its one field, the tap's capacity.
impl crate::method::MethodConfig for ClassTapMethod {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        vec![("capacity", self.capacity.to_string())]
    }
}

impl crate::method::TypedMethod for ClassTapMethod {
    type Config = ClassTapMethod;
    type Sender = ClassTap;
    type Receiver = ClassTap;
    fn name(&self) -> &str {
        "class-tap"
    }
    fn config(&self) -> &ClassTapMethod {
        self
    }
    fn foreign(&self) -> crate::method::Foreign {
        crate::method::Foreign::Matches("it only notes each identity's class")
    }
    fn new_sender(&self) -> ClassTap {
        ClassTap::new(self.capacity)
    }
    fn new_receiver(&self) -> ClassTap {
        ClassTap::new(self.capacity)
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<ClassTap, DecodeError> {
        self.decode_receiver(bytes)
    }
    fn decode_receiver(&self, _bytes: &[u8]) -> Result<ClassTap, DecodeError> {
        Err(DecodeError::Invalid {
            offset: 0,
            what: "a class tap is local state: it has no payload".into(),
        })
    }
    fn estimate(&self, _sender: ClassTap, _receiver: ClassTap) -> Result<Estimate, MethodError> {
        Err(MethodError::Invalid(
            "a class tap gives classes, not delays".into(),
        ))
    }
}

/// One method's recovered delays per class, merged over intervals.
#[derive(Clone, Debug, Default)]
pub struct ClassDelays {
    /// Indexed by slot.
    slots: Vec<Option<RecoveredDelays>>,
    /// Recovered packets whose class was not known (their identity not among R's records).
    pub unclassified: u64,
    /// Why the intervals' delays could not be merged, once they could not.
    pub unmergeable: Option<String>,
}

impl ClassDelays {
    /// Add one interval's recovered packets, `basis` saying what they rest on (as the
    /// interval's [`RecoveredDelays::basis`]), each packet's slot from `slot_of` (`None`: its
    /// class is not known). `received`, where given, is the receiver's packets of the interval
    /// per slot: a placed class's unplaced packets are then its own (module doc).
    pub fn add(
        &mut self,
        basis: DelayBasis,
        packets: &[RecoveredPacket],
        mut slot_of: impl FnMut(u64) -> Option<Slot>,
        received: Option<&[u64]>,
    ) {
        if self.unmergeable.is_some() {
            return;
        }
        let mut by_slot: Vec<Vec<i64>> = Vec::new();
        for p in packets {
            match slot_of(p.id) {
                Some(s) => {
                    if by_slot.len() <= s {
                        by_slot.resize_with(s + 1, Vec::new);
                    }
                    by_slot[s].push(p.delay_ns);
                }
                None => self.unclassified += 1,
            }
        }
        if self.slots.len() < by_slot.len() {
            self.slots.resize_with(by_slot.len(), || None);
        }
        for (s, delays) in by_slot.iter().enumerate() {
            if delays.is_empty() {
                continue;
            }
            let basis = match (basis, received) {
                (
                    DelayBasis::Placed {
                        unplaced,
                        max_error_ns,
                    },
                    Some(received),
                ) => DelayBasis::Placed {
                    unplaced: received
                        .get(s)
                        .map_or(0, |&r| r.saturating_sub(delays.len() as u64))
                        .min(unplaced),
                    max_error_ns,
                },
                (b, _) => b,
            };
            let part = RecoveredDelays::of(delays, basis);
            let merged = match self.slots[s].as_mut() {
                None => {
                    self.slots[s] = Some(part);
                    Ok(())
                }
                Some(acc) => acc.merge(&part),
            };
            if let Err(e) = merged {
                self.unmergeable = Some(e);
                self.slots.clear();
                return;
            }
        }
    }

    /// Add one interval's recovered packets, each in its class as `tap` (R's packets of the
    /// interval) knows it, the slots from `book` once it has noted the tap, and `received` what
    /// [`ClassBook::note`] returned; a placed class's unplaced packets are its packets in the
    /// tap less those placed, where the tap holds every packet of the interval in a class (else
    /// the interval's unplaced packets, in every class).
    pub fn add_interval(
        &mut self,
        book: &ClassBook,
        tap: &ClassTap,
        received: &[u64],
        rec: &RecoveredPackets,
    ) {
        let whole = tap.overflow == 0 && tap.collisions == 0;
        self.add(
            rec.basis,
            &rec.packets,
            |id| tap.class_of(id).map(|c| book.slot_for(c)),
            whole.then_some(received),
        );
    }

    /// The delays of one slot, if it has any.
    pub fn slot(&self, s: Slot) -> Option<&RecoveredDelays> {
        self.slots.get(s).and_then(Option::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(proto: u8, sport: u16, dport: u16) -> FlowKey {
        FlowKey {
            proto,
            sport,
            dport,
            ..Default::default()
        }
    }

    #[test]
    fn a_class_is_the_protocol_and_the_smaller_port() {
        assert_eq!(FlowClass::of(&flow(6, 51_000, 443)).to_string(), "tcp/443");
        assert_eq!(FlowClass::of(&flow(6, 443, 51_000)).to_string(), "tcp/443");
        assert_eq!(FlowClass::of(&flow(17, 0, 53)).to_string(), "udp/53");
        // ICMP's "ports" are its identifier and type: one class
        assert_eq!(FlowClass::of(&flow(1, 77, 0x0800)).to_string(), "icmp");
        assert_eq!(FlowClass::of(&flow(47, 0, 0)).to_string(), "ip47");
    }

    /// An interval's classes are named busiest first, whatever order the tap's table holds
    /// them in; a packet seen again with another class is in none, and past the capacity
    /// packets are counted, not kept.
    #[test]
    fn a_tap_names_the_busiest_classes_first() {
        let rec = |id: u64, dport: u16| PacketRecord {
            id,
            flow: flow(17, 50_000, dport),
            ..Default::default()
        };
        let mut tap = ClassTap::new(1_000);
        // one packet of each of 40 rare classes, then 100 of udp/53 and 50 of udp/123
        for k in 0..40u64 {
            tap.record_packet(&rec(k, 2_000 + k as u16));
        }
        for k in 0..100 {
            tap.record_packet(&rec(1_000 + k, 53));
        }
        for k in 0..50 {
            tap.record_packet(&rec(2_000 + k, 123));
        }
        tap.record_packet(&rec(1_000, 54)); // the same identity, another class
        assert_eq!(tap.collisions, 1);
        assert_eq!(tap.class_of(1_000), None);
        assert_eq!(tap.class_of(1_001).map(|c| c.port), Some(53));
        let mut book = ClassBook::new(3);
        // the tap's packets per slot (the collided identity in none)
        assert_eq!(book.note(&tap), [99, 50, 1, 39]);
        assert_eq!(
            (0..4).map(|s| book.label(s)).collect::<Vec<_>>(),
            ["udp/53", "udp/123", "udp/2000", "other"]
        );
        assert_eq!(book.folded(), (39, 39));
        let mut full = ClassTap::new(2);
        for k in 0..5 {
            full.record_packet(&rec(k, 53));
        }
        assert_eq!(
            (full.overflow, full.counts()),
            (
                3,
                vec![(
                    FlowClass {
                        proto: 17,
                        port: 53
                    },
                    2
                )]
            )
        );
    }

    /// A tap merged from two is the tap of both streams in order while it has room
    /// (collisions across the split included); past its capacity it keeps as many
    /// identities, and counts each identity left out once.
    #[test]
    fn merged_taps_are_the_tap_of_both_streams() {
        let rec = |id: u64, dport: u16| PacketRecord {
            id,
            flow: flow(17, 50_000, dport),
            ..Default::default()
        };
        let a: Vec<PacketRecord> = (0..300).map(|k| rec(k, 53 + (k % 3) as u16)).collect();
        let mut b: Vec<PacketRecord> = (200..500).map(|k| rec(k, 53 + (k % 3) as u16)).collect();
        // across the split: the same class, another class; within b: two classes
        b.extend([
            rec(5, 53 + 2),
            rec(6, 99),
            rec(400, 7),
            rec(401, 7),
            rec(401, 8),
        ]);
        let tap = |cap: usize, recs: &[&[PacketRecord]]| {
            let mut t = ClassTap::new(cap);
            for r in recs.iter().flat_map(|r| r.iter()) {
                t.record_packet(r);
            }
            t
        };
        let whole = tap(1_000, &[&a, &b]);
        let mut merged = tap(1_000, &[&a]);
        merged.merge(tap(1_000, &[&b])).unwrap();
        assert_eq!(merged.classes, whole.classes);
        assert_eq!(
            (merged.overflow, merged.collisions),
            (whole.overflow, whole.collisions)
        );
        assert!(whole.collisions >= 3, "{}", whole.collisions);
        // past the capacity: as many kept; every identity left out counted at least once,
        // a repeated sighting of one only in recording
        let whole = tap(400, &[&a, &b]);
        let mut merged = tap(400, &[&a]);
        merged.merge(tap(400, &[&b])).unwrap();
        assert_eq!(merged.classes.len(), whole.classes.len());
        assert!(merged.overflow <= whole.overflow && merged.overflow >= 100);
        assert!(tap(400, &[&a]).merge(ClassTap::new(401)).is_err());
    }

    #[test]
    fn classes_past_the_cap_are_folded_into_other_and_counted() {
        let mut b = ClassBook::new(2);
        let slot = |b: &mut ClassBook, f: &FlowKey| b.slot_of(FlowClass::of(f), 1);
        assert_eq!(slot(&mut b, &flow(17, 40_000, 53)), 0);
        assert_eq!(slot(&mut b, &flow(6, 443, 40_001)), 1);
        assert_eq!(slot(&mut b, &flow(17, 53, 40_002)), 0);
        assert_eq!(slot(&mut b, &flow(6, 40_000, 22)), b.other());
        assert_eq!(slot(&mut b, &flow(6, 40_000, 22)), 2);
        assert_eq!(slot(&mut b, &flow(6, 40_000, 25)), 2);
        assert_eq!(b.folded(), (2, 3));
        assert_eq!(
            (b.label(0), b.label(1), b.label(2)),
            ("udp/53".into(), "tcp/443".into(), "other".into())
        );
    }

    /// A class's samples are a uniform sample of its delivered packets, so its 95 % intervals
    /// over the merged intervals cover its own quantiles as the whole traffic's do: two
    /// classes of unlike delays (Weibull 0.6 and a 3× slower one, 15 % of the packets),
    /// coordinated sampling at 2 % and 5 % in two intervals of 100 000 packets, 400 seeds.
    #[test]
    fn sampled_class_intervals_cover_the_class_quantiles() {
        use rand::{RngExt, SeedableRng};
        let seeds = 400;
        let mut covered = [[0u32; 2]; 2];
        for seed in 0..seeds {
            let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(0xc1a5 + seed);
            let mut c = ClassDelays::default();
            let mut truth: [Vec<i64>; 2] = Default::default();
            for fraction in [0.02, 0.05] {
                let mut packets = Vec::new();
                for _ in 0..100_000 {
                    let id: u64 = rng.random();
                    let slow = rng.random::<f64>() < 0.15;
                    let u: f64 = rng.random::<f64>().max(1e-300);
                    let scale = if slow { 300_000.0 } else { 100_000.0 };
                    let d = (scale * (-u.ln()).powf(1.0 / 0.6)) as i64;
                    truth[usize::from(slow)].push(d);
                    // the sampling hash: independent of the class
                    if (id as f64) < fraction * u64::MAX as f64 {
                        packets.push((RecoveredPacket { id, delay_ns: d }, usize::from(slow)));
                    }
                }
                let slot: HashMap<u64, Slot> = packets.iter().map(|(p, s)| (p.id, *s)).collect();
                let packets: Vec<RecoveredPacket> = packets.into_iter().map(|p| p.0).collect();
                let basis = DelayBasis::Sampled {
                    fraction,
                    max_error_ns: 0,
                };
                c.add(basis, &packets, |id| slot.get(&id).copied(), None);
            }
            for (k, t) in truth.iter_mut().enumerate() {
                t.sort_unstable();
                for (j, p) in [0.5, 0.99].into_iter().enumerate() {
                    let want = crate::stats::nearest_rank(t, p) as f64;
                    let [lo, hi] = c.slot(k).unwrap().interval(p).unwrap();
                    covered[k][j] += u32::from(lo <= want && want <= hi);
                }
            }
        }
        // each cell's coverage, of 400 seeds: a 95 % interval widened by the histogram's 1 %
        // covers at least about 95 %; below 90 % would be 5 standard deviations short
        for (k, row) in covered.iter().enumerate() {
            for (j, &n) in row.iter().enumerate() {
                let rate = n as f64 / seeds as f64;
                eprintln!("class {k}, quantile {j}: {rate:.4}");
                assert!(rate >= 0.90, "class {k} quantile {j}: coverage {rate}");
            }
        }
    }

    #[test]
    fn class_delays_merge_each_class_over_intervals() {
        let pk = |id, d| RecoveredPacket { id, delay_ns: d };
        let placed = DelayBasis::Placed {
            unplaced: 1,
            max_error_ns: 0,
        };
        let mut c = ClassDelays::default();
        // ids below 100 are class 0, the rest class 1; id 999 unknown
        let slot = |id: u64| (id != 999).then_some(usize::from(id >= 100));
        c.add(
            placed,
            &[pk(1, 10), pk(100, 1000), pk(2, 20), pk(999, 5)],
            slot,
            None,
        );
        // R received 2 of class 0 (both placed) and 3 of class 1 (one unplaced)
        c.add(placed, &[pk(3, 30), pk(101, 2000)], slot, Some(&[1, 2]));
        let a = c.slot(0).unwrap();
        assert_eq!(a.histogram.count(), 3);
        // the interval's unplaced packet where the classes' were not counted, then none
        assert_eq!(
            a.basis,
            DelayBasis::Placed {
                unplaced: 1,
                max_error_ns: 0
            }
        );
        assert_eq!(c.slot(1).unwrap().histogram.count(), 2);
        assert_eq!(
            c.slot(1).unwrap().basis,
            DelayBasis::Placed {
                unplaced: 2,
                max_error_ns: 0
            }
        );
        assert_eq!(c.unclassified, 1);
        // a quantile of class 1 comes from class 1's delays only
        let q = c.slot(1).unwrap().histogram.quantile(0.99).unwrap();
        assert!((q - 2000.0).abs() <= 2000.0 * 0.01, "{q}");
        // intervals of another kind cannot be merged: said, and nothing half-merged is kept
        c.add(
            DelayBasis::Sampled {
                fraction: 0.5,
                max_error_ns: 0,
            },
            &[pk(4, 40)],
            slot,
            None,
        );
        assert!(c.unmergeable.is_some());
        assert!(c.slot(0).is_none());
    }
}
