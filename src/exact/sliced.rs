//! Sliced Wasserstein distances (POT's `sliced_wasserstein_distance`) with their gradients
//! with respect to the points; the max-sliced distance ([`super::max_sliced`]) projects
//! the same way.
//!
//! For measures `μ = Σ a_i δ_{x_i}`, `ν = Σ b_j δ_{y_j}` in `ℝ^d` and unit directions
//! `θ_1, …, θ_L`, each projection `θ_#μ = Σ a_i δ_{⟨θ, x_i⟩}` is a measure on the line whose
//! exact `W_p^p` comes from sorting ([`super::one_d`]):
//!
//! * sliced: `SW_p = ((1/L) Σ_l W_p^p(θ_l#μ, θ_l#ν))^{1/p}`, a Monte-Carlo estimate of
//!   `(E_{θ∼U(S^{d−1})} W_p^p)^{1/p}`;
//! * max-sliced: `max_l W_p^p(θ_l#μ, θ_l#ν)^{1/p}` over the given directions, or the best
//!   direction found by projected gradient ascent on the sphere from the best of them.
//!
//! Directions are given (`d×L`, POT's `projections`, used as they are) or drawn from a
//! seed exactly as POT draws them (`np.random.RandomState(seed).randn(d, L)`, Mersenne
//! Twister and the polar Gaussian method, then each column normalised), so one seed gives
//! POT's directions. Projections run in parallel over rayon; every sum over them is taken
//! in a fixed order (values by index, gradients by a fixed binary tree over fixed chunks),
//! so results do not depend on the number of threads.
//!
//! Gradients (envelope theorem, each projection's sorted plan held fixed):
//! `∂W_p^p(θ)/∂x_i = s_i θ` with `s_i = Σ_j P^θ_ij h'(⟨θ, x_i⟩ − ⟨θ, y_j⟩)` (and the
//! opposite sign for `y`), so `∂SW_p/∂x_i = (1/p)·SW_p^{1−p}·(1/L) Σ_l s^l_i θ_l`; zero
//! where `SW_p = 0`. Exact where every projection has distinct values on each side.

use super::one_d::{balance, batch_size, in_problem, walk, weights, LineCost, SortedWeights};
use super::sort;
use crate::validate::check_finite;
use crate::{Error, Real, Result};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, ArrayView3, Axis};
use rayon::prelude::*;

/// The directions of a sliced distance.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Projections<'a> {
    /// `count` directions uniform on the sphere, drawn from `seed` as POT draws them
    /// (`get_random_projections(d, count, seed)`).
    Random {
        /// How many directions.
        count: usize,
        /// The seed of NumPy's `RandomState` that draws them.
        seed: u32,
    },
    /// Given directions, one per column (`d×L`, POT's `projections`), used as they are.
    Given(ArrayView2<'a, f64>),
}

impl Default for Projections<'_> {
    /// POT's default: 50 random directions (seed 0).
    fn default() -> Self {
        Projections::Random { count: 50, seed: 0 }
    }
}

impl Projections<'_> {
    /// The directions as rows (`L×d`), for points of dimension `d`.
    pub fn directions(&self, d: usize) -> Result<Array2<f64>> {
        match self {
            Projections::Random { count, seed } => {
                if *count == 0 {
                    return Err(Error::parameter(
                        "n_projections",
                        0,
                        "at least one projection is needed",
                    ));
                }
                Ok(random_directions(d, *count, *seed))
            }
            Projections::Given(p) => {
                let (rows, l) = p.dim();
                if rows != d {
                    return Err(Error::shape(
                        "projections",
                        format!(
                            "has {rows} rows but the points have {d} coordinates (d×L expected)"
                        ),
                    ));
                }
                if l == 0 {
                    return Err(Error::Empty {
                        arg: "projections".into(),
                        detail: "no direction (0 columns)".into(),
                    });
                }
                check_finite("projections", p)?;
                Ok(p.t().as_standard_layout().into_owned())
            }
        }
    }
}

