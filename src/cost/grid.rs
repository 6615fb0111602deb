//! Regular grids on the unit cube with the squared Euclidean cost.

use crate::{Error, Real, Result};
use ndarray::Array2;

/// A regular grid of `N_0 × … × N_{d−1}` points (`d` = 1, 2 or 3) on the unit cube, with
/// coordinates `linspace(0, 1, N_k)` along axis `k` (a single point sits at 0) and the cost
/// `C(x, y) = |x − y|² = Σ_k (x_k − y_k)²`, POT's `convolutional_barycenter2d` convention.
///
/// Points are flattened row-major (the last axis is contiguous), as NumPy and ndarray store
/// an image. Because `exp(−C/ε) = Π_k exp(−(x_k − y_k)²/ε)`, a log-domain half-step is one
/// 1-D log-sum-exp pass per axis and the `n×n` cost is never formed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GridCost {
    shape: Vec<usize>,
}

impl GridCost {
    /// A grid of the given shape (1 to 3 axes, each with at least one point).
    pub fn new(shape: &[usize]) -> Result<Self> {
        if shape.is_empty() || shape.len() > 3 {
            return Err(Error::shape(
                "grid",
                format!("shape {shape:?}: a grid has 1, 2 or 3 axes"),
            ));
        }
        if shape.contains(&0) {
            return Err(Error::Empty {
                arg: "grid".into(),
                detail: format!("shape {shape:?}"),
            });
        }
        if shape
            .iter()
            .try_fold(1usize, |a, &b| a.checked_mul(b))
            .is_none()
        {
            return Err(Error::shape(
                "grid",
                format!("shape {shape:?} has too many points"),
            ));
        }
        Ok(GridCost {
            shape: shape.to_vec(),
        })
    }

    /// A 2-D grid of `rows × cols` points (an image).
    pub fn image(rows: usize, cols: usize) -> Result<Self> {
        Self::new(&[rows, cols])
    }

    /// Points per axis.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Total number of points `n = Π N_k`.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Always false: a grid has at least one point.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Coordinate of index `i` along an axis with `n` points: `linspace(0, 1, n)[i]`.
    pub fn coordinate(n: usize, i: usize) -> f64 {
        if n <= 1 {
            0.0
        } else if i + 1 == n {
            1.0
        } else {
            i as f64 * (1.0 / (n - 1) as f64)
        }
    }

    /// Multi-index of the flat (row-major) point index `p`.
    pub fn unravel(&self, mut p: usize) -> [usize; 3] {
        let mut idx = [0usize; 3];
        for (k, &n) in self.shape.iter().enumerate().rev() {
            idx[k] = p % n;
            p /= n;
        }
        idx
    }

    /// Cost between flat point indices `p` and `q`: `Σ_k (x_k − y_k)²`.
    pub fn cost(&self, p: usize, q: usize) -> f64 {
        let (a, b) = (self.unravel(p), self.unravel(q));
        self.shape
            .iter()
            .enumerate()
            .map(|(k, &n)| {
                let d = Self::coordinate(n, a[k]) - Self::coordinate(n, b[k]);
                d * d
            })
            .sum()
    }

    /// The dense `n×n` cost matrix (for small grids: tests, comparisons, plots).
    pub fn to_dense<T: Real>(&self) -> Array2<T> {
        let n = self.len();
        Array2::from_shape_fn((n, n), |(p, q)| T::of(self.cost(p, q)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_validated() {
        assert!(GridCost::new(&[]).is_err());
        assert!(GridCost::new(&[2, 2, 2, 2]).is_err());
        assert!(GridCost::new(&[3, 0]).is_err());
        assert_eq!(GridCost::new(&[3, 4]).map(|g| g.len()).ok(), Some(12));
    }

    #[test]
    fn cost_is_squared_distance_on_unit_square() {
        let g = GridCost::image(3, 5).unwrap();
        // (row 2, col 0) = (1, 0) and (row 0, col 4) = (0, 1): distance² = 2.
        assert_eq!(g.cost(10, 4), 2.0);
        // (row 1, col 1) = (0.5, 0.25) and (row 0, col 3) = (0, 0.75): 0.25 + 0.25.
        assert!((g.cost(6, 3) - 0.5).abs() < 1e-15);
        assert_eq!(g.unravel(13), [2, 3, 0]);
    }
}
