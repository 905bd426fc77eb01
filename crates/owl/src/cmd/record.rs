//! `owl record`: one observation point's synopses, interval by interval, appended to a file as
//! each interval closes.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, anyhow};
use clap::{Args, ValueEnum};
use owl_core::cut::{Cut, PointCut, encode_point_cut, window_start};
use owl_core::interval::Intervals;
use owl_core::method::{Method, Role};
use owl_core::pipeline::{ClosedInterval, NoTimer, PointStream};
use owl_core::units::{format_bytes, parse_duration_u64};
use owl_core::wire::SynopsisFile;

use owl_trace::dissect::linktype_name;
use owl_trace::identity::identity_bytes;
use owl_trace::records::InputStats;

use super::agreed::Agreed;
use crate::input::read_capture;
use crate::methods;

const AFTER_HELP: &str = "Each observation point records its own capture; only the synopsis
files meet (`owl estimate SENDER_FILE RECEIVER_FILE`). Both points must use the same method,
configuration (--memory, --seed), --interval, --origin-ns, --identity-seed and --identity-bytes:
estimate refuses a pair that differs and names the field.

Identity bytes: a packet is identified by a hash of its bytes from the IP header on, as far as
the capture kept them. If the two points keep different numbers (another snaplen, or another
link header: Ethernet 14 bytes, Linux SLL2 20), pass both --identity-bytes N with N what the
point that keeps less has: snaplen minus link header (tcpdump -s 128 on Ethernet: 114). record
warns when its capture cut packets below N, and says when packets were cut with no N given.

Each interval's block also holds the number of packets the point took in it: estimate reports
them as sent and received.

Cuts (--cut delimiter, the default with --interval): the sender's file names each interval's
first packets, its delimiters (a few bytes an interval). The receiver cannot know where S cut
while it records, so its file holds, raw, the packets it received within --cut-window of each
boundary (about 20 bytes each, local state: never shipped) beside each interval's synopsis;
estimate cuts them at S's delimiters, so both points' intervals hold the same packets. Both
points must use the same --cut and --cut-window (estimate refuses a pair that differs).

A pcapng file with several interfaces is recorded as one stream only if they are alike (link
type and snaplen; each packet is timed at its own interface's resolution); otherwise record
stops naming them: --interface N picks one.

Streaming: each interval is appended to FILE as soon as the capture has passed its end (plus
--disorder), and freed, so memory holds one or two intervals whatever the capture's length, and
CAPTURE can be a FIFO or - (standard input), e.g. `tcpdump -w - | owl record … -`. Every block
is checksummed: if the recording is cut short (a crash, a power cut), `owl estimate` reads every
interval written before the cut and says where the file ends.

If the capture turns out truncated or corrupt half-way, the intervals recorded before the error are
kept in FILE, and owl exits with status 1 saying so (with --allow-truncated, a capture that merely
ends early, cut inside a record or at a pcap record whose length field is damaged, is accepted
with a warning).

COLATE records no intervals: with --store FILE, each counter epoch is appended to an SQLite
epoch store as soon as the point's vector is dumped (durable once written; a crash loses at
most the epoch being written), under --point NAME; query it later with `owl query`.

Examples:
  owl record --method lda --role sender   S.pcap --interval 1s -o S.owl
  owl record --method lda --role receiver R.pcap --interval 1s -o R.owl
  owl estimate S.owl R.owl
  tcpdump -i eth0 -w - | owl record --method lda --role sender - --interval 1s -o S.owl
  owl record --method lda --role receiver any.pcapng --identity-bytes 80 -o R.owl
  owl record --method colate --store S.db --point s S.pcap";

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RoleArg {
    Sender,
    Receiver,
}

