//! `owl estimate`: two synopsis files (one per point) into estimates, interval by interval.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use std::sync::Arc;

use owl_core::cut::{Cut, CutTally, Held, Neighbours, PointCut, decode_point_cut};
use owl_core::method::{Combiner, Estimate, Method, PointSynopsis, Role};
use owl_core::pipeline::join::{Held as JoinHeld, Join, Verdict};
use owl_core::pipeline::{NoTimer, PointSide, join_interval};
use owl_core::units::format_ns;
use owl_core::wire::{Block, StreamReader, SynopsisFile};
use owl_trace::lockstep::Source;

use crate::methods;
use crate::report::{
    self, Check, EstimateChecks, EstimateClockCheck, EstimateInterval, EstimateIntervals,
    EstimateOverall, EstimateReport, EstimateTrimCheck, IntervalsCheck, Line, PacketCounts, Status,
};

#[derive(Args, Clone, Debug)]
#[command(
    after_help = "The files come from `owl record` at each point. A pair recorded with \
different methods, configurations, intervals, identity seeds or identity bytes is refused with \
the name of the field that differs and both values. Each interval shows the packets S sent and \
R received in it (each point's packet counter, recorded with its synopsis) and the loss rate \
(sent - received) / sent: packets in flight at a boundary count in S's interval and in R's \
next one, so a single interval can show a negative rate; over the run it is the loss (less R's \
duplicates). lost is the method's own estimate, where it gives one. An interval only one point recorded is estimated against an empty synopsis \
of the other (everything lost, or everything unexpected), unless it comes before the other \
point's first interval or after its last: that point was not recording, and such a lead-in or \
lead-out is left out and counted (--no-trim estimates it). An interval at the edge of one \
point's capture, where the other recorded beyond it (S's just before R's first, R's first and \
last, and under --cut clock S's first and R's just after S's last), holds only part of what the \
other point took: it is shown with \"edge\" saying why and its loss rate withheld, and left out \
of the totals. A negative mean delay in most \
intervals is refused (files recorded with their roles swapped?) unless \
--allow-negative-delay. The text ends with the checks: intervals at both points, trimmed, \
clock.

Examples:
  owl estimate S.owl R.owl
  owl estimate S.owl R.owl --json | jq '.intervals[] | [.start_ns, .mean_ns]'"
)]
pub struct EstimateArgs {
    /// Synopsis file recorded at the sender point.
    pub sender: PathBuf,
    /// Synopsis file recorded at the receiver point.
    pub receiver: PathBuf,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Print one JSON object per interval as it is estimated, then a summary object.
    #[arg(long, conflicts_with = "json")]
    pub jsonl: bool,
    /// Accept a negative mean delay in most intervals (R's clock known to lag S's).
    #[arg(long)]
    pub allow_negative_delay: bool,
    /// Estimate intervals only one point recorded before the other started or after it
    /// stopped, too (by default they are left out and counted).
    #[arg(long)]
    pub no_trim: bool,
}

/// What the merge-join of the two files found.
#[derive(Default)]
struct Tally {
    /// Intervals estimated that only S, only R, both recorded.
    intervals: [u64; 3],
    /// Intervals left out that only S, only R recorded (lead-in, lead-out).
    trimmed: [u64; 2],
    /// Intervals at the edge of S's, R's capture ([`Edges`]): shown, not in the totals.
    edges: [u64; 2],
    /// Why, each reason once.
    edge_reasons: Vec<&'static str>,
    /// Intervals with a negative and a non-negative mean.
    negative: u64,
    positive: u64,
}

