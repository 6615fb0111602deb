//! CUDA `GradKernels` and the implicit OT gradients that run on them, against the CPU
//! backend in f64 (the reference, checked against finite differences in tests/grad/ot.rs):
//! each kernel on random batches (mat-vecs, weighted marginals with per-problem and shared
//! weights, assembly, dot/axpy/xpby, hadamard, reciprocals, support), then
//! `wasserstein_gradients` (∂/∂C, ∂/∂μ, ∂/∂ν) for shared and per-problem costs, with a
//! zero-mass bin, in f64 and f32. Each test skips with a printed reason when no GPU is usable,
//! and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]
use common::gpu::gpu;

mod common;

use common::Lcg;
use logot::backend::cuda::CudaBackend;
use logot::grad::CgParams;
use logot::{Backend, CpuBackend, GradKernels, Problem, Real, SinkhornParams, SinkhornSolver};
use ndarray::{Array2, Array3};

/// Largest |a − b| relative to max(1e-300, max |b|).
fn rel(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1e-300f64, |s, v| s.max(v.abs()));
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            assert!(x.is_finite(), "{x}");
            (x - y).abs() / scale
        })
        .fold(0.0, f64::max)
}

fn down<T: Real>(gpu: &CudaBackend, b: &<CudaBackend as Backend<T>>::Buffer) -> Vec<f64>
where
    CudaBackend: Backend<T>,
{
    gpu.download(b).unwrap().iter().map(|v| v.f64()).collect()
}

