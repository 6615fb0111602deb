//! The CUDA backend for the GPU tests: `None` (with the reason printed) when no GPU is
//! usable, so the test skips; a panic instead under `LOGOT_REQUIRE_GPU=1`, so a skip can
//! never pass for a run on the GPU machine.
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use logot::backend::cuda::{CudaBackend, Tuning};
use std::path::PathBuf;
use std::sync::Arc;

/// Where the GPU tests keep the compiled kernel modules, so that each test binary after the
/// first loads them instead of compiling them again (files named by source and options).
pub fn kernel_cache() -> PathBuf {
    std::env::temp_dir().join("logot-test-kernels")
}

/// The first GPU with the kernel choices of `tuning`, its modules kept in [`kernel_cache`].
pub fn gpu_with(tuning: Tuning) -> Option<CudaBackend> {
    match CudaBackend::with_tuning(0, tuning, Some(kernel_cache())) {
        Ok(b) => Some(b),
        Err(e) => {
            if std::env::var("LOGOT_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("LOGOT_REQUIRE_GPU=1 but the CUDA backend is unavailable: {e}");
            }
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// The first GPU with the default kernel choices.
pub fn gpu() -> Option<CudaBackend> {
    gpu_with(Tuning::default())
}

/// Every GPU of the machine (ordinals 0, 1, … until one is missing) joined by NCCL: `None`
/// (with the reason printed) when there is no GPU or no NCCL, a panic instead under
/// `LOGOT_REQUIRE_GPU=1`.
pub fn gpu_cluster() -> Option<logot::CudaCluster> {
    gpu()?;
    let members: Vec<CudaBackend> = (0..16)
        .map_while(|o| CudaBackend::with_kernel_cache(o, kernel_cache()).ok())
        .collect();
    match logot::CudaCluster::new(members) {
        Ok(c) => Some(c),
        Err(e) => {
            if std::env::var("LOGOT_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("LOGOT_REQUIRE_GPU=1 but the GPUs cannot be joined: {e}");
            }
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// The device's primary context and a stream of its own, as a framework (PyTorch) holds
/// them: the owner of the memory and stream the borrowed-buffer tests hand to the backend.
pub fn foreign(be: &CudaBackend) -> (Arc<CudaContext>, Arc<CudaStream>) {
    let ctx = CudaContext::new(be.ordinal()).unwrap();
    // SAFETY: before any allocation of this context object.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().unwrap();
    (ctx, stream)
}

/// The device address of `s`, as a framework's `data_ptr()`.
pub fn address<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    s.device_ptr(stream).0
}

/// A kernel `spin(ns)` for [`spin`], compiled and loaded in `ctx` (keep it until the work
/// queued behind it is done: unloading its module waits for the spin).
pub fn spinner(ctx: &Arc<CudaContext>) -> cudarc::driver::CudaFunction {
    const SPIN: &str = r#"
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
"#;
    let ptx = cudarc::nvrtc::compile_ptx(SPIN).unwrap();
    ctx.load_module(ptx).unwrap().load_function("spin").unwrap()
}

/// Queues on `stream`, without waiting, one thread of `spinner` spinning for `ms`
/// milliseconds on the GPU's global timer: work queued behind it cannot start before it
/// ends, so a call that waits for the stream takes at least that long.
pub fn spin(stream: &Arc<CudaStream>, spinner: &cudarc::driver::CudaFunction, ms: u64) {
    use cudarc::driver::{LaunchConfig, PushKernelArg};
    let ns = ms * 1_000_000;
    let mut launch = stream.launch_builder(spinner);
    launch.arg(&ns);
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `spin(unsigned long long)` takes the one argument pushed.
    unsafe { launch.launch(cfg) }.unwrap();
}
