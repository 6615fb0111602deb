//! Fixed-support entropic Wasserstein barycenters by iterative Bregman projections, in
//! the log domain (POT's `ot.bregman.barycenter(..., method="sinkhorn_log")` and
//! `convolutional_barycenter2d(..., method="sinkhorn_log")`).
//!
//! For inputs `a_k` (on the `n` rows of the cost) with weights `w_k`, the barycenter `b`
//! lives on the `m` columns. From `G_k = 0`, each iteration is
//!
//! `f_k = log a_k − LSE_j(G_kj − C_ij/ε)`, `log K(u_k)_j = LSE_i(f_ki − C_ij/ε)`,
//! `log b = Σ_k w_k log K(u_k)`, `G_k = log b − log K(u_k)`,
//!
//! i.e. two [`sinkstep`](crate::Backend::sinkstep)s over the batch of `K` inputs against one shared cost
//! (the second with log-marginal 0), a weighted sum and a subtraction. The error, checked
//! every `check_every` iterations, is POT's `Σ_x std_k exp(G_kx + log K(u_k)_x)` (the
//! spread of the `K` plans' marginals on the barycenter side, `G` before its update).
//! On a [`GridCost`] the sinksteps are separable 1-D log-convolutions, so a 2-D image of
//! `N×N` pixels costs `O(N³)` per step, never an `N²×N²` matrix.
//!
//! **Unbalanced** ([`BarycenterProblem::relaxed`], POT's
//! `ot.unbalanced.barycenter_unbalanced(A, M, reg, reg_m, weights, method="sinkhorn")`):
//! `b = argmin_b Σ_k w_k·min_{P_k} [⟨P_k, C⟩ + ε·KL(P_k ‖ 1) + ρ_μ·KL(P_k·1 ‖ a_k) + ρ_ν·KL(P_kᵀ·1 ‖ b)]`
//! (generalized KL, entropy relative to the all-ones matrix as POT's `K = exp(−M/ε)`), so the
//! inputs may have different masses. With `φ = ρ/(ρ + ε)` per side, `f_k = ε log u_k`,
//! `g_k = ε log v_k`, from `g = 0` each iteration is POT's
//! `u_k = (a_k / K v_k)^{φ_μ}`, `b = (Σ_k w_k (Kᵀu_k)^{1−φ_ν})^{1/(1−φ_ν)}`, `v_k = (b / Kᵀu_k)^{φ_ν}`:
//!
//! `f_k = φ_μ·sinkstep(Row, g_k, log a_k)`, `x_k = −sinkstep(Col, f_k, 0) = ε log Kᵀu_k`,
//! `ε log b = (ρ_ν+ε)·log Σ_k w_k exp(x_k/(ρ_ν+ε))` ([`bary_log_power_mean`](crate::BarycenterKernels::bary_log_power_mean);
//! the weighted mean of `x_k` for `ρ_ν = ∞`), `g_k = φ_ν·(ε log b − x_k)`,
//!
//! with the weights normalised to sum 1 (the iteration's fixed point is optimal only then)
//! and no rescaling of the inputs (an unbalanced barycenter is not proportional to their
//! mass). After each iteration the couplings `P_k = diag(u_k) K diag(v_k)` meet their
//! barycenter-side conditions `P_kᵀ1 = b ⊙ exp(−g_k/ρ_ν)` and `b = Σ_k w_k P_kᵀ1` exactly;
//! the reported error is the largest violation of the inputs' side relative to the
//! coupling's own mass, `max_k ‖P_k·1 − a_k ⊙ exp(−f_k/ρ_μ)‖₁ / Σ P_k` (`exp(…) = 1` for
//! `ρ_μ = ∞`; `Σ P_k`, not `‖a_k‖₁`: a constant added to the cost shrinks the couplings,
//! not the inputs), measured at
//! iterations `c, 2c, …` (`c = check_every`) and after the last one. Both sides infinite is
//! the balanced barycenter above.

mod unbalanced;

use crate::backend::{Backend, BaryBuffers, BaryLayout, BarycenterKernels, CostSource, GridCost};
use crate::batch::IntoBatch;
use crate::entropic::sinkhorn::unbalanced;
use crate::validate::{check_eps, check_finite, check_histograms};
use crate::{CpuBackend, Error, Real, Relaxation, Result};
use ndarray::{
    Array, Array1, ArrayView, ArrayView1, ArrayView2, ArrayView3, Axis, Dimension, Ix1, Ix2, Ix3,
    RemoveAxis,
};

