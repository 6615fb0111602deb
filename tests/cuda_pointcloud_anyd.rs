//! Point clouds of any dimension on the CUDA backend (the `d > 16` kernels: centred clouds,
//! precomputed norms, `|x|² + |y|² − 2·x·y` with the cross term tiled through shared
//! memory; and `plan_apply` with more than 16 channels) against the CPU backend in f64:
//! half-steps at d ∈ {1, 2, 3, 16, 17, 64, 100, 512, 1024, 3072} for both metrics, f32 and
//! f64, batches, zero-mass points, point counts that are not multiples of the tiles and
//! split reductions; transport costs, point gradients, P·V and plans; whole solves at
//! d = 64 and d = 1024, all with exact products (`CrossPrecision::Exact`; the tensor-core
//! modes are tested in cuda_pointcloud_tc). The clouds sit away from the origin (coordinates in [2, 3.1)) so
//! that the dot-product form would lose digits without the centring.
//!
//! Tolerances: `worst` is the largest difference relative to the largest reference value;
//! f64 results agree to 1e-11, f32 ones to `max(2e-5, 2e-6·√d)` (the rounding of the d-term
//! sums that form the costs; the exponent is kept O(10) by ε ∝ the mean cost).
//! Each test skips with a printed reason when no GPU is usable, and fails instead when
//! `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::clouds::{cast, clouds, f64s, gpu_step, mean_cost, step_case, tol32, worst, StepCase};
use common::gpu::gpu;
use common::Lcg;

use logot::{
    Backend, CpuBackend, CrossPrecision, PointCloudCost, PointCloudKernels, PointMetric, Problem,
    Side, SinkhornParams, SinkhornSolver,
};
use ndarray::{Array1, Array2};

const DIMS: [usize; 10] = [1, 2, 3, 16, 17, 64, 100, 512, 1024, 3072];

/// Point counts (n, m) for dimension `d`: smaller for large d (the CPU reference is
/// O(n·m·d)), never multiples of the 64-point tiles.
fn sizes(d: usize) -> (usize, usize) {
    match d {
        0..=16 => (300, 257),
        17..=100 => (190, 203),
        101..=512 => (130, 77),
        513..=1024 => (100, 97),
        _ => (70, 65),
    }
}

/// Half-steps on both sides at every dimension and metric, f64 and f32 on the GPU against
/// f64 on the CPU; a batch of three at d = 100 and split reductions (few outputs, many
/// reduced points) at d = 64 and d = 1024.
#[test]
fn half_steps_match_the_cpu_at_any_dimension() {
    let Some(gpu) = gpu() else { return };
    let mut cases: Vec<(usize, usize, usize, usize)> = DIMS
        .iter()
        .map(|&d| {
            let (n, m) = sizes(d);
            (n, m, d, if d == 100 { 3 } else { 1 })
        })
        .collect();
    cases.push((20, 5000, 64, 1));
    cases.push((9, 3000, 1024, 2));
    for (n, m, d, batch) in cases {
        for (metric, ratio) in [
            (PointMetric::SqEuclidean, 0.1),
            (PointMetric::Euclidean, 0.05),
        ] {
            let seeds = ((d * 1009 + n) as u64, (n * 31 + m + d) as u64);
            let StepCase { x, y, eps, steps } = step_case((n, m, d, batch), metric, ratio, seeds);
            for h in &steps {
                let (side, other, lm, len, want) = (h.side, &h.other, &h.lm, h.len, &h.want);
                let what = format!("n={n} m={m} d={d} B={batch} {metric:?} {side:?}");
                let exact = CrossPrecision::Exact;
                let got = gpu_step::<f64>(&gpu, &x, &y, metric, exact, side, eps, other, lm, len);
                let w = worst(&got, want);
                assert!(w < 1e-11, "f64 {what}: {w:e}");
                let got = gpu_step::<f32>(&gpu, &x, &y, metric, exact, side, eps, other, lm, len);
                let w = worst(&got, want);
                assert!(w < tol32(d), "f32 {what}: {w:e} (tolerance {:e})", tol32(d));
            }
        }
    }
}

