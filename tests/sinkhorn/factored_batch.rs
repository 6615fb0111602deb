//! Batches on one shared dense cost: the CPU backend's factored half-step (a matrix product
//! of exponentials per block of the reduced side) against the f64 brute-force log-sum-exp
//! (two passes: maximum, then sum), against the plain kernel (the same problems one at a
//! time), and across thread counts; a whole f32 solve of otBcpu against the f64 one.

use crate::common::uniforms;
use logot::backend::{Backend, CostSource, Side};
use logot::{CpuBackend, Problem, Real, SinkhornParams, SinkhornSolver};
use ndarray::Array2;

/// `ε·lm − ε·LSE_k((p_k − R_rk)/ε)` in f64, two passes.
fn brute(p: &[f64], row: &[f64], lm: f64, eps: f64) -> f64 {
    if lm == f64::NEG_INFINITY {
        return lm;
    }
    let v: Vec<f64> = p.iter().zip(row).map(|(a, c)| (a - c) / eps).collect();
    let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    eps * lm - eps * (m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln())
}

/// One half-step on `side` of the batch `pot` (`batch × len_red`) on `cost`, in `T`.
fn half_step<T: Real>(
    cost: &Array2<T>,
    side: Side,
    eps: T,
    pot: &[T],
    lm: &[T],
    batch: usize,
) -> Vec<T> {
    let be = CpuBackend;
    let c = be.prepare_cost(&CostSource::Dense(cost.view())).unwrap();
    let len_out = lm.len() / batch;
    let mut out = vec![T::zero(); batch * len_out];
    be.sinkstep(&c, side, eps, &pot.to_vec(), &lm.to_vec(), &mut out)
        .unwrap();
    out
}

/// The rows `R` of a half-step on `side` in f64 (`C` or `Cᵀ`).
fn rows_of<T: Real>(cost: &Array2<T>, side: Side) -> Array2<f64> {
    let c = cost.mapv(|v| v.f64());
    match side {
        Side::Row => c,
        Side::Col => c.t().as_standard_layout().into_owned(),
    }
}

/// The f64 brute force of every output of the batch.
fn reference<T: Real>(
    cost: &Array2<T>,
    side: Side,
    eps: T,
    pot: &[T],
    lm: &[T],
    batch: usize,
) -> Vec<f64> {
    let r = rows_of(cost, side);
    let (len_out, len_red) = r.dim();
    let p: Vec<f64> = pot.iter().map(|v| v.f64()).collect();
    let mut want = vec![0.0; batch * len_out];
    for b in 0..batch {
        for i in 0..len_out {
            want[b * len_out + i] = brute(
                &p[b * len_red..(b + 1) * len_red],
                r.row(i).as_slice().unwrap(),
                lm[b * len_out + i].f64(),
                eps.f64(),
            );
        }
    }
    want
}

/// A smooth cost on sorted supports: `C_ij = s·(x_i − y_j)²`, x and y on [0, 1].
fn smooth_cost(n: usize, m: usize, scale: f64, offset: f64) -> Array2<f64> {
    Array2::from_shape_fn((n, m), |(i, j)| {
        let (x, y) = (i as f64 / (n - 1) as f64, j as f64 / (m - 1) as f64);
        offset + scale * (x - y) * (x - y)
    })
}

