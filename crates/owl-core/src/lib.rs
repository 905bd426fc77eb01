//! # owl-core
//!
//! The pure heart of owl, a toolkit for passive one-way latency measurement between two
//! observation points: a sender point S (where packets pass first) and a receiver point R.
//!
//! This crate holds everything that is a function of packet records and nothing else: the
//! [`PacketRecord`] every capture is reduced to, the seeded
//! [`HashFamily`](hash::HashFamily) every synopsis derives its hashes from, clock-delimited
//! [`Intervals`](interval::Intervals), exact statistics, the exact per-packet matcher that is
//! every method's ground truth ([`exact`]), and the method interface of [`method`].
//!
//! It never reads a clock, a file or a socket: every time is a capture timestamp carried by a
//! record, so every result is a pure, reproducible function of its inputs and its seeds.

pub mod countmin;
pub mod exact;
pub mod finecomb;
pub mod hash;
pub mod interval;
pub mod lda;
pub mod lds;
pub mod method;
pub mod mpe;
pub mod pipeline;
pub mod probe;
pub mod rda;
pub mod record;
pub mod registry;
pub mod rli;
pub mod sds;
pub mod stats;
pub mod units;
pub mod wire;

pub use record::{FlowKey, PacketRecord};
