//! Alignment: Kabsch and orthogonal Procrustes recover known transforms from known
//! couplings; Kabsch's rotation beats random rotations on the weighted objective and is
//! proper (det = +1) even for mirrored targets; Wasserstein–Procrustes recovers a known
//! rotation from a shuffled, noisy copy of a cloud.

use logot::linalg::align::rotation_angle;
use logot::linalg::{
    kabsch, orthogonal_procrustes, wasserstein_procrustes, Init, NewtonSchulzParams,
    ProcrustesMethod, WassersteinProcrustesParams,
};
use logot::CpuBackend;
use logot::{Error, Real};
use ndarray::{array, Array1, Array2, ArrayView2};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;

/// Rodrigues: rotation by `angle` about the unit axis `k`.
fn rotation(axis: [f64; 3], angle: f64) -> Array2<f64> {
    let n = axis.iter().map(|v| v * v).sum::<f64>().sqrt();
    let k = axis.map(|v| v / n);
    let kx = array![[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]];
    Array2::eye(3) + &kx * angle.sin() + kx.dot(&kx) * (1.0 - angle.cos())
}

fn random_rotation(rng: &mut StdRng) -> Array2<f64> {
    let axis = [0, 1, 2].map(|_| rng.sample::<f64, _>(StandardNormal));
    rotation(axis, rng.random_range(0.0..std::f64::consts::PI))
}

fn det3(a: ArrayView2<'_, f64>) -> f64 {
    a[(0, 0)] * (a[(1, 1)] * a[(2, 2)] - a[(1, 2)] * a[(2, 1)])
        - a[(0, 1)] * (a[(1, 0)] * a[(2, 2)] - a[(1, 2)] * a[(2, 0)])
        + a[(0, 2)] * (a[(1, 0)] * a[(2, 1)] - a[(1, 1)] * a[(2, 0)])
}

/// An anisotropic Gaussian cloud (standard deviations 3, 2, 1), so that its principal
/// axes are well defined.
fn cloud(rng: &mut StdRng, n: usize) -> Array2<f64> {
    let sd = [3.0, 2.0, 1.0];
    Array2::from_shape_fn((n, 3), |(_, c)| {
        sd[c] * rng.sample::<f64, _>(StandardNormal)
    })
}

/// `Σ_ij P_ij ‖R·x_i + t − y_j‖²`.
fn objective(
    x: &Array2<f64>,
    y: &Array2<f64>,
    p: &Array2<f64>,
    r: &Array2<f64>,
    t: &Array1<f64>,
) -> f64 {
    let xr = x.dot(&r.t()) + t;
    let mut s = 0.0;
    for i in 0..x.nrows() {
        for j in 0..y.nrows() {
            s += p[(i, j)] * (&xr.row(i) - &y.row(j)).mapv(|v| v * v).sum();
        }
    }
    s
}

#[test]
fn kabsch_recovers_rotation_and_translation_from_matching_plan() {
    let mut rng = StdRng::seed_from_u64(1);
    let n = 50;
    let x = cloud(&mut rng, n);
    let r = random_rotation(&mut rng);
    let t = array![1.0, -2.0, 0.5];
    let y_ordered = x.dot(&r.t()) + &t;
    // Shuffle y; the plan follows the permutation.
    let mut perm: Vec<usize> = (0..n).collect();
    perm.shuffle(&mut rng);
    let mut y = Array2::zeros((n, 3));
    let mut plan = Array2::zeros((n, n));
    for (i, &pi) in perm.iter().enumerate() {
        y.row_mut(pi).assign(&y_ordered.row(i));
        plan[(i, pi)] = 1.0 / n as f64;
    }
    let fit = kabsch(x.view(), y.view(), plan.view(), true).unwrap();
    assert!(
        (&fit.rotation - &r).iter().all(|v| v.abs() < 1e-12),
        "{}",
        fit.rotation
    );
    assert!((&fit.translation - &t).iter().all(|v| v.abs() < 1e-12));
    assert!((det3(fit.rotation.view()) - 1.0).abs() < 1e-12);
    let moved = fit.apply(x.view()).unwrap();
    assert!((&moved - &y_ordered).iter().all(|v| v.abs() < 1e-11));
    // f32: to f32 rounding.
    let fit32 = kabsch(
        x.mapv(|v| v as f32).view(),
        y.mapv(|v| v as f32).view(),
        plan.mapv(|v| v as f32).view(),
        true,
    )
    .unwrap();
    assert!(rotation_angle(fit32.rotation.view(), r.mapv(|v| v as f32).view()).unwrap() < 1e-5);
}

