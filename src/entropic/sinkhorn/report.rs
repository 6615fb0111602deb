//! What a solve reports: per-problem and batch convergence, the result and the coupling,
//! and the errors and transport costs measured on a plan held on the host.

use super::problem::Problem;
use crate::backend::CostSource;
use crate::entropic::unbalanced::Relaxation;
use crate::progress::HistoryEntry;
use crate::Real;
use ndarray::{Array1, Array2, Array3, Axis};

/// How one problem of a batch ended.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct ProblemReport {
    /// The larger of `‖P·1 − μ‖₁` and `‖Pᵀ·1 − ν‖₁` for the plan handed back (the plan the
    /// returned potentials define; for [`SinkhornSolver::coupling`](crate::SinkhornSolver::coupling), the returned array itself).
    /// Unbalanced ([`Problem::relaxed`](crate::Problem::relaxed)): on each side, the `ℓ₁` change one more
    /// relaxed half-step would make to the plan's marginal, zero exactly at the optimality
    /// conditions `P·1 = μ ⊙ exp(−(f − ε log μ)/ρ_μ)`, `Pᵀ·1 = ν ⊙ exp(−(g − ε log ν)/ρ_ν)`
    /// (`‖P·1 − μ‖₁` on a side with `ρ = ∞`; [`RelaxedSide::residual`](crate::RelaxedSide::residual)),
    /// the larger of the two.
    pub marginal_error: f64,
    /// The mass the tolerance is relative to: `Σ ν` for a balanced problem; for an
    /// unbalanced one the mass `Σ P` of the plan handed back (the smaller of its two
    /// marginals' sums), which a constant added to the cost can make far smaller than the
    /// inputs' masses. `marginal_error / mass` is the relative error.
    pub mass: f64,
    /// `|Σ μ − Σ ν|` of a balanced problem (0 for an unbalanced one). A plan's row and
    /// column sums total the same, so no plan has a `marginal_error` below half of this gap,
    /// and after the solver's last half-step (which meets `μ`) the error is about all of it.
    /// Masses that differ within the equal-mass check (e.g. weights rounded to float32 and
    /// given as float64) are accepted; when `tol · mass` is below the gap, `converged` stays
    /// false whatever `max_iters`, `ε` or ε-scaling: the masses are the cause.
    pub mass_gap: f64,
    /// `marginal_error ≤ tol · mass`: the plan handed back meets the tolerance.
    pub converged: bool,
    /// Iterations this problem needed: the convergence check at which it first met its
    /// tolerance, or every iteration run when it did not (or when no check ran).
    pub iterations: usize,
}

/// How the solver ended: a summary over the batch and one [`ProblemReport`] per problem.
/// Every figure describes the result handed back, measured after the last iteration.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Convergence {
    /// Iterations run (ε-scaling stages included): the most any problem received.
    pub iterations: usize,
    /// Largest marginal error over the batch (absolute, in the units of the marginals):
    /// the largest [`ProblemReport::marginal_error`].
    pub marginal_error: f64,
    /// The tolerance `converged` was judged against, relative to each problem's
    /// [`ProblemReport::mass`]:
    /// the one asked for, or the precision's default (1e-9 in f64, 1e-5 in f32) when none
    /// or 0 was asked (0 runs every iteration; `converged` then says whether the result
    /// meets the default).
    pub tol: f64,
    /// Every problem converged.
    pub converged: bool,
    /// One report per problem, in batch order.
    pub problems: Vec<ProblemReport>,
    /// The largest error at every convergence check, then the final report's, when asked
    /// for ([`SinkhornParams::history`](crate::SinkhornParams::history)); empty otherwise.
    pub history: Vec<HistoryEntry>,
}

impl Convergence {
    /// The summary of per-problem reports after `iterations` iterations.
    pub fn of_problems(iterations: usize, tol: f64, problems: Vec<ProblemReport>) -> Self {
        Convergence {
            iterations,
            marginal_error: problems.iter().fold(0.0, |m, p| m.max(p.marginal_error)),
            tol,
            converged: !problems.is_empty() && problems.iter().all(|p| p.converged),
            problems,
            history: Vec::new(),
        }
    }

    /// Per-problem marginal errors, in batch order.
    pub fn marginal_errors(&self) -> Vec<f64> {
        self.problems.iter().map(|p| p.marginal_error).collect()
    }
}

/// A solved batch of entropic OT problems.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SinkhornResult<T> {
    /// Source potentials `f = ε log u`, `B×n` (−∞ on zero-mass bins).
    pub f: Array2<T>,
    /// Target potentials `g = ε log v`, `B×m`.
    pub g: Array2<T>,
    /// Transport cost `⟨P_b, C_b⟩` of each problem (POT's `sinkhorn2` value; for unbalanced
    /// problems `sinkhorn_unbalanced2(..., returnCost="linear")`).
    pub distance: Array1<T>,
    /// Unbalanced problems only ([`Problem::relaxed`](crate::Problem::relaxed)): the objective
    /// `⟨P,C⟩ + ε·KL(P‖μ⊗ν) + ρ_μ·KL(P·1‖μ) + ρ_ν·KL(Pᵀ·1‖ν)` of each returned plan, with
    /// the generalized `KL(x‖y) = Σ x log(x/y) − x + y` (a term with `ρ = ∞` is left out).
    /// POT's `returnCost="total"` uses `Σ x log(x/y)` without `− x + y`: it differs by
    /// `ε(Σμ Σν − m) + ρ_μ(Σμ − m) + ρ_ν(Σν − m)`, `m = Σ P`. `None` for balanced problems.
    pub objective: Option<Array1<T>>,
    /// Regularisation the plans belong to.
    pub eps: f64,
    /// Iterations, marginal error and whether the tolerance was met.
    pub convergence: Convergence,
}

