//! Grid costs ([`CostSource::Grid`](crate::backend::CostSource::Grid)) on the GPU: one
//! batched 1-D log-sum-exp pass per axis (`grid_pass_*` in cuda/grid.cu), mirroring
//! [`crate::backend::cpu`]'s separable convolutions; the `n×n` cost is never formed.

use super::{
    cfg1, cuda_err, to_i32, CostDims, CudaBackend, CudaBuffer, CudaCost, CudaReal, LaunchAttr,
};
use crate::backend::{BaryBuffers, BaryLayout, GridCost};
use crate::{Error, Result};
use cudarc::driver::LaunchConfig;
use cudarc::driver::PushKernelArg;

/// Longest grid axis the pass kernel stages in shared memory (`GRID_MAX_N` in cuda/grid.cu).
pub(crate) const GRID_MAX_N: usize = 1024;

impl CudaBackend {
    pub(super) fn prepare_grid<T: CudaReal>(&self, grid: &GridCost) -> Result<CudaCost<T>> {
        if let Some(&big) = grid.shape().iter().find(|&&n| n > GRID_MAX_N) {
            return Err(Error::Unavailable(format!(
                "cost: the CUDA backend handles grid axes of at most {GRID_MAX_N} points, the grid {:?} has an axis of {big} (use the CPU backend)",
                grid.shape()
            )));
        }
        let n = grid.len();
        to_i32(n, "grid points")?;
        Ok(CudaCost {
            split_parts: Default::default(),
            dims: CostDims {
                n,
                m: n,
                batch: None,
            },
            c: self.alloc::<T>(1, "a grid cost placeholder")?,
            ct: self.alloc::<T>(1, "a grid cost placeholder")?,
            grid: Some(grid.clone()),
            cloud: None,
        })
    }

    /// Passes along every axis: the first reads `input·in_scale`, the rest run in place on
    /// `out`; `weighted` marks the axis whose kernel is multiplied by its cost; with `lm`, the
    /// last pass writes the sinkstep output `ε·(lm − L')`.
    #[allow(clippy::too_many_arguments)]
    fn grid_passes<T: CudaReal>(
        &self,
        grid: &GridCost,
        batch: usize,
        input: u64,
        in_scale: T,
        out: u64,
        lm: Option<u64>,
        weighted: Option<usize>,
        eps: T,
    ) -> Result<()> {
        let func = self.func(&format!("grid_pass_{}", T::SUFFIX))?.clone();
        let shape = grid.shape();
        let total = batch * grid.len();
        for (a, &n) in shape.iter().enumerate() {
            let inner: usize = shape[a + 1..].iter().product();
            let lines = (total / n) as i64;
            let (inner_i, n_i) = (inner as i64, n as i32);
            let src = if a == 0 { input } else { out };
            let scale = if a == 0 { in_scale } else { T::one() };
            let last = a + 1 == shape.len();
            let final_step = i32::from(last && lm.is_some());
            let plm = lm.unwrap_or(0);
            let w = i32::from(weighted == Some(a));
            let blocks = (lines as usize).min(self.inner.sm_count * 16) as u32;
            let threads = (n.div_ceil(32) * 32).min(256) as u32;
            let mut b = self.inner.stream.launch_builder(&func);
            b.arg(&src)
                .arg(&out)
                .arg(&plm)
                .arg(&lines)
                .arg(&n_i)
                .arg(&inner_i)
                .arg(&eps)
                .arg(&scale)
                .arg(&w)
                .arg(&final_step);
            unsafe { b.launch(cfg1(blocks, threads, 0)) }
                .map_err(|e| cuda_err("launching grid_pass", e))?;
        }
        Ok(())
    }

