//! Point-cloud costs on the GPU (kernels in `cuda/pointcloud.cu`): the cost is formed in
//! registers from the two clouds, never stored, so GPU memory is `O((n + m)·d)`.
//!
//! * Half-step: a block of 256 threads owns 1024 outputs (f32, `d ≤ 4`; 512 in f64 and
//!   for `d ≤ 16`), streams the reduced cloud through shared memory in stages of 128
//!   points and folds chunks of 8 arguments into a running (max, sum); when the grid alone
//!   would leave SMs idle the reduction is split across blocks and merged by
//!   `sinkstep_finish` (cuda/sinkstep.cu).
//! * Plan-weighted row sums (transport cost, point gradients, `P·V`): one output per
//!   thread, the whole reduction per block.
//! * Dimensions up to 16 and up to 16 value channels in `plan_apply`; beyond,
//!   [`Error::Unavailable`] (use the CPU backend).

use super::{cfg1, cuda_err, to_i32, CudaBackend, CudaBuffer, CudaCost, CudaReal};
use crate::backend::{
    batch_of, Backend, CostDims, PointCloudCost, PointCloudKernels, PointMetric, Side,
};
use crate::{Error, Result};
use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

/// Threads per block of the point-cloud kernels (`PC_BLOCK`).
const PC_BLOCK: usize = 256;
/// Reduced points per shared-memory stage (`PC_KT`).
const PC_KT: usize = 128;
/// Largest dimension and number of `plan_apply` channels the kernels are compiled for.
const PC_DMAX: usize = 16;
/// Plans with more entries than this are not materialised.
const MAX_PLAN_ENTRIES: usize = 1 << 27;

/// Two clouds in GPU memory as structure-of-arrays (`x[t·n + i]`, `y[t·m + j]`).
pub(super) struct CudaCloud<T> {
    n: usize,
    m: usize,
    d: usize,
    root: bool,
    x: CudaSlice<T>,
    y: CudaSlice<T>,
}

fn soa<T: Copy>(p: ndarray::ArrayView2<'_, T>) -> Vec<T> {
    let mut v = Vec::with_capacity(p.len());
    for col in p.columns() {
        v.extend(col.iter().copied());
    }
    v
}

/// Kernel family for dimension `d`: (name prefix, compiled maximum dimension).
fn by_dim(prefix: &str, d: usize, exact3: bool) -> Result<(String, usize)> {
    Ok(match d {
        3 if exact3 => (format!("{prefix}_d3"), 3),
        1..=4 => (format!("{prefix}_d4"), 4),
        5..=PC_DMAX => (format!("{prefix}_d16"), PC_DMAX),
        _ => {
            return Err(Error::Unavailable(format!(
                "point clouds of dimension {d} on the CUDA backend: the kernels handle d ≤ {PC_DMAX} (use the CPU backend)"
            )))
        }
    })
}

impl CudaBackend {
    /// Upload two clouds (the cost itself is never formed).
    pub(super) fn prepare_cloud<T: CudaReal>(
        &self,
        p: &PointCloudCost<'_, T>,
    ) -> Result<CudaCost<T>> {
        let (n, m, d) = (p.n(), p.m(), p.dim());
        to_i32(n, "x")?;
        to_i32(m, "y")?;
        by_dim("pc_sinkstep", d, false)?;
        let upload = |v: Vec<T>, what: &str| -> Result<CudaSlice<T>> {
            let mut s = self.alloc::<T>(v.len(), what)?;
            self.inner
                .stream
                .memcpy_htod(&v, &mut s)
                .map_err(|e| cuda_err(&format!("copying {what}"), e))?;
            Ok(s)
        };
        let cloud = CudaCloud {
            n,
            m,
            d,
            root: p.metric() == PointMetric::Euclidean,
            x: upload(soa(p.x()), "the points x")?,
            y: upload(soa(p.y()), "the points y")?,
        };
        Ok(CudaCost {
            split_parts: Default::default(),
            dims: CostDims { n, m, batch: None },
            c: self.alloc::<T>(0, "a placeholder")?,
            ct: self.alloc::<T>(0, "a placeholder")?,
            cloud: Some(cloud),
            grid: None,
        })
    }

