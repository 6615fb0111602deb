//! [`LinalgKernels`] for the CPU: GEMM through ndarray's `general_mat_mul` (the
//! `matrixmultiply` crate's packed, vectorised kernels), split over rayon; transposed
//! operands are strided views, never copies. The symmetric product computes the upper
//! triangle tile by tile (each tile a small GEMM) and writes each tile with its mirror.

use super::svd3::svd3_batch;
use super::CpuBackend;
use crate::backend::linalg::{check_square, GemmShape, LinalgKernels, SyrkShape, Transpose};
use crate::{Error, Real, Result};
use ndarray::linalg::general_mat_mul;
use ndarray::parallel::prelude::*;
use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

/// Products with fewer multiply-adds than this run on one thread.
const MIN_PARALLEL_WORK: usize = 1 << 18;
/// Rows (or columns) of `C` per parallel GEMM task, at least.
const MIN_BLOCK: usize = 64;

/// `op(X)` as a `rows×cols` view of a row-major buffer (stored `rows×cols`, or `cols×rows`
/// and read transposed).
fn op_view<T>(buf: &[T], rows: usize, cols: usize, t: Transpose) -> Result<ArrayView2<'_, T>> {
    let view = match t {
        Transpose::No => ArrayView2::from_shape((rows, cols), buf),
        Transpose::Yes => ArrayView2::from_shape((cols, rows), buf).map(|v| v.reversed_axes()),
    };
    view.map_err(|e| Error::shape("gemm", e.to_string()))
}

/// `C ← α·A·B + β·C` on views, split into row (or column) blocks of `C` over rayon.
pub(crate) fn par_gemm<T: Real>(
    alpha: T,
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
    beta: T,
    c: ArrayViewMut2<'_, T>,
) {
    let mut c = c;
    let (m, k) = a.dim();
    let n = b.ncols();
    let threads = rayon::current_num_threads();
    if m * n * k < MIN_PARALLEL_WORK || threads == 1 {
        general_mat_mul(alpha, &a, &b, beta, &mut c);
        return;
    }
    // Split the longer side of C into about 4 blocks per thread (multiples of 16 rows so
    // that the 8-wide micro-kernels see full panels).
    let split = |len: usize| ((len.div_ceil(4 * threads)).max(MIN_BLOCK)).div_ceil(16) * 16;
    if m >= n {
        let bs = split(m);
        c.axis_chunks_iter_mut(Axis(0), bs)
            .into_par_iter()
            .enumerate()
            .for_each(|(i, mut cb)| {
                let r0 = i * bs;
                let ab = a.slice(s![r0..r0 + cb.nrows(), ..]);
                general_mat_mul(alpha, &ab, &b, beta, &mut cb);
            });
    } else {
        let bs = split(n);
        c.axis_chunks_iter_mut(Axis(1), bs)
            .into_par_iter()
            .enumerate()
            .for_each(|(j, mut cb)| {
                let c0 = j * bs;
                let bb = b.slice(s![.., c0..c0 + cb.ncols()]);
                general_mat_mul(alpha, &a, &bb, beta, &mut cb);
            });
    }
}

/// A raw pointer to `C` shared by the syrk tasks, each of which writes a disjoint set of
/// tiles.
#[derive(Clone, Copy)]
struct SharedOut<T>(*mut T);
// SAFETY: the tasks that hold copies write disjoint elements (see `syrk_upper_tiles`).
unsafe impl<T: Send> Send for SharedOut<T> {}
unsafe impl<T: Send> Sync for SharedOut<T> {}

impl<T> SharedOut<T> {
    /// The pointer (a method, so that closures capture the whole `Sync` wrapper).
    fn ptr(&self) -> *mut T {
        self.0
    }
}

/// Tile edge of the symmetric product: large enough that each tile's GEMM amortises
/// packing, small enough that the triangle splits into many tasks.
fn syrk_tile(n: usize) -> usize {
    if n >= 2048 {
        256
    } else if n >= 512 {
        128
    } else {
        64
    }
}