#[test]
fn kabsch_is_proper_for_mirrored_target_and_beats_random_rotations() {
    let mut rng = StdRng::seed_from_u64(2);
    let (n, m) = (30, 25);
    let x = cloud(&mut rng, n);
    // A mirrored, partly matched target: the best orthogonal map would be a reflection.
    let mirror = array![[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, -1.0]];
    let y = x.slice(ndarray::s![..m, ..]).dot(&mirror)
        + &Array2::from_shape_fn((m, 3), |_| 0.1 * rng.sample::<f64, _>(StandardNormal));
    let plan = Array2::from_shape_fn((n, m), |(i, j)| {
        if i == j {
            1.0
        } else {
            0.05 * rng.random::<f64>()
        }
    });
    let fit = kabsch(x.view(), y.view(), plan.view(), true).unwrap();
    assert!(
        (det3(fit.rotation.view()) - 1.0).abs() < 1e-12,
        "det = {}",
        det3(fit.rotation.view())
    );
    assert!(
        (fit.rotation.t().dot(&fit.rotation) - Array2::<f64>::eye(3))
            .iter()
            .all(|v| v.abs() < 1e-12)
    );
    let best = objective(&x, &y, &plan, &fit.rotation, &fit.translation);
    for _ in 0..2000 {
        let r = random_rotation(&mut rng);
        // With the optimal translation for that rotation: t = ȳ − R·x̄ (plan-weighted).
        let (a, b) = (
            plan.sum_axis(ndarray::Axis(1)),
            plan.sum_axis(ndarray::Axis(0)),
        );
        let xbar = x.t().dot(&a) / a.sum();
        let ybar = y.t().dot(&b) / b.sum();
        let t = &ybar - &r.dot(&xbar);
        assert!(objective(&x, &y, &plan, &r, &t) >= best - 1e-9);
    }
    // Without centring the translation is zero.
    let fit0 = kabsch(x.view(), y.view(), plan.view(), false).unwrap();
    assert!(fit0.translation.iter().all(|&v| v == 0.0));
}

#[test]
fn orthogonal_procrustes_recovers_orthogonal_map_in_8d() {
    let mut rng = StdRng::seed_from_u64(3);
    let (n, d) = (60, 8);
    let x = Array2::from_shape_fn((n, d), |_| rng.sample::<f64, _>(StandardNormal));
    // A random orthogonal matrix with det = −1 (Procrustes over O(d) allows it).
    let mut q = Array2::from_shape_fn((d, d), |_| rng.sample::<f64, _>(StandardNormal));
    for j in 0..d {
        for _ in 0..2 {
            for i in 0..j {
                let dd = q.column(i).dot(&q.column(j));
                let qi = q.column(i).to_owned();
                q.column_mut(j).scaled_add(-dd, &qi);
            }
        }
        let nn = q.column(j).dot(&q.column(j)).sqrt();
        q.column_mut(j).mapv_inplace(|v| v / nn);
    }
    q.column_mut(0).mapv_inplace(|v| -v);
    let y = x.dot(&q.t());
    let plan = Array2::eye(n) / n as f64;
    let fit = orthogonal_procrustes(
        x.view(),
        y.view(),
        plan.view(),
        false,
        &NewtonSchulzParams::default().polar(),
    )
    .unwrap();
    let err = (&fit.rotation - &q)
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(err < 1e-10, "{err:e}");
}

fn recover_rotation<T: Real>(seed: u64, tol_angle: f64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = 150;
    let x = cloud(&mut rng, n);
    let r = rotation([1.0, 2.0, -0.5], 2.2); // 126°: identity start alone would not do
    let t = array![5.0, -3.0, 2.0];
    let mut y = x.dot(&r.t())
        + &t
        + &Array2::from_shape_fn((n, 3), |_| 0.02 * rng.sample::<f64, _>(StandardNormal));
    let mut rows: Vec<Array1<f64>> = y.rows().into_iter().map(|r| r.to_owned()).collect();
    rows.shuffle(&mut rng);
    for (i, row) in rows.iter().enumerate() {
        y.row_mut(i).assign(row);
    }
    let (xt, yt) = (x.mapv(T::of), y.mapv(T::of));
    let res = wasserstein_procrustes(
        &CpuBackend,
        xt.view(),
        yt.view(),
        &WassersteinProcrustesParams::default(),
    )
    .unwrap();
    let got = res.transform.rotation.mapv(|v| v.f64());
    let angle = rotation_angle(got.view(), r.view()).unwrap();
    assert!(
        angle < tol_angle,
        "{}: angle error {angle:e} rad (start {})",
        T::NAME,
        res.start
    );
    assert!((det3(got.view()) - 1.0).abs() < 1e-5);
    let terr = res
        .transform
        .translation
        .iter()
        .zip(t.iter())
        .fold(0.0f64, |m, (a, b)| m.max((a.f64() - b).abs()));
    assert!(terr < 0.05, "translation error {terr}");
    assert!(res.converged, "{} outer iterations", res.iterations);
    // The plan has the uniform marginals.
    let rows = res.plan.sum_axis(ndarray::Axis(1));
    assert!(rows.iter().all(|v| (v.f64() * n as f64 - 1.0).abs() < 1e-3));
}

