//! `logot bench --problem emdbatch`: exact minibatch OT, B pairs of point clouds of n
//! points in dimension d with uniform weights and the squared Euclidean cost (the call
//! flow-matching training makes on every minibatch), solved by
//! [`logot::exact::emd_points_batch`] on the CPU (rayon over problems) or by
//! `CudaBackend::emd_points_batch` on the GPU (one auction a problem, the batch in one
//! launch). Each timed run ends with every result (plan, potentials, certificate) on the
//! host.

use crate::bench::{time_runs_for, BenchArgs};
use crate::npy::Dtype;
use crate::{input, npy, BackendChoice, Json};
use logot::exact::{EmdParams, EmdResult, ExactMethod, Metric};
use logot::{Real, Result};
use logot_cli::problems::uniform_cloud;
use ndarray::{Array3, ArrayView3, Axis, Ix3};
use serde_json::json;

/// emdbatch's canonical size: problems, points per cloud, dimension.
pub const EMDBATCH_B: usize = 64;
pub const EMDBATCH_N: usize = 1024;
pub const EMDBATCH_D: usize = 16;

/// Runs emdbatch in `dtype` on `--backend`.
pub fn bench(dtype: Dtype, a: &BenchArgs) -> Json {
    let params = EmdParams::default();
    match (dtype, a.backend) {
        (Dtype::F32, BackendChoice::Cpu) => run::<f32>(a, |x, y| {
            logot::exact::emd_points_batch(None, None, x, y, Metric::SqEuclidean, &params)
        }),
        (Dtype::F64, BackendChoice::Cpu) => run::<f64>(a, |x, y| {
            logot::exact::emd_points_batch(None, None, x, y, Metric::SqEuclidean, &params)
        }),
        #[cfg(feature = "cuda")]
        (Dtype::F32, BackendChoice::Cuda) => {
            let be = crate::cuda_backend()?;
            run::<f32>(a, |x, y| {
                be.emd_points_batch(None, None, x, y, Metric::SqEuclidean, &params)
            })
        }
        #[cfg(feature = "cuda")]
        (Dtype::F64, BackendChoice::Cuda) => {
            let be = crate::cuda_backend()?;
            run::<f64>(a, |x, y| {
                be.emd_points_batch(None, None, x, y, Metric::SqEuclidean, &params)
            })
        }
        #[cfg(not(feature = "cuda"))]
        (_, BackendChoice::Cuda) => Err(crate::no_cuda()),
    }
}

/// The clouds: `--x`/`--y` (B×n×d .npy) when given, else B pairs uniform in `[0, 1]^d`
/// (problem k: seeds 2k + 1 and 2k + 2).
fn clouds<T: Real>(a: &BenchArgs) -> Result<(Array3<T>, Array3<T>)> {
    if let (Some(x), Some(y)) = (&a.x, &a.y) {
        let x = npy::fixed::<T, Ix3>(input::read::<T>(x, "--x", &[3])?, "--x")?;
        let y = npy::fixed::<T, Ix3>(input::read::<T>(y, "--y", &[3])?, "--y")?;
        return Ok((x, y));
    }
    let b = a.batch.unwrap_or(EMDBATCH_B);
    let n = a.points.unwrap_or(EMDBATCH_N);
    let d = a.dim.unwrap_or(EMDBATCH_D);
    let mut x = Array3::zeros((b, n, d));
    let mut y = Array3::zeros((b, n, d));
    for k in 0..b {
        x.index_axis_mut(Axis(0), k)
            .assign(&uniform_cloud::<T>(n, d, 2 * k as u64 + 1));
        y.index_axis_mut(Axis(0), k)
            .assign(&uniform_cloud::<T>(n, d, 2 * k as u64 + 2));
    }
    Ok((x, y))
}

fn run<T: Real>(
    a: &BenchArgs,
    solve: impl Fn(ArrayView3<'_, T>, ArrayView3<'_, T>) -> Result<Vec<EmdResult>>,
) -> Json {
    let (x, y) = clouds::<T>(a)?;
    let (b, n, d) = x.dim();
    let mut last = Vec::new();
    let (median, min, all) = time_runs_for(a, || {
        last = solve(x.view(), y.view())?;
        Ok(())
    })?;
    let worst = |f: fn(&EmdResult) -> f64| last.iter().map(f).fold(0.0f64, f64::max);
    Ok(json!({
        "problem": "emdbatch",
        "backend": a.backend.name(),
        "dtype": T::NAME,
        "batch": b,
        "points": n,
        "dim": d,
        "ms": median,
        "min_ms": min,
        "runs_ms": all,
        "costs": last.iter().map(|r| r.cost).collect::<Vec<_>>(),
        "all_exact": last.iter().all(|r| r.exact),
        "solved_on_gpu": last.iter().filter(|r| r.method == ExactMethod::Auction).count(),
        "relative_gap": worst(|r| r.certificate.relative_gap()),
        "max_violation": worst(|r| r.certificate.max_violation),
        "iterations_each": last.iter().map(|r| r.iterations).collect::<Vec<_>>(),
    }))
}