    /// `out[b,x] = ε·lm[b,x] − ε·LSE_y((other[b,y] − C(x,y))/ε)` on a grid.
    pub(super) fn grid_sinkstep<T: CudaReal>(
        &self,
        grid: &GridCost,
        eps: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let n = grid.len();
        if other.len != out.len || log_marginal.len != out.len || out.len == 0 || out.len % n != 0 {
            return Err(Error::shape(
                "sinkstep",
                format!(
                    "buffers of lengths {}, {}, {} do not hold whole images of {n} grid points",
                    other.len, log_marginal.len, out.len
                ),
            ));
        }
        let batch = out.len / n;
        let (po, pl, pout) = (
            self.ptr(&other.data),
            self.ptr(&log_marginal.data),
            self.ptr(&out.data),
        );
        let inv = T::of(1.0 / eps.f64());
        self.grid_passes(grid, batch, po, inv, pout, Some(pl), None, eps)
    }

    /// `⟨P_b, C⟩` per problem, separably:
    /// `Σ_d Σ_x exp(f_x/ε + LSE_y(g_y/ε + log(k·c_d)(x,y)))` (as the CPU backend).
    pub(super) fn grid_transport_cost<T: CudaReal>(
        &self,
        grid: &GridCost,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        let n = grid.len();
        if f.len != g.len || f.len == 0 || f.len % n != 0 {
            return Err(Error::shape(
                "f, g",
                format!(
                    "lengths {} and {} do not hold whole grids of {n} points",
                    f.len, g.len
                ),
            ));
        }
        let batch = f.len / n;
        let gx = u32::try_from(batch)
            .map_err(|_| Error::shape("transport_cost", "too many problems for one launch"))?;
        let scratch = self.alloc::<T>(f.len, "grid scratch")?;
        let sums = self
            .inner
            .stream
            .alloc_zeros::<f64>(batch)
            .map_err(|e| cuda_err("allocating grid cost sums", e))?;
        let (pf, pg, pr, ps) = (
            self.ptr(&f.data),
            self.ptr(&g.data),
            self.ptr(&scratch),
            self.ptr(&sums),
        );
        let inv = T::of(1.0 / eps.f64());
        let per = to_i32(n, "grid points")?;
        let sum = self.func(&format!("grid_cost_sum_{}", T::SUFFIX))?.clone();
        for d in 0..grid.shape().len() {
            self.grid_passes(grid, batch, pg, inv, pr, None, Some(d), eps)?;
            let mut b = self.inner.stream.launch_builder(&sum);
            b.arg(&pf).arg(&pr).arg(&ps).arg(&per).arg(&eps);
            unsafe { b.launch(cfg1(gx, 256, 0)) }
                .map_err(|e| cuda_err("launching grid_cost_sum", e))?;
        }
        let host = self
            .inner
            .stream
            .clone_dtoh(&sums)
            .map_err(|e| cuda_err("reading grid transport costs", e))?;
        Ok(host.into_iter().take(batch).map(T::of).collect())
    }
}

/// Warps per CTA of `grid_bary_fused_*` (GRID_FUSED_WARPS in cuda/grid.cu).
const FUSED_WARPS: usize = 16;
/// Largest `P·K·N·Σ n_a` (work of one iteration) for which the fused kernel, which uses
/// one cluster of a few SMs per problem, beats the one-pass-per-launch path over all SMs.
const FUSED_MAX_WORK: usize = 1 << 24;

