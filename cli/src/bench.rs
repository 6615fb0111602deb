//! `logot bench`: time a canonical problem of the design on a backend. Prints the median
//! wall time of repeated runs after a warm-up (each run ends with its results on the host,
//! so device work is synchronised).

use crate::npy::Dtype;
use crate::relax::RelaxArgs;
use crate::wasserstein::precision_parser;
use crate::{BackendChoice, Json};
use logot::linalg::GemmPrecision;
use logot::{
    Backend, BufferOutputs, CrossPrecision, GradKernels, PointCloudKernels, Problem, Real, Result,
    SinkhornParams, SinkhornSolver,
};
use logot_cli::clouds::{cloud_problem, mean_cost, CloudData, CloudWeights};
use logot_cli::problems;
use serde_json::json;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchProblem {
    /// n = 100, ε = 1e-3, 200 iterations: distance and gradient w.r.t. μ.
    #[value(name = "otA")]
    OtA,
    /// B = 64, n = m = 2048, ε = 1e-2, 100 iterations.
    #[value(name = "otB")]
    OtB,
    /// B = 8, n = m = 1024, ε = 1e-2, 100 iterations.
    #[value(name = "otBcpu")]
    OtBcpu,
    /// B = 256 problems with one cost each, n = m = 4096 (`C_k = (1 + k/B)·(xᵢ − xⱼ)²`),
    /// ε = 1e-2, 100 iterations: the batch that several GPUs split by problems.
    #[value(name = "otBbatch")]
    OtBbatch,
    /// Barycenter of three 64×64 images on the unit grid, ε = 0.004, 100 iterations.
    #[value(name = "bary64")]
    Bary64,
    /// The same images with the dense 4096×4096 normalised cost, ε = 1e-3, 100 iterations.
    #[value(name = "bary64dense")]
    Bary64Dense,
    /// Point clouds N = M = 65536, d = 3, uniform in [0,1]³, squared Euclidean cost on the
    /// fly, ε = 0.05: one half-step.
    #[value(name = "otC")]
    OtC,
    /// Point clouds N = M = 50000, d = 64, uniform in [0,1]⁶⁴, squared Euclidean, ε = 0.05:
    /// 10 Sinkhorn iterations from zero potentials.
    #[value(name = "otC64")]
    OtC64,
    /// Point clouds N = M = 32768, d = 1024, uniform in [0,1]¹⁰²⁴, squared Euclidean,
    /// ε = 0.05: 10 Sinkhorn iterations from zero potentials.
    #[value(name = "otC1024")]
    OtC1024,
    /// Point clouds N = M = 65536, d = 3, uniform in [0,1]³, squared Euclidean, ε = 0.05:
    /// 10 Sinkhorn iterations (20 half-steps) from zero potentials (otC's whole solve).
    #[value(name = "otC10")]
    OtC10,
    /// Point clouds N = M = 2²⁰, d = 3, uniform in [0,1]³, squared Euclidean, ε = 0.05:
    /// 10 Sinkhorn iterations from zero potentials.
    #[value(name = "otCbig")]
    OtCBig,
    /// Bistochastic projection of 65536 matrices 4×4, 20 iterations; then its backward.
    #[value(name = "mhc4")]
    Mhc4,
    /// Bistochastic projection of 65536 matrices 16×16, 20 iterations; then its backward.
    #[value(name = "mhc16")]
    Mhc16,
    /// Thin SVD of 4096 matrices 1024×3 (A ~ N(0, 1)).
    #[value(name = "svd3")]
    Svd3,
    /// X·Xᵀ of a 4096×4096 matrix (symmetric kernel).
    #[value(name = "xxt")]
    Xxt,
    /// X·Xᵀ of an 8192×8192 matrix (symmetric kernel).
    #[value(name = "xxt8192")]
    Xxt8192,
    /// 5-step Newton–Schulz (Muon coefficients) of a 4096×4096 matrix.
    #[value(name = "ns")]
    Ns,
    /// GEMM 4096³: forward C = A·B, then backward dA = dC·Bᵀ, dB = Aᵀ·dC.
    #[value(name = "gemm")]
    Gemm,
    /// Dense entropic Gromov–Wasserstein, n×m = 4000×5000 (structures: squared distances
    /// of points uniform in [0,1]² and [0,1]³, normalised), ε = 5e-3, 100 outer iterations
    /// from the product plan (--points N: N×⌈5N/4⌉).
    #[value(name = "gw")]
    Gw,
    /// Point-cloud Gromov–Wasserstein in linear memory, n = m = 10⁵, d = 3, ε = 5e-3, 20
    /// outer iterations of at most 100 warm-started Sinkhorn iterations each.
    #[value(name = "gwpc")]
    Gwpc,
    /// Exact minibatch OT: B = 64 pairs of clouds of 1024 points uniform in [0,1]¹⁶,
    /// uniform weights, squared Euclidean cost (--batch, --points, --dim, or --x/--y).
    #[value(name = "emdbatch")]
    EmdBatch,
    /// Sliced Wasserstein SW_2: n = m = 10⁶ points uniform in [0,1]³ and [0.1,0.9]³,
    /// uniform weights, 256 directions drawn as POT draws them from seed 0 (--points,
    /// --dim, --projections, or --x/--y).
    #[value(name = "sliced")]
    Sliced,
}

