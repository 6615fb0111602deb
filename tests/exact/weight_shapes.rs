//! A weight vector of the wrong length is a shape error naming it, on every exact entry
//! point, before any mass is compared: each wrong vector below also has the wrong mass, so
//! a mass check run first would answer "unequal total masses" instead.

use logot::exact::{
    emd, emd2_1d, emd_1d, emd_batch, emd_points, emd_points_batch, max_sliced_wasserstein_distance,
    max_sliced_wasserstein_grad, sliced_wasserstein_batch, sliced_wasserstein_distance,
    sliced_wasserstein_grad, sliced_wasserstein_grad_batch, wasserstein_1d, wasserstein_1d_batch,
    wasserstein_1d_grad, EmdParams, MaxSlicedSearch, Metric, Projections,
};
use logot::Error;
use ndarray::{array, Array2, Array3, Axis};

/// The argument of a shape error; any other outcome fails with what it was.
fn shape_arg<R>(r: logot::Result<R>) -> String {
    match r {
        Err(Error::Shape { arg, .. }) => arg,
        Err(other) => panic!("not a shape error: {other}"),
        Ok(_) => panic!("no error"),
    }
}

#[test]
fn emd_names_the_weights_of_the_wrong_length() {
    let d = EmdParams::default();
    let c = Array2::from_shape_fn((3, 2), |(i, j)| (i + j) as f64);
    let (a, b) = (array![0.5, 0.25, 0.25], array![0.5, 0.5]);
    let (a_short, b_short) = (array![0.5, 0.25], array![0.5]);
    let (a_long, b_long) = (array![0.5, 0.25, 0.25, 0.5], array![0.5, 0.5, 0.5]);
    assert_eq!(shape_arg(emd(a_short.view(), b.view(), c.view(), &d)), "mu");
    assert_eq!(shape_arg(emd(a_long.view(), b.view(), c.view(), &d)), "mu");
    assert_eq!(shape_arg(emd(a.view(), b_short.view(), c.view(), &d)), "nu");
    assert_eq!(shape_arg(emd(a.view(), b_long.view(), c.view(), &d)), "nu");

    // Batches: a shared cost and one per problem.
    let mu = array![[0.5, 0.25, 0.25], [0.25, 0.25, 0.5]];
    let nu = array![[0.5, 0.5], [0.25, 0.75]];
    for c3 in [c.clone().insert_axis(Axis(0)), Array3::zeros((2, 3, 2))] {
        let (mu_short, nu_short) = (array![[0.5, 0.25], [0.5, 0.25]], array![[0.5], [0.5]]);
        let r = emd_batch(mu_short.view(), nu.view(), c3.view(), &d);
        assert_eq!(shape_arg(r), "mu");
        let r = emd_batch(mu.view(), nu_short.view(), c3.view(), &d);
        assert_eq!(shape_arg(r), "nu");
        // Too few problems in `nu`, the rest of the shapes right.
        let r = emd_batch(mu.view(), nu.slice(ndarray::s![..1, ..]), c3.view(), &d);
        assert_eq!(shape_arg(r), "nu");
    }

    // Point clouds: the weights against the number of points.
    let x = Array2::from_shape_fn((3, 2), |(i, k)| (i * 2 + k) as f64);
    let y = Array2::from_shape_fn((2, 2), |(j, k)| (j + k) as f64 * 0.5);
    let sq = Metric::SqEuclidean;
    let r = emd_points(
        Some(a_short.view()),
        Some(b.view()),
        x.view(),
        y.view(),
        sq,
        &d,
    );
    assert_eq!(shape_arg(r), "mu");
    let r = emd_points(
        Some(a.view()),
        Some(b_short.view()),
        x.view(),
        y.view(),
        sq,
        &d,
    );
    assert_eq!(shape_arg(r), "nu");
    let r = emd_points(None, Some(b_long.view()), x.view(), y.view(), sq, &d);
    assert_eq!(shape_arg(r), "nu");
    let (xb, yb) = (
        x.clone().insert_axis(Axis(0)),
        y.clone().insert_axis(Axis(0)),
    );
    let r = emd_points_batch(
        Some(a.view().insert_axis(Axis(0))),
        Some(b_short.view().insert_axis(Axis(0))),
        xb.view(),
        yb.view(),
        sq,
        &d,
    );
    assert_eq!(shape_arg(r), "nu");
    let r = emd_points_batch(
        Some(a_short.view().insert_axis(Axis(0))),
        None,
        xb.view(),
        yb.view(),
        sq,
        &d,
    );
    assert_eq!(shape_arg(r), "mu");
}

