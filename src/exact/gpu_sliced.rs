//! 1-D and sliced Wasserstein on the GPU: [`CudaBackend::sliced_wasserstein_distance`],
//! [`CudaBackend::sliced_wasserstein_grad`], [`CudaBackend::max_sliced_wasserstein_distance`],
//! [`CudaBackend::max_sliced_wasserstein_grad`] and [`CudaBackend::wasserstein_1d_batch`],
//! the CPU's functions of the same names ([`super::sliced`], [`super::max_sliced`],
//! [`super::one_d`]) with the same checks, errors, conventions and results, the work on the
//! device: the projections, a sort of each one with its point indices, the merge of the two
//! sorted weighted lines (`W_p^p(θ_l) = Σ len·|u_k − v_j|^p` over the pieces of the quantile
//! functions) and the gradients `∂W_p^p(θ)/∂x_i = s_i θ` with
//! `s_i = Σ_j P^θ_ij h'(⟨θ, x_i⟩ − ⟨θ, y_j⟩)`, scattered back through the sort and summed
//! over the directions there. Everything is computed in `f64` (inputs in `f32` or `f64`) and
//! summed in a fixed order, so results do not change from run to run; they equal the CPU's
//! up to the rounding of the sums' order.

use super::max_sliced::{
    best_direction, max_sliced_wasserstein_distance, max_sliced_wasserstein_grad,
};
use super::one_d::{in_problem, line_batch_size, Line, LineCost};
use super::sliced::{prepare, root_and_scale, Clouds, Projections, Sliced, SlicedGrad};
use super::{MaxSliced, MaxSlicedSearch};
use crate::backend::cuda::{CudaBackend, LineProblems, LineSide, MAX_LINES};
use crate::{Real, Result};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};

/// The sides of the clouds' problems: shared points and weights (uniform ones as a scalar).
fn cloud_problems<'a>(c: &'a Clouds, dirs: &'a [f64], p: f64) -> LineProblems<'a> {
    LineProblems {
        u: LineSide {
            name: "x_s",
            points: &c.x,
            stride: 0,
            count: c.n,
            weights: c.a.as_deref(),
            wstride: 0,
            uniform: 1.0 / c.n as f64,
        },
        v: LineSide {
            name: "x_t",
            points: &c.y,
            stride: 0,
            count: c.m,
            weights: c.b.as_deref(),
            wstride: 0,
            uniform: c.scale_b / c.m as f64,
        },
        dim: c.d,
        dirs,
        p,
    }
}

/// Problems `rows` of one side of a batch of lines of `count` points (`B×count` points and,
/// when `listed`, weights).
fn line_side<'a>(
    name: &'static str,
    points: &'a [f64],
    weights: &'a [f64],
    listed: bool,
    rows: std::ops::Range<usize>,
    count: usize,
) -> LineSide<'a> {
    let at = rows.start * count..rows.end * count;
    LineSide {
        name,
        points: &points[at.clone()],
        stride: count,
        count,
        weights: listed.then(|| &weights[at]),
        wstride: count,
        uniform: 1.0 / count as f64,
    }
}

