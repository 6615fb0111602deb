//! Sinkhorn solver against independent references: POT values, a plain f64 scaling-domain
//! Sinkhorn, the exact 1-D transport cost, marginal constraints, batch/precision agreement.

use crate::common;
use logot::{
    CpuBackend, EpsScaling, Error, Problem, Real, SinkhornParams, SinkhornResult, SinkhornSolver,
    WarmStart,
};
use ndarray::{Array1, Array2, Array3, ArrayView1, ArrayView2, Axis};

fn solve<T: Real>(
    mu: ArrayView1<T>,
    nu: ArrayView1<T>,
    c: ArrayView2<T>,
    p: SinkhornParams,
) -> SinkhornResult<T> {
    SinkhornSolver::new(CpuBackend, p)
        .solve(&Problem::new(mu, nu, c).unwrap())
        .unwrap()
}

fn plan<T: Real>(
    mu: ArrayView1<T>,
    nu: ArrayView1<T>,
    c: ArrayView2<T>,
    p: SinkhornParams,
) -> Array2<T> {
    let cp = SinkhornSolver::new(CpuBackend, p)
        .coupling(&Problem::new(mu, nu, c).unwrap())
        .unwrap();
    cp.plan.index_axis(Axis(0), 0).to_owned()
}

/// POT problem P1: x_i = i/6 (7 points), y_j = j/4 (5 points), C = (x_i − y_j)²,
/// μ ∝ 1 + i, ν ∝ 5 − j.
fn pot_p1() -> (Array1<f64>, Array1<f64>, Array2<f64>) {
    let c = Array2::from_shape_fn((7, 5), |(i, j)| (i as f64 / 6.0 - j as f64 / 4.0).powi(2));
    let mu = Array1::from_shape_fn(7, |i| (1 + i) as f64 / 28.0);
    let nu = Array1::from_shape_fn(5, |j| (5 - j) as f64 / 15.0);
    (mu, nu, c)
}

fn tight(eps: f64) -> SinkhornParams {
    SinkhornParams::new(eps).max_iters(100_000).tol(1e-13)
}

/// Values from POT 0.9.7:
/// ```python
/// x = np.arange(7)/6; y = np.arange(5)/4; C = (x[:,None]-y[None,:])**2
/// mu = 1+np.arange(7.); mu /= mu.sum(); nu = 5-np.arange(5.); nu /= nu.sum()
/// P = ot.sinkhorn(mu, nu, C, eps, method="sinkhorn_log", numItermax=100000, stopThr=1e-14)
/// (P*C).sum(), P[0,0], P[6,4], P[3,2]
/// ```
#[test]
fn matches_pot_converged_values() {
    let (mu, nu, c) = pot_p1();
    let cases = [
        (
            0.05,
            0.1473531577289169,
            0.035575998406340195,
            0.06347606960819069,
            0.002302276440692857,
        ),
        (
            0.01,
            0.1355507032052036,
            0.035714285714185404,
            0.06666665514671358,
            3.228889282169913e-09,
        ),
    ];
    for (eps, cost, p00, p64, p32) in cases {
        let r = solve(mu.view(), nu.view(), c.view(), tight(eps));
        assert!(r.convergence.converged, "{:?}", r.convergence);
        assert!(
            (r.distance[0] - cost).abs() < 1e-10,
            "eps {eps}: {} vs POT {cost}",
            r.distance[0]
        );
        let p = plan(mu.view(), nu.view(), c.view(), tight(eps));
        for (got, want) in [(p[[0, 0]], p00), (p[[6, 4]], p64), (p[[3, 2]], p32)] {
            assert!(
                (got - want).abs() < 1e-10,
                "eps {eps}: plan entry {got} vs POT {want}"
            );
        }
    }
}

