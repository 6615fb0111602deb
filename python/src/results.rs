//! The results handed to the Python layer: frozen classes with named, read-only fields
//! (`logot._logot.SinkhornOutput`, …), which the Python layer turns into its public result
//! classes (`logot/_results.py`). Arrays are numpy arrays of the call's dtype.

use logot::grad::CgSummary as LibCgSummary;
use logot::{Convergence, Real, SinkhornResult};
use numpy::{Element, IntoPyArray};
use pyo3::prelude::*;

/// `a` as a numpy array, type-erased for a result field.
pub(crate) fn array<A: IntoPyArray>(py: Python<'_>, a: A) -> Py<PyAny> {
    a.into_pyarray(py).into_any().unbind()
}

/// How a solver ended ([`logot::Convergence`]): the summary over the batch and one entry per
/// problem in each list.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct ConvergenceReport {
    iterations: usize,
    marginal_error: f64,
    tol: f64,
    converged: bool,
    marginal_errors: Vec<f64>,
    converged_each: Vec<bool>,
    iterations_each: Vec<usize>,
}

/// The report of a batch.
pub(crate) fn convergence(py: Python<'_>, c: &Convergence) -> PyResult<Py<ConvergenceReport>> {
    Py::new(
        py,
        ConvergenceReport {
            iterations: c.iterations,
            marginal_error: c.marginal_error,
            tol: c.tol,
            converged: c.converged,
            marginal_errors: c.marginal_errors(),
            converged_each: c.problems.iter().map(|p| p.converged).collect(),
            iterations_each: c.problems.iter().map(|p| p.iterations).collect(),
        },
    )
}

/// The report of problem `k` of a batch's `c`, as a report of its own.
pub(crate) fn convergence_of(
    py: Python<'_>,
    c: &Convergence,
    k: usize,
) -> PyResult<Py<ConvergenceReport>> {
    let p = &c.problems[k];
    Py::new(
        py,
        ConvergenceReport {
            iterations: p.iterations,
            marginal_error: p.marginal_error,
            tol: c.tol,
            converged: p.converged,
            marginal_errors: vec![p.marginal_error],
            converged_each: vec![p.converged],
            iterations_each: vec![p.iterations],
        },
    )
}

/// How the conjugate-gradient solve of an implicit backward ended over a batch
/// ([`logot::grad::CgSummary`]).
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct CgSummary {
    problems: usize,
    max_iterations: usize,
    max_residual: f64,
    unconverged: usize,
    first_unconverged: Option<usize>,
    tol: f64,
}

pub(crate) fn cg_summary(py: Python<'_>, c: &LibCgSummary) -> PyResult<Py<CgSummary>> {
    Py::new(
        py,
        CgSummary {
            problems: c.problems,
            max_iterations: c.max_iterations,
            max_residual: c.max_residual,
            unconverged: c.unconverged,
            first_unconverged: c.first_unconverged,
            tol: c.tol,
        },
    )
}

/// A solved batch: distances `⟨P_b, C_b⟩` (B), potentials `f` (B×n), `g` (B×m), the report
/// and, for relaxed problems, the unbalanced objective (B; else `None`).
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct SinkhornOutput {
    distance: Py<PyAny>,
    f: Py<PyAny>,
    g: Py<PyAny>,
    convergence: Py<ConvergenceReport>,
    objective: Option<Py<PyAny>>,
}

pub(crate) fn sinkhorn_output<T: Element + Real>(
    py: Python<'_>,
    r: SinkhornResult<T>,
) -> PyResult<Py<SinkhornOutput>> {
    Py::new(
        py,
        SinkhornOutput {
            convergence: convergence(py, &r.convergence)?,
            distance: r.distance.into_pyarray(py).into_any().unbind(),
            f: r.f.into_pyarray(py).into_any().unbind(),
            g: r.g.into_pyarray(py).into_any().unbind(),
            objective: r.objective.map(|o| o.into_pyarray(py).into_any().unbind()),
        },
    )
}

