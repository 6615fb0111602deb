//! Gradients: exact OT gradients by implicit differentiation, envelope gradients, the
//! bistochastic projection of small matrices with its backward, the batched matrix-free CG
//! solver they share, and a public finite-difference gradient checker.
//!
//! * [`cg`]: batched conjugate gradients over a backend, per-problem convergence, null
//!   space handled by projection.
//! * [`ot`]: `∂L/∂C`, `∂L/∂μ`, `∂L/∂ν` for any loss `L(P)` of Sinkhorn plans
//!   ([`Solver::implicit_gradients`](crate::Solver::implicit_gradients),
//!   [`plan_gradients`]), the exact gradient of the transport cost `⟨P,C⟩`
//!   ([`Solver::wasserstein_gradients`](crate::Solver::wasserstein_gradients)), and the
//!   envelope gradients of the regularised objective
//!   ([`Solver::envelope_gradients`](crate::Solver::envelope_gradients)).
//! * [`bistochastic`](mod@bistochastic): `R = SinkhornKnopp(exp(X))` for batches of `n×n` matrices and
//!   `∂L/∂X`.
//! * [`finite_diff`]: [`check_gradient`], used by the tests of every gradient in the crate.

pub mod bistochastic;
pub mod cg;
pub mod finite_diff;
pub mod ot;

pub use bistochastic::{
    bistochastic, bistochastic_backward, Bistochastic, BistochasticGradient, BistochasticParams,
    BistochasticResult,
};
pub use cg::{
    conjugate_gradient, BackendSpace, CgOperator, CgOutcome, CgParams, CgReport, CgSpace, CgSummary,
};
pub use finite_diff::{check_gradient, numerical_gradient, GradCheckOptions, GradCheckReport};
pub use ot::{
    implicit_adjoint, plan_gradients, plan_gradients_into, plan_gradients_on, Adjoint,
    EnvelopeGradients, GradientBuffers, OtGradients, PlanGradients,
};
