//! `owl collector`: receives every receiver agent's interval lines and stores them
//! ([`crate::store`]); and the agents' side of it, the [`Reporter`], which queues lines (up to
//! a cap), delivers them, and sends again what was not acknowledged after a reconnect.
//!
//! ```text
//! agent → collector  Report  u32 pair length | pair | one JSON line of `owl agent` (interval or quiet)
//! collector → agent  Ack     u64 lines stored on this connection so far
//! ```
//!
//! Reports travel in authenticated frames like everything else (the agent connects with the
//! role "reporter"); each is stored in its own transaction before it is acknowledged.

use std::collections::VecDeque;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender, after, bounded, select};
use owl_core::wire::{WireReader, WireWriter};

use crate::admission::Admission;
use crate::key::Key;
use crate::lines::Line;
use crate::link::{self, Link, LinkError, LinkWriter, PeerRole};
use crate::metrics::Metrics;
use crate::store::{Store, StoreError};

/// Frame kinds between agents and the collector.
pub mod kind {
    pub const REPORT: u8 = 32;
    pub const ACK: u8 = 33;
}

/// Most agents connected at once.
pub const MAX_CONNECTIONS: usize = 1024;
/// Longest pair label.
pub const MAX_PAIR: usize = 256;

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A report's payload.
pub fn encode_report(pair: &str, line: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(line.len() + pair.len() + 2);
    let mut w = WireWriter::new(&mut b);
    w.str(pair);
    w.bytes(line.as_bytes());
    b
}

