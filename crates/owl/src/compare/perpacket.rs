//! `owl compare --per-packet FILE`: every sender packet of each per-packet method (OPA, RLI),
//! and a summary of their delays.
//!
//! Each method whose [`Method::estimate_packets`] answers is asked, in each measurement
//! interval, for every packet it knows: OPA gives every sender packet (its decoded sending time,
//! and its arrival time, or none for a packet it located as lost or could not place), RLI every
//! received packet with its interpolated delay. The CSV has the header
//! `method,sender_ns,receiver_ns,delay_ns`, one row per packet in sending order within each
//! interval, `receiver_ns` and `delay_ns` empty for a packet without an arrival. (The truth's
//! own per-packet delays are `--delays FILE`.)
//!
//! The summary, per method: the delays' mean, std and p50/p90/p99/p99.9 (exact up to
//! `--exact-quantiles` delays, then from the truth's log-linear histogram), the packets placed
//! with a delay, located lost, and not placed, the fraction of the truth's received packets
//! given a delay, bytes per sender packet, and the largest delays as anomalies (OPA §VII-C).

use std::io::Write;
use std::sync::Arc;

use anyhow::{Result, bail};
use owl_core::exact::Truth;
use owl_core::method::{Method, PointSynopsis};
use owl_core::pipeline::truth::DelayAcc;
use owl_core::registry;
use owl_core::stats::DelaySummary;

use super::{Csv, CsvOut};
use crate::report::{Anomaly, PerPacketReport};

/// Largest delays listed per method.
pub const ANOMALIES: usize = 10;

/// One per-packet method's books.
struct Acc {
    name: String,
    delays: DelayAcc,
    /// Packets the method reported, placed with a delay, located lost, not placed.
    rows: u64,
    delivered: u64,
    lost: u64,
    unplaced: u64,
    /// The largest delays, one per sending time: `(delay, sender_ns, receiver_ns)`, largest
    /// first.
    largest: Vec<(i64, u64, u64)>,
    error: Option<String>,
}

/// The per-packet methods' packets of each closed interval.
pub struct PerPacket<'w> {
    csv: Option<Csv<'w>>,
    /// Indexed like the methods; `None` for methods without per-packet estimates.
    accs: Vec<Option<Acc>>,
    /// The first write error (the pipeline's hook cannot return one).
    failed: Option<anyhow::Error>,
    /// Each method's delay summary and whether its quantiles are exact, once finished.
    summaries: Vec<(String, Option<DelaySummary>, bool)>,
}

/// Whether `m` gives per-packet estimates.
pub fn is_per_packet(m: &dyn Method) -> bool {
    registry::find(m.name()).is_some_and(|i| i.per_packet)
}

