//! CUDA backend against the CPU backend in f64 (the reference): half-steps on every kernel
//! configuration, whole solves, plans, zero-mass bins, small ε. Each test skips with a
//! printed reason when no GPU is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::{gpu, gpu_with};

use logot::backend::cuda::{CudaBackend, CudaBuffer, Tuning};
use logot::backend::{Marginals, Potentials};
use logot::{Backend, CostSource, CpuBackend, Problem, Side, SinkhornParams, SinkhornSolver};
use ndarray::{Array1, Array2, Array3, Axis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn uniform(rng: &mut StdRng, len: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..len).map(|_| rng.random_range(lo..hi)).collect()
}

fn cast<T: logot::Real>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::of(x)).collect()
}

/// Random histograms (rows sum to 1), with `zeros` entries of each row set to 0.
fn histograms(rng: &mut StdRng, b: usize, n: usize, zeros: usize) -> Array2<f64> {
    let mut h = Array2::from_shape_fn((b, n), |_| rng.random_range(0.05..1.0));
    for mut row in h.rows_mut() {
        for _ in 0..zeros {
            let k = rng.random_range(0..n);
            row[k] = 0.0;
        }
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    h
}

/// Largest |a − b| over the finite entries; the −∞ entries must coincide.
fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let mut worst = 0.0f64;
    for (k, (&x, &y)) in a.iter().zip(b).enumerate() {
        if x == f64::NEG_INFINITY || y == f64::NEG_INFINITY {
            assert_eq!(x, y, "entry {k}: {x} vs {y} (−∞ must match)");
            continue;
        }
        assert!(x.is_finite() && y.is_finite(), "entry {k}: {x} vs {y}");
        worst = worst.max((x - y).abs());
    }
    worst
}

struct HalfStepCase {
    batch: usize,
    n: usize,
    m: usize,
    per_problem: bool,
    eps: f64,
    zero_bins: usize,
}

/// One half-step on each side, f32 and f64 on the GPU vs f64 on the CPU, with the output
/// buffer pre-filled four ways (the kernel uses its old contents only as a hint): the
/// previous result, far too high, far too low, NaN.
fn check_half_step(gpu: &CudaBackend, case: &HalfStepCase, seed: u64) {
    check_half_step_on(gpu, case, seed, |rng, len, _, _| {
        uniform(rng, len, 0.0, 1.0)
    });
}

/// Squared distances between sorted points on [0, 1], shifted by 0.05 per problem (per-
/// problem costs): neighbouring outputs see nearly the same costs, as in otB.
fn smooth_cost(_: &mut StdRng, len: usize, n: usize, m: usize) -> Vec<f64> {
    (0..len)
        .map(|e| {
            let (b, i, j) = (e / (n * m), e / m % n, e % m);
            let x = i as f64 / (n - 1).max(1) as f64 + 0.05 * b as f64;
            let y = j as f64 / (m - 1).max(1) as f64;
            (x - y) * (x - y)
        })
        .collect()
}

