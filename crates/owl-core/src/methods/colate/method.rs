//! COLATE as an [`owl_core::method::Method`](crate::method::Method): the per-interval
//! synopsis of a point is its [`Recorder`] over the interval — the epochs dumped during it and,
//! at its end, the open vectors dumped as one more epoch each (module doc of [`super`]).
//!
//! # Payload (`COL1`)
//!
//! `"COL1" | u32 k | k × (u32 len, len bytes of one epoch, see [`super::epoch`])`.

use std::sync::Arc;

use crate::method::{Estimate, FlowEstimate, MethodConfig, MethodError, MethodInfo, TypedSynopsis};
use crate::record::{FlowKey, PacketRecord};
use crate::wire::{DecodeError, WireReader, WireWriter};

use super::config::Config;
use super::epoch::{Epoch, EpochReader, Sealed};
use super::estimate::{Query, aggregate_heads, query_flow, shared_mapping};
use super::vector::{Layout, Recorder};

pub const PAYLOAD_TAG: &[u8; 4] = b"COL1";
/// A point's own file: the payload and its open vectors' early packets
/// ([`TypedSynopsis::encode_local`]).
pub const LOCAL_TAG: &[u8; 4] = b"COLL";
/// Most early packets a local form may list.
pub const MAX_EARLY: u32 = 1 << 24;
/// Most epochs one payload may list.
pub const MAX_EPOCHS: u32 = 1 << 20;

impl TypedSynopsis for Recorder {
    const METHOD: &'static str = "colate";
    fn record(&mut self, rec: &PacketRecord) {
        Recorder::record(self, rec);
    }
    fn record_batch(&mut self, recs: &[PacketRecord]) {
        Recorder::record_batch(self, recs);
    }
    fn encoded_len(&self) -> usize {
        let sealed: usize = self.sealed().iter().map(|e| 4 + e.bytes.len()).sum();
        let open = self.open_encoded_len();
        let open_count = self.open_vectors();
        8 + sealed + open + 4 * open_count
    }
    /// The counter epochs themselves (what a point dumps to its epoch store and a query
    /// reads), without this file's framing.
    fn shipped_len(&self) -> Option<u64> {
        let sealed: usize = self.sealed().iter().map(|e| e.bytes.len()).sum();
        Some((sealed + self.open_encoded_len()) as u64)
    }
    /// Vector by vector, what recording both streams gives ([`Recorder::append`]: an empty
    /// vector takes `later`'s as it is; an open one adds `later`'s counters moved to its
    /// base), or an error where that cannot be had from what `later` kept (a dump that would
    /// fall within its packets, bases not a whole number of units apart, early packets a
    /// decoded `later` no longer has). Both points must have the same configuration, `n`, `b`,
    /// `T` and unit included.
    fn merge(&mut self, later: Recorder) -> Result<(), MethodError> {
        crate::method::check_merge(self.layout().cfg.pairs(), later.layout().cfg.pairs())?;
        self.append(later).map_err(MethodError::Invalid)
    }
    /// `"COLL" | u32 len, len bytes of the COL1 payload | u32 m, m × (u32 vector, u32 counter,
    /// u64 timestamp)`: the payload and the early packets of the vectors it dumped open, which
    /// an epoch counts but does not keep, so that `owl estimate` merges the decoded recorder
    /// exactly (local state: the epochs are what a point stores).
    fn encode_local(&self, out: &mut Vec<u8>) {
        let mut payload = Vec::new();
        self.encode(&mut payload);
        let early = self.early_packets();
        let mut w = WireWriter::new(out);
        w.bytes(LOCAL_TAG);
        w.u32(payload.len() as u32);
        w.bytes(&payload);
        w.u32(early.len() as u32);
        for (v, i, ts) in early {
            w.u32(v);
            w.u32(i);
            w.u64(ts);
        }
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let open = self.seal_open();
        let mut w = WireWriter::new(out);
        w.bytes(PAYLOAD_TAG);
        w.u32((self.sealed().len() + open.len()) as u32);
        for e in self.sealed().iter().chain(&open) {
            w.u32(e.bytes.len() as u32);
            w.bytes(&e.bytes);
        }
    }
}

/// Decode a `COL1` payload into its epochs.
pub fn decode_epochs(bytes: &[u8]) -> Result<Vec<Epoch>, DecodeError> {
    Ok(decode_sealed(bytes)?.iter().map(Sealed::decode).collect())
}

