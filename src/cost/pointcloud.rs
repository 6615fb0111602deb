//! Point-cloud costs computed on the fly.
//!
//! A [`PointCloudCost`] holds two clouds `X` (`n×d`) and `Y` (`m×d`) and a ground cost
//! `c(x, y) = |x − y|²` (or `|x − y|`). Backends never form the `n×m` matrix: a half-step
//! streams tiles of the reduced cloud past a block of output points, computes `c` in
//! registers and feeds it to the online log-sum-exp, so memory stays `O((n + m)·d)`
//! ([`PointCloudKernels`](crate::PointCloudKernels) applies their plans).

use crate::validate::check_finite;
use crate::{Error, Real, Result};
use ndarray::{Array2, ArrayView2, ArrayView3, Axis};

/// The ground cost between two points of a [`PointCloudCost`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PointMetric {
    /// `c(x, y) = |x − y|² = Σ_k (x_k − y_k)²` (POT's `ot.dist` default, `"sqeuclidean"`).
    #[default]
    SqEuclidean,
    /// `c(x, y) = |x − y|` (POT's `"euclidean"`): one square root per pair on top of the
    /// squared distance; its gradient `(x − y)/|x − y|` is taken as 0 where `x = y`.
    Euclidean,
}

impl PointMetric {
    /// The exponent `p` of `c = |x − y|^p` (2 or 1).
    pub fn exponent(self) -> u32 {
        match self {
            PointMetric::SqEuclidean => 2,
            PointMetric::Euclidean => 1,
        }
    }
}

/// How the CUDA backend forms the cross term `x·y` of the costs of f32 clouds above 16
/// dimensions, where `|x − y|² = |x|² + |y|² − 2·x·y` (on clouds centred on their common
/// mean). Nothing else reads it. The CPU backend and f64 on any backend compute exact
/// products. f32 clouds of at most 16 dimensions on the GPU have kernels of their own
/// whatever the choice. At equal iterations they keep the distance within 1e-5 of the
/// CPU's f64 result (`tests/cuda_pointcloud_fast.rs`; at most 6.1e-7 measured on an H200
/// at d = 1, 2, 3, 4, 7 and 16).
///
/// The default is [`CrossPrecision::F16x2`], which keeps distances within 1e-5 of an f64
/// reference (measured on an H100 at d = 17 to 3072: at most 4.8e-6, at d = 17, as
/// [`CrossPrecision::Tf32x3`] with 4.6e-6) at about half the tensor-core work of TF32x3; its
/// error is relative to each cloud's largest |coordinate| rather than to each coordinate, so
/// clouds whose coordinates differ in scale by many orders of magnitude keep more with
/// TF32x3. [`CrossPrecision::Exact`] (2^-24 per product on the FP32 units) is the slowest;
/// [`CrossPrecision::Tf32`] and [`CrossPrecision::F16`] (about 2^-10, moving each cost by
/// about `2^-10·|x||y|/√d`, which `exp(−c/ε)` amplifies by `1/ε`) the fastest. The
/// modes' times against FlashSinkhorn are in benches/README.md.
///
/// ```
/// use logot::{CrossPrecision, PointCloudCost};
/// let (x, y) = (logot::ndarray::array![[0.0f32, 1.0]], logot::ndarray::array![[1.0f32, 1.0]]);
/// let cost = PointCloudCost::new(x.view(), y.view())?.with_precision(CrossPrecision::Tf32);
/// assert_eq!(cost.precision(), CrossPrecision::Tf32);
/// assert_eq!(cost.cost(0, 0), 1.0); // the reference cost stays exact
/// # Ok::<(), logot::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CrossPrecision {
    /// Exact f32 products on the FP32 units (rounding about 2^-24 per product; measured on
    /// an H100: a distance error of 1.6e-7 at d = 64).
    Exact,
    /// Split TF32 on tensor cores, three products per pair (`a_big·b_small + a_small·b_big +
    /// a_big·b_big`), summed from zero over each 16 coordinates and then added in f32: about
    /// 2^-21 per product (measured on an H100: a distance error of 1.9e-6 at d = 64,
    /// 1000×1031 points, ε = 0.01·mean cost), about twice as fast as exact.
    Tf32x3,
    /// One TF32 tensor-core product (10-bit mantissas): about 2^-10 per product.
    Tf32,
    /// Split f16 on tensor cores: each cloud scaled by a power of two (its largest
    /// |coordinate| to at most 2^14) and split `a = a_big + a_small` in f16, three products
    /// as [`CrossPrecision::Tf32x3`] at half its tensor-core work; each coordinate is kept to
    /// about 2^-22 of the cloud's largest |coordinate| (relative to that, not to itself).
    /// The default (measured on an H100: a distance error of 2.0e-6 at d = 64, 1000×1031
    /// points, ε = 0.01·mean cost).
    #[default]
    F16x2,
    /// One f16 tensor-core product of the scaled coordinates (10-bit mantissas, about 2^-11
    /// of the cloud's largest |coordinate| per coordinate), at twice the TF32 rate: fastest.
    F16,
}

