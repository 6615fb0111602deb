//! Gradients of entropic OT between point clouds with respect to the points: of `OT_ε`
//! by the envelope theorem ([`SinkhornSolver::point_gradients`]), and of the transport cost `⟨P, C⟩`
//! by implicit differentiation through the plan ([`SinkhornSolver::transport_point_gradients`]); see
//! [`crate::pointcloud`] for the objective and the formulas.

use crate::backend::{grad::GradKernels, Backend, CostSource, PointCloudKernels, Side};
use crate::cg::{CgParams, CgReport};
use crate::entropic::dual_system::{solve_adjoint_with, PlanMatvec};
use crate::entropic::sinkhorn::{
    PreparedProblem, Problem, SinkhornResult, SinkhornSolver, Solution,
};
use crate::entropic::unbalanced::{dual_side, phi};
use crate::{Error, Real, Result};
use ndarray::{Array1, Array3, ArrayView1};

/// A solved batch of point-cloud problems with `OT_ε` and its gradients with respect to
/// the points (see the module docs for the objective).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PointGradients<T> {
    /// Potentials, transport costs `⟨P, C⟩` and convergence.
    pub result: SinkhornResult<T>,
    /// `OT_ε = ⟨f, μ⟩ + ⟨g, ν⟩ − ε Σ P` of each problem (unbalanced: the dual `D`, see the
    /// module docs).
    pub value: Array1<T>,
    /// `∂OT_ε/∂X`, `B×n×d`.
    pub x: Array3<T>,
    /// `∂OT_ε/∂Y`, `B×m×d`.
    pub y: Array3<T>,
}

/// The potentials, `OT_ε` and point gradients of a solved point-cloud batch, on the backend.
pub(crate) struct PointParts<T: Real, Bk: Backend<T>> {
    pub(crate) f: Bk::Buffer,
    pub(crate) g: Bk::Buffer,
    pub(crate) solution: Solution,
    pub(crate) value: Vec<f64>,
    pub(crate) gx: Bk::Buffer,
    pub(crate) gy: Bk::Buffer,
}

/// A solved batch of point-cloud problems with the transport costs `⟨P, C⟩` and their
/// exact gradients with respect to the points (implicit differentiation through the plan;
/// see the module docs).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PointTransportGradients<T> {
    /// Potentials, transport costs and Sinkhorn convergence.
    pub result: SinkhornResult<T>,
    /// `⟨P, C⟩` of each problem (the same numbers as `result.distance`).
    pub value: Array1<T>,
    /// `∂⟨P,C⟩/∂X`, `B×n×d`.
    pub x: Array3<T>,
    /// `∂⟨P,C⟩/∂Y`, `B×m×d`.
    pub y: Array3<T>,
    /// How the adjoint CG solve ended.
    pub cg: CgReport,
}

/// The plans `exp((f ⊕ g − C)/ε)` of a point-cloud cost applied on the fly.
struct CloudPlan<'a, T: Real, B: PointCloudKernels<T>> {
    cost: &'a B::Cost,
    f: &'a B::Buffer,
    g: &'a B::Buffer,
    eps: T,
}

impl<T: Real, B: PointCloudKernels<T> + GradKernels<T>> PlanMatvec<T, B> for CloudPlan<'_, T, B> {
    fn matvec(&self, be: &B, x: &B::Buffer, y: &mut B::Buffer) -> Result<()> {
        *y = be.plan_apply(self.cost, Side::Row, self.f, self.g, self.eps, x, 1)?;
        Ok(())
    }
    fn matvec_t(&self, be: &B, x: &B::Buffer, y: &mut B::Buffer) -> Result<()> {
        *y = be.plan_apply(self.cost, Side::Col, self.f, self.g, self.eps, x, 1)?;
        Ok(())
    }
}

/// Row `k` of `len` entries of a flat batch.
pub(super) fn row<T>(a: &[T], k: usize, len: usize) -> ArrayView1<'_, T> {
    ArrayView1::from(&a[k * len..(k + 1) * len])
}

pub(super) fn array3<T>(shape: (usize, usize, usize), v: Vec<T>) -> Result<Array3<T>> {
    Array3::from_shape_vec(shape, v).map_err(|e| Error::Numerical(e.to_string()))
}

