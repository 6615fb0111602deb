//! Point-cloud costs on the GPU (kernels in `cuda/pointcloud.cu`): the cost is formed in
//! registers from the two clouds, never stored, so GPU memory is `O((n + m)·d)` at every
//! dimension.
//!
//! This file holds the uploaded clouds ([`CudaCloud`]) and the
//! [`PointCloudKernels`](crate::backend::PointCloudKernels) entry points; `step.rs` the
//! half-steps, `rows.rs` the plan-weighted row sums (costs, gradients, `P·V`, the plan),
//! `tensor.rs` the tensor-core operands of f32 clouds above 16 dimensions.
//!
//! What runs where:
//! * `d ≤ 16` (`PC_DMAX`):
//!   - Half-step: a block of 256 threads owns 1024 outputs (f32, `d ≤ 4`; 512 in f64 and
//!     for `d ≤ 16`), streams the reduced cloud through shared memory in stages of 128
//!     points and folds chunks of 8 arguments into a running (shift, sum) whose shift is
//!     raised only when a chunk's sum passes 2^64. Two forms of the exponent, chosen per
//!     call by [`CloudForm::choose`]: the exact difference form `Σ_t (x_t − y_t)²`, or (f32,
//!     `|x − y|²`, where the rounding bound of [`CloudForm::norm_error_bound`] allows) the
//!     norm form `q_k + Σ_t x'_t·y_t` with `q_k = s·(other_k − |y_k|²)` per stage and the
//!     row term `−s·|x_l|²` taken out of the log-sum-exp: `d` FMAs per pair (at d = 3 and
//!     4, split-f16 MMAs instead, `pc_sinkstep_tn`: 512 outputs a block, stages of 1024
//!     reduced points at d = 3 and 512 at d = 4 copied in by `cp.async`, an exponential and
//!     an add a pair). When the grid is short of a few waves the reduction is split so that the last wave is nearly full
//!     ([`wave_split`], from the kernel's occupancy).
//!   - Plan-weighted row sums (transport cost, point gradients, `P·V` with at most 16
//!     channels): one output per thread, the whole reduction per block.
//! * At every `d`, the two clouds are centred on their common mean when the cost is
//!   prepared, on the device from row-major points (host arrays uploaded as they are, or
//!   the caller's buffers: [`CudaBackend::buffer_cloud`]): the mean per pair and coordinate
//!   summed in f64 (`pc_coord_stats`, with the range and the non-finite count that the
//!   input checks and the ε-scaling's largest cost need), the difference taken in f64 and
//!   transposed to structure-of-arrays (`pc_centre_soa`), and the largest squared norms
//!   (`pc_cloud_radii`, f64) read back for [`CloudForm::choose`]. A translation changes no
//!   cost, and it keeps `|x|² + |y|² − 2·x·y` from cancelling the digits of clouds far from
//!   the origin.
//! * `d > 16`, dot-product form: the squared norms are computed on the device
//!   (`pc_sqnorms`); then
//!   `c = max(|x|² + |y|² − 2·x·y, 0)` (its square root for [`PointMetric::Euclidean`]).
//!   - Half-step (`pc_sinkstep_dn`): a block of 16×16 threads owns 64 outputs and streams
//!     tiles of 64 reduced points; the cross term is accumulated over `d` in chunks of 16
//!     coordinates staged in shared memory, each thread holding a 4×4 register tile of
//!     exact FP32/FP64 FMA products (`pc_dot_tile`), then folded into the same online
//!     base-2 (max, sum) as the small-d kernels; the 16 threads of a row merge their pairs
//!     by shuffles. Memory: the clouds, two norm vectors, and the split partials. This is
//!     the f64 kernel, and the f32 one for [`CrossPrecision::Exact`].
//!   - Half-step on tensor cores (`pc_sinkstep_tc`, `_tc3`, `_h`, `_h2`; f32 with
//!     [`CrossPrecision::Tf32`], [`CrossPrecision::Tf32x3`], [`CrossPrecision::F16`] or
//!     [`CrossPrecision::F16x2`], the default): when the cost is prepared, `pc_tc_split`
//!     writes both clouds point-major as 32-bit words, padded to a multiple of 32 words:
//!     TF32 roundings (one coordinate a word), or f16 pairs of the coordinates times a power
//!     of two per cloud that takes its largest |coordinate| (`pc_cloud_radii`) into
//!     (2^13, 2^14]; the split modes add the rounding of the remainder (extra memory
//!     `(n + m)·dp` words per part). A block of 8 warps owns 128 outputs; the warps
//!     compute dot products by `mma.m16n8k8` TF32 or `mma.m16n8k16` f16 fragments loaded
//!     by `ldmatrix` (three MMAs per tile for the split modes, summed from zero over each 16
//!     words and then added in f32, as the MMA's own sums truncate), from chunks of 32
//!     words copied by `cp.async` into two shared slots (three for single products on a
//!     resident tile: each step then needs one barrier). When the output tile takes at most
//!     64 KiB it stays resident for the whole reduction: stages of 64 reduced points, 32×32
//!     products per warp, two blocks per SM; else it is streamed like the reduced tile
//!     (`_stream`), one block per SM: stages of 128 and 64×32 products per warp with split
//!     products; with single ones stages of 256 and 64×64 (100 KiB, so that each operand
//!     byte streamed through L2 feeds more products), or 128 and 64×32 on a GPU with less
//!     shared memory (compiled in as the backend starts: `tc_stream_stage`). The epilogue
//!     folds `s·(other_k − |q_k|²) + 2s·p·q` (one FMA, with the operands' scales undone in
//!     `s`; the row's `|p|²` leaves the LSE) into per-row (max, sum) pairs, merged across
//!     the lanes of a group by shuffles and across the column warps through shared memory.
//!     Resident tiles with single products (F16, TF32) and `|x − y|²` take no maximum: each
//!     stage's products start from the row's shift (the first MMA's C operand) and the
//!     shifts are raised lazily, one test per stage, so that a pair costs an FMA, an
//!     exponential and an add. Same outputs and split partials as `pc_sinkstep_dn`.
//!   - On Hopper (the kernels compiled for `sm_90a`), F16, TF32 and F16x2 with
//!     `|x − y|²` and a resident output tile run `pc_sinkstep_hw`, `_tcw` and `_h2w`
//!     instead of `_h`, `_tc` and `_h2`: two warpgroups of a block each multiply their 64
//!     rows by a stage of 64 reduced points with asynchronous warpgroup MMAs
//!     (`wgmma.mma_async`) that read both tiles from shared memory (K-major, 128-byte
//!     swizzling), so no fragment loads or per-tile MMA instructions take issue slots from
//!     the epilogue; F16x2 sums the three products of each 32 coordinates from zero and
//!     adds them in f32, as `_h2` does; the lazy epilogue (`pc_lazy_fold`) follows for all.
//!     F16 and TF32 with a streamed tile run `_hw_stream` and `_tcw_stream`: 64×256
//!     products a warpgroup (stages of 256 reduced points), both tiles copied by chunks of
//!     128 bytes a point through four slots, one chunk's MMAs in flight over the next
//!     chunk's barrier, the same lazy epilogue
//!     ([`Tuning::warpgroup_mma`](super::Tuning::warpgroup_mma)).
//!   - Row sums (`pc_rows_dn`), for `d > 16` or more than 16 `plan_apply` channels (then
//!     at any `d`, in the exact difference form below 17 dimensions): two passes. A
//!     half-step with zero log-marginals gives `h_l = −ε·LSE_k((other_k − c_lk)/ε)`, so
//!     the weights `exp((other_k − c_lk + h_l)/ε)` of a row sum to one and
//!     `P_lk = exp((own_l − h_l)/ε)·w_lk` (`h` always by exact products, as the weights,
//!     so that they sum to one whatever the solver's precision); then one block per 64
//!     outputs and 64 channels
//!     (grid z over channel tiles, the cost recomputed per tile) stages each tile of
//!     weights in shared memory and multiplies it by the values (`P·V`) or the
//!     displacements (point gradients). Any channel count is handled; extra memory
//!     `O(B·len)` for `h`.
//! * In both families, when the grid alone would leave SMs idle the reduction of a
//!   half-step is split across blocks and merged by `sinkstep_finish` (cuda/sinkstep.cu).
//! * The point gradients reweighted by an adjoint (`pc_adjoint`, for
//!   [`crate::SinkhornSolver::transport_point_gradients`]): kernels of their own beside `pc_rows`,
//!   `d ≤ 16` only (beyond, [`Error::Unavailable`]: use the CPU backend).
//! * Dense plans (`pc_plan`, difference form, any `d`) only up to `2^27` entries.
//! * Batched clouds ([`PointCloudCost::batched`]): the `B` pairs are stored one after the
//!   other (each centred on its own mean; norms and tensor-core operands likewise), and every
//!   kernel, whose grid already has the problems along `y`, moves its cloud pointers to its
//!   problem's pair (`pair = 1`; 0 for a shared pair: `PC_PAIR` in cuda/pointcloud.cu).

