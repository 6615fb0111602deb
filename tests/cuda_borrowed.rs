//! The CUDA backend on memory and a stream it does not own, as a framework (PyTorch) hands
//! them over: buffers allocated by another owner of the device's primary context
//! (`CudaContext::new`, as the CUDA runtime retains it), a stream created there, and
//! [`CudaBackend::on_stream`] + [`CudaBackend::borrow_buffer`] over them. The bistochastic
//! forward and backward written into the caller's buffers equal the backend's own path
//! (host arrays uploaded to its own stream) and the CPU in f64; dropping a borrowed buffer
//! frees nothing (the owner reads the memory afterwards and frees it once, with no driver
//! error recorded); the legacy default stream (null) works too. Each test skips with a
//! printed reason when no GPU is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]
use common::gpu::{address, foreign, gpu, spin, spinner};

mod common;

use common::Lcg;
use logot::backend::bistochastic::{cg_summary_from_words, words, ProjectionStats};
use logot::backend::cuda::{CudaBackend, CudaBuffer, CudaReal, WordsMailbox};
use logot::grad::{BistochasticParams, BistochasticSolver, CgParams, CgSummary};
use logot::{Backend, BistochasticKernels, CpuBackend, Real};
use ndarray::Array3;

/// [`BistochasticSolver::forward_buffers`] waited for: the statistics read back through
/// words of the backend's own.
fn forward_waited<T: CudaReal, B: BistochasticKernels<T>>(
    proj: &BistochasticSolver<B>,
    n: usize,
    x: &B::Buffer,
    r: &mut B::Buffer,
) -> logot::Result<ProjectionStats> {
    let mut w = proj.backend().words(words::PROJECTION)?;
    proj.forward_buffers::<T>(n, x, r, &mut w)?;
    proj.read_stats::<T>(&w)
}

/// [`BistochasticSolver::backward_buffers`] waited for: the CG summary decoded from words of
/// the backend's own.
fn backward_waited<T: CudaReal, B: BistochasticKernels<T>>(
    proj: &BistochasticSolver<B>,
    n: usize,
    r: &B::Buffer,
    g: &B::Buffer,
    cg: &CgParams,
    dx: &mut B::Buffer,
) -> logot::Result<CgSummary> {
    let be = proj.backend();
    let batch = Backend::<T>::len(be, r) / (n * n);
    let mut w = be.words(be.bistochastic_backward_words(batch))?;
    proj.backward_buffers::<T>(n, r, g, cg, dx, &mut w)?;
    let host = be.read_words(&w, words::CG_SUMMARY)?;
    cg_summary_from_words(&host, batch, cg.effective_tol::<T>())
}

/// `b` matrices `n×n` with entries uniform in `[lo, hi)`, rounded to `T`.
fn logits<T: Real>(b: usize, n: usize, lo: f64, hi: f64, seed: u64) -> Array3<T> {
    let mut g = Lcg(seed);
    Array3::from_shape_simple_fn((b, n, n), || T::of(g.uniform(lo, hi)))
}

fn max_abs<T: Real>(a: &[T], b: &[T]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            assert!(x.f64().is_finite(), "non-finite entry {x}");
            (x.f64() - y.f64()).abs()
        })
        .fold(0.0, f64::max)
}

