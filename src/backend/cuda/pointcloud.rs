//! Point-cloud costs on the GPU (kernels in `cuda/pointcloud.cu`): the cost is formed in
//! registers from the two clouds, never stored, so GPU memory is `O((n + m)·d)` at every
//! dimension.
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
//!     row term `−s·|x_l|²` taken out of the log-sum-exp: `d` FMAs per pair. When the grid
//!     is short of a few waves the reduction is split so that the last wave is nearly full
//!     ([`wave_split`], from the kernel's occupancy).
//!   - Plan-weighted row sums (transport cost, point gradients, `P·V` with at most 16
//!     channels): one output per thread, the whole reduction per block.
//! * At every `d`, the two clouds are centred on their common mean when the cost is
//!   prepared (computed in f64 on the host; a translation changes no cost, and it keeps
//!   `|x|² + |y|² − 2·x·y` from cancelling the digits of clouds far from the origin).
//! * `d > 16`, dot-product form: the squared norms are computed on the device
//!   (`pc_sqnorms`); then
//!   `c = max(|x|² + |y|² − 2·x·y, 0)` (its square root for [`PointMetric::Euclidean`]).
//!   - Half-step (`pc_sinkstep_dn`): a block of 16×16 threads owns 64 outputs and streams
//!     tiles of 64 reduced points; the cross term is accumulated over `d` in chunks of 16
//!     coordinates staged in shared memory, each thread holding a 4×4 register tile of
//!     exact FP32/FP64 FMA products (`pc_dot_tile`), then folded into the same online
//!     base-2 (max, sum) as the small-d kernels; the 16 threads of a row merge their pairs
//!     by shuffles. Memory: the clouds, two norm vectors, and the split partials. This is
//!     the f64 kernel, and the f32 one for [`CrossPrecision::Exact`], the default.
//!   - Half-step on tensor cores (`pc_sinkstep_tc`, `pc_sinkstep_tc3`; f32 with
//!     [`CrossPrecision::Tf32`] or [`CrossPrecision::Tf32x3`]): when the cost
//!     is prepared, `pc_tc_split` writes both clouds point-major, padded to a multiple of
//!     32 coordinates, rounded to TF32 (and, for TF32x3, the TF32 rounding of the
//!     remainder: extra memory `(n + m)·dp` floats per part). A block of 8 warps owns 128
//!     outputs and streams stages of 128 reduced points; each warp computes a 64×32 block
//!     of dot products by `mma.m16n8k8` TF32 fragments (three MMAs per tile for TF32x3),
//!     from chunks of 32 coordinates copied by `cp.async` into two shared slots (the output
//!     tile stays resident for the whole reduction when it takes ≤ 96 KiB). The epilogue
//!     folds `s·(other_k − |q_k|²) + 2s·p·q` (one FMA; the row's `|p|²` leaves the LSE) into
//!     per-row (max, sum) pairs, merged across the lanes of a group by shuffles and across
//!     the 4 column warps through shared memory. Same outputs and split partials as
//!     `pc_sinkstep_dn`.
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
//!   [`crate::Solver::transport_point_gradients`]): kernels of their own beside `pc_rows`,
//!   `d ≤ 16` only (beyond, [`Error::Unavailable`]: use the CPU backend).
//! * Dense plans (`pc_plan`, difference form, any `d`) only up to `2^27` entries.

use super::cost::{CostKind, CudaCost};
use super::device::{CudaBackend, CudaBuffer};
use super::kernels::{define, kernel_name, CudaReal, Module, Precision};
use super::launch::{to_i32, Launch};
use super::tiled::TiledArgs;
use super::tuning::CloudForm;
use crate::backend::shape::{check_fg, check_sinkstep};
use crate::backend::CrossPrecision;
use crate::backend::{batch_of, CostDims, PointCloudCost, PointCloudKernels, PointMetric, Side};
use crate::{Error, Real, Result};
use cudarc::driver::CudaSlice;

