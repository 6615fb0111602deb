//! Newton–Schulz and the symmetric X·Xᵀ kernel.
//!
//! References: NumPy's Newton–Schulz on a fixed matrix (the Python is quoted below); the
//! closed form `NS(U·diag(σ)·Vᵀ) = U·diag(f⁵(σ/‖σ‖))·Vᵀ` for matrices built from known
//! singular vectors; singular values of the output measured by svd3 (band from the
//! polynomial, see `logot::linalg::newton_schulz`); X·Xᵀ against an f64 triple loop, with
//! exact (bitwise) symmetry.

use logot::backend::linalg::{LinalgKernels, SyrkShape, Transpose};
use logot::linalg::newton_schulz::CUBIC_COEFFICIENTS;
use logot::linalg::{newton_schulz, svd3, xxt, NewtonSchulzParams, MUON_COEFFICIENTS};
use logot::{CpuBackend, Error, Real};
use ndarray::{array, Array2, ArrayView2};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

/// The band of five Muon steps for σ/‖X‖_F ≥ 0.0015: [f(1.0501), f(0.5545)] (the local
/// minimum and maximum of f), rounded outwards.
const BAND: (f64, f64) = (0.6818, 1.2024);

fn gaussian<T: Real>(rng: &mut StdRng, r: usize, c: usize) -> Array2<T> {
    Array2::from_shape_fn((r, c), |_| T::of(rng.sample::<f64, _>(StandardNormal)))
}

fn max_abs_diff<T: Real>(x: &Array2<T>, y: &Array2<f64>) -> f64 {
    assert_eq!(x.dim(), y.dim());
    x.iter()
        .zip(y.iter())
        .fold(0.0f64, |m, (a, b)| m.max((a.f64() - b).abs()))
}

fn naive_xxt<T: Real>(x: ArrayView2<'_, T>) -> Array2<f64> {
    let (r, c) = x.dim();
    Array2::from_shape_fn((r, r), |(i, j)| {
        (0..c).map(|l| x[(i, l)].f64() * x[(j, l)].f64()).sum()
    })
}

/// Orthonormal columns by Gram–Schmidt (twice) in f64.
fn orthonormal(rng: &mut StdRng, m: usize, k: usize) -> Array2<f64> {
    let mut q = gaussian::<f64>(rng, m, k);
    for j in 0..k {
        for _ in 0..2 {
            for i in 0..j {
                let d = q.column(i).dot(&q.column(j));
                let qi = q.column(i).to_owned();
                q.column_mut(j).scaled_add(-d, &qi);
            }
        }
        let n = q.column(j).dot(&q.column(j)).sqrt();
        q.column_mut(j).mapv_inplace(|v| v / n);
    }
    q
}

fn quintic(x: f64, [a, b, c]: [f64; 3]) -> f64 {
    a * x + b * x.powi(3) + c * x.powi(5)
}

#[test]
fn xxt_is_exactly_symmetric_and_matches_triple_loop() {
    let mut rng = StdRng::seed_from_u64(1);
    // Sizes around the tile edges (64, 128) and one that runs tiles in parallel.
    for &(r, c) in &[
        (1, 1),
        (2, 7),
        (63, 20),
        (64, 64),
        (65, 130),
        (300, 41),
        (700, 90),
    ] {
        let x = gaussian::<f64>(&mut rng, r, c);
        let a = xxt(&CpuBackend, x.view()).unwrap();
        assert!(
            max_abs_diff(&a, &naive_xxt(x.view())) < 8.0 * c as f64 * f64::EPSILON,
            "{r}×{c}"
        );
        for i in 0..r {
            for j in 0..i {
                assert_eq!(
                    a[(i, j)].to_bits(),
                    a[(j, i)].to_bits(),
                    "{r}×{c}: ({i},{j}) not mirrored"
                );
            }
        }
        let x32 = x.mapv(|v| v as f32);
        let a32 = xxt(&CpuBackend, x32.view()).unwrap();
        assert!(max_abs_diff(&a32, &naive_xxt(x32.view())) < 4.0 * c as f64 * f32::EPSILON as f64);
        assert!(a32 == a32.t(), "{r}×{c}: f32 not symmetric");
    }
}