/// The per-packet methods' names, for help texts.
pub fn names() -> String {
    registry::METHODS
        .iter()
        .filter(|m| m.per_packet)
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl<'w> PerPacket<'w> {
    /// Books for the per-packet methods among `methods`, writing the CSV to `csv` if given;
    /// `None` when there is none and no CSV is asked for.
    pub fn new(
        csv: Option<CsvOut<'w>>,
        methods: &[Arc<dyn Method>],
        exact_quantiles: usize,
    ) -> Result<Option<PerPacket<'w>>> {
        let accs: Vec<Option<Acc>> = methods
            .iter()
            .map(|m| {
                is_per_packet(&**m).then(|| Acc {
                    name: m.name().to_string(),
                    delays: DelayAcc::new(exact_quantiles),
                    rows: 0,
                    delivered: 0,
                    lost: 0,
                    unplaced: 0,
                    largest: Vec::new(),
                    error: None,
                })
            })
            .collect();
        let any = accs.iter().any(Option::is_some);
        let Some(csv) = csv else {
            return Ok(any.then_some(PerPacket {
                csv: None,
                accs,
                failed: None,
                summaries: Vec::new(),
            }));
        };
        if !any {
            bail!(
                "--per-packet needs a per-packet method among --methods ({})",
                names()
            );
        }
        let mut csv = csv.open()?;
        csv.line(format_args!("method,sender_ns,receiver_ns,delay_ns"))?;
        Ok(Some(PerPacket {
            csv: Some(csv),
            accs,
            failed: None,
            summaries: Vec::new(),
        }))
    }

    /// Ask every per-packet method for the packets of one closed interval pair; the time
    /// each spends answering is added to `spent` (by method index).
    pub fn add_interval(
        &mut self,
        index: u64,
        methods: &[Arc<dyn Method>],
        sender: &[Box<dyn PointSynopsis>],
        receiver: &[Box<dyn PointSynopsis>],
        spent: &mut [std::time::Duration],
    ) {
        for (k, m) in methods.iter().enumerate() {
            let Some(acc) = self.accs.get_mut(k).and_then(Option::as_mut) else {
                continue;
            };
            let started = std::time::Instant::now();
            let answer = m.estimate_packets(&*sender[k], &*receiver[k]);
            spent[k] += started.elapsed();
            let packets = match answer {
                None => continue,
                Some(Err(e)) => {
                    acc.error
                        .get_or_insert_with(|| format!("interval {index}: {e}"));
                    continue;
                }
                Some(Ok(p)) => p,
            };
            for p in &packets {
                acc.rows += 1;
                match (p.receiver_ns, p.delay_ns()) {
                    (Some(r), Some(d)) => {
                        acc.delivered += 1;
                        acc.delays.push(d);
                        // one line per sending time: packets that arrived together (the
                        // simulator's FIFO gives a backlog one arrival time) get identical
                        // lines from a method that estimates sending times (RLI: the arrival
                        // less the interpolated delay), and copies of a duplicated packet
                        // share theirs; each shows once, its largest
                        if let Some(i) = acc.largest.iter().position(|x| x.1 == p.sender_ns) {
                            if d > acc.largest[i].0 {
                                acc.largest[i] = (d, p.sender_ns, r);
                                acc.largest.sort_by_key(|x| std::cmp::Reverse(x.0));
                            }
                        } else if acc.largest.len() < ANOMALIES || d > acc.largest[ANOMALIES - 1].0
                        {
                            let at = acc.largest.partition_point(|x| x.0 >= d);
                            acc.largest.insert(at, (d, p.sender_ns, r));
                            acc.largest.truncate(ANOMALIES);
                        }
                    }
                    _ if p.placed => acc.lost += 1,
                    _ => acc.unplaced += 1,
                }
            }
            if let Some(csv) = self.csv.as_mut()
                && self.failed.is_none()
            {
                let w = &mut csv.w;
                let r = (|| -> std::io::Result<()> {
                    for p in &packets {
                        match (p.receiver_ns, p.delay_ns()) {
                            (Some(r), Some(d)) => {
                                writeln!(w, "{},{},{r},{d}", acc.name, p.sender_ns)?
                            }
                            _ => writeln!(w, "{},{},,", acc.name, p.sender_ns)?,
                        }
                    }
                    Ok(())
                })();
                if let Err(e) = r {
                    self.failed =
                        Some(anyhow::Error::new(e).context(format!("{}: cannot write", csv.name)));
                }
            }
        }
    }

    /// Flush the CSV (the first error met while writing it) and summarise every method.
    pub fn finish(&mut self) -> Result<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if let Some(csv) = self.csv.as_mut() {
            csv.flush()?;
        }
        self.summaries = self
            .accs
            .iter_mut()
            .flatten()
            .map(|a| {
                let (s, exact) = a.delays.summary();
                (a.name.clone(), s, exact)
            })
            .collect();
        Ok(())
    }

    fn acc(&self, name: &str) -> Option<&Acc> {
        self.accs.iter().flatten().find(|a| a.name == name)
    }

    /// Method `name`'s packets over the run, once finished (`bytes`: its synopsis bytes).
    pub fn report(&self, name: &str, bytes: u64, truth: &Truth) -> Option<PerPacketReport> {
        let acc = self.acc(name)?;
        let (_, s, exact) = self.summaries.iter().find(|x| x.0 == name)?;
        Some(PerPacketReport {
            packets: acc.rows,
            delivered: acc.delivered,
            lost: acc.lost,
            unplaced: acc.unplaced,
            recovered_fraction: acc.delivered as f64 / truth.received.max(1) as f64,
            bytes_per_packet: bytes as f64 / truth.sent.max(1) as f64,
            delay_fields: (*s).into(),
            quantiles_exact: *exact,
            anomalies: acc
                .largest
                .iter()
                .map(|&(delay_ns, sender_ns, receiver_ns)| Anomaly {
                    sender_ns,
                    receiver_ns,
                    delay_ns,
                })
                .collect(),
            error: acc.error.clone(),
        })
    }
}
