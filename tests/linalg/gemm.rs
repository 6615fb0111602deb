//! GEMM against an f64 triple loop, its backward against central finite differences, the
//! transposed-operand kernel flags, and squared-Euclidean costs against brute force.
//!
//! Finite differences come from the crate's checker (`logot::grad::check_gradient`, f64
//! central differences).

use logot::backend::linalg::{GemmShape, LinalgKernels, Transpose};
use logot::grad::{check_gradient, GradCheckParams};
use logot::linalg::{matmul, matmul_backward, sq_euclidean_cost};
use logot::{CpuBackend, Error, Real};
use ndarray::{s, Array2, ArrayView2};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

fn gaussian<T: Real>(rng: &mut StdRng, r: usize, c: usize) -> Array2<T> {
    Array2::from_shape_fn((r, c), |_| T::of(rng.sample::<f64, _>(StandardNormal)))
}

/// `A·B` by the textbook triple loop in f64.
fn naive<T: Real>(a: ArrayView2<'_, T>, b: ArrayView2<'_, T>) -> Array2<f64> {
    let ((m, k), n) = (a.dim(), b.ncols());
    Array2::from_shape_fn((m, n), |(i, j)| {
        (0..k).map(|l| a[(i, l)].f64() * b[(l, j)].f64()).sum()
    })
}

fn max_abs_diff<T: Real>(x: &Array2<T>, y: &Array2<f64>) -> f64 {
    assert_eq!(x.dim(), y.dim());
    x.iter()
        .zip(y.iter())
        .fold(0.0f64, |m, (a, b)| m.max((a.f64() - b).abs()))
}

#[test]
fn matmul_matches_triple_loop_f64_and_f32() {
    let mut rng = StdRng::seed_from_u64(1);
    // Small, odd, tall, wide, and large enough to run split over threads in both directions.
    for &(m, k, n) in &[
        (1, 1, 1),
        (3, 5, 2),
        (17, 1, 9),
        (70, 33, 129),
        (300, 150, 200),
        (64, 200, 700),
    ] {
        let (a, b) = (
            gaussian::<f64>(&mut rng, m, k),
            gaussian::<f64>(&mut rng, k, n),
        );
        let c = matmul(&CpuBackend, a.view(), b.view()).unwrap();
        let err = max_abs_diff(&c, &naive(a.view(), b.view()));
        assert!(
            err <= 4.0 * k as f64 * f64::EPSILON * 4.0,
            "{m}×{k}×{n} f64: {err:e}"
        );
        let (a32, b32) = (a.mapv(|v| v as f32), b.mapv(|v| v as f32));
        let c32 = matmul(&CpuBackend, a32.view(), b32.view()).unwrap();
        let err = max_abs_diff(&c32, &naive(a32.view(), b32.view()));
        // Rounding of a k-term sum of N(0,1)·N(0,1) products: about ε·k in the worst entries.
        assert!(
            err <= 4.0 * k as f64 * f32::EPSILON as f64,
            "{m}×{k}×{n} f32: {err:e}"
        );
    }
}

#[test]
fn matmul_reads_strided_and_transposed_views() {
    let mut rng = StdRng::seed_from_u64(2);
    let big = gaussian::<f64>(&mut rng, 90, 80);
    let a = big.slice(s![..;2, 5..45]); // 45×40, row stride 2
    let b = big.t(); // 80×90, column-major
    let b = b.slice(s![10..50, ..]); // 40×90
    let c = matmul(&CpuBackend, a, b).unwrap();
    assert!(max_abs_diff(&c, &naive(a, b)) < 1e-12);
}

