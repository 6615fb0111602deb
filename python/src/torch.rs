//! CUDA tensors in place, for `logot.torch`: Sinkhorn distances, plans, gradients, point
//! gradients and divergences on the caller's device memory and stream, without a copy.
//!
//! Every function here is private to `logot.torch`. The tensors arrive through DLPack
//! ([`crate::dlpack`]): their GPU, dtype, shapes and addresses are read and checked here
//! (one GPU and one dtype per call, the outputs overlapping nothing), so the one promise
//! left to the caller is `stream`: torch's current stream of the tensors' GPU (Python
//! cannot mark a function unsafe: another integer is undefined behaviour).

use crate::args::{cross_precision, point_metric, CgArg, DeviceParams, ParamsArg};
use crate::common::{cuda_backend, OrPyErr};
use crate::dlpack::{CudaCall, DlTensor};
use crate::results::{cg_summary, convergence, CgSummary as CgReport, ConvergenceReport};
use logot::backend::cuda::{CudaBuffer, CudaReal};
use logot::grad::{CgParams, CgSummary, GradientBuffers};
use logot::{
    BufferOutputs, BufferProblem, CudaBackend, PreparedDivergence, PreparedProblem, SinkhornParams,
    SinkhornSolver,
};
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

/// The shape of `t` as `N` sizes, or a `ValueError` naming it (`what`: the expected shape).
pub(crate) fn dims<const N: usize>(t: &DlTensor, what: &str) -> PyResult<[usize; N]> {
    t.shape
        .as_slice()
        .try_into()
        .map_err(|_| t.shape_error(what))
}

/// Checks that `t` has the shape `expected`.
pub(crate) fn expect_shape(t: &DlTensor, expected: &[usize]) -> PyResult<()> {
    if t.shape == expected {
        Ok(())
    } else {
        let dims: Vec<String> = expected.iter().map(|d| d.to_string()).collect();
        Err(t.shape_error(&format!("shape [{}]", dims.join(", "))))
    }
}

/// The device addresses of tensors a call has taken, in order.
fn addresses<const N: usize>(call: &CudaCall, ks: [usize; N]) -> [u64; N] {
    ks.map(|k| call.get(k).address)
}

/// The GPU of a call's tensors, and whether they are float64.
fn device_and_dtype(call: &CudaCall) -> (usize, bool) {
    (call.device().unwrap_or_default(), call.double())
}

/// A dense problem's tensors as `logot.torch` passes them, `(mu, nu, cost)`: `μ` `B×n`,
/// `ν` `B×m` and the cost, `n×m` (shared by the batch) or `B×n×m`.
#[derive(FromPyObject)]
struct DenseArg<'py>(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>);

/// A dense problem taken for a call: the addresses of `[μ, ν, cost]`, `(B, n, m)` and
/// whether the cost is batched.
struct Dense {
    inputs: [u64; 3],
    shape: (usize, usize, usize),
    batched_cost: bool,
}

impl DenseArg<'_> {
    fn take(&self, call: &mut CudaCall) -> PyResult<Dense> {
        let ks = [
            call.input(&self.0, "mu")?,
            call.input(&self.1, "nu")?,
            call.input(&self.2, "cost")?,
        ];
        let [batch, n] = dims(call.get(ks[0]), "B×n")?;
        let [nu_batch, m] = dims(call.get(ks[1]), "B×m")?;
        if nu_batch != batch {
            return Err(call.get(ks[1]).shape_error(&format!("{batch}×m like mu")));
        }
        let cost = call.get(ks[2]);
        let batched_cost = match cost.shape[..] {
            [cn, cm] if (cn, cm) == (n, m) => false,
            [cb, cn, cm] if (cb, cn, cm) == (batch, n, m) => true,
            _ => return Err(cost.shape_error(&format!("{n}×{m} or {batch}×{n}×{m}"))),
        };
        Ok(Dense {
            inputs: addresses(call, ks),
            shape: (batch, n, m),
            batched_cost,
        })
    }

    /// The lengths `[μ, ν, cost, B×n×m]`.
    fn lens(d: &Dense) -> [usize; 4] {
        let (batch, n, m) = d.shape;
        let plans = batch * n * m;
        [
            batch * n,
            batch * m,
            if d.batched_cost { plans } else { n * m },
            plans,
        ]
    }
}

