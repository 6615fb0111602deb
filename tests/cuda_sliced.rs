//! 1-D and sliced Wasserstein on the GPU (`CudaBackend::sliced_wasserstein_distance`,
//! `sliced_wasserstein_grad`, `max_sliced_wasserstein_*`, `wasserstein_1d_batch`): values
//! equal to the CPU's f64 path to 1e-12 relative on weighted and uniform clouds, n ≠ m,
//! duplicated points (ties), n = 1, sizes beyond one block's shared-memory sort, p = 1, 1.5,
//! 2, in f64 and f32 inputs (both computed in f64 on either side, so the same tolerance);
//! the closed form of a translation; gradients against the CPU's and against central
//! finite differences of the GPU's own value; max-sliced over given directions; bitwise
//! repeatable results; errors naming the argument. Each test skips with a printed reason
//! when no GPU is usable, and fails instead when `LOGOT_REQUIRE_GPU=1`.
#![cfg(feature = "cuda")]

mod common;
use common::gpu::gpu;
use common::Lcg;

use logot::exact::{self, MaxSlicedSearch, Projections};
use logot::Real;
use ndarray::{Array1, Array2};

fn rel(x: f64, y: f64) -> f64 {
    (x - y).abs() / x.abs().max(y.abs()).max(f64::MIN_POSITIVE)
}

/// Largest entrywise difference relative to the largest entry of `want`.
fn rel_max(got: &Array2<f64>, want: &Array2<f64>) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    got.iter()
        .zip(want)
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()))
        / scale
}

/// A seeded Gaussian cloud (`n×d`), shifted by `shift` and scaled by `scale`.
fn cloud(n: usize, d: usize, seed: u64, shift: f64, scale: f64) -> Array2<f64> {
    let mut r = Lcg(seed);
    Array2::from_shape_fn((n, d), |_| shift + scale * r.normal())
}

/// Seeded positive weights of total `mass`.
fn weights(n: usize, seed: u64, mass: f64) -> Array1<f64> {
    let mut r = Lcg(seed);
    let w = Array1::from_shape_fn(n, |_| r.uniform(0.1, 1.0));
    let s = w.sum();
    w.mapv(|v| v * mass / s)
}

/// A case: GPU values (distance and every projected `W_p^p`) against the CPU's f64 path.
#[allow(clippy::too_many_arguments)]
fn values_match<T: Real>(
    x: &Array2<f64>,
    y: &Array2<f64>,
    a: Option<&Array1<f64>>,
    b: Option<&Array1<f64>>,
    proj: &Projections<'_>,
    p: f64,
    tol: f64,
    what: &str,
) {
    let Some(gpu) = gpu() else { return };
    let (x, y) = (x.mapv(T::of), y.mapv(T::of));
    let (a, b) = (a.map(|w| w.mapv(T::of)), b.map(|w| w.mapv(T::of)));
    let (av, bv) = (a.as_ref().map(|w| w.view()), b.as_ref().map(|w| w.view()));
    let want = exact::sliced_wasserstein_distance(x.view(), y.view(), av, bv, proj, p).unwrap();
    let got = gpu
        .sliced_wasserstein_distance(x.view(), y.view(), av, bv, proj, p)
        .unwrap();
    assert!(
        rel(got.distance, want.distance) <= tol,
        "{what} p = {p}: distance {} against the CPU's {}",
        got.distance,
        want.distance
    );
    let scale = want.projected.iter().fold(0.0f64, |m, v| m.max(*v));
    for (l, (g, w)) in got.projected.iter().zip(&want.projected).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1e-3 * scale),
            "{what} p = {p}: direction {l}: {g} against the CPU's {w}"
        );
    }
}

#[test]
fn weighted_clouds_of_different_sizes_equal_the_cpu() {
    let (x, y) = (cloud(300, 5, 1, 0.0, 1.0), cloud(200, 5, 2, 0.5, 2.0));
    let (a, b) = (weights(300, 3, 1.0), weights(200, 4, 1.0));
    let proj = Projections::Random { count: 24, seed: 5 };
    for p in [1.0, 1.5, 2.0] {
        values_match::<f64>(&x, &y, Some(&a), Some(&b), &proj, p, 1e-12, "weighted");
        values_match::<f64>(&x, &y, None, Some(&b), &proj, p, 1e-12, "one side weighted");
        values_match::<f64>(&x, &y, None, None, &proj, p, 1e-12, "uniform n ≠ m");
        values_match::<f32>(&x, &y, Some(&a), Some(&b), &proj, p, 1e-12, "f32 weighted");
    }
    // Masses equal within the tolerance: b is scaled to a's mass, as on the CPU.
    let b2 = b.mapv(|v| v * (1.0 + 3e-7));
    values_match::<f64>(&x, &y, Some(&a), Some(&b2), &proj, 2.0, 1e-12, "rescaled b");
}

