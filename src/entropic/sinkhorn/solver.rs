//! [`SinkhornSolver`]: the loop (stages, convergence checks, the final report) and its
//! entry points for host arrays and for batches prepared on a backend.

use super::iteration::{iterate, relax_side, relaxed_report, warm_potentials};
use super::params::SinkhornParams;
use super::prepared::{buffer_histograms, DeviceStart, PreparedProblem, Solution};
use super::problem::{unbalanced, BufferCost, BufferProblem, CostOffsets, Problem, ProblemInput};
use super::report::{
    measure_plans, measure_relaxed_plans, Convergence, CouplingResult, ProblemReport,
    SinkhornResult,
};
use crate::backend::{Backend, Marginals, Potentials, Side};
use crate::entropic::unbalanced::Relaxation;
use crate::progress::Tracker;
use crate::validate::check_equal_mass;
use crate::{Error, Real, Result};
use ndarray::{Array2, Array3, ArrayView2, Axis};

/// Runs Sinkhorn on a chosen backend with chosen parameters: the control behind the
/// top-level functions ([`crate::wasserstein`], [`crate::coupling`], …).
///
/// Host arrays in and out: [`solve`](Self::solve), [`coupling`](Self::coupling) and the
/// gradients, each on a [`Problem`]. A batch solved many times, or held in a backend's
/// buffers (GPU memory, without a copy): [`prepare`](Self::prepare) it once, then
/// [`solve_prepared`](Self::solve_prepared) writes what its
/// [`BufferOutputs`](crate::BufferOutputs) ask for into the caller's buffers.
///
/// ```
/// use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
/// use logot::ndarray::array;
/// let mu = array![0.5f64, 0.5];
/// let nu = array![0.25, 0.75];
/// let cost = array![[0.0, 1.0], [1.0, 0.0]];
/// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05).tol(1e-12));
/// let res = solver.solve(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
/// assert!(res.convergence.converged);
/// assert!((res.distance[0] - 0.25).abs() < 1e-3); // 0.25 of mass must move, at cost 1
/// # Ok::<(), logot::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SinkhornSolver<B> {
    pub(super) backend: B,
    pub(super) params: SinkhornParams,
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

