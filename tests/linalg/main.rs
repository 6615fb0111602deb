//! Linear algebra: alignment, GEMM, Newton–Schulz and svd3 against independent references.
//!
//! One test binary for the subject; each module is one former test file.

#[path = "../common/mod.rs"]
mod common;

mod align;
mod gemm;
mod kernels;
mod newton_schulz;
mod svd3;
