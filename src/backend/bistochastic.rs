//! Kernels for the bistochastic projection of small matrices (see [`crate::grad::bistochastic`](mod@crate::grad::bistochastic)).
//!
//! A batch of `B` matrices `n×n` is stored row-major, `B×n×n`. Each matrix is independent
//! and small (`n ≤ 32`): a backend processes one matrix per thread / warp / task, entirely
//! in registers or local memory, with one pass over the inputs.

use super::Backend;
use crate::cg::{CgOutcome, CgSummary};
use crate::{Real, Result};

/// What the forward kernel reports over the batch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProjectionStats {
    /// Largest number of iterations run by a matrix.
    pub iterations: usize,
    /// Largest column-sum error `Σ_j |Σ_i R_ij − 1|` of a returned matrix (rows sum to 1
    /// by construction: the last half-step normalises rows).
    pub marginal_error: f64,
    /// Number of matrices that ran all iterations without meeting the tolerance (all of
    /// them when `tol = 0`).
    pub unconverged: usize,
}

/// Batched Sinkhorn–Knopp projection of `exp(X)` and its implicit backward.
pub trait BistochasticKernels<T: Real>: Backend<T> {
    /// Largest `n` the kernels handle.
    fn bistochastic_max_n(&self) -> usize;

    /// `R = SinkhornKnopp(exp(X))` for each `n×n` matrix of `x`, in the log domain
    /// (`log R = X + α·1ᵀ + 1·βᵀ`): `β ← −LSE_i(X_ij + α_i)`, then `α ← −LSE_j(X_ij + β_j)`,
    /// at most `iters` times; a matrix stops early once its column error is `≤ tol`
    /// (`tol = 0`: always `iters`). Writes `r` (same layout as `x`).
    fn bistochastic_forward(
        &self,
        n: usize,
        x: &Self::Buffer,
        iters: usize,
        tol: f64,
        r: &mut Self::Buffer,
    ) -> Result<ProjectionStats>;

    /// `∂L/∂X = (G − a·1ᵀ − 1·bᵀ) ⊙ R` for each matrix, where `b` solves the Schur system
    /// `(diag(c) − Rᵀ diag(1/r) R)·b = (G⊙R)ᵀ1 − Rᵀ diag(1/r)(G⊙R)1` (`r`, `c`: the row and
    /// column sums of `R`, i.e. `I − RᵀR` for a bistochastic `R`) by CG — two mat-vecs a step,
    /// `RᵀR` never formed — and `a = diag(1/r)((G⊙R)1 − R·b)`.
    ///
    /// Returns the batch's [`CgSummary`], reduced by the backend (a GPU reads back a few
    /// numbers). With `outcomes` (one slot per matrix) each matrix's [`CgOutcome`] is written
    /// there as well (a GPU then reads back one word per matrix). A right-hand side that is not
    /// finite, or a NaN residual, is an [`Error::Numerical`](crate::Error::Numerical) naming
    /// the first such matrix.
    #[allow(clippy::too_many_arguments)]
    fn bistochastic_backward(
        &self,
        n: usize,
        r: &Self::Buffer,
        g: &Self::Buffer,
        tol: f64,
        max_iters: usize,
        dx: &mut Self::Buffer,
        outcomes: Option<&mut [CgOutcome]>,
    ) -> Result<CgSummary>;
}
