//! Bistochastic projection and its implicit backward, against: a plain multiplicative
//! Sinkhorn–Knopp reference, the n = 2 closed form, a dense solve of the block adjoint system
//! `[I R; Rᵀ I]`, central finite differences of a converged forward (f64), and forward-mode
//! differentiation of the unrolled iteration.

use crate::common;

use common::{dense_solve, Dual, Lcg};
use logot::grad::{
    bistochastic, bistochastic_backward, check_gradient, BistochasticParams, BistochasticSolver,
    CgParams, CgSummary, GradCheckParams,
};
use logot::CpuBackend;
use ndarray::{Array3, Axis};

fn random_x(rng: &mut Lcg, b: usize, n: usize, lo: f64, hi: f64) -> Array3<f64> {
    Array3::from_shape_vec((b, n, n), rng.vec(b * n * n, lo, hi)).unwrap()
}
fn random_g(rng: &mut Lcg, b: usize, n: usize) -> Array3<f64> {
    Array3::from_shape_fn((b, n, n), |_| rng.normal())
}

/// The seed's forward: `R = exp(X)`, then `iters` times columns then rows normalised.
fn reference_forward(x: &[f64], n: usize, iters: usize) -> Vec<f64> {
    let mx = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let mut r: Vec<f64> = x.iter().map(|v| (v - mx).exp()).collect();
    for _ in 0..iters {
        for j in 0..n {
            let s: f64 = (0..n).map(|i| r[i * n + j]).sum();
            (0..n).for_each(|i| r[i * n + j] /= s);
        }
        for i in 0..n {
            let s: f64 = r[i * n..(i + 1) * n].iter().sum();
            r[i * n..(i + 1) * n].iter_mut().for_each(|v| *v /= s);
        }
    }
    r
}

/// Dense solve of `[I R; Rᵀ I]·[u; v] = [(G⊙R)1; (G⊙R)ᵀ1]` with the gauge `v_{n−1} = 0` (drop
/// that unknown and the redundant last equation), then `(G − u1ᵀ − 1vᵀ) ⊙ R`.
fn dense_backward(r: &[f64], g: &[f64], n: usize) -> Vec<f64> {
    let k = 2 * n - 1;
    let mut a = vec![0.0; k * k];
    let mut rhs = vec![0.0; k];
    for i in 0..n {
        for j in 0..n {
            let gr = g[i * n + j] * r[i * n + j];
            rhs[i] += gr;
            if n + j < k {
                rhs[n + j] += gr;
            }
        }
    }
    for i in 0..n {
        a[i * k + i] = 1.0;
        for j in 0..n - 1 {
            a[i * k + n + j] = r[i * n + j];
        }
    }
    for j in 0..n - 1 {
        for i in 0..n {
            a[(n + j) * k + i] = r[i * n + j];
        }
        a[(n + j) * k + n + j] = 1.0;
    }
    let sol = dense_solve(a, rhs, k);
    let v = |j: usize| if j < n - 1 { sol[n + j] } else { 0.0 };
    (0..n * n)
        .map(|idx| (g[idx] - sol[idx / n] - v(idx % n)) * r[idx])
        .collect()
}

#[test]
fn forward_matches_multiplicative_reference_and_is_bistochastic() {
    let mut rng = Lcg(1);
    for &n in &[2usize, 3, 4, 7, 16, 32] {
        let b = 40;
        let x = random_x(&mut rng, b, n, 0.0, 4.0);
        let res = bistochastic(x.view(), &BistochasticParams::default().iters(20)).unwrap();
        assert_eq!(res.convergence.iterations, 20);
        let mut worst_col = 0.0f64;
        let mut worst_row = 0.0f64;
        for k in 0..b {
            let xs = x
                .index_axis(Axis(0), k)
                .to_owned()
                .into_raw_vec_and_offset()
                .0;
            let want = reference_forward(&xs, n, 20);
            let got = res.r.index_axis(Axis(0), k);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= 1e-13 * w.max(1e-3), "n={n}: {g} vs {w}");
            }
            for i in 0..n {
                assert!((got.row(i).sum() - 1.0).abs() < 1e-13);
            }
            worst_col = worst_col.max((0..n).map(|j| (got.column(j).sum() - 1.0).abs()).sum());
            worst_row = worst_row.max((0..n).map(|i| (got.row(i).sum() - 1.0).abs()).sum());
        }
        // The report is the returned matrices' own error; with tol = 0, `converged` says
        // whether it meets float64's default 1e-9.
        let worst = worst_col.max(worst_row);
        assert!(
            (res.convergence.marginal_error - worst).abs() < 1e-14,
            "n={n}"
        );
        assert_eq!(res.convergence.converged, worst <= 1e-9, "n={n}");
        // To a tolerance.
        let conv = bistochastic(x.view(), &BistochasticParams::default().converged(1e-13)).unwrap();
        assert!(
            conv.convergence.converged && conv.convergence.marginal_error <= 1e-13,
            "{:?}",
            conv.convergence
        );
    }
}

