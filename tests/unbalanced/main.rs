//! Unbalanced (KL-relaxed) OT: solves, barycenters, divergences and gradients against POT and closed forms.
//!
//! One test binary for the subject; each module is one former test file.

#[path = "../common/mod.rs"]
mod common;

mod barycenter;
mod divergence;
mod grad;
mod solve;
