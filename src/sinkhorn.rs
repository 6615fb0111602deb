//! Log-domain Sinkhorn: the solver loop, its parameters and its result.
//!
//! With `f = ε log u`, `g = ε log v`, the plan is `P = exp((f ⊕ g − C)/ε)` and each
//! iteration is two half-steps (POT's `sinkhorn_log` order, columns first):
//!
//! `g_j ← ε log ν_j − ε LSE_i((f_i − C_ij)/ε)`, then `f_i ← ε log μ_i − ε LSE_j((g_j − C_ij)/ε)`.
//!
//! After the `f` update the rows of `P` sum to `μ`; the marginal error is the column
//! violation `‖Pᵀ1 − ν‖₁`. It falls out of the next `g` update for free
//! (`(Pᵀ1)_j = ν_j exp((g_j − g'_j)/ε)`), so checking costs nothing but a read-back of
//! `B` numbers every `check_every` iterations.

use crate::backend::{Backend, CostSource, Marginals, Potentials, Side};
use crate::progress::{HistoryEntry, Observer, Tracker};
use crate::unbalanced::Relaxation;
use crate::validate::{check_eps, check_equal_mass, check_histograms};
use crate::{Error, Real, Result};
use ndarray::{Array1, Array2, Array3, ArrayView1, ArrayView2, Axis};

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
    /// Keep the largest marginal error of every check in [`Convergence::history`].
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

/// How one problem of a batch ended.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProblemReport {
    /// The larger of `‖P·1 − μ‖₁` and `‖Pᵀ·1 − ν‖₁` for the plan handed back (the plan the
    /// returned potentials define; for [`Solver::coupling`], the returned array itself).
    /// Unbalanced ([`SinkhornParams::relaxation`]): on each side, the `ℓ₁` change one more
    /// relaxed half-step would make to the plan's marginal, zero exactly at the optimality
    /// conditions `P·1 = μ ⊙ exp(−(f − ε log μ)/ρ_μ)`, `Pᵀ·1 = ν ⊙ exp(−(g − ε log ν)/ρ_ν)`
    /// (`‖P·1 − μ‖₁` on a side with `ρ = ∞`; [`RelaxedSide::residual`](crate::RelaxedSide::residual)),
    /// the larger of the two.
    pub marginal_error: f64,
    /// The mass the tolerance is relative to: `Σ ν` for a balanced problem; for an
    /// unbalanced one the mass `Σ P` of the plan handed back (the smaller of its two
    /// marginals' sums), which a constant added to the cost can make far smaller than the
    /// inputs' masses. `marginal_error / mass` is the relative error.
    pub mass: f64,
    /// `marginal_error ≤ tol · mass`: the plan handed back meets the tolerance.
    pub converged: bool,
    /// Iterations this problem needed: the convergence check at which it first met its
    /// tolerance, or every iteration run when it did not (or when no check ran).
    pub iterations: usize,
}

/// How the solver ended: a summary over the batch and one [`ProblemReport`] per problem.
/// Every figure describes the result handed back, measured after the last iteration.
#[derive(Clone, Debug, PartialEq)]
pub struct Convergence {
    /// Iterations run (ε-scaling stages included): the most any problem received.
    pub iterations: usize,
    /// Largest marginal error over the batch (absolute, in the units of the marginals):
    /// the largest [`ProblemReport::marginal_error`].
    pub marginal_error: f64,
    /// The tolerance `converged` was judged against, relative to each problem's
    /// [`ProblemReport::mass`]:
    /// the one asked for, or the precision's default (1e-9 in f64, 1e-5 in f32) when none
    /// or 0 was asked (0 runs every iteration; `converged` then says whether the result
    /// meets the default).
    pub tol: f64,
    /// Every problem converged.
    pub converged: bool,
    /// One report per problem, in batch order.
    pub problems: Vec<ProblemReport>,
    /// The largest error at every convergence check, then the final report's, when asked
    /// for ([`SinkhornParams::history`]); empty otherwise.
    pub history: Vec<HistoryEntry>,
}

impl Convergence {
    /// The summary of per-problem reports after `iterations` iterations.
    pub fn of_problems(iterations: usize, tol: f64, problems: Vec<ProblemReport>) -> Self {
        Convergence {
            iterations,
            marginal_error: problems.iter().fold(0.0, |m, p| m.max(p.marginal_error)),
            tol,
            converged: !problems.is_empty() && problems.iter().all(|p| p.converged),
            problems,
            history: Vec::new(),
        }
    }

    /// Per-problem marginal errors, in batch order.
    pub fn marginal_errors(&self) -> Vec<f64> {
        self.problems.iter().map(|p| p.marginal_error).collect()
    }
}

/// A solved batch of entropic OT problems.
#[derive(Clone, Debug)]
pub struct SinkhornResult<T> {
    /// Source potentials `f = ε log u`, `B×n` (−∞ on zero-mass bins).
    pub f: Array2<T>,
    /// Target potentials `g = ε log v`, `B×m`.
    pub g: Array2<T>,
    /// Transport cost `⟨P_b, C_b⟩` of each problem (POT's `sinkhorn2` value; for unbalanced
    /// problems `sinkhorn_unbalanced2(..., returnCost="linear")`).
    pub distance: Array1<T>,
    /// Unbalanced problems only ([`SinkhornParams::relaxation`]): the objective
    /// `⟨P,C⟩ + ε·KL(P‖μ⊗ν) + ρ_μ·KL(P·1‖μ) + ρ_ν·KL(Pᵀ·1‖ν)` of each returned plan, with
    /// the generalized `KL(x‖y) = Σ x log(x/y) − x + y` (a term with `ρ = ∞` is left out).
    /// POT's `returnCost="total"` uses `Σ x log(x/y)` without `− x + y`: it differs by
    /// `ε(Σμ Σν − m) + ρ_μ(Σμ − m) + ρ_ν(Σν − m)`, `m = Σ P`. `None` for balanced problems.
    pub objective: Option<Array1<T>>,
    /// Regularisation the plans belong to.
    pub eps: f64,
    /// Iterations, marginal error and whether the tolerance was met.
    pub convergence: Convergence,
}

/// A solved batch together with its plans.
#[derive(Clone, Debug)]
pub struct Coupling<T> {
    /// Plans `P_b = exp((f_b ⊕ g_b − C_b)/ε)`, `B×n×m`.
    pub plan: Array3<T>,
    /// Potentials, distances and convergence.
    pub result: SinkhornResult<T>,
}

/// A batch of `B` OT problems: marginals `μ` (B×n), `ν` (B×m) and a cost.
#[derive(Clone, Debug)]
pub struct Problem<'a, T> {
    mu: ArrayView2<'a, T>,
    nu: ArrayView2<'a, T>,
    cost: CostSource<'a, T>,
    /// What the solvers remove from the cost and its size, computed once here.
    offsets: CostOffsets,
    /// `Σ ν` of each problem (the tolerance is relative to it).
    masses: Vec<f64>,
    /// `Σ μ` of each problem.
    mu_masses: Vec<f64>,
}

/// The constant each dense cost is solved without. The plan does not depend on a constant
/// added to `C` (the distance moves by it), but `f + g − C` loses the cost's variation when
/// the constant dominates (`U[0,1] + 400` in f32: ulp(400) = 3e-5): the solvers subtract
/// the centre of the entries' range where it exceeds the range's width.
#[derive(Clone, Debug, Default)]
pub(crate) struct CostOffsets {
    /// One value per cost matrix (one for a shared cost); empty for grids and point clouds.
    pub shift: Vec<f64>,
    /// Largest `|C − shift|`, for the ε resolution check of every solve.
    pub max_abs: f64,
    /// Largest `|C|`: the same check for unbalanced solves, which keep the cost as it is
    /// (a constant added to the cost changes an unbalanced plan's mass).
    pub max_abs_raw: f64,
}