/// POT with a fixed iteration count checks the update order (g first, from zero potentials):
/// `ot.sinkhorn(mu, nu, C, 0.01, method="sinkhorn_log", numItermax=10, stopThr=0)` on P1
/// gives ⟨P,C⟩ = 0.020549918733845013 and P[2,1] = 0.10343462718585575.
#[test]
fn matches_pot_after_ten_iterations() {
    let (mu, nu, c) = pot_p1();
    let p = SinkhornParams::new(0.01).fixed_iterations(10);
    let r = solve(mu.view(), nu.view(), c.view(), p.clone());
    assert_eq!(r.convergence.iterations, 10);
    assert!(!r.convergence.converged);
    assert!(
        (r.distance[0] - 0.020549918733845013).abs() < 1e-13,
        "{}",
        r.distance[0]
    );
    let pl = plan(mu.view(), nu.view(), c.view(), p);
    assert!((pl[[2, 1]] - 0.10343462718585575).abs() < 1e-13);
}

/// POT problem P2: 50 points on linspace(0,1), C = |x − y|, μ ∝ 1 + sin²(3x), ν ∝ e^{−x};
/// `ot.sinkhorn(mu, nu, C, 0.02, method="sinkhorn_log", numItermax=100000, stopThr=1e-14)`
/// gives ⟨P,C⟩ = 0.09551444493246286 and P[10,12] = 5.1586277636177405e-05.
#[test]
fn matches_pot_non_squared_cost() {
    let x: Vec<f64> = (0..50).map(|i| i as f64 / 49.0).collect();
    let c = Array2::from_shape_fn((50, 50), |(i, j)| (x[i] - x[j]).abs());
    let mut mu = Array1::from_shape_fn(50, |i| 1.0 + (3.0 * x[i]).sin().powi(2));
    mu /= mu.sum();
    let mut nu = Array1::from_shape_fn(50, |i| (-x[i]).exp());
    nu /= nu.sum();
    let r = solve(mu.view(), nu.view(), c.view(), tight(0.02));
    assert!((r.distance[0] - 0.09551444493246286).abs() < 1e-10);
    let p = plan(mu.view(), nu.view(), c.view(), tight(0.02));
    assert!((p[[10, 12]] - 5.1586277636177405e-05).abs() < 1e-12);
}

/// Plain Sinkhorn in the scaling domain, f64: `v = ν / Kᵀu`, `u = μ / Kv`, `K = e^{−C/ε}`.
fn scaling_sinkhorn(
    mu: &Array1<f64>,
    nu: &Array1<f64>,
    c: &Array2<f64>,
    eps: f64,
    iters: usize,
) -> Array2<f64> {
    let k = c.mapv(|v| (-v / eps).exp());
    let mut u = Array1::<f64>::ones(mu.len());
    let mut v = Array1::<f64>::ones(nu.len());
    for _ in 0..iters {
        v = nu / &k.t().dot(&u);
        u = mu / &k.dot(&v);
    }
    let mut p = k.clone();
    for ((i, j), x) in p.indexed_iter_mut() {
        *x *= u[i] * v[j];
    }
    p
}

fn random_problem(n: usize, m: usize, seed: u64) -> (Array1<f64>, Array1<f64>, Array2<f64>) {
    let mut r = common::uniforms(seed);
    let mut mu = Array1::from_shape_fn(n, |_| 0.1 + r());
    mu /= mu.sum();
    let mut nu = Array1::from_shape_fn(m, |_| 0.1 + r());
    nu /= nu.sum();
    let c = Array2::from_shape_fn((n, m), |_| r());
    (mu, nu, c)
}

#[test]
fn log_domain_iterates_equal_scaling_domain_iterates() {
    for (n, m, seed) in [(13, 9, 1), (64, 80, 2), (300, 257, 3)] {
        let (mu, nu, c) = random_problem(n, m, seed);
        for iters in [1, 7, 50] {
            let want = scaling_sinkhorn(&mu, &nu, &c, 0.1, iters);
            let got = plan(
                mu.view(),
                nu.view(),
                c.view(),
                SinkhornParams::new(0.1).fixed_iterations(iters),
            );
            let err = (&got - &want).mapv(f64::abs).fold(0.0f64, |a, &b| a.max(b));
            assert!(err < 1e-14, "n={n} m={m} iters={iters}: max |ΔP| = {err:e}");
        }
    }
}

