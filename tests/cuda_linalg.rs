//! CUDA [`LinalgKernels`] against references computed on the host in f64:
//! * svd3: the CPU backend (which computes in f64) on the same entries: singular values,
//!   right singular vectors (signs included) and left singular vectors where the singular
//!   values are distinct, exact zeros for rank-deficient matrices (built exactly rank
//!   deficient in f32), plus the invariants on the GPU result itself (reconstruction,
//!   orthonormal U including the completed columns, descending S, sign convention); every
//!   kernel variant (register-cached chunks of 1, 2, 4, 8 × 128 rows; re-read for M > 1024
//!   and for f64), M not a multiple of 4, M < 3, all-zero matrices;
//! * gemm: a naive f64 triple loop, all four transpose combinations, sizes that are not
//!   multiples of the 128 tile (nor of 4), β = 0 with NaN in C (not read) and β ≠ 0, k = 0;
//!   the error bound is the classical `(k + 2)·ε·(|α|·Σ|a||b| + |β||c|)` per entry; the
//!   tensor-core products (f32 at TF32 and TF32x3) add their rounding per product, 2^-10
//!   and 2^-20 of `|α|·Σ|a||b|`, and f64 asked for TF32 keeps exact products;
//! * syrk: the same loop; the result is bitwise symmetric, and with β ≠ 0 only the upper
//!   triangle of C is read (the lower one holds NaN);
//! * products of 2^30 multiply-adds or more (which go through transposed copies of
//!   operands whose rows run along k): odd sizes, sampled entries against f64 sums;
//! * frobenius_norm, scaled_copy and shift_diagonal: f64 sums; NaN and ∞ propagate; no overflow in f64;
//! * Newton–Schulz: the CPU in f64 (relative Frobenius difference within f32 tolerance),
//!   and the singular values of the GPU result in the Muon band, checked by Cholesky
//!   factorisations of `YᵀY − lo²·I` and `hi²·I − YᵀY`.
//!
//! Each test skips with a printed reason when no GPU is usable, and fails instead when
//! `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::gpu;