use super::tiled::TiledArgs;
use crate::backend::cuda::runtime::device::{CudaBackend, CudaBuffer};
use crate::backend::cuda::runtime::kernels::{
    define, kernel_name, tc_smem, CudaReal, Module, Precision, PC_TC_BKS, PC_TC_BL, PC_TC_DC,
};
use crate::backend::cuda::runtime::launch::{to_i32, Context, Launch};
use crate::backend::cuda::runtime::tuning::CloudForm;
use crate::backend::shape::{check_fg, check_sinkstep};
use crate::backend::CrossPrecision;
use crate::backend::{
    batch_of, CloudLayout, CostDims, PointCloudCost, PointCloudKernels, PointMetric, Side,
};
use crate::{Error, Result};
use cudarc::driver::CudaSlice;

mod rows;
mod step;
mod tensor;

use rows::RowSums;
use tensor::{f16_scale, CrossKernel, TcOperands};

/// Threads per block of the point-cloud kernels.
const PC_BLOCK: usize = define(Module::PointCloud.text(), "PC_BLOCK");
/// Reduced points per shared-memory stage.
const PC_KT: usize = define(Module::PointCloud.text(), "PC_KT");
/// Row tiles of 16 outputs per warp of the d = 3, 4 MMA half-step (`pc_sinkstep_tn`).
const PC_TN_R: usize = define(Module::PointCloud.text(), "PC_TN_R");
/// Reduced points per stage of `pc_sinkstep_tn` at d = 4 (2·`PC_TN_KT` is the shortest
/// slice `fill_split` makes).
const PC_TN_KT: usize = define(Module::PointCloud.text(), "PC_TN_KT");
/// Reduced points per stage of `pc_sinkstep_tn` at d = 3.
const PC_TN_KT3: usize = define(Module::PointCloud.text(), "PC_TN_KT3");
/// Largest dimension and number of `plan_apply` channels the kernels are compiled for.
const PC_DMAX: usize = define(Module::PointCloud.text(), "PC_DMAX");
/// Output points per block of the any-d kernels.
const PC_DN_TL: usize = define(Module::PointCloud.text(), "PC_DN_TL");
/// Reduced points per stage of the any-d half-step.
const PC_DN_TK: usize = define(Module::PointCloud.text(), "PC_DN_TK");
/// Coordinates per shared-memory chunk of the any-d cross term.
const PC_DN_DC: usize = define(Module::PointCloud.text(), "PC_DN_DC");
/// Reduced points per stage of the any-d row sums.
const PC_DN_RTK: usize = define(Module::PointCloud.text(), "PC_DN_RTK");
/// Value channels per block of the any-d row sums.
const PC_DN_CC: usize = define(Module::PointCloud.text(), "PC_DN_CC");
/// Reduced points per stage of the tensor-core half-step with a resident output tile.
const PC_TC_BK: usize = define(Module::PointCloud.text(), "PC_TC_BK");
/// Slots of reduced chunks (and of stages' column terms) of the tensor-core half-step with
/// single products and a resident output tile (two in the other kernels).
const PC_TC_RSLOTS: usize = define(Module::PointCloud.text(), "PC_TC_RSLOTS");
/// Largest shared tile of output points the tensor-core half-step keeps for a whole
/// reduction (both parts), in bytes; larger tiles are streamed by chunks. With the two
/// slots of reduced chunks this keeps two blocks on an SM.
const TC_RESIDENT_BYTES: usize = 64 * 1024;
/// Reduced points per stage of the half-steps by warpgroup MMAs with a resident output tile
/// (`pc_sinkstep_hw`, `_tcw`, `_h2w`).
const PC_WG_BK: usize = define(Module::PointCloud.text(), "PC_WG_BK");
/// Stages in flight (shared slots) of `pc_sinkstep_hw`, `_tcw` and `_h2w`.
const PC_WG_SLOTS: usize = define(Module::PointCloud.text(), "PC_WG_SLOTS");
/// Most 128-byte blocks (64 f16 or 32 TF32 coordinates) of a point's parts in
/// `pc_sinkstep_hw`, `_tcw` and `_h2w` (four of one part, or two of each of F16x2's two).
const PC_WG_KB_MAX: usize = define(Module::PointCloud.text(), "PC_WG_KB_MAX");
/// Reduced points per stage of the half-steps by warpgroup MMAs with a streamed output tile
/// (`pc_sinkstep_hw_stream`, `_tcw_stream`).
const PC_WGS_BK: usize = define(Module::PointCloud.text(), "PC_WGS_BK");
/// Chunk slots (128 bytes of each output and reduced point) of `pc_sinkstep_hw_stream` and
/// `_tcw_stream`.
const PC_WGS_SLOTS: usize = define(Module::PointCloud.text(), "PC_WGS_SLOTS");

