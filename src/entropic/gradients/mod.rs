//! Exact gradients of entropic OT by implicit differentiation, and envelope gradients.
//!
//! **Implicit.** The plan `P = exp((f ⊕ g − C)/ε)` is defined by its marginals
//! `P·1 = μ`, `Pᵀ·1 = ν`. For a loss `L(P)` with upstream `G = ∂L/∂P`, differentiating these
//! fixed-point conditions gives the adjoint system (symmetric, singular along `(1, −1)`)
//!
//! `[diag(μ) P; Pᵀ diag(ν)]·[a; b] = [(G⊙P)·1; (G⊙P)ᵀ·1]`,
//!
//! and then, for all perturbations with `Σ dμ = Σ dν` (the problem needs equal masses),
//!
//! `∂L/∂C = −(1/ε)·(G − a·1ᵀ − 1·bᵀ) ⊙ P`,  `∂L/∂μ = a`,  `∂L/∂ν = b`.
//!
//! Eliminating `a = diag(1/μ)((G⊙P)·1 − P·b)` leaves the Schur system
//! `(diag(ν) − Pᵀ diag(1/μ) P)·b = (G⊙P)ᵀ·1 − Pᵀ diag(1/μ) (G⊙P)·1`, symmetric PSD with null
//! vector `1`; it is solved matrix-free by [`crate::grad::cg`] (two plan mat-vecs a step) with
//! the null direction projected out. `μ` and `ν` in these formulas are taken as the plan's own
//! marginals, which equal the inputs once Sinkhorn has converged and keep the system exactly
//! singular along `1` (hence consistent) even when it has not.
//!
//! Only `a_i + b_j` is determined; the pair `(∂L/∂μ, ∂L/∂ν)` is returned in the
//! representative with `Σ_i ∂L/∂μ_i = 0` (each gradient alone is defined up to a constant,
//! since only mass-preserving perturbations of one marginal are admissible; the pair is exact
//! also for perturbations that change both masses equally).
//!
//! Zero-mass bins are left out of the system (their rows/columns of `P` vanish, so their rows
//! of `∂L/∂C` are 0). Their marginal gradient is the one-sided derivative
//! `∂L/∂μ_i = Σ_j w_ij (G_ij − b_j)`, `w_i· = softmax_j((g_j − C_ij)/ε)` (the plan row that an
//! infinitesimal mass at `i` would get); the solver's methods from a problem compute it, the
//! plan-only [`SinkhornSolver::plan_gradients`] cannot (it has no cost) and returns 0 there.
//!
//! **Unbalanced** ([`Problem::relaxed`](crate::Problem::relaxed), see
//! [`crate::unbalanced`]). The relaxed half-step `f = ε log μ − φ_μ ε LSE_j((g_j − C_ij)/ε)`,
//! `φ = ρ/(ρ + ε)`, holds at the optimum, i.e. with `r = P·1` (`log r_i = f_i/ε + LSE_j`):
//! `log r_i = (1/φ_μ) log μ_i − (1/φ_μ − 1) f_i/ε`, and the same for `c = Pᵀ·1`. Linearising
//! in `u = df/ε`, `v = dg/ε` (`dr = diag(r)u + P v − (dC⊙P)·1/ε`) gives the adjoint system
//!
//! `[diag(r)/φ_μ P; Pᵀ diag(c)/φ_ν]·[a; b] = [(G⊙P)·1; (G⊙P)ᵀ·1]`,
//!
//! the balanced one with its diagonal blocks divided by `φ ≤ 1`: positive definite once one
//! side is relaxed (no null space, no representative to choose; with `μ = ν = 1` its Schur
//! complement is `(I − φ_μ φ_ν RᵀR)/φ_ν`), solved by the same CG. Then `∂L/∂C` is as above and
//!
//! `∂L/∂μ_i = r_i a_i/(φ_μ μ_i)`,  `∂L/∂ν_j = c_j b_j/(φ_ν ν_j)`
//!
//! (`= a`, `b` in the balanced case, where `r = μ`), for independent perturbations of every
//! weight (the masses are free). On a zero-mass bin the one-sided derivative keeps its form,
//! with `w_i·` the relaxed row `exp((f⁰_i + g_j − C_ij)/ε)`, `f⁰_i = −φ_μ ε LSE_j((g_j − C_ij)/ε)`.
//! [`SinkhornSolver::plan_gradients`] (no problem, no relaxation) is balanced only.
//!
//! **Envelope.** The regularised objective `OT_ε = ⟨P,C⟩ + ε Σ P_ij (log P_ij − 1)
//! = ⟨f,μ⟩ + ⟨g,ν⟩ − ε Σ P_ij` at the optimum has, by the envelope theorem, `∂/∂C = P`,
//! `∂/∂μ = f`, `∂/∂ν = g` (no linear solve): [`SinkhornSolver::envelope_gradients`]. These are the
//! gradients of `OT_ε`, not of the transport cost `⟨P,C⟩`.
//!
//! Unbalanced, the objective is [`SinkhornResult::objective`]
//! `⟨P,C⟩ + ε KL(P‖μ⊗ν) + ρ_μ KL(P1‖μ) + ρ_ν KL(Pᵀ1‖ν)` (POT's convention, generalized KL),
//! equal at the optimum to its dual in the relative potentials `f̂ = f − ε log μ`,
//! `ĝ = g − ε log ν`:
//!
//! `D = Σ_i μ_i ψ_μ(f̂_i) + Σ_j ν_j ψ_ν(ĝ_j) − ε (Σ_ij P_ij − Σμ Σν)`,  `ψ(t) = −ρ (e^{−t/ρ} − 1)`
//!
//! (`ψ(t) = t` for `ρ = ∞`), maximised by `(f̂, ĝ)`. The envelope theorem gives `∂/∂C = P` and
//! `∂/∂μ_i = ψ_μ(f̂_i) − ε (r_i/μ_i − Σν)` (`r_i/μ_i = e^{−f̂_i/ρ_μ}` at the optimum), the same
//! for `ν`; `value` is `D`.

