//! NetFlow MPE — the Multiflow estimator over Consistent NetFlow (Lee, Duffield, Kompella,
//! "Two samples are enough", INFOCOM'10), the baseline of LDS §5.1.
//!
//! Both routers sample packets with the *same* hash of the packet (coordinated sampling, as in
//! trajectory sampling), so they sample the same packets and their NetFlow records of a flow
//! start and end with the same packets. A record already holds the first and last timestamps:
//! comparing the two routers' records gives two delay samples per sampled flow ("for each
//! sampled flow, there exist two delay samples"). Because packets close in time see similar
//! delays (the assumption), the estimator adds the delay samples of *other* flows' records
//! that fall within the flow's lifetime: a flow's delay is the mean of every delay sample taken
//! between its first and its last sampled packet, its own two included. Flows with no record
//! fall back to the mean of all delay samples (LDS §5.1: "we estimate their delay as the average
//! delay of all packets").
//!
//! Sampling is per packet, by a hash of its identity at rate `p` (1 % and 10 % in LDS §5.1). A
//! flow is recorded as soon as one of its packets is sampled: LDS §5.1's numbers — 10 %
//! sampling "captures around 70000 flows" of 146 000, "misses … more than 50 %" — are those of
//! packet sampling (flow sampling would keep 10 % of the flows whatever their size).
//!
//! A flow whose record counts differ between the routers lost sampled packets: its first or
//! last sample may pair two different packets, so it contributes no delay sample (its estimate
//! still uses the other flows' samples in its lifetime).
//!
//! # Interval of the std
//!
//! The aggregate estimate's std is that of the delay samples, and each sample is the exact
//! delay of one packet chosen by the sampling hash (independently of its delay) and by its
//! place in its flow (first or last sampled packet). Its 95 % interval is Bonett's
//! kurtosis-adjusted one ([`crate::stats::ci::bonett_std_ci95`]), asymptotically
//! distribution-free for independent samples. It is an interval for the std of the delays of
//! the packets MPE samples, which is what the estimate's std is; three caveats separate that
//! from the std of every packet's delay: the samples are *flow-weighted* (every recorded flow
//! gives one or two, whatever its size), so when delays differ between flows the packet-weighted
//! std can lie outside the interval; a flow's first and last samples are close in time when the
//! flow is short, and delays close in time are correlated (the assumption the per-flow estimator
//! rests on), so the samples are not fully independent and the interval is somewhat narrow; and
//! first and last packets of flows need not see the delays of the packets in between (a flow's
//! first packet may be a SYN).

use hashbrown::HashMap;

use crate::hash::{HashFamily, HashFn};
use crate::method::{
    DeclaredConfig, Estimate, FlowEstimate, MethodConfig, MethodError, TypedSynopsis,
};
use crate::record::{FlowKey, PacketRecord};
use crate::wire::{DecodeError, WireReader, WireWriter};

/// Bytes of an exported NetFlow v5 flow record.
pub const RECORD_BYTES: u64 = 48;
const SAMPLE: u64 = 0x3be_0100;

crate::method_config! {
    /// What both routers agree on.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Config for "mpe" {
        /// Packet sampling rate, in (0, 1].
        rate: f64,
        seed: u64,
    }
}

impl Config {
    /// A configuration from its fields, refused unless [`validate`](Self::validate) accepts
    /// it: the only way to build one outside this module, so every `Config` is sound.
    pub fn new(rate: f64, seed: u64) -> Result<Config, MethodError> {
        let c = Config { rate, seed };
        c.validate()?;
        Ok(c)
    }
    pub fn rate(&self) -> f64 {
        self.rate
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn validate(&self) -> Result<(), MethodError> {
        if !(self.rate > 0.0 && self.rate <= 1.0) {
            return Err(MethodError::Invalid(format!(
                "mpe: sampling rate {} must be in (0, 1]",
                self.rate
            )));
        }
        Ok(())
    }
    /// Rebuild a configuration from `(field, value)` pairs over the defaults; an unknown
    /// field is an error that names it.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Config, MethodError> {
        Config::from_pairs_over(Config { rate: 0.1, seed: 1 }, pairs)
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
}

/// A NetFlow record of the sampled packets of one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRecord {
    pub first_ns: u64,
    pub last_ns: u64,
    pub packets: u64,
}