/// Two clouds in GPU memory as structure-of-arrays (`x[t·n + i]`, `y[t·m + j]`), or `B`
/// such pairs one after the other (batched clouds: `x[b·n·d + t·n + i]`).
pub(in crate::backend::cuda) struct CudaCloud<T> {
    pub n: usize,
    pub m: usize,
    d: usize,
    /// `Some(B)` for one pair per problem (`B` fits the launch grid's `u32`).
    batch: Option<u32>,
    /// The Euclidean distance (else its square).
    root: bool,
    x: CudaSlice<T>,
    y: CudaSlice<T>,
    /// `(|x_i|², |y_j|²)` of the centred clouds, for `d > PC_DMAX` (the dot-product form).
    norms: Option<(CudaSlice<T>, CudaSlice<T>)>,
    /// The tensor-core operands of the half-step, where [`CrossKernel::of`] picks one.
    tc: Option<TcOperands<T>>,
    /// `(max_i |x_i|², max_j |y_j|²)` of the centred clouds (as stored), which bound the
    /// rounding error of the small-d norm form ([`CloudForm`]).
    sq_radii: (f64, f64),
    /// f32 clouds: the points as given, row-major (`x[(b·n + i)·d + t]`), for the plan
    /// report's exact costs ([`CudaBackend::cloud_plan_report`]); `None` in f64, where the
    /// half-steps' costs are exact to far below any tolerance, and with the single-product
    /// cross terms ([`CrossPrecision::Tf32`], [`CrossPrecision::F16`]), whose potentials
    /// are those of the cost they form.
    given: Option<Box<(CudaSlice<T>, CudaSlice<T>)>>,
}

