//! `logot divergence`: the Sinkhorn divergence of two weighted point clouds,
//! `S_ε(μ, ν) = V(μ, ν) − ½ V(μ, μ) − ½ V(ν, ν)`, with `V` the regularised objective
//! `OT_ε = ⟨f, μ⟩ + ⟨g, ν⟩ − ε Σ P` (GeomLoss's convention, the default; see
//! `logot::pointcloud`) and its gradients with respect to the points, or the transport cost
//! `⟨P, C⟩` (`--convention linear`, POT's `empirical_sinkhorn_divergence`; value only).
//! `--reg-m R` gives the unbalanced divergence (one penalty on both marginals, the objective
//! convention, `+ (ε/2)(Σμ − Σν)²`; see `logot::pointcloud`).

use crate::npy::{self, Dtype};
use crate::output::Outputs;
use crate::relax::RelaxArgs;
use crate::wasserstein::{Metric, PrecisionArgs};
use crate::{input, BackendChoice, Json};
use logot::{
    DivergenceConvention, EpsScaling, Error, GradKernels, PointCloudCost, PointCloudKernels, Real,
    Result, SinkhornParams, Solver,
};
use ndarray::{Array1, Ix1, Ix2};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct DivergenceArgs {
    /// Source point cloud (n×d), .npy float32/float64 (or FILE.npz:NAME).
    #[arg(long)]
    pub x: String,
    /// Target point cloud (m×d).
    #[arg(long)]
    pub y: String,
    /// Weights of --x (n; default uniform, 1/n each, or --nu's mass spread evenly).
    #[arg(long)]
    pub mu: Option<String>,
    /// Weights of --y (m; default uniform, as --mu).
    #[arg(long)]
    pub nu: Option<String>,
    /// Ground cost between points (default: sqeuclidean).
    #[arg(long, value_enum, default_value_t = Metric::Sqeuclidean)]
    pub metric: Metric,
    #[command(flatten)]
    pub precision: PrecisionArgs,
    /// What the divergence debiases: `objective` (OT_ε, GeomLoss's; with point gradients)
    /// or `linear` (the transport costs ⟨P, C⟩, POT's empirical_sinkhorn_divergence; no
    /// gradients).
    #[arg(long, value_enum, default_value_t = Convention::Objective)]
    pub convention: Convention,
    /// Regularisation strength ε (> 0).
    #[arg(long, allow_negative_numbers = true)]
    pub eps: f64,
    /// Anneal ε from the squared diameter of the clouds down to --eps (each of the three
    /// problems).
    #[arg(long)]
    pub eps_scaling: bool,
    /// The most iterations run in each of the three problems, ε-scaling stages included.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1000)]
    pub iters: usize,
    /// Marginal-error target of each problem, relative to its total mass (default: 1e-9 in
    /// f64, 1e-5 in f32). With --tol 0 all iterations run and `converged` says whether the
    /// final potentials meet the default tolerance of the precision.
    #[arg(long, allow_negative_numbers = true)]
    pub tol: Option<f64>,
    /// Write ∂S_ε/∂X (n×d).
    #[arg(long)]
    pub grad_x: Option<String>,
    /// Write ∂S_ε/∂Y (m×d).
    #[arg(long)]
    pub grad_y: Option<String>,
    /// Unbalanced divergence: `--reg-m R` relaxes both marginals with one penalty ρ
    /// (GeomLoss's reach², see `logot::pointcloud`); masses may then differ. One penalty
    /// per side (`--reg-m-mu`/`--reg-m-nu`) and `--convention linear` are refused.
    #[command(flatten)]
    pub relax: RelaxArgs,
    /// Where to compute.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// With --backend cuda: the GPUs to compute on, e.g. 0,1 (default: GPU 0), each
    /// holding a share of the target points, joined by NCCL.
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// Compute in float32 whatever the input dtypes.
    #[arg(long, conflicts_with = "f64")]
    pub f32: bool,
    /// Compute in float64 whatever the input dtypes (default: float64 when any input is
    /// float64, float32 when all are, as numpy promotes).
    #[arg(long)]
    pub f64: bool,
}

/// `--convention`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Convention {
    /// The regularised objective OT_ε.
    Objective,
    /// The transport cost ⟨P, C⟩.
    Linear,
}

impl Convention {
    fn library(self) -> DivergenceConvention {
        match self {
            Convention::Objective => DivergenceConvention::Objective,
            Convention::Linear => DivergenceConvention::Linear,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Convention::Objective => "objective",
            Convention::Linear => "linear",
        }
    }
}