impl BenchProblem {
    /// The name on the command line.
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default()
    }

    /// Matrix size of the mhc problems.
    pub fn mhc_n(self) -> usize {
        if self == BenchProblem::Mhc4 {
            4
        } else {
            16
        }
    }

    /// Problems timed by `crate::bench_kernels`.
    pub fn on_kernels(self) -> bool {
        use BenchProblem::*;
        matches!(self, Mhc4 | Mhc16 | Svd3 | Xxt | Xxt8192 | Ns | Gemm)
    }
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("reg_m", |a| a.help(
    "Unbalanced OT: relax both marginals to the penalty ρ·KL(P·1 ‖ μ) + ρ·KL(Pᵀ·1 ‖ ν) \
     (> 0; `inf` keeps them exact); the JSON names the ρ used"
)))]
pub struct BenchArgs {
    /// Which problem.
    #[arg(long, value_enum)]
    pub problem: BenchProblem,
    /// Where to run it.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// With --backend cuda: the GPUs to run on, e.g. 0,1 (default: GPU 0). Several GPUs
    /// are joined by NCCL (otB, otBbatch, otA and the point-cloud problems but otC).
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// Print JSON (the only output format; accepted for the documented command line).
    #[arg(long)]
    pub json: bool,
    /// Timed runs after the warm-up (at most 1000000).
    #[arg(long, allow_hyphen_values = true, default_value_t = 5)]
    pub runs: usize,
    /// Untimed warm-up runs (mhc, svd3, xxt, ns, gemm; the other problems run one); at
    /// most 1000000.
    #[arg(long, allow_hyphen_values = true, default_value_t = 1)]
    pub warmup: usize,
    /// Stop repeating once the timed runs have taken this many seconds (at least one
    /// timed run; mhc, svd3, xxt, ns, gemm), so the 4096² problems stay short on a CPU.
    #[arg(long, allow_hyphen_values = true, default_value_t = 20.0)]
    pub max_seconds: f64,
    /// Compute in float64 (default float32).
    #[arg(long)]
    pub f64: bool,
    /// otC64, otC1024 on CUDA in float32: how x·y is formed (exact, tf32x3, tf32, f16x2,
    /// f16; default f16x2); the JSON names it.
    #[arg(long, value_parser = precision_parser())]
    pub precision: Option<CrossPrecision>,
    /// gw on CUDA in float32: how the cross term's GEMMs form their products (exact,
    /// tf32x3, tf32; default: the solver's); the JSON names it.
    #[arg(long, value_parser = gemm_precision_parser())]
    pub gemm_precision: Option<GemmPrecision>,
    /// Point-cloud problems (otC, otC10, otCbig, otC64, otC1024): N = M points instead of
    /// the canonical size (1 to 2²⁴), e.g. a size that suits a small CPU.
    #[arg(long, allow_hyphen_values = true)]
    pub points: Option<usize>,
    /// Point-cloud problems: the dimension d instead of the canonical one (1 to 65536).
    #[arg(long, allow_hyphen_values = true)]
    pub dim: Option<usize>,
    /// emdbatch: the number of problems B instead of 64 (1 to 65536).
    #[arg(long, allow_hyphen_values = true)]
    pub batch: Option<usize>,
    /// emdbatch: the source clouds, B×n×d .npy (with --y), instead of generated ones;
    /// sliced: the source cloud, n×d.
    #[arg(long, requires = "y", conflicts_with_all = ["points", "dim", "batch"])]
    pub x: Option<String>,
    /// emdbatch: the target clouds, B×n×d .npy (with --x); sliced: the target cloud, m×d.
    #[arg(long, requires = "x")]
    pub y: Option<String>,
    /// sliced: the number of directions instead of 256 (1 to 65535), drawn from seed 0.
    #[arg(long, allow_hyphen_values = true)]
    pub projections: Option<usize>,
    /// Point-cloud problems: the distribution of the points (default uniform, the
    /// canonical clouds; logot_cli::clouds describes each); the JSON names it.
    #[arg(long, value_enum)]
    pub data: Option<CloudData>,
    /// Point-cloud problems: the weights of the points (default uniform; random: a 100:1
    /// range, normalised); the JSON names them.
    #[arg(long, value_enum)]
    pub weights: Option<CloudWeights>,
    /// Point-cloud problems: ε = R × the mean cost over all pairs of the clouds drawn
    /// (default: the problem's ε, 0.05); the JSON reports ε and the mean cost.
    #[arg(long, allow_hyphen_values = true, value_name = "R")]
    pub eps_rel: Option<f64>,
    /// Point-cloud problems: the seed of the clouds and weights (default 0: the canonical
    /// clouds).
    #[arg(long, allow_hyphen_values = true)]
    pub seed: Option<u64>,
    /// Point-cloud problems: before timing, write the clouds and weights drawn to DIR as
    /// x.npy, y.npy, a.npy, b.npy (in the precision of the run) and meta.json (n, d, ε, data,
    /// weights, seed), so that another tool can solve the same problem.
    #[arg(long, value_name = "DIR")]
    pub dump: Option<std::path::PathBuf>,
    /// Unbalanced OT (otA, otB, otBcpu), to compare with the balanced problem in the same
    /// call: the marginal penalties, as for `wasserstein`.
    #[command(flatten)]
    pub relax: RelaxArgs,
}

