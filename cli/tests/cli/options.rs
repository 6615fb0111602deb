//! Command-line conveniences and guards, through the `logot` binary: numpy's precision
//! promotion of mixed inputs, point clouds with uniform weights, the potentials
//! (`--out-f/--out-g`) and the regularised objective, the `divergence` subcommand, `.npz`
//! inputs, `--eps-scaling` kept with gradients, and user-given counts that are bounded or
//! refused naming their flag. Expectations are closed forms, properties of the written
//! files, or the library called directly in f64.

use logot::{BarycenterParams, CpuBackend, Problem, SinkhornParams, SinkhornSolver};
use ndarray::{Array1, Array2};
use ndarray_npy::read_npy;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common;
use common::cli::{fresh, json, logot, npy, npy_bytes, ok, p, refused, write_npz};
use common::Lcg;

/// [`ok`], failing (and killing the process) when it runs longer than `limit`: a hang is
/// a failure, not a stuck test.
fn ok_within(limit: Duration, args: &[&str]) -> serde_json::Value {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_logot"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("{args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    json(&String::from_utf8_lossy(&out.stdout))
}

fn dist(j: &serde_json::Value) -> f64 {
    j["distance"][0].as_f64().unwrap()
}

/// A 1-D problem of `n` bins: smooth marginals on linspace(0, 1) and `C = (x − y)²`.
fn problem(n: usize) -> (Array1<f64>, Array1<f64>, Array2<f64>) {
    let x: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    let mu = Array1::from_shape_fn(n, |i| (-(x[i] - 0.3).powi(2) / 0.02).exp() + 0.01);
    let nu = Array1::from_shape_fn(n, |i| (-(x[i] - 0.7).powi(2) / 0.05).exp() + 0.01);
    let c = Array2::from_shape_fn((n, n), |(i, j)| (x[i] - x[j]).powi(2));
    (&mu / mu.sum(), &nu / nu.sum(), c)
}

fn f32s<D: ndarray::Dimension>(a: &ndarray::Array<f64, D>) -> ndarray::Array<f32, D> {
    a.mapv(|v| v as f32)
}

fn f64s<D: ndarray::Dimension>(a: &ndarray::Array<f32, D>) -> ndarray::Array<f64, D> {
    a.mapv(|v| v as f64)
}

#[test]
fn mixed_precisions_follow_numpys_promotion() {
    let d = fresh("promotion");
    let f = |n: &str| p(&d, n);
    let (mu, nu, c) = problem(40);
    // float32 values, stored once as float32 and once widened to float64.
    let (mu32, nu32, c32) = (f32s(&mu), f32s(&nu), f32s(&c));
    npy(&d, "mu32.npy", &mu32);
    npy(&d, "nu32.npy", &nu32);
    npy(&d, "c32.npy", &c32);
    npy(&d, "mu64.npy", &f64s(&mu32));
    npy(&d, "nu64.npy", &f64s(&nu32));
    npy(&d, "c64.npy", &f64s(&c32));
    let run = |m: &str, n: &str, c: &str, extra: &[&str]| {
        let mut a = vec!["wasserstein", "--eps", "0.01"];
        let (m, n, c) = (f(m), f(n), f(c));
        a.extend_from_slice(&["--mu", &m, "--nu", &n, "--cost", &c]);
        a.extend_from_slice(extra);
        ok(&a)
    };
    let all64 = run("mu64.npy", "nu64.npy", "c64.npy", &[]);
    let all32 = run("mu32.npy", "nu32.npy", "c32.npy", &[]);
    assert_eq!(all64["dtype"], "float64");
    assert_eq!(all32["dtype"], "float32");
    // Any float64 input makes the run float64, whichever flag it is (not only
    // --mu's), with the same numbers as all-float64 inputs.
    for (m, n, c) in [
        ("mu32.npy", "nu64.npy", "c32.npy"),
        ("mu32.npy", "nu32.npy", "c64.npy"),
        ("mu64.npy", "nu32.npy", "c32.npy"),
    ] {
        let r = run(m, n, c, &[]);
        assert_eq!(r["dtype"], "float64", "{m} {n} {c}");
        assert_eq!(r["distance"], all64["distance"], "{m} {n} {c}");
    }
    // --f32 / --f64 override the promotion.
    let forced = run("mu32.npy", "nu64.npy", "c64.npy", &["--f32"]);
    assert_eq!(forced["dtype"], "float32");
    assert_eq!(forced["distance"], all32["distance"]);
    assert_eq!(
        run("mu32.npy", "nu32.npy", "c32.npy", &["--f64"])["dtype"],
        "float64"
    );
    // Point clouds: x float32, y float64.
    let mut g = Lcg(5);
    let x = Array2::from_shape_vec((7, 2), g.vec(14, 0.0, 1.0)).unwrap();
    let y = Array2::from_shape_vec((6, 2), g.vec(12, 0.0, 1.0)).unwrap();
    npy(&d, "x32.npy", &f32s(&x));
    npy(&d, "y64.npy", &y);
    npy(&d, "y32.npy", &f32s(&y));
    let mixed = ok(&[
        "wasserstein",
        "--x",
        &f("x32.npy"),
        "--y",
        &f("y64.npy"),
        "--eps",
        "0.1",
    ]);
    assert_eq!(mixed["dtype"], "float64");
    let single = ok(&[
        "wasserstein",
        "--x",
        &f("x32.npy"),
        "--y",
        &f("y32.npy"),
        "--eps",
        "0.1",
    ]);
    assert_eq!(single["dtype"], "float32");
    // Barycenter (float32 inputs, float64 weights), bistochastic (float32 X, float64 G),
    // divergence (float32 clouds, float64 weights).
    npy(&d, "h32.npy", &Array2::from_elem((2, 4), 0.25f32));
    npy(&d, "w64.npy", &Array1::from(vec![0.5, 0.5]));
    npy(
        &d,
        "c44.npy",
        &Array2::from_shape_fn((4, 4), |(i, j)| ((i as f32 - j as f32) / 3.0).powi(2)),
    );
    let b = ok(&[
        "barycenter",
        "--inputs",
        &f("h32.npy"),
        "--weights",
        &f("w64.npy"),
        "--cost",
        &f("c44.npy"),
        "--eps",
        "0.1",
        "--out",
        &f("bar.npy"),
    ]);
    assert_eq!(b["dtype"], "float64");
    let _: Array1<f64> = read_npy(f("bar.npy")).unwrap();
    npy(&d, "sq32.npy", &Array2::from_elem((3, 3), 0.5f32));
    npy(&d, "g64.npy", &Array2::from_elem((3, 3), 0.1));
    let r = ok(&[
        "bistochastic",
        "--x",
        &f("sq32.npy"),
        "--out",
        &f("r.npy"),
        "--grad",
        &f("g64.npy"),
        "--out-grad",
        &f("dx.npy"),
    ]);
    assert_eq!(r["dtype"], "float64");
    npy(&d, "w7.npy", &Array1::from_elem(7, 1.0 / 7.0));
    let s = ok(&[
        "divergence",
        "--x",
        &f("x32.npy"),
        "--y",
        &f("y32.npy"),
        "--mu",
        &f("w7.npy"),
        "--eps",
        "0.1",
    ]);
    assert_eq!(s["dtype"], "float64");
}

#[test]
fn point_clouds_without_weights_are_uniform() {
    let d = fresh("uniform");
    let f = |n: &str| p(&d, n);
    let mut g = Lcg(11);
    let x = Array2::from_shape_vec((9, 3), g.vec(27, 0.0, 1.0)).unwrap();
    let y = Array2::from_shape_vec((6, 3), g.vec(18, 0.0, 1.0)).unwrap();
    npy(&d, "x.npy", &x);
    npy(&d, "y.npy", &y);
    npy(&d, "u9.npy", &Array1::from_elem(9, 1.0 / 9.0));
    npy(&d, "u6.npy", &Array1::from_elem(6, 1.0 / 6.0));
    let pts = ["--x", &f("x.npy"), "--y", &f("y.npy"), "--eps", "0.05"];
    let run = |extra: &[&str]| {
        let mut a = vec!["wasserstein"];
        a.extend_from_slice(&pts);
        a.extend_from_slice(extra);
        ok(&a)
    };
    let explicit = run(&["--mu", &f("u9.npy"), "--nu", &f("u6.npy")]);
    let none = run(&[]);
    let only_mu = run(&["--mu", &f("u9.npy")]);
    let only_nu = run(&["--nu", &f("u6.npy")]);
    // The library on the same problem, called directly in f64.
    let cloud = logot::PointCloudCost::new(x.view(), y.view()).unwrap();
    let (a, b) = (
        Array2::from_elem((1, 9), 1.0 / 9.0),
        Array2::from_elem((1, 6), 1.0 / 6.0),
    );
    let lib = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05))
        .solve(&Problem::new(a.view(), b.view(), cloud).unwrap())
        .unwrap();
    for r in [&none, &only_mu, &only_nu] {
        assert_eq!(r["distance"], explicit["distance"]);
        assert_eq!(r["iterations"], explicit["iterations"]);
        assert!((dist(r) - lib.distance[0]).abs() <= 1e-12 * lib.distance[0]);
    }
    // A batch of weights on one side: the other side is uniform with each row's mass.
    let mu_b = Array2::from_shape_fn((2, 9), |(b, i)| (1.0 + i as f64) * (b + 1) as f64 / 45.0);
    npy(&d, "mu_b.npy", &mu_b);
    let nu_b = Array2::from_shape_fn((2, 6), |(b, _)| (b + 1) as f64 / 6.0);
    npy(&d, "nu_b.npy", &nu_b);
    let batch = run(&["--mu", &f("mu_b.npy")]);
    let batch_explicit = run(&["--mu", &f("mu_b.npy"), "--nu", &f("nu_b.npy")]);
    assert_eq!(batch["distance"], batch_explicit["distance"]);
    assert_eq!(batch["distance"].as_array().unwrap().len(), 2);
    // Coupling with no weights: a plan with uniform marginals.
    let c = ok(&[
        "coupling",
        "--x",
        &f("x.npy"),
        "--y",
        &f("y.npy"),
        "--eps",
        "0.05",
        "--out",
        &f("P.npy"),
    ]);
    assert_eq!(c["converged"], true);
    let plan: Array2<f64> = read_npy(f("P.npy")).unwrap();
    for r in plan.rows() {
        assert!((r.sum() - 1.0 / 9.0).abs() < 1e-9);
    }
    for col in plan.columns() {
        assert!((col.sum() - 1.0 / 6.0).abs() < 1e-9);
    }
    // With a dense cost the weights are required.
    npy(&d, "c.npy", &Array2::from_elem((9, 6), 0.5));
    refused(
        &["wasserstein", "--cost", &f("c.npy"), "--eps", "0.1"],
        &["--mu"],
    );
    refused(
        &[
            "wasserstein",
            "--cost",
            &f("c.npy"),
            "--mu",
            &f("u9.npy"),
            "--eps",
            "0.1",
        ],
        &["--nu"],
    );
}

