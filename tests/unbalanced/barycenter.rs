//! Unbalanced barycenters (`BarycenterProblem::relaxed`) against POT 0.9.7's
//! `ot.unbalanced.barycenter_unbalanced`, an independent plain-domain reference for the
//! two-sided relaxation POT does not offer, the balanced limit, and bad input.
//!
//! Fixed values: tests/data/pot_unbalanced_barycenter.rs, printed by
//! `python3 tests/data/make_pot_unbalanced_barycenter.py` (inputs of unequal masses, the
//! weights, ε, and POT's barycenter for every ρ, each cross-checked there against an
//! independent float64 log-domain iteration).

use logot::backend::log_power_mean;
use logot::{
    BarycenterParams, BarycenterProblem, BarycenterSolver, CpuBackend, Error, GridCost, Real,
    Relaxation,
};
use ndarray::{Array1, Array2, Array3, ArrayView2, Axis};

use crate::common;
use common::bary::barycenter;
use common::pot_bary::{pot, Case, CASES};

fn params(eps: f64, tol: f64, max_iters: usize) -> BarycenterParams {
    BarycenterParams::new(eps).tol(tol).max_iters(max_iters)
}

/// `max_x |got − want| / max_x want`.
fn rel_err<T: Real>(got: &[T], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let top = want.iter().fold(0.0f64, |a, &b| a.max(b.abs()));
    got.iter()
        .zip(want)
        .map(|(g, w)| (g.f64() - w).abs())
        .fold(0.0, f64::max)
        / top
}

fn solve<T: Real>(
    case: &Case,
    rho: f64,
    tol: f64,
    max_iters: usize,
    dense: bool,
) -> logot::BarycenterResult<T> {
    let h = case.inputs::<T>();
    let w = case.weights::<T>();
    let (p, r) = (params(case.eps, tol, max_iters), Some(Relaxation::kl(rho)));
    if case.grid && !dense {
        barycenter(
            h.view(),
            w.view(),
            GridCost::new(case.shape).unwrap(),
            &p,
            r,
        )
        .unwrap()
    } else {
        let c = case.dense_cost::<T>();
        barycenter(h.view(), w.view(), c.view(), &p, r).unwrap()
    }
}

#[test]
fn pot_data_is_consistent() {
    for (name, c) in CASES {
        let k = c.weights.len();
        assert_eq!(c.inputs.len(), k * c.n(), "{name}");
        assert_eq!(c.barycenters.len(), c.rhos.len(), "{name}");
        assert!(c.barycenters.iter().all(|b| b.len() == c.n()), "{name}");
        // unequal masses throughout
        let h = c.inputs::<f64>();
        let masses: Vec<f64> = h.sum_axis(Axis(1)).to_vec();
        assert!(
            masses.windows(2).all(|m| (m[1] - m[0]).abs() > 0.1),
            "{name}: {masses:?}"
        );
    }
}

#[test]
fn f64_matches_pot_barycenter_unbalanced() {
    for (name, case) in CASES {
        for (&rho, want) in case.rhos.iter().zip(case.barycenters) {
            let bar = solve::<f64>(&case, rho, 1e-12, 200_000, false);
            let err = rel_err(bar.histogram.as_slice().unwrap(), want);
            assert!(
                bar.converged && bar.error < 1e-12,
                "{name} rho = {rho}: error {:e} after {} iterations",
                bar.error,
                bar.iterations
            );
            assert!(
                err < 1e-7,
                "{name} rho = {rho}: relative error vs POT {err:e}"
            );
        }
    }
}

#[test]
fn grid_equals_its_explicit_dense_cost() {
    for (name, case) in CASES.iter().filter(|(_, c)| c.grid) {
        let rho = case.rhos[0];
        let on_grid = solve::<f64>(case, rho, 0.0, 300, false);
        let dense = solve::<f64>(case, rho, 0.0, 300, true);
        let err = rel_err(
            on_grid.histogram.as_slice().unwrap(),
            dense.histogram.as_slice().unwrap(),
        );
        assert!(err < 1e-11, "{name}: grid vs dense {err:e}");
        // the reported errors agree to the rounding of the residual (a difference of two
        // nearly equal numbers once converged)
        let gap = (on_grid.error - dense.error).abs();
        assert!(
            gap <= 1e-6 * dense.error + 1e-13,
            "{name}: errors {:e} vs {:e}",
            on_grid.error,
            dense.error
        );
    }
}

