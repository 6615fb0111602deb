//! [`Backend`] on the GPU: each method validates its buffers, chooses the kernels for the
//! kind of cost, and launches them (dense: [`super::dense`], [`super::tiled`],
//! [`super::fused`]; grid: [`super::grid`]; point clouds: [`super::pointcloud`]).

use super::cost::{CostKind, CudaCost};
use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::CudaReal;
use crate::backend::shape::{check_fg, check_nu};
use crate::backend::RelaxedSide;
use crate::backend::{
    column_error_and_cost_by_half_step, iterate_half_steps, iterate_relaxed_half_steps,
    plan_report_from_half_steps, Backend, CostDims, CostSource, Marginals, PlanReport, Potentials,
    RowStats, Side,
};
use crate::{Error, Result};

impl<T: CudaReal> Backend<T> for CudaBackend {
    type Buffer = CudaBuffer<T>;
    type Cost = CudaCost<T>;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn upload(&self, data: &[T]) -> Result<CudaBuffer<T>> {
        Ok(CudaBuffer::new(
            self.upload_slice(data, "a buffer")?,
            data.len(),
        ))
    }

    fn download(&self, buf: &CudaBuffer<T>) -> Result<Vec<T>> {
        if buf.len == 0 {
            return Ok(Vec::new());
        }
        self.download_slice(&buf.data, buf.len, "a buffer from the GPU")
    }

    fn filled(&self, len: usize, value: T) -> Result<CudaBuffer<T>> {
        let mut data = self.alloc::<T>(len, "a buffer")?;
        self.fill_slice(&mut data, len, value)?;
        Ok(CudaBuffer::new(data, len))
    }

    fn len(&self, buf: &CudaBuffer<T>) -> usize {
        buf.len
    }

    fn prepare_cost(&self, cost: &CostSource<'_, T>) -> Result<CudaCost<T>> {
        self.prepare(cost)
    }

    fn cost_dims(&self, cost: &CudaCost<T>) -> CostDims {
        cost.dims()
    }

    fn row_stats(&self, buf: &CudaBuffer<T>, rows: usize) -> Result<Vec<RowStats>> {
        self.buffer_row_stats(buf, rows)
    }

    fn ln(&self, buf: &CudaBuffer<T>) -> Result<CudaBuffer<T>> {
        self.buffer_ln(buf)
    }

    fn start_potential(&self, a: &CudaBuffer<T>) -> Result<CudaBuffer<T>> {
        self.buffer_start(a)
    }

    fn offset_rows(
        &self,
        src: &CudaBuffer<T>,
        delta: &[f64],
        dst: &mut CudaBuffer<T>,
    ) -> Result<()> {
        self.buffer_offset_rows(src, delta, dst)
    }

    fn where_empty(
        &self,
        a: &CudaBuffer<T>,
        src: &CudaBuffer<T>,
        dst: &mut CudaBuffer<T>,
    ) -> Result<()> {
        self.buffer_where_empty(a, src, dst)
    }

    fn prepare_cloud_buffer(
        &self,
        x: &CudaBuffer<T>,
        y: &CudaBuffer<T>,
        layout: crate::backend::CloudLayout,
    ) -> Result<(CudaCost<T>, f64)> {
        let (cloud, max_cost) = self.buffer_cloud(x, y, layout)?;
        Ok((
            CudaCost {
                kind: CostKind::Cloud(cloud),
            },
            max_cost,
        ))
    }

    fn prepare_dense_buffer(
        &self,
        cost: &CudaBuffer<T>,
        dims: CostDims,
        shift: &[f64],
    ) -> Result<CudaCost<T>> {
        self.buffer_dense_cost(cost, dims, shift)
    }

    fn refill_dense_buffer(
        &self,
        prepared: &mut CudaCost<T>,
        cost: &CudaBuffer<T>,
        shift: &[f64],
    ) -> Result<()> {
        self.refill_buffer_dense_cost(prepared, cost, shift)
    }