impl CostOffsets {
    /// The offsets of a cost source (dense costs are checked finite in the same pass).
    pub(crate) fn of<T: Real>(cost: &CostSource<'_, T>) -> Result<Self> {
        let ranges = match cost {
            CostSource::Dense(c) => vec![crate::validate::check_finite_range("cost", c)?],
            CostSource::DenseBatch(c) => {
                crate::validate::check_finite("cost", c)?;
                c.outer_iter()
                    .map(|c| crate::validate::check_finite_range("cost", &c))
                    .collect::<Result<Vec<_>>>()?
            }
            _ => {
                let max_abs = crate::validate::max_abs_cost(cost)?;
                return Ok(CostOffsets {
                    shift: Vec::new(),
                    max_abs,
                    max_abs_raw: max_abs,
                });
            }
        };
        Ok(Self::of_ranges(ranges))
    }

    /// The offsets of dense cost matrices from their `[min, max]` ranges (one per matrix).
    pub(crate) fn of_ranges(ranges: Vec<(f64, f64)>) -> Self {
        let centre = |(lo, hi): (f64, f64)| {
            let mid = 0.5 * lo + 0.5 * hi;
            let shift = if mid.abs() > hi - lo { mid } else { 0.0 };
            (shift, (lo - shift).abs().max((hi - shift).abs()))
        };
        let max_abs_raw = ranges
            .iter()
            .fold(0.0f64, |m, &(lo, hi)| m.max(lo.abs()).max(hi.abs()));
        let (shift, sizes): (Vec<f64>, Vec<f64>) = ranges.into_iter().map(centre).unzip();
        CostOffsets {
            max_abs: sizes.into_iter().fold(0.0, f64::max),
            max_abs_raw,
            shift,
        }
    }

    /// The offsets a solve applies: these, or none for an unbalanced one (its plan's mass
    /// depends on a constant added to the cost), whose ε check then uses the raw `|C|`.
    pub(crate) fn applied(&self, unbalanced: bool) -> CostOffsets {
        if unbalanced {
            CostOffsets {
                shift: Vec::new(),
                max_abs: self.max_abs_raw,
                max_abs_raw: self.max_abs_raw,
            }
        } else {
            self.clone()
        }
    }

    /// Problem `b`'s shift.
    pub(crate) fn of_problem(&self, b: usize) -> f64 {
        match self.shift.len() {
            0 => 0.0,
            1 => self.shift[0],
            _ => self.shift[b],
        }
    }
}

impl<'a, T: Real> Problem<'a, T> {
    /// One problem: `μ` (n), `ν` (m), cost `C` (n×m). Invalid input is an error naming the
    /// argument: shapes, NaN/∞, negative masses, empty arrays. Unequal masses are refused
    /// when the problem is solved as a balanced one (no [`SinkhornParams::relaxation`]).
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, SinkhornParams, Solver};
    /// use ndarray::array;
    /// let cost = array![[0.0, 1.0], [1.0, 0.0]];
    /// assert!(Problem::new(array![0.5, 0.5].view(), array![0.3, 0.7].view(), cost.view()).is_ok());
    /// let (mu, nu) = (array![0.5, 0.5], array![0.3, 0.3]);
    /// let problem = Problem::new(mu.view(), nu.view(), cost.view())?;
    /// let err = Solver::new(CpuBackend, SinkhornParams::new(0.1)).solve(&problem).unwrap_err();
    /// assert!(matches!(err, logot::Error::UnequalMass { .. }), "{err}");
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn new(
        mu: ArrayView1<'a, T>,
        nu: ArrayView1<'a, T>,
        cost: ArrayView2<'a, T>,
    ) -> Result<Self> {
        Self::batch(mu.insert_axis(Axis(0)), nu.insert_axis(Axis(0)), cost)
    }

    /// A batch: `μ` (B×n), `ν` (B×m) against one shared `n×m` cost or `B` costs (`B×n×m`),
    /// or a [`GridCost`](crate::GridCost) (never stored).
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, SinkhornParams, Solver};
    /// use ndarray::{array, Array3};
    /// // Two problems, each with its own cost: the identity permutation and the swap are free.
    /// let costs = Array3::from_shape_vec((2, 2, 2), vec![0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0]).unwrap();
    /// let (mu, nu) = (array![[0.5f64, 0.5], [0.5, 0.5]], array![[0.5, 0.5], [0.5, 0.5]]);
    /// let problem = Problem::batch(mu.view(), nu.view(), costs.view())?;
    /// assert_eq!(problem.batch_size(), 2);
    /// let r = Solver::new(CpuBackend, SinkhornParams::new(0.01)).solve(&problem)?;
    /// assert!(r.distance.iter().all(|d| d.abs() < 1e-12));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn batch(
        mu: ArrayView2<'a, T>,
        nu: ArrayView2<'a, T>,
        cost: impl Into<CostSource<'a, T>>,
    ) -> Result<Self> {
        let cost = cost.into();
        let mut p = Problem {
            mu,
            nu,
            cost,
            offsets: CostOffsets::default(),
            masses: Vec::new(),
            mu_masses: Vec::new(),
        };
        (p.offsets, p.mu_masses, p.masses) = p.validate()?;
        Ok(p)
    }

    /// Number of problems.
    pub fn batch_size(&self) -> usize {
        self.mu.nrows()
    }

    /// Source marginals, `B×n`.
    pub fn mu(&self) -> ArrayView2<'a, T> {
        self.mu
    }
    /// Target marginals, `B×m`.
    pub fn nu(&self) -> ArrayView2<'a, T> {
        self.nu
    }
    /// The cost.
    pub fn cost(&self) -> &CostSource<'a, T> {
        &self.cost
    }

    /// Checks every input; returns the cost's offsets and each problem's masses `Σ μ`, `Σ ν`
    /// (checked equal by balanced solves).
    fn validate(&self) -> Result<(CostOffsets, Vec<f64>, Vec<f64>)> {
        let mu_mass = check_histograms("mu", &self.mu)?;
        let nu_mass = check_histograms("nu", &self.nu)?;
        let (b, n) = self.mu.dim();
        let (bn, m) = self.nu.dim();
        if b != bn {
            return Err(Error::shape(
                "nu",
                format!("batch of {bn} problems but mu has {b}"),
            ));
        }
        let dims = self.cost.dims();
        if dims.n == 0 || dims.m == 0 || dims.batch == Some(0) {
            return Err(Error::Empty {
                arg: "cost".into(),
                detail: format!("shape {dims:?}"),
            });
        }
        if (dims.n, dims.m) != (n, m) {
            return Err(Error::shape(
                "cost",
                format!(
                    "is {}×{} but mu has {n} and nu has {m} entries per problem",
                    dims.n, dims.m
                ),
            ));
        }
        if let Some(bc) = dims.batch {
            if bc != b {
                // Batched point clouds: the clouds are the argument at fault.
                let (arg, what) = match &self.cost {
                    CostSource::PointCloud(_) => ("x", "pairs of point clouds"),
                    _ => ("cost", "matrices"),
                };
                return Err(Error::shape(
                    arg,
                    format!("holds {bc} {what} but there are {b} problems"),
                ));
            }
        }
        // Dense costs are checked finite here; point clouds by `PointCloudCost`'s
        // constructors (finite, matching dimensions); grids are finite by construction.
        let offsets = CostOffsets::of(&self.cost)?;
        Ok((offsets, mu_mass, nu_mass))
    }
}

