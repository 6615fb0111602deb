//! CUDA backend against the CPU backend (the reference, which computes grid passes in
//! f64) for grid costs and barycenters: grid half-steps (1-D, 2-D, 3-D, non-square, with
//! zero-mass bins), a grid Sinkhorn solve (potentials and ⟨P, C⟩), and dense and grid
//! barycenters of the `bary64` shapes at small sizes. Each test skips with a printed reason
//! when no GPU is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::{gpu, gpu_with};

use logot::backend::cuda::{CudaBackend, Tuning};
use logot::{
    Backend, BarycenterParams, BarycenterProblem, BarycenterSolver, CostSource, CpuBackend,
    GridCost, Problem, Real, Side, SinkhornParams, SinkhornSolver,
};
use logot_cli::problems;
use ndarray::{Array1, Array2, Array3};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn cast<T: Real>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::of(x)).collect()
}

/// Largest |a − b| relative to max(1, max |b|), over finite entries; −∞ must coincide.
fn rel_diff<T: Real>(a: &[T], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b
        .iter()
        .filter(|v| v.is_finite())
        .fold(1.0f64, |s, v| s.max(v.abs()));
    let mut worst = 0.0f64;
    for (k, (x, &y)) in a.iter().zip(b).enumerate() {
        let x = x.f64();
        if x == f64::NEG_INFINITY || y == f64::NEG_INFINITY {
            assert_eq!(x, y, "entry {k}: {x} vs {y} (−∞ must match)");
            continue;
        }
        assert!(x.is_finite() && y.is_finite(), "entry {k}: {x} vs {y}");
        worst = worst.max((x - y).abs() / scale);
    }
    worst
}

/// Largest |a − b| relative to max |b| (for histograms, whose bins are all below 1).
fn rel_to_max<T: Real>(a: &[T], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0.0f64, |s, v| s.max(v.abs()));
    assert!(scale > 0.0);
    a.iter()
        .zip(b)
        .map(|(x, &y)| {
            let x = x.f64();
            assert!(x.is_finite(), "{x}");
            (x - y).abs() / scale
        })
        .fold(0.0, f64::max)
}

/// Tolerance relative to the scale: f64 to ~1e-10, f32 to 1e-4.
fn tol<T: Real>() -> f64 {
    if T::NAME == "float64" {
        1e-10
    } else {
        1e-4
    }
}

/// One grid half-step, GPU in `T` vs CPU in f64.
fn check_grid_step<T: Real>(gpu: &CudaBackend, shape: &[usize], batch: usize, eps: f64, seed: u64)
where
    CudaBackend: Backend<T>,
{
    let mut rng = StdRng::seed_from_u64(seed);
    let grid = GridCost::new(shape).unwrap();
    let n = grid.len();
    let other: Vec<f64> = (0..batch * n)
        .map(|_| rng.random_range(-0.3..0.3))
        .collect();
    // Log-marginals with a few zero-mass bins (−∞).
    let lm: Vec<f64> = (0..batch * n)
        .map(|k| {
            if k % 7 == 3 {
                f64::NEG_INFINITY
            } else {
                rng.random_range(0.05f64..1.0).ln()
            }
        })
        .collect();
    let cpu = CpuBackend;
    let cc = Backend::<f64>::prepare_cost(&cpu, &CostSource::Grid(grid.clone())).unwrap();
    let (o, l) = (cpu.upload(&other).unwrap(), cpu.upload(&lm).unwrap());
    let mut want = cpu.filled(batch * n, 0.0).unwrap();
    cpu.sinkstep(&cc, Side::Col, eps, &o, &l, &mut want)
        .unwrap();
    let want = cpu.download(&want).unwrap();

    let gc = Backend::<T>::prepare_cost(gpu, &CostSource::Grid(grid)).unwrap();
    let (o, l) = (
        gpu.upload(&cast::<T>(&other)).unwrap(),
        gpu.upload(&cast::<T>(&lm)).unwrap(),
    );
    for side in [Side::Col, Side::Row] {
        let mut out = gpu.filled(batch * n, T::of(f64::NAN)).unwrap();
        gpu.sinkstep(&gc, side, T::of(eps), &o, &l, &mut out)
            .unwrap();
        let got = gpu.download(&out).unwrap();
        let d = rel_diff(&got, &want);
        assert!(
            d < tol::<T>(),
            "{} grid {shape:?} batch {batch} eps {eps}: relative difference {d:e}",
            T::NAME
        );
    }
}

