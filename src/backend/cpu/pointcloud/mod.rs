//! Point-cloud costs on the CPU (the CPU side of
//! [`CostSource::PointCloud`](crate::backend::CostSource::PointCloud)): half-steps,
//! transport costs and plan-weighted displacements with the cost computed tile by tile,
//! never stored.
//!
//! A half-step on the columns computes, for each target `y_j`,
//! `LSE_i(f_i/ε − c(x_i, y_j)/ε)`. The points are kept as structure-of-arrays (one
//! contiguous array per coordinate) and scaled once per call by `1/√ε` (squared Euclidean)
//! or `1/ε` (Euclidean), so that `c/ε = Σ_k (x'_k − y'_k)²` (then a square root) is the
//! exact direct form: `d` subtractions and `d` fused multiply-adds per pair, accurate to a
//! few ulp of `c/ε` itself even where `c` is tiny (the `|x|² + |y|² − 2⟨x, y⟩` form would
//! lose that to cancellation). A rayon task takes a block of [`ROWS`] output points and
//! streams the reduced cloud past it in tiles that stay in L1; for each output point and
//! tile, pass 1 writes the arguments `v_j = p_j − c_ij/ε` to a small buffer with their
//! lane-wise maximum, the running sum is rescaled only when the maximum grows, and pass 2
//! adds `exp(v_j − max)` (one vectorised exponential per pair), as in [`super::lse`].
//! (Two passes, because one fused pass with a lifted ceiling instead of the maximum is
//! slower: its state spills out of registers.) The kernels are compiled for AVX-512F, for
//! AVX2+FMA and portably, chosen at run time; on a 2-core AMD EPYC (Zen 4) VM the f32
//! half-step runs at about 2.7·10⁹ pairs per core-second with AVX-512 (1.9·10⁹ with AVX2),
//! f64 at 1.1·10⁹ (0.7·10⁹).
//!
//! From `d = CROSS_MIN_D` (14) on, the costs of a block of output points against a tile of
//! reduced points come instead from the cross term `x·y` by the register-blocked
//! micro-kernel of [`super::cross`] (`2d` flops per pair at the FLOP rate), as
//! `c = max(|x|² + |y|² − 2·x·y, 0)` with norms computed once per cloud, on clouds centred
//! once (the mean of their union subtracted) so that `|Δc| ≲ (d + 3)·u·(|x|² + |y|²)`
//! depends on the spread of the data, not on its offset (`u` the unit roundoff); both
//! log-sum-exp passes and the weighted sums below read those costs unchanged.
//!
//! Transport costs, point gradients and `P·V` use the same tiles with weighted sums
//! (`Σ_l P_kl·w_kl` for the weights of [`Weights`]), accumulated per lane in `T` and
//! combined per output point in f64.

// Lane loops index several fixed-length arrays in step: that is what vectorises.
#![allow(clippy::needless_range_loop)]

use super::cross::{cross_block, finish_costs, padded_cols, Panels, CROSS_MIN_D, MR};
#[cfg(target_arch = "x86_64")]
use super::isa::isa_dispatch;
use crate::backend::shape::{check_fg, check_sinkstep};
use crate::backend::{batch_of, CostDims, PlanReport, PointCloudCost, PointMetric, Side};
use crate::real::{MulAdd, Real};
use crate::{Error, Result};
use rayon::prelude::*;

mod kernels;

use kernels::*;

/// Lanes of the accumulators (one AVX-512 register of f32, two AVX2 ones; f64 twice that).
const L: usize = 16;
/// Output points per rayon task: each tile of the reduced cloud is loaded once per block.
const ROWS: usize = 32;
/// Upper bound on the tile length (entries of the argument buffer).
const MAX_TILE: usize = 512;
/// Minimum number of pairs a rayon task should hold.
const MIN_TASK_PAIRS: usize = 1 << 15;

/// Point clouds prepared for the CPU: one [`CloudPair`] shared by every problem, or one
/// per problem (batched clouds; `batch = Some(B)`). Memory `O((n + m)·d)` per pair.
#[derive(Debug)]
pub(crate) struct CpuPointCloud<T> {
    n: usize,
    m: usize,
    d: usize,
    metric: PointMetric,
    batch: Option<usize>,
    pairs: Vec<CloudPair<T>>,
}

