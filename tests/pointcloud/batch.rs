//! Batched point clouds ([`PointCloudCost::batched`]: problem `k` on its own pair `x[k]`,
//! `y[k]`) on the CPU, f64: against separate single-pair solves (the same computation per
//! problem, so to rounding), against a log-sum-exp Sinkhorn written here on the dense costs
//! `to_dense` of each pair, plans and their marginals, point gradients against central
//! differences, divergences against separate calls, and the validation errors.

// The brute force indexes several arrays in step.
#![allow(clippy::needless_range_loop)]

use crate::common;
use common::relaxed::Relaxed;

use common::Lcg;
use logot::grad::CgParams;
use logot::{
    CpuBackend, DivergenceConvention, Error, PointCloudCost, PointMetric, Problem, Relaxation,
    SinkhornParams, SinkhornSolver,
};
use ndarray::{s, Array2, Array3, ArrayView2};

const B: usize = 3;

/// `B` pairs of seeded clouds with different content per problem (`x[k]` in
/// `[k/4, k/4 + 1)^d`, `y[k]` shifted and stretched), and positive weights.
fn batch(
    n: usize,
    m: usize,
    d: usize,
    seed: u64,
) -> (Array3<f64>, Array3<f64>, Array2<f64>, Array2<f64>) {
    let mut r = Lcg(seed);
    let x = Array3::from_shape_fn((B, n, d), |(k, _, _)| 0.25 * k as f64 + r.next());
    let y = Array3::from_shape_fn((B, m, d), |(k, _, _)| {
        0.1 + (1.0 + 0.2 * k as f64) * r.next()
    });
    (
        x,
        y,
        common::bin_weights(B, n, 0, seed + 1),
        common::bin_weights(B, m, 0, seed + 2),
    )
}

/// ε about a tenth of the mean cost of the clouds above.
fn eps_for(d: usize, metric: PointMetric) -> f64 {
    match metric {
        PointMetric::SqEuclidean => 0.1 * d as f64 / 6.0,
        PointMetric::Euclidean => 0.1 * (d as f64 / 6.0).sqrt(),
    }
}

/// `iters` log-domain Sinkhorn iterations (`g` then `f`) on a dense cost in f64, from zero
/// potentials; returns `(f, g, ⟨P, C⟩)`.
fn brute(
    c: ArrayView2<'_, f64>,
    mu: &[f64],
    nu: &[f64],
    eps: f64,
    iters: usize,
) -> (Vec<f64>, Vec<f64>, f64) {
    let (n, m) = c.dim();
    let lse = |v: &[f64]| {
        let mx = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        mx + v.iter().map(|t| (t - mx).exp()).sum::<f64>().ln()
    };
    let (mut f, mut g) = (vec![0.0; n], vec![0.0; m]);
    for _ in 0..iters {
        for j in 0..m {
            let v: Vec<f64> = (0..n).map(|i| (f[i] - c[[i, j]]) / eps).collect();
            g[j] = eps * nu[j].ln() - eps * lse(&v);
        }
        for i in 0..n {
            let v: Vec<f64> = (0..m).map(|j| (g[j] - c[[i, j]]) / eps).collect();
            f[i] = eps * mu[i].ln() - eps * lse(&v);
        }
    }
    let mut cost = 0.0;
    for i in 0..n {
        for j in 0..m {
            cost += ((f[i] + g[j] - c[[i, j]]) / eps).exp() * c[[i, j]];
        }
    }
    (f, g, cost)
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-300)
}