impl CrossPrecision {
    /// Every precision, from the most to the least exact.
    pub const ALL: [CrossPrecision; 5] = [
        CrossPrecision::Exact,
        CrossPrecision::Tf32x3,
        CrossPrecision::Tf32,
        CrossPrecision::F16x2,
        CrossPrecision::F16,
    ];

    /// The precision of this [name](CrossPrecision::name), if any.
    ///
    /// ```
    /// use logot::CrossPrecision;
    /// for p in CrossPrecision::ALL {
    ///     assert_eq!(CrossPrecision::from_name(p.name()), Some(p));
    /// }
    /// assert_eq!(CrossPrecision::from_name("f16"), Some(CrossPrecision::F16));
    /// assert_eq!(CrossPrecision::from_name("bf16"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<CrossPrecision> {
        CrossPrecision::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Its name on the command line (`exact`, `tf32x3`, `tf32`, `f16x2`, `f16`).
    pub fn name(self) -> &'static str {
        match self {
            CrossPrecision::Exact => "exact",
            CrossPrecision::Tf32x3 => "tf32x3",
            CrossPrecision::Tf32 => "tf32",
            CrossPrecision::F16x2 => "f16x2",
            CrossPrecision::F16 => "f16",
        }
    }
}

/// Two point clouds, `X` (`n×d`, sources, rows of the plan) and `Y` (`m×d`, targets,
/// columns), with the cost `C_ij = c(x_i, y_j)` of a [`PointMetric`] (squared Euclidean by
/// default), never stored: shared by every problem of a batch ([`PointCloudCost::new`]), or
/// one pair per problem ([`PointCloudCost::batched`], `X` `B×n×d` and `Y` `B×m×d`, problem
/// `k` with `C^k_ij = c(x^k_i, y^k_j)`, as GeomLoss's batch mode).
///
/// ```
/// use logot::{PointCloudCost, Problem, SinkhornParams, SinkhornSolver, CpuBackend};
/// use logot::ndarray::{array, Axis};
/// let x = array![[0.0f64, 0.0], [1.0, 0.0]];
/// let y = array![[0.0, 1.0], [1.0, 1.0], [0.5, 2.0]];
/// let (mu, nu) = (array![0.5, 0.5], array![0.25, 0.25, 0.5]);
/// let cost = PointCloudCost::new(x.view(), y.view())?;
/// assert_eq!(cost.cost(1, 2), 0.25 + 4.0);
/// let problem = Problem::new(mu.view().insert_axis(Axis(0)), nu.view().insert_axis(Axis(0)), cost)?;
/// let res = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05)).solve(&problem)?;
/// assert!(res.convergence.converged && res.distance[0] > 1.0);
/// # Ok::<(), logot::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PointCloudCost<'a, T> {
    /// `clouds×n×d`: one cloud when shared, `B` when batched.
    x: ArrayView3<'a, T>,
    /// `clouds×m×d`.
    y: ArrayView3<'a, T>,
    batched: bool,
    metric: PointMetric,
    precision: CrossPrecision,
}

