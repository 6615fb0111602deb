//! Aligning point clouds with optimal transport: Kabsch (rotation from a coupling),
//! orthogonal Procrustes in any dimension (polar factor by Newton–Schulz), and the
//! alternating Wasserstein–Procrustes solver (coupling ↔ rotation).
//!
//! A coupling `P` (`n×m`, `P_ij ≥ 0`) says how much of `x_i` goes to `y_j`. Given `P`, the
//! transform `y ≈ R·x + t` minimising `Σ_ij P_ij ‖R·x_i + t − y_j‖²` has
//! `t = ȳ − R·x̄` (`P`-weighted centroids) and `R` maximising `tr(R·H)` for the
//! cross-covariance `H = X̃ᵀ·P·Ỹ` of the centred clouds: with `H = U·S·Vᵀ`,
//! * rotations (`det R = +1`, Kabsch): `R = V·diag(1, 1, det(V·Uᵀ))·Uᵀ`, from [`svd3`];
//! * orthogonal matrices (any `d`): `R = V·Uᵀ`, the polar factor of `Hᵀ`, by
//!   [`newton_schulz()`](super::newton_schulz()) with [`NewtonSchulzParams::polar`].

use super::newton_schulz::{newton_schulz, NewtonSchulzParams};
use super::svd3::svd3;
use super::{check_matrix, download2, upload2};
use crate::backend::linalg::{GemmShape, LinalgKernels, Transpose};
use crate::entropic::sinkhorn::{Problem, SinkhornParams, SinkhornSolver, WarmStart};
use crate::linalg::gemm::sq_euclidean_cost;
use crate::{CpuBackend, Error, Real, Result};
use ndarray::{Array1, Array2, ArrayView2, Axis};

/// `x ↦ R·x + t`, acting on the rows of a point cloud.
#[derive(Clone, Debug, PartialEq)]
pub struct RigidTransform<T> {
    /// `d×d` orthogonal matrix (a rotation, `det = +1`, when it comes from [`kabsch`]).
    pub rotation: Array2<T>,
    /// `d` translation.
    pub translation: Array1<T>,
}

impl<T: Real> RigidTransform<T> {
    /// The identity in dimension `d`.
    ///
    /// ```
    /// let t = logot::linalg::RigidTransform::<f64>::identity(2);
    /// let x = logot::ndarray::array![[1.0, 2.0], [3.0, 4.0]];
    /// assert_eq!(t.apply(x.view())?, x);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn identity(d: usize) -> Self {
        RigidTransform {
            rotation: Array2::eye(d),
            translation: Array1::zeros(d),
        }
    }

    /// The cloud `x` (`n×d`) moved: rows `R·x_i + t`.
    ///
    /// ```
    /// use logot::linalg::RigidTransform;
    /// use logot::ndarray::array;
    /// // A quarter turn, then a shift by (1, 0).
    /// let t = RigidTransform { rotation: array![[0.0, -1.0], [1.0, 0.0]], translation: array![1.0, 0.0] };
    /// assert_eq!(t.apply(array![[1.0, 0.0], [0.0, 2.0]].view())?, array![[1.0, 1.0], [-1.0, 0.0]]);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn apply(&self, x: ArrayView2<'_, T>) -> Result<Array2<T>> {
        let d = self.rotation.nrows();
        if x.ncols() != d {
            return Err(Error::shape(
                "x",
                format!(
                    "points have {} coordinates, the transform acts on {d}",
                    x.ncols()
                ),
            ));
        }
        let mut out = x.dot(&self.rotation.t());
        for mut row in out.rows_mut() {
            for (v, &t) in row.iter_mut().zip(self.translation.iter()) {
                *v += t;
            }
        }
        Ok(out)
    }
}

