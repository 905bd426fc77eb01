//! The text tables of `owl compare` and `owl estimate`, read from their reports.

use std::io::Write;

use anyhow::Result;
use owl_core::units::{format_bytes, format_ns};

use super::{
    CompareReport, Estimate, EstimateInterval, EstimateOverall, IntervalReport, MethodReport,
    PacketCounts,
};

pub fn fmt_opt_ns(x: Option<f64>) -> String {
    x.map(format_ns).unwrap_or_else(|| "-".into())
}

/// A relative error, `-` where there is none.
pub fn fmt_err(x: Option<f64>) -> String {
    match x {
        None => "-".into(),
        Some(0.0) => "0".into(),
        Some(e) => format!("{e:.2e}"),
    }
}

/// A relative error as a percentage (or a multiple, from 10x up).
pub fn fmt_pct(x: Option<f64>) -> String {
    match x {
        None => "-".into(),
        Some(e) if e >= 10.0 => format!("{:.0}x", e),
        Some(e) => format!("{:.2}%", 100.0 * e),
    }
}

/// Text tables fit a terminal of this many columns: wider rows wrap their method columns
/// onto continuation lines.
pub const WIDTH: usize = 120;
/// Width of a method's column (the longest method name is 12 characters).
const CELL: usize = 13;

/// Write `text` after `first` (a prefix, e.g. an indent), word-wrapped to [`WIDTH`]; every
/// continuation line is indented by `first`'s width and two more spaces. A word longer than a
/// line is not cut.
pub fn write_wrapped(out: &mut impl Write, first: &str, text: &str) -> Result<()> {
    let lead = first.chars().count();
    let indent = " ".repeat(lead + 2);
    let mut line = first.to_string();
    let mut len = lead;
    let mut empty = true;
    for word in text.split(' ') {
        let w = word.chars().count();
        if !empty && len + 1 + w > WIDTH {
            writeln!(out, "{line}")?;
            line = indent.clone();
            len = lead + 2;
            empty = true;
        }
        if !empty {
            line.push(' ');
            len += 1;
        }
        line.push_str(word);
        len += w;
        empty = false;
    }
    writeln!(out, "{line}")?;
    Ok(())
}

