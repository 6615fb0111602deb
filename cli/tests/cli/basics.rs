//! The `logot` command line: JSON results, .npy outputs, and every bad input refused with
//! a message on stderr, a non-zero exit code and no panic.

use ndarray::{Array1, Array2, Array3, Axis};
use ndarray_npy::read_npy;

use crate::common;
use common::cli::{dir, json, logot, npy, ok, p};

/// Two 1-D histograms on 6 and 4 points, C = (x_i − y_j)².
fn write_problem(d: &std::path::Path) {
    let x: Vec<f64> = (0..6).map(|i| i as f64 / 5.0).collect();
    let y: Vec<f64> = (0..4).map(|j| j as f64 / 3.0).collect();
    let mu = Array1::from_elem(6, 1.0 / 6.0);
    let nu = Array1::from_elem(4, 0.25);
    let c = Array2::from_shape_fn((6, 4), |(i, j)| (x[i] - y[j]).powi(2));
    npy(d, "mu.npy", &mu);
    npy(d, "nu.npy", &nu);
    npy(d, "c.npy", &c);
    npy(d, "mu32.npy", &mu.mapv(|v| v as f32));
    npy(d, "nu32.npy", &nu.mapv(|v| v as f32));
    npy(d, "c32.npy", &c.mapv(|v| v as f32));
    let mu_b = Array2::from_shape_fn((3, 6), |(b, i)| {
        (1.0 + (b * i) as f64) / (6.0 + 15.0 * b as f64)
    });
    let nu_b = Array2::from_shape_fn((3, 4), |(_, _)| 0.25);
    let c_b = Array3::from_shape_fn((3, 6, 4), |(b, i, j)| {
        (x[i] - y[j]).powi(2) * (1.0 + b as f64)
    });
    npy(d, "mu_b.npy", &mu_b);
    npy(d, "nu_b.npy", &nu_b);
    npy(d, "c_b.npy", &c_b);
}

#[test]
fn wasserstein_prints_json_matching_the_library() {
    let d = dir("ok");
    write_problem(&d);
    let j = ok(&[
        "wasserstein",
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--cost",
        &p(&d, "c.npy"),
        "--eps",
        "0.01",
    ]);
    let mu: Array1<f64> = read_npy(p(&d, "mu.npy")).unwrap();
    let nu: Array1<f64> = read_npy(p(&d, "nu.npy")).unwrap();
    let c: Array2<f64> = read_npy(p(&d, "c.npy")).unwrap();
    let lib = logot::wasserstein(mu.view(), nu.view(), c.view(), 0.01).unwrap();
    assert_eq!(j["distance"].as_array().unwrap().len(), 1);
    assert!((j["distance"][0].as_f64().unwrap() - lib.distance[0]).abs() < 1e-15);
    assert_eq!(j["converged"], true);
    assert_eq!(j["dtype"], "float64");
    assert!(j["iterations"].as_u64().unwrap() > 0 && j["marginal_error"].as_f64().unwrap() <= 1e-9);

    // float32 input runs in float32; --f64 overrides.
    let args32 = [
        "wasserstein",
        "--mu",
        &p(&d, "mu32.npy"),
        "--nu",
        &p(&d, "nu32.npy"),
        "--cost",
        &p(&d, "c32.npy"),
        "--eps",
        "0.01",
    ];
    let (code, out, _) = logot(&args32);
    assert_eq!(code, 0);
    let j32 = json(&out);
    assert_eq!(j32["dtype"], "float32");
    assert!((j32["distance"][0].as_f64().unwrap() - lib.distance[0]).abs() < 1e-5);
    // (float32 data carry float32 rounding of the masses, so ask for a float32-sized tol.)
    let (_, out, _) = logot(&[&args32[..], &["--f64", "--tol", "1e-6"]].concat());
    assert_eq!(json(&out)["dtype"], "float64");
}

