//! Unbalanced Sinkhorn on the CUDA backend against the CPU backend (itself checked against
//! POT in tests/unbalanced/solve.rs): the `relax` kernel entry by entry, and whole solves on dense,
//! batched dense, grid and point-cloud costs in f64 and f32. Each test skips with a printed
//! reason when no GPU is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::gpu;
use common::relaxed::Relaxed;

use logot::{
    Backend, CostSource, CpuBackend, GridCost, PointCloudCost, Problem, Real, Relaxation,
    SinkhornParams, SinkhornSolver,
};
use ndarray::{Array1, Array2, Array3, Axis};

/// Deterministic marginals (masses unequal, bin 2 of `mu` empty) and costs.
fn data(b: usize, n: usize, m: usize) -> (Array2<f64>, Array2<f64>, Array3<f64>) {
    let mu = Array2::from_shape_fn((b, n), |(k, i)| {
        if i == 2 {
            0.0
        } else {
            (0.5 + 0.4 * (1.3 * i as f64 + 0.2 + 0.1 * k as f64).sin().powi(2))
                * (1.0 + 0.3 * k as f64)
        }
    });
    let nu = Array2::from_shape_fn((b, m), |(k, j)| {
        0.3 + 0.5 * (0.7 * j as f64 + 0.1 + 0.2 * k as f64).cos().powi(2)
    });
    let cost = Array3::from_shape_fn((b, n, m), |(k, i, j)| {
        ((0.9 * i as f64 + 0.3 + 0.5 * k as f64).sin() - (1.1 * j as f64 - 0.2 * k as f64).cos())
            .powi(2)
    });
    (mu, nu, cost)
}

/// The solver of problems relaxed by `rho` on `backend`.
fn solver<B>(backend: B, rho: (f64, f64)) -> Relaxed<B> {
    Relaxed::new(
        SinkhornSolver::new(backend, SinkhornParams::new(0.05).max_iters(20_000)),
        rho,
    )
}

/// `|a − b| ≤ tol·max(1, |b|)`, −∞ entries equal.
fn assert_close<T: Real>(what: &str, a: &[T], b: &[T], tol: f64) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        let (x, y) = (x.f64(), y.f64());
        if y == f64::NEG_INFINITY {
            assert_eq!(x, y, "{what}[{k}]");
        } else {
            assert!(
                (x - y).abs() <= tol * y.abs().max(1.0),
                "{what}[{k}]: GPU {x:e}, CPU {y:e}"
            );
        }
    }
}

#[test]
fn relax_kernel_matches_the_cpu() {
    let Some(cuda) = gpu() else { return };
    let len = 1000;
    let pot: Vec<f64> = (0..len).map(|k| (0.37 * k as f64).sin() * 3.0).collect();
    let lm: Vec<f64> = (0..len)
        .map(|k| {
            if k % 7 == 0 {
                f64::NEG_INFINITY
            } else {
                (0.5 + (0.11 * k as f64).cos().powi(2)).ln()
            }
        })
        .collect();
    for phi in [0.25, 0.999, 1.0] {
        let mut cpu = pot.clone();
        CpuBackend.relax(&mut cpu, &lm, 0.1, phi).unwrap();
        let mut buf = Backend::<f64>::upload(&cuda, &pot).unwrap();
        let lm_dev = Backend::<f64>::upload(&cuda, &lm).unwrap();
        Backend::<f64>::relax(&cuda, &mut buf, &lm_dev, 0.1, phi).unwrap();
        let gpu_out = Backend::<f64>::download(&cuda, &buf).unwrap();
        assert_close("relax f64", &gpu_out, &cpu, 1e-15);
        // f32
        let (p32, l32): (Vec<f32>, Vec<f32>) = (
            pot.iter().map(|&v| v as f32).collect(),
            lm.iter().map(|&v| v as f32).collect(),
        );
        let mut cpu32 = p32.clone();
        CpuBackend.relax(&mut cpu32, &l32, 0.1, phi as f32).unwrap();
        let mut buf = Backend::<f32>::upload(&cuda, &p32).unwrap();
        let lm_dev = Backend::<f32>::upload(&cuda, &l32).unwrap();
        Backend::<f32>::relax(&cuda, &mut buf, &lm_dev, 0.1, phi as f32).unwrap();
        assert_close(
            "relax f32",
            &Backend::<f32>::download(&cuda, &buf).unwrap(),
            &cpu32,
            1e-6,
        );
    }
}

