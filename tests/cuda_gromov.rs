//! Gromov–Wasserstein on the CUDA backend against the CPU backend in f64 (itself checked
//! against POT in tests/gromov/): entropic GW (square loss; KL loss on non-symmetric
//! structures from a given plan), entropic fused GW, exact GW by conditional gradient and
//! point-cloud GW, in f64 and f32. Each test skips with a printed reason when no GPU is
//! usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
//!
//! Tolerances: f64 runs the same iterates as the CPU up to the order of the sums, so plans
//! and values agree to 1e-9 relative (1e-12 for the exact solver, whose plans are vertices).
//! f32 rounds the products and the plan to 2⁻²⁴ relative and its inner solves stop at
//! 1e-5; over a few tens of outer iterations that leaves 2e-3 relative on the plan (its
//! largest entry the scale) and on the value. The cross term on tensor cores in f32 keeps
//! that bound with split TF32 products (TF32x3, f32-accurate); one TF32 product (2⁻¹⁰
//! relative) moves the gradient by about 2⁻¹⁰ of its size and is held to 2e-2.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::gpu;
use common::Lcg;

use logot::gromov::{
    ConditionalGradient, ConditionalGradientParams, EntropicGwParams, GromovProblem, GromovSolver,
    GwLoss, PointGromovProblem, PointGromovSolver, PointGwParams,
};
use logot::linalg::GemmPrecision;
use logot::{CpuBackend, Real};
use ndarray::{Array1, Array2};

/// A seeded cloud of `n` points in dimension `d`, spread `scale`.
fn cloud(r: &mut Lcg, n: usize, d: usize, scale: f64) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |_| scale * r.normal())
}

/// Squared Euclidean distances within a cloud, divided by their maximum.
fn sqdist(x: &Array2<f64>) -> Array2<f64> {
    let n = x.nrows();
    let c = Array2::from_shape_fn((n, n), |(i, k)| {
        (&x.row(i) - &x.row(k)).mapv(|v| v * v).sum()
    });
    let max = c.iter().fold(0.0f64, |m, &v| m.max(v));
    c / max
}

/// Positive seeded weights summing to 1.
fn weights(r: &mut Lcg, n: usize) -> Array1<f64> {
    let w = Array1::from(r.vec(n, 0.2, 1.0));
    let s = w.sum();
    w / s
}

/// `max |a − b| / max |b|`.
fn rel_diff<T: Real>(a: &Array2<T>, b: &Array2<f64>) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b.iter())
        .fold(0.0f64, |m, (x, y)| m.max((x.f64() - y).abs()))
        / scale
}

fn check(what: &str, plan: f64, value: (f64, f64), tol: f64) {
    let value_err = (value.0 - value.1).abs() / value.1.abs();
    eprintln!(
        "{what}: plan {plan:.2e}, value {value_err:.2e} (GPU {} CPU {})",
        value.0, value.1
    );
    assert!(
        plan <= tol,
        "{what}: the plan differs from the CPU's by {plan:e}"
    );
    assert!(
        value_err <= tol,
        "{what}: the value differs from the CPU's by {value_err:e}"
    );
}

/// The entropic problems: (name, C1, C2, p, q, feature cost with α, initial plan, loss).
#[allow(clippy::type_complexity)]
fn entropic_problems() -> Vec<(
    &'static str,
    Array2<f64>,
    Array2<f64>,
    Array1<f64>,
    Array1<f64>,
    Option<(Array2<f64>, f64)>,
    Option<Array2<f64>>,
    GwLoss,
)> {
    let mut r = Lcg(41);
    let (n, m) = (60, 45);
    let c1 = sqdist(&cloud(&mut r, n, 2, 1.0));
    let c2 = sqdist(&cloud(&mut r, m, 3, 1.0));
    let (p, q) = (weights(&mut r, n), weights(&mut r, m));
    let feature = Array2::from_shape_fn((n, m), |_| r.uniform(0.0, 1.0));
    let a1 = Array2::from_shape_fn((n, n), |_| r.uniform(0.0, 1.0));
    let a2 = Array2::from_shape_fn((m, m), |_| r.uniform(0.2, 1.2));
    let g0 = Array2::from_shape_fn((n, m), |_| r.uniform(0.1, 1.0));
    let g0 = &g0 / g0.sum();
    vec![
        (
            "square",
            c1.clone(),
            c2.clone(),
            p.clone(),
            q.clone(),
            None,
            None,
            GwLoss::Square,
        ),
        (
            "kl, not symmetric, given plan",
            a1,
            a2,
            p.clone(),
            q.clone(),
            None,
            Some(g0),
            GwLoss::Kl,
        ),
        (
            "fused",
            c1,
            c2,
            p,
            q,
            Some((feature, 0.4)),
            None,
            GwLoss::Square,
        ),
    ]
}