impl<T> CudaCloud<T> {
    pub(in crate::backend::cuda) fn dims(&self) -> CostDims {
        CostDims {
            n: self.n,
            m: self.m,
            batch: self.batch.map(|b| b as usize),
        }
    }

    /// The kernels' `pair` argument: 1 when each problem has its own pair of clouds.
    pub(in crate::backend::cuda) fn pair(&self) -> i32 {
        self.batch.is_some() as i32
    }

    /// The points as given (row-major), the dimension and whether the metric is the
    /// Euclidean distance: what the plan report of f32 clouds evaluates its costs from
    /// (`None` in f64).
    pub(in crate::backend::cuda) fn given(
        &self,
    ) -> Option<(&CudaSlice<T>, &CudaSlice<T>, usize, bool)> {
        self.given
            .as_deref()
            .map(|(x, y)| (x, y, self.d, self.root))
    }

    /// `(output cloud, its length, reduced cloud, its length)` of a half-step on `side`.
    fn sides(&self, side: Side) -> (&CudaSlice<T>, usize, &CudaSlice<T>, usize) {
        match side {
            Side::Col => (&self.y, self.m, &self.x, self.n),
            Side::Row => (&self.x, self.n, &self.y, self.m),
        }
    }

    /// `(output norms, reduced norms)` of a half-step on `side` (any-d clouds only).
    fn side_norms(&self, side: Side) -> Option<(&CudaSlice<T>, &CudaSlice<T>)> {
        self.norms.as_ref().map(|(xn, yn)| match side {
            Side::Col => (yn, xn),
            Side::Row => (xn, yn),
        })
    }
}

