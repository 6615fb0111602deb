//! Grid costs ([`CostSource::Grid`](crate::backend::CostSource::Grid)) on the GPU: one
//! batched 1-D log-sum-exp pass per axis (`grid_pass_*` in cuda/grid.cu), mirroring
//! [`crate::backend::cpu`]'s separable convolutions; the `n×n` cost is never formed. Small
//! grids run whole barycenter iterations in one launch (`grid_bary_fused_*`).

use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::{define, kernel_name, CudaReal, Module};
use crate::backend::cuda::runtime::launch::{to_i32, Context, Launch, Start};
use crate::backend::shape::{check_grid_fg, check_grid_sinkstep};
use crate::backend::{BaryBuffers, BaryLayout, GridCost};
use crate::{Error, Result};

/// Longest grid axis the pass kernel stages in shared memory.
pub(crate) const GRID_MAX_N: usize = define(Module::Grid.text(), "GRID_MAX_N");
/// Warps per CTA of `grid_bary_fused_*`.
const FUSED_WARPS: usize = define(Module::Grid.text(), "GRID_FUSED_WARPS");
/// Largest `P·K·N·Σ n_a` (work of one iteration) for which the fused kernel, which uses
/// one cluster of a few SMs per problem, beats the one-pass-per-launch path over all SMs.
const FUSED_MAX_WORK: usize = 1 << 24;

/// A grid the kernels handle: axes of at most [`GRID_MAX_N`] points, `int`-sized.
pub(in crate::backend::cuda) fn check_grid(grid: &GridCost) -> Result<()> {
    if let Some(&big) = grid.shape().iter().find(|&&n| n > GRID_MAX_N) {
        return Err(Error::Unavailable(format!(
            "cost: the CUDA backend handles grid axes of at most {GRID_MAX_N} points, the grid {:?} has an axis of {big} (use the CPU backend)",
            grid.shape()
        )));
    }
    to_i32(grid.len(), "grid points")?;
    Ok(())
}

/// One pass chain over a batch of grid images (see [`CudaBackend::grid_passes`]).
struct Passes<T> {
    /// Images in the batch.
    batch: usize,
    /// The first pass reads `input·in_scale`; the rest run in place on `out`.
    input: u64,
    in_scale: T,
    out: u64,
    /// With a log-marginal, the last pass writes the half-step output `ε·(lm − L')`.
    lm: Option<u64>,
    /// The axis whose kernel is multiplied by its cost (for `⟨P, C⟩`).
    weighted: Option<usize>,
    eps: T,
}

impl CudaBackend {
    /// A 1-D log-sum-exp pass along every axis of `grid` (one block per line).
    fn grid_passes<T: CudaReal>(&self, grid: &GridCost, p: Passes<T>) -> Result<()> {
        let name = kernel_name::<T>("grid_pass");
        let shape = grid.shape();
        let total = p.batch * grid.len();
        for (axis, &n) in shape.iter().enumerate() {
            let inner: usize = shape[axis + 1..].iter().product();
            let lines = total / n;
            let first = axis == 0;
            let last = axis + 1 == shape.len();
            let cfg = Launch::linear(
                self.stride_blocks(lines, 1, 16),
                (n.div_ceil(32) * 32).min(256) as u32,
            );
            // SAFETY: grid_pass(in, out, lm, lines, n, inner, eps, in_scale, weighted,
            // final_step) over `lines` lines of `n` points of the batch's images.
            unsafe {
                self.launch(
                    &name,
                    cfg,
                    (
                        if first { p.input } else { p.out },
                        p.out,
                        p.lm.unwrap_or(0),
                        lines as i64,
                        n as i32,
                        inner as i64,
                        p.eps,
                        if first { p.in_scale } else { T::one() },
                        i32::from(p.weighted == Some(axis)),
                        i32::from(last && p.lm.is_some()),
                    ),
                )
            }?;
        }
        Ok(())
    }

    /// `out[b,x] = ε·lm[b,x] − ε·LSE_y((other[b,y] − C(x,y))/ε)` on a grid.
    pub(in crate::backend::cuda) fn grid_sinkstep<T: CudaReal>(
        &self,
        grid: &GridCost,
        eps: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let batch = check_grid_sinkstep(grid.len(), other.len, log_marginal.len, out.len)?;
        let passes = Passes {
            batch,
            input: self.ptr(&other.data),
            in_scale: T::of(1.0 / eps.f64()),
            out: self.ptr(&out.data),
            lm: Some(self.ptr(&log_marginal.data)),
            weighted: None,
            eps,
        };
        self.grid_passes(grid, passes)
    }