/// [`check_half_step`] on the cost `make_cost(rng, len, n, m)` (`len` = costs × n × m).
fn check_half_step_on(
    gpu: &CudaBackend,
    case: &HalfStepCase,
    seed: u64,
    make_cost: impl Fn(&mut StdRng, usize, usize, usize) -> Vec<f64>,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let HalfStepCase {
        batch,
        n,
        m,
        per_problem,
        eps,
        zero_bins,
    } = *case;
    let nc = if per_problem { batch } else { 1 };
    let cost = make_cost(&mut rng, nc * n * m, n, m);
    let f: Vec<f64> = (0..batch * n)
        .map(|k| {
            if zero_bins > 0 && k % 17 == 3 {
                f64::NEG_INFINITY
            } else {
                rng.random_range(-0.5..0.5)
            }
        })
        .collect();
    let g: Vec<f64> = uniform(&mut rng, batch * m, -0.5, 0.5);
    let lmu: Vec<f64> = histograms(&mut rng, batch, n, zero_bins)
        .iter()
        .map(|v| v.ln())
        .collect();
    let lnu: Vec<f64> = histograms(&mut rng, batch, m, zero_bins)
        .iter()
        .map(|v| v.ln())
        .collect();

    let cpu = CpuBackend;
    let c2 = Array2::from_shape_vec((n, m), cost[..n * m].to_vec()).unwrap();
    let c3 = Array3::from_shape_vec((nc, n, m), cost.clone()).unwrap();
    let src64: CostSource<'_, f64> = if per_problem {
        c3.view().into()
    } else {
        c2.view().into()
    };
    let cc = cpu.prepare_cost(&src64).unwrap();
    for side in [Side::Col, Side::Row] {
        let (other, lm, len) = match side {
            Side::Col => (&f, &lnu, batch * m),
            Side::Row => (&g, &lmu, batch * n),
        };
        let mut want = vec![0.0; len];
        cpu.sinkstep(&cc, side, eps, other, lm, &mut want).unwrap();

        // f64 on the GPU: same arithmetic up to the order of the sums.
        let gc = Backend::<f64>::prepare_cost(gpu, &src64).unwrap();
        let (o, l) = (gpu.upload(other).unwrap(), gpu.upload(lm).unwrap());
        let mut out = gpu.filled(len, 0.0f64).unwrap();
        gpu.sinkstep(&gc, side, eps, &o, &l, &mut out).unwrap();
        let got = gpu.download(&out).unwrap();
        let d = max_abs_diff(&got, &want);
        assert!(
            d <= 1e-12,
            "f64 {side:?} B={batch} {n}×{m} per_problem={per_problem}: max |Δ| = {d:e}"
        );

        // f32: the arguments (other − C)/eps carry f32 rounding, ~6e-8 of their size.
        let c2f = c2.mapv(|v| v as f32);
        let c3f = c3.mapv(|v| v as f32);
        let src32: CostSource<'_, f32> = if per_problem {
            c3f.view().into()
        } else {
            c2f.view().into()
        };
        let gc = Backend::<f32>::prepare_cost(gpu, &src32).unwrap();
        let (o, l) = (
            gpu.upload(&cast::<f32>(other)).unwrap(),
            gpu.upload(&cast::<f32>(lm)).unwrap(),
        );
        // f32 rounding of the inputs and of (other − C)/eps costs a few 1e-7 here.
        let tol = 2e-6;
        let prev: Vec<f32> = cast(&want);
        let fills: [(&str, Vec<f32>); 4] = [
            ("previous result", prev.clone()),
            (
                "too high",
                prev.iter().map(|v| v - 300.0 * eps as f32).collect(),
            ),
            (
                "too low",
                prev.iter().map(|v| v + 300.0 * eps as f32).collect(),
            ),
            ("NaN", vec![f32::NAN; len]),
        ];
        // One f32 half-step of `other` with the output buffer holding `fill` beforehand.
        let half_step = |other: &CudaBuffer<f32>, fill: &[f32]| -> Vec<f64> {
            let mut out = gpu.upload(fill).unwrap();
            gpu.sinkstep(&gc, side, eps as f32, other, &l, &mut out)
                .unwrap();
            gpu.download(&out)
                .unwrap()
                .iter()
                .map(|&v| v as f64)
                .collect()
        };
        for (what, fill) in fills {
            let got = half_step(&o, &fill);
            let d = max_abs_diff(&got, &want);
            assert!(
                d <= tol,
                "f32 {side:?} B={batch} {n}×{m} per_problem={per_problem} eps={eps} out={what}: max |Δ| = {d:e} > {tol:e}"
            );
        }
        // Launches that split the reduction take their hints from the previous call's
        // partial sums on this cost: move the potentials far (up, down, both ways by
        // entry) so that those hints are far off, then back.
        for (what, shift) in [("up", 1.0), ("down", -1.0), ("mixed", 0.0), ("back", 2.0)] {
            let moved: Vec<f64> = other
                .iter()
                .enumerate()
                .map(|(k, v)| {
                    let d = match shift {
                        2.0 => 0.0,
                        0.0 if k % 2 == 0 => 300.0,
                        0.0 => -300.0,
                        s => 300.0 * s,
                    };
                    v + d * eps
                })
                .collect();
            let mut want = vec![0.0; len];
            cpu.sinkstep(&cc, side, eps, &moved, lm, &mut want).unwrap();
            let got = half_step(
                &gpu.upload(&cast::<f32>(&moved)).unwrap(),
                &cast::<f32>(&want),
            );
            let d = max_abs_diff(&got, &want);
            let tol = 2e-6 * (1.0 + 300.0 * eps);
            assert!(
                d <= tol,
                "f32 {side:?} B={batch} {n}×{m} per_problem={per_problem} eps={eps} potentials moved {what}: max |Δ| = {d:e} > {tol:e}"
            );
        }
    }
}

