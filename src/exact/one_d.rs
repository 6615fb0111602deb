//! Exact optimal transport on the line (POT's `emd_1d`, `emd2_1d`, `wasserstein_1d`).
//!
//! For a cost `c(x, y) = h(x − y)` with `h` convex (`|t|^p`, `p ≥ 1`), the monotone plan is
//! optimal: sort both sides, then walk the two cumulative distributions together
//! (the north-west corner rule on the sorted problem). With `F`, `G` the cumulative weights,
//! `W = ∫₀^M h(F⁻¹(q) − G⁻¹(q)) dq`, a sum over the `≤ n + m − 1` pieces of the merge of
//! `F` and `G`: `O((n + m) log(n + m))` for the sorts and `O(n + m)` for the walk.
//!
//! The walk is POT's (`emd_1d_sorted`): at source `i` with remaining weight `wᵢ` and target
//! `j` with `wⱼ`, the cell `(i, j)` gets `min(wᵢ, wⱼ)` (the source's weight when `wᵢ < wⱼ`
//! or `j` is the last target, the target's otherwise) and the exhausted side advances.
//! Its cells form a staircase that spans every source and target (a spanning tree of the
//! bipartite graph); the dual potentials follow along it, `f_i + g_j = C_ij` on each cell.
//! Because `C_ij = h(x_i − y_j)` on sorted points is a Monge matrix
//! (`C_ij + C_i'j' ≤ C_ij' + C_i'j` for `i < i'`, `j < j'`, by the convexity of `h`), every
//! other pair's reduced cost is a sum of such inequalities along the staircase, so
//! `f_i + g_j ≤ C_ij` everywhere: the walk is optimal and the potentials are a dual optimum.
//!
//! Gradients ([`wasserstein_1d_grad`]): with the plan held fixed (envelope theorem),
//! `∂W/∂x_i = Σ_j P_ij h'(x_i − y_j)` and `∂W/∂y_j = −Σ_i P_ij h'(x_i − y_j)`, exact where
//! the points of each side are distinct (for `p = 1`, also where no `x_i` equals a `y_j`);
//! `∂W/∂a`, `∂W/∂b` are the potentials `(f, g)` centred as POT's `center_ot_dual`, exact
//! along mass-preserving directions where they are unique, i.e. where no partial sum
//! `Σ_{k≤K} a_(k)` of the sorted sources equals one `Σ_{l≤L} b_(l)` of the targets (below
//! the total).

use super::certificate::Certificate;
use super::costs::Metric;
use super::result::{EmdResult, ExactMethod, SparsePlan};
use super::sort;
use crate::validate::{check_equal_mass, check_finite, check_histograms};
use crate::{Error, Real, Result};
use ndarray::{Array1, ArrayView1, ArrayView2, Axis};
use rayon::prelude::*;

/// The relative tolerance of the certificate a 1-D result is judged `exact` by (duality gap
/// relative to mass × largest cost, dual violation relative to the largest cost, marginal
/// errors relative to the mass).
pub const CERTIFICATE_TOL: f64 = 1e-9;

/// Problems with at most this many pairs have their dual violation checked on every
/// pair; larger ones by the monotone search of [`max_violation_sorted`].
const BRUTE_PAIRS: usize = 1 << 22;

/// The cost `h(t)` on the line for a metric (`t = x − y`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineCost {
    /// The exponent `p ≥ 1` of `|t|^p`; `None` for `t²` computed as a product (POT's
    /// `"sqeuclidean"`).
    p: Option<f64>,
}

impl LineCost {
    /// From a metric, `p ≥ 1` (the error names `arg`).
    pub(crate) fn new(metric: Metric, arg: &str) -> Result<Self> {
        match metric {
            Metric::SqEuclidean => Ok(LineCost { p: None }),
            Metric::EuclideanPow(p) => Self::power(p, arg),
        }
    }

    /// `|t|^p`, `p ≥ 1` (the error names `arg`).
    pub(crate) fn power(p: f64, arg: &str) -> Result<Self> {
        if !(p.is_finite() && p >= 1.0) {
            return Err(Error::parameter(
                arg,
                p,
                "the exponent p of |x − y|^p must be finite and ≥ 1 (the sorted matching is \
                 optimal for convex costs only)",
            ));
        }
        Ok(LineCost { p: Some(p) })
    }

