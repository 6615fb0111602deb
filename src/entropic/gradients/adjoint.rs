//! The adjoint solve of the implicit gradients (see the parent module's docs): the Schur
//! system in `b`, matrix-free, by the batched CG on the backend, for plans stored on the
//! backend or applied on the fly.

use super::Adjoint;
use crate::backend::grad::{BackendSpace, GradKernels};
use crate::cg::{conjugate_gradient, CgOperator, CgOutcome, CgParams, CgReport};
use crate::{Error, Real, Result};

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

/// The adjoint system of `batch` plans (`B×n×m` on the backend) for the upstream gradient
/// `upstream` (`B` matrices or one shared `n×m`), by matrix-free CG on the Schur complement
/// (see the module docs; only `B` dot products per CG step come back to the host): balanced
/// (`relaxed = None`: singular along
/// `(1, −1)`, solved in the representative orthogonal to the support) or with the diagonal
/// blocks divided by `(φ_μ, φ_ν)` (unbalanced, see the module docs: positive definite, no
/// null space).
pub(super) fn solve_adjoint<T: Real, B: GradKernels<T>>(
    be: &B,
    plan: &B::Buffer,
    (batch, n, m): (usize, usize, usize),
    upstream: &B::Buffer,
    relaxed: Option<(f64, f64)>,
    cg: &CgParams,
) -> Result<Adjoint<B::Buffer>> {
    cg.validate()?;
    if be.len(plan) != batch * n * m || batch == 0 || n == 0 || m == 0 {
        return Err(Error::shape(
            "plan",
            format!("has length {} but {batch}×{n}×{m} is needed", be.len(plan)),
        ));
    }
    let masses = be.weighted_marginals(plan, n, m, None)?;
    let sums = be.weighted_marginals(plan, n, m, Some(upstream))?;
    let ops = StoredPlan { plan, n, m };
    solve_adjoint_with(be, &ops, (batch, n, m), masses, &sums, relaxed, cg)
}

/// The adjoint solve of [`solve_adjoint`] for plans given by their mat-vecs `plan`, their
/// marginals `masses = (P·1, Pᵀ·1)` and the right-hand side `sums = ((G⊙P)·1, (G⊙P)ᵀ·1)`
/// (`B×n`, `B×m` each).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, CpuBackend};

    /// Any positive matrix is the plan of its own marginals. G = 1 (L = ΣP, the mass) is
    /// explained entirely by the potentials: a_i + b_j = 1 for every pair.
    #[test]
    fn the_mass_is_carried_by_the_potentials() {
        let be = CpuBackend;
        let plan = be.upload(&[0.3f64, 0.1, 0.05, 0.15, 0.25, 0.15]).unwrap(); // 1×2×3
        let ones = be.upload(&[1.0; 6]).unwrap();
        let adj = solve_adjoint(&be, &plan, (1, 2, 3), &ones, None, &CgParams::default()).unwrap();
        let (a, b) = (be.download(&adj.a).unwrap(), be.download(&adj.b).unwrap());
        assert!(adj.cg.all_converged());
        assert!(a
            .iter()
            .all(|ai| b.iter().all(|bj| (ai + bj - 1.0).abs() < 1e-9)));
    }
}