/// Three gradient outputs `(∂C B×n×m, ∂μ B×n, ∂ν B×m)` taken for a call, their addresses.
fn take_gradients(
    call: &mut CudaCall,
    grads: &(Bound<'_, PyAny>, Bound<'_, PyAny>, Bound<'_, PyAny>),
    (batch, n, m): (usize, usize, usize),
) -> PyResult<[u64; 3]> {
    let ks = [
        call.output(&grads.0, "grad_cost")?,
        call.output(&grads.1, "grad_mu")?,
        call.output(&grads.2, "grad_nu")?,
    ];
    expect_shape(call.get(ks[0]), &[batch, n, m])?;
    expect_shape(call.get(ks[1]), &[batch, n])?;
    expect_shape(call.get(ks[2]), &[batch, m])?;
    Ok(addresses(call, ks))
}

/// `⟨P, C⟩` of a dense batch on CUDA memory, without a copy, on the caller's stream, and
/// (when `grads = (∂C, ∂μ, ∂ν)` is given) its exact gradients ([`SinkhornSolver::prepare`],
/// [`SinkhornSolver::solve_prepared`] with [`BufferOutputs::wasserstein_gradients`]) written
/// there: `problem` as [`DenseArg`]; `params` as [`ParamsArg`]; `cg` the backward's CG
/// options. Waits on that stream only, for the per-problem numbers it reads back. Returns a
/// [`DeviceSolveOutput`].
///
/// Private to `logot.torch`, under this module's contract (`stream`).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn _wasserstein_cuda<'py>(
    py: Python<'py>,
    problem: DenseArg<'py>,
    grads: Option<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    params: &Bound<'py, PyAny>,
    cg: CgArg,
    stream: usize,
) -> PyResult<DeviceSolveOutput> {
    let mut call = CudaCall::new(stream);
    let dense = problem.take(&mut call)?;
    let grads = grads
        .map(|g| take_gradients(&mut call, &g, dense.shape))
        .transpose()?;
    call.check_outputs()?;
    let lens = DenseArg::lens(&dense);
    let params = DeviceParams::new(ParamsArg::extract(params)?);
    let cg = cg.params();
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: DeviceParams,
        cg: CgParams,
        dense: &Dense,
        grads: Option<[u64; 3]>,
        [mu_len, nu_len, cost_len, grad_len]: [usize; 4],
    ) -> logot::Result<(logot::BufferResult, Option<CgSummary>)> {
        let [mu, nu, cost] = dense.inputs;
        // SAFETY: the DLPack tensors of this GPU and dtype (checked), of these lengths, live
        // until the stream is past this work (the call holds them; torch's stream-ordered
        // allocator keeps their memory after); the gradients overlap nothing (checked).
        let (mub, nub, cb) = unsafe {
            (
                be.borrow_buffer::<T>(mu, mu_len),
                be.borrow_buffer::<T>(nu, nu_len),
                be.borrow_buffer::<T>(cost, cost_len),
            )
        };
        let problem = BufferProblem::dense(mub, nub, &cb, dense.shape, dense.batched_cost);
        let prepared: PreparedProblem<T, CudaBackend> =
            SinkhornSolver::new(be.clone(), params.initial()).prepare(problem)?;
        let solver = SinkhornSolver::new(be.clone(), params.for_cost(prepared.max_cost()));
        match grads {
            Some([dc, dmu, dnu]) => {
                // SAFETY: as above.
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
    let (device, double) = device_and_dtype(&call);
    let (sol, summary) = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            if double {
                run::<f64>(be, params, cg, &dense, grads, lens)
            } else {
                run::<f32>(be, params, cg, &dense, grads, lens)
            }
        })
        .py()?;
    drop(call);
    Ok(DeviceSolveOutput {
        convergence: convergence(py, &sol.convergence)?,
        cg: summary.map(|c| cg_summary(py, &c)).transpose()?,
        distance: sol.distance,
    })
}

/// A point-cloud batch as `logot.torch` passes it, `(x, y, a, b, metric, precision)`: the
/// clouds `x` (`n×d`, or `B×n×d` with one pair per problem) and `y` (`m×d` or `B×m×d`),
/// their weights `a` (`B×n`, `B = 1` for one pair) and `b` (`B×m`), the metric's name and
/// the precision's (`None`: the library's default).
#[derive(FromPyObject)]
struct CloudsArg<'py>(
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    String,
    Option<String>,
);

/// A point-cloud batch taken for a call: the addresses and lengths of `[μ, ν, x, y]`, the
/// number of problems and the clouds' layout.
struct Clouds {
    inputs: [u64; 4],
    lens: [usize; 4],
    batch: usize,
    layout: logot::CloudLayout,
}

