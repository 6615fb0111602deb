//! Criterion benches of point-cloud costs computed on the fly (CPU): one half-step on the
//! otC problem shape (uniform clouds in [0,1]^d, squared Euclidean, ε = 0.05) at sizes that
//! suit criterion, the transport cost, the point gradients, and a Sinkhorn divergence.
//! `logot bench --problem otC` times the full N = M = 65536 half-step.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use logot::backend::{Backend, Side};
use logot::{CpuBackend, PointCloudCost, PointCloudKernels, SinkhornParams};
use logot_cli::problems;
use std::hint::black_box;
use std::time::Duration;

fn half_step(c: &mut Criterion) {
    let mut g = c.benchmark_group("pointcloud_sinkstep");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for &(n, d) in &[(8192usize, 3usize), (16384, 3), (8192, 8)] {
        let (_, nu, x, y) = problems::ot_c::<f32>(n, d);
        let be = CpuBackend;
        let cost = be
            .prepare_cost(&PointCloudCost::new(x.view(), y.view()).unwrap().into())
            .unwrap();
        let f = be.filled(n, 0.0f32).unwrap();
        let log_nu = be
            .upload(&nu.iter().map(|v| v.ln()).collect::<Vec<f32>>())
            .unwrap();
        let mut out = be.filled(n, 0.0f32).unwrap();
        // Throughput in cost entries (one exponential each).
        g.throughput(Throughput::Elements((n * n) as u64));
        g.bench_with_input(
            BenchmarkId::new("f32", format!("n{n}_d{d}")),
            &(),
            |b, _| {
                b.iter(|| {
                    be.sinkstep(&cost, Side::Col, 0.05, black_box(&f), &log_nu, &mut out)
                        .unwrap()
                })
            },
        );
        if d == 3 && n == 8192 {
            let (x64, y64) = (x.mapv(|v| v as f64), y.mapv(|v| v as f64));
            let cost64 = be
                .prepare_cost(&PointCloudCost::new(x64.view(), y64.view()).unwrap().into())
                .unwrap();
            let f64s = vec![0.0f64; n];
            let lnu64: Vec<f64> = log_nu.iter().map(|&v| v as f64).collect();
            let mut out64 = vec![0.0f64; n];
            g.bench_with_input(
                BenchmarkId::new("f64", format!("n{n}_d{d}")),
                &(),
                |b, _| {
                    b.iter(|| {
                        be.sinkstep(
                            &cost64,
                            Side::Col,
                            0.05,
                            black_box(&f64s),
                            &lnu64,
                            &mut out64,
                        )
                        .unwrap()
                    })
                },
            );
            be.sinkstep(&cost, Side::Col, 0.05, &f, &log_nu, &mut out)
                .unwrap();
            g.bench_with_input(
                BenchmarkId::new("transport_cost_f32", format!("n{n}_d{d}")),
                &(),
                |b, _| b.iter(|| be.transport_cost(&cost, black_box(&f), &out, 0.05).unwrap()),
            );
            g.bench_with_input(
                BenchmarkId::new("point_gradient_f32", format!("n{n}_d{d}")),
                &(),
                |b, _| {
                    b.iter(|| {
                        be.point_gradient(&cost, Side::Row, black_box(&f), &out, 0.05)
                            .unwrap()
                    })
                },
            );
        }
    }
    g.finish();
}

fn divergence(c: &mut Criterion) {
    let mut g = c.benchmark_group("pointcloud_divergence");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    let (a, b, x, y) = problems::ot_c::<f32>(2048, 3);
    let params = SinkhornParams::new(0.05);
    g.bench_function("n2048_d3_eps0.05", |bench| {
        bench.iter(|| {
            let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
            logot::SinkhornSolver::new(logot::CpuBackend, params.clone())
                .sinkhorn_divergence(
                    &logot::Problem::new(a.view(), b.view(), cost).unwrap(),
                    logot::DivergenceConvention::Objective,
                )
                .unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, half_step, divergence);
criterion_main!(benches);
