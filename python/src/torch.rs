//! CUDA tensors in place, for `logot.torch`: Sinkhorn distances, plans, gradients, point
//! gradients and divergences on the caller's device memory and stream, without a copy.
//!
//! Every function here is private to `logot.torch`, which passes the `data_ptr()` of live,
//! contiguous CUDA tensors of the stated dtype and size and the caller's stream; other
//! arguments are undefined behaviour (Python cannot mark a function unsafe: these are).

use crate::args::{cg_params, cross_precision, point_metric, DeviceParams, ParamsArg};
use crate::common::{cuda_backend, OrPyErr};
use crate::results::{cg_summary, convergence, CgSummary as CgReport, ConvergenceReport};
use logot::backend::cuda::{CudaBuffer, CudaReal};
use logot::grad::{CgParams, CgSummary, GradientBuffers};
use logot::{
    BufferOutputs, BufferProblem, CudaBackend, PreparedDivergence, PreparedProblem, SinkhornParams,
    SinkhornSolver,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// The shared CUDA backend of GPU `device` launching on the caller's stream `stream` (a
/// `CUstream` as an integer, `torch.cuda.current_stream(device).cuda_stream`).
///
/// # Safety
/// `stream` is a live stream of GPU `device`'s primary context (every stream PyTorch hands
/// out is) that outlives the returned backend (the bindings drop it before returning).
pub(crate) unsafe fn cuda_on_stream(device: usize, stream: usize) -> logot::Result<CudaBackend> {
    let be = cuda_backend(device)?;
    // SAFETY: this function's contract.
    Ok(unsafe { be.on_stream(stream as *mut _) })
}

/// `⟨P, C⟩` of a dense batch on CUDA memory, without a copy, on the caller's stream, and
/// (when `grads` is given, three device addresses `(∂C, ∂μ, ∂ν)`) its exact gradients
/// ([`SinkhornSolver::prepare`], [`SinkhornSolver::solve_prepared`] with
/// [`BufferOutputs::wasserstein_gradients`]) written there: reads `μ` (`batch×n`) at `mu`,
/// `ν` (`batch×m`) at `nu` and the cost (`n×m`, or `batch×n×m` when `batched_cost`) at
/// `cost`; `double`: float64, else float32. Waits on that stream only, for the per-problem
/// numbers it reads back. Returns a [`DeviceSolveOutput`].
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
    params: &Bound<'py, PyAny>,
    cg_tol: Option<f64>,
    cg_max_iters: usize,
    device: usize,
    stream: usize,
) -> PyResult<DeviceSolveOutput> {
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
    let params = DeviceParams::new(ParamsArg::extract(params)?);
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
        let problem = BufferProblem::dense(mub, nub, &cb, (batch, n, m), batched_cost);
        let prepared: PreparedProblem<T, CudaBackend> =
            SinkhornSolver::new(be.clone(), params.initial()).prepare(problem)?;
        let solver = SinkhornSolver::new(be.clone(), params.for_cost(prepared.max_cost()));
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
                let out = GradientBuffers {
                    cost: &mut dc,
                    mu: &mut dmu,
                    nu: &mut dnu,
                };
                let outputs = BufferOutputs::new().wasserstein_gradients(&cb, &cg, out);
                let sol = solver.solve_prepared(&prepared, outputs)?;
                let summary = sol.cg.as_ref().map(|c| c.summary());
                Ok((sol, summary))
            }
            None => Ok((
                solver.solve_prepared(&prepared, BufferOutputs::new())?,
                None,
            )),
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
    Ok(DeviceSolveOutput {
        convergence: convergence(py, &sol.convergence)?,
        cg: summary.map(|c| cg_summary(py, &c)).transpose()?,
        distance: sol.distance,
    })
}

