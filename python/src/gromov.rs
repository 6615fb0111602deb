//! Gromov–Wasserstein on host arrays: entropic (mirror descent with log-domain Sinkhorn
//! inner solves) and exact (conditional gradient with the network simplex) GW and fused
//! GW, their envelope gradients, and point-cloud GW in linear memory. Every check of the
//! inputs is the library's; its errors name `c1`, `c2`, `p`, `q`, `m`, `alpha`, `g0`.

use crate::common::{compute, device, OrPyErr};
use crate::results::{array, convergence, ConvergenceReport};
use logot::backend::grad::GradKernels;
use logot::backend::linalg::LinalgKernels;
use logot::gromov::{
    envelope_gradients, ConditionalGradient, ConditionalGradientParams, EntropicGwParams,
    GromovGradients, GromovProblem, GromovSolver, GwLoss, PointGromovProblem, PointGromovSolver,
    PointGwParams,
};
use logot::{Error, Real};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2};
use numpy::{Element, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

/// Envelope gradients of a GW value at the returned plan
/// ([`logot::gromov::envelope_gradients`]): `c1` (n×n), `c2` (m×m), `p` (n), `q` (m,
/// both zero-mean), and for fused problems `m` (n×m) and `alpha`; float64.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct GromovGradientsOutput {
    c1: Py<PyAny>,
    c2: Py<PyAny>,
    p: Py<PyAny>,
    q: Py<PyAny>,
    m: Option<Py<PyAny>>,
    alpha: Option<f64>,
}

fn gradients_output(py: Python<'_>, g: GromovGradients) -> PyResult<Py<GromovGradientsOutput>> {
    Py::new(
        py,
        GromovGradientsOutput {
            c1: array(py, g.c1),
            c2: array(py, g.c2),
            p: array(py, g.p),
            q: array(py, g.q),
            m: g.m.map(|m| array(py, m)),
            alpha: g.alpha,
        },
    )
}

/// A solved (fused) GW problem: the `plan` (n×m, the call's dtype), `value` = linear +
/// quadratic, the potentials `f`, `g` of the last linearised problem, whether the
/// structures were treated as `symmetric`, the report (`iterations`, `converged`,
/// `marginal_error`; entropic: `step`, `steps`, `stationarity`, the inner solves and the
/// Newton steps that finished those Sinkhorn did not end; exact:
/// the Frank–Wolfe `gap` and `losses`) and the gradients when asked for.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct GromovOutput {
    plan: Py<PyAny>,
    value: f64,
    linear: f64,
    quadratic: f64,
    f: Py<PyAny>,
    g: Py<PyAny>,
    symmetric: bool,
    iterations: usize,
    converged: bool,
    marginal_error: f64,
    step: Option<f64>,
    steps: Vec<f64>,
    stationarity: Option<f64>,
    inner_iterations: usize,
    inner_unconverged: usize,
    newton_steps: usize,
    inner: Option<Py<ConvergenceReport>>,
    gap: Option<f64>,
    losses: Vec<f64>,
    gradients: Option<Py<GromovGradientsOutput>>,
}

/// The loss of POT's name.
fn loss(name: &str) -> logot::Result<GwLoss> {
    GwLoss::from_name(name).ok_or_else(|| {
        Error::parameter(
            "loss",
            format!("{name:?}"),
            "expected \"square_loss\" or \"kl_loss\"",
        )
    })
}

/// The problem from the arrays of one dtype.
fn problem<'a, T: Real>(
    c1: ArrayView2<'a, T>,
    c2: ArrayView2<'a, T>,
    p: ArrayView1<'a, T>,
    q: ArrayView1<'a, T>,
    feature: Option<ArrayView2<'a, T>>,
    alpha: f64,
    g0: Option<ArrayView2<'a, T>>,
) -> logot::Result<GromovProblem<'a, T>> {
    let mut pb = match feature {
        Some(m) => GromovProblem::fused(m, c1, c2, p, q, alpha)?,
        None => GromovProblem::new(c1, c2, p, q)?,
    };
    if let Some(g0) = g0 {
        pb = pb.with_init(g0)?;
    }
    Ok(pb)
}

