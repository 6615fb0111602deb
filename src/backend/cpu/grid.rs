//! Separable log-domain convolutions on regular grids (the CPU side of
//! [`CostSource::Grid`](crate::backend::CostSource::Grid)).
//!
//! On a grid, `exp(−C/ε)` is a product of 1-D kernels `k_d(i, j) = exp(−(t_i − t_j)²/ε)`,
//! so `LSE_y(L_y − C(x, y)/ε)` is one 1-D pass per axis:
//! `L'[…, i, …] = LSE_j(L[…, j, …] + log k_d(i, j))`.
//!
//! Each pass runs as a matrix product in f64 with a shift per line:
//! `L'[i] = m + ln Σ_j exp(L[j] − m)·k(i, j)`, `m = max_j L[j]`, so a line costs `N`
//! exponentials, `N` logarithms and an `N×N` GEMM instead of `N²` exponentials. Every
//! product that matters is a normal f64 number; terms lost to underflow are each below
//! `2^−1021`, so a sum `S ≥ τ = 4·N·2^−1022/2^−52` is correct to rounding, and any entry
//! with `S < τ` (a very large dynamic range along the line) is recomputed by the exact
//! one-pass log-sum-exp. The result therefore matches the direct LSE to f64 rounding
//! whatever the dynamic range; f32 problems are computed in f64 and rounded once.

use super::isa::isa_dispatch;
use super::lse;
use crate::backend::shape::{check_grid_fg, check_grid_sinkstep};
use crate::backend::GridCost;
use crate::real::{MulAdd, Real};
use crate::{Error, Result};
use ndarray::linalg::general_mat_mul;
use ndarray::{ArrayView2, ArrayViewMut2, ArrayViewMut3, Axis};
use rayon::prelude::*;
use std::sync::{Arc, Mutex};

/// One axis's kernel in the log domain: `nlog[i,j] = −log k(i,j)` (may be `+∞`) and
/// `k = exp(−nlog)`, both `n×n`, row-major and symmetric.
pub(crate) struct AxisKernel {
    n: usize,
    nlog: Vec<f64>,
    k: Vec<f64>,
}

impl AxisKernel {
    /// `nlog[i,j] = (t_i − t_j)²/ε`, minus `ln (t_i − t_j)²` when `times_cost` (the kernel
    /// of `k·c`, used for `⟨P, C⟩`).
    fn new(n: usize, eps: f64, times_cost: bool) -> Self {
        let mut nlog = Vec::with_capacity(n * n);
        for i in 0..n {
            let ti = GridCost::coordinate(n, i);
            for j in 0..n {
                let d = ti - GridCost::coordinate(n, j);
                let c = d * d;
                nlog.push(if times_cost {
                    c / eps - c.ln()
                } else {
                    c / eps
                });
            }
        }
        let k = nlog.iter().map(|&v| (-v).exp()).collect();
        AxisKernel { n, nlog, k }
    }

    fn k(&self) -> ArrayView2<'_, f64> {
        // The shape always matches the length (built as n×n above).
        ArrayView2::from_shape((self.n, self.n), &self.k).unwrap_or_else(|_| unreachable!())
    }
}

/// A grid cost prepared for the CPU: its shape and the per-axis kernels of the last ε
/// used (rebuilt when ε changes, e.g. during ε-scaling).
pub(crate) struct CpuGrid {
    grid: GridCost,
    cache: Mutex<Option<(u64, Arc<Vec<AxisKernel>>)>>,
    scratch: Scratch,
}

/// Reusable batch-sized f64 buffers: the passes need a few per call, and fresh large
/// allocations would cost a page fault per 4 KiB every time.
#[derive(Default)]
pub(crate) struct Scratch(Mutex<Vec<Vec<f64>>>);

impl Scratch {
    /// A buffer of `len` values (contents unspecified: callers overwrite it).
    fn take(&self, len: usize) -> Vec<f64> {
        let mut v = self
            .0
            .lock()
            .ok()
            .and_then(|mut pool| pool.pop())
            .unwrap_or_default();
        v.resize(len, 0.0);
        v
    }
    fn give(&self, v: Vec<f64>) {
        if let Ok(mut pool) = self.0.lock() {
            if pool.len() < 8 {
                pool.push(v);
            }
        }
    }
}

