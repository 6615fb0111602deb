//! Exact gradients of the transport cost `⟨P, C⟩` with respect to the points of point clouds
//! (`Solver::transport_point_gradients`, implicit differentiation with the plan applied on
//! the fly), checked against central finite differences of re-solved, tightly converged f64
//! transport costs (balanced and unbalanced, both metrics, a batch), against the chain rule
//! of the dense implicit gradient with respect to the cost, and in f32 against f64.

use crate::common;
use common::relaxed::Relaxed;

use common::Lcg;
use logot::grad::CgParams;
use logot::{
    CpuBackend, Error, PointCloudCost, PointMetric, Problem, Relaxation, SinkhornParams,
    SinkhornSolver,
};
use ndarray::{Array2, Axis};

/// A tightly converged f64 solver (balanced when `relax` is `None`).
fn solver(eps: f64, relax: Option<Relaxation>) -> Relaxed<CpuBackend> {
    let params = SinkhornParams::new(eps).max_iters(200_000).tol(1e-14);
    Relaxed::or_balanced(SinkhornSolver::new(CpuBackend, params), relax)
}

fn cloud(rng: &mut Lcg, n: usize, d: usize) -> Array2<f64> {
    Array2::from_shape_vec((n, d), rng.vec(n * d, 0.0, 1.0)).unwrap()
}

/// `rows` histograms of `n` positive weights, each of total `mass`.
fn weights(rng: &mut Lcg, rows: usize, n: usize, mass: f64) -> Array2<f64> {
    let mut w = Array2::from_shape_vec((rows, n), rng.vec(rows * n, 0.2, 1.0)).unwrap();
    for mut r in w.outer_iter_mut() {
        let s = r.sum();
        r.mapv_inplace(|v| mass * v / s);
    }
    w
}

/// `⟨P_b, C⟩` of every problem, re-solved from scratch.
fn distances(
    solver: &Relaxed<CpuBackend>,
    mu: &Array2<f64>,
    nu: &Array2<f64>,
    x: &Array2<f64>,
    y: &Array2<f64>,
    metric: PointMetric,
) -> Vec<f64> {
    let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
    let r = solver
        .solve(&Problem::new(mu.view(), nu.view(), cost).unwrap())
        .unwrap();
    assert!(r.convergence.converged, "{:?}", r.convergence);
    r.distance.to_vec()
}

/// Central differences of `⟨P_b, C⟩` with respect to every coordinate of `x` and of `y`:
/// (`B×n×d`, `B×m×d`) flattened.
fn finite_differences(
    solver: &Relaxed<CpuBackend>,
    mu: &Array2<f64>,
    nu: &Array2<f64>,
    x: &Array2<f64>,
    y: &Array2<f64>,
    metric: PointMetric,
    h: f64,
) -> (Vec<f64>, Vec<f64>) {
    let batch = mu.nrows();
    let per_side = |which: usize| -> Vec<f64> {
        let pts = if which == 0 { x } else { y };
        let (len, d) = pts.dim();
        let mut out = vec![0.0; batch * len * d];
        for i in 0..len {
            for k in 0..d {
                let (mut up, mut down) = (pts.clone(), pts.clone());
                up[[i, k]] += h;
                down[[i, k]] -= h;
                let (du, dd) = if which == 0 {
                    (
                        distances(solver, mu, nu, &up, y, metric),
                        distances(solver, mu, nu, &down, y, metric),
                    )
                } else {
                    (
                        distances(solver, mu, nu, x, &up, metric),
                        distances(solver, mu, nu, x, &down, metric),
                    )
                };
                for b in 0..batch {
                    out[(b * len + i) * d + k] = (du[b] - dd[b]) / (2.0 * h);
                }
            }
        }
        out
    };
    (per_side(0), per_side(1))
}

/// Every entry within `tol` times the largest `|want|`.
fn assert_close(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * scale,
            "{what}[{k}]: {g} vs {w} (tol {tol} × {scale})"
        );
    }
}

