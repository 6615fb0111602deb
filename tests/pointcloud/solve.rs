//! Point-cloud costs computed on the fly, against independent references: the dense-cost
//! kernels and solver with the cost matrix built here by a plain loop, POT 0.9.7 with the
//! explicit cost, central finite differences, and the divergence's defining properties.

use crate::common;

use common::Lcg;
use logot::backend::Side;
use logot::grad::{check_gradient, GradCheckParams};
use logot::{
    Backend, BufferOutputs, BufferProblem, CloudLayout, CostSource, CpuBackend, EpsScaling, Error,
    PointCloudCost, PointCloudKernels, PointMetric, Problem, SinkhornParams, SinkhornSolver,
};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};

/// The Sinkhorn divergence (objective convention, squared Euclidean) with `params`.
fn divergence(
    params: &SinkhornParams,
    mu: ArrayView1<'_, f64>,
    nu: ArrayView1<'_, f64>,
    x: ArrayView2<'_, f64>,
    y: ArrayView2<'_, f64>,
) -> logot::Result<logot::DivergenceResult<f64>> {
    SinkhornSolver::new(CpuBackend, params.clone()).sinkhorn_divergence(
        &Problem::new(mu, nu, PointCloudCost::new(x, y)?)?,
        logot::DivergenceConvention::Objective,
    )
}

fn cloud(seed: u64, n: usize, d: usize, lo: f64, hi: f64) -> Array2<f64> {
    let mut r = Lcg(seed);
    Array2::from_shape_simple_fn((n, d), || r.uniform(lo, hi))
}

fn weights(seed: u64, n: usize) -> Array1<f64> {
    let mut r = Lcg(seed);
    let w = Array1::from_shape_simple_fn(n, || r.next() + 0.1);
    let s = w.sum();
    w / s
}

/// The cost matrix by a plain loop (independent of the library).
fn dense_cost(x: &Array2<f64>, y: &Array2<f64>, metric: PointMetric) -> Array2<f64> {
    Array2::from_shape_fn((x.nrows(), y.nrows()), |(i, j)| {
        let mut s = 0.0;
        for k in 0..x.ncols() {
            s += (x[[i, k]] - y[[j, k]]).powi(2);
        }
        match metric {
            PointMetric::SqEuclidean => s,
            _ => s.sqrt(),
        }
    })
}

fn rel_close(a: f64, b: f64, tol: f64) -> bool {
    a == b || (a - b).abs() <= tol * a.abs().max(b.abs()).max(1.0)
}

fn f32s(a: &[f64]) -> Vec<f32> {
    a.iter().map(|&v| v as f32).collect()
}

