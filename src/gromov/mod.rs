//! Gromov–Wasserstein (POT's `ot.gromov` conventions): for structure costs `C1` (`n×n`),
//! `C2` (`m×m`), weights `p`, `q`, an optional feature cost `M` (`n×m`) and `α ∈ [0, 1]`,
//!
//! `F(T) = (1 − α)·⟨M, T⟩ + α·Σ_ijkl L(C1_ik, C2_jl)·T_ij·T_kl`  over plans `T ∈ Π(p, q)`,
//!
//! with `L(a, b) = f1(a) + f2(b) − h1(a)·h2(b)` ([`GwLoss`]) so that
//! `L(C1, C2)⊗T = f1(C1)·p·1ᵀ + 1·qᵀ·f2(C2)ᵀ − h1(C1)·T·h2(C2)ᵀ` costs two matrix products
//! (Peyré, Cuturi & Solomon 2016). Entropic GW ([`GromovSolver`]) is POT's mirror descent
//! with log-domain Sinkhorn inner solves; exact GW ([`ConditionalGradient`]) is POT's
//! conditional gradient with the closed-form line search; point-cloud GW
//! ([`PointGromovSolver`]) runs the mirror descent for squared-Euclidean structures without
//! any `n×n`, `m×m` or `n×m` matrix.

pub mod conditional_gradient;
pub mod entropic;
pub mod gradients;
pub mod loss;
pub mod params;
pub mod pointcloud;
pub mod problem;

pub use conditional_gradient::{
    ConditionalGradient, ConditionalGradientReport, ExactGromov, LinearOtSolver, LinearPlan,
    NetworkSimplex,
};
pub use entropic::{EntropicGromov, GromovReport, GromovSolver};
pub use gradients::{envelope_gradients, GromovGradients};
pub use loss::objective;
pub use params::{ConditionalGradientParams, EntropicGwParams, GwLoss, PointGwParams};
pub use pointcloud::{PointGromov, PointGromovProblem, PointGromovReport, PointGromovSolver};
pub use problem::GromovProblem;