/// `⟨P, C⟩ + ε Σ P (log P − 1)` of a plan (the primal form of `OT_ε`), in f64.
fn primal_objective(plan: &Array2<f64>, cost: &Array2<f64>, eps: f64) -> f64 {
    plan.iter()
        .zip(cost)
        .map(|(&p, &c)| {
            if p > 0.0 {
                p * c + eps * p * (p.ln() - 1.0)
            } else {
                0.0
            }
        })
        .sum()
}

#[test]
fn potentials_and_the_regularised_objective_describe_the_plan() {
    let d = fresh("potentials");
    let f = |n: &str| p(&d, n);
    let (mu, nu, c) = problem(30);
    let eps = 0.01;
    npy(&d, "mu.npy", &mu);
    npy(&d, "nu.npy", &nu);
    npy(&d, "c.npy", &c);
    let args = [
        "coupling",
        "--mu",
        &f("mu.npy"),
        "--nu",
        &f("nu.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.01",
        "--tol",
        "1e-12",
        "--out",
        &f("P.npy"),
        "--out-f",
        &f("F.npy"),
        "--out-g",
        &f("G.npy"),
    ];
    let j = ok(&args);
    let (fp, gp, plan): (Array1<f64>, Array1<f64>, Array2<f64>) = (
        read_npy(f("F.npy")).unwrap(),
        read_npy(f("G.npy")).unwrap(),
        read_npy(f("P.npy")).unwrap(),
    );
    assert_eq!((fp.len(), gp.len()), (30, 30));
    // P = exp((f ⊕ g − C)/ε) entry by entry, and its marginals are μ and ν.
    let from_pot =
        Array2::from_shape_fn((30, 30), |(i, k)| ((fp[i] + gp[k] - c[[i, k]]) / eps).exp());
    let worst = (&from_pot - &plan)
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(worst < 1e-12, "{worst}");
    let row: f64 = (0..30).map(|i| (from_pot.row(i).sum() - mu[i]).abs()).sum();
    let col: f64 = (0..30)
        .map(|k| (from_pot.column(k).sum() - nu[k]).abs())
        .sum();
    assert!(row < 1e-10 && col < 1e-10, "{row} {col}");
    // OT_ε reported = its primal form on the written plan.
    let ot = j["ot_eps"][0].as_f64().unwrap();
    let primal = primal_objective(&plan, &c, eps);
    assert!((ot - primal).abs() < 1e-9, "{ot} vs {primal}");
    // wasserstein writes the same potentials as coupling, and the library's.
    let mut w: Vec<&str> = args.to_vec();
    w[0] = "wasserstein";
    w.retain(|a| *a != "--out" && *a != f("P.npy"));
    let jw = ok(&w);
    assert_eq!(jw["ot_eps"], j["ot_eps"]);
    let fw: Array1<f64> = read_npy(f("F.npy")).unwrap();
    let lib = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps).tol(1e-12))
        .solve(&Problem::new(mu.view(), nu.view(), c.view()).unwrap())
        .unwrap();
    let df = (&fw - &lib.f.row(0))
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(df < 1e-12, "{df}");
    // One point against one point: P = μ = 1, OT_ε = c − ε (closed form).
    npy(&d, "one.npy", &Array1::from(vec![1.0]));
    npy(&d, "c11.npy", &Array2::from_elem((1, 1), 0.7));
    let one = ok(&[
        "wasserstein",
        "--mu",
        &f("one.npy"),
        "--nu",
        &f("one.npy"),
        "--cost",
        &f("c11.npy"),
        "--eps",
        "0.05",
    ]);
    assert!(
        (one["ot_eps"][0].as_f64().unwrap() - 0.65).abs() < 1e-12,
        "{one}"
    );
    // A batch: B×n and B×m potentials; zero-mass bins get −∞.
    let mu_b = Array2::from_shape_fn((2, 30), |(b, i)| if b == 1 && i < 3 { 0.0 } else { mu[i] });
    let mu_b = &mu_b
        / &mu_b
            .sum_axis(ndarray::Axis(1))
            .insert_axis(ndarray::Axis(1));
    let nu_b = Array2::from_shape_fn((2, 30), |(_, k)| nu[k]);
    npy(&d, "mu_b.npy", &mu_b);
    npy(&d, "nu_b.npy", &nu_b);
    ok(&[
        "wasserstein",
        "--mu",
        &f("mu_b.npy"),
        "--nu",
        &f("nu_b.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.01",
        "--out-f",
        &f("Fb.npy"),
        "--out-g",
        &f("Gb.npy"),
    ]);
    let fb: Array2<f64> = read_npy(f("Fb.npy")).unwrap();
    let gb: Array2<f64> = read_npy(f("Gb.npy")).unwrap();
    assert_eq!((fb.dim(), gb.dim()), ((2, 30), (2, 30)));
    assert!(fb[[1, 0]] == f64::NEG_INFINITY && fb[[0, 0]].is_finite());
    // Point clouds: potentials of the cloud problem, with the plan's marginals.
    let mut g = Lcg(3);
    let x = Array2::from_shape_vec((8, 2), g.vec(16, 0.0, 1.0)).unwrap();
    let y = Array2::from_shape_vec((5, 2), g.vec(10, 0.0, 1.0)).unwrap();
    npy(&d, "x.npy", &x);
    npy(&d, "y.npy", &y);
    ok(&[
        "wasserstein",
        "--x",
        &f("x.npy"),
        "--y",
        &f("y.npy"),
        "--eps",
        "0.05",
        "--tol",
        "1e-12",
        "--out-f",
        &f("Fp.npy"),
        "--out-g",
        &f("Gp.npy"),
    ]);
    let (fpc, gpc): (Array1<f64>, Array1<f64>) = (
        read_npy(f("Fp.npy")).unwrap(),
        read_npy(f("Gp.npy")).unwrap(),
    );
    let pc = Array2::from_shape_fn((8, 5), |(i, k)| {
        let c = (x[[i, 0]] - y[[k, 0]]).powi(2) + (x[[i, 1]] - y[[k, 1]]).powi(2);
        ((fpc[i] + gpc[k] - c) / 0.05).exp()
    });
    for r in pc.rows() {
        assert!((r.sum() - 1.0 / 8.0).abs() < 1e-10);
    }
    for col in pc.columns() {
        assert!((col.sum() - 0.2).abs() < 1e-10);
    }
}