/// What one solve hands back, before it becomes a [`GromovOutput`].
struct Solved<T> {
    plan: Array2<T>,
    value: f64,
    linear: f64,
    quadratic: f64,
    f: Array1<f64>,
    g: Array1<f64>,
    symmetric: bool,
    iterations: usize,
    converged: bool,
    marginal_error: f64,
    step: Option<f64>,
    steps: Vec<f64>,
    stationarity: Option<f64>,
    inner_iterations: usize,
    inner_unconverged: usize,
    newton_steps: usize,
    inner: Option<logot::Convergence>,
    gap: Option<f64>,
    losses: Vec<f64>,
    gradients: Option<GromovGradients>,
}

/// The envelope gradients at a returned `plan` with its potentials `f`, `g`: the problem's
/// inputs re-borrowed beside the plan (the library takes both with one lifetime).
fn gradients_at<T: Real, B: LinalgKernels<T>>(
    be: &B,
    pb: &GromovProblem<'_, T>,
    loss: GwLoss,
    plan: &Array2<T>,
    f: &Array1<f64>,
    g: &Array1<f64>,
) -> logot::Result<GromovGradients> {
    let (c1, c2, p, q) = (pb.c1(), pb.c2(), pb.p(), pb.q());
    let feature = pb.feature();
    let local = match &feature {
        Some(m) => GromovProblem::fused(
            m.view(),
            c1.view(),
            c2.view(),
            p.view(),
            q.view(),
            pb.alpha(),
        )?,
        None => GromovProblem::new(c1.view(), c2.view(), p.view(), q.view())?,
    };
    envelope_gradients(be, &local, loss, plan.view(), f.view(), g.view())
}

/// Entropic GW on `be`, with the envelope gradients at the returned plan when `gradients`.
fn solve_entropic<T: Real, B>(
    be: B,
    pb: &GromovProblem<'_, T>,
    params: &EntropicGwParams,
    gradients: bool,
) -> logot::Result<Solved<T>>
where
    B: LinalgKernels<T> + GradKernels<T> + Clone,
{
    let solver = GromovSolver::new(be, params.clone());
    let r = solver.solve(pb)?;
    let grads = if gradients {
        Some(gradients_at(
            solver.backend(),
            pb,
            params.loss,
            &r.plan,
            &r.f,
            &r.g,
        )?)
    } else {
        None
    };
    let rep = r.report;
    Ok(Solved {
        plan: r.plan,
        value: r.value,
        linear: r.linear,
        quadratic: r.quadratic,
        f: r.f,
        g: r.g,
        symmetric: r.symmetric,
        iterations: rep.iterations,
        converged: rep.converged,
        marginal_error: rep.marginal_error,
        step: Some(rep.step),
        steps: rep.steps,
        stationarity: Some(rep.stationarity),
        inner_iterations: rep.inner_iterations,
        inner_unconverged: rep.inner_unconverged,
        newton_steps: rep.newton_steps,
        inner: Some(rep.inner),
        gap: None,
        losses: Vec::new(),
        gradients: grads,
    })
}

