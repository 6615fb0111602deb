//! Exact optimal transport on host arrays: the network simplex and the assignment solver
//! (dense costs or point clouds) on the CPU, the auction on a GPU for batches of
//! assignment problems (`backend="cuda"`), the line (sorting), sliced and max-sliced
//! distances with their gradients. Every exact result carries its plan (sparse),
//! potentials and certificate.

use crate::common::{compute, device, Device, OrPyErr};
use crate::results::array;
use logot::exact::{
    auction_refusal, emd2_1d as lib_emd2_1d, emd_1d as lib_emd_1d, emd_batch, emd_points_batch,
    max_sliced_wasserstein_distance, max_sliced_wasserstein_grad, sliced_wasserstein_distance,
    sliced_wasserstein_grad, sliced_wasserstein_grad_batch, wasserstein_1d_batch,
    wasserstein_1d_grad as lib_wasserstein_1d_grad, Certificate, EmdMethod, EmdParams, EmdResult,
    ExactMethod, MaxSlicedSearch, Metric, Projections, SlicedGrad,
};
use logot::{Error, Real};
use ndarray::{Array1, Array2, Array3, ArrayView, ArrayView2, Axis, Dimension, Ix1, Ix2, Ix3};
use numpy::{Element, PyReadonlyArray, PyReadonlyArray2, PyReadonlyArray3};
use pyo3::prelude::*;
use rayon::prelude::*;
use std::time::Duration;

/// Two arrays of points (`D` axes) and their optional weights (`W` axes) extracted from
/// Python in one dtype, in argument order (points, then weights).
struct Weighted<'py, T: Element, D: Dimension, W: Dimension> {
    x: PyReadonlyArray<'py, T, D>,
    y: PyReadonlyArray<'py, T, D>,
    a: Option<PyReadonlyArray<'py, T, W>>,
    b: Option<PyReadonlyArray<'py, T, W>>,
}

impl<'py, T: Element, D: Dimension, W: Dimension> Weighted<'py, T, D, W> {
    fn extract(
        x: &Bound<'py, PyAny>,
        y: &Bound<'py, PyAny>,
        a: Option<&Bound<'py, PyAny>>,
        b: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Self> {
        Ok(Weighted {
            x: x.extract()?,
            y: y.extract()?,
            a: a.map(|w| w.extract()).transpose()?,
            b: b.map(|w| w.extract()).transpose()?,
        })
    }

    /// The points and weights as views.
    #[allow(clippy::type_complexity)]
    fn views(
        &self,
    ) -> (
        ArrayView<'_, T, D>,
        ArrayView<'_, T, D>,
        Option<ArrayView<'_, T, W>>,
        Option<ArrayView<'_, T, W>>,
    ) {
        (
            self.x.as_array(),
            self.y.as_array(),
            self.a.as_ref().map(|w| w.as_array()),
            self.b.as_ref().map(|w| w.as_array()),
        )
    }
}

/// The certificate of an exact result ([`logot::exact::Certificate`]), measured on the
/// plan and potentials handed back.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct CertificateOutput {
    primal: f64,
    dual: f64,
    duality_gap: f64,
    relative_gap: f64,
    max_violation: f64,
    max_slack_on_support: f64,
    marginal_error_a: f64,
    marginal_error_b: f64,
    mass: f64,
    max_abs_cost: f64,
}

/// One exact problem: its cost `⟨P, C⟩`, the plan's nonzero entries `P[rows[k], cols[k]] =
/// mass[k]` of an `n×m` plan, the potentials `f` (n), `g` (m), the certificate, the
/// iterations, whether the solver converged and whether the result is exact (converged
/// and certified), and the algorithm (`"network_simplex"`, `"assignment"`, `"auction"` on
/// the GPU, `"sorting"`).
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct EmdOutput {
    cost: f64,
    n: usize,
    m: usize,
    rows: Py<PyAny>,
    cols: Py<PyAny>,
    mass: Py<PyAny>,
    f: Py<PyAny>,
    g: Py<PyAny>,
    certificate: Py<CertificateOutput>,
    iterations: usize,
    converged: bool,
    exact: bool,
    method: String,
}

