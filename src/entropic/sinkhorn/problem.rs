//! A batch of problems: marginals, a cost source, and what its checks compute once (the
//! masses and the constant each dense cost is solved without).

use crate::backend::CostSource;
use crate::validate::check_histograms;
use crate::{Error, Real, Result};
use ndarray::{Array2, Array3, ArrayView1, ArrayView2, Axis};

/// A batch of `B` OT problems: marginals `μ` (B×n), `ν` (B×m) and a cost.
#[derive(Clone, Debug)]
pub struct Problem<'a, T> {
    pub(super) mu: ArrayView2<'a, T>,
    pub(super) nu: ArrayView2<'a, T>,
    pub(super) cost: CostSource<'a, T>,
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

    /// Whether any cost is shifted.
    pub(crate) fn any(&self) -> bool {
        self.shift.iter().any(|&s| s != 0.0)
    }

    /// Problem `b`'s shift.
    pub(crate) fn of_problem(&self, b: usize) -> f64 {
        match self.shift.len() {
            0 => 0.0,
            1 => self.shift[0],
            _ => self.shift[b],
        }
    }

    /// The cost without its offsets, as an owned array, when there is one to remove.
    pub(crate) fn shifted<T: Real>(&self, cost: &CostSource<'_, T>) -> Option<ShiftedCost<T>> {
        if !self.any() {
            return None;
        }
        match cost {
            CostSource::Dense(c) => {
                let s = self.shift[0];
                Some(ShiftedCost::Dense(c.mapv(|v| T::of(v.f64() - s))))
            }
            CostSource::DenseBatch(c) => {
                let mut out = c.to_owned();
                for (b, mut m) in out.outer_iter_mut().enumerate() {
                    let s = self.shift[b];
                    m.mapv_inplace(|v| T::of(v.f64() - s));
                }
                Some(ShiftedCost::DenseBatch(out))
            }
            _ => None,
        }
    }
}

/// A dense cost with its offsets removed ([`CostOffsets::shifted`]).
pub(crate) enum ShiftedCost<T> {
    Dense(Array2<T>),
    DenseBatch(Array3<T>),
}

impl<T> ShiftedCost<T> {
    pub(crate) fn source(&self) -> CostSource<'_, T> {
        match self {
            ShiftedCost::Dense(c) => CostSource::Dense(c.view()),
            ShiftedCost::DenseBatch(c) => CostSource::DenseBatch(c.view()),
        }
    }
}

impl<'a, T: Real> Problem<'a, T> {
    /// One problem: `μ` (n), `ν` (m), cost `C` (n×m). Invalid input is an error naming the
    /// argument: shapes, NaN/∞, negative masses, empty arrays. Unequal masses are refused
    /// when the problem is solved as a balanced one (no [`SinkhornParams::relaxation`](crate::SinkhornParams::relaxation)).
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
