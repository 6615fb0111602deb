//! Batches of problems on one shared dense cost as matrix products in the log domain.
//!
//! A half-step of `B` problems against one cost computes `S_br = Σ_k exp((p_bk − R_rk)/ε)`,
//! `R` the cost as seen from the side (`C` or `Cᵀ`, `len_out × len_red`) and `p` the other
//! side's potentials. The reduced index `k` is cut into blocks `I` of [`BLOCK`]. With the
//! block maxima of the potentials `p̂_bI = max_{k∈I} p_bk` and the block minima of each cost
//! row `ĉ_rI = min_{k∈I} R_rk`, every term factors as
//!
//! `exp((p_bk − R_rk)/ε) = exp((p̂_bI − ĉ_rI)/ε) · A_bk · K_rk`,
//! `A_bk = exp((p_bk − p̂_bI)/ε) ≤ 1`, `K_rk = exp((ĉ_rI − R_rk)/ε) ≤ 1`,
//!
//! so `S_br = Σ_I exp((p̂_bI − ĉ_rI)/ε) · (K_I·A_Iᵀ)_rb`: one matrix product per block (faer,
//! through [`super::matmul`]), `B·len_red` exponentials for `A` and `B·len_out·len_red/BLOCK`
//! for the block weights, where the plain kernel takes one exponential per term. `K`
//! depends on the cost and `ε` only: [`Factors`] is built once per side and `ε` and kept
//! with the cost.
//!
//! Stability. The block maxima enter relative to each problem's largest potential `F_b`
//! and the block minima relative to each row's smallest cost `Ĉ_r` (`ln S_br` is
//! `(F_b − Ĉ_r)/ε` plus a sum of bounded terms), so no offset of `f` or `C` reaches an
//! exponential, and the result is `Ĉ_r − F_b + ε·(log μ − rest)`, formed with the block
//! weights in f64 (their arguments are of the size of the cost over ε). Every exponential is at
//! most 1; one below the floor `τ` of [`Real::exp_nonpos`] (`e⁻⁸⁷` in f32) is off by at most
//! `τ`, and so is a product that underflows, so a sum is off by at most `2·len_red·τ` in
//! absolute terms. A cost is factored only where it varies within a block by at most
//! [`max_spread`]`·ε` (30 ε in f32): then the block of an output's largest weight holds a
//! term `A_bk·K_rk ≥ e⁻³⁰` (`A_bk = 1` at the block's largest potential), so every sum is
//! far above that error. An output whose sum is within `16/u` of it all the same (`u` the
//! unit roundoff) is recomputed by the plain log-sum-exp of [`super::lse`].
//!
//! Determinism: tasks take fixed chunks of [`ROWS`] outputs, each product runs on the
//! task's thread with the same shapes, so the bits do not depend on the number of threads.

use super::isa::isa_dispatch;
use super::lse;
use super::matmul::gemm_seq;
use crate::real::{exp_f64, MulAdd};
use crate::Real;
use faer::{MatMut, MatRef};
use rayon::prelude::*;

/// Batches of at least this many problems on a shared dense cost take the factored path.
pub(crate) const MIN_BATCH: usize = 2;
/// Reduced entries per block (the inner dimension of each product).
pub(crate) const BLOCK: usize = 64;
/// Outputs per rayon task.
const ROWS: usize = 64;
/// Costs with more entries than this are not factored (the factors double the memory).
pub(crate) const MAX_ENTRIES: usize = 1 << 28;

/// The cost's factors for one side and `ε`: `K` (`len_out × len_red`, the layout of `R`),
/// the block minima relative to each row's minimum, `(ĉ_rI − Ĉ_r)/ε`, and `Ĉ_r`.
pub(crate) struct Factors<T> {
    eps: T,
    len_out: usize,
    len_red: usize,
    block: usize,
    k: Vec<T>,
    /// `(ĉ_rI − Ĉ_r)/ε`, `len_out × blocks`, in f64 (see [`combine`]).
    crel: Vec<f64>,
    /// `Ĉ_r`.
    cmin: Vec<T>,
}