/// f64, both sides of a non-square cost, odd sizes, zero-mass outputs and −∞ potentials
/// (a whole block of them too): the batched half-step within 1e-12 of the brute force and
/// of the same problems solved one at a time by the plain kernel.
#[test]
fn f64_batches_match_the_brute_force_and_the_plain_kernel() {
    let mut next = uniforms(5);
    for &(n, m, batch) in &[(300usize, 257usize, 5usize), (65, 130, 2), (17, 3, 4)] {
        let cost = smooth_cost(n, m, 1.0, 0.0);
        for side in [Side::Row, Side::Col] {
            let (len_out, len_red) = match side {
                Side::Row => (n, m),
                Side::Col => (m, n),
            };
            let mut pot: Vec<f64> = (0..batch * len_red).map(|_| 0.2 * next() - 0.1).collect();
            let mut lm: Vec<f64> = (0..batch * len_out)
                .map(|_| (0.5 + next()).ln() - (len_out as f64).ln())
                .collect();
            lm[len_out.min(2) - 1] = f64::NEG_INFINITY;
            pot[0] = f64::NEG_INFINITY;
            if len_red >= 128 {
                // One whole block of the last problem's potentials at −∞.
                let b = batch - 1;
                pot[b * len_red + 64..b * len_red + 128].fill(f64::NEG_INFINITY);
            }
            for eps in [0.05, 0.01] {
                let got = half_step(&cost, side, eps, &pot, &lm, batch);
                let want = reference(&cost, side, eps, &pot, &lm, batch);
                for (k, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        g == w || (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
                        "{n}×{m} batch {batch} {side:?} ε {eps} output {k}: {g} vs {w}"
                    );
                }
                // The plain kernel: each problem alone.
                for b in 0..batch {
                    let one = half_step(
                        &cost,
                        side,
                        eps,
                        &pot[b * len_red..(b + 1) * len_red],
                        &lm[b * len_out..(b + 1) * len_out],
                        1,
                    );
                    for (i, &o) in one.iter().enumerate() {
                        let g = got[b * len_out + i];
                        assert!(
                            g == o || (g - o).abs() <= 1e-12 * (1.0 + o.abs()),
                            "{side:?} ε {eps} problem {b} output {i}: batched {g}, alone {o}"
                        );
                    }
                }
            }
        }
    }
}

/// f32 at ε = 1e-3 with costs in [0, 1] and offsets of 10³ on the potentials or on the
/// cost: the batched half-step's error against the f64 brute force (of the same f32
/// inputs) is at most twice the plain kernel's plus 2 ulp of the largest result.
#[test]
fn f32_small_eps_with_huge_offsets_is_as_accurate_as_the_plain_kernel() {
    let mut next = uniforms(11);
    let (n, m, batch) = (1024usize, 960usize, 4usize);
    let eps = 1e-3f32;
    for (cost_offset, pot_offset) in [(0.0, 0.0), (0.0, 1e3), (1e3, 0.0), (1e3, 1e3)] {
        // Costs in [offset, offset + 0.15]: within a block of 64 columns they vary by at
        // most 2·0.15·63/959 = 0.0197 (20 ε), so the factored path takes them.
        let cost = smooth_cost(n, m, 0.15, cost_offset).mapv(|v| v as f32);
        let pot: Vec<f32> = (0..batch * m)
            .map(|k| {
                let y = (k % m) as f64 / (m - 1) as f64;
                (pot_offset + 0.3 * (y - 0.5) * (y - 0.5) + 1e-3 * next()) as f32
            })
            .collect();
        let lm: Vec<f32> = (0..batch * n).map(|_| -(n as f32).ln()).collect();
        let got = half_step(&cost, Side::Row, eps, &pot, &lm, batch);
        let want = reference(&cost, Side::Row, eps, &pot, &lm, batch);
        let mut plain = Vec::with_capacity(batch * n);
        for b in 0..batch {
            plain.extend(half_step(
                &cost,
                Side::Row,
                eps,
                &pot[b * m..(b + 1) * m],
                &lm[b * n..(b + 1) * n],
                1,
            ));
        }
        let err = |v: &[f32]| -> f64 {
            v.iter()
                .zip(&want)
                .map(|(&g, &w)| (g as f64 - w).abs())
                .fold(0.0, f64::max)
        };
        assert!(got.iter().all(|v| v.is_finite()));
        // The batch ran the factored path: its bits differ from the plain kernel's.
        assert!(got.iter().zip(&plain).any(|(a, b)| a != b));
        let worst = (err(&got), err(&plain));
        // 2 ulp of the largest result.
        let big = want.iter().fold(0.0f64, |a, w| a.max(w.abs())) as f32;
        let ulp = (f32::from_bits(big.to_bits() + 1) - big) as f64;
        assert!(
            worst.0 <= 2.0 * worst.1 + 2.0 * ulp,
            "offsets {cost_offset}/{pot_offset}: factored error {:e}, plain {:e}",
            worst.0,
            worst.1
        );
        println!(
            "offsets cost {cost_offset}, potentials {pot_offset}: worst error factored {:.2e}, plain {:.2e}",
            worst.0, worst.1
        );
    }
}

