//! Gradients of a (fused) Gromov–Wasserstein value with respect to the structures, the
//! weights, the feature cost and `α`, by the envelope theorem at a returned plan `T` (POT's
//! `gromov_wasserstein2` / `fused_gromov_wasserstein2` gradients):
//!
//! * `∂/∂C1_ik = α·Σ_jl ∂_a L(C1_ik, C2_jl)·T_ij·T_kl
//!   = α·(f1'(C1_ik)·r_i·r_k − h1'(C1_ik)·(T·h2(C2)·Tᵀ)_ik)`, `r = T·1`;
//! * `∂/∂C2_jl = α·(f2'(C2_jl)·c_j·c_l − h2'(C2_jl)·(Tᵀ·h1(C1)·T)_jl)`, `c = Tᵀ·1`;
//! * `∂/∂p = f − mean(f)`, `∂/∂q = g − mean(g)`: the potentials of the plan's last
//!   linearised problem (the multipliers of `T·1 = p`, `Tᵀ·1 = q`; a perturbation of the
//!   weights keeps `Σp = Σq`, so only the centred potentials are defined);
//! * `∂/∂M = (1 − α)·T`, `∂/∂α = ⟨L⊗T, T⟩ − ⟨M, T⟩`.
//!
//! What is exact: for the entropic solver these are the gradients of the regularised value
//! `E = F(T) + ε·Σ T·log T` (the objective whose stationary plans the mirror descent finds)
//! when `T` is a fixed point (report's `stationarity` 0 and the inner solve converged) that
//! moves smoothly with the inputs; they are not the gradients of the unregularised `F(T)`
//! alone, whose plan-dependence they leave out. For the conditional gradient they are the
//! gradients of `F` at a local minimum whose plan stays optimal under small perturbations
//! (a vertex, as is generic), with the weights' gradients valid where the linear problem's
//! duals are unique. `r`, `c` are the plan's own marginals (POT uses `p`, `q`; they agree to
//! the marginal error). Potentials of zero-mass bins are `−∞` for entropic plans (the
//! entropy's slope at 0) and stay so; the mean is over the finite ones.

use super::params::GwLoss;
use super::problem::GromovProblem;
use crate::backend::linalg::{GemmShape, LinalgKernels, Transpose};
use crate::{Error, Real, Result};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};

/// Envelope gradients of a Gromov–Wasserstein value (see the module docs).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct GromovGradients {
    /// `∂/∂C1` (`n×n`).
    pub c1: Array2<f64>,
    /// `∂/∂C2` (`m×m`).
    pub c2: Array2<f64>,
    /// `∂/∂p`, zero-mean over its finite entries.
    pub p: Array1<f64>,
    /// `∂/∂q`, zero-mean over its finite entries.
    pub q: Array1<f64>,
    /// `∂/∂M = (1 − α)·T` for fused problems.
    pub m: Option<Array2<f64>>,
    /// `∂/∂α = ⟨L⊗T, T⟩ − ⟨M, T⟩` for fused problems.
    pub alpha: Option<f64>,
}

