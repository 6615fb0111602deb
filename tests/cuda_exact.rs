//! Exact minibatch OT on the GPU (`CudaBackend::emd_batch`, `CudaBackend::emd_points_batch`):
//! costs equal to the CPU's assignment solver to 1e-12 relative on random, integer-valued
//! (tied), duplicated-point and n = 1, 2, 4096 problems, in f32 and f64; assignments that are
//! permutations; certificates within 1e-9, recomputed here over every pair in f64 from the
//! returned potentials; every permutation of n ≤ 7 tried by brute force; and a problem the
//! device does not finish handed to the CPU and reported as such. Each test skips with a
//! printed reason when no GPU is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::gpu;

use logot::exact::{self, EmdMethod, EmdParams, EmdResult, ExactMethod, Metric};
use logot::Real;
use ndarray::{Array2, Array3, ArrayView2, Axis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn rel(x: f64, y: f64) -> f64 {
    (x - y).abs() / x.abs().max(y.abs()).max(f64::MIN_POSITIVE)
}

fn uniform<T: Real>(b: usize, n: usize) -> Array2<T> {
    Array2::from_elem((b, n), T::one() / T::of(n as f64))
}

/// The CPU's assignment solver on the same batch (costs of clouds stored up to 4096²).
fn cpu_params() -> EmdParams {
    EmdParams::default()
        .method(EmdMethod::Assignment)
        .store_costs_below(1 << 25)
}

/// A device result: solved there, exact, a permutation carrying the weights, and a
/// certificate that holds when recomputed here over every pair of `c` (n×n, in f64) from
/// the returned potentials, equal to the one reported.
fn check_device(r: &EmdResult, c: ArrayView2<'_, f64>) {
    let n = c.nrows();
    assert_eq!(r.method, ExactMethod::Auction, "solved on the device");
    assert!(r.converged && r.exact, "{:?}", r.certificate);
    assert_eq!(r.plan.len(), n);
    let mut rows = r.plan.rows.clone();
    let mut cols = r.plan.cols.clone();
    rows.sort_unstable();
    cols.sort_unstable();
    assert!(
        rows.iter().copied().eq(0..n) && cols.iter().copied().eq(0..n),
        "a permutation"
    );
    let max_c = c.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let scale = if max_c > 0.0 { max_c } else { 1.0 };
    let mut viol = f64::NEG_INFINITY;
    for i in 0..n {
        for j in 0..n {
            viol = viol.max(r.f[i] + r.g[j] - c[[i, j]]);
        }
    }
    let primal: f64 = r.plan.iter().map(|(i, j, p)| p * c[[i, j]]).sum();
    // Every weight is mass/n (1/n rounded to the input's precision).
    let w = r.certificate.mass / n as f64;
    let dual = w * (r.f.sum() + r.g.sum());
    assert!(
        viol.max(0.0) <= 1e-9 * scale,
        "violation {viol:e} of scale {scale:e}"
    );
    assert!(
        (primal - dual).abs() <= 1e-9 * scale,
        "gap {:e}",
        primal - dual
    );
    assert!((viol.max(0.0) - r.certificate.max_violation).abs() <= 1e-14 * scale);
    assert!(rel(r.cost, primal) <= 1e-14 || (r.cost - primal).abs() <= 1e-15 * scale);
    assert!(rel(r.certificate.max_abs_cost, max_c) <= 1e-14 || max_c == 0.0);
    assert!(r.certificate.duality_gap <= 1e-9 * scale);
}

/// Every problem of a dense batch on the GPU against the CPU's assignment solver.
fn dense_against_cpu<T: logot::backend::cuda::CudaReal>(cost: &Array3<T>, b: usize) {
    let Some(gpu) = gpu() else { return };
    let n = cost.dim().1;
    let w = uniform::<T>(b, n);
    let on_gpu = gpu
        .emd_batch(w.view(), w.view(), cost.view(), &EmdParams::default())
        .unwrap();
    let on_cpu = exact::emd_batch(w.view(), w.view(), cost.view(), &cpu_params()).unwrap();
    for (k, (g, c)) in on_gpu.iter().zip(&on_cpu).enumerate() {
        let ck = cost
            .index_axis(Axis(0), if cost.dim().0 == 1 { 0 } else { k })
            .mapv(|v| v.f64());
        check_device(g, ck.view());
        assert!(c.exact);
        assert!(
            rel(g.cost, c.cost) <= 1e-12 || (g.cost - c.cost).abs() <= 1e-15,
            "problem {k}: {} on the GPU, {} on the CPU",
            g.cost,
            c.cost
        );
    }
}

fn random_costs<T: Real>(rng: &mut StdRng, b: usize, n: usize, lo: f64, hi: f64) -> Array3<T> {
    Array3::from_shape_fn((b, n, n), |_| T::of(rng.random_range(lo..hi)))
}

#[test]
fn random_costs_match_the_cpu_solver() {
    let mut rng = StdRng::seed_from_u64(49);
    for n in [3, 17, 64, 200, 333] {
        dense_against_cpu(&random_costs::<f64>(&mut rng, 5, n, 0.0, 1.0), 5);
        dense_against_cpu(&random_costs::<f32>(&mut rng, 5, n, -3.0, 7.0), 5);
    }
    // One cost shared by the batch.
    dense_against_cpu(&random_costs::<f64>(&mut rng, 1, 128, 0.0, 1e3), 4);
}

#[test]
fn integer_costs_with_ties_match_the_cpu_solver() {
    let mut rng = StdRng::seed_from_u64(7);
    for (n, top) in [(16, 2), (100, 5), (257, 10), (512, 3)] {
        let c = Array3::from_shape_fn((4, n, n), |_| rng.random_range(0..top) as f64);
        dense_against_cpu(&c, 4);
        dense_against_cpu(&c.mapv(|v| v as f32), 4);
    }
    // Every cost equal: every permutation is optimal.
    dense_against_cpu(&Array3::from_elem((2, 300, 300), 2.5f64), 2);
}

#[test]
fn one_and_two_points() {
    let mut rng = StdRng::seed_from_u64(3);
    for n in [1, 2] {
        dense_against_cpu(&random_costs::<f64>(&mut rng, 8, n, -1.0, 1.0), 8);
        dense_against_cpu(&random_costs::<f32>(&mut rng, 8, n, 0.0, 1.0), 8);
    }
}

/// All permutations of 0..n.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    fn heap(k: usize, p: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if k <= 1 {
            out.push(p.clone());
            return;
        }
        for i in 0..k {
            heap(k - 1, p, out);
            let j = if k % 2 == 0 { i } else { 0 };
            p.swap(j, k - 1);
        }
    }
    let mut out = Vec::new();
    heap(n, &mut (0..n).collect(), &mut out);
    out
}

