//! The f32 stability sweep shared by tests/sinkhorn/stability.rs (CPU) and
//! tests/cuda_reliability.rs (CUDA): ε from 1 down to 1e-4 (relative to the largest cost)
//! on four families of problems, solved in f32 on a backend and in f64 on the CPU with the
//! same fixed number of iterations (the same map, so the difference is rounding only).

use logot::{Backend, CpuBackend, Problem, SinkhornParams, SinkhornSolver};
use ndarray::{Array1, Array2};

/// ε values of the sweep, relative to the largest cost.
pub const EPS: [f64; 9] = [1.0, 0.3, 0.1, 0.03, 0.01, 3e-3, 1e-3, 3e-4, 1e-4];
/// Fixed iterations per solve.
pub const ITERS: usize = 300;

/// One problem family of the sweep.
pub struct Family {
    pub name: &'static str,
    pub mu: Array1<f64>,
    pub nu: Array1<f64>,
    pub cost: Array2<f64>,
}

fn normalise(v: Array1<f64>) -> Array1<f64> {
    let s = v.sum();
    v / s
}

fn bump(n: usize, centre: f64, width: f64) -> Array1<f64> {
    Array1::from_shape_fn(n, |i| {
        let x = i as f64 / (n - 1) as f64;
        (-((x - centre) / width).powi(2) / 2.0).exp() + 1e-3
    })
}

/// The four families: squared distances on [0,1] (costs in [0,1]); marginals with zero
/// and tiny (1e-30, 1e-12) entries; costs of large dynamic range (10⁻⁹ to 1, log-uniform);
/// the same costs times 10³ (ε scales with them).
pub fn families() -> Vec<Family> {
    let (n, m) = (64, 48);
    let grid = |k: usize, len: usize| k as f64 / (len - 1) as f64;
    let sq = Array2::from_shape_fn((n, m), |(i, j)| (grid(i, n) - grid(j, m)).powi(2));
    let mu = normalise(bump(n, 0.3, 0.1));
    let nu = normalise(bump(m, 0.6, 0.2));
    let mut mu_z = bump(n, 0.5, 0.15);
    let mut nu_z = bump(m, 0.4, 0.1);
    for i in (0..n).step_by(5) {
        mu_z[i] = 0.0;
    }
    for j in (0..m).step_by(7) {
        nu_z[j] = 0.0;
    }
    mu_z[1] = 1e-30;
    mu_z[n - 2] = 1e-12;
    nu_z[2] = 1e-30;
    nu_z[m - 2] = 1e-12;
    // Deterministic log-uniform costs in [1e-9, 1] (an LCG, seeded).
    let mut next = super::uniforms(0x2545_f491_4f6c_dd1d);
    let wide = Array2::from_shape_fn((n, m), |_| 10f64.powf(-9.0 * next()));
    vec![
        Family {
            name: "sq[0,1]",
            mu: mu.clone(),
            nu: nu.clone(),
            cost: sq.clone(),
        },
        Family {
            name: "zero+tiny bins",
            mu: normalise(mu_z),
            nu: normalise(nu_z),
            cost: sq,
        },
        Family {
            name: "range 1e-9..1",
            mu: mu.clone(),
            nu: nu.clone(),
            cost: wide.clone(),
        },
        Family {
            name: "range 1e-6..1e3",
            mu,
            nu,
            cost: wide * 1e3,
        },
    ]
}

/// One solve of the sweep: f32 on the backend against f64 on the CPU.
#[derive(Debug)]
pub struct Row {
    pub family: &'static str,
    /// ε relative to the largest cost.
    pub eps_rel: f64,
    pub d32: f64,
    pub d64: f64,
    /// |d32 − d64| / max cost.
    pub err: f64,
    /// Largest |f32 − f64| over the finite potentials, over ε.
    pub pot_err: f64,
    /// Every f32 output finite (potentials: finite, or −∞ exactly where f64 has −∞).
    pub finite: bool,
}

/// Run the sweep with f32 on `backend`.
pub fn sweep<B: Backend<f32> + Clone>(backend: &B) -> Vec<Row> {
    sweep_eps(backend, &EPS)
}

/// The sweep over the given relative ε only.
pub fn sweep_eps<B: Backend<f32> + Clone>(backend: &B, eps: &[f64]) -> Vec<Row> {
    let mut rows = Vec::new();
    for fam in families() {
        let cmax = fam.cost.iter().cloned().fold(0.0, f64::max);
        let (mu32, nu32, c32) = (
            fam.mu.mapv(|v| v as f32),
            fam.nu.mapv(|v| v as f32),
            fam.cost.mapv(|v| v as f32),
        );
        for &rel in eps {
            let params = SinkhornParams::new(rel * cmax).fixed_iterations(ITERS);
            let r64 = SinkhornSolver::new(CpuBackend, params.clone())
                .solve(&Problem::new(fam.mu.view(), fam.nu.view(), fam.cost.view()).unwrap())
                .unwrap_or_else(|e| panic!("{} ε={rel}: f64 failed: {e}", fam.name));
            let r32 = SinkhornSolver::new(backend.clone(), params)
                .solve(&Problem::new(mu32.view(), nu32.view(), c32.view()).unwrap())
                .unwrap_or_else(|e| panic!("{} ε={rel}: f32 failed: {e}", fam.name));
            let mut finite = r32.distance.iter().all(|d| d.is_finite());
            let mut pot_err = 0.0f64;
            for (a, b) in r32
                .f
                .iter()
                .chain(r32.g.iter())
                .zip(r64.f.iter().chain(r64.g.iter()))
            {
                let a = *a as f64;
                if *b == f64::NEG_INFINITY || a == f64::NEG_INFINITY {
                    finite &= a == *b;
                } else if a.is_finite() {
                    pot_err = pot_err.max((a - b).abs());
                } else {
                    finite = false;
                }
            }
            let (d32, d64) = (r32.distance[0] as f64, r64.distance[0]);
            rows.push(Row {
                family: fam.name,
                eps_rel: rel,
                d32,
                d64,
                err: (d32 - d64).abs() / cmax,
                pot_err: pot_err / (rel * cmax),
                finite,
            });
        }
    }
    rows
}

/// Print the sweep as a table (shown with `--nocapture`, and in the closing notes).
pub fn print(label: &str, rows: &[Row]) {
    println!("f32 stability sweep on {label} ({ITERS} iterations, errors relative to max cost)");
    println!(
        "{:<18} {:>8} {:>14} {:>14} {:>10} {:>12}",
        "family", "eps/max", "f32", "f64", "|Δd|/max", "|Δpot|/eps"
    );
    for r in rows {
        println!(
            "{:<18} {:>8.0e} {:>14.8e} {:>14.8e} {:>10.2e} {:>12.2e}{}",
            r.family,
            r.eps_rel,
            r.d32,
            r.d64,
            r.err,
            r.pot_err,
            if r.finite { "" } else { "  NON-FINITE" }
        );
    }
}
