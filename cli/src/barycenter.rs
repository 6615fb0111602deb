//! `logot barycenter`: fixed-support Wasserstein barycenter of K histograms, with a dense
//! cost (`--cost C.npy`, POT's `ot.bregman.barycenter(..., method="sinkhorn_log")`) or on
//! the unit grid (`--grid`, POT's `convolutional_barycenter2d(..., method="sinkhorn_log")`).

use crate::bench::{time_runs, BenchArgs};
use crate::npy::{self, Dtype};
use crate::output::Outputs;
use crate::{input, BackendChoice, Json};
use logot::{
    BarycenterKernels, BarycenterParams, BarycenterProblem, BarycenterSolver, CostSource, Error,
    GridCost, Real, Result,
};
use logot_cli::problems;
use ndarray::{Array2, Array3, ArrayD, Axis, IxDyn};
use serde_json::json;

#[derive(clap::Args, Debug)]
pub struct BarycenterArgs {
    /// Input histograms, .npy float32/float64 (or FILE.npz:NAME). With --cost: K×n (one problem) or P×K×n (P
    /// problems against the same cost). With --grid: K images, K×N (1-D), K×N×M (2-D) or
    /// K×N×M×L (3-D).
    #[arg(long)]
    pub inputs: String,
    /// Weights: K (one problem) or P×K; non-negative, each row summing to 1.
    #[arg(long)]
    pub weights: String,
    /// Regularisation strength ε (> 0), in the units of the cost.
    #[arg(long, allow_hyphen_values = true)]
    pub eps: f64,
    /// Dense cost n×m (the barycenter has m bins).
    #[arg(long, required_unless_present = "grid", conflicts_with = "grid")]
    pub cost: Option<String>,
    /// Use the squared Euclidean cost on the unit grid linspace(0, 1, N) per axis, never
    /// stored (separable 1-D log-convolutions).
    #[arg(long)]
    pub grid: bool,
    /// Output .npy: the barycenter (m, P×m, or the image shape with --grid), in the
    /// computation's precision.
    #[arg(long)]
    pub out: String,
    /// The most iterations run (default: POT's, 1000 dense and 10000 on a grid); fewer when
    /// the error falls below --tol at a check.
    #[arg(long, allow_hyphen_values = true)]
    pub iters: Option<usize>,
    /// Stop when the error falls below this (POT's stopThr). With --tol 0 all iterations run
    /// and `converged` says whether the final error is below POT's default, 1e-4.
    #[arg(long, default_value_t = 1e-4, allow_hyphen_values = true)]
    pub tol: f64,
    /// Check the error every this many iterations (POT: 10); an interval of --iters or more
    /// checks only after the last iteration.
    #[arg(long, allow_hyphen_values = true, default_value_t = 10)]
    pub check_every: usize,
    /// Unbalanced barycenter (POT's barycenter_unbalanced(..., reg_m=RHO)): both sides of
    /// each coupling relaxed by RHO·KL; the inputs may then have unequal masses.
    #[arg(long, value_name = "RHO", allow_hyphen_values = true, conflicts_with_all = ["reg_m_mu", "reg_m_nu"])]
    pub reg_m: Option<f64>,
    /// Relax only the inputs' side, KL(P_k·1 ‖ a_k), by RHO (`inf`: exact).
    #[arg(long, value_name = "RHO", allow_hyphen_values = true)]
    pub reg_m_mu: Option<f64>,
    /// Relax only the barycenter's side, KL(P_kᵀ·1 ‖ b), by RHO (`inf`: exact).
    #[arg(long, value_name = "RHO", allow_hyphen_values = true)]
    pub reg_m_nu: Option<f64>,
    /// Where to compute.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cpu)]
    pub backend: BackendChoice,
    /// Compute in float32 whatever the input dtype.
    #[arg(long, conflicts_with = "f64")]
    pub f32: bool,
    /// Compute in float64 whatever the input dtypes (default: float64 when any input is
    /// float64, float32 when all are, as numpy promotes).
    #[arg(long)]
    pub f64: bool,
}

