//! A cluster of CPU members against one CPU backend: the splitting (point clouds and shared
//! dense costs by target points, batches of costs, batched clouds and grids by problems) must give the single
//! backend's potentials, distances, plans and reports, for every number of members, uneven
//! shares and members left without a share.
mod common;

use common::clouds::{clouds, f64s, worst};
use common::{bin_weights, Lcg};
use logot::backend::{Backend, Marginals, Potentials, Side};
use logot::{
    Cluster, CostSource, CpuBackend, EpsScaling, GridCost, PointCloudCost, Problem, Real,
    Relaxation, SinkhornParams, SinkhornResult, SinkhornSolver,
};
use ndarray::{Array2, Array3};

fn cluster(p: usize) -> Cluster<CpuBackend> {
    Cluster::new(vec![CpuBackend; p]).unwrap()
}

/// The largest difference relative to the largest magnitude of `b` ([`worst`]).
fn rel_diff<T: Real>(a: &[T], b: &[T]) -> f64 {
    worst(&f64s(a), &f64s(b))
}

fn same_result<T: Real>(one: &SinkhornResult<T>, many: &SinkhornResult<T>, tol: f64, what: &str) {
    let (a, b) = (&one.convergence, &many.convergence);
    assert_eq!(a.iterations, b.iterations, "{what}: iterations");
    assert_eq!(a.converged, b.converged, "{what}: converged");
    let d = rel_diff(
        one.distance.as_slice().unwrap(),
        many.distance.as_slice().unwrap(),
    );
    assert!(d <= tol, "{what}: distances differ by {d:e} (relative)");
    let f = rel_diff(one.f.as_slice().unwrap(), many.f.as_slice().unwrap());
    let g = rel_diff(one.g.as_slice().unwrap(), many.g.as_slice().unwrap());
    assert!(
        f <= tol && g <= tol,
        "{what}: potentials differ by {f:e} / {g:e}"
    );
    let (ea, eb) = (a.marginal_error, b.marginal_error);
    assert!(
        (ea - eb).abs() <= tol.sqrt() * ea.max(1e-12) + 1e-14,
        "{what}: marginal errors {ea:e} and {eb:e}"
    );
}

fn solve_both<T: Real>(
    params: &SinkhornParams,
    problem: &Problem<'_, T>,
    members: &[usize],
    tol: f64,
    what: &str,
) {
    let one = SinkhornSolver::new(CpuBackend, params.clone())
        .solve(problem)
        .unwrap();
    for &p in members {
        let many = SinkhornSolver::new(cluster(p), params.clone())
            .solve(problem)
            .unwrap();
        same_result(&one, &many, tol, &format!("{what}, {p} members"));
    }
}

#[test]
fn point_clouds_split_by_target_points_solve_as_one() {
    let (n, m, d) = (37, 29, 3);
    let (x, y) = clouds(n, m, d, 7);
    let (mu, nu) = (bin_weights(1, n, 0, 1), bin_weights(1, m, 0, 2));
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let problem = Problem::new(mu.view(), nu.view(), cost.clone()).unwrap();
    // To convergence (checks every 10 iterations), with ε-scaling, and unbalanced.
    let params = SinkhornParams::new(0.05);
    solve_both(&params, &problem, &[1, 2, 3, 5], 1e-11, "balanced");
    let scaled = SinkhornParams::new(0.02).eps_scaling(EpsScaling::from_max_cost(3.0));
    solve_both(&scaled, &problem, &[2, 4], 1e-11, "eps-scaling");
    let (mu2, nu2) = (&mu * 1.3, nu.clone());
    let unbalanced = Problem::new(mu2.view(), nu2.view(), cost)
        .unwrap()
        .relaxed(Relaxation::kl_each(0.5, 2.0));
    solve_both(&params, &unbalanced, &[2, 3], 1e-11, "unbalanced");
}

#[test]
fn a_member_whose_target_points_have_no_mass_adds_nothing() {
    // 3 members share 30 target points 10 by 10; the first 12 have no mass, so member 0's
    // partial half-steps are +∞ and the source bins 0..4 have no mass either (−∞ potentials).
    let (n, m) = (20, 30);
    let (x, y) = clouds(n, m, 2, 11);
    let (mu, nu) = (bin_weights(2, n, 4, 3), bin_weights(2, m, 12, 4));
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let problem = Problem::new(mu.view(), nu.view(), cost).unwrap();
    solve_both(
        &SinkhornParams::new(0.05),
        &problem,
        &[3],
        1e-11,
        "zero-mass shard",
    );
}

