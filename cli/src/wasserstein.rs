//! `logot wasserstein` and `logot coupling`.

use crate::npy::{self, Dtype};
use crate::output::Outputs;
use crate::relax::{transported_mass, RelaxArgs};
use crate::{input, BackendChoice, Json};
use logot::{
    Backend, CgParams, CostSource, CpuBackend, CrossPrecision, EpsScaling, Error, PointCloudCost,
    PointCloudKernels, PointMetric, Problem, Real, Relaxation, Result, SinkhornParams,
    SinkhornResult, SinkhornSolver,
};
use ndarray::{Array2, Array3, ArrayD, Axis, Ix2, Ix3};
use rayon::prelude::*;
use serde_json::json;

/// Inputs and solver options shared by `wasserstein` and `coupling`.
#[derive(clap::Args, Debug)]
pub struct SolveArgs {
    /// Source histogram(s): n (one problem) or B×n (a batch); .npy float32/float64, or a
    /// .npz member as FILE.npz:NAME. Optional with --x/--y: uniform weights (1/n each, or
    /// the mass of --nu's rows spread evenly when only --nu is given).
    #[arg(long, required_unless_present = "x")]
    pub mu: Option<String>,
    /// Target histogram(s): m or B×m. Optional with --x/--y (uniform, as --mu).
    #[arg(long, required_unless_present = "x")]
    pub nu: Option<String>,
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
    #[command(flatten)]
    pub precision: PrecisionArgs,
    /// Anneal ε from the largest cost (the squared diameter of --x/--y, or the largest
    /// entry of --cost) down to --eps, halving it every few iterations, before the main
    /// loop: much faster at small ε (iterations differ from POT's plain loop).
    #[arg(long)]
    pub eps_scaling: bool,
    /// Regularisation strength ε (> 0).
    #[arg(long, allow_hyphen_values = true)]
    pub eps: f64,
    #[command(flatten)]
    pub relax: RelaxArgs,
    /// The most iterations run (each a g then an f half-step), ε-scaling stages included;
    /// fewer when --tol is met at a check.
    #[arg(long, allow_hyphen_values = true, default_value_t = 1000)]
    pub iters: usize,
    /// Marginal-error target relative to each problem's total mass (default: 1e-9 in f64,
    /// 1e-5 in f32); with --reg-m*, the ℓ₁ violation of the unbalanced optimality
    /// conditions relative to the larger mass. With --tol 0 all iterations run and
    /// `converged` says whether the final plan meets the default tolerance of the precision.
    #[arg(long, allow_hyphen_values = true)]
    pub tol: Option<f64>,
    /// Write the potentials f = ε log u (n, or B×n for a batch; −inf on zero-mass bins).
    #[arg(long)]
    pub out_f: Option<String>,
    /// Write the potentials g = ε log v (m, or B×m).
    #[arg(long)]
    pub out_g: Option<String>,
    /// Where to compute.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// With --backend cuda: the GPUs to solve on, e.g. 0,1 (default: GPU 0). Several GPUs
    /// split the target points of --x/--y or of a shared --cost, or the problems of a
    /// batch of costs, and are joined by NCCL.
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
    #[arg(long, allow_hyphen_values = true)]
    pub cg_tol: Option<f64>,
    /// Maximum CG iterations of the adjoint solve.
    #[arg(long, allow_hyphen_values = true, default_value_t = 1000)]
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

/// `--precision` of the point-cloud commands (`wasserstein`, `coupling` with `--x/--y`, and
/// `divergence`).
#[derive(clap::Args, Debug)]
pub struct PrecisionArgs {
    /// How the CUDA backend forms x·y for float32 clouds above 16 dimensions: f16x2 (split
    /// f16 of coordinates scaled by a power of two, about 2^-22 of the largest coordinate;
    /// the default, distances within 1e-5 of float64), tf32x3 (split TF32, about 2^-21 per
    /// product, slower), exact (f32 products, slowest), tf32 (one TF32 product, about 1e-3
    /// relative per product) or f16 (one f16 product, fastest). The CPU backend and float64
    /// always use exact products.
    #[arg(long, value_parser = precision_parser(), requires = "x")]
    pub precision: Option<CrossPrecision>,
}

impl PrecisionArgs {
    /// The cross-term precision asked for (f16x2 when `--precision` is absent).
    pub fn cross(&self) -> CrossPrecision {
        self.precision.unwrap_or_default()
    }
}

/// `--precision`'s parser: the names of [`CrossPrecision::ALL`] ([`CrossPrecision::name`]),
/// a bad value refused with the list.
pub fn precision_parser() -> impl clap::builder::TypedValueParser<Value = CrossPrecision> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(CrossPrecision::ALL.map(CrossPrecision::name)).try_map(
        |name| {
            CrossPrecision::from_name(&name).ok_or_else(|| format!("no precision is named {name}"))
        },
    )
}

