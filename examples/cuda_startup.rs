//! Start-up time of the CUDA backend: `CudaBackend::new()`, then the first and the second
//! solve of a small dense problem (otA: n = 100, ε = 1e-3, 200 iterations, f32). Each kernel
//! module is compiled by NVRTC (or read from the kernel cache) and loaded at the first launch
//! of one of its kernels, so the first solve carries the compilation of the modules it uses;
//! the modules loaded after each step are printed.
//!
//! `cargo run --release --features cuda --example cuda_startup [KERNEL_CACHE_DIR]`
//! (with a directory: compiled modules are kept there and read back by later runs).

#[cfg(feature = "cuda")]
fn main() -> logot::Result<()> {
    use logot::backend::cuda::CudaBackend;
    use logot::{Problem, SinkhornParams, SinkhornSolver};
    use logot_cli::problems;
    use std::time::Instant;

    let cache = std::env::args().nth(1);
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;

    let t = Instant::now();
    let gpu = match &cache {
        Some(dir) => CudaBackend::with_kernel_cache(0, dir)?,
        None => CudaBackend::new()?,
    };
    let t_new = ms(t);
    println!(
        "device: {} ({} SMs); kernel cache: {}",
        gpu.device_name(),
        gpu.sm_count(),
        cache.as_deref().unwrap_or("none")
    );
    println!(
        "CudaBackend::new: {t_new:.1} ms (modules loaded: {:?})",
        gpu.loaded_modules()
    );

    let (mu, nu, cost) = problems::ot_a::<f32>();
    let problem = Problem::new(mu.view(), nu.view(), cost.view())?;
    let solver = SinkhornSolver::new(gpu.clone(), SinkhornParams::new(1e-3).fixed_iterations(200));
    for which in ["first", "second"] {
        let t = Instant::now();
        let r = solver.solve(&problem)?;
        println!(
            "{which} wasserstein (otA): {:.1} ms, distance {:.6} (modules loaded: {:?})",
            ms(t),
            r.distance[0],
            gpu.loaded_modules()
        );
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn main() {
    eprintln!("this example needs `--features cuda`");
}
