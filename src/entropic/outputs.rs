//! The one path for batches on a backend: [`SinkhornSolver::solve_prepared`] solves a
//! [`PreparedProblem`] once and writes what its [`BufferOutputs`] ask for — potentials,
//! plans, the gradients of `⟨P, C⟩` with respect to a dense cost, or the envelope gradients
//! with respect to the points — into the caller's buffers; only per-problem numbers come
//! back ([`BufferResult`]).
//!
//! Why one method with requested outputs rather than one method per output: every output
//! of a solve comes from the same potentials, so asking for several of them (the potentials
//! and the plans, say) costs one solve, not one each; and the buffers a caller owns (a GPU
//! framework's tensors) are named once, where they are written.

use crate::backend::{grad::GradKernels, PointCloudKernels};
use crate::cg::{CgParams, CgReport};
use crate::entropic::gradients::GradientBuffers;
use crate::entropic::sinkhorn::{Convergence, PreparedProblem, SinkhornSolver};
use crate::{Error, Real, Result};

/// The caller's buffers a solve of a prepared batch writes, on the solver's backend (on a
/// GPU, e.g. a framework's tensors, `CudaBackend::borrow_buffer`). What is set is computed
/// from the one solve; what is not is neither computed nor written. Every length is checked.
///
/// ```
/// use logot::{Backend, BufferOutputs, CpuBackend, Problem, SinkhornParams, SinkhornSolver};
/// use logot::ndarray::array;
/// let (mu, nu, cost) = (array![0.5f64, 0.5], array![0.25, 0.75], array![[0.0, 1.0], [1.0, 0.0]]);
/// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05));
/// let problem = Problem::new(mu.view(), nu.view(), cost.view())?;
/// let prepared = solver.prepare(&problem)?;
/// let be = solver.backend();
/// let (mut f, mut g, mut plan) = (be.filled(2, 0.0)?, be.filled(2, 0.0)?, be.filled(4, 0.0)?);
/// // Potentials and plans from one solve: the numbers of the host-array calls.
/// let out = BufferOutputs::new().potentials(&mut f, &mut g).plan(&mut plan);
/// let report = solver.solve_prepared(&prepared, out)?;
/// let host = solver.coupling(&problem)?;
/// assert_eq!(be.download(&f)?, host.result.f.into_raw_vec_and_offset().0);
/// assert_eq!(be.download(&plan)?, host.plan.into_raw_vec_and_offset().0);
/// assert!(report.convergence.converged);
/// # Ok::<(), logot::Error>(())
/// ```
#[derive(Debug)]
pub struct BufferOutputs<'o, Buf> {
    potentials: Option<(&'o mut Buf, &'o mut Buf)>,
    plan: Option<&'o mut Buf>,
    wasserstein_gradients: Option<WassersteinOutputs<'o, Buf>>,
    point_gradients: Option<(&'o mut Buf, &'o mut Buf)>,
}

impl<Buf> Default for BufferOutputs<'_, Buf> {
    fn default() -> Self {
        Self::new()
    }
}

/// The gradients of `⟨P, C⟩` a solve writes ([`BufferOutputs::wasserstein_gradients`]).
#[derive(Debug)]
struct WassersteinOutputs<'o, Buf> {
    cost: &'o Buf,
    cg: CgParams,
    out: GradientBuffers<'o, Buf>,
}