impl<'a, T> PointCloudCost<'a, T> {
    /// Source points, `clouds×n×d`: one cloud when shared by the batch, `B` when batched.
    pub fn x(&self) -> ArrayView3<'a, T> {
        self.x
    }
    /// Target points, `clouds×m×d` (as [`PointCloudCost::x`]).
    pub fn y(&self) -> ArrayView3<'a, T> {
        self.y
    }
    /// `Some(B)` for one pair of clouds per problem ([`PointCloudCost::batched`]), `None`
    /// when the pair is shared by every problem.
    pub fn batch(&self) -> Option<usize> {
        self.batched.then(|| self.x.dim().0)
    }
    /// The pair of clouds of problem `k` as a shared cost (same metric and precision): the
    /// clouds themselves when they are shared, `x[k]`, `y[k]` when batched.
    ///
    /// # Panics
    /// If the clouds are batched and `k ≥ B` (as indexing an array).
    pub fn problem(&self, k: usize) -> PointCloudCost<'a, T> {
        let k = if self.batched { k } else { 0 };
        let one = |c: &ArrayView3<'a, T>| c.slice_move(ndarray::s![k..k + 1, .., ..]);
        PointCloudCost {
            x: one(&self.x),
            y: one(&self.y),
            batched: false,
            metric: self.metric,
            precision: self.precision,
        }
    }
    /// The ground cost.
    pub fn metric(&self) -> PointMetric {
        self.metric
    }
    /// How the CUDA backend forms `x·y` in f32 above 16 dimensions.
    pub fn precision(&self) -> CrossPrecision {
        self.precision
    }
    /// The self-transport clouds of a Sinkhorn divergence: `(x, x)` and `(y, y)` with this
    /// cost's pairing (batched or shared), metric and precision.
    pub(crate) fn self_pairs(&self) -> (PointCloudCost<'a, T>, PointCloudCost<'a, T>) {
        (
            PointCloudCost { y: self.x, ..*self },
            PointCloudCost { x: self.y, ..*self },
        )
    }
    /// The same clouds with the cross-term precision `precision` (see [`CrossPrecision`]).
    pub fn with_precision(self, precision: CrossPrecision) -> Self {
        PointCloudCost { precision, ..self }
    }
    /// Number of source points `n` (per problem).
    pub fn n(&self) -> usize {
        self.x.dim().1
    }
    /// Number of target points `m` (per problem).
    pub fn m(&self) -> usize {
        self.y.dim().1
    }
    /// Dimension `d` of the points.
    pub fn dim(&self) -> usize {
        self.x.dim().2
    }
}

/// The most entries (`B·n·m`) of a plan between point clouds that a backend materialises:
/// the cost is computed on the fly to avoid `n×m` arrays, and a larger plan is refused.
pub(crate) const MAX_PLAN_ENTRIES: usize = 1 << 27;

/// The entries of the `batch` plans between clouds of `n` and `m` points, or the refusal
/// of plans above [`MAX_PLAN_ENTRIES`]: by the solver's paths that ask for a plan, before
/// they solve (`PreparedProblem::check_plan`), and by the backends' plan kernels, which a
/// caller of `Backend::plan` reaches directly.
pub(crate) fn check_plan_entries(batch: usize, n: usize, m: usize) -> Result<usize> {
    match n.checked_mul(m).and_then(|nm| nm.checked_mul(batch)) {
        Some(e) if e <= MAX_PLAN_ENTRIES => Ok(e),
        _ => Err(Error::Unavailable(format!(
            "the plan between point clouds of {n} and {m} points has {batch}×{n}×{m} entries, more than the \
             {MAX_PLAN_ENTRIES} a backend materialises; use the potentials (P = exp((f ⊕ g − C)/ε)) or the \
             kernels that apply P on the fly"
        ))),
    }
}

impl<'a, T: Real> PointCloudCost<'a, T> {
    /// Squared Euclidean cost `|x_i − y_j|²` between the rows of `x` (`n×d`) and `y` (`m×d`).
    ///
    /// Errors name the argument: an empty cloud or `d = 0` ([`Error::Empty`]), different
    /// dimensions ([`Error::Shape`], `"y"`), a NaN or infinite coordinate ([`Error::NonFinite`]).
    pub fn new(x: ArrayView2<'a, T>, y: ArrayView2<'a, T>) -> Result<Self> {
        Self::with_metric(x, y, PointMetric::SqEuclidean)
    }