impl<T> std::fmt::Debug for Factors<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Factors")
            .field("len_out", &self.len_out)
            .field("len_red", &self.len_red)
            .field("block", &self.block)
            .finish()
    }
}

impl<T: Real> Factors<T> {
    /// The factors of `rows` (`R`, `len_out × len_red`, row-major) for `eps`, in blocks of
    /// `block` reduced entries; `None` when a cost is not finite or varies within a block
    /// by more than [`max_spread`] times `ε` (sums could then underflow and fall back: the
    /// plain kernel is faster), or when the factors (a copy the size of the cost) cannot be
    /// allocated. The choice depends on the cost, `ε` and the memory only, so a half-step's
    /// result depends on its inputs only.
    pub(crate) fn new(
        rows: &[T],
        len_out: usize,
        len_red: usize,
        eps: T,
        block: usize,
    ) -> Option<Self> {
        Self::with_spread(rows, len_out, len_red, eps, block, max_spread::<T>())
    }

    /// [`Factors::new`] with the largest accepted variation `limit` (tests use it to reach
    /// the fallback).
    fn with_spread(
        rows: &[T],
        len_out: usize,
        len_red: usize,
        eps: T,
        block: usize,
        limit: T,
    ) -> Option<Self> {
        debug_assert_eq!(rows.len(), len_out * len_red);
        let inv_eps = T::one() / eps;
        let larger = |a: T, b: T| if b > a || b.is_nan() { b } else { a };
        let spread = rows
            .par_chunks(len_red.max(1))
            .with_min_len((1 << 15) / len_red.max(1) + 1)
            .map(|row| {
                row.chunks(block)
                    .map(|rb| {
                        let (lo, hi) = rb
                            .iter()
                            .fold((T::infinity(), T::neg_infinity()), |(l, h), &v| {
                                (l.min(v), h.max(v))
                            });
                        (hi - lo) * inv_eps
                    })
                    .fold(T::zero(), larger)
            })
            .reduce(T::zero, larger);
        // NaN or infinite when a cost is not finite: not factored then either.
        if spread.is_nan() || spread > limit {
            return None;
        }
        let nb = len_red.div_ceil(block);
        // The factored copy of the cost is as large as the cost: where it cannot be
        // allocated, the plain kernel (which needs none) runs instead.
        let mut k = crate::alloc::filled("the factored cost", rows.len(), T::zero()).ok()?;
        let mut crel = crate::alloc::filled("the factored cost", len_out * nb, 0.0f64).ok()?;
        let mut cmin = crate::alloc::filled("the factored cost", len_out, T::zero()).ok()?;
        k.par_chunks_mut(len_red)
            .zip(crel.par_chunks_mut(nb))
            .zip(cmin.par_chunks_mut(1))
            .zip(rows.par_chunks(len_red))
            .with_min_len((1 << 15) / len_red.max(1) + 1)
            .for_each(|(((kr, cr), cm), row)| {
                factor_row(row, block, eps, kr, cr, &mut cm[0]);
            });
        Some(Factors {
            eps,
            len_out,
            len_red,
            block,
            k,
            crel,
            cmin,
        })
    }
}

/// The largest variation of the cost over `ε` within a block that the factors accept:
/// 35 % of `−ln τ` (30 in f32, 248 in f64; `τ` the floor of [`Real::exp_nonpos`]), so that
/// each output's block of largest weight sums to at least `τ^0.35`, far above the `τ`-sized
/// errors of underflow.
pub(crate) fn max_spread<T: Real>() -> T {
    let floor = T::exp_nonpos::<crate::real::NoFma>(T::neg_infinity());
    T::of(-0.35 * floor.f64().ln())
}

isa_dispatch! {
    /// One row of `K`: the row's minimum, the block minima relative to it over `ε`, and
    /// `K_rk = exp((ĉ_rI − R_rk)/ε)`.
    fn factor_row<T: Real>(row: &[T], block: usize, eps: T, k: &mut [T], crel: &mut [f64], cmin: &mut T)
        = factor_row_kernel up to AVX512;
}