use logot::backend::cuda::CudaBackend;
use logot::linalg::{
    newton_schulz, svd3_batch, GemmPrecision, GemmShape, LinalgKernels, NewtonSchulzParams,
    SyrkShape, Transpose,
};
use logot::{Backend, CpuBackend, Real};
use ndarray::{Array2, Array3, Axis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

/// Unit roundoff of `T`.
fn eps<T: Real>() -> f64 {
    if T::NAME == "float64" {
        f64::EPSILON / 2.0
    } else {
        f32::EPSILON as f64 / 2.0
    }
}

/// Round to `T` and back: test inputs exactly representable in `T`.
fn in_t<T: Real>(v: f64) -> f64 {
    T::of(v).f64()
}

fn normal(rng: &mut StdRng) -> f64 {
    rng.sample::<f64, _>(StandardNormal)
}

// ------------------------------------------------------------------------------------
// svd3
// ------------------------------------------------------------------------------------

/// Batches of `m×3` test matrices, values representable in `T`: Gaussian, scaled columns
/// (condition up to 1e4), exactly rank 2 (a column = ½·another, or zero), exactly rank 1,
/// and all zero.
fn svd3_inputs<T: Real>(rng: &mut StdRng, batch: usize, m: usize) -> Array3<f64> {
    let mut a = Array3::<f64>::zeros((batch, m, 3));
    {
        for (b, mut ab) in a.outer_iter_mut().enumerate() {
            let kind = b % 6;
            let scale = 10f64.powf(rng.random_range(-2.0..2.0));
            for i in 0..m {
                let x = [normal(rng), normal(rng), normal(rng)];
                let row = match kind {
                    0 | 1 => x,
                    2 => [x[0], 1e-2 * x[1], 1e-4 * x[2]],
                    3 => [x[0], x[1], 0.5 * x[0]],
                    4 => [x[0], 2.0 * x[0], -0.25 * x[0]],
                    _ => [0.0; 3],
                };
                for k in 0..3 {
                    ab[(i, k)] = in_t::<T>(scale * row[k]);
                }
            }
            if kind == 3 {
                // Exactly ½·column 0 (a power of two: exact in T).
                for i in 0..m {
                    ab[(i, 2)] = 0.5 * ab[(i, 0)];
                }
            }
            if kind == 4 {
                for i in 0..m {
                    ab[(i, 1)] = 2.0 * ab[(i, 0)];
                    ab[(i, 2)] = -0.25 * ab[(i, 0)];
                }
            }
        }
    }
    a
}

fn check_svd3<T: Real>(gpu: &CudaBackend, m: usize, batch: usize, seed: u64)
where
    CudaBackend: LinalgKernels<T>,
{
    let mut rng = StdRng::seed_from_u64(seed);
    let a64 = svd3_inputs::<T>(&mut rng, batch, m);
    let at = a64.mapv(T::of);
    let want = svd3_batch(&CpuBackend, a64.view()).unwrap();
    let got = svd3_batch(gpu, at.view()).unwrap();
    let e = eps::<T>();
    let tag = format!("{} m={m}", T::NAME);
    for b in 0..batch {
        let s: Vec<f64> = got.s.row(b).iter().map(|v| v.f64()).collect();
        let sw: Vec<f64> = want.s.row(b).to_vec();
        let s0 = sw[0].max(f64::MIN_POSITIVE);
        // Singular values: rounding of the f64 result to T, relative to S_0.
        for k in 0..3 {
            // (f64: the rounding of the sums of M squares, in a different order.)
            let stol = (4.0 * e + 64.0 * f64::EPSILON * (m as f64).sqrt()) * s0;
            assert!(
                (s[k] - sw[k]).abs() <= stol,
                "{tag} b={b}: S[{k}] = {} vs CPU {}",
                s[k],
                sw[k]
            );
            assert_eq!(
                s[k] == 0.0,
                sw[k] == 0.0,
                "{tag} b={b}: rank decision of S[{k}] differs ({} vs {})",
                s[k],
                sw[k]
            );
        }
        assert!(
            s[0] >= s[1] && s[1] >= s[2] && s[2] >= 0.0,
            "{tag} b={b}: S {s:?}"
        );
        let vt = got.vt.index_axis(Axis(0), b).mapv(|v| v.f64());
        let u = got.u.index_axis(Axis(0), b).mapv(|v| v.f64());
        let wvt = want.vt.index_axis(Axis(0), b);
        let wu = want.u.index_axis(Axis(0), b);
        for k in 0..3 {
            // Sign convention on the GPU result itself.
            let row = vt.row(k);
            let big = (0..3).fold(0, |bi, i| if row[i].abs() > row[bi].abs() { i } else { bi });
            assert!(row[big] > 0.0, "{tag} b={b}: sign of v_{k}: {row}");
            // Vectors are determined where S_k is separated from the others.
            let gap = (0..3)
                .filter(|&j| j != k)
                .map(|j| (sw[j] - sw[k]).abs())
                .fold(f64::INFINITY, f64::min);
            if gap > 1e-3 * s0 || s0 == f64::MIN_POSITIVE {
                // Rounding to T, and the f64 perturbation ε·(S_0/gap)² of a vector.
                let ratio = if gap > 0.0 { s0 / gap } else { 1.0 };
                let vtol = 1e3 * e + 64.0 * f64::EPSILON * (m as f64).sqrt() * ratio * ratio;
                for i in 0..3 {
                    assert!(
                        (vt[(k, i)] - wvt[(k, i)]).abs() <= vtol,
                        "{tag} b={b}: Vt[{k},{i}] = {} vs CPU {}",
                        vt[(k, i)],
                        wvt[(k, i)]
                    );
                }
                if sw[k] > 0.0 {
                    // ‖δu‖ ≲ ε·S_0/gap (perturbation), entries O(1).
                    let tol = 64.0 * e * (s0 / gap).max(s0 / sw[k]) + vtol;
                    for i in 0..m {
                        assert!(
                            (u[(i, k)] - wu[(i, k)]).abs() <= tol,
                            "{tag} b={b}: U[{i},{k}] = {} vs CPU {}",
                            u[(i, k)],
                            wu[(i, k)]
                        );
                    }
                }
            }
        }
        // Invariants: A = U·S·Vᵀ, UᵀU = I (completed columns included; zero columns
        // beyond M when M < 3), VᵀV = I.
        let a = a64.index_axis(Axis(0), b);
        let us = Array2::from_shape_fn((m, 3), |(i, k)| u[(i, k)] * s[k]);
        let rec = (&a - &us.dot(&vt))
            .iter()
            .fold(0.0f64, |x, v| x.max(v.abs()));
        let rtol = 16.0 * e * (m as f64).sqrt() * s0;
        assert!(
            rec <= rtol,
            "{tag} b={b}: reconstruction {rec:e} > {rtol:e}"
        );
        let utu = u.t().dot(&u);
        let vtv = vt.dot(&vt.t());
        for i in 0..3 {
            for j in 0..3 {
                let id_u = if i == j && i < m { 1.0 } else { 0.0 };
                let id_v = if i == j { 1.0 } else { 0.0 };
                assert!(
                    (utu[(i, j)] - id_u).abs() <= 64.0 * e * (m as f64).sqrt(),
                    "{tag} b={b}: (UᵀU)[{i},{j}] = {}",
                    utu[(i, j)]
                );
                assert!(
                    (vtv[(i, j)] - id_v).abs() <= 16.0 * e,
                    "{tag} b={b}: (VᵀV)[{i},{j}] = {}",
                    vtv[(i, j)]
                );
            }
        }
    }
}

#[test]
fn svd3_f32_every_kernel_variant_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    // Chunks of 128 rows in registers: 1 (M = 1, 2, 3, 5, 128), 2 (200), 4 (300, 509),
    // 8 (1024); re-read: 1100.
    for (i, &m) in [1usize, 2, 3, 5, 128, 200, 300, 509, 1024, 1100]
        .iter()
        .enumerate()
    {
        check_svd3::<f32>(&gpu, m, 30, 10 + i as u64);
    }
}

