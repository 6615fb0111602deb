//! Parameters of the Gromov–Wasserstein solvers: the loss between structure entries, the
//! entropic (mirror-descent) outer loop and its Sinkhorn inner solves, and the conditional
//! gradient. Defaults are POT's (`ot.gromov`).

use crate::backend::linalg::GemmPrecision;
use crate::validate::check_eps;
use crate::{Error, Result};

/// The loss `L(a, b)` between an entry `a` of `C1` and an entry `b` of `C2`, written as
/// `L(a, b) = f1(a) + f2(b) − h1(a)·h2(b)` (Peyré, Cuturi & Solomon 2016, Prop. 1), which
/// makes `L(C1, C2) ⊗ T` two matrix products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GwLoss {
    /// `L(a, b) = (a − b)²`: `f1(a) = a²`, `f2(b) = b²`, `h1(a) = a`, `h2(b) = 2b`
    /// (POT's `"square_loss"`).
    #[default]
    Square,
    /// `L(a, b) = a·log(a/b) − a + b`: `f1(a) = a·log a − a`, `f2(b) = b`, `h1(a) = a`,
    /// `h2(b) = log b` (POT's `"kl_loss"`). Needs `C1 ≥ 0` (with `0·log 0 = 0`) and
    /// `C2 > 0`: the loss is infinite where `b = 0 < a`, and such inputs are refused.
    Kl,
}

impl GwLoss {
    /// POT's name of the loss (`"square_loss"`, `"kl_loss"`).
    ///
    /// ```
    /// use logot::gromov::GwLoss;
    /// assert_eq!(GwLoss::from_name(GwLoss::Kl.name()), Some(GwLoss::Kl));
    /// assert_eq!(GwLoss::from_name("hinge"), None);
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            GwLoss::Square => "square_loss",
            GwLoss::Kl => "kl_loss",
        }
    }

    /// The loss of POT's name `name`, if any.
    pub fn from_name(name: &str) -> Option<GwLoss> {
        [GwLoss::Square, GwLoss::Kl]
            .into_iter()
            .find(|l| l.name() == name)
    }

    /// `L(a, b)` in f64.
    pub fn eval(self, a: f64, b: f64) -> f64 {
        match self {
            GwLoss::Square => (a - b) * (a - b),
            GwLoss::Kl => xlogx(a) - a * b.ln() - a + b,
        }
    }

    /// `f1(a)`.
    pub(crate) fn f1(self, a: f64) -> f64 {
        match self {
            GwLoss::Square => a * a,
            GwLoss::Kl => xlogx(a) - a,
        }
    }
    /// `f2(b)`.
    pub(crate) fn f2(self, b: f64) -> f64 {
        match self {
            GwLoss::Square => b * b,
            GwLoss::Kl => b,
        }
    }
    /// `h1(a)`.
    pub(crate) fn h1(self, a: f64) -> f64 {
        a
    }
    /// `h2(b)`.
    pub(crate) fn h2(self, b: f64) -> f64 {
        match self {
            GwLoss::Square => 2.0 * b,
            GwLoss::Kl => b.ln(),
        }
    }
}

/// `x·log x` with `0·log 0 = 0`.
fn xlogx(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else {
        x * x.ln()
    }
}

/// Parameters of entropic (fused) Gromov–Wasserstein by mirror descent, POT's
/// `entropic_gromov_wasserstein(..., solver="PGD")`: each outer iteration solves
/// `T ← Sinkhorn(p, q, ∇F(T), ε)` to the inner tolerance, warm-started from the previous
/// potentials. `Default` gives POT's defaults (`epsilon = 0.1`, `max_iter = 1000`,
/// `tol = 1e-9`, the step checked every 10 iterations; inner solves of at most 1000
/// iterations to the precision's default marginal tolerance).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EntropicGwParams {
    /// Regularisation ε (> 0) of every inner Sinkhorn solve, in the units of the gradient.
    pub eps: f64,
    /// The loss between structure entries.
    pub loss: GwLoss,
    /// Whether `C1` and `C2` are symmetric; `None` tests them as POT does
    /// (`allclose(C, Cᵀ, rtol = 1e-5, atol = 1e-10)` for both). With `false` the gradient is
    /// `½(L⊗T + Lᵀ⊗T)`, the gradient of the loss for any structure.
    pub symmetric: Option<bool>,
    /// Maximum number of outer iterations.
    pub max_iters: usize,
    /// Stop when `‖T − T_prev‖_F ≤ tol` at a check (0 runs every iteration).
    pub tol: f64,
    /// Check the step at outer iterations `0, check_every, 2·check_every, …` (POT: 10).
    pub check_every: usize,
    /// Maximum number of iterations of each inner Sinkhorn solve.
    pub inner_max_iters: usize,
    /// Marginal tolerance of each inner solve (relative to the mass); `None` picks the
    /// precision's default (1e-9 in f64, 1e-5 in f32). Agreement with another solver of the
    /// same outer loop needs tight inner solves (e.g. 1e-12 in f64).
    pub inner_tol: Option<f64>,
    /// Check the inner marginal error every this many Sinkhorn iterations.
    pub inner_check_every: usize,
    /// How the cross term `h1(C1)·T·h2(C2)ᵀ` forms its products on a backend that offers a
    /// choice (the CUDA backend in f32; [`GemmPrecision`]).
    pub cross_precision: GemmPrecision,
}

