//! The tensor-core operands of f32 clouds above `PC_DMAX` dimensions: the cross-term
//! kernel a cloud uses ([`CrossKernel`]), its split TF32 or scaled f16 operands and their
//! layout.

use super::*;

/// How a half-step forms the cross term `x·y` of the dot-product form (`d > PC_DMAX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CrossKernel {
    /// Exact FMA products (`pc_sinkstep_dn`, f32 and f64).
    Fma,
    /// One TF32 MMA per product (`pc_sinkstep_tc`, f32).
    Tf32,
    /// Split TF32, three MMAs per product (`pc_sinkstep_tc3`, f32).
    Tf32x3,
    /// One f16 MMA per product of the scaled coordinates (`pc_sinkstep_h`, f32).
    F16,
    /// Split f16, three MMAs per product (`pc_sinkstep_h2`, f32).
    F16x2,
}

impl CrossKernel {
    /// The kernel for a cloud of dimension `d` in precision `p` with the user's choice:
    /// tensor cores only for f32 above `PC_DMAX` dimensions (below, the exact difference
    /// form is cheap; f64 has no TF32 path).
    pub(super) fn of(precision: CrossPrecision, p: Precision, d: usize) -> CrossKernel {
        if p != Precision::F32 || d <= PC_DMAX {
            return CrossKernel::Fma;
        }
        match precision {
            CrossPrecision::Exact => CrossKernel::Fma,
            CrossPrecision::Tf32 => CrossKernel::Tf32,
            CrossPrecision::Tf32x3 => CrossKernel::Tf32x3,
            CrossPrecision::F16 => CrossKernel::F16,
            CrossPrecision::F16x2 => CrossKernel::F16x2,
        }
    }

    /// Whether the operands are split in two parts (three products).
    pub(super) fn split(self) -> bool {
        matches!(self, CrossKernel::Tf32x3 | CrossKernel::F16x2)
    }

    /// Whether the operands are f16 pairs (two coordinates a 32-bit word).
    pub(super) fn half(self) -> bool {
        matches!(self, CrossKernel::F16 | CrossKernel::F16x2)
    }

    /// The half-step's entry point (without its type suffix).
    pub(super) fn entry(self) -> &'static str {
        match self {
            CrossKernel::Fma => "pc_sinkstep_dn",
            CrossKernel::Tf32 => "pc_sinkstep_tc",
            CrossKernel::Tf32x3 => "pc_sinkstep_tc3",
            CrossKernel::F16 => "pc_sinkstep_h",
            CrossKernel::F16x2 => "pc_sinkstep_h2",
        }
    }

    /// 32-bit words per point of `d` coordinates: one coordinate a word (two with f16),
    /// rounded up to a multiple of `PC_TC_DC`.
    pub(super) fn words(self, d: usize) -> usize {
        let w = if self.half() { d.div_ceil(2) } else { d };
        w.div_ceil(PC_TC_DC) * PC_TC_DC
    }
}

/// The power of two `2^k` that takes a cloud's largest |coordinate| `max_abs` into
/// (2^13, 2^14] (f16's range with room for the split); `k` at most 60, so that the product
/// of two clouds' inverse scales stays a normal f32 (a cloud below 2^-46 keeps fewer bits);
/// 1 for an all-zero cloud.
pub(super) fn f16_scale(max_abs: f64) -> f64 {
    if max_abs <= 0.0 || !max_abs.is_finite() {
        return 1.0;
    }
    let k = 14 - max_abs.log2().ceil() as i32;
    2f64.powi(k.min(60))
}

/// The two clouds as tensor-core operands (`pc_tc_split`): point-major, `dp` 32-bit words
/// per point ([`CrossKernel::words`], zero-padded), the TF32 (or scaled f16) rounding of
/// each coordinate and, for the split kernels, the rounding of what it leaves; `dot_scale`
/// undoes the scales of the f16 operands (1 for TF32).
pub(super) struct TcOperands<T> {
    pub(super) kernel: CrossKernel,
    pub(super) dp: usize,
    pub(super) dot_scale: T,
    pub(super) x: (CudaSlice<T>, Option<CudaSlice<T>>),
    pub(super) y: (CudaSlice<T>, Option<CudaSlice<T>>),
}