#[test]
fn svd3_f64_matches_cpu() {
    let Some(gpu) = gpu() else { return };
    for (i, &m) in [1usize, 2, 3, 7, 64, 333].iter().enumerate() {
        check_svd3::<f64>(&gpu, m, 18, 40 + i as u64);
    }
}

#[test]
fn svd3_zero_matrix_gives_identity_vectors() {
    let Some(gpu) = gpu() else { return };
    let a = Array3::<f32>::zeros((2, 4, 3));
    let out = svd3_batch(&gpu, a.view()).unwrap();
    assert!(out.s.iter().all(|&v| v == 0.0));
    for b in 0..2 {
        assert_eq!(out.vt.index_axis(Axis(0), b), Array2::<f32>::eye(3));
        let mut e = Array2::<f32>::zeros((4, 3));
        for k in 0..3 {
            e[(k, k)] = 1.0;
        }
        assert_eq!(out.u.index_axis(Axis(0), b), e);
    }
}

// ------------------------------------------------------------------------------------
// gemm, syrk
// ------------------------------------------------------------------------------------

/// `op(X)[i][p]` of a row-major buffer (`rows×cols` as used; stored transposed if `t`).
fn op(x: &[f64], rows: usize, cols: usize, t: Transpose, i: usize, p: usize) -> f64 {
    match t {
        Transpose::No => x[i * cols + p],
        Transpose::Yes => x[p * rows + i],
    }
}

fn gaussian<T: Real>(rng: &mut StdRng, len: usize) -> Vec<f64> {
    (0..len).map(|_| in_t::<T>(normal(rng))).collect()
}

fn check_gemm<T: Real>(gpu: &CudaBackend, m: usize, n: usize, k: usize, alpha: f64, beta: f64)
where
    CudaBackend: LinalgKernels<T>,
{
    check_gemm_at::<T>(gpu, (m, n, k), alpha, beta, GemmPrecision::Exact);
}

/// The relative rounding of one product at `precision` beyond `T`'s own: 0 for exact
/// products and for f64 (always exact), 2^-10 for TF32 (each operand rounded to 10 explicit
/// bits), 2^-20 for TF32x3 (the dropped small·small term and the small parts' rounding).
fn product_rounding<T: Real>(precision: GemmPrecision) -> f64 {
    match precision {
        _ if T::NAME == "float64" => 0.0,
        GemmPrecision::Exact => 0.0,
        GemmPrecision::Tf32x3 => 2f64.powi(-20),
        GemmPrecision::Tf32 => 2f64.powi(-10),
    }
}

