//! Exact (fused) Gromov–Wasserstein by conditional gradient against POT's
//! `gromov_wasserstein` and `fused_gromov_wasserstein` (tests/data/pot_gw_x_*.npy, written by
//! `tests/data/make_pot_gromov.py`), from the product plan. The linear step is the
//! library's network simplex and, for uniform weights on n = m points (an assignment
//! problem), also the Hungarian algorithm written here (an independent exact solver with
//! dual potentials). Also: the returned duals and the Frank–Wolfe gap against a brute-force
//! gradient.

use crate::{mat, vector};
use logot::gromov::{
    ConditionalGradient, ConditionalGradientParams, GromovProblem, GwLoss, LinearPlan,
};
use logot::CpuBackend;
use ndarray::{Array1, Array2, ArrayView2};

/// Minimum-cost assignment of a square cost by the Hungarian algorithm (shortest augmenting
/// paths with potentials): the column of each row and duals `u_i + v_j ≤ C_ij`, with
/// equality on the assignment.
fn hungarian(c: ArrayView2<'_, f64>) -> (Vec<usize>, Vec<f64>, Vec<f64>) {
    let n = c.nrows();
    assert_eq!(n, c.ncols());
    let inf = f64::INFINITY;
    let (mut u, mut v) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    let (mut p, mut way) = (vec![0usize; n + 1], vec![0usize; n + 1]);
    for i in 1..=n {
        p[0] = i;
        let mut j0 = 0;
        let mut minv = vec![inf; n + 1];
        let mut used = vec![false; n + 1];
        loop {
            used[j0] = true;
            let i0 = p[j0];
            let (mut delta, mut j1) = (inf, 0);
            for j in 1..=n {
                if !used[j] {
                    let cur = c[[i0 - 1, j - 1]] - u[i0] - v[j];
                    if cur < minv[j] {
                        minv[j] = cur;
                        way[j] = j0;
                    }
                    if minv[j] < delta {
                        delta = minv[j];
                        j1 = j;
                    }
                }
            }
            for j in 0..=n {
                if used[j] {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
            if p[j0] == 0 {
                break;
            }
        }
        loop {
            let j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
            if j0 == 0 {
                break;
            }
        }
    }
    let mut col = vec![0; n];
    for j in 1..=n {
        col[p[j] - 1] = j - 1;
    }
    (col, u[1..].to_vec(), v[1..].to_vec())
}

/// The exact OT solver of uniform square problems: the optimal permutation over `n`.
fn assignment(p: &[f64], q: &[f64], cost: ArrayView2<'_, f64>) -> logot::Result<LinearPlan> {
    let n = p.len();
    assert!(p
        .iter()
        .chain(q)
        .all(|&w| (w - 1.0 / n as f64).abs() < 1e-15));
    let (col, u, v) = hungarian(cost);
    let mut plan = Array2::zeros((n, n));
    for (i, &j) in col.iter().enumerate() {
        plan[[i, j]] = 1.0 / n as f64;
    }
    Ok(LinearPlan {
        plan,
        f: Array1::from(u),
        g: Array1::from(v),
    })
}

#[test]
fn hungarian_is_optimal_on_small_problems() {
    // Against every permutation of 6 points, and dual feasibility with a zero gap.
    let mut r = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        r = r
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((r >> 11) as f64) / ((1u64 << 53) as f64)
    };
    for _ in 0..5 {
        let c = Array2::from_shape_fn((6, 6), |_| next());
        let (col, u, v) = hungarian(c.view());
        let cost: f64 = col.iter().enumerate().map(|(i, &j)| c[[i, j]]).sum();
        let mut best = f64::INFINITY;
        let mut perm: Vec<usize> = (0..6).collect();
        permutations(&mut perm, 0, &mut |p| {
            best = best.min(p.iter().enumerate().map(|(i, &j)| c[[i, j]]).sum());
        });
        assert!((cost - best).abs() < 1e-12);
        for i in 0..6 {
            for j in 0..6 {
                assert!(u[i] + v[j] <= c[[i, j]] + 1e-12);
            }
        }
        assert!((u.iter().sum::<f64>() + v.iter().sum::<f64>() - cost).abs() < 1e-12);
    }
}

fn permutations(p: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
    if k == p.len() {
        f(p);
        return;
    }
    for i in k..p.len() {
        p.swap(k, i);
        permutations(p, k + 1, f);
        p.swap(k, i);
    }
}

/// `L(a, b)` written out independently of the library.
fn loss_of(loss: GwLoss, a: f64, b: f64) -> f64 {
    match loss {
        GwLoss::Square => (a - b).powi(2),
        _ => {
            let alog = if a == 0.0 { 0.0 } else { a * (a / b).ln() };
            alog - a + b
        }
    }
}

/// `∇_T Σ_ijkl L(C1_ik, C2_jl)·T_ij·T_kl` by brute force (both index pairs).
fn brute_gradient(
    loss: GwLoss,
    c1: &Array2<f64>,
    c2: &Array2<f64>,
    t: &Array2<f64>,
) -> Array2<f64> {
    let (n, m) = t.dim();
    Array2::from_shape_fn((n, m), |(i, j)| {
        let mut s = 0.0;
        for k in 0..n {
            for l in 0..m {
                s += (loss_of(loss, c1[[i, k]], c2[[j, l]])
                    + loss_of(loss, c1[[k, i]], c2[[l, j]]))
                    * t[[k, l]];
            }
        }
        s
    })
}

fn brute_value(loss: GwLoss, c1: &Array2<f64>, c2: &Array2<f64>, t: &Array2<f64>) -> f64 {
    0.5 * (brute_gradient(loss, c1, c2, t) * t).sum()
}

/// The linear step of a test: the Hungarian algorithm here (uniform square problems only) or
/// the library's network simplex.
#[derive(Clone, Copy, Debug)]
enum Linear {
    Hungarian,
    NetworkSimplex,
}

fn pot_case(case: &str, loss: GwLoss, linear: Linear) {
    let (c1, c2, m) = (mat(case, "c1"), mat(case, "c2"), mat(case, "m"));
    let (p, q) = (vector(case, "p"), vector(case, "q"));
    let want_plan = mat(case, "plan");
    let s = vector(case, "scalars");
    let (value, alpha, iters) = (s[0], s[1], s[2] as usize);
    let problem = if alpha < 1.0 {
        GromovProblem::fused(m.view(), c1.view(), c2.view(), p.view(), q.view(), alpha).unwrap()
    } else {
        GromovProblem::new(c1.view(), c2.view(), p.view(), q.view()).unwrap()
    };
    let params = ConditionalGradientParams::default().loss(loss);
    let solver = ConditionalGradient::new(CpuBackend, params);
    let r = match linear {
        Linear::Hungarian => solver.solve(&problem, &mut assignment),
        Linear::NetworkSimplex => {
            solver.solve(&problem, &mut logot::gromov::NetworkSimplex::default())
        }
    }
    .unwrap();
    let plan_err = r
        .plan
        .iter()
        .zip(want_plan.iter())
        .fold(0.0f64, |a, (x, y)| a.max((x - y).abs()));
    eprintln!(
        "{case} ({linear:?}): plan {plan_err:.2e}, value {} vs POT {value}, iterations {} vs {iters}, gap {:.2e}",
        r.value, r.report.iterations, r.report.gap
    );
    assert!(plan_err < 1e-12, "{case}: plan differs by {plan_err:e}");
    assert!(
        (r.value - value).abs() < 1e-10 * value.abs(),
        "{case}: value"
    );
    assert_eq!(r.report.iterations, iters, "{case}: iterations");
    let want_losses = vector(case, "losses");
    assert_eq!(r.report.losses.len(), want_losses.len());
    for (a, b) in r.report.losses.iter().zip(want_losses.iter()) {
        assert!(
            (a - b).abs() < 1e-10 * b.abs().max(1e-3),
            "{case}: losses {a} vs {b}"
        );
    }
    assert!(
        r.report.converged && r.report.marginal_error < 1e-14,
        "{case}: {:?}",
        r.report
    );
    // The value and the Frank–Wolfe gap from brute-force gradients and an independent LP.
    let t = &r.plan;
    let value_bf = alpha * brute_value(loss, &c1, &c2, t) + (1.0 - alpha) * (&m * t).sum();
    assert!(
        (value_bf - r.value).abs() < 1e-12 * value_bf.abs(),
        "{case}: value vs brute force"
    );
    let grad = brute_gradient(loss, &c1, &c2, t) * alpha + &m * (1.0 - alpha);
    // The returned duals are feasible for the brute-force gradient, and with them weak
    // duality gives the gap: ⟨∇F, G⟩ − ⟨p, f⟩ − ⟨q, g⟩.
    let scale = grad.iter().fold(0.0f64, |a, &b| a.max(b.abs()));
    let violation = (0..p.len())
        .flat_map(|i| (0..q.len()).map(move |j| (i, j)))
        .fold(0.0f64, |a, (i, j)| a.max(r.f[i] + r.g[j] - grad[[i, j]]));
    assert!(
        violation < 1e-12 * scale,
        "{case}: dual violation {violation:e}"
    );
    let gap_dual = (&grad * t).sum() - p.dot(&r.f) - q.dot(&r.g);
    assert!(
        gap_dual >= -1e-13 * scale && (gap_dual - r.report.gap).abs() < 1e-12 * scale,
        "{case}: gap {} vs {gap_dual}",
        r.report.gap
    );
    if matches!(linear, Linear::Hungarian) {
        let lp = assignment(p.as_slice().unwrap(), q.as_slice().unwrap(), grad.view()).unwrap();
        let gap = (&grad * &(t - &lp.plan)).sum();
        assert!(
            gap >= -1e-14 && (gap - r.report.gap).abs() < 1e-12,
            "{case}: gap {} vs {gap}",
            r.report.gap
        );
    }
}

#[test]
fn square_loss_matches_pot() {
    pot_case("x_sq", GwLoss::Square, Linear::Hungarian);
    pot_case("x_sq", GwLoss::Square, Linear::NetworkSimplex);
}

#[test]
fn fused_matches_pot() {
    pot_case("x_fused", GwLoss::Square, Linear::Hungarian);
    pot_case("x_fused", GwLoss::Square, Linear::NetworkSimplex);
}

#[test]
fn asymmetric_structures_match_pot() {
    pot_case("x_asym", GwLoss::Square, Linear::Hungarian);
    pot_case("x_asym", GwLoss::Square, Linear::NetworkSimplex);
}

#[test]
fn kl_loss_matches_pot() {
    pot_case("x_kl", GwLoss::Kl, Linear::Hungarian);
    pot_case("x_kl", GwLoss::Kl, Linear::NetworkSimplex);
}

/// Random weights on point sets of different sizes: the linear step is a transport
/// problem (not an assignment), solved by the network simplex as in POT.
#[test]
fn weighted_problems_match_pot_with_the_network_simplex() {
    pot_case("x_w_sq", GwLoss::Square, Linear::NetworkSimplex);
    pot_case("x_w_fused", GwLoss::Square, Linear::NetworkSimplex);
    pot_case("x_w_asym", GwLoss::Square, Linear::NetworkSimplex);
}

/// The envelope gradients with respect to `C1`, `C2` and `α` at an exact plan against
/// central differences of re-solved problems: at a vertex plan that stays optimal under
/// the perturbation the value is `F(T; C1, C2, α)` with `T` fixed, quadratic in each entry
/// for the square loss, so the difference is exact up to rounding.
#[test]
fn envelope_gradients_match_finite_differences_of_re_solved_problems() {
    for case in ["x_w_sq", "x_w_fused"] {
        let (c1, c2, m) = (mat(case, "c1"), mat(case, "c2"), mat(case, "m"));
        let (p, q) = (vector(case, "p"), vector(case, "q"));
        let alpha = vector(case, "scalars")[1];
        let solve = |c1: &Array2<f64>, c2: &Array2<f64>, alpha: f64| {
            let problem = if alpha < 1.0 {
                GromovProblem::fused(m.view(), c1.view(), c2.view(), p.view(), q.view(), alpha)
            } else {
                GromovProblem::new(c1.view(), c2.view(), p.view(), q.view())
            }
            .unwrap();
            let r = ConditionalGradient::new(CpuBackend, ConditionalGradientParams::default())
                .solve_network_simplex(&problem)
                .unwrap();
            let grad = logot::gromov::envelope_gradients(
                &CpuBackend,
                &problem,
                GwLoss::Square,
                r.plan.view(),
                r.f.view(),
                r.g.view(),
            )
            .unwrap();
            (r, grad)
        };
        let (r, grad) = solve(&c1, &c2, alpha);
        let h = 1e-6;
        let same_plan = |t: &Array2<f64>| {
            t.iter()
                .zip(r.plan.iter())
                .all(|(a, b)| (a - b).abs() < 1e-12)
        };
        // Symmetric pairs (the structures stay symmetric) and a diagonal entry.
        for (which, i, k) in [(1, 0, 3), (1, 2, 2), (2, 1, 4), (2, 0, 0)] {
            let bump = |c: &Array2<f64>, s: f64| {
                let mut c = c.clone();
                c[[i, k]] += s;
                if i != k {
                    c[[k, i]] += s;
                }
                c
            };
            let ((rp, _), (rm, _)) = if which == 1 {
                (
                    solve(&bump(&c1, h), &c2, alpha),
                    solve(&bump(&c1, -h), &c2, alpha),
                )
            } else {
                (
                    solve(&c1, &bump(&c2, h), alpha),
                    solve(&c1, &bump(&c2, -h), alpha),
                )
            };
            assert!(
                same_plan(&rp.plan) && same_plan(&rm.plan),
                "{case}: the plan moved"
            );
            let fd = (rp.value - rm.value) / (2.0 * h);
            let g = if which == 1 { &grad.c1 } else { &grad.c2 };
            let want = if i == k {
                g[[i, i]]
            } else {
                g[[i, k]] + g[[k, i]]
            };
            eprintln!("{case}: ∂/∂C{which}[{i}, {k}] {want:.6e}, central difference {fd:.6e}");
            assert!(
                (fd - want).abs() < 1e-7,
                "{case}: C{which}[{i}, {k}]: {fd} vs {want}"
            );
        }
        if alpha < 1.0 {
            let (rp, _) = solve(&c1, &c2, alpha + h);
            let (rm, _) = solve(&c1, &c2, alpha - h);
            assert!(
                same_plan(&rp.plan) && same_plan(&rm.plan),
                "{case}: the plan moved"
            );
            let fd = (rp.value - rm.value) / (2.0 * h);
            let want = grad.alpha.unwrap();
            eprintln!("{case}: ∂/∂α {want:.6e}, central difference {fd:.6e}");
            assert!((fd - want).abs() < 1e-7, "{case}: α: {fd} vs {want}");
        }
    }
}
