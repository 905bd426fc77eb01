//! The two agents: the sender point S connects to the receiver point R, both cut their own
//! capture into intervals ([`crate::capture`]) and exchange each interval as it closes, while
//! the next one is recorded (RDA §VIII-A: pipelined, clock-delimited intervals).
//!
//! - **One-way methods** (every method but RDA): S sends its interval's synopsis payload —
//!   exactly what `owl record` writes — and R estimates the pair with the method's own pair
//!   estimator, as `owl estimate` does with two files.
//! - **RDA** (`rda`, `rda-fixed`): the points run RDA's round trip ([`owl_core::rda::session`]):
//!   R's sampling level, S's common level, R's set-difference sketch, S's bank size, R's RDA,
//!   S's timestamp requests and R's responses; S decodes and sends R the estimate. The caches
//!   never cross.
//! - **Which intervals** R estimates, leaves out (lead-in, lead-out) or reports missing: the
//!   [`crate::join`] rule, `owl estimate`'s.
//! - **Bounded**: S announces at most `window` intervals R has not released (R's `--queue`);
//!   beyond that S's captured intervals wait in the capture hand-off, which waits (replay at full
//!   speed) or drops whole intervals, counted and logged, that R then reports missing. R holds
//!   at most its own `--queue` intervals plus S's window. A peer that sends beyond the window is
//!   refused.
//!
//! - **Resumable**: a broken connection does not end the run. S keeps capturing, connects again
//!   and sends `Resume` (where R released it, where its live capture opened), then announces
//!   again, synopses and all, what R had not finished: S keeps an interval's one-way payloads
//!   and RDA synopses until R releases it (at most the window). Only the RDA exchanges under way
//!   are lost (R reports them failed; S will not start them again). R, the same process or a
//!   restarted one, goes on from there and reports missing what a restarted agent was not
//!   running for ([`crate::join`]: `forget`, `restart`, `reported_below`).
//!
//! R writes one JSON line per interval as it is decided (in interval order) and a summary line.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, bounded, select, unbounded};
use hashbrown::HashMap;
use owl_core::cut::{Cut, CutTally, IntervalCut, PointCut, window_start};
use owl_core::flow_class::{
    ClassBook, ClassDelays, ClassTap, ClassTapMethod, DEFAULT_MAX_CLASSES, DEFAULT_TAP_CAPACITY,
};
use owl_core::interval::Intervals;
use owl_core::method::{Estimate, Method, PointSynopsis, Role, downcast};
use owl_core::pipeline::Synopses;
use owl_core::rda::Synopsis as RdaSynopsis;
use owl_core::rda::session::{Decoder, Message, Responder, Step};
use serde::Serialize;

use crate::capture::Backend;
use crate::capture::{self, CaptureOptions, CaptureSummary, Closed, Handoff, Input};
use crate::clock::{self, ClockFilter, ClockReport};
use crate::config::AgentConfig;
use crate::filter::Filter;
use crate::frame::{HEADER_BYTES, MAX_FRAME, TAG_BYTES};
use crate::join::{Held, Join, RECEIVER, SENDER, Verdict};
use crate::key::Key;
use crate::link::{self, Link, LinkError, LinkReader, LinkWriter, PeerRole};
use crate::protocol::{Lost, Msg, kind};

/// Largest payload a frame carries (what a synopsis may be).
pub const MAX_PAYLOAD: usize = MAX_FRAME - HEADER_BYTES - TAG_BYTES - 16;

/// Everything an agent runs with.
#[derive(Clone)]
pub struct AgentOptions {
    pub methods: Vec<Arc<dyn Method>>,
    pub intervals: Intervals,
    /// How both points cut intervals ([`owl_core::cut`]).
    pub cut: Cut,
    pub identity_seed: u64,
    /// `--identity-bytes`: identify packets on their first this many IP bytes.
    pub identity_bytes: Option<u32>,
    pub disorder_ns: u64,
    pub input: Input,
    /// Only the packets this selects are measured.
    pub filter: Option<Filter>,
    /// Live capture: stop at the end of the current interval once this is set.
    pub stop: Option<&'static AtomicBool>,
    /// Live capture: stop after this long.
    pub duration: Option<Duration>,
    /// Intervals of synopses the capture may hand over before it waits or drops (and, at R,
    /// the window S may have outstanding).
    pub queue: usize,
    /// How long S keeps trying to reach R after their connection broke, and how long R, once
    /// its capture is done, waits for a sender whose connection broke.
    pub patience: Duration,
    pub key: Key,
    /// This agent's name in the handshake and logs (the pair label).
    pub name: String,
    /// The receiver breaks the recovered delays down by flow class
    /// ([`owl_core::flow_class`]): its capture keeps a class tap beside the synopses.
    pub per_class: bool,
    pub log: Arc<dyn Fn(&str) + Send + Sync>,
}

impl AgentOptions {
    /// What this agent offers the other in the handshake.
    fn config(&self) -> AgentConfig {
        // the kernel pre-filter of a libpcap capture
        let bpf = match &self.input {
            Input::Live {
                backend: Backend::Pcap(p),
                ..
            } => p.bpf.as_deref(),
            _ => None,
        };
        AgentConfig::of(
            &self.methods,
            self.intervals,
            self.identity_seed,
            self.identity_bytes,
            self.filter.as_ref(),
            bpf,
            self.cut,
        )
    }
}

/// Why an agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    Link(#[from] LinkError),
    #[error("{0}")]
    Capture(String),
    #[error("protocol error from the peer: {0}")]
    Protocol(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl AgentError {
    /// The connection broke (the peer went away, or the network): worth connecting again.
    /// A refusal, a failed authentication or a protocol error is not.
    pub fn is_break(&self) -> bool {
        use crate::frame::FrameError;
        matches!(
            self,
            AgentError::Io(_)
                | AgentError::Link(LinkError::Frame(
                    FrameError::Io(_) | FrameError::Closed | FrameError::Truncated { .. }
                ))
        )
    }
}

/// RDA's configuration if `m` is one of the RDA methods (the only ones with a round trip).
fn rda_config(m: &dyn Method) -> Option<owl_core::rda::Config> {
    if m.name() != owl_core::rda::method::LATE.name && m.name() != owl_core::rda::method::FIXED.name
    {
        return None;
    }
    let pairs: Vec<(String, String)> = m
        .config()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    owl_core::rda::Config::from_pairs(&pairs).ok()
}

/// What the reader thread passes on: a message, or why the connection ended.
type Incoming = Result<Msg, AgentError>;

fn spawn_reader(mut r: LinkReader, read: Arc<AtomicU64>) -> Receiver<Incoming> {
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        loop {
            read.store(r.bytes, Ordering::Relaxed);
            let m = r.recv().map_err(AgentError::from).and_then(|f| {
                let at = matches!(f.kind, kind::PING | kind::PONG).then(clock::now_ns);
                let mut m = Msg::decode(f.kind, &f.payload)
                    .map_err(|e| AgentError::Protocol(e.to_string()))?;
                // the clock exchange's arrival times are taken here, not when the agent's
                // loop gets to the message
                if let (Msg::Ping { received_ns, .. } | Msg::Pong { received_ns, .. }, Some(at)) =
                    (&mut m, at)
                {
                    *received_ns = at;
                }
                Ok(m)
            });
            let end = m.is_err();
            if tx.send(m).is_err() || end {
                break;
            }
        }
    });
    rx
}

fn send(w: &mut LinkWriter, m: &Msg) -> Result<(), AgentError> {
    let (k, p) = m.encode();
    w.send(k, &p)?;
    Ok(())
}

/// What the sender did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SenderSummary {
    pub intervals: u64,
    pub dropped: u64,
    /// Connections to the receiver that broke (and were made again).
    pub reconnects: u64,
    /// RDA exchanges under way when a connection broke (R reports them failed).
    pub lost_in_exchange: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