impl Metric {
    pub fn point_metric(self) -> PointMetric {
        match self {
            Metric::Sqeuclidean => PointMetric::SqEuclidean,
            Metric::Euclidean => PointMetric::Euclidean,
        }
    }
}

impl SolveArgs {
    /// The input files, by flag.
    pub fn inputs(&self) -> [(&'static str, Option<&str>); 5] {
        [
            ("--mu", self.mu.as_deref()),
            ("--nu", self.nu.as_deref()),
            ("--cost", self.cost.as_deref()),
            ("--x", self.x.as_deref()),
            ("--y", self.y.as_deref()),
        ]
    }

    /// The shape of the plans these inputs describe, from the files' headers alone (before
    /// anything is read): `[n, m]` for one problem, `[B, n, m]` for a batch; `None` when the
    /// headers do not say (reading the inputs then reports why).
    pub fn plan_shape(&self) -> Result<Option<Vec<usize>>> {
        let header = |spec: Option<&str>, arg: &str| -> Result<Option<Vec<usize>>> {
            spec.map(|s| input::header_of(s, arg).map(|h| h.shape))
                .transpose()
        };
        let (mu, nu) = (
            header(self.mu.as_deref(), "--mu")?,
            header(self.nu.as_deref(), "--nu")?,
        );
        let cost = header(self.cost.as_deref(), "--cost")?;
        let (x, y) = (
            header(self.x.as_deref(), "--x")?,
            header(self.y.as_deref(), "--y")?,
        );
        // The `k`-th dimension from the end of a shape, when it has one.
        let back = |s: &Option<Vec<usize>>, k: usize| {
            s.as_ref()
                .and_then(|s| s.len().checked_sub(k).map(|i| s[i]))
        };
        let n = back(&x, 2).or(back(&mu, 1)).or(back(&cost, 2));
        let m = back(&y, 2).or(back(&nu, 1)).or(back(&cost, 1));
        let batch = [(&mu, 2), (&nu, 2), (&cost, 3), (&x, 3)]
            .iter()
            .filter(|(s, ndim)| s.as_ref().is_some_and(|s| s.len() == *ndim))
            .map(|(s, _)| s.as_ref().map_or(1, |s| s[0]))
            .max();
        Ok(match (n, m, batch) {
            (Some(n), Some(m), None) => Some(vec![n, m]),
            (Some(n), Some(m), Some(b)) => Some(vec![b, n, m]),
            _ => None,
        })
    }

    /// Refuse, before any input is read and any iteration run, the plans' output (`flag`:
    /// `coupling --out`) when it cannot be made: the plans' values in `dtype` past what
    /// can be allocated, or the file past its file system's room ([`Outputs::check_room`]).
    pub fn check_plan_output(&self, outs: &Outputs, flag: &str, dtype: Dtype) -> Result<()> {
        if !outs.has(flag) {
            return Ok(());
        }
        let Some(shape) = self.plan_shape()? else {
            return Ok(());
        };
        let (item, name) = match dtype {
            Dtype::F32 => (4, "float32"),
            Dtype::F64 => (8, "float64"),
        };
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let what = format!("the {} {name} plan", dims.join("×"));
        let bytes = shape.iter().try_fold(item, |a: usize, &d| a.checked_mul(d));
        if bytes.is_none_or(|b| Vec::<u8>::new().try_reserve_exact(b).is_err()) {
            return Err(Error::OutOfMemory {
                what: flag.into(),
                detail: format!(
                    "{what} needs {}, which cannot be allocated",
                    bytes.map_or("more bytes than the address space holds".into(), |b| {
                        format!("{} ({b} bytes)", crate::output::human_bytes(b as u64))
                    })
                ),
            });
        }
        outs.check_room(flag, &what, &shape, item)
    }

    /// Precision: `--f32`/`--f64`, else numpy's promotion of the inputs' dtypes.
    pub fn dtype(&self) -> Result<Dtype> {
        input::precision(self.f32, self.f64, &self.inputs())
    }

    /// The solver's parameters.
    pub fn params(&self) -> Result<SinkhornParams> {
        let mut p = SinkhornParams::new(self.eps).max_iters(self.iters);
        p.tol = self.tol;
        p.observer = crate::progress::bar("sinkhorn");
        Ok(p)
    }

    /// [`SolveArgs::params`] with the ε-scaling of `--eps-scaling` for this problem's cost.
    pub fn params_for<T: Real>(&self, problem: &Problem<'_, T>) -> Result<SinkhornParams> {
        let p = self.params()?;
        if !self.eps_scaling {
            return Ok(p);
        }
        let max_cost = match problem.cost() {
            CostSource::PointCloud(c) => c.max_cost(),
            CostSource::Dense(c) => c.iter().fold(0.0f64, |m, v| m.max(v.f64())),
            CostSource::DenseBatch(c) => c.iter().fold(0.0f64, |m, v| m.max(v.f64())),
            _ => 1.0,
        };
        Ok(p.eps_scaling(EpsScaling::from_max_cost(max_cost)))
    }
}

/// Arrays of one CLI problem, in precision `T`.
pub struct Inputs<T> {
    pub mu: Array2<T>,
    pub nu: Array2<T>,
    /// The dense cost (empty when the cost comes from point clouds).
    pub cost: ArrayD<T>,
    /// Point clouds for `--x/--y`.
    pub points: Option<Clouds<T>>,
    /// How the GPU forms their cross term (`--precision`).
    pub precision: CrossPrecision,
    /// `mu` was 1-D (a single problem): outputs drop the batch axis.
    pub single: bool,
    /// The relaxation of `--reg-m*` (unbalanced problems).
    pub relaxation: Option<Relaxation>,
}

/// The point clouds of `--x/--y`: one pair shared by the batch (`n×d`, `m×d` files, stored
/// here as `1×n×d`, `1×m×d`) or one pair per problem (`B×n×d`, `B×m×d` files).
pub struct Clouds<T> {
    pub x: Array3<T>,
    pub y: Array3<T>,
    /// The files were 3-D: one pair per problem.
    pub batched: bool,
    pub metric: PointMetric,
}

impl<T: Real> Clouds<T> {
    /// Read `--x` and `--y`: both 2-D or both 3-D.
    pub fn read(xp: &str, yp: &str, metric: PointMetric) -> Result<Self> {
        let x = input::read::<T>(xp, "--x", &[2, 3])?;
        let y = input::read::<T>(yp, "--y", &[2, 3])?;
        if x.ndim() != y.ndim() {
            return Err(Error::shape(
                "--y",
                format!(
                    "is {}-D but --x is {}-D (both n×d and m×d, or both B×n×d and B×m×d)",
                    y.ndim(),
                    x.ndim()
                ),
            ));
        }
        let batched = x.ndim() == 3;
        let three = |a: ArrayD<T>, arg: &str| -> Result<Array3<T>> {
            let a = if batched { a } else { a.insert_axis(Axis(0)) };
            npy::fixed::<T, Ix3>(a, arg)
        };
        Ok(Clouds {
            x: three(x, "--x")?,
            y: three(y, "--y")?,
            batched,
            metric,
        })
    }

