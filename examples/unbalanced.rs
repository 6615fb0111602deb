//! What the KL relaxation of unbalanced OT does, on two 1-D histograms of unequal mass.
//!
//! ```sh
//! cargo run --release --example unbalanced      # writes out/unbalanced/*.png
//! cargo run --release --example unbalanced -- --out some/dir
//! ```
//!
//! μ is one bump of mass 1 at x = 0.3; ν is the same bump moved to x = 0.45 (mass 1) plus an
//! outlier of mass 0.4 at x = 0.92, on 150 points of [0, 1] with the cost (x − y)². The
//! balanced problem has no solution (the masses differ); the unbalanced one
//! (`min ⟨P,C⟩ + ε·KL(P‖μ⊗ν) + ρ_μ·KL(P·1‖μ) + ρ_ν·KL(Pᵀ·1‖ν)`, POT's
//! `sinkhorn_unbalanced(..., reg_type="kl")`) trades transport against mass created or
//! destroyed: a small ρ leaves whatever is expensive to move (the outlier first) and shrinks
//! the plan, a large ρ approaches the marginals. Semi-unbalanced (ρ_μ = ∞) transports all of
//! μ exactly and relaxes ν only.
//!
//! The figures: the plan with its marginals for ρ = 0.01, 0.1, 1 and 10 (both sides relaxed)
//! and for ρ_μ = ∞, ρ_ν = 0.1; ν against the plans' column marginals Pᵀ·1; and the
//! transported mass Σ P and the mass sent to the outlier as ρ varies.

use logot::plot::{Axes, Marginal, Scale};
use logot::{CpuBackend, Error, Problem, Relaxation, Result, SinkhornParams, SinkhornSolver};
use ndarray::{s, Array1, Array2, Axis};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const N: usize = 150;
const EPS: f64 = 2e-3;
/// The error target relative to the mass: ample for figures, and reached in a few thousand
/// iterations also where ρ is large (nearly balanced, unequal masses: slow to converge).
const TOL: f64 = 1e-6;
/// The bins of the outlier: x ≥ 0.8.
const OUTLIER_FROM: f64 = 0.8;

/// A Gaussian bump of total mass `mass` centred at `c` with width `w`, on `x`.
fn bump(x: &[f64], c: f64, w: f64, mass: f64) -> Array1<f64> {
    let h: Array1<f64> = x
        .iter()
        .map(|t| (-0.5 * ((t - c) / w).powi(2)).exp())
        .collect();
    &h * (mass / h.sum())
}

/// One unbalanced solve: the plan, ⟨P, C⟩ and the objective, with its convergence checked.
struct Solved {
    plan: Array2<f64>,
    distance: f64,
    objective: f64,
}

fn solve(problem: &Problem<'_, f64>, relaxation: Relaxation) -> Result<Solved> {
    let params = SinkhornParams::new(EPS).max_iters(50_000).tol(TOL);
    let c =
        SinkhornSolver::new(CpuBackend, params).coupling(&problem.clone().relaxed(relaxation))?;
    let r = &c.result;
    if !r.convergence.converged {
        return Err(Error::Numerical(format!(
            "{relaxation:?}: not converged after {} iterations (error {:.1e})",
            r.convergence.iterations, r.convergence.marginal_error
        )));
    }
    let objective = r.objective.as_ref().map_or(f64::NAN, |o| o[0]);
    Ok(Solved {
        plan: c.plan.index_axis(Axis(0), 0).to_owned(),
        distance: r.distance[0],
        objective,
    })
}

/// `ρ` as a label: `∞` for an exact side.
fn rho_label(rho: f64) -> String {
    if rho == f64::INFINITY {
        "∞".into()
    } else {
        format!("{rho}")
    }
}