/// Connect to `peer`, retrying until `patience` has passed (the receiver may start later).
pub fn connect_with_patience(peer: &str, patience: Duration) -> Result<TcpStream, AgentError> {
    let start = Instant::now();
    let addrs: Vec<SocketAddr> = peer
        .to_socket_addrs()
        .map_err(|e| AgentError::Capture(format!("--peer {peer}: {e}")))?
        .collect();
    loop {
        let mut last = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, Duration::from_secs(2)) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        if start.elapsed() >= patience {
            let e = last
                .map(|e| e.to_string())
                .unwrap_or_else(|| "no address".into());
            return Err(AgentError::Capture(format!(
                "cannot connect to the receiver at {peer} within {} s: {e}",
                patience.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The sender point: connect, agree, then exchange every interval until R says goodbye. When
/// the connection breaks, S keeps capturing (into its bounded hand-off), connects again with
/// `connect`, says where it resumes, and announces again, whole, what R had not released
/// (R's side of it: [`crate::join`]).
pub fn run_sender(
    o: AgentOptions,
    connect: &mut dyn FnMut() -> Result<TcpStream, AgentError>,
) -> Result<SenderSummary, AgentError> {
    let (handoff, wake) = Handoff::new(o.queue);
    let mut s = SenderState {
        rda: o.methods.iter().map(|m| rda_config(&**m)).collect(),
        methods: o.methods.clone(),
        window: 1,
        backlog: VecDeque::new(),
        relost: VecDeque::new(),
        announced: VecDeque::new(),
        held: BTreeMap::new(),
        decoders: HashMap::new(),
        broken: hashbrown::HashSet::new(),
        capture_below: 0,
        capture_done: None,
        sent_below: 0,
        done_sent: false,
        released: None,
        summary: SenderSummary::default(),
        handoff: handoff.clone(),
    };
    let mut capturing = false;
    loop {
        let stream = connect()?;
        let (mut writer, window, rx, read) = match sender_handshake(&o, stream) {
            Ok(x) => x,
            // the receiver went away again mid-handshake: try again
            Err(e) if capturing && e.is_break() => {
                (o.log)(&format!(
                    "the receiver's connection broke in the handshake: {e}"
                ));
                continue;
            }
            Err(e) => return Err(e),
        };
        s.window = window;
        if !capturing {
            capture::start(capture_options(&o, Role::Sender), handoff.clone());
            capturing = true;
        }
        // where a live capture started: a receiver that measured with an earlier sender
        // process reports what lies before it missing
        let started = match o.input {
            Input::Live { .. } => handoff.wait_started(link::HANDSHAKE_TIMEOUT),
            Input::Replay { .. } => None,
        };
        send(
            &mut writer,
            &Msg::Resume {
                released: s.released,
                started,
            },
        )?;
        let ended = s.exchange(&mut writer, &rx, &wake);
        s.summary.bytes_received += read.load(Ordering::Relaxed);
        s.summary.bytes_sent += writer.bytes;
        match ended {
            Ok(()) => {
                s.summary.dropped = handoff.dropped();
                return Ok(s.summary);
            }
            Err(e) if e.is_break() => {
                writer.shutdown();
                let n = s.disconnected();
                s.summary.reconnects += 1;
                (o.log)(&format!(
                    "the connection to the receiver broke ({e}); connecting again ({n} intervals not yet finished are sent again)"
                ));
            }
            Err(e) => return Err(e),
        }
    }
}

/// S's side of the handshake: the link, R's window, and the reader of R's messages.
#[allow(clippy::type_complexity)]
fn sender_handshake(
    o: &AgentOptions,
    stream: TcpStream,
) -> Result<(LinkWriter, usize, Receiver<Incoming>, Arc<AtomicU64>), AgentError> {
    let Link {
        reader, mut writer, ..
    } = link::connect(stream, &o.key, PeerRole::Sender, &o.name)?;
    send(&mut writer, &Msg::Config(o.config()))?;
    let read = Arc::new(AtomicU64::new(0));
    let rx = spawn_reader(reader, read.clone());
    let window = match rx.recv() {
        Ok(Ok(Msg::Accept { window })) => window.max(1) as usize,
        Ok(Ok(m)) => {
            return Err(AgentError::Protocol(format!(
                "expected accept, got {}",
                m.name()
            )));
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(AgentError::Protocol("the connection ended".into())),
    };
    Ok((writer, window, rx, read))
}

fn capture_options(o: &AgentOptions, role: Role) -> CaptureOptions {
    CaptureOptions {
        input: o.input.clone(),
        filter: o.filter.clone(),
        stop: o.stop,
        duration: o.duration,
        role,
        intervals: o.intervals,
        cut: o.cut,
        disorder_ns: o.disorder_ns,
        identity_seed: o.identity_seed,
        identity_bytes: o.identity_bytes,
        methods: {
            let mut m = o.methods.clone();
            if o.per_class && role == Role::Receiver {
                // the last synopsis of each interval: ReceiverState::start takes it
                m.push(Arc::new(ClassTapMethod {
                    capacity: DEFAULT_TAP_CAPACITY,
                }));
            }
            m
        },
        log: o.log.clone(),
    }
}

struct SenderState {
    methods: Vec<Arc<dyn Method>>,
    rda: Vec<Option<owl_core::rda::Config>>,
    window: usize,
    /// Closed intervals not yet announced (`None`: dropped).
    backlog: VecDeque<Closed>,
    /// Announced on a connection that broke and not released: announced again, whole.
    relost: VecDeque<Announced>,
    /// Announced and not released.
    announced: VecDeque<Announced>,
    /// RDA synopses of announced intervals, by method, until R starts their exchange.
    held: BTreeMap<u64, Vec<Option<Box<dyn PointSynopsis>>>>,
    decoders: HashMap<(u64, u16), Decoder<Box<RdaSynopsis>>>,
    /// RDA exchanges that broke with a connection (their synopsis is gone), until released.
    broken: hashbrown::HashSet<(u64, u16)>,
    capture_below: u64,
    capture_done: Option<CaptureSummary>,
    sent_below: u64,
    done_sent: bool,
    /// R released every interval below this (on this connection or an earlier one).
    released: Option<u64>,
    summary: SenderSummary,
    handoff: Arc<Handoff>,
}

/// An interval S announced.
struct Announced {
    index: u64,
    /// Whether it holds a hand-off slot (its synopses were kept).
    slot: bool,
    lost: Option<Lost>,
    packets: u64,
    kernel_drops: Option<u64>,
    /// A delimiter cut: S's delimiters of its start and of its end.
    delimiters: Option<(Vec<u64>, Vec<u64>)>,
    /// Its one-way methods' frames (synopses, or why one could not be sent), kept until R
    /// releases the interval, to send again after a broken connection.
    frames: Vec<Msg>,
}

impl SenderState {
    /// Exchange on one connection until R says goodbye (`Ok`) or the connection ends.
    fn exchange(
        &mut self,
        w: &mut LinkWriter,
        rx: &Receiver<Incoming>,
        wake: &Receiver<()>,
    ) -> Result<(), AgentError> {
        self.pump(w)?;
        loop {
            select! {
                recv(wake) -> _ => {
                    let t = self.handoff.take();
                    self.summary.intervals += t.closed.len() as u64;
                    self.backlog.extend(t.closed);
                    self.capture_below = self.capture_below.max(t.below);
                    if let Some(d) = t.done {
                        self.capture_done = Some(d.map_err(AgentError::Capture)?);
                    }
                }
                recv(rx) -> m => {
                    let m = m.map_err(|_| AgentError::Protocol("the connection ended".into()))??;
                    if self.on_peer(w, m)? {
                        return Ok(());
                    }
                }
            }
            self.pump(w)?;
        }
    }

    /// The connection broke: what R had not released is announced again on the next
    /// connection, whole — its one-way synopses sent again, its RDA synopses still held for an
    /// exchange R has not started — except the RDA exchanges under way, which went with the
    /// connection: R reports those failed, and S refuses to start them again. Returns how many
    /// intervals are announced again.
    fn disconnected(&mut self) -> usize {
        let n = self.announced.len();
        self.relost.extend(self.announced.drain(..));
        self.summary.lost_in_exchange += self.decoders.len() as u64;
        self.broken
            .extend(self.decoders.drain().map(|(key, _)| key));
        self.sent_below = 0;
        self.done_sent = false;
        n
    }

    /// Announce what the window allows, then where S's stream is.
    ///
    /// Each interval is counted as announced before its first frame is sent: when a send fails
    /// part of the way, it is announced again, whole, on the next connection (never skipped).
    fn pump(&mut self, w: &mut LinkWriter) -> Result<(), AgentError> {
        while self.announced.len() < self.window {
            let Some(a) = self.relost.pop_front() else {
                break;
            };
            self.announced.push_back(a);
            let a = self.announced.back().expect("pushed");
            for m in &a.frames {
                send(w, m)?;
            }
            send(
                w,
                &Msg::Have {
                    interval: a.index,
                    lost: a.lost,
                    packets: a.packets,
                    kernel_drops: a.kernel_drops,
                    delimiters: a.delimiters.clone(),
                },
            )?;
        }
        while self.announced.len() < self.window && self.relost.is_empty() {
            let Some(c) = self.backlog.pop_front() else {
                break;
            };
            let (k, packets) = (c.index, c.packets);
            let kernel_drops = c.kernel.map(|ks| ks.drops);
            let slot = c.synopses.is_some();
            let delimiters = match c.cut {
                PointCut::Sender { start, end } => Some((start, end)),
                _ => None,
            };
            self.announced.push_back(Announced {
                index: k,
                slot,
                lost: (!slot).then_some(Lost::Overload),
                packets,
                kernel_drops,
                delimiters: delimiters.clone(),
                frames: Vec::new(),
            });
            match c.synopses {
                None => send(
                    w,
                    &Msg::Have {
                        interval: k,
                        lost: Some(Lost::Overload),
                        packets,
                        kernel_drops,
                        delimiters,
                    },
                )?,
                Some(syn) => {
                    let mut rda_held = Vec::with_capacity(syn.len());
                    let mut frames = Vec::new();
                    for (i, p) in syn.into_iter().enumerate() {
                        if self.rda[i].is_some() {
                            rda_held.push(Some(p));
                            continue;
                        }
                        rda_held.push(None);
                        let mut payload = Vec::with_capacity(p.encoded_len());
                        p.encode(&mut payload);
                        let m = if payload.len() > MAX_PAYLOAD {
                            Msg::Result {
                                interval: k,
                                method: i as u16,
                                result: Err(format!(
                                    "the sender's synopsis of {} bytes exceeds the frame cap ({MAX_PAYLOAD} bytes)",
                                    payload.len()
                                )),
                            }
                        } else {
                            Msg::Synopsis {
                                interval: k,
                                method: i as u16,
                                payload,
                            }
                        };
                        frames.push(m);
                    }
                    if rda_held.iter().any(Option::is_some) {
                        self.held.insert(k, rda_held);
                    }
                    let a = self.announced.back_mut().expect("pushed");
                    a.frames = frames;
                    for m in &a.frames {
                        send(w, m)?;
                    }
                    send(
                        w,
                        &Msg::Have {
                            interval: k,
                            lost: None,
                            packets,
                            kernel_drops,
                            delimiters,
                        },
                    )?;
                }
            }
        }
        let mut below = match self.backlog.front() {
            Some(c) => self.capture_below.min(c.index),
            None => self.capture_below,
        };
        if let Some(a) = self.relost.front() {
            below = below.min(a.index);
        }
        if self.capture_done.is_some() && self.backlog.is_empty() && self.relost.is_empty() {
            if !self.done_sent {
                send(w, &Msg::Done)?;
                self.done_sent = true;
            }
        } else if below > self.sent_below {
            send(w, &Msg::Below(below))?;
            self.sent_below = below;
        }
        Ok(())
    }

    /// One message from R; `true` once R has said goodbye.
    fn on_peer(&mut self, w: &mut LinkWriter, m: Msg) -> Result<bool, AgentError> {
        match m {
            Msg::Rda {
                interval,
                method,
                message,
            } => self.on_rda(w, interval, method, &message)?,
            Msg::Release(n) => {
                let mut slots = 0;
                while self.announced.front().is_some_and(|a| a.index < n) {
                    let a = self.announced.pop_front().expect("checked");
                    slots += usize::from(a.slot);
                }
                self.handoff.release(slots);
                self.released = Some(self.released.map_or(n, |r| r.max(n)));
                while self.held.first_key_value().is_some_and(|(k, _)| *k < n) {
                    self.held.pop_first();
                }
                self.decoders.retain(|(k, _), _| *k >= n);
                self.broken.retain(|(k, _)| *k >= n);
            }
            Msg::Bye if self.done_sent => return Ok(true),
            Msg::Ping { t1, received_ns } => {
                // R may have said goodbye and closed meanwhile: a pong that cannot be sent
                // is no error (a connection that really broke ends in the reader)
                let _ = send(
                    w,
                    &Msg::Pong {
                        t1,
                        t2: received_ns,
                        t3: clock::now_ns(),
                        received_ns: 0,
                    },
                );
            }
            m => {
                return Err(AgentError::Protocol(format!(
                    "unexpected {} message at the sender",
                    m.name()
                )));
            }
        }
        Ok(false)
    }

    fn on_rda(
        &mut self,
        w: &mut LinkWriter,
        k: u64,
        i: u16,
        message: &[u8],
    ) -> Result<(), AgentError> {
        let cfg = self.rda.get(i as usize).copied().flatten().ok_or_else(|| {
            AgentError::Protocol(format!("an RDA message for method {i}, which is not RDA"))
        })?;
        let result = (|| -> Result<Option<Result<Message, Estimate>>, String> {
            let msg = Message::decode(&cfg, message).map_err(|e| e.to_string())?;
            if self.broken.contains(&(k, i)) {
                return Err(format!(
                    "rda: the exchange of interval {k} broke with the connection, and the sender's synopsis went with it"
                ));
            }
            if !self.decoders.contains_key(&(k, i)) {
                // R starts the exchange of k: S's synopsis, or an empty one if S had no
                // packet in k
                let syn = self
                    .held
                    .get_mut(&k)
                    .and_then(|v| v.get_mut(i as usize))
                    .and_then(Option::take)
                    .unwrap_or_else(|| self.methods[i as usize].new_point(Role::Sender));
                let syn = downcast::<RdaSynopsis>(syn, "rda").map_err(|e| e.to_string())?;
                let d = Decoder::new(syn).map_err(|e| e.to_string())?;
                self.decoders.insert((k, i), d);
            }
            let d = self.decoders.get_mut(&(k, i)).expect("inserted");
            match d.on(msg).map_err(|e| e.to_string())? {
                Step::Send(m) => Ok(Some(Ok(m))),
                Step::Done(rec) => {
                    self.decoders.remove(&(k, i));
                    Ok(Some(Err(rec.to_estimate(&cfg))))
                }
            }
        })();
        // Ok(Some(Ok(m))): answer R with m; Ok(Some(Err(e))): the interval's estimate
        match result {
            Ok(Some(Err(e))) => send_result(w, k, i, Ok(Box::new(e))),
            Ok(Some(Ok(m))) => {
                let mut b = Vec::new();
                m.encode(&mut b);
                if b.len() > MAX_PAYLOAD {
                    self.decoders.remove(&(k, i));
                    return send_result(
                        w,
                        k,
                        i,
                        Err(format!(
                            "rda: the {} message of {} bytes exceeds the frame cap",
                            m.name(),
                            b.len()
                        )),
                    );
                }
                send(
                    w,
                    &Msg::Rda {
                        interval: k,
                        method: i,
                        message: b,
                    },
                )
            }
            Ok(None) => Ok(()),
            Err(e) => {
                self.decoders.remove(&(k, i));
                send_result(w, k, i, Err(e))
            }
        }
    }
}

fn send_result(
    w: &mut LinkWriter,
    k: u64,
    i: u16,
    result: Result<Box<Estimate>, String>,
) -> Result<(), AgentError> {
    send(
        w,
        &Msg::Result {
            interval: k,
            method: i,
            result,
        },
    )
}

/// What became of an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Estimated by every method (each may still report an error).
    Estimated,
    /// A point recorded it but could not keep it: no estimate.
    Missing,
    /// Only one point recorded it, before the other started or after it stopped.
    LeftOut,
}

/// One interval's result as R writes it (one JSON line).
#[derive(Clone, Debug, Serialize)]
pub struct IntervalLine {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub index: u64,
    pub start_ns: u64,
    pub status: Status,
    /// Why it is missing or left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Packets S and R recorded in the interval.
    pub sent: u64,
    pub received: u64,
    /// Live capture: packets the kernel at S and at R dropped (ring full) since that point's
    /// previous interval closed — in no synopsis; `null` for a point replaying a file or
    /// that closed no interval `index` (no packet in it). Absent when neither point has a
    /// count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_drops: Option<[Option<u64>; 2]>,
    /// The agents' clock offset (S's clock minus R's) measured over their connection, as of
    /// this line ([`crate::clock`]); absent until the first exchange is answered. Reported,
    /// never applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockReport>,
    /// How R cut its side (a delimiter cut, estimated intervals): each boundary's rule, the
    /// packets R held there and those in flight at it ([`owl_core::cut`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<IntervalCut>,
    /// One per method, in the agents' order (estimated intervals only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<MethodResult>,
}

/// Intervals `[from, to)` in which neither point recorded a packet (between two written
/// intervals: every index is accounted for).
#[derive(Clone, Debug, Serialize)]
pub struct QuietLine {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub from: u64,
    pub to: u64,
    pub start_ns: u64,
}

/// One method's result for one interval.
#[derive(Clone, Debug, Serialize)]
pub struct MethodResult {
    pub method: String,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The delays the method recovered (`sample`, `opa`, `opa-wavelet`), in the collector's
    /// fixed buckets: what `owl_one_way_delay_seconds` adds up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_histogram: Option<DelayBuckets>,
    /// With `--per-class`: the same delays by flow class, one entry per class with delays
    /// (what `owl_class_one_way_delay_seconds` adds up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class_histograms: Option<Vec<ClassBuckets>>,
    /// With `--per-class`: recovered delays of packets whose class R's tap did not hold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unclassified: Option<u64>,
}

/// One flow class's recovered delays in the collector's fixed buckets.
#[derive(Clone, Debug, Serialize)]
pub struct ClassBuckets {
    /// `udp/53`, `tcp/443`, `icmp`, or `other` (classes past the receiver's cap of
    /// [`owl_core::flow_class::DEFAULT_MAX_CLASSES`]).
    pub class: String,
    #[serde(flatten)]
    pub buckets: DelayBuckets,
}

/// Recovered delays in fixed buckets ([`crate::metrics::DELAY_BOUNDS_NS`]): `weights[j]` the
/// delivered packets (each recovered delay weighted by the packets it stands for: 1 placed by
/// OPA, 1/f sampled at fraction f) with a delay in `(le_ns[j−1], le_ns[j]]`, and one more
/// weight above the last bound; `sum_ns` their delays' weighted sum. Each delay placed within
/// α = 1 % ([`owl_core::delay_histogram`]).
#[derive(Clone, Debug, Serialize)]
pub struct DelayBuckets {
    pub le_ns: Vec<f64>,
    pub weights: Vec<f64>,
    pub sum_ns: f64,
}

impl DelayBuckets {
    fn of(e: &Estimate) -> Option<DelayBuckets> {
        DelayBuckets::of_histogram(&e.recovered.as_ref()?.histogram)
    }
    fn of_histogram(h: &owl_core::delay_histogram::DelayHistogram) -> Option<DelayBuckets> {
        if h.is_empty() {
            return None;
        }
        let le_ns = crate::metrics::DELAY_BOUNDS_NS.to_vec();
        Some(DelayBuckets {
            weights: h.weights_in(&le_ns),
            sum_ns: h.weighted_sum(),
            le_ns,
        })
    }
}

/// Where the receiver's lines also go (the collector's queue).
pub type LineSink = Box<dyn FnMut(&str) + Send>;

/// What the receiver did, written as the last line.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReceiverSummary {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Intervals estimated.
    pub intervals: u64,
    /// Intervals only S / only R recorded, before the other started or after it stopped.
    pub trimmed: [u64; 2],
    /// Intervals a point recorded and dropped (overload): reported missing.
    pub missing: u64,
    /// Intervals dropped at S and at R.
    pub dropped: [u64; 2],
    /// Connections from the sender that broke, and senders that connected after one did.
    pub reconnects: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// How the boundaries were cut (a delimiter cut).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuts: Option<CutTally>,
}

/// An interval being estimated (RDA's exchanges in flight).
struct Work {
    start_ns: u64,
    packets: [u64; 2],
    cut: Option<IntervalCut>,
    kernel_drops: Option<[Option<u64>; 2]>,
    results: Vec<Option<Result<Estimate, String>>>,
    responders: Vec<Option<Responder<Box<RdaSynopsis>>>>,
    /// With `--per-class`, by method: its recovered delays by class, and those in no class.
    classes: Vec<Option<(Vec<ClassBuckets>, u64)>>,
}

/// The receiver point: wait for the sender, agree, then estimate every interval. Results go to
/// `out`, one JSON line each.
pub fn run_receiver(
    o: AgentOptions,
    listener: TcpListener,
    out: &mut dyn Write,
    sink: Option<LineSink>,
) -> Result<ReceiverSummary, AgentError> {
    let cfg = o.config();
    let links = spawn_acceptor(
        listener,
        o.key.clone(),
        o.name.clone(),
        cfg,
        o.queue,
        o.log.clone(),
    );
    let (handoff, wake) = Handoff::new(o.queue);
    capture::start(capture_options(&o, Role::Receiver), handoff.clone());
    let mut r = ReceiverState {
        rda: o.methods.iter().map(|m| rda_config(&**m)).collect(),
        methods: o.methods.clone(),
        capture_methods: capture_options(&o, Role::Receiver).methods,
        intervals: o.intervals,
        window: o.queue.max(1),
        join: Join::new(),
        local: BTreeMap::new(),
        delimiters: BTreeMap::new(),
        packets: BTreeMap::new(),
        kernel_drops: BTreeMap::new(),
        remote: BTreeMap::new(),
        remote_results: BTreeMap::new(),
        outstanding: VecDeque::new(),
        work: BTreeMap::new(),
        lines: BTreeMap::new(),
        written: None,
        sink,
        released: 0,
        clock: ClockFilter::default(),
        pinging: false,
        had_sender: false,
        live: matches!(o.input, Input::Live { .. }),
        recorded: false,
        resumed: false,
        stale_below: 0,
        per_class: o.per_class,
        book: ClassBook::new(DEFAULT_MAX_CLASSES),
        log: o.log.clone(),
        summary: ReceiverSummary {
            kind: "summary",
            cuts: matches!(o.cut, Cut::Delimiter(_)).then(CutTally::default),
            ..Default::default()
        },
        handoff: handoff.clone(),
    };
    let mut writer: Option<LinkWriter> = None;
    let mut peer: Receiver<Incoming> = crossbeam_channel::never();
    let read = Arc::new(AtomicU64::new(0));
    // the bytes of a connection count into the summary when it ends
    let count = |summary: &mut ReceiverSummary, w: &LinkWriter| {
        summary.bytes_sent += w.bytes;
        summary.bytes_received += read.load(Ordering::Relaxed);
    };
    // once the capture is done and no sender is connected: when to stop waiting for one
    let mut give_up: Option<Instant> = None;
    loop {
        let patience = match give_up {
            Some(t) => crossbeam_channel::at(t),
            None => crossbeam_channel::never(),
        };
        select! {
            recv(wake) -> _ => {
                let t = handoff.take();
                if let Some(k) = t.started {
                    // where R's live capture opened: the join keeps the first it is told
                    r.join.started(RECEIVER, k);
                }
                for c in t.closed {
                    let k = c.index;
                    // before its first interval with a packet outside its windows, R's blocks
                    // hold only what it received around the boundary it started next to (a
                    // lead-in of its windows): R starts with that interval, as `owl estimate`.
                    // A live capture knows when it opened: an interval whose core it recorded
                    // (open before the window of the interval's end) is R's first even with
                    // no packet in its core, since its window holds S's packets of that
                    // interval in flight at the boundary (traffic that began just before it)
                    if !r.recorded
                        && c.packets == 0
                        && matches!(c.cut, PointCut::Receiver { .. })
                        && !t.opened_ns.is_some_and(|t0| {
                            t0 < window_start(&o.cut, &o.intervals, k.saturating_add(1))
                        })
                    {
                        if c.synopses.is_some() {
                            handoff.release(1);
                        }
                        continue;
                    }
                    r.recorded = true;
                    r.packets.entry(k).or_default()[RECEIVER] = c.packets;
                    if let Some(ks) = c.kernel {
                        r.kernel_drops.entry(k).or_default()[RECEIVER] = Some(ks.drops);
                    }
                    match c.synopses {
                        Some(s) => {
                            r.join.have(RECEIVER, k, Held::Data).map_err(AgentError::Capture)?;
                            r.local.insert(k, (s, c.cut));
                        }
                        None => {
                            r.join.have(RECEIVER, k, Held::Dropped).map_err(AgentError::Capture)?;
                            r.summary.dropped[1] += 1;
                        }
                    }
                }
                r.join.below(RECEIVER, t.below);
                if let Some(d) = t.done {
                    d.map_err(AgentError::Capture)?;
                    r.join.done(RECEIVER);
                    // a live capture stopped (signal, --duration) before any sender came:
                    // nothing can be measured any more (a replay waits for its sender)
                    if !r.had_sender && matches!(o.input, Input::Live { .. }) {
                        (o.log)("stopped before a sender connected: nothing was measured");
                        return Ok(r.summary);
                    }
                    if r.had_sender && writer.is_none() {
                        give_up = Some(Instant::now() + o.patience);
                    }
                }
            }
            recv(links) -> l => {
                let Ok(l) = l else { continue };
                if let Some(old) = writer.take() {
                    // an authenticated sender of the same configuration connects while the
                    // old connection looks open here (its end went without a word, as after a
                    // network partition): the old one is closed, the new one resumes
                    old.shutdown();
                    count(&mut r.summary, &old);
                    r.disconnected();
                    (o.log)(
                        "a sender connected while the previous connection was still open here: that one is closed (the sender sends again what this receiver has not finished; RDA exchanges under way are reported failed)",
                    );
                }
                (o.log)(&format!("the sender connected from {} (it names itself {:?})", l.peer, l.hello.name));
                read.store(0, Ordering::Relaxed);
                peer = spawn_reader(l.reader, read.clone());
                r.resumed = false;
                give_up = None;
                writer = Some(l.writer);
            }
            recv(peer) -> m => {
                let w = writer.as_mut().expect("a peer has a writer");
                let m = match m {
                    Ok(m) => m,
                    Err(_) => Err(AgentError::Protocol("the connection ended".into())),
                };
                match m {
                    Ok(m) => r.on_peer(w, m)?,
                    Err(e) if e.is_break() => {
                        w.shutdown();
                        count(&mut r.summary, w);
                        writer = None;
                        peer = crossbeam_channel::never();
                        r.disconnected();
                        (o.log)(&format!(
                            "the sender's connection broke ({e}); waiting for it to connect again (it sends again what this receiver has not finished; RDA exchanges under way are reported failed)"
                        ));
                        if r.join.is_done(RECEIVER) {
                            give_up = Some(Instant::now() + o.patience);
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            recv(patience) -> _ => {
                // the sender is gone for good: what only R holds from here on is missing
                (o.log)(&format!(
                    "no sender connected again within {} s: the intervals left are reported missing",
                    o.patience.as_secs()
                ));
                r.join.restart(SENDER, r.join.decided_below(), None);
                r.join.done(SENDER);
                give_up = None;
            }
        }
        if writer.is_some() && !r.resumed {
            // the connection's first message, Resume, has not come yet
            continue;
        }
        r.advance(writer.as_mut(), out)?;
        if writer.is_some() && r.sender_through() && !r.join.finished() {
            // the sender stopped (--duration, a signal, the end of its replay) and every
            // interval it recorded is reported and released: it may exit now, while this
            // receiver goes on alone until its own capture ends (what only R records from here
            // on is a lead-out)
            let mut w = writer.take().expect("checked");
            send(&mut w, &Msg::Bye)?;
            count(&mut r.summary, &w);
            w.shutdown();
            peer = crossbeam_channel::never();
            (o.log)(
                "the sender is done and every interval it recorded is reported: it exits; this receiver goes on until its capture ends",
            );
        }
        if r.join.finished() && r.work.is_empty() {
            if let Some(w) = writer.as_mut() {
                send(w, &Msg::Bye)?;
                count(&mut r.summary, w);
            }
            return Ok(r.summary);
        }
    }
}

/// Accept connections on their own thread: handshake and configuration check, each connection
/// at once under [`crate::admission`]'s cap and deadline (idle or trickling connections cannot
/// hold the port), then hand each accepted link to the receiver. A refused peer gets one line
/// of reason, and so does the log.
fn spawn_acceptor(
    listener: TcpListener,
    key: Key,
    name: String,
    cfg: AgentConfig,
    window: usize,
    log: Arc<dyn Fn(&str) + Send + Sync>,
) -> Receiver<Link> {
    let (tx, rx) = bounded(1);
    std::thread::spawn(move || {
        crate::admission::serve(
            listener,
            crate::admission::Admission::default(),
            move |stream| admit(stream, &key, &name, &cfg, window),
            move |l| {
                // the receiver takes one link at a time; it is gone once the agent is done
                let _ = tx.send(l);
            },
            log,
        )
    });
    rx
}

fn admit(
    stream: TcpStream,
    key: &Key,
    name: &str,
    cfg: &AgentConfig,
    window: usize,
) -> Result<Link, AgentError> {
    stream.set_read_timeout(Some(link::HANDSHAKE_TIMEOUT))?;
    let mut l = link::accept(stream.try_clone()?, key, name)?;
    if l.hello.role != PeerRole::Sender {
        let e = format!(
            "this is a receiver agent; {} connected",
            l.hello.role.name()
        );
        l.writer.refuse(&e);
        return Err(AgentError::Protocol(e));
    }
    let f = l.reader.recv()?;
    let theirs = match Msg::decode(f.kind, &f.payload) {
        Ok(Msg::Config(c)) => c,
        Ok(m) => {
            return Err(AgentError::Protocol(format!(
                "expected config, got {}",
                m.name()
            )));
        }
        Err(e) => return Err(AgentError::Protocol(e.to_string())),
    };
    if let Err(e) = AgentConfig::check_pair(&theirs, cfg) {
        l.writer.refuse(&e);
        return Err(AgentError::Protocol(e));
    }
    send(
        &mut l.writer,
        &Msg::Accept {
            window: window.min(u32::MAX as usize) as u32,
        },
    )?;
    stream.set_read_timeout(None)?;
    Ok(l)
}

struct ReceiverState {
    methods: Vec<Arc<dyn Method>>,
    rda: Vec<Option<owl_core::rda::Config>>,
    intervals: Intervals,
    window: usize,
    join: Join,
    /// The methods R's capture runs (the agents', and the class tap after them).
    capture_methods: Vec<Arc<dyn Method>>,
    /// R's closed intervals with packets (synopses and cut data), until decided.
    local: BTreeMap<u64, (Synopses, PointCut)>,
    /// S's delimiters of each announced interval's start and end (a delimiter cut), until the
    /// interval after it is decided.
    delimiters: BTreeMap<u64, (Vec<u64>, Vec<u64>)>,
    /// Packets each point recorded in an interval, until decided.
    packets: BTreeMap<u64, [u64; 2]>,
    /// Live capture: packets each point's kernel dropped since its previous interval closed,
    /// until decided.
    kernel_drops: BTreeMap<u64, [Option<u64>; 2]>,
    /// S's payloads by interval and method, until decided.
    remote: BTreeMap<u64, Vec<Option<Vec<u8>>>>,
    /// S's results for one-way methods it could not send (too large), until decided.
    remote_results: BTreeMap<u64, Vec<(u16, String)>>,
    /// Intervals S announced and R has not released.
    outstanding: VecDeque<u64>,
    /// Intervals decided and being estimated, in order.
    work: BTreeMap<u64, Work>,
    /// Intervals decided and finished, waiting to be written in order.
    lines: BTreeMap<u64, IntervalLine>,
    /// The last interval written.
    written: Option<u64>,
    /// Where each written line also goes (the collector).
    sink: Option<LineSink>,
    released: u64,
    /// The clock-offset exchanges with S, and whether a ping is unanswered.
    clock: ClockFilter,
    pinging: bool,
    /// Whether a sender has connected to this receiver process.
    had_sender: bool,
    /// R captures an interface (not a replay).
    live: bool,
    /// R has announced an interval with a packet outside its cut windows.
    recorded: bool,
    /// Whether this connection's `Resume` came (the first message of every connection).
    resumed: bool,
    /// S announces again what it announced before its connection broke: below this, R has
    /// decided it already.
    stale_below: u64,
    /// `--per-class`, and the classes named so far (the same names interval after interval).
    per_class: bool,
    book: ClassBook,
    log: Arc<dyn Fn(&str) + Send + Sync>,
    summary: ReceiverSummary,
    handoff: Arc<Handoff>,
}

impl ReceiverState {
    /// The connection to S broke: what S announced and R has not decided is forgotten (S
    /// announces it again, as lost), and the RDA exchanges in flight fail.
    fn disconnected(&mut self) {
        self.summary.reconnects += 1;
        self.join.forget(SENDER);
        self.stale_below = self.join.decided_below();
        self.remote.clear();
        self.remote_results.clear();
        for (&k, p) in self.packets.iter_mut() {
            if k >= self.stale_below {
                p[SENDER] = 0;
            }
        }
        for (&k, d) in self.kernel_drops.iter_mut() {
            if k >= self.stale_below {
                d[SENDER] = None;
            }
        }
        self.outstanding.clear();
        for work in self.work.values_mut() {
            for (i, r) in work.results.iter_mut().enumerate() {
                if r.is_none() {
                    work.responders[i] = None;
                    *r = Some(Err(
                        "the connection to the sender broke during this exchange".into(),
                    ));
                }
            }
        }
        self.pinging = false;
        self.resumed = false;
    }

    /// The first message of a connection: where S resumes.
    fn on_resume(&mut self, released: Option<u64>, started: Option<u64>) {
        match (self.had_sender, released) {
            // a fresh pair
            (false, None) => {}
            // this receiver was restarted: a previous one released S below `n`
            (false, Some(n)) => {
                self.join.reported_below(n);
                self.join.restart(RECEIVER, n, self.handoff.started());
                self.written = n.checked_sub(1);
                (self.log)(&format!(
                    "the sender resumes at interval {n}, where a previous receiver left it{}",
                    if self.live {
                        "; until this receiver started, intervals are reported missing"
                    } else {
                        ""
                    }
                ));
            }
            // the same sender, connected again
            (true, Some(_)) => {}
            // a new sender process after one whose connection broke
            (true, None) => {
                self.join
                    .restart(SENDER, self.join.decided_below(), started);
                (self.log)(
                    "a new sender process connected: intervals from where the last one stopped until it started are reported missing",
                );
            }
        }
        self.had_sender = true;
        self.resumed = true;
    }

    fn on_peer(&mut self, w: &mut LinkWriter, m: Msg) -> Result<(), AgentError> {
        let proto = |s: String| AgentError::Protocol(s);
        match (&m, self.resumed) {
            (Msg::Resume { .. }, true) => return Err(proto("a second resume".into())),
            (Msg::Resume { released, started }, false) => {
                self.on_resume(*released, *started);
                return self.ping(w);
            }
            (m, false) => {
                return Err(proto(format!(
                    "{} before the sender said where it resumes",
                    m.name()
                )));
            }
            _ => {}
        }
        match m {
            Msg::Synopsis {
                interval,
                method,
                payload,
            } => {
                if method as usize >= self.methods.len() || self.rda[method as usize].is_some() {
                    return Err(proto(format!("a synopsis for method {method}")));
                }
                if interval < self.stale_below {
                    // sent again after a reconnect, for an interval decided here already
                    return Ok(());
                }
                if self.outstanding.len() >= self.window
                    && self.outstanding.back() != Some(&interval)
                {
                    return Err(proto(format!(
                        "interval {interval} beyond the window of {} intervals",
                        self.window
                    )));
                }
                let v = self
                    .remote
                    .entry(interval)
                    .or_insert_with(|| vec![None; self.methods.len()]);
                v[method as usize] = Some(payload);
            }
            Msg::Have {
                interval,
                lost,
                packets,
                kernel_drops,
                delimiters,
            } => {
                if let Some(d) = delimiters {
                    self.delimiters.insert(interval, d);
                }
                if self.outstanding.len() >= self.window {
                    return Err(proto(format!(
                        "interval {interval} beyond the window of {} intervals",
                        self.window
                    )));
                }
                if interval < self.stale_below {
                    // announced again after a reconnect, and decided here already: S frees
                    // it on the next release
                    self.outstanding.push_back(interval);
                    return Ok(());
                }
                let h = match lost {
                    None => Held::Data,
                    Some(Lost::Overload) => Held::Dropped,
                };
                self.join.have(SENDER, interval, h).map_err(proto)?;
                self.packets.entry(interval).or_default()[SENDER] = packets;
                if let Some(d) = kernel_drops {
                    self.kernel_drops.entry(interval).or_default()[SENDER] = Some(d);
                }
                if lost == Some(Lost::Overload) {
                    self.summary.dropped[0] += 1;
                }
                self.outstanding.push_back(interval);
            }
            Msg::Below(n) => self.join.below(SENDER, n),
            Msg::Done => self.join.done(SENDER),
            Msg::Rda {
                interval,
                method,
                message,
            } => {
                let cfg = self
                    .rda
                    .get(method as usize)
                    .copied()
                    .flatten()
                    .ok_or_else(|| proto(format!("an RDA message for method {method}")))?;
                let Some(work) = self.work.get_mut(&interval) else {
                    return Err(proto(format!(
                        "an RDA message for interval {interval}, not in exchange"
                    )));
                };
                let i = method as usize;
                let Some(resp) = work.responders[i].as_mut() else {
                    // the exchange already ended here (an error); S's decoder is freed on release
                    return Ok(());
                };
                let answer = Message::decode(&cfg, &message)
                    .map_err(|e| e.to_string())
                    .and_then(|m| resp.on(m).map_err(|e| e.to_string()));
                match answer {
                    Ok(a) => {
                        let mut b = Vec::new();
                        a.encode(&mut b);
                        if b.len() > MAX_PAYLOAD {
                            work.responders[i] = None;
                            work.results[i] = Some(Err(format!(
                                "rda: the {} message of {} bytes exceeds the frame cap",
                                a.name(),
                                b.len()
                            )));
                        } else {
                            send(
                                w,
                                &Msg::Rda {
                                    interval,
                                    method,
                                    message: b,
                                },
                            )?;
                        }
                    }
                    Err(e) => {
                        work.responders[i] = None;
                        work.results[i] = Some(Err(e));
                    }
                }
            }
            Msg::Result {
                interval,
                method,
                result,
            } => {
                let i = method as usize;
                if i >= self.methods.len() {
                    return Err(proto(format!("a result for method {method}")));
                }
                match self.work.get_mut(&interval) {
                    Some(work) => {
                        work.responders[i] = None;
                        if work.results[i].is_none() {
                            work.results[i] = Some(result.map(|e| *e));
                        }
                    }
                    // sent again after a reconnect, for an interval finished here already
                    None if interval < self.stale_below => {}
                    None => {
                        // a one-way synopsis S could not send, before the interval is decided
                        let e = result.err().ok_or_else(|| {
                            proto(format!(
                                "an estimate for interval {interval} before its exchange"
                            ))
                        })?;
                        self.remote_results
                            .entry(interval)
                            .or_default()
                            .push((method, e));
                    }
                }
            }
            Msg::Pong {
                t1,
                t2,
                t3,
                received_ns,
            } => {
                self.clock.add(t1, t2, t3, received_ns);
                self.pinging = false;
            }
            m => {
                return Err(proto(format!(
                    "unexpected {} message at the receiver",
                    m.name()
                )));
            }
        }
        Ok(())
    }

    /// Decide what can be decided, start its estimation, write what is complete, release.
    fn advance(
        &mut self,
        mut w: Option<&mut LinkWriter>,
        out: &mut dyn Write,
    ) -> Result<(), AgentError> {
        while let Some((k, v)) = self.join.decide() {
            // S's delimiters are needed until the intervals on either side are decided
            while let Some((&j, _)) = self.delimiters.first_key_value() {
                if j + 1 >= k {
                    break;
                }
                self.delimiters.pop_first();
            }
            let local = self.local.remove(&k);
            let remote = self.remote.remove(&k);
            let errors = self.remote_results.remove(&k).unwrap_or_default();
            let [sent, received] = self.packets.remove(&k).unwrap_or_default();
            let kernel_drops = self.kernel_drops.remove(&k);
            if local.is_some() {
                self.handoff.release(1);
            }
            let line = |status, reason: &str| IntervalLine {
                kind: "interval",
                index: k,
                start_ns: self.intervals.start_ns(k),
                status,
                reason: Some(reason.to_string()),
                sent,
                received,
                kernel_drops,
                clock: None,
                cut: None,
                methods: Vec::new(),
            };
            match v {
                // R held packets around a boundary of an interval S had none of, and recorded
                // none outside its windows: nothing to measure, no line (as `owl estimate`)
                Verdict::Trimmed { sender: false }
                    if received == 0 && matches!(&local, Some((_, PointCut::Receiver { .. }))) => {}
                Verdict::Trimmed { sender } => {
                    self.summary.trimmed[usize::from(!sender)] += 1;
                    let l = line(
                        Status::LeftOut,
                        if sender {
                            "only the sender recorded it, before the receiver started or after it stopped"
                        } else {
                            "only the receiver recorded it, before the sender started or after it stopped"
                        },
                    );
                    self.finish(k, l);
                }
                Verdict::Missing(why) => {
                    self.summary.missing += 1;
                    let l = line(Status::Missing, why.reason());
                    self.finish(k, l);
                }
                // a previous receiver wrote it
                Verdict::Reported => {}
                Verdict::Estimate { .. } => {
                    self.start(w.as_deref_mut(), k, local, remote, errors, [sent, received])?;
                    if let Some(work) = self.work.get_mut(&k) {
                        work.kernel_drops = kernel_drops;
                    }
                }
            }
        }
        // completed intervals, in order
        while let Some((&k, work)) = self.work.first_key_value() {
            if work.results.iter().any(Option::is_none) {
                break;
            }
            let (_, work) = self.work.pop_first().expect("checked");
            self.summary.intervals += 1;
            let methods = self
                .methods
                .iter()
                .zip(work.results)
                .zip(work.classes)
                .map(|((m, r), classes)| {
                    let (estimate, error) = match r.expect("complete") {
                        Ok(e) => (Some(e), None),
                        Err(e) => (None, Some(e)),
                    };
                    // a method that failed shows no class histogram either
                    let classes = classes.filter(|_| estimate.is_some());
                    MethodResult {
                        method: m.name().to_string(),
                        delay_histogram: estimate.as_ref().and_then(DelayBuckets::of),
                        unclassified: classes.as_ref().map(|c| c.1),
                        class_histograms: classes.map(|c| c.0),
                        estimate,
                        error,
                    }
                })
                .collect();
            self.finish(
                k,
                IntervalLine {
                    kind: "interval",
                    index: k,
                    start_ns: work.start_ns,
                    status: Status::Estimated,
                    reason: None,
                    sent: work.packets[0],
                    received: work.packets[1],
                    kernel_drops: work.kernel_drops,
                    clock: None,
                    cut: work.cut,
                    methods,
                },
            );
        }
        self.flush(w, out)
    }

    /// Interval `k` is decided: its line waits for the intervals before it still in exchange.
    fn finish(&mut self, k: u64, line: IntervalLine) {
        self.lines.insert(k, line);
    }

    /// Write every decided interval below the oldest one still in exchange (with the quiet
    /// stretch before it, if any), hand it to the sink, and release it.
    fn flush(&mut self, w: Option<&mut LinkWriter>, out: &mut dyn Write) -> Result<(), AgentError> {
        let limit = self.work.keys().next().copied().unwrap_or(u64::MAX);
        let mut release = None;
        while let Some((&k, _)) = self.lines.first_key_value() {
            if k >= limit {
                break;
            }
            let (_, mut line) = self.lines.pop_first().expect("checked");
            line.clock = self.clock.report();
            if let Some(p) = self.written
                && p + 1 < k
            {
                let q = QuietLine {
                    kind: "quiet",
                    from: p + 1,
                    to: k,
                    start_ns: self.intervals.start_ns(p + 1),
                };
                self.emit(
                    out,
                    &serde_json::to_string(&q).map_err(std::io::Error::other)?,
                )?;
            }
            self.emit(
                out,
                &serde_json::to_string(&line).map_err(std::io::Error::other)?,
            )?;
            self.written = Some(k);
            release = Some(k + 1);
        }
        out.flush()?;
        if let Some(n) = release
            && n > self.released
        {
            self.released = n;
            while self.outstanding.front().is_some_and(|&k| k < n) {
                self.outstanding.pop_front();
            }
            if let Some(w) = w {
                send(w, &Msg::Release(n))?;
                // one clock exchange at a time, another after each batch of lines
                self.ping(w)?;
            }
        }
        Ok(())
    }

    /// S is done, and nothing of it is left here: every interval it announced is decided and
    /// released, and no work (an RDA exchange) is under way.
    fn sender_through(&self) -> bool {
        self.join.is_through(SENDER) && self.outstanding.is_empty() && self.work.is_empty()
    }

    /// Ask S for the time, unless a ping is still unanswered.
    fn ping(&mut self, w: &mut LinkWriter) -> Result<(), AgentError> {
        if !self.pinging && !self.join.finished() {
            send(
                w,
                &Msg::Ping {
                    t1: clock::now_ns(),
                    received_ns: 0,
                },
            )?;
            self.pinging = true;
        }
        Ok(())
    }

    fn emit(&mut self, out: &mut dyn Write, line: &str) -> Result<(), AgentError> {
        writeln!(out, "{line}")?;
        if let Some(sink) = self.sink.as_mut() {
            sink(line);
        }
        Ok(())
    }

    /// Estimate interval `k`: one-way methods at once, RDA by starting its exchange.
    /// R's synopses of interval `k` cut at S's delimiters (a delimiter cut): its core, the
    /// packets it held after the start's cut and before the end's ([`owl_core::cut`], the
    /// rule `owl estimate` applies to two files). S's delimiters are those S announced with
    /// `k`, or where S has no interval `k`, its previous interval's for the start (none
    /// announced: S sent nothing there) and its next one's for the end (not announced yet:
    /// R's clock cuts, and the line says so). A synopsis that cannot be assembled is an error
    /// of its method.
    #[allow(clippy::type_complexity)]
    fn cut_local(
        &self,
        k: u64,
        synopses: Synopses,
        cut: PointCut,
    ) -> (
        Vec<Result<Box<dyn PointSynopsis>, String>>,
        u64,
        Option<IntervalCut>,
    ) {
        let PointCut::Receiver { head, tail } = cut else {
            return (synopses.into_iter().map(Ok).collect(), 0, None);
        };
        let (start, end) = match self.delimiters.get(&k) {
            Some((a, b)) => (Some(a.clone()), Some(b.clone())),
            None => (
                Some(
                    k.checked_sub(1)
                        .and_then(|p| self.delimiters.get(&p))
                        .map(|d| d.1.clone())
                        .unwrap_or_default(),
                ),
                self.delimiters.get(&(k + 1)).map(|d| d.0.clone()),
            ),
        };
        let split = owl_core::cut::split(
            &self.intervals,
            k,
            &head,
            &tail,
            start.as_deref(),
            end.as_deref(),
        );
        let assembled = self
            .capture_methods
            .iter()
            .zip(synopses)
            .map(|(m, core)| {
                owl_core::cut::assemble(&**m, Some(core), &split).map_err(|e| e.to_string())
            })
            .collect();
        (
            assembled,
            split.packets(),
            Some(IntervalCut {
                start: split.start,
                end: split.end,
                held_in: split.packets(),
            }),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn start(
        &mut self,
        mut w: Option<&mut LinkWriter>,
        k: u64,
        local: Option<(Synopses, PointCut)>,
        remote: Option<Vec<Option<Vec<u8>>>>,
        errors: Vec<(u16, String)>,
        mut packets: [u64; 2],
    ) -> Result<(), AgentError> {
        let n = self.methods.len();
        let mut failed: Vec<(usize, String)> = Vec::new();
        let (mut local, cut): (Vec<Option<Box<dyn PointSynopsis>>>, _) = match local {
            Some((s, c)) => {
                let (assembled, held_in, cut) = self.cut_local(k, s, c);
                packets[1] += held_in;
                let local = assembled
                    .into_iter()
                    .enumerate()
                    .map(|(i, r)| match r {
                        Ok(s) => Some(s),
                        Err(e) => {
                            failed.push((i, e));
                            None
                        }
                    })
                    .collect();
                (local, cut)
            }
            None => ((0..n).map(|_| None).collect(), None),
        };
        if let (Some(t), Some(c)) = (self.summary.cuts.as_mut(), &cut) {
            t.add(k, c);
        }
        if packets == [0, 0] && cut.is_some() {
            // only R held packets here, and the cut put every one in a neighbouring interval:
            // nothing to measure (no line, as `owl estimate` writes none; a later line's quiet
            // stretch covers it)
            return Ok(());
        }
        let mut remote = remote.unwrap_or_else(|| vec![None; n]);
        let mut work = Work {
            start_ns: self.intervals.start_ns(k),
            packets,
            cut,
            kernel_drops: None,
            results: (0..n).map(|_| None).collect(),
            responders: (0..n).map(|_| None).collect(),
            classes: (0..n).map(|_| None).collect(),
        };
        for (i, e) in failed {
            if let Some(r) = work.results.get_mut(i) {
                *r = Some(Err(format!("the receiver's side at the cut: {e}")));
            }
        }
        // the class tap is the synopsis after the methods' (capture_options)
        let tap = match (self.per_class, local.len() > n) {
            (true, true) => local
                .pop()
                .flatten()
                .and_then(|t| downcast::<ClassTap>(t, "class-tap").ok()),
            _ => None,
        };
        let received = tap.as_ref().map(|t| self.book.note(t));
        if let Some(t) = &tap
            && (t.overflow > 0 || t.collisions > 0)
        {
            (self.log)(&format!(
                "interval {k}: {} packets past the class tap's {DEFAULT_TAP_CAPACITY} identities and {} identities seen with two classes: their delays are in no class",
                t.overflow, t.collisions
            ));
        }
        for (i, e) in errors {
            if let Some(r) = work.results.get_mut(i as usize) {
                *r = Some(Err(e));
            }
        }
        for i in 0..n {
            if work.results[i].is_some() {
                continue;
            }
            let m = &self.methods[i];
            let r = local[i]
                .take()
                .unwrap_or_else(|| m.new_point(Role::Receiver));
            if self.rda[i].is_some() {
                let started = downcast::<RdaSynopsis>(r, "rda")
                    .map_err(|e| e.to_string())
                    .and_then(|r| Responder::new(r).map_err(|e| e.to_string()));
                let Some(w) = w.as_deref_mut() else {
                    work.results[i] = Some(Err("no sender is connected".into()));
                    continue;
                };
                match started {
                    Ok((resp, first)) => {
                        let mut b = Vec::new();
                        first.encode(&mut b);
                        send(
                            w,
                            &Msg::Rda {
                                interval: k,
                                method: i as u16,
                                message: b,
                            },
                        )?;
                        work.responders[i] = Some(resp);
                    }
                    Err(e) => work.results[i] = Some(Err(e)),
                }
                continue;
            }
            let s = match remote[i].take() {
                Some(p) => m
                    .decode_point(Role::Sender, &p)
                    .map_err(|e| format!("the sender's synopsis: {e}")),
                None => Ok(m.new_point(Role::Sender)),
            };
            if let (Some(tap), Some(received), Ok(s)) = (&tap, &received, &s)
                && let Some(Ok(p)) = m.recovered_packets(&**s, &*r)
            {
                let mut c = ClassDelays::default();
                c.add_interval(&self.book, tap, received, &p);
                let buckets = (0..self.book.slots())
                    .filter_map(|slot| {
                        Some(ClassBuckets {
                            class: self.book.label(slot),
                            buckets: DelayBuckets::of_histogram(&c.slot(slot)?.histogram)?,
                        })
                    })
                    .collect();
                work.classes[i] = Some((buckets, c.unclassified));
            }
            let cut = work.cut;
            work.results[i] = Some(
                s.and_then(|s| m.estimate(s, r).map_err(|e| e.to_string()))
                    .map(|mut e| {
                        owl_core::pipeline::withhold_unpaired(&**m, cut.as_ref(), &mut e);
                        e
                    }),
            );
        }
        self.work.insert(k, work);
        Ok(())
    }
}
