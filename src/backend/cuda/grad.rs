//! [`GradKernels`] on the GPU (cuda/grad.cu): plan mat-vecs and weighted marginals (a warp
//! per row, a thread per column, f64 accumulation), the gradient assembly and the batched
//! vector operations of CG. Only the `B` per-problem dot products are read back; the `B`
//! CG coefficients of `axpy`/`xpby` are uploaded.

use super::{cfg1, cuda_err, to_i32, CudaBackend, CudaBuffer, CudaReal};
use crate::backend::{batch_of, grad::GradKernels};
use crate::{Error, Result};
use cudarc::driver::{CudaSlice, PushKernelArg};

pub(super) const KERNEL_NAMES: &[&str] = &[
    "grad_rows_f32",
    "grad_rows_f64",
    "grad_cols_f32",
    "grad_cols_f64",
    "grad_assemble_f32",
    "grad_assemble_f64",
    "grad_dot_f32",
    "grad_dot_f64",
    "grad_scaled_f32",
    "grad_scaled_f64",
    "grad_elementwise_f32",
    "grad_elementwise_f64",
];

const THREADS: u32 = 256;

fn check_len<T>(what: &str, v: &CudaBuffer<T>, want: usize) -> Result<()> {
    if v.len != want {
        return Err(Error::shape(
            what,
            format!("has length {} but {want} is needed", v.len),
        ));
    }
    Ok(())
}

/// Offset between the weight matrices of consecutive problems: `per` (B matrices) or 0 (one).
fn weight_stride<T>(weight: &CudaBuffer<T>, batch: usize, per: usize) -> Result<i64> {
    if weight.len == batch * per {
        Ok(per as i64)
    } else if weight.len == per {
        Ok(0)
    } else {
        Err(Error::shape(
            "weight",
            format!(
                "has length {}; expected {batch}×{per} or one shared matrix of {per}",
                weight.len
            ),
        ))
    }
}

fn per_problem(len: usize, batch: usize, what: &str) -> Result<usize> {
    if batch == 0 || len % batch != 0 {
        return Err(Error::shape(
            what,
            format!("length {len} does not split into {batch} problems"),
        ));
    }
    Ok(len / batch)
}

impl CudaBackend {
    /// Blocks of a grid-stride loop over `work` items (threads or warps × 32).
    fn grad_blocks(&self, work: usize) -> u32 {
        work.div_ceil(THREADS as usize)
            .clamp(1, self.inner.sm_count * 32) as u32
    }

