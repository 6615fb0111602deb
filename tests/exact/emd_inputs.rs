//! Exact OT on point clouds (`emd_points`, closed forms and the dense cost computed here),
//! batches (`emd_batch`, `emd_points_batch`) against single solves, f32 inputs, degenerate
//! problems, iteration and time limits, candidate-list pricing, and bad inputs.

use super::emd::{check_optimal, params, rel};
use logot::exact::{
    emd, emd_batch, emd_points, emd_points_batch, EmdMethod, EmdParams, EmdResult, ExactMethod,
    Metric,
};
use logot::Error;
use ndarray::{array, Array1, Array2, Array3, Axis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// The dense cost `|x_i − y_j|^p` computed here (`p = 2`: squared Euclidean).
fn dense_cost(x: &Array2<f64>, y: &Array2<f64>, p: f64) -> Array2<f64> {
    Array2::from_shape_fn((x.nrows(), y.nrows()), |(i, j)| {
        let d2: f64 = x
            .row(i)
            .iter()
            .zip(y.row(j))
            .map(|(s, t)| (s - t) * (s - t))
            .sum();
        if p == 2.0 {
            d2
        } else {
            d2.powf(p / 2.0)
        }
    })
}

fn cloud(rng: &mut StdRng, n: usize, d: usize) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |_| rng.random::<f64>())
}

fn weights(rng: &mut StdRng, n: usize, zeros: usize) -> Array1<f64> {
    let mut w = Array1::from_shape_fn(n, |_| rng.random::<f64>() + 0.1);
    for k in 0..zeros {
        w[(k * 7) % n] = 0.0;
    }
    let s = w.sum();
    w / s
}

#[test]
fn point_clouds_match_the_dense_cost_stored_or_not() {
    let mut rng = StdRng::seed_from_u64(13);
    for (n, m, d, metric, p) in [
        (40, 30, 2, Metric::SqEuclidean, 2.0),
        (35, 35, 3, Metric::EuclideanPow(1.0), 1.0),
        (30, 45, 5, Metric::EuclideanPow(1.5), 1.5),
        (25, 20, 40, Metric::SqEuclidean, 2.0),
    ] {
        let (x, y) = (cloud(&mut rng, n, d), cloud(&mut rng, m, d));
        let c = dense_cost(&x, &y, p);
        for zeros in [0, 5] {
            let (a, b) = (weights(&mut rng, n, zeros), weights(&mut rng, m, zeros));
            let dense = emd(a.view(), b.view(), c.view(), &EmdParams::default()).unwrap();
            for store in [usize::MAX, 0] {
                let pr = EmdParams::default().store_costs_below(store);
                let r = emd_points(
                    Some(a.view()),
                    Some(b.view()),
                    x.view(),
                    y.view(),
                    metric,
                    &pr,
                )
                .unwrap();
                assert!(r.exact, "{n}×{m}, d = {d}, {metric:?}: {:?}", r.certificate);
                assert!(
                    rel(r.cost, dense.cost) <= 1e-12,
                    "{n}×{m}, d = {d}, {metric:?}, zeros {zeros}, store {store}: {} against {}",
                    r.cost,
                    dense.cost
                );
                check_optimal(a.view(), b.view(), c.view(), &r, 1e-11);
            }
        }
    }
}

#[test]
fn translated_cloud_costs_the_translation() {
    // W_p^p(μ, μ + t) = |t|^p: moving every point by t is optimal (cyclical monotonicity of
    // a translation for convex costs of x − y).
    let mut rng = StdRng::seed_from_u64(14);
    let x = cloud(&mut rng, 50, 3);
    let t = array![0.3, -0.2, 0.1];
    let y = &x + &t;
    let w = weights(&mut rng, 50, 0);
    let t2: f64 = t.iter().map(|v| v * v).sum();
    for (metric, want) in [
        (Metric::SqEuclidean, t2),
        (Metric::EuclideanPow(1.0), t2.sqrt()),
        (Metric::EuclideanPow(3.0), t2.powf(1.5)),
    ] {
        let r = emd_points(
            Some(w.view()),
            Some(w.view()),
            x.view(),
            y.view(),
            metric,
            &EmdParams::default(),
        )
        .unwrap();
        assert!(
            rel(r.cost, want) <= 1e-12,
            "{metric:?}: {} against {want}",
            r.cost
        );
    }
}

