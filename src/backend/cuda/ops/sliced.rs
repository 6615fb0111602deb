//! 1-D and sliced Wasserstein on the GPU (`cuda/sliced.cu`), in `f64`: `L` problems on the
//! line at once, each the projections `⟨θ_l, x_i⟩`, `⟨θ_l, y_j⟩` of two clouds on one
//! direction (or, with `d = 1`, unit directions and one pair of lines per problem). The
//! projections are a small kernel (one thread per point and direction, the coordinates
//! summed in order as the CPU sums them); each projection is sorted with its point indices
//! by a bitonic sort of `(key, index)` pairs (tiles of `SW_TILE` pairs in shared memory,
//! the longer strides over global memory: any length); the cumulative weights of each
//! sorted side give every sorted point its quantile interval, and each point sums `h` and
//! `h'` over the overlaps of its interval with those of the other side (the pieces of the
//! CPU's walk). `W_p^p` per problem is summed in a fixed order, and the gradients with
//! respect to the points are `scale · Σ_l s^l_i θ_l` (a small kernel, `l` in order): every
//! result is deterministic. The host side (checks, results) is `crate::exact::gpu_sliced`.

use crate::backend::cuda::runtime::device::CudaBackend;
use crate::backend::cuda::runtime::kernels::{define, Module};
use crate::backend::cuda::runtime::launch::{to_i32, Launch};
use crate::{Error, Result};
use cudarc::driver::CudaSlice;

const SRC: &str = Module::Sliced.text();
/// Pairs a block sorts in shared memory.
const TILE: usize = define(SRC, "SW_TILE");
const TILE_THREADS: usize = define(SRC, "SW_TILE_THREADS");
/// Threads of the per-problem scans and sums.
const SEG_THREADS: usize = define(SRC, "SW_SEG_THREADS");
/// Threads of the elementwise kernels.
const THREADS: usize = define(SRC, "SW_THREADS");
/// The most problems one launch holds (the grid's second dimension).
pub(crate) const MAX_LINES: usize = 65_535;
/// The most points a side (indices are `u32`, `u32::MAX` marks the padding).
pub(crate) const MAX_POINTS: usize = 1 << 31;

/// One side of the problems on the line.
pub(crate) struct LineSide<'a> {
    /// The argument the points came from (named by errors).
    pub(crate) name: &'static str,
    /// `count×dim` points, row-major: shared by every problem (`stride = 0`) or one block of
    /// `stride` values per problem.
    pub(crate) points: &'a [f64],
    pub(crate) stride: usize,
    pub(crate) count: usize,
    /// Weights by input index, shared (`wstride = 0`) or `wstride` per problem; `None`:
    /// every weight is `uniform`.
    pub(crate) weights: Option<&'a [f64]>,
    pub(crate) wstride: usize,
    pub(crate) uniform: f64,
}

/// `L` problems on the line: problem `l` projects both sides on row `l` of `dirs` (`L×dim`)
/// and transports them for the cost `|s − t|^p`, `p ≥ 1`; the second side's total weight is
/// the first side's (the host scales it).
pub(crate) struct LineProblems<'a> {
    pub(crate) u: LineSide<'a>,
    pub(crate) v: LineSide<'a>,
    pub(crate) dim: usize,
    pub(crate) dirs: &'a [f64],
    pub(crate) p: f64,
}

/// What the device hands back: `W_p^p` per problem and, when asked, `∂W_p^p/∂⟨θ_l, x_i⟩`
/// (`L×n`, input order) and `∂W_p^p/∂⟨θ_l, y_j⟩` (`L×m`), kept on the device.
pub(crate) struct LinesSolved {
    pub(crate) values: Vec<f64>,
    grads: Option<(CudaSlice<f64>, CudaSlice<f64>)>,
    dirs: CudaSlice<f64>,
    lines: usize,
    dim: usize,
    n: usize,
    m: usize,
}