#[test]
fn half_step_matches_cpu_on_every_kernel() {
    let Some(gpu) = gpu() else { return };
    let cases = [
        // shared cost, ≥ 8 problems: 16-problem tiles; 70×90 leaves partial tiles
        HalfStepCase {
            batch: 20,
            n: 70,
            m: 90,
            per_problem: false,
            eps: 0.05,
            zero_bins: 0,
        },
        // many tiles in both directions, no K split
        HalfStepCase {
            batch: 64,
            n: 300,
            m: 516,
            per_problem: false,
            eps: 0.02,
            zero_bins: 2,
        },
        // few problems: 4-problem tiles with the reduction split across blocks
        HalfStepCase {
            batch: 3,
            n: 2000,
            m: 130,
            per_problem: false,
            eps: 0.05,
            zero_bins: 0,
        },
        // 2 to 7 problems: 4-problem tiles, enough blocks not to split, zero-mass bins
        HalfStepCase {
            batch: 2,
            n: 256,
            m: 4096,
            per_problem: false,
            eps: 0.02,
            zero_bins: 2,
        },
        // 4-problem tiles, one partial, rows of odd length (no 16-byte copies)
        HalfStepCase {
            batch: 6,
            n: 300,
            m: 2501,
            per_problem: false,
            eps: 0.03,
            zero_bins: 1,
        },
        // odd sizes (no 16-byte cost rows) and zero-mass bins
        HalfStepCase {
            batch: 9,
            n: 37,
            m: 129,
            per_problem: false,
            eps: 0.1,
            zero_bins: 3,
        },
        // one cost per problem
        HalfStepCase {
            batch: 5,
            n: 150,
            m: 64,
            per_problem: true,
            eps: 0.05,
            zero_bins: 1,
        },
        // a single problem with a long reduction (K split) and a small eps
        HalfStepCase {
            batch: 1,
            n: 3000,
            m: 40,
            per_problem: false,
            eps: 0.005,
            zero_bins: 0,
        },
    ];
    for (k, c) in cases.iter().enumerate() {
        check_half_step(&gpu, c, 100 + k as u64);
    }
}

/// The factored half-steps (FACT in cuda/sinkstep.cu, 8 or more problems on a shared
/// cost). On a smooth cost the previous result's shifts fit u_b + v_j across whole tiles,
/// so with hints that hold those half-steps are products of shared factors; with hints far
/// too high, far too low, NaN or stale (potentials moved) they take the exact paths, and
/// warps whose outputs do not fit keep one exponential per term. The same checks as
/// [`half_step_matches_cpu_on_every_kernel`].
#[test]
fn factored_half_steps_match_cpu() {
    let Some(gpu) = gpu() else {
        return;
    };
    let cases = [
        // 16-problem tiles, 32 outputs spanning 0.06: the whole-tile fit holds
        HalfStepCase {
            batch: 64,
            n: 300,
            m: 516,
            per_problem: false,
            eps: 0.02,
            zero_bins: 0,
        },
        // partial tiles, zero-mass bins (those warps keep one exponential per term)
        HalfStepCase {
            batch: 20,
            n: 70,
            m: 90,
            per_problem: false,
            eps: 0.01,
            zero_bins: 2,
        },
        // two blocks: the reduction splits across blocks; at ε = 0.005 the 32-output fit
        // fails and the per-thread one may not
        HalfStepCase {
            batch: 16,
            n: 2048,
            m: 64,
            per_problem: false,
            eps: 0.005,
            zero_bins: 0,
        },
    ];
    for (k, c) in cases.iter().enumerate() {
        check_half_step_on(&gpu, c, 300 + k as u64, smooth_cost);
    }
}

