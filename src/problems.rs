//! The canonical benchmark problems of the design (`logot bench --problem NAME` and the
//! criterion benches build them from here, so both measure the same thing).

use crate::Real;
use ndarray::{Array1, Array2};

/// `n` points of `linspace(lo, hi, n)`.
pub fn linspace(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if n == 1 {
        return vec![lo];
    }
    (0..n)
        .map(|i| lo + (hi - lo) * i as f64 / (n - 1) as f64)
        .collect()
}

/// Squared-distance cost `C_ij = (x_i − x_j)²` on `x`, divided by its maximum when
/// `normalise` (POT's `M /= M.max()`).
pub fn squared_distance_cost<T: Real>(x: &[f64], normalise: bool) -> Array2<T> {
    let c = Array2::from_shape_fn((x.len(), x.len()), |(i, j)| (x[i] - x[j]).powi(2));
    let max = if normalise {
        c.iter().cloned().fold(0.0, f64::max).max(f64::MIN_POSITIVE)
    } else {
        1.0
    };
    c.mapv(|v| T::of(v / max))
}

/// Normalised Gaussian density `exp(−(x − mean)²/(2 sd²))` sampled on `x`, plus `floor`,
/// summing to 1.
pub fn gaussian_histogram<T: Real>(x: &[f64], mean: f64, sd: f64, floor: f64) -> Array1<T> {
    let h: Vec<f64> = x
        .iter()
        .map(|&v| (-0.5 * ((v - mean) / sd).powi(2)).exp() + floor)
        .collect();
    let s: f64 = h.iter().sum();
    h.iter().map(|&v| T::of(v / s)).collect()
}

/// otA: n = 100 on linspace(0, 100), μ = N(20, 10), ν = N(60, 30), `C = (xᵢ − xⱼ)²/max`;
/// solved at ε = 1e-3 for 200 iterations.
pub fn ot_a<T: Real>() -> (Array1<T>, Array1<T>, Array2<T>) {
    let x = linspace(0.0, 100.0, 100);
    (
        gaussian_histogram(&x, 20.0, 10.0, 0.0),
        gaussian_histogram(&x, 60.0, 30.0, 0.0),
        squared_distance_cost(&x, true),
    )
}

/// A batch of `b` Gaussian-bump histograms on linspace(0, 1, n): bump `k` has mean and
/// width from a fixed low-discrepancy sequence shifted by `seed`, plus 1e-6, normalised.
pub fn bump_histograms<T: Real>(b: usize, n: usize, seed: u64) -> Array2<T> {
    let x = linspace(0.0, 1.0, n);
    let golden = 0.618_033_988_749_895;
    let mut out = Array2::zeros((b, n));
    for k in 0..b {
        let t = (seed as f64 * 0.414_213_562 + k as f64 * golden).fract();
        let u = (seed as f64 * 0.732_050_807 + k as f64 * golden * golden).fract();
        let row = gaussian_histogram::<T>(&x, t, 0.05 + 0.2 * u, 1e-6);
        out.row_mut(k).assign(&row);
    }
    out
}

/// otB-shaped problem: `b` pairs of bump histograms on linspace(0, 1, n) with
/// `C = (xᵢ − xⱼ)²` (otB: b = 64, n = 2048; otBcpu: b = 8, n = 1024; ε = 1e-2, 100 iterations).
pub fn ot_b<T: Real>(b: usize, n: usize) -> (Array2<T>, Array2<T>, Array2<T>) {
    let x = linspace(0.0, 1.0, n);
    (
        bump_histograms(b, n, 1),
        bump_histograms(b, n, 2),
        squared_distance_cost(&x, false),
    )
}
