//! Gradients: exact OT gradients by implicit differentiation, envelope gradients, the
//! bistochastic projection of small matrices with its backward, the batched matrix-free CG
//! solver they share, and a public finite-difference gradient checker.
//!
//! * [`cg`]: batched conjugate gradients over a backend, per-problem convergence, null
//!   space handled by projection.
//! * [`ot`]: `∂L/∂C`, `∂L/∂μ`, `∂L/∂ν` for any loss `L(P)` of Sinkhorn plans
//!   ([`SinkhornSolver::implicit_gradients`](crate::SinkhornSolver::implicit_gradients)
//!   from a problem, [`SinkhornSolver::plan_gradients`](crate::SinkhornSolver::plan_gradients)
//!   from a plan), the exact gradient of the transport cost `⟨P,C⟩`
//!   ([`SinkhornSolver::wasserstein_gradients`](crate::SinkhornSolver::wasserstein_gradients)),
//!   and the envelope gradients of the regularised objective
//!   ([`SinkhornSolver::envelope_gradients`](crate::SinkhornSolver::envelope_gradients)).
//! * [`bistochastic`](mod@bistochastic): `R = SinkhornKnopp(exp(X))` for batches of `n×n` matrices and
//!   `∂L/∂X`.
//! * [`finite_diff`]: [`check_gradient`], used by the tests of every gradient in the crate.
//!
//! The gradients are algorithms of the entropic family and live with it (`src/entropic/`:
//! `gradients/`, `bistochastic.rs`); the CG is in `src/cg.rs`, below the backends, with its
//! vectors on a backend's buffers in `src/backend/grad.rs`. This module is their public face
//! and the home of the finite-difference checker.

pub use crate::entropic::bistochastic;
pub use crate::entropic::gradients as ot;
pub mod finite_diff;

/// Batched, matrix-free conjugate gradients for symmetric positive semi-definite systems
/// (`src/cg.rs`), and [`BackendSpace`]: its vectors on a backend's buffers.
///
/// Solves `A_b x_b = r_b` for every problem `b` of a batch at once; each problem has its
/// own step sizes and stops on its own when `‖r_b − A_b x_b‖ ≤ tol·‖r_b‖`. `A` is only
/// applied ([`CgOperator`]), never formed. A known null vector `w` (for the OT adjoint
/// systems, the constant vector: potentials are defined up to `(+k, −k)`) is handled by
/// projection — the right-hand side and every residual are made orthogonal to `w`, and
/// the solution returned is the representative with `⟨x_b, w_b⟩ = 0` — never by adding a
/// ridge.
pub mod cg {
    pub use crate::backend::grad::BackendSpace;
    pub use crate::cg::{
        conjugate_gradient, CgOperator, CgOutcome, CgParams, CgReport, CgSpace, CgSummary,
    };
}

pub use bistochastic::{
    bistochastic, bistochastic_backward, BistochasticGradients, BistochasticParams,
    BistochasticResult, BistochasticSolver,
};
pub use cg::{
    conjugate_gradient, BackendSpace, CgOperator, CgOutcome, CgParams, CgReport, CgSpace, CgSummary,
};
pub use finite_diff::{check_gradient, numerical_gradient, GradCheckParams, GradCheckReport};
pub use ot::{EnvelopeGradients, GradientBuffers, OtGradients, PlanGradients};