/// `Σ_k w[b,k]·p[b,k]` of each of `batch` problems over the bins of positive weight
/// (zero-mass bins carry −∞ potentials), on the backend: `B` numbers come back.
pub(super) fn support_dot<T: Real, Bk: GradKernels<T>>(
    be: &Bk,
    batch: usize,
    w: &Bk::Buffer,
    p: &Bk::Buffer,
) -> Result<Vec<f64>> {
    let zeros = be.filled(be.len(p), T::zero())?;
    let mut q = be.filled(be.len(p), T::zero())?;
    be.offset_rows(p, &[], &mut q)?;
    be.where_empty(w, &zeros, &mut q)?;
    be.batched_dot(batch, w, &q)
}

impl<Bk> SinkhornSolver<Bk> {
    /// Solve a batch of point-cloud problems and return `OT_ε` with its gradients with
    /// respect to both clouds, `∂OT_ε/∂x_i = Σ_j P_ij ∇_x c(x_i, y_j)` (envelope theorem;
    /// see the module docs), with `P` applied on the fly. The cost must be a
    /// [`CostSource::PointCloud`]. With a relaxation, `OT_ε` is the unbalanced objective.
    ///
    /// ```
    /// use logot::{CpuBackend, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::{array, Axis};
    /// let x = array![[0.0f64, 0.0], [1.0, 0.0]];
    /// let y = array![[0.0, 1.0], [1.0, 1.0]];
    /// let w = array![[0.5, 0.5]];
    /// let problem = Problem::new(w.view(), w.view(), PointCloudCost::new(x.view(), y.view())?)?;
    /// let g = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.01)).point_gradients(&problem)?;
    /// // Each x_i is pulled straight up towards the y_j above it: 2·μ_i·(x_i − y_i).
    /// assert!((g.x[[0, 0, 1]] - (-1.0)).abs() < 1e-6 && g.x[[0, 0, 0]].abs() < 1e-6);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn point_gradients<T: Real>(&self, problem: &Problem<'_, T>) -> Result<PointGradients<T>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let CostSource::PointCloud(cloud) = problem.cost() else {
            return Err(Error::shape(
                "cost",
                "gradients with respect to points need a point-cloud cost (CostSource::PointCloud)",
            ));
        };
        let (n, m, d) = (cloud.n(), cloud.m(), cloud.dim());
        let prepared = self.prepare(problem)?;
        let s = self.point_parts(&prepared)?;
        let be = self.backend();
        let result = self.finish_parts(
            prepared.dims(),
            &s.f,
            &s.g,
            prepared.shifts(),
            &s.solution.convergence,
            &s.solution.distance,
            s.solution.objective.as_deref(),
        )?;
        let batch = problem.batch_size();
        let x = array3((batch, n, d), be.download(&s.gx)?)?;
        let y = array3((batch, m, d), be.download(&s.gy)?)?;
        Ok(PointGradients {
            result,
            value: s.value.iter().map(|&v| T::of(v)).collect(),
            x,
            y,
        })
    }

    /// Sinkhorn on a prepared point-cloud batch, then `OT_ε` of each problem and the point
    /// gradients on the backend (the one computation behind [`SinkhornSolver::point_gradients`]
    /// and the point gradients of [`SinkhornSolver::solve_prepared`]).
    pub(crate) fn point_parts<T: Real>(
        &self,
        prepared: &PreparedProblem<T, Bk>,
    ) -> Result<PointParts<T, Bk>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let (f, g, solution) = self.iterate_prepared(prepared)?;
        self.check_distances::<T>(&solution.distance)?;
        let be = self.backend();
        let eps = self.params().eps;
        let (batch, n, m) = prepared.dims();
        let cost = prepared.cost();
        let (mass, gx) = be.point_gradient(cost, Side::Row, &f, &g, T::of(eps))?;
        let (_, gy) = be.point_gradient(cost, Side::Col, &f, &g, T::of(eps))?;
        // Σ_i P_ij per problem (f64), then ⟨f, μ⟩ + ⟨g, ν⟩ over the bins of positive mass
        // (zero-mass bins carry −∞ potentials), on the backend: B numbers each.
        let total: Vec<f64> = be.row_stats(&mass, batch)?.iter().map(|s| s.sum).collect();
        let value: Vec<f64> = match prepared.relaxation {
            None => {
                let (fa, gb) = (
                    support_dot(be, batch, prepared.mu(), &f)?,
                    support_dot(be, batch, prepared.nu(), &g)?,
                );
                (0..batch)
                    .map(|k| T::of(fa[k] + gb[k] - eps * total[k]).f64())
                    .collect()
            }
            Some(r) => {
                // The unbalanced dual (crate::unbalanced::dual_side) from the host.
                let (fh, gh) = (be.download(&f)?, be.download(&g)?);
                let (mus, nus) = (be.download(prepared.mu())?, be.download(prepared.nu())?);
                let side = |w: ArrayView1<'_, T>, pot: ArrayView1<'_, T>, rho: f64| -> f64 {
                    let (w, pot): (Vec<T>, Vec<T>) = (w.to_vec(), pot.to_vec());
                    dual_side(&w, &pot, &vec![0.0; w.len()], None, 0.0, eps, rho).0
                };
                (0..batch)
                    .map(|k| {
                        let (mu, nu) = (row(&mus, k, n), row(&nus, k, m));
                        let (mu_mass, nu_mass) = (
                            mu.iter().map(|v| v.f64()).sum::<f64>(),
                            nu.iter().map(|v| v.f64()).sum::<f64>(),
                        );
                        let d = side(mu, row(&fh, k, n), r.rho_mu)
                            + side(nu, row(&gh, k, m), r.rho_nu)
                            - eps * (total[k] - mu_mass * nu_mass);
                        T::of(d).f64()
                    })
                    .collect()
            }
        };
        if let Some(k) = value.iter().position(|v| !v.is_finite()) {
            return Err(Error::Numerical(format!(
                "OT_ε of problem {k} is {} (eps = {eps} may be too small for {})",
                T::of(value[k]),
                T::NAME
            )));
        }
        Ok(PointParts {
            f,
            g,
            solution,
            value,
            gx,
            gy,
        })
    }

    /// Solve a batch of point-cloud problems and return the transport costs `⟨P, C⟩` with
    /// their exact gradients with respect to both clouds,
    /// `∂⟨P,C⟩/∂x_i = Σ_j P_ij (1 + (a_i + b_j − C_ij)/ε) ∇_x c(x_i, y_j)` with the adjoint
    /// `(a, b)` of the upstream `C` (implicit differentiation, balanced or unbalanced; see the
    /// module docs), never storing an `n×m` array. The cost must be a
    /// [`CostSource::PointCloud`]. The gradients are exact for a converged plan and adjoint:
    /// check `result.convergence` and `cg`.
    ///
    /// ```
    /// use logot::{grad::CgParams, CpuBackend, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::array;
    /// let x = array![[0.0f64, 0.0], [1.0, 0.0], [0.3, 0.8]];
    /// let y = array![[0.1, 0.9], [1.2, 0.4]];
    /// let (mu, nu) = (array![[0.3, 0.3, 0.4]], array![[0.5, 0.5]]);
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1).tol(1e-13));
    /// let cost = |x: &logot::ndarray::Array2<f64>| -> logot::Result<f64> {
    ///     let problem = Problem::new(mu.view(), nu.view(), PointCloudCost::new(x.view(), y.view())?)?;
    ///     Ok(solver.solve(&problem)?.distance[0])
    /// };
    /// let problem = Problem::new(mu.view(), nu.view(), PointCloudCost::new(x.view(), y.view())?)?;
    /// let g = solver.transport_point_gradients(&problem, &CgParams::default())?;
    /// assert!(g.cg.all_converged());
    /// // ∂⟨P,C⟩/∂x_21 against a central difference of re-solved transport costs.
    /// let h = 1e-5;
    /// let (mut up, mut down) = (x.clone(), x.clone());
    /// up[[2, 1]] += h;
    /// down[[2, 1]] -= h;
    /// let numeric = (cost(&up)? - cost(&down)?) / (2.0 * h);
    /// assert!((numeric - g.x[[0, 2, 1]]).abs() < 1e-7, "{numeric} vs {}", g.x[[0, 2, 1]]);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn transport_point_gradients<T: Real>(
        &self,
        problem: &Problem<'_, T>,
        cg: &CgParams,
    ) -> Result<PointTransportGradients<T>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        cg.validate()?;
        let CostSource::PointCloud(cloud) = problem.cost() else {
            return Err(Error::shape(
                "cost",
                "gradients with respect to points need a point-cloud cost (CostSource::PointCloud)",
            ));
        };
        let (n, m, d) = (cloud.n(), cloud.m(), cloud.dim());
        let batch = problem.batch_size();
        let eps_f = self.params().eps;
        let phis = problem
            .unbalanced()?
            .map(|r| (phi(r.rho_mu, eps_f), phi(r.rho_nu, eps_f)));
        let s = self.run(problem)?;
        let result = self.finish(problem, &s)?;
        let be = self.backend();
        let eps = T::of(eps_f);
        let (row_mass, row_cost) = be.cost_marginals(&s.cost, Side::Row, &s.f, &s.g, eps)?;
        let (col_mass, col_cost) = be.cost_marginals(&s.cost, Side::Col, &s.f, &s.g, eps)?;
        let plan = CloudPlan::<T, Bk> {
            cost: &s.cost,
            f: &s.f,
            g: &s.g,
            eps,
        };
        let adj = solve_adjoint_with(
            be,
            &plan,
            (batch, n, m),
            (row_mass, col_mass),
            &(row_cost, col_cost),
            phis,
            cg,
        )?;
        let grad = |side| {
            be.adjoint_point_gradient(&s.cost, side, &s.f, &s.g, eps, &adj.a, &adj.b, T::one())
        };
        let gx = be.download(&grad(Side::Row)?)?;
        let gy = be.download(&grad(Side::Col)?)?;
        for (what, v) in [("x", &gx), ("y", &gy)] {
            if let Some(k) = v.iter().position(|v| !v.is_finite()) {
                return Err(Error::Numerical(format!(
                    "the gradient of ⟨P, C⟩ with respect to {what} has a non-finite entry {} at flat index {k} \
                     (eps = {eps_f} may be too small for {})",
                    v[k],
                    T::NAME
                )));
            }
        }
        Ok(PointTransportGradients {
            value: result.distance.clone(),
            x: array3((batch, n, d), gx)?,
            y: array3((batch, m, d), gy)?,
            result,
            cg: adj.cg,
        })
    }
}

