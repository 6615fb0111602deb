//! Fixed-support and grid barycenters.

use crate::args::{count, real, CostArg};
use crate::common::{compute, device, OrPyErr};
use crate::results::{array, BarycenterOutput};
use logot::{BarycenterParams, BarycenterProblem, BarycenterSolver};
use ndarray::Array2;
use numpy::{PyReadonlyArray2, PyReadonlyArray3};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// Barycenter parameters as the Python layer passes them, `(eps, max_iters or None, tol,
/// check_every)`, each checked by type and named.
fn barycenter_params(obj: &Bound<'_, PyAny>) -> PyResult<BarycenterParams> {
    let t = obj
        .cast::<PyTuple>()
        .ok()
        .filter(|t| t.len() == 4)
        .ok_or_else(|| {
            PyTypeError::new_err("params: expected (eps, max_iters, tol, check_every)")
        })?;
    let max_iters = t.get_item(1)?;
    let max_iters = if max_iters.is_none() {
        None
    } else {
        Some(count(&max_iters, "max_iters")?)
    };
    Ok(BarycenterParams::new(real(&t.get_item(0)?, "eps")?)
        .max_iters(max_iters)
        .tol(real(&t.get_item(2)?, "tol")?)
        .check_every(count(&t.get_item(3)?, "check_every")?))
}

/// A [`BarycenterOutput`]: `P` barycenters of `K` inputs
/// each (`histograms` P×K×n, `weights` P×K) on a dense cost or `("grid", shape)`.
/// `params = (eps, max_iters or None, tol, check_every)`.
#[pyfunction]
#[pyo3(signature = (histograms, weights, cost, params, backend="cpu"))]
fn barycenter<'py>(
    py: Python<'py>,
    histograms: &Bound<'py, PyAny>,
    weights: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: &Bound<'py, PyAny>,
    backend: &str,
) -> PyResult<Py<BarycenterOutput>> {
    let p = barycenter_params(params)?;
    let dev = device(py, backend)?;
    let cpu = dev.is_cpu();
    by_dtype!(histograms, "histograms", T => {
        let h: PyReadonlyArray3<'py, T> = histograms.extract()?;
        let w: PyReadonlyArray2<'py, T> = weights.extract()?;
        let cost = CostArg::<T>::extract(cost)?;
        let source = cost.source()?;
        let (hv, wv) = (h.as_array(), w.as_array());
        let bars = by_backend!(&dev, be => {
            let solver = BarycenterSolver::new(be, p);
            let run = || solver.solve(&BarycenterProblem::new(hv, wv)?, source);
            compute(py, cpu, run).py()?
        });
        let m = bars.first().map_or(0, |b| b.histogram.len());
        let mut out = Array2::<T>::zeros((bars.len(), m));
        for (mut row, b) in out.outer_iter_mut().zip(&bars) {
            row.assign(&b.histogram);
        }
        let iterations = bars.first().map_or(0, |b| b.iterations);
        let errors: Vec<f64> = bars.iter().map(|b| b.error).collect();
        let converged: Vec<bool> = bars.iter().map(|b| b.converged).collect();
        let out = BarycenterOutput {
            histograms: array(py, out),
            iterations,
            errors,
            converged,
        };
        Py::new(py, out)
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(barycenter, m)?)?;
    Ok(())
}