/// Every transpose combination of the kernel, with α and β, on stored buffers.
#[test]
fn kernel_transpose_flags_alpha_beta() {
    let mut rng = StdRng::seed_from_u64(3);
    let (m, n, k) = (37, 23, 61);
    let a = gaussian::<f64>(&mut rng, m, k);
    let b = gaussian::<f64>(&mut rng, k, n);
    let c0 = gaussian::<f64>(&mut rng, m, n);
    let want = naive(a.view(), b.view()) * 0.5 + &c0 * -2.0;
    let be = CpuBackend;
    for ta in [Transpose::No, Transpose::Yes] {
        for tb in [Transpose::No, Transpose::Yes] {
            let sa: Vec<f64> = match ta {
                Transpose::No => a.iter().copied().collect(),
                Transpose::Yes => a.t().iter().copied().collect(),
            };
            let sb: Vec<f64> = match tb {
                Transpose::No => b.iter().copied().collect(),
                Transpose::Yes => b.t().iter().copied().collect(),
            };
            let mut c: Vec<f64> = c0.iter().copied().collect();
            let shape = GemmShape::new(m, n, k).with_transposes(ta, tb);
            be.gemm(shape, 0.5, &sa, &sb, -2.0, &mut c).unwrap();
            let c = Array2::from_shape_vec((m, n), c).unwrap();
            assert!(max_abs_diff(&c, &want) < 1e-12, "{ta:?} {tb:?}");
        }
    }
    // β = 0: C is not read, NaN in it does not propagate.
    let mut c = vec![f64::NAN; m * n];
    let (sa, sb): (Vec<f64>, Vec<f64>) = (a.iter().copied().collect(), b.iter().copied().collect());
    be.gemm(GemmShape::new(m, n, k), 1.0, &sa, &sb, 0.0, &mut c)
        .unwrap();
    assert!(c.iter().all(|v| v.is_finite()));
    // Wrong buffer lengths are errors, not panics.
    assert!(matches!(
        be.gemm(GemmShape::new(m, n, k + 1), 1.0, &sa, &sb, 0.0, &mut c),
        Err(Error::Shape { .. })
    ));
}

/// L(A, B) = Σ W ⊙ (A·B) has dL/dC = W; the backward must match central differences of L
/// (the crate's checker, `logot::grad::check_gradient`), for A and B flattened together.
#[test]
fn backward_matches_central_differences() {
    let mut rng = StdRng::seed_from_u64(4);
    let (m, k, n) = (6, 5, 7);
    let a = gaussian::<f64>(&mut rng, m, k);
    let b = gaussian::<f64>(&mut rng, k, n);
    let w = gaussian::<f64>(&mut rng, m, n);
    let grad = matmul_backward(&CpuBackend, a.view(), b.view(), w.view()).unwrap();
    // Variables: A's entries then B's, row-major.
    let x: Vec<f64> = a.iter().chain(b.iter()).copied().collect();
    let loss = |v: &[f64]| -> f64 {
        let av = ArrayView2::from_shape((m, k), &v[..m * k]).unwrap();
        let bv = ArrayView2::from_shape((k, n), &v[m * k..]).unwrap();
        (&naive(av, bv) * &w).sum()
    };
    let analytic: Vec<f64> = grad.da.iter().chain(grad.db.iter()).copied().collect();
    // L is bilinear: central differences are exact up to rounding (~ε·|L|/h).
    let report = check_gradient(
        loss,
        &x,
        &analytic,
        &GradCheckParams::default().rel_tol(1e-8).abs_floor(1e-8),
    )
    .unwrap();
    assert!(report.passed, "{report}");
    // And a slightly wrong gradient is rejected.
    let mut wrong = analytic.clone();
    wrong[m * k] += 1e-3;
    assert!(
        !check_gradient(
            loss,
            &x,
            &wrong,
            &GradCheckParams::default().rel_tol(1e-8).abs_floor(1e-8)
        )
        .unwrap()
        .passed
    );
}

