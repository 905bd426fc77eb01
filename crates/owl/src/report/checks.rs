//! What `owl compare` verifies about a pair of captures, from what the readers and the truth
//! counted: one [`Check`] per assumption the figures rest on.

use owl_core::cut::{Cut, CutTally};
use owl_core::pipeline::{PointCounters, StreamTruth};
use owl_core::units::format_ns;
use owl_trace::dissect::linktype_name;
use owl_trace::identity::identity_bytes;
use owl_trace::records::InputStats;

use owl_core::skew::{ClockStep, SkewFit};

use owl_core::pipeline::truth::directions::ReverseOffset;

use super::{
    Check, Checks, ClockApplied, ClockCheck, CutCheck, DirectionsCheck, FilterCheck, InvalidCheck,
    LateCheck, SnaplenCheck, SpanCheck, Status, TrimCheck,
};

const POINT: [&str; 2] = ["S", "R"];
const ROLE: [&str; 2] = ["sender", "receiver"];

pub use owl_core::units::{format_utc, format_utc_ns};

/// What a capture keeps: "128 bytes of each ETHERNET frame".
fn keeps(st: &InputStats) -> String {
    let link = st
        .linktype
        .map(|l| format!("{} ", linktype_name(l).trim_start_matches("LINKTYPE_")))
        .unwrap_or_default();
    match st.snaplen {
        Some(n) => format!("{n} bytes of each {link}frame"),
        None => format!("whole {link}frames"),
    }
}

/// IP bytes a capture keeps of a long packet (`None`: all of it).
fn ip_bytes(st: &InputStats) -> Option<u32> {
    identity_bytes(st.snaplen.unwrap_or(0), st.linktype?)
}

/// Do both points identify packets on the same bytes? `flag`: `--identity-bytes`, when given.
fn snaplen(stats: [&InputStats; 2], flag: Option<u32>) -> Check<SnaplenCheck> {
    let ib = stats[0].identity_bytes;
    let data = SnaplenCheck {
        snaplen: [stats[0].snaplen, stats[1].snaplen],
        linktype: [stats[0].linktype, stats[1].linktype],
        identity_bytes: ib,
        identity_cut: [stats[0].identity_cut, stats[1].identity_cut],
        identity_short: [stats[0].identity_short, stats[1].identity_short],
        interfaces: [stats[0].interfaces, stats[1].interfaces],
    };
    let kept = [ip_bytes(stats[0]), ip_bytes(stats[1])];
    let both = format!("S keeps {}, R {}", keeps(stats[0]), keeps(stats[1]));
    let cut = format!(
        "{} S and {} R packets were longer",
        data.identity_cut[0], data.identity_cut[1]
    );
    let (mut status, mut summary) = match (ib, flag) {
        (Some(n), Some(_)) => match (0..2).find(|&k| kept[k].is_some_and(|b| b < n)) {
            Some(k) if data.identity_short[k] > 0 => (
                Status::Warning,
                format!(
                    "{both}: --identity-bytes {n}, but {} keeps only {} IP bytes of a packet, so {} packets there were identified on fewer bytes than at the other point (they count lost or unexpected); use --identity-bytes {} or less",
                    POINT[k],
                    kept[k].unwrap_or(0),
                    data.identity_short[k],
                    kept[k].unwrap_or(0)
                ),
            ),
            _ => (
                Status::Ok,
                format!(
                    "{both}: packets identified on their first {n} IP bytes at both points (--identity-bytes; {cut})"
                ),
            ),
        },
        (Some(n), None) => (
            Status::Adjusted,
            format!(
                "{both}: packets identified on the first {n} IP bytes, which both keep ({cut})"
            ),
        ),
        (None, _) if kept[0] == kept[1] => (Status::Ok, format!("both keep {}", keeps(stats[0]))),
        (None, _) => {
            // the readers did not agree (one could not wait for the other's first packet)
            let small = kept[0].unwrap_or(u32::MAX).min(kept[1].unwrap_or(u32::MAX));
            let big = usize::from(kept[1].unwrap_or(u32::MAX) > kept[0].unwrap_or(u32::MAX));
            if data.identity_short[1 - big] > 0 {
                (
                    Status::Warning,
                    format!(
                        "{both}: packets longer than {small} IP bytes get different identities at the two points (they count lost and unexpected); pass --identity-bytes {small}"
                    ),
                )
            } else {
                (
                    Status::Ok,
                    format!("{both}; no packet is longer than {small} IP bytes"),
                )
            }
        }
    };
    for (point, n) in POINT.iter().zip(data.interfaces) {
        if n > 1 {
            summary.push_str(&format!(
                "; {point} measured {n} alike interfaces as one stream (--interface N selects one)"
            ));
            if status == Status::Ok {
                status = Status::Adjusted;
            }
        }
    }
    Check {
        status,
        summary,
        data,
    }
}