mod adjoint;
mod envelope;

pub(crate) use crate::entropic::dual_system::Adjoint;

use crate::backend::{grad::GradKernels, Backend, CostSource, Side};
use crate::cg::{CgParams, CgReport};
use crate::entropic::sinkhorn::{
    relax_side, PreparedProblem, Problem, SinkhornResult, SinkhornSolver, Solution,
};
use crate::entropic::unbalanced::phi;
use crate::validate::{check_eps, check_finite};
use crate::{Error, Real, Result};
use adjoint::solve_adjoint;
use ndarray::{Array1, Array2, Array3, ArrayView3};

/// Gradients of a loss `L(P)` with respect to the inputs of the plan.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PlanGradients<T> {
    /// `∂L/∂C`, `B×n×m` (one matrix per problem).
    pub cost: Array3<T>,
    /// `∂L/∂μ`, `B×n`, zero-mean per problem.
    pub mu: Array2<T>,
    /// `∂L/∂ν`, `B×m`, in the same representative as `mu` (see the module docs).
    pub nu: Array2<T>,
    /// How the adjoint CG solve ended.
    pub cg: CgReport,
}

/// A solved batch with exact (implicit) gradients of a loss of its plans.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OtGradients<T> {
    /// Potentials, distances `⟨P,C⟩` and Sinkhorn convergence.
    pub result: SinkhornResult<T>,
    /// `∂L/∂C`, `B×n×m`.
    pub cost: Array3<T>,
    /// `∂L/∂μ`, `B×n`: balanced, zero-mean per problem; unbalanced, the unique gradient
    /// (every weight free).
    pub mu: Array2<T>,
    /// `∂L/∂ν`, `B×m`, in the same representative as `mu`.
    pub nu: Array2<T>,
    /// How the adjoint CG solve ended.
    pub cg: CgReport,
}

/// Envelope-theorem gradients of the regularised objective
/// `OT_ε = ⟨P,C⟩ + ε Σ P (log P − 1) = ⟨f,μ⟩ + ⟨g,ν⟩ − ε Σ P`; for unbalanced problems of
/// the unbalanced objective (its dual `D`, see the module docs).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EnvelopeGradients<T> {
    /// Potentials, transport costs `⟨P,C⟩` and convergence.
    pub result: SinkhornResult<T>,
    /// `OT_ε` of each problem (unbalanced: the dual value `D`).
    pub value: Array1<T>,
    /// `∂OT_ε/∂C = P`, `B×n×m`.
    pub cost: Array3<T>,
    /// `∂OT_ε/∂μ = f`, shifted to zero mean over the support (−∞ on zero-mass bins: the
    /// entropy's one-sided derivative there). Unbalanced:
    /// `∂D/∂μ_i = ψ_μ(f̂_i) − ε ((P·1)_i/μ_i − Σν)`, unique and finite (one-sided on empty bins).
    pub mu: Array2<T>,
    /// `∂OT_ε/∂ν = g`, shifted by the opposite constant (unbalanced: as `mu`, for `ν`).
    pub nu: Array2<T>,
}