#[test]
fn half_steps_match_the_dense_kernels() {
    let be = CpuBackend;
    // Sizes cross lane, row-block and tile boundaries; d = 1, 2, 3 use the fixed-dimension
    // kernels, d = 5 and 8 the general one.
    for (n, m, d, metric, eps) in [
        (37, 1100, 3, PointMetric::SqEuclidean, 0.05),
        (70, 45, 1, PointMetric::SqEuclidean, 0.01),
        (33, 600, 2, PointMetric::Euclidean, 0.02),
        (64, 17, 5, PointMetric::SqEuclidean, 0.3),
        (9, 530, 8, PointMetric::Euclidean, 0.1),
        (41, 29, 3, PointMetric::Euclidean, 0.05),
        // Small ε: arguments up to ~10⁵ in f32, still finite and accurate.
        (50, 300, 3, PointMetric::SqEuclidean, 1e-4),
    ] {
        let x = cloud(n as u64, n, d, -1.0, 1.0);
        let y = cloud(m as u64 + 7, m, d, -0.5, 1.5);
        let c = dense_cost(&x, &y, metric);
        let batch = 2;
        let mut r = Lcg(5);
        // Potentials with (f_i + g_j)/ε bounded, so that the plans below stay finite.
        let amp = f64::min(30.0 * eps, 0.3);
        let mut f: Vec<f64> = (0..batch * n).map(|_| r.uniform(-amp, amp)).collect();
        let mut g: Vec<f64> = (0..batch * m).map(|_| r.uniform(-amp, amp)).collect();
        let mut lmu: Vec<f64> = (0..batch * n).map(|_| r.uniform(-6.0, -3.0)).collect();
        let lnu: Vec<f64> = (0..batch * m).map(|_| r.uniform(-6.0, -3.0)).collect();
        // Zero-mass bins: −∞ potentials and log-marginals.
        f[3] = f64::NEG_INFINITY;
        g[m + 1] = f64::NEG_INFINITY;
        lmu[n + 2] = f64::NEG_INFINITY;
        let pc = be
            .prepare_cost(
                &PointCloudCost::with_metric(x.view(), y.view(), metric)
                    .unwrap()
                    .into(),
            )
            .unwrap();
        let dc = be.prepare_cost(&CostSource::Dense(c.view())).unwrap();
        for (side, other, lm, len) in [(Side::Col, &f, &lnu, m), (Side::Row, &g, &lmu, n)] {
            let mut want = vec![0.0; batch * len];
            be.sinkstep(&dc, side, eps, other, lm, &mut want).unwrap();
            let mut got = vec![0.0; batch * len];
            be.sinkstep(&pc, side, eps, other, lm, &mut got).unwrap();
            for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                assert!(
                    rel_close(*a, *b, 1e-12),
                    "n={n} m={m} d={d} {side:?} entry {k}: {a} vs {b}"
                );
            }
            // f32: the same problem rounded, against the f64 dense result.
            let pc32 = be
                .prepare_cost(
                    &PointCloudCost::with_metric(
                        x.mapv(|v| v as f32).view(),
                        y.mapv(|v| v as f32).view(),
                        metric,
                    )
                    .unwrap()
                    .into(),
                )
                .unwrap();
            let mut got32 = vec![0.0f32; batch * len];
            be.sinkstep(&pc32, side, eps as f32, &f32s(other), &f32s(lm), &mut got32)
                .unwrap();
            for (k, (a, b)) in got32.iter().zip(&want).enumerate() {
                assert!(
                    rel_close(*a as f64, *b, 2e-5),
                    "f32 n={n} m={m} d={d} {side:?} entry {k}: {a} vs {b}"
                );
            }
        }
        // Transport cost and plan with the potentials above (not a solved pair: any f, g).
        let tc = be.transport_cost(&pc, &f, &g, eps).unwrap();
        let tc_dense = be.transport_cost(&dc, &f, &g, eps).unwrap();
        for (a, b) in tc.iter().zip(&tc_dense) {
            assert!(rel_close(*a, *b, 1e-12), "transport cost {a} vs {b}");
        }
        let p = be.plan(&pc, &f, &g, eps).unwrap();
        let p_dense = be.plan(&dc, &f, &g, eps).unwrap();
        for (a, b) in p.iter().zip(&p_dense) {
            assert!(rel_close(*a, *b, 1e-12), "plan {a} vs {b}");
        }
        // Plan-weighted displacements against the dense plan: Σ_j P_ij ∇_x c(x_i, y_j).
        for side in [Side::Row, Side::Col] {
            let (mass, grad) = be.point_gradient(&pc, side, &f, &g, eps).unwrap();
            let len = if side == Side::Row { n } else { m };
            for b in 0..batch {
                for k in 0..len {
                    let (mut w_mass, mut w_grad) = (0.0, vec![0.0; d]);
                    let others = if side == Side::Row { m } else { n };
                    for l in 0..others {
                        let (i, j) = if side == Side::Row { (k, l) } else { (l, k) };
                        let pij = p_dense[b * n * m + i * m + j];
                        w_mass += pij;
                        let dist = c[[i, j]].sqrt();
                        for (t, wg) in w_grad.iter_mut().enumerate() {
                            let diff = if side == Side::Row {
                                x[[i, t]] - y[[j, t]]
                            } else {
                                y[[j, t]] - x[[i, t]]
                            };
                            *wg += match metric {
                                PointMetric::SqEuclidean => 2.0 * pij * diff,
                                _ if dist > 0.0 => pij * diff / c[[i, j]],
                                _ => 0.0,
                            };
                        }
                    }
                    let scale = w_mass.max(1e-300);
                    assert!(rel_close(mass[b * len + k], w_mass, 1e-12));
                    for t in 0..d {
                        let got = grad[(b * len + k) * d + t];
                        assert!(
                            (got - w_grad[t]).abs() <= 1e-11 * scale,
                            "{side:?} grad {b},{k},{t}: {got} vs {}",
                            w_grad[t]
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn plan_applied_on_the_fly_equals_the_dense_plan_product() {
    let be = CpuBackend;
    let (n, m, d, k, batch, eps) = (45, 530, 3, 4, 2, 0.05);
    let (x, y) = (cloud(81, n, d, 0.0, 1.0), cloud(82, m, d, 0.0, 1.0));
    let mut r = Lcg(83);
    let f: Vec<f64> = (0..batch * n).map(|_| r.uniform(-0.3, 0.3)).collect();
    let g: Vec<f64> = (0..batch * m).map(|_| r.uniform(-0.3, 0.3)).collect();
    let pc = be
        .prepare_cost(&PointCloudCost::new(x.view(), y.view()).unwrap().into())
        .unwrap();
    let c = dense_cost(&x, &y, PointMetric::SqEuclidean);
    let plan =
        |b: usize, i: usize, j: usize| ((f[b * n + i] + g[b * m + j] - c[[i, j]]) / eps).exp();
    for (side, len_out, len_red) in [(Side::Row, n, m), (Side::Col, m, n)] {
        for shared in [true, false] {
            let vb = if shared { 1 } else { batch };
            let vals: Vec<f64> = (0..vb * len_red * k)
                .map(|_| r.uniform(-1.0, 1.0))
                .collect();
            let got = be.plan_apply(&pc, side, &f, &g, eps, &vals, k).unwrap();
            assert_eq!(got.len(), batch * len_out * k);
            for b in 0..batch {
                let v0 = if shared { 0 } else { b * len_red * k };
                for o in 0..len_out {
                    for ch in 0..k {
                        let mut want = 0.0;
                        let mut scale = 0.0;
                        for l in 0..len_red {
                            let p = if side == Side::Row {
                                plan(b, o, l)
                            } else {
                                plan(b, l, o)
                            };
                            want += p * vals[v0 + l * k + ch];
                            scale += p;
                        }
                        let have = got[(b * len_out + o) * k + ch];
                        assert!(
                            (have - want).abs() <= 1e-12 * scale,
                            "{side:?} shared={shared} [{b},{o},{ch}]: {have} vs {want}"
                        );
                    }
                }
            }
        }
    }
    assert!(be
        .plan_apply(&pc, Side::Row, &f, &g, eps, &vec![0.0; 7], k)
        .is_err());
}

#[test]
fn solver_on_point_clouds_equals_the_dense_solver() {
    let (x, y) = (cloud(11, 60, 3, 0.0, 1.0), cloud(12, 75, 3, 0.0, 1.0));
    let (mu, nu) = (weights(13, 60), weights(14, 75));
    let c = dense_cost(&x, &y, PointMetric::SqEuclidean);
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.02));
    let (mu2, nu2) = (
        mu.view().insert_axis(Axis(0)),
        nu.view().insert_axis(Axis(0)),
    );
    let on_cloud = solver
        .coupling(
            &Problem::new(mu2, nu2, PointCloudCost::new(x.view(), y.view()).unwrap()).unwrap(),
        )
        .unwrap();
    let dense = solver
        .coupling(&Problem::new(mu2, nu2, c.view()).unwrap())
        .unwrap();
    let (a, b) = (&on_cloud.result, &dense.result);
    assert_eq!(a.convergence.iterations, b.convergence.iterations);
    assert!(a.convergence.converged);
    assert!(
        rel_close(a.distance[0], b.distance[0], 1e-12),
        "{} vs {}",
        a.distance[0],
        b.distance[0]
    );
    for (p, q) in a.f.iter().zip(&b.f).chain(a.g.iter().zip(&b.g)) {
        assert!((p - q).abs() < 1e-12, "{p} vs {q}");
    }
    for (p, q) in on_cloud.plan.iter().zip(&dense.plan) {
        assert!((p - q).abs() < 1e-14);
    }
    // f32 against the f64 dense answer.
    let (x32, y32) = (x.mapv(|v| v as f32), y.mapv(|v| v as f32));
    let (mu32, nu32) = (mu.mapv(|v| v as f32), nu.mapv(|v| v as f32));
    let r32 = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.02))
        .solve(
            &Problem::new(
                mu32.view().insert_axis(Axis(0)),
                nu32.view().insert_axis(Axis(0)),
                PointCloudCost::new(x32.view(), y32.view()).unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
    assert!(r32.convergence.converged);
    assert!(
        rel_close(r32.distance[0] as f64, b.distance[0], 1e-5),
        "{} vs {}",
        r32.distance[0],
        b.distance[0]
    );
}

/// Values from tests/data/make_pot_pointcloud.py (POT 0.9.7, explicit cost `ot.dist`):
/// ```python
/// X = cloud(1, 40, 3, 0.0, 1.0); Y = cloud(2, 55, 3, 0.2, 1.3)   # the test's LCG
/// a, b = weights(3, 40), weights(4, 55)
/// ot.sinkhorn2(a, b, ot.dist(X, Y), 0.05)                        # 0.2666799041779796
/// ot.sinkhorn2(a, b, ot.dist(X, Y), 0.01)                        # 0.23960126731017928
/// ot.sinkhorn2(a, b, ot.dist(X, Y, metric="euclidean"), 0.05)    # 0.4897888089138164
/// # OT_eps = a@f + b@g - reg*P.sum() from ot.sinkhorn(..., method="sinkhorn_log", log=True)
/// ot_eps(a, b, ot.dist(X, Y), 0.05)                              # -0.06603806605895794
/// ot_eps(a, b, M_XY) - (ot_eps(a, a, M_XX) + ot_eps(b, b, M_YY)) / 2  # 0.21335338458643432
/// ```
#[test]
fn matches_pot_with_the_explicit_cost() {
    let (x, y) = (cloud(1, 40, 3, 0.0, 1.0), cloud(2, 55, 3, 0.2, 1.3));
    let (a, b) = (weights(3, 40), weights(4, 55));
    let (a2, b2) = (a.view().insert_axis(Axis(0)), b.view().insert_axis(Axis(0)));
    for (metric, eps, want) in [
        (PointMetric::SqEuclidean, 0.05, 0.2666799041779796),
        (PointMetric::SqEuclidean, 0.01, 0.23960126731017928),
        (PointMetric::Euclidean, 0.05, 0.4897888089138164),
    ] {
        let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
        let r = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps))
            .solve(&Problem::new(a2, b2, cost).unwrap())
            .unwrap();
        assert!(r.convergence.converged);
        let rel = (r.distance[0] - want).abs() / want;
        // Both solvers stop at a marginal error of 1e-9 (checked at different points), so the
        // values agree to about that, far inside the 1e-6 target.
        assert!(
            rel < 2e-8,
            "{metric:?} eps={eps}: {} vs POT {want} (rel {rel:e})",
            r.distance[0]
        );
    }
    let pg = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05))
        .point_gradients(
            &Problem::new(a2, b2, PointCloudCost::new(x.view(), y.view()).unwrap()).unwrap(),
        )
        .unwrap();
    let want = -0.06603806605895794;
    assert!(
        (pg.value[0] - want).abs() < 1e-10,
        "OT_eps {} vs {want}",
        pg.value[0]
    );
    let s = divergence(
        &SinkhornParams::new(0.05),
        a.view(),
        b.view(),
        x.view(),
        y.view(),
    )
    .unwrap();
    let want = 0.21335338458643432;
    assert!(
        s.converged() && (s.value[0] - want).abs() < 1e-9 * want,
        "S {} vs {want}",
        s.value[0]
    );
    // The convenience function runs the same solver.
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let w = logot::wasserstein(a.view(), b.view(), cost, 0.05).unwrap();
    assert!((w.distance[0] - 0.2666799041779796).abs() < 1e-9);
}

