//! Exact (fused) Gromov–Wasserstein by conditional gradient (Frank–Wolfe), POT's
//! `gromov_wasserstein` / `fused_gromov_wasserstein` with the exact line search
//! (`solve_gromov_linesearch`, `armijo = False`). From a feasible plan `G`:
//!
//! 1. linearise: `Mᵢ = ∇F(G) = (1 − α)·M + α·(r ⊕ c − 2·X(G))`;
//! 2. linear step: `G_c = argmin_{P ∈ Π(p, q)} ⟨Mᵢ, P⟩`, an exact OT problem solved by
//!    the network simplex of [`crate::exact`] ([`NetworkSimplex`], POT's `emd`) or any
//!    other [`LinearOtSolver`];
//! 3. line search along `Δ = G_c − G`: `F(G + s·Δ) = F(G) + b·s + a·s²` with
//!    `a = −α·⟨h1·Δ·h2ᵀ, Δ⟩` and `b = (1 − α)·⟨M, Δ⟩ − α·(⟨h1·Δ·h2ᵀ, G⟩ + ⟨h1·G·h2ᵀ, Δ⟩)`
//!    (the loss decomposes as `f1 + f2 − h1·h2`, and `⟨a ⊕ b, Δ⟩ = 0` for `Δ` with zero
//!    marginals), minimised in closed form over `s ∈ [0, 1]`;
//! 4. `G ← G + s·Δ` until the objective changes by at most `tol_rel` (relative) or `tol_abs`.
//!
//! The products `h1·G·h2ᵀ` follow `G` linearly (`+ s·h1·Δ·h2ᵀ`), so each iteration costs one
//! product of `Δ` (two for non-symmetric structures) on the device. The linear step runs on
//! the host in f64: the linearised cost is read back and the plan uploaded once per
//! iteration. After the loop one more linear step at the returned plan gives the
//! Frank–Wolfe gap `⟨∇F(G), G − G_c⟩ ≥ 0`, which is 0 exactly at a stationary plan, and the
//! dual potentials of the linearised problem there.

use super::loss::Structure;
use super::params::ConditionalGradientParams;
use super::problem::GromovProblem;
use crate::backend::grad::GradKernels;
use crate::backend::linalg::LinalgKernels;
use crate::exact::EmdParams;
use crate::{Error, Real, Result};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2};

/// An optimal plan of an exact OT problem with its dual potentials.
#[derive(Clone, Debug)]
pub struct LinearPlan {
    /// `P` (`n×m`) minimising `⟨C, P⟩` subject to `P·1 = p`, `Pᵀ·1 = q`, `P ≥ 0`.
    pub plan: Array2<f64>,
    /// Dual potentials: `f_i + g_j ≤ C_ij`, with equality where `P_ij > 0`.
    pub f: Array1<f64>,
    /// See [`LinearPlan::f`].
    pub g: Array1<f64>,
}

