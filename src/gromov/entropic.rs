//! Entropic (fused) Gromov–Wasserstein by mirror descent, POT's
//! `entropic_gromov_wasserstein` / `entropic_fused_gromov_wasserstein` with
//! `solver="PGD"`: from a plan `T₀`,
//!
//! `T_{k+1} = argmin_{T ∈ Π(p, q)} ⟨∇F(T_k), T⟩ − ε·H(T) = Sinkhorn(p, q, ∇F(T_k), ε)`,
//!
//! `∇F(T) = (1 − α)·M + α·(r ⊕ c − 2·X(T))` ([`crate::gromov::loss`]). A fixed point is a
//! stationary plan of `F(T) − ε·H(T)` on the transport polytope. Each inner solve is
//! log-domain Sinkhorn on the cost `(1 − α)·M − 2α·X(T_k)` (the row and column terms
//! `r ⊕ c` only shift the potentials), warm-started from the previous potentials; the
//! cost is formed on the device by the backend's GEMM and the plan never leaves it until
//! the end. Sinkhorn stalls on nearly deterministic plans (its contraction factor tends
//! to 1 as ε falls below the cost's gaps); an inner solve it does not end is finished by
//! Newton steps on the dual ([`crate::sinkhorn`]'s Newton finish), so its marginals are
//! met. The stopping rule is POT's: `‖T_{k+1} − T_k‖_F ≤ tol`, tested at the outer
//! iterations `k = 0, check_every, 2·check_every, …`.

use super::loss::Structure;
use super::params::EntropicGwParams;
use super::problem::GromovProblem;
use crate::backend::grad::GradKernels;
use crate::backend::linalg::{GemmShape, LinalgKernels};
use crate::sinkhorn::{newton_finish, BufferProblem, Convergence, DeviceStart};
use crate::SinkhornSolver;
use crate::{Real, Result};
use ndarray::{Array1, Array2};

/// The most Newton steps finishing one inner solve.
const NEWTON_STEPS: usize = 30;

/// How an entropic Gromov–Wasserstein solve ended; every figure describes the plan
/// handed back.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GromovReport {
    /// Outer (mirror-descent) iterations run.
    pub iterations: usize,
    /// The last outer step was at most the tolerance (`tol`, or POT's default 1e-9 when
    /// `tol = 0`) and the last inner solve met its marginal tolerance.
    pub converged: bool,
    /// `‖T − T_prev‖_F` of the last outer iteration (the plan returned and the one before).
    pub step: f64,
    /// The steps measured at the checks, in order (POT's `log["err"]`).
    pub steps: Vec<f64>,
    /// `max_ij |∇F(T) − G_ij|`, `G` the gradient whose Sinkhorn plan `T` is (that of the
    /// previous plan): `T` is a fixed point of the iteration, a stationary plan of
    /// `F − ε·H`, when this is 0 (in the cost's units; compare with ε).
    pub stationarity: f64,
    /// `max(‖T·1 − p‖₁, ‖Tᵀ·1 − q‖₁)` of the returned plan.
    pub marginal_error: f64,
    /// Sinkhorn iterations summed over the inner solves.
    pub inner_iterations: usize,
    /// Inner solves that ended without meeting their marginal tolerance.
    pub inner_unconverged: usize,
    /// Newton steps on the dual that finished inner solves Sinkhorn did not end (it
    /// stalls on nearly deterministic plans; [`crate::sinkhorn`]'s `newton` finish).
    pub newton_steps: usize,
    /// The report of the last inner solve.
    pub inner: Convergence,
}

/// A solved entropic (fused) Gromov–Wasserstein problem.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EntropicGromov<T> {
    /// The plan `T` (`n×m`).
    pub plan: Array2<T>,
    /// `F(T) = (1 − α)·⟨M, T⟩ + α·⟨L⊗T, T⟩` without the entropy (POT's `gw_dist`, and
    /// `fgw_dist` for fused problems; [`crate::gromov::objective`]).
    pub value: f64,
    /// `(1 − α)·⟨M, T⟩` (POT's `lin_loss`; 0 without a feature cost).
    pub linear: f64,
    /// `α·⟨L⊗T, T⟩` (POT's `quad_loss`).
    pub quadratic: f64,
    /// Potentials of the last inner solve in the units of the gradient:
    /// `T_ij = exp((f_i + g_j − G_ij)/ε)` with `G = ∇F(T_prev)` (POT's `ε·log u`, `ε·log v`
    /// of the last `ot.sinkhorn`), `−∞` on zero-mass bins.
    pub f: Array1<f64>,
    /// See [`EntropicGromov::f`].
    pub g: Array1<f64>,
    /// Regularisation of the inner solves.
    pub eps: f64,
    /// Whether the structures were treated as symmetric.
    pub symmetric: bool,
    /// Outer and inner convergence.
    pub report: GromovReport,
}