    /// `h(t)`.
    #[inline(always)]
    pub(crate) fn h(self, t: f64) -> f64 {
        match self.p {
            None => t * t,
            Some(1.0) => t.abs(),
            Some(2.0) => t * t,
            Some(p) => t.abs().powf(p),
        }
    }

    /// `h'(t)` (0 at `t = 0` for `p = 1`).
    #[inline(always)]
    pub(crate) fn dh(self, t: f64) -> f64 {
        match self.p {
            None => 2.0 * t,
            Some(1.0) => {
                if t > 0.0 {
                    1.0
                } else if t < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            }
            Some(2.0) => 2.0 * t,
            Some(p) => {
                if t == 0.0 {
                    0.0
                } else {
                    p * t.abs().powf(p - 1.0) * t.signum()
                }
            }
        }
    }
}

/// Weights of one side in sorted order: all equal to `w`, or listed.
#[derive(Clone, Copy)]
pub(crate) enum SortedWeights<'a> {
    Uniform(f64),
    Listed(&'a [f64]),
}

impl SortedWeights<'_> {
    #[inline(always)]
    fn at(&self, k: usize) -> f64 {
        match self {
            SortedWeights::Uniform(w) => *w,
            SortedWeights::Listed(v) => v[k],
        }
    }
}

/// POT's walk over sorted sources `u` (weights `wu`) and targets `v` (weights `wv`):
/// calls `cell(i, j, mass, c_ij)` for every cell of the staircase, zero-mass ones included,
/// and returns `Σ mass·c` summed in walk order.
#[inline(always)]
pub(crate) fn walk(
    u: &[f64],
    v: &[f64],
    wu: SortedWeights<'_>,
    wv: SortedWeights<'_>,
    h: LineCost,
    mut cell: impl FnMut(usize, usize, f64, f64),
) -> f64 {
    let (n, m) = (u.len(), v.len());
    let (mut i, mut j) = (0usize, 0usize);
    let (mut wi, mut wj) = (wu.at(0), wv.at(0));
    let mut cost = 0.0;
    loop {
        let c = h.h(u[i] - v[j]);
        if wi < wj || j == m - 1 {
            cost += c * wi;
            cell(i, j, wi, c);
            i += 1;
            if i == n {
                break;
            }
            wj -= wi;
            wi = wu.at(i);
        } else {
            cost += c * wj;
            cell(i, j, wj, c);
            j += 1;
            if j == m {
                break;
            }
            wi -= wj;
            wj = wv.at(j);
        }
    }
    cost
}

/// `W = Σ mass·h(u − v)` of sorted sides, without the cells: equal sizes with uniform
/// weights sum `h(u_k − v_k)/n`, anything else walks.
pub(crate) fn sorted_value(
    u: &[f64],
    v: &[f64],
    wu: SortedWeights<'_>,
    wv: SortedWeights<'_>,
    h: LineCost,
) -> f64 {
    if let (SortedWeights::Uniform(a), SortedWeights::Uniform(b)) = (wu, wv) {
        if u.len() == v.len() && a == b {
            return u.iter().zip(v).map(|(x, y)| h.h(x - y)).sum::<f64>() * a;
        }
    }
    walk(u, v, wu, wv, h, |_, _, _, _| {})
}

/// Validated weights of one side: `None` is uniform `1/len`; given ones are non-empty,
/// finite, non-negative, of positive total and of length `len`. Returns the weights (or
/// `None`) and their total.
pub(super) fn weights<T: Real>(
    arg: &str,
    w: Option<ArrayView1<'_, T>>,
    len: usize,
    of: &str,
) -> Result<(Option<Vec<f64>>, f64)> {
    match w {
        None => Ok((None, 1.0)),
        Some(w) => {
            if w.len() != len {
                return Err(Error::shape(
                    arg,
                    format!("has {} weights for the {len} points of {of}", w.len()),
                ));
            }
            let mass = check_histograms(arg, &w.insert_axis(Axis(0)))?[0];
            Ok((Some(w.iter().map(|v| v.f64()).collect()), mass))
        }
    }
}