/// Run `work` once to warm up, then `runs` times; returns (median, min) in milliseconds.
pub fn time_runs(
    runs: usize,
    mut work: impl FnMut() -> Result<()>,
) -> Result<(f64, f64, Vec<f64>)> {
    work()?;
    let mut ms = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        work()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut sorted = ms.clone();
    sorted.sort_by(f64::total_cmp);
    Ok((sorted[sorted.len() / 2], sorted[0], ms))
}

/// `--warmup` untimed runs of `work`, then up to `--runs` timed ones, stopping early once
/// the timed runs have taken `--max-seconds` (at least one); (median, min, all) in ms.
pub fn time_runs_for(
    a: &BenchArgs,
    mut work: impl FnMut() -> Result<()>,
) -> Result<(f64, f64, Vec<f64>)> {
    for _ in 0..a.warmup {
        work()?;
    }
    let mut ms = Vec::with_capacity(a.runs.max(1));
    let mut total = 0.0;
    while ms.len() < a.runs.max(1) && (ms.is_empty() || total < a.max_seconds * 1e3) {
        let t = Instant::now();
        work()?;
        let dt = t.elapsed().as_secs_f64() * 1e3;
        total += dt;
        ms.push(dt);
    }
    let mut sorted = ms.clone();
    sorted.sort_by(f64::total_cmp);
    Ok((sorted[sorted.len() / 2], sorted[0], ms))
}

/// The clouds of a point-cloud problem as the flags draw them (`--data`, `--weights`,
/// `--seed`; the canonical uniform clouds by default) and the ε it is solved at.
struct Clouds<T> {
    mu: ndarray::Array1<T>,
    nu: ndarray::Array1<T>,
    x: ndarray::Array2<T>,
    y: ndarray::Array2<T>,
    /// The mean cost over all pairs of the clouds drawn (in f64 from the points as solved).
    mean_cost: f64,
    eps: f64,
}

