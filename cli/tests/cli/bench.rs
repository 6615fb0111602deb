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
/// names them).
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