/// `n = 2`: the cross-ratio `R11 R22 / (R12 R21) = exp(d)`, `d = x11 + x22 − x12 − x21`, is
/// invariant under scaling, so `R = [[p, 1−p], [1−p, p]]` with `p = σ(d/2)`. With
/// `L = ⟨G, R⟩ = p·(G11 + G22 − G12 − G21) + const`, `∂L/∂X = k·[[1, −1], [−1, 1]]`,
/// `k = (G11 + G22 − G12 − G21)·p(1−p)/2`.
#[test]
fn two_by_two_closed_form() {
    let mut rng = Lcg(2);
    let b = 64;
    let x = random_x(&mut rng, b, 2, -3.0, 3.0);
    let g = random_g(&mut rng, b, 2);
    let fwd = bistochastic(x.view(), &BistochasticParams::default().converged(1e-15)).unwrap();
    let bwd = bistochastic_backward(fwd.r.view(), g.view(), &CgParams::default()).unwrap();
    assert!(bwd.cg.all_converged());
    for k in 0..b {
        let xs = x.index_axis(Axis(0), k);
        let d = xs[[0, 0]] + xs[[1, 1]] - xs[[0, 1]] - xs[[1, 0]];
        let p = 1.0 / (1.0 + (-d / 2.0).exp());
        let r = fwd.r.index_axis(Axis(0), k);
        for (got, want) in r.iter().zip([p, 1.0 - p, 1.0 - p, p]) {
            assert!((got - want).abs() < 1e-14, "R: {got} vs {want}");
        }
        let gs = g.index_axis(Axis(0), k);
        let kk = (gs[[0, 0]] + gs[[1, 1]] - gs[[0, 1]] - gs[[1, 0]]) * p * (1.0 - p) / 2.0;
        let dx = bwd.dx.index_axis(Axis(0), k);
        for (got, want) in dx.iter().zip([kk, -kk, -kk, kk]) {
            assert!(
                (got - want).abs() < 1e-13 * kk.abs().max(1e-3),
                "dX: {got} vs {want}"
            );
        }
    }
}

#[test]
fn backward_matches_a_dense_solve_of_the_block_system() {
    let mut rng = Lcg(3);
    for &n in &[2usize, 3, 5, 8, 16, 32] {
        let b = 12;
        let x = random_x(&mut rng, b, n, 0.0, 4.0);
        let g = random_g(&mut rng, b, n);
        let fwd = bistochastic(x.view(), &BistochasticParams::default().converged(1e-13)).unwrap();
        assert!(fwd.convergence.converged, "n={n}: {:?}", fwd.convergence);
        let bwd =
            bistochastic_backward(fwd.r.view(), g.view(), &CgParams::default().tol(1e-13)).unwrap();
        assert!(bwd.cg.all_converged(), "n={n}: {:?}", bwd.cg);
        for k in 0..b {
            let r = fwd
                .r
                .index_axis(Axis(0), k)
                .to_owned()
                .into_raw_vec_and_offset()
                .0;
            let gs = g
                .index_axis(Axis(0), k)
                .to_owned()
                .into_raw_vec_and_offset()
                .0;
            let want = dense_backward(&r, &gs, n);
            let got = bwd.dx.index_axis(Axis(0), k);
            let scale = want.iter().fold(0.0f64, |a, v| a.max(v.abs()));
            for (a, w) in got.iter().zip(&want) {
                assert!((a - w).abs() <= 1e-9 * scale, "n={n}: {a} vs {w}");
            }
        }
    }
}

