//! The steps of one stage of the loop: the backend's (fused, possibly relaxed)
//! iterations, the unbalanced half-step weight, the relaxed report and the warm-start
//! potentials.

use super::params::WarmStart;
use super::prepared::PreparedProblem;
use crate::backend::{Backend, Marginals, Potentials, Side};
use crate::entropic::unbalanced::Relaxation;
use crate::{Error, Real, Result};

/// `iters` iterations at regularisation `eps`: the backend's (possibly fused) balanced loop,
/// or for unbalanced problems its relaxed loop ([`Backend::iterate_relaxed`], `φ = ρ/(ρ + ε)`).
pub(super) fn iterate<T: Real, B: Backend<T>>(
    be: &B,
    cost: &B::Cost,
    eps: f64,
    relax: Option<Relaxation>,
    marginals: &Marginals<'_, B::Buffer>,
    pot: &mut Potentials<B::Buffer>,
    iters: usize,
) -> Result<()> {
    let Some(r) = relax else {
        return be.iterate(cost, T::of(eps), marginals, pot, iters);
    };
    let phi = |rho| T::of(crate::entropic::unbalanced::phi(rho, eps));
    be.iterate_relaxed(
        cost,
        T::of(eps),
        (phi(r.rho_mu), phi(r.rho_nu)),
        marginals,
        pot,
        iters,
    )
}

/// The unbalanced half-step from a balanced one: [`Backend::relax`] with `φ = ρ/(ρ + ε)`
/// (nothing to do for `ρ = ∞`).
pub(crate) fn relax_side<T: Real, B: Backend<T>>(
    be: &B,
    pot: &mut B::Buffer,
    log_marginal: &B::Buffer,
    eps: f64,
    rho: f64,
) -> Result<()> {
    if rho == f64::INFINITY {
        return Ok(());
    }
    be.relax(
        pot,
        log_marginal,
        T::of(eps),
        T::of(crate::entropic::unbalanced::phi(rho, eps)),
    )
}

/// The report of the unbalanced plans `(f, g)` define, per problem, in f64 from one
/// balanced half-step on each side.
pub(super) struct RelaxedReport {
    /// The larger residual of the two sides ([`RelaxedSide::residual`](crate::RelaxedSide::residual)).
    pub(super) errors: Vec<f64>,
    /// The plan's mass, the smaller of its two marginals' sums.
    pub(super) masses: Vec<f64>,
    /// The unbalanced objective ([`SinkhornResult::objective`](crate::SinkhornResult::objective)).
    pub(super) objectives: Vec<f64>,
}

/// [`RelaxedReport`] of the plans `(f, g)` define.
pub(super) fn relaxed_report<T: Real, B: Backend<T>>(
    be: &B,
    cost: &B::Cost,
    pot: &Potentials<B::Buffer>,
    marginals: &Marginals<'_, B::Buffer>,
    eps: T,
    r: Relaxation,
    pr: &PreparedProblem<T, B>,
) -> Result<RelaxedReport> {
    let mut f_half = be.filled(be.len(&pot.f), T::zero())?;
    be.sinkstep(cost, Side::Row, eps, &pot.g, marginals.log_mu, &mut f_half)?;
    let mut g_half = be.filled(be.len(&pot.g), T::zero())?;
    be.sinkstep(cost, Side::Col, eps, &pot.f, marginals.log_nu, &mut g_half)?;
    let e = eps.f64();
    let batch = pr.batch;
    let rows = be.relaxed_sides(batch, marginals.mu, &pot.f, &f_half, eps, r.rho_mu)?;
    let cols = be.relaxed_sides(batch, marginals.nu, &pot.g, &g_half, eps, r.rho_nu)?;
    let objectives = rows
        .iter()
        .zip(&cols)
        .enumerate()
        .map(|(k, (a, b))| {
            a.objective(r.rho_mu) + b.objective(r.rho_nu) - e * a.mass
                + e * pr.mu_masses[k] * pr.masses[k]
        })
        .collect();
    Ok(RelaxedReport {
        errors: rows
            .iter()
            .zip(&cols)
            .map(|(a, b)| a.residual.max(b.residual))
            .collect(),
        masses: rows
            .iter()
            .zip(&cols)
            .map(|(a, b)| a.mass.min(b.mass))
            .collect(),
        objectives,
    })
}

/// Warm-start potentials for the solver, `B×n` and `B×m`, flattened: each problem's pair
/// re-centred (`f − k`, `g + k`, `k` the centre of `f`'s finite range: the plan depends on
/// `f ⊕ g` only, and a shift `(c, −c)` would otherwise cost `f + g` its precision), and `g`
/// moved to the cost without its offsets (`g − shift`). Unbalanced problems (`recentre`
/// false) take them as they are.
pub(super) fn warm_potentials<T: Real>(
    w: &WarmStart,
    batch: usize,
    n: usize,
    m: usize,
    shift: &[f64],
    recentre: bool,
) -> Result<(Vec<T>, Vec<T>)> {
    if w.f.dim() != (batch, n) || w.g.dim() != (batch, m) {
        return Err(Error::shape(
            "warm_start",
            format!(
                "f is {:?} and g is {:?}, expected ({batch}, {n}) and ({batch}, {m})",
                w.f.dim(),
                w.g.dim()
            ),
        ));
    }
    // −∞ is allowed (zero-mass bins); NaN and +∞ are not.
    for (arg, a) in [("warm_start.f", &w.f), ("warm_start.g", &w.g)] {
        if let Some((idx, v)) = a
            .indexed_iter()
            .find(|(_, v)| v.is_nan() || **v == f64::INFINITY)
        {
            return Err(Error::NonFinite {
                arg: arg.into(),
                index: format!("{idx:?}"),
                value: v.to_string(),
            });
        }
    }
    let mut f = Vec::with_capacity(batch * n);
    let mut g = Vec::with_capacity(batch * m);
    for (b, (fr, gr)) in w.f.outer_iter().zip(w.g.outer_iter()).enumerate() {
        let (lo, hi) = fr
            .iter()
            .filter(|v| v.is_finite())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
        // Unbalanced problems: `(f − k, g + k)` is another plan's pair, kept as given.
        let k = if recentre && lo <= hi {
            0.5 * lo + 0.5 * hi
        } else {
            0.0
        };
        f.extend(fr.iter().map(|&v| T::of(v - k)));
        g.extend(gr.iter().map(|&v| T::of(v + k - shift[b])));
    }
    Ok((f, g))
}
