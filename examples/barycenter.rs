//! Wasserstein barycenters of three shapes on a 64×64 grid, written as PNG plots.
//!
//! ```sh
//! cargo run --release --example barycenter                 # CPU, writes out/barycenter/*.png
//! cargo run --release --example barycenter -- --backend cuda --out some/dir
//! ```
//!
//! The shapes are those of the `bary64` benchmark (a square, a ring 4 < r² < 9 and two
//! disks of radius 2 at (±2, ±2) on linspace(−5, 5)²). The cost is the squared distance on the
//! unit grid, never stored: each Sinkhorn half-step is two 1-D log-convolutions
//! (POT's `convolutional_barycenter2d(..., method="sinkhorn_log")`). The plots: the three
//! inputs with their barycenter for weights (0.3, 0.3, 0.4), and an interpolation strip
//! square → ring → disks computed as one batch of barycenter problems (two rows of panels).

use logot::{
    BarycenterKernels, BarycenterParams, BarycenterProblem, BarycenterSolver, CpuBackend, Error,
    GridCost, Result,
};
use ndarray::{Array2, Array3, ArrayView2, Axis};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

const N: usize = 64;
const EPS: f64 = 0.002;

fn main() -> ExitCode {
    let mut backend = String::from("cpu");
    let mut out = PathBuf::from("out/barycenter");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--backend", Some(v)) => backend = v,
            ("--out", Some(v)) => out = PathBuf::from(v),
            _ => {
                eprintln!("usage: barycenter [--backend cpu|cuda] [--out DIR]");
                return ExitCode::from(2);
            }
        }
    }
    let result = match backend.as_str() {
        // On a rayon worker thread, so the kernels' parallel loops need no thread hand-off.
        "cpu" => rayon::scope(|_| run(CpuBackend, &out)),
        "cuda" => run_cuda(&out),
        other => Err(Error::Unavailable(format!(
            "--backend {other}: expected cpu or cuda"
        ))),
    };
    match result {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("barycenter: error: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(feature = "cuda")]
fn run_cuda(out: &Path) -> Result<Vec<PathBuf>> {
    run(logot::backend::cuda::CudaBackend::new()?, out)
}

#[cfg(not(feature = "cuda"))]
fn run_cuda(_out: &Path) -> Result<Vec<PathBuf>> {
    Err(Error::Unavailable(
        "--backend cuda: this build has no CUDA support; rebuild with `--features cuda`".into(),
    ))
}

/// Everything below is generic over the backend: any `B: BarycenterKernels<f64>` runs it.
fn run<B: BarycenterKernels<f64> + Clone>(backend: B, out: &Path) -> Result<Vec<PathBuf>> {
    let images = shapes(N);
    let inputs = images
        .view()
        .into_shape_with_order((3, N * N))
        .map_err(|e| Error::Unavailable(e.to_string()))?;
    let grid = GridCost::image(N, N)?;
    let solver = BarycenterSolver::new(backend, BarycenterParams::new(EPS));
    let mut files = Vec::new();

    // 1. The inputs and their barycenter with the benchmark's weights.
    let t = Instant::now();
    let w = ndarray::arr1(&[0.3, 0.3, 0.4]);
    let bar = solver
        .solve(&BarycenterProblem::new(inputs, w.view())?, grid.clone())?
        .remove(0);
    println!(
        "barycenter (0.3, 0.3, 0.4): {} iterations, error {:.2e}, converged {}, {:.0} ms",
        bar.iterations,
        bar.error,
        bar.converged,
        t.elapsed().as_secs_f64() * 1e3
    );
    let bar_img = bar
        .histogram
        .into_shape_with_order((N, N))
        .map_err(|e| Error::Unavailable(e.to_string()))?;
    let names = ["square", "ring", "two disks"];
    let mut panels: Vec<(String, ArrayView2<'_, f64>)> = names
        .iter()
        .zip(images.outer_iter())
        .map(|(n, img)| (n.to_string(), img))
        .collect();
    panels.push(("barycenter (0.3, 0.3, 0.4)".into(), bar_img.view()));
    let path = out.join("inputs_and_barycenter.png");
    logot::plot::image_panels(
        &path,
        &panels,
        4,
        &format!("Inputs and their Wasserstein barycenter (64×64 grid, ε = {EPS})"),
        "mass per pixel",
    )?;
    files.push(path);

    // 2. Interpolation square → ring → disks: 9 weight vectors as one batch.
    let steps = 4;
    let mut weights = Vec::new();
    for k in 0..=steps {
        let t = k as f64 / steps as f64;
        weights.push([1.0 - t, t, 0.0]);
    }
    for k in 1..=steps {
        let t = k as f64 / steps as f64;
        weights.push([0.0, 1.0 - t, t]);
    }
    let p = weights.len();
    let w = Array2::from_shape_fn((p, 3), |(i, k)| weights[i][k]);
    let batch: Array3<f64> =
        ndarray::stack(Axis(0), &vec![inputs; p]).map_err(|e| Error::Unavailable(e.to_string()))?;
    let t = Instant::now();
    let strip = solver.solve(&BarycenterProblem::new(batch.view(), w.view())?, grid)?;
    println!(
        "interpolation: {p} barycenters in one batch, {} iterations, max error {:.2e}, {:.0} ms",
        strip.first().map(|b| b.iterations).unwrap_or(0),
        strip.iter().map(|b| b.error).fold(0.0, f64::max),
        t.elapsed().as_secs_f64() * 1e3
    );
    let imgs: Vec<Array2<f64>> = strip
        .iter()
        .map(|b| {
            b.histogram
                .clone()
                .into_shape_with_order((N, N))
                .map_err(|e| Error::Unavailable(e.to_string()))
        })
        .collect::<Result<_>>()?;
    let panels: Vec<(String, ArrayView2<'_, f64>)> = weights
        .iter()
        .zip(&imgs)
        .map(|(w, img)| {
            (
                format!("w = ({:.2}, {:.2}, {:.2})", w[0], w[1], w[2]),
                img.view(),
            )
        })
        .collect();
    let path = out.join("interpolation.png");
    // Two rows (square → ring, then ring → two disks) so each image stays readable.
    logot::plot::image_panels(
        &path,
        &panels,
        steps + 1,
        "Displacement interpolation by barycenters: square → ring → two disks",
        "mass per pixel",
    )?;
    files.push(path);
    Ok(files)
}

/// The three input images on `n×n` pixels at linspace(−5, 5)²: a square (the middle three
/// fifths of each axis), a ring 4 < r² < 9 and two disks of radius 2 at (2, 2) and
/// (−2, −2); each normalised to mass 1 with a floor of 1e-10 (no pixel is empty).
fn shapes(n: usize) -> Array3<f64> {
    let step = 10.0 / (n.max(2) - 1) as f64;
    let xs: Vec<f64> = (0..n)
        .map(|i| {
            if i + 1 == n {
                5.0
            } else {
                -5.0 + i as f64 * step
            }
        })
        .collect();
    // The square's pixels: NumPy's a[n//5 : -n//5].
    let (lo, hi) = (n / 5, n - n.div_ceil(5));
    let mut images = Array3::from_shape_fn((3, n, n), |(k, r, c)| {
        let (x, y) = (xs[c], xs[r]);
        let r2 = x * x + y * y;
        let disk = |cx: f64, cy: f64| (x - cx).powi(2) + (y - cy).powi(2) < 4.0;
        let inside = match k {
            0 => (lo..hi).contains(&r) && (lo..hi).contains(&c),
            1 => r2 > 4.0 && r2 < 9.0,
            _ => disk(2.0, 2.0) || disk(-2.0, -2.0),
        };
        if inside {
            1.0
        } else {
            0.0
        }
    });
    for mut img in images.outer_iter_mut() {
        let s = img.sum();
        img /= s;
        img += 1e-10;
        let s = img.sum();
        img /= s;
    }
    images
}
