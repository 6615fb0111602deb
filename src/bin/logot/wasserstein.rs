//! `logot wasserstein` and `logot coupling`.

use crate::npy::{self, Dtype};
use crate::{BackendChoice, Json};
use logot::{
    Backend, CgParams, CostSource, CpuBackend, EpsScaling, Error, PointCloudCost,
    PointCloudKernels, PointMetric, Problem, Real, Result, SinkhornParams, SinkhornResult, Solver,
};
use ndarray::{Array2, ArrayD, Axis, Ix2, Ix3};
use serde_json::json;

/// Inputs and solver options shared by `wasserstein` and `coupling`.
#[derive(clap::Args, Debug)]
pub struct SolveArgs {
    /// Source histogram(s): n (one problem) or B×n (a batch), .npy float32/float64.
    #[arg(long)]
    pub mu: String,
    /// Target histogram(s): m or B×m.
    #[arg(long)]
    pub nu: String,
    /// Cost: n×m (shared by the batch) or B×n×m (one per problem).
    #[arg(long, required_unless_present = "x", conflicts_with_all = ["x", "y"])]
    pub cost: Option<String>,
    /// Source point cloud (n×d): squared-Euclidean cost computed on the fly, never stored.
    #[arg(long, requires = "y")]
    pub x: Option<String>,
    /// Target point cloud (m×d).
    #[arg(long, requires = "x")]
    pub y: Option<String>,
    /// Ground cost between the points of --x/--y (default: sqeuclidean).
    #[arg(long, value_enum, requires = "x")]
    pub metric: Option<Metric>,
    /// Anneal ε from the largest cost (the squared diameter of --x/--y, or the largest
    /// entry of --cost) down to --eps, halving it every few iterations, before the main
    /// loop: much faster at small ε (iterations differ from POT's plain loop).
    #[arg(long)]
    pub eps_scaling: bool,
    /// Regularisation strength ε (> 0).
    #[arg(long, allow_negative_numbers = true)]
    pub eps: f64,
    /// Maximum number of iterations.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1000)]
    pub iters: usize,
    /// Marginal-error target; 0 runs all iterations (default: 1e-9 in f64, 1e-5 in f32).
    #[arg(long, allow_negative_numbers = true)]
    pub tol: Option<f64>,
    /// Where to compute.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// Compute in float32 whatever the input dtype.
    #[arg(long, conflicts_with = "f64")]
    pub f32: bool,
    /// Compute in float64 whatever the input dtype.
    #[arg(long)]
    pub f64: bool,
}

#[derive(clap::Args, Debug)]
pub struct WassersteinArgs {
    #[command(flatten)]
    pub solve: SolveArgs,
    /// Write the exact gradient of ⟨P,C⟩ w.r.t. mu (implicit differentiation; zero-mean
    /// representative): n, or B×n for a batch. CPU backend.
    #[arg(long)]
    pub grad_mu: Option<String>,
    /// Write the exact gradient of ⟨P,C⟩ w.r.t. nu (same representative as --grad-mu).
    #[arg(long)]
    pub grad_nu: Option<String>,
    /// Write the exact gradient of ⟨P,C⟩ w.r.t. the cost: n×m, or B×n×m for a batch (one
    /// matrix per problem, also when the cost is shared).
    #[arg(long)]
    pub grad_cost: Option<String>,
    /// Relative residual target of the adjoint CG solve (default: 1e-10 in f64, 1e-5 in f32).
    #[arg(long, allow_negative_numbers = true)]
    pub cg_tol: Option<f64>,
    /// Maximum CG iterations of the adjoint solve.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1000)]
    pub cg_iters: usize,
    /// With --x/--y: write ∂OT_ε/∂X (n×d, or B×n×d), the envelope gradient of the
    /// regularised objective OT_ε = ⟨f,μ⟩ + ⟨g,ν⟩ − ε·ΣP (not of ⟨P,C⟩); adds "ot_eps" to the JSON.
    #[arg(long, requires = "x")]
    pub grad_x: Option<String>,
    /// With --x/--y: write ∂OT_ε/∂Y (m×d, or B×m×d).
    #[arg(long, requires = "x")]
    pub grad_y: Option<String>,
}

