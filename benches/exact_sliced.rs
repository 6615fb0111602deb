//! Criterion benches of exact OT on the line and sliced Wasserstein (CPU): `wasserstein_1d`
//! on 10^6 weighted points (sort-bound), and sliced distances and gradients on clouds in
//! [0,1]^3 at sizes that suit criterion. `scripts/bench-sliced-vs-pot.py` times the full
//! `sliced` problem (n = m = 10^6, 256 directions) against NumPy's sort floor and POT.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use logot::exact::{
    sliced_wasserstein_distance, sliced_wasserstein_grad, wasserstein_1d, Projections,
};
use ndarray::{Array1, Array2};
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

fn one_d(c: &mut Criterion) {
    let mut g = c.benchmark_group("wasserstein_1d");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    let n = 1_000_000;
    let u = Array1::from(uniforms(1, n));
    let v = Array1::from(uniforms(2, n)).mapv(|t| t * t);
    let w = Array1::from(uniforms(3, n)).mapv(|t| t + 0.1);
    let w = &w / w.sum();
    g.throughput(Throughput::Elements(2 * n as u64));
    g.bench_function("n1e6_weighted_p2", |b| {
        b.iter(|| wasserstein_1d(black_box(u.view()), v.view(), Some(w.view()), None, 2.0).unwrap())
    });
    g.bench_function("n1e6_uniform_p1", |b| {
        b.iter(|| wasserstein_1d(black_box(u.view()), v.view(), None, None, 1.0).unwrap())
    });
    g.finish();
}

fn sliced(c: &mut Criterion) {
    let mut g = c.benchmark_group("sliced");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for &(n, l) in &[(1usize << 17, 32usize), (1 << 20, 8)] {
        let x = Array2::from_shape_vec((n, 3), uniforms(4, 3 * n)).unwrap();
        let y = Array2::from_shape_vec((n, 3), uniforms(5, 3 * n))
            .unwrap()
            .mapv(|t| 0.1 + 0.8 * t);
        let pr = Projections::Random { count: l, seed: 0 };
        // Throughput in sorted values.
        g.throughput(Throughput::Elements((2 * n * l) as u64));
        g.bench_with_input(
            BenchmarkId::new("distance", format!("n{n}_L{l}")),
            &(),
            |b, _| {
                b.iter(|| {
                    sliced_wasserstein_distance(black_box(x.view()), y.view(), None, None, &pr, 2.0)
                        .unwrap()
                })
            },
        );
        if n == 1 << 17 {
            g.bench_with_input(
                BenchmarkId::new("gradient", format!("n{n}_L{l}")),
                &(),
                |b, _| {
                    b.iter(|| {
                        sliced_wasserstein_grad(black_box(x.view()), y.view(), None, None, &pr, 2.0)
                            .unwrap()
                    })
                },
            );
        }
    }
    g.finish();
}

criterion_group!(benches, one_d, sliced);
criterion_main!(benches);
