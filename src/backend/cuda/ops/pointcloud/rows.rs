//! Plan-weighted row sums of point clouds (`pc_rows_*`, `pc_rows_dn_*`, `pc_adjoint_*`):
//! transport costs, point gradients, `P·V`, cost marginals, adjoint gradients and the
//! materialised plan.

use super::*;
use crate::backend::cuda::runtime::launch::Join;

/// What the plan-weighted row sums (`pc_rows`) accumulate besides the plan's marginal.
#[derive(Clone, Copy)]
pub(super) enum RowSums<'a, T> {
    /// `Σ P·c` (one channel).
    Cost,
    /// `Σ P·∇c` (`d` channels).
    Gradient,
    /// `P·V` for values `V` (`k` channels, `stride` elements between problems' values, 0
    /// when shared).
    Apply {
        values: &'a CudaBuffer<T>,
        k: usize,
        stride: usize,
    },
    /// `Σ P·(alpha + (a_own ⊕ a_red − c)/ε)·∇c` (`d` channels): the adjoints of the output
    /// side (`B×len_out`) and of the reduced side (`B×len_red`), in the `pc_adjoint` kernels.
    Adjoint {
        own: &'a CudaBuffer<T>,
        red: &'a CudaBuffer<T>,
        alpha: T,
    },
}

impl<T> RowSums<'_, T> {
    /// The kernel's `mode`.
    pub(super) fn mode(&self) -> i32 {
        match self {
            RowSums::Cost => 0,
            RowSums::Gradient => 1,
            RowSums::Apply { .. } => 2,
            RowSums::Adjoint { .. } => 3,
        }
    }
}

