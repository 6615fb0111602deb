//! Sinkhorn on host arrays: distances, plans, potentials and exact gradients.

use crate::args::{cg_params, max_cost, relaxation, warm_start, CostArg, ParamsArg};
use crate::common::{compute, device, small_dense, OrPyErr};
use crate::results::{
    array, cg_summary, sinkhorn_output, CouplingOutput, DistanceOutput, OtGradientsOutput,
    PlanGradientsOutput, PointGradientsOutput,
};
use logot::grad::CgParams;
use logot::{Problem, SinkhornParams, SinkhornSolver};
use numpy::{PyReadonlyArray2, PyReadonlyArray3};
use pyo3::prelude::*;

/// What a Sinkhorn entry point computes.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Want {
    /// Distances and the convergence summary only.
    Distance,
    /// Distances, potentials, convergence.
    Solve,
    /// And the plans.
    Coupling,
    /// And the exact gradients of ⟨P, C⟩ (implicit differentiation).
    Gradients,
    /// And OT_ε with its gradients with respect to the points (point-cloud cost).
    PointGradients,
}

type Warm<'py> = Option<(PyReadonlyArray2<'py, f64>, PyReadonlyArray2<'py, f64>)>;

/// One Sinkhorn call on host arrays: the problem `(mu, nu, cost)` (optionally relaxed by
/// `reg_m`) solved with `params` on `backend`, and what `want` asks for: a
/// [`DistanceOutput`], [`SinkhornOutput`](crate::results::SinkhornOutput), [`CouplingOutput`],
/// [`OtGradientsOutput`] or [`PointGradientsOutput`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn sinkhorn_entry<'py>(
    py: Python<'py>,
    want: Want,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: &Bound<'py, PyAny>,
    reg_m: Option<(f64, f64)>,
    warm: Warm<'py>,
    cg: CgParams,
    backend: &str,
) -> PyResult<Py<PyAny>> {
    let params = ParamsArg::extract(params)?;
    let dev = device(py, backend)?;
    let cpu = dev.is_cpu();
    let warm = warm_start(warm);
    let relax = relaxation(reg_m);
    by_dtype!(mu, "mu", T => {
        let mu: PyReadonlyArray2<'py, T> = mu.extract()?;
        let nu: PyReadonlyArray2<'py, T> = nu.extract()?;
        let cost = CostArg::<T>::extract(cost)?;
        let source = cost.source()?;
        let mut p = params.params(|| max_cost(&source));
        if let Some(w) = warm {
            p = p.warm_start(w);
        }
        let (mu, nu) = (mu.as_array(), nu.as_array());
        let on_pool = cpu && !small_dense(&source, mu.nrows());
        by_backend!(&dev, be => {
            let solver = SinkhornSolver::new(be, p);
            let run = || -> logot::Result<_> {
                let mut problem = Problem::new(mu, nu, source)?;
                if let Some(r) = relax {
                    problem = problem.relaxed(r);
                }
                Ok(match want {
                    Want::Solve | Want::Distance => {
                        (Some(solver.solve(&problem)?), None, None, None)
                    }
                    Want::Coupling => (None, Some(solver.coupling(&problem)?), None, None),
                    Want::Gradients => {
                        (None, None, Some(solver.wasserstein_gradients(&problem, &cg)?), None)
                    }
                    Want::PointGradients => {
                        (None, None, None, Some(solver.point_gradients(&problem)?))
                    }
                })
            };
            let out = compute(py, on_pool, run).py()?;
            Ok(match out {
                (Some(r), ..) if want == Want::Distance => {
                    let c = &r.convergence;
                    let d = DistanceOutput {
                        converged: c.converged,
                        marginal_error: c.marginal_error,
                        tol: c.tol,
                        iterations: c.iterations,
                        distance: array(py, r.distance),
                    };
                    Py::new(py, d)?.into_any()
                }
                (Some(r), ..) => sinkhorn_output(py, r)?.into_any(),
                (_, Some(c), ..) => {
                    let result = sinkhorn_output(py, c.result)?;
                    Py::new(py, CouplingOutput { plan: array(py, c.plan), result })?.into_any()
                }
                (_, _, Some(g), _) => {
                    let out = OtGradientsOutput {
                        cg: cg_summary(py, &g.cg.summary())?,
                        result: sinkhorn_output(py, g.result)?,
                        cost: array(py, g.cost),
                        mu: array(py, g.mu),
                        nu: array(py, g.nu),
                    };
                    Py::new(py, out)?.into_any()
                }
                (_, _, _, Some(g)) => {
                    let out = PointGradientsOutput {
                        result: sinkhorn_output(py, g.result)?,
                        value: array(py, g.value),
                        x: array(py, g.x),
                        y: array(py, g.y),
                    };
                    Py::new(py, out)?.into_any()
                }
                _ => unreachable!("one result per entry point"),
            })
        })
    })
}

