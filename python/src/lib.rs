//! `logot._logot`: the compiled module under the Python package `logot`.
//!
//! Thin glue over the library: numpy arrays in (any strides; float32 or float64, one dtype
//! per call, chosen by the Python layer), the library call with the GIL released, numpy
//! arrays and plain Python values out. Argument handling, defaults, shapes and result
//! classes live in the Python layer (`logot/`); every check of the inputs is the library's,
//! and every [`logot::Error`] becomes a `ValueError` (bad input) or a `RuntimeError`
//! (numerical, device, memory, availability) carrying the library's message.

use logot::backend::bistochastic::{cg_summary_from_words, words, ProjectionStats};
use logot::backend::cuda::{CudaBuffer, CudaReal, WordsMailbox};
use logot::grad::{BistochasticParams, BistochasticSolver, CgParams, CgSummary};
use logot::linalg::{newton_schulz_on, svd3_batch_on, NewtonSchulzParams};
use logot::{
    BarycenterParams, BarycenterSolver, BistochasticKernels, Convergence, CostSource, CpuBackend,
    CrossPrecision, CudaBackend, DivergenceConvention, DivergenceResult, EpsScaling, GridCost,
    PointCloudCost, PointMetric, Problem, Real, Relaxation, SinkhornParams, SinkhornResult,
    SinkhornSolver, WarmStart,
};
use ndarray::{Array1, Array2, Array3, ArrayView2, ArrayView3};
use numpy::{
    Element, IntoPyArray, PyArrayDescrMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyReadonlyArray3, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Mutex;

// ---------------------------------------------------------------------------------------
// Errors, dtypes, backends
// ---------------------------------------------------------------------------------------

/// Bad input (shapes, values, parameters) is a `ValueError`; everything else (numerical
/// failure, CUDA, memory, an unavailable backend, files) a `RuntimeError`.
fn to_py_err(e: logot::Error) -> PyErr {
    use logot::Error::*;
    match e {
        Shape { .. }
        | Empty { .. }
        | NonFinite { .. }
        | NegativeMass { .. }
        | ZeroMass { .. }
        | UnequalMass { .. }
        | Parameter { .. } => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

trait OrPyErr<T> {
    fn py(self) -> PyResult<T>;
}
impl<T> OrPyErr<T> for logot::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py_err)
    }
}

#[derive(Clone, Copy)]
enum Dtype {
    F32,
    F64,
}

/// The dtype of `array` (float32 or float64; the Python layer converts anything else).
fn dtype_of(array: &Bound<'_, PyAny>, arg: &str) -> PyResult<Dtype> {
    let py = array.py();
    let a = array
        .cast::<PyUntypedArray>()
        .map_err(|_| PyTypeError::new_err(format!("{arg}: expected a numpy array")))?;
    let dt = a.dtype();
    if dt.is_equiv_to(&numpy::dtype::<f64>(py)) {
        Ok(Dtype::F64)
    } else if dt.is_equiv_to(&numpy::dtype::<f32>(py)) {
        Ok(Dtype::F32)
    } else {
        Err(PyTypeError::new_err(format!(
            "{arg}: dtype {dt} is neither float32 nor float64"
        )))
    }
}

/// Run `$body` with the type alias `$T` set to the dtype of `$array`.
macro_rules! by_dtype {
    ($array:expr, $arg:expr, $T:ident => $body:expr) => {
        match dtype_of($array, $arg)? {
            Dtype::F32 => {
                type $T = f32;
                $body
            }
            Dtype::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}

/// A backend named by the Python layer: `"cpu"`, `"cuda"` or `"cuda:N"`.
enum Device {
    Cpu,
    Cuda(CudaBackend),
}

/// One CUDA backend per GPU and process: creating one compiles the kernels.
static CUDA: Mutex<Option<HashMap<usize, CudaBackend>>> = Mutex::new(None);

fn cuda_backend(ordinal: usize) -> logot::Result<CudaBackend> {
    let mut cache = CUDA.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(be) = cache.get(&ordinal) {
        return Ok(be.clone());
    }
    let be = CudaBackend::with_device(ordinal)?;
    cache.insert(ordinal, be.clone());
    Ok(be)
}

fn device(py: Python<'_>, name: &str) -> PyResult<Device> {
    let ordinal = match name {
        "cpu" => return Ok(Device::Cpu),
        "cuda" => 0,
        _ => match name
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<usize>().ok())
        {
            Some(n) => n,
            None => {
                return Err(PyValueError::new_err(format!(
                    "backend = {name:?}: expected \"cpu\", \"cuda\" or \"cuda:N\""
                )))
            }
        },
    };
    // Loading the driver and compiling the kernels takes a while the first time.
    py.detach(|| cuda_backend(ordinal)).py().map(Device::Cuda)
}

/// Run `$body` with `$be` bound to the backend `$dev` (by value: `CpuBackend` or a clone of
/// the shared `CudaBackend`).
macro_rules! by_backend {
    ($dev:expr, $be:ident => $body:expr) => {
        match $dev {
            Device::Cpu => {
                let $be = CpuBackend;
                $body
            }
            Device::Cuda(cuda) => {
                let $be = cuda.clone();
                $body
            }
        }
    };
}

/// The GIL released around `f`; on the CPU, `f` runs on a rayon worker (saves a thread
/// hand-off per kernel on problems large enough for the kernels to split, as the library's
/// own top-level functions do).
///
/// The wall-clock time of `f` itself (the library calls: building the problem and solving
/// it) is kept per calling thread for [`_last_compute_seconds`], so that the bindings'
/// overhead can be measured inside the same call rather than against a separate one.
fn compute<R: Send>(py: Python<'_>, cpu: bool, f: impl FnOnce() -> R + Send) -> R {
    let timed = || {
        let start = std::time::Instant::now();
        let out = f();
        (out, start.elapsed())
    };
    let (out, took) = if cpu {
        py.detach(|| rayon::scope(|_| timed()))
    } else {
        py.detach(timed)
    };
    LAST_COMPUTE.set(took);
    out
}

thread_local! {
    /// The time the last [`compute`] of this thread spent in the library.
    static LAST_COMPUTE: std::cell::Cell<std::time::Duration> = const { std::cell::Cell::new(std::time::Duration::ZERO) };
}

/// Seconds the calling thread's last call spent inside the library (building the problem
/// and solving it, without the argument handling, the conversions and the GIL): the
/// reference of `python/bench/overhead.py`.
#[pyfunction]
fn _last_compute_seconds() -> f64 {
    LAST_COMPUTE.get().as_secs_f64()
}

/// Below this many cost entries per half-step (`B·n·m`) no CPU kernel of a dense solve
/// splits its work (each task holds at least 2¹⁵ exponentials), so the solve never enters
/// rayon's pool and runs best on the calling thread: handing it to a worker would only add a
/// wake-up and a sleep (tens of microseconds on a busy machine) to a call of a few hundred.
const SMALL_DENSE: usize = 1 << 16;

fn small_dense<T>(cost: &CostSource<'_, T>, batch: usize) -> bool {
    let entries = match cost {
        CostSource::Dense(c) => c.len().saturating_mul(batch),
        CostSource::DenseBatch(c) => c.len(),
        _ => return false,
    };
    entries < SMALL_DENSE
}

// ---------------------------------------------------------------------------------------
// Arguments: costs and parameters
// ---------------------------------------------------------------------------------------

/// A cost as the Python layer passes it: a dense `n×m` or `B×n×m` array, `("grid", shape)`
/// or `("points", x, y, metric, precision)` with one pair of clouds (`n×d`, `m×d`) shared by
/// the batch or one pair per problem (`B×n×d`, `B×m×d`).
enum CostArg<'py, T: Element> {
    Dense(PyReadonlyArray2<'py, T>),
    DenseBatch(PyReadonlyArray3<'py, T>),
    Grid(GridCost),
    Points(
        PyReadonlyArray2<'py, T>,
        PyReadonlyArray2<'py, T>,
        PointMetric,
        CrossPrecision,
    ),
    PointsBatch(
        PyReadonlyArray3<'py, T>,
        PyReadonlyArray3<'py, T>,
        PointMetric,
        CrossPrecision,
    ),
}

/// `"sqeuclidean"` or `"euclidean"`.
fn point_metric(metric: &str) -> PyResult<PointMetric> {
    match metric {
        "sqeuclidean" => Ok(PointMetric::SqEuclidean),
        "euclidean" => Ok(PointMetric::Euclidean),
        m => Err(PyValueError::new_err(format!(
            "metric = {m:?}: expected \"sqeuclidean\" or \"euclidean\""
        ))),
    }
}

/// `"exact"`, `"tf32x3"`, `"tf32"`, `"f16x2"` or `"f16"` ([`CrossPrecision::name`]); `None`:
/// the library's default.
fn cross_precision(precision: Option<&str>) -> PyResult<CrossPrecision> {
    let Some(name) = precision else {
        return Ok(CrossPrecision::default());
    };
    CrossPrecision::from_name(name).ok_or_else(|| {
        let names: Vec<String> = CrossPrecision::ALL
            .iter()
            .map(|p| format!("{:?}", p.name()))
            .collect();
        PyValueError::new_err(format!(
            "precision = {name:?}: expected one of {}",
            names.join(", ")
        ))
    })
}

/// Whether the clouds `x` and `y` are one pair (`n×d`, `m×d`: false) or a batch of pairs
/// (`B×n×d`, `B×m×d`: true); other dimensions are a `ValueError` naming the argument.
fn clouds_batched(x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<bool> {
    let ndim = |a: &Bound<'_, PyAny>, arg: &str| -> PyResult<usize> {
        a.cast::<PyUntypedArray>()
            .map(|a| a.ndim())
            .map_err(|_| PyTypeError::new_err(format!("{arg}: expected a numpy array")))
    };
    let (dx, dy) = (ndim(x, "x")?, ndim(y, "y")?);
    match (dx, dy) {
        (2, 2) => Ok(false),
        (3, 3) => Ok(true),
        (2 | 3, d) => Err(PyValueError::new_err(format!(
            "y: expected {} points like x, got {d} dimensions",
            if dx == 2 { "m×d" } else { "B×m×d" }
        ))),
        (d, _) => Err(PyValueError::new_err(format!(
            "x: expected points n×d or a batch B×n×d, got {d} dimensions"
        ))),
    }
}

impl<'py, T: Element + Real> CostArg<'py, T> {
    fn extract(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(t) = obj.cast::<PyTuple>() {
            let tag: String = t.get_item(0)?.extract()?;
            return match tag.as_str() {
                "grid" => {
                    let shape: Vec<usize> = t.get_item(1)?.extract()?;
                    Ok(CostArg::Grid(GridCost::new(&shape).py()?))
                }
                "points" => {
                    let metric: String = t.get_item(3)?.extract()?;
                    let metric = point_metric(&metric)?;
                    let precision: Option<String> = t.get_item(4)?.extract()?;
                    let precision = cross_precision(precision.as_deref())?;
                    let (x, y) = (t.get_item(1)?, t.get_item(2)?);
                    Ok(if clouds_batched(&x, &y)? {
                        CostArg::PointsBatch(x.extract()?, y.extract()?, metric, precision)
                    } else {
                        CostArg::Points(x.extract()?, y.extract()?, metric, precision)
                    })
                }
                _ => Err(PyValueError::new_err(format!("cost: unknown kind {tag:?}"))),
            };
        }
        let ndim = obj.cast::<PyUntypedArray>()?.ndim();
        match ndim {
            2 => Ok(CostArg::Dense(obj.extract()?)),
            3 => Ok(CostArg::DenseBatch(obj.extract()?)),
            d => Err(PyValueError::new_err(format!(
                "cost: expected an n×m matrix or a B×n×m batch of them, got {d} dimensions"
            ))),
        }
    }

    fn source(&self) -> PyResult<CostSource<'_, T>> {
        Ok(match self {
            CostArg::Dense(c) => CostSource::Dense(c.as_array()),
            CostArg::DenseBatch(c) => CostSource::DenseBatch(c.as_array()),
            CostArg::Grid(g) => CostSource::Grid(g.clone()),
            CostArg::Points(x, y, metric, precision) => CostSource::PointCloud(
                PointCloudCost::with_metric(x.as_array(), y.as_array(), *metric)
                    .py()?
                    .with_precision(*precision),
            ),
            CostArg::PointsBatch(x, y, metric, precision) => CostSource::PointCloud(
                PointCloudCost::batched_with_metric(x.as_array(), y.as_array(), *metric)
                    .py()?
                    .with_precision(*precision),
            ),
        })
    }
}

/// The largest cost, for ε-scaling from the cost (`eps_scaling=True`).
fn max_cost<T: Real>(cost: &CostSource<'_, T>) -> f64 {
    match cost {
        CostSource::Dense(c) => c.iter().fold(0.0, |m, v| m.max(v.f64().abs())),
        CostSource::DenseBatch(c) => c.iter().fold(0.0, |m, v| m.max(v.f64().abs())),
        // The unit cube's squared diagonal: one per axis.
        CostSource::Grid(g) => g.shape().len() as f64,
        CostSource::PointCloud(p) => p.max_cost(),
        _ => 1.0,
    }
}

/// Sinkhorn parameters as the Python layer passes them:
/// `(eps, max_iters, tol, check_every, eps_scaling)` with `tol` `None` for the precision's
/// default and `eps_scaling` `None`, `True` (from the largest cost) or
/// `(start, factor, iters_per_stage)`.
#[derive(FromPyObject)]
struct ParamsArg<'py>(f64, usize, Option<f64>, usize, Option<Bound<'py, PyAny>>);

