//! `owl colate`: COLATE's parameter plan (§5) and what an epoch store holds.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use owl_core::colate::plan::{self, Form, Model, Requirement};
use owl_core::units::{format_bytes, parse_bytes};

use crate::store::Store;

#[derive(Args, Clone, Debug)]
#[command(after_help = "Examples:
  owl colate plan --memory 1MiB                      # n, m, b, T for 1 MiB at α = 0.95, β = 0.05
  owl colate plan --memory 10MiB --ratio-from S.db R.db   # and what it promises on this path
  owl colate stats S.db R.db                         # epochs, packets, bytes per point

Epoch stores are written by `owl record --method colate --store S.db --point s S.pcap` and
queried by `owl query`.")]
pub struct ColateArgs {
    #[command(subcommand)]
    pub command: ColateCommand,
}

#[derive(Subcommand, Clone, Debug)]
pub enum ColateCommand {
    /// Solve §5's Eq. 13–15 and 22 for n, m, b, T from a RAM budget and a requirement.
    Plan(PlanArgs),
    /// What an epoch store holds, point by point: epochs, packets, bytes, bits per packet.
    Stats(StatsArgs),
}

#[derive(Args, Clone, Debug)]
#[command(after_help = "Examples:
  owl colate plan --memory 1MiB --alpha 0.95 --beta 0.05
  owl colate plan --memory 10MiB --model paper        # Theorem 1's noise, as the paper plans
  owl colate plan --memory 10MiB --ratio-from S.db R.db --json

The plan sizes n, m, b and T (§5); the promise line says which flows it certifies at the
ratio given (or measured) under the chosen noise model.")]
pub struct PlanArgs {
    /// RAM for the counter vector (M), e.g. 1MiB (the paper's "1MB" is 2^23 bits).
    #[arg(long, default_value = "10MiB", value_parser = parse_bytes)]
    pub memory: u64,
    /// Required reliability α.
    #[arg(long, default_value_t = 0.95)]
    pub alpha: f64,
    /// Confidence interval β.
    #[arg(long, default_value_t = 0.05)]
    pub beta: f64,
    /// Smallest per-flow timestamp sum to cover, in timestamp units (default: the t_min for
    /// which the paper's example shape, m = 20, holds at this memory and requirement).
    #[arg(long)]
    pub t_min: Option<f64>,
    /// Largest per-flow timestamp sum, in timestamp units (default: the paper example's).
    #[arg(long, default_value_t = plan::EXAMPLE_T_MAX)]
    pub t_max: f64,
    /// Eq. 12's ratio (t_R − t_S)/(t_R + t_S) of the flows' timestamp sums, for what the plan
    /// promises (B = β·ratio). Default 4.8e-4: its 5th percentile on owl's CHIC-like pair
    /// (delays 23 ms, epochs 3.5 s); a path's own scales with its delay over its epochs'
    /// length. The plan's n, m, b, T are sized at ratio 1, as the paper's example is.
    #[arg(long, default_value_t = plan::DEFAULT_RATIO, conflicts_with = "ratio_from")]
    pub ratio: f64,
    /// Measure the ratio instead: its 5th percentile over the counters of epoch pairs of two
    /// stores recorded on the path (sender's store, receiver's store; STORE#POINT picks a
    /// point), counters whose packet counts agree standing in for flows.
    #[arg(long, num_args = 2, value_names = ["SENDER_STORE", "RECEIVER_STORE"])]
    pub ratio_from: Option<Vec<String>>,
    /// The noise behind the promise: corrected (§3.2's whole timestamps in whole counters,
    /// and flows that share a counter, default) or paper (Theorem 1).
    #[arg(long, default_value = "corrected")]
    pub model: Model,
    /// Packets a second at the point, for the epoch length L = √(2T/ρ) the corrected model
    /// needs (default: the paper's CHIC trace, 124 kpps).
    #[arg(long, default_value_t = plan::DEFAULT_RATE_PPS)]
    pub rate: f64,
    /// Timestamp unit, ns (colate:unit_ns; default 1 µs).
    #[arg(long, default_value_t = 1_000)]
    pub unit_ns: u64,
    /// Eq. 21/22 as derived ((n − m)², default) or as printed ((n − m)).
    #[arg(long, default_value = "derived")]
    pub form: Form,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Clone, Debug)]
#[command(after_help = "Examples:
  owl colate stats S.db                  # every point of one store
  owl colate stats S.db R.db             # two stores, a line per point

Bytes are the epochs as stored (headers, tables and codes); bits per packet are those bytes
over the packets the epochs counted.")]
pub struct StatsArgs {
    /// Epoch stores.
    #[arg(required = true)]
    pub stores: Vec<PathBuf>,
}

pub fn run(a: ColateArgs) -> Result<()> {
    match a.command {
        ColateCommand::Plan(p) => plan_cmd(p),
        ColateCommand::Stats(s) => stats_cmd(s),
    }
}

