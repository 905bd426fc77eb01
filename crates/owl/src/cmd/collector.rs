//! `owl collector`: stores the per-interval results of any number of agent pairs (the work is in
//! `owl_live::collector` and `owl_live::store`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use clap::Args;
use owl_live::key::Key;
use owl_live::metrics::Metrics;

const AFTER_HELP: &str = "Receiver agents started with --collector HOST:PORT deliver every
interval line to the collector, which stores it in an SQLite database (one transaction per
interval, write-ahead log, synchronous: an interval is stored whole or not at all) and then
acknowledges it; an agent resends what was not acknowledged after a reconnect, and a resent
interval replaces itself. Any number of pairs, each under its label (the receiver's --pair).
Connections are authenticated like the agents' (same --key-file); a peer with another key is
refused with a one-line reason on both sides.

The schema is documented in crates/owl-live/src/store.rs (tables intervals, results, quiet).
Read it with `owl report --db FILE`, or with sqlite3:
  sqlite3 owl.db \"SELECT pair, start_ns, method, mean_ns FROM intervals JOIN results USING (pair, idx)\"

With --metrics, Prometheus (or any OpenMetrics scraper) reads each pair's latest interval:
  owl_one_way_delay_mean_seconds{pair,method}, owl_one_way_delay_std_seconds{pair,method},
  owl_one_way_delay_quantile_seconds{pair,method,quantile} (methods with quantiles),
  owl_samples{pair,method}, owl_lost_packets{pair,method}, owl_loss_ratio{pair},
  owl_sent_packets{pair}, owl_received_packets{pair}, owl_interval_start_seconds{pair},
  owl_clock_offset_seconds{pair}, owl_clock_offset_uncertainty_seconds{pair} (the agents');
  counters owl_intervals_total{pair,status}, owl_decode_failures_total{pair,method},
  owl_kernel_drops_total{pair,point}, owl_reports_refused_total.
A resent or late interval is stored but moves no gauge back; a method that fails loses its
gauges. Many collectors (sharded by pair) are aggregated by Prometheus, not by owl.

Examples:
  owl collector --listen 0.0.0.0:7708 --db owl.db --key-file owl.key --metrics 0.0.0.0:9708
  owl agent --role receiver … --collector collector-host:7708 --pair 'lon→fra'
  owl report --db owl.db --pair 'lon→fra'";

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct CollectorArgs {
    /// Address to listen on for agents (port 0: any free port, printed).
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: String,
    /// SQLite database to store into (created if absent).
    #[arg(long, value_name = "FILE")]
    pub db: PathBuf,
    /// The shared key (`owl keygen`), the same as the agents'.
    #[arg(long, value_name = "FILE")]
    pub key_file: PathBuf,
    /// Serve Prometheus/OpenMetrics text on http://ADDR/metrics: each pair's latest interval
    /// (mean, std, quantiles, samples, loss) as gauges, intervals by status, decode failures
    /// and kernel drops as counters (see below).
    #[arg(long, value_name = "HOST:PORT")]
    pub metrics: Option<String>,
}

fn log(line: &str) {
    eprintln!("owl: collector: {line}");
}

pub fn run(a: CollectorArgs) -> Result<()> {
    let key = Key::read(&a.key_file)?;
    if Key::readable_by_others(&a.key_file) {
        log(&format!(
            "warning: {} can be read by other users (chmod 600 it)",
            a.key_file.display()
        ));
    }
    let listener = TcpListener::bind(&a.listen)
        .map_err(|e| anyhow!("--listen {}: cannot listen: {e}", a.listen))?;
    // every port before the database: a collector that cannot listen creates no file
    let scrape = match &a.metrics {
        Some(addr) => Some(
            TcpListener::bind(addr).map_err(|e| anyhow!("--metrics {addr}: cannot listen: {e}"))?,
        ),
        None => None,
    };
    // open the database before saying we listen: a bad --db fails at once
    drop(owl_live::store::Store::open(&a.db).map_err(|e| anyhow!("{}: {e}", a.db.display()))?);
    let mut said = format!(
        "listening on {}, storing into {}",
        listener.local_addr()?,
        a.db.display()
    );
    if let Some(l) = &scrape {
        said += &format!(", metrics on http://{}/metrics", l.local_addr()?);
    }
    log(&said);
    super::hangup::go_on_after_hangup(
        || "SIGHUP: the collector reloads nothing; it goes on".to_string(),
        log,
    );
    let metrics = scrape.map(|l| {
        let m = Arc::new(Metrics::new());
        let served = m.clone();
        std::thread::spawn(move || owl_live::metrics::serve(l, served, Arc::new(log)));
        m
    });
    owl_live::collector::serve(listener, key, &a.db, metrics, Arc::new(log)).map_err(|e| anyhow!(e))
}
