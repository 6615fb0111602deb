//! Property tests over random valid problems: the plan is non-negative and meets its
//! marginals, the distance is finite and within the cost's range, f32 follows f64, and a
//! batch equals its problems solved one by one; point-cloud costs equal their dense matrix,
//! per-problem cost batches equal one by one, f32 plans are valid, bistochastic projections
//! are doubly stochastic.

use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
use ndarray::{Array1, Array2, Axis};
use proptest::prelude::*;

/// A random problem: sizes 1..24, positive or zero masses (at least one positive entry
/// per side), costs in [0, scale].
fn problem() -> impl Strategy<Value = (Array1<f64>, Array1<f64>, Array2<f64>, f64)> {
    (1usize..24, 1usize..24, 0.02f64..1.0).prop_flat_map(|(n, m, eps)| {
        (
            prop::collection::vec(prop_oneof![3 => 0.01f64..1.0, 1 => Just(0.0)], n),
            prop::collection::vec(prop_oneof![3 => 0.01f64..1.0, 1 => Just(0.0)], m),
            prop::collection::vec(0.0f64..1.0, n * m),
            0.1f64..10.0,
            Just(eps),
        )
            .prop_map(move |(mut a, mut b, c, scale, eps)| {
                a[0] += 0.5;
                b[m - 1] += 0.5;
                let (sa, sb): (f64, f64) = (a.iter().sum(), b.iter().sum());
                let mu = Array1::from_iter(a.iter().map(|v| v / sa));
                let nu = Array1::from_iter(b.iter().map(|v| v / sb));
                let cost =
                    Array2::from_shape_vec((n, m), c.iter().map(|v| v * scale).collect()).unwrap();
                (mu, nu, cost, eps * scale)
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(20261129), ..ProptestConfig::default() })]

    #[test]
    fn plan_meets_marginals_and_distance_is_in_range((mu, nu, cost, eps) in problem()) {
        let params = SinkhornParams::new(eps).max_iters(20_000).tol(1e-8);
        let c = SinkhornSolver::new(CpuBackend, params).coupling(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap()).unwrap();
        let p = c.plan.index_axis(Axis(0), 0);
        prop_assert!(p.iter().all(|&v| v >= 0.0 && v.is_finite()));
        let d = c.result.distance[0];
        let (lo, hi) = cost.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
        prop_assert!(d.is_finite() && d >= lo - 1e-12 && d <= hi + 1e-12, "distance {} outside [{}, {}]", d, lo, hi);
        let rows = (&p.sum_axis(Axis(1)) - &mu).mapv(f64::abs).sum();
        prop_assert!(rows < 1e-12, "row marginal error {}", rows);
        if c.result.convergence.converged {
            let cols = (&p.sum_axis(Axis(0)) - &nu).mapv(f64::abs).sum();
            prop_assert!(cols <= 1e-8 * 1.0001, "column marginal error {}", cols);
        }
    }

    #[test]
    fn f32_follows_f64((mu, nu, cost, eps) in problem()) {
        let params = SinkhornParams::new(eps).fixed_iterations(50);
        let solver = SinkhornSolver::new(CpuBackend, params);
        let r64 = solver.solve(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap()).unwrap();
        let (mu32, nu32, c32) = (mu.mapv(|v| v as f32), nu.mapv(|v| v as f32), cost.mapv(|v| v as f32));
        let r32 = solver.solve(&Problem::new(mu32.view(), nu32.view(), c32.view()).unwrap()).unwrap();
        let scale = cost.iter().cloned().fold(0.0, f64::max).max(1e-3);
        let diff = (r32.distance[0] as f64 - r64.distance[0]).abs();
        prop_assert!(diff <= 1e-4 * scale, "f32 {} vs f64 {}", r32.distance[0], r64.distance[0]);
    }

    #[test]
    fn batch_equals_one_by_one(
        probs in prop::collection::vec(problem(), 1..4),
    ) {
        // Use the first problem's sizes and cost for every member, with each member's own
        // marginals resampled to those sizes.
        let (mu0, nu0, cost, eps) = probs[0].clone();
        let (n, m) = cost.dim();
        let b = probs.len();
        let mut mu = Array2::zeros((b, n));
        let mut nu = Array2::zeros((b, m));
        for (k, (a, bb, _, _)) in probs.iter().enumerate() {
            let pick = |src: &Array1<f64>, len: usize, base: &Array1<f64>| {
                let v = Array1::from_shape_fn(len, |i| 0.5 * base[i] + 0.5 * src[i % src.len()]);
                let s = v.sum();
                v / s
            };
            mu.row_mut(k).assign(&pick(a, n, &mu0));
            nu.row_mut(k).assign(&pick(bb, m, &nu0));
        }
        let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps).fixed_iterations(30));
        let batch = solver.solve(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap()).unwrap();
        for k in 0..b {
            let one = solver.solve(&Problem::new(mu.row(k), nu.row(k), cost.view()).unwrap()).unwrap();
            prop_assert!((one.distance[0] - batch.distance[k]).abs() <= 1e-13 * one.distance[0].abs().max(1.0));
        }
    }
}