    /// Euclidean cost `|x_i − y_j|` (see [`PointMetric::Euclidean`]).
    ///
    /// ```
    /// let (x, y) = (logot::ndarray::array![[0.0f64, 0.0]], logot::ndarray::array![[3.0, 4.0]]);
    /// assert_eq!(logot::PointCloudCost::euclidean(x.view(), y.view())?.cost(0, 0), 5.0);
    /// assert_eq!(logot::PointCloudCost::new(x.view(), y.view())?.cost(0, 0), 25.0);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn euclidean(x: ArrayView2<'a, T>, y: ArrayView2<'a, T>) -> Result<Self> {
        Self::with_metric(x, y, PointMetric::Euclidean)
    }

    /// The clouds with the given metric (validated as in [`PointCloudCost::new`]).
    pub fn with_metric(
        x: ArrayView2<'a, T>,
        y: ArrayView2<'a, T>,
        metric: PointMetric,
    ) -> Result<Self> {
        Self::checked(
            x.insert_axis(Axis(0)),
            y.insert_axis(Axis(0)),
            false,
            metric,
        )
    }

    /// One pair of clouds per problem, squared Euclidean: problem `k` transports `x[k]`
    /// (`n×d`) to `y[k]` (`m×d`), `C^k_ij = |x^k_i − y^k_j|²`; `x` is `B×n×d`, `y` `B×m×d`,
    /// and a [`Problem`](crate::Problem) on it needs `B` rows of weights.
    ///
    /// Errors name the argument: `B = 0`, an empty cloud or `d = 0` ([`Error::Empty`]),
    /// another batch size or dimension in `y` ([`Error::Shape`], `"y"`), a NaN or infinite
    /// coordinate ([`Error::NonFinite`]).
    ///
    /// ```
    /// use logot::{CpuBackend, PointCloudCost, Problem, SinkhornParams, SinkhornSolver};
    /// use logot::ndarray::{array, Array2};
    /// // Two problems in 1-D: {0, 1} → {0.5, 1.5} and {0, 1} → {0, 1}.
    /// let x = array![[[0.0f64], [1.0]], [[0.0], [1.0]]];
    /// let y = array![[[0.5f64], [1.5]], [[0.0], [1.0]]];
    /// let w = Array2::from_elem((2, 2), 0.5);
    /// let cost = PointCloudCost::batched(x.view(), y.view())?;
    /// assert_eq!((cost.batch(), cost.problem(0).cost(0, 0)), (Some(2), 0.25));
    /// let r = SinkhornSolver::new(CpuBackend, SinkhornParams::new(1e-3)).solve(&Problem::new(w.view(), w.view(), cost)?)?;
    /// assert!((r.distance[0] - 0.25).abs() < 1e-3 && r.distance[1] < 1e-3);
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn batched(x: ArrayView3<'a, T>, y: ArrayView3<'a, T>) -> Result<Self> {
        Self::batched_with_metric(x, y, PointMetric::SqEuclidean)
    }

    /// [`PointCloudCost::batched`] with the given metric.
    pub fn batched_with_metric(
        x: ArrayView3<'a, T>,
        y: ArrayView3<'a, T>,
        metric: PointMetric,
    ) -> Result<Self> {
        Self::checked(x, y, true, metric)
    }

    fn checked(
        x: ArrayView3<'a, T>,
        y: ArrayView3<'a, T>,
        batched: bool,
        metric: PointMetric,
    ) -> Result<Self> {
        for (arg, p) in [("x", &x), ("y", &y)] {
            let (b, rows, d) = p.dim();
            if b == 0 {
                return Err(Error::Empty {
                    arg: arg.into(),
                    detail: "a batch of 0 point clouds".into(),
                });
            }
            if rows == 0 || d == 0 {
                return Err(Error::Empty {
                    arg: arg.into(),
                    detail: format!("a point cloud of {rows} points in dimension {d}"),
                });
            }
        }
        if x.dim().0 != y.dim().0 {
            return Err(Error::shape(
                "y",
                format!("holds {} point clouds but x holds {}", y.dim().0, x.dim().0),
            ));
        }
        if x.dim().2 != y.dim().2 {
            return Err(Error::shape(
                "y",
                format!(
                    "points have {} coordinates but those of x have {}",
                    y.dim().2,
                    x.dim().2
                ),
            ));
        }
        check_finite("x", &x)?;
        check_finite("y", &y)?;
        Ok(PointCloudCost {
            x,
            y,
            batched,
            metric,
            precision: CrossPrecision::default(),
        })
    }

    /// `C^k_ij` of problem `k` in f64 (`k` ignored for shared clouds), from the direct form
    /// `Σ_t (x_it − y_jt)²` (exact up to rounding).
    pub fn cost_of(&self, k: usize, i: usize, j: usize) -> f64 {
        let k = if self.batched { k } else { 0 };
        let s: f64 = self
            .x
            .slice(ndarray::s![k, i, ..])
            .iter()
            .zip(self.y.slice(ndarray::s![k, j, ..]))
            .map(|(a, b)| {
                let d = a.f64() - b.f64();
                d * d
            })
            .sum();
        match self.metric {
            PointMetric::SqEuclidean => s,
            PointMetric::Euclidean => s.sqrt(),
        }
    }

    /// `C_ij` in f64 of the shared clouds (of the first problem when batched: see
    /// [`PointCloudCost::cost_of`]).
    pub fn cost(&self, i: usize, j: usize) -> f64 {
        self.cost_of(0, i, j)
    }

    /// The dense `n×m` cost matrix (small clouds only: tests, comparisons, plots) of the
    /// shared clouds (of the first problem when batched: `problem(k).to_dense()`).
    pub fn to_dense(&self) -> Array2<T> {
        Array2::from_shape_fn((self.n(), self.m()), |(i, j)| T::of(self.cost(i, j)))
    }

    /// An upper bound on every `C_ij` (of every problem): the cost across the diagonal of the
    /// bounding box of both clouds, `(Σ_k (max_k − min_k)²)^{p/2}`, in `O((n + m)·d)`
    /// (batched: the largest over the problems' pairs).
    ///
    /// ```
    /// let x = logot::ndarray::array![[0.0f64, 0.0], [1.0, 0.0]];
    /// let y = logot::ndarray::array![[0.0, 2.0]];
    /// let cost = logot::PointCloudCost::new(x.view(), y.view())?;
    /// assert_eq!(cost.max_cost(), 5.0); // box [0, 1]×[0, 2]: 1² + 2²
    /// assert!(cost.to_dense().iter().all(|&c| c <= 5.0));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn max_cost(&self) -> f64 {
        let d = self.dim();
        let boxes = self
            .x
            .outer_iter()
            .zip(self.y.outer_iter())
            .map(|(xk, yk)| {
                let mut lo = vec![f64::INFINITY; d];
                let mut hi = vec![f64::NEG_INFINITY; d];
                for row in xk.rows().into_iter().chain(yk.rows()) {
                    for (k, v) in row.iter().enumerate() {
                        lo[k] = lo[k].min(v.f64());
                        hi[k] = hi[k].max(v.f64());
                    }
                }
                lo.into_iter().zip(hi).collect::<Vec<_>>()
            });
        box_cost(self.metric, boxes)
    }
}