/// Where an interval lies against the two captures' edges. One point's capture began or ended
/// inside an interval the other recorded beyond: its counters cover only part of it, so its
/// loss rate is no loss (packets the other took while it was not recording are neither lost
/// nor unexpected), and no synopsis tells how many such packets there were. Under a delimiter
/// cut S's own edges are cut at its packets ([`owl_core::cut`]): only R's are edges. Under a
/// clock cut S's last interval is not one: R's interval after it holds the packets in flight
/// at its end however S stopped, and is the edge; what S's last misses (packets sent after S
/// stopped, before the boundary) is told from no boundary's packets in flight.
struct Edges {
    /// Which points hold the interval.
    has: [bool; 2],
    delimited: bool,
    /// Each file's first interval.
    first: [Option<u64>; 2],
    /// Whether each file has no interval after this one.
    ended: [bool; 2],
    /// S's last interval before this one.
    s_last: Option<u64>,
}

impl Edges {
    /// Whose capture edge interval `k` is (0 S, 1 R), and why; `None` inside both.
    fn of(&self, k: u64) -> Option<(usize, &'static str)> {
        let [s_first, r_first] = self.first;
        let later = |a: Option<u64>, b: Option<u64>| matches!((a, b), (Some(a), Some(b)) if a > b);
        let (r_later, s_later) = (later(r_first, s_first), later(s_first, r_first));
        let next = k.checked_add(1);
        match self.has {
            // R holds none of it outside R's first interval's window, which under a delimiter
            // cut is R's own lead-in: every packet of it counts as lost
            [true, false] if r_later && r_first == next => Some((
                1,
                "R's capture began after S's interval just before R's first: it holds at most the packets in flight at its end",
            )),
            // R may have started at its boundary (then whole), or inside it: no synopsis says
            [_, true] if r_later && r_first == Some(k) => Some((
                1,
                "R's capture began inside its first interval, or at its start, and S recorded before it: what S sent before R started is not lost",
            )),
            [true, true] if self.ended[1] && !self.ended[0] => Some((
                1,
                "R's capture ended inside its last interval, which S recorded to its end: what reached R's link after it stopped is not lost",
            )),
            [true, _] if !self.delimited && s_later && s_first == Some(k) => Some((
                0,
                "S's capture began inside its first interval, which R recorded from its start: what R took of packets sent before S started is not unexpected",
            )),
            [false, true]
                if !self.delimited
                    && self.ended[0]
                    && self.s_last.and_then(|l| l.checked_add(1)) == Some(k) =>
            {
                Some((
                    0,
                    "R's interval just after S's last holds S's last packets in flight and any sent after S stopped (a clock cut)",
                ))
            }
            _ => None,
        }
    }
}

impl Tally {
    /// What the intervals check adds of the edges.
    fn edges_said(&self) -> String {
        let n = self.edges[0] + self.edges[1];
        if n == 0 {
            return String::new();
        }
        format!(
            "; {n} at the edge of one point's capture, shown with their loss withheld and left out of the totals ({})",
            self.edge_reasons.join("; ")
        )
    }

    fn checks(&self, method: &str, trim: bool, overall: &Estimate) -> EstimateChecks {
        let [s_only, r_only, both] = self.intervals;
        let spans = Check {
            status: if s_only + r_only > 0 {
                Status::Warning
            } else {
                Status::Ok
            },
            summary: (if s_only + r_only > 0 {
                format!(
                    "{both} intervals recorded at both points; {s_only} only at S (everything lost) and {r_only} only at R (everything unexpected) while both were recording"
                )
            } else {
                format!("{both} intervals, every one recorded at both points")
            }) + &self.edges_said(),
            data: IntervalsCheck {
                both,
                sender_only: s_only,
                receiver_only: r_only,
                edges: self.edges,
            },
        };
        let trimmed = Check {
            status: if !trim || self.trimmed == [0, 0] {
                Status::Ok
            } else {
                Status::Adjusted
            },
            summary: if !trim {
                "off (--no-trim): intervals only one point recorded are estimated".into()
            } else if self.trimmed == [0, 0] {
                "no interval before one point started or after it stopped".into()
            } else {
                format!(
                    "{} intervals only S recorded and {} only R recorded, before the other started or after it stopped: left out (--no-trim estimates them)",
                    self.trimmed[0], self.trimmed[1]
                )
            },
            data: EstimateTrimCheck {
                enabled: trim,
                intervals: self.trimmed,
            },
        };
        let clock = Check {
            status: if self.negative > 0 {
                Status::Warning
            } else {
                Status::Ok
            },
            summary: if self.negative > 0 {
                format!(
                    "the {method} mean is negative in {} of {} intervals: R's clock is behind S's, and every delay is off by the offset",
                    self.negative,
                    self.negative + self.positive
                )
            } else {
                format!(
                    "no negative mean delay (overall {})",
                    overall.mean_ns.map(format_ns).unwrap_or_else(|| "-".into())
                )
            },
            data: EstimateClockCheck {
                negative_intervals: self.negative,
                intervals_with_mean: self.negative + self.positive,
            },
        };
        EstimateChecks {
            cuts: None,
            intervals: spans,
            trimmed,
            clock,
        }
    }
}

