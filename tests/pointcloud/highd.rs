//! Point-cloud kernels at high dimension (the CPU's cross-term form `|x|² + |y|² − 2·x·y`
//! above a small `d`, the direct form below) against an f64 brute force written here: costs
//! in the direct form `Σ_k (x_k − y_k)²` from the same (rounded) inputs, dense log-sum-exps
//! and plan sums. f32 and f64, both metrics, and clouds far from the origin (the kernels
//! centre them; without that the norm form would lose everything to cancellation).

// The brute force indexes several arrays in step.
#![allow(clippy::needless_range_loop)]

use crate::common;

use common::Lcg;
use logot::backend::Side;
use logot::{
    Backend, CpuBackend, PointCloudCost, PointCloudKernels, PointMetric, Problem, Real,
    SinkhornParams, SinkhornSolver,
};
use ndarray::{Array2, Axis};

/// One problem: clouds rounded to `T` (kept in f64 for the brute force), potentials,
/// log-marginals, `ε`, and the direct-form cost matrix.
struct Case {
    n: usize,
    m: usize,
    d: usize,
    metric: PointMetric,
    eps: f64,
    x: Array2<f64>,
    y: Array2<f64>,
    f: Vec<f64>,
    g: Vec<f64>,
    lmu: Vec<f64>,
    lnu: Vec<f64>,
    c: Array2<f64>,
    /// The spread `max |x_i − x̄|² + max |y_j − x̄|²` about the mean of both clouds.
    spread: f64,
}

fn round<T: Real>(v: f64) -> f64 {
    T::of(v).f64()
}

fn case<T: Real>(n: usize, m: usize, d: usize, metric: PointMetric, offset: f64) -> Case {
    let mut r = Lcg(1000 + d as u64);
    let x = Array2::from_shape_simple_fn((n, d), || round::<T>(offset + r.next()));
    let y = Array2::from_shape_simple_fn((m, d), || round::<T>(offset + r.uniform(-0.3, 0.7)));
    // ε so that c/ε is about 10 for a typical pair (c ≈ d/6, or √(d/6)).
    let eps = match metric {
        PointMetric::SqEuclidean => d as f64 / 60.0,
        _ => (d as f64 / 6.0).sqrt() / 10.0,
    };
    let amp = 3.0 * eps;
    let f = (0..n).map(|_| round::<T>(r.uniform(-amp, amp))).collect();
    let mut g: Vec<f64> = (0..m).map(|_| round::<T>(r.uniform(-amp, amp))).collect();
    g[1] = f64::NEG_INFINITY;
    let lmu = (0..n).map(|_| round::<T>(r.uniform(-6.0, -3.0))).collect();
    let lnu = (0..m).map(|_| round::<T>(r.uniform(-6.0, -3.0))).collect();
    let c = Array2::from_shape_fn((n, m), |(i, j)| {
        let s: f64 = (0..d).map(|k| (x[[i, k]] - y[[j, k]]).powi(2)).sum();
        match metric {
            PointMetric::SqEuclidean => s,
            _ => s.sqrt(),
        }
    });
    let mean = x
        .sum_axis(Axis(0))
        .into_iter()
        .zip(y.sum_axis(Axis(0)))
        .map(|(a, b)| (a + b) / (n + m) as f64)
        .collect::<Vec<f64>>();
    let radius = |p: &Array2<f64>| {
        p.rows()
            .into_iter()
            .map(|row| row.iter().zip(&mean).map(|(a, b)| (a - b).powi(2)).sum())
            .fold(0.0f64, f64::max)
    };
    let spread = radius(&x) + radius(&y);
    Case {
        n,
        m,
        d,
        metric,
        eps,
        x,
        y,
        f,
        g,
        lmu,
        lnu,
        c,
        spread,
    }
}

fn to<T: Real>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&a| T::of(a)).collect()
}

/// Unit roundoff of `T`.
fn unit<T: Real>() -> f64 {
    T::epsilon().f64() / 2.0
}

