//! Unbalanced barycenters on the CUDA backend against the CPU backend: the
//! `bary_log_power_mean` kernel (zero weights, −∞ entries, t from 0 to large), and whole
//! unbalanced barycenters (dense and grid costs, unequal masses, one- and two-sided
//! relaxations, a batch of two) in f64 and f32. Each test skips with a printed reason when no
//! GPU is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::gpu;

use logot::backend::cuda::CudaBackend;
use logot::{
    backend::BaryLayout, Backend, BarycenterKernels, BarycenterParams, BarycenterProblem,
    BarycenterSolver, CpuBackend, GridCost, Real, Relaxation,
};
use ndarray::{Array2, Array3};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Largest |a − b| relative to max |b| over finite entries; −∞ must coincide.
fn rel_to_max<T: Real>(a: &[T], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b
        .iter()
        .filter(|v| v.is_finite())
        .fold(1e-300f64, |s, v| s.max(v.abs()));
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

fn check_power_mean<T: Real>(gpu: &CudaBackend)
where
    CudaBackend: BarycenterKernels<T>,
{
    let mut rng = StdRng::seed_from_u64(18);
    let layout = BaryLayout {
        problems: 3,
        inputs: 4,
        m: 257,
    };
    let (p, k, m) = (layout.problems, layout.inputs, layout.m);
    let mut v: Vec<f64> = (0..p * k * m)
        .map(|_| rng.random_range(-2.0..2.0))
        .collect();
    v[5] = f64::INFINITY; // x = −∞ for one input at bin 5 of problem 0
    for j in 0..k {
        v[j * m + 7] = f64::INFINITY; // every input −∞ at bin 7
    }
    // problem 1 has a zero weight on an input with a huge value (must not take part)
    let w = [0.1, 0.2, 0.3, 0.4, 0.5, 0.0, 0.25, 0.25, 0.7, 0.1, 0.1, 0.1];
    v[(k + 1) * m + 3] = -1e30;
    let (vt, wt): (Vec<T>, Vec<T>) = (
        v.iter().map(|&x| T::of(x)).collect(),
        w.iter().map(|&x| T::of(x)).collect(),
    );
    for t in [0.0, 1e-9, 0.3, 5.0] {
        let cpu = CpuBackend;
        let mut want = vec![T::zero(); p * m];
        cpu.bary_log_power_mean(layout, &wt, &vt, &mut want, T::of(t))
            .unwrap();
        let want: Vec<f64> = want.iter().map(|x| x.f64()).collect();
        let (gw, gv) = (gpu.upload(&wt).unwrap(), gpu.upload(&vt).unwrap());
        let mut gbar = gpu.filled(p * m, T::zero()).unwrap();
        gpu.bary_log_power_mean(layout, &gw, &gv, &mut gbar, T::of(t))
            .unwrap();
        let got = gpu.download(&gbar).unwrap();
        let err = rel_to_max(&got, &want);
        // both compute in f64 and round once to T
        let tol = if T::NAME == "float64" { 1e-13 } else { 1e-6 };
        assert!(err < tol, "{} t = {t}: GPU vs CPU {err:e}", T::NAME);
        assert_eq!(got[7].f64(), f64::NEG_INFINITY);
    }
}

#[test]
fn log_power_mean_kernel_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    check_power_mean::<f64>(&gpu);
    check_power_mean::<f32>(&gpu);
}

/// A batch of two unbalanced barycenter problems (different weights, inputs of masses
/// 1, 1.8, 2.6), GPU in `T` vs CPU in f64, 200 fixed iterations.
fn check_barycenter<T: Real>(gpu: &CudaBackend, shape: &[usize], dense: bool, r: Relaxation)
where
    CudaBackend: BarycenterKernels<T>,
{
    let grid = GridCost::new(shape).unwrap();
    let n = grid.len();
    let mut rng = StdRng::seed_from_u64(n as u64);
    let h = Array2::from_shape_fn((3, n), |_| rng.random_range(0.05..1.0));
    let h = Array2::from_shape_fn((3, n), |(k, i)| {
        h[[k, i]] * (1.0 + 0.8 * k as f64) / h.row(k).sum()
    });
    let hb = Array3::from_shape_fn((2, 3, n), |(_, k, i)| h[[k, i]]);
    let wb = Array2::from_shape_vec((2, 3), vec![0.2, 0.5, 0.3, 0.6, 0.0, 0.4]).unwrap();
    let params = BarycenterParams::new(0.02).fixed_iterations(200);
    let cost = grid.to_dense::<f64>();
    let want = {
        let s = BarycenterSolver::new(CpuBackend, params.clone());
        if dense {
            s.solve(
                &BarycenterProblem::new(hb.view(), wb.view())
                    .unwrap()
                    .relaxed(r),
                cost.view(),
            )
            .unwrap()
        } else {
            s.solve(
                &BarycenterProblem::new(hb.view(), wb.view())
                    .unwrap()
                    .relaxed(r),
                grid.clone(),
            )
            .unwrap()
        }
    };
    let (ht, wt, ct) = (hb.mapv(T::of), wb.mapv(T::of), cost.mapv(T::of));
    let s = BarycenterSolver::new(gpu.clone(), params);
    let got = if dense {
        s.solve(
            &BarycenterProblem::new(ht.view(), wt.view())
                .unwrap()
                .relaxed(r),
            ct.view(),
        )
        .unwrap()
    } else {
        s.solve(
            &BarycenterProblem::new(ht.view(), wt.view())
                .unwrap()
                .relaxed(r),
            grid,
        )
        .unwrap()
    };
    let tol = if T::NAME == "float64" { 1e-10 } else { 1e-4 };
    for (p, (g, c)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.iterations, 200);
        let err = rel_to_max(
            g.histogram.as_slice().unwrap(),
            c.histogram.as_slice().unwrap(),
        );
        assert!(
            err < tol,
            "{} {shape:?} dense={dense} {r:?} problem {p}: {err:e}",
            T::NAME
        );
        // The reported error is a sum over n bins of terms rounded in `T`: in f32 it
        // cannot fall below about n·ε_f32 of the mass, whatever the CPU's f64 value.
        let floor = if T::NAME == "float64" {
            0.0
        } else {
            n as f64 * f32::EPSILON as f64
        };
        assert!(
            (g.error - c.error).abs() <= tol.sqrt() * c.error + floor,
            "{} {shape:?} dense={dense} {r:?} problem {p}: reported errors {} (GPU) vs {} (CPU f64)",
            T::NAME,
            g.error,
            c.error
        );
    }
}

#[test]
fn unbalanced_barycenters_match_cpu() {
    let Some(gpu) = gpu() else { return };
    for r in [
        Relaxation::kl(0.5),
        Relaxation::kl_each(0.3, 2.0),
        Relaxation::kl_each(1.0, f64::INFINITY),
    ] {
        for (shape, dense) in [(&[40][..], true), (&[12, 9][..], false), (&[30][..], false)] {
            check_barycenter::<f64>(&gpu, shape, dense, r);
            check_barycenter::<f32>(&gpu, shape, dense, r);
        }
    }
}
