//! Dense Sinkhorn and its exact gradients on the caller's GPU memory and stream, as
//! `logot.torch` hands them over: `μ`, `ν` and the cost in slices of another owner of the
//! device's primary context, a stream created there, [`CudaBackend::on_stream`] +
//! [`CudaBackend::borrow_buffer`] over them, then `SinkhornSolver::prepare` of a
//! `BufferProblem` and `solve_prepared` writing the caller's outputs (`BufferOutputs`).
//! They must equal the host-array path on the backend's own stream bit for bit (potentials,
//! distances, reports, `∂C`, `∂μ`, `∂ν`; f32 and f64; one shared cost and a batch of
//! costs; zero-mass bins), leave the inputs untouched, agree with the CPU in f64, and refuse
//! bad input with the host path's errors. Each test skips with a printed reason when no GPU
//! is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]
use common::gpu::{address, foreign, gpu};

mod common;

use common::{bin_weights, Lcg};
use cudarc::driver::{CudaSlice, CudaStream};
use logot::backend::cuda::{CudaBackend, CudaBuffer, CudaReal};
use logot::grad::{CgParams, GradientBuffers};
use logot::{
    Backend, BufferOutputs, BufferProblem, CpuBackend, GradKernels, PreparedProblem, Problem, Real,
    SinkhornParams, SinkhornSolver,
};
use ndarray::{Array2, Array3, Axis};
use std::sync::Arc;

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
        Problem::new(mu.view(), nu.view(), cost.view()).unwrap()
    } else {
        Problem::new(mu.view(), nu.view(), cost.index_axis(Axis(0), 0)).unwrap()
    }
}

/// The caller's copies of `μ`, `ν` and the cost, in device memory of `stream`'s context.
fn upload<T: CudaReal>(
    stream: &Arc<CudaStream>,
    mu: &Array2<T>,
    nu: &Array2<T>,
    cost: &Array3<T>,
) -> [CudaSlice<T>; 3] {
    [mu.as_slice(), nu.as_slice(), cost.as_slice()].map(|s| stream.clone_htod(s.unwrap()).unwrap())
}

/// `SinkhornSolver::prepare` of a `BufferProblem` over borrowed views of the caller's `[μ, ν, cost]`, and the
/// borrowed cost (the gradients read it again).
///
/// # Safety
/// The solver's backend launches on `stream`, a stream of the device's primary context, and
/// the slices outlive the returned buffers.
unsafe fn prepare_borrowed<T: CudaReal>(
    solver: &SinkhornSolver<CudaBackend>,
    stream: &Arc<CudaStream>,
    [mu, nu, cost]: &[CudaSlice<T>; 3],
    dims: (usize, usize, usize),
    batched: bool,
) -> (
    logot::Result<PreparedProblem<T, CudaBackend>>,
    CudaBuffer<T>,
)
where
    CudaBackend: Backend<T, Buffer = CudaBuffer<T>>,
{
    let be = solver.backend();
    // SAFETY: the caller's contract.
    let borrow = |s: &CudaSlice<T>| unsafe { be.borrow_buffer::<T>(address(s, stream), s.len()) };
    let cost_b = borrow(cost);
    let prepared = solver.prepare(BufferProblem::dense(
        borrow(mu),
        borrow(nu),
        &cost_b,
        dims,
        batched,
    ));
    (prepared, cost_b)
}

