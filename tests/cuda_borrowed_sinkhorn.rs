//! Dense Sinkhorn and its exact gradients on the caller's GPU memory and stream, as
//! `logot.torch` hands them over: `μ`, `ν` and the cost in slices of another owner of the
//! device's primary context, a stream created there, [`CudaBackend::on_stream`] +
//! [`CudaBackend::borrow_buffer`] over them, then `Solver::prepare_buffers`,
//! `solve_prepared_into` and `wasserstein_gradients_into` writing the caller's outputs.
//! They must equal the host-array path on the backend's own stream bit for bit (potentials,
//! distances, reports, `∂C`, `∂μ`, `∂ν`; f32 and f64; one shared cost and a batch of
//! costs; zero-mass bins), leave the inputs untouched, agree with the CPU in f64, and refuse
//! bad input with the host path's errors. Each test skips with a printed reason when no GPU
//! is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]
use common::gpu::gpu;

mod common;

use common::{bin_weights, Lcg};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use logot::backend::cuda::{CudaBackend, CudaBuffer, CudaReal};
use logot::grad::{CgParams, GradientBuffers};
use logot::{Backend, CpuBackend, GradKernels, Problem, Real, SinkhornParams, Solver};
use ndarray::{Array2, Array3, Axis};
use std::sync::Arc;

/// The device's primary context and a stream of its own, as a framework holds them.
fn foreign(be: &CudaBackend) -> (Arc<CudaContext>, Arc<CudaStream>) {
    let ctx = CudaContext::new(be.ordinal()).unwrap();
    // SAFETY: before any allocation of this context object.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    (ctx, stream)
}

fn address<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    s.device_ptr(stream).0
}

fn bits<T: Real>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.f64().to_bits()).collect()
}

/// A seeded batch: histograms with `zeros` empty bins, costs `U[0, 1)` (no offset, so the
/// masses summed on the device do not enter the distances), shared or `B×n×m`.
fn data<T: Real>(
    b: usize,
    n: usize,
    m: usize,
    zeros: usize,
    batched: bool,
) -> (Array2<T>, Array2<T>, Array3<T>) {
    let mut r = Lcg(29 + (b * 13 + n * 5 + m) as u64);
    let mats = if batched { b } else { 1 };
    (
        bin_weights(b, n, zeros, 7 + n as u64).mapv(T::of),
        bin_weights(b, m, zeros, 9 + m as u64).mapv(T::of),
        Array3::from_shape_fn((mats, n, m), |_| T::of(r.uniform(0.0, 1.0))),
    )
}

fn problem<'a, T: Real>(
    mu: &'a Array2<T>,
    nu: &'a Array2<T>,
    cost: &'a Array3<T>,
    batched: bool,
) -> Problem<'a, T> {
    if batched {
        Problem::batch(mu.view(), nu.view(), cost.view()).unwrap()
    } else {
        Problem::batch(mu.view(), nu.view(), cost.index_axis(Axis(0), 0)).unwrap()
    }
}