fn certificate(py: Python<'_>, c: &Certificate) -> PyResult<Py<CertificateOutput>> {
    Py::new(
        py,
        CertificateOutput {
            primal: c.primal,
            dual: c.dual,
            duality_gap: c.duality_gap,
            relative_gap: c.relative_gap(),
            max_violation: c.max_violation,
            max_slack_on_support: c.max_slack_on_support,
            marginal_error_a: c.marginal_error_a,
            marginal_error_b: c.marginal_error_b,
            mass: c.mass,
            max_abs_cost: c.max_abs_cost,
        },
    )
}

fn emd_output(py: Python<'_>, r: EmdResult) -> PyResult<Py<EmdOutput>> {
    let index = |v: &[usize]| Array1::from_iter(v.iter().map(|&i| i as i64));
    let method = match r.method {
        ExactMethod::Assignment => "assignment",
        ExactMethod::Sorting => "sorting",
        ExactMethod::Auction => "auction",
        _ => "network_simplex",
    };
    Py::new(
        py,
        EmdOutput {
            cost: r.cost,
            n: r.plan.n,
            m: r.plan.m,
            rows: array(py, index(&r.plan.rows)),
            cols: array(py, index(&r.plan.cols)),
            mass: array(py, Array1::from(r.plan.mass)),
            f: array(py, r.f),
            g: array(py, r.g),
            certificate: certificate(py, &r.certificate)?,
            iterations: r.iterations,
            converged: r.converged,
            exact: r.exact,
            method: method.into(),
        },
    )
}

/// The solver's parameters from the Python layer's arguments.
fn emd_params(
    max_iters: Option<usize>,
    max_seconds: Option<f64>,
    method: &str,
    certificate_tol: f64,
) -> logot::Result<EmdParams> {
    let method = match method {
        "auto" => EmdMethod::Auto,
        "network_simplex" => EmdMethod::NetworkSimplex,
        "assignment" => EmdMethod::Assignment,
        other => {
            return Err(Error::parameter(
                "method",
                format!("{other:?}"),
                "expected \"auto\", \"network_simplex\" or \"assignment\"",
            ))
        }
    };
    let mut p = EmdParams::default()
        .method(method)
        .certificate_tol(certificate_tol);
    if let Some(k) = max_iters {
        p = p.max_iters(k);
    }
    if let Some(s) = max_seconds {
        if !(s.is_finite() && s >= 0.0) {
            return Err(Error::parameter("max_seconds", s, "must be finite and ≥ 0"));
        }
        p = p.max_time(Duration::from_secs_f64(s));
    }
    Ok(p)
}

/// The ground cost `|x − y|²` (`p` None) or `|x − y|^p`.
fn metric(p: Option<f64>) -> Metric {
    p.map_or(Metric::SqEuclidean, Metric::EuclideanPow)
}

fn outputs(py: Python<'_>, rs: Vec<EmdResult>) -> PyResult<Vec<Py<EmdOutput>>> {
    rs.into_iter().map(|r| emd_output(py, r)).collect()
}

/// Exact OT of a batch: `mu` (B×n), `nu` (B×m), `cost` (B×n×m, or 1×n×m shared); one
/// [`EmdOutput`] per problem.
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, max_iters=None, max_seconds=None, method="auto", certificate_tol=1e-9, backend="cpu"))]
#[allow(clippy::too_many_arguments)]
fn emd<'py>(
    py: Python<'py>,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    max_iters: Option<usize>,
    max_seconds: Option<f64>,
    method: &str,
    certificate_tol: f64,
    backend: &str,
) -> PyResult<Vec<Py<EmdOutput>>> {
    let params = emd_params(max_iters, max_seconds, method, certificate_tol).py()?;
    let rs = by_dtype!(mu, "mu", T => {
        let mu: PyReadonlyArray2<'py, T> = mu.extract()?;
        let nu: PyReadonlyArray2<'py, T> = nu.extract()?;
        let cost: PyReadonlyArray3<'py, T> = cost.extract()?;
        let (mu, nu, cost) = (mu.as_array(), nu.as_array(), cost.as_array());
        let (_, n, m) = cost.dim();
        match gpu(py, backend, Some(mu), Some(nu), n, m, None, &params)? {
            Device::Cpu => compute(py, true, || emd_batch(mu, nu, cost, &params)).py()?,
            Device::Cuda(be) => compute(py, false, || be.emd_batch(mu, nu, cost, &params)).py()?,
        }
    });
    outputs(py, rs)
}