impl CloudsArg<'_> {
    fn take(&self, call: &mut CudaCall) -> PyResult<Clouds> {
        let ks = [
            call.input(&self.2, "a")?,
            call.input(&self.3, "b")?,
            call.input(&self.0, "x")?,
            call.input(&self.1, "y")?,
        ];
        let (x, y) = (call.get(ks[2]), call.get(ks[3]));
        let (batched, batch, n, d) = match x.shape[..] {
            [n, d] => (false, 1, n, d),
            [batch, n, d] => (true, batch, n, d),
            _ => return Err(x.shape_error("n×d or B×n×d")),
        };
        let m = match (batched, &y.shape[..]) {
            (false, &[m, yd]) if yd == d => m,
            (true, &[yb, m, yd]) if (yb, yd) == (batch, d) => m,
            _ => {
                let what = if batched {
                    format!("{batch}×m×{d} like x")
                } else {
                    format!("m×{d} like x")
                };
                return Err(y.shape_error(&what));
            }
        };
        expect_shape(call.get(ks[0]), &[batch, n])?;
        expect_shape(call.get(ks[1]), &[batch, m])?;
        Ok(Clouds {
            inputs: addresses(call, ks),
            lens: ks.map(|k| call.get(k).len()),
            batch,
            layout: logot::CloudLayout {
                n,
                m,
                d,
                batch: batched.then_some(batch),
                metric: point_metric(&self.4)?,
                precision: cross_precision(self.5.as_deref())?,
            },
        })
    }
}

impl Clouds {
    /// The points' gradient outputs `(∂x B×n×d, ∂y B×m×d)` taken for a call: their
    /// addresses and lengths.
    fn take_gradients(
        &self,
        call: &mut CudaCall,
        gx: &Bound<'_, PyAny>,
        gy: &Bound<'_, PyAny>,
    ) -> PyResult<([u64; 2], [usize; 2])> {
        let ks = [call.output(gx, "grad_x")?, call.output(gy, "grad_y")?];
        let l = &self.layout;
        expect_shape(call.get(ks[0]), &[self.batch, l.n, l.d])?;
        expect_shape(call.get(ks[1]), &[self.batch, l.m, l.d])?;
        Ok((addresses(call, ks), ks.map(|k| call.get(k).len())))
    }

    /// The inputs `[μ, ν, x, y]` borrowed on `be`.
    ///
    /// # Safety
    /// The addresses are DLPack tensors of `be`'s GPU and of type `T`, live until its stream
    /// is past the call's work, and only read.
    unsafe fn borrow<T: CudaReal>(&self, be: &CudaBackend) -> [CudaBuffer<T>; 4] {
        // SAFETY: the caller's contract.
        std::array::from_fn(|k| unsafe { be.borrow_buffer::<T>(self.inputs[k], self.lens[k]) })
    }
}

/// `OT_ε` of a batch of point-cloud problems on CUDA memory, without a copy, on the caller's
/// stream ([`BufferProblem::points`], [`BufferOutputs::point_gradients`]): `clouds` as
/// [`CloudsArg`]; writes the potentials and the envelope gradients at `out = (f, g, ∂x, ∂y)`
/// (`B×n`, `B×m`, `B×n×d`, `B×m×d`). Waits on that stream only, for the per-problem
/// numbers it reads back. Returns a [`DevicePointOutput`].
///
/// Private to `logot.torch`, under this module's contract (`stream`).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn _point_gradients_cuda<'py>(
    py: Python<'py>,
    clouds: CloudsArg<'py>,
    out: (
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
        Bound<'py, PyAny>,
    ),
    params: &Bound<'py, PyAny>,
    stream: usize,
) -> PyResult<DevicePointOutput> {
    let mut call = CudaCall::new(stream);
    let clouds = clouds.take(&mut call)?;
    let pots = [call.output(&out.0, "f")?, call.output(&out.1, "g")?];
    expect_shape(call.get(pots[0]), &[clouds.batch, clouds.layout.n])?;
    expect_shape(call.get(pots[1]), &[clouds.batch, clouds.layout.m])?;
    let pots = addresses(&call, pots);
    let (grads, grad_lens) = clouds.take_gradients(&mut call, &out.2, &out.3)?;
    call.check_outputs()?;
    let params = DeviceParams::new(ParamsArg::extract(params)?);
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: DeviceParams,
        clouds: &Clouds,
        [f, g, gx, gy]: [u64; 4],
        [gx_len, gy_len]: [usize; 2],
    ) -> logot::Result<logot::BufferResult> {
        // SAFETY: the DLPack tensors of this GPU and dtype (checked), live for the call.
        let [mub, nub, xb, yb] = unsafe { clouds.borrow::<T>(&be) };
        let [mu_len, nu_len, ..] = clouds.lens;
        let problem = BufferProblem::points(mub, nub, &xb, &yb, clouds.batch, clouds.layout);
        let prepared: PreparedProblem<T, CudaBackend> =
            SinkhornSolver::new(be.clone(), params.initial()).prepare(problem)?;
        let params = params.for_cost(prepared.max_cost());
        // SAFETY: as above; outputs of these lengths overlapping nothing (checked).
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
    let (device, double) = device_and_dtype(&call);
    let outs = [pots[0], pots[1], grads[0], grads[1]];
    let sol = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            if double {
                run::<f64>(be, params, &clouds, outs, grad_lens)
            } else {
                run::<f32>(be, params, &clouds, outs, grad_lens)
            }
        })
        .py()?;
    drop(call);
    Ok(DevicePointOutput {
        convergence: convergence(py, &sol.convergence)?,
        value: sol.value.unwrap_or_default(),
        distance: sol.distance,
    })
}