    /// The factor that turns coordinates into ones whose squared (or plain) distance is
    /// `c·log2(e)/ε`.
    fn cloud_scale<T: CudaReal>(cl: &CudaCloud<T>, eps: T) -> T {
        let s = std::f64::consts::LOG2_E / eps.f64();
        T::of(if cl.root { s } else { s.sqrt() })
    }

    /// `(output cloud, its length, reduced cloud, its length)` of a half-step on `side`.
    fn cloud_sides<T>(
        cl: &CudaCloud<T>,
        side: Side,
    ) -> (&CudaSlice<T>, usize, &CudaSlice<T>, usize) {
        match side {
            Side::Col => (&cl.y, cl.m, &cl.x, cl.n),
            Side::Row => (&cl.x, cl.n, &cl.y, cl.m),
        }
    }

    /// One half-step on point clouds (see [`Backend::sinkstep`]).
    pub(super) fn cloud_sinkstep<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        side: Side,
        eps: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let (out_pts, len_out, red_pts, len_red) = Self::cloud_sides(cl, side);
        let batch = batch_of(out.len, len_out, "sinkstep output")?;
        if other.len != batch * len_red || log_marginal.len != out.len {
            return Err(Error::shape(
                "sinkstep",
                format!(
                    "potential of length {} and marginal of length {} do not fit {batch} problems of {}×{} points",
                    other.len, log_marginal.len, cl.n, cl.m
                ),
            ));
        }
        let (prefix, dmax) = by_dim("pc_sinkstep", cl.d, true)?;
        // Outputs per thread (TJ of the kernel's entry point).
        let tj = if dmax <= 4 && T::SUFFIX == "f32" {
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
        let max_split = (len_red / (4 * PC_KT)).max(1);
        let want = if blocks < target {
            target.div_ceil(blocks).min(max_split)
        } else {
            1
        };
        let kslice = len_red.div_ceil(want).div_ceil(PC_KT) * PC_KT;
        let splits = len_red.div_ceil(kslice);
        let smem = (dmax * PC_KT + PC_KT) * std::mem::size_of::<T>();
        let parts = if splits > 1 {
            Some(self.alloc::<T>(2 * splits * batch * len_out, "K-split partials")?)
        } else {
            None
        };
        let (pm, ps) = match &parts {
            Some(p) => {
                let base = self.ptr(p);
                (
                    base,
                    base + (splits * batch * len_out * std::mem::size_of::<T>()) as u64,
                )
            }
            None => (0u64, 0u64),
        };
        let f = self.func(&format!("{prefix}_{}", T::SUFFIX))?.clone();
        let (po, pr, pot, plm, pout) = (
            self.ptr(out_pts),
            self.ptr(red_pts),
            self.ptr(&other.data),
            self.ptr(&log_marginal.data),
            self.ptr(&out.data),
        );
        let (bi, ki, li, di) = (
            to_i32(batch, "batch")?,
            to_i32(len_red, "cost")?,
            to_i32(len_out, "cost")?,
            cl.d as i32,
        );
        let (scale, ks, root) = (
            Self::cloud_scale(cl, eps),
            to_i32(kslice, "cost")?,
            cl.root as i32,
        );
        let cfg = LaunchConfig {
            grid_dim: (
                u32::try_from(gx).map_err(|_| Error::shape("sinkstep", "too many outputs"))?,
                batch as u32,
                splits as u32,
            ),
            block_dim: (PC_BLOCK as u32, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&po)
            .arg(&pr)
            .arg(&pot)
            .arg(&plm)
            .arg(&pout)
            .arg(&pm)
            .arg(&ps);
        b.arg(&bi)
            .arg(&ki)
            .arg(&li)
            .arg(&di)
            .arg(&eps)
            .arg(&scale)
            .arg(&ks)
            .arg(&root);
        unsafe { b.launch(cfg) }.map_err(|e| cuda_err(&format!("launching {prefix}"), e))?;
        if splits > 1 {
            let f = self
                .func(&format!("sinkstep_finish_{}", T::SUFFIX))?
                .clone();
            let total = batch * len_out;
            let blocks = total.div_ceil(256).min(self.inner.sm_count * 16) as u32;
            let sp = splits as i32;
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&pm)
                .arg(&ps)
                .arg(&plm)
                .arg(&pout)
                .arg(&bi)
                .arg(&li)
                .arg(&sp)
                .arg(&eps);
            unsafe { b.launch(cfg1(blocks, 256, 0)) }
                .map_err(|e| cuda_err("launching sinkstep_finish", e))?;
        }
        drop(parts);
        Ok(())
    }

