//! The element-wise and per-row kernels that let a Sinkhorn batch be prepared from buffers
//! already on the GPU (a caller's memory, [`CudaBackend::borrow_buffer`]): the input
//! checks' row statistics, `ln`, start potentials, per-row offsets (the cost's shift, `g`'s
//! offsets, the centring of marginal gradients), the zero-mass-bin fix-up, and a dense cost
//! prepared from a buffer. Only the row statistics (five numbers per row) are read back.

use super::cost::{CostKind, CudaCost, DenseCost};
use super::tiled::SplitHints;
use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::{kernel_name, CudaReal};
use crate::backend::cuda::runtime::launch::{to_i32, Context, Launch};
use crate::backend::shape::check_len;
use crate::backend::{CostDims, RowStats};
use crate::{Error, Result};

/// Blocks [`CudaBackend::buffer_row_stats`] aims at (a few waves of the largest GPUs).
const ROW_STATS_BLOCKS: usize = 1024;
/// The fewest entries of a row one block of [`CudaBackend::buffer_row_stats`] takes.
const ROW_STATS_CHUNK: usize = 1 << 14;

impl CudaBackend {
    /// [`Backend::row_stats`](crate::Backend::row_stats): each row cut into chunks of at
    /// least [`ROW_STATS_CHUNK`] entries, so that about [`ROW_STATS_BLOCKS`] blocks share
    /// the work however few the rows (one dense cost is one row), five doubles a chunk
    /// read back and combined per row in chunk order (the same bits on every device).
    pub(in crate::backend::cuda) fn buffer_row_stats<T: CudaReal>(
        &self,
        buf: &CudaBuffer<T>,
        rows: usize,
    ) -> Result<Vec<RowStats>> {
        if rows == 0 || buf.len % rows != 0 {
            return Err(Error::shape(
                "rows",
                format!("{} entries do not split into {rows} rows", buf.len),
            ));
        }
        let per = buf.len / rows;
        let parts = ROW_STATS_BLOCKS
            .div_ceil(rows)
            .min(per.div_ceil(ROW_STATS_CHUNK))
            .max(1);
        let blocks = u32::try_from(rows * parts)
            .ok()
            .filter(|&b| b <= i32::MAX as u32)
            .ok_or_else(|| Error::shape("rows", format!("{rows} rows are too many")))?;
        let out = self.alloc_f64(5 * rows * parts, "row statistics")?;
        // SAFETY: row_stats(x, out, per, parts): block b reads a chunk of row b / parts,
        // x[(b / parts)·per .. (b / parts + 1)·per) (rows·per = the buffer's length), and
        // writes out[5b .. 5b + 5), b < rows·parts.
        unsafe {
            self.launch(
                &kernel_name::<T>("row_stats"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(&buf.data),
                    self.ptr(&out),
                    per as i64,
                    parts as i32,
                ),
            )
        }?;
        let host = self.download_slice(&out, 5 * rows * parts, "row statistics")?;
        Ok(host
            .chunks(5 * parts)
            .map(|row| {
                row.chunks(5).fold(
                    RowStats {
                        sum: 0.0,
                        min: f64::INFINITY,
                        max: f64::NEG_INFINITY,
                        non_finite: 0,
                        negative: 0,
                    },
                    |acc, s| RowStats {
                        sum: acc.sum + s[0],
                        min: acc.min.min(s[1]),
                        max: acc.max.max(s[2]),
                        non_finite: acc.non_finite + s[3] as u64,
                        negative: acc.negative + s[4] as u64,
                    },
                )
            })
            .collect())
    }

    /// An element-wise kernel `name(const T *x, T *y, long long len)` into a new buffer.
    fn buffer_map<T: CudaReal>(&self, name: &str, x: &CudaBuffer<T>) -> Result<CudaBuffer<T>> {
        let y = self.alloc::<T>(x.len, "a buffer")?;
        if x.len > 0 {
            let blocks = self.stride_blocks(x.len, 256, 16);
            // SAFETY: `name(x, y, len)` reads `len` elements of `x` and writes `len` of `y`.
            unsafe {
                self.launch(
                    &kernel_name::<T>(name),
                    Launch::linear(blocks, 256),
                    (self.ptr(&x.data), self.ptr(&y), x.len as i64),
                )
            }?;
        }
        Ok(CudaBuffer::new(y, x.len))
    }

    /// [`Backend::ln`](crate::Backend::ln).
    pub(in crate::backend::cuda) fn buffer_ln<T: CudaReal>(
        &self,
        x: &CudaBuffer<T>,
    ) -> Result<CudaBuffer<T>> {
        self.buffer_map("elem_log", x)
    }

    /// [`Backend::start_potential`](crate::Backend::start_potential).
    pub(in crate::backend::cuda) fn buffer_start<T: CudaReal>(
        &self,
        a: &CudaBuffer<T>,
    ) -> Result<CudaBuffer<T>> {
        self.buffer_map("start_potential", a)
    }

