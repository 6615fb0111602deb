//! Exact OT gradients (implicit differentiation) and envelope gradients, checked against
//! central finite differences of tightly converged solves (f64, the public checker),
//! forward-mode differentiation of many unrolled Sinkhorn iterations, exact identities, and
//! finite differences of POT's converged solution.

use crate::common;

use common::{lse, Dual, Lcg};
use logot::grad::{check_gradient, CgParams, GradCheckParams, PlanGradients};
use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
use ndarray::{Array1, Array2, Array3, ArrayView1, Axis};

/// The plan-only gradients at regularisation `eps` on the CPU.
fn plan_gradients(
    plan: ndarray::ArrayView3<'_, f64>,
    eps: f64,
    upstream: ndarray::ArrayView3<'_, f64>,
    cg: &CgParams,
) -> logot::Result<PlanGradients<f64>> {
    SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps)).plan_gradients(plan, upstream, cg)
}

fn solver(eps: f64) -> SinkhornSolver<CpuBackend> {
    SinkhornSolver::new(
        CpuBackend,
        SinkhornParams::new(eps).max_iters(200_000).tol(1e-15),
    )
}

fn distance(mu: &[f64], nu: &[f64], c: &[f64], eps: f64) -> f64 {
    let (n, m) = (mu.len(), nu.len());
    let c = Array2::from_shape_vec((n, m), c.to_vec()).unwrap();
    let (mu, nu) = (Array1::from(mu.to_vec()), Array1::from(nu.to_vec()));
    solver(eps)
        .solve(&Problem::new(mu.view(), nu.view(), c.view()).unwrap())
        .unwrap()
        .distance[0]
}

/// `x ↦ x·s/Σx`: mass-preserving reparametrisation; its gradient of `L` is `a − ⟨a,μ⟩/s`.
fn rescale(x: &[f64], s: f64) -> Vec<f64> {
    let t: f64 = x.iter().sum();
    x.iter().map(|v| v * s / t).collect()
}
fn mass_fixed(grad: ArrayView1<'_, f64>, w: &[f64]) -> Vec<f64> {
    let s: f64 = w.iter().sum();
    let dot: f64 = grad.iter().zip(w).map(|(g, w)| g * w).sum();
    grad.iter().map(|g| g - dot / s).collect()
}

fn histogram(rng: &mut Lcg, n: usize) -> Vec<f64> {
    let v = rng.vec(n, 0.2, 1.0);
    let s: f64 = v.iter().sum();
    v.into_iter().map(|x| x / s).collect()
}

fn opts() -> GradCheckParams {
    GradCheckParams::default()
        .step(1e-5)
        .rel_tol(1e-6)
        .abs_floor(1e-5)
}

#[test]
fn transport_cost_gradients_match_finite_differences() {
    let mut rng = Lcg(11);
    let (n, m, eps) = (5, 4, 0.2);
    let mu = histogram(&mut rng, n);
    let nu = histogram(&mut rng, m);
    let c = rng.vec(n * m, 0.0, 1.0);
    let ca = Array2::from_shape_vec((n, m), c.clone()).unwrap();
    let (mua, nua) = (Array1::from(mu.clone()), Array1::from(nu.clone()));
    let g = solver(eps)
        .wasserstein_gradients(
            &Problem::new(mua.view(), nua.view(), ca.view()).unwrap(),
            &CgParams::default().tol(1e-13),
        )
        .unwrap();
    assert!(
        g.result.convergence.converged && g.cg.all_converged(),
        "{:?} {:?}",
        g.result.convergence,
        g.cg
    );

    let rep = check_gradient(
        |x| distance(&mu, &nu, x, eps),
        &c,
        g.cost.as_slice().unwrap(),
        &opts(),
    )
    .unwrap();
    assert!(rep.passed, "cost: {rep}");

    let gmu = mass_fixed(g.mu.row(0), &mu);
    let rep = check_gradient(
        |x| distance(&rescale(x, 1.0), &nu, &c, eps),
        &mu,
        &gmu,
        &opts(),
    )
    .unwrap();
    assert!(rep.passed, "mu: {rep}");
    assert!(
        g.mu.sum().abs() < 1e-14,
        "mu gradient is the zero-mean representative"
    );

    let gnu = mass_fixed(g.nu.row(0), &nu);
    let rep = check_gradient(
        |x| distance(&mu, &rescale(x, 1.0), &c, eps),
        &nu,
        &gnu,
        &opts(),
    )
    .unwrap();
    assert!(rep.passed, "nu: {rep}");
}