impl WassersteinArgs {
    fn wants_gradients(&self) -> bool {
        self.grad_mu.is_some() || self.grad_nu.is_some() || self.grad_cost.is_some()
    }
}

#[derive(clap::Args, Debug)]
pub struct CouplingArgs {
    #[command(flatten)]
    pub solve: SolveArgs,
    /// Output .npy for the plan: n×m for one problem, B×n×m for a batch.
    #[arg(long)]
    pub out: String,
}

/// `--metric`: the cost between two points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Metric {
    /// |x − y|² (POT's ot.dist default).
    Sqeuclidean,
    /// |x − y|.
    Euclidean,
}

impl Metric {
    fn point_metric(self) -> PointMetric {
        match self {
            Metric::Sqeuclidean => PointMetric::SqEuclidean,
            Metric::Euclidean => PointMetric::Euclidean,
        }
    }
}

impl SolveArgs {
    /// Precision: `--f32`/`--f64`, else the dtype of `--mu`.
    pub fn dtype(&self) -> Result<Dtype> {
        Ok(if self.f32 {
            Dtype::F32
        } else if self.f64 {
            Dtype::F64
        } else {
            npy::dtype_of(&self.mu)?
        })
    }

    pub fn params(&self) -> SinkhornParams {
        SinkhornParams {
            eps: self.eps,
            max_iters: self.iters,
            tol: self.tol,
            ..Default::default()
        }
    }

    /// [`SolveArgs::params`] with the ε-scaling of `--eps-scaling` for this problem's cost.
    pub fn params_for<T: Real>(&self, problem: &Problem<'_, T>) -> SinkhornParams {
        let p = self.params();
        if !self.eps_scaling {
            return p;
        }
        let max_cost = match problem.cost() {
            CostSource::PointCloud(c) => c.max_cost(),
            CostSource::Dense(c) => c.iter().fold(0.0f64, |m, v| m.max(v.f64())),
            CostSource::DenseBatch(c) => c.iter().fold(0.0f64, |m, v| m.max(v.f64())),
            _ => 1.0,
        };
        p.with_eps_scaling(EpsScaling::from_max_cost(max_cost))
    }
}

/// Arrays of one CLI problem, in precision `T`.
pub struct Inputs<T> {
    pub mu: Array2<T>,
    pub nu: Array2<T>,
    /// The dense cost (empty when the cost comes from point clouds).
    pub cost: ArrayD<T>,
    /// Point clouds `X` (n×d), `Y` (m×d) and their metric, for `--x/--y`.
    pub points: Option<(Array2<T>, Array2<T>, PointMetric)>,
    /// `mu` was 1-D (a single problem): outputs drop the batch axis.
    pub single: bool,
}

impl<T: Real> Inputs<T> {
    pub fn load(a: &SolveArgs) -> Result<Self> {
        if let (Some(m), None) = (a.metric, &a.x) {
            return Err(Error::parameter(
                "--metric",
                format!("{m:?}").to_lowercase(),
                "applies to point clouds (--x/--y) only",
            ));
        }
        let mu = npy::read::<T>(&a.mu, "--mu", &[1, 2])?;
        let nu = npy::read::<T>(&a.nu, "--nu", &[1, 2])?;
        if mu.ndim() != nu.ndim() {
            return Err(Error::shape(
                "--nu",
                format!("is {}-D but --mu is {}-D", nu.ndim(), mu.ndim()),
            ));
        }
        let single = mu.ndim() == 1;
        let as2 = |v: ArrayD<T>, arg: &str| -> Result<Array2<T>> {
            if v.ndim() == 1 {
                let n = v.len();
                v.into_shape_with_order((1, n))
                    .map_err(|e| Error::shape(arg, e))
            } else {
                npy::fixed::<T, Ix2>(v, arg)
            }
        };
        let (cost, points) = match (&a.cost, &a.x, &a.y) {
            (Some(path), _, _) => (npy::read::<T>(path, "--cost", &[2, 3])?, None),
            (None, Some(xp), Some(yp)) => {
                let x = npy::fixed::<T, Ix2>(npy::read::<T>(xp, "--x", &[2])?, "--x")?;
                let y = npy::fixed::<T, Ix2>(npy::read::<T>(yp, "--y", &[2])?, "--y")?;
                (
                    ArrayD::zeros(vec![0, 0]),
                    Some((x, y, a.metric.unwrap_or(Metric::Sqeuclidean).point_metric())),
                )
            }
            _ => {
                return Err(Error::parameter(
                    "--cost",
                    "missing",
                    "give --cost or --x and --y",
                ))
            }
        };
        Ok(Inputs {
            mu: as2(mu, "--mu")?,
            nu: as2(nu, "--nu")?,
            cost,
            points,
            single,
        })
    }