/// Points of one side: non-empty and finite.
pub(super) fn points<T: Real>(arg: &str, x: &ArrayView1<'_, T>) -> Result<Vec<f64>> {
    if x.is_empty() {
        return Err(Error::Empty {
            arg: arg.into(),
            detail: "no points".into(),
        });
    }
    check_finite(arg, x)?;
    Ok(x.iter().map(|v| v.f64()).collect())
}

/// Both sides' masses agree within `T::MASS_TOL` (relative); returns the factor that
/// scales the second side's weights to the first side's mass (POT: `b · Σa / Σb`).
pub(super) fn balance<T: Real>(mass_a: f64, mass_b: f64) -> Result<f64> {
    check_equal_mass::<T>(&[mass_a], &[mass_b])?;
    Ok(mass_a / mass_b)
}

/// One checked problem on the line in input order: the points, the weights (`None`:
/// uniform), the second side scaled to the first side's mass by `scale_b`.
pub(super) struct Line {
    pub(super) u: Vec<f64>,
    pub(super) v: Vec<f64>,
    pub(super) a: Option<Vec<f64>>,
    pub(super) b: Option<Vec<f64>>,
    pub(super) mass: f64,
    pub(super) scale_b: f64,
}

impl Line {
    /// The checks of every function on the line, errors naming `names` (points of each
    /// side, then weights of each side).
    pub(super) fn new<T: Real>(
        xa: ArrayView1<'_, T>,
        xb: ArrayView1<'_, T>,
        a: Option<ArrayView1<'_, T>>,
        b: Option<ArrayView1<'_, T>>,
        names: [&str; 4],
    ) -> Result<Self> {
        let u = points(names[0], &xa)?;
        let v = points(names[1], &xb)?;
        let (a, mass) = weights(names[2], a, u.len(), names[0])?;
        let (mut b, mass_b) = weights(names[3], b, v.len(), names[1])?;
        let scale_b = balance::<T>(mass, mass_b)?;
        if let Some(b) = b.as_mut() {
            b.iter_mut().for_each(|w| *w *= scale_b);
        }
        Ok(Line {
            u,
            v,
            a,
            b,
            mass,
            scale_b,
        })
    }
}

/// One validated problem on the line, sorted: positions, weights in sorted order and the
/// permutations back to the input order.
struct Sorted {
    u: Vec<f64>,
    v: Vec<f64>,
    pu: Vec<u32>,
    pv: Vec<u32>,
    /// Weights in input order (uniform: `None`), the second side already scaled.
    a: Option<Vec<f64>>,
    b: Option<Vec<f64>>,
    /// Weights in sorted order (empty when uniform).
    wa: Vec<f64>,
    wb: Vec<f64>,
    mass: f64,
    scale_b: f64,
}

impl Sorted {
    /// `line` sorted.
    fn new(line: Line) -> Self {
        let Line {
            u: u0,
            v: v0,
            a,
            b,
            mass: mass_a,
            scale_b,
        } = line;
        let (mut k, mut t, mut tp) = (Vec::new(), Vec::new(), Vec::new());
        let (mut u, mut pu, mut v, mut pv) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        sort::argsort(&u0, &mut u, &mut pu, &mut k, &mut t, &mut tp);
        sort::argsort(&v0, &mut v, &mut pv, &mut k, &mut t, &mut tp);
        let gather = |w: &Option<Vec<f64>>, p: &[u32]| match w {
            Some(w) => p.iter().map(|&i| w[i as usize]).collect(),
            None => Vec::new(),
        };
        let wa = gather(&a, &pu);
        let wb = gather(&b, &pv);
        Sorted {
            u,
            v,
            pu,
            pv,
            a,
            b,
            wa,
            wb,
            mass: mass_a,
            scale_b,
        }
    }