/// The batched half-step's bits do not depend on the number of threads, and a change of ε
/// on the same prepared cost gives the bits of a fresh cost at the new ε.
#[test]
fn batched_half_steps_are_deterministic_and_follow_eps() {
    let (n, batch) = (700usize, 8usize);
    let cost = smooth_cost(n, n, 1.0, 0.0);
    let mut next = uniforms(3);
    let pot: Vec<f64> = (0..batch * n).map(|_| 0.1 * next()).collect();
    let lm: Vec<f64> = vec![-(n as f64).ln(); batch * n];
    let run = |threads: usize, eps: f64| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| half_step(&cost, Side::Col, eps, &pot, &lm, batch))
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    };
    let one = run(1, 0.01);
    for threads in [2, 3, 5] {
        assert_eq!(run(threads, 0.01), one, "{threads} threads");
    }
    let be = CpuBackend;
    let c = be.prepare_cost(&CostSource::Dense(cost.view())).unwrap();
    let mut out = vec![0.0; batch * n];
    for eps in [0.02, 0.01] {
        be.sinkstep(&c, Side::Col, eps, &pot, &lm, &mut out)
            .unwrap();
    }
    assert_eq!(out.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), one);
}

/// otBcpu (B = 8, n = m = 1024, ε = 1e-2, 100 iterations) solved in f32 and in f64: the
/// batch's f32 distances (the factored path) are as close to the f64 ones as the plain
/// kernel's (each problem solved alone in f32): within twice its error plus 1e-8, and
/// within 1e-6 of the f64 distance (about 7e-6 relative).
#[test]
fn otbcpu_in_f32_is_as_close_to_f64_as_the_plain_kernel() {
    let params = SinkhornParams::new(1e-2).fixed_iterations(100);
    let (mu, nu, c) = logot_cli::problems::ot_b::<f32>(8, 1024);
    let p = Problem::new(mu.view(), nu.view(), c.view()).unwrap();
    let batch = SinkhornSolver::new(CpuBackend, params.clone())
        .solve(&p)
        .unwrap();
    let (mu64, nu64, c64) = logot_cli::problems::ot_b::<f64>(8, 1024);
    let p64 = Problem::new(mu64.view(), nu64.view(), c64.view()).unwrap();
    let exact = SinkhornSolver::new(CpuBackend, params.clone())
        .solve(&p64)
        .unwrap();
    for b in 0..8 {
        let one = Problem::new(
            mu.slice(ndarray::s![b..b + 1, ..]),
            nu.slice(ndarray::s![b..b + 1, ..]),
            c.view(),
        )
        .unwrap();
        let plain = SinkhornSolver::new(CpuBackend, params.clone())
            .solve(&one)
            .unwrap();
        let w = exact.distance[b];
        let (eb, ep) = (
            (batch.distance[b].f64() - w).abs(),
            (plain.distance[0].f64() - w).abs(),
        );
        println!("problem {b}: f64 {w:.9e}, f32 error batched {eb:.2e}, alone {ep:.2e}");
        assert!(
            eb <= 2.0 * ep + 1e-8 && eb <= 1e-6,
            "problem {b}: {eb:e} against {ep:e}"
        );
    }
}
