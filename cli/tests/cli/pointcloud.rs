//! `logot wasserstein/coupling --x X.npy --y Y.npy`: point clouds with the cost computed
//! on the fly, against the same command with the dense cost written by the test, and the
//! point gradients against the plan written by `coupling`.

use ndarray::{Array1, Array2};
use ndarray_npy::read_npy;
use std::path::Path;

use crate::common;
use common::cli::{dir, json, logot, npy, p};

/// Clouds of 9 and 7 points in 2-D with uneven weights, and their dense cost.
fn write_problem(d: &Path) -> (Array2<f64>, Array2<f64>, Array1<f64>, Array1<f64>) {
    let x = Array2::from_shape_fn((9, 2), |(i, k)| ((i * 7 + k * 3) % 11) as f64 / 10.0);
    let y = Array2::from_shape_fn((7, 2), |(j, k)| 0.1 + ((j * 5 + k * 4) % 9) as f64 / 8.0);
    let mu = Array1::from_shape_fn(9, |i| 1.0 + i as f64);
    let mu = &mu / mu.sum();
    let nu = Array1::from_shape_fn(7, |j| 2.0 + (j % 3) as f64);
    let nu = &nu / nu.sum();
    let c = Array2::from_shape_fn((9, 7), |(i, j)| {
        (x[[i, 0]] - y[[j, 0]]).powi(2) + (x[[i, 1]] - y[[j, 1]]).powi(2)
    });
    npy(d, "x.npy", &x);
    npy(d, "y.npy", &y);
    npy(d, "mu.npy", &mu);
    npy(d, "nu.npy", &nu);
    npy(d, "c.npy", &c);
    (x, y, mu, nu)
}

#[test]
fn point_clouds_give_the_dense_answer() {
    let d = dir("dense");
    write_problem(&d);
    let common = [
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--eps",
        "0.02",
    ]
    .map(String::from);
    let run = |extra: &[&str]| {
        let mut args: Vec<&str> = vec!["wasserstein"];
        args.extend(common.iter().map(|s| s.as_str()));
        args.extend_from_slice(extra);
        let (code, out, err) = logot(&args);
        assert_eq!(code, 0, "{err}");
        json(&out)
    };
    let (xp, yp, cp) = (p(&d, "x.npy"), p(&d, "y.npy"), p(&d, "c.npy"));
    let cloud = run(&["--x", &xp, "--y", &yp]);
    let dense = run(&["--cost", &cp]);
    let (a, b) = (
        cloud["distance"][0].as_f64().unwrap(),
        dense["distance"][0].as_f64().unwrap(),
    );
    assert!((a - b).abs() < 1e-12 * b, "{a} vs {b}");
    assert_eq!(cloud["iterations"], dense["iterations"]);
    assert_eq!(cloud["converged"], true);
    // ε-scaling reaches the same answer.
    let annealed = run(&["--x", &xp, "--y", &yp, "--eps-scaling"]);
    let c = annealed["distance"][0].as_f64().unwrap();
    assert!(
        annealed["converged"] == true && (c - b).abs() < 1e-7 * b,
        "{c} vs {b}"
    );
    // f32 whatever the input dtype.
    let f32run = run(&["--x", &xp, "--y", &yp, "--f32"]);
    assert_eq!(f32run["dtype"], "float32");
    assert!((f32run["distance"][0].as_f64().unwrap() - b).abs() < 1e-5 * b);
}

