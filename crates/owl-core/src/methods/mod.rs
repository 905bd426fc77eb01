//! The methods, one module each, every one following the contract of [`crate::method`]: a
//! `Config` that validates, a per-point synopsis, a pair estimator, and a
//! [`MethodInfo`](crate::method::MethodInfo) descriptor listed in [`crate::registry`].
//!
//! The five papers' synopses are [`lda`], [`rda`], [`lds`] (with its single-bank form [`sds`]),
//! [`colate`];
//! the baselines they are measured against are [`exact`] (the ground truth), [`probe`]
//! (Poisson probing), [`rli`], [`mpe`] (NetFlow-style per-flow records), [`finecomb`] and
//! [`countmin`]; [`sample`] (coordinated sampling) gives delay quantiles with intervals. This
//! module is private: each is reached as `owl_core::NAME`, one path per type.

pub mod colate;
pub mod countmin;
pub mod exact;
pub mod finecomb;
pub mod lda;
pub mod lds;
pub mod mpe;
pub mod opa;
pub mod probe;
pub mod rda;
pub mod rli;
pub mod sample;
pub mod sds;
