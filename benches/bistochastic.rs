//! Criterion benches of the CPU bistochastic projection on the canonical mhc problems
//! (DESIGN.md: B = 65536 matrices n×n, X ~ U[0,4), 20 iterations forward; backward with
//! G ~ N(0,1)), f32, built by `logot_cli::problems::mhc`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use logot::grad::{BistochasticParams, BistochasticSolver, CgParams};
use logot::CpuBackend;
use logot_cli::problems;
use std::hint::black_box;
use std::time::Duration;

fn mhc(c: &mut Criterion) {
    let mut g = c.benchmark_group("bistochastic");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let b = 65536;
    for &n in &[4usize, 16] {
        let (x, grad) = problems::mhc::<f32>(b, n, 1);
        let proj = BistochasticSolver::new(CpuBackend, BistochasticParams::default().iters(20));
        let r = proj.forward(x.view()).unwrap().r;
        let cg = CgParams::default();
        g.throughput(Throughput::Elements(b as u64));
        g.bench_with_input(
            BenchmarkId::new("forward", format!("mhc{n}")),
            &(),
            |bench, _| bench.iter(|| proj.forward(black_box(x.view())).unwrap()),
        );
        g.bench_with_input(
            BenchmarkId::new("backward", format!("mhc{n}")),
            &(),
            |bench, _| {
                bench.iter(|| {
                    proj.backward(black_box(r.view()), grad.view(), &cg)
                        .unwrap()
                })
            },
        );
    }
    g.finish();
}

criterion_group!(benches, mhc);
criterion_main!(benches);
