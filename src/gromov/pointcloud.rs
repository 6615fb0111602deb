//! Entropic Gromov–Wasserstein between point clouds in linear memory: square loss,
//! squared-Euclidean structures `C1_ik = |x_i − x_k|²`, `C2_jl = |y_j − y_l|²`, the mirror
//! descent of [`crate::gromov::entropic`] with no `n×n`, `m×m` or `n×m` matrix anywhere.
//!
//! **The structures are bilinear.** With `φ_i = (x_i, |x_i|², 1)` (`d + 2` entries) and
//! `ψ_j = (y_j, |y_j|², 1)` (`d' + 2`), `C1 = Φ·A·Φᵀ` and `C2 = Ψ·B·Ψᵀ`, where `A` has
//! `−2·I` on the coordinates and `1` at the two entries pairing `|x|²` with `1` (`B` alike).
//!
//! **The gradient is a low-rank cost.** For the square loss (`h1(a) = a`, `h2(b) = 2b`)
//! the cross term of `L⊗T` is `h1(C1)·T·h2(C2)ᵀ = 2·C1·T·C2 = 2·Φ·K·Ψᵀ` with
//! `K = A·Γ·B` and `Γ = Φᵀ·T·Ψ` (`(d + 2)×(d' + 2)`: the plan's moments `XᵀTY`, `XᵀT1`,
//! `1ᵀTY`, `Σ T`, and those weighted by `|x|²`, `|y|²`). So `∇F(T) = r ⊕ c − 4·Φ·K·Ψᵀ`:
//! up to row and column terms (which do not change a Sinkhorn plan), the inner cost is
//! `−4·z_i·ψ'_j` with `ψ'_j = (y_j, |y_j|²)` and `z_i = K'ᵀ·φ_i` (`K'` the first `d' + 1`
//! columns of `K`; the last column of `K` gives row terms). That is a point-cloud cost in
//! dimension `d' + 1`: with `x̃_i = 2·z_i/σ` and `ỹ_j = σ·ψ'_j`,
//! `|x̃_i − ỹ_j|² = |x̃_i|² + |ỹ_j|² − 4·z_i·ψ'_j`, and the norms go into the potentials
//! (`σ` balances the two clouds' sizes; it changes nothing else). Each outer iteration is
//! then a point-cloud Sinkhorn solve on `(x̃, ỹ)` (the cost computed on the fly, never
//! stored), warm-started from the previous potentials moved to the new clouds, and `Γ`
//! comes from the plan applied to `Ψ` on the fly (`T·Ψ`, [`PointCloudKernels::plan_apply`])
//! and one `(d + 2)×n` by `n×(d' + 2)` product: memory `O((n + m)·(d + d'))`.
//!
//! **The value** `⟨L⊗T, T⟩` (POT's `gwloss`) is
//! `⟨A·S_p·A, S_{T1}⟩ + ⟨B·S_q·B, S_{Tᵀ1}⟩ − 2·⟨A·Γ·B, Γ⟩` with `S_w = Φᵀ·diag(w)·Φ`.
//!
//! **What is exact:** everything above is an identity, so the iterates are those of the
//! dense mirror descent on the same clouds (the row and column terms only move the
//! potentials), up to rounding: the clouds are centred (GW does not see translations) and
//! the moments accumulated in f64 on the host, but the fourth powers `|x|⁴` in `S_p` and the
//! cost `|x̃ − ỹ|²` on the transformed clouds carry the rounding of `T`. The one difference
//! is the stopping rule: the plan is never formed, so instead of `‖T − T_prev‖_F` the
//! solver stops when the plan's moments stop moving, `‖Γ − Γ_prev‖_F ≤ tol·‖Γ‖_F` (the next
//! iterate depends on `T` only through `Γ`).

use super::params::PointGwParams;
use crate::backend::linalg::{GemmShape, LinalgKernels, Transpose};
use crate::backend::{CloudLayout, PointCloudKernels, PointMetric, Side};
use crate::sinkhorn::{BufferProblem, Convergence, WarmStart};
use crate::validate::{check_finite, check_histograms};
use crate::SinkhornSolver;
use crate::{Error, Real, Result};
use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, Axis};

/// Two weighted point clouds: `x` (`n×d`) with weights `p`, `y` (`m×d'`, any `d'`) with
/// weights `q` (equal totals); structures `|x_i − x_k|²` and `|y_j − y_l|²`.
#[derive(Clone, Debug)]
pub struct PointGromovProblem<'a, T> {
    x: ArrayView2<'a, T>,
    y: ArrayView2<'a, T>,
    p: ArrayView1<'a, T>,
    q: ArrayView1<'a, T>,
}

