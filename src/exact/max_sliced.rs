//! Max-sliced Wasserstein (POT's `max_sliced_wasserstein_distance`): the largest
//! `W_p^p(θ#μ, θ#ν)^{1/p}` over given or drawn directions, or the best direction found by
//! projected gradient ascent on the sphere from the best of them, with gradients with
//! respect to the points (envelope theorem at the best direction). The projections and
//! their 1-D solves are those of [`super::sliced`].

use super::one_d::LineCost;
use super::sliced::{
    grads, one_projection, prepare, projected_values, root_and_scale, Clouds, Projections, Scratch,
    SlicedGrad,
};
use crate::{Error, Real, Result};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2};

/// How [`max_sliced_wasserstein_distance`] looks for the best direction.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum MaxSlicedSearch {
    /// The best of the given or drawn directions (POT's `max_sliced_wasserstein_distance`).
    Projections,
    /// From the best of the directions, projected gradient ascent on the sphere:
    /// `θ ← (θ + step·ĝ)/|θ + step·ĝ|` with `ĝ` the unit tangent part of `∂W_p^p/∂θ`, a step
    /// kept only when it increases `W_p^p` (halved otherwise), at most `steps` steps.
    Ascent {
        /// The most ascent steps.
        steps: usize,
        /// The first step length (on the sphere).
        step: f64,
    },
}

/// A max-sliced distance and the direction that attains it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct MaxSliced {
    /// `max W_p^p(θ#μ, θ#ν)^{1/p}` over the directions searched.
    pub distance: f64,
    /// The best direction found (unit for drawn directions and after ascent).
    pub direction: Array1<f64>,
    /// `W_p^p` along each starting direction.
    pub projected: Array1<f64>,
    /// Ascent steps kept.
    pub steps: usize,
}

/// `∂W_p^p(θ)/∂θ = Σ_i s_i x_i + Σ_j t_j y_j` and `W_p^p(θ)`.
fn direction_gradient(c: &Clouds, theta: &[f64], h: LineCost, s: &mut Scratch) -> (f64, Vec<f64>) {
    let w = one_projection(c, theta, h, true, s);
    let d = c.d;
    let mut g = vec![0.0; d];
    for (&si, xi) in s.du.iter().zip(c.x.chunks_exact(d)) {
        g.iter_mut().zip(xi).for_each(|(gt, xt)| *gt += si * xt);
    }
    for (&sj, yj) in s.dv.iter().zip(c.y.chunks_exact(d)) {
        g.iter_mut().zip(yj).for_each(|(gt, yt)| *gt += sj * yt);
    }
    (w, g)
}

/// The first direction of largest `W_p^p`.
pub(super) fn best_direction(values: &[f64]) -> usize {
    let mut best = 0;
    for (k, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = k;
        }
    }
    best
}

fn search(
    c: &Clouds,
    dirs: &Array2<f64>,
    h: LineCost,
    how: MaxSlicedSearch,
) -> Result<(f64, Vec<f64>, Vec<f64>, usize)> {
    let values = projected_values(c, dirs, h);
    let best = best_direction(&values);
    let mut theta = dirs.row(best).to_vec();
    let mut w = values[best];
    let mut kept = 0;
    if let MaxSlicedSearch::Ascent { steps, step } = how {
        if !(step.is_finite() && step > 0.0) {
            return Err(Error::parameter("step", step, "must be finite and > 0"));
        }
        let norm = theta.iter().map(|v| v * v).sum::<f64>().sqrt();
        if norm.is_nan() || norm <= 0.0 {
            return Err(Error::parameter(
                "projections",
                format!("column {best}"),
                "the best direction is zero: ascent needs a nonzero start",
            ));
        }
        theta.iter_mut().for_each(|v| *v /= norm);
        let mut s = Scratch::default();
        let (mut w_cur, mut g) = direction_gradient(c, &theta, h, &mut s);
        w = w_cur;
        let mut eta = step;
        let mut iters = 0;
        while iters < steps && eta > 1e-12 {
            iters += 1;
            // Tangent part of the gradient at θ, normalised.
            let dot: f64 = g.iter().zip(&theta).map(|(a, b)| a * b).sum();
            let mut tg: Vec<f64> = g.iter().zip(&theta).map(|(a, b)| a - dot * b).collect();
            let tn = tg.iter().map(|v| v * v).sum::<f64>().sqrt();
            if tn.is_nan() || tn <= 0.0 {
                break;
            }
            tg.iter_mut().for_each(|v| *v /= tn);
            let mut cand: Vec<f64> = theta.iter().zip(&tg).map(|(a, b)| a + eta * b).collect();
            let cn = cand.iter().map(|v| v * v).sum::<f64>().sqrt();
            cand.iter_mut().for_each(|v| *v /= cn);
            let (w_new, g_new) = direction_gradient(c, &cand, h, &mut s);
            if w_new > w_cur {
                theta = cand;
                w_cur = w_new;
                g = g_new;
                kept += 1;
            } else {
                eta *= 0.5;
            }
        }
        w = w.max(w_cur);
    }
    Ok((w, theta, values, kept))
}

