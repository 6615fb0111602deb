//! Exact OT between histograms (POT's `emd` / `emd2`): input checks, the support of each
//! problem (zero-mass bins take no part in the solve), the choice of algorithm, the dual
//! potentials of the whole problem and the certificate; single problems, batches over
//! rayon, and point clouds whose costs are computed when read.

use super::assignment;
use super::certificate::measure;
use super::costs::{compact_dense, Costs, DenseCosts, Metric, PointCosts};
use super::network_simplex::{NetworkSimplex, Stop};
use super::params::{EmdMethod, EmdParams};
use super::result::{EmdResult, ExactMethod, SparsePlan};
use crate::validate::{check_equal_mass, check_finite, check_finite_max, check_histograms};
use crate::{Error, Real, Result};
use ndarray::{Array1, ArrayView1, ArrayView2, ArrayView3, Axis};
use rayon::prelude::*;
use std::any::TypeId;
use std::time::Instant;

/// Exact optimal transport between histograms `mu` (n) and `nu` (m) for the cost `cost`
/// (n×m): `min ⟨P, C⟩ s.t. P·1 = μ, Pᵀ·1 = ν, P ≥ 0` (POT's `ot.emd`; the result's `cost`
/// is `ot.emd2`).
///
/// The totals of `mu` and `nu` must agree within [`Real::MASS_TOL`] relative (1e-6 in
/// `f64`, 1e-4 in `f32`); `nu` is then scaled to the mass of `mu`, as POT does after its
/// check (`np.testing.assert_almost_equal(a.sum(), b.sum(), decimal=6)`, an absolute
/// 1.5e-6). Zero-mass bins are allowed; any cost (negative, tied, integer) is. Computed in
/// `f64` whatever `T`. Square problems whose weights are all equal go to the assignment
/// solver unless [`EmdParams::method`] says otherwise.
///
/// ```
/// use logot::exact::{emd, EmdParams};
/// use ndarray::array;
/// // Two points each on the line, {0, 1} to {0.5, 2}: the monotone matching is optimal.
/// let cost = array![[0.25, 4.0], [0.25, 1.0]];
/// let r = emd(array![0.5, 0.5].view(), array![0.5, 0.5].view(), cost.view(), &EmdParams::default())?;
/// assert!(r.exact && (r.cost - 0.625).abs() < 1e-15);
/// assert_eq!(r.plan.to_dense(), array![[0.5, 0.0], [0.0, 0.5]]);
/// // The potentials certify it: f_i + g_j ≤ C_ij, with equality on the plan.
/// assert!(r.certificate.max_violation <= 1e-15 && r.certificate.duality_gap <= 1e-15);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn emd<T: Real>(
    mu: ArrayView1<'_, T>,
    nu: ArrayView1<'_, T>,
    cost: ArrayView2<'_, T>,
    params: &EmdParams,
) -> Result<EmdResult> {
    let cost3 = cost.insert_axis(Axis(0));
    let mut out = emd_batch(
        mu.insert_axis(Axis(0)),
        nu.insert_axis(Axis(0)),
        cost3,
        params,
    )?;
    Ok(out.pop().expect("one problem"))
}