/// The device `backend` names for an exact batch: the CPU, or a GPU whose auction takes
/// the batch (checked before the device is started; other input is a `ValueError` naming
/// the argument and why, never a silent CPU solve).
#[allow(clippy::too_many_arguments)]
fn gpu<T: Real>(
    py: Python<'_>,
    backend: &str,
    mu: Option<ArrayView2<'_, T>>,
    nu: Option<ArrayView2<'_, T>>,
    n: usize,
    m: usize,
    metric: Option<Metric>,
    params: &EmdParams,
) -> PyResult<Device> {
    if backend.starts_with("cuda") {
        if let Some(e) = auction_refusal(mu, nu, n, m, metric, params) {
            return Err(e).py();
        }
    }
    device(py, backend)
}

/// Why the GPU auction does not take a batch (`mu` B×n, `nu` B×m, None: uniform; `p`
/// the point clouds' power, `points` whether they are clouds), or None when it does.
#[pyfunction]
#[pyo3(signature = (mu, nu, n, m, points=false, p=None, method="auto"))]
#[allow(clippy::too_many_arguments)]
fn emd_gpu_refusal<'py>(
    mu: Option<PyReadonlyArray2<'py, f64>>,
    nu: Option<PyReadonlyArray2<'py, f64>>,
    n: usize,
    m: usize,
    points: bool,
    p: Option<f64>,
    method: &str,
) -> PyResult<Option<String>> {
    let params = emd_params(None, None, method, 1e-9).py()?;
    let (mu, nu) = (
        mu.as_ref().map(|w| w.as_array()),
        nu.as_ref().map(|w| w.as_array()),
    );
    let metric = points.then(|| metric(p));
    Ok(auction_refusal(mu, nu, n, m, metric, &params).map(|e| e.to_string()))
}

/// Exact OT between point clouds `x` (B×n×d) and `y` (B×m×d) with weights `mu` (B×n), `nu`
/// (B×m) or uniform ones (None), for the cost `|x − y|²` (`p` None) or `|x − y|^p`.
#[pyfunction]
#[pyo3(signature = (mu, nu, x, y, p=None, max_iters=None, max_seconds=None, method="auto", certificate_tol=1e-9, backend="cpu"))]
#[allow(clippy::too_many_arguments)]
fn emd_points<'py>(
    py: Python<'py>,
    mu: Option<&Bound<'py, PyAny>>,
    nu: Option<&Bound<'py, PyAny>>,
    x: &Bound<'py, PyAny>,
    y: &Bound<'py, PyAny>,
    p: Option<f64>,
    max_iters: Option<usize>,
    max_seconds: Option<f64>,
    method: &str,
    certificate_tol: f64,
    backend: &str,
) -> PyResult<Vec<Py<EmdOutput>>> {
    let params = emd_params(max_iters, max_seconds, method, certificate_tol).py()?;
    let rs = by_dtype!(x, "x", T => {
        let given = Weighted::<T, Ix3, Ix2>::extract(x, y, mu, nu)?;
        let (x, y, mu, nu) = given.views();
        let (n, m) = (x.dim().1, y.dim().1);
        match gpu(py, backend, mu, nu, n, m, Some(metric(p)), &params)? {
            Device::Cpu => compute(py, true, || emd_points_batch(mu, nu, x, y, metric(p), &params)).py()?,
            Device::Cuda(be) => {
                compute(py, false, || be.emd_points_batch(mu, nu, x, y, metric(p), &params)).py()?
            }
        }
    });
    outputs(py, rs)
}

/// Exact OT on the line between `x_a` (n) and `x_b` (m), weights `a`, `b` (None:
/// uniform), cost `|x − y|²` (`p` None) or `|x − y|^p`: an [`EmdOutput`].
#[pyfunction]
#[pyo3(signature = (x_a, x_b, a=None, b=None, p=None))]
fn emd_1d<'py>(
    py: Python<'py>,
    x_a: &Bound<'py, PyAny>,
    x_b: &Bound<'py, PyAny>,
    a: Option<&Bound<'py, PyAny>>,
    b: Option<&Bound<'py, PyAny>>,
    p: Option<f64>,
) -> PyResult<Py<EmdOutput>> {
    let r = by_dtype!(x_a, "x_a", T => {
        let given = Weighted::<T, Ix1, Ix1>::extract(x_a, x_b, a, b)?;
        let (x_a, x_b, a, b) = given.views();
        compute(py, true, || lib_emd_1d(x_a, x_b, a, b, metric(p))).py()?
    });
    emd_output(py, r)
}