#[inline(always)]
fn factor_row_kernel<T: Real, M: MulAdd>(
    row: &[T],
    block: usize,
    eps: T,
    k: &mut [T],
    crel: &mut [f64],
    cmin: &mut T,
) {
    let inv_eps = T::one() / eps;
    let lowest = row.iter().fold(T::infinity(), |a, &b| a.min(b));
    *cmin = lowest;
    for ((rb, kb), cr) in row
        .chunks(block)
        .zip(k.chunks_mut(block))
        .zip(crel.iter_mut())
    {
        let lo = rb.iter().fold(T::infinity(), |a, &b| a.min(b));
        *cr = (lo.f64() - lowest.f64()) / eps.f64();
        for (kv, &c) in kb.iter_mut().zip(rb) {
            *kv = T::exp_nonpos::<M>((lo - c) * inv_eps);
        }
    }
}

/// A half-step `out[b,r] = ε·log_marginal[b,r] − ε·LSE_k((other_pot[b,k] − R_rk)/ε)` of
/// `batch` problems on the shared cost `rows` (`R`, the same matrix `factors` was built
/// from) by the factored products. Returns how many outputs fell back to the plain kernel.
pub(crate) fn sinkstep<T: Real>(
    factors: &Factors<T>,
    rows: &[T],
    batch: usize,
    other_pot: &[T],
    log_marginal: &[T],
    out: &mut [T],
) -> usize {
    let (len_out, len_red, block) = (factors.len_out, factors.len_red, factors.block);
    let nb = len_red.div_ceil(block);
    let eps = factors.eps;
    let inv_eps = T::one() / eps;
    let eps64 = eps.f64();
    debug_assert_eq!(other_pot.len(), batch * len_red);
    debug_assert_eq!(out.len(), batch * len_out);

    // Per problem: F_b, the block maxima relative to it over ε (stored [block][problem]),
    // and A. A problem whose potentials are all −∞ takes the plain kernel.
    let mut top = vec![T::neg_infinity(); batch];
    let mut arel = vec![f64::NEG_INFINITY; nb * batch];
    let mut a = vec![T::zero(); batch * len_red];
    for (b, (pb, ab)) in other_pot
        .chunks(len_red)
        .zip(a.chunks_mut(len_red))
        .enumerate()
    {
        let f = pb.iter().fold(T::neg_infinity(), |x, &y| x.max(y));
        top[b] = f;
        if f == T::neg_infinity() {
            continue;
        }
        for (blk, (pi, ai)) in pb.chunks(block).zip(ab.chunks_mut(block)).enumerate() {
            let hi = pi.iter().fold(T::neg_infinity(), |x, &y| x.max(y));
            if hi == T::neg_infinity() {
                continue; // A stays 0 and the block adds nothing
            }
            arel[blk * batch + b] = (hi.f64() - f.f64()) / eps64;
            block_factor(pi, hi, inv_eps, ai);
        }
    }

    // A sum below this is recomputed by the plain kernel (see the module docs).
    let floor = T::exp_nonpos::<crate::real::NoFma>(T::neg_infinity());
    let s_min = 2.0 * 16.0 * len_red as f64 * floor.f64() / T::epsilon().f64();

    let mut by_row = vec![T::zero(); len_out * batch];
    let fallbacks: usize = by_row
        .par_chunks_mut(ROWS * batch)
        .enumerate()
        .map(|(chunk, vals)| {
            let r0 = chunk * ROWS;
            let rc = vals.len() / batch;
            // The block sums (K_I·A_Iᵀ) of this chunk, [block][row][problem].
            let mut p = vec![T::zero(); nb * rc * batch];
            for (blk, pb) in p.chunks_mut(rc * batch).enumerate() {
                let k0 = blk * block;
                let kb = block.min(len_red - k0);
                let kv = MatRef::from_row_major_slice_with_stride(
                    &factors.k[r0 * len_red + k0..],
                    rc,
                    kb,
                    len_red,
                );
                let av = MatRef::from_row_major_slice_with_stride(&a[k0..], batch, kb, len_red)
                    .transpose();
                gemm_seq(
                    T::one(),
                    kv,
                    av,
                    MatMut::from_row_major_slice_mut(pb, rc, batch),
                );
            }
            let mut logs = vec![0.0f64; rc * batch];
            combine(
                &p,
                rc,
                batch,
                &arel,
                &factors.crel[r0 * nb..(r0 + rc) * nb],
                s_min,
                &mut logs,
            );
            let mut fell_back = 0;
            for (r, (vr, lr)) in vals.chunks_mut(batch).zip(logs.chunks(batch)).enumerate() {
                let i = r0 + r;
                for (b, (v, &l)) in vr.iter_mut().zip(lr).enumerate() {
                    let lm = log_marginal[b * len_out + i];
                    *v = if lm == T::neg_infinity() {
                        lm
                    } else if l.is_nan() || top[b] == T::neg_infinity() {
                        fell_back += 1;
                        let pot = &other_pot[b * len_red..(b + 1) * len_red];
                        let row = &rows[i * len_red..(i + 1) * len_red];
                        eps * (lm - lse::lse(pot, row, inv_eps))
                    } else {
                        // In f64, rounded once: the terms are of the size of the cost over ε.
                        T::of((factors.cmin[i].f64() - top[b].f64()) + eps64 * (lm.f64() - l))
                    };
                }
            }
            fell_back
        })
        .sum();
    for (r, vals) in by_row.chunks(batch).enumerate() {
        for (b, &v) in vals.iter().enumerate() {
            out[b * len_out + r] = v;
        }
    }
    fallbacks
}

