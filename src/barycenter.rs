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
//! **Unbalanced** ([`BarycenterParams::relaxation`], POT's
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

use crate::backend::{
    Backend, BaryBuffers, BaryLayout, BarycenterKernels, CostSource, GridCost, Side,
};
use crate::validate::{check_eps, check_finite, check_histograms};
use crate::{CpuBackend, Error, Real, Relaxation, Result};
use ndarray::{
    Array, Array1, ArrayView, ArrayView1, ArrayView2, ArrayView3, Axis, Dimension, Ix1, RemoveAxis,
};

/// Parameters of the barycenter loop. `Default` follows POT (`stopThr = 1e-4`, error
/// checked every 10 iterations) with `eps = 0.01`.
#[derive(Clone, Debug)]
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
    /// Keep the error of every check in [`Barycenter::history`] (POT's `log=True`).
    pub history: bool,
    /// Relax the couplings' marginals to KL penalties: the unbalanced barycenter (POT's
    /// `ot.unbalanced.barycenter_unbalanced(A, M, reg, reg_m, method="sinkhorn")`, whose
    /// scalar `reg_m` is [`Relaxation::kl`]). `rho_mu` weighs `KL(P_k·1 ‖ a_k)` (the inputs'
    /// side), `rho_nu` weighs `KL(P_kᵀ·1 ‖ b)` (the barycenter's side); `∞` keeps that side
    /// exact. `None` (or both infinite) is the balanced barycenter, which needs inputs of
    /// equal mass. See the [module docs](self) for the iteration and the reported error.
    pub relaxation: Option<Relaxation>,
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
            relaxation: None,
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
    /// Exactly `iters` iterations, no early stop (the error is still measured at the end).
    pub fn fixed_iterations(eps: f64, iters: usize) -> Self {
        BarycenterParams {
            eps,
            max_iters: Some(iters),
            tol: 0.0,
            ..Default::default()
        }
    }
    /// These parameters with the couplings' marginals relaxed: the unbalanced barycenter.
    ///
    /// ```
    /// use logot::{barycenter, BarycenterParams, Relaxation};
    /// use ndarray::{array, Array2};
    /// // Inputs of unequal masses (1 and 3) are accepted once the marginals are relaxed.
    /// let x = [0.0, 0.25, 0.5, 0.75, 1.0];
    /// let cost = Array2::from_shape_fn((5, 5), |(i, j)| (x[i] - x[j]) * (x[i] - x[j]));
    /// let inputs = array![[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 3.0]];
    /// let params = BarycenterParams::new(0.01).with_relaxation(Relaxation::kl(1.0));
    /// let bar = barycenter(inputs.view(), array![0.5, 0.5].view(), cost.view(), &params)?;
    /// assert!(bar.converged);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn with_relaxation(self, relaxation: Relaxation) -> Self {
        BarycenterParams {
            relaxation: Some(relaxation),
            ..self
        }
    }

    /// The relaxation when at least one side is relaxed (`None`: balanced).
    fn unbalanced(&self) -> Option<Relaxation> {
        self.relaxation.filter(|r| !r.is_balanced())
    }

    fn validate(&self) -> Result<()> {
        check_eps("eps", self.eps)?;
        if let Some(r) = &self.relaxation {
            r.validate()?;
        }
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

/// A computed barycenter and how the loop ended.
#[derive(Clone, Debug)]
pub struct Barycenter<T, D: Dimension = Ix1> {
    /// The barycenter (`m` bins; for [`grid_barycenter`], an image of the grid's shape).
    pub histogram: Array<T, D>,
    /// Iterations run.
    pub iterations: usize,
    /// POT's error `Σ_x std_k exp(G_k + log K(u_k))` of the returned barycenter (measured
    /// after the last iteration run), relative to the inputs' mass (for inputs of mass 1,
    /// POT's value). Unbalanced ([`BarycenterParams::relaxation`]): the largest relative
    /// violation of the couplings' optimality conditions relative to each coupling's mass,
    /// `max_k ‖P_k·1 − a_k ⊙ exp(−f_k/ρ_μ)‖₁ / Σ P_k` (the [module docs](self)).
    pub error: f64,
    /// `error < tol`, with POT's default 1e-4 in place of `tol = 0`.
    pub converged: bool,
    /// The largest error over the batch at every check, when asked for
    /// ([`BarycenterParams::history`]); empty otherwise.
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

/// Computes barycenters on a chosen backend.
///
/// On the CPU, the top-level [`barycenter`], [`barycenter_batch`] and [`grid_barycenter`]
/// also run the loop on a rayon worker thread, which saves a thread hand-off per kernel
/// (noticeable on small problems); do the same with `rayon::scope(|_| solver.solve(..))`.
///
/// ```
/// use logot::{BarycenterParams, BarycenterSolver, CpuBackend};
/// use ndarray::{array, Array2};
/// let x = [0.0, 0.25, 0.5, 0.75, 1.0];
/// let cost = Array2::from_shape_fn((5, 5), |(i, j)| (x[i] - x[j]) * (x[i] - x[j]));
/// let inputs = array![[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]];
/// let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(1e-3));
/// let bar = solver.solve(inputs.view(), array![0.5, 0.5].view(), cost.view())?;
/// assert!(bar.histogram[2] > 0.99); // the midpoint
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

    /// Barycenter of the `K` rows of `histograms` (`K×n`) with `weights` (`K`, non-negative,
    /// summing to 1) for a cost with `n` rows; the barycenter has one bin per cost column:
    /// `b = argmin Σ_k w_k OT_ε(a_k, b)`.
    ///
    /// ```
    /// use logot::{BarycenterParams, BarycenterSolver, CpuBackend, GridCost};
    /// use ndarray::{array, Array2};
    /// // Diracs at 0.1 and 0.9 on a 1-D grid of 21 points, weights (0.75, 0.25): the
    /// // barycenter sits at 0.75·0.1 + 0.25·0.9 = 0.3 (bin 6).
    /// let mut h = Array2::<f64>::zeros((2, 21));
    /// h[[0, 2]] = 1.0;
    /// h[[1, 18]] = 1.0;
    /// let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(1e-4));
    /// let bar = solver.solve(h.view(), array![0.75, 0.25].view(), GridCost::new(&[21])?)?;
    /// assert!(bar.converged && bar.histogram[6] > 0.99, "{:?}", bar.histogram);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn solve<'a, T: Real>(
        &self,
        histograms: ArrayView2<'a, T>,
        weights: ArrayView1<'a, T>,
        cost: impl Into<CostSource<'a, T>>,
    ) -> Result<Barycenter<T>>
    where
        B: BarycenterKernels<T>,
    {
        only(self.solve_batch(
            histograms.insert_axis(Axis(0)),
            weights.insert_axis(Axis(0)),
            cost,
        )?)
    }

    /// `P` independent barycenter problems against one shared cost: `histograms` is
    /// `P×K×n`, `weights` is `P×K`. All problems run together (one batched sinkstep of
    /// `P·K` rows) and stop when every problem's error is below `tol`.
    ///
    /// ```
    /// use logot::{BarycenterParams, BarycenterSolver, CpuBackend, GridCost};
    /// use ndarray::{Array2, Array3};
    /// // The same two Diracs (bins 2 and 18 of 21) with weights (1 − t, t): the barycenter
    /// // walks along the segment, bin 2 + 16t (displacement interpolation).
    /// let h = Array3::from_shape_fn((3, 2, 21), |(_, k, i)| if i == [2, 18][k] { 1.0 } else { 0.0 });
    /// let w = Array2::from_shape_vec((3, 2), vec![1.0, 0.0, 0.5, 0.5, 0.0, 1.0]).unwrap();
    /// let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(1e-4));
    /// let bars = solver.solve_batch(h.view(), w.view(), GridCost::new(&[21])?)?;
    /// for (bar, bin) in bars.iter().zip([2, 10, 18]) {
    ///     assert!(bar.histogram[bin] > 0.99);
    /// }
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn solve_batch<'a, T: Real>(
        &self,
        histograms: ArrayView3<'a, T>,
        weights: ArrayView2<'a, T>,
        cost: impl Into<CostSource<'a, T>>,
    ) -> Result<Vec<Barycenter<T>>>
    where
        B: BarycenterKernels<T>,
    {
        self.params.validate()?;
        validate_inputs(&histograms, &weights, self.params.unbalanced().is_none())?;
        let prepared = self.prepare(cost)?;
        crate::validate::check_eps_resolution::<T>(self.params.eps, prepared.max_abs_cost)?;
        self.run(histograms, weights, &prepared)
    }

    /// Validate `cost` and prepare it on the backend once (on a GPU: upload it), for
    /// repeated solves with [`solve_prepared`](Self::solve_prepared) and
    /// [`solve_batch_prepared`](Self::solve_batch_prepared).
    ///
    /// ```
    /// use logot::{BarycenterParams, BarycenterSolver, CpuBackend};
    /// use ndarray::{array, Array2};
    /// let x = [0.0, 0.25, 0.5, 0.75, 1.0];
    /// let cost = Array2::from_shape_fn((5, 5), |(i, j)| (x[i] - x[j]) * (x[i] - x[j]));
    /// let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(1e-3));
    /// let prepared = solver.prepare(cost.view())?;
    /// for t in [0.25, 0.5, 0.75] {
    ///     let inputs = array![[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]];
    ///     let bar = solver.solve_prepared(inputs.view(), array![1.0 - t, t].view(), &prepared)?;
    ///     assert!(bar.histogram[(4.0 * t) as usize] > 0.99);
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

    /// [`solve`](Self::solve) against a cost from [`prepare`](Self::prepare).
    ///
    /// ```
    /// use logot::{BarycenterParams, BarycenterSolver, CpuBackend, GridCost};
    /// use ndarray::{array, Array2};
    /// let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(1e-4));
    /// let grid = solver.prepare::<f64>(GridCost::new(&[21])?)?;
    /// let mut h = Array2::<f64>::zeros((2, 21));
    /// h[[0, 2]] = 1.0;
    /// h[[1, 18]] = 1.0;
    /// let bar = solver.solve_prepared(h.view(), array![0.5, 0.5].view(), &grid)?;
    /// assert!(bar.converged && bar.histogram[10] > 0.99);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn solve_prepared<T: Real>(
        &self,
        histograms: ArrayView2<'_, T>,
        weights: ArrayView1<'_, T>,
        cost: &PreparedCost<T, B>,
    ) -> Result<Barycenter<T>>
    where
        B: BarycenterKernels<T>,
    {
        only(self.solve_batch_prepared(
            histograms.insert_axis(Axis(0)),
            weights.insert_axis(Axis(0)),
            cost,
        )?)
    }

    /// [`solve_batch`](Self::solve_batch) against a cost from [`prepare`](Self::prepare).
    ///
    /// ```
    /// use logot::{BarycenterParams, BarycenterSolver, CpuBackend, GridCost};
    /// use ndarray::{Array2, Array3};
    /// // Two Diracs (bins 2 and 18 of 21) at weights (1 − t, t) for t = 0, ½, 1.
    /// let h = Array3::from_shape_fn((3, 2, 21), |(_, k, i)| if i == [2, 18][k] { 1.0 } else { 0.0 });
    /// let w = Array2::from_shape_vec((3, 2), vec![1.0, 0.0, 0.5, 0.5, 0.0, 1.0]).unwrap();
    /// let solver = BarycenterSolver::new(CpuBackend, BarycenterParams::new(1e-4));
    /// let grid = solver.prepare::<f64>(GridCost::new(&[21])?)?;
    /// let bars = solver.solve_batch_prepared(h.view(), w.view(), &grid)?;
    /// assert!(bars.iter().zip([2, 10, 18]).all(|(b, bin)| b.histogram[bin] > 0.99));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn solve_batch_prepared<T: Real>(
        &self,
        histograms: ArrayView3<'_, T>,
        weights: ArrayView2<'_, T>,
        cost: &PreparedCost<T, B>,
    ) -> Result<Vec<Barycenter<T>>>
    where
        B: BarycenterKernels<T>,
    {
        self.params.validate()?;
        crate::validate::check_eps_resolution::<T>(self.params.eps, cost.max_abs_cost)?;
        validate_inputs(&histograms, &weights, self.params.unbalanced().is_none())?;
        self.run(histograms, weights, cost)
    }

    /// The loop, on validated inputs.
    fn run<T: Real>(
        &self,
        histograms: ArrayView3<'_, T>,
        weights: ArrayView2<'_, T>,
        cost: &PreparedCost<T, B>,
    ) -> Result<Vec<Barycenter<T>>>
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
        if let Some(r) = p.unbalanced() {
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
                Ok(Barycenter { histogram, iterations, error, converged: error < judged_tol, history: history.clone() })
            })
            .collect()
    }
}

