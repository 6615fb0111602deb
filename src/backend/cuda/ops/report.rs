//! [`Backend::plan_report`](crate::Backend::plan_report) of a dense cost on the GPU: the
//! row and column sums of `P_ij = exp((f_i + g_j − C_ij)/ε)`, `⟨P, C⟩` and `Σ P`, each
//! entry evaluated from the stored `f`, `g` and `C` (`cuda/report.cu`: the exponent in
//! `f64`, its exponential in `T`, every sum in `f64`), so that the reported errors are
//! those of the plan the potentials define, to `T`'s rounding of each entry.
//! Every sum runs in a fixed order: the same bits from run to run.

use super::cost::DenseCost;
use super::pointcloud::CudaCloud;
use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::{define, kernel_name, CudaReal, Module, Precision};
use crate::backend::cuda::runtime::launch::{to_i32, Launch};
use crate::backend::shape::{check_fg, check_len};
use crate::backend::{Marginals, PlanReport, Potentials};
use crate::{Error, Result};
use cudarc::driver::CudaSlice;

const SRC: &str = Module::Report.text();
/// Threads per block of `report_tiles` (its `__launch_bounds__`).
const TILE_THREADS: usize = define(SRC, "REPORT_THREADS");
/// Columns a lane owns in `report_tiles`: a block covers `TILE_THREADS·K` columns.
const TILE_K: usize = define(SRC, "REPORT_K");
/// Most rows of one `report_tiles` block, and the step of its row count.
const TILE_ROWS: usize = define(SRC, "REPORT_ROWS");
const ROW_GROUP: usize = define(SRC, "REPORT_RG");
/// Blocks per multiprocessor the row count aims at, so that small problems fill the GPU.
const BLOCKS_PER_SM: usize = 4;
/// Problems one `report_tiles` block evaluates together (sharing each cost entry).
const fn problems_per_block(p: Precision) -> usize {
    match p {
        Precision::F32 => define(SRC, "REPORT_PB_F32"),
        Precision::F64 => define(SRC, "REPORT_PB_F64"),
    }
}
/// Threads per block of `report_slices`, and its most blocks (slices) per problem.
const SLICE_THREADS: usize = define(SRC, "REPORT_FINISH_THREADS");
const MAX_SLICES: usize = define(SRC, "REPORT_FINISH_BLOCKS");
/// Partial sums per slice the slice count aims at: a small problem is one slice, written
/// straight to the reports.
const SUMS_PER_SLICE: usize = 4096;

/// Threads (columns) per tile of `report_cloud_tiles_f32`, rows per tile, and most tiles of
/// one block's column span.
const CLOUD_THREADS: usize = define(SRC, "RC_THREADS");
const CLOUD_ROWS: usize = define(SRC, "RC_TR");
const CLOUD_SPAN_MAX: usize = define(SRC, "RC_SPAN_MAX");
/// Blocks per multiprocessor the cloud report's grid aims at (about three run at once: many
/// waves keep the last one's idle share small).
const CLOUD_BLOCKS_PER_SM: usize = 12;

/// `len` blocks as a grid dimension of at most `max`.
fn grid_dim(len: usize, max: u32, what: &str) -> Result<u32> {
    u32::try_from(len.max(1))
        .ok()
        .filter(|&v| v <= max)
        .ok_or_else(|| Error::shape(what, "too large for one report launch"))
}

