//! Criterion benches of Gromov–Wasserstein on the CPU at sizes that suit a small machine:
//! `logot bench --problem gw`'s problem (structures from points in 2-D and 3-D, ε = 5e-3)
//! at 200×250 for 10 outer iterations, the exact conditional gradient on it at 100×125, and
//! `gwpc`'s point clouds at n = m = 2000 for 5 outer iterations in linear memory.
//! `scripts/bench-gromov-cli-vs-pot.py` times the dense problem against POT in one run.

use criterion::{criterion_group, criterion_main, Criterion};
use logot::gromov::{
    ConditionalGradient, ConditionalGradientParams, EntropicGwParams, GromovProblem, GromovSolver,
    PointGromovProblem, PointGromovSolver, PointGwParams,
};
use logot::CpuBackend;
use logot_cli::problems;
use std::hint::black_box;
use std::time::Duration;

fn entropic(c: &mut Criterion) {
    let mut g = c.benchmark_group("gromov");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    let (c1, c2, p, q) = problems::gw::<f64>(200, 250);
    let problem = GromovProblem::new(c1.view(), c2.view(), p.view(), q.view()).unwrap();
    let solver = GromovSolver::new(
        CpuBackend,
        EntropicGwParams::new(problems::GW_EPS).fixed_iterations(10),
    );
    g.bench_function("entropic_200x250_it10_f64", |b| {
        b.iter(|| black_box(solver.solve(&problem).unwrap().value))
    });

    let (c1, c2, p, q) = problems::gw::<f64>(100, 125);
    let problem = GromovProblem::new(c1.view(), c2.view(), p.view(), q.view()).unwrap();
    let exact = ConditionalGradient::new(CpuBackend, ConditionalGradientParams::default());
    g.bench_function("exact_100x125_f64", |b| {
        b.iter(|| black_box(exact.solve_network_simplex(&problem).unwrap().value))
    });

    let (x, y, p, q) = problems::gw_clouds::<f32>(2000, 3);
    let problem = PointGromovProblem::new(x.view(), y.view(), p.view(), q.view()).unwrap();
    let points = PointGromovSolver::new(
        CpuBackend,
        PointGwParams::new(problems::GWPC_EPS)
            .fixed_iterations(5)
            .inner_max_iters(problems::GWPC_INNER),
    );
    g.bench_function("points_2000_d3_it5_f32", |b| {
        b.iter(|| black_box(points.solve(&problem).unwrap().value))
    });
    g.finish();
}

criterion_group!(benches, entropic);
criterion_main!(benches);
