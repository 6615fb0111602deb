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
pub mod one_d;
pub mod sliced;
mod sort;
pub use one_d::{
    emd2_1d, emd_1d, wasserstein_1d, wasserstein_1d_batch, wasserstein_1d_grad, Wasserstein1dGrad,
};
pub use sliced::{
    max_sliced_wasserstein_distance, max_sliced_wasserstein_grad, sliced_wasserstein_batch,
    sliced_wasserstein_distance, sliced_wasserstein_grad, sliced_wasserstein_grad_batch, MaxSliced,
    MaxSlicedSearch, Projections, Sliced, SlicedGrad,
};