fn entropic_on_gpu<T: Real>(tol: f64, inner_tol: f64, precision: GemmPrecision)
where
    logot::CudaBackend:
        logot::backend::linalg::LinalgKernels<T> + logot::backend::grad::GradKernels<T>,
{
    let Some(cuda) = gpu() else { return };
    for (name, c1, c2, p, q, fused, g0, loss) in entropic_problems() {
        let params = EntropicGwParams::new(0.02)
            .loss(loss)
            .fixed_iterations(30)
            .inner_max_iters(100_000);
        let problem64 = {
            let mut pr = match &fused {
                Some((mf, alpha)) => GromovProblem::fused(
                    mf.view(),
                    c1.view(),
                    c2.view(),
                    p.view(),
                    q.view(),
                    *alpha,
                ),
                None => GromovProblem::new(c1.view(), c2.view(), p.view(), q.view()),
            }
            .unwrap();
            if let Some(g) = &g0 {
                pr = pr.with_init(g.view()).unwrap();
            }
            pr
        };
        let cpu = GromovSolver::new(CpuBackend, params.clone().inner_tol(1e-13))
            .solve(&problem64)
            .unwrap();
        let t = |a: &Array2<f64>| a.mapv(T::of);
        let (c1t, c2t, pt, qt) = (t(&c1), t(&c2), p.mapv(T::of), q.mapv(T::of));
        let mft = fused.as_ref().map(|(mf, a)| (t(mf), *a));
        let g0t = g0.as_ref().map(t);
        let mut problem = match &mft {
            Some((mf, alpha)) => GromovProblem::fused(
                mf.view(),
                c1t.view(),
                c2t.view(),
                pt.view(),
                qt.view(),
                *alpha,
            ),
            None => GromovProblem::new(c1t.view(), c2t.view(), pt.view(), qt.view()),
        }
        .unwrap();
        if let Some(g) = &g0t {
            problem = problem.with_init(g.view()).unwrap();
        }
        let gpu_params = params
            .clone()
            .inner_tol(inner_tol)
            .cross_precision(precision);
        let gpu_r = GromovSolver::new(cuda.clone(), gpu_params)
            .solve(&problem)
            .unwrap();
        assert_eq!(gpu_r.report.iterations, 30);
        assert_eq!(gpu_r.symmetric, cpu.symmetric, "{name}");
        check(
            &format!("entropic {name} ({}, {})", T::NAME, precision.name()),
            rel_diff(&gpu_r.plan, &cpu.plan),
            (gpu_r.value, cpu.value),
            tol,
        );
        // The GPU's report describes its plan: the marginal error recomputed here in f64.
        let plan = gpu_r.plan.mapv(|v| v.f64());
        let l1 = |a: Array1<f64>, b: &Array1<f64>| (&a - b).mapv(f64::abs).sum();
        let merr =
            l1(plan.sum_axis(ndarray::Axis(1)), &p).max(l1(plan.sum_axis(ndarray::Axis(0)), &q));
        assert!(
            (merr - gpu_r.report.marginal_error).abs() <= 10.0 * tol.max(1e-12),
            "{name}: marginal error {merr:e} vs reported {:e}",
            gpu_r.report.marginal_error
        );
    }
}