/// The caller's buffers the gradients with respect to the cost and the marginals go to
/// ([`BufferOutputs::wasserstein_gradients`](crate::BufferOutputs::wasserstein_gradients),
/// [`SinkhornSolver::plan_gradients_buffers`]).
#[derive(Debug)]
pub struct GradientBuffers<'a, Buf> {
    /// `∂/∂C`, `B×n×m`.
    pub cost: &'a mut Buf,
    /// `∂/∂μ`, `B×n`.
    pub mu: &'a mut Buf,
    /// `∂/∂ν`, `B×m`.
    pub nu: &'a mut Buf,
}

impl<Buf> GradientBuffers<'_, Buf> {
    /// Copy `∂C` (`B×n×m`), `∂μ` (`B×n`) and `∂ν` (`B×m`) into the caller's buffers,
    /// each checked for its length first.
    pub(crate) fn write<T: Real, B: Backend<T, Buffer = Buf>>(
        self,
        be: &B,
        (batch, n, m): (usize, usize, usize),
        [cost, mu, nu]: [&Buf; 3],
    ) -> Result<()> {
        crate::backend::check_buffer_len("grad_cost", be.len(self.cost), batch * n * m)?;
        crate::backend::check_buffer_len("grad_mu", be.len(self.mu), batch * n)?;
        crate::backend::check_buffer_len("grad_nu", be.len(self.nu), batch * m)?;
        be.offset_rows(cost, &[], self.cost)?;
        be.offset_rows(mu, &[], self.mu)?;
        be.offset_rows(nu, &[], self.nu)
    }
}

/// Gradients of a prepared batch, on the backend.
pub(crate) struct PreparedGradients<T: Real, B: Backend<T>> {
    /// Potentials (`g` without the cost offsets) and the offsets.
    pub f: B::Buffer,
    pub g: B::Buffer,
    pub shift: Vec<f64>,
    pub solution: Solution,
    /// The plans `B×n×m`.
    pub plan: B::Buffer,
    /// `∂L/∂C`, `∂L/∂μ`, `∂L/∂ν`.
    pub cost: B::Buffer,
    pub a: B::Buffer,
    pub b: B::Buffer,
    pub cg: CgReport,
}

/// The zero-mean representative: each problem's `(a, b)` shifted by `(−k, +k)`,
/// `k = mean(a)` (the sum in f64 from [`Backend::row_stats`]), on the backend.
fn centre_on<T: Real, B: Backend<T>>(
    be: &B,
    a: &mut B::Buffer,
    b: &mut B::Buffer,
    batch: usize,
) -> Result<()> {
    let n = be.len(a) / batch;
    let mean: Vec<f64> = be
        .row_stats(a, batch)?
        .iter()
        .map(|s| s.sum / n as f64)
        .collect();
    let minus: Vec<f64> = mean.iter().map(|k| -k).collect();
    let mut a_new = be.filled(be.len(a), T::zero())?;
    be.offset_rows(a, &minus, &mut a_new)?;
    *a = a_new;
    let mut b_new = be.filled(be.len(b), T::zero())?;
    be.offset_rows(b, &mean, &mut b_new)?;
    *b = b_new;
    Ok(())
}

/// [`check_output`] on the backend: the non-finite count per problem, the buffer read only
/// for the error.
fn check_output_on<T: Real, B: Backend<T>>(
    be: &B,
    what: &str,
    v: &B::Buffer,
    batch: usize,
) -> Result<()> {
    if be.row_stats(v, batch)?.iter().any(|s| s.non_finite > 0) {
        check_output(what, &be.download(v)?)?;
    }
    Ok(())
}

