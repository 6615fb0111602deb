//! `logot emd`: costs against closed forms and brute force over permutations, the written
//! plan and potentials checked here (marginals, ⟨P, C⟩, dual feasibility, complementary
//! slackness, the sparse list equal to the dense plan), batches of point clouds, limits
//! reported, bad input refused.

use ndarray::{array, Array1, Array2, Array3, Axis};
use ndarray_npy::read_npy;

use crate::common;
use common::cli::{dir, logot, logot_json, npy, ok, p};

/// Every permutation of `0..n` (Heap's algorithm).
fn permutations(n: usize) -> Vec<Vec<usize>> {
    let mut a: Vec<usize> = (0..n).collect();
    let mut c = vec![0; n];
    let mut out = vec![a.clone()];
    let mut i = 0;
    while i < n {
        if c[i] < i {
            a.swap(if i % 2 == 0 { 0 } else { c[i] }, i);
            out.push(a.clone());
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    out
}

#[test]
fn dense_costs_match_closed_forms_and_the_written_outputs_prove_optimality() {
    let d = dir("dense");
    // The middle source pays 1 whichever way it goes: cost 0.5 (integer costs with ties).
    let cost = array![[0.0, 2.0], [1.0, 1.0], [2.0, 0.0]];
    let (mu, nu) = (array![0.25, 0.5, 0.25], array![0.5, 0.5]);
    npy(&d, "c.npy", &cost);
    npy(&d, "mu.npy", &mu);
    npy(&d, "nu.npy", &nu);
    let args = [
        "emd",
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--cost",
        &p(&d, "c.npy"),
        "--out",
        &p(&d, "plan.npy"),
        "--out-sparse",
        &p(&d, "sparse.npy"),
        "--out-f",
        &p(&d, "f.npy"),
        "--out-g",
        &p(&d, "g.npy"),
    ];
    let js = ok(&args);
    assert!(
        (js["cost"][0].as_f64().unwrap() - 0.5).abs() < 1e-15,
        "{js}"
    );
    assert_eq!(js["exact"], true);
    assert_eq!(js["dtype"], "float64");
    let plan: Array2<f64> = read_npy(p(&d, "plan.npy")).unwrap();
    let sparse: Array2<f64> = read_npy(p(&d, "sparse.npy")).unwrap();
    let f: Array1<f64> = read_npy(p(&d, "f.npy")).unwrap();
    let g: Array1<f64> = read_npy(p(&d, "g.npy")).unwrap();
    check_optimal(
        &plan,
        &sparse,
        &f,
        &g,
        &mu,
        &nu,
        &cost,
        js["cost"][0].as_f64().unwrap(),
    );

    // A uniform 6×6 problem: the best of the 720 permutations, computed here.
    let n = 6;
    let c = Array2::from_shape_fn((n, n), |(i, j)| {
        (((i * 7 + j * 3) % 5) as f64 - 1.5).powi(2) + (i * j) as f64 * 0.1
    });
    let best = permutations(n)
        .iter()
        .map(|s| (0..n).map(|i| c[[i, s[i]]]).sum::<f64>() / n as f64)
        .fold(f64::INFINITY, f64::min);
    let u = Array1::from_elem(n, 1.0 / n as f64);
    npy(&d, "c6.npy", &c);
    npy(&d, "u6.npy", &u);
    for method in ["auto", "simplex", "assignment"] {
        let (code, js, err) = logot_json(&[
            "emd",
            "--mu",
            &p(&d, "u6.npy"),
            "--nu",
            &p(&d, "u6.npy"),
            "--cost",
            &p(&d, "c6.npy"),
            "--method",
            method,
            "--out",
            &p(&d, "plan6.npy"),
            "--out-sparse",
            &p(&d, "sparse6.npy"),
            "--out-f",
            &p(&d, "f6.npy"),
            "--out-g",
            &p(&d, "g6.npy"),
        ]);
        assert_eq!(code, 0, "{method}: {err}");
        let got = js["cost"][0].as_f64().unwrap();
        assert!(
            (got - best).abs() <= 1e-14 * best.abs().max(1.0),
            "{method}: {got} against {best}"
        );
        let plan: Array2<f64> = read_npy(p(&d, "plan6.npy")).unwrap();
        let sparse: Array2<f64> = read_npy(p(&d, "sparse6.npy")).unwrap();
        let f: Array1<f64> = read_npy(p(&d, "f6.npy")).unwrap();
        let g: Array1<f64> = read_npy(p(&d, "g6.npy")).unwrap();
        check_optimal(&plan, &sparse, &f, &g, &u, &u, &c, got);
    }
}

/// The written plan meets the marginals, costs what the JSON says, equals its sparse list,
/// and the written potentials are feasible and tight on its support with no duality gap.
#[allow(clippy::too_many_arguments)]
fn check_optimal(
    plan: &Array2<f64>,
    sparse: &Array2<f64>,
    f: &Array1<f64>,
    g: &Array1<f64>,
    mu: &Array1<f64>,
    nu: &Array1<f64>,
    c: &Array2<f64>,
    cost: f64,
) {
    let tol = 1e-14;
    assert!((&plan.sum_axis(Axis(1)) - mu)
        .iter()
        .all(|v| v.abs() <= tol));
    assert!((&plan.sum_axis(Axis(0)) - nu)
        .iter()
        .all(|v| v.abs() <= tol));
    assert!(((plan * c).sum() - cost).abs() <= tol);
    let mut from_sparse = Array2::<f64>::zeros(plan.dim());
    for e in sparse.rows() {
        from_sparse[[e[0] as usize, e[1] as usize]] += e[2];
    }
    assert_eq!(&from_sparse, plan);
    for ((i, j), &v) in plan.indexed_iter() {
        let slack = c[[i, j]] - f[i] - g[j];
        assert!(
            slack >= -tol,
            "dual constraint ({i}, {j}) violated by {slack:e}"
        );
        if v > 0.0 {
            assert!(
                slack.abs() <= tol,
                "slack {slack:e} on the support at ({i}, {j})"
            );
        }
    }
    assert!((mu.dot(f) + nu.dot(g) - cost).abs() <= tol);
}

#[test]
fn batches_of_translated_clouds_cost_the_translation() {
    // W_2²(μ, μ + t) = |t|² for uniform clouds: a translation is an optimal map.
    let d = dir("clouds");
    let (b, n, dim) = (3, 40, 2);
    let x = Array3::from_shape_fn((b, n, dim), |(k, i, t)| {
        ((i * 13 + t * 7 + k * 5) % 17) as f64 / 17.0
    });
    let shift = [[0.3, -0.2], [0.0, 0.5], [-0.1, -0.1]];
    let y = Array3::from_shape_fn((b, n, dim), |(k, i, t)| x[[k, i, t]] + shift[k][t]);
    npy(&d, "x.npy", &x.mapv(|v| v as f32));
    npy(&d, "y.npy", &y.mapv(|v| v as f32));
    let (code, js, err) = logot_json(&[
        "emd",
        "--x",
        &p(&d, "x.npy"),
        "--y",
        &p(&d, "y.npy"),
        "--out",
        &p(&d, "plan.npy"),
        "--out-sparse",
        &p(&d, "sparse.npy"),
        "--out-f",
        &p(&d, "f.npy"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(js["dtype"], "float32");
    assert_eq!(js["exact"], true, "{js}");
    let x32 = x.mapv(|v| v as f32 as f64);
    let y32 = y.mapv(|v| v as f32 as f64);
    for k in 0..b {
        // The translation as the f32 inputs hold it, each point's own.
        let want: f64 = (0..n)
            .map(|i| {
                (0..dim)
                    .map(|t| (y32[[k, i, t]] - x32[[k, i, t]]).powi(2))
                    .sum::<f64>()
            })
            .sum::<f64>()
            / n as f64;
        let got = js["cost"][k].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 1e-12,
            "problem {k}: {got} against {want}"
        );
    }
    let plan: Array3<f32> = read_npy(p(&d, "plan.npy")).unwrap();
    assert_eq!(plan.dim(), (b, n, n));
    let f: Array2<f32> = read_npy(p(&d, "f.npy")).unwrap();
    assert_eq!(f.dim(), (b, n));
    let sparse: Array2<f32> = read_npy(p(&d, "sparse.npy")).unwrap();
    assert_eq!(sparse.ncols(), 4);
    let nonzeros: usize = (0..b)
        .map(|k| js["nonzeros_each"][k].as_u64().unwrap() as usize)
        .sum();
    assert_eq!(sparse.nrows(), nonzeros);
    for e in sparse.rows() {
        let (k, i, j) = (e[0] as usize, e[1] as usize, e[2] as usize);
        assert_eq!(plan[[k, i, j]], e[3]);
    }
}

#[test]
fn limits_are_reported_and_bad_inputs_refused() {
    let d = dir("limits");
    let n = 30;
    let c = Array2::from_shape_fn((n, n + 5), |(i, j)| ((i * 31 + j * 17) % 23) as f64);
    let mu = Array1::from_shape_fn(n, |i| 1.0 + (i % 3) as f64);
    let nu = Array1::from_shape_fn(n + 5, |j| 1.0 + (j % 4) as f64);
    let nu = &nu * (mu.sum() / nu.sum());
    npy(&d, "c.npy", &c);
    npy(&d, "mu.npy", &mu);
    npy(&d, "nu.npy", &nu);
    let base = [
        "emd",
        "--mu",
        &p(&d, "mu.npy"),
        "--nu",
        &p(&d, "nu.npy"),
        "--cost",
        &p(&d, "c.npy"),
    ];
    let (code, full, err) = logot_json(&base);
    assert_eq!(code, 0, "{err}");
    assert_eq!(full["exact"], true);
    let mut limited = base.to_vec();
    limited.extend(["--iters", "3"]);
    let (code, js, err) = logot_json(&limited);
    assert_eq!(code, 0, "{err}");
    assert_eq!(js["converged"], false);
    assert_eq!(js["exact"], false);
    assert_eq!(js["iterations_each"][0], 3);

    // Unequal masses, negative weights, a cost of the wrong shape: exit 2, the argument named.
    npy(&d, "half.npy", &(&nu * 0.5));
    npy(&d, "neg.npy", &mu.mapv(|v| v - 2.5));
    npy(&d, "c_bad.npy", &Array2::<f64>::zeros((n, n)));
    for (mu_f, nu_f, c_f, named) in [
        ("mu.npy", "half.npy", "c.npy", "nu"),
        ("neg.npy", "nu.npy", "c.npy", "mu"),
        ("mu.npy", "nu.npy", "c_bad.npy", "cost"),
    ] {
        let (code, out, err) = logot(&[
            "emd",
            "--mu",
            &p(&d, mu_f),
            "--nu",
            &p(&d, nu_f),
            "--cost",
            &p(&d, c_f),
        ]);
        assert_eq!(code, 2, "{mu_f} {nu_f} {c_f}: {out}");
        assert!(err.contains(named), "{named} not named in: {err}");
    }
}

/// `--backend`: the CPU says so in the JSON; `--backend cuda` refuses input the GPU auction
/// does not take before any device is started, naming the flag (any build); a uniform
/// square batch goes to the GPU in a CUDA build with a GPU (the brute-force optimum over
/// every permutation, each problem solved by the auction or re-solved on the CPU and
/// counted), and is refused naming the missing CUDA support in a build without it.
#[test]
fn backend_cuda_takes_assignment_batches_and_refuses_the_rest_naming_the_flag() {
    let d = dir("emd_backend");
    let (b, n) = (3, 5);
    let c = Array3::from_shape_fn((b, n, n), |(k, i, j)| {
        ((i * 3 + j * 7 + k * 5) % 6) as f64 * 0.5 + (i as f64 - j as f64).powi(2) * 0.1
    });
    let best: Vec<f64> = (0..b)
        .map(|k| {
            permutations(n)
                .iter()
                .map(|s| (0..n).map(|i| c[[k, i, s[i]]]).sum::<f64>() / n as f64)
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let u = Array2::from_elem((b, n), 1.0 / n as f64);
    let skewed = Array2::from_shape_fn((b, n), |(_, i)| (i + 1) as f64 / 15.0);
    let x = Array3::from_shape_fn((b, n, 2), |(k, i, t)| ((k + i * 3 + t * 5) % 7) as f64);
    npy(&d, "c.npy", &c);
    npy(&d, "u.npy", &u);
    npy(&d, "skewed.npy", &skewed);
    npy(&d, "c54.npy", &c.slice(ndarray::s![.., .., ..4]).to_owned());
    npy(&d, "u4.npy", &Array2::from_elem((b, 4), 0.25));
    npy(&d, "x.npy", &x);
    let (c_, u_, sk) = (p(&d, "c.npy"), p(&d, "u.npy"), p(&d, "skewed.npy"));
    let dense = |mu: &str, nu: &str, cost: &str, more: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["emd", "--mu", mu, "--nu", nu, "--cost", cost]
            .iter()
            .map(|s| s.to_string())
            .collect();
        v.extend(more.iter().map(|s| s.to_string()));
        v
    };
    let run = |args: Vec<String>| logot_json(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());

    // The CPU: the optimum, reported as the CPU's.
    let (code, js, err) = run(dense(&u_, &u_, &c_, &["--backend", "cpu"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(js["backend"], "cpu");
    assert_eq!(js["resolved_on_cpu"], 0);
    for k in 0..b {
        let got = js["cost"][k].as_f64().unwrap();
        assert!(
            (got - best[k]).abs() <= 1e-14 * best[k].max(1.0),
            "{got} vs {}",
            best[k]
        );
    }

    // Refusals, each naming the flag at fault and why.
    let u4 = p(&d, "u4.npy");
    let cases: Vec<(Vec<String>, [&str; 2])> = vec![
        (
            dense(&sk, &sk, &c_, &["--backend", "cuda"]),
            ["--mu", "uniform"],
        ),
        (
            dense(&u_, &sk, &c_, &["--backend", "cuda"]),
            ["--nu", "uniform"],
        ),
        (
            dense(&u_, &u4, &p(&d, "c54.npy"), &["--backend", "cuda"]),
            ["--cost", "not square"],
        ),
        (
            dense(&u_, &u_, &c_, &["--backend", "cuda", "--method", "simplex"]),
            ["--method", "auction only"],
        ),
        (
            [
                "emd",
                "--x",
                &p(&d, "x.npy"),
                "--y",
                &p(&d, "x.npy"),
                "--metric",
                "euclidean",
                "--backend",
                "cuda",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            ["--metric", "squared Euclidean"],
        ),
    ];
    for (args, needles) in cases {
        let (code, out, err) = logot(&args.iter().map(|s| s.as_str()).collect::<Vec<_>>());
        assert_eq!(code, 2, "{args:?}: {out} {err}");
        assert!(!err.contains("panicked"), "{err}");
        for needle in needles {
            assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
        }
    }

    // A uniform square batch on the GPU.
    let (code, js, err) = run(dense(&u_, &u_, &c_, &["--backend", "cuda"]));
    if !cfg!(feature = "cuda") {
        assert_eq!(code, 2);
        assert!(err.contains("built without CUDA support"), "{err}");
        return;
    }
    #[cfg(feature = "cuda")]
    if common::gpu::gpu().is_none() {
        return;
    }
    assert_eq!(code, 0, "{err}");
    assert_eq!(js["backend"], "cuda");
    assert_eq!(js["exact"], true, "{js}");
    let methods = js["method_each"].as_array().unwrap();
    let resolved = methods.iter().filter(|m| *m != "auction").count();
    assert_eq!(js["resolved_on_cpu"], resolved, "{js}");
    for k in 0..b {
        let got = js["cost"][k].as_f64().unwrap();
        assert!(
            (got - best[k]).abs() <= 1e-12 * best[k].max(1.0),
            "{got} vs {}",
            best[k]
        );
    }
}
