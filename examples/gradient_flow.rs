//! A Sinkhorn-divergence gradient flow: a cloud `x` of `n` points flows to a fixed target
//! cloud `y` along `x ← x − lr·n·∇_x S_ε(x, y)` (the gradient scaled by the number of
//! points, as in GeomLoss's tutorial, so a point moves by about `2·lr` of its way to its
//! transport target per step), with the exact point gradients of
//! [`SinkhornSolver::sinkhorn_divergence`] (squared Euclidean cost, uniform weights).
//!
//! ```sh
//! cargo run --release --example gradient_flow                   # d = 2: PNG frames in out/gradient_flow/
//! cargo run --release --example gradient_flow -- --dim 64       # prints S_ε going down
//! cargo run --release --features cuda --example gradient_flow -- --backend cuda --dim 64 --f32
//! ```
//!
//! The clouds (seeded): `x` a Gaussian blob of standard deviation 0.3 around `−1.5·e₁`, `y`
//! a sphere of radius 1 around `1.5·e₁` (a ring at d = 2) blurred by 0.05. Every step
//! prints `S_ε`; at d = 2 every `--every`-th step is drawn (`frame_NNN.png`: the target,
//! the starting cloud and the flowing one, on the same axes in every frame) and `loss.png`
//! plots `S_ε` against the step. Options: `--dim D`, `--n N` (points per cloud), `--steps K`,
//! `--lr LR`, `--eps E` (default `0.01·d`), `--seed S`, `--backend cpu|cuda`, `--f32`,
//! `--precision exact|tf32x3|tf32|f16x2|f16` (the GPU's cross term of f32 clouds above 16
//! dimensions; f16x2 by default), `--out DIR`, `--every K`.

use logot::plot::{Axes, Scale};
use logot::{
    CpuBackend, CrossPrecision, DivergenceConvention, Error, GradKernels, PointCloudCost,
    PointCloudKernels, Problem, Real, Result, SinkhornParams, SinkhornSolver,
};
use ndarray::{Array1, Array2, ArrayView2};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The flow's settings (command-line options).
#[derive(Clone, Debug)]
pub struct Settings {
    pub dim: usize,
    pub n: usize,
    pub steps: usize,
    pub lr: f64,
    pub eps: Option<f64>,
    pub seed: u64,
    pub backend: String,
    pub f32: bool,
    pub precision: CrossPrecision,
    pub out: PathBuf,
    pub every: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            dim: 2,
            n: 200,
            steps: 25,
            lr: 0.1,
            eps: None,
            seed: 7,
            backend: "cpu".into(),
            f32: false,
            precision: CrossPrecision::default(),
            out: PathBuf::from("out/gradient_flow"),
            every: 5,
        }
    }
}

impl Settings {
    /// ε: `--eps`, else `0.01·d` (the mean cost grows with d).
    pub fn eps(&self) -> f64 {
        self.eps.unwrap_or(0.01 * self.dim as f64)
    }

    fn parse(args: impl Iterator<Item = String>) -> std::result::Result<Settings, String> {
        let mut s = Settings::default();
        let mut args = args.peekable();
        while let Some(a) = args.next() {
            if a == "--f32" {
                s.f32 = true;
                continue;
            }
            let v = args.next().ok_or(format!("{a} needs a value"))?;
            let bad = |e: &dyn std::fmt::Display| format!("{a} {v}: {e}");
            match a.as_str() {
                "--dim" => s.dim = v.parse().map_err(|e| bad(&e))?,
                "--n" => s.n = v.parse().map_err(|e| bad(&e))?,
                "--steps" => s.steps = v.parse().map_err(|e| bad(&e))?,
                "--lr" => s.lr = v.parse().map_err(|e| bad(&e))?,
                "--eps" => s.eps = Some(v.parse().map_err(|e| bad(&e))?),
                "--seed" => s.seed = v.parse().map_err(|e| bad(&e))?,
                "--every" => s.every = v.parse().map_err(|e| bad(&e))?,
                "--backend" => s.backend = v,
                "--out" => s.out = PathBuf::from(v),
                "--precision" => {
                    s.precision = CrossPrecision::from_name(&v)
                        .ok_or_else(|| bad(&"expected exact, tf32x3, tf32, f16x2 or f16"))?
                }
                _ => return Err(format!("unknown option {a}")),
            }
        }
        if s.dim == 0 || s.n < 2 || s.every == 0 {
            return Err("--dim and --every must be ≥ 1 and --n ≥ 2".into());
        }
        Ok(s)
    }
}

