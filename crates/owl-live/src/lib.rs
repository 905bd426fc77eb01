//! owl's live system: two agents, one at each observation point, exchange their per-interval
//! synopses over an authenticated connection as the intervals close (RDA §VIII: capture,
//! clock-delimited pipelined intervals, the exchange, a result every interval).
//!
//! | concern | module |
//! |---|---|
//! | the pre-shared key (`owl keygen`) and derived keys | [`key`] |
//! | frames: length-prefixed, versioned, capped, HMAC-SHA256 per frame, sequence numbers | [`frame`] |
//! | the handshake: a session key from the pre-shared key and two nonces; refusals | [`link`] |
//! | admission: handshakes at once, under a cap and a deadline; the busiest source shed first | [`admission`] |
//! | the configuration both agents must agree on, and the field that differs | [`config`] |
//! | the agents' messages (synopses, RDA's exchange, results, flow control) | [`protocol`] |
//! | the receiver's join of both points' intervals: estimate, lead-in/out, missing (`owl_core::pipeline::join`, re-exported) | [`join`] |
//! | a point's capture cut into intervals, handed to the exchange (bounded; waits or drops) | [`capture`] |
//! | live capture on Linux: `AF_PACKET`, a `TPACKET_V3` ring, the kernel's drop counts | [`afpacket`] |
//! | `--filter`: the measured path's packets, selected on the dissected record | [`filter`] |
//! | the sender and receiver agents | [`agent`] |
//! | a point: one capture, many paths (each a sender or receiver agent), one listening port | [`point`] |
//! | the receiver's interval and summary lines (JSON), which the collector reads | [`lines`] |
//! | the collector and the agents' delivery to it (queued, resent until acknowledged) | [`collector`] |
//! | the collector's SQLite database: schema, one transaction per interval, the series | [`store`] |
//! | the collector's Prometheus/OpenMetrics endpoint: latest interval per pair as gauges, failures as counters | [`metrics`] |
//!
//! # Why HMAC-SHA256 with a pre-shared key, not TLS
//!
//! What the points exchange — synopses, timestamps, results — must be authentic and unaltered
//! (a forged synopsis is a wrong latency), but it is not secret the way a payload is: it holds
//! hashes of packets and their timestamps. HMAC-SHA256 per frame under a per-connection key
//! gives origin, integrity and replay protection with one shared secret that `owl keygen`
//! makes and the operator copies to the agents and the collector — no certificate authority,
//! no pinning, no expiry to manage on measurement boxes, and two small pure-Rust crates
//! (`hmac`, `sha2`) instead of a TLS stack. What it does not give: confidentiality (anyone on
//! the path can read the synopses) and forward secrecy (whoever steals the key can forge
//! frames and read old captures of the exchange). A deployment that needs either can run the
//! connections inside a VPN or an SSH tunnel; the frames stay authenticated end to end.
//!
//! This crate reads sockets and clocks; the measurement itself stays in `owl_core`
//! (synopses, estimators) and `owl_trace` (captures).

#![deny(unsafe_op_in_unsafe_fn)]

pub mod admission;
pub mod afpacket;
pub mod agent;
pub mod capture;
pub mod clock;
pub mod collector;
pub mod config;
/// `--filter` is the traces layer's ([`owl_trace::filter`]): `owl compare` selects with it too.
pub use owl_trace::filter;
pub mod frame;
pub use owl_core::pipeline::join;
pub mod key;
pub mod lines;
pub mod link;
pub mod metrics;
#[cfg(feature = "pcap")]
pub mod pcap;
pub mod point;
pub mod protocol;
pub mod store;