/// Parameters of the barycenter loop, set by builder methods
/// (`BarycenterParams::new(eps).max_iters(500).tol(1e-6)`). `Default` follows POT
/// (`stopThr = 1e-4`, error checked every 10 iterations) with `eps = 0.01`.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BarycenterParams {
    /// Regularisation strength ε (> 0), in the units of the cost.
    pub eps: f64,
    /// Maximum number of iterations; `None` takes POT's default for the cost (1000 for a
    /// dense cost, 10000 for a grid).
    pub max_iters: Option<usize>,
    /// Stop when the error falls below `tol` (strictly, as POT); `0` runs every iteration
    /// (and `converged` then says whether the result meets POT's default, 1e-4).
    pub tol: f64,
    /// Check the error every this many iterations. The schedule is POT's: at iterations
    /// 1, 1 + c, 1 + 2c, … (0-based) for a dense cost, and c − 1, 2c − 1, … on a grid;
    /// the last iteration is always measured so the reported error belongs to the result.
    pub check_every: usize,
    /// Called with the run's [`Progress`](crate::Progress) at every check.
    pub observer: Option<crate::Observer>,
    /// Keep the error of every check in [`BarycenterResult::history`] (POT's `log=True`).
    pub history: bool,
}

impl Default for BarycenterParams {
    fn default() -> Self {
        BarycenterParams {
            eps: 0.01,
            max_iters: None,
            tol: 1e-4,
            check_every: 10,
            observer: None,
            history: false,
        }
    }
}

impl BarycenterParams {
    /// Default parameters with regularisation `eps`.
    pub fn new(eps: f64) -> Self {
        BarycenterParams {
            eps,
            ..Default::default()
        }
    }
    /// These parameters with regularisation `eps`.
    pub fn eps(self, eps: f64) -> Self {
        BarycenterParams { eps, ..self }
    }
    /// These parameters with at most `max_iters` iterations (`None`: POT's default for the
    /// cost).
    pub fn max_iters(self, max_iters: impl Into<Option<usize>>) -> Self {
        BarycenterParams {
            max_iters: max_iters.into(),
            ..self
        }
    }
    /// These parameters with the error tolerance `tol` (`0` runs every iteration).
    pub fn tol(self, tol: f64) -> Self {
        BarycenterParams { tol, ..self }
    }
    /// Exactly `iters` iterations, no early stop: `max_iters(iters).tol(0.0)` (the error is
    /// still measured at the end).
    pub fn fixed_iterations(self, iters: usize) -> Self {
        self.max_iters(iters).tol(0.0)
    }
    /// These parameters with an error check every `check_every` iterations.
    pub fn check_every(self, check_every: usize) -> Self {
        BarycenterParams {
            check_every,
            ..self
        }
    }
    /// These parameters with `observer` called at every check.
    pub fn observer(self, observer: crate::Observer) -> Self {
        BarycenterParams {
            observer: Some(observer),
            ..self
        }
    }
    /// These parameters keeping (or not) the error history.
    pub fn history(self, history: bool) -> Self {
        BarycenterParams { history, ..self }
    }

    fn validate(&self) -> Result<()> {
        check_eps("eps", self.eps)?;
        if self.max_iters == Some(0) {
            return Err(Error::parameter(
                "max_iters",
                0,
                "at least one iteration is needed",
            ));
        }
        if self.check_every == 0 {
            return Err(Error::parameter("check_every", 0, "must be ≥ 1"));
        }
        if !(self.tol.is_finite() && self.tol >= 0.0) {
            return Err(Error::parameter("tol", self.tol, "must be finite and ≥ 0"));
        }
        Ok(())
    }
}

/// The barycenter problems: `K` input histograms on the `n` rows of a cost with their
/// weights, one problem (`K×n`, `K`) or a batch of `P` (`P×K×n`, `P×K`), and (unbalanced)
/// the relaxation of the couplings' marginals. The cost is given to
/// [`BarycenterSolver::solve`], so that a prepared one serves many problems.
#[derive(Clone, Debug)]
pub struct BarycenterProblem<'a, T> {
    histograms: ArrayView3<'a, T>,
    weights: ArrayView2<'a, T>,
    relaxation: Option<Relaxation>,
}

