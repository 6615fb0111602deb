//! `logot bench` for the canonical problems that run on the extension kernels:
//! `mhc4`, `mhc16` ([`BistochasticKernels`]) and `svd3`, `xxt`, `xxt8192`, `ns`, `gemm`
//! ([`LinalgKernels`]).
//!
//! Inputs are built on the host from seeded generators ([`logot_cli::problems`]) and uploaded
//! once; only the kernels are timed. Every timed run ends with a read-back to the host (a
//! kernel's own small report, or one element for the kernels that report nothing): the
//! backends run their kernels in order on one stream and a download waits for them, so
//! the time includes all device work and nothing queued is left out.

use crate::bench::{time_runs_for, BenchArgs, BenchProblem};
use crate::npy::Dtype;
use crate::{BackendChoice, Json};
use logot::backend::linalg::{GemmShape, SyrkShape, Transpose};
use logot::grad::CgParams;
use logot::linalg::{newton_schulz_buffers, NewtonSchulzParams};
use logot::{Backend, BistochasticKernels, CpuBackend, Error, LinalgKernels, Real, Result};
use logot_cli::problems;
use serde_json::json;

/// Run `body::<T, CpuBackend>` in the chosen precision, on a rayon worker thread (the
/// kernels' parallel loops then fork and join without a thread hand-off per call).
macro_rules! on_cpu {
    ($dtype:expr, $body:ident, $args:expr) => {
        match $dtype {
            Dtype::F32 => rayon::scope(|_| $body::<f32, _>(CpuBackend, $args)),
            Dtype::F64 => rayon::scope(|_| $body::<f64, _>(CpuBackend, $args)),
        }
    };
}

/// Time one of the kernel problems. The bodies are generic over the backend and run on
/// either backend through `dispatch!`.
pub fn bench(dtype: Dtype, a: &BenchArgs) -> Json {
    let mhc = matches!(a.problem, BenchProblem::Mhc4 | BenchProblem::Mhc16);
    match (mhc, a.backend) {
        (true, BackendChoice::Cpu) => on_cpu!(dtype, run_mhc, a),
        (true, BackendChoice::Cuda) => dispatch!(dtype, a.backend, run_mhc, a),
        (false, BackendChoice::Cpu) => on_cpu!(dtype, run_linalg, a),
        (false, BackendChoice::Cuda) => dispatch!(dtype, a.backend, run_linalg, a),
    }
}

/// Copy `data` to a new device buffer.
fn upload<T: Real, B: Backend<T>>(backend: &B, data: &[T]) -> Result<B::Buffer> {
    backend.upload(data)
}

/// Wait for the device: read a one-element buffer back (in order after every kernel
/// queued before it).
fn sync<T: Real, B: Backend<T>>(backend: &B, probe: &B::Buffer) -> Result<()> {
    backend.download(probe).map(|_| ())
}

/// Throughput in units per second ×1e-9, from a count and a time in milliseconds.
fn giga_per_s(count: f64, ms: f64) -> f64 {
    count / (ms * 1e-3) / 1e9
}

fn threads(a: &BenchArgs) -> serde_json::Value {
    if a.backend == BackendChoice::Cpu {
        rayon::current_num_threads().into()
    } else {
        serde_json::Value::Null
    }
}