    /// `(problems, n, m)`: `B` pairs when batched (1 when shared), and the points per cloud.
    pub fn dims(&self) -> (usize, usize, usize) {
        (self.x.dim().0, self.x.dim().1, self.y.dim().1)
    }

    /// The cost (errors name `--x`/`--y`).
    pub fn cost(&self) -> Result<PointCloudCost<'_, T>> {
        let cost = if self.batched {
            PointCloudCost::batched_with_metric(self.x.view(), self.y.view(), self.metric)
        } else {
            PointCloudCost::with_metric(
                self.x.index_axis(Axis(0), 0),
                self.y.index_axis(Axis(0), 0),
                self.metric,
            )
        };
        cost.map_err(flag_names)
    }
}

/// A histogram file as `B×k` (a 1-D file is one problem); `true` when it was 1-D.
fn read_histograms<T: Real>(path: &str, arg: &str) -> Result<(Array2<T>, bool)> {
    let v = input::read::<T>(path, arg, &[1, 2])?;
    if v.ndim() == 1 {
        let n = v.len();
        let v = v
            .into_shape_with_order((1, n))
            .map_err(|e| Error::shape(arg, e))?;
        Ok((v, true))
    } else {
        Ok((npy::fixed::<T, Ix2>(v, arg)?, false))
    }
}

