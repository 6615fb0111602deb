//! `logot gw` and `logot fgw`: entropic, fused and exact Gromov–Wasserstein against POT
//! from the same initial plan (the inputs and POT's results in tests/data/pot_gw_*.npy,
//! written by tests/data/make_pot_gromov.py and make_pot_cli_gromov.py), the written plan's
//! marginals and objective recomputed here by brute force, point clouds against POT and
//! against the dense command on the same structures, bad input refused naming the flag with
//! the outputs left untouched.

use ndarray::{Array1, Array2, ArrayView2};
use ndarray_npy::read_npy;

use crate::common;
use common::cli::{dir, fresh, logot, npy, ok, p, refused, snapshot};

/// A POT reference file of `case`.
fn data(case: &str, name: &str) -> String {
    format!(
        "{}/../tests/data/pot_gw_{case}_{name}.npy",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn mat(case: &str, name: &str) -> Array2<f64> {
    read_npy(data(case, name)).unwrap()
}

fn vector(case: &str, name: &str) -> Array1<f64> {
    read_npy(data(case, name)).unwrap()
}

/// `max |a − b| / max |b|`.
fn rel_diff(a: ArrayView2<'_, f64>, b: ArrayView2<'_, f64>) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b.iter())
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

/// `Σ_ijkl L(C1_ik, C2_jl)·T_ij·T_kl` by brute force, square or KL loss.
fn brute_force(kl: bool, c1: &Array2<f64>, c2: &Array2<f64>, t: &Array2<f64>) -> f64 {
    let loss = |a: f64, b: f64| {
        if kl {
            (if a == 0.0 { 0.0 } else { a * (a / b).ln() }) - a + b
        } else {
            (a - b) * (a - b)
        }
    };
    let (n, m) = t.dim();
    let mut s = 0.0;
    for i in 0..n {
        for j in 0..m {
            for k in 0..n {
                for l in 0..m {
                    s += loss(c1[[i, k]], c2[[j, l]]) * t[[i, j]] * t[[k, l]];
                }
            }
        }
    }
    s
}

/// `max(‖T·1 − p‖₁, ‖Tᵀ·1 − q‖₁)`.
fn marginal_error(t: &Array2<f64>, p: &Array1<f64>, q: &Array1<f64>) -> f64 {
    let l1 = |a: Array1<f64>, b: &Array1<f64>| (&a - b).mapv(f64::abs).sum();
    l1(t.sum_axis(ndarray::Axis(1)), p).max(l1(t.sum_axis(ndarray::Axis(0)), q))
}

fn f(js: &serde_json::Value, key: &str) -> f64 {
    js[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing: {js}"))
}

/// Tight inner solves: the outer iterates are those of the exact mirror descent, as in POT's
/// reference run.
const TIGHT: [&str; 4] = ["--inner-iters", "100000", "--inner-tol", "1e-13"];

/// One entropic POT case through the command: the plan and value to 1e-8 relative, the
/// written plan's marginals and objective as reported.
fn entropic_case(case: &str, kl: bool, given_init: bool, f32: bool) {
    let d = fresh(case);
    let s = vector(case, "scalars");
    let (value, eps, max_iter, alpha) = (s[0], s[1], s[2] as usize, s[4]);
    let plan = p(&d, "plan.npy");
    let (eps, max_iter, alpha) = (eps.to_string(), max_iter.to_string(), alpha.to_string());
    let (c1, c2, pp, qq, m, g0) = (
        data(case, "c1"),
        data(case, "c2"),
        data(case, "p"),
        data(case, "q"),
        data(case, "m"),
        data(case, "g0"),
    );
    let fused = s[4] < 1.0;
    let mut args: Vec<&str> = vec![if fused { "fgw" } else { "gw" }];
    args.extend([
        "--c1", &c1, "--c2", &c2, "--p", &pp, "--q", &qq, "--eps", &eps,
    ]);
    args.extend(["--max-iters", &max_iter, "--tol", "0", "--plan", &plan]);
    if f32 {
        args.extend(["--f32", "--inner-iters", "100000", "--inner-tol", "1e-5"]);
    } else {
        args.extend(TIGHT);
    }
    if fused {
        args.extend(["--m", &m, "--alpha", &alpha]);
    }
    if given_init {
        args.extend(["--init", &g0]);
    }
    if kl {
        args.extend(["--loss", "kl"]);
    }
    let js = ok(&args);
    let t: Array2<f64> = if f32 {
        read_npy::<_, Array2<f32>>(&plan).unwrap().mapv(f64::from)
    } else {
        read_npy(&plan).unwrap()
    };
    // f32: the inner solves stop at 1e-5 and every product rounds to 2⁻²⁴ relative (seen:
    // 2e-6 on the plan, 4e-7 on the value).
    let tol = if f32 { 1e-4 } else { 1e-8 };
    let plan_err = rel_diff(t.view(), mat(case, "plan").view());
    let value_err = (f(&js, "value") - value).abs() / value.abs();
    eprintln!("{case}: plan {plan_err:.2e}, value {value_err:.2e}");
    assert!(
        plan_err < tol,
        "{case}: plan differs from POT's by {plan_err:e}"
    );
    assert!(
        value_err < tol,
        "{case}: value differs from POT's by {value_err:e}"
    );
    assert_eq!(js["method"], "entropic");
    assert_eq!(js["iterations"].as_u64().unwrap() as usize, s[2] as usize);
    // The report describes the written plan: its marginals and its objective.
    let (pv, qv) = (vector(case, "p"), vector(case, "q"));
    let merr = marginal_error(&t, &pv, &qv);
    let mtol = if f32 { 1e-5 } else { 1e-12 };
    assert!(
        (merr - f(&js, "marginal_error")).abs() < mtol,
        "{case}: marginal error {merr:e} vs reported {}",
        js["marginal_error"]
    );
    let quad = s[4] * brute_force(kl, &mat(case, "c1"), &mat(case, "c2"), &t);
    let lin = (1.0 - s[4]) * (&mat(case, "m") * &t).sum();
    let vtol = if f32 { 1e-4 } else { 1e-12 };
    assert!((f(&js, "quadratic") - quad).abs() <= vtol * quad.abs());
    assert!((f(&js, "linear") - lin).abs() <= vtol * lin.abs().max(1e-300));
    assert!((f(&js, "value") - quad - lin).abs() <= vtol * (quad + lin).abs());
    assert_eq!(js["dtype"], if f32 { "float32" } else { "float64" });
}

#[test]
fn entropic_gw_matches_pot() {
    entropic_case("e_sq", false, false, false);
}

#[test]
fn entropic_kl_gw_from_a_given_plan_matches_pot() {
    entropic_case("e_kl", true, false, false);
    entropic_case("e_asym", false, true, false);
}

#[test]
fn entropic_fused_gw_matches_pot() {
    entropic_case("e_fused", false, false, false);
    entropic_case("e_fused_kl_asym", true, true, false);
}

#[test]
fn entropic_gw_in_float32_is_close_to_pot() {
    entropic_case("e_sq", false, false, true);
}

/// An exact POT case: POT's conditional gradient from the product plan, the same iterates.
fn exact_case(case: &str) {
    let d = fresh(case);
    let s = vector(case, "scalars");
    let (value, alpha) = (s[0], s[1]);
    let plan = p(&d, "plan.npy");
    let (c1, c2, pp, qq, m) = (
        data(case, "c1"),
        data(case, "c2"),
        data(case, "p"),
        data(case, "q"),
        data(case, "m"),
    );
    let alpha_s = alpha.to_string();
    let mut args: Vec<&str> = vec![if alpha < 1.0 { "fgw" } else { "gw" }];
    args.extend([
        "--c1", &c1, "--c2", &c2, "--p", &pp, "--q", &qq, "--plan", &plan,
    ]);
    if alpha < 1.0 {
        args.extend(["--m", &m, "--alpha", &alpha_s]);
    }
    let js = ok(&args);
    let t: Array2<f64> = read_npy(&plan).unwrap();
    let plan_err = rel_diff(t.view(), mat(case, "plan").view());
    assert!(
        plan_err < 1e-10,
        "{case}: plan differs from POT's by {plan_err:e}"
    );
    assert!(
        (f(&js, "value") - value).abs() <= 1e-10 * value.abs(),
        "{case}: value {} vs POT {value}",
        js["value"]
    );
    assert_eq!(js["method"], "conditional_gradient");
    assert_eq!(js["converged"], true);
    assert_eq!(js["iterations"].as_u64().unwrap(), s[2] as u64);
    assert!(f(&js, "gap") >= -1e-12 && f(&js, "gap") < 1e-8, "{js}");
    let merr = marginal_error(&t, &vector(case, "p"), &vector(case, "q"));
    assert!(merr < 1e-12 && (merr - f(&js, "marginal_error")).abs() < 1e-14);
    let quad = alpha * brute_force(false, &mat(case, "c1"), &mat(case, "c2"), &t);
    assert!((f(&js, "quadratic") - quad).abs() <= 1e-12 * quad);
}

#[test]
fn exact_gw_and_fgw_match_pot() {
    exact_case("x_sq");
    exact_case("x_w_sq");
    exact_case("x_fused");
}

/// Squared Euclidean distances within a cloud.
fn sqdist(x: &Array2<f64>) -> Array2<f64> {
    let n = x.nrows();
    Array2::from_shape_fn((n, n), |(i, k)| {
        (&x.row(i) - &x.row(k)).mapv(|v| v * v).sum()
    })
}

#[test]
fn point_clouds_match_pot_and_the_dense_command() {
    let d = fresh("cloud");
    let case = "cloud";
    let s = vector(case, "scalars");
    let (value, eps, iters) = (s[0], s[1].to_string(), (s[2] as usize).to_string());
    let (x, y) = (mat(case, "x"), mat(case, "y"));
    let c1 = npy(&d, "c1.npy", &sqdist(&x));
    let c2 = npy(&d, "c2.npy", &sqdist(&y));
    let (xs, ys, pp, qq) = (
        data(case, "x"),
        data(case, "y"),
        data(case, "p"),
        data(case, "q"),
    );
    let (plan_pc, plan_dense) = (p(&d, "pc.npy"), p(&d, "dense.npy"));
    let common: Vec<&str> = [
        "--p",
        &pp,
        "--q",
        &qq,
        "--eps",
        &eps,
        "--max-iters",
        &iters,
        "--tol",
        "0",
    ]
    .into_iter()
    .chain(TIGHT)
    .collect();
    let mut a = vec!["gw", "--x", &xs, "--y", &ys, "--plan", &plan_pc];
    a.extend(&common);
    let pc = ok(&a);
    let mut b = vec!["gw", "--c1", &c1, "--c2", &c2, "--plan", &plan_dense];
    b.extend(&common);
    let dense = ok(&b);
    assert_eq!(pc["method"], "point_cloud");
    let (tp, td): (Array2<f64>, Array2<f64>) =
        (read_npy(&plan_pc).unwrap(), read_npy(&plan_dense).unwrap());
    let want = mat(case, "plan");
    for (name, t, js) in [("point cloud", &tp, &pc), ("dense", &td, &dense)] {
        let plan_err = rel_diff(t.view(), want.view());
        let value_err = (f(js, "value") - value).abs() / value;
        eprintln!("{name}: plan {plan_err:.2e}, value {value_err:.2e}");
        assert!(
            plan_err < 1e-8,
            "{name}: plan differs from POT's by {plan_err:e}"
        );
        assert!(
            value_err < 1e-8,
            "{name}: value differs from POT's by {value_err:e}"
        );
        let merr = marginal_error(t, &vector(case, "p"), &vector(case, "q"));
        assert!((merr - f(js, "marginal_error")).abs() < 1e-12);
    }
    // The point-cloud stationarity is a bound on the dense solver's.
    assert!(f(&pc, "stationarity") >= f(&dense, "stationarity") * (1.0 - 1e-6));
}

#[test]
fn uniform_weights_by_default() {
    let d = dir("uniform");
    // Three points on a line and a reflected copy: the plan matches each to its image.
    let x = [0.0f64, 1.0, 3.0];
    let y = [3.0f64, 2.0, 0.0];
    let c1 = npy(
        &d,
        "c1.npy",
        &Array2::from_shape_fn((3, 3), |(i, k)| (x[i] - x[k]).abs()),
    );
    let c2 = npy(
        &d,
        "c2.npy",
        &Array2::from_shape_fn((3, 3), |(j, l)| (y[j] - y[l]).abs()),
    );
    let plan = p(&d, "plan.npy");
    let js = ok(&["gw", "--c1", &c1, "--c2", &c2, "--plan", &plan]);
    let t: Array2<f64> = read_npy(&plan).unwrap();
    // Exact GW of an isometry: the identity matching, value 0.
    for i in 0..3 {
        assert!((t[[i, i]] - 1.0 / 3.0).abs() < 1e-12, "{t}");
    }
    assert!(f(&js, "value").abs() < 1e-12, "{js}");
}

#[test]
fn help_lists_gw_and_fgw() {
    let (code, out, _) = logot(&["--help"]);
    assert_eq!(code, 0);
    for command in ["gw ", "fgw "] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(command)),
            "{command}not in {out}"
        );
    }
}