impl BarycenterArgs {
    fn input_files(&self) -> [(&'static str, Option<&str>); 3] {
        [
            ("--inputs", Some(self.inputs.as_str())),
            ("--weights", Some(self.weights.as_str())),
            ("--cost", self.cost.as_deref()),
        ]
    }

    fn dtype(&self) -> Result<Dtype> {
        input::precision(self.f32, self.f64, &self.input_files())
    }

    fn relax(&self) -> crate::relax::RelaxArgs {
        crate::relax::RelaxArgs {
            reg_m: self.reg_m,
            reg_m_mu: self.reg_m_mu,
            reg_m_nu: self.reg_m_nu,
        }
    }

    fn params(&self) -> Result<BarycenterParams> {
        // A check interval past the last iteration checks only after it; bounding it by
        // the iteration count keeps the schedule and its arithmetic in range.
        let max_iters = self.iters.unwrap_or(if self.grid { 10_000 } else { 1000 });
        let mut p = BarycenterParams::new(self.eps)
            .tol(self.tol)
            .check_every(self.check_every.min(max_iters.max(1)));
        p.max_iters = self.iters;
        p.observer = crate::progress::bar("barycenter");
        Ok(p)
    }
}

fn run<T: Real, B: BarycenterKernels<T>>(
    backend: B,
    a: &BarycenterArgs,
    outs: &mut Outputs,
) -> Json {
    let inputs: ArrayD<T> = input::read(
        &a.inputs,
        "--inputs",
        if a.grid { &[2, 3, 4] } else { &[2, 3] },
    )?;
    let solver = BarycenterSolver::new(backend, a.params()?);
    let (histograms, weights, cost_file, out_shape): (
        Array3<T>,
        Array2<T>,
        Option<Array2<T>>,
        Vec<usize>,
    );
    let grid;
    if a.grid {
        let shape = inputs.shape().to_vec();
        grid = Some(GridCost::new(&shape[1..]).map_err(|e| match e {
            Error::Shape { detail, .. } => Error::Shape {
                arg: "--inputs".into(),
                detail,
            },
            e => e,
        })?);
        let (k, n) = (shape[0], shape[1..].iter().product::<usize>());
        histograms = inputs
            .into_shape_with_order((1, k, n))
            .map_err(|e| Error::Shape {
                arg: "--inputs".into(),
                detail: e.to_string(),
            })?;
        weights = read_weights::<T>(&a.weights, 1)?;
        cost_file = None;
        out_shape = shape[1..].to_vec();
    } else {
        grid = None;
        let (h, batched): (Array3<T>, bool) = if inputs.ndim() == 2 {
            (
                npy::fixed::<T, ndarray::Ix2>(inputs, "--inputs")?.insert_axis(Axis(0)),
                false,
            )
        } else {
            (npy::fixed::<T, ndarray::Ix3>(inputs, "--inputs")?, true)
        };
        let problems = h.dim().0;
        weights = read_weights::<T>(&a.weights, problems)?;
        let path = a.cost.as_deref().ok_or_else(|| Error::Parameter {
            arg: "--cost".into(),
            value: "(missing)".into(),
            reason: "give --cost C.npy or --grid".into(),
        })?;
        let c = npy::fixed::<T, ndarray::Ix2>(input::read(path, "--cost", &[2])?, "--cost")?;
        out_shape = if batched {
            vec![problems, c.ncols()]
        } else {
            vec![c.ncols()]
        };
        histograms = h;
        cost_file = Some(c);
    }
    let cost: CostSource<'_, T> = match (&grid, &cost_file) {
        (Some(g), _) => CostSource::Grid(g.clone()),
        (None, Some(c)) => CostSource::Dense(c.view()),
        (None, None) => return Err(Error::Unavailable("no cost given".into())),
    };
    // The library calls the input histograms "histograms"; the command line, "--inputs".
    let mut problem =
        BarycenterProblem::new(histograms.view(), weights.view()).map_err(inputs_flag)?;
    if let Some(r) = a.relax().relaxation()? {
        problem = problem.relaxed(r);
    }
    let bars = solver.solve(&problem, cost).map_err(inputs_flag)?;
    let flat: Vec<T> = bars
        .iter()
        .flat_map(|b| b.histogram.iter().copied())
        .collect();
    let out = ArrayD::from_shape_vec(IxDyn(&out_shape), flat).map_err(|e| Error::Shape {
        arg: "--out".into(),
        detail: e.to_string(),
    })?;
    outs.write("--out", out.view())?;
    let worst = bars.iter().map(|b| b.error).fold(0.0f64, f64::max);
    Ok(json!({
        "out": a.out,
        "shape": out_shape,
        "dtype": T::NAME,
        "iterations": bars.first().map(|b| b.iterations).unwrap_or(0),
        "error": worst,
        "errors": bars.iter().map(|b| b.error).collect::<Vec<_>>(),
        "converged": bars.iter().all(|b| b.converged),
        "mass": bars.iter().map(|b| b.histogram.iter().map(|v| v.f64()).sum::<f64>()).collect::<Vec<_>>(),
    }))
}

