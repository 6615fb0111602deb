//! The honest-report property test shared by tests/sinkhorn/reports.rs (CPU) and
//! tests/cuda_reports.rs (CUDA): for a random valid problem with a cost offset, a
//! warm-start shift and a mass scale, the reported marginal error bounds the one recomputed
//! in f64 from what is returned (the plan, or the plan the potentials define).

use super::Lcg;
use logot::{Backend, Problem, Real, SinkhornParams, SinkhornSolver, WarmStart};
use ndarray::{Array1, Array2, ArrayView2, Axis};
use proptest::prelude::*;

/// `(‖P·1 − μ‖₁, ‖Pᵀ·1 − ν‖₁)` of a plan array, summed in f64.
pub fn plan_errors<T: Real>(p: ArrayView2<'_, T>, mu: &[f64], nu: &[f64]) -> (f64, f64) {
    let rows: f64 = p
        .rows()
        .into_iter()
        .zip(mu)
        .map(|(r, &a)| (r.iter().map(|v| v.f64()).sum::<f64>() - a).abs())
        .sum();
    let cols: f64 = p
        .columns()
        .into_iter()
        .zip(nu)
        .map(|(c, &b)| (c.iter().map(|v| v.f64()).sum::<f64>() - b).abs())
        .sum();
    (rows, cols)
}

/// The plan the potentials define, `exp((f_i + g_j − C_ij)/ε)`, evaluated in f64.
pub fn plan_of<T: Real>(f: &[T], g: &[T], cost: ArrayView2<'_, T>, eps: f64) -> Array2<f64> {
    Array2::from_shape_fn(cost.dim(), |(i, j)| {
        ((f[i].f64() + g[j].f64() - cost[[i, j]].f64()) / eps).exp()
    })
}

/// Uniform costs in [0, 1) plus `offset`, and positive random marginals of mass `mass`.
pub fn random_problem(
    rng: &mut Lcg,
    n: usize,
    m: usize,
    offset: f64,
    mass: f64,
) -> (Array1<f64>, Array1<f64>, Array2<f64>) {
    let cost = Array2::from_shape_fn((n, m), |_| rng.next() + offset);
    let mut mu = Array1::from_shape_fn(n, |_| rng.uniform(0.1, 1.0));
    let mut nu = Array1::from_shape_fn(m, |_| rng.uniform(0.1, 1.0));
    let (sa, sb) = (mu.sum(), nu.sum());
    mu.mapv_inplace(|v| v / sa * mass);
    nu.mapv_inplace(|v| v / sb * mass);
    (mu, nu, cost)
}

/// A random valid problem with a cost offset, a warm-start shift and a mass scale.
#[derive(Debug, Clone)]
pub struct Case {
    pub n: usize,
    pub m: usize,
    pub seed: u64,
    pub eps: f64,
    pub offset: f64,
    pub shift: f64,
    pub mass: f64,
    pub iters: usize,
}

/// Cases of `2..max_size` source and target points.
pub fn case(max_size: usize) -> impl Strategy<Value = Case> {
    (
        2usize..max_size,
        2usize..max_size,
        any::<u64>(),
        prop_oneof![Just(0.01), Just(0.05), Just(0.3)],
        prop_oneof![Just(0.0), Just(3.0), Just(-500.0), Just(1e4)],
        prop_oneof![Just(0.0), Just(1e3), Just(-1e8)],
        prop_oneof![Just(1.0), Just(1e-8), Just(1e6)],
        prop_oneof![Just(3usize), Just(40), Just(1000)],
    )
        .prop_map(|(n, m, seed, eps, offset, shift, mass, iters)| Case {
            n,
            m,
            seed,
            eps,
            offset,
            shift,
            mass,
            iters,
        })
}

fn f64s<T: Real>(a: &[T]) -> Vec<f64> {
    a.iter().map(|v| v.f64()).collect()
}

/// The case solved in precision `T` on `backend`: the error reported with the plan
/// bounds the plan's own, `converged` is that error against the tolerance, and the error
/// reported by a solve without a plan bounds that of the plan its potentials define (up to
/// the rounding of the potentials, where they can define it: f64, or no large offset).
pub fn check_case<T: Real, B: Backend<T> + Clone>(
    backend: &B,
    c: &Case,
) -> Result<(), TestCaseError> {
    let mut rng = Lcg(c.seed | 1);
    let (mu, nu, cost) = random_problem(&mut rng, c.n, c.m, c.offset, c.mass);
    let (mu_t, nu_t, cost_t) = (mu.mapv(T::of), nu.mapv(T::of), cost.mapv(T::of));
    let warm = WarmStart::new(
        Array2::from_elem((1, c.n), c.shift),
        Array2::from_elem((1, c.m), -c.shift),
    );
    let params = SinkhornParams::new(c.eps)
        .max_iters(c.iters)
        .warm_start(warm);
    let problem = Problem::new(mu_t.view(), nu_t.view(), cost_t.view()).unwrap();
    let solver = SinkhornSolver::new(backend.clone(), params);
    let (mu_h, nu_h) = (
        f64s(mu_t.as_slice().unwrap()),
        f64s(nu_t.as_slice().unwrap()),
    );
    // The returned plan: its own error is the report.
    let cpl = solver.coupling(&problem).unwrap();
    let (rows, cols) = plan_errors(cpl.plan.index_axis(Axis(0), 0), &mu_h, &nu_h);
    let rep = cpl.result.convergence.problems[0];
    prop_assert!(
        rep.marginal_error >= rows.max(cols) * (1.0 - 1e-12),
        "coupling reported {:e}, the plan has {:e} / {:e}",
        rep.marginal_error,
        rows,
        cols
    );
    let mass: f64 = nu_h.iter().sum();
    prop_assert_eq!(
        rep.converged,
        rep.marginal_error <= cpl.result.convergence.tol * mass
    );
    // Without a plan: the plan the returned potentials define, in f64. The potentials
    // carry the cost's offset; in f32 that offset costs them their precision, so the
    // check is made where the stored potentials can define the plan (f64, or no offset).
    if T::NAME == "float64" || c.offset.abs() < 10.0 {
        let r = solver.solve(&problem).unwrap();
        let p = plan_of(
            r.f.as_slice().unwrap(),
            r.g.as_slice().unwrap(),
            cost_t.view(),
            c.eps,
        );
        let (rows, cols) = plan_errors(p.view(), &mu_h, &nu_h);
        let slack = 8.0 * (c.offset.abs() + 1.0) * T::epsilon().f64() / c.eps * c.mass;
        let rep = r.convergence.problems[0];
        prop_assert!(
            rows.max(cols) <= rep.marginal_error * (1.0 + 1e-9) + slack,
            "solve reported {:e}, the potentials' plan has {:e} / {:e}",
            rep.marginal_error,
            rows,
            cols
        );
    }
    Ok(())
}
