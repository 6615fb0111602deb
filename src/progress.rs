//! Progress of long runs: an [`Observer`] the solvers call as they go, and the error
//! history they keep on request (POT's `log=True`).
//!
//! ```
//! use logot::{CpuBackend, Observer, Problem, SinkhornParams, SinkhornSolver};
//! use std::sync::{Arc, Mutex};
//! let x: Vec<f64> = (0..50).map(|i| i as f64 / 49.0).collect();
//! let cost = logot::ndarray::Array2::from_shape_fn((50, 50), |(i, j)| (x[i] - x[j]).powi(2));
//! let mu = logot::ndarray::Array1::from_elem(50, 0.02);
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let log = seen.clone();
//! let params = SinkhornParams::new(1e-2)
//!     .observer(Observer::new(move |p| log.lock().unwrap().push((p.iteration, p.error))))
//!     .history(true);
//! let r = SinkhornSolver::new(CpuBackend, params).solve(&Problem::new(mu.view(), mu.view(), cost.view())?)?;
//! let seen = seen.lock().unwrap();
//! // One call per convergence check, with the error the history keeps.
//! assert_eq!(seen.len(), r.convergence.history.len());
//! assert!(seen.iter().zip(&r.convergence.history).all(|(s, h)| s.0 == h.iteration && s.1 == Some(h.error)));
//! # Ok::<(), logot::Error>(())
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Where a run stands, as an [`Observer`] sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct Progress {
    /// Iterations run so far (ε-scaling stages included).
    pub iteration: usize,
    /// The most iterations the run may take.
    pub max_iters: usize,
    /// The largest error over the batch at this check (the marginal error for Sinkhorn,
    /// POT's error for barycenters); `None` between checks (ε-scaling stages, or runs
    /// without a tolerance, which report every `check_every` iterations all the same).
    pub error: Option<f64>,
    /// The ε of the iterations just run.
    pub eps: f64,
    /// Time since the run started.
    pub elapsed: Duration,
    /// This is the run's last call (its final report).
    pub finished: bool,
}

/// A callback the solvers call with their [`Progress`]: at every convergence check, after
/// every ε-scaling stage, and every `check_every` iterations of a run without a tolerance.
/// Cheap to clone (shared).
#[derive(Clone)]
pub struct Observer(Arc<dyn Fn(&Progress) + Send + Sync>);

impl Observer {
    /// An observer that calls `f`.
    pub fn new(f: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        Observer(Arc::new(f))
    }
    /// Call it.
    pub fn notify(&self, p: &Progress) {
        (self.0)(p)
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Observer(..)")
    }
}

/// One convergence check of a run's error history.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct HistoryEntry {
    /// Iterations run at the check.
    pub iteration: usize,
    /// The largest error over the batch.
    pub error: f64,
}

/// A run's progress reporter: the observer (if any), the history (if asked), the clock.
pub(crate) struct Tracker<'a> {
    observer: Option<&'a Observer>,
    history: Option<Vec<HistoryEntry>>,
    start: std::time::Instant,
    max_iters: usize,
}

impl<'a> Tracker<'a> {
    pub(crate) fn new(observer: Option<&'a Observer>, history: bool, max_iters: usize) -> Self {
        Tracker {
            observer,
            history: history.then(Vec::new),
            start: std::time::Instant::now(),
            max_iters,
        }
    }
    /// Whether anyone listens between checks.
    pub(crate) fn observed(&self) -> bool {
        self.observer.is_some()
    }
    /// Report `iteration` (with the error of a check, if one ran; `finished` for the last).
    pub(crate) fn report(
        &mut self,
        iteration: usize,
        eps: f64,
        error: Option<f64>,
        finished: bool,
    ) {
        if let (Some(h), Some(e)) = (self.history.as_mut(), error) {
            h.push(HistoryEntry {
                iteration,
                error: e,
            });
        }
        if let Some(o) = self.observer {
            o.notify(&Progress {
                iteration,
                max_iters: self.max_iters,
                error,
                eps,
                elapsed: self.start.elapsed(),
                finished,
            });
        }
    }
    /// The history kept (empty when not asked for).
    pub(crate) fn history(self) -> Vec<HistoryEntry> {
        self.history.unwrap_or_default()
    }
}
