//! Point-cloud OT and its point gradients on the caller's GPU memory and stream, as
//! `logot.torch.wasserstein_points` hands them over: `μ`, `ν`, `x`, `y` in slices of another
//! owner of the device's primary context, a stream created there,
//! [`CudaBackend::on_stream`] + [`CudaBackend::borrow_buffer`] over them, then
//! `SinkhornSolver::prepare` of a `BufferProblem::points` (the clouds centred, transposed and
//! measured on the device) and `solve_prepared` writing the caller's `f`, `g`, `∂x`, `∂y`.
//! They must equal the host-array path (`SinkhornSolver::point_gradients`, which uploads the
//! points and runs
//! the same device steps) bit for bit — `OT_ε`, potentials, distances, reports, gradients;
//! f32 and f64; d = 3, 17, 64; the three cross-term precisions; one pair, a shared pair and
//! one pair per problem — leave the inputs untouched, agree with the CPU in f64 on clouds far
//! from the origin (where the centring matters), and refuse bad input with the host path's
//! errors. Each test skips with a printed reason when no GPU is usable, and fails instead
//! when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]
use common::gpu::{address, foreign, gpu};

mod common;

use common::{bin_weights, Lcg};
use cudarc::driver::{CudaSlice, CudaStream};
use logot::backend::cuda::{CudaBackend, CudaBuffer, CudaReal};
use logot::{
    Backend, BufferOutputs, BufferProblem, CloudLayout, CpuBackend, CrossPrecision, GradKernels,
    PointCloudCost, PointCloudKernels, PointMetric, Problem, Real, SinkhornParams, SinkhornSolver,
};
use ndarray::{Array2, Array3, Axis};
use std::sync::Arc;

fn bits<T: Real>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.f64().to_bits()).collect()
}

/// A seeded batch: `b` rows of weights (the first bin of `μ` empty), clouds `x` in
/// `[2, 3)^d` and `y` in `[2.1, 3.1)^d`, one pair or `b` pairs.
struct Clouds<T> {
    mu: Array2<T>,
    nu: Array2<T>,
    x: Array3<T>,
    y: Array3<T>,
    batched: bool,
}

fn clouds<T: Real>(b: usize, (n, m, d): (usize, usize, usize), batched: bool) -> Clouds<T> {
    let mut r = Lcg(41 + (b * 131 + n * 17 + m * 5 + d) as u64);
    let pairs = if batched { b } else { 1 };
    Clouds {
        mu: bin_weights(b, n, 1, 7 + n as u64).mapv(T::of),
        nu: bin_weights(b, m, 0, 11 + m as u64).mapv(T::of),
        x: Array3::from_shape_fn((pairs, n, d), |_| T::of(r.uniform(2.0, 3.0))),
        y: Array3::from_shape_fn((pairs, m, d), |_| T::of(r.uniform(2.1, 3.1))),
        batched,
    }
}

impl<T: Real> Clouds<T> {
    fn cost(&self, metric: PointMetric, precision: CrossPrecision) -> PointCloudCost<'_, T> {
        if self.batched {
            PointCloudCost::batched_with_metric(self.x.view(), self.y.view(), metric)
        } else {
            PointCloudCost::with_metric(
                self.x.index_axis(Axis(0), 0),
                self.y.index_axis(Axis(0), 0),
                metric,
            )
        }
        .unwrap()
        .with_precision(precision)
    }

    fn layout(&self, metric: PointMetric, precision: CrossPrecision) -> CloudLayout {
        let (pairs, n, d) = self.x.dim();
        CloudLayout {
            n,
            m: self.y.dim().1,
            d,
            batch: self.batched.then_some(pairs),
            metric,
            precision,
        }
    }

    /// The caller's copies `[μ, ν, x, y]` still hold these clouds, bit for bit.
    fn assert_untouched(&self, stream: &Arc<CudaStream>, inputs: &[CudaSlice<T>; 4], what: &str)
    where
        T: CudaReal,
    {
        let want = [
            &self.mu.as_slice(),
            &self.nu.as_slice(),
            &self.x.as_slice(),
            &self.y.as_slice(),
        ];
        for (s, w) in inputs.iter().zip(want) {
            let got = stream.clone_dtoh(s).unwrap();
            assert_eq!(bits(&got), bits(w.unwrap()), "inputs, {what}");
        }
    }

    fn f64(&self) -> Clouds<f64> {
        Clouds {
            mu: self.mu.mapv(|v| v.f64()),
            nu: self.nu.mapv(|v| v.f64()),
            x: self.x.mapv(|v| v.f64()),
            y: self.y.mapv(|v| v.f64()),
            batched: self.batched,
        }
    }
}

