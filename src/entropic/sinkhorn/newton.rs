//! Newton's method on the dual of balanced entropic OT, the finish of a Sinkhorn solve that
//! has stalled.
//!
//! Sinkhorn contracts the marginal error by at most `tanh(Δ/4)²` per iteration, where `Δ`
//! is the kernel's spread `max log(K_ij·K_kl / K_il·K_kj)`; on nearly deterministic plans
//! (the late iterations of Gromov–Wasserstein, ε far below the cost's gaps) that factor is
//! 1 to working precision and the iteration stops moving. Newton's method on the dual
//! `D(f, g) = ⟨f, μ⟩ + ⟨g, ν⟩ − ε·Σ_ij P_ij`, `P = exp((f ⊕ g − C)/ε)`, converges
//! quadratically there: the step solves
//!
//! `[[diag(r), P], [Pᵀ, diag(c)]]·(δf, δg) = ε·(μ − r, ν − c)`,  `r = P·1`, `c = Pᵀ·1`,
//!
//! the system of the implicit gradients, by CG on its Schur complement in `δg` (singular
//! along `(1, −1)`, which only shifts the potentials), then halves the step until `D`
//! increases (Brauer, Clason, Lorenz and Wirth, "A Sinkhorn–Newton method for entropic
//! optimal transport", 2017).

use crate::backend::grad::GradKernels;
use crate::cg::CgParams;
use crate::entropic::dual_system::{solve_adjoint_with, StoredPlan};
use crate::{Real, Result};

/// How a Newton finish ended.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewtonFinish {
    /// Newton steps taken (each one CG solve and at least one plan).
    pub(crate) steps: usize,
    /// `max(‖P·1 − μ‖₁, ‖Pᵀ·1 − ν‖₁)` of the plan of the potentials handed back.
    pub(crate) marginal_error: f64,
}

/// At most `max_steps` Newton steps on the dual of the problem (`cost`, `μ`, `ν`, `ε`) from
/// the potentials `(f, g)` (`n` and `m` long, in the units of `cost`; `−∞` on zero-mass
/// bins), which are replaced by the result; stops once the marginal error is at most
/// `tol` (absolute) or when no step halving improves the dual.
#[allow(clippy::too_many_arguments)]
pub(crate) fn newton_finish<T: Real, B: GradKernels<T>>(
    be: &B,
    cost: &B::Cost,
    (n, m): (usize, usize),
    (mu, nu): (&[f64], &[f64]),
    (f, g): (&mut B::Buffer, &mut B::Buffer),
    eps: f64,
    tol: f64,
    max_steps: usize,
) -> Result<NewtonFinish> {
    let to64 = |v: Vec<T>| v.into_iter().map(|x| x.f64()).collect::<Vec<f64>>();
    // The plan of (f, g) (whose host copies are `fh`, `gh`), its marginals, its marginal
    // error and its dual value.
    let evaluate = |f: &B::Buffer, g: &B::Buffer, fh: Vec<f64>, gh: Vec<f64>| {
        let plan = be.plan(cost, f, g, T::of(eps))?;
        let (r, c) = be.weighted_marginals(&plan, n, m, None)?;
        let (rh, ch) = (to64(be.download(&r)?), to64(be.download(&c)?));
        // Zero-mass bins (potential −∞) add nothing to ⟨f, μ⟩.
        let dot = |p: &[f64], w: &[f64]| -> f64 {
            p.iter()
                .zip(w)
                .filter(|(_, &w)| w > 0.0)
                .map(|(p, w)| p * w)
                .sum()
        };
        let dual = dot(&fh, mu) + dot(&gh, nu) - eps * rh.iter().sum::<f64>();
        Ok::<_, crate::Error>(Evaluation {
            marginal_error: l1_err(&rh, &ch, mu, nu),
            plan,
            masses: (r, c),
            host_masses: (rh, ch),
            potentials: (fh, gh),
            dual,
        })
    };
    let (fh, gh) = (to64(be.download(f)?), to64(be.download(g)?));
    let mut current = evaluate(f, g, fh, gh)?;
    let mut steps = 0;
    let cg = CgParams::default().tol(CgParams::tol_for::<T>() * 1e-2);
    while steps < max_steps && current.marginal_error > tol && current.marginal_error.is_finite() {
        let Evaluation {
            plan,
            masses,
            host_masses: (rh, ch),
            potentials: (fh, gh),
            dual,
            marginal_error,
        } = current;
        // Right-hand side (μ − r, ν − c).
        let sr: Vec<T> = mu.iter().zip(&rh).map(|(a, r)| T::of(a - r)).collect();
        let sc: Vec<T> = nu.iter().zip(&ch).map(|(b, c)| T::of(b - c)).collect();
        let sums = (be.upload(&sr)?, be.upload(&sc)?);
        let stored = StoredPlan { plan: &plan, n, m };
        let adj = solve_adjoint_with(be, &stored, (1, n, m), masses, &sums, None, &cg)?;
        drop(plan);
        let (da, db) = (to64(be.download(&adj.a)?), to64(be.download(&adj.b)?));
        let mut t = 1.0;
        let mut accepted = None;
        for _ in 0..40 {
            // The potentials moved by t·ε·(δf, δg), rounded to T (the host copies are the
            // rounded values, so they describe the buffers exactly); −∞ stays.
            let shifted = |p: &[f64], d: &[f64]| -> Vec<T> {
                p.iter()
                    .zip(d)
                    .map(|(p, d)| {
                        if p.is_finite() {
                            T::of(p + t * eps * d)
                        } else {
                            T::of(*p)
                        }
                    })
                    .collect()
            };
            let (f_new, g_new) = (shifted(&fh, &da), shifted(&gh, &db));
            let (f_try, g_try) = (be.upload(&f_new)?, be.upload(&g_new)?);
            let trial = evaluate(&f_try, &g_try, to64(f_new), to64(g_new))?;
            if trial.dual.is_finite() && trial.dual > dual {
                accepted = Some((trial, f_try, g_try));
                break;
            }
            t *= 0.5;
        }
        steps += 1;
        match accepted {
            Some((trial, f_new, g_new)) => {
                *f = f_new;
                *g = g_new;
                current = trial;
            }
            None => {
                // No step raises the dual: (f, g) is the dual's maximum to working
                // precision; its error is the one measured last.
                return Ok(NewtonFinish {
                    steps,
                    marginal_error,
                });
            }
        }
    }
    Ok(NewtonFinish {
        steps,
        marginal_error: current.marginal_error,
    })
}

