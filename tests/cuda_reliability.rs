//! Reliability of the CUDA backend: an impossible allocation is an error (and the backend
//! keeps working after it), a machine without a GPU is refused as unavailable, a bad
//! ordinal is a parameter error, kernel modules load at their first use (from two threads at
//! once too), results are bitwise equal run to run, and the f32
//! stability sweep (tests/common/stability.rs) stays finite and close to f64 on the GPU.
//! Rows L71–L73 of docs/input-checks.md. Each test skips with a printed reason when no GPU
//! is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::gpu;

use logot::backend::cuda::CudaBackend;
use logot::{
    Backend, BarycenterParams, BarycenterProblem, BarycenterSolver, Error, GridCost,
    PointCloudCost, Problem, SinkhornParams, SinkhornSolver,
};
use ndarray::{Array1, Array2, Array3, Axis};

/// Row "L73": a device allocation larger than any GPU is `Error::Cuda` ("out of GPU
/// memory"), one whose byte size overflows names the element count, and the backend
/// still solves afterwards.
#[test]
fn impossible_allocations_are_errors() {
    let Some(gpu) = gpu() else { return };
    if small() {
        // compute-sanitizer reports the intended out-of-memory API error as an error.
        eprintln!("skipping under compute-sanitizer: the intended OOM would be reported");
        return;
    }
    let tib4 = 1usize << 40; // 4 TiB of f32
    match Backend::<f32>::filled(&gpu, tib4, 0.0) {
        Err(e @ Error::Cuda(_)) => {
            let msg = e.to_string();
            assert!(msg.contains("out of GPU memory"), "{msg}");
            // The message names the size that was asked for.
            assert!(
                msg.contains(&tib4.to_string()) && msg.contains("4096.000 GiB"),
                "{msg}"
            );
            println!("4 TiB allocation: {msg}");
        }
        Err(e) => panic!("expected Error::Cuda, got {e:?}"),
        Ok(_) => panic!("a 4 TiB allocation succeeded"),
    }
    let huge = usize::MAX / 2;
    match Backend::<f64>::filled(&gpu, huge, 0.0) {
        Err(e @ Error::Cuda(_)) => {
            let msg = e.to_string();
            assert!(msg.contains(&huge.to_string()), "{msg}");
            println!("overflowing allocation: {msg}");
        }
        Err(e) => panic!("expected Error::Cuda, got {e:?}"),
        Ok(_) => panic!("an allocation of {huge} f64 succeeded"),
    }
    // The context survives: a small solve still works and agrees with the CPU.
    let mu = Array1::from_elem(8, 0.125f32);
    let cost = Array2::from_shape_fn((8, 8), |(i, j)| ((i as f32) - (j as f32)).powi(2) / 64.0);
    let p = Problem::new(mu.view(), mu.view(), cost.view()).unwrap();
    let params = SinkhornParams::new(0.05).fixed_iterations(50);
    let d_gpu = SinkhornSolver::new(gpu, params.clone())
        .solve(&p)
        .unwrap()
        .distance[0];
    let d_cpu = SinkhornSolver::new(logot::CpuBackend, params)
        .solve(&p)
        .unwrap()
        .distance[0];
    assert!((d_gpu - d_cpu).abs() <= 1e-5, "{d_gpu} vs {d_cpu}");
}

/// Row "L72": an ordinal past the number of GPUs is a parameter error naming it.
#[test]
fn a_missing_ordinal_is_a_parameter_error() {
    if gpu().is_none() {
        return;
    }
    match CudaBackend::with_device(4096) {
        Err(e @ Error::Parameter { .. }) => {
            assert!(e.to_string().starts_with("ordinal = 4096"), "{e}")
        }
        Err(e) => panic!("expected Error::Parameter, got {e:?}"),
        Ok(_) => panic!("a backend on GPU 4096"),
    }
}

