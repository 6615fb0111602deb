//! Exact OT on `.npy` inputs, timed: the logot side of `scripts/bench-exact-vs-pot.py`.
//!
//! ```text
//! exact_npy emd        MU.npy NU.npy COST.npy          [--repeat K] [--method auto|simplex|assignment] [--candidates K]
//! exact_npy emd-points MU.npy NU.npy X.npy Y.npy       [--repeat K] [--method …]
//! exact_npy emd-batch  MU.npy NU.npy X.npy Y.npy       [--repeat K] [--method …]   (B×n, B×m, B×n×d, B×m×d)
//! ```
//! Prints one JSON object: the costs, the median and every time in milliseconds (each
//! repeat solves from scratch), iterations and the certificate of the first problem.

use logot::exact::{emd, emd_points, emd_points_batch, EmdMethod, EmdParams, EmdResult, Metric};
use ndarray::{Array1, Array2, Array3};
use ndarray_npy::read_npy;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .map(|k| args[k + 1].clone())
    };
    let repeat: usize = flag("--repeat").map_or(1, |s| s.parse().expect("--repeat"));
    let method = match flag("--method").as_deref() {
        None | Some("auto") => EmdMethod::Auto,
        Some("simplex") => EmdMethod::NetworkSimplex,
        Some("assignment") => EmdMethod::Assignment,
        Some(other) => panic!("unknown method {other}"),
    };
    let mut params = EmdParams::default().method(method);
    if let Some(k) = flag("--candidates") {
        params = params.candidates_per_row(k.parse().expect("--candidates"));
    }
    let mut times = Vec::new();
    let mut results: Vec<EmdResult> = Vec::new();
    for _ in 0..repeat {
        let t = Instant::now();
        results = match args[0].as_str() {
            "emd" => {
                let mu: Array1<f64> = read_npy(&args[1]).expect("mu");
                let nu: Array1<f64> = read_npy(&args[2]).expect("nu");
                let c: Array2<f64> = read_npy(&args[3]).expect("cost");
                let t = Instant::now();
                let r = vec![emd(mu.view(), nu.view(), c.view(), &params).expect("emd")];
                times.push(t.elapsed().as_secs_f64() * 1e3);
                r
            }
            "emd-points" => {
                let mu: Array1<f64> = read_npy(&args[1]).expect("mu");
                let nu: Array1<f64> = read_npy(&args[2]).expect("nu");
                let x: Array2<f64> = read_npy(&args[3]).expect("x");
                let y: Array2<f64> = read_npy(&args[4]).expect("y");
                let t = Instant::now();
                let r = vec![emd_points(
                    Some(mu.view()),
                    Some(nu.view()),
                    x.view(),
                    y.view(),
                    Metric::SqEuclidean,
                    &params,
                )
                .expect("emd_points")];
                times.push(t.elapsed().as_secs_f64() * 1e3);
                r
            }
            "emd-batch" => {
                let mu: Array2<f64> = read_npy(&args[1]).expect("mu");
                let nu: Array2<f64> = read_npy(&args[2]).expect("nu");
                let x: Array3<f64> = read_npy(&args[3]).expect("x");
                let y: Array3<f64> = read_npy(&args[4]).expect("y");
                let t = Instant::now();
                let r = emd_points_batch(
                    Some(mu.view()),
                    Some(nu.view()),
                    x.view(),
                    y.view(),
                    Metric::SqEuclidean,
                    &params,
                )
                .expect("emd_points_batch");
                times.push(t.elapsed().as_secs_f64() * 1e3);
                r
            }
            other => panic!("unknown command {other}"),
        };
        let _ = t;
    }
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let r0 = &results[0];
    let c = &r0.certificate;
    let costs: Vec<String> = results.iter().map(|r| format!("{:.17e}", r.cost)).collect();
    println!(
        "{{\"costs\": [{}], \"ms\": {}, \"times_ms\": {:?}, \"iterations\": {}, \"converged\": {}, \"exact\": {}, \
         \"all_exact\": {}, \"method\": \"{:?}\", \"duality_gap\": {:e}, \"max_violation\": {:e}, \
         \"marginal_error_a\": {:e}, \"marginal_error_b\": {:e}, \"nnz\": {}}}",
        costs.join(", "),
        sorted[sorted.len() / 2],
        times,
        r0.iterations,
        r0.converged,
        r0.exact,
        results.iter().all(|r| r.exact),
        r0.method,
        c.duality_gap,
        c.max_violation,
        c.marginal_error_a,
        c.marginal_error_b,
        r0.plan.len()
    );
}