impl ParamsArg<'_> {
    fn params(&self, max_cost: impl FnOnce() -> f64) -> PyResult<SinkhornParams> {
        let ParamsArg(eps, max_iters, tol, check_every, scaling) = self;
        let eps_scaling = match scaling {
            None => None,
            Some(s) if s.is_instance_of::<pyo3::types::PyBool>() => s
                .extract::<bool>()?
                .then(|| EpsScaling::from_max_cost(max_cost())),
            Some(s) => {
                let (start, factor, iters_per_stage): (f64, f64, usize) = s.extract()?;
                Some(EpsScaling {
                    start,
                    factor,
                    iters_per_stage,
                })
            }
        };
        Ok(SinkhornParams {
            eps: *eps,
            max_iters: *max_iters,
            tol: *tol,
            check_every: *check_every,
            eps_scaling,
            ..SinkhornParams::default()
        })
    }
}

/// The parameters of a call on device memory: `eps_scaling=True` starts from the largest
/// cost, known once the cost is prepared on the device ([`DeviceParams::for_cost`]).
struct DeviceParams {
    params: SinkhornParams,
    /// `eps_scaling=True`: the schedule is left unset in `params` until then.
    from_max_cost: bool,
}

impl DeviceParams {
    fn new(arg: &ParamsArg<'_>) -> PyResult<Self> {
        let from_max_cost = std::cell::Cell::new(false);
        let params = arg.params(|| {
            from_max_cost.set(true);
            1.0
        })?;
        Ok(DeviceParams {
            params,
            from_max_cost: from_max_cost.get(),
        })
    }

    /// The parameters for a prepared cost whose largest entry is `max_cost`.
    fn for_cost(&self, max_cost: f64) -> SinkhornParams {
        let mut p = self.params.clone();
        if self.from_max_cost {
            p.eps_scaling = Some(EpsScaling::from_max_cost(max_cost));
        }
        p
    }
}

fn cg_params(tol: Option<f64>, max_iters: usize) -> CgParams {
    CgParams::default().max_iters(max_iters).tol(tol)
}

// ---------------------------------------------------------------------------------------
// Results to Python
// ---------------------------------------------------------------------------------------

/// The convergence report as a dict (its fields by name, so that new fields of the library's
/// report reach the Python `Convergence` by adding them here).
fn convergence<'py>(py: Python<'py>, c: &Convergence) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("iterations", c.iterations)?;
    d.set_item("marginal_error", c.marginal_error)?;
    d.set_item("tol", c.tol)?;
    d.set_item("converged", c.converged)?;
    d.set_item("marginal_errors", c.marginal_errors())?;
    d.set_item(
        "converged_each",
        c.problems
            .iter()
            .map(|p| p.converged)
            .collect::<Vec<bool>>(),
    )?;
    d.set_item(
        "iterations_each",
        c.problems
            .iter()
            .map(|p| p.iterations)
            .collect::<Vec<usize>>(),
    )?;
    Ok(d)
}

fn cg_summary<'py>(py: Python<'py>, c: &CgSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("problems", c.problems)?;
    d.set_item("max_iterations", c.max_iterations)?;
    d.set_item("max_residual", c.max_residual)?;
    d.set_item("unconverged", c.unconverged)?;
    d.set_item("first_unconverged", c.first_unconverged)?;
    d.set_item("tol", c.tol)?;
    Ok(d)
}

/// `(distance, f, g, convergence, objective)` of a solved batch; `objective` (B) is the
/// unbalanced objective of relaxed problems ([`SinkhornResult::objective`]), else `None`.
fn sinkhorn_result<'py, T: Element + Real>(
    py: Python<'py>,
    r: SinkhornResult<T>,
) -> PyResult<Bound<'py, PyTuple>> {
    let conv = convergence(py, &r.convergence)?;
    (
        r.distance.into_pyarray(py),
        r.f.into_pyarray(py),
        r.g.into_pyarray(py),
        conv,
        r.objective.map(|o| o.into_pyarray(py)),
    )
        .into_pyobject(py)
}

// ---------------------------------------------------------------------------------------
// Sinkhorn: distances, plans, gradients
// ---------------------------------------------------------------------------------------

/// What a Sinkhorn entry point computes.
#[derive(Clone, Copy, PartialEq)]
enum Want {
    /// Distances and the convergence summary only.
    Distance,
    /// Distances, potentials, convergence.
    Solve,
    /// And the plans.
    CouplingResult,
    /// And the exact gradients of ⟨P, C⟩ (implicit differentiation).
    Gradients,
    /// And OT_ε with its gradients with respect to the points (point-cloud cost).
    PointGradients,
}

