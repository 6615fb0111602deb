//! Honest reports through the command line: the JSON describes the files
//! written, per problem for batches, and `divergence --convention linear` is POT's value.
//! Expectations are recomputed from the written arrays in f64, or are POT's numbers.

use ndarray::{Array1, Array2, Array3, Axis};
use ndarray_npy::read_npy;

use crate::common;
use common::cli::{fresh, logot, npy, ok, p};
use common::Lcg;

/// `coupling` in float32 on a cost U[0,1] + offset: the JSON's marginal error is the saved
/// plan's, not a report of the potentials (which can say "converged, 0" for a plan off by
/// 7e-4).
#[test]
fn coupling_reports_the_saved_plans_error() {
    let d = fresh("coupling_offset");
    for (seed, n, m, offset, eps) in [
        (1u64, 150, 150, 400.0f32, "0.02"),
        (2, 90, 130, 1000.0, "0.05"),
    ] {
        let mut rng = Lcg(seed);
        let cost = Array2::from_shape_fn((n, m), |_| rng.next() as f32 + offset);
        let mu = Array1::from_shape_fn(n, |_| rng.uniform(0.1, 1.0) as f32);
        let nu = Array1::from_shape_fn(m, |_| rng.uniform(0.1, 1.0) as f32);
        let (mu, nu) = (&mu / mu.sum(), &nu / nu.sum());
        npy(&d, "mu.npy", &mu);
        npy(&d, "nu.npy", &nu);
        npy(&d, "C.npy", &cost);
        let j = ok(&[
            "coupling",
            "--mu",
            &p(&d, "mu.npy"),
            "--nu",
            &p(&d, "nu.npy"),
            "--cost",
            &p(&d, "C.npy"),
            "--eps",
            eps,
            "--out",
            &p(&d, "P.npy"),
        ]);
        let plan: Array2<f32> = read_npy(p(&d, "P.npy")).unwrap();
        let rows: f64 = plan
            .rows()
            .into_iter()
            .zip(&mu)
            .map(|(r, &a)| (r.iter().map(|&v| v as f64).sum::<f64>() - a as f64).abs())
            .sum();
        let cols: f64 = plan
            .columns()
            .into_iter()
            .zip(&nu)
            .map(|(c, &b)| (c.iter().map(|&v| v as f64).sum::<f64>() - b as f64).abs())
            .sum();
        let reported = j["marginal_error"].as_f64().unwrap();
        assert!(
            (reported - rows.max(cols)).abs() < 1e-12,
            "{j}: plan errors {rows:e} {cols:e}"
        );
        assert_eq!(
            j["converged"].as_bool().unwrap(),
            reported <= j["tol"].as_f64().unwrap(),
            "{j}"
        );
        assert!(rows.max(cols) < 1e-4, "offset {offset}: {rows:e} {cols:e}");
    }
}

/// A batch reports each problem: errors recomputed from the saved plans, one flag and one
/// iteration count per problem.
#[test]
fn batches_report_each_problem() {
    let d = fresh("batch");
    let n = 40;
    let x: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    let cost = Array2::from_shape_fn((n, n), |(i, j)| (x[i] - x[j]).powi(2));
    let bump = |c: f64, w: f64| {
        let h = Array1::from_iter(x.iter().map(|&t| (-(t - c).powi(2) / w).exp() + 1e-3));
        let s = h.sum();
        h / s
    };
    let mut mu = Array2::zeros((2, n));
    let mut nu = Array2::zeros((2, n));
    mu[[0, 7]] = 1.0; // a Dirac to a Dirac: exact at the first check
    nu[[0, 30]] = 1.0;
    mu.row_mut(1).assign(&bump(0.1, 0.002));
    nu.row_mut(1).assign(&bump(0.9, 0.002));
    npy(&d, "mu.npy", &mu);
    npy(&d, "nu.npy", &nu);
    npy(&d, "C.npy", &cost);
    let j = ok(&[
        "coupling",
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--cost",
        &p(&d, "C.npy"),
        "--eps",
        "0.002",
        "--iters",
        "60",
        "--out",
        &p(&d, "P.npy"),
    ]);
    let plans: Array3<f64> = read_npy(p(&d, "P.npy")).unwrap();
    let errs = j["marginal_errors"].as_array().unwrap();
    assert_eq!(errs.len(), 2);
    for (k, err) in errs.iter().enumerate() {
        let pk = plans.index_axis(Axis(0), k);
        let rows = (&pk.sum_axis(Axis(1)) - &mu.row(k)).mapv(f64::abs).sum();
        let cols = (&pk.sum_axis(Axis(0)) - &nu.row(k)).mapv(f64::abs).sum();
        assert!(
            (err.as_f64().unwrap() - rows.max(cols)).abs() < 1e-15,
            "{j}"
        );
    }
    assert_eq!(j["converged_each"], serde_json::json!([true, false]), "{j}");
    let its = j["iterations_each"].as_array().unwrap();
    assert!(
        its[0].as_u64().unwrap() < 60 && its[1].as_u64().unwrap() == 60,
        "{j}"
    );
    assert_eq!(j["converged"], serde_json::json!(false));
}

/// `--convention linear` is POT's `empirical_sinkhorn_divergence` (POT 0.9.7,
/// `method='sinkhorn_log'`, converged), and has no point gradients.
#[test]
fn linear_divergence_is_pots() {
    let d = fresh("divergence");
    let x = ndarray::array![[0.0, 0.0], [1.0, 0.2], [0.3, 0.9], [0.8, 0.7], [0.5, 0.1]];
    let y = ndarray::array![[0.2, 0.4], [1.1, 1.0], [0.6, 0.3], [0.0, 0.8]];
    let a = ndarray::array![0.1, 0.3, 0.2, 0.25, 0.15];
    let b = ndarray::array![0.4, 0.1, 0.3, 0.2];
    for (f, arr) in [("x.npy", x.view()), ("y.npy", y.view())] {
        npy(&d, f, &arr);
    }
    npy(&d, "a.npy", &a);
    npy(&d, "b.npy", &b);
    let base = [
        "divergence",
        "--x",
        &p(&d, "x.npy"),
        "--y",
        &p(&d, "y.npy"),
        "--mu",
        &p(&d, "a.npy"),
        "--nu",
        &p(&d, "b.npy"),
        "--eps",
        "0.5",
        "--tol",
        "1e-14",
        "--iters",
        "100000",
    ];
    let mut args = base.to_vec();
    args.extend(["--convention", "linear"]);
    let j = ok(&args);
    assert_eq!(j["convention"], "linear");
    assert!(
        (j["divergence"].as_f64().unwrap() - 0.14421687512068498).abs() < 1e-12,
        "{j}"
    );
    let obj = ok(&base);
    assert_eq!(obj["convention"], "objective");
    assert!((obj["divergence"].as_f64().unwrap() - j["divergence"].as_f64().unwrap()).abs() > 1e-3);
    let gx = p(&d, "gx.npy");
    args.extend(["--grad-x", &gx]);
    let (code, _, err) = logot(&args);
    assert_ne!(code, 0);
    assert!(
        err.contains("--convention") && err.contains("--grad-x"),
        "{err}"
    );
    assert!(!d.join("gx.npy").exists());
}