#[test]
fn divergence_of_a_translation_is_the_squared_shift() {
    // y = x + t: OT_ε(μ, T_t μ) = OT_ε(μ, μ) + |t|² (the cross term is absorbed by the
    // potentials), so S_ε = |t|², ∂S/∂x_i = −2 μ_i t and ∂S/∂y_j = 2 ν_j t.
    let d = fresh("divergence");
    let f = |n: &str| p(&d, n);
    let mut g = Lcg(17);
    let x = Array2::from_shape_vec((12, 2), g.vec(24, 0.0, 1.0)).unwrap();
    let t = [0.3, -0.2];
    let y = Array2::from_shape_fn((12, 2), |(i, k)| x[[i, k]] + t[k]);
    let w = Array1::from_shape_fn(12, |i| 1.0 + (i % 4) as f64);
    let w = &w / w.sum();
    npy(&d, "x.npy", &x);
    npy(&d, "y.npy", &y);
    npy(&d, "w.npy", &w);
    let j = ok(&[
        "divergence",
        "--x",
        &f("x.npy"),
        "--y",
        &f("y.npy"),
        "--mu",
        &f("w.npy"),
        "--nu",
        &f("w.npy"),
        "--eps",
        "0.05",
        "--tol",
        "1e-12",
        "--grad-x",
        &f("gx.npy"),
        "--grad-y",
        &f("gy.npy"),
    ]);
    let t2 = t[0] * t[0] + t[1] * t[1];
    let s = j["divergence"].as_f64().unwrap();
    assert!((s - t2).abs() < 1e-9, "{s} vs {t2}");
    assert_eq!(j["convention"], "objective");
    assert_eq!(j["converged"], true);
    assert_eq!(j["problems"].as_array().unwrap().len(), 3);
    let (gx, gy): (Array2<f64>, Array2<f64>) = (
        read_npy(f("gx.npy")).unwrap(),
        read_npy(f("gy.npy")).unwrap(),
    );
    for i in 0..12 {
        for k in 0..2 {
            assert!((gx[[i, k]] + 2.0 * w[i] * t[k]).abs() < 1e-8, "gx[{i},{k}]");
            assert!((gy[[i, k]] - 2.0 * w[i] * t[k]).abs() < 1e-8, "gy[{i},{k}]");
        }
    }
    // Uniform weights by default, against S_ε assembled from three transport problems
    // solved by the library in f64 (alternating Sinkhorn, also for the symmetric ones).
    let z = Array2::from_shape_vec((7, 2), g.vec(14, -0.5, 0.5)).unwrap();
    npy(&d, "z.npy", &z);
    let j = ok(&[
        "divergence",
        "--x",
        &f("x.npy"),
        "--y",
        &f("z.npy"),
        "--eps",
        "0.1",
        "--eps-scaling",
        "--tol",
        "1e-12",
    ]);
    let max_cost = logot::PointCloudCost::new(x.view(), z.view())
        .unwrap()
        .max_cost();
    let solver = SinkhornSolver::new(
        CpuBackend,
        SinkhornParams::new(0.1)
            .tol(1e-12)
            .eps_scaling(logot::EpsScaling::from_max_cost(max_cost)),
    );
    let ot = |p: &Array2<f64>, q: &Array2<f64>| -> f64 {
        let a = Array2::from_elem((1, p.nrows()), 1.0 / p.nrows() as f64);
        let b = Array2::from_elem((1, q.nrows()), 1.0 / q.nrows() as f64);
        let cloud = logot::PointCloudCost::new(p.view(), q.view()).unwrap();
        let r = solver
            .point_gradients(&Problem::new(a.view(), b.view(), cloud).unwrap())
            .unwrap();
        assert!(r.result.convergence.converged);
        r.value[0]
    };
    let want = ot(&x, &z) - 0.5 * ot(&x, &x) - 0.5 * ot(&z, &z);
    let s = j["divergence"].as_f64().unwrap();
    assert!((s - want).abs() < 1e-9, "{s} vs {want}");
    assert!(s > 0.01);
    // Bad weights name the flag.
    npy(&d, "w5.npy", &Array1::from_elem(5, 0.2));
    refused(
        &[
            "divergence",
            "--x",
            &f("x.npy"),
            "--y",
            &f("z.npy"),
            "--mu",
            &f("w5.npy"),
            "--eps",
            "0.1",
        ],
        &["--mu"],
    );
}