/// Forward and backward on the caller's buffers and stream against the backend's own path.
fn borrowed_matches_owned<T: CudaReal>(gpu: &CudaBackend, b: usize, n: usize, lo: f64, hi: f64)
where
    CudaBackend: BistochasticKernels<T> + Backend<T, Buffer = CudaBuffer<T>>,
{
    let (ctx, stream) = foreign(gpu);
    let x = logits::<T>(b, n, lo, hi, 11 + n as u64);
    let g = logits::<T>(b, n, -1.0, 1.0, 5 + n as u64);
    let len = b * n * n;
    let xd = stream.clone_htod(x.as_slice().unwrap()).unwrap();
    let gd = stream.clone_htod(g.as_slice().unwrap()).unwrap();
    // Outputs start as NaN: every entry must be written.
    let nan = vec![T::nan(); len];
    let rd = stream.clone_htod(&nan).unwrap();
    let dxd = stream.clone_htod(&nan).unwrap();
    let params = BistochasticParams::default().iters(20);
    let cg = CgParams::default();
    let tol = cg.effective_tol::<T>();
    // SAFETY: the stream belongs to the primary context and outlives `be`; the four slices
    // hold `len` values of T each, outlive the borrowed buffers (dropped below, before the
    // stream is synchronised and the slices read), and the outputs alias nothing.
    let (stats, summary) = unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        assert_eq!(be.cu_stream(), stream.cu_stream());
        let xb = be.borrow_buffer::<T>(address(&xd, &stream), len);
        let mut rb = be.borrow_buffer::<T>(address(&rd, &stream), len);
        assert!(xb.is_borrowed() && rb.is_borrowed());
        let proj = BistochasticSolver::new(be.clone(), params.clone());
        let stats = forward_waited(&proj, n, &xb, &mut rb).unwrap();
        let gb = be.borrow_buffer::<T>(address(&gd, &stream), len);
        let mut dxb = be.borrow_buffer::<T>(address(&dxd, &stream), len);
        let summary = backward_waited(&proj, n, &rb, &gb, &cg, &mut dxb).unwrap();
        // The kernel trait directly gives the same summary.
        let direct = be
            .bistochastic_backward(n, &rb, &gb, tol, cg.max_iters, &mut dxb, None)
            .unwrap();
        assert_eq!(direct, summary);
        (stats, summary)
    };
    let r = stream.clone_dtoh(&rd).unwrap();
    let dx = stream.clone_dtoh(&dxd).unwrap();
    // The caller's inputs are untouched.
    assert_eq!(stream.clone_dtoh(&xd).unwrap(), x.as_slice().unwrap());
    // The backend's own path: host arrays uploaded to its own stream.
    let proj = BistochasticSolver::new(gpu.clone(), params.clone());
    let own = proj.forward(x.view()).unwrap();
    let own_dx = proj.backward(own.r.view(), g.view(), &cg).unwrap();
    let same = if T::NAME == "float64" { 1e-14 } else { 1e-6 };
    // The same kernel on the same logits (centred on the device as on the host): equal.
    let er = max_abs(&r, own.r.as_slice().unwrap());
    assert!(er <= same, "n={n}: R differs from the owned path by {er:e}");
    assert_eq!(stats.iterations, own.convergence.iterations);
    assert!(stats.marginal_error.is_finite());
    // Same R (up to `same`) and G: the backward on the owned path from the borrowed R.
    let r_arr = Array3::from_shape_vec((b, n, n), r.clone()).unwrap();
    let from_r = proj.backward(r_arr.view(), g.view(), &cg).unwrap();
    assert_eq!(summary, from_r.cg, "CG summary");
    assert_eq!(
        dx,
        from_r.dx.as_slice().unwrap(),
        "dX from the same R and G"
    );
    let scale = own_dx.dx.iter().fold(1e-30f64, |s, v| s.max(v.f64().abs()));
    let ed = max_abs(&dx, own_dx.dx.as_slice().unwrap()) / scale;
    assert!(ed <= 1e3 * same, "n={n}: dX differs by {ed:e} (relative)");
    // And the CPU in f64.
    let x64 = x.mapv(|v| v.f64());
    let cpu = BistochasticSolver::new(CpuBackend, params)
        .forward(x64.view())
        .unwrap();
    let e = max_abs(
        &r.iter().map(|v| v.f64()).collect::<Vec<_>>(),
        cpu.r.as_slice().unwrap(),
    );
    let floor = if T::NAME == "float64" { 1e-12 } else { 1e-5 };
    assert!(e <= floor, "n={n}: R differs from the CPU by {e:e}");
    drop((xd, gd, rd, dxd));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

#[test]
fn bistochastic_on_borrowed_buffers_and_stream_matches_the_owned_path() {
    let Some(gpu) = gpu() else { return };
    for (n, b) in [(4, 1000), (16, 3000), (7, 100)] {
        borrowed_matches_owned::<f32>(&gpu, b, n, 0.0, 4.0);
        borrowed_matches_owned::<f64>(&gpu, b, n, 0.0, 4.0);
    }
    // Spread beyond the scaling path: the log-domain fallback.
    borrowed_matches_owned::<f32>(&gpu, 200, 8, -50.0, 50.0);
}

