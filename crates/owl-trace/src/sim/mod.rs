//! The two-point simulator: a sender capture, a path, a receiver capture.
//!
//! Traffic at S is synthetic ([`TrafficConfig`]) or taken from a real single-point capture
//! (`--from`). The path then decides, packet by packet in sending order: loss (uniform,
//! Gilbert–Elliott, or LDA §IV-C loss episodes), delay (one of the [`DelayModel`]s, optionally a
//! second one for a class of flows: two priority queues whose delays are unrelated, so
//! neighbouring packets of different flows see unrelated delays; and ECMP-like paths, each
//! flow pinned to one by hash, each path with its own offset or delay model), FIFO (a packet never overtakes
//! the previous one of its queue), reordering (a fraction of packets overtaken by up to `D`
//! later packets), duplication, router rewrites (TTL − 1 with the checksum recomputed, new MAC
//! addresses, ECN CE marks), and R's clock offset.
//!
//! Everything is drawn from generators seeded by `seed` (traffic and path from separate
//! streams, so changing the path keeps the traffic), so a run is reproducible bit for bit. The
//! simulator keeps its own books ([`SimReport`]): sent, lost, duplicated, reordered (RFC 4737,
//! computed from its own sending order), and the delays it drew. Those books are what the exact
//! truth computed from the two captures must agree with.
//!
//! More than two points: [`mesh`] spreads one traffic mix over the directed links between
//! several points (COLATE §6.2.1's triangle), each point seeing its outgoing and incoming links.

pub mod mesh;
mod path;
pub mod red;
mod trace;
mod traffic;

use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use owl_core::PacketRecord;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;
use thiserror::Error;

pub use path::{
    DelayModel, EcmpPath, LossModel, MAX_ECMP_PATHS, format_ecmp, parse_ecmp, validate_ecmp,
};
pub use traffic::{Arrivals, ROUTER_MACS, SENDER_MACS, min_ip_len};

use crate::capture::{CaptureError, CaptureFormat, CaptureWriter};
use crate::dissect::{LINKTYPE_ETHERNET, dissect};
use crate::identity::frame_identity;
use crate::records::InputStats;
use trace::TraceSource;
use traffic::{Synthetic, internet_checksum, splitmix64};

#[derive(Debug, Error)]
pub enum SimError {
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {source}")]
    Capture {
        path: String,
        #[source]
        source: CaptureError,
    },
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// Synthetic traffic at the sender.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficConfig {
    pub packets: u64,
    /// Mean packet rate, packets per second.
    pub rate_pps: f64,
    pub arrivals: Arrivals,
    /// Time of the first packet, ns since the epoch.
    pub start_ns: u64,
    pub flows: u32,
    /// Pareto shape of flow sizes (smaller is heavier-tailed).
    pub flow_shape: f64,
    /// Largest Pareto weight of a flow (the law truncated to `[1, W]`); infinite = untruncated.
    pub flow_max_weight: f64,
    /// Packet-size mix: (IP length, weight).
    pub sizes: Vec<(u16, f64)>,
    pub ipv6_fraction: f64,
    pub udp_fraction: f64,
}

impl Default for TrafficConfig {
    fn default() -> Self {
        TrafficConfig {
            packets: 100_000,
            rate_pps: 100_000.0,
            arrivals: Arrivals::Poisson,
            start_ns: 1_767_225_600_000_000_000, // 2026-01-01T00:00:00Z
            flows: 1_000,
            flow_shape: 1.2,
            flow_max_weight: f64::INFINITY,
            sizes: imix(),
            ipv6_fraction: 0.2,
            udp_fraction: 0.3,
        }
    }
}