/// One router's flow cache for one interval.
#[derive(Clone, Debug)]
pub struct Synopsis {
    cfg: Config,
    sample: HashFn,
    cut: u64,
    all: bool,
    pub records: HashMap<FlowKey, FlowRecord>,
}

impl Synopsis {
    pub fn new(cfg: &Config) -> Synopsis {
        Synopsis {
            cfg: cfg.clone(),
            sample: HashFamily::new(cfg.seed).member(SAMPLE),
            cut: (cfg.rate * 18_446_744_073_709_551_616.0).min(u64::MAX as f64) as u64,
            all: cfg.rate >= 1.0,
            records: HashMap::new(),
        }
    }

    /// Whether the coordinated sampler takes packet `id`.
    pub fn sampled(&self, id: u64) -> bool {
        self.all || self.sample.hash(id) < self.cut
    }
}

impl TypedSynopsis for Synopsis {
    const METHOD: &'static str = "mpe";
    fn record(&mut self, rec: &PacketRecord) {
        if !self.sampled(rec.id) {
            return;
        }
        self.records
            .entry(rec.flow)
            .and_modify(|r| {
                r.first_ns = r.first_ns.min(rec.ts_ns);
                r.last_ns = r.last_ns.max(rec.ts_ns);
                r.packets += 1;
            })
            .or_insert(FlowRecord {
                first_ns: rec.ts_ns,
                last_ns: rec.ts_ns,
                packets: 1,
            });
    }
    fn encoded_len(&self) -> usize {
        8 + 61 * self.records.len()
    }
    /// A NetFlow v5 record (48 B) per sampled flow; the file's records carry the full flow key.
    fn shipped_len(&self) -> Option<u64> {
        Some(RECORD_BYTES * self.records.len() as u64)
    }
    /// Flow records merged flow by flow, as a router's cache would have grown them: a
    /// flow's first timestamp is the smaller of the two, its last the larger (the minimum and
    /// maximum over its sampled packets, as recording keeps them whatever the order of
    /// timestamps), its packets added; a flow only one side recorded is taken as it is. Both
    /// must sample alike (rate and seed).
    fn merge(&mut self, later: Synopsis) -> Result<(), MethodError> {
        crate::method::check_merge(self.cfg.pairs(), later.cfg.pairs())?;
        for (k, l) in later.records {
            match self.records.entry(k) {
                hashbrown::hash_map::Entry::Occupied(mut o) => {
                    let r = o.get_mut();
                    r.first_ns = r.first_ns.min(l.first_ns);
                    r.last_ns = r.last_ns.max(l.last_ns);
                    r.packets = r.packets.checked_add(l.packets).ok_or_else(|| {
                        MethodError::Invalid("mpe: merged packet count overflows".into())
                    })?;
                }
                hashbrown::hash_map::Entry::Vacant(v) => {
                    v.insert(l);
                }
            }
        }
        Ok(())
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let mut v: Vec<(&FlowKey, &FlowRecord)> = self.records.iter().collect();
        v.sort_by_key(|(k, _)| **k);
        let mut w = WireWriter::new(out);
        w.reserve(self.encoded_len());
        w.u64(v.len() as u64);
        for (k, r) in v {
            w.bytes(&k.canonical_bytes());
            w.u64(r.first_ns);
            w.u64(r.last_ns);
            w.u64(r.packets);
        }
    }
}

/// Delay samples of one interval, sorted by sending time, with prefix sums.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    pub times: Vec<u64>,
    pub delays: Vec<f64>,
    prefix: Vec<f64>,
}

