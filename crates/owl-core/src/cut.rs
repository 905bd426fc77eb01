//! Interval cuts both points agree on: S cuts by its clock and names each interval's first
//! packets, its **delimiters**; R cuts at the first of them it receives.
//!
//! # Why not each point by its own clock
//!
//! RDA §III-A pipelines clock-delimited intervals: each point cuts its stream at `t0 + i·T` by
//! its own clock ([`Cut::Clock`]). The packets in flight at a boundary — a mean delay's worth of
//! traffic — are then in interval `i − 1` at S and in interval `i` at R. RDA decodes them as
//! set differences; every aggregate synopsis absorbs them silently. LDA (ToN'12 §III) assumes
//! "the sender and receiver compute the synopses over the same set of packets", which the paper
//! gets from in-band Start/End control packets on a FIFO link: one LDA row that lost a packet
//! and gained one from the previous interval has equal counters and a timestamp sum off by up to
//! the interval's length, and passes LDA's only check. OPA (§II) cuts its segments at
//! **delimiter packets** both points recognise, which is what a passive point can do in place of
//! control packets. owl's delimiter cut ([`Cut::Delimiter`]) is built on that idea.
//!
//! # The rule
//!
//! - **S** cuts by its clock, as before: interval `i` holds the packets S stamps in
//!   `[b_i, b_{i+1})`, `b_i = t0 + i·T`. Its delimiters for boundary `i` are the identities of
//!   its first [`Delimiters::count`] distinct packets of interval `i` (in capture order) stamped
//!   before `b_i + after`. They travel with its synopsis of interval `i` (and of `i − 1`, as the
//!   delimiters of its end): a few bytes an interval.
//! - **R** holds, raw, what it receives within `[b_i − before, b_i + after)` of each boundary by
//!   its own clock (its **window**); everything else goes straight into the synopses of the
//!   interval its clock says. Once S has named the delimiters, the first held packet that is one
//!   of them is the cut: held packets before it belong to interval `i − 1`, it and those after it
//!   to interval `i`. On a FIFO path that is exactly S's cut: every packet S sent before its
//!   first delimiter arrives before it, every packet sent after arrives after. A lost delimiter
//!   costs nothing while another one arrives (the packets S sent before the second one are the
//!   lost first one, if delimiters are consecutive packets: they are). What is left are packets
//!   reordered across the cut itself.
//! - **S silent**: S named no delimiter (it sent nothing in the first `after` of the interval),
//!   so every packet R held there was sent before `b_i`: all go to interval `i − 1`.
//! - **S ended**: S's stream ended (its capture stopped, or its file ran out) before it passed
//!   `b_i + after`, so it cannot know whether packets followed: in place of the delimiters it
//!   names its **last** packets ([`Named::Last`]). R cuts after the last of them it holds: on a
//!   FIFO path every packet it received after S's last one was sent after S stopped looking, so
//!   it is none of S's interval `i − 1`. (Read as silence, R would put every packet of its
//!   window in `i − 1`: a stopped sender's last interval "received" more than it sent.)
//! - **Fallback**: none of S's delimiters is among R's held packets (all lost, delayed beyond
//!   `after`, or R's clock ahead or behind S's by more than the window allows), S's delimiters
//!   are unknown (S recorded nothing of the interval), S ended and none of its last packets is
//!   among R's held ones, or R's hold overflowed its cap
//!   ([`HOLD_CAP`]). R then cuts the held packets by its clock, and says so: the two intervals
//!   on either side of that boundary may hold packets of the other ([`Fallback`]). It never cuts
//!   elsewhere silently.
//!
//! Memory: R holds `before + after` of traffic per boundary, at most two windows at a time,
//! capped; S holds `count` identities per open interval. An interval's result waits `after`
//! (plus the capture disorder) past its end at R.
//!
//! # Offline and live alike
//!
//! R cannot know the cut while it records (`owl record` at R never hears from S), so it keeps
//! the synopsis of the interval's **core** (what no window holds) and the held packets, and
//! the cut is made where the two points' data meet ([`split`], then [`assemble`]): `owl
//! compare` in memory, `owl estimate` from the two files (R's file holds each window raw: local
//! state, never shipped), the live receiver from S's frame. Each assembles R's synopsis of
//! interval `i` as the held packets after cut `i`, then the core ([`PointSynopsis::merge`]),
//! then the held packets before cut `i + 1`, so all three give the same bytes.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::interval::Intervals;
use crate::method::{Method, MethodError, PointSynopsis, Role};
use crate::record::{FlowKey, PacketRecord};
use crate::wire::{DecodeError, WireReader, WireWriter};

