//! # owl-core
//!
//! The pure heart of owl, a toolkit for passive one-way latency measurement between two
//! observation points: a sender point S (where packets pass first) and a receiver point R.
//!
//! This crate holds everything that is a function of packet records and nothing else: the
//! [`PacketRecord`] every capture is reduced to, the seeded
//! [`HashFamily`](hash::HashFamily) every synopsis derives its hashes from, clock-delimited
//! [`Intervals`](interval::Intervals), exact statistics, a mergeable relative-error histogram of
//! delays ([`delay_histogram`]), the exact per-packet matcher that is
//! every method's ground truth ([`exact`]), and the method interface of [`method`].
//!
//! # The papers
//!
//! Module docs cite them by short name and section; each resolves anywhere by its title:
//!
//! - **LDA** — R. R. Kompella, K. Levchenko, A. C. Snoeren, G. Varghese, *Router Support for
//!   Fine-Grained Latency Measurements*, IEEE/ACM Transactions on Networking, 2012 (the journal
//!   version of *Every Microsecond Counts: Tracking Fine-Grain Latencies with a Lossy
//!   Difference Aggregator*, ACM SIGCOMM 2009).
//!   <https://dblp.org/search?q=Router+Support+for+Fine-Grained+Latency+Measurements>
//! - **RDA** — Y. Fu, P. Barlet-Ros, D. Li, *Every Timestamp Counts: Accurate Tracking of
//!   Network Latencies using Reconcilable Difference Aggregator*.
//!   <https://dblp.org/search?q=Every+Timestamp+Counts+Reconcilable+Difference+Aggregator>
//! - **LDS** — J. Sanjuàs-Cuxart, N. Duffield, P. Barlet-Ros, R. R. Kompella, *Sketching the
//!   Delay: Tracking Temporally Uncorrelated Flow-Level Latencies*, ACM IMC 2011.
//!   <https://dblp.org/search?q=Sketching+the+Delay+Tracking+Temporally+Uncorrelated+Flow-Level+Latencies>
//! - **OPA** — J. Wang, S. Lian, W. Dong, Y. Liu, X.-Y. Li, *Every Packet Counts: Fine-Grained
//!   Delay and Loss Measurement with Reordering*.
//!   <https://dblp.org/search?q=Every+Packet+Counts+Fine-Grained+Delay+and+Loss+Measurement+with+Reordering>
//! - **COLATE** — M. Shahzad, A. X. Liu, *Noise Can Help: Accurate and Efficient Per-flow
//!   Latency Measurement without Packet Probing and Time Stamping*, ACM SIGMETRICS 2014,
//!   doi:10.1145/2591971.2591988.
//!
//! The clock fit of [`skew`] rests on Paxson (SIGMETRICS 1998), Moon, Skelly & Towsley (INFOCOM
//! 1999) and Zhang, Liu & Xia (INFOCOM 2002), listed with their titles in its module doc.
//!
//! It never reads a clock, a file or a socket: every time is a capture timestamp carried by a
//! record, so every result is a pure, reproducible function of its inputs and its seeds.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod cut;
pub mod delay_histogram;
pub mod flow_class;
pub mod hash;
pub mod interval;
pub mod method;
mod methods;
pub mod pipeline;
pub mod record;
pub mod registry;
pub mod skew;
pub mod stats;
#[cfg(test)]
pub(crate) mod test_traffic;
pub mod units;
pub mod wire;

pub use methods::*;
pub use record::{FlowKey, PacketRecord};
