//! The costs a user builds: where the cost `C[i,j]` of a problem comes from.
//!
//! * a dense matrix, shared by a batch or one per problem ([`CostSource::Dense`],
//!   [`CostSource::DenseBatch`]);
//! * a regular grid on the unit cube with the squared Euclidean cost, never stored
//!   ([`GridCost`]);
//! * two point clouds with the cost computed on the fly, never stored ([`PointCloudCost`]).
//!
//! These are the inputs; a backend prepares them for its kernels
//! ([`Backend::prepare_cost`](crate::Backend::prepare_cost)).

mod grid;
mod pointcloud;

pub use grid::GridCost;
#[cfg(feature = "cuda")]
pub(crate) use pointcloud::box_cost;
pub(crate) use pointcloud::check_plan_entries;
pub use pointcloud::{CloudLayout, CrossPrecision, PointCloudCost, PointMetric};

use crate::validate::check_finite_max;
use crate::{Real, Result};
use ndarray::{ArrayView2, ArrayView3};

/// Sizes of a prepared cost: `n×m`, shared by every problem or one per problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CostDims {
    /// Number of source points (rows of `C`).
    pub n: usize,
    /// Number of target points (columns of `C`).
    pub m: usize,
    /// `Some(B)` when the cost holds one matrix per problem, `None` when shared.
    pub batch: Option<usize>,
}

/// Where the cost `C[i,j]` of a problem comes from.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum CostSource<'a, T> {
    /// One dense `n×m` matrix shared by every problem of the batch.
    Dense(ArrayView2<'a, T>),
    /// One dense `n×m` matrix per problem (`B×n×m`).
    DenseBatch(ArrayView3<'a, T>),
    /// Squared Euclidean distance between the points of a regular 1-, 2- or 3-D grid on
    /// the unit cube (`linspace(0, 1, N_d)` per axis, row-major flattening), shared by
    /// every problem. Never stored: `exp(−C/ε)` is a product of 1-D kernels, so a half-step
    /// is one 1-D log-convolution per axis (O(n·ΣN_d) instead of O(n²)).
    Grid(GridCost),
    /// A cost between two point clouds (`n×d` and `m×d`), shared by every problem or one
    /// pair per problem (`B×n×d`, `B×m×d`, [`PointCloudCost::batched`]), computed on the fly
    /// inside the kernels and never stored (memory `O((n + m)·d)` per pair).
    PointCloud(PointCloudCost<'a, T>),
}

impl<T> CostSource<'_, T> {
    /// Sizes of the cost: `n×m`, and the number of matrices of a per-problem cost.
    pub fn dims(&self) -> CostDims {
        match self {
            CostSource::Dense(c) => CostDims {
                n: c.nrows(),
                m: c.ncols(),
                batch: None,
            },
            CostSource::DenseBatch(c) => {
                let (b, n, m) = c.dim();
                CostDims {
                    n,
                    m,
                    batch: Some(b),
                }
            }
            CostSource::Grid(g) => CostDims {
                n: g.len(),
                m: g.len(),
                batch: None,
            },
            CostSource::PointCloud(p) => CostDims {
                n: p.n(),
                m: p.m(),
                batch: p.batch(),
            },
        }
    }
}

impl<'a, T> From<ArrayView2<'a, T>> for CostSource<'a, T> {
    fn from(c: ArrayView2<'a, T>) -> Self {
        CostSource::Dense(c)
    }
}
impl<'a, T> From<ArrayView3<'a, T>> for CostSource<'a, T> {
    fn from(c: ArrayView3<'a, T>) -> Self {
        CostSource::DenseBatch(c)
    }
}
impl<T> From<GridCost> for CostSource<'_, T> {
    fn from(g: GridCost) -> Self {
        CostSource::Grid(g)
    }
}
impl<'a, T> From<PointCloudCost<'a, T>> for CostSource<'a, T> {
    fn from(p: PointCloudCost<'a, T>) -> Self {
        CostSource::PointCloud(p)
    }
}

/// The largest |cost| of a cost source (0 for sources without a known bound); dense costs
/// are checked finite in the same pass.
pub(crate) fn max_abs_cost<T: Real>(cost: &CostSource<'_, T>) -> Result<f64> {
    Ok(match cost {
        CostSource::Dense(c) => check_finite_max("cost", c)?,
        CostSource::DenseBatch(c) => check_finite_max("cost", c)?,
        CostSource::PointCloud(c) => c.max_cost(),
        // Squared distances on the unit grid: at most 1 per axis.
        CostSource::Grid(g) => g.shape().len() as f64,
        #[allow(unreachable_patterns)]
        _ => 0.0,
    })
}