impl<B> BarycenterSolver<B> {
    /// The unbalanced loop (see the module docs), on validated inputs; `r` has at least one
    /// finite side.
    fn run_unbalanced<T: Real>(
        &self,
        histograms: ArrayView3<'_, T>,
        weights: ArrayView2<'_, T>,
        cost: &PreparedCost<T, B>,
        r: Relaxation,
    ) -> Result<Vec<Barycenter<T>>>
    where
        B: BarycenterKernels<T>,
    {
        let p = &self.params;
        let (problems, inputs, n) = histograms.dim();
        let m = cost.m;
        let max_iters = p.max_iters.unwrap_or(if cost.grid { 10_000 } else { 1000 });
        let be = &self.backend;
        let layout = BaryLayout {
            problems,
            inputs,
            m,
        };
        let rows = problems * inputs;
        // The inputs as they are (an unbalanced barycenter does not scale with the inputs'
        // mass), log 0 = −∞ on empty bins.
        let a: Vec<f64> = histograms.iter().map(|x| x.f64()).collect();
        let log_a: Vec<T> = a.iter().map(|&x| T::of(x.ln())).collect();
        // The iteration's fixed point is optimal for weights summing to 1: normalise them.
        let w: Vec<T> = weights
            .outer_iter()
            .flat_map(|w| {
                let total: f64 = w.iter().map(|x| x.f64()).sum();
                w.iter()
                    .map(move |x| T::of(x.f64() / total))
                    .collect::<Vec<T>>()
            })
            .collect();
        let eps = p.eps;
        let te = T::of(eps);
        let phi_a = crate::unbalanced::phi(r.rho_mu, eps);
        let phi_b = crate::unbalanced::phi(r.rho_nu, eps);
        // 1 − φ_b = ε·t
        let t = if r.rho_nu == f64::INFINITY {
            0.0
        } else {
            1.0 / (r.rho_nu + eps)
        };
        let prepared = &cost.cost;
        let log_a_buf = be.upload(&log_a)?;
        let w_buf = be.upload(&w)?;
        let zeros_n = be.filled(rows * n, T::zero())?;
        let zeros_m = if m == n {
            None
        } else {
            Some(be.filled(rows * m, T::zero())?)
        };
        let zeros_m = zeros_m.as_ref().unwrap_or(&zeros_n);
        let mut g = be.filled(rows * m, T::zero())?;
        let mut f = be.filled(rows * n, T::zero())?;
        let mut f_half = be.filled(rows * n, T::zero())?;
        let mut v = be.filled(rows * m, T::zero())?;
        let mut bar = be.filled(problems * m, T::zero())?;
        // f_half holds the balanced row half-step of the current g (computed for a check).
        let mut half_ready = false;
        let mut errors = vec![f64::INFINITY; problems];
        let mut iterations = 0;
        let mut tracker = crate::progress::Tracker::new(p.observer.as_ref(), p.history, max_iters);
        loop {
            // f_k = φ_a·(ε log a_k − ε log K e^{g_k/ε})
            if half_ready {
                std::mem::swap(&mut f, &mut f_half);
                half_ready = false;
            } else {
                be.sinkstep(prepared, Side::Row, te, &g, &log_a_buf, &mut f)?;
            }
            if phi_a < 1.0 {
                be.relax(&mut f, &zeros_n, te, T::of(phi_a))?;
            }
            // v_k = −ε log Kᵀe^{f_k/ε}; ε log q = power mean; g_k = φ_b·(ε log q + v_k)
            be.sinkstep(prepared, Side::Col, te, &f, zeros_m, &mut v)?;
            be.bary_log_power_mean(layout, &w_buf, &v, &mut bar, T::of(t))?;
            be.bary_potential(layout, &bar, &v, &mut g)?;
            if phi_b < 1.0 {
                be.relax(&mut g, zeros_m, te, T::of(phi_b))?;
            }
            iterations += 1;
            let last_iter = iterations == max_iters;
            if !(last_iter || iterations % p.check_every == 0) {
                continue;
            }
            // The couplings P_k = diag(e^{f_k/ε})·K·diag(e^{g_k/ε}) meet their barycenter-side
            // conditions by construction; measure the inputs' side.
            be.sinkstep(prepared, Side::Row, te, &g, &log_a_buf, &mut f_half)?;
            half_ready = true;
            errors = input_side_residuals(
                inputs,
                n,
                &a,
                &be.download(&f)?,
                &be.download(&f_half)?,
                eps,
                r.rho_mu,
            );
            if let Some(k) = errors.iter().position(|e| e.is_nan()) {
                return Err(Error::Numerical(format!(
                    "the barycenter error of problem {k} is NaN at iteration {iterations} (eps = {} may be too small for {})",
                    p.eps,
                    T::NAME
                )));
            }
            let last = last_iter || (p.tol > 0.0 && errors.iter().all(|&e| e < p.tol));
            let worst = errors.iter().fold(0.0f64, |a, &e| a.max(e));
            tracker.report(iterations, p.eps, Some(worst), last);
            if last {
                break;
            }
        }
        let bar = be.download(&bar)?;
        let history = tracker.history();
        let judged_tol = if p.tol > 0.0 {
            p.tol
        } else {
            BarycenterParams::default().tol
        };
        bar.chunks(m)
            .zip(&errors)
            .enumerate()
            .map(|(k, (b, &error))| {
                let histogram: Array1<T> = b.iter().map(|&x| T::of((x.f64() / eps).exp())).collect();
                if let Some(x) = histogram.iter().position(|h| !h.is_finite()) {
                    return Err(Error::Numerical(format!(
                        "barycenter {k} has a non-finite value at bin {x} (eps = {} may be too small for {})",
                        p.eps,
                        T::NAME
                    )));
                }
                Ok(Barycenter { histogram, iterations, error, converged: error < judged_tol, history: history.clone() })
            })
            .collect()
    }
}