#[test]
fn uniform_equal_sizes_and_zero_weights_equal_the_cpu() {
    let (x, y) = (cloud(257, 3, 6, 0.0, 1.0), cloud(257, 3, 7, 1.0, 0.5));
    let proj = Projections::Random { count: 16, seed: 1 };
    let mut a = weights(257, 8, 1.0);
    let mut b = weights(257, 9, 1.0);
    // Zero-mass points on both sides.
    for k in [0, 5, 100, 256] {
        a[k] = 0.0;
        b[k] = 0.0;
    }
    let (sa, sb) = (a.sum(), b.sum());
    let (a, b) = (a / sa, b / sb);
    for p in [1.0, 1.5, 2.0] {
        values_match::<f64>(&x, &y, None, None, &proj, p, 1e-12, "uniform n = m");
        values_match::<f32>(&x, &y, None, None, &proj, p, 1e-12, "f32 uniform n = m");
        values_match::<f64>(&x, &y, Some(&a), Some(&b), &proj, p, 1e-12, "zero weights");
    }
}

#[test]
fn ties_and_single_points_equal_the_cpu() {
    // Duplicated points within each cloud and shared between them, on integer coordinates
    // (many equal projections along the axes).
    let mut r = Lcg(11);
    let base = Array2::from_shape_fn((40, 3), |_| (r.next() * 5.0).floor());
    let x = Array2::from_shape_fn((160, 3), |(i, t)| base[[i % 40, t]]);
    let y = Array2::from_shape_fn((120, 3), |(i, t)| base[[(i * 7) % 40, t]] + (i % 2) as f64);
    let axes = ndarray::array![
        [1.0, 0.0, 0.0, 0.6],
        [0.0, 1.0, 0.0, 0.8],
        [0.0, 0.0, 1.0, 0.0]
    ];
    let given = Projections::Given(axes.view());
    let (a, b) = (weights(160, 12, 2.0), weights(120, 13, 2.0));
    for p in [1.0, 1.5, 2.0] {
        values_match::<f64>(&x, &y, None, None, &given, p, 1e-12, "ties");
        values_match::<f64>(
            &x,
            &y,
            Some(&a),
            Some(&b),
            &given,
            p,
            1e-12,
            "weighted ties",
        );
        values_match::<f64>(&x, &x, None, None, &given, p, 1e-12, "identical clouds");
    }
    let proj = Projections::Random { count: 9, seed: 3 };
    let one = cloud(1, 4, 14, 0.0, 1.0);
    let many = cloud(1000, 4, 15, 0.0, 1.0);
    for p in [1.0, 1.5, 2.0] {
        values_match::<f64>(
            &one,
            &one.mapv(|v| v + 1.0),
            None,
            None,
            &proj,
            p,
            1e-12,
            "1 ↔ 1",
        );
        values_match::<f64>(&one, &many, None, None, &proj, p, 1e-12, "1 ↔ 1000");
        values_match::<f64>(&many, &one, None, None, &proj, p, 1e-12, "1000 ↔ 1");
    }
}

#[test]
fn sorts_longer_than_a_block_equal_the_cpu() {
    // 5000 and 3001 points: the bitonic sort's global strides; 70 000: several sizes of them.
    let (x, y) = (cloud(5000, 6, 21, 0.0, 1.0), cloud(3001, 6, 22, 0.3, 1.2));
    let (a, b) = (weights(5000, 23, 1.0), weights(3001, 24, 1.0));
    let proj = Projections::Random { count: 12, seed: 2 };
    for p in [1.0, 1.5, 2.0] {
        values_match::<f64>(&x, &y, Some(&a), Some(&b), &proj, p, 1e-12, "5000 ↔ 3001");
    }
    let (x, y) = (
        cloud(70_000, 3, 25, 0.0, 1.0),
        cloud(65_537, 3, 26, 0.1, 1.0),
    );
    values_match::<f64>(&x, &y, None, None, &proj, 2.0, 1e-12, "70000 ↔ 65537");
    values_match::<f32>(&x, &x, None, None, &proj, 1.0, 1e-12, "70000 ↔ itself");
}

