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
//! [`Solver::envelope_gradients`](crate::Solver::envelope_gradients)). Because `(f, g)`
//! maximise the dual, the envelope theorem gives `∂OT_ε/∂C = P`, so
//!
//! `∂OT_ε/∂x_i = Σ_j P_ij ∇_x c(x_i, y_j) = 2 Σ_j P_ij (x_i − y_j)` (squared Euclidean),
//!
//! computed by [`PointCloudKernels::point_gradient`] with `P` applied on the fly. This is
//! the exact gradient of `OT_ε` at convergence; before it, the error is of the order of the
//! marginal error (the `f` half-step that ends each iteration makes `P·1 = μ` exact). It is
//! not the gradient of the transport cost `⟨P, C⟩` that [`crate::wasserstein`] reports.
//!
//! Unbalanced ([`SinkhornParams::relaxation`]): the value is the unbalanced objective in its
//! dual form `D = Σ μ ψ_μ(f − ε log μ) + Σ ν ψ_ν(g − ε log ν) − ε (Σ P − Σμ Σν)`,
//! `ψ(t) = −ρ (e^{−t/ρ} − 1)` (see [`crate::grad::ot`]), equal at the optimum to
//! [`SinkhornResult::objective`]; `∂D/∂C = P` still, so the point gradients keep their form.
//!
//! **Transport cost, exact** ([`Solver::transport_point_gradients`]). The transport cost
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
//! on the fly ([`PointCloudKernels::plan_apply`]), its right-hand side `(C⊙P)·1`,
//! `(C⊙P)ᵀ·1` from [`PointCloudKernels::cost_marginals`], and the reweighted field by
//! [`PointCloudKernels::adjoint_point_gradient`]; a solve costs a few CG steps of two plan
//! applications each on top of Sinkhorn.
//!
//! *Which to use.* The envelope form ([`Solver::point_gradients`]) is the exact gradient of
//! `OT_ε` for the price of one pass over the plan: take it when `OT_ε` (or the Sinkhorn
//! divergence) is the loss, as in GeomLoss. When the loss is the transport cost `⟨P, C⟩`
//! itself (POT's `sinkhorn2`, what [`crate::wasserstein`] reports), the envelope form is
//! only its gradient up to `O(ε)` terms; use [`Solver::transport_point_gradients`].
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

use crate::backend::{
    grad::GradKernels, Backend, CloudLayout, CostSource, PointCloudCost, PointCloudKernels, Side,
};
use crate::grad::ot::{solve_adjoint_with, PlanMatvec};
use crate::grad::{CgParams, CgReport};
use crate::sinkhorn::{
    relax_side, BufferSolution, Convergence, EpsScaling, Prepared, Problem, SinkhornParams,
    SinkhornResult, Solver,
};
use crate::unbalanced::dual_side;
use crate::unbalanced::phi;
use crate::validate::{check_equal_mass, check_histograms};
use crate::{CpuBackend, Error, Real, Result};
use ndarray::{Array1, Array2, Array3, ArrayView1, ArrayView2, Axis};

// Defined here, above the backends, where the solver's ε schedules live.
impl<T: Real> PointCloudCost<'_, T> {
    /// ε-scaling that anneals from the clouds' largest cost ([`PointCloudCost::max_cost`],
    /// the squared diameter for the squared Euclidean cost) down to the target ε:
    /// [`EpsScaling::from_max_cost`].
    ///
    /// ```
    /// use logot::{CpuBackend, PointCloudCost, Problem, SinkhornParams, Solver};
    /// use ndarray::{Array1, Array2, Axis};
    /// // A 5×5 grid and its translate by (0.1, 0.1), ε = 1e-3 after annealing from the
    /// // squared diameter: the entropic cost is within O(ε) above the exact W₂² = 0.02.
    /// let x = Array2::from_shape_fn((25, 2), |(i, k)| if k == 0 { (i % 5) as f64 } else { (i / 5) as f64 } * 0.25);
    /// let y = &x + 0.1;
    /// let w = Array1::from_elem(25, 0.04).insert_axis(Axis(0));
    /// let cost = PointCloudCost::new(x.view(), y.view())?;
    /// let params = SinkhornParams::new(1e-3).with_eps_scaling(cost.eps_scaling());
    /// let r = Solver::new(CpuBackend, params).solve(&Problem::batch(w.view(), w.view(), cost)?)?;
    /// assert!(r.convergence.converged, "{:?}", r.convergence);
    /// assert!(r.distance[0] >= 0.02 - 1e-9 && r.distance[0] < 0.02 + 3e-3, "{}", r.distance[0]);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn eps_scaling(&self) -> EpsScaling {
        EpsScaling::from_max_cost(self.max_cost())
    }
}