/// An otB-shaped batch (bump histograms, squared distances on a line, ε = 1e-2), solved
/// in f32 by the factored half-steps, against the CPU in f64.
#[test]
fn otb_shaped_solve_matches_cpu() {
    let Some(gpu) = gpu() else {
        return;
    };
    let (mu, nu, c) = logot_cli::problems::ot_b::<f64>(20, 300);
    let params = SinkhornParams::new(1e-2).fixed_iterations(100);
    let want = SinkhornSolver::new(CpuBackend, params.clone())
        .solve(&Problem::new(mu.view(), nu.view(), c.view()).unwrap())
        .unwrap();
    let (muf, nuf, cf) = (
        mu.mapv(|v| v as f32),
        nu.mapv(|v| v as f32),
        c.mapv(|v| v as f32),
    );
    let got = SinkhornSolver::new(gpu, params)
        .solve(&Problem::new(muf.view(), nuf.view(), cf.view()).unwrap())
        .unwrap();
    assert_solve_agrees("factored", &got, &want);
}

/// The end-of-solve report (column-marginal error and transport cost of the plan (f, g)),
/// one pass on the GPU in f32, against the CPU's half-step + marginal error + transport
/// cost in f64; f and g are arbitrary (not converged), so the shift hint is off too.
fn check_report(gpu: &CudaBackend, case: &HalfStepCase, seed: u64) {
    let HalfStepCase {
        batch,
        n,
        m,
        per_problem,
        eps,
        zero_bins: zeros,
    } = *case;
    let mut rng = StdRng::seed_from_u64(seed);
    let nc = if per_problem { batch } else { 1 };
    let cost = uniform(&mut rng, nc * n * m, 0.0, 1.0);
    let nu = histograms(&mut rng, batch, m, zeros);
    let lnu: Vec<f64> = nu.iter().map(|v| v.ln()).collect();
    let f: Vec<f64> = uniform(&mut rng, batch * n, -0.3, 0.0);
    let g: Vec<f64> = lnu
        .iter()
        .map(|&l| {
            if l == f64::NEG_INFINITY {
                l
            } else {
                eps * l + rng.random_range(-0.2..0.1)
            }
        })
        .collect();
    let c2 = Array2::from_shape_vec((n, m), cost[..n * m].to_vec()).unwrap();
    let c3 = Array3::from_shape_vec((nc, n, m), cost.clone()).unwrap();
    let src64: CostSource<'_, f64> = if per_problem {
        c3.view().into()
    } else {
        c2.view().into()
    };
    let cpu = CpuBackend;
    let cc = cpu.prepare_cost(&src64).unwrap();
    let nuv: Vec<f64> = nu.iter().copied().collect();
    // μ and log μ complete the marginals; the column report reads only ν and log ν.
    let muv: Vec<f64> = histograms(&mut rng, batch, n, zeros)
        .iter()
        .copied()
        .collect();
    let lmu: Vec<f64> = muv.iter().map(|v| v.ln()).collect();
    let marginals = Marginals {
        mu: &muv,
        nu: &nuv,
        log_mu: &lmu,
        log_nu: &lnu,
    };
    let pot = Potentials {
        f: f.clone(),
        g: g.clone(),
    };
    let (werr, wcost) = cpu
        .column_error_and_cost(&cc, &pot, &marginals, eps)
        .unwrap();
    let (c2f, c3f) = (c2.mapv(|v| v as f32), c3.mapv(|v| v as f32));
    let src32: CostSource<'_, f32> = if per_problem {
        c3f.view().into()
    } else {
        c2f.view().into()
    };
    let gc = Backend::<f32>::prepare_cost(gpu, &src32).unwrap();
    let up = |v: &[f64]| gpu.upload(&cast::<f32>(v)).unwrap();
    let (mu_d, nu_d, lmu_d, lnu_d) = (up(&muv), up(&nuv), up(&lmu), up(&lnu));
    let marginals = Marginals {
        mu: &mu_d,
        nu: &nu_d,
        log_mu: &lmu_d,
        log_nu: &lnu_d,
    };
    let pot = Potentials {
        f: up(&f),
        g: up(&g),
    };
    let (gerr, gcost) = gpu
        .column_error_and_cost(&gc, &pot, &marginals, eps as f32)
        .unwrap();
    for b in 0..batch {
        let (e, w) = (gerr[b] as f64, werr[b]);
        assert!(
            (e - w).abs() <= 1e-4 * (1.0 + w),
            "B={batch} {n}×{m} problem {b}: column error {e} vs {w}"
        );
        let (c, w) = (gcost[b] as f64, wcost[b]);
        assert!(
            ((c - w) / w).abs() <= 1e-4,
            "B={batch} {n}×{m} problem {b}: transport cost {c} vs {w}"
        );
    }
}