#[test]
fn backward_f32_large_matches_f64_formula() {
    let mut rng = StdRng::seed_from_u64(5);
    let (m, k, n) = (130, 257, 190);
    let (a, b, dc) = (
        gaussian::<f32>(&mut rng, m, k),
        gaussian::<f32>(&mut rng, k, n),
        gaussian::<f32>(&mut rng, m, n),
    );
    let g = matmul_backward(&CpuBackend, a.view(), b.view(), dc.view()).unwrap();
    let da = naive(dc.view(), b.t());
    let db = naive(a.t(), dc.view());
    let tol = |kk: usize| 4.0 * kk as f64 * f32::EPSILON as f64;
    assert!(max_abs_diff(&g.da, &da) < tol(n), "dA");
    assert!(max_abs_diff(&g.db, &db) < tol(m), "dB");
}

#[test]
fn sq_euclidean_cost_matches_brute_force_and_is_clamped() {
    let mut rng = StdRng::seed_from_u64(6);
    let (n, m, d) = (40, 31, 3);
    // Far from the origin: the common-mean shift keeps the formula accurate in f32.
    let offset = 1e4;
    let x = Array2::from_shape_fn((n, d), |_| offset + rng.random_range(0.0..1.0f64));
    let mut y = Array2::from_shape_fn((m, d), |_| offset + rng.random_range(0.0..1.0f64));
    y.row_mut(3).assign(&x.row(7)); // an exact coincidence: cost 0
    let brute = Array2::from_shape_fn((n, m), |(i, j)| {
        (0..d).map(|c| (x[(i, c)] - y[(j, c)]).powi(2)).sum::<f64>()
    });
    let c = sq_euclidean_cost(&CpuBackend, x.view(), y.view()).unwrap();
    assert!(max_abs_diff(&c, &brute) < 1e-9, "f64");
    assert!(c.iter().all(|&v| v >= 0.0));
    let (x32, y32) = (x.mapv(|v| v as f32), y.mapv(|v| v as f32));
    let brute32 = Array2::from_shape_fn((n, m), |(i, j)| {
        (0..d)
            .map(|c| (x32[(i, c)] as f64 - y32[(j, c)] as f64).powi(2))
            .sum::<f64>()
    });
    let c32 = sq_euclidean_cost(&CpuBackend, x32.view(), y32.view()).unwrap();
    assert!(c32.iter().all(|&v| v >= 0.0));
    assert!(
        max_abs_diff(&c32, &brute32) < 1e-5,
        "f32: {:e}",
        max_abs_diff(&c32, &brute32)
    );
    assert!(c32[(7, 3)] < 1e-6);
    // Identical clouds: the diagonal is (clamped) zero up to rounding, never negative.
    let cxx = sq_euclidean_cost(&CpuBackend, x32.view(), x32.view()).unwrap();
    assert!((0..n).all(|i| cxx[(i, i)] >= 0.0 && cxx[(i, i)] < 1e-5));
}

#[test]
fn invalid_inputs_are_errors() {
    let a = Array2::<f64>::ones((3, 4));
    let b = Array2::<f64>::ones((5, 2));
    let e = matmul(&CpuBackend, a.view(), b.view()).unwrap_err();
    assert!(
        matches!(e, Error::Shape { .. }) && e.to_string().starts_with("b:"),
        "{e}"
    );
    let b = Array2::<f64>::ones((4, 2));
    let dc = Array2::<f64>::ones((3, 3));
    assert!(matches!(
        matmul_backward(&CpuBackend, a.view(), b.view(), dc.view()),
        Err(Error::Shape { .. })
    ));
    let mut bad = a.clone();
    bad[(1, 1)] = f64::INFINITY;
    assert!(matches!(
        matmul(&CpuBackend, bad.view(), b.view()),
        Err(Error::NonFinite { .. })
    ));
    let empty = Array2::<f64>::zeros((0, 4));
    assert!(matches!(
        matmul(&CpuBackend, empty.view(), b.view()),
        Err(Error::Empty { .. })
    ));
    let y = Array2::<f64>::ones((2, 3));
    assert!(matches!(
        sq_euclidean_cost(&CpuBackend, a.view(), y.view()),
        Err(Error::Shape { .. })
    ));
}