#[test]
fn grid_sinkstep_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    let cases: &[(&[usize], usize, f64)] = &[
        (&[1], 2, 0.1),
        (&[37], 3, 0.05),
        (&[300], 2, 0.001),
        (&[12, 9], 4, 0.02),
        (&[9, 12], 1, 0.005),
        (&[5, 7, 3], 2, 0.03),
        (&[1024, 2], 1, 0.01),
    ];
    for (k, &(shape, batch, eps)) in cases.iter().enumerate() {
        check_grid_step::<f64>(&gpu, shape, batch, eps, 10 + k as u64);
        check_grid_step::<f32>(&gpu, shape, batch, eps, 10 + k as u64);
    }
}

#[test]
fn grid_axis_longer_than_1024_is_unavailable() {
    let Some(gpu) = gpu() else { return };
    let grid = GridCost::new(&[2, 1025]).unwrap();
    let r = Backend::<f64>::prepare_cost(&gpu, &CostSource::Grid(grid));
    assert!(matches!(r, Err(logot::Error::Unavailable(_))), "{r:?}");
}

fn histograms(rng: &mut StdRng, b: usize, n: usize) -> Array2<f64> {
    let mut h = Array2::from_shape_fn((b, n), |_| rng.random_range(0.05..1.0));
    for mut row in h.rows_mut() {
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    h
}

fn check_grid_solve<T: Real>(gpu: &CudaBackend)
where
    CudaBackend: Backend<T>,
{
    let mut rng = StdRng::seed_from_u64(7);
    let grid = GridCost::image(10, 14).unwrap();
    let (mu, nu) = (histograms(&mut rng, 2, 140), histograms(&mut rng, 2, 140));
    let params = SinkhornParams::new(0.02).fixed_iterations(50);
    let cpu_res = SinkhornSolver::new(CpuBackend, params.clone())
        .solve(&Problem::new(mu.view(), nu.view(), grid.clone()).unwrap())
        .unwrap();
    let (mu_t, nu_t) = (mu.mapv(T::of), nu.mapv(T::of));
    let res = SinkhornSolver::new(gpu.clone(), params)
        .solve(&Problem::new(mu_t.view(), nu_t.view(), grid).unwrap())
        .unwrap();
    let t = tol::<T>();
    let df = rel_diff(res.f.as_slice().unwrap(), cpu_res.f.as_slice().unwrap());
    let dg = rel_diff(res.g.as_slice().unwrap(), cpu_res.g.as_slice().unwrap());
    let dd = rel_diff(
        res.distance.as_slice().unwrap(),
        cpu_res.distance.as_slice().unwrap(),
    );
    assert!(df < t && dg < t, "{}: f {df:e}, g {dg:e}", T::NAME);
    assert!(dd < t, "{}: transport cost {dd:e}", T::NAME);
    // The grid ⟨P, C⟩ is also checked against the dense cost on the GPU.
    let dense = GridCost::image(10, 14).unwrap().to_dense::<T>();
    let res_dense =
        SinkhornSolver::new(gpu.clone(), SinkhornParams::new(0.02).fixed_iterations(50))
            .solve(&Problem::new(mu_t.view(), nu_t.view(), dense.view()).unwrap())
            .unwrap();
    let dd2 = rel_diff(
        res.distance.as_slice().unwrap(),
        &res_dense
            .distance
            .iter()
            .map(|v| v.f64())
            .collect::<Vec<_>>(),
    );
    assert!(dd2 < 10.0 * t, "{}: grid vs dense cost {dd2:e}", T::NAME);
}

#[test]
fn grid_solve_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    check_grid_solve::<f64>(&gpu);
    check_grid_solve::<f32>(&gpu);
}

