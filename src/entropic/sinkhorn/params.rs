//! The parameters of the Sinkhorn solver: ε, tolerances, ε-scaling and warm starts.
//!
//! ε is a parameter of the solver, not of the [`Problem`](crate::Problem): the same
//! prepared batch is solved at several ε (ε-scaling anneals it, a caller may continue from
//! a larger one), and nothing a batch prepares depends on it. The marginal relaxation
//! changes which problem is solved (unequal masses, no cost offset) and belongs to the
//! problem ([`Problem::relaxed`](crate::Problem::relaxed)).

use crate::progress::Observer;
use crate::validate::check_eps;
use crate::{Error, Result};
use ndarray::Array2;

/// Parameters of the Sinkhorn solver, set by builder methods:
/// `SinkhornParams::new(eps).max_iters(500).tol(1e-9)`. `Default` gives POT's defaults
/// (1000 iterations, marginal tolerance 1e-9 in f64) with `eps = 0.01`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SinkhornParams {
    /// Regularisation strength ε (> 0), in the units of the cost.
    pub eps: f64,
    /// Maximum number of iterations (each is one `g` and one `f` half-step).
    pub max_iters: usize,
    /// Target for the marginal error `max_b ‖P_bᵀ1 − ν_b‖₁`; `None` picks the precision's
    /// default (1e-9 for f64, 1e-5 for f32); `Some(0.0)` runs all `max_iters` iterations.
    /// Stopping at f32's 1e-5 can leave the distance further from the f64 result than f32's
    /// arithmetic does: on 300×257 points in one dimension at ε = 0.02, 2.9e-5 relative
    /// after 100 iterations, 1.8e-6 with `tol` 1e-6 (130) and 8e-7 with 3e-7 (140), where
    /// f32's marginal error stops near 2e-7 (a `tol` of 1e-7 is never met, and the report
    /// says so).
    pub tol: Option<f64>,
    /// Check convergence every this many iterations (the only host read-back in the loop).
    pub check_every: usize,
    /// Start from these potentials (`f`: B×n, `g`: B×m) instead of zeros.
    pub warm_start: Option<WarmStart>,
    /// Anneal ε geometrically from a large value down to `eps` before the main loop.
    pub eps_scaling: Option<EpsScaling>,
    /// Called with the run's [`Progress`](crate::Progress) at every convergence check and
    /// ε-scaling stage (and every `check_every` iterations without a tolerance).
    pub observer: Option<Observer>,
    /// Keep the largest marginal error of every check in [`Convergence::history`](crate::Convergence::history).
    pub history: bool,
}

impl Default for SinkhornParams {
    fn default() -> Self {
        SinkhornParams {
            eps: 0.01,
            max_iters: 1000,
            tol: None,
            check_every: 10,
            warm_start: None,
            eps_scaling: None,
            observer: None,
            history: false,
        }
    }
}

impl SinkhornParams {
    /// Default parameters with regularisation `eps`.
    pub fn new(eps: f64) -> Self {
        SinkhornParams {
            eps,
            ..Default::default()
        }
    }
    /// These parameters with regularisation `eps`.
    pub fn eps(self, eps: f64) -> Self {
        SinkhornParams { eps, ..self }
    }
    /// These parameters with at most `max_iters` iterations.
    pub fn max_iters(self, max_iters: usize) -> Self {
        SinkhornParams { max_iters, ..self }
    }
    /// These parameters with the marginal tolerance `tol` (`0` runs every iteration;
    /// `None`, the precision's default).
    pub fn tol(self, tol: impl Into<Option<f64>>) -> Self {
        SinkhornParams {
            tol: tol.into(),
            ..self
        }
    }
    /// Exactly `iters` iterations with no early stop: `max_iters(iters).tol(0.0)` (the
    /// marginal error is still measured and reported at the end).
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::array;
    /// let (mu, nu, cost) = (array![0.5f64, 0.5], array![0.2, 0.8], array![[0.0, 1.0], [1.0, 0.0]]);
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1).fixed_iterations(7));
    /// let r = solver.solve(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
    /// assert_eq!(r.convergence.iterations, 7);
    /// // The report still describes the result: 7 iterations fall short of float64's default
    /// // tolerance (1e-9 of the mass), which `converged` is judged against when tol = 0.
    /// assert!(!r.convergence.converged && r.convergence.marginal_error > 1e-9);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn fixed_iterations(self, iters: usize) -> Self {
        self.max_iters(iters).tol(0.0)
    }
    /// These parameters with a convergence check every `check_every` iterations.
    pub fn check_every(self, check_every: usize) -> Self {
        SinkhornParams {
            check_every,
            ..self
        }
    }
    /// These parameters starting from the potentials `warm_start`.
    pub fn warm_start(self, warm_start: WarmStart) -> Self {
        SinkhornParams {
            warm_start: Some(warm_start),
            ..self
        }
    }
    /// These parameters with ε-scaling `schedule` (see [`EpsScaling::from_max_cost`] and
    /// [`crate::PointCloudCost::eps_scaling`]).
    pub fn eps_scaling(self, schedule: EpsScaling) -> Self {
        SinkhornParams {
            eps_scaling: Some(schedule),
            ..self
        }
    }
    /// These parameters with `observer` called as the run goes.
    pub fn observer(self, observer: Observer) -> Self {
        SinkhornParams {
            observer: Some(observer),
            ..self
        }
    }
    /// These parameters keeping (or not) the error history.
    pub fn history(self, history: bool) -> Self {
        SinkhornParams { history, ..self }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        check_eps("eps", self.eps)?;
        if self.max_iters == 0 {
            return Err(Error::parameter(
                "max_iters",
                0,
                "at least one iteration is needed",
            ));
        }
        if self.check_every == 0 {
            return Err(Error::parameter("check_every", 0, "must be ≥ 1"));
        }
        if let Some(t) = self.tol {
            if !(t.is_finite() && t >= 0.0) {
                return Err(Error::parameter("tol", t, "must be finite and ≥ 0"));
            }
        }
        if let Some(s) = &self.eps_scaling {
            check_eps("eps_scaling.start", s.start)?;
            if !(s.factor > 0.0 && s.factor < 1.0) {
                return Err(Error::parameter(
                    "eps_scaling.factor",
                    s.factor,
                    "must lie in (0, 1)",
                ));
            }
        }
        Ok(())
    }
}

