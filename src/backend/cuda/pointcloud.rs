//! Point-cloud costs on the GPU (kernels in `cuda/pointcloud.cu`): the cost is formed in
//! registers from the two clouds, never stored, so GPU memory is `O((n + m)·d)`.
//!
//! * Half-step: a block of 256 threads owns 1024 outputs (f32, `d ≤ 4`; 512 in f64 and
//!   for `d ≤ 16`), streams the reduced cloud through shared memory in stages of 128
//!   points and folds chunks of 8 arguments into a running (max, sum); when the grid alone
//!   would leave SMs idle the reduction is split across blocks and merged by
//!   `sinkstep_finish` (cuda/sinkstep.cu).
//! * Plan-weighted row sums (transport cost, point gradients, `P·V`, and the point
//!   gradients reweighted by an adjoint in kernels of their own, `pc_adjoint`): one output
//!   per thread, the whole reduction per block.
//! * Dimensions up to 16 and up to 16 value channels in `plan_apply`; beyond,
//!   [`Error::Unavailable`] (use the CPU backend).

use super::cost::{CostKind, CudaCost};
use super::device::{CudaBackend, CudaBuffer};
use super::kernels::{define, kernel_name, CudaReal, Module, Precision};
use super::launch::{to_i32, Launch};
use super::tiled::TiledArgs;
use crate::backend::shape::{check_fg, check_sinkstep};
use crate::backend::{batch_of, CostDims, PointCloudCost, PointCloudKernels, PointMetric, Side};
use crate::{Error, Result};
use cudarc::driver::CudaSlice;

/// Threads per block of the point-cloud kernels.
const PC_BLOCK: usize = define(Module::PointCloud.source(), "PC_BLOCK");
/// Reduced points per shared-memory stage.
const PC_KT: usize = define(Module::PointCloud.source(), "PC_KT");
/// Largest dimension and number of `plan_apply` channels the kernels are compiled for.
const PC_DMAX: usize = define(Module::PointCloud.source(), "PC_DMAX");
/// Plans with more entries than this are not materialised.
const MAX_PLAN_ENTRIES: usize = 1 << 27;

/// Two clouds in GPU memory as structure-of-arrays (`x[t·n + i]`, `y[t·m + j]`).
pub(super) struct CudaCloud<T> {
    pub n: usize,
    pub m: usize,
    d: usize,
    /// The Euclidean distance (else its square).
    root: bool,
    x: CudaSlice<T>,
    y: CudaSlice<T>,
}

impl<T> CudaCloud<T> {
    fn dims(&self) -> CostDims {
        CostDims {
            n: self.n,
            m: self.m,
            batch: None,
        }
    }

    /// `(output cloud, its length, reduced cloud, its length)` of a half-step on `side`.
    fn sides(&self, side: Side) -> (&CudaSlice<T>, usize, &CudaSlice<T>, usize) {
        match side {
            Side::Col => (&self.y, self.m, &self.x, self.n),
            Side::Row => (&self.x, self.n, &self.y, self.m),
        }
    }
}

impl<T: CudaReal> CudaCloud<T> {
    /// The factor that turns coordinates into ones whose squared (or plain) distance is
    /// `c·log2(e)/ε`.
    fn scale(&self, eps: T) -> T {
        let s = std::f64::consts::LOG2_E / eps.f64();
        T::of(if self.root { s } else { s.sqrt() })
    }
}

fn soa<T: Copy>(p: ndarray::ArrayView2<'_, T>) -> Vec<T> {
    let mut v = Vec::with_capacity(p.len());
    for col in p.columns() {
        v.extend(col.iter().copied());
    }
    v
}

/// Kernel family for dimension `d`: (base name, compiled maximum dimension).
fn by_dim(prefix: &str, d: usize, exact3: bool) -> Result<(String, usize)> {
    Ok(match d {
        3 if exact3 => (format!("{prefix}_d3"), 3),
        1..=4 => (format!("{prefix}_d4"), 4),
        5..=PC_DMAX => (format!("{prefix}_d{PC_DMAX}"), PC_DMAX),
        _ => {
            return Err(Error::Unavailable(format!(
                "point clouds of dimension {d} on the CUDA backend: the kernels handle d ≤ {PC_DMAX} (use the CPU backend)"
            )))
        }
    })
}

/// What the plan-weighted row sums (`pc_rows`) accumulate besides the plan's marginal.
#[derive(Clone, Copy)]
enum RowSums<'a, T> {
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
    fn mode(&self) -> i32 {
        match self {
            RowSums::Cost => 0,
            RowSums::Gradient => 1,
            RowSums::Apply { .. } => 2,
            RowSums::Adjoint { .. } => 3,
        }
    }
}

impl CudaBackend {
    /// Upload two clouds (the cost itself is never formed).
    pub(super) fn upload_cloud<T: CudaReal>(
        &self,
        p: &PointCloudCost<'_, T>,
    ) -> Result<CudaCloud<T>> {
        let (n, m, d) = (p.n(), p.m(), p.dim());
        to_i32(n, "x")?;
        to_i32(m, "y")?;
        by_dim("pc_sinkstep", d, false)?;
        Ok(CudaCloud {
            n,
            m,
            d,
            root: p.metric() == PointMetric::Euclidean,
            x: self.upload_slice(&soa(p.x()), "the points x")?,
            y: self.upload_slice(&soa(p.y()), "the points y")?,
        })
    }

