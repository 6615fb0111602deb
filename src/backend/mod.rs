//! The backend abstraction: one trait that a compute device implements, and the kernel
//! traits of the algorithms beyond Sinkhorn (barycenters, bistochastic, gradients, linear
//! algebra, point clouds). The costs they read ([`CostSource`], [`GridCost`],
//! [`PointCloudCost`]) are re-exported here.
//!
//! Algorithms ([`crate::sinkhorn`], barycenters, gradients) are written once against
//! [`Backend`]. A backend owns its buffers ([`Backend::Buffer`], resident on the device
//! between iterations) and its prepared costs ([`Backend::Cost`]); the host reads back
//! only small per-problem reductions, and only when an algorithm asks (every
//! `check_every` iterations for convergence).
//!
//! Layout conventions: a batch of `B` problems with `n` source and `m` target points
//! stores potentials and marginals row-major as `B×n` (`f`, `μ`) and `B×m` (`g`, `ν`).

pub mod barycenter;
pub mod bistochastic;
pub mod cluster;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod grad;
pub mod linalg;
pub mod pointcloud;
mod shape;

pub use crate::cost::{
    CloudLayout, CostDims, CostSource, CrossPrecision, GridCost, PointCloudCost, PointMetric,
};
pub use barycenter::{
    bary_iterations_unfused, log_power_mean, BaryBuffers, BaryLayout, BarycenterKernels,
};
pub use pointcloud::PointCloudKernels;

pub(crate) use shape::batch_of;

use crate::{Real, Result};
use ndarray::{ArrayView2, ArrayView3};

/// Which potential a [`Backend::sinkstep`] updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Update `f` (length `n` per problem) from `g`: reduce over the columns `j` of `C`.
    Row,
    /// Update `g` (length `m` per problem) from `f`: reduce over the rows `i` of `C`.
    Col,
}

impl CostDims {
    /// Length of one problem's potential on `side` (`n` for rows, `m` for columns).
    pub fn len(&self, side: Side) -> usize {
        match side {
            Side::Row => self.n,
            Side::Col => self.m,
        }
    }
}

/// A compute device for entropic OT in precision `T`.
///
/// Every method works on a batch; the batch size `B` is the buffer length divided by the
/// per-problem length the cost implies. Implementations validate lengths and return
/// [`crate::Error`] on mismatch; they never panic on bad sizes.
pub trait Backend<T: Real> {
    /// A 1-D array of `T` resident on the device.
    type Buffer;
    /// A cost prepared for the kernels (for a dense cost: the matrix and whatever layout
    /// the kernels prefer, e.g. its transpose).
    type Cost;

    /// Short name (`"cpu"`, `"cuda"`).
    fn name(&self) -> &'static str;

    /// Copy host data to a new device buffer.
    fn upload(&self, data: &[T]) -> Result<Self::Buffer>;
    /// Copy a device buffer to the host.
    fn download(&self, buf: &Self::Buffer) -> Result<Vec<T>>;
    /// A buffer moved to the host: [`Backend::download`], without the copy where the buffer
    /// already is host memory (the CPU's plan is handed back as it is, not cloned).
    fn download_owned(&self, buf: Self::Buffer) -> Result<Vec<T>> {
        self.download(&buf)
    }
    /// A new buffer of `len` copies of `value`.
    fn filled(&self, len: usize, value: T) -> Result<Self::Buffer>;
    /// Length of a buffer.
    fn len(&self, buf: &Self::Buffer) -> usize;

