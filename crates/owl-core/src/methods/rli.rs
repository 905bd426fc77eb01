//! RLI — Reference Latency Interpolation (Lee, Duffield, Kompella, SIGCOMM'10), the baseline
//! of LDS §5.1 and COLATE §6.4.
//!
//! The sender injects *reference* packets carrying their sending time, at a rate that adapts to
//! the link's utilisation between an upper rate (one reference per 10 packets, on an idle
//! link) and a lower one (one per 300, on a saturated link) — "lower and upper limits of the
//! probe injection rate … 1 probe packet per 300 regular packets and 1 probe packet per 10"
//! (COLATE §6.4). The receiver measures each reference's delay and gives every regular packet
//! the delay linearly interpolated, at its arrival time, between the two references around it;
//! per-flow state is three counters (packets, delay sum, delay square sum). The method rests on
//! *temporal correlation*: packets close in time see similar delays — exactly what priority
//! queues and ECMP break (LDS §1).
//!
//! # On a capture pair
//!
//! A reference is emulated by the packet at its position (it sees that packet's delay): the
//! sender point picks every `gap`-th packet, `gap` set at each utilisation window from the
//! previous window's load. The receiver cannot tell those packets apart, so the receiver point
//! logs `(identity, arrival time, flow hash)` and the receiver's algorithm runs at estimate
//! time with the sender's reference list — what the receiver would have computed online.
//! Packets before the first reference of an interval take its delay, packets after the last
//! take the last one's. `Estimate.bytes` counts the references as 64-byte probes.

use hashbrown::HashMap;

use crate::method::{
    DeclaredConfig, Estimate, FlowEstimate, MethodConfig, MethodError, PacketEstimate,
    TypedSynopsis,
};
use crate::record::{FlowKey, PacketRecord};
use crate::wire::{DecodeError, WireReader, WireWriter};

/// Bytes a reference probe puts on the wire (a minimal frame carrying a timestamp).
pub const PROBE_BYTES: u64 = 64;

crate::method_config! {
    /// What both points agree on.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Config for "rli" {
        /// One reference per `lower_gap` packets at full utilisation (300).
        lower_gap: u32,
        /// One reference per `upper_gap` packets on an idle link (10).
        upper_gap: u32,
        /// Link capacity, bits per second, to compute the utilisation.
        capacity_bps: f64,
        /// Utilisation window, ns.
        window_ns: u64,
        /// Seed of the flow hash the receiver keys its per-flow counters by.
        seed: u64,
    }
}

impl Config {
    /// A configuration from its fields, refused unless [`validate`](Self::validate) accepts
    /// it: the only way to build one outside this module, so every `Config` is sound.
    pub fn new(
        lower_gap: u32,
        upper_gap: u32,
        capacity_bps: f64,
        window_ns: u64,
        seed: u64,
    ) -> Result<Config, MethodError> {
        let c = Config {
            lower_gap,
            upper_gap,
            capacity_bps,
            window_ns,
            seed,
        };
        c.validate()?;
        Ok(c)
    }
    pub fn lower_gap(&self) -> u32 {
        self.lower_gap
    }
    pub fn upper_gap(&self) -> u32 {
        self.upper_gap
    }
    pub fn capacity_bps(&self) -> f64 {
        self.capacity_bps
    }
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// RLI's published limits, 1:300 to 1:10, on a 1 Gb/s link measured every 10 ms.
    pub fn paper(seed: u64) -> Config {
        Config {
            lower_gap: 300,
            upper_gap: 10,
            capacity_bps: 1e9,
            window_ns: 10_000_000,
            seed,
        }
    }

    pub fn validate(&self) -> Result<(), MethodError> {
        let bad = |s: String| Err(MethodError::Invalid(format!("rli: {s}")));
        if self.upper_gap == 0 || self.lower_gap < self.upper_gap {
            return bad(format!(
                "injection gaps 1:{} (lower rate) and 1:{} (upper rate) need 1 ≤ upper gap ≤ lower gap",
                self.lower_gap, self.upper_gap
            ));
        }
        if !(self.capacity_bps.is_finite() && self.capacity_bps > 0.0) {
            return bad(format!("capacity {} b/s must be > 0", self.capacity_bps));
        }
        if self.window_ns == 0 {
            return bad("the utilisation window must be longer than 0 ns".into());
        }
        Ok(())
    }

