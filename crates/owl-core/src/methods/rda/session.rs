//! The exchange of [`super::exchange`] as two message-driven halves, so that it can run between
//! two processes (`owl agent`) as well as in one ([`super::reconcile`] pumps the messages of
//! the same two halves in memory, so both give the same [`Reconciled`] by construction).
//!
//! - [`Decoder`] is the sender point S (only S decodes, §VIII-A): it holds S's synopsis, sizes
//!   the RDAs, decodes, asks for timestamps and repairs.
//! - [`Responder`] is the receiver point R: it holds R's synopsis and answers.
//!
//! ```text
//!  R                                   S
//!  Level(R's sampling level)      ──►  common level = max
//!                                 ◄──  Begin(common level)
//!  seal; late: Sketch(strata/MinHash) ──►  d̂, m                (late binding)
//!                                 ◄──  Size(m)
//!  Rda(R's RDA of m buckets)      ──►  decode (Algorithm 1)
//!                                 ◄──  Request(identities)     (zero or more rounds)
//!  Response(timestamps)           ──►  … decode again, or retry: Size(2m), or done
//! ```
//!
//! Every message is encoded with [`crate::wire::WireWriter`]; decoding checks each length
//! against what is left before allocating, so a hostile message is an error, never a large
//! allocation. The byte counts in [`Bytes`] are the paper's messages as
//! [`super::exchange`] counts them (a message's own framing is the transport's business).

use std::borrow::BorrowMut;

use hashbrown::HashMap;

use super::bank::{Rda, Subtraction};
use super::decode::{Class, Decoded, decode};
use super::exchange::{Bytes, MAX_ROUNDS, Reconciled};
use super::point::Synopsis;
use super::repair::{self, TimestampRequest, TimestampResponse};
use super::setdiff::{MinHash, SetDiffEstimator, SetDiffSketch, Strata};
use super::{Config, Sizing, estimate};
use crate::method::{MethodError, Role};
use crate::wire::{DecodeError, WireReader, WireWriter};

/// One message of the exchange (see the module documentation for who sends which).
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// R → S: R's sampling level.
    Level(u8),
    /// S → R: the common sampling level; R brings its cache to it and seals it.
    Begin(u8),
    /// R → S: the set-difference sketch of R's cache (late binding).
    Sketch(SetDiffSketch),
    /// S → R: build an RDA of this many buckets per bank from the cache (late binding).
    Size(u64),
    /// R → S: R's RDA, with R's cache size and duplicate count (for the report).
    Rda {
        cached: u64,
        duplicates: u64,
        rda: Rda,
    },
    /// S → R: the timestamps of these identities, please.
    Request(TimestampRequest),
    /// R → S: the answer.
    Response(TimestampResponse),
}

const TAG_LEVEL: u8 = 1;
const TAG_BEGIN: u8 = 2;
const TAG_SKETCH: u8 = 3;
const TAG_SIZE: u8 = 4;
const TAG_RDA: u8 = 5;
const TAG_REQUEST: u8 = 6;
const TAG_RESPONSE: u8 = 7;