    /// Prepare a cost for the kernels. Entries are validated (finite) by the caller
    /// ([`crate::Problem`]); backends check only sizes.
    fn prepare_cost(&self, cost: &CostSource<'_, T>) -> Result<Self::Cost>;
    /// [`Backend::prepare_cost`] of a dense cost with each matrix shifted, `C_b − shift[b]`
    /// (in f64; one shift per matrix or one shared; empty or all zero: none). The default
    /// shifts a host copy and prepares it; a backend that copies the cost anyway shifts it
    /// as it copies (the CPU: no third copy of the matrix).
    fn prepare_shifted_cost(&self, cost: &CostSource<'_, T>, shift: &[f64]) -> Result<Self::Cost> {
        if shift.iter().all(|&s| s == 0.0) {
            return self.prepare_cost(cost);
        }
        let of = |b: usize| if shift.len() == 1 { shift[0] } else { shift[b] };
        match cost {
            CostSource::Dense(c) => {
                let s = of(0);
                let v = crate::alloc::collected(
                    "cost",
                    c.len(),
                    c.iter().map(|&v| T::of(v.f64() - s)),
                )?;
                let c = ArrayView2::from_shape(c.dim(), &v)
                    .map_err(|e| crate::Error::shape("cost", e.to_string()))?;
                self.prepare_cost(&CostSource::Dense(c))
            }
            CostSource::DenseBatch(c) => {
                let v = crate::alloc::collected(
                    "cost",
                    c.len(),
                    c.outer_iter()
                        .enumerate()
                        .flat_map(|(b, m)| m.into_iter().map(move |&v| T::of(v.f64() - of(b)))),
                )?;
                let c = ArrayView3::from_shape(c.dim(), &v)
                    .map_err(|e| crate::Error::shape("cost", e.to_string()))?;
                self.prepare_cost(&CostSource::DenseBatch(c))
            }
            _ => self.prepare_cost(cost),
        }
    }
    /// The host bytes [`Backend::prepare_cost`] keeps for `cost` (the CPU's copies of a dense
    /// cost; 0 where the prepared cost lives on a device or is computed on the fly): held
    /// with a plan, they make [`SinkhornSolver::coupling`](crate::SinkhornSolver::coupling)'s peak.
    fn host_cost_bytes(&self, cost: &CostSource<'_, T>) -> usize {
        let _ = cost;
        0
    }
    /// Sizes of a prepared cost.
    fn cost_dims(&self, cost: &Self::Cost) -> CostDims;

    /// One half-iteration of log-domain Sinkhorn, batched over `b`. For [`Side::Col`]:
    ///
    /// `out[b,j] = ε·log_marginal[b,j] − ε·LSE_i((other[b,i] − C_b[i,j]) / ε)`
    ///
    /// and symmetrically for [`Side::Row`] (reduce over `j`, `other = g`). The LSE is one
    /// pass (running max and rescaled sum). `log_marginal = −∞` gives `out = −∞`, never NaN.
    fn sinkstep(
        &self,
        cost: &Self::Cost,
        side: Side,
        eps: T,
        other: &Self::Buffer,
        log_marginal: &Self::Buffer,
        out: &mut Self::Buffer,
    ) -> Result<()>;

    /// `iters` full Sinkhorn iterations in place: `g ← sinkstep(Col, f)`, then
    /// `f ← sinkstep(Row, g)`, each with `log ν` / `log μ` of `marginals` as in
    /// [`Backend::sinkstep`].
    ///
    /// The default is [`iterate_half_steps`], the two half-steps in turn. A backend may fuse
    /// the whole loop (the CUDA backend runs small problems as one launch with everything in
    /// shared memory); results must equal the half-step sequence up to rounding.
    fn iterate(
        &self,
        cost: &Self::Cost,
        eps: T,
        marginals: &Marginals<'_, Self::Buffer>,
        potentials: &mut Potentials<Self::Buffer>,
        iters: usize,
    ) -> Result<()> {
        iterate_half_steps(self, cost, eps, marginals, potentials, iters)
    }

    /// `iters` unbalanced iterations in place ([`crate::Relaxation`]): [`Backend::iterate`]
    /// with each half-step weighted, `g ← ε·log ν − φ_ν·ε·LSE_i((f_i − C_ij)/ε)`, then `f`
    /// alike with `φ_μ` (`φ = ρ/(ρ + ε)`, 1 for an exact side).
    ///
    /// The default is [`iterate_relaxed_half_steps`] (each half-step, then [`Backend::relax`]);
    /// a backend may weight its fused or tiled half-steps directly.
    fn iterate_relaxed(
        &self,
        cost: &Self::Cost,
        eps: T,
        phi: (T, T),
        marginals: &Marginals<'_, Self::Buffer>,
        potentials: &mut Potentials<Self::Buffer>,
        iters: usize,
    ) -> Result<()> {
        iterate_relaxed_half_steps(self, cost, eps, phi, marginals, potentials, iters)
    }

    /// The unbalanced half-step from the balanced one, in place:
    /// `out ← (1 − φ)·ε·log_marginal + φ·out` with `φ = ρ/(ρ + ε)` ([`crate::Relaxation`]);
    /// `out = −∞` where `log_marginal = −∞` (zero-mass bins), never NaN.
    ///
    /// The default downloads both buffers, blends on the host and uploads the result; a
    /// backend may do it in place on the device.
    fn relax(
        &self,
        out: &mut Self::Buffer,
        log_marginal: &Self::Buffer,
        eps: T,
        phi: T,
    ) -> Result<()> {
        let lm = self.download(log_marginal)?;
        let mut v = self.download(out)?;
        if lm.len() != v.len() {
            return Err(crate::Error::shape(
                "log_marginal",
                format!("has {} entries but the potential has {}", lm.len(), v.len()),
            ));
        }
        v.iter_mut()
            .zip(&lm)
            .for_each(|(o, &l)| *o = relax_entry(*o, l, eps, phi));
        *out = self.upload(&v)?;
        Ok(())
    }

    /// Marginal violation of each of `batch` problems, from a potential before and after its update:
    /// `err[b] = Σ_k |a[b,k] − a[b,k]·exp((old[b,k] − new[b,k]) / ε)|` over `a[b,k] > 0`.
    /// When `new` is the sinkstep of `old`'s partner, `a·exp((old − new)/ε)` is the current
    /// plan's marginal on that side, so this is `‖P·1 − a‖₁` (or `‖Pᵀ·1 − a‖₁`).
    /// Only these `B` numbers cross to the host.
    fn marginal_error(
        &self,
        batch: usize,
        marginal: &Self::Buffer,
        old: &Self::Buffer,
        new: &Self::Buffer,
        eps: T,
    ) -> Result<Vec<T>>;

    /// Per problem, one side of an unbalanced plan in f64 ([`RelaxedSide`]): `a` the side's
    /// marginal, `pot` its potential and `half` the balanced half-step of its partner, `B×per`
    /// each; `ρ = ∞` on an exact side. The default downloads the three buffers and sums on
    /// the host ([`relaxed_sides`]); a backend may sum on the device and
    /// send back only the `B` results.
    fn relaxed_sides(
        &self,
        batch: usize,
        a: &Self::Buffer,
        pot: &Self::Buffer,
        half: &Self::Buffer,
        eps: T,
        rho: f64,
    ) -> Result<Vec<RelaxedSide>> {
        let per = shape::check_marginal_error(batch, self.len(a), self.len(pot), self.len(half))?;
        Ok(relaxed_sides(
            per,
            &self.download(a)?,
            &self.download(pot)?,
            &self.download(half)?,
            eps.f64(),
            rho,
        ))
    }

    /// The column-marginal error `‖P_bᵀ1 − ν_b‖₁` and the transport cost `⟨P_b, C_b⟩` of
    /// each plan `P_b = exp((f_b ⊕ g_b − C_b)/ε)`, as `(errors, costs)`: what a solver
    /// reports at the end. The default is [`column_error_and_cost_by_half_step`] (a `g`
    /// half-step into scratch, then [`Backend::marginal_error`] and
    /// [`Backend::transport_cost`]); a backend may compute both in one pass over the cost.
    fn column_error_and_cost(
        &self,
        cost: &Self::Cost,
        potentials: &Potentials<Self::Buffer>,
        marginals: &Marginals<'_, Self::Buffer>,
        eps: T,
    ) -> Result<(Vec<T>, Vec<T>)> {
        column_error_and_cost_by_half_step(self, cost, potentials, marginals, eps)
    }

    /// What a solver reports about the plans `P_b = exp((f_b ⊕ g_b − C_b)/ε)` that the
    /// potentials define: per problem, `‖P_b·1 − μ_b‖₁`, `‖P_bᵀ·1 − ν_b‖₁`, `⟨P_b, C_b⟩` and
    /// the mass `Σ P_b` ([`PlanReport`]).
    ///
    /// The default derives the marginals from half-steps in `T`
    /// (`(P·1)_i = μ_i·exp((f_i − f'_i)/ε)` with `f'` the row half-step of `g`), so it agrees
    /// with the plan's entries to the rounding of the exponents, and reports `mass = None`.
    /// A backend that can evaluates the entries themselves from `f`, `g` and `C` with
    /// `f64` sums, so the errors are those of the plan the potentials define.
    fn plan_report(
        &self,
        cost: &Self::Cost,
        potentials: &Potentials<Self::Buffer>,
        marginals: &Marginals<'_, Self::Buffer>,
        eps: T,
    ) -> Result<Vec<PlanReport>> {
        plan_report_from_half_steps(self, cost, potentials, marginals, eps)
    }

    /// Transport cost per problem, `⟨P_b, C_b⟩ = Σ_ij exp((f_i + g_j − C_ij)/ε)·C_ij`.
    fn transport_cost(
        &self,
        cost: &Self::Cost,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
    ) -> Result<Vec<T>>;

    /// The plans `P_b[i,j] = exp((f_i + g_j − C_ij)/ε)`, stored `B×n×m`.
    fn plan(
        &self,
        cost: &Self::Cost,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
    ) -> Result<Self::Buffer>;

    /// The input checks' numbers of each of `rows` equal rows of `buf` ([`RowStats`]): `Σ`
    /// (f64), min, max, and the counts of non-finite and of negative entries. Only these
    /// `5·rows` numbers cross to the host. The default downloads `buf` ([`row_stats_of`]).
    fn row_stats(&self, buf: &Self::Buffer, rows: usize) -> Result<Vec<RowStats>> {
        row_stats_of(&self.download(buf)?, rows)
    }

    /// Element-wise `ln x` into a new buffer (`−∞` for `x = 0`). The default goes through
    /// the host.
    fn ln(&self, buf: &Self::Buffer) -> Result<Self::Buffer> {
        let v: Vec<T> = self.download(buf)?.iter().map(|v| v.ln()).collect();
        self.upload(&v)
    }

    /// The start potential of a marginal `a`: `0` where `a > 0`, `−∞` elsewhere (zero-mass
    /// bins take no part from the first half-step on). The default goes through the host.
    fn start_potential(&self, a: &Self::Buffer) -> Result<Self::Buffer> {
        let v: Vec<T> = self
            .download(a)?
            .iter()
            .map(|&v| {
                if v > T::zero() {
                    T::zero()
                } else {
                    T::neg_infinity()
                }
            })
            .collect();
        self.upload(&v)
    }

    /// `dst[b,k] = T(src[b,k] + delta[b])` (the sum in f64) for the `delta.len()` equal rows
    /// of `src`; one `delta` is shared by every row; an empty `delta` copies. `src` and `dst`
    /// have the same length. The default goes through the host.
    fn offset_rows(&self, src: &Self::Buffer, delta: &[f64], dst: &mut Self::Buffer) -> Result<()> {
        let mut v = self.download(src)?;
        shape::check_len("dst", v.len(), self.len(dst))?;
        offset_rows_of(&mut v, delta)?;
        *dst = self.upload(&v)?;
        Ok(())
    }

    /// `dst[k] = src[k]` where `a[k] = 0` (the zero-mass bins of a marginal `a`), `dst`
    /// unchanged elsewhere; the three have the same length. The default goes through the host.
    fn where_empty(
        &self,
        a: &Self::Buffer,
        src: &Self::Buffer,
        dst: &mut Self::Buffer,
    ) -> Result<()> {
        let (a, s, mut d) = (self.download(a)?, self.download(src)?, self.download(dst)?);
        shape::check_len("src", s.len(), a.len())?;
        shape::check_len("dst", d.len(), a.len())?;
        for ((d, &s), &a) in d.iter_mut().zip(&s).zip(&a) {
            if a == T::zero() {
                *d = s;
            }
        }
        *dst = self.upload(&d)?;
        Ok(())
    }

    /// A point-cloud cost prepared from two buffers of row-major points (`x`, `y` as
    /// `layout` says), as [`Backend::prepare_cost`] of the [`PointCloudCost`] of the same
    /// host arrays (the same checks and errors), with its [`PointCloudCost::max_cost`].
    /// `x` and `y` are only read (they may be the caller's memory). The default goes
    /// through the host.
    fn prepare_cloud_buffer(
        &self,
        x: &Self::Buffer,
        y: &Self::Buffer,
        layout: CloudLayout,
    ) -> Result<(Self::Cost, f64)> {
        let (xh, yh) = (self.download(x)?, self.download(y)?);
        let cost = layout.cost(&xh, &yh)?;
        let max_cost = cost.max_cost();
        Ok((self.prepare_cost(&cost.into())?, max_cost))
    }

    /// A dense cost prepared from a buffer (`[B×]n×m` row-major as `dims` says) with each
    /// matrix shifted, `C_b − shift[b]` (in f64, one shift per matrix or one shared; empty:
    /// none), as [`Backend::prepare_cost`] of the shifted host array. `cost` is only read
    /// (it may be the caller's memory). The default goes through the host.
    fn prepare_dense_buffer(
        &self,
        cost: &Self::Buffer,
        dims: CostDims,
        shift: &[f64],
    ) -> Result<Self::Cost> {
        let mut v = self.download(cost)?;
        let neg: Vec<f64> = shift.iter().map(|s| -s).collect();
        offset_rows_of(&mut v, &neg)?;
        let wrong = |e: ndarray::ShapeError| crate::Error::shape("cost", e.to_string());
        match dims.batch {
            None => {
                let c = ArrayView2::from_shape((dims.n, dims.m), &v).map_err(wrong)?;
                self.prepare_cost(&CostSource::Dense(c))
            }
            Some(b) => {
                let c = ArrayView3::from_shape((b, dims.n, dims.m), &v).map_err(wrong)?;
                self.prepare_cost(&CostSource::DenseBatch(c))
            }
        }
    }

    /// [`Backend::prepare_dense_buffer`] of `cost` (of `prepared`'s dimensions) into
    /// `prepared`, a dense cost prepared before from a buffer: a solver whose cost changes
    /// between solves (Gromov–Wasserstein's outer loop) keeps the memory of its prepared
    /// cost. The default prepares a new one.
    fn refill_dense_buffer(
        &self,
        prepared: &mut Self::Cost,
        cost: &Self::Buffer,
        shift: &[f64],
    ) -> Result<()> {
        *prepared = self.prepare_dense_buffer(cost, self.cost_dims(prepared), shift)?;
        Ok(())
    }
}

/// Per-row numbers of a buffer for the input checks ([`Backend::row_stats`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowStats {
    /// `Σ_k x_k` in f64 (summed in order on the host; a device sums in its own order).
    pub sum: f64,
    /// Smallest entry (NaN skipped; `+∞` for an empty or all-NaN row).
    pub min: f64,
    /// Largest entry (NaN skipped; `−∞` for an empty or all-NaN row).
    pub max: f64,
    /// Entries that are NaN or ±∞.
    pub non_finite: u64,
    /// Entries `< 0`.
    pub negative: u64,
}

