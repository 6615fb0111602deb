//! The CUDA operations, each a set of `CudaBackend` methods over the runtime (`runtime/`):
//! prepared costs, the half-steps and reports of each cost kind, the buffer operations, the
//! [`Backend`](crate::Backend) impl and the other kernel traits.

pub(in crate::backend::cuda) mod assignment;
pub(in crate::backend::cuda) mod barycenter;
pub(in crate::backend::cuda) mod bistochastic;
pub(in crate::backend::cuda) mod buffers;
pub(in crate::backend::cuda) mod cost;
pub(in crate::backend::cuda) mod dense;
pub(in crate::backend::cuda) mod fused;
pub(in crate::backend::cuda) mod grad;
pub(in crate::backend::cuda) mod grid;
pub(in crate::backend::cuda) mod linalg;
pub(in crate::backend::cuda) mod ot;
pub(in crate::backend::cuda) mod pointcloud;
pub(in crate::backend::cuda) mod report;
pub(in crate::backend::cuda) mod sliced;
pub(in crate::backend::cuda) mod tiled;