/// The linear step of the conditional gradient: an exact OT solver (a network simplex, or
/// any linear-programming solver) on host arrays in f64. Closures
/// `FnMut(&[f64], &[f64], ArrayView2<f64>) -> Result<LinearPlan>` implement it.
pub trait LinearOtSolver {
    /// An optimal plan between `p` (`n`) and `q` (`m`, same total) for `cost` (`n×m`).
    fn solve(&mut self, p: &[f64], q: &[f64], cost: ArrayView2<'_, f64>) -> Result<LinearPlan>;
}

impl<F> LinearOtSolver for F
where
    F: FnMut(&[f64], &[f64], ArrayView2<'_, f64>) -> Result<LinearPlan>,
{
    fn solve(&mut self, p: &[f64], q: &[f64], cost: ArrayView2<'_, f64>) -> Result<LinearPlan> {
        self(p, q, cost)
    }
}

/// The network simplex of [`crate::exact::emd`] as the linear step (POT's `emd` in its
/// conditional gradient). A linear problem the simplex does not solve to optimality within
/// its limits is an error: the line search needs the minimiser.
#[derive(Clone, Debug, Default)]
pub struct NetworkSimplex {
    /// The simplex's limits and method.
    pub params: EmdParams,
}

impl NetworkSimplex {
    /// The network simplex with `params`.
    pub fn new(params: EmdParams) -> Self {
        NetworkSimplex { params }
    }
}

impl LinearOtSolver for NetworkSimplex {
    fn solve(&mut self, p: &[f64], q: &[f64], cost: ArrayView2<'_, f64>) -> Result<LinearPlan> {
        let (p, q) = (ArrayView1::from(p), ArrayView1::from(q));
        let r = crate::exact::emd(p, q, cost, &self.params)?;
        if !r.converged {
            return Err(Error::Numerical(format!(
                "the network simplex stopped after {} iterations without an optimal plan of the linear step",
                r.iterations
            )));
        }
        Ok(LinearPlan {
            plan: r.plan.to_dense(),
            f: r.f,
            g: r.g,
        })
    }
}

/// How a conditional-gradient solve ended; the figures describe the plan handed back.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConditionalGradientReport {
    /// Frank–Wolfe iterations run.
    pub iterations: usize,
    /// The objective's last change met `tol_rel` or `tol_abs` (not the iteration limit).
    pub converged: bool,
    /// The Frank–Wolfe gap `⟨∇F(G), G − G_c⟩` at the returned plan (`G_c` the linear step
    /// there): `F(G) − F(G*) ≤ gap` would hold for a convex `F`; for GW it is 0 exactly at a
    /// stationary plan.
    pub gap: f64,
    /// `max(‖G·1 − p‖₁, ‖Gᵀ·1 − q‖₁)` of the returned plan.
    pub marginal_error: f64,
    /// The objective after each iteration as the line search predicts it, the initial plan's
    /// first (POT's `log["loss"]`).
    pub losses: Vec<f64>,
}

/// A solved exact (fused) Gromov–Wasserstein problem.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ExactGromov<T> {
    /// The plan `G` (`n×m`).
    pub plan: Array2<T>,
    /// `F(G) = (1 − α)·⟨M, G⟩ + α·⟨L⊗G, G⟩` (POT's `gw_dist`, `fgw_dist`), evaluated at the
    /// returned plan.
    pub value: f64,
    /// `(1 − α)·⟨M, G⟩`.
    pub linear: f64,
    /// `α·⟨L⊗G, G⟩`.
    pub quadratic: f64,
    /// Dual potentials of the linear step at the returned plan (cost `∇F(G)`).
    pub f: Array1<f64>,
    /// See [`ExactGromov::f`].
    pub g: Array1<f64>,
    /// Whether the structures were treated as symmetric.
    pub symmetric: bool,
    /// Iterations, gap and marginals.
    pub report: ConditionalGradientReport,
}

/// `argmin_{0 ≤ x ≤ 1} a·x² + b·x` (POT's `solve_1d_linesearch_quad`).
fn line_search(a: f64, b: f64) -> f64 {
    if a > 0.0 {
        (-b / (2.0 * a)).clamp(0.0, 1.0)
    } else if a + b < 0.0 {
        1.0
    } else {
        0.0
    }
}

/// Exact (fused) Gromov–Wasserstein by conditional gradient on a chosen backend (see the
/// module docs); the linear step is the caller's [`LinearOtSolver`].
#[derive(Clone, Debug)]
pub struct ConditionalGradient<B> {
    backend: B,
    params: ConditionalGradientParams,
}

impl<B> ConditionalGradient<B> {
    /// A solver on `backend` with `params`.
    pub fn new(backend: B, params: ConditionalGradientParams) -> Self {
        ConditionalGradient { backend, params }
    }

    /// The conditional gradient with the network simplex as the linear step
    /// ([`NetworkSimplex`] with default limits): POT's `gromov_wasserstein` /
    /// `fused_gromov_wasserstein`.
    pub fn solve_network_simplex<T: Real>(
        &self,
        problem: &GromovProblem<'_, T>,
    ) -> Result<ExactGromov<T>>
    where
        B: LinalgKernels<T> + GradKernels<T>,
    {
        self.solve(problem, &mut NetworkSimplex::default())
    }