#[test]
fn marginals_are_met_at_convergence() {
    let (mu, nu, c) = random_problem(120, 90, 7);
    let p = plan(mu.view(), nu.view(), c.view(), SinkhornParams::new(0.02));
    let rows = p.sum_axis(Axis(1));
    let cols = p.sum_axis(Axis(0));
    // Rows are exact after the last f update; columns within the tolerance (1e-9, L1).
    assert!((&rows - &mu).mapv(f64::abs).sum() < 1e-12);
    assert!((&cols - &nu).mapv(f64::abs).sum() <= 1e-9);
    assert!(p.iter().all(|&v| v >= 0.0));
}

/// Exact 1-D transport cost for a convex cost: the monotone (north-west corner) coupling.
fn exact_1d(x: &[f64], mu: &[f64], nu: &[f64]) -> f64 {
    let (mut i, mut j, mut a, mut b, mut total) = (0, 0, mu[0], nu[0], 0.0);
    loop {
        let t = a.min(b);
        total += t * (x[i] - x[j]).powi(2);
        a -= t;
        b -= t;
        if a <= 1e-15 {
            i += 1;
            if i == x.len() {
                break;
            }
            a = mu[i];
        }
        if b <= 1e-15 {
            j += 1;
            if j == x.len() {
                break;
            }
            b = nu[j];
        }
    }
    total
}

#[test]
fn entropic_cost_approaches_exact_1d_cost_as_eps_shrinks() {
    let n = 60;
    let x: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    let bump = |m: f64, s: f64| {
        let mut h = Array1::from_shape_fn(n, |i| (-0.5 * ((x[i] - m) / s).powi(2)).exp() + 0.01);
        h /= h.sum();
        h
    };
    let (mu, nu) = (bump(0.3, 0.1), bump(0.6, 0.15));
    let c = Array2::from_shape_fn((n, n), |(i, j)| (x[i] - x[j]).powi(2));
    let w0 = exact_1d(&x, mu.as_slice().unwrap(), nu.as_slice().unwrap());
    let mut last_gap = f64::INFINITY;
    for eps in [1e-2, 3e-3, 1e-3, 1e-4] {
        let params = SinkhornParams::new(eps)
            .max_iters(20_000)
            .tol(1e-10)
            .eps_scaling(EpsScaling::new(1.0).factor(0.5).iters_per_stage(20));
        let r = solve(mu.view(), nu.view(), c.view(), params);
        assert!(r.convergence.converged, "eps {eps}: {:?}", r.convergence);
        let gap = r.distance[0] - w0;
        // The entropic plan spreads mass, so its transport cost is above the exact one,
        // by O(ε) (POT gives gaps 4.6e-3, 1.4e-3, 4.4e-4, 5.2e-6 on this problem).
        assert!(gap > -1e-9 && gap < eps, "eps {eps}: gap {gap:e}");
        assert!(gap < last_gap);
        last_gap = gap;
    }
}

#[test]
fn f32_agrees_with_f64() {
    let (mu, nu, c) = random_problem(200, 150, 11);
    let to32 = |a: &Array2<f64>| a.mapv(|v| v as f32);
    let (mu32, nu32, c32) = (mu.mapv(|v| v as f32), nu.mapv(|v| v as f32), to32(&c));
    for eps in [0.1, 0.01] {
        let r64 = solve(mu.view(), nu.view(), c.view(), SinkhornParams::new(eps));
        let r32 = solve(
            mu32.view(),
            nu32.view(),
            c32.view(),
            SinkhornParams::new(eps),
        );
        assert!(r64.convergence.converged && r32.convergence.converged);
        let rel = (r32.distance[0] as f64 - r64.distance[0]).abs() / r64.distance[0];
        assert!(rel < 1e-4, "eps {eps}: relative difference {rel:e}");
    }
}