/// The caller's copies of `[μ, ν, x, y]` in device memory of `stream`'s context.
fn upload<T: CudaReal>(stream: &Arc<CudaStream>, c: &Clouds<T>) -> [CudaSlice<T>; 4] {
    [
        c.mu.as_slice(),
        c.nu.as_slice(),
        c.x.as_slice(),
        c.y.as_slice(),
    ]
    .map(|s| stream.clone_htod(s.unwrap()).unwrap())
}

/// The borrowed path's per-problem `OT_ε` (f64) and report, or its error.
///
/// # Safety
/// `stream` is a stream of the device's primary context; `inputs` and `outputs` hold the
/// lengths of the batch and outlive the call.
unsafe fn borrowed<T: CudaReal>(
    gpu: &CudaBackend,
    stream: &Arc<CudaStream>,
    params: &SinkhornParams,
    inputs: &[CudaSlice<T>; 4],
    outputs: &[CudaSlice<T>; 4],
    b: usize,
    layout: CloudLayout,
) -> logot::Result<logot::BufferResult>
where
    CudaBackend: PointCloudKernels<T> + GradKernels<T> + Backend<T, Buffer = CudaBuffer<T>>,
{
    // SAFETY: the caller's contract.
    let be = unsafe { gpu.on_stream(stream.cu_stream()) };
    let borrow = |s: &CudaSlice<T>| unsafe { be.borrow_buffer::<T>(address(s, stream), s.len()) };
    let solver = SinkhornSolver::new(be.clone(), params.clone());
    let [mu, nu, x, y] = inputs;
    let (x, y) = (borrow(x), borrow(y));
    let prepared = solver.prepare(BufferProblem::points(
        borrow(mu),
        borrow(nu),
        &x,
        &y,
        b,
        layout,
    ))?;
    let [mut f, mut g, mut gx, mut gy] = outputs.each_ref().map(borrow);
    let out = BufferOutputs::new()
        .potentials(&mut f, &mut g)
        .point_gradients(&mut gx, &mut gy);
    solver.solve_prepared(&prepared, out)
}

/// `∂x` within `rel` of the largest CPU entry of every CPU entry (f64, same order).
fn assert_gradient_near_cpu<'a, T: Real>(
    got: &[T],
    cpu: impl Iterator<Item = &'a f64> + Clone,
    rel: f64,
    what: &str,
) {
    let scale = cpu.clone().fold(0.0f64, |a, v| a.max(v.abs()));
    let mut count = 0;
    for (k, (g, w)) in got.iter().zip(cpu).enumerate() {
        assert!(
            (g.f64() - w).abs() <= rel * scale,
            "{what}: ∂x[{k}] {g:?} vs CPU {w} (scale {scale})"
        );
        count += 1;
    }
    assert_eq!(count, got.len(), "{what}: ∂x lengths");
}