    /// The conditional gradient from the problem's initial plan (`p·qᵀ` unless given; a given
    /// plan must have marginals `p` and `q` within `1e-8 + 1e-7·|p_i|`, POT's check).
    pub fn solve<T: Real>(
        &self,
        problem: &GromovProblem<'_, T>,
        linear: &mut impl LinearOtSolver,
    ) -> Result<ExactGromov<T>>
    where
        B: LinalgKernels<T> + GradKernels<T>,
    {
        let prm = &self.params;
        prm.validate()?;
        problem.check_loss(prm.loss)?;
        let be = &self.backend;
        let (n, m) = (problem.n(), problem.m());
        crate::alloc::probe::<f64>("plan", &[n, m], 0)?;
        let alpha = problem.alpha;
        let symmetric = prm.symmetric.unwrap_or_else(|| problem.looks_symmetric());
        let mut st = Structure::new(be, problem, prm.loss, symmetric)?;
        let p: Vec<f64> = problem.p.iter().map(|v| v.f64()).collect();
        let q: Vec<f64> = problem.q.iter().map(|v| v.f64()).collect();
        let g0 = problem.initial_plan();
        if problem.init.is_some() {
            check_init_marginals(&g0.mapv(|v| v.f64()), &p, &q)?;
        }
        // (1 − α)·M on the host (the linearised costs) and on the device (the line search).
        let feature: Option<Array2<f64>> = problem
            .feature
            .map(|mf| mf.mapv(|v| (1.0 - alpha) * v.f64()));
        let feature_dev = match &feature {
            Some(fm) => Some(be.upload(&fm.iter().map(|&v| T::of(v)).collect::<Vec<T>>())?),
            None => None,
        };
        let mut g = be.upload(&g0.iter().copied().collect::<Vec<T>>())?;
        // P1 = h1·G·h2ᵀ and, for non-symmetric structures, P2 = h1ᵀ·G·h2.
        let mut p1 = be.filled(n * m, T::zero())?;
        st.product(be, &g, false, T::one(), T::zero(), &mut p1)?;
        let mut p2 = if symmetric {
            None
        } else {
            let mut b = be.filled(n * m, T::zero())?;
            st.product(be, &g, true, T::one(), T::zero(), &mut b)?;
            Some(b)
        };
        let dot = |x: &B::Buffer, y: &B::Buffer| -> Result<f64> { Ok(be.batched_dot(1, x, y)?[0]) };
        let value_of =
            |st: &Structure<T, B>, g: &B::Buffer, p1: &B::Buffer| -> Result<(f64, f64)> {
                let (rows, cols) = be.weighted_marginals(g, n, m, None)?;
                let to64 = |v: Vec<T>| v.iter().map(|x| x.f64()).collect::<Vec<f64>>();
                let quad = st.loss_value(
                    &to64(be.download(&rows)?),
                    &to64(be.download(&cols)?),
                    dot(p1, g)?,
                );
                let lin = match &feature_dev {
                    Some(fm) => dot(fm, g)?,
                    None => 0.0,
                };
                Ok((lin, alpha * quad))
            };
        // The linearised cost ∇F(G) on the host.
        let (grad_rows, grad_cols) = (st.grad_rows.clone(), st.grad_cols.clone());
        let gradient = |p1: &B::Buffer, p2: &Option<B::Buffer>| -> Result<Array2<f64>> {
            let a = be.download(p1)?;
            let b = match p2 {
                Some(b) => Some(be.download(b)?),
                None => None,
            };
            Ok(Array2::from_shape_fn((n, m), |(i, j)| {
                let k = i * m + j;
                let x = match &b {
                    Some(b) => 0.5 * (a[k].f64() + b[k].f64()),
                    None => a[k].f64(),
                };
                let lin = feature.as_ref().map_or(0.0, |fm| fm[[i, j]]);
                lin + alpha * (grad_rows[i] + grad_cols[j] - 2.0 * x)
            }))
        };
        let (lin0, quad0) = value_of(&st, &g, &p1)?;
        let mut cost_g = lin0 + quad0;
        let mut losses = vec![cost_g];
        let mut delta = be.filled(n * m, T::zero())?;
        let mut d1 = be.filled(n * m, T::zero())?;
        let mut d2 = p2
            .as_ref()
            .map(|_| be.filled(n * m, T::zero()))
            .transpose()?;
        let (mut it, mut converged) = (0, false);
        loop {
            it += 1;
            let old = cost_g;
            let mi = gradient(&p1, &p2)?;
            let gc = linear.solve(&p, &q, mi.view())?;
            check_linear_plan(&gc, n, m)?;
            // Δ = G_c − G.
            delta = {
                let up = be.upload(&gc.plan.iter().map(|&v| T::of(v)).collect::<Vec<T>>())?;
                drop(delta);
                up
            };
            be.batched_axpy(&[-1.0], &g, &mut delta)?;
            st.product(be, &delta, false, T::one(), T::zero(), &mut d1)?;
            if let Some(d2) = d2.as_mut() {
                st.product(be, &delta, true, T::one(), T::zero(), d2)?;
            }
            let a = -alpha * dot(&d1, &delta)?;
            let lin = match &feature_dev {
                Some(fm) => dot(fm, &delta)?,
                None => 0.0,
            };
            let b = if symmetric {
                lin - 2.0 * alpha * dot(&d1, &g)?
            } else {
                lin - alpha * (dot(&d1, &g)? + dot(&p1, &delta)?)
            };
            let s = line_search(a, b);
            cost_g += a * s * s + b * s;
            be.batched_axpy(&[s], &delta, &mut g)?;
            be.batched_axpy(&[s], &d1, &mut p1)?;
            if let (Some(p2), Some(d2)) = (p2.as_mut(), d2.as_ref()) {
                be.batched_axpy(&[s], d2, p2)?;
            }
            losses.push(cost_g);
            let abs = (cost_g - old).abs();
            let rel = if cost_g != 0.0 {
                abs / cost_g.abs()
            } else {
                f64::NAN
            };
            if rel < prm.tol_rel || abs < prm.tol_abs {
                converged = true;
                break;
            }
            if it >= prm.max_iters {
                break;
            }
        }
        // The linear step at the returned plan: the gap and the duals there.
        let mi = gradient(&p1, &p2)?;
        let last = linear.solve(&p, &q, mi.view())?;
        check_linear_plan(&last, n, m)?;
        let plan64: Vec<f64> = be.download(&g)?.iter().map(|v| v.f64()).collect();
        let plan64 =
            Array2::from_shape_vec((n, m), plan64).map_err(|e| Error::Numerical(e.to_string()))?;
        let gap = (&mi * &(&plan64 - &last.plan)).sum();
        let (linear_part, quadratic) = value_of(&st, &g, &p1)?;
        let marginal_error = marginal_error(&plan64, &p, &q);
        let plan = plan64.mapv(T::of);
        Ok(ExactGromov {
            plan,
            value: linear_part + quadratic,
            linear: linear_part,
            quadratic,
            f: last.f,
            g: last.g,
            symmetric,
            report: ConditionalGradientReport {
                iterations: it,
                converged,
                gap,
                marginal_error,
                losses,
            },
        })
    }
}