impl<T: Real> Clouds<T> {
    /// Draws `n` points a cloud in dimension `d`; ε is `--eps-rel` × the mean cost, or
    /// `eps` without it. Writes them to `--dump` when asked, before any timing.
    fn draw(a: &BenchArgs, problem: &str, n: usize, d: usize, eps: f64) -> Result<Self> {
        let (data, weights, seed) = (
            a.data.unwrap_or_default(),
            a.weights.unwrap_or_default(),
            a.seed.unwrap_or(0),
        );
        let (mu, nu, x, y) = cloud_problem::<T>(n, d, data, weights, seed);
        let mean_cost = mean_cost(x.view(), y.view());
        let eps = match a.eps_rel {
            Some(r) => r * mean_cost,
            None => eps,
        };
        if !(eps.is_finite() && eps > 0.0) {
            return Err(logot::Error::parameter(
                "--eps-rel",
                a.eps_rel.unwrap_or(f64::NAN),
                format!("gives ε = {eps} from the clouds' mean cost {mean_cost}: it must be finite and > 0"),
            ));
        }
        let clouds = Clouds {
            mu,
            nu,
            x,
            y,
            mean_cost,
            eps,
        };
        if let Some(dir) = &a.dump {
            clouds.dump(a, problem, dir)?;
        }
        Ok(clouds)
    }

    /// x.npy, y.npy, a.npy, b.npy and meta.json in `dir` (created if missing).
    fn dump(&self, a: &BenchArgs, problem: &str, dir: &std::path::Path) -> Result<()> {
        use crate::npy::{file_err, write_to};
        let shown = dir.display().to_string();
        std::fs::create_dir_all(dir)
            .map_err(|e| file_err(&shown, format!("--dump: cannot create the folder: {e}")))?;
        let create = |name: &str| {
            let path = dir.join(name);
            let shown = path.display().to_string();
            std::fs::File::create(&path)
                .map(|f| (shown.clone(), f))
                .map_err(|e| file_err(&shown, format!("--dump: cannot create: {e}")))
        };
        let (p, f) = create("x.npy")?;
        write_to(&p, f, self.x.view())?;
        let (p, f) = create("y.npy")?;
        write_to(&p, f, self.y.view())?;
        let (p, f) = create("a.npy")?;
        write_to(&p, f, self.mu.view())?;
        let (p, f) = create("b.npy")?;
        write_to(&p, f, self.nu.view())?;
        let (p, mut f) = create("meta.json")?;
        let mut meta = json!({ "problem": problem, "dtype": T::NAME });
        self.describe(a, &mut meta);
        let text = serde_json::to_string_pretty(&meta).unwrap_or_default();
        std::io::Write::write_all(&mut f, format!("{text}\n").as_bytes())
            .map_err(|e| file_err(&p, format!("--dump: cannot write: {e}")))
    }

    /// The problem's description in the JSON output and in meta.json: its size, the data,
    /// the weights, the seed and ε.
    fn describe(&self, a: &BenchArgs, out: &mut serde_json::Value) {
        let (n, d) = self.x.dim();
        out["n"] = n.into();
        out["m"] = self.y.nrows().into();
        out["d"] = d.into();
        out["data"] = a.data.unwrap_or_default().name().into();
        out["weights"] = a.weights.unwrap_or_default().name().into();
        out["seed"] = a.seed.unwrap_or(0).into();
        out["eps"] = self.eps.into();
        out["eps_rel"] = a.eps_rel.into();
        out["mean_cost"] = self.mean_cost.into();
    }
}

/// otC: one half-step `g = ε log ν − ε LSE_i((f_i − |x_i − y_j|²)/ε)` from `f = 0`
/// (cost preparation and uploads outside the timing; the result is read back each run).
fn run_otc<T: Real, B: Backend<T>>(backend: B, a: &BenchArgs) -> Json {
    use logot_cli::problems::{OTC_D, OTC_EPS, OTC_N};
    let (n, d) = (a.points.unwrap_or(OTC_N), a.dim.unwrap_or(OTC_D));
    let clouds = Clouds::<T>::draw(a, "otC", n, d, OTC_EPS)?;
    let (nu, x, y, eps) = (&clouds.nu, &clouds.x, &clouds.y, clouds.eps);
    let cost = backend.prepare_cost(&logot::PointCloudCost::new(x.view(), y.view())?.into())?;
    let f = backend.filled(n, T::zero())?;
    let log_nu = backend.upload(&nu.iter().map(|v| v.ln()).collect::<Vec<T>>())?;
    let mut g = backend.filled(n, T::zero())?;
    let mut first = T::zero();
    let (median, min, all) = time_runs(a.runs, || {
        backend.sinkstep(&cost, logot::Side::Col, T::of(eps), &f, &log_nu, &mut g)?;
        first = backend.download(&g)?[0];
        Ok(())
    })?;
    let pairs = (n * n) as f64;
    let mut out = json!({
        "problem": "otC",
        "backend": a.backend.name(),
        "devices": a.devices,
        "dtype": T::NAME,
        "ms": median,
        "min_ms": min,
        "runs_ms": all,
        "g_first": first.f64(),
        "gterms_per_s": pairs / (median * 1e-3) / 1e9,
    });
    clouds.describe(a, &mut out);
    Ok(out)
}

