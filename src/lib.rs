//! # logot — entropic optimal transport in the log domain
//!
//! Sinkhorn distances, couplings and batched solvers that stay finite in `f32` down to
//! small ε, on the CPU (ndarray + rayon) and, with the `cuda` feature, on NVIDIA GPUs,
//! through one [`Backend`] trait. Conventions follow POT so results can be compared:
//!
//! * plan `P = diag(u)·exp(−C/ε)·diag(v)` with `P·1 = μ`, `Pᵀ·1 = ν`;
//! * potentials `f = ε log u`, `g = ε log v`;
//! * the "distance" is the transport cost `⟨P, C⟩` (POT's `sinkhorn2`).
//!
//! ```
//! use ndarray::{array, Array2};
//! let x = [0.0f64, 0.5, 1.0];
//! let cost = Array2::from_shape_fn((3, 3), |(i, j)| (x[i] - x[j]) * (x[i] - x[j]));
//! let mu = array![0.5, 0.5, 0.0];
//! let nu = array![0.0, 0.5, 0.5];
//! let w = logot::wasserstein(mu.view(), nu.view(), cost.view(), 0.1)?;
//! assert!(w.convergence.converged);
//! // The exact transport cost is 0.25 (all mass moves by 0.5); the entropic plan spreads
//! // mass, so its cost is a little above.
//! assert!(w.distance[0] > 0.25 && w.distance[0] < 0.27);
//! # Ok::<(), logot::Error>(())
//! ```
//!
//! For a batch, or to choose the backend and the parameters, use [`Solver`] with a
//! [`Problem`]; see [`SinkhornParams`] for tolerances, ε-scaling and warm starts.
//!
//! Wasserstein barycenters (POT's `ot.bregman.barycenter` and
//! `convolutional_barycenter2d`, log domain): [`barycenter()`], [`grid_barycenter`] and
//! [`BarycenterSolver`]; costs on regular grids that are never stored: [`GridCost`].
//! PNG plots: `logot::plot` (feature `plot`, on by default).
//! Point clouds with the cost computed on the fly, never stored ([`PointCloudCost`]):
//! [`wasserstein_points`], gradients with respect to the points
//! ([`Solver::point_gradients`]) and the debiased Sinkhorn divergence
//! ([`sinkhorn_divergence`]); see [`pointcloud`](mod@pointcloud).
//! Gradients ([`grad`]): exact gradients of `⟨P, C⟩` or of any loss of the plan by implicit
//! differentiation ([`wasserstein_gradients`], [`Solver::wasserstein_gradients`],
//! [`Solver::implicit_gradients`]), envelope gradients of the regularised objective
//! ([`Solver::envelope_gradients`]), the bistochastic projection of batches of small
//! matrices with its backward ([`bistochastic()`], [`bistochastic_backward`]), and the
//! finite-difference checker the tests use ([`check_gradient`]).

/// The `ndarray` crate logot is built with (0.17): the array types of every signature.
///
/// Use it instead of a separate `ndarray` dependency (`use logot::ndarray::{array, Array2};`),
/// or depend on the same version; arrays of another `ndarray` version are different types,
/// and the compiler reports "multiple different versions of crate `ndarray`".
pub use ndarray;

pub mod backend;
pub mod barycenter;
mod cg;
mod error;
pub mod grad;
pub mod gromov;
/// Every input check of the library and the command line (docs/input-checks.md).
#[doc = include_str!("../docs/input-checks.md")]
pub mod input_checks {}
pub mod linalg;
#[cfg(feature = "plot")]
pub mod plot;
pub mod pointcloud;
pub mod problems;
pub mod progress;
mod real;
pub mod sinkhorn;
#[cfg(test)]
mod test_rng;
pub mod unbalanced;
mod validate;

