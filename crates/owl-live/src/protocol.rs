//! The messages of a connection after the handshake, one per frame ([`crate::frame`]): their
//! kinds and payloads, encoded with `owl_core`'s [`WireWriter`] and read with bounds checks.
//!
//! Between the two agents (S connects to R):
//!
//! ```text
//! S → R  Config   the measurement configuration (crate::config); R answers Accept or a refusal
//! R → S  Accept   u32 window: most intervals S may announce that R has not released
//! S → R  Synopsis u64 interval | u16 method | the method's payload (what `owl record` writes)
//! S → R  Resume   u8 has | u64 released | u8 live | u64 started: sent once after Accept on
//!                 every connection. released (has = 1): a receiver released S's intervals
//!                 below it on an earlier connection of this sender process, so S resumes there
//!                 (has = 0: this sender never had a receiver). started (live = 1): the interval
//!                 S's live capture began in, the first S recorded only part of
//! S → R  Have     u64 interval | u8 lost | u64 packets | u8 live | u64 kernel_drops
//!                 | u8 cut | (cut = 1) u8 n, n × u64 | u8 m, m × u64: S closed this interval
//!                 with packets in it (after its Synopsis frames); lost = 0: S sent its
//!                 synopses, 1: S dropped them (overload); live = 1: S captures an interface,
//!                 and its kernel dropped kernel_drops packets since its previous interval
//!                 closed; cut = 1 (a delimiter cut): S's delimiters of the interval's start
//!                 and of its end (owl_core::cut), sent even when the synopses were dropped;
//!                 m | 0x80: its capture ended first, the m are its last packets; 0xff, m: the
//!                 same, its capture stopped at the interval's end (version 7)
//! S → R  Below    u64 n: S will announce no interval below n
//! S → R  Done     S's capture ended; every interval is announced
//! both   Rda      u64 interval | u16 method | one message of RDA's exchange (owl_core rda::session)
//! S → R  Result   u64 interval | u16 method | an estimate (S decodes RDA, §VIII-A) or an error
//!                 (the estimate ends with u8 has | str reason: why figures are withheld;
//!                 protocol 5's first agents sent no such byte, read as no reason)
//! R → S  Release  u64 n: every interval below n is finished; S frees what it held for them
//! R → S  Bye      everything is exchanged: S may exit
//! R → S  Ping     i64 t1: R's clock when sent (crate::clock)
//! S → R  Pong     i64 t1 | i64 t2 | i64 t3: the ping's t1, S's clock when it arrived and when
//!                 S answered
//! ```

use owl_core::cut::{Named, read_named, write_named};
use owl_core::method::{Estimate, Quantiles};
use owl_core::wire::{DecodeError, WireReader, WireWriter};

use crate::config::AgentConfig;

/// Frame kinds of the agent protocol.
pub mod kind {
    pub const CONFIG: u8 = 16;
    pub const ACCEPT: u8 = 17;
    pub const SYNOPSIS: u8 = 18;
    pub const HAVE: u8 = 19;
    pub const BELOW: u8 = 20;
    pub const DONE: u8 = 21;
    pub const RDA: u8 = 22;
    pub const RESULT: u8 = 23;
    pub const RELEASE: u8 = 24;
    pub const BYE: u8 = 25;
    pub const PING: u8 = 26;
    pub const PONG: u8 = 27;
    pub const RESUME: u8 = 28;
}

/// Why S has no synopsis for an interval it closed with packets in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The capture hand-off was full: S dropped the interval whole.
    Overload,
}