impl Message {
    /// A short name for errors and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Level(_) => "level",
            Message::Begin(_) => "begin",
            Message::Sketch(_) => "sketch",
            Message::Size(_) => "size",
            Message::Rda { .. } => "rda",
            Message::Request(_) => "request",
            Message::Response(_) => "response",
        }
    }

    /// Append the message: a tag byte, then its fields.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut w = WireWriter::new(out);
        match self {
            Message::Level(l) => {
                w.u8(TAG_LEVEL);
                w.u8(*l);
            }
            Message::Begin(l) => {
                w.u8(TAG_BEGIN);
                w.u8(*l);
            }
            Message::Sketch(s) => {
                w.u8(TAG_SKETCH);
                match s {
                    SetDiffSketch::MinHash(m) => {
                        w.u8(0);
                        m.encode(&mut w);
                    }
                    SetDiffSketch::Strata(s) => {
                        w.u8(1);
                        s.encode(&mut w);
                    }
                }
            }
            Message::Size(m) => {
                w.u8(TAG_SIZE);
                w.u64(*m);
            }
            Message::Rda {
                cached,
                duplicates,
                rda,
            } => {
                w.u8(TAG_RDA);
                w.u64(*cached);
                w.u64(*duplicates);
                w.u64(rda.per_bank() as u64);
                rda.encode(&mut w);
            }
            Message::Request(q) => {
                w.u8(TAG_REQUEST);
                q.encode(&mut w);
            }
            Message::Response(a) => {
                w.u8(TAG_RESPONSE);
                a.encode(&mut w);
            }
        }
    }

    /// Read a message of an exchange under `cfg` (whose shape the sketch and the RDA must
    /// have; an RDA's bucket count is checked against the configuration's bounds).
    pub fn decode(cfg: &Config, bytes: &[u8]) -> Result<Message, DecodeError> {
        let mut r = WireReader::new(bytes);
        let m = match r.u8("rda message tag")? {
            TAG_LEVEL => Message::Level(r.u8("sampling level")?),
            TAG_BEGIN => Message::Begin(r.u8("sampling level")?),
            TAG_SKETCH => {
                let kind = r.u8("sketch kind")?;
                let Sizing::Late(lb) = cfg.sizing else {
                    return Err(r.invalid("a set-difference sketch, but the RDA is of fixed size"));
                };
                match (kind, lb.setdiff) {
                    (0, SetDiffEstimator::MinHash { k }) => {
                        Message::Sketch(SetDiffSketch::MinHash(MinHash::decode(&mut r, k)?))
                    }
                    (1, SetDiffEstimator::Strata { strata, cells }) => Message::Sketch(
                        SetDiffSketch::Strata(Strata::decode(&mut r, cfg.seed, strata, cells)?),
                    ),
                    (k, e) => {
                        return Err(r.invalid(format!(
                            "a sketch of kind {k}, but the configuration's estimator is {e}"
                        )));
                    }
                }
            }
            TAG_SIZE => Message::Size(r.u64("buckets per bank")?),
            TAG_RDA => {
                let cached = r.u64("cached packets")?;
                let duplicates = r.u64("duplicates")?;
                let m = r.u64("buckets per bank")?;
                let max = match cfg.sizing {
                    Sizing::Fixed { buckets_per_bank } => buckets_per_bank,
                    Sizing::Late(lb) => lb.max_buckets_per_bank,
                };
                if m == 0 || m > max as u64 {
                    return Err(r.invalid(format!(
                        "an RDA of {m} buckets per bank; the configuration allows 1 to {max}"
                    )));
                }
                let rda = Rda::decode(&mut r, cfg.banks, m as usize, cfg.seed)?;
                Message::Rda {
                    cached,
                    duplicates,
                    rda,
                }
            }
            TAG_REQUEST => Message::Request(TimestampRequest::decode(&mut r)?),
            TAG_RESPONSE => Message::Response(TimestampResponse::decode(&mut r)?),
            t => return Err(r.invalid(format!("unknown rda message tag {t}"))),
        };
        r.finish("rda message")?;
        Ok(m)
    }
}

fn unexpected(side: &str, m: &Message, waiting: &str) -> MethodError {
    MethodError::Invalid(format!(
        "rda exchange: {side} got a {} message while waiting for {waiting}",
        m.name()
    ))
}

/// The receiver point's half: answers from its synopsis.
pub struct Responder<B: BorrowMut<Synopsis>> {
    r: B,
}

impl<B: BorrowMut<Synopsis>> Responder<B> {
    /// Start with R's synopsis of the interval; the first message to send is returned.
    pub fn new(r: B) -> Result<(Responder<B>, Message), MethodError> {
        if r.borrow().role() != Role::Receiver {
            return Err(MethodError::Invalid(
                "rda: the responder needs the receiver's synopsis".into(),
            ));
        }
        let level = r.borrow().cache().level();
        Ok((Responder { r }, Message::Level(level)))
    }