/// Exact GW on `be` (the network simplex as the linear step), with the envelope gradients
/// when `gradients`.
fn solve_exact<T: Real, B>(
    be: B,
    pb: &GromovProblem<'_, T>,
    params: &ConditionalGradientParams,
    gradients: bool,
) -> logot::Result<Solved<T>>
where
    B: LinalgKernels<T> + GradKernels<T> + Clone,
{
    let r = ConditionalGradient::new(be.clone(), params.clone()).solve_network_simplex(pb)?;
    let grads = if gradients {
        Some(gradients_at(&be, pb, params.loss, &r.plan, &r.f, &r.g)?)
    } else {
        None
    };
    let rep = r.report;
    Ok(Solved {
        plan: r.plan,
        value: r.value,
        linear: r.linear,
        quadratic: r.quadratic,
        f: r.f,
        g: r.g,
        symmetric: r.symmetric,
        iterations: rep.iterations,
        converged: rep.converged,
        marginal_error: rep.marginal_error,
        step: None,
        steps: Vec::new(),
        stationarity: None,
        inner_iterations: 0,
        inner_unconverged: 0,
        newton_steps: 0,
        inner: None,
        gap: Some(rep.gap),
        losses: rep.losses,
        gradients: grads,
    })
}

fn output<T: Element + Real>(py: Python<'_>, s: Solved<T>) -> PyResult<Py<GromovOutput>> {
    let inner = s.inner.as_ref().map(|c| convergence(py, c)).transpose()?;
    let gradients = s.gradients.map(|g| gradients_output(py, g)).transpose()?;
    Py::new(
        py,
        GromovOutput {
            plan: array(py, s.plan),
            value: s.value,
            linear: s.linear,
            quadratic: s.quadratic,
            f: array(py, s.f),
            g: array(py, s.g),
            symmetric: s.symmetric,
            iterations: s.iterations,
            converged: s.converged,
            marginal_error: s.marginal_error,
            step: s.step,
            steps: s.steps,
            stationarity: s.stationarity,
            inner_iterations: s.inner_iterations,
            inner_unconverged: s.inner_unconverged,
            newton_steps: s.newton_steps,
            inner,
            gap: s.gap,
            losses: s.losses,
            gradients,
        },
    )
}

/// Entropic (fused) GW by mirror descent from `g0` (None: `p·qᵀ`): `c1` (n×n), `c2` (m×m),
/// `p` (n), `q` (m), the feature cost `m` (n×m, None for plain GW) weighted by `1 − alpha`;
/// the outer loop's `eps`, `loss`, `symmetric` (None: tested), `max_iters`, `tol`,
/// `check_every`, the inner solves' `inner_max_iters`, `inner_tol` (None: the precision's
/// default), `inner_check_every`; the envelope gradients when `gradients`.
#[pyfunction]
#[pyo3(signature = (c1, c2, p, q, eps, m=None, alpha=1.0, g0=None, loss="square_loss", symmetric=None,
    max_iters=1000, tol=1e-9, check_every=10, inner_max_iters=1000, inner_tol=None,
    inner_check_every=10, backend="cpu", gradients=false))]
#[allow(clippy::too_many_arguments)]
fn entropic_gromov<'py>(
    py: Python<'py>,
    c1: &Bound<'py, PyAny>,
    c2: &Bound<'py, PyAny>,
    p: &Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    eps: f64,
    m: Option<&Bound<'py, PyAny>>,
    alpha: f64,
    g0: Option<&Bound<'py, PyAny>>,
    loss: &str,
    symmetric: Option<bool>,
    max_iters: usize,
    tol: f64,
    check_every: usize,
    inner_max_iters: usize,
    inner_tol: Option<f64>,
    inner_check_every: usize,
    backend: &str,
    gradients: bool,
) -> PyResult<Py<GromovOutput>> {
    let params = EntropicGwParams::new(eps)
        .loss(self::loss(loss).py()?)
        .symmetric(symmetric)
        .max_iters(max_iters)
        .tol(tol)
        .check_every(check_every)
        .inner_max_iters(inner_max_iters)
        .inner_tol(inner_tol)
        .inner_check_every(inner_check_every);
    let method = Method::Entropic(params);
    dense_gromov(
        py,
        [c1, c2],
        [p, q],
        m,
        alpha,
        g0,
        backend,
        gradients,
        &method,
    )
}

