//! The unbalanced barycenter loop (see the parent module's docs): POT's
//! `barycenter_unbalanced(..., method="sinkhorn")` in the log domain, and the violation of
//! the inputs' side it reports.

use super::{BarycenterParams, BarycenterResult, BarycenterSolver, PreparedCost};
use crate::backend::{BaryLayout, BarycenterKernels, Side};
use crate::{Error, Real, Relaxation, Result};
use ndarray::{Array1, ArrayView2, ArrayView3};

impl<B> BarycenterSolver<B> {
    /// The unbalanced loop (see the module docs), on validated inputs; `r` has at least one
    /// finite side.
    pub(super) fn run_unbalanced<T: Real>(
        &self,
        histograms: ArrayView3<'_, T>,
        weights: ArrayView2<'_, T>,
        cost: &PreparedCost<T, B>,
        r: Relaxation,
    ) -> Result<Vec<BarycenterResult<T>>>
    where
        B: BarycenterKernels<T>,
    {
        let p = &self.params;
        let (problems, inputs, n) = histograms.dim();
        let m = cost.m;
        let max_iters = p.max_iters.unwrap_or(if cost.grid { 10_000 } else { 1000 });
        let be = &self.backend;
        let layout = BaryLayout {
            problems,
            inputs,
            m,
        };
        let rows = problems * inputs;
        // The inputs as they are (an unbalanced barycenter does not scale with the inputs'
        // mass), log 0 = −∞ on empty bins.
        let a: Vec<f64> = histograms.iter().map(|x| x.f64()).collect();
        let log_a: Vec<T> = a.iter().map(|&x| T::of(x.ln())).collect();
        // The iteration's fixed point is optimal for weights summing to 1: normalise them.
        let w: Vec<T> = weights
            .outer_iter()
            .flat_map(|w| {
                let total: f64 = w.iter().map(|x| x.f64()).sum();
                w.iter()
                    .map(move |x| T::of(x.f64() / total))
                    .collect::<Vec<T>>()
            })
            .collect();
        let eps = p.eps;
        let te = T::of(eps);
        let phi_a = crate::entropic::unbalanced::phi(r.rho_mu, eps);
        let phi_b = crate::entropic::unbalanced::phi(r.rho_nu, eps);
        // 1 − φ_b = ε·t
        let t = if r.rho_nu == f64::INFINITY {
            0.0
        } else {
            1.0 / (r.rho_nu + eps)
        };
        let prepared = &cost.cost;
        let log_a_buf = be.upload(&log_a)?;
        let w_buf = be.upload(&w)?;
        let zeros_n = be.filled(rows * n, T::zero())?;
        let zeros_m = if m == n {
            None
        } else {
            Some(be.filled(rows * m, T::zero())?)
        };
        let zeros_m = zeros_m.as_ref().unwrap_or(&zeros_n);
        let mut g = be.filled(rows * m, T::zero())?;
        let mut f = be.filled(rows * n, T::zero())?;
        let mut f_half = be.filled(rows * n, T::zero())?;
        let mut v = be.filled(rows * m, T::zero())?;
        let mut bar = be.filled(problems * m, T::zero())?;
        // f_half holds the balanced row half-step of the current g (computed for a check).
        let mut half_ready = false;
        let mut errors = vec![f64::INFINITY; problems];
        let mut iterations = 0;
        let mut tracker = crate::progress::Tracker::new(p.observer.as_ref(), p.history, max_iters);
        loop {
            // f_k = φ_a·(ε log a_k − ε log K e^{g_k/ε})
            if half_ready {
                std::mem::swap(&mut f, &mut f_half);
                half_ready = false;
            } else {
                be.sinkstep(prepared, Side::Row, te, &g, &log_a_buf, &mut f)?;
            }
            if phi_a < 1.0 {
                be.relax(&mut f, &zeros_n, te, T::of(phi_a))?;
            }
            // v_k = −ε log Kᵀe^{f_k/ε}; ε log q = power mean; g_k = φ_b·(ε log q + v_k)
            be.sinkstep(prepared, Side::Col, te, &f, zeros_m, &mut v)?;
            be.bary_log_power_mean(layout, &w_buf, &v, &mut bar, T::of(t))?;
            be.bary_potential(layout, &bar, &v, &mut g)?;
            if phi_b < 1.0 {
                be.relax(&mut g, zeros_m, te, T::of(phi_b))?;
            }
            iterations += 1;
            let last_iter = iterations == max_iters;
            if !(last_iter || iterations % p.check_every == 0) {
                continue;
            }
            // The couplings P_k = diag(e^{f_k/ε})·K·diag(e^{g_k/ε}) meet their barycenter-side
            // conditions by construction; measure the inputs' side.
            be.sinkstep(prepared, Side::Row, te, &g, &log_a_buf, &mut f_half)?;
            half_ready = true;
            errors = input_side_residuals(
                inputs,
                n,
                &a,
                &be.download(&f)?,
                &be.download(&f_half)?,
                eps,
                r.rho_mu,
            );
            if let Some(k) = errors.iter().position(|e| e.is_nan()) {
                return Err(Error::Numerical(format!(
                    "the barycenter error of problem {k} is NaN at iteration {iterations} (eps = {} may be too small for {})",
                    p.eps,
                    T::NAME
                )));
            }
            let last = last_iter || (p.tol > 0.0 && errors.iter().all(|&e| e < p.tol));
            let worst = errors.iter().fold(0.0f64, |a, &e| a.max(e));
            tracker.report(iterations, p.eps, Some(worst), last);
            if last {
                break;
            }
        }
        let bar = be.download(&bar)?;
        let history = tracker.history();
        let judged_tol = if p.tol > 0.0 {
            p.tol
        } else {
            BarycenterParams::default().tol
        };
        bar.chunks(m)
            .zip(&errors)
            .enumerate()
            .map(|(k, (b, &error))| {
                let histogram: Array1<T> = b.iter().map(|&x| T::of((x.f64() / eps).exp())).collect();
                if let Some(x) = histogram.iter().position(|h| !h.is_finite()) {
                    return Err(Error::Numerical(format!(
                        "barycenter {k} has a non-finite value at bin {x} (eps = {} may be too small for {})",
                        p.eps,
                        T::NAME
                    )));
                }
                Ok(BarycenterResult { histogram, iterations, error, converged: error < judged_tol, history: history.clone() })
            })
            .collect()
    }
}