/// Delimiters S names per boundary by default.
pub const DEFAULT_DELIMITERS: u8 = 8;
/// Most delimiters a boundary may have.
pub const MAX_DELIMITERS: u8 = 64;
/// Longest default `after` of R's window: 250 ms (see [`Cut::delimiter_fitted`]).
pub const DEFAULT_AFTER_NS: u64 = 250_000_000;
/// Longest default `before`: 10 ms (NTP-disciplined clocks are within a few ms).
pub const DEFAULT_BEFORE_NS: u64 = 10_000_000;
/// An explicit window holds `after / BEFORE_DIVISOR` ahead of each boundary.
pub const BEFORE_DIVISOR: u64 = 5;
/// Most packets R holds in one window: past it, the boundary falls back to R's clock.
pub const HOLD_CAP: usize = 1 << 20;

/// How the two points cut their streams into intervals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "rule", rename_all = "lowercase")]
pub enum Cut {
    /// Each point by its own clock (RDA §III-A): packets in flight at a boundary are in
    /// different intervals at S and R.
    Clock,
    /// S by its clock, R at S's delimiters (see the module doc).
    Delimiter(Delimiters),
}

/// The delimiter cut's parameters; both points must agree on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Delimiters {
    /// Packets S names per boundary: its first `count` of the interval.
    pub count: u8,
    /// R holds from this long ahead of each boundary, ns (its clock).
    pub before_ns: u64,
    /// ... to this long past it; S names only packets it stamped within it.
    pub after_ns: u64,
}

/// A cut that cannot work with the intervals given.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CutError {
    #[error(
        "--cut-window {after_ns} ns holds {before_ns} ns ahead of each boundary and {after_ns} ns past it, {sum} ns, which does not fit the {length_ns} ns intervals (the windows of two boundaries would meet): use a window below {max} ns, longer intervals, or --cut clock"
    )]
    WindowTooLong {
        after_ns: u64,
        before_ns: u64,
        sum: u64,
        length_ns: u64,
        max: u64,
    },
    #[error("a delimiter cut needs a window of at least 1 µs, not {0} ns")]
    WindowTooShort(u64),
    #[error("delimiters per boundary must be 1 to {MAX_DELIMITERS}, not {0}")]
    Count(u64),
    #[error("unknown cut '{0}' (known: delimiter, clock)")]
    Unknown(String),
}

impl Cut {
    /// The default delimiter cut for `intervals` and a largest delay of `horizon_ns`: R
    /// holds from `min(10 ms, T/20)` ahead of each boundary to `min(250 ms, horizon, 5T/12)`
    /// past it (the two together at most half an interval): 2.5 ms and 20.8 ms for 50 ms
    /// intervals, 10 ms and 104 ms for 250 ms, 10 ms and 250 ms for 1 s. One interval over the
    /// whole capture has no boundary: [`Cut::Clock`].
    pub fn delimiter_fitted(intervals: Intervals, horizon_ns: u64) -> Cut {
        if intervals.is_whole() {
            return Cut::Clock;
        }
        let t = intervals.length_ns;
        let before = DEFAULT_BEFORE_NS.min(t / 20);
        let after = DEFAULT_AFTER_NS
            .min(horizon_ns)
            .min(t / 12 * 5)
            .min((t / 2).saturating_sub(before))
            .max(1);
        Cut::Delimiter(Delimiters {
            count: DEFAULT_DELIMITERS,
            before_ns: before,
            after_ns: after,
        })
    }

    /// A delimiter cut with a window of `after_ns` past each boundary (and a fifth of it
    /// ahead), checked against `intervals`.
    pub fn delimiter(after_ns: u64, count: u64, intervals: Intervals) -> Result<Cut, CutError> {
        if !(1..=MAX_DELIMITERS as u64).contains(&count) {
            return Err(CutError::Count(count));
        }
        if after_ns < 1_000 {
            return Err(CutError::WindowTooShort(after_ns));
        }
        if intervals.is_whole() {
            return Ok(Cut::Clock);
        }
        let before_ns = after_ns / BEFORE_DIVISOR;
        let sum = before_ns.saturating_add(after_ns);
        if sum >= intervals.length_ns {
            return Err(CutError::WindowTooLong {
                after_ns,
                before_ns,
                sum,
                length_ns: intervals.length_ns,
                max: intervals.length_ns * BEFORE_DIVISOR / (BEFORE_DIVISOR + 1),
            });
        }
        Ok(Cut::Delimiter(Delimiters {
            count: count as u8,
            before_ns,
            after_ns,
        }))
    }

