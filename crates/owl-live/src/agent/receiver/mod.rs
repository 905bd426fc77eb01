//! The receiver point R: accept S, join both points' intervals ([`crate::join`]), estimate them,
//! run RDA's decoder side, write one line per interval.

use super::*;

mod accept;
mod estimate;

use accept::spawn_acceptor;
pub use accept::{Route, spawn_router};

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

/// What R holds of one interval until it is decided: its own synopses, what S said of it and
/// S's payloads. Removed whole when the interval is decided ([`ReceiverState::advance`]).
#[derive(Default)]
struct Pending {
    /// R's synopses and cut data (an interval R closed with packets).
    local: Option<(Synopses, PointCut)>,
    /// Packets each point recorded in it.
    packets: [u64; 2],
    /// Live capture: packets each point's kernel dropped since its previous interval closed.
    kernel_drops: Option<[Option<u64>; 2]>,
    /// S's payloads, by method.
    remote: Option<Vec<Option<Vec<u8>>>>,
    /// S's results for one-way methods it could not send (too large).
    remote_results: Vec<(u16, String)>,
    /// An interval R closed and dropped (overload): what it held around its boundaries, which
    /// its line counts by R's clock.
    dropped_cut: Option<PointCut>,
}

/// Packets R held in interval `k`'s windows that R's clock puts in `k`: what its `received`
/// takes when no delimiter cut decides them (the interval is not estimated; its core count,
/// `packets`, leaves the windows out).
fn held_by_clock(intervals: &Intervals, k: u64, cut: Option<&PointCut>) -> u64 {
    let Some(PointCut::Receiver { head, tail }) = cut else {
        return 0;
    };
    let start = intervals.start_ns(k);
    let end = start.saturating_add(intervals.length_ns);
    let n = head.records.iter().filter(|r| r.ts_ns >= start).count()
        + tail.records.iter().filter(|r| r.ts_ns < end).count();
    n as u64
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
    let feed = Feed::own(&o, Role::Receiver);
    receive(o, feed, links, out, sink)
}

