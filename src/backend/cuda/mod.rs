//! The CUDA backend (feature `cuda`): buffers live in GPU memory, kernels from `cuda/*.cu`
//! are compiled by NVRTC for the device's architecture once per process.
//!
//! * [`CudaBackend::sinkstep`](Backend::sinkstep) is a tiled, GEMM-shaped one-pass
//!   log-sum-exp: a block owns 16 problems × 32 outputs (one problem × 128 outputs for
//!   per-problem costs or small batches), streams the reduction through shared memory,
//!   and every cost element loaded is used by all the block's problems.
//! * [`Backend::iterate`] runs small problems (both orientations of the cost and the
//!   potentials fit in one block's shared memory) as one launch for all iterations; larger
//!   ones run one launch per half-step with no host synchronisation in between.
//! * [`Backend::column_error_and_cost`] (the solver's end-of-run report) is one tiled pass
//!   that yields each plan's column marginals and `⟨P, C⟩` together.
//! * Consecutive half-steps use programmatic dependent launch on Hopper: a kernel's blocks
//!   start while the previous kernel drains and wait (`griddepcontrol.wait`) for its data.
//! * Only marginal errors and distances (`B` numbers) are read back by the solver.
//! * Point clouds ([`crate::PointCloudCost`], `d ≤ 16`): the cost is formed in registers
//!   from the two clouds and never stored (`cuda/pointcloud.cu`, [`crate::PointCloudKernels`]
//!   for point gradients and `P·V`).
//! * Grid costs ([`CostSource::Grid`], axes of at most 1024 points) run one batched 1-D
//!   log-sum-exp pass per axis (cuda/grid.cu), the cost computed on the fly; `⟨P, C⟩` is
//!   separable too, dense plans of grids are [`Error::Unavailable`].
//! * [`BarycenterKernels`](crate::backend::barycenter::BarycenterKernels) (cuda/barycenter.cu):
//!   the barycenter loop runs on the GPU for dense and grid costs.
//! * [`BistochasticKernels`](crate::backend::bistochastic::BistochasticKernels)
//!   (cuda/bistochastic.cu): one fused kernel per direction for batches of n×n matrices
//!   (n ≤ 32), and [`GradKernels`](crate::backend::grad::GradKernels) (cuda/grad.cu), so the
//!   implicit OT gradients run on the GPU.
//!
//! Everything runs on one CUDA stream per backend, in order. Driver, compiler and kernel
//! failures are [`Error::Cuda`]; a machine without driver, NVRTC or GPU gives
//! [`Error::Unavailable`] from [`CudaBackend::new`].

mod barycenter;
mod bistochastic;
mod grad;
mod grid;
mod linalg;
mod module;
mod pointcloud;

use super::{batch_of, check_cost_batch, Backend, CostDims, CostSource, GridCost, Side};
use crate::{Error, Real, Result};
use cudarc::driver::{
    result::DriverError, sys, CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr,
    DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A precision the CUDA kernels exist for (`f32`, `f64`).
pub trait CudaReal: Real + DeviceRepr + ValidAsZeroBits {
    /// Suffix of the kernel entry points (`"f32"`, `"f64"`).
    const SUFFIX: &'static str;
}
impl CudaReal for f32 {
    const SUFFIX: &'static str = "f32";
}
impl CudaReal for f64 {
    const SUFFIX: &'static str = "f64";
}

/// Tile shapes of the tiled half-step kernels; must match `TiledCfg` in cuda/sinkstep.cu.
#[derive(Clone, Copy, Debug)]
struct TileCfg {
    /// Problems per block.
    bb: usize,
    /// Outputs per block.
    bj: usize,
    /// Reduction rows per shared-memory stage.
    kt: usize,
    /// Dynamic shared memory, in elements of T.
    smem: usize,
}
/// `sinkstep_s16_*`: TB=4, TJ=4, WB=4, WJ=8, 8 warps, KW=16.
const S16: TileCfg = TileCfg {
    bb: 16,
    bj: 32,
    kt: 128,
    smem: 2 * (128 * 32 + 128 * 20),
};
/// `sinkstep_s16_factored_*`: S16 and each warp's factored rows (`TiledCfg::SMEM_FACT`).
const S16F: TileCfg = TileCfg {
    smem: S16.smem + 8 * 16 * (20 + 32),
    ..S16
};
/// `sinkstep_s4_*`: TB=4, TJ=4, WB=1, WJ=32, 8 warps, KW=8.
const S4: TileCfg = TileCfg {
    bb: 4,
    bj: 128,
    kt: 64,
    smem: 2 * (64 * 128 + 64 * 8),
};
/// `sinkstep_b1_*`: TB=1, TJ=4, WB=1, WJ=32, 8 warps, KW=8.
const B1: TileCfg = TileCfg {
    bb: 1,
    bj: 128,
    kt: 64,
    smem: 2 * (64 * 128 + 64),
};
/// `report_s16_*`: TB=4, TJ=2, WB=4, WJ=8, 8 warps, KW=16.
const R16: TileCfg = TileCfg {
    bb: 16,
    bj: 16,
    kt: 128,
    smem: 2 * (128 * 16 + 128 * 20),
};
const TILED_THREADS: u32 = 256;
const FUSED_THREADS: u32 = 1024;

/// Kernels loaded from each compiled module (`cuda/NAME.cu`), by name; each is looked up
/// only in its own module, and a missing one is an error when the backend starts.
const KERNELS: &[(&str, &[&str])] = &[
    (
        "sinkstep",
        &[
            "sinkstep_s16_f32",
            "sinkstep_s16_f64",
            "sinkstep_s16_factored_f32",
            "sinkstep_s16_factored_f64",
            "sinkstep_s4_f32",
            "sinkstep_s4_f64",
            "report_s16_f32",
            "report_s16_f64",
            "report_b1_f32",
            "report_b1_f64",
            "report_sum_f32",
            "report_sum_f64",
            "sinkstep_b1_f32",
            "sinkstep_b1_f64",
            "sinkstep_finish_f32",
            "sinkstep_finish_f64",
            "sinkhorn_fused_f32",
            "sinkhorn_fused8_f32",
            "sinkhorn_fused_f64",
            "marginal_error_f32",
            "marginal_error_f64",
            "transport_cost_f32",
            "transport_cost_f64",
            "plan_f32",
            "plan_f64",
            "fill_f32",
            "fill_f64",
            "transpose_f32",
            "transpose_f64",
        ],
    ),
    (
        "pointcloud",
        &[
            "pc_sinkstep_d3_f32",
            "pc_sinkstep_d3_f64",
            "pc_sinkstep_d4_f32",
            "pc_sinkstep_d4_f64",
            "pc_sinkstep_d16_f32",
            "pc_sinkstep_d16_f64",
            "pc_rows_d4_f32",
            "pc_rows_d4_f64",
            "pc_rows_d16_f32",
            "pc_rows_d16_f64",
            "pc_reduce_f32",
            "pc_reduce_f64",
            "pc_plan_f32",
            "pc_plan_f64",
        ],
    ),
    (
        "grid",
        &[
            "grid_pass_f32",
            "grid_pass_f64",
            "grid_cost_sum_f32",
            "grid_cost_sum_f64",
            "grid_bary_fused_f32",
            "grid_bary_fused_f64",
        ],
    ),
    (
        "barycenter",
        &[
            "bary_log_mean_f32",
            "bary_log_mean_f64",
            "bary_potential_f32",
            "bary_potential_f64",
            "bary_spread_f32",
            "bary_spread_f64",
        ],
    ),
    ("bistochastic", bistochastic::KERNEL_NAMES),
    ("grad", grad::KERNEL_NAMES),
    ("linalg", linalg::LINALG_KERNELS),
];

struct Inner {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    funcs: HashMap<&'static str, CudaFunction>,
    device: String,
    sm_count: usize,
    max_smem: usize,
    /// Whether `iterate` may use the fused small-problem kernel.
    fused: bool,
    /// Programmatic dependent launch of consecutive half-steps (compute capability ≥ 9).
    pdl: bool,
    /// Outputs per lane in the fused kernel (4 or 8).
    fused_outputs: usize,
    /// Lanes per output group in the fused kernel (0 = by reduction length).
    fused_lanes: usize,
    /// CTAs per problem of the fused grid-barycenter kernel (0: not used; needs sm_90).
    bary_cluster: usize,
    /// Largest cluster of the fused small-problem kernel (≤ 1: one CTA per problem).
    fused_cluster: usize,
    factored: bool,
    /// Cluster sizes found schedulable, by (kernel, threads, shared bytes, size asked).
    cluster_sizes: Mutex<HashMap<ClusterKey, usize>>,
}

/// Computes on an NVIDIA GPU through the CUDA driver API. Cheap to clone (shares the
/// context, stream and loaded kernels).
#[derive(Clone)]
pub struct CudaBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaBackend({}, {} SMs)",
            self.inner.device, self.inner.sm_count
        )
    }
}

