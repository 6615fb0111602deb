//! Gradients of unbalanced (KL-relaxed) OT on the CUDA backend against the CPU backend in
//! f64 (the reference, checked against central finite differences in
//! tests/unbalanced/grad.rs), for `Relaxation::kl` and `Relaxation::kl_each` with either
//! side exact: `implicit_gradients` (∂L/∂C, ∂L/∂μ, ∂L/∂ν of `L = ⟨W, P⟩`) and
//! `envelope_gradients` (the dual value, ∂/∂C = P, ∂/∂μ, ∂/∂ν) on batches of B = 3 with a
//! shared cost and with per-problem costs (unequal masses, and a zero-mass bin), and
//! `point_gradients` (∂/∂X, ∂/∂Y) of point clouds in d = 2, in f64 and f32. Each test skips
//! with a printed reason when no GPU is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::gpu;
use common::relaxed::Relaxed;
use common::Lcg;

use logot::backend::cuda::CudaBackend;
use logot::grad::CgParams;
use logot::{
    CpuBackend, GradKernels, PointCloudCost, PointCloudKernels, Problem, Real, Relaxation,
    SinkhornParams, SinkhornSolver,
};
use ndarray::{Array2, Array3, Axis};

/// The relaxations checked: both sides (POT's scalar `reg_m`), and one side exact each way.
fn relaxations() -> [(&'static str, Relaxation); 3] {
    [
        ("kl(0.5)", Relaxation::kl(0.5)),
        ("kl_each(0.3, inf)", Relaxation::kl_each(0.3, f64::INFINITY)),
        ("kl_each(inf, 0.7)", Relaxation::kl_each(f64::INFINITY, 0.7)),
    ]
}

const EPS: f64 = 0.05;

/// Largest `|a − b|` relative to `max |b|` (entries where the reference is `−∞` must be
/// `−∞` too); every device entry must be a number or that `−∞`.
fn rel<T: Real>(what: &str, a: &[T], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    let scale = b
        .iter()
        .filter(|v| v.is_finite())
        .fold(1e-300f64, |s, v| s.max(v.abs()));
    a.iter()
        .zip(b)
        .enumerate()
        .map(|(k, (x, &y))| {
            let x = x.f64();
            if y == f64::NEG_INFINITY {
                assert_eq!(x, y, "{what}[{k}]");
                return 0.0;
            }
            assert!(x.is_finite(), "{what}[{k}] = {x} (CPU {y})");
            (x - y).abs() / scale
        })
        .fold(0.0, f64::max)
}

/// The f64 solves' marginal tolerance (relative to the mass).
const TOL_F64: f64 = 1e-12;

/// The allowed relative error of a device result in `T` against the CPU in f64:
/// `10·(n + m)/ε` times the precision's floor, its machine epsilon (f32: the potentials'
/// rounding, amplified by `1/ε` in the plan's exponent and summed over `n + m` terms) or the
/// solves' tolerance (f64, above its rounding).
fn tolerance<T: Real>(n: usize, m: usize) -> f64 {
    let floor = if T::NAME == "float64" {
        TOL_F64
    } else {
        T::epsilon().f64()
    };
    10.0 * (n + m) as f64 / EPS * floor
}

fn params<T: Real>() -> SinkhornParams {
    SinkhornParams::new(EPS)
        .tol(if T::NAME == "float64" { TOL_F64 } else { 1e-5 })
        .max_iters(50_000)
}

/// `B` rows of positive weights, row `k` of total mass `mass(k)`.
fn batch_weights(
    g: &mut Lcg,
    (b, len): (usize, usize),
    mass: impl Fn(usize) -> f64,
) -> Array2<f64> {
    let mut w = Array2::from_shape_vec((b, len), g.vec(b * len, 0.2, 1.2)).unwrap();
    for (k, mut row) in w.rows_mut().into_iter().enumerate() {
        let s = row.sum();
        row.mapv_inplace(|v| v * mass(k) / s);
    }
    w
}

/// `B` problems `n×m` of unequal masses (μ_b of mass 0.6 + 0.3b, ν_b of mass 1.1 − 0.2b;
/// with `zero_bin`, bin 3 of μ_1 empty), costs `C_b = (x_i − y_j)²·(1 + 0.3b)` (`C_0` is
/// the shared cost), and the upstream `W ~ U(−1, 1)`, `B×n×m`.
fn dense_data(
    seed: u64,
    (b, n, m): (usize, usize, usize),
    zero_bin: bool,
) -> (Array2<f64>, Array2<f64>, Array3<f64>, Array3<f64>) {
    let mut g = Lcg(seed);
    let mut mu = batch_weights(&mut g, (b, n), |k| 0.6 + 0.3 * k as f64);
    let nu = batch_weights(&mut g, (b, m), |k| 1.1 - 0.2 * k as f64);
    if zero_bin {
        mu[[1, 4]] += mu[[1, 3]];
        mu[[1, 3]] = 0.0;
    }
    let (xs, ys) = (g.vec(n, 0.0, 1.0), g.vec(m, 0.0, 1.0));
    let costs = Array3::from_shape_fn((b, n, m), |(k, i, j)| {
        (xs[i] - ys[j]).powi(2) * (1.0 + 0.3 * k as f64)
    });
    let w = Array3::from_shape_vec((b, n, m), g.vec(b * n * m, -1.0, 1.0)).unwrap();
    (mu, nu, costs, w)
}

fn flat<T: Real, D: ndarray::Dimension>(a: &ndarray::Array<T, D>) -> Vec<T> {
    a.iter().copied().collect()
}

/// A batch against `C_0` for every problem (`shared`) or against its own `C_b`.
fn problem<'a, T: Real>(
    mu: &'a Array2<T>,
    nu: &'a Array2<T>,
    costs: &'a Array3<T>,
    shared: bool,
) -> Problem<'a, T> {
    if shared {
        Problem::new(mu.view(), nu.view(), costs.index_axis(Axis(0), 0)).unwrap()
    } else {
        Problem::new(mu.view(), nu.view(), costs.view()).unwrap()
    }
}