/// Mersenne Twister MT19937 with NumPy's legacy `RandomState` seeding, doubles and
/// Gaussians.
struct Mt19937 {
    mt: [u32; 624],
    idx: usize,
    gauss: Option<f64>,
}

impl Mt19937 {
    fn new(seed: u32) -> Self {
        let mut mt = [0u32; 624];
        mt[0] = seed;
        for i in 1..624 {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 {
            mt,
            idx: 624,
            gauss: None,
        }
    }

    fn next_u32(&mut self) -> u32 {
        if self.idx >= 624 {
            for i in 0..624 {
                let y = (self.mt[i] & 0x8000_0000) | (self.mt[(i + 1) % 624] & 0x7fff_ffff);
                let mut v = self.mt[(i + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.mt[i] = v;
            }
            self.idx = 0;
        }
        let mut y = self.mt[self.idx];
        self.idx += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// A double in `[0, 1)` from 53 random bits (NumPy's `random_sample`).
    fn next_f64(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }

    /// A standard normal by the polar method, the second of each pair kept for the next
    /// call (NumPy's legacy `randn`).
    fn gauss(&mut self) -> f64 {
        if let Some(g) = self.gauss.take() {
            return g;
        }
        loop {
            let x1 = 2.0 * self.next_f64() - 1.0;
            let x2 = 2.0 * self.next_f64() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                let f = (-2.0 * r2.ln() / r2).sqrt();
                self.gauss = Some(f * x1);
                return f * x2;
            }
        }
    }
}

/// `count` directions as rows (`count×d`): POT's `get_random_projections(d, count, seed)`
/// transposed (a `d×count` standard normal matrix in row-major draw order, each column
/// divided by its norm).
pub fn random_directions(d: usize, count: usize, seed: u32) -> Array2<f64> {
    let mut rng = Mt19937::new(seed);
    let z = Array2::from_shape_fn((d, count), |_| rng.gauss());
    let mut out = z.t().as_standard_layout().into_owned();
    for mut row in out.rows_mut() {
        let norm = row.iter().fold(0.0, |s, v| s + v * v).sqrt();
        row.mapv_inplace(|v| v / norm);
    }
    out
}

/// A validated pair of weighted clouds in f64, row-major.
pub(super) struct Clouds {
    pub(super) x: Vec<f64>,
    pub(super) y: Vec<f64>,
    pub(super) n: usize,
    pub(super) m: usize,
    pub(super) d: usize,
    /// Weights (`None`: uniform), the second side scaled to the first side's mass.
    pub(super) a: Option<Vec<f64>>,
    pub(super) b: Option<Vec<f64>>,
    pub(super) scale_b: f64,
}

fn cloud<T: Real>(arg: &str, x: &ArrayView2<'_, T>) -> Result<Vec<f64>> {
    let (n, d) = x.dim();
    if n == 0 || d == 0 {
        return Err(Error::Empty {
            arg: arg.into(),
            detail: format!("a point cloud of {n} points in dimension {d}"),
        });
    }
    check_finite(arg, x)?;
    Ok(x.iter().map(|v| v.f64()).collect())
}

impl Clouds {
    pub(super) fn new<T: Real>(
        x_s: ArrayView2<'_, T>,
        x_t: ArrayView2<'_, T>,
        a: Option<ArrayView1<'_, T>>,
        b: Option<ArrayView1<'_, T>>,
    ) -> Result<Self> {
        let x = cloud("x_s", &x_s)?;
        let y = cloud("x_t", &x_t)?;
        let (n, d) = x_s.dim();
        let m = x_t.nrows();
        if x_t.ncols() != d {
            return Err(Error::shape(
                "x_t",
                format!(
                    "points have {} coordinates but those of x_s have {d}",
                    x_t.ncols()
                ),
            ));
        }
        let (a, mass_a) = weights("a", a, n, "x_s")?;
        let (mut b, mass_b) = weights("b", b, m, "x_t")?;
        let scale_b = balance::<T>(mass_a, mass_b)?;
        if let Some(b) = b.as_mut() {
            b.iter_mut().for_each(|w| *w *= scale_b);
        }
        Ok(Clouds {
            x,
            y,
            n,
            m,
            d,
            a,
            b,
            scale_b,
        })
    }
}

/// Scratch space of one worker.
#[derive(Default)]
pub(super) struct Scratch {
    ku: Vec<u64>,
    kv: Vec<u64>,
    tmp: Vec<u64>,
    u: Vec<f64>,
    v: Vec<f64>,
    su: Vec<f64>,
    sv: Vec<f64>,
    pu: Vec<u32>,
    pv: Vec<u32>,
    tperm: Vec<u32>,
    wa: Vec<f64>,
    wb: Vec<f64>,
    pub(super) du: Vec<f64>,
    pub(super) dv: Vec<f64>,
}

/// `⟨θ, x_i⟩` for every point of a row-major cloud.
fn project(x: &[f64], d: usize, theta: &[f64], out: &mut Vec<f64>) {
    out.clear();
    match d {
        1 => out.extend(x.iter().map(|v| v * theta[0])),
        2 => out.extend(x.chunks_exact(2).map(|p| p[0] * theta[0] + p[1] * theta[1])),
        3 => out.extend(
            x.chunks_exact(3)
                .map(|p| p[0] * theta[0] + p[1] * theta[1] + p[2] * theta[2]),
        ),
        _ => out.extend(
            x.chunks_exact(d)
                .map(|p| p.iter().zip(theta).fold(0.0, |s, (a, b)| s + a * b)),
        ),
    }
}

/// The order-preserving keys ([`sort::key`]) of `⟨θ, x_i⟩` for every point.
fn project_keys(x: &[f64], d: usize, theta: &[f64], out: &mut Vec<u64>) {
    out.clear();
    match d {
        1 => out.extend(x.iter().map(|v| sort::key(v * theta[0]))),
        2 => out.extend(
            x.chunks_exact(2)
                .map(|p| sort::key(p[0] * theta[0] + p[1] * theta[1])),
        ),
        3 => out.extend(
            x.chunks_exact(3)
                .map(|p| sort::key(p[0] * theta[0] + p[1] * theta[1] + p[2] * theta[2])),
        ),
        _ => out.extend(
            x.chunks_exact(d)
                .map(|p| sort::key(p.iter().zip(theta).fold(0.0, |s, (a, b)| s + a * b))),
        ),
    }
}

/// `W_p^p` of the projections of the clouds on `theta`; with `grad`, also `s = ∂W/∂⟨θ, x⟩`
/// and `∂W/∂⟨θ, y⟩` in input order in `s.du`, `s.dv`.
pub(super) fn one_projection(
    c: &Clouds,
    theta: &[f64],
    h: LineCost,
    grad: bool,
    s: &mut Scratch,
) -> f64 {
    let uniform = c.a.is_none() && c.b.is_none();
    let wu_uniform = 1.0 / c.n as f64;
    let wv_uniform = c.scale_b / c.m as f64;
    if uniform && !grad {
        // Values only: sort the keys of the projections, no permutation.
        project_keys(&c.x, c.d, theta, &mut s.ku);
        project_keys(&c.y, c.d, theta, &mut s.kv);
        sort::sort_keys(&mut s.ku, &mut s.tmp);
        sort::sort_keys(&mut s.kv, &mut s.tmp);
        if c.n == c.m {
            let sum: f64 =
                s.ku.iter()
                    .zip(&s.kv)
                    .map(|(&a, &b)| h.h(sort::value(a) - sort::value(b)))
                    .sum();
            return sum * wu_uniform;
        }
        s.u.clear();
        s.u.extend(s.ku.iter().map(|&k| sort::value(k)));
        s.v.clear();
        s.v.extend(s.kv.iter().map(|&k| sort::value(k)));
        return super::one_d::sorted_value(
            &s.u,
            &s.v,
            SortedWeights::Uniform(wu_uniform),
            SortedWeights::Uniform(wv_uniform),
            h,
        );
    }
    project(&c.x, c.d, theta, &mut s.u);
    project(&c.y, c.d, theta, &mut s.v);
    sort::argsort(
        &s.u,
        &mut s.su,
        &mut s.pu,
        &mut s.ku,
        &mut s.tmp,
        &mut s.tperm,
    );
    sort::argsort(
        &s.v,
        &mut s.sv,
        &mut s.pv,
        &mut s.kv,
        &mut s.tmp,
        &mut s.tperm,
    );
    let side = |w: &Option<Vec<f64>>, p: &[u32], out: &mut Vec<f64>| {
        if let Some(w) = w {
            out.clear();
            out.extend(p.iter().map(|&i| w[i as usize]));
        }
    };
    side(&c.a, &s.pu, &mut s.wa);
    side(&c.b, &s.pv, &mut s.wb);
    let wu = match c.a {
        Some(_) => SortedWeights::Listed(&s.wa),
        None => SortedWeights::Uniform(wu_uniform),
    };
    let wv = match c.b {
        Some(_) => SortedWeights::Listed(&s.wb),
        None => SortedWeights::Uniform(wv_uniform),
    };
    if !grad {
        return super::one_d::sorted_value(&s.su, &s.sv, wu, wv, h);
    }
    s.du.clear();
    s.du.resize(c.n, 0.0);
    s.dv.clear();
    s.dv.resize(c.m, 0.0);
    let (su, sv, pu, pv) = (&s.su, &s.sv, &s.pu, &s.pv);
    let (du, dv) = (&mut s.du, &mut s.dv);
    walk(su, sv, wu, wv, h, |i, j, w, _| {
        let t = w * h.dh(su[i] - sv[j]);
        du[pu[i] as usize] += t;
        dv[pv[j] as usize] -= t;
    })
}

/// Projections per leaf of the fixed summation tree of the gradients.
const CHUNK: usize = 4;

/// `W_p^p` of every direction (rows of `dirs`), in parallel, in direction order.
pub(super) fn projected_values(c: &Clouds, dirs: &Array2<f64>, h: LineCost) -> Vec<f64> {
    let l = dirs.nrows();
    (0..l)
        .into_par_iter()
        .map_init(Scratch::default, |s, k| {
            one_projection(c, dirs.row(k).as_slice().unwrap(), h, false, s)
        })
        .collect()
}

/// `Σ_l s^l ⊗ θ_l` for the clouds (`n×d` then `m×d`, concatenated) and the values
/// `W_p^p(θ_l)`, summed by a fixed tree over chunks of [`CHUNK`] directions.
fn projected_gradients(c: &Clouds, dirs: &Array2<f64>, h: LineCost) -> (Vec<f64>, Vec<f64>) {
    let l = dirs.nrows();
    let chunks = l.div_ceil(CHUNK);
    let d = c.d;
    let leaf = |k: usize| -> (Vec<f64>, Vec<f64>) {
        let mut s = Scratch::default();
        let mut acc = vec![0.0; (c.n + c.m) * d];
        let mut values = Vec::new();
        for q in k * CHUNK..((k + 1) * CHUNK).min(l) {
            let theta = dirs.row(q);
            let theta = theta.as_slice().unwrap();
            values.push(one_projection(c, theta, h, true, &mut s));
            for (i, &si) in s.du.iter().enumerate() {
                for t in 0..d {
                    acc[i * d + t] += si * theta[t];
                }
            }
            let off = c.n * d;
            for (j, &sj) in s.dv.iter().enumerate() {
                for t in 0..d {
                    acc[off + j * d + t] += sj * theta[t];
                }
            }
        }
        (acc, values)
    };
    fn tree(
        lo: usize,
        hi: usize,
        leaf: &(impl Fn(usize) -> (Vec<f64>, Vec<f64>) + Sync),
    ) -> (Vec<f64>, Vec<f64>) {
        if hi - lo == 1 {
            return leaf(lo);
        }
        let mid = lo + (hi - lo) / 2;
        let ((mut a, mut va), (b, vb)) =
            rayon::join(|| tree(lo, mid, leaf), || tree(mid, hi, leaf));
        a.iter_mut().zip(&b).for_each(|(x, y)| *x += y);
        va.extend(vb);
        (a, va)
    }
    tree(0, chunks, &leaf)
}

/// A sliced distance: the value and each direction's `W_p^p`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Sliced {
    /// `SW_p = ((1/L) Σ_l W_p^p(θ_l))^{1/p}` (POT's return value).
    pub distance: f64,
    /// `W_p^p` along each direction (POT's `log["projected_emds"]`).
    pub projected: Array1<f64>,
}

/// A sliced distance and its gradients with respect to the points.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SlicedGrad {
    /// `SW_p` (or the max-sliced distance).
    pub distance: f64,
    /// `∂distance/∂x_s` (`n×d`).
    pub grad_x_s: Array2<f64>,
    /// `∂distance/∂x_t` (`m×d`).
    pub grad_x_t: Array2<f64>,
}

/// POT's `sliced_wasserstein_distance(X_s, X_t, a, b, n_projections, p, projections, seed)`:
/// `SW_p = ((1/L) Σ_l W_p^p(θ_l#μ, θ_l#ν))^{1/p}` over the directions `projections`
/// ([`Projections::Random`] draws POT's directions for the same seed).
///
/// `x_s` (`n×d`), `x_t` (`m×d`): the points; `a`, `b`: weights (`None`: uniform), totals
/// equal within [`Real::MASS_TOL`] relative, `b` scaled to the mass of `a`; `p ≥ 1`.
/// Errors name the argument: empty or non-finite `x_s` / `x_t`, another dimension in
/// `x_t`, weights of another length, negative, non-finite or of zero total (`a` / `b`),
/// unequal totals, `p < 1` (`p`), no direction (`n_projections`, `projections`), given
/// directions of another dimension or non-finite (`projections`).
///
/// ```
/// use logot::exact::{sliced_wasserstein_distance, Projections};
/// use ndarray::{array, Array2};
/// // A translation by t: every direction θ sees |⟨θ, t⟩|, and E|⟨θ, t⟩|² = |t|²/d.
/// let x = Array2::from_shape_fn((100, 2), |(i, k)| ((i * 7 + k * 3) % 10) as f64);
/// let y = &x + &array![[3.0, 4.0]];
/// let dirs = array![[1.0, 0.0], [0.0, 1.0]]; // d×L: the two axes
/// let r = sliced_wasserstein_distance(x.view(), y.view(), None, None, &Projections::Given(dirs.view()), 2.0)?;
/// assert!((r.distance - (12.5f64).sqrt()).abs() < 1e-12); // ((9 + 16)/2)^½
/// assert_eq!(r.projected.to_vec(), vec![9.0, 16.0]);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn sliced_wasserstein_distance<T: Real>(
    x_s: ArrayView2<'_, T>,
    x_t: ArrayView2<'_, T>,
    a: Option<ArrayView1<'_, T>>,
    b: Option<ArrayView1<'_, T>>,
    projections: &Projections<'_>,
    p: f64,
) -> Result<Sliced> {
    let (h, c, dirs) = prepare(x_s, x_t, a, b, projections, p)?;
    Ok(Sliced::new(projected_values(&c, &dirs, h), p))
}

