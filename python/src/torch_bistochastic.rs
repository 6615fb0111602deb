//! The bistochastic projection and its backward on CUDA tensors in place, for
//! `logot.torch`: queued on the caller's stream without waiting, their statistics coming
//! back through a page-locked mailbox per GPU and decoded when they have arrived.
//!
//! Every function here is private to `logot.torch`, under the contract of [`crate::torch`].

use crate::args::{cg_params, CgArg};
use crate::common::{cuda_backend, OrPyErr};
use crate::dlpack::{CudaCall, DlTensor};
use crate::results::cg_summary;
use crate::torch::{cuda_on_stream, expect_shape};
use logot::backend::bistochastic::{cg_summary_from_words, words, ProjectionStats};
use logot::backend::cuda::{CudaBuffer, CudaReal, WordsMailbox};
use logot::grad::{BistochasticParams, BistochasticSolver, CgParams};
use logot::{BistochasticKernels, CudaBackend};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::Mutex;

/// What a deferred bistochastic call left in its statistics words, to decode them once they
/// are back: the kind of call and how it ran.
#[derive(Clone, Copy, Debug)]
enum Deferred {
    Forward {
        batch: usize,
        tol: f64,
    },
    Backward {
        batch: usize,
        double: bool,
        cg_tol: Option<f64>,
    },
}

/// Rows of page-locked memory per GPU that the deferred calls' words come back through: a
/// call waits (for the oldest) only when this many are in flight.
const MAILBOX_ROWS: usize = 512;

/// The statistics mailboxes of the in-place bistochastic calls, one per GPU, created at the
/// first call (a page-locked allocation: it synchronises the device once).
static MAILBOXES: Mutex<Option<HashMap<usize, WordsMailbox<Deferred>>>> = Mutex::new(None);

/// Collected `(tag, words)` of the deferred calls: those whose copy has completed (`wait`:
/// all, waiting for their events), every GPU's.
fn collect_deferred(wait: bool) -> logot::Result<Vec<(Deferred, Vec<u64>)>> {
    let mut boxes = MAILBOXES.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::new();
    for mail in boxes.get_or_insert_with(HashMap::new).values_mut() {
        out.extend(if wait { mail.drain()? } else { mail.ready()? });
    }
    Ok(out)
}

/// After a deferred launch on `be`'s stream: the statistics whose copy has completed, then
/// the copy of this call's first `count` words queued into GPU `device`'s mailbox (with the
/// oldest entry, when every row was in flight).
fn post_deferred(
    be: &CudaBackend,
    device: usize,
    w: &CudaBuffer<u64>,
    count: usize,
    tag: Deferred,
) -> logot::Result<Vec<(Deferred, Vec<u64>)>> {
    let mut boxes = MAILBOXES.lock().unwrap_or_else(|p| p.into_inner());
    let boxes = boxes.get_or_insert_with(HashMap::new);
    let mail = match boxes.entry(device) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => {
            let width = words::PROJECTION.max(words::CG_SUMMARY);
            e.insert(WordsMailbox::new(be, MAILBOX_ROWS, width)?)
        }
    };
    let mut out = mail.ready()?;
    // SAFETY: `w` is a borrowed buffer of `count` words of this stream, live until the
    // stream is past the copy (the bindings' contract).
    out.extend(unsafe { mail.post(be, w, count, tag)? });
    Ok(out)
}

/// Decoded statistics for Python: `(kind, statistics or None, error or None, tol, batch)`;
/// `"forward"`: `(iterations, marginal_error, unconverged)`, `"backward"`: the CG summary
/// as `bistochastic_backward` returns it; an error (a non-finite column error, right-hand
/// side or residual) is the message the synchronous call raises.
fn decoded_reports<'py>(
    py: Python<'py>,
    entries: Vec<(Deferred, Vec<u64>)>,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let mut out = Vec::with_capacity(entries.len());
    for (tag, w) in entries {
        let (kind, (tol, batch), stats) = match tag {
            Deferred::Forward { batch, tol } => (
                "forward",
                (Some(tol), batch),
                match ProjectionStats::from_words(&w).and_then(|s| s.checked()) {
                    Ok(s) => Ok((s.iterations, s.marginal_error, s.unconverged)
                        .into_pyobject(py)?
                        .into_any()),
                    Err(e) => Err(e),
                },
            ),
            Deferred::Backward {
                batch,
                double,
                cg_tol,
            } => {
                let cg = cg_params(cg_tol, 1);
                let tol = if double {
                    cg.effective_tol::<f64>()
                } else {
                    cg.effective_tol::<f32>()
                };
                let stats = match cg_summary_from_words(&w, batch, tol) {
                    Ok(s) => Ok(cg_summary(py, &s)?.into_bound(py).into_any()),
                    Err(e) => Err(e),
                };
                ("backward", (cg_tol, batch), stats)
            }
        };
        out.push(match stats {
            Ok(stats) => (kind, Some(stats), None::<String>, tol, batch).into_pyobject(py)?,
            Err(e) => (
                kind,
                None::<Bound<'py, PyAny>>,
                Some(e.to_string()),
                tol,
                batch,
            )
                .into_pyobject(py)?,
        });
    }
    Ok(out)
}