#[test]
fn small_problems_match_the_best_permutation() {
    let Some(gpu) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(11);
    for n in 1..=7 {
        let perms = permutations(n);
        for integer in [false, true] {
            let b = 6;
            let c = Array3::from_shape_fn((b, n, n), |_| {
                if integer {
                    rng.random_range(0..4) as f64
                } else {
                    rng.random_range(-1.0..1.0)
                }
            });
            let w = uniform::<f64>(b, n);
            let r = gpu
                .emd_batch(w.view(), w.view(), c.view(), &EmdParams::default())
                .unwrap();
            for (k, r) in r.iter().enumerate() {
                let ck = c.index_axis(Axis(0), k);
                let best = perms
                    .iter()
                    .map(|p| p.iter().enumerate().map(|(i, &j)| ck[[i, j]]).sum::<f64>())
                    .fold(f64::INFINITY, f64::min)
                    / n as f64;
                check_device(r, ck);
                assert!(
                    (r.cost - best).abs() <= 1e-12 * best.abs().max(1.0),
                    "n = {n}: {} against the best permutation's {best}",
                    r.cost
                );
            }
        }
    }
}

/// Clouds on the GPU against the CPU's assignment solver; the costs recomputed in f64.
fn clouds_against_cpu<T: logot::backend::cuda::CudaReal>(x: &Array3<T>, y: &Array3<T>) {
    let Some(gpu) = gpu() else { return };
    let (b, n, d) = x.dim();
    let on_gpu = gpu
        .emd_points_batch::<T>(
            None,
            None,
            x.view(),
            y.view(),
            Metric::SqEuclidean,
            &EmdParams::default(),
        )
        .unwrap();
    let on_cpu = exact::emd_points_batch::<T>(
        None,
        None,
        x.view(),
        y.view(),
        Metric::SqEuclidean,
        &cpu_params(),
    )
    .unwrap();
    assert_eq!(on_gpu.len(), b);
    for (k, (g, c)) in on_gpu.iter().zip(&on_cpu).enumerate() {
        let cost = Array2::from_shape_fn((n, n), |(i, j)| {
            (0..d)
                .map(|t| {
                    let e = x[[k, i, t]].f64() - y[[k, j, t]].f64();
                    e * e
                })
                .sum::<f64>()
        });
        check_device(g, cost.view());
        assert!(c.exact);
        assert!(
            rel(g.cost, c.cost) <= 1e-12 || (g.cost - c.cost).abs() <= 1e-15,
            "problem {k}: {} on the GPU, {} on the CPU",
            g.cost,
            c.cost
        );
    }
}