/// A solved batch of point-cloud problems with `OT_ε` and its gradients with respect to
/// the points (see the module docs for the objective).
#[derive(Clone, Debug)]
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

/// What [`Solver::point_gradients_into`] reads back: `OT_ε` of each problem (rounded to
/// the precision of the data, as [`PointGradients::value`]) and the solve's distances and
/// report.
#[derive(Clone, Debug)]
pub struct PointBufferSolution {
    /// `OT_ε` of each problem (unbalanced: the dual `D`, see the module docs).
    pub value: Vec<f64>,
    /// The transport costs `⟨P, C⟩`, the unbalanced objectives and the report.
    pub solution: BufferSolution,
}

/// The potentials, `OT_ε` and point gradients of a solved point-cloud batch, on the backend.
struct PointParts<T: Real, Bk: Backend<T>> {
    f: Bk::Buffer,
    g: Bk::Buffer,
    convergence: Convergence,
    distance: Vec<f64>,
    objective: Option<Vec<f64>>,
    value: Vec<f64>,
    gx: Bk::Buffer,
    gy: Bk::Buffer,
}

/// A solved batch of point-cloud problems with the transport costs `⟨P, C⟩` and their
/// exact gradients with respect to the points (implicit differentiation through the plan;
/// see the module docs).
#[derive(Clone, Debug)]
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

/// The Sinkhorn divergence of two weighted point clouds and its gradients with respect to
/// the points (see the module docs).
#[derive(Clone, Debug)]
pub struct SinkhornDivergence<T> {
    /// `S_ε(μ, ν) = V(μ, ν) − ½ V(μ, μ) − ½ V(ν, ν)` with `V` the convention's value
    /// (unbalanced: `+ (ε/2)(Σμ − Σν)²`, see the module docs).
    pub value: T,
    /// `∂S_ε/∂X`, `n×d` ([`DivergenceConvention::Objective`] only).
    pub grad_x: Option<Array2<T>>,
    /// `∂S_ε/∂Y`, `m×d` ([`DivergenceConvention::Objective`] only).
    pub grad_y: Option<Array2<T>>,
    /// `V(μ, ν)`, `V(μ, μ)`, `V(ν, ν)`.
    pub terms: [T; 3],
    /// The convention of `value` and `terms`.
    pub convention: DivergenceConvention,
    /// How each of the three solves ended (in the order of `terms`).
    pub convergence: [Convergence; 3],
}

impl<T> SinkhornDivergence<T> {
    /// All three solves met their tolerance.
    pub fn converged(&self) -> bool {
        self.convergence.iter().all(|c| c.converged)
    }
}

/// Row `k` of `len` entries of a flat batch.
fn row<T>(a: &[T], k: usize, len: usize) -> ArrayView1<'_, T> {
    ArrayView1::from(&a[k * len..(k + 1) * len])
}

fn array3<T>(shape: (usize, usize, usize), v: Vec<T>) -> Result<Array3<T>> {
    Array3::from_shape_vec(shape, v).map_err(|e| Error::Numerical(e.to_string()))
}