    fn weights(&self) -> (SortedWeights<'_>, SortedWeights<'_>) {
        // Uniform sides carry mass 1 (b scaled to a's mass when a is given).
        let wa = match self.a {
            Some(_) => SortedWeights::Listed(&self.wa),
            None => SortedWeights::Uniform(1.0 / self.u.len() as f64),
        };
        let wb = match self.b {
            Some(_) => SortedWeights::Listed(&self.wb),
            None => SortedWeights::Uniform(self.scale_b / self.v.len() as f64),
        };
        (wa, wb)
    }

    /// The weights of side `a` or `b` in input order (uniform ones expanded).
    fn input_weights(&self, first: bool) -> Vec<f64> {
        let (w, len, scale) = if first {
            (&self.a, self.u.len(), 1.0)
        } else {
            (&self.b, self.v.len(), self.scale_b)
        };
        match w {
            Some(w) => w.clone(),
            None => vec![scale / len as f64; len],
        }
    }
}

/// The cells of the walk with the potentials along them, in sorted numbering.
struct Staircase {
    cells: Vec<(u32, u32, f64)>,
    f: Vec<f64>,
    g: Vec<f64>,
    cost: f64,
}

fn staircase(s: &Sorted, h: LineCost) -> Staircase {
    let (n, m) = (s.u.len(), s.v.len());
    let (wa, wb) = s.weights();
    let mut cells = Vec::with_capacity(n + m - 1);
    let (mut f, mut g) = (vec![f64::NAN; n], vec![f64::NAN; m]);
    f[0] = 0.0;
    let cost = walk(&s.u, &s.v, wa, wb, h, |i, j, w, c| {
        cells.push((i as u32, j as u32, w));
        // Each cell after the first adds one new source or target to the staircase.
        if g[j].is_nan() {
            g[j] = c - f[i];
        } else if f[i].is_nan() {
            f[i] = c - g[j];
        }
    });
    // A walk cut short by rounding (the last weights a few ulps apart) leaves the
    // remaining targets or sources of zero residual mass: they continue the staircase
    // along the last row or column.
    let (li, lj) = (n - 1, m - 1);
    let (fl, gl) = (f[li], g[lj]);
    for (gj, vj) in g.iter_mut().zip(&s.v) {
        if gj.is_nan() {
            *gj = h.h(s.u[li] - vj) - fl;
        }
    }
    for (fi, ui) in f.iter_mut().zip(&s.u) {
        if fi.is_nan() {
            *fi = h.h(ui - s.v[lj]) - gl;
        }
    }
    Staircase { cells, f, g, cost }
}

/// POT's `center_ot_dual`: `f + c`, `g − c` with `c = (⟨b, g⟩ − ⟨a, f⟩)/(Σa + Σb)`, so that
/// `⟨a, f⟩ = ⟨b, g⟩`.
fn center(f: &mut [f64], g: &mut [f64], a: &[f64], b: &[f64]) {
    let fa: f64 = a.iter().zip(f.iter()).map(|(w, x)| w * x).sum();
    let gb: f64 = b.iter().zip(g.iter()).map(|(w, x)| w * x).sum();
    let c = (gb - fa) / (a.iter().sum::<f64>() + b.iter().sum::<f64>());
    f.iter_mut().for_each(|x| *x += c);
    g.iter_mut().for_each(|x| *x -= c);
}