/// [`sliced_wasserstein_distance`] with its gradients with respect to both clouds (see the
/// module docs), for use as a training loss.
///
/// ```
/// use logot::exact::{sliced_wasserstein_grad, Projections};
/// use ndarray::array;
/// // One point each, one direction e₁: SW_2 = |x − y|·|cos| = 2, ∂/∂x = e₁.
/// let (x, y) = (array![[0.0f64, 0.0]], array![[-2.0, 5.0]]);
/// let dirs = array![[1.0], [0.0]];
/// let g = sliced_wasserstein_grad(x.view(), y.view(), None, None, &Projections::Given(dirs.view()), 2.0)?;
/// assert_eq!(g.distance, 2.0);
/// assert_eq!(g.grad_x_s, array![[1.0, 0.0]]);
/// assert_eq!(g.grad_x_t, array![[-1.0, 0.0]]);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn sliced_wasserstein_grad<T: Real>(
    x_s: ArrayView2<'_, T>,
    x_t: ArrayView2<'_, T>,
    a: Option<ArrayView1<'_, T>>,
    b: Option<ArrayView1<'_, T>>,
    projections: &Projections<'_>,
    p: f64,
) -> Result<SlicedGrad> {
    let (h, c, dirs) = prepare(x_s, x_t, a, b, projections, p)?;
    let (acc, values) = projected_gradients(&c, &dirs, h);
    let (distance, scale) = root_and_scale(&values, p);
    Ok(grads(&c, acc, scale, distance))
}