/// A solved batch together with its plans.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CouplingResult<T> {
    /// Plans `P_b = exp((f_b ⊕ g_b − C_b)/ε)`, `B×n×m`.
    pub plan: Array3<T>,
    /// Potentials, distances and convergence.
    pub result: SinkhornResult<T>,
}

/// One plan array's report, measured on its entries in f64.
pub(super) struct Measured {
    /// The error [`ProblemReport::marginal_error`] describes.
    pub(super) error: f64,
    /// `⟨P, C⟩` against the problem's own (unshifted) cost.
    pub(super) cost: f64,
    /// What the tolerance is relative to ([`ProblemReport::mass`]).
    pub(super) mass: f64,
}

/// Each problem's report of a plan as an array (`B×n×m`), in f64: the larger of the row and
/// column violations `‖·‖₁`, and the cost against the problem's own (unshifted) cost.
pub(super) fn measure_plans<T: Real>(plan: &Array3<T>, problem: &Problem<'_, T>) -> Vec<Measured> {
    use rayon::prelude::*;
    let (batch, n, m) = plan.dim();
    (0..batch)
        .into_par_iter()
        .map(|b| {
            let p = plan.index_axis(Axis(0), b);
            let (mu, nu) = (problem.mu.row(b), problem.nu.row(b));
            let mut cols = vec![0.0f64; m];
            let mut row_err = 0.0;
            let mut cost = 0.0;
            for i in 0..n {
                let mut row = 0.0;
                for j in 0..m {
                    let v = p[[i, j]].f64();
                    row += v;
                    cols[j] += v;
                    if v != 0.0 {
                        cost += v * cost_entry(&problem.cost, b, i, j);
                    }
                }
                row_err += (row - mu[i].f64()).abs();
            }
            let col_err: f64 = cols.iter().zip(nu).map(|(c, v)| (c - v.f64()).abs()).sum();
            Measured {
                error: row_err.max(col_err),
                cost,
                mass: problem.masses[b],
            }
        })
        .collect()
}

/// [`measure_plans`] for unbalanced problems: on each side the change one more relaxed
/// half-step would make to the array's own marginal ([`RelaxedSide::residual`]: with the
/// array's row sums `R`, the half-step's `log(r'/R) = φ_μ·log(μ/R) − (f − ε log μ)/(ρ_μ + ε)`,
/// and alike for the columns), the larger of the two, `⟨P, C⟩`, and the array's mass.
///
/// [`RelaxedSide::residual`]: crate::RelaxedSide::residual
pub(super) fn measure_relaxed_plans<T: Real>(
    plan: &Array3<T>,
    problem: &Problem<'_, T>,
    result: &SinkhornResult<T>,
    r: Relaxation,
) -> Vec<Measured> {
    use crate::backend::half_step_change;
    use rayon::prelude::*;
    let (batch, n, m) = plan.dim();
    let eps = T::of(result.eps).f64();
    // One bin's change: weight `a`, the array's marginal `got`, the bin's potential.
    let change = |a: T, got: f64, pot: T, rho: f64| -> f64 {
        let a = a.f64();
        if a <= 0.0 {
            return got;
        }
        let log_ratio = (got / a).ln();
        half_step_change(a, got, log_ratio, pot.f64() - eps * a.ln(), eps, rho)
    };
    (0..batch)
        .into_par_iter()
        .map(|b| {
            let p = plan.index_axis(Axis(0), b);
            let (mu, nu) = (problem.mu.row(b), problem.nu.row(b));
            let (f, g) = (result.f.row(b), result.g.row(b));
            let mut cols = vec![0.0f64; m];
            let mut row_err = 0.0;
            let mut cost = 0.0;
            let mut mass = 0.0;
            for i in 0..n {
                let mut row = 0.0;
                for j in 0..m {
                    let v = p[[i, j]].f64();
                    row += v;
                    cols[j] += v;
                    if v != 0.0 {
                        cost += v * cost_entry(&problem.cost, b, i, j);
                    }
                }
                mass += row;
                row_err += change(mu[i], row, f[i], r.rho_mu);
            }
            let col_err: f64 = (0..m).map(|j| change(nu[j], cols[j], g[j], r.rho_nu)).sum();
            Measured {
                error: row_err.max(col_err),
                cost,
                mass,
            }
        })
        .collect()
}

/// `C_b[i, j]` of a cost source, in f64.
fn cost_entry<T: Real>(cost: &CostSource<'_, T>, b: usize, i: usize, j: usize) -> f64 {
    match cost {
        CostSource::Dense(c) => c[[i, j]].f64(),
        CostSource::DenseBatch(c) => c[[b, i, j]].f64(),
        CostSource::Grid(g) => g.cost(i, j),
        CostSource::PointCloud(p) => p.cost_of(b, i, j),
    }
}