#[allow(clippy::too_many_arguments)]
fn sinkhorn_entry<'py>(
    py: Python<'py>,
    want: Want,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: ParamsArg<'py>,
    reg_m: Option<(f64, f64)>,
    warm_start: Option<(PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>)>,
    cg: CgParams,
    backend: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let dev = device(py, backend)?;
    let cpu = matches!(dev, Device::Cpu);
    let warm =
        warm_start.map(|(f, g)| WarmStart::new(f.as_array().to_owned(), g.as_array().to_owned()));
    by_dtype!(mu, "mu", T => {
        let mu: PyReadonlyArray2<'py, T> = mu.extract()?;
        let nu: PyReadonlyArray2<'py, T> = nu.extract()?;
        let cost = CostArg::<T>::extract(cost)?;
        let source = cost.source()?;
        let mut p = params.params(|| max_cost(&source))?;
        p.warm_start = warm;
        p.relaxation = reg_m.map(|(rho_mu, rho_nu)| Relaxation::kl_each(rho_mu, rho_nu));
        let (mu, nu) = (mu.as_array(), nu.as_array());
        let on_pool = cpu && !small_dense(&source, mu.nrows());
        by_backend!(&dev, be => {
            let solver = SinkhornSolver::new(be, p);
            let run = || -> logot::Result<_> {
                let problem = Problem::new(mu, nu, source)?;
                Ok(match want {
                    Want::Solve | Want::Distance => {
                        (Some(solver.solve(&problem)?), None, None, None)
                    }
                    Want::CouplingResult => (None, Some(solver.coupling(&problem)?), None, None),
                    Want::Gradients => {
                        (None, None, Some(solver.wasserstein_gradients(&problem, &cg)?), None)
                    }
                    Want::PointGradients => {
                        (None, None, None, Some(solver.point_gradients(&problem)?))
                    }
                })
            };
            let out = compute(py, on_pool, run).py()?;
            match out {
                (Some(r), ..) if want == Want::Distance => {
                    let c = &r.convergence;
                    (r.distance.into_pyarray(py), c.converged, c.marginal_error, c.tol, c.iterations)
                        .into_pyobject(py)
                }
                (Some(r), ..) => sinkhorn_result(py, r),
                (_, Some(c), ..) => {
                    let r = sinkhorn_result(py, c.result)?;
                    (c.plan.into_pyarray(py), r).into_pyobject(py)
                }
                (_, _, Some(g), _) => {
                    let cg = cg_summary(py, &g.cg.summary())?;
                    let r = sinkhorn_result(py, g.result)?;
                    (
                        g.cost.into_pyarray(py),
                        g.mu.into_pyarray(py),
                        g.nu.into_pyarray(py),
                        cg,
                        r,
                    )
                        .into_pyobject(py)
                }
                (_, _, _, Some(g)) => {
                    let r = sinkhorn_result(py, g.result)?;
                    (
                        g.value.into_pyarray(py),
                        g.x.into_pyarray(py),
                        g.y.into_pyarray(py),
                        r,
                    )
                        .into_pyobject(py)
                }
                _ => unreachable!("one result per entry point"),
            }
        })
    })
}

/// `(distance, f, g, convergence, objective)`: distances `⟨P_b, C_b⟩` (B), potentials `f`
/// (B×n), `g` (B×m) of a batch `mu` (B×n), `nu` (B×m); `objective` (B) for relaxed problems
/// (`reg_m = (ρ_μ, ρ_ν)`, `inf` for an exact side), else `None`.
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, params, warm_start=None, backend="cpu", reg_m=None))]
#[allow(clippy::too_many_arguments)]
fn solve<'py>(
    py: Python<'py>,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: ParamsArg<'py>,
    warm_start: Option<(PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>)>,
    backend: &str,
    reg_m: Option<(f64, f64)>,
) -> PyResult<Bound<'py, PyTuple>> {
    let cg = CgParams::default();
    sinkhorn_entry(
        py,
        Want::Solve,
        mu,
        nu,
        cost,
        params,
        reg_m,
        warm_start,
        cg,
        backend,
    )
}

/// `(distance B, converged, marginal_error, tol, iterations)`: the distances of [`solve`]
/// with the convergence summary, no potentials nor per-problem lists (what
/// `logot.wasserstein` returns, with the least work per call).
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, params, warm_start=None, backend="cpu", reg_m=None))]
#[allow(clippy::too_many_arguments)]
fn wasserstein<'py>(
    py: Python<'py>,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: ParamsArg<'py>,
    warm_start: Option<(PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>)>,
    backend: &str,
    reg_m: Option<(f64, f64)>,
) -> PyResult<Bound<'py, PyTuple>> {
    let cg = CgParams::default();
    sinkhorn_entry(
        py,
        Want::Distance,
        mu,
        nu,
        cost,
        params,
        reg_m,
        warm_start,
        cg,
        backend,
    )
}

/// `(plan, (distance, f, g, convergence, objective))` with the plans `B×n×m`.
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, params, warm_start=None, backend="cpu", reg_m=None))]
#[allow(clippy::too_many_arguments)]
fn coupling<'py>(
    py: Python<'py>,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: ParamsArg<'py>,
    warm_start: Option<(PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>)>,
    backend: &str,
    reg_m: Option<(f64, f64)>,
) -> PyResult<Bound<'py, PyTuple>> {
    let cg = CgParams::default();
    sinkhorn_entry(
        py,
        Want::CouplingResult,
        mu,
        nu,
        cost,
        params,
        reg_m,
        warm_start,
        cg,
        backend,
    )
}

/// `(d_cost B×n×m, d_mu B×n, d_nu B×m, cg, (distance, f, g, convergence, objective))`: exact gradients
/// of `⟨P_b, C_b⟩` (dense costs).
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, params, warm_start=None, cg_tol=None, cg_max_iters=1000, backend="cpu"))]
#[allow(clippy::too_many_arguments)]
fn wasserstein_gradients<'py>(
    py: Python<'py>,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: ParamsArg<'py>,
    warm_start: Option<(PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>)>,
    cg_tol: Option<f64>,
    cg_max_iters: usize,
    backend: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let cg = cg_params(cg_tol, cg_max_iters);
    sinkhorn_entry(
        py,
        Want::Gradients,
        mu,
        nu,
        cost,
        params,
        None,
        warm_start,
        cg,
        backend,
    )
}

/// `(value B, d_x B×n×d, d_y B×m×d, (distance, f, g, convergence, objective))`: `OT_ε` and its
/// gradients with respect to the points (point-cloud costs).
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, params, warm_start=None, backend="cpu"))]
fn point_gradients<'py>(
    py: Python<'py>,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: ParamsArg<'py>,
    warm_start: Option<(PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>)>,
    backend: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let cg = CgParams::default();
    sinkhorn_entry(
        py,
        Want::PointGradients,
        mu,
        nu,
        cost,
        params,
        None,
        warm_start,
        cg,
        backend,
    )
}

/// `(d_cost, d_mu, d_nu, cg)`: exact gradients of a loss `L(P)` of the plans `plan` (B×n×m)
/// from `upstream = ∂L/∂P`, by implicit differentiation.
#[pyfunction]
#[pyo3(signature = (plan, eps, upstream, cg_tol=None, cg_max_iters=1000, backend="cpu"))]
fn plan_gradients<'py>(
    py: Python<'py>,
    plan: &Bound<'py, PyAny>,
    eps: f64,
    upstream: &Bound<'py, PyAny>,
    cg_tol: Option<f64>,
    cg_max_iters: usize,
    backend: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let dev = device(py, backend)?;
    let cpu = matches!(dev, Device::Cpu);
    let cg = cg_params(cg_tol, cg_max_iters);
    by_dtype!(plan, "plan", T => {
        let plan: PyReadonlyArray3<'py, T> = plan.extract()?;
        let upstream: PyReadonlyArray3<'py, T> = upstream.extract()?;
        let (p, g) = (plan.as_array(), upstream.as_array());
        let out = by_backend!(&dev, be => {
            compute(py, cpu, || logot::grad::plan_gradients_on(&be, p, eps, g, &cg)).py()?
        });
        let cg = cg_summary(py, &out.cg.summary())?;
        (
            out.cost.into_pyarray(py),
            out.mu.into_pyarray(py),
            out.nu.into_pyarray(py),
            cg,
        )
            .into_pyobject(py)
    })
}

