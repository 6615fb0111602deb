//! The cross term of high-dimensional point clouds by a register-blocked micro-kernel (a
//! small GEMM), for the point-cloud costs of [`super::pointcloud`].
//!
//! For `d` above [`CROSS_MIN_D`] a squared distance is formed as
//! `|x − y|² = |x|² + |y|² − 2·x·y`: the norms once per cloud, and the dot products of a
//! block of output points against a tile of reduced points by [`cross_block`], `2d` flops
//! per pair in fused multiply-adds that run at the FLOP rate, instead of the `d` subtractions
//! and `d` dependent multiply-adds of the direct form.
//!
//! Layout: a cloud is packed once ([`Panels`]) in panels of [`W`] points, coordinate-major
//! inside a panel (`data[(p·d + k)·W + lane]` = coordinate `k` of point `p·W + lane`, zero
//! padding), so that one `k`-step of the micro-kernel reads `MR` output coordinates
//! (broadcast) and `NR` reduced ones (one or two vector loads) and updates an `MR × NR` tile
//! of accumulators held in registers (`4 × 16` f32 or `4 × 8` f64: eight 256-bit
//! accumulators, enough independent FMA chains for two FMA pipes of latency 4). The
//! `k`-loop is cut into chunks that keep the reduced panel in L1 while the output panels
//! stream past it.
//!
//! Accuracy: the clouds are centred (the mean of the union subtracted once), so that the
//! norms measure the spread, not the offset, of the data. With unit roundoff `u` the norm
//! form then errs by `|Δc| ≲ γ·u·(|x|² + |y|²)`, `γ ≈ d + 3` in the worst case (about `√d`
//! typically), an absolute error: where `c ≪ |x|² + |y|²` its relative error grows, which
//! only the Euclidean metric (the square root amplifies it near `x = y`) has to fix, and it
//! does: [`finish_costs`] recomputes such pairs in the direct form.

// Lane loops index several fixed-length arrays in step: that is what vectorises.
#![allow(clippy::needless_range_loop)]

use crate::real::{MulAdd, Real};
use crate::Result;

/// Points per panel (one 64-byte cache line of f32 per coordinate).
pub(crate) const W: usize = 16;
/// Output points per micro-tile (rows of the register tile).
pub(crate) const MR: usize = 4;
/// Dimensions from which the point-cloud kernels use the cross term instead of the direct
/// form: on a 2-core AMD EPYC (Zen 3, AVX2) 10 iterations at N = 4096 took 1.29 s against
/// 1.14 s direct at d = 12 and 1.34 s against 1.63 s at d = 16 (a shared machine, ±20%).
pub(crate) const CROSS_MIN_D: usize = 14;
/// Bytes of one panel's `k`-chunk (kept in L1 by the micro-kernel loop).
const CHUNK_BYTES: usize = 8 * 1024;
/// Pairs are recomputed in the direct form (Euclidean metric) when
/// `c < (|x|² + |y|²)/REFINE`: below that the cancellation of the norm form costs more than
/// four bits, and the square root would halve what is left.
const REFINE: f64 = 16.0;

/// Columns of the register tile: two 256-bit vectors of `T`.
const fn nr<T>() -> usize {
    64 / std::mem::size_of::<T>()
}

/// A point cloud packed for [`cross_block`]: centred coordinates in panels of [`W`] points
/// (see the module docs) and the squared norms `|x_i|²`.
#[derive(Debug)]
pub(crate) struct Panels<T> {
    d: usize,
    data: Vec<T>,
    norms: Vec<T>,
}

impl<T: Real> Panels<T> {
    /// Pack `len` points given as structure-of-arrays (`soa[k·len + i]`, already centred).
    pub(crate) fn new(soa: &[T], len: usize, d: usize) -> Result<Self> {
        let panels = len.div_ceil(W);
        let mut data = crate::alloc::filled("points", panels * d * W, T::zero())?;
        for (p, panel) in data.chunks_mut(d * W).enumerate() {
            for (k, row) in panel.chunks_mut(W).enumerate() {
                for (lane, v) in row.iter_mut().enumerate() {
                    let i = p * W + lane;
                    if i < len {
                        *v = soa[k * len + i];
                    }
                }
            }
        }
        let norms = (0..len)
            .map(|i| {
                let s: f64 = (0..d).map(|k| soa[k * len + i].f64().powi(2)).sum();
                T::of(s)
            })
            .collect();
        Ok(Panels { d, data, norms })
    }

    /// Squared norms `|x_i|²`.
    #[cfg(test)]
    pub(crate) fn norms(&self) -> &[T] {
        &self.norms
    }

    /// Coordinate `k` of point `i`.
    #[inline(always)]
    fn at(&self, i: usize, k: usize) -> T {
        self.data[((i / W) * self.d + k) * W + i % W]
    }
}