/// Per problem, the largest relative violation over its `inputs` couplings of the
/// inputs'-side optimality condition `P_k·1 = a_k ⊙ exp(−f_k/ρ)` (`= a_k` for `ρ = ∞`):
/// `max_k Σ_i a_ki·|exp((f_ki − h_ki)/ε) − exp(−f_ki/ρ)| / Σ_i a_ki·exp((f_ki − h_ki)/ε)`,
/// where `h` is the balanced row half-step of `g` (so `a·exp((f − h)/ε) = P·1`, and the
/// denominator is the coupling's mass), in f64.
fn input_side_residuals<T: Real>(
    inputs: usize,
    n: usize,
    a: &[f64],
    f: &[T],
    half: &[T],
    eps: f64,
    rho: f64,
) -> Vec<f64> {
    let per_input: Vec<f64> = a
        .chunks(n)
        .zip(f.chunks(n))
        .zip(half.chunks(n))
        .map(|((a, f), h)| {
            let (mut s, mut mass) = (0.0f64, 0.0f64);
            for i in 0..n {
                if a[i] > 0.0 {
                    let fi = f[i].f64();
                    let got = ((fi - h[i].f64()) / eps).exp();
                    let want = if rho == f64::INFINITY {
                        1.0
                    } else {
                        (-fi / rho).exp()
                    };
                    s += a[i] * (got - want).abs();
                    mass += a[i] * got;
                }
            }
            // A coupling whose mass underflowed to 0 is judged by its violation alone.
            if mass > 0.0 {
                s / mass
            } else if s == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        })
        .collect();
    per_input
        .chunks(inputs)
        .map(|r| {
            r.iter().fold(0.0f64, |a, &e| {
                if a.is_nan() || e.is_nan() {
                    f64::NAN
                } else {
                    a.max(e)
                }
            })
        })
        .collect()
}

