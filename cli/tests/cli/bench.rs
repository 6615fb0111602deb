//! `logot bench`: the JSON contract (problem, backend, median time) on the quick canonical
//! problems, results that say the timed work was the real one, and refusals.

use std::process::Command;

fn bench(args: &[&str]) -> (i32, serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_logot"))
        .arg("bench")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn check_timing(j: &serde_json::Value, problem: &str, runs: usize) {
    assert_eq!(j["problem"], problem, "{j}");
    assert_eq!(j["backend"], "cpu");
    let ms = j["ms"].as_f64().unwrap();
    let min = j["min_ms"].as_f64().unwrap();
    let all = j["runs_ms"].as_array().unwrap();
    assert_eq!(all.len(), runs, "{j}");
    assert!(ms > 0.0 && min > 0.0 && min <= ms, "{j}");
}

/// One timed run of the point-cloud `problem` at N = M = `n` (and dimension `dim` when
/// given): it succeeds, reports its timing and the size it ran (`d` = `want_d`).
fn bench_points(problem: &str, n: usize, dim: Option<usize>, want_d: usize) -> serde_json::Value {
    let (pts, d) = (n.to_string(), dim.map(|d| d.to_string()));
    let mut args = vec![
        "--problem",
        problem,
        "--json",
        "--runs",
        "1",
        "--points",
        &pts,
    ];
    if let Some(d) = &d {
        args.extend(["--dim", d]);
    }
    let (code, j, err) = bench(&args);
    assert_eq!(code, 0, "{problem}: {err}");
    check_timing(&j, problem, 1);
    assert_eq!(
        (j["n"].as_u64(), j["m"].as_u64(), j["d"].as_u64()),
        (Some(n as u64), Some(n as u64), Some(want_d as u64)),
        "{j}"
    );
    j
}

#[test]
fn ot_a_reports_the_median_of_the_timed_runs() {
    let (code, j, err) = bench(&["--problem", "otA", "--json", "--runs", "3"]);
    assert_eq!(code, 0, "{err}");
    check_timing(&j, "otA", 3);
    assert_eq!(j["iterations"], 200);
    // The sorted middle of three runs.
    let mut all: Vec<f64> = j["runs_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    all.sort_by(f64::total_cmp);
    assert_eq!(j["ms"].as_f64().unwrap(), all[1]);
}

#[test]
fn mhc4_times_forward_and_backward() {
    let (code, j, err) = bench(&[
        "--problem",
        "mhc4",
        "--json",
        "--runs",
        "1",
        "--warmup",
        "0",
    ]);
    assert_eq!(code, 0, "{err}");
    check_timing(&j, "mhc4", 1);
    assert_eq!(j["batch"], 65536);
    assert_eq!(j["n"], 4);
    assert_eq!(j["iterations"], 20);
    assert_eq!(j["dtype"], "float32");
    assert!(j["backward_ms"].as_f64().unwrap() > 0.0);
    // 20 iterations bring U[0,4) logits close to bistochastic, and every backward CG met
    // its tolerance: the timed work is the real projection.
    assert!(j["marginal_error"].as_f64().unwrap() < 1e-2, "{j}");
    assert_eq!(j["cg_unconverged"], 0, "{j}");
}

#[test]
fn svd3_runs_the_canonical_batch() {
    let (code, j, err) = bench(&[
        "--problem",
        "svd3",
        "--json",
        "--runs",
        "2",
        "--warmup",
        "0",
    ]);
    assert_eq!(code, 0, "{err}");
    check_timing(&j, "svd3", 2);
    assert_eq!(j["shape"], serde_json::json!([4096, 1024, 3]));
    // The largest singular value of a 1024×3 matrix of N(0,1) entries is close to
    // √1024 + √3 ≈ 33.7 (Marchenko–Pastur edge); the max over 4096 matrices a little above.
    let s = j["s_max"].as_f64().unwrap();
    assert!(s > 32.0 && s < 40.0, "{j}");
}

#[test]
fn max_seconds_stops_the_repetitions_after_one_run() {
    let (code, j, err) = bench(&[
        "--problem",
        "svd3",
        "--json",
        "--runs",
        "50",
        "--warmup",
        "0",
        "--max-seconds",
        "0",
    ]);
    assert_eq!(code, 0, "{err}");
    check_timing(&j, "svd3", 1);
}

#[test]
fn unknown_problems_and_missing_backends_are_refused() {
    let (code, _, err) = bench(&["--problem", "nope", "--json"]);
    assert_ne!(code, 0);
    assert!(err.contains("nope"), "{err}");
    if !cfg!(feature = "cuda") {
        for p in ["otA", "mhc16", "gemm"] {
            let (code, _, err) = bench(&["--problem", p, "--backend", "cuda", "--json"]);
            assert_eq!(code, 2, "{p}: {err}");
            assert!(err.contains("cuda"), "{p}: {err}");
        }
    }
}

#[test]
fn reg_m_times_the_unbalanced_problem() {
    let (code, bal, err) = bench(&["--problem", "otA", "--json", "--runs", "1"]);
    assert_eq!(code, 0, "{err}");
    assert!(bal["reg_m"].is_null(), "{bal}");
    let (code, j, err) = bench(&[
        "--problem",
        "otA",
        "--json",
        "--runs",
        "1",
        "--reg-m",
        "0.05",
    ]);
    assert_eq!(code, 0, "{err}");
    check_timing(&j, "otA", 1);
    assert_eq!(j["reg_m"], 0.05, "{j}");
    assert_eq!(j["iterations"], 200);
    // With ρ = 0.05 only part of the mass moves: a transport cost below the balanced one.
    let (d_bal, d) = (
        bal["distance_first"].as_f64().unwrap(),
        j["distance_first"].as_f64().unwrap(),
    );
    assert!(
        d.is_finite() && d > 0.0 && d < 0.99 * d_bal,
        "{d} vs {d_bal}"
    );
    // The unbalanced barycenter of the same images: its mass is no longer pinned to 1.
    let (code, bal, err) = bench(&["--problem", "bary64", "--json", "--runs", "1"]);
    assert_eq!(code, 0, "{err}");
    let (code, j, err) = bench(&[
        "--problem",
        "bary64",
        "--json",
        "--runs",
        "1",
        "--reg-m",
        "0.01",
    ]);
    assert_eq!(code, 0, "{err}");
    check_timing(&j, "bary64", 1);
    assert_eq!(j["reg_m"], 0.01, "{j}");
    let (m_bal, m) = (bal["mass"].as_f64().unwrap(), j["mass"].as_f64().unwrap());
    assert!((m_bal - 1.0).abs() < 1e-3, "{bal}");
    assert!(
        (m - m_bal).abs() > 1e-3,
        "unbalanced mass {m} vs balanced {m_bal}"
    );
    for (args, needle) in [
        (vec!["--problem", "otA", "--reg-m", "0"], "--reg-m"),
        (vec!["--problem", "otA", "--reg-m", "nan"], "--reg-m"),
        (vec!["--problem", "mhc4", "--reg-m", "1"], "--reg-m"),
        (vec!["--problem", "bary64", "--reg-m", "-1"], "--reg-m"),
    ] {
        let (code, _, err) = bench(&args);
        assert_ne!(code, 0, "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// otC10 and otCbig (10 point-cloud iterations at d = 3, ε = 0.05) made small by
/// `--points`: the JSON names the problem and its shape, and `f_first` is the first entry
/// of `f` after 10 iterations from zero potentials by the library on the same clouds.
#[test]
fn otc10_and_otcbig_run_small_with_points() {
    use logot::backend::{Marginals, Potentials};
    use logot::{Backend, CpuBackend, PointCloudCost};
    for (problem, n) in [("otC10", 300usize), ("otCbig", 257)] {
        let j = bench_points(problem, n, None, 3);
        assert_eq!(
            (j["iterations"].as_u64(), j["eps"].as_f64()),
            (Some(10), Some(0.05))
        );
        // The same 10 iterations by the library.
        let (mu, nu, x, y) = logot_cli::problems::ot_c::<f32>(n, 3);
        let cpu = CpuBackend;
        let cost = cpu
            .prepare_cost(&PointCloudCost::new(x.view(), y.view()).unwrap().into())
            .unwrap();
        let logs = |v: &ndarray::Array1<f32>| v.iter().map(|p| p.ln()).collect::<Vec<f32>>();
        let (mu_d, nu_d) = (mu.to_vec(), nu.to_vec());
        let (log_mu, log_nu) = (logs(&mu), logs(&nu));
        let marginals = Marginals {
            mu: &mu_d,
            nu: &nu_d,
            log_mu: &log_mu,
            log_nu: &log_nu,
        };
        let mut pot = Potentials {
            f: vec![0.0f32; n],
            g: vec![0.0f32; n],
        };
        cpu.iterate(&cost, 0.05, &marginals, &mut pot, 10).unwrap();
        let got = j["f_first"].as_f64().unwrap();
        assert_eq!(got, pot.f[0] as f64, "{j}");
    }
}

/// `--points`/`--dim` resize the point-cloud problems: otC's half-step from `f = 0` at
/// N = 300, d = 40 (the cross-term kernel) equals an f64 brute force on the same clouds,
/// `g_0 = ε log(1/N) − ε LSE_i(−|x_i − y_0|²/ε)`; otC64 reports the size it ran.
#[test]
fn point_cloud_problems_take_a_size_override() {
    let (n, d) = (300usize, 40usize);
    let j = bench_points("otC", n, Some(d), d);
    let (_, _, x, y) = logot_cli::problems::ot_c::<f32>(n, d);
    let eps = logot_cli::problems::OTC_EPS;
    let args: Vec<f64> = (0..n)
        .map(|i| {
            let c: f64 = (0..d)
                .map(|k| (x[[i, k]] as f64 - y[[0, k]] as f64).powi(2))
                .sum();
            -c / eps
        })
        .collect();
    let mx = args.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = mx + args.iter().map(|a| (a - mx).exp()).sum::<f64>().ln();
    let want = eps * ((1.0 / n as f64).ln() - lse);
    let got = j["g_first"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-4 * want.abs(), "{got} vs {want}");

    let j = bench_points("otC64", 200, Some(16), 16);
    assert!(j["f_first"].as_f64().unwrap().is_finite(), "{j}");
}

/// The point-cloud options are checked before any work and refused naming the flag:
/// `--points`/`--dim` of 0 or on a problem without points, `--precision` with a bad value
/// (the message lists the values) or on a problem other than otC64/otC1024 (the message
/// names them), `--gemm-precision` likewise (gw only), the cloud flags (`--data`, `--weights`, `--seed`, `--dump`) on a problem
/// without points, an unknown `--data` (the message lists the kinds), `--eps-rel` ≤ 0 or
/// NaN, a negative `--seed`.
#[test]
fn point_cloud_options_are_refused_by_name() {
    for (args, words) in [
        (vec!["--problem", "otA", "--points", "10"], vec!["--points"]),
        (
            vec!["--problem", "otC10", "--points", "0"],
            vec!["--points"],
        ),
        (
            vec!["--problem", "otC64", "--points", "0"],
            vec!["--points"],
        ),
        (vec!["--problem", "otA", "--dim", "5"], vec!["--dim"]),
        (
            vec!["--problem", "otC64", "--precision", "half"],
            vec!["--precision", "tf32x3"],
        ),
        (
            vec!["--problem", "otA", "--precision", "tf32"],
            vec!["--precision", "otC64"],
        ),
        (
            vec!["--problem", "otA", "--gemm-precision", "tf32"],
            vec!["--gemm-precision", "gw"],
        ),
        (
            vec!["--problem", "gw", "--gemm-precision", "half"],
            vec!["--gemm-precision", "tf32x3"],
        ),
        (vec!["--problem", "otA", "--data", "sphere"], vec!["--data"]),
        (vec!["--problem", "mhc4", "--seed", "3"], vec!["--seed"]),
        (
            vec!["--problem", "otB", "--weights", "random"],
            vec!["--weights"],
        ),
        (vec!["--problem", "otA", "--dump", "out"], vec!["--dump"]),
        (
            vec!["--problem", "otC10", "--data", "cubes"],
            vec!["--data", "clustered"],
        ),
        (
            vec!["--problem", "otC10", "--eps-rel", "0"],
            vec!["--eps-rel"],
        ),
        (
            vec!["--problem", "otC10", "--eps-rel", "nan"],
            vec!["--eps-rel"],
        ),
        (vec!["--problem", "otC10", "--seed", "-1"], vec!["--seed"]),
    ] {
        let mut args = args;
        args.push("--json");
        let (code, _, err) = bench(&args);
        assert_ne!(code, 0, "{args:?}");
        for w in words {
            assert!(err.contains(w), "{args:?}: {err}");
        }
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// A point-cloud bench run with `--dump`: the JSON, meta.json and the arrays it wrote.
struct Dumped {
    j: serde_json::Value,
    meta: serde_json::Value,
    x: ndarray::Array2<f32>,
    y: ndarray::Array2<f32>,
    a: ndarray::Array1<f32>,
    b: ndarray::Array1<f32>,
}

impl Dumped {
    /// `x` and `y` stacked, in f64.
    fn points(&self) -> Vec<Vec<f64>> {
        let rows = |c: &ndarray::Array2<f32>| -> Vec<Vec<f64>> {
            c.rows()
                .into_iter()
                .map(|r| r.iter().map(|&v| v as f64).collect())
                .collect()
        };
        let mut all = rows(&self.x);
        all.extend(rows(&self.y));
        all
    }
}

/// `logot bench --problem otC10 --points n --dim d ARGS --dump DIR --runs 1` (CPU, f32):
/// it succeeds, meta.json describes what the JSON reports, and `f_first` is the first entry
/// of `f` after 10 iterations by the library on the dumped clouds and weights at the dumped
/// ε (the timed solve was the dumped problem).
fn bench_dumped(name: &str, n: usize, d: usize, args: &[&str]) -> Dumped {
    use logot::backend::{Marginals, Potentials};
    use logot::{Backend, CpuBackend, PointCloudCost};
    use ndarray_npy::read_npy;
    let dir = crate::common::cli::fresh(name);
    let (pts, dim, dump) = (
        n.to_string(),
        d.to_string(),
        dir.to_string_lossy().into_owned(),
    );
    let mut all = vec![
        "--problem",
        "otC10",
        "--json",
        "--runs",
        "1",
        "--points",
        &pts,
        "--dim",
        &dim,
        "--dump",
        &dump,
    ];
    all.extend(args);
    let (code, j, err) = bench(&all);
    assert_eq!(code, 0, "{args:?}: {err}");
    check_timing(&j, "otC10", 1);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    for key in ["n", "m", "d", "eps", "data", "weights", "seed", "mean_cost"] {
        assert_eq!(meta[key], j[key], "{key}: {meta} vs {j}");
    }
    assert_eq!(
        (
            meta["n"].as_u64(),
            meta["d"].as_u64(),
            meta["dtype"].as_str()
        ),
        (Some(n as u64), Some(d as u64), Some("float32"))
    );
    let out = Dumped {
        x: read_npy(dir.join("x.npy")).unwrap(),
        y: read_npy(dir.join("y.npy")).unwrap(),
        a: read_npy(dir.join("a.npy")).unwrap(),
        b: read_npy(dir.join("b.npy")).unwrap(),
        j,
        meta,
    };
    assert_eq!((out.x.dim(), out.y.dim()), ((n, d), (n, d)));
    assert_eq!((out.a.len(), out.b.len()), (n, n));
    for w in [&out.a, &out.b] {
        let total: f64 = w.iter().map(|&v| v as f64).sum();
        assert!(
            w.iter().all(|&v| v > 0.0) && (total - 1.0).abs() < 1e-5,
            "{total}"
        );
    }
    // The same 10 iterations by the library on the dumped problem.
    let cpu = CpuBackend;
    let cost = cpu
        .prepare_cost(
            &PointCloudCost::new(out.x.view(), out.y.view())
                .unwrap()
                .into(),
        )
        .unwrap();
    let logs = |v: &ndarray::Array1<f32>| v.iter().map(|p| p.ln()).collect::<Vec<f32>>();
    let (mu, nu) = (out.a.to_vec(), out.b.to_vec());
    let (log_mu, log_nu) = (logs(&out.a), logs(&out.b));
    let marginals = Marginals {
        mu: &mu,
        nu: &nu,
        log_mu: &log_mu,
        log_nu: &log_nu,
    };
    let mut pot = Potentials {
        f: vec![0.0f32; n],
        g: vec![0.0f32; n],
    };
    let eps = out.meta["eps"].as_f64().unwrap() as f32;
    cpu.iterate(&cost, eps, &marginals, &mut pot, 10).unwrap();
    // As f32: serde_json reads a float back within an ulp of f64, and the value is an f32.
    assert_eq!(
        out.j["f_first"].as_f64().unwrap() as f32,
        pot.f[0],
        "{}",
        out.j
    );
    assert!(out.j["marginal_error"].as_f64().unwrap().is_finite());
    out
}

/// Eigenvalues of a symmetric matrix by cyclic Jacobi rotations, largest first.
fn symmetric_eigenvalues(mut m: Vec<Vec<f64>>) -> Vec<f64> {
    let n = m.len();
    for _ in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| m[i][j] * m[i][j])
            .sum();
        if off < 1e-22 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if m[p][q].abs() < 1e-300 {
                    continue;
                }
                let theta = (m[q][q] - m[p][p]) / (2.0 * m[p][q]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let (c, s) = (1.0 / (t * t + 1.0).sqrt(), t / (t * t + 1.0).sqrt());
                // M ← Jᵀ M J: columns p and q, then rows p and q.
                for row in m.iter_mut() {
                    let (mkp, mkq) = (row[p], row[q]);
                    row[p] = c * mkp - s * mkq;
                    row[q] = s * mkp + c * mkq;
                }
                let (head, tail) = m.split_at_mut(q);
                for (mpk, mqk) in head[p].iter_mut().zip(tail[0].iter_mut()) {
                    let (a, b) = (*mpk, *mqk);
                    *mpk = c * a - s * b;
                    *mqk = s * a + c * b;
                }
            }
        }
    }
    let mut e: Vec<f64> = (0..n).map(|i| m[i][i]).collect();
    e.sort_by(|a, b| b.total_cmp(a));
    e
}

/// `(1/n) Σ (p − c)(p − c)ᵀ` over the points, about `c` (the mean when `centred`, else 0).
fn second_moments(points: &[Vec<f64>], centred: bool) -> Vec<Vec<f64>> {
    let (n, d) = (points.len(), points[0].len());
    let mut c = vec![0.0; d];
    if centred {
        for p in points {
            c.iter_mut().zip(p).for_each(|(c, v)| *c += v / n as f64);
        }
    }
    let mut m = vec![vec![0.0; d]; d];
    for p in points {
        for i in 0..d {
            for k in 0..d {
                m[i][k] += (p[i] - c[i]) * (p[k] - c[k]) / n as f64;
            }
        }
    }
    m
}

/// The groups of single-linkage clustering at distance `h`: their sizes and centroids.
fn linkage(points: &[Vec<f64>], h: f64) -> Vec<(usize, Vec<f64>)> {
    let n = points.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for i in 0..n {
        for k in i + 1..n {
            let dist2: f64 = points[i]
                .iter()
                .zip(&points[k])
                .map(|(a, b)| (a - b) * (a - b))
                .sum();
            if dist2 < h * h {
                let (ri, rk) = (root(&mut parent, i), root(&mut parent, k));
                parent[ri] = rk;
            }
        }
    }
    let mut groups: std::collections::BTreeMap<usize, (usize, Vec<f64>)> = Default::default();
    for (i, p) in points.iter().enumerate() {
        let g = groups
            .entry(root(&mut parent, i))
            .or_insert((0, vec![0.0; p.len()]));
        g.0 += 1;
        g.1.iter_mut().zip(p).for_each(|(s, v)| *s += v);
    }
    groups
        .into_values()
        .map(|(size, sum)| (size, sum.iter().map(|s| s / size as f64).collect()))
        .collect()
}

/// Seed 0 of uniform data with uniform weights is the canonical problem (the clouds of
/// `problems::ot_c`, weights 1/n); random weights are positive, sum to 1 and span exactly
/// 100:1, independently for μ and ν; another seed draws other clouds.
#[test]
fn cloud_flags_default_to_the_canonical_clouds_and_random_weights_span_100_to_1() {
    let (n, d) = (300, 3);
    let r = bench_dumped("canonical", n, d, &[]);
    let (_, _, x, y) = logot_cli::problems::ot_c::<f32>(n, d);
    assert!(r.x == x && r.y == y);
    assert!(r.a.iter().chain(&r.b).all(|&w| w == 1.0 / n as f32));
    assert_eq!(
        (&r.j["data"], &r.j["weights"], &r.j["seed"], &r.j["eps"]),
        (
            &serde_json::json!("uniform"),
            &serde_json::json!("uniform"),
            &serde_json::json!(0),
            &serde_json::json!(0.05)
        )
    );
    assert!(r.j["eps_rel"].is_null(), "{}", r.j);

    let r = bench_dumped(
        "random-weights",
        n,
        d,
        &["--weights", "random", "--seed", "7"],
    );
    assert_eq!(r.j["weights"], "random");
    assert!(r.x != x && r.x.iter().all(|&v| (0.0..1.0).contains(&v)));
    for w in [&r.a, &r.b] {
        let (lo, hi) = w.iter().fold((f32::INFINITY, 0.0f32), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
        assert!(((hi / lo) as f64 - 100.0).abs() < 1e-3, "{}", hi / lo);
    }
    assert!(r.a != r.b);
}

/// `--eps-rel R`: ε is R × the mean of |x_i − y_j|² over all pairs of the dumped clouds
/// (an f64 brute force here), in the JSON and meta.json; the solve ran at that ε.
#[test]
fn eps_rel_is_relative_to_the_mean_cost_of_the_drawn_clouds() {
    let (n, d) = (200, 16);
    let r = bench_dumped(
        "eps-rel",
        n,
        d,
        &[
            "--data",
            "clustered",
            "--weights",
            "random",
            "--eps-rel",
            "0.05",
        ],
    );
    let mut total = 0.0;
    for xi in r.x.rows() {
        for yj in r.y.rows() {
            total += xi
                .iter()
                .zip(yj)
                .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
                .sum::<f64>();
        }
    }
    let mean = total / (n * n) as f64;
    let eps = r.j["eps"].as_f64().unwrap();
    assert!(
        (eps - 0.05 * mean).abs() <= 1e-10 * eps,
        "{eps} vs {}",
        0.05 * mean
    );
    assert!((r.j["mean_cost"].as_f64().unwrap() - mean).abs() <= 1e-10 * mean);
    assert_eq!(r.j["eps_rel"], 0.05);
}

/// gaussian: coordinates N(0, 1/d) (means 0, E|x|² = 1, kurtosis 3); heavy: Student-t with 2
/// degrees of freedom, whose |x|² follows F(d, 2), P(F ≤ t) = (dt/(dt + 2))^(d/2) (checked
/// at the deciles 0.1, 0.5, 0.9 and 0.99 on both clouds).
#[test]
fn gaussian_and_heavy_tailed_clouds_follow_their_laws() {
    let (n, d) = (2000, 8);
    let r = bench_dumped("gaussian", n, d, &["--data", "gaussian"]);
    let pts = r.points();
    let count = pts.len() as f64;
    for k in 0..d {
        let mean = pts.iter().map(|p| p[k]).sum::<f64>() / count;
        assert!(mean.abs() < 0.03, "coordinate {k}: mean {mean}");
    }
    let sq: Vec<f64> = pts.iter().map(|p| p.iter().map(|v| v * v).sum()).collect();
    let msq = sq.iter().sum::<f64>() / count;
    assert!((msq - 1.0).abs() < 0.05, "E|x|² = {msq}");
    let m2 = pts.iter().flatten().map(|v| v * v).sum::<f64>() / (count * d as f64);
    let m4 = pts.iter().flatten().map(|v| v.powi(4)).sum::<f64>() / (count * d as f64);
    assert!(
        (m4 / (m2 * m2) - 3.0).abs() < 0.2,
        "kurtosis {}",
        m4 / (m2 * m2)
    );

    let d = 5;
    let r = bench_dumped("heavy", n, d, &["--data", "heavy"]);
    let sq: Vec<f64> = r
        .points()
        .iter()
        .map(|p| p.iter().map(|v| v * v).sum())
        .collect();
    let dd = d as f64;
    for q in [0.1f64, 0.5, 0.9, 0.99] {
        let z = q.powf(2.0 / dd);
        let t = 2.0 * z / (dd * (1.0 - z));
        let below = sq.iter().filter(|&&s| s <= t).count() as f64 / sq.len() as f64;
        assert!(
            (below - q).abs() < 0.03,
            "P(|x|² ≤ {t}) = {below}, F(d, 2) gives {q}"
        );
    }
}

/// aniso: the eigenvalues of the sample covariance decay as 1/k (variance 1/(k·H_d) along
/// the k-th principal axis, total 1).
#[test]
fn anisotropic_clouds_have_a_one_over_k_spectrum() {
    let (n, d) = (4000, 8);
    let r = bench_dumped("aniso", n, d, &["--data", "aniso"]);
    let e = symmetric_eigenvalues(second_moments(&r.points(), true));
    let harmonic: f64 = (1..=d).map(|k| 1.0 / k as f64).sum();
    for (k, &ek) in e.iter().enumerate() {
        let want = 1.0 / ((k + 1) as f64 * harmonic);
        assert!(
            (ek - want).abs() < 0.1 * want,
            "λ_{k} = {ek}, 1/k spectrum {want}"
        );
    }
}

/// dup: exactly 20 % of each cloud's points repeat an earlier point bit for bit, the rest
/// are distinct points in the unit cube.
#[test]
fn duplicated_clouds_repeat_a_fifth_of_their_points() {
    let (n, d) = (500, 3);
    let r = bench_dumped("dup", n, d, &["--data", "dup"]);
    for c in [&r.x, &r.y] {
        let mut seen = std::collections::HashSet::new();
        let repeats = c
            .rows()
            .into_iter()
            .filter(|row| !seen.insert(row.iter().map(|v| v.to_bits()).collect::<Vec<_>>()))
            .count();
        assert_eq!(repeats, n / 5);
        assert!(c.iter().all(|&v| (0.0..1.0).contains(&v)));
    }
}

/// clustered: each cloud falls into 10 tight groups (single linkage at distance 0.4 finds
/// exactly 10, each far tighter than the cloud) of unequal sizes, and the biggest group of
/// X is a small one in Y (the sizes come in the reverse order, so mass moves between
/// groups). sphere: unit norms, and 10 clusters hold most of the second moment (the top 10
/// eigenvalues of (1/n)·XᵀX carry ≥ 75 % of its trace, where isotropic points on the
/// sphere give 10/d).
#[test]
fn clustered_and_sphere_clouds_fall_into_ten_groups() {
    let (n, d) = (600, 32);
    let r = bench_dumped("clustered", n, d, &["--data", "clustered"]);
    let cloud = |c: &ndarray::Array2<f32>| -> Vec<Vec<f64>> {
        c.rows()
            .into_iter()
            .map(|r| r.iter().map(|&v| v as f64).collect())
            .collect()
    };
    let (px, py) = (cloud(&r.x), cloud(&r.y));
    let (gx, gy) = (linkage(&px, 0.4), linkage(&py, 0.4));
    assert_eq!((gx.len(), gy.len()), (10, 10));
    let sizes = |g: &[(usize, Vec<f64>)]| -> (usize, usize) {
        let s = g.iter().map(|(s, _)| *s);
        (s.clone().max().unwrap(), s.min().unwrap())
    };
    let (big, small) = sizes(&gx);
    assert!(big >= 4 * small, "sizes {big} and {small}");
    let dist2 =
        |a: &[f64], b: &[f64]| -> f64 { a.iter().zip(b).map(|(u, v)| (u - v).powi(2)).sum() };
    let biggest = &gx.iter().max_by_key(|(s, _)| *s).unwrap().1;
    let partner = gy
        .iter()
        .min_by(|a, b| dist2(&a.1, biggest).total_cmp(&dist2(&b.1, biggest)))
        .unwrap();
    assert!(
        4 * partner.0 < big,
        "X's biggest group {big}, its partner in Y {}",
        partner.0
    );
    // Tight: the mean squared distance to the group's centroid is below 1 % of the cloud's.
    let spread = |pts: &[Vec<f64>], c: &[f64]| {
        pts.iter().map(|p| dist2(p, c)).sum::<f64>() / pts.len() as f64
    };
    let mean: Vec<f64> = (0..d)
        .map(|k| px.iter().map(|p| p[k]).sum::<f64>() / n as f64)
        .collect();
    let within = px
        .iter()
        .map(|p| {
            gx.iter()
                .map(|(_, c)| dist2(p, c))
                .fold(f64::INFINITY, f64::min)
        })
        .sum::<f64>()
        / n as f64;
    assert!(
        within < 0.01 * spread(&px, &mean),
        "{within} vs {}",
        spread(&px, &mean)
    );

    let d = 64;
    let r = bench_dumped("sphere", n, d, &["--data", "sphere", "--weights", "random"]);
    let pts = r.points();
    for p in &pts {
        let norm = p.iter().map(|v| v * v).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{norm}");
    }
    let e = symmetric_eigenvalues(second_moments(&pts, false));
    let share = e[..10].iter().sum::<f64>() / e.iter().sum::<f64>();
    assert!(share > 0.75, "top-10 share {share}");
}

/// emdbatch on the CPU: every problem's cost equals the network simplex's on the same
/// clouds (drawn here as the benchmark draws them: problem k from seeds 2k + 1, 2k + 2),
/// certified exact; its flags are refused elsewhere and out of range.
#[test]
fn emdbatch_costs_equal_the_network_simplex() {
    use logot::exact::{emd_points_batch, EmdMethod, EmdParams, Metric};
    use logot_cli::problems::uniform_cloud;
    let (b, n, d) = (3, 40, 16);
    let args = [
        "--problem",
        "emdbatch",
        "--json",
        "--runs",
        "1",
        "--batch",
        "3",
    ];
    let (code, j, err) = bench(&[&args[..], &["--points", "40", "--dim", "16", "--f64"]].concat());
    assert_eq!(code, 0, "{err}");
    check_timing(&j, "emdbatch", 1);
    assert_eq!(j["all_exact"], true, "{j}");
    let mut x = ndarray::Array3::<f64>::zeros((b, n, d));
    let mut y = ndarray::Array3::<f64>::zeros((b, n, d));
    for k in 0..b {
        x.index_axis_mut(ndarray::Axis(0), k)
            .assign(&uniform_cloud::<f64>(n, d, 2 * k as u64 + 1));
        y.index_axis_mut(ndarray::Axis(0), k)
            .assign(&uniform_cloud::<f64>(n, d, 2 * k as u64 + 2));
    }
    let params = EmdParams::default().method(EmdMethod::NetworkSimplex);
    let want =
        emd_points_batch(None, None, x.view(), y.view(), Metric::SqEuclidean, &params).unwrap();
    let got = j["costs"].as_array().unwrap();
    assert_eq!(got.len(), b);
    for (g, w) in got.iter().zip(&want) {
        let g = g.as_f64().unwrap();
        assert!(
            (g - w.cost).abs() <= 1e-12 * w.cost,
            "{g} against {}",
            w.cost
        );
    }
    let (code, _, err) = bench(&["--problem", "otA", "--batch", "2", "--json"]);
    assert_ne!(code, 0);
    assert!(err.contains("--batch"), "{err}");
    let (code, _, err) = bench(&[&args[..5], &["--batch", "0"]].concat());
    assert_ne!(code, 0);
    assert!(err.contains("--batch"), "{err}");
}

/// sliced on the CPU: the distance equals SW_2 worked out here by sorting each direction's
/// projections (n = m, uniform weights: W_2² is the mean squared difference of the sorted
/// values) on the clouds the benchmark draws (seeds 1 and 2, the second in [0.1, 0.9]^d, in
/// float32) along POT's directions for seed 0; its flags are refused elsewhere and out of
/// range.
#[test]
fn sliced_distance_equals_sorting_by_hand() {
    use logot::Real;
    use logot_cli::problems::uniform_cloud;
    let (n, d, l) = (3000, 3, 4);
    let args = ["--problem", "sliced", "--json", "--runs", "1"];
    let sizes = ["--points", "3000", "--dim", "3", "--projections", "4"];
    let (code, j, err) = bench(&[&args[..], &sizes[..]].concat());
    assert_eq!(code, 0, "{err}");
    check_timing(&j, "sliced", 1);
    assert_eq!(j["points"], n, "{j}");
    assert_eq!(j["projections"], l, "{j}");
    let x = uniform_cloud::<f32>(n, d, 1);
    let y = uniform_cloud::<f32>(n, d, 2).mapv(|v| f32::of(0.1 + 0.8 * v.f64()));
    let dirs = logot::exact::sliced::random_directions(d, l, 0);
    let mut mean = 0.0;
    for theta in dirs.rows() {
        let project = |c: &ndarray::Array2<f32>| {
            let mut v: Vec<f64> = c
                .rows()
                .into_iter()
                .map(|r| (0..d).fold(0.0, |s, t| s + r[t] as f64 * theta[t]))
                .collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let (u, v) = (project(&x), project(&y));
        mean += u
            .iter()
            .zip(&v)
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            / n as f64;
    }
    let want = (mean / l as f64).sqrt();
    let got = j["distance"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-12 * want, "{got} against {want}");
    let (code, _, err) = bench(&["--problem", "otA", "--projections", "8", "--json"]);
    assert_ne!(code, 0);
    assert!(err.contains("--projections"), "{err}");
    let (code, _, err) = bench(&[&args[..], &["--projections", "0"]].concat());
    assert_ne!(code, 0);
    assert!(err.contains("--projections"), "{err}");
    let (code, _, err) = bench(&[&args[..], &["--batch", "2"]].concat());
    assert_ne!(code, 0);
    assert!(err.contains("--batch"), "{err}");
    if !cfg!(feature = "cuda") {
        let (code, _, err) = bench(&[&args[..], &["--backend", "cuda"]].concat());
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("cuda"), "{err}");
    }
}

/// `--gemm-precision` reaches the gw solve and the JSON names it; the CPU computes exact
/// products whatever is asked, so the value is the exact run's to the last bit.
#[test]
fn gw_names_its_gemm_precision_and_the_cpu_ignores_it() {
    let run = |p: &str| {
        let (code, j, err) = bench(&[
            "--problem",
            "gw",
            "--points",
            "24",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--json",
            "--gemm-precision",
            p,
        ]);
        assert_eq!(code, 0, "{err}");
        check_timing(&j, "gw", 1);
        assert_eq!(j["gemm_precision"], p, "{j}");
        j["value"].as_f64().unwrap()
    };
    let exact = run("exact");
    assert!(exact.is_finite() && exact > 0.0);
    assert_eq!(run("tf32"), exact);
}
