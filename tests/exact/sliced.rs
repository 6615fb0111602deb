//! Sliced and max-sliced Wasserstein against POT's values (tests/data/make_pot_exact_1d.py),
//! closed forms (translations, Gaussians within a statistical tolerance), finite
//! differences of the gradients, and independence from the number of threads.

use logot::exact::{
    max_sliced_wasserstein_distance, max_sliced_wasserstein_grad, sliced_wasserstein_batch,
    sliced_wasserstein_distance, sliced_wasserstein_grad, sliced_wasserstein_grad_batch,
    wasserstein_1d, MaxSlicedSearch, Projections,
};
use logot::Error;
use ndarray::{array, Array1, Array2, Array3, Axis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

fn npy1(name: &str) -> Array1<f64> {
    ndarray_npy::read_npy(format!("{DATA}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}
fn npy2(name: &str) -> Array2<f64> {
    ndarray_npy::read_npy(format!("{DATA}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(f64::MIN_POSITIVE)
}

fn normal_cloud(rng: &mut StdRng, n: usize, d: usize) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |_| StandardNormal.sample(rng))
}

/// POT's `sliced_wasserstein_distance` and `max_sliced_wasserstein_distance` to 1e-12
/// relative: given (unnormalised) directions with p = 2 and 1, directions drawn from seed 7
/// (weighted and uniform, p = 2 and 3), and max-sliced over both; each direction's
/// `W_p^p` equals POT's `projected_emds`; the drawn directions are POT's to 1e-15.
#[test]
fn values_match_pot() {
    let xs = npy2("pot_exact_sliced_xs.npy");
    let xt = npy2("pot_exact_sliced_xt.npy");
    let a = npy1("pot_exact_sliced_a.npy");
    let b = npy1("pot_exact_sliced_b.npy");
    let proj = npy2("pot_exact_sliced_proj.npy");
    let want = npy1("pot_exact_sliced_values.npy");
    let given = Projections::Given(proj.view());
    let seeded = Projections::Random { count: 30, seed: 7 };
    let (av, bv) = (Some(a.view()), Some(b.view()));
    let sw = |a, b, pr: &Projections, p| {
        sliced_wasserstein_distance(xs.view(), xt.view(), a, b, pr, p).unwrap()
    };
    let r = sw(av, bv, &given, 2.0);
    assert!(
        rel(r.distance, want[0]) <= 1e-12,
        "{} vs {}",
        r.distance,
        want[0]
    );
    let per = npy1("pot_exact_sliced_projected.npy");
    for (k, (&g, &w)) in r.projected.iter().zip(&per).enumerate() {
        assert!(rel(g, w) <= 1e-12, "direction {k}: {g} vs {w}");
    }
    assert!(rel(sw(av, bv, &given, 1.0).distance, want[1]) <= 1e-12);
    assert!(rel(sw(av, bv, &seeded, 2.0).distance, want[2]) <= 1e-12);
    assert!(rel(sw(None, None, &seeded, 3.0).distance, want[3]) <= 1e-12);
    let ms = |pr: &Projections, p| {
        max_sliced_wasserstein_distance(
            xs.view(),
            xt.view(),
            av,
            bv,
            pr,
            p,
            MaxSlicedSearch::Projections,
        )
        .unwrap()
        .distance
    };
    assert!(rel(ms(&given, 2.0), want[4]) <= 1e-12);
    assert!(rel(ms(&seeded, 1.0), want[5]) <= 1e-12);
    let dirs = seeded.directions(3).unwrap();
    let pot = npy2("pot_exact_sliced_seed7_proj.npy");
    let diff = (&dirs.t() - &pot)
        .mapv(f64::abs)
        .fold(0.0, |m: f64, v| m.max(*v));
    assert!(
        diff <= 1e-15,
        "drawn directions differ from POT's by {diff:e}"
    );
}

/// Each direction's value is the 1-D `W_p^p` of the projected points (computed here with
/// `wasserstein_1d` on the projections), weighted and n ≠ m.
#[test]
fn each_direction_is_the_one_dimensional_problem() {
    let mut rng = StdRng::seed_from_u64(2);
    let (xs, xt) = (
        normal_cloud(&mut rng, 40, 4),
        normal_cloud(&mut rng, 25, 4) * 1.5,
    );
    let a = Array1::from_shape_fn(40, |_| rng.random::<f64>() + 0.1);
    let a = &a / a.sum();
    let dirs = normal_cloud(&mut rng, 4, 6);
    let r = sliced_wasserstein_distance(
        xs.view(),
        xt.view(),
        Some(a.view()),
        None,
        &Projections::Given(dirs.view()),
        1.5,
    )
    .unwrap();
    for l in 0..6 {
        let th = dirs.column(l);
        let (u, v) = (xs.dot(&th), xt.dot(&th));
        let w = wasserstein_1d(u.view(), v.view(), Some(a.view()), None, 1.5).unwrap();
        assert!(rel(r.projected[l], w) <= 1e-12, "direction {l}");
    }
    let mean = r.projected.sum() / 6.0;
    assert!(rel(r.distance, mean.powf(1.0 / 1.5)) <= 1e-15);
}

/// A translation by t: along θ every point moves by ⟨θ, t⟩, so
/// `SW_p^p = (1/L) Σ |⟨θ_l, t⟩|^p` exactly, and max-sliced ascent finds |t|.
#[test]
fn translations_have_closed_forms() {
    let mut rng = StdRng::seed_from_u64(9);
    let x = normal_cloud(&mut rng, 500, 3);
    let t = array![0.3, -1.2, 0.5];
    let y = &x + &t;
    for p in [1.0, 2.0, 3.0] {
        let pr = Projections::Random { count: 64, seed: 3 };
        let dirs = pr.directions(3).unwrap();
        let want = (dirs.dot(&t).mapv(|s| s.abs().powf(p)).sum() / 64.0).powf(1.0 / p);
        let r = sliced_wasserstein_distance(x.view(), y.view(), None, None, &pr, p).unwrap();
        assert!(
            rel(r.distance, want) <= 1e-12,
            "p = {p}: {} vs {want}",
            r.distance
        );
        let m = max_sliced_wasserstein_distance(
            x.view(),
            y.view(),
            None,
            None,
            &pr,
            p,
            MaxSlicedSearch::Ascent {
                steps: 300,
                step: 0.3,
            },
        )
        .unwrap();
        let tn = t.dot(&t).sqrt();
        assert!(
            rel(m.distance, tn) <= 1e-8,
            "p = {p}: {} vs {tn}",
            m.distance
        );
        let best = m.direction.dot(&t).abs() / tn;
        assert!(best > 1.0 - 1e-8, "direction {:?}", m.direction);
        // Ascent never ends below the best of its starting directions.
        let over = max_sliced_wasserstein_distance(
            x.view(),
            y.view(),
            None,
            None,
            &pr,
            p,
            MaxSlicedSearch::Projections,
        )
        .unwrap();
        assert!(m.distance >= over.distance);
    }
}

/// Gaussians: `θ#N(m, s²I) = N(⟨θ, m⟩, s²)`, so
/// `E_θ W_2² = |m₁ − m₂|²/d + (s₁ − s₂)²`; with 20,000 samples a side and 400 directions the
/// estimate is within 3% (the sampling error of the empirical W_2², about 1% here, and the
/// Monte-Carlo error over directions).
#[test]
fn gaussians_match_their_closed_form() {
    let mut rng = StdRng::seed_from_u64(17);
    let d = 5;
    let (m1, m2) = (Array1::from_elem(d, 0.0), array![1.0, -0.5, 0.0, 2.0, 0.5]);
    let (s1, s2) = (1.0, 2.0);
    let x = normal_cloud(&mut rng, 20_000, d) * s1 + &m1;
    let y = normal_cloud(&mut rng, 20_000, d) * s2 + &m2;
    let dm = &m1 - &m2;
    let want = dm.dot(&dm) / d as f64 + (s1 - s2) * (s1 - s2);
    let r = sliced_wasserstein_distance(
        x.view(),
        y.view(),
        None,
        None,
        &Projections::Random {
            count: 400,
            seed: 1,
        },
        2.0,
    )
    .unwrap();
    let got = r.distance * r.distance;
    assert!(rel(got, want) <= 0.03, "{got} vs {want}");
}

/// Gradients of SW_p with respect to both clouds equal central differences (weighted,
/// n ≠ m, p = 1.5, 2, 3, points in general position); the batched gradients are the single
/// ones.
#[test]
fn sliced_gradients_match_finite_differences() {
    let mut rng = StdRng::seed_from_u64(31);
    let (xs, xt) = (
        normal_cloud(&mut rng, 8, 3),
        normal_cloud(&mut rng, 6, 3) + 0.4,
    );
    let a = Array1::from_shape_fn(8, |_| rng.random::<f64>() + 0.2);
    let a = &a / a.sum();
    let dirs = normal_cloud(&mut rng, 3, 10);
    let pr = Projections::Given(dirs.view());
    for p in [1.5, 2.0, 3.0] {
        let f = |xs: &Array2<f64>, xt: &Array2<f64>| {
            sliced_wasserstein_distance(xs.view(), xt.view(), Some(a.view()), None, &pr, p)
                .unwrap()
                .distance
        };
        let g =
            sliced_wasserstein_grad(xs.view(), xt.view(), Some(a.view()), None, &pr, p).unwrap();
        assert!(rel(g.distance, f(&xs, &xt)) <= 1e-14);
        let e = 1e-6;
        for ((i, t), &want) in g.grad_x_s.indexed_iter() {
            let (mut up, mut dn) = (xs.clone(), xs.clone());
            up[[i, t]] += e;
            dn[[i, t]] -= e;
            let fd = (f(&up, &xt) - f(&dn, &xt)) / (2.0 * e);
            assert!(
                (fd - want).abs() <= 1e-7,
                "p {p} x_s[{i},{t}]: {fd} vs {want}"
            );
        }
        for ((j, t), &want) in g.grad_x_t.indexed_iter() {
            let (mut up, mut dn) = (xt.clone(), xt.clone());
            up[[j, t]] += e;
            dn[[j, t]] -= e;
            let fd = (f(&xs, &up) - f(&xs, &dn)) / (2.0 * e);
            assert!(
                (fd - want).abs() <= 1e-7,
                "p {p} x_t[{j},{t}]: {fd} vs {want}"
            );
        }
    }
    let xs3 = Array3::from_shape_fn((2, 8, 3), |(k, i, t)| xs[[i, t]] * (1.0 + k as f64));
    let xt3 = Array3::from_shape_fn((2, 6, 3), |(_, j, t)| xt[[j, t]]);
    let gb = sliced_wasserstein_grad_batch(xs3.view(), xt3.view(), None, None, &pr, 2.0).unwrap();
    for (k, gk) in gb.iter().enumerate() {
        let one =
            sliced_wasserstein_grad(xs3.index_axis(Axis(0), k), xt.view(), None, None, &pr, 2.0)
                .unwrap();
        assert_eq!(gk.grad_x_s, one.grad_x_s);
        assert_eq!(gk.distance, one.distance);
    }
}

/// The max-sliced gradient (at the best given direction) equals central differences.
#[test]
fn max_sliced_gradients_match_finite_differences() {
    let mut rng = StdRng::seed_from_u64(41);
    let (xs, xt) = (
        normal_cloud(&mut rng, 7, 2),
        normal_cloud(&mut rng, 9, 2) * 2.0,
    );
    let dirs = normal_cloud(&mut rng, 2, 5);
    let pr = Projections::Given(dirs.view());
    let how = MaxSlicedSearch::Projections;
    let f = |xs: &Array2<f64>| {
        max_sliced_wasserstein_distance(xs.view(), xt.view(), None, None, &pr, 2.0, how)
            .unwrap()
            .distance
    };
    let (m, g) =
        max_sliced_wasserstein_grad(xs.view(), xt.view(), None, None, &pr, 2.0, how).unwrap();
    assert_eq!(m.distance, f(&xs));
    let e = 1e-6;
    for ((i, t), &want) in g.grad_x_s.indexed_iter() {
        let (mut up, mut dn) = (xs.clone(), xs.clone());
        up[[i, t]] += e;
        dn[[i, t]] -= e;
        let fd = (f(&up) - f(&dn)) / (2.0 * e);
        assert!((fd - want).abs() <= 1e-7, "x_s[{i},{t}]: {fd} vs {want}");
    }
}

/// Values and gradients are the same bits on 1, 2 and 3 threads.
#[test]
fn results_do_not_depend_on_the_thread_count() {
    let mut rng = StdRng::seed_from_u64(5);
    let (xs, xt) = (
        normal_cloud(&mut rng, 3000, 3),
        normal_cloud(&mut rng, 2000, 3),
    );
    let b = Array1::from_shape_fn(2000, |_| rng.random::<f64>() + 0.1);
    let b = &b / b.sum();
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let pr = Projections::Random {
                count: 37,
                seed: 11,
            };
            let v =
                sliced_wasserstein_distance(xs.view(), xt.view(), None, Some(b.view()), &pr, 2.0)
                    .unwrap();
            let g = sliced_wasserstein_grad(xs.view(), xt.view(), None, Some(b.view()), &pr, 2.0)
                .unwrap();
            (v.distance, v.projected, g.grad_x_s, g.grad_x_t)
        })
    };
    let one = run(1);
    for t in [2, 3] {
        let other = run(t);
        assert_eq!(one.0.to_bits(), other.0.to_bits(), "{t} threads");
        assert_eq!(one.1, other.1);
        assert_eq!(one.2, other.2);
        assert_eq!(one.3, other.3);
    }
}

/// A batch gives each problem's own value, and names the problem of a bad one.
#[test]
fn batches_are_single_problems() {
    let mut rng = StdRng::seed_from_u64(6);
    let xs = Array3::from_shape_fn((4, 50, 2), |_| rng.random::<f64>());
    let xt = Array3::from_shape_fn((4, 30, 2), |_| rng.random::<f64>() * 2.0);
    let pr = Projections::default();
    let got = sliced_wasserstein_batch(xs.view(), xt.view(), None, None, &pr, 2.0).unwrap();
    for k in 0..4 {
        let one = sliced_wasserstein_distance(
            xs.index_axis(Axis(0), k),
            xt.index_axis(Axis(0), k),
            None,
            None,
            &pr,
            2.0,
        )
        .unwrap();
        assert_eq!(got[k], one.distance);
    }
    let mut bad = xt.clone();
    bad[[2, 1, 0]] = f64::NAN;
    let e = sliced_wasserstein_batch(xs.view(), bad.view(), None, None, &pr, 2.0).unwrap_err();
    assert!(
        matches!(&e, Error::NonFinite { arg, .. } if arg == "x_t[2]"),
        "{e}"
    );
}

/// Every bad input is an error naming its argument.
#[test]
fn bad_inputs_name_their_argument() {
    let x = array![[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]];
    let y = array![[0.5, 1.5], [1.0, 1.0]];
    let pr = Projections::default();
    let name = |e: Error| -> String {
        match e {
            Error::Empty { arg, .. }
            | Error::NonFinite { arg, .. }
            | Error::NegativeMass { arg, .. }
            | Error::ZeroMass { arg, .. }
            | Error::Shape { arg, .. }
            | Error::Parameter { arg, .. } => arg,
            Error::UnequalMass { .. } => "masses".into(),
            other => panic!("unexpected {other}"),
        }
    };
    let sw = |x: Array2<f64>,
              y: Array2<f64>,
              a: Option<Array1<f64>>,
              b: Option<Array1<f64>>,
              pr: &Projections,
              p: f64| {
        name(
            sliced_wasserstein_distance(
                x.view(),
                y.view(),
                a.as_ref().map(|a| a.view()),
                b.as_ref().map(|b| b.view()),
                pr,
                p,
            )
            .unwrap_err(),
        )
    };
    assert_eq!(
        sw(Array2::zeros((0, 2)), y.clone(), None, None, &pr, 2.0),
        "x_s"
    );
    assert_eq!(
        sw(x.clone(), Array2::zeros((2, 0)), None, None, &pr, 2.0),
        "x_t"
    );
    assert_eq!(
        sw(x.clone(), array![[0.0, 1.0, 2.0]], None, None, &pr, 2.0),
        "x_t"
    );
    assert_eq!(
        sw(array![[f64::NAN, 0.0]], y.clone(), None, None, &pr, 2.0),
        "x_s"
    );
    assert_eq!(
        sw(x.clone(), y.clone(), Some(array![0.5, 0.5]), None, &pr, 2.0),
        "a"
    );
    assert_eq!(
        sw(
            x.clone(),
            y.clone(),
            None,
            Some(array![1.5, -0.5]),
            &pr,
            2.0
        ),
        "b"
    );
    assert_eq!(
        sw(x.clone(), y.clone(), None, Some(array![0.5, 0.6]), &pr, 2.0),
        "masses"
    );
    assert_eq!(sw(x.clone(), y.clone(), None, None, &pr, 0.5), "p");
    assert_eq!(
        sw(
            x.clone(),
            y.clone(),
            None,
            None,
            &Projections::Random { count: 0, seed: 0 },
            2.0
        ),
        "n_projections"
    );
    let bad_dim = Array2::<f64>::ones((3, 4));
    assert_eq!(
        sw(
            x.clone(),
            y.clone(),
            None,
            None,
            &Projections::Given(bad_dim.view()),
            2.0
        ),
        "projections"
    );
    let no_dirs = Array2::<f64>::ones((2, 0));
    assert_eq!(
        sw(
            x.clone(),
            y.clone(),
            None,
            None,
            &Projections::Given(no_dirs.view()),
            2.0
        ),
        "projections"
    );
    let nan_dirs = array![[1.0], [f64::NAN]];
    assert_eq!(
        sw(
            x.clone(),
            y.clone(),
            None,
            None,
            &Projections::Given(nan_dirs.view()),
            2.0
        ),
        "projections"
    );
    let e = max_sliced_wasserstein_distance(
        x.view(),
        y.view(),
        None,
        None,
        &pr,
        2.0,
        MaxSlicedSearch::Ascent {
            steps: 5,
            step: 0.0,
        },
    )
    .unwrap_err();
    assert_eq!(name(e), "step");
}
