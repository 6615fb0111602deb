//! The linear system of the entropic dual's Hessian at a plan `P` with marginals
//! `r = P·1`, `c = Pᵀ·1`:
//!
//! `[[diag(r), P], [Pᵀ, diag(c)]]·(a, b) = (s_r, s_c)`,
//!
//! solved matrix-free by the batched CG on its Schur complement in `b`,
//! `(diag(c) − Pᵀ·diag(1/r)·P)·b = s_c − Pᵀ·diag(1/r)·s_r`, then `a = diag(1/r)·(s_r − P·b)`.
//! The implicit gradients solve it for their adjoint potentials
//! ([`gradients`](super::gradients)), the Newton finish of Sinkhorn for its step
//! ([`sinkhorn`](super::sinkhorn)); plans are stored on the backend or applied on the fly
//! from a point-cloud cost.

use crate::backend::grad::{BackendSpace, GradKernels};
use crate::cg::{conjugate_gradient, CgOperator, CgOutcome, CgParams, CgReport};
use crate::{Real, Result};

/// The solution `(a, b)` of the system for a batch of plans (the adjoint potentials of
/// the gradients), on the backend.
pub(crate) struct Adjoint<Buf> {
    /// `B×n`; zero on empty rows; not centred.
    pub a: Buf,
    /// `B×m`; zero on empty columns.
    pub b: Buf,
    /// How CG ended for each problem.
    pub cg: CgReport,
}

/// A batch of plans (`B×n×m`) as the adjoint solve sees them: `P·x` and `Pᵀ·u`, however
/// the plan is held (stored, or applied on the fly from a point-cloud cost).
pub(crate) trait PlanMatvec<T: Real, B: GradKernels<T>> {
    /// `y_b = P_b·x_b` (`x` `B×m`, `y` `B×n`).
    fn matvec(&self, be: &B, x: &B::Buffer, y: &mut B::Buffer) -> Result<()>;
    /// `y_b = P_bᵀ·x_b` (`x` `B×n`, `y` `B×m`).
    fn matvec_t(&self, be: &B, x: &B::Buffer, y: &mut B::Buffer) -> Result<()>;
}

/// Plans stored `B×n×m` on the backend.
pub(crate) struct StoredPlan<'a, Buf> {
    pub(crate) plan: &'a Buf,
    pub(crate) n: usize,
    pub(crate) m: usize,
}

impl<T: Real, B: GradKernels<T>> PlanMatvec<T, B> for StoredPlan<'_, B::Buffer> {
    fn matvec(&self, be: &B, x: &B::Buffer, y: &mut B::Buffer) -> Result<()> {
        be.plan_matvec(self.plan, self.n, self.m, x, y)
    }
    fn matvec_t(&self, be: &B, x: &B::Buffer, y: &mut B::Buffer) -> Result<()> {
        be.plan_matvec_t(self.plan, self.n, self.m, x, y)
    }
}

/// The Schur operator `b ↦ diag(c)·b − Pᵀ diag(1/r) P·b`, matrix-free.
struct SchurOperator<'a, T: Real, B: GradKernels<T>, P> {
    plan: &'a P,
    col_mass: &'a B::Buffer,
    inv_row_mass: &'a B::Buffer,
    tmp: B::Buffer,
    tmp2: B::Buffer,
}

impl<'s, T: Real, B: GradKernels<T>, P: PlanMatvec<T, B>> CgOperator<BackendSpace<'s, T, B>>
    for SchurOperator<'_, T, B, P>
{
    fn apply(
        &mut self,
        space: &BackendSpace<'s, T, B>,
        x: &B::Buffer,
        y: &mut B::Buffer,
    ) -> Result<()> {
        let be = space.backend();
        self.plan.matvec(be, x, &mut self.tmp)?;
        be.hadamard(self.inv_row_mass, &self.tmp, T::zero(), &mut self.tmp2)?;
        self.plan.matvec_t(be, &self.tmp2, y)?;
        be.hadamard(self.col_mass, x, -T::one(), y)
    }
}

/// The system `[[diag(r), P], [Pᵀ, diag(c)]]·(a, b) = (s_r, s_c)` of `batch` plans given by
/// their mat-vecs `plan` and their marginals `masses = (r, c) = (P·1, Pᵀ·1)`, for the
/// right-hand sides `sums = (s_r, s_c)` (`B×n`, `B×m` each), by matrix-free CG on the Schur
/// complement in `b`: balanced (`relaxed = None`: singular along `(1, −1)`, solved in the
/// representative orthogonal to the support) or with the diagonal blocks divided by
/// `(φ_μ, φ_ν)` (unbalanced: positive definite).
pub(crate) fn solve_adjoint_with<T: Real, B: GradKernels<T>, P: PlanMatvec<T, B>>(
    be: &B,
    plan: &P,
    (batch, n, m): (usize, usize, usize),
    (mut row_mass, mut col_mass): (B::Buffer, B::Buffer),
    (sr, sc): &(B::Buffer, B::Buffer),
    relaxed: Option<(f64, f64)>,
    cg: &CgParams,
) -> Result<Adjoint<B::Buffer>> {
    cg.validate()?;
    // Unbalanced: the diagonal blocks diag(P·1)/φ_μ and diag(Pᵀ·1)/φ_ν.
    let support = match relaxed {
        None => Some(be.support(&col_mass)?),
        Some((phi_mu, phi_nu)) => {
            for (mass, phi) in [(&mut row_mass, phi_mu), (&mut col_mass, phi_nu)] {
                let mut scaled = be.filled(be.len(mass), T::zero())?;
                be.batched_axpy(&vec![1.0 / phi; batch], mass, &mut scaled)?;
                *mass = scaled;
            }
            None
        }
    };
    let inv_row_mass = be.recip_or_zero(&row_mass)?;
    let minus_one = vec![-1.0; batch];
    // rhs = s_c − Pᵀ diag(1/r) s_r
    let mut t = be.filled(batch * n, T::zero())?;
    be.hadamard(&inv_row_mass, sr, T::zero(), &mut t)?;
    let mut rhs = be.filled(batch * m, T::zero())?;
    plan.matvec_t(be, &t, &mut rhs)?;
    be.batched_xpby(sc, &minus_one, &mut rhs)?;
    let space = BackendSpace::new(be, batch, m);
    let mut op = SchurOperator::<T, B, P> {
        plan,
        col_mass: &col_mass,
        inv_row_mass: &inv_row_mass,
        tmp: be.filled(batch * n, T::zero())?,
        tmp2: be.filled(batch * n, T::zero())?,
    };
    let mut outcomes = vec![CgOutcome::default(); batch];
    let tol = cg.effective_tol::<T>();
    let b = conjugate_gradient(
        &space,
        &mut op,
        &rhs,
        support.as_ref(),
        tol,
        cg.max_iters,
        &mut outcomes,
    )?;
    // a = diag(1/r)(s_r − P b)
    plan.matvec(be, &b, &mut t)?;
    be.batched_xpby(sr, &minus_one, &mut t)?;
    let mut a = be.filled(batch * n, T::zero())?;
    be.hadamard(&inv_row_mass, &t, T::zero(), &mut a)?;
    Ok(Adjoint {
        a,
        b,
        cg: CgReport {
            problems: outcomes,
            tol,
        },
    })
}