/// One message between the agents.
#[derive(Clone, Debug, PartialEq)]
pub enum Msg {
    Config(AgentConfig),
    Accept {
        window: u32,
    },
    Synopsis {
        interval: u64,
        method: u16,
        payload: Vec<u8>,
    },
    /// S resumes: see the table above.
    Resume {
        released: Option<u64>,
        started: Option<u64>,
    },
    Have {
        interval: u64,
        lost: Option<Lost>,
        packets: u64,
        /// Live capture: packets S's kernel dropped since S's previous interval closed.
        kernel_drops: Option<u64>,
        /// A delimiter cut: S's delimiters of the interval's start and of its end.
        delimiters: Option<(Vec<u64>, Named)>,
    },
    Below(u64),
    Done,
    Rda {
        interval: u64,
        method: u16,
        message: Vec<u8>,
    },
    Result {
        interval: u64,
        method: u16,
        result: Result<Box<Estimate>, String>,
    },
    Release(u64),
    Bye,
    /// `received_ns` is not on the wire: the reader thread stamps the message's arrival.
    Ping {
        t1: i64,
        received_ns: i64,
    },
    Pong {
        t1: i64,
        t2: i64,
        t3: i64,
        received_ns: i64,
    },
}

impl Msg {
    /// The frame kind and payload.
    pub fn encode(&self) -> (u8, Vec<u8>) {
        let mut b = Vec::new();
        let mut w = WireWriter::new(&mut b);
        let k = match self {
            Msg::Config(c) => {
                w.bytes(&c.encode());
                kind::CONFIG
            }
            Msg::Accept { window } => {
                w.u32(*window);
                kind::ACCEPT
            }
            Msg::Synopsis {
                interval,
                method,
                payload,
            } => {
                w.u64(*interval);
                w.u16(*method);
                w.bytes(payload);
                kind::SYNOPSIS
            }
            Msg::Resume { released, started } => {
                for v in [released, started] {
                    w.u8(u8::from(v.is_some()));
                    w.u64(v.unwrap_or(0));
                }
                kind::RESUME
            }
            Msg::Have {
                interval,
                lost,
                packets,
                kernel_drops,
                delimiters,
            } => {
                w.u64(*interval);
                w.u8(match lost {
                    None => 0,
                    Some(Lost::Overload) => 1,
                });
                w.u64(*packets);
                w.u8(u8::from(kernel_drops.is_some()));
                w.u64(kernel_drops.unwrap_or(0));
                match delimiters {
                    None => w.u8(0),
                    Some((start, end)) => {
                        w.u8(1);
                        write_named(&mut w, &Named::First(start.clone()));
                        write_named(&mut w, end);
                    }
                }
                kind::HAVE
            }
            Msg::Below(n) => {
                w.u64(*n);
                kind::BELOW
            }
            Msg::Done => kind::DONE,
            Msg::Rda {
                interval,
                method,
                message,
            } => {
                w.u64(*interval);
                w.u16(*method);
                w.bytes(message);
                kind::RDA
            }
            Msg::Result {
                interval,
                method,
                result,
            } => {
                w.u64(*interval);
                w.u16(*method);
                match result {
                    Ok(e) => {
                        w.u8(1);
                        encode_estimate(&mut w, e);
                    }
                    Err(s) => {
                        w.u8(0);
                        w.str(s);
                    }
                }
                kind::RESULT
            }
            Msg::Release(n) => {
                w.u64(*n);
                kind::RELEASE
            }
            Msg::Bye => kind::BYE,
            Msg::Ping { t1, .. } => {
                w.u64(*t1 as u64);
                kind::PING
            }
            Msg::Pong { t1, t2, t3, .. } => {
                for t in [t1, t2, t3] {
                    w.u64(*t as u64);
                }
                kind::PONG
            }
        };
        (k, b)
    }