fn open(path: &Path) -> Result<StreamReader<Box<dyn std::io::Read + Send>>> {
    let src = Source::parse(path);
    let r = src
        .open()
        .map_err(|e| anyhow!("{}: cannot read: {e}", path.display()))?;
    StreamReader::open(Box::new(std::io::BufReader::new(r)) as Box<dyn std::io::Read + Send>)
        .map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// The next block of a file, warning once where a cut-short or torn file ends (and saying
/// why in `torn`).
fn next(
    f: &mut StreamReader<Box<dyn std::io::Read + Send>>,
    path: &Path,
    torn: &mut Option<String>,
) -> Option<Block> {
    match f.next_block() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("owl: warning: {}: {e}", path.display());
            *torn = Some(e.to_string());
            None
        }
    }
}

/// One file, read block by block, each block's cut data decoded as it is read (so that a
/// receiver's interval can take its tail from the next block's head).
struct Points {
    f: StreamReader<Box<dyn std::io::Read + Send>>,
    path: PathBuf,
    current: Option<(Block, PointCut)>,
    /// Why the file ended before its end (cut short or torn).
    torn: Option<String>,
}

impl Points {
    fn new(f: StreamReader<Box<dyn std::io::Read + Send>>, path: &Path) -> Result<Points> {
        let mut p = Points {
            f,
            path: path.to_path_buf(),
            current: None,
            torn: None,
        };
        p.advance()?;
        // a file torn before its first complete interval has nothing to estimate
        if let (None, Some(why)) = (&p.current, &p.torn) {
            bail!(
                "{}: no complete interval before the file ends ({why}): nothing to estimate",
                path.display()
            );
        }
        Ok(p)
    }

    /// Read the next block (warning once where a cut-short or torn file ends).
    fn advance(&mut self) -> Result<()> {
        self.current = match next(&mut self.f, &self.path, &mut self.torn) {
            None => None,
            Some(b) => {
                let cut = if b.cut.is_empty() {
                    PointCut::None
                } else {
                    let mut r = owl_core::wire::WireReader::new(&b.cut);
                    decode_point_cut(&mut r)
                        .and_then(|c| r.finish("cut data").map(|_| c))
                        .map_err(|e| {
                            anyhow!(
                                "{}: interval {}: cut data: {e}",
                                self.path.display(),
                                b.index
                            )
                        })?
                };
                Some((b, cut))
            }
        };
        Ok(())
    }

    fn index(&self) -> Option<u64> {
        self.current.as_ref().map(|(b, _)| b.index)
    }

    /// The point's side of interval `k` (its block, if it is `k`; then the next one is read):
    /// synopsis, packets (`None` in files older than version 3, which do not count them) and
    /// cut data.
    fn take(&mut self, method: &dyn Method, role: Role, k: u64) -> Result<Option<Side>> {
        if self.index() != Some(k) {
            return Ok(None);
        }
        let (b, cut) = self.current.take().expect("checked");
        let p = method
            .decode_point(role, &b.payload)
            .map_err(|e| anyhow!("{}: interval {k}: {e}", self.path.display()))?;
        self.advance()?;
        Ok(Some(Side {
            synopsis: p,
            packets: b.packets,
            cut,
        }))
    }