impl Samples {
    /// Every delay sample the two caches give: first and last packet of every flow recorded
    /// with the same count at both routers.
    pub fn from_caches(s: &Synopsis, r: &Synopsis) -> Samples {
        let mut v: Vec<(u64, f64)> = Vec::new();
        for (k, a) in &s.records {
            let Some(b) = r.records.get(k) else { continue };
            if a.packets != b.packets {
                continue;
            }
            v.push((
                a.first_ns,
                b.first_ns.wrapping_sub(a.first_ns) as i64 as f64,
            ));
            if a.packets > 1 {
                v.push((a.last_ns, b.last_ns.wrapping_sub(a.last_ns) as i64 as f64));
            }
        }
        v.sort_by(|x, y| x.0.cmp(&y.0).then(x.1.total_cmp(&y.1)));
        let mut prefix = Vec::with_capacity(v.len() + 1);
        prefix.push(0.0);
        let mut acc = 0.0;
        for &(_, d) in &v {
            acc += d;
            prefix.push(acc);
        }
        Samples {
            times: v.iter().map(|x| x.0).collect(),
            delays: v.iter().map(|x| x.1).collect(),
            prefix,
        }
    }

    /// Mean of every sample (the fallback for flows with no record).
    pub fn mean(&self) -> Option<f64> {
        let n = self.delays.len();
        (n > 0).then(|| self.prefix[n] / n as f64)
    }

    /// Mean of the samples taken in `[from, to]` and how many there are.
    pub fn mean_between(&self, from: u64, to: u64) -> Option<(f64, usize)> {
        let lo = self.times.partition_point(|&t| t < from);
        let hi = self.times.partition_point(|&t| t <= to);
        (hi > lo).then(|| {
            (
                (self.prefix[hi] - self.prefix[lo]) / (hi - lo) as f64,
                hi - lo,
            )
        })
    }
}

/// NetFlow MPE as a method.
#[derive(Debug)]
pub struct MpeMethod {
    name: String,
    cfg: Config,
}

impl MpeMethod {
    pub fn new(name: &str, cfg: Config) -> Result<MpeMethod, MethodError> {
        cfg.validate()?;
        Ok(MpeMethod {
            name: name.into(),
            cfg,
        })
    }

    /// The Multiflow estimate of flow `f`.
    pub fn flow(&self, s: &Synopsis, r: &Synopsis, samples: &Samples, f: &FlowKey) -> FlowEstimate {
        let fallback = FlowEstimate {
            mean_ns: samples.mean(),
            ..Default::default()
        };
        let Some(a) = s.records.get(f) else {
            return fallback;
        };
        let p = self.cfg.rate;
        FlowEstimate {
            mean_ns: samples
                .mean_between(a.first_ns, a.last_ns)
                .map(|x| x.0)
                .or(samples.mean()),
            std_ns: None,
            packets: Some(a.packets as f64 / p),
            lost: r
                .records
                .get(f)
                .map(|b| a.packets.saturating_sub(b.packets) as f64 / p),
            ..Default::default()
        }
    }

    /// A point's synopsis from its payload.
    pub fn decode(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        let mut r = WireReader::new(bytes);
        let n = r.u64("record count")?;
        if (n as u128) * 61 != r.remaining() as u128 {
            return Err(r.invalid(format!(
                "{n} flow records do not fit the {} bytes that follow",
                r.remaining()
            )));
        }
        let mut c = Synopsis::new(&self.cfg);
        for _ in 0..n {
            let kb: [u8; 37] = r.take(37, "flow key")?.try_into().unwrap();
            let rec = FlowRecord {
                first_ns: r.u64("first timestamp")?,
                last_ns: r.u64("last timestamp")?,
                packets: r.u64("packet count")?,
            };
            if rec.first_ns > rec.last_ns || rec.packets == 0 {
                return Err(r.invalid("flow record with last before first or no packet"));
            }
            if c.records
                .insert(FlowKey::from_canonical_bytes(&kb), rec)
                .is_some()
            {
                return Err(r.invalid("the same flow is recorded twice"));
            }
        }
        Ok(c)
    }
}

