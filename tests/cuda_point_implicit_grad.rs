//! Exact gradients of `⟨P, C⟩` with respect to the points on the CUDA backend against the
//! CPU backend in f64 (the reference, itself checked against finite differences and the
//! dense chain rule in tests/pointcloud/implicit_grad.rs): the kernels the adjoint solve and the
//! gradient need (`cost_marginals`, `adjoint_point_gradient`, both kernel families, both
//! metrics, both sides, batches, a zero-mass bin), and whole solves in f64 and f32,
//! balanced, unbalanced and semi-unbalanced. Each test skips with a printed reason when no
//! GPU is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::gpu;
use common::relaxed::Relaxed;
use common::Lcg;

use logot::grad::CgParams;
use logot::{
    Backend, CpuBackend, PointCloudCost, PointCloudKernels, PointMetric, Problem, Real, Relaxation,
    Side, SinkhornParams, SinkhornSolver,
};
use ndarray::{Array2, Array3};

/// Largest `|got − want|` relative to the largest `|want|`.
fn worst(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    assert!(scale > 0.0);
    got.iter()
        .zip(want)
        .enumerate()
        .fold(0.0f64, |a, (k, (g, w))| {
            assert!(g.is_finite(), "entry {k}: {g}");
            a.max((g - w).abs() / scale)
        })
}

fn f64s<T: Real>(v: impl IntoIterator<Item = T>) -> Vec<f64> {
    v.into_iter().map(|x| x.f64()).collect()
}

/// Cost marginals and adjoint-weighted point gradients, f64 on the GPU against the CPU.
#[test]
fn adjoint_kernels_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend;
    // d = 3 and 2 (the d ≤ 4 kernels), 7 (d ≤ 16); reductions longer than one stage.
    for (n, m, d, metric) in [
        (300, 410, 3, PointMetric::SqEuclidean),
        (257, 190, 2, PointMetric::Euclidean),
        (200, 170, 7, PointMetric::SqEuclidean),
        (130, 260, 5, PointMetric::Euclidean),
    ] {
        let batch = 2;
        let eps = 0.05;
        let mut r = Lcg((n * 7 + m) as u64);
        let x = Array2::from_shape_vec((n, d), r.vec(n * d, 0.0, 1.0)).unwrap();
        let y = Array2::from_shape_vec((m, d), r.vec(m * d, 0.0, 1.0)).unwrap();
        let mut f = r.vec(batch * n, -0.3, 0.0);
        let mut g = r.vec(batch * m, -0.3, 0.0);
        f[4] = f64::NEG_INFINITY;
        g[m + 3] = f64::NEG_INFINITY;
        let a = r.vec(batch * n, -0.5, 0.5);
        let b = r.vec(batch * m, -0.5, 0.5);
        let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
        let pc = cpu.prepare_cost(&cost.clone().into()).unwrap();
        let gc = gpu.prepare_cost(&cost.into()).unwrap();
        let up = |v: &[f64]| gpu.upload(v).unwrap();
        let (fd, gd, ad, bd) = (up(&f), up(&g), up(&a), up(&b));
        for side in [Side::Row, Side::Col] {
            let label = format!("n={n} m={m} d={d} {metric:?} {side:?}");
            let (wm, wc) = cpu.cost_marginals(&pc, side, &f, &g, eps).unwrap();
            let (gm, gcs) = gpu.cost_marginals(&gc, side, &fd, &gd, eps).unwrap();
            let (gm, gcs) = (gpu.download(&gm).unwrap(), gpu.download(&gcs).unwrap());
            assert!(worst(&gm, &wm) < 1e-12, "{label}: mass");
            assert!(worst(&gcs, &wc) < 1e-12, "{label}: cost marginal");
            for alpha in [1.0, 0.0] {
                let want = cpu
                    .adjoint_point_gradient(&pc, side, &f, &g, eps, &a, &b, alpha)
                    .unwrap();
                let got = gpu
                    .adjoint_point_gradient(&gc, side, &fd, &gd, eps, &ad, &bd, alpha)
                    .unwrap();
                let got = gpu.download(&got).unwrap();
                let w = worst(&got, &want);
                assert!(
                    w < 1e-10,
                    "{label} α={alpha}: adjoint gradient, worst {w:e}"
                );
            }
        }
    }
}