/// Initial potentials for a warm start, in the solver's units (`f = ε log u`).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WarmStart {
    /// `B×n` source potentials.
    pub f: Array2<f64>,
    /// `B×m` target potentials.
    pub g: Array2<f64>,
}

impl WarmStart {
    /// Start from `f` (`B×n`) and `g` (`B×m`).
    pub fn new(f: Array2<f64>, g: Array2<f64>) -> Self {
        WarmStart { f, g }
    }
}

/// ε-scaling schedule: `ε_k = max(eps, start·factor^k)`, `iters_per_stage` iterations at
/// each ε above the target, then the main loop at `eps`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct EpsScaling {
    /// First (largest) ε, e.g. the cost's diameter.
    pub start: f64,
    /// Ratio between consecutive stages, in (0, 1).
    pub factor: f64,
    /// Iterations run at each intermediate ε.
    pub iters_per_stage: usize,
}

impl EpsScaling {
    /// Anneal from `start`, halving ε at each stage with
    /// [`EpsScaling::DEFAULT_ITERS_PER_STAGE`] iterations per stage.
    pub fn new(start: f64) -> Self {
        EpsScaling {
            start,
            factor: 0.5,
            iters_per_stage: Self::DEFAULT_ITERS_PER_STAGE,
        }
    }
    /// This schedule with the ratio `factor` (in (0, 1)) between consecutive stages.
    pub fn factor(self, factor: f64) -> Self {
        EpsScaling { factor, ..self }
    }
    /// This schedule with `iters_per_stage` iterations at each intermediate ε.
    pub fn iters_per_stage(self, iters_per_stage: usize) -> Self {
        EpsScaling {
            iters_per_stage,
            ..self
        }
    }

    /// Anneal from the largest cost down to the target ε: `start = max_cost` (the squared
    /// diameter of the support for the squared Euclidean cost), halving ε at each stage
    /// with [`EpsScaling::DEFAULT_ITERS_PER_STAGE`] iterations per stage. At ε ≈ max C the
    /// plan is nearly the product `μ⊗ν` and a few iterations solve it; each stage warm-starts
    /// the next, so the final ε needs far fewer iterations than from zero potentials
    /// (`O(log(max C/ε))` stages). A non-positive or non-finite `max_cost` (a single point)
    /// gives `start = 1`, which the solver skips when it is below ε.
    pub fn from_max_cost(max_cost: f64) -> Self {
        let start = if max_cost.is_finite() && max_cost > 0.0 {
            max_cost
        } else {
            1.0
        };
        EpsScaling::new(start)
    }

    /// Iterations per stage of [`EpsScaling::from_max_cost`].
    pub const DEFAULT_ITERS_PER_STAGE: usize = 3;

    /// As [`EpsScaling::from_max_cost`] with the cost `diameter^p` (`p = 2` for the squared
    /// Euclidean cost, `1` for the Euclidean one).
    pub fn from_diameter(diameter: f64, p: u32) -> Self {
        Self::from_max_cost(diameter.powi(p as i32))
    }

    /// The stages that fit in `max_iters` iterations with one left for the target ε (the
    /// stages count towards `max_iters`): the largest-ε stages are dropped first.
    pub(crate) fn stages_within(&self, eps: f64, max_iters: usize) -> Vec<f64> {
        let mut stages = self.stages(eps);
        let fit = max_iters.saturating_sub(1) / self.iters_per_stage.max(1);
        stages.drain(..stages.len().saturating_sub(fit));
        stages
    }

    pub(crate) fn stages(&self, eps: f64) -> Vec<f64> {
        let mut out = Vec::new();
        let mut e = self.start;
        while e > eps && out.len() < 200 {
            out.push(e);
            e *= self.factor;
        }
        out
    }
}
