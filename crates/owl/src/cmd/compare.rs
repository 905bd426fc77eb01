//! `owl compare`: ground truth and every method on the same capture pair, side by side.
//!
//! Flags into [`CompareOptions`], the library's [`compare`] driver, and the report rendered as
//! text, one JSON document or JSON Lines.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use owl::compare::{
    ClockMode, CompareOptions, CompareSinks, CsvOut, IntervalSink, Notice, compare, perpacket,
};
use owl_core::pipeline::truth::DEFAULT_EXACT_QUANTILES;
use owl_core::units::parse_duration_u64;

use super::agreed::Agreed;
use crate::methods;
use crate::report::text::{self, IntervalTable};
use crate::report::{IntervalReport, Line};

const AFTER_HELP: &str = "How it works:
  Both captures are read at once, in lock-step (the one whose packets are older first), so
  memory follows the traffic in flight, not the length of the captures; a capture can be a
  FIFO or standard input (-). Every packet is dissected and hashed once into its identity (a
  hash of the bytes routers do not change) and fed to the exact matcher and to every method's
  sender or receiver synopsis. The exact matcher is the ground truth: relative errors are
  |estimate − truth| / truth against the packets both points recorded in the same interval.

Horizon:
  The truth waits --horizon (default 1s) for each packet's sighting at R: a packet R sees
  later than that after S is counted lost and late (reported, never silently matched), so set
  it above the path's largest one-way delay, clock offset included. Each point closes an
  interval once its capture has passed the interval's end plus --disorder (default 10ms, the
  timestamp disorder a capture may have); a record older than that is counted, in no interval.