/// Threads per block of the point-cloud kernels.
const PC_BLOCK: usize = define(Module::PointCloud.source(), "PC_BLOCK");
/// Reduced points per shared-memory stage.
const PC_KT: usize = define(Module::PointCloud.source(), "PC_KT");
/// Largest dimension and number of `plan_apply` channels the kernels are compiled for.
const PC_DMAX: usize = define(Module::PointCloud.source(), "PC_DMAX");
/// Output points per block of the any-d kernels.
const PC_DN_TL: usize = define(Module::PointCloud.source(), "PC_DN_TL");
/// Reduced points per stage of the any-d half-step.
const PC_DN_TK: usize = define(Module::PointCloud.source(), "PC_DN_TK");
/// Coordinates per shared-memory chunk of the any-d cross term.
const PC_DN_DC: usize = define(Module::PointCloud.source(), "PC_DN_DC");
/// Reduced points per stage of the any-d row sums.
const PC_DN_RTK: usize = define(Module::PointCloud.source(), "PC_DN_RTK");
/// Value channels per block of the any-d row sums.
const PC_DN_CC: usize = define(Module::PointCloud.source(), "PC_DN_CC");
/// Output points per block of the tensor-core half-step.
const PC_TC_BL: usize = define(Module::PointCloud.source(), "PC_TC_BL");
/// Reduced points per stage of the tensor-core half-step.
const PC_TC_BK: usize = define(Module::PointCloud.source(), "PC_TC_BK");
/// Coordinates per shared chunk of the tensor-core operands (their padded dimension is a
/// multiple).
const PC_TC_DC: usize = define(Module::PointCloud.source(), "PC_TC_DC");
/// Largest shared tile of output points the tensor-core half-step keeps for a whole
/// reduction (both parts), in bytes; larger tiles are streamed by chunks.
const TC_RESIDENT_BYTES: usize = 96 * 1024;
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
    /// `(|x_i|², |y_j|²)` of the centred clouds, for `d > PC_DMAX` (the dot-product form).
    norms: Option<(CudaSlice<T>, CudaSlice<T>)>,
    /// The tensor-core operands of the half-step, where [`CrossKernel::of`] picks one.
    tc: Option<TcOperands<T>>,
    /// `(max_i |x_i|², max_j |y_j|²)` of the centred clouds (as stored), which bound the
    /// rounding error of the small-d norm form ([`CloudForm`]).
    sq_radii: (f64, f64),
}

/// How a half-step forms the cross term `x·y` of the dot-product form (`d > PC_DMAX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CrossKernel {
    /// Exact FMA products (`pc_sinkstep_dn`, f32 and f64).
    Fma,
    /// One TF32 MMA per product (`pc_sinkstep_tc`, f32).
    Tf32,
    /// Split TF32, three MMAs per product (`pc_sinkstep_tc3`, f32).
    Tf32x3,
}

impl CrossKernel {
    /// The kernel for a cloud of dimension `d` in precision `p` with the user's choice:
    /// tensor cores only for f32 above `PC_DMAX` dimensions (below, the exact difference
    /// form is cheap; f64 has no TF32 path).
    fn of(precision: CrossPrecision, p: Precision, d: usize) -> CrossKernel {
        if p != Precision::F32 || d <= PC_DMAX {
            return CrossKernel::Fma;
        }
        match precision {
            CrossPrecision::Exact => CrossKernel::Fma,
            CrossPrecision::Tf32 => CrossKernel::Tf32,
            CrossPrecision::Tf32x3 => CrossKernel::Tf32x3,
        }
    }
}

/// The two clouds as TF32 operands (`pc_tc_split`): point-major, `dp` coordinates per point
/// (`d` rounded up to `PC_TC_DC`, zero-padded), the TF32 rounding of each coordinate and,
/// for [`CrossKernel::Tf32x3`], the TF32 rounding of what it leaves.
pub(super) struct TcOperands<T> {
    kernel: CrossKernel,
    dp: usize,
    x: (CudaSlice<T>, Option<CudaSlice<T>>),
    y: (CudaSlice<T>, Option<CudaSlice<T>>),
}

impl<T> TcOperands<T> {
    /// `(output big, output small, reduced big, reduced small)` of a half-step on `side`;
    /// the small parts are the big ones when there are none (then unread).
    fn sides(&self, side: Side) -> [&CudaSlice<T>; 4] {
        let (o, r) = match side {
            Side::Col => (&self.y, &self.x),
            Side::Row => (&self.x, &self.y),
        };
        [
            &o.0,
            o.1.as_ref().unwrap_or(&o.0),
            &r.0,
            r.1.as_ref().unwrap_or(&r.0),
        ]
    }
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
    fn form(&self, eps: T) -> Option<CloudForm> {
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
        let s = std::f64::consts::LOG2_E / eps.f64();
        T::of(if self.root { s } else { s.sqrt() })
    }
}

