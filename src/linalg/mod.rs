//! Supporting linear algebra: the batched M×3 SVD ([`svd3`](mod@svd3)), GEMM and its
//! backward ([`gemm`](mod@gemm)), Newton–Schulz orthogonalisation with a symmetric
//! `X·Xᵀ` ([`newton_schulz`](mod@newton_schulz)), and point-cloud alignment built on them
//! ([`align`](mod@align): Kabsch, orthogonal Procrustes, Wasserstein–Procrustes).
//!
//! Every operation is one function that takes the backend first (`&CpuBackend`, or any
//! backend implementing [`LinalgKernels`]): `matmul(&be, a, b)`, `svd3_batch(&be, a)`, …;
//! [`svd3`](svd3()), the SVD of one matrix, and the alignments from a given coupling
//! ([`kabsch`], [`orthogonal_procrustes`]) run on the CPU. Inputs are ndarray views (any
//! layout); results are owned arrays; [`newton_schulz_buffers`] keeps the iterate in a
//! backend's buffers. Invalid input (shape, emptiness, NaN/±∞) is an
//! [`crate::Error`] naming the argument.

pub mod align;
pub mod gemm;
pub mod newton_schulz;
pub mod svd3;

pub use crate::backend::linalg::{GemmPrecision, GemmShape, LinalgKernels, SyrkShape, Transpose};
pub use align::{
    kabsch, orthogonal_procrustes, wasserstein_procrustes, Init, ProcrustesMethod, RigidTransform,
    WassersteinProcrustesParams, WassersteinProcrustesResult,
};
pub use gemm::{matmul, matmul_backward, sq_euclidean_cost, MatmulGradients};
pub use newton_schulz::{
    newton_schulz, newton_schulz_buffers, xxt, NewtonSchulzParams, MUON_COEFFICIENTS,
};
pub use svd3::{svd3, svd3_batch, Svd3, Svd3Batch};

use crate::{Backend, Error, Real, Result};
use ndarray::{Array2, ArrayView2};

/// Copy a 2-D view (any layout) into a new backend buffer, row-major.
pub(crate) fn upload2<T: Real, B: Backend<T>>(
    backend: &B,
    a: &ArrayView2<'_, T>,
) -> Result<B::Buffer> {
    match a.as_slice() {
        Some(s) => backend.upload(s),
        None => backend.upload(&a.iter().copied().collect::<Vec<T>>()),
    }
}

/// Download a buffer holding a row-major `rows×cols` matrix.
pub(crate) fn download2<T: Real, B: Backend<T>>(
    backend: &B,
    buf: &B::Buffer,
    rows: usize,
    cols: usize,
) -> Result<Array2<T>> {
    Array2::from_shape_vec((rows, cols), backend.download(buf)?)
        .map_err(|e| Error::Numerical(e.to_string()))
}

/// A non-empty 2-D input with finite entries.
pub(crate) fn check_matrix<T: Real>(arg: &str, a: &ArrayView2<'_, T>) -> Result<()> {
    if a.is_empty() {
        return Err(Error::Empty {
            arg: arg.into(),
            detail: format!("shape {}×{}", a.nrows(), a.ncols()),
        });
    }
    crate::validate::check_finite(arg, a)
}