/// One pair of clouds: coordinates centred on the mean of both clouds, as
/// structure-of-arrays, `x[k·n + i]` and `y[k·m + j]`, and for `d ≥ CROSS_MIN_D` packed
/// again for the cross-term kernel.
#[derive(Debug)]
struct CloudPair<T> {
    x: Vec<T>,
    y: Vec<T>,
    /// `(x, y)` packed for the cross-term kernel when `d ≥ CROSS_MIN_D`.
    panels: Option<(Panels<T>, Panels<T>)>,
    /// In single precision, the points as given (row-major, not centred: centring rounds
    /// each coordinate), for [`CpuPointCloud::exact_report`]; empty otherwise.
    given: (Vec<T>, Vec<T>),
}

/// A half-step's points of one pair ([`CloudPair::points`]): scaled copies for the direct
/// form, or the packed clouds (then both copies are empty).
struct PassPoints<'a, T> {
    out: Vec<T>,
    red: Vec<T>,
    cross: Option<CrossPass<'a, T>>,
}

/// One cloud's coordinates (structure-of-arrays) and its number of points.
type Cloud<'a, T> = (&'a [T], usize);

/// The points of one half-step: the output cloud (`len_out` points, one per potential
/// computed) and the reduced cloud (`len_red` points, summed over), both scaled so that
/// `c/ε` is the plain distance form.
struct Pass<'a, T> {
    d: usize,
    root: bool,
    len_out: usize,
    len_red: usize,
    out_pts: &'a [T],
    red_pts: &'a [T],
    /// The clouds packed for the cross-term kernel (then `out_pts` and `red_pts` are unused).
    cross: Option<CrossPass<'a, T>>,
}

/// The output and reduced clouds of a half-step packed for [`cross_block`], and `1/ε`.
struct CrossPass<'a, T> {
    out: &'a Panels<T>,
    red: &'a Panels<T>,
    inv_eps: T,
}

/// Structure-of-arrays copy of `p` with `centre` subtracted from every point.
fn soa<T: Real>(p: ndarray::ArrayView2<'_, T>, centre: &[f64]) -> Result<Vec<T>> {
    let mut v = crate::alloc::with_capacity("points", p.len())?;
    for (col, &c) in p.columns().into_iter().zip(centre) {
        v.extend(col.iter().map(|&t| T::of(t.f64() - c)));
    }
    Ok(v)
}

/// The mean of the union of both clouds, per coordinate (costs are translation invariant;
/// subtracting it keeps the norms of the cross-term form at the spread of the data).
fn union_mean<T: Real>(x: ndarray::ArrayView2<'_, T>, y: ndarray::ArrayView2<'_, T>) -> Vec<f64> {
    let count = (x.nrows() + y.nrows()).max(1) as f64;
    x.columns()
        .into_iter()
        .zip(y.columns())
        .map(|(cx, cy)| cx.iter().chain(cy.iter()).map(|v| v.f64()).sum::<f64>() / count)
        .collect()
}

/// Reduced points per tile in the cross-term form (the block's costs, `ROWS × CROSS_TILE`,
/// stay in L1).
const CROSS_TILE: usize = 64;

/// Tile length for dimension `d`: the tile's coordinates and potentials (`(d + 1)·tile`
/// values) plus the argument buffer stay within about 16 KiB, a multiple of [`L`].
fn tile_len<T>(d: usize) -> usize {
    let values = 16 * 1024 / std::mem::size_of::<T>();
    let t = (values / (d + 2)).clamp(4 * L, MAX_TILE);
    t / L * L
}