/// The distances of a batch (B) with the convergence summary only (`logot.wasserstein`).
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct DistanceOutput {
    pub(crate) distance: Py<PyAny>,
    pub(crate) converged: bool,
    pub(crate) marginal_error: f64,
    pub(crate) tol: f64,
    pub(crate) iterations: usize,
}

/// The plans (B×n×m) of a solved batch with its [`SinkhornOutput`].
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct CouplingOutput {
    pub(crate) plan: Py<PyAny>,
    pub(crate) result: Py<SinkhornOutput>,
}

/// Exact gradients of `⟨P_b, C_b⟩`: `cost` (B×n×m), `mu` (B×n), `nu` (B×m), the CG report
/// and the solved batch.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct OtGradientsOutput {
    pub(crate) cost: Py<PyAny>,
    pub(crate) mu: Py<PyAny>,
    pub(crate) nu: Py<PyAny>,
    pub(crate) cg: Py<CgSummary>,
    pub(crate) result: Py<SinkhornOutput>,
}

/// Exact gradients of a loss of the plans: `cost` (B×n×m), `mu` (B×n), `nu` (B×m) and the
/// CG report.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct PlanGradientsOutput {
    pub(crate) cost: Py<PyAny>,
    pub(crate) mu: Py<PyAny>,
    pub(crate) nu: Py<PyAny>,
    pub(crate) cg: Py<CgSummary>,
}

/// `OT_ε` of a point-cloud batch (B) with its gradients with respect to the points `x`
/// (B×n×d) and `y` (B×m×d), and the solved batch.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct PointGradientsOutput {
    pub(crate) value: Py<PyAny>,
    pub(crate) x: Py<PyAny>,
    pub(crate) y: Py<PyAny>,
    pub(crate) result: Py<SinkhornOutput>,
}

/// Sinkhorn divergences: one pair (`value` a float, gradients n×d and m×d, `terms` three
/// floats, `convergence` three reports) or a batch (`value` B, gradients B×n×d and B×m×d,
/// `terms` B×3, one triple of reports per problem); the gradients `None` without them.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct DivergenceOutput {
    pub(crate) value: Py<PyAny>,
    pub(crate) grad_x: Option<Py<PyAny>>,
    pub(crate) grad_y: Option<Py<PyAny>>,
    pub(crate) terms: Py<PyAny>,
    pub(crate) convergence: Py<PyAny>,
}

/// `P` barycenters: `histograms` (P×m), the `iterations` run, each problem's `errors` and
/// whether it `converged`.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct BarycenterOutput {
    pub(crate) histograms: Py<PyAny>,
    pub(crate) iterations: usize,
    pub(crate) errors: Vec<f64>,
    pub(crate) converged: Vec<bool>,
}

/// The bistochastic projections `r` (B×n×n) and their report.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct BistochasticOutput {
    pub(crate) r: Py<PyAny>,
    pub(crate) convergence: Py<ConvergenceReport>,
}

/// `∂L/∂X` of the bistochastic projection (B×n×n) and the CG report.
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct BistochasticGradientOutput {
    pub(crate) dx: Py<PyAny>,
    pub(crate) cg: Py<CgSummary>,
}

/// Thin SVDs of a batch of `M×3` matrices: `u` (B×M×3), `s` (B×3), `vt` (B×3×3).
#[pyclass(frozen, get_all, module = "logot._logot")]
pub(crate) struct Svd3Output {
    pub(crate) u: Py<PyAny>,
    pub(crate) s: Py<PyAny>,
    pub(crate) vt: Py<PyAny>,
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ConvergenceReport>()?;
    m.add_class::<CgSummary>()?;
    m.add_class::<SinkhornOutput>()?;
    m.add_class::<DistanceOutput>()?;
    m.add_class::<CouplingOutput>()?;
    m.add_class::<OtGradientsOutput>()?;
    m.add_class::<PlanGradientsOutput>()?;
    m.add_class::<PointGradientsOutput>()?;
    m.add_class::<DivergenceOutput>()?;
    m.add_class::<BarycenterOutput>()?;
    m.add_class::<BistochasticOutput>()?;
    m.add_class::<BistochasticGradientOutput>()?;
    m.add_class::<Svd3Output>()?;
    Ok(())
}