/// Runs Sinkhorn on a chosen backend.
///
/// ```
/// use logot::{CpuBackend, Problem, SinkhornParams, Solver};
/// use ndarray::array;
/// let mu = array![0.5f64, 0.5];
/// let nu = array![0.25, 0.75];
/// let cost = array![[0.0, 1.0], [1.0, 0.0]];
/// let solver = Solver::new(CpuBackend, SinkhornParams::new(0.05));
/// let res = solver.solve(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
/// assert!(res.convergence.converged);
/// assert!((res.distance[0] - 0.25).abs() < 1e-3); // 0.25 of mass must move, at cost 1
/// # Ok::<(), logot::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Solver<B> {
    backend: B,
    params: SinkhornParams,
}

/// Device-resident state of a solved batch.
pub(crate) struct Solved<T: Real, B: Backend<T>> {
    pub cost: B::Cost,
    pub f: B::Buffer,
    /// `g` of the cost without its offsets ([`CostOffsets`]); the returned `g` adds them.
    pub g: B::Buffer,
    pub convergence: Convergence,
    /// Transport costs `⟨P, C⟩` (offsets included), from the final report.
    pub distance: Vec<f64>,
    /// Each problem's cost offset.
    pub shift: Vec<f64>,
    /// Unbalanced objectives ([`SinkhornResult::objective`]).
    pub objective: Option<Vec<f64>>,
}

