//! One point's capture, cut into intervals and handed to the exchange as each closes — the
//! same [`PointStream`] that `owl record` drives, so an agent's synopses are exactly the ones
//! `owl record` writes for the same capture.
//!
//! The capture runs on its own thread and the exchange on another: interval `i` is exchanged
//! while `i + 1` is recorded (RDA §VIII). Between them is a [`Handoff`] of bounded size — at
//! most `queue` intervals' synopses waiting for, or held by, the exchange. When it is full:
//!
//! - a **replay at full speed** (`--speed max`) waits: the file can wait, nothing is lost;
//! - a **paced replay** (`--speed X`, standing in for a live interface, which cannot wait)
//!   drops the whole interval: its synopses are freed, a counter and a log line say so, and
//!   the interval is still announced — as dropped — so the receiver reports it missing instead
//!   of estimating it from one side;
//! - a **live capture** (`--iface`, [`crate::afpacket`]) drops, like a paced replay.
//!
//! A live capture turns each frame into a record exactly as a replay does
//! ([`owl_trace::records::FrameRecords`]: the same dissection and identity), so its synopses
//! are those `owl record` makes from a capture of the same packets. Its intervals close by
//! packet timestamps as a replay's do, and also by the wall clock when the link is quiet: once
//! no block of the ring is waiting, every packet older than the ring's delivery lag has been
//! read, and the stream is advanced to that time ([`PointStream::advance`]). It stops on
//! request (a signal, `--duration`) at the end of the interval then open: packets stamped
//! after it are not taken, and the capture ends once the wall clock has passed it by the
//! delivery lag and the disorder tolerance.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded};
use owl_core::cut::{Cut, PointCut};
use owl_core::interval::Intervals;
use owl_core::method::{Method, Role};
use owl_core::pipeline::{ClosedInterval, NoTimer, PointCounters, PointStream, Synopses};
use owl_trace::capture::CaptureReader;
use owl_trace::lockstep::Source;
use owl_trace::records::{InputStats, RecordReader};

use crate::afpacket::{KernelStats, RingOptions};

/// Why a point's capture stopped.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The replayed file cannot be opened or read.
    #[error("{path}: {source}")]
    File {
        path: String,
        source: owl_trace::capture::CaptureError,
    },
    /// The replayed file holds no IP packet.
    #[error("{path}: no IP packets to measure ({frames} frames)")]
    NoPackets { path: String, frames: u64 },
    /// The interface cannot be opened or read (the kernel's or libpcap's words).
    #[error("{0}")]
    Interface(String),
    /// This build or platform has no such capture.
    #[error("{0}")]
    Unsupported(String),
    /// The point's capture stopped: every path of the point learns the same reason.
    #[error("{0}")]
    Point(Arc<CaptureError>),
}
use crate::filter::Filter;
use hashbrown::HashMap;

/// Records read per batch.
const BATCH: usize = 4096;
/// A paced replay (`--speed X`) hands records on in runs of at most this much capture time.
const PACE_STEP_NS: u64 = 5_000_000;

/// How fast a capture file is replayed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Speed {
    /// As fast as it can be read; waits when the exchange is behind.
    Max,
    /// `x` times the capture's own pace (1 = real time); drops intervals when the exchange is
    /// behind, as a live capture must.
    Times(f64),
}

impl std::str::FromStr for Speed {
    type Err = String;
    fn from_str(s: &str) -> Result<Speed, String> {
        if s == "max" {
            return Ok(Speed::Max);
        }
        match s.trim_end_matches('x').parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(Speed::Times(x)),
            _ => Err(format!(
                "speed '{s}' is neither max nor a positive factor (1 = the capture's own pace)"
            )),
        }
    }
}

/// One closed interval as the capture hands it over.
pub struct Closed {
    pub index: u64,
    /// Every method's synopsis; `None`: dropped (the queue was full).
    pub synopses: Option<Synopses>,
    /// What the cut needs: S's delimiters, R's held windows (kept when the synopses are
    /// dropped: a neighbouring interval's cut needs them).
    pub cut: PointCut,
    /// Packets the point recorded in the interval.
    pub packets: u64,
    /// Live capture: what the kernel counted since the previous interval closed (packets it
    /// could not put in the ring are `drops`: they are in no synopsis).
    pub kernel: Option<KernelStats>,
}

/// What the capture thread hands over.
#[derive(Default)]
struct State {
    /// Closed intervals in order.
    closed: VecDeque<Closed>,
    /// Intervals whose synopses are in `closed` or held by the exchange.
    held: usize,
    /// The point will close no interval below this.
    below: u64,
    /// The capture ended (with its summary, or an error), until the exchange takes it.
    done: Option<Result<CaptureSummary, CaptureError>>,
    /// The capture ended (stays set once `done` is taken).
    ended: bool,
    dropped: u64,
    /// Live capture: the interval the capture was open in first.
    started: Option<u64>,
    /// Live capture: when it opened (wall clock, ns).
    opened_ns: Option<u64>,
}

/// The bounded hand-off between the capture thread and the exchange.
pub struct Handoff {
    state: Mutex<State>,
    space: Condvar,
    wake: Sender<()>,
    cap: usize,
}