#[test]
fn report_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    check_report(
        &gpu,
        &HalfStepCase {
            batch: 20,
            n: 70,
            m: 90,
            per_problem: false,
            eps: 0.05,
            zero_bins: 0,
        },
        21,
    ); // shared cost, 16-problem tiles
    check_report(
        &gpu,
        &HalfStepCase {
            batch: 9,
            n: 130,
            m: 37,
            per_problem: false,
            eps: 0.1,
            zero_bins: 2,
        },
        22,
    ); // odd sizes, zero-mass bins
    check_report(
        &gpu,
        &HalfStepCase {
            batch: 3,
            n: 200,
            m: 150,
            per_problem: false,
            eps: 0.02,
            zero_bins: 1,
        },
        23,
    ); // one-problem tiles
    check_report(
        &gpu,
        &HalfStepCase {
            batch: 4,
            n: 60,
            m: 80,
            per_problem: true,
            eps: 0.05,
            zero_bins: 0,
        },
        24,
    ); // one cost per problem
}

/// A whole solve on the GPU in f32 against the CPU in f64: distances within 1e-4
/// (relative), potentials and the final marginal error close.
fn check_solve(gpu: &CudaBackend, case: &HalfStepCase, seed: u64) {
    let HalfStepCase {
        batch,
        n,
        m,
        per_problem,
        eps,
        zero_bins: zeros,
    } = *case;
    let mut rng = StdRng::seed_from_u64(seed);
    let mu = histograms(&mut rng, batch, n, zeros);
    let nu = histograms(&mut rng, batch, m, zeros);
    let xs = uniform(&mut rng, n, 0.0, 1.0);
    let ys = uniform(&mut rng, m, 0.0, 1.0);
    let nc = if per_problem { batch } else { 1 };
    let c3 = Array3::from_shape_fn((nc, n, m), |(b, i, j)| {
        (xs[i] - ys[j]).powi(2) * (1.0 + 0.1 * b as f64)
    });
    let params = SinkhornParams::new(eps).fixed_iterations(300);
    let want = if per_problem {
        SinkhornSolver::new(CpuBackend, params.clone())
            .solve(&Problem::new(mu.view(), nu.view(), c3.view()).unwrap())
    } else {
        SinkhornSolver::new(CpuBackend, params.clone())
            .solve(&Problem::new(mu.view(), nu.view(), c3.index_axis(Axis(0), 0)).unwrap())
    }
    .unwrap();
    let (muf, nuf, c3f) = (
        mu.mapv(|v| v as f32),
        nu.mapv(|v| v as f32),
        c3.mapv(|v| v as f32),
    );
    let got = if per_problem {
        SinkhornSolver::new(gpu.clone(), params.clone())
            .solve(&Problem::new(muf.view(), nuf.view(), c3f.view()).unwrap())
    } else {
        SinkhornSolver::new(gpu.clone(), params.clone())
            .solve(&Problem::new(muf.view(), nuf.view(), c3f.index_axis(Axis(0), 0)).unwrap())
    }
    .unwrap();
    let what = format!("B={batch} {n}×{m} per_problem={per_problem} eps={eps}");
    assert_solve_agrees(&what, &got, &want);
}

/// A GPU solve in f32 against the CPU's in f64: distances within 1e-4 (relative), the
/// potentials f within 1e-4 (both solvers start from 0 and run the same iterations, so the
/// constant f and −g share is the same), the final marginal errors within 1e-4.
fn assert_solve_agrees(
    what: &str,
    got: &logot::SinkhornResult<f32>,
    want: &logot::SinkhornResult<f64>,
) {
    for (b, (&g, &w)) in got.distance.iter().zip(&want.distance).enumerate() {
        let g = g as f64;
        assert!(
            ((g - w) / w).abs() <= 1e-4,
            "{what} problem {b}: distance {g} vs CPU f64 {w}"
        );
    }
    let gf: Vec<f64> = got.f.iter().map(|&v| v as f64).collect();
    let wf: Vec<f64> = want.f.iter().copied().collect();
    let d = max_abs_diff(&gf, &wf);
    assert!(d <= 1e-4, "{what}: potentials differ by {d:e}");
    assert!(got.convergence.marginal_error.is_finite());
    let e = (got.convergence.marginal_error - want.convergence.marginal_error).abs();
    assert!(e <= 1e-4, "{what}: marginal errors differ by {e:e}");
    assert_eq!(got.convergence.iterations, want.convergence.iterations);
}