    /// The delimiter parameters, for a delimiter cut.
    pub fn delimiters(&self) -> Option<&Delimiters> {
        match self {
            Cut::Clock => None,
            Cut::Delimiter(d) => Some(d),
        }
    }

    /// `(field, value)` pairs both points must agree on (synopsis files, live handshakes).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        match self {
            Cut::Clock => vec![("cut", "clock".into())],
            Cut::Delimiter(d) => vec![
                ("cut", "delimiter".into()),
                ("cut_delimiters", d.count.to_string()),
                ("cut_before_ns", d.before_ns.to_string()),
                ("cut_after_ns", d.after_ns.to_string()),
            ],
        }
    }

    /// The cut [`pairs`](Self::pairs) wrote (absent fields: a clock cut, as files and peers
    /// older than delimiter cuts made).
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Cut, String> {
        let get = |k: &str| pairs.iter().find(|(f, _)| f == k).map(|(_, v)| v.as_str());
        let num = |k: &str| -> Result<u64, String> {
            get(k)
                .ok_or_else(|| format!("delimiter cut without {k}"))?
                .parse()
                .map_err(|_| format!("{k} is not a number"))
        };
        match get("cut") {
            None | Some("clock") => Ok(Cut::Clock),
            Some("delimiter") => {
                let count = num("cut_delimiters")?;
                if !(1..=MAX_DELIMITERS as u64).contains(&count) {
                    return Err(CutError::Count(count).to_string());
                }
                Ok(Cut::Delimiter(Delimiters {
                    count: count as u8,
                    before_ns: num("cut_before_ns")?,
                    after_ns: num("cut_after_ns")?,
                }))
            }
            Some(x) => Err(CutError::Unknown(x.into()).to_string()),
        }
    }

    /// A short description for reports.
    pub fn describe(&self) -> String {
        match self {
            Cut::Clock => "by each point's clock".into(),
            Cut::Delimiter(d) => format!(
                "at S's delimiters ({} a boundary; R holds {} ahead of each boundary to {} past it)",
                d.count,
                crate::units::format_ns(d.before_ns as f64),
                crate::units::format_ns(d.after_ns as f64)
            ),
        }
    }
}

impl Delimiters {
    /// The boundary whose window holds `ts` (R's clock), if any: `[b_j − before, b_j + after)`.
    #[inline]
    pub fn window_of(&self, intervals: &Intervals, ts: u64) -> Option<u64> {
        let j = intervals.index(ts.saturating_add(self.before_ns))?;
        let b = intervals.start_ns(j);
        (ts.saturating_add(self.before_ns) >= b && ts < b.saturating_add(self.after_ns))
            .then_some(j)
    }
}

/// What R received within one boundary's window, in its capture order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Held {
    pub records: Vec<PacketRecord>,
    /// Each record's position in R's stream (0 for its first record), where the point knows
    /// it (in memory; not in files): what lets the truth cut R's stream where the methods did.
    pub seqs: Vec<u64>,
    /// The window reached [`HOLD_CAP`]: its later packets went by R's clock, and so does the
    /// boundary.
    pub overflowed: bool,
}

impl Held {
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && !self.overflowed
    }
}

/// What S says of one boundary of its stream, with the interval the boundary ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Named {
    /// Its first packets stamped in `[b, b + after)` of the interval the boundary opens, at
    /// most [`Delimiters::count`], in capture order: its **delimiters**. Empty: it stamped
    /// none there (S silent).
    First(Vec<u64>),
    /// Its stream ended before it passed `b + after`, so it could not name the delimiters: its
    /// last packets (at most [`Delimiters::count`], in capture order). R cuts after the last of
    /// them it received, and by its clock where it holds none of them (said: S may have
    /// stopped inside the interval, whose packets at R then include what came after).
    Last(Vec<u64>),
    /// As [`Named::Last`], but S's stream went on to the boundary itself (a live capture
    /// stopped at the end of its interval): S watched the whole interval and saw nothing after
    /// these. Every packet R received after the last of them that it holds — or, holding none
    /// (they reached R before the window), every packet it holds — came after S stopped.
    Stopped(Vec<u64>),
}

