//! What the exact solvers return: the plan as a sparse list, its cost, the dual potentials
//! and the certificate measured on them.

use super::certificate::Certificate;
use ndarray::{Array1, Array2};

/// A transport plan as a list of its nonzero entries `P[rows[k], cols[k]] = mass[k]`,
/// sorted by `(row, col)`. A basic optimal plan has at most `n + m − 1` entries.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SparsePlan {
    /// Number of rows (sources) of the full plan.
    pub n: usize,
    /// Number of columns (targets) of the full plan.
    pub m: usize,
    /// Row of each entry.
    pub rows: Vec<usize>,
    /// Column of each entry.
    pub cols: Vec<usize>,
    /// Mass of each entry (positive).
    pub mass: Vec<f64>,
}

impl SparsePlan {
    pub(crate) fn from_triples(n: usize, m: usize, mut t: Vec<(usize, usize, f64)>) -> Self {
        t.sort_unstable_by_key(|&(i, j, _)| (i, j));
        SparsePlan {
            n,
            m,
            rows: t.iter().map(|e| e.0).collect(),
            cols: t.iter().map(|e| e.1).collect(),
            mass: t.iter().map(|e| e.2).collect(),
        }
    }

    /// Number of nonzero entries.
    pub fn len(&self) -> usize {
        self.mass.len()
    }

    /// Whether the plan has no entry.
    pub fn is_empty(&self) -> bool {
        self.mass.is_empty()
    }

    /// The entries as `(row, col, mass)`.
    pub fn iter(&self) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        self.rows
            .iter()
            .zip(&self.cols)
            .zip(&self.mass)
            .map(|((&i, &j), &p)| (i, j, p))
    }

    /// The dense `n×m` plan (POT's `emd` return value).
    pub fn to_dense(&self) -> Array2<f64> {
        let mut p = Array2::zeros((self.n, self.m));
        for (i, j, v) in self.iter() {
            p[[i, j]] += v;
        }
        p
    }
}

/// Which algorithm produced an exact result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExactMethod {
    /// The network simplex (any weights).
    NetworkSimplex,
    /// Shortest augmenting paths (square problems with all weights equal), on the CPU.
    Assignment,
    /// The auction algorithm with ε-scaling on the GPU (square problems with all weights
    /// equal: `CudaBackend::emd_batch` and `CudaBackend::emd_points_batch`); a problem
    /// whose certificate does not hold there is solved again on the CPU and reports
    /// [`ExactMethod::Assignment`].
    Auction,
    /// Sorting and a merge (one dimension).
    Sorting,
}

/// An exact optimal transport result: `min ⟨P, C⟩ s.t. P·1 = μ, Pᵀ·1 = ν, P ≥ 0`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EmdResult {
    /// `⟨P, C⟩` of the returned plan (POT's `emd2`).
    pub cost: f64,
    /// The plan, sparse (`plan.to_dense()` is POT's `emd`).
    pub plan: SparsePlan,
    /// Dual potential of the sources: `f_i + g_j ≤ C_ij`, with equality where `P_ij > 0`.
    /// Centred as POT's `center_dual` (`⟨μ, f⟩ = ⟨ν, g⟩`); zero-mass sources get the
    /// largest feasible value `min_j C_ij − g_j`.
    pub f: Array1<f64>,
    /// Dual potential of the targets (zero-mass targets: `min_i C_ij − f_i`).
    pub g: Array1<f64>,
    /// The certificate, measured on `plan`, `f` and `g`.
    pub certificate: Certificate,
    /// Pivots (network simplex), augmentations (assignment) or merge steps (1-D).
    pub iterations: usize,
    /// Whether the solver reached optimality (false when an iteration or time limit
    /// stopped it: the plan then still meets both marginals, with the mass the network
    /// simplex had not yet placed paired up source by source, but is not optimal; the
    /// certificate's gap and dual violation show how far).
    pub converged: bool,
    /// `converged` and the certificate within its tolerance.
    pub exact: bool,
    /// The algorithm used.
    pub method: ExactMethod,
}
