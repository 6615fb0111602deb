//! A Sinkhorn solver whose every problem is relaxed by one [`Relaxation`]: the unbalanced
//! tests state the relaxation once, as they state the solver's parameters.

use logot::grad::{CgParams, EnvelopeGradients, OtGradients};
use logot::{
    Backend, CouplingResult, GradKernels, PointCloudKernels, PointGradients,
    PointTransportGradients, Problem, Real, Relaxation, Result, SinkhornResult, SinkhornSolver,
};
use ndarray::Array3;

/// [`SinkhornSolver`]'s calls on `problem.relaxed(rho)` (on `problem` itself when `rho` is
/// `None`).
pub struct Relaxed<B> {
    pub solver: SinkhornSolver<B>,
    pub rho: Option<Relaxation>,
}

impl<B> Relaxed<B> {
    pub fn new(solver: SinkhornSolver<B>, rho: impl Into<Relaxation>) -> Self {
        Relaxed {
            solver,
            rho: Some(rho.into()),
        }
    }
    /// Relaxed by `rho` when it is given, balanced otherwise.
    pub fn or_balanced(solver: SinkhornSolver<B>, rho: Option<Relaxation>) -> Self {
        Relaxed { solver, rho }
    }
    pub fn relaxed<'a, T: Real>(&self, p: &Problem<'a, T>) -> Problem<'a, T> {
        match self.rho {
            Some(r) => p.clone().relaxed(r),
            None => p.clone(),
        }
    }
    pub fn solve<T: Real>(&self, p: &Problem<'_, T>) -> Result<SinkhornResult<T>>
    where
        B: Backend<T>,
    {
        self.solver.solve(&self.relaxed(p))
    }
    pub fn coupling<T: Real>(&self, p: &Problem<'_, T>) -> Result<CouplingResult<T>>
    where
        B: Backend<T>,
    {
        self.solver.coupling(&self.relaxed(p))
    }
    pub fn wasserstein_gradients<T: Real>(
        &self,
        p: &Problem<'_, T>,
        cg: &CgParams,
    ) -> Result<OtGradients<T>>
    where
        B: GradKernels<T>,
    {
        self.solver.wasserstein_gradients(&self.relaxed(p), cg)
    }
    pub fn implicit_gradients<T: Real>(
        &self,
        p: &Problem<'_, T>,
        upstream: impl FnOnce(&CouplingResult<T>) -> Array3<T>,
        cg: &CgParams,
    ) -> Result<OtGradients<T>>
    where
        B: GradKernels<T>,
    {
        self.solver
            .implicit_gradients(&self.relaxed(p), upstream, cg)
    }
    pub fn envelope_gradients<T: Real>(&self, p: &Problem<'_, T>) -> Result<EnvelopeGradients<T>>
    where
        B: Backend<T>,
    {
        self.solver.envelope_gradients(&self.relaxed(p))
    }
    pub fn point_gradients<T: Real>(&self, p: &Problem<'_, T>) -> Result<PointGradients<T>>
    where
        B: PointCloudKernels<T> + GradKernels<T>,
    {
        self.solver.point_gradients(&self.relaxed(p))
    }
    pub fn transport_point_gradients<T: Real>(
        &self,
        p: &Problem<'_, T>,
        cg: &CgParams,
    ) -> Result<PointTransportGradients<T>>
    where
        B: PointCloudKernels<T> + GradKernels<T>,
    {
        self.solver.transport_point_gradients(&self.relaxed(p), cg)
    }
}
