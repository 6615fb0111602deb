//! The report of an f32 point-cloud solve bounds the returned potentials' error against the
//! points' cost: at high `d` the half-steps' cross-term form `|x|² + |y|² − 2x·y` rounds
//! each cost by a large part of `ε·tol`, so the report is measured with the cost in f64.
//! Reference: `‖P·1 − μ‖₁`, `‖Pᵀ·1 − ν‖₁` recomputed here in f64 from the returned
//! potentials and the input points (difference form), at ε as float32 holds it (the
//! regularisation the float32 plans are defined with).

use crate::common::cloud_reports::{clouds, recomputed_error, weights, FACTOR};
use logot::{CpuBackend, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
use ndarray::{Array2, Array3};

/// `d` from 3 to 1024, ε from 1% to 10% of the mean cost, `tol = 1e-6` and the default:
/// the reported error bounds the recomputed one, and a converged report meets `tol` with it.
#[test]
fn f32_reports_bound_the_error_at_high_dimension() {
    let (n, m) = (240, 205);
    for d in [3usize, 64, 700, 1024] {
        let [x, y] = clouds(n, m, d, 5 + d as u64);
        let (mu, nu) = (weights(n, 11), weights(m, 12));
        // ε relative to the mean cost d/6 of uniform points.
        for rel_eps in [0.1, 0.01] {
            let eps = rel_eps * d as f64 / 6.0;
            for tol in [Some(1e-6), None] {
                let cloud = PointCloudCost::new(x.view(), y.view()).unwrap();
                let problem = Problem::new(mu.view(), nu.view(), cloud).unwrap();
                let params = SinkhornParams::new(eps).tol(tol).max_iters(3000);
                let r = SinkhornSolver::new(CpuBackend, params)
                    .solve(&problem)
                    .unwrap();
                let (f, g) = (r.f.row(0), r.g.row(0));
                let (w, eps32) = ((mu.view(), nu.view()), eps as f32 as f64);
                let real = recomputed_error(x.view(), y.view(), (f, g), w, eps32);
                let c = &r.convergence;
                let what = format!("d {d}, eps {eps}, tol {tol:?}");
                assert!(
                    real <= FACTOR * c.marginal_error,
                    "{what}: {c:?}, real {real:e}"
                );
                if c.converged {
                    assert!(real <= FACTOR * c.tol, "{what}: {c:?}, real {real:e}");
                }
            }
        }
    }
}

/// Batched clouds: each problem's report bounds its own error.
#[test]
fn f32_batch_reports_bound_each_problems_error() {
    let (n, m, d) = (150, 130, 700);
    let pairs: Vec<[Array2<f32>; 2]> = (0..2).map(|k| clouds(n, m, d, 40 + k)).collect();
    let xs = Array3::from_shape_fn((2, n, d), |(k, i, c)| pairs[k][0][[i, c]]);
    let ys = Array3::from_shape_fn((2, m, d), |(k, j, c)| pairs[k][1][[j, c]]);
    let (mu, nu) = (weights(n, 3), weights(m, 4));
    let mus = Array2::from_shape_fn((2, n), |(_, i)| mu[i]);
    let nus = Array2::from_shape_fn((2, m), |(_, j)| nu[j]);
    let eps = 0.01 * d as f64 / 6.0;
    let cloud = PointCloudCost::batched(xs.view(), ys.view()).unwrap();
    let problem = Problem::new(mus.view(), nus.view(), cloud).unwrap();
    let r = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps).tol(1e-6))
        .solve(&problem)
        .unwrap();
    for (k, report) in r.convergence.problems.iter().enumerate() {
        let real = recomputed_error(
            pairs[k][0].view(),
            pairs[k][1].view(),
            (r.f.row(k), r.g.row(k)),
            (mu.view(), nu.view()),
            eps as f32 as f64,
        );
        assert!(
            real <= FACTOR * report.marginal_error,
            "problem {k}: {report:?}, real {real:e}"
        );
    }
}