impl<'a, T: Real> BarycenterProblem<'a, T> {
    /// The barycenter of the rows of `histograms` with `weights` (non-negative, summing to
    /// 1): one problem (`K×n` and `K`) or a batch (`P×K×n` and `P×K`). Invalid input is an
    /// error naming the argument; inputs of unequal masses are refused when the problem is
    /// solved as a balanced one (without [`BarycenterProblem::relaxed`]).
    pub fn new(
        histograms: impl IntoBatch<'a, T, Ix3>,
        weights: impl IntoBatch<'a, T, Ix2>,
    ) -> Result<Self> {
        let (histograms, weights) = (histograms.into_batch(), weights.into_batch());
        validate_inputs(&histograms, &weights, false)?;
        Ok(BarycenterProblem {
            histograms,
            weights,
            relaxation: None,
        })
    }

    /// This problem with the couplings' marginals relaxed: the unbalanced barycenter (POT's
    /// `ot.unbalanced.barycenter_unbalanced(A, M, reg, reg_m, method="sinkhorn")`, whose
    /// scalar `reg_m` is [`Relaxation::kl`]). `rho_mu` weighs `KL(P_k·1 ‖ a_k)` (the inputs'
    /// side), `rho_nu` weighs `KL(P_kᵀ·1 ‖ b)` (the barycenter's side); `∞` keeps that side
    /// exact. The inputs may then differ in mass. See the [module docs](self) for the
    /// iteration and the reported error.
    ///
    /// ```
    /// use logot::{BarycenterParams, BarycenterProblem, BarycenterSolver, CpuBackend, Relaxation};
    /// use logot::ndarray::{array, Array2};
    /// // Inputs of unequal masses (1 and 3) are accepted once the marginals are relaxed.
    /// let x = [0.0, 0.25, 0.5, 0.75, 1.0];
    /// let cost = Array2::from_shape_fn((5, 5), |(i, j)| (x[i] - x[j]) * (x[i] - x[j]));
    /// let inputs = array![[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 3.0]];
    /// let weights = array![0.5, 0.5];
    /// let problem = BarycenterProblem::new(inputs.view(), weights.view())?.relaxed(Relaxation::kl(1.0));
    /// let bar = BarycenterSolver::new(CpuBackend, BarycenterParams::new(0.01)).solve(&problem, cost.view())?;
    /// assert!(bar[0].converged);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn relaxed(self, relaxation: impl Into<Relaxation>) -> Self {
        BarycenterProblem {
            relaxation: Some(relaxation.into()),
            ..self
        }
    }

    /// Number of problems.
    pub fn batch_size(&self) -> usize {
        self.histograms.dim().0
    }
    /// The relaxation, as given to [`BarycenterProblem::relaxed`].
    pub fn relaxation(&self) -> Option<Relaxation> {
        self.relaxation
    }
}

/// The cost of a barycenter, for [`BarycenterSolver::solve`]: a dense `n×m` matrix or a
/// [`GridCost`] (which convert into it), or one prepared on the solver's backend
/// ([`BarycenterSolver::prepare`]).
#[derive(Debug)]
pub enum BarycenterCost<'c, T: Real, B: Backend<T>> {
    /// A cost on the host, prepared for this solve.
    Source(CostSource<'c, T>),
    /// A cost already prepared on the backend.
    Prepared(&'c PreparedCost<T, B>),
}

impl<'c, T: Real, B: Backend<T>> From<CostSource<'c, T>> for BarycenterCost<'c, T, B> {
    fn from(c: CostSource<'c, T>) -> Self {
        BarycenterCost::Source(c)
    }
}

impl<'c, T: Real, B: Backend<T>> From<ArrayView2<'c, T>> for BarycenterCost<'c, T, B> {
    fn from(c: ArrayView2<'c, T>) -> Self {
        BarycenterCost::Source(c.into())
    }
}

impl<T: Real, B: Backend<T>> From<GridCost> for BarycenterCost<'_, T, B> {
    fn from(c: GridCost) -> Self {
        BarycenterCost::Source(c.into())
    }
}

