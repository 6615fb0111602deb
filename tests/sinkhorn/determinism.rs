//! Results are bitwise independent of the number of CPU threads: every reduction runs over
//! a fixed partition, combined in a fixed order. Each computation runs in rayon pools of
//! 1, 2, 3 and 5 threads and every output's bits are compared with the 1-thread run.

use crate::common;

use common::Lcg;
use logot::grad::{bistochastic, bistochastic_backward, BistochasticParams, CgParams};
use logot::linalg::{newton_schulz, NewtonSchulzParams};
use logot::{CpuBackend, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
use ndarray::{Array2, Array3, Axis};

/// Every value a computation returns, as bits.
fn bits(values: impl IntoIterator<Item = f64>) -> Vec<u64> {
    values.into_iter().map(f64::to_bits).collect()
}

/// `run` in pools of several sizes: all equal to the first.
fn same_on_every_pool(what: &str, run: impl Fn() -> Vec<u64> + Sync) {
    let mut first: Option<Vec<u64>> = None;
    for threads in [1, 2, 3, 5] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let got = pool.install(&run);
        match &first {
            None => first = Some(got),
            Some(f) => {
                let k = f.iter().zip(&got).position(|(a, b)| a != b);
                assert!(
                    f.len() == got.len() && k.is_none(),
                    "{what}: {threads} threads differ from 1 at value {k:?}"
                );
            }
        }
    }
}

fn marginals(rng: &mut Lcg, b: usize, n: usize) -> Array2<f64> {
    let a = Array2::from_shape_fn((b, n), |_| rng.uniform(0.05, 1.0));
    &a / &a.sum_axis(Axis(1)).insert_axis(Axis(1))
}

#[test]
fn dense_solves_and_plans() {
    let mut rng = Lcg(21);
    let (b, n, m) = (4, 300, 260);
    let cost = Array2::from_shape_fn((n, m), |_| rng.next());
    let costs = Array3::from_shape_fn((b, n, m), |_| rng.next() + 10.0);
    let (mu, nu) = (marginals(&mut rng, b, n), marginals(&mut rng, b, m));
    same_on_every_pool("shared dense cost", || {
        let p = Problem::new(mu.view(), nu.view(), cost.view()).unwrap();
        let c = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.01))
            .coupling(&p)
            .unwrap();
        let r = &c.result;
        bits(
            r.f.iter()
                .chain(r.g.iter())
                .chain(r.distance.iter())
                .chain(c.plan.iter())
                .copied()
                .chain(r.convergence.marginal_errors()),
        )
    });
    same_on_every_pool("one cost per problem", || {
        let p = Problem::new(mu.view(), nu.view(), costs.view()).unwrap();
        let r = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.02))
            .solve(&p)
            .unwrap();
        bits(
            r.f.iter()
                .chain(r.distance.iter())
                .copied()
                .chain(r.convergence.marginal_errors()),
        )
    });
    same_on_every_pool("gradients", || {
        let g = logot::wasserstein_gradients(mu.row(0), nu.row(0), cost.view(), 0.05).unwrap();
        bits(g.cost.iter().chain(g.mu.iter()).chain(g.nu.iter()).copied())
    });
}

#[test]
fn point_clouds_grids_and_barycenters() {
    let mut rng = Lcg(22);
    let (n, m, d) = (700, 500, 3);
    let x = Array2::from_shape_fn((n, d), |_| rng.next());
    let y = Array2::from_shape_fn((m, d), |_| rng.next());
    let (mu, nu) = (marginals(&mut rng, 1, n), marginals(&mut rng, 1, m));
    same_on_every_pool("point clouds", || {
        let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
        let p = Problem::new(mu.view(), nu.view(), cost).unwrap();
        let g = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05))
            .point_gradients(&p)
            .unwrap();
        bits(
            g.result
                .f
                .iter()
                .chain(g.result.distance.iter())
                .chain(g.value.iter())
                .chain(g.x.iter())
                .copied()
                .chain(g.result.convergence.marginal_errors()),
        )
    });
    let images = logot_cli::problems::bary64_images(48);
    let w = ndarray::array![0.3, 0.3, 0.4];
    same_on_every_pool("grid barycenter", || {
        let bar = logot::grid_barycenter(images.view(), w.view(), 0.004).unwrap();
        bits(bar.histogram.iter().copied().chain([bar.error]))
    });
}

#[test]
fn bistochastic_and_newton_schulz() {
    let mut rng = Lcg(23);
    let x = Array3::from_shape_fn((300, 16, 16), |_| rng.uniform(0.0, 4.0));
    let g = Array3::from_shape_fn((300, 16, 16), |_| rng.normal());
    same_on_every_pool("bistochastic", || {
        let f = bistochastic(x.view(), &BistochasticParams::default().iters(20)).unwrap();
        let b = bistochastic_backward(f.r.view(), g.view(), &CgParams::default()).unwrap();
        bits(
            f.r.iter()
                .chain(b.dx.iter())
                .copied()
                .chain([f.convergence.marginal_error, b.cg.max_residual]),
        )
    });
    let a = Array2::from_shape_fn((300, 500), |_| rng.normal());
    same_on_every_pool("Newton–Schulz", || {
        bits(newton_schulz(&CpuBackend, a.view(), &NewtonSchulzParams::default()).unwrap())
    });
}