impl<B> Solver<B> {
    /// A solver on `backend` with `params`.
    pub fn new(backend: B, params: SinkhornParams) -> Self {
        Solver { backend, params }
    }
    /// The parameters.
    pub fn params(&self) -> &SinkhornParams {
        &self.params
    }
    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Potentials, distances and convergence of every problem of the batch: `f`, `g` with
    /// `P = exp((f ⊕ g − C)/ε)` and `⟨P, C⟩`, from zero potentials, `g` then `f` each
    /// iteration, until the marginal error `‖Pᵀ1 − ν‖₁ ≤ tol` or `max_iters`.
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, SinkhornParams, Solver};
    /// use ndarray::array;
    /// let (mu, nu, cost) = (array![1.0f64, 0.0], array![0.0, 1.0], array![[0.0, 2.0], [2.0, 0.0]]);
    /// let r = Solver::new(CpuBackend, SinkhornParams::new(0.1)).solve(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
    /// assert!((r.distance[0] - 2.0).abs() < 1e-12); // all the mass moves, at cost 2
    /// assert_eq!(r.f.dim(), (1, 2));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn solve<T: Real>(&self, problem: &Problem<'_, T>) -> Result<SinkhornResult<T>>
    where
        B: Backend<T>,
    {
        let s = self.run(problem)?;
        self.finish(problem, &s)
    }

    /// As [`Solver::solve`], and the plans `P_b` (`B×n×m`).
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, SinkhornParams, Solver};
    /// use ndarray::{array, Axis};
    /// let (mu, nu) = (array![0.25f64, 0.75], array![0.5, 0.5]);
    /// let cost = array![[0.0, 1.0], [1.0, 0.0]];
    /// let c = Solver::new(CpuBackend, SinkhornParams::new(0.05)).coupling(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
    /// let plan = c.plan.index_axis(Axis(0), 0);
    /// assert!((plan.sum_axis(Axis(1)) - &mu).iter().all(|e| e.abs() < 1e-12)); // P·1 = μ
    /// assert!((plan.sum_axis(Axis(0)) - &nu).iter().all(|e| e.abs() < 1e-9)); // Pᵀ·1 = ν
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn coupling<T: Real>(&self, problem: &Problem<'_, T>) -> Result<Coupling<T>>
    where
        B: Backend<T>,
    {
        let (b, n, m) = (problem.batch_size(), problem.mu.ncols(), problem.nu.ncols());
        check_coupling_peak::<T>(&[b, n, m], self.backend.host_cost_bytes(&problem.cost))?;
        let s = self.run(problem)?;
        let mut result = self.finish(problem, &s)?;
        let eps = T::of(self.params.eps);
        let plan = self
            .backend
            .into_host(self.backend.plan(&s.cost, &s.f, &s.g, eps)?)?;
        let plan =
            Array3::from_shape_vec((b, n, m), plan).map_err(|e| Error::Numerical(e.to_string()))?;
        // The report of the array handed back: its own marginals and cost, in f64.
        let measured = match self.params.unbalanced() {
            Some(r) => measure_relaxed_plans(&plan, problem, &result, r),
            None => measure_plans(&plan, problem),
        };
        let tol = result.convergence.tol;
        let problems = result
            .convergence
            .problems
            .iter()
            .zip(&measured)
            .map(|(p, m)| {
                let converged = m.error <= tol * m.mass;
                ProblemReport {
                    marginal_error: m.error,
                    mass: m.mass,
                    converged,
                    iterations: if converged {
                        p.iterations
                    } else {
                        result.convergence.iterations
                    },
                }
            })
            .collect();
        result.convergence = Convergence::of_problems(result.convergence.iterations, tol, problems);
        for (d, m) in result.distance.iter_mut().zip(&measured) {
            *d = T::of(m.cost);
        }
        Ok(Coupling { plan, result })
    }

    pub(crate) fn finish<T: Real>(
        &self,
        problem: &Problem<'_, T>,
        s: &Solved<T, B>,
    ) -> Result<SinkhornResult<T>>
    where
        B: Backend<T>,
    {
        let dims = (problem.batch_size(), problem.mu.ncols(), problem.nu.ncols());
        self.finish_parts(
            dims,
            &s.f,
            &s.g,
            &s.shift,
            &s.convergence,
            &s.distance,
            s.objective.as_deref(),
        )
    }

    /// The potentials to the host (the cost offsets added to `g`), with the distances.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_parts<T: Real>(
        &self,
        (b, n, m): (usize, usize, usize),
        f: &B::Buffer,
        g: &B::Buffer,
        shift: &[f64],
        convergence: &Convergence,
        distance: &[f64],
        objective: Option<&[f64]>,
    ) -> Result<SinkhornResult<T>>
    where
        B: Backend<T>,
    {
        self.check_distances::<T>(distance)?;
        let f = Array2::from_shape_vec((b, n), self.backend.download(f)?)
            .map_err(|e| Error::Numerical(e.to_string()))?;
        let mut g = Array2::from_shape_vec((b, m), self.backend.download(g)?)
            .map_err(|e| Error::Numerical(e.to_string()))?;
        for (row, &c) in g.outer_iter_mut().zip(shift) {
            if c != 0.0 {
                row.into_iter().for_each(|v| *v = T::of(v.f64() + c));
            }
        }
        Ok(SinkhornResult {
            f,
            g,
            distance: distance.iter().map(|&d| T::of(d)).collect(),
            objective: objective.map(|o| o.iter().map(|&v| T::of(v)).collect()),
            eps: self.params.eps,
            convergence: convergence.clone(),
        })
    }

    /// Upload, iterate, and leave the potentials on the device.
    pub(crate) fn run<T: Real>(&self, problem: &Problem<'_, T>) -> Result<Solved<T, B>>
    where
        B: Backend<T>,
    {
        let prepared = self.prepare(problem)?;
        let (f, g, convergence, distance, objective) = self.iterate_prepared(&prepared)?;
        Ok(Solved {
            f,
            g,
            convergence,
            distance,
            objective,
            shift: prepared.shift,
            cost: prepared.cost,
        })
    }

    /// Upload a batch to the backend once (cost prepared for the kernels, marginals and
    /// their logarithms), to solve it with [`Solver::solve_prepared`], possibly repeatedly.
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, SinkhornParams, Solver};
    /// use ndarray::array;
    /// let (mu, nu, cost) = (array![0.5f32, 0.5], array![0.25, 0.75], array![[0.0, 1.0], [1.0, 0.0]]);
    /// let solver = Solver::new(CpuBackend, SinkhornParams::new(0.05));
    /// let problem = Problem::new(mu.view(), nu.view(), cost.view())?;
    /// let prepared = solver.prepare(&problem)?;
    /// assert_eq!(prepared.dims(), (1, 2, 2));
    /// // The same answer as a solve from the host arrays.
    /// assert_eq!(solver.solve_prepared(&prepared)?.distance, solver.solve(&problem)?.distance);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn prepare<T: Real>(&self, problem: &Problem<'_, T>) -> Result<Prepared<T, B>>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let (batch, n) = problem.mu.dim();
        let m = problem.nu.ncols();
        let unbalanced = self.params.unbalanced().is_some();
        if !unbalanced {
            check_equal_mass::<T>(&problem.mu_masses, &problem.masses)?;
        }
        let offsets = &problem.offsets.applied(unbalanced);
        let cost = be.prepare_shifted_cost(&problem.cost, &offsets.shift)?;
        let host = |a: &ArrayView2<'_, T>| crate::alloc::collected("buffer", a.len(), a.iter().copied());
        let empty = |a: &ArrayView2<'_, T>| a.iter().any(|&v| v <= T::zero());
        self.prepare_parts(
            cost,
            be.upload(&host(&problem.mu)?)?,
            be.upload(&host(&problem.nu)?)?,
            (batch, n, m),
            offsets,
            (problem.mu_masses.clone(), problem.masses.clone()),
            (empty(&problem.mu), empty(&problem.nu)),
        )
    }

    /// The marginals' logarithms on the device, and the rest of a [`Prepared`].
    #[allow(clippy::too_many_arguments)]
    fn prepare_parts<T: Real>(
        &self,
        cost: B::Cost,
        mu: B::Buffer,
        nu: B::Buffer,
        (batch, n, m): (usize, usize, usize),
        offsets: &CostOffsets,
        (mu_masses, masses): (Vec<f64>, Vec<f64>),
        (empty_mu, empty_nu): (bool, bool),
    ) -> Result<Prepared<T, B>>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let log_mu = be.ln(&mu)?;
        let log_nu = be.ln(&nu)?;
        Ok(Prepared {
            cost,
            mu,
            nu,
            log_mu,
            log_nu,
            empty_mu,
            empty_nu,
            batch,
            n,
            m,
            max_abs_cost: offsets.max_abs,
            max_abs_raw: offsets.max_abs_raw,
            shift: (0..batch).map(|b| offsets.of_problem(b)).collect(),
            masses,
            mu_masses,
        })
    }

    /// As [`Solver::prepare`] for a batch already on the backend (e.g. a caller's device
    /// memory, `CudaBackend::borrow_buffer`): `μ` (`B×n`),
    /// `ν` (`B×m`) and a dense cost, `n×m` shared (`batched_cost` false) or `B×n×m`, all
    /// row-major. The input checks are those of [`Problem::batch`] and give the same errors
    /// (finite, non-negative, positive and — balanced — equal masses), from one reduction per
    /// row on the backend ([`Backend::row_stats`]: only those numbers are read back; the
    /// buffers themselves only when an error must name an entry). `μ`, `ν` are kept by the
    /// [`Prepared`]; `cost` is only read ([`Backend::prepare_dense_buffer`]).
    ///
    /// ```
    /// use logot::{Backend, CpuBackend, Problem, SinkhornParams, Solver};
    /// use ndarray::array;
    /// let (mu, nu, cost) = (array![0.5f64, 0.5], array![0.25, 0.75], array![[0.0, 1.0], [1.0, 0.0]]);
    /// let solver = Solver::new(CpuBackend, SinkhornParams::new(0.05));
    /// let be = solver.backend();
    /// let (a, b, c) = (be.upload(mu.as_slice().unwrap())?, be.upload(nu.as_slice().unwrap())?, be.upload(cost.as_slice().unwrap())?);
    /// let prepared = solver.prepare_buffers(a, b, &c, (1, 2, 2), false)?;
    /// let host = solver.solve(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
    /// assert_eq!(solver.solve_prepared(&prepared)?.distance, host.distance);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn prepare_buffers<T: Real>(
        &self,
        mu: B::Buffer,
        nu: B::Buffer,
        cost: &B::Buffer,
        (batch, n, m): (usize, usize, usize),
        batched_cost: bool,
    ) -> Result<Prepared<T, B>>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let (mu_masses, empty_mu) = buffer_histograms(be, "mu", &mu, batch, n)?;
        let (masses, empty_nu) = buffer_histograms(be, "nu", &nu, batch, m)?;
        let matrices = if batched_cost { batch } else { 1 };
        let cost_len = be.len(cost);
        if cost_len != matrices * n * m {
            let shape = if batched_cost {
                format!("{batch}×{n}×{m}")
            } else {
                format!("{n}×{m}")
            };
            return Err(Error::shape(
                "cost",
                format!("has {cost_len} entries but {shape} are needed"),
            ));
        }
        let stats = be.row_stats(cost, matrices)?;
        if stats.iter().any(|s| s.non_finite > 0) {
            let host = be.download(cost)?;
            let view = ndarray::ArrayView3::from_shape((matrices, n, m), &host)
                .map_err(|e| Error::shape("cost", e.to_string()))?;
            if batched_cost {
                crate::validate::check_finite("cost", &view)?;
            } else {
                crate::validate::check_finite("cost", &view.index_axis(Axis(0), 0))?;
            }
        }
        let offsets = CostOffsets::of_ranges(stats.iter().map(|s| (s.min, s.max)).collect());
        let unbalanced = self.params.unbalanced().is_some();
        if !unbalanced {
            check_equal_mass::<T>(&mu_masses, &masses)?;
        }
        let offsets = &offsets.applied(unbalanced);
        let dims = crate::backend::CostDims {
            n,
            m,
            batch: batched_cost.then_some(batch),
        };
        let cost = be.prepare_dense_buffer(cost, dims, &offsets.shift)?;
        self.prepare_parts(
            cost,
            mu,
            nu,
            (batch, n, m),
            offsets,
            (mu_masses, masses),
            (empty_mu, empty_nu),
        )
    }

    /// As [`Solver::prepare`] for a batch of point-cloud problems already on the backend:
    /// `μ` (`B×n`), `ν` (`B×m`) and the clouds `x`, `y` as `layout` says (row-major, one pair
    /// per problem or one shared pair; `x` and `y` are only read,
    /// [`Backend::prepare_cloud_buffer`]). The checks and errors are those of
    /// [`PointCloudCost`](crate::PointCloudCost)'s constructors and of [`Problem::batch`];
    /// the ε check and [`Prepared::max_cost`] use [`PointCloudCost::max_cost`](crate::PointCloudCost::max_cost).
    ///
    /// ```
    /// use logot::{Backend, CloudLayout, CpuBackend, PointCloudCost, Problem, SinkhornParams, Solver};
    /// use ndarray::array;
    /// let (x, y, w) = (array![[0.0f64], [1.0]], array![[0.5f64], [1.5]], array![[0.5, 0.5]]);
    /// let solver = Solver::new(CpuBackend, SinkhornParams::new(0.01));
    /// let be = solver.backend();
    /// let layout = CloudLayout { n: 2, m: 2, d: 1, batch: None, metric: Default::default(), precision: Default::default() };
    /// let up = |a: &[f64]| be.upload(a);
    /// let prepared = solver.prepare_points_buffers(
    ///     up(w.as_slice().unwrap())?, up(w.as_slice().unwrap())?,
    ///     &up(x.as_slice().unwrap())?, &up(y.as_slice().unwrap())?, 1, layout)?;
    /// let host = Problem::batch(w.view(), w.view(), PointCloudCost::new(x.view(), y.view())?)?;
    /// assert_eq!(solver.solve_prepared(&prepared)?.distance, solver.solve(&host)?.distance);
    /// # Ok::<(), logot::Error>(())
    /// ```
    #[allow(clippy::too_many_arguments)]
    pub fn prepare_points_buffers<T: Real>(
        &self,
        mu: B::Buffer,
        nu: B::Buffer,
        x: &B::Buffer,
        y: &B::Buffer,
        batch: usize,
        layout: crate::backend::CloudLayout,
    ) -> Result<Prepared<T, B>>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let (cost, max_cost) = be.prepare_cloud_buffer(x, y, layout)?;
        let (n, m) = (layout.n, layout.m);
        let (mu_masses, empty_mu) = buffer_histograms(be, "mu", &mu, batch, n)?;
        let (masses, empty_nu) = buffer_histograms(be, "nu", &nu, batch, m)?;
        if let Some(bc) = layout.batch.filter(|&bc| bc != batch) {
            return Err(Error::shape(
                "x",
                format!("holds {bc} pairs of point clouds but there are {batch} problems"),
            ));
        }
        if self.params.unbalanced().is_none() {
            check_equal_mass::<T>(&mu_masses, &masses)?;
        }
        let offsets = CostOffsets {
            shift: Vec::new(),
            max_abs: max_cost,
            max_abs_raw: max_cost,
        };
        self.prepare_parts(
            cost,
            mu,
            nu,
            (batch, n, m),
            &offsets,
            (mu_masses, masses),
            (empty_mu, empty_nu),
        )
    }

    /// As [`Solver::solve_prepared`], with the potentials written into the caller's buffers
    /// `f` (`B×n`) and `g` (`B×m`, the cost offsets added back on the device): only the
    /// per-problem report and distances come back to the host.
    pub fn solve_prepared_into<T: Real>(
        &self,
        prepared: &Prepared<T, B>,
        f: &mut B::Buffer,
        g: &mut B::Buffer,
    ) -> Result<BufferSolution>
    where
        B: Backend<T>,
    {
        let (pf, pg, convergence, distance, objective) = self.iterate_prepared(prepared)?;
        self.check_distances::<T>(&distance)?;
        self.write_potentials(prepared, &pf, &pg, f, g)?;
        Ok(BufferSolution {
            distance,
            objective,
            convergence,
        })
    }

    /// As [`Solver::solve_prepared_into`], and the plans `P_b = exp((f_b ⊕ g_b − C_b)/ε)`
    /// (`B×n×m`) written into the caller's buffer `plan` (the same entries as
    /// [`Solver::coupling`]'s). The report and distances are those of the potentials
    /// ([`Solver::solve`]'s), not re-measured on the array as [`Solver::coupling`] does on
    /// the host.
    pub fn coupling_into<T: Real>(
        &self,
        prepared: &Prepared<T, B>,
        plan: &mut B::Buffer,
    ) -> Result<BufferSolution>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let (batch, n, m) = prepared.dims();
        crate::backend::check_buffer_len("plan", be.len(plan), batch * n * m)?;
        let (f, g, convergence, distance, objective) = self.iterate_prepared(prepared)?;
        self.check_distances::<T>(&distance)?;
        let p = be.plan(&prepared.cost, &f, &g, T::of(self.params.eps))?;
        be.offset_rows(&p, &[], plan)?;
        Ok(BufferSolution {
            distance,
            objective,
            convergence,
        })
    }

    /// Copy solved potentials into the caller's buffers, the offsets added to `g`.
    pub(crate) fn write_potentials<T: Real>(
        &self,
        prepared: &Prepared<T, B>,
        pf: &B::Buffer,
        pg: &B::Buffer,
        f: &mut B::Buffer,
        g: &mut B::Buffer,
    ) -> Result<()>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        crate::backend::check_buffer_len("f", be.len(f), prepared.batch * prepared.n)?;
        crate::backend::check_buffer_len("g", be.len(g), prepared.batch * prepared.m)?;
        be.offset_rows(pf, &[], f)?;
        // Zero offsets make a copy (`offset_rows` skips them).
        be.offset_rows(pg, &prepared.shift, g)
    }

    /// A non-finite transport cost is an error (ε too small for the precision).
    pub(crate) fn check_distances<T: Real>(&self, distance: &[f64]) -> Result<()> {
        if let Some(k) = distance.iter().position(|d| !d.is_finite()) {
            return Err(Error::Numerical(format!(
                "the transport cost of problem {k} is {} (eps = {} may be too small for {})",
                distance[k],
                self.params.eps,
                T::NAME
            )));
        }
        Ok(())
    }

    /// As [`Solver::solve`] for a batch already on the backend: only the potentials, `B`
    /// marginal errors (every `check_every` iterations) and `B` distances cross to the host.
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, SinkhornParams, Solver};
    /// use ndarray::array;
    /// // Solve the same uploaded batch at several iteration budgets: the marginal error falls.
    /// let (mu, nu, cost) = (array![0.5f64, 0.5], array![0.1, 0.9], array![[0.0, 1.0], [1.0, 0.0]]);
    /// let problem = Problem::new(mu.view(), nu.view(), cost.view())?;
    /// let prepared = Solver::new(CpuBackend, SinkhornParams::new(0.5)).prepare(&problem)?;
    /// let mut errors = Vec::new();
    /// for iters in [1, 4, 16] {
    ///     let solver = Solver::new(CpuBackend, SinkhornParams::fixed_iterations(0.5, iters));
    ///     errors.push(solver.solve_prepared(&prepared)?.convergence.marginal_error);
    /// }
    /// assert!(errors[0] > errors[1] && errors[1] > errors[2]);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn solve_prepared<T: Real>(&self, prepared: &Prepared<T, B>) -> Result<SinkhornResult<T>>
    where
        B: Backend<T>,
    {
        let (f, g, convergence, distance, objective) = self.iterate_prepared(prepared)?;
        self.finish_parts(
            (prepared.batch, prepared.n, prepared.m),
            &f,
            &g,
            &prepared.shift,
            &convergence,
            &distance,
            objective.as_deref(),
        )
    }

    /// The solver loop on uploaded data; returns the potentials (still on the device), the
    /// report of the plan they define, its transport costs (offsets included) and, for
    /// unbalanced problems, its objectives.
    #[allow(clippy::type_complexity)]
    pub(crate) fn iterate_prepared<T: Real>(
        &self,
        pr: &Prepared<T, B>,
    ) -> Result<(
        B::Buffer,
        B::Buffer,
        Convergence,
        Vec<f64>,
        Option<Vec<f64>>,
    )>
    where
        B: Backend<T>,
    {
        let p = &self.params;
        let relax = p.unbalanced();
        match relax {
            None => check_equal_mass::<T>(&pr.mu_masses, &pr.masses)?,
            Some(r) if pr.shift.iter().any(|&s| s != 0.0) => {
                return Err(Error::parameter(
                    "relaxation",
                    format!("{r:?}"),
                    "this batch was prepared for a balanced solve (its cost shifted by a \
                     constant, which changes an unbalanced plan): prepare it with the \
                     unbalanced parameters",
                ))
            }
            Some(_) => {}
        }
        p.validate()?;
        crate::validate::check_eps_resolution::<T>(p.eps, pr.max_abs_cost)?;
        let be = &self.backend;
        let (batch, n, m, cost) = (pr.batch, pr.n, pr.m, &pr.cost);
        let (nu, log_mu, log_nu) = (&pr.nu, &pr.log_mu, &pr.log_nu);
        let marginals = Marginals {
            mu: &pr.mu,
            nu,
            log_mu,
            log_nu,
        };
        let (f, g) = match &p.warm_start {
            // Zero potentials, −∞ on zero-mass bins (so they take no part from the first
            // half-step on: the problem is exactly the one without those bins).
            None => {
                let start = |a: &B::Buffer, empty: bool, len: usize| match empty {
                    true => be.start_potential(a),
                    false => be.filled(len, T::zero()),
                };
                (
                    start(&pr.mu, pr.empty_mu, batch * n)?,
                    start(nu, pr.empty_nu, batch * m)?,
                )
            }
            Some(w) => {
                let (f0, g0) = warm_potentials::<T>(w, batch, n, m, &pr.shift, relax.is_none())?;
                (be.upload(&f0)?, be.upload(&g0)?)
            }
        };
        let mut pot = Potentials { f, g };
        let mut iterations = 0;
        let mut tracker = Tracker::new(p.observer.as_ref(), p.history, p.max_iters);
        if let Some(s) = &p.eps_scaling {
            // The stages count towards `max_iters`, and at least one iteration runs at `eps`:
            // the largest-ε stages are dropped when they do not fit.
            for e in s.stages_within(p.eps, p.max_iters) {
                iterate(be, cost, e, relax, &marginals, &mut pot, s.iters_per_stage)?;
                iterations += s.iters_per_stage;
                tracker.report(iterations, e, None, false);
            }
        }
        let eps = T::of(p.eps);
        let asked = p.tol.unwrap_or(T::DEFAULT_TOL);
        let tol = if asked > 0.0 { asked } else { T::DEFAULT_TOL };
        // The half-step of a convergence check goes here (allocated at the first check).
        let mut g_next: Option<B::Buffer> = None;
        // The check at which each problem first met its tolerance.
        let mut met: Vec<Option<usize>> = vec![None; batch];
        // Iteration `it` checks convergence (after its g half-step) when a tolerance was
        // asked for, `it > 0` and `it % check_every == 0`; the iterations between checks
        // run as one `iterate` call, which a backend may fuse.
        let mut it = 0;
        let main_iters = p.max_iters - iterations;
        while it < main_iters {
            let next_check = if asked > 0.0 || tracker.observed() {
                (it / p.check_every + 1).saturating_mul(p.check_every)
            } else {
                main_iters
            };
            let plain = next_check.min(main_iters) - it;
            iterate(be, cost, p.eps, relax, &marginals, &mut pot, plain)?;
            it += plain;
            iterations += plain;
            if it >= main_iters {
                break;
            }
            if asked <= 0.0 {
                tracker.report(iterations, p.eps, None, false);
                continue;
            }
            let gn = match g_next.as_mut() {
                Some(b) => b,
                None => g_next.insert(be.filled(batch * m, T::zero())?),
            };
            be.sinkstep(cost, Side::Col, eps, &pot.f, log_nu, gn)?;
            // Each problem's error and the mass it is relative to: `Σ ν`, or unbalanced the
            // plan's own mass (a constant added to the cost shrinks it, not the inputs').
            let (errs, masses): (Vec<f64>, Vec<f64>) = match relax {
                Some(r) => be
                    .relaxed_sides(batch, nu, &pot.g, gn, eps, r.rho_nu)?
                    .iter()
                    .map(|s| (s.residual, s.mass))
                    .unzip(),
                None => be
                    .marginal_error(batch, nu, &pot.g, gn, eps)?
                    .iter()
                    .map(|e| e.f64())
                    .zip(pr.masses.iter().copied())
                    .unzip(),
            };
            tracker.report(
                iterations,
                p.eps,
                Some(errs.iter().fold(0.0, |a, &e| a.max(e))),
                false,
            );
            let mut all = true;
            for (k, &e) in errs.iter().enumerate() {
                if e.is_nan() {
                    return Err(Error::Numerical(format!(
                        "the marginal error of problem {k} is NaN after {iterations} iterations \
                         (eps = {} may be too small for {})",
                        p.eps,
                        T::NAME
                    )));
                }
                if e <= tol * masses[k] {
                    met[k].get_or_insert(iterations);
                } else {
                    all = false;
                }
            }
            if all {
                break;
            }
            // The check needed the balanced g half-step (the residual of `relaxed_sides` is
            // defined by it), so this iteration finishes from it: relaxed into g, then an f
            // half-step relaxed apart. The backends' weighted half-steps exist only inside
            // `iterate_relaxed` (whole iterations, g first); the trait has no lone weighted
            // f half-step to call here.
            std::mem::swap(&mut pot.g, gn);
            if let Some(r) = relax {
                relax_side(be, &mut pot.g, log_nu, p.eps, r.rho_nu)?;
            }
            be.sinkstep(cost, Side::Row, eps, &pot.g, log_mu, &mut pot.f)?;
            if let Some(r) = relax {
                relax_side(be, &mut pot.f, log_mu, p.eps, r.rho_mu)?;
            }
            it += 1;
            iterations += 1;
        }
        drop(g_next);
        // The report of the plan (f, g) defines, measured after the last iteration.
        let reports = be.plan_report(cost, &pot, &marginals, eps)?;
        let relaxed = match relax {
            Some(r) => Some(relaxed_report(be, cost, &pot, &marginals, eps, r, pr)?),
            None => None,
        };
        let mut problems = Vec::with_capacity(batch);
        let mut distance = Vec::with_capacity(batch);
        for (k, r) in reports.iter().enumerate() {
            let (err, mass) = match &relaxed {
                Some(rel) => (rel.errors[k], rel.masses[k]),
                None => (r.row_error.max(r.col_error), pr.masses[k]),
            };
            if err.is_nan() {
                return Err(Error::Numerical(format!(
                    "the marginal error of problem {k} is NaN after {iterations} iterations \
                     (eps = {} may be too small for {})",
                    p.eps,
                    T::NAME
                )));
            }
            let converged = err <= tol * mass;
            problems.push(ProblemReport {
                marginal_error: err,
                mass,
                converged,
                iterations: match met[k] {
                    Some(at) if converged => at,
                    _ => iterations,
                },
            });
            distance.push(r.cost + pr.shift[k] * r.mass.unwrap_or(pr.masses[k]));
        }
        let mut convergence = Convergence::of_problems(iterations, tol, problems);
        tracker.report(iterations, p.eps, Some(convergence.marginal_error), true);
        convergence.history = tracker.history();
        Ok((
            pot.f,
            pot.g,
            convergence,
            distance,
            relaxed.map(|rel| rel.objectives),
        ))
    }
}