/// [`Backend::row_stats`] of a host slice of `rows` equal rows.
pub fn row_stats_of<T: Real>(v: &[T], rows: usize) -> Result<Vec<RowStats>> {
    if rows == 0 || v.len() % rows != 0 {
        return Err(crate::Error::shape(
            "rows",
            format!("{} entries do not split into {rows} rows", v.len()),
        ));
    }
    let per = v.len() / rows;
    Ok(v.chunks(per.max(1))
        .take(rows)
        .map(|r| {
            let (mut min, mut max, mut non_finite, mut negative) =
                (f64::INFINITY, f64::NEG_INFINITY, 0u64, 0u64);
            for x in r.iter().map(|x| x.f64()) {
                min = if x < min { x } else { min };
                max = if x > max { x } else { max };
                non_finite += u64::from(!x.is_finite());
                negative += u64::from(x < 0.0);
            }
            RowStats {
                sum: r.iter().map(|x| x.f64()).sum(),
                min,
                max,
                non_finite,
                negative,
            }
        })
        .collect())
}

/// A caller's buffer of exactly `want` elements (the error names it).
pub(crate) fn check_buffer_len(arg: &str, len: usize, want: usize) -> Result<()> {
    shape::check_len(arg, len, want)
}

/// [`Backend::offset_rows`] in place on a host slice.
pub fn offset_rows_of<T: Real>(v: &mut [T], delta: &[f64]) -> Result<()> {
    if delta.is_empty() {
        return Ok(());
    }
    if v.len() % delta.len() != 0 {
        return Err(crate::Error::shape(
            "delta",
            format!("{} rows do not divide {} entries", delta.len(), v.len()),
        ));
    }
    let per = v.len() / delta.len();
    for (row, &d) in v.chunks_mut(per.max(1)).zip(delta) {
        if d != 0.0 {
            row.iter_mut().for_each(|x| *x = T::of(x.f64() + d));
        }
    }
    Ok(())
}