fn compare<'a, T: Real>(
    cuda: &logot::CudaBackend,
    what: &str,
    mu: ndarray::ArrayView2<'a, T>,
    nu: ndarray::ArrayView2<'a, T>,
    cost: CostSource<'a, T>,
    rho: (f64, f64),
    tol: f64,
) where
    logot::CudaBackend: Backend<T>,
{
    let problem = Problem::new(mu, nu, cost).unwrap();
    let on_gpu = solver(cuda.clone(), rho).solve(&problem).unwrap();
    let on_cpu = solver(CpuBackend, rho).solve(&problem).unwrap();
    assert!(
        on_gpu.convergence.converged,
        "{what}: {:?}",
        on_gpu.convergence
    );
    assert_close(
        &format!("{what} distance"),
        on_gpu.distance.as_slice().unwrap(),
        on_cpu.distance.as_slice().unwrap(),
        tol,
    );
    assert_close(
        &format!("{what} objective"),
        on_gpu.objective.as_ref().unwrap().as_slice().unwrap(),
        on_cpu.objective.as_ref().unwrap().as_slice().unwrap(),
        tol,
    );
    // The plans through the potentials: f ⊕ g agree (a constant moved between them would
    // change an unbalanced plan, so f and g agree on their own).
    assert_close(
        &format!("{what} f"),
        on_gpu.f.as_slice().unwrap(),
        on_cpu.f.as_slice().unwrap(),
        tol,
    );
    assert_close(
        &format!("{what} g"),
        on_gpu.g.as_slice().unwrap(),
        on_cpu.g.as_slice().unwrap(),
        tol,
    );
}

fn every_source<T: Real>(cuda: &logot::CudaBackend, tol: f64)
where
    logot::CudaBackend: Backend<T>,
{
    let cast2 = |a: &Array2<f64>| a.mapv(T::of);
    let (mu, nu, cost) = data(3, 40, 30);
    let (mu, nu, cost) = (cast2(&mu), cast2(&nu), cost.mapv(T::of));
    for rho in [(0.5, 2.0), (f64::INFINITY, 1.0), (1.0, f64::INFINITY)] {
        let one = |a: &Array2<T>| a.index_axis(Axis(0), 0).insert_axis(Axis(0)).to_owned();
        let (m1, n1) = (one(&mu), one(&nu));
        let c1 = cost.index_axis(Axis(0), 0).to_owned();
        compare(
            cuda,
            "dense",
            m1.view(),
            n1.view(),
            c1.view().into(),
            rho,
            tol,
        );
        compare(
            cuda,
            "dense batch",
            mu.view(),
            nu.view(),
            cost.view().into(),
            rho,
            tol,
        );
        let shared = cost.index_axis(Axis(0), 0);
        compare(
            cuda,
            "shared cost",
            mu.view(),
            nu.view(),
            shared.into(),
            rho,
            tol,
        );
    }
    // Grid and point cloud: 8×6 points of the unit square.
    let grid = GridCost::new(&[8, 6]).unwrap();
    let n = grid.len();
    let a = Array1::from_shape_fn(n, |i| T::of(0.2 + (0.7 * i as f64).sin().powi(2)))
        .insert_axis(Axis(0));
    let b = Array1::from_shape_fn(n, |j| {
        T::of(0.1 + 0.5 * (0.4 * j as f64 + 1.0).cos().powi(2))
    })
    .insert_axis(Axis(0));
    let pts = Array2::from_shape_fn((n, 2), |(p, k)| {
        T::of(GridCost::coordinate(grid.shape()[k], grid.unravel(p)[k]))
    });
    for rho in [(0.3, 1.5), (f64::INFINITY, 0.8)] {
        compare(
            cuda,
            "grid",
            a.view(),
            b.view(),
            grid.clone().into(),
            rho,
            tol,
        );
        let cloud = PointCloudCost::new(pts.view(), pts.view()).unwrap();
        compare(
            cuda,
            "point cloud",
            a.view(),
            b.view(),
            cloud.into(),
            rho,
            tol,
        );
    }
}

#[test]
fn unbalanced_solves_match_the_cpu_f64() {
    let Some(cuda) = gpu() else { return };
    every_source::<f64>(&cuda, 1e-9);
}

#[test]
fn unbalanced_solves_match_the_cpu_f32() {
    let Some(cuda) = gpu() else { return };
    every_source::<f32>(&cuda, 1e-4);
}