/// Why the collector ended a connection, or could not start.
#[derive(Debug, thiserror::Error)]
pub enum CollectorError {
    /// The database cannot be opened.
    #[error("{path}: {source}")]
    Open { path: String, source: StoreError },
    #[error("{0}")]
    Link(#[from] LinkError),
    /// The peer is not a reporting agent.
    #[error("this is a collector; {0} connected")]
    NotAReporter(&'static str),
    /// A report that is not one: its framing, its pair label or its line.
    #[error("{0}")]
    Report(String),
    /// A frame of another kind than a report.
    #[error("unexpected frame of kind {0}")]
    Frame(u8),
    /// The store refused a line (it is not acknowledged: the agent sends it again).
    #[error("cannot store a line of {pair}: {source}")]
    Store { pair: String, source: StoreError },
}

/// The pair and the parsed line of a report.
pub fn decode_report(p: &[u8]) -> Result<(String, Line), CollectorError> {
    let bad = |e: owl_core::wire::DecodeError| CollectorError::Report(e.to_string());
    let mut r = WireReader::new(p);
    let pair = r.str("pair").map_err(bad)?;
    if pair.is_empty() || pair.len() > MAX_PAIR {
        return Err(CollectorError::Report(format!(
            "a pair label of {} bytes (1 to {MAX_PAIR})",
            pair.len()
        )));
    }
    let rest = r.take(r.remaining(), "line").map_err(bad)?;
    let v = serde_json::from_slice(rest).map_err(|e| {
        CollectorError::Report(format!(
            "a report that is not an agent's interval or quiet line: {e}"
        ))
    })?;
    Ok((pair, v))
}

/// Serve forever: accept agents, store what they report. Agents handshake at once, under
/// [`crate::admission`]'s cap and deadline (counted in `owl_connections_total{port="collector"}`
/// when there are metrics); at most [`MAX_CONNECTIONS`] admitted agents report at once.
/// Returns only on a listener error.
pub fn serve(
    listener: TcpListener,
    key: Key,
    db: &Path,
    metrics: Option<Arc<Metrics>>,
    log: Arc<dyn Fn(&str) + Send + Sync>,
) -> Result<(), CollectorError> {
    let store = Arc::new(Mutex::new(Store::open(db).map_err(|source| {
        CollectorError::Open {
            path: db.display().to_string(),
            source,
        }
    })?));
    let open = Arc::new(AtomicUsize::new(0));
    let rules = Admission {
        counts: Arc::new(
            metrics
                .as_ref()
                .map(|m| m.admission("collector"))
                .unwrap_or_default(),
        ),
        ..Admission::default()
    };
    let log2 = log.clone();
    crate::admission::serve(
        listener,
        rules,
        move |stream| admit(stream, &key),
        move |mut l: Link| {
            let from = l.peer.clone();
            if open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                let e = format!("{MAX_CONNECTIONS} agents connected");
                l.writer.refuse(&e);
                log2(&format!("connection from {from} refused: {e}"));
                return;
            }
            open.fetch_add(1, Ordering::Relaxed);
            let (store, log, gone) = (store.clone(), log2.clone(), open.clone());
            let metrics = metrics.clone();
            let spawned = std::thread::Builder::new()
                .name("owl-collector-session".into())
                .spawn(move || {
                    match session(l, &store, metrics.as_deref(), &*log) {
                        Ok((pair, n)) => log(&format!(
                            "{pair} ({from}): {n} lines stored, connection closed"
                        )),
                        Err(e) => log(&format!("connection from {from}: {e}")),
                    }
                    gone.fetch_sub(1, Ordering::Relaxed);
                });
            if spawned.is_err() {
                open.fetch_sub(1, Ordering::Relaxed);
            }
        },
        log,
    );
    Ok(())
}

/// The collector's side of the handshake: an authenticated reporter, or a refusal.
fn admit(stream: TcpStream, key: &Key) -> Result<Link, CollectorError> {
    let mut l = link::accept(stream, key, "collector")?;
    if l.hello.role != PeerRole::Reporter {
        let e = CollectorError::NotAReporter(l.hello.role.name());
        l.writer.refuse(&e.to_string());
        return Err(e);
    }
    Ok(l)
}

/// One agent's connection: store each report, acknowledge it.
fn session(
    mut l: Link,
    store: &Mutex<Store>,
    metrics: Option<&Metrics>,
    log: &(dyn Fn(&str) + Send + Sync),
) -> Result<(String, u64), CollectorError> {
    log(&format!("{} ({}) connected", l.hello.name, l.peer));
    let mut n = 0u64;
    let mut pair = l.hello.name.clone();
    loop {
        let f = match l.reader.recv() {
            Ok(f) => f,
            Err(LinkError::Frame(crate::frame::FrameError::Closed)) => return Ok((pair, n)),
            Err(e) => return Err(e.into()),
        };
        let decoded = if f.kind == kind::REPORT {
            decode_report(&f.payload)
        } else {
            Err(CollectorError::Frame(f.kind))
        };
        let (p, line) = match decoded {
            Ok(x) => x,
            Err(e) => {
                l.writer.refuse(&e.to_string());
                return Err(e);
            }
        };
        let stored =
            store
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .store_line(&p, &line, now_ns());
        let stored = match stored {
            Ok(stored) => stored,
            Err(source) => {
                if let Some(m) = metrics {
                    m.refused();
                }
                let e = CollectorError::Store { pair: p, source };
                l.writer.refuse(&e.to_string());
                return Err(e);
            }
        };
        match (stored, &line) {
            (true, Line::Interval(l)) => {
                if let Some(m) = metrics {
                    m.observe(&p, l);
                }
            }
            (false, Line::Interval(l)) => log(&format!(
                "{p}: interval {} is stored as estimated; a later line saying it is missing is not stored",
                l.index
            )),
            _ => {}
        }
        pair = p;
        n += 1;
        l.writer.send(kind::ACK, &n.to_le_bytes())?;
    }
}

/// Hand a line to the delivery thread without waiting.
fn offer(tx: &Sender<Cmd>, overflow: &std::sync::atomic::AtomicU64, line: &str) {
    if let Err(crossbeam_channel::TrySendError::Full(_)) = tx.try_send(Cmd::Line(line.to_string()))
    {
        overflow.fetch_add(1, Ordering::Relaxed);
    }
}

/// What the reporter thread is told.
enum Cmd {
    Line(String),
    /// Deliver everything, then stop (or give up at the deadline).
    Finish(Instant),
}

/// What became of the lines.
#[derive(Clone, Debug, Default)]
pub struct Delivery {
    pub delivered: u64,
    /// Lines dropped because the queue was full (the collector was away too long), or because
    /// the hand-over channel was (a write to the collector blocked that long).
    pub dropped: u64,
    /// Lines still queued when the deadline passed.
    pub undelivered: u64,
}

/// An agent's delivery of its lines to the collector: queued (at most `cap`), sent, resent
/// after a reconnect until acknowledged. The receiver hands lines over without ever waiting:
/// a channel of `cap` lines lies between it and the delivery thread (which moves them to its
/// queue at once unless a write to the collector blocks); a line that finds the channel full
/// is dropped and counted with the queue's drops.
pub struct Reporter {
    tx: Sender<Cmd>,
    /// Lines that found the channel full.
    overflow: Arc<std::sync::atomic::AtomicU64>,
    done: std::thread::JoinHandle<Delivery>,
}

impl Reporter {
    pub fn start(
        addr: String,
        key: Key,
        pair: String,
        cap: usize,
        log: Arc<dyn Fn(&str) + Send + Sync>,
    ) -> Reporter {
        let (tx, rx) = bounded(cap.max(1));
        let done = std::thread::spawn(move || deliver(&addr, &key, &pair, cap.max(1), &rx, &*log));
        Reporter {
            tx,
            overflow: Arc::default(),
            done,
        }
    }