impl Named {
    /// S said nothing of the boundary, as far as it saw: no packet in the window past it.
    pub const SILENT: Named = Named::First(Vec::new());

    /// The identities S named.
    pub fn ids(&self) -> &[u64] {
        match self {
            Named::First(ids) | Named::Last(ids) | Named::Stopped(ids) => ids,
        }
    }
}

/// What S named of each interval's two boundaries, noted as its intervals close or arrive,
/// for the intervals R joins without S's side: such an interval is cut at what S named with
/// its neighbours — the end it named with `k − 1` (its delimiters of `k`, or its last packets
/// where its stream ended in `k − 1`; silence where S has no `k − 1`: it sent nothing there)
/// and the start it named with `k + 1` (silence where S has passed `k + 1` without it, unknown
/// while it may still come). The one rule `owl compare`, `owl estimate` and the live receiver
/// join by. Memory: the intervals noted and not yet forgotten.
#[derive(Clone, Debug, Default)]
pub struct Neighbours {
    named: std::collections::BTreeMap<u64, (Vec<u64>, Named)>,
}

impl Neighbours {
    /// S named `start` and `end` for interval `k`.
    pub fn note(&mut self, k: u64, start: &[u64], end: &Named) {
        self.named.insert(k, (start.to_vec(), end.clone()));
    }

    /// S's interval `k`'s cut data, if it is a sender's: noted.
    pub fn note_cut(&mut self, k: u64, cut: &PointCut) {
        if let PointCut::Sender { start, end } = cut {
            self.note(k, start, end);
        }
    }

    /// What S named of interval `k`'s start and end: its own where it noted `k`, else its
    /// neighbours'. S has passed `k + 1` where it noted a later interval, or where `passed`
    /// says its stream went past `k + 1` while it was recording (not where its capture ended
    /// first: it saw nothing after it).
    pub fn around(&self, k: u64, passed: bool) -> [Option<Named>; 2] {
        let passed = passed || self.named.range(k.saturating_add(2)..).next().is_some();
        if let Some((start, end)) = self.named.get(&k) {
            return [Some(Named::First(start.clone())), Some(end.clone())];
        }
        let end = k
            .checked_sub(1)
            .and_then(|p| self.named.get(&p))
            .map_or(Named::SILENT, |d| d.1.clone());
        let next = match self.named.get(&(k + 1)) {
            Some(d) => Some(Named::First(d.0.clone())),
            None if passed => Some(Named::SILENT),
            None => None,
        };
        [Some(end), next]
    }

    /// Forget what S named with intervals below `k − 1` (`k − 1`'s end stays: it names `k`'s
    /// start).
    pub fn forget_below(&mut self, k: u64) {
        while let Some((&j, _)) = self.named.first_key_value() {
            if j.saturating_add(1) >= k {
                break;
            }
            self.named.pop_first();
        }
    }
}

/// Why a boundary was cut by R's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// None of S's delimiters was among the packets R held: lost, delayed past the window, or
    /// the two clocks further apart than the window allows.
    NotSeen,
    /// S's delimiters are unknown: S recorded nothing of the interval.
    Unnamed,
    /// S's stream ended before the boundary's window did, and none of the last packets it
    /// recorded was among the packets R held.
    Ended,
    /// R's hold reached its cap.
    Overflow,
}

impl Fallback {
    pub fn reason(self) -> &'static str {
        match self {
            Fallback::NotSeen => {
                "none of S's delimiters reached R within its window (lost, delayed past --cut-window, or clocks further apart than it)"
            }
            Fallback::Unnamed => "S recorded nothing of the interval, so named no delimiter",
            Fallback::Ended => {
                "S's capture ended before the boundary (none of its last packets reached R within the window), so R's packets of the interval after S stopped are in it"
            }
            Fallback::Overflow => "R's hold of the window reached its cap",
        }
    }
}

/// Where one boundary was cut in R's stream, for the truth ([`crate::pipeline::truth`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// At R's record of this position in its stream: it and the window's records after it
    /// belong after the boundary.
    At(u64),
    /// Every record of the window belongs before the boundary (S was silent, or its last
    /// packet is R's last held one).
    Before,
    /// By R's clock.
    Clock,
}

