//! `owl agent`: one observation point of a live measurement (the work is in `owl_live::agent`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use clap::{Args, ValueEnum};
use owl_core::method::Method;
use owl_core::units::parse_duration_u64;
use owl_live::afpacket::RingOptions;
use owl_live::agent::{self, AgentOptions};
use owl_live::capture::{Backend, Input, PcapOptions, Speed};
use owl_live::collector::Reporter;
use owl_live::filter::Filter;
use owl_live::key::Key;

use super::agreed::Agreed;
use crate::methods;

const AFTER_HELP: &str = "Two agents measure live between two observation points: the sender
point S (where packets pass first) connects to the receiver point R. Each cuts its own capture
into intervals by its own clock, exactly as `owl record` does, and the two exchange each
interval as it closes while the next one is recorded. For every method but RDA, S sends its
interval's synopsis and R estimates the pair; for RDA (rda, rda-fixed) the points run RDA's
round trip (R's sketch, S's bank size, R's RDA, S's requests for the timestamps of decoded
packets, R's answers) and S sends R the estimate: the caches never cross.

R writes one JSON line per interval on standard output, in interval order:
  {\"type\":\"interval\",\"index\":…,\"start_ns\":…,\"status\":\"estimated\",\"sent\":…,\"received\":…,
   \"methods\":[{\"method\":\"lda\",\"mean_ns\":…,…}]}
with each method's estimate as `owl estimate --jsonl` prints it (or \"error\"); sent and
received are the packets each point recorded in the interval. An interval a point recorded but
could not keep has \"status\":\"missing\" and a \"reason\" (never an estimate from one side); one
only a point recorded before the other started or after it stopped is \"left_out\" (as `owl
estimate` leaves it out); {\"type\":\"quiet\",\"from\":a,\"to\":b,…} covers intervals [a, b) without
a packet at either point, so every index is accounted for. A {\"type\":\"summary\",…} line ends.

Security: every frame is authenticated with HMAC-SHA256 under a key derived from --key-file
(`owl keygen`) and fresh nonces of both sides, numbered against replay; a peer with another key,
or with another configuration (methods, --method-config, --memory, --seed, --interval,
--origin-ns, --identity-seed, --identity-bytes, --filter), is refused with a one-line reason on
both sides naming what differs. The frames are not encrypted.

Bounded: at most --queue intervals of synopses wait at each point. A replay at full speed
(--speed max) waits for the exchange; a paced replay (--speed X, as a live capture) drops a
whole interval when the queue is full, logs it, and R reports it missing.

Clocks: one-way delays rest on the two points' clocks agreeing (PTP or NTP, RDA §II-B); owl
never corrects them. R asks S for the time over their connection (NTP-style: R's send and
receive times, S's receive and answer times) after every batch of lines, and each line carries
\"clock\": {\"offset_ns\", \"uncertainty_ns\", \"rtt_ns\", \"exchanges\", \"discarded\"} — S's clock
minus R's from the exchange of least round trip among the last 8, true within ± uncertainty_ns
(half that round trip) whatever the path: a true delay is the measured one plus offset_ns.
With --replay it describes the hosts' clocks, not those that stamped the files.

Broken connections and restarts: when the connection between the agents breaks, S keeps
capturing (into its --queue), connects again for up to --connect-timeout, and resumes where R
last released it; a restarted R (a new process on the same --listen) takes the pair up there
too. S keeps what R has not finished (at most R's --queue intervals) and sends it again, so a
broken connection loses only the RDA exchanges under way (that method's error says so).
Nothing is estimated from one side: every interval a restarted agent was not running for, and
the one it started again in, is \"missing\" (\"the receiver agent was not running\", \"the
receiver agent started again during it\"); the rest are estimated as usual. A receiver whose
capture is done waits --connect-timeout for a sender whose connection broke, then reports what
is left missing and exits. Every connection watches for a silent peer (TCP keepalive, and a
30 s limit on unacknowledged data), so a vanished peer counts as a broken connection.

With --collector, R also delivers every line to `owl collector` (queued while the collector
is unreachable, at most --collector-queue lines, and resent until acknowledged).

Flow classes (--per-class, at R): each method that recovers individual delays (sample, opa,
opa-wavelet) also gives them by flow class, its protocol and service port (the smaller port:
tcp/443, udp/53, icmp), in \"class_histograms\":[{\"class\",\"le_ns\",\"weights\",\"sum_ns\"}] on
its line; the collector exports them as owl_class_one_way_delay_seconds{pair,method,class}.
R reads each recovered packet's class from its own records of the interval (a table of at
most 1 048 576 identities an interval, about 34 MiB; delays past it are counted as
\"unclassified\"); the first 32 classes are named, later ones are \"other\". Nothing more
crosses the network.

With --replay, each agent exits with status 0 once its file is done and its last interval has
been exchanged (R has written every line, and the collector has acknowledged every one).

Live capture (--iface IF, Linux): each agent captures its interface through an AF_PACKET
socket with a TPACKET_V3 memory-mapped ring (--ring-size, --ring-block, --ring-timeout) and
the kernel's nanosecond timestamps; no libpcap (--capture pcap uses libpcap instead, in an owl
built with --features pcap, and allows --bpf, a kernel pre-filter in tcpdump's language that
both agents must give alike). It needs root or the CAP_NET_RAW capability
(sudo setcap cap_net_raw+ep $(which owl)). Frames are dissected and identified exactly as
`owl record` does a capture file, so the synopses are the same. The agent sees its own
connection to the peer too: give both agents a --filter that selects only the measured path
(e.g. \"udp and dst port 9000\", or \"not port 7707\"). Intervals close by the packets'
timestamps and, on a quiet link, by the wall clock. Disable receive/segmentation offloads on
real NICs (ethtool -K IF gro off gso off tso off lro off): merged frames differ between the
points and match nothing. At every interval close the agent logs the kernel's counts for its
socket since the previous close: packets taken, and dropped because the ring was full (those
packets are in no synopsis: dropped at R they read as loss, at S as packets R has and S not);
R's interval lines carry both points' drops as \"kernel_drops\":[S, R] (null for a point that
replays a file or closed no such interval). A live agent runs until its --duration has passed
or it gets SIGINT or SIGTERM, then stops at the end of the interval then open, exchanges it
and exits 0 (a second signal exits at once). SIGHUP reloads nothing and stops nothing: the
agent logs it and goes on (with --config, saying whether the file as it is now checks). A
sender exits once the receiver has reported
every interval it recorded (the receiver's clock passed its last, plus the cut window), while
the receiver goes on; a receiver exits when its own capture ends and its sender is through.

A network of points (--config FILE): one agent at each observation point measures every path
through it, from one capture read, dissected and identified once. The file (TOML; relative
paths in it are relative to its directory) holds the point's name, key_file, listen (where senders of its receiver paths connect: one port for all),
collector, [peers] (names for peer addresses), [capture] (replay or iface, speed, capture, bpf,
filter, duration, ring_size/ring_block/ring_timeout, identity_seed, identity_bytes, disorder),
[defaults] and any number of [[path]]: name, role (this point's: sender or receiver), peer
(a sender path's receiver point), filter (the path's packets; the same text at both points),
and measurement settings over [defaults] — the flags above without dashes: methods, interval,
memory, seed, method_config = [\"rda:banks=3\"], cut, queue, per_class, pair … A frame goes to
every path whose filter selects it (decided once per flow). Checked before anything starts, one
error each: a duplicate path, a peer that is neither HOST:PORT nor in [peers], a filter that
does not parse, and two paths with the same peer and role whose filters overlap. Each path is a
pair of its own: its own connection and handshake (the configuration names the path; the other
point serves that path or refuses, naming the paths it has), its own queue, its own lines on
standard output, each with \"path\":NAME. A path whose peer is down or refuses it fails alone,
logged, and the point's other paths go on (the exit status is 1 and names it); with a replay at
full speed every path waits for the slowest, as a single pair waits for its peer.

  # point b.toml: receives a-to-b, sends b-to-c
  name = \"b\"
  key_file = \"owl.key\"
  listen = \"10.0.0.2:7707\"
  [peers]
  c = \"10.0.0.3:7707\"
  [capture]
  iface = \"eth0\"
  [defaults]
  methods = \"rda,lda\"
  interval = \"1s\"
  [[path]]
  name = \"a-to-b\"
  role = \"receiver\"
  filter = \"src net 10.1.0.0/16 and dst net 10.2.0.0/16\"
  [[path]]
  name = \"b-to-c\"
  role = \"sender\"
  peer = \"c\"
  filter = \"src net 10.2.0.0/16 and dst net 10.3.0.0/16\"

Examples:
  owl keygen -o owl.key
  owl agent --role receiver --listen 0.0.0.0:7707 --replay R.pcap --interval 1s \\
            --methods rda,lda,lds --key-file owl.key > results.jsonl
  owl agent --role sender --peer receiver-host:7707 --replay S.pcap --interval 1s \\
            --methods rda,lda,lds --key-file owl.key
  owl agent --role sender --peer 127.0.0.1:7707 --replay S.pcap --speed 1 …   # real time
  # live, on two hosts (R at 10.0.0.2), measuring the UDP flows to port 9000:
  sudo owl agent --role receiver --listen 10.0.0.2:7707 --iface eth0 --interval 1s \
            --filter 'udp and dst port 9000' --key-file owl.key > results.jsonl
  sudo owl agent --role sender --peer 10.0.0.2:7707 --iface eth0 --interval 1s \
            --filter 'udp and dst port 9000' --key-file owl.key
  sudo owl agent --config /etc/owl/b.toml > results.jsonl   # a point and its paths";

/// The flags of a single pair, which a point's --config file replaces.
const SINGLE_PAIR: [&str; 33] = [
    "role",
    "methods",
    "replay",
    "speed",
    "iface",
    "filter",
    "duration",
    "capture",
    "bpf",
    "ring_size",
    "ring_block",
    "ring_timeout",
    "listen",
    "peer",
    "queue",
    "name",
    "collector",
    "pair",
    "per_class",
    "collector_queue",
    "collector_patience",
    "connect_timeout",
    "disorder",
    "interval",
    "origin_ns",
    "cut",
    "cut_window",
    "horizon",
    "memory",
    "method_config",
    "seed",
    "identity_seed",
    "identity_bytes",
];

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AgentRole {
    Sender,
    Receiver,
}

/// How `--iface` is captured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CaptureBackend {
    /// Linux AF_PACKET with a TPACKET_V3 ring (no library).
    Afpacket,
    /// libpcap (an owl built with `--features pcap`).
    Pcap,
}

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP, after_long_help = format!("{AFTER_HELP}\n\n{}", methods::crosses_help()))]
pub struct AgentArgs {
    /// A point's configuration file (TOML): its capture and every path through it, each a
    /// sender or a receiver (see "A network of points" below). Alone: the flags below describe
    /// one pair instead.
    #[arg(long, value_name = "FILE", conflicts_with_all = SINGLE_PAIR)]
    pub config: Option<PathBuf>,
    /// With --config: check the file (every path's settings, filters and their overlaps, the
    /// methods) and list its paths, then exit without capturing or connecting (the interface
    /// and the key are not opened).
    #[arg(long, requires = "config")]
    pub check: bool,
    /// Which observation point this agent is (one pair; with --config, each path says).
    #[arg(long, value_enum)]
    pub role: Option<AgentRole>,
    /// Methods to measure with (comma list; both agents must give the same, in the same order).
    #[arg(long, default_value = "rda,lda,lds", value_name = "LIST", long_help = methods::help(true))]
    pub methods: String,
    #[command(flatten)]
    pub capture: CaptureArgs,
    /// Measure only the packets this expression selects, e.g. "udp and dst port 9000" (host,
    /// net A/N, port, src/dst, proto tcp|udp|icmp|icmp6|N, and, or, not, parentheses). Both
    /// agents must give the same filter (else the connection is refused).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<Filter>,
    /// Receiver: address to listen on for the sender (port 0: any free port, printed).
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// Sender: the receiver agent's address.
    #[arg(long, value_name = "HOST:PORT")]
    pub peer: Option<String>,
    /// The shared key (`owl keygen`), the same at both agents (with --config: instead of the
    /// file's key_file, as a service manager's credential).
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Intervals of synopses that may wait at this point for the exchange (the receiver's is
    /// also how many the sender may have outstanding).
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub queue: usize,
    /// This point's name in logs and the peer's logs.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Receiver: deliver every interval line to this collector (`owl collector`) too.
    #[arg(long, value_name = "HOST:PORT")]
    pub collector: Option<String>,
    /// Receiver: the pair's label at the collector (default: --name).
    #[arg(long, value_name = "LABEL")]
    pub pair: Option<String>,
    /// Receiver: break the recovered delays (sample, opa, opa-wavelet) down by flow class,
    /// protocol and service port, in each line's class_histograms.
    #[arg(long)]
    pub per_class: bool,
    /// Receiver: lines kept for the collector while it is unreachable (then the oldest are
    /// dropped, counted and logged).
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub collector_queue: usize,
    /// Receiver: at the end, how long to wait for the collector to take the last lines.
    #[arg(long, default_value = "30s", value_parser = parse_duration_u64, value_name = "T")]
    pub collector_patience: u64,
    /// Sender: how long to keep trying to reach the receiver, at the start and after the
    /// connection broke (also when the receiver closes a new connection before its
    /// handshake, as a restarting one does). Receiver: once its capture is done, how long to
    /// wait for a sender whose connection broke.
    #[arg(long, default_value = "30s", value_parser = parse_duration_u64, value_name = "T")]
    pub connect_timeout: u64,
    #[command(flatten)]
    pub agreed: Agreed,
}

/// Where a point's packets come from: one capture, whatever it measures (`[capture]` in a
/// point's `--config` file takes the same settings).
#[derive(Args, Clone, Debug)]
#[command(group = clap::ArgGroup::new("input").multiple(false))]
pub struct CaptureArgs {
    /// Capture file of this point, replayed as if captured live (pcap or pcapng; a FIFO, or -).
    #[arg(long, value_name = "FILE", group = "input")]
    pub replay: Option<PathBuf>,
    /// Replay pace: `max` (as fast as possible, waiting for the exchange) or a factor of the
    /// capture's own pace (1 = real time; drops intervals when the exchange falls behind).
    #[arg(
        long,
        default_value = "max",
        value_name = "X|max",
        conflicts_with = "iface"
    )]
    pub speed: Speed,
    /// Capture this network interface live (Linux: AF_PACKET with a TPACKET_V3 ring and the
    /// kernel's nanosecond timestamps; needs root or CAP_NET_RAW).
    #[arg(long, value_name = "IF", group = "input")]
    pub iface: Option<String>,
    /// With --iface: stop at the end of the interval open after this long (default: run until
    /// SIGINT or SIGTERM, which also stop at the end of the current interval).
    #[arg(long, value_parser = parse_duration_u64, value_name = "T", requires = "iface")]
    pub duration: Option<u64>,
    /// With --iface: how to capture it — `afpacket` (Linux, no library) or `pcap` (libpcap:
    /// other systems, and --bpf; needs an owl built with `--features pcap`).
    #[arg(long, value_enum, default_value = "afpacket", requires = "iface")]
    pub capture: CaptureBackend,
    /// With --capture pcap: a BPF expression (tcpdump's language) the kernel applies before
    /// owl sees a frame, e.g. "udp and dst port 9000". Both agents must give the same (the
    /// handshake compares it); --filter still applies after it.
    #[arg(long, value_name = "EXPR", requires = "iface")]
    pub bpf: Option<String>,
    /// With --iface: bytes of the capture ring (a multiple of --ring-block; with --capture
    /// pcap, libpcap's buffer).
    #[arg(long, requires = "iface", default_value = "32MiB", value_parser = parse_bytes_usize, value_name = "BYTES")]
    pub ring_size: usize,
    /// With --iface: bytes of one ring block (a power of two, at least 4 KiB; the longest frame
    /// captured whole).
    #[arg(long, requires = "iface", default_value = "1MiB", value_parser = parse_bytes_usize, value_name = "BYTES")]
    pub ring_block: usize,
    /// With --iface: a ring block holding packets is handed over at most about this long
    /// after it was opened, so a quiet link still delivers.
    #[arg(long, requires = "iface", default_value = "10ms", value_parser = parse_duration_u64, value_name = "T")]
    pub ring_timeout: u64,
    /// Timestamp disorder tolerated within the capture before an interval closes.
    #[arg(long, default_value = "10ms", value_parser = parse_duration_u64, value_name = "T")]
    pub disorder: u64,
}

/// A byte count (`32MiB`, `1048576`) that fits this machine's address space.
fn parse_bytes_usize(s: &str) -> Result<usize, String> {
    let n = owl_core::units::parse_bytes(s).map_err(|e| e.to_string())?;
    usize::try_from(n).map_err(|_| format!("{s}: too large for this machine"))
}

fn log(line: &str) {
    eprintln!("owl: agent: {line}");
}

/// The methods a path measures with, built from its settings.
pub(super) fn build_methods(
    list: &str,
    agreed: &Agreed,
    per_class: bool,
) -> Result<Vec<Arc<dyn Method>>> {
    if agreed.interval == 0 {
        bail!("--interval must be given (e.g. 1s): an agent reports interval by interval");
    }
    let names = methods::parse_list(list)?;
    let overrides = agreed.overrides()?;
    for m in overrides.methods() {
        if !names.contains(&m) {
            bail!("--method-config sets {m}, which is not among --methods");
        }
    }
    let opts = agreed.options();
    let mut built: Vec<Arc<dyn Method>> = Vec::new();
    for &n in &names {
        built.push(Arc::from(methods::build_with_horizon(
            n,
            &opts,
            &overrides,
            agreed.horizon,
        )?));
    }
    if per_class
        && !names
            .iter()
            .any(|n| owl_core::registry::find(n).is_some_and(|i| i.recovers_delays))
    {
        bail!(
            "--per-class breaks down the delays a method recovers: give one of {} in --methods",
            methods::recovering_names()
        );
    }
    Ok(built)
}

/// The shared key, with a warning when others can read it.
pub(super) fn read_key(path: &std::path::Path) -> Result<Key> {
    let key = Key::read(path)?;
    if Key::readable_by_others(path) {
        log(&format!(
            "warning: {} can be read by other users (chmod 600 it)",
            path.display()
        ));
    }
    Ok(key)
}

impl CaptureArgs {
    /// A replayed file that is not there fails here (after the flags are checked, before a
    /// sender connects to its receiver: it failed only once the connection was made).
    pub(super) fn check_replay(&self) -> Result<()> {
        if let Some(path) = &self.replay
            && path != std::path::Path::new("-")
            && let Err(e) = std::fs::metadata(path)
        {
            bail!("--replay {}: {e}", path.display());
        }
        Ok(())
    }

    /// The point's input, and the flag that stops a live capture.
    pub(super) fn input(&self) -> Result<(Input, Option<&'static AtomicBool>)> {
        let a = self;
        // an interface that does not exist fails here, before a sender connects to its receiver
        if let Some(iface) = &a.iface
            && cfg!(target_os = "linux")
            && !std::path::Path::new("/sys/class/net").join(iface).exists()
        {
            bail!("--iface {iface}: no such interface (ip link lists them)");
        }
        Ok(match (&a.replay, &a.iface) {
            (Some(path), None) => {
                if a.duration.is_some() {
                    bail!("--duration is for --iface; a replay ends with its file");
                }
                (
                    Input::Replay {
                        path: path.clone(),
                        speed: a.speed,
                    },
                    None,
                )
            }
            (None, Some(_)) if a.capture == CaptureBackend::Pcap && !cfg!(feature = "pcap") => {
                bail!(
                    "--capture pcap: this owl was built without libpcap (install libpcap-dev, then cargo build --release --features pcap); the default --capture afpacket needs no library"
                )
            }
            (None, Some(iface)) if a.capture == CaptureBackend::Pcap => (
                Input::Live {
                    iface: iface.clone(),
                    backend: Backend::Pcap(PcapOptions {
                        bpf: a.bpf.clone(),
                        buffer_bytes: a.ring_size,
                    }),
                },
                Some(owl_live::capture::stop_on_signals()),
            ),
            (None, Some(iface)) => {
                if a.bpf.is_some() {
                    bail!(
                        "--bpf is compiled by libpcap: give --capture pcap too (with AF_PACKET, use --filter)"
                    );
                }
                let ring = RingOptions {
                    ring_bytes: a.ring_size,
                    block_bytes: a.ring_block,
                    retire_ms: u32::try_from(a.ring_timeout / 1_000_000)
                        .map_err(|_| anyhow!("--ring-timeout is too long"))?,
                };
                ring.check()
                    .map_err(|e| anyhow!("--ring-size/--ring-block/--ring-timeout: {e}"))?;
                (
                    Input::Live {
                        iface: iface.clone(),
                        backend: Backend::AfPacket(ring),
                    },
                    Some(owl_live::capture::stop_on_signals()),
                )
            }
            _ => bail!("give exactly one of --replay FILE and --iface IF"),
        })
    }
}

pub fn run(a: AgentArgs) -> Result<()> {
    if let Some(file) = &a.config {
        return super::point::run(file, a.key_file.as_deref(), a.check);
    }
    let Some(agent_role) = a.role else {
        bail!("give --role sender|receiver (one pair), or --config FILE (a point with its paths)");
    };
    if a.capture.replay.is_none() && a.capture.iface.is_none() {
        bail!("give one of --replay FILE and --iface IF");
    }
    let Some(key_file) = &a.key_file else {
        bail!("give --key-file FILE (owl keygen makes one)");
    };
    if a.queue == 0 {
        bail!("--queue must be at least 1");
    }
    let built = build_methods(&a.methods, &a.agreed, a.per_class)?;
    let key = read_key(key_file)?;
    let (input, stop) = a.capture.input()?;
    let role = match agent_role {
        AgentRole::Sender => "sender",
        AgentRole::Receiver => "receiver",
    };
    let intervals = a.agreed.intervals()?;
    let o = AgentOptions {
        methods: built,
        intervals,
        cut: a.agreed.cut(intervals)?,
        identity_seed: a.agreed.identity_seed,
        identity_bytes: a.agreed.identity_bytes,
        disorder_ns: a.capture.disorder,
        input,
        filter: a.filter.clone(),
        stop,
        duration: a.capture.duration.map(Duration::from_nanos),
        queue: a.queue,
        patience: Duration::from_nanos(a.connect_timeout),
        key,
        name: a.name.clone().unwrap_or_else(|| role.to_string()),
        path: String::new(),
        per_class: a.per_class,
        log: Arc::new(log),
    };
    super::hangup::go_on_after_hangup(
        || {
            "SIGHUP: an agent reloads nothing; this one goes on as started (to change a flag, \
             restart it)"
                .to_string()
        },
        log,
    );
    match agent_role {
        AgentRole::Sender => {
            if a.listen.is_some() {
                bail!("--listen is for the receiver; the sender connects with --peer");
            }
            if a.per_class {
                bail!("--per-class is for the receiver, where the delays are recovered");
            }
            if a.collector.is_some() || a.pair.is_some() {
                bail!(
                    "--collector and --pair are for the receiver, which delivers the pair's results (the sender's drops reach it as missing intervals)"
                );
            }
            let peer = a
                .peer
                .ok_or_else(|| anyhow!("the sender needs --peer HOST:PORT (the receiver agent)"))?;
            a.capture.check_replay()?;
            let patience = Duration::from_nanos(a.connect_timeout);
            let feed = agent::Feed::own(&o, owl_core::method::Role::Sender);
            let s = agent::run_sender(o, feed, &mut || {
                agent::connect_with_patience(&peer, patience)
            })?;
            log(&format!("done: {} (the receiver at {peer})", s.describe()));
            Ok(())
        }
        AgentRole::Receiver => {
            if a.peer.is_some() {
                bail!("--peer is for the sender; the receiver listens with --listen");
            }
            let addr = a
                .listen
                .ok_or_else(|| anyhow!("the receiver needs --listen HOST:PORT"))?;
            a.capture.check_replay()?;
            let listener = TcpListener::bind(&addr)
                .map_err(|e| anyhow!("--listen {addr}: cannot listen: {e}"))?;
            log(&format!("listening on {}", listener.local_addr()?));
            let pair = a.pair.clone().unwrap_or_else(|| o.name.clone());
            let reporter = a
                .collector
                .clone()
                .map(|c| Reporter::start(c, o.key.clone(), pair, a.collector_queue, Arc::new(log)));
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            let sink = reporter.as_ref().map(Reporter::sink);
            let s = agent::run_receiver(o, listener, &mut out, sink)?;
            use std::io::Write;
            writeln!(out, "{}", agent::Line::Summary(s.clone()).to_json())?;
            log(&format!(
                "done: {} intervals estimated, {} missing, {}+{} left out (lead-in/out at S/R)",
                s.intervals, s.missing, s.trimmed[0], s.trimmed[1]
            ));
            if let (Some(r), Some(c)) = (reporter, &a.collector) {
                let d = r.finish(Duration::from_nanos(a.collector_patience));
                if d.undelivered > 0 || d.dropped > 0 {
                    bail!(
                        "{} result lines not delivered to the collector at {c} ({} dropped while it was unreachable)",
                        d.undelivered + d.dropped,
                        d.dropped
                    );
                }
                log(&format!(
                    "{} lines delivered to the collector at {c}",
                    d.delivered
                ));
            }
            Ok(())
        }
    }
}
