//! `logot svd3`: thin SVD of one M×3 matrix or a batch B×M×3.

use crate::npy;
use crate::output::Outputs;
use crate::{input, BackendChoice, Json};
use logot::linalg::svd3_batch;
use logot::{LinalgKernels, Real};
use ndarray::{Axis, Ix3};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct Svd3Args {
    /// Input: M×3 (one matrix) or B×M×3 (a batch), .npy float32/float64 (or FILE.npz:NAME).
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
    /// Compute in float64 whatever the input dtype (default: the input's dtype).
    #[arg(long)]
    pub f64: bool,
    /// Where to compute.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
}

fn run<T: Real, B: LinalgKernels<T>>(backend: B, a: &Svd3Args, outs: &mut Outputs) -> Json {
    let input = input::read::<T>(&a.a, "--a", &[2, 3])?;
    let single = input.ndim() == 2;
    let input = if single {
        input.insert_axis(Axis(0))
    } else {
        input
    };
    let input = npy::fixed::<T, Ix3>(input, "--a")?;
    let out = svd3_batch(&backend, input.view())?;
    if single {
        outs.write("--out-u", out.u.index_axis(Axis(0), 0))?;
        outs.write("--out-s", out.s.index_axis(Axis(0), 0))?;
        outs.write("--out-vh", out.vt.index_axis(Axis(0), 0))?;
    } else {
        outs.write("--out-u", out.u.view())?;
        outs.write("--out-s", out.s.view())?;
        outs.write("--out-vh", out.vt.view())?;
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
    let inputs = [("--a", Some(a.a.as_str()))];
    let mut outs = Outputs::prepare(
        &inputs,
        &[
            ("--out-u", Some(a.out_u.as_str())),
            ("--out-s", Some(a.out_s.as_str())),
            ("--out-vh", Some(a.out_vh.as_str())),
        ],
    )?;
    let dtype = input::precision(a.f32, a.f64, &inputs)?;
    let mut out = dispatch!(dtype, a.backend, run, a, &mut outs)?;
    out["outputs"] = outs.commit()?;
    Ok(out)
}
