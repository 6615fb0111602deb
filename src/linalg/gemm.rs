//! Dense matrix product `C = A·B` (row-major, `f32`/`f64`), its backward, and
//! squared-Euclidean costs of point clouds built on it.
//!
//! Backward of a scalar loss `L(C)` with `dC = ∂L/∂C`: `dA = dC·Bᵀ`, `dB = Aᵀ·dC`. Both
//! are one GEMM whose transposed operand is read in place ([`Transpose::Yes`]), never
//! materialised.

use super::{check_matrix, download2, upload2};
use crate::backend::linalg::{GemmShape, LinalgKernels, Transpose};
use crate::{Error, Real, Result};
use ndarray::{Array1, Array2, ArrayView2, Axis, Zip};

/// Gradients of a scalar loss through `C = A·B`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct MatmulGradients<T> {
    /// `∂L/∂A = dC·Bᵀ` (`m×k`).
    pub da: Array2<T>,
    /// `∂L/∂B = Aᵀ·dC` (`k×n`).
    pub db: Array2<T>,
}

/// `C = A·B` on `backend`: `a` is `m×k`, `b` is `k×n`.
///
/// ```
/// use logot::ndarray::array;
/// let c = logot::linalg::matmul(&logot::CpuBackend, array![[1.0, 2.0]].view(), array![[3.0], [4.0]].view())?;
/// assert_eq!(c, array![[11.0]]);
/// # Ok::<(), logot::Error>(())
/// ```
///
/// ```
/// use logot::ndarray::array;
/// let (a, b) = (array![[1.0f32, 2.0], [3.0, 4.0]], array![[0.0, 1.0], [1.0, 0.0]]);
/// let c = logot::linalg::matmul(&logot::CpuBackend, a.view(), b.view())?;
/// assert_eq!(c, array![[2.0, 1.0], [4.0, 3.0]]); // B swaps the columns
/// # Ok::<(), logot::Error>(())
/// ```
pub fn matmul<T: Real, B: LinalgKernels<T>>(
    backend: &B,
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
) -> Result<Array2<T>> {
    check_matrix("a", &a)?;
    check_matrix("b", &b)?;
    let ((m, k), (kb, n)) = (a.dim(), b.dim());
    if k != kb {
        return Err(Error::shape(
            "b",
            format!("has {kb} rows but a ({m}×{k}) has {k} columns"),
        ));
    }
    let (ab, bb) = (upload2(backend, &a)?, upload2(backend, &b)?);
    let mut c = backend.filled(m * n, T::zero())?;
    backend.gemm(
        GemmShape::new(m, n, k),
        T::one(),
        &ab,
        &bb,
        T::zero(),
        &mut c,
    )?;
    download2(backend, &c, m, n)
}

/// Backward of `C = A·B` on `backend`: given `dc = ∂L/∂C` (`m×n`), returns `dA = dC·Bᵀ` and
/// `dB = Aᵀ·dC`.
///
/// ```
/// use logot::ndarray::array;
/// // L = Σ C = Σ_ij (A·B)_ij: dC = 1, so dA_ik = Σ_j B_kj and dB_kj = Σ_i A_ik.
/// let (a, b) = (array![[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], array![[1.0, 0.0, 2.0], [0.0, 3.0, 1.0]]);
/// let g = logot::linalg::matmul_backward(&logot::CpuBackend, a.view(), b.view(), logot::ndarray::Array2::ones((3, 3)).view())?;
/// assert_eq!(g.da, array![[3.0, 4.0], [3.0, 4.0], [3.0, 4.0]]);
/// assert_eq!(g.db, array![[9.0, 9.0, 9.0], [12.0, 12.0, 12.0]]);
/// # Ok::<(), logot::Error>(())
/// ```
///
/// ```
/// use logot::linalg::{matmul, matmul_backward};
/// use logot::ndarray::array;
/// // L = ⟨G, A·B⟩ is linear in A: L(A) = ⟨dA, A⟩ with dA from the backward.
/// let (a, b, g) = (array![[1.0, -2.0]], array![[0.5], [2.0]], array![[3.0]]);
/// let grad = matmul_backward(&logot::CpuBackend, a.view(), b.view(), g.view())?;
/// let loss = (&matmul(&logot::CpuBackend, a.view(), b.view())? * &g).sum();
/// assert_eq!((&grad.da * &a).sum(), loss);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn matmul_backward<T: Real, B: LinalgKernels<T>>(
    backend: &B,
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
    dc: ArrayView2<'_, T>,
) -> Result<MatmulGradients<T>> {
    check_matrix("a", &a)?;
    check_matrix("b", &b)?;
    check_matrix("dc", &dc)?;
    let ((m, k), (kb, n)) = (a.dim(), b.dim());
    if k != kb {
        return Err(Error::shape(
            "b",
            format!("has {kb} rows but a ({m}×{k}) has {k} columns"),
        ));
    }
    if dc.dim() != (m, n) {
        return Err(Error::shape(
            "dc",
            format!("is {}×{} but C = A·B is {m}×{n}", dc.nrows(), dc.ncols()),
        ));
    }
    let (ab, bb, dcb) = (
        upload2(backend, &a)?,
        upload2(backend, &b)?,
        upload2(backend, &dc)?,
    );
    let mut da = backend.filled(m * k, T::zero())?;
    let mut db = backend.filled(k * n, T::zero())?;
    // dA (m×k) = dC (m×n) · Bᵀ, B stored k×n.
    backend.gemm(
        GemmShape::new(m, k, n).with_transposes(Transpose::No, Transpose::Yes),
        T::one(),
        &dcb,
        &bb,
        T::zero(),
        &mut da,
    )?;
    // dB (k×n) = Aᵀ · dC, A stored m×k.
    backend.gemm(
        GemmShape::new(k, n, m).with_transposes(Transpose::Yes, Transpose::No),
        T::one(),
        &ab,
        &dcb,
        T::zero(),
        &mut db,
    )?;
    Ok(MatmulGradients {
        da: download2(backend, &da, m, k)?,
        db: download2(backend, &db, k, n)?,
    })
}

