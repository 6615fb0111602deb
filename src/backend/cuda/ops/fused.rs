//! Whole Sinkhorn loops of small dense problems in one launch (`sinkhorn_fused*` in
//! cuda/sinkstep.cu): one block, or one thread-block cluster when few problems would leave
//! most SMs idle, per problem, with both orientations of the cost and both potentials in
//! shared memory.

use super::cost::DenseCost;
use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::{define, kernel_name, CudaReal, Module};
use crate::backend::cuda::runtime::launch::{Launch, Start};
use crate::backend::{Marginals, Potentials};
use crate::{Error, Result};

/// Most threads a block of the fused kernel may have (its `__launch_bounds__`).
const MAX_THREADS: usize = define(Module::Sinkstep.text(), "FUSED_MAX_THREADS");

/// Consecutive outputs a lane group of the fused kernel reduces (`FL` of `sinkhorn_fused`).
const FUSED_OUTPUTS: usize = define(Module::Sinkstep.text(), "FUSED_OUTPUTS");

/// Row length of the fused kernel's shared cost copies (`fused_pad` in cuda/sinkstep.cu):
/// at least `l` rounded up to 8, ≡ 4 (mod 32).
fn fused_pad(l: usize) -> usize {
    let p = l.div_ceil(8) * 8;
    p + (36 - p % 32) % 32
}

/// Lanes per output group of the fused kernel for a reduction of length `k`
/// (`fused_lanes` in cuda/sinkstep.cu): 8 to 16 terms per lane, at most 32 lanes.
fn fused_lanes(k: usize) -> usize {
    let mut g = 1;
    while g < 32 && g * 16 < k {
        g *= 2;
    }
    g
}

/// A fused launch as chosen for one batch.
struct FusedShape {
    /// The entry point.
    name: String,
    /// CTAs per problem (1: no cluster).
    cluster: usize,
    /// Lanes per output group of the `g` and the `f` half-step.
    lanes: (i32, i32),
    threads: u32,
    /// Dynamic shared memory, in bytes.
    smem: usize,
}

impl CudaBackend {
    /// Dynamic shared memory of the fused kernel for an `n×m` problem, in bytes: both
    /// orientations of the cost (rows padded by [`fused_pad`]), then `f`, `g`, `log μ` and
    /// `log ν`, each padded to a multiple of 8.
    pub(in crate::backend::cuda) fn fused_smem<T>(n: usize, m: usize) -> usize {
        let (n8, m8) = (n.div_ceil(8) * 8, m.div_ceil(8) * 8);
        (n * fused_pad(m) + m * fused_pad(n) + 2 * n8 + 2 * m8) * std::mem::size_of::<T>()
    }

    /// Whether [`CudaBackend::fused_iterate`] runs `cost` (dense, and small enough).
    pub(in crate::backend::cuda) fn fuses<T: CudaReal>(&self, cost: &DenseCost<T>) -> bool {
        self.tuning().fused
            && Self::fused_smem::<T>(cost.dims.n, cost.dims.m) <= self.inner.max_smem
    }