impl<'a, T: Real> PointGromovProblem<'a, T> {
    /// The clouds and weights, checked (every error names its argument).
    ///
    /// ```
    /// use logot::gromov::PointGromovProblem;
    /// use ndarray::array;
    /// let (x, y) = (array![[0.0, 0.0], [1.0, 0.0]], array![[0.0], [2.0], [3.0]]);
    /// let (p, q) = (array![0.5, 0.5], array![0.2, 0.3, 0.5]);
    /// assert!(PointGromovProblem::new(x.view(), y.view(), p.view(), q.view()).is_ok());
    /// let err = PointGromovProblem::new(x.view(), y.view(), q.view(), q.view()).unwrap_err();
    /// assert!(err.to_string().starts_with("p:"), "{err}");
    /// ```
    pub fn new(
        x: ArrayView2<'a, T>,
        y: ArrayView2<'a, T>,
        p: ArrayView1<'a, T>,
        q: ArrayView1<'a, T>,
    ) -> Result<Self> {
        for (arg, c) in [("x", &x), ("y", &y)] {
            if c.nrows() == 0 || c.ncols() == 0 {
                return Err(Error::Empty {
                    arg: arg.into(),
                    detail: format!("a cloud of {} points in dimension {}", c.nrows(), c.ncols()),
                });
            }
            check_finite(arg, c)?;
        }
        for (arg, w, len, of) in [("p", &p, x.nrows(), "x"), ("q", &q, y.nrows(), "y")] {
            if w.len() != len {
                return Err(Error::shape(
                    arg,
                    format!("has {} entries but {of} has {len} points", w.len()),
                ));
            }
        }
        let mp = check_histograms("p", &p.insert_axis(Axis(0)))?[0];
        let mq = check_histograms("q", &q.insert_axis(Axis(0)))?[0];
        if (mp - mq).abs() > T::MASS_TOL * mp.max(mq) {
            return Err(Error::parameter(
                "q",
                format!("total {mq}"),
                format!("the total mass must equal that of p ({mp})"),
            ));
        }
        Ok(PointGromovProblem { x, y, p, q })
    }
}

/// How a point-cloud solve ended; the figures describe the returned plan.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PointGromovReport {
    /// Outer iterations run.
    pub iterations: usize,
    /// The last relative change of the moments met the tolerance (`tol`, or 1e-9 when
    /// `tol = 0`) and the last inner solve converged.
    pub converged: bool,
    /// `‖Γ − Γ_prev‖_F / ‖Γ‖_F` of the last iteration.
    pub step: f64,
    /// An upper bound on `max_ij |∇F(T) − G_ij|` (`G` the gradient whose Sinkhorn plan `T`
    /// is): `4·Σ_ab |ΔK_ab|·max_i |φ_ia|·max_j |ψ_jb|` with `ΔK = A·(Γ − Γ_prev)·B`; the
    /// dense solver's [`stationarity`](super::GromovReport::stationarity) is at most this.
    pub stationarity: f64,
    /// `max(‖T·1 − p‖₁, ‖Tᵀ·1 − q‖₁)` of the returned plan (computed on the fly).
    pub marginal_error: f64,
    /// Sinkhorn iterations summed over the inner solves.
    pub inner_iterations: usize,
    /// Inner solves that ended without meeting their marginal tolerance.
    pub inner_unconverged: usize,
    /// The report of the last inner solve.
    pub inner: Convergence,
}

/// A solved point-cloud Gromov–Wasserstein problem. The plan is
/// `T_ij = exp((f_i + g_j − |x̃_i − ỹ_j|²)/ε)` on the final transformed clouds, never stored
/// ([`PointGromov::plan`] forms it for small problems).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PointGromov<T> {
    /// `⟨L⊗T, T⟩` (POT's `gw_dist` of the dense problem on the same clouds).
    pub value: f64,
    /// Potentials of the last inner solve on `(x̃, ỹ)`.
    pub f: Array1<T>,
    /// See [`PointGromov::f`].
    pub g: Array1<T>,
    /// The transformed source cloud of the last inner solve (`n×(d' + 1)`).
    pub x_tilde: Array2<T>,
    /// The transformed target cloud (`m×(d' + 1)`).
    pub y_tilde: Array2<T>,
    /// The plan's moments `Γ = Φᵀ·T·Ψ` (`(d + 2)×(d' + 2)`, on the centred clouds).
    pub moments: Array2<f64>,
    /// Regularisation of the inner solves.
    pub eps: f64,
    /// Outer and inner convergence.
    pub report: PointGromovReport,
}

