//! COLATE's orchestration for the command line: recording a capture's epochs into a store
//! (`owl record --method colate --store`), answering a flow query from two stores
//! (`owl query`), and the parameter plan (`owl colate plan`). The commands stay thin.

use std::net::IpAddr;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use owl_core::FlowKey;
use owl_core::colate::estimate::{NoiseTable, PointNoise, query_flow_with};
use owl_core::colate::{
    Config, FlowEpoch, FlowLatency, Layout, Mapping, Query, Recorder, query, query_flow,
};
use owl_core::method::config_value;

use crate::input::read_capture;
use crate::methods::{Options, Overrides};
use crate::store::{Point, Store};

/// COLATE's configuration from `--memory` / `--method-config colate:…` / `--seed`, as
/// `owl compare` builds it.
pub fn config(opts: &Options, over: &Overrides) -> Result<Config> {
    let pairs = over.pairs_for("colate");
    if !pairs.is_empty() {
        if opts.memory.is_some() {
            bail!("give either --memory or --method-config for colate, not both");
        }
        return Ok(Config::from_pairs(&pairs, opts.seed)?);
    }
    Ok(match opts.memory {
        Some(m) => Config::for_level(owl_core::colate::Level::Medium, m, opts.seed)?,
        None => Config::paper_default(opts.seed),
    })
}

/// What a recording wrote.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    pub epochs: u64,
    pub packets: u64,
    pub bytes: u64,
    pub overflows: u64,
    pub early: u64,
    /// Dumps before `T` because a counter would overflow with the spill full.
    pub overflow_dumps: u64,
    /// The counter vectors in RAM.
    pub memory: owl_core::colate::Memory,
}

/// Record `capture`'s packets as `point`'s epochs into `store`, each appended (durably) as
/// soon as it is dumped; the open vector is dumped at the end, also when the capture breaks
/// off (what was recorded is kept; the error is returned after).
pub fn record_to_store(
    capture: &Path,
    store: &Store,
    point: &Point,
    cfg: Config,
    options: &owl_trace::records::ReadOptions,
    allow_truncated: bool,
) -> Result<(Recorded, Result<crate::input::Read>)> {
    let mut rec = Recorder::new(Layout::new(cfg));
    rec.resume_at(store.next_seq(point)?);
    let mut out = Recorded::default();
    let flush = |rec: &mut Recorder, out: &mut Recorded| -> Result<()> {
        for e in rec.take_sealed() {
            out.bytes += store.append_sealed(point, &e)?;
            out.epochs += 1;
            out.packets += e.head.packets;
            out.overflows += e.overflows as u64;
            out.early += e.head.early;
        }
        Ok(())
    };
    // each epoch goes to the store as it is dumped, not at the batch's end: a batch of sparse
    // packets can dump many, and RAM then holds one epoch, not a batch of them
    let read = read_capture(capture, options, allow_truncated, "capture", |batch| {
        for r in batch {
            rec.record(r);
            if !rec.sealed().is_empty() {
                flush(&mut rec, &mut out)?;
            }
        }
        Ok(())
    });
    out.memory = rec.memory();
    rec.dump_open();
    flush(&mut rec, &mut out)?;
    out.overflow_dumps = rec.overflow_dumps;
    Ok((out, read))
}

/// `FILE` or `FILE#POINT`.
pub fn store_arg(s: &str) -> (&str, Option<&str>) {
    match s.rsplit_once('#') {
        Some((f, p)) if !p.is_empty() => (f, Some(p)),
        _ => (s, None),
    }
}

/// A flow as `PROTO SRC SPORT DST DPORT` (PROTO: tcp, udp, icmp, icmp6 or a number).
pub fn parse_flow(s: &str) -> Result<FlowKey> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [proto, src, sport, dst, dport] = parts.as_slice() else {
        bail!(
            "--flow '{s}': expected 'PROTO SRC SPORT DST DPORT', e.g. 'tcp 10.0.0.1 443 10.0.0.2 50000'"
        );
    };
    let proto = match proto.to_ascii_lowercase().as_str() {
        "tcp" => 6,
        "udp" => 17,
        "icmp" => 1,
        "icmp6" => 58,
        p => p
            .parse::<u8>()
            .map_err(|_| anyhow!("--flow: protocol '{p}' is not tcp, udp, icmp, icmp6 or 0-255"))?,
    };
    let ip = |x: &str| -> Result<IpAddr> {
        x.trim_matches(['[', ']'])
            .parse()
            .map_err(|_| anyhow!("--flow: '{x}' is not an IP address"))
    };
    let port = |x: &str| -> Result<u16> {
        x.parse()
            .map_err(|_| anyhow!("--flow: port '{x}' is not 0-65535"))
    };
    Ok(FlowKey {
        proto,
        src: ip(src)?,
        sport: port(sport)?,
        dst: ip(dst)?,
        dport: port(dport)?,
    })
}