pub(super) fn array2<T>(rows: usize, cols: usize, v: Vec<T>) -> Result<Array2<T>> {
    Array2::from_shape_vec((rows, cols), v).map_err(|e| Error::Numerical(e.to_string()))
}
pub(super) fn array3<T>(d: (usize, usize, usize), v: Vec<T>) -> Result<Array3<T>> {
    Array3::from_shape_vec(d, v).map_err(|e| Error::Numerical(e.to_string()))
}

pub(super) fn check_output<T: Real>(what: &str, v: &[T]) -> Result<()> {
    if let Some(k) = v.iter().position(|x| !x.is_finite()) {
        return Err(Error::Numerical(format!(
            "{what}: non-finite gradient entry {} at flat index {k}",
            v[k]
        )));
    }
    Ok(())
}

impl<Bk> SinkhornSolver<Bk> {
    /// Exact gradients of a loss `L(P)` through given Sinkhorn plans `plan` (`B×n×m`,
    /// converged, at this solver's ε), for the upstream gradient `upstream = ∂L/∂P`
    /// (`B×n×m`), on this solver's backend. No problem is solved: the plans' own marginals
    /// stand for `μ` and `ν` (balanced). See the module docs for the math, the representative
    /// of `(∂μ, ∂ν)` and zero-mass bins.
    ///
    /// ```
    /// use logot::grad::CgParams;
    /// use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::{array, Array3, Axis};
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1));
    /// let cg = CgParams::default();
    /// // L(P) = Σ P, the common mass of μ and ν: no gradient through C, and in the zero-mean
    /// // representative ∂L/∂μ = 0, ∂L/∂ν = 1 (one more unit of mass costs one unit of L).
    /// let plan = Array3::from_shape_fn((1, 3, 2), |(_, i, j)| 0.05 + 0.1 * ((i + j) % 3) as f64);
    /// let g = solver.plan_gradients(plan.view(), Array3::ones((1, 3, 2)).view(), &cg)?;
    /// assert!(g.cost.iter().all(|v| v.abs() < 1e-9));
    /// assert!(g.mu.iter().all(|v| v.abs() < 1e-9) && g.nu.iter().all(|v| (v - 1.0).abs() < 1e-9));
    /// // From a solved plan: the upstream G = C gives the implicit part of ∂⟨P,C⟩/∂C, the same
    /// // as `implicit_gradients` computes from the problem itself.
    /// let (mu, nu, cost) = (array![0.3f64, 0.7], array![0.6, 0.4], array![[0.0, 1.0], [0.5, 0.2]]);
    /// let problem = Problem::new(mu.view(), nu.view(), cost.view())?;
    /// let plan = solver.coupling(&problem)?.plan;
    /// let upstream = cost.clone().insert_axis(Axis(0));
    /// let from_plan = solver.plan_gradients(plan.view(), upstream.view(), &cg)?;
    /// let from_problem = solver.implicit_gradients(&problem, |_| upstream.clone(), &cg)?;
    /// assert!((&from_plan.cost - &from_problem.cost).iter().all(|d| d.abs() < 1e-7));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn plan_gradients<T: Real>(
        &self,
        plan: ArrayView3<'_, T>,
        upstream: ArrayView3<'_, T>,
        cg: &CgParams,
    ) -> Result<PlanGradients<T>>
    where
        Bk: GradKernels<T>,
    {
        let be = self.backend();
        check_eps("eps", self.params().eps)?;
        let (batch, n, m) = plan.dim();
        if batch == 0 || n == 0 || m == 0 {
            return Err(Error::Empty {
                arg: "plan".into(),
                detail: format!("shape {batch}×{n}×{m}"),
            });
        }
        if upstream.dim() != plan.dim() {
            return Err(Error::shape(
                "upstream",
                format!("is {:?} but the plan is {:?}", upstream.dim(), plan.dim()),
            ));
        }
        let p = be.upload(&plan.iter().copied().collect::<Vec<T>>())?;
        let g = be.upload(&upstream.iter().copied().collect::<Vec<T>>())?;
        let mut cost = be.filled(batch * n * m, T::zero())?;
        let mut a = be.filled(batch * n, T::zero())?;
        let mut b = be.filled(batch * m, T::zero())?;
        let out = GradientBuffers {
            cost: &mut cost,
            mu: &mut a,
            nu: &mut b,
        };
        let cg = self.plan_gradients_buffers(&p, (batch, n, m), &g, cg, out)?;
        Ok(PlanGradients {
            cost: array3((batch, n, m), be.download(&cost)?)?,
            mu: array2(batch, n, be.download(&a)?)?,
            nu: array2(batch, m, be.download(&b)?)?,
            cg,
        })
    }

    /// [`SinkhornSolver::plan_gradients`] for a plan and an upstream gradient already on the
    /// backend (`B×n×m` each, e.g. a caller's device memory), the gradients written into the
    /// caller's buffers: `∂L/∂C` (`B×n×m`), `∂L/∂μ` (`B×n`, zero-mean per problem), `∂L/∂ν`
    /// (`B×m`). The checks (finite, non-negative plan; finite upstream) are per-row
    /// reductions on the backend with the errors of the host-array form; only per-problem
    /// numbers cross to the host.
    pub fn plan_gradients_buffers<T: Real>(
        &self,
        plan: &Bk::Buffer,
        (batch, n, m): (usize, usize, usize),
        upstream: &Bk::Buffer,
        cg: &CgParams,
        out: GradientBuffers<'_, Bk::Buffer>,
    ) -> Result<CgReport>
    where
        Bk: GradKernels<T>,
    {
        let be = self.backend();
        let eps = self.params().eps;
        check_eps("eps", eps)?;
        if batch == 0 || n == 0 || m == 0 {
            return Err(Error::Empty {
                arg: "plan".into(),
                detail: format!("shape {batch}×{n}×{m}"),
            });
        }
        let len = batch * n * m;
        crate::backend::check_buffer_len("plan", be.len(plan), len)?;
        crate::backend::check_buffer_len("upstream", be.len(upstream), len)?;
        let (ps, us) = (be.row_stats(plan, batch)?, be.row_stats(upstream, batch)?);
        let bad = |s: &[crate::backend::RowStats], neg: bool| {
            s.iter()
                .any(|s| s.non_finite > 0 || (neg && s.negative > 0))
        };
        if bad(&ps, true) || bad(&us, false) {
            // The errors of the host checks, naming the first offending entry.
            let (ph, uh) = (be.download(plan)?, be.download(upstream)?);
            let shape = |v| {
                ArrayView3::from_shape((batch, n, m), v)
                    .map_err(|e| Error::shape("plan", e.to_string()))
            };
            let (pv, uv) = (shape(&ph)?, shape(&uh)?);
            check_finite("plan", &pv)?;
            check_finite("upstream", &uv)?;
            if let Some((idx, v)) = pv.indexed_iter().find(|(_, v)| **v < T::zero()) {
                return Err(Error::NegativeMass {
                    arg: "plan".into(),
                    index: format!("{idx:?}"),
                    value: v.to_string(),
                });
            }
        }
        let adj = solve_adjoint(be, plan, (batch, n, m), upstream, None, cg)?;
        let cost = be.assemble_gradient(
            plan,
            n,
            m,
            upstream,
            &adj.a,
            &adj.b,
            T::zero(),
            T::of(-1.0 / eps),
        )?;
        let (mut a, mut b) = (adj.a, adj.b);
        centre_on(be, &mut a, &mut b, batch)?;
        check_output_on(be, "cost", &cost, batch)?;
        check_output_on(be, "mu", &a, batch)?;
        check_output_on(be, "nu", &b, batch)?;
        out.write(be, (batch, n, m), [&cost, &a, &b])?;
        Ok(adj.cg)
    }
}