impl CudaBackend {
    /// Plan-weighted row sums on `side` (`pc_rows`): the plan's marginal (`B×len`) and the
    /// `sums` (`B×len×channels`: 1 for the cost, `d` for gradients, `k` for `k` values).
    pub(super) fn cloud_rows<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
        sums: RowSums<'_, T>,
    ) -> Result<(CudaBuffer<T>, CudaBuffer<T>)> {
        let batch = check_fg(&cl.dims(), f.len, g.len)?;
        let (out_pts, len_out, red_pts, len_red) = cl.sides(side);
        let (own, other) = match side {
            Side::Row => (f, g),
            Side::Col => (g, f),
        };
        let (values, kv, vstride) = match sums {
            RowSums::Apply { values, k, stride } => (Some(values), k, stride),
            // The reduced adjoint: one value per reduced point and problem.
            RowSums::Adjoint { red, .. } => (Some(red), 1, len_red),
            _ => (None, 0, 0),
        };
        let (own_adj, alpha) = match sums {
            RowSums::Adjoint { own, alpha, .. } => (Some(own), alpha),
            _ => (None, T::zero()),
        };
        let channels = match sums {
            RowSums::Cost => 1,
            RowSums::Gradient | RowSums::Adjoint { .. } => cl.d,
            RowSums::Apply { .. } => kv,
        };
        if batch > 65535 {
            return Err(Error::shape(
                "f",
                format!("{batch} problems exceed the launch grid (65535)"),
            ));
        }
        let adjoint = matches!(sums, RowSums::Adjoint { .. });
        let prefix = if adjoint { "pc_adjoint" } else { "pc_rows" };
        // Above PC_DMAX dimensions or value channels: the any-d kernels.
        let Some((base, dmax)) = by_dim(prefix, cl.d, false).filter(|_| kv <= PC_DMAX) else {
            if adjoint {
                return Err(Error::Unavailable(format!(
                    "exact transport-cost point gradients of clouds of dimension {} on the CUDA \
                     backend: the adjoint kernels handle d ≤ {PC_DMAX} (use the CPU backend)",
                    cl.d
                )));
            }
            return self.cloud_rows_dn(cl, side, (own, other), eps, sums, batch, channels);
        };
        let mass = self.alloc::<T>(batch * len_out, "plan marginals")?;
        let res = self.alloc::<T>(batch * len_out * channels, "plan-weighted sums")?;
        let value_tile = if values.is_some() { PC_KT * kv } else { 0 };
        let smem = (dmax * PC_KT + PC_KT + value_tile) * std::mem::size_of::<T>();
        let pown = self.ptr(&own.data);
        // Without values (or an own adjoint) the kernel reads none; any valid address will do.
        let pvals = values.map_or(pown, |v| self.ptr(&v.data));
        let pown_adj = own_adj.map_or(pown, |v| self.ptr(&v.data));
        let gx = u32::try_from(len_out.div_ceil(PC_BLOCK))
            .map_err(|_| Error::shape("f", "too many points"))?;
        let cfg = Launch::new((gx, batch as u32, 1), (PC_BLOCK as u32, 1, 1)).shared(smem);
        // SAFETY: PC_ROWS_ARGS in cuda/pointcloud.cu (pc_rows and pc_adjoint); the potentials
        // were checked against the clouds, the outputs hold batch·len_out (·channels)
        // elements, the values (by the caller, or above for the adjoints) len_red·kv per
        // problem, the own adjoint batch·len_out.
        unsafe {
            self.launch(
                &kernel_name::<T>(&base),
                cfg,
                (
                    self.ptr(out_pts),
                    self.ptr(red_pts),
                    pown,
                    self.ptr(&other.data),
                    pvals,
                    vstride as i64,
                    self.ptr(&mass),
                    self.ptr(&res),
                    to_i32(len_red, "cost")?,
                    to_i32(len_out, "cost")?,
                    cl.d as i32,
                    kv as i32,
                    eps,
                    cl.scale(eps),
                    cl.root as i32,
                    sums.mode(),
                    pown_adj,
                    alpha,
                    cl.pair(),
                ),
            )
        }?;
        Ok(row_buffers((mass, res), batch * len_out, channels))
    }

    /// [`Self::cloud_rows`] by the any-d kernels, in two passes: `h = −ε·LSE_k((other_k −
    /// c_lk)/ε)` by a half-step with zero log-marginals (split across blocks when that
    /// pays), then `pc_rows_dn` with the weights `exp((other_k − c_lk + h_l)/ε)` that sum
    /// to one over each row, one block per 64 outputs and `PC_DN_CC` channels (the cost is
    /// recomputed for each tile of channels).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cloud_rows_dn<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        side: Side,
        (own, other): (&CudaBuffer<T>, &CudaBuffer<T>),
        eps: T,
        sums: RowSums<'_, T>,
        batch: usize,
        channels: usize,
    ) -> Result<(CudaBuffer<T>, CudaBuffer<T>)> {
        let (out_pts, len_out, red_pts, len_red) = cl.sides(side);
        let rows = batch * len_out;
        let mut zeros = self.alloc::<T>(rows, "zero log-marginals")?;
        self.fill_slice(&mut zeros, rows, T::zero())?;
        let zeros = CudaBuffer::new(zeros, rows);
        let mut h = CudaBuffer::new(self.alloc::<T>(rows, "row normalisers")?, rows);
        // Exact products, as the weights below: then they sum to one over each row whatever
        // precision the solver's half-steps used.
        self.cloud_sinkstep_by(cl, side, eps, other, &zeros, &mut h, None)?;
        let (values, kv, vstride) = match sums {
            RowSums::Apply { values, k, stride } => (Some(values), k, stride),
            _ => (None, 0, 0),
        };
        let chunks = match sums {
            RowSums::Cost => 1,
            _ => channels.div_ceil(PC_DN_CC),
        };
        if chunks > 65535 {
            return Err(Error::shape(
                "values",
                format!("{channels} channels exceed the launch grid"),
            ));
        }
        let mass = self.alloc::<T>(rows, "plan marginals")?;
        let res = self.alloc::<T>(rows * channels, "plan-weighted sums")?;
        let stage = (PC_DN_DC * (PC_DN_TL + PC_DN_RTK)).max(PC_DN_RTK * (PC_DN_CC + 1));
        let smem = (stage + PC_DN_TL * (PC_DN_RTK + 1) + 2 * PC_DN_RTK) * std::mem::size_of::<T>();
        let pown = self.ptr(&own.data);
        // Without values the kernel reads none; any valid address will do.
        let pvals = values.map_or(pown, |v| self.ptr(&v.data));
        // Clouds of d ≤ PC_DMAX (many channels) have no norms: the exact difference form.
        let (pon, prn, diff) = match cl.side_norms(side) {
            Some((on, rn)) => (self.ptr(on), self.ptr(rn), 0i32),
            None => (self.ptr(out_pts), self.ptr(red_pts), 1i32),
        };
        let gx = u32::try_from(len_out.div_ceil(PC_DN_TL))
            .map_err(|_| Error::shape("f", "too many points"))?;
        let cfg =
            Launch::new((gx, batch as u32, chunks as u32), (PC_BLOCK as u32, 1, 1)).shared(smem);
        // SAFETY: pc_rows_dn in cuda/pointcloud.cu; the potentials and h hold batch·len
        // elements of their sides, the outputs batch·len_out (·channels), the values (by the
        // caller) len_red·kv per problem; the norms (unread when diff = 1) len_out, len_red.
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_rows_dn"),
                cfg,
                Join(
                    (
                        self.ptr(out_pts),
                        self.ptr(red_pts),
                        pon,
                        prn,
                        pown,
                        self.ptr(&other.data),
                        self.ptr(&h.data),
                        pvals,
                        vstride as i64,
                        self.ptr(&mass),
                        self.ptr(&res),
                    ),
                    (
                        to_i32(len_red, "cost")?,
                        to_i32(len_out, "cost")?,
                        cl.d as i32,
                        kv as i32,
                        eps,
                        cl.root as i32,
                        sums.mode(),
                        diff,
                        cl.pair(),
                    ),
                ),
            )
        }?;
        // The scratch buffers are freed in stream order after the kernels.
        drop((zeros, h));
        Ok(row_buffers((mass, res), rows, channels))
    }

    /// `⟨P_b, C⟩` per problem: per-row sums on the GPU, then one block per problem.
    pub(in crate::backend::cuda) fn cloud_transport_cost<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        let (_, shares) = self.cloud_rows(cl, Side::Row, f, g, eps, RowSums::Cost)?;
        let len = cl.n;
        let batch = shares.len / len;
        let sums = self.alloc_f64(batch, "transport costs")?;
        // SAFETY: pc_reduce(x, out, L): one block per problem over `len` shares.
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_reduce"),
                Launch::linear(batch as u32, 256),
                (self.ptr(&shares.data), self.ptr(&sums), to_i32(len, "x")?),
            )
        }?;
        let host = self.download_slice(&sums, batch, "transport costs")?;
        Ok(host.into_iter().map(T::of).collect())
    }

    /// Dense plans of point clouds, only when they are small.
    pub(in crate::backend::cuda) fn cloud_plan<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<CudaBuffer<T>> {
        let (n, m) = (cl.n, cl.m);
        let batch = check_fg(&cl.dims(), f.len, g.len)?;
        // The kernel's own refusal, for a caller of `Backend::plan`; the solver's paths
        // refuse the same plans before they solve (`PreparedProblem::check_plan`).
        let total = crate::cost::check_plan_entries(batch, n, m)?;
        let plan = self.alloc::<T>(total, "the plans")?;
        let blocks = self.stride_blocks(total, 256, 32);
        // SAFETY: pc_plan(x, y, f, g, P, B, n, m, d, root, eps, pair) writes B×n×m entries
        // and reads the pair of each problem (batched: B pairs, checked by check_fg).
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_plan"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(&cl.x),
                    self.ptr(&cl.y),
                    self.ptr(&f.data),
                    self.ptr(&g.data),
                    self.ptr(&plan),
                    to_i32(batch, "batch")?,
                    n as i32,
                    m as i32,
                    cl.d as i32,
                    cl.root as i32,
                    eps,
                    cl.pair(),
                ),
            )
        }?;
        Ok(CudaBuffer::new(plan, total))
    }
}

/// The plan's marginal over `rows` outputs and its sums of `channels` per output as buffers.
fn row_buffers<T>(
    (mass, sums): (CudaSlice<T>, CudaSlice<T>),
    rows: usize,
    channels: usize,
) -> (CudaBuffer<T>, CudaBuffer<T>) {
    (
        CudaBuffer::new(mass, rows),
        CudaBuffer::new(sums, rows * channels),
    )
}
