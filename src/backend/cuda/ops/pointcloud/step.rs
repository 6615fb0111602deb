//! Point-cloud half-steps (`pc_sinkstep_*`): the kernel family for the cloud's dimension
//! and form, the split of the reduction over blocks, the launch and its finish.

use super::*;
use crate::backend::cuda::runtime::launch::Join;

/// `(kslice, splits)` for `blocks` blocks (all the same work) over `len_red` reduced points
/// when the GPU holds `slots` blocks at once: below 4 waves, the fewest splits (at most 64,
/// each at least 4 stages of `PC_KT` points) whose last wave of blocks is nearly full, since
/// a block count just past a multiple of `slots` leaves most of the GPU idle in its last
/// wave. For example, 64 blocks on 528 slots take 8 splits (512 blocks, one nearly full
/// wave), where 7 or 9 splits would leave 1.7 waves.
pub(super) fn wave_split(blocks: usize, len_red: usize, slots: usize) -> (usize, usize) {
    // From 4 waves on, the last one costs at most a fifth: no split.
    let max_splits = if blocks >= 4 * slots {
        1
    } else {
        (len_red / (4 * PC_KT)).clamp(1, 64)
    };
    let efficiency = |s: usize| wave_fill(blocks * s, slots);
    let best = (1..=max_splits).map(efficiency).fold(0.0, f64::max);
    let want = (1..=max_splits)
        .find(|&s| efficiency(s) >= 0.95 * best)
        .unwrap_or(1);
    let kslice = (len_red.div_ceil(want).div_ceil(PC_KT) * PC_KT).max(PC_KT);
    (kslice, len_red.div_ceil(kslice).max(1))
}

/// The busy share of the GPU's block slots over the waves that run `total` equal blocks on
/// `slots` slots (the last wave may be part full).
fn wave_fill(total: usize, slots: usize) -> f64 {
    let (total, slots) = (total as f64, slots.max(1) as f64);
    total / ((total / slots).ceil() * slots)
}

/// Reduced points a slice of `pc_sinkstep_tn` is a multiple of. The kernel takes a slice of
/// any length (its stage loader pads, its chunk loop stops at the last chunk of 8 that holds
/// a point); 16 keeps slices whole pairs of chunks.
const PC_TN_GRANULE: usize = 16;

/// `(kslice, splits)` for `blocks` blocks (all the same work) over `len_red` reduced points
/// when the GPU holds `slots` blocks at once, for a kernel whose slices may end at any
/// multiple of `granule` points: the fewest splits (at most 64, slices of at least
/// 2·`PC_TN_KT` points) whose waves are within 0.5 % of the fullest, at any block count; a
/// last wave part full costs its share even after many (2048 blocks on 264 slots are 7.76
/// waves unsplit; 9 splits make 70 waves, 99.7 % full). The partials cost 8 bytes an output
/// a split, and many waves need none.
pub(super) fn fill_split(
    blocks: usize,
    len_red: usize,
    slots: usize,
    granule: usize,
) -> (usize, usize) {
    let max_splits = (len_red / (2 * PC_TN_KT)).clamp(1, 64);
    let slice = |s: usize| len_red.div_ceil(s).div_ceil(granule).max(1) * granule;
    let efficiency = |s: usize| wave_fill(blocks * len_red.div_ceil(slice(s)), slots);
    let best = (1..=max_splits).map(efficiency).fold(0.0, f64::max);
    let want = (1..=max_splits)
        .find(|&s| efficiency(s) >= 0.995 * best)
        .unwrap_or(1);
    let kslice = slice(want);
    (kslice, len_red.div_ceil(kslice).max(1))
}

/// The small-d half-step (`d ≤ PC_DMAX`) for a form, dimension and precision: its entry
/// point (without the precision suffix), outputs per block, reduced points per stage and
/// dynamic shared bytes.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct SmallStep {
    pub entry: String,
    pub per_block: usize,
    pub stage: usize,
    pub smem: usize,
    /// Where the kernel's reduction slices may end at any multiple of this many points (its
    /// chunk loop stops at the slice's end): split by [`fill_split`], else by [`wave_split`].
    pub slice_granule: Option<usize>,
    /// Whether the kernel's `scale` argument is the f16 operands' balance
    /// ([`CudaCloud::f16_balance`]) rather than [`CudaCloud::scale`].
    pub f16_balance: bool,
}

