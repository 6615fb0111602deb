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
//! use logot::ndarray::{array, Array2};
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
//! **One spelling per operation.** A free function makes the common call on the CPU with
//! default parameters ([`wasserstein`], [`coupling`], [`wasserstein_unbalanced`],
//! [`wasserstein_gradients`], [`sinkhorn_divergence`], [`barycenter()`],
//! [`grid_barycenter`], [`bistochastic()`]); a solver gives control — the backend and the
//! parameters ([`SinkhornSolver`] with [`SinkhornParams`], [`BarycenterSolver`],
//! [`BistochasticSolver`]). A [`Problem`] is one problem or a batch, against a dense cost,
//! a [`GridCost`] or a [`PointCloudCost`], and carries the marginal relaxation of unbalanced
//! OT ([`Problem::relaxed`]); ε is the solver's ([`SinkhornParams`]). Batches reused many
//! times or held in a backend's buffers (GPU memory, without a copy) take one path:
//! [`SinkhornSolver::prepare`] and [`SinkhornSolver::solve_prepared`], which writes what
//! [`BufferOutputs`] asks for. Parameters and results are `#[non_exhaustive]`: parameters are
//! set by builder methods (`SinkhornParams::new(eps).max_iters(500).tol(1e-9)`).
//!
//! Wasserstein barycenters (POT's `ot.bregman.barycenter` and
//! `convolutional_barycenter2d`, log domain): [`barycenter()`], [`grid_barycenter`] and
//! [`BarycenterSolver`]; costs on regular grids that are never stored: [`GridCost`].
//! PNG plots: `logot::plot` (feature `plot`, on by default).
//! Point clouds with the cost computed on the fly, never stored ([`PointCloudCost`]):
//! gradients with respect to the points ([`SinkhornSolver::point_gradients`]) and the
//! debiased Sinkhorn divergence ([`sinkhorn_divergence`]); see [`pointcloud`](mod@pointcloud).
//! Gradients ([`grad`]): exact gradients of `⟨P, C⟩` or of any loss of the plan by implicit
//! differentiation ([`wasserstein_gradients`], [`SinkhornSolver::wasserstein_gradients`],
//! [`SinkhornSolver::implicit_gradients`]), envelope gradients of the regularised objective
//! ([`SinkhornSolver::envelope_gradients`]), the bistochastic projection of batches of small
//! matrices with its backward ([`bistochastic()`], [`bistochastic_backward`]), and the
//! finite-difference checker the tests use ([`check_gradient`]).

#![warn(missing_docs)]

/// The `ndarray` crate logot is built with (0.17): the array types of every signature.
///
/// Use it instead of a separate `ndarray` dependency (`use logot::ndarray::{array, Array2};`),
/// or depend on the same version; arrays of another `ndarray` version are different types,
/// and the compiler reports "multiple different versions of crate `ndarray`".
pub use ndarray;

// The layers, bottom up: errors, numbers and input checks; the costs a user builds
// (`cost`); the batched conjugate gradients the backends share (`cg`); the backends and
// their kernel traits (`backend`); the algorithm families (`entropic`, then `linalg`, whose
// alignment solves transport problems); the gradient toolkit's public face (`grad`); plots.
mod alloc;
pub mod backend;
mod batch;
mod cg;
mod cost;
mod entropic;
mod error;
pub mod exact;
pub mod grad;
pub mod gromov;
pub mod linalg;
pub mod progress;
mod real;
mod validate;
/// Every input check of the library and the command line (docs/input-checks.md).
#[doc = include_str!("../docs/input-checks.md")]
pub mod input_checks {}
#[cfg(feature = "plot")]
pub mod plot;
#[cfg(test)]
mod test_rng;

pub use entropic::{barycenter, pointcloud, sinkhorn, unbalanced};