/// The potentials' plan and what the Newton step needs of it.
struct Evaluation<Buf> {
    plan: Buf,
    /// `(P·1, Pᵀ·1)` on the backend.
    masses: (Buf, Buf),
    /// The same on the host, in f64.
    host_masses: (Vec<f64>, Vec<f64>),
    /// `max(‖P·1 − μ‖₁, ‖Pᵀ·1 − ν‖₁)`.
    marginal_error: f64,
    /// The potentials on the host, in f64.
    potentials: (Vec<f64>, Vec<f64>),
    /// `D(f, g)`.
    dual: f64,
}

fn l1_err(r: &[f64], c: &[f64], mu: &[f64], nu: &[f64]) -> f64 {
    let l1 = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| (a - b).abs()).sum::<f64>();
    l1(r, mu).max(l1(c, nu))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinkhorn::BufferProblem;
    use crate::{Backend, CpuBackend, SinkhornParams, SinkhornSolver};

    /// A 2×2 problem has a closed form: with `x = P₀₀` the other entries follow from the
    /// marginals, and `P₀₀·P₁₁ / (P₀₁·P₁₀) = exp(−(C₀₀ + C₁₁ − C₀₁ − C₁₀)/ε)` fixes `x`.
    /// At `ε = 1/20` of a unit cost gap Sinkhorn contracts by `tanh(10)² ≈ 1 − 8e-9` per
    /// iteration; the Newton finish reaches the closed form.
    #[test]
    fn finishes_a_stalled_two_by_two_at_its_closed_form() {
        let (mu, nu) = ([0.3f64, 0.7], [0.6f64, 0.4]);
        let c = [0.0f64, 1.0, 1.0, 0.0];
        let eps = 0.05;
        // log x + log(0.1 + x) − log(0.3 − x) − log(0.6 − x) = −(C₀₀ + C₁₁ − C₀₁ − C₁₀)/ε,
        // with P₁₁ = ν₁ − μ₀ + x; increasing in x on (0, 0.3).
        let gap = -(c[0] + c[3] - c[1] - c[2]) / eps;
        let h = |x: f64| x.ln() + (0.1 + x).ln() - (0.3 - x).ln() - (0.6 - x).ln() - gap;
        let (mut lo, mut hi) = (0.0f64, 0.3f64);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if h(mid) < 0.0 {
                lo = mid
            } else {
                hi = mid
            }
        }
        let x = 0.5 * (lo + hi);
        let exact = [x, 0.3 - x, 0.6 - x, 0.1 + x];

        let be = CpuBackend;
        let solver = SinkhornSolver::new(be, SinkhornParams::new(eps).max_iters(50));
        let cost = be.upload(&c).unwrap();
        let prepared = solver
            .prepare(BufferProblem::dense(
                be.upload(&mu).unwrap(),
                be.upload(&nu).unwrap(),
                &cost,
                (1, 2, 2),
                false,
            ))
            .unwrap();
        let (mut f, mut g, _) = solver.iterate_prepared(&prepared).unwrap();
        let finish = newton_finish(
            &be,
            prepared.cost(),
            (2, 2),
            (&mu, &nu),
            (&mut f, &mut g),
            eps,
            1e-14,
            30,
        )
        .unwrap();
        let plan = be
            .download(&be.plan(prepared.cost(), &f, &g, eps).unwrap())
            .unwrap();
        for (p, e) in plan.iter().zip(&exact) {
            assert!(
                (p - e).abs() < 1e-13,
                "plan {plan:?}, closed form {exact:?}"
            );
        }
        // The reported error is that of the plan handed back.
        let err = (plan[0] + plan[1] - mu[0]).abs() + (plan[2] + plan[3] - mu[1]).abs();
        let err = err.max((plan[0] + plan[2] - nu[0]).abs() + (plan[1] + plan[3] - nu[1]).abs());
        assert!((finish.marginal_error - err).abs() < 1e-15 && err < 1e-13);
    }
}