#[test]
fn backward_matches_finite_differences_of_the_converged_projection() {
    let mut rng = Lcg(4);
    for &n in &[3usize, 4, 6] {
        let b = 2;
        let x = random_x(&mut rng, b, n, 0.0, 4.0);
        let g = random_g(&mut rng, b, n);
        // A fixed, large iteration count: a smooth map converged to rounding.
        let params = BistochasticParams::default().iters(400);
        let loss = |xv: &[f64]| -> f64 {
            let xa = Array3::from_shape_vec((b, n, n), xv.to_vec()).unwrap();
            let r = bistochastic(xa.view(), &params).unwrap().r;
            r.iter().zip(g.iter()).map(|(r, g)| r * g).sum()
        };
        let fwd = bistochastic(x.view(), &params).unwrap();
        assert!(fwd.convergence.marginal_error < 1e-14);
        let bwd =
            bistochastic_backward(fwd.r.view(), g.view(), &CgParams::default().tol(1e-13)).unwrap();
        let xs = x.as_slice().unwrap();
        let opts = GradCheckParams::default()
            .step(1e-5)
            .rel_tol(1e-7)
            .abs_floor(1e-5);
        let rep = check_gradient(loss, xs, bwd.dx.as_slice().unwrap(), &opts).unwrap();
        assert!(rep.passed, "n={n}: {rep}");
    }
}

/// Forward-mode derivative of `K` unrolled multiplicative iterations (the seed's forward):
/// equal to the implicit gradient for large `K`, not for `K = 1`.
#[test]
fn implicit_gradient_equals_the_limit_of_unrolled_differentiation() {
    let mut rng = Lcg(5);
    let n = 4;
    let x = rng.vec(n * n, 0.0, 4.0);
    let dx = rng.vec(n * n, -1.0, 1.0);
    let g: Vec<f64> = (0..n * n).map(|_| rng.normal()).collect();
    let unrolled = |iters: usize| -> f64 {
        let mut r: Vec<Dual> = x
            .iter()
            .zip(&dx)
            .map(|(&v, &d)| Dual::new(v, d).exp())
            .collect();
        for _ in 0..iters {
            for j in 0..n {
                let s = (0..n).fold(Dual::c(0.0), |a, i| a + r[i * n + j]);
                (0..n).for_each(|i| r[i * n + j] = r[i * n + j] / s);
            }
            for i in 0..n {
                let s = (0..n).fold(Dual::c(0.0), |a, j| a + r[i * n + j]);
                (0..n).for_each(|j| r[i * n + j] = r[i * n + j] / s);
            }
        }
        r.iter().zip(&g).map(|(r, g)| r.d * g).sum()
    };
    let xa = Array3::from_shape_vec((1, n, n), x.clone()).unwrap();
    let ga = Array3::from_shape_vec((1, n, n), g.clone()).unwrap();
    let fwd = bistochastic(xa.view(), &BistochasticParams::default().iters(300)).unwrap();
    let bwd =
        bistochastic_backward(fwd.r.view(), ga.view(), &CgParams::default().tol(1e-13)).unwrap();
    let implicit: f64 = bwd.dx.iter().zip(&dx).map(|(a, b)| a * b).sum();
    let long = unrolled(300);
    assert!(
        (long - implicit).abs() < 1e-11 * implicit.abs().max(1.0),
        "unrolled {long} vs implicit {implicit}"
    );
    let short = unrolled(1);
    assert!(
        (short - implicit).abs() > 1e-4 * implicit.abs(),
        "one iteration should not agree"
    );
}