    /// The answer to one message of the decoder.
    pub fn on(&mut self, m: Message) -> Result<Message, MethodError> {
        let r = self.r.borrow_mut();
        let cfg = *r.config();
        Ok(match m {
            Message::Begin(level) => {
                r.raise_level(level);
                r.seal();
                match cfg.sizing {
                    Sizing::Late(lb) => {
                        Message::Sketch(lb.setdiff.sketch(cfg.seed, r.cache().iter().map(|p| p.0)))
                    }
                    Sizing::Fixed { .. } => Message::Rda {
                        cached: r.cache().len() as u64,
                        duplicates: r.cache().duplicates(),
                        rda: r.rda().cloned().ok_or_else(no_rda)?,
                    },
                }
            }
            Message::Size(m) => {
                let Sizing::Late(lb) = cfg.sizing else {
                    return Err(unexpected("R", &Message::Size(m), "begin or request"));
                };
                if m == 0 || m > lb.max_buckets_per_bank as u64 || !r.cache().is_sealed() {
                    return Err(MethodError::Invalid(format!(
                        "rda exchange: S asked for {m} buckets per bank (at most {}) {}",
                        lb.max_buckets_per_bank,
                        if r.cache().is_sealed() {
                            ""
                        } else {
                            "before the interval was sealed"
                        }
                    )));
                }
                let mut rda = Rda::new(cfg.banks, m as usize, cfg.seed)
                    .map_err(|e| MethodError::Invalid(e.to_string()))?;
                rda.insert_all(r.cache().iter());
                Message::Rda {
                    cached: r.cache().len() as u64,
                    duplicates: r.cache().duplicates(),
                    rda,
                }
            }
            Message::Request(q) => Message::Response(repair::answer(r.cache(), &q)),
            m => return Err(unexpected("R", &m, "begin, size or request")),
        })
    }

    /// R's synopsis back.
    pub fn into_inner(self) -> B {
        self.r
    }
}

/// What the decoder does next.
#[derive(Debug)]
pub enum Step {
    /// Send this message to R and wait for its answer.
    Send(Message),
    /// The interval is reconciled (nothing more to send).
    Done(Box<Reconciled>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    Level,
    Sketch,
    Rda,
    Response,
    Finished,
}

/// The sender point's half: sizes, decodes, asks, repairs (§VIII-A "Latency Aggregation").
pub struct Decoder<B: BorrowMut<Synopsis>> {
    s: B,
    cfg: Config,
    wait: Wait,
    level: u8,
    bytes: Bytes,
    d_hat: Option<f64>,
    m: usize,
    max_m: usize,
    retries: u32,
    known: HashMap<u64, Option<u64>>,
    attempts: u32,
    rounds: u32,
    round: u32,
    s_rda: Option<Rda>,
    r_rda: Option<Rda>,
    decoded: Option<Decoded>,
    /// The request in flight.
    request: TimestampRequest,
    r_cached: u64,
    r_duplicates: u64,
}

impl<B: BorrowMut<Synopsis>> Decoder<B> {
    /// Start with S's synopsis of the interval; R speaks first ([`Message::Level`]).
    pub fn new(s: B) -> Result<Decoder<B>, MethodError> {
        if s.borrow().role() != Role::Sender {
            return Err(MethodError::Invalid(
                "rda: the decoder needs the sender's synopsis".into(),
            ));
        }
        let cfg = *s.borrow().config();
        let (m, max_m) = match cfg.sizing {
            Sizing::Fixed { buckets_per_bank } => (buckets_per_bank, buckets_per_bank),
            Sizing::Late(lb) => (lb.floor, lb.max_buckets_per_bank),
        };
        Ok(Decoder {
            s,
            cfg,
            wait: Wait::Level,
            level: 0,
            bytes: Bytes::default(),
            d_hat: None,
            m,
            max_m,
            retries: 0,
            known: HashMap::new(),
            attempts: 0,
            rounds: 0,
            round: 0,
            s_rda: None,
            r_rda: None,
            decoded: None,
            request: TimestampRequest::default(),
            r_cached: 0,
            r_duplicates: 0,
        })
    }