/// Uniform weights on `k` points carrying the masses of `other`'s rows (`1/k` each for
/// one unit-mass problem, POT's `empirical_*` default).
fn uniform_like<T: Real>(other: &Array2<T>, k: usize) -> Array2<T> {
    Array2::from_shape_fn((other.nrows(), k), |(b, _)| {
        let mass: f64 = other.row(b).iter().map(|v| v.f64()).sum();
        T::of(mass / k as f64)
    })
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
        if let (Some(m), None) = (a.precision.precision, &a.x) {
            return Err(Error::parameter(
                "--precision",
                format!("{m:?}").to_lowercase(),
                "applies to point clouds (--x/--y) only",
            ));
        }
        let mu =
            a.mu.as_deref()
                .map(|p| read_histograms::<T>(p, "--mu"))
                .transpose()?;
        let nu =
            a.nu.as_deref()
                .map(|p| read_histograms::<T>(p, "--nu"))
                .transpose()?;
        if let (Some((_, s_mu)), Some((_, s_nu))) = (&mu, &nu) {
            if s_mu != s_nu {
                let dims = |s: bool| if s { "1-D" } else { "2-D" };
                return Err(Error::shape(
                    "--nu",
                    format!("is {} but --mu is {}", dims(*s_nu), dims(*s_mu)),
                ));
            }
        }
        let (cost, points) = match (&a.cost, &a.x, &a.y) {
            (Some(path), _, _) => (input::read::<T>(path, "--cost", &[2, 3])?, None),
            (None, Some(xp), Some(yp)) => {
                let metric = a.metric.unwrap_or(Metric::Sqeuclidean).point_metric();
                (
                    ArrayD::zeros(vec![0, 0]),
                    Some(Clouds::read(xp, yp, metric)?),
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
        // Weights left out (point clouds only): uniform over the points (one row per pair
        // of batched clouds).
        let (mu, nu, single) = match (mu, nu, points.as_ref().map(|c| (c.dims(), c.batched))) {
            (Some((mu, s)), Some((nu, _)), _) => (mu, nu, s),
            (Some((mu, s)), None, Some(((_, _, m), _))) => {
                let nu = uniform_like(&mu, m);
                (mu, nu, s)
            }
            (None, Some((nu, s)), Some(((_, n, _), _))) => {
                let mu = uniform_like(&nu, n);
                (mu, nu, s)
            }
            (None, None, Some(((problems, n, m), batched))) => {
                let one = Array2::from_elem((problems, 1), T::one());
                (uniform_like(&one, n), uniform_like(&one, m), !batched)
            }
            _ => {
                return Err(Error::parameter(
                    "--mu/--nu",
                    "missing",
                    "give both with --cost (uniform weights are implied for --x/--y only)",
                ))
            }
        };
        Ok(Inputs {
            relaxation: a.relax.relaxation()?,
            mu,
            nu,
            cost,
            points,
            precision: a.precision.cross(),
            single,
        })
    }

    /// The problem of these arrays, relaxed as `--reg-m*` says.
    pub fn problem(&self) -> Result<Problem<'_, T>> {
        let problem = self.unrelaxed_problem()?;
        Ok(match self.relaxation {
            Some(r) => problem.relaxed(r),
            None => problem,
        })
    }

    fn unrelaxed_problem(&self) -> Result<Problem<'_, T>> {
        if let Some(clouds) = &self.points {
            // Errors name the CLI flags.
            let cloud = clouds.cost()?.with_precision(self.precision);
            return Problem::new(self.mu.view(), self.nu.view(), cloud).map_err(flag_names);
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
        Problem::new(self.mu.view(), self.nu.view(), cost)
    }

    /// The regularised objective `OT_ε = ⟨f, μ⟩ + ⟨g, ν⟩ − ε Σ_ij exp((f_i + g_j − C_ij)/ε)`
    /// of each problem at the solver's potentials (dense costs; `None` for point clouds),
    /// accumulated in f64.
    pub fn ot_eps(&self, r: &SinkhornResult<T>) -> Option<Vec<f64>> {
        if self.points.is_some() {
            return None;
        }
        let eps = r.eps;
        let out = (0..self.mu.nrows())
            .map(|b| {
                let cost = if self.cost.ndim() == 3 {
                    self.cost.index_axis(Axis(0), b)
                } else {
                    self.cost.view()
                };
                let (f, g) = (r.f.row(b), r.g.row(b));
                let dot = |p: ndarray::ArrayView1<'_, T>, w: ndarray::ArrayView1<'_, T>| {
                    p.iter()
                        .zip(w)
                        .filter(|(_, w)| **w > T::zero())
                        .map(|(p, w)| p.f64() * w.f64())
                        .sum::<f64>()
                };
                // Row sums in parallel, added in row order: the same bits for any number
                // of threads.
                let rows: Vec<f64> = (0..f.len())
                    .into_par_iter()
                    .map(|i| {
                        let fi = f[i].f64();
                        g.iter()
                            .zip(cost.index_axis(Axis(0), i))
                            .map(|(gj, c)| ((fi + gj.f64() - c.f64()) / eps).exp()) // 0 on −∞
                            .sum::<f64>()
                    })
                    .collect();
                let mass: f64 = rows.iter().sum();
                dot(f, self.mu.row(b)) + dot(g, self.nu.row(b)) - eps * mass
            })
            .collect();
        Some(out)
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
        "tol": c.tol,
        "marginal_errors": c.marginal_errors(),
        "converged_each": c.problems.iter().map(|p| p.converged).collect::<Vec<bool>>(),
        "iterations_each": c.problems.iter().map(|p| p.iterations).collect::<Vec<usize>>(),
        "eps": r.eps,
        "dtype": T::NAME,
    })
}