/// The largest error of `C` relative to `|α|·Σ|a||b| + |β||c|` over the four transposes.
fn check_gemm_at<T: Real>(
    gpu: &CudaBackend,
    (m, n, k): (usize, usize, usize),
    alpha: f64,
    beta: f64,
    precision: GemmPrecision,
) -> f64
where
    CudaBackend: LinalgKernels<T>,
{
    let mut worst: f64 = 0.0;
    let mut rng = StdRng::seed_from_u64((m * 1_000_003 + n * 1009 + k) as u64);
    let a = gaussian::<T>(&mut rng, m * k);
    let b = gaussian::<T>(&mut rng, k * n);
    let mut c0 = gaussian::<T>(&mut rng, m * n);
    if beta == 0.0 {
        // Not read with β = 0: NaN must not propagate.
        c0.iter_mut().step_by(3).for_each(|v| *v = f64::NAN);
    }
    let cast = |v: &[f64]| v.iter().map(|&x| T::of(x)).collect::<Vec<T>>();
    let (ga, gb) = (
        gpu.upload(&cast(&a)).unwrap(),
        gpu.upload(&cast(&b)).unwrap(),
    );
    let e = eps::<T>();
    let rounding = product_rounding::<T>(precision);
    for ta in [Transpose::No, Transpose::Yes] {
        for tb in [Transpose::No, Transpose::Yes] {
            let shape = GemmShape::new(m, n, k)
                .with_transposes(ta, tb)
                .with_precision(precision);
            let mut gc = gpu.upload(&cast(&c0)).unwrap();
            gpu.gemm(shape, T::of(alpha), &ga, &gb, T::of(beta), &mut gc)
                .unwrap();
            let got = gpu.download(&gc).unwrap();
            for i in 0..m {
                for j in 0..n {
                    let (mut s, mut mag) = (0.0, 0.0);
                    for p in 0..k {
                        let x = op(&a, m, k, ta, i, p) * op(&b, k, n, tb, p, j);
                        s += x;
                        mag += x.abs();
                    }
                    let c = c0[i * n + j];
                    let (want, cmag) = if beta == 0.0 {
                        (alpha * s, 0.0)
                    } else {
                        (alpha * s + beta * c, (beta * c).abs())
                    };
                    let scale = alpha.abs() * mag + cmag;
                    let bound =
                        (k as f64 + 2.0) * e * scale + rounding * alpha.abs() * mag + 1e-300;
                    let g = got[i * n + j].f64();
                    assert!(
                        (g - want).abs() <= bound,
                        "{} gemm {precision:?} {m}×{n}×{k} {ta:?}{tb:?} α={alpha} β={beta}: C[{i},{j}] = {g} vs {want} (bound {bound:e})",
                        T::NAME
                    );
                    if scale > 0.0 {
                        worst = worst.max((g - want).abs() / scale);
                    }
                }
            }
        }
    }
    worst
}

#[test]
fn gemm_all_transposes_odd_sizes_f32() {
    let Some(gpu) = gpu() else { return };
    for &(m, n, k) in &[
        (1, 1, 1),
        (37, 53, 29),
        (130, 257, 67),
        (128, 128, 128),
        (256, 132, 260),
        (200, 5, 301),
        (3, 140, 9),
    ] {
        check_gemm::<f32>(&gpu, m, n, k, 1.0, 0.0);
        check_gemm::<f32>(&gpu, m, n, k, -1.5, 0.75);
    }
    // k = 0: C ← β·C.
    check_gemm::<f32>(&gpu, 9, 7, 0, 2.0, -0.5);
}

/// `C = A·B` of positive entries (uniform in [0.5, 1), `m×k` by `k×n`, long sums of
/// same-signed products, as the Gromov–Wasserstein cross term): the largest and the mean
/// signed error relative to the f64 product.
fn positive_sums(
    gpu: &CudaBackend,
    (m, n, k): (usize, usize, usize),
    p: GemmPrecision,
) -> (f64, f64) {
    let mut rng = StdRng::seed_from_u64(7);
    let mut uniform = |len: usize| -> Vec<f64> {
        (0..len)
            .map(|_| in_t::<f32>(rng.random_range(0.5..1.0)))
            .collect()
    };
    let (a, b) = (uniform(m * k), uniform(k * n));
    let cast = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let (ga, gb) = (
        gpu.upload(&cast(&a)).unwrap(),
        gpu.upload(&cast(&b)).unwrap(),
    );
    let mut gc = gpu.upload(&vec![0.0f32; m * n]).unwrap();
    let shape = GemmShape::new(m, n, k).with_precision(p);
    gpu.gemm(shape, 1.0, &ga, &gb, 0.0, &mut gc).unwrap();
    let got = gpu.download(&gc).unwrap();
    let (mut worst, mut sum) = (0.0f64, 0.0);
    for i in 0..m {
        for j in 0..n {
            let want: f64 = (0..k).map(|q| a[i * k + q] * b[q * n + j]).sum();
            let rel = (got[i * n + j] as f64 - want) / want;
            worst = worst.max(rel.abs());
            sum += rel;
        }
    }
    (worst, sum / (m * n) as f64)
}