    /// S's synopsis back (sealed, at the common level).
    pub fn into_inner(self) -> B {
        self.s
    }

    /// Take one message of R; say what to send, or the reconciled interval.
    pub fn on(&mut self, msg: Message) -> Result<Step, MethodError> {
        match (self.wait, msg) {
            (Wait::Level, Message::Level(r_level)) => {
                // 1. end of interval, common sampling level (R's level: 1 byte)
                self.bytes.sizing = 1;
                let s = self.s.borrow_mut();
                self.level = s.cache().level().max(r_level);
                s.raise_level(self.level);
                s.seal();
                match self.cfg.sizing {
                    Sizing::Late(_) => self.wait = Wait::Sketch,
                    Sizing::Fixed { .. } => {
                        self.attempts += 1;
                        self.s_rda = Some(s.rda().cloned().ok_or_else(no_rda)?);
                        self.wait = Wait::Rda;
                    }
                }
                Ok(Step::Send(Message::Begin(self.level)))
            }
            (Wait::Sketch, Message::Sketch(rs)) => {
                // 2. R's sketch crosses; S estimates d and picks m
                let Sizing::Late(lb) = self.cfg.sizing else {
                    return Err(no_rda());
                };
                let ss = lb
                    .setdiff
                    .sketch(self.cfg.seed, self.s.borrow().cache().iter().map(|p| p.0));
                self.bytes.sketch = rs.wire_bytes();
                let d = SetDiffSketch::estimate(&ss, &rs).unwrap_or(0.0);
                self.d_hat = Some(d);
                let want = (lb.factor * d).ceil();
                let want = if want.is_finite() && want < usize::MAX as f64 {
                    want as usize
                } else {
                    usize::MAX
                };
                self.m = want.clamp(lb.floor, lb.max_buckets_per_bank);
                self.retries = lb.retries;
                self.start_attempt()
            }
            (
                Wait::Rda,
                Message::Rda {
                    cached,
                    duplicates,
                    rda,
                },
            ) => {
                // 3. R's RDA crossed
                let s_rda = self.s_rda.as_ref().ok_or_else(no_rda)?;
                if !s_rda.same_shape(&rda) {
                    return Err(no_rda());
                }
                self.bytes.rda += rda.wire_bytes();
                self.r_rda = Some(rda);
                self.r_cached = cached;
                self.r_duplicates = duplicates;
                self.round = 0;
                self.decode_round()
            }
            (Wait::Response, Message::Response(resp)) => {
                if resp.timestamps.len() != self.request.ids.len() {
                    return Err(MethodError::Invalid(format!(
                        "rda exchange: {} timestamps answer a request for {}",
                        resp.timestamps.len(),
                        self.request.ids.len()
                    )));
                }
                self.bytes.request += self.request.wire_bytes();
                self.bytes.response += resp.wire_bytes();
                let absent = resp.timestamps.iter().any(Option::is_none);
                for (&id, &t) in self.request.ids.iter().zip(&resp.timestamps) {
                    self.known.insert(id, t);
                }
                if !absent || self.round >= MAX_ROUNDS {
                    self.finish_attempt()
                } else {
                    self.decode_round()
                }
            }
            (w, m) => Err(unexpected(
                "S",
                &m,
                match w {
                    Wait::Level => "level",
                    Wait::Sketch => "sketch",
                    Wait::Rda => "rda",
                    Wait::Response => "response",
                    Wait::Finished => "nothing (the interval is reconciled)",
                },
            )),
        }
    }