#[derive(Args, Clone, Debug)]
#[command(after_help = AFTER_HELP, after_long_help = format!("{AFTER_HELP}\n\n{}", methods::crosses_help()))]
pub struct RecordArgs {
    /// Capture of this observation point (pcap or pcapng; a FIFO, or - for standard input).
    pub capture: PathBuf,
    /// Synopsis file to write.
    #[arg(short, long, value_name = "FILE", required_unless_present = "store")]
    pub output: Option<PathBuf>,
    /// COLATE epoch store to append to (SQLite; created if missing). Needs --method colate.
    #[arg(long, value_name = "FILE", conflicts_with = "output")]
    pub store: Option<PathBuf>,
    /// Name of this observation point in the store (default: the capture's file name).
    #[arg(long, value_name = "NAME", requires = "store")]
    pub point: Option<String>,
    /// Method whose synopsis to record.
    #[arg(long, long_help = methods::help(false))]
    pub method: String,
    /// Which point this capture was taken at.
    #[arg(long, value_enum, required_unless_present = "store")]
    pub role: Option<RoleArg>,
    #[command(flatten)]
    pub agreed: Agreed,
    /// Timestamp disorder tolerated within the capture before an interval closes.
    #[arg(long, default_value = "10ms", value_parser = parse_duration_u64, value_name = "T")]
    pub disorder: u64,
    /// Accept a capture that ends early, cut inside a record or at a pcap record whose length
    /// field is damaged (measure what is complete).
    #[arg(long)]
    pub allow_truncated: bool,
    /// Measure only pcapng interface N (numbered from 0 in file order).
    #[arg(long, value_parser = crate::numbers::u32_arg, value_name = "N")]
    pub interface: Option<u32>,
}

/// The output file, written block by block.
///
/// The file is created, and its header written, with the first block: a capture that cannot be
/// read leaves no file behind.
struct Out {
    path: PathBuf,
    header: Vec<u8>,
    w: Option<std::io::BufWriter<std::fs::File>>,
    blocks: u64,
    bytes: u64,
    payload: u64,
    /// Of `payload`, what would cross the network (`None` once a block's depends on the
    /// exchange with the other point).
    shipped: Option<u64>,
    /// Bytes of cut data: S's delimiters, or the packets R held around each boundary (local
    /// state, never shipped).
    cut_bytes: u64,
    /// Packets R held around the boundaries.
    held: u64,
    role: Role,
    cut: Cut,
    intervals: Intervals,
}

impl Out {
    fn write(&mut self, b: &[u8]) -> Result<()> {
        let path = &self.path;
        let w = match self.w.as_mut() {
            Some(w) => w,
            None => {
                let f = std::fs::File::create(path)
                    .with_context(|| format!("{}: cannot create", path.display()))?;
                let mut w = std::io::BufWriter::new(f);
                w.write_all(&self.header)
                    .with_context(|| format!("{}: cannot write", path.display()))?;
                self.bytes += self.header.len() as u64;
                self.w.insert(w)
            }
        };
        w.write_all(b)
            .and_then(|_| w.flush())
            .with_context(|| format!("{}: cannot write", path.display()))?;
        self.bytes += b.len() as u64;
        Ok(())
    }

    fn intervals(&mut self, closed: &mut Vec<ClosedInterval>) -> Result<()> {
        for c in closed.drain(..) {
            let s = &c.synopses[0];
            let mut p = Vec::with_capacity(s.encoded_len());
            // R's core is merged with what it held at the cuts when estimated: its file keeps
            // it in a form it can be merged from (a lossy payload is kept whole)
            match self.role {
                Role::Sender => s.encode(&mut p),
                Role::Receiver => s.encode_local(&mut p),
            }
            self.payload += p.len() as u64;
            self.shipped = self.shipped.zip(s.shipped_len()).map(|(a, b)| a + b);
            let mut cut = Vec::new();
            encode_point_cut(
                &c.cut,
                window_start(&self.cut, &self.intervals, c.index),
                &mut cut,
            );
            if let PointCut::Receiver { head, .. } = &c.cut {
                self.held += head.records.len() as u64;
            }
            self.cut_bytes += cut.len() as u64;
            self.write(&SynopsisFile::encode_stream_block(
                c.index, c.packets, &p, &cut,
            ))?;
            self.blocks += 1;
        }
        Ok(())
    }
}