/// The `B` matrices `n×n` of the logits or plans `t` (`…×n×n`): `(B, n)`.
fn matrices(t: &DlTensor) -> PyResult<(usize, usize)> {
    match t.shape[..] {
        [.., n, n2] if n == n2 => Ok((if n == 0 { 0 } else { t.len() / (n * n) }, n)),
        _ => Err(t.shape_error("square matrices …×n×n")),
    }
}

/// Checks that the words tensor `k` of `call` holds at least `need` words: a
/// `ValueError` naming it otherwise.
fn check_words(call: &CudaCall, k: usize, need: usize) -> PyResult<()> {
    let w = call.get(k);
    if w.shape.len() == 1 && w.len() >= need {
        Ok(())
    } else {
        Err(w.shape_error(&format!("{need} int64 words or more")))
    }
}

/// `bistochastic` (the host form, in `crate::linalg`) on CUDA memory, without a copy and
/// without waiting: reads the logits `x` (`…×n×n`), writes into `out = (r, stats)` `R`
/// (`x`'s shape) and the three statistics words ([`logot::backend::bistochastic::words`],
/// int64), all on the caller's stream, and returns with the kernel queued. With `report`,
/// the words' copy to the host is queued into the GPU's mailbox ([`WordsMailbox`]), and the
/// call returns the reports (decoded as [`_bistochastic_reports`] gives them) of the
/// earlier calls whose copy has completed; without (a call captured into a CUDA graph),
/// nothing comes back.
///
/// Private to `logot.torch`, under the contract of [`crate::torch`] (`stream`).
#[pyfunction]
fn _bistochastic_cuda<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    out: (Bound<'py, PyAny>, Bound<'py, PyAny>),
    iters: usize,
    tol: f64,
    stream: usize,
    report: bool,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let mut call = CudaCall::new(stream);
    let ks = [
        call.input(x, "x")?,
        call.output(&out.0, "r")?,
        call.words(&out.1, "stats")?,
    ];
    let (batch, n) = matrices(call.get(ks[0]))?;
    expect_shape(call.get(ks[1]), &call.get(ks[0]).shape)?;
    check_words(&call, ks[2], words::PROJECTION)?;
    call.check_outputs()?;
    let len = call.get(ks[0]).len();
    let addresses = ks.map(|k| call.get(k).address);
    let (device, double) = (call.device().unwrap_or_default(), call.double());
    let params = BistochasticParams::default().iters(iters).tol(tol);
    fn run<T: CudaReal>(
        be: CudaBackend,
        params: BistochasticParams,
        n: usize,
        [x, r, stats]: [u64; 3],
        len: usize,
        report: Option<(usize, Deferred)>,
    ) -> logot::Result<Vec<(Deferred, Vec<u64>)>> {
        // SAFETY: DLPack tensors of this GPU (checked): `x` and `r` hold `len` values of T
        // and `stats` three words or more, live until the stream is past this work (the
        // call holds them; torch's stream-ordered allocator keeps their memory after); `r`
        // and `stats` overlap nothing (checked).
        let (xb, mut rb, mut sb) = unsafe {
            (
                be.borrow_buffer::<T>(x, len),
                be.borrow_buffer::<T>(r, len),
                be.borrow_words(stats, words::PROJECTION),
            )
        };
        let proj = BistochasticSolver::new(be.clone(), params);
        proj.forward_buffers::<T>(n, &xb, &mut rb, &mut sb)?;
        match report {
            Some((device, tag)) => post_deferred(&be, device, &sb, words::PROJECTION, tag),
            None => Ok(Vec::new()),
        }
    }
    let report = report.then_some((device, Deferred::Forward { batch, tol }));
    let entries = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            if double {
                run::<f64>(be, params, n, addresses, len, report)
            } else {
                run::<f32>(be, params, n, addresses, len, report)
            }
        })
        .py()?;
    drop(call);
    decoded_reports(py, entries)
}

