//! [`BistochasticKernels`] on the GPU (cuda/bistochastic.cu): one fused kernel each for the
//! forward and the backward, a group of `N` lanes per matrix (`N` the power of two ≥ n, so
//! 32/N matrices per warp), each lane holding one row and one column in registers (the
//! column loaded coalesced, the row through a shared-memory transpose).
//!
//! * Forward: `K = exp(X − max X)` once, then the iteration in the scaling domain (FMAs and
//!   one reciprocal per lane and half-step), scalings absorbed into `K` when they leave
//!   `[2^-30, 2^30]` (f32); matrices whose spread `max X − min X` exceeds 80 (f32; 690 in f64)
//!   or that hold non-finite entries run the log-domain iteration of the CPU instead. The
//!   stats are reduced on the device (three numbers read back).
//! * Backward: CG on the Schur system with the matrix's own row and column sums, exactly as
//!   the CPU does (projection off the support, per-matrix stop, true residual recomputed).
//!   f64 data: CG in f64. f32 data: CG in f32, and a second launch redoes in f64 (as the CPU
//!   does for every matrix) the matrices whose f32 CG did not converge, left a true residual
//!   above 10·tol, or saw curvatures spanning more than 10³ (ill-conditioned). The
//!   [`CgSummary`] is reduced on the device (each matrix counted once, by the launch that gave
//!   its final outcome) and read back as seven words; one 64-bit word per matrix (iterations,
//!   flags, the residual rounded to f32) is written and read back only when the caller asks
//!   for the per-matrix [`CgOutcome`]s. The summary's residual is the largest of those f32
//!   residuals, so it equals [`CgSummary::of`] the outcomes exactly.
//!
//! Reports are read back through one page-locked host buffer (a pageable copy costs more).
//! The deferred entry points (`bistochastic_*_deferred`) leave the statistics words in a
//! device buffer, the backend's or a caller's ([`CudaBackend::borrow_words`]), and read
//! nothing back; the backward's redo list then lives in that buffer too, so a caller that
//! owns it allocates nothing per call.

use crate::backend::batch_of;
use crate::backend::bistochastic::{cg_summary_from_words, words, BistochasticKernels};
use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::{define, kernel_name, CudaReal, Module, Precision};
use crate::backend::cuda::runtime::launch::{Context, Launch};
use crate::backend::shape::check_len;
use crate::cg::{CgOutcome, CgSummary};
use crate::{Error, Result};
use cudarc::driver::result as cu;
use cudarc::driver::{CudaContext, CudaSlice};
use std::sync::{Arc, Mutex};

const SOURCE: &str = Module::Bistochastic.text();
/// Threads per block.
const THREADS: usize = define(SOURCE, "BISTO_THREADS");
/// Largest matrix size (the kernels are compiled for n ≤ 2, 4, 8, 16, 32).
const MAX_N: usize = 32;
/// Largest CG iteration count the outcome word holds (29 bits).
const MAX_CG_ITERS: usize = (1 << 29) - 1;
/// The summary words of the backward.
const CG_WORDS: usize = define(SOURCE, "CG_WORDS");
// The kernels reduce the summary in the library's word layout.
const _: () = assert!(
    CG_WORDS == words::CG_SUMMARY
        && define(SOURCE, "CG_REDO") == words::CG_REDO
        && define(SOURCE, "CG_ITERS") == words::CG_ITERS
        && define(SOURCE, "CG_RESIDUAL") == words::CG_RESIDUAL
        && define(SOURCE, "CG_UNCONVERGED") == words::CG_UNCONVERGED
        && define(SOURCE, "CG_FIRST_UNCONV") == words::CG_FIRST_UNCONV
        && define(SOURCE, "CG_FIRST_BAD_RHS") == words::CG_FIRST_BAD_RHS
        && define(SOURCE, "CG_FIRST_NAN") == words::CG_FIRST_NAN
);

/// Lanes per matrix: the power of two ≥ n (at least 2).
fn group(n: usize) -> Result<usize> {
    if n == 0 || n > MAX_N {
        return Err(Error::parameter(
            "n",
            n,
            format!("the CUDA bistochastic kernels handle 1 ≤ n ≤ {MAX_N}"),
        ));
    }
    Ok(n.next_power_of_two().max(2))
}