/// What the exchange takes from the hand-off at once.
#[derive(Default)]
pub struct Taken {
    pub closed: Vec<Closed>,
    pub below: u64,
    pub done: Option<Result<CaptureSummary, CaptureError>>,
    /// Live capture: the interval the capture was open in first (the first it may have
    /// recorded only part of), once it is open.
    pub started: Option<u64>,
    /// Live capture: when it opened (wall clock, ns), once it is open.
    pub opened_ns: Option<u64>,
}

impl Handoff {
    /// A hand-off of `cap` intervals, and the channel that wakes the exchange.
    pub fn new(cap: usize) -> (Arc<Handoff>, Receiver<()>) {
        let (wake, rx) = bounded(1);
        (
            Arc::new(Handoff {
                state: Mutex::new(State::default()),
                space: Condvar::new(),
                wake,
                cap: cap.max(1),
            }),
            rx,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // a panicked capture thread leaves consistent state: every update is one assignment
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn notify(&self) {
        let _ = self.wake.try_send(());
    }

    /// Everything handed over since the last call (the synopses stay counted as held until
    /// [`release`](Self::release)).
    pub fn take(&self) -> Taken {
        let mut s = self.lock();
        Taken {
            closed: s.closed.drain(..).collect(),
            below: s.below,
            done: s.done.take(),
            started: s.started,
            opened_ns: s.opened_ns,
        }
    }

    /// Live capture: the interval the capture was open in first; `None` before it is open (and
    /// for a replay).
    pub fn started(&self) -> Option<u64> {
        self.lock().started
    }

    /// Wait (at most `patience`) until a live capture is open or has ended: the interval it
    /// was open in first, if it opened.
    pub fn wait_started(&self, patience: Duration) -> Option<u64> {
        let t0 = Instant::now();
        loop {
            {
                let s = self.lock();
                if s.started.is_some() || s.done.is_some() || t0.elapsed() >= patience {
                    return s.started;
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The capture is open, as of wall-clock time `now_ns` on `intervals`' grid.
    fn opened(&self, intervals: &Intervals, now_ns: u64) {
        let mut s = self.lock();
        s.started = intervals.index(now_ns);
        s.opened_ns = Some(now_ns);
        drop(s);
        self.notify();
    }

    /// The exchange is finished with `n` intervals' synopses.
    pub fn release(&self, n: usize) {
        let mut s = self.lock();
        s.held = s.held.saturating_sub(n);
        drop(s);
        self.space.notify_all();
    }

    /// Has the capture ended (whether or not the exchange has taken its summary)?
    pub fn ended(&self) -> bool {
        self.lock().ended
    }

    /// Intervals dropped so far.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }
}

/// What a capture read, once it is done.
#[derive(Clone, Debug, Default)]
pub struct CaptureSummary {
    pub input: InputStats,
    pub point: PointCounters,
    /// Intervals handed over, and of them dropped.
    pub intervals: u64,
    pub dropped: u64,
    /// IP packets `--filter` left out.
    pub filtered_out: u64,
    /// Live capture: packets stamped after the stop (at the end of the last interval), left out.
    pub after_stop: u64,
    /// Live capture: the kernel's counts over the whole capture.
    pub kernel: KernelStats,
    /// Live capture: frames of the ring skipped as damaged ([`crate::afpacket::Walked`]).
    pub ring_malformed: u64,
}

/// Where a point's packets come from.
#[derive(Clone, Debug)]
pub enum Input {
    /// A capture file replayed.
    Replay { path: PathBuf, speed: Speed },
    /// A network interface captured live.
    Live { iface: String, backend: Backend },
}

/// How an interface is captured.
#[derive(Clone, Debug)]
pub enum Backend {
    /// Linux `AF_PACKET` with a `TPACKET_V3` ring ([`crate::afpacket`]), no library needed.
    AfPacket(RingOptions),
    /// libpcap (`--capture pcap`, cargo feature `pcap`): other systems, and a kernel BPF
    /// pre-filter.
    Pcap(PcapOptions),
}

/// What `--capture pcap` is given (the options exist without the feature, so that the command
/// line can say what is missing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PcapOptions {
    /// A BPF expression libpcap compiles and the kernel applies before owl sees the frames.
    pub bpf: Option<String>,
    /// Bytes of libpcap's capture buffer.
    pub buffer_bytes: usize,
}

/// A live source of frames: the `AF_PACKET` ring or libpcap.
trait LiveSource {
    fn linktype(&self) -> u32;
    /// Every packet stamped more than this before now has been handed on once the source
    /// reports itself idle.
    fn delivery_lag_ns(&self) -> u64;
    /// The frames that came within [`POLL_MS`], `(timestamp ns, bytes)` to `each`; `None`
    /// when none came (idle). The count is of damaged frames skipped.
    fn next(&mut self, each: &mut dyn FnMut(u64, &[u8])) -> Result<Option<u64>, String>;
    /// The kernel's counts since the last call.
    fn stats(&mut self) -> Result<KernelStats, String>;
}

#[cfg(target_os = "linux")]
struct Ring(crate::afpacket::Ring, RingOptions);

#[cfg(target_os = "linux")]
impl LiveSource for Ring {
    fn linktype(&self) -> u32 {
        self.0.linktype()
    }
    fn delivery_lag_ns(&self) -> u64 {
        self.1.delivery_lag_ns()
    }
    fn next(&mut self, each: &mut dyn FnMut(u64, &[u8])) -> Result<Option<u64>, String> {
        Ok(self
            .0
            .next_block(POLL_MS, |f| each(f.ts_ns, f.data))?
            .map(|w| w.malformed))
    }
    fn stats(&mut self) -> Result<KernelStats, String> {
        self.0.stats()
    }
}

#[cfg(feature = "pcap")]
impl LiveSource for crate::pcap::PcapSource {
    fn linktype(&self) -> u32 {
        crate::pcap::PcapSource::linktype(self)
    }
    fn delivery_lag_ns(&self) -> u64 {
        crate::pcap::PcapSource::delivery_lag_ns(self)
    }
    fn next(&mut self, each: &mut dyn FnMut(u64, &[u8])) -> Result<Option<u64>, String> {
        Ok(self.next_frames(each)?.map(|_| 0))
    }
    fn stats(&mut self) -> Result<KernelStats, String> {
        crate::pcap::PcapSource::stats(self)
    }
}

impl Input {
    /// Does a full hand-off make the capture wait (a file at full speed) rather than drop?
    fn waits(&self) -> bool {
        matches!(
            self,
            Input::Replay {
                speed: Speed::Max,
                ..
            }
        )
    }
}

/// Where a point's frames come from: what every path of the point shares. The frames are read,
/// dissected and identified once, then handed to each path's [`Tap`].
#[derive(Clone)]
pub struct CaptureOptions {
    pub input: Input,
    /// Live capture: stop once this is set ([`stop_on_signals`]).
    pub stop: Option<&'static AtomicBool>,
    /// Live capture: stop after this long.
    pub duration: Option<Duration>,
    pub disorder_ns: u64,
    pub identity_seed: u64,
    /// Identify packets on their first this many IP bytes (`--identity-bytes`).
    pub identity_bytes: Option<u32>,
    /// Called with a line to log (drops).
    pub log: Arc<dyn Fn(&str) + Send + Sync>,
}

/// One path's share of a point's capture: which packets, cut how, into which synopses, and
/// handed to which exchange.
#[derive(Clone)]
pub struct Tap {
    /// The path's name, prefixed to its log lines (empty: the point's only path).
    pub name: String,
    /// Only the packets this selects are measured (both points of the path give the same).
    pub filter: Option<Filter>,
    pub role: Role,
    pub intervals: Intervals,
    /// How the path's two points cut intervals (both agents agree on it in the handshake).
    pub cut: Cut,
    pub methods: Vec<Arc<dyn Method>>,
    pub handoff: Arc<Handoff>,
}

/// A tap at work in the capture thread.
struct Running<'a> {
    tap: &'a Tap,
    point: PointStream,
    closed: Vec<ClosedInterval>,
    /// Live, once stopping: the records of a batch stamped before this path's stop.
    mine: Vec<owl_core::PacketRecord>,
    summary: CaptureSummary,
    /// Live capture: the kernel's counts since this path last handed an interval over.
    kernel: KernelStats,
    /// Live capture: packets stamped from here on are not taken (the end of the interval
    /// open when the stop came).
    stop_at: Option<u64>,
    /// The `below` last handed over: nothing new to say, nothing to hand.
    said_below: u64,
}

impl<'a> Running<'a> {
    fn new(o: &CaptureOptions, tap: &'a Tap) -> Running<'a> {
        Running {
            tap,
            point: PointStream::new(tap.role, tap.intervals, o.disorder_ns, tap.methods.clone())
                .with_cut(tap.cut),
            closed: Vec::new(),
            mine: Vec::new(),
            summary: CaptureSummary::default(),
            kernel: KernelStats::default(),
            stop_at: None,
            said_below: 0,
        }
    }

    /// Log a line as this path's.
    fn log(&self, o: &CaptureOptions, line: &str) {
        path_log(o, &self.tap.name, line);
    }

    /// Record this path's share of a batch of `offered` records (and, live, leave out what is
    /// past its stop).
    fn push(&mut self, records: &[owl_core::PacketRecord], offered: usize) {
        self.summary.filtered_out += (offered - records.len()) as u64;
        let records = match self.stop_at {
            None => records,
            Some(end) => {
                self.mine.clear();
                for r in records {
                    if r.ts_ns < end {
                        self.mine.push(*r);
                    } else {
                        self.summary.after_stop += 1;
                    }
                }
                &self.mine
            }
        };
        self.point.push(records, &NoTimer);
    }

    /// Hand what closed over; `below`: the point closes nothing below it any more.
    fn hand(&mut self, o: &CaptureOptions, below: u64, kernel: bool) {
        // nothing closed and nothing new below: the exchange need not wake
        if self.closed.is_empty() && below == self.said_below {
            return;
        }
        self.said_below = below;
        let k = (kernel && !self.closed.is_empty()).then(|| std::mem::take(&mut self.kernel));
        let tap = self.tap;
        hand(
            o.input.waits(),
            &|line| path_log(o, &tap.name, line),
            &self.tap.handoff,
            &mut self.closed,
            below,
            k,
            &mut self.summary,
        );
    }
}

/// Log `line` as path `name`'s (no name: the point's only path).
fn path_log(o: &CaptureOptions, name: &str, line: &str) {
    if name.is_empty() {
        (o.log)(line);
    } else {
        (o.log)(&format!("path {name}: {line}"));
    }
}

/// Which paths each flow goes to: every path's filter decided once per flow, so a packet's cost
/// does not grow with the number of paths (a filter looks at the flow's 5-tuple only): one
/// table lookup, and a copy for each path that takes it. At most [`Dispatch::MAX_FLOWS`] flows
/// are remembered; past that the table starts again (counted, logged at the end).
struct Dispatch {
    filters: Vec<Option<Filter>>,
    /// Each flow's paths: where its list starts in `lists`, and how long it is.
    flows: HashMap<owl_core::FlowKey, (u32, u32)>,
    lists: Vec<u16>,
    /// Times the table was full and started again.
    restarts: u64,
}

impl Dispatch {
    const MAX_FLOWS: usize = 1 << 16;

    fn new(taps: &[Tap]) -> Dispatch {
        Dispatch {
            filters: taps.iter().map(|t| t.filter.clone()).collect(),
            flows: HashMap::new(),
            lists: Vec::new(),
            restarts: 0,
        }
    }

    /// Share `batch` out: `shares[path]` gets the records its filter selects, in order.
    fn share(
        &mut self,
        batch: &[owl_core::PacketRecord],
        shares: &mut [Vec<owl_core::PacketRecord>],
    ) {
        for s in shares.iter_mut() {
            s.clear();
        }
        for r in batch {
            let (at, n) = match self.flows.get(&r.flow) {
                Some(&x) => x,
                None => {
                    if self.flows.len() >= Self::MAX_FLOWS {
                        self.flows.clear();
                        self.lists.clear();
                        self.restarts += 1;
                    }
                    let at = self.lists.len();
                    self.lists.extend(
                        self.filters
                            .iter()
                            .enumerate()
                            .filter(|(_, f)| f.as_ref().is_none_or(|f| f.matches(&r.flow)))
                            .map(|(p, _)| p as u16),
                    );
                    let x = (at as u32, (self.lists.len() - at) as u32);
                    self.flows.insert(r.flow, x);
                    x
                }
            };
            for &p in &self.lists[at as usize..(at + n) as usize] {
                shares[usize::from(p)].push(*r);
            }
        }
    }
}

/// Start the point's capture thread, feeding every tap.
pub fn start(o: CaptureOptions, taps: Vec<Tap>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let r = run(&o, &taps);
        if let (Ok(sums), Input::Live { iface, .. }) = (&r, &o.input)
            && let Some(s) = sums.first()
        {
            (o.log)(&format!(
                "capture on {iface} ended: {} frames, {} IP packets{}, {} after the stop; kernel: {} taken, {} dropped (ring full), {} freezes; {} damaged ring frames",
                s.input.frames,
                s.input.ip_packets,
                if sums.len() == 1 {
                    format!(", {} left out by --filter", s.filtered_out)
                } else {
                    String::new()
                },
                sums.iter().map(|s| s.after_stop).max().unwrap_or(0),
                s.kernel.packets,
                s.kernel.drops,
                s.kernel.freezes,
                s.ring_malformed
            ));
        }
        match r {
            Ok(sums) => {
                for (t, s) in taps.iter().zip(sums) {
                    let mut st = t.handoff.lock();
                    (st.done, st.ended) = (Some(Ok(s)), true);
                    drop(st);
                    t.handoff.notify();
                }
            }
            Err(e) => {
                // every path learns why the point's capture stopped
                let e = Arc::new(e);
                for t in &taps {
                    let mut st = t.handoff.lock();
                    (st.done, st.ended) = (Some(Err(CaptureError::Point(e.clone()))), true);
                    drop(st);
                    t.handoff.notify();
                }
            }
        }
    })
}

fn run(o: &CaptureOptions, taps: &[Tap]) -> Result<Vec<CaptureSummary>, CaptureError> {
    match &o.input {
        Input::Replay { path, speed } => run_replay(o, taps, path, *speed),
        Input::Live { iface, backend } => run_live(o, taps, iface, backend),
    }
}

/// The taps at work, and how the point's records are shared out among them.
struct Taps<'a> {
    running: Vec<Running<'a>>,
    /// With more than one path, or a filter: which path takes which record.
    dispatch: Option<Dispatch>,
    shares: Vec<Vec<owl_core::PacketRecord>>,
}

impl<'a> Taps<'a> {
    fn new(o: &CaptureOptions, taps: &'a [Tap]) -> Taps<'a> {
        let filtered = taps.len() > 1 || taps.iter().any(|t| t.filter.is_some());
        Taps {
            running: taps.iter().map(|t| Running::new(o, t)).collect(),
            dispatch: filtered.then(|| Dispatch::new(taps)),
            shares: vec![Vec::new(); taps.len()],
        }
    }

    fn push(&mut self, batch: &[owl_core::PacketRecord]) {
        if let Some(d) = &mut self.dispatch {
            d.share(batch, &mut self.shares);
        }
        for (p, r) in self.running.iter_mut().enumerate() {
            let mine = match self.dispatch {
                Some(_) => &self.shares[p][..],
                None => batch,
            };
            r.push(mine, batch.len());
            r.point.drain_closed(&mut r.closed);
        }
    }

    fn hand(&mut self, o: &CaptureOptions, kernel: bool) {
        for r in &mut self.running {
            let below = r.point.closed_below();
            r.hand(o, below, kernel);
        }
    }

    /// Every path closes what it holds and hands it over; their summaries.
    fn finish(
        mut self,
        o: &CaptureOptions,
        input: InputStats,
        kernel: Option<KernelStats>,
        ring_malformed: u64,
    ) -> Vec<CaptureSummary> {
        if let Some(d) = &self.dispatch
            && d.restarts > 0
        {
            (o.log)(&format!(
                "the flow-to-path table was full {} times and started again (more than {} flows at once)",
                d.restarts,
                Dispatch::MAX_FLOWS
            ));
        }
        for r in &mut self.running {
            r.point.finish(&mut r.closed);
            if let Some(k) = kernel {
                add(&mut r.kernel, k);
                add(&mut r.summary.kernel, k);
            }
            // the bound past the last interval, not "everything" (u64::MAX): the end is said
            // by `done`, which comes with the summary, and a bound of everything handed before
            // it would tell the exchange this point's stream passed every later interval while
            // still recording (its peer then estimated them as silent, not left out)
            let end = r
                .closed
                .iter()
                .map(|c| c.index.saturating_add(1))
                .max()
                .unwrap_or(0)
                .max(r.said_below);
            r.hand(o, end, kernel.is_some());
            r.summary.input = input;
            r.summary.point = r.point.counters();
            r.summary.ring_malformed = ring_malformed;
        }
        self.running.into_iter().map(|r| r.summary).collect()
    }
}

fn run_replay(
    o: &CaptureOptions,
    taps: &[Tap],
    replay: &std::path::Path,
    speed: Speed,
) -> Result<Vec<CaptureSummary>, CaptureError> {
    let path = replay.display().to_string();
    let src = Source::parse(replay);
    let reader = src
        .open()
        .and_then(CaptureReader::new)
        .map_err(|source| CaptureError::File {
            path: path.clone(),
            source,
        })?;
    let mut rr = RecordReader::new(reader, o.identity_seed);
    rr.set_identity_bytes(o.identity_bytes);
    let mut paths = Taps::new(o, taps);
    let mut batch = Vec::with_capacity(BATCH);
    let mut pace: Option<(Instant, u64)> = None;
    loop {
        let n = rr
            .next_batch(&mut batch, BATCH)
            .map_err(|source| CaptureError::File {
                path: path.clone(),
                source,
            })?;
        if n == 0 {
            break;
        }
        // paced: runs of at most PACE_STEP_NS of capture time, each when its first record is
        // due (a whole batch at once handed on up to a second of intervals together — at 4 k
        // packets/s, five 200 ms intervals — which a --queue of 4 then partly dropped)
        let mut i = 0;
        while i < batch.len() {
            let j = match speed {
                Speed::Max => batch.len(),
                Speed::Times(x) => {
                    let first = batch[i].ts_ns;
                    let (t0, ts0) = *pace.get_or_insert((Instant::now(), first));
                    let due = Duration::from_secs_f64(first.saturating_sub(ts0) as f64 / 1e9 / x);
                    if let Some(wait) = (t0 + due).checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    let end = first.saturating_add(PACE_STEP_NS);
                    i + batch[i..]
                        .iter()
                        .take_while(|r| r.ts_ns < end)
                        .count()
                        .max(1)
                }
            };
            paths.push(&batch[i..j]);
            paths.hand(o, false);
            i = j;
        }
    }
    let input = rr.stats();
    if input.ip_packets == 0 {
        return Err(CaptureError::NoPackets {
            path,
            frames: input.frames,
        });
    }
    Ok(paths.finish(o, input, None, 0))
}

/// The wall clock, ns since the Unix epoch (the clock the kernel stamps packets with).
pub(crate) fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// How long a live capture waits for a block before looking at the clock, ms.
const POLL_MS: i32 = 50;

fn run_live(
    o: &CaptureOptions,
    taps: &[Tap],
    iface: &str,
    backend: &Backend,
) -> Result<Vec<CaptureSummary>, CaptureError> {
    match backend {
        #[cfg(target_os = "linux")]
        Backend::AfPacket(ring) => {
            let r = crate::afpacket::Ring::open(iface, ring).map_err(CaptureError::Interface)?;
            (o.log)(&format!(
                "capturing on {iface} (AF_PACKET, {}, ring of {} in {} blocks, retired after {} ms)",
                owl_trace::dissect::linktype_name(r.linktype()),
                owl_core::units::format_bytes(ring.ring_bytes as u64),
                owl_core::units::format_bytes(ring.block_bytes as u64),
                ring.retire_ms
            ));
            run_source(o, taps, Ring(r, *ring))
        }
        #[cfg(not(target_os = "linux"))]
        Backend::AfPacket(_) => Err(CaptureError::Unsupported(format!(
            "--iface {iface}: AF_PACKET capture is Linux only; use --capture pcap (an owl built with the pcap feature), or capture with tcpdump and use --replay"
        ))),
        #[cfg(feature = "pcap")]
        Backend::Pcap(p) => {
            let s = crate::pcap::PcapSource::open(iface, p, POLL_MS)
                .map_err(CaptureError::Interface)?;
            (o.log)(&format!(
                "capturing on {iface} (libpcap, {}, {} timestamps, buffer {}{})",
                owl_trace::dissect::linktype_name(s.linktype()),
                if s.microseconds() {
                    "microsecond (this platform has no nanosecond ones)"
                } else {
                    "nanosecond"
                },
                owl_core::units::format_bytes(p.buffer_bytes as u64),
                p.bpf
                    .as_deref()
                    .map(|b| format!(", kernel filter '{b}'"))
                    .unwrap_or_default()
            ));
            run_source(o, taps, s)
        }
        #[cfg(not(feature = "pcap"))]
        Backend::Pcap(_) => Err(CaptureError::Unsupported(format!(
            "--iface {iface} --capture pcap: this owl was built without libpcap (cargo build --features pcap, with libpcap-dev installed)"
        ))),
    }
}

/// The live capture loop, whatever the source.
#[cfg_attr(not(any(target_os = "linux", feature = "pcap")), allow(dead_code))]
fn run_source(
    o: &CaptureOptions,
    taps: &[Tap],
    mut r: impl LiveSource,
) -> Result<Vec<CaptureSummary>, CaptureError> {
    use owl_trace::records::{FrameRecords, ReadOptions};
    let linktype = r.linktype();
    let lag = r.delivery_lag_ns();
    // the source is open: every packet from now on is captured. The interval open now is the
    // first that may be recorded only in part (if the opening straddled a boundary, the one
    // before it was too: a restarted agent reports both missing)
    let opened = wall_ns();
    for t in taps {
        t.handoff.opened(&t.intervals, opened);
    }
    let mut frames = FrameRecords::new(&ReadOptions {
        identity_bytes: o.identity_bytes,
        ..ReadOptions::with_seed(o.identity_seed)
    });
    let mut paths = Taps::new(o, taps);
    let mut batch = Vec::with_capacity(BATCH);
    let mut ring_malformed = 0;
    let started = Instant::now();
    let mut stopping = false;
    loop {
        if !stopping
            && (o.stop.is_some_and(|s| s.load(Ordering::Relaxed))
                || o.duration.is_some_and(|d| started.elapsed() >= d))
        {
            // each path stops at the end of its own interval open now
            let now = wall_ns();
            for p in &mut paths.running {
                let iv = p.tap.intervals;
                let end = match iv.index(now) {
                    Some(k) if !iv.is_whole() => iv.start_ns(k).saturating_add(iv.length_ns),
                    _ => now,
                };
                p.stop_at = Some(end);
                p.log(
                    o,
                    &format!(
                        "stopping at the end of the current interval (in {} ms)",
                        end.saturating_sub(now) / 1_000_000
                    ),
                );
            }
            stopping = true;
        }
        batch.clear();
        let got = r
            .next(&mut |ts, data| frames.push(ts, linktype, data, &mut batch))
            .map_err(CaptureError::Interface)?;
        if let Some(malformed) = got {
            ring_malformed += malformed;
        }
        paths.push(&batch);
        if got.is_none() {
            // the source is idle: every packet older than the lag has been read
            let now = wall_ns().saturating_sub(lag);
            for p in &mut paths.running {
                // a stopping path's stream ends at its stop: it takes nothing after it, so it
                // must not pass it (its last interval then ends with S's last packets, not with
                // a silence it did not watch: owl_core::cut::Named)
                p.point.advance(p.stop_at.map_or(now, |end| now.min(end)));
                p.point.drain_closed(&mut p.closed);
            }
        }
        // the kernel's counts go with the next interval each path hands over
        if paths.running.iter().any(|p| !p.closed.is_empty()) {
            let k = r.stats().map_err(CaptureError::Interface)?;
            for p in &mut paths.running {
                add(&mut p.kernel, k);
                add(&mut p.summary.kernel, k);
            }
        }
        paths.hand(o, true);
        let last_end = paths.running.iter().filter_map(|p| p.stop_at).max();
        if let Some(end) = last_end
            && wall_ns() >= end.saturating_add(lag).saturating_add(o.disorder_ns)
        {
            // every packet stamped before each path's stop is read: its stream reaches it (a
            // sender's last interval ends with its last packets up to its stop)
            for p in &mut paths.running {
                if let Some(end) = p.stop_at {
                    p.point.advance(end);
                }
            }
            break;
        }
    }
    let k = r.stats().map_err(CaptureError::Interface)?;
    Ok(paths.finish(o, frames.stats(), Some(k), ring_malformed))
}

fn add(total: &mut KernelStats, k: KernelStats) {
    total.packets += k.packets;
    total.drops += k.drops;
    total.freezes += k.freezes;
}

/// Ask every live capture to stop at the end of its current interval on SIGINT or SIGTERM (a
/// second signal ends the process at once, status 130). Returns the flag the signals set.
/// The handlers (`signal_hook`'s, which only store to the flag or `_exit`) are installed once.
#[cfg(unix)]
pub fn stop_on_signals() -> &'static AtomicBool {
    use signal_hook::consts::{SIGINT, SIGTERM};
    static STOP: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    STOP.get_or_init(|| {
        let stop = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM] {
            // in this order: a signal that finds the flag set exits, else it sets the flag
            let installed =
                signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
                    .and_then(|_| signal_hook::flag::register(sig, stop.clone()));
            if let Err(e) = installed {
                eprintln!("owl: cannot catch signal {sig} ({e}): it ends the process at once");
            }
        }
        stop
    })
}

/// Elsewhere no signal stops a live capture (there is none: live capture is Linux only).
#[cfg(not(unix))]
pub fn stop_on_signals() -> &'static AtomicBool {
    static STOP: AtomicBool = AtomicBool::new(false);
    &STOP
}

