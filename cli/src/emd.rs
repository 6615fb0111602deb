//! `logot emd`: exact optimal transport (POT's `ot.emd` / `ot.emd2`) of one problem or a
//! batch, from a dense cost or two point clouds; the plan, dense or as a list of its
//! nonzero entries, and the potentials written as .npy; costs and certificates as JSON.
//! `--backend cuda` solves batches of assignment problems (square, uniform weights) on the
//! GPU by the auction and refuses other input, naming the flag at fault.

use crate::output::Outputs;
use crate::{flags, npy};
use crate::{input, BackendChoice, Json};
use logot::exact::{
    auction_refusal, emd_batch, emd_points_batch, EmdMethod, EmdParams, EmdResult, ExactMethod,
    Metric,
};
use logot::{Error, Real, Result};
use ndarray::{Array1, Array2, Array3, ArrayD, ArrayView2, ArrayView3, Axis, Ix2, Ix3};
use serde_json::json;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct EmdArgs {
    /// Source histogram(s): n (one problem) or B×n (a batch); .npy float32/float64, or a
    /// .npz member as FILE.npz:NAME. Optional with --x/--y: uniform weights 1/n.
    #[arg(long, required_unless_present = "x")]
    pub mu: Option<String>,
    /// Target histogram(s): m or B×m, of the same total as --mu (1e-6 relative in float64,
    /// 1e-4 in float32), then scaled to it. Optional with --x/--y (uniform, 1/m).
    #[arg(long, required_unless_present = "x")]
    pub nu: Option<String>,
    /// Cost: n×m (shared by the batch) or B×n×m (one per problem); any sign.
    #[arg(long, required_unless_present = "x", conflicts_with_all = ["x", "y"])]
    pub cost: Option<String>,
    /// Source point cloud: n×d, or B×n×d for a batch; costs computed when read (no n×m
    /// matrix above 2²² pairs).
    #[arg(long, requires = "y")]
    pub x: Option<String>,
    /// Target point cloud: m×d, or B×m×d.
    #[arg(long, requires = "x")]
    pub y: Option<String>,
    /// Ground cost between the points of --x/--y (default: sqeuclidean, POT's ot.dist).
    #[arg(long, value_enum, requires = "x", conflicts_with = "p")]
    pub metric: Option<PointCost>,
    /// Cost |x − y|^p (p ≥ 1) between the points of --x/--y.
    #[arg(long, requires = "x")]
    pub p: Option<f64>,
    /// The algorithm: auto (the assignment solver for uniform square point clouds of
    /// dimension 8 or more, the network simplex otherwise), simplex or assignment.
    #[arg(long, value_enum, default_value_t = Method::Auto)]
    pub method: Method,
    /// The most pivots (network simplex) or augmentations (assignment) of one problem;
    /// reaching it is reported ("converged": false), not an error.
    #[arg(long)]
    pub iters: Option<usize>,
    /// The most seconds one problem may take, reported as --iters.
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Relative tolerance of the certificate for "exact" (gap, dual violation, marginals).
    #[arg(long, default_value_t = 1e-9)]
    pub certificate_tol: f64,
    /// Where to solve. cuda: assignment problems (square, uniform weights, n ≤ 4096, a
    /// dense cost or sqeuclidean clouds; --method auto or assignment), the whole batch on
    /// the GPU by the auction, each problem whose device certificate fails solved again
    /// on the CPU ("method_each" says "auction" or "assignment"); other input is an error
    /// naming the flag at fault.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// Output .npy for the dense plan: n×m for one problem, B×n×m for a batch.
    #[arg(long)]
    pub out: Option<String>,
    /// Output .npy for the plan's nonzero entries: K×3 rows (row, column, mass) for one
    /// problem, K×4 rows (problem, row, column, mass) for a batch.
    #[arg(long)]
    pub out_sparse: Option<String>,
    /// Output .npy for the source potentials f: n, or B×n.
    #[arg(long)]
    pub out_f: Option<String>,
    /// Output .npy for the target potentials g: m, or B×m.
    #[arg(long)]
    pub out_g: Option<String>,
    /// Read the inputs and write the outputs in float32 whatever their dtypes (the solve
    /// itself is in float64).
    #[arg(long, conflicts_with = "f64")]
    pub f32: bool,
    /// Write the outputs in float64 whatever the input dtypes (default: float64 when any
    /// input is float64, float32 when all are).
    #[arg(long)]
    pub f64: bool,
}

