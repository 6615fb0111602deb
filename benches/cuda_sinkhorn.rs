//! Criterion benches of the CUDA backend (feature `cuda`, skipped with a message when no
//! GPU is usable): one otB half-step, and the otA and otB solves with the batch resident
//! on the device (`Solver::prepare` once, `solve_prepared` timed).

#[cfg(feature = "cuda")]
mod gpu {
    use criterion::{BenchmarkId, Criterion, Throughput};
    use logot::backend::cuda::CudaBackend;
    use logot::backend::{Backend, CostSource, Side};
    use logot::{BufferOutputs, Problem, SinkhornParams, SinkhornSolver};
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
        let mut g = c.benchmark_group("cuda_sinkstep");
        let (b, n) = (64usize, 2048usize);
        let (mu, _, cost) = problems::ot_b::<f32>(b, n);
        let prepared = gpu.prepare_cost(&CostSource::Dense(cost.view())).unwrap();
        let f = gpu.upload(&vec![0.0f32; b * n]).unwrap();
        let log_nu = gpu
            .upload(&mu.iter().map(|v| v.ln()).collect::<Vec<f32>>())
            .unwrap();
        let mut out = gpu.filled(b * n, 0.0f32).unwrap();
        g.throughput(Throughput::Elements((b * n * n) as u64));
        g.bench_with_input(
            BenchmarkId::new("f32", format!("B{b}_n{n}")),
            &(),
            |bench, _| {
                bench.iter(|| {
                    gpu.sinkstep(&prepared, Side::Col, 0.01, black_box(&f), &log_nu, &mut out)
                        .unwrap();
                    gpu.synchronize().unwrap()
                })
            },
        );
        g.finish();

        let mut g = c.benchmark_group("cuda_sinkhorn");
        g.sample_size(20).measurement_time(Duration::from_secs(5));
        let (mu, nu, cost) = problems::ot_a::<f32>();
        let solver =
            SinkhornSolver::new(gpu.clone(), SinkhornParams::new(1e-3).fixed_iterations(200));
        let p = Problem::new(mu.view(), nu.view(), cost.view()).unwrap();
        let prepared = solver.prepare(&p).unwrap();
        let (_, n, m) = prepared.dims();
        let (mut f, mut g_pot) = (
            gpu.filled(n, 0.0f32).unwrap(),
            gpu.filled(m, 0.0f32).unwrap(),
        );
        g.bench_function("otA_f32", |bench| {
            bench.iter(|| {
                let out = BufferOutputs::new().potentials(&mut f, &mut g_pot);
                solver.solve_prepared(&prepared, out).unwrap();
                let f = ndarray::Array1::from(gpu.download(&f).unwrap());
                let mean = f.sum() / f.len() as f32;
                black_box(f.mapv(|v| v - mean)) // gradient w.r.t. μ (centred potential)
            })
        });
        let (mu, nu, cost) = problems::ot_b::<f32>(64, 2048);
        let solver = SinkhornSolver::new(gpu, SinkhornParams::new(1e-2).fixed_iterations(100));
        let p = Problem::new(mu.view(), nu.view(), cost.view()).unwrap();
        let prepared = solver.prepare(&p).unwrap();
        g.throughput(Throughput::Elements(2 * 100 * 64 * 2048 * 2048));
        g.bench_function("otB_f32", |bench| {
            bench.iter(|| {
                solver
                    .solve_prepared(&prepared, BufferOutputs::new())
                    .unwrap()
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