#[test]
fn dropping_a_borrowed_buffer_frees_nothing() {
    let Some(gpu) = gpu() else { return };
    let (ctx, stream) = foreign(&gpu);
    let host: Vec<f32> = (0..4096).map(|i| i as f32).collect();
    let mem = stream.clone_htod(&host).unwrap();
    for _ in 0..3 {
        // SAFETY: `mem` holds 4096 f32 and outlives the buffer; the stream is valid.
        let be = unsafe { gpu.on_stream(stream.cu_stream()) };
        let buf = unsafe { be.borrow_buffer::<f32>(address(&mem, &stream), host.len()) };
        assert_eq!(buf.len(), host.len());
        drop(buf);
        drop(be);
        // A new allocation of the same pool on the same stream must not reuse `mem`.
        let other = stream.clone_htod(&vec![-1.0f32; host.len()]).unwrap();
        assert_eq!(stream.clone_dtoh(&mem).unwrap(), host);
        drop(other);
    }
    // Freed once, by its owner.
    drop(mem);
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
    // The backend's own stream and buffers are unaffected.
    let r = BistochasticSolver::new(gpu.clone(), BistochasticParams::default().iters(5))
        .forward(logits::<f32>(10, 3, 0.0, 1.0, 1).view())
        .unwrap();
    assert!(r.r.iter().all(|v| v.is_finite()));
}

#[test]
fn backend_on_the_legacy_default_stream() {
    let Some(gpu) = gpu() else { return };
    let (ctx, stream) = foreign(&gpu);
    let (b, n) = (500, 16);
    let x = logits::<f32>(b, n, 0.0, 4.0, 3);
    let xd = stream.clone_htod(x.as_slice().unwrap()).unwrap();
    let rd = stream.alloc_zeros::<f32>(b * n * n).unwrap();
    // Everything the foreign stream holds is done before the null stream's work starts.
    stream.synchronize().unwrap();
    // SAFETY: the null handle is the legacy default stream of the current (primary)
    // context; the slices hold b·n·n f32 and outlive the borrowed buffers.
    unsafe {
        let be = gpu.on_stream(std::ptr::null_mut());
        let xb = be.borrow_buffer::<f32>(address(&xd, &stream), b * n * n);
        let mut rb = be.borrow_buffer::<f32>(address(&rd, &stream), b * n * n);
        be.bistochastic_forward(n, &xb, 20, 0.0, &mut rb).unwrap();
        be.synchronize().unwrap();
    }
    let r = stream.clone_dtoh(&rd).unwrap();
    let own = BistochasticSolver::new(gpu.clone(), BistochasticParams::default().iters(20))
        .forward(x.view())
        .unwrap();
    assert!(max_abs(&r, own.r.as_slice().unwrap()) <= 1e-6);
    drop((xd, rd));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

#[test]
fn non_finite_logits_on_buffers_are_an_error() {
    let Some(gpu) = gpu() else { return };
    let (ctx, stream) = foreign(&gpu);
    let (b, n) = (64, 5);
    let mut x = logits::<f32>(b, n, 0.0, 1.0, 9);
    x[[17, 2, 3]] = f32::NAN;
    x[[40, 0, 0]] = f32::INFINITY;
    let xd = stream.clone_htod(x.as_slice().unwrap()).unwrap();
    let rd = stream.alloc_zeros::<f32>(b * n * n).unwrap();
    // SAFETY: as in the tests above.
    let err = unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        let xb = be.borrow_buffer::<f32>(address(&xd, &stream), b * n * n);
        let mut rb = be.borrow_buffer::<f32>(address(&rd, &stream), b * n * n);
        forward_waited(
            &BistochasticSolver::new(be.clone(), BistochasticParams::default()),
            n,
            &xb,
            &mut rb,
        )
        .unwrap_err()
    };
    assert!(matches!(err, logot::Error::Numerical(_)), "{err}");
    // And n out of range names the argument before any launch.
    // SAFETY: as above.
    let err = unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        let xb = be.borrow_buffer::<f32>(address(&xd, &stream), b * n * n);
        let mut rb = be.borrow_buffer::<f32>(address(&rd, &stream), b * n * n);
        forward_waited(
            &BistochasticSolver::new(be.clone(), BistochasticParams::default()),
            33,
            &xb,
            &mut rb,
        )
        .unwrap_err()
    };
    assert!(err.to_string().starts_with("x"), "{err}");
    drop((xd, rd));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

