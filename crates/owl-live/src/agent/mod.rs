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
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, select, unbounded};
use hashbrown::HashMap;
use owl_core::cut::{Cut, CutTally, IntervalCut, Named, Neighbours, PointCut, window_start};
use owl_core::flow_class::{
    ClassBook, ClassDelays, ClassTapMethod, DEFAULT_MAX_CLASSES, DEFAULT_TAP_CAPACITY,
};
use owl_core::interval::Intervals;
use owl_core::method::{Estimate, Method, PointSynopsis, Role, receiver_of, sender_of};
use owl_core::pipeline::Synopses;
use owl_core::rda::Synopsis as RdaSynopsis;
use owl_core::rda::method::RdaMethod;
use owl_core::rda::session::{Decoder, Message, Responder, Step};
use serde::Serialize;

use crate::capture::Backend;
use crate::capture::{self, CaptureOptions, CaptureSummary, Closed, Handoff, Input, Tap};
use crate::clock::{self, ClockFilter};
use crate::config::AgentConfig;
use crate::filter::Filter;
use crate::frame::{HEADER_BYTES, MAX_FRAME, TAG_BYTES};
use crate::join::{Held, Join, RECEIVER, SENDER, Verdict};
use crate::key::Key;
use crate::link::{self, Link, LinkError, LinkReader, LinkWriter, PeerRole};
use crate::protocol::{Lost, Msg, kind};

mod rda;
mod receiver;
mod sender;

pub use crate::lines::*;
pub use receiver::{Route, receive, run_receiver, spawn_router};
pub use sender::{SenderSummary, connect_with_patience, run_sender};

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
    /// The path measured (a point's `[[path]]` name; empty: the single pair of `--role`): named
    /// in the configuration offered, and on every line R writes.
    pub path: String,
    /// The receiver breaks the recovered delays down by flow class
    /// ([`owl_core::flow_class`]): its capture keeps a class tap beside the synopses.
    pub per_class: bool,
    pub log: Arc<dyn Fn(&str) + Send + Sync>,
}

impl AgentOptions {
    /// What this agent offers the other in the handshake.
    pub fn config(&self) -> AgentConfig {
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
        .on_path(&self.path)
    }
}

/// Why an agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("{0}")]
    Link(#[from] LinkError),
    #[error("{0}")]
    Capture(#[from] crate::capture::CaptureError),
    /// A side of the join announced an interval out of order (a bug, or a hostile peer).
    #[error("{0}")]
    Join(#[from] crate::join::OutOfOrder),
    #[error("{0}")]
    Connect(#[from] link::ConnectError),
    #[error("protocol error from the peer: {0}")]
    Protocol(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl AgentError {
    /// The link broke, read or written (not an error of this agent's own files or output).
    pub fn is_link_break(&self) -> bool {
        use crate::frame::FrameError;
        matches!(
            self,
            AgentError::Link(
                LinkError::Frame(
                    FrameError::Io(_) | FrameError::Closed | FrameError::Truncated { .. }
                ) | LinkError::ClosedInHandshake
            )
        )
    }

    /// The connection broke (the peer went away, or the network), also before the peer
    /// answered the hello: worth connecting again. A refusal, a failed authentication or a
    /// protocol error is not.
    pub fn is_break(&self) -> bool {
        use crate::frame::FrameError;
        matches!(
            self,
            AgentError::Io(_)
                | AgentError::Link(
                    LinkError::Frame(
                        FrameError::Io(_) | FrameError::Closed | FrameError::Truncated { .. }
                    ) | LinkError::ClosedInHandshake
                )
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

/// Read the peer's frames on their own thread, decoded, into a channel the exchange drains.
///
/// The channel has no cap of its own, on purpose: a reader that stopped reading when the
/// exchange is busy writing would let both points block on full socket buffers, each waiting
/// for the other to read. What it holds is bounded by the protocol instead: R refuses a sender
/// that announces beyond its window (`--queue` intervals not released), and S holds at most
/// the frames of the RDA exchanges and results of those intervals; every frame is capped
/// (`frame::MAX_FRAME`).
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

/// The point's capture as this agent's options give it (one path: the agent's own).
fn capture_options(o: &AgentOptions) -> CaptureOptions {
    CaptureOptions {
        input: o.input.clone(),
        stop: o.stop,
        duration: o.duration,
        disorder_ns: o.disorder_ns,
        identity_seed: o.identity_seed,
        identity_bytes: o.identity_bytes,
        log: o.log.clone(),
    }
}

/// The synopses the capture keeps for this agent: its methods', and at R with `per_class` the
/// class tap last ([`receiver`] takes it from there).
fn capture_methods(o: &AgentOptions, role: Role) -> Vec<Arc<dyn Method>> {
    let mut m = o.methods.clone();
    if o.per_class && role == Role::Receiver {
        m.push(Arc::new(ClassTapMethod {
            capacity: DEFAULT_TAP_CAPACITY,
        }));
    }
    m
}

/// This agent's share of a point's capture, handed to `handoff`.
pub fn tap(o: &AgentOptions, role: Role, path: &str, handoff: Arc<Handoff>) -> Tap {
    Tap {
        name: path.to_string(),
        filter: o.filter.clone(),
        role,
        intervals: o.intervals,
        cut: o.cut,
        methods: capture_methods(o, role),
        handoff,
    }
}

/// Where an agent's closed intervals come from.
pub struct Feed {
    pub handoff: Arc<Handoff>,
    pub wake: Receiver<()>,
    /// Starts the capture when the agent is ready for it (a single pair's sender: once its
    /// receiver has accepted); `None`: a point's shared capture already feeds it.
    pub start: Option<Box<dyn FnOnce() + Send>>,
}

impl Feed {
    /// A capture of the agent's own, with one path: the agent's.
    pub fn own(o: &AgentOptions, role: Role) -> Feed {
        let (handoff, wake) = Handoff::new(o.queue);
        let (co, t) = (capture_options(o), tap(o, role, "", handoff.clone()));
        Feed {
            handoff,
            wake,
            start: Some(Box::new(move || {
                capture::start(co, vec![t]);
            })),
        }
    }

    /// A path's share of a point's capture, fed by it.
    pub fn shared(handoff: Arc<Handoff>, wake: Receiver<()>) -> Feed {
        Feed {
            handoff,
            wake,
            start: None,
        }
    }

    fn start(&mut self) {
        if let Some(f) = self.start.take() {
            f();
        }
    }
}