    pub fn decode(kind: u8, p: &[u8]) -> Result<Msg, DecodeError> {
        let mut r = WireReader::new(p);
        let m = match kind {
            kind::CONFIG => return AgentConfig::decode(p).map(Msg::Config),
            kind::ACCEPT => Msg::Accept {
                window: r.u32("window")?,
            },
            kind::SYNOPSIS => Msg::Synopsis {
                interval: r.u64("interval")?,
                method: r.u16("method")?,
                payload: r.take(r.remaining(), "synopsis")?.to_vec(),
            },
            kind::HAVE => Msg::Have {
                interval: r.u64("interval")?,
                lost: match r.u8("lost")? {
                    0 => None,
                    1 => Some(Lost::Overload),
                    x => return Err(r.invalid(format!("lost code {x}"))),
                },
                packets: r.u64("packets")?,
                kernel_drops: match (r.u8("live")?, r.u64("kernel drops")?) {
                    (0, _) => None,
                    (1, n) => Some(n),
                    (x, _) => return Err(r.invalid(format!("live flag {x}"))),
                },
                delimiters: if flag(&mut r, "cut")? {
                    let Named::First(start) = read_named(&mut r)? else {
                        return Err(r.invalid("the start of an interval named by S's last packets"));
                    };
                    Some((start, read_named(&mut r)?))
                } else {
                    None
                },
            },
            kind::RESUME => {
                let mut opt = |what: &'static str| -> Result<Option<u64>, DecodeError> {
                    let has = flag(&mut r, what)?;
                    let v = r.u64(what)?;
                    Ok(has.then_some(v))
                };
                let released = opt("released")?;
                let started = opt("started")?;
                Msg::Resume { released, started }
            }
            kind::BELOW => Msg::Below(r.u64("interval")?),
            kind::DONE => Msg::Done,
            kind::RDA => Msg::Rda {
                interval: r.u64("interval")?,
                method: r.u16("method")?,
                message: r.take(r.remaining(), "rda message")?.to_vec(),
            },
            kind::RESULT => {
                let interval = r.u64("interval")?;
                let method = r.u16("method")?;
                let result = match r.u8("result flag")? {
                    1 => Ok(Box::new(decode_estimate(&mut r)?)),
                    0 => Err(r.str("error")?),
                    x => return Err(r.invalid(format!("result flag {x}"))),
                };
                Msg::Result {
                    interval,
                    method,
                    result,
                }
            }
            kind::RELEASE => Msg::Release(r.u64("interval")?),
            kind::BYE => Msg::Bye,
            kind::PING => Msg::Ping {
                t1: r.u64("t1")? as i64,
                received_ns: 0,
            },
            kind::PONG => Msg::Pong {
                t1: r.u64("t1")? as i64,
                t2: r.u64("t2")? as i64,
                t3: r.u64("t3")? as i64,
                received_ns: 0,
            },
            k => return Err(r.invalid(format!("unknown message kind {k}"))),
        };
        r.finish("message")?;
        Ok(m)
    }

    /// A short name for logs and errors.
    pub fn name(&self) -> &'static str {
        match self {
            Msg::Config(_) => "config",
            Msg::Accept { .. } => "accept",
            Msg::Synopsis { .. } => "synopsis",
            Msg::Resume { .. } => "resume",
            Msg::Have { .. } => "have",
            Msg::Below(_) => "below",
            Msg::Done => "done",
            Msg::Rda { .. } => "rda",
            Msg::Result { .. } => "result",
            Msg::Release(_) => "release",
            Msg::Bye => "bye",
            Msg::Ping { .. } => "ping",
            Msg::Pong { .. } => "pong",
        }
    }
}

/// Most notes an estimate carries across.
const MAX_NOTES: usize = 256;

fn opt_f64(w: &mut WireWriter, v: Option<f64>) {
    match v {
        Some(x) => {
            w.u8(1);
            w.f64(x);
        }
        None => w.u8(0),
    }
}

fn opt_pair(w: &mut WireWriter, v: Option<[f64; 2]>) {
    match v {
        Some([a, b]) => {
            w.u8(1);
            w.f64(a);
            w.f64(b);
        }
        None => w.u8(0),
    }
}

fn flag(r: &mut WireReader, what: &'static str) -> Result<bool, DecodeError> {
    match r.u8(what)? {
        0 => Ok(false),
        1 => Ok(true),
        x => Err(r.invalid(format!("{what} flag {x}"))),
    }
}

fn read_opt_f64(r: &mut WireReader, what: &'static str) -> Result<Option<f64>, DecodeError> {
    Ok(if flag(r, what)? {
        Some(r.f64(what)?)
    } else {
        None
    })
}