/// The envelope gradients at `plan` with the potentials `f`, `g` of its last linearised
/// problem (an [`EntropicGromov`](super::EntropicGromov)'s or an
/// [`ExactGromov`](super::ExactGromov)'s `plan`, `f`, `g`), the two products
/// `T·h2(C2)·Tᵀ` and `Tᵀ·h1(C1)·T` on `backend`.
///
/// ```
/// use logot::gromov::{envelope_gradients, EntropicGwParams, GromovProblem, GromovSolver};
/// use logot::CpuBackend;
/// use ndarray::array;
/// let c1 = array![[0.0, 1.0, 4.0], [1.0, 0.0, 1.0], [4.0, 1.0, 0.0]];
/// let c2 = array![[0.0, 2.0], [2.0, 0.0]];
/// let (p, q) = (array![0.3, 0.3, 0.4], array![0.5, 0.5]);
/// let problem = GromovProblem::new(c1.view(), c2.view(), p.view(), q.view())?;
/// let params = EntropicGwParams::new(0.5);
/// let r = GromovSolver::new(CpuBackend, params.clone()).solve(&problem)?;
/// let grad = envelope_gradients(&CpuBackend, &problem, params.loss, r.plan.view(), r.f.view(), r.g.view())?;
/// assert_eq!(grad.c1.dim(), (3, 3));
/// assert!(grad.p.sum().abs() < 1e-12); // centred
/// # Ok::<(), logot::Error>(())
/// ```
pub fn envelope_gradients<'a, T: Real, B: LinalgKernels<T>>(
    backend: &B,
    problem: &GromovProblem<'a, T>,
    loss: GwLoss,
    plan: ArrayView2<'a, T>,
    f: ArrayView1<'_, f64>,
    g: ArrayView1<'_, f64>,
) -> Result<GromovGradients> {
    let (n, m) = (problem.n(), problem.m());
    problem.check_loss(loss)?;
    let problem = problem.clone().with_init(plan)?;
    if f.len() != n {
        return Err(Error::shape(
            "f",
            format!("has {} entries, expected {n}", f.len()),
        ));
    }
    if g.len() != m {
        return Err(Error::shape(
            "g",
            format!("has {} entries, expected {m}", g.len()),
        ));
    }
    let alpha = problem.alpha;
    let t: Array2<f64> = plan.mapv(|v| v.f64());
    let (c1, c2) = (problem.c1.mapv(|v| v.f64()), problem.c2.mapv(|v| v.f64()));
    let r = t.sum_axis(Axis(1));
    let c = t.sum_axis(Axis(0));
    // T·h2(C2)·Tᵀ (n×n) and Tᵀ·h1(C1)·T (m×m) on the backend.
    let up = |a: &Array2<f64>| backend.upload(&a.iter().map(|&v| T::of(v)).collect::<Vec<T>>());
    let tb = up(&t)?;
    let h1 = up(&c1.mapv(|v| loss.h1(v)))?;
    let h2 = up(&c2.mapv(|v| loss.h2(v)))?;
    let sandwich = |h: &B::Buffer, k: usize, outer: usize, t_first: bool| -> Result<Array2<f64>> {
        // t_first: (Tᵀ·h·T), h k×k with T k×outer; else (T·h·Tᵀ), T outer×k.
        let (ta, tb2) = if t_first {
            (Transpose::Yes, Transpose::No)
        } else {
            (Transpose::No, Transpose::Yes)
        };
        let mut th = backend.filled(outer * k, T::zero())?;
        backend.gemm(
            GemmShape::new(outer, k, k).with_transposes(ta, Transpose::No),
            T::one(),
            &tb,
            h,
            T::zero(),
            &mut th,
        )?;
        let mut out = backend.filled(outer * outer, T::zero())?;
        let shape = if t_first {
            GemmShape::new(outer, outer, k)
        } else {
            GemmShape::new(outer, outer, k).with_transposes(Transpose::No, tb2)
        };
        backend.gemm(shape, T::one(), &th, &tb, T::zero(), &mut out)?;
        let v: Vec<f64> = backend.download(&out)?.iter().map(|x| x.f64()).collect();
        Array2::from_shape_vec((outer, outer), v).map_err(|e| Error::Numerical(e.to_string()))
    };
    let th2t = sandwich(&h2, m, n, false)?;
    let th1t = sandwich(&h1, n, m, true)?;
    let grad_c1 = Array2::from_shape_fn((n, n), |(i, k)| {
        let a = c1[[i, k]];
        alpha * (df1(loss, a) * r[i] * r[k] - th2t[[i, k]])
    });
    let grad_c2 = Array2::from_shape_fn((m, m), |(j, l)| {
        let b = c2[[j, l]];
        alpha * (c[j] * c[l] * df2(loss, b) - dh2(loss, b) * th1t[[j, l]])
    });
    let centred = |v: ArrayView1<'_, f64>| {
        let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        let mean = finite.iter().sum::<f64>() / finite.len().max(1) as f64;
        v.mapv(|x| x - mean)
    };
    let (m_grad, alpha_grad) = match problem.feature {
        Some(mf) => {
            let lin: f64 = mf.iter().zip(t.iter()).map(|(a, b)| a.f64() * b).sum();
            let quad = super::loss::objective(
                &GromovProblem {
                    feature: None,
                    alpha: 1.0,
                    ..problem.clone()
                },
                loss,
                plan,
            )?;
            (Some(t.mapv(|v| (1.0 - alpha) * v)), Some(quad - lin))
        }
        None => (None, None),
    };
    Ok(GromovGradients {
        c1: grad_c1,
        c2: grad_c2,
        p: centred(f),
        q: centred(g),
        m: m_grad,
        alpha: alpha_grad,
    })
}

/// `f1'(a)`: `2a` (square), `log a` (KL; `−∞` at 0).
fn df1(loss: GwLoss, a: f64) -> f64 {
    match loss {
        GwLoss::Square => 2.0 * a,
        GwLoss::Kl => a.ln(),
    }
}
/// `f2'(b)`: `2b` (square), `1` (KL).
fn df2(loss: GwLoss, b: f64) -> f64 {
    match loss {
        GwLoss::Square => 2.0 * b,
        GwLoss::Kl => 1.0,
    }
}
/// `h2'(b)`: `2` (square), `1/b` (KL).
fn dh2(loss: GwLoss, b: f64) -> f64 {
    match loss {
        GwLoss::Square => 2.0,
        GwLoss::Kl => 1.0 / b,
    }
}