pub fn run(a: RecordArgs) -> Result<()> {
    if let Some(store) = &a.store {
        return run_store(&a, store);
    }
    let output = a
        .output
        .clone()
        .ok_or_else(|| anyhow!("-o FILE is needed"))?;
    let role = a.role.ok_or_else(|| anyhow!("--role is needed"))?;
    let overrides = a.agreed.overrides()?;
    if let Some(m) = overrides.methods().into_iter().find(|m| *m != a.method) {
        return Err(anyhow!(
            "--method-config sets {m}, but the method recorded is {}",
            a.method
        ));
    }
    let method: Arc<dyn Method> = Arc::from(methods::build_with_horizon(
        &a.method,
        &a.agreed.options(),
        &overrides,
        a.agreed.horizon,
    )?);
    let info = methods::info(&a.method)?;
    let iv = a.agreed.intervals()?;
    let cut = a.agreed.cut(iv)?;
    let role = match role {
        RoleArg::Sender => Role::Sender,
        RoleArg::Receiver => Role::Receiver,
    };
    let header = SynopsisFile {
        method: method.name().to_string(),
        role,
        intervals: iv,
        identity_seed: a.agreed.identity_seed,
        identity_bytes: a.agreed.identity_bytes,
        config: method
            .config()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        cut: cut
            .pairs()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        points: Vec::new(),
    };
    let mut out = Out {
        path: output.clone(),
        header: header.encode_stream_header(),
        w: None,
        blocks: 0,
        bytes: 0,
        payload: 0,
        shipped: Some(0),
        cut_bytes: 0,
        held: 0,
        role,
        cut,
        intervals: iv,
    };
    let mut point = PointStream::new(role, iv, a.disorder, vec![method]).with_cut(cut);
    let mut closed = Vec::new();
    let read = read_capture(
        &a.capture,
        &a.agreed.read_options(a.interface),
        a.allow_truncated,
        "capture",
        |batch| {
            point.push(batch, &NoTimer);
            point.drain_closed(&mut closed);
            out.intervals(&mut closed)
        },
    );
    // What was recorded is kept whatever happened to the capture.
    point.finish(&mut closed);
    out.intervals(&mut closed)?;
    let read = match read {
        Err(e) if out.blocks == 0 => return Err(e),
        r => r,
    };
    out.write(&SynopsisFile::encode_stream_end(out.blocks))?;
    if let Some(w) = &out.w {
        w.get_ref()
            .sync_all()
            .with_context(|| format!("{}: cannot write", output.display()))?;
    }
    let c = point.counters();
    match read {
        Ok(r) => {
            if let Some(t) = &r.truncated {
                eprintln!(
                    "owl: warning: {}: {t}; recorded the {} complete packets before it",
                    a.capture.display(),
                    r.stats.ip_packets
                );
            }
            identity_warning(&a, &r.stats);
            for (n, what) in [
                (c.before_origin, "before --origin-ns"),
                (c.out_of_order, "out of timestamp order beyond --disorder"),
            ] {
                if n > 0 {
                    eprintln!("owl: warning: {n} packets {what}: in no interval");
                }
            }
            say!(
                "wrote {}: {} synopsis of {} interval(s), {} IP packets, {} ({} of synopses)",
                output.display(),
                header.method,
                out.blocks,
                r.stats.ip_packets,
                format_bytes(out.bytes),
                format_bytes(out.payload)
            )?;
            match out.shipped {
                Some(b) if b == out.payload => {
                    say!("  crosses the network: the synopses themselves")?
                }
                Some(b) => say!(
                    "  crosses the network: {} ({}: {})",
                    format_bytes(b),
                    header.method,
                    info.crosses
                )?,
                None => say!(
                    "  crosses the network: decided by the exchange with the other point, which \
                     `owl estimate` reports as bytes ({}: {})",
                    header.method,
                    info.crosses
                )?,
            }
            match (&cut, role) {
                (Cut::Delimiter(_), Role::Sender) => say!(
                    "  cuts: the delimiters of each boundary, {} in the file (they cross the network with each interval)",
                    format_bytes(out.cut_bytes)
                )?,
                (Cut::Delimiter(_), Role::Receiver) => say!(
                    "  cuts: {} packets held around the boundaries until S's delimiters place them, {} in the file (local state, never shipped)",
                    out.held,
                    format_bytes(out.cut_bytes)
                )?,
                (Cut::Clock, _) if !iv.is_whole() => say!(
                    "  cuts: by this point's clock (--cut clock): packets in flight at a boundary are in S's interval and R's next"
                )?,
                _ => {}
            }
            Ok(())
        }
        // (an error before any interval was recorded has returned above, with no file)
        Err(e) => Err(e.context(format!(
            "{} holds the {} interval(s) recorded before the error",
            output.display(),
            out.blocks
        ))),
    }
}

