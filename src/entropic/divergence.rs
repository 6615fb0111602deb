//! The Sinkhorn divergence between point clouds, `S_ε(μ, ν) = OT_ε(μ, ν) − ½ OT_ε(μ, μ)
//! − ½ OT_ε(ν, ν)`, and its gradients with respect to the points; see [`crate::pointcloud`]
//! for the objective and the unbalanced form.

use super::point_gradients::support_dot;
use crate::backend::{
    grad::GradKernels, Backend, CloudLayout, CostSource, PointCloudCost, PointCloudKernels, Side,
};
use crate::entropic::sinkhorn::{
    relax_side, unbalanced, BufferCost, BufferProblem, Convergence, PreparedProblem, Problem,
    ProblemInput, SinkhornParams, SinkhornSolver,
};
use crate::entropic::unbalanced::{dual_side, Relaxation};
use crate::{BufferOutputs, CpuBackend, Error, Real, Result};
use ndarray::{Array1, Array2, Array3, ArrayView1, ArrayView2};

/// Which transport value the Sinkhorn divergence debiases.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DivergenceConvention {
    /// The regularised objective `OT_ε` (see the module docs), as GeomLoss's
    /// `SamplesLoss("sinkhorn")` and Feydy et al. (2019): `S_ε ≥ 0`, zero only for equal
    /// measures, with gradients with respect to the points (envelope theorem).
    #[default]
    Objective,
    /// The transport costs `⟨P, C⟩` of the three plans, as POT's
    /// `empirical_sinkhorn_divergence` (which combines `sinkhorn2` values): a different
    /// number (on the same clouds 1.83853 against the objective's 1.85672), not always
    /// ≥ 0 at large ε; its value only (no point gradients: `grad_x`, `grad_y` are `None`).
    Linear,
}

/// The Sinkhorn divergences of a batch of pairs of weighted point clouds and their
/// gradients with respect to the points (see the module docs).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DivergenceResult<T> {
    /// `S_ε(μ, ν) = V(μ, ν) − ½ V(μ, μ) − ½ V(ν, ν)` of each problem, with `V` the
    /// convention's value (unbalanced: `+ (ε/2)(Σμ − Σν)²`, see the module docs).
    pub value: Array1<T>,
    /// `∂S_ε/∂X`, `B×n×d` ([`DivergenceConvention::Objective`] only).
    pub grad_x: Option<Array3<T>>,
    /// `∂S_ε/∂Y`, `B×m×d` ([`DivergenceConvention::Objective`] only).
    pub grad_y: Option<Array3<T>>,
    /// `V(μ, ν)`, `V(μ, μ)`, `V(ν, ν)` of each problem, `B×3`. In the objective convention
    /// they may be negative (the self-terms most often): `OT_ε`'s entropy is relative to
    /// the counting measure, `ε⟨μ, log μ⟩ + ε⟨ν, log ν⟩ − ε Σ P` below the `KL(P | μ⊗ν)`
    /// form (`≥ 0`), a shift that cancels in `S_ε` ([`crate::pointcloud`]).
    pub terms: Array2<T>,
    /// The convention of `value` and `terms`.
    pub convention: DivergenceConvention,
    /// How each of the three solves ended (in the order of `terms`), one report per problem.
    pub convergence: [Convergence; 3],
}

impl<T> DivergenceResult<T> {
    /// All three solves met their tolerance.
    pub fn converged(&self) -> bool {
        self.convergence.iter().all(|c| c.converged)
    }
}

/// `OT_ε(μ_b, μ_b)` of each cloud of a batch and its gradient with respect to the points, by
/// the symmetric fixed-point iteration `f ← ½(f + T(f))`, `T(f)_i = ε log μ_i − ε LSE_j((f_j
/// − C_ij)/ε)` (GeomLoss's debiasing solver). The problem is symmetric, so its potentials
/// are equal, `f = g`; alternating Sinkhorn updates would also drift along the nearly
/// neutral direction `f − g` (slow when the plan is close to diagonal), which the averaged
/// iteration never leaves.
struct SelfTransport<Buf> {
    /// `OT_ε(μ_b, μ_b)` of each problem (rounded to the precision).
    value: Vec<f64>,
    /// `⟨P_b, C_b⟩` of each symmetric plan (balanced only: the linear convention is not
    /// defined for unbalanced divergences).
    linear: Option<Vec<f64>>,
    /// `½ ∂OT_ε(μ_b, μ_b)/∂X_b` (`B×n×d`), when asked for: `P` is symmetric (`C` is, bit for
    /// bit, and both potentials are `f`), so `x_i`'s gradient is twice the row side's.
    half_grad: Option<Buf>,
    convergence: Convergence,
}