/// `implicit_gradients` and `envelope_gradients` of one batch on the device in `T` against
/// the CPU in f64.
fn dense_gradients_match<T: Real>(
    gpu: &CudaBackend,
    what: &str,
    relaxation: Relaxation,
    (mu, nu, costs, w): (&Array2<f64>, &Array2<f64>, &Array3<f64>, &Array3<f64>),
    shared: bool,
) where
    CudaBackend: GradKernels<T>,
{
    let (n, m) = (mu.ncols(), nu.ncols());
    let what = format!("{} {what}", T::NAME);
    let tol = tolerance::<T>(n, m);
    let cpu = Relaxed::new(SinkhornSolver::new(CpuBackend, params::<f64>()), relaxation);
    let dev = Relaxed::new(SinkhornSolver::new(gpu.clone(), params::<T>()), relaxation);
    let pc = problem(mu, nu, costs, shared);
    let (mu_t, nu_t, c_t) = (mu.mapv(T::of), nu.mapv(T::of), costs.mapv(T::of));
    let pd = problem(&mu_t, &nu_t, &c_t, shared);
    let w_t = w.mapv(T::of);

    // Implicit gradients of L = ⟨W, P⟩.
    let c = cpu
        .implicit_gradients(&pc, |_| w.clone(), &CgParams::default().tol(1e-13))
        .unwrap();
    let d = dev
        .implicit_gradients(&pd, |_| w_t.clone(), &CgParams::default())
        .unwrap();
    assert!(
        c.result.convergence.converged && c.cg.all_converged(),
        "{what}: CPU"
    );
    assert!(
        d.result.convergence.converged,
        "{what}: {:?}",
        d.result.convergence.problems
    );
    assert!(d.cg.all_converged(), "{what}: {:?}", d.cg.problems);
    for (part, a, b) in [
        ("implicit ∂L/∂C", flat(&d.cost), flat(&c.cost)),
        ("implicit ∂L/∂μ", flat(&d.mu), flat(&c.mu)),
        ("implicit ∂L/∂ν", flat(&d.nu), flat(&c.nu)),
    ] {
        let e = rel(&format!("{what} {part}"), &a, &b);
        eprintln!("{what} {part}: {e:e} (tolerance {tol:e})");
        assert!(e <= tol, "{what} {part}: {e:e} > {tol:e}");
    }

    // Envelope gradients of the unbalanced objective (its dual value).
    let c = cpu.envelope_gradients(&pc).unwrap();
    let d = dev.envelope_gradients(&pd).unwrap();
    assert!(d.result.convergence.converged, "{what}: envelope");
    for (part, a, b) in [
        ("envelope value", flat(&d.value), flat(&c.value)),
        ("envelope ∂/∂C", flat(&d.cost), flat(&c.cost)),
        ("envelope ∂/∂μ", flat(&d.mu), flat(&c.mu)),
        ("envelope ∂/∂ν", flat(&d.nu), flat(&c.nu)),
    ] {
        let e = rel(&format!("{what} {part}"), &a, &b);
        eprintln!("{what} {part}: {e:e} (tolerance {tol:e})");
        assert!(e <= tol, "{what} {part}: {e:e} > {tol:e}");
    }
}