/// The cost across the diagonal of the largest of bounding boxes given per pair as
/// `[(min, max)]` per coordinate: `max_pairs (Σ_t (max_t − min_t)²)^{p/2}` (summed in `t`
/// order, so that every backend's [`PointCloudCost::max_cost`] gives the same bits).
pub(crate) fn box_cost(metric: PointMetric, boxes: impl Iterator<Item = Vec<(f64, f64)>>) -> f64 {
    let worst = boxes.fold(0.0f64, |worst, b| {
        let diam2: f64 = b.iter().map(|(a, b)| (b - a) * (b - a)).sum();
        worst.max(diam2)
    });
    match metric {
        PointMetric::SqEuclidean => worst,
        PointMetric::Euclidean => worst.sqrt(),
    }
}

/// Two clouds held in backend buffers ([`Backend::prepare_cloud_buffer`](crate::Backend::prepare_cloud_buffer)): `x` `[B×]n×d`
/// and `y` `[B×]m×d`, row-major, one pair per problem (`batch: Some(B)`) or one shared pair,
/// with the cost's metric and cross-term precision (as [`PointCloudCost`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CloudLayout {
    /// Points of `x` per pair.
    pub n: usize,
    /// Points of `y` per pair.
    pub m: usize,
    /// Coordinates per point.
    pub d: usize,
    /// `Some(B)`: `B` pairs, one per problem ([`PointCloudCost::batched`]); `None`: one pair.
    pub batch: Option<usize>,
    /// The ground cost.
    pub metric: PointMetric,
    /// How the CUDA backend forms `x·y` in f32 above 16 dimensions.
    pub precision: CrossPrecision,
}

impl CloudLayout {
    /// The number of pairs stored (`B`, or 1 for a shared pair).
    pub fn pairs(&self) -> usize {
        self.batch.unwrap_or(1)
    }

