//! Unbalanced entropic OT: the marginal constraints relaxed to KL penalties.
//!
//! The problem (POT's `ot.unbalanced.sinkhorn_unbalanced(a, b, M, reg, reg_m, reg_type="kl")`):
//!
//! `min_P ⟨P, C⟩ + ε·KL(P ‖ μ⊗ν) + ρ_μ·KL(P·1 ‖ μ) + ρ_ν·KL(Pᵀ·1 ‖ ν)`,
//!
//! with the generalized KL `KL(x ‖ y) = Σ x log(x/y) − x + y`; `ρ = ∞` keeps that marginal
//! exact (semi-unbalanced). With `P = exp((f ⊕ g − C)/ε)` each half-step is the balanced
//! one ([`Backend::sinkstep`](crate::Backend::sinkstep)) blended with `ε log μ`:
//!
//! `f ← (1 − φ_μ)·ε log μ + φ_μ·(ε log μ − ε LSE_j((g_j − C_ij)/ε))`, `φ_μ = ρ_μ/(ρ_μ + ε)`,
//!
//! and the same for `g` with `φ_ν`. At the optimum `P·1 = μ ⊙ exp(−(f − ε log μ)/ρ_μ)` and
//! `Pᵀ·1 = ν ⊙ exp(−(g − ε log ν)/ρ_ν)`, i.e. each potential is its own relaxed half-step.
//! The solver's error on a side is how far one more half-step would move the plan's
//! marginal `r` there: `‖r' − r‖₁` with `r' = r^{1−φ}·(a ⊙ exp(−(pot − ε log a)/ρ))^φ`
//! (`‖r − a‖₁` for `ρ = ∞`), judged relative to the plan's mass `Σ r`. Measured this way
//! rather than as `‖r − a ⊙ exp(−(pot − ε log a)/ρ)‖₁` (the same conditions, `1/φ` times
//! larger near the optimum), the rounding of a potential near `ε log a` enters as `1/(ρ+ε)`,
//! not `1/ρ`, so `ρ ≪ ε` does not make an exact plan look unconverged.

pub use crate::backend::{relaxed_sides, RelaxedSide};

use crate::{Error, Real, Result};

/// KL relaxation of the marginals: `ρ_μ·KL(P·1 ‖ μ) + ρ_ν·KL(Pᵀ·1 ‖ ν)` replaces the
/// constraints `P·1 = μ`, `Pᵀ·1 = ν`. `ρ = ∞` keeps that side exact; both infinite is the
/// balanced problem. POT's `reg_m` (a scalar, or the pair `(ρ_μ, ρ_ν)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Relaxation {
    /// `ρ_μ`, the weight of `KL(P·1 ‖ μ)` (> 0, `f64::INFINITY` for an exact source marginal).
    pub rho_mu: f64,
    /// `ρ_ν`, the weight of `KL(Pᵀ·1 ‖ ν)` (> 0, `f64::INFINITY` for an exact target marginal).
    pub rho_nu: f64,
}

impl Relaxation {
    /// The same weight `ρ` on both marginals (POT's scalar `reg_m`).
    pub fn kl(rho: f64) -> Self {
        Relaxation {
            rho_mu: rho,
            rho_nu: rho,
        }
    }

    /// One weight per marginal (POT's `reg_m = (ρ_μ, ρ_ν)`); `f64::INFINITY` keeps that
    /// marginal exact.
    pub fn kl_each(rho_mu: f64, rho_nu: f64) -> Self {
        Relaxation { rho_mu, rho_nu }
    }

    /// Both weights infinite: the balanced problem.
    pub fn is_balanced(&self) -> bool {
        self.rho_mu == f64::INFINITY && self.rho_nu == f64::INFINITY
    }