#[test]
fn bad_input_is_refused_naming_the_flag_and_outputs_are_left_alone() {
    let d = fresh("bad");
    let case = "e_sq";
    let (c1, c2, pp, qq) = (
        data(case, "c1"),
        data(case, "c2"),
        data(case, "p"),
        data(case, "q"),
    );
    let (n, m) = (7, 9);
    let rect = npy(&d, "rect.npy", &Array2::<f64>::zeros((n, n + 1)));
    let mut nan = mat(case, "c1");
    nan[[1, 2]] = f64::NAN;
    let nan = npy(&d, "nan.npy", &nan);
    let short = npy(
        &d,
        "short.npy",
        &Array1::from_elem(n - 1, 1.0 / (n - 1) as f64),
    );
    let heavy = npy(&d, "heavy.npy", &Array1::from_elem(m, 2.0 / m as f64));
    let zero_c2 = npy(&d, "zero.npy", &Array2::<f64>::zeros((m, m)));
    let g0_bad = npy(&d, "g0.npy", &Array2::from_elem((n, n), 0.01));
    let feature_bad = npy(&d, "mbad.npy", &Array2::<f64>::zeros((m, n)));
    let cloud = npy(&d, "x.npy", &Array2::<f64>::zeros((4, 2)));
    // An existing output that every refused run must leave as it is.
    std::fs::write(d.join("plan.npy"), b"keep").unwrap();
    let plan = p(&d, "plan.npy");
    let before = snapshot(&d);
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["gw", "--c1", &rect, "--c2", &c2],
            vec!["--c1", "square"],
        ),
        (vec!["gw", "--c1", &nan, "--c2", &c2], vec!["--c1"]),
        (
            vec!["gw", "--c1", &c1, "--c2", &c2, "--p", &short],
            vec!["--p"],
        ),
        (
            vec!["gw", "--c1", &c1, "--c2", &c2, "--p", &pp, "--q", &heavy],
            vec!["--q", "mass"],
        ),
        (
            vec!["gw", "--c1", &c1, "--c2", &c2, "--eps", "-1"],
            vec!["--eps"],
        ),
        (
            vec![
                "gw",
                "--c1",
                &c1,
                "--c2",
                &c2,
                "--eps",
                "0.1",
                "--max-iters",
                "0",
            ],
            vec!["--max-iters"],
        ),
        (
            vec!["gw", "--c1", &c1, "--c2", &c2, "--tol", "nan"],
            vec!["--tol"],
        ),
        (
            vec![
                "gw",
                "--c1",
                &c1,
                "--c2",
                &c2,
                "--eps",
                "0.1",
                "--inner-tol",
                "-1",
            ],
            vec!["--inner-tol"],
        ),
        (
            vec!["gw", "--c1", &c1, "--c2", &zero_c2, "--loss", "kl"],
            vec!["--c2", "KL"],
        ),
        (
            vec!["gw", "--c1", &c1, "--c2", &c2, "--init", &g0_bad],
            vec!["--init"],
        ),
        (
            vec!["gw", "--c1", &c1, "--c2", &c2, "--init", "missing.npy"],
            vec!["--init", "missing.npy"],
        ),
        (
            vec!["fgw", "--c1", &c1, "--c2", &c2, "--m", &feature_bad],
            vec!["--m"],
        ),
        (vec!["gw", "--x", &cloud, "--y", &cloud], vec!["--eps"]),
        (
            vec![
                "gw", "--x", &cloud, "--y", &cloud, "--eps", "0.1", "--loss", "kl",
            ],
            vec!["--loss"],
        ),
        (
            vec![
                "gw", "--x", &cloud, "--y", &cloud, "--eps", "0.1", "--init", &g0_bad,
            ],
            vec!["--init"],
        ),
        (
            vec![
                "fgw",
                "--x",
                &cloud,
                "--y",
                &cloud,
                "--m",
                &feature_bad,
                "--eps",
                "0.1",
            ],
            vec!["--x"],
        ),
    ];
    for (mut args, needles) in cases {
        args.extend(["--plan", &plan]);
        refused(&args, &needles);
        assert_eq!(snapshot(&d), before, "{args:?} changed the folder");
    }
    // α outside [0, 1] on inputs that are otherwise fine names --alpha.
    let m_ok = data(case, "m");
    refused(
        &[
            "fgw", "--c1", &c1, "--c2", &c2, "--p", &pp, "--q", &qq, "--m", &m_ok, "--alpha",
            "1.5", "--plan", &plan,
        ],
        &["--alpha"],
    );
    assert_eq!(snapshot(&d), before);
}