#[test]
fn syrk_kernel_transposed_operand_and_beta_reads_upper_triangle_only() {
    let mut rng = StdRng::seed_from_u64(2);
    let (n, k) = (150, 77);
    let x = gaussian::<f64>(&mut rng, k, n); // stored k×n, op(A) = Aᵀ is n×k
    let c0 = {
        let s = gaussian::<f64>(&mut rng, n, n);
        &s + &s.t()
    };
    // Poison the strict lower triangle: with β ≠ 0 only the upper triangle may be read.
    let mut c: Vec<f64> = c0.iter().copied().collect();
    for i in 0..n {
        for j in 0..i {
            c[i * n + j] = f64::NAN;
        }
    }
    let a: Vec<f64> = x.iter().copied().collect();
    CpuBackend
        .syrk(
            SyrkShape {
                n,
                k,
                ta: Transpose::Yes,
            },
            2.0,
            &a,
            -0.5,
            &mut c,
        )
        .unwrap();
    let c = Array2::from_shape_vec((n, n), c).unwrap();
    let want = naive_xxt(x.t()) * 2.0 + &c0 * -0.5;
    assert!(max_abs_diff(&c, &want) < 1e-12);
    assert!(c == c.t());
    // Bad lengths: an error, no panic.
    let mut small = vec![0.0; 4];
    assert!(matches!(
        CpuBackend.syrk(
            SyrkShape {
                n,
                k,
                ta: Transpose::No
            },
            1.0,
            &a,
            0.0,
            &mut small
        ),
        Err(Error::Shape { .. })
    ));
}

/// NumPy reference (float64):
/// ```python
/// import numpy as np
/// def ns(G, steps=5):
///     a, b, c = 3.4445, -4.7750, 2.0315
///     X = G / np.linalg.norm(G)
///     tall = X.shape[0] > X.shape[1]
///     if tall: X = X.T
///     for _ in range(steps):
///         A = X @ X.T
///         B = b * A + c * A @ A
///         X = a * X + B @ X
///     return X.T if tall else X
/// G = np.array([[(3*i + 5*j) % 7 - 3.0 + 0.5*i for j in range(6)] for i in range(4)])
/// print(ns(G))      # wide 4×6; ns(G.T) is its transpose (tall path)
/// ```
#[test]
fn matches_numpy_on_fixed_matrix_wide_and_tall() {
    let g = Array2::from_shape_fn((4, 6), |(i, j)| {
        ((3 * i + 5 * j) % 7) as f64 - 3.0 + 0.5 * i as f64
    });
    let want: Array2<f64> = array![
        [
            -0.7456457530587894,
            0.30221637496077614,
            0.25028585667060466,
            -0.30221637496077614,
            0.5784674907764665,
            0.08067274028098598
        ],
        [
            0.08116930287964784,
            -0.1486883592188748,
            0.8244102535227058,
            0.1486883592188748,
            0.1891725879330411,
            -0.6236435174399864
        ],
        [
            0.7446526278614651,
            0.2714114592926635,
            0.03465144699381517,
            -0.2714114592926635,
            0.4244429124359028,
            -0.08265899067563409
        ],
        [
            -0.08216242807697205,
            -0.21029819055510074,
            0.3931414341691297,
            0.21029819055510074,
            -0.11887656874808619,
            0.62165726704534
        ]
    ];
    let p = NewtonSchulzParams::default();
    let wide = newton_schulz(&CpuBackend, g.view(), &p).unwrap();
    assert!(
        max_abs_diff(&wide, &want) < 1e-13,
        "wide: {:e}",
        max_abs_diff(&wide, &want)
    );
    let tall = newton_schulz(&CpuBackend, g.t(), &p).unwrap();
    assert!(max_abs_diff(&tall, &want.t().to_owned()) < 1e-13, "tall");
    let w32 = newton_schulz(&CpuBackend, g.mapv(|v| v as f32).view(), &p).unwrap();
    assert!(
        max_abs_diff(&w32, &want) < 2e-5,
        "f32: {:e}",
        max_abs_diff(&w32, &want)
    );
}