#[test]
fn shared_dense_costs_split_by_columns_and_batches_by_problems() {
    let (n, m) = (23, 19);
    let mut r = Lcg(5);
    let shared = Array2::from_shape_vec((n, m), r.vec(n * m, 0.0, 1.0)).unwrap();
    let (mu, nu) = (bin_weights(3, n, 0, 6), bin_weights(3, m, 2, 7));
    let params = SinkhornParams::new(0.03);
    let problem = Problem::new(mu.view(), nu.view(), shared.view()).unwrap();
    solve_both(&params, &problem, &[2, 4], 1e-11, "shared dense");
    // One cost a problem: 3 problems over 2 members (2 + 1) and over 5 (two members idle).
    let costs = Array3::from_shape_vec((3, n, m), r.vec(3 * n * m, 0.0, 1.0)).unwrap();
    let batch = Problem::new(mu.view(), nu.view(), costs.view()).unwrap();
    solve_both(&params, &batch, &[2, 5], 1e-13, "dense batch");
    // The plans, as a coupling gathers them.
    for p in [2, 3] {
        for prob in [&problem, &batch] {
            let one = SinkhornSolver::new(CpuBackend, params.clone())
                .coupling(prob)
                .unwrap();
            let many = SinkhornSolver::new(cluster(p), params.clone())
                .coupling(prob)
                .unwrap();
            let d = rel_diff(one.plan.as_slice().unwrap(), many.plan.as_slice().unwrap());
            assert!(d < 1e-10, "{p} members: plans differ by {d:e}");
        }
    }
}

#[test]
fn grid_batches_split_by_problems() {
    let grid = GridCost::image(6, 5).unwrap();
    let (mu, nu) = (bin_weights(3, 30, 0, 8), bin_weights(3, 30, 0, 9));
    let problem = Problem::new(mu.view(), nu.view(), grid).unwrap();
    solve_both(&SinkhornParams::new(0.01), &problem, &[2, 4], 1e-13, "grid");
}

/// Single half-steps of a batch on both sides, `f32` and `f64`: the soft minimum of `P`
/// partial half-steps against the one over all columns.
fn half_steps_match<T: Real>(tol: f64) {
    let (b, n, m, d) = (2, 31, 45, 4);
    let (x, y) = clouds(n, m, d, 21);
    let (x, y) = (x.mapv(T::of), y.mapv(T::of));
    let cost: CostSource<T> = PointCloudCost::new(x.view(), y.view()).unwrap().into();
    let mut r = Lcg(22);
    let f: Vec<T> = r.vec(b * n, -0.5, 0.5).into_iter().map(T::of).collect();
    let g: Vec<T> = r.vec(b * m, -0.5, 0.5).into_iter().map(T::of).collect();
    let lm = |len: usize, s| -> Vec<T> {
        bin_weights(b, len, 3, s)
            .iter()
            .map(|&w| T::of(w.ln()))
            .collect()
    };
    let (log_mu, log_nu) = (lm(n, 23), lm(m, 24));
    let eps = T::of(0.07);
    let one = CpuBackend;
    let c1 = one.prepare_cost(&cost).unwrap();
    let mut want_g = vec![T::zero(); b * m];
    one.sinkstep(&c1, Side::Col, eps, &f, &log_nu, &mut want_g)
        .unwrap();
    let mut want_f = vec![T::zero(); b * n];
    one.sinkstep(&c1, Side::Row, eps, &g, &log_mu, &mut want_f)
        .unwrap();
    for p in [2, 3, 4] {
        let be = cluster(p);
        let c = be.prepare_cost(&cost).unwrap();
        let (fd, gd) = (be.upload(&f).unwrap(), be.upload(&g).unwrap());
        let (lmu, lnu) = (be.upload(&log_mu).unwrap(), be.upload(&log_nu).unwrap());
        let mut out = be.filled(b * m, T::zero()).unwrap();
        be.sinkstep(&c, Side::Col, eps, &fd, &lnu, &mut out)
            .unwrap();
        // Every member holds the same copy.
        for copy in out.copies() {
            assert_eq!(copy, &be.download(&out).unwrap());
        }
        let dg = rel_diff(&want_g, &be.download(&out).unwrap());
        let mut out = be.filled(b * n, T::zero()).unwrap();
        be.sinkstep(&c, Side::Row, eps, &gd, &lmu, &mut out)
            .unwrap();
        let df = rel_diff(&want_f, &be.download(&out).unwrap());
        assert!(
            dg <= tol && df <= tol,
            "{p} members, {}: g {dg:e}, f {df:e}",
            T::NAME
        );
        // Transport costs and reports of the same potentials.
        let (tc1, tc) = (
            one.transport_cost(&c1, &f, &g, eps).unwrap(),
            be.transport_cost(&c, &fd, &gd, eps).unwrap(),
        );
        assert!(
            rel_diff(&tc1, &tc) <= tol * 10.0,
            "transport costs {tc1:?} {tc:?}"
        );
        let mu: Vec<T> = log_mu.iter().map(|v| v.exp()).collect();
        let nu: Vec<T> = log_nu.iter().map(|v| v.exp()).collect();
        let (mud, nud) = (be.upload(&mu).unwrap(), be.upload(&nu).unwrap());
        // Split by columns, the cluster measures the row errors from a half-step and takes
        // the column errors and costs from its members' reports (one CPU backend reports
        // float32 clouds in f64 with the points as given, a different sum from the
        // half-steps').
        let one_pot = Potentials {
            f: f.clone(),
            g: g.clone(),
        };
        let one_marg = Marginals {
            mu: &mu,
            nu: &nu,
            log_mu: &log_mu,
            log_nu: &log_nu,
        };
        let half = logot::backend::plan_report_from_half_steps(&one, &c1, &one_pot, &one_marg, eps)
            .unwrap();
        let members = one.plan_report(&c1, &one_pot, &one_marg, eps).unwrap();
        let pot = Potentials {
            f: be.upload(&f).unwrap(),
            g: be.upload(&g).unwrap(),
        };
        let marg = Marginals {
            mu: &mud,
            nu: &nud,
            log_mu: &lmu,
            log_nu: &lnu,
        };
        let rep = be.plan_report(&c, &pot, &marg, eps).unwrap();
        for ((h, a), z) in half.iter().zip(&members).zip(&rep) {
            for (u, v, what) in [
                (h.row_error, z.row_error, "row error"),
                (a.col_error, z.col_error, "column error"),
                (a.cost, z.cost, "cost"),
            ] {
                assert!(
                    (u - v).abs() <= tol * 10.0 * u.abs().max(1.0),
                    "{what}: {u} vs {v}"
                );
            }
        }
    }
}

