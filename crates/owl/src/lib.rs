//! owl's library: what the command line, the experiments and (later) the live agent share.
//!
//! The `owl` package is a library beside its binary so that the command line stays thin: a
//! command parses its flags into the options of a library call and renders what it returns.
//! Dependencies point one way, `owl_core` ← `owl_trace` ← this library ← the binary: the
//! comparison driver opens captures and writes files, so it cannot live in `owl_core` (no I/O),
//! and it runs every method and builds the reports, which `owl_trace` (the traces layer, which
//! knows no method) must not.
//!
//! - [`compare`]: a two-capture comparison, lock-step reading into the streaming pipeline with
//!   the exact truth beside every method, into one [`report::CompareReport`];
//! - [`methods`]: the registry by name, with `--memory` and `--method-config`;
//! - [`report`]: the reports as data, and their text rendering;
//! - [`input`]: reading one capture into batches of records;
//! - [`progress`]: progress bars on a terminal.

#![deny(unsafe_code)]

pub mod compare;
pub mod input;
pub mod methods;
pub mod progress;
pub mod report;