/// A translation by t: every direction θ sees the same sorted points moved by ⟨θ, t⟩, so
/// W_p^p(θ) = |⟨θ, t⟩|^p exactly (the closed form, independent of the CPU).
#[test]
fn a_translation_has_its_closed_form() {
    let Some(gpu) = gpu() else { return };
    let x = cloud(3000, 3, 31, 0.0, 1.0);
    let t = [0.75, -2.0, 1.25];
    let y = Array2::from_shape_fn((3000, 3), |(i, k)| x[[i, k]] + t[k]);
    let dirs = exact::sliced::random_directions(3, 20, 4);
    let given = dirs.t().to_owned();
    for p in [1.0, 1.5, 2.0, 3.0] {
        let r = gpu
            .sliced_wasserstein_distance(
                x.view(),
                y.view(),
                None,
                None,
                &Projections::Given(given.view()),
                p,
            )
            .unwrap();
        for (l, w) in r.projected.iter().enumerate() {
            let s: f64 = (0..3).map(|k| dirs[[l, k]] * t[k]).sum();
            assert!(
                rel(*w, s.abs().powf(p)) <= 1e-9,
                "p = {p}, direction {l}: {w}"
            );
        }
    }
}

#[test]
fn gradients_equal_the_cpu_and_finite_differences() {
    let Some(gpu) = gpu() else { return };
    let (x, y) = (cloud(60, 4, 41, 0.0, 1.0), cloud(45, 4, 42, 0.5, 1.5));
    let (a, b) = (weights(60, 43, 1.0), weights(45, 44, 1.0));
    let proj = Projections::Random { count: 10, seed: 7 };
    for p in [1.0, 1.5, 2.0] {
        for weighted in [false, true] {
            let (av, bv) = if weighted {
                (Some(a.view()), Some(b.view()))
            } else {
                (None, None)
            };
            let want =
                exact::sliced_wasserstein_grad(x.view(), y.view(), av, bv, &proj, p).unwrap();
            let got = gpu
                .sliced_wasserstein_grad(x.view(), y.view(), av, bv, &proj, p)
                .unwrap();
            assert!(rel(got.distance, want.distance) <= 1e-12);
            assert!(rel_max(&got.grad_x_s, &want.grad_x_s) <= 1e-12, "p = {p}");
            assert!(rel_max(&got.grad_x_t, &want.grad_x_t) <= 1e-12, "p = {p}");
            // Central differences of the GPU's own distance along a few coordinates.
            let h = 1e-6;
            let sw = |x: &Array2<f64>, y: &Array2<f64>| {
                gpu.sliced_wasserstein_distance(x.view(), y.view(), av, bv, &proj, p)
                    .unwrap()
                    .distance
            };
            let gscale = got.grad_x_s.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            for (i, k) in [(0, 0), (17, 3), (59, 1)] {
                let (mut xp, mut xm) = (x.clone(), x.clone());
                xp[[i, k]] += h;
                xm[[i, k]] -= h;
                let fd = (sw(&xp, &y) - sw(&xm, &y)) / (2.0 * h);
                assert!(
                    (fd - got.grad_x_s[[i, k]]).abs() <= 1e-6 * gscale,
                    "p = {p}, x[{i}, {k}]: {fd} against {}",
                    got.grad_x_s[[i, k]]
                );
            }
            for (j, k) in [(0, 2), (44, 0)] {
                let (mut yp, mut ym) = (y.clone(), y.clone());
                yp[[j, k]] += h;
                ym[[j, k]] -= h;
                let fd = (sw(&x, &yp) - sw(&x, &ym)) / (2.0 * h);
                assert!(
                    (fd - got.grad_x_t[[j, k]]).abs() <= 1e-6 * gscale,
                    "p = {p}, y[{j}, {k}]: {fd} against {}",
                    got.grad_x_t[[j, k]]
                );
            }
        }
    }
    // Gradients of clouds longer than a block's sort, against the CPU.
    let (x, y) = (cloud(5000, 3, 45, 0.0, 1.0), cloud(4100, 3, 46, 0.2, 1.0));
    let want = exact::sliced_wasserstein_grad(x.view(), y.view(), None, None, &proj, 2.0).unwrap();
    let got = gpu
        .sliced_wasserstein_grad(x.view(), y.view(), None, None, &proj, 2.0)
        .unwrap();
    assert!(rel(got.distance, want.distance) <= 1e-12);
    assert!(rel_max(&got.grad_x_s, &want.grad_x_s) <= 1e-12);
    assert!(rel_max(&got.grad_x_t, &want.grad_x_t) <= 1e-12);
}