/// The checks and preparation of every sliced function, on every backend: the cost
/// `|t|^p` (`p ≥ 1`), the checked clouds and the directions (`L×d`).
pub(super) fn prepare<T: Real>(
    x_s: ArrayView2<'_, T>,
    x_t: ArrayView2<'_, T>,
    a: Option<ArrayView1<'_, T>>,
    b: Option<ArrayView1<'_, T>>,
    projections: &Projections<'_>,
    p: f64,
) -> Result<(LineCost, Clouds, Array2<f64>)> {
    let h = LineCost::power(p, "p")?;
    let c = Clouds::new(x_s, x_t, a, b)?;
    let dirs = projections.directions(c.d)?;
    Ok((h, c, dirs))
}

/// `(W, s)` of the `L` values `W_p^p(θ_l)`: `W = ((1/L) Σ_l W_p^p(θ_l))^{1/p}` and the factor
/// `s = W/(p·mean·L)` of `dW = (1/p)·mean^{1/p − 1}·d(mean)` on the summed gradients
/// (`s = 0` where the mean is 0).
pub(super) fn root_and_scale(values: &[f64], p: f64) -> (f64, f64) {
    let l = values.len() as f64;
    let mean = values.iter().sum::<f64>() / l;
    let distance = mean.powf(1.0 / p);
    let scale = if mean > 0.0 {
        distance / (p * mean * l)
    } else {
        0.0
    };
    (distance, scale)
}

