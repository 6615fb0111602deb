//! [`GradKernels`] on the GPU (cuda/grad.cu): plan mat-vecs and weighted marginals (a warp
//! per row, a thread per column, f64 accumulation), the gradient assembly and the batched
//! vector operations of CG. Only the `B` per-problem dot products are read back; the `B`
//! CG coefficients of `axpy`/`xpby` are uploaded.

use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::{kernel_name, CudaReal};
use crate::backend::cuda::runtime::launch::{to_i32, Context, Launch};
use crate::backend::shape::{check_len, per_problem, weight_stride};
use crate::backend::{batch_of, grad::GradKernels};
use crate::Result;
use cudarc::driver::CudaSlice;

const THREADS: u32 = 256;

/// The reductions of `grad_rows` / `grad_cols`.
#[derive(Clone, Copy)]
enum Along {
    /// `B·n` outputs `Σ_j [W]·P·[x]`.
    Rows,
    /// `B·m` outputs `Σ_i [W]·P·[x]`.
    Cols,
}

/// The `mode` of `grad_elementwise` (cuda/grad.cu).
#[derive(Clone, Copy)]
enum Elementwise {
    /// `y = a ⊙ x`.
    Product = 0,
    /// `y = a ⊙ x + β·y`.
    ProductPlus = 1,
    /// `y = 1/x` where positive and finite, else 0.
    RecipOrZero = 2,
    /// `y = [x > 0]`.
    Support = 3,
}

/// The `mode` of `grad_scaled`.
#[derive(Clone, Copy)]
enum Scaled {
    /// `y += c_b·x` (skipped where `c_b = 0`).
    Axpy = 0,
    /// `y = x + c_b·y`.
    Xpby = 1,
}

impl CudaBackend {
    /// Blocks of a grid-stride loop over `work` items (threads or warps × 32).
    fn grad_blocks(&self, work: usize) -> u32 {
        self.stride_blocks(work, THREADS as usize, 32)
    }

    /// Row or column reductions of `batch` plans `n×m`, optionally weighted (`W`, with its
    /// stride between problems) and applied to `x`.
    fn grad_reduce<T: CudaReal>(
        &self,
        along: Along,
        (plan, batch, n, m): (&CudaBuffer<T>, usize, usize, usize),
        x: Option<&CudaBuffer<T>>,
        weight: Option<(&CudaBuffer<T>, usize)>,
        out: &mut CudaSlice<T>,
    ) -> Result<()> {
        let (base, count, work) = match along {
            Along::Rows => ("grad_rows", batch * n, (batch * n).saturating_mul(32)),
            Along::Cols => ("grad_cols", batch, batch * m),
        };
        let (pw, ws, has) = match weight {
            Some((w, s)) => (self.ptr(&w.data), s as i64, 1i32),
            None => (0u64, 0i64, 0i32),
        };
        let cfg = Launch::linear(self.grad_blocks(work), THREADS);
        // SAFETY: grad_rows/grad_cols(P, x, W, w_stride, has_w, out, count, n, m) over the
        // checked B×n×m plans; `out` holds `count` (rows) or B·m (columns) elements.
        unsafe {
            self.launch(
                &kernel_name::<T>(base),
                cfg,
                (
                    self.ptr(&plan.data),
                    x.map_or(0u64, |b| self.ptr(&b.data)),
                    pw,
                    ws,
                    has,
                    self.ptr(out),
                    count as i64,
                    to_i32(n, "n")?,
                    to_i32(m, "m")?,
                ),
            )
        }
    }

    /// `y` updated by `x` with one coefficient per problem (`grad_scaled`).
    fn grad_scaled<T: CudaReal>(
        &self,
        coef: &[f64],
        x: &CudaBuffer<T>,
        y: &mut CudaBuffer<T>,
        mode: Scaled,
    ) -> Result<()> {
        check_len("y", y.len, x.len)?;
        let per = per_problem(x.len, coef.len(), "x")?;
        if per == 0 {
            return Ok(());
        }
        let c = self
            .stream
            .clone_htod(coef)
            .context("copying CG coefficients to the GPU")?;
        let cfg = Launch::linear(self.grad_blocks(x.len), THREADS);
        // SAFETY: grad_scaled(coef, x, y, total, per, mode) over equal-length x, y of
        // `coef.len()` problems.
        unsafe {
            self.launch(
                &kernel_name::<T>("grad_scaled"),
                cfg,
                (
                    self.ptr(&c),
                    self.ptr(&x.data),
                    self.ptr(&y.data),
                    x.len as i64,
                    per as i64,
                    mode as i32,
                ),
            )
        }?;
        drop(c);
        Ok(())
    }