impl crate::method::TypedMethod for MpeMethod {
    type Config = Config;
    type Sender = Synopsis;
    type Receiver = Synopsis;
    fn name(&self) -> &str {
        &self.name
    }
    fn config(&self) -> &Config {
        &self.cfg
    }
    fn foreign(&self) -> crate::method::Foreign {
        crate::method::Foreign::AssumesNone(
            "a flow's first and last sampled packets are paired by time, not identity",
        )
    }
    fn new_sender(&self) -> Synopsis {
        Synopsis::new(&self.cfg)
    }
    fn new_receiver(&self) -> Synopsis {
        Synopsis::new(&self.cfg)
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        self.decode(bytes)
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        self.decode(bytes)
    }
    fn estimate(&self, s: Synopsis, r: Synopsis) -> Result<Estimate, MethodError> {
        let sm = Samples::from_caches(&s, &r);
        let n = sm.delays.len();
        let std = sm
            .mean()
            .map(|m| (sm.delays.iter().map(|d| (d - m) * (d - m)).sum::<f64>() / n as f64).sqrt());
        let reason = (n == 0).then(|| {
            format!(
                "no estimate: none of the {} sampled flows arrived with all its sampled packets",
                s.records.len()
            )
        });
        Ok(Estimate {
            reason,
            quantiles: None,
            recovered: None,
            mean_ns: sm.mean(),
            std_ns: std,
            samples: n as u64,
            bytes: RECORD_BYTES * s.records.len() as u64,
            lost: None,
            mean_ci98_ns: None,
            // the delay samples are exact delays (module doc, "Interval of the std")
            std_ci95_ns: crate::stats::ci::bonett_std_ci95(&sm.delays),
            notes: vec![format!(
                "{} flows recorded at sampling rate {}; unrecorded flows take the mean of all samples",
                s.records.len(),
                self.cfg.rate
            )],
        })
    }
    fn estimate_flows(
        &self,
        sender: &Synopsis,
        receiver: &Synopsis,
        flows: &[FlowKey],
    ) -> Option<Result<Vec<FlowEstimate>, MethodError>> {
        Some(Ok({
            let (s, r) = (sender, receiver);
            let sm = Samples::from_caches(s, r);
            flows.iter().map(|f| self.flow(s, r, &sm, f)).collect()
        }))
    }
}

fn mpe_default(name: &str, seed: u64) -> Config {
    Config {
        rate: if name == "mpe1" { 0.01 } else { 0.1 },
        seed,
    }
}

/// `mpe`: 10 % coordinated sampling; not sizeable by memory (its cost follows its rate).
pub const TEN_PERCENT: crate::method::MethodInfo = crate::method::MethodInfo {
    name: "mpe",
    summary: "NetFlow multi-point estimator, 10% coordinated packet sampling, per-flow",
    samples: "delay samples: the first and last packet of every sampled flow whose sampled packets all arrived (2 per flow): a flow with a lost sampled packet gives none, so a higher sampling rate can give fewer samples under loss",
    per_flow: true,
    crosses: "each point's sampled flow records (61 B a flow), one way; no round trip",
    per_packet: false,
    recovers_delays: false,
    build: |o| Ok(Box::new(MpeMethod::new("mpe", mpe_default("mpe", o.seed))?)),
    from_config: |p| {
        Ok(Box::new(MpeMethod::new(
            "mpe",
            Config::from_pairs_over(mpe_default("mpe", 1), p)?,
        )?))
    },
};

