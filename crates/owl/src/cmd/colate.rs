//! `owl colate`: COLATE's parameter plan (§5) and what an epoch store holds.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use owl_core::colate::plan::{self, Form, Requirement};
use owl_core::units::{format_bytes, parse_bytes};

use crate::store::Store;

#[derive(Args, Clone, Debug)]
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
    /// Eq. 12's measured (t_R − t_S)/(t_R + t_S): B = β·ratio.
    #[arg(long, default_value_t = 1.0)]
    pub ratio: f64,
    /// Eq. 21/22 as derived ((n − m)², default) or as printed ((n − m)).
    #[arg(long, default_value = "derived")]
    pub form: Form,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Clone, Debug)]
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
    let mut req = Requirement {
        memory_bits: a.memory as f64 * 8.0,
        alpha: a.alpha,
        beta: a.beta,
        ratio: a.ratio,
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
    if a.json {
        say!("{}", serde_json::to_string_pretty(&p)?)?;
        return Ok(());
    }
    say!(
        "requirement  M = {} ({} bits), α = {}, β = {}, ratio = {} → A = {:.4}, B = {}, k = {:.4}",
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
