//! Point-cloud half-steps (`pc_sinkstep_*`): the kernel family for the cloud's dimension
//! and form, the split of the reduction over blocks, the launch and its finish.

use super::*;
use crate::backend::cuda::launch::Join;

/// `(kslice, splits)` for `blocks` blocks (all the same work) over `len_red` reduced points
/// when the GPU holds `slots` blocks at once: below 4 waves, the fewest splits (at most 64,
/// each at least 4 stages of `PC_KT` points) whose last wave of blocks is nearly full, since
/// a block count just past a multiple of `slots` leaves most of the GPU idle in its last
/// wave. otC10 (64 blocks of 1024 outputs, 528 slots on an H100 at 4 blocks an SM) takes 8
/// splits, 512 blocks: 26.72 ms, where 7 and 9 splits (1.7 waves) took 30.2 and 29.5, and
/// 4, 6, 12, 16, 24, 32, 33, 48 and 64 splits 26.25 (48) to 27.3 (4), one H100 call.
pub(super) fn wave_split(blocks: usize, len_red: usize, slots: usize) -> (usize, usize) {
    // From 4 waves on, the last one costs at most a fifth: no split.
    let max_splits = if blocks >= 4 * slots {
        1
    } else {
        (len_red / (4 * PC_KT)).clamp(1, 64)
    };
    let efficiency = |s: usize| {
        let (total, slots) = ((blocks * s) as f64, slots.max(1) as f64);
        total / ((total / slots).ceil() * slots)
    };
    let best = (1..=max_splits).map(efficiency).fold(0.0, f64::max);
    let want = (1..=max_splits)
        .find(|&s| efficiency(s) >= 0.95 * best)
        .unwrap_or(1);
    let kslice = (len_red.div_ceil(want).div_ceil(PC_KT) * PC_KT).max(PC_KT);
    (kslice, len_red.div_ceil(kslice).max(1))
}

impl CudaBackend {
    /// `(kslice, splits)` of a reduction over `len_red` points in stages of `kt` by `blocks`
    /// blocks: split only when the grid alone would give the SMs fewer than 4 blocks each.
    pub(super) fn cloud_split(&self, blocks: usize, len_red: usize, kt: usize) -> (usize, usize) {
        let target = 4 * self.inner.sm_count;
        let want = if blocks < target {
            target.div_ceil(blocks).min((len_red / (4 * kt)).max(1))
        } else {
            1
        };
        let kslice = len_red.div_ceil(want).div_ceil(kt) * kt;
        (kslice, len_red.div_ceil(kslice))
    }

    /// `(kslice, splits)` of a small-d half-step (`kernel`, `smem` dynamic shared bytes) of
    /// `blocks` blocks over `len_red` reduced points: [`wave_split`] with the kernel's
    /// resident blocks per SM from the driver (the splits of [`Self::cloud_split`] if it
    /// cannot say).
    pub(super) fn wave_split(
        &self,
        kernel: &str,
        smem: usize,
        blocks: usize,
        len_red: usize,
    ) -> (usize, usize) {
        match self.blocks_per_sm(kernel, smem) {
            Some(r) if r >= 1 => wave_split(blocks, len_red, self.inner.sm_count * r as usize),
            _ => self.cloud_split(blocks, len_red, PC_KT),
        }
    }

    /// How many blocks of `PC_BLOCK` threads and `smem` dynamic shared bytes of `kernel` an
    /// SM holds at once, by the driver's occupancy calculator (`None` if it cannot say).
    fn blocks_per_sm(&self, kernel: &str, smem: usize) -> Option<u32> {
        let f = self.func(kernel).ok()?;
        self.inner.ctx.bind_to_thread().ok()?;
        f.occupancy_max_active_blocks_per_multiprocessor(PC_BLOCK as u32, smem, None)
            .ok()
    }