impl<B> SinkhornSolver<B> {
    /// A solver on `backend` with `params`.
    pub fn new(backend: B, params: SinkhornParams) -> Self {
        SinkhornSolver { backend, params }
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
    /// use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::array;
    /// let (mu, nu, cost) = (array![1.0f64, 0.0], array![0.0, 1.0], array![[0.0, 2.0], [2.0, 0.0]]);
    /// let r = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1)).solve(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
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

    /// As [`SinkhornSolver::solve`], and the plans `P_b` (`B×n×m`).
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::{array, Axis};
    /// let (mu, nu) = (array![0.25f64, 0.75], array![0.5, 0.5]);
    /// let cost = array![[0.0, 1.0], [1.0, 0.0]];
    /// let c = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05)).coupling(&Problem::new(mu.view(), nu.view(), cost.view())?)?;
    /// let plan = c.plan.index_axis(Axis(0), 0);
    /// assert!((plan.sum_axis(Axis(1)) - &mu).iter().all(|e| e.abs() < 1e-12)); // P·1 = μ
    /// assert!((plan.sum_axis(Axis(0)) - &nu).iter().all(|e| e.abs() < 1e-9)); // Pᵀ·1 = ν
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn coupling<T: Real>(&self, problem: &Problem<'_, T>) -> Result<CouplingResult<T>>
    where
        B: Backend<T>,
    {
        let (b, n, m) = (problem.batch_size(), problem.mu.ncols(), problem.nu.ncols());
        // Refused before solving: a plan that cannot be allocated, then a plan between point
        // clouds above the backends' limit.
        check_coupling_peak::<T>(&[b, n, m], self.backend.host_cost_bytes(&problem.cost))?;
        let prepared = self.prepare(problem)?;
        prepared.check_plan()?;
        let s = self.run_prepared(prepared)?;
        let mut result = self.finish(problem, &s)?;
        let eps = T::of(self.params.eps);
        let plan = self
            .backend
            .download_owned(self.backend.plan(&s.cost, &s.f, &s.g, eps)?)?;
        let plan =
            Array3::from_shape_vec((b, n, m), plan).map_err(|e| Error::Numerical(e.to_string()))?;
        // The report of the array handed back: its own marginals and cost, in f64.
        let relax = problem.unbalanced()?;
        let measured = match relax {
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
                    mass_gap: p.mass_gap,
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
        Ok(CouplingResult { plan, result })
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
        self.run_prepared(self.prepare(problem)?)
    }

    /// Iterate a prepared batch and leave the potentials on the device.
    fn run_prepared<T: Real>(&self, prepared: PreparedProblem<T, B>) -> Result<Solved<T, B>>
    where
        B: Backend<T>,
    {
        let (f, g, solution) = self.iterate_prepared(&prepared)?;
        Ok(Solved {
            f,
            g,
            convergence: solution.convergence,
            distance: solution.distance,
            objective: solution.objective,
            shift: prepared.shift,
            cost: prepared.cost,
        })
    }

    /// Put a batch on the backend once, to solve it with [`SinkhornSolver::solve_prepared`],
    /// possibly many times: a [`Problem`] of host arrays is uploaded (the cost prepared for
    /// the kernels, the marginals and their logarithms); a [`BufferProblem`] already on the
    /// backend is checked there (the checks and errors of [`Problem::new`], from one reduction
    /// per row, [`Backend::row_stats`]: only those numbers are read back, the buffers
    /// themselves only when an error must name an entry) and its `μ`, `ν` are kept; its
    /// cost is only read ([`Backend::prepare_dense_buffer`], [`Backend::prepare_cloud_buffer`]).
    ///
    /// ```
    /// use logot::{Backend, BufferOutputs, BufferProblem, CpuBackend, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::array;
    /// let (mu, nu, cost) = (array![0.5f64, 0.5], array![0.25, 0.75], array![[0.0, 1.0], [1.0, 0.0]]);
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05));
    /// let problem = Problem::new(mu.view(), nu.view(), cost.view())?;
    /// let host = solver.solve(&problem)?;
    /// // From host arrays, uploaded once: the same answer as a solve from the host arrays.
    /// let prepared = solver.prepare(&problem)?;
    /// assert_eq!(prepared.dims(), (1, 2, 2));
    /// assert_eq!(solver.solve_prepared(&prepared, BufferOutputs::new())?.distance, host.distance.to_vec());
    /// // From buffers already on the backend (on a GPU: the caller's device memory).
    /// let be = solver.backend();
    /// let (a, b, c) = (be.upload(mu.as_slice().unwrap())?, be.upload(nu.as_slice().unwrap())?, be.upload(cost.as_slice().unwrap())?);
    /// let prepared = solver.prepare(BufferProblem::dense(a, b, &c, (1, 2, 2), false))?;
    /// assert_eq!(solver.solve_prepared(&prepared, BufferOutputs::new())?.distance, host.distance.to_vec());
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn prepare<'p, 'a, T: Real>(
        &self,
        problem: impl Into<ProblemInput<'p, 'a, T, B::Buffer>>,
    ) -> Result<PreparedProblem<T, B>>
    where
        'a: 'p,
        B::Buffer: 'p,
        B: Backend<T>,
    {
        match problem.into() {
            ProblemInput::Host(p) => self.prepare_host(p),
            ProblemInput::Buffers(p) => self.prepare_buffers(p),
        }
    }

    /// [`SinkhornSolver::prepare`] for host arrays.
    fn prepare_host<T: Real>(&self, problem: &Problem<'_, T>) -> Result<PreparedProblem<T, B>>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let (batch, n) = problem.mu.dim();
        let m = problem.nu.ncols();
        let relaxation = problem.unbalanced()?;
        if relaxation.is_none() {
            check_equal_mass::<T>(&problem.mu_masses, &problem.masses)?;
        }
        let offsets = &problem.offsets.applied(relaxation.is_some());
        let cost = be.prepare_shifted_cost(&problem.cost, &offsets.shift)?;
        let host =
            |a: &ArrayView2<'_, T>| crate::alloc::collected("buffer", a.len(), a.iter().copied());
        let empty = |a: &ArrayView2<'_, T>| a.iter().any(|&v| v <= T::zero());
        let mut prepared = self.prepare_parts(
            cost,
            be.upload(&host(&problem.mu)?)?,
            be.upload(&host(&problem.nu)?)?,
            (batch, n, m),
            offsets,
            (problem.mu_masses.clone(), problem.masses.clone()),
            (empty(&problem.mu), empty(&problem.nu)),
            relaxation,
        )?;
        prepared.cloud = matches!(problem.cost, crate::CostSource::PointCloud(_));
        Ok(prepared)
    }

    /// The marginals' logarithms on the device, and the rest of a [`PreparedProblem`].
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
        relaxation: Option<Relaxation>,
    ) -> Result<PreparedProblem<T, B>>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let log_mu = be.ln(&mu)?;
        let log_nu = be.ln(&nu)?;
        Ok(PreparedProblem {
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
            relaxation,
            cloud: false,
        })
    }

    /// [`SinkhornSolver::prepare`] for a batch already on the backend.
    fn prepare_buffers<T: Real>(
        &self,
        problem: BufferProblem<'_, B::Buffer>,
    ) -> Result<PreparedProblem<T, B>>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let relaxation = unbalanced(problem.relaxation)?;
        let (batch, n, m) = problem.dims();
        let BufferProblem { mu, nu, cost, .. } = problem;
        let cloud = matches!(cost, BufferCost::Points { .. });
        let histograms = || -> Result<_> {
            let (mu_masses, empty_mu) = buffer_histograms(be, "mu", &mu, batch, n)?;
            let (masses, empty_nu) = buffer_histograms(be, "nu", &nu, batch, m)?;
            Ok(((mu_masses, masses), (empty_mu, empty_nu)))
        };
        let balanced = |(mu_masses, masses): &(Vec<f64>, Vec<f64>)| match relaxation {
            None => check_equal_mass::<T>(mu_masses, masses),
            Some(_) => Ok(()),
        };
        let (cost, offsets, masses, empty) = match cost {
            BufferCost::Dense { cost, batched, .. } => {
                let (masses, empty) = histograms()?;
                let offsets =
                    self.dense_buffer_offsets(cost, (batch, n, m), batched, relaxation.is_some())?;
                balanced(&masses)?;
                let dims = crate::backend::CostDims {
                    n,
                    m,
                    batch: batched.then_some(batch),
                };
                let cost = be.prepare_dense_buffer(cost, dims, &offsets.shift)?;
                (cost, offsets, masses, empty)
            }
            BufferCost::Points { x, y, layout } => {
                let (cost, max_cost) = be.prepare_cloud_buffer(x, y, layout)?;
                let (masses, empty) = histograms()?;
                if let Some(bc) = layout.batch.filter(|&bc| bc != batch) {
                    return Err(Error::shape(
                        "x",
                        format!("holds {bc} pairs of point clouds but there are {batch} problems"),
                    ));
                }
                balanced(&masses)?;
                let offsets = CostOffsets {
                    shift: Vec::new(),
                    max_abs: max_cost,
                    max_abs_raw: max_cost,
                };
                (cost, offsets, masses, empty)
            }
        };
        let mut prepared = self.prepare_parts(
            cost,
            mu,
            nu,
            (batch, n, m),
            &offsets,
            masses,
            empty,
            relaxation,
        )?;
        prepared.cloud = cloud;
        Ok(prepared)
    }

    /// The offsets of a dense cost on the backend (`batch` matrices `n×m` when `batched`,
    /// else one shared), with the checks of a host cost: its length, and finite entries
    /// (naming the first offending one from the buffer, downloaded only then); one reduction
    /// per matrix crosses to the host.
    fn dense_buffer_offsets<T: Real>(
        &self,
        cost: &B::Buffer,
        (batch, n, m): (usize, usize, usize),
        batched: bool,
        relaxed: bool,
    ) -> Result<CostOffsets>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let matrices = if batched { batch } else { 1 };
        let cost_len = be.len(cost);
        if cost_len != matrices * n * m {
            let shape = if batched {
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
            if batched {
                crate::validate::check_finite("cost", &view)?;
            } else {
                crate::validate::check_finite("cost", &view.index_axis(Axis(0), 0))?;
            }
        }
        Ok(CostOffsets::of_ranges(stats.iter().map(|s| (s.min, s.max)).collect()).applied(relaxed))
    }

    /// Replace the dense cost of a batch prepared from buffers ([`BufferProblem::dense`]) by
    /// `cost` of the same shape, keeping the marginals and the prepared cost's memory
    /// ([`Backend::refill_dense_buffer`]): the checks and offsets of
    /// [`SinkhornSolver::prepare`] for the new cost, from one reduction per matrix.
    pub(crate) fn refill_dense<T: Real>(
        &self,
        pr: &mut PreparedProblem<T, B>,
        cost: &B::Buffer,
    ) -> Result<()>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let batched = be.cost_dims(&pr.cost).batch.is_some();
        let offsets = self.dense_buffer_offsets(
            cost,
            (pr.batch, pr.n, pr.m),
            batched,
            pr.relaxation.is_some(),
        )?;
        be.refill_dense_buffer(&mut pr.cost, cost, &offsets.shift)?;
        pr.max_abs_cost = offsets.max_abs;
        pr.max_abs_raw = offsets.max_abs_raw;
        pr.shift = (0..pr.batch).map(|b| offsets.of_problem(b)).collect();
        Ok(())
    }

    /// Start potentials in the solver's units from potentials on the backend (`f`, and
    /// `g + g_shift` in the units of the cost as given): each problem's pair re-centred as
    /// a host warm start is (`f − k`, `g + k`, `k` the centre of `f`'s range when that range
    /// is finite; one reduction per problem crosses to the host) and `g` moved to this cost's
    /// offsets.
    fn device_start<T: Real>(
        &self,
        pr: &PreparedProblem<T, B>,
        start: DeviceStart<B::Buffer>,
    ) -> Result<(B::Buffer, B::Buffer)>
    where
        B: Backend<T>,
    {
        let be = &self.backend;
        let (batch, n, m) = (pr.batch, pr.n, pr.m);
        crate::backend::check_buffer_len("start.f", be.len(&start.f), batch * n)?;
        crate::backend::check_buffer_len("start.g", be.len(&start.g), batch * m)?;
        crate::backend::check_buffer_len("start.g_shift", start.g_shift.len(), batch)?;
        let k: Vec<f64> = if pr.relaxation.is_none() {
            be.row_stats(&start.f, batch)?
                .iter()
                .map(|s| match s.min.is_finite() && s.max.is_finite() {
                    true => 0.5 * s.min + 0.5 * s.max,
                    false => 0.0,
                })
                .collect()
        } else {
            // Unbalanced problems: `(f − k, g + k)` is another plan's pair, kept as given.
            vec![0.0; batch]
        };
        let df: Vec<f64> = k.iter().map(|k| -k).collect();
        let dg: Vec<f64> = (0..batch)
            .map(|b| k[b] + start.g_shift[b] - pr.shift[b])
            .collect();
        let (mut f, mut g) = (
            be.filled(batch * n, T::zero())?,
            be.filled(batch * m, T::zero())?,
        );
        be.offset_rows(&start.f, &df, &mut f)?;
        be.offset_rows(&start.g, &dg, &mut g)?;
        Ok((f, g))
    }

    /// Copy solved potentials into the caller's buffers, the offsets added to `g`.
    pub(crate) fn write_potentials<T: Real>(
        &self,
        prepared: &PreparedProblem<T, B>,
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

    /// The solver loop on uploaded data; returns the potentials (still on the device), the
    /// report of the plan they define, its transport costs (offsets included) and, for
    /// unbalanced problems, its objectives.
    pub(crate) fn iterate_prepared<T: Real>(
        &self,
        pr: &PreparedProblem<T, B>,
    ) -> Result<(B::Buffer, B::Buffer, Solution)>
    where
        B: Backend<T>,
    {
        self.iterate_prepared_from(pr, None)
    }

    /// [`SinkhornSolver::iterate_prepared`] started from potentials on the backend when
    /// `start` is given (in place of the parameters' warm start).
    pub(crate) fn iterate_prepared_from<T: Real>(
        &self,
        pr: &PreparedProblem<T, B>,
        start: Option<DeviceStart<B::Buffer>>,
    ) -> Result<(B::Buffer, B::Buffer, Solution)>
    where
        B: Backend<T>,
    {
        let p = &self.params;
        let relax = pr.relaxation;
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
        let (f, g) = match (start, &p.warm_start) {
            (Some(start), _) => self.device_start(pr, start)?,
            // Zero potentials, −∞ on zero-mass bins (so they take no part from the first
            // half-step on: the problem is exactly the one without those bins).
            (None, None) => {
                let start = |a: &B::Buffer, empty: bool, len: usize| match empty {
                    true => be.start_potential(a),
                    false => be.filled(len, T::zero()),
                };
                (
                    start(&pr.mu, pr.empty_mu, batch * n)?,
                    start(nu, pr.empty_nu, batch * m)?,
                )
            }
            (None, Some(w)) => {
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
                mass_gap: match relax {
                    Some(_) => 0.0,
                    None => (pr.mu_masses[k] - pr.masses[k]).abs(),
                },
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
        let solution = Solution {
            distance,
            objective: relaxed.map(|rel| rel.objectives),
            convergence,
        };
        Ok((pot.f, pot.g, solution))
    }
}

/// The host's peak in [`SinkhornSolver::coupling`] can be allocated: the plan (`dims` =
/// `B×n×m` values of `T`, handed back as the backend made it, [`Backend::download_owned`]) with
/// the prepared cost's host copies (`cost_bytes`, [`Backend::host_cost_bytes`]) held
/// alongside, probed as one block before the cost is prepared and anything solved
/// ([`crate::alloc::probe`]). Else [`Error::OutOfMemory`] naming the plan and the bytes.
pub(crate) fn check_coupling_peak<T>(dims: &[usize], cost_bytes: usize) -> Result<()> {
    crate::alloc::probe::<T>("plan", dims, cost_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuBackend, WarmStart};

    /// A prepared problem given a new cost (`refill_dense`) and started from potentials on
    /// the backend is the problem prepared afresh from that cost and warm-started from the
    /// same potentials on the host: the same offsets, and the same iterates.
    #[test]
    fn a_refilled_cost_and_a_device_start_equal_a_fresh_warm_start() {
        let be = CpuBackend;
        let (n, m) = (3, 4);
        let (mu, nu) = ([0.2f64, 0.5, 0.3], [0.1f64, 0.4, 0.3, 0.2]);
        let cost_a: Vec<f64> = (0..n * m).map(|k| ((k * 7) % 5) as f64 * 0.3).collect();
        let cost_b: Vec<f64> = (0..n * m)
            .map(|k| 2.0 + ((k * 3) % 7) as f64 * 0.2)
            .collect();
        let fixed = |iters| SinkhornParams::new(0.1).max_iters(iters).tol(0.0);
        let solver = SinkhornSolver::new(be, fixed(7));
        fn dense<'c>(
            be: CpuBackend,
            c: &'c Vec<f64>,
            mu: &[f64],
            nu: &[f64],
            n: usize,
            m: usize,
        ) -> BufferProblem<'c, Vec<f64>> {
            BufferProblem::dense(
                be.upload(mu).unwrap(),
                be.upload(nu).unwrap(),
                c,
                (1, n, m),
                false,
            )
        }
        let mut pr = solver.prepare(dense(be, &cost_a, &mu, &nu, n, m)).unwrap();
        let (f, g, _) = solver.iterate_prepared(&pr).unwrap();
        let shift_a = pr.shifts().to_vec();

        let solver = SinkhornSolver::new(be, fixed(5));
        solver.refill_dense(&mut pr, &cost_b).unwrap();
        let fresh = solver.prepare(dense(be, &cost_b, &mu, &nu, n, m)).unwrap();
        assert_eq!(pr.shifts(), fresh.shifts());
        assert_eq!(pr.max_abs_cost, fresh.max_abs_cost);
        assert_ne!(
            pr.shifts(),
            &shift_a[..],
            "the two costs need different offsets"
        );
        let warm = WarmStart::new(
            Array2::from_shape_vec((1, n), f.clone()).unwrap(),
            Array2::from_shape_vec((1, m), g.iter().map(|v| v + shift_a[0]).collect()).unwrap(),
        );
        let start = DeviceStart {
            f,
            g,
            g_shift: shift_a,
        };
        let (f1, g1, s1) = solver.iterate_prepared_from(&pr, Some(start)).unwrap();
        let host = SinkhornSolver::new(be, fixed(5).warm_start(warm));
        let (f2, g2, s2) = host.iterate_prepared(&fresh).unwrap();
        let close = |a: &[f64], b: &[f64]| {
            a.iter()
                .zip(b)
                .all(|(x, y)| (x - y).abs() <= 1e-13 * (1.0 + y.abs()))
        };
        assert!(close(&f1, &f2), "{f1:?} vs {f2:?}");
        assert!(close(&g1, &g2), "{g1:?} vs {g2:?}");
        assert!(close(&s1.distance, &s2.distance));
    }
}