/// The exact gradients against central differences for one configuration.
#[allow(clippy::too_many_arguments)]
fn check_against_fd(
    seed: u64,
    (batch, n, m, d): (usize, usize, usize, usize),
    masses: (f64, f64),
    eps: f64,
    metric: PointMetric,
    relax: Option<Relaxation>,
    tol: f64,
) {
    let mut rng = Lcg(seed);
    let x = cloud(&mut rng, n, d);
    let y = cloud(&mut rng, m, d);
    let mu = weights(&mut rng, batch, n, masses.0);
    let nu = weights(&mut rng, batch, m, masses.1);
    let s = solver(eps, relax);
    let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
    let problem = Problem::new(mu.view(), nu.view(), cost).unwrap();
    let g = s
        .transport_point_gradients(&problem, &CgParams::default())
        .unwrap();
    assert!(g.result.convergence.converged, "{:?}", g.result.convergence);
    assert!(g.cg.all_converged(), "{:?}", g.cg);
    assert_eq!(g.x.dim(), (batch, n, d));
    assert_eq!(g.y.dim(), (batch, m, d));
    let want = distances(&s, &mu, &nu, &x, &y, metric);
    assert_close("value", g.value.as_slice().unwrap(), &want, 1e-12);
    let (fx, fy) = finite_differences(&s, &mu, &nu, &x, &y, metric, 1e-5);
    let label = format!("{metric:?} {relax:?} batch {batch}");
    assert_close(&format!("{label} ∂/∂x"), g.x.as_slice().unwrap(), &fx, tol);
    assert_close(&format!("{label} ∂/∂y"), g.y.as_slice().unwrap(), &fy, tol);
    // The envelope gradient (of OT_ε) is a different vector: the test sees the difference.
    let env = s.point_gradients(&problem).unwrap();
    let scale = g.x.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let gap = (&env.x - &g.x).iter().fold(0.0f64, |a, v| a.max(v.abs())) / scale;
    assert!(
        gap > 1e3 * tol,
        "{label}: envelope and exact agree to {gap}"
    );
}

#[test]
fn balanced_squared_euclidean_matches_finite_differences() {
    check_against_fd(
        1,
        (1, 6, 5, 2),
        (1.0, 1.0),
        0.1,
        PointMetric::SqEuclidean,
        None,
        3e-8,
    );
}

#[test]
fn balanced_euclidean_matches_finite_differences() {
    check_against_fd(
        2,
        (1, 5, 6, 3),
        (1.0, 1.0),
        0.05,
        PointMetric::Euclidean,
        None,
        3e-8,
    );
}

#[test]
fn unbalanced_both_sides_relaxed_matches_finite_differences() {
    check_against_fd(
        3,
        (1, 6, 4, 2),
        (1.0, 1.7),
        0.1,
        PointMetric::SqEuclidean,
        Some(Relaxation::kl(0.5)),
        3e-8,
    );
    check_against_fd(
        4,
        (1, 4, 5, 2),
        (0.8, 1.3),
        0.1,
        PointMetric::Euclidean,
        Some(Relaxation::kl(0.3)),
        3e-8,
    );
}

#[test]
fn semi_unbalanced_matches_finite_differences() {
    // ν kept exactly (ρ_ν = ∞), μ relaxed; and the reverse.
    check_against_fd(
        5,
        (1, 5, 4, 2),
        (1.4, 1.0),
        0.1,
        PointMetric::SqEuclidean,
        Some(Relaxation::kl_each(0.4, f64::INFINITY)),
        3e-8,
    );
    check_against_fd(
        6,
        (1, 4, 5, 3),
        (1.0, 0.6),
        0.08,
        PointMetric::Euclidean,
        Some(Relaxation::kl_each(f64::INFINITY, 0.6)),
        3e-8,
    );
}

#[test]
fn batch_of_two_problems_matches_finite_differences() {
    check_against_fd(
        7,
        (2, 5, 4, 2),
        (1.0, 1.0),
        0.1,
        PointMetric::SqEuclidean,
        None,
        3e-8,
    );
    check_against_fd(
        8,
        (2, 4, 5, 2),
        (1.0, 1.5),
        0.1,
        PointMetric::Euclidean,
        Some(Relaxation::kl(0.5)),
        3e-8,
    );
}

