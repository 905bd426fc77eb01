//! SDS — the Simple Delay Sketch of LDS §2.2, the *timestamp-assumption* reference.
//!
//! **SDS needs timestamps in packets**: the sender stamps every packet, the receiver computes
//! each packet's delay and keeps per-flow state in a multi-stage filter of `R` rows × `C`
//! cells `⟨s, n⟩` (delay sum, count; Fig. 1). A packet of flow `f` adds its delay to cell
//! `(r, h_r(f))` of every row (Fig. 2); a flow's delay is `s / n` of its cell with the
//! smallest `n` — the cell where it carries the most weight, exact if any of its cells is
//! collision-free (Fig. 3).
//!
//! IP packets carry no such timestamp (§2.1), which is why LDS exists. On a capture pair owl
//! *emulates* the stamps: the sender point keeps each packet's `(identity, timestamp)` — what
//! the stamp would carry — and the receiver point logs `(identity, arrival time, flow hash)`;
//! at estimate time every arrival whose identity was stamped updates the sketch with its true
//! delay, exactly what the receiver would have done online. `Estimate.bytes` counts the
//! in-band stamps (8 bytes a packet), and every estimate carries a note saying so.

use hashbrown::HashMap;

use crate::hash::{HashFamily, HashFn};
use crate::method::{DeclaredConfig, Estimate, FlowEstimate, MethodError, TypedSynopsis};
use crate::record::{FlowKey, PacketRecord};
use crate::wire::{DecodeError, WireReader, WireWriter};

/// Bytes a cell takes at the receiver: delay sum (i64) and count (u32).
pub const CELL_BYTES: usize = 12;
/// Bytes of an in-band timestamp (what SDS adds to every packet).
pub const STAMP_BYTES: u64 = 8;
/// The note every SDS estimate carries.
pub const NOTE: &str = "sds needs a sender timestamp in every packet (LDS §2.2); owl emulates it by matching packet identities, 8 B per packet";

const ROW: u64 = 0x5d5_0100;

crate::method_config! {
    /// What both points agree on.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Config for "sds" {
        rows: usize,
        columns: usize,
        seed: u64,
    }
}