/// Blocks of `THREADS` for `batch` matrices of `lanes` lanes each.
fn blocks(batch: usize, lanes: usize) -> Result<u32> {
    let b = (batch * lanes).div_ceil(THREADS);
    u32::try_from(b)
        .ok()
        .filter(|&g| g <= i32::MAX as u32)
        .ok_or_else(|| Error::shape("x", format!("{batch} matrices exceed the launch grid")))
}

/// Page-locked host memory for the reports read back (a pageable copy of 512 KiB of per-matrix
/// outcomes costs hundreds of microseconds, and even a few words go faster): one buffer per
/// process, grown on demand, used under its lock from the copy to the end of the read. It
/// belongs to a context (destroying the context frees it), so it keeps that context alive and
/// is replaced when another context asks.
struct PinnedWords {
    ptr: *mut u64,
    cap: usize,
    ctx: Option<Arc<CudaContext>>,
}
// SAFETY: the pointer is only dereferenced under the mutex.
unsafe impl Send for PinnedWords {}

static PINNED: Mutex<PinnedWords> = Mutex::new(PinnedWords {
    ptr: std::ptr::null_mut(),
    cap: 0,
    ctx: None,
});

impl CudaBackend {
    /// Wait for the stream, copy `len` words of `words` from `offset` on to the host through
    /// [`PINNED`] and hand them to `read`.
    fn read_back<R>(
        &self,
        words: &CudaSlice<u64>,
        offset: usize,
        len: usize,
        read: impl FnOnce(&[u64]) -> R,
    ) -> Result<R> {
        if offset + len > words.len() {
            return Err(Error::Cuda(format!(
                "reading words {offset}..{} of {}",
                offset + len,
                words.len()
            )));
        }
        let mut pinned = PINNED
            .lock()
            .map_err(|_| Error::Cuda("the pinned read-back buffer lock was poisoned".into()))?;
        let ours = matches!(&pinned.ctx, Some(c) if Arc::ptr_eq(c, &self.inner.ctx));
        if !ours || pinned.cap < len {
            if let Some(old) = pinned.ctx.take() {
                if !pinned.ptr.is_null() && old.bind_to_thread().is_ok() {
                    // SAFETY: allocated by malloc_host below in `old` (kept alive until now);
                    // no copy into it is in flight (every use ends with a stream
                    // synchronisation under this lock). A failure leaks it.
                    let _ = unsafe { cu::free_host(pinned.ptr as *mut std::ffi::c_void) };
                }
            }
            pinned.ptr = std::ptr::null_mut();
            pinned.cap = 0;
            self.inner
                .ctx
                .bind_to_thread()
                .context("binding the context")?;
            // At least a page's worth, so the small reports never reallocate.
            let cap = len.max(512);
            let bytes = cap * std::mem::size_of::<u64>();
            // SAFETY: a plain page-locked allocation; its contents are written before use.
            let p =
                unsafe { cu::malloc_host(bytes, 0) }.context("allocating pinned host memory")?;
            pinned.ptr = p as *mut u64;
            pinned.cap = cap;
            pinned.ctx = Some(self.inner.ctx.clone());
        }
        self.inner
            .ctx
            .bind_to_thread()
            .context("binding the context")?;
        // SAFETY: `ptr` holds `cap ≥ len` u64s, exclusively ours under the lock.
        let dst = unsafe { std::slice::from_raw_parts_mut(pinned.ptr, len) };
        let src = self.ptr(words) + (offset * std::mem::size_of::<u64>()) as u64;
        // SAFETY: `words` holds `offset + len` elements (checked) on this backend's stream.
        unsafe { cu::memcpy_dtoh_async(dst, src, self.stream.cu_stream()) }
            .context("reading a report back")?;
        self.stream
            .synchronize()
            .context("waiting for the bistochastic kernels")?;
        Ok(read(dst))
    }
}

