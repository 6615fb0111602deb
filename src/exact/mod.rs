//! Exact optimal transport, with POT's conventions: `ot.emd` / `emd2` ([`emd`],
//! [`emd_batch`], [`emd_points`], [`emd_points_batch`]), `emd_1d` / `emd2_1d` /
//! `wasserstein_1d` ([`one_d`]) and `sliced_wasserstein_distance` /
//! `max_sliced_wasserstein_distance` ([`sliced`]).
//!
//! # The linear program and its dual
//!
//! For histograms `μ ∈ ℝⁿ₊`, `ν ∈ ℝᵐ₊` of equal mass and a cost `C ∈ ℝⁿˣᵐ` (any sign,
//! ties allowed):
//!
//! `OT(μ, ν) = min ⟨P, C⟩  s.t.  P·1 = μ,  Pᵀ·1 = ν,  P ≥ 0`
//! `         = max ⟨μ, f⟩ + ⟨ν, g⟩  s.t.  f_i + g_j ≤ C_ij  for every (i, j).`
//!
//! A vertex of the primal polytope (a basic plan) has at most `n + m − 1` nonzero entries
//! forming a forest of the bipartite graph, so plans are returned as a sparse list
//! ([`SparsePlan`]; `plan.to_dense()` is POT's `emd`, [`EmdResult::cost`] is `emd2`). The
//! potentials `(f, g)` are a dual optimum: `f_i + g_j = C_ij` wherever `P_ij > 0`
//! (complementary slackness), and they are shifted as POT's `center_dual`
//! (`⟨μ, f⟩ = ⟨ν, g⟩`). They are the derivatives of `OT` in `μ` and `ν` where the dual is
//! unique.
//!
//! # The certificate
//!
//! Weak duality, `⟨P, C⟩ − ⟨μ, f⟩ − ⟨ν, g⟩ = Σ_ij P_ij (C_ij − f_i − g_j) + ⟨P·1 − μ, f⟩ +
//! ⟨Pᵀ·1 − ν, g⟩`, makes a plan and potentials proofs of each other's optimality: a plan
//! meeting its marginals, potentials violating no constraint and a zero duality gap
//! bound the optimum from both sides. Every result carries a [`Certificate`] measured on
//! what is handed back (not on the solver's state): the gap, the largest violation
//! `max(0, f_i + g_j − C_ij)` over every pair, the slack on the plan's support and the
//! marginal errors. [`EmdResult::exact`] says the solver reached optimality and the
//! certificate holds within [`EmdParams::certificate_tol`] (relative to the mass and the
//! largest |cost|). A solve stopped by an iteration or time limit is reported
//! (`converged = false`), never an error.
//!
//! # Algorithms
//!
//! * Network simplex ([`EmdMethod::NetworkSimplex`]): the primal simplex on the
//!   transportation graph with LEMON's block-search pivoting and strongly feasible trees
//!   (the algorithm of POT's `emd`), written for the dense bipartite case: arcs are pairs
//!   of indices, never stored, only the spanning tree is; pricing scans rows of
//!   `C_ij − g_j` with the CPU's vector instructions. Costs come from a matrix or from two
//!   point clouds, computed when read (no `n×m` storage for large clouds).
//! * Assignment ([`EmdMethod::Assignment`]): square problems whose weights are all equal
//!   are assignment problems (the optimal vertices are permutations); Jonker and
//!   Volgenant's shortest augmenting paths solve them with the same certificate.
//!   [`EmdMethod::Auto`] uses it for point clouds of dimension 8 and more.
//! * On the line ([`one_d`]): the monotone (sorted) plan is optimal for convex costs
//!   `|x − y|^p`, `p ≥ 1`; a sort and a merge of the cumulative weights,
//!   `O((n + m) log(n + m))`, with potentials along the staircase.
//! * Sliced ([`sliced`]): `SW_p(μ, ν) = ((1/L) Σ_l W_p^p(θ_l#μ, θ_l#ν))^{1/p}` over unit
//!   directions `θ_l` (given, or drawn from a seed as POT draws them), each projected
//!   problem solved on the line; max-sliced takes the largest; gradients with respect to
//!   the points for training losses.
//!
//! # Input conventions
//!
//! Weights are checked like the rest of logot (finite, non-negative, positive total; the
//! error names `mu` or `nu`); the totals must agree within [`crate::Real::MASS_TOL`]
//! relative (1e-6 in `f64`, 1e-4 in `f32`), then `nu` is scaled to the mass of `mu` as POT
//! does. Zero-mass bins take no part in the solve; their potentials are the largest
//! feasible values (c-transforms). Everything is computed in `f64`.
//!
//! # Examples
//!
//! ```
//! use logot::exact::{emd, EmdParams};
//! use ndarray::array;
//! // Three sources, two targets, integer costs with ties.
//! let cost = array![[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]];
//! let mu = array![0.25, 0.5, 0.25];
//! let nu = array![0.5, 0.5];
//! let r = emd(mu.view(), nu.view(), cost.view(), &EmdParams::default())?;
//! assert!(r.exact);
//! assert!((r.cost - 0.5).abs() < 1e-15); // the middle source pays 1 whichever way it goes
//! // The certificate: a plan meeting its marginals, feasible duals, no gap.
//! let c = &r.certificate;
//! assert!(c.duality_gap < 1e-15 && c.max_violation < 1e-15);
//! assert!(c.marginal_error_a < 1e-15 && c.marginal_error_b < 1e-15);
//! # Ok::<(), logot::Error>(())
//! ```

mod assignment;
mod certificate;
mod costs;
mod device;
mod emd;
#[cfg(feature = "cuda")]
mod gpu;
#[cfg(feature = "cuda")]
mod gpu_sliced;
#[cfg(feature = "cuda")]
pub use gpu_sliced::Wasserstein1dGradBatch;
mod network_simplex;
mod params;
mod result;

pub use certificate::Certificate;
pub use costs::Metric;
pub use device::{auction_refusal, AUCTION_MAX_N};
pub use emd::{emd, emd_batch, emd_points, emd_points_batch};
pub use params::{EmdMethod, EmdParams};
pub use result::{EmdResult, ExactMethod, SparsePlan};
pub mod max_sliced;
pub mod one_d;
pub mod sliced;
mod sort;
pub use max_sliced::{
    max_sliced_wasserstein_distance, max_sliced_wasserstein_grad, MaxSliced, MaxSlicedSearch,
};
pub use one_d::{
    emd2_1d, emd_1d, wasserstein_1d, wasserstein_1d_batch, wasserstein_1d_grad, Wasserstein1dGrad,
};
pub use sliced::{
    sliced_wasserstein_batch, sliced_wasserstein_distance, sliced_wasserstein_grad,
    sliced_wasserstein_grad_batch, Projections, Sliced, SlicedGrad,
};
