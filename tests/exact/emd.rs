//! Exact OT between histograms (`emd`) against POT's values (tests/data/make_pot_exact.py)
//! and brute force (every permutation; every integral plan of small integer masses), with
//! the certificate recomputed here from the plan and potentials handed back.

use logot::exact::{emd, EmdMethod, EmdParams, EmdResult, ExactMethod};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

fn npy<D: ndarray::Dimension>(name: &str) -> ndarray::Array<f64, D>
where
    ndarray::Array<f64, D>: ndarray_npy::ReadNpyExt,
{
    ndarray_npy::read_npy(format!("{DATA}/{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The packed problems of make_pot_exact.py: `(a, b, M)` each.
fn pot_problems() -> Vec<(Array1<f64>, Array1<f64>, Array2<f64>)> {
    let flat: Array1<f64> = npy("pot_exact_problems.npy");
    let flat = flat.to_vec();
    let mut out = Vec::new();
    let mut k = 0;
    while k < flat.len() {
        let (n, m) = (flat[k] as usize, flat[k + 1] as usize);
        k += 2;
        let a = Array1::from(flat[k..k + n].to_vec());
        k += n;
        let b = Array1::from(flat[k..k + m].to_vec());
        k += m;
        let c = Array2::from_shape_vec((n, m), flat[k..k + n * m].to_vec()).unwrap();
        k += n * m;
        out.push((a, b, c));
    }
    out
}

pub(super) fn params(method: EmdMethod) -> EmdParams {
    EmdParams::default().method(method)
}

/// Optimality proved here from what `r` hands back, by weak duality: the plan meets the
/// marginals (with `b` scaled to the mass of `a`), `f_i + g_j ≤ C_ij` for every pair, and
/// `⟨P, C⟩ = ⟨a, f⟩ + ⟨b, g⟩`; each within `tol` of the problem's scale. Returns the
/// dual value.
pub(super) fn check_optimal(
    a: ArrayView1<'_, f64>,
    b: ArrayView1<'_, f64>,
    c: ArrayView2<'_, f64>,
    r: &EmdResult,
    tol: f64,
) -> f64 {
    let (n, m) = c.dim();
    let scale_c = c.iter().fold(0.0f64, |x, v| x.max(v.abs())).max(1e-300);
    let mass = a.sum();
    let b = b.mapv(|v| v * mass / b.sum());
    let p = r.plan.to_dense();
    assert_eq!(p.dim(), (n, m));
    assert!(p.iter().all(|&v| v >= 0.0), "negative plan entry");
    assert!(
        r.plan.len() < n + m,
        "{} entries: not a basic plan",
        r.plan.len()
    );
    let row_err: f64 = (&p.sum_axis(Axis(1)) - &a).iter().map(|v| v.abs()).sum();
    let col_err: f64 = (&p.sum_axis(Axis(0)) - &b).iter().map(|v| v.abs()).sum();
    assert!(row_err <= tol * mass, "row marginals off by {row_err:e}");
    assert!(col_err <= tol * mass, "column marginals off by {col_err:e}");
    let mut primal = 0.0;
    for ((i, j), &v) in p.indexed_iter() {
        let slack = c[[i, j]] - r.f[i] - r.g[j];
        assert!(
            slack >= -tol * scale_c,
            "dual constraint ({i}, {j}) violated by {slack:e}"
        );
        if v > 0.0 {
            // Complementary slackness.
            assert!(
                slack.abs() <= tol * scale_c,
                "slack {slack:e} on the support at ({i}, {j})"
            );
        }
        primal += v * c[[i, j]];
    }
    let dual = a.dot(&r.f) + b.dot(&r.g);
    assert!(
        (primal - dual).abs() <= tol * scale_c * mass,
        "gap {:e} (primal {primal}, dual {dual})",
        (primal - dual).abs()
    );
    assert!(
        (primal - r.cost).abs() <= 1e-14 * scale_c * mass,
        "reported cost {} but the plan costs {primal}",
        r.cost
    );
    dual
}

pub(super) fn rel(x: f64, y: f64) -> f64 {
    (x - y).abs() / x.abs().max(y.abs()).max(1e-300)
}

#[test]
fn costs_equal_pot_on_its_problems() {
    let values: Array2<f64> = npy("pot_exact_values.npy");
    let problems = pot_problems();
    assert_eq!(problems.len(), values.nrows());
    for (k, (a, b, c)) in problems.iter().enumerate() {
        let (pot_cost, pot_dual, code) = (values[[k, 0]], values[[k, 1]], values[[k, 2]]);
        assert_eq!(code, 1.0, "POT did not solve problem {k}");
        let uniform_square =
            a.len() == b.len() && a.iter().all(|&v| v == a[0]) && b.iter().all(|&v| v == b[0]);
        let mut methods = vec![EmdMethod::Auto, EmdMethod::NetworkSimplex];
        if uniform_square {
            methods.push(EmdMethod::Assignment);
        }
        for method in methods {
            let r = emd(a.view(), b.view(), c.view(), &params(method)).unwrap();
            assert!(
                r.converged && r.exact,
                "problem {k} {method:?}: {:?}",
                r.certificate
            );
            assert!(
                rel(r.cost, pot_cost) <= 1e-12,
                "problem {k} {method:?}: cost {} against POT's {pot_cost} ({:e})",
                r.cost,
                rel(r.cost, pot_cost)
            );
            let dual = check_optimal(a.view(), b.view(), c.view(), &r, 1e-12);
            assert!(
                rel(dual, pot_dual) <= 1e-12,
                "problem {k}: dual {dual} against POT's {pot_dual}"
            );
            if method == EmdMethod::Assignment {
                assert_eq!(r.method, ExactMethod::Assignment);
            }
            // The certificate reports what is computed here.
            let cert = &r.certificate;
            assert!(cert.duality_gap <= 1e-12 * cert.max_abs_cost * cert.mass);
            assert!(rel(cert.dual, dual) <= 1e-12 || (cert.dual - dual).abs() <= 1e-15);
        }
    }
}

/// Every permutation of `0..n`, by Heap's algorithm.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    fn heap(k: usize, p: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if k <= 1 {
            out.push(p.clone());
            return;
        }
        for i in 0..k {
            heap(k - 1, p, out);
            let j = if k % 2 == 0 { i } else { 0 };
            p.swap(j, k - 1);
        }
    }
    let mut out = Vec::new();
    heap(n, &mut (0..n).collect(), &mut out);
    out
}