#[test]
fn batch_and_coupling_outputs() {
    let d = dir("batch");
    write_problem(&d);
    let j = ok(&[
        "wasserstein",
        "--mu",
        &p(&d, "mu_b.npy"),
        "--nu",
        &p(&d, "nu_b.npy"),
        "--cost",
        &p(&d, "c_b.npy"),
        "--eps",
        "0.05",
    ]);
    let dist: Vec<f64> = j["distance"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(dist.len(), 3);
    assert!(
        dist[2] > dist[1] && dist[1] > dist[0],
        "costs scale with (1 + b): {dist:?}"
    );

    let (code, _, err) = logot(&[
        "coupling",
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--cost",
        &p(&d, "c.npy"),
        "--eps",
        "0.05",
        "--out",
        &p(&d, "plan.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let plan: Array2<f64> = read_npy(p(&d, "plan.npy")).unwrap();
    assert_eq!(plan.dim(), (6, 4));
    assert!(plan
        .sum_axis(Axis(1))
        .iter()
        .all(|r| (r - 1.0 / 6.0).abs() < 1e-12));
    assert!(plan
        .sum_axis(Axis(0))
        .iter()
        .all(|c| (c - 0.25).abs() < 1e-9));

    let (code, _, err) = logot(&[
        "coupling",
        "--mu",
        &p(&d, "mu_b.npy"),
        "--nu",
        &p(&d, "nu_b.npy"),
        "--cost",
        &p(&d, "c_b.npy"),
        "--eps",
        "0.05",
        "--out",
        &p(&d, "plans.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let plans: Array3<f64> = read_npy(p(&d, "plans.npy")).unwrap();
    assert_eq!(plans.dim(), (3, 6, 4));
}

#[test]
fn non_convergence_is_reported() {
    let d = dir("noconv");
    write_problem(&d);
    let (code, out, err) = logot(&[
        "wasserstein",
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--cost",
        &p(&d, "c.npy"),
        "--eps",
        "0.001",
        "--iters",
        "2",
    ]);
    assert_eq!(code, 0);
    assert_eq!(json(&out)["converged"], false);
    assert!(err.contains("not converged"), "{err}");
}

#[test]
fn bad_inputs_are_refused_with_a_message_and_no_panic() {
    let d = dir("bad");
    write_problem(&d);
    std::fs::write(d.join("garbage.npy"), b"this is not a numpy file at all").unwrap();
    let mut truncated = std::fs::read(d.join("mu.npy")).unwrap();
    truncated.truncate(truncated.len() - 5);
    std::fs::write(d.join("truncated.npy"), truncated).unwrap();
    npy(&d, "int.npy", &Array1::from_elem(6, 1i64));
    npy(&d, "mu3d.npy", &Array3::from_elem((1, 1, 6), 1.0 / 6.0));
    let mut nan = Array1::from_elem(6, 1.0 / 6.0);
    nan[2] = f64::NAN;
    npy(&d, "nan.npy", &nan);
    let mut neg = Array1::from_elem(6, 1.0 / 6.0);
    neg[0] = -1.0 / 6.0;
    neg[1] = 0.5;
    npy(&d, "neg.npy", &neg);
    npy(&d, "heavy.npy", &Array1::from_elem(6, 1.0));
    npy(&d, "empty.npy", &Array1::<f64>::zeros(0));
    npy(&d, "mu5.npy", &Array1::from_elem(5, 0.2));

    let (mu, nu, c) = (p(&d, "mu.npy"), p(&d, "nu.npy"), p(&d, "c.npy"));
    let run = |mu: &str, nu: &str, c: &str, extra: &[&str]| {
        let mut a = vec![
            "wasserstein",
            "--mu",
            mu,
            "--nu",
            nu,
            "--cost",
            c,
            "--eps",
            "0.01",
        ];
        a.extend_from_slice(extra);
        logot(&a)
    };
    let cases: Vec<((i32, String, String), &str)> = vec![
        (run(&p(&d, "missing.npy"), &nu, &c, &[]), "missing.npy"),
        (run(&p(&d, "garbage.npy"), &nu, &c, &[]), "not a .npy file"),
        (
            run(&p(&d, "truncated.npy"), &nu, &c, &[]),
            "truncated .npy data",
        ),
        (run(&p(&d, "int.npy"), &nu, &c, &[]), "is not supported"),
        (run(&p(&d, "mu3d.npy"), &nu, &c, &[]), "--mu"),
        (
            run(&p(&d, "nan.npy"), &nu, &c, &[]),
            "mu: non-finite value NaN",
        ),
        (run(&p(&d, "neg.npy"), &nu, &c, &[]), "mu: negative mass"),
        (
            run(&p(&d, "heavy.npy"), &nu, &c, &[]),
            "unequal total masses",
        ),
        (run(&p(&d, "empty.npy"), &nu, &c, &[]), "empty"),
        (
            run(&p(&d, "mu5.npy"), &nu, &c, &[]),
            "cost: is 6×4 but mu has 5",
        ),
        (run(&mu, &nu, &p(&d, "mu.npy"), &[]), "--cost"),
        (run(&mu, &p(&d, "mu_b.npy"), &c, &[]), "--nu"),
        (run(&mu, &nu, &c, &["--iters", "0"]), "--iters = 0"),
        (run(&mu, &nu, &c, &["--tol", "-1"]), "tol = -1"),
        (
            logot(&[
                "wasserstein",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "0",
            ]),
            "eps = 0",
        ),
        (
            logot(&[
                "wasserstein",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "-0.5",
            ]),
            "eps = -0.5",
        ),
        (
            logot(&[
                "wasserstein",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "nan",
            ]),
            "eps = NaN",
        ),
        (
            logot(&["wasserstein", "--mu", &mu, "--nu", &nu, "--cost", &c]),
            "--eps",
        ),
        (
            logot(&[
                "wasserstein",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "x",
            ]),
            "--eps",
        ),
        (
            logot(&[
                "wasserstein",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "0.1",
                "--backend",
                "tpu",
            ]),
            "tpu",
        ),
        (
            logot(&[
                "coupling",
                "--mu",
                &mu,
                "--nu",
                &nu,
                "--cost",
                &c,
                "--eps",
                "0.1",
                "--out",
                "/nonexistent-dir/p.npy",
            ]),
            "/nonexistent-dir/p.npy",
        ),
        (logot(&["frobnicate"]), "frobnicate"),
    ];
    for (i, ((code, _, err), needle)) in cases.into_iter().enumerate() {
        assert_ne!(code, 0, "case {i} ({needle}) succeeded");
        assert!(!err.contains("panicked"), "case {i} panicked: {err}");
        assert!(
            err.contains(needle),
            "case {i}: stderr does not mention {needle:?}: {err}"
        );
    }
    if !cfg!(feature = "cuda") {
        let (code, _, err) = run(&mu, &nu, &c, &["--backend", "cuda"]);
        assert_ne!(code, 0);
        assert!(err.contains("built without CUDA support"), "{err}");
    }
}