impl<T: Real> CloudPair<T> {
    /// The pair `(x, y)` (`n×d`, `m×d`) centred on the mean of its union.
    fn new(x: ndarray::ArrayView2<'_, T>, y: ndarray::ArrayView2<'_, T>) -> Result<Self> {
        let (n, m, d) = (x.nrows(), y.nrows(), x.ncols());
        let centre = union_mean(x, y);
        let given = if std::mem::size_of::<T>() == std::mem::size_of::<f32>() {
            let row_major = |p: ndarray::ArrayView2<'_, T>| {
                crate::alloc::collected("points", p.len(), p.iter().copied())
            };
            (row_major(x)?, row_major(y)?)
        } else {
            (Vec::new(), Vec::new())
        };
        let (x, y) = (soa(x, &centre)?, soa(y, &centre)?);
        let panels = match d >= CROSS_MIN_D {
            true => Some((Panels::new(&x, n, d)?, Panels::new(&y, m, d)?)),
            false => None,
        };
        Ok(CloudPair {
            x,
            y,
            panels,
            given,
        })
    }

    /// The half-step's points on `side`, the coordinates multiplied by `scale` (see
    /// [`CpuPointCloud::coordinate_scale`]).
    fn points(&self, side: Side, eps: T, scale: T) -> PassPoints<'_, T> {
        let (out_raw, red_raw) = match side {
            Side::Row => (&self.x, &self.y),
            Side::Col => (&self.y, &self.x),
        };
        if let Some((px, py)) = &self.panels {
            let (out, red) = match side {
                Side::Row => (px, py),
                Side::Col => (py, px),
            };
            let inv_eps = T::one() / eps;
            return PassPoints {
                out: Vec::new(),
                red: Vec::new(),
                cross: Some(CrossPass { out, red, inv_eps }),
            };
        }
        PassPoints {
            out: out_raw.iter().map(|&v| v * scale).collect(),
            red: red_raw.iter().map(|&v| v * scale).collect(),
            cross: None,
        }
    }
}

impl<T: Real> CpuPointCloud<T> {
    pub(crate) fn new(p: &PointCloudCost<'_, T>) -> Result<Self> {
        let pairs = p
            .x()
            .outer_iter()
            .into_par_iter()
            .zip(p.y().outer_iter().into_par_iter())
            .map(|(x, y)| CloudPair::new(x, y))
            .collect::<Result<_>>()?;
        Ok(CpuPointCloud {
            n: p.n(),
            m: p.m(),
            d: p.dim(),
            metric: p.metric(),
            batch: p.batch(),
            pairs,
        })
    }

    /// The index of problem `b`'s pair in `pairs` (and in [`Self::pass_points`]): `b` when
    /// batched, 0 for the shared pair.
    fn pair_index(&self, b: usize) -> usize {
        if self.batch.is_some() {
            b
        } else {
            0
        }
    }

    /// The pair of clouds of problem `b`.
    fn pair(&self, b: usize) -> &CloudPair<T> {
        &self.pairs[self.pair_index(b)]
    }