impl CudaBackend {
    /// [`sliced_wasserstein_distance`](super::sliced_wasserstein_distance) on the GPU: the
    /// same arguments, errors and result (`SW_p` and each direction's `W_p^p`).
    ///
    /// ```no_run
    /// use logot::exact::Projections;
    /// use logot::CudaBackend;
    /// use ndarray::Array2;
    /// let gpu = CudaBackend::new()?;
    /// let x = Array2::from_shape_fn((50_000, 64), |(i, t)| ((i * 7 + t * 3) % 101) as f32 * 0.01);
    /// let y = x.mapv(|v| v * 1.5 + 0.25);
    /// let sw = gpu.sliced_wasserstein_distance(x.view(), y.view(), None, None,
    ///     &Projections::Random { count: 128, seed: 0 }, 2.0)?;
    /// assert!(sw.distance > 0.0 && sw.projected.len() == 128);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn sliced_wasserstein_distance<T: Real>(
        &self,
        x_s: ArrayView2<'_, T>,
        x_t: ArrayView2<'_, T>,
        a: Option<ArrayView1<'_, T>>,
        b: Option<ArrayView1<'_, T>>,
        projections: &Projections<'_>,
        p: f64,
    ) -> Result<Sliced> {
        let (_, c, dirs) = prepare(x_s, x_t, a, b, projections, p)?;
        let dirs = dirs.as_slice().expect("standard layout");
        let values = self
            .solve_lines(&cloud_problems(&c, dirs, p), false)?
            .values;
        Ok(Sliced::new(values, p))
    }

    /// [`sliced_wasserstein_grad`](super::sliced_wasserstein_grad) on the GPU: `SW_p` and
    /// its gradients with respect to both clouds, `(1/p)·SW_p^{1−p}·(1/L) Σ_l s^l_i θ_l`
    /// (zero where `SW_p = 0`).
    pub fn sliced_wasserstein_grad<T: Real>(
        &self,
        x_s: ArrayView2<'_, T>,
        x_t: ArrayView2<'_, T>,
        a: Option<ArrayView1<'_, T>>,
        b: Option<ArrayView1<'_, T>>,
        projections: &Projections<'_>,
        p: f64,
    ) -> Result<SlicedGrad> {
        let (_, c, dirs) = prepare(x_s, x_t, a, b, projections, p)?;
        let dirs = dirs.as_slice().expect("standard layout");
        let solved = self.solve_lines(&cloud_problems(&c, dirs, p), true)?;
        let (distance, scale) = root_and_scale(&solved.values, p);
        let (gx, gy) = self.point_grads(&solved, scale)?;
        Ok(SlicedGrad::new(&c, distance, gx, gy))
    }

    /// [`max_sliced_wasserstein_distance`] on the GPU over the given or drawn directions
    /// ([`MaxSlicedSearch::Projections`]); the gradient ascent of
    /// [`MaxSlicedSearch::Ascent`], a sequence of single projections, runs on the CPU.
    #[allow(clippy::too_many_arguments)]
    pub fn max_sliced_wasserstein_distance<T: Real>(
        &self,
        x_s: ArrayView2<'_, T>,
        x_t: ArrayView2<'_, T>,
        a: Option<ArrayView1<'_, T>>,
        b: Option<ArrayView1<'_, T>>,
        projections: &Projections<'_>,
        p: f64,
        how: MaxSlicedSearch,
    ) -> Result<MaxSliced> {
        if how != MaxSlicedSearch::Projections {
            return max_sliced_wasserstein_distance(x_s, x_t, a, b, projections, p, how);
        }
        let s = self.sliced_wasserstein_distance(x_s, x_t, a, b, projections, p)?;
        let k = best_direction(s.projected.as_slice().expect("contiguous"));
        let direction = projections.directions(x_s.ncols())?.row(k).to_owned();
        Ok(MaxSliced {
            distance: s.projected[k].powf(1.0 / p),
            direction,
            projected: s.projected,
            steps: 0,
        })
    }

    /// [`max_sliced_wasserstein_grad`] on the GPU over the given or drawn directions: the
    /// best direction `θ*`, then `∂/∂x_i = (1/p)·W^{1/p−1}·s_i θ*` (the ascent of
    /// [`MaxSlicedSearch::Ascent`] runs on the CPU).
    #[allow(clippy::too_many_arguments)]
    pub fn max_sliced_wasserstein_grad<T: Real>(
        &self,
        x_s: ArrayView2<'_, T>,
        x_t: ArrayView2<'_, T>,
        a: Option<ArrayView1<'_, T>>,
        b: Option<ArrayView1<'_, T>>,
        projections: &Projections<'_>,
        p: f64,
        how: MaxSlicedSearch,
    ) -> Result<(MaxSliced, SlicedGrad)> {
        if how != MaxSlicedSearch::Projections {
            return max_sliced_wasserstein_grad(x_s, x_t, a, b, projections, p, how);
        }
        let (_, c, dirs) = prepare(x_s, x_t, a, b, projections, p)?;
        let all = dirs.as_slice().expect("standard layout");
        let values = self.solve_lines(&cloud_problems(&c, all, p), false)?.values;
        let k = best_direction(&values);
        let theta = &all[k * c.d..(k + 1) * c.d];
        let solved = self.solve_lines(&cloud_problems(&c, theta, p), true)?;
        let (distance, scale) = root_and_scale(&solved.values, p);
        let (gx, gy) = self.point_grads(&solved, scale)?;
        Ok((
            MaxSliced {
                distance,
                direction: Array1::from(theta.to_vec()),
                projected: values.into(),
                steps: 0,
            },
            SlicedGrad::new(&c, distance, gx, gy),
        ))
    }

    /// [`wasserstein_1d_batch`](super::wasserstein_1d_batch) on the GPU: `W_p^p` of row `k`
    /// of `u_values` (`B×n`) against row `k` of `v_values` (`B×m`), with per-row weights or
    /// uniform ones; the same checks and errors (a problem's named by its row).
    ///
    /// ```no_run
    /// use logot::CudaBackend;
    /// use ndarray::Array2;
    /// let gpu = CudaBackend::new()?;
    /// let u = Array2::from_shape_fn((64, 4096), |(k, i)| ((i * 37 + k) % 4096) as f64);
    /// let v = u.mapv(|x| x + 2.0);
    /// let w = gpu.wasserstein_1d_batch(u.view(), v.view(), None, None, 1.0)?;
    /// assert!(w.iter().all(|&w| (w - 2.0).abs() < 1e-12));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn wasserstein_1d_batch<T: Real>(
        &self,
        u_values: ArrayView2<'_, T>,
        v_values: ArrayView2<'_, T>,
        u_weights: Option<ArrayView2<'_, T>>,
        v_weights: Option<ArrayView2<'_, T>>,
        p: f64,
    ) -> Result<Array1<f64>> {
        let lines = Lines::new(u_values, v_values, u_weights, v_weights, p)?;
        Ok(self.solve_batch(&lines, false)?.0.into())
    }

    /// [`wasserstein_1d_batch`](CudaBackend::wasserstein_1d_batch) with the gradients with
    /// respect to every value (the envelope theorem on each sorted plan:
    /// `∂W/∂u_i = Σ_j P_ij h'(u_i − v_j)`, `∂W/∂v_j = −Σ_i P_ij h'(u_i − v_j)`; exact where the
    /// values of each side are distinct), for use as a loss.
    pub fn wasserstein_1d_grad_batch<T: Real>(
        &self,
        u_values: ArrayView2<'_, T>,
        v_values: ArrayView2<'_, T>,
        u_weights: Option<ArrayView2<'_, T>>,
        v_weights: Option<ArrayView2<'_, T>>,
        p: f64,
    ) -> Result<Wasserstein1dGradBatch> {
        let lines = Lines::new(u_values, v_values, u_weights, v_weights, p)?;
        let (values, gu, gv) = self.solve_batch(&lines, true)?;
        let (b, n, m) = (lines.bsz, lines.n, lines.m);
        Ok(Wasserstein1dGradBatch {
            values: values.into(),
            grad_u_values: Array2::from_shape_vec((b, n), gu).expect("B×n"),
            grad_v_values: Array2::from_shape_vec((b, m), gv).expect("B×m"),
        })
    }

    /// Values (and with `grad`, the derivatives, `B×n` and `B×m`) of a checked batch of
    /// lines, in launches of at most `MAX_LINES` problems.
    fn solve_batch(&self, l: &Lines, grad: bool) -> Result<(Vec<f64>, Vec<f64>, Vec<f64>)> {
        let (bsz, n, m) = (l.bsz, l.n, l.m);
        let (mut values, mut gu, mut gv) = (Vec::with_capacity(bsz), Vec::new(), Vec::new());
        for lo in (0..bsz).step_by(MAX_LINES) {
            let hi = (lo + MAX_LINES).min(bsz);
            let ones = vec![1.0; hi - lo];
            let pr = LineProblems {
                u: line_side("u_values", &l.u, &l.wu, l.listed, lo..hi, n),
                v: line_side("v_values", &l.v, &l.wv, l.listed, lo..hi, m),
                dim: 1,
                dirs: &ones,
                p: l.p,
            };
            let solved = self.solve_lines(&pr, grad)?;
            if grad {
                let (du, dv) = self.line_grads(&solved)?;
                gu.extend(du);
                gv.extend(dv);
            }
            values.extend(solved.values);
        }
        Ok((values, gu, gv))
    }
}