impl std::fmt::Debug for CpuGrid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuGrid")
            .field("shape", &self.grid.shape())
            .finish()
    }
}

impl CpuGrid {
    pub(crate) fn new(grid: GridCost) -> Self {
        CpuGrid {
            grid,
            cache: Mutex::new(None),
            scratch: Scratch::default(),
        }
    }

    fn kernels(&self, eps: f64) -> Arc<Vec<AxisKernel>> {
        let build = || {
            Arc::new(
                self.grid
                    .shape()
                    .iter()
                    .map(|&n| AxisKernel::new(n, eps, false))
                    .collect::<Vec<_>>(),
            )
        };
        match self.cache.lock() {
            Ok(mut slot) => match &*slot {
                Some((bits, k)) if *bits == eps.to_bits() => Arc::clone(k),
                _ => {
                    let k = build();
                    *slot = Some((eps.to_bits(), Arc::clone(&k)));
                    k
                }
            },
            // A panic elsewhere poisoned the cache: build without it.
            Err(_) => build(),
        }
    }

    /// Half-step on a batch: `out[b,x] = ε·lm[b,x] − ε·LSE_y((other[b,y] − C(x,y))/ε)`.
    pub(crate) fn sinkstep<T: Real>(
        &self,
        eps: T,
        other: &[T],
        log_marginal: &[T],
        out: &mut [T],
    ) -> Result<()> {
        check_grid_sinkstep(self.grid.len(), other.len(), log_marginal.len(), out.len())?;
        let e = eps.f64();
        let inv = 1.0 / e;
        // The elementwise parts are cheap next to the passes: no rayon round trip for them.
        let mut a = self.scratch.take(other.len());
        for (x, v) in a.iter_mut().zip(other) {
            *x = v.f64() * inv;
        }
        let kernels = self.kernels(e);
        let refs: Vec<&AxisKernel> = kernels.iter().collect();
        log_convolve(self.grid.shape(), &refs, &mut a, &self.scratch);
        for ((o, &lm), &r) in out.iter_mut().zip(log_marginal).zip(&a) {
            *o = if lm == T::neg_infinity() {
                lm
            } else {
                T::of(e * (lm.f64() - r))
            };
        }
        self.scratch.give(a);
        Ok(())
    }

    /// `⟨P_b, C⟩` per problem, separably: `Σ_d Σ_x exp(f_x/ε + LSE_y(g_y/ε + log(k·c_d)(x,y)))`,
    /// where `log(k·c_d)` is the log kernel with axis `d`'s factor multiplied by `c_d`.
    pub(crate) fn transport_cost<T: Real>(&self, f: &[T], g: &[T], eps: T) -> Result<Vec<T>> {
        let n = self.grid.len();
        let batch = check_grid_fg(n, f.len(), g.len())?;
        let e = eps.f64();
        let kernels = self.kernels(e);
        let mut totals = vec![0.0f64; batch];
        for d in 0..self.grid.shape().len() {
            let weighted = AxisKernel::new(self.grid.shape()[d], e, true);
            let refs: Vec<&AxisKernel> = kernels
                .iter()
                .enumerate()
                .map(|(k, ker)| if k == d { &weighted } else { ker })
                .collect();
            let mut h: Vec<f64> = g.iter().map(|v| v.f64() / e).collect();
            log_convolve(self.grid.shape(), &refs, &mut h, &self.scratch);
            for (b, total) in totals.iter_mut().enumerate() {
                let terms = f[b * n..(b + 1) * n]
                    .iter()
                    .zip(&h[b * n..(b + 1) * n])
                    .map(|(fx, hx)| fx.f64() / e + hx);
                let m = terms.clone().fold(f64::NEG_INFINITY, f64::max);
                if m > f64::NEG_INFINITY {
                    *total += m.exp() * terms.map(|t| (t - m).exp()).sum::<f64>();
                }
            }
        }
        Ok(totals.into_iter().map(T::of).collect())
    }