fn cuda_err(what: &str, e: DriverError) -> Error {
    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        Error::Cuda(format!("{what}: out of GPU memory"))
    } else {
        Error::Cuda(format!("{what}: {e:?}"))
    }
}

/// Kernel choices of a [`CudaBackend`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaOptions {
    /// Run [`Backend::iterate`] as one fused launch when a problem fits in one block's
    /// shared memory (default `true`).
    pub fused: bool,
    /// Lanes sharing one group of outputs in the fused small-problem kernel (a power of
    /// two ≤ 32); 0 (default) picks about 16 reduction terms per lane.
    pub fused_lanes: usize,
    /// Let consecutive half-steps overlap their start with the previous one's end
    /// (programmatic dependent launch, Hopper and later; default `true`).
    pub overlap_launches: bool,
    /// Outputs each lane of the fused small-problem kernel reduces (4 or 8; 8 is f32
    /// only).
    pub fused_outputs: usize,
    /// CTAs (one thread-block cluster) per problem in the fused barycenter kernel on small
    /// grids, which runs every iteration in one launch; 0 disables it (kernels one by one).
    /// Default 16 (a non-portable size: where the GPU cannot schedule it, the largest
    /// smaller power of two that it can).
    pub bary_cluster: usize,
    /// Largest thread-block cluster per problem of the fused small-problem kernel when few
    /// problems would leave most SMs idle (each CTA computes a share of every half-step's
    /// outputs); ≤ 1 keeps one CTA per problem. Default 8.
    pub fused_cluster: usize,
    /// Half-steps of 8 or more problems on a shared cost factor their exponentials where
    /// the previous result's shifts allow: 2^(p_bk − c_kj − u_b − v_j)/ε-terms as
    /// A_bk·K_kj, so a tile of BB problems × BJ outputs costs BB + BJ exponentials per
    /// reduction row and a matrix product instead of BB·BJ exponentials (cuda/sinkstep.cu,
    /// FACT). The shifts fit when the costs change little between neighbouring outputs
    /// relative to ε (sorted or gridded supports, otB); where they do not, those warps keep
    /// one exponential per term, about 11% slower than the kernel that `false` selects
    /// (otB on an H200 with every fit refused: 18.6 ms against 16.8 ms; factored: 8.25 ms).
    /// Default `true`.
    pub factored: bool,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            fused: true,
            fused_lanes: 0,
            overlap_launches: true,
            fused_outputs: 4,
            bary_cluster: 16,
            fused_cluster: 8,
            factored: true,
        }
    }
}

impl CudaOptions {
    /// The defaults, overridden by `LOGOT_CUDA_FUSED=0|1`, `LOGOT_CUDA_FUSED_LANES=G`,
    /// `LOGOT_CUDA_FUSED_OUTPUTS=4|8`, `LOGOT_CUDA_PDL=0|1`, `LOGOT_CUDA_BARY_CLUSTER=C` and
    /// `LOGOT_CUDA_FUSED_CLUSTER=C` and `LOGOT_CUDA_FACTORED=0|1`.
    pub fn from_env() -> Self {
        let d = CudaOptions::default();
        CudaOptions {
            fused: std::env::var("LOGOT_CUDA_FUSED")
                .map(|v| v != "0")
                .unwrap_or(d.fused),
            fused_lanes: std::env::var("LOGOT_CUDA_FUSED_LANES")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d.fused_lanes),
            overlap_launches: std::env::var("LOGOT_CUDA_PDL")
                .map(|v| v != "0")
                .unwrap_or(d.overlap_launches),
            fused_outputs: std::env::var("LOGOT_CUDA_FUSED_OUTPUTS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d.fused_outputs),
            bary_cluster: std::env::var("LOGOT_CUDA_BARY_CLUSTER")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d.bary_cluster),
            fused_cluster: std::env::var("LOGOT_CUDA_FUSED_CLUSTER")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(d.fused_cluster),
            factored: std::env::var("LOGOT_CUDA_FACTORED")
                .map(|v| v != "0")
                .unwrap_or(d.factored),
        }
    }
}

impl CudaBackend {
    /// The first GPU (ordinal 0).
    pub fn new() -> Result<Self> {
        Self::with_device(0)
    }

    /// The GPU with this ordinal, with [`CudaOptions::from_env`]. Errors:
    /// [`Error::Unavailable`] when the CUDA driver or NVRTC cannot be loaded or there is no
    /// such GPU; [`Error::Cuda`] when a driver call or the kernel compilation fails.
    pub fn with_device(ordinal: usize) -> Result<Self> {
        Self::with_options(ordinal, CudaOptions::from_env())
    }