/// `X + u1ᵀ + 1vᵀ` has the same projection, so `∂L/∂X` has zero row and column sums; and
/// `G + u1ᵀ + 1vᵀ` changes `L` by a constant on bistochastic matrices, so `∂L/∂X` is unchanged.
#[test]
fn invariance_along_the_null_directions() {
    let mut rng = Lcg(6);
    let (b, n) = (20, 6);
    let x = random_x(&mut rng, b, n, 0.0, 4.0);
    let g = random_g(&mut rng, b, n);
    let (u, v) = (rng.vec(n, -5.0, 5.0), rng.vec(n, -5.0, 5.0));
    let shift = Array3::from_shape_fn((b, n, n), |(_, i, j)| u[i] + v[j]);
    let params = BistochasticParams::default().converged(1e-14);
    let r1 = bistochastic(x.view(), &params).unwrap().r;
    let r2 = bistochastic((&x + &shift).view(), &params).unwrap().r;
    for (a, c) in r1.iter().zip(&r2) {
        assert!((a - c).abs() < 1e-12);
    }
    let cg = CgParams::default().tol(1e-13);
    let d1 = bistochastic_backward(r1.view(), g.view(), &cg).unwrap().dx;
    let d2 = bistochastic_backward(r1.view(), (&g + &shift).view(), &cg)
        .unwrap()
        .dx;
    for (a, c) in d1.iter().zip(&d2) {
        assert!((a - c).abs() < 1e-10, "{a} vs {c}");
    }
    for k in 0..b {
        let d = d1.index_axis(Axis(0), k);
        for i in 0..n {
            assert!(d.row(i).sum().abs() < 1e-12 && d.column(i).sum().abs() < 1e-12);
        }
    }
}

/// Entries of ±30 (`exp` ranges over e^±30): everything finite, rows sum to 1, gradients with
/// zero row and column sums; f32 too.
#[test]
fn large_entries_stay_finite() {
    let mut rng = Lcg(7);
    for &n in &[2usize, 4, 16] {
        let b = 50;
        let x = Array3::from_shape_fn(
            (b, n, n),
            |_| if rng.next() < 0.5 { -30.0 } else { 30.0 } + rng.uniform(-1.0, 1.0),
        );
        let g = random_g(&mut rng, b, n);
        let fwd = bistochastic(x.view(), &BistochasticParams::default().iters(20)).unwrap();
        assert!(fwd.r.iter().all(|v| v.is_finite() && *v >= 0.0));
        for k in 0..b {
            for i in 0..n {
                assert!((fwd.r.index_axis(Axis(0), k).row(i).sum() - 1.0).abs() < 1e-12);
            }
        }
        let bwd = bistochastic_backward(fwd.r.view(), g.view(), &CgParams::default()).unwrap();
        assert!(bwd.dx.iter().all(|v| v.is_finite()));
        let x32 = x.mapv(|v| v as f32);
        let fwd32 = bistochastic(x32.view(), &BistochasticParams::default().iters(20)).unwrap();
        assert!(fwd32.r.iter().all(|v| v.is_finite() && *v >= 0.0));
        let bwd32 = bistochastic_backward(
            fwd32.r.view(),
            g.mapv(|v| v as f32).view(),
            &CgParams::default(),
        )
        .unwrap();
        assert!(bwd32.dx.iter().all(|v| v.is_finite()));
    }
}

#[test]
fn f32_agrees_with_f64() {
    let mut rng = Lcg(8);
    let (b, n) = (200, 16);
    let x = random_x(&mut rng, b, n, 0.0, 4.0);
    let g = random_g(&mut rng, b, n);
    let p = BistochasticParams::default().iters(20);
    let f64r = bistochastic(x.view(), &p).unwrap();
    let f32r = bistochastic(x.mapv(|v| v as f32).view(), &p).unwrap();
    for (a, c) in f32r.r.iter().zip(&f64r.r) {
        assert!((*a as f64 - c).abs() < 1e-5, "{a} vs {c}");
    }
    let d64 = bistochastic_backward(f64r.r.view(), g.view(), &CgParams::default()).unwrap();
    let d32 = bistochastic_backward(
        f32r.r.view(),
        g.mapv(|v| v as f32).view(),
        &CgParams::default(),
    )
    .unwrap();
    assert!(d32.cg.all_converged() && d64.cg.all_converged());
    let scale = d64.dx.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for (a, c) in d32.dx.iter().zip(&d64.dx) {
        assert!((*a as f64 - c).abs() < 1e-4 * scale, "{a} vs {c}");
    }
}

