//! Point clouds: `OT_ε` with its gradients with respect to the points, and the Sinkhorn
//! divergence.

use crate::args::{clouds_batched, cross_precision, point_metric, relaxation, ParamsArg};
use crate::common::{compute, device, OrPyErr};
use crate::core::{sinkhorn_entry, Want};
use crate::results::{array, convergence, convergence_of, DivergenceOutput};
use logot::grad::CgParams;
use logot::{DivergenceConvention, PointCloudCost, Problem, Real, SinkhornSolver};
use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A [`PointGradientsOutput`](crate::results::PointGradientsOutput): `OT_ε` and its
/// gradients with respect to the points (point-cloud costs).
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, params, warm_start=None, backend="cpu"))]
fn point_gradients<'py>(
    py: Python<'py>,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: &Bound<'py, PyAny>,
    warm_start: Option<(PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>)>,
    backend: &str,
) -> PyResult<Py<PyAny>> {
    let cg = CgParams::default();
    let want = Want::PointGradients;
    sinkhorn_entry(
        py, want, mu, nu, cost, params, None, warm_start, cg, backend,
    )
}

/// The Sinkhorn divergence `S_ε = W(a, b) − ½ W(a, a) − ½ W(b, b)` of two weighted clouds,
/// `W` the regularised objective (`convention = "objective"`, with gradients) or `⟨P, C⟩`
/// (`"linear"`, without); with `reg_m` the unbalanced divergence (one ρ on both sides,
/// `+ (ε/2)(Σa − Σb)²`).
///
/// A [`DivergenceOutput`]: for one pair (`x` `n×d`, `y` `m×d`, `a` `n`, `b` `m`) the value,
/// gradients, three terms and three reports `(xy, xx, yy)`; for a batch of pairs (`x`
/// `B×n×d`, `y` `B×m×d`, `a` `B×n`, `b` `B×m`, problem `k` on `x[k]`, `y[k]`) B values,
/// `B×3` terms and one triple of reports per problem. The gradients are `None` without them
/// (`"linear"`).
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
    params: &Bound<'py, PyAny>,
    backend: &str,
    convention: &str,
    reg_m: Option<(f64, f64)>,
) -> PyResult<Py<DivergenceOutput>> {
    let convention = match convention {
        "objective" => DivergenceConvention::Objective,
        "linear" => DivergenceConvention::Linear,
        c => {
            return Err(PyValueError::new_err(format!(
                "convention = {c:?}: expected \"objective\" or \"linear\""
            )))
        }
    };
    let params = ParamsArg::extract(params)?;
    let dev = device(py, backend)?;
    let cpu = dev.is_cpu();
    let metric = point_metric(metric)?;
    let precision = cross_precision(precision)?;
    let relax = relaxation(reg_m);
    let batched = clouds_batched(x, y)?;
    by_dtype!(x, "x", T => {
        // One pair is a batch of one: its arrays viewed with a leading axis.
        let (x3, y3, a2, b2, x2, y2, a1, b1);
        let (xv, yv, av, bv) = if batched {
            x3 = x.extract::<PyReadonlyArray3<'py, T>>()?;
            y3 = y.extract::<PyReadonlyArray3<'py, T>>()?;
            a2 = a.extract::<PyReadonlyArray2<'py, T>>()?;
            b2 = b.extract::<PyReadonlyArray2<'py, T>>()?;
            (x3.as_array(), y3.as_array(), a2.as_array(), b2.as_array())
        } else {
            x2 = x.extract::<PyReadonlyArray2<'py, T>>()?;
            y2 = y.extract::<PyReadonlyArray2<'py, T>>()?;
            a1 = a.extract::<PyReadonlyArray1<'py, T>>()?;
            b1 = b.extract::<PyReadonlyArray1<'py, T>>()?;
            let lead = ndarray::Axis(0);
            (
                x2.as_array().insert_axis(lead),
                y2.as_array().insert_axis(lead),
                a1.as_array().insert_axis(lead),
                b1.as_array().insert_axis(lead),
            )
        };
        let clouds = PointCloudCost::batched_with_metric(xv, yv, metric)
            .py()?
            .with_precision(precision);
        let p = params.params(|| clouds.max_cost());
        let s = by_backend!(&dev, be => {
            let solver = SinkhornSolver::new(be, p);
            let run = || -> logot::Result<_> {
                let mut problem = Problem::new(av, bv, clouds)?;
                if let Some(r) = relax {
                    problem = problem.relaxed(r);
                }
                solver.sinkhorn_divergence(&problem, convention)
            };
            compute(py, cpu, run).py()?
        });
        let [xy, xx, yy] = &s.convergence;
        if !batched {
            let convs = (convergence(py, xy)?, convergence(py, xx)?, convergence(py, yy)?);
            let t = s.terms.row(0);
            let terms = (t[0].f64(), t[1].f64(), t[2].f64());
            let first = |g: Option<ndarray::Array3<T>>| {
                g.map(|g| array(py, g.index_axis_move(ndarray::Axis(0), 0)))
            };
            let out = DivergenceOutput {
                value: s.value[0].f64().into_pyobject(py)?.into_any().unbind(),
                grad_x: first(s.grad_x),
                grad_y: first(s.grad_y),
                terms: terms.into_pyobject(py)?.into_any().unbind(),
                convergence: convs.into_pyobject(py)?.into_any().unbind(),
            };
            return Py::new(py, out);
        }
        let convs = (0..s.value.len())
            .map(|k| {
                Ok((
                    convergence_of(py, xy, k)?,
                    convergence_of(py, xx, k)?,
                    convergence_of(py, yy, k)?,
                ))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let out = DivergenceOutput {
            value: array(py, s.value),
            grad_x: s.grad_x.map(|g| array(py, g)),
            grad_y: s.grad_y.map(|g| array(py, g)),
            terms: array(py, s.terms),
            convergence: convs.into_pyobject(py)?.into_any().unbind(),
        };
        Py::new(py, out)
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(point_gradients, m)?)?;
    m.add_function(wrap_pyfunction!(sinkhorn_divergence, m)?)?;
    Ok(())
}