/// One entry of [`Backend::relax`]: `(1 − φ)·ε·lm + φ·out`, `−∞` where `lm = −∞`.
pub fn relax_entry<T: Real>(out: T, lm: T, eps: T, phi: T) -> T {
    if lm == T::neg_infinity() {
        lm
    } else {
        (T::one() - phi) * eps * lm + phi * out
    }
}

/// The marginals of a batch on the device (`B×n` and `B×m`) with their logarithms
/// (`−∞` on zero-mass bins), as the half-steps and the reports read them.
#[derive(Clone, Copy, Debug)]
pub struct Marginals<'a, Buf> {
    /// `μ`, `B×n`.
    pub mu: &'a Buf,
    /// `ν`, `B×m`.
    pub nu: &'a Buf,
    /// `log μ`.
    pub log_mu: &'a Buf,
    /// `log ν`.
    pub log_nu: &'a Buf,
}

/// One side of each problem of an unbalanced plan, in f64, from a potential `pot` and the
/// balanced half-step `half` of its partner, so that `r_k = a_k·exp((pot_k − half_k)/ε)` is
/// the plan's marginal on that side (sums over `a_k > 0`):
/// [`Backend::relaxed_sides`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RelaxedSide {
    /// `Σ_k |r'_k − r_k|`, the `ℓ₁` change one more relaxed half-step on this side would make
    /// to the plan's marginal: `log(r'_k/r_k) = −φ·log(r_k/a_k) − (pot_k − ε log a_k)/(ρ + ε)`
    /// (`φ = ρ/(ρ + ε)`), zero exactly when the side's optimality condition
    /// `r = a ⊙ exp(−(pot − ε log a)/ρ)` holds; `‖r − a‖₁` for `ρ = ∞`.
    pub residual: f64,
    /// `Σ_k r_k`, the plan's mass (what [`RelaxedSide::residual`] is judged relative to).
    pub mass: f64,
    /// `Σ_k r_k·(pot_k − ε log a_k)`.
    pub dual: f64,
    /// `KL(r ‖ a) = Σ_k r_k log(r_k/a_k) − r_k + a_k`.
    pub kl: f64,
}