/// The seeded clouds, `n×d` each: `x` a Gaussian blob (σ = 0.3) around `−1.5·e₁`, `y` the
/// sphere of radius 1 around `1.5·e₁` blurred by 0.05.
pub fn clouds(dim: usize, n: usize, seed: u64) -> (Array2<f64>, Array2<f64>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut normal = move || rng.sample::<f64, _>(StandardNormal);
    let mut x = Array2::from_shape_simple_fn((n, dim), || 0.3 * normal());
    x.column_mut(0).mapv_inplace(|v| v - 1.5);
    let mut y = Array2::zeros((n, dim));
    for mut p in y.rows_mut() {
        let g = Array1::from_shape_simple_fn(dim, &mut normal);
        let norm = g.dot(&g).sqrt().max(1e-12);
        p.assign(&(&g / norm));
        p.mapv_inplace(|v| v + 0.05 * normal());
        p[0] += 1.5;
    }
    (x, y)
}

/// Run `steps` steps of `x ← x − lr·n·∇_x S_ε(x, y)` from `x` (uniform weights), calling
/// `each(k, S_ε(x_k, y), x_k)` at every iterate `k = 0..=steps`; returns the `S_ε(x_k, y)`.
/// An error where a solve does not converge (a flow on inexact gradients is not this one).
pub fn flow<T: Real, B: PointCloudKernels<T> + GradKernels<T>>(
    solver: &SinkhornSolver<B>,
    x: &mut Array2<T>,
    y: ArrayView2<'_, T>,
    (lr, steps): (f64, usize),
    precision: CrossPrecision,
    mut each: impl FnMut(usize, f64, ArrayView2<'_, T>) -> Result<()>,
) -> Result<Vec<f64>> {
    let (n, m) = (x.nrows(), y.nrows());
    let (mu, nu) = (
        Array1::from_elem(n, T::of(1.0 / n as f64)),
        Array1::from_elem(m, T::of(1.0 / m as f64)),
    );
    let mut values = Vec::with_capacity(steps + 1);
    for k in 0..=steps {
        let clouds = PointCloudCost::new(x.view(), y)?.with_precision(precision);
        let problem = Problem::new(mu.view(), nu.view(), clouds)?;
        let s = solver.sinkhorn_divergence(&problem, DivergenceConvention::Objective)?;
        if !s.converged() {
            return Err(Error::Numerical(format!(
                "step {k}: the divergence did not converge ({:?})",
                s.convergence.map(|c| c.marginal_error)
            )));
        }
        let value = s.value[0].f64();
        each(k, value, x.view())?;
        values.push(value);
        if k < steps {
            let grad = s
                .grad_x
                .ok_or_else(|| Error::Numerical("no point gradient".into()))?;
            let scale = lr * n as f64;
            ndarray::Zip::from(&mut *x)
                .and(grad.index_axis(ndarray::Axis(0), 0))
                .for_each(|p, &g| *p = T::of(p.f64() - scale * g.f64()));
        }
    }
    Ok(values)
}

/// The solver of the flow: ε-scaling from the clouds' squared diameter down to ε, then up
/// to 20000 iterations to a marginal error of 1e-6 of the mass (the gradients' accuracy;
/// 1e-4 in f32, whose rounding of costs up to ~10³·ε leaves about 1e-5).
pub fn solver<T: Real, B>(
    backend: B,
    x: &Array2<T>,
    y: &Array2<T>,
    eps: f64,
) -> Result<SinkhornSolver<B>> {
    let scaling = PointCloudCost::new(x.view(), y.view())?.eps_scaling();
    let params = SinkhornParams::new(eps)
        .eps_scaling(scaling)
        .max_iters(20_000)
        .tol((10.0 * T::DEFAULT_TOL).max(1e-6));
    Ok(SinkhornSolver::new(backend, params))
}

/// The flow of `s` in precision `T` on `backend`, printing each step (and drawing at d = 2);
/// returns the files written.
fn run<T: Real, B: PointCloudKernels<T> + GradKernels<T>>(
    backend: B,
    s: &Settings,
) -> Result<Vec<PathBuf>> {
    let (x0, y) = clouds(s.dim, s.n, s.seed);
    let (x0, y) = (x0.mapv(T::of), y.mapv(T::of));
    let mut x = x0.clone();
    let eps = s.eps();
    // ε-scaling from the starting clouds' squared diameter (the flow only shrinks it).
    let solver = solver(backend, &x0, &y, eps)?;
    println!(
        "d = {}, n = m = {}, ε = {eps}, lr = {}, {} steps, {} on the {} backend",
        s.dim,
        s.n,
        s.lr,
        s.steps,
        T::NAME,
        s.backend
    );
    let mut files = Vec::new();
    let start = Instant::now();
    let values = flow(
        &solver,
        &mut x,
        y.view(),
        (s.lr, s.steps),
        s.precision,
        |k, value, xk| {
            println!(
                "step {k:3}  S_ε = {value:.6e}  ({:.1} s)",
                start.elapsed().as_secs_f64()
            );
            if s.dim == 2 && (k % s.every == 0 || k == s.steps) {
                let path = s.out.join(format!("frame_{k:03}.png"));
                // The start beside the current step, so that neither hides the other; the
                // empty series keep each cloud's colour and put all three in the legend.
                let none = Array2::<T>::zeros((0, 2));
                let panels = vec![
                    (
                        "start and target".to_string(),
                        vec![
                            ("target y", y.view()),
                            ("start", x0.view()),
                            ("x", none.view()),
                        ],
                    ),
                    (
                        format!("step {k}: S_ε = {value:.3e}"),
                        vec![("target y", y.view()), ("start", none.view()), ("x", xk)],
                    ),
                ];
                let title = format!("Sinkhorn flow, ε = {eps}, lr = {}", s.lr);
                logot::plot::scatter(&path, &panels, 2, &title)?;
                files.push(path);
            }
            Ok(())
        },
    )?;
    if s.dim == 2 {
        let path = s.out.join("loss.png");
        let steps: Vec<f64> = (0..values.len()).map(|k| k as f64).collect();
        let axes = Axes::new("step", "S_ε(x, y)")
            .x_scale(Scale::Integer)
            .y_scale(Scale::Log);
        let v = Array1::from(values.clone());
        logot::plot::lines(
            &path,
            &steps,
            &[("S_ε", v.view())],
            &[],
            "The divergence along the flow",
            axes,
        )?;
        files.push(path);
    }
    println!(
        "S_ε went from {:.4e} to {:.4e} in {} steps",
        values[0],
        values[values.len() - 1],
        s.steps
    );
    Ok(files)
}

#[cfg(feature = "cuda")]
fn run_cuda(s: &Settings) -> Result<Vec<PathBuf>> {
    let gpu = logot::CudaBackend::new()?;
    if s.f32 {
        run::<f32, _>(gpu, s)
    } else {
        run::<f64, _>(gpu, s)
    }
}

#[cfg(not(feature = "cuda"))]
fn run_cuda(_s: &Settings) -> Result<Vec<PathBuf>> {
    Err(Error::Unavailable(
        "--backend cuda: this build has no CUDA support; rebuild with `--features cuda`".into(),
    ))
}

fn main() -> ExitCode {
    let usage = "usage: gradient_flow [--dim D] [--n N] [--steps K] [--lr LR] [--eps E] [--seed S] \
                 [--backend cpu|cuda] [--f32] [--precision exact|tf32x3|tf32|f16x2|f16] [--out DIR] [--every K]";
    let outcome = Settings::parse(std::env::args().skip(1))
        .map_err(|e| format!("{e}\n{usage}"))
        .and_then(|s| {
            let files = match (s.backend.as_str(), s.f32) {
                // On a rayon worker thread: the kernels' parallel loops need no hand-off.
                ("cpu", false) => rayon::scope(|_| run::<f64, _>(CpuBackend, &s)),
                ("cpu", true) => rayon::scope(|_| run::<f32, _>(CpuBackend, &s)),
                ("cuda", _) => run_cuda(&s),
                (other, _) => Err(Error::Unavailable(format!(
                    "--backend {other}: expected cpu or cuda"
                ))),
            };
            files.map_err(|e| format!("error: {e}"))
        });
    outcome.map_or_else(
        |e| {
            eprintln!("gradient_flow: {e}");
            ExitCode::from(2)
        },
        |files| {
            files.iter().for_each(|f| println!("wrote {}", f.display()));
            ExitCode::SUCCESS
        },
    )
}