impl<T: CudaReal> CudaCloud<T> {
    /// How the small-d half-step forms its exponents at this `eps` (`None` above
    /// `PC_DMAX`, where the any-d kernels run).
    pub(in crate::backend::cuda) fn form(&self, eps: T) -> Option<CloudForm> {
        (self.d <= PC_DMAX).then(|| {
            CloudForm::choose(
                T::PRECISION == Precision::F32,
                self.root,
                self.d,
                self.sq_radii.0,
                self.sq_radii.1,
                eps.f64(),
            )
        })
    }

    /// The factor that turns coordinates into ones whose squared (or plain) distance is
    /// `c·log2(e)/ε`.
    fn scale(&self, eps: T) -> T {
        let s = exponent_scale(eps.f64());
        T::of(if self.root { s } else { s.sqrt() })
    }

    /// The power of two `2^a` by which `pc_sinkstep_tn` scales its f16 operands on `side`:
    /// the output cloud enters as `2s·x/2^a`, the reduced one as `y·2^a` (their products
    /// unchanged). See [`f16_balance`].
    fn f16_balance(&self, side: Side, eps: T) -> T {
        let (out, red) = match side {
            Side::Row => self.sq_radii,
            Side::Col => (self.sq_radii.1, self.sq_radii.0),
        };
        T::of(f16_balance(
            2.0 * exponent_scale(eps.f64()) * out.sqrt(),
            red.sqrt(),
        ))
    }
}

/// `s = log2(e)/ε`: the kernels take exponents in base 2, `c·s` for a cost `c`.
fn exponent_scale(eps: f64) -> f64 {
    std::f64::consts::LOG2_E / eps
}

/// `2^a` for operands of largest magnitudes `x` (divided by it) and `y` (multiplied): the
/// integer `a` nearest `log2(x/y)/2`, so that both come out near `√(x·y)`, moved where
/// one would exceed 2^14 (f16's largest value is 65504), and within ±100. Both are at most
/// 2^14 whenever `x·y ≤ 2^27`; the norm form's error bound ([`CloudForm::choose`]) keeps
/// `2s·|x|·|y|` below 2^9.
pub(in crate::backend::cuda) fn f16_balance(x: f64, y: f64) -> f64 {
    let log2 = |v: f64| (v > 0.0 && v.is_finite()).then(|| v.log2());
    let (lx, ly) = (log2(x), log2(y));
    let mut a = match (lx, ly) {
        (Some(lx), Some(ly)) => (0.5 * (lx - ly)).round(),
        _ => 0.0,
    };
    // x/2^a ≤ 2^14 and y·2^a ≤ 2^14 (the upper limit wins when the two conflict).
    if let Some(lx) = lx {
        a = a.max((lx - 14.0).ceil());
    }
    if let Some(ly) = ly {
        a = a.min((14.0 - ly).floor());
    }
    a.clamp(-100.0, 100.0).exp2()
}

/// Kernel family for dimension `d`: (base name, compiled maximum dimension), or `None`
/// above `PC_DMAX` (the any-d kernels). With `exact`, each d ≤ 4 has an entry point of its
/// own (the half-steps).
fn by_dim(prefix: &str, d: usize, exact: bool) -> Option<(String, usize)> {
    match d {
        1..=4 if exact => Some((format!("{prefix}_d{d}"), d)),
        1..=4 => Some((format!("{prefix}_d4"), 4)),
        5..=PC_DMAX => Some((format!("{prefix}_d{PC_DMAX}"), PC_DMAX)),
        _ => None,
    }
}