/// The cost of [`emd_1d`] alone (no plan, potentials nor certificate).
#[pyfunction]
#[pyo3(signature = (x_a, x_b, a=None, b=None, p=None))]
fn emd2_1d<'py>(
    py: Python<'py>,
    x_a: &Bound<'py, PyAny>,
    x_b: &Bound<'py, PyAny>,
    a: Option<&Bound<'py, PyAny>>,
    b: Option<&Bound<'py, PyAny>>,
    p: Option<f64>,
) -> PyResult<f64> {
    by_dtype!(x_a, "x_a", T => {
        let given = Weighted::<T, Ix1, Ix1>::extract(x_a, x_b, a, b)?;
        let (x_a, x_b, a, b) = given.views();
        compute(py, true, || lib_emd2_1d(x_a, x_b, a, b, metric(p))).py()
    })
}

/// `W_p^p` on the line for a batch: row `k` of `u_values` (B×n) against row `k` of
/// `v_values` (B×m), weights B×n and B×m or uniform (None); an array of B.
#[pyfunction]
#[pyo3(signature = (u_values, v_values, u_weights=None, v_weights=None, p=1.0))]
fn wasserstein_1d<'py>(
    py: Python<'py>,
    u_values: &Bound<'py, PyAny>,
    v_values: &Bound<'py, PyAny>,
    u_weights: Option<&Bound<'py, PyAny>>,
    v_weights: Option<&Bound<'py, PyAny>>,
    p: f64,
) -> PyResult<Py<PyAny>> {
    let w = by_dtype!(u_values, "u_values", T => {
        let given = Weighted::<T, Ix2, Ix2>::extract(u_values, v_values, u_weights, v_weights)?;
        let (u, v, uw, vw) = given.views();
        compute(py, true, || wasserstein_1d_batch(u, v, uw, vw, p)).py()?
    });
    Ok(array(py, w))
}

/// `W_p^p` on the line and its gradients with respect to the values, for a batch as
/// [`wasserstein_1d`]: `(values (B), grad_u (B×n), grad_v (B×m))`, problems in parallel.
#[pyfunction]
#[pyo3(signature = (u_values, v_values, u_weights=None, v_weights=None, p=1.0))]
fn wasserstein_1d_grad<'py>(
    py: Python<'py>,
    u_values: &Bound<'py, PyAny>,
    v_values: &Bound<'py, PyAny>,
    u_weights: Option<&Bound<'py, PyAny>>,
    v_weights: Option<&Bound<'py, PyAny>>,
    p: f64,
) -> PyResult<(Py<PyAny>, Py<PyAny>, Py<PyAny>)> {
    let (w, gu, gv) = by_dtype!(u_values, "u_values", T => {
        let given = Weighted::<T, Ix2, Ix2>::extract(u_values, v_values, u_weights, v_weights)?;
        let (u, v, uw, vw) = given.views();
        let bsz = u.nrows();
        for (arg, rows) in [("v_values", v.nrows()), ("u_weights", uw.map_or(bsz, |w| w.nrows())),
                            ("v_weights", vw.map_or(bsz, |w| w.nrows()))] {
            if rows != bsz {
                return Err(Error::shape(arg, format!("holds {rows} problems but u_values holds {bsz}"))).py();
            }
        }
        compute(py, true, || -> logot::Result<_> {
            let each: Vec<_> = (0..bsz)
                .into_par_iter()
                .map(|k| {
                    let (uw, vw) = (uw.map(|w| row(w, k)), vw.map(|w| row(w, k)));
                    lib_wasserstein_1d_grad(row(u, k), row(v, k), uw, vw, p)
                        .map_err(|e| if bsz == 1 { e } else { e.rename_arg(|a| format!("{a}[{k}]")) })
                })
                .collect::<logot::Result<_>>()?;
            let (n, m) = (u.ncols(), v.ncols());
            let values = Array1::from_iter(each.iter().map(|r| r.value));
            let gu = Array2::from_shape_fn((bsz, n), |(k, i)| each[k].grad_u_values[i]);
            let gv = Array2::from_shape_fn((bsz, m), |(k, j)| each[k].grad_v_values[j]);
            Ok((values, gu, gv))
        })
        .py()?
    });
    Ok((array(py, w), array(py, gu), array(py, gv)))
}