/// The host's peak in [`Solver::coupling`] can be allocated: the plan (`dims` = `B×n×m`
/// values of `T`, handed back as the backend made it, [`Backend::into_host`]) with the
/// prepared cost's host copies (`cost_bytes`, [`Backend::host_cost_bytes`]) held alongside,
/// probed as one block before the cost is prepared and anything solved
/// ([`crate::alloc::probe`]). Else [`Error::OutOfMemory`] naming the plan and the bytes.
pub(crate) fn check_coupling_peak<T>(dims: &[usize], cost_bytes: usize) -> Result<()> {
    crate::alloc::probe::<T>("plan", dims, cost_bytes)
}

/// `iters` iterations at regularisation `eps`: the backend's (possibly fused) balanced loop,
/// or for unbalanced problems its relaxed loop ([`Backend::iterate_relaxed`], `φ = ρ/(ρ + ε)`).
fn iterate<T: Real, B: Backend<T>>(
    be: &B,
    cost: &B::Cost,
    eps: f64,
    relax: Option<Relaxation>,
    marginals: &Marginals<'_, B::Buffer>,
    pot: &mut Potentials<B::Buffer>,
    iters: usize,
) -> Result<()> {
    let Some(r) = relax else {
        return be.iterate(cost, T::of(eps), marginals, pot, iters);
    };
    let phi = |rho| T::of(crate::unbalanced::phi(rho, eps));
    be.iterate_relaxed(
        cost,
        T::of(eps),
        (phi(r.rho_mu), phi(r.rho_nu)),
        marginals,
        pot,
        iters,
    )
}