/// How one boundary was cut at R.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum BoundaryCut {
    /// At R's first sighting of S's delimiter number `nth` (0: S's first packet of the
    /// interval).
    Delimiter { nth: u8 },
    /// S named no delimiter: every packet R held belongs before the boundary.
    Silent,
    /// S's stream ended first: the packets R held after S's last packet belong after the
    /// boundary (S never saw them), the others before it.
    Ended,
    /// By R's clock, and why.
    Fallback { why: Fallback },
}

/// One boundary as R cut it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundaryReport {
    pub cut: BoundaryCut,
    /// The cut in R's stream (`None` where the held records' positions are not known: a file).
    #[serde(skip)]
    pub decision: Option<Decision>,
    /// Packets R held in the boundary's window.
    pub held: u64,
    /// Held packets the cut put on the other side of the boundary than R's clock would have:
    /// those in flight at the cut (sent before it, received after it by R's clock), or received
    /// ahead of it by a clock behind S's.
    pub crossed: u64,
}

impl BoundaryCut {
    /// The rule's name, as the JSON's `by` says it: `delimiter`, `silent`, `ended` or
    /// `fallback`.
    pub fn by(&self) -> &'static str {
        match self {
            BoundaryCut::Delimiter { .. } => "delimiter",
            BoundaryCut::Silent => "silent",
            BoundaryCut::Ended => "ended",
            BoundaryCut::Fallback { .. } => "fallback",
        }
    }
}

impl BoundaryReport {
    pub fn fell_back(&self) -> Option<Fallback> {
        match self.cut {
            BoundaryCut::Fallback { why } => Some(why),
            _ => None,
        }
    }
}

/// Which of a window's held packets belong after its boundary.
fn cut_window(held: &Held, named: Option<&Named>, boundary_ns: u64) -> (BoundaryReport, Vec<bool>) {
    let by_clock = |r: &PacketRecord| r.ts_ns >= boundary_ns;
    let clock = |why| {
        (
            BoundaryCut::Fallback { why },
            held.records.iter().map(by_clock).collect(),
        )
    };
    let (cut, after): (BoundaryCut, Vec<bool>) = match named {
        _ if held.overflowed => clock(Fallback::Overflow),
        None => clock(Fallback::Unnamed),
        Some(Named::First(ds)) if ds.is_empty() => {
            (BoundaryCut::Silent, vec![false; held.records.len()])
        }
        Some(Named::Last(last)) => {
            match held.records.iter().rposition(|r| last.contains(&r.id)) {
                Some(p) => (
                    BoundaryCut::Ended,
                    (0..held.records.len()).map(|k| k > p).collect(),
                ),
                // nothing held: nothing followed S's last packet within the window
                None if held.records.is_empty() => (BoundaryCut::Ended, Vec::new()),
                None => clock(Fallback::Ended),
            }
        }
        Some(Named::Stopped(last)) => {
            let p = held.records.iter().rposition(|r| last.contains(&r.id));
            (
                BoundaryCut::Ended,
                (0..held.records.len())
                    .map(|k| p.is_none_or(|p| k > p))
                    .collect(),
            )
        }
        Some(Named::First(ds)) => {
            let at = held
                .records
                .iter()
                .position(|r| ds.contains(&r.id))
                .map(|p| (p, ds.iter().position(|&d| d == held.records[p].id)));
            match at {
                Some((p, nth)) => (
                    BoundaryCut::Delimiter {
                        nth: nth.unwrap_or(0) as u8,
                    },
                    (0..held.records.len()).map(|k| k >= p).collect(),
                ),
                None => clock(Fallback::NotSeen),
            }
        }
    };
    let crossed = held
        .records
        .iter()
        .zip(&after)
        .filter(|&(r, &a)| a != by_clock(r))
        .count() as u64;
    let decision = match cut {
        BoundaryCut::Delimiter { .. } => after
            .iter()
            .position(|&a| a)
            .and_then(|p| held.seqs.get(p))
            .map(|&s| Decision::At(s)),
        BoundaryCut::Ended => match after.iter().position(|&a| a) {
            Some(p) => held.seqs.get(p).map(|&s| Decision::At(s)),
            None => Some(Decision::Before),
        },
        BoundaryCut::Silent => Some(Decision::Before),
        BoundaryCut::Fallback { .. } => Some(Decision::Clock),
    };
    (
        BoundaryReport {
            cut,
            decision,
            held: held.records.len() as u64,
            crossed,
        },
        after,
    )
}