/// `out[r·ldo + l] = a_{a0 + r} · b_{b0 + l}` for `r < rows`, `l < cols` (rows rounded up
/// to [`MR`] and columns to the register tile are written too, from the zero padding or the
/// next points: `out` must hold them). `a0` and `b0` are multiples of [`W`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn cross_block<T: Real, M: MulAdd>(
    a: &Panels<T>,
    a0: usize,
    rows: usize,
    b: &Panels<T>,
    b0: usize,
    cols: usize,
    out: &mut [T],
    ldo: usize,
) {
    if nr::<T>() == 16 {
        cross_block_nr::<T, M, 16>(a, a0, rows, b, b0, cols, out, ldo);
    } else {
        cross_block_nr::<T, M, 8>(a, a0, rows, b, b0, cols, out, ldo);
    }
}

/// Columns the block fills for `cols` requested ones (a whole number of register tiles).
pub(crate) fn padded_cols<T>(cols: usize) -> usize {
    cols.div_ceil(nr::<T>()) * nr::<T>()
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn cross_block_nr<T: Real, M: MulAdd, const NR: usize>(
    a: &Panels<T>,
    a0: usize,
    rows: usize,
    b: &Panels<T>,
    b0: usize,
    cols: usize,
    out: &mut [T],
    ldo: usize,
) {
    let d = a.d;
    debug_assert!(a0 % W == 0 && b0 % W == 0 && b.d == d);
    let chunk = (CHUNK_BYTES / (W * std::mem::size_of::<T>())).max(1);
    let (row_groups, col_groups) = (rows.div_ceil(MR), cols.div_ceil(NR));
    let mut k0 = 0;
    while k0 < d {
        let kc = chunk.min(d - k0);
        for cg in 0..col_groups {
            let j = b0 + cg * NR;
            let (bp, boff) = (j / W, j % W);
            let bs = &b.data[(bp * d + k0) * W..(bp * d + k0 + kc) * W];
            for rg in 0..row_groups {
                let i = a0 + rg * MR;
                let (ap, aoff) = (i / W, i % W);
                let as_ = &a.data[(ap * d + k0) * W..(ap * d + k0 + kc) * W];
                let mut acc = [[T::zero(); NR]; MR];
                if k0 > 0 {
                    for r in 0..MR {
                        let o = (rg * MR + r) * ldo + cg * NR;
                        acc[r].copy_from_slice(&out[o..o + NR]);
                    }
                }
                micro::<T, M, NR>(as_, aoff, bs, boff, &mut acc);
                for r in 0..MR {
                    let o = (rg * MR + r) * ldo + cg * NR;
                    out[o..o + NR].copy_from_slice(&acc[r]);
                }
            }
        }
        k0 += kc;
    }
}

/// The micro-kernel: `acc[r][l] += Σ_k a[k·W + aoff + r]·b[k·W + boff + l]` over the
/// `a.len()/W` coordinates of the chunk, the `MR × NR` accumulators in registers.
#[inline(always)]
fn micro<T: Real, M: MulAdd, const NR: usize>(
    a: &[T],
    aoff: usize,
    b: &[T],
    boff: usize,
    acc: &mut [[T; NR]; MR],
) {
    assert!(aoff + MR <= W && boff + NR <= W);
    for (ak, bk) in a.chunks_exact(W).zip(b.chunks_exact(W)) {
        let ak: &[T; W] = ak.try_into().unwrap();
        let bk: &[T; W] = bk.try_into().unwrap();
        for r in 0..MR {
            let x = ak[aoff + r];
            for l in 0..NR {
                acc[r][l] = M::mul_add(x, bk[boff + l], acc[r][l]);
            }
        }
    }
}

/// Costs `c/ε` of one output point `i` against the reduced points `j0..j0 + dots.len()` from
/// their dot products (`dots`, overwritten): `c = max(|x|² + |y|² − 2·x·y, 0)`, scaled by
/// `inv_eps` (squared Euclidean), or `√c·inv_eps` (Euclidean, recomputing in the direct form
/// the pairs with `c < (|x|² + |y|²)/16`, where the square root would amplify the
/// cancellation error).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish_costs<T: Real>(
    out: &Panels<T>,
    i: usize,
    red: &Panels<T>,
    j0: usize,
    root: bool,
    inv_eps: T,
    dots: &mut [T],
) {
    let xn = out.norms[i];
    let yn = &red.norms[j0..j0 + dots.len()];
    let two = T::of(2.0);
    if !root {
        for (c, &y) in dots.iter_mut().zip(yn) {
            let v = xn + y - two * *c;
            *c = if v > T::zero() {
                v * inv_eps
            } else {
                T::zero()
            };
        }
        return;
    }
    let tau = T::of(1.0 / REFINE);
    let mut refine = false;
    for (c, &y) in dots.iter_mut().zip(yn) {
        let s = xn + y;
        let v = s - two * *c;
        refine |= v < tau * s;
        *c = if v > T::zero() { v } else { T::zero() };
    }
    for (l, c) in dots.iter_mut().enumerate() {
        if refine && *c < tau * (xn + yn[l]) {
            let j = j0 + l;
            let mut s = T::zero();
            for k in 0..out.d {
                let t = out.at(i, k) - red.at(j, k);
                s += t * t;
            }
            *c = s;
        }
        *c = c.sqrt() * inv_eps;
    }
}

