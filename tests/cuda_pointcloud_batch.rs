//! Batched point clouds on the GPU ([`PointCloudCost::batched`]: problem `k` on its own pair
//! `x[k]`, `y[k]`; every kernel moves its cloud pointers to its problem's pair): solves,
//! plans and point gradients against the CPU backend in f64 (itself checked against separate
//! solves and a dense brute force in tests/pointcloud/batch.rs) and against separate
//! single-pair GPU solves, in f64 and f32, at d = 3 (small-d kernels, both exponent forms)
//! and d = 64 (the any-d kernels and, in f32, the tensor-core modes TF32x3 and TF32 with
//! the distance bounds of tests/cuda_pointcloud_tc.rs: 1e-5 exact, 1e-4 TF32x3, 1e-2 TF32),
//! including a shape whose reductions are split across blocks. Skips without a GPU (fails
//! instead under `LOGOT_REQUIRE_GPU=1`).
#![cfg(feature = "cuda")]

mod common;
use common::gpu::gpu;
use common::Lcg;

use logot::backend::cuda::CudaBackend;
use logot::grad::CgParams;
use logot::{
    CpuBackend, CrossPrecision, PointCloudCost, PointMetric, Problem, Real, SinkhornParams,
    SinkhornSolver,
};
use ndarray::{s, Array2, Array3, Axis};

/// `b` pairs of seeded clouds with different content per problem (x[k] in [k/4, k/4 + 1)^d,
/// y[k] in [0.1, 1.1 + 0.2k)^d) and seeded weights.
fn batch(
    (b, n, m, d): (usize, usize, usize, usize),
    seed: u64,
) -> (Array3<f64>, Array3<f64>, Array2<f64>, Array2<f64>) {
    let mut r = Lcg(seed);
    let x = Array3::from_shape_fn((b, n, d), |(k, _, _)| 0.25 * k as f64 + r.next());
    let y = Array3::from_shape_fn((b, m, d), |(k, _, _)| {
        0.1 + (1.0 + 0.2 * k as f64) * r.next()
    });
    (
        x,
        y,
        common::bin_weights(b, n, 0, seed + 1),
        common::bin_weights(b, m, 3, seed + 2),
    )
}

fn mean_cost(d: usize, metric: PointMetric) -> f64 {
    match metric {
        PointMetric::SqEuclidean => d as f64 / 6.0,
        PointMetric::Euclidean => (d as f64 / 6.0).sqrt(),
    }
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-300)
}

/// The distances of a batched solve of `T` clouds with `mode` on `be`, and of each problem
/// solved alone on `be`.
fn distances<T: Real, Bk: logot::Backend<T> + Clone>(
    be: &Bk,
    params: &SinkhornParams,
    (x, y, mu, nu): (&Array3<f64>, &Array3<f64>, &Array2<f64>, &Array2<f64>),
    metric: PointMetric,
    mode: CrossPrecision,
) -> (Vec<f64>, Vec<f64>) {
    let (xt, yt) = (x.mapv(T::of), y.mapv(T::of));
    let (mt, nt) = (mu.mapv(T::of), nu.mapv(T::of));
    let cost = PointCloudCost::batched_with_metric(xt.view(), yt.view(), metric)
        .unwrap()
        .with_precision(mode);
    let solver = SinkhornSolver::new(be.clone(), params.clone());
    let all = solver
        .solve(&Problem::new(mt.view(), nt.view(), cost.clone()).unwrap())
        .unwrap();
    let sep = (0..x.dim().0)
        .map(|k| {
            let (mk, nk) = (mt.slice(s![k..k + 1, ..]), nt.slice(s![k..k + 1, ..]));
            let p = Problem::new(mk, nk, cost.problem(k)).unwrap();
            solver.solve(&p).unwrap().distance[0].f64()
        })
        .collect();
    (all.distance.iter().map(|v| v.f64()).collect(), sep)
}