#[test]
fn npz_members_are_inputs() {
    let d = fresh("npz");
    let f = |n: &str| p(&d, n);
    let (mu, nu, c) = problem(25);
    npy(&d, "mu.npy", &mu);
    npy(&d, "nu.npy", &nu);
    npy(&d, "c.npy", &c);
    let arrays = vec![
        ("mu", npy_bytes(&mu)),
        ("nu", npy_bytes(&f32s(&nu))),
        ("cost", npy_bytes(&c)),
    ];
    write_npz(&f("stored.npz"), &arrays, false);
    write_npz(&f("deflated.npz"), &arrays, true);
    write_npz(&f("one.npz"), &[("arr_0", npy_bytes(&c))], true);
    let plain = ok(&[
        "wasserstein",
        "--mu",
        &f("mu.npy"),
        "--nu",
        &f("nu.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.01",
    ]);
    // nu is float32 in the archives: promoted back to float64 it equals nu rounded.
    npy(&d, "nu_r.npy", &f64s(&f32s(&nu)));
    let rounded = ok(&[
        "wasserstein",
        "--mu",
        &f("mu.npy"),
        "--nu",
        &f("nu_r.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.01",
    ]);
    for z in ["stored.npz", "deflated.npz"] {
        let j = ok(&[
            "wasserstein",
            "--mu",
            &format!("{}:mu", f(z)),
            "--nu",
            &format!("{}:nu", f(z)),
            "--cost",
            &format!("{}:cost", f(z)),
            "--eps",
            "0.01",
        ]);
        assert_eq!(j["distance"], rounded["distance"], "{z}");
        assert_eq!(j["dtype"], "float64");
        // A member named with its .npy suffix, and an archive of one array without a name.
        let j = ok(&[
            "wasserstein",
            "--mu",
            &format!("{}:mu.npy", f(z)),
            "--nu",
            &f("nu.npy"),
            "--cost",
            &f("one.npz"),
            "--eps",
            "0.01",
        ]);
        assert_eq!(j["distance"], plain["distance"], "{z}");
    }
    // Errors: a missing member (listing what the archive holds), an archive of several
    // arrays without a name, a file that is not an archive, a corrupt member.
    refused(
        &[
            "wasserstein",
            "--mu",
            &format!("{}:mu", f("stored.npz")),
            "--nu",
            &f("nu.npy"),
            "--cost",
            &format!("{}:C", f("stored.npz")),
            "--eps",
            "0.01",
        ],
        &["--cost: no array \"C\" in this .npz archive (it holds cost, mu, nu)"],
    );
    refused(
        &[
            "wasserstein",
            "--mu",
            &f("stored.npz"),
            "--nu",
            &f("nu.npy"),
            "--cost",
            &f("c.npy"),
            "--eps",
            "0.01",
        ],
        &["--mu: a .npz archive of several arrays needs a member name"],
    );
    refused(
        &[
            "wasserstein",
            "--mu",
            &format!("{}:mu", f("mu.npy").replace(".npy", ".npz")),
            "--nu",
            &f("nu.npy"),
            "--cost",
            &f("c.npy"),
            "--eps",
            "0.01",
        ],
        &["No such file"],
    );
    std::fs::write(f("fake.npz"), b"not a zip archive at all").unwrap();
    refused(
        &[
            "wasserstein",
            "--mu",
            &format!("{}:mu", f("fake.npz")),
            "--nu",
            &f("nu.npy"),
            "--cost",
            &f("c.npy"),
            "--eps",
            "0.01",
        ],
        &["not a readable .npz (zip) archive"],
    );
    let mut bad = npy_bytes(&mu);
    bad.truncate(bad.len() - 8);
    write_npz(&f("bad.npz"), &[("mu", bad)], true);
    refused(
        &[
            "wasserstein",
            "--mu",
            &format!("{}:mu", f("bad.npz")),
            "--nu",
            &f("nu.npy"),
            "--cost",
            &f("c.npy"),
            "--eps",
            "0.01",
        ],
        &["bad.npz:mu: --mu: truncated .npy data"],
    );
    // Other commands read members too.
    write_npz(
        &f("sq.npz"),
        &[("x", npy_bytes(&Array2::from_elem((3, 3), 0.5)))],
        false,
    );
    let r = ok(&[
        "bistochastic",
        "--x",
        &format!("{}:x", f("sq.npz")),
        "--out",
        &f("r.npy"),
    ]);
    assert_eq!(r["n"], 3);
}

#[test]
fn eps_scaling_is_kept_with_gradients() {
    let d = fresh("eps_scaling");
    let f = |n: &str| p(&d, n);
    let (mu, nu, c) = problem(60);
    npy(&d, "mu.npy", &mu);
    npy(&d, "nu.npy", &nu);
    npy(&d, "c.npy", &c);
    // Few iterations at a small ε: the plain loop is far from converged, the annealed one
    // is not, so the two distances differ and a gradient run that dropped the scaling
    // would show it.
    let base = [
        "wasserstein",
        "--mu",
        &f("mu.npy"),
        "--nu",
        &f("nu.npy"),
        "--cost",
        &f("c.npy"),
        "--eps",
        "0.0005",
        "--iters",
        "150",
    ];
    let run = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        ok(&a)
    };
    let plain = run(&[]);
    let scaled = run(&["--eps-scaling"]);
    let with_grad = run(&[
        "--eps-scaling",
        "--grad-mu",
        &f("gm.npy"),
        "--grad-cost",
        &f("gc.npy"),
    ]);
    assert!(
        (dist(&plain) - dist(&scaled)).abs() > 1e-6,
        "{plain} {scaled}"
    );
    assert!(
        (dist(&with_grad) - dist(&scaled)).abs() <= 1e-12 * dist(&scaled),
        "{with_grad} vs {scaled}"
    );
    assert_eq!(with_grad["iterations"], scaled["iterations"]);
}

#[test]
fn counts_are_bounded_or_refused_naming_the_flag() {
    let d = fresh("counts");
    let f = |n: &str| p(&d, n);
    npy(
        &d,
        "sq.npy",
        &Array2::from_shape_fn((4, 3), |(i, j)| (i + 2 * j) as f64),
    );
    // newton-schulz --steps 1e11: refused at once (accepted, it would abort on a 2.4 TB allocation).
    let t = Instant::now();
    refused(
        &[
            "newton-schulz",
            "--x",
            &f("sq.npy"),
            "--steps",
            "100000000000",
            "--out",
            &f("y.npy"),
        ],
        &["--steps = 100000000000"],
    );
    refused(
        &[
            "newton-schulz",
            "--x",
            &f("sq.npy"),
            "--polish-steps",
            "18446744073709551615",
            "--out",
            &f("y.npy"),
        ],
        &["--polish-steps"],
    );
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(!Path::new(&f("y.npy")).exists());
    // The bound is inclusive: 10 000 steps run.
    ok(&[
        "newton-schulz",
        "--x",
        &f("sq.npy"),
        "--steps",
        "10000",
        "--out",
        &f("y.npy"),
    ]);
    // bench --runs/--warmup beyond a million: refused (the timings are kept in memory).
    refused(
        &[
            "bench",
            "--problem",
            "otA",
            "--runs",
            "18446744073709551615",
        ],
        &["--runs"],
    );
    refused(
        &[
            "bench",
            "--problem",
            "otA",
            "--warmup",
            "18446744073709551615",
        ],
        &["--warmup"],
    );
    // barycenter --check-every u64::MAX: no hang; the same barycenter as the library with
    // every iteration run (--tol 0).
    let n = 16;
    let x: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    let h = Array2::from_shape_fn((2, n), |(k, i)| {
        (-(x[i] - 0.25 - 0.5 * k as f64).powi(2) / 0.01).exp() + 1e-3
    });
    let h = &h / &h.sum_axis(ndarray::Axis(1)).insert_axis(ndarray::Axis(1));
    let c = Array2::from_shape_fn((n, n), |(i, j)| (x[i] - x[j]).powi(2));
    npy(&d, "h.npy", &h);
    npy(&d, "w.npy", &Array1::from(vec![0.4, 0.6]));
    npy(&d, "c.npy", &c);
    let (hp, wp, cp, out) = (f("h.npy"), f("w.npy"), f("c.npy"), f("bar.npy"));
    let bary = |extra: &[&str]| -> (serde_json::Value, Array1<f64>) {
        let mut a = vec![
            "barycenter",
            "--inputs",
            &hp,
            "--weights",
            &wp,
            "--eps",
            "0.01",
        ];
        a.extend_from_slice(&["--cost", &cp, "--out", &out]);
        a.extend_from_slice(extra);
        let j = ok_within(Duration::from_secs(60), &a);
        (j, read_npy(f("bar.npy")).unwrap())
    };
    let (j, got) = bary(&[
        "--check-every",
        "18446744073709551615",
        "--iters",
        "40",
        "--tol",
        "0",
    ]);
    assert_eq!(j["iterations"], 40);
    let w = Array1::from(vec![0.4, 0.6]);
    let want =
        logot::BarycenterSolver::new(CpuBackend, BarycenterParams::new(0.01).fixed_iterations(40))
            .solve(
                &logot::BarycenterProblem::new(h.view(), w.view()).unwrap(),
                c.view(),
            )
            .unwrap()
            .remove(0);
    let diff = (&got - &want.histogram)
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(diff < 1e-12, "{diff}");
    // With a tolerance and no --iters: POT's 1000 iterations at most, one check at the end.
    let (j, _) = bary(&["--check-every", "18446744073709551615"]);
    assert_eq!(j["iterations"], 1000);
    // --iters is the maximum (no ε-scaling): at most that many iterations run.
    let (mu, nu, c) = problem(20);
    npy(&d, "mu.npy", &mu);
    npy(&d, "nu.npy", &nu);
    npy(&d, "c2.npy", &c);
    for iters in ["1", "7"] {
        let j = ok(&[
            "wasserstein",
            "--mu",
            &f("mu.npy"),
            "--nu",
            &f("nu.npy"),
            "--cost",
            &f("c2.npy"),
            "--eps",
            "0.001",
            "--iters",
            iters,
        ]);
        assert!(
            j["iterations"].as_u64().unwrap() <= iters.parse().unwrap(),
            "{j}"
        );
    }
}

#[test]
fn help_says_what_converged_means_with_tol_zero() {
    for cmd in ["wasserstein", "coupling", "divergence"] {
        let (code, out, _) = logot(&[cmd, "--help"]);
        assert_eq!(code, 0);
        let text = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            text.contains("With --tol 0 all iterations run and `converged` says whether the final"),
            "{cmd}: {out}"
        );
        assert!(text.contains("default tolerance of the precision"), "{cmd}");
        assert!(text.contains("The most iterations run"), "{cmd}");
    }
    let (_, out, _) = logot(&["barycenter", "--help"]);
    let text = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("With --tol 0 all iterations run and `converged` says whether the final error is below POT's default, 1e-4"), "{out}");
}

