//! Thin SVD of a batch of `M×3` matrices through the 3×3 Gram matrix.
//!
//! `A = U·diag(S)·Vᵀ` with `U` (`M×3`), `S` (3, descending), `Vᵀ` (3×3). Method: the Gram
//! matrix `G = AᵀA` is diagonalised by cyclic Jacobi (`G = V·diag(λ)·Vᵀ`), then
//! `U = A·V·diag(1/S)`. Two refinements keep the result accurate: `A` is first scaled by
//! a power of two (no overflow or underflow in `AᵀA`), and the columns of `W = A·V` are
//! polished by a one-sided Jacobi sweep (rotations of order the Gram's rounding), after
//! which `S_k = ‖w_k‖`. On the CPU everything is computed in `f64` whatever the input
//! precision.
//!
//! # Conventions
//! * `S` is sorted descending; `S ≥ 0`.
//! * Signs: in each right singular vector `v_k` (row `k` of `Vᵀ`) the entry of largest
//!   magnitude is positive (the first one on ties); `u_k = A·v_k / S_k` follows.
//! * Rank deficiency: a singular value `S_k ≤ tol·S_0`, with
//!   `tol = 8·ε_f64·sqrt(M)` ([`RANK_TOL_PER_SQRT_M`]`·sqrt(M)`), is returned as exactly
//!   `0` and its column of `U` is an **orthonormal completion**: Gram–Schmidt of the
//!   canonical vector `e_i` with the largest residual against the other columns. So `U`
//!   always has orthonormal columns, except when `M < 3`: then the columns `k ≥ M` are
//!   zero (and `S_k = 0`). An all-zero `A` gives `S = 0`, `Vᵀ = I` and `U = [e_0 e_1 e_2]`
//!   (the first three columns of the identity).
//!
//! # Accuracy
//! Through the Gram matrix, a singular value is determined to about
//! `ε·σ_max²/σ` (absolute), i.e. small singular values lose relative accuracy like
//! `ε·κ²`; the polish of `W` recovers most of it (orthogonality of `U` and reconstruction
//! `A − U·S·Vᵀ` are at the level of `ε·σ_max·sqrt(M)`), with `ε` the precision of the
//! computation (`f64` on the CPU). For `f32` inputs the results are accurate to `f32`
//! rounding for any conditioning up to about `10⁸`.

pub use crate::backend::cpu::svd3::RANK_TOL_PER_SQRT_M;
use crate::backend::linalg::LinalgKernels;
use crate::{CpuBackend, Error, Real, Result};
use ndarray::{Array1, Array2, Array3, ArrayView2, ArrayView3, Axis};

/// The SVD of one `M×3` matrix: `A = U·diag(S)·Vᵀ`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Svd3<T> {
    /// `M×3`, orthonormal columns (see the module docs for `M < 3`).
    pub u: Array2<T>,
    /// 3 singular values, descending.
    pub s: Array1<T>,
    /// `3×3`, rows are the right singular vectors.
    pub vt: Array2<T>,
}

/// The SVDs of a batch of `B` matrices `M×3`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Svd3Batch<T> {
    /// `B×M×3`.
    pub u: Array3<T>,
    /// `B×3`, each row descending.
    pub s: Array2<T>,
    /// `B×3×3`.
    pub vt: Array3<T>,
}

/// Thin SVD of one `M×3` matrix on the CPU.
///
/// ```
/// use logot::ndarray::array;
/// let a = array![[3.0, 0.0, 0.0], [0.0, 0.0, -2.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]];
/// let svd = logot::linalg::svd3(a.view())?;
/// assert_eq!(svd.s, array![3.0, 2.0, 0.0]);
/// assert_eq!(svd.vt.row(1), array![0.0, 0.0, 1.0].view()); // largest entry positive
/// assert_eq!(svd.u.column(1), array![0.0, -1.0, 0.0, 0.0].view());
/// # Ok::<(), logot::Error>(())
/// ```
pub fn svd3<T: Real>(a: ArrayView2<'_, T>) -> Result<Svd3<T>> {
    let b = svd3_batch(&CpuBackend, a.insert_axis(Axis(0)))?;
    Ok(Svd3 {
        u: b.u.index_axis_move(Axis(0), 0),
        s: b.s.index_axis_move(Axis(0), 0),
        vt: b.vt.index_axis_move(Axis(0), 0),
    })
}

/// Thin SVD of a batch `B×M×3` on `backend` (rayon over the batch).
///
/// ```
/// use logot::ndarray::{Array2, Array3, Axis};
/// let a = Array3::from_shape_fn((4, 10, 3), |(b, i, k)| ((b + 2 * i + 3 * k * k) % 7) as f64 - 3.0);
/// let svd = logot::linalg::svd3_batch(&logot::CpuBackend, a.view())?;
/// for b in 0..4 {
///     // A = U·diag(S)·Vᵀ
///     let u = svd.u.index_axis(Axis(0), b);
///     let us = &u * &svd.s.row(b);
///     let back = us.dot(&svd.vt.index_axis(Axis(0), b));
///     assert!((&back - &a.index_axis(Axis(0), b)).iter().all(|e| e.abs() < 1e-12));
/// }
/// # Ok::<(), logot::Error>(())
/// ```
///
/// ```
/// use logot::ndarray::Array3;
/// // Columns of lengths 2, 5 and 1, orthogonal: the singular values are the lengths, sorted.
/// let mut a = Array3::<f32>::zeros((1, 4, 3));
/// a[[0, 0, 0]] = 2.0;
/// a[[0, 1, 1]] = 5.0;
/// a[[0, 2, 2]] = 1.0;
/// let svd = logot::linalg::svd3_batch(&logot::CpuBackend, a.view())?;
/// assert_eq!(svd.s.row(0).to_vec(), vec![5.0, 2.0, 1.0]);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn svd3_batch<T: Real, B: LinalgKernels<T>>(
    backend: &B,
    a: ArrayView3<'_, T>,
) -> Result<Svd3Batch<T>> {
    let (batch, m, three) = a.dim();
    if three != 3 {
        return Err(Error::shape(
            "a",
            format!(
                "expected B×M×3 (or M×3) matrices, got shape {:?}",
                a.shape()
            ),
        ));
    }
    if batch == 0 || m == 0 {
        return Err(Error::Empty {
            arg: "a".into(),
            detail: format!("shape {:?}", a.shape()),
        });
    }
    crate::validate::check_finite("a", &a)?;
    let buf = match a.as_slice() {
        Some(s) => backend.upload(s)?,
        None => backend.upload(&a.iter().copied().collect::<Vec<T>>())?,
    };
    let mut u = backend.filled(batch * m * 3, T::zero())?;
    let mut s = backend.filled(batch * 3, T::zero())?;
    let mut vt = backend.filled(batch * 9, T::zero())?;
    backend.svd3(&buf, batch, m, &mut u, &mut s, &mut vt)?;
    let shape_err = |e: ndarray::ShapeError| Error::Numerical(e.to_string());
    Ok(Svd3Batch {
        u: Array3::from_shape_vec((batch, m, 3), backend.download(&u)?).map_err(shape_err)?,
        s: Array2::from_shape_vec((batch, 3), backend.download(&s)?).map_err(shape_err)?,
        vt: Array3::from_shape_vec((batch, 3, 3), backend.download(&vt)?).map_err(shape_err)?,
    })
}