/// Identities that hold exactly: scaling both marginals by `s` scales `P` by `s`, so
/// `⟨∂μ, μ⟩ + ⟨∂ν, ν⟩ = ⟨P,C⟩`; `C + u1ᵀ + 1vᵀ` leaves `P` unchanged, so the implicit part of
/// `∂⟨P,C⟩/∂C` has zero row and column sums and `∂⟨P,C⟩/∂C` has those of `P` (`μ`, `ν`).
#[test]
fn gradients_satisfy_scaling_and_null_direction_identities() {
    let mut rng = Lcg(5);
    let (n, m, eps) = (7, 6, 0.05);
    let mu = Array1::from(histogram(&mut rng, n));
    let nu = Array1::from(histogram(&mut rng, m));
    let c = Array2::from_shape_vec((n, m), rng.vec(n * m, 0.0, 1.0)).unwrap();
    let g = solver(eps)
        .wasserstein_gradients(
            &Problem::new(mu.view(), nu.view(), c.view()).unwrap(),
            &CgParams::default().tol(1e-13),
        )
        .unwrap();
    assert!(g.cg.all_converged());
    let w = g.result.distance[0];
    let pair = g.mu.row(0).dot(&mu) + g.nu.row(0).dot(&nu);
    assert!((pair - w).abs() < 1e-10 * w.abs().max(1.0), "{pair} vs {w}");
    let gc = g.cost.index_axis(Axis(0), 0);
    for i in 0..n {
        assert!(
            (gc.row(i).sum() - mu[i]).abs() < 1e-10,
            "row {i}: {} vs {}",
            gc.row(i).sum(),
            mu[i]
        );
    }
    for j in 0..m {
        assert!((gc.column(j).sum() - nu[j]).abs() < 1e-10, "column {j}");
    }
}

/// A general loss `L(P) = ⟨H, P⟩ + ½‖P‖²` (upstream `G = H + P`) through `implicit_gradients`
/// and through the plan-only `plan_gradients`.
#[test]
fn general_loss_gradients_match_finite_differences_and_the_plan_only_api() {
    let mut rng = Lcg(23);
    let (n, m, eps) = (4, 6, 0.3);
    let mu = histogram(&mut rng, n);
    let nu = histogram(&mut rng, m);
    let c = rng.vec(n * m, 0.0, 1.0);
    let h = rng.vec(n * m, -1.0, 1.0);
    let loss = |mu: &[f64], nu: &[f64], c: &[f64]| -> f64 {
        let ca = Array2::from_shape_vec((n, m), c.to_vec()).unwrap();
        let (mua, nua) = (Array1::from(mu.to_vec()), Array1::from(nu.to_vec()));
        let p = solver(eps)
            .coupling(&Problem::new(mua.view(), nua.view(), ca.view()).unwrap())
            .unwrap()
            .plan;
        p.iter().zip(&h).map(|(p, h)| h * p + 0.5 * p * p).sum()
    };
    let ca = Array2::from_shape_vec((n, m), c.clone()).unwrap();
    let (mua, nua) = (Array1::from(mu.clone()), Array1::from(nu.clone()));
    let hh = Array3::from_shape_vec((1, n, m), h.clone()).unwrap();
    let upstream = |cpl: &logot::CouplingResult<f64>| &hh + &cpl.plan;
    let problem = Problem::new(mua.view(), nua.view(), ca.view()).unwrap();
    let g = solver(eps)
        .implicit_gradients(&problem, upstream, &CgParams::default().tol(1e-13))
        .unwrap();
    assert!(g.cg.all_converged());
    let rep = check_gradient(
        |x| loss(&mu, &nu, x),
        &c,
        g.cost.as_slice().unwrap(),
        &opts(),
    )
    .unwrap();
    assert!(rep.passed, "cost: {rep}");
    let rep = check_gradient(
        |x| loss(&rescale(x, 1.0), &nu, &c),
        &mu,
        &mass_fixed(g.mu.row(0), &mu),
        &opts(),
    )
    .unwrap();
    assert!(rep.passed, "mu: {rep}");
    let rep = check_gradient(
        |x| loss(&mu, &rescale(x, 1.0), &c),
        &nu,
        &mass_fixed(g.nu.row(0), &nu),
        &opts(),
    )
    .unwrap();
    assert!(rep.passed, "nu: {rep}");

    // The plan-only entry point gives the same gradients from the plan and G.
    let cpl = solver(eps).coupling(&problem).unwrap();
    let gg = &hh + &cpl.plan;
    let pg = plan_gradients(
        cpl.plan.view(),
        eps,
        gg.view(),
        &CgParams::default().tol(1e-13),
    )
    .unwrap();
    for (a, b) in pg.cost.iter().zip(&g.cost) {
        assert!((a - b).abs() < 1e-10);
    }
    for (a, b) in pg.mu.iter().chain(&pg.nu).zip(g.mu.iter().chain(&g.nu)) {
        assert!((a - b).abs() < 1e-9, "{a} vs {b}");
    }
}

