//! Kernels for exact OT gradients by implicit differentiation (see [`crate::grad`]).
//!
//! The adjoint system of a Sinkhorn plan is solved matrix-free by conjugate gradients: each
//! step applies `P` and `Pᵀ` to a batch of vectors, plus a few batched vector operations
//! whose per-problem coefficients (CG's `α`, `β`) are computed on the host from `B`
//! per-problem dot products. Plans are stored `B×n×m`, vectors `B×n` or `B×m`, row-major.

use super::Backend;
use crate::cg::CgSpace;
use crate::{Real, Result};
use std::marker::PhantomData;

/// Batched plan mat-vecs and vector operations for the implicit OT gradient and the
/// matrix-free CG solver ([`crate::grad::cg`], which runs on them through [`BackendSpace`]).
///
/// Shapes are checked: every method returns an error on a length mismatch.
pub trait GradKernels<T: Real>: Backend<T> {
    /// `y_b = P_b·x_b` for plans `P` (`B×n×m`), `x` (`B×m`), `y` (`B×n`).
    fn plan_matvec(
        &self,
        plan: &Self::Buffer,
        n: usize,
        m: usize,
        x: &Self::Buffer,
        y: &mut Self::Buffer,
    ) -> Result<()>;

    /// `y_b = P_bᵀ·x_b` for plans `P` (`B×n×m`), `x` (`B×n`), `y` (`B×m`).
    fn plan_matvec_t(
        &self,
        plan: &Self::Buffer,
        n: usize,
        m: usize,
        x: &Self::Buffer,
        y: &mut Self::Buffer,
    ) -> Result<()>;

    /// Row and column sums of `W_b ⊙ P_b`: (`B×n`, `B×m`). `weight` holds `B` matrices or
    /// one `n×m` matrix shared by every problem; `None` means all ones (the marginals of `P`).
    fn weighted_marginals(
        &self,
        plan: &Self::Buffer,
        n: usize,
        m: usize,
        weight: Option<&Self::Buffer>,
    ) -> Result<(Self::Buffer, Self::Buffer)>;

    /// `out_b[i,j] = (alpha + beta·(W_b[i,j] − a_b[i] − c_b[j]))·P_b[i,j]`, stored `B×n×m`;
    /// `weight` is `B` matrices or one shared, as in [`GradKernels::weighted_marginals`].
    #[allow(clippy::too_many_arguments)]
    fn assemble_gradient(
        &self,
        plan: &Self::Buffer,
        n: usize,
        m: usize,
        weight: &Self::Buffer,
        a: &Self::Buffer,
        c: &Self::Buffer,
        alpha: T,
        beta: T,
    ) -> Result<Self::Buffer>;

    /// Per-problem dot products `out[b] = Σ_k x[b,k]·y[b,k]` of `batch` problems (the only
    /// data read back to the host during CG: `B` numbers).
    fn batched_dot(&self, batch: usize, x: &Self::Buffer, y: &Self::Buffer) -> Result<Vec<f64>>;

    /// `y[b,k] += alpha[b]·x[b,k]`, one coefficient per problem.
    fn batched_axpy(&self, alpha: &[f64], x: &Self::Buffer, y: &mut Self::Buffer) -> Result<()>;

    /// `y[b,k] = x[b,k] + beta[b]·y[b,k]`, one coefficient per problem.
    fn batched_xpby(&self, x: &Self::Buffer, beta: &[f64], y: &mut Self::Buffer) -> Result<()>;

    /// Element-wise `y = a ⊙ x + beta·y`; `beta = 0` overwrites `y` (its old content is not read).
    fn hadamard(
        &self,
        a: &Self::Buffer,
        x: &Self::Buffer,
        beta: T,
        y: &mut Self::Buffer,
    ) -> Result<()>;

    /// Element-wise `1/x` where `x > 0` and the reciprocal is finite, else 0 (empty bins).
    fn recip_or_zero(&self, x: &Self::Buffer) -> Result<Self::Buffer>;

    /// Element-wise indicator `x > 0` (1 or 0): the support of a marginal.
    fn support(&self, x: &Self::Buffer) -> Result<Self::Buffer>;
}

/// Batched vectors resident on a backend: `batch` problems of `len` entries, `B×len`.
pub struct BackendSpace<'a, T: Real, B: GradKernels<T>> {
    backend: &'a B,
    batch: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<'a, T: Real, B: GradKernels<T>> BackendSpace<'a, T, B> {
    /// `batch` problems of `len` entries each, on `backend`.
    pub fn new(backend: &'a B, batch: usize, len: usize) -> Self {
        BackendSpace {
            backend,
            batch,
            len,
            _t: PhantomData,
        }
    }
    /// The backend.
    pub fn backend(&self) -> &'a B {
        self.backend
    }
}

impl<T: Real, B: GradKernels<T>> CgSpace for BackendSpace<'_, T, B> {
    type Vector = <B as Backend<T>>::Buffer;
    type Scalars = Vec<f64>;
    fn batch(&self) -> usize {
        self.batch
    }
    fn scalars(&self) -> Vec<f64> {
        vec![0.0; self.batch]
    }
    fn zeros(&self) -> Result<Self::Vector> {
        self.backend.filled(self.batch * self.len, T::zero())
    }
    fn duplicate(&self, v: &Self::Vector) -> Result<Self::Vector> {
        let mut out = self.backend.filled(self.backend.len(v), T::zero())?;
        let zeros = vec![0.0; self.batch];
        self.backend.batched_xpby(v, &zeros, &mut out)?;
        Ok(out)
    }
    fn dot(&self, x: &Self::Vector, y: &Self::Vector, out: &mut [f64]) -> Result<()> {
        let d = self.backend.batched_dot(self.batch, x, y)?;
        out.copy_from_slice(&d);
        Ok(())
    }
    fn axpy(&self, alpha: &[f64], x: &Self::Vector, y: &mut Self::Vector) -> Result<()> {
        self.backend.batched_axpy(alpha, x, y)
    }
    fn xpby(&self, x: &Self::Vector, beta: &[f64], y: &mut Self::Vector) -> Result<()> {
        self.backend.batched_xpby(x, beta, y)
    }
}
