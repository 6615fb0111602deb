//! The tiled half-step over a dense cost (`sinkstep_tiled` in cuda/sinkstep.cu): which
//! entry point a batch takes, its tile (read from the source's `#define TILE_*` lines, so
//! the host and the kernel share one definition), and its launch, with the reduction split
//! across blocks where the grid alone would leave SMs idle.

use crate::backend::cuda::runtime::device::CudaBackend;
use crate::backend::cuda::runtime::kernels::{define_list, kernel_name, CudaReal, Module};
use crate::backend::cuda::runtime::launch::{to_i32, Launch, Start};
use crate::backend::Side;
use crate::{Error, Result};
use cudarc::driver::CudaSlice;
use std::sync::{Mutex, MutexGuard};

/// A tile of the tiled kernel: `TB×TJ` outputs per thread, `WB×WJ` threads per warp,
/// `WARPS` warps, each taking `KW` reduction rows of a stage (`TiledCfg` in
/// cuda/sinkstep.cu).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tile {
    tb: usize,
    tj: usize,
    wb: usize,
    wj: usize,
    warps: usize,
    kw: usize,
}

impl Tile {
    /// The tile of `#define NAME TB, TJ, WB, WJ, WARPS, KW` in cuda/sinkstep.cu.
    const fn read(name: &str) -> Tile {
        let [tb, tj, wb, wj, warps, kw] = define_list::<6>(Module::Sinkstep.text(), name);
        Tile {
            tb,
            tj,
            wb,
            wj,
            warps,
            kw,
        }
    }
    /// Problems per block (`BB`).
    const fn bb(&self) -> usize {
        self.tb * self.wb
    }
    /// Outputs per block (`BJ`).
    const fn bj(&self) -> usize {
        self.tj * self.wj
    }
    /// Reduction rows per shared-memory stage (`KT`).
    const fn kt(&self) -> usize {
        self.kw * self.warps
    }
    const fn threads(&self) -> usize {
        32 * self.warps
    }
}

/// An entry point of the tiled kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::backend::cuda) struct Tiled {
    base: &'static str,
    tile: Tile,
    /// MODE 1: the report pass (column masses and transport shares for given `f`, `g`).
    report: bool,
    /// FACT: factored exponentials.
    factored: bool,
}

const TILE_S16: Tile = Tile::read("TILE_S16");
const TILE_S4: Tile = Tile::read("TILE_S4");
const TILE_B1: Tile = Tile::read("TILE_B1");
const TILE_R16: Tile = Tile::read("TILE_R16");

impl Tiled {
    const fn new(base: &'static str, tile: Tile, report: bool, factored: bool) -> Tiled {
        Tiled {
            base,
            tile,
            report,
            factored,
        }
    }
    /// Shared cost, 8 or more problems: 16 problems × 32 outputs per block, factored
    /// exponentials.
    const S16_FACTORED: Tiled = Tiled::new("sinkstep_s16_factored", TILE_S16, false, true);
    /// Shared cost, 2 to 7 problems: 4 problems × 128 outputs per block.
    const S4: Tiled = Tiled::new("sinkstep_s4", TILE_S4, false, false);
    /// One problem × 128 outputs per block (per-problem costs, or one problem).
    const B1: Tiled = Tiled::new("sinkstep_b1", TILE_B1, false, false);
    /// The report pass, shared cost, 8 or more problems.
    const REPORT_S16: Tiled = Tiled::new("report_s16", TILE_R16, true, false);
    /// The report pass, one problem per block.
    const REPORT_B1: Tiled = Tiled::new("report_b1", TILE_B1, true, false);

    /// The half-step kernel for `batch` problems on a shared or per-problem cost.
    pub fn sinkstep(batch: usize, per_problem_cost: bool) -> Tiled {
        match (per_problem_cost, batch) {
            (false, 8..) => Tiled::S16_FACTORED,
            (false, 2..) => Tiled::S4,
            _ => Tiled::B1,
        }
    }

