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
    pub tol: Option<f64>,
    /// Check convergence every this many iterations (the only host read-back in the loop).
    pub check_every: usize,
    /// Start from these potentials (`f`: B×n, `g`: B×m) instead of zeros.
    pub warm_start: Option<WarmStart>,
    /// Anneal ε geometrically from a large value down to `eps` before the main loop.
    pub eps_scaling: Option<EpsScaling>,
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
    /// assert!(!r.convergence.converged); // no tolerance was asked for
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

/// How the solver ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Convergence {
    /// Iterations run (ε-scaling stages included).
    pub iterations: usize,
    /// Largest marginal error over the batch, `max_b ‖P_bᵀ1 − ν_b‖₁`, of the returned plan.
    pub marginal_error: f64,
    /// The tolerance that was asked for.
    pub tol: f64,
    /// `marginal_error ≤ tol` (with `tol > 0`): the solver stopped because it converged.
    pub converged: bool,
}

/// A solved batch of entropic OT problems.
#[derive(Clone, Debug)]
pub struct SinkhornResult<T> {
    /// Source potentials `f = ε log u`, `B×n` (−∞ on zero-mass bins).
    pub f: Array2<T>,
    /// Target potentials `g = ε log v`, `B×m`.
    pub g: Array2<T>,
    /// Transport cost `⟨P_b, C_b⟩` of each problem (POT's `sinkhorn2` value).
    pub distance: Array1<T>,
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
    /// Largest |cost|, computed once here for the ε resolution check of every solve.
    max_abs_cost: f64,
}