/// The cost as a host vector: one `n×m` matrix (shared) or `B×n×m`.
fn cost_values<T: Real>(cost: &CostSource<'_, T>) -> Result<Vec<T>> {
    match cost {
        CostSource::Dense(c) => crate::alloc::collected("upstream", c.len(), c.iter().copied()),
        CostSource::DenseBatch(c) => {
            crate::alloc::collected("upstream", c.len(), c.iter().copied())
        }
        #[allow(unreachable_patterns)]
        _ => Err(Error::Unavailable(
            "implicit OT gradients need a dense cost (for point clouds, \
             SinkhornSolver::transport_point_gradients differentiates ⟨P,C⟩ with respect to the points)"
                .into(),
        )),
    }
}

impl<Bk> SinkhornSolver<Bk> {
    /// Transport costs `⟨P_b, C_b⟩` with their exact gradients with respect to the cost, `μ`
    /// and `ν` (implicit differentiation through the converged plan; upstream `G = C` plus
    /// the explicit term `∂⟨P,C⟩/∂C = P`). `∂/∂μ` is the zero-mean representative; for an
    /// unbalanced problem ([`Problem::relaxed`]) the unique gradient, every weight free (see the module docs for the adjoint system).
    ///
    /// Check `result.convergence` and `cg`: the gradients are exact for a converged plan.
    ///
    /// ```
    /// use logot::{grad::CgParams, CpuBackend, Problem, Relaxation, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::{array, Array1};
    /// let (mu, nu) = (array![0.5f64, 0.5], array![0.25, 0.75]);
    /// let cost = array![[0.0, 1.0], [1.0, 0.0]];
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1));
    /// let g = solver.wasserstein_gradients(&Problem::new(mu.view(), nu.view(), cost.view())?, &CgParams::default())?;
    /// assert!(g.cg.all_converged());
    /// assert!(g.mu.sum().abs() < 1e-12); // zero-mean representative
    /// // Unbalanced (unequal masses, ρ = 0.5): ∂⟨P,C⟩/∂μ_0 against a central difference.
    /// let nu = array![0.5, 1.0];
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1).tol(1e-14).max_iters(100_000));
    /// let distance = |mu: &Array1<f64>| -> logot::Result<f64> {
    ///     let problem = Problem::new(mu.view(), nu.view(), cost.view())?.relaxed(Relaxation::kl(0.5));
    ///     Ok(solver.solve(&problem)?.distance[0])
    /// };
    /// let problem = Problem::new(mu.view(), nu.view(), cost.view())?.relaxed(Relaxation::kl(0.5));
    /// let g = solver.wasserstein_gradients(&problem, &CgParams::default())?;
    /// let h = 1e-6;
    /// let numeric = (distance(&array![0.5 + h, 0.5])? - distance(&array![0.5 - h, 0.5])?) / (2.0 * h);
    /// assert!((numeric - g.mu[[0, 0]]).abs() < 1e-7, "{numeric} vs {}", g.mu[[0, 0]]);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn wasserstein_gradients<T: Real>(
        &self,
        problem: &Problem<'_, T>,
        cg: &CgParams,
    ) -> Result<OtGradients<T>>
    where
        Bk: GradKernels<T>,
    {
        let dims = [
            problem.batch_size(),
            problem.mu().ncols(),
            problem.nu().ncols(),
        ];
        let cost_bytes = self.backend().host_cost_bytes(problem.cost());
        crate::entropic::sinkhorn::check_coupling_peak::<T>(&dims, cost_bytes)?;
        let upstream = cost_values(problem.cost())?;
        self.gradients_with(problem, upstream, T::one(), cg)
    }

    /// Exact gradients of a loss `L(P)` of the plans with respect to the cost, `μ` and `ν`:
    /// `upstream` receives the solved batch (plans `B×n×m` and potentials) and returns
    /// `∂L/∂P` (`B×n×m`). `L` is assumed not to depend on the cost except through `P`.
    ///
    /// ```
    /// use logot::{grad::CgParams, CpuBackend, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::array;
    /// // ⟨P, C⟩ depends on C directly (∂ = P) and through P (the implicit part, with G = C):
    /// // wasserstein_gradients = P + implicit_gradients(G = C).
    /// let (mu, nu, cost) = (array![0.2f64, 0.8], array![0.5, 0.5], array![[0.0, 1.0], [0.4, 0.1]]);
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05));
    /// let problem = Problem::new(mu.view(), nu.view(), cost.view())?;
    /// let cg = CgParams::default();
    /// let upstream = cost.clone().insert_axis(logot::ndarray::Axis(0));
    /// let implicit = solver.implicit_gradients(&problem, |_| upstream.clone(), &cg)?;
    /// let total = solver.wasserstein_gradients(&problem, &cg)?;
    /// let plan = solver.coupling(&problem)?.plan;
    /// assert!((&total.cost - &implicit.cost - &plan).iter().all(|d| d.abs() < 1e-7));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn implicit_gradients<T: Real>(
        &self,
        problem: &Problem<'_, T>,
        upstream: impl FnOnce(&crate::CouplingResult<T>) -> Array3<T>,
        cg: &CgParams,
    ) -> Result<OtGradients<T>>
    where
        Bk: GradKernels<T>,
    {
        let coupling = self.coupling(problem)?;
        let g = upstream(&coupling);
        if g.dim() != coupling.plan.dim() {
            return Err(Error::shape(
                "upstream",
                format!(
                    "is {:?} but the plans are {:?}",
                    g.dim(),
                    coupling.plan.dim()
                ),
            ));
        }
        check_finite("upstream", &g)?;
        self.gradients_with(problem, g.iter().copied().collect(), T::zero(), cg)
    }

    /// Shared core of the host entry points: upload, [`SinkhornSolver::gradients_prepared`],
    /// download.
    fn gradients_with<T: Real>(
        &self,
        problem: &Problem<'_, T>,
        upstream: Vec<T>,
        explicit: T,
        cg: &CgParams,
    ) -> Result<OtGradients<T>>
    where
        Bk: GradKernels<T>,
    {
        cg.validate()?;
        let be = self.backend();
        let prepared = self.prepare(problem)?;
        let g = be.upload(&upstream)?;
        let d = self.gradients_prepared(&prepared, &g, explicit, cg)?;
        let (batch, n, m) = prepared.dims();
        let result = self.finish_parts(
            (batch, n, m),
            &d.f,
            &d.g,
            &d.shift,
            &d.solution.convergence,
            &d.solution.distance,
            d.solution.objective.as_deref(),
        )?;
        Ok(OtGradients {
            result,
            cost: array3((batch, n, m), be.download(&d.cost)?)?,
            mu: array2(batch, n, be.download(&d.a)?)?,
            nu: array2(batch, m, be.download(&d.b)?)?,
            cg: d.cg,
        })
    }

    /// Solve a prepared batch, build the plan, adjoint solve, assemble
    /// `∂L/∂C = (explicit − (1/ε)(G − a − b))⊙P`, the marginal gradients (balanced: `(a, b)`
    /// centred; unbalanced: `(a ⊙ P·1/(φ_μ μ), b ⊙ Pᵀ·1/(φ_ν ν))`), fix zero-mass bins; all
    /// on the backend. `upstream` is `G` (`B×n×m`, or one `n×m` shared).
    pub(crate) fn gradients_prepared<T: Real>(
        &self,
        pr: &PreparedProblem<T, Bk>,
        upstream: &Bk::Buffer,
        explicit: T,
        cg: &CgParams,
    ) -> Result<PreparedGradients<T, Bk>>
    where
        Bk: GradKernels<T>,
    {
        cg.validate()?;
        pr.check_plan()?;
        let be = self.backend();
        let relax = pr.relaxation;
        let eps_f = self.params().eps;
        let phis = relax.map(|r| (phi(r.rho_mu, eps_f), phi(r.rho_nu, eps_f)));
        let (batch, n, m) = pr.dims();
        let (f, g_pot, solution) = self.iterate_prepared(pr)?;
        self.check_distances::<T>(&solution.distance)?;
        let cost_ref = pr.cost();
        let eps = T::of(eps_f);
        let plan = be.plan(cost_ref, &f, &g_pot, eps)?;
        let g = upstream;
        let adj = solve_adjoint(be, &plan, (batch, n, m), g, phis, cg)?;
        let cost =
            be.assemble_gradient(&plan, n, m, g, &adj.a, &adj.b, explicit, -T::one() / eps)?;
        let minus_one = vec![-1.0; batch];
        // One-sided derivatives on empty bins, from the unscaled adjoint: on an empty row,
        // ∂L/∂μ_i = Σ_j w_ij (G_ij − b_j), with w_i· the row an infinitesimal mass at i would
        // get, `exp((f⁰_i + g_j − C_ij)/ε)`, f⁰ the half-step with log μ = 0 (balanced: a
        // softmax; unbalanced: relaxed); on an empty column alike.
        let empty_rows = if pr.empty_mu {
            let zeros = be.filled(batch * n, T::zero())?;
            let mut f0 = be.filled(batch * n, T::zero())?;
            be.sinkstep(cost_ref, Side::Row, eps, &g_pot, &zeros, &mut f0)?;
            if let Some(r) = relax {
                relax_side(be, &mut f0, &zeros, eps_f, r.rho_mu)?;
            }
            let w = be.plan(cost_ref, &f0, &g_pot, eps)?;
            let (sw, _) = be.weighted_marginals(&w, n, m, Some(g))?;
            let mut t = be.filled(batch * n, T::zero())?;
            be.plan_matvec(&w, n, m, &adj.b, &mut t)?;
            be.batched_xpby(&sw, &minus_one, &mut t)?;
            Some(t)
        } else {
            None
        };
        let empty_cols = if pr.empty_nu {
            let zeros = be.filled(batch * m, T::zero())?;
            let mut g0 = be.filled(batch * m, T::zero())?;
            be.sinkstep(cost_ref, Side::Col, eps, &f, &zeros, &mut g0)?;
            if let Some(r) = relax {
                relax_side(be, &mut g0, &zeros, eps_f, r.rho_nu)?;
            }
            let w = be.plan(cost_ref, &f, &g0, eps)?;
            let (_, sw) = be.weighted_marginals(&w, n, m, Some(g))?;
            let mut t = be.filled(batch * m, T::zero())?;
            be.plan_matvec_t(&w, n, m, &adj.a, &mut t)?;
            be.batched_xpby(&sw, &minus_one, &mut t)?;
            Some(t)
        } else {
            None
        };
        let (mut a, mut b) = (adj.a, adj.b);
        if let Some((phi_mu, phi_nu)) = phis {
            // ∂L/∂μ_i = (P·1)_i·a_i/(φ_μ μ_i), ∂L/∂ν_j = (Pᵀ·1)_j·b_j/(φ_ν ν_j).
            let (rows, cols) = be.weighted_marginals(&plan, n, m, None)?;
            let scale = |v: &mut Bk::Buffer, mass: &Bk::Buffer, w: &Bk::Buffer, phi: f64| {
                let (mut h, mass, w) = (be.download(v)?, be.download(mass)?, be.download(w)?);
                for ((v, r), &w) in h.iter_mut().zip(mass).zip(w.iter()) {
                    if w > T::zero() {
                        *v = T::of(v.f64() * r.f64() / (phi * w.f64()));
                    }
                }
                *v = be.upload(&h)?;
                Ok::<(), Error>(())
            };
            scale(&mut a, &rows, pr.mu(), phi_mu)?;
            scale(&mut b, &cols, pr.nu(), phi_nu)?;
        }
        if let Some(t) = empty_rows {
            be.where_empty(pr.mu(), &t, &mut a)?;
        }
        if let Some(t) = empty_cols {
            be.where_empty(pr.nu(), &t, &mut b)?;
        }
        if relax.is_none() {
            centre_on(be, &mut a, &mut b, batch)?;
        }
        check_output_on(be, "cost", &cost, batch)?;
        check_output_on(be, "mu", &a, batch)?;
        check_output_on(be, "nu", &b, batch)?;
        Ok(PreparedGradients {
            shift: pr.shifts().to_vec(),
            f,
            g: g_pot,
            solution,
            plan,
            cost,
            a,
            b,
            cg: adj.cg,
        })
    }

    /// For a problem with zero-mass bins on `side`, the relative potential each bin of that
    /// side would take, `φ·(−ε LSE_j((g_j − C_ij)/ε))` (the relaxed half-step with
    /// `log a = 0`) from the partner's potentials `other` (`B×len` of the other side);
    /// `None` when every bin has mass.
    pub(crate) fn empty_bin_potentials<T: Real>(
        &self,
        problem: &Problem<'_, T>,
        side: Side,
        other: &Array2<T>,
        rho: f64,
    ) -> Result<Option<Vec<T>>>
    where
        Bk: Backend<T>,
    {
        let weights = match side {
            Side::Row => problem.mu(),
            Side::Col => problem.nu(),
        };
        if !weights.iter().any(|&v| v == T::zero()) {
            return Ok(None);
        }
        let be = self.backend();
        let eps = self.params().eps;
        // Unbalanced solves keep the cost as it is (no offsets).
        let cost = be.prepare_cost(problem.cost())?;
        let other = be.upload(&other.iter().copied().collect::<Vec<T>>())?;
        let zeros = be.filled(weights.len(), T::zero())?;
        let mut out = be.filled(weights.len(), T::zero())?;
        be.sinkstep(&cost, side, T::of(eps), &other, &zeros, &mut out)?;
        relax_side(be, &mut out, &zeros, eps, rho)?;
        Ok(Some(be.download(&out)?))
    }
}