fn spans(stream: &StreamTruth) -> Check<SpanCheck> {
    let [s, r] = stream.span_ns;
    let (mut lead_in, mut lead_out, mut overlap) = (None, None, 0);
    let mut status = Status::Ok;
    let rel = |d: i128| {
        if d >= 0 {
            format!("{} later", format_ns(d as f64))
        } else {
            format!("{} earlier", format_ns(-d as f64))
        }
    };
    let summary = match (s, r) {
        (Some((s0, s1)), Some((r0, r1))) => {
            overlap = s1.min(r1).saturating_sub(s0.max(r0));
            lead_in = Some((ROLE[usize::from(r0 < s0)].to_string(), s0.abs_diff(r0)));
            lead_out = Some((ROLE[usize::from(r1 > s1)].to_string(), s1.abs_diff(r1)));
            let head = format!(
                "S {} from {} UTC; R starts {}, stops {}",
                format_ns((s1 - s0) as f64),
                format_utc(s0),
                rel(r0 as i128 - s0 as i128),
                rel(r1 as i128 - s1 as i128)
            );
            if s1 < r0 || r1 < s0 {
                status = Status::Warning;
                format!("{head}: the captures do not overlap")
            } else {
                format!("{head}; both {}", format_ns(overlap as f64))
            }
        }
        _ => "a capture without records".into(),
    };
    Check {
        status,
        summary,
        data: SpanCheck {
            sender_ns: s,
            receiver_ns: r,
            overlap_ns: overlap,
            lead_in,
            lead_out,
        },
    }
}

fn trimmed(stream: &StreamTruth, points: &[PointCounters; 2], enabled: bool) -> Check<TrimCheck> {
    let data = TrimCheck {
        enabled,
        packets: stream.trimmed,
        records: [points[0].trimmed, points[1].trimmed],
    };
    let (status, summary) = if !enabled {
        (
            Status::Ok,
            "off (--no-trim): what only one point was capturing counts lost or unexpected".into(),
        )
    } else if data.packets == [0, 0] {
        (
            Status::Ok,
            "nothing outside the window both captured".into(),
        )
    } else {
        (
            Status::Adjusted,
            format!(
                "{} packets sent while R was not capturing and {} received while S was not: not measured, neither lost nor unexpected (--no-trim counts them)",
                data.packets[0], data.packets[1]
            ),
        )
    };
    Check {
        status,
        summary,
        data,
    }
}

fn late(stream: &StreamTruth) -> Check<LateCheck> {
    let data = LateCheck {
        late: stream.late,
        horizon_ns: stream.horizon_ns,
        late_memory_evicted: stream.late_memory_evicted,
    };
    let h = format_ns(stream.horizon_ns as f64);
    let (status, summary) = if data.late == 0 && data.late_memory_evicted == 0 {
        (Status::Ok, format!("no packet later than the {h} horizon"))
    } else {
        let mut s = format!(
            "{} packets reached R later than the {h} horizon: counted lost; raise --horizon to measure them",
            data.late
        );
        if data.late_memory_evicted > 0 {
            s.push_str(&format!(
                " ({} lost identities forgotten: a later sighting of one counts unexpected)",
                data.late_memory_evicted
            ));
        }
        (Status::Warning, s)
    };
    Check {
        status,
        summary,
        data,
    }
}

