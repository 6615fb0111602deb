//! The parameters of the Sinkhorn solver: tolerances, ε-scaling, warm starts and the
//! marginal relaxation.

use crate::entropic::unbalanced::Relaxation;
use crate::progress::Observer;
use crate::validate::check_eps;
use crate::{Error, Result};
use ndarray::Array2;

/// Parameters of the Sinkhorn solver. `Default` gives POT's defaults (1000 iterations,
/// marginal tolerance 1e-9 in f64) with `eps = 0.01`.
#[derive(Clone, Debug)]
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
    /// Relax the marginal constraints to KL penalties (unbalanced OT, POT's
    /// `sinkhorn_unbalanced(..., reg_m, reg_type="kl")`); `None` (or both weights infinite)
    /// solves the balanced problem, which needs equal masses. See [`Relaxation`].
    pub relaxation: Option<Relaxation>,
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
            relaxation: None,
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
    /// Run exactly `iters` iterations with no early stop (the marginal error is still
    /// measured and reported at the end).
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, SinkhornParams, Solver};
    /// use ndarray::array;
    /// let (mu, nu, cost) = (array![0.5f64, 0.5], array![0.2, 0.8], array![[0.0, 1.0], [1.0, 0.0]]);
    /// let solver = Solver::new(CpuBackend, SinkhornParams::fixed_iterations(0.1, 7));
    /// let r = solver.solve(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
    /// assert_eq!(r.convergence.iterations, 7);
    /// // The report still describes the result: 7 iterations fall short of float64's default
    /// // tolerance (1e-9 of the mass), which `converged` is judged against when tol = 0.
    /// assert!(!r.convergence.converged && r.convergence.marginal_error > 1e-9);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn fixed_iterations(eps: f64, iters: usize) -> Self {
        SinkhornParams {
            eps,
            max_iters: iters,
            tol: Some(0.0),
            ..Default::default()
        }
    }
    /// These parameters with ε-scaling `schedule` (see [`EpsScaling::from_max_cost`] and
    /// [`crate::PointCloudCost::eps_scaling`]).
    pub fn with_eps_scaling(self, schedule: EpsScaling) -> Self {
        SinkhornParams {
            eps_scaling: Some(schedule),
            ..self
        }
    }
    /// These parameters with the marginals relaxed: unbalanced OT.
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, Relaxation, SinkhornParams, Solver};
    /// use ndarray::array;
    /// // Unequal masses are accepted once a marginal is relaxed.
    /// let (mu, nu, cost) = (array![1.0f64, 1.0], array![0.5, 0.5], array![[0.0, 1.0], [1.0, 0.0]]);
    /// let params = SinkhornParams::new(0.1).with_relaxation(Relaxation::kl(1.0));
    /// let r = Solver::new(CpuBackend, params).solve(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
    /// assert!(r.convergence.converged && r.objective.is_some());
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn with_relaxation(self, relaxation: Relaxation) -> Self {
        SinkhornParams {
            relaxation: Some(relaxation),
            ..self
        }
    }

    /// The relaxation when at least one marginal is relaxed (`None`: balanced).
    pub(crate) fn unbalanced(&self) -> Option<Relaxation> {
        self.relaxation.filter(|r| !r.is_balanced())
    }

    pub(crate) fn validate(&self) -> Result<()> {
        check_eps("eps", self.eps)?;
        if let Some(r) = &self.relaxation {
            r.validate()?;
        }
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
pub struct WarmStart {
    /// `B×n` source potentials.
    pub f: Array2<f64>,
    /// `B×m` target potentials.
    pub g: Array2<f64>,
}

/// ε-scaling schedule: `ε_k = max(eps, start·factor^k)`, `iters_per_stage` iterations at
/// each ε above the target, then the main loop at `eps`.
#[derive(Clone, Debug)]
pub struct EpsScaling {
    /// First (largest) ε, e.g. the cost's diameter.
    pub start: f64,
    /// Ratio between consecutive stages, in (0, 1).
    pub factor: f64,
    /// Iterations run at each intermediate ε.
    pub iters_per_stage: usize,
}

impl EpsScaling {
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
        EpsScaling {
            start,
            factor: 0.5,
            iters_per_stage: Self::DEFAULT_ITERS_PER_STAGE,
        }
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