impl<'a, T: Real> Problem<'a, T> {
    /// One problem: `μ` (n), `ν` (m), cost `C` (n×m). Invalid input is an error naming the
    /// argument: shapes, NaN/∞, negative or unequal masses, empty arrays.
    ///
    /// ```
    /// use logot::Problem;
    /// use ndarray::array;
    /// let cost = array![[0.0, 1.0], [1.0, 0.0]];
    /// assert!(Problem::new(array![0.5, 0.5].view(), array![0.3, 0.7].view(), cost.view()).is_ok());
    /// let err = Problem::new(array![0.5, 0.5].view(), array![0.3, 0.3].view(), cost.view()).unwrap_err();
    /// assert!(matches!(err, logot::Error::UnequalMass { .. }), "{err}");
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
            max_abs_cost: 0.0,
        };
        p.max_abs_cost = p.validate()?;
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

    /// Checks every input; returns the largest |cost|.
    fn validate(&self) -> Result<f64> {
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
                return Err(Error::shape(
                    "cost",
                    format!("holds {bc} matrices but there are {b} problems"),
                ));
            }
        }
        // Dense costs are checked finite here; point clouds by `PointCloudCost`'s
        // constructors (finite, matching dimensions); grids are finite by construction.
        let max_abs_cost = crate::validate::max_abs_cost(&self.cost)?;
        check_equal_mass::<T>(&mu_mass, &nu_mass)?;
        Ok(max_abs_cost)
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
    pub g: B::Buffer,
    pub convergence: Convergence,
    /// Transport costs when the solver already has them (from its final report).
    pub distance: Option<Vec<T>>,
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
        crate::validate::check_alloc::<T>("plan", &[b, n, m])?;
        let s = self.run(problem)?;
        let result = self.finish(problem, &s)?;
        let eps = T::of(self.params.eps);
        let plan = self
            .backend
            .download(&self.backend.plan(&s.cost, &s.f, &s.g, eps)?)?;
        let plan =
            Array3::from_shape_vec((b, n, m), plan).map_err(|e| Error::Numerical(e.to_string()))?;
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
            &s.cost,
            &s.f,
            &s.g,
            &s.convergence,
            s.distance.clone(),
        )
    }

    /// Distances on the device, then the potentials to the host.
    fn finish_parts<T: Real>(
        &self,
        (b, n, m): (usize, usize, usize),
        cost: &B::Cost,
        f: &B::Buffer,
        g: &B::Buffer,
        convergence: &Convergence,
        distance: Option<Vec<T>>,
    ) -> Result<SinkhornResult<T>>
    where
        B: Backend<T>,
    {
        let eps = T::of(self.params.eps);
        let distance = Array1::from(match distance {
            Some(d) => d,
            None => self.backend.transport_cost(cost, f, g, eps)?,
        });
        if let Some(k) = distance.iter().position(|d| !d.is_finite()) {
            return Err(Error::Numerical(format!(
                "the transport cost of problem {k} is {} (eps = {} may be too small for {})",
                distance[k],
                self.params.eps,
                T::NAME
            )));
        }
        let f = Array2::from_shape_vec((b, n), self.backend.download(f)?)
            .map_err(|e| Error::Numerical(e.to_string()))?;
        let g = Array2::from_shape_vec((b, m), self.backend.download(g)?)
            .map_err(|e| Error::Numerical(e.to_string()))?;
        Ok(SinkhornResult {
            f,
            g,
            distance,
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
        let (f, g, convergence, distance) = self.iterate_prepared(&prepared)?;
        Ok(Solved {
            cost: prepared.cost,
            f,
            g,
            convergence,
            distance,
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
        let max_abs_cost = problem.max_abs_cost;
        let cost = be.prepare_cost(&problem.cost)?;
        let host = |a: &ArrayView2<'_, T>| a.iter().copied().collect::<Vec<T>>();
        let log = |a: &ArrayView2<'_, T>| a.iter().map(|v| v.ln()).collect::<Vec<T>>();
        let mu = be.upload(&host(&problem.mu))?;
        let nu = be.upload(&host(&problem.nu))?;
        let log_mu = be.upload(&log(&problem.mu))?;
        let log_nu = be.upload(&log(&problem.nu))?;
        // Zero potentials, −∞ on zero-mass bins (so they take no part from the first
        // half-step on: the problem is exactly the one without those bins).
        let init = |a: &ArrayView2<'_, T>| {
            // None when every bin has mass: the backend fills zeros without an upload.
            a.iter().any(|&v| v <= T::zero()).then(|| {
                a.iter()
                    .map(|&v| {
                        if v > T::zero() {
                            T::zero()
                        } else {
                            T::neg_infinity()
                        }
                    })
                    .collect::<Vec<T>>()
            })
        };
        let (init_f, init_g) = (init(&problem.mu), init(&problem.nu));
        Ok(Prepared {
            cost,
            mu,
            nu,
            log_mu,
            log_nu,
            init_f,
            init_g,
            batch,
            n,
            m,
            max_abs_cost,
        })
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
        let (f, g, convergence, distance) = self.iterate_prepared(prepared)?;
        self.finish_parts(
            (prepared.batch, prepared.n, prepared.m),
            &prepared.cost,
            &f,
            &g,
            &convergence,
            distance,
        )
    }

    /// The solver loop on uploaded data; returns the potentials (still on the device).
    #[allow(clippy::type_complexity)]
    fn iterate_prepared<T: Real>(
        &self,
        pr: &Prepared<T, B>,
    ) -> Result<(B::Buffer, B::Buffer, Convergence, Option<Vec<T>>)>
    where
        B: Backend<T>,
    {
        let p = &self.params;
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
                let start = |init: &Option<Vec<T>>, len: usize| match init {
                    Some(v) => be.upload(v),
                    None => be.filled(len, T::zero()),
                };
                (start(&pr.init_f, batch * n)?, start(&pr.init_g, batch * m)?)
            }
            Some(w) => {
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
                if let Some(v) =
                    w.f.iter()
                        .chain(w.g.iter())
                        .find(|v| v.is_nan() || **v == f64::INFINITY)
                {
                    return Err(Error::NonFinite {
                        arg: "warm_start".into(),
                        index: "?".into(),
                        value: v.to_string(),
                    });
                }
                let to_t = |a: &Array2<f64>| a.iter().map(|&v| T::of(v)).collect::<Vec<T>>();
                (be.upload(&to_t(&w.f))?, be.upload(&to_t(&w.g))?)
            }
        };
        let mut pot = Potentials { f, g };
        let mut iterations = 0;
        if let Some(s) = &p.eps_scaling {
            for e in s.stages(p.eps) {
                be.iterate(cost, T::of(e), &marginals, &mut pot, s.iters_per_stage)?;
                iterations += s.iters_per_stage;
            }
        }
        let eps = T::of(p.eps);
        let tol = p.tol.unwrap_or(T::DEFAULT_TOL);
        // The half-step of a convergence check goes here (allocated at the first check).
        let mut g_next: Option<B::Buffer> = None;
        let mut err = f64::INFINITY;
        let mut converged = false;
        // Iteration `it` checks convergence (after its g half-step) when `tol > 0`,
        // `it > 0` and `it % check_every == 0`; the iterations between checks run as one
        // `iterate` call, which a backend may fuse.
        let mut it = 0;
        while it < p.max_iters {
            let next_check = if tol > 0.0 {
                (it / p.check_every + 1) * p.check_every
            } else {
                p.max_iters
            };
            let plain = next_check.min(p.max_iters) - it;
            be.iterate(cost, eps, &marginals, &mut pot, plain)?;
            it += plain;
            iterations += plain;
            if it >= p.max_iters {
                break;
            }
            let gn = match g_next.as_mut() {
                Some(b) => b,
                None => g_next.insert(be.filled(batch * m, T::zero())?),
            };
            be.sinkstep(cost, Side::Col, eps, &pot.f, log_nu, gn)?;
            err = max_error(be.marginal_error(batch, nu, &pot.g, gn, eps)?)?;
            if err <= tol {
                converged = true;
                break;
            }
            std::mem::swap(&mut pot.g, gn);
            be.sinkstep(cost, Side::Row, eps, &pot.g, log_mu, &mut pot.f)?;
            it += 1;
            iterations += 1;
        }
        let mut distance = None;
        if !converged {
            // Measure the returned plan (f, g): its column error and, in the same pass on
            // backends that can, its transport cost.
            drop(g_next);
            let (errs, costs) = be.column_error_and_cost(cost, &pot, &marginals, eps)?;
            err = max_error(errs)?;
            converged = tol > 0.0 && err <= tol;
            distance = Some(costs);
        }
        Ok((
            pot.f,
            pot.g,
            Convergence {
                iterations,
                marginal_error: err,
                tol,
                converged,
            },
            distance,
        ))
    }
}

