//! The CUDA backend for the GPU tests: `None` (with the reason printed) when no GPU is
//! usable, so the test skips; a panic instead under `LOGOT_REQUIRE_GPU=1`, so a skip can
//! never pass for a run on the GPU machine.
use logot::backend::cuda::{CudaBackend, CudaOptions};

/// The first GPU with `options`.
pub fn gpu_with(options: CudaOptions) -> Option<CudaBackend> {
    match CudaBackend::with_options(0, options) {
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

/// The first GPU with the default options.
pub fn gpu() -> Option<CudaBackend> {
    gpu_with(CudaOptions::default())
}