/// `C ← α·X·Xᵀ + β·C` for `X` (`n×k`, any strides) and a row-major `n×n` `C`: the tiles
/// `(I, J)` with `I ≤ J` are computed in parallel, each into a local buffer, and written
/// to `(I, J)` and, transposed, to `(J, I)`; a diagonal tile writes its upper half and
/// mirrors it. With `β ≠ 0` only the upper triangle of `C` is read.
pub(crate) fn syrk_upper_tiles<T: Real>(
    alpha: T,
    x: ArrayView2<'_, T>,
    beta: T,
    c: &mut [T],
    tile: usize,
) {
    let n = x.nrows();
    debug_assert_eq!(c.len(), n * n);
    let nt = n.div_ceil(tile);
    let pairs: Vec<(usize, usize)> = (0..nt).flat_map(|i| (i..nt).map(move |j| (i, j))).collect();
    let out = SharedOut(c.as_mut_ptr());
    let kernel = |&(ti, tj): &(usize, usize)| {
        let (r0, c0) = (ti * tile, tj * tile);
        let (h, w) = (tile.min(n - r0), tile.min(n - c0));
        let mut t = if beta == T::zero() {
            Array2::zeros((h, w))
        } else {
            Array2::from_shape_fn((h, w), |(p, q)| {
                // Upper triangle only: on a diagonal tile, mirror the entries below.
                let (gi, gj) = (r0 + p, c0 + q);
                let (ri, rj) = if gi <= gj { (gi, gj) } else { (gj, gi) };
                // SAFETY: (ri, rj) lies in the upper part of this task's own tile (I, J),
                // I ≤ J, which no other task writes; ri, rj < n.
                unsafe { *out.ptr().add(ri * n + rj) }
            })
        };
        let xi = x.slice(s![r0..r0 + h, ..]);
        let xj = x.slice(s![c0..c0 + w, ..]);
        general_mat_mul(alpha, &xi, &xj.t(), beta, &mut t);
        for ((p, q), &v) in t.indexed_iter() {
            let (gi, gj) = (r0 + p, c0 + q);
            if ti == tj && gi > gj {
                continue;
            }
            // SAFETY: task (I, J) writes only the tiles (I, J) and (J, I); tasks own
            // distinct pairs I ≤ J, so the written elements are disjoint. The pointer
            // covers n·n elements and gi, gj < n.
            unsafe {
                *out.ptr().add(gi * n + gj) = v;
                *out.ptr().add(gj * n + gi) = v;
            }
        }
    };
    if pairs.len() == 1 || n * n * x.ncols() < MIN_PARALLEL_WORK {
        pairs.iter().for_each(kernel);
    } else {
        pairs.par_iter().for_each(kernel);
    }
}

impl<T: Real> LinalgKernels<T> for CpuBackend {
    fn svd3(
        &self,
        a: &Vec<T>,
        batch: usize,
        m: usize,
        u: &mut Vec<T>,
        s: &mut Vec<T>,
        vt: &mut Vec<T>,
    ) -> Result<()> {
        svd3_batch(a, batch, m, u, s, vt)
    }

    fn gemm(
        &self,
        shape: GemmShape,
        alpha: T,
        a: &Vec<T>,
        b: &Vec<T>,
        beta: T,
        c: &mut Vec<T>,
    ) -> Result<()> {
        shape.check(a.len(), b.len(), c.len())?;
        let GemmShape { m, n, k, ta, tb } = shape;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let av = op_view(a, m, k, ta)?;
        let bv = op_view(b, k, n, tb)?;
        let cv = ArrayViewMut2::from_shape((m, n), &mut c[..])
            .map_err(|e| Error::shape("gemm: C", e.to_string()))?;
        par_gemm(alpha, av, bv, beta, cv);
        Ok(())
    }

    fn syrk(&self, shape: SyrkShape, alpha: T, a: &Vec<T>, beta: T, c: &mut Vec<T>) -> Result<()> {
        shape.check(a.len(), c.len())?;
        let SyrkShape { n, k, ta } = shape;
        if n == 0 {
            return Ok(());
        }
        let x = op_view(a, n, k, ta)?;
        syrk_upper_tiles(alpha, x, beta, c, syrk_tile(n));
        Ok(())
    }

    fn frobenius_norm(&self, a: &Vec<T>) -> Result<T> {
        const CHUNK: usize = 1 << 14;
        let amax = a
            .par_chunks(CHUNK)
            .map(|ch| ch.iter().fold(0.0f64, |m, x| m.max(x.f64().abs())))
            .reduce(|| 0.0, f64::max);
        if amax == 0.0 || !amax.is_finite() {
            return Ok(T::of(amax));
        }
        let inv = 1.0 / amax;
        // Fixed chunks summed in parallel, then in chunk order: the same bits whatever the
        // number of threads.
        let parts: Vec<f64> = a
            .par_chunks(CHUNK)
            .map(|ch| {
                ch.iter()
                    .map(|x| {
                        let y = x.f64() * inv;
                        y * y
                    })
                    .sum::<f64>()
            })
            .collect();
        let sum: f64 = parts.iter().sum();
        Ok(T::of(amax * sum.sqrt()))
    }

    fn scaled_copy(&self, alpha: T, src: &Vec<T>, dst: &mut Vec<T>) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::shape(
                "scaled_copy",
                format!(
                    "source of length {} into destination of length {}",
                    src.len(),
                    dst.len()
                ),
            ));
        }
        if alpha == T::one() {
            dst.copy_from_slice(src);
        } else {
            dst.par_chunks_mut(1 << 14)
                .zip(src.par_chunks(1 << 14))
                .for_each(|(d, s)| {
                    for (d, &s) in d.iter_mut().zip(s) {
                        *d = alpha * s;
                    }
                });
        }
        Ok(())
    }

    fn shift_diagonal(&self, n: usize, alpha: T, c: &mut Vec<T>) -> Result<()> {
        check_square("shift_diagonal: C", c.len(), n)?;
        for i in 0..n {
            c[i * n + i] = c[i * n + i] + alpha;
        }
        Ok(())
    }
}