#[test]
fn non_convergence_is_reported_and_invalid_inputs_are_errors() {
    let mut rng = Lcg(9);
    let x = random_x(&mut rng, 3, 8, 0.0, 4.0);
    let g = random_g(&mut rng, 3, 8);
    let r = bistochastic(x.view(), &BistochasticParams::default())
        .unwrap()
        .r;
    // Matrix 0's upstream gradient is 0: so is its right-hand side, and CG stops at once,
    // converged. The others are capped at one iteration.
    let mut g = g;
    g.index_axis_mut(Axis(0), 0).fill(0.0);
    let cg = CgParams::default().max_iters(1).tol(1e-12);
    let bwd = bistochastic_backward(r.view(), g.view(), &cg).unwrap();
    assert!(bwd.cg_outcomes.is_none());
    assert_eq!(
        (
            bwd.cg.problems,
            bwd.cg.unconverged,
            bwd.cg.first_unconverged
        ),
        (3, 2, Some(1))
    );
    assert!(bwd.cg.max_iterations == 1 && bwd.cg.max_residual > 1e-12 && bwd.cg.tol == 1e-12);
    // Each matrix's outcome on request; the summary is their reduction, the gradient the same.
    let each = BistochasticSolver::new(CpuBackend, BistochasticParams::default().cg_outcomes(true))
        .backward(r.view(), g.view(), &cg)
        .unwrap();
    let outcomes = each.cg_outcomes.as_ref().unwrap();
    assert_eq!(outcomes[0].iterations, 0);
    assert!(outcomes[0].converged && outcomes[0].residual == 0.0);
    assert!(outcomes[1..]
        .iter()
        .all(|o| o.iterations == 1 && !o.converged && o.residual > 1e-12));
    assert_eq!(each.cg, CgSummary::of(outcomes, 1e-12));
    assert_eq!(each.cg, bwd.cg);
    assert_eq!(each.dx, bwd.dx);
    // A right-hand side that overflows is an error naming its matrix.
    let mut huge = g.clone();
    huge.index_axis_mut(Axis(0), 2).mapv_inplace(|v| v * 1e300);
    let err = bistochastic_backward(r.view(), huge.view(), &CgParams::default()).unwrap_err();
    assert!(
        err.to_string().contains("right-hand side of problem 2"),
        "{err}"
    );
    assert!(bistochastic(
        Array3::<f64>::zeros((2, 3, 4)).view(),
        &BistochasticParams::default()
    )
    .is_err());
    assert!(bistochastic(
        Array3::<f64>::zeros((1, 33, 33)).view(),
        &BistochasticParams::default()
    )
    .is_err());
    assert!(bistochastic(
        Array3::<f64>::zeros((0, 3, 3)).view(),
        &BistochasticParams::default()
    )
    .is_err());
    assert!(bistochastic(x.view(), &BistochasticParams::default().iters(0)).is_err());
    let mut nan = x.clone();
    nan[[1, 2, 3]] = f64::NAN;
    assert!(bistochastic(nan.view(), &BistochasticParams::default()).is_err());
    assert!(bistochastic_backward(
        r.view(),
        Array3::zeros((3, 8, 7)).view(),
        &CgParams::default()
    )
    .is_err());
    assert!(bistochastic_backward((-&r).view(), g.view(), &CgParams::default()).is_err());
}