/// Squared-Euclidean cost `C_ij = ‖x_i − y_j‖²` of the point clouds `x` (`n×d`) and `y`
/// (`m×d`), on `backend`.
///
/// Computed as `‖x_i‖² + ‖y_j‖² − 2·(X·Yᵀ)_ij` with one GEMM, after translating both clouds
/// by their common mean (the cost does not change; the cancellation in the formula does),
/// and clamped at 0 (rounding can make the formula slightly negative for close points).
///
/// ```
/// use logot::ndarray::array;
/// let x = array![[0.0, 0.0], [1.0, 1.0]];
/// let y = array![[3.0, 4.0]];
/// let c = logot::linalg::sq_euclidean_cost(&logot::CpuBackend, x.view(), y.view())?;
/// assert_eq!(c, array![[25.0], [13.0]]);
/// # Ok::<(), logot::Error>(())
/// ```
///
/// ```
/// use logot::ndarray::array;
/// let x = array![[1.0f32, 2.0, 3.0]];
/// let c = logot::linalg::sq_euclidean_cost(&logot::CpuBackend, x.view(), x.view())?;
/// assert_eq!(c[[0, 0]], 0.0); // clamped: never slightly negative
/// # Ok::<(), logot::Error>(())
/// ```
pub fn sq_euclidean_cost<T: Real, B: LinalgKernels<T>>(
    backend: &B,
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
) -> Result<Array2<T>> {
    check_matrix("x", &x)?;
    check_matrix("y", &y)?;
    let ((n, d), (m, dy)) = (x.dim(), y.dim());
    if d != dy {
        return Err(Error::shape(
            "y",
            format!("points have {dy} coordinates but those of x have {d}"),
        ));
    }
    // Common mean, in f64.
    let total = (n + m) as f64;
    let shift: Vec<f64> = (0..d)
        .map(|c| {
            (x.column(c)
                .iter()
                .chain(y.column(c).iter())
                .map(|v| v.f64())
                .sum::<f64>())
                / total
        })
        .collect();
    let center = |p: &ArrayView2<'_, T>| {
        Array2::from_shape_fn(p.dim(), |(i, c)| T::of(p[(i, c)].f64() - shift[c]))
    };
    let (xc, yc) = (center(&x), center(&y));
    let sq_norms = |p: &Array2<T>| -> Array1<T> {
        p.map_axis(Axis(1), |r| r.iter().fold(T::zero(), |s, &v| s + v * v))
    };
    let (xn, yn) = (sq_norms(&xc), sq_norms(&yc));
    let (xb, yb) = (upload2(backend, &xc.view())?, upload2(backend, &yc.view())?);
    let mut c = backend.filled(n * m, T::zero())?;
    let two = T::of(2.0);
    // C (n×m) = −2·X·Yᵀ, Y stored m×d.
    backend.gemm(
        GemmShape::new(n, m, d).with_transposes(Transpose::No, Transpose::Yes),
        -two,
        &xb,
        &yb,
        T::zero(),
        &mut c,
    )?;
    let mut c = download2(backend, &c, n, m)?;
    Zip::from(c.rows_mut())
        .and(&xn)
        .par_for_each(|mut row, &xi| {
            for (v, &yj) in row.iter_mut().zip(yn.iter()) {
                *v = (*v + xi + yj).max(T::zero());
            }
        });
    Ok(c)
}