    /// Check that each weight is > 0 and not NaN (`∞` allowed); the error names
    /// `relaxation.rho_mu` or `relaxation.rho_nu`.
    pub fn validate(&self) -> Result<()> {
        for (arg, rho) in [
            ("relaxation.rho_mu", self.rho_mu),
            ("relaxation.rho_nu", self.rho_nu),
        ] {
            if rho.is_nan() || rho <= 0.0 {
                return Err(Error::parameter(
                    arg,
                    rho,
                    "the marginal penalty ρ must be > 0 (ρ = ∞ keeps that marginal exact)",
                ));
            }
        }
        Ok(())
    }
}

/// POT's scalar `reg_m`: [`Relaxation::kl`].
impl From<f64> for Relaxation {
    fn from(rho: f64) -> Self {
        Relaxation::kl(rho)
    }
}

/// POT's pair `reg_m = (ρ_μ, ρ_ν)`: [`Relaxation::kl_each`].
impl From<(f64, f64)> for Relaxation {
    fn from((rho_mu, rho_nu): (f64, f64)) -> Self {
        Relaxation::kl_each(rho_mu, rho_nu)
    }
}

/// `ρ/(ρ + ε)`, 1 for `ρ = ∞`.
pub(crate) fn phi(rho: f64, eps: f64) -> f64 {
    if rho == f64::INFINITY {
        1.0
    } else {
        rho / (rho + eps)
    }
}

/// A side's term of the unbalanced dual, per unit of mass: `ψ_ρ(t) = −ρ·(e^{−t/ρ} − 1)`
/// (`t` for `ρ = ∞`), with `t = f − ε log a` the potential relative to the reference `a`.
pub(crate) fn dual_term(t: f64, rho: f64) -> f64 {
    if rho == f64::INFINITY {
        t
    } else {
        -rho * (-t / rho).exp_m1()
    }
}

/// `e^{−t/ρ}` (1 for `ρ = ∞`): the ratio `(P·1)_k / a_k` that the optimality condition asks
/// of a bin whose relative potential is `t`.
pub(crate) fn mass_ratio(t: f64, rho: f64) -> f64 {
    if rho == f64::INFINITY {
        1.0
    } else {
        (-t / rho).exp()
    }
}

/// One side of one problem of the unbalanced dual
/// `D = Σ_i μ_i ψ_{ρ_μ}(f̂_i) + Σ_j ν_j ψ_{ρ_ν}(ĝ_j) − ε (Σ P − Σμ·Σν)`
/// (`f̂ = f − ε log μ`, `ĝ = g − ε log ν`, [`dual_term`]) and its partial derivatives with
/// respect to the side's weights at fixed relative potentials:
///
/// `∂D/∂μ_i = ψ_{ρ_μ}(f̂_i) − ε·((P·1)_i/μ_i − Σν)`.
///
/// `a`, `pot`: the side's weights and potentials (`f`, in the solver's convention
/// `P = exp((f ⊕ g − C)/ε)`); `marg`: the plan's marginal on that side; `empty`: the
/// relative potential an empty bin would take (`φ·(−ε LSE)`, the half-step with
/// `log a = 0`), read only where `a_k = 0` (there `(P·1)_k/a_k` is replaced by its limit
/// `e^{−f̂_k/ρ}`); `other_mass`: `Σ` of the other side's weights. Returns
/// `(Σ_k a_k ψ(f̂_k), gradient)`, in f64.
pub(crate) fn dual_side<T: Real>(
    a: &[T],
    pot: &[T],
    marg: &[f64],
    empty: Option<&[T]>,
    other_mass: f64,
    eps: f64,
    rho: f64,
) -> (f64, Vec<f64>) {
    let mut value = 0.0;
    let grad = (0..a.len())
        .map(|k| {
            let ak = a[k].f64();
            if ak > 0.0 {
                let t = pot[k].f64() - eps * ak.ln();
                let psi = dual_term(t, rho);
                value += ak * psi;
                psi - eps * (marg[k] / ak - other_mass)
            } else {
                let t = empty.map_or(f64::NAN, |e| e[k].f64());
                dual_term(t, rho) - eps * (mass_ratio(t, rho) - other_mass)
            }
        })
        .collect();
    (value, grad)
}