/// The Sinkhorn divergences `S_ε` (objective convention) of a batch of point-cloud pairs on
/// CUDA memory, without a copy, on the caller's stream ([`SinkhornSolver::prepare_divergence`],
/// [`SinkhornSolver::sinkhorn_divergence_prepared`]): `clouds` as [`CloudsArg`]; writes
/// `∂S/∂x` and `∂S/∂y` at `out = (∂x, ∂y)` (`B×n×d`, `B×m×d`). Waits on that stream
/// only, for the per-problem numbers it reads back. Returns a
/// [`DeviceDivergenceOutput`], `terms` one `(OT_ε(μ, ν), OT_ε(μ, μ), OT_ε(ν, ν))` per problem.
///
/// Private to `logot.torch`, under this module's contract (`stream`).
#[pyfunction]
fn _sinkhorn_divergence_cuda<'py>(
    py: Python<'py>,
    clouds: CloudsArg<'py>,
    out: (Bound<'py, PyAny>, Bound<'py, PyAny>),
    params: &Bound<'py, PyAny>,
    stream: usize,
) -> PyResult<DeviceDivergenceOutput> {
    let mut call = CudaCall::new(stream);
    let clouds = clouds.take(&mut call)?;
    let (grads, grad_lens) = clouds.take_gradients(&mut call, &out.0, &out.1)?;
    call.check_outputs()?;
    let params = DeviceParams::new(ParamsArg::extract(params)?);
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: DeviceParams,
        clouds: &Clouds,
        [gx, gy]: [u64; 2],
        [gx_len, gy_len]: [usize; 2],
    ) -> logot::Result<logot::DivergenceBufferResult> {
        // SAFETY: the DLPack tensors of this GPU and dtype (checked), live for the call.
        let [mub, nub, xb, yb] = unsafe { clouds.borrow::<T>(&be) };
        let problem = BufferProblem::points(mub, nub, &xb, &yb, clouds.batch, clouds.layout);
        let prepared: PreparedDivergence<T, CudaBackend> =
            SinkhornSolver::new(be.clone(), params.initial()).prepare_divergence(problem)?;
        let params = params.for_cost(prepared.max_cost());
        // SAFETY: as above; outputs of these lengths overlapping nothing (checked).
        let (mut gx, mut gy) = unsafe {
            (
                be.borrow_buffer::<T>(gx, gx_len),
                be.borrow_buffer::<T>(gy, gy_len),
            )
        };
        let outputs = BufferOutputs::new().point_gradients(&mut gx, &mut gy);
        SinkhornSolver::new(be, params).sinkhorn_divergence_prepared(&prepared, outputs)
    }
    let (device, double) = device_and_dtype(&call);
    let sol = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            if double {
                run::<f64>(be, params, &clouds, grads, grad_lens)
            } else {
                run::<f32>(be, params, &clouds, grads, grad_lens)
            }
        })
        .py()?;
    drop(call);
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
/// (`B×n×m`); `problem` and `params` as [`_wasserstein_cuda`]'s. Returns the convergence
/// report of the potentials.
///
/// Private to `logot.torch`, under this module's contract (`stream`).
#[pyfunction]
fn _coupling_cuda<'py>(
    py: Python<'py>,
    problem: DenseArg<'py>,
    plan: &Bound<'py, PyAny>,
    params: &Bound<'py, PyAny>,
    stream: usize,
) -> PyResult<Py<ConvergenceReport>> {
    let mut call = CudaCall::new(stream);
    let dense = problem.take(&mut call)?;
    let k = call.output(plan, "plan")?;
    let (batch, n, m) = dense.shape;
    expect_shape(call.get(k), &[batch, n, m])?;
    call.check_outputs()?;
    let plan = call.get(k).address;
    let lens = DenseArg::lens(&dense);
    let params = DeviceParams::new(ParamsArg::extract(params)?);
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: DeviceParams,
        dense: &Dense,
        plan: u64,
        [mu_len, nu_len, cost_len, plan_len]: [usize; 4],
    ) -> logot::Result<logot::BufferResult> {
        let [mu, nu, cost] = dense.inputs;
        // SAFETY: the DLPack tensors of this GPU and dtype (checked), live for the call;
        // `plan` overlaps nothing (checked).
        let (mub, nub, cb, mut pb) = unsafe {
            (
                be.borrow_buffer::<T>(mu, mu_len),
                be.borrow_buffer::<T>(nu, nu_len),
                be.borrow_buffer::<T>(cost, cost_len),
                be.borrow_buffer::<T>(plan, plan_len),
            )
        };
        let problem = BufferProblem::dense(mub, nub, &cb, dense.shape, dense.batched_cost);
        let prepared: PreparedProblem<T, CudaBackend> =
            SinkhornSolver::new(be.clone(), params.initial()).prepare(problem)?;
        let params = params.for_cost(prepared.max_cost());
        let outputs = BufferOutputs::new().plan(&mut pb);
        SinkhornSolver::new(be, params).solve_prepared(&prepared, outputs)
    }
    let (device, double) = device_and_dtype(&call);
    let sol = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            if double {
                run::<f64>(be, params, &dense, plan, lens)
            } else {
                run::<f32>(be, params, &dense, plan, lens)
            }
        })
        .py()?;
    drop(call);
    convergence(py, &sol.convergence)
}