/// Angle in radians of the 3-D rotation `a·bᵀ` (the geodesic distance between the
/// rotations `a` and `b`): `acos((tr(a·bᵀ) − 1)/2)`.
///
/// ```
/// use logot::ndarray::{array, Array2};
/// let (c, s) = (0.5f64.cos(), 0.5f64.sin());
/// let rot = array![[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]; // 0.5 rad about z
/// let angle = logot::linalg::align::rotation_angle(rot.view(), Array2::eye(3).view())?;
/// assert!((angle - 0.5).abs() < 1e-12);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn rotation_angle<T: Real>(a: ArrayView2<'_, T>, b: ArrayView2<'_, T>) -> Result<f64> {
    if a.dim() != (3, 3) || b.dim() != (3, 3) {
        return Err(Error::shape(
            "a, b",
            format!("rotations must be 3×3, got {:?} and {:?}", a.dim(), b.dim()),
        ));
    }
    let tr: f64 = (0..3)
        .flat_map(|i| (0..3).map(move |j| (i, j)))
        .map(|(i, j)| a[(i, j)].f64() * b[(i, j)].f64())
        .sum();
    Ok(((tr - 1.0) / 2.0).clamp(-1.0, 1.0).acos())
}

/// Two non-empty finite clouds with the same number of coordinates.
fn check_clouds<T: Real>(x: &ArrayView2<'_, T>, y: &ArrayView2<'_, T>) -> Result<()> {
    check_matrix("x", x)?;
    check_matrix("y", y)?;
    if x.ncols() != y.ncols() {
        return Err(Error::shape(
            "y",
            format!(
                "points have {} coordinates but those of x have {}",
                y.ncols(),
                x.ncols()
            ),
        ));
    }
    Ok(())
}

/// A coupling of `n` and `m` points: finite, non-negative, positive mass. Returns its row
/// and column sums.
fn check_plan<T: Real>(
    plan: &ArrayView2<'_, T>,
    n: usize,
    m: usize,
) -> Result<(Vec<f64>, Vec<f64>)> {
    if plan.dim() != (n, m) {
        return Err(Error::shape(
            "plan",
            format!(
                "is {}×{} but x has {n} and y has {m} points",
                plan.nrows(),
                plan.ncols()
            ),
        ));
    }
    crate::validate::check_finite("plan", plan)?;
    if let Some((idx, v)) = plan.indexed_iter().find(|(_, v)| **v < T::zero()) {
        return Err(Error::NegativeMass {
            arg: "plan".into(),
            index: format!("{idx:?}"),
            value: v.to_string(),
        });
    }
    let rows: Vec<f64> = plan
        .rows()
        .into_iter()
        .map(|r| r.iter().map(|v| v.f64()).sum())
        .collect();
    let cols: Vec<f64> = plan
        .columns()
        .into_iter()
        .map(|c| c.iter().map(|v| v.f64()).sum())
        .collect();
    if rows.iter().sum::<f64>() <= 0.0 {
        return Err(Error::ZeroMass {
            arg: "plan".into(),
            detail: String::new(),
        });
    }
    Ok((rows, cols))
}

/// Centroid of the rows of `x` with weights `w` (in `f64`).
fn centroid<T: Real>(x: &ArrayView2<'_, T>, w: &[f64]) -> Vec<f64> {
    let total: f64 = w.iter().sum();
    (0..x.ncols())
        .map(|c| {
            x.column(c)
                .iter()
                .zip(w)
                .map(|(v, wi)| v.f64() * wi)
                .sum::<f64>()
                / total
        })
        .collect()
}

fn shifted<T: Real>(x: &ArrayView2<'_, T>, shift: &[f64]) -> Array2<T> {
    Array2::from_shape_fn(x.dim(), |(i, c)| T::of(x[(i, c)].f64() - shift[c]))
}

/// Cross-covariance `H = Xᵀ·P·Y` (`d×d`) by two GEMMs on `backend`, returned in `f64`.
fn cross_covariance<T: Real, B: LinalgKernels<T>>(
    backend: &B,
    x: &ArrayView2<'_, T>,
    y: &ArrayView2<'_, T>,
    plan: &ArrayView2<'_, T>,
) -> Result<Array2<f64>> {
    let ((n, d), m) = (x.dim(), y.nrows());
    let (xb, yb, pb) = (
        upload2(backend, x)?,
        upload2(backend, y)?,
        upload2(backend, plan)?,
    );
    let mut py = backend.filled(n * d, T::zero())?;
    backend.gemm(
        GemmShape::new(n, d, m),
        T::one(),
        &pb,
        &yb,
        T::zero(),
        &mut py,
    )?;
    let mut h = backend.filled(d * d, T::zero())?;
    backend.gemm(
        GemmShape::new(d, d, n).with_transposes(Transpose::Yes, Transpose::No),
        T::one(),
        &xb,
        &py,
        T::zero(),
        &mut h,
    )?;
    Ok(download2(backend, &h, d, d)?.mapv(|v| v.f64()))
}