/// The gradients `scale·acc` (`x_s`'s `n×d` rows, then `x_t`'s `m×d`).
pub(super) fn grads(c: &Clouds, mut acc: Vec<f64>, scale: f64, distance: f64) -> SlicedGrad {
    acc.iter_mut().for_each(|v| *v *= scale);
    let gy = acc.split_off(c.n * c.d);
    SlicedGrad::new(c, distance, acc, gy)
}

impl Sliced {
    /// `SW_p` of each direction's `W_p^p`.
    pub(super) fn new(values: Vec<f64>, p: f64) -> Self {
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        Sliced {
            distance: mean.powf(1.0 / p),
            projected: values.into(),
        }
    }
}

impl SlicedGrad {
    /// The gradients `gx` (`n×d`) and `gy` (`m×d`) of the clouds `c`, row-major.
    pub(super) fn new(c: &Clouds, distance: f64, gx: Vec<f64>, gy: Vec<f64>) -> Self {
        SlicedGrad {
            distance,
            grad_x_s: Array2::from_shape_vec((c.n, c.d), gx).expect("n×d"),
            grad_x_t: Array2::from_shape_vec((c.m, c.d), gy).expect("m×d"),
        }
    }
}

/// [`sliced_wasserstein_distance`] for a batch: problem `k` transports `x_s[k]` (`n×d`) to
/// `x_t[k]` (`m×d`) with weights `a[k]`, `b[k]` (`B×n`, `B×m`; `None`: uniform), every
/// problem along the same directions. Returns `SW_p` per problem.
///
/// ```
/// use logot::exact::{sliced_wasserstein_batch, Projections};
/// use ndarray::Array3;
/// let x = Array3::from_shape_fn((3, 50, 2), |(k, i, t)| (i * (t + 1)) as f64 * 0.01 + k as f64);
/// let y = x.mapv(|v| v + 1.0);
/// let sw = sliced_wasserstein_batch(x.view(), y.view(), None, None, &Projections::default(), 2.0)?;
/// assert_eq!(sw.len(), 3);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn sliced_wasserstein_batch<T: Real>(
    x_s: ArrayView3<'_, T>,
    x_t: ArrayView3<'_, T>,
    a: Option<ArrayView2<'_, T>>,
    b: Option<ArrayView2<'_, T>>,
    projections: &Projections<'_>,
    p: f64,
) -> Result<Array1<f64>> {
    let bsz = check_batch(&x_s, &x_t, a.as_ref(), b.as_ref())?;
    let mut out = Vec::with_capacity(bsz);
    for k in 0..bsz {
        let r = sliced_wasserstein_distance(
            x_s.index_axis(Axis(0), k),
            x_t.index_axis(Axis(0), k),
            a.map(|w| w.index_axis_move(Axis(0), k)),
            b.map(|w| w.index_axis_move(Axis(0), k)),
            projections,
            p,
        )
        .map_err(|e| in_problem(e, k, bsz))?;
        out.push(r.distance);
    }
    Ok(out.into())
}