fn dense_cases<T: Real>(gpu: &CudaBackend)
where
    CudaBackend: GradKernels<T>,
{
    for (name, relaxation) in relaxations() {
        for zero_bin in [false, true] {
            let (mu, nu, costs, w) = dense_data(11 + zero_bin as u64, (3, 40, 30), zero_bin);
            for shared in [true, false] {
                dense_gradients_match::<T>(
                    gpu,
                    &format!("{name} zero_bin={zero_bin} shared={shared}"),
                    relaxation,
                    (&mu, &nu, &costs, &w),
                    shared,
                );
            }
        }
    }
}

#[test]
fn cuda_unbalanced_dense_gradients_match_cpu_f64() {
    let Some(gpu) = gpu() else { return };
    dense_cases::<f64>(&gpu);
}

#[test]
fn cuda_unbalanced_dense_gradients_match_cpu_f32() {
    let Some(gpu) = gpu() else { return };
    dense_cases::<f32>(&gpu);
}

/// `point_gradients` of a batch of B = 3 weight pairs (unequal masses) on one cloud pair in
/// d = 2 on the device in `T` against the CPU in f64: the value, ∂/∂X and ∂/∂Y.
fn point_cases<T: Real>(gpu: &CudaBackend)
where
    CudaBackend: PointCloudKernels<T> + GradKernels<T>,
{
    let (b, n, m, d) = (3, 50, 37, 2);
    let tol = tolerance::<T>(n, m);
    for (name, relaxation) in relaxations() {
        let mut g = Lcg(31);
        let x = Array2::from_shape_vec((n, d), g.vec(n * d, 0.0, 1.0)).unwrap();
        let y = Array2::from_shape_vec((m, d), g.vec(m * d, 0.2, 1.2)).unwrap();
        let mu = batch_weights(&mut g, (b, n), |k| 0.7 + 0.2 * k as f64);
        let nu = batch_weights(&mut g, (b, m), |k| 1.2 - 0.3 * k as f64);
        let what = format!("{} points {name}", T::NAME);
        let cpu = Relaxed::new(SinkhornSolver::new(CpuBackend, params::<f64>()), relaxation);
        let dev = Relaxed::new(SinkhornSolver::new(gpu.clone(), params::<T>()), relaxation);
        let c = cpu
            .point_gradients(
                &Problem::new(
                    mu.view(),
                    nu.view(),
                    PointCloudCost::new(x.view(), y.view()).unwrap(),
                )
                .unwrap(),
            )
            .unwrap();
        let (mu_t, nu_t, x_t, y_t) = (mu.mapv(T::of), nu.mapv(T::of), x.mapv(T::of), y.mapv(T::of));
        let p = Problem::new(
            mu_t.view(),
            nu_t.view(),
            PointCloudCost::new(x_t.view(), y_t.view()).unwrap(),
        )
        .unwrap();
        let r = dev.point_gradients(&p).unwrap();
        assert!(c.result.convergence.converged, "{what}: CPU");
        assert!(
            r.result.convergence.converged,
            "{what}: {:?}",
            r.result.convergence.problems
        );
        for (part, a, b) in [
            ("value", flat(&r.value), flat(&c.value)),
            ("∂/∂X", flat(&r.x), flat(&c.x)),
            ("∂/∂Y", flat(&r.y), flat(&c.y)),
        ] {
            let e = rel(&format!("{what} {part}"), &a, &b);
            eprintln!("{what} {part}: {e:e} (tolerance {tol:e})");
            assert!(e <= tol, "{what} {part}: {e:e} > {tol:e}");
        }
    }
}

#[test]
fn cuda_unbalanced_point_gradients_match_cpu_f64() {
    let Some(gpu) = gpu() else { return };
    point_cases::<f64>(&gpu);
}

#[test]
fn cuda_unbalanced_point_gradients_match_cpu_f32() {
    let Some(gpu) = gpu() else { return };
    point_cases::<f32>(&gpu);
}