#[test]
fn coupling_and_point_gradients() {
    let d = dir("coupling");
    let (x, y, mu, _) = write_problem(&d);
    let base = [
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--x",
        &p(&d, "x.npy"),
        "--y",
        &p(&d, "y.npy"),
        "--eps",
        "0.05",
        "--tol",
        "1e-12",
    ]
    .map(String::from);
    let with = |cmd: &str, extra: &[String]| {
        let mut args = vec![cmd.to_string()];
        args.extend(base.iter().cloned());
        args.extend(extra.iter().cloned());
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let (code, out, err) = logot(&refs);
        assert_eq!(code, 0, "{err}");
        json(&out)
    };
    with("coupling", &[String::from("--out"), p(&d, "plan.npy")]);
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
        "--tol",
        "1e-12",
        "--out",
        &p(&d, "plan_dense.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    let plan: Array2<f64> = read_npy(p(&d, "plan.npy")).unwrap();
    let dense: Array2<f64> = read_npy(p(&d, "plan_dense.npy")).unwrap();
    assert_eq!(plan.dim(), (9, 7));
    assert!(plan.iter().zip(&dense).all(|(a, b)| (a - b).abs() < 1e-14));
    let j = with(
        "wasserstein",
        &[
            String::from("--grad-x"),
            p(&d, "gx.npy"),
            String::from("--grad-y"),
            p(&d, "gy.npy"),
        ],
    );
    assert!(j["ot_eps"][0].as_f64().unwrap().is_finite());
    // ∂OT_ε/∂x_i = 2 Σ_j P_ij (x_i − y_j), from the materialised plan.
    let gx: Array2<f64> = read_npy(p(&d, "gx.npy")).unwrap();
    let gy: Array2<f64> = read_npy(p(&d, "gy.npy")).unwrap();
    assert_eq!((gx.dim(), gy.dim()), ((9, 2), (7, 2)));
    for i in 0..9 {
        for k in 0..2 {
            let want: f64 = (0..7)
                .map(|jj| 2.0 * plan[[i, jj]] * (x[[i, k]] - y[[jj, k]]))
                .sum();
            assert!(
                (gx[[i, k]] - want).abs() < 1e-10,
                "gx[{i},{k}] {} vs {want}",
                gx[[i, k]]
            );
        }
    }
    for jj in 0..7 {
        for k in 0..2 {
            let want: f64 = (0..9)
                .map(|i| 2.0 * plan[[i, jj]] * (y[[jj, k]] - x[[i, k]]))
                .sum();
            assert!((gy[[jj, k]] - want).abs() < 1e-10, "gy[{jj},{k}]");
        }
    }
    // Row sums of the plan are μ: Σ_i ∂/∂x_i + Σ_j ∂/∂y_j = 0 and μ enters through P only.
    assert!((plan.sum() - mu.sum()).abs() < 1e-12);
}

#[test]
fn bad_point_clouds_are_refused_naming_the_flag() {
    let d = dir("bad");
    write_problem(&d);
    npy(&d, "y3.npy", &Array2::<f64>::zeros((7, 3)));
    npy(&d, "flat.npy", &Array1::<f64>::zeros(7));
    let mut nan = Array2::<f64>::zeros((9, 2));
    nan[[4, 1]] = f64::NAN;
    npy(&d, "nan.npy", &nan);
    let (mu, nu, x, y) = (
        p(&d, "mu.npy"),
        p(&d, "nu.npy"),
        p(&d, "x.npy"),
        p(&d, "y.npy"),
    );
    for (xs, ys, extra, needle) in [
        (x.clone(), p(&d, "y3.npy"), "", "--y"),
        (x.clone(), p(&d, "flat.npy"), "", "--y"),
        (p(&d, "nan.npy"), y.clone(), "", "--x"),
        (y.clone(), x.clone(), "", "--mu: has"),
        (x.clone(), y.clone(), "--grad-mu", "--grad-x"),
    ] {
        let mut args = vec![
            "wasserstein",
            "--mu",
            &mu,
            "--nu",
            &nu,
            "--x",
            &xs,
            "--y",
            &ys,
            "--eps",
            "0.1",
        ];
        let out_path = p(&d, "g.npy");
        if !extra.is_empty() {
            args.push(extra);
            args.push(&out_path);
        }
        let (code, out, err) = logot(&args);
        assert_ne!(code, 0, "accepted {args:?}: {out}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let (code, _, err) = logot(&[
        "wasserstein",
        "--mu",
        &mu,
        "--nu",
        &nu,
        "--cost",
        &p(&d, "c.npy"),
        "--eps",
        "0.1",
        "--metric",
        "euclidean",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("--metric"), "{err}");
    let (code, _, err) = logot(&[
        "wasserstein",
        "--mu",
        &mu,
        "--nu",
        &nu,
        "--x",
        &x,
        "--eps",
        "0.1",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("--y"), "{err}");
}

/// `--precision` (how the GPU forms x·y), on `wasserstein` and `divergence`: accepted with
/// point clouds, the CPU's exact answer whatever the choice; a bad value or a dense cost is
/// refused naming the flag.
#[test]
fn precision_flag_parses_and_bad_values_name_it() {
    let d = dir("precision");
    write_problem(&d);
    let (mu, nu, x, y) = (
        p(&d, "mu.npy"),
        p(&d, "nu.npy"),
        p(&d, "x.npy"),
        p(&d, "y.npy"),
    );
    for (cmd, value) in [
        ("wasserstein", "/distance/0"),
        ("divergence", "/divergence"),
    ] {
        let base = [
            cmd, "--mu", &mu, "--nu", &nu, "--x", &x, "--y", &y, "--eps", "0.05",
        ];
        let (code, out, err) = logot(&base);
        assert_eq!(code, 0, "{cmd}: {err}");
        let want = json(&out).pointer(value).and_then(|v| v.as_f64()).unwrap();
        assert!(want > 0.0, "{cmd}: {want}");
        for mode in ["exact", "tf32x3", "tf32", "f16x2", "f16"] {
            let mut args = base.to_vec();
            args.extend(["--precision", mode]);
            let (code, out, err) = logot(&args);
            assert_eq!(code, 0, "{cmd} --precision {mode}: {err}");
            let got = json(&out).pointer(value).and_then(|v| v.as_f64());
            assert_eq!(got, Some(want), "{cmd} --precision {mode} on the CPU");
        }
        let mut args = base.to_vec();
        args.extend(["--precision", "fp16"]);
        let (code, _, err) = logot(&args);
        assert_ne!(code, 0, "{cmd}");
        assert!(
            err.contains("--precision") && err.contains("fp16") && err.contains("tf32x3"),
            "{cmd}: {err}"
        );
    }
    let (code, _, err) = logot(&[
        "coupling",
        "--mu",
        &mu,
        "--nu",
        &nu,
        "--cost",
        &p(&d, "c.npy"),
        "--eps",
        "0.1",
        "--precision",
        "tf32",
        "--out",
        &p(&d, "P.npy"),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("--precision"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// 3-D clouds (`B×n×d`, `B×m×d`: one pair per problem) on `wasserstein`, `coupling` and
/// `divergence`: per-problem values equal to separate runs on each pair's 2-D files,
/// uniform weights when none are given, gradients `B×n×d`, and the mismatches refused
/// naming the flag.
#[test]
fn three_dimensional_clouds_are_one_pair_per_problem() {
    use ndarray::{s, Array3};
    let d = dir("batched");
    let (b, n, m, dim) = (3, 8, 6, 2);
    let x = Array3::from_shape_fn((b, n, dim), |(k, i, t)| {
        0.3 * k as f64 + ((i * 7 + t * 3 + k) % 11) as f64 / 10.0
    });
    let y = Array3::from_shape_fn((b, m, dim), |(k, j, t)| {
        0.1 + ((j * 5 + t * 4 + 2 * k) % 9) as f64 / 8.0
    });
    let mu = Array2::from_shape_fn((b, n), |(k, i)| 1.0 + ((i + k) % 4) as f64);
    let mu = &mu / &mu.sum_axis(ndarray::Axis(1)).insert_axis(ndarray::Axis(1));
    let nu = Array2::from_shape_fn((b, m), |(k, j)| 2.0 + ((j * k) % 3) as f64);
    let nu = &nu / &nu.sum_axis(ndarray::Axis(1)).insert_axis(ndarray::Axis(1));
    let file = |name: &str| p(&d, name);
    npy(&d, "x3.npy", &x);
    npy(&d, "y3.npy", &y);
    npy(&d, "mu_batch.npy", &mu);
    npy(&d, "nu_batch.npy", &nu);
    for k in 0..b {
        npy(&d, &format!("x{k}.npy"), &x.slice(s![k, .., ..]).to_owned());
        npy(&d, &format!("y{k}.npy"), &y.slice(s![k, .., ..]).to_owned());
        npy(&d, &format!("mu{k}.npy"), &mu.row(k).to_owned());
        npy(&d, &format!("nu{k}.npy"), &nu.row(k).to_owned());
    }
    let run = |args: &[&str]| {
        let (code, out, err) = logot(args);
        assert_eq!(code, 0, "{args:?}: {err}");
        json(&out)
    };
    let (x3, y3, mu2, nu2) = (
        file("x3.npy"),
        file("y3.npy"),
        file("mu_batch.npy"),
        file("nu_batch.npy"),
    );
    let (gx, dgx) = (file("gx.npy"), file("dgx.npy"));
    let all = run(&[
        "wasserstein",
        "--x",
        &x3,
        "--y",
        &y3,
        "--mu",
        &mu2,
        "--nu",
        &nu2,
        "--eps",
        "0.05",
        "--grad-x",
        &gx,
    ]);
    let dist = |v: &serde_json::Value, k: usize| v["distance"][k].as_f64().unwrap();
    assert_eq!(all["distance"].as_array().unwrap().len(), b);
    let gx_all: Array3<f64> = read_npy(&gx).unwrap();
    assert_eq!(gx_all.dim(), (b, n, dim));
    // Uniform weights when none are given: the same as writing them.
    let uni = run(&["wasserstein", "--x", &x3, "--y", &y3, "--eps", "0.05"]);
    npy(&d, "mu_u.npy", &Array2::from_elem((b, n), 1.0 / n as f64));
    npy(&d, "nu_u.npy", &Array2::from_elem((b, m), 1.0 / m as f64));
    let explicit = run(&[
        "wasserstein",
        "--x",
        &x3,
        "--y",
        &y3,
        "--mu",
        &file("mu_u.npy"),
        "--nu",
        &file("nu_u.npy"),
        "--eps",
        "0.05",
    ]);
    let div = run(&[
        "divergence",
        "--x",
        &x3,
        "--y",
        &y3,
        "--mu",
        &mu2,
        "--nu",
        &nu2,
        "--eps",
        "0.05",
        "--grad-x",
        &dgx,
    ]);
    assert_eq!(div["batch"], 3);
    let dgx_all: Array3<f64> = read_npy(&dgx).unwrap();
    for k in 0..b {
        let (xk, yk) = (file(&format!("x{k}.npy")), file(&format!("y{k}.npy")));
        let (mk, nk) = (file(&format!("mu{k}.npy")), file(&format!("nu{k}.npy")));
        let gk = file(&format!("g{k}.npy"));
        let one = run(&[
            "wasserstein",
            "--x",
            &xk,
            "--y",
            &yk,
            "--mu",
            &mk,
            "--nu",
            &nk,
            "--eps",
            "0.05",
            "--grad-x",
            &gk,
        ]);
        // All problems of the batch run until the last converges: equal to the tolerance.
        let (a, w) = (dist(&all, k), dist(&one, 0));
        assert!((a - w).abs() < 1e-8 * w, "problem {k}: {a} vs {w}");
        let g1: Array2<f64> = read_npy(&gk).unwrap();
        let diff = (&gx_all.slice(s![k, .., ..]) - &g1)
            .iter()
            .fold(0.0f64, |s, v| s.max(v.abs()));
        assert!(diff < 1e-7, "problem {k}: gradients differ by {diff}");
        let u1 = run(&["wasserstein", "--x", &xk, "--y", &yk, "--eps", "0.05"]);
        assert!(
            (dist(&uni, k) - dist(&u1, 0)).abs() < 1e-8 * dist(&u1, 0),
            "uniform {k}"
        );
        assert!((dist(&uni, k) - dist(&explicit, k)).abs() < 1e-12 * dist(&u1, 0));
        let dk = file(&format!("dg{k}.npy"));
        let d1 = run(&[
            "divergence",
            "--x",
            &xk,
            "--y",
            &yk,
            "--mu",
            &mk,
            "--nu",
            &nk,
            "--eps",
            "0.05",
            "--grad-x",
            &dk,
        ]);
        // The batch's three solves also run until the last problem converges: equal to the
        // tolerance.
        let (a, w) = (
            div["divergence"][k].as_f64().unwrap(),
            d1["divergence"].as_f64().unwrap(),
        );
        assert!((a - w).abs() < 1e-8 * w, "divergence {k}: {a} vs {w}");
        let g1: Array2<f64> = read_npy(&dk).unwrap();
        let diff = (&dgx_all.slice(s![k, .., ..]) - &g1)
            .iter()
            .fold(0.0f64, |s, v| s.max(v.abs()));
        assert!(
            diff < 1e-7,
            "problem {k}: divergence gradients differ by {diff}"
        );
    }
    // Distinct pairs: distinct distances.
    assert!((dist(&all, 0) - dist(&all, 2)).abs() > 1e-3);
    // `coupling`: one n×m plan per problem, whose rows carry that problem's weights.
    let plan_path = file("plans.npy");
    run(&[
        "coupling", "--x", &x3, "--y", &y3, "--mu", &mu2, "--nu", &nu2, "--eps", "0.05", "--out",
        &plan_path,
    ]);
    let plans: Array3<f64> = read_npy(&plan_path).unwrap();
    assert_eq!(plans.dim(), (b, n, m));
    let rows = plans.sum_axis(ndarray::Axis(2));
    let err = (&rows - &mu).iter().fold(0.0f64, |s, v| s.max(v.abs()));
    assert!(err < 1e-12, "plan rows against mu: {err}");
    // A 3-D --x with a 2-D --y; weights for 1 problem against 3 pairs (1-D and 2-D).
    let x0 = file("x0.npy");
    let mu0 = file("mu0.npy");
    npy(&d, "mu_two.npy", &mu.slice(s![..2, ..]).to_owned());
    let mu_two = file("mu_two.npy");
    for (args, needle) in [
        (
            vec!["wasserstein", "--x", &x3, "--y", &x0, "--eps", "0.1"],
            "--y",
        ),
        (
            vec![
                "wasserstein",
                "--x",
                &x3,
                "--y",
                &y3,
                "--mu",
                &mu0,
                "--eps",
                "0.1",
            ],
            "--x",
        ),
        (
            vec![
                "wasserstein",
                "--x",
                &x3,
                "--y",
                &y3,
                "--mu",
                &mu_two,
                "--eps",
                "0.1",
            ],
            "--x",
        ),
        (
            vec!["divergence", "--x", &x3, "--y", &x0, "--eps", "0.1"],
            "--y",
        ),
        (
            vec![
                "divergence",
                "--x",
                &x3,
                "--y",
                &y3,
                "--mu",
                &mu0,
                "--eps",
                "0.1",
            ],
            "--mu",
        ),
        (
            vec![
                "divergence",
                "--x",
                &x3,
                "--y",
                &y3,
                "--mu",
                &mu_two,
                "--eps",
                "0.1",
            ],
            "--x",
        ),
    ] {
        let (code, out, err) = logot(&args);
        assert_ne!(code, 0, "accepted {args:?}: {out}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