    /// The checks of [`PointCloudCost`]'s constructors that need no coordinate (the same
    /// errors), and the buffers' lengths `x_len`, `y_len` against the layout.
    pub fn check(&self, x_len: usize, y_len: usize) -> Result<()> {
        if self.batch == Some(0) {
            return Err(Error::Empty {
                arg: "x".into(),
                detail: "a batch of 0 point clouds".into(),
            });
        }
        for (arg, rows) in [("x", self.n), ("y", self.m)] {
            if rows == 0 || self.d == 0 {
                return Err(Error::Empty {
                    arg: arg.into(),
                    detail: format!("a point cloud of {rows} points in dimension {}", self.d),
                });
            }
        }
        let p = self.pairs();
        crate::validate::check_len("x", x_len, p * self.n * self.d)?;
        crate::validate::check_len("y", y_len, p * self.m * self.d)
    }

    /// The clouds of host slices laid out as this says, checked as by
    /// [`PointCloudCost::batched_with_metric`] (or [`PointCloudCost::with_metric`]).
    pub fn cost<'a, T: Real>(&self, x: &'a [T], y: &'a [T]) -> Result<PointCloudCost<'a, T>> {
        self.check(x.len(), y.len())?;
        let p = self.pairs();
        let wrong = |arg: &str, e: ndarray::ShapeError| Error::shape(arg, e.to_string());
        let xv = ArrayView3::from_shape((p, self.n, self.d), x).map_err(|e| wrong("x", e))?;
        let yv = ArrayView3::from_shape((p, self.m, self.d), y).map_err(|e| wrong("y", e))?;
        Ok(
            PointCloudCost::checked(xv, yv, self.batch.is_some(), self.metric)?
                .with_precision(self.precision),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn validation_names_the_argument() {
        let x = array![[0.0f64, 1.0], [2.0, 3.0]];
        let y3 = array![[0.0f64, 1.0, 2.0]];
        let e = PointCloudCost::new(x.view(), y3.view()).unwrap_err();
        assert!(matches!(&e, Error::Shape { arg, .. } if arg == "y"), "{e}");
        let empty = Array2::<f64>::zeros((0, 2));
        let e = PointCloudCost::new(empty.view(), x.view()).unwrap_err();
        assert!(matches!(&e, Error::Empty { arg, .. } if arg == "x"), "{e}");
        let nan = array![[0.0f64, f64::NAN]];
        let e = PointCloudCost::new(x.view(), nan.view()).unwrap_err();
        assert!(
            matches!(&e, Error::NonFinite { arg, .. } if arg == "y"),
            "{e}"
        );
    }

    #[test]
    fn costs_and_bound() {
        let x = array![[0.0f64, 0.0], [1.0, 2.0]];
        let y = array![[3.0f64, 4.0]];
        let c = PointCloudCost::new(x.view(), y.view()).unwrap();
        assert_eq!(c.cost(0, 0), 25.0);
        assert_eq!(c.cost(1, 0), 8.0);
        assert_eq!(c.max_cost(), 25.0);
        let e = PointCloudCost::euclidean(x.view(), y.view()).unwrap();
        assert_eq!(e.cost(0, 0), 5.0);
        assert_eq!(e.to_dense()[[1, 0]], 8.0f64.sqrt());
    }

    #[test]
    fn batched_costs_are_per_problem() {
        // Problem 0: the pair above; problem 1: x moved by (10, 0), y unchanged.
        let x = ndarray::array![[[0.0f64, 0.0], [1.0, 2.0]], [[10.0, 0.0], [11.0, 2.0]]];
        let y = ndarray::array![[[3.0f64, 4.0]], [[3.0, 4.0]]];
        let c = PointCloudCost::batched(x.view(), y.view()).unwrap();
        assert_eq!((c.batch(), c.n(), c.m(), c.dim()), (Some(2), 2, 1, 2));
        assert_eq!(c.cost_of(0, 0, 0), 25.0);
        assert_eq!(c.cost_of(1, 0, 0), 49.0 + 16.0);
        assert_eq!(c.problem(1).to_dense()[[1, 0]], 64.0 + 4.0);
        assert_eq!(c.problem(1).batch(), None);
        // The bound covers the worse pair (box [3, 11]×[0, 4] of problem 1: 64 + 16).
        assert_eq!(c.max_cost(), 80.0);
        // Shared clouds: every problem reads the same pair.
        let s = PointCloudCost::new(x.index_axis(Axis(0), 0), y.index_axis(Axis(0), 0)).unwrap();
        assert_eq!((s.batch(), s.cost_of(5, 0, 0)), (None, 25.0));
    }
}
