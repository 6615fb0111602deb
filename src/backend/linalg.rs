//! Dense linear-algebra kernels a backend provides for [`crate::linalg`]: the batched
//! M×3 SVD, GEMM with transposed operands, the symmetric product `op(A)·op(A)ᵀ` and two
//! helpers (Frobenius norm, device copy) that Newton–Schulz needs to keep its iterate on
//! the device.
//!
//! Matrices live in a backend's 1-D buffers, row-major and contiguous. A transposed
//! operand is read in place through [`Transpose::Yes`] (never materialised).

use super::Backend;
use crate::{Error, Real, Result};

/// Whether a GEMM operand is used as stored or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Transpose {
    /// Use the matrix as stored.
    #[default]
    No,
    /// Use its transpose (read in place).
    Yes,
}

/// How a GEMM forms its products where the backend offers a choice: the CUDA backend's
/// f32 GEMM on tensor cores. The CPU backend and f64 compute exact products whatever the
/// choice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GemmPrecision {
    /// Products on the FP32 units (rounding about 2^-24 per product).
    #[default]
    Exact,
    /// Split TF32 on tensor cores: each operand `a = a_big + a_small` in TF32 and
    /// `a_small·b_big + a_big·b_small + a_big·b_big` accumulated in f32 (about 2^-21 per
    /// product, near f32's own rounding, at three times the tensor-core work of TF32).
    Tf32x3,
    /// One TF32 tensor-core product (10-bit mantissas): about 2^-10 per product.
    Tf32,
}

impl GemmPrecision {
    /// Every precision, from the most to the least exact.
    pub const ALL: [GemmPrecision; 3] = [
        GemmPrecision::Exact,
        GemmPrecision::Tf32x3,
        GemmPrecision::Tf32,
    ];

    /// Its name on the command line (`exact`, `tf32x3`, `tf32`).
    pub fn name(self) -> &'static str {
        match self {
            GemmPrecision::Exact => "exact",
            GemmPrecision::Tf32x3 => "tf32x3",
            GemmPrecision::Tf32 => "tf32",
        }
    }

    /// The precision of this [name](GemmPrecision::name), if any.
    ///
    /// ```
    /// use logot::linalg::GemmPrecision;
    /// for p in GemmPrecision::ALL {
    ///     assert_eq!(GemmPrecision::from_name(p.name()), Some(p));
    /// }
    /// assert_eq!(GemmPrecision::from_name("f16"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<GemmPrecision> {
        GemmPrecision::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// Shape of `C ← α·op(A)·op(B) + β·C`: `op(A)` is `m×k`, `op(B)` is `k×n`, `C` is `m×n`.
///
/// All three are stored row-major: `A` as `m×k` (or `k×m` when `ta` is [`Transpose::Yes`]),
/// `B` as `k×n` (or `n×k` when `tb` is [`Transpose::Yes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// Rows of `op(A)` and `C`.
    pub m: usize,
    /// Columns of `op(B)` and `C`.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
    /// Whether `A` is read transposed.
    pub ta: Transpose,
    /// Whether `B` is read transposed.
    pub tb: Transpose,
    /// How the products are formed ([`GemmPrecision::Exact`] unless asked).
    pub precision: GemmPrecision,
}

impl GemmShape {
    /// `C = A·B` with neither operand transposed.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        GemmShape {
            m,
            n,
            k,
            ta: Transpose::No,
            tb: Transpose::No,
            precision: GemmPrecision::Exact,
        }
    }
    /// The same product with the given operand flags.
    pub fn with_transposes(self, ta: Transpose, tb: Transpose) -> Self {
        GemmShape { ta, tb, ..self }
    }
    /// The same product with its products formed at `precision`.
    pub fn with_precision(self, precision: GemmPrecision) -> Self {
        GemmShape { precision, ..self }
    }
    /// Check buffer lengths against the shape.
    pub fn check(&self, a: usize, b: usize, c: usize) -> Result<()> {
        let (m, n, k) = (self.m, self.n, self.k);
        check_len("gemm: A", a, m * k, &format!("{m}×{k}"))?;
        check_len("gemm: B", b, k * n, &format!("{k}×{n}"))?;
        check_len("gemm: C", c, m * n, &format!("{m}×{n}"))
    }
}