/// The self-transport terms of a batch on the prepared cost `x × x` with the weights `μ`
/// (`B×n`), their logarithms and masses `Σμ_b` (see [`SelfTransport`]).
fn self_transport<T: Real, Bk: PointCloudKernels<T> + GradKernels<T>>(
    solver: &SinkhornSolver<Bk>,
    cost: &Bk::Cost,
    (weights, log_w): (&Bk::Buffer, &Bk::Buffer),
    masses: &[f64],
    with_grad: bool,
    rho: Option<f64>,
) -> Result<SelfTransport<Bk::Buffer>> {
    let p = solver.params();
    let be = solver.backend();
    let batch = masses.len();
    let len = be.len(weights);
    let n = len / batch.max(1);
    let mut f = be.start_potential(weights)?;
    let mut t = be.filled(len, T::zero())?;
    let halves = be.filled(len, T::of(0.5))?;
    // f ← ½(f + T(f)) with the balanced half-step T(f) in `t` (relaxed first when
    // unbalanced, at the stage's ε); leaves the average in `f`.
    let step = |f: &mut Bk::Buffer, t: &mut Bk::Buffer, e: f64| -> Result<()> {
        if let Some(rho) = rho {
            relax_side(be, t, log_w, e, rho)?;
        }
        be.batched_axpy(&[1.0], f, t)?;
        be.hadamard(&halves, t, T::zero(), f)
    };
    let mut iterations = 0;
    if let Some(s) = &p.eps_scaling {
        for e in s.stages_within(p.eps, p.max_iters) {
            for _ in 0..s.iters_per_stage {
                be.sinkstep(cost, Side::Row, T::of(e), &f, log_w, &mut t)?;
                step(&mut f, &mut t, e)?;
                iterations += 1;
            }
        }
    }
    let eps = T::of(p.eps);
    let asked = p.tol.unwrap_or(T::DEFAULT_TOL);
    let tol = if asked > 0.0 { asked } else { T::DEFAULT_TOL };
    // The violation of the optimality condition of each plan exp((f ⊕ f − C)/ε), from f and
    // its balanced half-step, with the mass it is relative to: ‖P·1 − μ‖₁
    // (P·1 = μ·exp((f − T(f))/ε)) against Σμ, or unbalanced the change a relaxed half-step
    // would make to P·1 (RelaxedSide) against the plan's mass Σ P.
    let violation = |f: &Bk::Buffer, t: &Bk::Buffer| -> Result<(Vec<f64>, Vec<f64>)> {
        Ok(match rho {
            None => be
                .marginal_error(batch, weights, f, t, eps)?
                .iter()
                .map(|v| v.f64())
                .zip(masses.iter().copied())
                .unzip(),
            Some(rho) => be
                .relaxed_sides(batch, weights, f, t, eps, rho)?
                .iter()
                .map(|s| (s.residual, s.mass))
                .unzip(),
        })
    };
    // The iteration at which each problem first met its tolerance; the batch stops when all
    // have.
    let mut met: Vec<Option<usize>> = vec![None; batch];
    for it in 0..p.max_iters - iterations {
        be.sinkstep(cost, Side::Row, eps, &f, log_w, &mut t)?;
        if asked > 0.0 && it > 0 && it % p.check_every == 0 {
            let (v, of) = violation(&f, &t)?;
            for ((k, seen), &mass) in met.iter_mut().enumerate().zip(&of) {
                if seen.is_none() && v[k] <= tol * mass {
                    *seen = Some(iterations);
                }
            }
            if met.iter().all(Option::is_some) {
                break;
            }
        }
        step(&mut f, &mut t, p.eps)?;
        iterations += 1;
    }
    let (f, errors, plan_mass, linear) = match rho {
        None => {
            // The report of the plans exp((f ⊕ f − C)/ε) handed back (both marginals are μ;
            // both potentials are f: a device copy, as Potentials owns its buffers).
            let marginals = crate::backend::Marginals {
                mu: weights,
                nu: weights,
                log_mu: log_w,
                log_nu: log_w,
            };
            let mut g = be.filled(len, T::zero())?;
            be.offset_rows(&f, &[], &mut g)?;
            let pot = crate::backend::Potentials { f, g };
            let reports = be.plan_report(cost, &pot, &marginals, eps)?;
            (
                pot.f,
                reports
                    .iter()
                    .map(|r| r.row_error.max(r.col_error))
                    .collect::<Vec<_>>(),
                reports.iter().map(|r| r.mass).collect::<Vec<_>>(),
                Some(
                    reports
                        .iter()
                        .map(|r| T::of(r.cost).f64())
                        .collect::<Vec<_>>(),
                ),
            )
        }
        Some(rho) => {
            // Unbalanced: the residual of the optimality condition (both sides are the same).
            be.sinkstep(cost, Side::Row, eps, &f, log_w, &mut t)?;
            let sides = be.relaxed_sides(batch, weights, &f, &t, eps, rho)?;
            (
                f,
                sides.iter().map(|s| s.residual).collect(),
                sides.iter().map(|s| Some(s.mass)).collect(),
                None,
            )
        }
    };
    let of_problem = |k: usize| {
        if batch > 1 {
            format!(" of problem {k}")
        } else {
            String::new()
        }
    };
    if let Some(k) = errors.iter().position(|e| e.is_nan()) {
        return Err(Error::Numerical(format!(
            "the marginal error of OT_ε(μ, μ){} is NaN (eps = {} may be too small for {})",
            of_problem(k),
            p.eps,
            T::NAME
        )));
    }
    // The mass each error is relative to: Σμ, or unbalanced the plan's own.
    let relative_to: Vec<f64> = match rho {
        None => masses.to_vec(),
        Some(_) => plan_mass
            .iter()
            .zip(masses)
            .map(|(p, &m)| p.unwrap_or(m))
            .collect(),
    };
    let reports = errors
        .iter()
        .zip(&relative_to)
        .zip(&met)
        .map(|((&err, &mass), &seen)| {
            let converged = err <= tol * mass;
            crate::entropic::sinkhorn::ProblemReport {
                marginal_error: err,
                mass,
                mass_gap: 0.0,
                converged,
                iterations: seen.filter(|_| converged).unwrap_or(iterations),
            }
        })
        .collect();
    let convergence = Convergence::of_problems(iterations, tol, reports);
    let (mass, half_grad): (Vec<f64>, _) = if with_grad {
        let (mass, grad) = be.point_gradient(cost, Side::Row, &f, &f, eps)?;
        let mass = be.row_stats(&mass, batch)?.iter().map(|s| s.sum).collect();
        (mass, Some(grad))
    } else {
        let mass = plan_mass
            .iter()
            .zip(masses)
            .map(|(p, &m)| p.unwrap_or(m))
            .collect();
        (mass, None)
    };
    let value: Vec<f64> = match rho {
        None => {
            let fw = support_dot(be, batch, weights, &f)?;
            (0..batch)
                .map(|k| T::of(2.0 * fw[k] - p.eps * mass[k]).f64())
                .collect()
        }
        // D(μ, μ) = 2 Σ μ ψ_ρ(f − ε log μ) − ε (Σ P − (Σμ)²).
        Some(rho) => {
            let (fh, wh) = (be.download(&f)?, be.download(weights)?);
            let zeros = vec![0.0; n];
            (0..batch)
                .map(|k| {
                    let (w, fk) = (&wh[k * n..(k + 1) * n], &fh[k * n..(k + 1) * n]);
                    let sum_psi = dual_side(w, fk, &zeros, None, 0.0, p.eps, rho).0;
                    T::of(2.0 * sum_psi - p.eps * (mass[k] - masses[k] * masses[k])).f64()
                })
                .collect()
        }
    };
    if let Some(k) = value.iter().position(|v| !v.is_finite()) {
        return Err(Error::Numerical(format!(
            "OT_ε(μ, μ){} is {} (eps = {} may be too small for {})",
            of_problem(k),
            value[k],
            p.eps,
            T::NAME
        )));
    }
    Ok(SelfTransport {
        value,
        linear,
        half_grad,
        convergence,
    })
}