/// The receiver's work on the links a listener accepted for it, its intervals from `feed`.
pub fn receive(
    o: AgentOptions,
    mut feed: Feed,
    links: Receiver<Link>,
    out: &mut dyn Write,
    sink: Option<LineSink>,
) -> Result<ReceiverSummary, AgentError> {
    let (handoff, wake) = (feed.handoff.clone(), feed.wake.clone());
    feed.start();
    let mut r = ReceiverState {
        path: Some(o.path.clone()).filter(|p| !p.is_empty()),
        points: None,
        rda: o.methods.iter().map(|m| rda_config(&**m)).collect(),
        methods: o.methods.clone(),
        capture_methods: capture_methods(&o, Role::Receiver),
        intervals: o.intervals,
        window: o.queue.max(1),
        join: match o.cut {
            Cut::Delimiter(_) => Join::delimited(),
            Cut::Clock => Join::new(),
        },
        pending: BTreeMap::new(),
        neighbours: Neighbours::default(),
        outstanding: VecDeque::new(),
        work: BTreeMap::new(),
        lines: BTreeMap::new(),
        written: None,
        sink,
        released: 0,
        clock: ClockFilter::default(),
        pinging: false,
        clock_said: (false, 0),
        had_sender: false,
        live: matches!(o.input, Input::Live { .. }),
        recorded: false,
        stale_below: 0,
        per_class: o.per_class,
        book: ClassBook::new(DEFAULT_MAX_CLASSES),
        log: o.log.clone(),
        summary: ReceiverSummary {
            path: Some(o.path.clone()).filter(|p| !p.is_empty()),
            cuts: matches!(o.cut, Cut::Delimiter(_)).then(CutTally::default),
            ..Default::default()
        },
        handoff: handoff.clone(),
    };
    let mut conn = Conn::Away { give_up: None };
    let read = Arc::new(AtomicU64::new(0));
    // the bytes of a connection count into the summary when it ends
    let count = |summary: &mut ReceiverSummary, w: &LinkWriter| {
        summary.bytes_sent += w.bytes;
        summary.bytes_received += read.load(Ordering::Relaxed);
    };
    loop {
        let (peer, patience) = match &conn {
            Conn::Open { peer, .. } => (peer.clone(), crossbeam_channel::never()),
            Conn::Away { give_up: Some(t) } => {
                (crossbeam_channel::never(), crossbeam_channel::at(*t))
            }
            Conn::Away { give_up: None } => {
                (crossbeam_channel::never(), crossbeam_channel::never())
            }
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
                    let p = r.pending.entry(k).or_default();
                    p.packets[RECEIVER] = c.packets;
                    if let Some(ks) = c.kernel {
                        p.kernel_drops.get_or_insert_default()[RECEIVER] = Some(ks.drops);
                    }
                    match c.synopses {
                        Some(s) => {
                            r.join.have(RECEIVER, k, Held::Data)?;
                            r.pending.entry(k).or_default().local = Some((s, c.cut));
                        }
                        None => {
                            r.join.have(RECEIVER, k, Held::Dropped)?;
                            r.pending.entry(k).or_default().dropped_cut = Some(c.cut);
                            r.summary.dropped[1] += 1;
                        }
                    }
                }
                r.join.below(RECEIVER, t.below);
                if let Some(d) = t.done {
                    d?;
                    r.join.done(RECEIVER);
                    // a live capture stopped (signal, --duration) before any sender came:
                    // nothing can be measured any more (a replay waits for its sender)
                    if !r.had_sender && matches!(o.input, Input::Live { .. }) {
                        (o.log)("stopped before a sender connected: nothing was measured");
                        return Ok(r.summary);
                    }
                    if r.had_sender && let Conn::Away { give_up } = &mut conn {
                        *give_up = Some(Instant::now() + o.patience);
                    }
                }
            }
            recv(links) -> l => {
                let Ok(l) = l else { continue };
                if let Conn::Open { writer: old, .. } = &conn {
                    // an authenticated sender of the same configuration connects while the
                    // old connection looks open here (its end went without a word, as after a
                    // network partition): the old one is closed, the new one resumes
                    old.shutdown();
                    count(&mut r.summary, old);
                    r.disconnected();
                    (o.log)(
                        "a sender connected while the previous connection was still open here: that one is closed (the sender sends again what this receiver has not finished; RDA exchanges under way are reported failed)",
                    );
                }
                (o.log)(&format!("the sender connected from {} (it names itself {:?})", l.peer, l.hello.name));
                if r.path.is_some() {
                    r.points = Some([l.hello.name.clone(), o.name.clone()]);
                }
                read.store(0, Ordering::Relaxed);
                conn = Conn::Open {
                    peer: spawn_reader(l.reader, read.clone()),
                    writer: l.writer,
                    resumed: false,
                };
            }
            recv(peer) -> m => {
                let Conn::Open { writer: w, resumed, .. } = &mut conn else {
                    unreachable!("a peer is read only while its connection is open")
                };
                let m = match m {
                    Ok(m) => m,
                    Err(_) => Err(AgentError::Protocol("the connection ended".into())),
                };
                let proto = |s: String| AgentError::Protocol(s);
                let handled = match m {
                    // the first message of every connection says where S resumes, and only it
                    Ok(Msg::Resume { released, started }) if !*resumed => {
                        r.on_resume(released, started);
                        *resumed = true;
                        r.ping(w)
                    }
                    Ok(Msg::Resume { .. }) => return Err(proto("a second resume".into())),
                    Ok(m) if !*resumed => {
                        return Err(proto(format!(
                            "{} before the sender said where it resumes",
                            m.name()
                        )));
                    }
                    Ok(m) => r.on_peer(w, m),
                    // read: the connection ended, or broke
                    Err(e) if e.is_break() => {
                        lost_sender(&mut r, &mut conn, &o, &e, &read);
                        Ok(())
                    }
                    Err(e) => return Err(e),
                };
                match handled {
                    Ok(()) => {}
                    // written to (R's answer, its ping): S is gone, or the network
                    Err(e) if e.is_link_break() => lost_sender(&mut r, &mut conn, &o, &e, &read),
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
                conn = Conn::Away { give_up: None };
            }
        }
        let writer = match &mut conn {
            // the connection's first message, Resume, has not come yet
            Conn::Open { resumed: false, .. } => continue,
            Conn::Open { writer, .. } => Some(writer),
            Conn::Away { .. } => None,
        };
        let open = writer.is_some();
        match r.advance(writer, out) {
            Ok(()) => {}
            // a release or an RDA message that could not be written: S is gone, or the network
            // (an error writing the lines is R's own, and ends it)
            Err(e) if open && e.is_link_break() => lost_sender(&mut r, &mut conn, &o, &e, &read),
            Err(e) => return Err(e),
        }
        if let Conn::Open { writer: w, .. } = &mut conn
            && r.sender_through()
            && !r.join.finished()
        {
            // the sender stopped (--duration, a signal, the end of its replay) and every
            // interval it recorded is reported and released: it may exit now, while this
            // receiver goes on alone until its own capture ends (what only R records from here
            // on is a lead-out); a goodbye it cannot take is no loss
            if let Err(e) = send(w, &Msg::Bye) {
                (o.log)(&format!(
                    "the goodbye to the sender was not delivered ({e})"
                ));
            }
            count(&mut r.summary, w);
            w.shutdown();
            conn = Conn::Away { give_up: None };
            (o.log)(
                "the sender is done and every interval it recorded is reported: it exits; this receiver goes on until its capture ends",
            );
        }
        if r.join.finished() && r.work.is_empty() {
            if let Conn::Open { writer: w, .. } = &mut conn {
                if let Err(e) = send(w, &Msg::Bye) {
                    (o.log)(&format!(
                        "the goodbye to the sender was not delivered ({e})"
                    ));
                }
                count(&mut r.summary, w);
            }
            return Ok(r.summary);
        }
    }
}