impl Default for EntropicGwParams {
    fn default() -> Self {
        EntropicGwParams {
            eps: 0.1,
            loss: GwLoss::Square,
            symmetric: None,
            max_iters: 1000,
            tol: 1e-9,
            check_every: 10,
            inner_max_iters: 1000,
            inner_tol: None,
            inner_check_every: 10,
            cross_precision: GemmPrecision::Exact,
        }
    }
}

impl EntropicGwParams {
    /// Default parameters with regularisation `eps`.
    pub fn new(eps: f64) -> Self {
        EntropicGwParams {
            eps,
            ..Default::default()
        }
    }

    /// These parameters with regularisation `eps`.
    pub fn eps(self, eps: f64) -> Self {
        Self { eps, ..self }
    }

    /// These parameters with the loss `loss`.
    pub fn loss(self, loss: GwLoss) -> Self {
        Self { loss, ..self }
    }

    /// These parameters with the structures' symmetry given (`None`: tested).
    pub fn symmetric(self, symmetric: impl Into<Option<bool>>) -> Self {
        Self {
            symmetric: symmetric.into(),
            ..self
        }
    }

    /// These parameters with at most `max_iters` outer iterations.
    pub fn max_iters(self, max_iters: usize) -> Self {
        Self { max_iters, ..self }
    }

    /// These parameters with the outer tolerance `tol`.
    pub fn tol(self, tol: f64) -> Self {
        Self { tol, ..self }
    }

    /// These parameters with the step checked every `check_every` outer iterations.
    pub fn check_every(self, check_every: usize) -> Self {
        Self {
            check_every,
            ..self
        }
    }

    /// These parameters with inner solves of at most `inner_max_iters` iterations.
    pub fn inner_max_iters(self, inner_max_iters: usize) -> Self {
        Self {
            inner_max_iters,
            ..self
        }
    }

    /// These parameters with the inner marginal tolerance `inner_tol` (`None`: the precision's default).
    pub fn inner_tol(self, inner_tol: impl Into<Option<f64>>) -> Self {
        Self {
            inner_tol: inner_tol.into(),
            ..self
        }
    }

    /// These parameters with the inner marginal error checked every `inner_check_every` iterations.
    pub fn inner_check_every(self, inner_check_every: usize) -> Self {
        Self {
            inner_check_every,
            ..self
        }
    }

    /// These parameters with the cross term's products at `cross_precision`.
    pub fn cross_precision(self, cross_precision: GemmPrecision) -> Self {
        Self {
            cross_precision,
            ..self
        }
    }

    /// Exactly `iters` outer iterations (no early stop; the step is still reported).
    pub fn fixed_iterations(self, iters: usize) -> Self {
        EntropicGwParams {
            max_iters: iters,
            tol: 0.0,
            ..self
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        check_eps("eps", self.eps)?;
        for (arg, v) in [
            ("max_iters", self.max_iters),
            ("check_every", self.check_every),
            ("inner_max_iters", self.inner_max_iters),
            ("inner_check_every", self.inner_check_every),
        ] {
            if v == 0 {
                return Err(Error::parameter(arg, 0, "must be ≥ 1"));
            }
        }
        check_tol("tol", self.tol)?;
        if let Some(t) = self.inner_tol {
            check_tol("inner_tol", t)?;
        }
        Ok(())
    }

    /// The Sinkhorn parameters of an inner solve.
    pub(crate) fn inner(&self) -> crate::SinkhornParams {
        crate::SinkhornParams {
            eps: self.eps,
            max_iters: self.inner_max_iters,
            tol: self.inner_tol,
            check_every: self.inner_check_every,
            ..Default::default()
        }
    }
}

/// Parameters of exact (fused) Gromov–Wasserstein by conditional gradient (Frank–Wolfe),
/// POT's `gromov_wasserstein` / `fused_gromov_wasserstein` with the exact line search
/// (`armijo = False`). `Default` gives POT's defaults (`max_iter = 10⁴`,
/// `tol_rel = tol_abs = 1e-9`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConditionalGradientParams {
    /// The loss between structure entries.
    pub loss: GwLoss,
    /// Whether `C1` and `C2` are symmetric; `None` tests them as POT does.
    pub symmetric: Option<bool>,
    /// Maximum number of Frank–Wolfe iterations.
    pub max_iters: usize,
    /// Stop when the objective changes by at most `tol_rel` relative to its value.
    pub tol_rel: f64,
    /// Stop when the objective changes by at most `tol_abs`.
    pub tol_abs: f64,
}

impl Default for ConditionalGradientParams {
    fn default() -> Self {
        ConditionalGradientParams {
            loss: GwLoss::Square,
            symmetric: None,
            max_iters: 10_000,
            tol_rel: 1e-9,
            tol_abs: 1e-9,
        }
    }
}