/// Dense problems too large for the fused kernel: the tiled half-steps weighted by `φ`
/// (shared cost with many problems, few problems with the reduction split across blocks,
/// per-problem costs).
fn tiled_paths<T: Real>(cuda: &logot::CudaBackend, tol: f64)
where
    logot::CudaBackend: Backend<T>,
{
    for (b, n, m) in [(16, 200, 260), (3, 230, 190)] {
        let (mu, nu, cost) = data(b, n, m);
        let (mu, nu, cost) = (mu.mapv(T::of), nu.mapv(T::of), cost.mapv(T::of));
        for rho in [(0.5, 2.0), (f64::INFINITY, 0.7)] {
            let shared = cost.index_axis(Axis(0), 1);
            let what = format!("tiled shared cost {b}×{n}×{m}");
            compare(cuda, &what, mu.view(), nu.view(), shared.into(), rho, tol);
            let what = format!("tiled per-problem costs {b}×{n}×{m}");
            compare(
                cuda,
                &what,
                mu.view(),
                nu.view(),
                cost.view().into(),
                rho,
                tol,
            );
        }
    }
}

#[test]
fn unbalanced_tiled_solves_match_the_cpu_f64() {
    let Some(cuda) = gpu() else { return };
    tiled_paths::<f64>(&cuda, 1e-9);
}

#[test]
fn unbalanced_tiled_solves_match_the_cpu_f32() {
    let Some(cuda) = gpu() else { return };
    tiled_paths::<f32>(&cuda, 1e-4);
}

/// The unbalanced report's sums on the GPU against the formula written out here in f64:
/// 3 problems × 700 entries (every 9th of `a` empty), f32 and f64, ρ finite and infinite.
#[test]
fn relaxed_sides_match_a_brute_force_sum() {
    let Some(cuda) = gpu() else { return };
    let (batch, per, eps) = (3usize, 700usize, 0.07f64);
    let a: Vec<f64> = (0..batch * per)
        .map(|k| {
            if k % 9 == 4 {
                0.0
            } else {
                0.2 + (0.13 * k as f64).sin().powi(2)
            }
        })
        .collect();
    let pot: Vec<f64> = (0..batch * per)
        .map(|k| 0.3 * (0.21 * k as f64).cos())
        .collect();
    let half: Vec<f64> = (0..batch * per)
        .map(|k| 0.3 * (0.21 * k as f64).cos() + 0.02 * (0.5 * k as f64).sin())
        .collect();
    let brute = |a: &[f64], p: &[f64], h: &[f64], rho: f64| -> Vec<[f64; 4]> {
        (0..batch)
            .map(|b| {
                let mut s = [0.0f64; 4];
                for k in b * per..(b + 1) * per {
                    if a[k] > 0.0 {
                        let q = (p[k] - h[k]) / eps;
                        let d = p[k] - eps * a[k].ln();
                        let r = a[k] * q.exp();
                        // After one more relaxed half-step the marginal is the geometric
                        // blend r^{1−φ}·w^φ of r and the one the condition asks for,
                        // w = a·exp(−d/ρ) (a for ρ = ∞, φ = 1).
                        let next = if rho.is_infinite() {
                            a[k]
                        } else {
                            let phi = rho / (rho + eps);
                            r.powf(1.0 - phi) * (a[k] * (-d / rho).exp()).powf(phi)
                        };
                        s[0] += (next - r).abs();
                        s[1] += r;
                        s[2] += r * d;
                        s[3] += r * q - r + a[k];
                    }
                }
                s
            })
            .collect()
    };
    let close = |what: &str, got: &[logot::RelaxedSide], want: &[[f64; 4]], tol: f64| {
        for (b, (g, w)) in got.iter().zip(want).enumerate() {
            let g = [g.residual, g.mass, g.dual, g.kl];
            for q in 0..4 {
                assert!(
                    (g[q] - w[q]).abs() <= tol * w[q].abs().max(1e-3),
                    "{what} problem {b} term {q}: GPU {:e}, brute force {:e}",
                    g[q],
                    w[q]
                );
            }
        }
    };
    for rho in [0.5, f64::INFINITY] {
        let up = |v: &[f64]| Backend::<f64>::upload(&cuda, v).unwrap();
        let got =
            Backend::<f64>::relaxed_sides(&cuda, batch, &up(&a), &up(&pot), &up(&half), eps, rho)
                .unwrap();
        assert_eq!(got.len(), batch);
        close("f64", &got, &brute(&a, &pot, &half, rho), 1e-12);
        // f32 inputs: the reference sums the same rounded values in f64.
        let r32 = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let (a32, p32, h32) = (r32(&a), r32(&pot), r32(&half));
        let up32 = |v: &[f32]| Backend::<f32>::upload(&cuda, v).unwrap();
        let got = Backend::<f32>::relaxed_sides(
            &cuda,
            batch,
            &up32(&a32),
            &up32(&p32),
            &up32(&h32),
            eps as f32,
            rho,
        )
        .unwrap();
        let wide = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        close(
            "f32",
            &got,
            &brute(&wide(&a32), &wide(&p32), &wide(&h32), rho),
            1e-5,
        );
    }
    // Lengths that do not split into the batch are errors, not launches.
    let up = |v: &[f64]| Backend::<f64>::upload(&cuda, v).unwrap();
    assert!(Backend::<f64>::relaxed_sides(
        &cuda,
        batch,
        &up(&a),
        &up(&pot[1..]),
        &up(&half),
        eps,
        0.5
    )
    .is_err());
}

