//! Errors, dtypes, backends and the timing of the library calls.

use logot::{CostSource, CpuBackend, CudaBackend, Problem, SinkhornParams, SinkhornSolver};
use numpy::{
    PyArrayDescrMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::Mutex;

/// Bad input (shapes, values, parameters) is a `ValueError`; everything else (numerical
/// failure, CUDA, memory, an unavailable backend, files) a `RuntimeError`.
pub(crate) fn to_py_err(e: logot::Error) -> PyErr {
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

/// A library result as a Python one ([`to_py_err`]).
pub(crate) trait OrPyErr<T> {
    fn py(self) -> PyResult<T>;
}
impl<T> OrPyErr<T> for logot::Result<T> {
    fn py(self) -> PyResult<T> {
        self.map_err(to_py_err)
    }
}

/// The element type of the arrays of a call.
#[derive(Clone, Copy)]
pub(crate) enum Dtype {
    F32,
    F64,
}

/// The dtype of `array` (float32 or float64; the Python layer converts anything else).
pub(crate) fn dtype_of(array: &Bound<'_, PyAny>, arg: &str) -> PyResult<Dtype> {
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

/// The number of dimensions of the numpy array `a` (a `TypeError` naming `arg` otherwise).
pub(crate) fn ndim(a: &Bound<'_, PyAny>, arg: &str) -> PyResult<usize> {
    a.cast::<PyUntypedArray>()
        .map(|a| a.ndim())
        .map_err(|_| PyTypeError::new_err(format!("{arg}: expected a numpy array")))
}

/// A backend named by the Python layer: `"cpu"`, `"cuda"` or `"cuda:N"`.
pub(crate) enum Device {
    Cpu,
    Cuda(CudaBackend),
}

impl Device {
    pub(crate) fn is_cpu(&self) -> bool {
        matches!(self, Device::Cpu)
    }
}

/// One CUDA backend per GPU and process: creating one loads the driver.
static CUDA: Mutex<Option<HashMap<usize, CudaBackend>>> = Mutex::new(None);

pub(crate) fn cuda_backend(ordinal: usize) -> logot::Result<CudaBackend> {
    let mut cache = CUDA.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(be) = cache.get(&ordinal) {
        return Ok(be.clone());
    }
    let be = CudaBackend::with_device(ordinal)?;
    cache.insert(ordinal, be.clone());
    Ok(be)
}

pub(crate) fn device(py: Python<'_>, name: &str) -> PyResult<Device> {
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

/// The GIL released around `f`; on the CPU, `f` runs on a rayon worker (saves a thread
/// hand-off per kernel on problems large enough for the kernels to split, as the library's
/// own top-level functions do).
///
/// The wall-clock time of `f` itself (the library calls: building the problem and solving
/// it) is kept per calling thread for [`_last_compute_seconds`], so that the bindings'
/// overhead can be measured inside the same call rather than against a separate one.
pub(crate) fn compute<R: Send>(py: Python<'_>, cpu: bool, f: impl FnOnce() -> R + Send) -> R {
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

pub(crate) fn small_dense<T>(cost: &CostSource<'_, T>, batch: usize) -> bool {
    let entries = match cost {
        CostSource::Dense(c) => c.len().saturating_mul(batch),
        CostSource::DenseBatch(c) => c.len(),
        _ => return false,
    };
    entries < SMALL_DENSE
}

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
/// what a Rust program writes, `SinkhornSolver::solve(&Problem::new(..)?)` from its own
/// thread; `on_pool` runs the calls on a rayon worker instead, as [`compute`] does.
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

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cuda_device_name, m)?)?;
    m.add_function(wrap_pyfunction!(_time_wasserstein, m)?)?;
    m.add_function(wrap_pyfunction!(_last_compute_seconds, m)?)?;
    Ok(())
}