/// The connection to S broke, read or written: close it, forget what S had under way (it sends
/// it again), and wait for S to connect again.
fn lost_sender(
    r: &mut ReceiverState,
    conn: &mut Conn,
    o: &AgentOptions,
    e: &AgentError,
    read: &AtomicU64,
) {
    if let Conn::Open { writer: w, .. } = conn {
        w.shutdown();
        // the connection's bytes count into the summary when it ends
        r.summary.bytes_sent += w.bytes;
        r.summary.bytes_received += read.load(Ordering::Relaxed);
    }
    r.disconnected();
    (o.log)(&format!(
        "the sender's connection broke ({e}); waiting for it to connect again (it sends again what this receiver has not finished; RDA exchanges under way are reported failed)"
    ));
    *conn = Conn::Away {
        give_up: r
            .join
            .is_done(RECEIVER)
            .then(|| Instant::now() + o.patience),
    };
}

/// R's connection to its sender: the lifecycle of [`run_receiver`]'s loop.
enum Conn {
    /// No sender is connected. `give_up`: R's capture is done and a sender had connected (or
    /// one's connection broke after it): when R stops waiting for it to come back.
    Away { give_up: Option<Instant> },
    /// A sender is connected: its reader thread feeds `peer`. `resumed` once its first
    /// message, `Resume`, came; nothing else is accepted before it.
    Open {
        writer: LinkWriter,
        peer: Receiver<Incoming>,
        resumed: bool,
    },
}