#[test]
fn uniform_problems_match_the_best_permutation() {
    let mut rng = StdRng::seed_from_u64(11);
    for n in 1..=7 {
        let perms = permutations(n);
        for trial in 0..6 {
            // Half the costs are small integers (ties, degenerate), half uniform reals.
            let c = Array2::from_shape_fn((n, n), |_| {
                if trial % 2 == 0 {
                    rng.random_range(0..4) as f64
                } else {
                    rng.random::<f64>()
                }
            });
            let best = perms
                .iter()
                .map(|p| p.iter().enumerate().map(|(i, &j)| c[[i, j]]).sum::<f64>())
                .fold(f64::INFINITY, f64::min)
                / n as f64;
            let w = Array1::from_elem(n, 1.0 / n as f64);
            for method in [EmdMethod::Assignment, EmdMethod::NetworkSimplex] {
                let r = emd(w.view(), w.view(), c.view(), &params(method)).unwrap();
                assert!(
                    (r.cost - best).abs() <= 1e-15 * n as f64,
                    "n = {n}, trial {trial}, {method:?}: {} against {best}",
                    r.cost
                );
                assert!(r.exact);
                check_optimal(w.view(), w.view(), c.view(), &r, 1e-13);
                // A permutation: n entries of 1/n.
                assert_eq!(r.plan.len(), n);
            }
        }
    }
}

/// The cheapest integral plan with row sums `a` and column sums `b` (small integers),
/// by enumerating every one (an integral optimum exists for integral masses).
fn best_integral_plan(a: &[u32], b: &[u32], c: &Array2<f64>) -> f64 {
    #[allow(clippy::too_many_arguments)]
    fn rec(
        i: usize,
        j: usize,
        left_row: u32,
        a: &[u32],
        cols: &mut Vec<u32>,
        c: &Array2<f64>,
        acc: f64,
        best: &mut f64,
    ) {
        let m = cols.len();
        if i == a.len() {
            if cols.iter().all(|&v| v == 0) {
                *best = best.min(acc);
            }
            return;
        }
        if j == m - 1 {
            // The last column takes what is left of the row.
            if left_row <= cols[j] {
                cols[j] -= left_row;
                let next = if i + 1 < a.len() { a[i + 1] } else { 0 };
                rec(
                    i + 1,
                    0,
                    next,
                    a,
                    cols,
                    c,
                    acc + left_row as f64 * c[[i, j]],
                    best,
                );
                cols[j] += left_row;
            }
            return;
        }
        for q in 0..=left_row.min(cols[j]) {
            cols[j] -= q;
            rec(
                i,
                j + 1,
                left_row - q,
                a,
                cols,
                c,
                acc + q as f64 * c[[i, j]],
                best,
            );
            cols[j] += q;
        }
    }
    let mut best = f64::INFINITY;
    rec(0, 0, a[0], a, &mut b.to_vec(), c, 0.0, &mut best);
    best
}

#[test]
fn weighted_problems_match_the_best_integral_plan() {
    let mut rng = StdRng::seed_from_u64(12);
    for trial in 0..40 {
        let n = rng.random_range(1..=4);
        let m = rng.random_range(1..=4);
        let a: Vec<u32> = (0..n).map(|_| rng.random_range(0..=4)).collect();
        let total: u32 = a.iter().sum();
        if total == 0 {
            continue;
        }
        // b: the same total split at random (zeros allowed).
        let mut b = vec![0u32; m];
        for _ in 0..total {
            b[rng.random_range(0..m)] += 1;
        }
        let c = Array2::from_shape_fn((n, m), |_| {
            if trial % 3 == 0 {
                rng.random_range(-2..3) as f64
            } else {
                rng.random::<f64>() * 2.0 - 0.5
            }
        });
        let best = best_integral_plan(&a, &b, &c);
        let af = Array1::from_iter(a.iter().map(|&v| v as f64));
        let bf = Array1::from_iter(b.iter().map(|&v| v as f64));
        let r = emd(af.view(), bf.view(), c.view(), &EmdParams::default()).unwrap();
        assert!(
            (r.cost - best).abs() <= 1e-13 * total as f64,
            "trial {trial}: a = {a:?}, b = {b:?}: {} against {best}",
            r.cost
        );
        assert!(r.exact, "trial {trial}: {:?}", r.certificate);
        check_optimal(af.view(), bf.view(), c.view(), &r, 1e-13);
        // Zero-mass bins carry no mass and keep their dual constraints.
        for (i, &ai) in a.iter().enumerate() {
            if ai == 0 {
                assert!(r.plan.rows.iter().all(|&k| k != i));
            }
        }
    }
}