isa_dispatch! {
    /// `a[k] = exp((p[k] − hi)/ε)`, 0 where `p[k] = −∞`.
    fn block_factor<T: Real>(p: &[T], hi: T, inv_eps: T, a: &mut [T]) = block_factor_kernel up to AVX512;
}

#[inline(always)]
fn block_factor_kernel<T: Real, M: MulAdd>(p: &[T], hi: T, inv_eps: T, a: &mut [T]) {
    for (av, &pv) in a.iter_mut().zip(p) {
        let e = T::exp_nonpos::<M>((pv - hi) * inv_eps);
        *av = if pv == T::neg_infinity() {
            T::zero()
        } else {
            e
        };
    }
}

isa_dispatch! {
    /// Per row `r` of a chunk and problem `b`: `m + ln s`, `m = max_I (arel_Ib − crel_rI)`,
    /// `s = Σ_I exp(arel_Ib − crel_rI − m)·p_Irb`; NaN where `s < s_min` (the plain kernel
    /// recomputes it). In f64 whatever `T`: the block weights' arguments are of the size of
    /// the cost over ε (hundreds), where f32 would round them by 10⁻⁵, as much as all the
    /// other steps together; it costs `B·len_out·len_red/BLOCK` f64 exponentials.
    fn combine<T: Real>(p: &[T], rc: usize, batch: usize, arel: &[f64], crel: &[f64], s_min: f64, out: &mut [f64])
        = combine_kernel up to AVX512;
}