/// The three problems of a batch of Sinkhorn divergences prepared on the backend
/// ([`SinkhornSolver::prepare_divergence`]): `(μ, ν)` on `x × y`, and the self-transport
/// costs `x × x` and `y × y` (the same metric and precision).
pub struct PreparedDivergence<T: Real, B: Backend<T>> {
    xy: PreparedProblem<T, B>,
    xx: B::Cost,
    yy: B::Cost,
    /// Coordinates per point.
    d: usize,
}

impl<T: Real, B: Backend<T>> PreparedDivergence<T, B> {
    /// Number of problems, points of `x` and points of `y`.
    pub fn dims(&self) -> (usize, usize, usize) {
        self.xy.dims()
    }
    /// The largest cost between `x` and `y` (the start of [`EpsScaling::from_max_cost`](crate::EpsScaling::from_max_cost)).
    pub fn max_cost(&self) -> f64 {
        self.xy.max_cost()
    }
}

impl<T: Real, B: Backend<T>> std::fmt::Debug for PreparedDivergence<T, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (batch, n, m) = self.dims();
        write!(
            f,
            "PreparedDivergence {{ batch: {batch}, n: {n}, m: {m}, d: {} }}",
            self.d
        )
    }
}

/// What [`SinkhornSolver::sinkhorn_divergence_prepared`] reads back (the point gradients
/// go into the caller's buffers).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DivergenceBufferResult {
    /// `S_ε` of each problem (rounded to the precision).
    pub value: Vec<f64>,
    /// `OT_ε(μ, ν)`, `OT_ε(μ, μ)`, `OT_ε(ν, ν)` of each problem (possibly negative, as
    /// [`DivergenceResult::terms`]).
    pub terms: Vec<[f64; 3]>,
    /// How the three solves of the batch ended (in the order of `terms`).
    pub convergence: [Convergence; 3],
}