/// R's share of one interval's two windows, once the cuts are known.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Split {
    /// Held packets of the interval's first window after its cut, in R's order.
    pub head: Vec<PacketRecord>,
    /// Held packets of the next window before the next cut.
    pub tail: Vec<PacketRecord>,
    pub start: Option<BoundaryReport>,
    pub end: Option<BoundaryReport>,
}

/// Cut R's two windows of interval `index`: `head` around its start, `tail` around its end,
/// with what S named of the two boundaries (`None`: unknown).
pub fn split(
    intervals: &Intervals,
    index: u64,
    head: &Held,
    tail: &Held,
    start: Option<&Named>,
    end: Option<&Named>,
) -> Split {
    let b0 = intervals.start_ns(index);
    let b1 = intervals.start_ns(index.saturating_add(1));
    let (sr, after0) = cut_window(head, start, b0);
    let (er, after1) = cut_window(tail, end, b1);
    let pick = |held: &Held, keep: &[bool], want: bool| -> Vec<PacketRecord> {
        held.records
            .iter()
            .zip(keep)
            .filter(|&(_, &a)| a == want)
            .map(|(r, _)| *r)
            .collect()
    };
    Split {
        head: pick(head, &after0, true),
        tail: pick(tail, &after1, false),
        start: (!head.is_empty() || start.is_some()).then_some(sr),
        end: (!tail.is_empty() || end.is_some()).then_some(er),
    }
}

impl Split {
    /// Packets the two windows add to the interval.
    pub fn packets(&self) -> u64 {
        (self.head.len() + self.tail.len()) as u64
    }
}

/// R's synopsis of the interval: the held packets after its cut, then its `core` (`None`:
/// R's clock put no packet in the interval outside the windows), then the held packets before
/// the next cut.
pub fn assemble(
    method: &dyn Method,
    core: Option<Box<dyn PointSynopsis>>,
    split: &Split,
) -> Result<Box<dyn PointSynopsis>, MethodError> {
    let mut s = match core {
        Some(mut core) if split.head.is_empty() => {
            core.record_batch(&split.tail);
            return Ok(core);
        }
        Some(core) => {
            let mut s = method.new_point(Role::Receiver);
            s.record_batch(&split.head);
            s.merge(core)?;
            s
        }
        None => {
            let mut s = method.new_point(Role::Receiver);
            s.record_batch(&split.head);
            s
        }
    };
    s.record_batch(&split.tail);
    Ok(s)
}

/// How R's side of one interval was cut (a delimiter cut).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntervalCut {
    /// The boundary that opens the interval (`None`: R held nothing there and S named nothing).
    pub start: Option<BoundaryReport>,
    /// The boundary that ends it.
    pub end: Option<BoundaryReport>,
    /// Held packets the cuts put in the interval.
    pub held_in: u64,
}

impl IntervalCut {
    /// Why the interval's packets at R may not be S's: a boundary of it cut by R's clock.
    pub fn fell_back(&self) -> Option<Fallback> {
        self.start
            .and_then(|b| b.fell_back())
            .or_else(|| self.end.and_then(|b| b.fell_back()))
    }
}

/// How the boundaries of a run were cut, interval by interval (the `cuts` check of `owl
/// compare`, `owl estimate` and the agents).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CutTally {
    /// Boundaries R cut (each counted once, with the interval it opens).
    pub boundaries: u64,
    /// ... at S's delimiters,
    pub delimiter: u64,
    /// ... where S sent nothing in the window (R's held packets all before it),
    pub silent: u64,
    /// ... after S's last packet, where S's stream ended before the window did,
    #[serde(default)]
    pub ended: u64,
    /// ... and by R's clock, by reason: delimiters not seen, not named, hold overflowed, S
    /// ended and none of its last packets was held.
    pub fell_back: [u64; 4],
    /// Packets in flight at a cut (placed by the delimiters across R's clock boundary), in
    /// all and at the busiest cut.
    pub crossed: u64,
    pub crossed_max: u64,
    /// Intervals one of whose boundaries fell back: their packets at R may not be S's.
    pub unpaired: u64,
    /// The first of them (at most [`CutTally::LISTED`]).
    pub unpaired_intervals: Vec<u64>,
}

impl CutTally {
    /// Unpaired intervals listed by index.
    pub const LISTED: usize = 20;