/// Write `a` (`B×…`) to output `flag`, dropping the batch axis for a single problem.
fn write_batch<T: Real, D: ndarray::RemoveAxis>(
    outs: &mut Outputs,
    flag: &str,
    a: ndarray::ArrayView<'_, T, D>,
    single: bool,
) -> Result<()> {
    if single {
        outs.write(flag, a.index_axis(Axis(0), 0))
    } else {
        outs.write(flag, a)
    }
}

/// The report of a solve with `--out-f/--out-g` written and, for dense costs of a balanced
/// problem, `OT_ε`. An unbalanced solve (`--reg-m*`) reports its objective and `mass`, the
/// mass `Σ P` of each plan (`OT_ε`'s formula is the balanced dual: left out).
fn finish<T: Real>(
    inputs: &Inputs<T>,
    r: &SinkhornResult<T>,
    mass: Option<Vec<f64>>,
    outs: &mut Outputs,
) -> Json {
    write_batch(outs, "--out-f", r.f.view(), inputs.single)?;
    write_batch(outs, "--out-g", r.g.view(), inputs.single)?;
    let mut out = report(r);
    match &r.objective {
        Some(objective) => {
            out["objective"] = json!(objective.iter().map(|v| v.f64()).collect::<Vec<f64>>());
            if let Some(mass) = mass {
                out["mass"] = json!(mass);
            }
        }
        None => {
            if let Some(v) = inputs.ot_eps(r) {
                out["ot_eps"] = json!(v);
            }
        }
    }
    Ok(out)
}