/// `OT_ε` with a tight solve (fixed iterations: a smooth function of the points).
fn ot_value(
    x: &Array2<f64>,
    y: &Array2<f64>,
    a: &Array1<f64>,
    b: &Array1<f64>,
    metric: PointMetric,
    eps: f64,
) -> f64 {
    let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
    let p = Problem::new(
        a.view().insert_axis(Axis(0)),
        b.view().insert_axis(Axis(0)),
        cost,
    )
    .unwrap();
    SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps).fixed_iterations(3000))
        .point_gradients(&p)
        .unwrap()
        .value[0]
}

#[test]
fn point_gradients_match_finite_differences() {
    for (metric, eps) in [
        (PointMetric::SqEuclidean, 0.1),
        (PointMetric::Euclidean, 0.2),
    ] {
        let (x, y) = (cloud(21, 6, 2, 0.0, 1.0), cloud(22, 7, 2, 0.0, 1.0));
        let (a, b) = (weights(23, 6), weights(24, 7));
        let cost = PointCloudCost::with_metric(x.view(), y.view(), metric).unwrap();
        let p = Problem::new(
            a.view().insert_axis(Axis(0)),
            b.view().insert_axis(Axis(0)),
            cost,
        )
        .unwrap();
        let pg = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps).fixed_iterations(3000))
            .point_gradients(&p)
            .unwrap();
        let opts = GradCheckParams::default().rel_tol(1e-6).abs_floor(1e-8);
        let gx: Vec<f64> = pg.x.iter().copied().collect();
        let rx = check_gradient(
            |v| {
                ot_value(
                    &Array2::from_shape_vec(x.dim(), v.to_vec()).unwrap(),
                    &y,
                    &a,
                    &b,
                    metric,
                    eps,
                )
            },
            x.as_slice().unwrap(),
            &gx,
            &opts,
        )
        .unwrap();
        assert!(rx.passed, "{metric:?} x: {rx}");
        let gy: Vec<f64> = pg.y.iter().copied().collect();
        let ry = check_gradient(
            |v| {
                ot_value(
                    &x,
                    &Array2::from_shape_vec(y.dim(), v.to_vec()).unwrap(),
                    &a,
                    &b,
                    metric,
                    eps,
                )
            },
            y.as_slice().unwrap(),
            &gy,
            &opts,
        )
        .unwrap();
        assert!(ry.passed, "{metric:?} y: {ry}");
        // Translation invariance: moving both clouds together changes nothing, so the
        // gradients sum to zero over all points.
        let total: f64 = pg.x.sum_axis(Axis(1)).sum() + pg.y.sum_axis(Axis(1)).sum();
        assert!(total.abs() < 1e-10, "{metric:?}: Σ grad = {total:e}");
    }
}