impl CudaBackend {
    /// Solve the problems of `pr` on the device, with the derivatives along each line when
    /// `grad`.
    pub(crate) fn solve_lines(&self, pr: &LineProblems<'_>, grad: bool) -> Result<LinesSolved> {
        let dim = pr.dim;
        let lines = pr.dirs.len() / dim.max(1);
        if lines == 0 || lines > MAX_LINES {
            return Err(Error::shape(
                "projections",
                format!("{lines} directions (the GPU takes 1 to {MAX_LINES} a call)"),
            ));
        }
        let (n, m) = (pr.u.count, pr.v.count);
        for (arg, c) in [(pr.u.name, n), (pr.v.name, m)] {
            if c == 0 || c >= MAX_POINTS {
                return Err(Error::shape(
                    arg,
                    format!("{c} points (the GPU takes 1 to {} a side)", MAX_POINTS - 1),
                ));
            }
        }
        let dirs = self.upload_slice(pr.dirs, "the directions")?;
        let (pu, pv) = (n.next_power_of_two(), m.next_power_of_two());
        let (ku, iu) = self.sorted_side(&pr.u, &dirs, dim, lines, pu)?;
        let (kv, iv) = self.sorted_side(&pr.v, &dirs, dim, lines, pv)?;
        let f = self.cumulate(&pr.u, &iu, lines, pu, None)?;
        let g = self.cumulate(&pr.v, &iv, lines, pv, Some((&f, n)))?;
        let cost = self.alloc_f64(lines * n, "the costs of the sorted points")?;
        let grads = if grad {
            Some((
                self.alloc_f64(lines * n, "the derivatives along the lines")?,
                self.alloc_f64(lines * m, "the derivatives along the lines")?,
            ))
        } else {
            None
        };
        let p = pr.p;
        let y = lines as u32;
        let line = |own: (
            &CudaSlice<u64>,
            &CudaSlice<u32>,
            &CudaSlice<f64>,
            usize,
            usize,
        ),
                    other: (&CudaSlice<u64>, &CudaSlice<f64>, usize, usize),
                    cost: u64,
                    grad: u64|
         -> Result<()> {
            let (k, i, cum, count, pad) = own;
            let (ko, cumo, counto, pado) = other;
            let cfg = Launch::new(
                ((count.div_ceil(THREADS)) as u32, y, 1),
                (THREADS as u32, 1, 1),
            );
            // SAFETY: sw_line(ku, iu, F, n, Pu, kv, G, m, Pv, p, cost, grad) reads L·Pu keys
            // and indices, L·n cumulative weights, L·Pv keys and L·m cumulative weights, and
            // writes L·n costs (when cost is not null) and L·n derivatives (when grad is not
            // null) at indices below n: the buffers above.
            unsafe {
                self.launch(
                    "sw_line",
                    cfg,
                    (
                        self.ptr(k),
                        self.ptr(i),
                        self.ptr(cum),
                        count as i64,
                        pad as i64,
                        self.ptr(ko),
                        self.ptr(cumo),
                        counto as i64,
                        pado as i64,
                        p,
                        cost,
                        grad,
                    ),
                )
            }
        };
        let gptr = |w: usize| {
            grads
                .as_ref()
                .map_or(0, |g| self.ptr(if w == 0 { &g.0 } else { &g.1 }))
        };
        line(
            (&ku, &iu, &f, n, pu),
            (&kv, &g, m, pv),
            self.ptr(&cost),
            gptr(0),
        )?;
        if grad {
            line((&kv, &iv, &g, m, pv), (&ku, &f, n, pu), 0, gptr(1))?;
        }
        let values = self.alloc_f64(lines, "the projected costs")?;
        // SAFETY: sw_sum_rows(c, n, out) reads L·n costs and writes L sums, one block each.
        unsafe {
            self.launch(
                "sw_sum_rows",
                Launch::linear(y, SEG_THREADS as u32),
                (self.ptr(&cost), n as i64, self.ptr(&values)),
            )
        }?;
        let values = self.download_slice(&values, lines, "the projected costs")?;
        Ok(LinesSolved {
            values,
            grads,
            dirs,
            lines,
            dim,
            n,
            m,
        })
    }

    /// The keys of one side's projections, sorted with their point indices, `pad` (a power
    /// of two ≥ count) a problem.
    fn sorted_side(
        &self,
        side: &LineSide<'_>,
        dirs: &CudaSlice<f64>,
        dim: usize,
        lines: usize,
        pad: usize,
    ) -> Result<(CudaSlice<u64>, CudaSlice<u32>)> {
        let total = lines
            .checked_mul(pad)
            .ok_or_else(|| Error::Cuda("the sort keys do not fit in memory".into()))?;
        let x = self.upload_slice(side.points, "the points")?;
        let keys = self.alloc_u64(total, "the sort keys")?;
        let idx = self.alloc_u32(total, "the sort indices")?;
        let cfg = Launch::new(
            (pad.div_ceil(THREADS) as u32, lines as u32, 1),
            (THREADS as u32, 1, 1),
        );
        // SAFETY: sw_project(x, xstride, n, d, theta, P, keys, idx) reads n×d points of each
        // problem's cloud (x + l·xstride, within `points`) and L×d directions, and writes
        // L·P keys and indices.
        unsafe {
            self.launch(
                "sw_project",
                cfg,
                (
                    self.ptr(&x),
                    side.stride as i64,
                    side.count as i64,
                    to_i32(dim, "d")?,
                    self.ptr(dirs),
                    pad as i64,
                    self.ptr(&keys),
                    self.ptr(&idx),
                ),
            )
        }?;
        self.sort_segments(&keys, &idx, total, pad)?;
        Ok((keys, idx))
    }

