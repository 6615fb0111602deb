//! `logot newton-schulz`: quintic Newton–Schulz orthogonalisation of a matrix.

use crate::npy;
use crate::output::Outputs;
use crate::{input, BackendChoice, Json};
use logot::linalg::{newton_schulz, NewtonSchulzParams};
use logot::{Error, LinalgKernels, Real};
use ndarray::Ix2;
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct NewtonSchulzArgs {
    /// Input matrix r×c, .npy float32/float64 (or FILE.npz:NAME).
    #[arg(long)]
    pub x: String,
    /// Quintic steps with (a, b, c) = (3.4445, −4.7750, 2.0315); at most 10000.
    #[arg(long, allow_hyphen_values = true, default_value_t = 5)]
    pub steps: usize,
    /// Cubic steps (1.5x − 0.5x³) after the quintic ones, to converge to the polar factor;
    /// at most 10000.
    #[arg(long, allow_hyphen_values = true, default_value_t = 0)]
    pub polish_steps: usize,
    /// Output .npy (r×c).
    #[arg(long)]
    pub out: String,
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

fn run<T: Real, B: LinalgKernels<T>>(backend: B, a: &NewtonSchulzArgs, outs: &mut Outputs) -> Json {
    let x = npy::fixed::<T, Ix2>(input::read::<T>(&a.x, "--x", &[2])?, "--x")?;
    let params = NewtonSchulzParams::default()
        .steps(a.steps)
        .polish_steps(a.polish_steps);
    let y = newton_schulz(&backend, x.view(), &params)?;
    outs.write("--out", y.view())?;
    Ok(json!({
        "shape": [y.nrows(), y.ncols()],
        "steps": a.steps,
        "polish_steps": a.polish_steps,
        "coefficients": params.coefficients,
        "dtype": T::NAME,
        "backend": a.backend.name(),
    }))
}

/// The most quintic or cubic steps the command runs: each step costs two products of the
/// matrix, and the steps converge within a few dozen.
pub const MAX_STEPS: usize = 10_000;

pub fn newton_schulz_cmd(a: &NewtonSchulzArgs) -> Json {
    for (flag, v) in [("--steps", a.steps), ("--polish-steps", a.polish_steps)] {
        if v > MAX_STEPS {
            return Err(Error::parameter(
                flag,
                v,
                format!("at most {MAX_STEPS} steps (they converge within a few dozen)"),
            ));
        }
    }
    let inputs = [("--x", Some(a.x.as_str()))];
    let mut outs = Outputs::prepare(&inputs, &[("--out", Some(a.out.as_str()))])?;
    let dtype = input::precision(a.f32, a.f64, &inputs)?;
    let mut out = dispatch!(dtype, a.backend, run, a, &mut outs)?;
    out["outputs"] = outs.commit()?;
    Ok(out)
}