#[test]
fn f32_matches_pot_barycenter_unbalanced() {
    for (name, case) in CASES {
        for (&rho, want) in case.rhos.iter().zip(case.barycenters) {
            let bar = solve::<f32>(&case, rho, 1e-6, 100_000, false);
            let err = rel_err(bar.histogram.as_slice().unwrap(), want);
            assert!(
                bar.error < 1e-4,
                "{name} rho = {rho}: f32 error {:e} after {} iterations",
                bar.error,
                bar.iterations
            );
            assert!(
                err < 1e-4,
                "{name} rho = {rho}: f32 relative error vs POT {err:e}"
            );
        }
    }
}

/// The two-sided iteration in the plain (non-log) domain, f64, for moderate ε: with
/// `φ_a = ρ_a/(ρ_a + ε)`, `φ_b = ρ_b/(ρ_b + ε)` (1 for ∞),
/// `u_k = (a_k / K v_k)^{φ_a}`, `q = (Σ_k w_k (Kᵀu_k)^{1−φ_b})^{1/(1−φ_b)}` (the weighted
/// geometric mean for `φ_b = 1`), `v_k = (q / Kᵀu_k)^{φ_b}`, from `v = 1`.
fn plain_reference(
    a: ArrayView2<f64>,
    w: &[f64],
    cost: ArrayView2<f64>,
    eps: f64,
    rho: (f64, f64),
    iters: usize,
) -> Vec<f64> {
    let phi = |r: f64| if r.is_infinite() { 1.0 } else { r / (r + eps) };
    let (fa, fb) = (phi(rho.0), phi(rho.1));
    let kernel = cost.mapv(|c| (-c / eps).exp());
    let (k, n) = a.dim();
    let mut v = Array2::<f64>::ones((k, n));
    let mut q = vec![0.0; n];
    for _ in 0..iters {
        let mut ktu = Array2::<f64>::zeros((k, n));
        for j in 0..k {
            let kv = kernel.dot(&v.row(j));
            let u: Array1<f64> = (0..n).map(|i| (a[[j, i]] / kv[i]).powf(fa)).collect();
            ktu.row_mut(j).assign(&kernel.t().dot(&u));
        }
        for x in 0..n {
            q[x] = if fb == 1.0 {
                (0..k).map(|j| w[j] * ktu[[j, x]].ln()).sum::<f64>().exp()
            } else {
                (0..k)
                    .map(|j| w[j] * ktu[[j, x]].powf(1.0 - fb))
                    .sum::<f64>()
                    .powf(1.0 / (1.0 - fb))
            };
            for j in 0..k {
                v[[j, x]] = (q[x] / ktu[[j, x]]).powf(fb);
            }
        }
    }
    q
}

#[test]
fn two_sided_and_semi_relaxations_match_a_plain_domain_reference() {
    let case = pot::DENSE3;
    let (eps, h) = (0.1, case.inputs::<f64>());
    let cost = case.dense_cost::<f64>();
    for rho in [
        (0.3, 2.0),
        (f64::INFINITY, 0.5),
        (0.5, f64::INFINITY),
        (5.0, 0.05),
    ] {
        let want = plain_reference(h.view(), case.weights, cost.view(), eps, rho, 20_000);
        let p = BarycenterParams::new(eps).tol(1e-13).max_iters(100_000);
        let w = case.weights::<f64>();
        let r = Some(Relaxation::kl_each(rho.0, rho.1));
        let bar = barycenter(h.view(), w.view(), cost.view(), &p, r).unwrap();
        assert!(bar.converged, "{rho:?}: error {:e}", bar.error);
        let err = rel_err(bar.histogram.as_slice().unwrap(), &want);
        assert!(
            err < 1e-9,
            "{rho:?}: relative error vs the plain reference {err:e}"
        );
        if rho.1.is_infinite() {
            // the barycenter side is exact: every coupling's column marginal is q, so q has
            // the mass of a coupling, which lies between the inputs' masses when ρ_a < ∞
            let mass: f64 = bar.histogram.sum();
            assert!(mass > 0.0 && mass.is_finite());
        }
    }
}