    /// Dense plans `P_b[x,y] = exp((f_x + g_y − C(x,y))/ε)`, only when they are small.
    pub(crate) fn plan<T: Real>(&self, f: &[T], g: &[T], eps: T) -> Result<Vec<T>> {
        const MAX_ENTRIES: usize = 1 << 27;
        let n = self.grid.len();
        let batch = check_grid_fg(n, f.len(), g.len())?;
        let entries = n.checked_mul(n).and_then(|nn| nn.checked_mul(batch));
        match entries {
            Some(e) if e <= MAX_ENTRIES => {}
            _ => {
                return Err(Error::Unavailable(format!(
                    "the plan on a grid of shape {:?} has {batch}×{n}×{n} entries, more than the {MAX_ENTRIES} \
                     this backend materialises; use the potentials: P = exp((f ⊕ g − C)/ε)",
                    self.grid.shape()
                )))
            }
        }
        let mut p = crate::alloc::filled("plan", batch * n * n, T::zero())?;
        p.par_chunks_mut(n).enumerate().for_each(|(bx, row)| {
            let (b, x) = (bx / n, bx % n);
            let fx = f[bx];
            for (y, slot) in row.iter_mut().enumerate() {
                let c = T::of(self.grid.cost(x, y));
                *slot = ((fx + g[b * n + y] - c) / eps).exp();
            }
        });
        Ok(p)
    }
}

/// In place: `a[b, x] ← LSE_y(a[b, y] + Σ_d log k_d(x_d, y_d))` for a batch of grids,
/// one 1-D pass per axis (axis 0 first, as POT).
pub(crate) fn log_convolve(
    shape: &[usize],
    kernels: &[&AxisKernel],
    a: &mut Vec<f64>,
    scratch: &Scratch,
) {
    if let ([n0, n1], [k0, k1]) = (shape, kernels) {
        if *n0 > 1 && *n1 > 1 {
            return convolve_2d(k0, k1, a, scratch);
        }
    }
    let n: usize = shape.iter().product();
    let batch = a.len() / n.max(1);
    let mut tmp = scratch.take(a.len());
    for (d, kern) in kernels.iter().enumerate() {
        let outer = batch * shape[..d].iter().product::<usize>();
        let inner = shape[d + 1..].iter().product::<usize>();
        if inner == 1 {
            pass_rows(kern, a, &mut tmp);
        } else {
            pass_cols(kern, a, &mut tmp, outer, inner);
        }
        std::mem::swap(a, &mut tmp);
    }
    scratch.give(tmp);
}