impl CudaBackend {
    /// Upload two clouds (the cost itself is never formed): their points row-major, then
    /// the steps of [`CudaBackend::buffer_cloud`] on the device.
    pub(in crate::backend::cuda) fn upload_cloud<T: CudaReal>(
        &self,
        p: &PointCloudCost<'_, T>,
    ) -> Result<CudaCloud<T>> {
        let layout = CloudLayout {
            n: p.n(),
            m: p.m(),
            d: p.dim(),
            batch: p.batch(),
            metric: p.metric(),
            precision: p.precision(),
        };
        // Row-major views are uploaded as they are; others through a contiguous copy.
        fn rows<T: Copy>(a: ndarray::ArrayView3<'_, T>) -> std::borrow::Cow<'_, [T]> {
            match a.to_slice() {
                Some(s) => std::borrow::Cow::Borrowed(s),
                None => std::borrow::Cow::Owned(a.iter().copied().collect()),
            }
        }
        let x = self.upload_slice(&rows(p.x()), "the points x")?;
        let y = self.upload_slice(&rows(p.y()), "the points y")?;
        // (Checked finite by PointCloudCost's constructors: the statistics stay on the
        // device, only the means are used.)
        let (_, mean) = self.cloud_coord_stats(&x, &y, layout)?;
        self.centred_cloud(&x, &y, &mean, layout)
    }

    /// A point-cloud cost from two buffers of row-major points (the caller's memory: only
    /// read), checked as [`PointCloudCost`]'s constructors check host arrays (the same
    /// errors; the buffers are downloaded only when one must name a non-finite entry), and
    /// its [`PointCloudCost::max_cost`]. Per pair and coordinate, one reduction gives the
    /// sum (f64), the range and the non-finite count (`4·B·d` numbers read back, with the
    /// mean left on the device); then as [`CudaBackend::upload_cloud`].
    pub(in crate::backend::cuda) fn buffer_cloud<T: CudaReal>(
        &self,
        x: &CudaBuffer<T>,
        y: &CudaBuffer<T>,
        layout: CloudLayout,
    ) -> Result<(CudaCloud<T>, f64)> {
        layout.check(x.len, y.len)?;
        let (stats, mean) = self.cloud_coord_stats(&x.data, &y.data, layout)?;
        let stats = self.download_slice(
            &stats,
            4 * layout.pairs() * layout.d,
            "the clouds' coordinate statistics",
        )?;
        if stats.chunks(4).any(|s| s[3] > 0.0) {
            let (xh, yh) = (
                self.download_slice(&x.data, x.len, "the points x")?,
                self.download_slice(&y.data, y.len, "the points y")?,
            );
            layout.cost(&xh, &yh)?;
            return Err(Error::Numerical(
                "a non-finite coordinate on the device was not found on the host".into(),
            ));
        }
        let d = layout.d;
        let boxes = stats
            .chunks(4 * d)
            .map(|pair| pair.chunks(4).map(|s| (s[1], s[2])).collect::<Vec<_>>());
        let max_cost = crate::cost::box_cost(layout.metric, boxes);
        Ok((
            self.centred_cloud(&x.data, &y.data, &mean, layout)?,
            max_cost,
        ))
    }

    /// Per pair `b` and coordinate `t` of row-major clouds, over the `n + m` points of the
    /// pair (`pc_coord_stats`): `(Σ, min, max, non-finite count)` (`4·B·d` f64) and the
    /// means `Σ/(n + m)` (`B·d`, f64), both left on the device.
    fn cloud_coord_stats<T: CudaReal>(
        &self,
        x: &CudaSlice<T>,
        y: &CudaSlice<T>,
        layout: CloudLayout,
    ) -> Result<(CudaSlice<f64>, CudaSlice<f64>)> {
        let (n, m, d, pairs) = (layout.n, layout.m, layout.d, layout.pairs());
        let grid = (
            u32::try_from(to_i32(d, "x")?).unwrap_or(u32::MAX),
            u32::try_from(pairs)
                .ok()
                .filter(|&p| p <= 65535)
                .ok_or_else(|| {
                    Error::shape("x", format!("{pairs} pairs of clouds are too many"))
                })?,
            1,
        );
        let stats = self.alloc_f64(4 * pairs * d, "the clouds' coordinate statistics")?;
        let mean = self.alloc_f64(pairs * d, "the clouds' means")?;
        // SAFETY: pc_coord_stats(x, y, out, mean, n, m, d): block (t, b) reads coordinate t
        // of the n points of x[b] and the m of y[b] (pairs·n·d and pairs·m·d entries), writes
        // out[4(b·d + t) .. + 4) and mean[b·d + t].
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_coord_stats"),
                Launch::new(grid, (256, 1, 1)),
                (
                    self.ptr(x),
                    self.ptr(y),
                    self.ptr(&stats),
                    self.ptr(&mean),
                    to_i32(n, "x")?,
                    to_i32(m, "y")?,
                    to_i32(d, "x")?,
                ),
            )
        }?;
        Ok((stats, mean))
    }

    /// The prepared cloud of row-major `x`, `y` less their per-pair means `mean` (`B×d`,
    /// f64): centred and transposed to structure-of-arrays (`pc_centre_soa`), the largest
    /// squared norms and coordinates read back (`pc_cloud_radii`, `4·B` numbers), the norms
    /// (`d > PC_DMAX`)
    /// and the tensor-core operands (where [`CrossKernel::of`] picks one).
    fn centred_cloud<T: CudaReal>(
        &self,
        x_rows: &CudaSlice<T>,
        y_rows: &CudaSlice<T>,
        mean: &CudaSlice<f64>,
        layout: CloudLayout,
    ) -> Result<CudaCloud<T>> {
        let (n, m, d, pairs) = (layout.n, layout.m, layout.d, layout.pairs());
        to_i32(n, "x")?;
        to_i32(m, "y")?;
        to_i32(d, "x")?;
        to_i32(pairs, "x")?;
        let any_d = d > PC_DMAX;
        // Centred at every d (each pair on its own mean): the any-d kernels and the small-d
        // norm form need it, and it changes no cost.
        let x = self.centre_soa(x_rows, mean, n, d, pairs, "the points x")?;
        let y = self.centre_soa(y_rows, mean, m, d, pairs, "the points y")?;
        // The largest |p|² and |p_t| of x and of y over the pairs (`pc_cloud_radii`, one
        // launch and one download): the squared radii choose the small-d form, the largest
        // coordinates scale f16 operands.
        let radii = self.alloc_f64(4 * pairs, "the clouds' radii")?;
        let grid = (pairs as u32, 2, 1);
        // SAFETY: pc_cloud_radii(x, y, out, n, m, d): block (b, c) reads the n·d (c = 0) or
        // m·d coordinates of cloud b of x or y (pairs clouds each) and writes
        // out[2(c·pairs + b)] and the entry after it, in 4·pairs.
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_cloud_radii"),
                Launch::new(grid, (256, 1, 1)),
                (
                    self.ptr(&x),
                    self.ptr(&y),
                    self.ptr(&radii),
                    n as i32,
                    m as i32,
                    d as i32,
                ),
            )
        }?;
        let radii = self.download_slice(&radii, 4 * pairs, "the clouds' radii")?;
        // Entry e (0: |p|², 1: |p_t|) of cloud c (0: x, 1: y), the largest over the pairs.
        let largest = |c: usize, e: usize| {
            radii[c * 2 * pairs..(c + 1) * 2 * pairs]
                .iter()
                .skip(e)
                .step_by(2)
                .fold(0.0, |a: f64, &v| a.max(v))
        };
        let sq_radii = (largest(0, 0), largest(1, 0));
        let norms = if any_d {
            Some((
                self.cloud_sqnorms(&x, n, d, pairs, "the norms of x")?,
                self.cloud_sqnorms(&y, m, d, pairs, "the norms of y")?,
            ))
        } else {
            None
        };
        // Kept for the exact report unless the half-steps use a single tensor-core product
        // (TF32, F16): their costs move by about 2^-10·|x||y|, so their potentials are those
        // of that cost and are reported against it.
        let single_product =
            any_d && matches!(layout.precision, CrossPrecision::Tf32 | CrossPrecision::F16);
        let given = if T::PRECISION == Precision::F32 && !single_product {
            let copy = |s: &CudaSlice<T>, what: &str| {
                self.stream
                    .clone_dtod(s)
                    .with_context(|| format!("copying {what} on the GPU"))
            };
            Some(Box::new((
                copy(x_rows, "the points x")?,
                copy(y_rows, "the points y")?,
            )))
        } else {
            None
        };
        let tc = match CrossKernel::of(layout.precision, T::PRECISION, d) {
            CrossKernel::Fma => None,
            kernel => {
                let dp = kernel.words(d);
                // f16 operands: each cloud scaled by a power of two into f16's range.
                let (sx, sy) = if kernel.half() {
                    (f16_scale(largest(0, 1)), f16_scale(largest(1, 1)))
                } else {
                    (1.0, 1.0)
                };
                let op = (kernel, dp);
                Some(TcOperands {
                    kernel,
                    dp,
                    dot_scale: T::of(1.0 / (sx * sy)),
                    x: self.tc_split(&x, (n, pairs), d, op, T::of(sx), "the operands of x")?,
                    y: self.tc_split(&y, (m, pairs), d, op, T::of(sy), "the operands of y")?,
                })
            }
        };
        Ok(CudaCloud {
            n,
            m,
            d,
            batch: layout.batch.map(|_| pairs as u32),
            root: layout.metric == PointMetric::Euclidean,
            x,
            y,
            norms,
            tc,
            sq_radii,
            given,
        })
    }

    /// `pairs` row-major clouds of `len` points less their pair's mean, structure-of-arrays
    /// (`pc_centre_soa`).
    fn centre_soa<T: CudaReal>(
        &self,
        rows: &CudaSlice<T>,
        mean: &CudaSlice<f64>,
        len: usize,
        d: usize,
        pairs: usize,
        what: &str,
    ) -> Result<CudaSlice<T>> {
        let total = len * d * pairs;
        let out = self.alloc::<T>(total, what)?;
        let blocks = self.stride_blocks(total, 256, 8);
        // SAFETY: pc_centre_soa(pts, mean, out, len, d, B) reads B·len·d points and B·d
        // means, writes B·len·d coordinates.
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_centre_soa"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(rows),
                    self.ptr(mean),
                    self.ptr(&out),
                    len as i32,
                    d as i32,
                    pairs as i32,
                ),
            )
        }?;
        Ok(out)
    }

    /// `|p|²` of each of the `len` points of `pairs` structure-of-arrays clouds stored one
    /// after the other (`pc_sqnorms`).
    fn cloud_sqnorms<T: CudaReal>(
        &self,
        pts: &CudaSlice<T>,
        len: usize,
        d: usize,
        pairs: usize,
        what: &str,
    ) -> Result<CudaSlice<T>> {
        let total = len * pairs;
        let out = self.alloc::<T>(total, what)?;
        let blocks = self.stride_blocks(total, 256, 8);
        // SAFETY: pc_sqnorms(pts, out, len, d, B) reads B·len·d coordinates, writes B·len
        // norms.
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_sqnorms"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(pts),
                    self.ptr(&out),
                    to_i32(len, "x")?,
                    to_i32(d, "x")?,
                    to_i32(pairs, "x")?,
                ),
            )
        }?;
        Ok(out)
    }
}