/// Row "L71": with no visible GPU (`CUDA_VISIBLE_DEVICES=""`, in a child process: the
/// driver reads it once) the backend is `Error::Unavailable`, not a panic.
#[test]
fn no_visible_gpu_is_unavailable() {
    if std::env::var("LOGOT_NO_GPU_CHILD").as_deref() == Ok("1") {
        match CudaBackend::new() {
            Err(e @ Error::Unavailable(_)) => println!("child: {e}"),
            Err(e) => panic!("expected Error::Unavailable, got {e:?}"),
            Ok(_) => panic!("a backend with CUDA_VISIBLE_DEVICES=\"\""),
        }
        return;
    }
    if gpu().is_none() {
        // Without a GPU the parent itself already saw the refusal.
        return;
    }
    if small() {
        // compute-sanitizer's injection makes the device visible to the child anyway.
        eprintln!("skipping under compute-sanitizer: it overrides CUDA_VISIBLE_DEVICES");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "no_visible_gpu_is_unavailable", "--nocapture"])
        .env("CUDA_VISIBLE_DEVICES", "")
        .env("LOGOT_NO_GPU_CHILD", "1")
        .env_remove("LOGOT_REQUIRE_GPU")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("child: "), "{text}");
    assert!(!text.contains("panicked"), "{text}");
}

fn bits32(v: impl IntoIterator<Item = f32>) -> Vec<u32> {
    v.into_iter().map(f32::to_bits).collect()
}

fn bits64(v: impl IntoIterator<Item = f64>) -> Vec<u64> {
    v.into_iter().map(f64::to_bits).collect()
}