impl<'c, T: Real, B: Backend<T>> From<&'c PreparedCost<T, B>> for BarycenterCost<'c, T, B> {
    fn from(c: &'c PreparedCost<T, B>) -> Self {
        BarycenterCost::Prepared(c)
    }
}

/// A computed barycenter and how the loop ended.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BarycenterResult<T, D: Dimension = Ix1> {
    /// The barycenter (`m` bins; for [`grid_barycenter`], an image of the grid's shape).
    pub histogram: Array<T, D>,
    /// Iterations run.
    pub iterations: usize,
    /// POT's error `Σ_x std_k exp(G_k + log K(u_k))` of the returned barycenter (measured
    /// after the last iteration run), relative to the inputs' mass (for inputs of mass 1,
    /// POT's value). Unbalanced ([`BarycenterProblem::relaxed`]): the largest relative
    /// violation of the couplings' optimality conditions relative to each coupling's mass,
    /// `max_k ‖P_k·1 − a_k ⊙ exp(−f_k/ρ_μ)‖₁ / Σ P_k` (the [module docs](self)).
    pub error: f64,
    /// `error < tol`, with POT's default 1e-4 in place of `tol = 0`.
    pub converged: bool,
    /// The largest error over the batch at every check, when asked for
    /// ([`BarycenterParams::history`](BarycenterParams#structfield.history)); empty otherwise.
    pub history: Vec<crate::HistoryEntry>,
}

/// A barycenter cost validated and prepared on a backend ([`BarycenterSolver::prepare`]):
/// on a GPU it stays on the device across solves.
pub struct PreparedCost<T: Real, B: Backend<T>> {
    cost: B::Cost,
    n: usize,
    m: usize,
    grid: bool,
    /// Largest |cost|, for the ε resolution check.
    max_abs_cost: f64,
}

impl<T: Real, B: Backend<T>> PreparedCost<T, B> {
    /// Rows (bins of each input) and columns (bins of the barycenter) of the cost.
    pub fn dims(&self) -> (usize, usize) {
        (self.n, self.m)
    }
}

impl<T: Real, B: Backend<T>> std::fmt::Debug for PreparedCost<T, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PreparedCost {{ n: {}, m: {}, grid: {} }}",
            self.n, self.m, self.grid
        )
    }
}

/// Computes barycenters on a chosen backend with chosen parameters: the control behind
/// [`barycenter()`] and [`grid_barycenter`].
///
/// On the CPU, the top-level functions also run the loop on a rayon worker thread, which
/// saves a thread hand-off per kernel (noticeable on small problems); do the same with
/// `rayon::scope(|_| solver.solve(..))`.
///
/// ```
/// use logot::{BarycenterParams, BarycenterProblem, BarycenterSolver, CpuBackend, GridCost};
/// use logot::ndarray::{Array2, Array3};
/// // The same two Diracs (bins 2 and 18 of a 1-D grid of 21 points) with weights (1 − t, t)
/// // for t = 0, ½, 1: the barycenter walks along the segment, bin 2 + 16t (displacement
/// // interpolation). Three problems in one batch, against a cost prepared once.
/// let h = Array3::from_shape_fn((3, 2, 21), |(_, k, i)| if i == [2, 18][k] { 1.0 } else { 0.0 });
/// let w = Array2::from_shape_vec((3, 2), vec![1.0, 0.0, 0.5, 0.5, 0.0, 1.0]).unwrap();
/// let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(1e-4));
/// let grid = solver.prepare::<f64>(GridCost::new(&[21])?)?;
/// let bars = solver.solve(&BarycenterProblem::new(h.view(), w.view())?, &grid)?;
/// assert!(bars.iter().zip([2, 10, 18]).all(|(b, bin)| b.converged && b.histogram[bin] > 0.99));
/// # Ok::<(), logot::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct BarycenterSolver<B> {
    backend: B,
    params: BarycenterParams,
}