/// [`emd`] for a batch: `mu` is B×n, `nu` B×m, `cost` B×n×m (one cost per problem) or
/// 1×n×m (one cost shared by all). Problems are solved in parallel (rayon); results come
/// back in order, each with its own report.
///
/// ```
/// use logot::exact::{emd_batch, EmdParams};
/// use ndarray::{array, Array3};
/// let cost = Array3::from_shape_fn((1, 2, 2), |(_, i, j)| (i as f64 - j as f64).abs());
/// let mu = array![[1.0, 0.0], [0.5, 0.5]];
/// let nu = array![[0.0, 1.0], [0.5, 0.5]];
/// let r = emd_batch(mu.view(), nu.view(), cost.view(), &EmdParams::default())?;
/// assert_eq!((r[0].cost, r[1].cost), (1.0, 0.0));
/// # Ok::<(), logot::Error>(())
/// ```
pub fn emd_batch<T: Real>(
    mu: ArrayView2<'_, T>,
    nu: ArrayView2<'_, T>,
    cost: ArrayView3<'_, T>,
    params: &EmdParams,
) -> Result<Vec<EmdResult>> {
    let (a, b) = checked_batch(mu, nu, cost, params)?;
    let (bsz, bc) = (mu.nrows(), cost.dim().0);
    (0..bsz)
        .into_par_iter()
        .map(|k| {
            let c = cost.index_axis(Axis(0), if bc == 1 { 0 } else { k });
            solve_dense(&a[k], &b[k], c, params)
        })
        .collect()
}

/// The checks of [`emd_batch`] (parameters, shapes, weights, costs), and each problem's
/// weights in `f64`, `nu` scaled to the mass of `mu`.
pub(crate) fn checked_batch<T: Real>(
    mu: ArrayView2<'_, T>,
    nu: ArrayView2<'_, T>,
    cost: ArrayView3<'_, T>,
    params: &EmdParams,
) -> Result<(Rows, Rows)> {
    params.check()?;
    // Shapes first: a weight vector of the wrong length is named, whatever its mass.
    let (bsz, n) = mu.dim();
    let (bn, m) = nu.dim();
    let (bc, cn, cm) = cost.dim();
    for (arg, empty, detail) in [
        ("mu", bsz == 0 || n == 0, format!("shape {bsz}×{n}")),
        ("nu", bn == 0 || m == 0, format!("shape {bn}×{m}")),
        ("cost", bc * cn * cm == 0, format!("shape {bc}×{cn}×{cm}")),
    ] {
        if empty {
            return Err(Error::Empty {
                arg: arg.into(),
                detail,
            });
        }
    }
    // One length off names that weight vector; both off, the cost is the odd one out.
    if n != cn && m != cm {
        return Err(Error::shape(
            "cost",
            format!("is {cn}×{cm} but mu has {n} and nu has {m} entries per problem"),
        ));
    }
    if n != cn {
        return Err(Error::shape(
            "mu",
            format!(
                "has {n} entries per problem but cost has {cn} rows (and nu fits its {cm} columns)"
            ),
        ));
    }
    if m != cm {
        return Err(Error::shape(
            "nu",
            format!(
                "has {m} entries per problem but cost has {cm} columns (and mu fits its {cn} rows)"
            ),
        ));
    }
    if bn != bsz {
        return Err(Error::shape(
            "nu",
            format!("batch of {bn} problems but mu has {bsz}"),
        ));
    }
    if bc != 1 && bc != bsz {
        return Err(Error::shape(
            "cost",
            format!("holds {bc} matrices but there are {bsz} problems (give 1 to share one)"),
        ));
    }
    let weights = checked_weights(mu, nu)?;
    let max_abs = check_finite_max("cost", &cost)?;
    check_cost_range(max_abs, "cost")?;
    Ok(weights)
}

/// [`emd`] between point clouds `x` (n×d) and `y` (m×d) with weights `mu`, `nu` (uniform
/// when `None`, POT's default) for the ground cost `metric` (POT's `emd2_lazy`).
///
/// Costs are computed when read: up to [`EmdParams::store_costs_below`] pairs the cost
/// matrix is computed once and stored, above it nothing of size `n·m` is stored (memory
/// `O((n + m)·d)`; the certificate's pass over every pair then recomputes each cost once).
///
/// ```
/// use logot::exact::{emd_points, EmdParams, Metric};
/// use ndarray::array;
/// let x = array![[0.0, 0.0], [1.0, 0.0]];
/// let y = array![[1.0, 1.0], [0.0, 1.0]];
/// let r = emd_points::<f64>(None, None, x.view(), y.view(), Metric::SqEuclidean, &EmdParams::default())?;
/// // Each point moves straight up by 1.
/// assert!(r.exact && (r.cost - 1.0).abs() < 1e-15);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn emd_points<T: Real>(
    mu: Option<ArrayView1<'_, T>>,
    nu: Option<ArrayView1<'_, T>>,
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
    metric: Metric,
    params: &EmdParams,
) -> Result<EmdResult> {
    let mut out = emd_points_batch(
        mu.map(|v| v.insert_axis(Axis(0))),
        nu.map(|v| v.insert_axis(Axis(0))),
        x.insert_axis(Axis(0)),
        y.insert_axis(Axis(0)),
        metric,
        params,
    )?;
    Ok(out.pop().expect("one problem"))
}