impl<T: Real> PointGromov<T> {
    /// The plan `T` (`n×m`, in f64), formed entry by entry from the potentials and the
    /// transformed clouds: for problems small enough to hold it.
    pub fn plan(&self) -> Result<Array2<f64>> {
        let (n, m) = (self.x_tilde.nrows(), self.y_tilde.nrows());
        crate::alloc::probe::<f64>("plan", &[n, m], 0)?;
        let eps = self.eps;
        Ok(Array2::from_shape_fn((n, m), |(i, j)| {
            let c: f64 = self
                .x_tilde
                .row(i)
                .iter()
                .zip(self.y_tilde.row(j))
                .map(|(a, b)| (a.f64() - b.f64()).powi(2))
                .sum();
            ((self.f[i].f64() + self.g[j].f64() - c) / eps).exp()
        }))
    }
}

/// Point-cloud Gromov–Wasserstein on a chosen backend (see the module docs).
///
/// ```
/// use logot::gromov::{PointGromovProblem, PointGromovSolver, PointGwParams};
/// use logot::CpuBackend;
/// use ndarray::{array, Array1};
/// // Four points of a kite and the same kite rotated by 90°, listed in another order.
/// let x = array![[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [-1.5, -1.0]];
/// let y = array![[-2.0, 0.0], [1.0, -1.5], [0.0, 0.0], [0.0, 1.0]];
/// let w = Array1::from_elem(4, 0.25);
/// let problem = PointGromovProblem::new(x.view(), y.view(), w.view(), w.view())?;
/// let r = PointGromovSolver::new(CpuBackend, PointGwParams::new(0.05)).solve(&problem)?;
/// let plan = r.plan()?;
/// // x_0 ↦ y_2, x_1 ↦ y_3, x_2 ↦ y_0, x_3 ↦ y_1: most of each row's mass on its image.
/// for (i, j) in [(0, 2), (1, 3), (2, 0), (3, 1)] {
///     assert!(plan[[i, j]] > 0.9 * 0.25, "{plan}");
/// }
/// # Ok::<(), logot::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PointGromovSolver<B> {
    backend: B,
    params: PointGwParams,
}

/// `Φ = [x − x̄, |x − x̄|², 1]` (`n×(d + 2)`) of a cloud centred at its weighted mean.
fn features<T: Real>(x: &ArrayView2<'_, T>, w: &ArrayView1<'_, T>) -> Array2<f64> {
    let (n, d) = x.dim();
    let total: f64 = w.iter().map(|v| v.f64()).sum();
    let mean: Vec<f64> = (0..d)
        .map(|k| (0..n).map(|i| w[i].f64() * x[[i, k]].f64()).sum::<f64>() / total)
        .collect();
    let mut phi = Array2::zeros((n, d + 2));
    for i in 0..n {
        let mut s = 0.0;
        for k in 0..d {
            let v = x[[i, k]].f64() - mean[k];
            phi[[i, k]] = v;
            s += v * v;
        }
        phi[[i, d]] = s;
        phi[[i, d + 1]] = 1.0;
    }
    phi
}

/// The `(d + 2)×(d + 2)` matrix `A` of `|x_i − x_k|² = φ_iᵀ·A·φ_k`.
fn bilinear(d: usize) -> Array2<f64> {
    let mut a = Array2::zeros((d + 2, d + 2));
    for k in 0..d {
        a[[k, k]] = -2.0;
    }
    a[[d, d + 1]] = 1.0;
    a[[d + 1, d]] = 1.0;
    a
}

/// `Φᵀ·diag(w)·Φ`.
fn second_moments(phi: &Array2<f64>, w: &[f64]) -> Array2<f64> {
    let k = phi.ncols();
    Array2::from_shape_fn((k, k), |(a, b)| {
        phi.column(a)
            .iter()
            .zip(phi.column(b))
            .zip(w)
            .map(|((x, y), w)| x * y * w)
            .sum()
    })
}

