//! OPA — the Order Preserving Aggregator (Wang, Lian, Dong, Liu, Li, *Every Packet Counts:
//! Fine-Grained Delay and Loss Measurement with Reordering*): the delay of every delivered
//! packet and the position of every lost one, from a few bytes per packet.
//!
//! # The method, step by step
//!
//! 1. **Segments and groups** (§II, §IV-B; [`synopsis`]): both points cut their packets into
//!    segments at delimiter packets (and at the measurement intervals), and hash each segment's
//!    packets into `g` groups. Packet `j` of a group (in the point's own order) has the
//!    augmented hash `h_j = Hash(identity ++ j)`.
//! 2. **OPA** (§IV-B, §IV-E; [`cah`]): per group the sender keeps `(B, w)`: the combined
//!    augmented hash `B = A·H` with `A` the `k × w` Vandermonde matrix of nodes `1…w` (Eq. 1,
//!    Eq. 7), computed in the prime field `2⁶¹ − 1` so that Eq. 5 is always solvable (the
//!    module says why integers and 64-bit words are not), and the count `w`.
//! 3. **Timestamps** (§V-A; [`timestamps`]): each group's sending timestamps in sending order,
//!    compressed — losslessly by default (`opa`), or by the paper's wavelet at ratio θ
//!    (`opa-wavelet`).
//! 4. **Recovery** (§IV-C/D, Algorithm 1, §V-B, §VI-A; [`recovery`]): a group with `w′ = w` and
//!    `B′ = B` is exact; otherwise mappings a few errors (losses, insertions, moves within the
//!    shift bound `d`) from the received order are enumerated, the α < k unknown hashes
//!    solved from the first α rows (Eq. 5) and checked by the others (Eq. 6); at most `E`
//!    errors (Eq. 10) and a hard cap of mappings per group. That is `search=paper`; owl's
//!    default proposes the mappings from the timestamps instead ([`align`], below).
//! 5. **Delays** (Algorithm 2; [`method`]): each received packet's arrival time minus the
//!    sender timestamp at its recovered position; lost positions are reported as lost.
//!
//! # What owl adds, and why
//!
//! - **Prime field** instead of integers (see [`cah`]).
//! - **Recovery aligned on the timestamps, with labels** (`search=timestamps`, `labels=2`;
//!   [`align`]): the receiver decodes the sender's timestamps before recovery, lines them up
//!   with its arrival times (a loss is a skipped position, a late packet one that comes a few
//!   places later), and lets the CAH check the most likely alignments first; two bits of each
//!   packet's hash, sent in sending order, pin each error to its place. Algorithm 1's blind
//!   enumeration gave up on most groups holding a loss and a reordered packet at 1 % loss
//!   (`owl demo`'s path); this recovers them in a few alignments each.
//! - **Groups sized for a design loss rate** (`design_loss`, 1 % by default; §VI-A, Eq. 10
//!   asks for few errors per group): a group of `w` packets carries as many rows as make
//!   losing more than `k − 1` of them unlikely ([`Config::rows_for`]), so long segments are
//!   not lost wholesale; the estimate notes when the measured loss exceeds the design and
//!   groups were lost to it.
//! - **Duplicates and displaced delimiters** ([`method`]): a packet R received twice counts
//!   once (its first copy), and when a delimiter arrives a few packets late or early, the
//!   packets it should have led are moved to its segment before recovery.
//! - **Insertions** (σ_j = 0 of Definition 1, made explicit): packets of another segment or
//!   interval; with moves they make reordering across a delimiter recoverable, and a lost
//!   delimiter is recovered by splitting R's merged segment instead of discarding it (the
//!   paper's §II choice; see [`synopsis`]).
//! - **Lossless timestamps by default**: the wavelet's error is the paper's; the lossless codec
//!   costs somewhat more (about the entropy of the gaps, reported) and makes every recovered
//!   delay exact. Grouping by hash costs the timestamps the information of the interleaving
//!   of groups (about `log₂ g` bits per packet, since each group's timestamps are coded in the
//!   group's order), so owl's default segments are small (delimiters every ~512 packets) with
//!   one group each — a configuration of the paper's scheme with `g = 1`; the paper's setup
//!   (one segment per interval, `g` groups proportional to the errors) is
//!   `delimiter_bits=0,groups=G`, and the `opa-groups` experiment runs it.
//!
//! # Per-packet output and local state
//!
//! [`OpaMethod`] answers [`crate::method::Method::estimate_packets`]: every sender packet with
//! its (decoded) sending time and its arrival time, lost, or not placed. The receiver keeps its
//! packets' identities and arrival times for the interval (§V-C: "it is required to maintain a
//! buffer for all receiving time stamps"): 16 bytes a packet in memory, about 9 in its file.
//! The sender keeps every hash and timestamp of the interval (16 bytes a packet, 20 with more
//! than one group) and computes the CAH and compresses the timestamps when the interval is
//! sent, so recording is a count and two pushes; the interval (`--interval`) bounds both
//! points' state.

pub mod align;
pub mod cah;
pub mod config;
pub mod method;
pub mod recovery;
pub mod synopsis;
pub mod timestamps;

pub use config::Config;
pub use method::{
    Fate, LOSSLESS, OpaMethod, PairRecovery, SenderPacket, Stats, WAVELET, recover_pair,
    to_estimate,
};
pub use synopsis::{Receiver, Sender};
pub use timestamps::Codec;

#[cfg(test)]
mod tests;