impl<T: CudaReal> PointCloudKernels<T> for CudaBackend {
    fn point_gradient(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<(CudaBuffer<T>, CudaBuffer<T>)> {
        let cl = cost.cloud("point_gradient")?;
        self.cloud_rows(cl, side, f, g, eps, RowSums::Gradient)
    }

    fn plan_apply(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
        values: &CudaBuffer<T>,
        k: usize,
    ) -> Result<CudaBuffer<T>> {
        let cl = cost.cloud("plan_apply")?;
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
        Ok(self.cloud_rows(cl, side, f, g, eps, sums)?.1)
    }

    fn cost_marginals(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
    ) -> Result<(CudaBuffer<T>, CudaBuffer<T>)> {
        let cl = cost.cloud("cost_marginals")?;
        self.cloud_rows(cl, side, f, g, eps, RowSums::Cost)
    }

    fn adjoint_point_gradient(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &CudaBuffer<T>,
        g: &CudaBuffer<T>,
        eps: T,
        a: &CudaBuffer<T>,
        b: &CudaBuffer<T>,
        alpha: T,
    ) -> Result<CudaBuffer<T>> {
        let cl = cost.cloud("adjoint_point_gradient")?;
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
        Ok(self.cloud_rows(cl, side, f, g, eps, sums)?.1)
    }
}