/// Largest `|entry|` of each column.
fn column_max(a: &Array2<f64>) -> Vec<f64> {
    a.columns()
        .into_iter()
        .map(|c| c.iter().fold(0.0f64, |m, v| m.max(v.abs())))
        .collect()
}

impl<B> PointGromovSolver<B> {
    /// A solver on `backend` with `params`.
    pub fn new(backend: B, params: PointGwParams) -> Self {
        PointGromovSolver { backend, params }
    }

    /// The mirror descent from the product plan `p·qᵀ` (see the module docs).
    pub fn solve<T: Real>(&self, problem: &PointGromovProblem<'_, T>) -> Result<PointGromov<T>>
    where
        B: PointCloudKernels<T> + LinalgKernels<T> + Clone,
    {
        let prm = &self.params;
        prm.validate()?;
        let be = &self.backend;
        let (n, dx) = problem.x.dim();
        let (m, dy) = problem.y.dim();
        let (ax, ay) = (dx + 2, dy + 2);
        let phi = features(&problem.x, &problem.p);
        let psi = features(&problem.y, &problem.q);
        let (a_mat, b_mat) = (bilinear(dx), bilinear(dy));
        let p: Vec<f64> = problem.p.iter().map(|v| v.f64()).collect();
        let q: Vec<f64> = problem.q.iter().map(|v| v.f64()).collect();
        let to_t = |a: &Array2<f64>| a.iter().map(|&v| T::of(v)).collect::<Vec<T>>();
        let phi_dev = be.upload(&to_t(&phi))?;
        let psi_dev = be.upload(&to_t(&psi))?;
        let (p_t, q_t): (Vec<T>, Vec<T>) = (
            problem.p.iter().copied().collect(),
            problem.q.iter().copied().collect(),
        );
        // Γ₀ = (Φᵀp)·(Ψᵀq)ᵀ for the product plan.
        let phi_p = phi.t().dot(&Array1::from(p.clone()));
        let psi_q = psi.t().dot(&Array1::from(q.clone()));
        let mut gamma = Array2::from_shape_fn((ax, ay), |(a, b)| phi_p[a] * psi_q[b]);
        let (phi_max, psi_max) = (column_max(&phi), column_max(&psi));
        let psi_prime = psi.slice(s![.., ..dy + 1]).to_owned();
        let psi_prime_max = psi_prime
            .rows()
            .into_iter()
            .fold(0.0f64, |a, r| a.max(r.dot(&r).sqrt()));
        let layout = CloudLayout {
            n,
            m,
            d: dy + 1,
            batch: None,
            metric: PointMetric::SqEuclidean,
            precision: Default::default(),
        };
        let inner_params = prm.inner();
        let eps = T::of(prm.eps);
        // Potentials in the units of the gradient (row terms of Φ·K·Ψᵀ included).
        let mut warm_g: Option<(Array1<f64>, Array1<f64>)> = None;
        let (mut step, mut stationarity) = (f64::INFINITY, f64::INFINITY);
        let (mut inner_iterations, mut inner_unconverged) = (0, 0);
        let mut last = None;
        let mut it = 0;
        while it < prm.max_iters && step > prm.tol {
            let k = a_mat.dot(&gamma).dot(&b_mat);
            let kp = k.slice(s![.., ..dy + 1]);
            // z_i = K'ᵀ·φ_i and the row terms −4·φ_i·k₁.
            let z = phi.dot(&kp);
            let rows = phi.dot(&k.column(dy + 1)).mapv(|v| -4.0 * v);
            let zmax = z
                .rows()
                .into_iter()
                .fold(0.0f64, |a, r| a.max(2.0 * r.dot(&r).sqrt()));
            let sigma = if zmax > 0.0 && psi_prime_max > 0.0 {
                (zmax / psi_prime_max).sqrt()
            } else {
                1.0
            };
            let xt = z.mapv(|v| 2.0 * v / sigma);
            let yt = psi_prime.mapv(|v| sigma * v);
            let nx: Array1<f64> = xt.rows().into_iter().map(|r| r.dot(&r)).collect();
            let ny: Array1<f64> = yt.rows().into_iter().map(|r| r.dot(&r)).collect();
            let warm = warm_g.as_ref().map(|(fg, gg)| WarmStart {
                f: (fg + &nx - &rows).insert_axis(Axis(0)),
                g: (gg + &ny).insert_axis(Axis(0)),
            });
            let solver = SinkhornSolver::new(
                be.clone(),
                crate::SinkhornParams {
                    warm_start: warm,
                    ..inner_params.clone()
                },
            );
            let (xt_dev, yt_dev) = (be.upload(&to_t(&xt))?, be.upload(&to_t(&yt))?);
            let prepared = solver.prepare(BufferProblem::points(
                be.upload(&p_t)?,
                be.upload(&q_t)?,
                &xt_dev,
                &yt_dev,
                1,
                layout,
            ))?;
            let (f, g, solution) = solver.iterate_prepared(&prepared)?;
            let conv = solution.convergence;
            inner_iterations += conv.iterations;
            inner_unconverged += usize::from(!conv.converged);
            let fh: Array1<f64> = be.download(&f)?.iter().map(|v| v.f64()).collect();
            let gh: Array1<f64> = be.download(&g)?.iter().map(|v| v.f64()).collect();
            warm_g = Some((&fh - &nx + &rows, &gh - &ny));
            // Γ = Φᵀ·(T·Ψ).
            let tpsi = be.plan_apply(prepared.cost(), Side::Row, &f, &g, eps, &psi_dev, ay)?;
            let mut gam_dev = be.filled(ax * ay, T::zero())?;
            be.gemm(
                GemmShape::new(ax, ay, n).with_transposes(Transpose::Yes, Transpose::No),
                T::one(),
                &phi_dev,
                &tpsi,
                T::zero(),
                &mut gam_dev,
            )?;
            let gamma_new = Array2::from_shape_vec(
                (ax, ay),
                be.download(&gam_dev)?.iter().map(|v| v.f64()).collect(),
            )
            .map_err(|e| Error::Numerical(e.to_string()))?;
            let diff = &gamma_new - &gamma;
            let norm = gamma_new.iter().map(|v| v * v).sum::<f64>().sqrt();
            step = diff.iter().map(|v| v * v).sum::<f64>().sqrt() / norm.max(f64::MIN_POSITIVE);
            let dk = a_mat.dot(&diff).dot(&b_mat);
            stationarity = 4.0
                * dk.indexed_iter()
                    .map(|((a, b), v)| v.abs() * phi_max[a] * psi_max[b])
                    .sum::<f64>();
            gamma = gamma_new;
            last = Some((prepared, f, g, tpsi, conv, xt, yt));
            it += 1;
        }
        let (prepared, f, g, tpsi, inner, xt, yt) =
            last.expect("max_iters ≥ 1 runs one inner solve");
        // The plan's marginals on the fly: T·1 is the last column of T·Ψ, Tᵀ·1 = Tᵀ·ones.
        let tpsi = be.download(&tpsi)?;
        let rows_t: Vec<f64> = (0..n).map(|i| tpsi[i * ay + ay - 1].f64()).collect();
        let ones = be.filled(n, T::one())?;
        let cols_t: Vec<f64> = be
            .download(&be.plan_apply(prepared.cost(), Side::Col, &f, &g, eps, &ones, 1)?)?
            .iter()
            .map(|v| v.f64())
            .collect();
        let l1 = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>();
        let marginal_error = l1(&rows_t, &p).max(l1(&cols_t, &q));
        let inner_prod = |a: &Array2<f64>, b: &Array2<f64>| (a * b).sum();
        let value = inner_prod(
            &a_mat.dot(&second_moments(&phi, &p)).dot(&a_mat),
            &second_moments(&phi, &rows_t),
        ) + inner_prod(
            &b_mat.dot(&second_moments(&psi, &q)).dot(&b_mat),
            &second_moments(&psi, &cols_t),
        ) - 2.0 * inner_prod(&a_mat.dot(&gamma).dot(&b_mat), &gamma);
        if !value.is_finite() {
            return Err(Error::Numerical(format!(
                "the Gromov–Wasserstein value is {value} (eps = {} may be too small for {})",
                prm.eps,
                T::NAME
            )));
        }
        let tol = if prm.tol > 0.0 { prm.tol } else { 1e-9 };
        Ok(PointGromov {
            value,
            f: be.download(&f)?.into_iter().collect(),
            g: be.download(&g)?.into_iter().collect(),
            x_tilde: xt.mapv(T::of),
            y_tilde: yt.mapv(T::of),
            moments: gamma,
            eps: prm.eps,
            report: PointGromovReport {
                iterations: it,
                converged: step <= tol && inner.converged,
                step,
                stationarity,
                marginal_error,
                inner_iterations,
                inner_unconverged,
                inner,
            },
        })
    }
}
