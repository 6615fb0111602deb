//! [`BarycenterKernels`] on the GPU (cuda/barycenter.cu): two elementwise kernels and one
//! per-problem reduction; only the `P` spreads cross to the host.

use super::{cfg1, cuda_err, to_i32, CudaBackend, CudaBuffer, CudaCost, CudaReal};
use crate::backend::barycenter::{
    bary_iterations_unfused, BaryBuffers, BaryLayout, BarycenterKernels,
};
use crate::{Error, Result};
use cudarc::driver::PushKernelArg;

impl CudaBackend {
    fn elementwise_blocks(&self, total: usize) -> u32 {
        total.div_ceil(256).clamp(1, self.inner.sm_count * 16) as u32
    }
}

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
        if let Some(grid) = &cost.grid {
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
        let (k, m) = (layout.inputs, layout.m);
        if weights.len != layout.problems * k {
            return Err(Error::shape(
                "weights",
                format!("length {}, expected {}×{k}", weights.len, layout.problems),
            ));
        }
        let func = self.func(&format!("bary_log_mean_{}", T::SUFFIX))?.clone();
        let (pw, pv, pb) = (
            self.ptr(&weights.data),
            self.ptr(&v.data),
            self.ptr(&bar.data),
        );
        let total = bar.len as i64;
        let (ki, mi) = (to_i32(k, "inputs")?, to_i32(m, "bins")?);
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pw).arg(&pv).arg(&pb).arg(&total).arg(&ki).arg(&mi);
        unsafe { b.launch(cfg1(self.elementwise_blocks(bar.len), 256, 0)) }
            .map_err(|e| cuda_err("launching bary_log_mean", e))?;
        Ok(())
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
        let func = self.func(&format!("bary_potential_{}", T::SUFFIX))?.clone();
        let (pb, pv, pg) = (self.ptr(&bar.data), self.ptr(&v.data), self.ptr(&g.data));
        let total = g.len as i64;
        let (ki, mi) = (to_i32(layout.inputs, "inputs")?, to_i32(layout.m, "bins")?);
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pb).arg(&pv).arg(&pg).arg(&total).arg(&ki).arg(&mi);
        unsafe { b.launch(cfg1(self.elementwise_blocks(g.len), 256, 0)) }
            .map_err(|e| cuda_err("launching bary_potential", e))?;
        Ok(())
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
        let func = self.func(&format!("bary_spread_{}", T::SUFFIX))?.clone();
        let gx = u32::try_from(layout.problems)
            .map_err(|_| Error::shape("g", "too many barycenter problems for one launch"))?;
        let err = self.alloc::<T>(layout.problems, "barycenter spreads")?;
        let (pg, pv, pe) = (self.ptr(&g.data), self.ptr(&v.data), self.ptr(&err));
        let (ki, mi) = (to_i32(layout.inputs, "inputs")?, to_i32(layout.m, "bins")?);
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pg).arg(&pv).arg(&pe).arg(&ki).arg(&mi).arg(&eps);
        unsafe { b.launch(cfg1(gx, 256, 0)) }.map_err(|e| cuda_err("launching bary_spread", e))?;
        let mut out = self
            .inner
            .stream
            .clone_dtoh(&err)
            .map_err(|e| cuda_err("reading barycenter spreads", e))?;
        out.truncate(layout.problems);
        Ok(out)
    }
}