/// Row `k` of `a`.
fn row<'a, T>(a: ArrayView2<'a, T>, k: usize) -> ndarray::ArrayView1<'a, T> {
    a.index_axis_move(Axis(0), k)
}

/// The sliced distance of a batch of pairs, `x_s` (B×n×d) against `x_t` (B×m×d), weights
/// B×n and B×m (None: uniform), every problem along the same directions (as
/// [`sliced_wasserstein`]), with the gradients: `(distances (B), grad_x_s (B×n×d),
/// grad_x_t (B×m×d))`.
#[pyfunction]
#[pyo3(signature = (x_s, x_t, a=None, b=None, projections=None, n_projections=50, seed=0, p=2.0))]
#[allow(clippy::too_many_arguments)]
fn sliced_wasserstein_grad_batched<'py>(
    py: Python<'py>,
    x_s: &Bound<'py, PyAny>,
    x_t: &Bound<'py, PyAny>,
    a: Option<&Bound<'py, PyAny>>,
    b: Option<&Bound<'py, PyAny>>,
    projections: Option<PyReadonlyArray2<'py, f64>>,
    n_projections: usize,
    seed: u32,
    p: f64,
) -> PyResult<(Py<PyAny>, Py<PyAny>, Py<PyAny>)> {
    let dirs = self::projections(projections.as_ref(), n_projections, seed);
    let gs = by_dtype!(x_s, "x_s", T => {
        let given = Weighted::<T, Ix3, Ix2>::extract(x_s, x_t, a, b)?;
        let (x_s, x_t, a, b) = given.views();
        compute(py, true, || sliced_wasserstein_grad_batch(x_s, x_t, a, b, &dirs, p)).py()?
    });
    let distances = Array1::from_iter(gs.iter().map(|g| g.distance));
    let stack = |side: fn(&SlicedGrad) -> &Array2<f64>| {
        let (rows, d) = side(&gs[0]).dim();
        Array3::from_shape_fn((gs.len(), rows, d), |(k, i, t)| side(&gs[k])[[i, t]])
    };
    let (gx, gy) = (stack(|g| &g.grad_x_s), stack(|g| &g.grad_x_t));
    Ok((array(py, distances), array(py, gx), array(py, gy)))
}

/// A sliced or max-sliced distance: `distance`, `W_p^p` along each direction
/// (`projected`), for max-sliced the best `direction` and the ascent `steps` kept, and the
/// gradients with respect to the points when asked for (else None).
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct SlicedOutput {
    distance: f64,
    projected: Py<PyAny>,
    direction: Option<Py<PyAny>>,
    steps: usize,
    grad_x_s: Option<Py<PyAny>>,
    grad_x_t: Option<Py<PyAny>>,
}

/// A [`SlicedOutput`] of a distance, its directions' `W_p^p`, for max-sliced the best
/// direction and the ascent steps kept, and the gradients when computed.
fn sliced_output(
    py: Python<'_>,
    distance: f64,
    projected: Array1<f64>,
    direction: Option<Array1<f64>>,
    steps: usize,
    grads: Option<SlicedGrad>,
) -> PyResult<Py<SlicedOutput>> {
    let (grad_x_s, grad_x_t) = match grads {
        Some(g) => (Some(array(py, g.grad_x_s)), Some(array(py, g.grad_x_t))),
        None => (None, None),
    };
    Py::new(
        py,
        SlicedOutput {
            distance,
            projected: array(py, projected),
            direction: direction.map(|d| array(py, d)),
            steps,
            grad_x_s,
            grad_x_t,
        },
    )
}

/// The directions: given (`d×L`, float64) or `n_projections` drawn from `seed`.
fn projections<'a>(
    given: Option<&'a PyReadonlyArray2<'_, f64>>,
    n_projections: usize,
    seed: u32,
) -> Projections<'a> {
    match given {
        Some(p) => Projections::Given(p.as_array()),
        None => Projections::Random {
            count: n_projections,
            seed,
        },
    }
}