    /// `⟨P_b, C⟩` per problem, separably:
    /// `Σ_d Σ_x exp(f_x/ε + LSE_y(g_y/ε + log(k·c_d)(x,y)))` (as the CPU backend).
    pub(in crate::backend::cuda) fn grid_transport_cost<T: CudaReal>(
        &self,
        grid: &GridCost,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        let n = grid.len();
        let batch = check_grid_fg(n, f.len, g.len)?;
        let blocks = u32::try_from(batch)
            .map_err(|_| Error::shape("transport_cost", "too many problems for one launch"))?;
        let scratch = self.alloc::<T>(f.len, "grid scratch")?;
        let sums = self
            .stream
            .alloc_zeros::<f64>(batch)
            .context("allocating grid cost sums")?;
        let (pf, pr, ps) = (self.ptr(&f.data), self.ptr(&scratch), self.ptr(&sums));
        let per = to_i32(n, "grid points")?;
        let sum = kernel_name::<T>("grid_cost_sum");
        for axis in 0..grid.shape().len() {
            let passes = Passes {
                batch,
                input: self.ptr(&g.data),
                in_scale: T::of(1.0 / eps.f64()),
                out: pr,
                lm: None,
                weighted: Some(axis),
                eps,
            };
            self.grid_passes(grid, passes)?;
            // SAFETY: grid_cost_sum(f, r, sums, per, eps): one block per image, adding to
            // its (zeroed) sum.
            unsafe { self.launch(&sum, Launch::linear(blocks, 256), (pf, pr, ps, per, eps)) }?;
        }
        let host = self.download_slice(&sums, batch, "grid transport costs")?;
        Ok(host.into_iter().map(T::of).collect())
    }

    /// Run `iters` barycenter iterations on a grid cost as one launch of
    /// `grid_bary_fused_*` (one thread-block cluster per problem). Returns `false`, having
    /// done nothing, where the fused kernel does not apply (disabled, more than 3 axes, the
    /// lines do not fit in shared memory, or the grid is large enough for the separate
    /// kernels to use the GPU better).
    pub(in crate::backend::cuda) fn grid_bary_fused<T: CudaReal>(
        &self,
        grid: &GridCost,
        layout: BaryLayout,
        eps: T,
        st: &mut BaryBuffers<CudaBuffer<T>>,
        iters: usize,
    ) -> Result<bool> {
        let shape = grid.shape();
        let n = grid.len();
        let (p, k) = (layout.problems, layout.inputs);
        let sum_n: usize = shape.iter().sum();
        let nmax = shape.iter().copied().max().unwrap_or(0);
        // Every axis's coordinates (padded to an even count), then a (value, coordinate)
        // pair per point of a line for each warp (`grid_bary_fused` in cuda/grid.cu).
        let smem = (sum_n.div_ceil(2) * 2 + FUSED_WARPS * 2 * nmax) * std::mem::size_of::<T>();
        let work = p.saturating_mul(k).saturating_mul(n).saturating_mul(sum_n);
        let want = self.tuning().bary_cluster;
        if want == 0
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
        let name = kernel_name::<T>("grid_bary_fused");
        let threads = (32 * FUSED_WARPS) as u32;
        let cl = self.cluster_size(&name, threads, smem as u32, want)?;
        let scratch = self.alloc::<T>(2 * p * k * n, "barycenter scratch")?;
        let gx = p
            .checked_mul(cl)
            .and_then(|b| u32::try_from(b).ok())
            .ok_or_else(|| Error::shape("histograms", "too many problems for one launch"))?;
        let dim = |a: usize| to_i32(shape.get(a).copied().unwrap_or(1), "grid axis");
        let cfg = Launch::new((gx, 1, 1), (threads, 1, 1))
            .shared(smem)
            .start(Start::Cluster(cl as u32));
        // SAFETY: GRID_FUSED in cuda/grid.cu (log_a, w, g, f, v, bar, scratch, K, ndim,
        // n0, n1, n2, eps, iters); every buffer was checked against the layout above.
        unsafe {
            self.launch(
                &name,
                cfg,
                (
                    self.ptr(&st.log_a.data),
                    self.ptr(&st.weights.data),
                    self.ptr(&st.g.data),
                    self.ptr(&st.f.data),
                    self.ptr(&st.v.data),
                    self.ptr(&st.bar.data),
                    self.ptr(&scratch),
                    to_i32(k, "inputs")?,
                    shape.len() as i32,
                    dim(0)?,
                    dim(1)?,
                    dim(2)?,
                    eps,
                    to_i32(iters, "iterations")?,
                ),
            )
        }?;
        // The scratch is freed in stream order after the kernel.
        drop(scratch);
        Ok(true)
    }
}
