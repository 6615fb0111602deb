//! Property tests over random valid problems: the plan is non-negative and meets its
//! marginals, the distance is finite and within the cost's range, f32 follows f64, and a
//! batch equals its problems solved one by one.

use logot::{CpuBackend, Problem, SinkhornParams, Solver};
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
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn plan_meets_marginals_and_distance_is_in_range((mu, nu, cost, eps) in problem()) {
        let params = SinkhornParams { eps, max_iters: 20_000, tol: Some(1e-8), ..Default::default() };
        let c = Solver::new(CpuBackend, params).coupling(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap()).unwrap();
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
        let params = SinkhornParams::fixed_iterations(eps, 50);
        let solver = Solver::new(CpuBackend, params);
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
        let solver = Solver::new(CpuBackend, SinkhornParams::fixed_iterations(eps, 30));
        let batch = solver.solve(&Problem::batch(mu.view(), nu.view(), cost.view()).unwrap()).unwrap();
        for k in 0..b {
            let one = solver.solve(&Problem::new(mu.row(k), nu.row(k), cost.view()).unwrap()).unwrap();
            prop_assert!((one.distance[0] - batch.distance[k]).abs() <= 1e-13 * one.distance[0].abs().max(1.0));
        }
    }
}