#[test]
fn solve_matches_cpu_fused_small_problems() {
    let Some(gpu) = gpu() else { return };
    check_solve(
        &gpu,
        &HalfStepCase {
            batch: 12,
            n: 70,
            m: 90,
            per_problem: false,
            eps: 0.05,
            zero_bins: 0,
        },
        1,
    );
    check_solve(
        &gpu,
        &HalfStepCase {
            batch: 3,
            n: 40,
            m: 33,
            per_problem: true,
            eps: 0.05,
            zero_bins: 2,
        },
        2,
    );
}

#[test]
fn solve_matches_cpu_tiled_problems() {
    // Too large for the fused kernel's shared memory: one launch per half-step.
    let Some(gpu) = gpu() else { return };
    check_solve(
        &gpu,
        &HalfStepCase {
            batch: 20,
            n: 300,
            m: 260,
            per_problem: false,
            eps: 0.05,
            zero_bins: 1,
        },
        3,
    );
    check_solve(
        &gpu,
        &HalfStepCase {
            batch: 2,
            n: 400,
            m: 300,
            per_problem: false,
            eps: 0.02,
            zero_bins: 0,
        },
        4,
    );
    check_solve(
        &gpu,
        &HalfStepCase {
            batch: 4,
            n: 260,
            m: 300,
            per_problem: true,
            eps: 0.05,
            zero_bins: 0,
        },
        5,
    );
}

#[test]
fn fused_and_half_steps_agree() {
    let Some(fused) = gpu() else { return };
    let Some(steps) = gpu_with(Tuning {
        fused: false,
        ..Tuning::default()
    }) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(7);
    let (b, n, m) = (4, 100, 80);
    let mu = histograms(&mut rng, b, n, 1).mapv(|v| v as f32);
    let nu = histograms(&mut rng, b, m, 1).mapv(|v| v as f32);
    let c = Array2::from_shape_fn((n, m), |(i, j)| {
        ((i as f32 / n as f32) - (j as f32 / m as f32)).powi(2)
    });
    let p = Problem::new(mu.view(), nu.view(), c.view()).unwrap();
    let params = SinkhornParams::new(0.01).fixed_iterations(150);
    let a = SinkhornSolver::new(fused, params.clone())
        .solve(&p)
        .unwrap();
    let s = SinkhornSolver::new(steps, params).solve(&p).unwrap();
    let d = max_abs_diff(
        &a.f.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        &s.f.iter().map(|&v| v as f64).collect::<Vec<_>>(),
    );
    assert!(
        d <= 2e-5,
        "fused and per-half-step potentials differ by {d:e}"
    );
    for k in 0..b {
        assert!(((a.distance[k] - s.distance[k]) / s.distance[k]).abs() <= 1e-5);
    }
}