/// `max(‖G·1 − p‖₁, ‖Gᵀ·1 − q‖₁)`.
fn marginal_error(g: &Array2<f64>, p: &[f64], q: &[f64]) -> f64 {
    let rows = g.sum_axis(ndarray::Axis(1));
    let cols = g.sum_axis(ndarray::Axis(0));
    let e = |a: &Array1<f64>, w: &[f64]| a.iter().zip(w).map(|(x, y)| (x - y).abs()).sum::<f64>();
    e(&rows, p).max(e(&cols, q))
}

/// A given initial plan's marginals are `p` and `q` (POT's `assert_allclose(..., atol=1e-8)`).
fn check_init_marginals(g0: &Array2<f64>, p: &[f64], q: &[f64]) -> Result<()> {
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-8 + 1e-7 * b.abs();
    for (axis, w, what) in [(1, p, "p"), (0, q, "q")] {
        let sums = g0.sum_axis(ndarray::Axis(axis));
        if let Some(k) = (0..w.len()).find(|&k| !close(sums[k], w[k])) {
            return Err(Error::parameter(
                "g0",
                format!("marginal {} at {k}", sums[k]),
                format!("the conditional gradient starts from a plan with marginals p and q ({what}[{k}] = {})", w[k]),
            ));
        }
    }
    Ok(())
}

/// The linear solver's answer has the plan's shape and finite entries.
fn check_linear_plan(lp: &LinearPlan, n: usize, m: usize) -> Result<()> {
    if lp.plan.dim() != (n, m) || lp.f.len() != n || lp.g.len() != m {
        return Err(Error::shape(
            "linear",
            format!(
                "the linear solver returned a {:?} plan with {} and {} potentials for a {n}×{m} problem",
                lp.plan.dim(),
                lp.f.len(),
                lp.g.len()
            ),
        ));
    }
    if lp.plan.iter().any(|v| !v.is_finite()) {
        return Err(Error::Numerical(
            "the linear solver returned a non-finite plan".into(),
        ));
    }
    Ok(())
}