impl TrafficConfig {
    /// Traffic shaped like the trace of LDS §5, scaled by `scale` (1 = the paper's size):
    /// 7 760 000 packets of 146 000 flows at 27 000 packets/s ("The trace averages 27Kpkts/s
    /// and contains around 7.76 million packets that belong to approximately 146000 flows").
    ///
    /// Flow sizes are Pareto with shape 0.85 truncated at weight 10⁵, fitted to what the paper
    /// says of its trace: flows below 100 packets carry ~20 % of the packets (18 % here), 10 %
    /// packet sampling records ~70 000 flows (~74 000 here), and `P = Pr[T₁ > 50]` ≈ 4.4 %
    /// from §3's `z = nP/C = 0.0875` at `n/C = 2` (6.4 % here). One shape cannot meet all
    /// three; this one errs towards more large flows, the harder case for a sketch.
    /// Traffic shaped like COLATE §6.1's CHIC trace (CAIDA's 10GigE backbone link: 37.3 M
    /// packets of 3.01 M flows in 5 minutes, 124 000 packets/s, Table 2) for `seconds`: the
    /// same rate and packets per flow (12.4), Pareto flow sizes (shape 0.85 truncated at weight
    /// 10⁵, LDS's fit: the paper's Fig. 5 shows mice and elephants, no law). 100 s gives 12.4 M
    /// packets of 1.0 M flows. The paper's RED queue is [`red::RedQueue`]; the path is chosen
    /// apart.
    pub fn chic_like(seconds: f64) -> TrafficConfig {
        let packets = (124_000.0 * seconds).round().max(1.0);
        TrafficConfig {
            packets: packets as u64,
            rate_pps: 124_000.0,
            flows: (packets / 12.4).round().max(1.0) as u32,
            flow_shape: 0.85,
            flow_max_weight: 1e5,
            ..TrafficConfig::default()
        }
    }

    pub fn lds_trace(scale: f64) -> TrafficConfig {
        TrafficConfig {
            packets: (7_760_000.0 * scale).round().max(1.0) as u64,
            rate_pps: 27_000.0,
            flows: (146_000.0 * scale).round().max(1.0) as u32,
            flow_shape: 0.85,
            flow_max_weight: 1e5,
            ..TrafficConfig::default()
        }
    }
}

/// Simple IMIX by IP length: 7 × 64 B, 4 × 570 B, 1 × 1500 B.
pub fn imix() -> Vec<(u16, f64)> {
    vec![(64, 7.0), (570, 4.0), (1500, 1.0)]
}

/// Parse a size mix: `imix`, or `LEN:WEIGHT,LEN:WEIGHT,...`, or one length.
pub fn parse_sizes(s: &str) -> Result<Vec<(u16, f64)>, SimError> {
    if s == "imix" {
        return Ok(imix());
    }
    let err = || {
        SimError::Invalid(format!(
            "size mix '{s}': expected imix, a length, or LEN:WEIGHT,LEN:WEIGHT (IP lengths 1..65535, weights > 0)"
        ))
    };
    let mut v = Vec::new();
    for part in s.split(',') {
        let (l, w) = match part.split_once(':') {
            Some((l, w)) => (l, w.trim().parse::<f64>().map_err(|_| err())?),
            None => (part, 1.0),
        };
        let l: u16 = l.trim().parse().map_err(|_| err())?;
        if l == 0 || !(w.is_finite() && w > 0.0) {
            return Err(err());
        }
        v.push((l, w));
    }
    if v.is_empty() {
        return Err(err());
    }
    Ok(v)
}

/// Router rewrites between S and R.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rewrite {
    /// Decrement TTL / hop limit (IPv4 checksum recomputed).
    pub ttl: bool,
    /// New source and destination MAC addresses (Ethernet only).
    pub mac: bool,
    /// Fraction of packets marked ECN CE (checksum recomputed).
    pub ecn_ce: f64,
}

impl Default for Rewrite {
    fn default() -> Self {
        Rewrite {
            ttl: true,
            mac: true,
            ecn_ce: 0.0,
        }
    }
}

impl std::str::FromStr for Rewrite {
    type Err = SimError;
    /// `none`, or a comma list of `ttl`, `mac`, `ecn=FRACTION`.
    fn from_str(s: &str) -> Result<Self, SimError> {
        let mut r = Rewrite {
            ttl: false,
            mac: false,
            ecn_ce: 0.0,
        };
        if s == "none" {
            return Ok(r);
        }
        for part in s.split(',').map(str::trim) {
            match part.split_once('=') {
                None if part == "ttl" => r.ttl = true,
                None if part == "mac" => r.mac = true,
                None if part == "ecn" => r.ecn_ce = 1.0,
                Some(("ecn", f)) => {
                    r.ecn_ce = f.parse().map_err(|_| {
                        SimError::Invalid(format!("rewrite '{s}': ecn=FRACTION needs a number"))
                    })?
                }
                _ => {
                    return Err(SimError::Invalid(format!(
                        "rewrite '{s}': expected none or a list of ttl, mac, ecn=FRACTION"
                    )));
                }
            }
        }
        Ok(r)
    }
}

/// Reordering: a fraction of delivered packets arrive after up to `max_displacement` packets
/// sent after them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reorder {
    pub fraction: f64,
    pub max_displacement: u32,
}

