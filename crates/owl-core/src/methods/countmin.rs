//! Count-Min with timestamp sums — the cheap per-flow reference COLATE §6.5 dismisses.
//!
//! Each point keeps a Count-Min sketch (Cormode and Muthukrishnan) of `d` rows × `w` counters
//! whose counters add the packets' timestamps, and a second one of the same shape counting
//! packets. A flow's timestamp sum at each point is the Count-Min point query — the minimum
//! over the rows of its counters — and its delay is
//! `(t̃_R − t̃_S) / ñ_S` with `ñ_S` the point query of the counts at S.
//!
//! COLATE §6.5 states the limitation: the guarantee is `t̃_f ≤ t_f + β·Σ_j t_j`, an error
//! relative to the sum of *every* flow's timestamps, whereas a delay needs one relative to the
//! flow's own — the difference of two sums of absolute timestamps, each off by whole colliding
//! timestamps. And the two points answer their point queries independently: when they pick
//! different rows, the difference mixes packet sets and the "delay" is off by up to the
//! interval's length times the colliding packets. Unlike the SDS and LDS (which pick one cell
//! for both points by its count), nothing here ties the two minima together; with loss, the
//! counts do not even agree. Sums are `u128`, so minima compare true sums (wrapping sums
//! would make a minimum meaningless).

use crate::hash::{HashFamily, HashFn};
use crate::method::{
    DeclaredConfig, Estimate, FlowEstimate, MethodConfig, MethodError, TypedSynopsis,
};
use crate::record::{FlowKey, PacketRecord};
use crate::wire::{DecodeError, WireReader, WireWriter};

/// Bytes of one counter pair on the wire: timestamp sum (u128) and count (u32).
pub const CELL_BYTES: usize = 20;
const ROW: u64 = 0xc0_0100;

crate::method_config! {
    /// What both points agree on.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Config for "countmin" {
        /// d: rows (hash functions).
        rows: usize,
        /// w: counters per row.
        width: usize,
        seed: u64,
    }
}