impl<T> TcOperands<T> {
    /// `(output big, output small, reduced big, reduced small)` of a half-step on `side`;
    /// the small parts are the big ones when there are none (then unread).
    pub(super) fn sides(&self, side: Side) -> [&CudaSlice<T>; 4] {
        let (o, r) = match side {
            Side::Col => (&self.y, &self.x),
            Side::Row => (&self.x, &self.y),
        };
        [
            &o.0,
            o.1.as_ref().unwrap_or(&o.0),
            &r.0,
            r.1.as_ref().unwrap_or(&r.0),
        ]
    }
}

impl CudaBackend {
    /// The operand parts of `pairs` structure-of-arrays clouds of `len` points each, stored
    /// one after the other (`pc_tc_split`): point-major, `dp` words each, in the same order;
    /// f16 pairs of the coordinates times `scale` for an f16 `kernel` (else TF32); the
    /// second part only for a split kernel.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn tc_split<T: CudaReal>(
        &self,
        pts: &CudaSlice<T>,
        (len, pairs): (usize, usize),
        d: usize,
        (kernel, dp): (CrossKernel, usize),
        scale: T,
        what: &str,
    ) -> Result<(CudaSlice<T>, Option<CudaSlice<T>>)> {
        let x3 = kernel.split();
        let total = len
            .checked_mul(dp)
            .and_then(|t| t.checked_mul(pairs))
            .filter(|&t| i64::try_from(t).is_ok())
            .ok_or_else(|| Error::shape("x", format!("{len} points of {dp} coordinates")))?;
        let big = self.alloc::<T>(total, what)?;
        let small = if x3 {
            Some(self.alloc::<T>(total, what)?)
        } else {
            None
        };
        let psmall = small.as_ref().map_or(self.ptr(&big), |v| self.ptr(v));
        let blocks = self.stride_blocks(total, 256, 8);
        // SAFETY: pc_tc_split(pts, big, small, len, d, dp, x3, B, half, scale) reads B·len·d
        // coordinates and writes B·len·dp words to big (and to small when x3).
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_tc_split"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(pts),
                    self.ptr(&big),
                    psmall,
                    to_i32(len, "x")?,
                    to_i32(d, "x")?,
                    to_i32(dp, "x")?,
                    x3 as i32,
                    to_i32(pairs, "x")?,
                    kernel.half() as i32,
                    scale,
                ),
            )
        }?;
        Ok((big, small))
    }

    /// The launch of the tensor-core half-step on `tc` (`root`: `|x − y|`) on this GPU
    /// ([`tc_launch`]).
    pub(super) fn tc_layout<T>(&self, tc: &TcOperands<T>, size: usize, root: bool) -> TcLaunch {
        let gpu = TcGpu {
            warpgroup_mma: self.inner.tuning.warpgroup_mma,
            max_smem: self.inner.max_smem,
            stream_stage: self.inner.tc_stream_stage,
        };
        tc_launch(tc.kernel, tc.dp, size, root, gpu)
    }
}

/// What [`tc_launch`] asks of the GPU: whether its kernels are compiled with warpgroup MMAs
/// (sm_90a and [`Tuning::warpgroup_mma`](crate::backend::cuda::Tuning::warpgroup_mma)), its
/// shared bytes a block, and the stage of its single-product streamed `mma.sync` kernels
/// (`tc_stream_stage`).
#[derive(Clone, Copy, Debug)]
pub(super) struct TcGpu {
    pub warpgroup_mma: bool,
    pub max_smem: usize,
    pub stream_stage: usize,
}