/// Random point clouds: n, m points in dimension d, coordinates in [0, 1).
fn clouds() -> impl Strategy<Value = (Array2<f64>, Array2<f64>, Array1<f64>, Array1<f64>)> {
    (1usize..20, 1usize..20, 1usize..4).prop_flat_map(|(n, m, d)| {
        (
            prop::collection::vec(0.0f64..1.0, n * d),
            prop::collection::vec(0.0f64..1.0, m * d),
            prop::collection::vec(prop_oneof![3 => 0.01f64..1.0, 1 => Just(0.0)], n),
            prop::collection::vec(prop_oneof![3 => 0.01f64..1.0, 1 => Just(0.0)], m),
        )
            .prop_map(move |(x, y, mut a, mut b)| {
                a[0] += 0.5;
                b[0] += 0.5;
                let (sa, sb): (f64, f64) = (a.iter().sum(), b.iter().sum());
                (
                    Array2::from_shape_vec((n, d), x).unwrap(),
                    Array2::from_shape_vec((m, d), y).unwrap(),
                    Array1::from_iter(a.iter().map(|v| v / sa)),
                    Array1::from_iter(b.iter().map(|v| v / sb)),
                )
            })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, rng_seed: proptest::test_runner::RngSeed::Fixed(20261129), ..ProptestConfig::default() })]

    /// A cost computed on the fly from point clouds gives the dense solve of the same
    /// (materialised) cost, potentials and distance, up to rounding.
    #[test]
    fn point_clouds_equal_their_dense_cost((x, y, mu, nu) in clouds(), eps in 0.02f64..1.0) {
        let cloud = logot::PointCloudCost::new(x.view(), y.view()).unwrap();
        let dense = cloud.to_dense();
        let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps).fixed_iterations(40));
        let a = solver
            .solve(&Problem::new(mu.view().insert_axis(Axis(0)), nu.view().insert_axis(Axis(0)), cloud).unwrap())
            .unwrap();
        let b = solver.solve(&Problem::new(mu.view(), nu.view(), dense.view()).unwrap()).unwrap();
        prop_assert!((a.distance[0] - b.distance[0]).abs() <= 1e-12, "{} vs {}", a.distance[0], b.distance[0]);
        for (p, q) in a.f.iter().zip(b.f.iter()).chain(a.g.iter().zip(b.g.iter())) {
            prop_assert!(p == q || (p - q).abs() <= 1e-11 * eps.max(1.0), "{} vs {}", p, q);
        }
    }

    /// A batch of per-problem costs (B×n×m) equals its problems solved one by one.
    #[test]
    fn per_problem_costs_equal_one_by_one(probs in prop::collection::vec(problem(), 1..4)) {
        let (_, _, c0, eps) = probs[0].clone();
        let (n, m) = c0.dim();
        let b = probs.len();
        let fit = |v: &Array1<f64>, len: usize| {
            let w = Array1::from_shape_fn(len, |i| v[i % v.len()] + 0.01);
            let s = w.sum();
            w / s
        };
        let mut mu = Array2::zeros((b, n));
        let mut nu = Array2::zeros((b, m));
        let mut costs = ndarray::Array3::zeros((b, n, m));
        for (k, (a, bb, c, _)) in probs.iter().enumerate() {
            mu.row_mut(k).assign(&fit(a, n));
            nu.row_mut(k).assign(&fit(bb, m));
            let ck = Array2::from_shape_fn((n, m), |(i, j)| c[[i % c.nrows(), j % c.ncols()]]);
            costs.index_axis_mut(Axis(0), k).assign(&ck);
        }
        let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps).fixed_iterations(30));
        let batch = solver.solve(&Problem::new(mu.view(), nu.view(), costs.view()).unwrap()).unwrap();
        for k in 0..b {
            let c = costs.index_axis(Axis(0), k);
            let one = solver.solve(&Problem::new(mu.row(k), nu.row(k), c).unwrap()).unwrap();
            prop_assert!((one.distance[0] - batch.distance[k]).abs() <= 1e-13 * one.distance[0].abs().max(1.0));
        }
    }

    /// f32 plans: non-negative, finite, rows meeting μ to f32 precision, the distance
    /// close to f64's.
    #[test]
    fn f32_plans_are_valid((mu, nu, cost, eps) in problem()) {
        let (mu32, nu32, c32) = (mu.mapv(|v| v as f32), nu.mapv(|v| v as f32), cost.mapv(|v| v as f32));
        let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps).fixed_iterations(60));
        let c = solver.coupling(&Problem::new(mu32.view(), nu32.view(), c32.view()).unwrap()).unwrap();
        let p = c.plan.index_axis(Axis(0), 0);
        prop_assert!(p.iter().all(|&v| v >= 0.0 && v.is_finite()));
        let rows = (&p.sum_axis(Axis(1)) - &mu32).mapv(f32::abs).sum();
        prop_assert!(rows <= 1e-5, "row marginal error {}", rows);
        let d64 = solver.solve(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap()).unwrap().distance[0];
        let scale = cost.iter().cloned().fold(0.0, f64::max).max(1e-3);
        prop_assert!((c.result.distance[0] as f64 - d64).abs() <= 1e-4 * scale);
    }

    /// The bistochastic projection of random logits: non-negative, and once converged
    /// every row and column sums to 1.
    #[test]
    fn bistochastic_projections_are_doubly_stochastic(
        (b, n, x) in (1usize..4, 1usize..9).prop_flat_map(|(b, n)| (Just(b), Just(n), prop::collection::vec(-4.0f64..4.0, b * n * n)))
    ) {
        let x = ndarray::Array3::from_shape_vec((b, n, n), x).unwrap();
        let out = logot::grad::bistochastic(x.view(), &logot::grad::BistochasticParams::default().iters(5000).converged(1e-12)).unwrap();
        prop_assert!(out.convergence.converged);
        for r in out.r.outer_iter() {
            prop_assert!(r.iter().all(|&v| v >= 0.0 && v.is_finite()));
            for s in r.sum_axis(Axis(0)).iter().chain(r.sum_axis(Axis(1)).iter()) {
                prop_assert!((s - 1.0).abs() <= 1e-10, "sum {}", s);
            }
        }
    }
}