/// Both clouds as structure-of-arrays, each coordinate less the mean of that coordinate
/// over the `n + m` points of both (in f64). A common translation leaves every cost and
/// displacement unchanged, and keeps `|x|² + |y|² − 2·x·y` from cancelling more than the
/// spread of the clouds requires: clouds far from the origin compared with their size would
/// otherwise lose the digits of `|x − y|²` to those of `|x|²`.
fn centred_soa<T: Real>(
    x: ndarray::ArrayView2<'_, T>,
    y: ndarray::ArrayView2<'_, T>,
) -> (Vec<T>, Vec<T>) {
    let total = (x.nrows() + y.nrows()) as f64;
    let mut xs = Vec::with_capacity(x.len());
    let mut ys = Vec::with_capacity(y.len());
    for (cx, cy) in x.columns().into_iter().zip(y.columns()) {
        let mean = (cx.iter().map(|v| v.f64()).sum::<f64>()
            + cy.iter().map(|v| v.f64()).sum::<f64>())
            / total;
        xs.extend(cx.iter().map(|v| T::of(v.f64() - mean)));
        ys.extend(cy.iter().map(|v| T::of(v.f64() - mean)));
    }
    (xs, ys)
}

/// The largest squared norm of the `len` points of a structure-of-arrays cloud (f64).
fn max_sq_norm<T: Real>(pts: &[T], len: usize) -> f64 {
    let mut n2 = vec![0.0f64; len];
    if len > 0 {
        for col in pts.chunks(len) {
            for (a, v) in n2.iter_mut().zip(col) {
                *a += v.f64() * v.f64();
            }
        }
    }
    n2.into_iter().fold(0.0, f64::max)
}

/// `(kslice, splits)` for `blocks` blocks (all the same work) over `len_red` reduced points
/// when the GPU holds `slots` blocks at once: below 4 waves, the fewest splits (at most 64, each at least
/// 4 stages of `PC_KT` points) whose last wave of blocks is nearly full, since a block
/// count just past a multiple of `slots` leaves most of the GPU idle in its last wave
/// (otC: 64 blocks of 1024 outputs, 396 slots on an H100: 6 splits fill 384 of them, where
/// the 9 of a 4-blocks-per-SM target would run 1.45 waves).
fn wave_split(blocks: usize, len_red: usize, slots: usize) -> (usize, usize) {
    // From 4 waves on, the last one costs at most a fifth: no split.
    let max_splits = if blocks >= 4 * slots {
        1
    } else {
        (len_red / (4 * PC_KT)).clamp(1, 64)
    };
    let efficiency = |s: usize| {
        let (total, slots) = ((blocks * s) as f64, slots.max(1) as f64);
        total / ((total / slots).ceil() * slots)
    };
    let best = (1..=max_splits).map(efficiency).fold(0.0, f64::max);
    let want = (1..=max_splits)
        .find(|&s| efficiency(s) >= 0.95 * best)
        .unwrap_or(1);
    let kslice = (len_red.div_ceil(want).div_ceil(PC_KT) * PC_KT).max(PC_KT);
    (kslice, len_red.div_ceil(kslice).max(1))
}

