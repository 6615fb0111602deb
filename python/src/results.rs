//! Results to Python: the convergence and CG reports, the Sinkhorn results.

use logot::grad::CgSummary;
use logot::{Convergence, Real, SinkhornResult};
use numpy::{Element, IntoPyArray};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// The convergence report as a dict (its fields by name, so that new fields of the library's
/// report reach the Python `Convergence` by adding them here).
pub(crate) fn convergence<'py>(py: Python<'py>, c: &Convergence) -> PyResult<Bound<'py, PyDict>> {
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

/// The report of problem `k` of a batch's `c`, as a report of its own.
pub(crate) fn convergence_of<'py>(
    py: Python<'py>,
    c: &Convergence,
    k: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let p = &c.problems[k];
    let d = PyDict::new(py);
    d.set_item("iterations", p.iterations)?;
    d.set_item("marginal_error", p.marginal_error)?;
    d.set_item("tol", c.tol)?;
    d.set_item("converged", p.converged)?;
    d.set_item("marginal_errors", vec![p.marginal_error])?;
    d.set_item("converged_each", vec![p.converged])?;
    d.set_item("iterations_each", vec![p.iterations])?;
    Ok(d)
}

pub(crate) fn cg_summary<'py>(py: Python<'py>, c: &CgSummary) -> PyResult<Bound<'py, PyDict>> {
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
pub(crate) fn sinkhorn_result<'py, T: Element + Real>(
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

pub(crate) fn register(_m: &Bound<'_, PyModule>) -> PyResult<()> {
    Ok(())
}