/// The forward and backward on the caller's buffers, their statistics left in the caller's
/// words (which start as garbage): the same `R`, `dX` (bit for bit) and statistics as the
/// same calls waited for through the backend's own words; the words decode to what those
/// read back.
fn deferred_matches_sync<T: CudaReal>(gpu: &CudaBackend, b: usize, n: usize, tol: f64)
where
    CudaBackend:
        BistochasticKernels<T, Words = CudaBuffer<u64>> + Backend<T, Buffer = CudaBuffer<T>>,
{
    let (ctx, stream) = foreign(gpu);
    let x = logits::<T>(b, n, 0.0, 4.0, 21 + n as u64);
    let g = logits::<T>(b, n, -1.0, 1.0, 23 + n as u64);
    let len = b * n * n;
    let xd = stream.clone_htod(x.as_slice().unwrap()).unwrap();
    let gd = stream.clone_htod(g.as_slice().unwrap()).unwrap();
    let nan = vec![T::nan(); len];
    let (r1, r2) = (
        stream.clone_htod(&nan).unwrap(),
        stream.clone_htod(&nan).unwrap(),
    );
    let (d1, d2) = (
        stream.clone_htod(&nan).unwrap(),
        stream.clone_htod(&nan).unwrap(),
    );
    // The caller's words start as garbage: the launches clear what they use.
    let nwords = BistochasticKernels::<T>::bistochastic_backward_words(gpu, b);
    assert!(nwords >= words::CG_SUMMARY);
    let sw = stream.clone_htod(&[u64::MAX; words::PROJECTION]).unwrap();
    let bw = stream.clone_htod(&vec![u64::MAX; nwords]).unwrap();
    let params = BistochasticParams::default().iters(30).tol(tol);
    let cg = CgParams::default().max_iters(3).tol(1e-12);
    // SAFETY: as in the tests above; the words are `u64`s of the same stream.
    let (stats, summary, stats_words, summary_words) = unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        let proj = BistochasticSolver::new(be.clone(), params.clone());
        let xb = be.borrow_buffer::<T>(address(&xd, &stream), len);
        let gb = be.borrow_buffer::<T>(address(&gd, &stream), len);
        let (mut rb1, mut rb2) = (
            be.borrow_buffer::<T>(address(&r1, &stream), len),
            be.borrow_buffer::<T>(address(&r2, &stream), len),
        );
        let (mut db1, mut db2) = (
            be.borrow_buffer::<T>(address(&d1, &stream), len),
            be.borrow_buffer::<T>(address(&d2, &stream), len),
        );
        let mut sb = be.borrow_words(address(&sw, &stream), words::PROJECTION);
        let mut wb = be.borrow_words(address(&bw, &stream), nwords);
        let stats = forward_waited(&proj, n, &xb, &mut rb1).unwrap();
        let summary = backward_waited(&proj, n, &rb1, &gb, &cg, &mut db1).unwrap();
        proj.forward_buffers(n, &xb, &mut rb2, &mut sb).unwrap();
        proj.backward_buffers(n, &rb2, &gb, &cg, &mut db2, &mut wb)
            .unwrap();
        // The caller's page-locked copy, queued on the stream (as logot.torch collects them).
        let (p, c) = (words::PROJECTION, words::CG_SUMMARY);
        let mut pinned = ctx.alloc_pinned_with_flags::<u64>(p + c, 0).unwrap();
        let host = pinned.as_mut_ptr().unwrap();
        be.queue_words_to_host(&sb, p, host).unwrap();
        be.queue_words_to_host(&wb, c, host.add(p)).unwrap();
        assert!(matches!(
            be.queue_words_to_host(&sb, p + 1, host),
            Err(logot::Error::Parameter { ref arg, .. }) if arg == "len"
        ));
        // Read through the backend (waits for the stream).
        let sw = proj.read_stats(&sb).unwrap();
        let w = BistochasticKernels::<T>::read_words(&be, &wb, words::CG_SUMMARY).unwrap();
        let queued = pinned.as_slice().unwrap();
        assert_eq!(&queued[..p], &sw.to_words()[..]);
        assert_eq!(&queued[p..], &w[..]);
        (stats, summary, sw, w)
    };
    assert_eq!(stats, stats_words);
    let tol_cg = cg.effective_tol::<T>();
    assert_eq!(
        cg_summary_from_words(&summary_words, b, tol_cg).unwrap(),
        summary
    );
    // The caller's own copy of the words decodes the same.
    let host = stream.clone_dtoh(&sw).unwrap();
    assert_eq!(ProjectionStats::from_words(&host).unwrap(), stats);
    assert_eq!(host, stats.to_words());
    assert_eq!(
        stream.clone_dtoh(&r1).unwrap(),
        stream.clone_dtoh(&r2).unwrap()
    );
    assert_eq!(
        stream.clone_dtoh(&d1).unwrap(),
        stream.clone_dtoh(&d2).unwrap()
    );
    // 3 CG iterations to 1e-12 (n > 4: the Schur system has rank n − 1 > 3): some
    // matrices are reported unconverged.
    if n > 4 {
        assert!(
            summary.unconverged > 0 && summary.max_iterations == 3,
            "{summary:?}"
        );
    }
    drop((xd, gd, r1, r2, d1, d2, sw, bw));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