#[inline(always)]
fn combine_kernel<T: Real, M: MulAdd>(
    p: &[T],
    rc: usize,
    batch: usize,
    arel: &[f64],
    crel: &[f64],
    s_min: f64,
    out: &mut [f64],
) {
    let nb = arel.len() / batch;
    let mut mx = vec![f64::NEG_INFINITY; batch];
    let mut s = vec![0.0f64; batch];
    for r in 0..rc {
        let cr = &crel[r * nb..(r + 1) * nb];
        mx.fill(f64::NEG_INFINITY);
        s.fill(0.0);
        for (ab, &c) in arel.chunks_exact(batch).zip(cr) {
            for (m, &av) in mx.iter_mut().zip(ab) {
                let v = av - c;
                *m = if v > *m { v } else { *m };
            }
        }
        for (blk, (ab, &c)) in arel.chunks_exact(batch).zip(cr).enumerate() {
            let pr = &p[(blk * rc + r) * batch..(blk * rc + r + 1) * batch];
            for ((sv, (&av, &pv)), &m) in s.iter_mut().zip(ab.iter().zip(pr)).zip(&mx) {
                // A block whose potentials are all −∞ has weight 0 (and p = 0).
                *sv = M::mul_add(exp_f64::<M>(av - c - m), pv.f64(), *sv);
            }
        }
        for ((o, &sv), &m) in out[r * batch..(r + 1) * batch].iter_mut().zip(&s).zip(&mx) {
            *o = if sv >= s_min && sv.is_finite() {
                m + sv.ln()
            } else {
                f64::NAN
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ε·lm − ε·LSE_k((p_k − R_rk)/ε)` in f64, two passes (max, then sum).
    fn brute(p: &[f64], row: &[f64], lm: f64, eps: f64) -> f64 {
        let v: Vec<f64> = p.iter().zip(row).map(|(a, c)| (a - c) / eps).collect();
        let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        eps * lm - eps * (m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln())
    }

    /// Every block size, odd shapes (a last block shorter than the others, one row): the
    /// factored half-step against the f64 brute force, and no fallback on a smooth cost.
    #[test]
    fn factored_half_step_matches_brute_force_for_every_block_size() {
        let mut next = crate::test_rng::uniforms(2024);
        for &(len_out, len_red, batch) in &[(1usize, 7usize, 2usize), (37, 130, 3), (65, 200, 9)] {
            let xo: Vec<f64> = (0..len_out).map(|i| i as f64 / len_out as f64).collect();
            let xr: Vec<f64> = (0..len_red).map(|k| k as f64 / len_red as f64).collect();
            let rows: Vec<f64> = xo
                .iter()
                .flat_map(|&x| xr.iter().map(move |&y| (x - y) * (x - y)))
                .collect();
            let pot: Vec<f64> = (0..batch * len_red).map(|_| 0.1 * next()).collect();
            let lm: Vec<f64> = (0..batch * len_out)
                .map(|_| -(len_out as f64).ln())
                .collect();
            for &block in &[1usize, 3, 16, 64, 512] {
                for &eps in &[0.05f64, 0.01] {
                    let fac = Factors::new(&rows, len_out, len_red, eps, block).unwrap();
                    let mut out = vec![0.0; batch * len_out];
                    let fell = sinkstep(&fac, &rows, batch, &pot, &lm, &mut out);
                    assert_eq!(fell, 0, "block {block} eps {eps}");
                    for b in 0..batch {
                        for r in 0..len_out {
                            let want = brute(
                                &pot[b * len_red..(b + 1) * len_red],
                                &rows[r * len_red..(r + 1) * len_red],
                                lm[b * len_out + r],
                                eps,
                            );
                            let got = out[b * len_out + r];
                            assert!(
                                (got - want).abs() <= 1e-13 * (1.0 + want.abs()),
                                "block {block} eps {eps} ({b},{r}): {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A cost that jumps within a block at a small ε is not factored. Forced to be (no
    /// limit on the variation), the sums whose blocks underflow are recomputed by the plain
    /// kernel and the results still match the f64 brute force.
    #[test]
    fn underflowing_blocks_fall_back_to_the_plain_kernel() {
        let mut next = crate::test_rng::uniforms(77);
        let (len_out, len_red, batch) = (40usize, 256usize, 4usize);
        let rows: Vec<f32> = (0..len_out * len_red).map(|_| next() as f32).collect();
        let eps = 1e-3f32;
        assert!(Factors::new(&rows, len_out, len_red, eps, BLOCK).is_none());
        let pot: Vec<f32> = (0..batch * len_red).map(|_| next() as f32).collect();
        let lm = vec![0.0f32; batch * len_out];
        let fac = Factors::with_spread(&rows, len_out, len_red, eps, BLOCK, f32::INFINITY).unwrap();
        let mut out = vec![0.0f32; batch * len_out];
        let fell = sinkstep(&fac, &rows, batch, &pot, &lm, &mut out);
        assert!(fell > 0);
        for b in 0..batch {
            for r in 0..len_out {
                let p: Vec<f64> = pot[b * len_red..(b + 1) * len_red]
                    .iter()
                    .map(|&v| v as f64)
                    .collect();
                let row: Vec<f64> = rows[r * len_red..(r + 1) * len_red]
                    .iter()
                    .map(|&v| v as f64)
                    .collect();
                let want = brute(&p, &row, 0.0, eps as f64);
                let got = out[b * len_out + r] as f64;
                assert!((got - want).abs() <= 1e-6, "({b},{r}): {got} vs {want}");
            }
        }
    }
}