impl ConditionalGradientParams {
    /// These parameters with the loss `loss`.
    pub fn loss(self, loss: GwLoss) -> Self {
        Self { loss, ..self }
    }

    /// These parameters with the structures' symmetry given (`None`: tested).
    pub fn symmetric(self, symmetric: impl Into<Option<bool>>) -> Self {
        Self {
            symmetric: symmetric.into(),
            ..self
        }
    }

    /// These parameters with at most `max_iters` Frank–Wolfe iterations.
    pub fn max_iters(self, max_iters: usize) -> Self {
        Self { max_iters, ..self }
    }

    /// These parameters with the relative tolerance `tol_rel`.
    pub fn tol_rel(self, tol_rel: f64) -> Self {
        Self { tol_rel, ..self }
    }

    /// These parameters with the absolute tolerance `tol_abs`.
    pub fn tol_abs(self, tol_abs: f64) -> Self {
        Self { tol_abs, ..self }
    }
    pub(crate) fn validate(&self) -> Result<()> {
        if self.max_iters == 0 {
            return Err(Error::parameter("max_iters", 0, "must be ≥ 1"));
        }
        check_tol("tol_rel", self.tol_rel)?;
        check_tol("tol_abs", self.tol_abs)
    }
}

/// Parameters of point-cloud Gromov–Wasserstein (square loss, squared-Euclidean structure
/// costs) in linear memory: the mirror descent of [`EntropicGwParams`] with its stopping
/// rule on the plan's moments (the `n×m` plan is never formed, so `‖T − T_prev‖_F` is not
/// available): stop when `‖Γ − Γ_prev‖_F ≤ tol·‖Γ‖_F`, `Γ = Φᵀ·T·Ψ` (see
/// [`crate::gromov::pointcloud`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PointGwParams {
    /// Regularisation ε (> 0) of every inner solve.
    pub eps: f64,
    /// Maximum number of outer iterations.
    pub max_iters: usize,
    /// Relative tolerance on the change of the plan's moments (0 runs every iteration).
    pub tol: f64,
    /// Maximum number of iterations of each inner Sinkhorn solve.
    pub inner_max_iters: usize,
    /// Marginal tolerance of each inner solve (`None`: the precision's default).
    pub inner_tol: Option<f64>,
    /// Check the inner marginal error every this many Sinkhorn iterations.
    pub inner_check_every: usize,
}

impl Default for PointGwParams {
    fn default() -> Self {
        PointGwParams {
            eps: 0.1,
            max_iters: 1000,
            tol: 1e-9,
            inner_max_iters: 1000,
            inner_tol: None,
            inner_check_every: 10,
        }
    }
}

impl PointGwParams {
    /// Default parameters with regularisation `eps`.
    pub fn new(eps: f64) -> Self {
        PointGwParams {
            eps,
            ..Default::default()
        }
    }

    /// These parameters with regularisation `eps`.
    pub fn eps(self, eps: f64) -> Self {
        Self { eps, ..self }
    }

    /// These parameters with at most `max_iters` outer iterations.
    pub fn max_iters(self, max_iters: usize) -> Self {
        Self { max_iters, ..self }
    }

    /// These parameters with the relative moment tolerance `tol`.
    pub fn tol(self, tol: f64) -> Self {
        Self { tol, ..self }
    }

    /// These parameters with inner solves of at most `inner_max_iters` iterations.
    pub fn inner_max_iters(self, inner_max_iters: usize) -> Self {
        Self {
            inner_max_iters,
            ..self
        }
    }

    /// These parameters with the inner marginal tolerance `inner_tol` (`None`: the precision's default).
    pub fn inner_tol(self, inner_tol: impl Into<Option<f64>>) -> Self {
        Self {
            inner_tol: inner_tol.into(),
            ..self
        }
    }

    /// These parameters with the inner marginal error checked every `inner_check_every` iterations.
    pub fn inner_check_every(self, inner_check_every: usize) -> Self {
        Self {
            inner_check_every,
            ..self
        }
    }

    /// Exactly `iters` outer iterations (no early stop).
    pub fn fixed_iterations(self, iters: usize) -> Self {
        PointGwParams {
            max_iters: iters,
            tol: 0.0,
            ..self
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        EntropicGwParams {
            eps: self.eps,
            max_iters: self.max_iters,
            tol: self.tol,
            inner_max_iters: self.inner_max_iters,
            inner_tol: self.inner_tol,
            inner_check_every: self.inner_check_every,
            ..Default::default()
        }
        .validate()
    }

    pub(crate) fn inner(&self) -> crate::SinkhornParams {
        crate::SinkhornParams {
            eps: self.eps,
            max_iters: self.inner_max_iters,
            tol: self.inner_tol,
            check_every: self.inner_check_every,
            ..Default::default()
        }
    }
}

fn check_tol(arg: &str, t: f64) -> Result<()> {
    if !(t.is_finite() && t >= 0.0) {
        return Err(Error::parameter(arg, t, "must be finite and ≥ 0"));
    }
    Ok(())
}