#[test]
fn deferred_statistics_in_the_callers_words_match_the_synchronous_path() {
    let Some(gpu) = gpu() else { return };
    for (n, b) in [(4, 1000), (16, 3000), (7, 100)] {
        deferred_matches_sync::<f32>(&gpu, b, n, 0.0);
        deferred_matches_sync::<f64>(&gpu, b, n, 1e-6);
    }
}

#[test]
fn deferred_launches_do_not_wait_for_the_stream() {
    let Some(gpu) = gpu() else { return };
    let (ctx, stream) = foreign(&gpu);
    let (b, n) = (1 << 16, 16);
    let len = b * n * n;
    let xd = stream.alloc_zeros::<f32>(len).unwrap();
    let rd = stream.alloc_zeros::<f32>(len).unwrap();
    let dd = stream.alloc_zeros::<f32>(len).unwrap();
    let nwords = BistochasticKernels::<f32>::bistochastic_backward_words(&gpu, b);
    let sw = stream.alloc_zeros::<u64>(words::PROJECTION).unwrap();
    let bw = stream.alloc_zeros::<u64>(nwords).unwrap();
    stream.synchronize().unwrap();
    // SAFETY: as in the tests above.
    unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        let proj = BistochasticSolver::new(be.clone(), BistochasticParams::default().iters(20));
        let xb = be.borrow_buffer::<f32>(address(&xd, &stream), len);
        let mut rb = be.borrow_buffer::<f32>(address(&rd, &stream), len);
        let mut db = be.borrow_buffer::<f32>(address(&dd, &stream), len);
        let mut sb = be.borrow_words(address(&sw, &stream), words::PROJECTION);
        let mut wb = be.borrow_words(address(&bw, &stream), nwords);
        // The synchronous pair once (its modules loaded), then 50 deferred pairs queued
        // behind 300 ms of spinning on the stream: a call that waited for the stream would
        // keep the host there until the spin ends.
        forward_waited(&proj, n, &xb, &mut rb).unwrap();
        backward_waited(&proj, n, &rb, &rb, &CgParams::default(), &mut db).unwrap();
        let spinning = spinner(&ctx);
        let wait = std::time::Duration::from_millis(300);
        let t = std::time::Instant::now();
        spin(&stream, &spinning, 300);
        let mut calls = Vec::new();
        for _ in 0..50 {
            let c = std::time::Instant::now();
            proj.forward_buffers(n, &xb, &mut rb, &mut sb).unwrap();
            let forward = c.elapsed();
            proj.backward_buffers(n, &rb, &rb, &CgParams::default(), &mut db, &mut wb)
                .unwrap();
            calls.push((forward, c.elapsed() - forward));
        }
        let queued = t.elapsed();
        be.synchronize().unwrap();
        let all = t.elapsed();
        drop(spinning);
        assert!(all >= wait, "the spin ended after {all:?}");
        assert!(
            queued < wait / 2,
            "queueing 50 deferred pairs behind a {wait:?} spin took {queued:?} (all done after \
             {all:?}); (forward, backward) of the first three: {:?}",
            &calls[..3]
        );
    }
    drop((xd, rd, dd, sw, bw));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