fn invalid(stats: [&InputStats; 2], points: &[PointCounters; 2]) -> Check<InvalidCheck> {
    let data = InvalidCheck {
        non_ip: [stats[0].non_ip, stats[1].non_ip],
        malformed: [stats[0].malformed, stats[1].malformed],
        no_timestamp: [stats[0].no_timestamp, stats[1].no_timestamp],
        out_of_order: [points[0].out_of_order, points[1].out_of_order],
        before_origin: [points[0].before_origin, points[1].before_origin],
    };
    let mut parts = Vec::new();
    let mut status = Status::Ok;
    for (what, v, bad) in [
        ("non-IP frames", data.non_ip, false),
        ("malformed IP packets", data.malformed, true),
        ("frames without timestamp", data.no_timestamp, true),
        (
            "records out of timestamp order beyond --disorder (in no interval)",
            data.out_of_order,
            true,
        ),
        (
            "records before --origin-ns (in no interval)",
            data.before_origin,
            true,
        ),
    ] {
        if v != [0, 0] {
            parts.push(format!("{what}: S {}, R {}", v[0], v[1]));
            if bad {
                status = Status::Warning;
            }
        }
    }
    let summary = if parts.is_empty() {
        "every frame an IP packet, in timestamp order".into()
    } else {
        parts.join("; ")
    };
    Check {
        status,
        summary,
        data,
    }
}

/// Drift over the capture that the clock check warns about (when the skew is resolved,
/// [`SkewFit::skew_resolved`]): 1 µs, or 1 % of the smallest delay when that is more.
pub fn drift_limit_ns(min_delay_ns: Option<i64>) -> f64 {
    (0.01 * min_delay_ns.unwrap_or(0).unsigned_abs() as f64).max(1_000.0)
}

/// An uncertainty in ppm: four decimals, or two significant digits below 0.01 (down to
/// 10⁻⁹ ppm: rounding below that).
fn ppm_spread(x: f64) -> String {
    if x.abs() >= 0.01 || x.abs() < 1e-9 || !x.is_finite() {
        format!("{x:.4}")
    } else {
        format!("{x:.1e}")
    }
}