/// What [`SinkhornSolver::sinkhorn_divergence`] and
/// [`SinkhornSolver::sinkhorn_divergence_prepared`] compute on the backend.
struct DivergenceParts<Buf> {
    value: Vec<f64>,
    terms: Vec<[f64; 3]>,
    /// `∂S_ε/∂X` and `∂S_ε/∂Y` ([`DivergenceConvention::Objective`]).
    grad: Option<(Buf, Buf)>,
    convergence: [Convergence; 3],
}

/// The reach `ρ` of an unbalanced Sinkhorn divergence (`None`: balanced): one penalty on
/// both marginals, in the objective convention only.
fn divergence_reach(
    relaxation: Option<Relaxation>,
    convention: DivergenceConvention,
) -> Result<Option<f64>> {
    let Some(r) = unbalanced(relaxation)? else {
        return Ok(None);
    };
    if r.rho_mu != r.rho_nu {
        return Err(Error::parameter(
            "relaxation",
            format!("{r:?}"),
            "the unbalanced Sinkhorn divergence needs one penalty ρ on both marginals \
             (Relaxation::kl(ρ), GeomLoss's reach^p): S_ε(μ, μ) = 0 needs a symmetric problem",
        ));
    }
    if convention == DivergenceConvention::Linear {
        return Err(Error::parameter(
            "convention",
            "Linear",
            "the unbalanced Sinkhorn divergence debiases the unbalanced objective \
             (DivergenceConvention::Objective); the transport costs ⟨P, C⟩ of unbalanced \
             plans do not make a divergence",
        ));
    }
    Ok(Some(r.rho_mu))
}