fn borrowed_matches_owned<T: CudaReal>(
    gpu: &CudaBackend,
    (b, n, m): (usize, usize, usize),
    zeros: usize,
    batched: bool,
) where
    CudaBackend: GradKernels<T> + Backend<T, Buffer = CudaBuffer<T>>,
{
    let (ctx, stream) = foreign(gpu);
    let (mu, nu, cost) = data::<T>(b, n, m, zeros, batched);
    let params = SinkhornParams::fixed_iterations(0.05, 60);
    let cg = CgParams::default();
    let (mud, nud, cd) = (
        stream.clone_htod(mu.as_slice().unwrap()).unwrap(),
        stream.clone_htod(nu.as_slice().unwrap()).unwrap(),
        stream.clone_htod(cost.as_slice().unwrap()).unwrap(),
    );
    // Outputs start as NaN: every entry must be written.
    let nan = |len: usize| stream.clone_htod(&vec![T::nan(); len]).unwrap();
    let (fd, gd, dcd, dmud, dnud) = (
        nan(b * n),
        nan(b * m),
        nan(b * n * m),
        nan(b * n),
        nan(b * m),
    );
    // SAFETY: the stream belongs to the primary context and outlives `be`; each slice holds
    // the values borrowed, outlives its borrowed buffer (dropped at the end of this block,
    // before the slices are read), and the outputs alias nothing.
    let (sol, grad_sol, cg_report) = unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        let borrow = |s: &CudaSlice<T>, len| be.borrow_buffer::<T>(address(s, &stream), len);
        let solver = Solver::new(be.clone(), params.clone());
        let cost_b = borrow(&cd, cost.len());
        let prepared = solver
            .prepare_buffers(
                borrow(&mud, b * n),
                borrow(&nud, b * m),
                &cost_b,
                (b, n, m),
                batched,
            )
            .unwrap();
        let (mut fb, mut gb) = (borrow(&fd, b * n), borrow(&gd, b * m));
        let sol = solver
            .solve_prepared_into(&prepared, &mut fb, &mut gb)
            .unwrap();
        let (mut dc, mut dmu, mut dnu) = (
            borrow(&dcd, b * n * m),
            borrow(&dmud, b * n),
            borrow(&dnud, b * m),
        );
        let out = GradientBuffers {
            cost: &mut dc,
            mu: &mut dmu,
            nu: &mut dnu,
        };
        let (grad_sol, report) = solver
            .wasserstein_gradients_into(&prepared, &cost_b, &cg, out)
            .unwrap();
        (sol, grad_sol, report)
    };
    let read = |s: &CudaSlice<T>| stream.clone_dtoh(s).unwrap();
    // The caller's inputs are untouched.
    assert_eq!(read(&mud), mu.as_slice().unwrap());
    assert_eq!(read(&nud), nu.as_slice().unwrap());
    assert_eq!(read(&cd), cost.as_slice().unwrap());
    // The host-array path on the backend's own stream.
    let solver = Solver::new(gpu.clone(), params.clone());
    let p = problem(&mu, &nu, &cost, batched);
    let want = solver.solve(&p).unwrap();
    let what = format!("{} B={b} n={n} m={m} batched={batched}", T::NAME);
    assert_eq!(
        bits(&read(&fd)),
        bits(want.f.as_slice().unwrap()),
        "f, {what}"
    );
    assert_eq!(
        bits(&read(&gd)),
        bits(want.g.as_slice().unwrap()),
        "g, {what}"
    );
    let dist: Vec<T> = sol.distance.iter().map(|&d| T::of(d)).collect();
    assert_eq!(
        bits(&dist),
        bits(want.distance.as_slice().unwrap()),
        "distance, {what}"
    );
    assert_eq!(
        sol.convergence.marginal_errors(),
        want.convergence.marginal_errors(),
        "{what}"
    );
    let wg = solver.wasserstein_gradients(&p, &cg).unwrap();
    assert_eq!(
        bits(&read(&dcd)),
        bits(wg.cost.as_slice().unwrap()),
        "∂C, {what}"
    );
    assert_eq!(
        bits(&read(&dmud)),
        bits(wg.mu.as_slice().unwrap()),
        "∂μ, {what}"
    );
    assert_eq!(
        bits(&read(&dnud)),
        bits(wg.nu.as_slice().unwrap()),
        "∂ν, {what}"
    );
    assert_eq!(cg_report.summary(), wg.cg.summary(), "{what}");
    let gdist: Vec<T> = grad_sol.distance.iter().map(|&d| T::of(d)).collect();
    assert_eq!(
        bits(&gdist),
        bits(wg.result.distance.as_slice().unwrap()),
        "{what}"
    );
    // And the CPU in f64: the same plan up to T's rounding over 60 iterations.
    let (mu64, nu64, c64) = (
        mu.mapv(|v| v.f64()),
        nu.mapv(|v| v.f64()),
        cost.mapv(|v| v.f64()),
    );
    let cpu = Solver::new(CpuBackend, params)
        .solve(&problem(&mu64, &nu64, &c64, batched))
        .unwrap();
    let tol = if T::NAME == "float64" { 1e-10 } else { 2e-4 };
    for (k, (&d, &c)) in sol.distance.iter().zip(&cpu.distance).enumerate() {
        assert!(
            (d - c).abs() <= tol * c.abs().max(1.0),
            "{what}: distance {k}: {d} vs CPU {c}"
        );
    }
    drop((mud, nud, cd, fd, gd, dcd, dmud, dnud));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

#[test]
fn sinkhorn_on_borrowed_buffers_and_stream_matches_the_owned_path() {
    let Some(gpu) = gpu() else { return };
    for (dims, zeros, batched) in [
        ((1, 40, 30), 0, false),
        ((5, 64, 48), 3, false),
        ((3, 33, 70), 1, true),
    ] {
        borrowed_matches_owned::<f32>(&gpu, dims, zeros, batched);
        borrowed_matches_owned::<f64>(&gpu, dims, zeros, batched);
    }
}