/// The unbalanced Sinkhorn divergence of two clouds (unequal masses, d = 3) on the GPU, in
/// f64 and f32, against the CPU in f64 (itself checked against a dense reference and
/// GeomLoss's closed form in tests/unbalanced/divergence.rs): value, terms, point gradients.
#[test]
fn unbalanced_divergence_matches_the_cpu() {
    let Some(cuda) = gpu() else { return };
    let (n, m, d) = (300, 257, 3);
    let x = Array2::from_shape_fn((n, d), |(i, c)| (1.7 * i as f64 + 0.9 * c as f64).sin());
    let y = Array2::from_shape_fn((m, d), |(j, c)| {
        0.3 + 0.8 * (1.3 * j as f64 + 0.4 * c as f64).cos()
    });
    let a = Array1::from_shape_fn(n, |i| (0.5 + (0.3 * i as f64).sin().powi(2)) / n as f64);
    let b = Array1::from_shape_fn(m, |j| (1.0 + 0.5 * (0.2 * j as f64).cos()) / m as f64);
    let p = SinkhornParams::new(0.05).max_iters(20_000);
    let div = |be_cpu: bool, f32: bool| -> (f64, [f64; 3], Vec<f64>, Vec<f64>) {
        let conv = logot::DivergenceConvention::Objective;
        let metric = logot::PointMetric::SqEuclidean;
        macro_rules! run {
            ($t:ty, $be:expr) => {{
                let (x, y, a, b) = (
                    x.mapv(|v| v as $t),
                    y.mapv(|v| v as $t),
                    a.mapv(|v| v as $t),
                    b.mapv(|v| v as $t),
                );
                let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
                let problem = Problem::new(a.view(), b.view(), cost)
                    .unwrap()
                    .relaxed(Relaxation::kl(0.5));
                let s = SinkhornSolver::new($be, p.clone())
                    .sinkhorn_divergence(&problem, conv)
                    .unwrap();
                assert!(s.converged(), "{:?}", s.convergence);
                let t = s.terms.row(0);
                (
                    s.value[0].f64(),
                    [t[0].f64(), t[1].f64(), t[2].f64()],
                    s.grad_x.unwrap().iter().map(|v| v.f64()).collect(),
                    s.grad_y.unwrap().iter().map(|v| v.f64()).collect(),
                )
            }};
        }
        match (be_cpu, f32) {
            (true, _) => run!(f64, CpuBackend),
            (false, false) => run!(f64, cuda.clone()),
            (false, true) => run!(f32, cuda.clone()),
        }
    };
    let want = div(true, false);
    assert!(want.0 > 0.0);
    for (f32, tol) in [(false, 1e-9), (true, 2e-4)] {
        let got = div(false, f32);
        let scale = want.1.iter().fold(1.0f64, |s, t| s.max(t.abs()));
        assert!(
            (got.0 - want.0).abs() <= tol * scale,
            "f32 = {f32}: S {} vs CPU {}",
            got.0,
            want.0
        );
        assert_close("terms", &got.1, &want.1, tol);
        let gscale = want.2.iter().fold(0.0f64, |s, v| s.max(v.abs()));
        for (k, (g, w)) in got.2.iter().zip(&want.2).enumerate() {
            assert!(
                (g - w).abs() <= tol * gscale.max(1e-3) * 10.0,
                "f32 = {f32}: grad_x[{k}] {g} vs CPU {w}"
            );
        }
        assert_eq!(got.3.len(), want.3.len());
    }
}
