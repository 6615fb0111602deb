//! The costs the exact solvers read: a dense matrix (borrowed when it is already a
//! row-major `f64` matrix of the problem's support, compacted otherwise) or two point
//! clouds whose costs are computed when they are read, never stored.
//!
//! Every cost is computed by one function per source, so the solver's pricing (the row
//! minima of `C_ij − h_j`) and its tree (single entries) see the same bits: a network
//! simplex whose tree and pricing disagreed on a cost by one rounding could cycle.

use crate::backend::cpu::isa::isa_dispatch;
use crate::real::MulAdd;
use ndarray::{ArrayView2, Axis};

/// The ground metric of point clouds: `c(x, y) = |x − y|²` or `|x − y|^p`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Metric {
    /// `c(x, y) = |x − y|² = Σ_k (x_k − y_k)²` (POT's `"sqeuclidean"`, the default).
    #[default]
    SqEuclidean,
    /// `c(x, y) = |x − y|^p` with `p > 0` (`p = 1`: POT's `"euclidean"`; `p = 2` is
    /// [`Metric::SqEuclidean`]).
    EuclideanPow(f64),
}

impl Metric {
    /// Whether the cost is `|x − y|²` ([`Metric::SqEuclidean`] or `EuclideanPow(2)`).
    pub(crate) fn is_squared(self) -> bool {
        matches!(self, Metric::SqEuclidean) || matches!(self, Metric::EuclideanPow(p) if p == 2.0)
    }

    /// The cost of a pair at squared distance `d2`.
    #[inline(always)]
    pub(crate) fn of_sq(self, d2: f64) -> f64 {
        match self {
            Metric::SqEuclidean => d2,
            Metric::EuclideanPow(1.0) => d2.sqrt(),
            Metric::EuclideanPow(2.0) => d2,
            Metric::EuclideanPow(p) => d2.powf(0.5 * p),
        }
    }
}

/// Read access to the cost of a problem over its support (rows and columns of positive
/// mass, in the solver's numbering).
pub(crate) trait Costs: Sync {
    /// Number of rows (sources).
    fn rows(&self) -> usize;
    /// Number of columns (targets).
    fn cols(&self) -> usize;
    /// `C_ij`.
    fn at(&self, i: usize, j: usize) -> f64;
    /// `(min_j C_ij − h_j, the first j attaining it)` over all columns.
    fn row_min(&self, i: usize, h: &[f64], scratch: &mut Vec<f64>) -> (f64, usize);
    /// `C_i·` into `out` (length `cols`).
    fn row(&self, i: usize, out: &mut [f64]);
    /// `C_i·` in place, for sources that store it.
    fn stored_row(&self, _i: usize) -> Option<&[f64]> {
        None
    }
}

/// Row `i` of `c`: borrowed when stored, else computed into `buf`.
#[inline]
pub(crate) fn row_of<'a, C: Costs>(c: &'a C, i: usize, buf: &'a mut Vec<f64>) -> &'a [f64] {
    match c.stored_row(i) {
        Some(r) => r,
        None => {
            buf.resize(c.cols(), 0.0);
            c.row(i, buf);
            buf
        }
    }
}

/// A dense cost in row-major `f64`, rows `row_map[i]` of `data` (row stride `stride`),
/// columns `0..cols` of each row.
pub(crate) struct DenseCosts<'a> {
    data: &'a [f64],
    stride: usize,
    row_map: Option<Vec<usize>>,
    rows: usize,
    cols: usize,
}

impl<'a> DenseCosts<'a> {
    /// Rows `rows` (all rows when `None`) of the `r×cols` row-major matrix `data`.
    pub(crate) fn new(data: &'a [f64], cols: usize, rows: Option<Vec<usize>>) -> Self {
        let n = rows.as_ref().map_or(data.len() / cols.max(1), |r| r.len());
        DenseCosts {
            data,
            stride: cols,
            row_map: rows,
            rows: n,
            cols,
        }
    }

    #[inline(always)]
    fn row_slice(&self, i: usize) -> &[f64] {
        let r = self.row_map.as_ref().map_or(i, |m| m[i]);
        &self.data[r * self.stride..r * self.stride + self.cols]
    }
}

impl Costs for DenseCosts<'_> {
    fn rows(&self) -> usize {
        self.rows
    }
    fn cols(&self) -> usize {
        self.cols
    }
    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f64 {
        self.row_slice(i)[j]
    }
    #[inline]
    fn row_min(&self, i: usize, h: &[f64], _: &mut Vec<f64>) -> (f64, usize) {
        row_min(self.row_slice(i), h)
    }
    fn row(&self, i: usize, out: &mut [f64]) {
        out.copy_from_slice(self.row_slice(i));
    }
    fn stored_row(&self, i: usize) -> Option<&[f64]> {
        Some(self.row_slice(i))
    }
}

/// A dense `f64` copy of `cost` restricted to rows `rows` and columns `cols` (the support
/// of a problem with zero-mass bins, or a cost that is not a row-major `f64` matrix).
pub(crate) fn compact_dense<T: crate::Real>(
    cost: &ArrayView2<'_, T>,
    rows: &[usize],
    cols: &[usize],
) -> Vec<f64> {
    let mut out = Vec::with_capacity(rows.len() * cols.len());
    for &i in rows {
        let r = cost.index_axis(Axis(0), i);
        out.extend(cols.iter().map(|&j| r[j].f64()));
    }
    out
}

