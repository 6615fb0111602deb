//! The bistochastic projection and its backward, batched 3-column SVDs, Newton–Schulz.

use crate::args::cg_params;
use crate::common::{compute, device, OrPyErr};
use crate::results::{
    array, cg_summary, convergence, BistochasticGradientOutput, BistochasticOutput, Svd3Output,
};
use logot::grad::{BistochasticParams, BistochasticSolver};
use logot::linalg::NewtonSchulzParams;
use ndarray::{ArrayView2, ArrayView3};
use numpy::{IntoPyArray, PyReadonlyArray2, PyReadonlyArray3};
use pyo3::prelude::*;

/// A [`BistochasticOutput`]: `R = SinkhornKnopp(exp(X))` for each matrix of `x` (B×n×n).
#[pyfunction]
#[pyo3(signature = (x, iters=20, tol=0.0, backend="cpu"))]
fn bistochastic<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    iters: usize,
    tol: f64,
    backend: &str,
) -> PyResult<Py<BistochasticOutput>> {
    let dev = device(py, backend)?;
    let cpu = dev.is_cpu();
    let params = BistochasticParams::default().iters(iters).tol(tol);
    by_dtype!(x, "x", T => {
        let x: PyReadonlyArray3<'py, T> = x.extract()?;
        let xv = x.as_array();
        let out = by_backend!(&dev, be => {
            let proj = BistochasticSolver::new(be, params);
            compute(py, cpu, || proj.forward(xv)).py()?
        });
        let convergence = convergence(py, &out.convergence)?;
        Py::new(py, BistochasticOutput { r: array(py, out.r), convergence })
    })
}

/// A [`BistochasticGradientOutput`]: `∂L/∂X` from `R` (B×n×n) and `g = ∂L/∂R`, by implicit differentiation.
#[pyfunction]
#[pyo3(signature = (r, g, cg_tol=None, cg_max_iters=1000, backend="cpu"))]
fn bistochastic_backward<'py>(
    py: Python<'py>,
    r: &Bound<'py, PyAny>,
    g: &Bound<'py, PyAny>,
    cg_tol: Option<f64>,
    cg_max_iters: usize,
    backend: &str,
) -> PyResult<Py<BistochasticGradientOutput>> {
    let dev = device(py, backend)?;
    let cpu = dev.is_cpu();
    let cg = cg_params(cg_tol, cg_max_iters);
    by_dtype!(r, "r", T => {
        let r: PyReadonlyArray3<'py, T> = r.extract()?;
        let g: PyReadonlyArray3<'py, T> = g.extract()?;
        let (rv, gv): (ArrayView3<'_, T>, ArrayView3<'_, T>) = (r.as_array(), g.as_array());
        let out = by_backend!(&dev, be => {
            let proj = BistochasticSolver::new(be, BistochasticParams::default());
            compute(py, cpu, || proj.backward(rv, gv, &cg)).py()?
        });
        let cg = cg_summary(py, &out.cg)?;
        Py::new(py, BistochasticGradientOutput { dx: array(py, out.dx), cg })
    })
}

/// An [`Svd3Output`]: thin SVDs of a batch of `M×3` matrices.
#[pyfunction]
#[pyo3(signature = (a, backend="cpu"))]
fn svd3<'py>(py: Python<'py>, a: &Bound<'py, PyAny>, backend: &str) -> PyResult<Py<Svd3Output>> {
    let dev = device(py, backend)?;
    let cpu = dev.is_cpu();
    by_dtype!(a, "a", T => {
        let a: PyReadonlyArray3<'py, T> = a.extract()?;
        let av = a.as_array();
        let out = by_backend!(&dev, be => {
            compute(py, cpu, || logot::linalg::svd3_batch(&be, av)).py()?
        });
        let out = Svd3Output { u: array(py, out.u), s: array(py, out.s), vt: array(py, out.vt) };
        Py::new(py, out)
    })
}

/// Newton–Schulz orthogonalisation of `x` (r×c): `steps` steps of
/// `X ← aX + b(XXᵀ)X + c(XXᵀ)²X` with `coefficients = (a, b, c)`, then `polish_steps`
/// cubic steps.
#[pyfunction]
#[pyo3(signature = (x, steps, coefficients, polish_steps, backend="cpu"))]
fn newton_schulz<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    steps: usize,
    coefficients: [f64; 3],
    polish_steps: usize,
    backend: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let dev = device(py, backend)?;
    let cpu = dev.is_cpu();
    let params = NewtonSchulzParams::default()
        .steps(steps)
        .coefficients(coefficients)
        .polish_steps(polish_steps);
    by_dtype!(x, "x", T => {
        let x: PyReadonlyArray2<'py, T> = x.extract()?;
        let xv: ArrayView2<'_, T> = x.as_array();
        let out = by_backend!(&dev, be => {
            compute(py, cpu, || logot::linalg::newton_schulz(&be, xv, &params)).py()?
        });
        Ok(out.into_pyarray(py).into_any())
    })
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bistochastic, m)?)?;
    m.add_function(wrap_pyfunction!(bistochastic_backward, m)?)?;
    m.add_function(wrap_pyfunction!(svd3, m)?)?;
    m.add_function(wrap_pyfunction!(newton_schulz, m)?)?;
    Ok(())
}