/// `mpe1`: 1 % coordinated sampling.
pub const ONE_PERCENT: crate::method::MethodInfo = crate::method::MethodInfo {
    name: "mpe1",
    summary: "NetFlow multi-point estimator, 1% coordinated packet sampling, per-flow",
    samples: "delay samples: the first and last packet of every sampled flow whose sampled packets all arrived (2 per flow): a flow with a lost sampled packet gives none, so a higher sampling rate can give fewer samples under loss",
    per_flow: true,
    crosses: "each point's sampled flow records (61 B a flow), one way; no round trip",
    per_packet: false,
    recovers_delays: false,
    build: |o| {
        Ok(Box::new(MpeMethod::new(
            "mpe1",
            mpe_default("mpe1", o.seed),
        )?))
    },
    from_config: |p| {
        Ok(Box::new(MpeMethod::new(
            "mpe1",
            Config::from_pairs_over(mpe_default("mpe1", 1), p)?,
        )?))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::{Method, Role};
    use crate::test_traffic::{key, traffic};

    /// A flow's record merged from two keeps the earliest first and the latest last
    /// timestamp wherever they fell (timestamps out of order across the split included) and
    /// the packets of both: the record of both streams. Another rate is refused.
    #[test]
    fn merged_records_keep_the_first_and_last_timestamps() {
        let m = MpeMethod::new("mpe", Config { rate: 1.0, seed: 1 }).unwrap();
        let pk = |id: u64, ts: u64, f: u32| PacketRecord {
            ts_ns: ts,
            id,
            flow: key(f),
            len: 1,
        };
        // flow 0's earliest packet comes after the split, its latest before; flow 1 only after
        let a = [pk(1, 500, 0), pk(2, 900, 0), pk(3, 600, 2)];
        let b = [pk(4, 300, 0), pk(5, 700, 0), pk(6, 800, 1), pk(7, 100, 2)];
        let mut whole = m.new_point(Role::Sender);
        whole.record_batch(&a);
        whole.record_batch(&b);
        let mut head = m.new_point(Role::Sender);
        head.record_batch(&a);
        let mut later = m.new_point(Role::Sender);
        later.record_batch(&b);
        head.merge(later).unwrap();
        let records = |p: &dyn crate::method::PointSynopsis| {
            let s = crate::method::sender_ref::<MpeMethod>(p).unwrap();
            let mut v: Vec<_> = s.records.iter().map(|(k, r)| (*k, *r)).collect();
            v.sort_by_key(|x| x.0);
            v
        };
        assert_eq!(records(&*head), records(&*whole));
        let f0 = records(&*head)
            .into_iter()
            .find(|x| x.0 == key(0))
            .unwrap()
            .1;
        assert_eq!((f0.first_ns, f0.last_ns, f0.packets), (300, 900, 4));
        let one = MpeMethod::new(
            "mpe1",
            Config {
                rate: 0.01,
                seed: 1,
            },
        )
        .unwrap();
        let e = head.merge(one.new_point(Role::Sender)).unwrap_err();
        assert!(e.to_string().contains("rate"), "{e}");
    }

    #[test]
    fn coordinated_sampling_and_multiflow_window() {
        let m = MpeMethod::new("mpe", Config { rate: 1.0, seed: 1 }).unwrap();
        let (mut a, mut b) = (m.new_point(Role::Sender), m.new_point(Role::Receiver));
        // flow 0 lives from t=100 to t=1000 with delays 10 (first) and 30 (last); flow 1 has
        // one packet at t=500 with delay 50, flow 2 one at t=2000 with delay 1000
        let pk = |id: u64, ts: u64, f: u32| PacketRecord {
            ts_ns: ts,
            id,
            flow: key(f),
            len: 1,
        };
        for (id, ts, f, d) in [
            (1, 100, 0, 10),
            (2, 500, 1, 50),
            (3, 700, 0, 20),
            (4, 1000, 0, 30),
            (5, 2000, 2, 1000),
        ] {
            a.record(&pk(id, ts, f));
            b.record(&pk(id, ts + d, f));
        }
        let est = m
            .estimate_flows(&*a, &*b, &[key(0), key(1), key(2), key(3)])
            .unwrap()
            .unwrap();
        // flow 0: its first (10) and last (30) plus flow 1's sample (50) in between
        assert_eq!(est[0].mean_ns, Some(30.0));
        assert_eq!(est[0].packets, Some(3.0));
        assert_eq!(est[1].mean_ns, Some(50.0));
        // flow 3 was never recorded: the mean of all samples
        assert_eq!(est[3].mean_ns, Some((10.0 + 50.0 + 30.0 + 1000.0) / 4.0));
        assert_eq!(est[3].packets, None);
    }

    #[test]
    fn sampled_flows_fraction_follows_packet_sampling() {
        let (s, _, flows) = traffic(31, 4_000, 10_000, 0.0);
        for rate in [0.01, 0.1] {
            let mut c = Synopsis::new(&Config { rate, seed: 9 });
            for x in &s {
                c.record(x);
            }
            // expected recorded flows: Σ 1 − (1 − p)^size; the count is a sum of independent
            // Bernoullis, so 6 sd bound it
            let (mut mean, mut var) = (0.0, 0.0);
            for f in &flows {
                let q = 1.0 - (1.0 - rate).powi(f.sent as i32);
                mean += q;
                var += q * (1.0 - q);
            }
            let got = c.records.len() as f64;
            assert!(
                (got - mean).abs() < 6.0 * var.sqrt() + 1.0,
                "{rate}: {got} vs {mean}"
            );
        }
    }

    #[test]
    fn loss_of_a_sampled_packet_drops_the_flows_samples() {
        let m = MpeMethod::new("mpe", Config { rate: 1.0, seed: 1 }).unwrap();
        let (mut a, mut b) = (m.new_point(Role::Sender), m.new_point(Role::Receiver));
        for i in 0..10u64 {
            let p = PacketRecord {
                ts_ns: 1000 * i,
                id: i + 1,
                flow: key(5),
                len: 1,
            };
            a.record(&p);
            if i != 0 {
                b.record(&PacketRecord {
                    ts_ns: p.ts_ns + 7,
                    ..p
                });
            }
        }
        let e = m.estimate(a, b).unwrap();
        assert_eq!(e.samples, 0);
        assert_eq!(e.mean_ns, None);
    }

    /// The aggregate estimate's std comes with Bonett's interval around it once there are 10
    /// samples or more; below, none.
    #[test]
    fn std_interval_of_the_samples() {
        let (s, r, _) = traffic(32, 2_000, 1_000, 0.0);
        let m = MpeMethod::new("mpe", Config { rate: 0.1, seed: 3 }).unwrap();
        let (mut a, mut b) = (m.new_point(Role::Sender), m.new_point(Role::Receiver));
        a.record_batch(&s);
        b.record_batch(&r);
        let e = m.estimate(a, b).unwrap();
        assert!(e.samples > 100, "{e:?}");
        let sd = e.std_ns.unwrap();
        let [lo, hi] = e.std_ci95_ns.unwrap();
        assert!(lo < sd && sd < hi, "{lo} {sd} {hi}");
        let (mut a, mut b) = (m.new_point(Role::Sender), m.new_point(Role::Receiver));
        a.record_batch(&s[..20]);
        b.record_batch(&r[..20]);
        let e = m.estimate(a, b).unwrap();
        assert!(e.samples < 10, "{e:?}");
        assert_eq!(e.std_ci95_ns, None);
    }

    #[test]
    fn config_and_hostile_bytes() {
        assert!(MpeMethod::new("mpe", Config { rate: 0.0, seed: 1 }).is_err());
        assert!(MpeMethod::new("mpe", Config { rate: 1.5, seed: 1 }).is_err());
        let c = Config { rate: 0.1, seed: 3 };
        let p: Vec<(String, String)> = c
            .pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(Config::from_pairs(&p).unwrap(), c);
        let m = MpeMethod::new("mpe", Config { rate: 1.0, seed: 3 }).unwrap();
        let mut a = m.new_point(Role::Sender);
        for i in 0..5 {
            a.record(&PacketRecord {
                ts_ns: i,
                id: i,
                flow: key(i as u32),
                len: 1,
            });
        }
        let mut b = Vec::new();
        a.encode(&mut b);
        let d = m.decode_point(Role::Sender, &b).unwrap();
        let dc = crate::method::sender_ref::<MpeMethod>(&*d).unwrap();
        assert_eq!(
            &dc.records,
            &crate::method::sender_ref::<MpeMethod>(&*a).unwrap().records
        );
        assert!(m.decode_point(Role::Sender, &b[..b.len() - 3]).is_err());
        let mut lie = b.clone();
        lie[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(m.decode_point(Role::Sender, &lie).is_err());
    }
}