/// `(value, grad_x, grad_y, terms, (conv_xy, conv_xx, conv_yy))`: the Sinkhorn divergence
/// `S_ε = W(a, b) − ½ W(a, a) − ½ W(b, b)` of two weighted clouds, `W` the regularised
/// objective (`convention = "objective"`, with gradients) or `⟨P, C⟩` (`"linear"`, without);
/// with `reg_m` the unbalanced divergence (one ρ on both sides, `+ (ε/2)(Σa − Σb)²`).
/// `x` `B×n×d`, `y` `B×m×d` with `a` `B×n`, `b` `B×m`: a batch of pairs, problem `k` on
/// `x[k]`, `y[k]` (see [`divergence_batch`] for the result).
#[pyfunction]
#[pyo3(signature = (x, y, a, b, metric, precision, params, backend="cpu", convention="objective", reg_m=None))]
#[allow(clippy::too_many_arguments)]
fn sinkhorn_divergence<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    a: &Bound<'py, PyAny>,
    b: &Bound<'py, PyAny>,
    metric: &str,
    precision: Option<&str>,
    params: ParamsArg<'py>,
    backend: &str,
    convention: &str,
    reg_m: Option<(f64, f64)>,
) -> PyResult<Bound<'py, PyTuple>> {
    let convention = match convention {
        "objective" => DivergenceConvention::Objective,
        "linear" => DivergenceConvention::Linear,
        c => {
            return Err(PyValueError::new_err(format!(
                "convention = {c:?}: expected \"objective\" or \"linear\""
            )))
        }
    };
    let dev = device(py, backend)?;
    let cpu = matches!(dev, Device::Cpu);
    let metric = point_metric(metric)?;
    let precision = cross_precision(precision)?;
    let relaxation = reg_m.map(|(rho_mu, rho_nu)| Relaxation::kl_each(rho_mu, rho_nu));
    if clouds_batched(x, y)? {
        return by_dtype!(x, "x", T => {
            let x: PyReadonlyArray3<'py, T> = x.extract()?;
            let y: PyReadonlyArray3<'py, T> = y.extract()?;
            let a: PyReadonlyArray2<'py, T> = a.extract()?;
            let b: PyReadonlyArray2<'py, T> = b.extract()?;
            let (av, bv) = (a.as_array(), b.as_array());
            let clouds = PointCloudCost::batched_with_metric(x.as_array(), y.as_array(), metric)
                .py()?
                .with_precision(precision);
            let mut p = params.params(|| clouds.max_cost())?;
            p.relaxation = relaxation;
            let s = by_backend!(&dev, be => {
                let solver = SinkhornSolver::new(be, p);
                compute(py, cpu, || solver.sinkhorn_divergence_batch(av, bv, clouds, convention)).py()?
            });
            divergence_batch(py, s, x.as_array().dim(), y.as_array().dim())
        });
    }
    by_dtype!(x, "x", T => {
        let x: PyReadonlyArray2<'py, T> = x.extract()?;
        let y: PyReadonlyArray2<'py, T> = y.extract()?;
        let a: PyReadonlyArray1<'py, T> = a.extract()?;
        let b: PyReadonlyArray1<'py, T> = b.extract()?;
        let (xv, yv, av, bv) = (x.as_array(), y.as_array(), a.as_array(), b.as_array());
        let mut p = params.params(|| {
            PointCloudCost::with_metric(xv, yv, metric).map_or(1.0, |c| c.max_cost())
        })?;
        p.relaxation = relaxation;
        let clouds = PointCloudCost::with_metric(xv, yv, metric)
            .py()?
            .with_precision(precision);
        let s = by_backend!(&dev, be => {
            let solver = SinkhornSolver::new(be, p);
            compute(py, cpu, || solver.sinkhorn_divergence(av, bv, clouds.clone(), convention)).py()?
        });
        let convs = (
            convergence(py, &s.convergence[0])?,
            convergence(py, &s.convergence[1])?,
            convergence(py, &s.convergence[2])?,
        );
        let terms = (s.terms[0].f64(), s.terms[1].f64(), s.terms[2].f64());
        (
            s.value.f64(),
            s.grad_x.map(|g| g.into_pyarray(py)),
            s.grad_y.map(|g| g.into_pyarray(py)),
            terms,
            convs,
        )
            .into_pyobject(py)
    })
}

/// `(value B, grad_x B×n×d, grad_y B×m×d, terms B×3, [(conv_xy, conv_xx, conv_yy); B])`:
/// the divergences of a batch of pairs (`x` `B×n×d`, `y` `B×m×d`), the gradients `None`
/// without them (`"linear"`).
fn divergence_batch<'py, T: Element + Real>(
    py: Python<'py>,
    s: Vec<DivergenceResult<T>>,
    (batch, n, d): (usize, usize, usize),
    (_, m, _): (usize, usize, usize),
) -> PyResult<Bound<'py, PyTuple>> {
    let stacked = |rows: usize, grad: fn(&DivergenceResult<T>) -> Option<&Array2<T>>| {
        let mut out = Array3::<T>::zeros((batch, rows, d));
        for (mut slot, sk) in out.outer_iter_mut().zip(&s) {
            slot.assign(grad(sk)?);
        }
        Some(out)
    };
    let grad_x = stacked(n, |sk| sk.grad_x.as_ref());
    let grad_y = stacked(m, |sk| sk.grad_y.as_ref());
    let value = Array1::from_iter(s.iter().map(|sk| sk.value));
    let terms = Array2::from_shape_fn((s.len(), 3), |(k, t)| s[k].terms[t]);
    let convs = s
        .iter()
        .map(|sk| {
            Ok((
                convergence(py, &sk.convergence[0])?,
                convergence(py, &sk.convergence[1])?,
                convergence(py, &sk.convergence[2])?,
            ))
        })
        .collect::<PyResult<Vec<_>>>()?;
    (
        value.into_pyarray(py),
        grad_x.map(|g| g.into_pyarray(py)),
        grad_y.map(|g| g.into_pyarray(py)),
        terms.into_pyarray(py),
        convs,
    )
        .into_pyobject(py)
}

// ---------------------------------------------------------------------------------------
// Barycenters
// ---------------------------------------------------------------------------------------

/// `(histograms P×m, iterations, errors P, converged P)`: `P` barycenters of `K` inputs
/// each (`histograms` P×K×n, `weights` P×K) on a dense cost or `("grid", shape)`.
/// `params = (eps, max_iters or None, tol, check_every)`.
#[pyfunction]
#[pyo3(signature = (histograms, weights, cost, params, backend="cpu"))]
fn barycenter<'py>(
    py: Python<'py>,
    histograms: &Bound<'py, PyAny>,
    weights: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: (f64, Option<usize>, f64, usize),
    backend: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let dev = device(py, backend)?;
    let cpu = matches!(dev, Device::Cpu);
    let (eps, max_iters, tol, check_every) = params;
    let p = BarycenterParams::new(eps)
        .max_iters(max_iters)
        .tol(tol)
        .check_every(check_every);
    by_dtype!(histograms, "histograms", T => {
        let h: PyReadonlyArray3<'py, T> = histograms.extract()?;
        let w: PyReadonlyArray2<'py, T> = weights.extract()?;
        let cost = CostArg::<T>::extract(cost)?;
        let source = cost.source()?;
        let (hv, wv) = (h.as_array(), w.as_array());
        let bars = by_backend!(&dev, be => {
            let solver = BarycenterSolver::new(be, p);
            compute(py, cpu, || solver.solve_batch(hv, wv, source)).py()?
        });
        let m = bars.first().map_or(0, |b| b.histogram.len());
        let mut out = Array2::<T>::zeros((bars.len(), m));
        for (mut row, b) in out.outer_iter_mut().zip(&bars) {
            row.assign(&b.histogram);
        }
        let iterations = bars.first().map_or(0, |b| b.iterations);
        let errors: Vec<f64> = bars.iter().map(|b| b.error).collect();
        let converged: Vec<bool> = bars.iter().map(|b| b.converged).collect();
        (out.into_pyarray(py), iterations, errors, converged).into_pyobject(py)
    })
}

// ---------------------------------------------------------------------------------------
// BistochasticSolver projection, linear algebra
// ---------------------------------------------------------------------------------------

/// `(R, convergence)`: `R = SinkhornKnopp(exp(X))` for each matrix of `x` (B×n×n).
#[pyfunction]
#[pyo3(signature = (x, iters=20, tol=0.0, backend="cpu"))]
fn bistochastic<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    iters: usize,
    tol: f64,
    backend: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let dev = device(py, backend)?;
    let cpu = matches!(dev, Device::Cpu);
    let params = BistochasticParams::default().iters(iters).tol(tol);
    by_dtype!(x, "x", T => {
        let x: PyReadonlyArray3<'py, T> = x.extract()?;
        let xv = x.as_array();
        let out = by_backend!(&dev, be => {
            let proj = BistochasticSolver::new(be, params);
            compute(py, cpu, || proj.forward(xv)).py()?
        });
        let conv = convergence(py, &out.convergence)?;
        (out.r.into_pyarray(py), conv).into_pyobject(py)
    })
}

/// `(dX, cg)`: `∂L/∂X` from `R` (B×n×n) and `g = ∂L/∂R`, by implicit differentiation.
#[pyfunction]
#[pyo3(signature = (r, g, cg_tol=None, cg_max_iters=1000, backend="cpu"))]
fn bistochastic_backward<'py>(
    py: Python<'py>,
    r: &Bound<'py, PyAny>,
    g: &Bound<'py, PyAny>,
    cg_tol: Option<f64>,
    cg_max_iters: usize,
    backend: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let dev = device(py, backend)?;
    let cpu = matches!(dev, Device::Cpu);
    let cg = cg_params(cg_tol, cg_max_iters);
    by_dtype!(r, "r", T => {
        let r: PyReadonlyArray3<'py, T> = r.extract()?;
        let g: PyReadonlyArray3<'py, T> = g.extract()?;
        let (rv, gv): (ArrayView3<'_, T>, ArrayView3<'_, T>) = (r.as_array(), g.as_array());
        let out = by_backend!(&dev, be => {
            let proj = BistochasticSolver::new(be, BistochasticParams::default());
            compute(py, cpu, || proj.backward(rv, gv, &cg)).py()?
        });
        let cg = cg_summary(py, &out.cg)?;
        (out.dx.into_pyarray(py), cg).into_pyobject(py)
    })
}