/// `max_ij f_i + g_j − h(u_i − v_j)` over sorted `u`, `v` (potentials in sorted order):
/// every pair when there are at most [`BRUTE_PAIRS`], else by divide and conquer on the
/// rows, since `A_ij = g_j − h(u_i − v_j)` is supermodular on sorted points (convex `h`)
/// and the first maximiser of row `i` never decreases with `i`: `O((n + m) log n)`
/// evaluations, exact up to the rounding of `A`.
pub(crate) fn max_violation_sorted(u: &[f64], v: &[f64], f: &[f64], g: &[f64], h: LineCost) -> f64 {
    let (n, m) = (u.len(), v.len());
    let a = |i: usize, j: usize| g[j] - h.h(u[i] - v[j]);
    if n.saturating_mul(m) <= BRUTE_PAIRS {
        return (0..n)
            .into_par_iter()
            .map(|i| {
                (0..m)
                    .map(|j| f[i] + a(i, j))
                    .fold(f64::NEG_INFINITY, f64::max)
            })
            .reduce(|| f64::NEG_INFINITY, f64::max);
    }
    fn rows(
        lo: usize,
        hi: usize,
        jl: usize,
        jr: usize,
        f: &[f64],
        a: &(impl Fn(usize, usize) -> f64 + Sync),
    ) -> f64 {
        if lo >= hi {
            return f64::NEG_INFINITY;
        }
        let mid = lo + (hi - lo) / 2;
        let (mut best, mut arg) = (f64::NEG_INFINITY, jl);
        for j in jl..=jr {
            let x = a(mid, j);
            if x > best {
                best = x;
                arg = j;
            }
        }
        let here = f[mid] + best;
        let (l, r) = if hi - lo > 4096 {
            rayon::join(
                || rows(lo, mid, jl, arg, f, a),
                || rows(mid + 1, hi, arg, jr, f, a),
            )
        } else {
            (
                rows(lo, mid, jl, arg, f, a),
                rows(mid + 1, hi, arg, jr, f, a),
            )
        };
        here.max(l).max(r)
    }
    rows(0, n, 0, m - 1, f, &a)
}

/// Exact optimal transport between weighted points on the line: POT's
/// `emd_1d(x_a, x_b, a, b, metric)` plan (sparse; `plan.to_dense()` is POT's dense return),
/// its cost (`emd2_1d`), the dual potentials (centred as POT's `center_ot_dual`) and the
/// certificate measured on them.
///
/// `a`, `b`: weights (`None`: uniform, `1/n` and `1/m`), non-negative with totals equal
/// within [`Real::MASS_TOL`] relative (1e-6 in f64, 1e-4 in f32); `b` is then scaled to the
/// mass of `a`, as POT does. `metric`: [`Metric::SqEuclidean`] (POT's default) or
/// [`Metric::EuclideanPow`]`(p)`, `p ≥ 1` (POT's `"minkowski"`; `p = 1` its
/// `"euclidean"`). The plan keeps the walk's positive cells (at most `n + m − 1`); the
/// dual violation is checked on every pair up to 4·2²⁰ pairs and above by a divide and
/// conquer over the rows (the first maximiser of `g_j − C_ij` never moves left as `i`
/// grows, since `C` is a Monge matrix on sorted points): `O((n + m) log n)`.
///
/// Errors name the argument: empty or non-finite `x_a` / `x_b`; a weight vector of
/// another length, negative, non-finite or of zero total (`a` / `b`); unequal totals; a
/// metric exponent below 1 (`metric`).
///
/// ```
/// use logot::exact::{emd_1d, Metric};
/// use ndarray::array;
/// // {0, 1} → {2, 3} with uniform weights: each point moves by 2, |2|² = 4.
/// let r = emd_1d(array![1.0f64, 0.0].view(), array![2.0, 3.0].view(), None, None, Metric::SqEuclidean)?;
/// assert_eq!(r.cost, 4.0);
/// assert_eq!(r.plan.to_dense(), array![[0.0, 0.5], [0.5, 0.0]]);
/// assert!(r.exact && r.certificate.duality_gap < 1e-15);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn emd_1d<T: Real>(
    x_a: ArrayView1<'_, T>,
    x_b: ArrayView1<'_, T>,
    a: Option<ArrayView1<'_, T>>,
    b: Option<ArrayView1<'_, T>>,
    metric: Metric,
) -> Result<EmdResult> {
    let h = LineCost::new(metric, "metric")?;
    let s = Sorted::new(Line::new(x_a, x_b, a, b, ["x_a", "x_b", "a", "b"])?);
    let st = staircase(&s, h);
    let (n, m) = (s.u.len(), s.v.len());
    let (wa, wb) = (s.input_weights(true), s.input_weights(false));
    // Back to the input numbering.
    let mut f = vec![0.0; n];
    let mut g = vec![0.0; m];
    for (k, &i) in s.pu.iter().enumerate() {
        f[i as usize] = st.f[k];
    }
    for (k, &j) in s.pv.iter().enumerate() {
        g[j as usize] = st.g[k];
    }
    center(&mut f, &mut g, &wa, &wb);
    let triples: Vec<(usize, usize, f64)> = st
        .cells
        .iter()
        .filter(|c| c.2 > 0.0)
        .map(|&(i, j, w)| (s.pu[i as usize] as usize, s.pv[j as usize] as usize, w))
        .collect();
    let plan = SparsePlan::from_triples(n, m, triples);
    // The certificate, on the returned (input-order) plan and potentials.
    let c_of = |i: usize, j: usize| h.h(x_a[i].f64() - x_b[j].f64());
    let mut rows = vec![0.0; n];
    let mut cols = vec![0.0; m];
    let mut slack = 0.0f64;
    for (i, j, p) in plan.iter() {
        rows[i] += p;
        cols[j] += p;
        slack = slack.max((c_of(i, j) - f[i] - g[j]).abs());
    }
    let dual = wa.iter().zip(&f).map(|(w, x)| w * x).sum::<f64>()
        + wb.iter().zip(&g).map(|(w, x)| w * x).sum::<f64>();
    let fs: Vec<f64> = s.pu.iter().map(|&i| f[i as usize]).collect();
    let gs: Vec<f64> = s.pv.iter().map(|&j| g[j as usize]).collect();
    let violation = max_violation_sorted(&s.u, &s.v, &fs, &gs, h).max(0.0);
    let err = |sum: &[f64], w: &[f64]| {
        sum.iter().zip(w).map(|(x, y)| (x - y).abs()).sum::<f64>() / s.mass
    };
    // The largest cost is at one end of the two ranges (h grows with |t|).
    let max_abs_cost = h.h(s.u[n - 1] - s.v[0]).max(h.h(s.u[0] - s.v[m - 1]));
    let certificate = Certificate {
        primal: st.cost,
        dual,
        duality_gap: (st.cost - dual).abs(),
        max_violation: violation,
        max_slack_on_support: slack,
        marginal_error_a: err(&rows, &wa),
        marginal_error_b: err(&cols, &wb),
        mass: s.mass,
        max_abs_cost,
    };
    let exact = certificate.holds(CERTIFICATE_TOL);
    Ok(EmdResult {
        cost: st.cost,
        plan,
        f: Array1::from(f),
        g: Array1::from(g),
        certificate,
        iterations: st.cells.len(),
        converged: true,
        exact,
        method: ExactMethod::Sorting,
    })
}

