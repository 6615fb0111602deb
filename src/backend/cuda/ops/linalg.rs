//! [`LinalgKernels`] on the GPU (cuda/linalg.cu).
//!
//! * `svd3`: one warp per matrix, everything in `f64` (as on the CPU, so the rank
//!   decisions agree): for `f32` with `M ≤ 1024` the matrix stays in registers and `A` is
//!   read once; otherwise each pass re-reads it (from L2 after the first).
//! * `gemm`: tiled FP32 FFMA (no TF32: results are compared with `f64`), 128×128 tiles of
//!   128 threads with 8×16 outputs each, k-steps of 16 double-buffered in shared memory
//!   with register prefetch (f64: 256 threads of 8×8, k-steps of 8). Transposed operands
//!   are read in place; for products of 2^30 multiply-adds or more, an operand whose rows
//!   run along k (`A` as stored, `B` transposed) is first copied transposed, so that every
//!   tile load is row-contiguous (about 10 % faster at 4096³, for one extra pass).
//!   f32 products asked for at [`GemmPrecision::Tf32`] or [`GemmPrecision::Tf32x3`] run on
//!   tensor cores instead (`mma.sync` m16n8k8 TF32, 128×128 tiles of 256 threads, k-steps of
//!   16, both operands read in place; [`GemmKernel`] is the choice).
//! * `syrk`: the same tiles, only those on and above the diagonal, each written with its
//!   mirror (exactly symmetric); a large `X·Xᵀ` goes through `Xᵀ` likewise.
//! * `frobenius_norm`: a scaled sum of squares per block, merged on the device; one `f64`
//!   crosses to the host.

use crate::backend::cpu::svd3::RANK_TOL_PER_SQRT_M;
use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::{define, kernel_name, CudaReal, Module, Precision};
use crate::backend::cuda::runtime::launch::{to_i32, Launch};
use crate::backend::linalg::{
    check_square, GemmPrecision, GemmShape, LinalgKernels, SyrkShape, Transpose,
};
use crate::{Error, Result};
use cudarc::driver::CudaSlice;

const SOURCE: &str = Module::Linalg.text();
/// Edge of the GEMM tile.
const TILE: usize = define(SOURCE, "GEMM_BM");
/// Padding of a shared-memory tile row of the f32 GEMM.
const TILE_PAD: usize = define(SOURCE, "GEMM_PAD");
/// k-rows per stage and threads per block of the f32 GEMM and syrk.
const F32_BK: usize = define(SOURCE, "GEMM_F32_BK");
const F32_THREADS: usize = define(SOURCE, "GEMM_F32_THREADS");
/// Threads per block of the f64 GEMM and syrk (static shared memory).
const F64_THREADS: usize = define(SOURCE, "GEMM_F64_THREADS");
/// Edge of the tensor-core GEMM's tile and its threads per block.
const TC_TILE: usize = define(SOURCE, "GEMM_TC_BM");
const TC_THREADS: usize = define(SOURCE, "GEMM_TC_THREADS");
// `tiles` counts the blocks of both GEMM families.
const _: () = assert!(TC_TILE == TILE);
/// Warps (matrices at a time) per svd3 block.
const SVD_WARPS: usize = define(SOURCE, "SVD_WARPS");
/// Rows per register chunk of the svd3 kernel (32 lanes × 4 rows).
const SVD_CHUNK_ROWS: usize = 128;

/// Threads and dynamic shared memory (bytes) of a GEMM or syrk block: for f32, 128
/// threads of 8×16 outputs and two operands × two buffers × 16 k-rows × 132 floats
/// (faster than k-steps of 8 or 32, and than static shared memory); for f64, 256
/// threads of 8×8 outputs and static shared memory.
fn gemm_launch<T: CudaReal>(blocks: u32) -> Launch {
    match T::PRECISION {
        Precision::F32 => Launch::linear(blocks, F32_THREADS as u32)
            .shared(2 * 2 * F32_BK * (TILE + TILE_PAD) * std::mem::size_of::<f32>()),
        Precision::F64 => Launch::linear(blocks, F64_THREADS as u32),
    }
}

/// The kernel family of a GEMM: FP32 FFMA tiles (f64: FP64 FMA), or f32 on tensor cores
/// with one or three TF32 products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GemmKernel {
    Fma,
    Tf32,
    Tf32x3,
}

