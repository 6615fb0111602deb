//! Criterion benches of the CUDA bistochastic kernels on the canonical mhc problems
//! (DESIGN.md: B = 65536 matrices n×n, X ~ U[0,4), 20 iterations forward; backward with
//! G ~ N(0,1), CG at the f32 default tolerance), buffers resident on the device; each
//! iteration includes the kernels' small read-backs (stats, CG outcomes). Skipped with a
//! message when no GPU is usable.

#[cfg(feature = "cuda")]
mod gpu {
    use criterion::{BenchmarkId, Criterion, Throughput};
    use logot::backend::cuda::CudaBackend;
    use logot::grad::CgParams;
    use logot::{Backend, BistochasticKernels};
    use logot_cli::problems;
    use std::hint::black_box;

    pub fn benches(c: &mut Criterion) {
        let gpu = match CudaBackend::new() {
            Ok(g) => g,
            Err(e) => {
                eprintln!("skipping the CUDA benches: {e}");
                return;
            }
        };
        let mut g = c.benchmark_group("cuda_bistochastic");
        let b = 65536usize;
        for n in [4usize, 16] {
            let (x, grad) = problems::mhc::<f32>(b, n, 1);
            let xb = gpu.upload(x.as_slice().unwrap()).unwrap();
            let gb = gpu.upload(grad.as_slice().unwrap()).unwrap();
            let mut r = gpu.filled(b * n * n, 0.0f32).unwrap();
            let mut dx = gpu.filled(b * n * n, 0.0f32).unwrap();
            gpu.bistochastic_forward(n, &xb, 20, 0.0, &mut r).unwrap();
            let tol = CgParams::default().effective_tol::<f32>();
            g.throughput(Throughput::Elements(b as u64));
            g.bench_with_input(
                BenchmarkId::new("forward", format!("mhc{n}")),
                &(),
                |bench, _| {
                    bench.iter(|| {
                        gpu.bistochastic_forward(n, black_box(&xb), 20, 0.0, &mut r)
                            .unwrap()
                    })
                },
            );
            g.bench_with_input(
                BenchmarkId::new("backward", format!("mhc{n}")),
                &(),
                |bench, _| {
                    bench.iter(|| {
                        gpu.bistochastic_backward(n, black_box(&r), &gb, tol, 1000, &mut dx, None)
                            .unwrap()
                    })
                },
            );
        }
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