/// Potentials from two f64 CPU half-steps, so the plan is near its marginals.
fn balanced_potentials(
    pc: &<CpuBackend as Backend<f64>>::Cost,
    n: usize,
    m: usize,
    batch: usize,
    eps: f64,
) -> (Vec<f64>, Vec<f64>) {
    let cpu = CpuBackend;
    let lmu = vec![-(n as f64).ln(); batch * n];
    let lnu = vec![-(m as f64).ln(); batch * m];
    let f0: Vec<f64> = (0..batch * n).map(|i| 0.01 * (i % 7) as f64).collect();
    let mut g = vec![0.0; batch * m];
    cpu.sinkstep(pc, Side::Col, eps, &f0, &lnu, &mut g).unwrap();
    let mut f = vec![0.0; batch * n];
    cpu.sinkstep(pc, Side::Row, eps, &g, &lmu, &mut f).unwrap();
    (f, g)
}

/// Transport costs, point gradients (both sides), P·V with 3 and with 40 channels (shared
/// and per-problem values) and small plans against the CPU, in f64 (f32 at d = 100 and
/// d = 1024); also P·V with 40 channels at d = 3 (the exact difference form).
#[test]
fn weighted_sums_and_plans_match_the_cpu_at_any_dimension() {
    let Some(gpu) = gpu() else { return };
    let cpu = CpuBackend;
    for d in [3, 17, 64, 100, 512, 1024, 3072] {
        for metric in [PointMetric::SqEuclidean, PointMetric::Euclidean] {
            let (n, m) = sizes(d);
            let batch = if d == 64 { 3 } else { 2 };
            let eps = 0.1 * mean_cost(d, metric);
            let (x, y) = clouds(n, m, d, (d * 7 + 3) as u64);
            let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
            let pc = cpu.prepare_cost(&cost.clone().into()).unwrap();
            let gc = gpu.prepare_cost(&cost.into()).unwrap();
            let (mut f, mut g) = balanced_potentials(&pc, n, m, batch, eps);
            f[4] = f64::NEG_INFINITY;
            g[n.min(m) + 1] = f64::NEG_INFINITY;
            let what = format!("n={n} m={m} d={d} B={batch} {metric:?}");
            let (fd, gd) = (gpu.upload(&f).unwrap(), gpu.upload(&g).unwrap());
            let want = cpu.transport_cost(&pc, &f, &g, eps).unwrap();
            let got = gpu.transport_cost(&gc, &fd, &gd, eps).unwrap();
            assert!(
                worst(&got, &want) < 1e-11,
                "{what} transport {got:?} vs {want:?}"
            );
            let mut r = Lcg(d as u64 + 11);
            for side in [Side::Row, Side::Col] {
                let (wm, wg) = cpu.point_gradient(&pc, side, &f, &g, eps).unwrap();
                let (gm, gg) = gpu.point_gradient(&gc, side, &fd, &gd, eps).unwrap();
                let (gm, gg) = (gpu.download(&gm).unwrap(), gpu.download(&gg).unwrap());
                let w = worst(&gm, &wm);
                assert!(w < 1e-11, "{what} {side:?} mass {w:e}");
                let w = worst(&gg, &wg);
                assert!(w < 1e-11, "{what} {side:?} gradient {w:e}");
                let len_red = if side == Side::Row { m } else { n };
                for (k, per_problem) in [(3, true), (40, true), (40, false)] {
                    let count = if per_problem { batch } else { 1 };
                    let vals = r.vec(count * len_red * k, -1.0, 1.0);
                    let want = cpu.plan_apply(&pc, side, &f, &g, eps, &vals, k).unwrap();
                    let vd = gpu.upload(&vals).unwrap();
                    let got = gpu.plan_apply(&gc, side, &fd, &gd, eps, &vd, k).unwrap();
                    let w = worst(&gpu.download(&got).unwrap(), &want);
                    assert!(w < 1e-11, "{what} {side:?} P·V k={k} {w:e}");
                }
            }
            if d == 100 || d == 1024 {
                let (x32, y32) = (x.mapv(|v| v as f32), y.mapv(|v| v as f32));
                let c32 = PointCloudCost::with_metric(x32.view(), y32.view(), metric).unwrap();
                let gc32 = gpu.prepare_cost(&c32.into()).unwrap();
                let (f32d, g32d) = (
                    gpu.upload(&cast::<f32>(&f)).unwrap(),
                    gpu.upload(&cast::<f32>(&g)).unwrap(),
                );
                // Plan entries carry the cost's rounding divided by ε: 10× the half-step's.
                let tol = 10.0 * tol32(d);
                let got = gpu.transport_cost(&gc32, &f32d, &g32d, eps as f32).unwrap();
                let w = worst(&f64s(&got), &want);
                eprintln!("f32 {what}: transport cost {w:e}");
                assert!(w < tol, "f32 {what} transport {w:e}");
                let (wm, wg) = cpu.point_gradient(&pc, Side::Row, &f, &g, eps).unwrap();
                let (gm, gg) = gpu
                    .point_gradient(&gc32, Side::Row, &f32d, &g32d, eps as f32)
                    .unwrap();
                let w = worst(&f64s(&gpu.download(&gm).unwrap()), &wm);
                eprintln!("f32 {what}: row masses {w:e}");
                assert!(w < tol, "f32 {what} mass {w:e}");
                let w = worst(&f64s(&gpu.download(&gg).unwrap()), &wg);
                eprintln!("f32 {what}: point gradients {w:e}");
                assert!(w < tol, "f32 {what} gradient {w:e}");
            }
            if d <= 100 {
                let want = cpu.plan(&pc, &f, &g, eps).unwrap();
                let got = gpu
                    .download(&gpu.plan(&gc, &fd, &gd, eps).unwrap())
                    .unwrap();
                assert!(worst(&got, &want) < 1e-11, "{what} plan");
            }
        }
    }
}

