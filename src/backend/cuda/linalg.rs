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
//! * `syrk`: the same tiles, only those on and above the diagonal, each written with its
//!   mirror (exactly symmetric); a large `X·Xᵀ` goes through `Xᵀ` likewise.
//! * `frobenius_norm`: a scaled sum of squares per block, merged on the device; one `f64`
//!   crosses to the host.

use super::{cfg1, cuda_err, to_i32, CudaBackend, CudaBuffer, CudaReal};
use crate::backend::cpu::svd3::RANK_TOL_PER_SQRT_M;
use crate::backend::linalg::{check_square, GemmShape, LinalgKernels, SyrkShape, Transpose};
use crate::{Error, Result};
use cudarc::driver::PushKernelArg;

/// Edge of the GEMM tile (`GEMM_BM` in cuda/linalg.cu).
const TILE: usize = 128;
/// Warps (matrices at a time) per svd3 block (`SVD_WARPS`).
const SVD_WARPS: usize = 4;
/// Rows per register chunk of the svd3 kernel (32 lanes × 4 rows).
const SVD_CHUNK_ROWS: usize = 128;

/// Kernel names of cuda/linalg.cu (for the module table).
pub(super) const LINALG_KERNELS: &[&str] = &[
    "gemm_nn_f32",
    "gemm_nt_f32",
    "gemm_tn_f32",
    "gemm_tt_f32",
    "gemm_nn_f64",
    "gemm_nt_f64",
    "gemm_tn_f64",
    "gemm_tt_f64",
    "syrk_n_f32",
    "syrk_t_f32",
    "syrk_n_f64",
    "syrk_t_f64",
    "svd3_c0_f32",
    "svd3_c1_f32",
    "svd3_c2_f32",
    "svd3_c4_f32",
    "svd3_c8_f32",
    "svd3_c0_f64",
    "frob_partial_f32",
    "frob_partial_f64",
    "frob_finish",
    "scaled_copy_f32",
    "scaled_copy_f64",
    "shift_diagonal_f32",
    "shift_diagonal_f64",
];

