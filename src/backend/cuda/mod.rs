//! The CUDA backend (feature `cuda`): buffers live in GPU memory, kernels from `cuda/*.cu`
//! are compiled by NVRTC for the device's architecture once per process.
//!
//! * [`CudaBackend::sinkstep`](crate::Backend::sinkstep) is a tiled, GEMM-shaped one-pass
//!   log-sum-exp: a block owns 16 problems × 32 outputs (one problem × 128 outputs for
//!   per-problem costs or small batches), streams the reduction through shared memory,
//!   and every cost element loaded is used by all the block's problems.
//! * [`Backend::iterate`](crate::Backend::iterate) runs small problems (both orientations of the cost and the
//!   potentials fit in one block's shared memory) as one launch for all iterations; larger
//!   ones run one launch per half-step with no host synchronisation in between.
//! * [`Backend::column_error_and_cost`](crate::Backend::column_error_and_cost) (the solver's end-of-run report) is one tiled pass
//!   that yields each plan's column marginals and `⟨P, C⟩` together.
//! * Consecutive half-steps use programmatic dependent launch on Hopper: a kernel's blocks
//!   start while the previous kernel drains and wait (`griddepcontrol.wait`) for its data.
//! * Only marginal errors and distances (`B` numbers) are read back by the solver.
//! * Point clouds ([`crate::PointCloudCost`], any dimension): the cost is formed in
//!   registers from the two clouds (the difference form for `d ≤ 16`, `|x|² + |y|² − 2·x·y`
//!   with precomputed norms above) and never stored (`cuda/pointcloud.cu`, [`crate::PointCloudKernels`]
//!   for point gradients and `P·V`).
//! * Grid costs ([`CostSource::Grid`](crate::CostSource::Grid), axes of at most 1024 points) run one batched 1-D
//!   log-sum-exp pass per axis (cuda/grid.cu), the cost computed on the fly; `⟨P, C⟩` is
//!   separable too, dense plans of grids are
//!   [`Error::Unavailable`](crate::Error::Unavailable).
//! * [`BarycenterKernels`](crate::backend::barycenter::BarycenterKernels) (cuda/barycenter.cu):
//!   the barycenter loop runs on the GPU for dense and grid costs.
//! * [`BistochasticKernels`](crate::backend::bistochastic::BistochasticKernels)
//!   (cuda/bistochastic.cu): one fused kernel per direction for batches of n×n matrices
//!   (n ≤ 32), and [`GradKernels`](crate::backend::grad::GradKernels) (cuda/grad.cu), so the
//!   implicit OT gradients run on the GPU.
//! * Exact minibatch OT ([`CudaBackend::emd_batch`], [`CudaBackend::emd_points_batch`],
//!   cuda/assignment.cu): batches of assignment problems by the auction algorithm with
//!   ε-scaling, one block a problem, each answer certified on the device or solved again
//!   on the CPU.
//! * 1-D and sliced Wasserstein ([`CudaBackend::sliced_wasserstein_distance`],
//!   [`CudaBackend::wasserstein_1d_batch`], cuda/sliced.cu): projections, a segmented
//!   bitonic sort of each projection with its point indices, the merge of the two sorted
//!   weighted lines, and the gradients with respect to the points, in `f64`.
//!
//! Everything runs on one CUDA stream per backend, in order: the backend's own, or a
//! caller's ([`CudaBackend::on_stream`], e.g. PyTorch's current stream), and the kernel
//! traits run on the caller's device memory as well ([`CudaBackend::borrow_buffer`]: a
//! [`CudaBuffer`] that is never freed by logot). Driver, compiler and kernel
//! failures are [`Error::Cuda`](crate::Error::Cuda); a machine without driver, NVRTC or
//! GPU gives [`Error::Unavailable`](crate::Error::Unavailable) from [`CudaBackend::new`].
//! The kernels are compiled by NVRTC once per process, or once per machine with
//! [`CudaBackend::with_kernel_cache`]; the backend never reads the environment.
//!
//! # Layout
//! * `runtime/`: what every operation runs on. `kernels` (the registry: every module, its
//!   source and entry points, the name of an entry point for a precision, and the numbers
//!   shared with the kernels, read from the sources' `#define` lines at build time),
//!   `launch` (launch configurations, typed argument tuples, the error context of driver
//!   calls), `device` (context, stream, loaded kernels, buffers, and one launch over a typed
//!   argument tuple), `nvrtc` (compilation and module caches), `mailbox` (statistics words
//!   copied back to page-locked rows without waiting, [`WordsMailbox`]), `tuning` (kernel
//!   choices, not public API) and `cluster` (several GPUs joined by NCCL, [`CudaCluster`]).
//! * `ops/`: the operations, each on the runtime only. `cost` (prepared costs: dense, grid,
//!   point clouds), `tiled`, `dense` and `fused` (dense costs: the tiled half-step, reports
//!   and plans, the fused small-problem loop), `grid` and `pointcloud` (costs computed on
//!   the fly), `report`, `assignment` (exact minibatch OT), `sliced` (1-D and sliced
//!   Wasserstein), `buffers` (the per-row input checks, `ln`, start potentials,
//!   per-row offsets and a dense cost from a buffer, for Sinkhorn on a caller's device
//!   memory, [`SinkhornSolver::prepare`](crate::SinkhornSolver::prepare)), `ot` (the
//!   [`Backend`](crate::Backend) impl, which dispatches by cost kind), and the other kernel
//!   traits in `barycenter`, `bistochastic`, `grad` and `linalg`.
//!
//! `src/backend/cuda/README.md` says how to add a kernel.

mod ops;
mod runtime;

pub(crate) use ops::assignment::{AuctionCost, Auctioned, AUCTION_MAX_N};
pub use ops::cost::CudaCost;
pub(crate) use ops::sliced::{LineProblems, LineSide, MAX_LINES};
pub use runtime::cluster::{CudaCluster, NcclGroup};
pub use runtime::device::{CudaBackend, CudaBuffer};
pub use runtime::kernels::{CudaReal, Precision};
pub use runtime::mailbox::WordsMailbox;
#[doc(hidden)]
pub use runtime::tuning::{CloudForm, Tuning};