fn plan_cmd(a: PlanArgs) -> Result<()> {
    if !(a.rate.is_finite() && a.rate > 0.0) {
        anyhow::bail!(
            "--rate {} must be a positive number of packets a second",
            a.rate
        );
    }
    if a.unit_ns == 0 {
        anyhow::bail!("--unit-ns must be at least 1");
    }
    let (ratio, measured) = match &a.ratio_from {
        Some(v) => {
            let m = crate::colate::measure_ratio(&v[0], &v[1])?;
            (m.p5, Some(m))
        }
        None => (a.ratio, None),
    };
    if !(ratio > 0.0 && ratio <= 1.0) {
        anyhow::bail!("Eq. 12's ratio {ratio} must be in (0, 1]");
    }
    let mut req = Requirement {
        memory_bits: a.memory as f64 * 8.0,
        alpha: a.alpha,
        beta: a.beta,
        ratio: 1.0,
        t_min: plan::EXAMPLE_T_MIN,
        t_max: a.t_max,
        form: a.form,
    };
    req.validate()?;
    req.t_min = match a.t_min {
        Some(t) => t,
        None => plan::t_min_for_m(&req, plan::EXAMPLE_M).ok_or_else(|| {
            anyhow::anyhow!("no counter width gives m = 20 at this memory: give --t-min")
        })?,
    };
    let p = plan::solve(&req)?;
    let rho = a.rate * a.unit_ns as f64 / 1e9;
    let promise = p.promise(ratio, rho, a.model);
    if a.json {
        say!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "plan": p,
                "promise": promise,
                "ratio_measured": measured,
                "rate_pps": a.rate,
                "unit_ns": a.unit_ns,
            }))?
        )?;
        return Ok(());
    }
    say!(
        "requirement  M = {} ({} bits), α = {}, β = {}, ratio = {} (sizing, as the paper's example) → A = {:.4}, B = {}, k = {:.4}",
        format_bytes(a.memory),
        req.memory_bits,
        req.alpha,
        req.beta,
        req.ratio,
        p.a,
        p.big_b,
        p.k
    )?;
    say!(
        "             t_min = {:.0}, t_max = {:.0} (timestamp units), Eq. 22 {}",
        req.t_min,
        req.t_max,
        req.form
    )?;
    say!(
        "solution     n = {:.1}, m = {:.3}, b = {:.4}, T = {:.4e}",
        p.n_exact,
        p.m_exact,
        p.b_exact,
        p.threshold_exact
    )?;
    say!(
        "deployed     n = {}, m = {}, b = {}, T = {} ({} of counters)",
        p.n,
        p.m,
        p.b,
        p.threshold,
        format_bytes(p.memory_bits().div_ceil(8))
    )?;
    say!(
        "config       --method-config colate:n={} --method-config colate:m={} --method-config colate:b={} --method-config colate:threshold={}",
        p.n,
        p.m,
        p.b,
        p.threshold
    )?;
    let source = match &measured {
        Some(m) => format!(
            "5th percentile of {} counters in {} epoch pairs",
            m.counters, m.pairs
        ),
        None if a.ratio == plan::DEFAULT_RATIO => {
            "default: 5th percentile on owl's CHIC-like trace; measure yours with --ratio-from"
                .into()
        }
        None => "given".into(),
    };
    say!(
        "promise      {} noise, ratio {:.3e} ({source}) → B = {:.3e}; at {} packets/s, epochs of L = {:.3e} units ({:.3} s)",
        promise.model,
        promise.ratio,
        promise.big_b,
        a.rate,
        promise.epoch_units,
        promise.epoch_units * a.unit_ns as f64 / 1e9
    )?;
    if promise.covers_any {
        say!(
            "             each point's sum within B with probability A = {:.4} for flows whose sum reaches t_min = {:.4e} units (≈ {:.0} packets in mid-epoch); nothing for smaller flows",
            p.a,
            promise.t_min,
            promise.packets_min
        )?;
    } else {
        say!(
            "             nothing: Eq. 22 needs a flow sum of t_min = {:.4e} units (≈ {:.0} packets in mid-epoch), above t_max = {:.4e}",
            promise.t_min,
            promise.packets_min,
            req.t_max
        )?;
    }
    say!(
        "             (a bound on each point's estimate alone: the two points' noise is the same packets and cancels in the mean, which colate:mean=raw uses; see the README)"
    )?;
    Ok(())
}

fn stats_cmd(a: StatsArgs) -> Result<()> {
    say!(
        "{:<24} {:>8} {:>14} {:>12} {:>12}",
        "store#point",
        "epochs",
        "packets",
        "bytes",
        "bits/packet"
    )?;
    for path in &a.stores {
        let st = Store::open_read(path)?;
        let check = st.integrity()?;
        if check != "ok" {
            anyhow::bail!("{}: SQLite integrity check: {check}", path.display());
        }
        for p in st.points()? {
            let s = st.stats(&p)?;
            say!(
                "{:<24} {:>8} {:>14} {:>12} {:>12.4}",
                format!("{}#{}", path.display(), p.name),
                s.epochs,
                s.packets,
                format_bytes(s.bytes),
                s.bits_per_packet()
            )?;
        }
    }
    Ok(())
}