// ---------------------------------------------------------------------------------------
// CUDA tensors in place (logot.torch): device addresses and the caller's stream
// ---------------------------------------------------------------------------------------

/// The shared CUDA backend of GPU `device` launching on the caller's stream `stream` (a
/// `CUstream` as an integer, `torch.cuda.current_stream(device).cuda_stream`).
///
/// # Safety
/// `stream` is a live stream of GPU `device`'s primary context (every stream PyTorch hands
/// out is) that outlives the returned backend (the bindings drop it before returning).
unsafe fn cuda_on_stream(device: usize, stream: usize) -> logot::Result<CudaBackend> {
    let be = cuda_backend(device)?;
    // SAFETY: this function's contract.
    Ok(unsafe { be.on_stream(stream as *mut _) })
}

/// What a deferred bistochastic call left in its statistics words, to decode them once they
/// are back: the kind of call and how it ran.
#[derive(Clone, Copy, Debug)]
enum Deferred {
    Forward {
        batch: usize,
        tol: f64,
    },
    Backward {
        batch: usize,
        double: bool,
        cg_tol: Option<f64>,
    },
}

/// Rows of page-locked memory per GPU that the deferred calls' words come back through: a
/// call waits (for the oldest) only when this many are in flight.
const MAILBOX_ROWS: usize = 512;

/// The statistics mailboxes of the in-place bistochastic calls, one per GPU, created at the
/// first call (a page-locked allocation: it synchronises the device once).
static MAILBOXES: Mutex<Option<HashMap<usize, WordsMailbox<Deferred>>>> = Mutex::new(None);

/// Collected `(tag, words)` of the deferred calls: those whose copy has completed (`wait`:
/// all, waiting for their events), every GPU's.
fn collect_deferred(wait: bool) -> logot::Result<Vec<(Deferred, Vec<u64>)>> {
    let mut boxes = MAILBOXES.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::new();
    for mail in boxes.get_or_insert_with(HashMap::new).values_mut() {
        out.extend(if wait { mail.drain()? } else { mail.ready()? });
    }
    Ok(out)
}

/// After a deferred launch on `be`'s stream: the statistics whose copy has completed, then
/// the copy of this call's first `count` words queued into GPU `device`'s mailbox (with the
/// oldest entry, when every row was in flight).
fn post_deferred(
    be: &CudaBackend,
    device: usize,
    w: &CudaBuffer<u64>,
    count: usize,
    tag: Deferred,
) -> logot::Result<Vec<(Deferred, Vec<u64>)>> {
    let mut boxes = MAILBOXES.lock().unwrap_or_else(|p| p.into_inner());
    let boxes = boxes.get_or_insert_with(HashMap::new);
    let mail = match boxes.entry(device) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => {
            let width = words::PROJECTION.max(words::CG_SUMMARY);
            e.insert(WordsMailbox::new(be, MAILBOX_ROWS, width)?)
        }
    };
    let mut out = mail.ready()?;
    // SAFETY: `w` is a borrowed buffer of `count` words of this stream, live until the
    // stream is past the copy (the bindings' contract).
    out.extend(unsafe { mail.post(be, w, count, tag)? });
    Ok(out)
}

/// Decoded statistics for Python: `(kind, statistics or None, error or None, tol, batch)`;
/// `"forward"`: `(iterations, marginal_error, unconverged)`, `"backward"`: the CG summary
/// as `bistochastic_backward` returns it; an error (a non-finite column error, right-hand
/// side or residual) is the message the synchronous call raises.
fn decoded_reports<'py>(
    py: Python<'py>,
    entries: Vec<(Deferred, Vec<u64>)>,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let mut out = Vec::with_capacity(entries.len());
    for (tag, w) in entries {
        let (kind, (tol, batch), stats) = match tag {
            Deferred::Forward { batch, tol } => (
                "forward",
                (Some(tol), batch),
                match ProjectionStats::from_words(&w).and_then(|s| s.checked()) {
                    Ok(s) => Ok((s.iterations, s.marginal_error, s.unconverged)
                        .into_pyobject(py)?
                        .into_any()),
                    Err(e) => Err(e),
                },
            ),
            Deferred::Backward {
                batch,
                double,
                cg_tol,
            } => {
                let cg = cg_params(cg_tol, 1);
                let tol = if double {
                    cg.effective_tol::<f64>()
                } else {
                    cg.effective_tol::<f32>()
                };
                let stats = match cg_summary_from_words(&w, batch, tol) {
                    Ok(s) => Ok(cg_summary(py, &s)?.into_any()),
                    Err(e) => Err(e),
                };
                ("backward", (cg_tol, batch), stats)
            }
        };
        out.push(match stats {
            Ok(stats) => (kind, Some(stats), None::<String>, tol, batch).into_pyobject(py)?,
            Err(e) => (
                kind,
                None::<Bound<'py, PyAny>>,
                Some(e.to_string()),
                tol,
                batch,
            )
                .into_pyobject(py)?,
        });
    }
    Ok(out)
}

/// `len = batch·n·n` elements, or a `ValueError` when it overflows.
fn matrices_len(batch: usize, n: usize) -> PyResult<usize> {
    batch
        .checked_mul(n)
        .and_then(|v| v.checked_mul(n))
        .ok_or_else(|| PyValueError::new_err(format!("x: {batch} matrices {n}×{n} overflow")))
}

/// [`bistochastic`] on CUDA memory, without a copy and without waiting: reads the
/// `batch×n×n` logits at device address `x`, writes `R` at `r` and the three statistics
/// words ([`logot::backend::bistochastic::words`]) at `stats`, all on the caller's stream,
/// and returns with the kernel queued. With `report`, the words' copy to the host is queued
/// into GPU `device`'s mailbox ([`WordsMailbox`]), and the call returns the reports
/// (decoded as [`_bistochastic_reports`] gives them) of the earlier calls whose copy has
/// completed; without (a call captured into a CUDA graph), nothing comes back.
/// `double`: float64 data, else float32.
///
/// Private to `logot.torch`, which passes the `data_ptr()` of live, contiguous CUDA tensors
/// of GPU `device` of that dtype and size (`r` freshly allocated, aliasing nothing; `stats`
/// three int64), and `torch.cuda.current_stream(device).cuda_stream`; other arguments are
/// undefined behaviour (Python cannot mark a function unsafe: this one is).
#[pyfunction]
#[pyo3(signature = (x, r, stats, batch, n, double, iters, tol, device, stream, report))]
#[allow(clippy::too_many_arguments)]
fn _bistochastic_cuda<'py>(
    py: Python<'py>,
    x: u64,
    r: u64,
    stats: u64,
    batch: usize,
    n: usize,
    double: bool,
    iters: usize,
    tol: f64,
    device: usize,
    stream: usize,
    report: bool,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let len = matrices_len(batch, n)?;
    let params = BistochasticParams::default().iters(iters).tol(tol);
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: BistochasticParams,
        n: usize,
        [x, r, stats]: [u64; 3],
        len: usize,
        report: Option<(usize, Deferred)>,
    ) -> logot::Result<Vec<(Deferred, Vec<u64>)>> {
        // SAFETY: the caller's contract (above): `x` and `r` address `len` values of T of
        // this GPU and `stats` three words, live until the stream is past this work (torch's
        // stream-ordered allocator keeps them so); `r` and `stats` alias nothing.
        let (xb, mut rb, mut sb) = unsafe {
            (
                be.borrow_buffer::<T>(x, len),
                be.borrow_buffer::<T>(r, len),
                be.borrow_words(stats, words::PROJECTION),
            )
        };
        let proj = BistochasticSolver::new(be.clone(), params);
        proj.forward_buffers_deferred::<T>(n, &xb, &mut rb, &mut sb)?;
        match report {
            Some((device, tag)) => post_deferred(&be, device, &sb, words::PROJECTION, tag),
            None => Ok(Vec::new()),
        }
    }
    let report = report.then_some((device, Deferred::Forward { batch, tol }));
    let entries = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            if double {
                run::<f64>(be, params, n, [x, r, stats], len, report)
            } else {
                run::<f32>(be, params, n, [x, r, stats], len, report)
            }
        })
        .py()?;
    decoded_reports(py, entries)
}

