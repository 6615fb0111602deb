//! A finite-difference gradient checker (f64, central differences).
//!
//! For a scalar function `f` and a claimed gradient `g` at `x`, each entry is compared with
//! `(f(x + h_k e_k) − f(x − h_k e_k)) / (2 h_k)`, `h_k = step·max(1, |x_k|)` (truncation
//! error `O(h²)`, rounding error `O(ε_mach·|f|/h)`). The error of entry `k` is relative with
//! an absolute floor, `|num_k − g_k| / max(|num_k|, |g_k|, abs_floor)`, so entries that are
//! zero on both sides compare absolutely.
//!
//! ```
//! use logot::grad::{check_gradient, GradCheckParams};
//! let f = |x: &[f64]| x[0] * x[0] * x[1] + x[1].sin();
//! let x: [f64; 2] = [0.7, -1.3];
//! let grad = [2.0 * x[0] * x[1], x[0] * x[0] + x[1].cos()];
//! let report = check_gradient(f, &x, &grad, &GradCheckParams::default())?;
//! assert!(report.passed, "{report}");
//! # Ok::<(), logot::Error>(())
//! ```

use crate::{Error, Result};
use std::fmt;

/// Parameters of [`check_gradient`], set by builder methods
/// (`GradCheckParams::default().rel_tol(1e-5)`). `Default`: step 1e-5, tolerance 1e-6,
/// floor 1e-8.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GradCheckParams {
    /// Relative step: `h_k = step·max(1, |x_k|)`.
    pub step: f64,
    /// Largest accepted error (relative, with the floor below).
    pub rel_tol: f64,
    /// Absolute floor of the denominator of the relative error.
    pub abs_floor: f64,
}

impl Default for GradCheckParams {
    fn default() -> Self {
        GradCheckParams {
            step: 1e-5,
            rel_tol: 1e-6,
            abs_floor: 1e-8,
        }
    }
}

impl GradCheckParams {
    /// These parameters with the relative step `step`.
    pub fn step(self, step: f64) -> Self {
        GradCheckParams { step, ..self }
    }
    /// These parameters with the largest accepted error `rel_tol`.
    pub fn rel_tol(self, rel_tol: f64) -> Self {
        GradCheckParams { rel_tol, ..self }
    }
    /// These parameters with the floor `abs_floor` of the relative error's denominator.
    pub fn abs_floor(self, abs_floor: f64) -> Self {
        GradCheckParams { abs_floor, ..self }
    }
}

/// Result of [`check_gradient`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct GradCheckReport {
    /// Central-difference gradient.
    pub numeric: Vec<f64>,
    /// The gradient that was checked.
    pub analytic: Vec<f64>,
    /// Per-entry error `|num − g| / max(|num|, |g|, abs_floor)`.
    pub errors: Vec<f64>,
    /// Largest per-entry error.
    pub max_error: f64,
    /// Where it occurs.
    pub worst_index: usize,
    /// Norm-wise relative error `‖num − g‖₂ / max(‖num‖₂, abs_floor)`.
    pub norm_error: f64,
    /// `max_error ≤ rel_tol`.
    pub passed: bool,
    /// The parameters used.
    pub params: GradCheckParams,
}

impl fmt::Display for GradCheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = self.worst_index;
        write!(
            f,
            "gradient check {}: max error {:.3e} (tol {:.1e}) at index {k}: numeric {:.10e} vs analytic {:.10e}; \
             norm-wise error {:.3e} over {} entries",
            if self.passed { "passed" } else { "FAILED" },
            self.max_error,
            self.params.rel_tol,
            self.numeric.get(k).copied().unwrap_or(f64::NAN),
            self.analytic.get(k).copied().unwrap_or(f64::NAN),
            self.norm_error,
            self.numeric.len()
        )
    }
}

/// Central-difference gradient of `f` at `x` with relative step `step`:
/// `(f(x + h e_k) − f(x − h e_k)) / 2h`, `h = step·max(1, |x_k|)`.
///
/// Errors: empty or non-finite `x`, `step ≤ 0`, or `f` non-finite at a probe point.
///
/// ```
/// let g = logot::grad::numerical_gradient(|x| x[0] * x[0] + 3.0 * x[1], &[2.0, -1.0], 1e-5)?;
/// assert!((g[0] - 4.0).abs() < 1e-8 && (g[1] - 3.0).abs() < 1e-8);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn numerical_gradient(
    mut f: impl FnMut(&[f64]) -> f64,
    x: &[f64],
    step: f64,
) -> Result<Vec<f64>> {
    if x.is_empty() {
        return Err(Error::Empty {
            arg: "x".into(),
            detail: "no variables to differentiate".into(),
        });
    }
    if let Some(k) = x.iter().position(|v| !v.is_finite()) {
        return Err(Error::NonFinite {
            arg: "x".into(),
            index: k.to_string(),
            value: x[k].to_string(),
        });
    }
    if !(step.is_finite() && step > 0.0) {
        return Err(Error::parameter("step", step, "must be finite and > 0"));
    }
    let mut probe = x.to_vec();
    let mut out = Vec::with_capacity(x.len());
    for k in 0..x.len() {
        let h = step * x[k].abs().max(1.0);
        probe[k] = x[k] + h;
        let up = f(&probe);
        probe[k] = x[k] - h;
        let down = f(&probe);
        probe[k] = x[k];
        if !(up.is_finite() && down.is_finite()) {
            return Err(Error::Numerical(format!(
                "finite differences: f is not finite at x ± h·e_{k} ({up}, {down})"
            )));
        }
        // The actual step is (x+h) − (x−h) as represented.
        out.push((up - down) / ((x[k] + h) - (x[k] - h)));
    }
    Ok(out)
}