/// The rotation (`det = +1`) maximising `tr(R·H)`: `R = V·diag(1, 1, det(V·Uᵀ))·Uᵀ` for
/// `H = U·S·Vᵀ`.
fn kabsch_rotation(h: &Array2<f64>) -> Result<Array2<f64>> {
    let svd = svd3(h.view())?;
    let (u, vt) = (&svd.u, &svd.vt);
    let det = det3(u) * det3(vt);
    let mut r = Array2::zeros((3, 3));
    for i in 0..3 {
        for j in 0..3 {
            // R_ij = Σ_k V_ik·D_k·U_jk, V_ik = vt[k, i].
            r[(i, j)] = (0..3)
                .map(|k| vt[(k, i)] * if k == 2 { det.signum() } else { 1.0 } * u[(j, k)])
                .sum::<f64>();
        }
    }
    Ok(r)
}

fn det3(a: &Array2<f64>) -> f64 {
    a[(0, 0)] * (a[(1, 1)] * a[(2, 2)] - a[(1, 2)] * a[(2, 1)])
        - a[(0, 1)] * (a[(1, 0)] * a[(2, 2)] - a[(1, 2)] * a[(2, 0)])
        + a[(0, 2)] * (a[(1, 0)] * a[(2, 1)] - a[(1, 1)] * a[(2, 0)])
}

/// Kabsch: the rigid motion `y ≈ R·x + t` (`R` a rotation, `det R = +1`) minimising
/// `Σ_ij P_ij ‖R·x_i + t − y_j‖²`, for 3-D clouds `x` (`n×3`), `y` (`m×3`) and a coupling
/// `plan` (`n×m`, non-negative, positive mass), on the CPU.
///
/// With `center = false` the translation is fixed at 0 (a rotation about the origin).
/// When the cross-covariance has rank ≤ 1 (collinear points) the rotation is not unique
/// and one of the minimisers is returned.
///
/// ```
/// use logot::linalg::{align::rotation_angle, kabsch};
/// use logot::ndarray::{array, Array2};
/// let (c, s) = (0.5f64.cos(), 0.5f64.sin());
/// let rot = array![[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]; // 0.5 rad about z
/// let x = array![[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0], [1.0, 1.0, 1.0]];
/// let y = x.dot(&rot.t()) + &array![0.1, -0.2, 0.3]; // y_i = R·x_i + t
/// let plan = Array2::eye(4) / 4.0; // x_i ↔ y_i
/// let fit = kabsch(x.view(), y.view(), plan.view(), true)?;
/// assert!(rotation_angle(fit.rotation.view(), rot.view())? < 1e-9);
/// assert!((&fit.translation - &array![0.1, -0.2, 0.3]).iter().all(|e| e.abs() < 1e-9));
/// # Ok::<(), logot::Error>(())
/// ```
pub fn kabsch<T: Real>(
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
    plan: ArrayView2<'_, T>,
    center: bool,
) -> Result<RigidTransform<T>> {
    procrustes_on(&CpuBackend, x, y, plan, center, &Solve::Kabsch)
}

/// Orthogonal Procrustes in any dimension: the orthogonal `R` (`d×d`, `det = ±1`) and `t`
/// minimising `Σ_ij P_ij ‖R·x_i + t − y_j‖²`, with `R` the polar factor of `Hᵀ` computed
/// by Newton–Schulz (`params`, typically [`NewtonSchulzParams::polar`]), on the CPU.
///
/// ```
/// use logot::linalg::{orthogonal_procrustes, NewtonSchulzParams};
/// use logot::ndarray::{array, Array2};
/// // 4-D: a reflection and a swap of two axes (det = −1, not a rotation).
/// let q = array![[-1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]];
/// let x = Array2::from_shape_fn((6, 4), |(i, k)| ((3 * i + 5 * k) % 7) as f64 - 3.0);
/// let y = x.dot(&q.t());
/// let fit = orthogonal_procrustes(x.view(), y.view(), (Array2::eye(6) / 6.0).view(), false, &NewtonSchulzParams::default().polar())?;
/// assert!((&fit.rotation - &q).iter().all(|e| e.abs() < 1e-9));
/// # Ok::<(), logot::Error>(())
/// ```
pub fn orthogonal_procrustes<T: Real>(
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
    plan: ArrayView2<'_, T>,
    center: bool,
    params: &NewtonSchulzParams,
) -> Result<RigidTransform<T>> {
    procrustes_on(
        &CpuBackend,
        x,
        y,
        plan,
        center,
        &Solve::NewtonSchulz(params.clone()),
    )
}