impl GemmKernel {
    /// The kernel of a product at `asked` in precision `p`: tensor cores for f32 only.
    fn choose(p: Precision, asked: GemmPrecision) -> GemmKernel {
        match (p, asked) {
            (Precision::F32, GemmPrecision::Tf32) => GemmKernel::Tf32,
            (Precision::F32, GemmPrecision::Tf32x3) => GemmKernel::Tf32x3,
            _ => GemmKernel::Fma,
        }
    }
    /// The entry point of the tensor-core kernels for the operand flags.
    fn tensor_entry(self, ta: Transpose, tb: Transpose) -> Option<String> {
        let base = match self {
            GemmKernel::Fma => return None,
            GemmKernel::Tf32 => "gemm_tf32",
            GemmKernel::Tf32x3 => "gemm_tf32x3",
        };
        Some(format!("{base}_{}{}", flag(ta), flag(tb)))
    }
}

fn flag(t: Transpose) -> char {
    match t {
        Transpose::No => 'n',
        Transpose::Yes => 't',
    }
}

/// Tiles of a `rows×cols` output, or an error when they exceed one launch.
fn tiles(rows: usize, cols: usize, what: &str) -> Result<(u32, usize, usize)> {
    let (mt, nt) = (rows.div_ceil(TILE), cols.div_ceil(TILE));
    let total = mt
        .checked_mul(nt)
        .and_then(|t| u32::try_from(t).ok())
        .filter(|&t| t < i32::MAX as u32)
        .ok_or_else(|| Error::shape(what, format!("{rows}×{cols} is too large for one launch")))?;
    Ok((total, mt, nt))
}

/// Multiply-adds from which a GEMM or syrk first copies an operand whose rows run along
/// k into transposed (row-contiguous) form: the copy costs one read and one write of the
/// operand, the tile loads of the transposed layout are about 10 % faster at 4096³.
const TRANSPOSED_COPY_MIN_WORK: usize = 1 << 30;

impl CudaBackend {
    /// `xᵀ` (`cols×rows`) of the row-major `rows×cols` buffer `x` in a new allocation, or
    /// `None` when the shape exceeds the transpose kernel's grid.
    fn transposed_copy<T: CudaReal>(
        &self,
        x: &CudaBuffer<T>,
        rows: usize,
        cols: usize,
    ) -> Result<Option<CudaSlice<T>>> {
        let (gx, gy) = (cols.div_ceil(32), rows.div_ceil(32));
        if gx > i32::MAX as usize || gy > 65535 || rows * cols == 0 {
            return Ok(None);
        }
        let out = self.alloc::<T>(rows * cols, "a transposed operand")?;
        let (r, c) = (to_i32(rows, "rows")?, to_i32(cols, "columns")?);
        let cfg = Launch::new((gx as u32, gy as u32, 1), (32, 8, 1));
        // SAFETY: transpose(in, out, n, m) of one rows×cols matrix into `out` of its size.
        unsafe {
            self.launch(
                &kernel_name::<T>("transpose"),
                cfg,
                (self.ptr(&x.data), self.ptr(&out), r, c),
            )
        }?;
        Ok(Some(out))
    }

    /// Blocks of a grid-stride elementwise launch over `len` elements.
    fn linalg_blocks(&self, len: usize) -> u32 {
        self.stride_blocks(len, 256, 8)
    }
}

