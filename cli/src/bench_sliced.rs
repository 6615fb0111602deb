//! `logot bench --problem sliced`: the sliced Wasserstein distance `SW_2` of two clouds of
//! n = 10⁶ points in dimension 3 (uniform in `[0, 1]³` and in `[0.1, 0.9]³`, seeds 1 and 2),
//! uniform weights, over 256 directions drawn as POT draws them from seed 0, by
//! [`logot::exact::sliced_wasserstein_distance`] on the CPU (rayon over directions) or
//! `CudaBackend::sliced_wasserstein_distance` on the GPU. `--points`, `--dim` and
//! `--projections` change the sizes; `--x`/`--y` (n×d .npy) give the clouds. Each timed run
//! starts from the clouds on the host and ends with the distance and every direction's
//! `W_2^2` there.

use crate::bench::{time_runs_for, BenchArgs};
use crate::npy::Dtype;
use crate::{input, npy, BackendChoice, Json};
use logot::exact::{Projections, Sliced};
use logot::{Real, Result};
use logot_cli::problems::uniform_cloud;
use ndarray::{Array2, ArrayView2, Ix2};
use serde_json::json;

/// sliced's canonical size: points per cloud, dimension, directions.
pub const SLICED_N: usize = 1_000_000;
pub const SLICED_D: usize = 3;
pub const SLICED_L: usize = 256;
/// The exponent of the ground cost.
const P: f64 = 2.0;

/// Runs sliced in `dtype` on `--backend`.
pub fn bench(dtype: Dtype, a: &BenchArgs) -> Json {
    match (dtype, a.backend) {
        (Dtype::F32, BackendChoice::Cpu) => run::<f32>(a, |x, y, d| {
            logot::exact::sliced_wasserstein_distance(x, y, None, None, d, P)
        }),
        (Dtype::F64, BackendChoice::Cpu) => run::<f64>(a, |x, y, d| {
            logot::exact::sliced_wasserstein_distance(x, y, None, None, d, P)
        }),
        #[cfg(feature = "cuda")]
        (Dtype::F32, BackendChoice::Cuda) => {
            let be = crate::cuda_backend()?;
            run::<f32>(a, |x, y, d| {
                be.sliced_wasserstein_distance(x, y, None, None, d, P)
            })
        }
        #[cfg(feature = "cuda")]
        (Dtype::F64, BackendChoice::Cuda) => {
            let be = crate::cuda_backend()?;
            run::<f64>(a, |x, y, d| {
                be.sliced_wasserstein_distance(x, y, None, None, d, P)
            })
        }
        #[cfg(not(feature = "cuda"))]
        (_, BackendChoice::Cuda) => Err(crate::no_cuda()),
    }
}

/// The clouds: `--x`/`--y` (n×d .npy) when given, else uniform in `[0, 1]^d` (seed 1) and
/// in `[0.1, 0.9]^d` (seed 2).
fn clouds<T: Real>(a: &BenchArgs) -> Result<(Array2<T>, Array2<T>)> {
    if let (Some(x), Some(y)) = (&a.x, &a.y) {
        let x = npy::fixed::<T, Ix2>(input::read::<T>(x, "--x", &[2])?, "--x")?;
        let y = npy::fixed::<T, Ix2>(input::read::<T>(y, "--y", &[2])?, "--y")?;
        return Ok((x, y));
    }
    let n = a.points.unwrap_or(SLICED_N);
    let d = a.dim.unwrap_or(SLICED_D);
    let x = uniform_cloud::<T>(n, d, 1);
    let y = uniform_cloud::<T>(n, d, 2).mapv(|v| T::of(0.1 + 0.8 * v.f64()));
    Ok((x, y))
}

fn run<T: Real>(
    a: &BenchArgs,
    solve: impl Fn(ArrayView2<'_, T>, ArrayView2<'_, T>, &Projections<'_>) -> Result<Sliced>,
) -> Json {
    let (x, y) = clouds::<T>(a)?;
    let (n, d) = x.dim();
    let count = a.projections.unwrap_or(SLICED_L);
    let dirs = Projections::Random { count, seed: 0 };
    let mut last = None;
    let (median, min, all) = time_runs_for(a, || {
        last = Some(solve(x.view(), y.view(), &dirs)?);
        Ok(())
    })?;
    let last = last.expect("at least one run");
    Ok(json!({
        "problem": "sliced",
        "backend": a.backend.name(),
        "dtype": T::NAME,
        "points": n,
        "target_points": y.nrows(),
        "dim": d,
        "projections": count,
        "p": P,
        "seed": 0,
        "ms": median,
        "min_ms": min,
        "runs_ms": all,
        "distance": last.distance,
    }))
}