/// `∇_x c(x, y)` and the metric's cost, by hand.
fn grad_c(metric: PointMetric, x: &[f64], y: &[f64]) -> Vec<f64> {
    let diff: Vec<f64> = x.iter().zip(y).map(|(a, b)| a - b).collect();
    match metric {
        PointMetric::SqEuclidean => diff.iter().map(|v| 2.0 * v).collect(),
        PointMetric::Euclidean => {
            let r = diff.iter().map(|v| v * v).sum::<f64>().sqrt();
            diff.iter().map(|v| v / r).collect()
        }
    }
}

#[test]
fn equals_the_chain_rule_of_the_dense_implicit_gradient() {
    // ∂⟨P,C⟩/∂x_i = Σ_j (∂⟨P,C⟩/∂C_ij) ∇_x c(x_i, y_j), with ∂/∂C from the dense solver
    // (plan stored, its own kernels), balanced and unbalanced.
    let mut rng = Lcg(11);
    let (n, m, d) = (7, 6, 3);
    let x = cloud(&mut rng, n, d);
    let y = cloud(&mut rng, m, d);
    let mu = weights(&mut rng, 1, n, 1.0);
    for (metric, relax, nu_mass) in [
        (PointMetric::SqEuclidean, None, 1.0),
        (PointMetric::Euclidean, None, 1.0),
        (PointMetric::SqEuclidean, Some(Relaxation::kl(0.2)), 2.0),
        (
            PointMetric::Euclidean,
            Some(Relaxation::kl_each(f64::INFINITY, 0.5)),
            0.5,
        ),
    ] {
        let nu = weights(&mut rng, 1, m, nu_mass);
        let s = solver(0.05, relax);
        let cg = CgParams::default();
        let cloud_cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
        let dense = cloud_cost.to_dense();
        let pts = s
            .transport_point_gradients(
                &Problem::new(mu.view(), nu.view(), cloud_cost).unwrap(),
                &cg,
            )
            .unwrap();
        let w = s
            .wasserstein_gradients(
                &Problem::new(mu.view(), nu.view(), dense.view()).unwrap(),
                &cg,
            )
            .unwrap()
            .cost
            .index_axis(Axis(0), 0)
            .to_owned();
        let mut gx = vec![0.0; n * d];
        let mut gy = vec![0.0; m * d];
        for i in 0..n {
            for j in 0..m {
                let xi = x.row(i).to_vec();
                let yj = y.row(j).to_vec();
                let gc = grad_c(metric, &xi, &yj);
                for k in 0..d {
                    gx[i * d + k] += w[[i, j]] * gc[k];
                    // ∇_y c = −∇_x c for both metrics.
                    gy[j * d + k] -= w[[i, j]] * gc[k];
                }
            }
        }
        let label = format!("{metric:?} {relax:?}");
        assert_close(&format!("{label} x"), pts.x.as_slice().unwrap(), &gx, 1e-11);
        assert_close(&format!("{label} y"), pts.y.as_slice().unwrap(), &gy, 1e-11);
    }
}

#[test]
fn zero_mass_points_have_zero_gradient() {
    // A point without mass carries no row of the plan: moving it leaves ⟨P,C⟩ unchanged.
    let mut rng = Lcg(21);
    let (n, m, d) = (5, 4, 2);
    let x = cloud(&mut rng, n, d);
    let y = cloud(&mut rng, m, d);
    let mut mu = weights(&mut rng, 1, n, 1.0);
    mu[[0, 2]] = 0.0;
    let s = mu.sum();
    mu.mapv_inplace(|v| v / s);
    let nu = weights(&mut rng, 1, m, 1.0);
    let solver = solver(0.1, None);
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let g = solver
        .transport_point_gradients(
            &Problem::new(mu.view(), nu.view(), cost).unwrap(),
            &CgParams::default(),
        )
        .unwrap();
    assert!(g.x.index_axis(Axis(1), 2).iter().all(|&v| v == 0.0));
    let (fx, fy) = finite_differences(&solver, &mu, &nu, &x, &y, PointMetric::SqEuclidean, 1e-5);
    assert_close("x", g.x.as_slice().unwrap(), &fx, 3e-8);
    assert_close("y", g.y.as_slice().unwrap(), &fy, 3e-8);
}