    /// The report kernel for `batch` problems on a shared or per-problem cost.
    pub fn report(batch: usize, per_problem_cost: bool) -> Tiled {
        if !per_problem_cost && batch >= 8 {
            Tiled::REPORT_S16
        } else {
            Tiled::REPORT_B1
        }
    }

    /// Dynamic shared memory in elements (`TiledCfg::SMEM`, or `SMEM_FACT` when factored):
    /// two stages of a cost tile (`KT×BJ`) and a padded potential tile (`KT×BBP`), the
    /// factored rows of each warp after them; or the merge buffer, when larger.
    const fn smem(&self) -> usize {
        let t = self.tile;
        let bbp = if t.bb() % 4 == 0 { t.bb() + 4 } else { t.bb() };
        let stage = t.kt() * t.bj() + t.kt() * bbp;
        let merge = (if self.report { 3 } else { 2 }) * t.warps * t.bb() * t.bj();
        let factored = if self.factored {
            t.warps * t.kw * (bbp + t.bj())
        } else {
            0
        };
        let staged = 2 * stage + factored;
        if staged > merge {
            staged
        } else {
            merge
        }
    }
}

/// The K-split partial `(max, sum)` pairs of the last split half-step on one side of a
/// cost, which the next split half-step on that side takes as its shift hints
/// (`split_hints` in cuda/sinkstep.cu).
pub(in crate::backend::cuda) struct SplitParts<T> {
    pub batch: usize,
    pub splits: usize,
    pub l: usize,
    /// `part_m` (`splits·batch·l`), then `part_s`.
    pub buf: CudaSlice<T>,
}

/// The scratch a dense cost owns for its split half-steps: one slot per side, empty until
/// a split half-step ran there, replaced when the batch or the split changes. Half-steps
/// on the same cost take the slot's lock in turn, so a cost used from several threads stays
/// correct (its launches are ordered on the one stream anyway).
pub(in crate::backend::cuda) struct SplitHints<T> {
    slots: [Mutex<Option<SplitParts<T>>>; 2],
}

impl<T> SplitHints<T> {
    pub(in crate::backend::cuda) fn new() -> Self {
        SplitHints {
            slots: [Mutex::new(None), Mutex::new(None)],
        }
    }

    /// The slot of `side`, locked.
    pub fn lock(&self, side: Side) -> Result<MutexGuard<'_, Option<SplitParts<T>>>> {
        self.slots[usize::from(side == Side::Row)]
            .lock()
            .map_err(|_| Error::Cuda("the K-split hint lock was poisoned".into()))
    }
}

/// Device pointers and sizes of one half-step launch: `out[b,l]` from `other[b,k]`, the
/// reduction-major cost `r` (`K×L` per matrix, `stride` elements between problems' matrices,
/// 0 when shared; unused by the point-cloud kernels) and `lm[b,l]`.
pub(in crate::backend::cuda) struct TiledArgs<T> {
    pub r: u64,
    pub stride: i64,
    pub other: u64,
    pub lm: u64,
    pub out: u64,
    pub batch: usize,
    pub k: usize,
    pub l: usize,
    pub eps: T,
    /// The half-step's weight `φ`: `out = ε·lm − φ·ε·LSE` (1 balanced, `ρ/(ρ + ε)` on a side
    /// relaxed by `ρ·KL`).
    pub phi: T,
}

/// Where the partial sums of a tiled launch go.
pub(in crate::backend::cuda) enum Parts<'a, T> {
    /// A half-step: the reduction may be split across blocks, its partials kept in this
    /// slot of the cost as the next split half-step's hints.
    Split(&'a SplitHints<T>, Side),
    /// A report: never split; the column masses and the transport shares go to these
    /// `B×L` buffers.
    Report { mass: u64, share: u64 },
}