impl<'o, Buf> BufferOutputs<'o, Buf> {
    /// No outputs: the solve reports its distances and convergence only.
    pub fn new() -> Self {
        BufferOutputs {
            potentials: None,
            plan: None,
            wasserstein_gradients: None,
            point_gradients: None,
        }
    }
    /// Write the potentials `f` (`B×n`) and `g` (`B×m`, the cost offsets added back on the
    /// device): `P = exp((f ⊕ g − C)/ε)`.
    pub fn potentials(self, f: &'o mut Buf, g: &'o mut Buf) -> Self {
        BufferOutputs {
            potentials: Some((f, g)),
            ..self
        }
    }
    /// Write the plans `P_b = exp((f_b ⊕ g_b − C_b)/ε)` (`B×n×m`), the entries of
    /// [`SinkhornSolver::coupling`]'s array. The report is the potentials' (that of
    /// [`SinkhornSolver::solve`]), not re-measured on the array as `coupling` does on the host.
    pub fn plan(self, plan: &'o mut Buf) -> Self {
        BufferOutputs {
            plan: Some(plan),
            ..self
        }
    }
    /// Write the exact gradients of `⟨P, C⟩` ([`SinkhornSolver::wasserstein_gradients`]):
    /// `∂/∂C` (`B×n×m`), `∂/∂μ` (`B×n`) and `∂/∂ν` (`B×m`) into `out`, for a dense cost
    /// whose values `cost` holds (the buffer the batch was prepared from: the upstream
    /// `G = C`), with the adjoint solved by CG with `cg`. Only per-problem numbers cross to
    /// the host (reports, distances, CG's coefficients); for unbalanced problems, also `μ`,
    /// `ν` and the marginal gradients.
    pub fn wasserstein_gradients(
        self,
        cost: &'o Buf,
        cg: &CgParams,
        out: GradientBuffers<'o, Buf>,
    ) -> Self {
        BufferOutputs {
            wasserstein_gradients: Some(WassersteinOutputs {
                cost,
                cg: cg.clone(),
                out,
            }),
            ..self
        }
    }
    /// Write the gradients with respect to the points of a point-cloud batch: `∂/∂X`
    /// (`B×n×d`) and `∂/∂Y` (`B×m×d`) of `OT_ε` ([`SinkhornSolver::point_gradients`], whose
    /// values [`BufferResult::value`] reports) or, for a prepared divergence, of `S_ε`.
    pub fn point_gradients(self, grad_x: &'o mut Buf, grad_y: &'o mut Buf) -> Self {
        BufferOutputs {
            point_gradients: Some((grad_x, grad_y)),
            ..self
        }
    }

    /// The outputs of a divergence: its point gradients only.
    pub(crate) fn into_divergence(self) -> Result<Option<(&'o mut Buf, &'o mut Buf)>> {
        if self.potentials.is_some() || self.plan.is_some() || self.wasserstein_gradients.is_some()
        {
            return Err(Error::parameter(
                "outputs",
                "potentials, plan or wasserstein_gradients",
                "a Sinkhorn divergence writes its point gradients only",
            ));
        }
        Ok(self.point_gradients)
    }
}

/// What [`SinkhornSolver::solve_prepared`] reads back; the arrays went into the caller's
/// buffers.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BufferResult {
    /// `⟨P_b, C_b⟩` of each problem (offsets included).
    pub distance: Vec<f64>,
    /// Unbalanced problems only: the objective ([`SinkhornResult::objective`](crate::SinkhornResult::objective)).
    pub objective: Option<Vec<f64>>,
    /// Iterations, marginal errors and whether the tolerance was met.
    pub convergence: Convergence,
    /// With [`BufferOutputs::point_gradients`]: `OT_ε` of each problem (rounded to the
    /// precision of the data, as [`PointGradients::value`](crate::PointGradients::value)).
    pub value: Option<Vec<f64>>,
    /// With [`BufferOutputs::wasserstein_gradients`]: how the adjoint CG solve ended.
    pub cg: Option<CgReport>,
}