fn run_wasserstein<T: Real, B: Backend<T>>(
    backend: B,
    a: &WassersteinArgs,
    outs: &mut Outputs,
) -> Json {
    let inputs = Inputs::<T>::load(&a.solve)?;
    let problem = inputs.problem()?;
    let solver = SinkhornSolver::new(backend, a.solve.params_for(&problem)?);
    let res = solver
        .solve(&problem)
        .map_err(|e| a.solve.relax.cli_error(e, ""))?;
    let mass = match res.objective {
        Some(_) => Some(transported_mass(solver.backend(), &problem, &res)?),
        None => None,
    };
    finish(&inputs, &res, mass, outs)
}

fn run_coupling<T: Real, B: Backend<T>>(backend: B, a: &CouplingArgs, outs: &mut Outputs) -> Json {
    let inputs = Inputs::<T>::load(&a.solve)?;
    let problem = inputs.problem()?;
    let c = SinkhornSolver::new(backend, a.solve.params_for(&problem)?)
        .coupling(&problem)
        .map_err(|e| a.solve.relax.cli_error(e, ""))?;
    write_batch(outs, "--out", c.plan.view(), inputs.single)?;
    // The mass of the plan written to --out, summed in f64.
    let mass = c.result.objective.as_ref().map(|_| {
        c.plan
            .outer_iter()
            .map(|p| p.iter().map(|v| v.f64()).sum::<f64>())
            .collect()
    });
    finish(&inputs, &c.result, mass, outs)
}

/// `wasserstein --x --y` with `--grad-x/--grad-y`: envelope gradients of OT_ε with respect
/// to the points (P applied on the fly), written as .npy.
fn run_point_gradients<T: Real, B: PointCloudKernels<T> + logot::GradKernels<T>>(
    backend: B,
    a: &WassersteinArgs,
    outs: &mut Outputs,
) -> Json {
    let inputs = Inputs::<T>::load(&a.solve)?;
    if inputs.points.is_none() {
        return Err(Error::parameter(
            "--grad-x/--grad-y",
            "given",
            "gradients with respect to points need point clouds (--x and --y)",
        ));
    }
    let problem = inputs.problem()?;
    let g = SinkhornSolver::new(backend, a.solve.params_for(&problem)?)
        .point_gradients(&problem)
        .map_err(|e| a.solve.relax.cli_error(e, " (--grad-x/--grad-y)"))?;
    write_batch(outs, "--grad-x", g.x.view(), inputs.single)?;
    write_batch(outs, "--grad-y", g.y.view(), inputs.single)?;
    let mut out = finish(&inputs, &g.result, None, outs)?;
    out["ot_eps"] = json!(g.value.iter().map(|v| v.f64()).collect::<Vec<f64>>());
    Ok(out)
}