/// `OT_ε` of a batch of point-cloud problems on CUDA memory, without a copy, on the caller's
/// stream ([`BufferProblem::points`], [`BufferOutputs::point_gradients`]): reads `μ`
/// (`batch×n`) at `mu`, `ν` (`batch×m`) at `nu`, the clouds `x` (`n×d`, or `batch×n×d` when
/// `batched`) and `y` (`m×d` or `batch×m×d`), row-major; writes the potentials and the
/// envelope gradients at `out = (f, g, ∂x, ∂y)` (`batch×n`, `batch×m`, `batch×n×d`,
/// `batch×m×d`); `double`: float64, else float32. Waits on that stream only, for the
/// per-problem numbers it reads back. Returns a [`DevicePointOutput`].
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
    params: &Bound<'py, PyAny>,
    device: usize,
    stream: usize,
) -> PyResult<DevicePointOutput> {
    let (lens, layout) = cloud_buffers(batch, (n, m, d), batched, metric, precision)?;
    let params = DeviceParams::new(ParamsArg::extract(params)?);
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: DeviceParams,
        [mu, nu, x, y, f, g, gx, gy]: [u64; 8],
        (batch, layout): (usize, logot::CloudLayout),
        [mu_len, nu_len, x_len, y_len, gx_len, gy_len]: [usize; 6],
    ) -> logot::Result<logot::BufferResult> {
        // SAFETY: the caller's contract (above).
        let [mub, nub, xb, yb] =
            unsafe { borrow_inputs::<T>(&be, [mu, nu, x, y], [mu_len, nu_len, x_len, y_len]) };
        let problem = BufferProblem::points(mub, nub, &xb, &yb, batch, layout);
        let prepared: PreparedProblem<T, CudaBackend> =
            SinkhornSolver::new(be.clone(), params.initial()).prepare(problem)?;
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
        let outputs = BufferOutputs::new()
            .potentials(&mut f, &mut g)
            .point_gradients(&mut gx, &mut gy);
        SinkhornSolver::new(be, params).solve_prepared(&prepared, outputs)
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
    Ok(DevicePointOutput {
        convergence: convergence(py, &sol.convergence)?,
        value: sol.value.unwrap_or_default(),
        distance: sol.distance,
    })
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
/// CUDA memory, without a copy, on the caller's stream ([`SinkhornSolver::prepare_divergence`],
/// [`SinkhornSolver::sinkhorn_divergence_prepared`]): inputs as [`_point_gradients_cuda`]; writes
/// `∂S/∂x` and `∂S/∂y` at `out = (∂x, ∂y)` (`batch×n×d`, `batch×m×d`). Waits on that stream
/// only, for the per-problem numbers it reads back. Returns a
/// [`DeviceDivergenceOutput`], `terms` one `(OT_ε(μ, ν), OT_ε(μ, μ), OT_ε(ν, ν))` per problem.
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
    params: &Bound<'py, PyAny>,
    device: usize,
    stream: usize,
) -> PyResult<DeviceDivergenceOutput> {
    let (lens, layout) = cloud_buffers(batch, (n, m, d), batched, metric, precision)?;
    let params = DeviceParams::new(ParamsArg::extract(params)?);
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: DeviceParams,
        [mu, nu, x, y, gx, gy]: [u64; 6],
        (batch, layout): (usize, logot::CloudLayout),
        [mu_len, nu_len, x_len, y_len, gx_len, gy_len]: [usize; 6],
    ) -> logot::Result<logot::DivergenceBufferResult> {
        // SAFETY: the caller's contract (`_point_gradients_cuda`).
        let [mub, nub, xb, yb] =
            unsafe { borrow_inputs::<T>(&be, [mu, nu, x, y], [mu_len, nu_len, x_len, y_len]) };
        let problem = BufferProblem::points(mub, nub, &xb, &yb, batch, layout);
        let prepared: PreparedDivergence<T, CudaBackend> =
            SinkhornSolver::new(be.clone(), params.initial()).prepare_divergence(problem)?;
        let params = params.for_cost(prepared.max_cost());
        // SAFETY: as above; fresh outputs of these lengths.
        let (mut gx, mut gy) = unsafe {
            (
                be.borrow_buffer::<T>(gx, gx_len),
                be.borrow_buffer::<T>(gy, gy_len),
            )
        };
        let outputs = BufferOutputs::new().point_gradients(&mut gx, &mut gy);
        SinkhornSolver::new(be, params).sinkhorn_divergence_prepared(&prepared, outputs)
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
    Ok(DeviceDivergenceOutput {
        value: sol.value,
        terms: sol.terms,
        convergence: convs.into_pyobject(py)?.unbind(),
    })
}