impl CudaBackend {
    /// Launch the tiled kernel `kernel` on `a`. A split half-step adds `sinkstep_finish`,
    /// which merges the partials.
    pub(in crate::backend::cuda) fn launch_tiled<T: CudaReal>(
        &self,
        kernel: Tiled,
        a: TiledArgs<T>,
        parts: Parts<'_, T>,
    ) -> Result<()> {
        let tile = kernel.tile;
        let (gx, gy) = (a.batch.div_ceil(tile.bb()), a.l.div_ceil(tile.bj()));
        if gx > i32::MAX as usize || gy > 65535 {
            return Err(Error::shape(
                "sinkstep",
                format!(
                    "{} problems of {} outputs exceed the launch grid",
                    a.batch, a.l
                ),
            ));
        }
        let (bi, ki, li) = (
            to_i32(a.batch, "batch")?,
            to_i32(a.k, "cost")?,
            to_i32(a.l, "cost")?,
        );
        let smem = kernel.smem() * std::mem::size_of::<T>();
        if smem > self.inner.max_smem {
            return Err(Error::Unavailable(format!(
                "the {} kernel needs {smem} bytes of shared memory per block; this GPU offers {}",
                T::NAME,
                self.inner.max_smem
            )));
        }
        // Split only when the grid would leave SMs idle (the partials cost a second kernel,
        // and a split block's first call on a cost has no shift hint).
        let splits = match parts {
            Parts::Split(..) => self.tiled_splits(gx * gy, a.k, tile.kt()),
            Parts::Report { .. } => 1,
        };
        let kslice = a.k.div_ceil(splits).div_ceil(tile.kt()) * tile.kt();
        let splits = a.k.div_ceil(kslice);
        // The partials: the cost's kept ones when they have this layout (their pairs are
        // this call's hints), else new ones kept in their place.
        let mut slot = match (&parts, splits > 1) {
            (Parts::Split(hints, side), true) => Some(hints.lock(*side)?),
            _ => None,
        };
        let mut split_hints = 0i32;
        let (pm, ps) = match (&parts, slot.as_deref_mut()) {
            (Parts::Report { mass, share }, _) => (*mass, *share),
            (Parts::Split(..), None) => (0, 0),
            (Parts::Split(..), Some(kept)) => {
                match kept {
                    Some(p) if p.batch == a.batch && p.splits == splits && p.l == a.l => {
                        split_hints = 1;
                    }
                    _ => {
                        *kept = Some(SplitParts {
                            batch: a.batch,
                            splits,
                            l: a.l,
                            buf: self.alloc::<T>(2 * splits * a.batch * a.l, "K-split partials")?,
                        });
                    }
                }
                let base = kept.as_ref().map_or(0, |p| self.ptr(&p.buf));
                let half = splits * a.batch * a.l * std::mem::size_of::<T>();
                (base, base + half as u64)
            }
        };
        // Programmatic dependent launch for the half-steps: this one's blocks may start
        // (and fetch their first cost tile) while the previous one finishes.
        let start = if splits == 1 && self.inner.overlap_launches && !kernel.report {
            Start::Overlap
        } else {
            Start::Plain
        };
        let cfg = Launch::new(
            (gx as u32, gy as u32, splits as u32),
            (tile.threads() as u32, 1, 1),
        )
        .shared(smem)
        .start(start);
        let kslice = to_i32(kslice, "cost")?;
        // SAFETY: TILED_ARGS in cuda/sinkstep.cu; the caller checked the buffers against
        // batch × (k, l), the partials hold 2·splits·batch·l elements.
        unsafe {
            self.launch(
                &kernel_name::<T>(kernel.base),
                cfg,
                (
                    a.r,
                    a.stride,
                    a.other,
                    a.lm,
                    a.out,
                    pm,
                    ps,
                    bi,
                    ki,
                    li,
                    a.eps,
                    kslice,
                    split_hints,
                    a.phi,
                ),
            )
        }?;
        if splits > 1 {
            self.finish_split((pm, ps), splits, &a)?;
        }
        // The kept partials stay with the cost (freed in stream order when replaced).
        drop(slot);
        Ok(())
    }