impl<B> BarycenterSolver<B> {
    /// A solver on `backend` with `params`.
    pub fn new(backend: B, params: BarycenterParams) -> Self {
        BarycenterSolver { backend, params }
    }
    /// The parameters.
    pub fn params(&self) -> &BarycenterParams {
        &self.params
    }
    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The barycenters of a batch of problems, one per problem: `b = argmin Σ_k w_k OT_ε(a_k,
    /// b)` with one bin per column of `cost` (a dense `n×m` matrix, a [`GridCost`], or a
    /// cost from [`prepare`](Self::prepare)). All problems run together (one batched
    /// sinkstep of `P·K` rows) and stop when every problem's error is below `tol`.
    ///
    /// ```
    /// use logot::{BarycenterParams, BarycenterProblem, BarycenterSolver, CpuBackend};
    /// use logot::ndarray::{array, Array2};
    /// let x = [0.0, 0.25, 0.5, 0.75, 1.0];
    /// let cost = Array2::from_shape_fn((5, 5), |(i, j)| (x[i] - x[j]) * (x[i] - x[j]));
    /// let inputs = array![[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]];
    /// let weights = array![0.5, 0.5];
    /// let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(1e-3));
    /// let bar = solver.solve(&BarycenterProblem::new(inputs.view(), weights.view())?, cost.view())?;
    /// assert!(bar[0].histogram[2] > 0.99); // the midpoint
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn solve<'c, T: Real>(
        &self,
        problem: &BarycenterProblem<'_, T>,
        cost: impl Into<BarycenterCost<'c, T, B>>,
    ) -> Result<Vec<BarycenterResult<T>>>
    where
        B: BarycenterKernels<T> + 'c,
    {
        self.params.validate()?;
        let relaxation = unbalanced(problem.relaxation)?;
        let (histograms, weights) = (problem.histograms, problem.weights);
        validate_inputs(&histograms, &weights, relaxation.is_none())?;
        match cost.into() {
            BarycenterCost::Source(cost) => {
                let prepared = self.prepare(cost)?;
                crate::validate::check_eps_resolution::<T>(self.params.eps, prepared.max_abs_cost)?;
                self.run(histograms, weights, &prepared, relaxation)
            }
            BarycenterCost::Prepared(prepared) => {
                crate::validate::check_eps_resolution::<T>(self.params.eps, prepared.max_abs_cost)?;
                self.run(histograms, weights, prepared, relaxation)
            }
        }
    }