#[test]
fn large_rho_tends_to_the_balanced_barycenter() {
    // Equal-mass inputs: as ρ → ∞ the unbalanced barycenter tends to the balanced one
    // (POT's barycenter, same entropic problem); 1 − φ = ε/(ρ+ε) is 1e-8 here, which the
    // power mean must keep (expm1/log1p) in f32 too.
    let case = pot::DENSE2;
    let h = case.inputs::<f64>();
    let h = &h / &h.sum_axis(Axis(1)).insert_axis(Axis(1));
    let cost = case.dense_cost::<f64>();
    let w = case.weights::<f64>();
    let balanced = barycenter(
        h.view(),
        w.view(),
        cost.view(),
        &BarycenterParams::new(case.eps)
            .tol(1e-12)
            .max_iters(100_000),
        None,
    )
    .unwrap();
    assert!(balanced.converged);
    let relaxed = barycenter(
        h.view(),
        w.view(),
        cost.view(),
        // (the mass converges at a rate 1 − O(ε/ρ): no tighter tolerance in reach)
        &params(case.eps, 1e-8, 100_000),
        Some(Relaxation::kl(case.eps * 1e8)),
    )
    .unwrap();
    let want = balanced.histogram.as_slice().unwrap();
    let err = rel_err(relaxed.histogram.as_slice().unwrap(), want);
    assert!(
        relaxed.converged && err < 1e-6,
        "f64: {err:e}, error {:e} after {} iterations",
        relaxed.error,
        relaxed.iterations
    );
    let h32 = h.mapv(|x| x as f32);
    let c32 = cost.mapv(|x| x as f32);
    let relaxed32 = barycenter(
        h32.view(),
        case.weights::<f32>().view(),
        c32.view(),
        &params(case.eps, 1e-6, 100_000),
        Some(Relaxation::kl(case.eps * 1e8)),
    )
    .unwrap();
    let err = rel_err(relaxed32.histogram.as_slice().unwrap(), want);
    assert!(err < 1e-4, "f32: {err:e}");
    // ρ = ∞ on both sides is the balanced barycenter itself.
    let exact = barycenter(
        h.view(),
        w.view(),
        cost.view(),
        &params(case.eps, 1e-12, 100_000),
        Some(Relaxation::kl(f64::INFINITY)),
    )
    .unwrap();
    assert_eq!(exact.histogram, balanced.histogram);
}

#[test]
fn reports_describe_the_returned_barycenter() {
    let case = pot::DENSE3;
    let (rho, want) = (case.rhos[1], case.barycenters[1]);
    // A few iterations: far from POT's fixed point, and the report says so.
    let short = solve::<f64>(&case, rho, 0.0, 3, false);
    assert_eq!(short.iterations, 3);
    assert!(!short.converged && short.error > 1e-3, "{:e}", short.error);
    assert!(rel_err(short.histogram.as_slice().unwrap(), want) > 1e-3);
    // Stopping at a tolerance: the error is measured on the result and below it.
    let stopped = solve::<f64>(&case, rho, 1e-6, 100_000, false);
    assert!(stopped.converged && stopped.error < 1e-6);
    assert!(stopped.iterations < 100_000 && stopped.iterations % 10 == 0);
    assert!(rel_err(stopped.histogram.as_slice().unwrap(), want) < 1e-4);
    // The error decreases along the way (history).
    let p = params(case.eps, 1e-9, 100_000).history(true);
    let h = case.inputs::<f64>();
    let bar = barycenter(
        h.view(),
        case.weights::<f64>().view(),
        case.dense_cost::<f64>().view(),
        &p,
        Some(Relaxation::kl(rho)),
    )
    .unwrap();
    let errs: Vec<f64> = bar.history.iter().map(|e| e.error).collect();
    assert!(errs.len() >= 2 && errs.last().unwrap() < &errs[0]);
    assert_eq!(*errs.last().unwrap(), bar.error);
}

