//! `logot gw` and `logot fgw`: (fused) Gromov–Wasserstein (POT's `ot.gromov`) between two
//! structure matrices, or (`gw`) between two point clouds with squared-Euclidean structures
//! in linear memory. With `--eps` the entropic mirror descent, without it the exact
//! conditional gradient; the value and the report of the returned plan as JSON, the plan
//! written as .npy.

use crate::npy::{self, Dtype};
use crate::output::Outputs;
use crate::{flags, input, BackendChoice, Json};
use logot::backend::grad::GradKernels;
use logot::backend::linalg::LinalgKernels;
use logot::backend::PointCloudKernels;
use logot::gromov::{
    ConditionalGradient, ConditionalGradientParams, EntropicGwParams, GromovProblem, GromovSolver,
    GwLoss, PointGromovProblem, PointGromovSolver, PointGwParams,
};
use logot::{Error, Real, Result};
use ndarray::{Array1, Array2, Ix1, Ix2};
use serde_json::json;
use std::time::Instant;

/// The arguments `gw` and `fgw` share.
#[derive(clap::Args, Debug)]
pub struct GwArgs {
    /// Structure of the source space: n×n (.npy float32/float64, or FILE.npz:NAME); ≥ 0
    /// for --loss kl.
    #[arg(long, required_unless_present = "x", conflicts_with_all = ["x", "y"], requires = "c2")]
    pub c1: Option<String>,
    /// Structure of the target space: m×m; > 0 for --loss kl.
    #[arg(long, requires = "c1")]
    pub c2: Option<String>,
    /// Source points (n×d) instead of --c1: C1 = |x_i − x_k|², never formed (entropic,
    /// square loss; memory O((n + m)·d)).
    #[arg(long, requires = "y")]
    pub x: Option<String>,
    /// Target points (m×d', any d') instead of --c2: C2 = |y_j − y_l|².
    #[arg(long, requires = "x")]
    pub y: Option<String>,
    /// Weights of the source points: n, non-negative (default: uniform, 1/n).
    #[arg(long)]
    pub p: Option<String>,
    /// Weights of the target points: m, of the same total as --p (default: uniform, 1/m).
    #[arg(long)]
    pub q: Option<String>,
    /// Entropic GW with regularisation ε (> 0) by mirror descent (POT's
    /// entropic_gromov_wasserstein); without it, exact GW by conditional gradient (POT's
    /// gromov_wasserstein).
    #[arg(long, allow_hyphen_values = true)]
    pub eps: Option<f64>,
    /// The loss between structure entries: square (a − b)², or kl a·log(a/b) − a + b.
    #[arg(long, value_enum, default_value_t = LossChoice::Square)]
    pub loss: LossChoice,
    /// Whether C1 and C2 are symmetric: auto tests them as POT does (allclose(C, Cᵀ)); no
    /// uses the gradient of the loss for any structures.
    #[arg(long, value_enum, default_value_t = Symmetry::Auto)]
    pub symmetric: Symmetry,
    /// The initial plan: product (p·qᵀ) or an n×m .npy (non-negative; with marginals p
    /// and q for the exact solver).
    #[arg(long, default_value = "product")]
    pub init: String,
    /// The most outer iterations (default: POT's, 1000 entropic, 10000 exact).
    #[arg(long, allow_hyphen_values = true)]
    pub max_iters: Option<usize>,
    /// Entropic: stop when ‖T − T_prev‖_F ≤ tol at a check (every 10 iterations, POT's
    /// rule); point clouds: when the plan's moments change by at most tol relative; exact:
    /// when the objective changes by at most tol, absolute or relative. 0 runs --max-iters.
    #[arg(long, allow_hyphen_values = true, default_value_t = 1e-9)]
    pub tol: f64,
    /// The most iterations of each inner Sinkhorn solve (entropic).
    #[arg(long, allow_hyphen_values = true, default_value_t = 1000)]
    pub inner_iters: usize,
    /// Marginal tolerance of each inner Sinkhorn solve, relative to the mass (default:
    /// 1e-9 in float64, 1e-5 in float32).
    #[arg(long, allow_hyphen_values = true)]
    pub inner_tol: Option<f64>,
    /// Write the plan T (n×m) as .npy; with --x/--y it is formed from the potentials, so
    /// only for problems whose n×m plan fits in memory.
    #[arg(long)]
    pub plan: Option<String>,
    /// Where to compute.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// Compute in float32 whatever the input dtypes.
    #[arg(long, conflicts_with = "f64")]
    pub f32: bool,
    /// Compute in float64 whatever the input dtypes (default: float64 when any input is
    /// float64, float32 when all are).
    #[arg(long)]
    pub f64: bool,
}

