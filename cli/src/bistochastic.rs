//! `logot bistochastic`: R = SinkhornKnopp(exp(X)) for one n×n matrix or a batch B×n×n,
//! and optionally ∂L/∂X from ∂L/∂R by implicit differentiation.

use crate::npy;
use crate::output::Outputs;
use crate::{input, BackendChoice, Json};
use logot::grad::{BistochasticParams, BistochasticSolver, CgParams};
use logot::{BistochasticKernels, Error, Real, Result};
use ndarray::{Array3, ArrayD, Axis, Ix3};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct BistochasticArgs {
    /// Input logits X: n×n or B×n×n (n ≤ 32), .npy float32/float64 (or FILE.npz:NAME).
    #[arg(long)]
    pub x: String,
    /// The most iterations run (a column then a row normalisation each); a matrix stops
    /// earlier once it meets a positive --tol.
    #[arg(long, allow_hyphen_values = true, default_value_t = 20)]
    pub iters: usize,
    /// Stop a matrix once its column error Σ_j |Σ_i R_ij − 1| is ≤ tol. With --tol 0 (the
    /// default) all iterations run and `converged` says whether every returned matrix meets
    /// the default tolerance of the precision (1e-9 in f64, 1e-5 in f32).
    #[arg(long, allow_hyphen_values = true, default_value_t = 0.0)]
    pub tol: f64,
    /// Output .npy for R (same shape as X).
    #[arg(long)]
    pub out: String,
    /// Upstream gradient G = ∂L/∂R (same shape as X): also compute ∂L/∂X.
    #[arg(long, requires = "out_grad")]
    pub grad: Option<String>,
    /// Output .npy for ∂L/∂X.
    #[arg(long, requires = "grad")]
    pub out_grad: Option<String>,
    /// Relative residual target of the backward's CG (default: 1e-10 in f64, 1e-5 in f32).
    #[arg(long, allow_hyphen_values = true)]
    pub cg_tol: Option<f64>,
    /// Maximum CG iterations per matrix.
    #[arg(long, allow_hyphen_values = true, default_value_t = 1000)]
    pub cg_iters: usize,
    /// Where to compute.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// Compute in float32 whatever the input dtype.
    #[arg(long, conflicts_with = "f64")]
    pub f32: bool,
    /// Compute in float64 whatever the input dtypes (default: float64 when --x or --grad
    /// is float64, as numpy promotes).
    #[arg(long)]
    pub f64: bool,
}

/// A 2-D or 3-D array as a batch `B×n×n`; `true` when it was a single matrix.
fn as_batch<T: Real>(a: ArrayD<T>, arg: &str) -> Result<(Array3<T>, bool)> {
    if a.ndim() == 2 {
        let (n, m) = (a.shape()[0], a.shape()[1]);
        let a = a
            .into_shape_with_order((1, n, m))
            .map_err(|e| Error::shape(arg, e))?;
        Ok((a, true))
    } else {
        Ok((npy::fixed::<T, Ix3>(a, arg)?, false))
    }
}

fn write<T: Real>(outs: &mut Outputs, flag: &str, a: &Array3<T>, single: bool) -> Result<()> {
    if single {
        outs.write(flag, a.index_axis(Axis(0), 0))
    } else {
        outs.write(flag, a.view())
    }
}

fn run<T: Real, B: BistochasticKernels<T>>(
    backend: B,
    a: &BistochasticArgs,
    outs: &mut Outputs,
) -> Json {
    let (x, single) = as_batch(input::read::<T>(&a.x, "--x", &[2, 3])?, "--x")?;
    let proj = BistochasticSolver::new(
        backend,
        BistochasticParams::default().iters(a.iters).tol(a.tol),
    );
    let fwd = proj.forward(x.view())?;
    write(outs, "--out", &fwd.r, single)?;
    let c = &fwd.convergence;
    let (batch, n, _) = fwd.r.dim();
    let mut out = json!({
        "batch": batch,
        "n": n,
        "iterations": c.iterations,
        "marginal_error": c.marginal_error,
        "converged": c.converged,
        "tol": c.tol,
        "unconverged": c.problems.iter().filter(|p| !p.converged).count(),
        "dtype": T::NAME,
    });
    if let Some(gpath) = &a.grad {
        let (g, _) = as_batch(input::read::<T>(gpath, "--grad", &[2, 3])?, "--grad")?;
        if g.dim() != fwd.r.dim() {
            return Err(Error::shape(
                "--grad",
                format!("is {:?} but --x is {:?}", g.dim(), fwd.r.dim()),
            ));
        }
        let cg = {
            let mut cg = CgParams::default().max_iters(a.cg_iters);
            cg.tol = a.cg_tol;
            cg
        };
        let bwd = proj.backward(fwd.r.view(), g.view(), &cg)?;
        write(outs, "--out-grad", &bwd.dx, single)?;
        let cg = &bwd.cg;
        if let Some(first) = cg.first_unconverged {
            eprintln!(
                "logot: warning: the backward CG did not converge for {} matrices, the first is {first} (max relative residual {:.3e}, tol {:.1e})",
                cg.unconverged, cg.max_residual, cg.tol
            );
        }
        out["gradient_cg"] = json!({
            "iterations": cg.max_iterations,
            "residual": cg.max_residual,
            "converged": cg.all_converged(),
            "unconverged": cg.unconverged,
        });
    }
    Ok(out)
}

pub fn bistochastic(a: &BistochasticArgs) -> Json {
    let inputs = [("--x", Some(a.x.as_str())), ("--grad", a.grad.as_deref())];
    let mut outs = Outputs::prepare(
        &inputs,
        &[
            ("--out", Some(a.out.as_str())),
            ("--out-grad", a.out_grad.as_deref()),
        ],
    )?;
    let dtype = input::precision(a.f32, a.f64, &inputs)?;
    let mut out = dispatch!(dtype, a.backend, run, a, &mut outs)?;
    out["outputs"] = outs.commit()?;
    Ok(out)
}
