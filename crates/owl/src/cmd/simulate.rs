//! `owl simulate`: a sender and a receiver capture of simulated traffic over a simulated path.

use std::path::PathBuf;

use anyhow::{Context, Result, anyhow};
use clap::{Args, ValueEnum};
use owl_core::units::{format_ns, parse_duration_ns};
use owl_trace::capture::CaptureFormat;
use owl_trace::sim::{
    Arrivals, ClockStepSpec, DelayModel, LossModel, PathConfig, Reorder, Rewrite, SimConfig,
    Simulation, TrafficConfig, TrafficSource, min_ip_len, parse_ecmp, parse_sizes,
};

use crate::progress;

const AFTER_HELP: &str = "Models:
  --delay      const:D | uniform:LO:HI | exp:MEAN | normal:MEAN:SD | weibull:SCALE:SHAPE |
               weibull-mean:MEAN:SHAPE | pareto:SCALE:SHAPE | pareto-mean:MEAN:SHAPE
               (durations with units: 200ns, 1.5us, 3ms). Router queueing delays are well
               modelled by Weibull with shape 0.6-0.8 (Papagiannaki et al., used by LDA §IV).
               The model gives each packet's drawn delay; the path is a FIFO queue (unless
               --independent-delays), so a packet also waits for the one before it, and the
               measured delays exceed the drawn ones wherever the drawn ones vary more than
               the packets' spacing: weibull-mean:200us:0.7 at 1M packets/s measures about
               2.5 ms. sim.json and the summary give both (drawn and after the queue).
  --loss       none | uniform:P | gilbert:P_GB:P_BG[:LOSS_GOOD:LOSS_BAD] |
               episodes:RATE:MEAN_PACKETS (bursts of ~MEAN_PACKETS, LDA §IV-C)
  --reorder    FRACTION:D   a fraction of packets is overtaken by up to D later packets (default
               0.001:8, rare as on routers; none for a strict FIFO)
  --rewrite    none | list of ttl, mac, ecn=FRACTION   (what a router changes; default ttl,mac)
  --class-delay MODEL with --class-fraction F: a second queue for a fraction F of the flows,
               so neighbouring packets of different flows see unrelated delays
  --ecmp       N:SPREAD (N paths, offsets spread evenly over [0, SPREAD]) or a ;-list of
               OFFSET[@MODEL]: each flow is pinned to one path by hash; a path adds its offset
               and may draw from its own delay model. Breaks temporal delay correlation across
               flows (LDS §1).
  --flow-preset lds-paper: 7.76M packets of 146 000 flows at 27k packets/s, Pareto flow sizes
               (shape 0.85, truncated at weight 1e5) fitted to the trace of LDS §5;
               lds-small: the same at a tenth (776 000 packets, 14 600 flows);
               chic: COLATE's CHIC trace (§6.1: 124k packets/s, 12.4 packets per flow) for
               100 s, 12.4M packets of 1.0M flows, Pareto flow sizes as lds-paper. With the
               paper's RED queue: --queue red:580Mbit,cross=0.1-0.55,period=2s (the packets load
               the link to 0.6, cross traffic to 0.7-1.15 in all, so the queue builds up to
               RED's 0.24-0.48 s thresholds in its high periods)
  --queue      red:CAPACITY[,cross=LO-HI][,period=T][,buffer=T]: a bottleneck link of CAPACITY
               bit/s (50Mbit, 1Gbit) managed by RED as COLATE §6.1 runs it: a buffer of 0.5 s of
               traffic, min_th 0.475, max_th 0.95 of it, w_q 0.002, max_p 1/50; fluid cross
               traffic takes LO or HI of the capacity, switching every T on average (default
               0-0, 1s). Its queueing adds to --delay (say const:1ms for propagation alone), its
               drops to --loss; sim.json counts them (red_early_drops, red_tail_drops)
               The paths of `owl experiment lds-*`: two priority queues and four ECMP paths,
               --delay weibull-mean:100us:0.7 --class-delay weibull-mean:500us:0.7
               --class-fraction 0.3, with --ecmp '1.25ms;1.3ms;1.35ms;1.4ms' (paper-like: a
               constant 1.25 ms calibrated on LDS §5.1) or --ecmp 4:150us (queues-only)