    /// Plan-weighted row sums on `side` (`pc_rows`): the plan's marginal (`B×len`) and, by
    /// `mode`, `Σ P·c` (0, `B×len`), `Σ P ∇c` (1, `B×len×d`) or `P·V` (2, `B×len×kv`, values
    /// `vals` with per-problem stride `vstride` or 0).
    #[allow(clippy::too_many_arguments)]
    fn cloud_rows<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
        mode: i32,
        vals: Option<(&CudaBuffer<T>, usize, usize)>,
    ) -> Result<(CudaSlice<T>, CudaSlice<T>, usize, usize)> {
        let batch = batch_of(f.len, cl.n, "f")?;
        if g.len != batch * cl.m {
            return Err(Error::shape(
                "g",
                format!(
                    "length {} does not fit {batch} problems of {} target points",
                    g.len, cl.m
                ),
            ));
        }
        let (out_pts, len_out, red_pts, len_red) = Self::cloud_sides(cl, side);
        let (own, other) = match side {
            Side::Row => (f, g),
            Side::Col => (g, f),
        };
        let (prefix, dmax) = by_dim("pc_rows", cl.d, false)?;
        let (kv, vstride) = match vals {
            Some((_, k, stride)) => (k, stride),
            None => (0, 0),
        };
        if kv > PC_DMAX {
            return Err(Error::Unavailable(format!(
                "plan_apply with {kv} value channels on the CUDA backend: the kernels handle k ≤ {PC_DMAX}"
            )));
        }
        let channels = match mode {
            0 => 1,
            1 => cl.d,
            _ => kv,
        };
        if batch > 65535 {
            return Err(Error::shape(
                "f",
                format!("{batch} problems exceed the launch grid (65535)"),
            ));
        }
        let mass = self.alloc::<T>(batch * len_out, "plan marginals")?;
        let res = self.alloc::<T>(batch * len_out * channels, "plan-weighted sums")?;
        let smem = (dmax * PC_KT + PC_KT + if mode == 2 { PC_KT * kv } else { 0 })
            * std::mem::size_of::<T>();
        let func = self.func(&format!("{prefix}_{}", T::SUFFIX))?.clone();
        let (po, pr, pown, poth, pmass, pres) = (
            self.ptr(out_pts),
            self.ptr(red_pts),
            self.ptr(&own.data),
            self.ptr(&other.data),
            self.ptr(&mass),
            self.ptr(&res),
        );
        let pvals = match vals {
            Some((v, _, _)) => self.ptr(&v.data),
            None => pown, // not read
        };
        let vstride = vstride as i64;
        let (ki, li, di, kvi) = (
            to_i32(len_red, "cost")?,
            to_i32(len_out, "cost")?,
            cl.d as i32,
            kv as i32,
        );
        let (scale, root) = (Self::cloud_scale(cl, eps), cl.root as i32);
        let cfg = LaunchConfig {
            grid_dim: (
                u32::try_from(len_out.div_ceil(PC_BLOCK))
                    .map_err(|_| Error::shape("f", "too many points"))?,
                batch as u32,
                1,
            ),
            block_dim: (PC_BLOCK as u32, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&po)
            .arg(&pr)
            .arg(&pown)
            .arg(&poth)
            .arg(&pvals)
            .arg(&vstride)
            .arg(&pmass)
            .arg(&pres);
        b.arg(&ki)
            .arg(&li)
            .arg(&di)
            .arg(&kvi)
            .arg(&eps)
            .arg(&scale)
            .arg(&root)
            .arg(&mode);
        unsafe { b.launch(cfg) }.map_err(|e| cuda_err(&format!("launching {prefix}"), e))?;
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
        let (_, shares, batch, len) = self.cloud_rows(cl, Side::Row, f, g, eps, 0, None)?;
        let sums = unsafe { self.inner.stream.alloc::<f64>(batch) }
            .map_err(|e| cuda_err("allocating transport costs", e))?;
        let func = self.func(&format!("pc_reduce_{}", T::SUFFIX))?.clone();
        let (px, pout, li) = (self.ptr(&shares), self.ptr(&sums), to_i32(len, "x")?);
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&px).arg(&pout).arg(&li);
        unsafe { b.launch(cfg1(batch as u32, 256, 0)) }
            .map_err(|e| cuda_err("launching pc_reduce", e))?;
        let host = self
            .inner
            .stream
            .clone_dtoh(&sums)
            .map_err(|e| cuda_err("reading transport costs", e))?;
        Ok(host.into_iter().take(batch).map(T::of).collect())
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
        let batch = batch_of(f.len, n, "f")?;
        if g.len != batch * m {
            return Err(Error::shape(
                "g",
                format!(
                    "length {} does not fit {batch} problems of {m} target points",
                    g.len
                ),
            ));
        }
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
        let p = self.alloc::<T>(total, "the plans")?;
        let func = self.func(&format!("pc_plan_{}", T::SUFFIX))?.clone();
        let (px, py, pf, pg, pp) = (
            self.ptr(&cl.x),
            self.ptr(&cl.y),
            self.ptr(&f.data),
            self.ptr(&g.data),
            self.ptr(&p),
        );
        let (bi, ni, mi, di, root) = (
            to_i32(batch, "batch")?,
            n as i32,
            m as i32,
            cl.d as i32,
            cl.root as i32,
        );
        let blocks = total.div_ceil(256).min(self.inner.sm_count * 32) as u32;
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&px).arg(&py).arg(&pf).arg(&pg).arg(&pp);
        b.arg(&bi).arg(&ni).arg(&mi).arg(&di).arg(&root).arg(&eps);
        unsafe { b.launch(cfg1(blocks, 256, 0)) }.map_err(|e| cuda_err("launching pc_plan", e))?;
        Ok(CudaBuffer {
            data: p,
            len: total,
        })
    }

    /// [`Backend::column_error_and_cost`] for point clouds: a `g` half-step into scratch,
    /// the marginal error, and the transport cost.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn cloud_report<T: CudaReal>(
        &self,
        cost: &CudaCost<T>,
        cl: &CudaCloud<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        nu: &CudaBuffer<T>,
        log_nu: &CudaBuffer<T>,
        eps: T,
    ) -> Result<(Vec<T>, Vec<T>)> {
        let batch = batch_of(g.len, cl.m, "g")?;
        let mut g_next = self.filled(g.len, T::zero())?;
        self.cloud_sinkstep(cl, Side::Col, eps, f, log_nu, &mut g_next)?;
        let errors = self.marginal_error(batch, nu, g, &g_next, eps)?;
        Ok((errors, self.transport_cost(cost, f, g, eps)?))
    }
}

fn cloud_of<'a, T>(cost: &'a CudaCost<T>, what: &str) -> Result<&'a CudaCloud<T>> {
    cost.cloud.as_ref().ok_or_else(|| {
        Error::Unavailable(format!(
            "{what} needs a point-cloud cost (CostSource::PointCloud)"
        ))
    })
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
        let (mass, grad, batch, len) = self.cloud_rows(cl, side, f, g, eps, 1, None)?;
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
        let (_, res, batch, len) =
            self.cloud_rows(cl, side, f, g, eps, 2, Some((values, k, stride)))?;
        Ok(CudaBuffer {
            data: res,
            len: batch * len * k,
        })
    }
}
