//! OPA — the Order Preserving Aggregator (Wang, Lian, Dong, Liu, Li, *Every Packet Counts*):
//! the delay of every delivered packet and the position of every lost one.
//!
//! (Work in progress: the core algorithm.)

pub mod cah;
pub mod recovery;
pub mod timestamps;

#[cfg(test)]
mod tests;