#[test]
fn batched_solves_equal_separate_solves_and_a_dense_brute_force() {
    let iters = 60;
    // d = 17 and 64 take the CPU's blocked cross-term form (from d = 14).
    for (d, metric) in [
        (1, PointMetric::SqEuclidean),
        (3, PointMetric::SqEuclidean),
        (3, PointMetric::Euclidean),
        (17, PointMetric::SqEuclidean),
        (64, PointMetric::SqEuclidean),
        (64, PointMetric::Euclidean),
    ] {
        let (n, m) = (37, 45);
        let (x, y, mu, nu) = batch(n, m, d, 7 + d as u64);
        let eps = eps_for(d, metric);
        let params = SinkhornParams::new(eps).max_iters(iters).tol(0.0);
        let solver = SinkhornSolver::new(CpuBackend, params);
        let cost = PointCloudCost::batched_with_metric(x.view(), y.view(), metric).unwrap();
        assert_eq!(cost.batch(), Some(B));
        let all = solver
            .coupling(&Problem::new(mu.view(), nu.view(), cost.clone()).unwrap())
            .unwrap();
        assert_eq!(all.result.convergence.iterations, iters);
        for k in 0..B {
            let one =
                PointCloudCost::with_metric(x.slice(s![k, .., ..]), y.slice(s![k, .., ..]), metric)
                    .unwrap();
            let (mk, nk) = (mu.slice(s![k..k + 1, ..]), nu.slice(s![k..k + 1, ..]));
            let sep = solver
                .solve(&Problem::new(mk, nk, one.clone()).unwrap())
                .unwrap();
            let tag = format!("d={d} {metric:?} problem {k}");
            // The same kernels on the same pair: equal to rounding.
            assert!(
                rel(all.result.distance[k], sep.distance[0]) < 1e-12,
                "{tag}: {} vs {}",
                all.result.distance[k],
                sep.distance[0]
            );
            for (a, b) in all.result.f.row(k).iter().zip(sep.f.row(0)) {
                assert!(
                    (a - b).abs() < 1e-12 * (1.0 + b.abs()),
                    "{tag} f: {a} vs {b}"
                );
            }
            // The dense reference on this problem's own pair (not problem 0's).
            let dense = cost.problem(k).to_dense();
            assert_eq!(dense, one.to_dense());
            let (bf, bg, bc) = brute(
                dense.view(),
                mu.row(k).as_slice().unwrap(),
                nu.row(k).as_slice().unwrap(),
                eps,
                iters,
            );
            assert!(
                rel(all.result.distance[k], bc) < 1e-10,
                "{tag}: {} vs brute force {bc}",
                all.result.distance[k]
            );
            let fs = all.result.f.row(k);
            for i in 0..n {
                assert!(
                    (fs[i] - bf[i]).abs() < 1e-10 * (1.0 + bf[i].abs()),
                    "{tag} f[{i}]"
                );
            }
            for j in 0..m {
                assert!(
                    (all.result.g[[k, j]] - bg[j]).abs() < 1e-10 * (1.0 + bg[j].abs()),
                    "{tag} g[{j}]"
                );
            }
            // The plan of problem k: its entries from the brute-force potentials, and its
            // column marginal ν_k (the last half-step is g's partner f, so rows are exact).
            let plan = all.plan.index_axis(ndarray::Axis(0), k);
            for i in 0..n {
                let row: f64 = plan.row(i).sum();
                assert!((row - mu[[k, i]]).abs() < 1e-12, "{tag} row {i}: {row}");
                for j in 0..m {
                    let want = ((bf[i] + bg[j] - dense[[i, j]]) / eps).exp();
                    assert!(
                        (plan[[i, j]] - want).abs() < 1e-10 * want.max(1e-3),
                        "{tag} P[{i},{j}]"
                    );
                }
            }
        }
    }
}

#[test]
fn batched_reports_eps_scaling_and_unbalanced_follow_each_problem() {
    let (n, m, d) = (30, 26, 3);
    let (x, y, mu, nu) = batch(n, m, d, 41);
    let eps = 0.01;
    let cost = PointCloudCost::batched(x.view(), y.view()).unwrap();
    // ε-scaling from the largest cost of every pair; converged per problem.
    let params = SinkhornParams::new(eps)
        .eps_scaling(cost.eps_scaling())
        .tol(1e-10)
        .max_iters(5000);
    let solver = SinkhornSolver::new(CpuBackend, params.clone());
    let r = solver
        .solve(&Problem::new(mu.view(), nu.view(), cost.clone()).unwrap())
        .unwrap();
    assert!(r.convergence.converged, "{:?}", r.convergence);
    assert_eq!(r.convergence.problems.len(), B);
    for k in 0..B {
        let one = cost.problem(k);
        let sep = solver
            .solve(
                &Problem::new(mu.slice(s![k..k + 1, ..]), nu.slice(s![k..k + 1, ..]), one).unwrap(),
            )
            .unwrap();
        // Both converged to 1e-10 of the mass: the same transport cost to about that.
        assert!(
            rel(r.distance[k], sep.distance[0]) < 1e-7,
            "problem {k}: {} vs {}",
            r.distance[k],
            sep.distance[0]
        );
        assert!(r.convergence.problems[k].marginal_error <= 1e-10 * 1.0 + 1e-15);
    }
    // Distinct clouds give distinct problems (x[k] is moved by k/4).
    assert!((r.distance[0] - r.distance[2]).abs() > 1e-3);
    // Unbalanced: the batched solve against separate ones, all iterations run.
    let un = SinkhornParams::new(0.05).tol(0.0).max_iters(200);
    let solver = Relaxed::new(SinkhornSolver::new(CpuBackend, un), Relaxation::kl(0.5));
    let r = solver
        .solve(&Problem::new(mu.view(), nu.view(), cost.clone()).unwrap())
        .unwrap();
    for k in 0..B {
        let sep = solver
            .solve(
                &Problem::new(
                    mu.slice(s![k..k + 1, ..]),
                    nu.slice(s![k..k + 1, ..]),
                    cost.problem(k),
                )
                .unwrap(),
            )
            .unwrap();
        assert!(
            rel(r.distance[k], sep.distance[0]) < 1e-12,
            "unbalanced problem {k}"
        );
    }
}