/// Rename the library's `histograms` argument to the command line's `inputs`.
fn inputs_flag(e: Error) -> Error {
    e.rename_arg(|arg| {
        if arg == "histograms" {
            "--inputs".to_string()
        } else {
            arg
        }
    })
}

/// Weights as `problems×K`: a 1-D file for one problem, 2-D for several.
fn read_weights<T: Real>(path: &str, problems: usize) -> Result<Array2<T>> {
    let w: ArrayD<T> = input::read(path, "--weights", &[1, 2])?;
    if w.ndim() == 1 {
        if problems != 1 {
            return Err(Error::Shape {
                arg: "--weights".into(),
                detail: format!(
                    "one weight vector for {problems} problems; give a {problems}×K array"
                ),
            });
        }
        Ok(npy::fixed::<T, ndarray::Ix1>(w, "--weights")?.insert_axis(Axis(0)))
    } else {
        npy::fixed::<T, ndarray::Ix2>(w, "--weights")
    }
}

pub fn barycenter(a: &BarycenterArgs) -> Json {
    // Flags checked before any output is touched.
    a.relax().relaxation()?;
    let mut outs = Outputs::prepare(&a.input_files(), &[("--out", Some(a.out.as_str()))])?;
    let dtype = a.dtype()?;
    let o = &mut outs;
    let mut out = match (dtype, a.backend) {
        // On a rayon worker thread: the kernels' parallel loops then fork and join
        // without a thread hand-off per call.
        (Dtype::F32, BackendChoice::Cpu) => {
            rayon::scope(|_| run::<f32, _>(logot::CpuBackend, a, o))
        }
        (Dtype::F64, BackendChoice::Cpu) => {
            rayon::scope(|_| run::<f64, _>(logot::CpuBackend, a, o))
        }
        #[cfg(feature = "cuda")]
        (Dtype::F32, BackendChoice::Cuda) => run::<f32, _>(crate::cuda_backend()?, a, o),
        #[cfg(feature = "cuda")]
        (Dtype::F64, BackendChoice::Cuda) => run::<f64, _>(crate::cuda_backend()?, a, o),
        #[cfg(not(feature = "cuda"))]
        (_, BackendChoice::Cuda) => Err(crate::no_cuda()),
    }?;
    out["outputs"] = outs.commit()?;
    Ok(out)
}