/// Write `cells` (each right-aligned in `CELL`) after `left`, as many per line as fit in
/// [`WIDTH`]; continuation lines are indented by the width of `left`.
fn wrapped(out: &mut impl Write, left: &str, cells: &[String]) -> Result<()> {
    let per_line = ((WIDTH.saturating_sub(left.chars().count())) / CELL).max(1);
    let indent = " ".repeat(left.chars().count());
    if cells.is_empty() {
        writeln!(out, "{left}")?;
    }
    for (k, chunk) in cells.chunks(per_line).enumerate() {
        write!(out, "{}", if k == 0 { left } else { &indent })?;
        for c in chunk {
            write!(out, "{c:>CELL$}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Interval rows of the compare report, printed as the intervals close.
pub struct IntervalTable {
    limit: usize,
    printed: usize,
    names: Vec<String>,
    /// Per method of `names`, the rows printed without its error (`-`).
    blank: Vec<usize>,
}

impl IntervalTable {
    /// A table with one error column per method of `names` (the exact method excluded: its
    /// row is the truth).
    pub fn new(limit: Option<usize>, names: Vec<String>) -> IntervalTable {
        IntervalTable {
            limit: limit.unwrap_or(usize::MAX),
            printed: 0,
            blank: vec![0; names.len()],
            names,
        }
    }

    pub fn row(&mut self, out: &mut impl Write, it: &IntervalReport) -> Result<()> {
        if self.printed >= self.limit {
            self.printed += 1;
            return Ok(());
        }
        if self.printed == 0 {
            if !self.names.is_empty() {
                writeln!(
                    out,
                    "{:67}relative error of each method's mean, |estimate - truth| / truth",
                    ""
                )?;
            }
            let left = format!(
                "{:<26} {:>9} {:>9} {:>9} {:>10}",
                "interval start (UTC)", "sent", "matched", "crossing", "truth mean"
            );
            let cells: Vec<String> = self.names.iter().map(|n| format!(" {n}")).collect();
            wrapped(out, &left, &cells)?;
        }
        let t = &it.truth;
        let left = format!(
            "{:<26} {:>9} {:>9} {:>9} {:>10}",
            super::checks::format_utc(it.start_ns),
            t.sent,
            t.matched,
            t.left,
            fmt_opt_ns(t.mean_ns)
        );
        let errs: Vec<Option<f64>> = self
            .names
            .iter()
            .map(|n| {
                it.methods
                    .iter()
                    .find(|m| &m.name == n)
                    .and_then(|m| m.mean_rel_err)
            })
            .collect();
        for (b, e) in self.blank.iter_mut().zip(&errs) {
            *b += usize::from(e.is_none());
        }
        let cells: Vec<String> = errs.into_iter().map(fmt_err).collect();
        wrapped(out, &left, &cells)?;
        out.flush()?;
        self.printed += 1;
        Ok(())
    }

    pub fn finish(&self, out: &mut impl Write) -> Result<()> {
        if self.printed > self.limit {
            writeln!(
                out,
                "… {} more intervals (--rows N prints more; --jsonl streams every interval)",
                self.printed - self.limit
            )?;
        }
        // a column of `-` only, said once: no estimate in any interval shown
        let rows = self.printed.min(self.limit);
        let none: Vec<&str> = self
            .names
            .iter()
            .zip(&self.blank)
            .filter(|&(_, &b)| rows > 0 && b == rows)
            .map(|(n, _)| n.as_str())
            .collect();
        if !none.is_empty() {
            write_wrapped(
                out,
                "",
                &format!(
                    "{}: no mean in any interval shown ('-'): the warnings and the methods table \
                     below say why",
                    none.join(", ")
                ),
            )?;
        }
        if self.printed > 0 {
            writeln!(out)?;
        }
        Ok(())
    }
}

fn skipped(c: &super::CaptureReport) -> String {
    let s = &c.stats;
    let mut parts = Vec::new();
    if c.before_origin > 0 {
        parts.push(format!(
            "{} before --origin-ns, in no interval",
            c.before_origin
        ));
    }
    if c.out_of_order > 0 {
        parts.push(format!(
            "{} out of timestamp order beyond --disorder, in no interval",
            c.out_of_order
        ));
    }
    if s.non_ip > 0 {
        parts.push(format!("{} non-IP frames skipped", s.non_ip));
    }
    if s.malformed > 0 {
        parts.push(format!("{} malformed skipped", s.malformed));
    }
    if s.no_timestamp > 0 {
        parts.push(format!("{} without timestamp skipped", s.no_timestamp));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// The summary of `owl compare` (after the interval rows).
pub fn compare(out: &mut impl Write, c: &CompareReport, top: usize) -> Result<()> {
    let t = &c.truth;
    for (label, x) in [("sender  ", &c.sender), ("receiver", &c.receiver)] {
        writeln!(
            out,
            "{label} {}: {} IP packets{}",
            x.path,
            x.stats.ip_packets,
            skipped(x)
        )?;
    }
    let span = if c.interval_ns == 0 {
        "one interval over the whole capture".to_string()
    } else {
        format!(
            "{} intervals of {} (relative errors against packets matched within their interval)",
            c.interval_count,
            format_ns(c.interval_ns as f64)
        )
    };
    writeln!(out, "measured as {span}")?;
    writeln!(
        out,
        "horizon  {}: a packet counts as received if R sees it within that of S{}",
        format_ns(c.horizon_ns as f64),
        if t.late > 0 {
            format!(" ({} packets came later: counted lost)", t.late)
        } else {
            String::new()
        }
    )?;
    checks(out, &c.checks.lines())?;
    writeln!(out)?;
    writeln!(
        out,
        "truth    sent {}  received {}  lost {} ({:.3}%)  duplicated {}  reordered {}  unexpected {}",
        t.sent,
        t.received,
        t.lost,
        100.0 * t.loss_rate,
        t.duplicated,
        t.reordered,
        t.unexpected
    )?;
    if let Some(d) = t.delay {
        writeln!(
            out,
            "delay    mean {}  std {}  min {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            format_ns(d.mean_ns),
            format_ns(d.std_ns),
            format_ns(d.min_ns as f64),
            format_ns(d.p50_ns as f64),
            format_ns(d.p90_ns as f64),
            format_ns(d.p99_ns as f64),
            format_ns(d.p999_ns as f64),
            format_ns(d.max_ns as f64)
        )?;
        if let Some(q) = t.quantiles_relative_error {
            writeln!(
                out,
                "         (quantiles from a histogram, within {:.2} % of the exact ones; --exact-quantiles N keeps up to N delays)",
                100.0 * q
            )?;
        }
    }
    writeln!(out)?;
    methods(out, &c.methods)?;
    quantiles(out, c)?;
    if c.methods.iter().any(|m| m.per_packet.is_some()) {
        per_packet(out, c)?;
    }
    if let (Some(flows), Some(bins)) = (&c.flows, &c.flow_error_bins) {
        per_flow(out, c, flows, bins, top)?;
    } else if let Some(flows) = &c.flows {
        per_flow(out, c, flows, &[], top)?;
    }
    if let Some(classes) = &c.classes {
        per_class(out, classes, &c.class_notes)?;
    }
    Ok(())
}

/// The per-class table (`--per-class`): each class's truth, then each method's quantiles of
/// the class's recovered delays.
fn per_class(out: &mut impl Write, classes: &[super::ClassReport], notes: &[String]) -> Result<()> {
    let w = classes
        .iter()
        .flat_map(|c| c.methods.0.iter().map(|m| m.0.len()))
        .max()
        .unwrap_or(0)
        .max(6);
    let row = |out: &mut dyn Write, c: [&str; 8]| {
        let line = format!(
            "{:<10} {:<w$} {:>9} {:>10} {:>10} {:>23} {:>10} {:>11}",
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
        );
        writeln!(out, "{}", line.trim_end())
    };
    writeln!(out)?;
    writeln!(
        out,
        "per flow class (protocol and service port): each method's delays of the class, merged over the intervals"
    )?;
    row(
        out,
        [
            "class",
            "",
            "delays",
            "p50",
            "p99",
            "p99 95 % interval",
            "p99.9",
            "p99 rel.err",
        ],
    )?;
    let ns = |x: Option<i64>| fmt_opt_ns(x.map(|v| v as f64));
    for c in classes {
        let t = &c.truth.delay;
        row(
            out,
            [
                &c.class,
                "truth",
                &c.truth.delays.to_string(),
                &ns(t.p50_ns),
                &ns(t.p99_ns),
                "",
                &ns(t.p999_ns),
                "",
            ],
        )?;
        for (name, m) in &c.methods.0 {
            let q = m.quantiles.as_ref();
            row(
                out,
                [
                    "",
                    name,
                    &m.delays.to_string(),
                    &fmt_opt_ns(q.map(|q| q.p50_ns)),
                    &fmt_opt_ns(q.map(|q| q.p99_ns)),
                    &fmt_interval(q.and_then(|q| q.p99_ci95_ns)),
                    &fmt_opt_ns(q.map(|q| q.p999_ns)),
                    &fmt_pct(m.p99_rel_err),
                ],
            )?;
        }
    }
    for n in notes {
        writeln!(out, "{n}")?;
    }
    Ok(())
}

/// The checks block: one line per assumption the figures rest on.
pub fn checks(out: &mut impl Write, lines: &[(&str, super::Status, &str)]) -> Result<()> {
    for (k, &(name, status, summary)) in lines.iter().enumerate() {
        let status = match status {
            super::Status::Ok => "ok",
            super::Status::Adjusted => "adjusted",
            super::Status::Warning => "WARNING",
        };
        let head = if k == 0 { "checks" } else { "" };
        write_wrapped(out, &format!("{head:<8} {name:<10} {status:<8} "), summary)?;
    }
    Ok(())
}

/// The methods table: each method's overall estimate and its relative errors.
fn methods(out: &mut impl Write, ms: &[MethodReport]) -> Result<()> {
    let w = ms.iter().map(|m| m.name.len()).max().unwrap_or(0).max(6);
    writeln!(
        out,
        "{:<w$} {:>10} {:>10} {:>12} {:>12} {:>10} {:>10} {:>9}",
        "method", "mean", "std", "mean rel.err", "std rel.err", "samples", "bytes", "time"
    )?;
    let (silent, ms): (Vec<&MethodReport>, Vec<&MethodReport>) =
        ms.iter().partition(|m| no_aggregate(m).is_some());
    for m in ms {
        let e = &m.estimate;
        writeln!(
            out,
            "{:<w$} {:>10} {:>10} {:>12} {:>12} {:>10} {:>10} {:>9}",
            m.name,
            fmt_opt_ns(e.mean_ns),
            fmt_opt_ns(e.std_ns),
            fmt_err(m.mean_rel_err),
            fmt_err(m.std_rel_err),
            e.samples,
            format_bytes(e.bytes),
            m.run
                .as_ref()
                .map(|r| format_ns(r.time_s * 1e9))
                .unwrap_or_default()
        )?;
        if let Some(err) = m.run.as_ref().and_then(|r| r.error.as_ref()) {
            writeln!(out, "{:w$}  ! {err}", "")?;
        }
        if let Some([lo, hi]) = e.std_ci95_ns {
            writeln!(
                out,
                "{:w$}  std 95 % interval {} to {}",
                "",
                format_ns(lo),
                format_ns(hi)
            )?;
        }
        for n in &e.notes {
            write_wrapped(out, &format!("{:w$}  ", ""), n)?;
        }
    }
    if !silent.is_empty() {
        // said once, not a row of `-` each
        let names: Vec<&str> = silent.iter().map(|m| m.name.as_str()).collect();
        write_wrapped(
            out,
            "",
            &format!(
                "{}: per-flow methods, no aggregate estimate (their flows: --per-flow; their bytes, \
                 time and notes: --json), because",
                names.join(", ")
            ),
        )?;
        for m in silent {
            let why = no_aggregate(m).unwrap_or_default();
            let why = why.strip_prefix("no estimate: ").unwrap_or(why);
            write_wrapped(out, &format!("  {:<w$}  ", m.name), why)?;
        }
    }
    Ok(())
}

/// Why a per-flow method gave no aggregate estimate (mean and std), when it gave none: a
/// method such as countmin or colate, whose sketches cannot leave lost packets out, answers
/// per flow only. `None` for every other method, and for a method that failed (its row says
/// so).
fn no_aggregate(m: &MethodReport) -> Option<&str> {
    let e = &m.estimate;
    let failed = m.run.as_ref().is_some_and(|r| r.error.is_some());
    let per_flow = owl_core::registry::find(&m.name).is_some_and(|i| i.per_flow);
    if failed || !per_flow || e.mean_ns.is_some() || e.std_ns.is_some() {
        return None;
    }
    e.reason.as_deref()
}

/// `lo to hi`, or `-`.
fn fmt_interval(ci: Option<[f64; 2]>) -> String {
    ci.map_or_else(
        || "-".into(),
        |[lo, hi]| format!("{} to {}", format_ns(lo), format_ns(hi)),
    )
}

/// The quantiles table: the truth's p50, p99 and p99.9 (of the packets matched within their
/// interval, which the methods are judged against), then each method's that gives quantiles,
/// with its p99's 95 % interval and its p99's relative error.
fn quantiles(out: &mut impl Write, c: &CompareReport) -> Result<()> {
    let with: Vec<&MethodReport> = c
        .methods
        .iter()
        .filter(|m| m.estimate.quantiles.is_some())
        .collect();
    if with.is_empty() {
        return Ok(());
    }
    let w = with.iter().map(|m| m.name.len()).max().unwrap_or(0).max(9);
    let row = |out: &mut dyn Write, c: [&str; 6]| {
        let line = format!(
            "{:<w$} {:>10} {:>10} {:>23} {:>10} {:>12}",
            c[0], c[1], c[2], c[3], c[4], c[5]
        );
        writeln!(out, "{}", line.trim_end())
    };
    writeln!(out)?;
    row(
        out,
        [
            "quantiles",
            "p50",
            "p99",
            "p99 95 % interval",
            "p99.9",
            "p99 rel.err",
        ],
    )?;
    if let Some(d) = c.truth.in_interval {
        row(
            out,
            [
                "truth",
                &format_ns(d.p50_ns as f64),
                &format_ns(d.p99_ns as f64),
                "",
                &format_ns(d.p999_ns as f64),
                "",
            ],
        )?;
    }
    for m in with {
        let Some(q) = &m.estimate.quantiles else {
            continue;
        };
        row(
            out,
            [
                &m.name,
                &format_ns(q.p50_ns),
                &format_ns(q.p99_ns),
                &fmt_interval(q.p99_ci95_ns),
                &format_ns(q.p999_ns),
                &fmt_err(m.p99_rel_err),
            ],
        )?;
    }
    // quantiles merged over intervals: say how close to the merged delays' own they are
    let mut merged: Vec<(f64, Vec<&str>)> = Vec::new();
    for m in &c.methods {
        let Some(a) = m
            .estimate
            .quantiles
            .as_ref()
            .and_then(|q| q.quantiles_relative_error)
        else {
            continue;
        };
        match merged.iter_mut().find(|x| x.0 == a) {
            Some(x) => x.1.push(&m.name),
            None => merged.push((a, vec![&m.name])),
        }
    }
    for (a, names) in merged {
        writeln!(
            out,
            "({}: quantiles of every interval's delays merged in a relative-error histogram,\n within {} % of theirs; each method's notes say how its 95 % intervals were made)",
            names.join(", "),
            100.0 * a
        )?;
    }
    Ok(())
}

/// `p50 …  p90 …  p99 … (95 % … to …)  p99.9 …`
fn quantile_line(q: &owl_core::method::Quantiles) -> String {
    format!(
        "p50 {}  p90 {}  p99 {}{}  p99.9 {}",
        format_ns(q.p50_ns),
        format_ns(q.p90_ns),
        format_ns(q.p99_ns),
        q.p99_ci95_ns.map_or_else(String::new, |ci| format!(
            " (95 % {})",
            fmt_interval(Some(ci))
        )),
        format_ns(q.p999_ns)
    )
}

/// The per-packet block: each per-packet method's quantiles beside the truth's, the packets it
/// placed, and its largest delays.
fn per_packet(out: &mut impl Write, c: &CompareReport) -> Result<()> {
    let t = &c.truth;
    let line = |d: &super::DelayFields| -> Option<String> {
        Some(format!(
            "p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
            format_ns(d.p50_ns? as f64),
            format_ns(d.p90_ns? as f64),
            format_ns(d.p99_ns? as f64),
            format_ns(d.p999_ns? as f64),
            format_ns(d.max_ns? as f64)
        ))
    };
    writeln!(out)?;
    writeln!(out, "per packet")?;
    if let Some(l) = line(&t.delay_fields) {
        writeln!(out, "  {:<12} {l}", "truth")?;
    }
    for m in &c.methods {
        let Some(p) = &m.per_packet else { continue };
        let name = &m.name;
        match line(&p.delay_fields) {
            Some(l) => writeln!(
                out,
                "  {name:<12} {l}{}",
                if p.quantiles_exact {
                    String::new()
                } else {
                    format!(
                        " (quantiles within {:.2} %)",
                        100.0 * owl_core::pipeline::truth::QUANTILE_RELATIVE_ERROR
                    )
                }
            )?,
            None => writeln!(out, "  {name:<12} no delay recovered")?,
        }
        writeln!(
            out,
            "  {:<12} placed {} of the {} received ({:.4} %), located {} lost, {} not placed",
            "",
            p.delivered,
            t.received,
            100.0 * p.recovered_fraction,
            p.lost,
            p.unplaced,
        )?;
        writeln!(
            out,
            "  {:<12} {} ({:.3} B per sender packet)",
            "",
            format_bytes(m.estimate.bytes),
            p.bytes_per_packet
        )?;
        if let Some(e) = &p.error {
            writeln!(out, "  {:<12} ! {e}", "")?;
        }
        // the largest delays, with the sending time of each (UTC; ns since the epoch in JSON)
        for (k, a) in p.anomalies.iter().take(3).enumerate() {
            writeln!(
                out,
                "  {:<12} {} {} sent at {} UTC",
                "",
                if k == 0 { "largest" } else { "       " },
                format_ns(a.delay_ns as f64),
                super::checks::format_utc_ns(a.sender_ns)
            )?;
        }
    }
    Ok(())
}

/// Width of the flow column; a longer flow (IPv6) has a line of its own above its figures.
const FLOW: usize = 46;

/// The per-flow tables: the largest flows, then errors by flow size.
fn per_flow(
    out: &mut impl Write,
    c: &CompareReport,
    flows: &[super::FlowReport],
    bins: &[super::BinReport],
    top: usize,
) -> Result<()> {
    let names: Vec<&str> = bins
        .first()
        .map(|b| b.methods.0.iter().map(|m| m.0.as_str()).collect())
        .or_else(|| {
            flows
                .first()
                .map(|f| f.methods.0.iter().map(|m| m.0.as_str()).collect())
        })
        .unwrap_or_default();
    writeln!(out)?;
    if !names.is_empty() {
        writeln!(out, "{:82}relative error of each method's flow mean", "")?;
    }
    let head = format!(
        "{:<FLOW$} {:>8} {:>7} {:>10} {:>10}",
        "flow", "sent", "lost", "mean", "std"
    );
    let cells: Vec<String> = names.iter().map(|n| format!(" {n}")).collect();
    wrapped(out, &head, &cells)?;
    for f in flows.iter().take(top) {
        let key = f.key.to_string();
        let key = if key.chars().count() > FLOW {
            writeln!(out, "{key}")?;
            String::new()
        } else {
            key
        };
        let left = format!(
            "{:<FLOW$} {:>8} {:>7} {:>10} {:>10}",
            key,
            f.truth.sent,
            f.truth.lost,
            fmt_opt_ns(f.truth.mean_ns),
            fmt_opt_ns(f.truth.std_ns),
        );
        let cells: Vec<String> = f
            .methods
            .0
            .iter()
            .map(|(_, m)| fmt_pct(m.mean_rel_err))
            .collect();
        wrapped(out, &left, &cells)?;
    }
    if c.flows_total > top {
        writeln!(
            out,
            "… {} more flows (--top N, or --json)",
            c.flows_total - top
        )?;
    }
    if bins.is_empty() || names.is_empty() {
        return Ok(());
    }
    for (name, e) in &c.flow_errors {
        writeln!(out, "{name}: ! {e}")?;
    }
    for (name, n) in &c.flow_notes {
        writeln!(out, "{name}: {n}")?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "relative error of per-flow mean delay, by flow size (median / 95th percentile; all flows)"
    )?;
    // bins: 4 methods of 24 columns a line
    const BIN: usize = 24;
    let per_line = ((WIDTH - 18) / BIN).max(1);
    for (k, chunk) in names.chunks(per_line).enumerate() {
        if k > 0 {
            writeln!(out)?;
        }
        write!(out, "{:<10} {:>7}", "packets", "flows")?;
        for n in chunk {
            write!(out, " {n:>23}")?;
        }
        writeln!(out)?;
        for b in bins {
            write!(out, "{:<10} {:>7}", b.bin, b.flows)?;
            for (_, s) in b.methods.0.iter().skip(k * per_line).take(per_line) {
                let cell = if s.missing > 0 {
                    format!(
                        "{} / {} ({} none)",
                        fmt_pct(s.median_rel_err),
                        fmt_pct(s.p95_rel_err),
                        s.missing
                    )
                } else {
                    format!("{} / {}", fmt_pct(s.median_rel_err), fmt_pct(s.p95_rel_err))
                };
                write!(out, " {cell:>23}")?;
            }
            writeln!(out)?;
        }
    }
    Ok(())
}

/// One row of the `owl estimate` table.
/// The columns of `owl estimate` (118 wide).
const ESTIMATE_COLUMNS: [&str; 10] = [
    "interval",
    "start (UTC)",
    "mean",
    "std",
    "sent",
    "received",
    "loss",
    "samples",
    "lost",
    "bytes",
];

fn estimate_line(out: &mut impl Write, c: [&str; 10]) -> Result<()> {
    writeln!(
        out,
        "{:>12} {:>26} {:>10} {:>10} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9}",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9]
    )?;
    Ok(())
}

fn estimate_row(
    out: &mut impl Write,
    label: &str,
    start: &str,
    p: &PacketCounts,
    e: &Estimate,
) -> Result<()> {
    let count = |n: Option<u64>| n.map_or_else(|| "-".into(), |n| n.to_string());
    estimate_line(
        out,
        [
            label,
            start,
            &fmt_opt_ns(e.mean_ns),
            &fmt_opt_ns(e.std_ns),
            &count(p.sent),
            &count(p.received),
            &p.loss_rate
                .map_or_else(|| "-".into(), |r| format!("{:.2}%", 100.0 * r)),
            &e.samples.to_string(),
            &count(e.lost),
            &format_bytes(e.bytes),
        ],
    )
}

/// The head of the `owl estimate` table.
pub fn estimate_head(out: &mut impl Write, method: &str) -> Result<()> {
    writeln!(out, "method {method}")?;
    estimate_line(out, ESTIMATE_COLUMNS)
}

/// One interval of `owl estimate`, with its confidence intervals and notes.
pub fn estimate_interval(out: &mut impl Write, it: &EstimateInterval) -> Result<()> {
    let e = &it.estimate;
    // a file recorded without --interval is one interval from time 0: no date to show
    let start = if it.start_ns == 0 {
        "whole capture".to_string()
    } else {
        super::checks::format_utc(it.start_ns)
    };
    estimate_row(out, &it.index.to_string(), &start, &it.packets, e)?;
    if let Some(why) = it.edge {
        write_wrapped(
            out,
            "             ",
            &format!("edge, not in the totals, loss withheld: {why}"),
        )?;
    }
    if let Some([lo, hi]) = e.mean_ci98_ns {
        writeln!(
            out,
            "             mean 98 % interval {} to {}",
            format_ns(lo),
            format_ns(hi)
        )?;
    }
    if let Some([lo, hi]) = e.std_ci95_ns {
        writeln!(
            out,
            "             std 95 % interval {} to {}",
            format_ns(lo),
            format_ns(hi)
        )?;
    }
    if let Some(q) = &e.quantiles {
        writeln!(out, "             {}", quantile_line(q))?;
    }
    for n in &e.notes {
        write_wrapped(out, "             ", n)?;
    }
    Ok(())
}

/// The overall row of `owl estimate`, when there are several intervals, with the quantiles
/// of their merged delays and how they were merged.
pub fn estimate_overall(out: &mut impl Write, parts: u64, o: &EstimateOverall) -> Result<()> {
    if parts > 1 {
        estimate_row(out, &format!("all {parts}"), "", &o.packets, &o.estimate)?;
        if let Some(q) = &o.estimate.quantiles {
            writeln!(out, "             {}", quantile_line(q))?;
        }
        for n in &o.estimate.notes {
            write_wrapped(out, "             ", n)?;
        }
    }
    Ok(())
}
