//! A batch put on a backend once and solved many times ([`PreparedProblem`]), and what a
//! solve of it reads back before its outputs are written ([`Solution`]).

use super::report::Convergence;
use crate::backend::Backend;
use crate::entropic::unbalanced::Relaxation;
use crate::validate::check_histograms;
use crate::{Error, Real, Result};
use ndarray::ArrayView2;

/// What a solve of a prepared batch reads back: `⟨P_b, C_b⟩` of each problem (offsets
/// included), the unbalanced objective, and the report.
#[derive(Clone, Debug)]
pub(crate) struct Solution {
    /// `⟨P_b, C_b⟩` of each problem.
    pub distance: Vec<f64>,
    /// Unbalanced problems only: the objective ([`SinkhornResult::objective`](crate::SinkhornResult::objective)).
    pub objective: Option<Vec<f64>>,
    /// Iterations, marginal errors and whether the tolerance was met.
    pub convergence: Convergence,
}

/// The checks of [`Problem::new`](crate::Problem::new) for a batch of histograms on the backend (`batch` rows of
/// `per`): non-empty, finite, non-negative (the same errors, naming the first offending entry,
/// from the buffer downloaded only then), finite positive totals, returned with whether any
/// bin is empty.
pub(super) fn buffer_histograms<T: Real, B: Backend<T>>(
    be: &B,
    arg: &str,
    buf: &B::Buffer,
    batch: usize,
    per: usize,
) -> Result<(Vec<f64>, bool)> {
    if batch == 0 || per == 0 {
        return Err(Error::Empty {
            arg: arg.into(),
            detail: format!("shape {batch}×{per}"),
        });
    }
    crate::backend::check_buffer_len(arg, be.len(buf), batch * per)?;
    let stats = be.row_stats(buf, batch)?;
    if stats.iter().any(|s| s.non_finite > 0 || s.negative > 0) {
        let host = be.download(buf)?;
        let view = ArrayView2::from_shape((batch, per), &host)
            .map_err(|e| Error::shape(arg, e.to_string()))?;
        check_histograms(arg, &view)?;
    }
    let masses = crate::validate::check_masses(arg, stats.iter().map(|s| s.sum).collect())?;
    Ok((masses, stats.iter().any(|s| s.min <= 0.0)))
}

/// Start potentials already on the backend for a solve of a prepared batch: `f` (`B×n`)
/// and `g` (`B×m`) with `g + g_shift[b]` in the units of problem `b`'s cost as given (the
/// potentials a solve hands back, with its [`PreparedProblem::shifts`]).
pub(crate) struct DeviceStart<Buf> {
    pub f: Buf,
    pub g: Buf,
    pub g_shift: Vec<f64>,
}

/// A batch put on a backend by [`SinkhornSolver::prepare`](crate::SinkhornSolver::prepare):
/// the prepared cost, `μ`, `ν`, `log μ` and `log ν`, resident on the device, and the
/// problem's relaxation; solved by [`SinkhornSolver::solve_prepared`](crate::SinkhornSolver::solve_prepared).
pub struct PreparedProblem<T: Real, B: Backend<T>> {
    pub(super) cost: B::Cost,
    pub(super) mu: B::Buffer,
    pub(super) nu: B::Buffer,
    pub(super) log_mu: B::Buffer,
    pub(super) log_nu: B::Buffer,
    /// Whether `μ` (`ν`) has zero-mass bins (start potentials −∞ there; else all 0).
    pub(crate) empty_mu: bool,
    pub(crate) empty_nu: bool,
    pub(super) batch: usize,
    pub(super) n: usize,
    pub(super) m: usize,
    /// Largest |cost| without its offsets, for the ε resolution check.
    pub(super) max_abs_cost: f64,
    /// Largest |cost| as given.
    pub(super) max_abs_raw: f64,
    /// Each problem's cost offset ([`CostOffsets`]).
    pub(super) shift: Vec<f64>,
    /// `Σ ν` of each problem.
    pub(super) masses: Vec<f64>,
    /// `Σ μ` of each problem.
    pub(super) mu_masses: Vec<f64>,
    /// The relaxation when at least one marginal is relaxed (`None`: balanced).
    pub(crate) relaxation: Option<Relaxation>,
    /// Whether the cost is computed on the fly from point clouds (its plan has a size limit).
    pub(super) cloud: bool,
}

impl<T: Real, B: Backend<T>> PreparedProblem<T, B> {
    /// Number of problems, source points and target points.
    pub fn dims(&self) -> (usize, usize, usize) {
        (self.batch, self.n, self.m)
    }
    /// The largest `|C_ij|` of the cost as given (the start of
    /// [`EpsScaling::from_max_cost`](crate::EpsScaling::from_max_cost)).
    pub fn max_cost(&self) -> f64 {
        self.max_abs_raw
    }
    pub(crate) fn cost(&self) -> &B::Cost {
        &self.cost
    }
    /// The one check of a plan's size, made by every path that materialises a plan before
    /// it solves: plans between point clouds above the backends' limit are refused
    /// ([`check_plan_entries`](crate::cost::check_plan_entries)).
    pub(crate) fn check_plan(&self) -> Result<()> {
        if self.cloud {
            crate::cost::check_plan_entries(self.batch, self.n, self.m)?;
        }
        Ok(())
    }
    pub(crate) fn mu(&self) -> &B::Buffer {
        &self.mu
    }
    pub(crate) fn nu(&self) -> &B::Buffer {
        &self.nu
    }
    pub(crate) fn log_mu(&self) -> &B::Buffer {
        &self.log_mu
    }
    pub(crate) fn log_nu(&self) -> &B::Buffer {
        &self.log_nu
    }
    /// `Σ μ` and `Σ ν` of each problem.
    pub(crate) fn masses(&self) -> (&[f64], &[f64]) {
        (&self.mu_masses, &self.masses)
    }
    pub(crate) fn shifts(&self) -> &[f64] {
        &self.shift
    }
}

impl<T: Real, B: Backend<T>> std::fmt::Debug for PreparedProblem<T, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PreparedProblem {{ batch: {}, n: {}, m: {} }}",
            self.batch, self.n, self.m
        )
    }
}