Output:
  DIR/sender.pcap and DIR/receiver.pcap (nanosecond pcap; pcapng with --format pcapng), and
  DIR/sim.json with the simulator's own books: sent, lost, duplicated, reordered (RFC 4737),
  the path delays it drew and R's clock (offset, skew, steps). Same seed, same files.

R's clock:
  --clock-offset D   R's clock reads D more than S's at the first packet
  --clock-skew PPM   and gains PPM·10⁻⁶ of the time since (20 ppm: 72 ms an hour)
  --clock-step AT:SIZE  and jumps by SIZE at AT after the first packet (repeatable): a packet
               arriving after it is stamped SIZE later. owl compare reports the skew and the
               steps it finds in the delays' floor (checks.clock); --clock correct removes them

Examples:
  owl simulate --out pair
  owl simulate --out pair --packets 5M --rate 5M --delay weibull-mean:200ns:0.6 \\
               --loss uniform:0.01
  owl simulate --out pair --delay exp:40us --independent-delays   # i.i.d. delays: heavy reordering
  owl simulate --out pair --loss episodes:0.01:100 --reorder 0.001:8 --duplicate 0.0005 \\
               --rewrite ttl,mac,ecn=0.05 --clock-offset 3us
  owl simulate --out pair --from real.pcap --delay exp:50us
  owl simulate --out pair --packets 600k --rate 10k --clock-skew 20 --clock-step 30s:2ms";

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Format {
    Pcap,
    Pcapng,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FlowPreset {
    /// The trace of LDS §5: 7.76M packets, 146 000 flows, 27k packets/s.
    LdsPaper,
    /// The same at a tenth.
    LdsSmall,
    /// COLATE's CHIC trace (§6.1, Table 2) for 100 s: 12.4M packets of 1.0M flows at 124k
    /// packets/s.
    Chic,
}

impl FlowPreset {
    pub fn traffic(self) -> TrafficConfig {
        match self {
            FlowPreset::LdsPaper => TrafficConfig::lds_trace(1.0),
            FlowPreset::LdsSmall => TrafficConfig::lds_trace(0.1),
            FlowPreset::Chic => TrafficConfig::chic_like(100.0),
        }
    }
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ArrivalArg {
    Poisson,
    Constant,
}

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct SimulateArgs {
    /// Directory to write sender.pcap, receiver.pcap and sim.json into (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Seed of every random choice (traffic and path use separate streams).
    #[arg(long, value_parser = crate::numbers::u64_arg, default_value_t = 1)]
    pub seed: u64,
    /// Number of packets sent (accepts 100k, 5M, 1e6).
    #[arg(long, default_value = "100k", value_parser = parse_count)]
    pub packets: u64,
    /// Mean sending rate in packets per second (accepts 100k, 5M).
    #[arg(long, default_value = "100k", value_parser = parse_rate)]
    pub rate: f64,
    /// Inter-arrival process at the sender.
    #[arg(long, value_enum, default_value = "poisson")]
    pub arrivals: ArrivalArg,
    /// Time of the first packet, ns since the epoch (default 2026-01-01T00:00:00Z).
    #[arg(long, value_parser = crate::numbers::u64_arg, default_value_t = 1_767_225_600_000_000_000)]
    pub start_ns: u64,
    /// Number of flows, their sizes Pareto distributed [default: 1000, or the packet count if
    /// smaller].
    #[arg(long, value_parser = parse_count)]
    pub flows: Option<u64>,
    /// Pareto shape of flow sizes (smaller = heavier tail).
    #[arg(long, default_value_t = 1.2)]
    pub flow_shape: f64,
    /// Truncate the Pareto flow weights at W (needed for shapes below 1) [default: none].
    #[arg(long, value_name = "W")]
    pub flow_max_weight: Option<f64>,
    /// Packets, flows, rate and flow sizes shaped like a paper's trace (see below).
    #[arg(long, value_enum, conflicts_with_all = ["packets", "rate", "flows", "flow_shape", "flow_max_weight", "from"])]
    pub flow_preset: Option<FlowPreset>,
    /// Packet-size mix by IP length: imix, a length, or LEN:WEIGHT,LEN:WEIGHT.
    #[arg(long, default_value = "imix")]
    pub sizes: String,
    /// Fraction of flows over IPv6.
    #[arg(long, default_value_t = 0.2)]
    pub ipv6: f64,
    /// Fraction of flows over UDP (the rest TCP).
    #[arg(long, default_value_t = 0.3)]
    pub udp: f64,
    /// Take S's traffic (packets and timestamps) from a real capture instead.
    #[arg(
        long,
        value_name = "CAPTURE",
        conflicts_with_all = ["packets", "rate", "arrivals", "start_ns", "flows", "flow_shape", "flow_max_weight", "sizes", "ipv6", "udp"]
    )]
    pub from: Option<PathBuf>,
    /// With --from: take the packets of pcapng interface N only (numbered from 0 in file order).
    #[arg(long, requires = "from", value_parser = crate::numbers::u32_arg, value_name = "N")]
    pub interface: Option<u32>,
    /// Delay model of the path (see below).
    #[arg(long, default_value = "weibull-mean:100us:0.7")]
    pub delay: String,
    /// Delay model of a second queue for a class of flows.
    #[arg(long, value_name = "MODEL")]
    pub class_delay: Option<String>,
    /// Fraction of flows in the second queue.
    #[arg(
        long,
        default_value_t = 0.5,
        value_name = "F",
        requires = "class_delay"
    )]
    pub class_fraction: f64,
    /// ECMP-like paths, each flow pinned to one by hash (see below).
    #[arg(long, value_name = "SPEC")]
    pub ecmp: Option<String>,
    /// Give every packet a delay drawn independently of its neighbours', with no queue: wherever
    /// the drawn delays vary more than the spacing of packets, packets overtake each other
    /// wholesale (most of them at 100k packets/s with the default delay), a reordering no
    /// router shows. By default the path is a FIFO queue per class and ECMP path: a packet
    /// never overtakes the one before it but waits for it (arrival = max(send + drawn delay,
    /// previous arrival)), so the delays after the queue exceed the drawn ones when the drawn
    /// ones vary more than the spacing; --reorder adds the rare reordering of real routers.
    #[arg(long)]
    pub independent_delays: bool,
    /// The FIFO queue, the default (kept so that older command lines still run).
    #[arg(long, hide = true, conflicts_with = "independent_delays")]
    pub fifo: bool,
    /// A RED bottleneck before the path's delay and loss (see below).
    #[arg(long, value_name = "red:CAPACITY[,...]")]
    pub queue: Option<String>,
    /// Loss model (see below).
    #[arg(long, default_value = "none")]
    pub loss: String,
    /// Reordering FRACTION:D (a fraction of packets overtaken by up to D later ones), or none.
    #[arg(long, value_name = "FRACTION:D", default_value = "0.001:8")]
    pub reorder: Option<String>,
    /// Fraction of delivered packets duplicated.
    #[arg(long, default_value_t = 0.0, value_name = "F")]
    pub duplicate: f64,
    /// Router rewrites between the points.
    #[arg(long, default_value = "ttl,mac")]
    pub rewrite: String,
    /// R's clock minus S's clock (e.g. 5us, -2ms).
    #[arg(
        long,
        default_value = "0",
        allow_hyphen_values = true,
        value_name = "DURATION"
    )]
    pub clock_offset: String,
    /// R's clock rate less S's, parts per million (e.g. 20, -5): R's clock gains
    /// PPM·10⁻⁶ of the time since the first packet (NTP-disciplined hosts: 1-100 ppm apart).
    #[arg(
        long,
        default_value_t = 0.0,
        allow_hyphen_values = true,
        value_name = "PPM"
    )]
    pub clock_skew: f64,
    /// A step of R's clock AT (time since the first packet) by SIZE, e.g. 30s:2ms or
    /// 5s:-500us (an NTP step); repeat for several, in time order.
    #[arg(long, value_name = "AT:SIZE", allow_hyphen_values = true)]
    pub clock_step: Vec<String>,
    /// Bytes captured per packet at both points (0 = whole packets).
    #[arg(long, value_parser = crate::numbers::u32_arg, default_value_t = 128)]
    pub snaplen: u32,
    /// Capture file format.
    #[arg(long, value_enum, default_value = "pcap")]
    pub format: Format,
    /// Print the simulator's books as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Parse a count like `100k`, `5M`, `1e6`, `2500`.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let v = parse_rate(s)?;
    if v.fract() != 0.0 || v > u64::MAX as f64 {
        return Err(format!("'{s}' is not a whole number"));
    }
    Ok(v as u64)
}

