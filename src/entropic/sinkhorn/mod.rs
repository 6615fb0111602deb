//! Log-domain Sinkhorn: the solver loop, its parameters and its result.
//!
//! With `f = ε log u`, `g = ε log v`, the plan is `P = exp((f ⊕ g − C)/ε)` and each
//! iteration is two half-steps (POT's `sinkhorn_log` order, columns first):
//!
//! `g_j ← ε log ν_j − ε LSE_i((f_i − C_ij)/ε)`, then `f_i ← ε log μ_i − ε LSE_j((g_j − C_ij)/ε)`.
//!
//! After the `f` update the rows of `P` sum to `μ`; the marginal error is the column
//! violation `‖Pᵀ1 − ν‖₁`. It falls out of the next `g` update for free
//! (`(Pᵀ1)_j = ν_j exp((g_j − g'_j)/ε)`), so checking costs nothing but a read-back of
//! `B` numbers every `check_every` iterations.
//!
//! * `params`: the parameters ([`SinkhornParams`], [`EpsScaling`], [`WarmStart`]);
//! * `problem`: a batch of problems ([`Problem`], [`BufferProblem`] on a backend's buffers)
//!   and the cost offsets its checks compute;
//! * `solver`: [`SinkhornSolver`] and its loop; `iteration`: the steps of one stage of it;
//! * `prepared`: a batch put on a backend once and solved many times ([`PreparedProblem`]);
//! * `newton`: Newton's method on the dual, the finish of a solve Sinkhorn cannot end;
//! * `report`: what a solve reports ([`SinkhornResult`], [`Convergence`]) and the plans'
//!   measured errors.

mod iteration;
mod newton;
mod params;
mod prepared;
mod problem;
mod report;
mod solver;

pub use params::{EpsScaling, SinkhornParams, WarmStart};
pub use prepared::PreparedProblem;
pub(crate) use prepared::{DeviceStart, Solution};
pub(crate) use problem::{unbalanced, BufferCost};
pub use problem::{BufferProblem, Problem, ProblemInput};
pub use report::{Convergence, CouplingResult, ProblemReport, SinkhornResult};
pub(crate) use solver::check_coupling_peak;
pub use solver::SinkhornSolver;

pub(crate) use iteration::relax_side;
pub(crate) use newton::newton_finish;