#[test]
fn small_eps_in_f32_stays_finite_and_close_to_f64() {
    // Costs in [0, 1]; eps down to 1e-4; same fixed iteration count in both precisions.
    let n = 64;
    let x: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    let c = Array2::from_shape_fn((n, n), |(i, j)| (x[i] - x[j]).powi(2));
    let mut mu = Array1::from_shape_fn(n, |i| (-((x[i] - 0.25) / 0.1).powi(2)).exp() + 1e-3);
    mu /= mu.sum();
    let mut nu = Array1::from_shape_fn(n, |i| (-((x[i] - 0.7) / 0.2).powi(2)).exp() + 1e-3);
    nu /= nu.sum();
    for eps in [1e-3, 1e-4] {
        let p = SinkhornParams::new(eps).fixed_iterations(300);
        let r64 = solve(mu.view(), nu.view(), c.view(), p.clone());
        let r32 = solve(
            mu.mapv(|v| v as f32).view(),
            nu.mapv(|v| v as f32).view(),
            c.mapv(|v| v as f32).view(),
            p,
        );
        assert!(r32.f.iter().chain(r32.g.iter()).all(|v| v.is_finite()));
        assert!(r32.distance[0].is_finite() && r32.convergence.marginal_error.is_finite());
        let rel = (r32.distance[0] as f64 - r64.distance[0]).abs() / r64.distance[0];
        assert!(
            rel < 1e-3,
            "eps {eps}: f32 {} vs f64 {} (rel {rel:e})",
            r32.distance[0],
            r64.distance[0]
        );
    }
}

#[test]
fn batch_equals_one_by_one_shared_and_per_problem_costs() {
    let (b, n, m) = (5, 40, 30);
    let mut r = common::uniforms(99);
    let mut mu = Array2::from_shape_fn((b, n), |_| 0.05 + r());
    let mut nu = Array2::from_shape_fn((b, m), |_| 0.05 + r());
    for k in 0..b {
        let s = mu.row(k).sum();
        mu.row_mut(k).mapv_inplace(|v| v / s);
        let s = nu.row(k).sum();
        nu.row_mut(k).mapv_inplace(|v| v / s);
    }
    let shared = Array2::from_shape_fn((n, m), |_| r());
    let per = Array3::from_shape_fn((b, n, m), |_| r());
    let params = SinkhornParams::new(0.05).fixed_iterations(40);
    let solver = SinkhornSolver::new(CpuBackend, params.clone());
    let batch_shared = solver
        .solve(&Problem::new(mu.view(), nu.view(), shared.view()).unwrap())
        .unwrap();
    let batch_per = solver
        .solve(&Problem::new(mu.view(), nu.view(), per.view()).unwrap())
        .unwrap();
    for k in 0..b {
        let one = solve(mu.row(k), nu.row(k), shared.view(), params.clone());
        assert!((one.distance[0] - batch_shared.distance[k]).abs() < 1e-14);
        assert!(
            (&one.f.row(0) - &batch_shared.f.row(k))
                .mapv(f64::abs)
                .sum()
                < 1e-12
        );
        let one = solve(
            mu.row(k),
            nu.row(k),
            per.index_axis(Axis(0), k),
            params.clone(),
        );
        assert!((one.distance[0] - batch_per.distance[k]).abs() < 1e-14);
        assert!((&one.g.row(0) - &batch_per.g.row(k)).mapv(f64::abs).sum() < 1e-12);
    }
}

