//! Gradients of unbalanced (KL-relaxed) OT: exact implicit gradients of the transport cost
//! `⟨P, C⟩` and of a general loss of the plan, and envelope gradients of the unbalanced
//! objective, checked against central finite differences of tightly converged f64 solves
//! (the public checker), a brute-force f64 evaluation of the objective from the plan, and
//! the balanced limit.

use crate::common;

use common::relaxed::Relaxed;
use common::Lcg;
use logot::grad::{check_gradient, CgParams, GradCheckParams};
use logot::{CpuBackend, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
use ndarray::{Array1, Array2, Array3, Axis};

fn solver(eps: f64, rho: (f64, f64)) -> Relaxed<CpuBackend> {
    Relaxed::new(
        SinkhornSolver::new(
            CpuBackend,
            SinkhornParams::new(eps).max_iters(200_000).tol(1e-15),
        ),
        rho,
    )
}

/// Positive weights of unequal total masses (`scale` times a histogram).
fn weights(rng: &mut Lcg, n: usize, scale: f64) -> Vec<f64> {
    let v = rng.vec(n, 0.2, 1.0);
    let s: f64 = v.iter().sum();
    v.into_iter().map(|x| scale * x / s).collect()
}

fn problem_arrays(mu: &[f64], nu: &[f64], c: &[f64]) -> (Array1<f64>, Array1<f64>, Array2<f64>) {
    let c = Array2::from_shape_vec((mu.len(), nu.len()), c.to_vec()).unwrap();
    (Array1::from(mu.to_vec()), Array1::from(nu.to_vec()), c)
}

fn distance(mu: &[f64], nu: &[f64], c: &[f64], eps: f64, rho: (f64, f64)) -> f64 {
    let (mu, nu, c) = problem_arrays(mu, nu, c);
    solver(eps, rho)
        .solve(&Problem::new(mu.view(), nu.view(), c.view()).unwrap())
        .unwrap()
        .distance[0]
}

fn objective(mu: &[f64], nu: &[f64], c: &[f64], eps: f64, rho: (f64, f64)) -> f64 {
    let (mu, nu, c) = problem_arrays(mu, nu, c);
    solver(eps, rho)
        .envelope_gradients(&Problem::new(mu.view(), nu.view(), c.view()).unwrap())
        .unwrap()
        .value[0]
}

fn opts() -> GradCheckParams {
    GradCheckParams::default()
        .step(1e-5)
        .rel_tol(1e-6)
        .abs_floor(1e-6)
}

/// Generalized `KL(x ‖ y) = Σ x log(x/y) − x + y` in f64 (`0 log 0 = 0`).
fn kl(x: &[f64], y: &[f64]) -> f64 {
    x.iter()
        .zip(y)
        .map(|(&x, &y)| if x > 0.0 { x * (x / y).ln() } else { 0.0 } - x + y)
        .sum()
}

/// The unbalanced objective `⟨P,C⟩ + ε KL(P‖μ⊗ν) + ρ_μ KL(P1‖μ) + ρ_ν KL(Pᵀ1‖ν)` of a plan,
/// brute force in f64 (a term with `ρ = ∞` left out).
fn primal(plan: &Array2<f64>, mu: &[f64], nu: &[f64], c: &[f64], eps: f64, rho: (f64, f64)) -> f64 {
    let (n, m) = plan.dim();
    let p: Vec<f64> = plan.iter().copied().collect();
    let prod: Vec<f64> = (0..n * m).map(|k| mu[k / m] * nu[k % m]).collect();
    let rows: Vec<f64> = plan.sum_axis(Axis(1)).to_vec();
    let cols: Vec<f64> = plan.sum_axis(Axis(0)).to_vec();
    let mut v: f64 = p.iter().zip(c).map(|(p, c)| p * c).sum::<f64>() + eps * kl(&p, &prod);
    if rho.0.is_finite() {
        v += rho.0 * kl(&rows, mu);
    }
    if rho.1.is_finite() {
        v += rho.1 * kl(&cols, nu);
    }
    v
}

const RHOS: [(f64, f64); 3] = [(0.5, 0.5), (0.7, f64::INFINITY), (f64::INFINITY, 0.3)];

#[test]
fn transport_cost_gradients_match_finite_differences() {
    for (t, &rho) in RHOS.iter().enumerate() {
        let mut rng = Lcg(100 + t as u64);
        let (n, m, eps) = (5, 4, 0.2);
        // Unequal masses (1.3 and 0.8) unless a side is exact: then the relaxed side adapts.
        let mu = weights(&mut rng, n, 1.3);
        let nu = weights(&mut rng, m, 0.8);
        let c = rng.vec(n * m, 0.0, 1.0);
        let (mua, nua, ca) = problem_arrays(&mu, &nu, &c);
        let g = solver(eps, rho)
            .wasserstein_gradients(
                &Problem::new(mua.view(), nua.view(), ca.view()).unwrap(),
                &CgParams::default().tol(1e-14),
            )
            .unwrap();
        assert!(
            g.result.convergence.converged && g.cg.all_converged(),
            "{rho:?}: {:?} {:?}",
            g.result.convergence,
            g.cg
        );
        let rep = check_gradient(
            |x| distance(&mu, &nu, x, eps, rho),
            &c,
            g.cost.as_slice().unwrap(),
            &opts(),
        )
        .unwrap();
        assert!(rep.passed, "{rho:?} cost: {rep}");
        // No mass constraint: every weight is perturbed on its own.
        let rep = check_gradient(
            |x| distance(x, &nu, &c, eps, rho),
            &mu,
            g.mu.as_slice().unwrap(),
            &opts(),
        )
        .unwrap();
        assert!(rep.passed, "{rho:?} mu: {rep}");
        let rep = check_gradient(
            |x| distance(&mu, x, &c, eps, rho),
            &nu,
            g.nu.as_slice().unwrap(),
            &opts(),
        )
        .unwrap();
        assert!(rep.passed, "{rho:?} nu: {rep}");
    }
}

/// A loss that is not the transport cost: `L(P) = Σ P_ij² w_ij`, through
/// `implicit_gradients` (upstream `G = 2 w ⊙ P`).
#[test]
fn general_loss_gradients_match_finite_differences() {
    let mut rng = Lcg(7);
    let (n, m, eps, rho) = (4, 5, 0.15, (0.4, 0.9));
    let mu = weights(&mut rng, n, 0.7);
    let nu = weights(&mut rng, m, 1.1);
    let c = rng.vec(n * m, 0.0, 1.0);
    let w = Array2::from_shape_vec((n, m), rng.vec(n * m, -1.0, 1.0)).unwrap();
    let loss = |mu: &[f64], nu: &[f64], c: &[f64]| -> f64 {
        let (mu, nu, c) = problem_arrays(mu, nu, c);
        let plan = solver(eps, rho)
            .coupling(&Problem::new(mu.view(), nu.view(), c.view()).unwrap())
            .unwrap()
            .plan;
        plan.index_axis(Axis(0), 0)
            .iter()
            .zip(&w)
            .map(|(p, w)| p * p * w)
            .sum()
    };
    let (mua, nua, ca) = problem_arrays(&mu, &nu, &c);
    let g = solver(eps, rho)
        .implicit_gradients(
            &Problem::new(mua.view(), nua.view(), ca.view()).unwrap(),
            |cpl| {
                let p = cpl.plan.index_axis(Axis(0), 0);
                (&p * &w * 2.0).insert_axis(Axis(0))
            },
            &CgParams::default().tol(1e-14),
        )
        .unwrap();
    assert!(g.result.convergence.converged && g.cg.all_converged());
    for (what, rep) in [
        (
            "cost",
            check_gradient(
                |x| loss(&mu, &nu, x),
                &c,
                g.cost.as_slice().unwrap(),
                &opts(),
            ),
        ),
        (
            "mu",
            check_gradient(|x| loss(x, &nu, &c), &mu, g.mu.as_slice().unwrap(), &opts()),
        ),
        (
            "nu",
            check_gradient(|x| loss(&mu, x, &c), &nu, g.nu.as_slice().unwrap(), &opts()),
        ),
    ] {
        let rep = rep.unwrap();
        assert!(rep.passed, "{what}: {rep}");
    }
}

#[test]
fn envelope_gradients_match_finite_differences_of_the_objective() {
    for (t, &rho) in RHOS.iter().enumerate() {
        let mut rng = Lcg(200 + t as u64);
        let (n, m, eps) = (4, 3, 0.2);
        let mu = weights(&mut rng, n, 0.6);
        let nu = weights(&mut rng, m, 1.5);
        let c = rng.vec(n * m, 0.0, 1.0);
        let (mua, nua, ca) = problem_arrays(&mu, &nu, &c);
        let e = solver(eps, rho)
            .envelope_gradients(&Problem::new(mua.view(), nua.view(), ca.view()).unwrap())
            .unwrap();
        assert!(e.result.convergence.converged, "{:?}", e.result.convergence);
        // The dual value equals the primal objective of the plan, brute force in f64, and
        // the solver's own report of it.
        let plan = e.cost.index_axis(Axis(0), 0).to_owned();
        let want = primal(&plan, &mu, &nu, &c, eps, rho);
        assert!(
            (e.value[0] - want).abs() < 1e-12 * want.abs().max(1.0),
            "{rho:?}: {} vs {want}",
            e.value[0]
        );
        let reported = e.result.objective.as_ref().unwrap()[0];
        assert!((reported - want).abs() < 1e-12, "{reported} vs {want}");
        for (what, rep) in [
            (
                "cost",
                check_gradient(
                    |x| objective(&mu, &nu, x, eps, rho),
                    &c,
                    e.cost.as_slice().unwrap(),
                    &opts(),
                ),
            ),
            (
                "mu",
                check_gradient(
                    |x| objective(x, &nu, &c, eps, rho),
                    &mu,
                    e.mu.as_slice().unwrap(),
                    &opts(),
                ),
            ),
            (
                "nu",
                check_gradient(
                    |x| objective(&mu, x, &c, eps, rho),
                    &nu,
                    e.nu.as_slice().unwrap(),
                    &opts(),
                ),
            ),
        ] {
            let rep = rep.unwrap();
            assert!(rep.passed, "{rho:?} {what}: {rep}");
        }
    }
}

/// A zero-mass bin takes no part in the plan; its gradient is the one-sided derivative,
/// checked against a forward difference (second order by Richardson extrapolation).
#[test]
fn zero_mass_bins_get_one_sided_derivatives() {
    let mut rng = Lcg(31);
    let (n, m, eps, rho) = (5, 4, 0.25, (0.6, 0.8));
    let mut mu = weights(&mut rng, n, 1.2);
    let mut nu = weights(&mut rng, m, 0.9);
    mu[2] = 0.0;
    nu[1] = 0.0;
    let c = rng.vec(n * m, 0.0, 1.0);
    let (mua, nua, ca) = problem_arrays(&mu, &nu, &c);
    let problem = Problem::new(mua.view(), nua.view(), ca.view()).unwrap();
    let g = solver(eps, rho)
        .wasserstein_gradients(&problem, &CgParams::default().tol(1e-14))
        .unwrap();
    let e = solver(eps, rho).envelope_gradients(&problem).unwrap();
    assert!(g.cg.all_converged() && g.result.convergence.converged);
    assert!(g.cost.index_axis(Axis(1), 2).iter().all(|&v| v == 0.0));
    let forward = |value: &dyn Fn(&[f64], &[f64]) -> f64, side: usize, k: usize| -> f64 {
        let h = 1e-6;
        let at = |t: f64| {
            let (mut a, mut b) = (mu.clone(), nu.clone());
            if side == 0 {
                a[k] = t;
            } else {
                b[k] = t;
            }
            value(&a, &b)
        };
        let v0 = at(0.0);
        2.0 * (at(h) - v0) / h - (at(2.0 * h) - v0) / (2.0 * h)
    };
    let dist = |a: &[f64], b: &[f64]| distance(a, b, &c, eps, rho);
    let obj = |a: &[f64], b: &[f64]| objective(a, b, &c, eps, rho);
    for (what, analytic, numeric) in [
        ("distance mu", g.mu[[0, 2]], forward(&dist, 0, 2)),
        ("distance nu", g.nu[[0, 1]], forward(&dist, 1, 1)),
        ("objective mu", e.mu[[0, 2]], forward(&obj, 0, 2)),
        ("objective nu", e.nu[[0, 1]], forward(&obj, 1, 1)),
    ] {
        assert!(
            (analytic - numeric).abs() < 1e-6 * numeric.abs().max(1.0),
            "{what}: {analytic} vs {numeric}"
        );
    }
}

/// A batch with per-problem costs gives each problem's single-problem gradients.
#[test]
fn batched_gradients_equal_single_problem_gradients() {
    let mut rng = Lcg(3);
    let (b, n, m, eps, rho) = (3, 6, 5, 0.1, (0.5, 2.0));
    let mu = Array2::from_shape_fn((b, n), |_| rng.uniform(0.1, 0.5));
    let nu = Array2::from_shape_fn((b, m), |_| rng.uniform(0.1, 0.5));
    let c = Array3::from_shape_fn((b, n, m), |_| rng.uniform(0.0, 1.0));
    let s = solver(eps, rho);
    let cg = CgParams::default().tol(1e-13);
    let all = s
        .wasserstein_gradients(&Problem::new(mu.view(), nu.view(), c.view()).unwrap(), &cg)
        .unwrap();
    for k in 0..b {
        let one = s
            .wasserstein_gradients(
                &Problem::new(mu.row(k), nu.row(k), c.index_axis(Axis(0), k)).unwrap(),
                &cg,
            )
            .unwrap();
        let close = |x: f64, y: f64| (x - y).abs() < 1e-9 * y.abs().max(1.0);
        assert!(all
            .cost
            .index_axis(Axis(0), k)
            .iter()
            .zip(&one.cost)
            .all(|(x, y)| close(*x, *y)));
        assert!(all
            .mu
            .row(k)
            .iter()
            .zip(&one.mu)
            .all(|(x, y)| close(*x, *y)));
        assert!(all
            .nu
            .row(k)
            .iter()
            .zip(&one.nu)
            .all(|(x, y)| close(*x, *y)));
    }
}

/// As ρ grows the unbalanced gradients of `⟨P,C⟩` approach the balanced ones (the marginal
/// gradients compared in the balanced problem's zero-mean representative).
#[test]
fn large_rho_approaches_the_balanced_gradients() {
    let mut rng = Lcg(19);
    let (n, m, eps) = (5, 4, 0.2);
    let mu = weights(&mut rng, n, 1.0);
    let nu = weights(&mut rng, m, 1.0);
    let c = rng.vec(n * m, 0.0, 1.0);
    let (mua, nua, ca) = problem_arrays(&mu, &nu, &c);
    let problem = Problem::new(mua.view(), nua.view(), ca.view()).unwrap();
    let cg = CgParams::default().tol(1e-14);
    let balanced = SinkhornSolver::new(
        CpuBackend,
        SinkhornParams::new(eps).max_iters(200_000).tol(1e-15),
    )
    .wasserstein_gradients(&problem, &cg)
    .unwrap();
    let mut last = f64::INFINITY;
    for rho in [1e2, 1e4, 1e6] {
        let g = solver(eps, (rho, rho))
            .wasserstein_gradients(&problem, &cg)
            .unwrap();
        let mean = g.mu.mean().unwrap();
        let diff = (&g.cost - &balanced.cost)
            .iter()
            .chain((&g.mu.mapv(|v| v - mean) - &balanced.mu).iter())
            .chain((&g.nu.mapv(|v| v + mean) - &balanced.nu).iter())
            .fold(0.0f64, |a, v| a.max(v.abs()));
        assert!(diff < last, "ρ = {rho}: {diff} not below {last}");
        last = diff;
    }
    assert!(last < 1e-4, "ρ = 1e6: {last}");
}

#[test]
fn f32_gradients_agree_with_f64() {
    let mut rng = Lcg(77);
    let (n, m, eps, rho) = (16, 12, 0.05, (0.5, 1.0));
    let mu = Array1::from(weights(&mut rng, n, 1.2));
    let nu = Array1::from(weights(&mut rng, m, 0.9));
    let c = Array2::from_shape_vec((n, m), rng.vec(n * m, 0.0, 1.0)).unwrap();
    let g64 = solver(eps, rho)
        .wasserstein_gradients(
            &Problem::new(mu.view(), nu.view(), c.view()).unwrap(),
            &CgParams::default(),
        )
        .unwrap();
    let (mu32, nu32, c32) = (
        mu.mapv(|v| v as f32),
        nu.mapv(|v| v as f32),
        c.mapv(|v| v as f32),
    );
    let s32 = Relaxed::new(
        SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps)),
        rho,
    );
    let p32 = Problem::new(mu32.view(), nu32.view(), c32.view()).unwrap();
    let g32 = s32
        .wasserstein_gradients(&p32, &CgParams::default())
        .unwrap();
    assert!(g32.result.convergence.converged && g32.cg.all_converged());
    let scale = |a: &mut dyn Iterator<Item = f64>| a.fold(0.0f64, |m, v| m.max(v.abs()));
    for (what, x32, x64) in [
        (
            "cost",
            g32.cost.iter().map(|&v| v as f64).collect::<Vec<_>>(),
            g64.cost.iter().copied().collect::<Vec<_>>(),
        ),
        (
            "mu",
            g32.mu.iter().map(|&v| v as f64).collect(),
            g64.mu.iter().copied().collect(),
        ),
        (
            "nu",
            g32.nu.iter().map(|&v| v as f64).collect(),
            g64.nu.iter().copied().collect(),
        ),
    ] {
        let s = scale(&mut x64.iter().copied());
        let err = scale(&mut x32.iter().zip(&x64).map(|(a, b)| a - b));
        assert!(err < 2e-3 * s, "{what}: {err} of {s}");
    }
    let e32 = s32.envelope_gradients(&p32).unwrap();
    let e64 = solver(eps, rho)
        .envelope_gradients(&Problem::new(mu.view(), nu.view(), c.view()).unwrap())
        .unwrap();
    assert!((e32.value[0] as f64 - e64.value[0]).abs() < 1e-4 * e64.value[0].abs().max(1.0));
    let err = e32
        .mu
        .iter()
        .zip(&e64.mu)
        .fold(0.0f64, |a, (x, y)| a.max((*x as f64 - y).abs()));
    assert!(err < 1e-4, "envelope mu: {err}");
}