/// The sliced distance `SW_p` between `x_s` (n×d) and `x_t` (m×d), weights `a`, `b` (None:
/// uniform), over `projections` (d×L, float64) or `n_projections` directions drawn from
/// `seed` as NumPy's `RandomState(seed)` draws POT's; with the gradients when `gradients`.
#[pyfunction]
#[pyo3(signature = (x_s, x_t, a=None, b=None, projections=None, n_projections=50, seed=0, p=2.0, gradients=false))]
#[allow(clippy::too_many_arguments)]
fn sliced_wasserstein<'py>(
    py: Python<'py>,
    x_s: &Bound<'py, PyAny>,
    x_t: &Bound<'py, PyAny>,
    a: Option<&Bound<'py, PyAny>>,
    b: Option<&Bound<'py, PyAny>>,
    projections: Option<PyReadonlyArray2<'py, f64>>,
    n_projections: usize,
    seed: u32,
    p: f64,
    gradients: bool,
) -> PyResult<Py<SlicedOutput>> {
    let dirs = self::projections(projections.as_ref(), n_projections, seed);
    let out = by_dtype!(x_s, "x_s", T => {
        let given = Weighted::<T, Ix2, Ix1>::extract(x_s, x_t, a, b)?;
        let (x_s, x_t, a, b) = given.views();
        compute(py, true, || -> logot::Result<_> {
            let r = sliced_wasserstein_distance(x_s, x_t, a, b, &dirs, p)?;
            let g = if gradients {
                Some(sliced_wasserstein_grad(x_s, x_t, a, b, &dirs, p)?)
            } else {
                None
            };
            Ok((r, g))
        })
        .py()?
    });
    let (r, g) = out;
    sliced_output(py, r.distance, r.projected, None, 0, g)
}

/// The max-sliced distance `max_θ W_p(θ#μ, θ#ν)` over the directions (given, d×L, or drawn
/// as in [`sliced_wasserstein`]); with `ascent_steps`, refined from the best of them by
/// projected gradient ascent on the sphere (first step `step`); gradients when asked.
#[pyfunction]
#[pyo3(signature = (x_s, x_t, a=None, b=None, projections=None, n_projections=50, seed=0, p=2.0, ascent_steps=None, step=0.5, gradients=false))]
#[allow(clippy::too_many_arguments)]
fn max_sliced_wasserstein<'py>(
    py: Python<'py>,
    x_s: &Bound<'py, PyAny>,
    x_t: &Bound<'py, PyAny>,
    a: Option<&Bound<'py, PyAny>>,
    b: Option<&Bound<'py, PyAny>>,
    projections: Option<PyReadonlyArray2<'py, f64>>,
    n_projections: usize,
    seed: u32,
    p: f64,
    ascent_steps: Option<usize>,
    step: f64,
    gradients: bool,
) -> PyResult<Py<SlicedOutput>> {
    let dirs = self::projections(projections.as_ref(), n_projections, seed);
    let how = match ascent_steps {
        Some(steps) => MaxSlicedSearch::Ascent { steps, step },
        None => MaxSlicedSearch::Projections,
    };
    let (r, g) = by_dtype!(x_s, "x_s", T => {
        let given = Weighted::<T, Ix2, Ix1>::extract(x_s, x_t, a, b)?;
        let (x_s, x_t, a, b) = given.views();
        compute(py, true, || -> logot::Result<_> {
            Ok(if gradients {
                let (r, g) = max_sliced_wasserstein_grad(x_s, x_t, a, b, &dirs, p, how)?;
                (r, Some(g))
            } else {
                (max_sliced_wasserstein_distance(x_s, x_t, a, b, &dirs, p, how)?, None)
            })
        })
        .py()?
    });
    sliced_output(py, r.distance, r.projected, Some(r.direction), r.steps, g)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CertificateOutput>()?;
    m.add_class::<EmdOutput>()?;
    m.add_class::<SlicedOutput>()?;
    m.add_function(wrap_pyfunction!(emd, m)?)?;
    m.add_function(wrap_pyfunction!(emd_points, m)?)?;
    m.add_function(wrap_pyfunction!(emd_1d, m)?)?;
    m.add_function(wrap_pyfunction!(emd2_1d, m)?)?;
    m.add_function(wrap_pyfunction!(wasserstein_1d, m)?)?;
    m.add_function(wrap_pyfunction!(wasserstein_1d_grad, m)?)?;
    m.add_function(wrap_pyfunction!(sliced_wasserstein_grad_batched, m)?)?;
    m.add_function(wrap_pyfunction!(emd_gpu_refusal, m)?)?;
    m.add_function(wrap_pyfunction!(sliced_wasserstein, m)?)?;
    m.add_function(wrap_pyfunction!(max_sliced_wasserstein, m)?)?;
    Ok(())
}