#[test]
fn points_on_a_line_are_matched_in_order() {
    // Uniform weights on the line: the sorted matching, Σ_k (x_(k) − y_(k))² / n.
    let mut rng = StdRng::seed_from_u64(15);
    let n = 200;
    let mut xs: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
    let mut ys: Vec<f64> = (0..n).map(|_| rng.random::<f64>() * 2.0 - 0.3).collect();
    let x = Array2::from_shape_vec((n, 1), xs.clone()).unwrap();
    let y = Array2::from_shape_vec((n, 1), ys.clone()).unwrap();
    xs.sort_by(f64::total_cmp);
    ys.sort_by(f64::total_cmp);
    let want = xs
        .iter()
        .zip(&ys)
        .map(|(s, t)| (s - t) * (s - t))
        .sum::<f64>()
        / n as f64;
    for method in [EmdMethod::Auto, EmdMethod::NetworkSimplex] {
        let r = emd_points::<f64>(
            None,
            None,
            x.view(),
            y.view(),
            Metric::SqEuclidean,
            &params(method),
        )
        .unwrap();
        assert!(
            rel(r.cost, want) <= 1e-12,
            "{method:?}: {} against {want}",
            r.cost
        );
    }
}

#[test]
fn batches_equal_single_solves_shared_or_not() {
    let mut rng = StdRng::seed_from_u64(16);
    let (bsz, n, m) = (5, 12, 9);
    let mu = Array2::from_shape_fn((bsz, n), |_| rng.random::<f64>() + 0.05);
    let mut nu = Array2::from_shape_fn((bsz, m), |_| rng.random::<f64>() + 0.05);
    for k in 0..bsz {
        let s = mu.row(k).sum() / nu.row(k).sum();
        nu.row_mut(k).mapv_inplace(|v| v * s);
    }
    let costs = Array3::from_shape_fn((bsz, n, m), |_| rng.random::<f64>());
    let each = emd_batch(mu.view(), nu.view(), costs.view(), &EmdParams::default()).unwrap();
    let shared = emd_batch(
        mu.view(),
        nu.view(),
        costs.slice(ndarray::s![0..1, .., ..]),
        &EmdParams::default(),
    )
    .unwrap();
    for k in 0..bsz {
        let one = emd(
            mu.row(k),
            nu.row(k),
            costs.index_axis(Axis(0), k),
            &EmdParams::default(),
        )
        .unwrap();
        assert_eq!(each[k].cost, one.cost, "problem {k}");
        assert_eq!(each[k].plan, one.plan);
        let one0 = emd(
            mu.row(k),
            nu.row(k),
            costs.index_axis(Axis(0), 0),
            &EmdParams::default(),
        )
        .unwrap();
        assert_eq!(shared[k].cost, one0.cost, "problem {k}, shared cost");
    }
    // Batched point clouds, uniform weights (the minibatch case).
    let x = Array3::from_shape_fn((4, 16, 2), |_| rng.random::<f64>());
    let y = Array3::from_shape_fn((4, 16, 2), |_| rng.random::<f64>());
    let batch = emd_points_batch::<f64>(
        None,
        None,
        x.view(),
        y.view(),
        Metric::SqEuclidean,
        &EmdParams::default(),
    )
    .unwrap();
    for (k, bk) in batch.iter().enumerate() {
        let (xk, yk) = (
            x.index_axis(Axis(0), k).to_owned(),
            y.index_axis(Axis(0), k).to_owned(),
        );
        let c = dense_cost(&xk, &yk, 2.0);
        let w = Array1::from_elem(16, 1.0 / 16.0);
        let one = emd(w.view(), w.view(), c.view(), &EmdParams::default()).unwrap();
        assert!(rel(bk.cost, one.cost) <= 1e-13);
        assert_eq!(bk.method, ExactMethod::NetworkSimplex);
    }
    // From dimension 8, uniform square clouds go to the assignment solver.
    let x = Array3::from_shape_fn((2, 16, 8), |_| rng.random::<f64>());
    let y = Array3::from_shape_fn((2, 16, 8), |_| rng.random::<f64>());
    let batch = emd_points_batch::<f64>(
        None,
        None,
        x.view(),
        y.view(),
        Metric::SqEuclidean,
        &EmdParams::default(),
    )
    .unwrap();
    for (k, bk) in batch.iter().enumerate() {
        let (xk, yk) = (
            x.index_axis(Axis(0), k).to_owned(),
            y.index_axis(Axis(0), k).to_owned(),
        );
        let c = dense_cost(&xk, &yk, 2.0);
        let w = Array1::from_elem(16, 1.0 / 16.0);
        let one = emd(
            w.view(),
            w.view(),
            c.view(),
            &params(EmdMethod::NetworkSimplex),
        )
        .unwrap();
        assert!(rel(bk.cost, one.cost) <= 1e-13);
        assert_eq!(bk.method, ExactMethod::Assignment);
    }
}

