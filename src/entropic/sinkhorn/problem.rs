//! A batch of problems: marginals, a cost source, the marginal relaxation, and what its
//! checks compute once (the masses and the constant each dense cost is solved without);
//! the same batch on a backend's buffers ([`BufferProblem`]).

use crate::backend::{CloudLayout, CostSource};
use crate::batch::IntoBatch;
use crate::entropic::unbalanced::Relaxation;
use crate::validate::check_histograms;
use crate::{Error, Real, Result};
use ndarray::{ArrayView2, Ix2};

/// A batch of `B` OT problems: marginals `μ` (B×n), `ν` (B×m), a cost, and (unbalanced
/// OT) the relaxation of the marginal constraints.
#[derive(Clone, Debug)]
pub struct Problem<'a, T> {
    pub(super) mu: ArrayView2<'a, T>,
    pub(super) nu: ArrayView2<'a, T>,
    pub(super) cost: CostSource<'a, T>,
    /// KL-relaxed marginals; `None` (or both weights infinite) for the balanced problem.
    pub(super) relaxation: Option<Relaxation>,
    /// What the solvers remove from the cost and its size, computed once here.
    pub(super) offsets: CostOffsets,
    /// `Σ ν` of each problem (the tolerance is relative to it).
    pub(super) masses: Vec<f64>,
    /// `Σ μ` of each problem.
    pub(super) mu_masses: Vec<f64>,
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
                let max_abs = crate::cost::max_abs_cost(cost)?;
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
    /// The problems `μ`, `ν` with cost `cost`: one problem (`μ`: n, `ν`: m) or a batch
    /// (`μ`: B×n, `ν`: B×m), against a dense cost (`n×m` shared, or `B×n×m`, one per
    /// problem), a [`GridCost`](crate::GridCost) or a [`PointCloudCost`](crate::PointCloudCost)
    /// (never stored). Invalid input is an error naming the argument: shapes, NaN/∞,
    /// negative masses, empty arrays. Unequal masses are refused when the problem is solved
    /// as a balanced one (without [`Problem::relaxed`]).
    ///
    /// ```
    /// use logot::{CpuBackend, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::{array, Array3};
    /// let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.01));
    /// // One problem; unequal masses are refused by a balanced solve.
    /// let cost = array![[0.0, 1.0], [1.0, 0.0]];
    /// let (mu, nu) = (array![0.5, 0.5], array![0.3, 0.3]);
    /// let err = solver.solve(&Problem::new(mu.view(), nu.view(), cost.view())?).unwrap_err();
    /// assert!(matches!(err, logot::Error::UnequalMass { .. }), "{err}");
    /// // Two problems, each with its own cost: the identity permutation and the swap are free.
    /// let costs = Array3::from_shape_vec((2, 2, 2), vec![0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0]).unwrap();
    /// let (mu, nu) = (array![[0.5f64, 0.5], [0.5, 0.5]], array![[0.5, 0.5], [0.5, 0.5]]);
    /// let problem = Problem::new(mu.view(), nu.view(), costs.view())?;
    /// assert_eq!(problem.batch_size(), 2);
    /// assert!(solver.solve(&problem)?.distance.iter().all(|d| d.abs() < 1e-12));
    /// // Weighted point clouds, the cost computed on the fly: every point moves by 0.5.
    /// let (x, y, w) = (array![[0.0f64], [1.0]], array![[0.5], [1.5]], array![0.5, 0.5]);
    /// let clouds = Problem::new(w.view(), w.view(), PointCloudCost::new(x.view(), y.view())?)?;
    /// assert!((solver.solve(&clouds)?.distance[0] - 0.25).abs() < 1e-3);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn new(
        mu: impl IntoBatch<'a, T, Ix2>,
        nu: impl IntoBatch<'a, T, Ix2>,
        cost: impl Into<CostSource<'a, T>>,
    ) -> Result<Self> {
        let mut p = Problem {
            mu: mu.into_batch(),
            nu: nu.into_batch(),
            cost: cost.into(),
            relaxation: None,
            offsets: CostOffsets::default(),
            masses: Vec::new(),
            mu_masses: Vec::new(),
        };
        (p.offsets, p.mu_masses, p.masses) = p.validate()?;
        Ok(p)
    }

    /// This problem with its marginal constraints relaxed to KL penalties: unbalanced OT,
    /// POT's `sinkhorn_unbalanced(..., reg_m, reg_type="kl")` (`reg_m` a scalar `ρ`, a pair
    /// `(ρ_μ, ρ_ν)` or a [`Relaxation`]; see [`crate::unbalanced`]). The masses may differ.
    ///
    /// ```
    /// use logot::{CpuBackend, Problem, Relaxation, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::array;
    /// // Unequal masses are accepted once a marginal is relaxed.
    /// let (mu, nu, cost) = (array![1.0f64, 1.0], array![0.5, 0.5], array![[0.0, 1.0], [1.0, 0.0]]);
    /// let problem = Problem::new(mu.view(), nu.view(), cost.view())?.relaxed(Relaxation::kl(1.0));
    /// let r = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1)).solve(&problem)?;
    /// assert!(r.convergence.converged && r.objective.is_some());
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn relaxed(self, relaxation: impl Into<Relaxation>) -> Self {
        Problem {
            relaxation: Some(relaxation.into()),
            ..self
        }
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
    /// The relaxation of the marginals, as given to [`Problem::relaxed`].
    pub fn relaxation(&self) -> Option<Relaxation> {
        self.relaxation
    }
    /// The relaxation when at least one marginal is relaxed (`None`: balanced), checked.
    pub(crate) fn unbalanced(&self) -> Result<Option<Relaxation>> {
        unbalanced(self.relaxation)
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
        // Weights on point clouds are counted against their cloud's points.
        if let CostSource::PointCloud(_) = &self.cost {
            for (arg, k, points, cloud) in [("mu", n, dims.n, "x"), ("nu", m, dims.m, "y")] {
                if k != points {
                    return Err(Error::shape(
                        arg,
                        format!("has {k} weights for {points} points of {cloud}"),
                    ));
                }
            }
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

/// The relaxation when at least one marginal is relaxed (`None`: balanced), checked.
pub(crate) fn unbalanced(relaxation: Option<Relaxation>) -> Result<Option<Relaxation>> {
    match relaxation {
        Some(r) => {
            r.validate()?;
            Ok(Some(r).filter(|r| !r.is_balanced()))
        }
        None => Ok(None),
    }
}

/// A batch of problems whose arrays are already on a backend (e.g. a caller's device memory,
/// `CudaBackend::borrow_buffer`), for [`SinkhornSolver::prepare`](crate::SinkhornSolver::prepare):
/// `μ` (`B×n`) and `ν` (`B×m`), kept by the prepared batch, and a cost that is only read.
/// Every array is row-major. The checks are those of [`Problem::new`], with the same errors.
#[derive(Debug)]
pub struct BufferProblem<'c, Buf> {
    pub(crate) mu: Buf,
    pub(crate) nu: Buf,
    pub(crate) cost: BufferCost<'c, Buf>,
    pub(crate) batch: usize,
    pub(crate) relaxation: Option<Relaxation>,
}

/// The cost of a [`BufferProblem`].
#[derive(Debug)]
pub(crate) enum BufferCost<'c, Buf> {
    /// A dense cost, `n×m` shared or `B×n×m`.
    Dense {
        cost: &'c Buf,
        n: usize,
        m: usize,
        batched: bool,
    },
    /// Point clouds laid out as `layout` says.
    Points {
        x: &'c Buf,
        y: &'c Buf,
        layout: CloudLayout,
    },
}

impl<'c, Buf> BufferProblem<'c, Buf> {
    /// `batch` problems against a dense cost: `cost` is `n×m` shared (`batched_cost` false)
    /// or `B×n×m`.
    pub fn dense(
        mu: Buf,
        nu: Buf,
        cost: &'c Buf,
        (batch, n, m): (usize, usize, usize),
        batched_cost: bool,
    ) -> Self {
        BufferProblem {
            mu,
            nu,
            cost: BufferCost::Dense {
                cost,
                n,
                m,
                batched: batched_cost,
            },
            batch,
            relaxation: None,
        }
    }

    /// `batch` problems between the point clouds `x` and `y`, laid out as `layout` says (one
    /// pair per problem or one pair shared), the cost computed on the fly.
    pub fn points(
        mu: Buf,
        nu: Buf,
        x: &'c Buf,
        y: &'c Buf,
        batch: usize,
        layout: CloudLayout,
    ) -> Self {
        BufferProblem {
            mu,
            nu,
            cost: BufferCost::Points { x, y, layout },
            batch,
            relaxation: None,
        }
    }

    /// This batch with its marginals relaxed, as [`Problem::relaxed`].
    pub fn relaxed(self, relaxation: impl Into<Relaxation>) -> Self {
        BufferProblem {
            relaxation: Some(relaxation.into()),
            ..self
        }
    }

    /// Number of problems, source points and target points.
    pub fn dims(&self) -> (usize, usize, usize) {
        match &self.cost {
            BufferCost::Dense { n, m, .. } => (self.batch, *n, *m),
            BufferCost::Points { layout, .. } => (self.batch, layout.n, layout.m),
        }
    }
}

/// What [`SinkhornSolver::prepare`](crate::SinkhornSolver::prepare) and
/// [`SinkhornSolver::prepare_divergence`](crate::SinkhornSolver::prepare_divergence) take: a
/// [`Problem`] of host arrays or a [`BufferProblem`] on the backend (both convert into it).
#[derive(Debug)]
pub enum ProblemInput<'p, 'a, T, Buf> {
    /// Host arrays.
    Host(&'p Problem<'a, T>),
    /// Arrays on the backend.
    Buffers(BufferProblem<'p, Buf>),
}

impl<'p, 'a, T, Buf> From<&'p Problem<'a, T>> for ProblemInput<'p, 'a, T, Buf> {
    fn from(p: &'p Problem<'a, T>) -> Self {
        ProblemInput::Host(p)
    }
}

impl<'p, T, Buf> From<BufferProblem<'p, Buf>> for ProblemInput<'p, 'static, T, Buf> {
    fn from(p: BufferProblem<'p, Buf>) -> Self {
        ProblemInput::Buffers(p)
    }
}