/// The path between S and R.
#[derive(Clone, Debug, PartialEq)]
pub struct PathConfig {
    pub delay: DelayModel,
    /// A second queue for a fraction of flows (chosen by flow hash) with its own delay.
    pub class: Option<(DelayModel, f64)>,
    /// ECMP-like paths, each flow pinned to one by hash (empty: one path).
    pub ecmp: Vec<EcmpPath>,
    /// Packets never overtake the previous packet of their queue: a packet waits for it
    /// (arrival = max(send + drawn delay, previous arrival of the queue)).
    pub fifo: bool,
    /// A RED bottleneck before everything else ([`red`]): its drops are losses, its queueing
    /// adds to the drawn delay.
    pub queue: Option<red::RedQueue>,
    pub loss: LossModel,
    pub reorder: Option<Reorder>,
    /// Fraction of delivered packets that arrive twice.
    pub duplicate: f64,
    pub rewrite: Rewrite,
    /// R's clock minus S's clock, ns.
    pub clock_offset_ns: i64,
    /// R's clock rate less S's, parts per million: R's clock gains `ppm · 10⁻⁶ · (t − t₀)` on
    /// S's by true time `t`, from the first packet's send time `t₀`.
    pub clock_skew_ppm: f64,
    /// Steps of R's clock (an NTP step), in true time since the first send, in order.
    pub clock_steps: Vec<ClockStepSpec>,
}

/// A step of R's clock: at `at_ns` of true time after the first packet was sent, R's clock
/// jumps by `size_ns` (negative: back).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ClockStepSpec {
    pub at_ns: u64,
    pub size_ns: i64,
}

impl std::str::FromStr for ClockStepSpec {
    type Err = SimError;
    /// `AT:SIZE`, durations with units: `30s:2ms`, `5s:-500us`.
    fn from_str(s: &str) -> Result<Self, SimError> {
        let err = |why: &str| {
            SimError::Invalid(format!(
                "clock step '{s}': {why} (expected AT:SIZE, durations with units, e.g. 30s:2ms or 5s:-500us)"
            ))
        };
        let (at, size) = s.split_once(':').ok_or_else(|| err("no ':'"))?;
        let at = owl_core::units::parse_duration_ns(at).map_err(|e| err(&e.to_string()))?;
        let size = owl_core::units::parse_duration_ns(size).map_err(|e| err(&e.to_string()))?;
        if at < 0.0 {
            return Err(err("AT is before the first packet"));
        }
        Ok(ClockStepSpec {
            at_ns: at.round() as u64,
            size_ns: size.round() as i64,
        })
    }
}

impl std::fmt::Display for ClockStepSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}ns:{}ns", self.at_ns, self.size_ns)
    }
}

impl Default for PathConfig {
    fn default() -> Self {
        PathConfig {
            delay: DelayModel::weibull_with_mean(100_000.0, 0.7),
            class: None,
            ecmp: Vec::new(),
            fifo: false,
            queue: None,
            loss: LossModel::None,
            reorder: None,
            duplicate: 0.0,
            rewrite: Rewrite::default(),
            clock_offset_ns: 0,
            clock_skew_ppm: 0.0,
            clock_steps: Vec::new(),
        }
    }
}

/// Where the sender's traffic comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum TrafficSource {
    Synthetic(TrafficConfig),
    /// A real capture (its IP packets and timestamps), and the pcapng interface to take them
    /// from (`None`: every interface, which must then be alike).
    Capture(PathBuf, Option<u32>),
}

/// A whole simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub seed: u64,
    pub traffic: TrafficSource,
    pub path: PathConfig,
    /// Capture length at both points (0 = whole packets).
    pub snaplen: u32,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 1,
            traffic: TrafficSource::Synthetic(TrafficConfig::default()),
            path: PathConfig::default(),
            snaplen: 128,
        }
    }
}

/// Most packets one simulation holds (per-packet state lives in memory, ~40 B a packet).
pub const MAX_PACKETS: u64 = 1 << 31;
/// Smallest useful snaplen: Ethernet + IPv6 + TCP + the unique payload tag.
pub const MIN_SNAPLEN: u32 = 14 + 60 + traffic::UNIQUE_TAG as u32;