impl DivergenceArgs {
    fn inputs(&self) -> [(&'static str, Option<&str>); 4] {
        [
            ("--x", Some(self.x.as_str())),
            ("--y", Some(self.y.as_str())),
            ("--mu", self.mu.as_deref()),
            ("--nu", self.nu.as_deref()),
        ]
    }
}

/// Weights from `path`, or uniform on `k` points carrying `mass`.
fn weights<T: Real>(path: Option<&str>, arg: &str) -> Result<Option<Array1<T>>> {
    path.map(|p| npy::fixed::<T, Ix1>(input::read::<T>(p, arg, &[1])?, arg))
        .transpose()
}

fn uniform<T: Real>(k: usize, mass: f64) -> Array1<T> {
    Array1::from_elem(k, T::of(mass / k as f64))
}

/// Rename the library's argument names to the command line's flags.
fn flags(e: Error) -> Error {
    e.rename_arg(|arg| match arg.as_str() {
        "x" | "y" => format!("--{arg}"),
        "mu" => "--mu".into(),
        "nu" => "--nu".into(),
        "convention" => "--convention".into(),
        _ => arg,
    })
}

fn run<T: Real, B: PointCloudKernels<T> + GradKernels<T>>(
    backend: B,
    a: &DivergenceArgs,
    outs: &mut Outputs,
) -> Json {
    let x = npy::fixed::<T, Ix2>(input::read::<T>(&a.x, "--x", &[2])?, "--x")?;
    let y = npy::fixed::<T, Ix2>(input::read::<T>(&a.y, "--y", &[2])?, "--y")?;
    let mu = weights::<T>(a.mu.as_deref(), "--mu")?;
    let nu = weights::<T>(a.nu.as_deref(), "--nu")?;
    let mass = |w: &Array1<T>| w.iter().map(|v| v.f64()).sum::<f64>();
    let (mu, nu) = match (mu, nu) {
        (Some(mu), Some(nu)) => (mu, nu),
        (Some(mu), None) => {
            let nu = uniform(y.nrows(), mass(&mu));
            (mu, nu)
        }
        (None, Some(nu)) => (uniform(x.nrows(), mass(&nu)), nu),
        (None, None) => (uniform(x.nrows(), 1.0), uniform(y.nrows(), 1.0)),
    };
    let metric = a.metric.point_metric();
    let clouds = PointCloudCost::with_metric(x.view(), y.view(), metric)
        .map_err(flags)?
        .with_precision(a.precision.cross());
    let mut params = SinkhornParams {
        eps: a.eps,
        max_iters: a.iters,
        tol: a.tol,
        observer: crate::progress::bar("divergence"),
        relaxation: a.relax.relaxation()?,
        ..Default::default()
    };
    if a.eps_scaling {
        // The bounding box of x ∪ y covers the three problems' costs.
        params = params.with_eps_scaling(EpsScaling::from_max_cost(clouds.max_cost()));
    }
    let s = Solver::new(backend, params)
        .sinkhorn_divergence(mu.view(), nu.view(), clouds, a.convention.library())
        .map_err(|e| flags(a.relax.cli_error(e, "")))?;
    if let Some(g) = &s.grad_x {
        outs.write("--grad-x", g.view())?;
    }
    if let Some(g) = &s.grad_y {
        outs.write("--grad-y", g.view())?;
    }
    if !s.converged() {
        eprintln!(
            "logot: warning: not every problem converged (marginal errors {:.3e}, {:.3e}, {:.3e})",
            s.convergence[0].marginal_error,
            s.convergence[1].marginal_error,
            s.convergence[2].marginal_error
        );
    }
    let problems: Vec<serde_json::Value> = ["xy", "xx", "yy"]
        .iter()
        .zip(&s.terms)
        .zip(&s.convergence)
        .map(|((name, term), c)| {
            json!({
                "problem": name,
                "value": term.f64(),
                "iterations": c.iterations,
                "marginal_error": c.marginal_error,
                "converged": c.converged,
            })
        })
        .collect();
    Ok(json!({
        "divergence": s.value.f64(),
        "convention": a.convention.name(),
        "problems": problems,
        "iterations": s.convergence.iter().map(|c| c.iterations).max().unwrap_or(0),
        "marginal_error": s.convergence.iter().map(|c| c.marginal_error).fold(0.0, f64::max),
        "converged": s.converged(),
        "eps": a.eps,
        "reg_m": a.relax.reg_m,
        "dtype": T::NAME,
    }))
}

pub fn divergence(a: &DivergenceArgs) -> Json {
    if a.convention == Convention::Linear && (a.grad_x.is_some() || a.grad_y.is_some()) {
        return Err(Error::parameter(
            "--convention",
            "linear",
            "has no point gradients (--grad-x/--grad-y): use --convention objective",
        ));
    }
    let mut outs = Outputs::prepare(
        &a.inputs(),
        &[
            ("--grad-x", a.grad_x.as_deref()),
            ("--grad-y", a.grad_y.as_deref()),
        ],
    )?;
    let dtype: Dtype = input::precision(a.f32, a.f64, &a.inputs())?;
    let mut out = dispatch!(dtype, a.backend, devices: &a.devices, run, a, &mut outs)?;
    out["outputs"] = outs.commit()?;
    Ok(out)
}