/// "a step of +2.000 ms at 2026-01-01 00:00:30.000012 UTC (S's clock)", for each step.
fn steps_text(steps: &[ClockStep]) -> String {
    steps
        .iter()
        .map(|st| {
            format!(
                "{}{} at {} UTC",
                if st.size_ns >= 0 { "+" } else { "-" },
                format_ns(st.size_ns.unsigned_abs() as f64),
                format_utc(st.at_ns)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The clock check. `fit`: R's clock against S's as the captures show it (the one pass of
/// `--clock report`, or the first pass of `--clock correct`); `residual`: with `correct`, the
/// fit of the corrected delays.
fn clock(
    stream: &StreamTruth,
    fit: Option<&SkewFit>,
    correct: bool,
    residual: Option<&SkewFit>,
    offset: Option<OffsetFrom>,
) -> Check<ClockCheck> {
    let mixed = stream.directions.host_pairs_both_ways > 0;
    // the floor of both directions mixed is not R's clock: no fit is reported
    let (fit, residual) = if mixed { (None, None) } else { (fit, residual) };
    let min = stream.delay.map(|d| d.min_ns);
    let applied = correct.then(|| ClockApplied {
        skew_ppm: fit.map_or(0.0, |f| if f.skew_resolved() { f.skew_ppm } else { 0.0 }),
        steps: fit.map_or_else(Vec::new, |f| f.steps.clone()),
        residual_skew_ppm: residual.map(|r| r.skew_ppm),
        residual_drift_ns: residual.map(|r| r.drift_ns()),
        residual_steps: residual.map_or(0, |r| r.steps.len()),
    });
    let data = ClockCheck {
        negative_delays: stream.negative_delays,
        matched: stream.received,
        min_delay_ns: min,
        skew_ppm: fit.map(|f| f.skew_ppm),
        skew_uncertainty_ppm: fit.map(|f| f.skew_uncertainty_ppm),
        drift_ns: fit.map(|f| f.drift_ns()),
        steps: fit.map_or_else(Vec::new, |f| f.steps.clone()),
        applied,
        offset_ns: offset.map(|o| o.offset.offset_ns),
        offset_bound_ns: offset.map(|o| o.offset.bound_ns),
    };
    let (mut status, mut summary) = match stream.delay {
        Some(d) if d.min_ns == 0 && d.max_ns == 0 => (
            Status::Warning,
            format!(
                "every one of the {} matched packets has a delay of exactly 0: S and R are the same capture (the same file twice, or copies of it), not two points",
                d.count
            ),
        ),
        _ => match min {
            Some(_) if mixed => (
                Status::Warning,
                "the delays mix both directions (see directions): their floor is not R's clock, so no skew or step is fitted".to_string(),
            ),
            Some(m) if data.negative_delays > 0 => (
                Status::Warning,
                format!(
                    "{} of {} matched packets arrive before they leave (down to {}): R's clock is behind S's by at least {}, and every delay is off by the offset",
                    data.negative_delays,
                    data.matched,
                    format_ns(m as f64),
                    format_ns(-m as f64)
                ),
            ),
            Some(m) => (
                Status::Ok,
                format!(
                    "no packet arrives before it leaves (smallest delay {})",
                    format_ns(m as f64)
                ),
            ),
            None => (Status::Ok, "no matched packet".into()),
        },
    };
    if let Some(f) = fit {
        let drift = f.drift_ns();
        let limit = drift_limit_ns(min);
        let skew = format!(
            "R's clock runs {:+.4} ± {} ppm against S's (drift {}{} over {})",
            f.skew_ppm,
            ppm_spread(f.skew_uncertainty_ppm),
            if drift >= 0.0 { "+" } else { "-" },
            format_ns(drift.abs()),
            format_ns(f.span_ns as f64)
        );
        let steps = if f.steps.is_empty() {
            "no step in the delays' floor".to_string()
        } else {
            format!(
                "{} {} in the delays' floor ({})",
                f.steps.len(),
                if f.steps.len() == 1 { "step" } else { "steps" },
                steps_text(&f.steps)
            )
        };
        let big = drift.abs() > limit && f.skew_resolved();
        let unresolved = if drift.abs() > limit && !f.skew_resolved() {
            format!(
                " (not told from the floor's wander: under {} standard deviations; the queue seldom empties, so no skew is taken or removed)",
                owl_core::skew::RESOLVED_SD
            )
        } else {
            String::new()
        };
        if correct {
            let left = residual.map_or(String::new(), |r| {
                format!(
                    " (left: {:+.4} ppm, drift {}, {} steps)",
                    r.skew_ppm,
                    format_ns(r.drift_ns().abs()),
                    r.steps.len()
                )
            });
            if f.skew_resolved() || !f.steps.is_empty() {
                summary.push_str(&format!(
                    "; {skew}{unresolved}, {steps}: removed from R's timestamps (--clock correct){left}"
                ));
            } else {
                summary.push_str(&format!(
                    "; {skew}{unresolved}, {steps}: nothing to remove (--clock correct)"
                ));
            }
            if status == Status::Ok && (f.skew_resolved() || !f.steps.is_empty()) {
                status = Status::Adjusted;
            }
        } else if big || !f.steps.is_empty() {
            summary.push_str(&format!(
                "; {skew}, {steps}: every delay carries R's clock error, more than the {} this check allows; --clock correct removes it",
                format_ns(limit)
            ));
            status = Status::Warning;
        } else {
            summary.push_str(&format!("; {skew}{unresolved}, {steps}"));
        }
    }
    if let Some(o) = offset {
        summary.push_str(&format!(
            "; the two directions give S's clock minus R's as {}{} ± {} (smallest delays {} S→R over {} packets, {} R→S over {}; exact if the two are equal in truth)",
            if o.offset.offset_ns < 0 { "-" } else { "+" },
            format_ns(o.offset.offset_ns.unsigned_abs() as f64),
            format_ns(o.offset.bound_ns as f64),
            format_ns(o.forward_min_ns as f64),
            o.forward_packets,
            format_ns(o.reverse_min_ns as f64),
            o.reverse_packets
        ));
    }
    Check {
        status,
        summary,
        data,
    }
}

/// The clocks' offset from the two directions, and what it rests on.
#[derive(Clone, Copy, Debug)]
pub struct OffsetFrom {
    pub offset: ReverseOffset,
    pub forward_min_ns: i64,
    pub forward_packets: u64,
    pub reverse_min_ns: i64,
    pub reverse_packets: u64,
}

/// What `--filter` selected and its mirror image matched (`owl compare`).
pub struct FilterInput<'a> {
    pub expression: &'a str,
    pub kept: [u64; 2],
    pub left_out: [u64; 2],
    pub reverse_matched: u64,
    pub reverse_min_ns: Option<i64>,
}

/// The offset from the truth's directions and, with `--filter`, its mirror image's matches.
fn offset_from(stream: &StreamTruth, filter: Option<&FilterInput>) -> Option<OffsetFrom> {
    let d = &stream.directions;
    let forward_min_ns = d.forward_min_ns?;
    let (mut reverse_min_ns, mut reverse_packets) = (d.reverse_min_ns, d.reverse_packets);
    if let Some(f) = filter
        && let Some(r) = f.reverse_min_ns
    {
        reverse_min_ns = Some(reverse_min_ns.map_or(r, |m| m.min(r)));
        reverse_packets += f.reverse_matched;
    }
    let reverse_min_ns = reverse_min_ns?;
    Some(OffsetFrom {
        offset: ReverseOffset::of_minima(forward_min_ns, reverse_min_ns),
        forward_min_ns,
        forward_packets: d.forward_packets,
        reverse_min_ns,
        reverse_packets,
    })
}

/// The `directions` check: both directions among the measured packets (a warning: every figure
/// mixes them), and what `--filter` kept.
fn directions(stream: &StreamTruth, filter: Option<&FilterInput>) -> Check<DirectionsCheck> {
    let d = &stream.directions;
    let data = DirectionsCheck {
        both_ways: d.both_ways.clone(),
        host_pairs_both_ways: d.host_pairs_both_ways,
        forward_packets: d.forward_packets,
        reverse_packets: d.reverse_packets,
        filter: filter.map(|f| FilterCheck {
            expression: f.expression.to_string(),
            kept: f.kept,
            left_out: f.left_out,
            reverse_matched: f.reverse_matched,
        }),
    };
    let kept = filter.map_or(String::new(), |f| {
        format!(
            "--filter '{}' kept {} of {} packets at S and {} of {} at R; ",
            f.expression,
            f.kept[0],
            f.kept[0] + f.left_out[0],
            f.kept[1],
            f.kept[1] + f.left_out[1]
        )
    });
    let (status, summary) = match d.both_ways.first() {
        Some(b) => {
            // the S→R packets of every pair seen both ways, if their hosts split by prefix
            let filter = match d.split.as_slice() {
                [] => format!("src host {} and dst host {}", b.sender, b.receiver),
                [(s, r)] => format!("src net {s} and dst net {r}"),
                many => many
                    .iter()
                    .map(|(s, r)| format!("(src net {s} and dst net {r})"))
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            let only = if d.split.is_empty() && d.host_pairs_both_ways > 1 {
                " (that pair only: their hosts do not split by prefix)"
            } else {
                ""
            };
            (
                Status::Warning,
                format!(
                    "{kept}{} of {} matched packets travel R→S ({} host {} seen both ways; the busiest, {} at S's side and {} at R's: {} S→R, {} R→S): every figure takes them for S→R packets, their reverse delay negated and shifted by the clock offset; measure S→R alone with --filter '{filter}'{only}, and its mirror image then gives the clocks' offset",
                    d.reverse_packets,
                    d.forward_packets + d.reverse_packets,
                    d.host_pairs_both_ways,
                    if d.host_pairs_both_ways == 1 {
                        "pair"
                    } else {
                        "pairs"
                    },
                    b.sender,
                    b.receiver,
                    b.forward_packets,
                    b.reverse_packets,
                ),
            )
        }
        None => (
            Status::Ok,
            match filter {
                Some(f) if f.reverse_matched > 0 => format!(
                    "{kept}every measured packet travels S→R; {} packets of its mirror image travel R→S (seen at R, then S): they give the clocks' offset (clock)",
                    f.reverse_matched
                ),
                Some(_) => format!(
                    "{kept}every measured packet travels S→R; none of its mirror image (R→S) was seen at both points"
                ),
                None => {
                    "every matched packet travels S→R (no host pair is seen both ways)".to_string()
                }
            },
        ),
    };
    Check {
        status,
        summary,
        data,
    }
}

/// The `cuts` check: how the boundaries were cut, and the intervals a fallback left unpaired.
/// `left` is, under a clock cut in `owl compare`, the packets the truth saw R put in a later
/// interval than S (none is known elsewhere).
pub fn cuts(cut: &Cut, tally: &CutTally, left: Option<u64>) -> Check<CutCheck> {
    let (rule, status, summary) = match cut {
        Cut::Clock => (
            "clock",
            match left {
                Some(n) if n > 0 => Status::Warning,
                _ => Status::Ok,
            },
            match left {
                Some(n) if n > 0 => format!(
                    "by each point's clock (--cut clock): {n} packets in flight at a boundary are in S's interval and R's next, which aggregate methods take for packets of the interval (--cut delimiter cuts both at the same packets)"
                ),
                _ => "by each point's clock (--cut clock): packets in flight at a boundary are in S's interval and R's next".into(),
            },
        ),
        Cut::Delimiter(_) => {
            let t = tally;
            let mut s = format!(
                "{} boundaries: {} at S's delimiters, {} where S sent nothing past them",
                t.boundaries, t.delimiter, t.silent
            );
            if t.ended > 0 {
                s.push_str(&format!(
                    ", {} after S's last packet where S's capture ended first",
                    t.ended
                ));
            }
            if t.crossed > 0 {
                s.push_str(&format!(
                    "; {} packets in flight at a cut (at most {} at one) put where S sent them",
                    t.crossed, t.crossed_max
                ));
            }
            if t.fallbacks() == 0 {
                ("delimiter", Status::Ok, s)
            } else {
                let [seen, named, over, ended] = t.fell_back;
                let mut why = Vec::new();
                if seen > 0 {
                    why.push(format!(
                        "{seen} whose delimiters never reached R within its window (lost, later than --cut-window, or clocks further apart)"
                    ));
                }
                if named > 0 {
                    why.push(format!(
                        "{named} where S recorded nothing of the interval"
                    ));
                }
                if over > 0 {
                    why.push(format!("{over} whose window overflowed R's hold"));
                }
                if ended > 0 {
                    why.push(format!(
                        "{ended} where S's capture ended first and none of its last packets reached R within the window"
                    ));
                }
                let listed = t
                    .unpaired_intervals
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                s.push_str(&format!(
                    "; {} cut by R's clock: {}; {} intervals unpaired (their packets at R may not be S's: {listed}{})",
                    t.fallbacks(),
                    why.join(", "),
                    t.unpaired,
                    if t.unpaired as usize > t.unpaired_intervals.len() {
                        ", …"
                    } else {
                        ""
                    }
                ));
                ("delimiter", Status::Warning, s)
            }
        }
    };
    Check {
        status,
        summary,
        data: CutCheck {
            rule,
            tally: tally.clone(),
            left: if matches!(cut, Cut::Clock) {
                left
            } else {
                None
            },
        },
    }
}

/// R's clock as the comparison saw it: the fit of the captures as they are, and under
/// `--clock correct` that the correction was applied (the truth's own fit is then of the
/// corrected delays).
pub struct ClockInput<'a> {
    pub fit: Option<&'a SkewFit>,
    pub correct: bool,
    /// `--filter`'s selection: its mirror image's R→S packets give the clocks' offset too.
    pub filter: Option<&'a FilterInput<'a>>,
}

/// Every check of a compared pair (`cuts`: with intervals).
pub fn compare(
    stats: [&InputStats; 2],
    points: &[PointCounters; 2],
    stream: &StreamTruth,
    trim: bool,
    identity_bytes: Option<u32>,
    cuts: Option<Check<CutCheck>>,
    clock_in: ClockInput,
) -> Checks {
    let filter = clock_in.filter;
    let offset = offset_from(stream, filter);
    Checks {
        snaplen: snaplen(stats, identity_bytes),
        spans: spans(stream),
        trimmed: trimmed(stream, points, trim),
        late: late(stream),
        invalid: invalid(stats, points),
        clock: if clock_in.correct {
            clock(stream, clock_in.fit, true, stream.clock.as_ref(), offset)
        } else {
            clock(stream, stream.clock.as_ref(), false, None, offset)
        },
        directions: directions(stream, filter),
        cuts,
    }
}