impl SimConfig {
    /// Check every parameter; the error names the parameter and the allowed range.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |s: String| Err(SimError::Invalid(s));
        let frac = |name: &str, x: f64| {
            if (0.0..=1.0).contains(&x) {
                Ok(())
            } else {
                Err(SimError::Invalid(format!(
                    "{name} {x} must be a fraction in [0, 1]"
                )))
            }
        };
        if self.snaplen != 0 && !(MIN_SNAPLEN..=262_144).contains(&self.snaplen) {
            return bad(format!(
                "snaplen {} must be 0 (whole packets) or between {MIN_SNAPLEN} (headers and the unique payload tag) and 262144",
                self.snaplen
            ));
        }
        if let Some(q) = &self.path.queue {
            q.validate()?;
        }
        if let TrafficSource::Synthetic(t) = &self.traffic {
            if t.packets == 0 || t.packets > MAX_PACKETS {
                return bad(format!(
                    "packet count {} must be between 1 and {MAX_PACKETS}",
                    t.packets
                ));
            }
            if !(t.rate_pps.is_finite() && t.rate_pps > 0.0 && t.rate_pps <= 1e10) {
                return bad(format!(
                    "rate {} packets/s must be above 0 and at most 1e10",
                    t.rate_pps
                ));
            }
            let end_s = t.start_ns as f64 / 1e9 + t.packets as f64 / t.rate_pps * 1.01 + 1.0;
            if end_s >= u32::MAX as f64 {
                return bad(format!(
                    "{} packets at {} packets/s from the given start run past 2106, beyond what a pcap timestamp holds",
                    t.packets, t.rate_pps
                ));
            }
            if t.flows == 0 || t.flows as u64 > t.packets {
                return bad(format!(
                    "flow count {} must be between 1 and the packet count {}",
                    t.flows, t.packets
                ));
            }
            if !(t.flow_shape.is_finite() && t.flow_shape > 0.0) {
                return bad(format!("flow-size shape {} must be > 0", t.flow_shape));
            }
            if t.flow_max_weight.is_nan() || t.flow_max_weight <= 1.0 {
                return bad(format!(
                    "largest flow weight {} must be above 1 (or infinite: no truncation)",
                    t.flow_max_weight
                ));
            }
            if t.sizes.is_empty()
                || t.sizes
                    .iter()
                    .any(|s| s.0 == 0 || s.1.is_nan() || s.1 <= 0.0)
            {
                return bad("packet-size mix must list sizes ≥ 1 with weights > 0".into());
            }
            frac("IPv6 fraction", t.ipv6_fraction)?;
            frac("UDP fraction", t.udp_fraction)?;
        }
        let p = &self.path;
        p.delay.validate()?;
        if let Some((d, f)) = &p.class {
            d.validate()?;
            frac("class fraction", *f)?;
        }
        validate_ecmp(&p.ecmp)?;
        p.loss.validate()?;
        if let Some(r) = p.reorder {
            frac("reorder fraction", r.fraction)?;
            if r.max_displacement == 0 || r.max_displacement > 1_000_000 {
                return bad(format!(
                    "reorder displacement {} must be between 1 and 1000000 packets",
                    r.max_displacement
                ));
            }
        }
        if !(0.0..1.0).contains(&p.duplicate) {
            return bad(format!(
                "duplicate fraction {} must be in [0, 1)",
                p.duplicate
            ));
        }
        frac("ECN CE fraction", p.rewrite.ecn_ce)?;
        if p.clock_offset_ns.unsigned_abs() > 86_400_000_000_000 {
            return bad(format!(
                "clock offset {} ns is more than a day: use a real clock",
                p.clock_offset_ns
            ));
        }
        if !(p.clock_skew_ppm.is_finite() && p.clock_skew_ppm.abs() <= 1_000.0) {
            return bad(format!(
                "clock skew {} ppm must be within ±1000 ppm (a quartz is within ±100)",
                p.clock_skew_ppm
            ));
        }
        for w in p.clock_steps.windows(2) {
            if w[1].at_ns < w[0].at_ns {
                return bad("clock steps must be given in time order".into());
            }
        }
        if let Some(st) = p
            .clock_steps
            .iter()
            .find(|st| st.size_ns.unsigned_abs() > 1_000_000_000)
        {
            return bad(format!(
                "clock step of {} ns is more than a second",
                st.size_ns
            ));
        }
        Ok(())
    }
}