#[cfg(feature = "cuda")]
pub use backend::cuda::{CudaBackend, CudaCluster};
pub use backend::{
    bistochastic::BistochasticKernels, cluster::Cluster, cpu::CpuBackend, grad::GradKernels,
    linalg::LinalgKernels, Backend, BarycenterKernels, CloudLayout, CostSource, CrossPrecision,
    GridCost, PointCloudCost, PointCloudKernels, PointMetric, Side,
};
pub use barycenter::{
    barycenter, barycenter_batch, grid_barycenter, grid_barycenter_on, Barycenter,
    BarycenterParams, BarycenterSolver, PreparedCost,
};
pub use error::{Error, Result};
pub use grad::{
    bistochastic, bistochastic_backward, check_gradient, BistochasticParams, CgParams,
    GradCheckOptions, OtGradients,
};
pub use pointcloud::{
    sinkhorn_divergence, wasserstein_points, DivergenceBufferSolution, DivergenceConvention,
    PointBufferSolution, PointGradients, PointTransportGradients, PreparedDivergence,
    SinkhornDivergence,
};
pub use progress::{HistoryEntry, Observer, Progress};
pub use real::Real;
pub use sinkhorn::{
    BufferSolution, Convergence, Coupling, EpsScaling, Prepared, Problem, ProblemReport,
    SinkhornParams, SinkhornResult, Solver, WarmStart,
};
pub use unbalanced::{Relaxation, RelaxedSide};

use ndarray::{ArrayView1, ArrayView2};

/// Entropic transport cost `⟨P, C⟩` between `mu` (n) and `nu` (m) for the cost `cost`
/// (n×m) at regularisation `eps`, on the CPU with default [`SinkhornParams`].
///
/// The result also carries the potentials and whether the solver converged; check
/// `result.convergence.converged` (non-convergence is reported, not an error).
///
/// ```
/// use ndarray::{array, Array2};
/// // Two Diracs at 0 and 1 on the grid {0, 0.5, 1}: the exact cost is |0 − 1|² = 1.
/// let x = [0.0f64, 0.5, 1.0];
/// let cost = Array2::from_shape_fn((3, 3), |(i, j)| (x[i] - x[j]).powi(2));
/// let w = logot::wasserstein(array![1.0, 0.0, 0.0].view(), array![0.0, 0.0, 1.0].view(), cost.view(), 0.01)?;
/// assert!(w.convergence.converged && (w.distance[0] - 1.0).abs() < 1e-12);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein<T: Real>(
    mu: ArrayView1<'_, T>,
    nu: ArrayView1<'_, T>,
    cost: ArrayView2<'_, T>,
    eps: T,
) -> Result<SinkhornResult<T>> {
    Solver::new(CpuBackend, SinkhornParams::new(eps.f64())).solve(&Problem::new(mu, nu, cost)?)
}

/// Unbalanced entropic OT between `mu` (n) and `nu` (m), masses possibly unequal:
/// `min_P ⟨P,C⟩ + ε·KL(P‖μ⊗ν) + ρ_μ·KL(P·1‖μ) + ρ_ν·KL(Pᵀ·1‖ν)`, POT's
/// `sinkhorn_unbalanced(mu, nu, cost, eps, reg_m, reg_type="kl")`; `reg_m` is a scalar `ρ`
/// or a pair `(ρ_μ, ρ_ν)` (`f64::INFINITY` keeps that marginal exact). On the CPU with
/// default [`SinkhornParams`]; `distance` is `⟨P, C⟩` and `objective` the whole objective
/// ([`unbalanced`]).
///
/// ```
/// use ndarray::array;
/// // Mass 2 against mass 1 at zero cost, ρ = 1 on both sides: the plan carries
/// // Σμ·Σν·t with log t = −(ρ log Σν + ρ log Σμ)/(ε + 2ρ), i.e. 2^(1 − 1/(2 + ε)).
/// let cost = array![[0.0f64]];
/// let eps = 0.5;
/// let r = logot::wasserstein_unbalanced(array![2.0].view(), array![1.0].view(), cost.view(), eps, 1.0)?;
/// assert!(r.convergence.converged && r.distance[0] == 0.0);
/// let mass = ((r.f[[0, 0]] + r.g[[0, 0]]) / eps).exp(); // P = exp((f + g − C)/ε)
/// assert!((mass - 2f64.powf(1.0 - 1.0 / 2.5)).abs() < 1e-8);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein_unbalanced<T: Real>(
    mu: ArrayView1<'_, T>,
    nu: ArrayView1<'_, T>,
    cost: ArrayView2<'_, T>,
    eps: T,
    reg_m: impl Into<Relaxation>,
) -> Result<SinkhornResult<T>> {
    let params = SinkhornParams::new(eps.f64()).with_relaxation(reg_m.into());
    Solver::new(CpuBackend, params).solve(&Problem::new(mu, nu, cost)?)
}