/// Shape of the symmetric product `C ← α·op(A)·op(A)ᵀ + β·C`: `op(A)` is `n×k`, `C` is
/// `n×n`; `A` is stored row-major as `n×k`, or `k×n` when `ta` is [`Transpose::Yes`]
/// (then the product is `AᵀA`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyrkShape {
    /// Rows and columns of `C`.
    pub n: usize,
    /// The inner dimension.
    pub k: usize,
    /// Whether `A` is read transposed (the product is then `AᵀA`).
    pub ta: Transpose,
}

impl SyrkShape {
    /// Check buffer lengths against the shape.
    pub fn check(&self, a: usize, c: usize) -> Result<()> {
        let (n, k) = (self.n, self.k);
        check_len("syrk: A", a, n * k, &format!("{n}×{k}"))?;
        check_len("syrk: C", c, n * n, &format!("{n}×{n}"))
    }
}

/// Check that a buffer of length `len` holds an `n×n` matrix.
pub fn check_square(what: &str, len: usize, n: usize) -> Result<()> {
    check_len(what, len, n * n, &format!("{n}×{n}"))
}

fn check_len(what: &str, len: usize, want: usize, shape: &str) -> Result<()> {
    if len != want {
        return Err(Error::shape(
            what,
            format!("buffer of length {len} does not hold a {shape} matrix"),
        ));
    }
    Ok(())
}

/// Linear-algebra kernels of a backend (an extension of [`Backend`]).
///
/// Entries are validated (finite) by the public functions in [`crate::linalg`];
/// kernels check only sizes and never panic on bad lengths.
pub trait LinalgKernels<T: Real>: Backend<T> {
    /// Thin SVD of `batch` matrices `A_b` (`m×3`, stored `batch×m×3`):
    /// `A_b = U_b·diag(S_b)·V_bᵀ` with `u` (`batch×m×3`), `s` (`batch×3`, descending) and
    /// `vt` (`batch×3×3`, rows are the right singular vectors). Conventions (signs, rank
    /// deficiency) are those of [`crate::linalg::svd3()`].
    fn svd3(
        &self,
        a: &Self::Buffer,
        batch: usize,
        m: usize,
        u: &mut Self::Buffer,
        s: &mut Self::Buffer,
        vt: &mut Self::Buffer,
    ) -> Result<()>;

    /// `C ← α·op(A)·op(B) + β·C` (see [`GemmShape`]). With `β = 0`, `C` is not read (NaN
    /// in `C` does not propagate), as in BLAS.
    fn gemm(
        &self,
        shape: GemmShape,
        alpha: T,
        a: &Self::Buffer,
        b: &Self::Buffer,
        beta: T,
        c: &mut Self::Buffer,
    ) -> Result<()>;

    /// `C ← α·op(A)·op(A)ᵀ + β·C` (see [`SyrkShape`]), computing only the tiles on and
    /// above the diagonal and writing each one with its mirror: the result is exactly
    /// symmetric. With `β ≠ 0` only the upper triangle of `C` is read; with `β = 0`, `C`
    /// is not read.
    fn syrk(
        &self,
        shape: SyrkShape,
        alpha: T,
        a: &Self::Buffer,
        beta: T,
        c: &mut Self::Buffer,
    ) -> Result<()>;

    /// `‖a‖₂ = sqrt(Σ a_i²)`, accumulated without overflow; one number read back.
    fn frobenius_norm(&self, a: &Self::Buffer) -> Result<T>;

    /// `dst ← α·src` (equal lengths), on the device (`α = 1` is a copy).
    fn scaled_copy(&self, alpha: T, src: &Self::Buffer, dst: &mut Self::Buffer) -> Result<()>;

    /// `C ← C + α·I` for the `n×n` matrix `c` (its `n` diagonal entries only), on the
    /// device.
    fn shift_diagonal(&self, n: usize, alpha: T, c: &mut Self::Buffer) -> Result<()>;
}