/// POT's `max_sliced_wasserstein_distance(X_s, X_t, a, b, n_projections, p, projections,
/// seed)`: `max_θ W_p^p(θ#μ, θ#ν)^{1/p}` over the directions ([`MaxSlicedSearch::Projections`]),
/// or refined by gradient ascent on the sphere ([`MaxSlicedSearch::Ascent`]).
/// Arguments and errors as [`sliced_wasserstein_distance`]; `step` must be positive.
///
/// ```
/// use logot::exact::{max_sliced_wasserstein_distance, MaxSlicedSearch, Projections};
/// use ndarray::{array, Array2};
/// // A translation by t = (3, 4): the best direction is t/|t|, with distance |t| = 5.
/// let x = Array2::from_shape_fn((30, 2), |(i, k)| ((i * 7 + k * 5) % 11) as f64 * 0.1);
/// let y = &x + &array![[3.0, 4.0]];
/// let r = max_sliced_wasserstein_distance(x.view(), y.view(), None, None,
///     &Projections::Random { count: 10, seed: 0 }, 2.0, MaxSlicedSearch::Ascent { steps: 200, step: 0.5 })?;
/// assert!((r.distance - 5.0).abs() < 1e-6, "{}", r.distance);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn max_sliced_wasserstein_distance<T: Real>(
    x_s: ArrayView2<'_, T>,
    x_t: ArrayView2<'_, T>,
    a: Option<ArrayView1<'_, T>>,
    b: Option<ArrayView1<'_, T>>,
    projections: &Projections<'_>,
    p: f64,
    how: MaxSlicedSearch,
) -> Result<MaxSliced> {
    let (h, c, dirs) = prepare(x_s, x_t, a, b, projections, p)?;
    let (w, theta, values, steps) = search(&c, &dirs, h, how)?;
    Ok(MaxSliced {
        distance: w.powf(1.0 / p),
        direction: theta.into(),
        projected: values.into(),
        steps,
    })
}

/// [`max_sliced_wasserstein_distance`] with its gradients with respect to the points, by
/// the envelope theorem at the best direction `θ*`: `∂/∂x_i = (1/p)·W^{1/p−1}·s_i θ*`.
pub fn max_sliced_wasserstein_grad<T: Real>(
    x_s: ArrayView2<'_, T>,
    x_t: ArrayView2<'_, T>,
    a: Option<ArrayView1<'_, T>>,
    b: Option<ArrayView1<'_, T>>,
    projections: &Projections<'_>,
    p: f64,
    how: MaxSlicedSearch,
) -> Result<(MaxSliced, SlicedGrad)> {
    let (h, c, dirs) = prepare(x_s, x_t, a, b, projections, p)?;
    let (_, theta, values, steps) = search(&c, &dirs, h, how)?;
    let mut s = Scratch::default();
    let w = one_projection(&c, &theta, h, true, &mut s);
    let d = c.d;
    let mut acc = vec![0.0; (c.n + c.m) * d];
    for (i, &si) in s.du.iter().enumerate() {
        for t in 0..d {
            acc[i * d + t] = si * theta[t];
        }
    }
    for (j, &sj) in s.dv.iter().enumerate() {
        for t in 0..d {
            acc[(c.n + j) * d + t] = sj * theta[t];
        }
    }
    let (distance, scale) = root_and_scale(&[w], p);
    let g = grads(&c, acc, scale, distance);
    Ok((
        MaxSliced {
            distance,
            direction: theta.into(),
            projected: values.into(),
            steps,
        },
        g,
    ))
}