#[test]
fn float32_inputs_are_solved_in_float64() {
    let mut rng = StdRng::seed_from_u64(17);
    let c32 = Array2::from_shape_fn((20, 15), |_| rng.random::<f32>());
    let a32 = Array1::from_elem(20, 0.75f32);
    let b32 = Array1::from_elem(15, 1.0f32);
    let r = emd(a32.view(), b32.view(), c32.view(), &EmdParams::default()).unwrap();
    let c = c32.mapv(|v| v as f64);
    let r64 = emd(
        a32.mapv(|v| v as f64).view(),
        b32.mapv(|v| v as f64).view(),
        c.view(),
        &EmdParams::default(),
    )
    .unwrap();
    assert_eq!(r.cost, r64.cost);
    check_optimal(
        a32.mapv(|v| v as f64).view(),
        b32.mapv(|v| v as f64).view(),
        c.view(),
        &r,
        1e-13,
    );
}

#[test]
fn degenerate_problems() {
    // Identical histograms on a metric cost: cost 0, the identity plan.
    let x = [0.0f64, 1.0, 3.0, 4.0];
    let c = Array2::from_shape_fn((4, 4), |(i, j)| (x[i] - x[j]).abs());
    let w = array![0.1, 0.4, 0.2, 0.3];
    let r = emd(w.view(), w.view(), c.view(), &EmdParams::default()).unwrap();
    assert_eq!(r.cost, 0.0);
    assert_eq!(r.plan.to_dense(), Array2::from_diag(&w));
    // Every cost zero: any plan is optimal, the duals are zero after centring.
    let z = Array2::<f64>::zeros((5, 3));
    let r = emd(
        array![0.2, 0.2, 0.2, 0.2, 0.2].view(),
        array![0.5, 0.25, 0.25].view(),
        z.view(),
        &EmdParams::default(),
    )
    .unwrap();
    assert!(r.exact && r.cost == 0.0);
    assert!(r.f.iter().chain(r.g.iter()).all(|v| v.abs() < 1e-15));
    // One bin each.
    let r = emd(
        array![2.0].view(),
        array![2.0].view(),
        array![[-1.5]].view(),
        &EmdParams::default(),
    )
    .unwrap();
    assert_eq!(r.cost, -3.0);
    assert!(r.exact);
}

#[test]
fn limits_are_reported_not_hidden() {
    let mut rng = StdRng::seed_from_u64(18);
    let (x, y) = (cloud(&mut rng, 60, 2), cloud(&mut rng, 50, 2));
    let c = dense_cost(&x, &y, 2.0);
    let (a, b) = (weights(&mut rng, 60, 0), weights(&mut rng, 50, 0));
    let full = emd(a.view(), b.view(), c.view(), &EmdParams::default()).unwrap();
    assert!(full.converged && full.exact && full.iterations > 10);
    for limit in [1, 5, full.iterations / 2] {
        let p = EmdParams::default().max_iters(limit);
        let r = emd(a.view(), b.view(), c.view(), &p).unwrap();
        assert!(!r.converged && !r.exact, "limit {limit}");
        assert_eq!(r.iterations, limit);
        // The certificate shows it: a gap or a violated dual constraint (the plan itself
        // meets its marginals: `a_plan_stopped_by_a_limit_meets_its_marginals`).
        assert!(
            !r.certificate.holds(1e-9),
            "limit {limit}: {:?}",
            r.certificate
        );
    }
    let p = EmdParams::default().max_time(Duration::ZERO);
    let r = emd(a.view(), b.view(), c.view(), &p).unwrap();
    assert!(!r.converged && !r.exact && r.iterations == 0);
    // The assignment solver stopped early hands back a feasible permutation, not optimal.
    let w = Array1::from_elem(60, 1.0 / 60.0);
    let c = dense_cost(&x, &cloud(&mut rng, 60, 2), 2.0);
    let opt = emd(w.view(), w.view(), c.view(), &params(EmdMethod::Assignment)).unwrap();
    assert!(opt.exact && opt.iterations > 1);
    let p = EmdParams::default()
        .max_iters(1)
        .method(EmdMethod::Assignment);
    let r = emd(w.view(), w.view(), c.view(), &p).unwrap();
    assert!(!r.converged && !r.exact);
    assert_eq!(r.plan.len(), 60);
    assert!(r.certificate.marginal_error_a < 1e-15 && r.certificate.marginal_error_b < 1e-15);
    assert!(r.cost >= opt.cost);
}

