//! `logot._logot`: the compiled module under the Python package `logot`.
//!
//! Thin glue over the library: numpy arrays in (any strides; float32 or float64, one dtype
//! per call, chosen by the Python layer), the library call with the GIL released, numpy
//! arrays and result objects out. Argument handling, defaults, shapes and result classes
//! live in the Python layer (`logot/`); every check of the inputs is the library's (the
//! bindings only name the arguments they extract), and every [`logot::Error`] becomes a
//! `ValueError` (bad input) or a `RuntimeError` (numerical, device, memory, availability)
//! carrying the library's message.
//!
//! The modules follow the Python package's areas: `common` (errors, dtypes, backends,
//! timing), `args` (costs and parameters from Python), `results` (the result objects),
//! `core` (Sinkhorn: distances, plans, gradients), `exact` (exact OT: network simplex,
//! assignment, the line, sliced), `gromov` (Gromov–Wasserstein: entropic, exact, fused,
//! point clouds, envelope gradients), `points` (point clouds: gradients and
//! divergences), `barycenter`, `linalg` (bistochastic projection, SVD, Newton–Schulz),
//! `dlpack` (tensors of other libraries through DLPack), `torch` and
//! `torch_bistochastic` (CUDA tensors in place, for `logot.torch`).

/// Run `$body` with the type alias `$T` set to the dtype of `$array`.
macro_rules! by_dtype {
    ($array:expr, $arg:expr, $T:ident => $body:expr) => {
        match $crate::common::dtype_of($array, $arg)? {
            $crate::common::Dtype::F32 => {
                type $T = f32;
                $body
            }
            $crate::common::Dtype::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}

/// Run `$body` with `$be` bound to the backend `$dev` (by value: `CpuBackend` or a clone of
/// the shared `CudaBackend`).
macro_rules! by_backend {
    ($dev:expr, $be:ident => $body:expr) => {
        match $dev {
            $crate::common::Device::Cpu => {
                let $be = logot::CpuBackend;
                $body
            }
            $crate::common::Device::Cuda(cuda) => {
                let $be = cuda.clone();
                $body
            }
        }
    };
}

mod args;
mod barycenter;
mod common;
mod core;
mod dlpack;
mod exact;
mod gromov;
mod linalg;
mod points;
mod results;
mod torch;
mod torch_bistochastic;

use pyo3::prelude::*;

#[pymodule]
fn _logot(m: &Bound<'_, PyModule>) -> PyResult<()> {
    common::register(m)?;
    results::register(m)?;
    core::register(m)?;
    exact::register(m)?;
    gromov::register(m)?;
    points::register(m)?;
    barycenter::register(m)?;
    linalg::register(m)?;
    dlpack::register(m)?;
    torch::register(m)?;
    torch_bistochastic::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
