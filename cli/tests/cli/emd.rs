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
