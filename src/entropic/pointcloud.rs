//! Entropic OT between point clouds with the cost computed on the fly: gradients with
//! respect to the points and the Sinkhorn divergence.
//!
//! The cost `C_ij = c(x_i, y_j)` ([`PointCloudCost`], squared Euclidean by default) is never
//! stored: half-steps, transport costs and the plan-weighted sums below are computed tile
//! by tile, so memory is `O((n + m)·d)` whatever `n·m`.
//!
//! **Objective.** The values and gradients here are those of the regularised objective in
//! its dual form, at the solver's potentials `(f, g)`:
//!
//! `OT_ε(μ, ν) = ⟨f, μ⟩ + ⟨g, ν⟩ − ε Σ_ij P_ij`,  `P = exp((f ⊕ g − C)/ε)`,
//!
//! which at convergence equals `⟨P, C⟩ + ε Σ P (log P − 1)` (the value of
//! [`SinkhornSolver::envelope_gradients`](crate::SinkhornSolver::envelope_gradients)). Because `(f, g)`
//! maximise the dual, the envelope theorem gives `∂OT_ε/∂C = P`, so
//!
//! `∂OT_ε/∂x_i = Σ_j P_ij ∇_x c(x_i, y_j) = 2 Σ_j P_ij (x_i − y_j)` (squared Euclidean),
//!
//! computed by [`PointCloudKernels::point_gradient`](crate::PointCloudKernels::point_gradient) with `P` applied on the fly. This is
//! the exact gradient of `OT_ε` at convergence; before it, the error is of the order of the
//! marginal error (the `f` half-step that ends each iteration makes `P·1 = μ` exact). It is
//! not the gradient of the transport cost `⟨P, C⟩` that [`crate::wasserstein`] reports.
//!
//! Unbalanced ([`Problem::relaxed`](crate::Problem::relaxed)): the value is the unbalanced objective in its
//! dual form `D = Σ μ ψ_μ(f − ε log μ) + Σ ν ψ_ν(g − ε log ν) − ε (Σ P − Σμ Σν)`,
//! `ψ(t) = −ρ (e^{−t/ρ} − 1)` (see [`crate::grad::ot`]), equal at the optimum to
//! [`SinkhornResult::objective`](crate::SinkhornResult::objective); `∂D/∂C = P` still, so the point gradients keep their form.
//!
//! **Transport cost, exact** ([`SinkhornSolver::transport_point_gradients`](crate::SinkhornSolver::transport_point_gradients)). The transport cost
//! `⟨P, C⟩` (the `distance` of [`crate::wasserstein`], POT's `sinkhorn2`) depends on the
//! points directly and through the plan. With [`crate::grad::ot`]'s adjoint `(a, b)` for the
//! upstream `G = C` (the balanced or, for an unbalanced problem, the relaxed system), its
//! gradient with respect to the cost is the direct term plus the implicit one,
//! `W = ∂⟨P,C⟩/∂C = P − (1/ε)(C − a·1ᵀ − 1·bᵀ)⊙P`, i.e. `W_ij = P_ij·(1 + (a_i + b_j − C_ij)/ε)`,
//! and the chain rule through `C_ij = c(x_i, y_j)` gives
//!
//! `∂⟨P,C⟩/∂x_i = Σ_j W_ij ∇_x c(x_i, y_j)`,  `∂⟨P,C⟩/∂y_j = Σ_i W_ij ∇_y c(x_i, y_j)`.
//!
//! Nothing `n×m` is stored: the adjoint system is solved by CG with `P·v` and `Pᵀ·u` applied
//! on the fly ([`PointCloudKernels::plan_apply`](crate::PointCloudKernels::plan_apply)), its right-hand side `(C⊙P)·1`,
//! `(C⊙P)ᵀ·1` from [`PointCloudKernels::cost_marginals`](crate::PointCloudKernels::cost_marginals), and the reweighted field by
//! [`PointCloudKernels::adjoint_point_gradient`](crate::PointCloudKernels::adjoint_point_gradient); a solve costs a few CG steps of two plan
//! applications each on top of Sinkhorn.
//!
//! *Which to use.* The envelope form ([`SinkhornSolver::point_gradients`](crate::SinkhornSolver::point_gradients)) is the exact gradient of
//! `OT_ε` for the price of one pass over the plan: take it when `OT_ε` (or the Sinkhorn
//! divergence) is the loss, as in GeomLoss. When the loss is the transport cost `⟨P, C⟩`
//! itself (POT's `sinkhorn2`, what [`crate::wasserstein`] reports), the envelope form is
//! only its gradient up to `O(ε)` terms; use [`SinkhornSolver::transport_point_gradients`](crate::SinkhornSolver::transport_point_gradients).
//!
//! **Sinkhorn divergence** (Genevay et al. 2018, Feydy et al. 2019, as in GeomLoss):
//! `S_ε(μ, ν) = OT_ε(μ, ν) − ½ OT_ε(μ, μ) − ½ OT_ε(ν, ν)`, which is ≥ 0, zero for identical
//! measures and positive otherwise; with `OT_ε` in the form above or with the entropy
//! relative to `μ⊗ν` (POT's and GeomLoss's `KL(P | μ⊗ν)`), the difference
//! (`ε⟨μ, log μ⟩ + ε⟨ν, log ν⟩` and the total masses) cancels in `S_ε`.
//!
//! **Unbalanced Sinkhorn divergence** (Séjourné et al. 2019, GeomLoss's `reach`): with one
//! penalty `ρ` on both marginals ([`Relaxation::kl`](crate::Relaxation::kl)) and `OT_ε` the
//! unbalanced dual `D`,
//!
//! `S_ε(μ, ν) = D(μ, ν) − ½ D(μ, μ) − ½ D(ν, ν) + (ε/2)(Σμ − Σν)²`,
//!
//! which at the optimal potentials equals GeomLoss's
//! `⟨μ, (ρ + ε/2)(e^{−f̂_μμ/ρ} − e^{−f̂_μν/ρ})⟩ + ⟨ν, (ρ + ε/2)(e^{−ĝ_νν/ρ} − e^{−ĝ_μν/ρ})⟩`
//! (relative potentials `f̂ = f − ε log μ`): the `ρΣμ` terms of the three duals cancel, and
//! the last term cancels their `ε Σμ Σν` parts. It is 0 for `μ = ν` and > 0 otherwise,
//! also for unequal masses; its point gradients are those of the three `D` (`∂D/∂C = P`).
//! Unequal penalties (`ρ_μ ≠ ρ_ν`) and the linear convention are refused. GeomLoss's
//! `SamplesLoss("sinkhorn", p=2, blur=σ, reach=r)` uses the cost `|x − y|²/2`, `ε = σ²` and
//! `ρ = r²`; by homogeneity logot's value for `|x − y|²` with `ε = 2σ²`, `ρ = 2r²` is twice
//! GeomLoss's.