/// Parse a rate like `100k`, `5M`, `2.5e6`.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a number (examples: 2500, 100k, 5M, 1e6)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("'{s}' must be a non-negative number"));
    }
    Ok(v * mul)
}

pub fn config(a: &SimulateArgs) -> Result<SimConfig> {
    let traffic = match &a.from {
        Some(p) => TrafficSource::Capture(p.clone(), a.interface),
        None if a.flow_preset.is_some() => TrafficSource::Synthetic(TrafficConfig {
            arrivals: match a.arrivals {
                ArrivalArg::Poisson => Arrivals::Poisson,
                ArrivalArg::Constant => Arrivals::Constant,
            },
            start_ns: a.start_ns,
            sizes: parse_sizes(&a.sizes)?,
            ipv6_fraction: a.ipv6,
            udp_fraction: a.udp,
            ..a.flow_preset.unwrap().traffic()
        }),
        None => TrafficSource::Synthetic(TrafficConfig {
            packets: a.packets,
            rate_pps: a.rate,
            arrivals: match a.arrivals {
                ArrivalArg::Poisson => Arrivals::Poisson,
                ArrivalArg::Constant => Arrivals::Constant,
            },
            start_ns: a.start_ns,
            flows: {
                let f = a.flows.unwrap_or(a.packets.clamp(1, 1000));
                u32::try_from(f).map_err(|_| anyhow!("flow count {f} is too large"))?
            },
            flow_shape: a.flow_shape,
            flow_max_weight: a.flow_max_weight.unwrap_or(f64::INFINITY),
            sizes: parse_sizes(&a.sizes)?,
            ipv6_fraction: a.ipv6,
            udp_fraction: a.udp,
        }),
    };
    let reorder = match a.reorder.as_deref() {
        None | Some("none") => None,
        Some(s) => {
            let (f, d) = s
                .split_once(':')
                .ok_or_else(|| anyhow!("--reorder '{s}': expected FRACTION:D, e.g. 0.01:8"))?;
            Some(Reorder {
                fraction: f
                    .parse()
                    .map_err(|_| anyhow!("--reorder '{s}': FRACTION is not a number"))?,
                max_displacement: d
                    .parse()
                    .map_err(|_| anyhow!("--reorder '{s}': D is not a whole number of packets"))?,
            })
        }
    };
    let offset = parse_duration_ns(&a.clock_offset).map_err(|e| anyhow!("--clock-offset: {e}"))?;
    let class = match &a.class_delay {
        None => None,
        Some(m) => Some((m.parse::<DelayModel>()?, a.class_fraction)),
    };
    Ok(SimConfig {
        seed: a.seed,
        traffic,
        path: PathConfig {
            delay: a.delay.parse::<DelayModel>()?,
            class,
            ecmp: match &a.ecmp {
                Some(e) => parse_ecmp(e)?,
                None => Vec::new(),
            },
            fifo: !a.independent_delays,
            queue: a.queue.as_deref().map(str::parse).transpose()?,
            loss: a.loss.parse::<LossModel>()?,
            reorder,
            duplicate: a.duplicate,
            rewrite: a.rewrite.parse::<Rewrite>()?,
            clock_offset_ns: offset.round() as i64,
            clock_skew_ppm: a.clock_skew,
            clock_steps: a
                .clock_step
                .iter()
                .map(|x| x.parse::<ClockStepSpec>())
                .collect::<Result<_, _>>()?,
        },
        snaplen: a.snaplen,
    })
}

