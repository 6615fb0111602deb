//! Criterion benches of exact OT between histograms (CPU): the network simplex and the
//! assignment solver on one minibatch-sized problem, the `emd5000` problem (n = m = 5000
//! random 2-D points, non-uniform weights, squared Euclidean), and a batch of minibatches
//! in parallel. `scripts/bench-exact-vs-pot.py` times `emd5000` and `emdbatch` against POT
//! in one run.

use criterion::{criterion_group, criterion_main, Criterion};
use logot::exact::{emd, emd_points_batch, EmdMethod, EmdParams, Metric};
use ndarray::{Array1, Array2, Array3};
use std::hint::black_box;
use std::time::Duration;

/// Uniforms in [0, 1) from a 64-bit LCG (Knuth's constants).
fn uniforms(seed: u64, len: usize) -> Vec<f64> {
    let mut s = seed;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64) / ((1u64 << 53) as f64)
        })
        .collect()
}

/// Squared Euclidean costs between `n` and `m` uniform points of `[0,1]^d`.
fn cost(n: usize, m: usize, d: usize, seed: u64) -> Array2<f64> {
    let x = uniforms(seed, n * d);
    let y = uniforms(seed + 1, m * d);
    Array2::from_shape_fn((n, m), |(i, j)| {
        (0..d).map(|k| (x[i * d + k] - y[j * d + k]).powi(2)).sum()
    })
}

/// Weights `0.5 + u`, normalised.
fn weights(n: usize, seed: u64) -> Array1<f64> {
    let w = Array1::from(uniforms(seed, n)).mapv(|t| t + 0.5);
    let s = w.sum();
    w / s
}

fn one_problem(c: &mut Criterion) {
    let mut g = c.benchmark_group("emd");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for d in [2usize, 64] {
        let c = cost(1024, 1024, d, 1);
        let u = Array1::from_elem(1024, 1.0 / 1024.0);
        for (name, method) in [
            ("simplex", EmdMethod::NetworkSimplex),
            ("assignment", EmdMethod::Assignment),
        ] {
            let p = EmdParams::default().method(method);
            g.bench_function(format!("uniform1024_d{d}_{name}"), |b| {
                b.iter(|| emd(black_box(u.view()), u.view(), c.view(), &p).unwrap())
            });
        }
    }
    let c = cost(1000, 1000, 2, 3);
    let (a, b) = (weights(1000, 5), weights(1000, 6));
    g.bench_function("weighted1000_d2", |bch| {
        bch.iter(|| {
            emd(
                black_box(a.view()),
                b.view(),
                c.view(),
                &EmdParams::default(),
            )
            .unwrap()
        })
    });
    g.finish();
}

fn emd5000(c: &mut Criterion) {
    let mut g = c.benchmark_group("emd5000");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let c = cost(5000, 5000, 2, 7);
    let (a, b) = (weights(5000, 9), weights(5000, 10));
    g.bench_function("dense_cost", |bch| {
        bch.iter(|| {
            emd(
                black_box(a.view()),
                b.view(),
                c.view(),
                &EmdParams::default(),
            )
            .unwrap()
        })
    });
    g.finish();
}

fn emdbatch(c: &mut Criterion) {
    let mut g = c.benchmark_group("emdbatch");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let (bsz, n, d) = (8, 1024, 2);
    let x = Array3::from_shape_vec((bsz, n, d), uniforms(11, bsz * n * d)).unwrap();
    let y = Array3::from_shape_vec((bsz, n, d), uniforms(12, bsz * n * d)).unwrap();
    g.bench_function("b8_n1024_d2", |b| {
        b.iter(|| {
            emd_points_batch::<f64>(
                None,
                None,
                black_box(x.view()),
                y.view(),
                Metric::SqEuclidean,
                &EmdParams::default(),
            )
            .unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, one_problem, emd5000, emdbatch);
criterion_main!(benches);