/// How the orthogonal factor is found from the cross-covariance.
enum Solve {
    Kabsch,
    NewtonSchulz(NewtonSchulzParams),
}

fn procrustes_on<T: Real, B: LinalgKernels<T>>(
    backend: &B,
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
    plan: ArrayView2<'_, T>,
    center: bool,
    solve: &Solve,
) -> Result<RigidTransform<T>> {
    check_clouds(&x, &y)?;
    let (rows, cols) = check_plan(&plan, x.nrows(), y.nrows())?;
    let d = x.ncols();
    if matches!(solve, Solve::Kabsch) && d != 3 {
        return Err(Error::shape(
            "x",
            format!("Kabsch needs 3-D points, got {d} coordinates"),
        ));
    }
    let (xbar, ybar) = if center {
        (centroid(&x, &rows), centroid(&y, &cols))
    } else {
        (vec![0.0; d], vec![0.0; d])
    };
    let (xc, yc) = (shifted(&x, &xbar), shifted(&y, &ybar));
    let h = cross_covariance(backend, &xc.view(), &yc.view(), &plan)?;
    let r = rotation_from(backend, &h, solve)?;
    Ok(transform_from(&r, &xbar, &ybar))
}

/// The orthogonal factor maximising `tr(R·H)`.
fn rotation_from<T: Real, B: LinalgKernels<T>>(
    backend: &B,
    h: &Array2<f64>,
    solve: &Solve,
) -> Result<Array2<f64>> {
    match solve {
        Solve::Kabsch => kabsch_rotation(h),
        Solve::NewtonSchulz(params) => {
            let ht = h.t().mapv(T::of);
            if ht.iter().all(|v| *v == T::zero()) {
                return Ok(Array2::eye(h.nrows()));
            }
            Ok(newton_schulz(backend, ht.view(), params)?.mapv(|v| v.f64()))
        }
    }
}

fn transform_from<T: Real>(r: &Array2<f64>, xbar: &[f64], ybar: &[f64]) -> RigidTransform<T> {
    let d = r.nrows();
    let t = Array1::from_shape_fn(d, |i| {
        T::of(ybar[i] - (0..d).map(|j| r[(i, j)] * xbar[j]).sum::<f64>())
    });
    RigidTransform {
        rotation: r.mapv(T::of),
        translation: t,
    }
}

/// How [`wasserstein_procrustes`] finds the orthogonal factor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProcrustesMethod {
    /// Kabsch for 3-D clouds, Newton–Schulz otherwise.
    #[default]
    Auto,
    /// Rotations (`det = +1`) by [`svd3`]; 3-D only.
    Kabsch,
    /// Orthogonal matrices (`det = ±1`) by the Newton–Schulz polar factor; any dimension.
    NewtonSchulz,
}

/// Initial orthogonal matrices of [`wasserstein_procrustes`]. The problem is non-convex:
/// every start runs through the ε annealing, and the one with the lowest transport cost
/// at the final ε iterates on to convergence.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Init {
    /// 3-D: the identity and the rotations that map the principal axes of `x` onto those
    /// of `y` (4 sign choices with `det = +1`, or 8 for orthogonal matrices; axes from
    /// [`svd3`] of the centred clouds). Other dimensions: the identity only.
    #[default]
    Pca,
    /// The identity only.
    Identity,
    /// These starts (`d×d` each, not necessarily orthogonal).
    Given(Vec<Array2<f64>>),
}

