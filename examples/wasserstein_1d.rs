//! Entropic optimal transport between two 1-D densities, with the coupling plotted.
//!
//! ```sh
//! cargo run --release --example wasserstein_1d      # writes out/wasserstein_1d/*.png
//! ```
//!
//! μ is a two-bump mixture and ν a single wider bump on 200 points of [0, 1]; the cost is
//! the squared distance on that 1-D grid ([`logot::GridCost`]: never stored, each half-step
//! is one log-convolution). The plan concentrates near the monotone (quantile) map.

use logot::{CpuBackend, Error, GridCost, Problem, Result, SinkhornParams, SinkhornSolver};
use ndarray::{Array1, Axis};
use std::path::PathBuf;
use std::process::ExitCode;

fn density(x: &[f64], bumps: &[(f64, f64, f64)]) -> Array1<f64> {
    let h: Array1<f64> = x
        .iter()
        .map(|&t| {
            bumps
                .iter()
                .map(|&(w, m, s)| w * (-0.5 * ((t - m) / s).powi(2)).exp())
                .sum::<f64>()
        })
        .collect();
    &h / h.sum()
}

fn run() -> Result<Vec<PathBuf>> {
    let n = 200;
    let x: Vec<f64> = (0..n).map(|i| GridCost::coordinate(n, i)).collect();
    let mu = density(&x, &[(0.6, 0.2, 0.05), (0.4, 0.55, 0.04)]);
    let nu = density(&x, &[(1.0, 0.7, 0.09)]);
    let eps = 1e-3;
    let problem = Problem::new(
        mu.view().insert_axis(Axis(0)),
        nu.view().insert_axis(Axis(0)),
        GridCost::new(&[n])?,
    )?;
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps));
    let coupling = solver.coupling(&problem)?;
    let r = &coupling.result;
    println!(
        "<P, C> = {:.6} at eps = {eps}: {} iterations, marginal error {:.1e}, converged {}",
        r.distance[0],
        r.convergence.iterations,
        r.convergence.marginal_error,
        r.convergence.converged
    );
    let out = PathBuf::from("out/wasserstein_1d");
    let plan = coupling.plan.index_axis(Axis(0), 0);
    let p1 = out.join("coupling.png");
    logot::plot::coupling(
        &p1,
        plan,
        mu.view(),
        nu.view(),
        (&x, &x),
        &format!(
            "Entropic coupling, ε = {eps}, ⟨P, C⟩ = {:.4}",
            r.distance[0]
        ),
    )?;
    let p2 = out.join("densities.png");
    let (row, col) = (plan.sum_axis(Axis(1)), plan.sum_axis(Axis(0)));
    logot::plot::lines(
        &p2,
        &x,
        &[("μ", mu.view()), ("ν", nu.view())],
        &[
            ("P·1 (rows of the plan)", row.view()),
            ("Pᵀ·1 (columns)", col.view()),
        ],
        "Densities μ, ν and the plan's marginals",
        ("x", "mass per bin"),
    )?;
    if !r.convergence.converged {
        return Err(Error::Numerical("the solver did not converge".into()));
    }
    Ok(vec![p1, p2])
}

fn main() -> ExitCode {
    match run() {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("wasserstein_1d: error: {e}");
            ExitCode::from(2)
        }
    }
}
