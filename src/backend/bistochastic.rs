//! Kernels for the bistochastic projection of small matrices (see [`crate::grad::bistochastic`](mod@crate::grad::bistochastic)).
//!
//! A batch of `B` matrices `n×n` is stored row-major, `B×n×n`. Each matrix is independent
//! and small (`n ≤ 32`): a backend processes one matrix per thread / warp / task, entirely
//! in registers or local memory, with one pass over the inputs.

use super::Backend;
use crate::cg::{CgOutcome, CgSummary};
use crate::{Error, Real, Result};

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

/// The statistics as 64-bit words, as the deferred launches leave them
/// ([`BistochasticKernels::bistochastic_forward_deferred`] and
/// [`BistochasticKernels::bistochastic_backward_deferred`]): the layout a GPU reduces them in
/// (cuda/bistochastic.cu), so that a caller can keep them on the device and read them later.
pub mod words {
    /// Words of [`ProjectionStats`](super::ProjectionStats): the largest iteration count,
    /// the column error (`f64` bits), the unconverged count.
    pub const PROJECTION: usize = 3;
    /// Words of the [`CgSummary`](crate::grad::CgSummary) at the start of the backward's words:
    pub const CG_SUMMARY: usize = 7;
    /// (the backend's scratch count,)
    pub const CG_REDO: usize = 0;
    /// the largest iteration count,
    pub const CG_ITERS: usize = 1;
    /// the largest relative residual (`f32` bits),
    pub const CG_RESIDUAL: usize = 2;
    /// the unconverged count,
    pub const CG_UNCONVERGED: usize = 3;
    /// `!k` for the first unconverged matrix `k` (0: none),
    pub const CG_FIRST_UNCONV: usize = 4;
    /// `!k` for the first matrix with a non-finite right-hand side,
    pub const CG_FIRST_BAD_RHS: usize = 5;
    /// `!k` for the first matrix with a NaN residual.
    pub const CG_FIRST_NAN: usize = 6;
}

/// A word holding `!index` (0: none).
fn first_index(word: u64) -> Option<usize> {
    (word != 0).then_some((!word) as usize)
}

fn index_word(k: Option<usize>) -> u64 {
    k.map_or(0, |k| !(k as u64))
}

impl ProjectionStats {
    /// The statistics from their [`words::PROJECTION`] words.
    pub fn from_words(w: &[u64]) -> Result<Self> {
        if w.len() < words::PROJECTION {
            return Err(Error::shape(
                "words",
                format!("has {} words, {} needed", w.len(), words::PROJECTION),
            ));
        }
        Ok(ProjectionStats {
            iterations: w[0] as usize,
            marginal_error: f64::from_bits(w[1]),
            unconverged: w[2] as usize,
        })
    }

    /// The statistics, or an [`Error::Numerical`] when the column error is not finite
    /// (non-finite logits).
    pub fn checked(self) -> Result<Self> {
        if !self.marginal_error.is_finite() {
            return Err(Error::Numerical(format!(
                "bistochastic forward: the column error is {} (non-finite logits?)",
                self.marginal_error
            )));
        }
        Ok(self)
    }

    /// The statistics as [`words::PROJECTION`] words.
    pub fn to_words(&self) -> [u64; words::PROJECTION] {
        [
            self.iterations as u64,
            self.marginal_error.to_bits(),
            self.unconverged as u64,
        ]
    }
}

/// The [`CgSummary`] of `problems` matrices solved to `tol` from the first
/// [`words::CG_SUMMARY`] words of a deferred backward. A non-finite right-hand side or a NaN
/// residual is an [`Error::Numerical`] naming the first such matrix, as the backward returns.
pub fn cg_summary_from_words(w: &[u64], problems: usize, tol: f64) -> Result<CgSummary> {
    use words::*;
    if w.len() < CG_SUMMARY {
        return Err(Error::shape(
            "words",
            format!("has {} words, {CG_SUMMARY} needed", w.len()),
        ));
    }
    if let Some(k) = first_index(w[CG_FIRST_BAD_RHS]) {
        return Err(Error::Numerical(format!(
            "CG: the right-hand side of problem {k} is not finite"
        )));
    }
    if let Some(k) = first_index(w[CG_FIRST_NAN]) {
        return Err(Error::Numerical(format!(
            "CG: the residual of problem {k} is NaN"
        )));
    }
    Ok(CgSummary {
        problems,
        max_iterations: w[CG_ITERS] as usize,
        max_residual: f32::from_bits(w[CG_RESIDUAL] as u32) as f64,
        unconverged: w[CG_UNCONVERGED] as usize,
        first_unconverged: first_index(w[CG_FIRST_UNCONV]),
        tol,
    })
}