#[test]
fn max_sliced_over_given_directions_equals_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let (x, y) = (cloud(500, 3, 51, 0.0, 1.0), cloud(400, 3, 52, 0.0, 1.0));
    // Stretch y along the second axis: the best of the axes is that one.
    let y = Array2::from_shape_fn((400, 3), |(j, k)| {
        y[[j, k]] * if k == 1 { 3.0 } else { 1.0 }
    });
    let dirs = ndarray::array![
        [1.0, 0.0, 0.0, 0.6],
        [0.0, 1.0, 0.0, 0.8],
        [0.0, 0.0, 1.0, 0.0]
    ];
    let given = Projections::Given(dirs.view());
    let b = weights(400, 53, 1.0);
    for p in [1.0, 1.5, 2.0] {
        let how = MaxSlicedSearch::Projections;
        let want = exact::max_sliced_wasserstein_distance(
            x.view(),
            y.view(),
            None,
            Some(b.view()),
            &given,
            p,
            how,
        )
        .unwrap();
        let got = gpu
            .max_sliced_wasserstein_distance(
                x.view(),
                y.view(),
                None,
                Some(b.view()),
                &given,
                p,
                how,
            )
            .unwrap();
        assert_eq!(got.direction, ndarray::array![0.0, 1.0, 0.0]);
        assert_eq!(got.direction, want.direction);
        assert!(rel(got.distance, want.distance) <= 1e-12);
        for (g, w) in got.projected.iter().zip(&want.projected) {
            assert!(rel(*g, *w) <= 1e-12);
        }
        let (wm, wg) = exact::max_sliced_wasserstein_grad(
            x.view(),
            y.view(),
            None,
            Some(b.view()),
            &given,
            p,
            how,
        )
        .unwrap();
        let (gm, gg) = gpu
            .max_sliced_wasserstein_grad(x.view(), y.view(), None, Some(b.view()), &given, p, how)
            .unwrap();
        assert_eq!(gm.direction, wm.direction);
        assert!(rel(gg.distance, wg.distance) <= 1e-12);
        assert!(rel_max(&gg.grad_x_s, &wg.grad_x_s) <= 1e-12);
        assert!(rel_max(&gg.grad_x_t, &wg.grad_x_t) <= 1e-12);
    }
}

#[test]
fn batches_of_lines_equal_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut r = Lcg(61);
    let (bsz, n, m) = (7, 3000, 2500);
    let u = Array2::from_shape_fn((bsz, n), |_| r.normal());
    // Ties: values on a coarse grid.
    let v = Array2::from_shape_fn((bsz, m), |_| (r.normal() * 4.0).round() / 4.0 + 0.5);
    let wu = Array2::from_shape_fn((bsz, n), |_| r.uniform(0.0, 1.0));
    let wv = Array2::from_shape_fn((bsz, m), |_| r.uniform(0.0, 1.0));
    let (su, sv) = (wu.sum_axis(ndarray::Axis(1)), wv.sum_axis(ndarray::Axis(1)));
    let wu = &wu / &su.insert_axis(ndarray::Axis(1));
    let wv = &wv / &sv.insert_axis(ndarray::Axis(1));
    for p in [1.0, 1.5, 2.0] {
        for (a, b) in [
            (None, None),
            (Some(wu.view()), Some(wv.view())),
            (Some(wu.view()), None),
        ] {
            let want = exact::wasserstein_1d_batch(u.view(), v.view(), a, b, p).unwrap();
            let got = gpu
                .wasserstein_1d_batch(u.view(), v.view(), a, b, p)
                .unwrap();
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(rel(*g, *w) <= 1e-12, "p = {p}, line {k}: {g} against {w}");
            }
        }
    }
    // A translation on the line: W_p^p = |t|^p.
    let shifted = u.mapv(|x| x + 0.375);
    let got = gpu
        .wasserstein_1d_batch(u.view(), shifted.view(), None, None, 1.5)
        .unwrap();
    for g in got {
        assert!(rel(g, 0.375f64.powf(1.5)) <= 1e-12, "{g}");
    }
}