    fn sinkstep(
        &self,
        cost: &CudaCost<T>,
        side: Side,
        eps: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        match &cost.kind {
            CostKind::Dense(c) => {
                self.dense_sinkstep(c, side, eps, T::one(), other, log_marginal, out)
            }
            CostKind::Grid(g) => self.grid_sinkstep(g, eps, other, log_marginal, out),
            CostKind::Cloud(c) => self.cloud_sinkstep(c, side, eps, other, log_marginal, out),
        }
    }

    /// Small dense problems (both orientations of the cost and the potentials fit in one
    /// block's shared memory) run every iteration in one launch; the rest half-step by
    /// half-step, with no host synchronisation in between.
    fn iterate(
        &self,
        cost: &CudaCost<T>,
        eps: T,
        marginals: &Marginals<'_, CudaBuffer<T>>,
        potentials: &mut Potentials<CudaBuffer<T>>,
        iters: usize,
    ) -> Result<()> {
        let batch = check_iterate(cost, marginals, potentials)?;
        if iters == 0 {
            return Ok(());
        }
        let one = (T::one(), T::one());
        match &cost.kind {
            CostKind::Dense(c) if self.fuses(c) => {
                self.fused_iterate(c, eps, one, marginals, potentials, batch, iters)
            }
            _ => iterate_half_steps(self, cost, eps, marginals, potentials, iters),
        }
    }

    /// Dense costs weight the fused loop's or the tiled kernels' half-steps by `φ` (no
    /// separate relax pass); grids and point clouds relax after each half-step.
    fn iterate_relaxed(
        &self,
        cost: &CudaCost<T>,
        eps: T,
        (phi_mu, phi_nu): (T, T),
        marginals: &Marginals<'_, CudaBuffer<T>>,
        potentials: &mut Potentials<CudaBuffer<T>>,
        iters: usize,
    ) -> Result<()> {
        let batch = check_iterate(cost, marginals, potentials)?;
        if iters == 0 {
            return Ok(());
        }
        let phi = (phi_mu, phi_nu);
        match &cost.kind {
            CostKind::Dense(c) if self.fuses(c) => {
                self.fused_iterate(c, eps, phi, marginals, potentials, batch, iters)
            }
            CostKind::Dense(c) => {
                let Potentials { f, g } = potentials;
                for _ in 0..iters {
                    self.dense_sinkstep(c, Side::Col, eps, phi_nu, f, marginals.log_nu, g)?;
                    self.dense_sinkstep(c, Side::Row, eps, phi_mu, g, marginals.log_mu, f)?;
                }
                Ok(())
            }
            _ => iterate_relaxed_half_steps(self, cost, eps, phi, marginals, potentials, iters),
        }
    }

    /// Dense costs: one tiled pass over the cost yields each plan's column marginals and
    /// `⟨P, C⟩` together; grids and point clouds: a `g` half-step into scratch.
    fn column_error_and_cost(
        &self,
        cost: &CudaCost<T>,
        potentials: &Potentials<CudaBuffer<T>>,
        marginals: &Marginals<'_, CudaBuffer<T>>,
        eps: T,
    ) -> Result<(Vec<T>, Vec<T>)> {
        let (f, g) = (&potentials.f, &potentials.g);
        let batch = check_fg(&cost.dims(), f.len, g.len)?;
        check_nu(marginals.nu.len, marginals.log_nu.len, g.len)?;
        match &cost.kind {
            CostKind::Dense(c) => {
                self.dense_report(c, potentials, (marginals.nu, marginals.log_nu), eps, batch)
            }
            _ => column_error_and_cost_by_half_step(self, cost, potentials, marginals, eps),
        }
    }