/// `logot fgw`: the shared arguments, a feature cost and the trade-off.
#[derive(clap::Args, Debug)]
pub struct FgwArgs {
    #[command(flatten)]
    pub gw: GwArgs,
    /// Feature cost M between the two spaces: n×m.
    #[arg(long)]
    pub m: String,
    /// Weight α ∈ [0, 1] of the structure term: F(T) = (1 − α)·⟨M, T⟩ + α·⟨L⊗T, T⟩.
    #[arg(long, allow_hyphen_values = true, default_value_t = 0.5)]
    pub alpha: f64,
}

/// `--loss`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LossChoice {
    /// (a − b)² (POT's square_loss).
    Square,
    /// a·log(a/b) − a + b (POT's kl_loss).
    Kl,
}

/// `--symmetric`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Symmetry {
    /// Tested as POT does.
    Auto,
    /// Treated as symmetric.
    Yes,
    /// Treated as not symmetric.
    No,
}

/// The feature cost of `fgw`: its file and `α`.
type Fused<'a> = Option<(&'a str, f64)>;

impl GwArgs {
    fn loss(&self) -> GwLoss {
        match self.loss {
            LossChoice::Square => GwLoss::Square,
            LossChoice::Kl => GwLoss::Kl,
        }
    }

    fn symmetric(&self) -> Option<bool> {
        match self.symmetric {
            Symmetry::Auto => None,
            Symmetry::Yes => Some(true),
            Symmetry::No => Some(false),
        }
    }

    /// The initial plan's file, `None` for the product plan.
    fn init_file(&self) -> Option<&str> {
        (self.init != "product").then_some(self.init.as_str())
    }

    fn inputs<'a>(&'a self, fused: Fused<'a>) -> Vec<(&'static str, Option<&'a str>)> {
        vec![
            ("--c1", self.c1.as_deref()),
            ("--c2", self.c2.as_deref()),
            ("--x", self.x.as_deref()),
            ("--y", self.y.as_deref()),
            ("--p", self.p.as_deref()),
            ("--q", self.q.as_deref()),
            ("--m", fused.map(|(m, _)| m)),
            ("--init", self.init_file()),
        ]
    }

    fn entropic(&self, eps: f64) -> EntropicGwParams {
        let mut p = EntropicGwParams::new(eps)
            .loss(self.loss())
            .symmetric(self.symmetric())
            .tol(self.tol)
            .inner_max_iters(self.inner_iters)
            .inner_tol(self.inner_tol);
        if let Some(k) = self.max_iters {
            p = p.max_iters(k);
        }
        p
    }

    fn point(&self, eps: f64) -> PointGwParams {
        let mut p = PointGwParams::new(eps)
            .tol(self.tol)
            .inner_max_iters(self.inner_iters)
            .inner_tol(self.inner_tol);
        if let Some(k) = self.max_iters {
            p = p.max_iters(k);
        }
        p
    }

    fn exact(&self) -> ConditionalGradientParams {
        let mut p = ConditionalGradientParams::default()
            .loss(self.loss())
            .symmetric(self.symmetric())
            .tol_rel(self.tol)
            .tol_abs(self.tol);
        if let Some(k) = self.max_iters {
            p = p.max_iters(k);
        }
        p
    }
}

/// The library's names of the GW arguments and this command's flags.
const FLAGS: &[(&str, &str)] = &[
    ("c1", "--c1"),
    ("c2", "--c2"),
    ("x", "--x"),
    ("y", "--y"),
    ("p", "--p"),
    ("q", "--q"),
    ("m", "--m"),
    ("alpha", "--alpha"),
    ("g0", "--init"),
    ("eps", "--eps"),
    ("max_iters", "--max-iters"),
    ("tol", "--tol"),
    ("tol_rel", "--tol"),
    ("tol_abs", "--tol"),
    ("inner_max_iters", "--inner-iters"),
    ("inner_tol", "--inner-tol"),
];

