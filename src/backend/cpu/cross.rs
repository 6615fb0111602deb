//! The cross term of high-dimensional point clouds as matrix products (faer, through
//! [`super::matmul`]), for the point-cloud costs of [`super::pointcloud`].
//!
//! For `d` from [`CROSS_MIN_D`] on a squared distance is formed as
//! `|x − y|² = |x|² + |y|² − 2·x·y`: the norms once per cloud, and the dot products of a
//! block of output points against a tile of reduced points by [`cross_block`], one GEMM
//! (`rows × d` by `d × cols`, on the calling thread: the point-cloud kernels run it inside
//! their own rayon tasks) at the FLOP rate, instead of the `d` subtractions and `d`
//! dependent multiply-adds per pair of the direct form.
//!
//! Layout: a cloud keeps its centred coordinates as structure-of-arrays
//! (`soa[k·len + i]` = coordinate `k` of point `i`), which is a column-major `len × d`
//! matrix: a block of points is a strided view, never a copy (faer packs it).
//!
//! Accuracy: the clouds are centred (the mean of the union subtracted once), so that the
//! norms measure the spread, not the offset, of the data. With unit roundoff `u` the norm
//! form then errs by `|Δc| ≲ γ·u·(|x|² + |y|²)`, `γ ≈ d + 3` in the worst case (about `√d`
//! typically), an absolute error: where `c ≪ |x|² + |y|²` its relative error grows, which
//! only the Euclidean metric (the square root amplifies it near `x = y`) has to fix, and it
//! does: [`finish_costs`] recomputes such pairs in the direct form.

use crate::Real;
use faer::{MatMut, MatRef};

/// Dimensions from which the point-cloud kernels use the cross term instead of the direct
/// form: on a 2-core AMD EPYC (Zen 3, AVX2) 10 iterations at N = 4096 took 1.29 s against
/// 1.14 s direct at d = 12 and 1.34 s against 1.63 s at d = 16 (a shared machine, ±20%).
pub(crate) const CROSS_MIN_D: usize = 14;
/// Pairs are recomputed in the direct form (Euclidean metric) when
/// `c < (|x|² + |y|²)/REFINE`: below that the cancellation of the norm form costs more than
/// four bits, and the square root would halve what is left.
const REFINE: f64 = 16.0;

/// A point cloud for [`cross_block`]: centred coordinates as structure-of-arrays and the
/// squared norms `|x_i|²`.
#[derive(Debug)]
pub(crate) struct CrossCloud<T> {
    len: usize,
    d: usize,
    soa: Vec<T>,
    norms: Vec<T>,
}

impl<T: Real> CrossCloud<T> {
    /// `len` points given as structure-of-arrays (`soa[k·len + i]`, already centred).
    pub(crate) fn new(soa: &[T], len: usize, d: usize) -> Self {
        let norms = (0..len)
            .map(|i| {
                let s: f64 = (0..d).map(|k| soa[k * len + i].f64().powi(2)).sum();
                T::of(s)
            })
            .collect();
        CrossCloud {
            len,
            d,
            soa: soa[..len * d].to_vec(),
            norms,
        }
    }

    /// Squared norms `|x_i|²`.
    #[cfg(test)]
    pub(crate) fn norms(&self) -> &[T] {
        &self.norms
    }

    /// Coordinate `k` of point `i`.
    #[inline(always)]
    fn at(&self, i: usize, k: usize) -> T {
        self.soa[k * self.len + i]
    }

    /// Points `i0..i0 + rows` as a `rows × d` view.
    fn block(&self, i0: usize, rows: usize) -> MatRef<'_, T> {
        let end = if self.d == 0 {
            i0
        } else {
            (self.d - 1) * self.len + i0 + rows
        };
        MatRef::from_column_major_slice_with_stride(&self.soa[i0..end], rows, self.d, self.len)
    }
}