/// `--devices` lists GPUs to join: refused without `--backend cuda`, empty, with gradient
/// outputs of the CPU-only kinds (`--grad-mu/--grad-nu/--grad-cost`), and on the bench
/// problems that are not solves.
#[test]
fn devices_are_refused_where_they_do_not_apply() {
    let d = fresh("cli_devices");
    let (mu, c) = (
        Array1::from_vec(vec![0.5f64, 0.5]),
        Array2::from_elem((2, 2), 1.0f64),
    );
    npy(&d, "mu.npy", &mu);
    npy(&d, "c.npy", &c);
    let (mu, c) = (p(&d, "mu.npy"), p(&d, "c.npy"));
    let solve = ["--mu", &mu, "--nu", &mu, "--cost", &c, "--eps", "0.1"];
    fn with<'a>(solve: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [&["wasserstein"][..], solve, extra].concat()
    }
    refused(&with(&solve, &["--devices", "0,1"]), &["--backend cuda"]);
    refused(
        &[
            &["coupling", "--out", &p(&d, "plan.npy")][..],
            &solve,
            &["--devices", "0"],
        ]
        .concat(),
        &["--backend cuda"],
    );
    refused(
        &with(
            &solve,
            &[
                "--backend",
                "cuda",
                "--devices",
                "0,1",
                "--grad-mu",
                &p(&d, "g.npy"),
            ],
        ),
        &["run on the CPU backend"],
    );
    refused(
        &["bench", "--problem", "otB", "--devices", "0,1"],
        &["--backend cuda"],
    );
    refused(
        &[
            "bench",
            "--problem",
            "mhc16",
            "--backend",
            "cuda",
            "--devices",
            "0,1",
        ],
        &["solver problems"],
    );
    // Nothing was written by the refused runs.
    assert!(!Path::new(&p(&d, "plan.npy")).exists() && !Path::new(&p(&d, "g.npy")).exists());
}