Intervals:
  --interval 0 (default) measures the whole capture as one interval. --interval T cuts S's
  capture by its clock into [t0 + iT, t0 + (i+1)T) for every integer i, t0 = 0 (aligned to T
  since the epoch) unless --origin-ns shifts the grid (a packet before t0 is in the interval
  before it), and the JSON gets a per-interval breakdown. R cuts at S's delimiters (--cut
  delimiter, the default): S names its first packets of each interval, R holds what it
  receives within --cut-window of each boundary and cuts at the first of them it sees, so both
  points measure the same packets; a boundary whose delimiters R never saw is cut by R's clock
  and reported (checks: cuts; the interval's unpaired). --cut clock cuts each capture by its
  own clock, as RDA does: the packets in flight at a boundary look lost at S and unexpected at
  R, and aggregate methods take them for packets of the interval. The truth counts a packet in
  the interval S sent it in (--cut clock: in R's interval too, else it left).

Checks:
  The text starts with a checks block, the JSON has a checks object: snaplen (captures that
  keep different numbers of IP bytes of a long packet, by snaplen or link header, e.g.
  Ethernet at 128 bytes and Linux SLL2 at 100, are identified on the IP bytes both keep, 80
  here; --identity-bytes N sets the number), spans (when each capture ran), trimmed (a lead-in
  or lead-out only one capture has is not loss: it is trimmed for the truth and the methods
  alike, and counted; --no-trim keeps it), late, invalid records, clock (negative delays, the
  same capture twice, and R's clock against S's, below), directions (two captures of both
  directions hold R→S packets too, which every figure would take for S→R ones: a warning
  names the --filter that keeps S→R; the filter's mirror image, matched apart, then gives the
  clocks' offset: checks.clock.offset_ns, S's clock minus R's, within ± offset_bound_ns, half
  the smallest round trip).

Clocks (--clock report | correct):
  Every delay is R's clock at arrival less S's at departure: an offset, R's relative skew
  (NTP-disciplined hosts run 1-100 ppm apart: 3.6-360 ms an hour) and any step of R's clock
  (an NTP step) are in it. Packets that found the queues empty touch the path's smallest
  delay, so the floor of the points (send time, delay) draws R's clock: owl fits it with
  Moon, Skelly & Towsley's linear program (the line below every point closest to all of them,
  over every matched packet, through Zhang, Liu & Xia's convex hulls), one offset per segment
  between steps (Paxson's clock adjustments: jumps of the floor well above its noise).
  checks.clock gives skew_ppm, skew_uncertainty_ppm (bootstrap over the floor's buckets),
  drift_ns (skew times the capture's span) and steps[]{at_ns (S's clock), size_ns}, and warns
  when the drift exceeds 1 us or 1 % of the smallest delay (of a skew beyond 3 bootstrap
  standard deviations: where the queue seldom empties, the floor wanders), or a step is
  found. --clock correct
  fits in a first pass and removes the skew and the steps from R's timestamps before the truth
  and every method see them (checks.clock.applied says what, and what the corrected delays
  still show). The offset itself stays: one-way traffic cannot tell it from the path's delay
  (traffic both ways can: see directions above).

Interfaces:
  The interfaces of a pcapng file are measured as one stream only when they are alike (link
  type and snaplen; each packet is timed at its own interface's resolution); otherwise compare
  stops naming both: pick one with
  --interface N (both captures), --sender-interface N or --receiver-interface N (numbered from
  0 in file order, as `tshark -D` lists a dumpcap capture's). Interfaces of link types owl
  cannot read are counted and skipped.

Per flow (--per-flow):
  Truth per flow is the exact match over the whole capture. Every method with per-flow
  estimates ({PER_FLOW}) is asked, in each
  interval, about the flows S saw in it; over several intervals a flow's mean is the mean of
  its interval means weighted by the method's own packet estimate. The summary gives median
  and 95th-percentile relative error by flow size (<100, 100-999, 1000-9999, >=10000 packets).

Per class (--per-class):
  A flow class is a protocol and its service port, the smaller of the two ports (tcp/443
  holds a web server's requests and replies alike; icmp is one class): the first 32 classes
  R's capture shows are named (the busiest of an interval first), any later one is reported
  as other. Every method that recovers
  individual delays ({RECOVERING}) puts each delay in its packet's class (read from R's
  records of the interval, nothing more crosses the network), in one relative-error histogram
  per class merged over the intervals: p50/p90/p99/p99.9 per class with their 95 % intervals,
  beside the truth of the class's packets (JSON classes[]{class, proto, port, truth{delays,
  mean_ns, std_ns, p50_ns, p90_ns, p99_ns, p999_ns}, methods{NAME: {delays, packets, p50_ns,
  ..., p99_ci95_ns, ..., p99_rel_err}}} and class_notes[]).

Per packet (--per-packet FILE):
  Every per-packet method ({PER_PACKET}) gives, in each interval, its packets: FILE gets
  method,sender_ns,receiver_ns,delay_ns per packet (receiver_ns and delay_ns empty for a packet
  lost or not placed), and the summary (and each such method's JSON: p50_ns, p90_ns, p99_ns,
  p999_ns, per_packet{delivered, lost, unplaced, recovered_fraction, bytes_per_packet,
  anomalies[]}) the quantiles of its delays, the packets it placed and its largest delays.
  opa and opa-wavelet search within a budget of one core per second of traffic (opa:cpu=1), so
  recovery keeps up with the traffic; groups left past it are counted in the method's notes, and
  --method-config opa:cpu=1000 searches on, offline (owl record: give it at both points).

Output:
  Interval rows are printed as the intervals close (--rows N limits them), then the summary.
  --jsonl streams one JSON object per closed interval (type interval: index, start_ns,
  truth{…}, methods[…]) and ends with a summary object (type summary, the --json fields): use it for long runs.
  With --json, exactly one JSON document: truth{sent, received, lost,
  mean_ns, std_ns, p99_ns, …}, methods[]{name, mean_ns, std_ns, samples, bytes, …},
  intervals[] (when T > 0), flows[]{proto, src, dst, sport, dport, truth{sent, received,
  mean_ns, std_ns}, methods{NAME: {mean_ns, packets, mean_rel_err}}} and flow_error_bins[]
  (with --per-flow). Exit status 1 with one line on
  stderr for unreadable captures, captures with no IP packets, captures that share no packet,
  and S/R given in the wrong order (most delays negative).

Examples:
  owl compare sender.pcap receiver.pcap
  owl compare S.pcapng R.pcapng --interval 100ms --json | jq '.intervals[].truth.mean_ns'
  owl compare S.pcap R.pcap --per-flow --top 20
  owl compare S.pcap R.pcap --unmatched debug/ --delays delays.csv
  owl compare S.pcap R.pcap --methods exact,opa --per-packet packets.csv
  owl compare S.pcap R.pcap --methods exact,sample,opa --per-class
  owl compare both.pcapng R.pcap --sender-interface 1
  owl compare S.pcap R.pcap --clock correct";

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP
    .replace("{PER_FLOW}", &methods::per_flow_names())
    .replace("{PER_PACKET}", &perpacket::names())
    .replace("{RECOVERING}", &methods::recovering_names()))]