impl RelaxedSide {
    /// The side's terms of the objective: `dual + ρ·KL(r ‖ a)` (the KL term left out for
    /// `ρ = ∞`).
    pub(crate) fn objective(&self, rho: f64) -> f64 {
        if rho == f64::INFINITY {
            self.dual
        } else {
            self.dual + rho * self.kl
        }
    }
}

/// [`RelaxedSide`] of every problem (`per` entries each) on the host, problems in
/// parallel, each summed in order.
pub fn relaxed_sides<T: Real>(
    per: usize,
    a: &[T],
    pot: &[T],
    half: &[T],
    eps: f64,
    rho: f64,
) -> Vec<RelaxedSide> {
    use rayon::prelude::*;
    if per == 0 {
        return Vec::new();
    }
    a.par_chunks(per)
        .zip(pot.par_chunks(per))
        .zip(half.par_chunks(per))
        .map(|((a, p), h)| {
            let mut side = RelaxedSide::default();
            for k in 0..per {
                let ak = a[k].f64();
                if ak > 0.0 {
                    let (pk, hk) = (p[k].f64(), h[k].f64());
                    // log(r_k / a_k)
                    let log_ratio = (pk - hk) / eps;
                    let dual = pk - eps * ak.ln();
                    let r = ak * log_ratio.exp();
                    side.residual += half_step_change(ak, r, log_ratio, dual, eps, rho);
                    side.mass += r;
                    side.dual += r * dual;
                    side.kl += r * log_ratio - r + ak;
                }
            }
            side
        })
        .collect()
}