#[test]
fn half_steps_of_a_batch_match_in_both_precisions() {
    half_steps_match::<f64>(1e-13);
    half_steps_match::<f32>(2e-6);
}

#[test]
fn a_cluster_needs_a_member() {
    let err = Cluster::<CpuBackend>::new(vec![]).unwrap_err();
    assert!(err.to_string().contains("members"), "{err}");
}

/// Point gradients (envelope and implicit) and the Sinkhorn divergence on a cluster: the
/// row sums of the plan add up over the members' target points, the column sums are the
/// members' own, and the implicit solve's kernels run on every member's copy.
#[test]
fn point_gradients_and_the_divergence_split_by_target_points() {
    use logot::{CgParams, DivergenceConvention};
    let (n, m, d) = (26, 33, 3);
    let (x, y) = clouds(n, m, d, 31);
    let (mu, nu) = (bin_weights(2, n, 0, 32), bin_weights(2, m, 3, 33));
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let problem = Problem::new(mu.view(), nu.view(), cost.clone()).unwrap();
    let params = SinkhornParams::new(0.05);
    let one = SinkhornSolver::new(CpuBackend, params.clone());
    let env = one.point_gradients(&problem).unwrap();
    let imp = one
        .transport_point_gradients(&problem, &CgParams::default())
        .unwrap();
    let first = Problem::new(mu.row(0), nu.row(0), cost.clone()).unwrap();
    let div = one
        .sinkhorn_divergence(&first, DivergenceConvention::Objective)
        .unwrap();
    let flat = |a: &ndarray::Array3<f64>| a.iter().copied().collect::<Vec<_>>();
    for p in [2, 3] {
        let many = SinkhornSolver::new(cluster(p), params.clone());
        let e = many.point_gradients(&problem).unwrap();
        let i = many
            .transport_point_gradients(&problem, &CgParams::default())
            .unwrap();
        let v = many
            .sinkhorn_divergence(&first, DivergenceConvention::Objective)
            .unwrap();
        for (what, a, b, tol) in [
            ("envelope x", flat(&env.x), flat(&e.x), 1e-11),
            ("envelope y", flat(&env.y), flat(&e.y), 1e-11),
            ("implicit x", flat(&imp.x), flat(&i.x), 1e-8),
            ("implicit y", flat(&imp.y), flat(&i.y), 1e-8),
            ("values", env.value.to_vec(), e.value.to_vec(), 1e-11),
            (
                "transport costs",
                imp.value.to_vec(),
                i.value.to_vec(),
                1e-11,
            ),
        ] {
            let diff = rel_diff(&a, &b);
            assert!(diff <= tol, "{p} members, {what}: {diff:e}");
        }
        assert!(
            (div.value[0] - v.value[0]).abs() <= 1e-11 * div.value[0].abs(),
            "{p}: divergence"
        );
        let gx = rel_diff(
            div.grad_x.as_ref().unwrap().as_slice().unwrap(),
            v.grad_x.as_ref().unwrap().as_slice().unwrap(),
        );
        assert!(gx <= 1e-10, "{p} members, divergence gradient: {gx:e}");
    }
}