    /// The head this file's next block holds if it is interval `k` (what R held around its
    /// start).
    fn head_of(&self, k: u64) -> Arc<Held> {
        match &self.current {
            Some((b, PointCut::Receiver { head, .. })) if b.index == k => head.clone(),
            _ => Arc::new(Held::default()),
        }
    }

    /// Note what S named of the boundaries of its next block's interval (a sender's file).
    fn note_next(&self, n: &mut Neighbours) {
        if let Some((b, cut)) = &self.current {
            n.note_cut(b.index, cut);
        }
    }
}

/// One point's side of an interval as its file holds it.
struct Side {
    synopsis: Box<dyn PointSynopsis>,
    packets: Option<u64>,
    cut: PointCut,
}

pub fn run(a: EstimateArgs) -> Result<()> {
    if a.sender.as_os_str() == "-" && a.receiver.as_os_str() == "-" {
        return Err(anyhow!(
            "only one of the two files can be standard input (-)"
        ));
    }
    let s = open(&a.sender)?;
    let r = open(&a.receiver)?;
    SynopsisFile::check_pair(&s.header, &r.header)
        .map_err(|e| anyhow!("{} and {}: {e}", a.sender.display(), a.receiver.display()))?;
    let method: Arc<dyn Method> = Arc::from(
        methods::from_config(&s.header.method, &s.header.config)
            .with_context(|| a.sender.display().to_string())?,
    );
    let header = s.header.clone();
    let iv = header.intervals;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let text = !a.json && !a.jsonl;
    if text {
        report::text::estimate_head(&mut out, &header.method)?;
    }
    // Merge-join the two files' intervals (ascending in each), one pair in memory at a time;
    // each interval is printed as it is estimated.
    let mut combiner = Combiner::default();
    let mut kept: Vec<EstimateInterval> = Vec::new();
    let cut = Cut::from_pairs(&header.cut)
        .map_err(|e| anyhow!("{}: the interval cut: {e}", a.sender.display()))?;
    let delimited = matches!(cut, Cut::Delimiter(_));
    let counted = s.version >= 3 && r.version >= 3;
    let mut sp = Points::new(s, &a.sender)?;
    let mut rp = Points::new(r, &a.receiver)?;
    // R's blocks before its first interval with a packet outside its windows hold only what it
    // received around the boundary it started next to (a lead-in of its windows: the packets of
    // that interval before it started are missing): R starts recording with its first such
    // interval, as the live receiver does
    while delimited
        && rp
            .current
            .as_ref()
            .is_some_and(|(b, _)| b.packets == Some(0))
    {
        rp.advance()?;
    }
    // Which intervals are estimated and which are a lead-in or lead-out (an interval only one
    // point recorded before the other's first or after the other's last: that point was not
    // recording, not loss) is the live receiver's join, fed each file's next block as it is
    // read (`owl_core::pipeline::join`): S's interval just before R's first is kept (under a
    // clock cut the packets in flight cross into R's next interval; under a delimiter cut R's
    // window around the boundary holds them), and under a clock cut R's just after S's last.
    let mut join = if delimited {
        Join::delimited()
    } else {
        Join::new()
    };
    let files = [&a.sender, &a.receiver];
    // a file's next block (or its end), as the join takes it: blocks come in ascending order
    let announce = |join: &mut Join, p: usize, next: Option<u64>| -> Result<()> {
        match next {
            Some(n) => {
                join.have(p, n, JoinHeld::Data)
                    .map_err(|e| anyhow!("{}: {e}", files[p].display()))?;
                join.below(p, n.saturating_add(1));
            }
            None => join.done(p),
        }
        Ok(())
    };
    announce(&mut join, 0, sp.index())?;
    announce(&mut join, 1, rp.index())?;
    let mut tally = Tally::default();
    let mut cuts = CutTally::default();
    let mut withheld = owl::compare::Withheld::default();
    // what S named of the boundaries of its intervals read so far (the next one included)
    let mut neighbours = Neighbours::default();
    sp.note_next(&mut neighbours);
    // packets over the intervals estimated, per point (`None` once a file does not count them)
    let mut totals = [Some(0u64); 2];
    // each file's first interval, and S's last one taken so far (for the edges)
    let (s_first, r_first) = (sp.index(), rp.index());
    let mut s_last: Option<u64> = None;
    let mut edge_bytes = 0;
    while let Some((k, verdict)) = join.decide() {
        let has = [sp.index() == Some(k), rp.index() == Some(k)];
        let s_side = sp.take(&*method, Role::Sender, k)?;
        let r_side = rp.take(&*method, Role::Receiver, k)?;
        for (p, next) in [(0, sp.index()), (1, rp.index())] {
            if has[p] {
                announce(&mut join, p, next)?;
            }
        }
        sp.note_next(&mut neighbours);
        // k's start is named with k − 1, and what follows needs nothing older
        neighbours.forget_below(k);
        // R held packets around a boundary of an interval S had none of and R recorded none
        // of outside its windows: what it held belongs to the intervals S had, or to none (a
        // lead-in or lead-out of the windows): nothing to measure, nothing to say
        if delimited && s_side.is_none() && r_side.as_ref().is_some_and(|x| x.packets == Some(0)) {
            continue;
        }
        if !a.no_trim && matches!(verdict, Verdict::Trimmed { .. }) {
            tally.trimmed[usize::from(has[1])] += 1;
            continue;
        }
        let (sent, received) = (
            s_side
                .as_ref()
                .map_or((counted).then_some(0), |x| x.packets),
            r_side
                .as_ref()
                .map_or((counted).then_some(0), |x| x.packets),
        );
        // the file holds S's intervals in order, and its next is noted: S passed k + 1 where
        // its next is later (at its end, its capture stopped: it saw nothing after it)
        let [previous_end, next_start] = neighbours.around(k, false);
        let side = |x: Option<Side>, tail: Option<Arc<Held>>| {
            x.map(|x| PointSide {
                packets: x.packets.unwrap_or(0),
                synopses: vec![x.synopsis],
                cut: match (x.cut, tail) {
                    (PointCut::Receiver { head, .. }, Some(tail)) => {
                        PointCut::Receiver { head, tail }
                    }
                    (c, _) => c,
                },
            })
        };
        let sender_absent = s_side.is_none();
        let joined = join_interval(
            std::slice::from_ref(&method),
            &iv,
            k,
            side(s_side, None),
            side(r_side, Some(rp.head_of(k + 1))),
            [previous_end.as_ref(), next_start.as_ref()],
            &mut NoTimer,
        );
        // R held packets here that the cut put in a neighbouring interval, and S had none:
        // nothing to measure (a window's interval, not one a point recorded)
        if delimited && sender_absent && joined.packets == [0, 0] {
            continue;
        }
        // an interval at the edge of one point's capture, where the other point recorded
        // beyond it: shown, its loss withheld and its packets left out of the totals
        let edge = Edges {
            has,
            delimited,
            first: [s_first, r_first],
            ended: [sp.index().is_none(), rp.index().is_none()],
            s_last,
        }
        .of(k);
        if has[0] {
            s_last = Some(k);
        }
        match edge {
            Some((p, why)) => {
                tally.edges[p] += 1;
                if !tally.edge_reasons.contains(&why) {
                    tally.edge_reasons.push(why);
                }
            }
            None => tally.intervals[usize::from(has[0]) + 2 * usize::from(has[1]) - 1] += 1,
        }
        if let Some(c) = &joined.cut {
            cuts.add(k, c);
        }
        let (sent, received) = (
            sent.map(|_| joined.packets[0]),
            received.map(|_| joined.packets[1]),
        );
        let mut receivers = joined.receiver.into_iter();
        let rs = receivers
            .next()
            .expect("one method")
            .map_err(|e| anyhow!("interval {k}: the receiver's side at the cut: {e}"))?;
        let ss = joined.sender.into_iter().next().expect("one method");
        let mut e = method
            .estimate(ss, rs)
            .map_err(|e| anyhow!("interval {k}: {e}"))?;
        owl_core::pipeline::withhold_unpaired(&*method, joined.cut.as_ref(), &mut e);
        match e.mean_ns {
            Some(m) if m < 0.0 => tally.negative += 1,
            Some(_) => tally.positive += 1,
            None => {}
        }
        if edge.is_some() {
            // what crossed the network for it did cross
            edge_bytes += e.bytes;
        } else {
            combiner.add(&e);
        }
        if let Some(why) = &e.reason {
            withheld.add(iv.start_ns(k), why);
        }
        // merged: an interval's report need not hold its histogram; at an edge the method's
        // count of lost packets is withheld with the loss rate (packets the other point was
        // not there to take are not lost)
        let e = Estimate {
            recovered: None,
            lost: if edge.is_some() { None } else { e.lost },
            ..e
        };
        let mut packets = PacketCounts::new(sent, received);
        match edge {
            Some(_) => packets.loss_rate = None,
            None => {
                for (t, n) in totals.iter_mut().zip([sent, received]) {
                    *t = t.zip(n).map(|(a, b)| a + b);
                }
            }
        }
        let it = EstimateInterval {
            index: k,
            start_ns: iv.start_ns(k),
            packets,
            edge: edge.map(|(_, why)| why),
            cut: joined.cut,
            estimate: e,
        };
        if a.json {
            kept.push(it);
        } else if a.jsonl {
            serde_json::to_writer(
                &mut out,
                &Line {
                    kind: "interval",
                    body: &it,
                },
            )?;
            writeln!(out)?;
        } else {
            report::text::estimate_interval(&mut out, &it)?;
        }
    }
    // one interval's own figures as they are (exact quantiles, intervals, notes); several
    // combined (quantiles from their merged delays)
    let mut overall = combiner.overall();
    overall.bytes += edge_bytes;
    if tally.negative * 2 > tally.negative + tally.positive && !a.allow_negative_delay {
        // two points that cut long packets at different bytes give them different identities,
        // which can look like anything; the files cannot tell (their snaplens are not stored)
        let or_cut = if header.identity_bytes.is_none() {
            "; or did the two points keep different bytes of long packets (different snaplens or link headers: `owl record` printed a note) without an agreed --identity-bytes?"
        } else {
            "?"
        };
        bail!(
            "the {} delay is negative in {} of {} intervals (overall {}): were the files recorded with their roles swapped (--role sender at the receiver point){or_cut} (pass --allow-negative-delay if R's clock is known to lag S's)",
            header.method,
            tally.negative,
            tally.negative + tally.positive,
            overall.mean_ns.map(format_ns).unwrap_or_else(|| "-".into())
        );
    }
    if let Some(w) = withheld.warning(&header.method, combiner.parts()) {
        eprintln!("owl: warning: {w}");
    }
    let mut checks = tally.checks(&header.method, !a.no_trim, &overall);
    if !iv.is_whole() {
        checks.cuts = Some(report::checks::cuts(&cut, &cuts, None));
    }
    for (name, status, summary) in checks.lines() {
        if status == Status::Warning {
            eprintln!("owl: warning: {name}: {summary}");
        }
    }
    let mut report = EstimateReport {
        checks,
        method: header.method.clone(),
        config: header.config.iter().cloned().collect(),
        interval_ns: iv.length_ns,
        origin_ns: iv.origin_ns,
        overall: EstimateOverall {
            packets: PacketCounts::new(totals[0], totals[1]),
            estimate: overall,
        },
        intervals: EstimateIntervals::List(kept),
    };
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else if a.jsonl {
        report.intervals = EstimateIntervals::Count(combiner.parts());
        serde_json::to_writer(
            &mut out,
            &Line {
                kind: "summary",
                body: &report,
            },
        )?;
        writeln!(out)?;
    } else {
        report::text::estimate_overall(&mut out, combiner.parts(), &report.overall)?;
        writeln!(out)?;
        report::text::checks(&mut out, &report.checks.lines())?;
    }
    Ok(())
}
