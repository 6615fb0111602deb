//! Entropic optimal transport, the algorithm family of the crate, written once over the
//! [`Backend`](crate::Backend) trait:
//!
//! * [`sinkhorn`]: the log-domain Sinkhorn solver (parameters, problems, the loop, reports,
//!   batches prepared on a backend);
//! * [`unbalanced`]: the KL-relaxed marginals;
//! * [`pointcloud`]: point clouds with the cost computed on the fly, the gradients with
//!   respect to the points (`point_gradients`) and the Sinkhorn divergence (`divergence`);
//! * [`barycenter`]: fixed-support and grid barycenters, balanced and unbalanced;
//! * [`gradients`]: exact gradients by implicit differentiation, and envelope gradients;
//! * `dual_system`: the linear system of the dual's Hessian at a plan, solved by CG (the
//!   gradients' adjoint solve and the Newton finish of Sinkhorn);
//! * [`bistochastic`]: the bistochastic projection of batches of small matrices and its
//!   backward;
//! * `outputs`: the one path for batches on a backend, [`SinkhornSolver::solve_prepared`](crate::SinkhornSolver::solve_prepared)
//!   and the buffers it writes ([`BufferOutputs`](crate::BufferOutputs)).
//!
//! The public paths are the crate root's (`logot::sinkhorn`, `logot::grad::ot`, …).

pub mod barycenter;
pub mod bistochastic;
mod divergence;
pub(crate) mod dual_system;
pub mod gradients;
pub(crate) mod outputs;
mod point_gradients;
pub mod pointcloud;
pub mod sinkhorn;
pub mod unbalanced;