/// The exact transport cost on the line, POT's `emd2_1d(x_a, x_b, a, b, metric)`: the
/// cost of [`emd_1d`] without the plan, potentials or certificate (sorts and one walk).
///
/// ```
/// use logot::exact::{emd2_1d, Metric};
/// use ndarray::array;
/// let c = emd2_1d(array![0.0f64, 1.0].view(), array![2.0, 3.0].view(), None, None, Metric::EuclideanPow(1.0))?;
/// assert_eq!(c, 2.0);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn emd2_1d<T: Real>(
    x_a: ArrayView1<'_, T>,
    x_b: ArrayView1<'_, T>,
    a: Option<ArrayView1<'_, T>>,
    b: Option<ArrayView1<'_, T>>,
    metric: Metric,
) -> Result<f64> {
    let h = LineCost::new(metric, "metric")?;
    let s = Sorted::new(Line::new(x_a, x_b, a, b, ["x_a", "x_b", "a", "b"])?);
    let (wa, wb) = s.weights();
    Ok(walk(&s.u, &s.v, wa, wb, h, |_, _, _, _| {}))
}

/// POT's `wasserstein_1d(u_values, v_values, u_weights, v_weights, p)`:
/// `W_p^p = ∫₀¹ |F⁻¹(q) − G⁻¹(q)|^p dq` (the p-th power, no root), `p ≥ 1`.
///
/// Weights as in [`emd_1d`] (`None`: uniform; totals equal within [`Real::MASS_TOL`], the
/// second side scaled to the first's mass). Errors name the argument (`u_values`,
/// `v_values`, `u_weights`, `v_weights`, `p`).
///
/// ```
/// use ndarray::array;
/// // Translation by t: W_p^p = |t|^p.
/// let u = array![0.0f64, 0.3, 0.7];
/// let v = &u + 0.5;
/// let w = logot::exact::wasserstein_1d(u.view(), v.view(), None, None, 3.0)?;
/// assert!((w - 0.125).abs() < 1e-15);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein_1d<T: Real>(
    u_values: ArrayView1<'_, T>,
    v_values: ArrayView1<'_, T>,
    u_weights: Option<ArrayView1<'_, T>>,
    v_weights: Option<ArrayView1<'_, T>>,
    p: f64,
) -> Result<f64> {
    let h = LineCost::power(p, "p")?;
    let s = Sorted::new(Line::new(
        u_values,
        v_values,
        u_weights,
        v_weights,
        ["u_values", "v_values", "u_weights", "v_weights"],
    )?);
    let (wa, wb) = s.weights();
    Ok(sorted_value(&s.u, &s.v, wa, wb, h))
}