/// `⟨P, C⟩` of a dense batch on CUDA memory, without a copy, on the caller's stream, and
/// (when `grads` is given, three device addresses `(∂C, ∂μ, ∂ν)`) its exact gradients
/// ([`Solver::wasserstein_gradients_into`]) written there: reads `μ` (`batch×n`) at `mu`,
/// `ν` (`batch×m`) at `nu` and the cost (`n×m`, or `batch×n×m` when `batched_cost`) at
/// `cost`; `double`: float64, else float32. Waits on that stream only, for the per-problem
/// numbers it reads back. Returns `(distances, convergence, cg summary or None)`.
///
/// Private to `logot.torch`, which passes the `data_ptr()` of live, contiguous CUDA tensors
/// of GPU `device` of that dtype and size (the gradients freshly allocated, aliasing
/// nothing) and `torch.cuda.current_stream(device).cuda_stream`; other arguments are
/// undefined behaviour (Python cannot mark a function unsafe: this one is).
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, grads, batch, n, m, batched_cost, double, params, cg_tol, cg_max_iters, device, stream))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn _wasserstein_cuda<'py>(
    py: Python<'py>,
    mu: u64,
    nu: u64,
    cost: u64,
    grads: Option<(u64, u64, u64)>,
    batch: usize,
    n: usize,
    m: usize,
    batched_cost: bool,
    double: bool,
    params: ParamsArg<'py>,
    cg_tol: Option<f64>,
    cg_max_iters: usize,
    device: usize,
    stream: usize,
) -> PyResult<(Vec<f64>, Bound<'py, PyDict>, Option<Bound<'py, PyDict>>)> {
    let overflow = || PyValueError::new_err(format!("cost: {batch}×{n}×{m} overflows"));
    let per_cost = n.checked_mul(m).ok_or_else(overflow)?;
    let lens = [
        batch.checked_mul(n).ok_or_else(overflow)?,
        batch.checked_mul(m).ok_or_else(overflow)?,
        if batched_cost {
            batch.checked_mul(per_cost).ok_or_else(overflow)?
        } else {
            per_cost
        },
        batch.checked_mul(per_cost).ok_or_else(overflow)?,
    ];
    let params = DeviceParams::new(&params)?;
    let cg = cg_params(cg_tol, cg_max_iters);
    #[allow(clippy::too_many_arguments)]
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: DeviceParams,
        cg: CgParams,
        [mu, nu, cost]: [u64; 3],
        grads: Option<(u64, u64, u64)>,
        (batch, n, m, batched_cost): (usize, usize, usize, bool),
        [mu_len, nu_len, cost_len, grad_len]: [usize; 4],
    ) -> logot::Result<(logot::BufferResult, Option<CgSummary>)> {
        // SAFETY: the caller's contract (above): the addresses hold these many values of T
        // of this GPU, live until the stream is past this work (torch's stream-ordered
        // allocator keeps them so); the gradients alias nothing.
        let (mub, nub, cb) = unsafe {
            (
                be.borrow_buffer::<T>(mu, mu_len),
                be.borrow_buffer::<T>(nu, nu_len),
                be.borrow_buffer::<T>(cost, cost_len),
            )
        };
        let dims = (batch, n, m);
        let prepared = SinkhornSolver::new(be.clone(), params.params.clone()).prepare_buffers(
            mub,
            nub,
            &cb,
            dims,
            batched_cost,
        )?;
        let params = params.for_cost(prepared.max_cost());
        let solver = SinkhornSolver::new(be.clone(), params);
        match grads {
            Some((dc, dmu, dnu)) => {
                // SAFETY: as above; fresh outputs of these lengths.
                let (mut dc, mut dmu, mut dnu) = unsafe {
                    (
                        be.borrow_buffer::<T>(dc, grad_len),
                        be.borrow_buffer::<T>(dmu, mu_len),
                        be.borrow_buffer::<T>(dnu, nu_len),
                    )
                };
                let out = logot::grad::GradientBuffers {
                    cost: &mut dc,
                    mu: &mut dmu,
                    nu: &mut dnu,
                };
                let (sol, report) = solver.wasserstein_gradients_into(&prepared, &cb, &cg, out)?;
                Ok((sol, Some(report.summary())))
            }
            None => {
                let mut f = logot::Backend::<T>::filled(&be, mu_len, T::zero())?;
                let mut g = logot::Backend::<T>::filled(&be, nu_len, T::zero())?;
                Ok((solver.solve_prepared_into(&prepared, &mut f, &mut g)?, None))
            }
        }
    }
    let (sol, summary) = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            let shape = (batch, n, m, batched_cost);
            let ptrs = [mu, nu, cost];
            if double {
                run::<f64>(be, params, cg, ptrs, grads, shape, lens)
            } else {
                run::<f32>(be, params, cg, ptrs, grads, shape, lens)
            }
        })
        .py()?;
    let conv = convergence(py, &sol.convergence)?;
    let cg = summary.map(|c| cg_summary(py, &c)).transpose()?;
    Ok((sol.distance, conv, cg))
}

/// `OT_ε` of a batch of point-cloud problems on CUDA memory, without a copy, on the caller's
/// stream ([`Solver::prepare_points_buffers`], [`Solver::point_gradients_into`]): reads `μ`
/// (`batch×n`) at `mu`, `ν` (`batch×m`) at `nu`, the clouds `x` (`n×d`, or `batch×n×d` when
/// `batched`) and `y` (`m×d` or `batch×m×d`), row-major; writes the potentials and the
/// envelope gradients at `out = (f, g, ∂x, ∂y)` (`batch×n`, `batch×m`, `batch×n×d`,
/// `batch×m×d`); `double`: float64, else float32. Waits on that stream only, for the
/// per-problem numbers it reads back. Returns `(values, distances, convergence)`.
///
/// Private to `logot.torch`, which passes the `data_ptr()` of live, contiguous CUDA tensors
/// of GPU `device` of that dtype and size (the outputs freshly allocated, aliasing nothing)
/// and `torch.cuda.current_stream(device).cuda_stream`; other arguments are undefined
/// behaviour (Python cannot mark a function unsafe: this one is).
#[pyfunction]
#[pyo3(signature = (mu, nu, x, y, out, batch, n, m, d, batched, metric, precision, double, params, device, stream))]
#[allow(clippy::too_many_arguments)]
fn _point_gradients_cuda<'py>(
    py: Python<'py>,
    mu: u64,
    nu: u64,
    x: u64,
    y: u64,
    out: (u64, u64, u64, u64),
    batch: usize,
    n: usize,
    m: usize,
    d: usize,
    batched: bool,
    metric: &str,
    precision: Option<&str>,
    double: bool,
    params: ParamsArg<'py>,
    device: usize,
    stream: usize,
) -> PyResult<(Vec<f64>, Vec<f64>, Bound<'py, PyDict>)> {
    let (lens, layout) = cloud_buffers(batch, (n, m, d), batched, metric, precision)?;
    let params = DeviceParams::new(&params)?;
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: DeviceParams,
        [mu, nu, x, y, f, g, gx, gy]: [u64; 8],
        (batch, layout): (usize, logot::CloudLayout),
        [mu_len, nu_len, x_len, y_len, gx_len, gy_len]: [usize; 6],
    ) -> logot::Result<logot::PointBufferSolution> {
        // SAFETY: the caller's contract (above).
        let [mub, nub, xb, yb] =
            unsafe { borrow_inputs::<T>(&be, [mu, nu, x, y], [mu_len, nu_len, x_len, y_len]) };
        let prepared = SinkhornSolver::new(be.clone(), params.params.clone())
            .prepare_points_buffers(mub, nub, &xb, &yb, batch, layout)?;
        let params = params.for_cost(prepared.max_cost());
        // SAFETY: as above; fresh outputs of these lengths.
        let (mut f, mut g, mut gx, mut gy) = unsafe {
            (
                be.borrow_buffer::<T>(f, mu_len),
                be.borrow_buffer::<T>(g, nu_len),
                be.borrow_buffer::<T>(gx, gx_len),
                be.borrow_buffer::<T>(gy, gy_len),
            )
        };
        SinkhornSolver::new(be, params)
            .point_gradients_into(&prepared, &mut f, &mut g, &mut gx, &mut gy)
    }
    let sol = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            let (f, g, gx, gy) = out;
            let ptrs = [mu, nu, x, y, f, g, gx, gy];
            if double {
                run::<f64>(be, params, ptrs, (batch, layout), lens)
            } else {
                run::<f32>(be, params, ptrs, (batch, layout), lens)
            }
        })
        .py()?;
    let conv = convergence(py, &sol.solution.convergence)?;
    Ok((sol.value, sol.solution.distance, conv))
}

/// A point-cloud batch on device memory as the Python layer describes it: the lengths of
/// `[μ, ν, x, y, ∂x, ∂y]` (`batch×n`, `batch×m`, `[batch×]n×d`, `[batch×]m×d`, `batch×n×d`,
/// `batch×m×d`) and the clouds' layout.
fn cloud_buffers(
    batch: usize,
    (n, m, d): (usize, usize, usize),
    batched: bool,
    metric: &str,
    precision: Option<&str>,
) -> PyResult<([usize; 6], logot::CloudLayout)> {
    let overflow = || PyValueError::new_err(format!("x: {batch}×{n}×{d} overflows"));
    let pairs = if batched { batch } else { 1 };
    let mul = |a: usize, b: usize| a.checked_mul(b).ok_or_else(overflow);
    let lens = [
        mul(batch, n)?,
        mul(batch, m)?,
        mul(mul(pairs, n)?, d)?,
        mul(mul(pairs, m)?, d)?,
        mul(mul(batch, n)?, d)?,
        mul(mul(batch, m)?, d)?,
    ];
    let layout = logot::CloudLayout {
        n,
        m,
        d,
        batch: batched.then_some(batch),
        metric: point_metric(metric)?,
        precision: cross_precision(precision)?,
    };
    Ok((lens, layout))
}