#[test]
fn gemm_tensor_cores_keep_long_positive_sums_unbiased() {
    let Some(gpu) = gpu() else { return };
    let shape = (70, 90, 4000);
    let (exact, exact_mean) = positive_sums(&gpu, shape, GemmPrecision::Exact);
    let (split, split_mean) = positive_sums(&gpu, shape, GemmPrecision::Tf32x3);
    let (one, one_mean) = positive_sums(&gpu, shape, GemmPrecision::Tf32);
    println!(
        "sums of 4000 positive products, largest (mean signed) relative error: exact {exact:.2e} \
         ({exact_mean:.1e}), TF32x3 {split:.2e} ({split_mean:.1e}), TF32 {one:.2e} ({one_mean:.1e})"
    );
    // f32 rounding to nearest over 4000 additions: about √4000·2^-24 ≈ 4e-6 at most in
    // practice, unbiased; the split products stay within that, and so does their mean.
    assert!(
        exact < 1e-5 && split < 1e-5,
        "exact {exact:e}, TF32x3 {split:e}"
    );
    assert!(
        split_mean.abs() < 1e-6,
        "TF32x3 is biased by {split_mean:e}"
    );
    // One TF32 product rounds each operand to 2^-11: a sum of 4000 keeps about 2^-11/√4000.
    assert!(one < 1e-4, "TF32 {one:e}");
}

#[test]
fn gemm_tensor_cores_all_transposes_odd_sizes_f32() {
    let Some(gpu) = gpu() else { return };
    for &(m, n, k) in &[
        (1, 1, 1),
        (37, 53, 29),
        (130, 257, 67),
        (128, 128, 128),
        (200, 5, 301),
        (3, 140, 9),
        (261, 190, 1001),
    ] {
        let mut worst = [0.0f64; 2];
        for (w, p) in worst
            .iter_mut()
            .zip([GemmPrecision::Tf32x3, GemmPrecision::Tf32])
        {
            *w = check_gemm_at::<f32>(&gpu, (m, n, k), 1.0, 0.0, p);
            check_gemm_at::<f32>(&gpu, (m, n, k), -1.5, 0.75, p);
        }
        println!(
            "{m}×{n}×{k}: largest relative error TF32x3 {:.2e}, TF32 {:.2e}",
            worst[0], worst[1]
        );
        // The split products are f32-accurate: far inside TF32's rounding.
        if k >= 29 {
            assert!(
                worst[0] < 1e-5 && worst[0] * 16.0 < worst[1],
                "{m}×{n}×{k}: TF32x3 {:e}, TF32 {:e}",
                worst[0],
                worst[1]
            );
        }
    }
    check_gemm_at::<f32>(&gpu, (9, 7, 0), 2.0, -0.5, GemmPrecision::Tf32);
    // f64 keeps exact products whatever is asked.
    check_gemm_at::<f64>(&gpu, (37, 53, 29), 0.5, -2.0, GemmPrecision::Tf32);
}

#[test]
fn gemm_all_transposes_odd_sizes_f64() {
    let Some(gpu) = gpu() else { return };
    for &(m, n, k) in &[(37, 53, 29), (130, 133, 67), (128, 128, 128)] {
        check_gemm::<f64>(&gpu, m, n, k, 1.0, 0.0);
        check_gemm::<f64>(&gpu, m, n, k, 0.5, -2.0);
    }
}