/// Point clouds: the envelope gradient with respect to the points, `Σ_j P_ij ∇_x c`, against
/// finite differences of the objective.
#[test]
fn point_gradients_match_finite_differences_of_the_objective() {
    let mut rng = Lcg(55);
    let (n, m, d, eps, rho) = (5, 4, 2, 0.1, (0.3, 0.6));
    let x = rng.vec(n * d, 0.0, 1.0);
    let y = rng.vec(m * d, 0.0, 1.0);
    let mu = Array2::from_shape_vec((1, n), weights(&mut rng, n, 1.4)).unwrap();
    let nu = Array2::from_shape_vec((1, m), weights(&mut rng, m, 0.7)).unwrap();
    let s = solver(eps, rho);
    let value = |x: &[f64], y: &[f64]| -> f64 {
        let xa = Array2::from_shape_vec((n, d), x.to_vec()).unwrap();
        let ya = Array2::from_shape_vec((m, d), y.to_vec()).unwrap();
        let cost = PointCloudCost::new(xa.view(), ya.view()).unwrap();
        s.point_gradients(&Problem::new(mu.view(), nu.view(), cost).unwrap())
            .unwrap()
            .value[0]
    };
    let xa = Array2::from_shape_vec((n, d), x.clone()).unwrap();
    let ya = Array2::from_shape_vec((m, d), y.clone()).unwrap();
    let cost = PointCloudCost::new(xa.view(), ya.view()).unwrap();
    let dense = cost.to_dense();
    let pg = s
        .point_gradients(&Problem::new(mu.view(), nu.view(), cost).unwrap())
        .unwrap();
    assert!(pg.result.convergence.converged);
    // The same value as the dense problem's envelope objective.
    let e = s
        .envelope_gradients(&Problem::new(mu.view(), nu.view(), dense.view()).unwrap())
        .unwrap();
    assert!(
        (pg.value[0] - e.value[0]).abs() < 1e-12,
        "{} vs {}",
        pg.value[0],
        e.value[0]
    );
    let rep = check_gradient(|v| value(v, &y), &x, pg.x.as_slice().unwrap(), &opts()).unwrap();
    assert!(rep.passed, "x: {rep}");
    let rep = check_gradient(|v| value(&x, v), &y, pg.y.as_slice().unwrap(), &opts()).unwrap();
    assert!(rep.passed, "y: {rep}");
}