/// A time: integer nanoseconds since the Unix epoch, or seconds with an `s` suffix
/// (`1767225600.25s`).
pub fn parse_time(s: &str) -> Result<u64> {
    let t = s.trim();
    if let Some(secs) = t.strip_suffix('s') {
        let v: f64 = secs
            .parse()
            .map_err(|_| anyhow!("time '{s}': expected NS or SECONDSs"))?;
        if !(0.0..9.2e9).contains(&v) {
            bail!("time '{s}' is not between 1970 and 2262");
        }
        return Ok((v * 1e9).round() as u64);
    }
    t.parse().map_err(|_| {
        anyhow!("time '{s}': expected nanoseconds since the epoch, or seconds with an s suffix")
    })
}

/// The reliability a point's plan states: `(α, β, t_min)` from its configuration fields.
pub fn guarantee(p: &Point) -> Option<(f64, f64, f64)> {
    let get = |k: &str| -> Option<f64> {
        p.config
            .iter()
            .find(|(a, _)| a == k)
            .and_then(|(_, v)| config_value::<f64>("colate", k, v).ok())
    };
    Some((get("alpha")?, get("beta")?, get("t_min")?))
}

/// Answer a flow query from two stores: the flow's cells of each epoch in range, read in
/// place; with `verify`, or when the query asks for an interval (it tabulates every cell),
/// every epoch in range read whole and its checksum checked first. The
/// two stores are read at once, the sender's on a thread of its own (their reads are
/// independent, and a day of epochs is a few hundred page reads at each).
pub fn query_stores(
    sender: (&mut Store, &Point),
    receiver: (&mut Store, &Point),
    q: &Query,
    verify: bool,
) -> Result<FlowLatency> {
    if sender.1.identity_seed != receiver.1.identity_seed {
        bail!(
            "the points were recorded with identity seeds {} and {}: a packet's counter is chosen by its identity, so both must agree",
            sender.1.identity_seed,
            receiver.1.identity_seed
        );
    }
    let r_to = q.to_ns.saturating_add(q.horizon_ns);
    // (the sender's store moves to its thread: a connection is Send, not Sync)
    let ((ss, sp), (rs, rp)) = (sender, receiver);
    let (from, s_to, flow) = (q.from_ns, q.to_ns, q.flow);
    if q.confidence > 0.0 {
        return with_interval((ss, sp), (rs, rp), q, (from, s_to, r_to));
    }
    if verify {
        let (s, r) = both(
            move || ss.epochs(sp, from, s_to),
            || rs.epochs(rp, from, r_to),
        );
        return query(&s?, &r?, q).context("querying the epochs");
    }
    let (s, r) = both(
        move || ss.flow_epochs(sp, from, s_to, &flow),
        || rs.flow_epochs(rp, from, r_to, &flow),
    );
    query_flow(&s?, &r?, q).context("querying the epochs")
}

/// One point's side of a query with an interval: the flow's cells of each epoch, and the
/// point's part of each vector's noise table, the epochs read whole and checked one at a time.
struct Side {
    cells: Vec<FlowEpoch>,
    parts: Vec<Option<PointNoise>>,
}

/// Read a point's epochs in `[from, to]` one at a time for `q` (the point's part of the noise
/// table relative to its first epoch; the sender's and receiver's are joined after).
fn side(
    store: &Store,
    point: &Point,
    (from, to): (u64, u64),
    q: &Query,
    sender: bool,
) -> Result<Side> {
    let mut out = Side {
        cells: Vec::new(),
        parts: Vec::new(),
    };
    let mut map: Option<(Mapping, u64)> = None;
    let mut r_ref = None;
    // vectors whose epochs changed n: no part, for good (a part of the later epochs alone
    // would be the wrong noise)
    let mut broken: Vec<bool> = Vec::new();
    let paper = q.estimator == owl_core::colate::Estimator::Paper;
    store.each_epoch(point, from, to, |e| {
        let (mp, fh) = map.get_or_insert_with(|| {
            let mp = Mapping::new(e.seed, e.m, &[1.0], e.placement);
            let fh = mp.flow_hash(&q.flow);
            (mp, fh)
        });
        if (mp.seed, mp.m, mp.placement) != (e.seed, e.m, e.placement) {
            bail!(
                "{}: point {} holds epochs of two mappings (seed, m or flow hash differ: query the ranges apart)",
                store.path().display(),
                point.name
            );
        }
        out.cells.push(e.flow(mp, *fh));
        let r0 = *r_ref.get_or_insert(e.first_ns);
        let v = e.vector as usize;
        if out.parts.len() <= v {
            out.parts.resize(v + 1, None);
            broken.resize(v + 1, false);
        }
        if broken[v] {
            return Ok(());
        }
        let part = out.parts[v]
            .get_or_insert_with(|| PointNoise::new(e.n as usize, e.m as usize, paper, sender, r0));
        // a point whose n changed has no table; the query says why
        if part.add(&e).is_err() {
            out.parts[v] = None;
            broken[v] = true;
        }
        Ok(())
    })?;
    Ok(out)
}