    /// Late binding: build S's RDA of `m` buckets and ask R for its own.
    fn start_attempt(&mut self) -> Result<Step, MethodError> {
        self.attempts += 1;
        self.bytes.sizing += 8;
        let mut a = Rda::new(self.cfg.banks, self.m, self.cfg.seed)
            .map_err(|e| MethodError::Invalid(e.to_string()))?;
        a.insert_all(self.s.borrow().cache().iter());
        self.s_rda = Some(a);
        self.wait = Wait::Rda;
        Ok(Step::Send(Message::Size(self.m as u64)))
    }

    /// 4–5. decode; a "lost" candidate must be in S's cache, a "reordered" one must not be;
    /// ask for the timestamps of new reordered identities.
    fn decode_round(&mut self) -> Result<Step, MethodError> {
        self.round += 1;
        self.rounds += 1;
        let (s_rda, r_rda) = (
            self.s_rda.as_ref().ok_or_else(no_rda)?,
            self.r_rda.as_ref().ok_or_else(no_rda)?,
        );
        let mut sub = Subtraction::of(r_rda, s_rda).ok_or_else(no_rda)?;
        let s = self.s.borrow();
        let known = &self.known;
        let decoded = decode(&mut sub, |id, class| match class {
            Class::Lost => s.cache().contains(id),
            Class::Reordered => !s.cache().contains(id) && !matches!(known.get(&id), Some(None)),
        });
        let req = TimestampRequest {
            ids: decoded
                .reordered
                .iter()
                .copied()
                .filter(|id| !known.contains_key(id))
                .collect(),
        };
        self.decoded = Some(decoded);
        if req.ids.is_empty() {
            return self.finish_attempt();
        }
        self.request = req.clone();
        self.wait = Wait::Response;
        Ok(Step::Send(Message::Request(req)))
    }