/// `out[r·ldo + l] = a_{a0 + r} · b_{b0 + l}` for `r < rows`, `l < cols`: one GEMM on the
/// calling thread.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cross_block<T: Real>(
    a: &CrossCloud<T>,
    a0: usize,
    rows: usize,
    b: &CrossCloud<T>,
    b0: usize,
    cols: usize,
    out: &mut [T],
    ldo: usize,
) {
    debug_assert!(a.d == b.d && cols <= ldo);
    if rows == 0 || cols == 0 {
        return;
    }
    let c = MatMut::from_row_major_slice_with_stride_mut(
        &mut out[..(rows - 1) * ldo + cols],
        rows,
        cols,
        ldo,
    );
    super::matmul::gemm_seq(
        T::one(),
        a.block(a0, rows),
        b.block(b0, cols).transpose(),
        c,
    );
}

/// Costs `c/ε` of one output point `i` against the reduced points `j0..j0 + dots.len()` from
/// their dot products (`dots`, overwritten): `c = max(|x|² + |y|² − 2·x·y, 0)`, scaled by
/// `inv_eps` (squared Euclidean), or `√c·inv_eps` (Euclidean, recomputing in the direct form
/// the pairs with `c < (|x|² + |y|²)/16`, where the square root would amplify the
/// cancellation error).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish_costs<T: Real>(
    out: &CrossCloud<T>,
    i: usize,
    red: &CrossCloud<T>,
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
                s = s + t * t;
            }
            *c = s;
        }
        *c = c.sqrt() * inv_eps;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soa(len: usize, d: usize, seed: u64) -> Vec<f64> {
        let mut next = crate::test_rng::uniforms(seed);
        (0..len * d).map(|_| next() * 2.0 - 1.0).collect()
    }

    /// Blocks of dot products against f64 ones: blocks inside the clouds and at their ends,
    /// odd sizes, `d` across faer's 512-term reduction blocks.
    fn check<T: Real>(tol: f64) {
        for d in [1usize, 13, 64, 200, 600] {
            let (n, m) = (45usize, 71usize);
            let (xs, ys) = (soa(n, d, 7 + d as u64), soa(m, d, 99 + d as u64));
            let xt: Vec<T> = xs.iter().map(|&v| T::of(v)).collect();
            let yt: Vec<T> = ys.iter().map(|&v| T::of(v)).collect();
            let (a, b) = (CrossCloud::new(&xt, n, d), CrossCloud::new(&yt, m, d));
            for (i, &nv) in a.norms().iter().enumerate() {
                let want: f64 = (0..d).map(|k| xt[k * n + i].f64().powi(2)).sum();
                assert!((nv.f64() - want).abs() <= tol * want, "norm {i}");
            }
            for (a0, rows, b0, cols) in [
                (0usize, 32usize, 0usize, 64usize),
                (32, 13, 64, 7),
                (3, 1, 70, 1),
            ] {
                let ldo = cols + 5;
                let mut out = vec![T::nan(); rows * ldo];
                cross_block(&a, a0, rows, &b, b0, cols, &mut out, ldo);
                for r in 0..rows {
                    for l in 0..cols {
                        let (i, j) = (a0 + r, b0 + l);
                        let want: f64 = (0..d)
                            .map(|k| xt[k * n + i].f64() * yt[k * m + j].f64())
                            .sum();
                        let got = out[r * ldo + l].f64();
                        assert!(
                            (got - want).abs() <= tol * d as f64,
                            "{} d={d} ({i},{j}): {got} vs {want}",
                            T::NAME
                        );
                    }
                    // The padding between rows is left alone.
                    assert!(out[r * ldo + cols].is_nan());
                }
            }
        }
    }

    #[test]
    fn blocks_of_dot_products_match_f64() {
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
        let a = CrossCloud::new(&xt, 2, d);
        let mut out = vec![0f32; 2];
        cross_block(&a, 0, 1, &a, 0, 2, &mut out, 2);
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