/// Relative tolerance on the inputs' total masses: loose enough for histograms normalised
/// in float32 and stored as float64, tight enough to catch unnormalised inputs.
const INPUT_MASS_TOL: f64 = 1e-4;

/// The one barycenter of a batch of one problem.
fn only<T: Real>(mut all: Vec<Barycenter<T>>) -> Result<Barycenter<T>> {
    all.pop()
        .ok_or_else(|| Error::Numerical("no barycenter was computed".into()))
}

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
                    format!("every input of a balanced barycenter must carry the same mass (relative tolerance {INPUT_MASS_TOL:.0e}); relax the marginals (BarycenterParams::relaxation) for inputs of different masses"),
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
    let max_abs_cost = crate::validate::max_abs_cost(cost)?;
    if dims.n == 0 || dims.m == 0 {
        return Err(Error::Empty {
            arg: "cost".into(),
            detail: format!("{}×{}", dims.n, dims.m),
        });
    }
    Ok((dims.n, dims.m, max_abs_cost))
}

/// Barycenter of the rows of `histograms` (`K×n`) with `weights` on the CPU. `cost` is a
/// dense `n×m` matrix (`ArrayView2`) or a [`GridCost`].
///
/// ```
/// use logot::{barycenter, BarycenterParams, GridCost};
/// use ndarray::{array, Array2};
/// // Two 1-D bumps on an 11-point grid; their barycenter sits half-way.
/// let mut h = Array2::<f64>::zeros((2, 11));
/// h[[0, 2]] = 1.0;
/// h[[1, 8]] = 1.0;
/// let grid = GridCost::new(&[11])?;
/// let bar = barycenter(h.view(), array![0.5, 0.5].view(), grid, &BarycenterParams::new(1e-3))?;
/// assert!(bar.histogram[5] > 0.95 && bar.converged);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn barycenter<'a, T: Real>(
    histograms: ArrayView2<'a, T>,
    weights: ArrayView1<'a, T>,
    cost: impl Into<CostSource<'a, T>>,
    params: &BarycenterParams,
) -> Result<Barycenter<T>> {
    let cost = cost.into();
    on_cpu_pool(|| {
        BarycenterSolver::new(CpuBackend, params.clone()).solve(histograms, weights, cost)
    })
}