/// otC10, otCbig, otC64, otC1024: 10 iterations (20 half-steps) of point-cloud Sinkhorn from zero
/// potentials, uniform weights, ε = 0.05 (or the clouds, weights and ε the flags choose), all
/// on the backend (`Backend::iterate`), then `f` read back (cost preparation and uploads
/// outside the timing).
fn run_otc_iters<T: Real, B: Backend<T>>(backend: B, a: &BenchArgs) -> Json {
    use logot_cli::problems::OTC_EPS;
    let (name, n, d) = match a.problem {
        BenchProblem::OtC10 => ("otC10", 65_536, 3),
        BenchProblem::OtCBig => ("otCbig", 1 << 20, 3),
        BenchProblem::OtC64 => ("otC64", 50_000, 64),
        _ => ("otC1024", 32_768, 1024),
    };
    let (n, d) = (a.points.unwrap_or(n), a.dim.unwrap_or(d));
    let iters = 10;
    let clouds = Clouds::<T>::draw(a, name, n, d, OTC_EPS)?;
    let (mu, nu, x, y, eps) = (&clouds.mu, &clouds.nu, &clouds.x, &clouds.y, clouds.eps);
    let precision = a.precision.unwrap_or_default();
    let cloud = logot::PointCloudCost::new(x.view(), y.view())?.with_precision(precision);
    let cost = backend.prepare_cost(&cloud.into())?;
    let logs = |v: &ndarray::Array1<T>| v.iter().map(|p| p.ln()).collect::<Vec<T>>();
    let (mu_d, nu_d) = (backend.upload(&mu.to_vec())?, backend.upload(&nu.to_vec())?);
    let (log_mu, log_nu) = (backend.upload(&logs(mu))?, backend.upload(&logs(nu))?);
    let marginals = logot::backend::Marginals {
        mu: &mu_d,
        nu: &nu_d,
        log_mu: &log_mu,
        log_nu: &log_nu,
    };
    let mut first = T::zero();
    let mut last = None;
    let (median, min, all) = time_runs(a.runs, || {
        let mut pot = logot::backend::Potentials {
            f: backend.filled(n, T::zero())?,
            g: backend.filled(n, T::zero())?,
        };
        backend.iterate(&cost, T::of(eps), &marginals, &mut pot, iters)?;
        first = backend.download(&pot.f)?[0];
        last = Some(pot);
        Ok(())
    })?;
    // The final report a solve makes of these potentials (f32 clouds: every cost in f64 from
    // the points as given), timed apart from the iterations.
    let pot = last.ok_or_else(|| logot::Error::Numerical("no run completed".into()))?;
    let mut report = Vec::new();
    let (median_report, _, _) = time_runs(a.runs, || {
        report = backend.plan_report(&cost, &pot, &marginals, T::of(eps))?;
        Ok(())
    })?;
    let marginal_error = report
        .first()
        .map(|r| r.row_error.max(r.col_error))
        .unwrap_or(f64::NAN);
    let pairs = (2 * iters * n * n) as f64;
    let mut out = json!({
        "problem": name,
        "backend": a.backend.name(),
        "devices": a.devices,
        "dtype": T::NAME,
        "ms": median,
        "min_ms": min,
        "runs_ms": all,
        "iterations": iters,
        // What formed x·y: the choice on CUDA in f32, exact products elsewhere.
        "precision": if a.backend == BackendChoice::Cuda && T::NAME == "float32" {
            precision.name()
        } else {
            CrossPrecision::Exact.name()
        },
        "f_first": first.f64(),
        "gterms_per_s": pairs / (median * 1e-3) / 1e9,
        "report_ms": median_report,
        "marginal_error": marginal_error,
    });
    clouds.describe(a, &mut out);
    Ok(out)
}

