//! Entropic (fused) Gromov–Wasserstein against POT's `entropic_gromov_wasserstein` and
//! `entropic_fused_gromov_wasserstein` from the same initial plan (values in
//! tests/data/pot_gw_e_*.npy, written by `tests/data/make_pot_gromov.py`), with the
//! marginals and the objective against a brute-force sum.

use crate::{mat, vector};
use logot::gromov::{EntropicGwParams, GromovProblem, GromovSolver, GwLoss};
use logot::CpuBackend;
use ndarray::{Array2, ArrayView2, Axis};

/// `L(a, b)` written out independently of the library.
fn loss_of(loss: GwLoss, a: f64, b: f64) -> f64 {
    match loss {
        GwLoss::Square => (a - b).powi(2),
        GwLoss::Kl => {
            let alog = if a == 0.0 { 0.0 } else { a * (a / b).ln() };
            alog - a + b
        }
    }
}

/// `Σ_ijkl L(C1_ik, C2_jl)·T_ij·T_kl` by brute force (O(n²m²)).
fn brute_force(loss: GwLoss, c1: &Array2<f64>, c2: &Array2<f64>, t: ArrayView2<'_, f64>) -> f64 {
    let (n, m) = t.dim();
    let mut s = 0.0;
    for i in 0..n {
        for j in 0..m {
            for k in 0..n {
                for l in 0..m {
                    s += loss_of(loss, c1[[i, k]], c2[[j, l]]) * t[[i, j]] * t[[k, l]];
                }
            }
        }
    }
    s
}

fn max_abs_diff(a: ArrayView2<'_, f64>, b: ArrayView2<'_, f64>) -> f64 {
    a.iter()
        .zip(b.iter())
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
}

/// One POT case: the same inputs, initial plan and stopping rule; inner solves tight.
fn pot_case(case: &str, loss: GwLoss, given_init: bool) {
    let (c1, c2, m) = (mat(case, "c1"), mat(case, "c2"), mat(case, "m"));
    let (p, q) = (vector(case, "p"), vector(case, "q"));
    let g0 = mat(case, "g0");
    let want_plan = mat(case, "plan");
    let s = vector(case, "scalars");
    let (value, eps, max_iter, tol, alpha, checks) =
        (s[0], s[1], s[2] as usize, s[3], s[4], s[5] as usize);
    let want_steps = vector(case, "steps");
    let mut problem = if alpha < 1.0 {
        GromovProblem::fused(m.view(), c1.view(), c2.view(), p.view(), q.view(), alpha).unwrap()
    } else {
        GromovProblem::new(c1.view(), c2.view(), p.view(), q.view()).unwrap()
    };
    if given_init {
        problem = problem.with_init(g0.view()).unwrap();
    }
    let params = EntropicGwParams {
        eps,
        loss,
        max_iters: max_iter,
        tol,
        inner_max_iters: 100_000,
        inner_tol: Some(1e-13),
        ..Default::default()
    };
    let r = GromovSolver::new(CpuBackend, params)
        .solve(&problem)
        .unwrap();
    let scale = want_plan.iter().fold(0.0f64, |a, &b| a.max(b));
    let plan_err = max_abs_diff(r.plan.view(), want_plan.view()) / scale;
    let value_err = (r.value - value).abs() / value.abs();
    eprintln!(
        "{case}: plan {plan_err:.2e}, value {value_err:.2e} (logot {} POT {value}), iterations {}, \
         steps {:?} vs {:?}, stationarity {:.2e}, inner {} ({} unconverged)",
        r.value,
        r.report.iterations,
        r.report.steps,
        want_steps,
        r.report.stationarity,
        r.report.inner_iterations,
        r.report.inner_unconverged
    );
    assert!(
        plan_err < 1e-8,
        "{case}: plan differs by {plan_err:.3e} (relative to its largest entry)"
    );
    assert!(value_err < 1e-8, "{case}: value differs by {value_err:.3e}");
    assert_eq!(
        r.report.steps.len(),
        checks,
        "{case}: number of step checks"
    );
    assert_eq!(r.report.inner_unconverged, 0, "{case}");
    // The stopping rule: POT ran `max_iter` iterations unless a check met `tol`.
    let stopped = *want_steps.iter().last().unwrap() <= tol;
    let want_iters = if stopped {
        10 * (checks - 1) + 1
    } else {
        max_iter
    };
    assert_eq!(r.report.iterations, want_iters, "{case}");
    for (a, b) in r.report.steps.iter().zip(want_steps.iter()) {
        // Steps above rounding agree relatively; near 0 both are rounding noise.
        assert!(
            (a - b).abs() <= 1e-6 * b + 1e-12,
            "{case}: steps {a:e} vs {b:e}"
        );
    }
    // The reported figures describe the returned plan.
    let rows = r.plan.sum_axis(Axis(1));
    let cols = r.plan.sum_axis(Axis(0));
    let merr = (&rows - &p)
        .mapv(f64::abs)
        .sum()
        .max((&cols - &q).mapv(f64::abs).sum());
    assert!(
        (merr - r.report.marginal_error).abs() < 1e-15,
        "{case}: marginal error"
    );
    assert!(merr < 1e-12, "{case}: marginals {merr:e}");
    let structure = brute_force(loss, &c1, &c2, r.plan.view());
    let linear: f64 = (&m * &r.plan).sum();
    let brute = alpha * structure + (1.0 - alpha) * linear;
    assert!(
        (brute - r.value).abs() < 1e-10 * brute.abs(),
        "{case}: value {} vs brute force {brute}",
        r.value
    );
    assert!(
        (r.linear - (1.0 - alpha) * linear).abs() < 1e-12,
        "{case}: linear part"
    );
}

