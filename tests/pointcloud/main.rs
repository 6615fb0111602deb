//! Point-cloud costs computed on the fly: solves, batches, high dimensions, buffers on the backend and implicit gradients.
//!
//! One test binary for the subject; each module is one former test file.

#[path = "../common/mod.rs"]
mod common;

mod batch;
mod buffers;
mod highd;
mod implicit_grad;
mod reports;
mod solve;