/// Batched solves (60 iterations, ε = 0.01·mean cost as the otC regime) in f64 and in f32
/// with every cross-term mode, against the CPU in f64 and against separate GPU solves.
#[test]
fn batched_solves_match_the_cpu_and_separate_gpu_solves() {
    let Some(gpu) = gpu() else { return };
    let shapes = [
        (3, 300, 257, 3, PointMetric::SqEuclidean),
        (3, 300, 257, 3, PointMetric::Euclidean),
        (3, 300, 257, 64, PointMetric::SqEuclidean),
        (3, 300, 257, 64, PointMetric::Euclidean),
        // Few outputs, many reduced points: split reductions.
        (2, 20, 5000, 64, PointMetric::SqEuclidean),
        (2, 20, 5000, 3, PointMetric::SqEuclidean),
    ];
    for (b, n, m, d, metric) in shapes {
        let data = batch((b, n, m, d), 500 + (d * 7 + n) as u64);
        let (x, y, mu, nu) = &data;
        let params = SinkhornParams::new(0.01 * mean_cost(d, metric))
            .max_iters(60)
            .tol(0.0);
        let refs = (x, y, mu, nu);
        let (want, cpu_sep) =
            distances::<f64, _>(&CpuBackend, &params, refs, metric, CrossPrecision::Exact);
        for k in 0..b {
            assert!(
                rel(want[k], cpu_sep[k]) < 1e-12,
                "CPU batched vs separate, problem {k}"
            );
        }
        let what = format!("B={b} n={n} m={m} d={d} {metric:?}");
        let (g64, s64) =
            distances::<f64, CudaBackend>(&gpu, &params, refs, metric, CrossPrecision::Exact);
        for k in 0..b {
            let (e, es) = (rel(g64[k], want[k]), rel(g64[k], s64[k]));
            eprintln!("{what} f64 problem {k}: vs CPU {e:.3e}, vs separate GPU {es:.3e}");
            assert!(
                e < 1e-10 && es < 1e-10,
                "{what} f64 problem {k}: {e:e} / {es:e}"
            );
        }
        for mode in [
            CrossPrecision::Exact,
            CrossPrecision::Tf32x3,
            CrossPrecision::Tf32,
        ] {
            // Tensor cores only above 16 dimensions; below every mode is exact.
            let tol = match mode {
                CrossPrecision::Tf32 if d > 16 => 1e-2,
                CrossPrecision::Tf32x3 if d > 16 => 1e-4,
                _ => 1e-5,
            };
            let (g32, s32) = distances::<f32, CudaBackend>(&gpu, &params, refs, metric, mode);
            for k in 0..b {
                let (e, es) = (rel(g32[k], want[k]), rel(g32[k], s32[k]));
                eprintln!(
                    "{what} f32 {mode:?} problem {k}: vs CPU {e:.3e}, vs separate GPU {es:.3e}"
                );
                assert!(
                    e < tol && es < tol,
                    "{what} f32 {mode:?} problem {k}: {e:e} / {es:e} (bound {tol:e})"
                );
            }
            // Distinct pairs give distinct distances: a kernel reading problem 0's pair for
            // every problem would fail here and against the CPU.
            assert!(
                rel(g32[0], g32[b - 1]) > 1e-2,
                "{what}: problems 0 and {} coincide",
                b - 1
            );
        }
    }
}

/// Plans, envelope point gradients and (d = 3: the adjoint kernels handle d ≤ 16) exact
/// transport-cost gradients of batched clouds on the GPU in f64 against the CPU in f64.
#[test]
fn batched_plans_and_point_gradients_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    for (d, metric) in [
        (3, PointMetric::SqEuclidean),
        (3, PointMetric::Euclidean),
        (64, PointMetric::SqEuclidean),
    ] {
        let (b, n, m) = (3, 40, 37);
        let (x, y, mu, nu) = batch((b, n, m, d), 900 + d as u64);
        let params = SinkhornParams::new(0.05 * mean_cost(d, metric))
            .max_iters(200)
            .tol(0.0);
        let cost = PointCloudCost::batched_with_metric(x.view(), y.view(), metric).unwrap();
        let problem = Problem::new(mu.view(), nu.view(), cost).unwrap();
        let (cpu, gpus) = (
            SinkhornSolver::new(CpuBackend, params.clone()),
            SinkhornSolver::new(gpu.clone(), params.clone()),
        );
        let what = format!("d={d} {metric:?}");
        let worst = |a: &Array3<f64>, b: &Array3<f64>| {
            let scale = b.iter().fold(1e-300f64, |s, v| s.max(v.abs()));
            a.iter()
                .zip(b)
                .fold(0.0f64, |w, (p, q)| w.max((p - q).abs() / scale))
        };
        let (pc, pg) = (
            cpu.coupling(&problem).unwrap(),
            gpus.coupling(&problem).unwrap(),
        );
        let e = worst(&pg.plan, &pc.plan);
        eprintln!("{what}: plans {e:.3e}");
        assert!(e < 1e-10, "{what}: plans {e:e}");
        // Each problem's plan has its own row marginal μ_k.
        for k in 0..b {
            let rows = pg.plan.index_axis(Axis(0), k).sum_axis(Axis(1));
            for (i, r) in rows.iter().enumerate() {
                assert!((r - mu[[k, i]]).abs() < 1e-12, "{what} problem {k} row {i}");
            }
        }
        let (gc, gg) = (
            cpu.point_gradients(&problem).unwrap(),
            gpus.point_gradients(&problem).unwrap(),
        );
        let (ex, ey) = (worst(&gg.x, &gc.x), worst(&gg.y, &gc.y));
        eprintln!("{what}: envelope gradients {ex:.3e} {ey:.3e}");
        assert!(
            ex < 1e-9 && ey < 1e-9,
            "{what}: envelope gradients {ex:e} {ey:e}"
        );
        if d <= 16 {
            let cg = CgParams::default();
            let (tc, tg) = (
                cpu.transport_point_gradients(&problem, &cg).unwrap(),
                gpus.transport_point_gradients(&problem, &cg).unwrap(),
            );
            let (ex, ey) = (worst(&tg.x, &tc.x), worst(&tg.y, &tc.y));
            eprintln!("{what}: transport gradients {ex:.3e} {ey:.3e}");
            assert!(
                ex < 1e-7 && ey < 1e-7,
                "{what}: transport gradients {ex:e} {ey:e}"
            );
        }
    }
}