/// The fused kernel on thread-block clusters (each CTA takes every CL-th output group and
/// writes it into every CTA's shared memory) against the per-half-step kernels: cluster
/// sizes 1 (off) to 16, odd shapes (more CTAs than output groups on one side, a single
/// point), zero-mass bins, a small ε that sends groups through the exact path, and lane
/// groups from one lane (a reduction of 1 or 5 terms: no shuffles) to 32 (600 terms).
#[test]
fn fused_clusters_agree_with_half_steps() {
    let Some(steps) = gpu_with(Tuning {
        fused: false,
        ..Tuning::default()
    }) else {
        return;
    };
    let mut rng = StdRng::seed_from_u64(17);
    for &(b, n, m, eps) in &[
        (1usize, 100usize, 100usize, 1e-3f64),
        (3, 37, 129, 0.01),
        (2, 1, 5, 0.05),
        (1, 200, 23, 2e-3),
        (2, 600, 20, 0.01),
    ] {
        let mu = histograms(&mut rng, b, n, usize::from(n > 10)).mapv(|v| v as f32);
        let nu = histograms(&mut rng, b, m, usize::from(m > 10)).mapv(|v| v as f32);
        let xs = uniform(&mut rng, n, 0.0, 1.0);
        let ys = uniform(&mut rng, m, 0.0, 1.0);
        let c = Array2::from_shape_fn((n, m), |(i, j)| ((xs[i] - ys[j]).powi(2)) as f32);
        let p = Problem::new(mu.view(), nu.view(), c.view()).unwrap();
        let params = SinkhornParams::new(eps).fixed_iterations(120);
        let s = SinkhornSolver::new(steps.clone(), params.clone())
            .solve(&p)
            .unwrap();
        let sf: Vec<f64> = s.f.iter().map(|&v| v as f64).collect();
        for cluster in [1, 2, 4, 8, 16] {
            let Some(v) = gpu_with(Tuning {
                fused_cluster: cluster,
                ..Tuning::default()
            }) else {
                return;
            };
            let r = SinkhornSolver::new(v, params.clone()).solve(&p).unwrap();
            let d = max_abs_diff(&r.f.iter().map(|&v| v as f64).collect::<Vec<_>>(), &sf);
            // Potentials are in cost units; the kernels differ only in summation order.
            let tol = 4e-6 * (1.0 + sf.iter().fold(0.0f64, |a, v| a.max(v.abs())));
            assert!(
                d <= tol,
                "{b}×{n}×{m} eps {eps}, cluster {cluster}: potentials differ by {d:e} (tolerance {tol:e})"
            );
            for k in 0..b {
                let (x, y) = (r.distance[k] as f64, s.distance[k] as f64);
                assert!(
                    ((x - y) / y).abs() <= 1e-5,
                    "{b}×{n}×{m}: distance {x} vs {y}"
                );
            }
        }
    }
}

#[test]
fn ot_a_matches_cpu_and_has_gradient() {
    // The otA benchmark problem (ε = 1e-3): distance within 1e-4 of the CPU in f64, and the
    // gradient w.r.t. μ (f − mean f) within 1e-4 of the CPU's in absolute terms.
    let Some(gpu) = gpu() else { return };
    let (mu, nu, c) = logot_cli::problems::ot_a::<f64>();
    let params = SinkhornParams::new(1e-3).fixed_iterations(200);
    let want = SinkhornSolver::new(CpuBackend, params.clone())
        .solve(&Problem::new(mu.view(), nu.view(), c.view()).unwrap())
        .unwrap();
    let (muf, nuf, cf) = (
        mu.mapv(|v| v as f32),
        nu.mapv(|v| v as f32),
        c.mapv(|v| v as f32),
    );
    let got = SinkhornSolver::new(gpu, params)
        .solve(&Problem::new(muf.view(), nuf.view(), cf.view()).unwrap())
        .unwrap();
    let rel = ((got.distance[0] as f64 - want.distance[0]) / want.distance[0]).abs();
    assert!(
        rel <= 1e-4,
        "otA distance {} vs {}: relative {rel:e}",
        got.distance[0],
        want.distance[0]
    );
    let centred = |f: Vec<f64>| {
        let mean = f.iter().sum::<f64>() / f.len() as f64;
        f.into_iter().map(|v| v - mean).collect::<Vec<_>>()
    };
    let gg = centred(got.f.iter().map(|&v| v as f64).collect());
    let gw = centred(want.f.iter().copied().collect());
    let d = max_abs_diff(&gg, &gw);
    assert!(d <= 1e-4, "otA gradient differs by {d:e}");
}