/// A [`SinkhornOutput`](crate::results::SinkhornOutput): distances `⟨P_b, C_b⟩` (B), potentials `f`
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
    params: &Bound<'py, PyAny>,
    warm_start: Warm<'py>,
    backend: &str,
    reg_m: Option<(f64, f64)>,
) -> PyResult<Py<PyAny>> {
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

/// A [`DistanceOutput`]: the distances of [`solve`]
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
    params: &Bound<'py, PyAny>,
    warm_start: Warm<'py>,
    backend: &str,
    reg_m: Option<(f64, f64)>,
) -> PyResult<Py<PyAny>> {
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

/// A [`CouplingOutput`]: the plans `B×n×m` with the solved batch.
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, params, warm_start=None, backend="cpu", reg_m=None))]
#[allow(clippy::too_many_arguments)]
fn coupling<'py>(
    py: Python<'py>,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: &Bound<'py, PyAny>,
    warm_start: Warm<'py>,
    backend: &str,
    reg_m: Option<(f64, f64)>,
) -> PyResult<Py<PyAny>> {
    let cg = CgParams::default();
    sinkhorn_entry(
        py,
        Want::Coupling,
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

/// An [`OtGradientsOutput`]: exact gradients of `⟨P_b, C_b⟩` (dense costs).
#[pyfunction]
#[pyo3(signature = (mu, nu, cost, params, warm_start=None, cg_tol=None, cg_max_iters=1000, backend="cpu"))]
#[allow(clippy::too_many_arguments)]
fn wasserstein_gradients<'py>(
    py: Python<'py>,
    mu: &Bound<'py, PyAny>,
    nu: &Bound<'py, PyAny>,
    cost: &Bound<'py, PyAny>,
    params: &Bound<'py, PyAny>,
    warm_start: Warm<'py>,
    cg_tol: Option<f64>,
    cg_max_iters: usize,
    backend: &str,
) -> PyResult<Py<PyAny>> {
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

/// A [`PlanGradientsOutput`]: exact gradients of a loss `L(P)` of the plans `plan` (B×n×m)
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
) -> PyResult<Py<PlanGradientsOutput>> {
    let dev = device(py, backend)?;
    let cpu = dev.is_cpu();
    let cg = cg_params(cg_tol, cg_max_iters);
    by_dtype!(plan, "plan", T => {
        let plan: PyReadonlyArray3<'py, T> = plan.extract()?;
        let upstream: PyReadonlyArray3<'py, T> = upstream.extract()?;
        let (p, g) = (plan.as_array(), upstream.as_array());
        let out = by_backend!(&dev, be => {
            let solver = SinkhornSolver::new(be, SinkhornParams::new(eps));
            compute(py, cpu, || solver.plan_gradients(p, g, &cg)).py()?
        });
        let out = PlanGradientsOutput {
            cg: cg_summary(py, &out.cg.summary())?,
            cost: array(py, out.cost),
            mu: array(py, out.mu),
            nu: array(py, out.nu),
        };
        Py::new(py, out)
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(solve, m)?)?;
    m.add_function(wrap_pyfunction!(wasserstein, m)?)?;
    m.add_function(wrap_pyfunction!(coupling, m)?)?;
    m.add_function(wrap_pyfunction!(wasserstein_gradients, m)?)?;
    m.add_function(wrap_pyfunction!(plan_gradients, m)?)?;
    Ok(())
}