/// `--metric`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PointCost {
    /// |x − y|².
    Sqeuclidean,
    /// |x − y|.
    Euclidean,
}

/// `--method`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Method {
    /// By problem shape (see --method).
    Auto,
    /// The network simplex.
    Simplex,
    /// Shortest augmenting paths (square problems with equal weights).
    Assignment,
}

impl EmdArgs {
    fn inputs(&self) -> [(&'static str, Option<&str>); 5] {
        [
            ("--mu", self.mu.as_deref()),
            ("--nu", self.nu.as_deref()),
            ("--cost", self.cost.as_deref()),
            ("--x", self.x.as_deref()),
            ("--y", self.y.as_deref()),
        ]
    }

    fn params(&self) -> Result<EmdParams> {
        let mut p = EmdParams::default()
            .method(match self.method {
                Method::Auto => EmdMethod::Auto,
                Method::Simplex => EmdMethod::NetworkSimplex,
                Method::Assignment => EmdMethod::Assignment,
            })
            .certificate_tol(self.certificate_tol);
        if let Some(k) = self.iters {
            p = p.max_iters(k);
        }
        if let Some(s) = self.max_seconds {
            if !(s.is_finite() && s >= 0.0) {
                return Err(Error::parameter(
                    "--max-seconds",
                    s,
                    "must be finite and ≥ 0",
                ));
            }
            p = p.max_time(Duration::from_secs_f64(s));
        }
        Ok(p)
    }

    fn metric(&self) -> Result<Metric> {
        Ok(match (self.metric, self.p) {
            (_, Some(p)) => {
                if !(p.is_finite() && p >= 1.0) {
                    return Err(Error::parameter("--p", p, "must be finite and ≥ 1"));
                }
                Metric::EuclideanPow(p)
            }
            (Some(PointCost::Euclidean), None) => Metric::EuclideanPow(1.0),
            (Some(PointCost::Sqeuclidean) | None, None) => Metric::SqEuclidean,
        })
    }
}

/// An input of one problem (`ndim` axes) or a batch (`ndim + 1`), with the batch axis
/// added to a single problem's array, and whether it held one problem.
fn read_batch<T: Real>(spec: &str, arg: &str, ndim: usize) -> Result<(ArrayD<T>, bool)> {
    let a = input::read::<T>(spec, arg, &[ndim, ndim + 1])?;
    Ok(if a.ndim() == ndim {
        (a.insert_axis(Axis(0)), true)
    } else {
        (a, false)
    })
}

/// Histograms `B×n` of an optional input (`n` or `B×n`).
fn weights<T: Real>(spec: Option<&str>, arg: &str) -> Result<Option<Array2<T>>> {
    spec.map(|s| npy::fixed::<T, Ix2>(read_batch::<T>(s, arg, 1)?.0, arg))
        .transpose()
}

fn solve<T: Precision>(a: &EmdArgs) -> Result<(Vec<EmdResult>, bool)> {
    let params = a.params()?;
    match (&a.cost, &a.x, &a.y) {
        (Some(cost), _, _) => {
            // clap asks for --mu and --nu with --cost.
            let (mu, single) = read_batch::<T>(a.mu.as_deref().unwrap_or_default(), "--mu", 1)?;
            let mu = npy::fixed::<T, Ix2>(mu, "--mu")?;
            let nu = weights::<T>(a.nu.as_deref(), "--nu")?.unwrap_or_default();
            let cost = npy::fixed::<T, Ix3>(read_batch(cost, "--cost", 2)?.0, "--cost")?;
            let (mu, nu, cost) = (mu.view(), nu.view(), cost.view());
            let (_, n, m) = cost.dim();
            let rs = match a.backend {
                BackendChoice::Cpu => emd_batch(mu, nu, cost, &params)?,
                BackendChoice::Cuda => {
                    on_gpu(Some(mu), Some(nu), n, m, None, &params, "--cost")?;
                    gpu_batch(mu, nu, cost, &params)?
                }
            };
            Ok((rs, single))
        }
        (None, Some(x), Some(y)) => {
            let metric = a.metric()?;
            let (xs, single) = read_batch::<T>(x, "--x", 2)?;
            let xs = npy::fixed::<T, Ix3>(xs, "--x")?;
            let ys = npy::fixed::<T, Ix3>(read_batch(y, "--y", 2)?.0, "--y")?;
            let mu = weights::<T>(a.mu.as_deref(), "--mu")?;
            let nu = weights::<T>(a.nu.as_deref(), "--nu")?;
            let (mu, nu) = (mu.as_ref().map(|w| w.view()), nu.as_ref().map(|w| w.view()));
            let (xs, ys) = (xs.view(), ys.view());
            let r = match a.backend {
                BackendChoice::Cpu => emd_points_batch(mu, nu, xs, ys, metric, &params)?,
                BackendChoice::Cuda => {
                    let (n, m) = (xs.dim().1, ys.dim().1);
                    on_gpu(mu, nu, n, m, Some(metric), &params, "--x")?;
                    gpu_points_batch(mu, nu, xs, ys, metric, &params)?
                }
            };
            Ok((r, single))
        }
        _ => Err(Error::parameter(
            "--cost",
            "absent",
            "give --cost, or --x and --y",
        )),
    }
}

/// The precisions of `logot emd`: f32 and f64, which the CUDA backend takes too where the
/// CLI is built with it.
#[cfg(feature = "cuda")]
trait Precision: logot::backend::cuda::CudaReal {}
#[cfg(feature = "cuda")]
impl<T: logot::backend::cuda::CudaReal> Precision for T {}
#[cfg(not(feature = "cuda"))]
trait Precision: Real {}
#[cfg(not(feature = "cuda"))]
impl<T: Real> Precision for T {}

/// A batch of dense problems on GPU 0 (the auction).
#[cfg(feature = "cuda")]
fn gpu_batch<T: Precision>(
    mu: ArrayView2<'_, T>,
    nu: ArrayView2<'_, T>,
    cost: ArrayView3<'_, T>,
    params: &EmdParams,
) -> Result<Vec<EmdResult>> {
    crate::cuda_backend()?.emd_batch(mu, nu, cost, params)
}

#[cfg(not(feature = "cuda"))]
fn gpu_batch<T: Precision>(
    _: ArrayView2<'_, T>,
    _: ArrayView2<'_, T>,
    _: ArrayView3<'_, T>,
    _: &EmdParams,
) -> Result<Vec<EmdResult>> {
    Err(crate::no_cuda())
}

/// A batch of point-cloud problems on GPU 0 (the auction).
#[cfg(feature = "cuda")]
fn gpu_points_batch<T: Precision>(
    mu: Option<ArrayView2<'_, T>>,
    nu: Option<ArrayView2<'_, T>>,
    x: ArrayView3<'_, T>,
    y: ArrayView3<'_, T>,
    metric: Metric,
    params: &EmdParams,
) -> Result<Vec<EmdResult>> {
    crate::cuda_backend()?.emd_points_batch(mu, nu, x, y, metric, params)
}

#[cfg(not(feature = "cuda"))]
fn gpu_points_batch<T: Precision>(
    _: Option<ArrayView2<'_, T>>,
    _: Option<ArrayView2<'_, T>>,
    _: ArrayView3<'_, T>,
    _: ArrayView3<'_, T>,
    _: Metric,
    _: &EmdParams,
) -> Result<Vec<EmdResult>> {
    Err(crate::no_cuda())
}

/// `--backend cuda`'s check: the error naming the flag at fault where the GPU auction does
/// not take the batch (`cost_flag` names the problem's size: `--cost` or `--x`).
fn on_gpu<T: Real>(
    mu: Option<ArrayView2<'_, T>>,
    nu: Option<ArrayView2<'_, T>>,
    n: usize,
    m: usize,
    metric: Option<Metric>,
    params: &EmdParams,
    cost_flag: &'static str,
) -> Result<()> {
    match auction_refusal(mu, nu, n, m, metric, params) {
        None => Ok(()),
        Some(e) => Err(e.rename_arg(|arg| {
            let names = [
                ("cost", cost_flag),
                ("metric", "--metric"),
                ("method", "--method"),
                ("mu", "--mu"),
                ("nu", "--nu"),
            ];
            flags::flag_in(&arg, &names)
        })),
    }
}

/// Write the outputs asked for, in precision `T`.
fn write<T: Real>(a: &EmdArgs, rs: &[EmdResult], single: bool, outs: &mut Outputs) -> Result<()> {
    let (n, m) = (rs[0].plan.n, rs[0].plan.m);
    let of = |v: f64| T::of(v);
    let mut dense = Array3::<T>::zeros((1, 0, 0));
    if a.out.is_some() {
        dense = Array3::zeros((rs.len(), n, m));
        for (k, r) in rs.iter().enumerate() {
            for (i, j, v) in r.plan.iter() {
                dense[[k, i, j]] = of(v);
            }
        }
    }
    let cols = if single { 3 } else { 4 };
    let total: usize = rs.iter().map(|r| r.plan.len()).sum();
    let mut sparse = Array2::<T>::zeros((total, cols));
    let mut row = 0;
    for (k, r) in rs.iter().enumerate() {
        for (i, j, v) in r.plan.iter() {
            let mut e = sparse.row_mut(row);
            let fields = [k as f64, i as f64, j as f64, v];
            e.iter_mut()
                .zip(&fields[4 - cols..])
                .for_each(|(o, &x)| *o = of(x));
            row += 1;
        }
    }
    let pots = |side: fn(&EmdResult) -> &Array1<f64>, len: usize| {
        Array2::from_shape_fn((rs.len(), len), |(k, i)| of(side(&rs[k])[i]))
    };
    let f = pots(|r| &r.f, n);
    let g = pots(|r| &r.g, m);
    outs.write("--out-sparse", sparse.view())?;
    if single {
        outs.write("--out", dense.index_axis(Axis(0), 0).view())?;
        outs.write("--out-f", f.row(0))?;
        outs.write("--out-g", g.row(0))?;
    } else {
        outs.write("--out", dense.view())?;
        outs.write("--out-f", f.view())?;
        outs.write("--out-g", g.view())?;
    }
    Ok(())
}

fn run<T: Precision>(a: &EmdArgs, outs: &mut Outputs) -> Json {
    let (rs, single) = solve::<T>(a)?;
    write::<T>(a, &rs, single, outs)?;
    let each = |f: fn(&EmdResult) -> serde_json::Value| rs.iter().map(f).collect::<Vec<_>>();
    let worst = |f: fn(&EmdResult) -> f64| rs.iter().map(f).fold(0.0f64, f64::max);
    Ok(json!({
        "cost": each(|r| r.cost.into()),
        "exact": rs.iter().all(|r| r.exact),
        "converged": rs.iter().all(|r| r.converged),
        "exact_each": each(|r| r.exact.into()),
        "converged_each": each(|r| r.converged.into()),
        "iterations_each": each(|r| r.iterations.into()),
        "nonzeros_each": each(|r| r.plan.len().into()),
        "method_each": each(|r| match r.method {
            ExactMethod::Assignment => "assignment",
            ExactMethod::Sorting => "sorting",
            ExactMethod::Auction => "auction",
            _ => "network_simplex",
        }
        .into()),
        "duality_gap": worst(|r| r.certificate.duality_gap),
        "relative_gap": worst(|r| r.certificate.relative_gap()),
        "max_violation": worst(|r| r.certificate.max_violation),
        "marginal_error": worst(|r| {
            r.certificate
                .marginal_error_a
                .max(r.certificate.marginal_error_b)
        }),
        "dual": each(|r| r.certificate.dual.into()),
        "dtype": T::NAME,
        "backend": a.backend.name(),
        // On the GPU, the problems whose device certificate failed, solved again on the CPU.
        "resolved_on_cpu": match a.backend {
            BackendChoice::Cpu => 0,
            BackendChoice::Cuda => rs.iter().filter(|r| r.method != ExactMethod::Auction).count(),
        },
    }))
}

pub fn emd(a: &EmdArgs) -> Json {
    let inputs = a.inputs();
    let mut outs = Outputs::prepare(
        &inputs,
        &[
            ("--out", a.out.as_deref()),
            ("--out-sparse", a.out_sparse.as_deref()),
            ("--out-f", a.out_f.as_deref()),
            ("--out-g", a.out_g.as_deref()),
        ],
    )?;
    let mut out = match input::precision(a.f32, a.f64, &inputs)? {
        npy::Dtype::F32 => run::<f32>(a, &mut outs)?,
        npy::Dtype::F64 => run::<f64>(a, &mut outs)?,
    };
    out["outputs"] = outs.commit()?;
    Ok(out)
}