    /// The GPU with this ordinal and explicit kernel options.
    pub fn with_options(ordinal: usize, options: CudaOptions) -> Result<Self> {
        // cudarc panics when a library is missing; check first, and catch anything else.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::Unavailable(
                "no CUDA driver: libcuda could not be loaded".into(),
            ));
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(Error::Unavailable(
                "no NVRTC: libnvrtc could not be loaded (put the CUDA toolkit's lib64 on LD_LIBRARY_PATH)".into(),
            ));
        }
        match std::panic::catch_unwind(|| Self::init(ordinal, options)) {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(Error::Unavailable(format!(
                    "the CUDA driver could not be used: {msg}"
                )))
            }
        }
    }

    fn init(ordinal: usize, options: CudaOptions) -> Result<Self> {
        let count = match CudaContext::device_count() {
            Ok(c) => c,
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => 0,
            Err(e) => return Err(Error::Unavailable(format!("no usable CUDA driver: {e:?}"))),
        };
        if count <= 0 {
            return Err(Error::Unavailable("no CUDA GPU found".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::parameter(
                "ordinal",
                ordinal,
                format!("there are {count} CUDA devices"),
            ));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| cuda_err("creating the context", e))?;
        // One stream per backend and every launch in order: cudarc's per-buffer event
        // tracking (made for several streams) would only add driver calls.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx
            .new_stream()
            .map_err(|e| cuda_err("creating a stream", e))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| cuda_err("reading the compute capability", e))?;
        if major < 8 {
            return Err(Error::Unavailable(format!(
                "GPU compute capability {major}.{minor} is below 8.0 (the kernels use cp.async)"
            )));
        }
        let attr = |a| {
            ctx.attribute(a)
                .map_err(|e| cuda_err("reading a device attribute", e))
        };
        let sm_count =
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as usize;
        let max_smem =
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
                as usize;
        let device = ctx.name().unwrap_or_else(|_| "CUDA GPU".into());
        let arch = format!("sm_{major}{minor}");
        let mut funcs = HashMap::new();
        for (name, kernels) in KERNELS {
            let bin = module::cubin(name, &arch)?;
            let m = ctx
                .load_module(cudarc::nvrtc::Ptx::from_binary(bin.as_ref().clone()))
                .map_err(|e| cuda_err("loading the kernels", e))?;
            for k in kernels.iter() {
                let f = m
                    .load_function(k)
                    .map_err(|e| cuda_err(&format!("finding kernel {k} in {name}.cu"), e))?;
                funcs.insert(*k, f);
            }
        }
        let opt_in = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
        let static_smem = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES;
        for f in funcs.values() {
            // Every kernel may use the device's whole opt-in shared memory, less its static part.
            let fixed = f
                .get_attribute(static_smem)
                .map_err(|e| cuda_err("reading a kernel attribute", e))?;
            let bytes = (max_smem as i32 - fixed).max(0);
            f.set_attribute(opt_in, bytes)
                .map_err(|e| cuda_err("raising the shared-memory limit", e))?;
        }
        let (fused, fused_lanes, pdl) = (
            options.fused,
            options.fused_lanes,
            options.overlap_launches && major >= 9,
        );
        let fused_outputs = if options.fused_outputs >= 8 { 8 } else { 4 };
        Ok(CudaBackend {
            inner: Arc::new(Inner {
                ctx,
                stream,
                funcs,
                device,
                sm_count,
                max_smem,
                fused,
                fused_lanes,
                pdl,
                fused_outputs,
                bary_cluster: if major >= 9 {
                    options.bary_cluster.min(16)
                } else {
                    0
                },
                fused_cluster: if major >= 9 {
                    options.fused_cluster.min(16)
                } else {
                    1
                },
                factored: options.factored,
                cluster_sizes: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The GPU's name.
    pub fn device_name(&self) -> &str {
        &self.inner.device
    }

    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> usize {
        self.inner.sm_count
    }

    /// Wait for all queued work (kernel failures surface here at the latest).
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .stream
            .synchronize()
            .map_err(|e| cuda_err("kernel execution", e))
    }

    /// A timer on the backend's stream: CUDA events around `f`, in milliseconds of GPU time.
    pub fn time_ms<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<(R, f64)> {
        let ev = |_| {
            self.inner
                .ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(|e| cuda_err("creating an event", e))
        };
        let (start, stop) = (ev(0)?, ev(1)?);
        start
            .record(&self.inner.stream)
            .map_err(|e| cuda_err("recording an event", e))?;
        let r = f()?;
        stop.record(&self.inner.stream)
            .map_err(|e| cuda_err("recording an event", e))?;
        stop.synchronize()
            .map_err(|e| cuda_err("kernel execution", e))?;
        let ms = start
            .elapsed_ms(&stop)
            .map_err(|e| cuda_err("reading an event", e))?;
        Ok((r, ms as f64))
    }

    /// Launch a tiled half-step kernel (`sinkstep_*`, `report_*`). With `split`, the
    /// reduction is divided across blocks when the grid alone would leave SMs idle, and
    /// `sinkstep_finish` merges the partial sums.
    fn launch_tiled<T: CudaReal>(
        &self,
        name: &str,
        tile: TileCfg,
        a: TiledArgs<'_, T>,
    ) -> Result<()> {
        let gx = a.batch.div_ceil(tile.bb);
        let gy = a.l.div_ceil(tile.bj);
        if gx > i32::MAX as usize || gy > 65535 {
            return Err(Error::shape(
                "sinkstep",
                format!(
                    "{} problems of {} outputs exceed the launch grid",
                    a.batch, a.l
                ),
            ));
        }
        // Split only when the grid would leave SMs idle (the partials cost a second kernel,
        // and a split block's first call on a cost has no shift hint).
        let blocks = gx * gy;
        let sms = self.inner.sm_count;
        let max_split = (a.k / (4 * tile.kt)).max(1);
        let want = if a.split && blocks < sms {
            (2 * sms).div_ceil(blocks).min(max_split)
        } else {
            1
        };
        let kslice = a.k.div_ceil(want).div_ceil(tile.kt) * tile.kt;
        let splits = a.k.div_ceil(kslice);
        let (bi, ki, li) = (
            to_i32(a.batch, "batch")?,
            to_i32(a.k, "cost")?,
            to_i32(a.l, "cost")?,
        );
        let smem = tile.smem * std::mem::size_of::<T>();
        if smem > self.inner.max_smem {
            return Err(Error::Unavailable(format!(
                "the {} kernel needs {smem} bytes of shared memory per block; this GPU offers {}",
                T::NAME,
                self.inner.max_smem
            )));
        }
        // K-split partials: the cost's kept ones when they have this layout (their pairs
        // are this call's hints), else fresh ones (exact mode).
        let plen = 2 * splits * a.batch * a.l;
        let mut slot = match (splits > 1, a.hints) {
            (true, Some(m)) => Some(
                m.lock()
                    .map_err(|_| Error::Cuda("the K-split hint lock was poisoned".into()))?,
            ),
            _ => None,
        };
        let mut split_hints = 0i32;
        let mut fresh = None;
        if splits > 1 {
            match slot.as_deref_mut() {
                Some(Some(p)) if p.batch == a.batch && p.splits == splits && p.l == a.l => {
                    split_hints = 1;
                }
                Some(kept) => {
                    *kept = Some(SplitParts {
                        batch: a.batch,
                        splits,
                        l: a.l,
                        buf: self.alloc::<T>(plen, "K-split partials")?,
                    });
                }
                None => fresh = Some(self.alloc::<T>(plen, "K-split partials")?),
            }
        }
        let parts = match (&fresh, slot.as_deref()) {
            (Some(b), _) => Some(b),
            (None, Some(Some(p))) => Some(&p.buf),
            _ => None,
        };
        let (pm, ps) = match (splits > 1, parts) {
            (true, Some(p)) => {
                let base = self.ptr(p);
                (base, base + (plen / 2 * std::mem::size_of::<T>()) as u64)
            }
            _ => a.parts,
        };
        let f = self.func(name)?.clone();
        let kslice_i = to_i32(kslice, "cost")?;
        let cfg = LaunchConfig {
            grid_dim: (gx as u32, gy as u32, splits as u32),
            block_dim: (TILED_THREADS, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        if splits == 1 && self.inner.pdl && name.starts_with("sinkstep_") {
            // Programmatic dependent launch: this half-step's blocks may start (and fetch
            // their first cost tile) while the previous one finishes; the kernel waits
            // (griddepcontrol.wait) before reading anything that kernel wrote.
            let (mut r, mut stride, mut other, mut lm, mut out) =
                (a.r, a.stride, a.other, a.lm, a.out);
            let (mut pm, mut ps, mut bi, mut ki, mut li, mut eps, mut ks, mut sh) =
                (pm, ps, bi, ki, li, a.eps, kslice_i, split_hints);
            let mut params: [*mut std::ffi::c_void; 13] = [
                &mut r as *mut u64 as *mut _,
                &mut stride as *mut i64 as *mut _,
                &mut other as *mut u64 as *mut _,
                &mut lm as *mut u64 as *mut _,
                &mut out as *mut u64 as *mut _,
                &mut pm as *mut u64 as *mut _,
                &mut ps as *mut u64 as *mut _,
                &mut bi as *mut i32 as *mut _,
                &mut ki as *mut i32 as *mut _,
                &mut li as *mut i32 as *mut _,
                &mut eps as *mut T as *mut _,
                &mut ks as *mut i32 as *mut _,
                &mut sh as *mut i32 as *mut _,
            ];
            // SAFETY: the parameters match the kernel's signature (TILED_ARGS in
            // cuda/sinkstep.cu) and outlive the call.
            unsafe { self.launch_ex(&f, name, cfg, LaunchAttr::Pdl, &mut params) }?;
        } else {
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&a.r)
                .arg(&a.stride)
                .arg(&a.other)
                .arg(&a.lm)
                .arg(&a.out)
                .arg(&pm)
                .arg(&ps);
            b.arg(&bi).arg(&ki).arg(&li).arg(&a.eps).arg(&kslice_i);
            b.arg(&split_hints);
            unsafe { b.launch(cfg) }.map_err(|e| cuda_err(&format!("launching {name}"), e))?;
        }
        if splits > 1 {
            let f = self
                .func(&format!("sinkstep_finish_{}", T::SUFFIX))?
                .clone();
            let total = a.batch * a.l;
            let blocks = total.div_ceil(256).min(self.inner.sm_count * 16) as u32;
            let sp = splits as i32;
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&pm)
                .arg(&ps)
                .arg(&a.lm)
                .arg(&a.out)
                .arg(&bi)
                .arg(&li)
                .arg(&sp)
                .arg(&a.eps);
            unsafe { b.launch(cfg1(blocks, 256, 0)) }
                .map_err(|e| cuda_err("launching sinkstep_finish", e))?;
        }
        // Fresh partials are freed in stream order after the kernels; kept ones stay.
        drop(fresh);
        drop(slot);
        Ok(())
    }

    fn func(&self, name: &str) -> Result<&CudaFunction> {
        self.inner
            .funcs
            .get(name)
            .ok_or_else(|| Error::Cuda(format!("kernel {name} is missing from the module")))
    }

    fn alloc<T: CudaReal>(&self, len: usize, what: &str) -> Result<CudaSlice<T>> {
        let bytes = len.checked_mul(std::mem::size_of::<T>());
        if !matches!(bytes, Some(b) if b <= isize::MAX as usize) {
            return Err(Error::Cuda(format!(
                "{what}: {len} elements do not fit in memory"
            )));
        }
        // A zero-length allocation holds one element so every buffer has an address.
        unsafe { self.inner.stream.alloc::<T>(len.max(1)) }.map_err(|e| {
            let gib = (len * std::mem::size_of::<T>()) as f64 / (1u64 << 30) as f64;
            cuda_err(
                &format!("allocating {what} ({len} {} values, {gib:.3} GiB)", T::NAME),
                e,
            )
        })
    }

    /// Launch `func` through `cuLaunchKernelEx` with one launch attribute (`what` names it
    /// in errors).
    ///
    /// # Safety
    /// `params` must match the kernel's parameter list, each pointing at a value that lives
    /// through the call (which copies them), and the buffers they name must fit `cfg`.
    unsafe fn launch_ex(
        &self,
        func: &CudaFunction,
        what: &str,
        cfg: LaunchConfig,
        how: LaunchAttr,
        params: &mut [*mut std::ffi::c_void],
    ) -> Result<()> {
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        match how {
            LaunchAttr::Pdl => {
                attr.id =
                    sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
                attr.value.programmaticStreamSerializationAllowed = 1;
            }
            LaunchAttr::Cluster(size) => {
                attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
                attr.value.clusterDim.x = size;
                attr.value.clusterDim.y = 1;
                attr.value.clusterDim.z = 1;
            }
        }
        let lc = launch_config(&cfg, self.inner.stream.cu_stream(), &mut attr);
        self.inner
            .ctx
            .bind_to_thread()
            .map_err(|e| cuda_err("binding the context", e))?;
        // SAFETY: a valid function and config (whose attribute outlives the call); the
        // parameters are the caller's promise.
        unsafe {
            sys::cuLaunchKernelEx(
                &lc,
                func.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
        .map_err(|e| cuda_err(&format!("launching {what}"), e))
    }

    /// The largest thread-block cluster size, among `want` and the powers of two below it,
    /// that the GPU can schedule for kernel `name` with `threads` threads and `smem` bytes of
    /// dynamic shared memory per CTA (sizes above 8 are non-portable and allowed
    /// explicitly); 1 when no cluster fits. Probed once per (kernel, threads, bytes, size).
    fn cluster_size(
        &self,
        name: &'static str,
        threads: u32,
        smem: u32,
        want: usize,
    ) -> Result<usize> {
        let key = (name, threads, smem, want);
        if let Some(&c) = self
            .inner
            .cluster_sizes
            .lock()
            .map_err(|_| Error::Cuda("the cluster-size cache lock was poisoned".into()))?
            .get(&key)
        {
            return Ok(c);
        }
        let func = self.func(name)?;
        self.inner
            .ctx
            .bind_to_thread()
            .map_err(|e| cuda_err("binding the context", e))?;
        let mut chosen = 1;
        let mut cand = want.min(16);
        while cand >= 2 {
            // SAFETY: a valid function handle and a documented attribute.
            let allowed = unsafe {
                sys::cuFuncSetAttribute(
                    func.cu_function(),
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                    i32::from(cand > 8),
                )
            };
            if allowed == sys::CUresult::CUDA_SUCCESS {
                let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
                attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
                attr.value.clusterDim.x = cand as u32;
                attr.value.clusterDim.y = 1;
                attr.value.clusterDim.z = 1;
                let cfg = LaunchConfig {
                    grid_dim: (cand as u32, 1, 1),
                    block_dim: (threads, 1, 1),
                    shared_mem_bytes: smem,
                };
                let lc = launch_config(&cfg, self.inner.stream.cu_stream(), &mut attr);
                let mut clusters = 0i32;
                // SAFETY: a valid function and config whose attribute outlives the query.
                let r = unsafe {
                    sys::cuOccupancyMaxActiveClusters(&mut clusters, func.cu_function(), &lc)
                };
                if r == sys::CUresult::CUDA_SUCCESS && clusters >= 1 {
                    chosen = cand;
                    break;
                }
            }
            cand = if cand.is_power_of_two() {
                cand / 2
            } else {
                cand.next_power_of_two() / 2
            };
        }
        self.inner
            .cluster_sizes
            .lock()
            .map_err(|_| Error::Cuda("the cluster-size cache lock was poisoned".into()))?
            .insert(key, chosen);
        Ok(chosen)
    }

    fn ptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        s.device_ptr(&self.inner.stream).0
    }

    fn fill_slice<T: CudaReal>(&self, s: &mut CudaSlice<T>, len: usize, value: T) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let f = self.func(&format!("fill_{}", T::SUFFIX))?.clone();
        let p = self.ptr(s);
        let n = len as i64;
        let blocks = len.div_ceil(256).min(self.inner.sm_count * 16) as u32;
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&p).arg(&n).arg(&value);
        unsafe { b.launch(cfg1(blocks, 256, 0)) }.map_err(|e| cuda_err("launching fill", e))?;
        Ok(())
    }
}

/// Row length of the fused kernel's shared cost copies (`fused_pad` in cuda/sinkstep.cu):
/// at least `l` rounded up to 8, ≡ 4 (mod 32).
fn fused_pad(l: usize) -> usize {
    let p = l.div_ceil(8) * 8;
    p + (36 - p % 32) % 32
}

/// Lanes per output group of the fused kernel (`fused_lanes` in cuda/sinkstep.cu).
fn fused_lanes(k: usize) -> usize {
    let mut g = 1;
    while g < 32 && g * 16 < k {
        g *= 2;
    }
    g
}

/// (kernel, threads, dynamic shared bytes, cluster size asked) of a cluster-size probe.
type ClusterKey = (&'static str, u32, u32, usize);

/// The launch attribute of [`CudaBackend::launch_ex`].
#[derive(Clone, Copy, Debug)]
enum LaunchAttr {
    /// Programmatic dependent launch: the kernel may start while the previous one in the
    /// stream finishes (it waits with `griddepcontrol.wait` before reading its outputs).
    Pdl,
    /// Thread-block clusters of this many CTAs along x.
    Cluster(u32),
}

/// The driver's launch configuration for `cfg` on `stream` with one attribute.
fn launch_config(
    cfg: &LaunchConfig,
    stream: sys::CUstream,
    attr: &mut sys::CUlaunchAttribute,
) -> sys::CUlaunchConfig {
    sys::CUlaunchConfig {
        gridDimX: cfg.grid_dim.0,
        gridDimY: cfg.grid_dim.1,
        gridDimZ: cfg.grid_dim.2,
        blockDimX: cfg.block_dim.0,
        blockDimY: cfg.block_dim.1,
        blockDimZ: cfg.block_dim.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: stream,
        attrs: attr as *mut _,
        numAttrs: 1,
    }
}

/// The K-split partial `(max, sum)` pairs of the last split half-step on one side of a
/// cost, kept as the next call's shift hints (`split_hints` in cuda/sinkstep.cu).
struct SplitParts<T> {
    batch: usize,
    splits: usize,
    l: usize,
    /// `part_m` (`splits·batch·l`), then `part_s`.
    buf: CudaSlice<T>,
}

/// One side's [`SplitParts`] of a cost (empty until a split half-step ran).
type PartsSlot<T> = Mutex<Option<SplitParts<T>>>;

/// Device pointers and sizes of one tiled launch.
struct TiledArgs<'a, T> {
    r: u64,
    stride: i64,
    other: u64,
    lm: u64,
    out: u64,
    batch: usize,
    k: usize,
    l: usize,
    eps: T,
    /// Whether the reduction may be split across blocks (not for `report_*`).
    split: bool,
    /// Where a split launch keeps its partials for the next call's hints (none: fresh
    /// partials, exact mode).
    hints: Option<&'a PartsSlot<T>>,
    /// `part_m`, `part_s` pointers when not split (the report's outputs).
    parts: (u64, u64),
}

fn cfg1(blocks: u32, threads: u32, smem: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks.max(1), 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: smem,
    }
}

fn to_i32(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        Error::shape(
            what,
            format!("{v} exceeds the CUDA kernels' limit of {}", i32::MAX),
        )
    })
}