/// Write `DIR/sim.json`, the simulator's books (what it sent, lost, duplicated, reordered, the
/// delays it gave, the clock offset) beside the two captures; returns its path and content.
pub fn write_books(
    dir: &std::path::Path,
    cfg: &SimConfig,
    sim: &Simulation,
    sp: &std::path::Path,
    rp: &std::path::Path,
) -> Result<(PathBuf, serde_json::Value)> {
    let books = serde_json::json!({
        "sender": sp.display().to_string(),
        "receiver": rp.display().to_string(),
        "delay_model": cfg.path.delay.to_string(),
        "loss_model": cfg.path.loss.to_string(),
        "ecmp": owl_trace::sim::format_ecmp(&cfg.path.ecmp),
        "report": sim.report(),
    });
    let jp = dir.join("sim.json");
    std::fs::write(&jp, serde_json::to_string_pretty(&books)? + "\n")
        .with_context(|| format!("{}: cannot write", jp.display()))?;
    Ok((jp, books))
}

/// ", skew 20 ppm, steps 2 ms at 30 s" (empty without either).
fn clock_extra(ppm: f64, steps: &[ClockStepSpec]) -> String {
    let mut s = String::new();
    if ppm != 0.0 {
        s.push_str(&format!(", skew {ppm} ppm"));
    }
    if !steps.is_empty() {
        let list: Vec<String> = steps
            .iter()
            .map(|st| {
                format!(
                    "{} at {}",
                    format_ns(st.size_ns as f64),
                    format_ns(st.at_ns as f64)
                )
            })
            .collect();
        s.push_str(&format!(", steps {}", list.join(", ")));
    }
    s
}