#[test]
fn a_plan_stopped_by_a_limit_meets_its_marginals() {
    // The network simplex stopped by a limit hands back a feasible plan (the mass its
    // basis still routes through the artificial root paired up), dearer than the optimum.
    let mut rng = StdRng::seed_from_u64(18);
    let (x, y) = (cloud(&mut rng, 60, 2), cloud(&mut rng, 50, 2));
    let c = dense_cost(&x, &y, 2.0);
    let (a, b) = (weights(&mut rng, 60, 7), weights(&mut rng, 50, 5));
    let full = emd(a.view(), b.view(), c.view(), &EmdParams::default()).unwrap();
    assert!(full.exact && full.iterations > 10);
    let tol = 1e-14 * (60.0 + 50.0);
    let check = |r: &EmdResult, what: &str| {
        assert!(!r.converged && !r.exact, "{what}");
        let p = r.plan.to_dense();
        let row_err: f64 = (&p.sum_axis(Axis(1)) - &a).iter().map(|v| v.abs()).sum();
        let col_err: f64 = (&p.sum_axis(Axis(0)) - &b).iter().map(|v| v.abs()).sum();
        assert!(
            row_err <= tol && col_err <= tol,
            "{what}: {row_err} {col_err}"
        );
        assert!(r.plan.mass.iter().all(|&v| v > 0.0), "{what}");
        assert!(r.certificate.marginal_error_a <= tol, "{what}");
        assert!(r.certificate.marginal_error_b <= tol, "{what}");
        let cost: f64 = r.plan.iter().map(|(i, j, v)| v * c[[i, j]]).sum();
        assert!((cost - r.cost).abs() <= 1e-12 * cost.abs(), "{what}");
        assert!(r.cost >= full.cost - 1e-12 * full.cost.abs(), "{what}");
    };
    for limit in [1, 5, full.iterations / 2] {
        for k in [0, 4] {
            let p = EmdParams::default().max_iters(limit).candidates_per_row(k);
            let r = emd(a.view(), b.view(), c.view(), &p).unwrap();
            assert_eq!(r.iterations, limit);
            check(&r, &format!("limit {limit}, {k} candidates"));
        }
    }
    let p = EmdParams::default().max_time(Duration::ZERO);
    let r = emd(a.view(), b.view(), c.view(), &p).unwrap();
    assert_eq!(r.iterations, 0);
    check(&r, "no time");
    // Point clouds take the same path, costs stored or computed when read.
    for stored in [0, usize::MAX] {
        let p = EmdParams::default().max_iters(5).store_costs_below(stored);
        let r = emd_points(
            Some(a.view()),
            Some(b.view()),
            x.view(),
            y.view(),
            Metric::SqEuclidean,
            &p,
        )
        .unwrap();
        check(&r, &format!("points, store below {stored}"));
    }
}

/// The argument an error names.
fn arg_of(e: &Error) -> String {
    match e {
        Error::Shape { arg, .. }
        | Error::Empty { arg, .. }
        | Error::NonFinite { arg, .. }
        | Error::NegativeMass { arg, .. }
        | Error::ZeroMass { arg, .. }
        | Error::Parameter { arg, .. } => arg.clone(),
        Error::UnequalMass { .. } => "mu, nu".into(),
        other => panic!("unexpected error {other}"),
    }
}

