//! Dense matrix products on the CPU through faer (`faer::linalg::matmul`): packed,
//! register-blocked kernels for AVX-512, AVX2 + FMA or portable code, chosen at run time,
//! split over rayon's pool.
//!
//! faer rather than the `gemm` crate it grew from: in one run on the 2-core development
//! machine (AMD EPYC, AVX-512) faer's 4096³ f32 product was the faster of the two and ahead
//! of NumPy's OpenBLAS (benches/README), and it computes one triangle of a product
//! (`X·Xᵀ` in half the flops) with the same kernels.
//!
//! Determinism: faer's x86 kernels split a product over blocks of the output only. The
//! reduction runs in blocks of at most 512 terms, in order, each accumulated in registers
//! by the same micro-kernel whatever the thread count (the micro-kernel depends on the
//! type and the shape, not on the threads), so every output's bits are independent of the
//! number of threads (tests/sinkhorn/determinism.rs and tests/linalg/ compare 1, 2, 3 and
//! 5 threads).
//!
//! Views of a buffer with a row stride are read-only, made by
//! `MatRef::from_row_major_slice_with_stride`; an output is always a whole row-major buffer
//! (`MatMut::from_row_major_slice_mut`). faer 0.24's
//! `MatMut::from_row_major_slice_with_stride_mut` checks the bounds of a row-major layout
//! but builds a column-major view (row stride 1, column stride the given stride), so a
//! product into a view with more columns than rows writes past the slice (clippy.toml
//! disallows it).

use crate::backend::linalg::Transpose;
use crate::Real;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

/// Products with fewer multiply-adds than this run on the calling thread.
const MIN_PARALLEL_WORK: usize = 1 << 18;

/// `op(X)` as a `rows×cols` view of a row-major buffer of exactly `rows·cols` elements
/// (stored `rows×cols`, or `cols×rows` and read transposed).
pub(crate) fn view<T: Real>(buf: &[T], rows: usize, cols: usize, t: Transpose) -> MatRef<'_, T> {
    match t {
        Transpose::No => MatRef::from_row_major_slice(buf, rows, cols),
        Transpose::Yes => MatRef::from_row_major_slice(buf, cols, rows).transpose(),
    }
}

/// The parallelism of a product of `work` multiply-adds: rayon's pool above
/// [`MIN_PARALLEL_WORK`], else the calling thread.
pub(crate) fn par_for(work: usize) -> Par {
    if work < MIN_PARALLEL_WORK || rayon::current_num_threads() == 1 {
        Par::Seq
    } else {
        Par::rayon(0)
    }
}

/// `c ← β·c` (nothing for β = 1; for β = 0 the product replaces `c` without reading it).
fn scale<T: Real>(beta: T, c: &mut [T]) {
    if beta != T::one() && beta != T::zero() {
        c.par_chunks_mut(1 << 14).for_each(|ch| {
            for v in ch {
                *v = beta * *v;
            }
        });
    }
}

fn accum<T: Real>(beta: T) -> Accum {
    if beta == T::zero() {
        Accum::Replace
    } else {
        Accum::Add
    }
}

/// `C ← α·A·B + β·C` for a row-major `C` (`a` is `m×k`, `b` is `k×n`, any strides).
pub(crate) fn gemm<T: Real>(alpha: T, a: MatRef<'_, T>, b: MatRef<'_, T>, beta: T, c: &mut [T]) {
    let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
    scale(beta, c);
    let cv = MatMut::from_row_major_slice_mut(c, m, n);
    faer::linalg::matmul::matmul(cv, accum(beta), a, b, alpha, par_for(m * n * k));
}

/// `C ← α·A·B + β·C` on views, on the calling thread (for kernels that run inside a rayon
/// task of their own).
pub(crate) fn gemm_seq<T: Real>(alpha: T, a: MatRef<'_, T>, b: MatRef<'_, T>, c: MatMut<'_, T>) {
    faer::linalg::matmul::matmul(c, Accum::Replace, a, b, alpha, Par::Seq);
}

/// A raw pointer to `C` shared by the mirroring tasks, which write disjoint elements.
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);
// SAFETY: the tasks that hold copies read and write disjoint elements (see `syrk`).
unsafe impl<T: Send> Send for Shared<T> {}
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The pointer (a method, so that closures capture the whole `Sync` wrapper).
    fn ptr(&self) -> *mut T {
        self.0
    }
}

/// Rows (and columns) of the tiles that the mirroring copies.
const MIRROR_TILE: usize = 64;

/// `C ← α·X·Xᵀ + β·C` for `X` (`n×k`, any strides) and a row-major `n×n` `C`: the upper
/// triangle (diagonal included) by faer's triangular product, about half the flops of the
/// full product, then mirrored into the lower one tile by tile. With `β ≠ 0` only the upper
/// triangle of `C` is read.
pub(crate) fn syrk<T: Real>(alpha: T, x: MatRef<'_, T>, beta: T, c: &mut [T]) {
    let (n, k) = (x.nrows(), x.ncols());
    debug_assert_eq!(c.len(), n * n);
    if beta != T::one() && beta != T::zero() {
        c.par_chunks_mut(n).enumerate().for_each(|(i, row)| {
            for v in &mut row[i..] {
                *v = beta * *v;
            }
        });
    }
    {
        let cv = MatMut::from_row_major_slice_mut(&mut c[..], n, n);
        triangular::matmul(
            cv,
            BlockStructure::TriangularUpper,
            accum(beta),
            x,
            BlockStructure::Rectangular,
            x.transpose(),
            BlockStructure::Rectangular,
            alpha,
            par_for(n * n * k / 2),
        );
    }
    let out = Shared(c.as_mut_ptr());
    let tiles = n.div_ceil(MIRROR_TILE);
    let mirror = |ti: usize| {
        let rows = ti * MIRROR_TILE..((ti + 1) * MIRROR_TILE).min(n);
        // Tile by tile along the row, each read row by row (contiguous) and written
        // transposed; both tiles stay in L1.
        for j in 0..rows.end {
            for i in rows.start.max(j + 1)..rows.end {
                // SAFETY: the task of tile row `ti` writes the strictly lower elements of
                // its rows and reads strictly upper ones (j < i): no element is both read
                // and written, and no two tasks write the same one; i, j < n.
                unsafe { *out.ptr().add(i * n + j) = *out.ptr().add(j * n + i) };
            }
        }
    };
    if n * n < MIN_PARALLEL_WORK {
        (0..tiles).for_each(mirror);
    } else {
        (0..tiles).into_par_iter().for_each(mirror);
    }
}
