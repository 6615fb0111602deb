//! [`BistochasticKernels`] on the GPU (cuda/bistochastic.cu): one fused kernel each for the
//! forward and the backward, a group of `N` lanes per matrix (`N` the power of two ≥ n, so
//! 32/N matrices per warp), each lane holding one row and one column in registers.
//!
//! * Forward: `K = exp(X − max X)` once, then the iteration in the scaling domain (FMAs and
//!   one reciprocal per lane and half-step), scalings absorbed into `K` when they leave
//!   `[2^-30, 2^30]` (f32); matrices whose spread `max X − min X` exceeds 80 (f32; 690 in f64)
//!   run the log-domain iteration of the CPU instead. The stats are reduced on the device
//!   (three numbers read back).
//! * Backward: CG on the Schur system with the matrix's own row and column sums, exactly as
//!   the CPU does (projection off the support, per-matrix stop, true residual recomputed),
//!   in the working precision; one word (iterations, converged) and one residual per matrix
//!   are read back for the [`CgOutcome`]s.

use super::{cuda_err, CudaBackend, CudaBuffer, CudaReal};
use crate::backend::batch_of;
use crate::backend::bistochastic::{BistochasticKernels, ProjectionStats};
use crate::grad::cg::CgOutcome;
use crate::{Error, Result};
use cudarc::driver::{LaunchConfig, PushKernelArg};

/// Threads per block (`BISTO_THREADS`).
const THREADS: usize = 256;
/// Largest matrix size.
const MAX_N: usize = 32;
/// Largest CG iteration count the outcome word holds (30 bits).
const MAX_CG_ITERS: usize = (1 << 30) - 1;

pub(super) const KERNEL_NAMES: &[&str] = &[
    "bisto_fwd_n2_f32",
    "bisto_fwd_n4_f32",
    "bisto_fwd_n8_f32",
    "bisto_fwd_n16_f32",
    "bisto_fwd_n32_f32",
    "bisto_fwd_n2_f64",
    "bisto_fwd_n4_f64",
    "bisto_fwd_n8_f64",
    "bisto_fwd_n16_f64",
    "bisto_fwd_n32_f64",
    "bisto_bwd_n2_f32",
    "bisto_bwd_n4_f32",
    "bisto_bwd_n8_f32",
    "bisto_bwd_n16_f32",
    "bisto_bwd_n32_f32",
    "bisto_bwd_n2_f64",
    "bisto_bwd_n4_f64",
    "bisto_bwd_n8_f64",
    "bisto_bwd_n16_f64",
    "bisto_bwd_n32_f64",
];

/// Lanes per matrix: the power of two ≥ n (at least 2).
fn group(n: usize) -> Result<usize> {
    if n == 0 || n > MAX_N {
        return Err(Error::parameter(
            "n",
            n,
            format!("the CUDA bistochastic kernels handle 1 ≤ n ≤ {MAX_N}"),
        ));
    }
    Ok(n.next_power_of_two().max(2))
}

/// Blocks for `batch` matrices of `lanes` lanes each.
fn blocks(batch: usize, lanes: usize) -> Result<LaunchConfig> {
    let b = (batch * lanes).div_ceil(THREADS);
    let gx = u32::try_from(b)
        .ok()
        .filter(|&g| g <= i32::MAX as u32)
        .ok_or_else(|| Error::shape("x", format!("{batch} matrices exceed the launch grid")))?;
    Ok(LaunchConfig {
        grid_dim: (gx.max(1), 1, 1),
        block_dim: (THREADS as u32, 1, 1),
        shared_mem_bytes: 0,
    })
}

fn same_len<T>(what: &str, b: &CudaBuffer<T>, want: usize) -> Result<()> {
    if b.len != want {
        return Err(Error::shape(
            what,
            format!("has length {} but {want} is needed", b.len),
        ));
    }
    Ok(())
}

impl<T: CudaReal> BistochasticKernels<T> for CudaBackend {
    fn bistochastic_max_n(&self) -> usize {
        MAX_N
    }