/// The unbalanced half-step from a balanced one: [`Backend::relax`] with `φ = ρ/(ρ + ε)`
/// (nothing to do for `ρ = ∞`).
pub(crate) fn relax_side<T: Real, B: Backend<T>>(
    be: &B,
    pot: &mut B::Buffer,
    log_marginal: &B::Buffer,
    eps: f64,
    rho: f64,
) -> Result<()> {
    if rho == f64::INFINITY {
        return Ok(());
    }
    be.relax(
        pot,
        log_marginal,
        T::of(eps),
        T::of(crate::unbalanced::phi(rho, eps)),
    )
}

/// The report of the unbalanced plans `(f, g)` define, per problem, in f64 from one
/// balanced half-step on each side.
struct RelaxedReport {
    /// The larger residual of the two sides ([`RelaxedSide::residual`](crate::RelaxedSide::residual)).
    errors: Vec<f64>,
    /// The plan's mass, the smaller of its two marginals' sums.
    masses: Vec<f64>,
    /// The unbalanced objective ([`SinkhornResult::objective`]).
    objectives: Vec<f64>,
}

/// [`RelaxedReport`] of the plans `(f, g)` define.
fn relaxed_report<T: Real, B: Backend<T>>(
    be: &B,
    cost: &B::Cost,
    pot: &Potentials<B::Buffer>,
    marginals: &Marginals<'_, B::Buffer>,
    eps: T,
    r: Relaxation,
    pr: &Prepared<T, B>,
) -> Result<RelaxedReport> {
    let mut f_half = be.filled(be.len(&pot.f), T::zero())?;
    be.sinkstep(cost, Side::Row, eps, &pot.g, marginals.log_mu, &mut f_half)?;
    let mut g_half = be.filled(be.len(&pot.g), T::zero())?;
    be.sinkstep(cost, Side::Col, eps, &pot.f, marginals.log_nu, &mut g_half)?;
    let e = eps.f64();
    let batch = pr.batch;
    let rows = be.relaxed_sides(batch, marginals.mu, &pot.f, &f_half, eps, r.rho_mu)?;
    let cols = be.relaxed_sides(batch, marginals.nu, &pot.g, &g_half, eps, r.rho_nu)?;
    let objectives = rows
        .iter()
        .zip(&cols)
        .enumerate()
        .map(|(k, (a, b))| {
            a.objective(r.rho_mu) + b.objective(r.rho_nu) - e * a.mass
                + e * pr.mu_masses[k] * pr.masses[k]
        })
        .collect();
    Ok(RelaxedReport {
        errors: rows
            .iter()
            .zip(&cols)
            .map(|(a, b)| a.residual.max(b.residual))
            .collect(),
        masses: rows
            .iter()
            .zip(&cols)
            .map(|(a, b)| a.mass.min(b.mass))
            .collect(),
        objectives,
    })
}