/// Threads and dynamic shared memory (bytes) of a GEMM or syrk block: for f32, 128
/// threads of 8×16 outputs and two operands × two buffers × 16 k-rows × 132 floats
/// (measured faster than k-steps of 8 or 32, and than static shared memory); for f64, 256
/// threads of 8×8 outputs and static shared memory.
fn gemm_launch<T: CudaReal>() -> (u32, u32) {
    if T::SUFFIX == "f32" {
        (128, 2 * 2 * 16 * 132 * 4)
    } else {
        (256, 0)
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
    ) -> Result<Option<cudarc::driver::CudaSlice<T>>> {
        let (gx, gy) = (cols.div_ceil(32), rows.div_ceil(32));
        if gx > i32::MAX as usize || gy > 65535 || rows * cols == 0 {
            return Ok(None);
        }
        let out = self.alloc::<T>(rows * cols, "a transposed operand")?;
        let f = self.func(&format!("transpose_{}", T::SUFFIX))?.clone();
        let (src, dst) = (self.ptr(&x.data), self.ptr(&out));
        let (r, c) = (to_i32(rows, "rows")?, to_i32(cols, "columns")?);
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: (gx as u32, gy as u32, 1),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&src).arg(&dst).arg(&r).arg(&c);
        unsafe { b.launch(cfg) }.map_err(|e| cuda_err("launching transpose", e))?;
        Ok(Some(out))
    }

    /// Blocks of a grid-stride elementwise launch over `len` elements.
    fn linalg_blocks(&self, len: usize) -> u32 {
        len.div_ceil(256).clamp(1, self.inner.sm_count * 8) as u32
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
        let name = match (T::SUFFIX, chunks) {
            ("f32", 1) => "svd3_c1_f32",
            ("f32", 2) => "svd3_c2_f32",
            ("f32", 3..=4) => "svd3_c4_f32",
            ("f32", 5..=8) => "svd3_c8_f32",
            ("f32", _) => "svd3_c0_f32",
            _ => "svd3_c0_f64",
        };
        let func = self.func(name)?.clone();
        let (bi, mi) = (to_i32(batch, "svd3: batch")?, to_i32(per, "svd3: 3·M")?);
        let mi = mi / 3;
        let tol = RANK_TOL_PER_SQRT_M * (m as f64).sqrt();
        let blocks = batch.div_ceil(SVD_WARPS).clamp(1, self.inner.sm_count * 16) as u32;
        let (pa, pu, ps, pv) = (
            self.ptr(&a.data),
            self.ptr(&u.data),
            self.ptr(&s.data),
            self.ptr(&vt.data),
        );
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pa)
            .arg(&pu)
            .arg(&ps)
            .arg(&pv)
            .arg(&bi)
            .arg(&mi)
            .arg(&tol);
        unsafe { b.launch(cfg1(blocks, (SVD_WARPS * 32) as u32, 0)) }
            .map_err(|e| cuda_err("launching svd3", e))?;
        Ok(())
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
        let GemmShape { m, n, k, ta, tb } = shape;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let (blocks, _, _) = tiles(m, n, "gemm: C")?;
        let (mi, ni, ki) = (
            to_i32(m, "gemm: m")?,
            to_i32(n, "gemm: n")?,
            to_i32(k, "gemm: k")?,
        );
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
        let (threads, smem) = gemm_launch::<T>();
        let name = format!("gemm_{}{}_{}", flag(ta), flag(tb), T::SUFFIX);
        let func = self.func(&name)?.clone();
        let pc = self.ptr(&c.data);
        let mut l = self.inner.stream.launch_builder(&func);
        l.arg(&pa)
            .arg(&pb)
            .arg(&pc)
            .arg(&mi)
            .arg(&ni)
            .arg(&ki)
            .arg(&alpha)
            .arg(&beta);
        unsafe { l.launch(cfg1(blocks, threads, smem)) }
            .map_err(|e| cuda_err("launching gemm", e))?;
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
        let (threads, smem) = gemm_launch::<T>();
        let name = format!("syrk_{}_{}", flag(ta), T::SUFFIX);
        let func = self.func(&name)?.clone();
        let pc = self.ptr(&c.data);
        let mut l = self.inner.stream.launch_builder(&func);
        l.arg(&pa).arg(&pc).arg(&ni).arg(&ki).arg(&alpha).arg(&beta);
        unsafe { l.launch(cfg1(blocks, threads, smem)) }
            .map_err(|e| cuda_err("launching syrk", e))?;
        drop(at);
        Ok(())
    }

    fn frobenius_norm(&self, a: &CudaBuffer<T>) -> Result<T> {
        if a.len == 0 {
            return Ok(T::zero());
        }
        let blocks = self.linalg_blocks(a.len).min(1024);
        let parts = unsafe { self.inner.stream.alloc::<f64>(2 * blocks as usize) }
            .map_err(|e| cuda_err("allocating norm partials", e))?;
        let out = unsafe { self.inner.stream.alloc::<f64>(1) }
            .map_err(|e| cuda_err("allocating the norm", e))?;
        let func = self.func(&format!("frob_partial_{}", T::SUFFIX))?.clone();
        let (px, pp, po) = (self.ptr(&a.data), self.ptr(&parts), self.ptr(&out));
        let n = a.len as i64;
        let mut l = self.inner.stream.launch_builder(&func);
        l.arg(&px).arg(&n).arg(&pp);
        unsafe { l.launch(cfg1(blocks, 256, 0)) }
            .map_err(|e| cuda_err("launching frob_partial", e))?;
        let fin = self.func("frob_finish")?.clone();
        let nparts = blocks as i32;
        let mut l = self.inner.stream.launch_builder(&fin);
        l.arg(&pp).arg(&nparts).arg(&po);
        unsafe { l.launch(cfg1(1, 256, 0)) }.map_err(|e| cuda_err("launching frob_finish", e))?;
        let host = self
            .inner
            .stream
            .clone_dtoh(&out)
            .map_err(|e| cuda_err("reading the norm", e))?;
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
        let func = self.func(&format!("scaled_copy_{}", T::SUFFIX))?.clone();
        let (ps, pd) = (self.ptr(&src.data), self.ptr(&dst.data));
        let n = src.len as i64;
        let mut l = self.inner.stream.launch_builder(&func);
        l.arg(&ps).arg(&pd).arg(&n).arg(&alpha);
        unsafe { l.launch(cfg1(self.linalg_blocks(src.len.div_ceil(4)), 256, 0)) }
            .map_err(|e| cuda_err("launching scaled_copy", e))?;
        Ok(())
    }

    fn shift_diagonal(&self, n: usize, alpha: T, c: &mut CudaBuffer<T>) -> Result<()> {
        check_square("shift_diagonal: C", c.len, n)?;
        if n == 0 {
            return Ok(());
        }
        let func = self.func(&format!("shift_diagonal_{}", T::SUFFIX))?.clone();
        let pc = self.ptr(&c.data);
        let ni = n as i64;
        let mut l = self.inner.stream.launch_builder(&func);
        l.arg(&pc).arg(&ni).arg(&alpha);
        unsafe { l.launch(cfg1(n.div_ceil(256).min(1024) as u32, 256, 0)) }
            .map_err(|e| cuda_err("launching shift_diagonal", e))?;
        Ok(())
    }
}