/// `wasserstein` with `--grad-*`: exact gradients of ⟨P,C⟩, written as .npy.
fn run_gradients<T: Real>(a: &WassersteinArgs, outs: &mut Outputs) -> Json {
    let inputs = Inputs::<T>::load(&a.solve)?;
    if inputs.points.is_some() {
        return Err(Error::Unavailable(
            "--grad-mu/--grad-nu/--grad-cost need a dense --cost (the implicit gradient forms P); with --x/--y use \
             --grad-x/--grad-y (gradients of OT_ε with respect to the points)"
                .into(),
        ));
    }
    let mut cg = CgParams::default().max_iters(a.cg_iters);
    cg.tol = a.cg_tol;
    let problem = inputs.problem()?;
    // The same parameters as without gradients (ε-scaling included), so the distance and
    // the plan the gradients differentiate are those `wasserstein` reports.
    let g = SinkhornSolver::new(CpuBackend, a.solve.params_for(&problem)?)
        .wasserstein_gradients(&problem, &cg)
        .map_err(|e| {
            a.solve
                .relax
                .cli_error(e, " (--grad-mu/--grad-nu/--grad-cost)")
        })?;
    write_batch(outs, "--grad-mu", g.mu.view(), inputs.single)?;
    write_batch(outs, "--grad-nu", g.nu.view(), inputs.single)?;
    write_batch(outs, "--grad-cost", g.cost.view(), inputs.single)?;
    if !g.cg.all_converged() {
        eprintln!(
            "logot: warning: the adjoint CG solve did not converge for {} problem(s) (max relative residual {:.3e} > tol {:.1e})",
            g.cg.failures(),
            g.cg.max_residual(),
            g.cg.tol
        );
    }
    let mut out = finish(&inputs, &g.result, None, outs)?;
    out["gradient_cg"] = json!({
        "iterations": g.cg.max_iterations(),
        "residual": g.cg.max_residual(),
        "converged": g.cg.all_converged(),
    });
    Ok(out)
}

impl WassersteinArgs {
    fn outputs(&self) -> [(&'static str, Option<&str>); 7] {
        [
            ("--grad-mu", self.grad_mu.as_deref()),
            ("--grad-nu", self.grad_nu.as_deref()),
            ("--grad-cost", self.grad_cost.as_deref()),
            ("--grad-x", self.grad_x.as_deref()),
            ("--grad-y", self.grad_y.as_deref()),
            ("--out-f", self.solve.out_f.as_deref()),
            ("--out-g", self.solve.out_g.as_deref()),
        ]
    }
}

pub fn wasserstein(a: &WassersteinArgs) -> Json {
    a.solve.relax.relaxation()?;
    if (a.grad_x.is_some() || a.grad_y.is_some()) && a.wants_gradients() {
        return Err(Error::parameter(
            "--grad-x/--grad-y",
            "given",
            "cannot be combined with --grad-mu/--grad-nu/--grad-cost",
        ));
    }
    if a.solve.devices.is_some() && a.wants_gradients() {
        return Err(Error::parameter(
            "--devices",
            "given with --grad-mu/--grad-nu/--grad-cost",
            "those gradients run on the CPU backend: leave out --devices",
        ));
    }
    if a.wants_gradients() && a.solve.backend != BackendChoice::Cpu {
        return Err(Error::Unavailable(
            "--grad-mu/--grad-nu/--grad-cost: gradients run on the CPU backend only for now; use --backend cpu".into(),
        ));
    }
    let mut outs = Outputs::prepare(&a.solve.inputs(), &a.outputs())?;
    let dtype = a.solve.dtype()?;
    let mut out = if a.grad_x.is_some() || a.grad_y.is_some() {
        dispatch!(dtype, a.solve.backend, devices: &a.solve.devices, run_point_gradients, a, &mut outs)?
    } else if a.wants_gradients() {
        match dtype {
            Dtype::F32 => run_gradients::<f32>(a, &mut outs)?,
            Dtype::F64 => run_gradients::<f64>(a, &mut outs)?,
        }
    } else {
        dispatch!(dtype, a.solve.backend, devices: &a.solve.devices, run_wasserstein, a, &mut outs)?
    };
    out["outputs"] = outs.commit()?;
    Ok(out)
}

pub fn coupling(a: &CouplingArgs) -> Json {
    a.solve.relax.relaxation()?;
    let mut outs = Outputs::prepare(
        &a.solve.inputs(),
        &[
            ("--out", Some(a.out.as_str())),
            ("--out-f", a.solve.out_f.as_deref()),
            ("--out-g", a.solve.out_g.as_deref()),
        ],
    )?;
    let dtype = a.solve.dtype()?;
    a.solve.check_plan_output(&outs, "--out", dtype)?;
    let mut out = dispatch!(
        dtype,
        a.solve.backend,
        devices: &a.solve.devices,
        run_coupling,
        a,
        &mut outs
    )?;
    out["outputs"] = outs.commit()?;
    Ok(out)
}