    /// Sort every segment of `pad` (a power of two) pairs of `keys`, `idx` (`total` pairs).
    fn sort_segments(
        &self,
        keys: &CudaSlice<u64>,
        idx: &CudaSlice<u32>,
        total: usize,
        pad: usize,
    ) -> Result<()> {
        let (k_ptr, i_ptr) = (self.ptr(keys), self.ptr(idx));
        let tile = pad.min(TILE);
        let tiles = u32::try_from(total / tile)
            .map_err(|_| Error::Cuda("too many sort tiles for one launch".into()))?;
        let threads = (tile / 2).clamp(1, TILE_THREADS) as u32;
        // SAFETY: sw_sort_tiles(keys, idx, P, tile) sorts `tiles` blocks of `tile` pairs.
        unsafe {
            self.launch(
                "sw_sort_tiles",
                Launch::linear(tiles, threads),
                (k_ptr, i_ptr, pad as i64, tile as i64),
            )
        }?;
        let pairs = total / 2;
        let step_blocks = u32::try_from(pairs.div_ceil(THREADS))
            .map_err(|_| Error::Cuda("too many sort pairs for one launch".into()))?;
        let mut k = 2 * tile;
        while k <= pad {
            let mut j = k / 2;
            while j >= tile {
                // SAFETY: sw_merge_step(keys, idx, P, pairs, k, j) exchanges `pairs` pairs
                // of the `total` elements.
                unsafe {
                    self.launch(
                        "sw_merge_step",
                        Launch::linear(step_blocks, THREADS as u32),
                        (k_ptr, i_ptr, pad as i64, pairs as i64, k as i64, j as i64),
                    )
                }?;
                j /= 2;
            }
            // SAFETY: sw_merge_tiles(keys, idx, P, tile, k) reads and writes `tiles` blocks of
            // `tile` pairs.
            unsafe {
                self.launch(
                    "sw_merge_tiles",
                    Launch::linear(tiles, threads),
                    (k_ptr, i_ptr, pad as i64, tile as i64, k as i64),
                )
            }?;
            k *= 2;
        }
        Ok(())
    }

    /// The cumulative weights of one sorted side (`L×count`), clamped to the total of
    /// `first` (the first side's cumulative weights and its count) when given.
    fn cumulate(
        &self,
        side: &LineSide<'_>,
        idx: &CudaSlice<u32>,
        lines: usize,
        pad: usize,
        first: Option<(&CudaSlice<f64>, usize)>,
    ) -> Result<CudaSlice<f64>> {
        let out = self.alloc_f64(lines * side.count, "the cumulative weights")?;
        let w = match side.weights {
            Some(w) => Some(self.upload_slice(w, "the weights")?),
            None => None,
        };
        let (total, ntotal) = first.map_or((0, 0), |(f, c)| (self.ptr(f), c));
        // SAFETY: sw_cumulate(idx, P, n, weights, wstride, uniform, total, ntotal, F) reads
        // L·P indices, the weights of each problem (weights + l·wstride, indexed below n),
        // the last of each problem's ntotal cumulative weights of `total`, and writes L·n
        // cumulative weights.
        unsafe {
            self.launch(
                "sw_cumulate",
                Launch::linear(lines as u32, SEG_THREADS as u32),
                (
                    self.ptr(idx),
                    pad as i64,
                    side.count as i64,
                    w.as_ref().map_or(0, |w| self.ptr(w)),
                    side.wstride as i64,
                    side.uniform,
                    total,
                    ntotal as i64,
                    self.ptr(&out),
                ),
            )
        }?;
        Ok(out)
    }

    /// The derivatives along the lines on the host: `L×n` for the first side, `L×m` for the
    /// second (input order).
    pub(crate) fn line_grads(&self, s: &LinesSolved) -> Result<(Vec<f64>, Vec<f64>)> {
        let (gu, gv) = s.grads.as_ref().expect("solved with derivatives");
        Ok((
            self.download_slice(gu, s.lines * s.n, "the derivatives")?,
            self.download_slice(gv, s.lines * s.m, "the derivatives")?,
        ))
    }

    /// The derivatives with respect to the points, `scale · Σ_l s^l_i θ_l`: `n×d` for the
    /// first side, `m×d` for the second, row-major.
    pub(crate) fn point_grads(&self, s: &LinesSolved, scale: f64) -> Result<(Vec<f64>, Vec<f64>)> {
        let (gu, gv) = s.grads.as_ref().expect("solved with derivatives");
        let side = |g: &CudaSlice<f64>, count: usize| -> Result<Vec<f64>> {
            let len = count * s.dim;
            let out = self.alloc_f64(len, "the gradients")?;
            // SAFETY: sw_grad_points(gs, n, theta, L, d, scale, out) reads L·n derivatives
            // and L×d directions and writes n×d gradients.
            unsafe {
                self.launch(
                    "sw_grad_points",
                    Launch::linear(len.div_ceil(THREADS) as u32, THREADS as u32),
                    (
                        self.ptr(g),
                        count as i64,
                        self.ptr(&s.dirs),
                        to_i32(s.lines, "projections")?,
                        to_i32(s.dim, "d")?,
                        scale,
                        self.ptr(&out),
                    ),
                )
            }?;
            self.download_slice(&out, len, "the gradients")
        };
        Ok((side(gu, s.n)?, side(gv, s.m)?))
    }
}