/// Per problem, the largest relative violation over its `inputs` couplings of the
/// inputs'-side optimality condition `P_k·1 = a_k ⊙ exp(−f_k/ρ)` (`= a_k` for `ρ = ∞`):
/// `max_k Σ_i a_ki·|exp((f_ki − h_ki)/ε) − exp(−f_ki/ρ)| / Σ_i a_ki·exp((f_ki − h_ki)/ε)`,
/// where `h` is the balanced row half-step of `g` (so `a·exp((f − h)/ε) = P·1`, and the
/// denominator is the coupling's mass), in f64.
fn input_side_residuals<T: Real>(
    inputs: usize,
    n: usize,
    a: &[f64],
    f: &[T],
    half: &[T],
    eps: f64,
    rho: f64,
) -> Vec<f64> {
    let per_input: Vec<f64> = a
        .chunks(n)
        .zip(f.chunks(n))
        .zip(half.chunks(n))
        .map(|((a, f), h)| {
            let (mut s, mut mass) = (0.0f64, 0.0f64);
            for i in 0..n {
                if a[i] > 0.0 {
                    let fi = f[i].f64();
                    let got = ((fi - h[i].f64()) / eps).exp();
                    let want = if rho == f64::INFINITY {
                        1.0
                    } else {
                        (-fi / rho).exp()
                    };
                    s += a[i] * (got - want).abs();
                    mass += a[i] * got;
                }
            }
            // A coupling whose mass underflowed to 0 is judged by its violation alone.
            if mass > 0.0 {
                s / mass
            } else if s == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        })
        .collect();
    per_input
        .chunks(inputs)
        .map(|r| {
            r.iter().fold(0.0f64, |a, &e| {
                if a.is_nan() || e.is_nan() {
                    f64::NAN
                } else {
                    a.max(e)
                }
            })
        })
        .collect()
}