/// [`CudaBackend::wasserstein_1d_grad_batch`]: `W_p^p` of each pair of lines and its
/// gradients with respect to the values.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Wasserstein1dGradBatch {
    /// `W_p^p` per problem.
    pub values: Array1<f64>,
    /// `∂W_p^p/∂u_values` (`B×n`, row `k` that of problem `k`).
    pub grad_u_values: Array2<f64>,
    /// `∂W_p^p/∂v_values` (`B×m`).
    pub grad_v_values: Array2<f64>,
}

/// A checked batch of lines in `f64`: values row-major, weights (when either side lists
/// them) expanded on both sides, the second side scaled to the first side's mass.
struct Lines {
    u: Vec<f64>,
    v: Vec<f64>,
    wu: Vec<f64>,
    wv: Vec<f64>,
    listed: bool,
    bsz: usize,
    n: usize,
    m: usize,
    p: f64,
}

impl Lines {
    /// The CPU's checks of [`super::wasserstein_1d_batch`], with its errors.
    fn new<'a, T: Real>(
        u_values: ArrayView2<'a, T>,
        v_values: ArrayView2<'a, T>,
        u_weights: Option<ArrayView2<'a, T>>,
        v_weights: Option<ArrayView2<'a, T>>,
        p: f64,
    ) -> Result<Lines> {
        LineCost::power(p, "p")?;
        let bsz = line_batch_size(&u_values, &v_values, u_weights.as_ref(), v_weights.as_ref())?;
        let (n, m) = (u_values.ncols(), v_values.ncols());
        let listed = u_weights.is_some() || v_weights.is_some();
        let (mut u, mut v) = (Vec::with_capacity(bsz * n), Vec::with_capacity(bsz * m));
        let (mut wu, mut wv) = (Vec::new(), Vec::new());
        for k in 0..bsz {
            let row = |x: ArrayView2<'a, T>| x.index_axis_move(Axis(0), k);
            let line = Line::new(
                row(u_values),
                row(v_values),
                u_weights.map(row),
                v_weights.map(row),
                ["u_values", "v_values", "u_weights", "v_weights"],
            )
            .map_err(|e| in_problem(e, k, bsz))?;
            u.extend(line.u);
            v.extend(line.v);
            if listed {
                wu.extend(line.a.unwrap_or_else(|| vec![1.0 / n as f64; n]));
                match line.b {
                    Some(b) => wv.extend(b),
                    None => wv.extend(std::iter::repeat_n(line.scale_b / m as f64, m)),
                }
            }
        }
        Ok(Lines {
            u,
            v,
            wu,
            wv,
            listed,
            bsz,
            n,
            m,
            p,
        })
    }
}
