//! The Sinkhorn solver: solves against references, grid costs, buffers on the backend, reports, stability, determinism, progress and property tests.
//!
//! One test binary for the subject; each module is one former test file.

#[path = "../common/mod.rs"]
mod common;

mod buffers;
mod determinism;
mod factored_batch;
mod grid;
mod progress;
mod properties;
mod reports;
mod solve;
mod stability;
