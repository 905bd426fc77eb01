//! # owl-trace
//!
//! owl's trace layer: everything between bytes on a wire and [`owl_core::PacketRecord`]s.
//!
//! - [`capture`]: streaming pcap/pcapng reader and writer;
//! - [`dissect`]: link layer → IP → transport, the flow key;
//! - [`identity`]: the packet identity that is equal at both points although a router sits
//!   between them;
//! - [`records`]: capture → batches of packet records, with counts of what was skipped;
//! - [`sim`]: the two-point simulator (traffic, delay, loss, reordering, duplication, router
//!   rewrites, clock offset) writing a sender and a receiver capture.

#![deny(unsafe_code)]

pub mod capture;
pub mod dissect;
pub mod filter;
pub mod identity;
pub mod lockstep;
pub mod records;
pub mod sim;