/// mhc4 / mhc16: `B = 65536` matrices `n×n`, `X ~ U[0, 4)`, 20 iterations forward; backward
/// with `G ~ N(0, 1)` (implicit CG, the precision's default tolerance, the CG summary read
/// back). `ms` is the forward.
fn run_mhc<T: Real, B: BistochasticKernels<T>>(backend: B, a: &BenchArgs) -> Json {
    let (batch, n, iters) = (65_536usize, a.problem.mhc_n(), 20usize);
    let (x, g) = problems::mhc::<T>(batch, n, 1);
    let len = batch * n * n;
    let flat = |v: ndarray::Array3<T>| v.iter().copied().collect::<Vec<T>>();
    let xb = upload(&backend, &flat(x))?;
    let gb = upload(&backend, &flat(g))?;
    let mut r = backend.filled(len, T::zero())?;
    let mut dx = backend.filled(len, T::zero())?;
    let mut stats = None;
    // The forward and the backward each read back their report (stats, CG summary): synchronised.
    let (fwd_ms, fwd_min, fwd_all) = time_runs_for(a, || {
        stats = Some(backend.bistochastic_forward(n, &xb, iters, 0.0, &mut r)?);
        Ok(())
    })?;
    let tol = CgParams::default().effective_tol::<T>();
    let mut summary = None;
    let (bwd_ms, bwd_min, bwd_all) = time_runs_for(a, || {
        summary = Some(backend.bistochastic_backward(n, &r, &gb, tol, 1000, &mut dx, None)?);
        Ok(())
    })?;
    let stats = stats.ok_or_else(|| Error::Numerical("no run completed".into()))?;
    let cg = summary.ok_or_else(|| Error::Numerical("no run completed".into()))?;
    Ok(json!({
        "problem": a.problem.name(),
        "backend": a.backend.name(),
        "dtype": T::NAME,
        "batch": batch,
        "n": n,
        "iterations": stats.iterations,
        "ms": fwd_ms,
        "min_ms": fwd_min,
        "runs_ms": fwd_all,
        "forward_ms": fwd_ms,
        "backward_ms": bwd_ms,
        "backward_min_ms": bwd_min,
        "backward_runs_ms": bwd_all,
        "marginal_error": stats.marginal_error,
        "cg_tol": tol,
        "cg_max_iterations": cg.max_iterations,
        "cg_max_residual": cg.max_residual,
        "cg_unconverged": cg.unconverged,
        "threads": threads(a),
    }))
}

