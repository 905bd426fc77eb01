//! `owl demo`: the first thing a new user types.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::compare::{self, CompareArgs};
use super::simulate::{self, SimulateArgs};

#[derive(Args, Clone, Debug)]
#[command(
    after_help = "The demo simulates 200 000 packets (1 000 flows, IPv4/IPv6, TCP/UDP) \
at 100 000 packets/s through a router with Weibull delays (mean 10us as drawn; the FIFO queue \
makes packets wait for earlier ones, so the measured mean is higher), 1% random loss, 0.1% reordering, \
0.05% duplication and TTL/MAC rewrites, writes the two captures, and runs `owl compare` on \
them with every method. Use --keep DIR to keep the captures and the simulator's books \
(DIR/sim.json, as `owl simulate` writes them) and explore them with `owl compare` or tcpdump.

Examples:
  owl demo
  owl demo --keep demo/ && owl compare demo/sender.pcap demo/receiver.pcap --interval 100ms
  owl demo --json | jq '.methods[] | [.name, .mean_rel_err]'"
)]
pub struct DemoArgs {
    /// Keep the simulated captures in DIR instead of a temporary directory.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Seed of the simulation and of the methods.
    #[arg(long, value_parser = crate::numbers::u64_arg, default_value_t = 1)]
    pub seed: u64,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: DemoArgs) -> Result<()> {
    let tmp;
    let dir = match &a.keep {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::Builder::new().prefix("owl-demo-").tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let sim = SimulateArgs {
        out: dir.clone(),
        seed: a.seed,
        packets: 200_000,
        rate: 100_000.0,
        arrivals: simulate::ArrivalArg::Poisson,
        start_ns: 1_767_225_600_000_000_000,
        flows: Some(1_000),
        flow_shape: 1.2,
        flow_max_weight: None,
        flow_preset: None,
        sizes: "imix".into(),
        ipv6: 0.2,
        udp: 0.3,
        from: None,
        interface: None,
        delay: "weibull-mean:10us:0.7".into(),
        class_delay: None,
        class_fraction: 0.5,
        ecmp: None,
        independent_delays: false,
        fifo: false,
        queue: None,
        loss: "uniform:0.01".into(),
        reorder: Some("0.001:8".into()),
        duplicate: 0.0005,
        rewrite: "ttl,mac".into(),
        clock_offset: "0".into(),
        clock_skew: 0.0,
        clock_step: Vec::new(),
        snaplen: 128,
        format: simulate::Format::Pcap,
        json: false,
    };
    if !a.json {
        say!(
            "owl demo: simulating 200 000 packets through a router into {}",
            dir.display()
        )?;
        say!(
            "  (= owl simulate --out {} --packets 200k --rate 100k --delay weibull-mean:10us:0.7 --loss uniform:0.01 --reorder 0.001:8 --duplicate 0.0005)",
            dir.display()
        )?;
    }
    let cfg = simulate::config(&sim)?;
    let s = owl_trace::sim::Simulation::run(&cfg)?;
    let (sp, rp) = s.write(
        &dir,
        owl_trace::capture::CaptureFormat::Pcap,
        &mut |_, _| {},
    )?;
    if a.keep.is_some() {
        simulate::write_books(&dir, &cfg, &s, &sp, &rp)?;
    }
    if !a.json {
        say!("  = owl compare {} {}", sp.display(), rp.display())?;
        say!()?;
    }
    let args = CompareArgs {
        sender: sp,
        receiver: rp,
        methods: "all".into(),
        agreed: super::agreed::Agreed::with_seed(a.seed),
        json: a.json,
        per_flow: false,
        per_class: false,
        per_packet: None,
        top: None,
        unmatched: None,
        delays: None,
        allow_truncated: false,
        allow_negative_delay: false,
        clock: super::compare::ClockArg::Report,
        filter: None,
        jsonl: false,
        disorder: owl_core::pipeline::truth::DEFAULT_DISORDER_NS,
        exact_quantiles: owl_core::pipeline::truth::DEFAULT_EXACT_QUANTILES,
        rows: None,
        allow_short_intervals: false,
        no_trim: false,
        interface: None,
        sender_interface: None,
        receiver_interface: None,
    };
    compare::run(args)?;
    if a.keep.is_some() && !a.json {
        say!()?;
        say!("captures kept in {}", dir.display())?;
    }
    Ok(())
}