/// `∂C`, `∂μ`, `∂ν` in the caller's buffers equal `want`'s bit for bit.
fn assert_gradients_equal<T: CudaReal>(
    stream: &Arc<CudaStream>,
    got: [&CudaSlice<T>; 3],
    (cost, mu, nu): (&Array3<T>, &Array2<T>, &Array2<T>),
    what: &str,
) {
    let want = [cost.as_slice(), mu.as_slice(), nu.as_slice()].map(Option::unwrap);
    for ((s, w), name) in got.into_iter().zip(want).zip(["∂C", "∂μ", "∂ν"]) {
        assert_eq!(
            bits(&stream.clone_dtoh(s).unwrap()),
            bits(w),
            "{name}, {what}"
        );
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
    let params = SinkhornParams::new(0.05).fixed_iterations(60);
    let cg = CgParams::default();
    let inputs = upload(&stream, &mu, &nu, &cost);
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
        let solver = SinkhornSolver::new(be.clone(), params.clone());
        let (prepared, cost_b) = prepare_borrowed(&solver, &stream, &inputs, (b, n, m), batched);
        let prepared = prepared.unwrap();
        let (mut fb, mut gb) = (borrow(&fd, b * n), borrow(&gd, b * m));
        let sol = solver
            .solve_prepared(&prepared, BufferOutputs::new().potentials(&mut fb, &mut gb))
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
        let grad_sol = solver
            .solve_prepared(
                &prepared,
                BufferOutputs::new().wasserstein_gradients(&cost_b, &cg, out),
            )
            .unwrap();
        let report = grad_sol.cg.clone().unwrap();
        (sol, grad_sol, report)
    };
    let read = |s: &CudaSlice<T>| stream.clone_dtoh(s).unwrap();
    // The caller's inputs are untouched.
    let [mud, nud, cd] = &inputs;
    assert_eq!(read(mud), mu.as_slice().unwrap());
    assert_eq!(read(nud), nu.as_slice().unwrap());
    assert_eq!(read(cd), cost.as_slice().unwrap());
    // The host-array path on the backend's own stream.
    let solver = SinkhornSolver::new(gpu.clone(), params.clone());
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
    assert_gradients_equal(
        &stream,
        [&dcd, &dmud, &dnud],
        (&wg.cost, &wg.mu, &wg.nu),
        &what,
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
    let cpu = SinkhornSolver::new(CpuBackend, params)
        .solve(&problem(&mu64, &nu64, &c64, batched))
        .unwrap();
    let tol = if T::NAME == "float64" { 1e-10 } else { 2e-4 };
    for (k, (&d, &c)) in sol.distance.iter().zip(&cpu.distance).enumerate() {
        assert!(
            (d - c).abs() <= tol * c.abs().max(1.0),
            "{what}: distance {k}: {d} vs CPU {c}"
        );
    }
    drop((inputs, fd, gd, dcd, dmud, dnud));
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
    let params = SinkhornParams::new(0.05).fixed_iterations(80);
    let (ctx, stream) = foreign(&gpu);
    let inputs = upload(&stream, &mu, &nu, &cost);
    let (fd, gd) = (
        stream.alloc_zeros::<f64>(b * n).unwrap(),
        stream.alloc_zeros::<f64>(b * m).unwrap(),
    );
    // SAFETY: as in `borrowed_matches_owned`.
    let sol = unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        let borrow = |s: &CudaSlice<f64>, len| be.borrow_buffer::<f64>(address(s, &stream), len);
        let solver = SinkhornSolver::new(be.clone(), params.clone());
        let (prepared, _) = prepare_borrowed(&solver, &stream, &inputs, (b, n, m), true);
        let (mut fb, mut gb) = (borrow(&fd, b * n), borrow(&gd, b * m));
        let prepared = prepared.unwrap();
        solver
            .solve_prepared(&prepared, BufferOutputs::new().potentials(&mut fb, &mut gb))
            .unwrap()
    };
    let cpu = SinkhornSolver::new(CpuBackend, params)
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
    drop((inputs, fd, gd));
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
        let inputs = upload(&stream, mu, nu, cost);
        // SAFETY: as in `borrowed_matches_owned`.
        let got = unsafe {
            let solver = SinkhornSolver::new(gpu.on_stream(stream.cu_stream()), params.clone());
            prepare_borrowed(&solver, &stream, &inputs, (b, n, m), true)
                .0
                .unwrap_err()
                .to_string()
        };
        let want = match Problem::new(mu.view(), nu.view(), cost.view()) {
            Err(e) => e.to_string(),
            Ok(p) => SinkhornSolver::new(gpu.clone(), params.clone())
                .prepare(&p)
                .unwrap_err()
                .to_string(),
        };
        assert_eq!(got, want, "{what}");
        assert!(got.contains(what), "{what}: {got}");
        drop(inputs);
    }
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