pub fn run(a: SimulateArgs) -> Result<()> {
    if a.fifo {
        eprintln!(
            "owl: warning: --fifo is the default path now (--independent-delays gives every packet its own delay)"
        );
    }
    let cfg = config(&a)?;
    cfg.validate()?;
    if let TrafficSource::Synthetic(t) = &cfg.traffic {
        // the smallest packet the simulator writes for this mix of IPv4/IPv6 and TCP/UDP: a
        // size below it cannot be written at all
        let floor = min_ip_len(t.ipv6_fraction >= 1.0, t.udp_fraction > 0.0);
        if let Some(&(short, _)) = t.sizes.iter().find(|(l, _)| *l < floor) {
            eprintln!(
                "owl: warning: --sizes {}: no packet is shorter than {floor} bytes, so {short}-byte ones are written longer (IP and TCP/UDP headers and the simulator's unique tag: from {} bytes for IPv4 UDP to {} for IPv6 TCP)",
                a.sizes,
                min_ip_len(false, true),
                min_ip_len(true, false)
            );
        }
    }
    let sim = Simulation::run(&cfg)?;
    let format = match a.format {
        Format::Pcap => CaptureFormat::Pcap,
        Format::Pcapng => CaptureFormat::Pcapng,
    };
    let pb = progress::bar(0, "writing captures", false);
    let (sp, rp) = sim
        .write(&a.out, format, &mut |done, total| {
            pb.set_length(total);
            pb.set_position(done);
        })
        .with_context(|| format!("{}: cannot write the captures", a.out.display()))?;
    pb.finish_and_clear();
    let rep = sim.report();
    let (jp, books) = write_books(&a.out, &cfg, &sim, &sp, &rp)?;
    if a.json {
        say!("{}", serde_json::to_string_pretty(&books)?)?;
    } else {
        say!("wrote {} ({} packets)", sp.display(), rep.sent)?;
        say!(
            "wrote {} ({} packets: {} delivered, {} duplicates)",
            rp.display(),
            rep.delivered + rep.duplicated,
            rep.delivered,
            rep.duplicated
        )?;
        say!("wrote {} (the simulator's books)", jp.display())?;
        say!(
            "path: delay model {} (its mean {}); delays given to delivered packets (queueing included): mean {} std {}; lost {} ({:.3}%), reordered {}, duplicated {}, clock offset {}{}",
            cfg.path.delay,
            format_ns(rep.model_mean_ns),
            format_ns(rep.path_delay_mean_ns),
            format_ns(rep.path_delay_std_ns),
            rep.lost,
            100.0 * rep.lost as f64 / rep.sent as f64,
            rep.reordered,
            rep.duplicated,
            format_ns(rep.clock_offset_ns as f64),
            clock_extra(rep.clock_skew_ppm, &rep.clock_steps)
        )?;
        if !a.independent_delays
            && rep.model_mean_ns > 0.0
            && rep.path_delay_mean_ns > 2.0 * rep.model_mean_ns
        {
            say!(
                "note: the delays are {:.1}x the model's mean: the path is a FIFO queue and the model's delays vary more than the packets' spacing, so packets wait for the ones before them (a slower --rate, a narrower model, or --independent-delays for no queue)",
                rep.path_delay_mean_ns / rep.model_mean_ns
            )?;
        }
        say!("next: owl compare {} {}", sp.display(), rp.display())?;
    }
    Ok(())
}
