//! `owl`: passive one-way latency measurement between two observation points.

mod cmd;
mod colate;
mod experiment;
mod input;
mod methods;
mod progress;
mod store;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

const ABOUT: &str = "Passive one-way latency measurement between two observation points.

owl turns what two observation points saw of the same traffic — a sender point S where packets
pass first and a receiver point R — into one-way delay (mean, spread, tails), loss, reordering
and duplication, without probes and without touching the packets. It runs the exact
store-everything method as ground truth beside compact synopses from the literature (LDA, RDA,
LDS, OPA, COLATE and their baselines) so each can be judged on the same traffic.";

const EXAMPLES: &str = "Examples:
  owl demo                                  simulate a small pair and compare on it
  owl simulate --out pair --packets 1M --loss uniform:0.01 --delay weibull-mean:200us:0.7
  owl compare pair/sender.pcap pair/receiver.pcap
  owl compare S.pcap R.pcap --interval 1s --json > report.json
  owl compare S.pcap R.pcap --unmatched lost/      # write what only one side saw
  owl record --method lda --role sender S.pcap -o S.owl    # at each point, then
  owl estimate S.owl R.owl                                 # where the files meet
  owl record --method colate --store S.db S.pcap           # COLATE: epochs, no intervals
  owl query --flow 'tcp 10.0.0.1 40000 10.0.0.2 443' S.db R.db

Run `owl <command> --help` for the details of each command.";

#[derive(Parser)]
#[command(name = "owl", version, about = ABOUT, after_help = EXAMPLES, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a small capture pair in a temporary directory and compare methods on it.
    Demo(cmd::demo::DemoArgs),
    /// Write a sender and a receiver capture of simulated traffic over a simulated path.
    Simulate(cmd::simulate::SimulateArgs),
    /// Measure one-way latency between two captures: exact truth and every method, side by side.
    Compare(cmd::compare::CompareArgs),
    /// Record one point's synopses (per interval) from its capture into a file.
    Record(cmd::record::RecordArgs),
    /// Turn a sender's and a receiver's synopsis files into estimates.
    Estimate(cmd::estimate::EstimateArgs),
    /// A flow's mean and std of delay between two points from their COLATE epoch stores.
    Query(cmd::query::QueryArgs),
    /// COLATE's parameter plan (§5) and epoch-store statistics.
    Colate(cmd::colate::ColateArgs),
    /// Regenerate a paper's evaluation on simulated traces (CSV + PNG).
    Experiment(experiment::ExperimentArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Estimate(a) => cmd::estimate::run(a),
        Command::Query(a) => cmd::query::run(a),
        Command::Colate(a) => cmd::colate::run(a),
        Command::Experiment(a) => experiment::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // one line: the outermost context, then each cause
            let mut msg = e.to_string();
            for c in e.chain().skip(1) {
                msg.push_str(": ");
                msg.push_str(&c.to_string());
            }
            eprintln!("owl: error: {msg}");
            ExitCode::FAILURE
        }
    }
}