fn read_opt_pair(r: &mut WireReader, what: &'static str) -> Result<Option<[f64; 2]>, DecodeError> {
    Ok(if flag(r, what)? {
        Some([r.f64(what)?, r.f64(what)?])
    } else {
        None
    })
}

/// An [`Estimate`], every float bit for bit.
pub fn encode_estimate(w: &mut WireWriter, e: &Estimate) {
    opt_f64(w, e.mean_ns);
    opt_f64(w, e.std_ns);
    w.u64(e.samples);
    w.u64(e.bytes);
    match e.lost {
        Some(l) => {
            w.u8(1);
            w.u64(l);
        }
        None => w.u8(0),
    }
    opt_pair(w, e.mean_ci98_ns);
    opt_pair(w, e.std_ci95_ns);
    let notes = &e.notes[..e.notes.len().min(MAX_NOTES)];
    w.u16(notes.len() as u16);
    for n in notes {
        w.str(n);
    }
    match &e.quantiles {
        Some(q) => {
            w.u8(1);
            for v in [q.p50_ns, q.p90_ns, q.p99_ns, q.p999_ns] {
                w.f64(v);
            }
            for c in [q.p50_ci95_ns, q.p90_ci95_ns, q.p99_ci95_ns, q.p999_ci95_ns] {
                opt_pair(w, c);
            }
        }
        None => w.u8(0),
    }
    match &e.reason {
        Some(why) => {
            w.u8(1);
            w.str(why);
        }
        None => w.u8(0),
    }
}