#[cfg(feature = "cuda")]
pub use backend::cuda::{CudaBackend, CudaCluster};
pub use backend::{
    bistochastic::BistochasticKernels, cluster::Cluster, cpu::CpuBackend, grad::GradKernels,
    linalg::LinalgKernels, Backend, BarycenterKernels, PointCloudKernels, Side,
};
pub use batch::IntoBatch;
pub use cost::{CloudLayout, CostSource, CrossPrecision, GridCost, PointCloudCost, PointMetric};
pub use entropic::barycenter::{
    barycenter, grid_barycenter, BarycenterCost, BarycenterParams, BarycenterProblem,
    BarycenterResult, BarycenterSolver, PreparedCost,
};
pub use entropic::outputs::{BufferOutputs, BufferResult};
pub use entropic::pointcloud::{
    sinkhorn_divergence, DivergenceBufferResult, DivergenceConvention, DivergenceResult,
    PointGradients, PointTransportGradients, PreparedDivergence,
};
pub use entropic::sinkhorn::{
    BufferProblem, Convergence, CouplingResult, EpsScaling, PreparedProblem, Problem, ProblemInput,
    ProblemReport, SinkhornParams, SinkhornResult, SinkhornSolver, WarmStart,
};
pub use entropic::unbalanced::{Relaxation, RelaxedSide};
pub use error::{Error, Result};
pub use grad::{
    bistochastic, bistochastic_backward, check_gradient, BistochasticParams, BistochasticSolver,
    CgParams, GradCheckParams, OtGradients,
};
pub use progress::{HistoryEntry, Observer, Progress};
pub use real::Real;

use ndarray::Ix2;

/// Entropic transport cost `⟨P, C⟩` (POT's `sinkhorn2`) between `mu` and `nu` for the cost
/// `cost` at regularisation `eps`, on the CPU with default [`SinkhornParams`]: one problem
/// (`mu`: n, `nu`: m) or a batch (`B×n`, `B×m`), against a dense cost (`n×m`, or `B×n×m`),
/// a [`GridCost`] or a [`PointCloudCost`] ([`Problem::new`]).
///
/// The result also carries the potentials and whether the solver converged; check
/// `result.convergence.converged` (non-convergence is reported, not an error).
///
/// ```
/// use logot::ndarray::{array, Array2};
/// use logot::PointCloudCost;
/// // Two Diracs at 0 and 1 on the grid {0, 0.5, 1}: the exact cost is |0 − 1|² = 1.
/// let x = [0.0f64, 0.5, 1.0];
/// let cost = Array2::from_shape_fn((3, 3), |(i, j)| (x[i] - x[j]).powi(2));
/// let w = logot::wasserstein(array![1.0, 0.0, 0.0].view(), array![0.0, 0.0, 1.0].view(), cost.view(), 0.01)?;
/// assert!(w.convergence.converged && (w.distance[0] - 1.0).abs() < 1e-12);
/// // A batch: one source, three targets at distance 0, 1/2 and 1 (costs 0, 1/4, 1).
/// let mu = array![[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]];
/// let nu = array![[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
/// let w = logot::wasserstein(mu.view(), nu.view(), cost.view(), 0.01)?;
/// assert!(w.distance.iter().zip([0.0, 0.25, 1.0]).all(|(d, exact)| (d - exact).abs() < 1e-12));
/// // Weighted point clouds, the cost computed on the fly: every point moves by 0.5.
/// let (px, py, pw) = (array![[0.0f64], [1.0]], array![[0.5f64], [1.5]], array![0.5, 0.5]);
/// let r = logot::wasserstein(pw.view(), pw.view(), PointCloudCost::new(px.view(), py.view())?, 0.01)?;
/// assert!((r.distance[0] - 0.25).abs() < 1e-3);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein<'a, T: Real>(
    mu: impl IntoBatch<'a, T, Ix2>,
    nu: impl IntoBatch<'a, T, Ix2>,
    cost: impl Into<CostSource<'a, T>>,
    eps: T,
) -> Result<SinkhornResult<T>> {
    SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps.f64()))
        .solve(&Problem::new(mu, nu, cost)?)
}