#[test]
fn batched_point_gradients_match_separate_ones_and_central_differences() {
    let (n, m, d) = (9, 7, 3);
    let (x, y, mu, nu) = batch(n, m, d, 5);
    let solver = SinkhornSolver::new(
        CpuBackend,
        SinkhornParams::new(0.1).tol(1e-13).max_iters(20000),
    );
    let cost = PointCloudCost::batched(x.view(), y.view()).unwrap();
    let pr = Problem::new(mu.view(), nu.view(), cost.clone()).unwrap();
    let pg = solver.point_gradients(&pr).unwrap();
    let tg = solver
        .transport_point_gradients(&pr, &CgParams::default())
        .unwrap();
    assert!(tg.cg.all_converged());
    assert_eq!(pg.x.dim(), (B, n, d));
    // OT_ε and ⟨P, C⟩ of problem k as functions of its clouds.
    let values = |x: &Array3<f64>, y: &Array3<f64>| -> (Vec<f64>, Vec<f64>) {
        let c = PointCloudCost::batched(x.view(), y.view()).unwrap();
        let p = Problem::new(mu.view(), nu.view(), c).unwrap();
        let g = solver.point_gradients(&p).unwrap();
        (g.value.to_vec(), g.result.distance.to_vec())
    };
    let h = 1e-5;
    for k in 0..B {
        for (which, i, t) in [(0, 2, 1), (0, 8, 0), (1, 3, 2), (1, 0, 0)] {
            let (mut up_x, mut dn_x, mut up_y, mut dn_y) =
                (x.clone(), x.clone(), y.clone(), y.clone());
            if which == 0 {
                up_x[[k, i, t]] += h;
                dn_x[[k, i, t]] -= h;
            } else {
                up_y[[k, i, t]] += h;
                dn_y[[k, i, t]] -= h;
            }
            let (vu, du) = values(&up_x, &up_y);
            let (vd, dd) = values(&dn_x, &dn_y);
            let (ge, gt) = if which == 0 {
                (pg.x[[k, i, t]], tg.x[[k, i, t]])
            } else {
                (pg.y[[k, i, t]], tg.y[[k, i, t]])
            };
            let num = (vu[k] - vd[k]) / (2.0 * h);
            assert!(
                (num - ge).abs() < 1e-7,
                "OT_ε problem {k} {which} {i},{t}: {num} vs {ge}"
            );
            let num = (du[k] - dd[k]) / (2.0 * h);
            assert!(
                (num - gt).abs() < 1e-7,
                "<P,C> problem {k} {which} {i},{t}: {num} vs {gt}"
            );
            // Moving problem k's points changes no other problem.
            for o in (0..B).filter(|&o| o != k) {
                assert!((vu[o] - vd[o]).abs() < 1e-13, "problem {o} moved with {k}");
            }
        }
        // And the separate problem's gradients.
        let one = Problem::new(
            mu.slice(s![k..k + 1, ..]),
            nu.slice(s![k..k + 1, ..]),
            cost.problem(k),
        )
        .unwrap();
        let sep = solver.point_gradients(&one).unwrap();
        let diff = (&sep.x.index_axis(ndarray::Axis(0), 0) - &pg.x.index_axis(ndarray::Axis(0), k))
            .iter()
            .fold(0.0f64, |a, v| a.max(v.abs()));
        assert!(diff < 1e-10, "problem {k}: {diff}");
    }
}

