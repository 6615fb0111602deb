//! Criterion benches of the CPU backend: one `sinkstep` half-iteration (a batch on a shared
//! cost by the factored products, beside the same problems one at a time by the plain
//! kernel), otA and otBcpu (the canonical problems of DESIGN.md, built by
//! `logot_cli::problems`), and otB at full size (B = 64, n = 2048: tens of seconds per solve on
//! a small CPU) when `LOGOT_BENCH_FULL=1`; the final plan report of a solve against the same
//! f64 sums with std's `exp` (the baseline, written here); the plain half-step's rows on the
//! calling thread against the same rows over rayon (the serial crossover). See
//! benches/README.md.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use logot::backend::{Backend, CostSource, Marginals, Potentials, Side};
use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
use logot_cli::problems;
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
        if b > 1 {
            // The baseline: the same half-step as b single problems (the plain kernel).
            let mut one = be.filled(n, 0.0f32).unwrap();
            let log_nu1: Vec<Vec<f32>> = (0..b)
                .map(|k| be.upload(&log_nu[k * n..(k + 1) * n]).unwrap())
                .collect();
            let f1 = be.upload(&vec![0.0f32; n]).unwrap();
            g.bench_with_input(
                BenchmarkId::new("f32_one_at_a_time", format!("B{b}_n{n}")),
                &(),
                |bench, _| {
                    bench.iter(|| {
                        for l in &log_nu1 {
                            be.sinkstep(&prepared, Side::Col, 0.01, black_box(&f1), l, &mut one)
                                .unwrap()
                        }
                    })
                },
            );
        }
    }
    g.finish();
}

/// The plain half-step's rows (`lse` per output, one problem) on the calling thread
/// against the same rows split over rayon as the CPU backend splits them, by `n`: where
/// the serial form stops being faster is the backend's `SERIAL_WORK` crossover.
fn serial_crossover(c: &mut Criterion) {
    use logot::backend::cpu::lse::lse;
    use rayon::prelude::*;
    let mut g = c.benchmark_group("serial_crossover");
    g.measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    for &n in &[64usize, 128, 181, 256, 362, 512, 724, 1024] {
        let (mu, _, cost) = problems::ot_b::<f32>(1, n);
        let rows = cost.as_slice().unwrap();
        let f = vec![0.0f32; n];
        let lm: Vec<f32> = mu.iter().map(|v| v.ln()).collect();
        let mut out = vec![0.0f32; n];
        let row = |r: usize| 0.01 * (lm[r] - lse(&f, &rows[r * n..(r + 1) * n], 100.0));
        g.throughput(Throughput::Elements((n * n) as u64));
        g.bench_function(BenchmarkId::new("serial", n), |bench| {
            bench.iter(|| {
                out.iter_mut()
                    .enumerate()
                    .for_each(|(r, o)| *o = row(black_box(r)))
            })
        });
        g.bench_function(BenchmarkId::new("rayon", n), |bench| {
            bench.iter(|| {
                out.par_iter_mut()
                    .with_min_len(((1 << 15) / n).max(1))
                    .enumerate()
                    .for_each(|(r, o)| *o = row(black_box(r)))
            })
        });
    }
    g.finish();
}

fn ot_problems(c: &mut Criterion) {
    let mut g = c.benchmark_group("sinkhorn");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    let (mu, nu, cost) = problems::ot_a::<f32>();
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(1e-3).fixed_iterations(200));
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
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(1e-2).fixed_iterations(100));
    g.throughput(Throughput::Elements(2 * 100 * 8 * 1024 * 1024));
    g.bench_function("otBcpu_f32", |bench| {
        bench.iter(|| {
            solver
                .solve(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap())
                .unwrap()
        })
    });
    if std::env::var("LOGOT_BENCH_FULL").is_ok_and(|v| v == "1") {
        let (mu, nu, cost) = problems::ot_b::<f32>(64, 2048);
        g.throughput(Throughput::Elements(2 * 100 * 64 * 2048 * 2048));
        g.bench_function("otB_f32", |bench| {
            bench.iter(|| {
                solver
                    .solve(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap())
                    .unwrap()
            })
        });
    }
    g.finish();
}

/// `Backend::plan_report` of the CPU backend (row and column sums of `P = exp((f ⊕ g −
/// C)/ε)` and `⟨P, C⟩` in f64, vectorised) against the same sums with std's scalar `exp`,
/// on converged otB-like potentials (B = 1, n = 1024, f64), both on one thread.
fn plan_report(c: &mut Criterion) {
    let mut g = c.benchmark_group("plan_report");
    let n = 1024;
    let (mu, nu, cost) = problems::ot_b::<f64>(1, n);
    let eps = 1e-2;
    let be = CpuBackend;
    let solved = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps))
        .solve(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap())
        .unwrap();
    let (f, gp) = (solved.f.row(0).to_vec(), solved.g.row(0).to_vec());
    let prepared = be.prepare_cost(&CostSource::Dense(cost.view())).unwrap();
    let up = |v: Vec<f64>| be.upload(&v).unwrap();
    let (mu_b, nu_b) = (up(mu.row(0).to_vec()), up(nu.row(0).to_vec()));
    let (lmu, lnu) = (
        up(mu.row(0).iter().map(|v| v.ln()).collect()),
        up(nu.row(0).iter().map(|v| v.ln()).collect()),
    );
    let marginals = Marginals {
        mu: &mu_b,
        nu: &nu_b,
        log_mu: &lmu,
        log_nu: &lnu,
    };
    let pot = Potentials {
        f: up(f.clone()),
        g: up(gp.clone()),
    };
    g.throughput(Throughput::Elements((2 * n * n) as u64));
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    g.bench_function("report_f64_n1024", |bench| {
        one.install(|| {
            bench.iter(|| {
                be.plan_report(&prepared, black_box(&pot), &marginals, eps)
                    .unwrap()
            })
        })
    });
    let ct = cost.t().as_standard_layout().to_owned();
    g.bench_function("std_exp_f64_n1024", |bench| {
        bench.iter(|| {
            let sums = |p: &[f64], q: &[f64], c: ndarray::ArrayView2<'_, f64>| -> Vec<(f64, f64)> {
                p.iter()
                    .zip(c.rows())
                    .map(|(&pi, row)| {
                        row.iter().zip(q).fold((0.0, 0.0), |(s, t), (&ck, &qk)| {
                            let e = ((pi + qk - ck) / eps).exp();
                            (s + e, t + e * ck)
                        })
                    })
                    .collect()
            };
            black_box((
                sums(black_box(&f), &gp, cost.view()),
                sums(&gp, &f, ct.view()),
            ))
        })
    });
    g.finish();
}

criterion_group!(
    benches,
    sinkstep,
    ot_problems,
    plan_report,
    serial_crossover
);
criterion_main!(benches);