    /// One half-step on point clouds (see [`Backend::sinkstep`](crate::Backend::sinkstep)).
    pub(super) fn cloud_sinkstep<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        side: Side,
        eps: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let batch = check_sinkstep(&cl.dims(), side, other.len, log_marginal.len, out.len)?;
        let (out_pts, len_out, red_pts, len_red) = cl.sides(side);
        let (base, dmax) = by_dim("pc_sinkstep", cl.d, true)?;
        // Outputs per thread (TJ of the kernel's entry point).
        let tj = if dmax <= 4 && T::PRECISION == Precision::F32 {
            4
        } else {
            2
        };
        let gx = len_out.div_ceil(PC_BLOCK * tj);
        if batch > 65535 {
            return Err(Error::shape(
                "sinkstep",
                format!("{batch} problems exceed the launch grid (65535)"),
            ));
        }
        // Split the reduction when the grid alone would give the SMs fewer than 4 blocks each.
        let blocks = gx * batch;
        let target = 4 * self.inner.sm_count;
        let want = if blocks < target {
            target.div_ceil(blocks).min((len_red / (4 * PC_KT)).max(1))
        } else {
            1
        };
        let kslice = len_red.div_ceil(want).div_ceil(PC_KT) * PC_KT;
        let splits = len_red.div_ceil(kslice);
        let parts = if splits > 1 {
            Some(self.alloc::<T>(2 * splits * batch * len_out, "K-split partials")?)
        } else {
            None
        };
        let (pm, ps) = match &parts {
            Some(p) => {
                let half = splits * batch * len_out * std::mem::size_of::<T>();
                (self.ptr(p), self.ptr(p) + half as u64)
            }
            None => (0u64, 0u64),
        };
        let (plm, pout) = (self.ptr(&log_marginal.data), self.ptr(&out.data));
        let (bi, li) = (to_i32(batch, "batch")?, to_i32(len_out, "cost")?);
        let gx = u32::try_from(gx).map_err(|_| Error::shape("sinkstep", "too many outputs"))?;
        let cfg = Launch::new((gx, batch as u32, splits as u32), (PC_BLOCK as u32, 1, 1))
            .shared((dmax * PC_KT + PC_KT) * std::mem::size_of::<T>());
        // SAFETY: PC_STEP_ARGS in cuda/pointcloud.cu; the potentials were checked against
        // the clouds, the partials hold 2·splits·batch·len_out elements.
        unsafe {
            self.launch(
                &kernel_name::<T>(&base),
                cfg,
                (
                    self.ptr(out_pts),
                    self.ptr(red_pts),
                    self.ptr(&other.data),
                    plm,
                    pout,
                    pm,
                    ps,
                    bi,
                    to_i32(len_red, "cost")?,
                    li,
                    cl.d as i32,
                    eps,
                    cl.scale(eps),
                    to_i32(kslice, "cost")?,
                    cl.root as i32,
                ),
            )
        }?;
        if splits > 1 {
            let finish = TiledArgs {
                r: 0,
                stride: 0,
                other: self.ptr(&other.data),
                lm: plm,
                out: pout,
                batch,
                k: len_red,
                l: len_out,
                eps,
                phi: T::one(),
            };
            self.finish_split((pm, ps), splits, &finish)?;
        }
        // Fresh partials are freed in stream order after the kernels.
        drop(parts);
        Ok(())
    }

    /// Plan-weighted row sums on `side` (`pc_rows`): the plan's marginal (`B×len`) and the
    /// `sums` (`B×len×channels`). Returns them with the batch and `len`.
    fn cloud_rows<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
        sums: RowSums<'_, T>,
    ) -> Result<(CudaSlice<T>, CudaSlice<T>, usize, usize)> {
        let batch = check_fg(&cl.dims(), f.len, g.len)?;
        let (out_pts, len_out, red_pts, len_red) = cl.sides(side);
        let (own, other) = match side {
            Side::Row => (f, g),
            Side::Col => (g, f),
        };
        let prefix = match sums {
            RowSums::Adjoint { .. } => "pc_adjoint",
            _ => "pc_rows",
        };
        let (base, dmax) = by_dim(prefix, cl.d, false)?;
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
        if kv > PC_DMAX {
            return Err(Error::Unavailable(format!(
                "plan_apply with {kv} value channels on the CUDA backend: the kernels handle k ≤ {PC_DMAX}"
            )));
        }
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
                ),
            )
        }?;
        Ok((mass, res, batch, len_out))
    }

    /// `⟨P_b, C⟩` per problem: per-row sums on the GPU, then one block per problem.
    pub(super) fn cloud_transport_cost<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        let (_, shares, batch, len) = self.cloud_rows(cl, Side::Row, f, g, eps, RowSums::Cost)?;
        let sums = self.alloc_f64(batch, "transport costs")?;
        // SAFETY: pc_reduce(x, out, L): one block per problem over `len` shares.
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_reduce"),
                Launch::linear(batch as u32, 256),
                (self.ptr(&shares), self.ptr(&sums), to_i32(len, "x")?),
            )
        }?;
        let host = self.download_slice(&sums, batch, "transport costs")?;
        Ok(host.into_iter().map(T::of).collect())
    }

    /// Dense plans of point clouds, only when they are small.
    pub(super) fn cloud_plan<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<CudaBuffer<T>> {
        let (n, m) = (cl.n, cl.m);
        let batch = check_fg(&cl.dims(), f.len, g.len)?;
        let total = match n.checked_mul(m).and_then(|nm| nm.checked_mul(batch)) {
            Some(e) if e <= MAX_PLAN_ENTRIES => e,
            _ => {
                return Err(Error::Unavailable(format!(
                    "the plan between point clouds of {n} and {m} points has {batch}×{n}×{m} entries, more than the \
                     {MAX_PLAN_ENTRIES} this backend materialises; use the potentials (P = exp((f ⊕ g − C)/ε)) or the \
                     kernels that apply P on the fly"
                )))
            }
        };
        let plan = self.alloc::<T>(total, "the plans")?;
        let blocks = self.stride_blocks(total, 256, 32);
        // SAFETY: pc_plan(x, y, f, g, P, B, n, m, d, root, eps) writes B×n×m entries.
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
                ),
            )
        }?;
        Ok(CudaBuffer {
            data: plan,
            len: total,
        })
    }
}

