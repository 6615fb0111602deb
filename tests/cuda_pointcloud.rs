//! Point-cloud costs on the CUDA backend against the CPU backend in f64 (the reference,
//! itself checked against the dense path and POT in tests/pointcloud/solve.rs): half-steps for
//! every kernel family (d = 3, d ≤ 4, d ≤ 16, |x−y|² and |x−y|, batches, zero-mass bins,
//! split reductions), transport costs, point gradients, P·V, plans, whole solves, and the
//! otC shape in bounded memory. Each test skips with a printed reason when no GPU is
//! usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::clouds::{cast, f64s, step_inputs};
use common::gpu::gpu;
use common::Lcg;

use logot::{
    Backend, CpuBackend, PointCloudCost, PointCloudKernels, PointMetric, Problem, Side,
    SinkhornParams, SinkhornSolver,
};
use ndarray::{Array1, Array2, Axis};

/// Largest |a − b| relative to max(1, |b|); −∞ entries must coincide.
fn worst(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mut w = 0.0f64;
    for (k, (&x, &y)) in a.iter().zip(b).enumerate() {
        if x == f64::NEG_INFINITY || y == f64::NEG_INFINITY {
            assert_eq!(x, y, "entry {k}: {x} vs {y} (−∞ must match)");
            continue;
        }
        assert!(x.is_finite() && y.is_finite(), "entry {k}: {x} vs {y}");
        w = w.max((x - y).abs() / y.abs().max(1.0));
    }
    w
}

/// Half-steps on both sides, f32 and f64 on the GPU against f64 on the CPU.
#[test]
fn half_steps_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend;
    // (n, m, d, metric, batch, eps): d = 1 to 4 (a kernel each), 7 and 16 (d ≤ 16); large
    // reductions with few outputs force split reductions; ε = 1e-3 makes the shifts'
    // overflow test redo stages and renormalise sums.
    for (n, m, d, metric, batch, eps) in [
        (1000, 1300, 3, PointMetric::SqEuclidean, 1, 0.05),
        (257, 3000, 2, PointMetric::Euclidean, 3, 0.02),
        (500, 610, 1, PointMetric::SqEuclidean, 2, 0.05),
        (300, 410, 4, PointMetric::Euclidean, 1, 0.1),
        (40, 20000, 3, PointMetric::SqEuclidean, 1, 0.01),
        (300, 700, 7, PointMetric::SqEuclidean, 2, 0.5),
        (129, 130, 16, PointMetric::Euclidean, 1, 1.0),
        (2000, 2000, 3, PointMetric::SqEuclidean, 1, 1e-3),
    ] {
        let mut r = Lcg((n * 31 + m) as u64);
        let x = Array2::from_shape_vec((n, d), r.vec(n * d, 0.0, 1.0)).unwrap();
        let y = Array2::from_shape_vec((m, d), r.vec(m * d, 0.0, 1.0)).unwrap();
        let (f, g, lmu, lnu) = step_inputs(&mut r, (n, m, batch));
        let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
        let pc = cpu.prepare_cost(&cost.clone().into()).unwrap();
        for (side, other, lm, len) in [(Side::Col, &f, &lnu, m), (Side::Row, &g, &lmu, n)] {
            let mut want = vec![0.0; batch * len];
            cpu.sinkstep(&pc, side, eps, other, lm, &mut want).unwrap();
            // f64 on the GPU.
            let gc = gpu.prepare_cost(&cost.clone().into()).unwrap();
            let (o, l) = (gpu.upload(other).unwrap(), gpu.upload(lm).unwrap());
            let mut out = gpu.filled(batch * len, 0.0).unwrap();
            gpu.sinkstep(&gc, side, eps, &o, &l, &mut out).unwrap();
            let got = gpu.download(&out).unwrap();
            let w = worst(&got, &want);
            assert!(w < 1e-12, "f64 n={n} m={m} d={d} {side:?}: {w:e}");
            // f32 on the GPU.
            let (x32, y32) = (x.mapv(|v| v as f32), y.mapv(|v| v as f32));
            let c32 = PointCloudCost::with_metric(x32.view(), y32.view(), metric).unwrap();
            let gc = gpu.prepare_cost(&c32.into()).unwrap();
            let (o, l) = (
                gpu.upload(&cast::<f32>(other)).unwrap(),
                gpu.upload(&cast::<f32>(lm)).unwrap(),
            );
            let mut out = gpu.filled(batch * len, 0.0f32).unwrap();
            gpu.sinkstep(&gc, side, eps as f32, &o, &l, &mut out)
                .unwrap();
            let got = f64s(&gpu.download(&out).unwrap());
            let w = worst(&got, &want);
            assert!(w < 2e-5, "f32 n={n} m={m} d={d} {side:?}: {w:e}");
        }
    }
}