/// Histograms `b×n` with rows summing to 1 and a zero bin in each row.
fn histograms(b: usize, n: usize, seed: u64) -> Array2<f64> {
    let mut r = common::uniforms(seed);
    let mut h = Array2::from_shape_fn((b, n), |_| 0.05 + r());
    for (k, mut row) in h.rows_mut().into_iter().enumerate() {
        row[(3 * k + 1) % n] = 0.0;
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    h
}

/// Kernel modules are compiled and loaded at the first launch of one of their kernels: a
/// new backend holds none, a dense solve loads the Sinkhorn module and not the point-cloud,
/// linear-algebra, barycenter, grid or bistochastic ones, and the first point-cloud solve
/// loads the point-cloud module. Two threads that make the first launches of the same
/// module at once (on clones of one backend) both succeed, with bitwise-equal results.
#[test]
fn kernel_modules_load_on_first_use() {
    let Some(gpu) = gpu() else { return };
    assert!(
        gpu.loaded_modules().is_empty(),
        "{:?}",
        gpu.loaded_modules()
    );
    let mu = Array1::from_elem(16, 1.0f32 / 16.0);
    let cost = Array2::from_shape_fn((16, 16), |(i, j)| ((i as f32) - (j as f32)).powi(2) / 256.0);
    let params = SinkhornParams::new(0.05).fixed_iterations(20);
    SinkhornSolver::new(gpu.clone(), params.clone())
        .solve(&Problem::new(mu.view(), mu.view(), cost.view()).unwrap())
        .unwrap();
    let loaded = gpu.loaded_modules();
    println!("after a dense solve: {loaded:?}");
    assert!(loaded.contains(&"sinkstep"), "{loaded:?}");
    for other in ["pointcloud", "linalg", "barycenter", "grid", "bistochastic"] {
        assert!(
            !loaded.contains(&other),
            "{other} loaded by a dense solve: {loaded:?}"
        );
    }
    let x = Array2::from_shape_fn((64, 3), |(i, t)| ((i * 7 + t * 13) % 64) as f32 / 64.0);
    let y = Array2::from_shape_fn((48, 3), |(i, t)| ((i * 5 + t * 11) % 48) as f32 / 48.0);
    let (a, b) = (
        Array1::from_elem(64, 1.0f32 / 64.0),
        Array1::from_elem(48, 1.0f32 / 48.0),
    );
    let cloud_solve = |be: CudaBackend| {
        let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
        SinkhornSolver::new(be, params.clone())
            .solve(&Problem::new(a.view(), b.view(), cost).unwrap())
            .unwrap()
    };
    cloud_solve(gpu.clone());
    assert!(
        gpu.loaded_modules().contains(&"pointcloud"),
        "{:?}",
        gpu.loaded_modules()
    );
    // First launches of the point-cloud module from two threads at once, on a new backend.
    let Some(fresh) = common::gpu::gpu() else {
        return;
    };
    let (r1, r2) = std::thread::scope(|s| {
        let h1 = s.spawn(|| cloud_solve(fresh.clone()));
        let h2 = s.spawn(|| cloud_solve(fresh.clone()));
        (h1.join().unwrap(), h2.join().unwrap())
    });
    assert!(fresh.loaded_modules().contains(&"pointcloud"));
    assert_eq!(bits32(r1.f.iter().copied()), bits32(r2.f.iter().copied()));
    assert_eq!(
        bits32(r1.distance.iter().copied()),
        bits32(r2.distance.iter().copied())
    );
}

/// `LOGOT_SANITIZE=1` (scripts/gpu-sanitize): smaller problems and fewer repeats, so the
/// tests finish under compute-sanitizer while still running every kernel path.
fn small() -> bool {
    std::env::var("LOGOT_SANITIZE").is_ok()
}

/// `LOGOT_SANITIZE=race`: the smallest problems that still take every kernel path
/// (racecheck tracks every shared-memory access and is the slowest tool).
fn tiny() -> bool {
    std::env::var("LOGOT_SANITIZE").as_deref() == Ok("race")
}

fn repeats() -> usize {
    if small() {
        2
    } else {
        4
    }
}

/// `run` `repeats` times, alternating between the two backends (the first run on the
/// first), asserting that every run's key equals the first run's.
fn assert_bitwise_repeats<K: PartialEq>(
    what: &str,
    repeats: usize,
    backends: [&CudaBackend; 2],
    run: impl Fn(CudaBackend) -> K,
) {
    let first = run(backends[0].clone());
    for rep in 1..repeats {
        let key = run(backends[rep % 2].clone());
        assert!(key == first, "{what}: run {rep} differs");
    }
}

/// Run-to-run determinism: the same solve repeated (on one backend, and on a second
/// backend instance) gives bitwise-equal distances and potentials, for the fused small
/// kernel, the tiled large kernel, a batch of per-problem costs, point clouds, f32 and f64,
/// and a grid barycenter.
#[test]
fn repeated_solves_are_bitwise_equal() {
    let Some(gpu) = gpu() else { return };
    let second = common::gpu::gpu().unwrap();
    let mut r = common::uniforms(7);
    let dense =
        |n: usize, m: usize, r: &mut dyn FnMut() -> f64| Array2::from_shape_fn((n, m), |_| r());
    // (label, batch, n, m, per-problem costs)
    let shapes = if tiny() {
        [
            ("small fused", 1, 24, 16, false),
            ("large tiled", 1, 300, 200, false),
            ("per-problem costs", 2, 40, 30, true),
        ]
    } else if small() {
        [
            ("small fused", 2, 40, 30, false),
            ("large tiled", 1, 1500, 1100, false),
            ("per-problem costs", 2, 300, 200, true),
        ]
    } else {
        [
            ("small fused", 8, 64, 64, false),
            ("large tiled", 2, 3000, 2500, false),
            ("per-problem costs", 3, 300, 200, true),
        ]
    };
    let (iters, n_points, grid) = if tiny() {
        (2, 300, 8)
    } else if small() {
        (6, 2000, 16)
    } else {
        (60, 20_000, 32)
    };
    let repeats = repeats();
    for (label, b, n, m, per) in shapes {
        let mu = histograms(b, n, 11);
        let nu = histograms(b, m, 12);
        let shared = dense(n, m, &mut r);
        let costs = Array3::from_shape_fn((b, n, m), |(k, i, j)| shared[[i, j]] * (1.0 + k as f64));
        let params = SinkhornParams::new(0.02).fixed_iterations(iters);
        // f64
        let p64 = if per {
            Problem::new(mu.view(), nu.view(), costs.view()).unwrap()
        } else {
            Problem::new(mu.view(), nu.view(), shared.view()).unwrap()
        };
        assert_bitwise_repeats(&format!("{label} f64"), repeats, [&gpu, &second], |be| {
            let s = SinkhornSolver::new(be, params.clone()).solve(&p64).unwrap();
            (
                bits64(s.distance.iter().copied()),
                bits64(s.f.iter().copied()),
                bits64(s.g.iter().copied()),
            )
        });
        // f32
        let (mu32, nu32) = (mu.mapv(|v| v as f32), nu.mapv(|v| v as f32));
        let (sh32, co32) = (shared.mapv(|v| v as f32), costs.mapv(|v| v as f32));
        let p32 = if per {
            Problem::new(mu32.view(), nu32.view(), co32.view()).unwrap()
        } else {
            Problem::new(mu32.view(), nu32.view(), sh32.view()).unwrap()
        };
        assert_bitwise_repeats(&format!("{label} f32"), repeats, [&gpu, &second], |be| {
            let c = SinkhornSolver::new(be, params.clone())
                .coupling(&p32)
                .unwrap();
            let s = c.result;
            (
                bits32(s.distance.iter().copied()),
                bits32(s.f.iter().copied()),
                bits32(c.plan.iter().copied()),
            )
        });
        println!("{label}: {repeats} runs bitwise equal (f32 and f64)");
    }
    // Point clouds (cost on the fly), f32.
    let n = n_points;
    let x = Array2::from_shape_fn((n, 3), |_| r() as f32);
    let y = Array2::from_shape_fn((n, 3), |_| r() as f32);
    let w = histograms(1, n, 13).mapv(|v| v as f32);
    assert_bitwise_repeats("point clouds", repeats, [&gpu, &second], |be| {
        let cloud = PointCloudCost::new(x.view(), y.view()).unwrap();
        let p = Problem::new(w.view(), w.view(), cloud).unwrap();
        let s = SinkhornSolver::new(be, SinkhornParams::new(0.05).fixed_iterations(iters))
            .solve(&p)
            .unwrap();
        (
            bits32(s.distance.iter().copied()),
            bits32(s.f.iter().copied()),
        )
    });
    println!("point clouds {n}×{n}: {repeats} runs bitwise equal");
    // A grid barycenter (separable LSE convolutions), f32.
    let imgs = Array3::from_shape_fn((3, grid, grid), |(k, i, j)| {
        let (ci, cj) = (
            (2 + 2 * k) as f32 * grid as f32 / 8.0,
            (5 - k) as f32 * grid as f32 / 8.0,
        );
        (-((i as f32 - ci).powi(2) + (j as f32 - cj).powi(2)) / 20.0).exp()
    });
    let mut h = imgs.into_shape_with_order((3, grid * grid)).unwrap();
    for mut row in h.rows_mut() {
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    let wts = Array1::from(vec![0.3f32, 0.3, 0.4]);
    assert_bitwise_repeats("grid barycenter", repeats, [&gpu, &second], |be| {
        let bar = BarycenterSolver::new(be, BarycenterParams::new(0.004).fixed_iterations(iters))
            .solve(
                &BarycenterProblem::new(h.view(), wts.view()).unwrap(),
                GridCost::image(grid, grid).unwrap(),
            )
            .unwrap()
            .remove(0);
        bits32(bar.histogram.iter().copied())
    });
    println!("grid barycenter {grid}×{grid}: {repeats} runs bitwise equal");
    let _ = h.index_axis(Axis(0), 0);
}

/// The f32 stability sweep on the GPU: every result finite (−∞ potentials exactly on the
/// zero-mass bins) and as close to the CPU's f64 as the CPU's own f32 is.
#[test]
fn f32_stability_sweep_on_the_gpu() {
    let Some(gpu) = gpu() else { return };
    let rows = if small() {
        common::stability::sweep_eps(&gpu, &[1.0, 1e-2, 1e-4])
    } else {
        common::stability::sweep(&gpu)
    };
    common::stability::print("cuda", &rows);
    for r in &rows {
        assert!(r.finite, "{r:?}");
        assert!(r.err <= 1e-5, "{r:?}");
        assert!(r.pot_err <= 0.1, "{r:?}");
    }
}

/// Run-to-run determinism of the bistochastic (forward and backward), implicit-gradient
/// (wasserstein_gradients: plan, adjoint CG) and linear-algebra kernels (GEMM, X·Xᵀ,
/// Newton–Schulz, svd3): bitwise-equal outputs over repeated calls, f32.
#[test]
fn bistochastic_and_linalg_kernels_are_deterministic() {
    use logot::grad::{BistochasticParams, BistochasticSolver, CgParams};
    use logot::linalg::{matmul, newton_schulz, svd3_batch, xxt, NewtonSchulzParams};
    let Some(gpu) = gpu() else { return };
    let mut r = common::uniforms(21);
    let (b, n) = if small() { (64, 8) } else { (4096, 16) };
    let x = Array3::from_shape_fn((b, n, n), |_| (4.0 * r()) as f32);
    let g = Array3::from_shape_fn((b, n, n), |_| (2.0 * r() - 1.0) as f32);
    let proj = BistochasticSolver::new(gpu.clone(), BistochasticParams::default());
    let size = if small() { 96 } else { 700 };
    let a = Array2::from_shape_fn((size, size + 13), |_| (2.0 * r() - 1.0) as f32);
    let bm = Array2::from_shape_fn((size + 13, size - 5), |_| (2.0 * r() - 1.0) as f32);
    let pts = Array3::from_shape_fn((if small() { 16 } else { 512 }, 200, 3), |_| r() as f32);
    let mu = histograms(2, 64, 31).mapv(|v| v as f32);
    let nu = histograms(2, 48, 32).mapv(|v| v as f32);
    let cost = Array2::from_shape_fn((64, 48), |_| r() as f32);
    let mut first: Option<Vec<Vec<u32>>> = None;
    for rep in 0..repeats() {
        let fwd = proj.forward(x.view()).unwrap();
        let bwd = proj
            .backward(fwd.r.view(), g.view(), &CgParams::default())
            .unwrap();
        let svd = svd3_batch(&gpu, pts.view()).unwrap();
        let grads =
            SinkhornSolver::new(gpu.clone(), SinkhornParams::new(0.05).fixed_iterations(30))
                .wasserstein_gradients(
                    &Problem::new(mu.view(), nu.view(), cost.view()).unwrap(),
                    &CgParams::default(),
                )
                .unwrap();
        let outs = vec![
            bits32(fwd.r.iter().copied()),
            bits32(bwd.dx.iter().copied()),
            bits32(matmul(&gpu, a.view(), bm.view()).unwrap().iter().copied()),
            bits32(xxt(&gpu, a.view()).unwrap().iter().copied()),
            bits32(
                newton_schulz(&gpu, a.view(), &NewtonSchulzParams::default())
                    .unwrap()
                    .iter()
                    .copied(),
            ),
            bits32(svd.s.iter().copied()),
            bits32(svd.u.iter().copied()),
            bits32(grads.cost.iter().copied()),
        ];
        match &first {
            None => first = Some(outs),
            Some(f) => {
                for (k, name) in [
                    "bistochastic R",
                    "bistochastic dX",
                    "gemm",
                    "xxt",
                    "newton-schulz",
                    "svd3 S",
                    "svd3 U",
                ]
                .iter()
                .enumerate()
                {
                    assert!(f[k] == outs[k], "{name}: run {rep} differs");
                }
            }
        }
    }
    println!(
        "bistochastic, gemm, xxt, newton-schulz, svd3: {} runs bitwise equal",
        repeats()
    );
}