    /// Validate `cost` and prepare it on the backend once (on a GPU: upload it), for
    /// repeated solves with [`solve`](Self::solve).
    ///
    /// ```
    /// use logot::{BarycenterParams, BarycenterProblem, BarycenterSolver, CpuBackend};
    /// use logot::ndarray::{array, Array2};
    /// let x = [0.0, 0.25, 0.5, 0.75, 1.0];
    /// let cost = Array2::from_shape_fn((5, 5), |(i, j)| (x[i] - x[j]) * (x[i] - x[j]));
    /// let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(1e-3));
    /// let prepared = solver.prepare(cost.view())?;
    /// let inputs = array![[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]];
    /// for t in [0.25, 0.5, 0.75] {
    ///     let weights = array![1.0 - t, t];
    ///     let bar = solver.solve(&BarycenterProblem::new(inputs.view(), weights.view())?, &prepared)?;
    ///     assert!(bar[0].histogram[(4.0 * t) as usize] > 0.99);
    /// }
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn prepare<'a, T: Real>(
        &self,
        cost: impl Into<CostSource<'a, T>>,
    ) -> Result<PreparedCost<T, B>>
    where
        B: BarycenterKernels<T>,
    {
        let cost = cost.into();
        let (n, m, max_abs_cost) = validate_cost(&cost)?;
        let grid = matches!(cost, CostSource::Grid(_));
        let prepared = self.backend.prepare_cost(&cost)?;
        let dims = self.backend.cost_dims(&prepared);
        if (dims.n, dims.m) != (n, m) {
            return Err(Error::shape(
                "cost",
                format!("prepared as {}×{}, expected {n}×{m}", dims.n, dims.m),
            ));
        }
        Ok(PreparedCost {
            cost: prepared,
            n,
            m,
            grid,
            max_abs_cost,
        })
    }

    /// The loop, on validated inputs.
    fn run<T: Real>(
        &self,
        histograms: ArrayView3<'_, T>,
        weights: ArrayView2<'_, T>,
        cost: &PreparedCost<T, B>,
        relaxation: Option<Relaxation>,
    ) -> Result<Vec<BarycenterResult<T>>>
    where
        B: BarycenterKernels<T>,
    {
        let p = &self.params;
        let (problems, inputs, n) = histograms.dim();
        if n != cost.n {
            let what = if cost.grid { "the grid has" } else { "has" };
            return Err(Error::shape(
                "cost",
                format!("{what} {} rows but each histogram has {n} bins", cost.n),
            ));
        }
        if let Some(r) = relaxation {
            return self.run_unbalanced(histograms, weights, cost, r);
        }
        let (m, grid) = (cost.m, cost.grid);
        // POT's stabilisation of log(A) and its check schedule differ between the two.
        let (stab, max_iters, offset) = if grid {
            (1e-30, p.max_iters.unwrap_or(10_000), p.check_every - 1)
        } else {
            (1e-16, p.max_iters.unwrap_or(1000), 1 % p.check_every)
        };
        let be = &self.backend;
        let layout = BaryLayout {
            problems,
            inputs,
            m,
        };
        let rows = problems * inputs;
        let prepared = &cost.cost;
        // The barycenter of inputs of mass M is M times that of the inputs over M: solve the
        // unit-mass problem (its error is then relative to M, and inputs of mass 1e200 keep
        // their spread finite), scale the result back.
        let masses: Vec<f64> = histograms
            .outer_iter()
            .map(|h| h.row(0).iter().map(|v| v.f64()).sum())
            .collect();
        let log_a: Vec<T> = histograms
            .outer_iter()
            .zip(&masses)
            .flat_map(|(h, &mass)| {
                h.into_iter()
                    .map(move |&a| T::of((a.f64() / mass + stab).ln()))
                    .collect::<Vec<T>>()
            })
            .collect();
        let mut st = BaryBuffers {
            log_a: be.upload(&log_a)?,
            weights: be.upload(&weights.iter().copied().collect::<Vec<T>>())?,
            zeros: be.filled(rows * m, T::zero())?,
            g: be.filled(rows * m, T::zero())?,
            f: be.filled(rows * n, T::zero())?,
            v: be.filled(rows * m, T::zero())?,
            bar: be.filled(problems * m, T::zero())?,
        };
        let eps = T::of(p.eps);
        let mut errors = vec![f64::INFINITY; problems];
        let mut iterations = 0;
        let ce = p.check_every;
        let mut tracker = crate::progress::Tracker::new(p.observer.as_ref(), p.history, max_iters);
        while iterations < max_iters {
            // Run up to and including the next checked iteration (index ≡ offset mod
            // check_every, or the last one) in one call, which a backend may fuse.
            // (in u128: check_every may be as large as usize allows)
            let ahead = (offset as u128 + ce as u128 - (iterations % ce) as u128) % ce as u128;
            let next = iterations.saturating_add(usize::try_from(ahead).unwrap_or(usize::MAX));
            let run = next.min(max_iters - 1) + 1 - iterations;
            be.bary_iterations(prepared, layout, eps, &mut st, run)?;
            iterations += run;
            errors = be
                .bary_spread(layout, &st.g, &st.v, eps)?
                .into_iter()
                .map(|e| e.f64())
                .collect();
            if let Some(k) = errors.iter().position(|e| e.is_nan()) {
                return Err(Error::Numerical(format!(
                    "the barycenter error of problem {k} is NaN at iteration {iterations} (eps = {})",
                    p.eps
                )));
            }
            let last =
                iterations == max_iters || (p.tol > 0.0 && errors.iter().all(|&e| e < p.tol));
            let worst = errors.iter().fold(0.0f64, |a, &e| a.max(e));
            tracker.report(iterations, p.eps, Some(worst), last);
            if last {
                break;
            }
            be.bary_potential(layout, &st.bar, &st.v, &mut st.g)?;
        }
        let bar = be.download(&st.bar)?;
        let inv_eps = 1.0 / p.eps;
        let history = tracker.history();
        let judged_tol = if p.tol > 0.0 {
            p.tol
        } else {
            BarycenterParams::default().tol
        };
        bar.chunks(m)
            .zip(&errors)
            .zip(&masses)
            .enumerate()
            .map(|(k, ((b, &error), &mass))| {
                let histogram: Array1<T> = b.iter().map(|&x| T::of((x.f64() * inv_eps).exp() * mass)).collect();
                if let Some(x) = histogram.iter().position(|h| !h.is_finite()) {
                    return Err(Error::Numerical(format!(
                        "barycenter {k} has a non-finite value at bin {x} (eps = {} may be too small for {})",
                        p.eps,
                        T::NAME
                    )));
                }
                Ok(BarycenterResult { histogram, iterations, error, converged: error < judged_tol, history: history.clone() })
            })
            .collect()
    }
}