impl CudaBackend {
    /// The report of `batch` plans on a dense cost (shared or one per problem): one pass
    /// over the cost (`report_tiles`: per column block, the rows' partial sums; per row
    /// chunk, the columns'), then the partial sums finished per slice of each problem and
    /// the slices summed, every sum in a fixed order.
    pub(in crate::backend::cuda) fn dense_plan_report<T: CudaReal>(
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
        let col_blocks = m.div_ceil(TILE_THREADS * TILE_K);
        let groups = batch.div_ceil(problems_per_block(T::PRECISION));
        // Rows per block: TILE_ROWS, or fewer (a multiple of ROW_GROUP) when the problem
        // would otherwise give fewer than BLOCKS_PER_SM blocks per multiprocessor.
        let target = BLOCKS_PER_SM * self.sm_count().max(1);
        let chunk =
            (n * groups * col_blocks / target).clamp(ROW_GROUP, TILE_ROWS) / ROW_GROUP * ROW_GROUP;
        let row_chunks = n.div_ceil(chunk);
        let too_big = |what: &str| Error::shape(what, "too large for the report's partial sums");
        let rows_len = (batch * n)
            .checked_mul(col_blocks * 2)
            .ok_or_else(|| too_big("f"))?;
        let cols_len = (batch * m)
            .checked_mul(row_chunks)
            .ok_or_else(|| too_big("g"))?;
        let rows = self.alloc_f64(rows_len, "the report's row sums")?;
        let cols = self.alloc_f64(cols_len, "the report's column sums")?;
        let scale = std::f64::consts::LOG2_E / eps.f64();
        let (pf, pg, pc) = (self.ptr(&f.data), self.ptr(&g.data), self.ptr(&cost.c));
        let (prows, pcols) = (self.ptr(&rows), self.ptr(&cols));
        let total = row_chunks.checked_mul(groups).ok_or_else(|| too_big("f"))?;
        let grid = (
            grid_dim(total, i32::MAX as u32, "f")?,
            grid_dim(col_blocks, 65_535, "m")?,
            1,
        );
        // SAFETY: report_tiles(f, g, C, cost_stride, B, n, m, chunk, log2(e)/ε, rows, cols)
        // reads
        // the checked B×n, B×m and [B×]n×m buffers and writes B·n·CB·2 and B·RB·m sums
        // (CB column blocks, RB row chunks: the grid above).
        unsafe {
            self.launch(
                &kernel_name::<T>("report_tiles"),
                Launch::new(grid, (TILE_THREADS as u32, 1, 1)),
                (
                    pf,
                    pg,
                    pc,
                    cost.stride(),
                    bi,
                    ni,
                    mi,
                    chunk as i32,
                    scale,
                    prows,
                    pcols,
                ),
            )
        }?;
        self.finish_report(
            batch,
            (n, m),
            (col_blocks, row_chunks),
            (&rows, &cols),
            marginals,
        )
    }