pub struct CompareArgs {
    /// Capture taken at the sender point S (pcap or pcapng).
    pub sender: PathBuf,
    /// Capture taken at the receiver point R.
    pub receiver: PathBuf,
    /// Methods to run beside the truth: a comma list or `all`.
    #[arg(long, default_value = "all", value_name = "LIST", long_help = methods::help(true))]
    pub methods: String,
    #[command(flatten)]
    pub agreed: Agreed,
    /// Print one JSON document instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Report per-flow truth (and per-flow methods).
    #[arg(long)]
    pub per_flow: bool,
    /// Quantiles per flow class (protocol and service port) for the methods that recover
    /// delays, beside the truth's.
    #[arg(long)]
    pub per_class: bool,
    /// With --per-flow: only the N flows with the most packets (tables default to 10).
    #[arg(long, value_parser = crate::numbers::usize_arg, value_name = "N")]
    pub top: Option<usize>,
    /// Write the packets only S saw (lost) and only R saw (unexpected) to DIR as pcap files.
    #[arg(long, value_name = "DIR")]
    pub unmatched: Option<PathBuf>,
    /// Write every matched packet's delay to FILE (CSV; `-`: standard output, the report then
    /// goes to standard error).
    #[arg(long, value_name = "FILE")]
    pub delays: Option<PathBuf>,
    /// Write every packet of each per-packet method to FILE (CSV:
    /// method,sender_ns,receiver_ns,delay_ns; `-`: standard output, the report then goes to
    /// standard error).
    #[arg(long = "per-packet", value_name = "FILE")]
    pub per_packet: Option<PathBuf>,
    /// Measure the complete records of a capture that ends early (cut inside a record, or at a
    /// pcap record whose length field is damaged), instead of failing.
    #[arg(long)]
    pub allow_truncated: bool,
    /// Accept captures where most delays are negative (R's clock known to lag S's).
    #[arg(long)]
    pub allow_negative_delay: bool,
    /// R's clock against S's: `report` fits its relative skew and steps from the floor of the
    /// delays (checks.clock); `correct` also removes them from R's timestamps before the
    /// truth and every method see them (reads both captures twice: files only).
    #[arg(long, value_enum, default_value = "report", value_name = "MODE")]
    pub clock: ClockArg,
    /// Measure only the packets this expression selects in both captures, e.g. "src host
    /// 10.0.0.1 and dst host 10.0.0.2" (host, net A/N, port, src/dst, proto tcp|udp|icmp|
    /// icmp6|N, and, or, not, parentheses). Packets of its mirror image (the same
    /// conversations R→S) are matched apart and give the clocks' offset (checks.clock).
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<owl_trace::filter::Filter>,
    /// Print one JSON object per interval as it closes, then a summary object (JSON Lines).
    #[arg(long, conflicts_with = "json")]
    pub jsonl: bool,
    /// Timestamp disorder tolerated within one capture before an interval closes.
    #[arg(long, default_value = "10ms", value_parser = parse_duration_u64, value_name = "T")]
    pub disorder: u64,
    /// Keep up to N whole-run delays for exact quantiles; past it they come from a histogram
    /// (relative error under 0.05 %), and the output says so.
    #[arg(long, value_parser = crate::numbers::usize_arg, default_value_t = DEFAULT_EXACT_QUANTILES, value_name = "N")]
    pub exact_quantiles: usize,
    /// Interval rows of the text report (default: every one).
    #[arg(long, value_parser = crate::numbers::usize_arg, value_name = "N", conflicts_with_all = ["json", "jsonl"])]
    pub rows: Option<usize>,
    /// Accept intervals so short that the synopses dwarf the traffic (refused by default).
    #[arg(long)]
    pub allow_short_intervals: bool,
    /// Measure packets outside the window both points captured too (by default a lead-in or
    /// lead-out only one capture has is trimmed and counted, not taken for loss).
    #[arg(long)]
    pub no_trim: bool,
    /// Measure only pcapng interface N (numbered from 0 in file order) of both captures.
    #[arg(long, value_parser = crate::numbers::u32_arg, value_name = "N")]
    pub interface: Option<u32>,
    /// Measure only interface N of the sender's capture (overrides --interface for S).
    #[arg(long, value_parser = crate::numbers::u32_arg, value_name = "N")]
    pub sender_interface: Option<u32>,
    /// Measure only interface N of the receiver's capture (overrides --interface for R).
    #[arg(long, value_parser = crate::numbers::u32_arg, value_name = "N")]
    pub receiver_interface: Option<u32>,
}