fn cloud_of<'a, T>(cost: &'a CudaCost<T>, what: &str) -> Result<&'a CudaCloud<T>> {
    match &cost.kind {
        CostKind::Cloud(cl) => Ok(cl),
        _ => Err(Error::Unavailable(format!(
            "{what} needs a point-cloud cost (CostSource::PointCloud)"
        ))),
    }
}

impl<T: CudaReal> PointCloudKernels<T> for CudaBackend {
    fn point_gradient(
        &self,
        cost: &CudaCost<T>,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<(CudaBuffer<T>, CudaBuffer<T>)> {
        let cl = cloud_of(cost, "point_gradient")?;
        let (mass, grad, batch, len) = self.cloud_rows(cl, side, f, g, eps, RowSums::Gradient)?;
        Ok((
            CudaBuffer {
                data: mass,
                len: batch * len,
            },
            CudaBuffer {
                data: grad,
                len: batch * len * cl.d,
            },
        ))
    }

    fn plan_apply(
        &self,
        cost: &CudaCost<T>,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
        values: &CudaBuffer<T>,
        k: usize,
    ) -> Result<CudaBuffer<T>> {
        let cl = cloud_of(cost, "plan_apply")?;
        let batch = batch_of(f.len, cl.n, "f")?;
        let len_red = match side {
            Side::Row => cl.m,
            Side::Col => cl.n,
        };
        let per = len_red * k;
        let stride = if k > 0 && values.len == per {
            0
        } else if k > 0 && values.len == batch * per {
            per
        } else {
            return Err(Error::shape(
                "values",
                format!(
                    "length {} is neither {len_red}×{k} (shared) nor {batch}×{len_red}×{k}",
                    values.len
                ),
            ));
        };
        let sums = RowSums::Apply { values, k, stride };
        let (_, res, batch, len) = self.cloud_rows(cl, side, f, g, eps, sums)?;
        Ok(CudaBuffer {
            data: res,
            len: batch * len * k,
        })
    }

    fn cost_marginals(
        &self,
        cost: &CudaCost<T>,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<(CudaBuffer<T>, CudaBuffer<T>)> {
        let cl = cloud_of(cost, "cost_marginals")?;
        let (mass, sums, batch, len) = self.cloud_rows(cl, side, f, g, eps, RowSums::Cost)?;
        Ok((
            CudaBuffer {
                data: mass,
                len: batch * len,
            },
            CudaBuffer {
                data: sums,
                len: batch * len,
            },
        ))
    }

    fn adjoint_point_gradient(
        &self,
        cost: &CudaCost<T>,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
        a: &CudaBuffer<T>,
        b: &CudaBuffer<T>,
        alpha: T,
    ) -> Result<CudaBuffer<T>> {
        let cl = cloud_of(cost, "adjoint_point_gradient")?;
        let batch = check_fg(&cl.dims(), f.len, g.len)?;
        for (arg, v, len) in [("a", a, cl.n), ("b", b, cl.m)] {
            if v.len != batch * len {
                return Err(Error::shape(
                    arg,
                    format!("has length {} but {batch}×{len} is needed", v.len),
                ));
            }
        }
        let (own, red) = match side {
            Side::Row => (a, b),
            Side::Col => (b, a),
        };
        let sums = RowSums::Adjoint { own, red, alpha };
        let (_, grad, batch, len) = self.cloud_rows(cl, side, f, g, eps, sums)?;
        Ok(CudaBuffer {
            data: grad,
            len: batch * len * cl.d,
        })
    }
}