/// One solve with exact point gradients on `be` in precision `T`.
fn solve_on<T: Real, B: PointCloudKernels<T> + logot::backend::grad::GradKernels<T>>(
    be: B,
    (mu, nu, x, y): (&Array2<f64>, &Array2<f64>, &Array2<f64>, &Array2<f64>),
    metric: PointMetric,
    (params, relax): (SinkhornParams, Option<Relaxation>),
    cg: &CgParams,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let c = |a: &Array2<f64>| a.mapv(|v| T::of(v));
    let (mu, nu, x, y) = (c(mu), c(nu), c(x), c(y));
    let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
    let g = Relaxed::or_balanced(SinkhornSolver::new(be, params), relax)
        .transport_point_gradients(&Problem::new(mu.view(), nu.view(), cost).unwrap(), cg)
        .unwrap();
    assert!(g.result.convergence.converged, "{:?}", g.result.convergence);
    assert!(g.cg.all_converged(), "{:?}", g.cg);
    let flat = |a: &Array3<T>| f64s(a.iter().copied());
    (f64s(g.value.iter().copied()), flat(&g.x), flat(&g.y))
}

/// Whole solves with exact point gradients: f64 and f32 on the GPU against f64 on the CPU.
#[test]
fn transport_point_gradients_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let (n, m, d, eps) = (400, 350, 3, 0.05);
    for (seed, metric, relax, batch, nu_mass) in [
        (1u64, PointMetric::SqEuclidean, None, 1usize, 1.0),
        (2, PointMetric::Euclidean, Some(Relaxation::kl(0.5)), 2, 1.5),
        (
            3,
            PointMetric::SqEuclidean,
            Some(Relaxation::kl_each(f64::INFINITY, 0.3)),
            1,
            0.7,
        ),
    ] {
        let mut r = Lcg(seed);
        let x = Array2::from_shape_vec((n, d), r.vec(n * d, 0.0, 1.0)).unwrap();
        let y = Array2::from_shape_vec((m, d), r.vec(m * d, 0.0, 1.0)).unwrap();
        let mut mu = Array2::from_shape_vec((batch, n), r.vec(batch * n, 0.2, 1.0)).unwrap();
        let mut nu = Array2::from_shape_vec((batch, m), r.vec(batch * m, 0.2, 1.0)).unwrap();
        for mut row in mu.outer_iter_mut() {
            let s = row.sum();
            row.mapv_inplace(|v| v / s);
        }
        for mut row in nu.outer_iter_mut() {
            let s = row.sum();
            row.mapv_inplace(|v| nu_mass * v / s);
        }
        let with = |p: SinkhornParams| (p, relax);
        let tight = with(SinkhornParams::new(eps).tol(1e-12).max_iters(100_000));
        let tight_cg = CgParams::default().max_iters(5000).tol(1e-13);
        let data = (&mu, &nu, &x, &y);
        let label = format!("{metric:?} {relax:?} batch {batch}");
        let (wv, wx, wy) = solve_on::<f64, _>(CpuBackend, data, metric, tight.clone(), &tight_cg);
        // f64: the same iterations and CG tolerance; differences are rounding only.
        let (gv, gx, gy) = solve_on::<f64, _>(gpu.clone(), data, metric, tight, &tight_cg);
        assert!(worst(&gv, &wv) < 1e-10, "{label} f64 value");
        assert!(
            worst(&gx, &wx) < 1e-8,
            "{label} f64 ∂/∂x: {:e}",
            worst(&gx, &wx)
        );
        assert!(
            worst(&gy, &wy) < 1e-8,
            "{label} f64 ∂/∂y: {:e}",
            worst(&gy, &wy)
        );
        // f32 at its default tolerances (Sinkhorn 1e-5, CG 1e-5): the CPU's f32 run of the
        // same problems is within 1.6e-5 of the f64 reference, relative to its largest entry.
        let loose = with(SinkhornParams::new(eps).max_iters(20_000));
        let (gv, gx, gy) =
            solve_on::<f32, _>(gpu.clone(), data, metric, loose, &CgParams::default());
        assert!(
            worst(&gv, &wv) < 1e-4,
            "{label} f32 value: {:e}",
            worst(&gv, &wv)
        );
        assert!(
            worst(&gx, &wx) < 1e-3,
            "{label} f32 ∂/∂x: {:e}",
            worst(&gx, &wx)
        );
        assert!(
            worst(&gy, &wy) < 1e-3,
            "{label} f32 ∂/∂y: {:e}",
            worst(&gy, &wy)
        );
    }
}
