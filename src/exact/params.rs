//! Parameters of the exact solvers.

use std::time::Duration;

/// Which exact algorithm [`emd`](super::emd) runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EmdMethod {
    /// The assignment solver for square problems whose weights are all equal (minibatch
    /// OT) between point clouds of dimension 8 or more, where it is the faster; the
    /// network simplex otherwise (dense costs, clouds of lower dimension, other weights).
    #[default]
    Auto,
    /// The network simplex, whatever the weights.
    NetworkSimplex,
    /// The assignment solver (shortest augmenting paths); an [`Error`](crate::Error) for
    /// a problem that is not square with all weights equal.
    Assignment,
}

/// Parameters of [`emd`](super::emd) and its batched and point-cloud forms, set by builder
/// methods: `EmdParams::default().max_iters(1000).method(EmdMethod::NetworkSimplex)`.
///
/// ```
/// use logot::exact::{EmdMethod, EmdParams};
/// let p = EmdParams::default().max_iters(1000).method(EmdMethod::NetworkSimplex);
/// assert!(p.max_time.is_none() && p.certificate_tol == 1e-9 && p.max_iters == 1000);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct EmdParams {
    /// The most pivots (network simplex) or augmentations (assignment) one problem may
    /// take (POT's `numItermax`, whose default of 100,000 is too few for n = m = 5000).
    /// Reaching it is reported (`converged = false`), not an error; the certificate of the
    /// plan handed back says how far it is from optimal and from its marginals.
    pub max_iters: usize,
    /// The most time one problem may take (`None`: no limit), reported like `max_iters`.
    pub max_time: Option<Duration>,
    /// The algorithm.
    pub method: EmdMethod,
    /// Tolerance of the certificate: a result is `exact` when the solver reached
    /// optimality and its duality gap (relative to total mass × largest |cost|), largest
    /// dual violation (relative to the largest |cost|) and marginal errors (relative to
    /// the mass) are all within it.
    pub certificate_tol: f64,
    /// Point clouds with at most this many pairs (`n·m`) have their cost matrix computed
    /// once and stored (8 bytes a pair); larger ones compute each cost when it is read and
    /// store nothing of size `n·m`.
    pub store_costs_below: usize,
    /// Candidate columns per row the network simplex prices first (each row's cheapest,
    /// then those of negative reduced cost that a pass over every pair finds); 0 prices
    /// every pair in blocks. Changes the speed, never the result: optimality is always
    /// decided by a pass over every pair.
    pub candidates_per_row: usize,
}

impl Default for EmdParams {
    fn default() -> Self {
        EmdParams {
            max_iters: u32::MAX as usize,
            max_time: None,
            method: EmdMethod::Auto,
            certificate_tol: 1e-9,
            store_costs_below: 1 << 22,
            candidates_per_row: 0,
        }
    }
}

impl EmdParams {
    /// These parameters with at most `max_iters` pivots or augmentations a problem.
    pub fn max_iters(self, max_iters: usize) -> Self {
        EmdParams { max_iters, ..self }
    }
    /// These parameters with a time limit a problem (`None`: none).
    pub fn max_time(self, max_time: impl Into<Option<Duration>>) -> Self {
        EmdParams {
            max_time: max_time.into(),
            ..self
        }
    }
    /// These parameters with the algorithm `method`.
    pub fn method(self, method: EmdMethod) -> Self {
        EmdParams { method, ..self }
    }
    /// These parameters with the certificate's relative tolerance `certificate_tol`.
    pub fn certificate_tol(self, certificate_tol: f64) -> Self {
        EmdParams {
            certificate_tol,
            ..self
        }
    }
    /// These parameters storing the costs of point clouds with at most this many pairs.
    pub fn store_costs_below(self, store_costs_below: usize) -> Self {
        EmdParams {
            store_costs_below,
            ..self
        }
    }
    /// These parameters pricing `candidates_per_row` candidate columns a row first (0: every
    /// pair, in blocks).
    pub fn candidates_per_row(self, candidates_per_row: usize) -> Self {
        EmdParams {
            candidates_per_row,
            ..self
        }
    }

    /// Checks every field (before any work).
    pub(crate) fn check(&self) -> crate::Result<()> {
        if self.max_iters == 0 {
            return Err(crate::Error::parameter(
                "max_iters",
                0,
                "at least one iteration is needed",
            ));
        }
        if !(self.certificate_tol.is_finite() && self.certificate_tol >= 0.0) {
            return Err(crate::Error::parameter(
                "certificate_tol",
                self.certificate_tol,
                "must be finite and ≥ 0",
            ));
        }
        Ok(())
    }
}
