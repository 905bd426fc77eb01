//! `owl query`: a flow's mean and standard deviation of delay between two observation points,
//! from their COLATE epoch stores, over any time range (COLATE §4).

use std::path::Path;

use anyhow::Result;
use clap::Args;
use owl_core::colate::{Estimator, Query, StdEstimator};
use owl_core::units::{format_ns, parse_duration_u64};
use serde_json::json;

use crate::colate::{guarantee, parse_flow, parse_time, query_stores, store_arg};
use crate::store::Store;

const AFTER_HELP: &str = "Each store is FILE, or FILE#POINT when it holds several points. The
sender's epochs that meet [--from, --to] and the receiver's that meet [--from, --to + --horizon]
are read. The mean (--mean raw, the default) is the receiver's minus the sender's sums of the
flow's m counters over their packets: every packet both points put in the same counter cancels
down to its delay (--mean paper denoises each point's sums by Theorem 2 first, as the paper
does). The std (--std counters, the default) comes from the spread of those counters, each
weighed by its packets, with a 95 % interval, or is withheld with the reason (--std paper: γ
virtual repetitions, Theorems 3 and 4, no interval). Where some of the flow's counters lost
packets, the mean and std come from those that agree, and say so. The reliability printed is
what the sender's plan (§5) states for flows whose timestamp sum reaches its t_min — under the
paper's noise model, which undercounts the noise; see the README's COLATE section for what
was measured.

--confidence C measures the query's own noise instead: it reads every epoch in range whole,
tabulates every counter of both points, draws subvectors of m counters from them as the
foreign part the flow's counters could hold, and states the interval of means consistent with
them at confidence C (over all flows it holds the true mean at least a fraction C of the time).
The flow is 'certified' when the interval lies within the plan's beta of the mean. It needs the
same n at both points. The epochs are read one at a time at each point: about 80 bytes per
counter of the vector (360 MB for the default 10 MiB plan), whatever the range.