/// Hand closed intervals over: wait for room at full speed, drop when paced or live. The
/// kernel's counts since the previous hand-over go with the last interval.
fn hand(
    waits: bool,
    log: &dyn Fn(&str),
    h: &Handoff,
    closed: &mut Vec<ClosedInterval>,
    below: u64,
    kernel: Option<KernelStats>,
    summary: &mut CaptureSummary,
) {
    let last = closed.len().checked_sub(1);
    let mut s = h.lock();
    for (
        i,
        ClosedInterval {
            index: k,
            packets,
            synopses: syn,
            cut,
        },
    ) in closed.drain(..).enumerate()
    {
        summary.intervals += 1;
        let kernel = kernel.map(|ks| {
            if Some(i) == last {
                ks
            } else {
                KernelStats::default()
            }
        });
        if let Some(ks) = kernel {
            let line = format!(
                "interval {k}: {packets} packets recorded; kernel: {} taken, {} dropped (ring full), {} freezes",
                ks.packets, ks.drops, ks.freezes
            );
            log(&line);
        }
        if s.held >= h.cap && waits {
            // tell the exchange what is there before waiting for room
            drop(s);
            h.notify();
            s = h.lock();
            while s.held >= h.cap {
                s = h.space.wait(s).unwrap_or_else(|p| p.into_inner());
            }
        }
        if s.held < h.cap {
            s.held += 1;
            s.closed.push_back(Closed {
                index: k,
                synopses: Some(syn),
                cut,
                packets,
                kernel,
            });
        } else {
            drop(syn);
            s.dropped += 1;
            summary.dropped += 1;
            log(&format!(
                "interval {k} dropped: {} intervals already wait for the exchange (--queue); it will be reported missing",
                h.cap
            ));
            s.closed.push_back(Closed {
                index: k,
                synopses: None,
                cut,
                packets,
                kernel,
            });
        }
    }
    s.below = s.below.max(below);
    drop(s);
    h.notify();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn options(speed: Speed, logged: Arc<AtomicUsize>) -> CaptureOptions {
        CaptureOptions {
            input: Input::Replay {
                path: PathBuf::new(),
                speed,
            },
            stop: None,
            duration: None,
            disorder_ns: 0,
            identity_seed: 0,
            identity_bytes: None,
            log: Arc::new(move |_| {
                logged.fetch_add(1, Ordering::Relaxed);
            }),
        }
    }

    fn tap(intervals: Intervals, handoff: Arc<Handoff>) -> Tap {
        Tap {
            name: String::new(),
            filter: None,
            role: Role::Sender,
            intervals,
            cut: Cut::Clock,
            methods: Vec::new(),
            handoff,
        }
    }

    fn hand_all(
        o: &CaptureOptions,
        h: &Handoff,
        closed: &mut Vec<ClosedInterval>,
        below: u64,
        sum: &mut CaptureSummary,
    ) {
        hand(
            o.input.waits(),
            &|l| (o.log)(l),
            h,
            closed,
            below,
            None,
            sum,
        );
    }

    fn closed_interval(index: u64, packets: u64) -> ClosedInterval {
        ClosedInterval {
            index,
            packets,
            synopses: Vec::new(),
            cut: PointCut::None,
        }
    }

    /// Paced (a live capture cannot wait): a full queue drops whole intervals, counted, logged,
    /// and still announced as dropped.
    #[test]
    fn a_paced_capture_drops_whole_intervals_when_the_queue_is_full() {
        let logged = Arc::new(AtomicUsize::new(0));
        let o = options(Speed::Times(1.0), logged.clone());
        let (h, _wake) = Handoff::new(1);
        let mut sum = CaptureSummary::default();
        let mut closed: Vec<ClosedInterval> = (0..3).map(|k| closed_interval(k, 5)).collect();
        hand_all(&o, &h, &mut closed, 3, &mut sum);
        let t = h.take();
        let kept: Vec<(u64, bool, u64)> = t
            .closed
            .iter()
            .map(|c| (c.index, c.synopses.is_some(), c.packets))
            .collect();
        assert_eq!(kept, [(0, true, 5), (1, false, 5), (2, false, 5)]);
        assert_eq!(
            (t.below, sum.intervals, sum.dropped, h.dropped()),
            (3, 3, 2, 2)
        );
        assert_eq!(logged.load(Ordering::Relaxed), 2);
        // once the exchange releases the held interval there is room again
        h.release(1);
        let mut closed = vec![closed_interval(3, 1)];
        hand_all(&o, &h, &mut closed, 4, &mut sum);
        assert!(h.take().closed[0].synopses.is_some());
    }

    /// At full speed a full queue waits for the exchange: nothing is dropped.
    #[test]
    fn a_replay_at_full_speed_waits_instead() {
        let logged = Arc::new(AtomicUsize::new(0));
        let o = options(Speed::Max, logged.clone());
        let (h, wake) = Handoff::new(1);
        let h2 = h.clone();
        let t = std::thread::spawn(move || {
            let mut sum = CaptureSummary::default();
            let mut closed: Vec<ClosedInterval> = (0..4).map(|k| closed_interval(k, 1)).collect();
            hand_all(&o, &h2, &mut closed, 4, &mut sum);
            sum
        });
        let mut got = Vec::new();
        while got.len() < 4 {
            wake.recv().unwrap();
            for c in h.take().closed {
                assert!(c.synopses.is_some());
                got.push(c.index);
                h.release(1);
            }
        }
        let sum = t.join().unwrap();
        assert_eq!(got, [0, 1, 2, 3]);
        assert_eq!((sum.dropped, logged.load(Ordering::Relaxed)), (0, 0));
    }

    /// A paced replay hands intervals on as their time comes, not a batch of them at once: a
    /// second of 4 000 packets (one read batch) in 100 ms intervals, replayed in real time
    /// with room for one interval, and an exchange that takes each at once, loses none. (Handed
    /// on a batch at a time, nine of the ten were dropped.)
    #[test]
    fn a_paced_replay_hands_intervals_on_one_at_a_time() {
        use owl_trace::capture::{CaptureFormat, CaptureWriter};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.pcap");
        let f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        let mut w = CaptureWriter::new(f, CaptureFormat::Pcap, 1, 0).unwrap();
        let t0 = 1_767_225_600_000_000_000u64;
        for k in 0..4_000u32 {
            let mut frame = vec![0u8; 12];
            frame.extend_from_slice(&[0x08, 0x00]);
            // IPv4, 32 bytes, UDP, 10.0.0.1 → 10.0.0.2 (checksum left 0: not verified)
            frame.extend_from_slice(&[0x45, 0, 0, 32, 0, 0, 0, 0, 64, 17, 0, 0]);
            frame.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
            frame.extend_from_slice(&[0x1f, 0x90, 0x23, 0x28, 0, 12, 0, 0]);
            frame.extend_from_slice(&k.to_be_bytes());
            w.write_packet(t0 + u64::from(k) * 250_000, &frame, frame.len() as u32)
                .unwrap();
        }
        w.finish().unwrap();
        let logged = Arc::new(AtomicUsize::new(0));
        let o = CaptureOptions {
            input: Input::Replay {
                path: path.clone(),
                speed: Speed::Times(1.0),
            },
            ..options(Speed::Times(1.0), logged.clone())
        };
        let (h, wake) = Handoff::new(1);
        start(o, vec![tap(Intervals::aligned(100_000_000), h.clone())]);
        let mut kept = 0;
        loop {
            let _ = wake.recv_timeout(Duration::from_millis(50));
            let t = h.take();
            for c in &t.closed {
                if c.synopses.is_some() {
                    kept += 1;
                    h.release(1);
                }
            }
            if let Some(done) = t.done {
                let sum = done.unwrap();
                assert_eq!((kept, sum.dropped), (10, 0), "{sum:?}");
                break;
            }
        }
        assert_eq!(logged.load(Ordering::Relaxed), 0);
    }

    /// A capture that ends hands its last intervals with a bound just past them; its end is
    /// said only by `done`. (It handed "nothing below u64::MAX" first: an exchange that took
    /// that before the summary told its peer this point's stream had passed every later
    /// interval while recording, and the peer estimated them as silent — the stopped-sender
    /// test's intervals after S's last, "estimated" instead of "left_out", under load.)
    #[test]
    fn the_end_of_a_capture_is_said_by_done_not_by_an_endless_bound() {
        let o = options(Speed::Max, Arc::new(AtomicUsize::new(0)));
        let (h, _wake) = Handoff::new(64);
        let t = [tap(Intervals::aligned(100_000_000), h.clone())];
        let mut taps = Taps::new(&o, &t);
        let t0 = 1_767_225_600_000_000_000u64;
        let batch: Vec<owl_core::PacketRecord> = (0..25u64)
            .map(|k| owl_core::PacketRecord {
                ts_ns: t0 + k * 10_000_000,
                id: k,
                flow: Default::default(),
                len: 40,
            })
            .collect();
        taps.push(&batch);
        taps.hand(&o, false);
        let _ = taps.finish(&o, InputStats::default(), None, 0);
        let t = h.take();
        assert!(t.done.is_none());
        let last = t0 / 100_000_000 + 2;
        assert_eq!(t.closed.last().map(|c| c.index), Some(last));
        assert_eq!(t.below, last + 1);
    }

    #[test]
    fn speeds_parse() {
        assert_eq!("max".parse::<Speed>().unwrap(), Speed::Max);
        assert_eq!("2".parse::<Speed>().unwrap(), Speed::Times(2.0));
        assert_eq!("0.5x".parse::<Speed>().unwrap(), Speed::Times(0.5));
        for bad in ["0", "-1", "fast", "inf", "NaN"] {
            assert!(bad.parse::<Speed>().is_err(), "{bad}");
        }
    }
}