    pub fn problem(&self) -> Result<Problem<'_, T>> {
        if let Some((x, y, metric)) = &self.points {
            // Errors name the CLI flags.
            let cloud =
                PointCloudCost::with_metric(x.view(), y.view(), *metric).map_err(flag_names)?;
            return Problem::batch(self.mu.view(), self.nu.view(), cloud).map_err(|e| match e {
                Error::Shape { arg, detail } if arg == "cost" => Error::shape(
                    "--x/--y",
                    format!(
                        "{detail} (the clouds have {} and {} points)",
                        x.nrows(),
                        y.nrows()
                    ),
                ),
                other => other,
            });
        }
        let cost: CostSource<'_, T> = match self.cost.ndim() {
            2 => self
                .cost
                .view()
                .into_dimensionality::<Ix2>()
                .map_err(|e| Error::shape("--cost", e))?
                .into(),
            _ => self
                .cost
                .view()
                .into_dimensionality::<Ix3>()
                .map_err(|e| Error::shape("--cost", e))?
                .into(),
        };
        Problem::batch(self.mu.view(), self.nu.view(), cost)
    }
}

/// Rename the library's `x`/`y` arguments to the CLI's `--x`/`--y`.
fn flag_names(e: Error) -> Error {
    e.rename_arg(|arg| {
        if arg == "x" || arg == "y" {
            format!("--{arg}")
        } else {
            arg
        }
    })
}

/// The JSON report of a solve.
pub fn report<T: Real>(r: &SinkhornResult<T>) -> serde_json::Value {
    let c = &r.convergence;
    if !c.converged && c.tol > 0.0 {
        eprintln!(
            "logot: warning: not converged after {} iterations (marginal error {:.3e} > tol {:.1e})",
            c.iterations, c.marginal_error, c.tol
        );
    }
    json!({
        "distance": r.distance.iter().map(|d| d.f64()).collect::<Vec<f64>>(),
        "iterations": c.iterations,
        "marginal_error": c.marginal_error,
        "converged": c.converged,
        "eps": r.eps,
        "dtype": T::NAME,
    })
}

fn run_wasserstein<T: Real, B: Backend<T>>(backend: B, a: &WassersteinArgs) -> Json {
    let inputs = Inputs::<T>::load(&a.solve)?;
    let problem = inputs.problem()?;
    let res = Solver::new(backend, a.solve.params_for(&problem)).solve(&problem)?;
    Ok(report(&res))
}

fn run_coupling<T: Real, B: Backend<T>>(backend: B, a: &CouplingArgs) -> Json {
    let inputs = Inputs::<T>::load(&a.solve)?;
    let problem = inputs.problem()?;
    let c = Solver::new(backend, a.solve.params_for(&problem)).coupling(&problem)?;
    if inputs.single {
        npy::write(&a.out, c.plan.index_axis(Axis(0), 0))?;
    } else {
        npy::write(&a.out, c.plan.view())?;
    }
    Ok(report(&c.result))
}

