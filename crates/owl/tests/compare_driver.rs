//! The comparison driver called as a library (no `owl` process): a simulated pair's report
//! against the simulator's books.

use anyhow::Result;
use owl::compare::{CompareOptions, CompareSinks, CsvOut, IntervalSink, compare};
use owl::methods;
use owl::report::IntervalReport;
use owl_core::interval::Intervals;
use owl_trace::capture::CaptureFormat;
use owl_trace::identity::DEFAULT_IDENTITY_SEED;
use owl_trace::records::ReadOptions;
use owl_trace::sim::{LossModel, SimConfig, Simulation, TrafficConfig, TrafficSource};

/// Keeps every interval report the driver hands out.
#[derive(Default)]
struct Kept {
    reports: Vec<IntervalReport>,
    ended: bool,
}

impl IntervalSink for Kept {
    fn interval(&mut self, report: &IntervalReport) -> Result<()> {
        assert!(!self.ended, "an interval after the end");
        self.reports.push(report.clone());
        Ok(())
    }

    fn end(&mut self) -> Result<()> {
        self.ended = true;
        Ok(())
    }
}

#[test]
fn driver_reports_every_packet_of_a_simulated_pair() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SimConfig {
        seed: 7,
        traffic: TrafficSource::Synthetic(TrafficConfig {
            packets: 30_000,
            ..TrafficConfig::default()
        }),
        ..SimConfig::default()
    };
    cfg.path.loss = LossModel::Uniform(0.02);
    let sim = Simulation::run(&cfg).unwrap();
    let books = sim.report().clone();
    let (sp, rp) = sim
        .write(dir.path(), CaptureFormat::Pcap, &mut |_, _| {})
        .unwrap();
    let read = ReadOptions {
        identity_seed: DEFAULT_IDENTITY_SEED,
        identity_bytes: None,
        interface: None,
    };
    let opts = CompareOptions {
        sender: sp,
        receiver: rp,
        methods: methods::parse_list("exact,lda").unwrap(),
        build: methods::Options {
            seed: 1,
            memory: None,
        },
        // LDA tuned for the 5 000 packets of a 50 ms interval (its default, for 5 M, would
        // have too few samples for its bounds in some intervals, and say so)
        overrides: methods::Overrides::parse(&["lda:packets=5000".into()]).unwrap(),
        intervals: Intervals::aligned(50_000_000),
        cut: owl_core::cut::Cut::delimiter_fitted(
            Intervals::aligned(50_000_000),
            owl_core::pipeline::truth::DEFAULT_HORIZON_NS,
        ),
        read: [read; 2],
        horizon_ns: owl_core::pipeline::truth::DEFAULT_HORIZON_NS,
        disorder_ns: owl_core::pipeline::truth::DEFAULT_DISORDER_NS,
        exact_quantiles: owl_core::pipeline::truth::DEFAULT_EXACT_QUANTILES,
        per_flow: false,
        per_class: false,
        flows_limit: None,
        trim: true,
        allow_truncated: false,
        allow_negative_delay: false,
        allow_short_intervals: false,
        keep_intervals: true,
        clock: owl::compare::ClockMode::Report,
        filter: None,
    };
    let mut kept = Kept::default();
    let mut csv = Vec::new();
    let mut notices = 0;
    let mut count = |_| notices += 1;
    let report = compare(
        &opts,
        &mut CompareSinks {
            intervals: Some(&mut kept),
            delays: Some(CsvOut::Writer("delays".into(), &mut csv)),
            notices: Some(&mut count),
            ..CompareSinks::default()
        },
    )
    .unwrap();
    assert_eq!(notices, 0, "a clean simulated pair warns of nothing");

    // every packet the simulator sent, delivered and lost, and no other
    let t = &report.truth;
    assert_eq!(t.sent, books.sent);
    assert_eq!(t.received, books.delivered);
    assert_eq!(t.lost, books.lost);
    assert_eq!(t.unexpected, 0);
    assert!(books.lost > 0, "the loss model lost nothing");
    let d = t.delay.expect("matched packets have a delay");
    assert_eq!(d.count, books.delivered);
    let rel = (d.mean_ns - books.observed_delay_mean_ns).abs() / books.observed_delay_mean_ns;
    assert!(
        rel < 1e-9,
        "truth mean {} vs simulated {}",
        d.mean_ns,
        books.observed_delay_mean_ns
    );

    // the delays CSV: its header and one row per matched packet, with the truth's mean
    let csv = String::from_utf8(csv).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("id,sender_ns,receiver_ns,delay_ns,proto,src,sport,dst,dport")
    );
    let delays: Vec<i64> = lines
        .map(|l| l.split(',').nth(3).unwrap().parse().unwrap())
        .collect();
    assert_eq!(delays.len() as u64, books.delivered);
    let csv_mean = delays.iter().map(|&d| d as f64).sum::<f64>() / delays.len() as f64;
    assert!((csv_mean - d.mean_ns).abs() < 1e-6 * d.mean_ns);

    // the interval sink saw what the report keeps, in index order, every sent packet once
    assert!(kept.ended);
    assert!(kept.reports.len() >= 5, "{} intervals", kept.reports.len());
    let held = report.intervals.as_ref().expect("keep_intervals");
    assert_eq!(held.len(), kept.reports.len());
    assert_eq!(report.interval_count, kept.reports.len() as u64);
    assert!(kept.reports.windows(2).all(|w| w[0].index < w[1].index));
    let sent: u64 = kept.reports.iter().map(|r| r.truth.sent).sum();
    assert_eq!(sent, books.sent);

    // both methods reported, in the order asked; LDA's mean close to the truth
    let names: Vec<&str> = report.methods.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["exact", "lda"]);
    // exact's samples: the packets matched within their interval, as the intervals say
    let in_interval = t
        .in_interval
        .expect("packets matched within an interval")
        .count;
    assert_eq!(report.methods[0].estimate.samples, in_interval);
    let matched: u64 = kept.reports.iter().map(|r| r.truth.matched).sum();
    assert_eq!(matched, in_interval);
    let lda = &report.methods[1];
    assert!(lda.run.as_ref().unwrap().error.is_none());
    let err = lda.mean_rel_err.expect("lda estimates the mean");
    assert!(err < 0.05, "lda's mean is {err} off the truth");
}
