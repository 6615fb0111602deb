//! The adjoint solve of the implicit gradients (see the parent module's docs): the system
//! of [`dual_system`](crate::entropic::dual_system) for plans stored on the backend and the
//! right-hand side of an upstream gradient.

use super::Adjoint;
use crate::backend::grad::GradKernels;
use crate::cg::CgParams;
use crate::entropic::dual_system::{solve_adjoint_with, StoredPlan};
use crate::{Error, Real, Result};

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