/// `summary` as [`words::CG_SUMMARY`] words (the residual rounded to `f32`).
pub fn cg_summary_to_words(summary: &CgSummary) -> [u64; words::CG_SUMMARY] {
    let mut w = [0u64; words::CG_SUMMARY];
    w[words::CG_ITERS] = summary.max_iterations as u64;
    w[words::CG_RESIDUAL] = (summary.max_residual as f32).to_bits() as u64;
    w[words::CG_UNCONVERGED] = summary.unconverged as u64;
    w[words::CG_FIRST_UNCONV] = index_word(summary.first_unconverged);
    w
}

/// Batched Sinkhorn–Knopp projection of `exp(X)` and its implicit backward.
pub trait BistochasticKernels<T: Real>: Backend<T> {
    /// 64-bit words where the deferred launches leave their statistics (layout: [`words`]):
    /// device memory on a GPU (the backend's or a caller's), so that nothing is read back
    /// until the caller asks.
    type Words;

    /// Largest `n` the kernels handle.
    fn bistochastic_max_n(&self) -> usize;

    /// A new buffer of `len` words.
    fn words(&self, len: usize) -> Result<Self::Words>;

    /// The first `len` words of `w` on the host (a GPU waits for its stream).
    fn read_words(&self, w: &Self::Words, len: usize) -> Result<Vec<u64>>;

    /// How many words [`BistochasticKernels::bistochastic_backward_deferred`] needs for a
    /// batch of `batch` matrices: the [`words::CG_SUMMARY`] words, then the backend's scratch.
    fn bistochastic_backward_words(&self, batch: usize) -> usize;

    /// [`BistochasticKernels::bistochastic_forward`], the statistics left in the first
    /// [`words::PROJECTION`] words of `stats` instead of read back.
    fn bistochastic_forward_deferred(
        &self,
        n: usize,
        x: &Self::Buffer,
        iters: usize,
        tol: f64,
        r: &mut Self::Buffer,
        stats: &mut Self::Words,
    ) -> Result<()>;

    /// [`BistochasticKernels::bistochastic_backward`] without the per-matrix outcomes, the
    /// summary left in the first [`words::CG_SUMMARY`] words of `words` (which holds
    /// [`BistochasticKernels::bistochastic_backward_words`]) instead of read back
    /// ([`cg_summary_from_words`] decodes them). A backend that computes on the host may
    /// return the summary's errors at once.
    #[allow(clippy::too_many_arguments)]
    fn bistochastic_backward_deferred(
        &self,
        n: usize,
        r: &Self::Buffer,
        g: &Self::Buffer,
        tol: f64,
        max_iters: usize,
        dx: &mut Self::Buffer,
        words: &mut Self::Words,
    ) -> Result<()>;

    /// `R = SinkhornKnopp(exp(X))` for each `n×n` matrix of `x`, in the log domain
    /// (`log R = X + α·1ᵀ + 1·βᵀ`): `β ← −LSE_i(X_ij + α_i)`, then `α ← −LSE_j(X_ij + β_j)`,
    /// at most `iters` times; a matrix stops early once its column error is `≤ tol`
    /// (`tol = 0`: always `iters`). Writes `r` (same layout as `x`).
    ///
    /// Provided: [`BistochasticKernels::bistochastic_forward_deferred`], then its words
    /// read back (a GPU waits for its stream).
    fn bistochastic_forward(
        &self,
        n: usize,
        x: &Self::Buffer,
        iters: usize,
        tol: f64,
        r: &mut Self::Buffer,
    ) -> Result<ProjectionStats> {
        let mut stats = self.words(words::PROJECTION)?;
        self.bistochastic_forward_deferred(n, x, iters, tol, r, &mut stats)?;
        ProjectionStats::from_words(&self.read_words(&stats, words::PROJECTION)?)
    }

    /// `∂L/∂X = (G − a·1ᵀ − 1·bᵀ) ⊙ R` for each matrix, where `b` solves the Schur system
    /// `(diag(c) − Rᵀ diag(1/r) R)·b = (G⊙R)ᵀ1 − Rᵀ diag(1/r)(G⊙R)1` (`r`, `c`: the row and
    /// column sums of `R`, i.e. `I − RᵀR` for a bistochastic `R`) by CG — two mat-vecs a step,
    /// `RᵀR` never formed — and `a = diag(1/r)((G⊙R)1 − R·b)`.
    ///
    /// Returns the batch's [`CgSummary`], reduced by the backend (a GPU reads back a few
    /// numbers). With `outcomes` (one slot per matrix) each matrix's [`CgOutcome`] is written
    /// there as well (a GPU then reads back one word per matrix). A right-hand side that is not
    /// finite, or a NaN residual, is an [`Error::Numerical`] naming
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