/// Exact (fused) GW by conditional gradient with the network simplex as the linear step and
/// the closed-form line search, from `g0` (None: `p·qᵀ`; given, its marginals must be `p`
/// and `q`): arguments as [`entropic_gromov`], with `max_iters`, `tol_rel`, `tol_abs`.
#[pyfunction]
#[pyo3(signature = (c1, c2, p, q, m=None, alpha=1.0, g0=None, loss="square_loss", symmetric=None,
    max_iters=10000, tol_rel=1e-9, tol_abs=1e-9, backend="cpu", gradients=false))]
#[allow(clippy::too_many_arguments)]
fn exact_gromov<'py>(
    py: Python<'py>,
    c1: &Bound<'py, PyAny>,
    c2: &Bound<'py, PyAny>,
    p: &Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    m: Option<&Bound<'py, PyAny>>,
    alpha: f64,
    g0: Option<&Bound<'py, PyAny>>,
    loss: &str,
    symmetric: Option<bool>,
    max_iters: usize,
    tol_rel: f64,
    tol_abs: f64,
    backend: &str,
    gradients: bool,
) -> PyResult<Py<GromovOutput>> {
    let params = ConditionalGradientParams::default()
        .loss(self::loss(loss).py()?)
        .symmetric(symmetric)
        .max_iters(max_iters)
        .tol_rel(tol_rel)
        .tol_abs(tol_abs);
    let method = Method::Exact(params);
    dense_gromov(
        py,
        [c1, c2],
        [p, q],
        m,
        alpha,
        g0,
        backend,
        gradients,
        &method,
    )
}

/// The algorithm of a dense solve and its parameters.
enum Method {
    Entropic(EntropicGwParams),
    Exact(ConditionalGradientParams),
}

/// A dense (fused) GW problem read from the arrays `c1`, `c2` (structures), `p`, `q`
/// (weights), `m` (feature cost), `g0` (initial plan) in their dtype, solved by `method` on
/// `backend`.
#[allow(clippy::too_many_arguments)]
fn dense_gromov<'py>(
    py: Python<'py>,
    [c1, c2]: [&Bound<'py, PyAny>; 2],
    [p, q]: [&Bound<'py, PyAny>; 2],
    m: Option<&Bound<'py, PyAny>>,
    alpha: f64,
    g0: Option<&Bound<'py, PyAny>>,
    backend: &str,
    gradients: bool,
    method: &Method,
) -> PyResult<Py<GromovOutput>> {
    let dev = device(py, backend)?;
    let cpu = dev.is_cpu();
    by_dtype!(c1, "c1", T => {
        let c1: PyReadonlyArray2<'py, T> = c1.extract()?;
        let c2: PyReadonlyArray2<'py, T> = c2.extract()?;
        let p: PyReadonlyArray1<'py, T> = p.extract()?;
        let q: PyReadonlyArray1<'py, T> = q.extract()?;
        let m: Option<PyReadonlyArray2<'py, T>> = m.map(|a| a.extract()).transpose()?;
        let g0: Option<PyReadonlyArray2<'py, T>> = g0.map(|a| a.extract()).transpose()?;
        let (c1, c2, p, q) = (c1.as_array(), c2.as_array(), p.as_array(), q.as_array());
        let (m, g0) = (m.as_ref().map(|a| a.as_array()), g0.as_ref().map(|a| a.as_array()));
        let solved = by_backend!(&dev, be => {
            let run = || -> logot::Result<Solved<T>> {
                let pb = problem(c1, c2, p, q, m, alpha, g0)?;
                match method {
                    Method::Entropic(params) => solve_entropic(be, &pb, params, gradients),
                    Method::Exact(params) => solve_exact(be, &pb, params, gradients),
                }
            };
            compute(py, cpu, run).py()?
        });
        output(py, solved)
    })
}

/// A solved point-cloud GW problem: `value`, the last inner solve's potentials `f`, `g` on
/// the transformed clouds `x_tilde` (n×(d'+1)), `y_tilde` (m×(d'+1)), the plan's `moments`,
/// the report, and the `plan` (n×m, float64) when asked for.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct PointGromovOutput {
    value: f64,
    f: Py<PyAny>,
    g: Py<PyAny>,
    x_tilde: Py<PyAny>,
    y_tilde: Py<PyAny>,
    moments: Py<PyAny>,
    iterations: usize,
    converged: bool,
    step: f64,
    stationarity: f64,
    marginal_error: f64,
    inner_iterations: usize,
    inner_unconverged: usize,
    inner: Py<ConvergenceReport>,
    plan: Option<Py<PyAny>>,
}