/// A library error in this command's names: the argument, and the matrix or cloud a shape
/// error compares it with.
fn cli_error(e: Error) -> Error {
    flags::command_error(
        e,
        FLAGS,
        &[
            ("c1 ", "--c1 "),
            ("c2 ", "--c2 "),
            ("x ", "--x "),
            ("y ", "--y "),
        ],
    )
}

/// A 2-D input.
fn matrix<T: Real>(spec: &str, arg: &str) -> Result<Array2<T>> {
    npy::fixed::<T, Ix2>(input::read::<T>(spec, arg, &[2])?, arg)
}

/// Weights of `len` points: the file's (1-D), or uniform.
fn weights<T: Real>(spec: Option<&str>, arg: &str, len: usize) -> Result<Array1<T>> {
    match spec {
        Some(s) => npy::fixed::<T, Ix1>(input::read::<T>(s, arg, &[1])?, arg),
        None => Ok(Array1::from_elem(len, T::of(1.0 / len as f64))),
    }
}

/// The JSON fields every method reports.
fn common(a: &GwArgs, method: &str, dtype: &str, backend: &str) -> serde_json::Value {
    json!({
        "method": method,
        "loss": match a.loss { LossChoice::Square => "square", LossChoice::Kl => "kl" },
        "dtype": dtype,
        "backend": backend,
    })
}

fn merge(mut base: serde_json::Value, more: serde_json::Value) -> serde_json::Value {
    if let (Some(b), serde_json::Value::Object(m)) = (base.as_object_mut(), more) {
        b.extend(m);
    }
    base
}

/// Point-cloud GW: the entropic mirror descent on `--x`/`--y` in linear memory.
fn run_points<T: Real, B>(be: B, a: &GwArgs, outs: &mut Outputs) -> Json
where
    B: LinalgKernels<T> + PointCloudKernels<T> + Clone,
{
    let refuse = |arg: &str, value: &str, why: &str| Err(Error::parameter(arg, value, why));
    let Some(eps) = a.eps else {
        return refuse(
            "--eps",
            "absent",
            "point clouds (--x/--y) are solved by entropic GW: give --eps (or --c1/--c2 for exact GW)",
        );
    };
    if a.loss != LossChoice::Square {
        return refuse(
            "--loss",
            "kl",
            "point clouds (--x/--y) have squared-Euclidean structures and the square loss",
        );
    }
    if let Some(f) = a.init_file() {
        return refuse(
            "--init",
            f,
            "point-cloud GW starts from the product plan; give --c1/--c2 to start elsewhere",
        );
    }
    let x = matrix::<T>(a.x.as_deref().unwrap_or_default(), "--x")?;
    let y = matrix::<T>(a.y.as_deref().unwrap_or_default(), "--y")?;
    let p = weights::<T>(a.p.as_deref(), "--p", x.nrows())?;
    let q = weights::<T>(a.q.as_deref(), "--q", y.nrows())?;
    let problem = PointGromovProblem::new(x.view(), y.view(), p.view(), q.view())?;
    outs.check_room(
        "--plan",
        "the plan",
        &[x.nrows(), y.nrows()],
        std::mem::size_of::<T>(),
    )?;
    let start = Instant::now();
    let r = PointGromovSolver::new(be, a.point(eps)).solve(&problem)?;
    let solve_ms = start.elapsed().as_secs_f64() * 1e3;
    if outs.has("--plan") {
        outs.write("--plan", r.plan()?.mapv(T::of).view())?;
    }
    let rep = &r.report;
    Ok(json!({
        "value": r.value,
        "linear": 0.0,
        "quadratic": r.value,
        "converged": rep.converged,
        "iterations": rep.iterations,
        "step": rep.step,
        "stationarity": rep.stationarity,
        "marginal_error": rep.marginal_error,
        "inner_iterations": rep.inner_iterations,
        "inner_unconverged": rep.inner_unconverged,
        "eps": eps,
        "alpha": 1.0,
        "symmetric": true,
        "solve_ms": solve_ms,
    }))
}