#[test]
fn divergence_vanishes_for_identical_clouds_and_is_positive_otherwise() {
    let params = SinkhornParams::new(0.05).tol(1e-12);
    let x = cloud(31, 30, 3, 0.0, 1.0);
    let a = weights(32, 30);
    let same = divergence(&params, a.view(), a.view(), x.view(), x.view()).unwrap();
    assert!(same.converged());
    assert!(same.value[0].abs() < 1e-12, "S(μ, μ) = {:e}", same.value[0]);
    assert!(same
        .grad_x
        .as_ref()
        .unwrap()
        .iter()
        .chain(same.grad_y.as_ref().unwrap().iter())
        .all(|g| g.abs() < 1e-10));
    for (shift, seed) in [(0.05, 33), (0.3, 34), (0.0, 35)] {
        // Shifted copies, and (shift 0) an unrelated cloud with other weights.
        let y = if shift > 0.0 {
            &x + shift
        } else {
            cloud(seed, 25, 3, 0.0, 1.0)
        };
        let b = if shift > 0.0 {
            a.clone()
        } else {
            weights(seed + 1, 25)
        };
        let s = divergence(&params, a.view(), b.view(), x.view(), y.view()).unwrap();
        assert!(
            s.converged() && s.value[0] > 0.0,
            "shift {shift}: S = {}, {:?}",
            s.value[0],
            s.convergence
        );
        let back = divergence(&params, b.view(), a.view(), y.view(), x.view()).unwrap();
        assert!(
            (s.value[0] - back.value[0]).abs() < 1e-12,
            "S is symmetric: {} vs {}",
            s.value[0],
            back.value[0]
        );
        if shift > 0.0 {
            // A translation y = x + t adds the separable term −2⟨x_i − x_j, t⟩ + |t|² to the
            // cost, which leaves the plan unchanged and (equal marginals) adds exactly |t|² to
            // OT_ε: S_ε(μ, T_t μ) = |t|² = d·shift².
            let want = 3.0 * shift * shift;
            assert!(
                (s.value[0] - want).abs() < 1e-10,
                "S = {} vs |t|² = {want}",
                s.value[0]
            );
        }
    }
}