/// [`sliced_wasserstein_grad`] for a batch (as [`sliced_wasserstein_batch`]).
pub fn sliced_wasserstein_grad_batch<T: Real>(
    x_s: ArrayView3<'_, T>,
    x_t: ArrayView3<'_, T>,
    a: Option<ArrayView2<'_, T>>,
    b: Option<ArrayView2<'_, T>>,
    projections: &Projections<'_>,
    p: f64,
) -> Result<Vec<SlicedGrad>> {
    let bsz = check_batch(&x_s, &x_t, a.as_ref(), b.as_ref())?;
    (0..bsz)
        .map(|k| {
            sliced_wasserstein_grad(
                x_s.index_axis(Axis(0), k),
                x_t.index_axis(Axis(0), k),
                a.map(|w| w.index_axis_move(Axis(0), k)),
                b.map(|w| w.index_axis_move(Axis(0), k)),
                projections,
                p,
            )
            .map_err(|e| in_problem(e, k, bsz))
        })
        .collect()
}

fn check_batch<T>(
    x_s: &ArrayView3<'_, T>,
    x_t: &ArrayView3<'_, T>,
    a: Option<&ArrayView2<'_, T>>,
    b: Option<&ArrayView2<'_, T>>,
) -> Result<usize> {
    batch_size(
        ("x_s", x_s.dim().0),
        "point clouds",
        [
            ("x_t", Some(x_t.dim().0)),
            ("a", a.map(|w| w.nrows())),
            ("b", b.map(|w| w.nrows())),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first draws of `RandomState(seed)` as NumPy gives them (`random_sample` and the
    /// legacy `randn`), printed by numpy 2.4: the generator is NumPy's bit for bit.
    #[test]
    fn mersenne_twister_matches_numpy() {
        let mut r = Mt19937::new(0);
        // np.random.RandomState(0).random_sample(2)
        assert_eq!(r.next_f64(), 0.5488135039273248);
        assert_eq!(r.next_f64(), 0.7151893663724195);
        // np.random.RandomState(42).randn(3)
        let mut r = Mt19937::new(42);
        assert_eq!(r.gauss(), 0.4967141530112327);
        assert_eq!(r.gauss(), -0.13826430117118466);
        assert_eq!(r.gauss(), 0.6476885381006925);
    }
}
