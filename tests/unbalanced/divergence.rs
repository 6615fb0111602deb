//! The unbalanced Sinkhorn divergence of point clouds (GeomLoss's debiased formula with a
//! reach), against an independent f64 reference: a plain dense unbalanced Sinkhorn written
//! here (its own loops, its own convergence) and GeomLoss's closed form from its potentials,
//! `⟨μ, (ρ + ε/2)(e^{−f_μμ/ρ} − e^{−f_μν/ρ})⟩ + ⟨ν, (ρ + ε/2)(e^{−g_νν/ρ} − e^{−g_μν/ρ})⟩`;
//! then the divergence's properties, finite differences and the refusals.

use crate::common;

use common::Lcg;
use logot::grad::{check_gradient, GradCheckParams};
use logot::{
    CpuBackend, DivergenceConvention, EpsScaling, Error, PointCloudCost, PointMetric, Problem,
    Relaxation, SinkhornParams, SinkhornSolver,
};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2};

fn cloud(seed: u64, n: usize, d: usize, lo: f64, hi: f64) -> Array2<f64> {
    let mut r = Lcg(seed);
    Array2::from_shape_simple_fn((n, d), || r.uniform(lo, hi))
}

/// Positive weights of total `mass`.
fn weights(seed: u64, n: usize, mass: f64) -> Array1<f64> {
    let mut r = Lcg(seed);
    let w = Array1::from_shape_simple_fn(n, || r.next() + 0.1);
    let s = w.sum();
    w * (mass / s)
}

fn dense_cost(x: &Array2<f64>, y: &Array2<f64>, metric: PointMetric) -> Array2<f64> {
    Array2::from_shape_fn((x.nrows(), y.nrows()), |(i, j)| {
        let s: f64 = (0..x.ncols())
            .map(|k| (x[[i, k]] - y[[j, k]]).powi(2))
            .sum();
        match metric {
            PointMetric::SqEuclidean => s,
            _ => s.sqrt(),
        }
    })
}

fn lse(v: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = v.clone().fold(f64::NEG_INFINITY, f64::max);
    m + v.map(|t| (t - m).exp()).sum::<f64>().ln()
}

/// Relative potentials `(f, g)` of the unbalanced problem with `P = a⊗b·exp((f ⊕ g − C)/ε)`,
/// by plain alternating updates `f_i = −φ ε log Σ_j b_j exp((g_j − C_ij)/ε)` until they stop
/// moving (`φ = ρ/(ρ + ε)`).
fn reference_potentials(
    a: &Array1<f64>,
    b: &Array1<f64>,
    c: &Array2<f64>,
    eps: f64,
    rho: f64,
) -> (Vec<f64>, Vec<f64>) {
    let (n, m) = c.dim();
    let phi = rho / (rho + eps);
    let (mut f, mut g) = (vec![0.0; n], vec![0.0; m]);
    for _ in 0..200_000 {
        let g_new: Vec<f64> = (0..m)
            .map(|j| -phi * eps * lse((0..n).map(|i| a[i].ln() + (f[i] - c[[i, j]]) / eps)))
            .collect();
        let f_new: Vec<f64> = (0..n)
            .map(|i| -phi * eps * lse((0..m).map(|j| b[j].ln() + (g_new[j] - c[[i, j]]) / eps)))
            .collect();
        let moved = f_new
            .iter()
            .zip(&f)
            .chain(g_new.iter().zip(&g))
            .fold(0.0f64, |acc, (p, q)| acc.max((p - q).abs()));
        f = f_new;
        g = g_new;
        if moved < 1e-15 {
            return (f, g);
        }
    }
    panic!("the reference solver did not converge");
}

/// GeomLoss's unbalanced debiased value from four independent dense solves.
fn reference_divergence(
    a: &Array1<f64>,
    b: &Array1<f64>,
    x: &Array2<f64>,
    y: &Array2<f64>,
    eps: f64,
    rho: f64,
    metric: PointMetric,
) -> f64 {
    let (f_ab, g_ab) = reference_potentials(a, b, &dense_cost(x, y, metric), eps, rho);
    let (f_aa, _) = reference_potentials(a, a, &dense_cost(x, x, metric), eps, rho);
    let (_, g_bb) = reference_potentials(b, b, &dense_cost(y, y, metric), eps, rho);
    let w = rho + eps / 2.0;
    let side = |w8: &Array1<f64>, own: &[f64], cross: &[f64]| -> f64 {
        w8.iter()
            .zip(own.iter().zip(cross))
            .map(|(&wi, (&o, &c))| wi * w * ((-o / rho).exp() - (-c / rho).exp()))
            .sum()
    };
    side(a, &f_aa, &f_ab) + side(b, &g_bb, &g_ab)
}

/// The solver's parameters and the reach of the problem (`None`: balanced).
type Params = (SinkhornParams, Option<f64>);

fn params(eps: f64, rho: f64) -> Params {
    (
        SinkhornParams::new(eps).tol(1e-13).max_iters(200_000),
        Some(rho),
    )
}