/// Parameters of [`wasserstein_procrustes`]. Regularisations are relative to the clouds'
/// scale `s² = mean‖x_i − x̄‖² + mean‖y_j − ȳ‖²` (the mean squared-Euclidean cost at
/// `R = I`), so the defaults fit any units. Set by builder methods
/// (`WassersteinProcrustesParams::default().eps(1e-4)`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct WassersteinProcrustesParams {
    /// Final ε, relative to `s²`.
    pub eps: f64,
    /// First ε, relative to `s²`; ε shrinks geometrically by `eps_decay` per outer
    /// iteration down to `eps`.
    pub eps_start: f64,
    /// Factor of the ε schedule, in (0, 1].
    pub eps_decay: f64,
    /// Maximum outer (coupling ↔ rotation) iterations per start (annealing included).
    pub max_iters: usize,
    /// Stop once ε has reached `eps` and `‖R_k − R_{k−1}‖_F ≤ tol`.
    pub tol: f64,
    /// Maximum Sinkhorn iterations per coupling (warm-started from the previous one).
    pub sinkhorn_iters: usize,
    /// Marginal-error target of each coupling (raised to the precision's default
    /// tolerance when smaller).
    pub sinkhorn_tol: f64,
    /// Fit a translation (centre both clouds) or rotate about the origin.
    pub center: bool,
    /// Kabsch (rotations) or Newton–Schulz (orthogonal matrices).
    pub method: ProcrustesMethod,
    /// Starting points.
    pub init: Init,
    /// Newton–Schulz steps for the polar factor (used by [`ProcrustesMethod::NewtonSchulz`]).
    pub newton_schulz: NewtonSchulzParams,
}

impl Default for WassersteinProcrustesParams {
    fn default() -> Self {
        WassersteinProcrustesParams {
            eps: 1e-3,
            eps_start: 0.3,
            eps_decay: 0.6,
            max_iters: 100,
            tol: 1e-5,
            sinkhorn_iters: 100,
            sinkhorn_tol: 1e-6,
            center: true,
            method: ProcrustesMethod::Auto,
            init: Init::Pca,
            newton_schulz: NewtonSchulzParams::default().polar(),
        }
    }
}

impl WassersteinProcrustesParams {
    /// These parameters with the final ε (relative to `s²`).
    pub fn eps(self, eps: f64) -> Self {
        WassersteinProcrustesParams { eps, ..self }
    }
    /// These parameters with the first ε (relative to `s²`).
    pub fn eps_start(self, eps_start: f64) -> Self {
        WassersteinProcrustesParams { eps_start, ..self }
    }
    /// These parameters with the factor `eps_decay` of the ε schedule.
    pub fn eps_decay(self, eps_decay: f64) -> Self {
        WassersteinProcrustesParams { eps_decay, ..self }
    }
    /// These parameters with at most `max_iters` outer iterations per start.
    pub fn max_iters(self, max_iters: usize) -> Self {
        WassersteinProcrustesParams { max_iters, ..self }
    }
    /// These parameters with the rotation tolerance `tol`.
    pub fn tol(self, tol: f64) -> Self {
        WassersteinProcrustesParams { tol, ..self }
    }
    /// These parameters with at most `sinkhorn_iters` Sinkhorn iterations per coupling.
    pub fn sinkhorn_iters(self, sinkhorn_iters: usize) -> Self {
        WassersteinProcrustesParams {
            sinkhorn_iters,
            ..self
        }
    }
    /// These parameters with the marginal-error target `sinkhorn_tol` of each coupling.
    pub fn sinkhorn_tol(self, sinkhorn_tol: f64) -> Self {
        WassersteinProcrustesParams {
            sinkhorn_tol,
            ..self
        }
    }
    /// These parameters with (`center` true) or without a fitted translation.
    pub fn center(self, center: bool) -> Self {
        WassersteinProcrustesParams { center, ..self }
    }
    /// These parameters with the orthogonal factor found by `method`.
    pub fn method(self, method: ProcrustesMethod) -> Self {
        WassersteinProcrustesParams { method, ..self }
    }
    /// These parameters with the starting points `init`.
    pub fn init(self, init: Init) -> Self {
        WassersteinProcrustesParams { init, ..self }
    }
    /// These parameters with the Newton–Schulz parameters `newton_schulz`.
    pub fn newton_schulz(self, newton_schulz: NewtonSchulzParams) -> Self {
        WassersteinProcrustesParams {
            newton_schulz,
            ..self
        }
    }