/// Relative tolerance on the inputs' total masses: loose enough for histograms normalised
/// in float32 and stored as float64, tight enough to catch unnormalised inputs.
const INPUT_MASS_TOL: f64 = 1e-4;

/// Checks the input histograms and the weights.
/// Inputs of unequal masses are refused unless `equal_masses` is false (unbalanced).
fn validate_inputs<T: Real>(
    histograms: &ArrayView3<'_, T>,
    weights: &ArrayView2<'_, T>,
    equal_masses: bool,
) -> Result<()> {
    let (problems, inputs, n) = histograms.dim();
    if problems == 0 || inputs == 0 || n == 0 {
        return Err(Error::Empty {
            arg: "histograms".into(),
            detail: format!("shape {problems}×{inputs}×{n}"),
        });
    }
    for (p, h) in histograms.outer_iter().enumerate() {
        let masses = check_histograms("histograms", &h)?;
        if !equal_masses {
            continue;
        }
        for (k, &mass) in masses.iter().enumerate().skip(1) {
            let rel = (mass - masses[0]).abs() / mass.max(masses[0]);
            if rel > INPUT_MASS_TOL {
                let which = if problems > 1 {
                    format!("problem {p}: ")
                } else {
                    String::new()
                };
                return Err(Error::parameter(
                    "histograms",
                    format!("{which}input {k} has mass {mass}, input 0 has {}", masses[0]),
                    format!("every input of a balanced barycenter must carry the same mass (relative tolerance {INPUT_MASS_TOL:.0e}); relax the marginals (BarycenterProblem::relaxed) for inputs of different masses"),
                ));
            }
        }
    }
    if weights.dim() != (problems, inputs) {
        return Err(Error::shape(
            "weights",
            format!(
                "shape {:?}, expected one weight per input histogram ({problems}×{inputs})",
                weights.dim()
            ),
        ));
    }
    check_finite("weights", weights)?;
    let weight_tol = T::MASS_TOL.max(1e-6);
    for (p, w) in weights.outer_iter().enumerate() {
        if let Some(k) = w.iter().position(|&x| x < T::zero()) {
            return Err(Error::parameter(
                "weights",
                w[k],
                format!("weight {k} is negative; weights must be ≥ 0"),
            ));
        }
        let total: f64 = w.iter().map(|x| x.f64()).sum();
        if (total - 1.0).abs() > weight_tol {
            let which = if problems > 1 {
                format!(" (problem {p})")
            } else {
                String::new()
            };
            return Err(Error::parameter(
                "weights",
                format!("sum {total}{which}"),
                format!("weights must sum to 1 (tolerance {weight_tol:.0e})"),
            ));
        }
    }
    Ok(())
}

/// Checks a barycenter's cost (a dense matrix or a grid, finite, non-empty); returns `(n, m)`.
/// Checks the cost; returns its rows, columns and largest |entry| (dense costs are checked
/// finite in that pass).
fn validate_cost<T: Real>(cost: &CostSource<'_, T>) -> Result<(usize, usize, f64)> {
    let dims = cost.dims();
    match cost {
        CostSource::Dense(_) | CostSource::Grid(_) => {}
        _ => {
            return Err(Error::shape(
                "cost",
                "a barycenter needs one cost shared by its inputs (a dense n×m matrix or a grid)",
            ))
        }
    }
    let max_abs_cost = crate::cost::max_abs_cost(cost)?;
    if dims.n == 0 || dims.m == 0 {
        return Err(Error::Empty {
            arg: "cost".into(),
            detail: format!("{}×{}", dims.n, dims.m),
        });
    }
    Ok((dims.n, dims.m, max_abs_cost))
}