#[test]
fn divergence_gradient_matches_finite_differences() {
    let (x, y) = (cloud(41, 5, 2, 0.0, 1.0), cloud(42, 6, 2, 0.0, 1.0));
    let (a, b) = (weights(43, 5), weights(44, 6));
    let params = SinkhornParams::new(0.1).fixed_iterations(3000);
    let s = divergence(&params, a.view(), b.view(), x.view(), y.view()).unwrap();
    let value = |xv: &Array2<f64>, yv: &Array2<f64>| {
        divergence(&params, a.view(), b.view(), xv.view(), yv.view())
            .unwrap()
            .value[0]
    };
    let opts = GradCheckParams::default().rel_tol(1e-6).abs_floor(1e-8);
    let gx: Vec<f64> = s.grad_x.as_ref().unwrap().iter().copied().collect();
    let rx = check_gradient(
        |v| value(&Array2::from_shape_vec(x.dim(), v.to_vec()).unwrap(), &y),
        x.as_slice().unwrap(),
        &gx,
        &opts,
    )
    .unwrap();
    assert!(rx.passed, "x: {rx}");
    let gy: Vec<f64> = s.grad_y.as_ref().unwrap().iter().copied().collect();
    let ry = check_gradient(
        |v| value(&x, &Array2::from_shape_vec(y.dim(), v.to_vec()).unwrap()),
        y.as_slice().unwrap(),
        &gy,
        &opts,
    )
    .unwrap();
    assert!(ry.passed, "y: {ry}");
}