/// svd3, xxt, xxt8192, ns, gemm: `N(0, 1)` inputs, kernels on resident buffers.
fn run_linalg<T: Real, B: LinalgKernels<T>>(backend: B, a: &BenchArgs) -> Json {
    let be = &backend;
    let probe = be.filled(1, T::zero())?;
    let mut out = json!({
        "problem": a.problem.name(),
        "backend": a.backend.name(),
        "dtype": T::NAME,
        "threads": threads(a),
    });
    let (ms, min, all) = match a.problem {
        BenchProblem::Svd3 => {
            let (batch, m) = (4096usize, 1024usize);
            let ab = upload(be, &problems::standard_normal::<T>(batch * m * 3, 1))?;
            let mut u = be.filled(batch * m * 3, T::zero())?;
            let mut s = be.filled(batch * 3, T::zero())?;
            let mut vt = be.filled(batch * 9, T::zero())?;
            let t = time_runs_for(a, || {
                be.svd3(&ab, batch, m, &mut u, &mut s, &mut vt)?;
                sync(be, &probe)
            })?;
            // Back-to-back calls with one read-back: the per-call time without the
            // host's launch-and-synchronise latency (which the median above includes).
            let reps = 20;
            let amortised = time_runs_for(a, || {
                for _ in 0..reps {
                    be.svd3(&ab, batch, m, &mut u, &mut s, &mut vt)?;
                }
                sync(be, &probe)
            })?;
            out["amortised_ms"] = (amortised.0 / reps as f64).into();
            let smax = be.download(&s)?.iter().fold(0.0f64, |x, v| x.max(v.f64()));
            // Read A and write U: the memory traffic floor.
            let bytes = (2 * batch * m * 3 * std::mem::size_of::<T>()) as f64;
            out["shape"] = json!([batch, m, 3]);
            out["gb_per_s"] = giga_per_s(bytes, t.0).into();
            out["s_max"] = smax.into();
            t
        }
        BenchProblem::Xxt | BenchProblem::Xxt8192 => {
            let n = if a.problem == BenchProblem::Xxt {
                4096
            } else {
                8192
            };
            let xb = upload(be, &problems::standard_normal::<T>(n * n, 2))?;
            let mut c = be.filled(n * n, T::zero())?;
            let shape = SyrkShape {
                n,
                k: n,
                ta: Transpose::No,
            };
            let t = time_runs_for(a, || {
                be.syrk(shape, T::one(), &xb, T::zero(), &mut c)?;
                sync(be, &probe)
            })?;
            // The same product read transposed (XᵀX of the same square matrix).
            let shape_t = SyrkShape {
                ta: Transpose::Yes,
                ..shape
            };
            let tt = time_runs_for(a, || {
                be.syrk(shape_t, T::one(), &xb, T::zero(), &mut c)?;
                sync(be, &probe)
            })?;
            out["transposed_ms"] = tt.0.into();
            out["shape"] = json!([n, n]);
            // The work of the full product 2n³ (the symmetric kernel does about half).
            out["gflop_per_s"] = giga_per_s(2.0 * (n as f64).powi(3), t.0).into();
            t
        }
        BenchProblem::Ns => {
            let n = 4096;
            let xb = upload(be, &problems::standard_normal::<T>(n * n, 3))?;
            let params = NewtonSchulzParams::default();
            let t = time_runs_for(a, || {
                let y = newton_schulz_buffers(be, &xb, n, n, &params)?;
                sync(be, &probe)?;
                drop(y);
                Ok(())
            })?;
            out["shape"] = json!([n, n]);
            out["steps"] = params.steps.into();
            // Per step X·Xᵀ, A·A and B·X, each counted as a full 2n³ product.
            out["gflop_per_s"] =
                giga_per_s(params.steps as f64 * 6.0 * (n as f64).powi(3), t.0).into();
            t
        }
        BenchProblem::Gemm => {
            let n = 4096;
            let ab = upload(be, &problems::standard_normal::<T>(n * n, 4))?;
            let bb = upload(be, &problems::standard_normal::<T>(n * n, 5))?;
            let dc = upload(be, &problems::standard_normal::<T>(n * n, 6))?;
            let mut c = be.filled(n * n, T::zero())?;
            let mut da = be.filled(n * n, T::zero())?;
            let mut db = be.filled(n * n, T::zero())?;
            let s = GemmShape::new(n, n, n);
            let fwd = time_runs_for(a, || {
                be.gemm(s, T::one(), &ab, &bb, T::zero(), &mut c)?;
                sync(be, &probe)
            })?;
            // dA = dC·Bᵀ, dB = Aᵀ·dC, the transposed operands read in place.
            let bwd = time_runs_for(a, || {
                let nt = s.with_transposes(Transpose::No, Transpose::Yes);
                be.gemm(nt, T::one(), &dc, &bb, T::zero(), &mut da)?;
                let tn = s.with_transposes(Transpose::Yes, Transpose::No);
                be.gemm(tn, T::one(), &ab, &dc, T::zero(), &mut db)?;
                sync(be, &probe)
            })?;
            // Each transpose combination on its own.
            for (ta, tb, key) in [
                (Transpose::No, Transpose::Yes, "nt_ms"),
                (Transpose::Yes, Transpose::No, "tn_ms"),
                (Transpose::Yes, Transpose::Yes, "tt_ms"),
            ] {
                let st = s.with_transposes(ta, tb);
                let t = time_runs_for(a, || {
                    be.gemm(st, T::one(), &ab, &bb, T::zero(), &mut c)?;
                    sync(be, &probe)
                })?;
                out[key] = t.0.into();
            }
            let flops = 2.0 * (n as f64).powi(3);
            out["shape"] = json!([n, n, n]);
            out["forward_ms"] = fwd.0.into();
            out["gflop_per_s"] = giga_per_s(flops, fwd.0).into();
            out["backward_ms"] = bwd.0.into();
            out["backward_min_ms"] = bwd.1.into();
            out["backward_runs_ms"] = json!(bwd.2);
            out["backward_gflop_per_s"] = giga_per_s(2.0 * flops, bwd.0).into();
            fwd
        }
        other => {
            return Err(Error::Unavailable(format!(
                "bench --problem {}: not a linear-algebra problem",
                other.name()
            )))
        }
    };
    out["ms"] = ms.into();
    out["min_ms"] = min.into();
    out["runs_ms"] = json!(all);
    Ok(out)
}