/// Every point-cloud kernel of the CPU backend on `case` against the brute force.
fn check<T: Real>(k: &Case) {
    let be = CpuBackend;
    let (n, m, d, eps) = (k.n, k.m, k.d, k.eps);
    let what = format!("{} d={d} {:?} spread={:.3e}", T::NAME, k.metric, k.spread);
    let (xt, yt) = (k.x.mapv(T::of), k.y.mapv(T::of));
    let pc = be
        .prepare_cost(
            &PointCloudCost::with_metric(xt.view(), yt.view(), k.metric)
                .unwrap()
                .into(),
        )
        .unwrap();
    let u = unit::<T>();
    // The norm form errs by at most about (d + 3)·u·(|x|² + |y|²) in c; the log-sum-exp
    // and the final ε·(log ν − LSE) by a few u of the largest term.
    let cost_tol = (d as f64 + 8.0) * u * k.spread;
    let (f, g) = (to::<T>(&k.f), to::<T>(&k.g));
    let eps_t = T::of(eps);

    // Half-steps on both sides.
    for (side, other, lm, len) in [(Side::Col, &k.f, &k.lnu, m), (Side::Row, &k.g, &k.lmu, n)] {
        let mut got = vec![T::zero(); len];
        be.sinkstep(&pc, side, eps_t, &to::<T>(other), &to::<T>(lm), &mut got)
            .unwrap();
        for (o, got) in got.iter().enumerate() {
            let args: Vec<f64> = (0..other.len())
                .map(|l| {
                    let c = if side == Side::Col {
                        k.c[[l, o]]
                    } else {
                        k.c[[o, l]]
                    };
                    (other[l] - c) / eps
                })
                .collect();
            let mx = args.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = mx + args.iter().map(|a| (a - mx).exp()).sum::<f64>().ln();
            let want = eps * (lm[o] - lse);
            let tol = cost_tol + 16.0 * u * (eps * mx.abs() + want.abs() + eps);
            assert!(
                (got.f64() - want).abs() <= tol,
                "{what} {side:?} half-step {o}: {got} vs {want} (tol {tol:.2e})"
            );
        }
    }

    // Plan entries: a cost error Δc moves P by a factor exp(Δc/ε).
    let plan = |i: usize, j: usize| ((k.f[i] + k.g[j] - k.c[[i, j]]) / eps).exp();
    let rel = 2.0 * cost_tol / eps + 64.0 * u;
    // Transport cost ⟨P, C⟩.
    let tc = be.transport_cost(&pc, &f, &g, eps_t).unwrap()[0].f64();
    let want: f64 = (0..n)
        .flat_map(|i| (0..m).map(move |j| (i, j)))
        .map(|(i, j)| plan(i, j) * k.c[[i, j]])
        .sum();
    assert!(
        (tc - want).abs() <= (rel + cost_tol / k.c.fold(f64::MAX, |a, &b| a.min(b))) * want,
        "{what} transport cost {tc} vs {want}"
    );

    // Marginals, cost-weighted marginals, point gradients, P·V and the adjoint gradient.
    let vals: Vec<f64> = {
        let mut r = Lcg(77);
        (0..m.max(n) * 3)
            .map(|_| round::<T>(r.uniform(-1.0, 1.0)))
            .collect()
    };
    let (a_adj, b_adj): (Vec<f64>, Vec<f64>) = {
        let mut r = Lcg(78);
        let a = (0..n).map(|_| round::<T>(r.uniform(-eps, eps))).collect();
        let b = (0..m).map(|_| round::<T>(r.uniform(-eps, eps))).collect();
        (a, b)
    };
    let alpha = 0.5;
    for side in [Side::Row, Side::Col] {
        let (len, others) = if side == Side::Row { (n, m) } else { (m, n) };
        let (mass, cm) = be.cost_marginals(&pc, side, &f, &g, eps_t).unwrap();
        let (mass2, grad) = be.point_gradient(&pc, side, &f, &g, eps_t).unwrap();
        let pv = be
            .plan_apply(&pc, side, &f, &g, eps_t, &to::<T>(&vals[..others * 3]), 3)
            .unwrap();
        let adj = be
            .adjoint_point_gradient(
                &pc,
                side,
                &f,
                &g,
                eps_t,
                &to::<T>(&a_adj),
                &to::<T>(&b_adj),
                T::of(alpha),
            )
            .unwrap();
        for o in 0..len {
            let (mut w_mass, mut w_cm, mut scale) = (0.0, 0.0, 0.0);
            let mut w_grad = vec![0.0; d];
            let mut w_adj = vec![0.0; d];
            let mut adj_scale = 0.0;
            let mut w_pv = [0.0; 3];
            for l in 0..others {
                let (i, j) = if side == Side::Row { (o, l) } else { (l, o) };
                let (p, c) = (plan(i, j), k.c[[i, j]]);
                w_mass += p;
                w_cm += p * c;
                for ch in 0..3 {
                    w_pv[ch] += p * vals[l * 3 + ch];
                }
                // ∇c: 2(p − q) or (p − q)/|p − q| for the output point p.
                let fac = match k.metric {
                    PointMetric::SqEuclidean => 2.0,
                    _ if c > 0.0 => 1.0 / c,
                    _ => 0.0,
                };
                let wa = p * (alpha + (a_adj[i] + b_adj[j] - c) / eps);
                let mut norm = 0.0;
                for t in 0..d {
                    let diff = if side == Side::Row {
                        k.x[[i, t]] - k.y[[j, t]]
                    } else {
                        k.y[[j, t]] - k.x[[i, t]]
                    };
                    w_grad[t] += p * fac * diff;
                    w_adj[t] += wa * fac * diff;
                    norm += (fac * diff).powi(2);
                }
                scale += p * norm.sqrt();
                adj_scale += wa.abs() * norm.sqrt();
            }
            let close = |got: f64, want: f64, scale: f64| (got - want).abs() <= rel * scale;
            let at = |v: &[T], i: usize| v[i].f64();
            assert!(
                close(at(&mass, o), w_mass, w_mass),
                "{what} {side:?} mass {o}"
            );
            assert!(
                close(at(&mass2, o), w_mass, w_mass),
                "{what} {side:?} mass {o}"
            );
            assert!(
                (at(&cm, o) - w_cm).abs() <= rel * w_cm + cost_tol * w_mass,
                "{what} {side:?} cost marginal {o}: {} vs {w_cm}",
                at(&cm, o)
            );
            for ch in 0..3 {
                let got = at(&pv, o * 3 + ch);
                assert!(
                    close(got, w_pv[ch], w_mass),
                    "{what} {side:?} P·V {o},{ch}: {got} vs {}",
                    w_pv[ch]
                );
            }
            for t in 0..d {
                let got = at(&grad, o * d + t);
                assert!(
                    close(got, w_grad[t], scale),
                    "{what} {side:?} gradient {o},{t}: {got} vs {}",
                    w_grad[t]
                );
                // The adjoint weights carry c/ε itself: its error cost_tol/ε on every entry.
                let got = at(&adj, o * d + t);
                assert!(
                    (got - w_adj[t]).abs() <= rel * adj_scale + cost_tol / eps * scale,
                    "{what} {side:?} adjoint gradient {o},{t}: {got} vs {}",
                    w_adj[t]
                );
            }
        }
    }
}