/// The inputs `[μ, ν, x, y]` of a point-cloud call, borrowed at these addresses with these
/// lengths.
///
/// # Safety
/// The addresses hold these many values of `T` of `be`'s GPU, live until its stream is past
/// the call's work (torch's stream-ordered allocator keeps them so), and are only read.
unsafe fn borrow_inputs<T: CudaReal>(
    be: &CudaBackend,
    ptrs: [u64; 4],
    lens: [usize; 4],
) -> [CudaBuffer<T>; 4] {
    // SAFETY: the caller's contract.
    std::array::from_fn(|k| unsafe { be.borrow_buffer::<T>(ptrs[k], lens[k]) })
}

/// The Sinkhorn divergences `S_ε` (objective convention) of a batch of point-cloud pairs on
/// CUDA memory, without a copy, on the caller's stream ([`Solver::prepare_divergence_buffers`],
/// [`Solver::sinkhorn_divergence_into`]): inputs as [`_point_gradients_cuda`]; writes
/// `∂S/∂x` and `∂S/∂y` at `out = (∂x, ∂y)` (`batch×n×d`, `batch×m×d`). Waits on that stream
/// only, for the per-problem numbers it reads back. Returns `(values, terms, (conv_xy,
/// conv_xx, conv_yy))`, `terms` one `(OT_ε(μ, ν), OT_ε(μ, μ), OT_ε(ν, ν))` per problem.
///
/// Private to `logot.torch`, under [`_point_gradients_cuda`]'s contract.
#[pyfunction]
#[pyo3(signature = (mu, nu, x, y, out, batch, n, m, d, batched, metric, precision, double, params, device, stream))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn _sinkhorn_divergence_cuda<'py>(
    py: Python<'py>,
    mu: u64,
    nu: u64,
    x: u64,
    y: u64,
    out: (u64, u64),
    batch: usize,
    n: usize,
    m: usize,
    d: usize,
    batched: bool,
    metric: &str,
    precision: Option<&str>,
    double: bool,
    params: ParamsArg<'py>,
    device: usize,
    stream: usize,
) -> PyResult<(
    Vec<f64>,
    Vec<[f64; 3]>,
    (Bound<'py, PyDict>, Bound<'py, PyDict>, Bound<'py, PyDict>),
)> {
    let (lens, layout) = cloud_buffers(batch, (n, m, d), batched, metric, precision)?;
    let params = DeviceParams::new(&params)?;
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: DeviceParams,
        [mu, nu, x, y, gx, gy]: [u64; 6],
        (batch, layout): (usize, logot::CloudLayout),
        [mu_len, nu_len, x_len, y_len, gx_len, gy_len]: [usize; 6],
    ) -> logot::Result<logot::DivergenceBufferSolution> {
        // SAFETY: the caller's contract (`_point_gradients_cuda`).
        let [mub, nub, xb, yb] =
            unsafe { borrow_inputs::<T>(&be, [mu, nu, x, y], [mu_len, nu_len, x_len, y_len]) };
        let prepared = SinkhornSolver::new(be.clone(), params.params.clone())
            .prepare_divergence_buffers(mub, nub, &xb, &yb, batch, layout)?;
        let params = params.for_cost(prepared.max_cost());
        // SAFETY: as above; fresh outputs of these lengths.
        let (mut gx, mut gy) = unsafe {
            (
                be.borrow_buffer::<T>(gx, gx_len),
                be.borrow_buffer::<T>(gy, gy_len),
            )
        };
        SinkhornSolver::new(be, params).sinkhorn_divergence_into(&prepared, &mut gx, &mut gy)
    }
    let sol = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            let ptrs = [mu, nu, x, y, out.0, out.1];
            if double {
                run::<f64>(be, params, ptrs, (batch, layout), lens)
            } else {
                run::<f32>(be, params, ptrs, (batch, layout), lens)
            }
        })
        .py()?;
    let [xy, xx, yy] = &sol.convergence;
    let convs = (
        convergence(py, xy)?,
        convergence(py, xx)?,
        convergence(py, yy)?,
    );
    Ok((sol.value, sol.terms, convs))
}

/// The plans of a dense batch on CUDA memory ([`Solver::coupling_into`]), written at `plan`
/// (`batch×n×m`); inputs and contract as [`_wasserstein_cuda`] (`plan` fresh). Returns the
/// convergence report of the potentials.
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, plan, batch, n, m, batched_cost, double, params, device, stream))]
#[allow(clippy::too_many_arguments)]
fn _coupling_cuda<'py>(
    py: Python<'py>,
    mu: u64,
    nu: u64,
    cost: u64,
    plan: u64,
    batch: usize,
    n: usize,
    m: usize,
    batched_cost: bool,
    double: bool,
    params: ParamsArg<'py>,
    device: usize,
    stream: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let overflow = || PyValueError::new_err(format!("cost: {batch}×{n}×{m} overflows"));
    let per_cost = n.checked_mul(m).ok_or_else(overflow)?;
    let plan_len = batch.checked_mul(per_cost).ok_or_else(overflow)?;
    let lens = [
        batch.checked_mul(n).ok_or_else(overflow)?,
        batch.checked_mul(m).ok_or_else(overflow)?,
        if batched_cost { plan_len } else { per_cost },
        plan_len,
    ];
    let params = DeviceParams::new(&params)?;
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: DeviceParams,
        [mu, nu, cost, plan]: [u64; 4],
        (batch, n, m, batched_cost): (usize, usize, usize, bool),
        [mu_len, nu_len, cost_len, plan_len]: [usize; 4],
    ) -> logot::Result<logot::BufferResult> {
        // SAFETY: the caller's contract (as `_wasserstein_cuda`); `plan` aliases nothing.
        let (mub, nub, cb, mut pb) = unsafe {
            (
                be.borrow_buffer::<T>(mu, mu_len),
                be.borrow_buffer::<T>(nu, nu_len),
                be.borrow_buffer::<T>(cost, cost_len),
                be.borrow_buffer::<T>(plan, plan_len),
            )
        };
        let prepared = SinkhornSolver::new(be.clone(), params.params.clone()).prepare_buffers(
            mub,
            nub,
            &cb,
            (batch, n, m),
            batched_cost,
        )?;
        let params = params.for_cost(prepared.max_cost());
        SinkhornSolver::new(be, params).coupling_into(&prepared, &mut pb)
    }
    let sol = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            let shape = (batch, n, m, batched_cost);
            let ptrs = [mu, nu, cost, plan];
            if double {
                run::<f64>(be, params, ptrs, shape, lens)
            } else {
                run::<f32>(be, params, ptrs, shape, lens)
            }
        })
        .py()?;
    convergence(py, &sol.convergence)
}

/// The implicit gradients of a loss of the plans on CUDA memory
/// ([`logot::grad::plan_gradients_into`]): reads the plans at `plan` and `∂L/∂P` at
/// `upstream` (`batch×n×m` each), writes `∂L/∂C` at `grads.0` (`batch×n×m`), `∂L/∂μ` at
/// `grads.1` (`batch×n`) and `∂L/∂ν` at `grads.2` (`batch×m`), on the caller's stream;
/// returns the CG summary. Contract as [`_wasserstein_cuda`] (the outputs fresh).
#[pyfunction]
#[pyo3(signature = (plan, upstream, grads, batch, n, m, double, eps, cg_tol, cg_max_iters, device, stream))]
#[allow(clippy::too_many_arguments)]
fn _plan_gradients_cuda<'py>(
    py: Python<'py>,
    plan: u64,
    upstream: u64,
    grads: (u64, u64, u64),
    batch: usize,
    n: usize,
    m: usize,
    double: bool,
    eps: f64,
    cg_tol: Option<f64>,
    cg_max_iters: usize,
    device: usize,
    stream: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let overflow = || PyValueError::new_err(format!("plan: {batch}×{n}×{m} overflows"));
    let len = batch
        .checked_mul(n)
        .and_then(|v| v.checked_mul(m))
        .ok_or_else(overflow)?;
    let cg = cg_params(cg_tol, cg_max_iters);
    fn run<T: CudaReal>(
        be: CudaBackend,
        [plan, upstream, dc, dmu, dnu]: [u64; 5],
        (batch, n, m, len): (usize, usize, usize, usize),
        eps: f64,
        cg: CgParams,
    ) -> logot::Result<CgSummary> {
        // SAFETY: the caller's contract: these addresses hold these many values of T of
        // this GPU, live until the stream is past this work; the outputs alias nothing.
        let (p, g, mut dc, mut dmu, mut dnu) = unsafe {
            (
                be.borrow_buffer::<T>(plan, len),
                be.borrow_buffer::<T>(upstream, len),
                be.borrow_buffer::<T>(dc, len),
                be.borrow_buffer::<T>(dmu, batch * n),
                be.borrow_buffer::<T>(dnu, batch * m),
            )
        };
        let out = logot::grad::GradientBuffers {
            cost: &mut dc,
            mu: &mut dmu,
            nu: &mut dnu,
        };
        let report = logot::grad::plan_gradients_into(&be, &p, (batch, n, m), eps, &g, &cg, out)?;
        Ok(report.summary())
    }
    let summary = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            let ptrs = [plan, upstream, grads.0, grads.1, grads.2];
            let shape = (batch, n, m, len);
            if double {
                run::<f64>(be, ptrs, shape, eps, cg)
            } else {
                run::<f32>(be, ptrs, shape, eps, cg)
            }
        })
        .py()?;
    cg_summary(py, &summary)
}