    fn validate(&self) -> Result<()> {
        crate::validate::check_eps("eps", self.eps)?;
        crate::validate::check_eps("eps_start", self.eps_start)?;
        if !(self.eps_decay > 0.0 && self.eps_decay <= 1.0) {
            return Err(Error::parameter(
                "eps_decay",
                self.eps_decay,
                "must lie in (0, 1]",
            ));
        }
        if self.max_iters == 0 {
            return Err(Error::parameter(
                "max_iters",
                0,
                "at least one iteration is needed",
            ));
        }
        if self.sinkhorn_iters == 0 {
            return Err(Error::parameter(
                "sinkhorn_iters",
                0,
                "at least one iteration is needed",
            ));
        }
        if !(self.tol.is_finite() && self.tol >= 0.0) {
            return Err(Error::parameter("tol", self.tol, "must be finite and ≥ 0"));
        }
        if !(self.sinkhorn_tol.is_finite() && self.sinkhorn_tol > 0.0) {
            return Err(Error::parameter(
                "sinkhorn_tol",
                self.sinkhorn_tol,
                "must be finite and > 0",
            ));
        }
        Ok(())
    }
}

/// Result of [`wasserstein_procrustes`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WassersteinProcrustesResult<T> {
    /// `y ≈ R·x + t`.
    pub transform: RigidTransform<T>,
    /// The last coupling (`n×m`, marginals `1/n` and `1/m`).
    pub plan: Array2<T>,
    /// Its transport cost `⟨P, C⟩` (squared distances, in the clouds' units).
    pub distance: f64,
    /// Outer iterations of the winning start (annealing included).
    pub iterations: usize,
    /// Whether the winning start met `tol`.
    pub converged: bool,
    /// Index of the winning start (in the order of [`Init`]).
    pub start: usize,
}