#[test]
fn batch_equals_single_solves() {
    let case = pot::DENSE3;
    let h = case.inputs::<f64>();
    let cost = case.dense_cost::<f64>();
    let weights = [[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]];
    let hb = Array3::from_shape_fn((2, h.nrows(), h.ncols()), |(_, k, i)| h[[k, i]]);
    let wb = Array2::from_shape_fn((2, 3), |(p, k)| weights[p][k]);
    let (p, r) = (params(case.eps, 0.0, 200), Relaxation::kl(0.5));
    let batch = BarycenterProblem::new(hb.view(), wb.view())
        .unwrap()
        .relaxed(r);
    let bars = BarycenterSolver::new(CpuBackend, p.clone())
        .solve(&batch, cost.view())
        .unwrap();
    for (b, w) in bars.iter().zip(weights) {
        let w = Array1::from(w.to_vec());
        let one = barycenter(h.view(), w.view(), cost.view(), &p, Some(r)).unwrap();
        assert_eq!(b.histogram, one.histogram);
        assert_eq!(b.error, one.error);
    }
    assert!(
        rel_err(
            bars[0].histogram.as_slice().unwrap(),
            bars[1].histogram.as_slice().unwrap()
        ) > 1e-2
    );
}

#[test]
fn log_power_mean_matches_its_definition() {
    let w = [0.2f64, 0.0, 0.5, 0.3];
    let v = [0.3f64, -1e300, -0.7, 1.1];
    for t in [1e-3, 0.5, 4.0] {
        let got = log_power_mean(&w, |k| v[k], t);
        let sum: f64 = [0, 2, 3].iter().map(|&k| w[k] * (-t * v[k]).exp()).sum();
        let want = sum.ln() / t; // Σ w = 1; the direct formula loses ~1e-16/t
        assert!((got - want).abs() < 1e-14 / t, "t = {t}: {got} vs {want}");
    }
    // t → 0: the weighted mean of −v, kept to full precision for tiny t.
    let mean = -(0.2 * 0.3 + 0.5 * -0.7 + 0.3 * 1.1);
    assert_eq!(log_power_mean(&w, |k| v[k], 0.0), mean);
    let tiny = log_power_mean(&w, |k| v[k], 1e-12);
    assert!((tiny - mean).abs() < 1e-12, "{tiny} vs {mean}");
    let tiny32 = log_power_mean(&[0.2f32, 0.0, 0.5, 0.3], |k| v[k] as f32, 1e-9);
    assert!((tiny32 as f64 - mean).abs() < 1e-6, "{tiny32}");
    // weights not summing to 1 are normalised; −∞ entries drop out; all −∞ gives −∞.
    let scaled = log_power_mean(&[2.0, 0.0, 5.0, 3.0], |k| v[k], 0.5);
    assert!((scaled - log_power_mean(&w, |k| v[k], 0.5)).abs() < 1e-14);
    let inf = f64::INFINITY;
    let half = log_power_mean(&[0.5, 0.5], |k| [inf, 0.0][k], 1.0);
    assert!((half - 0.5f64.ln()).abs() < 1e-15);
    assert_eq!(log_power_mean(&[0.5, 0.5], |_| inf, 1.0), -inf);
    // far apart inputs: the mean is set by the top one, never −∞ or NaN
    let far = log_power_mean(&[0.5, 0.5], |k| [0.0, 1e6][k], 1.0);
    assert!((far - 0.5f64.ln()).abs() < 1e-15, "{far}");
}

#[test]
fn bad_relaxations_and_masses_are_errors() {
    let case = pot::DENSE2;
    let h = case.inputs::<f64>();
    let cost = case.dense_cost::<f64>();
    let w = case.weights::<f64>();
    for (r, arg) in [
        (Relaxation::kl(0.0), "relaxation.rho_mu"),
        (Relaxation::kl(-1.0), "relaxation.rho_mu"),
        (Relaxation::kl(f64::NAN), "relaxation.rho_mu"),
        (Relaxation::kl_each(1.0, 0.0), "relaxation.rho_nu"),
        (Relaxation::kl_each(1.0, f64::NAN), "relaxation.rho_nu"),
        (
            Relaxation::kl_each(f64::NEG_INFINITY, 1.0),
            "relaxation.rho_mu",
        ),
    ] {
        let p = BarycenterParams::new(case.eps);
        let err = barycenter(h.view(), w.view(), cost.view(), &p, Some(r)).unwrap_err();
        assert!(matches!(err, Error::Parameter { .. }), "{r:?}: {err:?}");
        assert!(err.to_string().contains(arg), "{r:?}: {err}");
    }
    // Unequal masses: an error for the balanced barycenter, which says how to relax them.
    let err = barycenter(
        h.view(),
        w.view(),
        cost.view(),
        &BarycenterParams::new(case.eps),
        None,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("histograms") && msg.contains("relax"), "{msg}");
    // ... and with both sides infinite (which is the balanced problem).
    let (p, inf) = (
        BarycenterParams::new(case.eps),
        Relaxation::kl(f64::INFINITY),
    );
    assert!(barycenter(h.view(), w.view(), cost.view(), &p, Some(inf)).is_err());
    // The usual checks still apply to unbalanced inputs.
    let (p, r) = (params(case.eps, 1e-6, 100), Some(Relaxation::kl(1.0)));
    let mut neg = h.clone();
    neg[[1, 3]] = -0.1;
    assert!(barycenter(neg.view(), w.view(), cost.view(), &p, r).is_err());
    let mut empty = h.clone();
    empty.row_mut(0).fill(0.0);
    assert!(barycenter(empty.view(), w.view(), cost.view(), &p, r).is_err());
    let bad_w = Array1::from(vec![0.5, 0.6]);
    let err = barycenter(h.view(), bad_w.view(), cost.view(), &p, r).unwrap_err();
    assert!(err.to_string().contains("weights"), "{err}");
}