/// A 1-D array of `T` in GPU memory.
pub struct CudaBuffer<T> {
    data: CudaSlice<T>,
    len: usize,
}

impl<T> CudaBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T> std::fmt::Debug for CudaBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBuffer(len {})", self.len)
    }
}

/// A cost on the GPU: a dense `C` (`[B×]n×m`) and `Cᵀ` (`[B×]m×n`), so that both
/// half-steps stream rows, or a grid (separable passes; `c`, `ct` then hold one element).
pub struct CudaCost<T> {
    dims: CostDims,
    c: CudaSlice<T>,
    ct: CudaSlice<T>,
    /// Point clouds whose cost is computed on the fly (then `c` and `ct` are placeholders).
    cloud: Option<pointcloud::CudaCloud<T>>,
    grid: Option<GridCost>,
    /// K-split partials of the last split half-step per side (`[Col, Row]`), the next
    /// one's shift hints.
    split_parts: [PartsSlot<T>; 2],
}

impl<T> std::fmt::Debug for CudaCost<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaCost({:?})", self.dims)
    }
}

impl<T: CudaReal> Backend<T> for CudaBackend {
    type Buffer = CudaBuffer<T>;
    type Cost = CudaCost<T>;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn upload(&self, data: &[T]) -> Result<CudaBuffer<T>> {
        let mut s = self.alloc::<T>(data.len(), "a buffer")?;
        if !data.is_empty() {
            self.inner
                .stream
                .memcpy_htod(data, &mut s)
                .map_err(|e| cuda_err("copying to the GPU", e))?;
        }
        Ok(CudaBuffer {
            data: s,
            len: data.len(),
        })
    }