#[test]
fn small_eps_stays_finite_and_close() {
    // ε = 1e-3 on a [0, 1] cost: exponent arguments up to ~1400 in base 2; f32 keeps
    // about 1e-4·|argument|·ε of absolute error in the potentials.
    let Some(gpu) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(11);
    let (b, n) = (16, 256);
    let mu = histograms(&mut rng, b, n, 0);
    let nu = histograms(&mut rng, b, n, 0);
    let x: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    let c = Array2::from_shape_fn((n, n), |(i, j)| (x[i] - x[j]).powi(2));
    let params = SinkhornParams::new(1e-3).fixed_iterations(200);
    let want = SinkhornSolver::new(CpuBackend, params.clone())
        .solve(&Problem::new(mu.view(), nu.view(), c.view()).unwrap())
        .unwrap();
    let got = SinkhornSolver::new(gpu, params)
        .solve(
            &Problem::new(
                mu.mapv(|v| v as f32).view(),
                nu.mapv(|v| v as f32).view(),
                c.mapv(|v| v as f32).view(),
            )
            .unwrap(),
        )
        .unwrap();
    for k in 0..b {
        let (g, w) = (got.distance[k] as f64, want.distance[k]);
        assert!(g.is_finite());
        assert!(((g - w) / w).abs() <= 1e-3, "problem {k}: {g} vs {w}");
    }
    assert!(got.f.iter().all(|v| !v.is_nan()) && got.g.iter().all(|v| !v.is_nan()));
}

#[test]
fn plan_matches_cpu_and_has_the_marginals() {
    let Some(gpu) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(13);
    let (b, n, m) = (3, 50, 70);
    let mu = histograms(&mut rng, b, n, 2);
    let nu = histograms(&mut rng, b, m, 0);
    let c = Array2::from_shape_fn((n, m), |_| rng.random_range(0.0..1.0));
    let params = SinkhornParams::new(0.05).tol(1e-5).max_iters(5000);
    let want = SinkhornSolver::new(CpuBackend, params.clone())
        .coupling(&Problem::new(mu.view(), nu.view(), c.view()).unwrap())
        .unwrap();
    let (muf, nuf, cf) = (
        mu.mapv(|v| v as f32),
        nu.mapv(|v| v as f32),
        c.mapv(|v| v as f32),
    );
    let got = SinkhornSolver::new(gpu, params)
        .coupling(&Problem::new(muf.view(), nuf.view(), cf.view()).unwrap())
        .unwrap();
    assert!(got.result.convergence.converged);
    let d = got
        .plan
        .iter()
        .zip(want.plan.iter())
        .map(|(&g, &w)| (g as f64 - w).abs())
        .fold(0.0, f64::max);
    assert!(d <= 1e-6, "plans differ by {d:e}");
    // Rows sum to μ exactly after the last f update; columns to ν within the tolerance.
    for k in 0..b {
        let p = got.plan.index_axis(Axis(0), k).mapv(|v| v as f64);
        let rows: Array1<f64> = p.sum_axis(Axis(1));
        let cols: Array1<f64> = p.sum_axis(Axis(0));
        let re = (&rows - &mu.row(k)).mapv(f64::abs).sum();
        let ce = (&cols - &nu.row(k)).mapv(f64::abs).sum();
        assert!(
            re <= 1e-5 && ce <= 2e-5,
            "problem {k}: row error {re:e}, column error {ce:e}"
        );
    }
}

#[test]
fn bad_lengths_are_errors_not_panics() {
    let Some(gpu) = gpu() else { return };
    let c = Array2::<f32>::zeros((4, 5)) + 1.0;
    let cost = Backend::<f32>::prepare_cost(&gpu, &c.view().into()).unwrap();
    let f = gpu.filled(8, 0.0f32).unwrap();
    let lm = gpu.filled(10, 0.0f32).unwrap();
    let mut out = gpu.filled(9, 0.0f32).unwrap(); // 9 is not a multiple of m = 5
    assert!(matches!(
        gpu.sinkstep(&cost, Side::Col, 0.1, &f, &lm, &mut out),
        Err(logot::Error::Shape { .. })
    ));
    let mut out = gpu.filled(10, 0.0f32).unwrap();
    let short = gpu.filled(7, 0.0f32).unwrap();
    assert!(matches!(
        gpu.sinkstep(&cost, Side::Col, 0.1, &short, &lm, &mut out),
        Err(logot::Error::Shape { .. })
    ));
    assert!(gpu
        .sinkstep(&cost, Side::Col, 0.1, &f, &lm, &mut out)
        .is_ok());
    assert!(gpu.transport_cost(&cost, &f, &out, 0.1).is_ok());
    assert!(matches!(
        gpu.transport_cost(&cost, &short, &out, 0.1),
        Err(logot::Error::Shape { .. })
    ));
    let v = gpu.download(&out).unwrap();
    assert!(v.iter().all(|x| x.is_finite()));
}