/// Kernel family for dimension `d`: (base name, compiled maximum dimension), or `None`
/// above `PC_DMAX` (the any-d kernels).
fn by_dim(prefix: &str, d: usize, exact3: bool) -> Option<(String, usize)> {
    match d {
        3 if exact3 => Some((format!("{prefix}_d3"), 3)),
        1..=4 => Some((format!("{prefix}_d4"), 4)),
        5..=PC_DMAX => Some((format!("{prefix}_d{PC_DMAX}"), PC_DMAX)),
        _ => None,
    }
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
        to_i32(d, "x")?;
        let any_d = d > PC_DMAX;
        // Centred at every d: the any-d kernels and the small-d norm form need it, and it
        // changes no cost.
        let (xs, ys) = centred_soa(p.x(), p.y());
        let sq_radii = (max_sq_norm(&xs, n), max_sq_norm(&ys, m));
        let x = self.upload_slice(&xs, "the points x")?;
        let y = self.upload_slice(&ys, "the points y")?;
        let norms = if any_d {
            Some((
                self.cloud_sqnorms(&x, n, d, "the norms of x")?,
                self.cloud_sqnorms(&y, m, d, "the norms of y")?,
            ))
        } else {
            None
        };
        let tc = match CrossKernel::of(p.precision(), T::PRECISION, d) {
            CrossKernel::Fma => None,
            kernel => {
                let dp = d.div_ceil(PC_TC_DC) * PC_TC_DC;
                let x3 = kernel == CrossKernel::Tf32x3;
                Some(TcOperands {
                    kernel,
                    dp,
                    x: self.tc_split(&x, n, d, dp, x3, "the TF32 operands of x")?,
                    y: self.tc_split(&y, m, d, dp, x3, "the TF32 operands of y")?,
                })
            }
        };
        Ok(CudaCloud {
            n,
            m,
            d,
            root: p.metric() == PointMetric::Euclidean,
            x,
            y,
            norms,
            tc,
            sq_radii,
        })
    }

    /// The TF32 parts of a structure-of-arrays cloud of `len` points (`pc_tc_split`):
    /// point-major, `dp` coordinates each; the second part only for `x3`.
    fn tc_split<T: CudaReal>(
        &self,
        pts: &CudaSlice<T>,
        len: usize,
        d: usize,
        dp: usize,
        x3: bool,
        what: &str,
    ) -> Result<(CudaSlice<T>, Option<CudaSlice<T>>)> {
        let total = len
            .checked_mul(dp)
            .filter(|&t| i64::try_from(t).is_ok())
            .ok_or_else(|| Error::shape("x", format!("{len} points of {dp} coordinates")))?;
        let big = self.alloc::<T>(total, what)?;
        let small = if x3 {
            Some(self.alloc::<T>(total, what)?)
        } else {
            None
        };
        let psmall = small.as_ref().map_or(self.ptr(&big), |v| self.ptr(v));
        let blocks = self.stride_blocks(total, 256, 8);
        // SAFETY: pc_tc_split(pts, big, small, len, d, dp, x3) reads len·d coordinates and
        // writes len·dp values to big (and to small when x3).
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_tc_split"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(pts),
                    self.ptr(&big),
                    psmall,
                    to_i32(len, "x")?,
                    to_i32(d, "x")?,
                    to_i32(dp, "x")?,
                    x3 as i32,
                ),
            )
        }?;
        Ok((big, small))
    }

    /// How a half-step at `eps` on this point-cloud cost forms its exponents (`None` for
    /// other costs and above 16 dimensions). For tests and benchmarks; not part of the API.
    #[doc(hidden)]
    pub fn cloud_form<T: CudaReal>(&self, cost: &CudaCost<T>, eps: T) -> Option<CloudForm> {
        match &cost.kind {
            CostKind::Cloud(cl) => cl.form(eps),
            _ => None,
        }
    }

    /// `2^x` for each `x` by the polynomial that replaces some of the half-step's `MUFU.EX2`
    /// exponentials (`pc_exp2_poly` in cuda/pointcloud.cu). For tests; not part of the API.
    #[doc(hidden)]
    pub fn exp2_poly(&self, x: &[f32]) -> Result<Vec<f32>> {
        let n = x.len();
        to_i32(n, "x")?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let xd = self.upload_slice(x, "the arguments")?;
        let y = self.alloc::<f32>(n, "the exponentials")?;
        let blocks = self.stride_blocks(n, 256, 8);
        // SAFETY: pc_exp2_poly_f32(x, y, n) reads and writes n floats.
        unsafe {
            self.launch(
                "pc_exp2_poly_f32",
                Launch::linear(blocks, 256),
                (self.ptr(&xd), self.ptr(&y), n as i32),
            )
        }?;
        self.download_slice(&y, n, "the exponentials")
    }

    /// `|p|²` of each of the `len` points of a structure-of-arrays cloud (`pc_sqnorms`).
    fn cloud_sqnorms<T: CudaReal>(
        &self,
        pts: &CudaSlice<T>,
        len: usize,
        d: usize,
        what: &str,
    ) -> Result<CudaSlice<T>> {
        let out = self.alloc::<T>(len, what)?;
        let blocks = self.stride_blocks(len, 256, 8);
        // SAFETY: pc_sqnorms(pts, out, len, d) reads len·d coordinates, writes len norms.
        unsafe {
            self.launch(
                &kernel_name::<T>("pc_sqnorms"),
                Launch::linear(blocks, 256),
                (
                    self.ptr(pts),
                    self.ptr(&out),
                    to_i32(len, "x")?,
                    to_i32(d, "x")?,
                ),
            )
        }?;
        Ok(out)
    }

    /// `(resident, shared bytes)` of the tensor-core half-step on `tc`: the output tile (of
    /// both parts with TF32x3) stays in shared memory for the whole reduction when it takes at
    /// most `TC_RESIDENT_BYTES` (and fits), else it is streamed by chunks in two slots like
    /// the reduced tile. Layout as `pc_sinkstep_tc_body`: A tile, two slots of B chunks, and
    /// two stages of column terms and norms.
    fn tc_layout<T>(&self, tc: &TcOperands<T>, size: usize) -> (bool, usize) {
        let parts = if tc.kernel == CrossKernel::Tf32x3 {
            2
        } else {
            1
        };
        let chunks = tc.dp / PC_TC_DC;
        let a_chunk = parts * PC_TC_BL * PC_TC_DC * size;
        let rest = (2 * parts * PC_TC_BK * PC_TC_DC + 4 * PC_TC_BK) * size;
        let resident =
            a_chunk * chunks <= TC_RESIDENT_BYTES && a_chunk * chunks + rest <= self.inner.max_smem;
        let a = a_chunk * if resident { chunks } else { 2 };
        (resident, a + rest)
    }

    /// `(kslice, splits)` of a reduction over `len_red` points in stages of `kt` by `blocks`
    /// blocks: split only when the grid alone would give the SMs fewer than 4 blocks each.
    fn cloud_split(&self, blocks: usize, len_red: usize, kt: usize) -> (usize, usize) {
        let target = 4 * self.inner.sm_count;
        let want = if blocks < target {
            target.div_ceil(blocks).min((len_red / (4 * kt)).max(1))
        } else {
            1
        };
        let kslice = len_red.div_ceil(want).div_ceil(kt) * kt;
        (kslice, len_red.div_ceil(kslice))
    }

    /// `(kslice, splits)` of a small-d half-step (`kernel`, `smem` dynamic shared bytes) of
    /// `blocks` blocks over `len_red` reduced points: [`wave_split`] with the kernel's
    /// resident blocks per SM from the driver (the splits of [`Self::cloud_split`] if it
    /// cannot say).
    fn wave_split(
        &self,
        kernel: &str,
        smem: usize,
        blocks: usize,
        len_red: usize,
    ) -> (usize, usize) {
        let per_sm = self.func(kernel).ok().and_then(|f| {
            self.inner.ctx.bind_to_thread().ok()?;
            f.occupancy_max_active_blocks_per_multiprocessor(PC_BLOCK as u32, smem, None)
                .ok()
        });
        match per_sm {
            Some(r) if r >= 1 => wave_split(blocks, len_red, self.inner.sm_count * r as usize),
            _ => self.cloud_split(blocks, len_red, PC_KT),
        }
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
        let tc = cl.tc.as_ref();
        self.cloud_sinkstep_by(cl, side, eps, other, log_marginal, out, tc)
    }

    /// [`Self::cloud_sinkstep`] with the cross term of the dot-product form on the tensor
    /// cores when `tc` is given, else by exact FMA products.
    #[allow(clippy::too_many_arguments)]
    fn cloud_sinkstep_by<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        side: Side,
        eps: T,
        other: &CudaBuffer<T>,
        log_marginal: &CudaBuffer<T>,
        out: &mut CudaBuffer<T>,
        tc: Option<&TcOperands<T>>,
    ) -> Result<()> {
        let batch = check_sinkstep(&cl.dims(), side, other.len, log_marginal.len, out.len)?;
        let (out_pts, len_out, red_pts, len_red) = cl.sides(side);
        let size = std::mem::size_of::<T>();
        // The tensor-core kernel: its entry point and whether the output tile stays in
        // shared memory.
        let tc_plan = match (by_dim("pc_sinkstep", cl.d, true), tc) {
            (None, Some(tc)) => Some((tc, self.tc_layout(tc, size))),
            _ => None,
        };
        // (entry point, outputs per block, reduced points per stage, shared bytes)
        let prefix = match cl.form(eps) {
            Some(CloudForm::Norm) => "pc_sinkstep_nf",
            _ => "pc_sinkstep",
        };
        let (kernel, per_block, kt, smem) = match (by_dim(prefix, cl.d, true), tc_plan) {
            (None, Some((tc, (_, smem)))) => {
                let base = if tc.kernel == CrossKernel::Tf32x3 {
                    "pc_sinkstep_tc3"
                } else {
                    "pc_sinkstep_tc"
                };
                (kernel_name::<T>(base), PC_TC_BL, PC_TC_BK, smem)
            }
            (Some((base, dmax)), _) => {
                // Outputs per thread (TJ of the kernel's entry point).
                let tj = if dmax <= 4 && T::PRECISION == Precision::F32 {
                    4
                } else {
                    2
                };
                let smem = (dmax * PC_KT + PC_KT) * size;
                (kernel_name::<T>(&base), PC_BLOCK * tj, PC_KT, smem)
            }
            (None, None) => {
                let smem = (PC_DN_DC * (PC_DN_TL + PC_DN_TK) + 2 * PC_DN_TK) * size;
                (kernel_name::<T>("pc_sinkstep_dn"), PC_DN_TL, PC_DN_TK, smem)
            }
        };
        let gx = len_out.div_ceil(per_block);
        if batch > 65535 {
            return Err(Error::shape(
                "sinkstep",
                format!("{batch} problems exceed the launch grid (65535)"),
            ));
        }
        let (kslice, splits) = if cl.d <= PC_DMAX {
            self.wave_split(&kernel, smem, gx * batch, len_red)
        } else {
            self.cloud_split(gx * batch, len_red, kt)
        };
        let parts = if splits > 1 {
            Some(self.alloc::<T>(2 * splits * batch * len_out, "K-split partials")?)
        } else {
            None
        };
        let (pm, ps) = match &parts {
            Some(p) => {
                let half = splits * batch * len_out * size;
                (self.ptr(p), self.ptr(p) + half as u64)
            }
            None => (0u64, 0u64),
        };
        let (plm, pout) = (self.ptr(&log_marginal.data), self.ptr(&out.data));
        let (bi, li) = (to_i32(batch, "batch")?, to_i32(len_out, "cost")?);
        let (ki, kslice) = (to_i32(len_red, "cost")?, to_i32(kslice, "cost")?);
        let gx = u32::try_from(gx).map_err(|_| Error::shape("sinkstep", "too many outputs"))?;
        let cfg =
            Launch::new((gx, batch as u32, splits as u32), (PC_BLOCK as u32, 1, 1)).shared(smem);
        let (po, pr, pother) = (self.ptr(out_pts), self.ptr(red_pts), self.ptr(&other.data));
        if let Some((tc, (resident, _))) = tc_plan {
            let [ob, os, rb, rs] = tc.sides(side);
            let (on, rn) = cl
                .side_norms(side)
                .expect("clouds above PC_DMAX dimensions have norms");
            // SAFETY: PC_TC_ARGS in cuda/pointcloud.cu: the TF32 parts hold len·dp values per
            // cloud (the small ones unread without x3), the norms len_out and len_red, the
            // potentials were checked against the clouds, the partials hold
            // 2·splits·batch·len_out elements; `smem` is the kernel's layout for `resident`.
            unsafe {
                self.launch(
                    &kernel,
                    cfg,
                    (
                        self.ptr(ob),
                        self.ptr(os),
                        self.ptr(rb),
                        self.ptr(rs),
                        self.ptr(on),
                        self.ptr(rn),
                        pother,
                        plm,
                        pout,
                        pm,
                        ps,
                        bi,
                        ki,
                        li,
                        to_i32(tc.dp, "x")?,
                        eps,
                        kslice,
                        cl.root as i32,
                        resident as i32,
                    ),
                )
            }?;
        } else {
            match cl.side_norms(side) {
                // SAFETY: PC_STEP_ARGS in cuda/pointcloud.cu; the potentials were checked
                // against the clouds, the partials hold 2·splits·batch·len_out elements.
                None => unsafe {
                    self.launch(
                        &kernel,
                        cfg,
                        (
                            po,
                            pr,
                            pother,
                            plm,
                            pout,
                            pm,
                            ps,
                            bi,
                            ki,
                            li,
                            cl.d as i32,
                            eps,
                            cl.scale(eps),
                            kslice,
                            cl.root as i32,
                        ),
                    )
                }?,
                // SAFETY: pc_sinkstep_dn in cuda/pointcloud.cu (PC_STEP_ARGS with the norms of
                // both clouds, len_out and len_red of them, and no scale).
                Some((on, rn)) => unsafe {
                    self.launch(
                        &kernel,
                        cfg,
                        (
                            po,
                            pr,
                            self.ptr(on),
                            self.ptr(rn),
                            pother,
                            plm,
                            pout,
                            pm,
                            ps,
                            bi,
                            ki,
                            li,
                            cl.d as i32,
                            eps,
                            kslice,
                            cl.root as i32,
                        ),
                    )
                }?,
            }
        }
        if splits > 1 {
            let finish = TiledArgs {
                r: 0,
                stride: 0,
                other: pother,
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
                ),
            )
        }?;
        Ok((mass, res, batch, len_out))
    }

    /// [`Self::cloud_rows`] by the any-d kernels, in two passes: `h = −ε·LSE_k((other_k −
    /// c_lk)/ε)` by a half-step with zero log-marginals (split across blocks when that
    /// pays), then `pc_rows_dn` with the weights `exp((other_k − c_lk + h_l)/ε)` that sum
    /// to one over each row, one block per 64 outputs and `PC_DN_CC` channels (the cost is
    /// recomputed for each tile of channels).
    #[allow(clippy::too_many_arguments)]
    fn cloud_rows_dn<T: CudaReal>(
        &self,
        cl: &CudaCloud<T>,
        side: Side,
        (own, other): (&CudaBuffer<T>, &CudaBuffer<T>),
        eps: T,
        sums: RowSums<'_, T>,
        batch: usize,
        channels: usize,
    ) -> Result<(CudaSlice<T>, CudaSlice<T>, usize, usize)> {
        let (out_pts, len_out, red_pts, len_red) = cl.sides(side);
        let rows = batch * len_out;
        let mut zeros = self.alloc::<T>(rows, "zero log-marginals")?;
        self.fill_slice(&mut zeros, rows, T::zero())?;
        let zeros = CudaBuffer {
            data: zeros,
            len: rows,
        };
        let mut h = CudaBuffer {
            data: self.alloc::<T>(rows, "row normalisers")?,
            len: rows,
        };
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
                    to_i32(len_red, "cost")?,
                    to_i32(len_out, "cost")?,
                    cl.d as i32,
                    kv as i32,
                    eps,
                    cl.root as i32,
                    sums.mode(),
                    diff,
                ),
            )
        }?;
        // The scratch buffers are freed in stream order after the kernels.
        drop((zeros, h));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_fill_the_last_wave() {
        // otC on an H100 (132 SMs × 3 blocks): 64 blocks → 6 splits of 86 stages.
        let (kslice, splits) = wave_split(64, 65536, 396);
        assert_eq!((kslice, splits), (86 * PC_KT, 6));
        assert!(kslice * splits >= 65536 && kslice * (splits - 1) < 65536);
        // Many blocks: no split; short reductions: at most len/(4·PC_KT) splits.
        assert_eq!(wave_split(4000, 65536, 396).1, 1);
        assert_eq!(wave_split(1, 1024, 396), (4 * PC_KT, 2));
        assert_eq!(wave_split(2, 100, 396), (PC_KT, 1));
        // Every split count covers the reduction exactly once.
        for (blocks, len, slots) in [(7, 300_000, 264), (64, 1 << 20, 396), (1024, 1 << 20, 396)] {
            let (kslice, splits) = wave_split(blocks, len, slots);
            assert!(kslice % PC_KT == 0 && kslice * splits >= len);
            assert!(
                kslice * (splits - 1) < len,
                "{blocks} {len}: {kslice}×{splits}"
            );
        }
    }
}