struct ReceiverState {
    /// The path its lines name (`None`: the single pair).
    path: Option<String>,
    /// A path's sender point (as its agent named itself) and this point, once a sender came.
    points: Option<[String; 2]>,
    methods: Vec<Arc<dyn Method>>,
    rda: Vec<Option<owl_core::rda::Config>>,
    intervals: Intervals,
    window: usize,
    join: Join,
    /// The methods R's capture runs (the agents', and the class tap after them).
    capture_methods: Vec<Arc<dyn Method>>,
    /// What R holds of each interval until it is decided.
    pending: BTreeMap<u64, Pending>,
    /// What S named of each announced interval's start and end (a delimiter cut), until the
    /// interval after it is decided.
    neighbours: Neighbours,
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
    /// What the log has said of the clocks: whether they drift beyond the offset's bound
    /// within an interval, and the steps found.
    clock_said: (bool, u64),
    /// Whether a sender has resumed on some connection of this process (its history; where
    /// the connection stands now is [`Conn`]).
    had_sender: bool,
    /// R captures an interface (not a replay).
    live: bool,
    /// R has announced an interval with a packet outside its cut windows.
    recorded: bool,
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
        for (&k, p) in self.pending.iter_mut() {
            p.remote = None;
            p.remote_results.clear();
            if k >= self.stale_below {
                p.packets[SENDER] = 0;
                if let Some(d) = p.kernel_drops.as_mut() {
                    d[SENDER] = None;
                }
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
    }

    fn on_peer(&mut self, w: &mut LinkWriter, m: Msg) -> Result<(), AgentError> {
        let proto = |s: String| AgentError::Protocol(s);
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
                let n = self.methods.len();
                let v = self
                    .pending
                    .entry(interval)
                    .or_default()
                    .remote
                    .get_or_insert_with(|| vec![None; n]);
                v[method as usize] = Some(payload);
            }
            Msg::Have {
                interval,
                lost,
                packets,
                kernel_drops,
                delimiters,
            } => {
                if let Some((start, end)) = delimiters {
                    self.neighbours.note(interval, &start, &end);
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
                self.join
                    .have(SENDER, interval, h)
                    .map_err(|e| proto(e.to_string()))?;
                let p = self.pending.entry(interval).or_default();
                p.packets[SENDER] = packets;
                if let Some(d) = kernel_drops {
                    p.kernel_drops.get_or_insert_default()[SENDER] = Some(d);
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
                if let Err(e) = rda::answer(w, &cfg, resp, interval, method, &message)? {
                    work.responders[i] = None;
                    work.results[i] = Some(Err(e));
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
                        self.pending
                            .entry(interval)
                            .or_default()
                            .remote_results
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
            self.neighbours.forget_below(k);
            let Pending {
                local,
                packets: [sent, received],
                kernel_drops,
                remote,
                remote_results: errors,
                dropped_cut,
            } = self.pending.remove(&k).unwrap_or_default();
            if local.is_some() {
                self.handoff.release(1);
            }
            // not estimated, the interval is not cut at S's delimiters: its packets at R are
            // those R's clock puts in it, windows included
            let by_clock = held_by_clock(
                &self.intervals,
                k,
                local.as_ref().map(|l| &l.1).or(dropped_cut.as_ref()),
            );
            let line = |status, reason: &str| IntervalLine {
                path: None,
                points: None,
                index: k,
                start_ns: self.intervals.start_ns(k),
                status,
                reason: Some(reason.to_string()),
                sent,
                received: received + by_clock,
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
                    path: None,
                    points: None,
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
            line.clock = self.clock.report(self.intervals.length_ns);
            if let Some(c) = line.clock {
                self.say_clock(&c);
            }
            line.path = self.path.clone();
            line.points = self.points.clone();
            if let Some(p) = self.written
                && p + 1 < k
            {
                let q = QuietLine {
                    path: self.path.clone(),
                    from: p + 1,
                    to: k,
                    start_ns: self.intervals.start_ns(p + 1),
                };
                self.emit(out, &Line::Quiet(q).to_json())?;
            }
            self.emit(out, &Line::Interval(line).to_json())?;
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

    /// Log a clock step once, and the clocks' drift beyond the offset's bound within an
    /// interval when it starts and when it ends.
    fn say_clock(&mut self, c: &clock::ClockReport) {
        if let Some(st) = c.last_step.filter(|_| c.steps > self.clock_said.1) {
            (self.log)(&format!(
                "warning: the clocks' offset stepped by {} (± {}) at {} UTC: a step of either clock or a change of its rate; the skew is fitted again from there",
                owl_core::units::format_ns(st.size_ns as f64),
                owl_core::units::format_ns(st.bound_ns as f64),
                owl_core::units::format_utc(u64::try_from(st.at_ns).unwrap_or(0))
            ));
        }
        let drifts = c.drifts();
        if drifts != self.clock_said.0 {
            match (drifts, c.skew) {
                (true, Some(k)) => (self.log)(&format!(
                    "warning: the clocks drift apart by at least {} over one interval (skew {:.3} ppm, between {:.3} and {:.3}), more than the offset's bound of {}: delays early and late in an interval are off by different amounts",
                    owl_core::units::format_ns(c.drift_ns.unwrap_or(0) as f64),
                    k.ppm,
                    k.low_ppm,
                    k.high_ppm,
                    owl_core::units::format_ns(c.uncertainty_ns as f64)
                )),
                _ => (self.log)(
                    "the clocks' drift over one interval is back within the offset's bound",
                ),
            }
        }
        self.clock_said = (drifts, c.steps);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use owl_core::cut::Held;
    use owl_core::record::PacketRecord;

    /// An interval not estimated counts the packets R held around its boundaries that R's
    /// clock puts in it: after its start in the head window, before its end in the tail.
    #[test]
    fn a_dropped_interval_counts_its_windows_by_r_clock() {
        let iv = Intervals::aligned(1_000_000);
        let held = |ts: &[u64]| {
            Arc::new(Held {
                records: ts
                    .iter()
                    .map(|&ts_ns| PacketRecord {
                        ts_ns,
                        ..PacketRecord::default()
                    })
                    .collect(),
                seqs: Vec::new(),
                overflowed: false,
            })
        };
        // interval 5 is [5 ms, 6 ms)
        let cut = PointCut::Receiver {
            head: held(&[4_900_000, 4_950_000, 5_000_000, 5_100_000]),
            tail: held(&[5_900_000, 5_999_999, 6_000_000]),
        };
        assert_eq!(held_by_clock(&iv, 5, Some(&cut)), 2 + 2);
        assert_eq!(held_by_clock(&iv, 5, Some(&PointCut::None)), 0);
        assert_eq!(held_by_clock(&iv, 5, None), 0);
    }
}