/// Both passes of a 2-D image without the logarithm and exponential in between.
///
/// Pass 0 leaves `S1[i,l] = Σ_j k0(i,j)·exp(L[j,l] − m_l)` (`m_l` the column maximum);
/// pass 1 takes `exp(L1[i,l] − M) = S1[i,l]·exp(m_l − M)` with `M = max_l m_l` and
/// computes `S2 = Σ_l (S1 ⊙ exp(m − M))[i,l]·k1(j,l)`, so the result is `M + ln S2`. Every
/// term lost to underflow on the way is below `2^−1021` and there are at most
/// `N1·(N0 + 1)` of them, so `S2 ≥ 4·N1·(N0 + 1)·2^−1022/2^−52` is exact to rounding;
/// smaller entries are recomputed from the exact pass-0 row.
fn convolve_2d(k0: &AxisKernel, k1: &AxisKernel, a: &mut Vec<f64>, scratch: &Scratch) {
    let (n0, n1) = (k0.n, k1.n);
    let img = n0 * n1;
    let batch = a.len() / img;
    let src = &a[..];
    // Pass 0, in blocks of columns: column maxima `m` and S1 = K0·exp(L − m).
    let mut s1 = scratch.take(a.len());
    let mut colmax = vec![f64::NEG_INFINITY; batch * n1];
    {
        let Ok(s1v) = ArrayViewMut3::from_shape((batch, n0, n1), &mut s1[..]) else {
            unreachable!("whole images")
        };
        let mut tasks = Vec::new();
        for ((b, view), mrow) in s1v
            .into_outer_iter_mut()
            .enumerate()
            .zip(colmax.chunks_mut(n1))
        {
            for ((c, block), mblock) in view
                .into_axis_chunks_iter_mut(Axis(1), BLOCK)
                .enumerate()
                .zip(mrow.chunks_mut(BLOCK))
            {
                tasks.push((b * img + c * BLOCK, block, mblock));
            }
        }
        tasks.into_par_iter().for_each(|(base, mut out, m)| {
            let width = out.ncols();
            for j in 0..n0 {
                for (mv, &v) in m.iter_mut().zip(&src[base + j * n1..base + j * n1 + width]) {
                    *mv = if v > *mv { v } else { *mv };
                }
            }
            // All −∞ columns: any finite shift (their S1 is then negligible and unused).
            let shift: Vec<f64> = m
                .iter()
                .map(|&v| if v > f64::NEG_INFINITY { v } else { 0.0 })
                .collect();
            let mut e = vec![0.0f64; n0 * width];
            for (j, er) in e.chunks_exact_mut(width).enumerate() {
                exp_shifted_each(&src[base + j * n1..base + j * n1 + width], &shift, er);
            }
            let Ok(ev) = ArrayView2::from_shape((n0, width), &e) else {
                unreachable!("block shape")
            };
            general_mat_mul(1.0, &k0.k(), &ev, 0.0, &mut out);
        });
    }
    // Per image: the common shift M and the column factors exp(m_l − M) (0 for −∞ columns).
    let mut top = vec![0.0f64; batch];
    let mut scale = vec![0.0f64; batch * n1];
    for (b, (m, sc)) in colmax.chunks(n1).zip(scale.chunks_mut(n1)).enumerate() {
        let big = m
            .iter()
            .fold(f64::NEG_INFINITY, |x, &y| if y > x { y } else { x });
        top[b] = if big > f64::NEG_INFINITY { big } else { 0.0 };
        for (c, &mv) in sc.iter_mut().zip(m) {
            *c = if mv > f64::NEG_INFINITY {
                (mv - top[b]).exp()
            } else {
                0.0
            };
        }
    }
    // Pass 1, in blocks of rows: S2 = (S1 ⊙ scale)·K1ᵀ, then M + ln S2.
    let tau0 = exact_threshold(n0);
    let tau = 4.0 * (n1 * (n0 + 1)) as f64 * (f64::MIN_POSITIVE / f64::EPSILON);
    let mut out = scratch.take(a.len());
    let mut tasks = Vec::new();
    for (b, image) in out.chunks_mut(img).enumerate() {
        for (r, rows) in image.chunks_mut(BLOCK * n1).enumerate() {
            tasks.push((b, r * BLOCK, rows));
        }
    }
    tasks.into_par_iter().for_each(|(b, r0, dst)| {
        let rows = dst.len() / n1;
        let base = b * img + r0 * n1;
        let sc = &scale[b * n1..(b + 1) * n1];
        let mut e = s1[base..base + rows * n1].to_vec();
        for er in e.chunks_exact_mut(n1) {
            for (x, &c) in er.iter_mut().zip(sc) {
                *x *= c;
            }
        }
        let (Ok(ev), Ok(mut dv)) = (
            ArrayView2::from_shape((rows, n1), &e),
            ArrayViewMut2::from_shape((rows, n1), &mut *dst),
        ) else {
            unreachable!("block shapes follow from the chunk lengths")
        };
        general_mat_mul(1.0, &ev, &k1.k(), 0.0, &mut dv);
        let mut exact_row = Vec::new();
        let mut column = Vec::new();
        for (r, drow) in dst.chunks_exact_mut(n1).enumerate() {
            let low = small_sums(drow, tau);
            ln_shifted(drow, Shift::Same(top[b]));
            if low.is_empty() {
                continue;
            }
            // The exact pass-0 row i = r0 + r, in the log domain.
            let i = r0 + r;
            let m = &colmax[b * n1..(b + 1) * n1];
            exact_row.clear();
            for l in 0..n1 {
                let s = s1[base + r * n1 + l];
                exact_row.push(if m[l] == f64::NEG_INFINITY {
                    f64::NEG_INFINITY
                } else if s >= tau0 {
                    m[l] + s.ln()
                } else {
                    column.clear();
                    column.extend((0..n0).map(|j| src[b * img + j * n1 + l]));
                    lse::lse(&column, &k0.nlog[i * n0..(i + 1) * n0], 1.0)
                });
            }
            for j in low {
                drow[j] = lse::lse(&exact_row, &k1.nlog[j * n1..(j + 1) * n1], 1.0);
            }
        }
    });
    scratch.give(std::mem::replace(a, out));
    scratch.give(s1);
}