    /// Rebuild a configuration from `(field, value)` pairs over the defaults; an unknown
    /// field is an error that names it.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Config, MethodError> {
        Config::from_pairs_over(Config::paper(1), pairs)
    }

    /// `base` with the fields named in `pairs` replaced.
    pub fn from_pairs_over(
        base: Config,
        pairs: &[(String, String)],
    ) -> Result<Config, MethodError> {
        let c = DeclaredConfig::over(base, pairs)?;
        c.validate()?;
        Ok(c)
    }

    /// Packets between references at utilisation `u`: linear from the upper rate at 0 to the
    /// lower rate at 1 (more references when the link is idle, fewer when it is busy, so the
    /// probes never add much load).
    pub fn gap(&self, u: f64) -> u32 {
        let u = if u.is_finite() {
            u.clamp(0.0, 1.0)
        } else {
            1.0
        };
        (self.upper_gap as f64 + (self.lower_gap - self.upper_gap) as f64 * u).round() as u32
    }
}

/// The sender point: the references it injected, `(identity, sending time)`.
#[derive(Clone, Debug)]
pub struct SenderSynopsis {
    cfg: Config,
    pub refs: Vec<(u64, u64)>,
    since: u32,
    gap: u32,
    win_start: Option<u64>,
    win_bits: f64,
    /// Sum of the gaps used, for the report.
    gap_sum: u64,
    /// Decoded from a payload: its count and windows are gone.
    decoded: bool,
}

impl SenderSynopsis {
    pub fn new(cfg: Config) -> SenderSynopsis {
        SenderSynopsis {
            gap: cfg.upper_gap,
            since: u32::MAX,
            cfg,
            refs: Vec::new(),
            win_start: None,
            win_bits: 0.0,
            gap_sum: 0,
            decoded: false,
        }
    }

    fn tick(&mut self, ts: u64) {
        let w = self.cfg.window_ns;
        let start = *self.win_start.get_or_insert(ts);
        if ts < start.saturating_add(w) {
            return;
        }
        // the window that just ended sets the rate; a gap of two windows or more was idle
        let u = if ts < start.saturating_add(2 * w) {
            self.win_bits / (self.cfg.capacity_bps * w as f64 / 1e9)
        } else {
            0.0
        };
        self.gap = self.cfg.gap(u);
        self.win_start = Some(ts - (ts - start) % w);
        self.win_bits = 0.0;
    }
}

impl TypedSynopsis for SenderSynopsis {
    const METHOD: &'static str = "rli";
    fn record(&mut self, rec: &PacketRecord) {
        self.tick(rec.ts_ns);
        self.win_bits += rec.len as f64 * 8.0;
        self.since = self.since.saturating_add(1);
        if self.since >= self.gap {
            self.refs.push((rec.id, rec.ts_ns));
            self.gap_sum += self.gap as u64;
            self.since = 0;
        }
    }
    fn encoded_len(&self) -> usize {
        8 + 16 * self.refs.len()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let mut w = WireWriter::new(out);
        w.reserve(self.encoded_len());
        w.u64(self.refs.len() as u64);
        for &(id, ts) in &self.refs {
            w.u64(id);
            w.u64(ts);
        }
    }
    /// The reference packets injected.
    fn shipped_len(&self) -> Option<u64> {
        Some(self.refs.len() as u64 * PROBE_BYTES)
    }
    /// Only where one side saw no packet. Which of `later`'s packets are references depends
    /// on the packets since the last reference and on the load of the utilisation windows,
    /// both carried over from this point's packets, and on every one of `later`'s packets,
    /// of which it kept only its own references (chosen afresh from its first packet). So an
    /// empty recording `later` changes nothing, an empty recording point becomes `later`, and
    /// anything else is refused with an error saying why. The receiver logs every arrival,
    /// and merges exactly.
    fn merge(&mut self, later: SenderSynopsis) -> Result<(), MethodError> {
        crate::method::check_merge(self.cfg.pairs(), later.cfg.pairs())?;
        let empty = |s: &SenderSynopsis| !s.decoded && s.win_start.is_none();
        if empty(&later) {
            return Ok(());
        }
        if empty(self) && !later.decoded {
            *self = later;
            return Ok(());
        }
        Err(MethodError::Invalid(
            "rli: a sender's references are chosen by a count and a load carried over all its packets, and a sender point keeps only its references: two sender points that saw packets cannot be merged into the references of one stream (merge the receivers)".into(),
        ))
    }
}