    /// The points of a half-step on `side`, one entry per pair.
    fn pass_points(&self, side: Side, eps: T) -> Vec<PassPoints<'_, T>> {
        let s = self.coordinate_scale(eps.f64());
        self.pairs
            .par_iter()
            .map(|p| p.points(side, eps, s))
            .collect()
    }

    /// The [`Pass`] of each pair on `side` over the points of [`Self::pass_points`].
    fn passes<'a>(&self, side: Side, points: &'a [PassPoints<'a, T>]) -> Vec<Pass<'a, T>> {
        let (len_out, len_red) = self.lens(side);
        points
            .iter()
            .map(|pp| Pass {
                d: self.d,
                root: self.metric == PointMetric::Euclidean,
                len_out,
                len_red,
                out_pts: &pp.out,
                red_pts: &pp.red,
                cross: pp.cross.as_ref().map(|c| CrossPass {
                    out: c.out,
                    red: c.red,
                    inv_eps: c.inv_eps,
                }),
            })
            .collect()
    }

    pub(crate) fn dims(&self) -> CostDims {
        CostDims {
            n: self.n,
            m: self.m,
            batch: self.batch,
        }
    }

    /// `(output length, reduced length)` of a half-step on `side`.
    fn lens(&self, side: Side) -> (usize, usize) {
        match side {
            Side::Row => (self.n, self.m),
            Side::Col => (self.m, self.n),
        }
    }

    /// `(output cloud, reduced cloud)` of problem `b`'s half-step on `side`, unscaled.
    fn sides(&self, side: Side, b: usize) -> (Cloud<'_, T>, Cloud<'_, T>) {
        let p = self.pair(b);
        match side {
            Side::Row => ((&p.x, self.n), (&p.y, self.m)),
            Side::Col => ((&p.y, self.m), (&p.x, self.n)),
        }
    }

    /// The factor that turns coordinates into ones whose cost is `c/ε`.
    fn coordinate_scale(&self, eps: f64) -> T {
        T::of(match self.metric {
            PointMetric::SqEuclidean => 1.0 / eps.sqrt(),
            PointMetric::Euclidean => 1.0 / eps,
        })
    }

    /// Half-step on a batch:
    /// `out[b,k] = ε·log_marginal[b,k] − ε·LSE_l((other[b,l] − c(k, l))/ε)`.
    pub(crate) fn sinkstep(
        &self,
        side: Side,
        eps: T,
        other: &[T],
        log_marginal: &[T],
        out: &mut [T],
    ) -> Result<()> {
        let (len_out, len_red) = self.lens(side);
        check_sinkstep(
            &self.dims(),
            side,
            other.len(),
            log_marginal.len(),
            out.len(),
        )?;
        let points = self.pass_points(side, eps);
        let passes = self.passes(side, &points);
        let inv_eps = T::one() / eps;
        let pot: Vec<T> = other.iter().map(|&v| v * inv_eps).collect();
        let min_blocks = (MIN_TASK_PAIRS / (ROWS * len_red).max(1)).max(1);
        out.par_chunks_mut(len_out)
            .zip(log_marginal.par_chunks(len_out))
            .zip(pot.par_chunks(len_red))
            .enumerate()
            .for_each(|(b, ((ob, lb), pb))| {
                let pass = &passes[self.pair_index(b)];
                ob.par_chunks_mut(ROWS)
                    .zip(lb.par_chunks(ROWS))
                    .enumerate()
                    .with_min_len(min_blocks)
                    .for_each(|(blk, (o, lm))| {
                        block_lse(pass, blk * ROWS, pb, o);
                        for (v, &l) in o.iter_mut().zip(lm) {
                            *v = if l == T::neg_infinity() {
                                l
                            } else {
                                eps * (l - *v)
                            };
                        }
                    });
            });
        Ok(())
    }

    /// Row sums of `P` and of `P ⊙ W` for the channels `W` of `what`, per problem and point
    /// of `side` (f64, `B×len_out×(1 + channels)`).
    ///
    /// `vals` holds the value channels of [`Weights::Values`] as structure-of-arrays,
    /// `[b][c][l]` (or `[c][l]` shared by the batch); empty otherwise.
    fn weighted(
        &self,
        side: Side,
        f: &[T],
        g: &[T],
        eps: T,
        what: Weights,
        vals: &[T],
    ) -> Result<Vec<f64>> {
        let batch = check_fg(&self.dims(), f.len(), g.len())?;
        let (own, red) = match side {
            Side::Row => (f, g),
            Side::Col => (g, f),
        };
        let (len_out, len_red) = self.lens(side);
        let points = self.pass_points(side, eps);
        let passes = self.passes(side, &points);
        let inv_eps = T::one() / eps;
        let pot: Vec<T> = red.iter().map(|&v| v * inv_eps).collect();
        let ch = 1 + what.channels(self.d);
        let mut res = vec![0.0f64; batch * len_out * ch];
        let min_blocks = (MIN_TASK_PAIRS / (ROWS * len_red).max(1)).max(1);
        let per_vals = what.values_per_problem(len_out, len_red);
        let shared = vals.len() != batch * per_vals;
        res.par_chunks_mut(len_out * ch)
            .zip(own.par_chunks(len_out))
            .zip(pot.par_chunks(len_red))
            .enumerate()
            .for_each(|(b, ((rb, ob), pb))| {
                let pass = &passes[self.pair_index(b)];
                let ((out_raw, _), (red_raw, _)) = self.sides(side, b);
                let weights = WeightCtx {
                    what,
                    out_raw,
                    red_raw,
                    eps: eps.f64(),
                };
                let vb = match what {
                    Weights::Values(_) | Weights::Adjoint if shared => vals,
                    Weights::Values(_) | Weights::Adjoint => {
                        &vals[b * per_vals..(b + 1) * per_vals]
                    }
                    _ => &[],
                };
                rb.par_chunks_mut(ROWS * ch)
                    .zip(ob.par_chunks(ROWS))
                    .enumerate()
                    .with_min_len(min_blocks)
                    .for_each(|(blk, (r, own))| {
                        block_weighted(pass, &weights, blk * ROWS, own, pb, vb, r);
                    });
            });
        Ok(res)
    }

    /// `⟨P_b, C⟩` per problem, on the fly.
    pub(crate) fn transport_cost(&self, f: &[T], g: &[T], eps: T) -> Result<Vec<T>> {
        let rows = self.weighted(Side::Row, f, g, eps, Weights::Cost, &[])?;
        Ok(rows
            .chunks(self.n * 2)
            .map(|b| T::of(b.chunks_exact(2).map(|r| r[1]).sum::<f64>()))
            .collect())
    }

    /// The report of the plans `(f, g)` define, in f64 with each cost in the difference form
    /// `Σ_k (x_k − y_k)²` of the points as given (single precision only, where they are
    /// kept: [`CloudPair`]'s `given`): per problem `‖P·1 − μ‖₁`,
    /// `‖Pᵀ·1 − ν‖₁` and `⟨P, C⟩`. The half-steps' cross-term form `|x|² + |y|² − 2x·y`
    /// rounds each cost by about `u·(|x|² + |y|²)` (`u` the precision's unit), which in f32
    /// at high `d` is a large part of `ε·tol`; measured with it, the report misses most of
    /// the returned potentials' error against the points' cost. Rows in a fixed number of
    /// chunks summed in order: the same bits whatever the number of threads.
    pub(crate) fn exact_report(
        &self,
        f: &[T],
        g: &[T],
        mu: &[T],
        nu: &[T],
        eps: T,
    ) -> Result<Vec<PlanReport>> {
        /// Row chunks per problem (each holds `m` column sums).
        const CHUNKS: usize = 64;
        let (n, m, d) = (self.n, self.m, self.d);
        let batch = check_fg(&self.dims(), f.len(), g.len())?;
        let eps = eps.f64();
        let root = self.metric == PointMetric::Euclidean;
        let rows_per = n.div_ceil(CHUNKS).max(1);
        (0..batch)
            .map(|b| {
                let (x, y) = &self.pair(b).given;
                if x.len() != n * d || y.len() != m * d {
                    return Err(Error::Numerical(
                        "the exact point-cloud report needs the points as given".into(),
                    ));
                }
                let gb: Vec<f64> = g[b * m..(b + 1) * m].iter().map(|v| v.f64()).collect();
                let parts: Vec<(f64, f64, Vec<f64>)> = (0..n.div_ceil(rows_per))
                    .into_par_iter()
                    .map(|chunk| {
                        let mut cols = vec![0.0f64; m];
                        let (mut row_err, mut cost) = (0.0f64, 0.0f64);
                        for i in chunk * rows_per..((chunk + 1) * rows_per).min(n) {
                            let fi = f[b * n + i].f64();
                            let mut row = 0.0f64;
                            if fi > f64::NEG_INFINITY {
                                let xi = &x[i * d..(i + 1) * d];
                                for (j, col) in cols.iter_mut().enumerate() {
                                    if gb[j] == f64::NEG_INFINITY {
                                        continue;
                                    }
                                    let yj = &y[j * d..(j + 1) * d];
                                    let mut c: f64 = xi
                                        .iter()
                                        .zip(yj)
                                        .map(|(a, b)| (a.f64() - b.f64()).powi(2))
                                        .sum();
                                    if root {
                                        c = c.sqrt();
                                    }
                                    let p = ((fi + gb[j] - c) / eps).exp();
                                    row += p;
                                    *col += p;
                                    if p != 0.0 {
                                        cost += p * c;
                                    }
                                }
                            }
                            row_err += (row - mu[b * n + i].f64()).abs();
                        }
                        (row_err, cost, cols)
                    })
                    .collect();
                let mut cols = vec![0.0f64; m];
                let (mut row_error, mut cost) = (0.0f64, 0.0f64);
                for (r, c, part) in &parts {
                    row_error += r;
                    cost += c;
                    for (a, v) in cols.iter_mut().zip(part) {
                        *a += v;
                    }
                }
                let col_error = cols
                    .iter()
                    .zip(&nu[b * m..(b + 1) * m])
                    .map(|(c, v)| (c - v.f64()).abs())
                    .sum();
                Ok(PlanReport {
                    row_error,
                    col_error,
                    cost,
                    mass: None,
                })
            })
            .collect()
    }

    /// Plan marginals and `Σ P ∇c` on `side` (see [`crate::backend::PointCloudKernels`]).
    pub(crate) fn point_gradient(
        &self,
        side: Side,
        f: &[T],
        g: &[T],
        eps: T,
    ) -> Result<(Vec<T>, Vec<T>)> {
        let d = self.d;
        let rows = self.weighted(side, f, g, eps, Weights::Displacement, &[])?;
        let factor = match self.metric {
            PointMetric::SqEuclidean => 2.0,
            PointMetric::Euclidean => 1.0,
        };
        let count = rows.len() / (d + 1);
        let mut mass = Vec::with_capacity(count);
        let mut grad = Vec::with_capacity(count * d);
        for r in rows.chunks_exact(d + 1) {
            mass.push(T::of(r[0]));
            grad.extend(r[1..].iter().map(|&v| T::of(factor * v)));
        }
        Ok((mass, grad))
    }

    /// Plan marginals and `Σ P⊙C` on `side` (see
    /// [`crate::backend::PointCloudKernels::cost_marginals`]).
    pub(crate) fn cost_marginals(
        &self,
        side: Side,
        f: &[T],
        g: &[T],
        eps: T,
    ) -> Result<(Vec<T>, Vec<T>)> {
        let rows = self.weighted(side, f, g, eps, Weights::Cost, &[])?;
        Ok(rows
            .chunks_exact(2)
            .map(|r| (T::of(r[0]), T::of(r[1])))
            .unzip())
    }

    /// `Σ P (α + (a ⊕ b − C)/ε) ∇c` on `side` (see
    /// [`crate::backend::PointCloudKernels::adjoint_point_gradient`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn adjoint_point_gradient(
        &self,
        side: Side,
        f: &[T],
        g: &[T],
        eps: T,
        a: &[T],
        b: &[T],
        alpha: T,
    ) -> Result<Vec<T>> {
        let d = self.d;
        let batch = check_fg(&self.dims(), f.len(), g.len())?;
        for (arg, v, len) in [("a", a, self.n), ("b", b, self.m)] {
            if v.len() != batch * len {
                return Err(Error::shape(
                    arg,
                    format!("has length {} but {batch}×{len} is needed", v.len()),
                ));
            }
        }
        let ((own, len_out), (red, len_red)) = match side {
            Side::Row => ((a, self.n), (b, self.m)),
            Side::Col => ((b, self.m), (a, self.n)),
        };
        // Per problem [b/ε over the reduced points; α + a/ε over the output points], so that
        // the kernel's factor is `vals[len_red + k] + vals[l] − c_kl/ε`.
        let inv_eps = T::one() / eps;
        let mut vals = Vec::with_capacity(batch * (len_out + len_red));
        for k in 0..batch {
            vals.extend(
                red[k * len_red..(k + 1) * len_red]
                    .iter()
                    .map(|&v| v * inv_eps),
            );
            vals.extend(
                own[k * len_out..(k + 1) * len_out]
                    .iter()
                    .map(|&v| alpha + v * inv_eps),
            );
        }
        let rows = self.weighted(side, f, g, eps, Weights::Adjoint, &vals)?;
        let factor = match self.metric {
            PointMetric::SqEuclidean => 2.0,
            PointMetric::Euclidean => 1.0,
        };
        Ok(rows
            .chunks_exact(d + 1)
            .flat_map(|r| r[1..].iter().map(move |&v| T::of(factor * v)))
            .collect())
    }

    /// `out[b,k,:] = Σ_l P_b[k,l]·values[b,l,:]` on `side` (see
    /// [`crate::backend::PointCloudKernels::plan_apply`]).
    pub(crate) fn plan_apply(
        &self,
        side: Side,
        f: &[T],
        g: &[T],
        eps: T,
        values: &[T],
        k: usize,
    ) -> Result<Vec<T>> {
        let batch = batch_of(f.len(), self.n, "f")?;
        let (len_out, len_red) = self.lens(side);
        let per = len_red * k;
        if k == 0 || (values.len() != per && values.len() != batch * per) {
            return Err(Error::shape(
                "values",
                format!(
                    "length {} is neither {len_red}×{k} (shared) nor {batch}×{len_red}×{k}",
                    values.len()
                ),
            ));
        }
        // Row-major [b][l][c] to structure-of-arrays [b][c][l].
        let mut soa_vals = vec![T::zero(); values.len()];
        for (src, dst) in values.chunks(per).zip(soa_vals.chunks_mut(per)) {
            for (l, row) in src.chunks_exact(k).enumerate() {
                for (c, &v) in row.iter().enumerate() {
                    dst[c * len_red + l] = v;
                }
            }
        }
        let rows = self.weighted(side, f, g, eps, Weights::Values(k), &soa_vals)?;
        let mut out = Vec::with_capacity(batch * len_out * k);
        for r in rows.chunks_exact(k + 1) {
            out.extend(r[1..].iter().map(|&v| T::of(v)));
        }
        Ok(out)
    }

    /// Dense plans `P_b[i,j] = exp((f_i + g_j − C_ij)/ε)`, only when they are small.
    pub(crate) fn plan(&self, f: &[T], g: &[T], eps: T) -> Result<Vec<T>> {
        let (n, m, d) = (self.n, self.m, self.d);
        let batch = check_fg(&self.dims(), f.len(), g.len())?;
        // The kernel's own refusal, for a caller of `Backend::plan`; the solver's paths
        // refuse the same plans before they solve (`PreparedProblem::check_plan`).
        crate::cost::check_plan_entries(batch, n, m)?;
        let mut p = crate::alloc::filled("plan", batch * n * m, T::zero())?;
        let root = self.metric == PointMetric::Euclidean;
        p.par_chunks_mut(m).enumerate().for_each(|(bi, row)| {
            let (b, i) = (bi / n, bi % n);
            let fi = f[bi];
            let pair = self.pair(b);
            for (j, slot) in row.iter_mut().enumerate() {
                let mut c = T::zero();
                for k in 0..d {
                    let t = pair.x[k * n + i] - pair.y[k * m + j];
                    c += t * t;
                }
                if root {
                    c = c.sqrt();
                }
                *slot = ((fi + g[b * m + j] - c) / eps).exp();
            }
        });
        Ok(p)
    }
}

