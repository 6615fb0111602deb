//! Criterion benches of the CPU linear-algebra kernels (DESIGN.md problems `svd3`, `gemm`,
//! `xxt`, `ns`). The CPU runs them at reduced sizes by default (the canonical 4096² sizes
//! take seconds per iteration on a laptop); `LOGOT_BENCH_FULL=1` uses the canonical sizes.
//! Throughput is reported in floating-point operations (2 per multiply-add).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use logot::backend::linalg::{GemmShape, LinalgKernels, SyrkShape, Transpose};
use logot::linalg::NewtonSchulzParams;
use logot::CpuBackend;
use ndarray::Array2;
use std::hint::black_box;
use std::time::Duration;

fn full() -> bool {
    std::env::var("LOGOT_BENCH_FULL").is_ok_and(|v| v == "1")
}

/// Deterministic pseudo-normal data (a small LCG; benches need no statistics).
fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Sum of 4 uniforms, centred: roughly N(0, 1/3).
            (0..4)
                .map(|k| ((s >> (16 * k)) & 0xffff) as f32 / 65536.0)
                .sum::<f32>()
                - 2.0
        })
        .collect()
}

fn svd3(c: &mut Criterion) {
    let mut g = c.benchmark_group("svd3");
    g.sample_size(10).measurement_time(Duration::from_secs(6));
    let (b, m) = (4096usize, 1024usize);
    let a = data(b * m * 3, 1);
    let be = CpuBackend;
    let (mut u, mut s, mut vt) = (vec![0f32; b * m * 3], vec![0f32; b * 3], vec![0f32; b * 9]);
    g.throughput(Throughput::Bytes((2 * b * m * 3 * 4) as u64)); // read A, write U
    g.bench_function(BenchmarkId::new("f32", format!("B{b}_M{m}")), |bench| {
        bench.iter(|| {
            be.svd3(black_box(&a), b, m, &mut u, &mut s, &mut vt)
                .unwrap()
        })
    });
    g.finish();
}

fn gemm(c: &mut Criterion) {
    let mut g = c.benchmark_group("gemm");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    let n = if full() { 4096 } else { 1024 };
    let (a, b, dc) = (data(n * n, 2), data(n * n, 3), data(n * n, 4));
    let be = CpuBackend;
    let mut out = vec![0f32; n * n];
    let mut out2 = vec![0f32; n * n];
    g.throughput(Throughput::Elements((2 * n * n * n) as u64));
    g.bench_function(BenchmarkId::new("forward_f32", n), |bench| {
        bench.iter(|| {
            be.gemm(
                GemmShape::new(n, n, n),
                1.0,
                black_box(&a),
                &b,
                0.0,
                &mut out,
            )
            .unwrap()
        })
    });
    g.throughput(Throughput::Elements((4 * n * n * n) as u64));
    g.bench_function(BenchmarkId::new("backward_f32", n), |bench| {
        bench.iter(|| {
            // dA = dC·Bᵀ, dB = Aᵀ·dC, transposed operands read in place.
            let s = GemmShape::new(n, n, n);
            be.gemm(
                s.with_transposes(Transpose::No, Transpose::Yes),
                1.0,
                &dc,
                &b,
                0.0,
                &mut out,
            )
            .unwrap();
            be.gemm(
                s.with_transposes(Transpose::Yes, Transpose::No),
                1.0,
                &a,
                &dc,
                0.0,
                &mut out2,
            )
            .unwrap();
        })
    });
    g.finish();
}

fn xxt(c: &mut Criterion) {
    let mut g = c.benchmark_group("xxt");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    let sizes: &[usize] = if full() { &[4096, 8192] } else { &[1024, 2048] };
    let be = CpuBackend;
    for &n in sizes {
        let x = data(n * n, 5);
        let mut out = vec![0f32; n * n];
        // Both report the work of the full product, so the symmetric kernel's saving shows.
        g.throughput(Throughput::Elements((2 * n * n * n) as u64));
        g.bench_function(BenchmarkId::new("syrk_f32", n), |bench| {
            bench.iter(|| {
                be.syrk(
                    SyrkShape {
                        n,
                        k: n,
                        ta: Transpose::No,
                    },
                    1.0,
                    black_box(&x),
                    0.0,
                    &mut out,
                )
                .unwrap()
            })
        });
        g.bench_function(BenchmarkId::new("gemm_f32", n), |bench| {
            let s = GemmShape::new(n, n, n).with_transposes(Transpose::No, Transpose::Yes);
            bench.iter(|| be.gemm(s, 1.0, black_box(&x), &x, 0.0, &mut out).unwrap())
        });
    }
    g.finish();
}

fn ns(c: &mut Criterion) {
    let mut g = c.benchmark_group("ns");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let n = if full() { 4096 } else { 1024 };
    let x = Array2::from_shape_vec((n, n), data(n * n, 6)).unwrap();
    let params = NewtonSchulzParams::default();
    g.bench_function(BenchmarkId::new("5steps_f32", n), |bench| {
        bench.iter(|| {
            logot::linalg::newton_schulz(&CpuBackend, black_box(x.view()), &params).unwrap()
        })
    });
    g.finish();
}

criterion_group!(benches, svd3, gemm, xxt, ns);
criterion_main!(benches);