/// The offsets of costs far from 0 are removed and added back on the device: the distances
/// and `g` (which carries them) agree with the CPU in f64 to T's resolution of the offset.
#[test]
fn shifted_costs_on_borrowed_buffers_match_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let (b, n, m) = (3, 20, 24);
    let (mu, nu, mut cost) = data::<f64>(b, n, m, 2, true);
    cost.mapv_inplace(|v| v + 400.0);
    let params = SinkhornParams::fixed_iterations(0.05, 80);
    let (ctx, stream) = foreign(&gpu);
    let (mud, nud, cd) = (
        stream.clone_htod(mu.as_slice().unwrap()).unwrap(),
        stream.clone_htod(nu.as_slice().unwrap()).unwrap(),
        stream.clone_htod(cost.as_slice().unwrap()).unwrap(),
    );
    let (fd, gd) = (
        stream.alloc_zeros::<f64>(b * n).unwrap(),
        stream.alloc_zeros::<f64>(b * m).unwrap(),
    );
    // SAFETY: as in `borrowed_matches_owned`.
    let sol = unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        let borrow = |s: &CudaSlice<f64>, len| be.borrow_buffer::<f64>(address(s, &stream), len);
        let solver = Solver::new(be.clone(), params.clone());
        let prepared = solver
            .prepare_buffers(
                borrow(&mud, b * n),
                borrow(&nud, b * m),
                &borrow(&cd, cost.len()),
                (b, n, m),
                true,
            )
            .unwrap();
        let (mut fb, mut gb) = (borrow(&fd, b * n), borrow(&gd, b * m));
        solver
            .solve_prepared_into(&prepared, &mut fb, &mut gb)
            .unwrap()
    };
    let cpu = Solver::new(CpuBackend, params)
        .solve(&problem(&mu, &nu, &cost, true))
        .unwrap();
    for (k, (&d, &c)) in sol.distance.iter().zip(&cpu.distance).enumerate() {
        assert!(
            (d - c).abs() <= 1e-9 * c.abs(),
            "distance {k}: {d} vs CPU {c}"
        );
    }
    let g = stream.clone_dtoh(&gd).unwrap();
    for (x, y) in g.iter().zip(cpu.g.iter()) {
        assert!(
            x == y || (x - y).abs() <= 1e-9 * y.abs().max(1.0),
            "g: {x} vs CPU {y}"
        );
    }
    drop((mud, nud, cd, fd, gd));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