#[test]
fn zero_mass_bins_give_the_problem_without_them() {
    let (mu, nu, c) = random_problem(30, 20, 5);
    let mut mu0 = mu.clone();
    let mut nu0 = nu.clone();
    for &i in &[0usize, 7, 29] {
        mu0[i] = 0.0;
    }
    for &j in &[3usize, 19] {
        nu0[j] = 0.0;
    }
    mu0 /= mu0.sum();
    nu0 /= nu0.sum();
    let keep_i: Vec<usize> = (0..30).filter(|i| mu0[*i] > 0.0).collect();
    let keep_j: Vec<usize> = (0..20).filter(|j| nu0[*j] > 0.0).collect();
    let sub_mu = Array1::from_iter(keep_i.iter().map(|&i| mu0[i]));
    let sub_nu = Array1::from_iter(keep_j.iter().map(|&j| nu0[j]));
    let sub_c = Array2::from_shape_fn((keep_i.len(), keep_j.len()), |(a, b)| {
        c[[keep_i[a], keep_j[b]]]
    });
    for eps in [0.1, 0.01] {
        // Same iterations on both: the iterates must agree to round-off.
        let params = SinkhornParams::new(eps).fixed_iterations(300);
        let full = solve(mu0.view(), nu0.view(), c.view(), params.clone());
        let sub = solve(sub_mu.view(), sub_nu.view(), sub_c.view(), params);
        assert!(full.distance[0].is_finite());
        assert!(
            (full.distance[0] - sub.distance[0]).abs() < 1e-12,
            "{} vs {} ({:?} / {:?})",
            full.distance[0],
            sub.distance[0],
            full.convergence,
            sub.convergence
        );
        assert!(full.f[[0, 0]] == f64::NEG_INFINITY && full.g[[0, 3]] == f64::NEG_INFINITY);
        assert!(full.f.iter().chain(full.g.iter()).all(|v| !v.is_nan()));
        let p = plan(mu0.view(), nu0.view(), c.view(), SinkhornParams::new(eps));
        assert!(p.row(7).iter().all(|&v| v == 0.0) && p.column(19).iter().all(|&v| v == 0.0));
        // f32 too: no NaN anywhere.
        let r32 = solve(
            mu0.mapv(|v| v as f32).view(),
            nu0.mapv(|v| v as f32).view(),
            c.mapv(|v| v as f32).view(),
            SinkhornParams::new(eps),
        );
        assert!(r32.distance[0].is_finite() && r32.f.iter().all(|v| !v.is_nan()));
    }
}

#[test]
fn plan_is_invariant_to_constants_added_to_cost_rows_and_columns() {
    let (mu, nu, c) = random_problem(25, 35, 17);
    let a: Vec<f64> = (0..25).map(|i| 0.3 * (i as f64).sin()).collect();
    let b: Vec<f64> = (0..35).map(|j| -0.2 * (j as f64).cos()).collect();
    let shifted = Array2::from_shape_fn((25, 35), |(i, j)| c[[i, j]] + a[i] + b[j]);
    let p = plan(mu.view(), nu.view(), c.view(), tight(0.05));
    let q = plan(mu.view(), nu.view(), shifted.view(), tight(0.05));
    let err = (&p - &q).mapv(f64::abs).fold(0.0f64, |x, &y| x.max(y));
    assert!(err < 1e-11, "max |ΔP| = {err:e}");
}

#[test]
fn non_convergence_is_reported_and_warm_start_resumes() {
    let (mu, nu, c) = random_problem(80, 80, 23);
    let few = SinkhornParams::new(0.005).max_iters(5).tol(1e-9);
    let r = solve(mu.view(), nu.view(), c.view(), few);
    assert!(!r.convergence.converged);
    assert_eq!(r.convergence.iterations, 5);
    assert!(r.convergence.marginal_error > 1e-9);
    let full = solve(
        mu.view(),
        nu.view(),
        c.view(),
        SinkhornParams::new(0.005).max_iters(100_000),
    );
    assert!(full.convergence.converged);
    let warm =
        SinkhornParams::new(0.005).warm_start(WarmStart::new(full.f.clone(), full.g.clone()));
    let again = solve(mu.view(), nu.view(), c.view(), warm);
    assert!(again.convergence.converged);
    assert!(
        again.convergence.iterations <= 10,
        "warm start took {} iterations",
        again.convergence.iterations
    );
    assert!((again.distance[0] - full.distance[0]).abs() < 1e-9);
}

#[test]
fn eps_scaling_reaches_the_same_solution_faster() {
    let (mu, nu, c) = random_problem(100, 100, 31);
    let plain = solve(
        mu.view(),
        nu.view(),
        c.view(),
        SinkhornParams::new(1e-3).max_iters(200_000),
    );
    let scaled = solve(
        mu.view(),
        nu.view(),
        c.view(),
        SinkhornParams::new(1e-3)
            .max_iters(200_000)
            .eps_scaling(EpsScaling::new(1.0).factor(0.5).iters_per_stage(10)),
    );
    assert!(plain.convergence.converged && scaled.convergence.converged);
    assert!((plain.distance[0] - scaled.distance[0]).abs() < 1e-8);
    assert!(scaled.convergence.iterations < plain.convergence.iterations);
}

