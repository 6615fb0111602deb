//! Gromov–Wasserstein (placeholder docs, completed below).

pub mod conditional_gradient;
pub mod entropic;
pub mod gradients;
pub mod loss;
pub mod params;
pub mod pointcloud;
pub mod problem;

pub use conditional_gradient::{
    ConditionalGradient, ConditionalGradientReport, ExactGromov, LinearOtSolver, LinearPlan,
};
pub use entropic::{EntropicGromov, GromovReport, GromovSolver};
pub use gradients::{envelope_gradients, GromovGradients};
pub use loss::objective;
pub use params::{ConditionalGradientParams, EntropicGwParams, GwLoss, PointGwParams};
pub use pointcloud::{PointGromov, PointGromovProblem, PointGromovReport, PointGromovSolver};
pub use problem::GromovProblem;