/// Wasserstein–Procrustes on `backend`: find `R` (orthogonal) and `t` such that the cloud
/// `{R·x_i + t}` is close to `{y_j}` in entropic Wasserstein distance (uniform weights,
/// squared-Euclidean cost), by alternating the optimal coupling for the current `R` and
/// the best `R` for that coupling ([`kabsch`] or the Newton–Schulz polar factor), with ε
/// annealed from `eps_start` to `eps`. Points need not correspond (shuffled, `n ≠ m`).
///
/// ```
/// use logot::linalg::{align::rotation_angle, wasserstein_procrustes, WassersteinProcrustesParams};
/// use logot::ndarray::{array, Array2};
/// let (c, s) = (0.5f64.cos(), 0.5f64.sin());
/// let rot = array![[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]; // 0.5 rad about z
/// // A cloud and its rotated copy with the points in another order: no correspondence given.
/// let x = Array2::from_shape_fn((40, 3), |(i, k)| ((i * (k + 2) * 7 + 3 * k) % 23) as f64 / 23.0 - 0.5 + 0.3 * k as f64);
/// let y = Array2::from_shape_fn((40, 3), |(j, k)| x.row((7 * j) % 40).dot(&rot.row(k)));
/// let fit = wasserstein_procrustes(&logot::CpuBackend, x.view(), y.view(), &WassersteinProcrustesParams::default())?;
/// assert!(rotation_angle(fit.transform.rotation.view(), rot.view())? < 1e-2);
/// # Ok::<(), logot::Error>(())
/// ```
///
/// ```
/// use logot::linalg::{wasserstein_procrustes, WassersteinProcrustesParams};
/// use logot::ndarray::Array2;
/// use logot::linalg::align::rotation_angle;
/// // A 3-D cloud turned by 0.3 rad about x and shifted, points in another order.
/// let (c, s) = (0.3f64.cos(), 0.3f64.sin());
/// let rot = logot::ndarray::array![[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]];
/// let x = Array2::from_shape_fn((30, 3), |(i, k)| ((i * (k + 3) * 5 + k) % 17) as f64 / 17.0 + k as f64);
/// let y = Array2::from_shape_fn((30, 3), |(j, k)| x.row((11 * j) % 30).dot(&rot.row(k)) + 0.5);
/// let fit = wasserstein_procrustes(&logot::CpuBackend, x.view(), y.view(), &WassersteinProcrustesParams::default())?;
/// assert!(rotation_angle(fit.transform.rotation.view(), rot.view())? < 1e-2);
/// assert!(fit.transform.translation.iter().all(|t| t.is_finite()));
/// # Ok::<(), logot::Error>(())
/// ```
pub fn wasserstein_procrustes<T: Real, B: LinalgKernels<T> + Clone>(
    backend: &B,
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
    params: &WassersteinProcrustesParams,
) -> Result<WassersteinProcrustesResult<T>> {
    params.validate()?;
    check_clouds(&x, &y)?;
    let ((n, d), m) = (x.dim(), y.nrows());
    let solve = match (params.method, d) {
        (ProcrustesMethod::Auto, 3) | (ProcrustesMethod::Kabsch, 3) => Solve::Kabsch,
        (ProcrustesMethod::Kabsch, _) => {
            return Err(Error::shape(
                "x",
                format!("Kabsch needs 3-D points, got {d} coordinates"),
            ));
        }
        _ => Solve::NewtonSchulz(params.newton_schulz.clone()),
    };
    let (xbar, ybar) = if params.center {
        (centroid(&x, &vec![1.0; n]), centroid(&y, &vec![1.0; m]))
    } else {
        (vec![0.0; d], vec![0.0; d])
    };
    let (xc, yc) = (shifted(&x, &xbar), shifted(&y, &ybar));
    let starts = initial_rotations(&xc, &yc, &params.init, &solve)?;
    let mean_sq =
        |a: &Array2<T>| a.iter().map(|v| v.f64() * v.f64()).sum::<f64>() / a.nrows() as f64;
    let scale = mean_sq(&xc) + mean_sq(&yc);
    if scale <= 0.0 {
        // Both clouds are single points (after centring): nothing to rotate.
        let plan = Array2::from_elem((n, m), T::of(1.0 / (n * m) as f64));
        return Ok(WassersteinProcrustesResult {
            transform: transform_from(&Array2::eye(d), &xbar, &ybar),
            plan,
            distance: 0.0,
            iterations: 0,
            converged: true,
            start: 0,
        });
    }
    let problem = Alternation {
        xc: &xc,
        yc: &yc,
        scale,
        params,
        solve: &solve,
    };
    // Phase 1: every start anneals ε down to its final value; phase 2: the start with the
    // lowest transport cost there iterates on to convergence.
    let mut best: Option<(usize, State<T>)> = None;
    for (k, r0) in starts.into_iter().enumerate() {
        let state = State {
            r: r0,
            eps: params.eps_start.max(params.eps),
            warm: None,
            iterations: 0,
            last: None,
        };
        let state = problem.run(backend, state, true)?;
        if best
            .as_ref()
            .is_none_or(|(_, b)| state.distance() < b.distance())
        {
            best = Some((k, state));
        }
    }
    let (start, state) =
        best.ok_or_else(|| Error::parameter("init", "Given([])", "at least one start is needed"))?;
    let state = problem.run(backend, state, false)?;
    let converged = state.converged(params);
    let (plan, distance, _) = state
        .last
        .ok_or_else(|| Error::Numerical("no coupling was computed".into()))?;
    Ok(WassersteinProcrustesResult {
        transform: transform_from(&state.r, &xbar, &ybar),
        plan,
        distance,
        iterations: state.iterations,
        converged,
        start,
    })
}

/// The starts of [`Init`] for centred clouds.
fn initial_rotations<T: Real>(
    xc: &Array2<T>,
    yc: &Array2<T>,
    init: &Init,
    solve: &Solve,
) -> Result<Vec<Array2<f64>>> {
    let d = xc.ncols();
    match init {
        Init::Identity => Ok(vec![Array2::eye(d)]),
        Init::Given(rs) => {
            if let Some(r) = rs.iter().find(|r| r.dim() != (d, d)) {
                return Err(Error::shape(
                    "init",
                    format!("a start is {:?}, expected {d}×{d}", r.dim()),
                ));
            }
            if rs.iter().any(|r| r.iter().any(|v| !v.is_finite())) {
                return Err(Error::NonFinite {
                    arg: "init".into(),
                    index: "?".into(),
                    value: "non-finite".into(),
                });
            }
            Ok(rs.clone())
        }
        Init::Pca if d != 3 => Ok(vec![Array2::eye(d)]),
        Init::Pca => {
            // Principal axes: rows of Vᵀ of the centred clouds.
            let (vx, vy) = (
                svd3(xc.view())?.vt.mapv(|v| v.f64()),
                svd3(yc.view())?.vt.mapv(|v| v.f64()),
            );
            let det = det3(&vx) * det3(&vy);
            let mut out = vec![Array2::eye(3)];
            for signs in 0..8u32 {
                let dsign: Vec<f64> = (0..3)
                    .map(|k| if signs >> k & 1 == 1 { -1.0 } else { 1.0 })
                    .collect();
                let proper = dsign.iter().product::<f64>() * det > 0.0;
                if matches!(solve, Solve::Kabsch) && !proper {
                    continue;
                }
                // R = Vyᵀ·D·Vx maps axis k of x (row k of vx) to ±axis k of y.
                out.push(Array2::from_shape_fn((3, 3), |(i, j)| {
                    (0..3).map(|k| vy[(k, i)] * dsign[k] * vx[(k, j)]).sum()
                }));
            }
            Ok(out)
        }
    }
}