/// Forward-mode derivative of `K` unrolled log-domain Sinkhorn iterations (POT's order, `g`
/// then `f`, from zero) along a direction `(dC, dμ, dν)`: for large `K` it must equal the
/// implicit gradient, for small `K` it must not (the comparison can fail).
#[test]
fn implicit_gradient_equals_the_limit_of_unrolled_differentiation() {
    let mut rng = Lcg(3);
    let (n, m, eps) = (4, 5, 0.1);
    let mu = histogram(&mut rng, n);
    let nu = histogram(&mut rng, m);
    let c = rng.vec(n * m, 0.0, 1.0);
    let dc = rng.vec(n * m, -1.0, 1.0);
    let mut dmu = rng.vec(n, -1.0, 1.0);
    let mean = dmu.iter().sum::<f64>() / n as f64;
    dmu.iter_mut().for_each(|v| *v -= mean); // mass-preserving
    let unrolled = |iters: usize| -> f64 {
        let cd: Vec<Dual> = c.iter().zip(&dc).map(|(&v, &d)| Dual::new(v, d)).collect();
        let lmu: Vec<Dual> = mu
            .iter()
            .zip(&dmu)
            .map(|(&v, &d)| Dual::new(v, d).ln())
            .collect();
        let lnu: Vec<Dual> = nu.iter().map(|&v| Dual::c(v).ln()).collect();
        let e = Dual::c(eps);
        let mut f = vec![Dual::c(0.0); n];
        let mut g = vec![Dual::c(0.0); m];
        for _ in 0..iters {
            for j in 0..m {
                let t: Vec<Dual> = (0..n).map(|i| (f[i] - cd[i * m + j]) / e).collect();
                g[j] = e * lnu[j] - e * lse(&t);
            }
            for i in 0..n {
                let t: Vec<Dual> = (0..m).map(|j| (g[j] - cd[i * m + j]) / e).collect();
                f[i] = e * lmu[i] - e * lse(&t);
            }
        }
        let mut w = Dual::c(0.0);
        for i in 0..n {
            for j in 0..m {
                w = w + ((f[i] + g[j] - cd[i * m + j]) / e).exp() * cd[i * m + j];
            }
        }
        w.d
    };
    let ca = Array2::from_shape_vec((n, m), c.clone()).unwrap();
    let (mua, nua) = (Array1::from(mu.clone()), Array1::from(nu.clone()));
    let g = solver(eps)
        .wasserstein_gradients(
            &Problem::new(mua.view(), nua.view(), ca.view()).unwrap(),
            &CgParams::default().tol(1e-13),
        )
        .unwrap();
    let implicit: f64 = g.cost.iter().zip(&dc).map(|(a, b)| a * b).sum::<f64>()
        + g.mu.iter().zip(&dmu).map(|(a, b)| a * b).sum::<f64>();
    let long = unrolled(3000);
    assert!(
        (long - implicit).abs() < 1e-9 * implicit.abs().max(1.0),
        "unrolled {long} vs implicit {implicit}"
    );
    let short = unrolled(2);
    assert!(
        (short - implicit).abs() > 1e-4 * implicit.abs(),
        "2 iterations should not have converged"
    );
}