/// NS acts on singular values only: for X = U·diag(σ)·Vᵀ the result is U·diag(f⁵(σ/‖σ‖))·Vᵀ.
#[test]
fn matches_closed_form_on_known_singular_vectors() {
    let mut rng = StdRng::seed_from_u64(3);
    for &(r, c) in &[(8, 20), (20, 8), (16, 16)] {
        let k = r.min(c);
        let u = orthonormal(&mut rng, r, k);
        let v = orthonormal(&mut rng, c, k);
        // Singular values over two decades, σ/‖σ‖ ≥ 0.0015.
        let sigma: Vec<f64> = (0..k)
            .map(|i| 10f64.powf(-2.0 * i as f64 / (k - 1) as f64))
            .collect();
        let x = Array2::from_shape_fn((r, k), |(i, j)| u[(i, j)] * sigma[j]).dot(&v.t());
        let norm = sigma.iter().map(|s| s * s).sum::<f64>().sqrt();
        let mapped: Vec<f64> = sigma
            .iter()
            .map(|&s| (0..5).fold(s / norm, |t, _| quintic(t, MUON_COEFFICIENTS)))
            .collect();
        assert!(
            mapped.iter().all(|&t| t >= BAND.0 && t <= BAND.1),
            "{mapped:?}"
        );
        let want = Array2::from_shape_fn((r, k), |(i, j)| u[(i, j)] * mapped[j]).dot(&v.t());
        let got = newton_schulz(&CpuBackend, x.view(), &NewtonSchulzParams::default()).unwrap();
        assert!(
            max_abs_diff(&got, &want) < 1e-12,
            "{r}×{c}: {:e}",
            max_abs_diff(&got, &want)
        );
        // The measured singular values, diag(Uᵀ·Y·V), and nothing off the diagonal.
        let s_meas = u.t().dot(&got).dot(&v);
        for i in 0..k {
            for j in 0..k {
                let want = if i == j { mapped[i] } else { 0.0 };
                assert!((s_meas[(i, j)] - want).abs() < 1e-12);
            }
        }
        let got32 = newton_schulz(
            &CpuBackend,
            x.mapv(|v| v as f32).view(),
            &NewtonSchulzParams::default(),
        )
        .unwrap();
        assert!(
            max_abs_diff(&got32, &want) < 1e-5,
            "f32 {r}×{c}: {:e}",
            max_abs_diff(&got32, &want)
        );
    }
}

/// Every form of a step (completed square `c·(A + s·I)² + t·I`, the nearly linear case that
/// adds `c·A²` to a copy of `b·A`, and the cubic `c = 0`) against the closed form on known
/// singular values, with coefficients that keep the singular values bounded, in f64 and f32,
/// wide, tall and square; plus zero steps (only the Frobenius scaling).
#[test]
fn every_step_form_matches_closed_form() {
    let mut rng = StdRng::seed_from_u64(31);
    let sets: [[f64; 3]; 5] = [
        MUON_COEFFICIENTS,
        [15.0 / 8.0, -10.0 / 8.0, 3.0 / 8.0], // c·s² = 1.04: completed square
        [1.5, -0.5, 1e-3],                    // c·s² = 62.5 > 4·2.001: copy and add
        [1.5, -0.5, 1e-5],                    // c·s² = 6250: the square would lose digits
        CUBIC_COEFFICIENTS,                   // c = 0
    ];
    for &(r, c) in &[(8, 20), (20, 8), (16, 16)] {
        let k = r.min(c);
        let u = orthonormal(&mut rng, r, k);
        let v = orthonormal(&mut rng, c, k);
        let sigma: Vec<f64> = (0..k)
            .map(|i| 10f64.powf(-1.5 * i as f64 / (k - 1) as f64))
            .collect();
        let x = Array2::from_shape_fn((r, k), |(i, j)| u[(i, j)] * sigma[j]).dot(&v.t());
        let norm = sigma.iter().map(|s| s * s).sum::<f64>().sqrt();
        for coefficients in sets {
            for steps in [0usize, 1, 3] {
                let params = NewtonSchulzParams::default()
                    .steps(steps)
                    .coefficients(coefficients)
                    .polish_steps(0);
                let mapped: Vec<f64> = sigma
                    .iter()
                    .map(|&s| (0..steps).fold(s / norm, |t, _| quintic(t, coefficients)))
                    .collect();
                let top = mapped.iter().fold(0.0f64, |m, t| m.max(t.abs()));
                let want =
                    Array2::from_shape_fn((r, k), |(i, j)| u[(i, j)] * mapped[j]).dot(&v.t());
                let got = newton_schulz(&CpuBackend, x.view(), &params).unwrap();
                let d = max_abs_diff(&got, &want);
                assert!(
                    d < 1e-12 * top.max(1.0),
                    "{coefficients:?} {steps} {r}×{c}: {d:e}"
                );
                let got32 =
                    newton_schulz(&CpuBackend, x.mapv(|v| v as f32).view(), &params).unwrap();
                let d = max_abs_diff(&got32, &want);
                assert!(
                    d < 2e-5 * top.max(1.0),
                    "f32 {coefficients:?} {steps} {r}×{c}: {d:e}"
                );
            }
        }
    }
}