/// The simulator's own books.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimReport {
    pub seed: u64,
    /// Packets at S.
    pub sent: u64,
    pub lost: u64,
    /// Distinct packets that reached R.
    pub delivered: u64,
    /// Extra copies delivered to R.
    pub duplicated: u64,
    /// Delivered packets overtaken by a later-sent one (RFC 4737), from the sending order.
    pub reordered: u64,
    /// Packets the reordering step displaced.
    pub displaced: u64,
    /// Packets marked ECN CE by the router.
    pub ecn_marked: u64,
    /// Of `lost`, the RED bottleneck's early drops and tail drops (0 without one).
    pub red_early_drops: u64,
    pub red_tail_drops: u64,
    /// R's clock minus S's clock, ns (at the first packet's send time).
    pub clock_offset_ns: i64,
    /// R's clock rate less S's, ppm, and its steps (true time since the first send).
    pub clock_skew_ppm: f64,
    pub clock_steps: Vec<ClockStepSpec>,
    /// Mean and population std of the path delay (arrival − send, true clocks) of delivered
    /// packets, ns.
    pub path_delay_mean_ns: f64,
    pub path_delay_std_ns: f64,
    /// Mean of what a pair of captures shows: path delay plus R's clock error (offset, skew
    /// and steps) at each arrival.
    pub observed_delay_mean_ns: f64,
    /// Analytic mean of the configured delay model (first queue), ns.
    pub model_mean_ns: f64,
    pub first_send_ns: u64,
    pub last_send_ns: u64,
    /// What the `--from` capture held besides packets, when used.
    pub source: Option<InputStats>,
}

enum Source {
    Synthetic(Synthetic),
    Trace(TraceSource),
}

impl Source {
    fn len(&self) -> usize {
        match self {
            Source::Synthetic(s) => s.packets.len(),
            Source::Trace(t) => t.packets.len(),
        }
    }
    fn send_ns(&self, i: usize) -> u64 {
        match self {
            Source::Synthetic(s) => s.send_ns[i],
            Source::Trace(t) => t.packets[i].ts_ns,
        }
    }
    /// The packet's IP length, bytes.
    fn bytes(&self, i: usize) -> u32 {
        match self {
            Source::Synthetic(s) => s.packets[i].ip_len as u32,
            Source::Trace(t) => t.packets[i].orig_len,
        }
    }

    fn flow_hash(&self, i: usize) -> u64 {
        match self {
            Source::Synthetic(s) => s.flows[s.packets[i].flow as usize].key.hash(0x666c_6f77),
            Source::Trace(t) => t.packets[i].flow_hash,
        }
    }
    fn linktype(&self) -> u32 {
        match self {
            Source::Synthetic(_) => LINKTYPE_ETHERNET,
            Source::Trace(t) => t.linktype,
        }
    }
    fn frame(&self, i: usize, snaplen: u32, buf: &mut Vec<u8>) -> (usize, u32) {
        match self {
            Source::Synthetic(s) => s.frame(i, snaplen, buf),
            Source::Trace(t) => t.frame(i, snaplen, buf),
        }
    }
}

/// One delivery at R, in R's order: by arrival time, then, among equal times, by its place
/// in the path's order (`2·position` of the delivered packet, `2·position + 1` for a packet
/// reordered to just after the packet at `position`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Delivery {
    r_ns: u64,
    order: u64,
    idx: u32,
    dup: bool,
}

/// A finished simulation: the sender's packets, the receiver's deliveries, and the books.
pub struct Simulation {
    cfg: SimConfig,
    source: Source,
    deliveries: Vec<Delivery>,
    report: SimReport,
    ecn_seed: u64,
}