/// The launch of the tensor-core half-step of `kernel` on points of `dp` words (`size`-byte
/// values; `root`: `|x − y|`): the output tile (of both parts with a split kernel) stays in
/// shared memory for the whole reduction when it takes at most `TC_RESIDENT_BYTES` (and
/// fits; stages of `PC_TC_BK` points, `PC_TC_RSLOTS` slots of reduced chunks with single
/// products and two with split ones, the kernel without suffix), else it is streamed by
/// chunks in two slots like the reduced tile (stages of `PC_TC_BKS` with split products, of
/// the GPU's `stream_stage` with single ones; `_stream`). With `|x − y|²` and warpgroup
/// MMAs, where their layouts fit: `pc_sinkstep_hw`, `_tcw` and `_h2w` for resident tiles
/// (F16, TF32, F16x2; stages of `PC_WG_BK`), `_hw_stream` and `_tcw_stream` for streamed
/// single products (stages of `PC_WGS_BK`).
pub(super) fn tc_launch(
    kernel: CrossKernel,
    dp: usize,
    size: usize,
    root: bool,
    gpu: TcGpu,
) -> TcLaunch {
    let split = kernel.split();
    let parts = if split { 2 } else { 1 };
    let chunks = dp / PC_TC_DC;
    let slots = if split { 2 } else { PC_TC_RSLOTS };
    let resident = tc_smem(parts, chunks, slots, PC_TC_BK, size);
    // The warpgroup-MMA kernel of `|x − y|²` where the GPU has them.
    let warpgroup = match kernel {
        CrossKernel::F16 => Some("pc_sinkstep_hw"),
        CrossKernel::Tf32 => Some("pc_sinkstep_tcw"),
        CrossKernel::F16x2 => Some("pc_sinkstep_h2w"),
        CrossKernel::Tf32x3 | CrossKernel::Fma => None,
    }
    .filter(|_| !root && gpu.warpgroup_mma);
    if parts * PC_TC_BL * PC_TC_DC * size * chunks <= TC_RESIDENT_BYTES && resident <= gpu.max_smem
    {
        let wg = wg_smem(parts, dp);
        if let Some(entry) =
            warpgroup.filter(|_| parts * chunks <= PC_WG_KB_MAX && wg <= gpu.max_smem)
        {
            return TcLaunch {
                entry: entry.into(),
                stage: PC_WG_BK,
                smem: wg,
            };
        }
        TcLaunch {
            entry: kernel.entry().into(),
            stage: PC_TC_BK,
            smem: resident,
        }
    } else if let Some(entry) = warpgroup.filter(|_| !split && wgs_smem() <= gpu.max_smem) {
        TcLaunch {
            entry: format!("{entry}_stream"),
            stage: PC_WGS_BK,
            smem: wgs_smem(),
        }
    } else {
        let bk = if split { PC_TC_BKS } else { gpu.stream_stage };
        TcLaunch {
            entry: format!("{}_stream", kernel.entry()),
            stage: bk,
            smem: tc_smem(parts, 2, 2, bk, size),
        }
    }
}

/// How a tensor-core half-step is launched: its entry point (without the type suffix), the
/// reduced points of a stage and the shared bytes.
pub(super) struct TcLaunch {
    pub entry: String,
    pub stage: usize,
    pub smem: usize,
}

/// Shared bytes of `pc_sinkstep_wg_body` for `parts` parts of points of `dp` words: 1024
/// bytes of room to align the tiles, the output tile, `PC_WG_SLOTS` stages of reduced points
/// and their column terms.
fn wg_smem(parts: usize, dp: usize) -> usize {
    1024 + parts * (PC_TC_BL + PC_WG_SLOTS * PC_WG_BK) * dp * 4 + PC_WG_SLOTS * PC_WG_BK * 4
}