/// [`emd_points`] for a batch of B pairs of clouds: `x` B×n×d, `y` B×m×d, weights B×n and
/// B×m (uniform when `None`: `1/n` in `f64`, whatever `T`); in parallel over problems
/// (rayon).
pub fn emd_points_batch<T: Real>(
    mu: Option<ArrayView2<'_, T>>,
    nu: Option<ArrayView2<'_, T>>,
    x: ArrayView3<'_, T>,
    y: ArrayView3<'_, T>,
    metric: Metric,
    params: &EmdParams,
) -> Result<Vec<EmdResult>> {
    let (a, b) = checked_points_batch(mu, nu, x, y, metric, params)?;
    let (bx, n, d) = x.dim();
    let m = y.dim().1;
    let assignment_first = d >= ASSIGNMENT_MIN_DIM;
    (0..bx)
        .into_par_iter()
        .map(|k| {
            let xs = to_f64_rows(x.index_axis(Axis(0), k));
            let ys = to_f64_rows(y.index_axis(Axis(0), k));
            let bound = cost_bound(&xs, &ys, d, metric);
            check_cost_range(bound, "x")?;
            let full = PointCosts::new(xs, ys, d, metric);
            let (a, b) = (&a[k], &b[k]);
            if n.saturating_mul(m) <= params.store_costs_below {
                let dense = full.to_dense();
                let (rows, cols) = supports(a, b);
                let all = DenseCosts::new(&dense, m, None);
                if rows.len() == n && cols.len() == m {
                    return solve_on(
                        a,
                        b,
                        &all,
                        None::<&DenseCosts>,
                        params,
                        None,
                        assignment_first,
                    );
                }
                let sub: Vec<f64> = rows
                    .iter()
                    .flat_map(|&i| cols.iter().map(move |&j| (i, j)))
                    .map(|(i, j)| dense[i * m + j])
                    .collect();
                let support = DenseCosts::new(&sub, cols.len(), None);
                solve_on(a, b, &all, Some(&support), params, None, false)
            } else {
                let (rows, cols) = supports(a, b);
                if rows.len() == n && cols.len() == m {
                    return solve_on(
                        a,
                        b,
                        &full,
                        None::<&PointCosts>,
                        params,
                        Some(bound),
                        assignment_first,
                    );
                }
                let support = Support {
                    full: &full,
                    rows: &rows,
                    cols: &cols,
                };
                solve_on(a, b, &full, Some(&support), params, Some(bound), false)
            }
        })
        .collect()
}