    /// Element-wise kernels (`grad_elementwise`).
    fn grad_elementwise<T: CudaReal>(
        &self,
        a: Option<&CudaBuffer<T>>,
        x: &CudaBuffer<T>,
        beta: T,
        y: &mut CudaSlice<T>,
        mode: Elementwise,
    ) -> Result<()> {
        if x.len == 0 {
            return Ok(());
        }
        let cfg = Launch::linear(self.grad_blocks(x.len), THREADS);
        // SAFETY: grad_elementwise(a, x, beta, y, total, mode) over x.len elements of the
        // buffers (checked, or allocated to x's length, by the callers).
        unsafe {
            self.launch(
                &kernel_name::<T>("grad_elementwise"),
                cfg,
                (
                    a.map_or(0u64, |b| self.ptr(&b.data)),
                    self.ptr(&x.data),
                    beta,
                    self.ptr(y),
                    x.len as i64,
                    mode as i32,
                ),
            )
        }
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
        check_len("x", x.len, batch * m)?;
        check_len("y", y.len, batch * n)?;
        self.grad_reduce(Along::Rows, (plan, batch, n, m), Some(x), None, &mut y.data)
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
        check_len("x", x.len, batch * n)?;
        check_len("y", y.len, batch * m)?;
        self.grad_reduce(Along::Cols, (plan, batch, n, m), Some(x), None, &mut y.data)
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
            Some(w) => Some((w, weight_stride(w.len, batch, n * m)?)),
            None => None,
        };
        let mut rows = self.alloc::<T>(batch * n, "row marginals")?;
        let mut cols = self.alloc::<T>(batch * m, "column marginals")?;
        self.grad_reduce(Along::Rows, (plan, batch, n, m), None, w, &mut rows)?;
        self.grad_reduce(Along::Cols, (plan, batch, n, m), None, w, &mut cols)?;
        Ok((
            CudaBuffer::new(rows, batch * n),
            CudaBuffer::new(cols, batch * m),
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
        let ws = weight_stride(weight.len, batch, n * m)? as i64;
        check_len("a", a.len, batch * n)?;
        check_len("c", c.len, batch * m)?;
        let out = self.alloc::<T>(plan.len, "the gradient")?;
        let cfg = Launch::linear(self.grad_blocks(plan.len), THREADS);
        // SAFETY: grad_assemble(P, W, w_stride, a, c, alpha, beta, out, total, n, m) over
        // the checked B×n×m plans.
        unsafe {
            self.launch(
                &kernel_name::<T>("grad_assemble"),
                cfg,
                (
                    self.ptr(&plan.data),
                    self.ptr(&weight.data),
                    ws,
                    self.ptr(&a.data),
                    self.ptr(&c.data),
                    alpha,
                    beta,
                    self.ptr(&out),
                    plan.len as i64,
                    to_i32(n, "n")?,
                    to_i32(m, "m")?,
                ),
            )
        }?;
        Ok(CudaBuffer::new(out, plan.len))
    }

    fn batched_dot(&self, batch: usize, x: &CudaBuffer<T>, y: &CudaBuffer<T>) -> Result<Vec<f64>> {
        check_len("y", y.len, x.len)?;
        let per = per_problem(x.len, batch, "x")?;
        if per == 0 {
            return Ok(vec![0.0; batch]);
        }
        let out = self.alloc_f64(batch, "dot products")?;
        let cfg = Launch::linear(self.grad_blocks(batch.saturating_mul(32)), THREADS);
        // SAFETY: grad_dot(x, y, out, batch, per): a warp per problem.
        unsafe {
            self.launch(
                &kernel_name::<T>("grad_dot"),
                cfg,
                (
                    self.ptr(&x.data),
                    self.ptr(&y.data),
                    self.ptr(&out),
                    batch as i64,
                    per as i64,
                ),
            )
        }?;
        self.download_slice(&out, batch, "dot products")
    }

    fn batched_axpy(&self, alpha: &[f64], x: &CudaBuffer<T>, y: &mut CudaBuffer<T>) -> Result<()> {
        self.grad_scaled(alpha, x, y, Scaled::Axpy)
    }

    fn batched_xpby(&self, x: &CudaBuffer<T>, beta: &[f64], y: &mut CudaBuffer<T>) -> Result<()> {
        self.grad_scaled(beta, x, y, Scaled::Xpby)
    }

    fn hadamard(
        &self,
        a: &CudaBuffer<T>,
        x: &CudaBuffer<T>,
        beta: T,
        y: &mut CudaBuffer<T>,
    ) -> Result<()> {
        check_len("a", a.len, x.len)?;
        check_len("y", y.len, x.len)?;
        let mode = if beta == T::zero() {
            Elementwise::Product
        } else {
            Elementwise::ProductPlus
        };
        self.grad_elementwise(Some(a), x, beta, &mut y.data, mode)
    }

    fn recip_or_zero(&self, x: &CudaBuffer<T>) -> Result<CudaBuffer<T>> {
        let mut out = self.alloc::<T>(x.len, "reciprocals")?;
        self.grad_elementwise(None, x, T::zero(), &mut out, Elementwise::RecipOrZero)?;
        Ok(CudaBuffer::new(out, x.len))
    }

    fn support(&self, x: &CudaBuffer<T>) -> Result<CudaBuffer<T>> {
        let mut out = self.alloc::<T>(x.len, "the support")?;
        self.grad_elementwise(None, x, T::zero(), &mut out, Elementwise::Support)?;
        Ok(CudaBuffer::new(out, x.len))
    }
}