/// Bad input on the device is refused with the host path's error, naming the argument
/// and the entry.
#[test]
fn bad_borrowed_input_gives_the_host_errors() {
    let Some(gpu) = gpu() else { return };
    let (b, n, m) = (3, 6, 5);
    let base = || data::<f32>(b, n, m, 0, true);
    let mut cases = Vec::new();
    let (mut mu, nu, cost) = base();
    mu[[1, 4]] = f32::NAN;
    cases.push(("mu", mu, nu, cost));
    let (mu, mut nu, cost) = base();
    nu[[2, 0]] = -0.25;
    cases.push(("nu", mu, nu, cost));
    let (mu, nu, mut cost) = base();
    cost[[2, 5, 1]] = f32::INFINITY;
    cases.push(("cost", mu, nu, cost));
    let (mu, mut nu, cost) = base();
    nu.row_mut(2).mapv_inplace(|v| 1.5 * v);
    cases.push(("problem 2", mu, nu, cost));
    let (ctx, stream) = foreign(&gpu);
    let params = SinkhornParams::new(0.1);
    for (what, mu, nu, cost) in &cases {
        let (mud, nud, cd) = (
            stream.clone_htod(mu.as_slice().unwrap()).unwrap(),
            stream.clone_htod(nu.as_slice().unwrap()).unwrap(),
            stream.clone_htod(cost.as_slice().unwrap()).unwrap(),
        );
        // SAFETY: as in `borrowed_matches_owned`.
        let got = unsafe {
            let be = gpu.on_stream(stream.cu_stream());
            let borrow =
                |s: &CudaSlice<f32>, len| be.borrow_buffer::<f32>(address(s, &stream), len);
            Solver::new(be.clone(), params.clone())
                .prepare_buffers(
                    borrow(&mud, b * n),
                    borrow(&nud, b * m),
                    &borrow(&cd, cost.len()),
                    (b, n, m),
                    true,
                )
                .unwrap_err()
                .to_string()
        };
        let want = match Problem::batch(mu.view(), nu.view(), cost.view()) {
            Err(e) => e.to_string(),
            Ok(p) => Solver::new(gpu.clone(), params.clone())
                .prepare(&p)
                .unwrap_err()
                .to_string(),
        };
        assert_eq!(got, want, "{what}");
        assert!(got.contains(what), "{what}: {got}");
        drop((mud, nud, cd));
    }
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

/// `coupling_into` and `plan_gradients_into` on borrowed buffers and a foreign stream: the
/// owned path's plan and gradients bit for bit, f32 and f64.
fn coupling_matches_owned<T: CudaReal>(
    gpu: &CudaBackend,
    (b, n, m): (usize, usize, usize),
    batched: bool,
) where
    CudaBackend: GradKernels<T> + Backend<T, Buffer = CudaBuffer<T>>,
{
    let (ctx, stream) = foreign(gpu);
    let (mu, nu, cost) = data::<T>(b, n, m, 1, batched);
    let params = SinkhornParams::fixed_iterations(0.05, 50);
    let cg = CgParams::default();
    let mut r = Lcg(77);
    let up = Array3::from_shape_fn((b, n, m), |_| T::of(r.uniform(-1.0, 1.0)));
    let (mud, nud, cd, upd) = (
        stream.clone_htod(mu.as_slice().unwrap()).unwrap(),
        stream.clone_htod(nu.as_slice().unwrap()).unwrap(),
        stream.clone_htod(cost.as_slice().unwrap()).unwrap(),
        stream.clone_htod(up.as_slice().unwrap()).unwrap(),
    );
    let nan = |len: usize| stream.clone_htod(&vec![T::nan(); len]).unwrap();
    let (pd, dcd, dmud, dnud) = (nan(b * n * m), nan(b * n * m), nan(b * n), nan(b * m));
    // SAFETY: as in `borrowed_matches_owned`.
    let report = unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        let borrow = |s: &CudaSlice<T>, len| be.borrow_buffer::<T>(address(s, &stream), len);
        let solver = Solver::new(be.clone(), params.clone());
        let prepared = solver
            .prepare_buffers(
                borrow(&mud, b * n),
                borrow(&nud, b * m),
                &borrow(&cd, cost.len()),
                (b, n, m),
                batched,
            )
            .unwrap();
        let mut pb = borrow(&pd, b * n * m);
        solver.coupling_into(&prepared, &mut pb).unwrap();
        let (mut dc, mut dmu, mut dnu) = (
            borrow(&dcd, b * n * m),
            borrow(&dmud, b * n),
            borrow(&dnud, b * m),
        );
        let out = GradientBuffers {
            cost: &mut dc,
            mu: &mut dmu,
            nu: &mut dnu,
        };
        let g = borrow(&upd, b * n * m);
        logot::grad::plan_gradients_into(&be, &pb, (b, n, m), params.eps, &g, &cg, out).unwrap()
    };
    let read = |s: &CudaSlice<T>| stream.clone_dtoh(s).unwrap();
    let want = Solver::new(gpu.clone(), params.clone())
        .coupling(&problem(&mu, &nu, &cost, batched))
        .unwrap();
    let what = format!("{} B={b} n={n} m={m} batched={batched}", T::NAME);
    assert_eq!(
        bits(&read(&pd)),
        bits(want.plan.as_slice().unwrap()),
        "plan, {what}"
    );
    let wg =
        logot::grad::plan_gradients_on(gpu, want.plan.view(), params.eps, up.view(), &cg).unwrap();
    assert_eq!(
        bits(&read(&dcd)),
        bits(wg.cost.as_slice().unwrap()),
        "∂C, {what}"
    );
    assert_eq!(
        bits(&read(&dmud)),
        bits(wg.mu.as_slice().unwrap()),
        "∂μ, {what}"
    );
    assert_eq!(
        bits(&read(&dnud)),
        bits(wg.nu.as_slice().unwrap()),
        "∂ν, {what}"
    );
    assert_eq!(report.summary(), wg.cg.summary(), "{what}");
    drop((mud, nud, cd, upd, pd, dcd, dmud, dnud));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

#[test]
fn coupling_and_plan_gradients_on_borrowed_buffers_match_the_owned_path() {
    let Some(gpu) = gpu() else { return };
    for (dims, batched) in [((1, 40, 30), false), ((4, 48, 64), true)] {
        coupling_matches_owned::<f32>(&gpu, dims, batched);
        coupling_matches_owned::<f64>(&gpu, dims, batched);
    }
}