/// The checks of [`emd_points_batch`] (parameters, metric, clouds, weights; the range of
/// each problem's costs is checked when it is solved), and each problem's weights in `f64`
/// (uniform ones `1/n` exactly), `nu` scaled to the mass of `mu`.
pub(crate) fn checked_points_batch<T: Real>(
    mu: Option<ArrayView2<'_, T>>,
    nu: Option<ArrayView2<'_, T>>,
    x: ArrayView3<'_, T>,
    y: ArrayView3<'_, T>,
    metric: Metric,
    params: &EmdParams,
) -> Result<(Rows, Rows)> {
    params.check()?;
    check_metric(metric)?;
    let (bx, n, d) = x.dim();
    let (by, m, dy) = y.dim();
    check_clouds(bx, n, d, by, m, dy)?;
    check_finite("x", &x)?;
    check_finite("y", &y)?;
    let uniform =
        |b: usize, n: usize| ndarray::Array2::from_elem((b, n), T::one() / T::of(n as f64));
    let (mu_u, nu_u) = (uniform(bx, n), uniform(bx, m));
    let (mu_uniform, nu_uniform) = (mu.is_none(), nu.is_none());
    let mu = mu.unwrap_or(mu_u.view());
    let nu = nu.unwrap_or(nu_u.view());
    if mu.dim() != (bx, n) {
        return Err(Error::shape(
            "mu",
            format!("is {:?} but x holds {bx} clouds of {n} points", mu.dim()),
        ));
    }
    if nu.dim() != (bx, m) {
        return Err(Error::shape(
            "nu",
            format!("is {:?} but y holds {bx} clouds of {m} points", nu.dim()),
        ));
    }
    let (mut a, mut b) = checked_weights(mu, nu)?;
    // Uniform weights are 1/n in f64 whatever `T` (1/n in f32 would change the mass).
    if mu_uniform {
        a.iter_mut().for_each(|w| w.fill(1.0 / n as f64));
    }
    if nu_uniform {
        for (w, a) in b.iter_mut().zip(&a) {
            w.fill(a.iter().sum::<f64>() / m as f64);
        }
    }
    Ok((a, b))
}

/// The smallest dimension of point clouds for which [`EmdMethod::Auto`] gives uniform
/// square problems to the assignment solver (below it the network simplex is faster:
/// measured on n = 1024 uniform points of `[0,1]^d`, the assignment solver took 2.6× the
/// simplex's CPU time at d = 2, 1.9× at d = 4, 0.85× at d = 8 and 0.5–0.75× from d = 16 to 784).
const ASSIGNMENT_MIN_DIM: usize = 8;

/// One `f64` vector per problem.
pub(crate) type Rows = Vec<Vec<f64>>;

/// Each problem's weights in `f64` after the input checks, `nu` scaled to the mass of `mu`.
fn checked_weights<T: Real>(mu: ArrayView2<'_, T>, nu: ArrayView2<'_, T>) -> Result<(Rows, Rows)> {
    if mu.nrows() != nu.nrows() {
        return Err(Error::shape(
            "nu",
            format!("batch of {} problems but mu has {}", nu.nrows(), mu.nrows()),
        ));
    }
    let mu_mass = check_histograms("mu", &mu)?;
    let nu_mass = check_histograms("nu", &nu)?;
    check_equal_mass::<T>(&mu_mass, &nu_mass)?;
    let a = mu
        .rows()
        .into_iter()
        .map(|r| r.iter().map(|v| v.f64()).collect())
        .collect();
    let b = nu
        .rows()
        .into_iter()
        .zip(mu_mass.iter().zip(&nu_mass))
        .map(|(r, (ma, mb))| {
            let s = ma / mb;
            r.iter().map(|v| v.f64() * s).collect()
        })
        .collect();
    Ok((a, b))
}

/// The solver's artificial cost is `2·max|C|`: costs must leave room for it.
pub(crate) fn check_cost_range(max_abs: f64, arg: &str) -> Result<()> {
    if max_abs.is_nan() || max_abs > f64::MAX / 4.0 {
        return Err(Error::parameter(
            arg,
            format!("max |C| = {max_abs:e}"),
            "the costs are too large for float64 arithmetic (above 4.5e307); rescale them",
        ));
    }
    Ok(())
}

fn check_metric(metric: Metric) -> Result<()> {
    if let Metric::EuclideanPow(p) = metric {
        if !(p.is_finite() && p > 0.0) {
            return Err(Error::parameter(
                "metric",
                format!("EuclideanPow({p})"),
                "the exponent p must be finite and > 0",
            ));
        }
    }
    Ok(())
}

