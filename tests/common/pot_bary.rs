//! The POT references for unbalanced barycenters, shared by tests/unbalanced/barycenter.rs
//! (the library) and cli/tests/cli/unbalanced.rs (`logot barycenter --reg-m`): POT 0.9.7's
//! `barycenter_unbalanced(A, M, reg, reg_m, weights)` with M the squared distances of the
//! grid linspace(0, 1, N) per axis, printed into tests/data/pot_unbalanced_barycenter.rs by
//! `python3 tests/data/make_pot_unbalanced_barycenter.py`.

use logot::{GridCost, Real};
use ndarray::{Array1, Array2};

/// One POT reference problem.
pub struct Case {
    /// `[n]` (dense, points linspace(0, 1, n)) or the grid's shape.
    pub shape: &'static [usize],
    /// Solve on a [`GridCost`] (POT got the dense cost of the same grid).
    pub grid: bool,
    /// `K×n`, row-major.
    pub inputs: &'static [f64],
    pub weights: &'static [f64],
    pub eps: f64,
    pub rhos: &'static [f64],
    /// POT's barycenter for each ρ.
    pub barycenters: &'static [&'static [f64]],
}

/// The reference problems, by name.
pub mod pot {
    use super::Case;
    include!("../data/pot_unbalanced_barycenter.rs");
}

/// Every reference problem with its name.
pub const CASES: [(&str, Case); 5] = [
    ("dense2", pot::DENSE2),
    ("dense3", pot::DENSE3),
    ("small_eps4", pot::SMALL_EPS4),
    ("grid2d", pot::GRID2D),
    ("grid1d", pot::GRID1D),
];

impl Case {
    /// Bins of the barycenter.
    pub fn n(&self) -> usize {
        self.shape.iter().product()
    }
    /// The inputs, `K×n`.
    pub fn inputs<T: Real>(&self) -> Array2<T> {
        let n = self.n();
        Array2::from_shape_fn((self.inputs.len() / n, n), |(k, i)| {
            T::of(self.inputs[k * n + i])
        })
    }
    /// The weights, `K`.
    pub fn weights<T: Real>(&self) -> Array1<T> {
        self.weights.iter().map(|&w| T::of(w)).collect()
    }
    /// The explicit squared-distance cost between the points (what POT was given).
    pub fn dense_cost<T: Real>(&self) -> Array2<T> {
        let grid = GridCost::new(self.shape).unwrap();
        grid.to_dense::<f64>().mapv(T::of)
    }
}