#[test]
fn bad_inputs_are_errors_naming_the_argument() {
    let c = Array2::from_shape_fn((3, 2), |(i, j)| (i + j) as f64);
    let a = array![0.5, 0.25, 0.25];
    let b = array![0.5, 0.5];
    let d = EmdParams::default();
    let e = |r: logot::Result<EmdResult>| arg_of(&r.expect_err("an error"));
    let empty = Array1::<f64>::zeros(0);
    assert_eq!(
        e(emd(
            empty.view(),
            b.view(),
            Array2::zeros((0, 2)).view(),
            &d
        )),
        "mu"
    );
    assert_eq!(
        e(emd(
            array![0.5, f64::NAN, 0.5].view(),
            b.view(),
            c.view(),
            &d
        )),
        "mu"
    );
    assert_eq!(
        e(emd(array![0.5, -0.25, 0.75].view(), b.view(), c.view(), &d)),
        "mu"
    );
    assert_eq!(
        e(emd(array![0.0, 0.0, 0.0].view(), b.view(), c.view(), &d)),
        "mu"
    );
    assert_eq!(
        e(emd(
            a.view(),
            array![f64::INFINITY, 0.5].view(),
            c.view(),
            &d
        )),
        "nu"
    );
    assert_eq!(
        e(emd(a.view(), array![1.5, -0.5].view(), c.view(), &d)),
        "nu"
    );
    assert_eq!(
        e(emd(
            a.view(),
            empty.view(),
            Array2::zeros((3, 0)).view(),
            &d
        )),
        "nu"
    );
    assert_eq!(
        e(emd(a.view(), b.view(), Array2::zeros((2, 3)).view(), &d)),
        "cost"
    );
    let mut bad = c.clone();
    bad[[1, 1]] = f64::NAN;
    assert_eq!(e(emd(a.view(), b.view(), bad.view(), &d)), "cost");
    bad[[1, 1]] = 1e308;
    assert_eq!(e(emd(a.view(), b.view(), bad.view(), &d)), "cost");
    // Unequal masses: beyond 1e-6 relative in f64 (1e-4 in f32).
    let r = emd(a.view(), array![0.5, 0.5 + 2e-6].view(), c.view(), &d);
    assert!(matches!(r, Err(Error::UnequalMass { .. })));
    let ok = emd(a.view(), array![0.5, 0.5 + 5e-7].view(), c.view(), &d).unwrap();
    assert!(ok.exact);
    assert!(matches!(
        emd(
            a.mapv(|v| v as f32).view(),
            array![0.5f32, 0.5002].view(),
            c.mapv(|v| v as f32).view(),
            &d
        ),
        Err(Error::UnequalMass { .. })
    ));
    // Parameters.
    let p = |f: fn(&mut EmdParams)| {
        let mut p = EmdParams::default();
        f(&mut p);
        p
    };
    assert_eq!(
        e(emd(a.view(), b.view(), c.view(), &p(|p| p.max_iters = 0))),
        "max_iters"
    );
    assert_eq!(
        e(emd(
            a.view(),
            b.view(),
            c.view(),
            &p(|p| p.certificate_tol = f64::NAN)
        )),
        "certificate_tol"
    );
    assert_eq!(
        e(emd(
            a.view(),
            b.view(),
            c.view(),
            &p(|p| p.method = EmdMethod::Assignment)
        )),
        "method"
    );
    // Batches.
    let mu2 = Array2::from_shape_fn((2, 3), |_| 1.0 / 3.0);
    let nu2 = Array2::from_shape_fn((3, 2), |_| 0.5);
    let c3 = Array3::<f64>::zeros((2, 3, 2));
    assert_eq!(
        e(emd_batch(mu2.view(), nu2.view(), c3.view(), &d).map(|mut v| v.remove(0))),
        "nu"
    );
    let nu2 = Array2::from_shape_fn((2, 2), |_| 0.5);
    let c3 = Array3::<f64>::zeros((3, 3, 2));
    assert_eq!(
        e(emd_batch(mu2.view(), nu2.view(), c3.view(), &d).map(|mut v| v.remove(0))),
        "cost"
    );
    // Point clouds.
    let x = Array2::<f64>::zeros((3, 2));
    let y = Array2::<f64>::zeros((2, 2));
    let sq = Metric::SqEuclidean;
    assert_eq!(
        e(emd_points(
            None,
            None,
            Array2::<f64>::zeros((0, 2)).view(),
            y.view(),
            sq,
            &d
        )),
        "x"
    );
    assert_eq!(
        e(emd_points(
            None,
            None,
            x.view(),
            Array2::<f64>::zeros((2, 0)).view(),
            sq,
            &d
        )),
        "y"
    );
    assert_eq!(
        e(emd_points(
            None,
            None,
            x.view(),
            Array2::<f64>::zeros((2, 3)).view(),
            sq,
            &d
        )),
        "y"
    );
    let mut xn = x.clone();
    xn[[2, 1]] = f64::NEG_INFINITY;
    assert_eq!(e(emd_points(None, None, xn.view(), y.view(), sq, &d)), "x");
    assert_eq!(
        e(emd_points(Some(b.view()), None, x.view(), y.view(), sq, &d)),
        "mu"
    );
    assert_eq!(
        e(emd_points(None, Some(a.view()), x.view(), y.view(), sq, &d)),
        "nu"
    );
    assert_eq!(
        e(emd_points(
            None,
            None,
            x.view(),
            y.view(),
            Metric::EuclideanPow(0.0),
            &d
        )),
        "metric"
    );
    assert_eq!(
        e(emd_points(
            None,
            None,
            x.view(),
            y.view(),
            Metric::EuclideanPow(f64::NAN),
            &d
        )),
        "metric"
    );
    let far = Array2::from_elem((2, 2), 1e200);
    assert_eq!(e(emd_points(None, None, x.view(), far.view(), sq, &d)), "x");
}

