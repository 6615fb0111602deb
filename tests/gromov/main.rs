//! Gromov–Wasserstein: entropic and fused GW against POT from the same initial plan, exact
//! GW by conditional gradient, permutation recovery for isometric clouds, point-cloud GW
//! against the dense solver.
//!
//! One test binary for the subject; each module is one topic.

#[path = "../common/mod.rs"]
mod common;

mod entropic;
mod exact;
mod permutation;
mod pointcloud;

use ndarray::{Array1, Array2};

/// The path of a POT reference array written by `tests/data/make_pot_gromov.py`.
fn path(case: &str, name: &str) -> String {
    format!(
        "{}/tests/data/pot_gw_{case}_{name}.npy",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A 2-D POT reference array.
fn mat(case: &str, name: &str) -> Array2<f64> {
    let p = path(case, name);
    ndarray_npy::read_npy(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

/// A 1-D POT reference array.
fn vector(case: &str, name: &str) -> Array1<f64> {
    let p = path(case, name);
    ndarray_npy::read_npy(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}