    /// Row reductions of `batch` plans (`B·n` outputs, `Σ_j [W]·P·[x]`; `along_rows`) or
    /// column reductions (`B·m` outputs, `Σ_i [W]·P·[x]`).
    #[allow(clippy::too_many_arguments)]
    fn grad_reduce<T: CudaReal>(
        &self,
        along_rows: bool,
        plan: &CudaBuffer<T>,
        x: Option<&CudaBuffer<T>>,
        weight: Option<(&CudaBuffer<T>, i64)>,
        out: &mut CudaSlice<T>,
        batch: usize,
        n: usize,
        m: usize,
    ) -> Result<()> {
        let (kernel, count, work) = if along_rows {
            ("grad_rows", batch * n, (batch * n).saturating_mul(32))
        } else {
            ("grad_cols", batch, batch * m)
        };
        let func = self.func(&format!("{kernel}_{}", T::SUFFIX))?.clone();
        let pp = self.ptr(&plan.data);
        let px = x.map_or(0u64, |b| self.ptr(&b.data));
        let (pw, ws, has) = match weight {
            Some((w, s)) => (self.ptr(&w.data), s, 1i32),
            None => (0u64, 0i64, 0i32),
        };
        let po = self.ptr(out);
        let (ci, ni, mi) = (count as i64, to_i32(n, "n")?, to_i32(m, "m")?);
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pp)
            .arg(&px)
            .arg(&pw)
            .arg(&ws)
            .arg(&has)
            .arg(&po)
            .arg(&ci)
            .arg(&ni)
            .arg(&mi);
        unsafe { b.launch(cfg1(self.grad_blocks(work), THREADS, 0)) }
            .map_err(|e| cuda_err(&format!("launching {kernel}"), e))?;
        Ok(())
    }

    /// `mode` 0: `y += coef[b]·x` (skipped where 0); 1: `y = x + coef[b]·y`.
    fn grad_scaled<T: CudaReal>(
        &self,
        coef: &[f64],
        x: &CudaBuffer<T>,
        y: &mut CudaBuffer<T>,
        mode: i32,
    ) -> Result<()> {
        check_len("y", y, x.len)?;
        let per = per_problem(x.len, coef.len(), "x")?;
        if per == 0 {
            return Ok(());
        }
        let c = self
            .inner
            .stream
            .clone_htod(coef)
            .map_err(|e| cuda_err("copying CG coefficients to the GPU", e))?;
        let func = self.func(&format!("grad_scaled_{}", T::SUFFIX))?.clone();
        let (pc, px, py) = (self.ptr(&c), self.ptr(&x.data), self.ptr(&y.data));
        let (total, per) = (x.len as i64, per as i64);
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pc)
            .arg(&px)
            .arg(&py)
            .arg(&total)
            .arg(&per)
            .arg(&mode);
        unsafe { b.launch(cfg1(self.grad_blocks(x.len), THREADS, 0)) }
            .map_err(|e| cuda_err("launching grad_scaled", e))?;
        drop(c);
        Ok(())
    }

    /// Element-wise kernels (see `grad_elementwise` in cuda/grad.cu).
    fn grad_elementwise<T: CudaReal>(
        &self,
        a: Option<&CudaBuffer<T>>,
        x: &CudaBuffer<T>,
        beta: T,
        y: &mut CudaSlice<T>,
        mode: i32,
    ) -> Result<()> {
        if x.len == 0 {
            return Ok(());
        }
        let func = self
            .func(&format!("grad_elementwise_{}", T::SUFFIX))?
            .clone();
        let pa = a.map_or(0u64, |b| self.ptr(&b.data));
        let (px, py) = (self.ptr(&x.data), self.ptr(y));
        let total = x.len as i64;
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pa)
            .arg(&px)
            .arg(&beta)
            .arg(&py)
            .arg(&total)
            .arg(&mode);
        unsafe { b.launch(cfg1(self.grad_blocks(x.len), THREADS, 0)) }
            .map_err(|e| cuda_err("launching grad_elementwise", e))?;
        Ok(())
    }
}

impl<T: CudaReal> GradKernels<T> for CudaBackend {
    fn plan_matvec(
        &self,
        plan: &CudaBuffer<T>,
        n: usize,
        m: usize,
        x: &CudaBuffer<T>,
        y: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let batch = batch_of(plan.len, n * m, "plan")?;
        check_len("x", x, batch * m)?;
        check_len("y", y, batch * n)?;
        self.grad_reduce(true, plan, Some(x), None, &mut y.data, batch, n, m)
    }

    fn plan_matvec_t(
        &self,
        plan: &CudaBuffer<T>,
        n: usize,
        m: usize,
        x: &CudaBuffer<T>,
        y: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let batch = batch_of(plan.len, n * m, "plan")?;
        check_len("x", x, batch * n)?;
        check_len("y", y, batch * m)?;
        self.grad_reduce(false, plan, Some(x), None, &mut y.data, batch, n, m)
    }

    fn weighted_marginals(
        &self,
        plan: &CudaBuffer<T>,
        n: usize,
        m: usize,
        weight: Option<&CudaBuffer<T>>,
    ) -> Result<(CudaBuffer<T>, CudaBuffer<T>)> {
        let batch = batch_of(plan.len, n * m, "plan")?;
        let w = match weight {
            Some(w) => Some((w, weight_stride(w, batch, n * m)?)),
            None => None,
        };
        let mut rows = self.alloc::<T>(batch * n, "row marginals")?;
        let mut cols = self.alloc::<T>(batch * m, "column marginals")?;
        self.grad_reduce(true, plan, None, w, &mut rows, batch, n, m)?;
        self.grad_reduce(false, plan, None, w, &mut cols, batch, n, m)?;
        Ok((
            CudaBuffer {
                data: rows,
                len: batch * n,
            },
            CudaBuffer {
                data: cols,
                len: batch * m,
            },
        ))
    }