#[test]
fn eps_scaling_from_the_diameter_reaches_the_same_answer_in_fewer_iterations() {
    let (x, y) = (cloud(51, 200, 3, 0.0, 1.0), cloud(52, 220, 3, 0.0, 1.0));
    let (a, b) = (weights(53, 200), weights(54, 220));
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let sched = cost.eps_scaling();
    // The bounding box of both clouds: a bound on every cost, no larger than the box's 3.
    let cmax = dense_cost(&x, &y, PointMetric::SqEuclidean).fold(0.0f64, |m, &v| m.max(v));
    assert!(
        sched.start >= cmax && sched.start <= 3.0,
        "{} vs {cmax}",
        sched.start
    );
    let eps = 2e-3;
    let p = Problem::new(
        a.view().insert_axis(Axis(0)),
        b.view().insert_axis(Axis(0)),
        cost,
    )
    .unwrap();
    let base = SinkhornParams::new(eps).max_iters(20_000);
    let plain = SinkhornSolver::new(CpuBackend, base.clone())
        .solve(&p)
        .unwrap();
    let annealed = SinkhornSolver::new(CpuBackend, base.eps_scaling(sched))
        .solve(&p)
        .unwrap();
    assert!(plain.convergence.converged && annealed.convergence.converged);
    assert!(
        annealed.convergence.iterations < plain.convergence.iterations,
        "{} vs {}",
        annealed.convergence.iterations,
        plain.convergence.iterations
    );
    assert!(rel_close(annealed.distance[0], plain.distance[0], 1e-7));
    let e = EpsScaling::from_diameter(2.0, 2);
    assert_eq!(e.start, 4.0);
}

#[test]
fn invalid_inputs_name_the_argument() {
    let x = cloud(61, 4, 3, 0.0, 1.0);
    let y2 = cloud(62, 5, 2, 0.0, 1.0);
    let y = cloud(63, 5, 3, 0.0, 1.0);
    let (a, b) = (weights(64, 4), weights(65, 5));
    let arg_of = |e: Error| match e {
        Error::Shape { arg, .. } | Error::Empty { arg, .. } | Error::NonFinite { arg, .. } => arg,
        other => panic!("unexpected error {other}"),
    };
    assert_eq!(
        arg_of(PointCloudCost::new(x.view(), y2.view()).unwrap_err()),
        "y"
    );
    let mut nan = x.clone();
    nan[[2, 1]] = f64::NAN;
    assert_eq!(
        arg_of(PointCloudCost::new(nan.view(), y.view()).unwrap_err()),
        "x"
    );
    let empty = Array2::<f64>::zeros((0, 3));
    assert_eq!(
        arg_of(PointCloudCost::new(x.view(), empty.view()).unwrap_err()),
        "y"
    );
    let flat = Array2::<f64>::zeros((4, 0));
    assert_eq!(
        arg_of(PointCloudCost::new(flat.view(), flat.view()).unwrap_err()),
        "x"
    );
    // Marginals that do not fit the clouds.
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let e = Problem::new(
        b.view().insert_axis(Axis(0)),
        b.view().insert_axis(Axis(0)),
        cost,
    )
    .unwrap_err();
    assert_eq!(arg_of(e), "mu");
    let params = SinkhornParams::new(0.1);
    let e = divergence(&params, b.view(), b.view(), x.view(), y.view()).unwrap_err();
    assert_eq!(arg_of(e), "mu");
    let e = divergence(&params, a.view(), b.view(), x.view(), y2.view()).unwrap_err();
    assert_eq!(arg_of(e), "y");
    let e = PointCloudCost::new(x.view(), nan.view())
        .and_then(|cost| logot::wasserstein(a.view(), b.view(), cost, 0.1))
        .unwrap_err();
    assert_eq!(arg_of(e), "y");
    // Point gradients need a point cloud.
    let c = dense_cost(&x, &y, PointMetric::SqEuclidean);
    let p = Problem::new(
        a.view().insert_axis(Axis(0)),
        b.view().insert_axis(Axis(0)),
        c.view(),
    )
    .unwrap();
    let e = SinkhornSolver::new(CpuBackend, params.clone())
        .point_gradients(&p)
        .unwrap_err();
    assert_eq!(arg_of(e), "cost");
}

