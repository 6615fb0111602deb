//! Exact optimal transport (POT's `ot.emd`, `emd2`, `emd_1d`, `emd2_1d`,
//! `wasserstein_1d`, `sliced_wasserstein_distance`, `max_sliced_wasserstein_distance`).

mod assignment;
mod certificate;
mod costs;
mod emd;
mod network_simplex;
mod params;
mod result;

pub use certificate::Certificate;
pub use costs::Metric;
pub use emd::{emd, emd_batch, emd_points, emd_points_batch};
pub use params::{EmdMethod, EmdParams};
pub use result::{EmdResult, ExactMethod, SparsePlan};
