//! Barycenters of one problem with chosen parameters on the CPU: what the top-level
//! functions compute with default parameters, through the solver the tests give parameters
//! (and a relaxation) to.

use logot::ndarray::{Array2, ArrayView, ArrayView1, ArrayView2, Dimension};
use logot::{
    BarycenterParams, BarycenterProblem, BarycenterResult, BarycenterSolver, CostSource,
    CpuBackend, GridCost, Real, Relaxation, Result,
};

/// The barycenter of the rows of `histograms` with `weights` against `cost` with `params`
/// (relaxed when `relaxation` is given).
pub fn barycenter<'a, T: Real>(
    histograms: ArrayView2<'a, T>,
    weights: ArrayView1<'a, T>,
    cost: impl Into<CostSource<'a, T>>,
    params: &BarycenterParams,
    relaxation: Option<Relaxation>,
) -> Result<BarycenterResult<T>> {
    let mut problem = BarycenterProblem::new(histograms, weights)?;
    if let Some(r) = relaxation {
        problem = problem.relaxed(r);
    }
    let solver = BarycenterSolver::new(CpuBackend, params.clone());
    Ok(solver.solve(&problem, cost.into())?.remove(0))
}

/// [`barycenter`] of `K` images on the unit grid (`K×N_0[×N_1[×N_2]]`), as
/// `logot::grid_barycenter` computes it; the histogram flat (row-major over the image).
pub fn grid_barycenter<T: Real, D: Dimension>(
    images: ArrayView<'_, T, D>,
    weights: ArrayView1<'_, T>,
    params: &BarycenterParams,
    relaxation: Option<Relaxation>,
) -> Result<BarycenterResult<T>> {
    let shape = images.shape().to_vec();
    let grid = GridCost::new(&shape[1..])?;
    let flat: Vec<T> = images.iter().copied().collect();
    let flat = Array2::from_shape_vec((shape[0], grid.len()), flat)
        .map_err(|e| logot::Error::shape("images", e))?;
    barycenter(flat.view(), weights, grid, params, relaxation)
}