/// The receiver point: every arrival `(identity, arrival time, flow hash)`.
#[derive(Clone, Debug)]
pub struct ReceiverSynopsis {
    seed: u64,
    pub log: Vec<(u64, u64, u64)>,
}

impl TypedSynopsis for ReceiverSynopsis {
    const METHOD: &'static str = "rli";
    fn record(&mut self, rec: &PacketRecord) {
        self.log.push((rec.id, rec.ts_ns, rec.flow.hash(self.seed)));
    }
    fn encoded_len(&self) -> usize {
        8 + 24 * self.log.len()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let mut w = WireWriter::new(out);
        w.reserve(self.encoded_len());
        w.u64(self.log.len() as u64);
        for &(id, ts, flow) in &self.log {
            w.u64(id);
            w.u64(ts);
            w.u64(flow);
        }
    }
    /// Nothing: a deployed receiver interpolates as packets pass; the log is emulation data.
    fn shipped_len(&self) -> Option<u64> {
        Some(0)
    }
    /// Both logs of arrivals one after the other (their flow hashes of the same seed).
    fn merge(&mut self, later: ReceiverSynopsis) -> Result<(), MethodError> {
        crate::method::check_merge(
            vec![("seed", self.seed.to_string())],
            vec![("seed", later.seed.to_string())],
        )?;
        self.log.extend_from_slice(&later.log);
        Ok(())
    }
}

/// Per-flow (and overall) counters of interpolated delays.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counters {
    pub packets: u64,
    pub sum: f64,
    pub sum_sq: f64,
}

impl Counters {
    fn add(&mut self, d: f64) {
        self.packets += 1;
        self.sum += d;
        self.sum_sq += d * d;
    }
    pub fn mean(&self) -> Option<f64> {
        (self.packets > 0).then(|| self.sum / self.packets as f64)
    }
    pub fn std(&self) -> Option<f64> {
        let m = self.mean()?;
        Some((self.sum_sq / self.packets as f64 - m * m).max(0.0).sqrt())
    }
}

/// What the receiver computed for one interval.
#[derive(Clone, Debug, Default)]
pub struct Interpolation {
    pub flows: HashMap<u64, Counters>,
    pub all: Counters,
    /// References that reached the receiver.
    pub references: u64,
}

/// The RLI receiver: interpolate every arrival's delay between the references around it and
/// aggregate per flow.
pub fn interpolate(s: &SenderSynopsis, r: &ReceiverSynopsis) -> Interpolation {
    interpolate_each(s, r, |_, _, _| {})
}

/// [`interpolate`], handing every arrival's `(identity, arrival time, interpolated delay)` to
/// `each` as well (RLI's per-packet delays, OPA §VII-C).
pub fn interpolate_each(
    s: &SenderSynopsis,
    r: &ReceiverSynopsis,
    mut each: impl FnMut(u64, u64, f64),
) -> Interpolation {
    let refs: HashMap<u64, u64> = s.refs.iter().copied().collect();
    let mut out = Interpolation::default();
    let mut order: Vec<u32> = (0..r.log.len() as u32).collect();
    order.sort_by_key(|&i| r.log[i as usize].1);
    let mut pending: Vec<(u64, u64, u64)> = Vec::new();
    let mut last: Option<(u64, f64)> = None;
    let mut add = |out: &mut Interpolation, id: u64, t: u64, fh: u64, d: f64| {
        out.flows.entry(fh).or_default().add(d);
        out.all.add(d);
        each(id, t, d);
    };
    for &i in &order {
        let (id, t, fh) = r.log[i as usize];
        let Some(&t0) = refs.get(&id) else {
            pending.push((id, t, fh));
            continue;
        };
        let d = t.wrapping_sub(t0) as i64 as f64;
        for &(ip, tp, fp) in &pending {
            let e = match last {
                Some((t1, d1)) if t > t1 => d1 + (d - d1) * (tp - t1) as f64 / (t - t1) as f64,
                _ => d,
            };
            add(&mut out, ip, tp, fp, e);
        }
        pending.clear();
        add(&mut out, id, t, fh, d);
        out.references += 1;
        last = Some((t, d));
    }
    if let Some((_, d)) = last {
        for &(ip, tp, fp) in &pending {
            add(&mut out, ip, tp, fp, d);
        }
    }
    out
}

/// RLI as a method.
#[derive(Debug)]
pub struct RliMethod {
    cfg: Config,
}