Examples:
  owl record --method colate --store S.db --point s S.pcap
  owl record --method colate --store R.db --point r R.pcap
  owl query --flow 'tcp 10.0.0.1 40000 10.0.0.2 443' S.db R.db
  owl query --flow 'udp 10.0.0.1 53 10.0.0.2 5353' --from 1767225600s --to 1767225660s S.db R.db
  owl query --flow 'tcp 10.0.0.1 40000 10.0.0.2 443' --confidence 0.95 --json S.db R.db";

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct QueryArgs {
    /// The sender's epoch store (FILE or FILE#POINT).
    pub sender: String,
    /// The receiver's epoch store (FILE or FILE#POINT).
    pub receiver: String,
    /// The flow: 'PROTO SRC SPORT DST DPORT' (PROTO: tcp, udp, icmp, icmp6 or a number).
    #[arg(long, value_name = "FLOW")]
    pub flow: String,
    /// Start of the flow's time range at the sender: ns since the epoch, or seconds with an s
    /// suffix (default: the beginning of the stores).
    #[arg(long, value_name = "T1")]
    pub from: Option<String>,
    /// End of the flow's time range at the sender (default: the end of the stores).
    #[arg(long, value_name = "T2")]
    pub to: Option<String>,
    /// Largest one-way delay: the receiver's range reaches this much further.
    #[arg(long, default_value = "1s", value_parser = parse_duration_u64, value_name = "T")]
    pub horizon: u64,
    /// Virtual repetitions γ of Theorem 4, with --std paper (0: no standard deviation at all).
    #[arg(long, default_value_t = 1_000)]
    pub gamma: u32,
    /// The std's estimator: counters (owl's: the spread of the flow's counters, each weighed
    /// by its packets, with a 95 % interval; withheld when the interval is wider than the
    /// estimate) or paper (Theorem 4's virtual repetitions, no interval); default: the sender
    /// point's configuration.
    #[arg(long, value_name = "counters|paper")]
    pub std: Option<String>,
    /// The mean's estimator: raw (owl's, the default for new stores) or paper (Theorem 2,
    /// Eq. 3); default: the sender point's configuration.
    #[arg(long, value_name = "paper|raw")]
    pub mean: Option<String>,
    /// Also state the mean's interval at confidence C, in (0, 1), measured from every counter
    /// of the epochs in range (read whole; see below).
    #[arg(long, value_name = "C")]
    pub confidence: Option<f64>,
    /// Read every epoch in range whole and check its checksum (slower: a query otherwise
    /// reads only each epoch's header and the flow's cells).
    #[arg(long)]
    pub verify: bool,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: QueryArgs) -> Result<()> {
    let flow = parse_flow(&a.flow)?;
    let from = a.from.as_deref().map(parse_time).transpose()?.unwrap_or(0);
    let to =
        a.to.as_deref()
            .map(parse_time)
            .transpose()?
            .unwrap_or(u64::MAX);
    if to < from {
        anyhow::bail!("--to is before --from");
    }
    let open = |s: &str| -> Result<(Store, crate::store::Point)> {
        let (file, point) = store_arg(s);
        let st = Store::open_read(Path::new(file))?;
        let p = st.only_point(point)?;
        Ok((st, p))
    };
    let (mut ss, sp) = open(&a.sender)?;
    let (mut rs, rp) = open(&a.receiver)?;
    let configured = sp
        .config
        .iter()
        .find(|(k, _)| k == "mean")
        .map(|(_, v)| v.clone());
    let estimator: Estimator = match a.mean.as_deref().or(configured.as_deref()) {
        Some(m) => m.parse()?,
        None => Estimator::Raw,
    };
    let configured_std = sp
        .config
        .iter()
        .find(|(k, _)| k == "std")
        .map(|(_, v)| v.clone());
    let std_estimator: StdEstimator = match a.std.as_deref().or(configured_std.as_deref()) {
        Some(m) => m.parse()?,
        None => StdEstimator::Counters,
    };
    let confidence = match a.confidence {
        None => 0.0,
        Some(c) if c > 0.0 && c < 1.0 => c,
        Some(c) => anyhow::bail!("--confidence {c}: must be in (0, 1), e.g. 0.95"),
    };
    let q = Query {
        flow,
        from_ns: from,
        to_ns: to,
        horizon_ns: a.horizon,
        gamma: a.gamma,
        estimator,
        std: std_estimator,
        confidence,
    };
    let l = query_stores((&mut ss, &sp), (&mut rs, &rp), &q, a.verify)?;
    let g = guarantee(&sp);
    // certified within the plan's beta, or the paper's medium requirement's
    let beta = g.map_or(0.05, |(_, beta, _)| beta);
    let covered = g.map(|(_, _, t_min)| l.mean_ns.is_some() && l.t_units >= t_min);
    if a.json {
        let v = json!({
            "flow": flow.to_string(),
            "from_ns": from,
            "to_ns": if to == u64::MAX { None } else { Some(to) },
            "sender": { "store": ss.path().display().to_string(), "point": sp.name, "epochs": l.sender_epochs },
            "receiver": { "store": rs.path().display().to_string(), "point": rp.name, "epochs": l.receiver_epochs },
            "mean_ns": l.mean_ns,
            "std_ns": l.std_ns,
            "std_ci95_ns": l.std_interval_ns.map(|(lo, hi)| [lo, hi]),
            "std_estimator": std_estimator.to_string(),
            "std_counters": l.std_counters,
            "reason": l.reason,
            "std_reason": l.std_reason,
            "counters_lost": l.counters_lost,
            "packets": l.packets,
            "lost": l.lost,
            "gamma": a.gamma,
            "estimator": estimator.to_string(),
            "timestamp_sum_units": l.t_units,
            "mean_interval_ns": l.mean_interval_ns.map(|(lo, hi)| [lo, hi]),
            "confidence": a.confidence,
            "noise_draws": l.noise_draws,
            "certified": l.mean_interval_ns.map(|_| json!({ "beta": beta, "within": l.certified(beta) })),
            "reliability": g.map(|(alpha, beta, t_min)| json!({
                "alpha": alpha, "beta": beta, "t_min_units": t_min, "covered": covered,
            })),
            "notes": l.notes,
        });
        say!("{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    say!("flow     {flow}")?;
    say!(
        "epochs   {} at the sender ({}#{}), {} at the receiver ({}#{})",
        l.sender_epochs,
        ss.path().display(),
        sp.name,
        l.receiver_epochs,
        rs.path().display(),
        rp.name
    )?;
    let opt = |v: Option<f64>| v.map_or("-".to_string(), format_ns);
    match l.packets {
        Some(p) => say!("packets  {p:.1} (count vector)")?,
        None => say!("packets  -")?,
    }
    match (&l.mean_ns, &l.reason) {
        (None, Some(why)) => say!("mean     - ({why})")?,
        _ => say!("mean     {} ({estimator} estimator)", opt(l.mean_ns))?,
    }
    if let Some((lo, hi)) = l.mean_interval_ns {
        say!(
            "interval {} .. {} ({:.0} % confidence, {} noise draws); {} within ±{:.0} %",
            format_ns(lo),
            format_ns(hi),
            confidence * 100.0,
            l.noise_draws,
            if l.certified(beta) {
                "certified"
            } else {
                "not certified"
            },
            beta * 100.0
        )?;
    }
    if a.gamma > 0 && l.mean_ns.is_some() {
        match (l.std_ns, l.std_interval_ns, &l.std_reason) {
            (Some(sd), Some((lo, hi)), _) => say!(
                "std      {} (95 % interval {} .. {}, from the spread of {} counters)",
                format_ns(sd),
                format_ns(lo),
                format_ns(hi),
                l.std_counters
            )?,
            (Some(sd), None, _) => say!(
                "std      {} (Theorem 4, γ = {} virtual repetitions; no interval)",
                format_ns(sd),
                a.gamma
            )?,
            (None, _, Some(why)) => say!("std      - ({why})")?,
            (None, _, None) => say!("std      -")?,
        }
    }
    if let Some((alpha, beta, t_min)) = g {
        say!(
            "plan     P(|mean error| ≤ {:.0} %) ≥ {:.0} % for flows whose timestamp sum reaches t_min = {t_min:.0} units (paper's noise model); this flow's: {:.0} units, {}",
            beta * 100.0,
            alpha * 100.0,
            l.t_units,
            if covered == Some(true) {
                "covered"
            } else {
                "not covered"
            }
        )?;
    }
    for n in &l.notes {
        say!("note     {n}")?;
    }
    Ok(())
}