/// Sums below this are recomputed exactly (see the module notes).
fn exact_threshold(n: usize) -> f64 {
    4.0 * n as f64 * (f64::MIN_POSITIVE / f64::EPSILON)
}

/// Rows to a task in [`pass_rows`] and columns to a task in [`pass_cols`].
const BLOCK: usize = 32;

/// Pass over the contiguous axis: rows of length `n`, `dst[r,i] = LSE_j(src[r,j] − nlog[i,j])`.
fn pass_rows(kern: &AxisKernel, src: &[f64], dst: &mut [f64]) {
    let n = kern.n;
    let tau = exact_threshold(n);
    dst.par_chunks_mut(BLOCK * n)
        .zip(src.par_chunks(BLOCK * n))
        .for_each(|(d, s)| {
            let rows = s.len() / n;
            let mut shift = vec![0.0f64; rows];
            let mut e = vec![0.0f64; rows * n];
            for (r, (line, er)) in s.chunks_exact(n).zip(e.chunks_exact_mut(n)).enumerate() {
                let m = line
                    .iter()
                    .fold(f64::NEG_INFINITY, |a, &b| if b > a { b } else { a });
                // An all −∞ line: any finite shift; every sum is then below τ and exact.
                shift[r] = if m > f64::NEG_INFINITY { m } else { 0.0 };
                exp_shifted(line, shift[r], er);
            }
            let (ev, mut dv) = match (
                ArrayView2::from_shape((rows, n), &e),
                ArrayViewMut2::from_shape((rows, n), &mut *d),
            ) {
                (Ok(ev), Ok(dv)) => (ev, dv),
                _ => unreachable!("block shapes follow from the chunk lengths"),
            };
            // S = E·Kᵀ (K is symmetric).
            general_mat_mul(1.0, &ev, &kern.k(), 0.0, &mut dv);
            for (r, (drow, line)) in d.chunks_exact_mut(n).zip(s.chunks_exact(n)).enumerate() {
                let low: Vec<usize> = small_sums(drow, tau);
                ln_shifted(drow, Shift::Same(shift[r]));
                for i in low {
                    drow[i] = lse::lse(line, &kern.nlog[i * n..(i + 1) * n], 1.0);
                }
            }
        });
}