/// The plans of a dense batch on CUDA memory ([`BufferOutputs::plan`]), written at `plan`
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
    params: &Bound<'py, PyAny>,
    device: usize,
    stream: usize,
) -> PyResult<Py<ConvergenceReport>> {
    let overflow = || PyValueError::new_err(format!("cost: {batch}×{n}×{m} overflows"));
    let per_cost = n.checked_mul(m).ok_or_else(overflow)?;
    let plan_len = batch.checked_mul(per_cost).ok_or_else(overflow)?;
    let lens = [
        batch.checked_mul(n).ok_or_else(overflow)?,
        batch.checked_mul(m).ok_or_else(overflow)?,
        if batched_cost { plan_len } else { per_cost },
        plan_len,
    ];
    let params = DeviceParams::new(ParamsArg::extract(params)?);
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
        let problem = BufferProblem::dense(mub, nub, &cb, (batch, n, m), batched_cost);
        let prepared: PreparedProblem<T, CudaBackend> =
            SinkhornSolver::new(be.clone(), params.initial()).prepare(problem)?;
        let params = params.for_cost(prepared.max_cost());
        let outputs = BufferOutputs::new().plan(&mut pb);
        SinkhornSolver::new(be, params).solve_prepared(&prepared, outputs)
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
/// ([`SinkhornSolver::plan_gradients_buffers`]): reads the plans at `plan` and `∂L/∂P` at
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
) -> PyResult<Py<CgReport>> {
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
        let out = GradientBuffers {
            cost: &mut dc,
            mu: &mut dmu,
            nu: &mut dnu,
        };
        let solver = SinkhornSolver::new(be, SinkhornParams::new(eps));
        let report = solver.plan_gradients_buffers::<T>(&p, (batch, n, m), &g, &cg, out)?;
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

/// What [`_wasserstein_cuda`] reads back: the distances, the report and (with gradients)
/// the CG report.
#[pyclass(frozen, get_all, module = "logot._logot")]
struct DeviceSolveOutput {
    distance: Vec<f64>,
    convergence: Py<ConvergenceReport>,
    cg: Option<Py<CgReport>>,
}

/// What [`_point_gradients_cuda`] reads back: `OT_ε` and the transport cost of each
/// problem, and the report.
#[pyclass(frozen, get_all, module = "logot._logot")]
struct DevicePointOutput {
    value: Vec<f64>,
    distance: Vec<f64>,
    convergence: Py<ConvergenceReport>,
}

/// What [`_sinkhorn_divergence_cuda`] reads back: `S_ε` and the three terms of each problem,
/// and the three reports `(xy, xx, yy)`.
#[pyclass(frozen, get_all, module = "logot._logot")]
struct DeviceDivergenceOutput {
    value: Vec<f64>,
    terms: Vec<[f64; 3]>,
    convergence: Py<PyTuple>,
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<DeviceSolveOutput>()?;
    m.add_class::<DevicePointOutput>()?;
    m.add_class::<DeviceDivergenceOutput>()?;
    m.add_function(wrap_pyfunction!(_wasserstein_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_point_gradients_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_sinkhorn_divergence_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_coupling_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_plan_gradients_cuda, m)?)?;
    Ok(())
}