/// Entropic GW between the clouds `x` (n×d, weights `p`) and `y` (m×d', weights `q`) with
/// squared-Euclidean structures, square loss, in memory O((n + m)·(d + d')): the mirror
/// descent of [`entropic_gromov`] stopped on the moments' relative change `tol`; the plan
/// formed only when `plan` is true.
#[pyfunction]
#[pyo3(signature = (x, y, p, q, eps, max_iters=1000, tol=1e-9, inner_max_iters=1000, inner_tol=None,
    inner_check_every=10, backend="cpu", plan=false))]
#[allow(clippy::too_many_arguments)]
fn point_gromov<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    p: &Bound<'py, PyAny>,
    q: &Bound<'py, PyAny>,
    eps: f64,
    max_iters: usize,
    tol: f64,
    inner_max_iters: usize,
    inner_tol: Option<f64>,
    inner_check_every: usize,
    backend: &str,
    plan: bool,
) -> PyResult<Py<PointGromovOutput>> {
    let params = PointGwParams::new(eps)
        .max_iters(max_iters)
        .tol(tol)
        .inner_max_iters(inner_max_iters)
        .inner_tol(inner_tol)
        .inner_check_every(inner_check_every);
    let dev = device(py, backend)?;
    let cpu = dev.is_cpu();
    by_dtype!(x, "x", T => {
        let x: PyReadonlyArray2<'py, T> = x.extract()?;
        let y: PyReadonlyArray2<'py, T> = y.extract()?;
        let p: PyReadonlyArray1<'py, T> = p.extract()?;
        let q: PyReadonlyArray1<'py, T> = q.extract()?;
        let (x, y, p, q) = (x.as_array(), y.as_array(), p.as_array(), q.as_array());
        let (r, dense) = by_backend!(&dev, be => {
            let run = || -> logot::Result<_> {
                let pb = PointGromovProblem::new(x, y, p, q)?;
                let r = PointGromovSolver::new(be, params.clone()).solve(&pb)?;
                let dense = if plan { Some(r.plan()?) } else { None };
                Ok((r, dense))
            };
            compute(py, cpu, run).py()?
        });
        let rep = r.report;
        Py::new(
            py,
            PointGromovOutput {
                value: r.value,
                f: array(py, r.f),
                g: array(py, r.g),
                x_tilde: array(py, r.x_tilde),
                y_tilde: array(py, r.y_tilde),
                moments: array(py, r.moments),
                iterations: rep.iterations,
                converged: rep.converged,
                step: rep.step,
                stationarity: rep.stationarity,
                marginal_error: rep.marginal_error,
                inner_iterations: rep.inner_iterations,
                inner_unconverged: rep.inner_unconverged,
                inner: convergence(py, &rep.inner)?,
                plan: dense.map(|d| array(py, d)),
            },
        )
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GromovGradientsOutput>()?;
    m.add_class::<GromovOutput>()?;
    m.add_class::<PointGromovOutput>()?;
    m.add_function(wrap_pyfunction!(entropic_gromov, m)?)?;
    m.add_function(wrap_pyfunction!(exact_gromov, m)?)?;
    m.add_function(wrap_pyfunction!(point_gromov, m)?)?;
    Ok(())
}
