//! Input checks shared by every entry point. Each returns an [`Error`] naming the argument.

use crate::{Error, Real, Result};
use ndarray::{ArrayBase, ArrayView2, Data, Dimension};

/// Whether every entry of `v` is finite, and its smallest and largest entries: one pass
/// the compiler can vectorise, in fixed parallel chunks for large inputs (a 4096² cost is
/// 16.7 M entries; min and max are exact, so the result does not depend on the threads).
fn finite_and_range<T: Real>(v: &[T]) -> (bool, T, T) {
    const CHUNK: usize = 1 << 16;
    let one = |c: &[T]| {
        let (mut ok, mut lo, mut hi) = (true, T::infinity(), T::neg_infinity());
        for &x in c {
            ok &= x.abs() <= T::max_value(); // false for ±∞ and NaN
            lo = if x < lo { x } else { lo };
            hi = if x > hi { x } else { hi };
        }
        (ok, lo, hi)
    };
    if v.len() <= 4 * CHUNK {
        return one(v);
    }
    use rayon::prelude::*;
    v.par_chunks(CHUNK).map(one).reduce(
        || (true, T::infinity(), T::neg_infinity()),
        |a, b| {
            (
                a.0 && b.0,
                if b.1 < a.1 { b.1 } else { a.1 },
                if b.2 > a.2 { b.2 } else { a.2 },
            )
        },
    )
}

/// Whether every entry of `v` is finite, and the largest |entry|.
fn finite_and_max<T: Real>(v: &[T]) -> (bool, T) {
    let (ok, lo, hi) = finite_and_range(v);
    (
        ok,
        if v.is_empty() {
            T::zero()
        } else {
            lo.abs().max(hi.abs())
        },
    )
}

/// Every entry finite; the error names the first offending index.
pub(crate) fn check_finite<T: Real, S: Data<Elem = T>, D: Dimension>(
    arg: &str,
    a: &ArrayBase<S, D>,
) -> Result<()> {
    if let Some(v) = a.as_slice_memory_order() {
        if finite_and_max(v).0 {
            return Ok(());
        }
    }
    if let Some((idx, v)) = a.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(Error::NonFinite {
            arg: arg.into(),
            index: format!("{idx:?}"),
            value: v.to_string(),
        });
    }
    Ok(())
}

/// [`check_finite`] that also returns the largest |entry| (one pass).
pub(crate) fn check_finite_max<T: Real, S: Data<Elem = T>, D: Dimension>(
    arg: &str,
    a: &ArrayBase<S, D>,
) -> Result<f64> {
    if let Some(v) = a.as_slice_memory_order() {
        let (ok, max) = finite_and_max(v);
        if !ok {
            check_finite(arg, a)?; // the error, with the index of the first offender
        }
        return Ok(max.f64());
    }
    let mut max = 0.0f64;
    for v in a.iter() {
        if !v.is_finite() {
            check_finite(arg, a)?; // the error, with the index of the first offender
        }
        max = max.max(v.f64().abs());
    }
    Ok(max)
}

/// `[min, max]` of an array checked finite (the error names the first offender).
pub(crate) fn check_finite_range<T: Real, S: Data<Elem = T>, D: Dimension>(
    arg: &str,
    a: &ArrayBase<S, D>,
) -> Result<(f64, f64)> {
    let (ok, lo, hi) = match a.as_slice_memory_order() {
        Some(v) => finite_and_range(v),
        None => finite_and_range(&a.iter().copied().collect::<Vec<T>>()),
    };
    if !ok {
        check_finite(arg, a)?; // the error, with the index of the first offender
    }
    Ok((lo.f64(), hi.f64()))
}

/// A batch of histograms (one per row): non-empty, finite, non-negative, positive total.
/// Returns each row's total mass.
pub(crate) fn check_histograms<T: Real>(arg: &str, a: &ArrayView2<'_, T>) -> Result<Vec<f64>> {
    let (b, n) = a.dim();
    if b == 0 || n == 0 {
        return Err(Error::Empty {
            arg: arg.into(),
            detail: format!("shape {b}×{n}"),
        });
    }
    check_finite(arg, a)?;
    if let Some((idx, v)) = a.indexed_iter().find(|(_, v)| **v < T::zero()) {
        return Err(Error::NegativeMass {
            arg: arg.into(),
            index: format!("{idx:?}"),
            value: v.to_string(),
        });
    }
    let sums: Vec<f64> = a
        .rows()
        .into_iter()
        .map(|r| r.iter().map(|v| v.f64()).sum())
        .collect();
    check_masses(arg, sums)
}

/// The totals of a batch of `sums.len()` histograms already checked finite and
/// non-negative: finite (no f64 overflow) and positive. Returns them.
pub(crate) fn check_masses(arg: &str, sums: Vec<f64>) -> Result<Vec<f64>> {
    let b = sums.len();
    if let Some(k) = sums.iter().position(|s| !s.is_finite()) {
        // Finite entries whose sum overflows f64.
        return Err(Error::NonFinite {
            arg: arg.into(),
            index: if b > 1 {
                format!("sum of problem {k}")
            } else {
                "sum".into()
            },
            value: sums[k].to_string(),
        });
    }
    if let Some(k) = sums.iter().position(|&s| s <= 0.0) {
        let detail = if b > 1 {
            format!(" in problem {k}")
        } else {
            String::new()
        };
        return Err(Error::ZeroMass {
            arg: arg.into(),
            detail,
        });
    }
    Ok(sums)
}