/// Run `work` on a thread of rayon's global pool, so that the kernels' parallel loops
/// inside it fork and join among the pool's threads instead of handing every call over
/// from the caller's thread (which costs a wake-up and a sleep per kernel).
pub(crate) fn on_cpu_pool<R: Send>(work: impl FnOnce() -> R + Send) -> R {
    rayon::scope(|_| work())
}

/// `P` barycenter problems at once on the CPU (`histograms`: `P×K×n`, `weights`: `P×K`),
/// e.g. one set of inputs with several weight vectors.
///
/// ```
/// use ndarray::{array, Array2, Array3};
/// // A dense cost on 3 points {0, 1, 2}: the weights pick the barycenter's location.
/// let x = [0.0f64, 1.0, 2.0];
/// let cost = Array2::from_shape_fn((3, 3), |(i, j)| (x[i] - x[j]).powi(2));
/// let h = Array3::from_shape_fn((2, 2, 3), |(_, k, i)| if i == 2 * k { 1.0 } else { 0.0 });
/// let w = array![[0.5, 0.5], [1.0, 0.0]];
/// let params = logot::BarycenterParams::new(0.01);
/// let bars = logot::barycenter_batch(h.view(), w.view(), cost.view(), &params)?;
/// assert!(bars[0].histogram[1] > 0.99 && bars[1].histogram[0] > 0.99);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn barycenter_batch<'a, T: Real>(
    histograms: ArrayView3<'a, T>,
    weights: ArrayView2<'a, T>,
    cost: impl Into<CostSource<'a, T>>,
    params: &BarycenterParams,
) -> Result<Vec<Barycenter<T>>> {
    let cost = cost.into();
    on_cpu_pool(|| {
        BarycenterSolver::new(CpuBackend, params.clone()).solve_batch(histograms, weights, cost)
    })
}