#[cfg(target_arch = "x86_64")]
use super::isa::isa_dispatch;

isa_dispatch! {
    /// [`cross_block`] compiled for the best instruction set (for tests comparing the
    /// variants; the point-cloud kernels inline it into their own dispatched code).
    #[allow(dead_code)]
    fn cross_block_dispatch[cross_block_on]<T: Real>(
        a: &Panels<T>,
        a0: usize,
        rows: usize,
        b: &Panels<T>,
        b0: usize,
        cols: usize,
        out: &mut [T],
        ldo: usize,
    ) = cross_block up to AVX512;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::isa::Isa;

    fn soa(len: usize, d: usize, seed: u64) -> Vec<f64> {
        let mut next = crate::test_rng::uniforms(seed);
        (0..len * d).map(|_| next() * 2.0 - 1.0).collect()
    }

    /// Every instruction-set variant of the micro-kernel against f64 dot products, on
    /// blocks that start inside the clouds and end in the padding, `d` across a chunk edge.
    fn check<T: Real>(tol: f64) {
        for d in [1usize, 13, 64, 200, 300] {
            let (n, m) = (45usize, 71usize);
            let (xs, ys) = (soa(n, d, 7 + d as u64), soa(m, d, 99 + d as u64));
            let xt: Vec<T> = xs.iter().map(|&v| T::of(v)).collect();
            let yt: Vec<T> = ys.iter().map(|&v| T::of(v)).collect();
            let (a, b) = (
                Panels::new(&xt, n, d).unwrap(),
                Panels::new(&yt, m, d).unwrap(),
            );
            for (i, &nv) in a.norms().iter().enumerate() {
                let want: f64 = (0..d).map(|k| xt[k * n + i].f64().powi(2)).sum();
                assert!((nv.f64() - want).abs() <= tol * want, "norm {i}");
            }
            for isa in Isa::available(Isa::Avx512) {
                for (a0, rows, b0, cols) in [(0usize, 32usize, 0usize, 64usize), (32, 13, 64, 7)] {
                    let ldo = padded_cols::<T>(cols);
                    let mut out = vec![T::nan(); rows.div_ceil(MR) * MR * ldo];
                    cross_block_on(isa, &a, a0, rows, &b, b0, cols, &mut out, ldo);
                    for r in 0..rows {
                        for l in 0..cols {
                            let (i, j) = (a0 + r, b0 + l);
                            let want: f64 = (0..d)
                                .map(|k| xt[k * n + i].f64() * yt[k * m + j].f64())
                                .sum();
                            let got = out[r * ldo + l].f64();
                            assert!(
                                (got - want).abs() <= tol * d as f64,
                                "{isa:?} {} d={d} ({i},{j}): {got} vs {want}",
                                T::NAME
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn every_instruction_set_variant_of_the_micro_kernel_matches_f64_dot_products() {
        check::<f64>(1e-15);
        check::<f32>(2e-7);
    }

    /// The Euclidean finish recomputes near-coincident pairs in the direct form: a point
    /// against itself and a tiny displacement give the exact small distances.
    #[test]
    fn euclidean_finish_is_exact_near_coincident_points() {
        let d = 40;
        let mut xs = soa(2, d, 3);
        for k in 0..d {
            xs[k * 2] += 100.0; // far from the origin: the norm form would cancel
            xs[k * 2 + 1] = xs[k * 2] + if k == 5 { 1e-3 } else { 0.0 };
        }
        let xt: Vec<f32> = xs.iter().map(|&v| v as f32).collect();
        let a = Panels::new(&xt, 2, d).unwrap();
        let ldo = padded_cols::<f32>(2);
        let mut out = vec![0f32; MR * ldo];
        cross_block_dispatch(&a, 0, 1, &a, 0, 2, &mut out, ldo);
        let mut row = out[..2].to_vec();
        finish_costs(&a, 0, &a, 0, true, 1.0, &mut row);
        let direct = (xt[5 * 2] - xt[5 * 2 + 1]).abs();
        assert_eq!(row[0], 0.0);
        assert!(
            (row[1] - direct).abs() <= 1e-6 * direct,
            "{row:?} vs {direct}"
        );
    }
}
