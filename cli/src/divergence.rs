//! `logot divergence`: the Sinkhorn divergence of two weighted point clouds,
//! `S_ε(μ, ν) = V(μ, ν) − ½ V(μ, μ) − ½ V(ν, ν)`, with `V` the regularised objective
//! `OT_ε = ⟨f, μ⟩ + ⟨g, ν⟩ − ε Σ P` (GeomLoss's convention, the default; see
//! `logot::pointcloud`) and its gradients with respect to the points, or the transport cost
//! `⟨P, C⟩` (`--convention linear`, POT's `empirical_sinkhorn_divergence`; value only).
//! `--reg-m R` gives the unbalanced divergence (one penalty on both marginals, the objective
//! convention, `+ (ε/2)(Σμ − Σν)²`; see `logot::pointcloud`).
//! With 3-D clouds (`B×n×d`, `B×m×d`: one pair per problem, weights `B×n`, `B×m`) each
//! problem's divergence is computed and reported (`"divergence": [B values]`).

use crate::npy::{self, Dtype};
use crate::output::Outputs;
use crate::relax::RelaxArgs;
use crate::wasserstein::{Clouds, Metric, PrecisionArgs};
use crate::{input, BackendChoice, Json};
use logot::{
    DivergenceConvention, EpsScaling, Error, GradKernels, PointCloudKernels, Problem, Real, Result,
    SinkhornParams, SinkhornSolver,
};
use ndarray::{Array2, Axis, Ix1, Ix2};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct DivergenceArgs {
    /// Source point cloud (n×d), .npy float32/float64 (or FILE.npz:NAME); or B×n×d, one
    /// cloud per problem (a batch of B divergences).
    #[arg(long)]
    pub x: String,
    /// Target point cloud (m×d, or B×m×d with a 3-D --x).
    #[arg(long)]
    pub y: String,
    /// Weights of --x (n, or B×n for 3-D clouds; default uniform, 1/n each, or --nu's
    /// mass spread evenly).
    #[arg(long)]
    pub mu: Option<String>,
    /// Weights of --y (m, or B×m; default uniform, as --mu).
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
    #[arg(long, allow_hyphen_values = true)]
    pub eps: f64,
    /// Anneal ε from the squared diameter of the clouds down to --eps (each of the three
    /// problems).
    #[arg(long)]
    pub eps_scaling: bool,
    /// The most iterations run in each of the three problems, ε-scaling stages included.
    #[arg(long, allow_hyphen_values = true, default_value_t = 1000)]
    pub iters: usize,
    /// Marginal-error target of each problem, relative to its total mass (default: 1e-9 in
    /// f64, 1e-5 in f32). With --tol 0 all iterations run and `converged` says whether the
    /// final potentials meet the default tolerance of the precision.
    #[arg(long, allow_hyphen_values = true)]
    pub tol: Option<f64>,
    /// Write ∂S_ε/∂X (n×d, or B×n×d).
    #[arg(long)]
    pub grad_x: Option<String>,
    /// Write ∂S_ε/∂Y (m×d, or B×m×d).
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

/// Weights from `path` as `problems×k` rows: 1-D for shared clouds, `B×k` for batched ones.
fn weights<T: Real>(path: Option<&str>, arg: &str, batched: bool) -> Result<Option<Array2<T>>> {
    let Some(p) = path else { return Ok(None) };
    Ok(Some(if batched {
        npy::fixed::<T, Ix2>(input::read::<T>(p, arg, &[2])?, arg)?
    } else {
        npy::fixed::<T, Ix1>(input::read::<T>(p, arg, &[1])?, arg)?.insert_axis(Axis(0))
    }))
}

/// `problems` rows of uniform weights on `k` points, row `b` carrying `mass[b]`.
fn uniform<T: Real>(k: usize, mass: &[f64]) -> Array2<T> {
    Array2::from_shape_fn((mass.len(), k), |(b, _)| T::of(mass[b] / k as f64))
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
    let pts = Clouds::<T>::read(&a.x, &a.y, a.metric.point_metric())?;
    let (problems, n, m) = pts.dims();
    let mu = weights::<T>(a.mu.as_deref(), "--mu", pts.batched)?;
    let nu = weights::<T>(a.nu.as_deref(), "--nu", pts.batched)?;
    let mass = |w: &Array2<T>| -> Vec<f64> {
        w.rows()
            .into_iter()
            .map(|r| r.iter().map(|v| v.f64()).sum())
            .collect()
    };
    let (mu, nu) = match (mu, nu) {
        (Some(mu), Some(nu)) => (mu, nu),
        (Some(mu), None) => {
            let nu = uniform(m, &mass(&mu));
            (mu, nu)
        }
        (None, Some(nu)) => (uniform(n, &mass(&nu)), nu),
        (None, None) => (
            uniform(n, &vec![1.0; problems]),
            uniform(m, &vec![1.0; problems]),
        ),
    };
    let clouds = pts.cost()?.with_precision(a.precision.cross());
    let mut params = SinkhornParams::new(a.eps).max_iters(a.iters);
    params.tol = a.tol;
    params.observer = crate::progress::bar("divergence");
    if a.eps_scaling {
        // The bounding box of x ∪ y covers the three problems' costs.
        params = params.eps_scaling(EpsScaling::from_max_cost(clouds.max_cost()));
    }
    let solver = SinkhornSolver::new(backend, params);
    let conv = a.convention.library();
    let mut problem = Problem::new(mu.view(), nu.view(), clouds).map_err(flags)?;
    if let Some(r) = a.relax.relaxation()? {
        problem = problem.relaxed(r);
    }
    let s = solver
        .sinkhorn_divergence(&problem, conv)
        .map_err(|e| flags(a.relax.cli_error(e, "")))?;
    let batch = s.value.len();
    // The gradients as one array: n×d for one pair, B×n×d for batched clouds.
    for (flag, grads) in [("--grad-x", &s.grad_x), ("--grad-y", &s.grad_y)] {
        if let Some(g) = grads {
            if pts.batched {
                outs.write(flag, g.view())?;
            } else {
                outs.write(flag, g.index_axis(Axis(0), 0))?;
            }
        }
    }
    // Problem b's report of each of the three solves.
    let report = |i: usize, b: usize| &s.convergence[i].problems[b];
    for b in (0..batch).filter(|&b| (0..3).any(|i| !report(i, b).converged)) {
        let which = if pts.batched {
            format!(" of divergence {b}")
        } else {
            String::new()
        };
        eprintln!(
            "logot: warning: not every problem{which} converged (marginal errors {:.3e}, {:.3e}, {:.3e})",
            report(0, b).marginal_error,
            report(1, b).marginal_error,
            report(2, b).marginal_error
        );
    }
    let terms = |b: usize| -> Vec<serde_json::Value> {
        ["xy", "xx", "yy"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let c = report(i, b);
                json!({
                    "problem": name,
                    "value": s.terms[[b, i]].f64(),
                    "iterations": c.iterations,
                    "marginal_error": c.marginal_error,
                    "converged": c.converged,
                })
            })
            .collect()
    };
    // One pair: scalars and the three problems; batched: one entry per divergence.
    let (divergence, problems) = if pts.batched {
        (
            json!(s.value.iter().map(|v| v.f64()).collect::<Vec<_>>()),
            json!((0..batch).map(terms).collect::<Vec<_>>()),
        )
    } else {
        (json!(s.value[0].f64()), json!(terms(0)))
    };
    let reports = || (0..batch).flat_map(|b| (0..3).map(move |i| (i, b)));
    Ok(json!({
        "divergence": divergence,
        "convention": a.convention.name(),
        "problems": problems,
        "batch": if pts.batched { json!(batch) } else { serde_json::Value::Null },
        "iterations": reports().map(|(i, b)| report(i, b).iterations).max().unwrap_or(0),
        "marginal_error": reports().map(|(i, b)| report(i, b).marginal_error).fold(0.0, f64::max),
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