/// [`wasserstein_1d`] for a batch: row `k` of `u_values` (`B×n`) against row `k` of
/// `v_values` (`B×m`), with per-row weights (`B×n`, `B×m`) or uniform ones; problems in
/// parallel (rayon), each result independent of the thread count.
///
/// ```
/// use ndarray::array;
/// let u = array![[0.0f64, 1.0], [0.0, 1.0]];
/// let v = array![[0.0f64, 1.0], [2.0, 3.0]];
/// let w = logot::exact::wasserstein_1d_batch(u.view(), v.view(), None, None, 1.0)?;
/// assert_eq!(w.to_vec(), vec![0.0, 2.0]);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein_1d_batch<T: Real>(
    u_values: ArrayView2<'_, T>,
    v_values: ArrayView2<'_, T>,
    u_weights: Option<ArrayView2<'_, T>>,
    v_weights: Option<ArrayView2<'_, T>>,
    p: f64,
) -> Result<Array1<f64>> {
    let h = LineCost::power(p, "p")?;
    let bsz = line_batch_size(&u_values, &v_values, u_weights.as_ref(), v_weights.as_ref())?;
    let out: Vec<Result<f64>> = (0..bsz)
        .into_par_iter()
        .map(|k| {
            let s = Sorted::new(
                Line::new(
                    u_values.index_axis_move(Axis(0), k),
                    v_values.index_axis_move(Axis(0), k),
                    u_weights.map(|w| w.index_axis_move(Axis(0), k)),
                    v_weights.map(|w| w.index_axis_move(Axis(0), k)),
                    ["u_values", "v_values", "u_weights", "v_weights"],
                )
                .map_err(|e| in_problem(e, k, bsz))?,
            );
            let (wa, wb) = s.weights();
            Ok(sorted_value(&s.u, &s.v, wa, wb, h))
        })
        .collect();
    out.into_iter()
        .collect::<Result<Vec<f64>>>()
        .map(Array1::from)
}

/// The number of problems of a batch on the line: the rows of `u_values`, at least one, as
/// many in `v_values` and in the weights given.
pub(super) fn line_batch_size<T>(
    u_values: &ArrayView2<'_, T>,
    v_values: &ArrayView2<'_, T>,
    u_weights: Option<&ArrayView2<'_, T>>,
    v_weights: Option<&ArrayView2<'_, T>>,
) -> Result<usize> {
    batch_size(
        ("u_values", u_values.nrows()),
        "problems",
        [
            ("v_values", Some(v_values.nrows())),
            ("u_weights", u_weights.map(|w| w.nrows())),
            ("v_weights", v_weights.map(|w| w.nrows())),
        ],
    )
}