/// `|r' − r|` for one bin of weight `a > 0` whose plan marginal is `r = a·exp(log_ratio)` and
/// relative potential `dual = pot − ε log a`: the change one more relaxed half-step makes,
/// `log(r'/r) = −φ·log_ratio − dual/(ρ + ε)` ([`RelaxedSide::residual`]). The step's
/// exponent is formed from `dual/(ρ + ε)`, never `dual/ρ`, so the rounding of a potential
/// near `ε log a` is not magnified when `ρ ≪ ε`.
pub(crate) fn half_step_change(
    a: f64,
    r: f64,
    log_ratio: f64,
    dual: f64,
    eps: f64,
    rho: f64,
) -> f64 {
    let (phi, shift) = if rho == f64::INFINITY {
        (1.0, 0.0)
    } else {
        (rho / (rho + eps), dual / (rho + eps))
    };
    if r > 0.0 && r.is_finite() {
        r * (-phi * log_ratio - shift).exp_m1().abs()
    } else {
        // r underflowed (or overflowed): r' from `log(r'/a) = (1 − φ)·log(r/a) − shift`.
        let next = if phi == 1.0 {
            -shift
        } else {
            (1.0 - phi) * log_ratio - shift
        };
        (a * next.exp() - r).abs()
    }
}

/// One problem's plan as [`Backend::plan_report`] measures it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlanReport {
    /// `‖P·1 − μ‖₁`.
    pub row_error: f64,
    /// `‖Pᵀ·1 − ν‖₁`.
    pub col_error: f64,
    /// `⟨P, C⟩`. For f32 point clouds, whose errors are measured with each cost in f64
    /// from the points as given, the transport cost of the half-steps' plan with the cost
    /// as the half-steps form it: that form's rounding is in large part a row or column
    /// constant (the rounding of `|x_i|²`), which the potentials absorb, so its plan's cost
    /// is the closer estimate of the distance (measured on an H200 at d = 3072 in the exact
    /// mode: the f64-cost plan's cost was 1.4e-5 from the f64 solve's distance, beyond the
    /// 1e-5 that `tests/cuda_pointcloud_tc.rs` holds the half-steps' one to).
    pub cost: f64,
    /// `Σ_ij P_ij`, where the backend sums the entries (`None`: take `Σ ν`).
    pub mass: Option<f64>,
}