#[test]
fn wasserstein_procrustes_recovers_rotation_of_shuffled_noisy_cloud_f64() {
    recover_rotation::<f64>(4, 0.01);
}

#[test]
fn wasserstein_procrustes_recovers_rotation_of_shuffled_noisy_cloud_f32() {
    recover_rotation::<f32>(5, 0.01);
}

#[test]
fn wasserstein_procrustes_orthogonal_variant_in_5d() {
    let mut rng = StdRng::seed_from_u64(6);
    let (n, d) = (100, 5);
    let sd = [5.0, 4.0, 3.0, 2.0, 1.0];
    let x = Array2::from_shape_fn((n, d), |(_, c)| {
        sd[c] * rng.sample::<f64, _>(StandardNormal)
    });
    // A moderate rotation in the (0,1) and (2,3) planes; the identity start reaches it.
    let (c1, s1, c2, s2) = (0.5f64.cos(), 0.5f64.sin(), 0.3f64.cos(), 0.3f64.sin());
    let q = array![
        [c1, -s1, 0.0, 0.0, 0.0],
        [s1, c1, 0.0, 0.0, 0.0],
        [0.0, 0.0, c2, -s2, 0.0],
        [0.0, 0.0, s2, c2, 0.0],
        [0.0, 0.0, 0.0, 0.0, 1.0]
    ];
    let mut y = x.dot(&q.t());
    let mut rows: Vec<Array1<f64>> = y.rows().into_iter().map(|r| r.to_owned()).collect();
    rows.shuffle(&mut rng);
    for (i, row) in rows.iter().enumerate() {
        y.row_mut(i).assign(row);
    }
    let params = WassersteinProcrustesParams::default().method(ProcrustesMethod::NewtonSchulz);
    let res = wasserstein_procrustes(&CpuBackend, x.view(), y.view(), &params).unwrap();
    let err = (&res.transform.rotation - &q)
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(err < 1e-2, "max |R − Q| = {err:e}");
    let orth = (res.transform.rotation.t().dot(&res.transform.rotation) - Array2::<f64>::eye(d))
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(orth < 1e-10, "RᵀR − I = {orth:e}");
}

#[test]
fn invalid_inputs_are_errors() {
    let x = Array2::<f64>::zeros((4, 3));
    let y = Array2::<f64>::zeros((5, 3));
    let plan = Array2::<f64>::zeros((4, 4));
    assert!(matches!(
        kabsch(x.view(), y.view(), plan.view(), true),
        Err(Error::Shape { .. })
    ));
    let mut plan = Array2::<f64>::ones((4, 5));
    plan[(1, 1)] = -1.0;
    assert!(matches!(
        kabsch(x.view(), y.view(), plan.view(), true),
        Err(Error::NegativeMass { .. })
    ));
    let plan = Array2::<f64>::zeros((4, 5));
    assert!(matches!(
        kabsch(x.view(), y.view(), plan.view(), true),
        Err(Error::ZeroMass { .. })
    ));
    let x4 = Array2::<f64>::zeros((4, 4));
    let y4 = Array2::<f64>::zeros((5, 4));
    let plan = Array2::<f64>::ones((4, 5));
    assert!(matches!(
        kabsch(x4.view(), y4.view(), plan.view(), true),
        Err(Error::Shape { .. })
    ));
    let params = WassersteinProcrustesParams::default().method(ProcrustesMethod::Kabsch);
    assert!(matches!(
        wasserstein_procrustes(&CpuBackend, x4.view(), y4.view(), &params),
        Err(Error::Shape { .. })
    ));
    let params = WassersteinProcrustesParams::default().eps(0.0);
    assert!(matches!(
        wasserstein_procrustes(&CpuBackend, x.view(), y.view(), &params),
        Err(Error::Parameter { .. })
    ));
    let params = WassersteinProcrustesParams::default().init(Init::Given(vec![Array2::eye(2)]));
    assert!(matches!(
        wasserstein_procrustes(&CpuBackend, x.view(), y.view(), &params),
        Err(Error::Shape { .. })
    ));
    let mut bad = x.clone();
    bad[(0, 0)] = f64::NAN;
    assert!(matches!(
        wasserstein_procrustes(&CpuBackend, bad.view(), y.view(), &Default::default()),
        Err(Error::NonFinite { .. })
    ));
}