/// Clouds `x` (bx×n×d) and `y` (by×m×dy): non-empty, same batch and dimension.
pub(crate) fn check_clouds(
    bx: usize,
    n: usize,
    d: usize,
    by: usize,
    m: usize,
    dy: usize,
) -> Result<()> {
    for (arg, b, k, dim) in [("x", bx, n, d), ("y", by, m, dy)] {
        if b == 0 || k == 0 || dim == 0 {
            return Err(Error::Empty {
                arg: arg.into(),
                detail: format!("{b} clouds of {k} points in dimension {dim}"),
            });
        }
    }
    if dy != d {
        return Err(Error::shape(
            "y",
            format!("points have {dy} coordinates but those of x have {d}"),
        ));
    }
    if by != bx {
        return Err(Error::shape(
            "y",
            format!("holds {by} clouds but x holds {bx}"),
        ));
    }
    Ok(())
}

/// A row-major `f64` copy of a matrix.
pub(crate) fn to_f64_rows<T: Real>(v: ArrayView2<'_, T>) -> Vec<f64> {
    v.iter().map(|t| t.f64()).collect()
}

/// An upper bound of every cost between the clouds: `(r_x + r_y + |c_x − c_y|)` through
/// the metric, with `c` each cloud's first point and `r` its radius around it.
pub(crate) fn cost_bound(x: &[f64], y: &[f64], d: usize, metric: Metric) -> f64 {
    fn radius(v: &[f64], d: usize) -> (f64, &[f64]) {
        let c = &v[..d];
        let r = v
            .chunks(d)
            .map(|p| p.iter().zip(c).map(|(s, t)| (s - t) * (s - t)).sum::<f64>())
            .fold(0.0f64, f64::max)
            .sqrt();
        (r, c)
    }
    let (rx, cx) = radius(x, d);
    let (ry, cy) = radius(y, d);
    let dc = cx
        .iter()
        .zip(cy)
        .map(|(s, t)| (s - t) * (s - t))
        .sum::<f64>()
        .sqrt();
    // A little above: the costs computed in floating point may round up.
    let r = (rx + ry + dc) * (1.0 + 1e-12);
    metric.of_sq(r * r)
}

/// One dense problem: `cost` borrowed when it is a row-major `f64` matrix, else copied;
/// its support copied when some bins have no mass.
fn solve_dense<T: Real>(
    a: &[f64],
    b: &[f64],
    cost: ArrayView2<'_, T>,
    params: &EmdParams,
) -> Result<EmdResult> {
    let m = cost.ncols();
    let copy;
    let data: &[f64] = match cost.as_slice() {
        // SAFETY: T is f64 (same type id), so the slice's elements are f64.
        Some(s) if TypeId::of::<T>() == TypeId::of::<f64>() => unsafe {
            std::slice::from_raw_parts(s.as_ptr().cast(), s.len())
        },
        _ => {
            let all_rows: Vec<usize> = (0..cost.nrows()).collect();
            let all_cols: Vec<usize> = (0..m).collect();
            copy = compact_dense(&cost, &all_rows, &all_cols);
            &copy
        }
    };
    let full = DenseCosts::new(data, m, None);
    let (rows, cols) = supports(a, b);
    if rows.len() == a.len() && cols.len() == b.len() {
        return solve_on(a, b, &full, None::<&DenseCosts>, params, None, false);
    }
    let sub = compact_dense(&cost, &rows, &cols);
    let support = DenseCosts::new(&sub, cols.len(), None);
    solve_on(a, b, &full, Some(&support), params, None, false)
}

/// The bins of positive mass of each side.
fn supports(a: &[f64], b: &[f64]) -> (Vec<usize>, Vec<usize>) {
    (
        (0..a.len()).filter(|&i| a[i] > 0.0).collect(),
        (0..b.len()).filter(|&j| b[j] > 0.0).collect(),
    )
}