    /// 6–7. retry with twice the buckets, or repair and finish.
    fn finish_attempt(&mut self) -> Result<Step, MethodError> {
        let decoded = self.decoded.take().ok_or_else(no_rda)?;
        let done = decoded.complete() || self.attempts > self.retries || self.m >= self.max_m;
        if !done {
            self.m = self.m.saturating_mul(2).min(self.max_m);
            return self.start_attempt();
        }
        self.wait = Wait::Finished;
        let mut s_rda = self.s_rda.take().ok_or_else(no_rda)?;
        let mut r_rda = self.r_rda.take().ok_or_else(no_rda)?;
        let s = self.s.borrow();
        repair::repair_sender(&mut s_rda, s.cache(), &decoded.lost);
        let req = TimestampRequest {
            ids: decoded.reordered.clone(),
        };
        let resp = TimestampResponse {
            timestamps: req
                .ids
                .iter()
                .map(|id| self.known.get(id).copied().flatten())
                .collect(),
        };
        repair::repair_receiver(&mut r_rda, &req, &resp);
        let clean = estimate::clean_buckets(&s_rda, &r_rda).ok_or_else(no_rda)?;
        let lost: hashbrown::HashSet<u64> = decoded.lost.iter().copied().collect();
        let packets = if decoded.complete() {
            (s.cache().len() - lost.len()) as u64
        } else {
            let h = s_rda.hashes();
            let pm = s_rda.per_bank();
            let banks = self.cfg.banks;
            s.cache()
                .iter()
                .filter(|(id, _)| !lost.contains(id))
                .filter(|(id, _)| (0..banks).any(|l| clean[l * pm + h.index(l, *id)]))
                .count() as u64
        };
        let vetoed = decoded.vetoed;
        Ok(Step::Done(Box::new(Reconciled {
            sender: s_rda,
            receiver: r_rda,
            clean,
            decoded,
            packets,
            cached: [s.cache().len() as u64, self.r_cached],
            duplicates: [s.cache().duplicates(), self.r_duplicates],
            level: self.level,
            d_hat: self.d_hat,
            attempts: self.attempts,
            rounds: self.rounds,
            vetoed,
            bytes: self.bytes,
        })))
    }
}

fn no_rda() -> MethodError {
    MethodError::Invalid("rda: the two points' RDAs differ in shape".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rda::{LateBinding, SetDiffEstimator};

    fn cfgs() -> Vec<Config> {
        vec![
            Config::fixed(300),
            Config::default(),
            Config {
                sizing: Sizing::Late(LateBinding {
                    setdiff: SetDiffEstimator::MinHash { k: 64 },
                    ..match Config::default().sizing {
                        Sizing::Late(lb) => lb,
                        Sizing::Fixed { .. } => unreachable!(),
                    }
                }),
                ..Config::default()
            },
        ]
    }

    /// Every message survives its encoding, and every cut of it is an error.
    #[test]
    fn messages_roundtrip_and_truncations_are_errors() {
        for cfg in cfgs() {
            let mut s = Synopsis::new(&cfg, Role::Sender).unwrap();
            let mut r = Synopsis::new(&cfg, Role::Receiver).unwrap();
            for i in 0..500u64 {
                let id = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                s.record_packet(id, 1_000 + i);
                if i % 7 != 0 {
                    r.record_packet(id, 5_000 + i);
                }
            }
            let (mut resp, first) = Responder::new(&mut r).unwrap();
            let mut dec = Decoder::new(&mut s).unwrap();
            let mut msg = first;
            let mut seen = 0;
            loop {
                let mut b = Vec::new();
                msg.encode(&mut b);
                assert_eq!(Message::decode(&cfg, &b).unwrap(), msg);
                for cut in 0..b.len() {
                    assert!(Message::decode(&cfg, &b[..cut]).is_err(), "cut {cut}");
                }
                seen += 1;
                match dec.on(msg).unwrap() {
                    Step::Send(m) => {
                        let mut b = Vec::new();
                        m.encode(&mut b);
                        assert_eq!(Message::decode(&cfg, &b).unwrap(), m);
                        msg = resp.on(m).unwrap();
                    }
                    Step::Done(rec) => {
                        assert!(rec.decoded.complete());
                        assert_eq!(rec.decoded.lost.len(), 72);
                        break;
                    }
                }
            }
            assert!(seen >= 2);
        }
    }

    #[test]
    fn out_of_turn_and_hostile_messages_are_errors() {
        let cfg = Config::fixed(64);
        let mut s = Synopsis::new(&cfg, Role::Sender).unwrap();
        let mut dec = Decoder::new(&mut s).unwrap();
        assert!(dec.on(Message::Size(3)).is_err());
        let r = Synopsis::new(&cfg, Role::Receiver).unwrap();
        let (mut resp, _) = Responder::new(r).unwrap();
        assert!(resp.on(Message::Level(0)).is_err());
        assert!(
            resp.on(Message::Size(8)).is_err(),
            "fixed sizing takes no size"
        );
        // an RDA of more buckets than the configuration allows is refused before allocating
        let mut b = vec![TAG_RDA];
        b.extend(0u64.to_le_bytes());
        b.extend(0u64.to_le_bytes());
        b.extend(u64::MAX.to_le_bytes());
        assert!(Message::decode(&cfg, &b).is_err());
        // a request count beyond the bytes left
        let mut b = vec![TAG_REQUEST];
        b.extend(u32::MAX.to_le_bytes());
        assert!(Message::decode(&cfg, &b).is_err());
        assert!(Message::decode(&cfg, &[99]).is_err());
        // the wrong roles
        let s2 = Synopsis::new(&cfg, Role::Sender).unwrap();
        assert!(Responder::new(s2).is_err());
        let r2 = Synopsis::new(&cfg, Role::Receiver).unwrap();
        assert!(Decoder::new(r2).is_err());
    }
}