#[test]
fn f32_agrees_with_f64() {
    // Same clouds and weights in f32 (Sinkhorn to 1e-6, CG at its f32 default, a relative
    // residual of 1e-5 ≈ 84 ε_f32): the gradient within 1024 ε_f32 of the f64 one, relative
    // to its largest entry (8e-6 seen).
    let mut rng = Lcg(31);
    let (n, m, d) = (40, 30, 3);
    let x = cloud(&mut rng, n, d);
    let y = cloud(&mut rng, m, d);
    let mu = weights(&mut rng, 1, n, 1.0);
    let nu = weights(&mut rng, 1, m, 1.0);
    let eps = 0.1;
    for (metric, relax) in [
        (PointMetric::SqEuclidean, None),
        (PointMetric::Euclidean, Some(Relaxation::kl(0.5))),
    ] {
        let s64 = solver(eps, relax);
        let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
        let want = s64
            .transport_point_gradients(
                &Problem::new(mu.view(), nu.view(), cost).unwrap(),
                &CgParams::default(),
            )
            .unwrap();
        let (x32, y32) = (x.mapv(|v| v as f32), y.mapv(|v| v as f32));
        let (mu32, nu32) = (mu.mapv(|v| v as f32), nu.mapv(|v| v as f32));
        let params = SinkhornParams::new(eps).max_iters(10_000).tol(1e-6);
        let cost32 = PointCloudCost::with_metric(x32.view(), y32.view(), metric).unwrap();
        let got = Relaxed::or_balanced(SinkhornSolver::new(CpuBackend, params), relax)
            .transport_point_gradients(
                &Problem::new(mu32.view(), nu32.view(), cost32).unwrap(),
                &CgParams::default(),
            )
            .unwrap();
        assert!(got.result.convergence.converged && got.cg.all_converged());
        let tol = 1024.0 * f32::EPSILON as f64;
        let to64 = |a: &ndarray::Array3<f32>| a.iter().map(|&v| v as f64).collect::<Vec<f64>>();
        let label = format!("f32 {metric:?} {relax:?}");
        assert_close(
            &format!("{label} x"),
            &to64(&got.x),
            want.x.as_slice().unwrap(),
            tol,
        );
        assert_close(
            &format!("{label} y"),
            &to64(&got.y),
            want.y.as_slice().unwrap(),
            tol,
        );
    }
}

#[test]
fn bad_input_is_an_error_naming_the_argument() {
    let (x, y) = (
        ndarray::array![[0.0f64, 0.0], [1.0, 0.0]],
        ndarray::array![[0.0, 1.0]],
    );
    let (mu, nu) = (ndarray::array![[0.5, 0.5]], ndarray::array![[1.0]]);
    let s = solver(0.1, None);
    // A dense cost has no points.
    let dense = PointCloudCost::new(x.view(), y.view()).unwrap().to_dense();
    let e = s
        .transport_point_gradients(
            &Problem::new(mu.view(), nu.view(), dense.view()).unwrap(),
            &CgParams::default(),
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::Shape { arg, .. } if arg == "cost"),
        "{e}"
    );
    // Bad CG parameters.
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let problem = Problem::new(mu.view(), nu.view(), cost).unwrap();
    let e = s
        .transport_point_gradients(&problem, &CgParams::default().max_iters(0))
        .unwrap_err();
    assert!(
        matches!(&e, Error::Parameter { arg, .. } if arg == "cg.max_iters"),
        "{e}"
    );
    // Unequal masses without a relaxation.
    let nu2 = ndarray::array![[2.0]];
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let e = s
        .transport_point_gradients(
            &Problem::new(mu.view(), nu2.view(), cost).unwrap(),
            &CgParams::default(),
        )
        .unwrap_err();
    assert!(matches!(&e, Error::UnequalMass { .. }), "{e}");
}
