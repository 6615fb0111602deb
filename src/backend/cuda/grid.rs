//! Grid costs ([`CostSource::Grid`](crate::backend::CostSource::Grid)) on the GPU: one
//! batched 1-D log-sum-exp pass per axis (`grid_pass_*` in cuda/grid.cu), mirroring
//! [`crate::backend::cpu`]'s separable convolutions; the `n×n` cost is never formed.

use super::{cfg1, cuda_err, to_i32, CostDims, CudaBackend, CudaBuffer, CudaCost, CudaReal};
use crate::backend::GridCost;
use crate::{Error, Result};
use cudarc::driver::PushKernelArg;

/// Longest grid axis the pass kernel stages in shared memory (`GRID_MAX_N` in cuda/grid.cu).
pub(crate) const GRID_MAX_N: usize = 1024;

impl CudaBackend {
    pub(super) fn prepare_grid<T: CudaReal>(&self, grid: &GridCost) -> Result<CudaCost<T>> {
        if let Some(&big) = grid.shape().iter().find(|&&n| n > GRID_MAX_N) {
            return Err(Error::Unavailable(format!(
                "cost: the CUDA backend handles grid axes of at most {GRID_MAX_N} points, the grid {:?} has an axis of {big} (use the CPU backend)",
                grid.shape()
            )));
        }
        let n = grid.len();
        to_i32(n, "grid points")?;
        Ok(CudaCost {
            dims: CostDims {
                n,
                m: n,
                batch: None,
            },
            c: self.alloc::<T>(1, "a grid cost placeholder")?,
            ct: self.alloc::<T>(1, "a grid cost placeholder")?,
            grid: Some(grid.clone()),
            cloud: None,
        })
    }

    /// Passes along every axis: the first reads `input·in_scale`, the rest run in place on
    /// `out`; `weighted` marks the axis whose kernel is multiplied by its cost; with `lm`, the
    /// last pass writes the sinkstep output `ε·(lm − L')`.
    #[allow(clippy::too_many_arguments)]
    fn grid_passes<T: CudaReal>(
        &self,
        grid: &GridCost,
        batch: usize,
        input: u64,
        in_scale: T,
        out: u64,
        lm: Option<u64>,
        weighted: Option<usize>,
        eps: T,
    ) -> Result<()> {
        let func = self.func(&format!("grid_pass_{}", T::SUFFIX))?.clone();
        let shape = grid.shape();
        let total = batch * grid.len();
        for (a, &n) in shape.iter().enumerate() {
            let inner: usize = shape[a + 1..].iter().product();
            let lines = (total / n) as i64;
            let (inner_i, n_i) = (inner as i64, n as i32);
            let src = if a == 0 { input } else { out };
            let scale = if a == 0 { in_scale } else { T::one() };
            let last = a + 1 == shape.len();
            let final_step = i32::from(last && lm.is_some());
            let plm = lm.unwrap_or(0);
            let w = i32::from(weighted == Some(a));
            let blocks = (lines as usize).min(self.inner.sm_count * 16) as u32;
            let threads = (n.div_ceil(32) * 32).min(256) as u32;
            let mut b = self.inner.stream.launch_builder(&func);
            b.arg(&src)
                .arg(&out)
                .arg(&plm)
                .arg(&lines)
                .arg(&n_i)
                .arg(&inner_i)
                .arg(&eps)
                .arg(&scale)
                .arg(&w)
                .arg(&final_step);
            unsafe { b.launch(cfg1(blocks, threads, 0)) }
                .map_err(|e| cuda_err("launching grid_pass", e))?;
        }
        Ok(())
    }

    /// `out[b,x] = ε·lm[b,x] − ε·LSE_y((other[b,y] − C(x,y))/ε)` on a grid.
    pub(super) fn grid_sinkstep<T: CudaReal>(
        &self,
        grid: &GridCost,
        eps: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let n = grid.len();
        if other.len != out.len || log_marginal.len != out.len || out.len == 0 || out.len % n != 0 {
            return Err(Error::shape(
                "sinkstep",
                format!(
                    "buffers of lengths {}, {}, {} do not hold whole images of {n} grid points",
                    other.len, log_marginal.len, out.len
                ),
            ));
        }
        let batch = out.len / n;
        let (po, pl, pout) = (
            self.ptr(&other.data),
            self.ptr(&log_marginal.data),
            self.ptr(&out.data),
        );
        let inv = T::of(1.0 / eps.f64());
        self.grid_passes(grid, batch, po, inv, pout, Some(pl), None, eps)
    }

    /// `⟨P_b, C⟩` per problem, separably:
    /// `Σ_d Σ_x exp(f_x/ε + LSE_y(g_y/ε + log(k·c_d)(x,y)))` (as the CPU backend).
    pub(super) fn grid_transport_cost<T: CudaReal>(
        &self,
        grid: &GridCost,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        let n = grid.len();
        if f.len != g.len || f.len == 0 || f.len % n != 0 {
            return Err(Error::shape(
                "f, g",
                format!(
                    "lengths {} and {} do not hold whole grids of {n} points",
                    f.len, g.len
                ),
            ));
        }
        let batch = f.len / n;
        let gx = u32::try_from(batch)
            .map_err(|_| Error::shape("transport_cost", "too many problems for one launch"))?;
        let scratch = self.alloc::<T>(f.len, "grid scratch")?;
        let sums = self
            .inner
            .stream
            .alloc_zeros::<f64>(batch)
            .map_err(|e| cuda_err("allocating grid cost sums", e))?;
        let (pf, pg, pr, ps) = (
            self.ptr(&f.data),
            self.ptr(&g.data),
            self.ptr(&scratch),
            self.ptr(&sums),
        );
        let inv = T::of(1.0 / eps.f64());
        let per = to_i32(n, "grid points")?;
        let sum = self.func(&format!("grid_cost_sum_{}", T::SUFFIX))?.clone();
        for d in 0..grid.shape().len() {
            self.grid_passes(grid, batch, pg, inv, pr, None, Some(d), eps)?;
            let mut b = self.inner.stream.launch_builder(&sum);
            b.arg(&pf).arg(&pr).arg(&ps).arg(&per).arg(&eps);
            unsafe { b.launch(cfg1(gx, 256, 0)) }
                .map_err(|e| cuda_err("launching grid_cost_sum", e))?;
        }
        let host = self
            .inner
            .stream
            .clone_dtoh(&sums)
            .map_err(|e| cuda_err("reading grid transport costs", e))?;
        Ok(host.into_iter().take(batch).map(T::of).collect())
    }
}
