//! A point, not a pair: one agent process at one observation point measures every path through
//! it. Its capture is read, dissected and identified once ([`crate::capture`]); each frame goes
//! to every path whose filter selects it (decided once per flow); each path is a sender or a
//! receiver agent of its own ([`crate::agent`]), with its own methods, interval grid, cut,
//! queue and peer. A point can be the sender of some paths and the receiver of others at once.
//!
//! - **Receiver paths share one listening port.** A sender names its path in the configuration
//!   it offers ([`crate::config::AgentConfig::path`]); the point serves it that path's
//!   receiver, or refuses it naming the paths it has.
//! - **Paths are independent.** A path whose peer is down, slow or refuses it does not stop
//!   another: a live capture drops that path's intervals when its queue is full (its receiver
//!   reports them missing), and a path that failed is drained so the capture never waits for
//!   it. One exception, by design: a replay at full speed (`--speed max`) waits for every path,
//!   as a single pair's does, so nothing is dropped — a path that cannot go on stops waiting
//!   once it has failed.
//! - **One connection per path.** Two paths between the same two points are two connections
//!   today (the "network of points" issue's item 3 — one connection per pair of points — is
//!   not built yet).

use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, bounded};
use owl_core::method::Role;

use crate::agent::{
    self, AgentError, AgentOptions, Feed, LineSink, ReceiverSummary, Route, SenderSummary,
};
use crate::capture::{self, CaptureOptions, Handoff, Tap};
use crate::collector::{Delivery, Reporter};
use crate::key::Key;
use crate::link::Link;

pub mod file;

/// One path through the point, as this point measures it.
pub struct PathSpec {
    pub name: String,
    pub role: Role,
    /// A sender path: the receiver point's address.
    pub peer: Option<String>,
    /// The path's measurement (its filter, methods, grid, cut, queue; the point-wide fields —
    /// input, identity, disorder, key — are the point's).
    pub options: AgentOptions,
    /// A receiver path: where its lines go besides standard output.
    pub collector: Option<(String, Reporter)>,
}

/// How a path ended.
pub enum PathEnd {
    Sent(SenderSummary),
    Received(ReceiverSummary, Option<Delivery>),
}

/// A path's outcome.
pub struct PathOutcome {
    pub name: String,
    pub role: Role,
    pub result: Result<PathEnd, AgentError>,
}

/// The point: its capture, its listening port (if it receives any path), its paths.
pub struct Point {
    /// The point's name (the handshake's name, the logs').
    pub name: String,
    pub capture: CaptureOptions,
    pub listener: Option<TcpListener>,
    pub key: Key,
    pub paths: Vec<PathSpec>,
    /// How long a sender path keeps trying to reach its receiver.
    pub patience: Duration,
    /// At the end, how long a receiver path waits for its collector to take the last lines.
    pub collector_patience: Duration,
}

/// Lines of several receiver paths to one output, a whole line at a time.
struct LineOut {
    out: Arc<Mutex<Box<dyn Write + Send>>>,
    line: Vec<u8>,
}

impl Write for LineOut {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(b);
        if let Some(end) = self.line.iter().rposition(|&c| c == b'\n') {
            let mut o = self.out.lock().unwrap_or_else(|p| p.into_inner());
            o.write_all(&self.line[..=end])?;
            self.line.drain(..=end);
        }
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}

/// Take and release whatever a failed path's capture share hands over, until the capture has
/// ended, so the point's capture never waits for it. Everything the path held is released too.
fn drain(handoff: &Handoff, wake: &Receiver<()>) {
    handoff.release(usize::MAX);
    loop {
        let _ = wake.recv_timeout(Duration::from_millis(100));
        let t = handoff.take();
        handoff.release(t.closed.len());
        if t.done.is_some() || handoff.ended() {
            return;
        }
    }
}

