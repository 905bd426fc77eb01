use super::*;
use crate::identity::DEFAULT_IDENTITY_SEED;
use owl_core::exact::{Matcher, TruthOptions};

fn cfg(packets: u64) -> SimConfig {
    SimConfig {
        seed: 11,
        traffic: TrafficSource::Synthetic(TrafficConfig {
            packets,
            rate_pps: 1e6,
            flows: 50,
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn truth_of(sim: &Simulation) -> owl_core::exact::Truth {
    let (s, r) = sim.records(DEFAULT_IDENTITY_SEED);
    let mut m = Matcher::new(TruthOptions::default());
    for x in &s {
        m.add_sender(x).unwrap();
    }
    for x in &r {
        m.add_receiver(x);
    }
    m.finish()
}

#[test]
fn reproducible_from_the_seed() {
    let c = cfg(5_000);
    let a = Simulation::run(&c).unwrap();
    let b = Simulation::run(&c).unwrap();
    assert_eq!(a.report(), b.report());
    assert_eq!(a.records(1), b.records(1));
    let mut c2 = c.clone();
    c2.seed = 12;
    assert_ne!(Simulation::run(&c2).unwrap().records(1), a.records(1));
}

/// The exact truth computed from the two captures agrees with the simulator's own books:
/// lost, duplicated, reordered, mean delay and clock offset are known by construction.
#[test]
fn truth_agrees_with_the_books() {
    let mut c = cfg(40_000);
    c.path = PathConfig {
        delay: "exp:20us".parse().unwrap(),
        loss: "uniform:0.02".parse().unwrap(),
        reorder: Some(Reorder {
            fraction: 0.01,
            max_displacement: 5,
        }),
        duplicate: 0.005,
        rewrite: "ttl,mac,ecn=0.1".parse().unwrap(),
        clock_offset_ns: 7_000,
        ..Default::default()
    };
    let sim = Simulation::run(&c).unwrap();
    let b = sim.report().clone();
    assert!(b.lost > 0 && b.duplicated > 0 && b.reordered > 0 && b.ecn_marked > 0);
    let t = truth_of(&sim);
    assert_eq!(t.sent, b.sent);
    assert_eq!(t.sender_duplicates, 0);
    assert_eq!(t.lost, b.lost);
    assert_eq!(t.received, b.delivered);
    assert_eq!(t.duplicated, b.duplicated);
    assert_eq!(t.reordered, b.reordered);
    assert_eq!(t.unexpected, 0);
    let d = t.delay.unwrap();
    assert!(
        (d.mean_ns - b.observed_delay_mean_ns).abs() < 1e-6,
        "{} vs {}",
        d.mean_ns,
        b.observed_delay_mean_ns
    );
    assert!((d.mean_ns - b.path_delay_mean_ns - 7_000.0).abs() < 1e-6);
    assert!((d.std_ns - b.path_delay_std_ns).abs() < 1e-6);
}

/// A reordered packet is overtaken by at most `D` later packets, also on a FIFO path whose
/// heavy-tailed delays make long bursts of one arrival time (it lands inside the burst, not
/// after it).
#[test]
fn reordering_displacement_is_bounded_by_d() {
    let mut c = cfg(100_000);
    c.path.fifo = true;
    c.path.delay = DelayModel::weibull_with_mean(100_000.0, 0.7);
    c.path.reorder = Some(Reorder {
        fraction: 0.01,
        max_displacement: 3,
    });
    let sim = Simulation::run(&c).unwrap();
    let order: Vec<u32> = sim
        .deliveries
        .iter()
        .filter(|d| !d.dup)
        .map(|d| d.idx)
        .collect();
    // bursts of equal arrival times are long: the old rule (1 ns after the D-th later packet)
    // put a packet past all of them
    let mut run = 1;
    let mut longest = 1;
    for w in sim.deliveries.windows(2) {
        run = if w[1].r_ns == w[0].r_ns { run + 1 } else { 1 };
        longest = longest.max(run);
    }
    assert!(longest > 20, "no long burst to test with: {longest}");
    // packets sent later that arrive before each packet
    let mut later_before = 0usize;
    let mut worst = 0usize;
    let mut seen = std::collections::BTreeSet::new();
    for &i in &order {
        let over = seen.range(i + 1..).count();
        worst = worst.max(over);
        later_before += usize::from(over > 0);
        seen.insert(i);
        if seen.len() > 64 {
            let first = *seen.iter().next().unwrap();
            seen.remove(&first);
        }
    }
    assert!(later_before > 500, "{later_before} reordered");
    assert!(worst <= 3, "a packet overtaken by {worst} later packets");
}

#[test]
fn fifo_never_overtakes() {
    let mut c = cfg(20_000);
    c.path.delay = "weibull-mean:5us:0.6".parse().unwrap();
    c.path.fifo = true;
    let t = truth_of(&Simulation::run(&c).unwrap());
    assert_eq!(t.reordered, 0);
    c.path.fifo = false;
    assert!(truth_of(&Simulation::run(&c).unwrap()).reordered > 0);
}

#[test]
fn two_queues_give_each_class_its_delay() {
    let mut c = cfg(50_000);
    c.path.delay = "const:10us".parse().unwrap();
    c.path.class = Some(("const:1ms".parse().unwrap(), 0.5));
    let sim = Simulation::run(&c).unwrap();
    let (s, r) = sim.records(1);
    let mut m = Matcher::new(TruthOptions {
        per_flow: true,
        ..Default::default()
    });
    s.iter().for_each(|x| m.add_sender(x).unwrap());
    r.iter().for_each(|x| m.add_receiver(x));
    let t = m.finish();
    let (mut slow, mut fast) = (0, 0);
    for f in &t.flows {
        let d = f.delay.unwrap();
        assert_eq!(d.min_ns, d.max_ns, "one class per flow");
        match d.mean_ns as i64 {
            10_000 => fast += 1,
            1_000_000 => slow += 1,
            other => panic!("unexpected delay {other}"),
        }
    }
    assert!(slow > 5 && fast > 5, "{slow} {fast}");
}

#[test]
fn episodes_lose_in_bursts() {
    let mut c = cfg(200_000);
    c.path.loss = "episodes:0.02:100".parse().unwrap();
    let sim = Simulation::run(&c).unwrap();
    let rate = sim.report().lost as f64 / 200_000.0;
    // 40 episodes on average: the rate is known to ~±50 %
    assert!((0.005..0.05).contains(&rate), "{rate}");
}

#[test]
fn files_roundtrip_and_from_trace() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(3_000);
    let sim = Simulation::run(&c).unwrap();
    for fmt in [CaptureFormat::Pcap, CaptureFormat::Pcapng] {
        let (sp, rp) = sim.write(dir.path(), fmt, &mut |_, _| {}).unwrap();
        let read = |p: &Path| {
            let mut rr = crate::records::RecordReader::open(p, DEFAULT_IDENTITY_SEED).unwrap();
            let mut all = Vec::new();
            let mut b = Vec::new();
            while rr.next_batch(&mut b, 1000).unwrap() > 0 {
                all.extend_from_slice(&b);
            }
            all
        };
        let (s, r) = sim.records(DEFAULT_IDENTITY_SEED);
        assert_eq!(read(&sp), s);
        assert_eq!(read(&rp), r);
    }
    // the sender capture as the traffic of a new simulation
    let mut c2 = SimConfig {
        traffic: TrafficSource::Capture(dir.path().join("sender.pcap"), None),
        ..Default::default()
    };
    c2.path.loss = LossModel::Uniform(0.1);
    let sim2 = Simulation::run(&c2).unwrap();
    assert_eq!(sim2.report().sent, 3_000);
    let t = truth_of(&sim2);
    assert_eq!(t.sent, 3_000);
    assert_eq!(t.lost, sim2.report().lost);
}

#[test]
fn absurd_parameters_are_refused() {
    let base = cfg(1_000);
    let with = |f: &dyn Fn(&mut SimConfig)| {
        let mut c = base.clone();
        f(&mut c);
        Simulation::run(&c).err().map(|e| e.to_string())
    };
    let tr = |f: fn(&mut TrafficConfig)| {
        move |c: &mut SimConfig| {
            if let TrafficSource::Synthetic(t) = &mut c.traffic {
                f(t)
            }
        }
    };
    for (case, want) in [
        (with(&tr(|t| t.packets = 0)), "packet count"),
        (with(&tr(|t| t.rate_pps = -1.0)), "rate"),
        (with(&tr(|t| t.rate_pps = f64::NAN)), "rate"),
        (with(&tr(|t| t.rate_pps = 1e-9)), "2106"),
        (with(&tr(|t| t.flows = 0)), "flow count"),
        (with(&tr(|t| t.flows = 5_000)), "flow count"),
        (with(&tr(|t| t.ipv6_fraction = 2.0)), "IPv6 fraction"),
        (with(&|c| c.snaplen = 20), "snaplen"),
        (with(&|c| c.path.duplicate = 1.0), "duplicate"),
        (
            with(&|c| c.path.clock_offset_ns = -10i64.pow(15)),
            "clock offset",
        ),
        (
            with(&|c| c.path.loss = LossModel::Uniform(1.2)),
            "loss model",
        ),
        (
            with(&|c| {
                c.path.reorder = Some(Reorder {
                    fraction: 0.1,
                    max_displacement: 0,
                })
            }),
            "displacement",
        ),
        (
            with(&|c| c.path.delay = DelayModel::Exponential(-3.0)),
            "exponential",
        ),
    ] {
        let msg = case.unwrap_or_else(|| panic!("accepted: {want}"));
        assert!(msg.contains(want), "{msg}");
    }
    // a clock offset that would make timestamps negative
    let mut c = base.clone();
    if let TrafficSource::Synthetic(t) = &mut c.traffic {
        t.start_ns = 1_000;
    }
    c.path.clock_offset_ns = -1_000_000_000;
    let e = Simulation::run(&c)
        .err()
        .expect("negative receiver timestamps accepted");
    assert!(e.to_string().contains("1970"), "{e}");
}

#[test]
fn parse_helpers() {
    assert_eq!(parse_sizes("imix").unwrap(), imix());
    assert_eq!(parse_sizes("100").unwrap(), vec![(100, 1.0)]);
    assert_eq!(
        parse_sizes("64:3,1500:1").unwrap(),
        vec![(64, 3.0), (1500, 1.0)]
    );
    assert!(parse_sizes("64:0").is_err());
    assert!(parse_sizes("70000").is_err());
    assert_eq!(
        "none".parse::<Rewrite>().unwrap(),
        Rewrite {
            ttl: false,
            mac: false,
            ecn_ce: 0.0
        }
    );
    assert_eq!(
        "ttl,ecn=0.5".parse::<Rewrite>().unwrap(),
        Rewrite {
            ttl: true,
            mac: false,
            ecn_ce: 0.5
        }
    );
    assert!("nat".parse::<Rewrite>().is_err());
}

/// ECMP pins every flow to one path: with a constant queue delay each flow sees one of the
/// four path delays, all four are used, and consecutive packets of different flows have
/// unrelated delays (the lag-1 correlation is that of independent path choices, near 0).
#[test]
fn ecmp_pins_flows_and_breaks_temporal_correlation() {
    let mut c = cfg(40_000);
    if let TrafficSource::Synthetic(t) = &mut c.traffic {
        t.flows = 400;
    }
    c.path = PathConfig {
        delay: "const:100us".parse().unwrap(),
        ecmp: parse_ecmp("4:300us").unwrap(),
        rewrite: Rewrite::default(),
        ..Default::default()
    };
    let sim = Simulation::run(&c).unwrap();
    let (s, r) = sim.records(DEFAULT_IDENTITY_SEED);
    let mut m = Matcher::new(TruthOptions {
        keep_flows: true,
        ..Default::default()
    });
    s.iter().for_each(|x| m.add_sender(x).unwrap());
    r.iter().for_each(|x| m.add_receiver(x));
    let mut per_flow: std::collections::HashMap<owl_core::FlowKey, i64> = Default::default();
    let mut seen = std::collections::BTreeSet::new();
    let mut pairs = Vec::new();
    let mut prev: Option<(owl_core::FlowKey, i64)> = None;
    for p in m.matched() {
        let d = p.delay_ns();
        assert!([100_000, 200_000, 300_000, 400_000].contains(&d), "{d}");
        assert_eq!(
            *per_flow.entry(p.flow).or_insert(d),
            d,
            "a flow changed paths"
        );
        seen.insert(d);
        if let Some((f, pd)) = prev
            && f != p.flow
        {
            pairs.push((pd as f64, d as f64));
        }
        prev = Some((p.flow, d));
    }
    assert_eq!(seen.len(), 4);
    let n = pairs.len() as f64;
    let (mx, my) = (
        pairs.iter().map(|p| p.0).sum::<f64>() / n,
        pairs.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let cov = pairs.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / n;
    let vx = pairs.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>() / n;
    let vy = pairs.iter().map(|p| (p.1 - my).powi(2)).sum::<f64>() / n;
    let corr = cov / (vx * vy).sqrt();
    // a few large flows make up many neighbours: allow what their share explains
    assert!(corr.abs() < 0.15, "lag-1 correlation across flows {corr}");
}

#[test]
fn ecmp_paths_with_their_own_model_and_fifo_per_path() {
    let mut c = cfg(5_000);
    c.path = PathConfig {
        delay: "const:1us".parse().unwrap(),
        ecmp: parse_ecmp("0;1ms@const:5us").unwrap(),
        fifo: true,
        ..Default::default()
    };
    let t = truth_of(&Simulation::run(&c).unwrap());
    assert_eq!(t.lost, 0);
    let d = t.delay.unwrap();
    assert_eq!(d.min_ns, 1_000);
    assert_eq!(d.max_ns, 1_005_000);
}

#[test]
fn ecmp_text_forms_and_errors() {
    let p = parse_ecmp("4:300us").unwrap();
    assert_eq!(
        p.iter().map(|e| e.offset_ns).collect::<Vec<_>>(),
        vec![0.0, 100_000.0, 200_000.0, 300_000.0]
    );
    let q = parse_ecmp("0;50us@exp:200us;120us").unwrap();
    assert_eq!(q.len(), 3);
    assert_eq!(q[1].delay, Some(DelayModel::Exponential(200_000.0)));
    assert_eq!(parse_ecmp(&format_ecmp(&q)).unwrap(), q);
    assert_eq!(parse_ecmp("1:5us").unwrap()[0].offset_ns, 0.0);
    for bad in ["0:5us", "5000:1us", "x", "-5us", "3:bogus", "0;1us@nope:3"] {
        assert!(parse_ecmp(bad).is_err(), "{bad}");
    }
}

#[test]
fn truncated_flow_sizes_validate() {
    let mut c = cfg(1_000);
    if let TrafficSource::Synthetic(t) = &mut c.traffic {
        t.flow_max_weight = 0.5;
    }
    assert!(
        c.validate()
            .unwrap_err()
            .to_string()
            .contains("largest flow weight")
    );
    let small = SimConfig {
        traffic: TrafficSource::Synthetic(TrafficConfig::lds_trace(0.01)),
        ..Default::default()
    };
    let sim = Simulation::run(&small).unwrap();
    assert_eq!(sim.report().sent, 77_600);
}

/// A real capture as traffic: a PKTAP frame whose IP header lies beyond 64 KiB is malformed
/// (not an offset cut to 16 bits), and records with an invalid time are counted.
#[test]
fn trace_source_counts_what_it_cannot_replay() {
    use crate::dissect::LINKTYPE_PKTAP;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.pcap");
    let ip = [
        0x45u8, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 2, 0, 8, 0,
        0,
    ];
    let pktap = |hlen: usize| {
        let mut f = vec![0u8; hlen];
        f[0..4].copy_from_slice(&(hlen as u32).to_le_bytes());
        f[4..8].copy_from_slice(&1u32.to_le_bytes());
        f[8..12].copy_from_slice(&12u32.to_le_bytes()); // DLT_RAW
        f.extend_from_slice(&ip);
        f
    };
    let mut w = CaptureWriter::new(Vec::new(), CaptureFormat::Pcap, LINKTYPE_PKTAP, 0).unwrap();
    w.write_packet(1_000, &pktap(108), 136).unwrap();
    w.write_packet(2_000, &pktap(70_000), 70_028).unwrap();
    w.write_packet(3_000, &pktap(108), 136).unwrap();
    let mut b = w.finish().unwrap();
    // the third record's nanoseconds: 10^9, no valid time
    let third = 24 + (16 + 136) + (16 + 70_028);
    b[third + 4..third + 8].copy_from_slice(&1_000_000_000u32.to_le_bytes());
    std::fs::write(&path, &b).unwrap();
    let t = trace::TraceSource::load(&path, None).unwrap();
    assert_eq!(t.packets.len(), 1);
    assert_eq!(t.packets[0].ip_offset, 108);
    let s = t.stats;
    assert_eq!(
        (s.frames, s.ip_packets, s.malformed, s.bad_timestamp),
        (3, 1, 2, 1)
    );
}

/// A RED bottleneck in the path: its drops are the books' losses (and the truth's), its
/// queueing is in the delays, and FIFO keeps the order.
#[test]
fn a_red_bottleneck_drops_and_delays() {
    let mut c = cfg(60_000);
    // 1 M packets/s of IMIX (≈ 2.8 Gbit/s) into a 2.5 Gbit/s link: overloaded throughout
    c.path = PathConfig {
        delay: DelayModel::Constant(1_000.0),
        fifo: true,
        queue: Some("red:2.5Gbit,buffer=5ms".parse().unwrap()),
        ..Default::default()
    };
    let sim = Simulation::run(&c).unwrap();
    let b = sim.report().clone();
    assert!(b.red_early_drops + b.red_tail_drops > 0, "{b:?}");
    assert_eq!(b.lost, b.red_early_drops + b.red_tail_drops);
    let t = truth_of(&sim);
    assert_eq!(t.lost, b.lost);
    assert_eq!(b.reordered, 0);
    // queueing up to the 5 ms buffer, beyond the 1 µs of propagation
    assert!(
        b.path_delay_mean_ns > 100_000.0 && b.path_delay_mean_ns < 5_001_000.0,
        "{b:?}"
    );
}