/// [`query_stores`] with the mean's interval: both points' epochs streamed at once.
fn with_interval(
    (ss, sp): (&mut Store, &Point),
    (rs, rp): (&mut Store, &Point),
    q: &Query,
    (from, s_to, r_to): (u64, u64, u64),
) -> Result<FlowLatency> {
    let (s, r) = both(
        move || side(ss, sp, (from, s_to), q, true),
        || side(rs, rp, (from, r_to), q, false),
    );
    let (mut s, mut r) = (s?, r?);
    let built = q.estimator == owl_core::colate::Estimator::Paper;
    let mut tables = |v: usize, paper: bool| -> std::result::Result<_, String> {
        if paper != built {
            return Err("the mean of a flow whose counters lost packets is raw, and the epochs were tabulated for Theorem 2's: query with --mean raw for its interval".into());
        }
        let take = |p: &mut Vec<Option<PointNoise>>| p.get_mut(v).and_then(Option::take);
        match (take(&mut s.parts), take(&mut r.parts)) {
            (Some(a), Some(b)) => NoiseTable::from_points(a, b).map(std::sync::Arc::new),
            _ => Err("the epochs of this vector do not all have the same n at both points".into()),
        }
    };
    query_flow_with(&s.cells, &r.cells, q, &mut tables).context("querying the epochs")
}

/// `a` on a scoped thread and `b` on this one, at once.
fn both<A: Send, B>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B) -> (A, B) {
    std::thread::scope(|scope| {
        let h = scope.spawn(a);
        let rb = b();
        let ra = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (ra, rb)
    })
}

/// Eq. 12's ratio measured from two stores ([`measure_ratio`]).
#[derive(Clone, Debug, serde::Serialize)]
pub struct RatioMeasure {
    /// 5th percentile and median of the counters' ratios.
    pub p5: f64,
    pub median: f64,
    /// Counters measured, and epoch pairs they came from.
    pub counters: usize,
    pub pairs: usize,
}

/// Epoch pairs [`measure_ratio`] reads at most (each is read whole at both points).
const RATIO_PAIRS: usize = 8;

/// Eq. 12's ratio over the counters of up to [`RATIO_PAIRS`] epoch pairs of two stores: each of
/// the sender's first epochs beside the receiver's epoch that overlaps it most in time
/// ([`plan::counter_ratios`](owl_core::colate::plan::counter_ratios)).
pub fn measure_ratio(sender: &str, receiver: &str) -> Result<RatioMeasure> {
    let open = |arg: &str| -> Result<(Store, Point)> {
        let (path, point) = store_arg(arg);
        let st = Store::open_read(Path::new(path))?;
        let p = st.only_point(point)?;
        Ok((st, p))
    };
    let ((ss, sp), (rs, rp)) = (open(sender)?, open(receiver)?);
    let mut firsts = Vec::new();
    let full = "enough epochs";
    let read = ss.each_epoch(&sp, 0, u64::MAX, |e| {
        firsts.push(e);
        if firsts.len() == RATIO_PAIRS {
            bail!(full);
        }
        Ok(())
    });
    if let Err(e) = read
        && e.to_string() != full
    {
        return Err(e);
    }
    let (mut ratios, mut pairs) = (Vec::new(), 0);
    for s in &firsts {
        let overlap = |r: &owl_core::colate::Epoch| {
            s.last_ns
                .min(r.last_ns)
                .saturating_sub(s.first_ns.max(r.first_ns))
        };
        let Some(r) = rs
            .epochs(&rp, s.first_ns, s.last_ns)?
            .into_iter()
            .filter(|r| r.n == s.n && r.vector == s.vector)
            .max_by_key(overlap)
        else {
            continue;
        };
        let v = owl_core::colate::plan::counter_ratios(s, &r);
        if !v.is_empty() {
            pairs += 1;
            ratios.extend(v);
        }
    }
    if ratios.is_empty() {
        bail!(
            "{sender} and {receiver}: no counter holds the same packets at both points in the first {} epochs (no epochs that overlap in time, different n, or every counter lost packets)",
            firsts.len()
        );
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    Ok(RatioMeasure {
        p5: at(0.05),
        median: at(0.5),
        counters: ratios.len(),
        pairs,
    })
}
