//! The kernels that apply the plans of point-cloud costs ([`PointCloudCost`]) on the fly.
//!
//! [`PointCloudKernels`] adds what the point-cloud algorithms need beyond
//! [`Backend::sinkstep`]: the plan applied on the fly to the displacement field,
//! `Σ_j P_ij ∇_x c(x_i, y_j)` (the envelope gradient with respect to the points), together
//! with the plan's marginals, never storing `P`; the same field reweighted by an adjoint
//! (the exact gradient of `⟨P,C⟩`, [`PointCloudKernels::adjoint_point_gradient`]) and the
//! cost-weighted marginals `(C⊙P)·1`, `(C⊙P)ᵀ·1` that its adjoint system needs.

pub use crate::cost::{CloudLayout, CrossPrecision, PointCloudCost, PointMetric};

use super::{Backend, Side};
use crate::{Real, Result};

/// Plans of point-cloud costs applied on the fly (see the module docs).
pub trait PointCloudKernels<T: Real>: Backend<T> {
    /// For a point-cloud cost, potentials `f` (`B×n`), `g` (`B×m`) and `ε`, with
    /// `P_b = exp((f_b ⊕ g_b − C)/ε)`, on `side` = [`Side::Row`]:
    ///
    /// `mass[b,i] = Σ_j P_b[i,j]`, `grad[b,i,:] = Σ_j P_b[i,j] ∇_x c(x_i, y_j)`
    /// (`2 Σ_j P_ij (x_i − y_j)` for the squared Euclidean cost),
    ///
    /// returned as (`B×n`, `B×n×d`); on [`Side::Col`] the same over `i` for each `y_j`
    /// (`B×m`, `B×m×d`, with `∇_y c`). Computed tile by tile like the half-step; `P` is
    /// never stored. Errors with [`Error::Unavailable`](crate::Error::Unavailable) for a cost
    /// that is not a point cloud.
    fn point_gradient(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
    ) -> Result<(Self::Buffer, Self::Buffer)>;

    /// The plan applied to values on the other side, on the fly: on [`Side::Row`],
    /// `out[b,i,:] = Σ_j P_b[i,j]·V[b,j,:]` (`P·V`, e.g. `P·Y` for the barycentric
    /// projection `diag(1/μ)·P·Y`), with `values` `B×m×k` or `m×k` shared by the batch and
    /// `out` `B×n×k`; on [`Side::Col`], `Pᵀ·V` with `V` `B×n×k` (or `n×k`) and `out` `B×m×k`.
    #[allow(clippy::too_many_arguments)]
    fn plan_apply(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
        values: &Self::Buffer,
        k: usize,
    ) -> Result<Self::Buffer>;

    /// The plan's marginal and its cost-weighted marginal on `side`, on the fly: on
    /// [`Side::Row`] `mass[b,i] = Σ_j P_b[i,j]` and `cost[b,i] = Σ_j P_b[i,j]·C_ij`
    /// (`B×n` each, `(C⊙P)·1`, the right-hand side of the adjoint system for `L = ⟨P,C⟩`);
    /// on [`Side::Col`] the column sums (`B×m`).
    fn cost_marginals(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
    ) -> Result<(Self::Buffer, Self::Buffer)>;

    /// [`PointCloudKernels::point_gradient`] with each entry of the plan reweighted by the
    /// adjoint `(a, b)` (`B×n`, `B×m`) of an implicit differentiation: on [`Side::Row`]
    ///
    /// `grad[b,i,:] = Σ_j P_b[i,j]·(alpha + (a_b[i] + b_b[j] − C_ij)/ε)·∇_x c(x_i, y_j)`
    ///
    /// (`B×n×d`; with `alpha = 1` the gradient of `⟨P,C⟩` with respect to `x_i`, see
    /// [`crate::pointcloud`]); on [`Side::Col`] the same over `i` with `∇_y c` (`B×m×d`).
    /// `a` and `b` are always the row and the column adjoint, whatever `side`.
    #[allow(clippy::too_many_arguments)]
    fn adjoint_point_gradient(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
        a: &Self::Buffer,
        b: &Self::Buffer,
        alpha: T,
    ) -> Result<Self::Buffer>;
}