/// Decode a `COL1` payload into its epochs as stored, each checked whole.
pub fn decode_sealed(bytes: &[u8]) -> Result<Vec<Sealed>, DecodeError> {
    let mut r = WireReader::new(bytes);
    if r.take(4, "COLATE payload tag")? != PAYLOAD_TAG {
        return Err(DecodeError::Invalid {
            offset: 0,
            what: "not a COLATE payload (tag is not COL1)".into(),
        });
    }
    let k = r.u32("epoch count")?;
    if k > MAX_EPOCHS {
        return Err(r.invalid(format!("{k} epochs is more than {MAX_EPOCHS}")));
    }
    let mut out = Vec::new();
    for _ in 0..k {
        let len = r.u32("epoch length")? as usize;
        let off = r.offset();
        let b = r.take(len, "epoch")?;
        out.push(Sealed::from_bytes(b.to_vec()).map_err(|e| match e {
            DecodeError::Truncated {
                offset,
                what,
                needed,
                available,
            } => DecodeError::Truncated {
                offset: off + offset,
                what,
                needed,
                available,
            },
            DecodeError::Invalid { offset, what } => DecodeError::Invalid {
                offset: off + offset,
                what,
            },
        })?);
    }
    r.finish("COLATE payload")?;
    if let Some(e) = out
        .iter()
        .find(|e| e.head.placement != out[0].head.placement)
    {
        return Err(DecodeError::Invalid {
            offset: 0,
            what: format!(
                "epochs placed by two flow hashes in one payload: {} and {}",
                out[0].head.placement.name(),
                e.head.placement.name()
            ),
        });
    }
    Ok(out)
}

/// COLATE as a method.
#[derive(Debug)]
pub struct ColateMethod {
    layout: Arc<Layout>,
}

impl ColateMethod {
    pub fn new(cfg: Config) -> Result<ColateMethod, MethodError> {
        cfg.validate()?;
        Ok(ColateMethod {
            layout: Layout::new(cfg),
        })
    }

    pub fn config(&self) -> &Config {
        &self.layout.cfg
    }

    /// A fresh recorder of this configuration.
    pub fn recorder(&self) -> Recorder {
        Recorder::new(self.layout.clone())
    }

    /// A point's recorder from its payload (`COL1`) or its own file's form (`COLL`).
    pub fn decode(&self, bytes: &[u8]) -> Result<Recorder, DecodeError> {
        if !bytes.starts_with(LOCAL_TAG) {
            let epochs = decode_sealed(bytes)?;
            return Ok(Recorder::with_epochs(self.layout.clone(), epochs));
        }
        let mut r = WireReader::new(bytes);
        r.take(4, "tag")?;
        let len = r.u32("payload length")? as usize;
        let epochs = decode_sealed(r.take(len, "payload")?)?;
        let m = r.u32("early packets")?;
        if m > MAX_EARLY || m as usize * 16 != r.remaining() {
            return Err(r.invalid(format!("{m} early packets do not fit the bytes left")));
        }
        let mut rec = Recorder::with_epochs(self.layout.clone(), epochs);
        for _ in 0..m {
            let (v, i, ts) = (r.u32("vector")?, r.u32("counter")?, r.u64("timestamp")?);
            if v as usize >= self.layout.cfg.vectors().len() || i >= self.layout.cfg.n() {
                return Err(r.invalid(format!("early packet at vector {v}, counter {i}")));
            }
            rec.carried_early.push((v, i, ts));
        }
        Ok(rec)
    }
}

impl MethodConfig for Config {
    fn pairs(&self) -> Vec<(&'static str, String)> {
        Config::pairs(self)
    }
}

