//! COLATE — counter-based per-flow latency estimation (Shahzad, Liu, SIGMETRICS'14; the
//! papers are listed in `owl_core`'s crate doc): every observation point keeps one shared
//! vector of counters whatever its peers, adds each packet's timestamp to one counter of its
//! flow's subvector, dumps the vector as a **counter epoch** before it overflows, and any flow
//! between any two points is queried later, over any time range, by denoising.
//!
//! Modules: [`config`] (what a point is configured with, what two points agree on), [`plan`]
//! (§5: `n`, `m`, `b`, `T` from `M`, `α`, `β`, `t_min`, `t_max`), [`vector`] (§3.1: the
//! recording phase and the dump), [`epoch`] (the dumped epoch and its byte layout), [`coding`]
//! (its counters fixed-width or Rice-coded), [`huffman`] (or Huffman-coded, the default),
//! [`estimate`] (§4: Theorem 2, Eq. 3, Theorems 3 and 4), [`method`] (the adapter).
//!
//! # Recording (§3.1)
//!
//! A packet of flow `f` adds `⌊(ts − base)/unit⌋` to counter `H(f, j)` of the vector its
//! identity samples (§1.4), `j ∈ [0, m)` drawn from the packet identity so that both points
//! choose the same `j` (Theorem 4 needs the same packets in the same counters), and 1 to the
//! packet counter of the same index. The vector is dumped as an epoch when its sum reaches `T`
//! (§5.2); the epoch states its base (its first packet's timestamp), its unit, its first and
//! last timestamps, its mapping and its packet counter.
//!
//! **The count vector.** §4.1 takes `p_f` "from NetFlow or [22, 26]"; here it comes from a
//! vector of packet counters with the same mapping, denoised by the same Theorem 2. It keeps
//! the points free of per-flow state, and it serves twice more: it turns an epoch's relative
//! sums into absolute ones (`A[j] = unit·S[j] + base·N[j]`), so two points whose epochs have
//! different bases (they always do: epochs are not coordinated) compare timestamps on one
//! clock; and it is the packet counter of §1.4's loss strategy, per counter.
//!
//! # Noise as the paper models it, and as it is
//!
//! Theorem 1 models the other flows' part of a counter as `Binom(t_X − t_f, 1/n)`: every unit
//! of time smeared independently over the counters. A packet's timestamp lands whole in one
//! counter, so the true variance of that part is `Σ_p t_p²·(1/n)(1 − 1/n)` — larger than the
//! model's by the size of a timestamp in units (§3.2 says as much: "If the exact equation for
//! variance of C is desired …"). The plan of §5 inherits the model. What keeps per-flow
//! estimates useful is not the plan but the coordination: the same packet lands in the same
//! counter at both points, so in `t̃_{f,R} − t̃_{f,S}` every packet both points saw in the
//! queried epochs cancels down to its *delay*, and a colliding flow shifts the mean only by
//! the difference between its delays and `f`'s, weighted by its share of `f`'s counters —
//! with `p̃_f` from the same counters, the estimate is a weighted mean of `f`'s delay and its
//! colliders'. Packets only one point saw in the queried epochs — traffic of other links at a
//! point (the triangle of §6.2.1), packets at the edges of epochs that do not line up, lost
//! packets — do not cancel: each brings its whole timestamp. The `colate-*` experiments
//! measure both regimes and the README states which claims hold.
//!
//! # owl's raw variant (`colate:mean=raw`)
//!
//! Theorem 2 subtracts from the subvector the *expected* share of every other flow,
//! `m·t_X/(n − m)` — timestamp-sized, so whenever the packets in the two points' queried epochs
//! differ (other links' traffic, epochs that do not line up) it leaves timestamp-sized noise,
//! and for a small flow `p̃` (the same estimator on the counts) can be near zero or negative.
//! [`Estimator::Raw`] takes the subvector as it is: `Σ_j (A_R[j] − A_S[j]) / Σ_j N_S[j]`, the
//! mean delay of every packet in the flow's counters, kept only when the counters' packet
//! counts agree at both points (a packet only one point saw makes them differ). It is the
//! default: the `colate-*` experiments run both, and it measured better in every setting, on
//! queueing delays (the CHIC-like trace, `σ/μ` ≈ 1.4) as on near-constant ones; the faithful
//! estimator stays as `colate:mean=paper`.
//!
//! # Intervals (the method contract)
//!
//! COLATE coordinates nothing; owl's pipeline gives each method a synopsis per measurement
//! interval. The per-interval synopsis is the point's [`Recorder`] over the interval: the
//! epochs it dumped when its sum reached `T`, plus, at the interval's end, its open vectors
//! dumped as one more epoch each (an early dump costs storage, never accuracy). A flow's query
//! in an interval is then the query over that interval's epochs. With `--interval 0`
//! (`owl compare`'s default) the whole run is one measurement and the epochs are exactly those
//! `T` makes — COLATE as the paper runs it; with shorter intervals, packets in flight at a
//! boundary fall into different intervals at the two points and do not cancel. `owl record
//! --store` and `owl query` use no intervals at all: epochs go to the store as they are dumped.
//!
//! # Two points with different RAM
//!
//! §5.3 lets each point choose `n`, `b` and `T`. Every estimator reads `n`, the base and the
//! unit from each epoch's own header, so nothing else is needed for a mean or a std — only
//! `m`, the seed (the choice of `j` and the vector) and the sampling vectors must agree
//! ([`Config::check_pair`]). But with different `n`, a packet lands in *different* counters at
//! the two points, and the coordination that made shared traffic cancel is gone: the mean then
//! rests on the paper's noise model alone (test `different_ram_at_the_two_points`).

pub mod cells;
pub mod coding;
pub mod config;
pub mod epoch;
pub mod estimate;
pub mod huffman;
pub mod method;
pub mod plan;
pub mod vector;

#[cfg(test)]
mod tests;

pub use cells::Memory;
pub use coding::Coding;
pub use config::Config;
pub use epoch::{Epoch, EpochHead, EpochReader, FlowEpoch, ReadAt, Sealed};
pub use estimate::{
    Estimator, FlowLatency, Query, StdEstimator, aggregate, mle_noise, query, query_flow,
};
pub use method::{ColateMethod, INFO};
pub use plan::{Level, Plan, Requirement};
pub use vector::{Layout, Mapping, Placement, Recorder};