#[test]
fn large_plans_are_refused_not_allocated() {
    // 12000 × 12000 = 1.44·10⁸ entries (1.15 GB in f64): the plan is refused up front.
    let x = cloud(71, 12_000, 2, 0.0, 1.0);
    let be = CpuBackend;
    let pc = be
        .prepare_cost(&PointCloudCost::new(x.view(), x.view()).unwrap().into())
        .unwrap();
    let zeros = vec![0.0; 12_000];
    match be.plan(&pc, &zeros, &zeros, 0.1) {
        Err(Error::Unavailable(msg)) => assert!(msg.contains("12000"), "{msg}"),
        other => panic!("expected Unavailable, got {:?}", other.map(|p| p.len())),
    }
    let mu = Array2::from_elem((1, 12_000), 1.0 / 12_000.0);
    let p = Problem::new(
        mu.view(),
        mu.view(),
        PointCloudCost::new(x.view(), x.view()).unwrap(),
    )
    .unwrap();
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1).fixed_iterations(1));
    assert!(matches!(solver.coupling(&p), Err(Error::Unavailable(_))));
}

/// POT's `empirical_sinkhorn_divergence` (the linear convention): POT 0.9.7,
/// `ot.bregman.empirical_sinkhorn_divergence(x, y, eps, a=a, b=b, method='sinkhorn_log',
/// numIterMax=10**6, stopThr=1e-15)`, equal to
/// `sinkhorn2(a, b) − ½(sinkhorn2(a, a) + sinkhorn2(b, b))` on `ot.dist` costs.
#[test]
fn linear_divergence_matches_pot() {
    let x = ndarray::array![[0.0, 0.0], [1.0, 0.2], [0.3, 0.9], [0.8, 0.7], [0.5, 0.1]];
    let y = ndarray::array![[0.2, 0.4], [1.1, 1.0], [0.6, 0.3], [0.0, 0.8]];
    let a = ndarray::array![0.1, 0.3, 0.2, 0.25, 0.15];
    let b = ndarray::array![0.4, 0.1, 0.3, 0.2];
    // At ε = 0.05 POT's alternating Sinkhorn has not converged the (b, b) self term (its
    // column error is 1e-7 after 2·10⁵ iterations: symmetric problems drift along f − g),
    // which leaves POT's value 4e-10 off; logot's symmetric iteration converges.
    for (eps, pot, tol) in [
        (0.05, 0.20541528473988077f64, 1e-9),
        (0.5, 0.14421687512068498, 1e-12),
    ] {
        let params = SinkhornParams::new(eps).tol(1e-14).max_iters(1_000_000);
        let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
        let s = SinkhornSolver::new(CpuBackend, params)
            .sinkhorn_divergence(
                &Problem::new(a.view(), b.view(), cost).unwrap(),
                logot::DivergenceConvention::Linear,
            )
            .unwrap();
        assert!(s.converged(), "{:?}", s.convergence);
        assert!(s.grad_x.is_none() && s.grad_y.is_none());
        assert!(
            (s.value[0] - pot).abs() < tol,
            "eps {eps}: {} vs POT {pot}",
            s.value[0]
        );
    }
}