/// A batch uploaded to a backend by [`Solver::prepare`]: the prepared cost, `ν`, `log μ`
/// and `log ν`, resident on the device.
pub struct Prepared<T: Real, B: Backend<T>> {
    cost: B::Cost,
    mu: B::Buffer,
    nu: B::Buffer,
    log_mu: B::Buffer,
    log_nu: B::Buffer,
    /// Starting potentials on the host (0, or −∞ on zero-mass bins); `None`: all 0.
    init_f: Option<Vec<T>>,
    init_g: Option<Vec<T>>,
    batch: usize,
    n: usize,
    m: usize,
    /// Largest |cost|, for the ε resolution check.
    max_abs_cost: f64,
}

impl<T: Real, B: Backend<T>> Prepared<T, B> {
    /// Number of problems, source points and target points.
    pub fn dims(&self) -> (usize, usize, usize) {
        (self.batch, self.n, self.m)
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

fn max_error<T: Real>(errs: Vec<T>) -> Result<f64> {
    let mut worst = 0.0f64;
    for (k, e) in errs.iter().enumerate() {
        let e = e.f64();
        if e.is_nan() {
            return Err(Error::Numerical(format!(
                "the marginal error of problem {k} is NaN"
            )));
        }
        worst = worst.max(e);
    }
    Ok(worst)
}