/// One cost shared by the batch, or one a problem.
enum Costs<T> {
    Shared(ndarray::Array2<T>),
    Batch(ndarray::Array3<T>),
}

fn run<T: Real, B: PointCloudKernels<T> + GradKernels<T>>(backend: B, a: &BenchArgs) -> Json {
    let shared = |(mu, nu, c)| (mu, nu, Costs::Shared(c));
    let (name, iters, eps, exps, (mu, nu, cost)) = match a.problem {
        BenchProblem::OtA => {
            let (mu, nu, c) = problems::ot_a::<T>();
            let n = mu.len();
            (
                "otA",
                200,
                1e-3,
                2 * 200 * n * n,
                (
                    mu.insert_axis(ndarray::Axis(0)),
                    nu.insert_axis(ndarray::Axis(0)),
                    Costs::Shared(c),
                ),
            )
        }
        BenchProblem::OtB => (
            "otB",
            100,
            1e-2,
            2 * 100 * 64 * 2048 * 2048,
            shared(problems::ot_b::<T>(64, 2048)),
        ),
        BenchProblem::OtBcpu => (
            "otBcpu",
            100,
            1e-2,
            2 * 100 * 8 * 1024 * 1024,
            shared(problems::ot_b::<T>(8, 1024)),
        ),
        BenchProblem::OtBbatch => {
            let (mu, nu, c) = problems::ot_b_batch::<T>(256, 4096);
            (
                "otBbatch",
                100,
                1e-2,
                2 * 100 * 256 * 4096 * 4096,
                (mu, nu, Costs::Batch(c)),
            )
        }
        other => {
            return Err(logot::Error::Unavailable(format!(
                "bench --problem {}: runs in crate::barycenter::bench or crate::bench_kernels",
                other.name()
            )))
        }
    };
    let mut problem = match &cost {
        Costs::Shared(c) => Problem::new(mu.view(), nu.view(), c.view())?,
        Costs::Batch(c) => Problem::new(mu.view(), nu.view(), c.view())?,
    };
    if let Some(relaxation) = a.relax.relaxation()? {
        problem = problem.relaxed(relaxation);
    }
    let params = SinkhornParams::new(eps).fixed_iterations(iters);
    let solver = SinkhornSolver::new(backend, params);
    let gradient = |f: ndarray::ArrayView1<'_, T>| {
        if a.problem == BenchProblem::OtA {
            // Gradient of the regularised cost w.r.t. μ: the potential f, centred
            // (μ lives on the simplex, so the gradient is defined up to a constant).
            let mean = f.iter().map(|v| v.f64()).sum::<f64>() / f.len() as f64;
            let grad: Vec<f64> = f.iter().map(|v| v.f64() - mean).collect();
            std::hint::black_box(grad);
        }
    };
    let mut last = None;
    let (median, min, all) = time_runs(a.runs, || {
        let r = solver.solve(&problem)?;
        gradient(r.f.row(0));
        last = Some(r);
        Ok(())
    })?;
    let r = last.ok_or_else(|| logot::Error::Numerical("no run completed".into()))?;
    // The same solve with the batch already on the backend (cost and marginals uploaded
    // once): what an application that keeps its data on the device pays per solve.
    // The potentials stay on the backend; the gradient of otA reads f back as the host
    // path does.
    let prepared = solver.prepare(&problem)?;
    let be = solver.backend();
    let (b, n_mu, m_nu) = prepared.dims();
    let (mut f, mut g) = (
        be.filled(b * n_mu, T::zero())?,
        be.filled(b * m_nu, T::zero())?,
    );
    // What a host-path solve pays before its iterations: the batch prepared on the backend
    // (uploads, the transposed cost), the stream waited for by reading `f` back.
    let (median_prepare, _, _) = time_runs(a.runs, || {
        let p = solver.prepare(&problem)?;
        std::hint::black_box(be.download(&f)?);
        drop(p);
        Ok(())
    })?;
    let (median_res, min_res, _) = time_runs(a.runs, || {
        solver.solve_prepared(&prepared, BufferOutputs::new().potentials(&mut f, &mut g))?;
        if a.problem == BenchProblem::OtA {
            let host = be.download(&f)?;
            gradient(ndarray::ArrayView1::from(&host[..n_mu]));
        }
        Ok(())
    })?;
    Ok(json!({
        "problem": name,
        "backend": a.backend.name(),
        "devices": a.devices,
        "dtype": T::NAME,
        "ms": median,
        "min_ms": min,
        "runs_ms": all,
        "reg_m": a.relax.reg_m,
        "reg_m_mu": a.relax.reg_m_mu,
        "reg_m_nu": a.relax.reg_m_nu,
        "iterations": r.convergence.iterations,
        "marginal_error": r.convergence.marginal_error,
        "distance_first": r.distance[0].f64(),
        "gterms_per_s": exps as f64 / (median * 1e-3) / 1e9,
        "ms_resident": median_res,
        "min_ms_resident": min_res,
        "prepare_ms": median_prepare,
        "gterms_per_s_resident": exps as f64 / (median_res * 1e-3) / 1e9,
    }))
}