/// Solve the problem `(a, b, full)` (every bin; `b` already at the mass of `a`):
/// the support's solve, then duals for zero-mass bins, centring and the certificate.
/// `bound` is an upper bound of |C| when known without a pass over the costs.
#[allow(clippy::too_many_arguments)]
fn solve_on<C: Costs, S: Costs>(
    a: &[f64],
    b: &[f64],
    full: &C,
    support: Option<&S>,
    params: &EmdParams,
    bound: Option<f64>,
    assignment_first: bool,
) -> Result<EmdResult> {
    let (n, m) = (a.len(), b.len());
    let (rows, cols) = supports(a, b);
    let uniform_square = n == m
        && rows.len() == n
        && cols.len() == m
        && a.iter().all(|&v| v == a[0])
        && b.iter().all(|&v| v == b[0]);
    let method = match params.method {
        EmdMethod::Auto if uniform_square && assignment_first => ExactMethod::Assignment,
        EmdMethod::Assignment if uniform_square => ExactMethod::Assignment,
        EmdMethod::Assignment => {
            return Err(Error::parameter(
                "method",
                "Assignment",
                "the assignment solver needs a square problem whose weights are all equal",
            ))
        }
        _ => ExactMethod::NetworkSimplex,
    };
    let deadline = params.max_time.map(|t| Instant::now() + t);
    let (triples, fs, gs, iterations, converged): (Vec<(usize, usize, f64)>, _, _, _, _) =
        match method {
            ExactMethod::Assignment => {
                let s = assignment::solve(full, params.max_iters, deadline);
                let t = s
                    .col_of_row
                    .iter()
                    .enumerate()
                    .map(|(i, &j)| (i, j, a[i]))
                    .collect();
                (t, s.u, s.v, s.augmentations, s.optimal)
            }
            _ => {
                let max_abs = match bound {
                    Some(b) => b,
                    None => max_abs_over(full, &rows, &cols),
                };
                let art = if max_abs > 0.0 { 2.0 * max_abs } else { 1.0 };
                let ac: Vec<f64> = rows.iter().map(|&i| a[i]).collect();
                let bc: Vec<f64> = cols.iter().map(|&j| b[j]).collect();
                let mut ns = NetworkSimplex::new(&ac, &bc, art);
                let stop = match support {
                    Some(s) => ns.run(s, params.max_iters, deadline, params.candidates_per_row),
                    None => ns.run(full, params.max_iters, deadline, params.candidates_per_row),
                };
                let (flows, _artificial) = ns.flows();
                let (fc, gc) = ns.duals();
                let t = flows
                    .into_iter()
                    .map(|(i, j, p)| (rows[i], cols[j], p))
                    .collect();
                (t, fc, gc, ns.iterations, stop == Stop::Optimal)
            }
        };
    let (f, g) = full_duals(full, a, b, &rows, &cols, fs, gs);
    let certificate = measure(full, a, b, &f, &g, &triples);
    if !(certificate.primal.is_finite() && certificate.dual.is_finite()) {
        return Err(Error::Numerical(format!(
            "the exact transport cost is {} and its dual value {}",
            certificate.primal, certificate.dual
        )));
    }
    let exact = converged && certificate.holds(params.certificate_tol);
    Ok(EmdResult {
        cost: certificate.primal,
        plan: SparsePlan::from_triples(n, m, triples),
        f: Array1::from(f),
        g: Array1::from(g),
        certificate,
        iterations,
        converged,
        exact,
        method,
    })
}

/// The rows and columns of positive mass of a cost computed when read, renumbered from 0.
pub(crate) struct Support<'a, C> {
    pub(crate) full: &'a C,
    pub(crate) rows: &'a [usize],
    pub(crate) cols: &'a [usize],
}