/// Gaussian 3-column matrices (tall and wide): singular values of the output, measured by
/// svd3, lie in the band.
#[test]
fn singular_values_of_output_lie_in_band() {
    let mut rng = StdRng::seed_from_u64(4);
    let mut lo = f64::INFINITY;
    let mut hi = 0.0f64;
    for trial in 0..20 {
        let x = gaussian::<f32>(&mut rng, 200 + trial, 3);
        // Well-conditioned: all σ/‖X‖_F far above 0.0015.
        let sx = svd3(x.view()).unwrap().s;
        let fro = sx.iter().map(|v| (v * v) as f64).sum::<f64>().sqrt();
        assert!(sx[2] as f64 / fro > 0.0015);
        // Not a trivial pass: the normalised input lies below the band (σ/‖X‖_F ≈ 1/√3).
        assert!((sx[0] as f64 / fro) < BAND.0);
        for y in [
            newton_schulz(&CpuBackend, x.view(), &NewtonSchulzParams::default()).unwrap(),
            {
                let w = newton_schulz(&CpuBackend, x.t(), &NewtonSchulzParams::default()).unwrap();
                w.t().to_owned()
            },
        ] {
            let s = svd3(y.view()).unwrap().s;
            lo = lo.min(s[2] as f64);
            hi = hi.max(s[0] as f64);
        }
    }
    assert!(
        lo >= BAND.0 - 1e-5 && hi <= BAND.1 + 1e-5,
        "singular values in [{lo}, {hi}]"
    );
}

#[test]
fn polar_params_converge_to_orthogonal_factor() {
    let mut rng = StdRng::seed_from_u64(5);
    let n = 24;
    let u = orthonormal(&mut rng, n, n);
    let v = orthonormal(&mut rng, n, n);
    let sigma: Vec<f64> = (0..n)
        .map(|i| 1.0 + 9.0 * i as f64 / (n - 1) as f64)
        .collect(); // κ = 10
    let x = Array2::from_shape_fn((n, n), |(i, j)| u[(i, j)] * sigma[j]).dot(&v.t());
    let y = newton_schulz(
        &CpuBackend,
        x.view(),
        &NewtonSchulzParams::default().polar(),
    )
    .unwrap();
    let polar = u.dot(&v.t());
    assert!(
        max_abs_diff(&y, &polar) < 1e-12,
        "{:e}",
        max_abs_diff(&y, &polar)
    );
    // Cubic steps alone are the classical iteration.
    let p = NewtonSchulzParams::default()
        .steps(0)
        .coefficients(CUBIC_COEFFICIENTS)
        .polish_steps(30);
    let y = newton_schulz(&CpuBackend, x.view(), &p).unwrap();
    assert!(max_abs_diff(&y, &polar) < 1e-12);
}

#[test]
fn zero_input_and_errors() {
    let z = Array2::<f32>::zeros((3, 5));
    assert_eq!(
        newton_schulz(&CpuBackend, z.view(), &NewtonSchulzParams::default()).unwrap(),
        z
    );
    let e = Array2::<f64>::zeros((0, 5));
    assert!(matches!(
        newton_schulz(&CpuBackend, e.view(), &NewtonSchulzParams::default()),
        Err(Error::Empty { .. })
    ));
    let mut x = Array2::<f64>::ones((3, 3));
    x[(0, 2)] = f64::NAN;
    assert!(matches!(
        newton_schulz(&CpuBackend, x.view(), &NewtonSchulzParams::default()),
        Err(Error::NonFinite { .. })
    ));
    let p = NewtonSchulzParams::default().coefficients([f64::NAN, 0.0, 0.0]);
    assert!(matches!(
        newton_schulz(&CpuBackend, Array2::<f64>::eye(2).view(), &p),
        Err(Error::Parameter { .. })
    ));
    assert!(matches!(
        xxt(&CpuBackend, Array2::<f32>::zeros((2, 0)).view()),
        Err(Error::Empty { .. })
    ));
}