/// Zero-mass bins: rows/columns of `∂C` vanish, and the marginal gradient there is the
/// one-sided derivative (second-order forward difference).
#[test]
fn zero_mass_bins_get_zero_cost_rows_and_one_sided_marginal_derivatives() {
    let mut rng = Lcg(8);
    let (n, m, eps) = (4, 4, 0.25);
    let mut mu = histogram(&mut rng, n);
    mu[1] = 0.0;
    let s: f64 = mu.iter().sum();
    mu.iter_mut().for_each(|v| *v /= s);
    let mut nu = histogram(&mut rng, m);
    nu[3] = 0.0;
    let s: f64 = nu.iter().sum();
    nu.iter_mut().for_each(|v| *v /= s);
    let c = rng.vec(n * m, 0.0, 1.0);
    let ca = Array2::from_shape_vec((n, m), c.clone()).unwrap();
    let (mua, nua) = (Array1::from(mu.clone()), Array1::from(nu.clone()));
    let g = solver(eps)
        .wasserstein_gradients(
            &Problem::new(mua.view(), nua.view(), ca.view()).unwrap(),
            &CgParams::default().tol(1e-13),
        )
        .unwrap();
    assert!(g.cg.all_converged());
    assert!(g
        .cost
        .index_axis(Axis(0), 0)
        .row(1)
        .iter()
        .all(|&v| v == 0.0));
    assert!(g
        .cost
        .index_axis(Axis(0), 0)
        .column(3)
        .iter()
        .all(|&v| v == 0.0));
    // Central differences on the support.
    let rep = check_gradient(
        |x| distance(&mu, &nu, x, eps),
        &c,
        g.cost.as_slice().unwrap(),
        &opts(),
    )
    .unwrap();
    assert!(rep.passed, "cost: {rep}");
    let gmu = mass_fixed(g.mu.row(0), &mu);
    let gnu = mass_fixed(g.nu.row(0), &nu);
    let one_sided = |h: &dyn Fn(f64) -> f64| {
        let t = 1e-4;
        (-3.0 * h(0.0) + 4.0 * h(t) - h(2.0 * t)) / (2.0 * t)
    };
    let dmu = one_sided(&|t| {
        let mut x = mu.clone();
        x[1] += t;
        distance(&rescale(&x, 1.0), &nu, &c, eps)
    });
    assert!(
        (dmu - gmu[1]).abs() < 1e-6 * gmu[1].abs().max(1e-2),
        "mu: one-sided {dmu} vs {}",
        gmu[1]
    );
    let dnu = one_sided(&|t| {
        let mut x = nu.clone();
        x[3] += t;
        distance(&mu, &rescale(&x, 1.0), &c, eps)
    });
    assert!(
        (dnu - gnu[3]).abs() < 1e-6 * gnu[3].abs().max(1e-2),
        "nu: one-sided {dnu} vs {}",
        gnu[3]
    );
}

/// A batch (shared cost and one cost per problem) gives each problem's own gradients.
#[test]
fn batched_gradients_equal_single_problem_gradients() {
    let mut rng = Lcg(99);
    let (b, n, m, eps) = (3, 5, 6, 0.1);
    let mu = Array2::from_shape_fn((b, n), |_| 0.0)
        + &Array2::from_shape_vec((b, n), rng.vec(b * n, 0.2, 1.0)).unwrap();
    let mu = &mu / &mu.sum_axis(Axis(1)).insert_axis(Axis(1));
    let nu = Array2::from_shape_vec((b, m), rng.vec(b * m, 0.2, 1.0)).unwrap();
    let nu = &nu / &nu.sum_axis(Axis(1)).insert_axis(Axis(1));
    let costs = Array3::from_shape_vec((b, n, m), rng.vec(b * n * m, 0.0, 1.0)).unwrap();
    let cg = CgParams::default().tol(1e-12);
    let shared = costs.index_axis(Axis(0), 0);
    let gs = solver(eps)
        .wasserstein_gradients(&Problem::new(mu.view(), nu.view(), shared).unwrap(), &cg)
        .unwrap();
    let gb = solver(eps)
        .wasserstein_gradients(
            &Problem::new(mu.view(), nu.view(), costs.view()).unwrap(),
            &cg,
        )
        .unwrap();
    for k in 0..b {
        for (batch, cost) in [(&gs, shared), (&gb, costs.index_axis(Axis(0), k))] {
            let one = solver(eps)
                .wasserstein_gradients(&Problem::new(mu.row(k), nu.row(k), cost).unwrap(), &cg)
                .unwrap();
            for (x, y) in batch.cost.index_axis(Axis(0), k).iter().zip(&one.cost) {
                assert!((x - y).abs() < 1e-9);
            }
            for (x, y) in batch.mu.row(k).iter().zip(&one.mu) {
                assert!((x - y).abs() < 1e-8, "{x} vs {y}");
            }
            for (x, y) in batch.nu.row(k).iter().zip(&one.nu) {
                assert!((x - y).abs() < 1e-8);
            }
        }
    }
}