/// Pass over a strided axis: `outer` slabs of `n×inner`,
/// `dst[s,i,l] = LSE_j(src[s,j,l] − nlog[i,j])`, in blocks of columns.
fn pass_cols(kern: &AxisKernel, src: &[f64], dst: &mut [f64], outer: usize, inner: usize) {
    let n = kern.n;
    let tau = exact_threshold(n);
    let Ok(dst3) = ArrayViewMut3::from_shape((outer, n, inner), dst) else {
        unreachable!("the buffer holds whole grids")
    };
    let mut tasks: Vec<(usize, usize, ArrayViewMut2<'_, f64>)> = Vec::new();
    for (slab, view) in dst3.into_outer_iter_mut().enumerate() {
        for (c, block) in view.into_axis_chunks_iter_mut(Axis(1), BLOCK).enumerate() {
            tasks.push((slab, c * BLOCK, block));
        }
    }
    tasks.into_par_iter().for_each(|(slab, c0, mut out)| {
        let width = out.ncols();
        let base = slab * n * inner;
        let at = |j: usize, l: usize| src[base + j * inner + c0 + l];
        let mut shift = vec![f64::NEG_INFINITY; width];
        for j in 0..n {
            let row = &src[base + j * inner + c0..base + j * inner + c0 + width];
            for (m, &v) in shift.iter_mut().zip(row) {
                *m = if v > *m { v } else { *m };
            }
        }
        for m in shift.iter_mut() {
            if *m == f64::NEG_INFINITY {
                *m = 0.0;
            }
        }
        let mut e = vec![0.0f64; n * width];
        for (j, er) in e.chunks_exact_mut(width).enumerate() {
            exp_shifted_each(
                &src[base + j * inner + c0..base + j * inner + c0 + width],
                &shift,
                er,
            );
        }
        let Ok(ev) = ArrayView2::from_shape((n, width), &e) else {
            unreachable!("block shape")
        };
        // S = K·E.
        general_mat_mul(1.0, &kern.k(), &ev, 0.0, &mut out);
        let mut column = Vec::new();
        for (i, mut orow) in out.outer_iter_mut().enumerate() {
            let Some(orow) = orow.as_slice_mut() else {
                unreachable!("rows of a column block are contiguous")
            };
            let low = small_sums(orow, tau);
            ln_shifted(orow, Shift::Each(&shift));
            for l in low {
                column.clear();
                column.extend((0..n).map(|j| at(j, l)));
                orow[l] = lse::lse(&column, &kern.nlog[i * n..(i + 1) * n], 1.0);
            }
        }
    });
}

/// Indices of entries below `tau` (or NaN): those are recomputed exactly.
#[inline]
fn small_sums(s: &[f64], tau: f64) -> Vec<usize> {
    if s.iter().all(|&v| v >= tau) {
        return Vec::new();
    }
    s.iter()
        .enumerate()
        .filter(|(_, &v)| v.is_nan() || v < tau)
        .map(|(i, _)| i)
        .collect()
}

enum Shift<'a> {
    Same(f64),
    Each(&'a [f64]),
}

isa_dispatch! {
    /// `out[j] = exp(src[j] − m)` (vectorised; `src ≤ m`).
    fn exp_shifted(src: &[f64], m: f64, out: &mut [f64]) = exp_shifted_k up to AVX2;
}
/// Elements per unrolled block: several independent vectors in flight hide the latency
/// of the polynomial chains.
const UNROLL: usize = 16;

#[inline(always)]
fn exp_shifted_k<M: MulAdd>(src: &[f64], m: f64, out: &mut [f64]) {
    let mut blocks = out.chunks_exact_mut(UNROLL);
    let mut srcs = src.chunks_exact(UNROLL);
    for (o, s) in (&mut blocks).zip(&mut srcs) {
        for l in 0..UNROLL {
            o[l] = f64::exp_nonpos::<M>(s[l] - m);
        }
    }
    for (o, &v) in blocks.into_remainder().iter_mut().zip(srcs.remainder()) {
        *o = f64::exp_nonpos::<M>(v - m);
    }
}

isa_dispatch! {
    /// `out[l] = exp(src[l] − m[l])`.
    fn exp_shifted_each(src: &[f64], m: &[f64], out: &mut [f64]) = exp_shifted_each_k up to AVX2;
}
#[inline(always)]
fn exp_shifted_each_k<M: MulAdd>(src: &[f64], m: &[f64], out: &mut [f64]) {
    let mut blocks = out.chunks_exact_mut(UNROLL);
    let mut srcs = src.chunks_exact(UNROLL);
    let mut ms = m.chunks_exact(UNROLL);
    for ((o, s), mv) in (&mut blocks).zip(&mut srcs).zip(&mut ms) {
        for l in 0..UNROLL {
            o[l] = f64::exp_nonpos::<M>(s[l] - mv[l]);
        }
    }
    for ((o, &v), &mv) in blocks
        .into_remainder()
        .iter_mut()
        .zip(srcs.remainder())
        .zip(ms.remainder())
    {
        *o = f64::exp_nonpos::<M>(v - mv);
    }
}

isa_dispatch! {
    /// `s ← shift + ln s` (vectorised; entries below the normal range give garbage that the
    /// caller replaces).
    fn ln_shifted(s: &mut [f64], shift: Shift<'_>) = ln_shifted_k up to AVX2;
}
#[inline(always)]
fn ln_shifted_k<M: MulAdd>(s: &mut [f64], shift: Shift<'_>) {
    match shift {
        Shift::Same(m) => {
            let mut blocks = s.chunks_exact_mut(UNROLL);
            for b in &mut blocks {
                for v in b.iter_mut() {
                    *v = m + ln_pos::<M>(*v);
                }
            }
            for v in blocks.into_remainder() {
                *v = m + ln_pos::<M>(*v);
            }
        }
        Shift::Each(ms) => {
            let mut blocks = s.chunks_exact_mut(UNROLL);
            let mut mb = ms.chunks_exact(UNROLL);
            for (b, m) in (&mut blocks).zip(&mut mb) {
                for l in 0..UNROLL {
                    b[l] = m[l] + ln_pos::<M>(b[l]);
                }
            }
            for (v, &m) in blocks.into_remainder().iter_mut().zip(mb.remainder()) {
                *v = m + ln_pos::<M>(*v);
            }
        }
    }
}

/// Natural logarithm of a positive normal `x`, branch-free so that it vectorises
/// (fdlibm's reduction and minimax polynomial): `x = 2^k·(1 + f)`, `1 + f ∈ [√½, √2)`,
/// `s = f/(2 + f)`, `ln(1 + f) = f − ½f² + s·(½f² + R(s²))`; error below 1 ulp.
#[inline(always)]
pub(crate) fn ln_pos<M: MulAdd>(x: f64) -> f64 {
    const LN2_HI: f64 = 6.931_471_803_691_238e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    const LG1: f64 = 6.666_666_666_666_735e-1;
    const LG2: f64 = 3.999_999_999_940_942e-1;
    const LG3: f64 = 2.857_142_874_366_239e-1;
    const LG4: f64 = 2.222_219_843_214_978_4e-1;
    const LG5: f64 = 1.818_357_216_161_805e-1;
    const LG6: f64 = 1.531_383_769_920_937_3e-1;
    const LG7: f64 = 1.479_819_860_511_658_6e-1;
    const MAGIC: f64 = 4_503_599_627_370_496.0 + 1023.0; // 2^52 + exponent bias
    let bits = x.to_bits();
    let a = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    // The biased exponent as a float without an int→float conversion: 2^52 + e_biased.
    let k = f64::from_bits(0x4330_0000_0000_0000 | (bits >> 52)) - MAGIC;
    let big = a > std::f64::consts::SQRT_2;
    let f = if big { a * 0.5 } else { a } - 1.0;
    let k = if big { k + 1.0 } else { k };
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * M::mul_add(w, M::mul_add(w, LG6, LG4), LG2);
    let t2 = z * M::mul_add(w, M::mul_add(w, M::mul_add(w, LG7, LG5), LG3), LG1);
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    k * LN2_HI - ((hfsq - M::mul_add(s, hfsq + r, k * LN2_LO)) - f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::real::{HwFma, NoFma};

    #[test]
    fn ln_pos_matches_std() {
        let mut worst = 0.0f64;
        let mut x = 1e-300f64;
        while x < 1e300 {
            for y in [
                x,
                x * 1.37,
                x * 1.414,
                x * std::f64::consts::SQRT_2,
                x * 1.4143,
                x * 1.9999,
            ] {
                let want = y.ln();
                for got in [ln_pos::<NoFma>(y), ln_pos::<HwFma>(y)] {
                    let err = (got - want).abs() / want.abs().max(1e-300);
                    worst = worst.max(err);
                }
            }
            x *= 3.1;
        }
        assert!(worst < 4.0 * f64::EPSILON, "worst relative error {worst:e}");
        assert_eq!(ln_pos::<NoFma>(1.0), 0.0);
        assert!((ln_pos::<NoFma>(f64::MIN_POSITIVE) - f64::MIN_POSITIVE.ln()).abs() < 1e-12);
    }

    /// Direct 2-D LSE against the full cost, in f64.
    fn brute(shape: &[usize], a: &[f64], eps: f64) -> Vec<f64> {
        let g = GridCost::new(shape).unwrap();
        let n = g.len();
        let batch = a.len() / n;
        let mut out = vec![0.0; a.len()];
        for b in 0..batch {
            for x in 0..n {
                let v: Vec<f64> = (0..n).map(|y| a[b * n + y] - g.cost(x, y) / eps).collect();
                let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                out[b * n + x] = m + v.iter().map(|t| (t - m).exp()).sum::<f64>().ln();
            }
        }
        out
    }

    #[test]
    fn log_convolution_matches_brute_force_in_1d_2d_3d_with_large_dynamic_range() {
        let mut rnd = crate::test_rng::uniforms(7);
        for (shape, eps, scale) in [
            (vec![37usize], 1e-3, 5.0),
            (vec![9, 70], 4e-3, 900.0), // range ≫ 708: forces the exact fallback
            (vec![33, 17], 1e-2, 3.0),
            (vec![5, 6, 7], 2e-2, 50.0),
        ] {
            let g = GridCost::new(&shape).unwrap();
            let batch = 2;
            let a: Vec<f64> = (0..batch * g.len())
                .map(|_| (rnd() - 0.5) * scale)
                .collect();
            let want = brute(&shape, &a, eps);
            let grid = CpuGrid::new(g.clone());
            let kernels = grid.kernels(eps);
            let refs: Vec<&AxisKernel> = kernels.iter().collect();
            let mut got = a.clone();
            log_convolve(&shape, &refs, &mut got, &Scratch::default());
            for (k, (x, y)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-12 * y.abs().max(1.0),
                    "{shape:?} entry {k}: {x} vs {y}"
                );
            }
        }
    }

    #[test]
    fn outputs_beyond_the_f64_range_of_the_fast_path_are_exact() {
        // A sharp peak in a corner with a small ε: far outputs sit e^-800 and more below
        // the maximum, where every product of the GEMM path underflows, so they can only
        // be right if the exact fallback ran (in both passes of the 2-D path and in 1-D/3-D).
        for shape in [vec![20usize, 30], vec![60], vec![6, 7, 8]] {
            let g = GridCost::new(&shape).unwrap();
            let a: Vec<f64> = (0..g.len())
                .map(|y| -6000.0 * g.cost(0, y) + (y as f64 * 0.7).sin())
                .collect();
            let eps = 1e-3;
            let want = brute(&shape, &a, eps);
            let peak = a.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lowest = want.iter().cloned().fold(f64::INFINITY, f64::min);
            assert!(
                lowest - peak < -800.0,
                "{shape:?}: the case must need the exact path ({lowest})"
            );
            let grid = CpuGrid::new(g.clone());
            let kernels = grid.kernels(eps);
            let refs: Vec<&AxisKernel> = kernels.iter().collect();
            let mut got = a.clone();
            log_convolve(&shape, &refs, &mut got, &Scratch::default());
            for (k, (x, y)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (x - y).abs() <= 1e-12 * y.abs().max(1.0),
                    "{shape:?} entry {k}: {x} vs {y}"
                );
            }
        }
    }

    #[test]
    fn negative_infinity_entries_and_lines() {
        let shape = [4usize, 5];
        let mut a: Vec<f64> = (0..20).map(|k| (k as f64 * 0.37).sin()).collect();
        for v in a.iter_mut().take(5) {
            *v = f64::NEG_INFINITY; // first row all −∞
        }
        a[13] = f64::NEG_INFINITY;
        let want = brute(&shape, &a, 0.05);
        let grid = CpuGrid::new(GridCost::new(&shape).unwrap());
        let kernels = grid.kernels(0.05);
        let refs: Vec<&AxisKernel> = kernels.iter().collect();
        let mut got = a.clone();
        log_convolve(&shape, &refs, &mut got, &Scratch::default());
        for (x, y) in got.iter().zip(&want) {
            assert!(
                x.is_finite() && (x - y).abs() < 1e-12 * y.abs().max(1.0),
                "{x} vs {y}"
            );
        }
        let mut all = vec![f64::NEG_INFINITY; 20];
        log_convolve(&shape, &refs, &mut all, &Scratch::default());
        assert!(all.iter().all(|&v| v == f64::NEG_INFINITY));
    }
}
