//! Gradients: exact OT gradients, the bistochastic projection and its backward, and the gradient flow of the example.
//!
//! One test binary for the subject; each module is one former test file.

#[path = "../common/mod.rs"]
mod common;

mod bistochastic;
mod gradient_flow;
mod ot;