impl Simulation {
    /// Generate traffic and run it through the path.
    pub fn run(cfg: &SimConfig) -> Result<Simulation, SimError> {
        cfg.validate()?;
        let source = match &cfg.traffic {
            TrafficSource::Synthetic(t) => Source::Synthetic(Synthetic::generate(t, cfg.seed)?),
            TrafficSource::Capture(p, i) => Source::Trace(TraceSource::load(p, *i)?),
        };
        let n = source.len();
        let p = &cfg.path;
        let mut rng = Pcg64Mcg::seed_from_u64(cfg.seed ^ 0x7061_7468_0000_0001);
        let mut loss = p.loss.process();
        let samplers = [
            p.delay.sampler(),
            p.class.as_ref().map(|c| c.0).unwrap_or(p.delay).sampler(),
        ];
        let class_cut = p
            .class
            .as_ref()
            .map(|c| (c.1 * u64::MAX as f64) as u64)
            .unwrap_or(0);
        let class_seed: u64 = rng.random();
        // ECMP: a path per flow by an independent hash (derived, so the stream of draws, and
        // every run without ECMP, stays as it was)
        let ecmp_seed = mix(class_seed ^ 0x6563_6d70_7061_7468);
        let n_paths = p.ecmp.len().max(1);
        let path_samplers: Vec<Option<path::DelaySampler>> = p
            .ecmp
            .iter()
            .map(|e| e.delay.map(|d| d.sampler()))
            .collect();
        let mut last_arrival = vec![0u64; 2 * n_paths];

        // the RED bottleneck, loss, delay, FIFO
        let mut arrivals: Vec<(u64, u32)> = Vec::with_capacity(n);
        let mut lost = 0u64;
        let mut red = p.queue.map(red::RedState::new);
        for i in 0..n {
            let queued = match red.as_mut() {
                None => 0,
                Some(q) => match q.arrive(source.send_ns(i), source.bytes(i), &mut rng) {
                    red::Verdict::Queued(d) => d,
                    red::Verdict::EarlyDrop | red::Verdict::TailDrop => {
                        lost += 1;
                        continue;
                    }
                },
            };
            if loss.lost(&mut rng) {
                lost += 1;
                continue;
            }
            let class = if class_cut > 0
                && p.class.is_some()
                && mix(source.flow_hash(i) ^ class_seed) < class_cut
            {
                1
            } else {
                0
            };
            let s = source.send_ns(i);
            let (route, delay) = if p.ecmp.is_empty() {
                (0, samplers[class].sample(&mut rng))
            } else {
                let route = owl_core::hash::reduce(mix(source.flow_hash(i) ^ ecmp_seed), n_paths);
                let e = &p.ecmp[route];
                let d = match &path_samplers[route] {
                    Some(own) => own.sample(&mut rng),
                    None => samplers[class].sample(&mut rng),
                };
                (route, d.saturating_add(e.offset_ns.round() as u64))
            };
            let mut a = s.saturating_add(delay).saturating_add(queued);
            if p.fifo {
                let q = class * n_paths + route;
                a = a.max(last_arrival[q]);
                last_arrival[q] = a;
            }
            arrivals.push((a, i as u32));
        }

        // reordering: a packet lands just after the packet `d` positions later, before the one
        // after that (on a FIFO path, whose bursts share one arrival time, the order among equal
        // times says so: the packet is overtaken by `d` packets, not by the rest of a burst)
        let mut displaced = 0u64;
        let mut order: Vec<u64> = (0..arrivals.len() as u64).map(|k| 2 * k).collect();
        if let Some(r) = p.reorder
            && r.fraction > 0.0
            && arrivals.len() > 1
        {
            let orig: Vec<u64> = arrivals.iter().map(|a| a.0).collect();
            let last = arrivals.len() - 1;
            for (k, a) in arrivals[..last].iter_mut().enumerate() {
                if rng.random::<f64>() < r.fraction {
                    let d = rng.random_range(1..=r.max_displacement as usize);
                    let after = (k + d).min(last);
                    a.0 = orig[after] + 1;
                    if after < last && orig[after + 1] == orig[after] {
                        a.0 = orig[after];
                    }
                    order[k] = 2 * after as u64 + 1;
                    displaced += 1;
                }
            }
        }

        // path delays (true clocks) of the delivered packets
        let (mut sum, mut sumsq) = (0i128, 0f64);
        for &(a, i) in &arrivals {
            sum += (a - source.send_ns(i as usize)) as i128;
        }
        let delivered = arrivals.len() as u64;
        let path_mean = if delivered > 0 {
            sum as f64 / delivered as f64
        } else {
            f64::NAN
        };
        for &(a, i) in &arrivals {
            let x = (a - source.send_ns(i as usize)) as f64 - path_mean;
            sumsq += x * x;
        }

        // clock offset, duplicates
        let off = p.clock_offset_ns;
        let to_r = |a: u64| -> Result<u64, SimError> {
            u64::try_from(a as i128 + off as i128).map_err(|_| {
                SimError::Invalid(format!(
                    "clock offset {off} ns puts receiver timestamps before 1970"
                ))
            })
        };
        let mut deliveries: Vec<Delivery> = Vec::with_capacity(arrivals.len());
        let mut duplicated = 0u64;
        for (&(a, i), &o) in arrivals.iter().zip(&order) {
            let r = to_r(a)?;
            deliveries.push(Delivery {
                r_ns: r,
                order: o,
                idx: i,
                dup: false,
            });
            if p.duplicate > 0.0 && rng.random::<f64>() < p.duplicate {
                duplicated += 1;
                deliveries.push(Delivery {
                    r_ns: r + rng.random_range(1..=2_000u64),
                    order: o,
                    idx: i,
                    dup: true,
                });
            }
        }
        drop(arrivals);
        drop(order);
        deliveries.sort_unstable();
        // R's clock: skew and steps by true time (the capture order stays the true order, so a
        // backward step shows as timestamps going back)
        let t0 = if n > 0 { source.send_ns(0) } else { 0 };
        let (skew, steps) = (p.clock_skew_ppm * 1e-6, &p.clock_steps);
        if skew != 0.0 || !steps.is_empty() {
            for d in deliveries.iter_mut() {
                let a = (d.r_ns as i128 - off as i128).max(0) as u64;
                let since = a.saturating_sub(t0);
                let jump: i64 = steps
                    .iter()
                    .filter(|st| since >= st.at_ns)
                    .map(|st| st.size_ns)
                    .sum();
                let e = (skew * since as f64).round() as i128 + jump as i128;
                d.r_ns = u64::try_from(d.r_ns as i128 + e).map_err(|_| {
                    SimError::Invalid("R's clock steps put receiver timestamps before 1970".into())
                })?;
            }
        }
        let observed_sum: i128 = deliveries
            .iter()
            .filter(|d| !d.dup)
            .map(|d| d.r_ns as i128 - source.send_ns(d.idx as usize) as i128)
            .sum();

        // RFC 4737 reordering from the sending order
        let mut reordered = 0u64;
        let mut max_seen: Option<u32> = None;
        for d in deliveries.iter().filter(|d| !d.dup) {
            match max_seen {
                Some(m) if d.idx < m => reordered += 1,
                _ => max_seen = Some(d.idx),
            }
        }

        let ecn_seed: u64 = rng.random();
        let ecn_marked = if p.rewrite.ecn_ce > 0.0 {
            deliveries
                .iter()
                .filter(|d| !d.dup && ecn_marks(ecn_seed, d.idx, p.rewrite.ecn_ce))
                .count() as u64
        } else {
            0
        };

        let report = SimReport {
            seed: cfg.seed,
            sent: n as u64,
            lost,
            delivered,
            duplicated,
            reordered,
            displaced,
            ecn_marked,
            red_early_drops: red.as_ref().map_or(0, |q| q.early_drops),
            red_tail_drops: red.as_ref().map_or(0, |q| q.tail_drops),
            clock_offset_ns: off,
            clock_skew_ppm: p.clock_skew_ppm,
            clock_steps: p.clock_steps.clone(),
            path_delay_mean_ns: path_mean,
            path_delay_std_ns: if delivered > 0 {
                (sumsq / delivered as f64).sqrt()
            } else {
                f64::NAN
            },
            observed_delay_mean_ns: if delivered > 0 {
                observed_sum as f64 / delivered as f64
            } else {
                f64::NAN
            },
            model_mean_ns: p.delay.mean(),
            first_send_ns: source.send_ns(0),
            last_send_ns: source.send_ns(n - 1),
            source: match &source {
                Source::Trace(t) => Some(t.stats),
                Source::Synthetic(_) => None,
            },
        };
        Ok(Simulation {
            cfg: cfg.clone(),
            source,
            deliveries,
            report,
            ecn_seed,
        })
    }

