//! Dense costs on the GPU (cuda/sinkstep.cu): the tiled half-step, the one-pass report,
//! transport costs, plans; and the marginal errors, which need no cost.

use super::cost::DenseCost;
use super::tiled::{Parts, Tiled, TiledArgs};
use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::{kernel_name, CudaReal};
use crate::backend::cuda::runtime::launch::{to_i32, Launch};
use crate::backend::shape::{check_marginal_error, check_sinkstep};
use crate::backend::RelaxedSide;
use crate::backend::{Potentials, Side};
use crate::{Error, Result};

impl CudaBackend {
    /// A half-step on a dense cost (see [`Backend::sinkstep`](crate::Backend::sinkstep)),
    /// weighted by `φ` (`out = ε·lm − φ·ε·LSE`; 1 balanced, see
    /// [`Backend::iterate_relaxed`](crate::Backend::iterate_relaxed)).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::backend::cuda) fn dense_sinkstep<T: CudaReal>(
        &self,
        cost: &DenseCost<T>,
        side: Side,
        eps: T,
        phi: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let batch = check_sinkstep(&cost.dims, side, other.len, log_marginal.len, out.len)?;
        let kernel = Tiled::sinkstep(batch, cost.dims.batch.is_some());
        let (r, k, l) = cost.reduced(side);
        let args = TiledArgs {
            r: self.ptr(r),
            stride: cost.stride(),
            other: self.ptr(&other.data),
            lm: self.ptr(&log_marginal.data),
            out: self.ptr(&out.data),
            batch,
            k,
            l,
            eps,
            phi,
        };
        self.launch_tiled(kernel, args, Parts::Split(&cost.hints, side))
    }

    /// Column errors and transport costs of `batch` plans on a dense cost in one pass over
    /// it: the tiled report kernel writes each output's column mass and transport share,
    /// then `report_sum` adds them up per problem (`B` pairs of `f64` read back).
    pub(in crate::backend::cuda) fn dense_report<T: CudaReal>(
        &self,
        cost: &DenseCost<T>,
        pot: &Potentials<CudaBuffer<T>>,
        (nu, log_nu): (&CudaBuffer<T>, &CudaBuffer<T>),
        eps: T,
        batch: usize,
    ) -> Result<(Vec<T>, Vec<T>)> {
        let (n, m) = (cost.dims.n, cost.dims.m);
        let scratch = self.alloc::<T>(2 * batch * m, "report scratch")?;
        let mass = self.ptr(&scratch);
        let share = mass + (batch * m * std::mem::size_of::<T>()) as u64;
        let args = TiledArgs {
            r: self.ptr(&cost.c),
            stride: cost.stride(),
            other: self.ptr(&pot.f.data),
            lm: self.ptr(&log_nu.data),
            out: self.ptr(&pot.g.data),
            batch,
            k: n,
            l: m,
            eps,
            phi: T::one(),
        };
        let kernel = Tiled::report(batch, cost.dims.batch.is_some());
        self.launch_tiled(kernel, args, Parts::Report { mass, share })?;
        let sums = self.alloc_f64(2 * batch, "report sums")?;
        let per = to_i32(m, "nu")?;
        let blocks = u32::try_from(batch).map_err(|_| Error::shape("nu", "too many problems"))?;
        // SAFETY: report_sum(nu, mass, share, out, per): one block per problem over `per`
        // outputs of each B×m buffer, two doubles per problem.
        unsafe {
            self.launch(
                &kernel_name::<T>("report_sum"),
                Launch::linear(blocks, 256),
                (self.ptr(&nu.data), mass, share, self.ptr(&sums), per),
            )
        }?;
        let host = self.download_slice(&sums, 2 * batch, "the report")?;
        drop(scratch);
        let errors = (0..batch).map(|k| T::of(host[2 * k])).collect();
        let costs = (0..batch).map(|k| T::of(host[2 * k + 1])).collect();
        Ok((errors, costs))
    }

    /// `⟨P_b, C_b⟩` of `batch` plans on a dense cost: `f64` partial sums per (problem, block
    /// of at most 64 rows), enough blocks to fill the GPU, added on the host.
    pub(in crate::backend::cuda) fn dense_transport_cost<T: CudaReal>(
        &self,
        cost: &DenseCost<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
        batch: usize,
    ) -> Result<Vec<T>> {
        let (n, m) = (cost.dims.n, cost.dims.m);
        let rows = (n * batch).div_ceil(4 * self.inner.sm_count).clamp(1, 64);
        let blocks = n.div_ceil(rows);
        let partials = batch
            .checked_mul(blocks)
            .ok_or_else(|| Error::shape("transport_cost", "too many partial sums"))?;
        let partial = self.alloc_f64(partials, "partial sums")?;
        let size = std::mem::size_of::<T>() as u64;
        let (pc, pf, pg, pp) = (
            self.ptr(&cost.c),
            self.ptr(&f.data),
            self.ptr(&g.data),
            self.ptr(&partial),
        );
        let per_matrix = if cost.dims.batch.is_some() {
            (n * m) as u64 * size
        } else {
            0
        };
        // The grid's y dimension holds at most 65535 problems per launch.
        let mut b0 = 0usize;
        while b0 < batch {
            let count = (batch - b0).min(65535);
            let cfg = Launch::new((blocks as u32, count as u32, 1), (256, 1, 1));
            let b = b0 as u64;
            // SAFETY: transport_cost(C, cost_stride, f, g, partial, n, m, rows, eps) for
            // problems b0.. of the checked buffers; `blocks` partials per problem.
            unsafe {
                self.launch(
                    &kernel_name::<T>("transport_cost"),
                    cfg,
                    (
                        pc + b * per_matrix,
                        cost.stride(),
                        pf + b * n as u64 * size,
                        pg + b * m as u64 * size,
                        pp + b * blocks as u64 * 8,
                        n as i32,
                        m as i32,
                        rows as i32,
                        eps,
                    ),
                )
            }?;
            b0 += count;
        }
        let host = self.download_slice(&partial, partials, "transport costs")?;
        Ok((0..batch)
            .map(|b| T::of(host[b * blocks..(b + 1) * blocks].iter().sum()))
            .collect())
    }

    /// The plans `P_b` (`B×n×m`) of `batch` problems on a dense cost.
    pub(in crate::backend::cuda) fn dense_plan<T: CudaReal>(
        &self,
        cost: &DenseCost<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
        batch: usize,
    ) -> Result<CudaBuffer<T>> {
        let (n, m) = (cost.dims.n, cost.dims.m);
        let total = batch
            .checked_mul(n)
            .and_then(|v| v.checked_mul(m))
            .ok_or_else(|| Error::shape("plan", "B×n×m overflows"))?;
        let plan = self.alloc::<T>(total, "the plans")?;
        let blocks = self.stride_blocks(total, 256, 32);
        // SAFETY: plan(C, cost_stride, f, g, P, B, n, m, eps) writes B×n×m entries.
        unsafe {
            self.launch(
                &kernel_name::<T>("plan"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(&cost.c),
                    cost.stride(),
                    self.ptr(&f.data),
                    self.ptr(&g.data),
                    self.ptr(&plan),
                    to_i32(batch, "batch")?,
                    n as i32,
                    m as i32,
                    eps,
                ),
            )
        }?;
        Ok(CudaBuffer::new(plan, total))
    }

    /// See [`Backend::marginal_error`](crate::Backend::marginal_error): one block per
    /// problem, `B` values read back.
    pub(in crate::backend::cuda) fn marginal_errors<T: CudaReal>(
        &self,
        batch: usize,
        marginal: &CudaBuffer<T>,
        old: &CudaBuffer<T>,
        new: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        let per = check_marginal_error(batch, marginal.len, old.len, new.len)?;
        let per = to_i32(per, "marginal")?;
        let blocks = u32::try_from(batch)
            .map_err(|_| Error::shape("marginal_error", "too many problems"))?;
        let errors = self.alloc::<T>(batch, "marginal errors")?;
        // SAFETY: marginal_error(a, old, new, err, per, eps): one block per problem over
        // `per` entries of the three (equal-length) buffers.
        unsafe {
            self.launch(
                &kernel_name::<T>("marginal_error"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(&marginal.data),
                    self.ptr(&old.data),
                    self.ptr(&new.data),
                    self.ptr(&errors),
                    per,
                    eps,
                ),
            )
        }?;
        self.download_slice(&errors, batch, "marginal errors")
    }

    /// See [`Backend::relaxed_sides`](crate::Backend::relaxed_sides): one block per problem
    /// sums in f64 (`relaxed_side`), four doubles per problem read back.
    pub(in crate::backend::cuda) fn relaxed_side_sums<T: CudaReal>(
        &self,
        batch: usize,
        a: &CudaBuffer<T>,
        pot: &CudaBuffer<T>,
        half: &CudaBuffer<T>,
        eps: T,
        rho: f64,
    ) -> Result<Vec<RelaxedSide>> {
        let per = check_marginal_error(batch, a.len, pot.len, half.len)?;
        let per = to_i32(per, "marginal")?;
        let blocks =
            u32::try_from(batch).map_err(|_| Error::shape("relaxed_sides", "too many problems"))?;
        let sums = self.alloc_f64(4 * batch, "unbalanced report sums")?;
        let exact = i32::from(rho == f64::INFINITY);
        // SAFETY: relaxed_side(a, pot, half, out, per, eps, rho, exact): one block per
        // problem over `per` entries of the three (equal-length) buffers, four doubles each.
        unsafe {
            self.launch(
                &kernel_name::<T>("relaxed_side"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(&a.data),
                    self.ptr(&pot.data),
                    self.ptr(&half.data),
                    self.ptr(&sums),
                    per,
                    eps.f64(),
                    rho,
                    exact,
                ),
            )
        }?;
        let host = self.download_slice(&sums, 4 * batch, "unbalanced report sums")?;
        Ok(host
            .chunks(4)
            .map(|s| RelaxedSide {
                residual: s[0],
                mass: s[1],
                dual: s[2],
                kl: s[3],
            })
            .collect())
    }
}
