//! Criterion benches of the CUDA linear-algebra kernels (feature `cuda`, skipped with a
//! message when no GPU is usable), on resident buffers, each iteration synchronised:
//! svd3 (B = 4096, M = 1024), GEMM 4096³, X·Xᵀ 4096², and 5-step Newton–Schulz 4096², f32.

#[cfg(feature = "cuda")]
mod gpu {
    use criterion::{Criterion, Throughput};
    use logot::backend::cuda::CudaBackend;
    use logot::linalg::{
        newton_schulz_buffers, GemmShape, LinalgKernels, NewtonSchulzParams, SyrkShape, Transpose,
    };
    use logot::Backend;
    use logot_cli::problems;
    use std::hint::black_box;
    use std::time::Duration;

    pub fn benches(c: &mut Criterion) {
        let gpu = match CudaBackend::new() {
            Ok(g) => g,
            Err(e) => {
                eprintln!("skipping the CUDA benches: {e}");
                return;
            }
        };
        let mut g = c.benchmark_group("cuda_linalg");
        g.sample_size(20).measurement_time(Duration::from_secs(3));

        let (batch, m) = (4096usize, 1024usize);
        let a = gpu
            .upload(&problems::standard_normal::<f32>(batch * m * 3, 1))
            .unwrap();
        let mut u = gpu.filled(batch * m * 3, 0.0f32).unwrap();
        let mut s = gpu.filled(batch * 3, 0.0f32).unwrap();
        let mut vt = gpu.filled(batch * 9, 0.0f32).unwrap();
        g.throughput(Throughput::Bytes((2 * batch * m * 3 * 4) as u64));
        g.bench_function("svd3_f32_B4096_M1024", |b| {
            b.iter(|| {
                gpu.svd3(black_box(&a), batch, m, &mut u, &mut s, &mut vt)
                    .unwrap();
                gpu.synchronize().unwrap()
            })
        });
        drop((a, u, s, vt));

        let n = 4096usize;
        let x = gpu
            .upload(&problems::standard_normal::<f32>(n * n, 2))
            .unwrap();
        let y = gpu
            .upload(&problems::standard_normal::<f32>(n * n, 3))
            .unwrap();
        let mut out = gpu.filled(n * n, 0.0f32).unwrap();
        g.throughput(Throughput::Elements((2 * n * n * n) as u64));
        g.bench_function("gemm_f32_4096", |b| {
            b.iter(|| {
                gpu.gemm(GemmShape::new(n, n, n), 1.0, &x, &y, 0.0, &mut out)
                    .unwrap();
                gpu.synchronize().unwrap()
            })
        });
        g.bench_function("xxt_f32_4096", |b| {
            let shape = SyrkShape {
                n,
                k: n,
                ta: Transpose::No,
            };
            b.iter(|| {
                gpu.syrk(shape, 1.0, &x, 0.0, &mut out).unwrap();
                gpu.synchronize().unwrap()
            })
        });
        g.throughput(Throughput::Elements((5 * 6 * n * n * n) as u64));
        g.bench_function("newton_schulz5_f32_4096", |b| {
            let params = NewtonSchulzParams::default();
            b.iter(|| {
                let r = newton_schulz_buffers(&gpu, &x, n, n, &params).unwrap();
                gpu.synchronize().unwrap();
                r
            })
        });
        g.finish();
    }
}

#[cfg(feature = "cuda")]
criterion::criterion_group!(benches, gpu::benches);
#[cfg(feature = "cuda")]
criterion::criterion_main!(benches);

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("the CUDA benches need `--features cuda`");
}