    /// Count interval `index`'s cut: its start boundary, and the interval as unpaired when
    /// either of its boundaries fell back.
    pub fn add(&mut self, index: u64, c: &IntervalCut) {
        if let Some(b) = c.start {
            self.boundaries += 1;
            match b.cut {
                BoundaryCut::Delimiter { .. } => self.delimiter += 1,
                BoundaryCut::Silent => self.silent += 1,
                BoundaryCut::Ended => self.ended += 1,
                BoundaryCut::Fallback { why } => {
                    self.fell_back[match why {
                        Fallback::NotSeen => 0,
                        Fallback::Unnamed => 1,
                        Fallback::Overflow => 2,
                        Fallback::Ended => 3,
                    }] += 1
                }
            }
            self.crossed += b.crossed;
            self.crossed_max = self.crossed_max.max(b.crossed);
        }
        if c.fell_back().is_some() {
            self.unpaired += 1;
            if self.unpaired_intervals.len() < Self::LISTED {
                self.unpaired_intervals.push(index);
            }
        }
    }

    /// Boundaries that fell back.
    pub fn fallbacks(&self) -> u64 {
        self.fell_back.iter().sum()
    }
}

/// What one point's closed interval carries for the cut.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum PointCut {
    /// A clock cut (or one interval): nothing to resolve.
    #[default]
    None,
    /// S: its delimiters of the interval's start, and what it named of its end: the next
    /// interval's delimiters, or its last packets where its stream ended first.
    Sender { start: Vec<u64>, end: Named },
    /// R: what it held around the interval's start and around its end (each window shared
    /// with the neighbouring interval).
    Receiver { head: Arc<Held>, tail: Arc<Held> },
}

/// First byte of a point's cut data in a synopsis file block.
const CUT_NONE: u8 = 0;
const CUT_SENDER: u8 = 1;
const CUT_RECEIVER: u8 = 2;

/// Most flows a held window's encoding may name, and most records: far above [`HOLD_CAP`]'s
/// share of a block, low enough that a forged count allocates nothing large.
const MAX_ENCODED_RECORDS: u64 = HOLD_CAP as u64;

/// Encode a point's cut data for a synopsis file block. R's file keeps each window once, with
/// the interval it opens (the head); a reader takes an interval's tail from the next block.
///
/// ```text
/// u8 0                                            none (clock cut)
/// u8 1 | u8 n, n × u64 | u8 m, m × u64           S: delimiters of the start, of the end
///                                                 (of the end, `m | 0x80`: its last packets,
///                                                 [`Named::Last`]; `0xff, m`: the same up to
///                                                 its stop at the boundary, [`Named::Stopped`];
///                                                 owl before them refuses both)
/// u8 2 | u8 overflowed | u64 window start ns | varint f, f × 37-byte flow key
///      | varint n, n × (varint ts − start, u64 identity, varint flow, varint IP length)
/// ```
pub fn encode_point_cut(cut: &PointCut, window_start_ns: u64, out: &mut Vec<u8>) {
    let mut w = WireWriter::new(out);
    match cut {
        PointCut::None => w.u8(CUT_NONE),
        PointCut::Sender { start, end } => {
            w.u8(CUT_SENDER);
            write_named(&mut w, &Named::First(start.clone()));
            write_named(&mut w, end);
        }
        PointCut::Receiver { head, .. } => {
            w.u8(CUT_RECEIVER);
            w.u8(head.overflowed as u8);
            w.u64(window_start_ns);
            let mut flows: Vec<FlowKey> = head.records.iter().map(|r| r.flow).collect();
            flows.sort_unstable();
            flows.dedup();
            w.varint(flows.len() as u64);
            for f in &flows {
                w.bytes(&f.canonical_bytes());
            }
            w.varint(head.records.len() as u64);
            for r in &head.records {
                w.varint(r.ts_ns.saturating_sub(window_start_ns));
                w.u64(r.id);
                w.varint(flows.binary_search(&r.flow).unwrap_or(0) as u64);
                w.varint(r.len as u64);
            }
        }
    }
}

/// Bit 7 of a named list's count: the list is S's last packets ([`Named::Last`]).
const NAMED_LAST: u8 = 0x80;
/// A byte before the count: the list is S's last packets up to its stop at the boundary
/// ([`Named::Stopped`]).
const NAMED_STOPPED: u8 = 0xff;

