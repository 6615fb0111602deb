//! Point-cloud Gromov–Wasserstein in linear memory against the dense solver on the same
//! clouds (`C = |x_i − x_k|²` formed here), the reports, and error cases.

use crate::common::Lcg;
use logot::gromov::{
    EntropicGwParams, GromovProblem, GromovSolver, PointGromovProblem, PointGromovSolver,
    PointGwParams,
};
use logot::CpuBackend;
use ndarray::{Array1, Array2, Axis};

fn cloud(r: &mut Lcg, n: usize, d: usize, scale: f64) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |_| scale * r.normal())
}

fn weights(r: &mut Lcg, n: usize) -> Array1<f64> {
    let w = Array1::from(r.vec(n, 0.2, 1.0));
    let s = w.sum();
    w / s
}

fn sqdist(x: &Array2<f64>) -> Array2<f64> {
    let n = x.nrows();
    Array2::from_shape_fn((n, n), |(i, k)| {
        x.row(i)
            .iter()
            .zip(x.row(k))
            .map(|(a, b)| (a - b) * (a - b))
            .sum()
    })
}

#[test]
fn equals_the_dense_solver_on_the_same_clouds() {
    let mut r = Lcg(7);
    for &(n, m, dx, dy, eps, iters) in &[
        (30usize, 25usize, 2usize, 3usize, 0.05, 15usize),
        (12, 17, 3, 1, 0.2, 8),
    ] {
        let (x, y) = (cloud(&mut r, n, dx, 0.7), cloud(&mut r, m, dy, 0.6));
        let (p, q) = (weights(&mut r, n), weights(&mut r, m));
        let pc = PointGromovSolver::new(
            CpuBackend,
            PointGwParams::new(eps)
                .fixed_iterations(iters)
                .inner_tol(1e-13)
                .inner_max_iters(100_000),
        )
        .solve(&PointGromovProblem::new(x.view(), y.view(), p.view(), q.view()).unwrap())
        .unwrap();
        let (c1, c2) = (sqdist(&x), sqdist(&y));
        let dense = GromovSolver::new(
            CpuBackend,
            EntropicGwParams::new(eps)
                .fixed_iterations(iters)
                .inner_tol(1e-13)
                .inner_max_iters(100_000),
        )
        .solve(&GromovProblem::new(c1.view(), c2.view(), p.view(), q.view()).unwrap())
        .unwrap();
        let plan = pc.plan().unwrap();
        let scale = dense.plan.iter().fold(0.0f64, |a, &b| a.max(b));
        let plan_err = plan
            .iter()
            .zip(dense.plan.iter())
            .fold(0.0f64, |a, (x, y)| a.max((x - y).abs()))
            / scale;
        let value_err = (pc.value - dense.value).abs() / dense.value;
        eprintln!(
            "{n}×{m}, d {dx}/{dy}: plan {plan_err:.2e}, value {value_err:.2e} ({} vs {}), \
             stationarity bound {:.2e} vs dense {:.2e}, inner {} vs {}",
            pc.value,
            dense.value,
            pc.report.stationarity,
            dense.report.stationarity,
            pc.report.inner_iterations,
            dense.report.inner_iterations
        );
        assert!(plan_err < 1e-9, "plan differs by {plan_err:e}");
        assert!(value_err < 1e-9, "value differs by {value_err:e}");
        assert_eq!(pc.report.iterations, iters);
        // The report's marginals, computed on the fly, against the formed plan.
        let merr = (plan.sum_axis(Axis(1)) - &p)
            .mapv(f64::abs)
            .sum()
            .max((plan.sum_axis(Axis(0)) - &q).mapv(f64::abs).sum());
        assert!((merr - pc.report.marginal_error).abs() < 1e-14);
        assert!(pc.report.stationarity >= dense.report.stationarity * (1.0 - 1e-6));
    }
}

#[test]
fn errors_name_the_argument() {
    let x = ndarray::array![[0.0, 1.0], [2.0, 3.0]];
    let y = ndarray::array![[0.0], [1.0], [5.0]];
    let (p, q) = (ndarray::array![0.5, 0.5], ndarray::array![0.2, 0.3, 0.5]);
    let arg = |e: logot::Error| e.to_string().split(':').next().unwrap().to_string();
    let empty = Array2::<f64>::zeros((0, 2));
    assert_eq!(
        arg(PointGromovProblem::new(empty.view(), y.view(), p.view(), q.view()).unwrap_err()),
        "x"
    );
    let nan = ndarray::array![[0.0], [f64::NAN], [1.0]];
    assert_eq!(
        arg(PointGromovProblem::new(x.view(), nan.view(), p.view(), q.view()).unwrap_err()),
        "y"
    );
    assert_eq!(
        arg(PointGromovProblem::new(x.view(), y.view(), q.view(), q.view()).unwrap_err()),
        "p"
    );
    let neg = ndarray::array![0.5, -0.3, 0.8];
    assert_eq!(
        arg(PointGromovProblem::new(x.view(), y.view(), p.view(), neg.view()).unwrap_err()),
        "q"
    );
    let heavy = ndarray::array![0.4, 0.6, 0.5];
    assert!(
        arg(PointGromovProblem::new(x.view(), y.view(), p.view(), heavy.view()).unwrap_err())
            .starts_with("q")
    );
    let problem = PointGromovProblem::new(x.view(), y.view(), p.view(), q.view()).unwrap();
    for (params, name) in [
        (PointGwParams::new(0.0), "eps"),
        (PointGwParams::new(0.1).max_iters(0), "max_iters"),
        (PointGwParams::new(0.1).tol(f64::NAN), "tol"),
        (PointGwParams::new(0.1).inner_tol(-1.0), "inner_tol"),
    ] {
        let e = PointGromovSolver::new(CpuBackend, params)
            .solve(&problem)
            .unwrap_err();
        assert!(e.to_string().starts_with(name), "{e}");
    }
}
