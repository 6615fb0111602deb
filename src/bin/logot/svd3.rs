//! `logot svd3`: thin SVD of one M×3 matrix or a batch B×M×3.

use crate::npy::{self, Dtype};
use crate::{BackendChoice, Json};
use logot::linalg::svd3_batch_on;
use logot::{LinalgKernels, Real, Result};
use ndarray::{Axis, Ix3};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct Svd3Args {
    /// Input: M×3 (one matrix) or B×M×3 (a batch), .npy float32/float64.
    #[arg(long)]
    pub a: String,
    /// Output .npy for U: M×3 or B×M×3 (orthonormal columns).
    #[arg(long)]
    pub out_u: String,
    /// Output .npy for the singular values: 3 or B×3, descending.
    #[arg(long)]
    pub out_s: String,
    /// Output .npy for Vᵀ: 3×3 or B×3×3 (rows are the right singular vectors).
    #[arg(long)]
    pub out_vh: String,
    /// Compute in float32 whatever the input dtype.
    #[arg(long, conflicts_with = "f64")]
    pub f32: bool,
    /// Compute in float64 whatever the input dtype.
    #[arg(long)]
    pub f64: bool,
    /// Where to compute.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
}

fn run<T: Real, B: LinalgKernels<T>>(backend: B, a: &Svd3Args) -> Json {
    let input = npy::read::<T>(&a.a, "--a", &[2, 3])?;
    let single = input.ndim() == 2;
    let input = if single {
        input.insert_axis(Axis(0))
    } else {
        input
    };
    let input = npy::fixed::<T, Ix3>(input, "--a")?;
    let out = svd3_batch_on(&backend, input.view())?;
    if single {
        npy::write(&a.out_u, out.u.index_axis(Axis(0), 0))?;
        npy::write(&a.out_s, out.s.index_axis(Axis(0), 0))?;
        npy::write(&a.out_vh, out.vt.index_axis(Axis(0), 0))?;
    } else {
        npy::write(&a.out_u, out.u.view())?;
        npy::write(&a.out_s, out.s.view())?;
        npy::write(&a.out_vh, out.vt.view())?;
    }
    let (batch, m, _) = input.dim();
    let zeros = out.s.iter().filter(|v| **v == T::zero()).count();
    Ok(json!({
        "batch": if single { serde_json::Value::Null } else { batch.into() },
        "m": m,
        "dtype": T::NAME,
        "backend": a.backend.name(),
        "s_max": out.s.iter().fold(0.0f64, |x, v| x.max(v.f64())),
        "zero_singular_values": zeros,
    }))
}

pub fn svd3(a: &Svd3Args) -> Json {
    let dtype: Result<Dtype> = if a.f32 {
        Ok(Dtype::F32)
    } else if a.f64 {
        Ok(Dtype::F64)
    } else {
        npy::dtype_of(&a.a)
    };
    dispatch!(dtype?, a.backend, run, a)
}