/// Run every path of the point until each is done; every path's outcome, in the paths' order.
/// Receiver paths write their lines to `out` (each line names its path).
pub fn run_point(p: Point, out: Box<dyn Write + Send>) -> Vec<PathOutcome> {
    let out = Arc::new(Mutex::new(out));
    let log = p.capture.log.clone();
    // every path's share of the capture
    let shares: Vec<(Arc<Handoff>, Receiver<()>)> = p
        .paths
        .iter()
        .map(|s| Handoff::new(s.options.queue))
        .collect();
    let taps: Vec<Tap> = p
        .paths
        .iter()
        .zip(&shares)
        .map(|(s, (h, _))| agent::tap(&s.options, s.role, &s.name, h.clone()))
        .collect();
    // the receiver paths' links, routed by the path the sender names
    let mut routes = Vec::new();
    let mut links: Vec<Option<Receiver<Link>>> = Vec::new();
    for s in &p.paths {
        if s.role == Role::Receiver {
            let (tx, rx) = bounded(1);
            routes.push(Route {
                config: s.options.config(),
                window: s.options.queue,
                links: tx,
            });
            links.push(Some(rx));
        } else {
            links.push(None);
        }
    }
    if let Some(l) = p.listener {
        agent::spawn_router(l, p.key.clone(), p.name.clone(), routes, log.clone());
    }
    capture::start(p.capture, taps);
    let mut running = Vec::new();
    for ((spec, (handoff, wake)), links) in p.paths.into_iter().zip(shares).zip(links) {
        let out = out.clone();
        let patience = p.patience;
        let collector_patience = p.collector_patience;
        let (name, role) = (spec.name.clone(), spec.role);
        let (log, path) = (log.clone(), name.clone());
        let t = std::thread::Builder::new()
            .name(format!("owl-path-{}", spec.name))
            .spawn(move || {
                let feed = Feed::shared(handoff.clone(), wake.clone());
                let r = run_path(spec, feed, links, out, patience, collector_patience);
                if let Err(e) = &r {
                    log(&format!(
                        "path {path}: stopped: {e}; the point's other paths go on"
                    ));
                    drain(&handoff, &wake);
                }
                r
            })
            .expect("a thread for a path");
        running.push((name, role, t));
    }
    running
        .into_iter()
        .map(|(name, role, t)| PathOutcome {
            name,
            role,
            result: t
                .join()
                .unwrap_or_else(|_| Err(AgentError::Protocol("the path's thread panicked".into()))),
        })
        .collect()
}

fn run_path(
    spec: PathSpec,
    feed: Feed,
    links: Option<Receiver<Link>>,
    out: Arc<Mutex<Box<dyn Write + Send>>>,
    patience: Duration,
    collector_patience: Duration,
) -> Result<PathEnd, AgentError> {
    match (spec.role, links) {
        (Role::Sender, _) => {
            let peer = spec.peer.clone().unwrap_or_default();
            let s = agent::run_sender(spec.options, feed, &mut || {
                agent::connect_with_patience(&peer, patience)
            })?;
            Ok(PathEnd::Sent(s))
        }
        (Role::Receiver, Some(links)) => {
            let (addr, reporter) = match spec.collector {
                Some((a, r)) => (Some(a), Some(r)),
                None => (None, None),
            };
            let sink: Option<LineSink> = reporter.as_ref().map(Reporter::sink);
            let mut w = LineOut {
                out,
                line: Vec::new(),
            };
            let s = agent::receive(spec.options, feed, links, &mut w, sink)?;
            writeln!(w, "{}", agent::Line::Summary(s.clone()).to_json())?;
            let d = match (reporter, addr) {
                (Some(r), Some(_)) => Some(r.finish(collector_patience)),
                _ => None,
            };
            Ok(PathEnd::Received(s, d))
        }
        (Role::Receiver, None) => Err(AgentError::Protocol(
            "a receiver path without a listening port".into(),
        )),
    }
}