/// The implicit gradients of a loss of the plans on CUDA memory
/// ([`SinkhornSolver::plan_gradients_buffers`]): reads the plans `plan` and `∂L/∂P`
/// `upstream` (`B×n×m` each), writes `grads = (∂L/∂C B×n×m, ∂L/∂μ B×n, ∂L/∂ν B×m)`, on the
/// caller's stream; `cg` the CG options. Returns the CG summary.
///
/// Private to `logot.torch`, under this module's contract (`stream`).
#[pyfunction]
#[allow(clippy::type_complexity)]
fn _plan_gradients_cuda<'py>(
    py: Python<'py>,
    plan: &Bound<'py, PyAny>,
    upstream: &Bound<'py, PyAny>,
    grads: (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>),
    eps: f64,
    cg: CgArg,
    stream: usize,
) -> PyResult<Py<CgReport>> {
    let mut call = CudaCall::new(stream);
    let ks = [call.input(plan, "plan")?, call.input(upstream, "upstream")?];
    let shape = dims::<3>(call.get(ks[0]), "B×n×m")?;
    expect_shape(call.get(ks[1]), &shape)?;
    let [batch, n, m] = shape;
    let outs = take_gradients(&mut call, &grads, (batch, n, m))?;
    call.check_outputs()?;
    let [plan, upstream] = addresses(&call, ks);
    let cg = cg.params();
    fn run<T: CudaReal>(
        be: CudaBackend,
        [plan, upstream, dc, dmu, dnu]: [u64; 5],
        (batch, n, m): (usize, usize, usize),
        eps: f64,
        cg: CgParams,
    ) -> logot::Result<CgSummary> {
        let len = batch * n * m;
        // SAFETY: the DLPack tensors of this GPU and dtype and these shapes (checked), live
        // for the call; the outputs overlap nothing (checked).
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
    let (device, double) = device_and_dtype(&call);
    let ptrs = [plan, upstream, outs[0], outs[1], outs[2]];
    let summary = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            if double {
                run::<f64>(be, ptrs, (batch, n, m), eps, cg)
            } else {
                run::<f32>(be, ptrs, (batch, n, m), eps, cg)
            }
        })
        .py()?;
    drop(call);
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