impl RliMethod {
    pub fn new(cfg: Config) -> Result<RliMethod, MethodError> {
        cfg.validate()?;
        Ok(RliMethod { cfg })
    }
}

fn decode_list<const N: usize>(b: &[u8], what: &'static str) -> Result<Vec<[u64; N]>, DecodeError> {
    let mut r = WireReader::new(b);
    let n = r.u64("entry count")?;
    if (n as u128) * (N as u128) * 8 != r.remaining() as u128 {
        return Err(r.invalid(format!(
            "{n} {what} do not fit the {} bytes that follow",
            r.remaining()
        )));
    }
    let mut v = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let mut x = [0u64; N];
        for y in x.iter_mut() {
            *y = r.u64(what)?;
        }
        v.push(x);
    }
    Ok(v)
}

impl crate::method::TypedMethod for RliMethod {
    type Config = Config;
    type Sender = SenderSynopsis;
    type Receiver = ReceiverSynopsis;
    fn name(&self) -> &str {
        "rli"
    }
    fn config(&self) -> &Config {
        &self.cfg
    }
    fn foreign(&self) -> crate::method::Foreign {
        crate::method::Foreign::Matches(
            "references are paired by identity; a packet only R has is given the delay interpolated at its arrival",
        )
    }
    fn new_sender(&self) -> SenderSynopsis {
        SenderSynopsis::new(self.cfg.clone())
    }
    fn new_receiver(&self) -> ReceiverSynopsis {
        ReceiverSynopsis {
            seed: self.cfg.seed,
            log: Vec::new(),
        }
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<SenderSynopsis, DecodeError> {
        let mut s = SenderSynopsis::new(self.cfg.clone());
        s.refs = decode_list::<2>(bytes, "references")?
            .into_iter()
            .map(|[a, b]| (a, b))
            .collect();
        s.decoded = true;
        Ok(s)
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<ReceiverSynopsis, DecodeError> {
        Ok(ReceiverSynopsis {
            seed: self.cfg.seed,
            log: decode_list::<3>(bytes, "arrivals")?
                .into_iter()
                .map(|[a, b, c]| (a, b, c))
                .collect(),
        })
    }
    fn estimate(&self, s: SenderSynopsis, r: ReceiverSynopsis) -> Result<Estimate, MethodError> {
        let it = interpolate(&s, &r);
        let mut notes = vec![format!(
            "{} references emulated by trace packets (1 per {:.1} packets on average), {} reached the receiver",
            s.refs.len(),
            if s.refs.is_empty() {
                0.0
            } else {
                s.gap_sum as f64 / s.refs.len() as f64
            },
            it.references
        )];
        if it.references == 0 && !r.log.is_empty() {
            notes.push("no reference reached the receiver: nothing to interpolate".into());
        }
        Ok(Estimate {
            reason: None,
            quantiles: None,
            recovered: None,
            mean_ns: it.all.mean(),
            std_ns: it.all.std(),
            samples: it.references,
            bytes: PROBE_BYTES * s.refs.len() as u64,
            lost: None,
            mean_ci98_ns: None,
            // No interval of the std: the std is that of *interpolated* delays, not of samples.
            // Interpolation between references smooths the delay between them, so this std
            // underestimates the true one by an amount that depends on how fast the delay
            // varies between references, and the interpolated values of neighbouring packets
            // share their references' errors (they are not independent). No sample-based
            // interval applies to them, and owl reports none.
            std_ci95_ns: None,
            notes,
        })
    }
    fn estimate_flows(
        &self,
        sender: &SenderSynopsis,
        receiver: &ReceiverSynopsis,
        flows: &[FlowKey],
    ) -> Option<Result<Vec<FlowEstimate>, MethodError>> {
        Some(Ok({
            let (s, r) = (sender, receiver);
            let it = interpolate(s, r);
            flows
                .iter()
                .map(|f| match it.flows.get(&f.hash(self.cfg.seed)) {
                    Some(c) => FlowEstimate {
                        mean_ns: c.mean(),
                        std_ns: c.std(),
                        packets: Some(c.packets as f64),
                        ..Default::default()
                    },
                    None => FlowEstimate::default(),
                })
                .collect()
        }))
    }
    /// Every received packet with its interpolated delay (its sending time is the arrival
    /// minus that delay); packets that never arrived are unknown to RLI.
    fn estimate_packets(
        &self,
        sender: &SenderSynopsis,
        receiver: &ReceiverSynopsis,
    ) -> Option<Result<Vec<PacketEstimate>, MethodError>> {
        Some(Ok({
            let (s, r) = (sender, receiver);
            let mut out = Vec::with_capacity(r.log.len());
            // a packet's delay once: R's later copies of an identity are left out (the first
            // arrival counts, as the truth and OPA count it)
            let mut seen = hashbrown::HashSet::with_capacity(r.log.len());
            interpolate_each(s, r, |id, t, d| {
                if !seen.insert(id) {
                    return;
                }
                out.push(PacketEstimate {
                    id: Some(id),
                    sender_ns: t.wrapping_sub(d.round() as i64 as u64),
                    receiver_ns: Some(t),
                    placed: true,
                })
            });
            out.sort_by_key(|p| p.sender_ns);
            out
        }))
    }
}

/// `rli`: not sizeable by memory — its cost follows its reference rate (the estimate reports
/// the bytes).
pub const INFO: crate::method::MethodInfo = crate::method::MethodInfo {
    name: "rli",
    summary: "Reference Latency Interpolation: references 1:300-1:10 by load, interpolated, per-flow",
    samples: "reference packets received (interpolated packets not counted)",
    per_flow: true,
    crosses: "reference packets the sender injects (64 B each); the receiver's file logs every arrival (24 B a packet) so owl can interpolate offline, where a deployed receiver interpolates as packets pass and keeps only per-flow sums",
    per_packet: true,
    recovers_delays: false,
    build: |o| Ok(Box::new(RliMethod::new(Config::paper(o.seed))?)),
    from_config: |pairs| Ok(Box::new(RliMethod::new(Config::from_pairs(pairs)?)?)),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::{Method, Role};
    use crate::test_traffic::key;

    /// The receiver's log merges exactly; a sender merges only where one side saw nothing
    /// (its references depend on the count and load over every packet), and says so.
    #[test]
    fn merging_points() {
        let m = RliMethod::new(Config::paper(2)).unwrap();
        let recs: Vec<PacketRecord> = (0..5_000u64)
            .map(|i| {
                rec(
                    i,
                    1_000_000 + i * 800,
                    (i % 7) as u32,
                    100 + (i % 1_300) as u32,
                )
            })
            .collect();
        let bytes = |p: &dyn crate::method::PointSynopsis| {
            let mut b = Vec::new();
            p.encode(&mut b);
            b
        };
        for role in [Role::Receiver, Role::Sender] {
            let mut whole = m.new_point(role);
            whole.record_batch(&recs);
            let mut head = m.new_point(role);
            let (x, y) = if role == Role::Receiver {
                (1_000, 3_000)
            } else {
                (0, 3_000)
            };
            head.record_batch(&recs[..x]);
            let mut mid = m.new_point(role);
            mid.record_batch(&recs[x..y]);
            head.merge(mid).unwrap();
            head.merge(m.new_point(role)).unwrap();
            head.record_batch(&recs[y..]);
            assert_eq!(bytes(&*head), bytes(&*whole), "{role:?}");
        }
        let mut s = m.new_point(Role::Sender);
        s.record_batch(&recs[..10]);
        let mut t = m.new_point(Role::Sender);
        t.record_batch(&recs[10..20]);
        let e = s.merge(t).unwrap_err();
        assert!(e.to_string().contains("references"), "{e}");
        let other = RliMethod::new(Config::paper(3)).unwrap();
        assert!(
            m.new_point(Role::Receiver)
                .merge(other.new_point(Role::Receiver))
                .is_err()
        );
    }

    fn rec(i: u64, ts: u64, flow: u32, len: u32) -> PacketRecord {
        PacketRecord {
            ts_ns: ts,
            id: i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            flow: key(flow),
            len,
        }
    }

    #[test]
    fn injection_rate_adapts_to_utilisation() {
        let cfg = Config::paper(1);
        assert_eq!(cfg.gap(0.0), 10);
        assert_eq!(cfg.gap(1.0), 300);
        assert_eq!(cfg.gap(0.5), 155);
        // idle link: 1500-byte packets every 1 ms on 1 Gb/s is 1.2 % load → about 1:13
        let mut s = SenderSynopsis::new(cfg.clone());
        for i in 0..10_000 {
            s.record(&rec(i, i * 1_000_000, 1, 1500));
        }
        let idle = 10_000.0 / s.refs.len() as f64;
        assert!((10.0..16.0).contains(&idle), "{idle}");
        // saturated: 1500-byte packets every 12 µs is 100 % → 1:300
        let mut s = SenderSynopsis::new(cfg);
        for i in 0..100_000 {
            s.record(&rec(i, i * 12_000, 1, 1500));
        }
        let busy = 100_000.0 / s.refs.len() as f64;
        // (the first 10 ms window runs at 1:10 before the load is known)
        assert!((230.0..=300.0).contains(&busy), "{busy}");
    }

    /// A second queue with unrelated delays defeats the interpolation (LDS §1).
    #[test]
    fn two_queues_defeat_interpolation() {
        let m = RliMethod::new(Config::paper(2)).unwrap();
        let (mut a, mut b) = (m.new_point(Role::Sender), m.new_point(Role::Receiver));
        let mut sent = Vec::new();
        let mut sizes = [0u64; 2];
        let mut sums = [0f64; 2];
        for i in 0..5_000u64 {
            // packets of the two flows interleave at random
            let f = ((i.wrapping_mul(2_654_435_761) >> 7) & 1) as usize;
            let p = rec(i, 1_000_000_000 + i * 100_000, f as u32, 100);
            // flow 0: delay grows linearly with time; flow 1: +500 µs on another queue
            let d = 10_000 + i * 3 + if f == 1 { 500_000 } else { 0 };
            sizes[f] += 1;
            sums[f] += d as f64;
            sent.push((p, d));
            a.record(&p);
        }
        sent.sort_by_key(|(p, d)| p.ts_ns + d);
        for (p, d) in &sent {
            b.record(&PacketRecord {
                ts_ns: p.ts_ns + d,
                ..*p
            });
        }
        let est = m
            .estimate_flows(&*a, &*b, &[key(0), key(1)])
            .unwrap()
            .unwrap();
        let (t0, t1) = (sums[0] / sizes[0] as f64, sums[1] / sizes[1] as f64);
        let e0 = (est[0].mean_ns.unwrap() - t0).abs() / t0;
        let e1 = (est[1].mean_ns.unwrap() - t1).abs() / t1;
        // references fall on both flows, so interpolation mixes the two queues: the small
        // delays of flow 0 are badly overestimated
        assert!(e0 > 1.0, "{e0}");
        assert!(e1 > 0.3, "{e1}");
        assert_eq!(est[0].packets, Some(sizes[0] as f64));
        let e = m.estimate(a, b).unwrap();
        assert!(e.samples > 100);
        assert!(e.notes[0].contains("references"));
    }

    #[test]
    fn single_queue_linear_delay_is_exact() {
        let m = RliMethod::new(Config::paper(2)).unwrap();
        let (mut a, mut b) = (m.new_point(Role::Sender), m.new_point(Role::Receiver));
        let mut sum = [0f64; 3];
        for i in 0..3_000u64 {
            let p = rec(i, 1_000_000_000 + i * 100_000, (i % 3) as u32, 100);
            let d = 10_000 + i * 7;
            sum[(i % 3) as usize] += d as f64;
            a.record(&p);
            b.record(&PacketRecord {
                ts_ns: p.ts_ns + d,
                ..p
            });
        }
        let est = m
            .estimate_flows(&*a, &*b, &[key(0), key(1), key(2)])
            .unwrap()
            .unwrap();
        for f in 0..3 {
            let t = sum[f] / 1000.0;
            // packets after the last reference take its delay: a few ns at most
            assert!((est[f].mean_ns.unwrap() - t).abs() / t < 1e-3, "{f}");
        }
    }

    #[test]
    fn bad_configs_and_bytes() {
        let mut c = Config::paper(1);
        c.upper_gap = 0;
        assert!(RliMethod::new(c).is_err());
        let mut c = Config::paper(1);
        c.lower_gap = 5;
        assert!(
            RliMethod::new(c)
                .unwrap_err()
                .to_string()
                .contains("upper gap")
        );
        let c = Config::paper(1);
        let p: Vec<(String, String)> = c
            .pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(Config::from_pairs(&p).unwrap(), c);
        let m = RliMethod::new(c).unwrap();
        let mut a = m.new_point(Role::Receiver);
        a.record(&rec(1, 2, 3, 4));
        let mut b = Vec::new();
        a.encode(&mut b);
        assert!(m.decode_point(Role::Receiver, &b).is_ok());
        assert!(m.decode_point(Role::Receiver, &b[..10]).is_err());
        assert!(m.decode_point(Role::Sender, &b).is_err());
    }
}