//!
//! The point gradients are in `point_gradients.rs`, the divergence in `divergence.rs`.

pub use super::divergence::{
    sinkhorn_divergence, DivergenceBufferResult, DivergenceConvention, DivergenceResult,
    PreparedDivergence,
};
pub use super::point_gradients::{PointGradients, PointTransportGradients};

use crate::backend::PointCloudCost;
use crate::entropic::sinkhorn::EpsScaling;
use crate::Real;

// Defined here, above the backends, where the solver's ε schedules live.
impl<T: Real> PointCloudCost<'_, T> {
    /// ε-scaling that anneals from the clouds' largest cost ([`PointCloudCost::max_cost`],
    /// the squared diameter for the squared Euclidean cost) down to the target ε:
    /// [`EpsScaling::from_max_cost`].
    ///
    /// ```
    /// use logot::{CpuBackend, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::{Array1, Array2};
    /// // A 5×5 grid and its translate by (0.1, 0.1), ε = 1e-3 after annealing from the
    /// // squared diameter: the entropic cost is within O(ε) above the exact W₂² = 0.02.
    /// let x = Array2::from_shape_fn((25, 2), |(i, k)| if k == 0 { (i % 5) as f64 } else { (i / 5) as f64 } * 0.25);
    /// let y = &x + 0.1;
    /// let w = Array1::from_elem(25, 0.04);
    /// let cost = PointCloudCost::new(x.view(), y.view())?;
    /// let params = SinkhornParams::new(1e-3).eps_scaling(cost.eps_scaling());
    /// let r = SinkhornSolver::new(CpuBackend, params).solve(&Problem::new(w.view(), w.view(), cost)?)?;
    /// assert!(r.convergence.converged, "{:?}", r.convergence);
    /// assert!(r.distance[0] >= 0.02 - 1e-9 && r.distance[0] < 0.02 + 3e-3, "{}", r.distance[0]);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn eps_scaling(&self) -> EpsScaling {
        EpsScaling::from_max_cost(self.max_cost())
    }
}