/// The alternating solver on centred clouds.
struct Alternation<'a, T> {
    xc: &'a Array2<T>,
    yc: &'a Array2<T>,
    /// `s²`: ε's unit.
    scale: f64,
    params: &'a WassersteinProcrustesParams,
    solve: &'a Solve,
}

/// Where one start of the alternation stands.
struct State<T> {
    r: Array2<f64>,
    /// Current ε, relative to `s²`.
    eps: f64,
    warm: Option<WarmStart>,
    iterations: usize,
    /// Last coupling, its transport cost and the rotation change it produced.
    last: Option<(Array2<T>, f64, f64)>,
}

impl<T> State<T> {
    fn distance(&self) -> f64 {
        self.last.as_ref().map_or(f64::INFINITY, |l| l.1)
    }
    fn converged(&self, params: &WassersteinProcrustesParams) -> bool {
        self.eps <= params.eps && self.last.as_ref().is_some_and(|l| l.2 <= params.tol)
    }
}

impl<T: Real> Alternation<'_, T> {
    /// Iterate coupling ↔ rotation from `state`: with `anneal_only`, until one coupling at
    /// the final ε has been computed; otherwise until convergence. At most `max_iters`
    /// iterations in all.
    fn run<B: LinalgKernels<T> + Clone>(
        &self,
        backend: &B,
        mut st: State<T>,
        anneal_only: bool,
    ) -> Result<State<T>> {
        let p = self.params;
        let (n, m) = (self.xc.nrows(), self.yc.nrows());
        let mu = Array1::from_elem(n, T::of(1.0 / n as f64));
        let nu = Array1::from_elem(m, T::of(1.0 / m as f64));
        while st.iterations < p.max_iters {
            if st.converged(p) || (anneal_only && st.eps <= p.eps && st.last.is_some()) {
                break;
            }
            st.iterations += 1;
            let rt = st.r.t().mapv(T::of);
            let xr = super::gemm::matmul(backend, self.xc.view(), rt.view())?;
            let cost = sq_euclidean_cost(backend, xr.view(), self.yc.view())?;
            // Warm start from the previous coupling's potentials (as in ε-scaling).
            let mut sp = SinkhornParams::new(st.eps * self.scale)
                .max_iters(p.sinkhorn_iters)
                .tol(p.sinkhorn_tol.max(T::DEFAULT_TOL));
            sp.warm_start = st.warm.take();
            let coupling = SinkhornSolver::new(backend.clone(), sp).coupling(&Problem::new(
                mu.view(),
                nu.view(),
                cost.view(),
            )?)?;
            let plan = coupling.plan.index_axis_move(Axis(0), 0);
            let res = coupling.result;
            st.warm = Some(WarmStart::new(
                res.f.mapv(|v| v.f64()),
                res.g.mapv(|v| v.f64()),
            ));
            let h = cross_covariance(backend, &self.xc.view(), &self.yc.view(), &plan.view())?;
            let r_new = if h.iter().all(|v| *v == 0.0) {
                st.r.clone()
            } else {
                rotation_from(backend, &h, self.solve)?
            };
            let change = (&r_new - &st.r).mapv(|v| v * v).sum().sqrt();
            st.r = r_new;
            st.last = Some((plan, res.distance[0].f64(), change));
            if st.eps > p.eps {
                // The change measured at this ε does not count towards convergence.
                st.last = st.last.map(|(pl, d, _)| (pl, d, f64::INFINITY));
                st.eps = (st.eps * p.eps_decay).max(p.eps);
            }
        }
        Ok(st)
    }
}