/// The most timed or warm-up runs (the timings are kept in memory).
const MAX_RUNS: usize = 1_000_000;

/// The values of `--gemm-precision` ([`GemmPrecision::name`]).
fn gemm_precision_parser() -> impl clap::builder::TypedValueParser<Value = GemmPrecision> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(GemmPrecision::ALL.map(GemmPrecision::name)).try_map(
        |name| {
            GemmPrecision::from_name(&name).ok_or_else(|| format!("no precision is named {name}"))
        },
    )
}

/// Checks the arguments of every bench problem; the precision to run in.
pub fn checked(a: &BenchArgs) -> Result<Dtype> {
    let dtype = if a.f64 { Dtype::F64 } else { Dtype::F32 };
    if !(a.max_seconds.is_finite() && a.max_seconds >= 0.0) {
        return Err(logot::Error::parameter(
            "--max-seconds",
            a.max_seconds,
            "must be finite and ≥ 0",
        ));
    }
    if a.relax.is_set() {
        use BenchProblem::*;
        if !matches!(
            a.problem,
            OtA | OtB | OtBcpu | OtBbatch | Bary64 | Bary64Dense
        ) {
            return Err(a.relax.refusal(format!(
                "{} has no unbalanced form (otA, otB, otBcpu, otBbatch, bary64, bary64dense do)",
                a.problem.name()
            )));
        }
        a.relax.relaxation()?;
    }
    if a.precision.is_some() && !matches!(a.problem, BenchProblem::OtC64 | BenchProblem::OtC1024) {
        return Err(logot::Error::parameter(
            "--precision",
            a.problem.name(),
            "applies to the point-cloud problems otC64 and otC1024 only",
        ));
    }
    if a.gemm_precision.is_some() && a.problem != BenchProblem::Gw {
        return Err(logot::Error::parameter(
            "--gemm-precision",
            a.problem.name(),
            "applies to the dense Gromov–Wasserstein problem gw only",
        ));
    }
    let point_cloud = matches!(
        a.problem,
        BenchProblem::OtC
            | BenchProblem::OtC10
            | BenchProblem::OtCBig
            | BenchProblem::OtC64
            | BenchProblem::OtC1024
            | BenchProblem::Gwpc
            | BenchProblem::EmdBatch
            | BenchProblem::Sliced
    );
    if a.points.is_some() && a.problem == BenchProblem::Gw {
        // The dense problem holds three n×m matrices and n² + m² structure entries.
        let n = a.points.unwrap_or(0);
        if n == 0 || n > 1 << 16 {
            return Err(logot::Error::parameter(
                "--points",
                n,
                "must be between 1 and 65536 for gw (dense n×m matrices)",
            ));
        }
    }
    let emdbatch = a.problem == BenchProblem::EmdBatch;
    let sliced = a.problem == BenchProblem::Sliced;
    if !emdbatch && a.batch.is_some() {
        return Err(logot::Error::parameter(
            "--batch",
            a.problem.name(),
            "applies to emdbatch only",
        ));
    }
    if !(emdbatch || sliced) && a.x.is_some() {
        return Err(logot::Error::parameter(
            "--x",
            a.problem.name(),
            "applies to emdbatch and sliced only",
        ));
    }
    match a.projections {
        Some(_) if !sliced => {
            return Err(logot::Error::parameter(
                "--projections",
                a.problem.name(),
                "applies to sliced only",
            ))
        }
        Some(l) if l == 0 || l > 65_535 => {
            return Err(logot::Error::parameter(
                "--projections",
                l,
                "must be between 1 and 65535",
            ))
        }
        _ => {}
    }
    if let Some(b) = a.batch {
        if b == 0 || b > 1 << 16 {
            return Err(logot::Error::parameter(
                "--batch",
                b,
                "must be between 1 and 65536",
            ));
        }
    }
    // The cloud flags shape the entropic point-cloud problems; emdbatch, sliced and gwpc have their
    // own clouds.
    let sinkhorn_cloud = point_cloud && !emdbatch && !sliced && a.problem != BenchProblem::Gwpc;
    let cloud_flags = [
        ("--data", a.data.is_some()),
        ("--weights", a.weights.is_some()),
        ("--eps-rel", a.eps_rel.is_some()),
        ("--seed", a.seed.is_some()),
        ("--dump", a.dump.is_some()),
    ];
    if let Some((flag, _)) = cloud_flags.iter().find(|(_, set)| *set && !sinkhorn_cloud) {
        return Err(logot::Error::parameter(
            flag,
            a.problem.name(),
            "applies to the point-cloud problems (otC, otC10, otCbig, otC64, otC1024)",
        ));
    }
    if let Some(r) = a.eps_rel {
        if !(r.is_finite() && r > 0.0) {
            return Err(logot::Error::parameter(
                "--eps-rel",
                r,
                "must be finite and > 0",
            ));
        }
    }
    for (flag, v, max) in [("--points", a.points, 1 << 24), ("--dim", a.dim, 1 << 16)] {
        match v {
            Some(_) if flag == "--points" && a.problem == BenchProblem::Gw => {}
            Some(_) if !point_cloud => {
                return Err(logot::Error::parameter(
                    flag,
                    v.unwrap_or(0),
                    format!(
                        "applies to the point-cloud problems (otC, otC10, otCbig, otC64, \
                         otC1024, gwpc, emdbatch, sliced; --points also to gw), not {}",
                        a.problem.name()
                    ),
                ))
            }
            Some(v) if v == 0 || v > max => {
                return Err(logot::Error::parameter(
                    flag,
                    v,
                    format!("must be between 1 and {max}"),
                ))
            }
            _ => {}
        }
    }
    if a.devices.is_some() {
        use BenchProblem::*;
        if !matches!(
            a.problem,
            OtA | OtB | OtBcpu | OtBbatch | OtC | OtC10 | OtCBig | OtC64 | OtC1024
        ) {
            return Err(logot::Error::parameter(
                "--devices",
                a.problem.name(),
                "applies to the solver problems (otA, otB, otBcpu, otBbatch and the point clouds); \
                 the barycenters, Gromov–Wasserstein and kernels run on one GPU",
            ));
        }
    }
    crate::check_devices(a.backend, &a.devices)?;
    for (flag, v) in [("--runs", a.runs), ("--warmup", a.warmup)] {
        if v > MAX_RUNS {
            return Err(logot::Error::parameter(
                flag,
                v,
                format!("at most {MAX_RUNS} runs"),
            ));
        }
    }
    Ok(dtype)
}

/// The solver problems: otA, otB, otBcpu and otC (the barycenters run in
/// `crate::barycenter`, the kernel problems in `crate::bench_kernels`).
pub fn bench(dtype: Dtype, a: &BenchArgs) -> Json {
    if a.problem == BenchProblem::OtC {
        return dispatch!(dtype, a.backend, devices: &a.devices, run_otc, a);
    }
    if matches!(
        a.problem,
        BenchProblem::OtC10 | BenchProblem::OtCBig | BenchProblem::OtC64 | BenchProblem::OtC1024
    ) {
        return dispatch!(dtype, a.backend, devices: &a.devices, run_otc_iters, a);
    }
    dispatch!(dtype, a.backend, devices: &a.devices, run, a)
}