#[test]
fn point_clouds_match_the_cpu_solver() {
    let mut rng = StdRng::seed_from_u64(5);
    for (b, n, d) in [(6, 100, 2), (4, 256, 16), (3, 500, 3), (2, 64, 784)] {
        let x = Array3::from_shape_fn((b, n, d), |_| rng.random_range(0.0..1.0f64));
        let y = Array3::from_shape_fn((b, n, d), |_| rng.random_range(-0.5..1.5f64));
        clouds_against_cpu(&x, &y);
        clouds_against_cpu(&x.mapv(|v| v as f32), &y.mapv(|v| v as f32));
    }
}

#[test]
fn duplicated_points_match_the_cpu_solver() {
    let mut rng = StdRng::seed_from_u64(17);
    let (b, n, d) = (4, 300, 3);
    // x holds every point three times; y is x reversed (cost 0), then y with a few moved.
    let base = Array3::from_shape_fn((b, n / 3, d), |_| rng.random_range(0..5) as f64);
    let x = Array3::from_shape_fn((b, n, d), |(k, i, t)| base[[k, i % (n / 3), t]]);
    let y = Array3::from_shape_fn((b, n, d), |(k, i, t)| x[[k, n - 1 - i, t]]);
    clouds_against_cpu(&x, &y);
    let mut moved = y.clone();
    for k in 0..b {
        for i in (0..n).step_by(7) {
            moved[[k, i, 0]] += 1.0;
        }
    }
    clouds_against_cpu(&x, &moved);
    clouds_against_cpu(&x.mapv(|v| v as f32), &moved.mapv(|v| v as f32));
}

#[test]
fn the_largest_problems_match_the_cpu_solver() {
    let mut rng = StdRng::seed_from_u64(4096);
    let (b, n, d) = (2, 4096, 4);
    let x = Array3::from_shape_fn((b, n, d), |_| rng.random_range(0.0..1.0f32));
    let y = Array3::from_shape_fn((b, n, d), |_| rng.random_range(0.0..1.0f32));
    clouds_against_cpu(&x, &y);
}

#[test]
fn a_problem_the_device_does_not_finish_is_solved_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(1);
    let (b, n) = (3, 64);
    let c = random_costs::<f64>(&mut rng, b, n, 0.0, 1.0);
    let w = uniform::<f64>(b, n);
    // One bidding round cannot assign 64 rows: every problem goes to the CPU, whose
    // assignment solver is held to the same limit and says how far it got.
    let limited = EmdParams::default().max_iters(1);
    let r = gpu
        .emd_batch(w.view(), w.view(), c.view(), &limited)
        .unwrap();
    let cpu = exact::emd_batch(
        w.view(),
        w.view(),
        c.view(),
        &limited.method(EmdMethod::Assignment),
    )
    .unwrap();
    for (g, c) in r.iter().zip(&cpu) {
        assert_eq!(g.method, ExactMethod::Assignment);
        assert_eq!(
            (g.cost, g.converged, g.exact),
            (c.cost, c.converged, c.exact)
        );
    }
    // Non-uniform weights are not assignment problems: the network simplex on the CPU.
    let mut mu = uniform::<f64>(b, n);
    mu[[0, 0]] *= 2.0;
    mu[[0, 1]] = 0.0;
    let r = gpu
        .emd_batch(mu.view(), w.view(), c.view(), &EmdParams::default())
        .unwrap();
    assert!(r
        .iter()
        .all(|r| r.method == ExactMethod::NetworkSimplex && r.exact));
}

#[test]
fn bad_input_is_named_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let w = uniform::<f64>(2, 4);
    let mut c = Array3::from_elem((2, 4, 4), 1.0f64);
    c[[1, 2, 3]] = f64::NAN;
    let e = gpu
        .emd_batch(w.view(), w.view(), c.view(), &EmdParams::default())
        .unwrap_err();
    assert!(e.to_string().contains("cost"), "{e}");
    let x = Array3::<f64>::zeros((2, 4, 3));
    let y = Array3::<f64>::zeros((2, 4, 2));
    let e = gpu
        .emd_points_batch::<f64>(
            None,
            None,
            x.view(),
            y.view(),
            Metric::SqEuclidean,
            &EmdParams::default(),
        )
        .unwrap_err();
    assert!(e.to_string().starts_with("y"), "{e}");
}