/// Shared bytes of `pc_sinkstep_wgs_body`: 1024 bytes of room to align the tiles,
/// `PC_WGS_SLOTS` slots of a 128-byte chunk of each output and reduced point, and the
/// column terms of two stages.
fn wgs_smem() -> usize {
    1024 + PC_WGS_SLOTS * (PC_TC_BL + PC_WGS_BK) * 128 + 2 * PC_WGS_BK * 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::runtime::kernels::{tc_stream_define, tc_stream_stage, PC_TC_BKS1};

    #[test]
    fn warpgroup_tiles_fit_hopper_at_every_resident_width() {
        // The widest resident F16 point (d = 256: four 128-byte blocks) takes 1 KiB of
        // alignment room, a 64 KiB output tile and three 32 KiB stages with their terms.
        let widest = PC_WG_KB_MAX * PC_TC_DC;
        assert_eq!(
            wg_smem(1, widest),
            1024 + 64 * 1024 + 3 * 32 * 1024 + 3 * 64 * 4
        );
        assert!(wg_smem(1, widest) <= 227 * 1024);
        // Split F16x2 points of two blocks (d = 128) take the same bytes in two parts.
        assert_eq!(wg_smem(2, widest / 2), wg_smem(1, widest));
        // Every resident F16 tile (at most TC_RESIDENT_BYTES) has at most that many blocks.
        assert_eq!(TC_RESIDENT_BYTES / (PC_TC_BL * PC_TC_DC * 4), PC_WG_KB_MAX);
        // Streamed: four slots of 128 output and 256 reduced 128-byte chunks (48 KiB each)
        // and two stages' terms, 195 KiB: an H100 or H200 (227 KiB) holds one block.
        assert_eq!(wgs_smem(), 1024 + 4 * 48 * 1024 + 2 * 256 * 4);
        assert!(wgs_smem() <= 227 * 1024 && 2 * wgs_smem() > 228 * 1024);
    }

    /// The kernel each mode, width and metric gets on Hopper (warpgroup MMAs, 227 KiB), on a
    /// GPU without them (an A100's 163 KiB) and on one with less shared memory (99 KiB).
    #[test]
    fn each_mode_and_width_takes_its_kernel_and_layout() {
        let hopper = TcGpu {
            warpgroup_mma: true,
            max_smem: 227 * 1024,
            stream_stage: 256,
        };
        let ampere = TcGpu {
            warpgroup_mma: false,
            max_smem: 163 * 1024,
            stream_stage: 256,
        };
        let small = TcGpu {
            warpgroup_mma: true,
            max_smem: 99 * 1024,
            stream_stage: tc_stream_stage(true, 99 * 1024),
        };
        let pick = |kernel: CrossKernel, d: usize, root: bool, gpu: TcGpu| {
            let l = tc_launch(kernel, kernel.words(d), 4, root, gpu);
            (l.entry, l.stage, l.smem)
        };
        use CrossKernel::*;
        let cases = [
            // Hopper, |x − y|²: warpgroup MMAs, resident up to 256 (F16) and 128 (TF32, F16x2).
            (
                (F16, 64, false, hopper),
                ("pc_sinkstep_hw", 64, wg_smem(1, 32)),
            ),
            (
                (F16, 256, false, hopper),
                ("pc_sinkstep_hw", 64, wg_smem(1, 128)),
            ),
            (
                (F16, 300, false, hopper),
                ("pc_sinkstep_hw_stream", 256, wgs_smem()),
            ),
            (
                (F16, 1024, false, hopper),
                ("pc_sinkstep_hw_stream", 256, wgs_smem()),
            ),
            (
                (Tf32, 100, false, hopper),
                ("pc_sinkstep_tcw", 64, wg_smem(1, 128)),
            ),
            (
                (Tf32, 130, false, hopper),
                ("pc_sinkstep_tcw_stream", 256, wgs_smem()),
            ),
            (
                (F16x2, 128, false, hopper),
                ("pc_sinkstep_h2w", 64, wg_smem(2, 64)),
            ),
            // Split products streamed, TF32x3 and |x − y| keep mma.sync.
            (
                (F16x2, 130, false, hopper),
                ("pc_sinkstep_h2_stream", 128, tc_smem(2, 2, 2, 128, 4)),
            ),
            (
                (Tf32x3, 64, false, hopper),
                ("pc_sinkstep_tc3", 64, tc_smem(2, 2, 2, 64, 4)),
            ),
            (
                (F16, 64, true, hopper),
                ("pc_sinkstep_h", 64, tc_smem(1, 1, 3, 64, 4)),
            ),
            (
                (F16, 1024, true, hopper),
                ("pc_sinkstep_h_stream", 256, tc_smem(1, 2, 2, 256, 4)),
            ),
            // No warpgroup MMAs: the mma.sync kernels.
            (
                (F16, 1024, false, ampere),
                ("pc_sinkstep_h_stream", 256, tc_smem(1, 2, 2, 256, 4)),
            ),
            (
                (Tf32, 64, false, ampere),
                ("pc_sinkstep_tc", 64, tc_smem(1, 2, 3, 64, 4)),
            ),
            // 99 KiB: the warpgroup layouts that do not fit fall back, with narrow stages.
            (
                (F16, 64, false, small),
                ("pc_sinkstep_hw", 64, wg_smem(1, 32)),
            ),
            (
                (F16, 256, false, small),
                ("pc_sinkstep_h", 64, tc_smem(1, 4, 3, 64, 4)),
            ),
            (
                (F16, 1024, false, small),
                ("pc_sinkstep_h_stream", 128, tc_smem(1, 2, 2, 128, 4)),
            ),
        ];
        for ((kernel, d, root, gpu), (entry, stage, smem)) in cases {
            let got = pick(kernel, d, root, gpu);
            assert_eq!(
                got,
                (entry.to_string(), stage, smem),
                "{kernel:?} d={d} root={root} {gpu:?}"
            );
            assert!(smem <= gpu.max_smem, "{kernel:?} d={d}: {smem} bytes");
        }
    }

    #[test]
    fn streamed_single_products_take_wide_stages_where_shared_memory_allows() {
        // 16 KiB of output chunks and 32 KiB of reduced ones a slot, two slots, and 4 KiB
        // of potentials and norms: 100 KiB. An H100 (227 KiB) takes it; an RTX 4090's
        // 99 KiB and `wide = false` take the split kernels' 128 points (66 KiB).
        assert_eq!(tc_smem(1, 2, 2, PC_TC_BKS1, 4), 100 * 1024);
        assert_eq!(tc_stream_stage(true, 227 * 1024), 256);
        assert_eq!(tc_stream_define(256), None);
        for (wide, smem) in [(true, 99 * 1024), (false, 227 * 1024)] {
            let stage = tc_stream_stage(wide, smem);
            assert_eq!(stage, 128);
            assert!(tc_smem(1, 2, 2, stage, 4) <= 99 * 1024);
            assert_eq!(tc_stream_define(stage).as_deref(), Some("PC_TC_BKS1=128"));
        }
    }

    #[test]
    fn f16_scales_take_the_largest_coordinate_into_the_top_binades() {
        let top = [0.5, 1.0, 3.0, 0.3, 7.9e3, 1e-9, 1e12, 1e30, 3e38];
        for a in top.into_iter().chain([2f64.powi(-46)]) {
            let s = f16_scale(a);
            assert_eq!(s.log2().fract(), 0.0, "{a}: a power of two");
            assert!(a * s > 8192.0 && a * s <= 16384.0, "{a}·{s} = {}", a * s);
        }
        // Tiny clouds: the exponent stops at 60 (still in f16's range, fewer bits).
        assert_eq!(f16_scale(1e-30), 2f64.powi(60));
        assert!(1e-30 * f16_scale(1e-30) < 1.0);
        for a in [0.0, f64::NAN, f64::INFINITY] {
            assert_eq!(f16_scale(a), 1.0);
        }
    }

    #[test]
    fn f16_operands_take_half_the_words() {
        assert_eq!(CrossKernel::F16x2.words(17), PC_TC_DC);
        assert_eq!(CrossKernel::Tf32.words(17), PC_TC_DC);
        assert_eq!(CrossKernel::F16.words(64), PC_TC_DC);
        assert_eq!(CrossKernel::Tf32x3.words(64), 2 * PC_TC_DC);
        assert_eq!(CrossKernel::F16.words(1025), 17 * PC_TC_DC);
        assert!(CrossKernel::F16x2.split() && CrossKernel::F16x2.half());
        assert!(!CrossKernel::Tf32.split() && !CrossKernel::Tf32.half());
    }
}