/// Warm-start potentials for the solver, `B×n` and `B×m`, flattened: each problem's pair
/// re-centred (`f − k`, `g + k`, `k` the centre of `f`'s finite range: the plan depends on
/// `f ⊕ g` only, and a shift `(c, −c)` would otherwise cost `f + g` its precision), and `g`
/// moved to the cost without its offsets (`g − shift`). Unbalanced problems (`recentre`
/// false) take them as they are.
fn warm_potentials<T: Real>(
    w: &WarmStart,
    batch: usize,
    n: usize,
    m: usize,
    shift: &[f64],
    recentre: bool,
) -> Result<(Vec<T>, Vec<T>)> {
    if w.f.dim() != (batch, n) || w.g.dim() != (batch, m) {
        return Err(Error::shape(
            "warm_start",
            format!(
                "f is {:?} and g is {:?}, expected ({batch}, {n}) and ({batch}, {m})",
                w.f.dim(),
                w.g.dim()
            ),
        ));
    }
    // −∞ is allowed (zero-mass bins); NaN and +∞ are not.
    for (arg, a) in [("warm_start.f", &w.f), ("warm_start.g", &w.g)] {
        if let Some((idx, v)) = a
            .indexed_iter()
            .find(|(_, v)| v.is_nan() || **v == f64::INFINITY)
        {
            return Err(Error::NonFinite {
                arg: arg.into(),
                index: format!("{idx:?}"),
                value: v.to_string(),
            });
        }
    }
    let mut f = Vec::with_capacity(batch * n);
    let mut g = Vec::with_capacity(batch * m);
    for (b, (fr, gr)) in w.f.outer_iter().zip(w.g.outer_iter()).enumerate() {
        let (lo, hi) = fr
            .iter()
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
        // Unbalanced problems: `(f − k, g + k)` is another plan's pair, kept as given.
        let k = if recentre && lo <= hi {
            0.5 * lo + 0.5 * hi
        } else {
            0.0
        };
        f.extend(fr.iter().map(|&v| T::of(v - k)));
        g.extend(gr.iter().map(|&v| T::of(v + k - shift[b])));
    }
    Ok((f, g))
}

/// One plan array's report, measured on its entries in f64.
struct Measured {
    /// The error [`ProblemReport::marginal_error`] describes.
    error: f64,
    /// `⟨P, C⟩` against the problem's own (unshifted) cost.
    cost: f64,
    /// What the tolerance is relative to ([`ProblemReport::mass`]).
    mass: f64,
}

/// Each problem's report of a plan as an array (`B×n×m`), in f64: the larger of the row and
/// column violations `‖·‖₁`, and the cost against the problem's own (unshifted) cost.
fn measure_plans<T: Real>(plan: &Array3<T>, problem: &Problem<'_, T>) -> Vec<Measured> {
    use rayon::prelude::*;
    let (batch, n, m) = plan.dim();
    (0..batch)
        .into_par_iter()
        .map(|b| {
            let p = plan.index_axis(Axis(0), b);
            let (mu, nu) = (problem.mu.row(b), problem.nu.row(b));
            let mut cols = vec![0.0f64; m];
            let mut row_err = 0.0;
            let mut cost = 0.0;
            for i in 0..n {
                let mut row = 0.0;
                for j in 0..m {
                    let v = p[[i, j]].f64();
                    row += v;
                    cols[j] += v;
                    if v != 0.0 {
                        cost += v * cost_entry(&problem.cost, b, i, j);
                    }
                }
                row_err += (row - mu[i].f64()).abs();
            }
            let col_err: f64 = cols.iter().zip(nu).map(|(c, v)| (c - v.f64()).abs()).sum();
            Measured {
                error: row_err.max(col_err),
                cost,
                mass: problem.masses[b],
            }
        })
        .collect()
}