impl<Bk> SinkhornSolver<Bk> {
    /// The Sinkhorn divergences `S_ε(μ_b, ν_b)` of a batch of point-cloud problems (the
    /// cost of `problem` a [`PointCloudCost`], with its metric and cross-term precision; one
    /// pair of clouds per problem or one pair shared) in the given `convention`, with their
    /// gradients with respect to the points ([`DivergenceConvention::Objective`]). Three
    /// problems are solved with this solver's parameters (ε-scaling included): `(μ, ν)` on
    /// `x × y` by Sinkhorn, and the debiasing terms `(μ, μ)` on `x × x` and `(ν, ν)` on
    /// `y × y` (same metric and precision) by the symmetric iteration `f ← ½(f + T(f))`. The
    /// three solves run as batches that stop when every problem has met the tolerance; each
    /// report is per problem.
    ///
    /// A relaxed problem ([`Problem::relaxed`], one `ρ` on both sides) gives the unbalanced
    /// divergence of the module docs (objective convention only): the masses may differ,
    /// and the three solves use the relaxed half-step.
    ///
    /// ```
    /// use logot::{CpuBackend, DivergenceConvention, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::{array, Array1, Array2};
    /// let x = array![[0.0f64, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
    /// let y = &x * 1.5; // a dilation: S_ε > 0, and the gradient pulls x outwards
    /// let a = Array1::from_elem(4, 0.25);
    /// let problem = Problem::new(a.view(), a.view(), PointCloudCost::new(x.view(), y.view())?)?;
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.01));
    /// let s = solver.sinkhorn_divergence(&problem, DivergenceConvention::Objective)?;
    /// assert!(s.converged() && s.value[0] > 0.0);
    /// // ∂S/∂x at (1, 1) points towards −(1, 1)·(positive): moving x towards y lowers S.
    /// let gx = s.grad_x.unwrap();
    /// assert!(gx[[0, 3, 0]] < 0.0 && gx[[0, 3, 1]] < 0.0);
    /// // POT's convention combines the transport costs ⟨P, C⟩ of the same three plans: at a
    /// // large ε the entropy terms make it a different number.
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(1.0));
    /// let obj = solver.sinkhorn_divergence(&problem, DivergenceConvention::Objective)?;
    /// let lin = solver.sinkhorn_divergence(&problem, DivergenceConvention::Linear)?;
    /// assert!(lin.grad_x.is_none() && (lin.value[0] - obj.value[0]).abs() > 1e-3);
    /// let t = lin.terms.row(0);
    /// assert!((lin.value[0] - (t[0] - 0.5 * (t[1] + t[2]))).abs() < 1e-12);
    /// // A batch: equal clouds give S_ε = 0, a translation by t gives S_ε = |t|².
    /// let x = array![[[0.0f64], [1.0]], [[0.0], [1.0]]];
    /// let y = array![[[0.0f64], [1.0]], [[0.5], [1.5]]];
    /// let w = Array2::from_elem((2, 2), 0.5);
    /// let batch = Problem::new(w.view(), w.view(), PointCloudCost::batched(x.view(), y.view())?)?;
    /// let s = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.5))
    ///     .sinkhorn_divergence(&batch, DivergenceConvention::Objective)?;
    /// assert!(s.value[0].abs() < 1e-8 && (s.value[1] - 0.25).abs() < 1e-8, "{}", s.value);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn sinkhorn_divergence<T: Real>(
        &self,
        problem: &Problem<'_, T>,
        convention: DivergenceConvention,
    ) -> Result<DivergenceResult<T>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let be = self.backend();
        let prepared = self.prepare_divergence_with(problem, convention)?;
        let parts = self.divergence_parts(&prepared, convention)?;
        let (batch, n, m) = prepared.dims();
        let d = prepared.d;
        let grads = match &parts.grad {
            Some((gx, gy)) => {
                let array = |v: Vec<T>, rows: usize| {
                    Array3::from_shape_vec((batch, rows, d), v)
                        .map_err(|e| Error::Numerical(e.to_string()))
                };
                Some((array(be.download(gx)?, n)?, array(be.download(gy)?, m)?))
            }
            None => None,
        };
        let (grad_x, grad_y) = grads.unzip();
        let terms = Array2::from_shape_fn((batch, 3), |(k, i)| T::of(parts.terms[k][i]));
        Ok(DivergenceResult {
            value: parts.value.iter().map(|&v| T::of(v)).collect(),
            grad_x,
            grad_y,
            terms,
            convention,
            convergence: parts.convergence,
        })
    }

    /// Put a batch of Sinkhorn divergences on the backend once, to compute it with
    /// [`SinkhornSolver::sinkhorn_divergence_prepared`]: a [`Problem`] of host point clouds,
    /// or a [`BufferProblem::points`] whose weights and clouds are already on the backend
    /// (only read: they may be the caller's memory), with the checks and errors of
    /// [`SinkhornSolver::sinkhorn_divergence`]. The problem `(μ, ν)` on `x × y` is prepared
    /// as [`SinkhornSolver::prepare`] does, and the self-transport costs `x × x`, `y × y`.
    pub fn prepare_divergence<'p, 'a, T: Real>(
        &self,
        problem: impl Into<ProblemInput<'p, 'a, T, Bk::Buffer>>,
    ) -> Result<PreparedDivergence<T, Bk>>
    where
        'a: 'p,
        Bk::Buffer: 'p,
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        match problem.into() {
            ProblemInput::Host(p) => {
                self.prepare_divergence_with(p, DivergenceConvention::Objective)
            }
            ProblemInput::Buffers(p) => self.prepare_divergence_buffers(p),
        }
    }

    /// [`SinkhornSolver::prepare_divergence`] for host clouds in `convention`.
    fn prepare_divergence_with<T: Real>(
        &self,
        problem: &Problem<'_, T>,
        convention: DivergenceConvention,
    ) -> Result<PreparedDivergence<T, Bk>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        divergence_reach(problem.relaxation(), convention)?;
        let CostSource::PointCloud(clouds) = problem.cost() else {
            return Err(Error::shape(
                "cost",
                "the Sinkhorn divergence is between point clouds (a PointCloudCost)",
            ));
        };
        let be = self.backend();
        let (xx, yy) = clouds.self_pairs();
        Ok(PreparedDivergence {
            xy: self.prepare(problem)?,
            xx: be.prepare_cost(&xx.into())?,
            yy: be.prepare_cost(&yy.into())?,
            d: clouds.dim(),
        })
    }

    /// [`SinkhornSolver::prepare_divergence`] for weights and clouds on the backend.
    fn prepare_divergence_buffers<T: Real>(
        &self,
        problem: BufferProblem<'_, Bk::Buffer>,
    ) -> Result<PreparedDivergence<T, Bk>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        divergence_reach(problem.relaxation, DivergenceConvention::Objective)?;
        let BufferCost::Points { x, y, layout } = problem.cost else {
            return Err(Error::shape(
                "cost",
                "the Sinkhorn divergence is between point clouds (BufferProblem::points)",
            ));
        };
        // The pair first: its checks name x and y as the host path does.
        let xy = self.prepare(problem)?;
        let be = self.backend();
        let (xx, _) = be.prepare_cloud_buffer(
            x,
            x,
            CloudLayout {
                m: layout.n,
                ..layout
            },
        )?;
        let (yy, _) = be.prepare_cloud_buffer(
            y,
            y,
            CloudLayout {
                n: layout.m,
                ..layout
            },
        )?;
        Ok(PreparedDivergence {
            xy,
            xx,
            yy,
            d: layout.d,
        })
    }

    /// The Sinkhorn divergences of a batch prepared on the backend
    /// ([`SinkhornSolver::prepare_divergence`]), in the objective convention, with `∂S_ε/∂X`
    /// (`B×n×d`) and `∂S_ε/∂Y` (`B×m×d`) written into the buffers of
    /// [`BufferOutputs::point_gradients`] when it is set (the only output a divergence has);
    /// the values, the three terms and the reports come back. The same numbers as
    /// [`SinkhornSolver::sinkhorn_divergence`] on the same data.
    ///
    /// ```
    /// use logot::{Backend, BufferOutputs, BufferProblem, CloudLayout, CpuBackend, DivergenceConvention, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::array;
    /// let (x, y, w) = (array![[0.0f64, 0.0], [1.0, 0.0]], array![[0.0, 1.0], [1.5, 1.0]], array![0.5, 0.5]);
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1));
    /// let be = solver.backend();
    /// let layout = CloudLayout { n: 2, m: 2, d: 2, batch: None, metric: Default::default(), precision: Default::default() };
    /// let up = |a: &[f64]| be.upload(a);
    /// let (xb, yb) = (up(x.as_slice().unwrap())?, up(y.as_slice().unwrap())?);
    /// let input = BufferProblem::points(up(w.as_slice().unwrap())?, up(w.as_slice().unwrap())?, &xb, &yb, 1, layout);
    /// let prepared = solver.prepare_divergence(input)?;
    /// let (mut gx, mut gy) = (be.filled(4, 0.0)?, be.filled(4, 0.0)?);
    /// let out = solver.sinkhorn_divergence_prepared(&prepared, BufferOutputs::new().point_gradients(&mut gx, &mut gy))?;
    /// let problem = Problem::new(w.view(), w.view(), PointCloudCost::new(x.view(), y.view())?)?;
    /// let host = solver.sinkhorn_divergence(&problem, DivergenceConvention::Objective)?;
    /// assert_eq!((out.value[0], be.download(&gx)?), (host.value[0], host.grad_x.unwrap().into_raw_vec_and_offset().0));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn sinkhorn_divergence_prepared<T: Real>(
        &self,
        prepared: &PreparedDivergence<T, Bk>,
        outputs: BufferOutputs<'_, Bk::Buffer>,
    ) -> Result<DivergenceBufferResult>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let be = self.backend();
        let (batch, n, m) = prepared.dims();
        let grads = outputs.into_divergence()?;
        if let Some((grad_x, grad_y)) = &grads {
            crate::backend::check_buffer_len("grad_x", be.len(grad_x), batch * n * prepared.d)?;
            crate::backend::check_buffer_len("grad_y", be.len(grad_y), batch * m * prepared.d)?;
        }
        let parts = self.divergence_parts(prepared, DivergenceConvention::Objective)?;
        if let (Some((grad_x, grad_y)), Some((gx, gy))) = (grads, &parts.grad) {
            be.offset_rows(gx, &[], grad_x)?;
            be.offset_rows(gy, &[], grad_y)?;
        }
        Ok(DivergenceBufferResult {
            value: parts.value,
            terms: parts.terms,
            convergence: parts.convergence,
        })
    }

    /// The three solves of a prepared batch of divergences, their values and (objective
    /// convention) the points' gradients `∂S/∂X = ∂OT_ε(μ, ν)/∂X − ½ ∂OT_ε(μ, μ)/∂X`, on the
    /// backend (the one computation behind [`SinkhornSolver::sinkhorn_divergence`] and
    /// [`SinkhornSolver::sinkhorn_divergence_prepared`]).
    fn divergence_parts<T: Real>(
        &self,
        prepared: &PreparedDivergence<T, Bk>,
        convention: DivergenceConvention,
    ) -> Result<DivergenceParts<Bk::Buffer>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let p = self.params();
        p.validate()?;
        let xy = &prepared.xy;
        let rho = divergence_reach(xy.relaxation, convention)?;
        if p.warm_start.is_some() {
            return Err(Error::parameter(
                "warm_start",
                "set",
                "the Sinkhorn divergence starts its three problems from zero potentials",
            ));
        }
        let be = self.backend();
        let (batch, _, _) = xy.dims();
        let (mass_mu, mass_nu) = xy.masses();
        let objective = convention == DivergenceConvention::Objective;
        let s_xx = self_transport(
            self,
            &prepared.xx,
            (xy.mu(), xy.log_mu()),
            mass_mu,
            objective,
            rho,
        )?;
        let s_yy = self_transport(
            self,
            &prepared.yy,
            (xy.nu(), xy.log_nu()),
            mass_nu,
            objective,
            rho,
        )?;
        let (cross, grad, cross_convergence, own) = if objective {
            let s = self.point_parts(xy)?;
            let (mut gx, mut gy) = (s.gx, s.gy);
            for (g, half) in [(&mut gx, &s_xx.half_grad), (&mut gy, &s_yy.half_grad)] {
                if let Some(half) = half {
                    be.batched_axpy(&[-1.0], half, g)?;
                }
            }
            (
                s.value,
                Some((gx, gy)),
                s.solution.convergence,
                [s_xx.value, s_yy.value],
            )
        } else {
            let (_, _, solution) = self.iterate_prepared(xy)?;
            self.check_distances::<T>(&solution.distance)?;
            let (convergence, distance) = (solution.convergence, solution.distance);
            // (divergence_reach refuses the linear convention of unbalanced problems.)
            let linear = |s: &SelfTransport<Bk::Buffer>| {
                s.linear.clone().ok_or_else(|| {
                    Error::parameter("convention", "Linear", "needs balanced self-terms")
                })
            };
            let distance = distance.iter().map(|&v| T::of(v).f64()).collect();
            (
                distance,
                None,
                convergence,
                [linear(&s_xx)?, linear(&s_yy)?],
            )
        };
        let terms: Vec<[f64; 3]> = (0..batch)
            .map(|k| [cross[k], own[0][k], own[1][k]])
            .collect();
        // Unbalanced: the masses' term (ε/2)(Σμ − Σν)² that makes S_ε(μ, μ) = 0 exact
        // (module docs); it is 0 when the masses are equal.
        let value = terms
            .iter()
            .enumerate()
            .map(|(k, t)| {
                let masses = match rho {
                    None => 0.0,
                    Some(_) => 0.5 * p.eps * (mass_mu[k] - mass_nu[k]).powi(2),
                };
                T::of(t[0] - 0.5 * (t[1] + t[2]) + masses).f64()
            })
            .collect();
        Ok(DivergenceParts {
            value,
            terms,
            grad,
            convergence: [cross_convergence, s_xx.convergence, s_yy.convergence],
        })
    }
}