const DIMS: [usize; 6] = [5, 17, 64, 100, 512, 1024];

#[test]
fn kernels_match_the_brute_force_at_high_dimension_f64() {
    for d in DIMS {
        for metric in [PointMetric::SqEuclidean, PointMetric::Euclidean] {
            check::<f64>(&case::<f64>(37, 130, d, metric, 0.0));
        }
    }
}

#[test]
fn kernels_match_the_brute_force_at_high_dimension_f32() {
    for d in DIMS {
        for metric in [PointMetric::SqEuclidean, PointMetric::Euclidean] {
            check::<f32>(&case::<f32>(37, 130, d, metric, 0.0));
        }
    }
}

/// Every coordinate shifted by 10³: the tolerance is set by the spread about the mean, so
/// an uncentred norm form (errors ∝ u·d·10⁶) fails it by orders of magnitude.
#[test]
fn clouds_far_from_the_origin_keep_the_accuracy_of_centred_ones() {
    for d in [17, 100, 512] {
        for metric in [PointMetric::SqEuclidean, PointMetric::Euclidean] {
            check::<f64>(&case::<f64>(37, 70, d, metric, 1e3));
            check::<f32>(&case::<f32>(37, 70, d, metric, 1e3));
        }
    }
}

/// A solved problem at d = 64 and 512: the point-cloud solver's distance equals the dense
/// solver's on the brute-force cost (f64), and the f32 one is within f32's tolerance.
#[test]
fn solved_distances_match_the_dense_solver() {
    for d in [64, 512] {
        let k = case::<f32>(60, 75, d, PointMetric::SqEuclidean, 0.0);
        let mut r = Lcg(5);
        let mut w = |len: usize| {
            let v: Vec<f64> = (0..len).map(|_| r.uniform(0.5, 1.5)).collect();
            let s: f64 = v.iter().sum();
            ndarray::Array1::from_iter(v.into_iter().map(|a| a / s))
        };
        let (mu, nu) = (w(k.n), w(k.m));
        let params = SinkhornParams::new(k.eps);
        let (mu2, nu2) = (
            mu.view().insert_axis(Axis(0)),
            nu.view().insert_axis(Axis(0)),
        );
        let solver = SinkhornSolver::new(CpuBackend, params.clone());
        let cloud = solver
            .solve(
                &Problem::new(
                    mu2,
                    nu2,
                    PointCloudCost::new(k.x.view(), k.y.view()).unwrap(),
                )
                .unwrap(),
            )
            .unwrap();
        let dense = solver
            .solve(&Problem::new(mu2, nu2, k.c.view()).unwrap())
            .unwrap();
        assert!(cloud.convergence.converged && dense.convergence.converged);
        let (a, b) = (cloud.distance[0], dense.distance[0]);
        assert!((a - b).abs() <= 1e-10 * b, "d={d} f64: {a} vs {b}");
        let (x32, y32) = (k.x.mapv(|v| v as f32), k.y.mapv(|v| v as f32));
        let (mu32, nu32) = (mu.mapv(|v| v as f32), nu.mapv(|v| v as f32));
        let r32 = SinkhornSolver::new(CpuBackend, SinkhornParams::new(k.eps))
            .solve(
                &Problem::new(
                    mu32.view().insert_axis(Axis(0)),
                    nu32.view().insert_axis(Axis(0)),
                    PointCloudCost::new(x32.view(), y32.view()).unwrap(),
                )
                .unwrap(),
            )
            .unwrap();
        assert!(r32.convergence.converged, "d={d} f32");
        let a32 = r32.distance[0] as f64;
        assert!((a32 - b).abs() <= 2e-5 * b, "d={d} f32: {a32} vs {b}");
    }
}