impl CudaBackend {
    /// Run `iters` barycenter iterations on a grid cost as one launch of
    /// `grid_bary_fused_*` (one thread-block cluster per problem). Returns `false`, having
    /// done nothing, where the fused kernel does not apply (disabled, more than 3 axes, the
    /// lines do not fit in shared memory, or the grid is large enough for the separate
    /// kernels to use the GPU better).
    pub(super) fn grid_bary_fused<T: CudaReal>(
        &self,
        grid: &GridCost,
        layout: BaryLayout,
        eps: T,
        st: &mut BaryBuffers<CudaBuffer<T>>,
        iters: usize,
    ) -> Result<bool> {
        let cl = self.inner.bary_cluster;
        let shape = grid.shape();
        let n = grid.len();
        let (p, k) = (layout.problems, layout.inputs);
        let sum_n: usize = shape.iter().sum();
        let nmax = shape.iter().copied().max().unwrap_or(0);
        // Every axis's coordinates (padded to an even count), then a (value, coordinate)
        // pair per point of a line for each warp (`grid_bary_fused` in cuda/grid.cu).
        let smem = (sum_n.div_ceil(2) * 2 + FUSED_WARPS * 2 * nmax) * std::mem::size_of::<T>();
        let work = p.saturating_mul(k).saturating_mul(n).saturating_mul(sum_n);
        if cl == 0
            || iters == 0
            || shape.is_empty()
            || shape.len() > 3
            || layout.m != n
            || smem > self.inner.max_smem
            || work > FUSED_MAX_WORK
        {
            return Ok(false);
        }
        for (arg, buf, len) in [
            ("log_a", &st.log_a, p * k * n),
            ("weights", &st.weights, p * k),
            ("g", &st.g, p * k * n),
            ("f", &st.f, p * k * n),
            ("v", &st.v, p * k * n),
            ("bar", &st.bar, p * n),
        ] {
            if buf.len != len {
                return Err(Error::shape(
                    arg,
                    format!(
                        "length {}, expected {len} for {p} problems of {k} grids of {n} points",
                        buf.len
                    ),
                ));
            }
        }
        let name = if T::SUFFIX == "f32" {
            "grid_bary_fused_f32"
        } else {
            "grid_bary_fused_f64"
        };
        let threads = (32 * FUSED_WARPS) as u32;
        let cl = self.cluster_size(name, threads, smem as u32, cl)?;
        if std::env::var_os("LOGOT_CUDA_VERBOSE").is_some() {
            eprintln!(
                "logot: grid_bary_fused: {p} problem(s) × {cl} CTAs, {} threads, {smem} B shared, {iters} iterations",
                32 * FUSED_WARPS
            );
        }
        let scratch = self.alloc::<T>(2 * p * k * n, "barycenter scratch")?;
        let gx = p
            .checked_mul(cl)
            .and_then(|b| u32::try_from(b).ok())
            .ok_or_else(|| Error::shape("histograms", "too many problems for one launch"))?;
        let dim = |a: usize| to_i32(shape.get(a).copied().unwrap_or(1), "grid axis");
        let (mut ki, mut nd, mut n0, mut n1, mut n2) = (
            to_i32(k, "inputs")?,
            shape.len() as i32,
            dim(0)?,
            dim(1)?,
            dim(2)?,
        );
        let mut it = to_i32(iters, "iterations")?;
        let mut e = eps;
        let (mut pa, mut pw, mut pg, mut pf, mut pv, mut pb, mut ps) = (
            self.ptr(&st.log_a.data),
            self.ptr(&st.weights.data),
            self.ptr(&st.g.data),
            self.ptr(&st.f.data),
            self.ptr(&st.v.data),
            self.ptr(&st.bar.data),
            self.ptr(&scratch),
        );
        let mut params: [*mut std::ffi::c_void; 14] = [
            &mut pa as *mut u64 as *mut _,
            &mut pw as *mut u64 as *mut _,
            &mut pg as *mut u64 as *mut _,
            &mut pf as *mut u64 as *mut _,
            &mut pv as *mut u64 as *mut _,
            &mut pb as *mut u64 as *mut _,
            &mut ps as *mut u64 as *mut _,
            &mut ki as *mut i32 as *mut _,
            &mut nd as *mut i32 as *mut _,
            &mut n0 as *mut i32 as *mut _,
            &mut n1 as *mut i32 as *mut _,
            &mut n2 as *mut i32 as *mut _,
            &mut e as *mut T as *mut _,
            &mut it as *mut i32 as *mut _,
        ];
        let func = self.func(name)?.clone();
        let cfg = LaunchConfig {
            grid_dim: (gx, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        // SAFETY: the parameters match the kernel's signature (GRID_FUSED in cuda/grid.cu)
        // and outlive the call; every buffer was checked against the layout above.
        unsafe {
            self.launch_ex(
                &func,
                "grid_bary_fused",
                cfg,
                LaunchAttr::Cluster(cl as u32),
                &mut params,
            )
        }?;
        // The scratch is freed in stream order after the kernel.
        drop(scratch);
        Ok(true)
    }
}