/// `OT_ε` of a dense problem for tests: `⟨f, μ⟩ + ⟨g, ν⟩ − ε Σ P` from a dense plan.
#[cfg(test)]
fn dense_value(r: &SinkhornResult<f64>, mu: &[f64], nu: &[f64], plan_mass: f64) -> f64 {
    let f: f64 =
        r.f.iter()
            .zip(mu)
            .filter(|(_, &w)| w > 0.0)
            .map(|(p, w)| p * w)
            .sum();
    let g: f64 =
        r.g.iter()
            .zip(nu)
            .filter(|(_, &w)| w > 0.0)
            .map(|(p, w)| p * w)
            .sum();
    f + g - r.eps * plan_mass
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::PointCloudCost;
    use crate::entropic::sinkhorn::SinkhornParams;
    use crate::CpuBackend;
    use ndarray::array;

    #[test]
    fn value_matches_the_dense_plan() {
        let x = array![[0.0f64, 0.1], [0.4, 0.9], [1.0, 0.2]];
        let y = array![[0.3f64, 0.3], [0.8, 0.7]];
        let (mu, nu) = (array![[0.2, 0.5, 0.3]], array![[0.6, 0.4]]);
        let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
        let dense = cost.to_dense();
        let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05));
        let pg = solver
            .point_gradients(&Problem::new(mu.view(), nu.view(), cost).unwrap())
            .unwrap();
        let cpl = solver
            .coupling(&Problem::new(mu.view(), nu.view(), dense.view()).unwrap())
            .unwrap();
        let want = dense_value(
            &cpl.result,
            mu.as_slice().unwrap(),
            nu.as_slice().unwrap(),
            cpl.plan.sum(),
        );
        assert!(
            (pg.value[0] - want).abs() < 1e-12,
            "{} vs {want}",
            pg.value[0]
        );
    }
}