impl SmallStep {
    /// The norm form at d = 3 and 4 in f32 on split-f16 MMAs (`PC_TN_R` tiles of 16
    /// outputs a warp, its stages in static shared memory; at d = 1 and 2 the FMA kernels
    /// are faster), else the FMA kernel of the form with its outputs per thread (TJ of the
    /// entry point).
    pub fn choose(form: CloudForm, d: usize, precision: Precision) -> SmallStep {
        let f32 = precision == Precision::F32;
        if f32 && form == CloudForm::Norm && matches!(d, 3 | 4) {
            return SmallStep {
                entry: format!("pc_sinkstep_tn_d{d}"),
                per_block: PC_BLOCK / 2 * PC_TN_R,
                stage: if d == 3 { PC_TN_KT3 } else { PC_TN_KT },
                smem: 0,
                slice_granule: Some(PC_TN_GRANULE),
                f16_balance: true,
            };
        }
        let prefix = match form {
            CloudForm::Norm => "pc_sinkstep_nf",
            CloudForm::Direct => "pc_sinkstep",
        };
        let (entry, dmax) = by_dim(prefix, d, true).expect("small-d half-steps have d ≤ PC_DMAX");
        let tj = match (form, dmax, f32) {
            (CloudForm::Norm, ..=2, true) => 8,
            (_, ..=4, true) => 4,
            _ => 2,
        };
        let size = if f32 { 4 } else { 8 };
        SmallStep {
            entry,
            per_block: PC_BLOCK * tj,
            stage: PC_KT,
            smem: (dmax * PC_KT + PC_KT) * size,
            slice_granule: None,
            f16_balance: false,
        }
    }
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