/// Entropic (fused) Gromov–Wasserstein on a chosen backend.
///
/// ```
/// use logot::gromov::{EntropicGwParams, GromovProblem, GromovSolver};
/// use logot::CpuBackend;
/// use ndarray::{array, Array2};
/// // Three points on a line and a reflected copy: the plan matches each point to its image.
/// let x = [0.0f64, 1.0, 3.0];
/// let y = [3.0f64, 2.0, 0.0];
/// let c1 = Array2::from_shape_fn((3, 3), |(i, k)| (x[i] - x[k]).abs());
/// let c2 = Array2::from_shape_fn((3, 3), |(j, l)| (y[j] - y[l]).abs());
/// let w = array![1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0];
/// let problem = GromovProblem::new(c1.view(), c2.view(), w.view(), w.view())?;
/// let r = GromovSolver::new(CpuBackend, EntropicGwParams::new(0.05)).solve(&problem)?;
/// // The report describes the plan handed back: its marginals are met to this error.
/// assert!(r.report.converged && r.report.marginal_error <= 1e-9);
/// for i in 0..3 {
///     assert!(r.plan[[i, i]] > 0.33 * w[i]); // mass on the diagonal: the isometry
/// }
/// # Ok::<(), logot::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct GromovSolver<B> {
    backend: B,
    params: EntropicGwParams,
}