    fn bistochastic_forward(
        &self,
        n: usize,
        x: &CudaBuffer<T>,
        iters: usize,
        tol: f64,
        r: &mut CudaBuffer<T>,
    ) -> Result<ProjectionStats> {
        let lanes = group(n)?;
        let batch = batch_of(x.len, n * n, "x")?;
        same_len("r", r, x.len)?;
        let iters_i = i32::try_from(iters)
            .map_err(|_| Error::parameter("iters", iters, "at most 2^31 − 1 iterations"))?;
        let func = self
            .func(&format!("bisto_fwd_n{lanes}_{}", T::SUFFIX))?
            .clone();
        let stats = self
            .inner
            .stream
            .alloc_zeros::<u64>(3)
            .map_err(|e| cuda_err("allocating the projection stats", e))?;
        let (px, pr, ps) = (self.ptr(&x.data), self.ptr(&r.data), self.ptr(&stats));
        let (bi, ni) = (batch as i64, n as i32);
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&px)
            .arg(&pr)
            .arg(&bi)
            .arg(&ni)
            .arg(&iters_i)
            .arg(&tol)
            .arg(&ps);
        unsafe { b.launch(blocks(batch, lanes)?) }
            .map_err(|e| cuda_err("launching bistochastic_forward", e))?;
        let host = self
            .inner
            .stream
            .clone_dtoh(&stats)
            .map_err(|e| cuda_err("reading the projection stats", e))?;
        Ok(ProjectionStats {
            iterations: host[0] as usize,
            marginal_error: f64::from_bits(host[1]),
            unconverged: host[2] as usize,
        })
    }

    fn bistochastic_backward(
        &self,
        n: usize,
        r: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        tol: f64,
        max_iters: usize,
        dx: &mut CudaBuffer<T>,
    ) -> Result<Vec<CgOutcome>> {
        let lanes = group(n)?;
        let batch = batch_of(r.len, n * n, "r")?;
        same_len("g", g, r.len)?;
        same_len("dx", dx, r.len)?;
        let func = self
            .func(&format!("bisto_bwd_n{lanes}_{}", T::SUFFIX))?
            .clone();
        // SAFETY: every word is written by the kernel before it is read back.
        let words = unsafe { self.inner.stream.alloc::<u32>(batch) }
            .map_err(|e| cuda_err("allocating the CG outcomes", e))?;
        let res = self.alloc::<T>(batch, "the CG residuals")?;
        let (pr, pg, pd, pw, pres) = (
            self.ptr(&r.data),
            self.ptr(&g.data),
            self.ptr(&dx.data),
            self.ptr(&words),
            self.ptr(&res),
        );
        let (bi, ni) = (batch as i64, n as i32);
        let iters = max_iters.min(MAX_CG_ITERS) as i32;
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pr)
            .arg(&pg)
            .arg(&pd)
            .arg(&bi)
            .arg(&ni)
            .arg(&tol)
            .arg(&iters)
            .arg(&pw)
            .arg(&pres);
        unsafe { b.launch(blocks(batch, lanes)?) }
            .map_err(|e| cuda_err("launching bistochastic_backward", e))?;
        let words = self
            .inner
            .stream
            .clone_dtoh(&words)
            .map_err(|e| cuda_err("reading the CG outcomes", e))?;
        let res = self
            .inner
            .stream
            .clone_dtoh(&res)
            .map_err(|e| cuda_err("reading the CG residuals", e))?;
        let mut out = Vec::with_capacity(batch);
        for (k, (&w, &rv)) in words.iter().zip(&res).take(batch).enumerate() {
            if w & 0x4000_0000 != 0 {
                return Err(Error::Numerical(format!(
                    "CG: the right-hand side of problem {k} is not finite"
                )));
            }
            let residual = rv.f64();
            if residual.is_nan() {
                return Err(Error::Numerical(format!(
                    "CG: the residual of problem {k} is NaN"
                )));
            }
            out.push(CgOutcome {
                iterations: (w & 0x3fff_ffff) as usize,
                residual,
                converged: w & 0x8000_0000 != 0,
            });
        }
        Ok(out)
    }
}