/// The Sinkhorn divergence `S_ε` between the clouds `x` (`n×d`) and `y` (`m×d`) with
/// weights `a` and `b` (uniform when `None`), for the squared Euclidean cost, in the
/// regularised-objective convention (GeomLoss's), with its gradients with respect to the
/// points, on the CPU with default [`SinkhornParams`]: POT's
/// `empirical_sinkhorn_divergence(x, y, reg, a, b)` argument order (the Python package's).
/// [`SinkhornSolver::sinkhorn_divergence`] takes parameters, other backends, metrics, the
/// GPU's cross-term precision, batches and POT's linear convention.
///
/// ```
/// use logot::ndarray::array;
/// let x = array![[0.0f64, 0.0], [1.0, 0.0], [0.0, 1.0]];
/// let a = array![0.2, 0.3, 0.5];
/// let same = logot::sinkhorn_divergence(x.view(), x.view(), 0.5, Some(a.view()), Some(a.view()))?;
/// assert!(same.converged() && same.value[0].abs() < 1e-9); // zero up to the solver tolerance
/// let y = &x + 0.25;
/// let moved = logot::sinkhorn_divergence(x.view(), y.view(), 0.5, Some(a.view()), Some(a.view()))?;
/// // A translation by t = (0.25, 0.25) adds |t|² to every OT_ε(μ, T_t μ).
/// assert!(moved.converged() && (moved.value[0] - 0.125).abs() < 1e-9);
/// // Uniform weights: the same clouds, None for the weights.
/// let uniform = logot::sinkhorn_divergence(x.view(), y.view(), 0.5, None, None)?;
/// assert!((uniform.value[0] - 0.125).abs() < 1e-9);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn sinkhorn_divergence<T: Real>(
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
    eps: T,
    a: Option<ArrayView1<'_, T>>,
    b: Option<ArrayView1<'_, T>>,
) -> Result<DivergenceResult<T>> {
    let uniform = |n: usize| Array1::from_elem(n, T::of(1.0 / n.max(1) as f64));
    let (ua, ub) = (uniform(x.nrows()), uniform(y.nrows()));
    let (a, b) = (a.unwrap_or(ua.view()), b.unwrap_or(ub.view()));
    let problem = Problem::new(a, b, PointCloudCost::new(x, y)?)?;
    SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps.f64()))
        .sinkhorn_divergence(&problem, DivergenceConvention::Objective)
}
