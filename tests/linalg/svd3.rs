//! svd3 against independent references: matrices built from known singular values and
//! vectors (A = Q·diag(s)·Wᵀ in f64), NumPy's SVD of a fixed matrix, and the invariants
//! (reconstruction, orthonormality, descending S, the documented sign and rank-deficiency
//! conventions).

use logot::linalg::{svd3, svd3_batch, Svd3Batch};
use logot::CpuBackend;
use logot::{Error, Real};
use ndarray::{array, s, Array2, Array3, ArrayView1, ArrayView2, Axis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

/// Orthonormal `m×k` columns: Gram–Schmidt (twice) of Gaussian columns, in f64.
fn orthonormal(rng: &mut StdRng, m: usize, k: usize) -> Array2<f64> {
    let mut q = Array2::from_shape_fn((m, k), |_| rng.sample::<f64, _>(StandardNormal));
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

/// `A = Q·diag(s)·Wᵀ` with `Q` (m×3) and `W` (3×3) orthonormal.
fn with_singular_values(
    rng: &mut StdRng,
    m: usize,
    sv: [f64; 3],
) -> (Array2<f64>, Array2<f64>, Array2<f64>) {
    let q = orthonormal(rng, m, 3);
    let w = orthonormal(rng, 3, 3);
    let qs = Array2::from_shape_fn((m, 3), |(i, k)| q[(i, k)] * sv[k]);
    (qs.dot(&w.t()), q, w)
}

/// Largest entry of |A − U·diag(S)·Vᵀ|, of |UᵀU − I| (over the columns with S > 0 unless
/// `all_u`), of |VᵀV − I|, in f64.
fn residuals<T: Real>(
    a: ArrayView2<'_, T>,
    u: ArrayView2<'_, T>,
    sv: &[T],
    vt: ArrayView2<'_, T>,
) -> (f64, f64, f64) {
    let f = |x: &T| x.f64();
    let (a, u, vt) = (a.map(f), u.map(f), vt.map(f));
    let us = Array2::from_shape_fn(u.dim(), |(i, k)| u[(i, k)] * sv[k].f64());
    let rec = (&a - &us.dot(&vt))
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let eye = |n: usize| Array2::<f64>::eye(n);
    let ortho_u = (&u.t().dot(&u) - &eye(3))
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    let ortho_v = (&vt.dot(&vt.t()) - &eye(3))
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    (rec, ortho_u, ortho_v)
}

/// The documented sign convention: the largest-|·| entry of each row of Vᵀ is positive
/// (first one on ties).
fn check_signs<T: Real>(vt: ArrayView2<'_, T>) {
    for row in vt.rows() {
        let mut big = 0;
        for i in 1..3 {
            if row[i].abs() > row[big].abs() {
                big = i;
            }
        }
        assert!(row[big] > T::zero(), "sign convention violated: {row}");
    }
}

fn check_batch<T: Real>(a: &Array3<T>, out: &Svd3Batch<T>, tol_rec: f64, tol_orth: f64) {
    for b in 0..a.dim().0 {
        let sv: Vec<T> = out.s.row(b).to_vec();
        assert!(
            sv[0] >= sv[1] && sv[1] >= sv[2] && sv[2] >= T::zero(),
            "S not descending: {sv:?}"
        );
        let scale = sv[0].f64().max(f64::MIN_POSITIVE);
        let (rec, ou, ov) = residuals(
            a.index_axis(Axis(0), b),
            out.u.index_axis(Axis(0), b),
            &sv,
            out.vt.index_axis(Axis(0), b),
        );
        assert!(
            rec <= tol_rec * scale,
            "matrix {b}: reconstruction error {rec:e} > {tol_rec:e}·{scale:e}"
        );
        assert!(ou <= tol_orth, "matrix {b}: UᵀU − I = {ou:e}");
        assert!(ov <= tol_orth, "matrix {b}: VᵀV − I = {ov:e}");
        check_signs(out.vt.index_axis(Axis(0), b));
    }
}

#[test]
fn known_singular_values_f64_up_to_condition_1e6() {
    let mut rng = StdRng::seed_from_u64(7);
    for &m in &[3usize, 5, 64, 1000] {
        let conds = [1.0, 2.0, 1e2, 1e4, 1e6];
        let mut a = Array3::zeros((conds.len() * 4, m, 3));
        let mut want = Vec::new();
        let mut qs = Vec::new();
        for (b, mut ab) in a.outer_iter_mut().enumerate() {
            let kappa = conds[b % conds.len()];
            // Spread: s0 = 10^u, s2 = s0/κ, s1 geometric middle times a random factor.
            let s0 = 10f64.powf(rng.random_range(-3.0..3.0));
            let s2 = s0 / kappa;
            let s1 = s2 * kappa.powf(rng.random_range(0.2..0.8));
            let sv = [s0, s1, s2];
            let (am, q, _) = with_singular_values(&mut rng, m, sv);
            ab.assign(&am);
            want.push(sv);
            qs.push(q);
        }
        let out = svd3_batch(&CpuBackend, a.view()).unwrap();
        let eps = f64::EPSILON * (m as f64).sqrt();
        check_batch(&a, &out, 64.0 * eps, 64.0 * eps);
        for (b, sv) in want.iter().enumerate() {
            for k in 0..3 {
                // Singular values are perturbed by at most ‖δA‖₂ ~ ε·σ_max (Weyl).
                let err = (out.s[(b, k)] - sv[k]).abs();
                assert!(
                    err <= 64.0 * eps * sv[0],
                    "m={m} b={b} k={k}: S = {} vs {} ({err:e})",
                    out.s[(b, k)],
                    sv[k]
                );
            }
            // Left singular vectors match up to sign where the gaps are wide (all but κ=1, 2).
            if sv[0] / sv[2] >= 100.0 && sv[0] / sv[1] > 1.5 && sv[1] / sv[2] > 1.5 {
                for k in 0..3 {
                    let ub: ArrayView1<'_, f64> = out.u.slice(s![b, .., k]);
                    let dot = ub.dot(&qs[b].column(k)).abs();
                    assert!(
                        (dot - 1.0).abs() < 1e-9 * sv[0] / sv[k],
                        "m={m} b={b} k={k}: |u·q| = {dot}"
                    );
                }
            }
        }
    }
}

#[test]
fn known_singular_values_f32() {
    let mut rng = StdRng::seed_from_u64(11);
    let m = 1024;
    let batch = 32;
    let mut a = Array3::<f32>::zeros((batch, m, 3));
    let mut want = Vec::new();
    for mut ab in a.outer_iter_mut() {
        let sv = [
            30.0,
            rng.random_range(1.0..30.0),
            rng.random_range(0.01..1.0),
        ];
        let (am, _, _) = with_singular_values(&mut rng, m, sv);
        ab.assign(&am.mapv(|v| v as f32));
        want.push(sv);
    }
    let out = svd3_batch(&CpuBackend, a.view()).unwrap();
    let eps = f32::EPSILON as f64 * (m as f64).sqrt();
    check_batch(&a, &out, 8.0 * eps, 8.0 * eps);
    for (b, sv) in want.iter().enumerate() {
        for k in 0..3 {
            // The f32 rounding of A moves S by up to ~ε32·‖A‖.
            let err = (out.s[(b, k)] as f64 - sv[k]).abs();
            assert!(
                err <= 8.0 * eps * sv[0],
                "b={b} k={k}: S = {} vs {}",
                out.s[(b, k)],
                sv[k]
            );
        }
    }
}

/// NumPy reference for a fixed 5×3 matrix:
/// ```python
/// import numpy as np
/// A = np.array([[1,2,3],[4,5,6.5],[7,-8,9],[0.5,0.25,-1],[2,0,1]], dtype=np.float64)
/// U, S, Vt = np.linalg.svd(A, full_matrices=False)
/// ```
/// Signs differ from NumPy's by column; they are compared up to sign, and our own
/// convention is checked separately.
#[test]
fn matches_numpy_fixed_matrix() {
    let a: Array2<f64> = array![
        [1.0, 2.0, 3.0],
        [4.0, 5.0, 6.5],
        [7.0, -8.0, 9.0],
        [0.5, 0.25, -1.0],
        [2.0, 0.0, 1.0]
    ];
    let s_np = [14.791891525269486, 8.725344064508663, 1.621979056771173];
    let vt_np: Array2<f64> = array![
        [-0.5547780044165133, 0.351834192661952, -0.7539456656083007],
        [0.12160484885489417, 0.9307445153461122, 0.34485780821681916],
        [-0.823063561671035, -0.09963607793887964, 0.5591413286659714]
    ];
    let u_np: Array2<f64> = array![
        [
            -0.1428449236737501,
            0.34585080907838167,
            0.40388207585934194
        ],
        [
            -0.36240043213219714,
            0.8460087844083363,
            -0.09618866495126163
        ],
        [
            -0.9115555329520485,
            -0.4000990540915537,
            0.04187208800508992
        ],
        [
            0.03816382851382815,
            -0.00588736152672688,
            -0.6138070185493555
        ],
        [
            -0.12598129666228586,
            0.06739762943201755,
            -0.6701601911185774
        ]
    ];
    let out = svd3(a.view()).unwrap();
    for k in 0..3 {
        assert!(
            (out.s[k] - s_np[k]).abs() < 1e-13 * s_np[0],
            "S[{k}] = {} vs {}",
            out.s[k],
            s_np[k]
        );
        let sign = out.vt.row(k).dot(&vt_np.row(k)).signum();
        for i in 0..3 {
            assert!(
                (out.vt[(k, i)] - sign * vt_np[(k, i)]).abs() < 1e-13,
                "Vt[{k},{i}]"
            );
        }
        for i in 0..5 {
            assert!(
                (out.u[(i, k)] - sign * u_np[(i, k)]).abs() < 1e-13,
                "U[{i},{k}]"
            );
        }
    }
    check_signs(out.vt.view());
    // Also in f32: S to f32 rounding.
    let out32 = svd3(a.mapv(|v| v as f32).view()).unwrap();
    for k in 0..3 {
        assert!((out32.s[k] as f64 - s_np[k]).abs() < 4e-6 * s_np[0]);
    }
}

#[test]
fn rank_deficient_gives_zero_singular_values_and_orthonormal_completion() {
    let mut rng = StdRng::seed_from_u64(3);
    for sv in [[2.0, 1.0, 0.0], [5.0, 0.0, 0.0], [1.0, 1.0, 0.0]] {
        for &m in &[3usize, 4, 50] {
            let (a, _, _) = with_singular_values(&mut rng, m, sv);
            let out = svd3(a.view()).unwrap();
            let rank = sv.iter().filter(|&&v| v > 0.0).count();
            for k in rank..3 {
                assert_eq!(out.s[k], 0.0, "m={m} sv={sv:?}: S = {}", out.s);
            }
            let (rec, ou, ov) = residuals(
                a.view(),
                out.u.view(),
                out.s.as_slice().unwrap(),
                out.vt.view(),
            );
            assert!(rec < 1e-13 * sv[0], "reconstruction {rec:e}");
            assert!(ou < 1e-13 && ov < 1e-13, "orthonormality {ou:e} {ov:e}");
            check_signs(out.vt.view());
        }
    }
    // An exactly rank-2 f32 matrix (third column = first + second, exact in f32).
    let a = Array2::from_shape_fn((100, 3), |(i, j)| {
        let (p, q) = (((i * 7) % 13) as f32 - 6.0, ((i * 5) % 11) as f32 - 5.0);
        [p, q, p + q][j]
    });
    let out = svd3(a.view()).unwrap();
    assert_eq!(out.s[2], 0.0);
    let (rec, ou, _) = residuals(
        a.view(),
        out.u.view(),
        out.s.as_slice().unwrap(),
        out.vt.view(),
    );
    assert!(rec < 1e-5 * out.s[0] as f64 && ou < 1e-6, "{rec:e} {ou:e}");
}

#[test]
fn all_zero_input_is_documented_identity_completion() {
    let a = Array3::<f32>::zeros((2, 5, 3));
    let out = svd3_batch(&CpuBackend, a.view()).unwrap();
    assert!(out.s.iter().all(|&v| v == 0.0));
    for b in 0..2 {
        assert_eq!(out.vt.index_axis(Axis(0), b), Array2::<f32>::eye(3));
        let mut want = Array2::<f32>::zeros((5, 3));
        want.slice_mut(s![0..3, ..]).assign(&Array2::eye(3));
        assert_eq!(out.u.index_axis(Axis(0), b), want);
    }
}

#[test]
fn fewer_than_three_rows_give_zero_columns() {
    // M = 2: rank ≤ 2, the third column of U is zero and S[2] = 0.
    let a: Array2<f64> = array![[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]];
    let out = svd3(a.view()).unwrap();
    assert_eq!(out.s[2], 0.0);
    assert!(out.u.column(2).iter().all(|&v| v == 0.0));
    let u2 = out.u.slice(s![.., 0..2]);
    assert!((&u2.t().dot(&u2) - &Array2::<f64>::eye(2))
        .iter()
        .all(|v| v.abs() < 1e-14));
    let (rec, _, ov) = residuals(
        a.view(),
        out.u.view(),
        out.s.as_slice().unwrap(),
        out.vt.view(),
    );
    assert!(rec < 1e-14 * out.s[0] && ov < 1e-14);
    // M = 1: one singular value, the norm of the row.
    let a = array![[3.0f32, 0.0, 4.0]];
    let out = svd3(a.view()).unwrap();
    assert_eq!(out.s, array![5.0f32, 0.0, 0.0]);
    assert_eq!(out.u, array![[1.0f32, 0.0, 0.0]]);
    assert!((out.vt[(0, 0)] - 0.6).abs() < 1e-7 && (out.vt[(0, 2)] - 0.8).abs() < 1e-7);
}

#[test]
fn extreme_magnitudes_do_not_overflow() {
    let base: Array2<f64> = array![
        [1.0, 2.0, 3.0],
        [4.0, 5.0, 6.5],
        [7.0, -8.0, 9.0],
        [0.5, 0.25, -1.0]
    ];
    let reference = svd3(base.view()).unwrap();
    for scale in [1e-300, 1e-150, 1e150, 1e300] {
        let out = svd3((&base * scale).view()).unwrap();
        for k in 0..3 {
            let rel = (out.s[k] / scale - reference.s[k]).abs() / reference.s[0];
            assert!(
                rel < 1e-14,
                "scale {scale:e}: S[{k}] relative error {rel:e}"
            );
        }
        assert!((&out.u - &reference.u).iter().all(|v| v.abs() < 1e-13));
    }
    // f32 near its largest value.
    let big = base.mapv(|v| (v * 1e37) as f32);
    let out = svd3(big.view()).unwrap();
    assert!(
        out.s.iter().all(|v| v.is_finite())
            && (out.s[0] as f64 / 1e37 - reference.s[0]).abs() < 1e-5 * reference.s[0]
    );
}

#[test]
fn strided_input_equals_contiguous() {
    let mut rng = StdRng::seed_from_u64(5);
    let a = Array2::from_shape_fn((3, 40), |_| rng.sample::<f64, _>(StandardNormal));
    let at = a.t(); // 40×3, column-major view
    let out = svd3(at).unwrap();
    let out_c = svd3(at.to_owned().view()).unwrap();
    assert_eq!(out.s, out_c.s);
    assert_eq!(out.u, out_c.u);
}

#[test]
fn invalid_inputs_are_errors() {
    let a = Array3::<f64>::zeros((2, 4, 2));
    assert!(matches!(
        svd3_batch(&CpuBackend, a.view()),
        Err(Error::Shape { .. })
    ));
    let a = Array3::<f64>::zeros((0, 4, 3));
    assert!(matches!(
        svd3_batch(&CpuBackend, a.view()),
        Err(Error::Empty { .. })
    ));
    let a = Array2::<f32>::zeros((0, 3));
    assert!(matches!(svd3(a.view()), Err(Error::Empty { .. })));
    let mut a = Array2::<f64>::ones((4, 3));
    a[(2, 1)] = f64::NAN;
    let err = svd3(a.view()).unwrap_err();
    assert!(
        matches!(err, Error::NonFinite { .. }) && err.to_string().contains("a:"),
        "{err}"
    );
}
