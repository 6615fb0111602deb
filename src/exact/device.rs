//! Which exact problems the GPU auction takes (`CudaBackend::emd_batch` and
//! `CudaBackend::emd_points_batch`, feature `cuda`, solve every other batch on the CPU): assignment
//! problems, square with all weights of each side equal, of at most [`AUCTION_MAX_N`]
//! points, with a dense cost or the squared Euclidean cost of two clouds. Callers that
//! promise the GPU (a `cuda` backend asked for by name) refuse other input with
//! [`auction_refusal`]'s error instead of solving it on the CPU unannounced.

use super::costs::Metric;
use super::params::{EmdMethod, EmdParams};
use crate::{Error, Real};
use ndarray::ArrayView2;

/// The most points a problem may have on the GPU auction (its prices and assignment live
/// in one thread block's shared memory; the kernel's `AUC_MAX_N`).
pub const AUCTION_MAX_N: usize = 4096;

/// Why the GPU auction does not take a batch of exact problems of `n` sources and `m`
/// targets, as an [`Error`] naming the argument at fault; `None` when it does: the method
/// is [`EmdMethod::Auto`] or [`EmdMethod::Assignment`], `n = m ≤ AUCTION_MAX_N`, every
/// row of `mu` and of `nu` has all its entries equal and positive (`None`: uniform), and
/// the cost is dense (`metric` `None`) or the squared Euclidean cost of two clouds.
///
/// ```
/// use logot::exact::{auction_refusal, EmdParams, AUCTION_MAX_N};
/// use ndarray::array;
/// let uniform = array![[0.25f64, 0.25, 0.25, 0.25]];
/// assert!(auction_refusal(Some(uniform.view()), None, 4, 4, None, &EmdParams::default()).is_none());
/// let skewed = array![[0.1f64, 0.2, 0.3, 0.4]];
/// let e = auction_refusal(Some(skewed.view()), None, 4, 4, None, &EmdParams::default()).unwrap();
/// assert!(e.to_string().starts_with("mu"));
/// assert!(auction_refusal::<f64>(None, None, 4, 5, None, &EmdParams::default()).is_some());
/// assert!(auction_refusal::<f64>(None, None, AUCTION_MAX_N + 1, AUCTION_MAX_N + 1, None,
///     &EmdParams::default()).is_some());
/// # Ok::<(), logot::Error>(())
/// ```
pub fn auction_refusal<T: Real>(
    mu: Option<ArrayView2<'_, T>>,
    nu: Option<ArrayView2<'_, T>>,
    n: usize,
    m: usize,
    metric: Option<Metric>,
    params: &EmdParams,
) -> Option<Error> {
    const WHY: &str = "the GPU auction solves assignment problems (square, uniform weights); \
                       use the CPU backend";
    if !matches!(params.method, EmdMethod::Auto | EmdMethod::Assignment) {
        let name = match params.method {
            EmdMethod::NetworkSimplex => "network_simplex",
            _ => "another method",
        };
        return Some(Error::parameter(
            "method",
            name,
            "the GPU runs the auction only (method auto or assignment); use the CPU backend",
        ));
    }
    if n != m {
        return Some(Error::shape(
            "cost",
            format!("{n}×{m} is not square: {WHY}"),
        ));
    }
    if n > AUCTION_MAX_N {
        return Some(Error::shape(
            "cost",
            format!("{n} points a problem: the GPU auction takes at most {AUCTION_MAX_N}; use the CPU backend"),
        ));
    }
    if let Some(metric) = metric {
        if !metric.is_squared() {
            let name = match metric {
                Metric::EuclideanPow(p) => format!("|x − y|^{p}"),
                _ => "another cost".into(),
            };
            return Some(Error::parameter(
                "metric",
                name,
                "the GPU auction forms the squared Euclidean cost only; use the CPU backend",
            ));
        }
    }
    for (w, arg) in [(mu, "mu"), (nu, "nu")] {
        let Some(w) = w else { continue };
        let uniform = w.rows().into_iter().all(|row| {
            let first = row.first().copied();
            first.is_some_and(|f| f.f64() > 0.0 && row.iter().all(|&v| v == f))
        });
        if !uniform {
            return Some(Error::parameter(
                arg,
                "not uniform",
                format!("weights of a problem differ: {WHY}"),
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn refuses_by_naming_the_argument() {
        let p = EmdParams::default();
        let u = array![[0.5f32, 0.5], [0.5, 0.5]];
        assert!(auction_refusal(Some(u.view()), Some(u.view()), 2, 2, None, &p).is_none());
        let zero = array![[0.0f32, 0.0]];
        let e = auction_refusal(None, Some(zero.view()), 2, 2, None, &p).unwrap();
        assert!(e.to_string().starts_with("nu"), "{e}");
        let e = auction_refusal::<f32>(None, None, 2, 2, Some(Metric::EuclideanPow(1.0)), &p);
        assert!(e.unwrap().to_string().starts_with("metric"));
        let simplex = p.clone().method(EmdMethod::NetworkSimplex);
        let e = auction_refusal::<f32>(None, None, 2, 2, None, &simplex).unwrap();
        assert!(e.to_string().starts_with("method"), "{e}");
        let e = auction_refusal::<f32>(None, None, 3, 2, None, &p).unwrap();
        assert!(e.to_string().starts_with("cost"), "{e}");
    }
}