/// Decode the per-matrix outcome words (see cuda/bistochastic.cu) into `out`.
fn decode_outcomes(words: &[u64], out: &mut [CgOutcome]) {
    for (o, &word) in out.iter_mut().zip(words) {
        let w = word as u32;
        *o = CgOutcome {
            iterations: (w & 0x1fff_ffff) as usize,
            residual: f32::from_bits((word >> 32) as u32) as f64,
            converged: w & 0x8000_0000 != 0,
        };
    }
}

/// `len` words of `w` exist.
fn check_words(w: &CudaBuffer<u64>, len: usize, arg: &str) -> Result<()> {
    if w.len < len {
        return Err(Error::shape(
            arg,
            format!("has {} words, {len} needed", w.len),
        ));
    }
    Ok(())
}

impl CudaBackend {
    /// The forward kernel for `T`, its statistics at device address `stats` (three words,
    /// cleared here).
    fn launch_forward<T: CudaReal>(
        &self,
        n: usize,
        x: &CudaBuffer<T>,
        iters: usize,
        tol: f64,
        r: &mut CudaBuffer<T>,
        stats: &mut CudaBuffer<u64>,
    ) -> Result<()> {
        let lanes = group(n)?;
        let batch = batch_of(x.len, n * n, "x")?;
        check_len("r", r.len, x.len)?;
        check_words(stats, words::PROJECTION, "stats")?;
        let iters = i32::try_from(iters)
            .map_err(|_| Error::parameter("iters", iters, "at most 2^31 − 1 iterations"))?;
        self.stream
            .memset_zeros(&mut stats.data.slice_mut(0..words::PROJECTION))
            .context("clearing the projection stats")?;
        let cfg = Launch::linear(blocks(batch, lanes)?, THREADS as u32);
        // SAFETY: bisto_fwd_n*(x, r, batch, n, iters, tol, stats) over the checked
        // batch·n·n entries of x and r; three (zeroed) stats words.
        unsafe {
            self.launch(
                &kernel_name::<T>(&format!("bisto_fwd_n{lanes}")),
                cfg,
                (
                    self.ptr(&x.data),
                    self.ptr(&r.data),
                    batch as i64,
                    n as i32,
                    iters,
                    tol,
                    self.ptr(&stats.data),
                ),
            )
        }
    }

    /// The backward kernels for `T` (and the f64 redo of f32 data): `report` holds the
    /// summary words (cleared here), the redo list (one word per matrix) and, with
    /// `outcomes`, one outcome word per matrix after them.
    #[allow(clippy::too_many_arguments)]
    fn launch_backward<T: CudaReal>(
        &self,
        n: usize,
        r: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        tol: f64,
        max_iters: usize,
        dx: &mut CudaBuffer<T>,
        report: &mut CudaBuffer<u64>,
        outcomes: bool,
    ) -> Result<()> {
        let lanes = group(n)?;
        let batch = batch_of(r.len, n * n, "r")?;
        check_len("g", g.len, r.len)?;
        check_len("dx", dx.len, r.len)?;
        let words_at = CG_WORDS + batch;
        check_words(report, words_at + if outcomes { batch } else { 0 }, "words")?;
        // List entries below the count (summary word 0, zeroed) are written before they are
        // read; outcome words, when asked for, are written for every matrix.
        self.stream
            .memset_zeros(&mut report.data.slice_mut(0..CG_WORDS))
            .context("clearing the CG summary")?;
        let word = std::mem::size_of::<u64>() as u64;
        let (pr, pg, pd, ps) = (
            self.ptr(&r.data),
            self.ptr(&g.data),
            self.ptr(&dx.data),
            self.ptr(&report.data),
        );
        let pl = ps + CG_WORDS as u64 * word;
        // A null pointer tells the kernels not to write per-matrix words.
        let pw = if outcomes {
            ps + words_at as u64 * word
        } else {
            0
        };
        let (bi, ni) = (batch as i64, n as i32);
        let iters = max_iters.min(MAX_CG_ITERS) as i32;
        let grid = blocks(batch, lanes)?;
        // SAFETY: bisto_bwd_n*(r, g, dx, batch, n, tol, max_iters, out, list, sum) over
        // the checked batch·n·n entries; `report` holds the summary, the list and (when
        // asked for) the per-matrix words.
        unsafe {
            self.launch(
                &kernel_name::<T>(&format!("bisto_bwd_n{lanes}")),
                Launch::linear(grid, THREADS as u32),
                (pr, pg, pd, bi, ni, tol, iters, pw, pl, ps),
            )
        }?;
        if T::PRECISION == Precision::F32 {
            // Redo in f64 the matrices the f32 CG listed (see cuda/bistochastic.cu): a small
            // grid walks the list; with an empty list it only reads the count.
            let fix = Launch::linear(grid.min(self.inner.sm_count as u32), THREADS as u32);
            // SAFETY: bisto_fix_n*_f32(r, g, dx, n, tol, max_iters, out, list, sum) on the
            // same buffers.
            unsafe {
                self.launch(
                    &format!("bisto_fix_n{lanes}_f32"),
                    fix,
                    (pr, pg, pd, ni, tol, iters, pw, pl, ps),
                )
            }?;
        }
        Ok(())
    }
}