    /// `(kslice, splits)` of a small-d half-step (`kernel`, `smem` dynamic shared bytes,
    /// stages of `kt` points) of `blocks` blocks over `len_red` reduced points: with the
    /// kernel's resident blocks per SM from the driver, [`fill_split`] where its slices may
    /// end at any multiple of `slice_granule` points, else [`wave_split`]; the splits of
    /// [`Self::cloud_split`] if the driver cannot say.
    pub(super) fn wave_split(
        &self,
        kernel: &str,
        smem: usize,
        blocks: usize,
        len_red: usize,
        kt: usize,
        slice_granule: Option<usize>,
    ) -> (usize, usize) {
        match (self.blocks_per_sm(kernel, smem), slice_granule) {
            (Some(r), Some(granule)) if r >= 1 => {
                fill_split(blocks, len_red, self.inner.sm_count * r as usize, granule)
            }
            (Some(r), None) if r >= 1 => {
                wave_split(blocks, len_red, self.inner.sm_count * r as usize)
            }
            _ => self.cloud_split(blocks, len_red, kt),
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
        let mut scale = cl.scale(eps);
        let (kernel, per_block, kt, smem, slice_granule) = match (cl.form(eps), &tc_plan) {
            (None, Some((_, tl))) => {
                let entry = kernel_name::<T>(&tl.entry);
                (entry, PC_TC_BL, tl.stage, tl.smem, None)
            }
            (Some(form), _) => {
                let s = SmallStep::choose(form, cl.d, T::PRECISION);
                if s.f16_balance {
                    scale = cl.f16_balance(side, eps);
                }
                let entry = kernel_name::<T>(&s.entry);
                (entry, s.per_block, s.stage, s.smem, s.slice_granule)
            }
            (None, None) => {
                let smem = (PC_DN_DC * (PC_DN_TL + PC_DN_TK) + 2 * PC_DN_TK) * size;
                (
                    kernel_name::<T>("pc_sinkstep_dn"),
                    PC_DN_TL,
                    PC_DN_TK,
                    smem,
                    None,
                )
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
            self.wave_split(&kernel, smem, gx * batch, len_red, kt, slice_granule)
        } else {
            self.cloud_split(gx * batch, len_red, kt)
        };
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
                            Join(shared, (cl.d as i32, eps, scale, kslice, root, cl.pair())),
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
    fn small_d_half_steps_take_their_kernels() {
        use CloudForm::{Direct, Norm};
        let f32 = Precision::F32;
        // The MMA kernel: d = 3 and 4 of the f32 norm form only.
        for d in [3, 4] {
            let s = SmallStep::choose(Norm, d, f32);
            assert_eq!(s.entry, format!("pc_sinkstep_tn_d{d}"));
            let stage = if d == 3 { 1024 } else { 512 };
            assert_eq!((s.per_block, s.stage, s.smem), (512, stage, 0));
            assert_eq!(s.slice_granule, Some(16));
            assert!(s.f16_balance);
            assert_eq!(
                SmallStep::choose(Direct, d, f32).entry,
                format!("pc_sinkstep_d{d}")
            );
            assert_eq!(
                SmallStep::choose(Direct, d, Precision::F64).entry,
                format!("pc_sinkstep_d{d}")
            );
        }
        // d = 1, 2: the FMA norm-form kernels, 8 outputs a thread, each with its stage of d
        // coordinates and the column terms; the direct form at d = 3: 4 a thread.
        let s = SmallStep::choose(Norm, 2, f32);
        assert_eq!(
            s,
            SmallStep {
                entry: "pc_sinkstep_nf_d2".into(),
                per_block: 2048,
                stage: 128,
                smem: 3 * 128 * 4,
                slice_granule: None,
                f16_balance: false,
            }
        );
        let s = SmallStep::choose(Direct, 3, f32);
        assert_eq!((s.per_block, s.smem), (1024, 4 * 128 * 4));
        // d ≤ 16: the d16 entry points, 2 outputs a thread; f64 takes 2 at every d.
        let s = SmallStep::choose(Norm, 7, f32);
        assert_eq!(
            (s.entry.as_str(), s.per_block, s.smem),
            ("pc_sinkstep_nf_d16", 512, 17 * 128 * 4)
        );
        let s = SmallStep::choose(Direct, 3, Precision::F64);
        assert_eq!((s.per_block, s.smem), (512, 4 * 128 * 8));
    }

    #[test]
    fn f16_operands_meet_near_the_geometric_mean_inside_f16s_range() {
        // Both near √(x·y): 2^10 and 1 meet at 2^5; 3 and 3 are left as they are.
        assert_eq!(f16_balance(1024.0, 1.0), 32.0);
        assert_eq!(f16_balance(3.0, 3.0), 1.0);
        assert_eq!(f16_balance(1.0, 1024.0), 1.0 / 32.0);
        // One side 0 (a cloud at its centre): the other brought to at most 2^14.
        assert_eq!(f16_balance(1e6, 0.0), 64.0);
        assert_eq!(f16_balance(0.0, 1e6), 1.0 / 64.0);
        assert_eq!(f16_balance(0.0, 0.0), 1.0);
        assert_eq!(f16_balance(f64::NAN, 2.0), 1.0);
        // Every product up to 2^27 fits: both ≤ 2^14, and the scale is a power of two.
        for (x, y) in [
            (1e-9, 1e9),
            (5e3, 2.6e4),
            (2.0f64.powi(27), 1.0),
            (7.3, 1e-30),
        ] {
            let b = f16_balance(x, y);
            assert_eq!(b.log2().fract(), 0.0, "{x} {y}: {b}");
            assert!(x / b <= 16384.0 && y * b <= 16384.0, "{x} {y}: {b}");
        }
    }

    #[test]
    fn fine_slices_fill_every_wave() {
        // otCbig on an H100 or H200 (132 SMs × 2 blocks): 2048 blocks are 7.76 waves; 9
        // slices of 116512 points make 70 waves, 99.7 % full.
        assert_eq!(fill_split(2048, 1 << 20, 264, 16), (116_512, 9));
        // otC10: 128 blocks; 33 slices of 2000 points fill 16 waves exactly.
        assert_eq!(fill_split(128, 65536, 264, 16), (2000, 33));
        // Short reductions: slices of at least two stages; a tiny one is not split.
        assert_eq!(fill_split(1, 3000, 264, 16), (1504, 2));
        assert_eq!(fill_split(1, 100, 264, 16), (112, 1));
        // Every choice covers the reduction once, in whole granules, and is within 0.5 % of
        // the fullest waves that any split count up to 64 gives.
        for (blocks, len, slots) in [(7, 300_000, 264), (64, 1 << 20, 396), (1024, 1 << 20, 264)] {
            let (kslice, splits) = fill_split(blocks, len, slots, 16);
            assert!(kslice % 16 == 0 && kslice * splits >= len && kslice * (splits - 1) < len);
            let fill = |n: usize| {
                let total = (blocks * n) as f64;
                total / ((total / slots as f64).ceil() * slots as f64)
            };
            let best = (1..=64)
                .map(|s| fill(len.div_ceil(len.div_ceil(s).div_ceil(16) * 16)))
                .fold(0.0, f64::max);
            assert!(
                fill(splits) >= 0.995 * best,
                "{blocks} {len}: {splits} splits"
            );
        }
    }

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
