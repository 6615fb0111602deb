//! Criterion benches of barycenters on the CPU backend: the design's bary64 problem (three
//! 64×64 images, weights (0.3, 0.3, 0.4)) on the unit grid (ε = 0.004, 100 iterations, the
//! separable log-convolution) and with the dense 4096×4096 normalised cost (ε = 1e-3).
//!
//! The dense case runs 10 iterations per sample (a full 100-iteration solve takes many
//! seconds on a small machine); multiply by 10 for the bary64 figure.

use criterion::{criterion_group, criterion_main, Criterion};
use logot::{BarycenterParams, BarycenterProblem, BarycenterSolver, CpuBackend, GridCost, Real};
use logot_cli::problems;
use ndarray::{Array1, Array2};
use std::hint::black_box;
use std::time::Duration;

fn inputs<T: Real>() -> (Array2<T>, Array1<T>) {
    let h = problems::bary64_images(64)
        .mapv(T::of)
        .into_shape_with_order((3, 64 * 64))
        .unwrap();
    (
        h,
        problems::BARY64_WEIGHTS.iter().map(|&w| T::of(w)).collect(),
    )
}

fn grid<T: Real>(c: &mut Criterion, name: &str) {
    let (h, w) = inputs::<T>();
    let grid = GridCost::image(64, 64).unwrap();
    let solver = BarycenterSolver::new(
        CpuBackend,
        BarycenterParams::new(problems::BARY64_GRID_EPS).fixed_iterations(problems::BARY64_ITERS),
    );
    c.bench_function(name, |b| {
        // On a rayon worker, as the top-level logot::grid_barycenter does.
        b.iter(|| {
            rayon::scope(|_| {
                let problem = BarycenterProblem::new(black_box(h.view()), w.view()).unwrap();
                solver.solve(&problem, grid.clone()).unwrap()
            })
        })
    });
}

fn bary64_grid(c: &mut Criterion) {
    grid::<f64>(c, "bary64_grid_f64");
    grid::<f32>(c, "bary64_grid_f32");
}

fn bary64_dense(c: &mut Criterion) {
    let mut g = c.benchmark_group("bary64_dense");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let (h, w) = inputs::<f64>();
    let cost = problems::bary64_dense_cost::<f64>(64);
    let solver = BarycenterSolver::new(
        CpuBackend,
        BarycenterParams::new(problems::BARY64_DENSE_EPS).fixed_iterations(10),
    );
    g.bench_function("f64_10_iterations", |b| {
        b.iter(|| {
            rayon::scope(|_| {
                let problem = BarycenterProblem::new(black_box(h.view()), w.view()).unwrap();
                solver.solve(&problem, cost.view()).unwrap()
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bary64_grid, bary64_dense);
criterion_main!(benches);