/// [`wasserstein`] with the exact gradients of `⟨P, C⟩` with respect to the cost, `mu`
/// (zero-mean representative) and `nu`, by implicit differentiation through the converged
/// plan ([`grad::ot`]); CPU, default [`SinkhornParams`] and [`CgParams`].
///
/// ```
/// use ndarray::array;
/// let (mu, nu) = (array![0.2f64, 0.3, 0.5], array![0.5, 0.5]);
/// let cost = array![[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]];
/// let g = logot::wasserstein_gradients(mu.view(), nu.view(), cost.view(), 0.1)?;
/// assert!(g.result.convergence.converged && g.cg.all_converged());
/// // ∂⟨P,C⟩/∂C has the row sums of P: shifting a row of C does not move P.
/// assert!((g.cost.index_axis(ndarray::Axis(0), 0).row(0).sum() - 0.2).abs() < 1e-8);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein_gradients<T: Real>(
    mu: ArrayView1<'_, T>,
    nu: ArrayView1<'_, T>,
    cost: ArrayView2<'_, T>,
    eps: T,
) -> Result<OtGradients<T>> {
    Solver::new(CpuBackend, SinkhornParams::new(eps.f64()))
        .wasserstein_gradients(&Problem::new(mu, nu, cost)?, &CgParams::default())
}

/// Batched [`wasserstein`]: `mu` (B×n), `nu` (B×m) against one cost (n×m) or one per
/// problem (`B×n×m`, pass an `ArrayView3`).
///
/// ```
/// use ndarray::{array, Array2};
/// // One source, three targets: Diracs at distance 0, 1/2 and 1 (costs 0, 1/4, 1).
/// let x = [0.0f64, 0.5, 1.0];
/// let cost = Array2::from_shape_fn((3, 3), |(i, j)| (x[i] - x[j]).powi(2));
/// let mu = array![[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]];
/// let nu = array![[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
/// let w = logot::wasserstein_batch(mu.view(), nu.view(), cost.view(), 0.01)?;
/// for (d, exact) in w.distance.iter().zip([0.0, 0.25, 1.0]) {
///     assert!((d - exact).abs() < 1e-12);
/// }
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein_batch<'a, T: Real>(
    mu: ArrayView2<'a, T>,
    nu: ArrayView2<'a, T>,
    cost: impl Into<CostSource<'a, T>>,
    eps: T,
) -> Result<SinkhornResult<T>> {
    Solver::new(CpuBackend, SinkhornParams::new(eps.f64())).solve(&Problem::batch(mu, nu, cost)?)
}

/// The entropic plan between `mu` and `nu` (as a `1×n×m` batch), with its potentials and
/// convergence report, on the CPU with default [`SinkhornParams`]:
/// `P = exp((f ⊕ g − C)/ε)` with `P·1 = μ`, `Pᵀ·1 = ν`.
///
/// ```
/// use ndarray::{array, Axis};
/// let (mu, nu) = (array![0.5f64, 0.5], array![0.5, 0.5]);
/// let cost = array![[0.0, 1.0], [1.0, 0.0]];
/// let c = logot::coupling(mu.view(), nu.view(), cost.view(), 0.1)?;
/// let plan = c.plan.index_axis(Axis(0), 0);
/// // Marginals hold; the entropic plan keeps a little mass off the diagonal: e^{−1/ε}/(1 + e^{−1/ε}).
/// assert!((plan.sum_axis(Axis(0)) - &nu).iter().all(|e| e.abs() < 1e-9));
/// let off = 0.5 * (-10f64).exp() / (1.0 + (-10f64).exp());
/// assert!((plan[[0, 1]] - off).abs() < 1e-9);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn coupling<T: Real>(
    mu: ArrayView1<'_, T>,
    nu: ArrayView1<'_, T>,
    cost: ArrayView2<'_, T>,
    eps: T,
) -> Result<Coupling<T>> {
    Solver::new(CpuBackend, SinkhornParams::new(eps.f64())).coupling(&Problem::new(mu, nu, cost)?)
}

/// The README's examples, compiled and run as doctests (complete programs, no hidden lines).
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The README's example that needs the `cuda` feature (fenced `rust ignore` there), with the
/// hidden lines that compile it only with the feature; tests/readme.rs keeps the two equal.
#[doc = include_str!("../docs/readme-doctests.md")]
#[cfg(doctest)]
pub struct ReadmeFeatureDoctests;