/// Point clouds `x` (n×d) and `y` (m×d) in `f64`, row-major, costs by [`Metric`].
///
/// Up to [`DIRECT_DIM`] coordinates a cost is `Σ_k (x_k − y_k)²` summed in order; above,
/// `|x|² + |y|² − 2·x·y` (one dot product per pair; clamped at 0). Either way one
/// function computes every cost the solver reads.
pub(crate) struct PointCosts {
    x: Vec<f64>,
    y: Vec<f64>,
    xx: Vec<f64>,
    yy: Vec<f64>,
    n: usize,
    m: usize,
    d: usize,
    metric: Metric,
}

/// Dimensions up to which point costs are summed coordinate by coordinate.
pub(crate) const DIRECT_DIM: usize = 16;

impl PointCosts {
    /// `x` is `n×d`, `y` is `m×d`, both row-major.
    pub(crate) fn new(x: Vec<f64>, y: Vec<f64>, d: usize, metric: Metric) -> Self {
        let n = x.len() / d.max(1);
        let m = y.len() / d.max(1);
        let norms = |v: &[f64]| -> Vec<f64> {
            v.chunks(d.max(1))
                .map(|r| r.iter().map(|t| t * t).sum())
                .collect()
        };
        let (xx, yy) = if d > DIRECT_DIM {
            (norms(&x), norms(&y))
        } else {
            (Vec::new(), Vec::new())
        };
        PointCosts {
            x,
            y,
            xx,
            yy,
            n,
            m,
            d,
            metric,
        }
    }

    #[inline(always)]
    fn sq(&self, i: usize, j: usize) -> f64 {
        let d = self.d;
        let xi = &self.x[i * d..i * d + d];
        let yj = &self.y[j * d..j * d + d];
        if d > DIRECT_DIM {
            let dot: f64 = dot(xi, yj);
            (self.xx[i] + self.yy[j] - 2.0 * dot).max(0.0)
        } else {
            let mut s = 0.0;
            for k in 0..d {
                let t = xi[k] - yj[k];
                s += t * t;
            }
            s
        }
    }

    /// The dense `n×m` cost matrix (for problems small enough to store it).
    pub(crate) fn to_dense(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.n * self.m];
        for (i, r) in out.chunks_mut(self.m.max(1)).enumerate() {
            self.row(i, r);
        }
        out
    }
}

/// `Σ_k a_k b_k` in eight interleaved partial sums (a fixed order, vectorised).
#[inline(always)]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let full = a.len() / 8 * 8;
    for k in (0..full).step_by(8) {
        for l in 0..8 {
            acc[l] += a[k + l] * b[k + l];
        }
    }
    let mut s = 0.0;
    for k in full..a.len() {
        s += a[k] * b[k];
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + s
}

impl Costs for PointCosts {
    fn rows(&self) -> usize {
        self.n
    }
    fn cols(&self) -> usize {
        self.m
    }
    #[inline(always)]
    fn at(&self, i: usize, j: usize) -> f64 {
        self.metric.of_sq(self.sq(i, j))
    }
    fn row_min(&self, i: usize, h: &[f64], scratch: &mut Vec<f64>) -> (f64, usize) {
        scratch.resize(self.m, 0.0);
        self.row(i, scratch);
        row_min(scratch, h)
    }
    fn row(&self, i: usize, out: &mut [f64]) {
        let metric = self.metric;
        for (j, o) in out.iter_mut().enumerate() {
            *o = metric.of_sq(self.sq(i, j));
        }
    }
}

isa_dispatch! {
    /// `(min_j c_j − h_j, the first j attaining it)`; `(+∞, 0)` for an empty row.
    #[inline]
    pub(crate) fn row_min(c: &[f64], h: &[f64]) -> (f64, usize) = row_min_kernel up to AVX512;
}

#[inline(always)]
pub(crate) fn row_min_kernel<M: MulAdd>(c: &[f64], h: &[f64]) -> (f64, usize) {
    const L: usize = 8;
    let len = c.len().min(h.len());
    let (c, h) = (&c[..len], &h[..len]);
    let mut best = [f64::INFINITY; L];
    let mut at = [0u64; L];
    let mut idx: [u64; L] = std::array::from_fn(|l| l as u64);
    for (cc, hh) in c.chunks_exact(L).zip(h.chunks_exact(L)) {
        for l in 0..L {
            let v = cc[l] - hh[l];
            let better = v < best[l];
            best[l] = if better { v } else { best[l] };
            at[l] = if better { idx[l] } else { at[l] };
            idx[l] += L as u64;
        }
    }
    let (mut v, mut j) = (f64::INFINITY, 0usize);
    for l in 0..L {
        let (bl, al) = (best[l], at[l] as usize);
        if bl < v || (bl == v && al < j) {
            v = bl;
            j = al;
        }
    }
    for k in len / L * L..len {
        let t = c[k] - h[k];
        if t < v {
            v = t;
            j = k;
        }
    }
    (v, j)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_min_is_the_first_minimum() {
        let mut next = crate::test_rng::uniforms(7);
        for len in [0usize, 1, 7, 8, 9, 64, 1001] {
            let c: Vec<f64> = (0..len).map(|_| (next() * 8.0).floor()).collect();
            let h: Vec<f64> = (0..len).map(|_| (next() * 4.0).floor()).collect();
            let mut want = (f64::INFINITY, 0usize);
            for j in 0..len {
                if c[j] - h[j] < want.0 {
                    want = (c[j] - h[j], j);
                }
            }
            assert_eq!(row_min(&c, &h), want, "len {len}");
        }
    }
}