fn expect_err<T: std::fmt::Debug>(r: Result<T, Error>, needle: &str) {
    match r {
        Ok(v) => panic!("expected an error mentioning {needle:?}, got Ok({v:?})"),
        Err(e) => assert!(
            e.to_string().contains(needle),
            "error {e:?} does not mention {needle:?}"
        ),
    }
}

#[test]
fn invalid_inputs_are_errors_that_name_the_argument() {
    let (mu, nu, c) = random_problem(4, 3, 1);
    let v = |a: &Array1<f64>| a.clone();
    let mut bad = v(&mu);
    bad[1] = f64::NAN;
    expect_err(
        Problem::new(bad.view(), nu.view(), c.view()),
        "mu: non-finite value NaN at index (0, 1)",
    );
    let mut bad = v(&nu);
    bad[2] = f64::INFINITY;
    expect_err(
        Problem::new(mu.view(), bad.view(), c.view()),
        "nu: non-finite",
    );
    let mut badc = c.clone();
    badc[[1, 1]] = f64::NEG_INFINITY;
    expect_err(
        Problem::new(mu.view(), nu.view(), badc.view()),
        "cost: non-finite",
    );
    let mut bad = v(&mu);
    bad[0] = -0.1;
    expect_err(
        Problem::new(bad.view(), nu.view(), c.view()),
        "mu: negative mass",
    );
    // Unequal masses are refused when the problem is solved as a balanced one.
    let mu2 = &mu * 2.0;
    expect_err(
        Problem::new(mu2.view(), nu.view(), c.view())
            .and_then(|p| SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1)).solve(&p)),
        "unequal total masses",
    );
    expect_err(
        Problem::new(Array1::zeros(4).view(), nu.view(), c.view()),
        "mu: total mass is zero",
    );
    expect_err(
        Problem::new(Array1::<f64>::zeros(0).view(), nu.view(), c.view()),
        "mu: empty input",
    );
    expect_err(
        Problem::new(mu.view(), nu.view(), c.t()),
        "cost: is 3×4 but mu has 4 and nu has 3",
    );
    let mu2 = Array2::from_shape_fn((2, 4), |(_, i)| mu[i]);
    let nu3 = Array2::from_shape_fn((3, 3), |(_, j)| nu[j]);
    expect_err(
        Problem::new(mu2.view(), nu3.view(), c.view()),
        "nu: batch of 3 problems but mu has 2",
    );
    let nu2 = Array2::from_shape_fn((2, 3), |(_, j)| nu[j]);
    let c3 = Array3::from_shape_fn((3, 4, 3), |(_, i, j)| c[[i, j]]);
    expect_err(
        Problem::new(mu2.view(), nu2.view(), c3.view()),
        "cost: holds 3 matrices but there are 2 problems",
    );
    let p = Problem::new(mu.view(), nu.view(), c.view()).unwrap();
    for (params, needle) in [
        (SinkhornParams::new(0.0), "eps = 0"),
        (SinkhornParams::new(-1.0), "eps = -1"),
        (SinkhornParams::new(f64::NAN), "eps = NaN"),
        (SinkhornParams::default().max_iters(0), "max_iters = 0"),
        (SinkhornParams::default().check_every(0), "check_every = 0"),
        (SinkhornParams::default().tol(-1.0), "tol = -1"),
    ] {
        expect_err(SinkhornSolver::new(CpuBackend, params).solve(&p), needle);
    }
    let warm = SinkhornParams::default()
        .warm_start(WarmStart::new(Array2::zeros((1, 5)), Array2::zeros((1, 3))));
    expect_err(
        SinkhornSolver::new(CpuBackend, warm).solve(&p),
        "warm_start",
    );
}