/// The JSON fields of a dense GW result `$r` that both methods (entropic, conditional
/// gradient) report.
macro_rules! dense_fields {
    ($r:expr, $alpha:expr, $solve_ms:expr) => {
        json!({
            "value": $r.value,
            "linear": $r.linear,
            "quadratic": $r.quadratic,
            "converged": $r.report.converged,
            "iterations": $r.report.iterations,
            "marginal_error": $r.report.marginal_error,
            "alpha": $alpha,
            "symmetric": $r.symmetric,
            "solve_ms": $solve_ms,
        })
    };
}

/// Dense (fused) GW on `--c1`/`--c2`: entropic with `--eps`, exact without.
fn run_dense<T: Real, B>(be: B, a: &GwArgs, fused: Fused<'_>, outs: &mut Outputs) -> Json
where
    B: LinalgKernels<T> + GradKernels<T> + Clone,
{
    let c1 = matrix::<T>(a.c1.as_deref().unwrap_or_default(), "--c1")?;
    let c2 = matrix::<T>(a.c2.as_deref().unwrap_or_default(), "--c2")?;
    let p = weights::<T>(a.p.as_deref(), "--p", c1.nrows())?;
    let q = weights::<T>(a.q.as_deref(), "--q", c2.nrows())?;
    let m = fused.map(|(m, _)| matrix::<T>(m, "--m")).transpose()?;
    let init = a
        .init_file()
        .map(|f| matrix::<T>(f, "--init"))
        .transpose()?;
    let mut problem = match (&m, fused) {
        (Some(m), Some((_, alpha))) => {
            GromovProblem::fused(m.view(), c1.view(), c2.view(), p.view(), q.view(), alpha)?
        }
        _ => GromovProblem::new(c1.view(), c2.view(), p.view(), q.view())?,
    };
    if let Some(g0) = &init {
        problem = problem.with_init(g0.view())?;
    }
    outs.check_room(
        "--plan",
        "the plan",
        &[c1.nrows(), c2.nrows()],
        std::mem::size_of::<T>(),
    )?;
    let alpha = problem.alpha();
    match a.eps {
        Some(eps) => {
            let start = Instant::now();
            let r = GromovSolver::new(be, a.entropic(eps)).solve(&problem)?;
            let solve_ms = start.elapsed().as_secs_f64() * 1e3;
            outs.write("--plan", r.plan.view())?;
            let rep = &r.report;
            let fields = json!({
                "step": rep.step,
                "stationarity": rep.stationarity,
                "inner_iterations": rep.inner_iterations,
                "inner_unconverged": rep.inner_unconverged,
                "newton_steps": rep.newton_steps,
                "eps": eps,
            });
            Ok(merge(dense_fields!(r, alpha, solve_ms), fields))
        }
        None => {
            let start = Instant::now();
            let r = ConditionalGradient::new(be, a.exact()).solve_network_simplex(&problem)?;
            let solve_ms = start.elapsed().as_secs_f64() * 1e3;
            outs.write("--plan", r.plan.view())?;
            let fields = json!({ "stationarity": r.report.gap, "gap": r.report.gap });
            Ok(merge(dense_fields!(r, alpha, solve_ms), fields))
        }
    }
}

fn run<T: Real, B>(be: B, a: &GwArgs, fused: Fused<'_>, outs: &mut Outputs) -> Json
where
    B: LinalgKernels<T> + GradKernels<T> + PointCloudKernels<T> + Clone,
{
    let (method, body) = if a.x.is_some() {
        ("point_cloud", run_points::<T, B>(be, a, outs)?)
    } else if a.eps.is_some() {
        ("entropic", run_dense::<T, B>(be, a, fused, outs)?)
    } else {
        (
            "conditional_gradient",
            run_dense::<T, B>(be, a, fused, outs)?,
        )
    };
    Ok(merge(common(a, method, T::NAME, a.backend.name()), body))
}

fn command(a: &GwArgs, fused: Fused<'_>) -> Json {
    if let (Some(_), Some(_)) = (fused, &a.x) {
        return Err(Error::parameter(
            "--x",
            a.x.as_deref().unwrap_or_default(),
            "fused GW takes structure matrices --c1/--c2 (point clouds are for logot gw)",
        ));
    }
    let inputs = a.inputs(fused);
    let mut outs = Outputs::prepare(&inputs, &[("--plan", a.plan.as_deref())])?;
    let dtype: Dtype = input::precision(a.f32, a.f64, &inputs)?;
    let mut out = dispatch!(dtype, a.backend, run, a, fused, &mut outs).map_err(cli_error)?;
    out["outputs"] = outs.commit()?;
    Ok(out)
}

/// `logot gw`.
pub fn gw(a: &GwArgs) -> Json {
    command(a, None)
}

/// `logot fgw`.
pub fn fgw(a: &FgwArgs) -> Json {
    command(&a.gw, Some((a.m.as_str(), a.alpha)))
}

/// `logot bench --problem gw` / `gwpc` (see `logot_cli::problems::gw`, `gw_clouds`): the
/// whole solve from host arrays timed (uploads, every outer iteration, the plan or the
/// potentials read back).
pub fn bench(dtype: Dtype, a: &crate::bench::BenchArgs) -> Json {
    dispatch!(dtype, a.backend, run_bench, a)
}

fn run_bench<T: Real, B>(be: B, a: &crate::bench::BenchArgs) -> Json
where
    B: LinalgKernels<T> + GradKernels<T> + PointCloudKernels<T> + Clone,
{
    use crate::bench::{time_runs_for, BenchProblem};
    use logot_cli::problems;
    let mut out = if a.problem == BenchProblem::Gw {
        let n = a.points.unwrap_or(problems::GW_N);
        let m = if a.points.is_some() {
            (5 * n).div_ceil(4)
        } else {
            problems::GW_M
        };
        let (c1, c2, p, q) = problems::gw::<T>(n, m);
        let problem = GromovProblem::new(c1.view(), c2.view(), p.view(), q.view())?;
        let mut params =
            EntropicGwParams::new(problems::GW_EPS).fixed_iterations(problems::GW_ITERS);
        if let Some(gp) = a.gemm_precision {
            params = params.cross_precision(gp);
        }
        let cross_precision = params.cross_precision;
        let solver = GromovSolver::new(be, params);
        let mut last = None;
        let (median, min, all) = time_runs_for(a, || {
            last = Some(solver.solve(&problem)?);
            Ok(())
        })?;
        let r = last.ok_or_else(|| Error::Numerical("no run completed".into()))?;
        let rep = &r.report;
        json!({
            "problem": "gw", "ms": median, "min_ms": min, "runs_ms": all,
            "n": n, "m": m, "eps": problems::GW_EPS,
            "gemm_precision": cross_precision.name(),
            "iterations": rep.iterations,
            "inner_iterations": rep.inner_iterations,
            "inner_unconverged": rep.inner_unconverged,
            "newton_steps": rep.newton_steps,
            "value": r.value,
            "marginal_error": rep.marginal_error,
            "stationarity": rep.stationarity,
        })
    } else {
        let (n, d) = (
            a.points.unwrap_or(problems::GWPC_N),
            a.dim.unwrap_or(problems::GWPC_D),
        );
        let (x, y, p, q) = problems::gw_clouds::<T>(n, d);
        let problem = PointGromovProblem::new(x.view(), y.view(), p.view(), q.view())?;
        let solver = PointGromovSolver::new(
            be,
            PointGwParams::new(problems::GWPC_EPS)
                .fixed_iterations(problems::GWPC_ITERS)
                .inner_max_iters(problems::GWPC_INNER),
        );
        let mut last = None;
        let (median, min, all) = time_runs_for(a, || {
            last = Some(solver.solve(&problem)?);
            Ok(())
        })?;
        let r = last.ok_or_else(|| Error::Numerical("no run completed".into()))?;
        let rep = &r.report;
        json!({
            "problem": "gwpc", "ms": median, "min_ms": min, "runs_ms": all,
            "n": n, "m": n, "d": d, "eps": problems::GWPC_EPS,
            "iterations": rep.iterations,
            "inner_iterations": rep.inner_iterations,
            "inner_max_iterations": problems::GWPC_INNER,
            "inner_unconverged": rep.inner_unconverged,
            "value": r.value,
            "marginal_error": rep.marginal_error,
            "stationarity": rep.stationarity,
        })
    };
    out["backend"] = a.backend.name().into();
    out["dtype"] = T::NAME.into();
    Ok(out)
}