/// `Σ_k w[b,k]·p[b,k]` of each of `batch` problems over the bins of positive weight
/// (zero-mass bins carry −∞ potentials), on the backend: `B` numbers come back.
fn support_dot<T: Real, Bk: GradKernels<T>>(
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
    solver: &Solver<Bk>,
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
            crate::sinkhorn::ProblemReport {
                marginal_error: err,
                mass,
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
/// ([`Solver::prepare_divergence_buffers`]): `(μ, ν)` on `x × y`, and the self-transport
/// costs `x × x` and `y × y` (the same metric and precision).
pub struct PreparedDivergence<T: Real, B: Backend<T>> {
    xy: Prepared<T, B>,
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
    /// The largest cost between `x` and `y` (the start of [`EpsScaling::from_max_cost`]).
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

/// A batch of Sinkhorn divergences whose point gradients went into the caller's buffers
/// ([`Solver::sinkhorn_divergence_into`]).
#[derive(Clone, Debug)]
pub struct DivergenceBufferSolution {
    /// `S_ε` of each problem (rounded to the precision).
    pub value: Vec<f64>,
    /// `OT_ε(μ, ν)`, `OT_ε(μ, μ)`, `OT_ε(ν, ν)` of each problem.
    pub terms: Vec<[f64; 3]>,
    /// How the three solves of the batch ended (in the order of `terms`).
    pub convergence: [Convergence; 3],
}

/// What [`Solver::sinkhorn_divergence`] and [`Solver::sinkhorn_divergence_into`] compute
/// on the backend.
struct DivergenceParts<Buf> {
    value: Vec<f64>,
    terms: Vec<[f64; 3]>,
    /// `∂S_ε/∂X` and `∂S_ε/∂Y` ([`DivergenceConvention::Objective`]).
    grad: Option<(Buf, Buf)>,
    convergence: [Convergence; 3],
}

/// Problem `k`'s part of a batch's report (the report itself for one problem).
fn problem_convergence(c: &Convergence, k: usize) -> Convergence {
    if c.problems.len() == 1 {
        return c.clone();
    }
    Convergence::of_problems(c.iterations, c.tol, vec![c.problems[k]])
}

/// The reach `ρ` of an unbalanced Sinkhorn divergence (`None`: balanced): one penalty on
/// both marginals, in the objective convention only.
fn divergence_reach(p: &SinkhornParams, convention: DivergenceConvention) -> Result<Option<f64>> {
    let Some(r) = p.unbalanced() else {
        return Ok(None);
    };
    r.validate()?;
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

impl<Bk> Solver<Bk> {
    /// Solve a batch of point-cloud problems and return `OT_ε` with its gradients with
    /// respect to both clouds, `∂OT_ε/∂x_i = Σ_j P_ij ∇_x c(x_i, y_j)` (envelope theorem;
    /// see the module docs), with `P` applied on the fly. The cost must be a
    /// [`CostSource::PointCloud`]. With a relaxation, `OT_ε` is the unbalanced objective.
    ///
    /// ```
    /// use logot::{CpuBackend, PointCloudCost, Problem, SinkhornParams, Solver};
    /// use ndarray::{array, Axis};
    /// let x = array![[0.0f64, 0.0], [1.0, 0.0]];
    /// let y = array![[0.0, 1.0], [1.0, 1.0]];
    /// let w = array![[0.5, 0.5]];
    /// let problem = Problem::batch(w.view(), w.view(), PointCloudCost::new(x.view(), y.view())?)?;
    /// let g = Solver::new(CpuBackend, SinkhornParams::new(0.01)).point_gradients(&problem)?;
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
            &s.convergence,
            &s.distance,
            s.objective.as_deref(),
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

    /// As [`Solver::point_gradients`] for a batch prepared on the backend
    /// ([`Solver::prepare_points_buffers`]): the potentials `f` (`B×n`), `g` (`B×m`) and the
    /// gradients `∂OT_ε/∂X` (`grad_x`, `B×n×d`) and `∂OT_ε/∂Y` (`grad_y`, `B×m×d`) written
    /// into the caller's buffers; `OT_ε` of each problem, the transport costs and the report
    /// come back. The same numbers as [`Solver::point_gradients`] on the same data.
    ///
    /// ```
    /// use logot::{Backend, CloudLayout, CpuBackend, PointCloudCost, Problem, SinkhornParams, Solver};
    /// use ndarray::array;
    /// let (x, y, w) = (array![[0.0f64, 0.0], [1.0, 0.0]], array![[0.0, 1.0], [1.0, 1.0]], array![[0.5, 0.5]]);
    /// let solver = Solver::new(CpuBackend, SinkhornParams::new(0.01));
    /// let be = solver.backend();
    /// let layout = CloudLayout { n: 2, m: 2, d: 2, batch: None, metric: Default::default(), precision: Default::default() };
    /// let up = |a: &[f64]| be.upload(a);
    /// let prepared = solver.prepare_points_buffers(
    ///     up(w.as_slice().unwrap())?, up(w.as_slice().unwrap())?,
    ///     &up(x.as_slice().unwrap())?, &up(y.as_slice().unwrap())?, 1, layout)?;
    /// let (mut f, mut g, mut gx, mut gy) = (be.filled(2, 0.0)?, be.filled(2, 0.0)?, be.filled(4, 0.0)?, be.filled(4, 0.0)?);
    /// let out = solver.point_gradients_into(&prepared, &mut f, &mut g, &mut gx, &mut gy)?;
    /// let host = solver.point_gradients(&Problem::batch(w.view(), w.view(), PointCloudCost::new(x.view(), y.view())?)?)?;
    /// assert_eq!((out.value[0], be.download(&gx)?), (host.value[0], host.x.into_raw_vec_and_offset().0));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn point_gradients_into<T: Real>(
        &self,
        prepared: &Prepared<T, Bk>,
        f: &mut Bk::Buffer,
        g: &mut Bk::Buffer,
        grad_x: &mut Bk::Buffer,
        grad_y: &mut Bk::Buffer,
    ) -> Result<PointBufferSolution>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let be = self.backend();
        let (batch, n, m) = prepared.dims();
        crate::backend::check_buffer_len("f", be.len(f), batch * n)?;
        crate::backend::check_buffer_len("g", be.len(g), batch * m)?;
        let s = self.point_parts(prepared)?;
        // (The gradients' lengths, B×n×d and B×m×d, are those the cost's kernels return.)
        crate::backend::check_buffer_len("grad_x", be.len(grad_x), be.len(&s.gx))?;
        crate::backend::check_buffer_len("grad_y", be.len(grad_y), be.len(&s.gy))?;
        self.write_potentials(prepared, &s.f, &s.g, f, g)?;
        be.offset_rows(&s.gx, &[], grad_x)?;
        be.offset_rows(&s.gy, &[], grad_y)?;
        Ok(PointBufferSolution {
            value: s.value,
            solution: BufferSolution {
                distance: s.distance,
                objective: s.objective,
                convergence: s.convergence,
            },
        })
    }

    /// Sinkhorn on a prepared point-cloud batch, then `OT_ε` of each problem and the point
    /// gradients on the backend (the one computation behind [`Solver::point_gradients`] and
    /// [`Solver::point_gradients_into`]).
    fn point_parts<T: Real>(&self, prepared: &Prepared<T, Bk>) -> Result<PointParts<T, Bk>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let (f, g, convergence, distance, objective) = self.iterate_prepared(prepared)?;
        self.check_distances::<T>(&distance)?;
        let be = self.backend();
        let eps = self.params().eps;
        let (batch, n, m) = prepared.dims();
        let cost = prepared.cost();
        let (mass, gx) = be.point_gradient(cost, Side::Row, &f, &g, T::of(eps))?;
        let (_, gy) = be.point_gradient(cost, Side::Col, &f, &g, T::of(eps))?;
        // Σ_i P_ij per problem (f64), then ⟨f, μ⟩ + ⟨g, ν⟩ over the bins of positive mass
        // (zero-mass bins carry −∞ potentials), on the backend: B numbers each.
        let total: Vec<f64> = be.row_stats(&mass, batch)?.iter().map(|s| s.sum).collect();
        let value: Vec<f64> = match self.params().unbalanced() {
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
            convergence,
            distance,
            objective,
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
    /// use logot::{grad::CgParams, CpuBackend, PointCloudCost, Problem, SinkhornParams, Solver};
    /// use ndarray::array;
    /// let x = array![[0.0f64, 0.0], [1.0, 0.0], [0.3, 0.8]];
    /// let y = array![[0.1, 0.9], [1.2, 0.4]];
    /// let (mu, nu) = (array![[0.3, 0.3, 0.4]], array![[0.5, 0.5]]);
    /// let solver = Solver::new(CpuBackend, SinkhornParams { tol: Some(1e-13), ..SinkhornParams::new(0.1) });
    /// let cost = |x: &ndarray::Array2<f64>| -> logot::Result<f64> {
    ///     let problem = Problem::batch(mu.view(), nu.view(), PointCloudCost::new(x.view(), y.view())?)?;
    ///     Ok(solver.solve(&problem)?.distance[0])
    /// };
    /// let problem = Problem::batch(mu.view(), nu.view(), PointCloudCost::new(x.view(), y.view())?)?;
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
        let phis = self
            .params()
            .unbalanced()
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

    /// The Sinkhorn divergence `S_ε(μ, ν)` between the clouds `x` (`n×d`, weights `mu`) and
    /// `y` (`m×d`, weights `nu`) of `clouds` (with its metric and cross-term precision), in
    /// the given `convention`, with its gradients with respect to the points
    /// ([`DivergenceConvention::Objective`]). Three problems are solved with this solver's
    /// parameters (ε-scaling included): `(μ, ν)` on `x × y` by Sinkhorn, and the debiasing
    /// terms `(μ, μ)` on `x × x` and `(ν, ν)` on `y × y` (same metric and precision) by the
    /// symmetric iteration `f ← ½(f + T(f))`.
    ///
    /// With a relaxation ([`SinkhornParams::relaxation`], one `ρ` on both sides) this is the
    /// unbalanced divergence of the module docs (objective convention only): the masses may
    /// differ, and the three solves use the relaxed half-step.
    ///
    /// ```
    /// use logot::{CpuBackend, DivergenceConvention, PointCloudCost, SinkhornParams, Solver};
    /// use ndarray::{array, Array1};
    /// let x = array![[0.0f64, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
    /// let y = &x * 1.5; // a dilation: S_ε > 0, and the gradient pulls x outwards
    /// let a = Array1::from_elem(4, 0.25);
    /// let clouds = PointCloudCost::new(x.view(), y.view())?;
    /// let solver = Solver::new(CpuBackend, SinkhornParams::new(0.01));
    /// let s = solver.sinkhorn_divergence(a.view(), a.view(), clouds.clone(), DivergenceConvention::Objective)?;
    /// assert!(s.converged() && s.value > 0.0);
    /// // ∂S/∂x at (1, 1) points towards −(1, 1)·(positive): moving x towards y lowers S.
    /// let gx = s.grad_x.unwrap();
    /// assert!(gx[[3, 0]] < 0.0 && gx[[3, 1]] < 0.0);
    /// // POT's convention combines the transport costs ⟨P, C⟩ of the same three plans: at a
    /// // large ε the entropy terms make it a different number.
    /// let solver = Solver::new(CpuBackend, SinkhornParams::new(1.0));
    /// let obj = solver.sinkhorn_divergence(a.view(), a.view(), clouds.clone(), DivergenceConvention::Objective)?;
    /// let lin = solver.sinkhorn_divergence(a.view(), a.view(), clouds, DivergenceConvention::Linear)?;
    /// assert!(lin.grad_x.is_none() && (lin.value - obj.value).abs() > 1e-3);
    /// assert!((lin.value - (lin.terms[0] - 0.5 * (lin.terms[1] + lin.terms[2]))).abs() < 1e-12);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn sinkhorn_divergence<T: Real>(
        &self,
        mu: ArrayView1<'_, T>,
        nu: ArrayView1<'_, T>,
        clouds: PointCloudCost<'_, T>,
        convention: DivergenceConvention,
    ) -> Result<SinkhornDivergence<T>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let rho = divergence_reach(self.params(), convention)?;
        if let Some(b) = clouds.batch() {
            return Err(Error::shape(
                "clouds",
                format!(
                    "holds {b} pairs of point clouds; the divergences of a batch are \
                     Solver::sinkhorn_divergence_batch"
                ),
            ));
        }
        let (x, y) = (
            clouds.x().index_axis_move(Axis(0), 0),
            clouds.y().index_axis_move(Axis(0), 0),
        );
        let (a2, b2) = (mu.insert_axis(Axis(0)), nu.insert_axis(Axis(0)));
        let mass_a = check_histograms("mu", &a2)?;
        let mass_b = check_histograms("nu", &b2)?;
        if mu.len() != x.nrows() {
            return Err(Error::shape(
                "mu",
                format!("has {} weights for {} points of x", mu.len(), x.nrows()),
            ));
        }
        if nu.len() != y.nrows() {
            return Err(Error::shape(
                "nu",
                format!("has {} weights for {} points of y", nu.len(), y.nrows()),
            ));
        }
        if rho.is_none() {
            check_equal_mass::<T>(&mass_a, &mass_b)?;
        }
        let problem = Problem::batch(a2.reborrow(), b2.reborrow(), clouds.clone().reborrow())?;
        let mut s = self.divergences(&problem, &clouds, convention)?;
        Ok(s.remove(0))
    }

    /// The Sinkhorn divergences of a batch: problem `k` is
    /// [`Solver::sinkhorn_divergence`]`(mu[k], nu[k], clouds.problem(k), convention)`, with
    /// `mu` `B×n`, `nu` `B×m` and `clouds` one pair per problem
    /// ([`PointCloudCost::batched`]) or one pair shared by all; the gradients of each are
    /// with respect to its own clouds (`n×d`, `m×d`). The three solves run as batches that
    /// stop when every problem has met the tolerance, so a problem agrees with its separate
    /// call to the tolerance (not the bit); each report is its problem's.
    ///
    /// ```
    /// use logot::{CpuBackend, DivergenceConvention, PointCloudCost, SinkhornParams, Solver};
    /// use ndarray::{array, Array2};
    /// let x = array![[[0.0f64], [1.0]], [[0.0], [1.0]]];
    /// let y = array![[[0.0f64], [1.0]], [[0.5], [1.5]]]; // problem 1 translated by 0.5
    /// let w = Array2::from_elem((2, 2), 0.5);
    /// let clouds = PointCloudCost::batched(x.view(), y.view())?;
    /// let s = Solver::new(CpuBackend, SinkhornParams::new(0.5))
    ///     .sinkhorn_divergence_batch(w.view(), w.view(), clouds, DivergenceConvention::Objective)?;
    /// // Equal clouds: S_ε = 0; a translation by t: S_ε = |t|².
    /// assert!(s[0].value.abs() < 1e-8 && (s[1].value - 0.25).abs() < 1e-8, "{} {}", s[0].value, s[1].value);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn sinkhorn_divergence_batch<T: Real>(
        &self,
        mu: ArrayView2<'_, T>,
        nu: ArrayView2<'_, T>,
        clouds: PointCloudCost<'_, T>,
        convention: DivergenceConvention,
    ) -> Result<Vec<SinkhornDivergence<T>>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let b = mu.nrows();
        if let Some(bc) = clouds.batch().filter(|&bc| bc != b) {
            return Err(Error::shape(
                "x",
                format!("holds {bc} pairs of point clouds but there are {b} problems"),
            ));
        }
        if nu.nrows() != b {
            return Err(Error::shape(
                "nu",
                format!("batch of {} problems but mu has {b}", nu.nrows()),
            ));
        }
        let problem = Problem::batch(mu, nu, clouds.clone().reborrow())?;
        self.divergences(&problem, &clouds, convention)
    }

    /// The divergences of a batch on the host's clouds: the three problems prepared (as
    /// [`Solver::prepare_divergence_buffers`] does from backend buffers), then
    /// [`Solver::divergence_parts`].
    fn divergences<T: Real>(
        &self,
        problem: &Problem<'_, T>,
        clouds: &PointCloudCost<'_, T>,
        convention: DivergenceConvention,
    ) -> Result<Vec<SinkhornDivergence<T>>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let be = self.backend();
        let (xx, yy) = clouds.self_pairs();
        let prepared = PreparedDivergence {
            xy: self.prepare(problem)?,
            xx: be.prepare_cost(&xx.into())?,
            yy: be.prepare_cost(&yy.into())?,
            d: clouds.dim(),
        };
        let parts = self.divergence_parts(&prepared, convention)?;
        let (batch, n, m) = prepared.dims();
        let d = prepared.d;
        let grads = match &parts.grad {
            Some((gx, gy)) => Some((be.download(gx)?, be.download(gy)?)),
            None => None,
        };
        (0..batch)
            .map(|k| {
                let rows = |v: &[T], rows: usize| {
                    Array2::from_shape_vec((rows, d), v[k * rows * d..(k + 1) * rows * d].to_vec())
                        .map_err(|e| Error::Numerical(e.to_string()))
                };
                let (grad_x, grad_y) = match &grads {
                    Some((gx, gy)) => (Some(rows(gx, n)?), Some(rows(gy, m)?)),
                    None => (None, None),
                };
                let t = parts.terms[k];
                Ok(SinkhornDivergence {
                    value: T::of(parts.value[k]),
                    grad_x,
                    grad_y,
                    terms: [T::of(t[0]), T::of(t[1]), T::of(t[2])],
                    convention,
                    convergence: [0, 1, 2].map(|i| problem_convergence(&parts.convergence[i], k)),
                })
            })
            .collect()
    }

    /// A batch of Sinkhorn divergences prepared from backend buffers: the weights `mu`
    /// (`B×n`) and `nu` (`B×m`), and the clouds `x`, `y` laid out as `layout` says (row-major,
    /// only read: they may be the caller's memory), with the checks and errors of
    /// [`Solver::sinkhorn_divergence_batch`]; the problem `(μ, ν)` on `x × y` as
    /// [`Solver::prepare_points_buffers`], and the self-transport costs `x × x`, `y × y` as
    /// [`Backend::prepare_cloud_buffer`].
    pub fn prepare_divergence_buffers<T: Real>(
        &self,
        mu: Bk::Buffer,
        nu: Bk::Buffer,
        x: &Bk::Buffer,
        y: &Bk::Buffer,
        batch: usize,
        layout: CloudLayout,
    ) -> Result<PreparedDivergence<T, Bk>>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        divergence_reach(self.params(), DivergenceConvention::Objective)?;
        let xy = self.prepare_points_buffers(mu, nu, x, y, batch, layout)?;
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
    /// ([`Solver::prepare_divergence_buffers`]), in the objective convention, with
    /// `∂S_ε/∂X` (`grad_x`, `B×n×d`) and `∂S_ε/∂Y` (`grad_y`, `B×m×d`) written into the
    /// caller's buffers; the values, the three terms and the reports come back. The same
    /// numbers as [`Solver::sinkhorn_divergence_batch`] on the same data.
    ///
    /// ```
    /// use logot::{Backend, CloudLayout, CpuBackend, DivergenceConvention, PointCloudCost, SinkhornParams, Solver};
    /// use ndarray::array;
    /// let (x, y, w) = (array![[0.0f64, 0.0], [1.0, 0.0]], array![[0.0, 1.0], [1.5, 1.0]], array![[0.5, 0.5]]);
    /// let solver = Solver::new(CpuBackend, SinkhornParams::new(0.1));
    /// let be = solver.backend();
    /// let layout = CloudLayout { n: 2, m: 2, d: 2, batch: None, metric: Default::default(), precision: Default::default() };
    /// let up = |a: &[f64]| be.upload(a);
    /// let prepared = solver.prepare_divergence_buffers(
    ///     up(w.as_slice().unwrap())?, up(w.as_slice().unwrap())?,
    ///     &up(x.as_slice().unwrap())?, &up(y.as_slice().unwrap())?, 1, layout)?;
    /// let (mut gx, mut gy) = (be.filled(4, 0.0)?, be.filled(4, 0.0)?);
    /// let out = solver.sinkhorn_divergence_into(&prepared, &mut gx, &mut gy)?;
    /// let host = solver.sinkhorn_divergence_batch(w.view(), w.view(),
    ///     PointCloudCost::new(x.view(), y.view())?, DivergenceConvention::Objective)?;
    /// assert_eq!((out.value[0], be.download(&gx)?), (host[0].value, host[0].grad_x.clone().unwrap().into_raw_vec_and_offset().0));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn sinkhorn_divergence_into<T: Real>(
        &self,
        prepared: &PreparedDivergence<T, Bk>,
        grad_x: &mut Bk::Buffer,
        grad_y: &mut Bk::Buffer,
    ) -> Result<DivergenceBufferSolution>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let be = self.backend();
        let (batch, n, m) = prepared.dims();
        crate::backend::check_buffer_len("grad_x", be.len(grad_x), batch * n * prepared.d)?;
        crate::backend::check_buffer_len("grad_y", be.len(grad_y), batch * m * prepared.d)?;
        let parts = self.divergence_parts(prepared, DivergenceConvention::Objective)?;
        if let Some((gx, gy)) = &parts.grad {
            be.offset_rows(gx, &[], grad_x)?;
            be.offset_rows(gy, &[], grad_y)?;
        }
        Ok(DivergenceBufferSolution {
            value: parts.value,
            terms: parts.terms,
            convergence: parts.convergence,
        })
    }

    /// The three solves of a prepared batch of divergences, their values and (objective
    /// convention) the points' gradients `∂S/∂X = ∂OT_ε(μ, ν)/∂X − ½ ∂OT_ε(μ, μ)/∂X`, on the
    /// backend (the one computation behind [`Solver::sinkhorn_divergence`],
    /// [`Solver::sinkhorn_divergence_batch`] and [`Solver::sinkhorn_divergence_into`]).
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
        let rho = divergence_reach(p, convention)?;
        if p.warm_start.is_some() {
            return Err(Error::parameter(
                "warm_start",
                "set",
                "the Sinkhorn divergence starts its three problems from zero potentials",
            ));
        }
        let be = self.backend();
        let xy = &prepared.xy;
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
                s.convergence,
                [s_xx.value, s_yy.value],
            )
        } else {
            let (_, _, convergence, distance, _) = self.iterate_prepared(xy)?;
            self.check_distances::<T>(&distance)?;
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

/// Entropic transport cost `⟨P, C⟩` between the weighted clouds `x` (`n×d`, weights `mu`)
/// and `y` (`m×d`, weights `nu`) for the squared Euclidean cost, computed on the fly, on
/// the CPU with default [`SinkhornParams`] (the same iterations as [`crate::wasserstein`]
/// with the dense cost). For small ε, anneal with
/// `SinkhornParams::new(eps).with_eps_scaling(cost.eps_scaling())` and a [`Solver`].
///
/// ```
/// use ndarray::array;
/// let x = array![[0.0f64], [1.0]];
/// let y = array![[0.5f64], [1.5]];
/// let w = array![0.5, 0.5];
/// let r = logot::wasserstein_points(w.view(), w.view(), x.view(), y.view(), 0.01)?;
/// assert!((r.distance[0] - 0.25).abs() < 1e-3); // every point moves by 0.5
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein_points<T: Real>(
    mu: ArrayView1<'_, T>,
    nu: ArrayView1<'_, T>,
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
    eps: T,
) -> Result<SinkhornResult<T>> {
    let cost = PointCloudCost::new(x, y)?;
    Solver::new(CpuBackend, SinkhornParams::new(eps.f64())).solve(&Problem::batch(
        mu.insert_axis(Axis(0)),
        nu.insert_axis(Axis(0)),
        cost,
    )?)
}

/// The Sinkhorn divergence `S_ε` between `x` (weights `mu`) and `y` (weights `nu`) for the
/// squared Euclidean cost, in the regularised-objective convention (GeomLoss's), with its
/// gradients with respect to the points, on the CPU with default [`SinkhornParams`]
/// ([`Solver::sinkhorn_divergence`] for parameters, other backends, metrics, the GPU's
/// cross-term precision and POT's linear convention).
///
/// ```
/// use ndarray::array;
/// let x = array![[0.0f64, 0.0], [1.0, 0.0], [0.0, 1.0]];
/// let a = array![0.2, 0.3, 0.5];
/// let same = logot::sinkhorn_divergence(a.view(), a.view(), x.view(), x.view(), 0.5)?;
/// assert!(same.converged() && same.value.abs() < 1e-9); // zero up to the solver tolerance
/// let y = &x + 0.25;
/// let moved = logot::sinkhorn_divergence(a.view(), a.view(), x.view(), y.view(), 0.5)?;
/// // A translation by t = (0.25, 0.25) adds |t|² to every OT_ε(μ, T_t μ).
/// assert!(moved.converged() && (moved.value - 0.125).abs() < 1e-9);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn sinkhorn_divergence<T: Real>(
    mu: ArrayView1<'_, T>,
    nu: ArrayView1<'_, T>,
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
    eps: T,
) -> Result<SinkhornDivergence<T>> {
    Solver::new(CpuBackend, SinkhornParams::new(eps.f64())).sinkhorn_divergence(
        mu,
        nu,
        PointCloudCost::new(x, y)?,
        DivergenceConvention::Objective,
    )
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
    use ndarray::array;

    #[test]
    fn value_matches_the_dense_plan() {
        let x = array![[0.0f64, 0.1], [0.4, 0.9], [1.0, 0.2]];
        let y = array![[0.3f64, 0.3], [0.8, 0.7]];
        let (mu, nu) = (array![[0.2, 0.5, 0.3]], array![[0.6, 0.4]]);
        let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
        let dense = cost.to_dense();
        let solver = Solver::new(CpuBackend, SinkhornParams::new(0.05));
        let pg = solver
            .point_gradients(&Problem::batch(mu.view(), nu.view(), cost).unwrap())
            .unwrap();
        let cpl = solver
            .coupling(&Problem::batch(mu.view(), nu.view(), dense.view()).unwrap())
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
