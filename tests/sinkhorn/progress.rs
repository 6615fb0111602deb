//! The progress observer and the error history: when they are called, with what.

use logot::{
    BarycenterParams, CpuBackend, EpsScaling, Observer, Problem, Progress, SinkhornParams,
    SinkhornSolver,
};
use ndarray::{Array1, Array2};
use std::sync::{Arc, Mutex};

fn problem(n: usize) -> (Array1<f64>, Array1<f64>, Array2<f64>) {
    let x: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    let cost = Array2::from_shape_fn((n, n), |(i, j)| (x[i] - x[j]).powi(2));
    let bump = |c: f64| {
        let h = Array1::from_iter(x.iter().map(|&t| (-(t - c).powi(2) / 0.02).exp() + 1e-3));
        let s = h.sum();
        h / s
    };
    (bump(0.3), bump(0.7), cost)
}

fn recorder() -> (Observer, Arc<Mutex<Vec<Progress>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    (Observer::new(move |p| log.lock().unwrap().push(*p)), seen)
}

#[test]
fn sinkhorn_reports_every_check_and_keeps_the_history() {
    let (mu, nu, cost) = problem(60);
    let (observer, seen) = recorder();
    let params = SinkhornParams::new(5e-3)
        .observer(observer)
        .history(true)
        .check_every(7);
    let r = SinkhornSolver::new(CpuBackend, params)
        .solve(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap())
        .unwrap();
    let seen = seen.lock().unwrap();
    let hist = &r.convergence.history;
    assert!(r.convergence.converged && hist.len() >= 3);
    assert_eq!(seen.len(), hist.len());
    // Checks after iterations 7, 14, 21, … (each check's g half-step begins the next
    // iteration), then the final report with the returned result's error.
    for (k, (s, h)) in seen.iter().zip(hist).enumerate() {
        assert_eq!((s.iteration, s.error), (h.iteration, Some(h.error)));
        assert_eq!(s.max_iters, 1000);
        if k + 1 < hist.len() {
            assert_eq!(h.iteration, 7 * (k + 1));
        }
    }
    let last = hist.last().unwrap();
    assert_eq!(last.iteration, r.convergence.iterations);
    assert_eq!(last.error, r.convergence.marginal_error);
    assert!(seen.windows(2).all(|w| w[0].elapsed <= w[1].elapsed));
    // The errors fall.
    assert!(hist[0].error > 10.0 * last.error);
}

#[test]
fn runs_without_a_tolerance_and_eps_scaling_still_report() {
    let (mu, nu, cost) = problem(40);
    let (observer, seen) = recorder();
    let params = SinkhornParams::new(1e-2)
        .fixed_iterations(100)
        .observer(observer)
        .check_every(10)
        .eps_scaling(EpsScaling::from_max_cost(1.0));
    let r = SinkhornSolver::new(CpuBackend, params)
        .solve(&Problem::new(mu.view(), nu.view(), cost.view()).unwrap())
        .unwrap();
    assert!(r.convergence.history.is_empty(), "no history unless asked");
    let seen = seen.lock().unwrap();
    // ε-scaling: one call per stage, ε halving from 1 down to above 0.01.
    let stages: Vec<&Progress> = seen.iter().filter(|p| p.eps > 1e-2).collect();
    assert_eq!(stages.len(), 7);
    assert!(stages
        .windows(2)
        .all(|w| w[1].eps == 0.5 * w[0].eps && w[1].iteration == w[0].iteration + 3));
    assert!(stages.iter().all(|p| p.error.is_none()));
    // Then every 10 iterations without an error, and the final report with one.
    let main: Vec<&Progress> = seen.iter().filter(|p| p.eps == 1e-2).collect();
    let last = main.last().unwrap();
    assert_eq!(last.error, Some(r.convergence.marginal_error));
    assert_eq!(last.iteration, 100);
    assert!(main[..main.len() - 1].iter().all(|p| p.error.is_none()));
    assert_eq!(main.len(), (100 - 21) / 10 + 1);
}

#[test]
fn barycenters_report_every_check() {
    let (mu, nu, cost) = problem(50);
    let mut h = Array2::zeros((2, 50));
    h.row_mut(0).assign(&mu);
    h.row_mut(1).assign(&nu);
    let (observer, seen) = recorder();
    let params = BarycenterParams::new(5e-3).observer(observer).history(true);
    let w = ndarray::array![0.5, 0.5];
    let bar =
        crate::common::bary::barycenter(h.view(), w.view(), cost.view(), &params, None).unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), bar.history.len());
    assert!(bar.history.len() >= 2);
    let last = bar.history.last().unwrap();
    assert_eq!((last.iteration, last.error), (bar.iterations, bar.error));
    // POT's schedule on a dense cost: checks after iterations 2, 12, 22, … (1-based).
    for (k, e) in bar.history.iter().enumerate().take(bar.history.len() - 1) {
        assert_eq!(e.iteration, 2 + 10 * k);
    }
}