/// Batched clouds (one pair per problem) split by problems: the solve, the coupling, both
/// point gradients and the divergences equal one backend's, with 2 and 3 members (3
/// problems: one each; 2 members: 2 + 1) and with more members than problems.
#[test]
fn batched_point_clouds_split_by_problems_solve_as_one() {
    use logot::{CgParams, DivergenceConvention};
    let (b, n, m, d) = (3, 21, 17, 3);
    let mut r = Lcg(77);
    let x = Array3::from_shape_fn((b, n, d), |(k, _, _)| 0.3 * k as f64 + r.next());
    let y = Array3::from_shape_fn((b, m, d), |_| r.next());
    let (mu, nu) = (bin_weights(b, n, 0, 78), bin_weights(b, m, 2, 79));
    let cost = PointCloudCost::batched(x.view(), y.view()).unwrap();
    let problem = Problem::new(mu.view(), nu.view(), cost.clone()).unwrap();
    let params = SinkhornParams::new(0.05);
    solve_both(&params, &problem, &[1, 2, 3, 4], 1e-11, "batched clouds");
    solve_both(
        &params,
        &problem.clone().relaxed(Relaxation::kl(0.5)),
        &[2, 3],
        1e-11,
        "batched clouds, unbalanced",
    );
    let one = SinkhornSolver::new(CpuBackend, params.clone());
    let plan = one.coupling(&problem).unwrap().plan;
    let env = one.point_gradients(&problem).unwrap();
    let imp = one
        .transport_point_gradients(&problem, &CgParams::default())
        .unwrap();
    let conv = DivergenceConvention::Objective;
    let div = one.sinkhorn_divergence(&problem, conv).unwrap();
    let flat = |a: &Array3<f64>| a.iter().copied().collect::<Vec<_>>();
    for p in [2, 3, 4] {
        let many = SinkhornSolver::new(cluster(p), params.clone());
        let pl = many.coupling(&problem).unwrap().plan;
        let e = many.point_gradients(&problem).unwrap();
        let i = many
            .transport_point_gradients(&problem, &CgParams::default())
            .unwrap();
        let v = many.sinkhorn_divergence(&problem, conv).unwrap();
        for (what, a, b, tol) in [
            ("plans", flat(&plan), flat(&pl), 1e-11),
            ("envelope x", flat(&env.x), flat(&e.x), 1e-11),
            ("envelope y", flat(&env.y), flat(&e.y), 1e-11),
            ("implicit x", flat(&imp.x), flat(&i.x), 1e-8),
            ("implicit y", flat(&imp.y), flat(&i.y), 1e-8),
            ("values", env.value.to_vec(), e.value.to_vec(), 1e-11),
            ("divergences", div.value.to_vec(), v.value.to_vec(), 1e-11),
        ] {
            let diff = rel_diff(&a, &b);
            assert!(diff <= tol, "{p} members, {what}: {diff:e}");
        }
    }
}

/// Barycenters on a cluster: the loop's half-steps split (a dense cost by target points, a
/// grid by problems), the log means on every member's copy; the same histograms, errors and
/// iteration counts as one backend, balanced and unbalanced.
#[test]
fn barycenters_split_as_one() {
    use logot::{BarycenterParams, BarycenterProblem, BarycenterSolver};
    let grid = GridCost::image(9, 8).unwrap();
    let dense = grid.to_dense::<f64>();
    let imgs = bin_weights(3, 72, 0, 41);
    let w = ndarray::array![0.2, 0.5, 0.3];
    let params = BarycenterParams::new(0.02);
    let balanced = BarycenterProblem::new(imgs.view(), w.view()).unwrap();
    for problem in [balanced.clone(), balanced.relaxed(Relaxation::kl(1.0))] {
        for cost in [
            CostSource::Grid(grid.clone()),
            CostSource::Dense(dense.view()),
        ] {
            let one = BarycenterSolver::new(CpuBackend, params.clone())
                .solve(&problem, cost.clone())
                .unwrap()
                .remove(0);
            for p in [2, 3] {
                let many = BarycenterSolver::new(cluster(p), params.clone())
                    .solve(&problem, cost.clone())
                    .unwrap()
                    .remove(0);
                assert_eq!(
                    (one.iterations, one.converged),
                    (many.iterations, many.converged)
                );
                let d = rel_diff(
                    one.histogram.as_slice().unwrap(),
                    many.histogram.as_slice().unwrap(),
                );
                assert!(d <= 1e-10, "{p} members: histograms differ by {d:e}");
                assert!((one.error - many.error).abs() <= 1e-9 * one.error.max(1e-12));
            }
        }
    }
}