/// Whole solves on the GPU (`Solver::solve` with a point-cloud cost) against the CPU at
/// d = 64 (a batch of three, zero-weight points) and d = 1024, f64 and f32.
#[test]
fn solver_matches_the_cpu_at_d64_and_d1024() {
    let Some(gpu) = gpu() else { return };
    for (n, m, d, batch) in [(300, 270, 64, 3), (150, 140, 1024, 1)] {
        let metric = PointMetric::SqEuclidean;
        let (x, y) = clouds(n, m, d, d as u64 + 5);
        let mut r = Lcg(d as u64);
        let mut mu = Array2::from_shape_vec((batch, n), r.vec(batch * n, 0.5, 1.5)).unwrap();
        let mut nu = Array2::from_shape_vec((batch, m), r.vec(batch * m, 0.5, 1.5)).unwrap();
        mu[[0, 5]] = 0.0;
        nu[[batch - 1, 7]] = 0.0;
        for mut row in mu.rows_mut() {
            let s = row.sum();
            row.mapv_inplace(|v| v / s);
        }
        for mut row in nu.rows_mut() {
            let s = row.sum();
            row.mapv_inplace(|v| v / s);
        }
        let eps = 0.1 * mean_cost(d, metric);
        let params = SinkhornParams::new(eps);
        let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
        let p = Problem::new(mu.view(), nu.view(), cost).unwrap();
        let want = SinkhornSolver::new(CpuBackend, params.clone())
            .solve(&p)
            .unwrap();
        assert!(want.convergence.converged, "CPU d={d}");
        let got = SinkhornSolver::new(gpu.clone(), params.clone())
            .solve(&p)
            .unwrap();
        assert!(got.convergence.converged, "GPU f64 d={d}");
        assert_eq!(got.convergence.iterations, want.convergence.iterations);
        let dist = |v: &Array1<f64>| v.to_vec();
        let w = worst(&dist(&got.distance), &dist(&want.distance));
        assert!(
            w < 1e-9,
            "f64 d={d} distance {:?} vs {:?}",
            got.distance,
            want.distance
        );
        let flat = |a: &Array2<f64>| a.iter().copied().collect::<Vec<f64>>();
        assert!(worst(&flat(&got.f), &flat(&want.f)) < 1e-8, "f64 d={d} f");
        assert!(worst(&flat(&got.g), &flat(&want.g)) < 1e-8, "f64 d={d} g");
        // f32 on the GPU.
        let (x32, y32) = (x.mapv(|v| v as f32), y.mapv(|v| v as f32));
        let (mu32, nu32) = (mu.mapv(|v| v as f32), nu.mapv(|v| v as f32));
        let c32 = PointCloudCost::with_metric(x32.view(), y32.view(), metric)
            .unwrap()
            .with_precision(CrossPrecision::Exact);
        let p32 = Problem::new(mu32.view(), nu32.view(), c32).unwrap();
        let got = SinkhornSolver::new(gpu.clone(), params)
            .solve(&p32)
            .unwrap();
        let d32: Vec<f64> = got.distance.iter().map(|&v| v as f64).collect();
        let w = worst(&d32, &dist(&want.distance));
        eprintln!("f32 d={d}: distance {w:e} relative to the CPU's f64");
        // The plan's entries carry the cost's rounding divided by ε (see above).
        assert!(
            w < 10.0 * tol32(d),
            "f32 d={d} distance {d32:?} vs {:?}: {w:e}",
            want.distance
        );
    }
}