/// One boundary's list as S names it: `u8 n` (its delimiters), `u8 0x80 | n` (its last
/// packets) or `u8 0xff, u8 n` (its last packets, stopped at the boundary), then `n × u64`.
pub fn write_named(w: &mut WireWriter<'_>, named: &Named) {
    let ids = named.ids();
    match named {
        Named::First(_) => w.u8(ids.len() as u8),
        Named::Last(_) => w.u8(ids.len() as u8 | NAMED_LAST),
        Named::Stopped(_) => {
            w.u8(NAMED_STOPPED);
            w.u8(ids.len() as u8);
        }
    }
    for &id in ids {
        w.u64(id);
    }
}

/// A list [`write_named`] wrote.
pub fn read_named(r: &mut WireReader<'_>) -> Result<Named, DecodeError> {
    let b = r.u8("delimiter count")?;
    let (n, make): (u8, fn(Vec<u64>) -> Named) = match b {
        NAMED_STOPPED => (r.u8("delimiter count")?, Named::Stopped),
        b if b & NAMED_LAST != 0 => (b & !NAMED_LAST, Named::Last),
        b => (b, Named::First),
    };
    if n > MAX_DELIMITERS {
        return Err(r.invalid(format!(
            "{n} delimiters for one boundary (at most {MAX_DELIMITERS})"
        )));
    }
    let mut ids = Vec::with_capacity(n as usize);
    for _ in 0..n {
        ids.push(r.u64("delimiter")?);
    }
    Ok(make(ids))
}

/// A point's cut data as [`encode_point_cut`] wrote it: `PointCut::Receiver`'s `tail` is
/// empty (the reader fills it from the next block).
pub fn decode_point_cut(r: &mut WireReader<'_>) -> Result<PointCut, DecodeError> {
    match r.u8("cut kind")? {
        CUT_NONE => Ok(PointCut::None),
        CUT_SENDER => {
            let Named::First(start) = read_named(r)? else {
                return Err(r.invalid("the start of an interval named by S's last packets"));
            };
            let end = read_named(r)?;
            Ok(PointCut::Sender { start, end })
        }
        CUT_RECEIVER => {
            let overflowed = match r.u8("overflow flag")? {
                0 => false,
                1 => true,
                x => return Err(r.invalid(format!("overflow flag {x} is neither 0 nor 1"))),
            };
            let start = r.u64("window start")?;
            let f = r.varint("flow count")?;
            if f > MAX_ENCODED_RECORDS || f.saturating_mul(37) > r.remaining() as u64 {
                return Err(r.invalid(format!("{f} flows in a held window do not fit")));
            }
            let mut flows = Vec::with_capacity(f as usize);
            for _ in 0..f {
                let b: [u8; 37] = r.take(37, "flow key")?.try_into().expect("37 bytes");
                flows.push(FlowKey::from_canonical_bytes(&b));
            }
            let n = r.varint("held packets")?;
            // each record takes at least 11 bytes
            if n > MAX_ENCODED_RECORDS || n.saturating_mul(11) > r.remaining() as u64 {
                return Err(r.invalid(format!("{n} held packets do not fit")));
            }
            let mut records = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let ts = start
                    .checked_add(r.varint("held timestamp")?)
                    .ok_or_else(|| r.invalid("held timestamp past 2^64 ns"))?;
                let id = r.u64("held identity")?;
                let k = r.varint("held flow")?;
                let flow = *flows
                    .get(k as usize)
                    .ok_or_else(|| r.invalid(format!("flow {k} of {f}")))?;
                let len = u32::try_from(r.varint("held length")?)
                    .map_err(|_| r.invalid("held IP length past 2^32"))?;
                records.push(PacketRecord {
                    ts_ns: ts,
                    id,
                    flow,
                    len,
                });
            }
            Ok(PointCut::Receiver {
                head: Arc::new(Held {
                    records,
                    seqs: Vec::new(),
                    overflowed,
                }),
                tail: Arc::new(Held::default()),
            })
        }
        x => Err(r.invalid(format!("cut kind {x} is not 0, 1 or 2"))),
    }
}

/// The start of boundary `index`'s window under `cut` (what [`encode_point_cut`] counts R's
/// held timestamps from).
pub fn window_start(cut: &Cut, intervals: &Intervals, index: u64) -> u64 {
    match cut {
        Cut::Clock => intervals.start_ns(index),
        Cut::Delimiter(d) => intervals.start_ns(index).saturating_sub(d.before_ns),
    }
}

#[cfg(test)]
mod tests;
