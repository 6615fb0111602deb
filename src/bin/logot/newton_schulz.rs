//! `logot newton-schulz`: quintic Newton–Schulz orthogonalisation of a matrix.

use crate::npy::{self, Dtype};
use crate::{BackendChoice, Json};
use logot::linalg::{newton_schulz_on, NewtonSchulzParams};
use logot::{LinalgKernels, Real, Result};
use ndarray::Ix2;
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct NewtonSchulzArgs {
    /// Input matrix r×c, .npy float32/float64.
    #[arg(long)]
    pub x: String,
    /// Quintic steps with (a, b, c) = (3.4445, −4.7750, 2.0315).
    #[arg(long, allow_negative_numbers = true, default_value_t = 5)]
    pub steps: usize,
    /// Cubic steps (1.5x − 0.5x³) after the quintic ones, to converge to the polar factor.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0)]
    pub polish_steps: usize,
    /// Output .npy (r×c).
    #[arg(long)]
    pub out: String,
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

fn run<T: Real, B: LinalgKernels<T>>(backend: B, a: &NewtonSchulzArgs) -> Json {
    let x = npy::fixed::<T, Ix2>(npy::read::<T>(&a.x, "--x", &[2])?, "--x")?;
    let params = NewtonSchulzParams {
        steps: a.steps,
        polish_steps: a.polish_steps,
        ..Default::default()
    };
    let y = newton_schulz_on(&backend, x.view(), &params)?;
    npy::write(&a.out, y.view())?;
    Ok(json!({
        "shape": [y.nrows(), y.ncols()],
        "steps": a.steps,
        "polish_steps": a.polish_steps,
        "coefficients": params.coefficients,
        "dtype": T::NAME,
        "backend": a.backend.name(),
    }))
}

pub fn newton_schulz_cmd(a: &NewtonSchulzArgs) -> Json {
    let dtype: Result<Dtype> = if a.f32 {
        Ok(Dtype::F32)
    } else if a.f64 {
        Ok(Dtype::F64)
    } else {
        npy::dtype_of(&a.x)
    };
    dispatch!(dtype?, a.backend, run, a)
}