/// Every GradKernels method on the GPU in `T` against the CPU in f64 on the same values.
fn kernels_match<T: Real>(gpu: &CudaBackend, tol: f64)
where
    CudaBackend: GradKernels<T>,
{
    let mut g = Lcg(5);
    for (b, n, m) in [(3usize, 5usize, 7usize), (2, 70, 300), (40, 3, 2)] {
        let per = n * m;
        let v = |g: &mut Lcg, len: usize, lo: f64, hi: f64| -> Vec<f64> {
            (0..len).map(|_| T::of(g.uniform(lo, hi)).f64()).collect()
        };
        let mut plan = v(&mut g, b * per, 0.0, 1.0);
        plan[1] = 0.0;
        let x_m = v(&mut g, b * m, -1.0, 1.0);
        let x_n = v(&mut g, b * n, -1.0, 1.0);
        let w_all = v(&mut g, b * per, -2.0, 2.0);
        let w_one = v(&mut g, per, -2.0, 2.0);
        let up = |h: &[f64]| {
            gpu.upload(&h.iter().map(|&x| T::of(x)).collect::<Vec<T>>())
                .unwrap()
        };
        let (pg, xmg, xng) = (up(&plan), up(&x_m), up(&x_n));
        let cpu = CpuBackend;
        // P·x and Pᵀ·x
        let mut y = cpu.filled(b * n, 0.0f64).unwrap();
        cpu.plan_matvec(&plan, n, m, &x_m, &mut y).unwrap();
        let mut yg = gpu.filled(b * n, T::zero()).unwrap();
        gpu.plan_matvec(&pg, n, m, &xmg, &mut yg).unwrap();
        assert!(
            rel(&down::<T>(gpu, &yg), &y) < tol,
            "plan_matvec {b}×{n}×{m}"
        );
        let mut y = cpu.filled(b * m, 0.0f64).unwrap();
        cpu.plan_matvec_t(&plan, n, m, &x_n, &mut y).unwrap();
        let mut yg = gpu.filled(b * m, T::zero()).unwrap();
        gpu.plan_matvec_t(&pg, n, m, &xng, &mut yg).unwrap();
        assert!(
            rel(&down::<T>(gpu, &yg), &y) < tol,
            "plan_matvec_t {b}×{n}×{m}"
        );
        // Marginals: unweighted, per-problem and shared weights.
        for w in [None, Some(&w_all), Some(&w_one)] {
            let (r, c) = cpu.weighted_marginals(&plan, n, m, w).unwrap();
            let wg = w.map(|w| up(w));
            let (rg, cg) = gpu.weighted_marginals(&pg, n, m, wg.as_ref()).unwrap();
            assert!(rel(&down::<T>(gpu, &rg), &r) < tol, "rows {b}×{n}×{m}");
            assert!(rel(&down::<T>(gpu, &cg), &c) < tol, "cols {b}×{n}×{m}");
        }
        // Assembly with both weight layouts.
        for w in [&w_all, &w_one] {
            let out = cpu
                .assemble_gradient(&plan, n, m, w, &x_n, &x_m, 0.5, -3.0)
                .unwrap();
            let og = gpu
                .assemble_gradient(&pg, n, m, &up(w), &xng, &xmg, T::of(0.5), T::of(-3.0))
                .unwrap();
            assert!(rel(&down::<T>(gpu, &og), &out) < tol, "assemble");
        }
        // Batched vector operations on B problems of m entries.
        let dots = cpu.batched_dot(b, &x_m, &x_m).unwrap();
        let dg = gpu.batched_dot(b, &xmg, &xmg).unwrap();
        assert!(rel(&dg, &dots) < tol, "dot");
        let coef: Vec<f64> = (0..b)
            .map(|k| if k % 3 == 0 { 0.0 } else { k as f64 - 1.5 })
            .collect();
        let y0 = v(&mut g, b * m, -1.0, 1.0);
        let (mut yc, mut yg) = (y0.clone(), up(&y0));
        cpu.batched_axpy(&coef, &x_m, &mut yc).unwrap();
        gpu.batched_axpy(&coef, &xmg, &mut yg).unwrap();
        assert!(rel(&down::<T>(gpu, &yg), &yc) < tol, "axpy");
        cpu.batched_xpby(&x_m, &coef, &mut yc).unwrap();
        gpu.batched_xpby(&xmg, &coef, &mut yg).unwrap();
        assert!(rel(&down::<T>(gpu, &yg), &yc) < tol, "xpby");
        for beta in [0.0, 0.75] {
            let (mut hc, mut hg) = (y0.clone(), up(&y0));
            cpu.hadamard(&x_m, &yc.clone(), beta, &mut hc).unwrap();
            gpu.hadamard(&xmg, &up(&yc), T::of(beta), &mut hg).unwrap();
            assert!(rel(&down::<T>(gpu, &hg), &hc) < tol, "hadamard β={beta}");
        }
        let mut marg = x_n.clone();
        marg[0] = 0.0;
        let mg = up(&marg);
        assert!(
            rel(
                &down::<T>(gpu, &gpu.recip_or_zero(&mg).unwrap()),
                &cpu.recip_or_zero(&marg).unwrap()
            ) < tol
        );
        assert_eq!(
            down::<T>(gpu, &gpu.support(&mg).unwrap()),
            cpu.support(&marg).unwrap()
        );
    }
    // Shape errors are reported, not launched.
    let p = gpu.filled(12, T::zero()).unwrap();
    let mut y = gpu.filled(5, T::zero()).unwrap();
    assert!(gpu
        .plan_matvec(&p, 3, 4, &gpu.filled(4, T::zero()).unwrap(), &mut y)
        .is_err());
}

#[test]
fn grad_kernels_match_cpu() {
    let Some(gpu) = gpu() else { return };
    kernels_match::<f64>(&gpu, 1e-12);
    kernels_match::<f32>(&gpu, 1e-5);
}