/// Compare `grad` with central differences of `f` at `x` (see the module docs).
///
/// Errors (rather than a failed report): `grad` of the wrong length or non-finite, invalid
/// parameters, or `f` non-finite at a probe point.
///
/// ```
/// use logot::grad::{check_gradient, GradCheckParams};
/// let f = |x: &[f64]| x[0].exp() * x[1];
/// let x = [0.5, 2.0];
/// let right = [0.5f64.exp() * 2.0, 0.5f64.exp()];
/// assert!(check_gradient(f, &x, &right, &GradCheckParams::default())?.passed);
/// let wrong = [right[0], 1.01 * right[1]];
/// let report = check_gradient(f, &x, &wrong, &GradCheckParams::default())?;
/// assert!(!report.passed && report.worst_index == 1);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn check_gradient(
    f: impl FnMut(&[f64]) -> f64,
    x: &[f64],
    grad: &[f64],
    opts: &GradCheckParams,
) -> Result<GradCheckReport> {
    if grad.len() != x.len() {
        return Err(Error::shape(
            "grad",
            format!("has {} entries but x has {}", grad.len(), x.len()),
        ));
    }
    if let Some(k) = grad.iter().position(|v| !v.is_finite()) {
        return Err(Error::NonFinite {
            arg: "grad".into(),
            index: k.to_string(),
            value: grad[k].to_string(),
        });
    }
    if !(opts.rel_tol.is_finite() && opts.rel_tol > 0.0) {
        return Err(Error::parameter(
            "rel_tol",
            opts.rel_tol,
            "must be finite and > 0",
        ));
    }
    if !(opts.abs_floor.is_finite() && opts.abs_floor >= 0.0) {
        return Err(Error::parameter(
            "abs_floor",
            opts.abs_floor,
            "must be finite and ≥ 0",
        ));
    }
    let numeric = numerical_gradient(f, x, opts.step)?;
    let errors: Vec<f64> = numeric
        .iter()
        .zip(grad)
        .map(|(&n, &g)| {
            let d = n.abs().max(g.abs()).max(opts.abs_floor);
            if d > 0.0 {
                (n - g).abs() / d
            } else {
                0.0
            }
        })
        .collect();
    let (worst_index, max_error) =
        errors
            .iter()
            .copied()
            .enumerate()
            .fold(
                (0, 0.0f64),
                |(bi, bv), (i, v)| if v > bv { (i, v) } else { (bi, bv) },
            );
    let diff: f64 = numeric
        .iter()
        .zip(grad)
        .map(|(n, g)| (n - g) * (n - g))
        .sum::<f64>()
        .sqrt();
    let norm: f64 = numeric.iter().map(|n| n * n).sum::<f64>().sqrt();
    let norm_error = diff / norm.max(opts.abs_floor).max(f64::MIN_POSITIVE);
    Ok(GradCheckReport {
        numeric,
        analytic: grad.to_vec(),
        errors,
        max_error,
        worst_index,
        norm_error,
        passed: max_error <= opts.rel_tol,
        params: opts.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_correct_gradient_and_rejects_a_wrong_one() {
        let f = |x: &[f64]| (x[0] * x[1]).exp() + x[2].powi(3) - 2.0 * x[0];
        let x: [f64; 3] = [0.3, -0.8, 1.7];
        let good = [
            x[1] * (x[0] * x[1]).exp() - 2.0,
            x[0] * (x[0] * x[1]).exp(),
            3.0 * x[2] * x[2],
        ];
        let rep = check_gradient(f, &x, &good, &GradCheckParams::default()).unwrap();
        assert!(rep.passed, "{rep}");
        assert!(rep.max_error < 1e-8, "{rep}");
        let mut bad = good;
        bad[1] *= 1.001;
        let rep = check_gradient(f, &x, &bad, &GradCheckParams::default()).unwrap();
        assert!(!rep.passed && rep.worst_index == 1, "{rep}");
    }

    #[test]
    fn zero_entries_compare_against_the_floor_and_bad_inputs_are_errors() {
        let f = |x: &[f64]| x[0] * x[0];
        let rep = check_gradient(f, &[0.0, 5.0], &[0.0, 0.0], &GradCheckParams::default()).unwrap();
        assert!(rep.passed, "{rep}");
        assert!(check_gradient(f, &[1.0], &[1.0, 2.0], &GradCheckParams::default()).is_err());
        assert!(check_gradient(f, &[f64::NAN], &[1.0], &GradCheckParams::default()).is_err());
        assert!(check_gradient(
            |x: &[f64]| x[0].ln(),
            &[0.0],
            &[1.0],
            &GradCheckParams::default()
        )
        .is_err());
    }
}
