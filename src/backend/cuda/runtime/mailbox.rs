//! Statistics words brought back to the host without waiting: rows of page-locked memory,
//! each filled by a copy queued on the caller's stream and marked by an event recorded after
//! it. A caller posts the words a deferred launch left on the device (e.g.
//! [`BistochasticSolver::forward_buffers`](crate::BistochasticSolver::forward_buffers))
//! and collects them later: those whose copy has completed ([`WordsMailbox::ready`], never
//! waits) or all of them ([`WordsMailbox::drain`], waits for their events only, never the
//! device). This is how `logot.torch` reports the statistics of calls that returned with
//! their kernels queued, at a few driver calls per call and no allocation.

use super::device::{CudaBackend, CudaBuffer};
use super::launch::Context;
use crate::{Error, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, PinnedHostSlice};
use std::collections::VecDeque;
use std::sync::Arc;

/// Posted words, each with the caller's tag, collected in posting order.
pub struct WordsMailbox<Tag> {
    ctx: Arc<CudaContext>,
    /// `rows × width` page-locked words (written by the copies, read once their event has
    /// completed).
    _pinned: PinnedHostSlice<u64>,
    host: *mut u64,
    width: usize,
    /// One event per row, recorded after the row's copy.
    events: Vec<CudaEvent>,
    free: Vec<usize>,
    /// `(row, words, tag)` in posting order.
    pending: VecDeque<(usize, usize, Tag)>,
}

// SAFETY: `host` points into `pinned`, which the mailbox owns; the rows are only read or
// handed to copies through `&mut self`.
unsafe impl<Tag: Send> Send for WordsMailbox<Tag> {}

impl<Tag> WordsMailbox<Tag> {
    /// A mailbox of `rows` rows of `width` words in page-locked memory of `be`'s context
    /// (allocating page-locked memory synchronises the device: create it once, before the
    /// work it collects). Errors: [`Error::Parameter`] for no rows or no width;
    /// [`Error::Cuda`] when the allocation or an event fails.
    pub fn new(be: &CudaBackend, rows: usize, width: usize) -> Result<Self> {
        if rows == 0 {
            return Err(Error::parameter("rows", rows, "a mailbox needs a row"));
        }
        if width == 0 || rows.checked_mul(width).is_none() {
            return Err(Error::parameter(
                "width",
                width,
                format!("expected 1 ≤ width and rows·width to fit ({rows} rows)"),
            ));
        }
        let ctx = be.inner.ctx.clone();
        // SAFETY: the rows are written by the copies before they are read (`collect` reads
        // only rows whose copy has completed).
        let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<u64>(rows * width, 0) }
            .context("allocating the page-locked statistics rows")?;
        // The slice's own event is never recorded: this returns at once.
        let host = pinned
            .as_mut_ptr()
            .context("addressing the page-locked statistics rows")?;
        let events = (0..rows)
            .map(|_| {
                ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
                    .context("creating a statistics event")
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(WordsMailbox {
            ctx,
            _pinned: pinned,
            host,
            width,
            events,
            free: (0..rows).rev().collect(),
            pending: VecDeque::new(),
        })
    }

    /// Queue the copy of the first `len` words of `words` into a free row on `be`'s stream
    /// and record the row's event after it; returns without waiting. When every row is
    /// taken, it first waits for the oldest posted entry, which it returns. Errors:
    /// [`Error::Parameter`] naming `len` when it exceeds the row width or the buffer;
    /// [`Error::Cuda`] for a context other than the mailbox's, or a failed driver call.
    ///
    /// # Safety
    /// `words` holds `len` initialised words on `be`'s device (a caller's borrowed buffer:
    /// live until the stream is past the copy, as [`CudaBackend::borrow_words`] requires).
    pub unsafe fn post(
        &mut self,
        be: &CudaBackend,
        words: &CudaBuffer<u64>,
        len: usize,
        tag: Tag,
    ) -> Result<Option<(Tag, Vec<u64>)>> {
        if len > self.width || len > words.len {
            return Err(Error::parameter(
                "len",
                len,
                format!(
                    "a row holds {} words and the buffer {}",
                    self.width, words.len
                ),
            ));
        }
        if be.inner.ctx.cu_ctx() != self.ctx.cu_ctx() {
            return Err(Error::Cuda(
                "posting statistics to a mailbox of another GPU".into(),
            ));
        }
        let oldest = if self.free.is_empty() {
            Some(self.take_oldest(true)?.expect("every row is pending"))
        } else {
            None
        };
        let row = self.free.pop().expect("a row was freed");
        // SAFETY: row < rows, so the row's `width ≥ len` words lie in `pinned`; nobody
        // reads it until its event has completed; the caller's contract for `words`.
        let queued = unsafe { be.queue_words_to_host(words, len, self.host.add(row * self.width)) }
            .and_then(|()| {
                self.events[row]
                    .record(&be.stream)
                    .context("recording a statistics event")
            });
        match queued {
            Ok(()) => {
                self.pending.push_back((row, len, tag));
                Ok(oldest)
            }
            Err(e) => {
                self.free.push(row);
                Err(e)
            }
        }
    }

    /// The posted entries whose copy has completed, in posting order, up to the first still
    /// in flight (entries of one stream complete in order); never waits.
    pub fn ready(&mut self) -> Result<Vec<(Tag, Vec<u64>)>> {
        let mut out = Vec::new();
        while let Some(entry) = self.take_oldest(false)? {
            out.push(entry);
        }
        Ok(out)
    }

    /// Every posted entry, in posting order, waiting for each copy's event (not for the
    /// device or the rest of the streams' work).
    pub fn drain(&mut self) -> Result<Vec<(Tag, Vec<u64>)>> {
        let mut out = Vec::with_capacity(self.pending.len());
        while let Some(entry) = self.take_oldest(true)? {
            out.push(entry);
        }
        Ok(out)
    }

    /// How many posted entries are not collected yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The oldest entry once its copy has completed (waiting for it when `wait`), its row
    /// freed; `None` when nothing is pending, or (not waiting) its copy is in flight.
    fn take_oldest(&mut self, wait: bool) -> Result<Option<(Tag, Vec<u64>)>> {
        let Some(&(row, len, _)) = self.pending.front() else {
            return Ok(None);
        };
        let event = &self.events[row];
        let done = if wait {
            event.synchronize().map(|()| true)
        } else {
            event.try_is_complete()
        }
        .context("waiting for the statistics' copy")?;
        if !done {
            return Ok(None);
        }
        let (row, _, tag) = self.pending.pop_front().expect("an entry is pending");
        // SAFETY: the row's copy has completed (its event), and nothing else writes it.
        let words =
            unsafe { std::slice::from_raw_parts(self.host.add(row * self.width), len) }.to_vec();
        self.free.push(row);
        Ok(Some((tag, words)))
    }
}

impl<Tag> Drop for WordsMailbox<Tag> {
    fn drop(&mut self) {
        // Copies still in flight write into `pinned`: wait for them before it is freed.
        for &(row, _, _) in &self.pending {
            let _ = self.events[row].synchronize();
        }
    }
}