    /// Dense costs: every entry of each plan in f64 (`cuda/report.cu`), with its mass; f32
    /// point clouds: every entry with its cost in f64 from the points as given; grids and
    /// f64 clouds: the half-step default.
    fn plan_report(
        &self,
        cost: &CudaCost<T>,
        potentials: &Potentials<CudaBuffer<T>>,
        marginals: &Marginals<'_, CudaBuffer<T>>,
        eps: T,
    ) -> Result<Vec<PlanReport>> {
        match &cost.kind {
            CostKind::Dense(c) => self.dense_plan_report(c, potentials, marginals, eps),
            CostKind::Cloud(c) => match self.cloud_plan_report(c, potentials, marginals, eps)? {
                // The errors from the exact costs; the distance, the transport cost of the
                // half-steps' plan (see `PlanReport::cost`).
                Some(exact) => {
                    let costs = self.cloud_transport_cost(c, &potentials.f, &potentials.g, eps)?;
                    Ok(exact
                        .into_iter()
                        .zip(costs)
                        .map(|(r, t)| PlanReport {
                            cost: t.f64(),
                            mass: None,
                            ..r
                        })
                        .collect())
                }
                None => plan_report_from_half_steps(self, cost, potentials, marginals, eps),
            },
            _ => plan_report_from_half_steps(self, cost, potentials, marginals, eps),
        }
    }

    fn relax(
        &self,
        out: &mut CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        eps: T,
        phi: T,
    ) -> Result<()> {
        if log_marginal.len != out.len {
            return Err(Error::shape(
                "log_marginal",
                format!(
                    "has {} entries but the potential has {}",
                    log_marginal.len, out.len
                ),
            ));
        }
        let len = out.len;
        self.relax_slice(&mut out.data, &log_marginal.data, len, eps, phi)
    }

    fn marginal_error(
        &self,
        batch: usize,
        marginal: &CudaBuffer<T>,
        old: &CudaBuffer<T>,
        new: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        self.marginal_errors(batch, marginal, old, new, eps)
    }

    fn relaxed_sides(
        &self,
        batch: usize,
        a: &CudaBuffer<T>,
        pot: &CudaBuffer<T>,
        half: &CudaBuffer<T>,
        eps: T,
        rho: f64,
    ) -> Result<Vec<RelaxedSide>> {
        self.relaxed_side_sums(batch, a, pot, half, eps, rho)
    }

    fn transport_cost(
        &self,
        cost: &CudaCost<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        match &cost.kind {
            CostKind::Dense(c) => {
                let batch = check_fg(&c.dims, f.len, g.len)?;
                self.dense_transport_cost(c, f, g, eps, batch)
            }
            CostKind::Grid(grid) => self.grid_transport_cost(grid, f, g, eps),
            CostKind::Cloud(cl) => self.cloud_transport_cost(cl, f, g, eps),
        }
    }

    fn plan(
        &self,
        cost: &CudaCost<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<CudaBuffer<T>> {
        match &cost.kind {
            CostKind::Dense(c) => {
                let batch = check_fg(&c.dims, f.len, g.len)?;
                self.dense_plan(c, f, g, eps, batch)
            }
            CostKind::Grid(_) => Err(Error::Unavailable(
                "plan: dense plans of grid costs are not available on the CUDA backend (use the CPU backend, or GridCost::to_dense for a small grid)".into(),
            )),
            CostKind::Cloud(cl) => self.cloud_plan(cl, f, g, eps),
        }
    }
}

/// The batch size of `iterate`'s buffers, checked against the cost: `f` and `g` (`B×n`,
/// `B×m`) and the log marginals of the same lengths.
fn check_iterate<T: CudaReal>(
    cost: &CudaCost<T>,
    marginals: &Marginals<'_, CudaBuffer<T>>,
    potentials: &Potentials<CudaBuffer<T>>,
) -> Result<usize> {
    let dims = cost.dims();
    let batch = check_fg(&dims, potentials.f.len, potentials.g.len)?;
    let (log_mu, log_nu) = (marginals.log_mu, marginals.log_nu);
    if log_mu.len != potentials.f.len || log_nu.len != potentials.g.len {
        return Err(Error::shape(
            "iterate",
            format!(
                "log marginals of lengths {} and {} do not fit {batch} problems of size {}×{}",
                log_mu.len, log_nu.len, dims.n, dims.m
            ),
        ));
    }
    Ok(batch)
}