/// The gradients of a batch of lines equal the CPU's `wasserstein_1d_grad`, row by row, on
/// distinct values (weighted, n ≠ m, one row of one point).
#[test]
fn gradients_of_lines_equal_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut r = Lcg(65);
    for (bsz, n, m) in [(5, 700, 3100), (3, 1, 40)] {
        let u = Array2::from_shape_fn((bsz, n), |_| r.normal());
        let v = Array2::from_shape_fn((bsz, m), |_| 2.0 * r.normal() + 0.3);
        let wu = Array2::from_shape_fn((bsz, n), |_| r.uniform(0.1, 1.0));
        let wv = Array2::from_shape_fn((bsz, m), |_| r.uniform(0.1, 1.0));
        let (su, sv) = (wu.sum_axis(ndarray::Axis(1)), wv.sum_axis(ndarray::Axis(1)));
        let wu = &wu / &su.insert_axis(ndarray::Axis(1));
        let wv = &wv / &sv.insert_axis(ndarray::Axis(1));
        for p in [1.0, 1.5, 2.0] {
            let got = gpu
                .wasserstein_1d_grad_batch(u.view(), v.view(), Some(wu.view()), Some(wv.view()), p)
                .unwrap();
            for k in 0..bsz {
                let want = exact::wasserstein_1d_grad(
                    u.row(k),
                    v.row(k),
                    Some(wu.row(k)),
                    Some(wv.row(k)),
                    p,
                )
                .unwrap();
                assert!(rel(got.values[k], want.value) <= 1e-12, "p = {p}, row {k}");
                let gu = got
                    .grad_u_values
                    .row(k)
                    .to_owned()
                    .insert_axis(ndarray::Axis(0));
                let gv = got
                    .grad_v_values
                    .row(k)
                    .to_owned()
                    .insert_axis(ndarray::Axis(0));
                let wu = want.grad_u_values.insert_axis(ndarray::Axis(0));
                let wv = want.grad_v_values.insert_axis(ndarray::Axis(0));
                assert!(rel_max(&gu, &wu) <= 1e-12, "p = {p}, row {k}");
                assert!(rel_max(&gv, &wv) <= 1e-12, "p = {p}, row {k}");
            }
        }
    }
}

#[test]
fn results_repeat_bitwise() {
    let Some(gpu) = gpu() else { return };
    let (x, y) = (cloud(9000, 5, 71, 0.0, 1.0), cloud(7000, 5, 72, 0.1, 1.0));
    let b = weights(7000, 73, 1.0);
    let proj = Projections::Random { count: 8, seed: 9 };
    let one = gpu
        .sliced_wasserstein_grad(x.view(), y.view(), None, Some(b.view()), &proj, 1.5)
        .unwrap();
    let two = gpu
        .sliced_wasserstein_grad(x.view(), y.view(), None, Some(b.view()), &proj, 1.5)
        .unwrap();
    assert_eq!(one.distance.to_bits(), two.distance.to_bits());
    assert_eq!(one.grad_x_s, two.grad_x_s);
    assert_eq!(one.grad_x_t, two.grad_x_t);
}

#[test]
fn bad_input_is_an_error_naming_the_argument() {
    let Some(gpu) = gpu() else { return };
    let (x, y) = (cloud(10, 2, 81, 0.0, 1.0), cloud(8, 2, 82, 0.0, 1.0));
    let proj = Projections::default();
    let arg = |e: logot::Error| {
        let mut name = String::new();
        let _ = e.rename_arg(|a| {
            name = a.clone();
            a
        });
        name
    };
    let e = gpu
        .sliced_wasserstein_distance(x.view(), y.view(), None, None, &proj, 0.5)
        .unwrap_err();
    assert_eq!(arg(e), "p");
    let mut bad = x.clone();
    bad[[3, 1]] = f64::NAN;
    let e = gpu
        .sliced_wasserstein_distance(bad.view(), y.view(), None, None, &proj, 2.0)
        .unwrap_err();
    assert_eq!(arg(e), "x_s");
    let wrong = cloud(8, 3, 83, 0.0, 1.0);
    let e = gpu
        .sliced_wasserstein_grad(x.view(), wrong.view(), None, None, &proj, 2.0)
        .unwrap_err();
    assert_eq!(arg(e), "x_t");
    let neg = Array1::from_elem(10, -0.1);
    let e = gpu
        .sliced_wasserstein_distance(x.view(), y.view(), Some(neg.view()), None, &proj, 2.0)
        .unwrap_err();
    assert_eq!(arg(e), "a");
    let u = Array2::<f64>::zeros((2, 5));
    let v = Array2::<f64>::zeros((3, 5));
    let e = gpu
        .wasserstein_1d_batch(u.view(), v.view(), None, None, 1.0)
        .unwrap_err();
    assert_eq!(arg(e), "v_values");
}