    fn download(&self, buf: &CudaBuffer<T>) -> Result<Vec<T>> {
        if buf.len == 0 {
            return Ok(Vec::new());
        }
        let mut v = self
            .inner
            .stream
            .clone_dtoh(&buf.data)
            .map_err(|e| cuda_err("copying from the GPU", e))?;
        v.truncate(buf.len);
        Ok(v)
    }

    fn filled(&self, len: usize, value: T) -> Result<CudaBuffer<T>> {
        let mut s = self.alloc::<T>(len, "a buffer")?;
        self.fill_slice(&mut s, len, value)?;
        Ok(CudaBuffer { data: s, len })
    }

    fn len(&self, buf: &CudaBuffer<T>) -> usize {
        buf.len
    }

    fn prepare_cost(&self, cost: &CostSource<'_, T>) -> Result<CudaCost<T>> {
        let (dims, view) = match cost {
            CostSource::Dense(c) => {
                let (n, m) = c.dim();
                (
                    CostDims { n, m, batch: None },
                    c.as_slice().map(std::borrow::Cow::Borrowed),
                )
            }
            CostSource::DenseBatch(c) => {
                let (b, n, m) = c.dim();
                if b == 0 {
                    return Err(Error::Empty {
                        arg: "cost".into(),
                        detail: "a batch of 0 cost matrices".into(),
                    });
                }
                (
                    CostDims {
                        n,
                        m,
                        batch: Some(b),
                    },
                    c.as_slice().map(std::borrow::Cow::Borrowed),
                )
            }
            CostSource::Grid(g) => return self.prepare_grid(g),
            CostSource::PointCloud(p) => return self.prepare_cloud(p),
        };
        if dims.n == 0 || dims.m == 0 {
            return Err(Error::Empty {
                arg: "cost".into(),
                detail: format!("a {}×{} matrix", dims.n, dims.m),
            });
        }
        to_i32(dims.n, "cost rows")?;
        to_i32(dims.m, "cost columns")?;
        let host: std::borrow::Cow<'_, [T]> = match view {
            Some(v) => v,
            None => std::borrow::Cow::Owned(match cost {
                CostSource::Dense(c) => c.iter().copied().collect(),
                CostSource::DenseBatch(c) => c.iter().copied().collect(),
                CostSource::Grid(_) | CostSource::PointCloud(_) => Vec::new(), // rejected above
            }),
        };
        let nb = dims.batch.unwrap_or(1);
        let mut c = self.alloc::<T>(host.len(), "the cost")?;
        self.inner
            .stream
            .memcpy_htod(host.as_ref(), &mut c)
            .map_err(|e| cuda_err("copying the cost", e))?;
        let ct = self.alloc::<T>(host.len(), "the transposed cost")?;
        let f = self.func(&format!("transpose_{}", T::SUFFIX))?.clone();
        let (pc, pt) = (self.ptr(&c), self.ptr(&ct));
        let (n, m) = (dims.n as i32, dims.m as i32);
        // The grid's z dimension holds at most 65535 matrices per launch.
        let per = (dims.n * dims.m) as u64 * std::mem::size_of::<T>() as u64;
        let mut b0 = 0usize;
        while b0 < nb {
            let cnt = (nb - b0).min(65535);
            let (src, dst) = (pc + b0 as u64 * per, pt + b0 as u64 * per);
            let cfg = LaunchConfig {
                grid_dim: (
                    dims.m.div_ceil(32) as u32,
                    dims.n.div_ceil(32) as u32,
                    cnt as u32,
                ),
                block_dim: (32, 8, 1),
                shared_mem_bytes: 0,
            };
            if dims.m.div_ceil(32) > i32::MAX as usize || dims.n.div_ceil(32) > 65535 {
                return Err(Error::shape(
                    "cost",
                    format!(
                        "{}×{} is too large for the transpose kernel",
                        dims.n, dims.m
                    ),
                ));
            }
            let mut b = self.inner.stream.launch_builder(&f);
            b.arg(&src).arg(&dst).arg(&n).arg(&m);
            unsafe { b.launch(cfg) }.map_err(|e| cuda_err("launching transpose", e))?;
            b0 += cnt;
        }
        Ok(CudaCost {
            split_parts: Default::default(),
            dims,
            c,
            ct,
            cloud: None,
            grid: None,
        })
    }

    fn cost_dims(&self, cost: &CudaCost<T>) -> CostDims {
        cost.dims
    }

    fn sinkstep(
        &self,
        cost: &CudaCost<T>,
        side: Side,
        eps: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        if let Some(cl) = &cost.cloud {
            return self.cloud_sinkstep(cl, side, eps, other, log_marginal, out);
        }
        if let Some(grid) = &cost.grid {
            return self.grid_sinkstep(grid, eps, other, log_marginal, out);
        }
        let dims = cost.dims;
        let (k_len, l_len, r) = match side {
            Side::Col => (dims.n, dims.m, &cost.c),
            Side::Row => (dims.m, dims.n, &cost.ct),
        };
        let batch = batch_of(out.len, l_len, "sinkstep output")?;
        check_cost_batch(&dims, batch)?;
        if other.len != batch * k_len || log_marginal.len != out.len {
            return Err(Error::shape(
                "sinkstep",
                format!(
                    "potential of length {} and marginal of length {} do not fit {batch} problems of size {}×{}",
                    other.len, log_marginal.len, dims.n, dims.m
                ),
            ));
        }
        let per_problem = dims.batch.is_some();
        let (tile, name) = if !per_problem && batch >= 8 && self.inner.factored {
            (S16F, format!("sinkstep_s16_factored_{}", T::SUFFIX))
        } else if !per_problem && batch >= 8 {
            (S16, format!("sinkstep_s16_{}", T::SUFFIX))
        } else if !per_problem && batch >= 2 {
            (S4, format!("sinkstep_s4_{}", T::SUFFIX))
        } else {
            (B1, format!("sinkstep_b1_{}", T::SUFFIX))
        };
        let stride = if per_problem {
            (dims.n * dims.m) as i64
        } else {
            0i64
        };
        let (pr, po, pl, pout) = (
            self.ptr(r),
            self.ptr(&other.data),
            self.ptr(&log_marginal.data),
            self.ptr(&out.data),
        );
        let args = TiledArgs {
            r: pr,
            stride,
            other: po,
            lm: pl,
            out: pout,
            batch,
            k: k_len,
            l: l_len,
            eps,
            split: true,
            hints: Some(&cost.split_parts[usize::from(side == Side::Row)]),
            parts: (0, 0),
        };
        self.launch_tiled(&name, tile, args)
    }

    fn iterate(
        &self,
        cost: &CudaCost<T>,
        eps: T,
        log_mu: &CudaBuffer<T>,
        log_nu: &CudaBuffer<T>,
        f: &mut CudaBuffer<T>,
        g: &mut CudaBuffer<T>,
        iters: usize,
    ) -> Result<()> {
        if iters == 0 {
            return Ok(());
        }
        if cost.cloud.is_some() {
            for _ in 0..iters {
                self.sinkstep(cost, Side::Col, eps, f, log_nu, g)?;
                self.sinkstep(cost, Side::Row, eps, g, log_mu, f)?;
            }
            return Ok(());
        }
        let dims = cost.dims;
        let (n, m) = (dims.n, dims.m);
        let batch = batch_of(f.len, n, "f")?;
        check_cost_batch(&dims, batch)?;
        if g.len != batch * m || log_mu.len != f.len || log_nu.len != g.len {
            return Err(Error::shape(
                "iterate",
                format!("buffers do not fit {batch} problems of size {n}×{m}"),
            ));
        }
        let (n4, m4) = (n.div_ceil(8) * 8, m.div_ceil(8) * 8);
        let smem =
            (n * fused_pad(m) + m * fused_pad(n) + 2 * n4 + 2 * m4) * std::mem::size_of::<T>();
        if !self.inner.fused || smem > self.inner.max_smem || cost.grid.is_some() {
            for _ in 0..iters {
                self.sinkstep(cost, Side::Col, eps, f, log_nu, g)?;
                self.sinkstep(cost, Side::Row, eps, g, log_mu, f)?;
            }
            return Ok(());
        }
        // Outputs per lane: 8 (f32 only) or 4.
        let fl = if T::SUFFIX == "f32" && self.inner.fused_outputs == 8 {
            8
        } else {
            4
        };
        let name: &'static str = match (fl, T::SUFFIX) {
            (8, _) => "sinkhorn_fused8_f32",
            (_, "f32") => "sinkhorn_fused_f32",
            _ => "sinkhorn_fused_f64",
        };
        let func = self.func(name)?.clone();
        let stride = if dims.batch.is_some() {
            (n * m) as i64
        } else {
            0i64
        };
        let (pc, pf, pg, pmu, pnu) = (
            self.ptr(&cost.c),
            self.ptr(&f.data),
            self.ptr(&g.data),
            self.ptr(&log_mu.data),
            self.ptr(&log_nu.data),
        );
        let (ni, mi) = (n as i32, m as i32);
        // Few problems would leave most SMs idle: a cluster of CL CTAs per problem (each
        // takes every CL-th output group of a half-step).
        let sms = self.inner.sm_count;
        let mut cl = if self.inner.fused_cluster >= 2 && batch * 2 <= sms {
            let c = (sms / batch).min(self.inner.fused_cluster);
            1 << c.ilog2()
        } else {
            1
        };
        // Lanes per output group (a power of two ≤ 32): by reduction length; in a cluster,
        // widened (fewer terms per lane, at least 2) while a CTA stays within 256 threads.
        // Then enough threads for this CTA's groups of the wider half-step, in whole warps.
        let shape = |cl: usize| {
            let side = |l: usize, k: usize| {
                let groups = l.div_ceil(fl).div_ceil(cl);
                let mut g = match self.inner.fused_lanes {
                    0 => fused_lanes(k),
                    g => g.next_power_of_two().min(32),
                };
                if cl > 1 && self.inner.fused_lanes == 0 {
                    while g < 32 && groups * g * 2 <= 256 && g * 4 <= k {
                        g *= 2;
                    }
                }
                (g, groups * g)
            };
            let ((g_col, t_col), (g_row, t_row)) = (side(m, n), side(n, m));
            let threads = (t_col.max(t_row).div_ceil(32) * 32).min(FUSED_THREADS as usize);
            (g_col as i32, g_row as i32, threads as u32)
        };
        let (mut g_col, mut g_row, mut threads) = shape(cl);
        while cl > 1 {
            let got = self.cluster_size(name, threads, smem as u32, cl)?;
            if got == cl {
                break;
            }
            cl = got;
            (g_col, g_row, threads) = shape(cl);
        }
        if std::env::var_os("LOGOT_CUDA_VERBOSE").is_some() {
            eprintln!(
                "logot: {name}: {batch} problem(s) × {cl} CTAs, {threads} threads, lanes {g_col}/{g_row}, {smem} B shared, {iters} iterations"
            );
        }
        // One block (cluster) per problem; the grid's x dimension holds 2^31 − 1 blocks.
        let gx = batch
            .checked_mul(cl)
            .and_then(|b| u32::try_from(b).ok())
            .ok_or_else(|| Error::shape("iterate", "too many problems for one launch"))?;
        let cfg = LaunchConfig {
            grid_dim: (gx, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: smem as u32,
        };
        let mut left = iters;
        while left > 0 {
            let now = left.min(1 << 30);
            let (mut pc, mut stride, mut pf, mut pg, mut pmu, mut pnu) =
                (pc, stride, pf, pg, pmu, pnu);
            let (mut ni, mut mi, mut eps, mut it, mut gc, mut gr) =
                (ni, mi, eps, now as i32, g_col, g_row);
            let mut params: [*mut std::ffi::c_void; 12] = [
                &mut pc as *mut u64 as *mut _,
                &mut stride as *mut i64 as *mut _,
                &mut pf as *mut u64 as *mut _,
                &mut pg as *mut u64 as *mut _,
                &mut pmu as *mut u64 as *mut _,
                &mut pnu as *mut u64 as *mut _,
                &mut ni as *mut i32 as *mut _,
                &mut mi as *mut i32 as *mut _,
                &mut eps as *mut T as *mut _,
                &mut it as *mut i32 as *mut _,
                &mut gc as *mut i32 as *mut _,
                &mut gr as *mut i32 as *mut _,
            ];
            if cl > 1 {
                // SAFETY: the parameters match the kernel's signature (sinkhorn_fused_* in
                // cuda/sinkstep.cu) and outlive the call; the buffers were checked above.
                unsafe {
                    self.launch_ex(
                        &func,
                        "sinkhorn_fused",
                        cfg,
                        LaunchAttr::Cluster(cl as u32),
                        &mut params,
                    )
                }?;
            } else {
                let mut b = self.inner.stream.launch_builder(&func);
                b.arg(&pc)
                    .arg(&stride)
                    .arg(&pf)
                    .arg(&pg)
                    .arg(&pmu)
                    .arg(&pnu);
                b.arg(&ni).arg(&mi).arg(&eps).arg(&it).arg(&gc).arg(&gr);
                unsafe { b.launch(cfg) }.map_err(|e| cuda_err("launching sinkhorn_fused", e))?;
            }
            left -= now;
        }
        Ok(())
    }

    fn column_error_and_cost(
        &self,
        cost: &CudaCost<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        nu: &CudaBuffer<T>,
        log_nu: &CudaBuffer<T>,
        eps: T,
    ) -> Result<(Vec<T>, Vec<T>)> {
        if let Some(cl) = &cost.cloud {
            return self.cloud_report(cost, cl, f, g, nu, log_nu, eps);
        }
        // One pass over the cost on the g side: column masses and cost-weighted sums of
        // P = exp((f ⊕ g − C)/ε) per output, then one block per problem adds them up.
        let dims = cost.dims;
        let batch = check_fg(&dims, f, g)?;
        if nu.len != g.len || log_nu.len != g.len {
            return Err(Error::shape(
                "nu",
                format!("length {} does not fit g of length {}", nu.len, g.len),
            ));
        }
        if cost.grid.is_some() {
            // A g half-step into scratch, then the error and the separable cost.
            let mut g_next = Backend::<T>::filled(self, g.len, T::zero())?;
            self.sinkstep(cost, Side::Col, eps, f, log_nu, &mut g_next)?;
            let errors = self.marginal_error(batch, nu, g, &g_next, eps)?;
            return Ok((errors, self.transport_cost(cost, f, g, eps)?));
        }
        let m = dims.m;
        let (tile, name) = if dims.batch.is_none() && batch >= 8 {
            (R16, format!("report_s16_{}", T::SUFFIX))
        } else {
            (B1, format!("report_b1_{}", T::SUFFIX))
        };
        let scratch = self.alloc::<T>(2 * batch * m, "report scratch")?;
        let pm = self.ptr(&scratch);
        let ps = pm + (batch * m * std::mem::size_of::<T>()) as u64;
        let stride = if dims.batch.is_some() {
            (dims.n * m) as i64
        } else {
            0i64
        };
        let (pc, pf, pg, pl) = (
            self.ptr(&cost.c),
            self.ptr(&f.data),
            self.ptr(&g.data),
            self.ptr(&log_nu.data),
        );
        self.launch_tiled(
            &name,
            tile,
            TiledArgs {
                r: pc,
                stride,
                other: pf,
                lm: pl,
                out: pg,
                batch,
                k: dims.n,
                l: m,
                eps,
                split: false,
                hints: None,
                parts: (pm, ps),
            },
        )?;
        let sums = unsafe { self.inner.stream.alloc::<f64>(2 * batch) }
            .map_err(|e| cuda_err("allocating report sums", e))?;
        let func = self.func(&format!("report_sum_{}", T::SUFFIX))?.clone();
        let (pn, pout, per) = (self.ptr(&nu.data), self.ptr(&sums), to_i32(m, "nu")?);
        let gx = u32::try_from(batch).map_err(|_| Error::shape("nu", "too many problems"))?;
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pn).arg(&pm).arg(&ps).arg(&pout).arg(&per);
        unsafe { b.launch(cfg1(gx, 256, 0)) }.map_err(|e| cuda_err("launching report_sum", e))?;
        let host = self
            .inner
            .stream
            .clone_dtoh(&sums)
            .map_err(|e| cuda_err("reading the report", e))?;
        let errors = (0..batch).map(|k| T::of(host[2 * k])).collect();
        let costs = (0..batch).map(|k| T::of(host[2 * k + 1])).collect();
        Ok((errors, costs))
    }

    fn marginal_error(
        &self,
        batch: usize,
        marginal: &CudaBuffer<T>,
        old: &CudaBuffer<T>,
        new: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        if old.len != marginal.len || new.len != marginal.len {
            return Err(Error::shape(
                "marginal_error",
                format!("lengths {}, {}, {} differ", marginal.len, old.len, new.len),
            ));
        }
        if batch == 0 || marginal.len % batch != 0 || marginal.len == 0 {
            return Err(Error::shape(
                "marginal_error",
                format!(
                    "length {} does not split into {batch} problems",
                    marginal.len
                ),
            ));
        }
        let per = to_i32(marginal.len / batch, "marginal")?;
        let gx = u32::try_from(batch)
            .map_err(|_| Error::shape("marginal_error", "too many problems"))?;
        let err = self.alloc::<T>(batch, "marginal errors")?;
        let f = self.func(&format!("marginal_error_{}", T::SUFFIX))?.clone();
        let (pa, po, pn, pe) = (
            self.ptr(&marginal.data),
            self.ptr(&old.data),
            self.ptr(&new.data),
            self.ptr(&err),
        );
        let mut b = self.inner.stream.launch_builder(&f);
        b.arg(&pa).arg(&po).arg(&pn).arg(&pe).arg(&per).arg(&eps);
        unsafe { b.launch(cfg1(gx, 256, 0)) }
            .map_err(|e| cuda_err("launching marginal_error", e))?;
        let mut v = self
            .inner
            .stream
            .clone_dtoh(&err)
            .map_err(|e| cuda_err("reading marginal errors", e))?;
        v.truncate(batch);
        Ok(v)
    }

    fn transport_cost(
        &self,
        cost: &CudaCost<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        if let Some(cl) = &cost.cloud {
            return self.cloud_transport_cost(cl, f, g, eps);
        }
        if let Some(grid) = &cost.grid {
            return self.grid_transport_cost(grid, f, g, eps);
        }
        let dims = cost.dims;
        let batch = check_fg(&dims, f, g)?;
        let (n, m) = (dims.n, dims.m);
        // Enough row blocks to fill the GPU, at most 64 rows each.
        let want_blocks = 4 * self.inner.sm_count;
        let rows = (n * batch).div_ceil(want_blocks).clamp(1, 64);
        let gx = n.div_ceil(rows);
        let chunk = 65535usize;
        let partial = {
            // f64 partial sums: one per (problem, row block).
            let bytes = batch
                .checked_mul(gx)
                .ok_or_else(|| Error::shape("transport_cost", "too many partial sums"))?;
            unsafe { self.inner.stream.alloc::<f64>(bytes.max(1)) }
                .map_err(|e| cuda_err("allocating partial sums", e))?
        };
        let func = self.func(&format!("transport_cost_{}", T::SUFFIX))?.clone();
        let stride = if dims.batch.is_some() {
            (n * m) as i64
        } else {
            0i64
        };
        let sz = std::mem::size_of::<T>() as u64;
        let (pc, pf, pg, pp) = (
            self.ptr(&cost.c),
            self.ptr(&f.data),
            self.ptr(&g.data),
            self.ptr(&partial),
        );
        let (ni, mi, ri) = (n as i32, m as i32, rows as i32);
        let mut b0 = 0usize;
        while b0 < batch {
            let cnt = (batch - b0).min(chunk);
            let c_off = pc
                + if dims.batch.is_some() {
                    b0 as u64 * (n * m) as u64 * sz
                } else {
                    0
                };
            let (f_off, g_off) = (pf + (b0 * n) as u64 * sz, pg + (b0 * m) as u64 * sz);
            let p_off = pp + (b0 * gx) as u64 * 8;
            let cfg = LaunchConfig {
                grid_dim: (gx as u32, cnt as u32, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = self.inner.stream.launch_builder(&func);
            b.arg(&c_off)
                .arg(&stride)
                .arg(&f_off)
                .arg(&g_off)
                .arg(&p_off)
                .arg(&ni)
                .arg(&mi)
                .arg(&ri)
                .arg(&eps);
            unsafe { b.launch(cfg) }.map_err(|e| cuda_err("launching transport_cost", e))?;
            b0 += cnt;
        }
        let host = self
            .inner
            .stream
            .clone_dtoh(&partial)
            .map_err(|e| cuda_err("reading transport costs", e))?;
        Ok((0..batch)
            .map(|b| T::of(host[b * gx..(b + 1) * gx].iter().sum()))
            .collect())
    }

    fn plan(
        &self,
        cost: &CudaCost<T>,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<CudaBuffer<T>> {
        if let Some(cl) = &cost.cloud {
            return self.cloud_plan(cl, f, g, eps);
        }
        if cost.grid.is_some() {
            return Err(Error::Unavailable(
                "plan: dense plans of grid costs are not available on the CUDA backend (use the CPU backend, or GridCost::to_dense for a small grid)".into(),
            ));
        }
        let dims = cost.dims;
        let batch = check_fg(&dims, f, g)?;
        let total = batch
            .checked_mul(dims.n)
            .and_then(|v| v.checked_mul(dims.m))
            .ok_or_else(|| Error::shape("plan", "B×n×m overflows"))?;
        let p = self.alloc::<T>(total, "the plans")?;
        let func = self.func(&format!("plan_{}", T::SUFFIX))?.clone();
        let stride = if dims.batch.is_some() {
            (dims.n * dims.m) as i64
        } else {
            0i64
        };
        let (pc, pf, pg, pp) = (
            self.ptr(&cost.c),
            self.ptr(&f.data),
            self.ptr(&g.data),
            self.ptr(&p),
        );
        let (bi, ni, mi) = (to_i32(batch, "batch")?, dims.n as i32, dims.m as i32);
        let blocks = total.div_ceil(256).min(self.inner.sm_count * 32) as u32;
        let mut b = self.inner.stream.launch_builder(&func);
        b.arg(&pc)
            .arg(&stride)
            .arg(&pf)
            .arg(&pg)
            .arg(&pp)
            .arg(&bi)
            .arg(&ni)
            .arg(&mi)
            .arg(&eps);
        unsafe { b.launch(cfg1(blocks, 256, 0)) }.map_err(|e| cuda_err("launching plan", e))?;
        Ok(CudaBuffer {
            data: p,
            len: total,
        })
    }
}

fn check_fg<T>(dims: &CostDims, f: &CudaBuffer<T>, g: &CudaBuffer<T>) -> Result<usize> {
    let batch = batch_of(f.len, dims.n, "f")?;
    if g.len != batch * dims.m {
        return Err(Error::shape(
            "g",
            format!(
                "length {} does not fit {batch} problems of {} target points",
                g.len, dims.m
            ),
        ));
    }
    check_cost_batch(dims, batch)?;
    Ok(batch)
}