/// Barycenter of `K` images (or 1-D signals, or 3-D volumes) on the unit grid, POT's
/// `convolutional_barycenter2d(A, reg, weights, method="sinkhorn_log")`: `images` is
/// `K×N_0[×N_1[×N_2]]` and the result has the shape of one image.
///
/// ```
/// use logot::{grid_barycenter, BarycenterParams};
/// use ndarray::{array, Array3};
/// // Two one-pixel images of 9×9 at opposite corners: the barycenter is the centre pixel.
/// let mut images = Array3::<f64>::zeros((2, 9, 9));
/// images[[0, 0, 0]] = 1.0;
/// images[[1, 8, 8]] = 1.0;
/// let bar = grid_barycenter(images.view(), array![0.5, 0.5].view(), &BarycenterParams::new(1e-3))?;
/// assert_eq!(bar.histogram.dim(), (9, 9));
/// assert!(bar.histogram[[4, 4]] > 0.95);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn grid_barycenter<T: Real, D: RemoveAxis>(
    images: ArrayView<'_, T, D>,
    weights: ArrayView1<'_, T>,
    params: &BarycenterParams,
) -> Result<Barycenter<T, D::Smaller>> {
    on_cpu_pool(|| grid_barycenter_on(&CpuBackend, images, weights, params))
}

