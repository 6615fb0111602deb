//! [`Backend::plan_report`](crate::Backend::plan_report) of a dense cost on the GPU: the
//! row and column sums of `P_ij = exp((f_i + g_j − C_ij)/ε)`, `⟨P, C⟩` and `Σ P`, each
//! entry evaluated from the stored `f`, `g` and `C` (`cuda/report.cu`: the exponent in
//! `f64`, its exponential in `T`, every sum in `f64`), so that the reported errors are
//! those of the plan the potentials define, to `T`'s rounding of each entry.
//! Every sum runs in a fixed order: the same bits from run to run.

use super::cost::DenseCost;
use super::device::{CudaBackend, CudaBuffer};
use super::kernels::{kernel_name, CudaReal};
use super::launch::{to_i32, Launch};
use crate::backend::shape::{check_fg, check_len};
use crate::backend::{Marginals, PlanReport, Potentials};
use crate::{Error, Result};

/// Threads per block of the three report kernels (their `__launch_bounds__`).
const THREADS: usize = 256;

/// Blocks of [`THREADS`] for `threads` threads, within a 1-D grid.
fn blocks_for(threads: usize, what: &str) -> Result<u32> {
    u32::try_from(threads.div_ceil(THREADS).max(1))
        .ok()
        .filter(|&b| b < i32::MAX as u32)
        .ok_or_else(|| Error::shape(what, "too large for one report launch"))
}

impl CudaBackend {
    /// The report of `batch` plans on a dense cost (shared or one per problem).
    pub(super) fn dense_plan_report<T: CudaReal>(
        &self,
        cost: &DenseCost<T>,
        potentials: &Potentials<CudaBuffer<T>>,
        marginals: &Marginals<'_, CudaBuffer<T>>,
        eps: T,
    ) -> Result<Vec<PlanReport>> {
        let (f, g) = (&potentials.f, &potentials.g);
        let batch = check_fg(&cost.dims, f.len, g.len)?;
        let (n, m) = (cost.dims.n, cost.dims.m);
        check_len("mu", marginals.mu.len, batch * n)?;
        check_len("nu", marginals.nu.len, batch * m)?;
        let (bi, ni, mi) = (to_i32(batch, "batch")?, to_i32(n, "n")?, to_i32(m, "m")?);
        let rows_len = batch
            .checked_mul(n)
            .and_then(|v| v.checked_mul(2))
            .ok_or_else(|| Error::shape("f", "B×n overflows"))?;
        let rows = self.alloc_f64(rows_len, "the report's row sums")?;
        let cols = self.alloc_f64(batch * m, "the report's column sums")?;
        let out = self.alloc_f64(4 * batch, "the reports")?;
        let inv_eps = 1.0 / eps.f64();
        let (pf, pg, pc) = (self.ptr(&f.data), self.ptr(&g.data), self.ptr(&cost.c));
        let (prows, pcols, pout) = (self.ptr(&rows), self.ptr(&cols), self.ptr(&out));
        // One warp per row (b, i).
        let row_blocks = blocks_for(rows_len / 2 * 32, "f")?;
        // SAFETY: report_rows(f, g, C, cost_stride, B, n, m, 1/ε, rows) reads the checked
        // B×n, B×m and [B×]n×m buffers and writes 2·B·n sums.
        unsafe {
            self.launch(
                &kernel_name::<T>("report_rows"),
                Launch::linear(row_blocks, THREADS as u32),
                (pf, pg, pc, cost.stride(), bi, ni, mi, inv_eps, prows),
            )
        }?;
        // One thread per column (b, j).
        let col_blocks = blocks_for(batch * m, "g")?;
        // SAFETY: report_cols(f, g, C, cost_stride, B, n, m, 1/ε, cols) writes B·m sums.
        unsafe {
            self.launch(
                &kernel_name::<T>("report_cols"),
                Launch::linear(col_blocks, THREADS as u32),
                (pf, pg, pc, cost.stride(), bi, ni, mi, inv_eps, pcols),
            )
        }?;
        // One block per problem.
        let finish_blocks = blocks_for(batch * THREADS, "batch")?;
        // SAFETY: report_finish(rows, cols, μ, ν, n, m, out) reads the sums above and the
        // checked B×n and B×m marginals; writes 4·B values.
        unsafe {
            self.launch(
                &kernel_name::<T>("report_finish"),
                Launch::linear(finish_blocks, THREADS as u32),
                (
                    prows,
                    pcols,
                    self.ptr(&marginals.mu.data),
                    self.ptr(&marginals.nu.data),
                    ni,
                    mi,
                    pout,
                ),
            )
        }?;
        let host = self.download_slice(&out, 4 * batch, "the reports")?;
        Ok(host
            .chunks_exact(4)
            .map(|r| PlanReport {
                row_error: r[0],
                col_error: r[1],
                cost: r[2],
                mass: Some(r[3]),
            })
            .collect())
    }
}