    /// One half-step on point clouds (see [`Backend::sinkstep`](crate::Backend::sinkstep)).
    pub(in crate::backend::cuda) fn cloud_sinkstep<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        side: Side,
        eps: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let tc = cl.tc.as_ref();
        self.cloud_sinkstep_by(cl, side, eps, other, log_marginal, out, tc)
    }

    /// [`Self::cloud_sinkstep`] with the cross term of the dot-product form on the tensor
    /// cores when `tc` is given, else by exact FMA products.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cloud_sinkstep_by<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        side: Side,
        eps: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
        tc: Option<&TcOperands<T>>,
    ) -> Result<()> {
        let batch = check_sinkstep(&cl.dims(), side, other.len, log_marginal.len, out.len)?;
        let (out_pts, len_out, red_pts, len_red) = cl.sides(side);
        let size = std::mem::size_of::<T>();
        // The tensor-core kernel: its entry point and whether the output tile stays in
        // shared memory.
        let tc_plan = match (by_dim("pc_sinkstep", cl.d, true), tc) {
            (None, Some(tc)) => Some((tc, self.tc_layout(tc, size, cl.root))),
            _ => None,
        };
        // (entry point, outputs per block, reduced points per stage, shared bytes)
        let prefix = match cl.form(eps) {
            Some(CloudForm::Norm) => "pc_sinkstep_nf",
            _ => "pc_sinkstep",
        };
        let mma = self.tuning().small_d_mma;
        let (kernel, per_block, kt, smem) = match (by_dim(prefix, cl.d, true), &tc_plan) {
            (None, Some((_, tl))) => (kernel_name::<T>(&tl.entry), PC_TC_BL, tl.stage, tl.smem),
            // The norm form at d = 3 and 4 on split-TF32 MMAs: PC_TN_R tiles of 16 outputs a
            // warp, stages in static shared memory.
            (Some(_), _) if mma && prefix == "pc_sinkstep_nf" && matches!(cl.d, 3 | 4) => {
                let base = format!("pc_sinkstep_tn_d{}", cl.d);
                (kernel_name::<T>(&base), PC_BLOCK / 2 * PC_TN_R, PC_TN_KT, 0)
            }
            (Some((base, dmax)), _) => {
                // Outputs per thread (TJ of the kernel's entry point).
                let tj = match (prefix, dmax, T::PRECISION) {
                    ("pc_sinkstep_nf", ..=2, Precision::F32) => 8,
                    (_, ..=4, Precision::F32) => 4,
                    _ => 2,
                };
                let smem = (dmax * PC_KT + PC_KT) * size;
                (kernel_name::<T>(&base), PC_BLOCK * tj, PC_KT, smem)
            }
            (None, None) => {
                let smem = (PC_DN_DC * (PC_DN_TL + PC_DN_TK) + 2 * PC_DN_TK) * size;
                (kernel_name::<T>("pc_sinkstep_dn"), PC_DN_TL, PC_DN_TK, smem)
            }
        };
        let gx = len_out.div_ceil(per_block);
        if batch > 65535 {
            return Err(Error::shape(
                "sinkstep",
                format!("{batch} problems exceed the launch grid (65535)"),
            ));
        }
        let (kslice, splits) = if cl.d <= PC_DMAX {
            self.wave_split(&kernel, smem, gx * batch, len_red)
        } else {
            self.cloud_split(gx * batch, len_red, kt)
        };
        if self.tuning().verbose {
            let per_sm = self.blocks_per_sm(&kernel, smem);
            eprintln!(
                "logot: {kernel} grid {gx}x{batch}x{splits} of {PC_BLOCK} threads, {smem} shared bytes, \
                 {kslice} reduced points a block, {per_sm:?} blocks an SM on {} SMs",
                self.inner.sm_count
            );
        }
        let parts = if splits > 1 {
            Some(self.alloc::<T>(2 * splits * batch * len_out, "K-split partials")?)
        } else {
            None
        };
        let (pm, ps) = match &parts {
            Some(p) => {
                let half = splits * batch * len_out * size;
                (self.ptr(p), self.ptr(p) + half as u64)
            }
            None => (0u64, 0u64),
        };
        let (plm, pout) = (self.ptr(&log_marginal.data), self.ptr(&out.data));
        let (bi, li) = (to_i32(batch, "batch")?, to_i32(len_out, "cost")?);
        let (ki, kslice) = (to_i32(len_red, "cost")?, to_i32(kslice, "cost")?);
        let gx = u32::try_from(gx).map_err(|_| Error::shape("sinkstep", "too many outputs"))?;
        let cfg =
            Launch::new((gx, batch as u32, splits as u32), (PC_BLOCK as u32, 1, 1)).shared(smem);
        let (po, pr, pother) = (self.ptr(out_pts), self.ptr(red_pts), self.ptr(&other.data));
        // The middle of every entry point's parameter list: the other side's potentials, the
        // log-marginals, the output, the K-split partials, B, K (reduced) and L (outputs).
        let shared = (pother, plm, pout, pm, ps, bi, ki, li);
        let root = cl.root as i32;
        if let Some((tc, _)) = tc_plan {
            let [ob, os, rb, rs] = tc.sides(side);
            let (on, rn) = cl
                .side_norms(side)
                .expect("clouds above PC_DMAX dimensions have norms");
            // SAFETY: PC_TC_ARGS in cuda/pointcloud.cu: the TF32 parts hold len·dp values per
            // cloud and pair (the small ones unread without x3), the norms len per pair, the norms len_out and len_red, the
            // potentials were checked against the clouds, the partials hold
            // 2·splits·batch·len_out elements; `smem` is the kernel's layout for `resident`.
            unsafe {
                self.launch(
                    &kernel,
                    cfg,
                    Join(
                        (
                            self.ptr(ob),
                            self.ptr(os),
                            self.ptr(rb),
                            self.ptr(rs),
                            self.ptr(on),
                            self.ptr(rn),
                        ),
                        Join(
                            shared,
                            (
                                to_i32(tc.dp, "x")?,
                                eps,
                                tc.dot_scale,
                                kslice,
                                root,
                                cl.pair(),
                            ),
                        ),
                    ),
                )
            }?;
        } else {
            match cl.side_norms(side) {
                // SAFETY: PC_STEP_ARGS in cuda/pointcloud.cu; the potentials were checked
                // against the clouds, the partials hold 2·splits·batch·len_out elements.
                None => unsafe {
                    self.launch(
                        &kernel,
                        cfg,
                        Join(
                            (po, pr),
                            Join(
                                shared,
                                (cl.d as i32, eps, cl.scale(eps), kslice, root, cl.pair()),
                            ),
                        ),
                    )
                }?,
                // SAFETY: pc_sinkstep_dn in cuda/pointcloud.cu (PC_STEP_ARGS with the norms of
                // both clouds, len_out and len_red of them, and no scale).
                Some((on, rn)) => unsafe {
                    self.launch(
                        &kernel,
                        cfg,
                        Join(
                            (po, pr, self.ptr(on), self.ptr(rn)),
                            Join(shared, (cl.d as i32, eps, kslice, root, cl.pair())),
                        ),
                    )
                }?,
            }
        }
        if splits > 1 {
            let finish = TiledArgs {
                r: 0,
                stride: 0,
                other: pother,
                lm: plm,
                out: pout,
                batch,
                k: len_red,
                l: len_out,
                eps,
                phi: T::one(),
            };
            self.finish_split((pm, ps), splits, &finish)?;
        }
        // Fresh partials are freed in stream order after the kernels.
        drop(parts);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_fill_the_last_wave() {
        // otC on an H100 (132 SMs × 3 blocks): 64 blocks → 6 splits of 86 stages.
        let (kslice, splits) = wave_split(64, 65536, 396);
        assert_eq!((kslice, splits), (86 * PC_KT, 6));
        assert!(kslice * splits >= 65536 && kslice * (splits - 1) < 65536);
        // Many blocks: no split; short reductions: at most len/(4·PC_KT) splits.
        assert_eq!(wave_split(4000, 65536, 396).1, 1);
        assert_eq!(wave_split(1, 1024, 396), (4 * PC_KT, 2));
        assert_eq!(wave_split(2, 100, 396), (PC_KT, 1));
        // Every split count covers the reduction exactly once.
        for (blocks, len, slots) in [(7, 300_000, 264), (64, 1 << 20, 396), (1024, 1 << 20, 396)] {
            let (kslice, splits) = wave_split(blocks, len, slots);
            assert!(kslice % PC_KT == 0 && kslice * splits >= len);
            assert!(
                kslice * (splits - 1) < len,
                "{blocks} {len}: {kslice}×{splits}"
            );
        }
    }
}