/// Each problem's two histograms carry the same mass, within `T::MASS_TOL` (relative).
pub(crate) fn check_equal_mass<T: Real>(mu: &[f64], nu: &[f64]) -> Result<()> {
    for (k, (&a, &b)) in mu.iter().zip(nu).enumerate() {
        let rel = (a - b).abs() / a.max(b);
        if rel > T::MASS_TOL {
            let detail = if mu.len() > 1 {
                format!(" in problem {k}")
            } else {
                String::new()
            };
            return Err(Error::UnequalMass {
                detail,
                mu: a,
                nu: b,
                rel,
                tol: T::MASS_TOL,
            });
        }
    }
    Ok(())
}

/// A regularisation strength: finite and strictly positive, and a normal number (`1/ε`
/// must be finite: below f64's smallest normal, 2.2e-308, it is not).
pub(crate) fn check_eps(arg: &str, eps: f64) -> Result<()> {
    if !(eps.is_finite() && eps > 0.0) {
        return Err(Error::parameter(
            arg,
            eps,
            "the regularisation strength must be finite and > 0",
        ));
    }
    if eps < f64::MIN_POSITIVE {
        return Err(Error::parameter(
            arg,
            format!("{eps:e}"),
            format!(
                "below the smallest normal float64 ({:e}): 1/eps is not finite",
                f64::MIN_POSITIVE
            ),
        ));
    }
    Ok(())
}

/// ε is at least one rounding unit of the largest |cost| in precision `T`. Below that,
/// `(f + g − C)/ε` is rounding noise: the iterations still run, but the plan no longer
/// meets its marginals (its mass drifts far from 1, a distance can exceed every cost), so
/// the input is refused instead of answered with garbage.
pub(crate) fn check_eps_resolution<T: Real>(eps: f64, max_abs_cost: f64) -> Result<()> {
    if T::of(eps) < T::min_positive_value() {
        return Err(Error::parameter(
            "eps",
            format!("{eps:e}"),
            format!(
                "below the smallest normal {} ({:e}): 1/eps is not finite in that precision; \
                 compute in float64 or raise eps",
                T::NAME,
                T::min_positive_value()
            ),
        ));
    }
    if max_abs_cost.is_nan() || max_abs_cost > T::max_value().f64() {
        // Point clouds far apart: |x − y|² overflows the precision.
        return Err(Error::parameter(
            "cost",
            format!("max |C| = {max_abs_cost:e}"),
            format!("the costs overflow {}; rescale the inputs", T::NAME),
        ));
    }
    let floor = max_abs_cost * T::epsilon().f64();
    if eps < floor {
        let hint = if T::NAME == "float32" {
            "; compute in float64 or raise eps"
        } else {
            "; raise eps"
        };
        return Err(Error::parameter(
            "eps",
            format!("{eps:e}"),
            format!(
                "below the resolution of {} for costs up to {max_abs_cost:.3e}: eps must be ≥ {floor:.2e} \
                 (one rounding unit of the largest cost){hint}",
                T::NAME
            ),
        ));
    }
    Ok(())
}

/// A buffer of exactly `want` elements.
pub(crate) fn check_len(what: &str, len: usize, want: usize) -> Result<()> {
    if len != want {
        return Err(Error::shape(
            what,
            format!("has length {len} but {want} is needed"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    /// The parallel pass over a large array (many chunks) finds the largest |entry| and the
    /// first non-finite entry by index, in memory order and for a transposed view.
    #[test]
    fn large_arrays_report_the_max_and_the_first_offender() {
        let n = 1000;
        let mut a = Array2::from_shape_fn((n, n), |(i, j)| ((i * 7 + j * 13) % 1000) as f64 * 1e-3);
        a[[617, 3]] = -5.5;
        assert_eq!(check_finite_max("cost", &a).unwrap(), 5.5);
        assert_eq!(check_finite_max("cost", &a.t()).unwrap(), 5.5);
        a[[900, 999]] = f64::NAN;
        a[[800, 1]] = f64::INFINITY;
        let e = check_finite("cost", &a).unwrap_err().to_string();
        assert!(
            e.contains("cost") && e.contains("(800, 1)") && e.contains("inf"),
            "{e}"
        );
        let e = check_finite_max("cost", &a.view()).unwrap_err().to_string();
        assert!(e.contains("(800, 1)"), "{e}");
        // The same array of f32 with one NaN only.
        let mut b = a.mapv(|v| if v.is_finite() { v as f32 } else { 0.0 });
        b[[999, 0]] = f32::NAN;
        let e = check_finite("cost", &b).unwrap_err().to_string();
        assert!(e.contains("(999, 0)") && e.contains("NaN"), "{e}");
    }
}