#[test]
fn candidate_pricing_changes_nothing_but_the_speed() {
    // Pricing candidate lists first, then every pair, ends at the same optimum: the cost to
    // rounding, a plan and potentials that prove themselves optimal here.
    let mut rng = StdRng::seed_from_u64(29);
    let (x, y) = (cloud(&mut rng, 300, 2), cloud(&mut rng, 250, 2));
    let c = dense_cost(&x, &y, 2.0);
    let (a, b) = (weights(&mut rng, 300, 10), weights(&mut rng, 250, 0));
    let simplex = params(EmdMethod::NetworkSimplex);
    let full = emd(a.view(), b.view(), c.view(), &simplex).unwrap();
    assert!(full.exact);
    for k in [1, 4, 16] {
        let p = simplex.clone().candidates_per_row(k);
        let r = emd(a.view(), b.view(), c.view(), &p).unwrap();
        assert!(r.exact, "k = {k}: {:?}", r.certificate);
        assert!(
            rel(r.cost, full.cost) <= 1e-12,
            "k = {k}: {} against {}",
            r.cost,
            full.cost
        );
        check_optimal(a.view(), b.view(), c.view(), &r, 1e-11);
        // The limits hold on this path too.
        let r = emd(a.view(), b.view(), c.view(), &p.clone().max_iters(7)).unwrap();
        assert!(!r.converged && !r.exact && r.iterations == 7, "k = {k}");
    }
}

#[test]
fn uniform_weights_of_f32_clouds_are_exact() {
    // Without weights every point has mass 1/n in f64: the f32 clouds solve as the same
    // clouds in f64 (1/n rounded to f32 would change the mass by about 1e-8).
    let mut rng = StdRng::seed_from_u64(31);
    let (x, y) = (cloud(&mut rng, 40, 3), cloud(&mut rng, 30, 3));
    let (x32, y32) = (x.mapv(|v| v as f32), y.mapv(|v| v as f32));
    let p = EmdParams::default();
    let r32 = emd_points(None, None, x32.view(), y32.view(), Metric::SqEuclidean, &p).unwrap();
    let (x64, y64) = (x32.mapv(f64::from), y32.mapv(f64::from));
    let r64 = emd_points(None, None, x64.view(), y64.view(), Metric::SqEuclidean, &p).unwrap();
    assert_eq!(r32.certificate.mass, r64.certificate.mass);
    assert!((r32.certificate.mass - 1.0).abs() <= 1e-15);
    assert!(
        rel(r32.cost, r64.cost) <= 1e-15,
        "{} against {}",
        r32.cost,
        r64.cost
    );
    assert!(r32.exact);
}