impl<T: CudaReal> LinalgKernels<T> for CudaBackend {
    fn svd3(
        &self,
        a: &CudaBuffer<T>,
        batch: usize,
        m: usize,
        u: &mut CudaBuffer<T>,
        s: &mut CudaBuffer<T>,
        vt: &mut CudaBuffer<T>,
    ) -> Result<()> {
        if batch == 0 || m == 0 {
            return Err(Error::Empty {
                arg: "svd3: A".into(),
                detail: format!("a batch of {batch} matrices {m}×3"),
            });
        }
        let per = m
            .checked_mul(3)
            .ok_or_else(|| Error::shape("svd3", "matrices too large"))?;
        if a.len != batch * per || u.len != batch * per || s.len != batch * 3 || vt.len != batch * 9
        {
            return Err(Error::shape(
                "svd3",
                format!(
                    "buffers of lengths A {}, U {}, S {}, Vt {} do not fit {batch} matrices {m}×3",
                    a.len, u.len, s.len, vt.len
                ),
            ));
        }
        let chunks = m.div_ceil(SVD_CHUNK_ROWS);
        // Chunks of rows kept in registers (f32, M ≤ 1024; 0: A read again each pass).
        let chunks = match (T::PRECISION, chunks) {
            (Precision::F32, 1 | 2) => chunks,
            (Precision::F32, 3..=4) => 4,
            (Precision::F32, 5..=8) => 8,
            _ => 0,
        };
        let (bi, mi) = (to_i32(batch, "svd3: batch")?, to_i32(per, "svd3: 3·M")?);
        let mi = mi / 3;
        let tol = RANK_TOL_PER_SQRT_M * (m as f64).sqrt();
        let cfg = Launch::linear(
            self.stride_blocks(batch, SVD_WARPS, 16),
            (SVD_WARPS * 32) as u32,
        );
        // SAFETY: svd3_c*(A, U, S, VT, batch, m, tol) over the checked buffers of `batch`
        // matrices M×3.
        unsafe {
            self.launch(
                &kernel_name::<T>(&format!("svd3_c{chunks}")),
                cfg,
                (
                    self.ptr(&a.data),
                    self.ptr(&u.data),
                    self.ptr(&s.data),
                    self.ptr(&vt.data),
                    bi,
                    mi,
                    tol,
                ),
            )
        }
    }

    fn gemm(
        &self,
        shape: GemmShape,
        alpha: T,
        a: &CudaBuffer<T>,
        b: &CudaBuffer<T>,
        beta: T,
        c: &mut CudaBuffer<T>,
    ) -> Result<()> {
        shape.check(a.len, b.len, c.len)?;
        let GemmShape {
            m,
            n,
            k,
            ta,
            tb,
            precision,
        } = shape;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let (blocks, _, _) = tiles(m, n, "gemm: C")?;
        let (mi, ni, ki) = (
            to_i32(m, "gemm: m")?,
            to_i32(n, "gemm: n")?,
            to_i32(k, "gemm: k")?,
        );
        if let Some(name) = GemmKernel::choose(T::PRECISION, precision).tensor_entry(ta, tb) {
            // SAFETY: gemm_tf32*_(A, B, C, m, n, k, alpha, beta) (f32 only: `choose` gives
            // tensor kernels for f32 alone) on the checked shapes, operands as stored.
            return unsafe {
                self.launch(
                    &name,
                    Launch::linear(blocks, TC_THREADS as u32),
                    (
                        self.ptr(&a.data),
                        self.ptr(&b.data),
                        self.ptr(&c.data),
                        mi,
                        ni,
                        ki,
                        alpha,
                        beta,
                    ),
                )
            };
        }
        // Large products read an operand whose rows run along k (A as stored, or B
        // transposed) from a transposed copy: the tile loads are then row-contiguous.
        let big = m.saturating_mul(n).saturating_mul(k) >= TRANSPOSED_COPY_MIN_WORK;
        let at = match ta {
            Transpose::No if big => self.transposed_copy(a, m, k)?,
            _ => None,
        };
        let bt = match tb {
            Transpose::Yes if big => self.transposed_copy(b, n, k)?,
            _ => None,
        };
        let (ta, pa) = match &at {
            Some(t) => (Transpose::Yes, self.ptr(t)),
            None => (ta, self.ptr(&a.data)),
        };
        let (tb, pb) = match &bt {
            Some(t) => (Transpose::No, self.ptr(t)),
            None => (tb, self.ptr(&b.data)),
        };
        let name = kernel_name::<T>(&format!("gemm_{}{}", flag(ta), flag(tb)));
        // SAFETY: gemm_*(A, B, C, m, n, k, alpha, beta) on the checked shapes (A, B as
        // stored or their transposed copies).
        unsafe {
            self.launch(
                &name,
                gemm_launch::<T>(blocks),
                (pa, pb, self.ptr(&c.data), mi, ni, ki, alpha, beta),
            )
        }?;
        // The copies are freed in stream order, after the kernel.
        drop((at, bt));
        Ok(())
    }

