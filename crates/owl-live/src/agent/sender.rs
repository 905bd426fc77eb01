//! The sender point S: connect, agree, announce each interval as it closes, answer RDA's round
//! trips, resume after a broken connection.

use super::*;

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

impl SenderSummary {
    /// One line for the log: intervals, drops, RDA exchanges lost, bytes each way.
    pub fn describe(&self) -> String {
        use owl_core::units::format_bytes;
        format!(
            "{} intervals exchanged ({} dropped; {} RDA exchanges lost with {} broken connections), {} sent, {} received",
            self.intervals,
            self.dropped,
            self.lost_in_exchange,
            self.reconnects,
            format_bytes(self.bytes_sent),
            format_bytes(self.bytes_received)
        )
    }
}

/// How long S waits before it connects again after a handshake that broke.
const HANDSHAKE_RETRY: Duration = Duration::from_millis(200);

/// Connect to `peer`, retrying until `patience` has passed (the receiver may start later).
pub fn connect_with_patience(peer: &str, patience: Duration) -> Result<TcpStream, AgentError> {
    Ok(link::connect_with_patience(peer, "the receiver", patience)?)
}

/// The sender point: connect, agree, then exchange every interval until R says goodbye. When
/// the connection breaks, S keeps capturing (into its bounded hand-off), connects again with
/// `connect`, says where it resumes, and announces again, whole, what R had not released
/// (R's side of it: [`crate::join`]).
pub fn run_sender(
    o: AgentOptions,
    mut feed: Feed,
    connect: &mut dyn FnMut() -> Result<TcpStream, AgentError>,
) -> Result<SenderSummary, AgentError> {
    let (handoff, wake) = (feed.handoff.clone(), feed.wake.clone());
    let mut s = SenderState {
        rda: o.methods.iter().map(|m| rda_config(&**m)).collect(),
        methods: o.methods.clone(),
        window: 1,
        backlog: VecDeque::new(),
        relost: VecDeque::new(),
        announced: VecDeque::new(),
        held: BTreeMap::new(),
        decoders: rda::Decoders::default(),
        capture_below: 0,
        capture_done: None,
        sent_below: 0,
        done_sent: false,
        released: None,
        summary: SenderSummary::default(),
        handoff: handoff.clone(),
    };
    let mut capturing = false;
    // since when every handshake after a break has failed: S keeps trying for `patience`
    let mut failing_since: Option<Instant> = None;
    loop {
        let stream = connect()?;
        let (mut writer, window, rx, read) = match sender_handshake(&o, stream) {
            Ok(x) => x,
            // the receiver went away again mid-handshake, or closed it unanswered (restarting,
            // or shedding): try again, a little later, for as long as the patience lasts
            Err(e)
                if capturing
                    && e.is_break()
                    && failing_since.get_or_insert_with(Instant::now).elapsed() < o.patience =>
            {
                (o.log)(&format!(
                    "the receiver's connection broke in the handshake: {e}; trying again"
                ));
                std::thread::sleep(HANDSHAKE_RETRY);
                continue;
            }
            Err(e) => return Err(e),
        };
        failing_since = None;
        s.window = window;
        if !capturing {
            feed.start();
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
    /// RDA's exchanges under way, and those that broke with a connection.
    decoders: rda::Decoders,
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
    /// A delimiter cut: S's delimiters of its start, and what it named of its end.
    delimiters: Option<(Vec<u64>, Named)>,
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
                        self.capture_done = Some(d?);
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
        self.summary.lost_in_exchange += self.decoders.break_all();
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
                self.decoders.release_below(n);
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
        // R starts the exchange of k: S's synopsis, or an empty one if S had no packet in k
        let (held, methods) = (&mut self.held, &self.methods);
        let synopsis = || {
            held.get_mut(&k)
                .and_then(|v| v.get_mut(i as usize))
                .and_then(Option::take)
                .unwrap_or_else(|| methods[i as usize].new_point(Role::Sender))
        };
        self.decoders.on_message(w, &cfg, k, i, message, synopsis)
    }
}