impl crate::method::TypedMethod for ColateMethod {
    type Config = Config;
    type Sender = Recorder;
    type Receiver = Recorder;
    fn name(&self) -> &str {
        "colate"
    }
    fn config(&self) -> &Config {
        &self.layout.cfg
    }
    fn foreign(&self) -> crate::method::Foreign {
        crate::method::Foreign::AssumesNone(
            "shared counters of timestamp sums; a flow's counters are matched by count, not identity, and its epochs by time, not by interval",
        )
    }
    fn new_sender(&self) -> Recorder {
        self.recorder()
    }
    fn new_receiver(&self) -> Recorder {
        self.recorder()
    }
    fn decode_sender(&self, bytes: &[u8]) -> Result<Recorder, DecodeError> {
        self.decode(bytes)
    }
    fn decode_receiver(&self, bytes: &[u8]) -> Result<Recorder, DecodeError> {
        self.decode(bytes)
    }
    fn estimate(&self, s: Recorder, r: Recorder) -> Result<Estimate, MethodError> {
        // the RAM a point needs as configured (cells and spill at its bound), the same whether
        // the synopses were recorded here or decoded from files
        let ram = self.layout.cfg.memory();
        let ram_line = ram.describe();
        let forced = s.overflow_dumps + r.overflow_dumps;
        let (s, r) = (s.into_sealed(), r.into_sealed());
        let heads = |v: &[Sealed]| v.iter().map(|e| e.head.clone()).collect::<Vec<_>>();
        let mut e = aggregate_heads(&heads(&s), &heads(&r))?;
        let stored = |v: &[Sealed]| v.iter().map(|e| e.bytes.len() as u64).sum::<u64>();
        e.bytes = stored(&s).max(stored(&r));
        let epochs = |n: usize| format!("{n} epoch{}", if n == 1 { "" } else { "s" });
        e.notes.push(format!(
            "{} at the sender, {} at the receiver; per-flow estimates with --per-flow",
            epochs(s.len()),
            epochs(r.len())
        ));
        // the configured vectors (not a measurement), for decoded synopses too; the epochs
        // held until the estimate come on top (n cells each, whatever their packets)
        if ram.total_bytes() > 0 {
            e.notes.push(format!("per point: {ram_line}"));
        }
        if forced > 0 {
            e.notes.push(format!(
                "{forced} dump(s) before T: a counter would overflow with the spill full (§3.1)"
            ));
        }
        Ok(e)
    }
    fn estimate_flows(
        &self,
        sender: &Recorder,
        receiver: &Recorder,
        flows: &[FlowKey],
    ) -> Option<Result<Vec<FlowEstimate>, MethodError>> {
        let go = || -> Result<Vec<FlowEstimate>, MethodError> {
            let (s, r) = (sender, receiver);
            // the dumped epochs in place, the open vectors sealed beside them
            let (so, ro) = (s.seal_open(), r.seal_open());
            let s: Vec<&Sealed> = s.sealed().iter().chain(&so).collect();
            let r: Vec<&Sealed> = r.sealed().iter().chain(&ro).collect();
            let (hs, hr): (Vec<_>, Vec<_>) = (
                s.iter().map(|e| &e.head).collect(),
                r.iter().map(|e| &e.head).collect(),
            );
            let Some((map, _)) = shared_mapping(&hs, &hr)? else {
                return Ok(vec![FlowEstimate::default(); flows.len()]);
            };
            // each flow's m cells of each epoch, read in place
            let (mut rs, mut rr): (Vec<_>, Vec<_>) = (
                s.iter().map(|e| e.reader()).collect(),
                r.iter().map(|e| e.reader()).collect(),
            );
            flows
                .iter()
                .map(|f| {
                    let q = Query {
                        flow: *f,
                        from_ns: 0,
                        to_ns: u64::MAX,
                        horizon_ns: 0,
                        gamma: self.layout.cfg.gamma(),
                        estimator: self.layout.cfg.mean(),
                        std: self.layout.cfg.std(),
                        confidence: 0.0,
                    };
                    let fh = map.flow_hash(f);
                    let cells = |v: &mut [EpochReader<&[u8]>]| {
                        v.iter_mut()
                            .map(|rd| rd.flow(&map, fh))
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(|e| MethodError::Invalid(format!("colate: {e}")))
                    };
                    let l = query_flow(&cells(&mut rs)?, &cells(&mut rr)?, &q)?;
                    let reason = match (&l.reason, &l.std_reason) {
                        (Some(why), _) => Some(why.clone()),
                        (None, Some(why)) => Some(format!("no std: {why}")),
                        (None, None) => None,
                    };
                    Ok(FlowEstimate {
                        mean_ns: l.mean_ns,
                        std_ns: l.std_ns,
                        std_ci95_ns: l.std_interval_ns.map(|(lo, hi)| [lo, hi]),
                        packets: l.packets,
                        lost: l.lost,
                        reason,
                    })
                })
                .collect()
        };
        Some(go())
    }
}

/// `colate`: the plan of the medium requirement at 10 MiB, or at `--memory`.
pub const INFO: MethodInfo = MethodInfo {
    name: "colate",
    summary: "COLATE: one shared counter vector per point, epochs, per-flow mean and std with its interval from the flow's counters (plan: alpha 0.95, beta 0.05, 10 MiB), per-flow",
    samples: "packets the mean rests on",
    per_flow: true,
    crosses: "nothing per interval: each point appends its counter epochs to its own epoch store; a query later reads the epochs of both points that overlap the flow's time range (counted here as the interval's epochs at S)",
    per_packet: false,
    recovers_delays: false,
    build: |o| {
        let cfg = match o.memory {
            None => Config::paper_default(o.seed),
            Some(bytes) => Config::for_level(super::plan::Level::Medium, bytes, o.seed)?,
        };
        Ok(Box::new(ColateMethod::new(cfg)?))
    },
    from_config: |pairs| Ok(Box::new(ColateMethod::new(Config::from_pairs(pairs, 1)?)?)),
};