/// Barycenters of the three bary64 shapes at `n×n`, GPU in `T` vs CPU in f64, for a single
/// problem and a batch of two (different weights).
fn check_barycenter<T: Real>(gpu: &CudaBackend, n: usize, dense: bool)
where
    CudaBackend: logot::BarycenterKernels<T>,
{
    let imgs = problems::bary64_images(n)
        .into_shape_with_order((3, n * n))
        .unwrap();
    let w = Array1::from(problems::BARY64_WEIGHTS.to_vec());
    let grid = GridCost::image(n, n).unwrap();
    let dense64 = grid.to_dense::<f64>();
    let dense_t = grid.to_dense::<T>();
    let eps = if dense { 0.01 } else { 0.004 };
    let params = BarycenterParams::new(eps).fixed_iterations(60);
    let cost64 = || -> CostSource<'_, f64> {
        if dense {
            CostSource::Dense(dense64.view())
        } else {
            CostSource::Grid(grid.clone())
        }
    };
    let cost_t = || -> CostSource<'_, T> {
        if dense {
            CostSource::Dense(dense_t.view())
        } else {
            CostSource::Grid(grid.clone())
        }
    };
    let want = BarycenterSolver::new(CpuBackend, params.clone())
        .solve(
            &BarycenterProblem::new(imgs.view(), w.view()).unwrap(),
            cost64(),
        )
        .unwrap()
        .remove(0);
    let (imgs_t, w_t) = (imgs.mapv(T::of), w.mapv(T::of));
    let got = BarycenterSolver::new(gpu.clone(), params.clone())
        .solve(
            &BarycenterProblem::new(imgs_t.view(), w_t.view()).unwrap(),
            cost_t(),
        )
        .unwrap()
        .remove(0);
    let t = tol::<T>();
    let d = rel_to_max(
        got.histogram.as_slice().unwrap(),
        want.histogram.as_slice().unwrap(),
    );
    assert!(
        d < t,
        "{} dense={dense}: barycenter differs by {d:e} of its largest bin",
        T::NAME
    );
    assert_eq!(got.iterations, want.iterations);
    assert!(
        (got.error - want.error).abs() <= t * want.error.max(1e-6) * 10.0 + 1e-12,
        "{} dense={dense}: error {} vs {}",
        T::NAME,
        got.error,
        want.error
    );

    // A batch of two problems with different weights.
    let h3 = Array3::from_shape_fn((2, 3, n * n), |(_, k, x)| imgs[[k, x]]);
    let w2 = Array2::from_shape_vec((2, 3), vec![0.3, 0.3, 0.4, 0.6, 0.2, 0.2]).unwrap();
    let want = BarycenterSolver::new(CpuBackend, params.clone())
        .solve(
            &BarycenterProblem::new(h3.view(), w2.view()).unwrap(),
            cost64(),
        )
        .unwrap();
    let (h3_t, w2_t) = (h3.mapv(T::of), w2.mapv(T::of));
    let got = BarycenterSolver::new(gpu.clone(), params)
        .solve(
            &BarycenterProblem::new(h3_t.view(), w2_t.view()).unwrap(),
            cost_t(),
        )
        .unwrap();
    assert_eq!(got.len(), 2);
    for (g, w) in got.iter().zip(&want) {
        let d = rel_to_max(
            g.histogram.as_slice().unwrap(),
            w.histogram.as_slice().unwrap(),
        );
        assert!(d < t, "{} dense={dense} batch: {d:e}", T::NAME);
    }
}

#[test]
fn dense_barycenter_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    check_barycenter::<f64>(&gpu, 12, true);
    check_barycenter::<f32>(&gpu, 12, true);
}

#[test]
fn grid_barycenter_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    check_barycenter::<f64>(&gpu, 16, false);
    check_barycenter::<f32>(&gpu, 16, false);
    check_barycenter::<f64>(&gpu, 24, false);
}