/// `bistochastic_backward` (the host form, in `crate::linalg`) on CUDA memory, without a
/// copy and without waiting: reads `R` (`r`, `…×n×n`) and `g = ∂L/∂R` (`r`'s shape),
/// writes into `out = (dx, words)` `∂L/∂X` (`r`'s shape) and the CG summary in the first
/// int64 words (as many as [`_bistochastic_words`] says: the summary, then scratch), on
/// the caller's stream; `cg` the CG options. `report` as [`_bistochastic_cuda`]'s.
///
/// Private to `logot.torch`, under the contract of [`crate::torch`] (`stream`).
#[pyfunction]
fn _bistochastic_backward_cuda<'py>(
    py: Python<'py>,
    r: &Bound<'py, PyAny>,
    g: &Bound<'py, PyAny>,
    out: (Bound<'py, PyAny>, Bound<'py, PyAny>),
    cg: CgArg,
    stream: usize,
    report: bool,
) -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let mut call = CudaCall::new(stream);
    let ks = [
        call.input(r, "r")?,
        call.input(g, "g")?,
        call.output(&out.0, "dx")?,
        call.words(&out.1, "words")?,
    ];
    let (batch, n) = matrices(call.get(ks[0]))?;
    let shape = call.get(ks[0]).shape.clone();
    expect_shape(call.get(ks[1]), &shape)?;
    expect_shape(call.get(ks[2]), &shape)?;
    let (device, double) = (call.device().unwrap_or_default(), call.double());
    check_words(&call, ks[3], words::CG_SUMMARY)?;
    call.check_outputs()?;
    let nwords = call.get(ks[3]).len();
    let len = call.get(ks[0]).len();
    let addresses = ks.map(|k| call.get(k).address);
    let cg_tol = cg.tol();
    let cg = cg.params();
    fn run<T: CudaReal>(
        be: CudaBackend,
        cg: &CgParams,
        n: usize,
        [r, g, dx, words]: [u64; 4],
        (len, nwords, batch): (usize, usize, usize),
        report: Option<(usize, Deferred)>,
    ) -> logot::Result<Vec<(Deferred, Vec<u64>)>> {
        let need = BistochasticKernels::<T>::bistochastic_backward_words(&be, batch);
        if nwords < need {
            return Err(logot::Error::parameter(
                "words",
                format!("{nwords} words"),
                format!("the backward of these matrices needs {need}"),
            ));
        }
        // SAFETY: DLPack tensors of this GPU (checked): three of `len` values of T and
        // `nwords` words, live until the stream is past this work; `dx` and `words` overlap
        // nothing (checked).
        let (rb, gb, mut db, mut wb) = unsafe {
            (
                be.borrow_buffer::<T>(r, len),
                be.borrow_buffer::<T>(g, len),
                be.borrow_buffer::<T>(dx, len),
                be.borrow_words(words, nwords),
            )
        };
        let proj = BistochasticSolver::new(be.clone(), BistochasticParams::default());
        proj.backward_buffers::<T>(n, &rb, &gb, cg, &mut db, &mut wb)?;
        match report {
            Some((device, tag)) => post_deferred(&be, device, &wb, words::CG_SUMMARY, tag),
            None => Ok(Vec::new()),
        }
    }
    let tag = Deferred::Backward {
        batch,
        double,
        cg_tol,
    };
    let report = report.then_some((device, tag));
    let entries = py
        .detach(|| {
            // SAFETY: the caller's contract: a stream of this GPU, live for the call.
            let be = unsafe { cuda_on_stream(device, stream)? };
            if double {
                run::<f64>(be, &cg, n, addresses, (len, nwords, batch), report)
            } else {
                run::<f32>(be, &cg, n, addresses, (len, nwords, batch), report)
            }
        })
        .py()?;
    drop(call);
    decoded_reports(py, entries)
}

/// `(forward, backward)`: how many int64 words [`_bistochastic_cuda`] and
/// [`_bistochastic_backward_cuda`] need for `batch` matrices on GPU `device` (the
/// backward's: its CG summary, then scratch).
#[pyfunction]
fn _bistochastic_words(py: Python<'_>, batch: usize, device: usize) -> PyResult<(usize, usize)> {
    let be = py.detach(|| cuda_backend(device)).py()?;
    let backward = BistochasticKernels::<f32>::bistochastic_backward_words(&be, batch);
    Ok((words::PROJECTION, backward))
}

/// The reports of the in-place bistochastic calls (every GPU's) whose statistics have come
/// back: those whose copy has completed, or with `wait` all of them (waiting for their
/// copies' events, never the device), in call order per GPU. Each is
/// `(kind, statistics or None, error or None, tol, batch)`: `"forward"` with
/// `(iterations, marginal_error, unconverged)` and the projection's `tol`, `"backward"` with
/// the CG summary as `bistochastic_backward` returns it and the call's `cg_tol`; an error
/// (non-finite logits, right-hand side or residual) is the message the synchronous call
/// raises.
#[pyfunction]
fn _bistochastic_reports(py: Python<'_>, wait: bool) -> PyResult<Vec<Bound<'_, PyTuple>>> {
    let entries = py.detach(|| collect_deferred(wait)).py()?;
    decoded_reports(py, entries)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_bistochastic_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_bistochastic_backward_cuda, m)?)?;
    m.add_function(wrap_pyfunction!(_bistochastic_words, m)?)?;
    m.add_function(wrap_pyfunction!(_bistochastic_reports, m)?)?;
    Ok(())
}
