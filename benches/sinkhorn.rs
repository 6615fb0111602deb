//! Criterion benches of the CPU backend: one `sinkstep` half-iteration, otA and otBcpu
//! (the canonical problems of DESIGN.md, built by `logot::problems`), and otB at full size
//! (B = 64, n = 2048: tens of seconds per solve on a small CPU) when `LOGOT_BENCH_FULL=1`.
//! See benches/README.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use logot::backend::{Backend, CostSource, Side};
use logot::{problems, CpuBackend, Problem, SinkhornParams, Solver};
use std::hint::black_box;
use std::time::Duration;

fn sinkstep(c: &mut Criterion) {
    let mut g = c.benchmark_group("sinkstep");
    for &(b, n) in &[(1usize, 1024usize), (8, 1024), (8, 4096)] {
        let (mu, _, cost) = problems::ot_b::<f32>(b, n);
        let be = CpuBackend;
        let prepared = be.prepare_cost(&CostSource::Dense(cost.view())).unwrap();
        let f = be.upload(&vec![0.0f32; b * n]).unwrap();
        let log_nu = be
            .upload(&mu.iter().map(|v| v.ln()).collect::<Vec<f32>>())
            .unwrap();
        let mut out = be.filled(b * n, 0.0f32).unwrap();
        g.throughput(Throughput::Elements((b * n * n) as u64));
        g.bench_with_input(
            BenchmarkId::new("f32", format!("B{b}_n{n}")),
            &(),
            |bench, _| {
                bench.iter(|| {
                    be.sinkstep(&prepared, Side::Col, 0.01, black_box(&f), &log_nu, &mut out)
                        .unwrap()
                })
            },
        );
    }
    g.finish();
}

fn ot_problems(c: &mut Criterion) {
    let mut g = c.benchmark_group("sinkhorn");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    let (mu, nu, cost) = problems::ot_a::<f32>();
    let solver = Solver::new(CpuBackend, SinkhornParams::fixed_iterations(1e-3, 200));
    g.bench_function("otA_f32", |bench| {
        bench.iter(|| {
            let r = solver
                .solve(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap())
                .unwrap();
            let f = r.f.row(0);
            let mean = f.sum() / f.len() as f32;
            black_box(f.mapv(|v| v - mean)) // gradient w.r.t. μ (centred potential)
        })
    });
    let (mu, nu, cost) = problems::ot_b::<f32>(8, 1024);
    let solver = Solver::new(CpuBackend, SinkhornParams::fixed_iterations(1e-2, 100));
    g.throughput(Throughput::Elements(2 * 100 * 8 * 1024 * 1024));
    g.bench_function("otBcpu_f32", |bench| {
        bench.iter(|| {
            solver
                .solve(&Problem::batch(mu.view(), nu.view(), cost.view()).unwrap())
                .unwrap()
        })
    });
    if std::env::var("LOGOT_BENCH_FULL").is_ok_and(|v| v == "1") {
        let (mu, nu, cost) = problems::ot_b::<f32>(64, 2048);
        g.throughput(Throughput::Elements(2 * 100 * 64 * 2048 * 2048));
        g.bench_function("otB_f32", |bench| {
            bench.iter(|| {
                solver
                    .solve(&Problem::batch(mu.view(), nu.view(), cost.view()).unwrap())
                    .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, sinkstep, ot_problems);
criterion_main!(benches);
