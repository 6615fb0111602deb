//! [`BarycenterKernels`] on the GPU (cuda/barycenter.cu): three elementwise kernels and one
//! per-problem reduction; only the `P` spreads cross to the host. Small grid costs run
//! whole iterations in one launch ([`CudaBackend::grid_bary_fused`]).

use super::cost::{CostKind, CudaCost};
use crate::backend::barycenter::{
    bary_iterations_unfused, BaryBuffers, BaryLayout, BarycenterKernels,
};
use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::{kernel_name, CudaReal};
use crate::backend::cuda::runtime::launch::{to_i32, Launch};
use crate::{Error, Result};

impl<T: CudaReal> BarycenterKernels<T> for CudaBackend {
    /// On small grid costs, every iteration in one launch (`grid_bary_fused_*`, one
    /// thread-block cluster per problem); elsewhere the kernels one by one.
    fn bary_iterations(
        &self,
        cost: &CudaCost<T>,
        layout: BaryLayout,
        eps: T,
        state: &mut BaryBuffers<CudaBuffer<T>>,
        iters: usize,
    ) -> Result<()> {
        if let CostKind::Grid(grid) = &cost.kind {
            if self.grid_bary_fused(grid, layout, eps, state, iters)? {
                return Ok(());
            }
        }
        bary_iterations_unfused(self, cost, layout, eps, state, iters)
    }

    fn bary_log_mean(
        &self,
        layout: BaryLayout,
        weights: &CudaBuffer<T>,
        v: &CudaBuffer<T>,
        bar: &mut CudaBuffer<T>,
    ) -> Result<()> {
        layout.check("v", v.len, true)?;
        layout.check("bar", bar.len, false)?;
        layout.check_weights(weights.len)?;
        let (k, m) = (layout.inputs, layout.m);
        let cfg = Launch::linear(self.stride_blocks(bar.len, 256, 16), 256);
        // SAFETY: bary_log_mean(w, v, bar, total, K, m) over the checked P×m outputs.
        unsafe {
            self.launch(
                &kernel_name::<T>("bary_log_mean"),
                cfg,
                (
                    self.ptr(&weights.data),
                    self.ptr(&v.data),
                    self.ptr(&bar.data),
                    bar.len as i64,
                    to_i32(k, "inputs")?,
                    to_i32(m, "bins")?,
                ),
            )
        }
    }

    fn bary_log_power_mean(
        &self,
        layout: BaryLayout,
        weights: &CudaBuffer<T>,
        v: &CudaBuffer<T>,
        bar: &mut CudaBuffer<T>,
        t: T,
    ) -> Result<()> {
        layout.check("v", v.len, true)?;
        layout.check("bar", bar.len, false)?;
        layout.check_weights(weights.len)?;
        let (k, m) = (layout.inputs, layout.m);
        let cfg = Launch::linear(self.stride_blocks(bar.len, 256, 16), 256);
        // SAFETY: bary_log_power_mean(w, v, bar, total, K, m, t) over the checked P×m outputs.
        unsafe {
            self.launch(
                &kernel_name::<T>("bary_log_power_mean"),
                cfg,
                (
                    self.ptr(&weights.data),
                    self.ptr(&v.data),
                    self.ptr(&bar.data),
                    bar.len as i64,
                    to_i32(k, "inputs")?,
                    to_i32(m, "bins")?,
                    t,
                ),
            )
        }
    }

    fn bary_potential(
        &self,
        layout: BaryLayout,
        bar: &CudaBuffer<T>,
        v: &CudaBuffer<T>,
        g: &mut CudaBuffer<T>,
    ) -> Result<()> {
        layout.check("v", v.len, true)?;
        layout.check("g", g.len, true)?;
        layout.check("bar", bar.len, false)?;
        let cfg = Launch::linear(self.stride_blocks(g.len, 256, 16), 256);
        // SAFETY: bary_potential(bar, v, g, total, K, m) over the checked P×K×m outputs.
        unsafe {
            self.launch(
                &kernel_name::<T>("bary_potential"),
                cfg,
                (
                    self.ptr(&bar.data),
                    self.ptr(&v.data),
                    self.ptr(&g.data),
                    g.len as i64,
                    to_i32(layout.inputs, "inputs")?,
                    to_i32(layout.m, "bins")?,
                ),
            )
        }
    }

    fn bary_spread(
        &self,
        layout: BaryLayout,
        g: &CudaBuffer<T>,
        v: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        layout.check("v", v.len, true)?;
        layout.check("g", g.len, true)?;
        let blocks = u32::try_from(layout.problems)
            .map_err(|_| Error::shape("g", "too many barycenter problems for one launch"))?;
        let spreads = self.alloc::<T>(layout.problems, "barycenter spreads")?;
        // SAFETY: bary_spread(g, v, err, K, m, eps): one block per problem.
        unsafe {
            self.launch(
                &kernel_name::<T>("bary_spread"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(&g.data),
                    self.ptr(&v.data),
                    self.ptr(&spreads),
                    to_i32(layout.inputs, "inputs")?,
                    to_i32(layout.m, "bins")?,
                    eps,
                ),
            )
        }?;
        self.download_slice(&spreads, layout.problems, "barycenter spreads")
    }
}