fn check_syrk<T: Real>(gpu: &CudaBackend, n: usize, k: usize, alpha: f64, beta: f64)
where
    CudaBackend: LinalgKernels<T>,
{
    let mut rng = StdRng::seed_from_u64((n * 7919 + k) as u64);
    let a = gaussian::<T>(&mut rng, n * k);
    let mut c0 = gaussian::<T>(&mut rng, n * n);
    // Only the upper triangle may be read (β ≠ 0), nothing with β = 0.
    for i in 0..n {
        for j in 0..n {
            if i > j || beta == 0.0 {
                c0[i * n + j] = f64::NAN;
            }
        }
    }
    let cast = |v: &[f64]| v.iter().map(|&x| T::of(x)).collect::<Vec<T>>();
    let ga = gpu.upload(&cast(&a)).unwrap();
    let e = eps::<T>();
    for ta in [Transpose::No, Transpose::Yes] {
        let mut gc = gpu.upload(&cast(&c0)).unwrap();
        gpu.syrk(
            SyrkShape { n, k, ta },
            T::of(alpha),
            &ga,
            T::of(beta),
            &mut gc,
        )
        .unwrap();
        let got = gpu.download(&gc).unwrap();
        for i in 0..n {
            for j in 0..n {
                assert!(
                    got[i * n + j] == got[j * n + i],
                    "{} syrk {n}×{k} {ta:?}: C[{i},{j}] ≠ C[{j},{i}]",
                    T::NAME
                );
                let (mut s, mut mag) = (0.0, 0.0);
                for p in 0..k {
                    let x = op(&a, n, k, ta, i, p) * op(&a, n, k, ta, j, p);
                    s += x;
                    mag += x.abs();
                }
                let (lo, hi) = (i.min(j), i.max(j));
                let c = if beta == 0.0 { 0.0 } else { c0[lo * n + hi] };
                let want = alpha * s + beta * c;
                let bound = (k as f64 + 2.0) * e * (alpha.abs() * mag + (beta * c).abs()) + 1e-300;
                let g = got[i * n + j].f64();
                assert!(
                    (g - want).abs() <= bound,
                    "{} syrk {n}×{k} {ta:?} α={alpha} β={beta}: C[{i},{j}] = {g} vs {want}",
                    T::NAME
                );
            }
        }
    }
}

#[test]
fn syrk_exactly_symmetric_upper_tiles_f32() {
    let Some(gpu) = gpu() else { return };
    for &(n, k) in &[(1, 1), (37, 77), (129, 40), (256, 132), (300, 13)] {
        check_syrk::<f32>(&gpu, n, k, 1.0, 0.0);
        check_syrk::<f32>(&gpu, n, k, 2.0315, -4.775);
    }
}

#[test]
fn syrk_exactly_symmetric_upper_tiles_f64() {
    let Some(gpu) = gpu() else { return };
    for &(n, k) in &[(37, 77), (200, 64)] {
        check_syrk::<f64>(&gpu, n, k, 1.0, 0.0);
        check_syrk::<f64>(&gpu, n, k, 0.5, 1.5);
    }
}

/// Products of at least 2^30 multiply-adds read a transposed copy of an operand whose
/// rows run along k: odd sizes just above that, all transposes, sampled entries against
/// f64 sums (and syrk's full symmetry).
#[test]
fn large_products_through_transposed_copies() {
    let Some(gpu) = gpu() else { return };
    let (m, n, k) = (1031usize, 1027usize, 1029usize);
    let mut rng = StdRng::seed_from_u64(99);
    let a = gaussian::<f32>(&mut rng, m * k);
    let b = gaussian::<f32>(&mut rng, k * n);
    let cast = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let (ga, gb) = (
        gpu.upload(&cast(&a)).unwrap(),
        gpu.upload(&cast(&b)).unwrap(),
    );
    let e = eps::<f32>();
    let samples: Vec<(usize, usize)> = (0..400)
        .map(|_| (rng.random_range(0..m), rng.random_range(0..n)))
        .chain([(0, 0), (m - 1, n - 1), (m - 1, 0), (0, n - 1)])
        .collect();
    for ta in [Transpose::No, Transpose::Yes] {
        for tb in [Transpose::No, Transpose::Yes] {
            let mut gc = gpu.filled(m * n, f32::NAN).unwrap();
            let shape = GemmShape::new(m, n, k).with_transposes(ta, tb);
            gpu.gemm(shape, 1.0f32, &ga, &gb, 0.0, &mut gc).unwrap();
            let got = gpu.download(&gc).unwrap();
            for &(i, j) in &samples {
                let (mut s, mut mag) = (0.0, 0.0);
                for p in 0..k {
                    let x = op(&a, m, k, ta, i, p) * op(&b, k, n, tb, p, j);
                    s += x;
                    mag += x.abs();
                }
                let g = got[i * n + j] as f64;
                assert!(
                    (g - s).abs() <= (k as f64 + 2.0) * e * mag,
                    "gemm {ta:?}{tb:?}: C[{i},{j}] = {g} vs {s}"
                );
            }
        }
    }
    let (n, k) = (1031usize, 1029usize);
    for ta in [Transpose::No, Transpose::Yes] {
        let mut gc = gpu.filled(n * n, f32::NAN).unwrap();
        gpu.syrk(SyrkShape { n, k, ta }, -0.5f32, &ga, 0.0, &mut gc)
            .unwrap();
        let got = gpu.download(&gc).unwrap();
        for i in 0..n {
            for j in 0..i {
                assert!(
                    got[i * n + j] == got[j * n + i],
                    "syrk {ta:?}: C[{i},{j}] ≠ C[{j},{i}]"
                );
            }
        }
        for &(i, j) in &samples {
            let j = j.min(n - 1);
            let (mut s, mut mag) = (0.0, 0.0);
            for p in 0..k {
                let x = op(&a, n, k, ta, i, p) * op(&a, n, k, ta, j, p);
                s += x;
                mag += x.abs();
            }
            let g = got[i * n + j] as f64;
            assert!(
                (g + 0.5 * s).abs() <= (k as f64 + 2.0) * e * 0.5 * mag,
                "syrk {ta:?}: C[{i},{j}] = {g} vs {}",
                -0.5 * s
            );
        }
    }
}