/// Barycenter of the rows of `histograms` (`K×n`) with `weights` (`K`) at regularisation
/// `eps` on the CPU with default [`BarycenterParams`], POT's
/// `ot.bregman.barycenter(A, M, reg, weights, method="sinkhorn_log")` (`A` transposed).
/// `cost` is a dense `n×m` matrix or a [`GridCost`]; batches, parameters, other backends and
/// unbalanced barycenters: [`BarycenterSolver`].
///
/// ```
/// use logot::{barycenter, GridCost};
/// use logot::ndarray::{array, Array2};
/// // Two 1-D bumps on an 11-point grid; their barycenter sits half-way.
/// let mut h = Array2::<f64>::zeros((2, 11));
/// h[[0, 2]] = 1.0;
/// h[[1, 8]] = 1.0;
/// let bar = barycenter(h.view(), array![0.5, 0.5].view(), GridCost::new(&[11])?, 1e-3)?;
/// assert!(bar.histogram[5] > 0.95 && bar.converged);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn barycenter<'a, T: Real>(
    histograms: ArrayView2<'a, T>,
    weights: ArrayView1<'a, T>,
    cost: impl Into<CostSource<'a, T>>,
    eps: T,
) -> Result<BarycenterResult<T>> {
    let cost = cost.into();
    let problem = BarycenterProblem::new(histograms, weights)?;
    let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(eps.f64()));
    only(on_cpu_pool(|| solver.solve(&problem, cost))?)
}

/// The one barycenter of a batch of one problem.
fn only<T: Real>(mut all: Vec<BarycenterResult<T>>) -> Result<BarycenterResult<T>> {
    all.pop()
        .ok_or_else(|| Error::Numerical("no barycenter was computed".into()))
}

/// Run `work` on a thread of rayon's global pool, so that the kernels' parallel loops
/// inside it fork and join among the pool's threads instead of handing every call over
/// from the caller's thread (which costs a wake-up and a sleep per kernel).
pub(crate) fn on_cpu_pool<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| work())
}

/// Barycenter of `K` images (or 1-D signals, or 3-D volumes) on the unit grid at
/// regularisation `eps` on the CPU with default [`BarycenterParams`], POT's
/// `convolutional_barycenter2d(A, reg, weights, method="sinkhorn_log")`: `images` is
/// `K×N_0[×N_1[×N_2]]` and the result has the shape of one image. With a
/// [`BarycenterSolver`]: the images flattened to `K×N` against
/// `GridCost::new(&[N_0, N_1, …])`.
///
/// ```
/// use logot::grid_barycenter;
/// use logot::ndarray::{array, Array3};
/// // Two one-pixel images of 9×9 at opposite corners: the barycenter is the centre pixel.
/// let mut images = Array3::<f64>::zeros((2, 9, 9));
/// images[[0, 0, 0]] = 1.0;
/// images[[1, 8, 8]] = 1.0;
/// let bar = grid_barycenter(images.view(), array![0.5, 0.5].view(), 1e-3)?;
/// assert_eq!(bar.histogram.dim(), (9, 9));
/// assert!(bar.histogram[[4, 4]] > 0.95);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn grid_barycenter<T: Real, D: RemoveAxis>(
    images: ArrayView<'_, T, D>,
    weights: ArrayView1<'_, T>,
    eps: T,
) -> Result<BarycenterResult<T, D::Smaller>> {
    let shape = images.shape();
    if !(2..=4).contains(&shape.len()) {
        return Err(Error::shape(
            "images",
            format!("shape {shape:?}: expected K×N, K×N×M or K×N×M×L"),
        ));
    }
    let grid = GridCost::new(&shape[1..])?;
    let (k, n) = (shape[0], grid.len());
    let flat: Vec<T> = images.iter().copied().collect();
    let flat =
        ndarray::Array2::from_shape_vec((k, n), flat).map_err(|e| Error::shape("images", e))?;
    let problem = BarycenterProblem::new(flat.view(), weights)?;
    let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(eps.f64()));
    let bar = only(on_cpu_pool(|| solver.solve(&problem, grid))?)?;
    let image_dim = images.raw_dim().remove_axis(Axis(0));
    let histogram = Array::from_shape_vec(image_dim, bar.histogram.to_vec())
        .map_err(|e| Error::shape("images", e))?;
    Ok(BarycenterResult {
        histogram,
        iterations: bar.iterations,
        error: bar.error,
        converged: bar.converged,
        history: bar.history,
    })
}