/// Gradients of `⟨P,C⟩` against central finite differences of POT's converged solution.
/// Produced by (POT 0.9.7, NumPy 2.4):
/// ```python
/// import numpy as np, ot
/// x = np.linspace(0, 1, 4); y = np.linspace(0, 1, 5) ** 2
/// C = (x[:, None] - y[None, :]) ** 2
/// mu = np.array([0.1, 0.2, 0.3, 0.4]); nu = np.array([0.3, 0.1, 0.2, 0.25, 0.15]); eps = 0.05
/// W = lambda mu, nu, C: float(ot.sinkhorn2(mu, nu, C, eps, method="sinkhorn_log", numItermax=200000, stopThr=1e-15))
/// h = 1e-6   # central differences on C[i, j]; on mu through x -> W(x * mu.sum() / x.sum(), nu, C)
/// ```
#[test]
fn transport_cost_gradients_match_finite_differences_of_pot() {
    let x: Vec<f64> = (0..4).map(|i| i as f64 / 3.0).collect();
    let y: Vec<f64> = (0..5).map(|j| (j as f64 / 4.0).powi(2)).collect();
    let c = Array2::from_shape_fn((4, 5), |(i, j)| (x[i] - y[j]).powi(2));
    let mu = ndarray::array![0.1, 0.2, 0.3, 0.4];
    let nu = ndarray::array![0.3, 0.1, 0.2, 0.25, 0.15];
    let pot_w = 0.1514566712455148;
    #[rustfmt::skip]
    let pot_gc = [
        0.09928601533981674, 0.001982243411080553, -0.0012681091177135784, -1.495609192048164e-07, 0.0,
        0.17018043474426037, 0.045367038500887524, -0.015325056917925295, -0.00022241296304681413, -3.2335245592207684e-09,
        0.03224423192338399, 0.054497294926791895, 0.23354524002205945, -0.01996257448233507, -0.0003241925755625985,
        -0.0017106819988343958, -0.0018465768081288303, -0.016952073869647144, 0.2701851371245123, 0.15032419573013378,
    ];
    let pot_gmu = [
        -0.42404818903496455,
        -0.3102607772503818,
        -0.011609429445558206,
        0.26984950803055074,
    ];
    let g = solver(0.05)
        .wasserstein_gradients(
            &Problem::new(mu.view(), nu.view(), c.view()).unwrap(),
            &CgParams::default().tol(1e-13),
        )
        .unwrap();
    assert!(
        (g.result.distance[0] - pot_w).abs() < 1e-10,
        "{} vs {pot_w}",
        g.result.distance[0]
    );
    // POT's differences carry ~1e-10 of rounding (h = 1e-6): relative 1e-4 with a 1e-6 floor.
    for (k, (&got, &want)) in g.cost.iter().zip(&pot_gc).enumerate() {
        assert!(
            (got - want).abs() <= 1e-4 * want.abs().max(1e-6),
            "cost[{k}]: {got} vs POT {want}"
        );
    }
    let gmu = mass_fixed(g.mu.row(0), mu.as_slice().unwrap());
    for (k, (&got, &want)) in gmu.iter().zip(&pot_gmu).enumerate() {
        assert!(
            (got - want).abs() <= 1e-4 * want.abs().max(1e-6),
            "mu[{k}]: {got} vs POT {want}"
        );
    }
}