/// `logot bench --problem bary64|bary64dense`: the design's barycenter benchmark (three
/// 64×64 images, weights (0.3, 0.3, 0.4), 100 iterations; grid ε = 0.004, dense
/// ε = 1e-3 with the normalised 4096×4096 cost).
pub fn bench(dtype: Dtype, a: &BenchArgs, dense: bool) -> Json {
    match (dtype, a.backend) {
        (Dtype::F32, BackendChoice::Cpu) => {
            rayon::scope(|_| bench_on::<f32, _>(logot::CpuBackend, a, dense))
        }
        (Dtype::F64, BackendChoice::Cpu) => {
            rayon::scope(|_| bench_on::<f64, _>(logot::CpuBackend, a, dense))
        }
        #[cfg(feature = "cuda")]
        (Dtype::F32, BackendChoice::Cuda) => bench_on::<f32, _>(crate::cuda_backend()?, a, dense),
        #[cfg(feature = "cuda")]
        (Dtype::F64, BackendChoice::Cuda) => bench_on::<f64, _>(crate::cuda_backend()?, a, dense),
        #[cfg(not(feature = "cuda"))]
        (_, BackendChoice::Cuda) => Err(crate::no_cuda()),
    }
}

fn bench_on<T: Real, B: BarycenterKernels<T>>(backend: B, a: &BenchArgs, dense: bool) -> Json {
    let n = 64;
    let imgs = problems::bary64_images(n).mapv(T::of);
    let h = imgs
        .into_shape_with_order((3, n * n))
        .map_err(|e| Error::Shape {
            arg: "bary64".into(),
            detail: e.to_string(),
        })?;
    let w: ndarray::Array1<T> = problems::BARY64_WEIGHTS.iter().map(|&v| T::of(v)).collect();
    let dense_cost = if dense {
        Some(problems::bary64_dense_cost::<T>(n))
    } else {
        None
    };
    let (name, eps) = if dense {
        ("bary64dense", problems::BARY64_DENSE_EPS)
    } else {
        ("bary64", problems::BARY64_GRID_EPS)
    };
    // --reg-m: the unbalanced barycenter (POT's barycenter_unbalanced), the same iterations.
    let params = BarycenterParams::new(eps).fixed_iterations(problems::BARY64_ITERS);
    let solver = BarycenterSolver::new(backend, params);
    let mut problem = BarycenterProblem::new(h.view(), w.view())?;
    if let Some(r) = a.relax.relaxation()? {
        problem = problem.relaxed(r);
    }
    let grid = GridCost::image(n, n)?;
    let mut last = None;
    let (median, min, all) = time_runs(a.runs, || {
        let cost = match &dense_cost {
            Some(c) => CostSource::Dense(c.view()),
            None => CostSource::Grid(grid.clone()),
        };
        last = solver.solve(&problem, cost)?.pop();
        Ok(())
    })?;
    let b = last.ok_or_else(|| Error::Numerical("no run completed".into()))?;
    // The same solve with the cost prepared once (validated and, on a GPU, uploaded): what
    // an application that keeps its cost on the device pays per barycenter.
    let prepared = match &dense_cost {
        Some(c) => solver.prepare(c.view())?,
        None => solver.prepare(grid.clone())?,
    };
    let (median_res, min_res, _) = time_runs(a.runs, || {
        solver.solve(&problem, &prepared)?;
        Ok(())
    })?;
    Ok(json!({
        "problem": name,
        "backend": a.backend.name(),
        "dtype": T::NAME,
        "ms": median,
        "min_ms": min,
        "runs_ms": all,
        "ms_resident": median_res,
        "min_ms_resident": min_res,
        "reg_m": a.relax.reg_m,
        "reg_m_mu": a.relax.reg_m_mu,
        "reg_m_nu": a.relax.reg_m_nu,
        "iterations": b.iterations,
        "error": b.error,
        "mass": b.histogram.iter().map(|v| v.f64()).sum::<f64>(),
        "threads": rayon::current_num_threads(),
    }))
}