impl<B> GromovSolver<B> {
    /// A solver on `backend` with `params`.
    pub fn new(backend: B, params: EntropicGwParams) -> Self {
        GromovSolver { backend, params }
    }
    /// The parameters.
    pub fn params(&self) -> &EntropicGwParams {
        &self.params
    }
    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The mirror descent from the problem's initial plan (see the module docs).
    pub fn solve<T: Real>(&self, problem: &GromovProblem<'_, T>) -> Result<EntropicGromov<T>>
    where
        B: LinalgKernels<T> + GradKernels<T> + Clone,
    {
        let p = &self.params;
        p.validate()?;
        problem.check_loss(p.loss)?;
        let be = &self.backend;
        let (n, m) = (problem.n(), problem.m());
        crate::alloc::probe::<T>("plan", &[n, m], 0)?;
        let symmetric = p.symmetric.unwrap_or_else(|| problem.looks_symmetric());
        let alpha = problem.alpha;
        let mut st = Structure::new(be, problem, p.loss, symmetric)?;
        st.precision = p.cross_precision;
        // (1 − α)·M, the linear part of every gradient.
        let feature = match problem.feature {
            Some(mf) => {
                let scaled: Vec<T> = mf.iter().map(|&v| T::of((1.0 - alpha) * v.f64())).collect();
                Some(be.upload(&scaled)?)
            }
            None => None,
        };
        let host = |a: &ndarray::ArrayView1<'_, T>| a.iter().copied().collect::<Vec<T>>();
        let (p_host, q_host) = (host(&problem.p), host(&problem.q));
        let to64 = |v: &[T]| v.iter().map(|x| x.f64()).collect::<Vec<f64>>();
        let (p64, q64) = (to64(&p_host), to64(&q_host));
        let mut newton_steps = 0;
        // The initial plan: the one given, or the product p·qᵀ formed on the device (a GEMM
        // of inner dimension 1: each entry the one rounding of p_i·q_j, as on the host).
        let mut t = match problem.init {
            Some(g0) => be.upload(&g0.iter().copied().collect::<Vec<T>>())?,
            None => {
                let mut t = be.filled(n * m, T::zero())?;
                be.gemm(
                    GemmShape::new(n, m, 1),
                    T::one(),
                    &be.upload(&p_host)?,
                    &be.upload(&q_host)?,
                    T::zero(),
                    &mut t,
                )?;
                t
            }
        };
        let mut x = be.filled(n * m, T::zero())?;
        let mut x_prev = be.filled(n * m, T::zero())?;
        let mut cost = be.filled(n * m, T::zero())?;
        st.cross(be, &t, T::one(), T::zero(), &mut x)?;

        let eps = T::of(p.eps);
        let two_alpha = T::of(2.0 * alpha);
        // One inner solver and one prepared problem for every outer iteration: the
        // marginals are uploaded and checked once, each new cost is written into the
        // prepared one, and each solve starts from the last one's potentials on the device.
        let solver = SinkhornSolver::new(be.clone(), p.inner());
        let mut prepared = None;
        let mut start: Option<DeviceStart<B::Buffer>> = None;
        let mass: f64 = p_host.iter().map(|v| v.f64()).sum();
        let mut steps = Vec::new();
        let (mut step, mut inner_iterations, mut inner_unconverged) = (f64::INFINITY, 0, 0);
        let mut inner_last = None;
        let mut it = 0;
        let mut err = f64::INFINITY;
        while it < p.max_iters && err > p.tol {
            // The inner cost (1 − α)·M − 2α·X(T_k).
            match &feature {
                Some(fm) => {
                    be.scaled_copy(T::one(), fm, &mut cost)?;
                    be.batched_axpy(&[-two_alpha.f64()], &x, &mut cost)?;
                }
                None => be.scaled_copy(-two_alpha, &x, &mut cost)?,
            }
            let prepared = match prepared.as_mut() {
                Some(pr) => {
                    solver.refill_dense(pr, &cost)?;
                    pr
                }
                None => prepared.insert(solver.prepare(BufferProblem::dense(
                    be.upload(&p_host)?,
                    be.upload(&q_host)?,
                    &cost,
                    (1, n, m),
                    false,
                ))?),
            };
            let (mut f, mut g, solution) = solver.iterate_prepared_from(prepared, start.take())?;
            let mut conv = solution.convergence;
            if !conv.converged {
                // Sinkhorn stalls on nearly deterministic plans: finish by Newton steps.
                let finish = newton_finish(
                    be,
                    prepared.cost(),
                    (n, m),
                    (&p64, &q64),
                    (&mut f, &mut g),
                    p.eps,
                    conv.tol * mass,
                    NEWTON_STEPS,
                )?;
                newton_steps += finish.steps;
                conv.marginal_error = finish.marginal_error;
                conv.converged = finish.marginal_error <= conv.tol * mass;
                for r in &mut conv.problems {
                    r.marginal_error = finish.marginal_error;
                    r.converged = conv.converged;
                }
            }
            inner_iterations += conv.iterations;
            inner_unconverged += usize::from(!conv.converged);
            inner_last = Some(conv);
            let t_next = be.plan(prepared.cost(), &f, &g, eps)?;
            start = Some(DeviceStart {
                f,
                g,
                g_shift: prepared.shifts().to_vec(),
            });
            // ‖T_{k+1} − T_k‖_F, with T_k overwritten by the difference.
            be.batched_axpy(&[-1.0], &t_next, &mut t)?;
            step = be.frobenius_norm(&t)?.f64();
            t = t_next;
            if it % p.check_every == 0 {
                err = step;
                steps.push(step);
            }
            std::mem::swap(&mut x, &mut x_prev);
            st.cross(be, &t, T::one(), T::zero(), &mut x)?;
            it += 1;
        }
        // The last inner solve's potentials, `g` with its cost's offset added back.
        let last = start.expect("max_iters ≥ 1 runs one inner solve");
        let f_host: Vec<f64> = be.download(&last.f)?.iter().map(|v| v.f64()).collect();
        let g_host: Vec<f64> = be
            .download(&last.g)?
            .iter()
            .map(|v| v.f64() + last.g_shift[0])
            .collect();
        let inner = inner_last.expect("max_iters ≥ 1 runs one inner solve");

        // ∇F(T) − G = −2α·(X(T) − X(T_prev)): its largest entry (x_prev becomes the
        // difference).
        be.batched_axpy(&[-1.0], &x, &mut x_prev)?;
        let diff = be.row_stats(&x_prev, 1)?[0];
        let stationarity = 2.0 * alpha * diff.min.abs().max(diff.max.abs());

        let (rows, cols) = be.weighted_marginals(&t, n, m, None)?;
        let (rows, cols) = (to64(&be.download(&rows)?), to64(&be.download(&cols)?));
        let l1 =
            |a: &[f64], b: &[T]| -> f64 { a.iter().zip(b).map(|(x, y)| (x - y.f64()).abs()).sum() };
        let marginal_error = l1(&rows, &p_host).max(l1(&cols, &q_host));
        let quadratic = alpha * st.loss_value(&rows, &cols, be.batched_dot(1, &x, &t)?[0]);
        let linear = match &feature {
            Some(fm) => be.batched_dot(1, fm, &t)?[0],
            None => 0.0,
        };
        let tol = if p.tol > 0.0 { p.tol } else { 1e-9 };
        let plan = Array2::from_shape_vec((n, m), be.download(&t)?)
            .map_err(|e| crate::Error::Numerical(e.to_string()))?;
        // Potentials in the units of the whole gradient: add back α·(r ⊕ c).
        let f = f_host
            .iter()
            .zip(&st.grad_rows)
            .map(|(v, r)| v + alpha * r)
            .collect();
        let g = g_host
            .iter()
            .zip(&st.grad_cols)
            .map(|(v, c)| v + alpha * c)
            .collect();
        let value = linear + quadratic;
        if !value.is_finite() {
            return Err(crate::Error::Numerical(format!(
                "the Gromov–Wasserstein value is {value} (eps = {} may be too small for {})",
                p.eps,
                T::NAME
            )));
        }
        Ok(EntropicGromov {
            plan,
            value,
            linear,
            quadratic,
            f,
            g,
            eps: p.eps,
            symmetric,
            report: GromovReport {
                iterations: it,
                converged: step <= tol && inner.converged,
                step,
                steps,
                stationarity,
                marginal_error,
                inner_iterations,
                inner_unconverged,
                newton_steps,
                inner,
            },
        })
    }
}
