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
    grad::GradKernels, Backend, CostSource, PointCloudCost, PointCloudKernels, Side,
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

/// `Σ_k w_k·p_k` over `w_k > 0` (zero-mass bins carry `p = −∞`), in f64.
fn weighted_sum<T: Real>(p: ArrayView1<'_, T>, w: ArrayView1<'_, T>) -> f64 {
    p.iter()
        .zip(w)
        .filter(|(_, &w)| w > T::zero())
        .map(|(p, w)| p.f64() * w.f64())
        .sum()
}

fn array3<T>(shape: (usize, usize, usize), v: Vec<T>) -> Result<Array3<T>> {
    Array3::from_shape_vec(shape, v).map_err(|e| Error::Numerical(e.to_string()))
}

/// `OT_ε(μ, μ)` on one cloud and its gradient with respect to the points, by the
/// symmetric fixed-point iteration `f ← ½(f + T(f))`, `T(f)_i = ε log μ_i − ε LSE_j((f_j −
/// C_ij)/ε)` (GeomLoss's debiasing solver). The problem is symmetric, so its potentials are
/// equal, `f = g`; alternating Sinkhorn updates would also drift along the nearly neutral
/// direction `f − g` (slow when the plan is close to diagonal), which the averaged
/// iteration never leaves.
struct SelfTransport<T> {
    /// `OT_ε(μ, μ)`.
    value: T,
    /// `⟨P, C⟩` of the symmetric plan (balanced only: the linear convention is not
    /// defined for unbalanced divergences).
    linear: Option<T>,
    /// `∂OT_ε(μ, μ)/∂X`, when asked for.
    grad: Option<Array2<T>>,
    convergence: Convergence,
}

