//! `owl collector`: stores the per-interval results of any number of agent pairs (the work is in
//! `owl_live::collector` and `owl_live::store`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, anyhow};
use clap::Args;
use owl_live::key::Key;

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

Examples:
  owl collector --listen 0.0.0.0:7708 --db owl.db --key-file owl.key
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
    // open the database before saying we listen: a bad --db fails at once
    drop(owl_live::store::Store::open(&a.db).map_err(|e| anyhow!("{}: {e}", a.db.display()))?);
    log(&format!(
        "listening on {}, storing into {}",
        listener.local_addr()?,
        a.db.display()
    ));
    owl_live::collector::serve(listener, key, &a.db, Arc::new(log)).map_err(|e| anyhow!(e))
}