impl Config {
    /// A configuration from its fields, refused unless [`validate`](Self::validate) accepts
    /// it: the only way to build one outside this module, so every `Config` is sound.
    pub fn new(rows: usize, columns: usize, seed: u64) -> Result<Config, MethodError> {
        let c = Config {
            rows,
            columns,
            seed,
        };
        c.validate()?;
        Ok(c)
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn columns(&self) -> usize {
        self.columns
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The paper's reference size, 4 × 17 500 (§5.1).
    pub fn reference(seed: u64) -> Config {
        Config {
            rows: 4,
            columns: 17_500,
            seed,
        }
    }

    pub fn validate(&self) -> Result<(), MethodError> {
        if self.rows == 0 || self.columns == 0 {
            return Err(MethodError::Invalid(format!(
                "sds: {} rows × {} columns: both must be at least 1",
                self.rows, self.columns
            )));
        }
        if self.rows > 64 || self.rows.saturating_mul(self.columns) > 1 << 28 {
            return Err(MethodError::Invalid(format!(
                "sds: {} × {} cells is absurd (at most 64 rows and 2^28 cells)",
                self.rows, self.columns
            )));
        }
        Ok(())
    }

    /// Rebuild a configuration from `(field, value)` pairs over the defaults; an unknown
    /// field is an error that names it.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Config, MethodError> {
        Config::from_pairs_over(Config::reference(1), pairs)
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

/// The receiver's sketch of per-packet delays (Fig. 1).
#[derive(Clone, Debug)]
pub struct Sketch {
    cfg: Config,
    rows: Vec<HashFn>,
    sum: Vec<i64>,
    n: Vec<u32>,
}

impl Sketch {
    pub fn new(cfg: Config) -> Sketch {
        let fam = HashFamily::new(cfg.seed);
        let cells = cfg.rows * cfg.columns;
        Sketch {
            rows: (0..cfg.rows as u64).map(|r| fam.member(ROW + r)).collect(),
            sum: vec![0; cells],
            n: vec![0; cells],
            cfg,
        }
    }

    /// The flow hash the rows derive from.
    pub fn flow_hash(&self, f: &FlowKey) -> u64 {
        f.hash(self.cfg.seed)
    }

    /// UPDATE STATE (Fig. 2): cell `(r, h_r(f))` of every row gets `s += τ`, `n += 1`.
    pub fn record_delay(&mut self, flow_hash: u64, delay_ns: i64) {
        let c = self.cfg.columns;
        for (r, h) in self.rows.iter().enumerate() {
            let i = r * c + h.index(flow_hash, c);
            self.sum[i] = self.sum[i].wrapping_add(delay_ns);
            self.n[i] = self.n[i].saturating_add(1);
        }
    }

    /// ESTIMATE DELAY (Fig. 3): `s / n` of the flow's cell with the smallest `n`, and that
    /// `n` (an upper bound of the flow's packets). `None` if the flow left no packet.
    pub fn estimate(&self, flow_hash: u64) -> Option<(f64, u32)> {
        let c = self.cfg.columns;
        let mut best: Option<(i64, u32)> = None;
        for (r, h) in self.rows.iter().enumerate() {
            let i = r * c + h.index(flow_hash, c);
            if self.n[i] > 0 && best.is_none_or(|b| self.n[i] < b.1) {
                best = Some((self.sum[i], self.n[i]));
            }
        }
        best.map(|(s, n)| (s as f64 / n as f64, n))
    }

    /// Bytes of the sketch at the receiver.
    pub fn bytes(&self) -> usize {
        self.sum.len() * CELL_BYTES
    }
}

/// The sender point: the timestamps it would write into the packets.
#[derive(Clone, Debug, Default)]
pub struct SenderSynopsis {
    pub stamps: Vec<(u64, u64)>,
}

/// The receiver point: `(identity, arrival time, flow hash)` of every arrival, for the
/// sketch update that needs the stamp.
#[derive(Clone, Debug, Default)]
pub struct ReceiverSynopsis {
    seed: u64,
    pub arrivals: Vec<(u64, u64, u64)>,
}

fn encode_u64s<const N: usize>(items: &[[u64; N]], out: &mut Vec<u8>) {
    let mut w = WireWriter::new(out);
    w.reserve(8 + 8 * N * items.len());
    w.u64(items.len() as u64);
    for it in items {
        for &v in it {
            w.u64(v);
        }
    }
}

fn decode_u64s<const N: usize>(
    bytes: &[u8],
    what: &'static str,
) -> Result<Vec<[u64; N]>, DecodeError> {
    let mut r = WireReader::new(bytes);
    let n = r.u64("entry count")?;
    let need = (n as u128) * (N as u128) * 8;
    if need != r.remaining() as u128 {
        return Err(r.invalid(format!(
            "{n} {what} need {need} bytes, {} follow",
            r.remaining()
        )));
    }
    let mut v = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let mut it = [0u64; N];
        for x in it.iter_mut() {
            *x = r.u64(what)?;
        }
        v.push(it);
    }
    r.finish(what)?;
    Ok(v)
}

impl TypedSynopsis for SenderSynopsis {
    const METHOD: &'static str = "sds";
    fn record(&mut self, rec: &PacketRecord) {
        self.stamps.push((rec.id, rec.ts_ns));
    }
    fn encoded_len(&self) -> usize {
        8 + 16 * self.stamps.len()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let v: Vec<[u64; 2]> = self.stamps.iter().map(|&(a, b)| [a, b]).collect();
        encode_u64s(&v, out);
    }
    /// The timestamp written into every packet.
    fn shipped_len(&self) -> Option<u64> {
        Some(self.stamps.len() as u64 * STAMP_BYTES)
    }
    /// Both logs of stamps one after the other.
    fn merge(&mut self, later: SenderSynopsis) -> Result<(), MethodError> {
        self.stamps.extend_from_slice(&later.stamps);
        Ok(())
    }
}

impl TypedSynopsis for ReceiverSynopsis {
    const METHOD: &'static str = "sds";
    fn record(&mut self, rec: &PacketRecord) {
        self.arrivals
            .push((rec.id, rec.ts_ns, rec.flow.hash(self.seed)));
    }
    fn encoded_len(&self) -> usize {
        8 + 24 * self.arrivals.len()
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let v: Vec<[u64; 3]> = self.arrivals.iter().map(|&(a, b, c)| [a, b, c]).collect();
        encode_u64s(&v, out);
    }
    /// Nothing: the arrival log is emulation data (a deployed receiver updates its sketch).
    fn shipped_len(&self) -> Option<u64> {
        Some(0)
    }
    /// Both logs of arrivals one after the other (their flow hashes of the same seed).
    fn merge(&mut self, later: ReceiverSynopsis) -> Result<(), MethodError> {
        crate::method::check_merge(
            vec![("seed", self.seed.to_string())],
            vec![("seed", later.seed.to_string())],
        )?;
        self.arrivals.extend_from_slice(&later.arrivals);
        Ok(())
    }
}

/// SDS as a method on capture pairs (with emulated timestamps).
#[derive(Debug)]
pub struct SdsMethod {
    cfg: Config,
}

impl SdsMethod {
    pub fn new(cfg: Config) -> Result<SdsMethod, MethodError> {
        cfg.validate()?;
        Ok(SdsMethod { cfg })
    }

    /// Replay the receiver's arrivals with the stamps: the receiver's sketch, and how many
    /// arrivals carried a stamp of this interval.
    pub fn build(&self, s: &SenderSynopsis, r: &ReceiverSynopsis) -> (Sketch, u64) {
        let stamp: HashMap<u64, u64> = s.stamps.iter().copied().collect();
        let mut sk = Sketch::new(self.cfg.clone());
        let mut used = 0u64;
        for &(id, ts, fh) in &r.arrivals {
            if let Some(&t0) = stamp.get(&id) {
                sk.record_delay(fh, ts.wrapping_sub(t0) as i64);
                used += 1;
            }
        }
        (sk, used)
    }
}

impl crate::method::TypedMethod for SdsMethod {
    type Config = Config;
    type Sender = SenderSynopsis;
    type Receiver = ReceiverSynopsis;
    fn name(&self) -> &str {
        "sds"
    }
    fn config(&self) -> &Config {
        &self.cfg
    }
    fn foreign(&self) -> crate::method::Foreign {
        crate::method::Foreign::Matches("every stamped packet R receives carries its own send time")
    }
    fn new_sender(&self) -> SenderSynopsis {
        SenderSynopsis::default()
    }
    fn new_receiver(&self) -> ReceiverSynopsis {
        ReceiverSynopsis {
            seed: self.cfg.seed,
            arrivals: Vec::new(),
        }
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<SenderSynopsis, DecodeError> {
        Ok(SenderSynopsis {
            stamps: decode_u64s::<2>(bytes, "stamps")?
                .into_iter()
                .map(|[a, b]| (a, b))
                .collect(),
        })
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<ReceiverSynopsis, DecodeError> {
        Ok(ReceiverSynopsis {
            seed: self.cfg.seed,
            arrivals: decode_u64s::<3>(bytes, "arrivals")?
                .into_iter()
                .map(|[a, b, c]| (a, b, c))
                .collect(),
        })
    }
    fn estimate(&self, s: SenderSynopsis, r: ReceiverSynopsis) -> Result<Estimate, MethodError> {
        let (sk, used) = self.build(&s, &r);
        // every packet is in one cell of row 0: the aggregate is exact
        let c = self.cfg.columns;
        let (sum, n): (i128, u64) = (0..c).fold((0, 0), |(a, b), j| {
            (a + sk.sum[j] as i128, b + sk.n[j] as u64)
        });
        Ok(Estimate {
            reason: None,
            quantiles: None,
            recovered: None,
            mean_ns: (n > 0).then(|| sum as f64 / n as f64),
            std_ns: None,
            samples: used,
            bytes: STAMP_BYTES * s.stamps.len() as u64,
            lost: None,
            mean_ci98_ns: None,
            std_ci95_ns: None,
            notes: vec![NOTE.into()],
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
            let (sk, _) = self.build(s, r);
            flows
                .iter()
                .map(|f| match sk.estimate(sk.flow_hash(f)) {
                    Some((m, n)) => FlowEstimate {
                        mean_ns: Some(m),
                        packets: Some(n as f64),
                        ..Default::default()
                    },
                    None => FlowEstimate::default(),
                })
                .collect()
        }))
    }
}

/// `sds`: the receiver's sketch, 4 rows of `memory / (4 × 12 B)` cells (what crosses the
/// network is the in-band timestamp of every packet, whatever the budget).
pub const INFO: crate::method::MethodInfo = crate::method::MethodInfo {
    name: "sds",
    summary: "Simple Delay Sketch (LDS §2.2): NEEDS sender timestamps in packets (emulated), per-flow",
    samples: "packets in the cells usable at both points",
    per_flow: true,
    crosses: "an 8 B sender timestamp inside every packet (the timestamp assumption); the files hold the sender's stamps and the receiver's arrival log (24 B a packet), emulation data a deployment would not keep",
    per_packet: false,
    recovers_delays: false,
    build: |o| {
        let columns = crate::method::columns_for_memory(o.memory, 4, CELL_BYTES as u64, 17_500)?;
        Ok(Box::new(SdsMethod::new(Config {
            rows: 4,
            columns,
            seed: o.seed,
        })?))
    },
    from_config: |pairs| Ok(Box::new(SdsMethod::new(Config::from_pairs(pairs)?)?)),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::{Method, MethodConfig, Role};
    use crate::test_traffic::{key, traffic};

    #[test]
    fn collision_free_flows_get_their_exact_mean_and_cells_pick_the_least_loaded() {
        let (s, r, flows) = traffic(21, 3_000, 5_000, 0.0);
        let m = SdsMethod::new(Config {
            rows: 4,
            columns: 5_000,
            seed: 3,
        })
        .unwrap();
        let mut a = m.new_point(Role::Sender);
        let mut b = m.new_point(Role::Receiver);
        a.record_batch(&s);
        b.record_batch(&r);
        let (sa, sb) = (
            crate::method::sender_ref::<SdsMethod>(&*a).unwrap(),
            crate::method::receiver_ref::<SdsMethod>(&*b).unwrap(),
        );
        let (sk, used) = m.build(sa, sb);
        assert_eq!(used, r.len() as u64);
        // which rows give a flow a cell of its own, from the truth
        let c = m.cfg.columns;
        let mut occupants = vec![0u32; 4 * c];
        let cells: Vec<Vec<usize>> = flows
            .iter()
            .map(|f| {
                let fh = sk.flow_hash(&f.key);
                (0..4)
                    .map(|row| row * c + sk.rows[row].index(fh, c))
                    .collect()
            })
            .collect();
        for cs in &cells {
            for &i in cs {
                occupants[i] += 1;
            }
        }
        let keys: Vec<FlowKey> = flows.iter().map(|f| f.key).collect();
        let est = m.estimate_flows(&*a, &*b, &keys).unwrap().unwrap();
        let mut exact = 0;
        for ((f, cs), e) in flows.iter().zip(&cells).zip(&est) {
            let got = e.mean_ns.unwrap();
            assert!(e.packets.unwrap() >= f.sent as f64);
            if cs.iter().any(|&i| occupants[i] == 1) {
                assert!(
                    (got - f.mean()).abs() <= 1e-9 * f.mean(),
                    "{got} vs {}",
                    f.mean()
                );
                exact += 1;
            }
        }
        assert!(exact > 2_500, "{exact}");
        // the aggregate is exact and says it needs stamps
        let e = m.estimate(a, b).unwrap();
        let all: i128 = flows.iter().map(|f| f.delay_sum).sum();
        assert!((e.mean_ns.unwrap() - all as f64 / r.len() as f64).abs() < 1e-6);
        assert!(e.notes[0].contains("timestamp"));
        assert_eq!(e.bytes, 8 * s.len() as u64);
    }

    #[test]
    fn fig3_picks_the_smallest_count_cell() {
        // two rows of two cells; flow A shares row 0 with a big slow flow, row 1 with a small
        // one: the estimate comes from row 1
        let cfg = Config {
            rows: 2,
            columns: 2,
            seed: 0,
        };
        let mut sk = Sketch::new(cfg);
        let keys: Vec<u64> = (0..10_000u64).map(|i| key(i as u32).hash(0)).collect();
        let cell = |sk: &Sketch, fh: u64, r: usize| sk.rows[r].index(fh, 2);
        let a = keys[0];
        let big = *keys
            .iter()
            .find(|&&h| cell(&sk, h, 0) == cell(&sk, a, 0) && cell(&sk, h, 1) != cell(&sk, a, 1))
            .unwrap();
        let small = *keys
            .iter()
            .find(|&&h| cell(&sk, h, 1) == cell(&sk, a, 1) && cell(&sk, h, 0) != cell(&sk, a, 0))
            .unwrap();
        for _ in 0..10 {
            sk.record_delay(a, 100);
        }
        for _ in 0..50 {
            sk.record_delay(big, 10_000);
        }
        sk.record_delay(small, 1_100);
        let (m, n) = sk.estimate(a).unwrap();
        assert_eq!(n, 11);
        assert!((m - (1000.0 + 1100.0) / 11.0).abs() < 1e-9);
    }

    #[test]
    fn config_and_hostile_bytes() {
        let bad = Config {
            rows: 0,
            columns: 10,
            seed: 1,
        };
        assert!(
            SdsMethod::new(bad)
                .unwrap_err()
                .to_string()
                .contains("at least 1")
        );
        let c = Config::reference(4);
        let p: Vec<(String, String)> = c
            .pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        assert_eq!(Config::from_pairs(&p).unwrap(), c);
        let m = SdsMethod::new(c).unwrap();
        let mut a = m.new_point(Role::Sender);
        a.record(&PacketRecord {
            ts_ns: 5,
            id: 6,
            flow: key(1),
            len: 1,
        });
        let mut b = Vec::new();
        a.encode(&mut b);
        assert!(m.decode_point(Role::Sender, &b).is_ok());
        assert!(m.decode_point(Role::Sender, &b[..b.len() - 1]).is_err());
        // a count that promises 2^60 entries is refused before allocating
        let mut lie = b.clone();
        lie[..8].copy_from_slice(&(1u64 << 60).to_le_bytes());
        assert!(m.decode_point(Role::Sender, &lie).is_err());
        assert!(m.decode_point(Role::Receiver, &b).is_err());
    }
}