/// The number of problems of a batch: the `first` argument's count, at least one (an empty
/// batch is `a batch of 0 {what}`), and as many in each of the `others` given.
pub(super) fn batch_size(
    first: (&str, usize),
    what: &str,
    others: [(&str, Option<usize>); 3],
) -> Result<usize> {
    let (name, bsz) = first;
    if bsz == 0 {
        return Err(Error::Empty {
            arg: name.into(),
            detail: format!("a batch of 0 {what}"),
        });
    }
    for (arg, rows) in others {
        let rows = rows.unwrap_or(bsz);
        if rows != bsz {
            return Err(Error::shape(
                arg,
                format!("holds {rows} problems but {name} holds {bsz}"),
            ));
        }
    }
    Ok(bsz)
}

/// An error of problem `k` of a batch of `bsz`, saying which.
pub(crate) fn in_problem(e: Error, k: usize, bsz: usize) -> Error {
    if bsz == 1 {
        return e;
    }
    match e {
        Error::UnequalMass {
            detail,
            mu,
            nu,
            rel,
            tol,
        } => Error::UnequalMass {
            detail: format!("{detail} in problem {k}"),
            mu,
            nu,
            rel,
            tol,
        },
        other => other.rename_arg(|a| format!("{a}[{k}]")),
    }
}

/// [`wasserstein_1d`] with its gradients: the value `W_p^p`, its derivatives with respect
/// to every position and the dual potentials (the derivatives with respect to the weights
/// along mass-preserving directions, centred).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Wasserstein1dGrad {
    /// `W_p^p`.
    pub value: f64,
    /// `∂W_p^p/∂u_values` (exact where the values of each side are distinct).
    pub grad_u_values: Array1<f64>,
    /// `∂W_p^p/∂v_values`.
    pub grad_v_values: Array1<f64>,
    /// The source potential `f` (`∂W_p^p/∂u_weights` up to a constant; see the module
    /// docs for where it is unique).
    pub grad_u_weights: Array1<f64>,
    /// The target potential `g`.
    pub grad_v_weights: Array1<f64>,
}

/// [`wasserstein_1d`] and its gradients ([`Wasserstein1dGrad`]), for use as a loss.
///
/// ```
/// use ndarray::array;
/// // W_2^2 between {0, 1} and {0.5, 2}: (0.5² + 1²)/2; ∂/∂u_0 = 2·(0 − 0.5)/2.
/// let r = logot::exact::wasserstein_1d_grad(array![0.0f64, 1.0].view(), array![0.5, 2.0].view(), None, None, 2.0)?;
/// assert_eq!(r.value, 0.625);
/// assert_eq!(r.grad_u_values.to_vec(), vec![-0.5, -1.0]);
/// assert_eq!(r.grad_v_values.to_vec(), vec![0.5, 1.0]);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein_1d_grad<T: Real>(
    u_values: ArrayView1<'_, T>,
    v_values: ArrayView1<'_, T>,
    u_weights: Option<ArrayView1<'_, T>>,
    v_weights: Option<ArrayView1<'_, T>>,
    p: f64,
) -> Result<Wasserstein1dGrad> {
    let h = LineCost::power(p, "p")?;
    let s = Sorted::new(Line::new(
        u_values,
        v_values,
        u_weights,
        v_weights,
        ["u_values", "v_values", "u_weights", "v_weights"],
    )?);
    let (n, m) = (s.u.len(), s.v.len());
    let st = staircase(&s, h);
    let mut du = vec![0.0; n];
    let mut dv = vec![0.0; m];
    for &(i, j, w) in &st.cells {
        let (i, j) = (i as usize, j as usize);
        let t = w * h.dh(s.u[i] - s.v[j]);
        du[s.pu[i] as usize] += t;
        dv[s.pv[j] as usize] -= t;
    }
    let mut f = vec![0.0; n];
    let mut g = vec![0.0; m];
    for (k, &i) in s.pu.iter().enumerate() {
        f[i as usize] = st.f[k];
    }
    for (k, &j) in s.pv.iter().enumerate() {
        g[j as usize] = st.g[k];
    }
    center(
        &mut f,
        &mut g,
        &s.input_weights(true),
        &s.input_weights(false),
    );
    Ok(Wasserstein1dGrad {
        value: st.cost,
        grad_u_values: du.into(),
        grad_v_values: dv.into(),
        grad_u_weights: f.into(),
        grad_v_weights: g.into(),
    })
}