    /// `dst = T(src + delta[row])` on the device, or a copy for an empty `delta`.
    fn offset_slices<T: CudaReal>(
        &self,
        src: &cudarc::driver::CudaSlice<T>,
        dst: &mut cudarc::driver::CudaSlice<T>,
        len: usize,
        delta: &[f64],
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        if delta.is_empty() || delta.iter().all(|&d| d == 0.0) {
            self.stream
                .memcpy_dtod(&src.slice(..len), &mut dst.slice_mut(..len))
                .context("copying a buffer on the GPU")?;
            return Ok(());
        }
        if len % delta.len() != 0 {
            return Err(Error::shape(
                "delta",
                format!("{} rows do not divide {len} entries", delta.len()),
            ));
        }
        let d = self.upload_slice(delta, "per-row offsets")?;
        let blocks = self.stride_blocks(len, 256, 16);
        // SAFETY: offset_rows(src, dst, delta, per, len) reads `len` elements of `src`,
        // `len / per` of `delta` and writes `len` of `dst` (both at least `len` long).
        unsafe {
            self.launch(
                &kernel_name::<T>("offset_rows"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(src),
                    self.ptr(dst),
                    self.ptr(&d),
                    (len / delta.len()) as i64,
                    len as i64,
                ),
            )
        }
    }

    /// [`Backend::offset_rows`](crate::Backend::offset_rows), written into `dst` in place.
    pub(in crate::backend::cuda) fn buffer_offset_rows<T: CudaReal>(
        &self,
        src: &CudaBuffer<T>,
        delta: &[f64],
        dst: &mut CudaBuffer<T>,
    ) -> Result<()> {
        check_len("dst", dst.len, src.len)?;
        let len = src.len;
        self.offset_slices(&src.data, &mut dst.data, len, delta)
    }

    /// [`Backend::where_empty`](crate::Backend::where_empty), in place.
    pub(in crate::backend::cuda) fn buffer_where_empty<T: CudaReal>(
        &self,
        a: &CudaBuffer<T>,
        src: &CudaBuffer<T>,
        dst: &mut CudaBuffer<T>,
    ) -> Result<()> {
        check_len("src", src.len, a.len)?;
        check_len("dst", dst.len, a.len)?;
        if a.len == 0 {
            return Ok(());
        }
        let blocks = self.stride_blocks(a.len, 256, 16);
        // SAFETY: where_empty(a, src, dst, len) over `len` elements of the three buffers.
        unsafe {
            self.launch(
                &kernel_name::<T>("where_empty"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(&a.data),
                    self.ptr(&src.data),
                    self.ptr(&dst.data),
                    a.len as i64,
                ),
            )
        }
    }

    /// [`Backend::prepare_dense_buffer`](crate::Backend::prepare_dense_buffer): `C − shift`
    /// copied into the cost's own matrix (the caller's buffer is only read), then `Cᵀ`.
    pub(in crate::backend::cuda) fn buffer_dense_cost<T: CudaReal>(
        &self,
        cost: &CudaBuffer<T>,
        dims: CostDims,
        shift: &[f64],
    ) -> Result<CudaCost<T>> {
        if dims.n == 0 || dims.m == 0 || dims.batch == Some(0) {
            return Err(Error::Empty {
                arg: "cost".into(),
                detail: format!("shape {dims:?}"),
            });
        }
        to_i32(dims.n, "cost rows")?;
        to_i32(dims.m, "cost columns")?;
        let len = dims.batch.unwrap_or(1) * dims.n * dims.m;
        check_len("cost", cost.len, len)?;
        let neg: Vec<f64> = shift.iter().map(|s| -s).collect();
        let mut c = self.alloc::<T>(len, "the cost")?;
        self.offset_slices(&cost.data, &mut c, len, &neg)?;
        let ct = self.alloc::<T>(len, "the transposed cost")?;
        self.transpose_batch(&c, &ct, dims)?;
        Ok(CudaCost {
            kind: CostKind::Dense(DenseCost {
                dims,
                c,
                ct,
                hints: SplitHints::new(),
            }),
        })
    }

    /// [`Self::buffer_dense_cost`] into the matrices of `prepared`, a dense cost of the same
    /// dimensions, with no allocation; a cost of another kind is prepared anew.
    pub(in crate::backend::cuda) fn refill_buffer_dense_cost<T: CudaReal>(
        &self,
        prepared: &mut CudaCost<T>,
        cost: &CudaBuffer<T>,
        shift: &[f64],
    ) -> Result<()> {
        if let CostKind::Dense(d) = &mut prepared.kind {
            let dims = d.dims;
            let len = dims.batch.unwrap_or(1) * dims.n * dims.m;
            check_len("cost", cost.len, len)?;
            let neg: Vec<f64> = shift.iter().map(|s| -s).collect();
            self.offset_slices(&cost.data, &mut d.c, len, &neg)?;
            return self.transpose_batch(&d.c, &d.ct, dims);
        }
        let dims = crate::backend::Backend::<T>::cost_dims(self, prepared);
        *prepared = self.buffer_dense_cost(cost, dims, shift)?;
        Ok(())
    }
}