/// An [`Estimate`] as [`encode_estimate`] writes it, at the end of its message. Its last
/// field, the reason, came into protocol 5 after its first agents (20728be) without a new
/// version: their estimates end before it, which at the end of the message is unambiguous,
/// and is read as no reason.
pub fn decode_estimate(r: &mut WireReader) -> Result<Estimate, DecodeError> {
    let mean_ns = read_opt_f64(r, "mean")?;
    let std_ns = read_opt_f64(r, "std")?;
    let samples = r.u64("samples")?;
    let bytes = r.u64("bytes")?;
    let lost = if flag(r, "lost")? {
        Some(r.u64("lost")?)
    } else {
        None
    };
    let mean_ci98_ns = read_opt_pair(r, "mean interval")?;
    let std_ci95_ns = read_opt_pair(r, "std interval")?;
    let n = r.u16("notes")? as usize;
    if n > MAX_NOTES {
        return Err(r.invalid(format!("{n} notes (at most {MAX_NOTES})")));
    }
    let mut notes = Vec::with_capacity(n);
    for _ in 0..n {
        notes.push(r.str("note")?);
    }
    let quantiles = if flag(r, "quantiles")? {
        let p50_ns = r.f64("p50")?;
        let p90_ns = r.f64("p90")?;
        let p99_ns = r.f64("p99")?;
        let p999_ns = r.f64("p99.9")?;
        Some(Quantiles {
            p50_ns,
            p90_ns,
            p99_ns,
            p999_ns,
            p50_ci95_ns: read_opt_pair(r, "p50 interval")?,
            p90_ci95_ns: read_opt_pair(r, "p90 interval")?,
            p99_ci95_ns: read_opt_pair(r, "p99 interval")?,
            p999_ci95_ns: read_opt_pair(r, "p99.9 interval")?,
            // an interval's quantiles are nearest-rank over its own delays, never a histogram's
            quantiles_relative_error: None,
        })
    } else {
        None
    };
    let reason = if r.remaining() == 0 {
        None
    } else if flag(r, "reason")? {
        Some(r.str("reason")?)
    } else {
        None
    };
    Ok(Estimate {
        reason,
        mean_ns,
        std_ns,
        samples,
        bytes,
        lost,
        mean_ci98_ns,
        std_ci95_ns,
        notes,
        quantiles,
        // the recovered delays stay where the pair was estimated
        recovered: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est() -> Estimate {
        Estimate {
            reason: Some("loss withheld: a test".into()),
            mean_ns: Some(1234.5678),
            std_ns: None,
            samples: 99,
            bytes: 4096,
            lost: Some(3),
            mean_ci98_ns: Some([1.0, f64::MAX]),
            std_ci95_ns: None,
            notes: vec!["decoding incomplete".into(), "é".into()],
            quantiles: Some(Quantiles {
                p50_ns: 1.0,
                p90_ns: 2.0,
                p99_ns: 3.0,
                p999_ns: -0.0,
                p50_ci95_ns: Some([0.5, 1.5]),
                ..Default::default()
            }),
            recovered: None,
        }
    }

    #[test]
    fn every_message_roundtrips_and_every_cut_is_an_error() {
        let msgs = vec![
            Msg::Accept { window: 8 },
            Msg::Synopsis {
                interval: 7,
                method: 2,
                payload: vec![1, 2, 3],
            },
            Msg::Have {
                interval: 9,
                lost: Some(Lost::Overload),
                packets: 77,
                kernel_drops: Some(3),
                delimiters: Some((vec![1, 2, u64::MAX], Named::SILENT)),
            },
            Msg::Have {
                interval: 8,
                lost: None,
                packets: 3,
                kernel_drops: None,
                delimiters: Some((vec![4], Named::Last(vec![9, 7]))),
            },
            Msg::Have {
                interval: 9,
                lost: None,
                packets: 3,
                kernel_drops: None,
                delimiters: Some((vec![], Named::Stopped(vec![1, 2, 3]))),
            },
            Msg::Have {
                interval: 11,
                lost: None,
                packets: 1,
                kernel_drops: None,
                delimiters: None,
            },
            Msg::Resume {
                released: Some(0),
                started: None,
            },
            Msg::Resume {
                released: None,
                started: Some(u64::MAX),
            },
            Msg::Below(10),
            Msg::Done,
            Msg::Rda {
                interval: 1,
                method: 0,
                message: vec![5; 40],
            },
            Msg::Result {
                interval: 3,
                method: 1,
                result: Ok(Box::new(est())),
            },
            Msg::Result {
                interval: 3,
                method: 1,
                result: Ok(Box::default()),
            },
            Msg::Result {
                interval: 3,
                method: 1,
                result: Err("rda: decoding failed".into()),
            },
            Msg::Release(4),
            Msg::Bye,
            Msg::Ping {
                t1: 1_700_000_000_123_456_789,
                received_ns: 0,
            },
            Msg::Pong {
                t1: 1_700_000_000_123_456_789,
                t2: -5,
                t3: i64::MAX,
                received_ns: 0,
            },
        ];
        for m in msgs {
            let (k, p) = m.encode();
            let back = Msg::decode(k, &p).unwrap();
            assert_eq!(back, m);
            // fixed-size messages: every cut fails (the variable tails of Synopsis and Rda
            // are their payloads, checked by their own decoders)
            if !matches!(m, Msg::Synopsis { .. } | Msg::Rda { .. }) {
                // an estimate may end before its reason (protocol 5's first agents)
                let before_reason = match &m {
                    Msg::Result { result: Ok(e), .. } => {
                        let mut e = (**e).clone();
                        let tail = 1 + e.reason.take().map_or(0, |r| 2 + r.len());
                        Some((p.len() - tail, e))
                    }
                    _ => None,
                };
                if let Some((at, e)) = &before_reason {
                    let Ok(Msg::Result {
                        result: Ok(got), ..
                    }) = Msg::decode(k, &p[..*at])
                    else {
                        panic!("an estimate without its reason byte does not decode")
                    };
                    assert_eq!(*got, *e, "read with no reason");
                }
                for cut in 0..p.len() {
                    if before_reason.as_ref().is_some_and(|(at, _)| *at == cut) {
                        continue;
                    }
                    assert!(Msg::decode(k, &p[..cut]).is_err(), "{} cut {cut}", m.name());
                }
            }
        }
        assert!(Msg::decode(99, &[]).is_err());
        assert!(
            Msg::decode(
                kind::HAVE,
                &[0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0]
            )
            .is_err()
        );
    }
}