/// Unbalanced entropic OT between `mu` and `nu`, masses possibly unequal:
/// `min_P ⟨P,C⟩ + ε·KL(P‖μ⊗ν) + ρ_μ·KL(P·1‖μ) + ρ_ν·KL(Pᵀ·1‖ν)`, POT's
/// `sinkhorn_unbalanced(mu, nu, cost, eps, reg_m, reg_type="kl")`; `reg_m` is a scalar `ρ`
/// or a pair `(ρ_μ, ρ_ν)` (`f64::INFINITY` keeps that marginal exact). The inputs are those
/// of [`wasserstein`]; on the CPU with default [`SinkhornParams`]; `distance` is `⟨P, C⟩`
/// and `objective` the whole objective ([`unbalanced`]). With a solver:
/// `Problem::new(mu, nu, cost)?.relaxed(reg_m)` ([`Problem::relaxed`]).
///
/// ```
/// use logot::ndarray::array;
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
pub fn wasserstein_unbalanced<'a, T: Real>(
    mu: impl IntoBatch<'a, T, Ix2>,
    nu: impl IntoBatch<'a, T, Ix2>,
    cost: impl Into<CostSource<'a, T>>,
    eps: T,
    reg_m: impl Into<Relaxation>,
) -> Result<SinkhornResult<T>> {
    SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps.f64()))
        .solve(&Problem::new(mu, nu, cost)?.relaxed(reg_m))
}

/// [`wasserstein`] with the exact gradients of `⟨P, C⟩` with respect to a dense cost, `mu`
/// (zero-mean representative) and `nu`, by implicit differentiation through the converged
/// plan ([`grad::ot`]); CPU, default [`SinkhornParams`] and [`CgParams`]. For point clouds,
/// the gradients with respect to the points: [`SinkhornSolver::transport_point_gradients`].
///
/// ```
/// use logot::ndarray::{array, Axis};
/// let (mu, nu) = (array![0.2f64, 0.3, 0.5], array![0.5, 0.5]);
/// let cost = array![[0.0, 1.0], [0.5, 0.5], [1.0, 0.0]];
/// let g = logot::wasserstein_gradients(mu.view(), nu.view(), cost.view(), 0.1)?;
/// assert!(g.result.convergence.converged && g.cg.all_converged());
/// // ∂⟨P,C⟩/∂C has the row sums of P: shifting a row of C does not move P.
/// assert!((g.cost.index_axis(Axis(0), 0).row(0).sum() - 0.2).abs() < 1e-8);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein_gradients<'a, T: Real>(
    mu: impl IntoBatch<'a, T, Ix2>,
    nu: impl IntoBatch<'a, T, Ix2>,
    cost: impl Into<CostSource<'a, T>>,
    eps: T,
) -> Result<OtGradients<T>> {
    SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps.f64()))
        .wasserstein_gradients(&Problem::new(mu, nu, cost)?, &CgParams::default())
}

/// The entropic plans between `mu` and `nu` (`B×n×m`; `1×n×m` for one problem), with their
/// potentials and convergence report, on the CPU with default [`SinkhornParams`]:
/// `P = exp((f ⊕ g − C)/ε)` with `P·1 = μ`, `Pᵀ·1 = ν`. The inputs are those of
/// [`wasserstein`].
///
/// ```
/// use logot::ndarray::{array, Axis};
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
pub fn coupling<'a, T: Real>(
    mu: impl IntoBatch<'a, T, Ix2>,
    nu: impl IntoBatch<'a, T, Ix2>,
    cost: impl Into<CostSource<'a, T>>,
    eps: T,
) -> Result<CouplingResult<T>> {
    SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps.f64()))
        .coupling(&Problem::new(mu, nu, cost)?)
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