/// The fused grid-barycenter kernel (one thread-block cluster per problem, every iteration
/// in one launch) with clusters of 8 and 16 CTAs, and the kernel-by-kernel path
/// (`bary_cluster: 0`), against the CPU in f64 on 1-D, 2-D (non-square) and 3-D grids, for
/// a batch of two problems of three random inputs; then the early stop (tol, check_every)
/// must stop at the CPU's iteration.
#[test]
fn grid_barycenter_fused_and_unfused_match_cpu() {
    if gpu().is_none() {
        return;
    }
    let mut rng = StdRng::seed_from_u64(7);
    for shape in [vec![40usize], vec![10, 13], vec![5, 6, 7]] {
        let grid = GridCost::new(&shape).unwrap();
        let n = grid.len();
        let h = Array3::from_shape_fn((2, 3, n), |_| rng.random_range(0.05..1.0f64));
        let h = &h / &h.sum_axis(ndarray::Axis(2)).insert_axis(ndarray::Axis(2));
        let w = Array2::from_shape_vec((2, 3), vec![0.2, 0.5, 0.3, 0.6, 0.1, 0.3]).unwrap();
        let params = BarycenterParams::new(0.01).fixed_iterations(37);
        let want = BarycenterSolver::new(CpuBackend, params.clone())
            .solve(
                &BarycenterProblem::new(h.view(), w.view()).unwrap(),
                CostSource::Grid(grid.clone()),
            )
            .unwrap();
        for cluster in [8usize, 16, 0] {
            let Some(gpu) = gpu_with(Tuning {
                bary_cluster: cluster,
                ..Tuning::default()
            }) else {
                return;
            };
            let got = BarycenterSolver::new(gpu.clone(), params.clone())
                .solve(
                    &BarycenterProblem::new(h.view(), w.view()).unwrap(),
                    CostSource::Grid(grid.clone()),
                )
                .unwrap();
            for (p, (g, c)) in got.iter().zip(&want).enumerate() {
                let d = rel_to_max(
                    g.histogram.as_slice().unwrap(),
                    c.histogram.as_slice().unwrap(),
                );
                assert!(d < 1e-9, "{shape:?} cluster {cluster} problem {p}: {d:e}");
                assert_eq!(g.iterations, 37);
                assert!((g.error - c.error).abs() <= 1e-9 * c.error.max(1e-6));
            }
            // f32 through the same path, against the f64 reference.
            let (h32, w32) = (h.mapv(|v| v as f32), w.mapv(|v| v as f32));
            let got = BarycenterSolver::new(gpu.clone(), params.clone())
                .solve(
                    &BarycenterProblem::new(h32.view(), w32.view()).unwrap(),
                    CostSource::Grid(grid.clone()),
                )
                .unwrap();
            for (g, c) in got.iter().zip(&want) {
                let d = rel_to_max(
                    g.histogram.as_slice().unwrap(),
                    c.histogram.as_slice().unwrap(),
                );
                assert!(d < tol::<f32>(), "{shape:?} cluster {cluster} f32: {d:e}");
            }
            // Early stop: checks every 7 iterations from iteration 7 (grid schedule).
            let early = BarycenterParams::new(0.01)
                .tol(1e-3)
                .check_every(7)
                .max_iters(500);
            let cpu = BarycenterSolver::new(CpuBackend, early.clone())
                .solve(
                    &BarycenterProblem::new(h.view(), w.view()).unwrap(),
                    CostSource::Grid(grid.clone()),
                )
                .unwrap();
            let gpu_r = BarycenterSolver::new(gpu, early)
                .solve(
                    &BarycenterProblem::new(h.view(), w.view()).unwrap(),
                    CostSource::Grid(grid.clone()),
                )
                .unwrap();
            for (g, c) in gpu_r.iter().zip(&cpu) {
                assert!(c.converged && c.iterations % 7 == 0 && c.iterations < 500);
                assert_eq!(g.iterations, c.iterations, "{shape:?} cluster {cluster}");
                assert!(g.converged);
            }
        }
    }
}