#[test]
fn one_d_transport_names_the_weights_of_the_wrong_length() {
    let (u, v) = (array![0.0, 1.0, 3.0], array![0.5, 2.0]);
    let (a, b) = (array![0.5, 0.25, 0.25], array![0.5, 0.5]);
    let (a_short, b_short) = (array![0.5, 0.25], array![0.5]);
    let sq = Metric::SqEuclidean;
    let r = emd_1d(u.view(), v.view(), Some(a_short.view()), Some(b.view()), sq);
    assert_eq!(shape_arg(r), "a");
    let r = emd_1d(u.view(), v.view(), Some(a.view()), Some(b_short.view()), sq);
    assert_eq!(shape_arg(r), "b");
    let r = emd2_1d(u.view(), v.view(), Some(a.view()), Some(b_short.view()), sq);
    assert_eq!(shape_arg(r), "b");
    let r = emd2_1d(u.view(), v.view(), Some(a_short.view()), None, sq);
    assert_eq!(shape_arg(r), "a");
    let r = wasserstein_1d(
        u.view(),
        v.view(),
        Some(a.view()),
        Some(b_short.view()),
        1.0,
    );
    assert_eq!(shape_arg(r), "v_weights");
    let r = wasserstein_1d(
        u.view(),
        v.view(),
        Some(a_short.view()),
        Some(b.view()),
        1.0,
    );
    assert_eq!(shape_arg(r), "u_weights");
    let r = wasserstein_1d_grad(
        u.view(),
        v.view(),
        Some(a.view()),
        Some(b_short.view()),
        2.0,
    );
    assert_eq!(shape_arg(r), "v_weights");
    let r = wasserstein_1d_grad(u.view(), v.view(), Some(a_short.view()), None, 2.0);
    assert_eq!(shape_arg(r), "u_weights");
    // Batches of two: the error names the problem too.
    let (ub, vb) = (
        array![[0.0, 1.0, 3.0], [1.0, 2.0, 0.0]],
        array![[0.5, 2.0], [1.0, 0.0]],
    );
    let (ab, bb) = (
        array![[0.5, 0.25, 0.25], [0.25, 0.25, 0.5]],
        array![[0.5, 0.5], [0.5, 0.5]],
    );
    let bb_short = array![[0.5], [0.5]];
    let r = wasserstein_1d_batch(
        ub.view(),
        vb.view(),
        Some(ab.view()),
        Some(bb_short.view()),
        1.0,
    );
    assert_eq!(shape_arg(r), "v_weights[0]");
    let ab_short = array![[0.5, 0.25], [0.5, 0.25]];
    let r = wasserstein_1d_batch(
        ub.view(),
        vb.view(),
        Some(ab_short.view()),
        Some(bb.view()),
        1.0,
    );
    assert_eq!(shape_arg(r), "u_weights[0]");
    let r = wasserstein_1d_batch(
        ub.view(),
        vb.view(),
        Some(ab.view()),
        Some(bb.slice(ndarray::s![..1, ..])),
        1.0,
    );
    assert_eq!(shape_arg(r), "v_weights");
}

#[test]
fn sliced_distances_name_the_weights_of_the_wrong_length() {
    let x = Array2::from_shape_fn((3, 2), |(i, k)| (i * 2 + k) as f64);
    let y = Array2::from_shape_fn((2, 2), |(j, k)| (j + k) as f64 * 0.5);
    let (a, b) = (array![0.5, 0.25, 0.25], array![0.5, 0.5]);
    let (a_short, b_short) = (array![0.5, 0.25], array![0.5]);
    let pr = Projections::Random { count: 4, seed: 0 };
    let how = MaxSlicedSearch::Projections;
    for (wa, wb, arg) in [
        (a_short.view(), b.view(), "a"),
        (a.view(), b_short.view(), "b"),
    ] {
        let r = sliced_wasserstein_distance(x.view(), y.view(), Some(wa), Some(wb), &pr, 2.0);
        assert_eq!(shape_arg(r), arg);
        let r = sliced_wasserstein_grad(x.view(), y.view(), Some(wa), Some(wb), &pr, 2.0);
        assert_eq!(shape_arg(r), arg);
        let r =
            max_sliced_wasserstein_distance(x.view(), y.view(), Some(wa), Some(wb), &pr, 2.0, how);
        assert_eq!(shape_arg(r), arg);
        let r = max_sliced_wasserstein_grad(x.view(), y.view(), Some(wa), Some(wb), &pr, 2.0, how);
        assert_eq!(shape_arg(r), arg);
        // A batch of two pairs (the same pair twice).
        let (xb, yb) = (
            ndarray::stack(Axis(0), &[x.view(), x.view()]).unwrap(),
            ndarray::stack(Axis(0), &[y.view(), y.view()]).unwrap(),
        );
        let (wab, wbb) = (
            ndarray::stack(Axis(0), &[wa, wa]).unwrap(),
            ndarray::stack(Axis(0), &[wb, wb]).unwrap(),
        );
        let r = sliced_wasserstein_batch(
            xb.view(),
            yb.view(),
            Some(wab.view()),
            Some(wbb.view()),
            &pr,
            2.0,
        );
        assert_eq!(shape_arg(r), format!("{arg}[0]"));
        let r = sliced_wasserstein_grad_batch(
            xb.view(),
            yb.view(),
            Some(wab.view()),
            Some(wbb.view()),
            &pr,
            2.0,
        );
        assert_eq!(shape_arg(r), format!("{arg}[0]"));
    }
}