// ------------------------------------------------------------------------------------
// frobenius_norm, scaled_copy
// ------------------------------------------------------------------------------------

fn norm_of<T: Real>(gpu: &CudaBackend, v: &[f64]) -> f64
where
    CudaBackend: LinalgKernels<T>,
{
    let buf = gpu
        .upload(&v.iter().map(|&x| T::of(x)).collect::<Vec<T>>())
        .unwrap();
    gpu.frobenius_norm(&buf).unwrap().f64()
}

#[test]
fn frobenius_norm_scaled_copy_shift_diagonal() {
    let Some(gpu) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(5);
    for &len in &[1usize, 5, 1000, 1 << 20] {
        let v32 = gaussian::<f32>(&mut rng, len);
        let want = v32.iter().map(|x| x * x).sum::<f64>().sqrt();
        let got = norm_of::<f32>(&gpu, &v32);
        assert!(
            (got - want).abs() <= 4.0 * eps::<f32>() * want,
            "{got} vs {want}"
        );
        let got = norm_of::<f64>(&gpu, &v32);
        assert!((got - want).abs() <= 1e-12 * want, "{got} vs {want}");
    }
    assert_eq!(norm_of::<f32>(&gpu, &[0.0; 17]), 0.0);
    assert_eq!(norm_of::<f64>(&gpu, &[0.0; 17]), 0.0);
    // No overflow: entries of 1e300 (f64) and 1e38 (f32, whose squares overflow f32).
    let big = norm_of::<f64>(&gpu, &[1e300, -1e300, 3e299, 0.0]);
    let want = 1e300 * (2.0f64 + 0.09).sqrt();
    assert!((big - want).abs() <= 1e-14 * want, "{big} vs {want}");
    let big = norm_of::<f32>(&gpu, &[in_t::<f32>(1e38), in_t::<f32>(-1e38)]);
    assert!((big - 1e38 * 2f64.sqrt()).abs() <= 1e-6 * big, "{big}");
    // Tiny entries: no underflow to 0.
    let tiny = norm_of::<f64>(&gpu, &[1e-300, 1e-300]);
    assert!(
        (tiny - 1e-300 * 2f64.sqrt()).abs() <= 1e-14 * tiny,
        "{tiny}"
    );
    // NaN and ∞ propagate.
    assert!(norm_of::<f64>(&gpu, &[1.0, f64::NAN, 2.0]).is_nan());
    assert!(norm_of::<f32>(&gpu, &[1.0, f64::NAN, 2.0]).is_nan());
    assert_eq!(
        norm_of::<f64>(&gpu, &[1.0, f64::INFINITY, -f64::INFINITY]),
        f64::INFINITY
    );
    assert_eq!(norm_of::<f32>(&gpu, &[1.0, f64::INFINITY]), f64::INFINITY);

    for &len in &[1usize, 7, 4096, 100_003] {
        let v = gaussian::<f32>(&mut rng, len);
        let src = gpu
            .upload(&v.iter().map(|&x| x as f32).collect::<Vec<f32>>())
            .unwrap();
        let mut dst = gpu.filled(len, f32::NAN).unwrap();
        gpu.scaled_copy(-0.375f32, &src, &mut dst).unwrap();
        let got = gpu.download(&dst).unwrap();
        for (g, x) in got.iter().zip(&v) {
            assert_eq!(*g, -0.375f32 * (*x as f32));
        }
        gpu.scaled_copy(1.0f32, &src, &mut dst).unwrap();
        assert_eq!(gpu.download(&dst).unwrap(), gpu.download(&src).unwrap());
    }
    let src = gpu.filled(5, 1.0f64).unwrap();
    let mut dst = gpu.filled(6, 1.0f64).unwrap();
    assert!(gpu.scaled_copy(1.0, &src, &mut dst).is_err());

    // shift_diagonal: exactly one addition on each diagonal entry, nothing else touched.
    for &n in &[1usize, 3, 257, 1500] {
        let v = gaussian::<f64>(&mut rng, n * n);
        let mut c = gpu.upload(&v).unwrap();
        gpu.shift_diagonal(n, -0.75, &mut c).unwrap();
        let got = gpu.download(&c).unwrap();
        for (i, (g, x)) in got.iter().zip(&v).enumerate() {
            let want = if i % (n + 1) == 0 { x - 0.75 } else { *x };
            assert_eq!(*g, want, "n = {n}, entry {i}");
        }
    }
    let mut c = gpu.filled(6, 1.0f32).unwrap();
    assert!(gpu.shift_diagonal(2, 1.0, &mut c).is_err());
}