    /// `iters` iterations of `batch` problems on a cost that [fuses](Self::fuses), in one
    /// launch per 2^30 iterations, the half-steps weighted by `(φ_μ, φ_ν)` ((1, 1)
    /// balanced; see [`Backend::iterate_relaxed`](crate::Backend::iterate_relaxed)).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::backend::cuda) fn fused_iterate<T: CudaReal>(
        &self,
        cost: &DenseCost<T>,
        eps: T,
        (phi_mu, phi_nu): (T, T),
        marginals: &Marginals<'_, CudaBuffer<T>>,
        pot: &mut Potentials<CudaBuffer<T>>,
        batch: usize,
        iters: usize,
    ) -> Result<()> {
        let (n, m) = (cost.dims.n, cost.dims.m);
        let shape = self.fused_shape::<T>(n, m, batch)?;
        // One block (cluster) per problem; the grid's x dimension holds 2^31 − 1 blocks.
        let gx = batch
            .checked_mul(shape.cluster)
            .and_then(|b| u32::try_from(b).ok())
            .ok_or_else(|| Error::shape("iterate", "too many problems for one launch"))?;
        let start = match shape.cluster {
            1 => Start::Plain,
            c => Start::Cluster(c as u32),
        };
        let cfg = Launch::new((gx, 1, 1), (shape.threads, 1, 1))
            .shared(shape.smem)
            .start(start);
        let (pc, pf, pg) = (
            self.ptr(&cost.c),
            self.ptr(&pot.f.data),
            self.ptr(&pot.g.data),
        );
        let (pmu, pnu) = (
            self.ptr(&marginals.log_mu.data),
            self.ptr(&marginals.log_nu.data),
        );
        let mut left = iters;
        while left > 0 {
            let now = left.min(1 << 30);
            // SAFETY: sinkhorn_fused(C, cost_stride, f, g, lmu, lnu, n, m, eps, iters,
            // g_col, g_row, phi_mu, phi_nu); the caller checked the buffers against
            // batch × n×m.
            unsafe {
                self.launch(
                    &shape.name,
                    cfg,
                    (
                        pc,
                        cost.stride(),
                        pf,
                        pg,
                        pmu,
                        pnu,
                        n as i32,
                        m as i32,
                        eps,
                        now as i32,
                        shape.lanes.0,
                        shape.lanes.1,
                        phi_mu,
                        phi_nu,
                    ),
                )
            }?;
            left -= now;
        }
        Ok(())
    }

    /// The entry point, cluster, lanes and threads of a fused launch.
    fn fused_shape<T: CudaReal>(&self, n: usize, m: usize, batch: usize) -> Result<FusedShape> {
        let tuning = self.tuning();
        let name = kernel_name::<T>("sinkhorn_fused");
        let smem = Self::fused_smem::<T>(n, m);
        // Lanes per output group (a power of two ≤ 32): by reduction length; in a cluster,
        // widened (fewer terms per lane, at least 2) while a CTA stays within 256 threads.
        // Then enough threads for this CTA's groups of the wider half-step, in whole warps.
        let shape = |cl: usize| {
            let side = |l: usize, k: usize| {
                let groups = l.div_ceil(FUSED_OUTPUTS).div_ceil(cl);
                let mut g = fused_lanes(k);
                if cl > 1 {
                    while g < 32 && groups * g * 2 <= 256 && g * 4 <= k {
                        g *= 2;
                    }
                }
                (g, groups * g)
            };
            let ((g_col, t_col), (g_row, t_row)) = (side(m, n), side(n, m));
            let threads = (t_col.max(t_row).div_ceil(32) * 32).min(MAX_THREADS);
            ((g_col as i32, g_row as i32), threads as u32)
        };
        // Few problems would leave most SMs idle: a cluster of `cl` CTAs per problem (each
        // takes every cl-th output group of a half-step), as large as the GPU schedules.
        let sms = self.inner.sm_count;
        let mut cl = if tuning.fused_cluster >= 2 && batch * 2 <= sms {
            let c = (sms / batch).min(tuning.fused_cluster);
            1 << c.ilog2()
        } else {
            1
        };
        let (mut lanes, mut threads) = shape(cl);
        while cl > 1 {
            let got = self.cluster_size(&name, threads, smem as u32, cl)?;
            if got == cl {
                break;
            }
            cl = got;
            (lanes, threads) = shape(cl);
        }
        Ok(FusedShape {
            name,
            cluster: cl,
            lanes,
            threads,
            smem,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_and_lanes_follow_the_kernel() {
        for l in 1..200 {
            let p = fused_pad(l);
            assert!(p >= l && p % 32 == 4 && p < l + 40, "{l} → {p}");
        }
        assert_eq!(
            [1, 16, 17, 100, 512, 513, 10_000].map(fused_lanes),
            [1, 1, 2, 8, 32, 32, 32]
        );
        assert_eq!(MAX_THREADS, 1024);
    }
}