/// [`Backend::plan_report`]'s default: the marginals from one half-step on each side
/// (in `T`), the transport cost from [`Backend::column_error_and_cost`].
pub fn plan_report_from_half_steps<T: Real, B: Backend<T> + ?Sized>(
    be: &B,
    cost: &B::Cost,
    potentials: &Potentials<B::Buffer>,
    marginals: &Marginals<'_, B::Buffer>,
    eps: T,
) -> Result<Vec<PlanReport>> {
    let (f, g) = (&potentials.f, &potentials.g);
    let batch = batch_of(be.len(f), be.cost_dims(cost).n, "f")?;
    let mut f_next = be.filled(be.len(f), T::zero())?;
    be.sinkstep(cost, Side::Row, eps, g, marginals.log_mu, &mut f_next)?;
    let rows = be.marginal_error(batch, marginals.mu, f, &f_next, eps)?;
    drop(f_next);
    let (cols, costs) = be.column_error_and_cost(cost, potentials, marginals, eps)?;
    Ok(rows
        .iter()
        .zip(&cols)
        .zip(&costs)
        .map(|((r, c), t)| PlanReport {
            row_error: r.f64(),
            col_error: c.f64(),
            cost: t.f64(),
            mass: None,
        })
        .collect())
}

/// The Sinkhorn potentials of a batch on the device: `f = ε log u` (`B×n`) and
/// `g = ε log v` (`B×m`), so that `P_b = exp((f_b ⊕ g_b − C_b)/ε)`.
#[derive(Clone, Debug)]
pub struct Potentials<Buf> {
    /// Source potentials, `B×n`.
    pub f: Buf,
    /// Target potentials, `B×m`.
    pub g: Buf,
}

