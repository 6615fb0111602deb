//! Exact OT on the line (`emd_1d`, `emd2_1d`, `wasserstein_1d` and gradients) against
//! POT's values (tests/data/make_pot_exact_1d.py), brute force over permutations, an
//! optimality proof computed here by weak duality, closed forms and finite differences.

use logot::exact::{
    emd2_1d, emd_1d, wasserstein_1d, wasserstein_1d_batch, wasserstein_1d_grad, Metric,
};
use logot::Error;
use ndarray::{array, Array1, Array2, ArrayView1};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

fn npy1(name: &str) -> Array1<f64> {
    ndarray_npy::read_npy(format!("{DATA}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}
fn npy2(name: &str) -> Array2<f64> {
    ndarray_npy::read_npy(format!("{DATA}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The packed problems of make_pot_exact_1d.py: `(x_a, x_b, a, b)` each.
fn pot_problems() -> Vec<[Array1<f64>; 4]> {
    let flat = npy1("pot_exact_1d_problems.npy");
    let mut out = Vec::new();
    let mut k = 0;
    while k < flat.len() {
        let (n, m) = (flat[k] as usize, flat[k + 1] as usize);
        k += 2;
        let mut take = |len: usize| {
            let v = flat.slice(ndarray::s![k..k + len]).to_owned();
            k += len;
            v
        };
        let xa = take(n);
        let xb = take(m);
        let a = take(n);
        let b = take(m);
        out.push([xa, xb, a, b]);
    }
    out
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(f64::MIN_POSITIVE)
}

fn h(metric: Metric, t: f64) -> f64 {
    match metric {
        Metric::SqEuclidean => t * t,
        Metric::EuclideanPow(p) => t.abs().powf(p),
    }
}

/// Weak duality, computed here from the returned plan and potentials alone: the plan meets
/// the marginals, `f_i + g_j ≤ C_ij` on every pair and `⟨P, C⟩ = ⟨a, f⟩ + ⟨b, g⟩`, each
/// within `tol` relative to the scale of the costs, which proves the plan optimal.
fn assert_proven_optimal(
    xa: ArrayView1<f64>,
    xb: ArrayView1<f64>,
    a: &[f64],
    b: &[f64],
    metric: Metric,
    r: &logot::exact::EmdResult,
    tol: f64,
) {
    let (n, m) = (xa.len(), xb.len());
    let c = |i: usize, j: usize| h(metric, xa[i] - xb[j]);
    let cmax = (0..n)
        .flat_map(|i| (0..m).map(move |j| (i, j)))
        .map(|(i, j)| c(i, j))
        .fold(0.0, f64::max)
        .max(1e-300);
    let (mut rows, mut cols, mut primal) = (vec![0.0; n], vec![0.0; m], 0.0);
    for (i, j, p) in r.plan.iter() {
        assert!(p > 0.0);
        rows[i] += p;
        cols[j] += p;
        primal += p * c(i, j);
        // Complementary slackness on the support.
        assert!(
            (c(i, j) - r.f[i] - r.g[j]).abs() <= tol * cmax,
            "slack at ({i}, {j})"
        );
    }
    for i in 0..n {
        assert!(
            (rows[i] - a[i]).abs() <= tol,
            "row {i}: {} vs {}",
            rows[i],
            a[i]
        );
    }
    for j in 0..m {
        assert!(
            (cols[j] - b[j]).abs() <= tol,
            "col {j}: {} vs {}",
            cols[j],
            b[j]
        );
    }
    for i in 0..n {
        for j in 0..m {
            assert!(
                r.f[i] + r.g[j] <= c(i, j) + tol * cmax,
                "dual violation at ({i}, {j}): {}",
                r.f[i] + r.g[j] - c(i, j)
            );
        }
    }
    let dual: f64 =
        (0..n).map(|i| a[i] * r.f[i]).sum::<f64>() + (0..m).map(|j| b[j] * r.g[j]).sum::<f64>();
    assert!((primal - dual).abs() <= tol * cmax, "gap {}", primal - dual);
    assert!(rel(r.cost, primal) <= 1e-13 || (r.cost - primal).abs() <= 1e-15 * cmax);
    assert!(
        r.plan.len() < n + m,
        "a basic plan has at most n + m − 1 entries"
    );
}

/// Costs equal POT's `emd2_1d` (three metrics) and `wasserstein_1d` (p = 1, 2, 3) to 1e-12
/// relative on the six stored problems (weighted n ≠ m, tied positions and zero weights,
/// uniform, equal cumulative weights, a rescaled b, 500×350 Cauchy-tailed).
#[test]
fn values_match_pot() {
    let vals = npy2("pot_exact_1d_values.npy");
    let probs = pot_problems();
    assert_eq!(probs.len(), vals.nrows());
    for (k, [xa, xb, a, b]) in probs.iter().enumerate() {
        let metrics = [
            Metric::SqEuclidean,
            Metric::EuclideanPow(1.5),
            Metric::EuclideanPow(1.0),
        ];
        for (t, &metric) in metrics.iter().enumerate() {
            let got =
                emd2_1d(xa.view(), xb.view(), Some(a.view()), Some(b.view()), metric).unwrap();
            let want = vals[[k, t]];
            assert!(
                rel(got, want) <= 1e-12,
                "problem {k} metric {metric:?}: {got} vs {want}"
            );
            let full =
                emd_1d(xa.view(), xb.view(), Some(a.view()), Some(b.view()), metric).unwrap();
            assert_eq!(full.cost, got);
            assert!(
                full.exact && full.converged,
                "problem {k}: {:?}",
                full.certificate
            );
        }
        for (t, p) in [1.0, 2.0, 3.0].into_iter().enumerate() {
            let got =
                wasserstein_1d(xa.view(), xb.view(), Some(a.view()), Some(b.view()), p).unwrap();
            let want = vals[[k, 3 + t]];
            assert!(
                rel(got, want) <= 1e-12,
                "problem {k} p = {p}: {got} vs {want}"
            );
        }
    }
}

/// The dense plans equal POT's `emd_1d` (same walk; problems without tied positions) to
/// rounding.
#[test]
fn plans_match_pot() {
    let probs = pot_problems();
    for (k, name) in [(0, "plan0"), (1, "plan1"), (3, "plan3"), (4, "plan4")] {
        let [xa, xb, a, b] = &probs[k];
        let want = npy2(&format!("pot_exact_1d_{name}.npy"));
        let r = emd_1d(
            xa.view(),
            xb.view(),
            Some(a.view()),
            Some(b.view()),
            Metric::SqEuclidean,
        )
        .unwrap();
        let got = r.plan.to_dense();
        let diff = (&got - &want)
            .mapv(f64::abs)
            .fold(0.0, |m: f64, v| m.max(*v));
        assert!(diff <= 1e-15, "problem {k}: max |ΔP| = {diff:e}");
    }
}

/// Every stored problem and seeded random ones (n, m up to 60, zero weights, ties) are
/// proven optimal by weak duality computed here, and their certificates are ≤ 1e-12.
#[test]
fn results_are_proven_optimal_by_duality() {
    let mut cases: Vec<[Array1<f64>; 4]> = pot_problems();
    let mut rng = StdRng::seed_from_u64(11);
    for t in 0..40 {
        let (n, m) = (rng.random_range(1..60), rng.random_range(1..60));
        let grid = (t % 3 == 0) as u8 as f64; // every third problem on a coarse grid: ties
        let pos = |rng: &mut StdRng, len: usize| -> Array1<f64> {
            Array1::from_shape_fn(len, |_| {
                let v: f64 = rng.random::<f64>() * 4.0 - 2.0;
                if grid > 0.0 {
                    (v * 2.0).round() / 2.0
                } else {
                    v
                }
            })
        };
        let w = |rng: &mut StdRng, len: usize| -> Array1<f64> {
            let mut v = Array1::from_shape_fn(len, |_| {
                if rng.random::<f64>() < 0.2 {
                    0.0
                } else {
                    rng.random::<f64>()
                }
            });
            v[rng.random_range(0..len)] += 0.5;
            &v / v.sum()
        };
        let (xa, xb) = (pos(&mut rng, n), pos(&mut rng, m));
        let (a, b) = (w(&mut rng, n), w(&mut rng, m));
        cases.push([xa, xb, a, b]);
    }
    for (k, [xa, xb, a, b]) in cases.iter().enumerate() {
        for metric in [
            Metric::SqEuclidean,
            Metric::EuclideanPow(1.0),
            Metric::EuclideanPow(2.7),
        ] {
            let r = emd_1d(xa.view(), xb.view(), Some(a.view()), Some(b.view()), metric).unwrap();
            let bs: Vec<f64> = (b * (a.sum() / b.sum())).to_vec();
            assert_proven_optimal(
                xa.view(),
                xb.view(),
                a.as_slice().unwrap(),
                &bs,
                metric,
                &r,
                1e-12,
            );
            let c = &r.certificate;
            let scale = c.max_abs_cost.max(1e-300);
            assert!(
                c.duality_gap <= 1e-12 * scale && c.max_violation <= 1e-12 * scale,
                "case {k} {metric:?}: {c:?}"
            );
            // The potentials are centred: ⟨a, f⟩ = ⟨b, g⟩.
            let fa: f64 = a.iter().zip(&r.f).map(|(w, f)| w * f).sum();
            let gb: f64 = bs.iter().zip(&r.g).map(|(w, g)| w * g).sum();
            assert!((fa - gb).abs() <= 1e-12 * scale.max(fa.abs()));
        }
    }
}

/// Uniform weights, n = m ≤ 7: the cost equals the minimum over all n! matchings.
#[test]
fn uniform_problems_match_brute_force_over_permutations() {
    fn perms(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut out = Vec::new();
        for p in perms(n - 1) {
            for k in 0..=p.len() {
                let mut q = p.clone();
                q.insert(k, n - 1);
                out.push(q);
            }
        }
        out
    }
    let mut rng = StdRng::seed_from_u64(5);
    for n in 1..=7 {
        for metric in [
            Metric::SqEuclidean,
            Metric::EuclideanPow(1.0),
            Metric::EuclideanPow(1.3),
        ] {
            let xa = Array1::from_shape_fn(n, |_| rng.random::<f64>() * 10.0 - 5.0);
            let xb = Array1::from_shape_fn(n, |_| rng.random::<f64>() * 10.0 - 3.0);
            let best = perms(n)
                .iter()
                .map(|s| (0..n).map(|i| h(metric, xa[i] - xb[s[i]])).sum::<f64>() / n as f64)
                .fold(f64::INFINITY, f64::min);
            let got = emd2_1d(xa.view(), xb.view(), None, None, metric).unwrap();
            assert!(
                rel(got, best) <= 1e-13,
                "n = {n} {metric:?}: {got} vs {best}"
            );
        }
    }
}

/// Closed forms: a translation by t costs |t|^p for every p; uniform n = m is the sorted
/// matching `Σ |x_(k) − y_(k)|^p / n`, computed here with the standard sort.
#[test]
fn closed_forms_on_the_line() {
    let mut rng = StdRng::seed_from_u64(3);
    let x = Array1::from_shape_fn(1000, |_| rng.random::<f64>() * 3.0);
    for (t, p) in [(0.75, 1.0), (-2.0, 2.0), (0.3, 3.5)] {
        let y = &x + t;
        let w = wasserstein_1d(x.view(), y.view(), None, None, p).unwrap();
        assert!(
            rel(w, f64::abs(t).powf(p)) <= 1e-12,
            "t = {t}, p = {p}: {w}"
        );
    }
    let y = Array1::from_shape_fn(1000, |_| rng.random::<f64>().powi(3) * 4.0 - 1.0);
    let (mut xs, mut ys) = (x.to_vec(), y.to_vec());
    xs.sort_by(f64::total_cmp);
    ys.sort_by(f64::total_cmp);
    for p in [1.0, 2.0, 1.7] {
        let want = xs
            .iter()
            .zip(&ys)
            .map(|(a, b)| (a - b).abs().powf(p))
            .sum::<f64>()
            / 1000.0;
        let got = wasserstein_1d(x.view(), y.view(), None, None, p).unwrap();
        assert!(rel(got, want) <= 1e-12, "p = {p}: {got} vs {want}");
    }
}

/// Above 4·2²⁰ pairs the dual violation is found by the monotone search: on 2500×2000
/// points (weighted, ties) it equals the brute-force maximum over every pair computed here.
#[test]
fn large_certificate_matches_every_pair() {
    let mut rng = StdRng::seed_from_u64(8);
    let (n, m) = (2500, 2000);
    let xa = Array1::from_shape_fn(n, |_| (rng.random::<f64>() * 200.0).round() / 20.0);
    let xb = Array1::from_shape_fn(m, |_| rng.random::<f64>() * 12.0 - 1.0);
    let a = Array1::from_shape_fn(n, |_| rng.random::<f64>() + 0.01);
    let b = Array1::from_shape_fn(m, |_| rng.random::<f64>() + 0.01);
    let (a, b) = (&a / a.sum(), &b / b.sum());
    for metric in [Metric::SqEuclidean, Metric::EuclideanPow(1.0)] {
        let r = emd_1d(xa.view(), xb.view(), Some(a.view()), Some(b.view()), metric).unwrap();
        let mut worst = f64::NEG_INFINITY;
        for i in 0..n {
            for j in 0..m {
                worst = worst.max(r.f[i] + r.g[j] - h(metric, xa[i] - xb[j]));
            }
        }
        let c = &r.certificate;
        assert!(
            (c.max_violation - worst.max(0.0)).abs() <= 1e-12 * c.max_abs_cost,
            "{metric:?}: {} vs {worst}",
            c.max_violation
        );
        assert!(r.exact, "{c:?}");
    }
}

/// Position gradients equal central differences (distinct points, p = 1.5, 2, 3; weighted,
/// n ≠ m), and the weight gradients are the potentials: along a mass-preserving direction
/// `a_i += t, a_k −= t` the value changes by `(f_i − f_k)·t`.
#[test]
fn gradients_match_finite_differences() {
    let mut rng = StdRng::seed_from_u64(21);
    let (n, m) = (9, 7);
    let xa = Array1::from_shape_fn(n, |_| rng.random::<f64>() * 4.0);
    let xb = Array1::from_shape_fn(m, |_| rng.random::<f64>() * 4.0 + 0.5);
    let a = Array1::from_shape_fn(n, |_| rng.random::<f64>() + 0.2);
    let b = Array1::from_shape_fn(m, |_| rng.random::<f64>() + 0.2);
    let (a, b) = (&a / a.sum(), &b / b.sum());
    for p in [1.5, 2.0, 3.0] {
        let val = |xa: &Array1<f64>, xb: &Array1<f64>, a: &Array1<f64>, b: &Array1<f64>| {
            wasserstein_1d(xa.view(), xb.view(), Some(a.view()), Some(b.view()), p).unwrap()
        };
        let g =
            wasserstein_1d_grad(xa.view(), xb.view(), Some(a.view()), Some(b.view()), p).unwrap();
        assert!(rel(g.value, val(&xa, &xb, &a, &b)) <= 1e-14);
        let e = 1e-6;
        for i in 0..n {
            let (mut up, mut dn) = (xa.clone(), xa.clone());
            up[i] += e;
            dn[i] -= e;
            let fd = (val(&up, &xb, &a, &b) - val(&dn, &xb, &a, &b)) / (2.0 * e);
            assert!(
                (fd - g.grad_u_values[i]).abs() <= 1e-7,
                "p {p} u[{i}]: {fd} vs {}",
                g.grad_u_values[i]
            );
        }
        for j in 0..m {
            let (mut up, mut dn) = (xb.clone(), xb.clone());
            up[j] += e;
            dn[j] -= e;
            let fd = (val(&xa, &up, &a, &b) - val(&xa, &dn, &a, &b)) / (2.0 * e);
            assert!(
                (fd - g.grad_v_values[j]).abs() <= 1e-7,
                "p {p} v[{j}]: {fd} vs {}",
                g.grad_v_values[j]
            );
        }
        // Weights: the value is piecewise linear in them; a small step stays on one piece.
        let t = 1e-7;
        for (i, k) in [(0, 1), (3, 8), (5, 2)] {
            let (mut up, mut dn) = (a.clone(), a.clone());
            up[i] += t;
            up[k] -= t;
            dn[i] -= t;
            dn[k] += t;
            let fd = (val(&xa, &xb, &up, &b) - val(&xa, &xb, &dn, &b)) / (2.0 * t);
            let want = g.grad_u_weights[i] - g.grad_u_weights[k];
            assert!(
                (fd - want).abs() <= 1e-6 * (1.0 + want.abs()),
                "p {p} a[{i}]−a[{k}]: {fd} vs {want}"
            );
        }
        for (j, k) in [(0, 6), (2, 3)] {
            let (mut up, mut dn) = (b.clone(), b.clone());
            up[j] += t;
            up[k] -= t;
            dn[j] -= t;
            dn[k] += t;
            let fd = (val(&xa, &xb, &a, &up) - val(&xa, &xb, &a, &dn)) / (2.0 * t);
            let want = g.grad_v_weights[j] - g.grad_v_weights[k];
            assert!(
                (fd - want).abs() <= 1e-6 * (1.0 + want.abs()),
                "p {p} b[{j}]−b[{k}]: {fd} vs {want}"
            );
        }
    }
}

/// A batch gives each row's own value, bit for bit, and names the problem of a bad row.
#[test]
fn batches_are_rows_of_single_problems() {
    let mut rng = StdRng::seed_from_u64(4);
    let u = Array2::from_shape_fn((6, 30), |_| rng.random::<f64>());
    let v = Array2::from_shape_fn((6, 20), |_| rng.random::<f64>() * 2.0);
    let uw = Array2::from_shape_fn((6, 30), |_| rng.random::<f64>() + 0.1);
    let uw = &uw / &uw.sum_axis(ndarray::Axis(1)).insert_axis(ndarray::Axis(1));
    let got = wasserstein_1d_batch(u.view(), v.view(), Some(uw.view()), None, 1.5).unwrap();
    for k in 0..6 {
        let one = wasserstein_1d(u.row(k), v.row(k), Some(uw.row(k)), None, 1.5).unwrap();
        assert_eq!(got[k], one);
    }
    let mut bad = v.clone();
    bad[[4, 3]] = f64::NAN;
    let e = wasserstein_1d_batch(u.view(), bad.view(), None, None, 1.0).unwrap_err();
    assert!(
        matches!(&e, Error::NonFinite { arg, .. } if arg == "v_values[4]"),
        "{e}"
    );
    let e =
        wasserstein_1d_batch(u.view(), v.slice(ndarray::s![..5, ..]), None, None, 1.0).unwrap_err();
    assert!(
        matches!(&e, Error::Shape { arg, .. } if arg == "v_values"),
        "{e}"
    );
}

/// f32 inputs are accepted and give the f64 result of the same (rounded) numbers.
#[test]
fn f32_inputs_compute_in_f64() {
    let x = array![0.1f32, 0.7, 0.3];
    let y = array![1.0f32, -0.5];
    let got = emd2_1d(x.view(), y.view(), None, None, Metric::SqEuclidean).unwrap();
    let want = emd2_1d(
        x.mapv(f64::from).view(),
        y.mapv(f64::from).view(),
        None,
        None,
        Metric::SqEuclidean,
    )
    .unwrap();
    assert_eq!(got, want);
}

/// Every bad input is an error naming its argument.
#[test]
fn bad_inputs_name_their_argument() {
    let x = array![0.0, 1.0, 2.0];
    let y = array![0.5, 1.5];
    let a = array![0.2, 0.3, 0.5];
    let b = array![0.5, 0.5];
    let e = Array1::<f64>::zeros(0);
    let sq = Metric::SqEuclidean;
    let name = |r: logot::Result<f64>| -> String {
        match r.unwrap_err() {
            Error::Empty { arg, .. }
            | Error::NonFinite { arg, .. }
            | Error::NegativeMass { arg, .. }
            | Error::ZeroMass { arg, .. }
            | Error::Shape { arg, .. }
            | Error::Parameter { arg, .. } => arg,
            Error::UnequalMass { .. } => "masses".into(),
            other => panic!("unexpected {other}"),
        }
    };
    assert_eq!(name(emd2_1d(e.view(), y.view(), None, None, sq)), "x_a");
    assert_eq!(name(emd2_1d(x.view(), e.view(), None, None, sq)), "x_b");
    assert_eq!(
        name(emd2_1d(
            array![0.0, f64::NAN].view(),
            y.view(),
            None,
            None,
            sq
        )),
        "x_a"
    );
    assert_eq!(
        name(emd2_1d(
            x.view(),
            array![f64::INFINITY].view(),
            None,
            None,
            sq
        )),
        "x_b"
    );
    assert_eq!(
        name(emd2_1d(x.view(), y.view(), Some(b.view()), None, sq)),
        "a"
    );
    assert_eq!(
        name(emd2_1d(
            x.view(),
            y.view(),
            Some(a.view()),
            Some(a.view()),
            sq
        )),
        "b"
    );
    assert_eq!(
        name(emd2_1d(
            x.view(),
            y.view(),
            Some(array![0.5, -0.1, 0.6].view()),
            None,
            sq
        )),
        "a"
    );
    assert_eq!(
        name(emd2_1d(
            x.view(),
            y.view(),
            Some(array![0.0, 0.0, 0.0].view()),
            None,
            sq
        )),
        "a"
    );
    assert_eq!(
        name(emd2_1d(
            x.view(),
            y.view(),
            None,
            Some(array![0.5, f64::NAN].view()),
            sq
        )),
        "b"
    );
    assert_eq!(
        name(emd2_1d(
            x.view(),
            y.view(),
            Some(a.view()),
            Some(array![0.5, 0.6].view()),
            sq
        )),
        "masses"
    );
    assert_eq!(
        name(emd2_1d(
            x.view(),
            y.view(),
            None,
            None,
            Metric::EuclideanPow(0.5)
        )),
        "metric"
    );
    assert_eq!(
        name(emd2_1d(
            x.view(),
            y.view(),
            None,
            None,
            Metric::EuclideanPow(f64::NAN)
        )),
        "metric"
    );
    assert_eq!(
        name(wasserstein_1d(x.view(), y.view(), None, None, 0.99)),
        "p"
    );
    assert_eq!(
        name(wasserstein_1d(e.view(), y.view(), None, None, 1.0)),
        "u_values"
    );
    assert_eq!(
        name(wasserstein_1d(
            x.view(),
            y.view(),
            None,
            Some(a.view()),
            1.0
        )),
        "v_weights"
    );
    assert!(emd_1d(
        x.view(),
        y.view(),
        Some(a.view()),
        Some(array![0.5, 0.6].view()),
        sq
    )
    .unwrap_err()
    .to_string()
    .contains("unequal total masses"));
    // Masses within 1e-6 relative are accepted and b is rescaled to a's mass.
    let b_close = &b * (1.0 + 5e-7);
    let r = emd_1d(x.view(), y.view(), Some(a.view()), Some(b_close.view()), sq).unwrap();
    assert!((r.plan.mass.iter().sum::<f64>() - 1.0).abs() < 1e-15);
}