#[test]
fn entropic_and_fused_gw_match_the_cpu_in_f64() {
    entropic_on_gpu::<f64>(1e-9, 1e-13, GemmPrecision::Exact);
    // f64 keeps exact products whatever is asked.
    entropic_on_gpu::<f64>(1e-9, 1e-13, GemmPrecision::Tf32);
}

#[test]
fn entropic_and_fused_gw_match_the_cpu_in_f32() {
    entropic_on_gpu::<f32>(2e-3, 1e-5, GemmPrecision::Exact);
}

#[test]
fn entropic_and_fused_gw_on_tensor_cores_match_the_cpu_in_f32() {
    entropic_on_gpu::<f32>(2e-3, 1e-5, GemmPrecision::Tf32x3);
    entropic_on_gpu::<f32>(2e-2, 1e-5, GemmPrecision::Tf32);
}

#[test]
fn exact_gw_matches_the_cpu_in_f64() {
    let Some(cuda) = gpu() else { return };
    let mut r = Lcg(43);
    let (n, m) = (30, 24);
    let c1 = sqdist(&cloud(&mut r, n, 2, 1.0));
    let c2 = sqdist(&cloud(&mut r, m, 3, 1.0));
    let (p, q) = (weights(&mut r, n), weights(&mut r, m));
    let problem = GromovProblem::new(c1.view(), c2.view(), p.view(), q.view()).unwrap();
    let params = ConditionalGradientParams::default();
    let cpu = ConditionalGradient::new(CpuBackend, params.clone())
        .solve_network_simplex(&problem)
        .unwrap();
    let gpu_r = ConditionalGradient::new(cuda, params)
        .solve_network_simplex(&problem)
        .unwrap();
    assert_eq!(gpu_r.report.iterations, cpu.report.iterations);
    check(
        "exact (float64)",
        rel_diff(&gpu_r.plan, &cpu.plan),
        (gpu_r.value, cpu.value),
        1e-12,
    );
}

fn point_clouds_on_gpu<T: Real>(tol: f64, inner_tol: f64)
where
    logot::CudaBackend: logot::backend::linalg::LinalgKernels<T> + logot::PointCloudKernels<T>,
{
    let Some(cuda) = gpu() else { return };
    let mut r = Lcg(47);
    let (n, m) = (300, 250);
    let (x, y) = (cloud(&mut r, n, 3, 0.5), cloud(&mut r, m, 2, 0.6));
    let (p, q) = (weights(&mut r, n), weights(&mut r, m));
    let params = PointGwParams::new(0.05)
        .fixed_iterations(20)
        .inner_max_iters(100_000);
    let cpu = PointGromovSolver::new(CpuBackend, params.clone().inner_tol(1e-13))
        .solve(&PointGromovProblem::new(x.view(), y.view(), p.view(), q.view()).unwrap())
        .unwrap();
    let t1 = |a: &Array1<f64>| a.mapv(T::of);
    let t2 = |a: &Array2<f64>| a.mapv(T::of);
    let (xt, yt, pt, qt) = (t2(&x), t2(&y), t1(&p), t1(&q));
    let gpu_r = PointGromovSolver::new(cuda, params.inner_tol(inner_tol))
        .solve(&PointGromovProblem::new(xt.view(), yt.view(), pt.view(), qt.view()).unwrap())
        .unwrap();
    assert_eq!(gpu_r.report.iterations, 20);
    check(
        &format!("point clouds ({})", T::NAME),
        rel_diff(&gpu_r.plan().unwrap(), &cpu.plan().unwrap()),
        (gpu_r.value, cpu.value),
        tol,
    );
}

#[test]
fn point_cloud_gw_matches_the_cpu_in_f64() {
    point_clouds_on_gpu::<f64>(1e-9, 1e-13);
}

#[test]
fn point_cloud_gw_matches_the_cpu_in_f32() {
    point_clouds_on_gpu::<f32>(2e-3, 1e-5);
}