fn divergence<T: logot::Real>(
    (p, rho): &Params,
    a: ArrayView1<'_, T>,
    b: ArrayView1<'_, T>,
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
    metric: PointMetric,
) -> logot::Result<logot::DivergenceResult<T>> {
    let mut problem = Problem::new(a, b, PointCloudCost::with_metric(x, y, metric)?)?;
    if let Some(rho) = rho {
        problem = problem.relaxed(Relaxation::kl(*rho));
    }
    SinkhornSolver::new(CpuBackend, p.clone())
        .sinkhorn_divergence(&problem, DivergenceConvention::Objective)
}

#[test]
fn matches_geomloss_closed_form_with_unequal_masses() {
    // (seed, n, m, d, masses, ε, ρ, metric): held-out shapes, masses and penalties.
    let cases = [
        (1, 7, 5, 2, (1.0, 1.6), 0.1, 1.0, PointMetric::SqEuclidean),
        (2, 9, 11, 3, (0.7, 0.7), 0.05, 0.3, PointMetric::SqEuclidean),
        (3, 6, 8, 1, (2.0, 0.5), 0.5, 5.0, PointMetric::Euclidean),
        (4, 12, 4, 4, (1.0, 1.2), 0.2, 0.05, PointMetric::SqEuclidean),
    ];
    for (seed, n, m, d, (ma, mb), eps, rho, metric) in cases {
        let (x, y) = (
            cloud(seed, n, d, 0.0, 1.0),
            cloud(seed + 100, m, d, 0.2, 1.3),
        );
        let (a, b) = (weights(seed + 200, n, ma), weights(seed + 300, m, mb));
        let want = reference_divergence(&a, &b, &x, &y, eps, rho, metric);
        let s = divergence(
            &params(eps, rho),
            a.view(),
            b.view(),
            x.view(),
            y.view(),
            metric,
        )
        .unwrap();
        assert!(s.converged(), "case {seed}: {:?}", s.convergence);
        let scale = s.terms.iter().fold(1.0f64, |acc, t| acc.max(t.abs()));
        assert!(
            (s.value[0] - want).abs() <= 1e-10 * scale,
            "case {seed}: {} vs GeomLoss's formula {want}",
            s.value[0]
        );
        assert!(s.value[0] > 0.0, "case {seed}: {}", s.value[0]);
    }
}

#[test]
fn vanishes_for_equal_measures_and_separates_masses() {
    let x = cloud(11, 10, 2, 0.0, 1.0);
    let a = weights(12, 10, 1.3);
    let p = params(0.1, 0.5);
    let same = divergence(
        &p,
        a.view(),
        a.view(),
        x.view(),
        x.view(),
        PointMetric::SqEuclidean,
    )
    .unwrap();
    assert!(same.converged());
    assert!(same.value[0].abs() <= 1e-12, "S(μ, μ) = {}", same.value[0]);
    // Same support, twice the mass: positive, and equal to the closed form.
    let a2 = &a * 2.0;
    let heavier = divergence(
        &p,
        a.view(),
        a2.view(),
        x.view(),
        x.view(),
        PointMetric::SqEuclidean,
    )
    .unwrap();
    let want = reference_divergence(&a, &a2, &x, &x, 0.1, 0.5, PointMetric::SqEuclidean);
    assert!(heavier.value[0] > 1e-3, "{}", heavier.value[0]);
    assert!(
        (heavier.value[0] - want).abs() <= 1e-10 * heavier.terms[[0, 2]].abs().max(1.0),
        "{} vs {want}",
        heavier.value[0]
    );
}

#[test]
fn large_reach_tends_to_the_balanced_divergence() {
    let (x, y) = (cloud(21, 8, 2, 0.0, 1.0), cloud(22, 9, 2, 0.3, 1.2));
    let (a, b) = (weights(23, 8, 1.0), weights(24, 9, 1.0));
    let balanced = (SinkhornParams::new(0.2).tol(1e-13), None);
    let s_bal = divergence(
        &balanced,
        a.view(),
        b.view(),
        x.view(),
        y.view(),
        PointMetric::SqEuclidean,
    )
    .unwrap()
    .value[0];
    // The relaxation's effect on S is O(1/ρ): it shrinks tenfold from ρ = 10 to ρ = 100.
    let gap = |rho: f64| {
        let s = divergence(
            &params(0.2, rho),
            a.view(),
            b.view(),
            x.view(),
            y.view(),
            PointMetric::SqEuclidean,
        )
        .unwrap();
        assert!(s.converged(), "ρ = {rho}: {:?}", s.convergence);
        (s.value[0] - s_bal).abs()
    };
    let (g10, g100) = (gap(10.0), gap(100.0));
    assert!(
        g100 < 0.2 * g10 && g100 < 1e-2 * s_bal,
        "{g10} {g100} (S = {s_bal})"
    );
}