    /// Queue a line (dropped and counted if the channel is full).
    pub fn send(&self, line: &str) {
        offer(&self.tx, &self.overflow, line);
    }

    /// A function that queues lines (for the receiver agent's sink).
    pub fn sink(&self) -> crate::lines::LineSink {
        let (tx, overflow) = (self.tx.clone(), self.overflow.clone());
        Box::new(move |l: &str| offer(&tx, &overflow, l))
    }

    /// Deliver what is queued, waiting at most `patience`.
    pub fn finish(self, patience: Duration) -> Delivery {
        let _ = self.tx.send(Cmd::Finish(Instant::now() + patience));
        let mut d = self.done.join().unwrap_or_default();
        d.dropped += self.overflow.load(Ordering::Relaxed);
        d
    }
}

struct Conn {
    w: LinkWriter,
    acks: Receiver<Result<u64, String>>,
    /// Lines of the queue's front sent on this connection and not yet acknowledged.
    sent: usize,
    acked: u64,
}

fn connect(addr: &str, key: &Key, pair: &str) -> Result<Conn, String> {
    let s = link::connect_with_patience(addr, "the collector", Duration::ZERO)
        .map_err(|e| e.to_string())?;
    let l = link::connect(s, key, PeerRole::Reporter, pair).map_err(|e| e.to_string())?;
    let (tx, acks) = bounded(1024);
    let mut r = l.reader;
    std::thread::spawn(move || {
        loop {
            let m = r.recv().map_err(|e| e.to_string()).and_then(|f| {
                if f.kind != kind::ACK || f.payload.len() != 8 {
                    return Err(format!(
                        "unexpected frame of kind {} from the collector",
                        f.kind
                    ));
                }
                Ok(u64::from_le_bytes(
                    f.payload[..8].try_into().expect("8 bytes"),
                ))
            });
            let end = m.is_err();
            if tx.send(m).is_err() || end {
                break;
            }
        }
    });
    Ok(Conn {
        w: l.writer,
        acks,
        sent: 0,
        acked: 0,
    })
}

fn deliver(
    addr: &str,
    key: &Key,
    pair: &str,
    cap: usize,
    rx: &Receiver<Cmd>,
    log: &(dyn Fn(&str) + Send + Sync),
) -> Delivery {
    let mut queue: VecDeque<Vec<u8>> = VecDeque::new();
    let mut d = Delivery::default();
    let mut conn: Option<Conn> = None;
    let mut finish: Option<Instant> = None;
    let mut retry = Instant::now();
    let mut backoff = Duration::from_millis(100);
    let mut down_since: Option<String> = None;
    loop {
        if conn.is_none() && Instant::now() >= retry {
            match connect(addr, key, pair) {
                Ok(c) => {
                    if down_since.take().is_some() {
                        log(&format!(
                            "collector {addr} reachable again: resending {} lines",
                            queue.len()
                        ));
                    }
                    conn = Some(c);
                    backoff = Duration::from_millis(100);
                }
                Err(e) => {
                    if down_since.is_none() {
                        log(&format!(
                            "collector {addr}: {e}; queueing results (at most {cap} lines)"
                        ));
                        down_since = Some(e);
                    }
                    retry = Instant::now() + backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
            }
        }
        if let Some(c) = conn.as_mut() {
            while c.sent < queue.len() {
                if let Err(e) = c.w.send(kind::REPORT, &queue[c.sent]) {
                    log(&format!("collector {addr}: {e}"));
                    down_since = Some(e.to_string());
                    conn = None;
                    break;
                }
                c.sent += 1;
            }
        }
        if let Some(t) = finish {
            if queue.is_empty() {
                if let Some(c) = conn {
                    c.w.shutdown();
                }
                return d;
            }
            if Instant::now() >= t {
                d.undelivered = queue.len() as u64;
                return d;
            }
        }
        let acks = conn
            .as_ref()
            .map(|c| c.acks.clone())
            .unwrap_or_else(crossbeam_channel::never);
        select! {
            recv(rx) -> cmd => match cmd {
                Ok(Cmd::Line(l)) => {
                    if queue.len() >= cap {
                        queue.pop_front();
                        d.dropped += 1;
                        if let Some(c) = conn.as_mut() {
                            // a line sent and not acknowledged is gone: resend from scratch
                            c.sent = c.sent.saturating_sub(1);
                        }
                        if d.dropped == 1 || d.dropped.is_power_of_two() {
                            log(&format!("collector {addr} unreachable: {} result lines dropped (queue of {cap} full)", d.dropped));
                        }
                    }
                    queue.push_back(encode_report(pair, &l));
                }
                Ok(Cmd::Finish(t)) => finish = Some(t),
                Err(_) => finish = Some(finish.unwrap_or_else(Instant::now)),
            },
            recv(acks) -> a => match a {
                Ok(Ok(n)) => {
                    let c = conn.as_mut().expect("acks come from a connection");
                    let k = n.saturating_sub(c.acked).min(c.sent as u64) as usize;
                    c.acked = n;
                    c.sent -= k;
                    queue.drain(..k);
                    d.delivered += k as u64;
                }
                _ => {
                    if let Ok(Err(e)) = a {
                        log(&format!("collector {addr}: {e}"));
                    }
                    down_since.get_or_insert_with(|| "connection lost".into());
                    conn = None;
                }
            },
            recv(after(Duration::from_millis(100))) -> _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_roundtrip_and_bad_ones_are_refused() {
        let p = encode_report("a→b", r#"{"type":"quiet","from":1,"to":2,"start_ns":5}"#);
        let (pair, v) = decode_report(&p).unwrap();
        assert!(matches!((pair.as_str(), v), ("a→b", Line::Quiet(q)) if q.to == 2));
        assert!(decode_report(&encode_report("", "{}")).is_err());
        let e = decode_report(&encode_report("a", r#"{"type":"nonsense"}"#))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `nonsense`"), "{e}");
        let e = decode_report(&encode_report("a", r#"{"type":"quiet","from":1}"#))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field `to`"), "{e}");
        assert!(decode_report(&encode_report("a", "not json")).is_err());
        assert!(decode_report(&[5, 0, b'a']).is_err());
    }

    /// A line that finds the hand-over channel full is counted, and the receiver never waits.
    #[test]
    fn a_full_hand_over_drops_and_counts() {
        let (tx, rx) = bounded(2);
        let overflow = std::sync::atomic::AtomicU64::new(0);
        for k in 0..5 {
            offer(&tx, &overflow, &format!("line {k}"));
        }
        assert_eq!((rx.len(), overflow.load(Ordering::Relaxed)), (2, 3));
    }

    /// An agent's lines reach the database through a collector, and a collector that was not
    /// there yet receives them once it is (queued, then delivered).
    #[test]
    fn lines_are_queued_until_the_collector_is_there_then_stored() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("owl.db");
        let key = Key::from_bytes([3; 32]);
        // reserve a port, start the reporter before the collector listens on it
        let probe = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap().to_string();
        drop(probe);
        let quiet: Arc<dyn Fn(&str) + Send + Sync> = Arc::new(|_| {});
        let rep = Reporter::start(addr.clone(), key.clone(), "s→r".into(), 100, quiet.clone());
        for i in 0..5u64 {
            rep.send(&format!(
                r#"{{"type":"interval","index":{i},"start_ns":{},"status":"estimated","sent":3,"received":3,"methods":[{{"method":"lda","mean_ns":{i}.5,"std_ns":null,"samples":3,"bytes":8,"lost":0,"mean_ci98_ns":null,"std_ci95_ns":null,"notes":[]}}]}}"#,
                i * 10
            ));
        }
        let listener = TcpListener::bind(&addr).unwrap();
        let (k2, db2) = (key.clone(), db.clone());
        std::thread::spawn(move || serve(listener, k2, &db2, None, quiet));
        let d = rep.finish(Duration::from_secs(60));
        assert_eq!((d.delivered, d.dropped, d.undelivered), (5, 0, 0));
        let s = Store::open_read(&db).unwrap();
        let rows = s.series("s→r").unwrap();
        assert_eq!(rows.len(), 5);
        assert_eq!(rows[4].mean_ns, Some(4.5));
        // a reporter with another key is refused
        let rep = Reporter::start(
            addr,
            Key::from_bytes([4; 32]),
            "x".into(),
            10,
            Arc::new(|_| {}),
        );
        rep.send(r#"{"type":"quiet","from":1,"to":2,"start_ns":5}"#);
        let d = rep.finish(Duration::from_millis(300));
        assert_eq!((d.delivered, d.undelivered), (0, 1));
    }
}