fn self_transport<T: Real, Bk: PointCloudKernels<T> + GradKernels<T>>(
    solver: &Solver<Bk>,
    cloud: PointCloudCost<'_, T>,
    mu: ArrayView1<'_, T>,
    with_grad: bool,
    rho: Option<f64>,
) -> Result<SelfTransport<T>> {
    let p = solver.params();
    p.validate()?;
    if p.warm_start.is_some() {
        return Err(Error::parameter(
            "warm_start",
            "set",
            "the Sinkhorn divergence starts its three problems from zero potentials",
        ));
    }
    let be = solver.backend();
    let (n, d) = (cloud.n(), cloud.dim());
    let cost = be.prepare_cost(&cloud.into())?;
    let host: Vec<T> = mu.iter().copied().collect();
    let weights = be.upload(&host)?;
    let log_mu = be.ln(&weights)?;
    let mut f = be.start_potential(&weights)?;
    let mut t = be.filled(n, T::zero())?;
    let halves = be.filled(n, T::of(0.5))?;
    // f ← ½(f + T(f)) with the balanced half-step T(f) in `t` (relaxed first when
    // unbalanced, at the stage's ε); leaves the average in `f`.
    let step = |f: &mut Bk::Buffer, t: &mut Bk::Buffer, e: f64| -> Result<()> {
        if let Some(rho) = rho {
            relax_side(be, t, &log_mu, e, rho)?;
        }
        be.batched_axpy(&[1.0], f, t)?;
        be.hadamard(&halves, t, T::zero(), f)
    };
    let mut iterations = 0;
    if let Some(s) = &p.eps_scaling {
        for e in s.stages_within(p.eps, p.max_iters) {
            for _ in 0..s.iters_per_stage {
                be.sinkstep(&cost, Side::Row, T::of(e), &f, &log_mu, &mut t)?;
                step(&mut f, &mut t, e)?;
                iterations += 1;
            }
        }
    }
    let eps = T::of(p.eps);
    let asked = p.tol.unwrap_or(T::DEFAULT_TOL);
    let tol = if asked > 0.0 { asked } else { T::DEFAULT_TOL };
    let mass_mu: f64 = host.iter().map(|v| v.f64()).sum();
    // The violation of the optimality condition of the plan exp((f ⊕ f − C)/ε), from f and
    // its balanced half-step: ‖P·1 − μ‖₁ (P·1 = μ·exp((f − T(f))/ε)), or unbalanced the
    // residual of P·1 = μ·exp(−(f − ε log μ)/ρ) (RelaxedSide).
    let violation = |f: &Bk::Buffer, t: &Bk::Buffer| -> Result<f64> {
        Ok(match rho {
            None => be.marginal_error(1, &weights, f, t, eps)?[0].f64(),
            Some(rho) => be.relaxed_sides(1, &weights, f, t, eps, rho)?[0].residual,
        })
    };
    let mut met = None;
    for it in 0..p.max_iters - iterations {
        be.sinkstep(&cost, Side::Row, eps, &f, &log_mu, &mut t)?;
        if asked > 0.0 && it > 0 && it % p.check_every == 0 && violation(&f, &t)? <= tol * mass_mu {
            met = Some(iterations);
            break;
        }
        step(&mut f, &mut t, p.eps)?;
        iterations += 1;
    }
    let (f, err, plan_mass, linear) = match rho {
        None => {
            // The report of the plan exp((f ⊕ f − C)/ε) handed back (both marginals are μ;
            // both potentials are f: a copy of n values, as Potentials owns its buffers).
            let marginals = crate::backend::Marginals {
                mu: &weights,
                nu: &weights,
                log_mu: &log_mu,
                log_nu: &log_mu,
            };
            let pot = crate::backend::Potentials {
                g: be.upload(&be.download(&f)?)?,
                f,
            };
            let report = be.plan_report(&cost, &pot, &marginals, eps)?[0];
            let err = report.row_error.max(report.col_error);
            (pot.f, err, report.mass, Some(T::of(report.cost)))
        }
        Some(rho) => {
            // Unbalanced: the residual of the optimality condition (both sides are the same).
            be.sinkstep(&cost, Side::Row, eps, &f, &log_mu, &mut t)?;
            let side = be.relaxed_sides(1, &weights, &f, &t, eps, rho)?[0];
            (f, side.residual, Some(side.mass), None)
        }
    };
    if err.is_nan() {
        return Err(Error::Numerical(format!(
            "the marginal error of OT_ε(μ, μ) is NaN (eps = {} may be too small for {})",
            p.eps,
            T::NAME
        )));
    }
    let converged = err <= tol * mass_mu;
    let convergence = Convergence::of_problems(
        iterations,
        tol,
        vec![crate::sinkhorn::ProblemReport {
            marginal_error: err,
            converged,
            iterations: met.filter(|_| converged).unwrap_or(iterations),
        }],
    );
    // P is symmetric (C is, bit for bit, and both potentials are f): x_i's gradient is
    // twice the row side's.
    let (mass, grad) = if with_grad {
        let (mass, grad) = be.point_gradient(&cost, Side::Row, &f, &f, eps)?;
        let mass: f64 = be.download(&mass)?.iter().map(|v| v.f64()).sum();
        (mass, Some(grad))
    } else {
        (plan_mass.unwrap_or(mass_mu), None)
    };
    let fh = be.download(&f)?;
    let value = match rho {
        None => 2.0 * weighted_sum(ArrayView1::from(&fh), mu) - p.eps * mass,
        // D(μ, μ) = 2 Σ μ ψ_ρ(f − ε log μ) − ε (Σ P − (Σμ)²).
        Some(rho) => {
            let sum_psi = dual_side(&host, &fh, &vec![0.0; n], None, 0.0, p.eps, rho).0;
            2.0 * sum_psi - p.eps * (mass - mass_mu * mass_mu)
        }
    };
    if !value.is_finite() {
        return Err(Error::Numerical(format!(
            "OT_ε(μ, μ) is {value} (eps = {} may be too small for {})",
            p.eps,
            T::NAME
        )));
    }
    let grad = match grad {
        Some(g) => Some(
            Array2::from_shape_vec(
                (n, d),
                be.download(&g)?.into_iter().map(|v| v + v).collect(),
            )
            .map_err(|e| Error::Numerical(e.to_string()))?,
        ),
        None => None,
    };
    Ok(SelfTransport {
        value: T::of(value),
        linear,
        grad,
        convergence,
    })
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
                let on_support = |w: &Bk::Buffer, p: &Bk::Buffer| -> Result<Vec<f64>> {
                    let mut q = be.filled(be.len(p), T::zero())?;
                    be.offset_rows(p, &[], &mut q)?;
                    be.where_empty(w, &be.filled(be.len(p), T::zero())?, &mut q)?;
                    be.batched_dot(batch, w, &q)
                };
                let (fa, gb) = (
                    on_support(prepared.mu(), &f)?,
                    on_support(prepared.nu(), &g)?,
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
        let (x, y, metric, precision) = (
            clouds.x().index_axis_move(Axis(0), 0),
            clouds.y().index_axis_move(Axis(0), 0),
            clouds.metric(),
            clouds.precision(),
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
        let xx = PointCloudCost::with_metric(x, x, metric)?.with_precision(precision);
        let yy = PointCloudCost::with_metric(y, y, metric)?.with_precision(precision);
        let objective = convention == DivergenceConvention::Objective;
        let problem = Problem::batch(a2.reborrow(), b2.reborrow(), clouds.reborrow())?;
        let s_xx = self_transport(self, xx, mu, objective, rho)?;
        let s_yy = self_transport(self, yy, nu, objective, rho)?;
        let combine = |own: &Array3<T>, half: &Option<Array2<T>>| -> Option<Array2<T>> {
            let half = half.as_ref()?;
            let mut out = own.index_axis(Axis(0), 0).to_owned();
            ndarray::Zip::from(&mut out)
                .and(half)
                .for_each(|o, &h| *o = T::of(o.f64() - 0.5 * h.f64()));
            Some(out)
        };
        let (terms, grad_x, grad_y, convergence) = if objective {
            let g_xy = self.point_gradients(&problem)?;
            (
                [g_xy.value[0], s_xx.value, s_yy.value],
                combine(&g_xy.x, &s_xx.grad),
                combine(&g_xy.y, &s_yy.grad),
                g_xy.result.convergence,
            )
        } else {
            let r = self.solve(&problem)?;
            // (divergence_reach refuses the linear convention of unbalanced problems.)
            let linear = |s: &SelfTransport<T>| {
                s.linear.ok_or_else(|| {
                    Error::parameter("convention", "Linear", "needs balanced self-terms")
                })
            };
            (
                [r.distance[0], linear(&s_xx)?, linear(&s_yy)?],
                None,
                None,
                r.convergence,
            )
        };
        // Unbalanced: the masses' term (ε/2)(Σμ − Σν)² that makes S_ε(μ, μ) = 0 exact
        // (module docs); it is 0 when the masses are equal.
        let masses = match rho {
            None => 0.0,
            Some(_) => {
                let (ma, mb) = (mass_a[0], mass_b[0]);
                0.5 * self.params().eps * (ma - mb) * (ma - mb)
            }
        };
        let value = T::of(terms[0].f64() - 0.5 * (terms[1].f64() + terms[2].f64()) + masses);
        Ok(SinkhornDivergence {
            value,
            grad_x,
            grad_y,
            terms,
            convention,
            convergence: [convergence, s_xx.convergence, s_yy.convergence],
        })
    }

    /// The Sinkhorn divergences of a batch: problem `k` is
    /// [`Solver::sinkhorn_divergence`]`(mu[k], nu[k], clouds.problem(k), convention)`, with
    /// `mu` `B×n`, `nu` `B×m` and `clouds` one pair per problem
    /// ([`PointCloudCost::batched`]) or one pair shared by all; the gradients of each are
    /// with respect to its own clouds (`n×d`, `m×d`).
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
        (0..b)
            .map(|k| self.sinkhorn_divergence(mu.row(k), nu.row(k), clouds.problem(k), convention))
            .collect()
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