#[test]
fn gradients_match_finite_differences() {
    let (x, y) = (cloud(31, 5, 2, 0.0, 1.0), cloud(32, 6, 2, 0.0, 1.0));
    let (a, b) = (weights(33, 5, 1.0), weights(34, 6, 1.4));
    for metric in [PointMetric::SqEuclidean, PointMetric::Euclidean] {
        let p = params(0.1, 0.7);
        let s = divergence(&p, a.view(), b.view(), x.view(), y.view(), metric).unwrap();
        let value = |xv: &Array2<f64>, yv: &Array2<f64>| {
            divergence(&p, a.view(), b.view(), xv.view(), yv.view(), metric)
                .unwrap()
                .value[0]
        };
        let opts = GradCheckParams::default().rel_tol(1e-6).abs_floor(1e-8);
        let gx: Vec<f64> = s.grad_x.as_ref().unwrap().iter().copied().collect();
        let rx = check_gradient(
            |v| value(&Array2::from_shape_vec(x.dim(), v.to_vec()).unwrap(), &y),
            x.as_slice().unwrap(),
            &gx,
            &opts,
        )
        .unwrap();
        assert!(rx.passed, "{metric:?} x: {rx}");
        let gy: Vec<f64> = s.grad_y.as_ref().unwrap().iter().copied().collect();
        let ry = check_gradient(
            |v| value(&x, &Array2::from_shape_vec(y.dim(), v.to_vec()).unwrap()),
            y.as_slice().unwrap(),
            &gy,
            &opts,
        )
        .unwrap();
        assert!(ry.passed, "{metric:?} y: {ry}");
    }
}

#[test]
fn f32_and_eps_scaling_agree_with_the_f64_reference() {
    let (x, y) = (cloud(41, 40, 3, 0.0, 1.0), cloud(42, 30, 3, 0.1, 1.1));
    let (a, b) = (weights(43, 40, 1.0), weights(44, 30, 0.8));
    let (eps, rho) = (0.02, 0.5);
    let want = reference_divergence(&a, &b, &x, &y, eps, rho, PointMetric::SqEuclidean);
    // f64 annealed from the squared diameter.
    let (p0, reach) = params(eps, rho);
    let mut p = (p0.eps_scaling(EpsScaling::from_max_cost(3.0 * 1.21)), reach);
    let s = divergence(
        &p,
        a.view(),
        b.view(),
        x.view(),
        y.view(),
        PointMetric::SqEuclidean,
    )
    .unwrap();
    assert!(s.converged(), "{:?}", s.convergence);
    assert!(
        (s.value[0] - want).abs() <= 1e-9,
        "{} vs {want}",
        s.value[0]
    );
    // f32 at its own default tolerance: the error is that of f32 potentials, O(ε_f32)
    // relative to the terms, not relative to the (smaller) divergence.
    p.0.tol = None;
    let c32 = |v: &Array2<f64>| v.mapv(|t| t as f32);
    let w32 = |v: &Array1<f64>| v.mapv(|t| t as f32);
    let s32 = divergence(
        &p,
        w32(&a).view(),
        w32(&b).view(),
        c32(&x).view(),
        c32(&y).view(),
        PointMetric::SqEuclidean,
    )
    .unwrap();
    assert!(s32.converged(), "{:?}", s32.convergence);
    let scale = s.terms.iter().fold(1.0f64, |acc, t| acc.max(t.abs()));
    let tol = 100.0 * f64::from(f32::EPSILON) * scale * ((40 * 30) as f64).sqrt();
    assert!(
        (f64::from(s32.value[0]) - want).abs() <= tol,
        "{} vs {want} (tol {tol})",
        s32.value[0]
    );
}

#[test]
fn refusals_name_the_problem() {
    let x = cloud(51, 4, 2, 0.0, 1.0);
    let (a, b) = (weights(52, 4, 1.0), weights(53, 4, 2.0));
    let err = |r: Option<Relaxation>, conv: DivergenceConvention| {
        let cost = PointCloudCost::new(x.view(), x.view()).unwrap();
        let mut problem = Problem::new(a.view(), b.view(), cost).unwrap();
        if let Some(r) = r {
            problem = problem.relaxed(r);
        }
        SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1))
            .sinkhorn_divergence(&problem, conv)
            .unwrap_err()
    };
    let objective = DivergenceConvention::Objective;
    // One penalty per side: refused (S(μ, μ) = 0 needs the symmetric problem).
    for r in [
        Relaxation::kl_each(1.0, 2.0),
        Relaxation::kl_each(1.0, f64::INFINITY),
    ] {
        let e = err(Some(r), objective);
        assert!(
            matches!(&e, Error::Parameter { arg, .. } if arg == "relaxation"),
            "{e}"
        );
    }
    // The linear convention is balanced only.
    let e = err(Some(Relaxation::kl(1.0)), DivergenceConvention::Linear);
    assert!(
        matches!(&e, Error::Parameter { arg, .. } if arg == "convention"),
        "{e}"
    );
    // Bad penalties name the field.
    let e = err(Some(Relaxation::kl(-1.0)), objective);
    assert!(e.to_string().contains("rho"), "{e}");
    // Balanced: unequal masses are still refused.
    let e = err(None, objective);
    assert!(e.to_string().contains("mass"), "{e}");
}