impl<Bk> SinkhornSolver<Bk> {
    /// Solve a batch prepared on the backend ([`SinkhornSolver::prepare`]) and write what
    /// `outputs` asks for into the caller's buffers; the distances, the report and the
    /// values of the asked gradients come back. The same numbers as the host-array calls
    /// ([`solve`](Self::solve), [`coupling`](Self::coupling),
    /// [`wasserstein_gradients`](Self::wasserstein_gradients),
    /// [`point_gradients`](Self::point_gradients)) on the same data.
    ///
    /// ```
    /// use logot::{BufferOutputs, CpuBackend, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::array;
    /// // Solve the same uploaded batch at several iteration budgets: the marginal error falls.
    /// let (mu, nu, cost) = (array![0.5f64, 0.5], array![0.1, 0.9], array![[0.0, 1.0], [1.0, 0.0]]);
    /// let problem = Problem::new(mu.view(), nu.view(), cost.view())?;
    /// let prepared = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.5)).prepare(&problem)?;
    /// let mut errors = Vec::new();
    /// for iters in [1, 4, 16] {
    ///     let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.5).fixed_iterations(iters));
    ///     errors.push(solver.solve_prepared(&prepared, BufferOutputs::new())?.convergence.marginal_error);
    /// }
    /// assert!(errors[0] > errors[1] && errors[1] > errors[2]);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn solve_prepared<T: Real>(
        &self,
        prepared: &PreparedProblem<T, Bk>,
        outputs: BufferOutputs<'_, Bk::Buffer>,
    ) -> Result<BufferResult>
    where
        Bk: PointCloudKernels<T> + GradKernels<T>,
    {
        let be = self.backend();
        let (batch, n, m) = prepared.dims();
        let BufferOutputs {
            potentials,
            plan,
            wasserstein_gradients,
            point_gradients,
        } = outputs;
        if let Some((f, g)) = &potentials {
            crate::backend::check_buffer_len("f", be.len(f), batch * n)?;
            crate::backend::check_buffer_len("g", be.len(g), batch * m)?;
        }
        if let Some(p) = &plan {
            prepared.check_plan()?;
            crate::backend::check_buffer_len("plan", be.len(p), batch * n * m)?;
        }
        let eps = T::of(self.params().eps);
        match (wasserstein_gradients, point_gradients) {
            (Some(_), Some(_)) => Err(Error::parameter(
                "outputs",
                "wasserstein_gradients and point_gradients",
                "the gradients with respect to a dense cost and to the points of clouds are \
                 for different costs",
            )),
            (Some(w), None) => {
                let d = self.gradients_prepared(prepared, w.cost, T::one(), &w.cg)?;
                w.out.write(be, (batch, n, m), [&d.cost, &d.a, &d.b])?;
                if let Some((f, g)) = potentials {
                    self.write_potentials(prepared, &d.f, &d.g, f, g)?;
                }
                if let Some(p) = plan {
                    be.offset_rows(&d.plan, &[], p)?;
                }
                Ok(BufferResult {
                    distance: d.solution.distance,
                    objective: d.solution.objective,
                    convergence: d.solution.convergence,
                    value: None,
                    cg: Some(d.cg),
                })
            }
            (None, Some((grad_x, grad_y))) => {
                let s = self.point_parts(prepared)?;
                // (The gradients' lengths, B×n×d and B×m×d, are those the cost's kernels
                // return.)
                crate::backend::check_buffer_len("grad_x", be.len(grad_x), be.len(&s.gx))?;
                crate::backend::check_buffer_len("grad_y", be.len(grad_y), be.len(&s.gy))?;
                be.offset_rows(&s.gx, &[], grad_x)?;
                be.offset_rows(&s.gy, &[], grad_y)?;
                if let Some((f, g)) = potentials {
                    self.write_potentials(prepared, &s.f, &s.g, f, g)?;
                }
                if let Some(p) = plan {
                    be.offset_rows(&be.plan(prepared.cost(), &s.f, &s.g, eps)?, &[], p)?;
                }
                Ok(BufferResult {
                    distance: s.solution.distance,
                    objective: s.solution.objective,
                    convergence: s.solution.convergence,
                    value: Some(s.value),
                    cg: None,
                })
            }
            (None, None) => {
                let (f, g, solution) = self.iterate_prepared(prepared)?;
                self.check_distances::<T>(&solution.distance)?;
                if let Some((fo, go)) = potentials {
                    self.write_potentials(prepared, &f, &g, fo, go)?;
                }
                if let Some(p) = plan {
                    be.offset_rows(&be.plan(prepared.cost(), &f, &g, eps)?, &[], p)?;
                }
                Ok(BufferResult {
                    distance: solution.distance,
                    objective: solution.objective,
                    convergence: solution.convergence,
                    value: None,
                    cg: None,
                })
            }
        }
    }
}