    fn syrk(
        &self,
        shape: SyrkShape,
        alpha: T,
        a: &CudaBuffer<T>,
        beta: T,
        c: &mut CudaBuffer<T>,
    ) -> Result<()> {
        shape.check(a.len, c.len)?;
        let SyrkShape { n, k, ta } = shape;
        if n == 0 {
            return Ok(());
        }
        let (_, nt, _) = tiles(n, n, "syrk: C")?;
        let blocks = u32::try_from(nt * (nt + 1) / 2)
            .map_err(|_| Error::shape("syrk: C", "too large for one launch"))?;
        let (ni, ki) = (to_i32(n, "syrk: n")?, to_i32(k, "syrk: k")?);
        // As in gemm: a large X·Xᵀ reads a transposed copy of X (then computes (Xᵀ)ᵀ·Xᵀ).
        let at = match ta {
            Transpose::No if n.saturating_mul(n).saturating_mul(k) >= TRANSPOSED_COPY_MIN_WORK => {
                self.transposed_copy(a, n, k)?
            }
            _ => None,
        };
        let (ta, pa) = match &at {
            Some(t) => (Transpose::Yes, self.ptr(t)),
            None => (ta, self.ptr(&a.data)),
        };
        let name = kernel_name::<T>(&format!("syrk_{}", flag(ta)));
        // SAFETY: syrk_*(A, C, n, k, alpha, beta) on the checked shapes.
        unsafe {
            self.launch(
                &name,
                gemm_launch::<T>(blocks),
                (pa, self.ptr(&c.data), ni, ki, alpha, beta),
            )
        }?;
        drop(at);
        Ok(())
    }

    fn frobenius_norm(&self, a: &CudaBuffer<T>) -> Result<T> {
        if a.len == 0 {
            return Ok(T::zero());
        }
        let blocks = self.linalg_blocks(a.len).min(1024);
        let parts = self.alloc_f64(2 * blocks as usize, "norm partials")?;
        let out = self.alloc_f64(1, "the norm")?;
        let (pp, po) = (self.ptr(&parts), self.ptr(&out));
        // SAFETY: frob_partial(x, n, part) writes two doubles per block; frob_finish(part,
        // parts, out) merges them into one.
        unsafe {
            self.launch(
                &kernel_name::<T>("frob_partial"),
                Launch::linear(blocks, 256),
                (self.ptr(&a.data), a.len as i64, pp),
            )?;
            self.launch(
                "frob_finish",
                Launch::linear(1, 256),
                (pp, blocks as i32, po),
            )
        }?;
        let host = self.download_slice(&out, 1, "the norm")?;
        let v = host
            .first()
            .copied()
            .ok_or_else(|| Error::Cuda("the norm was not returned".into()))?;
        Ok(T::of(v))
    }

    fn scaled_copy(&self, alpha: T, src: &CudaBuffer<T>, dst: &mut CudaBuffer<T>) -> Result<()> {
        if src.len != dst.len {
            return Err(Error::shape(
                "scaled_copy",
                format!(
                    "source of length {} into destination of length {}",
                    src.len, dst.len
                ),
            ));
        }
        if src.len == 0 {
            return Ok(());
        }
        let cfg = Launch::linear(self.linalg_blocks(src.len.div_ceil(4)), 256);
        // SAFETY: scaled_copy(src, dst, n, alpha) over the equal lengths.
        unsafe {
            self.launch(
                &kernel_name::<T>("scaled_copy"),
                cfg,
                (
                    self.ptr(&src.data),
                    self.ptr(&dst.data),
                    src.len as i64,
                    alpha,
                ),
            )
        }
    }

    fn shift_diagonal(&self, n: usize, alpha: T, c: &mut CudaBuffer<T>) -> Result<()> {
        check_square("shift_diagonal: C", c.len, n)?;
        if n == 0 {
            return Ok(());
        }
        let cfg = Launch::linear(n.div_ceil(256).min(1024) as u32, 256);
        // SAFETY: shift_diagonal(c, n, alpha) on the checked n×n matrix.
        unsafe {
            self.launch(
                &kernel_name::<T>("shift_diagonal"),
                cfg,
                (self.ptr(&c.data), n as i64, alpha),
            )
        }
    }
}