    pub fn report(&self) -> &SimReport {
        &self.report
    }

    pub fn linktype(&self) -> u32 {
        self.source.linktype()
    }

    /// The frame R captures for delivery `d`: S's frame after the router's rewrites.
    fn receiver_frame(&self, d: &Delivery, buf: &mut Vec<u8>) -> (usize, u32) {
        let (ip, wire) = self.source.frame(d.idx as usize, self.cfg.snaplen, buf);
        let rw = self.cfg.path.rewrite;
        if rw.mac && self.source.linktype() == LINKTYPE_ETHERNET && buf.len() >= 12 {
            buf[..12].copy_from_slice(&ROUTER_MACS);
        }
        let ce = rw.ecn_ce > 0.0 && ecn_marks(self.ecn_seed, d.idx, rw.ecn_ce);
        if let Some(&b0) = buf.get(ip) {
            match b0 >> 4 {
                4 if buf.len() >= ip + 20 => {
                    let mut changed = false;
                    if rw.ttl && buf[ip + 8] > 0 {
                        buf[ip + 8] -= 1;
                        changed = true;
                    }
                    if ce {
                        buf[ip + 1] |= 0x03;
                        changed = true;
                    }
                    if changed {
                        let ihl = ((buf[ip] & 0x0f) as usize * 4).clamp(20, buf.len() - ip);
                        buf[ip + 10] = 0;
                        buf[ip + 11] = 0;
                        let c = internet_checksum(0, &buf[ip..ip + ihl]);
                        buf[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
                    }
                }
                6 if buf.len() >= ip + 40 => {
                    if rw.ttl && buf[ip + 7] > 0 {
                        buf[ip + 7] -= 1;
                    }
                    if ce {
                        buf[ip + 1] |= 0x30;
                    }
                }
                _ => {}
            }
        }
        (ip, wire)
    }

    /// Write `sender.EXT` and `receiver.EXT` into `dir`; `progress(done, total)` is called every
    /// 64 Ki packets.
    ///
    /// The two files are written together in capture-time order (the older of the next sender
    /// packet and the next receiver packet first), so that they can be FIFOs read in lock-step
    /// by `owl compare`: `mkfifo DIR/sender.pcap DIR/receiver.pcap` before, and nothing is
    /// stored on disk.
    pub fn write(
        &self,
        dir: &Path,
        format: CaptureFormat,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(PathBuf, PathBuf), SimError> {
        std::fs::create_dir_all(dir)?;
        let sp = dir.join(format!("sender.{}", format.extension()));
        let rp = dir.join(format!("receiver.{}", format.extension()));
        let lt = self.source.linktype();
        let total = (self.source.len() + self.deliveries.len()) as u64;
        let mut buf = Vec::with_capacity(2048);
        let mut done = 0u64;
        // Small buffers, flushed together: a FIFO reader waiting for one file never waits on
        // bytes held back in the other's buffer for long.
        let open = |p: &Path| -> Result<_, SimError> {
            Ok(CaptureWriter::new(
                BufWriter::with_capacity(64 << 10, File::create(p)?),
                format,
                lt,
                self.cfg.snaplen,
            )?)
        };
        let mut ws = open(&sp)?;
        let mut wr = open(&rp)?;
        let (mut i, mut j) = (0, 0);
        let n = self.source.len();
        while i < n || j < self.deliveries.len() {
            let sender_first = j >= self.deliveries.len()
                || (i < n && self.source.send_ns(i) <= self.deliveries[j].r_ns);
            if sender_first {
                let (_, wire) = self.source.frame(i, self.cfg.snaplen, &mut buf);
                ws.write_packet(self.source.send_ns(i), &buf, wire)?;
                i += 1;
            } else {
                let d = &self.deliveries[j];
                let (_, wire) = self.receiver_frame(d, &mut buf);
                wr.write_packet(d.r_ns, &buf, wire)?;
                j += 1;
            }
            done += 1;
            if done & 0xfff == 0 {
                ws.flush()?;
                wr.flush()?;
            }
            if done & 0xffff == 0 {
                progress(done, total);
            }
        }
        ws.finish()?;
        wr.finish()?;
        progress(total, total);
        Ok((sp, rp))
    }

    /// The records both points would compute from the captures, without writing them: the
    /// same frames, dissector and identity (for experiments that need no files).
    pub fn records(&self, identity_seed: u64) -> (Vec<PacketRecord>, Vec<PacketRecord>) {
        let mut buf = Vec::with_capacity(2048);
        let lt = self.source.linktype();
        let to_rec = |buf: &[u8], ts: u64| -> Option<PacketRecord> {
            let d = dissect(lt, buf).ok()?;
            Some(PacketRecord {
                ts_ns: ts,
                id: frame_identity(buf, &d, identity_seed),
                flow: d.flow,
                len: d.ip_len,
            })
        };
        let mut s = Vec::with_capacity(self.source.len());
        for i in 0..self.source.len() {
            self.source.frame(i, self.cfg.snaplen, &mut buf);
            s.extend(to_rec(&buf, self.source.send_ns(i)));
        }
        let mut r = Vec::with_capacity(self.deliveries.len());
        for d in &self.deliveries {
            self.receiver_frame(d, &mut buf);
            r.extend(to_rec(&buf, d.r_ns));
        }
        (s, r)
    }
}

fn ecn_marks(seed: u64, idx: u32, fraction: f64) -> bool {
    let mut st = seed ^ idx as u64;
    (splitmix64(&mut st) as f64) < fraction * u64::MAX as f64
}

#[inline]
fn mix(x: u64) -> u64 {
    let mut s = x;
    splitmix64(&mut s)
}

#[cfg(test)]
mod tests;