impl CompareArgs {
    /// The library's options, for a report rendered as `mode`.
    fn options(&self, mode: Mode) -> Result<CompareOptions> {
        let names = methods::parse_list(&self.methods)?;
        let intervals = self.agreed.intervals()?;
        let cut = self.agreed.cut(intervals)?;
        let build = self.agreed.options();
        let overrides = self.agreed.overrides()?;
        for m in overrides.methods() {
            if !names.contains(&m) {
                bail!("--method-config sets {m}, which is not among --methods");
            }
        }
        if self.top.is_some() && !self.per_flow {
            bail!("--top selects flows of the --per-flow report: pass --per-flow too");
        }
        let read = |own: Option<u32>| self.agreed.read_options(own.or(self.interface));
        Ok(CompareOptions {
            sender: self.sender.clone(),
            receiver: self.receiver.clone(),
            methods: names,
            build,
            overrides,
            intervals,
            cut,
            read: [read(self.sender_interface), read(self.receiver_interface)],
            horizon_ns: self.agreed.horizon,
            disorder_ns: self.disorder,
            exact_quantiles: self.exact_quantiles,
            per_flow: self.per_flow,
            per_class: self.per_class,
            flows_limit: match mode {
                Mode::Text => Some(self.top.unwrap_or(TEXT_TOP)),
                _ => self.top,
            },
            trim: !self.no_trim,
            allow_truncated: self.allow_truncated,
            allow_negative_delay: self.allow_negative_delay,
            allow_short_intervals: self.allow_short_intervals,
            keep_intervals: mode == Mode::Json,
            clock: match self.clock {
                ClockArg::Report => ClockMode::Report,
                ClockArg::Correct => ClockMode::Correct,
            },
            filter: self.filter.clone(),
        })
    }
}

/// `--clock`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClockArg {
    /// Fit and report R's skew and steps (checks.clock).
    Report,
    /// Fit them in a first pass, then remove them from R's timestamps.
    Correct,
}

/// How the report is written while the captures stream.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Text,
    Json,
    Jsonl,
}

/// Flows the text report lists without `--top`.
const TEXT_TOP: usize = 10;

/// Interval reports as they close: text rows or JSON lines.
struct Rows<'o, W: Write> {
    mode: Mode,
    table: IntervalTable,
    out: &'o mut W,
}

impl<W: Write> IntervalSink for Rows<'_, W> {
    fn interval(&mut self, report: &IntervalReport) -> Result<()> {
        if self.mode == Mode::Text {
            return self.table.row(self.out, report);
        }
        let line = Line {
            kind: "interval",
            body: report,
        };
        serde_json::to_writer(&mut *self.out, &line)?;
        writeln!(self.out)?;
        Ok(())
    }

    fn end(&mut self) -> Result<()> {
        match self.mode {
            Mode::Text => self.table.finish(self.out),
            _ => Ok(()),
        }
    }
}

pub fn run(args: CompareArgs) -> Result<()> {
    // `--delays -` / `--per-packet -`: that CSV on standard output, the report on standard
    // error (as `tcpdump -w -` leaves its messages there)
    let dash = |p: &Option<PathBuf>| p.as_deref() == Some(std::path::Path::new("-"));
    let (delays_out, per_packet_out) = (dash(&args.delays), dash(&args.per_packet));
    if delays_out && per_packet_out {
        bail!("--delays - and --per-packet -: only one of them can go to standard output");
    }
    // standard output as a CSV sink, taken by the one output that asked for it
    let mut csv_stdout = std::io::stdout();
    let mut stdout_sink = Some(CsvOut::Writer(
        "standard output".into(),
        &mut csv_stdout as &mut dyn Write,
    ));
    let mut out: Box<dyn Write> = if delays_out || per_packet_out {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    };
    let mode = match (args.jsonl, args.json) {
        (true, _) => Mode::Jsonl,
        (_, true) => Mode::Json,
        _ => Mode::Text,
    };
    let opts = args.options(mode)?;
    let mut notice = |n: Notice| match n {
        Notice::Warning(s) => eprintln!("owl: warning: {s}"),
        Notice::Note(s) => eprintln!("owl: note: {s}"),
        Notice::Wrote { path, packets } if !args.json => {
            eprintln!("owl: wrote {packets} packets to {}", path.display())
        }
        Notice::Wrote { .. } => {}
    };
    let table = opts.methods.iter().filter(|n| **n != methods::EXACT);
    let mut rows = Rows {
        mode,
        table: IntervalTable::new(args.rows, table.map(|n| n.to_string()).collect()),
        out: &mut out,
    };
    let report = compare(
        &opts,
        &mut CompareSinks {
            intervals: (mode != Mode::Json).then_some(&mut rows as &mut dyn IntervalSink),
            delays: match delays_out {
                true => stdout_sink.take(),
                false => args.delays.clone().map(CsvOut::File),
            },
            per_packet: match per_packet_out {
                true => stdout_sink.take(),
                false => args.per_packet.clone().map(CsvOut::File),
            },
            unmatched: args.unmatched.clone(),
            progress: true,
            notices: Some(&mut notice),
        },
    )?;
    match mode {
        Mode::Json => {
            serde_json::to_writer_pretty(&mut out, &report)?;
            writeln!(out)?;
        }
        Mode::Jsonl => {
            let line = Line {
                kind: "summary",
                body: &report,
            };
            serde_json::to_writer(&mut out, &line)?;
            writeln!(out)?;
        }
        Mode::Text => text::compare(&mut out, &report, args.top.unwrap_or(TEXT_TOP))?,
    }
    Ok(())
}