/// [`Backend::iterate`]'s default, also where a backend's fused loop does not apply:
/// `iters` times `g ← sinkstep(Col, f, log ν)`, then `f ← sinkstep(Row, g, log μ)`.
pub fn iterate_half_steps<T: Real, B: Backend<T> + ?Sized>(
    be: &B,
    cost: &B::Cost,
    eps: T,
    marginals: &Marginals<'_, B::Buffer>,
    potentials: &mut Potentials<B::Buffer>,
    iters: usize,
) -> Result<()> {
    let Potentials { f, g } = potentials;
    for _ in 0..iters {
        be.sinkstep(cost, Side::Col, eps, f, marginals.log_nu, g)?;
        be.sinkstep(cost, Side::Row, eps, g, marginals.log_mu, f)?;
    }
    Ok(())
}

/// [`Backend::iterate_relaxed`]'s default: `iters` times `g ← sinkstep(Col, f, log ν)` relaxed
/// by `φ_ν` ([`Backend::relax`]), then `f ← sinkstep(Row, g, log μ)` relaxed by `φ_μ` (a side
/// with `φ = 1` is not relaxed).
pub fn iterate_relaxed_half_steps<T: Real, B: Backend<T> + ?Sized>(
    be: &B,
    cost: &B::Cost,
    eps: T,
    (phi_mu, phi_nu): (T, T),
    marginals: &Marginals<'_, B::Buffer>,
    potentials: &mut Potentials<B::Buffer>,
    iters: usize,
) -> Result<()> {
    let Potentials { f, g } = potentials;
    for _ in 0..iters {
        be.sinkstep(cost, Side::Col, eps, f, marginals.log_nu, g)?;
        if phi_nu != T::one() {
            be.relax(g, marginals.log_nu, eps, phi_nu)?;
        }
        be.sinkstep(cost, Side::Row, eps, g, marginals.log_mu, f)?;
        if phi_mu != T::one() {
            be.relax(f, marginals.log_mu, eps, phi_mu)?;
        }
    }
    Ok(())
}

/// [`Backend::column_error_and_cost`]'s default: a `g` half-step into scratch `g'`, then
/// [`Backend::marginal_error`] of `(g, g')` against `ν` (`(Pᵀ1)_j = ν_j·exp((g_j − g'_j)/ε)`)
/// and [`Backend::transport_cost`].
pub fn column_error_and_cost_by_half_step<T: Real, B: Backend<T> + ?Sized>(
    be: &B,
    cost: &B::Cost,
    potentials: &Potentials<B::Buffer>,
    marginals: &Marginals<'_, B::Buffer>,
    eps: T,
) -> Result<(Vec<T>, Vec<T>)> {
    let Potentials { f, g } = potentials;
    let batch = batch_of(be.len(g), be.cost_dims(cost).m, "g")?;
    let mut g_next = be.filled(be.len(g), T::zero())?;
    be.sinkstep(cost, Side::Col, eps, f, marginals.log_nu, &mut g_next)?;
    let errors = be.marginal_error(batch, marginals.nu, g, &g_next, eps)?;
    Ok((errors, be.transport_cost(cost, f, g, eps)?))
}