/// Transport costs, point gradients, P·V and plans against the CPU, in f64.
#[test]
fn weighted_sums_and_plans_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend;
    for (n, m, d, metric) in [
        (300, 410, 3, PointMetric::SqEuclidean),
        (200, 170, 5, PointMetric::Euclidean),
    ] {
        let batch = 2;
        let eps = 0.05;
        let mut r = Lcg((n + m) as u64);
        let x = Array2::from_shape_vec((n, d), r.vec(n * d, 0.0, 1.0)).unwrap();
        let y = Array2::from_shape_vec((m, d), r.vec(m * d, 0.0, 1.0)).unwrap();
        let mut f = r.vec(batch * n, -0.3, 0.0);
        let g = r.vec(batch * m, -0.3, 0.0);
        f[4] = f64::NEG_INFINITY;
        let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
        let pc = cpu.prepare_cost(&cost.clone().into()).unwrap();
        let gc = gpu.prepare_cost(&cost.into()).unwrap();
        let (fd, gd) = (gpu.upload(&f).unwrap(), gpu.upload(&g).unwrap());
        let want = cpu.transport_cost(&pc, &f, &g, eps).unwrap();
        let got = gpu.transport_cost(&gc, &fd, &gd, eps).unwrap();
        assert!(worst(&got, &want) < 1e-12, "transport {got:?} vs {want:?}");
        for side in [Side::Row, Side::Col] {
            let (wm, wg) = cpu.point_gradient(&pc, side, &f, &g, eps).unwrap();
            let (gm, gg) = gpu.point_gradient(&gc, side, &fd, &gd, eps).unwrap();
            let (gm, gg) = (gpu.download(&gm).unwrap(), gpu.download(&gg).unwrap());
            assert!(worst(&gm, &wm) < 1e-12, "{side:?} mass");
            assert!(worst(&gg, &wg) < 1e-11, "{side:?} gradient");
            let len_red = if side == Side::Row { m } else { n };
            let vals = r.vec(batch * len_red * 3, -1.0, 1.0);
            let want = cpu.plan_apply(&pc, side, &f, &g, eps, &vals, 3).unwrap();
            let got = gpu
                .plan_apply(&gc, side, &fd, &gd, eps, &gpu.upload(&vals).unwrap(), 3)
                .unwrap();
            assert!(
                worst(&gpu.download(&got).unwrap(), &want) < 1e-12,
                "{side:?} P·V"
            );
        }
        let want = cpu.plan(&pc, &f, &g, eps).unwrap();
        let got = gpu
            .download(&gpu.plan(&gc, &fd, &gd, eps).unwrap())
            .unwrap();
        assert!(worst(&got, &want) < 1e-13, "plan");
    }
}

/// Whole solves (solver loop, end-of-run report, point gradients) against the CPU.
#[test]
fn solver_matches_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let (n, m, d) = (700, 650, 3);
    let mut r = Lcg(7);
    let x = Array2::from_shape_vec((n, d), r.vec(n * d, 0.0, 1.0)).unwrap();
    let y = Array2::from_shape_vec((m, d), r.vec(m * d, 0.0, 1.0)).unwrap();
    let mu = Array1::from_elem(n, 1.0 / n as f64);
    let nu = Array1::from_elem(m, 1.0 / m as f64);
    let p = Problem::new(
        mu.view().insert_axis(Axis(0)),
        nu.view().insert_axis(Axis(0)),
        PointCloudCost::new(x.view(), y.view()).unwrap(),
    )
    .unwrap();
    let params = SinkhornParams::new(0.01);
    let want = SinkhornSolver::new(CpuBackend, params.clone())
        .point_gradients(&p)
        .unwrap();
    let got = SinkhornSolver::new(gpu, params)
        .point_gradients(&p)
        .unwrap();
    assert_eq!(
        got.result.convergence.iterations,
        want.result.convergence.iterations
    );
    assert!(got.result.convergence.converged);
    let rel = (got.result.distance[0] - want.result.distance[0]).abs() / want.result.distance[0];
    assert!(rel < 1e-10, "distance rel {rel:e}");
    assert!((got.value[0] - want.value[0]).abs() < 1e-10);
    let gx: Vec<f64> = got.x.iter().copied().collect();
    let wx: Vec<f64> = want.x.iter().copied().collect();
    assert!(worst(&gx, &wx) < 1e-9);
}

/// otC (N = M = 65536, d = 3, ε = 0.05, f32): one half-step in O(N) GPU memory, checked
/// against the CPU on a sample of outputs; prints the GPU time of the half-step.
#[test]
fn otc_half_step() {
    let Some(gpu) = gpu() else { return };
    use logot_cli::problems::{ot_c, OTC_D, OTC_EPS, OTC_N};
    let (_, nu, x, y) = ot_c::<f32>(OTC_N, OTC_D);
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let gc = gpu.prepare_cost(&cost.clone().into()).unwrap();
    let f: Vec<f32> = (0..OTC_N).map(|i| 0.02 * (7.0 * x[[i, 0]]).sin()).collect();
    let lnu: Vec<f32> = nu.iter().map(|v| v.ln()).collect();
    let (fd, ld) = (gpu.upload(&f).unwrap(), gpu.upload(&lnu).unwrap());
    let mut out = gpu.filled(OTC_N, 0.0f32).unwrap();
    let eps = OTC_EPS as f32;
    gpu.sinkstep(&gc, Side::Col, eps, &fd, &ld, &mut out)
        .unwrap();
    let (_, ms) = gpu
        .time_ms(|| gpu.sinkstep(&gc, Side::Col, eps, &fd, &ld, &mut out))
        .unwrap();
    eprintln!("otC half-step on {}: {ms:.3} ms", gpu.device_name());
    let got = gpu.download(&out).unwrap();
    // Reference outputs in f64 on a sample of columns.
    let e = OTC_EPS;
    for j in (0..OTC_N).step_by(4099) {
        let v: Vec<f64> = (0..OTC_N)
            .map(|i| {
                let c: f64 = (0..OTC_D)
                    .map(|k| (x[[i, k]] as f64 - y[[j, k]] as f64).powi(2))
                    .sum();
                (f[i] as f64 - c) / e
            })
            .collect();
        let mx = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let want =
            e * ((nu[j] as f64).ln() - (mx + v.iter().map(|t| (t - mx).exp()).sum::<f64>().ln()));
        assert!(
            (got[j] as f64 - want).abs() < 2e-5 * want.abs().max(1.0),
            "g[{j}] {} vs {want}",
            got[j]
        );
    }
}