#[test]
fn batched_divergences_match_separate_calls() {
    let (n, m, d) = (12, 10, 2);
    let (x, y, mu, nu) = batch(n, m, d, 9);
    // The batch iterates until every problem has met the tolerance, so a problem that met it
    // earlier ran more iterations than alone: the two agree to the tolerance, not the bit.
    let tol = 1e-12;
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05).tol(tol));
    let cost = PointCloudCost::batched(x.view(), y.view()).unwrap();
    for conv in [
        DivergenceConvention::Objective,
        DivergenceConvention::Linear,
    ] {
        let problem = Problem::new(mu.view(), nu.view(), cost.clone()).unwrap();
        let all = solver.sinkhorn_divergence(&problem, conv).unwrap();
        assert_eq!(all.value.len(), B);
        for k in 0..B {
            let one = PointCloudCost::new(x.slice(s![k, .., ..]), y.slice(s![k, .., ..])).unwrap();
            let sep = solver
                .sinkhorn_divergence(&Problem::new(mu.row(k), nu.row(k), one).unwrap(), conv)
                .unwrap();
            let close = |a: f64, b: f64| (a - b).abs() <= 100.0 * tol * (1.0 + b.abs());
            assert!(
                close(all.value[k], sep.value[0]),
                "{conv:?} problem {k}: {} vs {}",
                all.value[k],
                sep.value[0]
            );
            for (a, b) in [(&all.grad_x, &sep.grad_x), (&all.grad_y, &sep.grad_y)] {
                assert_eq!(a.is_some(), b.is_some());
                if let (Some(a), Some(b)) = (a, b) {
                    ndarray::Zip::from(a.index_axis(ndarray::Axis(0), k))
                        .and(b.index_axis(ndarray::Axis(0), 0))
                        .for_each(|&a, &b| {
                            assert!(close(a, b), "{conv:?} problem {k}: {a} vs {b}")
                        });
                }
            }
            // Each of the three solves reports on every problem, problem k alone in its entry.
            for (c, alone) in all.convergence.iter().zip(&sep.convergence) {
                assert_eq!(c.problems.len(), B);
                assert_eq!(c.problems[k].converged, alone.problems[0].converged);
            }
            assert!(all.value[k] > 0.0);
        }
        assert!(all.converged());
    }
    // Clouds of another batch size than the weights: the clouds are named.
    let e = Problem::new(mu.slice(s![..2, ..]), nu.slice(s![..2, ..]), cost).unwrap_err();
    assert!(matches!(&e, Error::Shape { arg, .. } if arg == "x"), "{e}");
}

#[test]
fn batched_clouds_are_validated_naming_the_argument() {
    let (x, y, mu, nu) = batch(5, 4, 3, 3);
    let shape = |e: Error, want: &str| {
        assert!(
            matches!(&e, Error::Shape { arg, .. } if arg == want),
            "{want}: {e}"
        )
    };
    // Another batch size in y, another dimension, NaN, an empty batch.
    shape(
        PointCloudCost::batched(x.view(), y.slice(s![..2, .., ..])).unwrap_err(),
        "y",
    );
    shape(
        PointCloudCost::batched(x.view(), y.slice(s![.., .., ..2])).unwrap_err(),
        "y",
    );
    let mut bad = y.clone();
    bad[[2, 1, 0]] = f64::NAN;
    let e = PointCloudCost::batched(x.view(), bad.view()).unwrap_err();
    assert!(
        matches!(&e, Error::NonFinite { arg, .. } if arg == "y"),
        "{e}"
    );
    let mut bad = x.clone();
    bad[[1, 0, 2]] = f64::INFINITY;
    let e = PointCloudCost::batched(bad.view(), y.view()).unwrap_err();
    assert!(
        matches!(&e, Error::NonFinite { arg, .. } if arg == "x"),
        "{e}"
    );
    let e =
        PointCloudCost::batched(x.slice(s![..0, .., ..]), y.slice(s![..0, .., ..])).unwrap_err();
    assert!(matches!(&e, Error::Empty { arg, .. } if arg == "x"), "{e}");
    // Weights for another number of problems than the clouds: the clouds are named.
    let cost = PointCloudCost::batched(x.view(), y.view()).unwrap();
    shape(
        Problem::new(mu.slice(s![..2, ..]), nu.slice(s![..2, ..]), cost.clone()).unwrap_err(),
        "x",
    );
    // Weights for another number of points: the weights are named.
    shape(
        Problem::new(mu.slice(s![.., ..4]), nu.view(), cost).unwrap_err(),
        "mu",
    );
}