#[test]
fn solver_on_cpu_backend_matches_top_level() {
    let case = pot::GRID2D;
    let h = case.inputs::<f64>();
    let w = case.weights::<f64>();
    let (p, r) = (params(case.eps, 0.0, 50), Relaxation::kl(case.rhos[0]));
    let solver = BarycenterSolver::new(CpuBackend, p.clone());
    let grid = GridCost::new(case.shape).unwrap();
    let prepared = solver.prepare::<f64>(grid.clone()).unwrap();
    let problem = BarycenterProblem::new(h.view(), w.view())
        .unwrap()
        .relaxed(r);
    let a = solver.solve(&problem, &prepared).unwrap().remove(0);
    let b = barycenter(h.view(), w.view(), grid, &p, Some(r)).unwrap();
    assert_eq!(a.histogram, b.histogram);
    assert_eq!(a.iterations, 50);
}

/// A constant added to the cost shrinks the couplings (and the barycenter) by many orders
/// of magnitude: the error is relative to each coupling's own mass, so the loop runs until
/// the barycenter itself is accurate, and the reported error bounds the barycenter's real
/// one against POT (`tests/data/make_pot_unbalanced_barycenter_offsets.py`, POT's stopping
/// test scaled to the barycenter's size).
#[test]
fn error_is_relative_to_the_couplings_mass_at_any_offset() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let cases: Array2<f64> =
        ndarray_npy::read_npy(format!("{dir}/pot_unbalanced_barycenter_offsets.npy")).unwrap();
    let inputs: Array2<f64> = ndarray_npy::read_npy(format!(
        "{dir}/pot_unbalanced_barycenter_offsets_inputs.npy"
    ))
    .unwrap();
    let n = inputs.ncols();
    let weights = ndarray::array![0.2, 0.3, 0.5];
    assert!(cases.nrows() >= 10);
    for case in cases.rows() {
        let (offset, eps, rho) = (case[0], case[1], case[2]);
        let want = case.slice(ndarray::s![3..]).to_vec();
        let t = Array1::<f64>::linspace(0.0, 1.0, n);
        let cost = Array2::from_shape_fn((n, n), |(i, j)| (t[i] - t[j]).powi(2) + offset);
        for tol in [1e-6, 1e-9] {
            let (p, r) = (params(eps, tol, 100_000), Some(Relaxation::kl(rho)));
            let bar = barycenter(inputs.view(), weights.view(), cost.view(), &p, r).unwrap();
            let real = rel_err(bar.histogram.as_slice().unwrap(), &want);
            let what = format!("offset {offset}, eps {eps}, rho {rho}, tol {tol:e}");
            assert!(
                bar.converged && bar.error <= tol,
                "{what}: error {:e}",
                bar.error
            );
            // The reported error bounds the barycenter's (measured: at most 0.06 of it),
            // beyond f64's rounding of the exponents on a cost of size 1 + offset.
            let floor = 16.0 * f64::EPSILON * (1.0 + offset) / eps;
            assert!(
                real <= bar.error + floor,
                "{what}: relative error vs POT {real:e}, reported {:e}",
                bar.error
            );
        }
    }
}
