//! Scratch: reported vs recomputed errors of f32 point clouds at high d.
mod common;

use common::Lcg;
use logot::{CpuBackend, PointCloudCost, Problem, SinkhornParams, Solver};
use ndarray::{Array1, Array2, Axis};

fn real_errors(x: &Array2<f64>, y: &Array2<f64>, f: &[f64], g: &[f64], mu: &[f64], nu: &[f64], eps: f64) -> (f64, f64) {
    let (n, m) = (x.nrows(), y.nrows());
    let mut cols = vec![0.0f64; m];
    let mut rows_err = 0.0;
    for i in 0..n {
        let mut r = 0.0;
        for j in 0..m {
            let c: f64 = x.row(i).iter().zip(y.row(j)).map(|(a, b)| (a - b) * (a - b)).sum();
            let p = ((f[i] + g[j] - c) / eps).exp();
            r += p;
            cols[j] += p;
        }
        rows_err += (r - mu[i]).abs();
    }
    let col_err = cols.iter().zip(nu).map(|(c, b)| (c - b).abs()).sum();
    (rows_err, col_err)
}

#[test]
fn scratch_f32_high_d() {
    for &d in &[3usize, 64, 700, 1024] {
        for &(n, m) in &[(300usize, 257usize)] {
            for &epsf in &[0.1f64, 0.01] {
                for &tol in &[1e-6f64, 1e-7] {
                    let mut r = Lcg(d as u64 + 5);
                    let x = Array2::from_shape_simple_fn((n, d), || r.next() as f32);
                    let y = Array2::from_shape_simple_fn((m, d), || r.next() as f32);
                    let mu = Array1::from_shape_simple_fn(n, || r.uniform(0.5, 1.5) as f32);
                    let nu = Array1::from_shape_simple_fn(m, || r.uniform(0.5, 1.5) as f32);
                    let (sa, sb) = (mu.sum(), nu.sum());
                    let mu = mu.mapv(|v| v / sa);
                    let nu = nu.mapv(|v| v / sb);
                    let eps = epsf * d as f64 / 6.0;
                    let cloud = PointCloudCost::new(x.view(), y.view()).unwrap();
                    let p = Problem::batch(mu.view().insert_axis(Axis(0)), nu.view().insert_axis(Axis(0)), cloud).unwrap();
                    let params = SinkhornParams { tol: Some(tol), max_iters: 5000, ..SinkhornParams::new(eps) };
                    let res = Solver::new(CpuBackend, params).solve(&p);
                    let res = match res { Ok(r) => r, Err(e) => { println!("d={d} eps={eps}: {e}"); continue; } };
                    let (xf, yf) = (x.mapv(|v| v as f64), y.mapv(|v| v as f64));
                    let f: Vec<f64> = res.f.iter().map(|&v| v as f64).collect();
                    let g: Vec<f64> = res.g.iter().map(|&v| v as f64).collect();
                    let muf: Vec<f64> = mu.iter().map(|&v| v as f64).collect();
                    let nuf: Vec<f64> = nu.iter().map(|&v| v as f64).collect();
                    let (re, ce) = real_errors(&xf, &yf, &f, &g, &muf, &nuf, eps);
                    // The clouds centred on their union mean and rounded to f32, as the CPU keeps them.
                    let mean: Vec<f64> = (0..d).map(|k| (xf.column(k).sum() + yf.column(k).sum()) / (n + m) as f64).collect();
                    let xc = Array2::from_shape_fn((n, d), |(i, k)| ((xf[[i, k]] - mean[k]) as f32) as f64);
                    let yc = Array2::from_shape_fn((m, d), |(j, k)| ((yf[[j, k]] - mean[k]) as f32) as f64);
                    let (rc, cc) = real_errors(&xc, &yc, &f, &g, &muf, &nuf, eps);
                    println!("   centred-rounded: rows {rc:.3e} cols {cc:.3e}");
                    let c = &res.convergence;
                    println!(
                        "d={d} n={n} eps={eps:.4} tol={tol:e}: reported {:.3e} conv={} it={} mass={:.6}; real rows {re:.3e} cols {ce:.3e} ratio {:.2}",
                        c.marginal_error, c.converged, c.iterations, c.problems[0].mass, re.max(ce) / c.marginal_error
                    );
                }
            }
        }
    }
}