/// `BufferOutputs::plan` and `plan_gradients_buffers` on borrowed buffers and a foreign stream: the
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
    let params = SinkhornParams::new(0.05).fixed_iterations(50);
    let cg = CgParams::default();
    let mut r = Lcg(77);
    let up = Array3::from_shape_fn((b, n, m), |_| T::of(r.uniform(-1.0, 1.0)));
    let inputs = upload(&stream, &mu, &nu, &cost);
    let upd = stream.clone_htod(up.as_slice().unwrap()).unwrap();
    let nan = |len: usize| stream.clone_htod(&vec![T::nan(); len]).unwrap();
    let (pd, dcd, dmud, dnud) = (nan(b * n * m), nan(b * n * m), nan(b * n), nan(b * m));
    // SAFETY: as in `borrowed_matches_owned`.
    let report = unsafe {
        let be = gpu.on_stream(stream.cu_stream());
        let borrow = |s: &CudaSlice<T>, len| be.borrow_buffer::<T>(address(s, &stream), len);
        let solver = SinkhornSolver::new(be.clone(), params.clone());
        let (prepared, _) = prepare_borrowed(&solver, &stream, &inputs, (b, n, m), batched);
        let prepared = prepared.unwrap();
        let mut pb = borrow(&pd, b * n * m);
        solver
            .solve_prepared(&prepared, BufferOutputs::new().plan(&mut pb))
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
        let g = borrow(&upd, b * n * m);
        solver
            .plan_gradients_buffers(&pb, (b, n, m), &g, &cg, out)
            .unwrap()
    };
    let read = |s: &CudaSlice<T>| stream.clone_dtoh(s).unwrap();
    let want = SinkhornSolver::new(gpu.clone(), params.clone())
        .coupling(&problem(&mu, &nu, &cost, batched))
        .unwrap();
    let what = format!("{} B={b} n={n} m={m} batched={batched}", T::NAME);
    assert_eq!(
        bits(&read(&pd)),
        bits(want.plan.as_slice().unwrap()),
        "plan, {what}"
    );
    let wg = SinkhornSolver::new(gpu.clone(), params.clone())
        .plan_gradients(want.plan.view(), up.view(), &cg)
        .unwrap();
    assert_gradients_equal(
        &stream,
        [&dcd, &dmud, &dnud],
        (&wg.cost, &wg.mu, &wg.nu),
        &what,
    );
    assert_eq!(report.summary(), wg.cg.summary(), "{what}");
    drop((inputs, upd, pd, dcd, dmud, dnud));
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

/// The input checks' row statistics of buffers on the device (the one pass that prepares a
/// borrowed dense cost) against a plain f64 loop on the host, for one long row (a dense
/// cost, cut into chunks across the GPU), a few rows and many short ones; with NaN, ±∞ and
/// negative entries placed in different chunks.
#[test]
fn row_statistics_match_a_host_loop_whatever_the_row_count() {
    let Some(be) = gpu() else { return };
    for (rows, per) in [
        (1usize, 3_000_001usize),
        (3, 1 << 20),
        (7, 100_003),
        (5000, 3),
    ] {
        let mut rng = Lcg(rows as u64 * 7 + per as u64);
        let mut v: Vec<f64> = (0..rows * per).map(|_| rng.uniform(-1.0, 3.0)).collect();
        let last = v.len() - 1;
        v[per / 2] = f64::NAN;
        v[last] = f64::INFINITY;
        v[last / 3] = f64::NEG_INFINITY;
        let buf = <CudaBackend as Backend<f64>>::upload(&be, &v).unwrap();
        let got = <CudaBackend as Backend<f64>>::row_stats(&be, &buf, rows).unwrap();
        assert_eq!(got.len(), rows);
        for (r, s) in got.iter().enumerate() {
            let row = &v[r * per..(r + 1) * per];
            let sum: f64 = row.iter().sum();
            let min = row
                .iter()
                .filter(|x| !x.is_nan())
                .fold(f64::INFINITY, |a, &b| a.min(b));
            let max = row
                .iter()
                .filter(|x| !x.is_nan())
                .fold(f64::NEG_INFINITY, |a, &b| a.max(b));
            if sum.is_finite() {
                let scale: f64 = row.iter().map(|x| x.abs()).sum();
                assert!(
                    (s.sum - sum).abs() <= 1e-13 * scale,
                    "row {r}: {} against {sum}",
                    s.sum
                );
            } else {
                // NaN and ±∞ sums are the same non-finite value.
                assert!(s.sum.is_nan() == sum.is_nan() && (sum.is_nan() || s.sum == sum));
            }
            assert_eq!((s.min, s.max), (min, max), "row {r} of {rows}×{per}");
            let bad = row.iter().filter(|x| !x.is_finite()).count() as u64;
            let neg = row.iter().filter(|&&x| x < 0.0).count() as u64;
            assert_eq!(
                (s.non_finite, s.negative),
                (bad, neg),
                "row {r} of {rows}×{per}"
            );
        }
    }
}