#[test]
fn square_loss_matches_pot() {
    pot_case("e_sq", GwLoss::Square, false);
}

#[test]
fn square_loss_stops_as_pot_does() {
    pot_case("e_sq_tol", GwLoss::Square, false);
}

#[test]
fn kl_loss_matches_pot() {
    pot_case("e_kl", GwLoss::Kl, false);
}

#[test]
fn asymmetric_structures_from_a_given_plan_match_pot() {
    pot_case("e_asym", GwLoss::Square, true);
}

#[test]
fn fused_matches_pot() {
    pot_case("e_fused", GwLoss::Square, false);
}

#[test]
fn fused_kl_asymmetric_matches_pot() {
    pot_case("e_fused_kl_asym", GwLoss::Kl, true);
}

/// Three points on a line against their mirror image at ε = 0.05: the plan is nearly a
/// permutation and plain Sinkhorn stalls in every inner solve (its contraction factor is
/// 1 to working precision). The solve must end converged, its report describing the plan
/// handed back, recomputed here.
#[test]
fn peaked_plans_converge_and_report_the_plan_returned() {
    let x = [0.0f64, 1.0, 3.0];
    let y = [3.0f64, 2.0, 0.0];
    let c1 = Array2::from_shape_fn((3, 3), |(i, k)| (x[i] - x[k]).abs());
    let c2 = Array2::from_shape_fn((3, 3), |(j, l)| (y[j] - y[l]).abs());
    let w = ndarray::array![1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0];
    let problem = GromovProblem::new(c1.view(), c2.view(), w.view(), w.view()).unwrap();
    let r = GromovSolver::new(CpuBackend, EntropicGwParams::new(0.05))
        .solve(&problem)
        .unwrap();
    assert!(r.report.converged, "{:?}", r.report);
    assert_eq!(r.report.inner_unconverged, 0);
    let rows = r.plan.sum_axis(Axis(1));
    let cols = r.plan.sum_axis(Axis(0));
    let l1 = |s: &ndarray::Array1<f64>| s.iter().zip(&w).map(|(a, b)| (a - b).abs()).sum::<f64>();
    let err = l1(&rows).max(l1(&cols));
    assert!(err <= 1e-9, "marginal error {err}");
    assert!((r.report.marginal_error - err).abs() <= 1e-15);
    // The isometry: nearly all mass on the diagonal. The value (POT's `gwloss`, whose
    // marginal terms use p and q) is the brute-force sum over the plan up to
    // (max C1² + max C2²)·(marginal error).
    for i in 0..3 {
        assert!(r.plan[[i, i]] > w[i] * (1.0 - 1e-8));
    }
    let direct = brute_force(GwLoss::Square, &c1, &c2, r.plan.view());
    let bound = 18.0 * err + 1e-14;
    assert!(
        (r.value - direct).abs() <= bound,
        "value {} against {direct}",
        r.value
    );
}