/// [`grid_barycenter`] on a chosen backend.
///
/// ```
/// use logot::{grid_barycenter_on, BarycenterParams, CpuBackend};
/// use ndarray::{array, Array2};
/// // 1-D signals (K×N): two Diracs at bins 1 and 7 of 9, weights (0.5, 0.5).
/// let h = Array2::from_shape_fn((2, 9), |(k, i)| if i == [1, 7][k] { 1.0 } else { 0.0 });
/// let bar = grid_barycenter_on(&CpuBackend, h.view(), array![0.5, 0.5].view(), &BarycenterParams::new(1e-3))?;
/// assert!(bar.histogram[4] > 0.95);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn grid_barycenter_on<T: Real, D: RemoveAxis, B: BarycenterKernels<T> + Clone>(
    backend: &B,
    images: ArrayView<'_, T, D>,
    weights: ArrayView1<'_, T>,
    params: &BarycenterParams,
) -> Result<Barycenter<T, D::Smaller>> {
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
    let bar =
        BarycenterSolver::new(backend.clone(), params.clone()).solve(flat.view(), weights, grid)?;
    let image_dim = images.raw_dim().remove_axis(Axis(0));
    let histogram = Array::from_shape_vec(image_dim, bar.histogram.to_vec())
        .map_err(|e| Error::shape("images", e))?;
    Ok(Barycenter {
        histogram,
        iterations: bar.iterations,
        error: bar.error,
        converged: bar.converged,
        history: bar.history,
    })
}