/// Envelope gradients (`P`, `f`, `g`) of the regularised objective against finite differences
/// of that objective.
#[test]
fn envelope_gradients_match_finite_differences_of_the_regularised_objective() {
    let mut rng = Lcg(41);
    let (n, m, eps) = (4, 3, 0.2);
    let mu = histogram(&mut rng, n);
    let nu = histogram(&mut rng, m);
    let c = rng.vec(n * m, 0.0, 1.0);
    let value = |mu: &[f64], nu: &[f64], c: &[f64]| -> f64 {
        let ca = Array2::from_shape_vec((n, m), c.to_vec()).unwrap();
        let (mua, nua) = (Array1::from(mu.to_vec()), Array1::from(nu.to_vec()));
        solver(eps)
            .envelope_gradients(&Problem::new(mua.view(), nua.view(), ca.view()).unwrap())
            .unwrap()
            .value[0]
    };
    let ca = Array2::from_shape_vec((n, m), c.clone()).unwrap();
    let (mua, nua) = (Array1::from(mu.clone()), Array1::from(nu.clone()));
    let e = solver(eps)
        .envelope_gradients(&Problem::new(mua.view(), nua.view(), ca.view()).unwrap())
        .unwrap();
    // OT_ε = ⟨P,C⟩ + ε Σ P (log P − 1), from the plan directly.
    let direct: f64 = e
        .cost
        .iter()
        .zip(&c)
        .map(|(&p, &c)| p * c + eps * p * (p.ln() - 1.0))
        .sum();
    assert!(
        (direct - e.value[0]).abs() < 1e-12,
        "{direct} vs {}",
        e.value[0]
    );
    let rep = check_gradient(
        |x| value(&mu, &nu, x),
        &c,
        e.cost.as_slice().unwrap(),
        &opts(),
    )
    .unwrap();
    assert!(rep.passed, "cost: {rep}");
    // OT_ε sums O(1) terms (⟨f,μ⟩, ⟨g,ν⟩) that nearly cancel along mass-preserving
    // directions: its differences carry ~1e-10 of rounding, hence a 1e-4 floor here.
    let marg = opts().abs_floor(1e-4);
    let rep = check_gradient(
        |x| value(&rescale(x, 1.0), &nu, &c),
        &mu,
        &mass_fixed(e.mu.row(0), &mu),
        &marg,
    )
    .unwrap();
    assert!(rep.passed, "mu: {rep}");
    let rep = check_gradient(
        |x| value(&mu, &rescale(x, 1.0), &c),
        &nu,
        &mass_fixed(e.nu.row(0), &nu),
        &marg,
    )
    .unwrap();
    assert!(rep.passed, "nu: {rep}");
}

#[test]
fn f32_gradients_agree_with_f64() {
    let mut rng = Lcg(77);
    let (n, m, eps) = (16, 12, 0.05);
    let mu = Array1::from(histogram(&mut rng, n));
    let nu = Array1::from(histogram(&mut rng, m));
    let c = Array2::from_shape_vec((n, m), rng.vec(n * m, 0.0, 1.0)).unwrap();
    let g64 = solver(eps)
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
    let s32 = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps));
    let g32 = s32
        .wasserstein_gradients(
            &Problem::new(mu32.view(), nu32.view(), c32.view()).unwrap(),
            &CgParams::default(),
        )
        .unwrap();
    assert!(g32.cg.all_converged(), "{:?}", g32.cg);
    let scale = g64.cost.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for (a, b) in g32.cost.iter().zip(&g64.cost) {
        assert!((*a as f64 - b).abs() < 2e-3 * scale, "{a} vs {b}");
    }
    let scale = g64.mu.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for (a, b) in g32.mu.iter().zip(&g64.mu) {
        assert!((*a as f64 - b).abs() < 2e-3 * scale, "{a} vs {b}");
    }
}

#[test]
fn invalid_inputs_are_errors() {
    let p = Array3::from_elem((1, 2, 2), 0.25);
    let g = Array3::zeros((1, 2, 2));
    let cg = CgParams::default();
    assert!(plan_gradients(p.view(), 0.0, g.view(), &cg).is_err());
    assert!(plan_gradients(p.view(), 0.1, Array3::zeros((1, 2, 3)).view(), &cg).is_err());
    let mut bad = p.clone();
    bad[[0, 1, 1]] = -0.1;
    assert!(plan_gradients(bad.view(), 0.1, g.view(), &cg).is_err());
    let mut nan = g.clone();
    nan[[0, 0, 0]] = f64::NAN;
    assert!(plan_gradients(p.view(), 0.1, nan.view(), &cg).is_err());
    assert!(plan_gradients(p.view(), 0.1, g.view(), &{
        let mut cg = CgParams::default().max_iters(0);
        cg.tol = None;
        cg
    })
    .is_err());
    assert!(plan_gradients(
        Array3::<f64>::zeros((0, 2, 2)).view(),
        0.1,
        Array3::zeros((0, 2, 2)).view(),
        &cg
    )
    .is_err());
}