/// `wasserstein_gradients` on the GPU in `T` against the CPU in f64 (same inputs).
fn ot_gradients_match<T: Real>(gpu: &CudaBackend, shared: bool, zero_bin: bool, tol: f64)
where
    CudaBackend: GradKernels<T>,
{
    let (b, n, m) = (3usize, 40usize, 30usize);
    let mut g = Lcg(if shared { 1 } else { 2 });
    let hist = |g: &mut Lcg, len: usize| -> Vec<f64> {
        let v: Vec<f64> = (0..len).map(|_| 0.2 + g.next()).collect();
        let s: f64 = v.iter().sum();
        v.iter().map(|x| x / s).collect()
    };
    let mut mu = Array2::<f64>::zeros((b, n));
    let mut nu = Array2::<f64>::zeros((b, m));
    for k in 0..b {
        let mut h = hist(&mut g, n);
        if zero_bin {
            let z = h[3];
            h[3] = 0.0;
            h[4] += z;
        }
        mu.row_mut(k).assign(&ndarray::Array1::from(h));
        nu.row_mut(k)
            .assign(&ndarray::Array1::from(hist(&mut g, m)));
    }
    let (xs, ys): (Vec<f64>, Vec<f64>) = (
        (0..n).map(|_| g.next()).collect(),
        (0..m).map(|_| g.next()).collect(),
    );
    let cost1 = Array2::from_shape_fn((n, m), |(i, j)| (xs[i] - ys[j]).powi(2));
    let costb = Array3::from_shape_fn((b, n, m), |(k, i, j)| {
        (xs[i] - ys[j]).powi(2) * (1.0 + 0.3 * k as f64)
    });
    let params = SinkhornParams::new(0.05)
        .tol(if T::NAME == "float64" { 1e-12 } else { 1e-6 })
        .max_iters(20_000);
    let cg = CgParams::default();
    let cpu = SinkhornSolver::new(CpuBackend, params.clone());
    let dev = SinkhornSolver::new(gpu.clone(), params);
    let (c, d) = if shared {
        let pc = Problem::new(mu.view(), nu.view(), cost1.view()).unwrap();
        let (mu_t, nu_t, c_t) = (mu.mapv(T::of), nu.mapv(T::of), cost1.mapv(T::of));
        let pd = Problem::new(mu_t.view(), nu_t.view(), c_t.view()).unwrap();
        (
            cpu.wasserstein_gradients(&pc, &CgParams::default().tol(1e-12))
                .unwrap(),
            dev.wasserstein_gradients(&pd, &cg).unwrap(),
        )
    } else {
        let pc = Problem::new(mu.view(), nu.view(), costb.view()).unwrap();
        let (mu_t, nu_t, c_t) = (mu.mapv(T::of), nu.mapv(T::of), costb.mapv(T::of));
        let pd = Problem::new(mu_t.view(), nu_t.view(), c_t.view()).unwrap();
        (
            cpu.wasserstein_gradients(&pc, &CgParams::default().tol(1e-12))
                .unwrap(),
            dev.wasserstein_gradients(&pd, &cg).unwrap(),
        )
    };
    assert!(d.cg.all_converged(), "{:?}", d.cg.problems);
    let f = |a: &[T]| a.iter().map(|v| v.f64()).collect::<Vec<f64>>();
    let ec = rel(&f(d.cost.as_slice().unwrap()), c.cost.as_slice().unwrap());
    let em = rel(&f(d.mu.as_slice().unwrap()), c.mu.as_slice().unwrap());
    let en = rel(&f(d.nu.as_slice().unwrap()), c.nu.as_slice().unwrap());
    assert!(
        ec < tol && em < tol && en < tol,
        "{} shared={shared} zero_bin={zero_bin}: cost {ec:e}, mu {em:e}, nu {en:e}",
        T::NAME
    );
}

#[test]
fn ot_gradients_match_cpu() {
    let Some(gpu) = gpu() else { return };
    for shared in [true, false] {
        for zero_bin in [false, true] {
            ot_gradients_match::<f64>(&gpu, shared, zero_bin, 1e-7);
            ot_gradients_match::<f32>(&gpu, shared, zero_bin, 2e-2);
        }
    }
}