    /// Blocks along the reduction when `blocks` blocks would leave SMs idle: enough for
    /// two per SM, each block keeping at least four stages of `kt` rows of `k`.
    fn tiled_splits(&self, blocks: usize, k: usize, kt: usize) -> usize {
        let sms = self.inner.sm_count;
        if blocks < sms {
            (2 * sms).div_ceil(blocks).min((k / (4 * kt)).max(1))
        } else {
            1
        }
    }

    /// `out[b,l] = ε·lm[b,l] − φ·ε·ln2·(M + log2 S)` of the `(M, S)` pairs of the partial
    /// reductions (`sinkstep_finish`, cuda/sinkstep.cu) of a half-step `a` whose reduction
    /// was split `splits` ways.
    pub(in crate::backend::cuda) fn finish_split<T: CudaReal>(
        &self,
        (part_m, part_s): (u64, u64),
        splits: usize,
        a: &TiledArgs<T>,
    ) -> Result<()> {
        let (batch, l) = (to_i32(a.batch, "batch")?, to_i32(a.l, "cost")?);
        let blocks = self.stride_blocks(a.batch * a.l, 256, 16);
        // SAFETY: sinkstep_finish(part_m, part_s, lm, out, B, L, splits, eps, phi) over B×L
        // outputs and `splits` partials of B×L each.
        unsafe {
            self.launch(
                &kernel_name::<T>("sinkstep_finish"),
                Launch::linear(blocks, 256),
                (
                    part_m,
                    part_s,
                    a.lm,
                    a.out,
                    batch,
                    l,
                    splits as i32,
                    a.eps,
                    a.phi,
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_are_those_of_the_entry_points() {
        assert_eq!((TILE_S16.bb(), TILE_S16.bj(), TILE_S16.kt()), (16, 32, 128));
        assert_eq!((TILE_S4.bb(), TILE_S4.bj(), TILE_S4.kt()), (4, 128, 64));
        assert_eq!((TILE_B1.bb(), TILE_B1.bj(), TILE_B1.kt()), (1, 128, 64));
        assert_eq!((TILE_R16.bb(), TILE_R16.bj(), TILE_R16.kt()), (16, 16, 128));
        for t in [TILE_S16, TILE_S4, TILE_B1, TILE_R16] {
            assert_eq!(t.threads(), 256);
        }
    }

    #[test]
    fn shared_memory_follows_tiled_cfg() {
        // TiledCfg::SMEM (SMEM_FACT) of each entry point, worked out by hand.
        assert_eq!(
            Tiled::S16_FACTORED.smem(),
            2 * (128 * 32 + 128 * 20) + 8 * 16 * (20 + 32)
        );
        assert_eq!(Tiled::S4.smem(), 2 * (64 * 128 + 64 * 8));
        assert_eq!(Tiled::B1.smem(), 2 * (64 * 128 + 64));
        assert_eq!(Tiled::REPORT_S16.smem(), 2 * (128 * 16 + 128 * 20));
        assert_eq!(Tiled::REPORT_B1.smem(), 2 * (64 * 128 + 64));
    }

    #[test]
    fn batches_choose_their_kernel() {
        assert_eq!(Tiled::sinkstep(64, false), Tiled::S16_FACTORED);
        assert_eq!(Tiled::sinkstep(8, false), Tiled::S16_FACTORED);
        assert_eq!(Tiled::sinkstep(7, false), Tiled::S4);
        assert_eq!(Tiled::sinkstep(2, false), Tiled::S4);
        assert_eq!(Tiled::sinkstep(1, false), Tiled::B1);
        assert_eq!(Tiled::sinkstep(64, true), Tiled::B1);
        assert_eq!(Tiled::report(8, false), Tiled::REPORT_S16);
        assert_eq!(Tiled::report(7, false), Tiled::REPORT_B1);
        assert_eq!(Tiled::report(64, true), Tiled::REPORT_B1);
    }
}
