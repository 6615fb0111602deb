//! Helpers of the command-line tests: running the `logot` binary ([`cli`]), and from the
//! library's tests/common the seeded generator, the POT references of the unbalanced
//! barycenters and the GPU.
#![allow(dead_code)]

pub mod cli;
#[cfg(feature = "cuda")]
#[path = "../../../tests/common/gpu.rs"]
pub mod gpu;
#[path = "../../../tests/common/pot_bary.rs"]
pub mod pot_bary;
#[path = "../../../tests/common/rng.rs"]
mod rng;

#[allow(unused_imports)]
pub use rng::{bin_weights, uniforms, Lcg};