// ------------------------------------------------------------------------------------
// Newton–Schulz
// ------------------------------------------------------------------------------------

/// Whether the symmetric `a` is positive definite (Cholesky succeeds).
fn positive_definite(a: &Array2<f64>) -> bool {
    let n = a.nrows();
    let mut l = Array2::<f64>::zeros((n, n));
    for j in 0..n {
        let d = a[(j, j)] - (0..j).map(|p| l[(j, p)] * l[(j, p)]).sum::<f64>();
        if d <= 0.0 {
            return false;
        }
        l[(j, j)] = d.sqrt();
        for i in j + 1..n {
            let s = a[(i, j)] - (0..j).map(|p| l[(i, p)] * l[(j, p)]).sum::<f64>();
            l[(i, j)] = s / l[(j, j)];
        }
    }
    true
}

#[test]
fn newton_schulz_f32_matches_cpu_f64_and_lies_in_band() {
    let Some(gpu) = gpu() else { return };
    let mut rng = StdRng::seed_from_u64(11);
    // Tall, wide and square-ish: Gram matrices of 1 and 2 tiles.
    for &(r, c) in &[(150usize, 97usize), (130, 260), (300, 200)] {
        let x64 = Array2::from_shape_fn((r, c), |_| in_t::<f32>(normal(&mut rng)));
        let x32 = x64.mapv(|v| v as f32);
        let params = NewtonSchulzParams::default();
        let want = newton_schulz(&CpuBackend, x64.view(), &params).unwrap();
        let got = newton_schulz(&gpu, x32.view(), &params)
            .unwrap()
            .mapv(|v| v as f64);
        let diff = (&got - &want).iter().map(|v| v * v).sum::<f64>().sqrt();
        let norm = want.iter().map(|v| v * v).sum::<f64>().sqrt();
        // Five steps of three products each, in f32: a few hundred ε relative.
        assert!(
            diff <= 1e-4 * norm,
            "{r}×{c}: ‖GPU − CPU‖ = {diff:e}, ‖CPU‖ = {norm:e}"
        );
        // Singular values of the GPU result in [0.68, 1.21] (σ/‖X‖_F ≥ 0.01 here:
        // Gaussian matrices away from square).
        let small = if r <= c {
            got.dot(&got.t())
        } else {
            got.t().dot(&got)
        };
        let n = small.nrows();
        let (lo, hi) = (0.68f64, 1.21f64);
        let above = &small - &(Array2::<f64>::eye(n) * (lo * lo));
        let below = &(Array2::<f64>::eye(n) * (hi * hi)) - &small;
        assert!(
            positive_definite(&above),
            "{r}×{c}: a singular value below {lo}"
        );
        assert!(
            positive_definite(&below),
            "{r}×{c}: a singular value above {hi}"
        );
    }
}