/// The deferred buffer entry points on the CPU: the same `R`, `dX` and statistics as the
/// host-array ones, the statistics through their word layout (the CG residual rounded to
/// f32, as a GPU keeps it); a word buffer too short is an error naming it; the decoder
/// reports a flagged non-finite right-hand side as the backward does.
#[test]
fn deferred_buffers_on_the_cpu_match_the_synchronous_path() {
    use logot::backend::bistochastic::{cg_summary_from_words, words, ProjectionStats};
    use logot::{Backend, BistochasticKernels, CpuBackend};
    let mut rng = Lcg(41);
    let (b, n) = (50, 6);
    let x = random_x(&mut rng, b, n, 0.0, 3.0);
    let g = random_g(&mut rng, b, n);
    let be = CpuBackend;
    let proj = BistochasticSolver::new(be, BistochasticParams::default().converged(1e-9));
    let xb = be.upload(x.as_slice().unwrap()).unwrap();
    let gb = be.upload(g.as_slice().unwrap()).unwrap();
    let mut r1 = vec![0.0; b * n * n];
    let mut sw = BistochasticKernels::<f64>::words(&be, words::PROJECTION).unwrap();
    proj.forward_buffers(n, &xb, &mut r1, &mut sw).unwrap();
    let stats = proj.read_stats::<f64>(&sw).unwrap();
    assert_eq!(ProjectionStats::from_words(&sw).unwrap(), stats);
    // The matrices and iterations of the host-array path.
    let fwd = proj.forward(x.view()).unwrap();
    // The host path subtracts each matrix's largest logit before the kernel (the deferred
    // path reads the caller's buffer as it is): with those logits the arithmetic is the
    // same, bit for bit.
    let mut centred = x.clone();
    for mut m in centred.outer_iter_mut() {
        let top = m.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        m.mapv_inplace(|v| v - top);
    }
    let cb = be.upload(centred.as_slice().unwrap()).unwrap();
    let mut rc = vec![0.0; b * n * n];
    let mut cw = BistochasticKernels::<f64>::words(&be, words::PROJECTION).unwrap();
    proj.forward_buffers(n, &cb, &mut rc, &mut cw).unwrap();
    assert_eq!(rc, fwd.r.as_slice().unwrap());
    assert_eq!(
        proj.read_stats::<f64>(&cw).unwrap().iterations,
        fwd.convergence.iterations
    );
    // The caller's uncentred logits round differently in `X_ij + α_i + β_j`: a few n·ε.
    let worst = r1
        .iter()
        .zip(fwd.r.iter())
        .map(|(a, b)| (a - b).abs() / b.abs())
        .fold(0.0, f64::max);
    assert!(worst <= 4.0 * n as f64 * f64::EPSILON, "{worst:e}");
    assert_eq!(stats.iterations, fwd.convergence.iterations);
    assert!(
        stats.marginal_error <= 1e-9 && stats.unconverged == 0,
        "{stats:?}"
    );
    let cg = CgParams::default().max_iters(2).tol(1e-13);
    let mut d = vec![0.0; b * n * n];
    let len = BistochasticKernels::<f64>::bistochastic_backward_words(&be, b);
    let mut w = BistochasticKernels::<f64>::words(&be, len).unwrap();
    proj.backward_buffers(n, &r1, &gb, &cg, &mut d, &mut w)
        .unwrap();
    let decoded = cg_summary_from_words(&w, b, 1e-13).unwrap();
    // The host-array path's gradients and CG summary, its residual rounded to f32 (as a GPU
    // keeps it in the words).
    let host = BistochasticSolver::new(be, BistochasticParams::default().converged(1e-9))
        .backward(
            ndarray::ArrayView3::from_shape((b, n, n), &r1).unwrap(),
            g.view(),
            &cg,
        )
        .unwrap();
    assert_eq!(d, host.dx.as_slice().unwrap());
    assert_eq!(decoded.unconverged, host.cg.unconverged);
    assert_eq!(decoded.first_unconverged, host.cg.first_unconverged);
    assert_eq!(decoded.max_iterations, host.cg.max_iterations);
    assert_eq!(decoded.max_residual, host.cg.max_residual as f32 as f64);
    assert!(decoded.unconverged > 0, "{decoded:?}");
    // Too few words.
    let mut short = vec![0u64; 2];
    let err = proj
        .forward_buffers(n, &xb, &mut r1, &mut short)
        .unwrap_err();
    assert!(err.to_string().starts_with("stats"), "{err}");
    // A flagged right-hand side (word 5 holds !k) is the backward's error.
    let mut bad = w.clone();
    bad[words::CG_FIRST_BAD_RHS] = !7u64;
    let err = cg_summary_from_words(&bad, b, 1e-13).unwrap_err();
    assert!(err.to_string().contains("problem 7"), "{err}");
}