/// [`bistochastic_backward`] on CUDA memory, without a copy and without waiting: reads `R`
/// at `r` and `g = ∂L/∂R` at `g` (`batch×n×n`), writes `∂L/∂X` at `dx` and the CG summary
/// in the first words of the `words` int64 (as many as [`_bistochastic_words`] says: the
/// summary, then scratch), on the caller's stream. Contract and `report` as
/// [`_bistochastic_cuda`] (`dx` and `words` fresh).
#[pyfunction]
#[pyo3(signature = (r, g, dx, words, nwords, batch, n, double, cg_tol, cg_max_iters, device, stream, report))]
#[allow(clippy::too_many_arguments)]
fn _bistochastic_backward_cuda<'py>(
    py: Python<'py>,
    r: u64,
    g: u64,
    dx: u64,
    words: u64,
    nwords: usize,
    batch: usize,
    n: usize,
    double: bool,
    cg_tol: Option<f64>,
    cg_max_iters: usize,
    device: usize,
    stream: usize,
    report: bool,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let len = matrices_len(batch, n)?;
    let cg = cg_params(cg_tol, cg_max_iters);
    fn run<T: CudaReal>(
        be: CudaBackend,
        cg: &CgParams,
        n: usize,
        [r, g, dx, words]: [u64; 4],
        (len, nwords): (usize, usize),
        report: Option<(usize, Deferred)>,
    ) -> logot::Result<Vec<(Deferred, Vec<u64>)>> {
        // SAFETY: the caller's contract: three addresses of `len` values of T of this GPU and
        // `nwords` words, live until the stream is past this work; `dx` and `words` alias
        // nothing.
        let (rb, gb, mut db, mut wb) = unsafe {
            (
                be.borrow_buffer::<T>(r, len),
                be.borrow_buffer::<T>(g, len),
                be.borrow_buffer::<T>(dx, len),
                be.borrow_words(words, nwords),
            )
        };
        let proj = BistochasticSolver::new(be.clone(), BistochasticParams::default());
        proj.backward_buffers_deferred::<T>(n, &rb, &gb, cg, &mut db, &mut wb)?;
        match report {
            Some((device, tag)) => post_deferred(&be, device, &wb, words::CG_SUMMARY, tag),
            None => Ok(Vec::new()),
        }
    }
    let tag = Deferred::Backward {
        batch,
        double,
        cg_tol,
    };
    let report = report.then_some((device, tag));
    let entries = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            let addresses = [r, g, dx, words];
            if double {
                run::<f64>(be, &cg, n, addresses, (len, nwords), report)
            } else {
                run::<f32>(be, &cg, n, addresses, (len, nwords), report)
            }
        })
        .py()?;
    decoded_reports(py, entries)
}

/// `(forward, backward)`: how many int64 words [`_bistochastic_cuda`] and
/// [`_bistochastic_backward_cuda`] need for `batch` matrices on GPU `device` (the
/// backward's: its CG summary, then scratch).
#[pyfunction]
fn _bistochastic_words(py: Python<'_>, batch: usize, device: usize) -> PyResult<(usize, usize)> {
    let be = py.detach(|| cuda_backend(device)).py()?;
    let backward = BistochasticKernels::<f32>::bistochastic_backward_words(&be, batch);
    Ok((words::PROJECTION, backward))
}

/// The reports of the in-place bistochastic calls (every GPU's) whose statistics have come
/// back: those whose copy has completed, or with `wait` all of them (waiting for their
/// copies' events, never the device), in call order per GPU. Each is
/// `(kind, statistics or None, error or None, tol, batch)`: `"forward"` with
/// `(iterations, marginal_error, unconverged)` and the projection's `tol`, `"backward"` with
/// the CG summary as `bistochastic_backward` returns it and the call's `cg_tol`; an error
/// (non-finite logits, right-hand side or residual) is the message the synchronous call
/// raises.
#[pyfunction]
fn _bistochastic_reports(py: Python<'_>, wait: bool) -> PyResult<Vec<Bound<'_, PyTuple>>> {
    let entries = py.detach(|| collect_deferred(wait)).py()?;
    decoded_reports(py, entries)
}

/// `(U B×M×3, S B×3, Vt B×3×3)`: thin SVDs of a batch of `M×3` matrices.
#[pyfunction]
#[pyo3(signature = (a, backend="cpu"))]
fn svd3<'py>(
    py: Python<'py>,
    a: &Bound<'py, PyAny>,
    backend: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let dev = device(py, backend)?;
    let cpu = matches!(dev, Device::Cpu);
    by_dtype!(a, "a", T => {
        let a: PyReadonlyArray3<'py, T> = a.extract()?;
        let av = a.as_array();
        let out = by_backend!(&dev, be => {
            compute(py, cpu, || svd3_batch(&be, av)).py()?
        });
        (out.u.into_pyarray(py), out.s.into_pyarray(py), out.vt.into_pyarray(py))
            .into_pyobject(py)
    })
}

/// Newton–Schulz orthogonalisation of `x` (r×c): `steps` steps of
/// `X ← aX + b(XXᵀ)X + c(XXᵀ)²X` with `coefficients = (a, b, c)`, then `polish_steps`
/// cubic steps.
#[pyfunction]
#[pyo3(signature = (x, steps, coefficients, polish_steps, backend="cpu"))]
fn newton_schulz<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    steps: usize,
    coefficients: [f64; 3],
    polish_steps: usize,
    backend: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let dev = device(py, backend)?;
    let cpu = matches!(dev, Device::Cpu);
    let params = NewtonSchulzParams::default()
        .steps(steps)
        .coefficients(coefficients)
        .polish_steps(polish_steps);
    by_dtype!(x, "x", T => {
        let x: PyReadonlyArray2<'py, T> = x.extract()?;
        let xv: ArrayView2<'_, T> = x.as_array();
        let out = by_backend!(&dev, be => {
            compute(py, cpu, || newton_schulz(&be, xv, &params)).py()?
        });
        Ok(out.into_pyarray(py).into_any())
    })
}

// ---------------------------------------------------------------------------------------
// Devices and timing
// ---------------------------------------------------------------------------------------

/// The name of GPU `ordinal`; raises `RuntimeError` with the library's reason when the CUDA
/// backend cannot run there (no driver, no GPU, ...).
#[pyfunction]
#[pyo3(signature = (ordinal=0))]
fn cuda_device_name(py: Python<'_>, ordinal: usize) -> PyResult<String> {
    let be = py.detach(|| cuda_backend(ordinal)).py()?;
    Ok(be.device_name().to_string())
}

/// Per-call times in seconds of the library's solve for `mu` (n), `nu` (m) and a dense
/// `cost` (n×m) with default parameters at `eps`, measured in Rust over `repeats` calls:
/// the reference for the Python layer's overhead (python/bench/overhead.py). Each call is
/// what a Rust program writes, `Solver::solve(&Problem::new(..)?)` from its own thread;
/// `on_pool` runs the calls on a rayon worker instead, as [`compute`] does.
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, eps, repeats=1000, on_pool=false))]
fn _time_wasserstein(
    py: Python<'_>,
    mu: PyReadonlyArray1<'_, f64>,
    nu: PyReadonlyArray1<'_, f64>,
    cost: PyReadonlyArray2<'_, f64>,
    eps: f64,
    repeats: usize,
    on_pool: bool,
) -> PyResult<Vec<f64>> {
    let (mu, nu, cost) = (mu.as_array(), nu.as_array(), cost.as_array());
    let run = || -> logot::Result<Vec<f64>> {
        let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps));
        let mut times = Vec::with_capacity(repeats);
        for _ in 0..repeats {
            let t = std::time::Instant::now();
            let r = solver.solve(&Problem::new(mu, nu, cost)?)?;
            std::hint::black_box(&r);
            times.push(t.elapsed().as_secs_f64());
        }
        Ok(times)
    };
    compute(py, on_pool, run).py()
}

#[pymodule]
fn _logot(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(solve, m)?)?;
    m.add_function(wrap_pyfunction!(wasserstein, m)?)?;
    m.add_function(wrap_pyfunction!(coupling, m)?)?;
    m.add_function(wrap_pyfunction!(wasserstein_gradients, m)?)?;
    m.add_function(wrap_pyfunction!(point_gradients, m)?)?;
    m.add_function(wrap_pyfunction!(plan_gradients, m)?)?;
    m.add_function(wrap_pyfunction!(sinkhorn_divergence, m)?)?;
    m.add_function(wrap_pyfunction!(barycenter, m)?)?;
    m.add_function(wrap_pyfunction!(bistochastic, m)?)?;
    m.add_function(wrap_pyfunction!(bistochastic_backward, m)?)?;
    m.add_function(wrap_pyfunction!(_bistochastic_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_bistochastic_backward_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_bistochastic_words, m)?)?;
    m.add_function(wrap_pyfunction!(_bistochastic_reports, m)?)?;
    m.add_function(wrap_pyfunction!(_wasserstein_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_point_gradients_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_sinkhorn_divergence_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_coupling_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_plan_gradients_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(svd3, m)?)?;
    m.add_function(wrap_pyfunction!(newton_schulz, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_device_name, m)?)?;
    m.add_function(wrap_pyfunction!(_time_wasserstein, m)?)?;
    m.add_function(wrap_pyfunction!(_last_compute_seconds, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