impl Config {
    /// A configuration from its fields, refused unless [`validate`](Self::validate) accepts
    /// it: the only way to build one outside this module, so every `Config` is sound.
    pub fn new(rows: usize, width: usize, seed: u64) -> Result<Config, MethodError> {
        let c = Config { rows, width, seed };
        c.validate()?;
        Ok(c)
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn width(&self) -> usize {
        self.width
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn validate(&self) -> Result<(), MethodError> {
        if self.rows == 0 || self.width == 0 {
            return Err(MethodError::Invalid(format!(
                "countmin: {} rows × {} counters: both must be at least 1",
                self.rows, self.width
            )));
        }
        if self.rows > 64 || self.rows.saturating_mul(self.width) > 1 << 27 {
            return Err(MethodError::Invalid(format!(
                "countmin: {} × {} counters is absurd (at most 64 rows and 2^27 counters)",
                self.rows, self.width
            )));
        }
        Ok(())
    }
    /// Rebuild a configuration from `(field, value)` pairs over the defaults; an unknown
    /// field is an error that names it.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Config, MethodError> {
        Config::from_pairs_over(
            Config {
                rows: 4,
                width: 17_500,
                seed: 1,
            },
            pairs,
        )
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

/// One point's pair of Count-Min sketches.
#[derive(Clone, Debug)]
pub struct Synopsis {
    cfg: Config,
    rows: Vec<HashFn>,
    pub sums: Vec<u128>,
    pub counts: Vec<u32>,
}

impl Synopsis {
    pub fn new(cfg: Config) -> Synopsis {
        let fam = HashFamily::new(cfg.seed);
        let n = cfg.rows * cfg.width;
        Synopsis {
            rows: (0..cfg.rows as u64).map(|r| fam.member(ROW + r)).collect(),
            sums: vec![0; n],
            counts: vec![0; n],
            cfg,
        }
    }

    fn cells(&self, f: &FlowKey) -> impl Iterator<Item = usize> + '_ {
        let fh = f.hash(self.cfg.seed);
        let w = self.cfg.width;
        self.rows
            .iter()
            .enumerate()
            .map(move |(r, h)| r * w + h.index(fh, w))
    }

    /// Point query of the timestamp sums.
    pub fn sum_query(&self, f: &FlowKey) -> u128 {
        self.cells(f).map(|i| self.sums[i]).min().unwrap_or(0)
    }

    /// Point query of the counts.
    pub fn count_query(&self, f: &FlowKey) -> u32 {
        self.cells(f).map(|i| self.counts[i]).min().unwrap_or(0)
    }
}

impl TypedSynopsis for Synopsis {
    const METHOD: &'static str = "countmin";
    fn record(&mut self, rec: &PacketRecord) {
        let fh = rec.flow.hash(self.cfg.seed);
        let w = self.cfg.width;
        for (r, h) in self.rows.iter().enumerate() {
            let i = r * w + h.index(fh, w);
            self.sums[i] = self.sums[i].saturating_add(rec.ts_ns as u128);
            self.counts[i] = self.counts[i].saturating_add(1);
        }
    }
    fn encoded_len(&self) -> usize {
        self.sums.len() * CELL_BYTES
    }
    /// Cells added to cells, saturating as recording adds (a saturated sum of non-negative
    /// values is the same in any grouping). Both must have the same rows, width and seed.
    fn merge(&mut self, later: Synopsis) -> Result<(), MethodError> {
        crate::method::check_merge(self.cfg.pairs(), later.cfg.pairs())?;
        for (s, l) in self.sums.iter_mut().zip(&later.sums) {
            *s = s.saturating_add(*l);
        }
        for (n, l) in self.counts.iter_mut().zip(&later.counts) {
            *n = n.saturating_add(*l);
        }
        Ok(())
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let mut w = WireWriter::new(out);
        w.reserve(self.encoded_len());
        for (&s, &n) in self.sums.iter().zip(&self.counts) {
            w.u128(s);
            w.u32(n);
        }
    }
}

/// Count-Min of timestamps as a method.
#[derive(Debug)]
pub struct CountMinMethod {
    cfg: Config,
}

impl CountMinMethod {
    pub fn new(cfg: Config) -> Result<CountMinMethod, MethodError> {
        cfg.validate()?;
        Ok(CountMinMethod { cfg })
    }

    /// The delay of `f`: `(t̃_R − t̃_S) / ñ_S`, each point query on its own.
    pub fn flow(s: &Synopsis, r: &Synopsis, f: &FlowKey) -> FlowEstimate {
        let n = s.count_query(f);
        if n == 0 {
            return FlowEstimate::default();
        }
        let d = r.sum_query(f) as i128 - s.sum_query(f) as i128;
        FlowEstimate {
            mean_ns: Some(d as f64 / n as f64),
            std_ns: None,
            packets: Some(n as f64),
            lost: Some(n.saturating_sub(r.count_query(f)) as f64),
            ..Default::default()
        }
    }

    /// A point's synopsis from its payload.
    pub fn decode(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        let mut sk = Synopsis::new(self.cfg.clone());
        let mut r = WireReader::new(bytes);
        let want = sk.sums.len() * CELL_BYTES;
        if bytes.len() != want {
            return Err(r.invalid(format!(
                "a Count-Min of {} × {} is {want} bytes, got {}",
                self.cfg.rows,
                self.cfg.width,
                bytes.len()
            )));
        }
        for i in 0..sk.sums.len() {
            let lo = r.u64("timestamp sum")? as u128;
            let hi = r.u64("timestamp sum")? as u128;
            sk.sums[i] = lo | (hi << 64);
            sk.counts[i] = r.u32("count")?;
        }
        Ok(sk)
    }
}

impl crate::method::TypedMethod for CountMinMethod {
    type Config = Config;
    type Sender = Synopsis;
    type Receiver = Synopsis;
    fn name(&self) -> &str {
        "countmin"
    }
    fn config(&self) -> &Config {
        &self.cfg
    }
    fn foreign(&self) -> crate::method::Foreign {
        crate::method::Foreign::AssumesNone("per-flow sums of timestamps and counts, no identity")
    }
    fn new_sender(&self) -> Synopsis {
        Synopsis::new(self.cfg.clone())
    }
    fn new_receiver(&self) -> Synopsis {
        Synopsis::new(self.cfg.clone())
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        self.decode(bytes)
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<Synopsis, DecodeError> {
        self.decode(bytes)
    }
    fn estimate(&self, s: Synopsis, r: Synopsis) -> Result<Estimate, MethodError> {
        // one row holds every packet once: its totals give the aggregate, right only when
        // both points saw the same packets
        let w = self.cfg.width;
        // modulo 2¹²⁸: exact for real sums, and hostile decoded sums cannot overflow
        let total = |v: &[u128]| v.iter().fold(0u128, |a, &x| a.wrapping_add(x));
        let (ts, tr) = (total(&s.sums[..w]), total(&r.sums[..w]));
        let ns: u64 = s.counts[..w].iter().map(|&c| c as u64).sum();
        let nr: u64 = r.counts[..w].iter().map(|&c| c as u64).sum();
        let mut notes = vec![
            "count-min of timestamps: each point takes its own minimum, so per-flow delays can mix packet sets (COLATE §6.5)".to_string(),
        ];
        if ns != nr {
            notes.push(format!(
                "{ns} packets at the sender, {nr} at the receiver: the timestamp sums do not match and the mean is meaningless"
            ));
        }
        let reason = match (ns, nr) {
            (0, _) => Some("no estimate: no packet at the sender".to_string()),
            _ if ns != nr => Some(format!(
                "no estimate: {ns} packets at the sender, {nr} at the receiver (Count-Min has no way to leave lost packets out)"
            )),
            _ => None,
        };
        Ok(Estimate {
            reason,
            quantiles: None,
            recovered: None,
            mean_ns: (ns > 0 && ns == nr).then(|| tr.wrapping_sub(ts) as i128 as f64 / ns as f64),
            std_ns: None,
            samples: if ns == nr { ns } else { 0 },
            bytes: (s.sums.len() * CELL_BYTES) as u64,
            lost: Some(ns.saturating_sub(nr)),
            mean_ci98_ns: None,
            std_ci95_ns: None,
            notes,
        })
    }
    fn estimate_flows(
        &self,
        sender: &Synopsis,
        receiver: &Synopsis,
        flows: &[FlowKey],
    ) -> Option<Result<Vec<FlowEstimate>, MethodError>> {
        Some(Ok(flows
            .iter()
            .map(|f| Self::flow(sender, receiver, f))
            .collect()))
    }
}

/// `countmin`: 4 rows of `memory / (4 × 20 B)` counters.
pub const INFO: crate::method::MethodInfo = crate::method::MethodInfo {
    name: "countmin",
    summary: "Count-Min of timestamp sums (COLATE §6.5's strawman), 4 x 17 500 counters, per-flow",
    samples: "packets at both points when their totals agree (0 otherwise)",
    per_flow: true,
    crosses: "each point's two Count-Min sketches (timestamp sums and counts, 20 B a counter), one way; no round trip",
    per_packet: false,
    recovers_delays: false,
    build: |o| {
        let width = crate::method::columns_for_memory(o.memory, 4, CELL_BYTES as u64, 17_500)?;
        Ok(Box::new(CountMinMethod::new(Config {
            rows: 4,
            width,
            seed: o.seed,
        })?))
    },
    from_config: |pairs| Ok(Box::new(CountMinMethod::new(Config::from_pairs(pairs)?)?)),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::{Method, Role};
    use crate::test_traffic::traffic;

    fn run(cfg: Config, loss: f64) -> Vec<f64> {
        let (s, r, flows) = traffic(41, 1_000, 2_000, loss);
        let m = CountMinMethod::new(cfg).unwrap();
        let (mut a, mut b) = (m.new_point(Role::Sender), m.new_point(Role::Receiver));
        a.record_batch(&s);
        b.record_batch(&r);
        let keys: Vec<FlowKey> = flows.iter().map(|f| f.key).collect();
        let e = m.estimate_flows(&*a, &*b, &keys).unwrap().unwrap();
        flows
            .iter()
            .zip(e)
            .map(|(f, e)| (e.mean_ns.unwrap() - f.mean()).abs() / f.mean())
            .collect()
    }

    #[test]
    fn exact_without_collisions_wrecked_by_independent_minima() {
        // wide enough that nearly no flow collides: exact
        let wide = run(
            Config {
                rows: 3,
                width: 1 << 20,
                seed: 1,
            },
            0.0,
        );
        let exact = wide.iter().filter(|&&e| e < 1e-9).count();
        assert!(exact > 990, "{exact}");
        // crowded: the minima of absolute timestamp sums are taken per point; whenever they
        // land on different rows, or on a row that differs from the count's, the error is
        // orders of magnitude beyond a delay
        let mut narrow = run(
            Config {
                rows: 3,
                width: 64,
                seed: 1,
            },
            0.01,
        );
        narrow.sort_by(f64::total_cmp);
        assert!(narrow[narrow.len() * 9 / 10] > 1.0, "{:?}", &narrow[900..]);
    }

    #[test]
    fn config_and_bytes() {
        assert!(
            CountMinMethod::new(Config {
                rows: 0,
                width: 3,
                seed: 1
            })
            .is_err()
        );
        let c = Config {
            rows: 2,
            width: 8,
            seed: 1,
        };
        let p: Vec<(String, String)> = c
            .pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(Config::from_pairs(&p).unwrap(), c);
        let m = CountMinMethod::new(c).unwrap();
        let (s, _, _) = traffic(1, 50, 100, 0.0);
        let mut a = m.new_point(Role::Sender);
        a.record_batch(&s);
        let mut b = Vec::new();
        a.encode(&mut b);
        let d = m.decode_point(Role::Sender, &b).unwrap();
        let (x, y) = (
            crate::method::sender_ref::<CountMinMethod>(&*d).unwrap(),
            crate::method::sender_ref::<CountMinMethod>(&*a).unwrap(),
        );
        assert_eq!((&x.sums, &x.counts), (&y.sums, &y.counts));
        assert!(m.decode_point(Role::Sender, &b[1..]).is_err());
    }

    /// Found by fuzzing: decoded sums near 2¹²⁸ overflowed the aggregate's total.
    #[test]
    fn hostile_sums_do_not_overflow() {
        let c = Config {
            rows: 2,
            width: 8,
            seed: 1,
        };
        let m = CountMinMethod::new(c.clone()).unwrap();
        let mut sk = Synopsis::new(c);
        sk.sums.iter_mut().for_each(|x| *x = u128::MAX);
        sk.counts.iter_mut().for_each(|x| *x = u32::MAX);
        let e = m.estimate(Box::new(sk), m.new_point(Role::Receiver));
        assert!(e.is_ok());
    }
}