impl<C: Costs> Costs for Support<'_, C> {
    fn rows(&self) -> usize {
        self.rows.len()
    }
    fn cols(&self) -> usize {
        self.cols.len()
    }
    fn at(&self, i: usize, j: usize) -> f64 {
        self.full.at(self.rows[i], self.cols[j])
    }
    fn row_min(&self, i: usize, h: &[f64], scratch: &mut Vec<f64>) -> (f64, usize) {
        scratch.resize(self.full.cols(), 0.0);
        self.full.row(self.rows[i], scratch);
        let mut best = (f64::INFINITY, 0);
        for (k, &j) in self.cols.iter().enumerate() {
            let v = scratch[j] - h[k];
            if v < best.0 {
                best = (v, k);
            }
        }
        best
    }
    fn row(&self, i: usize, out: &mut [f64]) {
        let mut buf = vec![0.0; self.full.cols()];
        self.full.row(self.rows[i], &mut buf);
        for (o, &j) in out.iter_mut().zip(self.cols) {
            *o = buf[j];
        }
    }
}

/// `max |C_ij|` over rows `rows` and columns `cols` (rows in parallel).
fn max_abs_over<C: Costs>(full: &C, rows: &[usize], cols: &[usize]) -> f64 {
    let m = full.cols();
    rows.par_iter()
        .fold(
            || (vec![0.0; m], 0.0f64),
            |(mut buf, acc), &i| {
                full.row(i, &mut buf);
                let r = cols.iter().fold(acc, |x, &j| x.max(buf[j].abs()));
                (buf, r)
            },
        )
        .map(|(_, r)| r)
        .reduce(|| 0.0, f64::max)
}

/// The potentials of the whole problem from those of the support: a zero-mass source
/// takes `f_i = min_j C_ij − g_j` over the support's targets, then a zero-mass target
/// `g_j = min_i C_ij − f_i` over every source (the largest values keeping every
/// constraint); then both are centred as POT's `center_ot_dual`:
/// `c = (⟨b, g⟩ − ⟨a, f⟩)/(Σa + Σb)`, `f + c`, `g − c` (so `⟨a, f⟩ = ⟨b, g⟩`).
fn full_duals<C: Costs>(
    full: &C,
    a: &[f64],
    b: &[f64],
    rows: &[usize],
    cols: &[usize],
    fs: Vec<f64>,
    gs: Vec<f64>,
) -> (Vec<f64>, Vec<f64>) {
    let (n, m) = (a.len(), b.len());
    let (mut f, mut g) = if rows.len() == n && cols.len() == m {
        (fs, gs)
    } else {
        let mut f = vec![f64::NAN; n];
        let mut g = vec![f64::NAN; m];
        for (k, &i) in rows.iter().enumerate() {
            f[i] = fs[k];
        }
        for (k, &j) in cols.iter().enumerate() {
            g[j] = gs[k];
        }
        // Zero-mass targets are left out of the sources' minimum (h = −∞ there).
        let h: Vec<f64> = g
            .iter()
            .map(|v| if v.is_nan() { f64::NEG_INFINITY } else { *v })
            .collect();
        let mut buf = vec![0.0; m];
        for i in 0..n {
            if a[i] == 0.0 {
                full.row(i, &mut buf);
                f[i] = super::costs::row_min(&buf, &h).0;
            }
        }
        for j in 0..m {
            if b[j] == 0.0 {
                g[j] = (0..n)
                    .map(|i| full.at(i, j) - f[i])
                    .fold(f64::INFINITY, f64::min);
            }
        }
        (f, g)
    };
    let sa: f64 = a.iter().sum();
    let sb: f64 = b.iter().sum();
    let dot = |w: &[f64], p: &[f64]| w.iter().zip(p).map(|(x, y)| x * y).sum::<f64>();
    let c = (dot(b, &g) - dot(a, &f)) / (sa + sb);
    f.iter_mut().for_each(|v| *v += c);
    g.iter_mut().for_each(|v| *v -= c);
    (f, g)
}