    fn assemble_gradient(
        &self,
        plan: &CudaBuffer<T>,
        n: usize,
        m: usize,
        weight: &CudaBuffer<T>,
        a: &CudaBuffer<T>,
        c: &CudaBuffer<T>,
        alpha: T,
        beta: T,
    ) -> Result<CudaBuffer<T>> {
        let batch = batch_of(plan.len, n * m, "plan")?;
        let ws = weight_stride(weight, batch, n * m)?;
        check_len("a", a, batch * n)?;
        check_len("c", c, batch * m)?;
        let out = self.alloc::<T>(plan.len, "the gradient")?;
        let func = self.func(&format!("grad_assemble_{}", T::SUFFIX))?.clone();
        let (pp, pw, pa, pc, po) = (
            self.ptr(&plan.data),
            self.ptr(&weight.data),
            self.ptr(&a.data),
            self.ptr(&c.data),
            self.ptr(&out),
        );
        let (total, ni, mi) = (plan.len as i64, to_i32(n, "n")?, to_i32(m, "m")?);
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pp)
            .arg(&pw)
            .arg(&ws)
            .arg(&pa)
            .arg(&pc)
            .arg(&alpha)
            .arg(&beta)
            .arg(&po)
            .arg(&total)
            .arg(&ni)
            .arg(&mi);
        unsafe { b.launch(cfg1(self.grad_blocks(plan.len), THREADS, 0)) }
            .map_err(|e| cuda_err("launching grad_assemble", e))?;
        Ok(CudaBuffer {
            data: out,
            len: plan.len,
        })
    }

    fn batched_dot(&self, batch: usize, x: &CudaBuffer<T>, y: &CudaBuffer<T>) -> Result<Vec<f64>> {
        check_len("y", y, x.len)?;
        let per = per_problem(x.len, batch, "x")?;
        if per == 0 {
            return Ok(vec![0.0; batch]);
        }
        let out = self.alloc::<f64>(batch, "dot products")?;
        let func = self.func(&format!("grad_dot_{}", T::SUFFIX))?.clone();
        let (px, py, po) = (self.ptr(&x.data), self.ptr(&y.data), self.ptr(&out));
        let (bi, pi) = (batch as i64, per as i64);
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&px).arg(&py).arg(&po).arg(&bi).arg(&pi);
        unsafe { b.launch(cfg1(self.grad_blocks(batch.saturating_mul(32)), THREADS, 0)) }
            .map_err(|e| cuda_err("launching grad_dot", e))?;
        let mut host = self
            .inner
            .stream
            .clone_dtoh(&out)
            .map_err(|e| cuda_err("reading dot products", e))?;
        host.truncate(batch);
        Ok(host)
    }

    fn batched_axpy(&self, alpha: &[f64], x: &CudaBuffer<T>, y: &mut CudaBuffer<T>) -> Result<()> {
        self.grad_scaled(alpha, x, y, 0)
    }

    fn batched_xpby(&self, x: &CudaBuffer<T>, beta: &[f64], y: &mut CudaBuffer<T>) -> Result<()> {
        self.grad_scaled(beta, x, y, 1)
    }

    fn hadamard(
        &self,
        a: &CudaBuffer<T>,
        x: &CudaBuffer<T>,
        beta: T,
        y: &mut CudaBuffer<T>,
    ) -> Result<()> {
        check_len("a", a, x.len)?;
        check_len("y", y, x.len)?;
        let mode = if beta == T::zero() { 0 } else { 1 };
        self.grad_elementwise(Some(a), x, beta, &mut y.data, mode)
    }

    fn recip_or_zero(&self, x: &CudaBuffer<T>) -> Result<CudaBuffer<T>> {
        let mut out = self.alloc::<T>(x.len, "reciprocals")?;
        self.grad_elementwise(None, x, T::zero(), &mut out, 2)?;
        Ok(CudaBuffer {
            data: out,
            len: x.len,
        })
    }

    fn support(&self, x: &CudaBuffer<T>) -> Result<CudaBuffer<T>> {
        let mut out = self.alloc::<T>(x.len, "the support")?;
        self.grad_elementwise(None, x, T::zero(), &mut out, 3)?;
        Ok(CudaBuffer {
            data: out,
            len: x.len,
        })
    }
}