/// A plan between point clouds above the backends' limit (2²⁷ entries) is refused by
/// `coupling` before any iteration: the observer, which a solve of one iteration calls
/// (checked on a small problem), is never called, and the error says how many entries.
#[test]
fn coupling_refuses_a_plan_above_the_limit_before_solving() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let params = SinkhornParams::new(0.1)
        .max_iters(1)
        .observer(logot::Observer::new(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
        }));
    let solver = SinkhornSolver::new(CpuBackend, params);
    let (x, y) = (cloud(1, 8, 1, 0.0, 1.0), cloud(2, 8, 1, 0.0, 1.0));
    let w = Array1::from_elem(8, 1.0 / 8.0);
    let small = Problem::new(
        w.view(),
        w.view(),
        PointCloudCost::new(x.view(), y.view()).unwrap(),
    );
    solver.coupling(&small.unwrap()).unwrap();
    assert!(
        calls.load(Ordering::Relaxed) > 0,
        "the observer sees a solve"
    );
    calls.store(0, Ordering::Relaxed);
    // 11586² = 134 235 396 > 2²⁷ = 134 217 728 entries.
    let n = 11586;
    let (x, y) = (cloud(3, n, 1, 0.0, 1.0), cloud(4, n, 1, 0.0, 1.0));
    let w = Array1::from_elem(n, 1.0 / n as f64);
    let big = Problem::new(
        w.view(),
        w.view(),
        PointCloudCost::new(x.view(), y.view()).unwrap(),
    );
    match solver.coupling(&big.unwrap()) {
        Err(Error::Unavailable(msg)) => assert!(
            msg.contains("1×11586×11586 entries") && msg.contains("134217728"),
            "{msg}"
        ),
        other => panic!("expected a refusal, got {:?}", other.map(|c| c.plan.dim())),
    }
    assert_eq!(calls.load(Ordering::Relaxed), 0, "no iteration ran");
}

/// Every public path that materialises a plan between point clouds refuses one above the
/// backends' limit (2²⁷ entries) before any iteration, with the same error: `coupling` and
/// the host entry points over it (`logot::coupling`, `implicit_gradients`), and
/// `solve_prepared` asked for the plan, from host arrays and from a `BufferProblem` (the
/// plan buffer's length is not reached: the size is refused first). Solves without a plan
/// run on the same clouds.
#[test]
fn every_plan_path_refuses_a_plan_above_the_limit_before_solving() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let params = SinkhornParams::new(0.1)
        .max_iters(1)
        .observer(logot::Observer::new(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
        }));
    let solver = SinkhornSolver::new(CpuBackend, params);
    // 2 problems × 8193 × 8193 = 134 250 498 > 2²⁷ = 134 217 728 entries: one shared pair
    // with a batch of weights.
    let n = 8193;
    let (x, y) = (cloud(5, n, 1, 0.0, 1.0), cloud(6, n, 1, 0.0, 1.0));
    let w = Array2::from_elem((2, n), 1.0 / n as f64);
    let problem = Problem::new(
        w.view(),
        w.view(),
        PointCloudCost::new(x.view(), y.view()).unwrap(),
    )
    .unwrap();
    let refused = |path: &str, r: Result<(), Error>| match r {
        Err(Error::Unavailable(msg)) => assert!(
            msg.contains("2×8193×8193 entries") && msg.contains("134217728"),
            "{path}: {msg}"
        ),
        other => panic!("{path}: expected a refusal, got {other:?}"),
    };
    refused("coupling", solver.coupling(&problem).map(|_| ()));
    refused(
        "implicit_gradients",
        solver
            .implicit_gradients(&problem, |c| c.plan.clone(), &Default::default())
            .map(|_| ()),
    );
    let prepared = solver.prepare(&problem).unwrap();
    let mut plan = vec![0.0f64; 1];
    refused(
        "solve_prepared (host arrays)",
        solver
            .solve_prepared(&prepared, BufferOutputs::new().plan(&mut plan))
            .map(|_| ()),
    );
    let be = solver.backend();
    let (xb, yb) = (
        be.upload(x.as_slice().unwrap()).unwrap(),
        be.upload(y.as_slice().unwrap()).unwrap(),
    );
    let layout = CloudLayout {
        n,
        m: n,
        d: 1,
        batch: None,
        metric: PointMetric::SqEuclidean,
        precision: Default::default(),
    };
    let buffers = BufferProblem::points(
        be.upload(w.as_slice().unwrap()).unwrap(),
        be.upload(w.as_slice().unwrap()).unwrap(),
        &xb,
        &yb,
        2,
        layout,
    );
    let prepared_buffers = solver.prepare(buffers).unwrap();
    refused(
        "solve_prepared (buffers)",
        solver
            .solve_prepared(&prepared_buffers, BufferOutputs::new().plan(&mut plan))
            .map(|_| ()),
    );
    assert_eq!(calls.load(Ordering::Relaxed), 0, "no iteration ran");
    // Without a plan the same batch is solved.
    solver
        .solve_prepared(&prepared, BufferOutputs::new())
        .unwrap();
    assert!(calls.load(Ordering::Relaxed) > 0, "the solve ran");
}