/// [`measure_plans`] for unbalanced problems: on each side the change one more relaxed
/// half-step would make to the array's own marginal ([`RelaxedSide::residual`]: with the
/// array's row sums `R`, the half-step's `log(r'/R) = φ_μ·log(μ/R) − (f − ε log μ)/(ρ_μ + ε)`,
/// and alike for the columns), the larger of the two, `⟨P, C⟩`, and the array's mass.
///
/// [`RelaxedSide::residual`]: crate::RelaxedSide::residual
fn measure_relaxed_plans<T: Real>(
    plan: &Array3<T>,
    problem: &Problem<'_, T>,
    result: &SinkhornResult<T>,
    r: Relaxation,
) -> Vec<Measured> {
    use crate::unbalanced::half_step_change;
    use rayon::prelude::*;
    let (batch, n, m) = plan.dim();
    let eps = T::of(result.eps).f64();
    // One bin's change: weight `a`, the array's marginal `got`, the bin's potential.
    let change = |a: T, got: f64, pot: T, rho: f64| -> f64 {
        let a = a.f64();
        if a <= 0.0 {
            return got;
        }
        let log_ratio = (got / a).ln();
        half_step_change(a, got, log_ratio, pot.f64() - eps * a.ln(), eps, rho)
    };
    (0..batch)
        .into_par_iter()
        .map(|b| {
            let p = plan.index_axis(Axis(0), b);
            let (mu, nu) = (problem.mu.row(b), problem.nu.row(b));
            let (f, g) = (result.f.row(b), result.g.row(b));
            let mut cols = vec![0.0f64; m];
            let mut row_err = 0.0;
            let mut cost = 0.0;
            let mut mass = 0.0;
            for i in 0..n {
                let mut row = 0.0;
                for j in 0..m {
                    let v = p[[i, j]].f64();
                    row += v;
                    cols[j] += v;
                    if v != 0.0 {
                        cost += v * cost_entry(&problem.cost, b, i, j);
                    }
                }
                mass += row;
                row_err += change(mu[i], row, f[i], r.rho_mu);
            }
            let col_err: f64 = (0..m).map(|j| change(nu[j], cols[j], g[j], r.rho_nu)).sum();
            Measured {
                error: row_err.max(col_err),
                cost,
                mass,
            }
        })
        .collect()
}

/// `C_b[i, j]` of a cost source, in f64.
fn cost_entry<T: Real>(cost: &CostSource<'_, T>, b: usize, i: usize, j: usize) -> f64 {
    match cost {
        CostSource::Dense(c) => c[[i, j]].f64(),
        CostSource::DenseBatch(c) => c[[b, i, j]].f64(),
        CostSource::Grid(g) => g.cost(i, j),
        CostSource::PointCloud(p) => p.cost_of(b, i, j),
    }
}

/// What [`Solver::solve_prepared_into`] reads back: per problem, the distance `⟨P, C⟩`
/// (offsets included), the unbalanced objective, and the report.
#[derive(Clone, Debug)]
pub struct BufferSolution {
    /// `⟨P_b, C_b⟩` of each problem.
    pub distance: Vec<f64>,
    /// Unbalanced problems only: the objective ([`SinkhornResult::objective`]).
    pub objective: Option<Vec<f64>>,
    /// Iterations, marginal errors and whether the tolerance was met.
    pub convergence: Convergence,
}

/// The checks of [`Problem::batch`] for a batch of histograms on the backend (`batch` rows of
/// `per`): non-empty, finite, non-negative (the same errors, naming the first offending entry,
/// from the buffer downloaded only then), finite positive totals, returned with whether any
/// bin is empty.
fn buffer_histograms<T: Real, B: Backend<T>>(
    be: &B,
    arg: &str,
    buf: &B::Buffer,
    batch: usize,
    per: usize,
) -> Result<(Vec<f64>, bool)> {
    if batch == 0 || per == 0 {
        return Err(Error::Empty {
            arg: arg.into(),
            detail: format!("shape {batch}×{per}"),
        });
    }
    crate::backend::check_buffer_len(arg, be.len(buf), batch * per)?;
    let stats = be.row_stats(buf, batch)?;
    if stats.iter().any(|s| s.non_finite > 0 || s.negative > 0) {
        let host = be.download(buf)?;
        let view = ArrayView2::from_shape((batch, per), &host)
            .map_err(|e| Error::shape(arg, e.to_string()))?;
        check_histograms(arg, &view)?;
    }
    let masses = crate::validate::check_masses(arg, stats.iter().map(|s| s.sum).collect())?;
    Ok((masses, stats.iter().any(|s| s.min <= 0.0)))
}

/// A batch uploaded to a backend by [`Solver::prepare`]: the prepared cost, `ν`, `log μ`
/// and `log ν`, resident on the device.
pub struct Prepared<T: Real, B: Backend<T>> {
    cost: B::Cost,
    mu: B::Buffer,
    nu: B::Buffer,
    log_mu: B::Buffer,
    log_nu: B::Buffer,
    /// Whether `μ` (`ν`) has zero-mass bins (start potentials −∞ there; else all 0).
    pub(crate) empty_mu: bool,
    pub(crate) empty_nu: bool,
    batch: usize,
    n: usize,
    m: usize,
    /// Largest |cost| without its offsets, for the ε resolution check.
    max_abs_cost: f64,
    /// Largest |cost| as given.
    max_abs_raw: f64,
    /// Each problem's cost offset ([`CostOffsets`]).
    shift: Vec<f64>,
    /// `Σ ν` of each problem.
    masses: Vec<f64>,
    /// `Σ μ` of each problem.
    mu_masses: Vec<f64>,
}

impl<T: Real, B: Backend<T>> Prepared<T, B> {
    /// Number of problems, source points and target points.
    pub fn dims(&self) -> (usize, usize, usize) {
        (self.batch, self.n, self.m)
    }
    /// The largest `|C_ij|` of the cost as given (the start of
    /// [`EpsScaling::from_max_cost`]).
    pub fn max_cost(&self) -> f64 {
        self.max_abs_raw
    }
    pub(crate) fn cost(&self) -> &B::Cost {
        &self.cost
    }
    pub(crate) fn mu(&self) -> &B::Buffer {
        &self.mu
    }
    pub(crate) fn nu(&self) -> &B::Buffer {
        &self.nu
    }
    pub(crate) fn log_mu(&self) -> &B::Buffer {
        &self.log_mu
    }
    pub(crate) fn log_nu(&self) -> &B::Buffer {
        &self.log_nu
    }
    /// `Σ μ` and `Σ ν` of each problem.
    pub(crate) fn masses(&self) -> (&[f64], &[f64]) {
        (&self.mu_masses, &self.masses)
    }
    pub(crate) fn shifts(&self) -> &[f64] {
        &self.shift
    }
}

impl<T: Real, B: Backend<T>> std::fmt::Debug for Prepared<T, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Prepared {{ batch: {}, n: {}, m: {} }}",
            self.batch, self.n, self.m
        )
    }
}