/// `wasserstein --x --y` with `--grad-x/--grad-y`: envelope gradients of OT_ε with respect
/// to the points (P applied on the fly), written as .npy.
fn run_point_gradients<T: Real, B: PointCloudKernels<T>>(backend: B, a: &WassersteinArgs) -> Json {
    let inputs = Inputs::<T>::load(&a.solve)?;
    if inputs.points.is_none() {
        return Err(Error::parameter(
            "--grad-x/--grad-y",
            "given",
            "gradients with respect to points need point clouds (--x and --y)",
        ));
    }
    let problem = inputs.problem()?;
    let g = Solver::new(backend, a.solve.params_for(&problem)).point_gradients(&problem)?;
    for (path, grad) in [(&a.grad_x, &g.x), (&a.grad_y, &g.y)] {
        if let Some(path) = path {
            if inputs.single {
                npy::write(path, grad.index_axis(Axis(0), 0))?;
            } else {
                npy::write(path, grad.view())?;
            }
        }
    }
    let mut out = report(&g.result);
    out["ot_eps"] = json!(g.value.iter().map(|v| v.f64()).collect::<Vec<f64>>());
    Ok(out)
}

/// `wasserstein` with `--grad-*`: exact gradients of ⟨P,C⟩, written as .npy.
fn run_gradients<T: Real>(a: &WassersteinArgs) -> Json {
    let inputs = Inputs::<T>::load(&a.solve)?;
    if inputs.points.is_some() {
        return Err(Error::Unavailable(
            "--grad-mu/--grad-nu/--grad-cost need a dense --cost (the implicit gradient forms P); with --x/--y use \
             --grad-x/--grad-y (gradients of OT_ε with respect to the points)"
                .into(),
        ));
    }
    let cg = CgParams {
        max_iters: a.cg_iters,
        tol: a.cg_tol,
    };
    let g =
        Solver::new(CpuBackend, a.solve.params()).wasserstein_gradients(&inputs.problem()?, &cg)?;
    if let Some(path) = &a.grad_mu {
        write_batch(path, g.mu.view(), inputs.single)?;
    }
    if let Some(path) = &a.grad_nu {
        write_batch(path, g.nu.view(), inputs.single)?;
    }
    if let Some(path) = &a.grad_cost {
        if inputs.single {
            npy::write(path, g.cost.index_axis(Axis(0), 0))?;
        } else {
            npy::write(path, g.cost.view())?;
        }
    }
    if !g.cg.all_converged() {
        eprintln!(
            "logot: warning: the adjoint CG solve did not converge for {} problem(s) (max relative residual {:.3e} > tol {:.1e})",
            g.cg.failures(),
            g.cg.max_residual(),
            g.cg.tol
        );
    }
    let mut out = report(&g.result);
    out["gradient_cg"] = json!({
        "iterations": g.cg.max_iterations(),
        "residual": g.cg.max_residual(),
        "converged": g.cg.all_converged(),
    });
    Ok(out)
}

/// Write a `B×k` array, dropping the batch axis for a single problem.
fn write_batch<T: Real>(path: &str, a: ndarray::ArrayView2<'_, T>, single: bool) -> Result<()> {
    if single {
        npy::write(path, a.index_axis(Axis(0), 0))
    } else {
        npy::write(path, a)
    }
}

pub fn wasserstein(a: &WassersteinArgs) -> Json {
    if a.grad_x.is_some() || a.grad_y.is_some() {
        if a.wants_gradients() {
            return Err(Error::parameter(
                "--grad-x/--grad-y",
                "given",
                "cannot be combined with --grad-mu/--grad-nu/--grad-cost",
            ));
        }
        return dispatch!(a.solve.dtype()?, a.solve.backend, run_point_gradients, a);
    }
    if a.wants_gradients() {
        if a.solve.backend != BackendChoice::Cpu {
            return Err(Error::Unavailable(
                "--grad-mu/--grad-nu/--grad-cost: gradients run on the CPU backend only for now; use --backend cpu".into(),
            ));
        }
        return match a.solve.dtype()? {
            Dtype::F32 => run_gradients::<f32>(a),
            Dtype::F64 => run_gradients::<f64>(a),
        };
    }
    dispatch!(a.solve.dtype()?, a.solve.backend, run_wasserstein, a)
}

pub fn coupling(a: &CouplingArgs) -> Json {
    dispatch!(a.solve.dtype()?, a.solve.backend, run_coupling, a)
}