fn run(out: &Path) -> Result<Vec<PathBuf>> {
    let x: Vec<f64> = (0..N).map(|i| i as f64 / (N - 1) as f64).collect();
    let mu = bump(&x, 0.3, 0.06, 1.0);
    let nu = &bump(&x, 0.45, 0.06, 1.0) + &bump(&x, 0.92, 0.02, 0.4);
    let cost = Array2::from_shape_fn((N, N), |(i, j)| (x[i] - x[j]).powi(2));
    let problem = Problem::new(mu.view(), nu.view(), cost.view())?;
    let outlier = x.iter().position(|&t| t >= OUTLIER_FROM).unwrap_or(N);
    let mut files = Vec::new();

    // The plans for a few ρ, both sides relaxed, and one semi-unbalanced plan.
    let shown: Vec<(f64, f64)> = vec![
        (0.01, 0.01),
        (0.1, 0.1),
        (1.0, 1.0),
        (10.0, 10.0),
        (f64::INFINITY, 0.1),
    ];
    println!(
        "masses: Σμ = {:.3}, Σν = {:.3} (outlier 0.4)",
        mu.sum(),
        nu.sum()
    );
    println!(
        "{:>6} {:>6} {:>10} {:>12} {:>10} {:>10}",
        "ρ_μ", "ρ_ν", "Σ P", "to outlier", "⟨P, C⟩", "objective"
    );
    let mut columns = Vec::new();
    for &(rho_mu, rho_nu) in &shown {
        let r = solve(&problem, Relaxation::kl_each(rho_mu, rho_nu))?;
        let to_outlier = r.plan.slice(s![.., outlier..]).sum();
        println!(
            "{:>6} {:>6} {:>10.4} {:>12.4} {:>10.5} {:>10.5}",
            rho_label(rho_mu),
            rho_label(rho_nu),
            r.plan.sum(),
            to_outlier,
            r.distance,
            r.objective
        );
        let name = if rho_mu == rho_nu {
            format!("plan_rho_{rho_mu}.png")
        } else {
            format!("plan_rho_mu_inf_nu_{rho_nu}.png")
        };
        let path = out.join(name);
        let (rows, cols) = (r.plan.sum_axis(Axis(1)), r.plan.sum_axis(Axis(0)));
        // The sides show the plan's own sums, which a relaxed plan does not match to μ, ν.
        logot::plot::coupling_with_marginals(
            &path,
            r.plan.view(),
            Marginal::new(rows.view(), "P·1", "row sums"),
            Marginal::new(cols.view(), "Pᵀ·1", "column sums"),
            (&x, &x),
            &format!(
                "ρ_μ = {}, ρ_ν = {}: Σ P = {:.3}, to the outlier {:.3}",
                rho_label(rho_mu),
                rho_label(rho_nu),
                r.plan.sum(),
                to_outlier
            ),
        )?;
        files.push(path);
        columns.push((
            format!("Pᵀ·1, ρ = ({}, {})", rho_label(rho_mu), rho_label(rho_nu)),
            cols,
        ));
    }

    // ν against what the plans deliver.
    let path = out.join("target_marginals.png");
    let dashed: Vec<(&str, ndarray::ArrayView1<'_, f64>)> = columns
        .iter()
        .map(|(n, c)| (n.as_str(), c.view()))
        .collect();
    logot::plot::lines(
        &path,
        &x,
        &[("μ", mu.view()), ("ν (outlier at 0.92)", nu.view())],
        &dashed,
        "What each relaxation delivers to ν",
        ("x", "mass per bin"),
    )?;
    files.push(path);

    // Transported mass against ρ: both sides relaxed, and ρ_μ = ∞ (all of μ is moved).
    let rhos: Vec<f64> = (0..=12)
        .map(|k| 10f64.powf(-2.5 + 0.25 * k as f64))
        .collect();
    let (mut both, mut semi, mut both_out, mut semi_out) = (vec![], vec![], vec![], vec![]);
    for &rho in &rhos {
        let r = solve(&problem, Relaxation::kl(rho))?;
        both.push(r.plan.sum());
        both_out.push(r.plan.slice(s![.., outlier..]).sum());
        let r = solve(&problem, Relaxation::kl_each(f64::INFINITY, rho))?;
        semi.push(r.plan.sum());
        semi_out.push(r.plan.slice(s![.., outlier..]).sum());
    }
    let path = out.join("mass_vs_rho.png");
    let series = [both, semi, both_out, semi_out].map(Array1::from);
    logot::plot::lines(
        &path,
        &rhos,
        &[
            ("Σ P, ρ_μ = ρ_ν = ρ", series[0].view()),
            ("Σ P, ρ_μ = ∞, ρ_ν = ρ", series[1].view()),
        ],
        &[
            ("to the outlier, ρ_μ = ρ_ν = ρ", series[2].view()),
            ("to the outlier, ρ_μ = ∞, ρ_ν = ρ", series[3].view()),
        ],
        &format!("Transported mass against ρ (Σμ = 1, Σν = 1.4, ε = {EPS})"),
        Axes::new("ρ", "mass").x_scale(Scale::Log),
    )?;
    files.push(path);
    Ok(files)
}

fn main() -> ExitCode {
    let mut out = PathBuf::from("out/unbalanced");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match (a.as_str(), args.next()) {
            ("--out", Some(v)) => out = PathBuf::from(v),
            _ => {
                eprintln!("usage: unbalanced [--out DIR]");
                return ExitCode::from(2);
            }
        }
    }
    match run(&out) {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("unbalanced: error: {e}");
            ExitCode::from(2)
        }
    }
}