/// `--store`: COLATE's epochs into an epoch store, no intervals.
fn run_store(a: &RecordArgs, path: &std::path::Path) -> Result<()> {
    if a.method != "colate" {
        return Err(anyhow!(
            "--store keeps COLATE counter epochs: use --method colate (got {})",
            a.method
        ));
    }
    if a.agreed.interval != 0 || a.agreed.origin_ns.is_some() {
        return Err(anyhow!(
            "COLATE coordinates no intervals: --interval and --origin-ns do not apply to --store"
        ));
    }
    let overrides = a.agreed.overrides()?;
    if let Some(m) = overrides.methods().into_iter().find(|m| *m != "colate") {
        return Err(anyhow!(
            "--method-config sets {m}, but the method recorded is colate"
        ));
    }
    let cfg = crate::colate::config(&a.agreed.options(), &overrides)?;
    let name = match &a.point {
        Some(p) => p.clone(),
        None => a
            .capture
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .filter(|s| !s.is_empty() && s != "-")
            .unwrap_or_else(|| "point".into()),
    };
    let store = crate::store::Store::open_or_create(path)?;
    let pairs: Vec<(String, String)> = cfg
        .pairs()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let point = store.point(&name, &pairs, a.agreed.identity_seed)?;
    let (rec, read) = crate::colate::record_to_store(
        &a.capture,
        &store,
        &point,
        cfg,
        &a.agreed.read_options(a.interface),
        a.allow_truncated,
    )?;
    let stats = store.stats(&point)?;
    let summary = format!(
        "{}#{}: {} epoch(s) appended, {} packets, {} of epochs ({:.4} bits per packet); the point now holds {} epochs of {} packets ({:.4} bits per packet)",
        path.display(),
        name,
        rec.epochs,
        rec.packets,
        format_bytes(rec.bytes),
        rec.bytes as f64 * 8.0 / rec.packets.max(1) as f64,
        stats.epochs,
        stats.packets,
        stats.bits_per_packet()
    );
    if rec.early > 0 {
        eprintln!(
            "owl: warning: {} packets older than their epoch's first (capture disorder) were recorded at the epoch's base",
            rec.early
        );
    }
    if rec.overflows > 0 {
        eprintln!(
            "owl: warning: {} counter(s) exceeded b bits (kept exactly, in the epoch's escape list)",
            rec.overflows
        );
    }
    if rec.overflow_dumps > 0 {
        eprintln!(
            "owl: warning: {} epoch(s) dumped before T: a counter would overflow with the spill full (more storage, not less accuracy; a coarser unit_ns or a larger spill avoids it)",
            rec.overflow_dumps
        );
    }
    match read {
        Ok(r) => {
            if let Some(t) = &r.truncated {
                eprintln!("owl: warning: {}: {t}", a.capture.display());
            }
            say!("{summary}")?;
            say!("  {}", rec.memory.describe())?;
            Ok(())
        }
        Err(e) => Err(e.context(format!("{summary}, before the error"))),
    }
}

/// Say when the capture's snaplen cut packets shorter than the identity covers: the other point
/// must then keep exactly the same bytes, or both agree on fewer with --identity-bytes.
fn identity_warning(a: &RecordArgs, st: &InputStats) {
    if st.identity_short == 0 {
        return;
    }
    let keeps = st
        .linktype
        .and_then(|l| identity_bytes(st.snaplen.unwrap_or(0), l));
    let name = a.capture.display();
    let snap = match (st.snaplen, st.linktype) {
        (Some(n), Some(l)) => format!("snaplen {n}, {}", linktype_name(l)),
        _ => "its snaplen".into(),
    };
    match (a.agreed.identity_bytes, keeps) {
        (Some(n), Some(k)) if k < n => eprintln!(
            "owl: warning: {name} keeps {k} IP bytes of a packet ({snap}), fewer than --identity-bytes {n}: {} packets were identified on fewer bytes than a point that keeps {n} will, so they will not match there; record both points with --identity-bytes {k} or less",
            st.identity_short
        ),
        (Some(n), _) => eprintln!(
            "owl: warning: {name}: {} packets were cut by the snaplen ({snap}) below --identity-bytes {n} (longer link headers: VLAN tags, MPLS labels): they will not match at a point that keeps {n} bytes; a smaller --identity-bytes avoids it",
            st.identity_short
        ),
        (None, k) => eprintln!(
            "owl: note: {name}: {} packets were cut by the snaplen ({snap}) and are identified on the bytes kept: the other point must keep exactly the same bytes (same snaplen and link header){}",
            st.identity_short,
            match k {
                Some(k) => format!(", or record both points with --identity-bytes {k}"),
                None => String::new(),
            }
        ),
    }
}