    /// The reports from `report_tiles`' partial sums (or sums of that layout: per row and
    /// column block `CB`, `(Σ P, Σ P·C)`; per column and row chunk `RB`, `Σ P`), finished
    /// per slice of each problem (`report_slices`) and the slices summed
    /// (`report_finish_all`), in a fixed order.
    fn finish_report<T: CudaReal>(
        &self,
        batch: usize,
        (n, m): (usize, usize),
        (col_blocks, row_chunks): (usize, usize),
        (rows, cols): (&CudaSlice<f64>, &CudaSlice<f64>),
        marginals: &Marginals<'_, CudaBuffer<T>>,
    ) -> Result<Vec<PlanReport>> {
        let (bi, ni, mi) = (to_i32(batch, "batch")?, to_i32(n, "n")?, to_i32(m, "m")?);
        let slices = ((n * col_blocks + m * row_chunks) / SUMS_PER_SLICE).clamp(1, MAX_SLICES);
        // One slice writes the reports directly.
        let part = (slices > 1)
            .then(|| self.alloc_f64(4 * slices * batch, "the report's slices"))
            .transpose()?;
        let out = self.alloc_f64(4 * batch, "the reports")?;
        let (prows, pcols) = (self.ptr(rows), self.ptr(cols));
        let pout = self.ptr(&out);
        let ppart = part.as_ref().map_or(pout, |p| self.ptr(p));
        let (cb, rb) = (to_i32(col_blocks, "m")?, to_i32(row_chunks, "n")?);
        // SAFETY: report_slices(rows, cols, μ, ν, n, m, CB, RB, part) reads the sums above
        // and the checked B×n and B×m marginals; writes 4·slices·B values (to the reports
        // themselves when there is one slice).
        unsafe {
            self.launch(
                &kernel_name::<T>("report_slices"),
                Launch::new(
                    (grid_dim(batch, i32::MAX as u32, "batch")?, slices as u32, 1),
                    (SLICE_THREADS as u32, 1, 1),
                ),
                (
                    prows,
                    pcols,
                    self.ptr(&marginals.mu.data),
                    self.ptr(&marginals.nu.data),
                    ni,
                    mi,
                    cb,
                    rb,
                    ppart,
                ),
            )
        }?;
        if slices > 1 {
            let finish_blocks = u32::try_from((4 * batch).div_ceil(SLICE_THREADS))
                .map_err(|_| Error::shape("batch", "too large for one report launch"))?;
            // SAFETY: report_finish_all(part, B, slices, out) reads 4·slices·B values and
            // writes 4·B.
            unsafe {
                self.launch(
                    "report_finish_all",
                    Launch::linear(finish_blocks, SLICE_THREADS as u32),
                    (ppart, bi, slices as i32, pout),
                )
            }?;
        }
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

impl CudaBackend {
    /// The report of `batch` plans on f32 point clouds, each cost in f64 from the points as
    /// given (`report_cloud_tiles_f32`: the difference form, exact to f64's rounding), the
    /// partial sums then finished as the dense report's. `None` where the cloud keeps no
    /// points as given (f64 clouds, single-product cross terms: the half-step report).
    ///
    /// The blocks tile rows × column spans: a span of up to `RC_SPAN_MAX` tiles of
    /// `RC_THREADS` columns and a row chunk (a multiple of `RC_TR` rows), sized so that the
    /// grid holds about `CLOUD_BLOCKS_PER_SM` blocks per multiprocessor, the partial sums
    /// `B·n·CB·2 + B·RB·m` f64 values (`CB` spans, `RB` row chunks).
    pub(in crate::backend::cuda) fn cloud_plan_report<T: CudaReal>(
        &self,
        cloud: &CudaCloud<T>,
        potentials: &Potentials<CudaBuffer<T>>,
        marginals: &Marginals<'_, CudaBuffer<T>>,
        eps: T,
    ) -> Result<Option<Vec<PlanReport>>> {
        let Some((x, y, d, root)) = cloud.given() else {
            return Ok(None);
        };
        let (f, g) = (&potentials.f, &potentials.g);
        let dims = cloud.dims();
        let batch = check_fg(&dims, f.len, g.len)?;
        let (n, m) = (dims.n, dims.m);
        check_len("mu", marginals.mu.len, batch * n)?;
        check_len("nu", marginals.nu.len, batch * m)?;
        let (ni, mi) = (to_i32(n, "n")?, to_i32(m, "m")?);
        let tiles = m.div_ceil(CLOUD_THREADS);
        let row_tiles = n.div_ceil(CLOUD_ROWS);
        // Blocks per problem: about CLOUD_BLOCKS_PER_SM per multiprocessor over the batch, split
        // between row chunks and column spans in proportion to the tiles of each side.
        let target = (CLOUD_BLOCKS_PER_SM * self.sm_count().max(1))
            .div_ceil(batch)
            .max(1);
        let spans_wanted = ((target as f64 * tiles as f64 / row_tiles as f64)
            .sqrt()
            .ceil() as usize)
            .clamp(tiles.div_ceil(CLOUD_SPAN_MAX), tiles);
        let span = tiles.div_ceil(spans_wanted);
        let spans = tiles.div_ceil(span);
        let chunks_wanted = target.div_ceil(spans).clamp(1, row_tiles);
        let rows = row_tiles.div_ceil(chunks_wanted) * CLOUD_ROWS;
        let chunks = n.div_ceil(rows);
        let too_big = |what: &str| Error::shape(what, "too large for the report's partial sums");
        let rows_len = (batch * n)
            .checked_mul(spans * 2)
            .ok_or_else(|| too_big("f"))?;
        let cols_len = (batch * m)
            .checked_mul(chunks)
            .ok_or_else(|| too_big("g"))?;
        let rows_part = self.alloc_f64(rows_len, "the report's row sums")?;
        let cols_part = self.alloc_f64(cols_len, "the report's column sums")?;
        let grid = (
            grid_dim(chunks, i32::MAX as u32, "f")?,
            grid_dim(spans, 65_535, "m")?,
            grid_dim(batch, 65_535, "batch")?,
        );
        let scale = std::f64::consts::LOG2_E / eps.f64();
        // SAFETY: report_cloud_tiles_f32(x, y, pair, d, root, f, g, n, m, rows, span,
        // log2(e)/ε, rows_part, cols_part) reads the row-major pairs·n·d and pairs·m·d
        // points and the checked B×n and B×m potentials (f32: `given` is kept for f32
        // clouds only), and writes B·n·CB·2 and B·RB·m sums (the grid above: RB chunks of
        // `rows` rows, CB spans of `span` tiles).
        unsafe {
            self.launch(
                "report_cloud_tiles_f32",
                Launch::new(grid, (CLOUD_THREADS as u32, 1, 1)),
                (
                    self.ptr(x),
                    self.ptr(y),
                    cloud.pair(),
                    to_i32(d, "x")?,
                    root as i32,
                    self.ptr(&f.data),
                    self.ptr(&g.data),
                    ni,
                    mi,
                    to_i32(rows, "n")?,
                    span as i32,
                    scale,
                    self.ptr(&rows_part),
                    self.ptr(&cols_part),
                ),
            )
        }?;
        self.finish_report(
            batch,
            (n, m),
            (spans, chunks),
            (&rows_part, &cols_part),
            marginals,
        )
        .map(Some)
    }
}