// The ISA dispatch of the two block kernels (`kernels.rs`).
isa_dispatch! {
    /// `out[r] = LSE_l(pot[l] − c(r0 + r, l)/ε)` for the block of output points starting at
    /// `r0`. The AVX-512 variant is about 1.4× (f32) to 1.6× (f64) faster than AVX2 even
    /// where the hardware splits 512-bit operations in two, as Zen 4 does (fewer instructions
    /// for the same exponentials).
    fn block_lse[block_lse_on]<T: Real>(pass: &Pass<'_, T>, r0: usize, pot: &[T], out: &mut [T])
        = block_lse_k up to AVX512;
}

isa_dispatch! {
    /// Row sums of `P` and `P ⊙ W` for the output points `r0..r0 + own.len()`:
    /// `res[r, 0] = Σ_l P_kl`, `res[r, 1 + c] = Σ_l P_kl·W_c(k, l)` with
    /// `P_kl = exp(own_k/ε + pot_l − c_kl/ε)`, in f64.
    fn block_weighted[block_weighted_on]<T: Real>(
        pass: &Pass<'_, T>,
        w: &WeightCtx<'_, T>,
        r0: usize,
        own: &[T],
        pot: &[T],
        vals: &[T],
        res: &mut [f64],
    ) = block_weighted_k up to AVX512;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::isa::Isa;

    /// Every instruction-set variant of the half-step and of the weighted sums against a
    /// brute-force f64 log-sum-exp (the public tests run only the variant the CPU picks).
    fn check_variants<T: Real>(tol: f64) {
        let (n, m) = (40usize, 700usize);
        // (d, root, by the cross-term kernel)
        for (d, root, by_cross) in [
            (3usize, false, false),
            (2, true, false),
            (6, false, false),
            (20, false, true),
            (37, true, true),
        ] {
            let mut rnd = crate::test_rng::uniforms(99);
            let out_raw: Vec<T> = (0..n * d).map(|_| T::of(rnd())).collect();
            let red_raw: Vec<T> = (0..m * d).map(|_| T::of(rnd())).collect();
            let eps = 0.03f64;
            let scale = if root { 1.0 / eps } else { 1.0 / eps.sqrt() };
            let out_pts: Vec<T> = out_raw.iter().map(|&v| v * T::of(scale)).collect();
            let red_pts: Vec<T> = red_raw.iter().map(|&v| v * T::of(scale)).collect();
            let mut pot: Vec<T> = (0..m).map(|_| T::of(rnd() * 3.0)).collect();
            pot[5] = T::neg_infinity();
            let panels = (
                Panels::new(&out_raw, n, d).unwrap(),
                Panels::new(&red_raw, m, d).unwrap(),
            );
            let pass = Pass {
                d,
                root,
                len_out: n,
                len_red: m,
                out_pts: &out_pts,
                red_pts: &red_pts,
                cross: by_cross.then_some(CrossPass {
                    out: &panels.0,
                    red: &panels.1,
                    inv_eps: T::of(1.0 / eps),
                }),
            };
            let cost = |i: usize, j: usize| -> f64 {
                let s: f64 = (0..d)
                    .map(|k| (out_raw[k * n + i].f64() - red_raw[k * m + j].f64()).powi(2))
                    .sum();
                (if root { s.sqrt() } else { s }) / eps
            };
            let want: Vec<f64> = (0..n)
                .map(|i| {
                    let v: Vec<f64> = (0..m).map(|j| pot[j].f64() - cost(i, j)).collect();
                    let mx = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    mx + v.iter().map(|t| (t - mx).exp()).sum::<f64>().ln()
                })
                .collect();
            // Every variant this CPU runs: portable, AVX2 + FMA, AVX-512.
            let mut variants: Vec<Vec<T>> = Vec::new();
            for isa in Isa::available(Isa::Avx512) {
                let mut out = vec![T::zero(); n];
                for (blk, o) in out.chunks_mut(ROWS).enumerate() {
                    block_lse_on(isa, &pass, blk * ROWS, &pot, o);
                }
                variants.push(out);
            }
            for got in &variants {
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    // The norm form errs by about u·(|x|² + |y|²)/ε ≈ u·d/ε here.
                    let tol = if by_cross { tol * d as f64 } else { tol };
                    assert!(
                        (g.f64() - w).abs() <= tol * w.abs().max(1.0),
                        "{} d={d} root={root} row {i}: {g} vs {w}",
                        T::NAME
                    );
                }
            }
            // Transport cost on the rows: Σ_j exp(own_i/ε + pot_j − c_ij/ε)·c_ij.
            let own: Vec<T> = (0..n).map(|i| T::of(-0.01 * i as f64)).collect();
            let w = WeightCtx {
                what: Weights::Cost,
                out_raw: &out_raw,
                red_raw: &red_raw,
                eps,
            };
            let tol = if by_cross { tol * d as f64 } else { tol };
            for isa in Isa::available(Isa::Avx512) {
                let mut res = vec![0.0f64; n * 2];
                for (blk, (r, o)) in res.chunks_mut(ROWS * 2).zip(own.chunks(ROWS)).enumerate() {
                    block_weighted_on(isa, &pass, &w, blk * ROWS, o, &pot, &[], r);
                }
                for i in 0..n {
                    let (mut mass, mut tc) = (0.0, 0.0);
                    for j in 0..m {
                        let p = (own[i].f64() / eps + pot[j].f64() - cost(i, j)).exp();
                        mass += p;
                        tc += p * cost(i, j) * eps;
                    }
                    assert!((res[2 * i] - mass).abs() <= tol * mass, "{isa:?} mass {i}");
                    assert!((res[2 * i + 1] - tc).abs() <= tol * tc, "{isa:?} cost {i}");
                }
            }
            // Adjoint-weighted displacements: Σ_j P_ij (â_i + b̂_j − c_ij/ε) ∇ (unit vectors
            // for the Euclidean cost), values [b̂ (m); â (n)].
            let vals: Vec<T> = (0..m + n).map(|_| T::of(rnd() * 4.0 - 2.0)).collect();
            let w = WeightCtx {
                what: Weights::Adjoint,
                ..w
            };
            for isa in Isa::available(Isa::Avx512) {
                let ch = 1 + d;
                let mut res = vec![0.0f64; n * ch];
                for (blk, (r, o)) in res.chunks_mut(ROWS * ch).zip(own.chunks(ROWS)).enumerate() {
                    block_weighted_on(isa, &pass, &w, blk * ROWS, o, &pot, &vals, r);
                }
                for i in 0..n {
                    let mut want = vec![0.0f64; d];
                    for j in 0..m {
                        let c = cost(i, j);
                        let p = (own[i].f64() / eps + pot[j].f64() - c).exp();
                        let fac = p * (vals[m + i].f64() + vals[j].f64() - c);
                        let fac = if root { fac / (c * eps) } else { fac };
                        for (k, wk) in want.iter_mut().enumerate() {
                            *wk += fac * (out_raw[k * n + i].f64() - red_raw[k * m + j].f64());
                        }
                    }
                    let scale = want.iter().fold(1e-3f64, |a, v| a.max(v.abs()));
                    for k in 0..d {
                        let got = res[i * ch + 1 + k];
                        assert!(
                            (got - want[k]).abs() <= 20.0 * tol * scale,
                            "{isa:?} d={d} root={root} adjoint {i},{k}: {got} vs {}",
                            want[k]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_instruction_set_variant_matches_brute_force() {
        check_variants::<f64>(1e-12);
        check_variants::<f32>(2e-5);
    }
}