fn borrowed_matches_owned<T: CudaReal>(
    gpu: &CudaBackend,
    (b, n, m, d): (usize, usize, usize, usize),
    batched: bool,
    metric: PointMetric,
    precision: CrossPrecision,
    cpu_tol: f64,
) where
    CudaBackend: PointCloudKernels<T> + GradKernels<T> + Backend<T, Buffer = CudaBuffer<T>>,
{
    let (ctx, stream) = foreign(gpu);
    let c = clouds::<T>(b, (n, m, d), batched);
    let eps = 0.05 * (d as f64 / 6.0 + 0.01 * d as f64);
    let params = SinkhornParams::new(eps).fixed_iterations(60);
    let inputs = upload(&stream, &c);
    // Outputs start as NaN: every entry must be written.
    let nan = |len: usize| stream.clone_htod(&vec![T::nan(); len]).unwrap();
    let outputs = [nan(b * n), nan(b * m), nan(b * n * d), nan(b * m * d)];
    let layout = c.layout(metric, precision);
    // SAFETY: the stream belongs to the primary context; the slices outlive the call.
    let sol = unsafe { borrowed(gpu, &stream, &params, &inputs, &outputs, b, layout) }.unwrap();
    let read = |s: &CudaSlice<T>| stream.clone_dtoh(s).unwrap();
    let what = format!(
        "{} B={b} n={n} m={m} d={d} batched={batched} {metric:?} {precision:?}",
        T::NAME
    );
    c.assert_untouched(&stream, &inputs, &what);
    // The host-array path on the backend's own stream.
    let solver = SinkhornSolver::new(gpu.clone(), params.clone());
    let p = Problem::new(c.mu.view(), c.nu.view(), c.cost(metric, precision)).unwrap();
    let want = solver.point_gradients(&p).unwrap();
    let sol_value = sol.value.clone().unwrap();
    let value: Vec<T> = sol_value.iter().map(|&v| T::of(v)).collect();
    assert_eq!(
        bits(&value),
        bits(want.value.as_slice().unwrap()),
        "OT_ε, {what}"
    );
    let host = [
        want.result.f.as_slice(),
        want.result.g.as_slice(),
        want.x.as_slice(),
        want.y.as_slice(),
    ];
    for ((s, w), name) in outputs.iter().zip(host).zip(["f", "g", "∂x", "∂y"]) {
        assert_eq!(bits(&read(s)), bits(w.unwrap()), "{name}, {what}");
    }
    let dist: Vec<T> = sol.distance.iter().map(|&v| T::of(v)).collect();
    assert_eq!(
        bits(&dist),
        bits(want.result.distance.as_slice().unwrap()),
        "distance, {what}"
    );
    assert_eq!(
        sol.convergence.marginal_errors(),
        want.result.convergence.marginal_errors(),
        "{what}"
    );
    // And the CPU in f64 (no centring there): the same OT_ε and gradients up to T's
    // rounding (and the cross term's precision) over 60 iterations.
    let c64 = c.f64();
    let p64 = Problem::new(c64.mu.view(), c64.nu.view(), c64.cost(metric, precision)).unwrap();
    let cpu = SinkhornSolver::new(CpuBackend, params)
        .point_gradients(&p64)
        .unwrap();
    for (k, (&v, &w)) in sol_value.iter().zip(&cpu.value).enumerate() {
        assert!(
            (v - w).abs() <= cpu_tol * w.abs().max(eps),
            "{what}: OT_ε {k}: {v} vs CPU {w}"
        );
    }
    assert_gradient_near_cpu(&read(&outputs[2]), cpu.x.iter(), 10.0 * cpu_tol, &what);
    drop((inputs, outputs));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

#[test]
fn point_gradients_on_borrowed_buffers_and_stream_match_the_owned_path() {
    let Some(gpu) = gpu() else { return };
    use CrossPrecision::{Exact, Tf32, Tf32x3};
    use PointMetric::{Euclidean, SqEuclidean};
    for (b, batched) in [(1, false), (3, false), (3, true)] {
        for metric in [SqEuclidean, Euclidean] {
            borrowed_matches_owned::<f64>(&gpu, (b, 40, 33, 3), batched, metric, Exact, 1e-9);
            borrowed_matches_owned::<f64>(&gpu, (b, 40, 33, 64), batched, metric, Exact, 1e-9);
            borrowed_matches_owned::<f32>(&gpu, (b, 40, 33, 3), batched, metric, Tf32x3, 2e-4);
            for (d, p, tol) in [
                (17, Exact, 2e-4),
                (17, Tf32x3, 2e-4),
                (64, Exact, 2e-4),
                (64, Tf32x3, 2e-4),
                (64, Tf32, 2e-2),
            ] {
                borrowed_matches_owned::<f32>(&gpu, (b, 40, 33, d), batched, metric, p, tol);
            }
        }
    }
}

#[test]
fn bad_borrowed_clouds_give_the_host_path_errors() {
    let Some(gpu) = gpu() else { return };
    let (ctx, stream) = foreign(&gpu);
    let params = SinkhornParams::new(0.1);
    let nan_at = |x: bool, at: [usize; 3]| {
        let mut c = clouds::<f32>(2, (6, 5, 17), true);
        if x {
            c.x[at] = f32::NAN;
        } else {
            c.y[at] = f32::INFINITY;
        }
        c
    };
    for c in [nan_at(true, [1, 4, 16]), nan_at(false, [0, 2, 3])] {
        let want = PointCloudCost::batched(c.x.view(), c.y.view()).unwrap_err();
        let inputs = upload(&stream, &c);
        let nan = |len: usize| stream.clone_htod(&vec![f32::NAN; len]).unwrap();
        let outputs = [nan(12), nan(10), nan(12 * 17), nan(10 * 17)];
        let layout = c.layout(PointMetric::SqEuclidean, CrossPrecision::Tf32x3);
        // SAFETY: as in borrowed_matches_owned.
        let got = unsafe { borrowed(&gpu, &stream, &params, &inputs, &outputs, 2, layout) };
        assert_eq!(got.unwrap_err().to_string(), want.to_string());
    }
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

/// The Sinkhorn divergence on borrowed buffers and stream (`prepare_divergence` of a
/// `BufferProblem::points`, `sinkhorn_divergence_prepared`, as `logot.torch.sinkhorn_divergence`
/// calls them) against `SinkhornSolver::sinkhorn_divergence` on the backend's own stream (bit
/// for bit) and the CPU in f64.
fn divergence_borrowed_matches_owned<T: CudaReal>(
    gpu: &CudaBackend,
    (b, n, m, d): (usize, usize, usize, usize),
    batched: bool,
    metric: PointMetric,
    params: &SinkhornParams,
    cpu_tol: f64,
) where
    CudaBackend: PointCloudKernels<T> + GradKernels<T> + Backend<T, Buffer = CudaBuffer<T>>,
{
    let (ctx, stream) = foreign(gpu);
    let c = clouds::<T>(b, (n, m, d), batched);
    let precision = CrossPrecision::default();
    let inputs = upload(&stream, &c);
    let nan = |len: usize| stream.clone_htod(&vec![T::nan(); len]).unwrap();
    let outputs = [nan(b * n * d), nan(b * m * d)];
    let layout = c.layout(metric, precision);
    let sol = {
        // SAFETY: the stream belongs to the primary context; the slices outlive the call.
        let be = unsafe { gpu.on_stream(stream.cu_stream()) };
        let borrow =
            |s: &CudaSlice<T>| unsafe { be.borrow_buffer::<T>(address(s, &stream), s.len()) };
        let solver = SinkhornSolver::new(be.clone(), params.clone());
        let [mu, nu, x, y] = &inputs;
        let (x, y) = (borrow(x), borrow(y));
        let input = BufferProblem::points(borrow(mu), borrow(nu), &x, &y, b, layout);
        let prepared = solver.prepare_divergence(input).unwrap();
        let [mut gx, mut gy] = outputs.each_ref().map(borrow);
        let out = BufferOutputs::new().point_gradients(&mut gx, &mut gy);
        solver.sinkhorn_divergence_prepared(&prepared, out).unwrap()
    };
    let read = |s: &CudaSlice<T>| stream.clone_dtoh(s).unwrap();
    let what = format!(
        "divergence {} B={b} n={n} m={m} d={d} batched={batched} {metric:?}",
        T::NAME
    );
    c.assert_untouched(&stream, &inputs, &what);
    let conv = logot::DivergenceConvention::Objective;
    let problem = Problem::new(c.mu.view(), c.nu.view(), c.cost(metric, precision)).unwrap();
    let want = SinkhornSolver::new(gpu.clone(), params.clone())
        .sinkhorn_divergence(&problem, conv)
        .unwrap();
    let of = |v: &[f64]| -> Vec<T> { v.iter().map(|&v| T::of(v)).collect() };
    assert_eq!(
        bits(&of(&sol.value)),
        bits(want.value.as_slice().unwrap()),
        "S_ε, {what}"
    );
    for (k, terms) in want.terms.rows().into_iter().enumerate() {
        assert_eq!(
            bits(&of(&sol.terms[k])),
            bits(&terms.to_vec()),
            "terms {k}, {what}"
        );
    }
    let flat = |g: &Option<Array3<T>>| g.as_ref().unwrap().iter().copied().collect::<Vec<T>>();
    let (gx, gy) = (read(&outputs[0]), read(&outputs[1]));
    assert_eq!(bits(&gx), bits(&flat(&want.grad_x)), "∂x, {what}");
    assert_eq!(bits(&gy), bits(&flat(&want.grad_y)), "∂y, {what}");
    // The CPU in f64: the three terms to T's rounding, S_ε and ∂x to that of the terms.
    let c64 = c.f64();
    let p64 = Problem::new(c64.mu.view(), c64.nu.view(), c64.cost(metric, precision)).unwrap();
    let cpu = SinkhornSolver::new(CpuBackend, params.clone())
        .sinkhorn_divergence(&p64, conv)
        .unwrap();
    for (k, terms) in cpu.terms.rows().into_iter().enumerate() {
        let scale = terms.iter().fold(params.eps, |a, v| a.max(v.abs()));
        for t in 0..3 {
            let (v, w) = (sol.terms[k][t], terms[t]);
            assert!(
                (v - w).abs() <= cpu_tol * scale,
                "{what}: term {t} of {k}: {v} vs CPU {w}"
            );
        }
        let (v, w) = (sol.value[k], cpu.value[k]);
        assert!(
            (v - w).abs() <= 2.0 * cpu_tol * scale,
            "{what}: S_ε {k}: {v} vs CPU {w}"
        );
        assert!(w > 0.0, "{what}: S_ε {k} = {w}");
    }
    let cpu_gx = cpu.grad_x.as_ref().unwrap().iter();
    assert_gradient_near_cpu(&gx, cpu_gx, 10.0 * cpu_tol, &what);
    drop((inputs, outputs));
    stream.synchronize().unwrap();
    ctx.check_err().unwrap();
}

#[test]
fn divergence_on_borrowed_buffers_and_stream_matches_the_owned_path() {
    let Some(gpu) = gpu() else { return };
    use PointMetric::{Euclidean, SqEuclidean};
    for (b, batched) in [(1, false), (3, false), (3, true)] {
        for (d, metric) in [(3, SqEuclidean), (17, Euclidean), (64, SqEuclidean)] {
            let eps = 0.05 * (d as f64 / 6.0 + 0.01 * d as f64);
            let fixed = SinkhornParams::new(eps).fixed_iterations(60);
            divergence_borrowed_matches_owned::<f64>(
                &gpu,
                (b, 40, 33, d),
                batched,
                metric,
                &fixed,
                1e-9,
            );
            divergence_borrowed_matches_owned::<f32>(
                &gpu,
                (b, 40, 33, d),
                batched,
                metric,
                &fixed,
                2e-4,
            );
        }
    }
    // Stopping at the tolerance (the convergence checks on the device), and ε-scaling.
    let c = clouds::<f64>(2, (40, 33, 3), true);
    let cost = c.cost(PointMetric::SqEuclidean, CrossPrecision::default());
    for params in [
        SinkhornParams::new(0.05),
        SinkhornParams::new(0.01).eps_scaling(cost.eps_scaling()),
    ] {
        divergence_borrowed_matches_owned::<f64>(
            &gpu,
            (2, 40, 33, 3),
            true,
            PointMetric::SqEuclidean,
            &params,
            1e-8,
        );
        divergence_borrowed_matches_owned::<f32>(
            &gpu,
            (2, 40, 33, 3),
            true,
            PointMetric::SqEuclidean,
            &params,
            2e-4,
        );
    }
}