impl<T: CudaReal> BistochasticKernels<T> for CudaBackend {
    /// Device memory: the backend's own ([`BistochasticKernels::words`]) or a caller's
    /// ([`CudaBackend::borrow_words`]).
    type Words = CudaBuffer<u64>;

    fn bistochastic_max_n(&self) -> usize {
        MAX_N
    }

    fn words(&self, len: usize) -> Result<CudaBuffer<u64>> {
        let data = self
            .stream
            .alloc_zeros::<u64>(len.max(1))
            .context("allocating report words")?;
        Ok(CudaBuffer::new(data, len))
    }

    fn read_words(&self, w: &CudaBuffer<u64>, len: usize) -> Result<Vec<u64>> {
        check_words(w, len, "words")?;
        self.read_back(&w.data, 0, len, <[u64]>::to_vec)
    }

    fn bistochastic_backward_words(&self, batch: usize) -> usize {
        CG_WORDS + batch
    }

    fn bistochastic_forward_deferred(
        &self,
        n: usize,
        x: &CudaBuffer<T>,
        iters: usize,
        tol: f64,
        r: &mut CudaBuffer<T>,
        stats: &mut CudaBuffer<u64>,
    ) -> Result<()> {
        self.launch_forward(n, x, iters, tol, r, stats)
    }

    fn bistochastic_backward_deferred(
        &self,
        n: usize,
        r: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        tol: f64,
        max_iters: usize,
        dx: &mut CudaBuffer<T>,
        words: &mut CudaBuffer<u64>,
    ) -> Result<()> {
        self.launch_backward(n, r, g, tol, max_iters, dx, words, false)
    }

    fn bistochastic_backward(
        &self,
        n: usize,
        r: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        tol: f64,
        max_iters: usize,
        dx: &mut CudaBuffer<T>,
        outcomes: Option<&mut [CgOutcome]>,
    ) -> Result<CgSummary> {
        let batch = batch_of(r.len, n * n, "r")?;
        if let Some(o) = &outcomes {
            if o.len() != batch {
                return Err(Error::shape(
                    "outcomes",
                    format!("has {} slots for {batch} matrices", o.len()),
                ));
            }
        }
        // One allocation: the summary words, the redo list (one u64 per matrix) and, when
        // asked for, one outcome word per matrix.
        let words_at = CG_WORDS + batch;
        let len = words_at + if outcomes.is_some() { batch } else { 0 };
        // SAFETY: `launch_backward` clears the summary; the rest is written before it is read.
        let data = unsafe { self.stream.alloc::<u64>(len) }.context("allocating the CG report")?;
        let mut report = CudaBuffer::new(data, len);
        self.launch_backward(n, r, g, tol, max_iters, dx, &mut report, outcomes.is_some())?;
        let summary = self.read_back(&report.data, 0, CG_WORDS, |w| {
            cg_summary_from_words(w, batch, tol)
        })??;
        if let Some(out) = outcomes {
            self.read_back(&report.data, words_at, batch, |w| decode_outcomes(w, out))?;
        }
        Ok(summary)
    }
}