/// [`WordsMailbox`]: the deferred statistics posted on the caller's stream come back in
/// posting order with the synchronous path's values; `ready` never waits (entries behind
/// a long queue of work stay pending), a full mailbox hands back its oldest entry, and a
/// length past the row names `len`.
#[test]
fn mailbox_collects_deferred_statistics_in_order_without_waiting() {
    let Some(gpu) = gpu() else { return };
    let (ctx, stream) = foreign(&gpu);
    let (b, n) = (1 << 16, 16);
    let len = b * n * n;
    let x = logits::<f32>(b, n, 0.0, 4.0, 77);
    let xd = stream.clone_htod(x.as_slice().unwrap()).unwrap();
    let rd = stream.alloc_zeros::<f32>(len).unwrap();
    let dd = stream.alloc_zeros::<f32>(len).unwrap();
    let nwords = BistochasticKernels::<f32>::bistochastic_backward_words(&gpu, b);
    let words_of = |k: u64| stream.clone_htod(&vec![u64::MAX - k; nwords]).unwrap();
    let (w1, w2, w3) = (words_of(1), words_of(2), words_of(3));
    let cg = CgParams::default();
    // SAFETY: as in the tests above; the words are `u64`s of the same stream.
    unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        let proj = BistochasticSolver::new(be.clone(), BistochasticParams::default().iters(20));
        let xb = be.borrow_buffer::<f32>(address(&xd, &stream), len);
        let mut rb = be.borrow_buffer::<f32>(address(&rd, &stream), len);
        let mut db = be.borrow_buffer::<f32>(address(&dd, &stream), len);
        let stats = forward_waited(&proj, n, &xb, &mut rb).unwrap();
        let summary = backward_waited(&proj, n, &rb, &rb, &cg, &mut db).unwrap();
        let mut mail = WordsMailbox::<u32>::new(&be, 2, 8).unwrap();
        let (mut b1, mut b2, mut b3) = (
            be.borrow_words(address(&w1, &stream), nwords),
            be.borrow_words(address(&w2, &stream), nwords),
            be.borrow_words(address(&w3, &stream), nwords),
        );
        assert!(matches!(
            mail.post(&be, &b1, 9, 0),
            Err(logot::Error::Parameter { ref arg, .. }) if arg == "len"
        ));
        // Work for the GPU ahead of the statistics: their copies cannot be done yet.
        for _ in 0..20 {
            proj.forward_buffers(n, &xb, &mut rb, &mut b3).unwrap();
        }
        proj.forward_buffers(n, &xb, &mut rb, &mut b1).unwrap();
        assert!(mail.post(&be, &b1, words::PROJECTION, 1).unwrap().is_none());
        proj.backward_buffers(n, &rb, &rb, &cg, &mut db, &mut b2)
            .unwrap();
        assert!(mail.post(&be, &b2, words::CG_SUMMARY, 2).unwrap().is_none());
        assert!(mail.ready().unwrap().is_empty(), "ready() waited");
        assert_eq!(mail.pending(), 2);
        // Both rows are taken: the third post waits for the oldest and hands it back.
        proj.forward_buffers(n, &xb, &mut rb, &mut b3).unwrap();
        let (tag, oldest) = mail.post(&be, &b3, words::PROJECTION, 3).unwrap().unwrap();
        assert_eq!(tag, 1);
        assert_eq!(ProjectionStats::from_words(&oldest).unwrap(), stats);
        let rest = mail.drain().unwrap();
        assert_eq!(rest.iter().map(|e| e.0).collect::<Vec<_>>(), [2, 3]);
        let tol = cg.effective_tol::<f32>();
        assert_eq!(cg_summary_from_words(&rest[0].1, b, tol).unwrap(), summary);
        assert_eq!(ProjectionStats::from_words(&rest[1].1).unwrap(), stats);
        assert_eq!(mail.pending(), 0);
        // Once the stream is past a copy, ready() returns it.
        proj.forward_buffers(n, &xb, &mut rb, &mut b1).unwrap();
        assert!(mail.post(&be, &b1, words::PROJECTION, 4).unwrap().is_none());
        be.synchronize().unwrap();
        let ready = mail.ready().unwrap();
        assert_eq!(ready.len(), 1);
        assert_eq!(ready[0].0, 4);
        assert_eq!(ProjectionStats::from_words(&ready[0].1).unwrap(), stats);
        assert!(mail.ready().unwrap().is_empty());
    }
    drop((xd, rd, dd, w1, w2, w3));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}
