//! Every library row (`L…`) of docs/input-checks.md: each case feeds one invalid input to a
//! public entry point and checks the error's variant and that its message names the
//! argument; a last check fails when a row of the table has no case here. Valid edge cases
//! (zero-mass bins, one-point supports, 1×1 matrices, zero matrices) are accepted.

mod common;

use logot::grad::{
    bistochastic, bistochastic_backward, check_gradient, numerical_gradient, BistochasticParams,
    CgParams, GradCheckParams, PlanGradients,
};
use logot::linalg::{
    align::rotation_angle, kabsch, matmul, matmul_backward, newton_schulz, newton_schulz_buffers,
    sq_euclidean_cost, svd3, svd3_batch, wasserstein_procrustes, Init, NewtonSchulzParams,
    ProcrustesMethod, RigidTransform, WassersteinProcrustesParams,
};
use logot::{
    Backend, BarycenterParams, BarycenterProblem, BarycenterSolver, CostSource, CpuBackend,
    EpsScaling, GridCost, PointCloudCost, Problem, Real, Relaxation, Result, Side, SinkhornParams,
    SinkhornResult, SinkhornSolver, WarmStart,
};
use ndarray::{array, Array1, Array2, Array3, Axis};
use std::collections::BTreeSet;

type Case = (&'static str, &'static str, &'static str, Result<()>);

/// The transport cost between weighted clouds: `wasserstein` with a `PointCloudCost`.
fn wasserstein_points<T: Real>(
    mu: ndarray::ArrayView1<'_, T>,
    nu: ndarray::ArrayView1<'_, T>,
    x: ndarray::ArrayView2<'_, T>,
    y: ndarray::ArrayView2<'_, T>,
    eps: T,
) -> Result<SinkhornResult<T>> {
    logot::wasserstein(mu, nu, PointCloudCost::new(x, y)?, eps)
}

/// The plan-only gradients at regularisation `eps` on the CPU.
fn plan_gradients(
    plan: ndarray::ArrayView3<'_, f64>,
    eps: f64,
    upstream: ndarray::ArrayView3<'_, f64>,
    cg: &CgParams,
) -> Result<PlanGradients<f64>> {
    SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps)).plan_gradients(plan, upstream, cg)
}

/// `(row id, expected variant, text the message must contain, outcome)`.
fn case<T>(id: &'static str, variant: &'static str, needle: &'static str, r: Result<T>) -> Case {
    (id, variant, needle, r.map(|_| ()))
}

fn uniform(n: usize) -> Array1<f64> {
    Array1::from_elem(n, 1.0 / n as f64)
}

fn cost(n: usize, m: usize) -> Array2<f64> {
    Array2::from_shape_fn((n, m), |(i, j)| ((i as f64) - (j as f64)).powi(2) / 16.0)
}

fn solve(mu: &Array1<f64>, nu: &Array1<f64>, c: &Array2<f64>, p: SinkhornParams) -> Result<()> {
    SinkhornSolver::new(CpuBackend, p).solve(&Problem::new(mu.view(), nu.view(), c.view())?)?;
    Ok(())
}

fn with_nan(mut a: Array1<f64>, k: usize, v: f64) -> Array1<f64> {
    a[k] = v;
    a
}

fn sinkhorn_rows() -> Vec<Case> {
    let (mu, nu, c) = (uniform(4), uniform(3), cost(4, 3));
    let p = || SinkhornParams::new(0.1);
    let neg = array![0.5, 0.5, 0.25, -0.25];
    let empty = Array1::<f64>::zeros(0);
    let mu2 = Array2::from_elem((2, 4), 0.25);
    let nu2 = Array2::from_elem((2, 3), 1.0 / 3.0);
    let costs3 = Array3::from_elem((3, 4, 3), 0.5);
    let mut v = vec![
        case(
            "L01",
            "Empty",
            "mu: empty input",
            Problem::new(empty.view(), nu.view(), c.view()),
        ),
        case(
            "L01",
            "Empty",
            "mu: empty input",
            Problem::new(
                Array2::<f64>::zeros((0, 4)).view(),
                Array2::<f64>::zeros((0, 3)).view(),
                c.view(),
            ),
        ),
        case(
            "L02",
            "NonFinite",
            "mu: non-finite value NaN",
            solve(&with_nan(mu.clone(), 1, f64::NAN), &nu, &c, p()),
        ),
        case(
            "L02",
            "NonFinite",
            "mu: non-finite value inf",
            solve(&with_nan(mu.clone(), 1, f64::INFINITY), &nu, &c, p()),
        ),
        case(
            "L02",
            "NonFinite",
            "mu: non-finite value inf at index sum",
            solve(&Array1::from_elem(4, 1e308), &nu, &c, p()),
        ),
        case(
            "L11",
            "UnequalMass",
            "mu sums to 4e-300, nu sums to 3e-300",
            solve(
                &Array1::from_elem(4, 1e-300),
                &Array1::from_elem(3, 1e-300),
                &c,
                p(),
            ),
        ),
        case(
            "L03",
            "NegativeMass",
            "mu: negative mass -0.25",
            solve(&neg, &nu, &c, p()),
        ),
        case(
            "L04",
            "ZeroMass",
            "mu: total mass is zero",
            solve(&Array1::zeros(4), &nu, &c, p()),
        ),
        case(
            "L05",
            "Empty",
            "nu: empty input",
            Problem::new(mu.view(), empty.view(), c.view()),
        ),
        case(
            "L05",
            "NonFinite",
            "nu: non-finite value -inf",
            solve(&mu, &with_nan(nu.clone(), 0, f64::NEG_INFINITY), &c, p()),
        ),
        case(
            "L05",
            "NegativeMass",
            "nu: negative mass",
            solve(&mu, &array![0.5, 1.0, -0.5], &c, p()),
        ),
        case(
            "L05",
            "ZeroMass",
            "nu: total mass is zero",
            solve(&mu, &Array1::zeros(3), &c, p()),
        ),
        case(
            "L06",
            "Shape",
            "nu: batch of 1 problems but mu has 2",
            Problem::new(mu2.view(), nu.view().insert_axis(Axis(0)), c.view()),
        ),
        case(
            "L07",
            "Empty",
            "cost: empty input",
            Problem::new(
                mu2.view(),
                nu2.view(),
                Array3::<f64>::zeros((0, 4, 3)).view(),
            ),
        ),
        case(
            "L08",
            "Shape",
            "cost: is 3×4 but mu has 4 and nu has 3",
            Problem::new(mu.view(), nu.view(), cost(3, 4).view()),
        ),
        case(
            "L09",
            "Shape",
            "cost: holds 3 matrices but there are 2 problems",
            Problem::new(mu2.view(), nu2.view(), costs3.view()),
        ),
        case("L10", "NonFinite", "cost: non-finite value NaN", {
            let mut c = c.clone();
            c[[2, 1]] = f64::NAN;
            solve(&mu, &nu, &c, p())
        }),
        case(
            "L11",
            "UnequalMass",
            "unequal total masses: mu sums to 1, nu sums to 2",
            solve(&mu, &(&nu * 2.0), &c, p()),
        ),
        // f32: a relative difference of 1e-3 is refused (tolerance 1e-5).
        case("L11", "UnequalMass", "unequal total masses", {
            let (m32, n32, c32) = (
                mu.mapv(|v| v as f32),
                nu.mapv(|v| v as f32 * 1.001),
                c.mapv(|v| v as f32),
            );
            Problem::new(m32.view(), n32.view(), c32.view()).and_then(|problem| {
                SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1))
                    .solve(&problem)
                    .map(|_| ())
            })
        }),
    ];
    for (rho, arg) in [
        (
            (0.0, 1.0),
            "relaxation.rho_mu = 0: the marginal penalty ρ must be > 0",
        ),
        ((1.0, f64::NAN), "relaxation.rho_nu = NaN"),
        ((-2.0, f64::INFINITY), "relaxation.rho_mu = -2"),
    ] {
        let problem = Problem::new(mu.view(), nu.view(), c.view())
            .unwrap()
            .relaxed(Relaxation::kl_each(rho.0, rho.1));
        let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1));
        v.push(case("L75", "Parameter", arg, solver.solve(&problem)));
    }
    // The Sinkhorn divergence of μ with itself on a cloud, relaxed by `r`, in `convention`.
    let divergence = |r: Relaxation, convention| {
        let x = ndarray::Array2::from_shape_fn((mu.len(), 2), |(i, k)| (i + k) as f64);
        let cost = PointCloudCost::new(x.view(), x.view()).unwrap();
        let problem = Problem::new(mu.view(), mu.view(), cost).unwrap().relaxed(r);
        SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1))
            .sinkhorn_divergence(&problem, convention)
            .map(|_| ())
    };
    v.push(case(
        "L76",
        "Parameter",
        "relaxation = Relaxation { rho_mu: 1.0, rho_nu: inf }: the unbalanced Sinkhorn divergence needs one penalty ρ on both marginals",
        divergence(
            Relaxation::kl_each(1.0, f64::INFINITY),
            logot::DivergenceConvention::Objective,
        ),
    ));
    v.push(case(
        "L76",
        "Parameter",
        "convention = Linear: the unbalanced Sinkhorn divergence debiases the unbalanced objective",
        divergence(Relaxation::kl(1.0), logot::DivergenceConvention::Linear),
    ));
    for eps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        v.push(case(
            "L12",
            "Parameter",
            "eps = ",
            solve(&mu, &nu, &c, SinkhornParams::new(eps)),
        ));
    }
    v.push(case(
        "L12",
        "Parameter",
        "eps = 0: the regularisation strength must be finite and > 0",
        logot::wasserstein(mu.view(), nu.view(), c.view(), 0.0),
    ));
    v.push(case(
        "L13",
        "Parameter",
        "max_iters = 0",
        solve(&mu, &nu, &c, SinkhornParams::new(0.1).fixed_iterations(0)),
    ));
    v.push(case(
        "L14",
        "Parameter",
        "check_every = 0",
        solve(&mu, &nu, &c, p().check_every(0)),
    ));
    for tol in [-1e-3, f64::NAN, f64::INFINITY] {
        v.push(case(
            "L15",
            "Parameter",
            "tol = ",
            solve(&mu, &nu, &c, p().tol(tol)),
        ));
    }
    let scaling =
        |start, factor| p().eps_scaling(EpsScaling::new(start).factor(factor).iters_per_stage(4));
    v.push(case(
        "L16",
        "Parameter",
        "eps_scaling.start = ",
        solve(&mu, &nu, &c, scaling(f64::NAN, 0.5)),
    ));
    for factor in [0.0, 1.0, 2.0, f64::NAN] {
        v.push(case(
            "L17",
            "Parameter",
            "eps_scaling.factor = ",
            solve(&mu, &nu, &c, scaling(1.0, factor)),
        ));
    }
    let warm = |f: Array2<f64>, g: Array2<f64>| p().warm_start(WarmStart::new(f, g));
    v.push(case(
        "L18",
        "Shape",
        "warm_start: f is (1, 3)",
        solve(
            &mu,
            &nu,
            &c,
            warm(Array2::zeros((1, 3)), Array2::zeros((1, 3))),
        ),
    ));
    let mut g = Array2::zeros((1, 3));
    g[[0, 1]] = f64::NAN;
    v.push(case(
        "L19",
        "NonFinite",
        "warm_start.g: non-finite value NaN at index (0, 1)",
        solve(&mu, &nu, &c, warm(Array2::zeros((1, 4)), g)),
    ));
    v
}

/// The B×n×m plan of two clouds of 2²⁰ points (4 TiB in f32) cannot be allocated: an error
/// before the solve starts, not an abort. Skipped (with a printed reason) only when the
/// kernel overcommits memory without limit (`vm.overcommit_memory = 1`).
fn impossible_plan_rows() -> Vec<Case> {
    let overcommit = std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
        .map(|s| s.trim() == "1")
        .unwrap_or(false);
    let n = 1 << 20;
    let x = Array2::from_shape_fn((n, 1), |(i, _)| i as f32 / n as f32);
    let w = Array1::from_elem(n, 1.0f32 / n as f32);
    let cloud = PointCloudCost::new(x.view(), x.view()).unwrap();
    let problem = Problem::new(
        w.view().insert_axis(Axis(0)),
        w.view().insert_axis(Axis(0)),
        cloud,
    )
    .unwrap();
    if overcommit {
        eprintln!("skipping L20: vm.overcommit_memory = 1 grants any allocation");
        return Vec::new();
    }
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1).fixed_iterations(1));
    vec![
        case(
            "L20",
            "OutOfMemory",
            "plan: out of memory: 1×1048576×1048576 values need 4398046511104 bytes",
            solver.coupling(&problem),
        ),
        case(
            "L20",
            "OutOfMemory",
            "plan: out of memory",
            solver.wasserstein_gradients(&problem, &CgParams::default()),
        ),
    ]
}

fn numerical_rows() -> Vec<Case> {
    // ε = 1e308: f + g overflows to −∞ and the marginal error goes NaN; reported, never
    // returned as a NaN distance.
    let (mu, nu) = (uniform(3), uniform(3));
    let c = cost(3, 3).mapv(|v| v + 0.5);
    let r = SinkhornSolver::new(CpuBackend, SinkhornParams::new(1e308).fixed_iterations(3))
        .solve(&Problem::new(mu.view(), nu.view(), c.view()).unwrap());
    vec![case("L21", "Numerical", "numerical failure", r)]
}

/// ε below one rounding unit of the largest cost: refused (the plan would be noise).
fn resolution_rows() -> Vec<Case> {
    let (mu, nu, c) = (uniform(4), uniform(3), cost(4, 3));
    let (m32, n32, c32) = (
        mu.mapv(|v| v as f32),
        nu.mapv(|v| v as f32),
        c.mapv(|v| v as f32),
    );
    let p32 = Problem::new(m32.view(), n32.view(), c32.view()).unwrap();
    let x = array![[0.0], [1.0], [2.0], [3.0]];
    let cloud = PointCloudCost::new(x.view(), x.view()).unwrap();
    let h = Array2::from_elem((2, 4), 0.25);
    vec![
        case(
            "L74",
            "Parameter",
            "eps = 1e-20: below the resolution of float64",
            solve(&mu, &nu, &c, SinkhornParams::new(1e-20)),
        ),
        case(
            "L74",
            "Parameter",
            "below the resolution of float32 for costs up to 5.625e-1",
            SinkhornSolver::new(CpuBackend, SinkhornParams::new(1e-9)).solve(&p32),
        ),
        case(
            "L74",
            "Parameter",
            "below the resolution of float64 for costs up to 9.000e0",
            SinkhornSolver::new(CpuBackend, SinkhornParams::new(1e-16)).solve(
                &Problem::new(
                    uniform(4).insert_axis(Axis(0)).view(),
                    uniform(4).insert_axis(Axis(0)).view(),
                    cloud,
                )
                .unwrap(),
            ),
        ),
        case(
            "L74",
            "Parameter",
            "below the resolution of float64",
            common::bary::barycenter(
                h.view(),
                array![0.5, 0.5].view(),
                c.dot(&c.t()).view(),
                &BarycenterParams::new(1e-300),
                None,
            ),
        ),
        case(
            "L74",
            "Parameter",
            "below the resolution of float64 for costs up to 2.000e0",
            common::bary::grid_barycenter(
                Array3::from_elem((2, 3, 3), 1.0 / 9.0).view(),
                array![0.5, 0.5].view(),
                &BarycenterParams::new(1e-300),
                None,
            ),
        ),
    ]
}

fn pointcloud_rows() -> Vec<Case> {
    let x = array![[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]];
    let y = array![[0.5, 0.5], [1.0, 1.0]];
    let y3 = array![[0.5, 0.5, 0.0]];
    let (a, b) = (uniform(3), uniform(2));
    let empty = Array2::<f64>::zeros((0, 2));
    let flat = Array2::<f64>::zeros((3, 0));
    let mut ynan = y.clone();
    ynan[[1, 0]] = f64::INFINITY;
    let p = SinkhornParams::new(0.1);
    // Two pairs of clouds (x and x + 1 against y).
    let x3 = ndarray::stack(Axis(0), &[x.view(), (&x + 1.0).view()]).unwrap();
    let y3b = ndarray::stack(Axis(0), &[y.view(), y.view()]).unwrap();
    let batched = PointCloudCost::batched(x3.view(), y3b.view()).unwrap();
    vec![
        case(
            "L22",
            "Empty",
            "x: empty input (a point cloud of 0 points in dimension 2)",
            PointCloudCost::new(empty.view(), y.view()),
        ),
        case(
            "L22",
            "Empty",
            "x: empty input (a point cloud of 3 points in dimension 0)",
            PointCloudCost::euclidean(flat.view(), flat.view()),
        ),
        case(
            "L23",
            "Shape",
            "y: points have 3 coordinates but those of x have 2",
            PointCloudCost::new(x.view(), y3.view()),
        ),
        case(
            "L24",
            "NonFinite",
            "y: non-finite value inf",
            wasserstein_points(a.view(), b.view(), x.view(), ynan.view(), 0.1),
        ),
        case(
            "L25",
            "Shape",
            "mu: has 2 weights for 3 points of x",
            wasserstein_points(b.view(), b.view(), x.view(), y.view(), 0.1),
        ),
        case(
            "L25",
            "Shape",
            "nu: has 3 weights for 2 points of y",
            wasserstein_points(a.view(), a.view(), x.view(), y.view(), 0.1),
        ),
        case(
            "L25",
            "Shape",
            "nu: has 3 weights for 2 points of y",
            Problem::new(
                ndarray::stack(Axis(0), &[a.view(), a.view()])
                    .unwrap()
                    .view(),
                ndarray::stack(Axis(0), &[a.view(), a.view()])
                    .unwrap()
                    .view(),
                batched.clone(),
            ),
        ),
        case("L75", "Parameter", "the costs overflow float32", {
            let far = array![[0.0f32, 0.0], [3e19, 0.0]];
            let w = array![0.5f32, 0.5];
            wasserstein_points(w.view(), w.view(), far.view(), far.view(), 1.0)
        }),
        case(
            "L75",
            "Parameter",
            "cost = max |C| = inf: the costs overflow float64",
            {
                let far = array![[-1e200, 0.0], [1e200, 0.0]];
                wasserstein_points(b.view(), b.view(), far.view(), y.view(), 1.0)
            },
        ),
        case(
            "L77",
            "Empty",
            "x: empty input (a batch of 0 point clouds)",
            PointCloudCost::batched(
                Array3::<f64>::zeros((0, 3, 2)).view(),
                Array3::<f64>::zeros((0, 2, 2)).view(),
            ),
        ),
        case(
            "L77",
            "Shape",
            "y: holds 1 point clouds but x holds 2",
            PointCloudCost::batched(x3.view(), y.view().insert_axis(Axis(0))),
        ),
        case(
            "L78",
            "Shape",
            "x: holds 2 pairs of point clouds but there are 1 problems",
            Problem::new(
                a.view().insert_axis(Axis(0)),
                b.view().insert_axis(Axis(0)),
                batched.clone(),
            ),
        ),
        case(
            "L26",
            "Shape",
            "mu: has 2 weights for 3 points of x",
            divergence(&p, b.view(), b.view(), x.view(), y.view()),
        ),
        case(
            "L26",
            "NegativeMass",
            "nu: negative mass",
            divergence(&p, a.view(), array![1.5, -0.5].view(), x.view(), y.view()),
        ),
        case(
            "L27",
            "Parameter",
            "warm_start = set",
            divergence(
                &p.clone()
                    .warm_start(WarmStart::new(Array2::zeros((1, 3)), Array2::zeros((1, 2)))),
                a.view(),
                b.view(),
                x.view(),
                y.view(),
            ),
        ),
    ]
}

/// The Sinkhorn divergence (objective convention, squared Euclidean) with `params`.
fn divergence(
    params: &SinkhornParams,
    mu: ndarray::ArrayView1<'_, f64>,
    nu: ndarray::ArrayView1<'_, f64>,
    x: ndarray::ArrayView2<'_, f64>,
    y: ndarray::ArrayView2<'_, f64>,
) -> logot::Result<()> {
    SinkhornSolver::new(CpuBackend, params.clone())
        .sinkhorn_divergence(
            &Problem::new(mu, nu, PointCloudCost::new(x, y)?)?,
            logot::DivergenceConvention::Objective,
        )
        .map(|_| ())
}

fn grid_rows() -> Vec<Case> {
    vec![
        case("L28", "Shape", "grid: shape []", GridCost::new(&[])),
        case(
            "L28",
            "Shape",
            "a grid has 1, 2 or 3 axes",
            GridCost::new(&[2, 2, 2, 2]),
        ),
        case("L29", "Empty", "grid: empty input", GridCost::image(4, 0)),
        case(
            "L30",
            "Shape",
            "has too many points",
            GridCost::new(&[usize::MAX, 2, 2]),
        ),
    ]
}

fn barycenter_rows() -> Vec<Case> {
    let h = Array2::from_elem((2, 4), 0.25);
    let w = array![0.5, 0.5];
    let c = cost(4, 4);
    let p = BarycenterParams::new(0.1);
    let bary = |h: &Array2<f64>, w: &Array1<f64>, c: &Array2<f64>, p: &BarycenterParams| {
        common::bary::barycenter(h.view(), w.view(), c.view(), p, None).map(|_| ())
    };
    let mut hnan = h.clone();
    hnan[[1, 2]] = f64::NAN;
    let mut hneg = h.clone();
    hneg[[0, 0]] = -0.25;
    hneg[[0, 1]] = 0.75;
    let mut hzero = h.clone();
    hzero.row_mut(1).fill(0.0);
    let mut hmass = h.clone();
    hmass.row_mut(1).fill(0.5);
    let mut cnan = c.clone();
    cnan[[0, 3]] = f64::NEG_INFINITY;
    let batch_cost = Array3::from_elem((1, 4, 4), 0.5);
    let x = array![[0.0], [1.0], [2.0], [3.0]];
    let cloud = PointCloudCost::new(x.view(), x.view()).unwrap();
    let mut v = vec![
        case(
            "L31",
            "Empty",
            "histograms: empty input",
            common::bary::barycenter(
                Array2::<f64>::zeros((0, 4)).view(),
                w.view(),
                c.view(),
                &p,
                None,
            ),
        ),
        case(
            "L31",
            "Empty",
            "histograms: empty input",
            BarycenterProblem::new(
                Array3::<f64>::zeros((0, 2, 4)).view(),
                Array2::<f64>::zeros((0, 2)).view(),
            )
            .and_then(|problem| {
                BarycenterSolver::new(CpuBackend, p.clone()).solve(&problem, c.view())
            }),
        ),
        case(
            "L32",
            "NonFinite",
            "histograms: non-finite value NaN",
            bary(&hnan, &w, &c, &p),
        ),
        case(
            "L32",
            "NegativeMass",
            "histograms: negative mass",
            bary(&hneg, &w, &c, &p),
        ),
        case(
            "L32",
            "ZeroMass",
            "histograms: total mass is zero",
            bary(&hzero, &w, &c, &p),
        ),
        case(
            "L33",
            "Parameter",
            "histograms = input 1 has mass 2, input 0 has 1",
            bary(&hmass, &w, &c, &p),
        ),
        case(
            "L34",
            "Shape",
            "weights: shape (1, 3), expected one weight per input histogram (1×2)",
            bary(&h, &array![0.2, 0.3, 0.5], &c, &p),
        ),
        case(
            "L35",
            "NonFinite",
            "weights: non-finite value NaN",
            bary(&h, &array![f64::NAN, 0.5], &c, &p),
        ),
        case(
            "L36",
            "Parameter",
            "weights = -0.5: weight 1 is negative",
            bary(&h, &array![1.5, -0.5], &c, &p),
        ),
        case(
            "L37",
            "Parameter",
            "weights must sum to 1",
            bary(&h, &array![0.5, 0.6], &c, &p),
        ),
        case(
            "L38",
            "NonFinite",
            "cost: non-finite value -inf",
            bary(&h, &w, &cnan, &p),
        ),
        case(
            "L39",
            "Shape",
            "cost: a barycenter needs one cost shared by its inputs",
            common::bary::barycenter(h.view(), w.view(), batch_cost.view(), &p, None),
        ),
        case(
            "L39",
            "Shape",
            "cost: a barycenter needs one cost shared by its inputs",
            common::bary::barycenter(h.view(), w.view(), cloud, &p, None),
        ),
        case(
            "L40",
            "Shape",
            "cost: has 3 rows but each histogram has 4 bins",
            bary(&h, &w, &cost(3, 4), &p),
        ),
        case(
            "L40",
            "Shape",
            "cost: the grid has 5 rows but each histogram has 4 bins",
            common::bary::barycenter(h.view(), w.view(), GridCost::new(&[5]).unwrap(), &p, None),
        ),
        case(
            "L41",
            "Parameter",
            "max_iters = 0",
            common::bary::grid_barycenter(
                Array3::from_elem((2, 3, 3), 1.0 / 9.0).view(),
                w.view(),
                &BarycenterParams::new(0.1).fixed_iterations(0),
                None,
            ),
        ),
    ];
    for (params, needle) in [
        (BarycenterParams::new(-1.0), "eps = -1"),
        (p.clone().check_every(0), "check_every = 0"),
        (p.clone().tol(f64::NAN), "tol = NaN"),
    ] {
        v.push(case("L41", "Parameter", needle, bary(&h, &w, &c, &params)));
    }
    for (r, needle) in [
        (Relaxation::kl(0.0), "relaxation.rho_mu = 0"),
        (
            Relaxation::kl_each(1.0, f64::NAN),
            "relaxation.rho_nu = NaN",
        ),
    ] {
        let got = common::bary::barycenter(h.view(), w.view(), c.view(), &p, Some(r));
        v.push(case("L41", "Parameter", needle, got));
    }
    v
}

fn gradient_rows() -> Vec<Case> {
    let (mu, nu, c) = (uniform(4), uniform(3), cost(4, 3));
    let problem = Problem::new(mu.view(), nu.view(), c.view()).unwrap();
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1));
    let cg = |max_iters, tol| CgParams::default().max_iters(max_iters).tol(tol);
    let plan = Array3::from_elem((1, 2, 2), 0.25);
    let up = Array3::from_elem((1, 2, 2), 1.0);
    let x = array![[0.0], [1.0], [2.0], [3.0]];
    let y = array![[0.0], [1.0], [2.0]];
    let cloud = PointCloudCost::new(x.view(), y.view()).unwrap();
    let cloud_problem = Problem::new(
        mu.view().insert_axis(Axis(0)),
        nu.view().insert_axis(Axis(0)),
        cloud,
    )
    .unwrap();
    let mut plan_nan = plan.clone();
    plan_nan[[0, 1, 1]] = f64::NAN;
    let mut plan_neg = plan.clone();
    plan_neg[[0, 0, 1]] = -0.25;
    vec![
        case(
            "L42",
            "Parameter",
            "cg.max_iters = 0",
            solver.wasserstein_gradients(&problem, &cg(0, None)),
        ),
        case(
            "L43",
            "Parameter",
            "cg.tol = -1",
            solver.wasserstein_gradients(&problem, &cg(100, Some(-1.0))),
        ),
        case(
            "L43",
            "Parameter",
            "cg.tol = NaN",
            solver.wasserstein_gradients(&problem, &cg(100, Some(f64::NAN))),
        ),
        case(
            "L44",
            "Shape",
            "upstream: is (1, 3, 4) but the plans are (1, 4, 3)",
            solver.implicit_gradients(&problem, |_| Array3::zeros((1, 3, 4)), &cg(100, None)),
        ),
        case(
            "L45",
            "NonFinite",
            "upstream: non-finite value inf",
            solver.implicit_gradients(
                &problem,
                |_| Array3::from_elem((1, 4, 3), f64::INFINITY),
                &cg(100, None),
            ),
        ),
        case(
            "L46",
            "Unavailable",
            "implicit OT gradients need a dense cost",
            solver.wasserstein_gradients(&cloud_problem, &cg(100, None)),
        ),
        case(
            "L47",
            "Empty",
            "plan: empty input",
            plan_gradients(
                Array3::<f64>::zeros((1, 0, 2)).view(),
                0.1,
                Array3::<f64>::zeros((1, 0, 2)).view(),
                &CgParams::default(),
            ),
        ),
        case(
            "L47",
            "NonFinite",
            "plan: non-finite value NaN",
            plan_gradients(plan_nan.view(), 0.1, up.view(), &CgParams::default()),
        ),
        case(
            "L47",
            "NegativeMass",
            "plan: negative mass",
            plan_gradients(plan_neg.view(), 0.1, up.view(), &CgParams::default()),
        ),
        case(
            "L47",
            "Parameter",
            "eps = 0",
            plan_gradients(plan.view(), 0.0, up.view(), &CgParams::default()),
        ),
        case(
            "L47",
            "Shape",
            "upstream: is (1, 2, 3) but the plan is (1, 2, 2)",
            plan_gradients(
                plan.view(),
                0.1,
                Array3::<f64>::zeros((1, 2, 3)).view(),
                &CgParams::default(),
            ),
        ),
    ]
}

fn bistochastic_rows() -> Vec<Case> {
    let x = Array3::from_shape_fn((2, 3, 3), |(b, i, j)| (b + i * j) as f64 * 0.3);
    let p = BistochasticParams::default();
    let r = bistochastic(x.view(), &p).unwrap().r;
    let g = Array3::from_elem((2, 3, 3), 1.0);
    let mut xnan = x.clone();
    xnan[[1, 2, 0]] = f64::NAN;
    let mut gnan = g.clone();
    gnan[[0, 0, 0]] = f64::INFINITY;
    let mut rneg = r.clone();
    rneg[[1, 1, 1]] = -0.1;
    let cg = CgParams::default();
    vec![
        case(
            "L48",
            "Parameter",
            "iters = 0: at least one iteration is needed",
            bistochastic(x.view(), &BistochasticParams::default().iters(0)),
        ),
        case(
            "L49",
            "Parameter",
            "tol = -1",
            bistochastic(x.view(), &BistochasticParams::default().iters(5).tol(-1.0)),
        ),
        case(
            "L50",
            "Empty",
            "x: empty input",
            bistochastic(Array3::<f64>::zeros((0, 3, 3)).view(), &p),
        ),
        case(
            "L50",
            "Empty",
            "x: empty input",
            bistochastic(Array3::<f64>::zeros((2, 0, 0)).view(), &p),
        ),
        case(
            "L51",
            "Shape",
            "x: holds 3×4 matrices; square matrices are needed",
            bistochastic(Array3::<f64>::zeros((1, 3, 4)).view(), &p),
        ),
        case(
            "L52",
            "Parameter",
            "x = 33×33 matrices: this backend handles n ≤ 32",
            bistochastic(Array3::<f64>::zeros((1, 33, 33)).view(), &p),
        ),
        case(
            "L53",
            "NonFinite",
            "x: non-finite value NaN",
            bistochastic(xnan.view(), &p),
        ),
        case(
            "L54",
            "Shape",
            "g: is (1, 3, 3) but r is (2, 3, 3)",
            bistochastic_backward(r.view(), g.slice(ndarray::s![..1, .., ..]), &cg),
        ),
        case(
            "L54",
            "Shape",
            "r: holds 3×2 matrices",
            bistochastic_backward(
                Array3::<f64>::zeros((1, 3, 2)).view(),
                Array3::<f64>::zeros((1, 3, 2)).view(),
                &cg,
            ),
        ),
        case(
            "L55",
            "NonFinite",
            "g: non-finite value inf",
            bistochastic_backward(r.view(), gnan.view(), &cg),
        ),
        case(
            "L55",
            "NegativeMass",
            "r: negative mass",
            bistochastic_backward(rneg.view(), g.view(), &cg),
        ),
    ]
}

fn linalg_rows() -> Vec<Case> {
    let a = Array2::from_shape_fn((5, 3), |(i, j)| {
        (i * 3 + j) as f64 * 0.1 + (i == j) as u8 as f64
    });
    let mut anan = a.clone();
    anan[[4, 2]] = f64::NAN;
    let b = Array2::from_elem((3, 2), 1.0);
    let ns = NewtonSchulzParams::default();
    let x = array![
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.0, 0.0, 1.0]
    ];
    let plan = Array2::from_elem((4, 4), 1.0 / 16.0);
    let wp = WassersteinProcrustesParams::default();
    let x2 = array![[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]];
    vec![
        case(
            "L56",
            "Shape",
            "a: expected B×M×3 (or M×3) matrices, got shape [1, 5, 4]",
            svd3(Array2::<f64>::zeros((5, 4)).view()),
        ),
        case(
            "L57",
            "Empty",
            "a: empty input",
            svd3_batch(&CpuBackend, Array3::<f64>::zeros((2, 0, 3)).view()),
        ),
        case(
            "L57",
            "Empty",
            "a: empty input",
            svd3_batch(&CpuBackend, Array3::<f64>::zeros((0, 4, 3)).view()),
        ),
        case(
            "L58",
            "NonFinite",
            "a: non-finite value NaN at index (0, 4, 2)",
            svd3(anan.view()),
        ),
        case(
            "L59",
            "Empty",
            "a: empty input",
            matmul(&CpuBackend, Array2::<f64>::zeros((0, 3)).view(), b.view()),
        ),
        case(
            "L59",
            "NonFinite",
            "a: non-finite value NaN",
            matmul(&CpuBackend, anan.view(), b.view()),
        ),
        case(
            "L60",
            "Shape",
            "b: has 5 rows but a (5×3) has 3 columns",
            matmul(&CpuBackend, a.view(), a.view()),
        ),
        case(
            "L61",
            "Shape",
            "dc: is 2×2 but C = A·B is 5×2",
            matmul_backward(
                &CpuBackend,
                a.view(),
                b.view(),
                Array2::<f64>::zeros((2, 2)).view(),
            ),
        ),
        case(
            "L62",
            "Shape",
            "y: points have 2 coordinates but those of x have 3",
            sq_euclidean_cost(&CpuBackend, a.view(), b.view()),
        ),
        case(
            "L63",
            "Empty",
            "x: empty input (shape 0×3)",
            newton_schulz(&CpuBackend, Array2::<f64>::zeros((0, 3)).view(), &ns),
        ),
        case(
            "L63",
            "NonFinite",
            "x: non-finite value NaN",
            logot::linalg::xxt(&CpuBackend, anan.view()),
        ),
        case(
            "L64",
            "Parameter",
            "coefficients = NaN: must be finite",
            newton_schulz(
                &CpuBackend,
                a.view(),
                &ns.clone().coefficients([3.0, f64::NAN, 1.0]),
            ),
        ),
        case(
            "L65",
            "Shape",
            "x: buffer of length 6 does not hold a 2×2 matrix",
            newton_schulz_buffers(&CpuBackend, &vec![1.0f64; 6], 2, 2, &ns),
        ),
        case(
            "L65",
            "Numerical",
            "is not finite",
            newton_schulz_buffers(&CpuBackend, &vec![f64::MAX; 4], 2, 2, &ns),
        ),
        case(
            "L66",
            "Shape",
            "plan: is 4×3 but x has 4 and y has 4 points",
            kabsch(
                x.view(),
                x.view(),
                Array2::<f64>::zeros((4, 3)).view(),
                true,
            ),
        ),
        case(
            "L66",
            "NegativeMass",
            "plan: negative mass",
            kabsch(x.view(), x.view(), (-&plan).view(), true),
        ),
        case(
            "L66",
            "ZeroMass",
            "plan: total mass is zero",
            kabsch(
                x.view(),
                x.view(),
                Array2::<f64>::zeros((4, 4)).view(),
                true,
            ),
        ),
        case(
            "L66",
            "Shape",
            "y: points have 2 coordinates but those of x have 3",
            logot::linalg::orthogonal_procrustes(x.view(), x2.view(), plan.view(), true, &ns),
        ),
        case(
            "L67",
            "Shape",
            "a, b: rotations must be 3×3",
            rotation_angle(x2.view(), x2.view()),
        ),
        case(
            "L67",
            "Shape",
            "x: points have 2 coordinates, the transform acts on 3",
            RigidTransform::<f64>::identity(3).apply(x2.view()),
        ),
        case(
            "L68",
            "Parameter",
            "eps_decay = 0: must lie in (0, 1]",
            wasserstein_procrustes(&CpuBackend, x.view(), x.view(), &wp.clone().eps_decay(0.0)),
        ),
        case(
            "L68",
            "Parameter",
            "sinkhorn_tol = 0",
            wasserstein_procrustes(
                &CpuBackend,
                x.view(),
                x.view(),
                &wp.clone().sinkhorn_tol(0.0),
            ),
        ),
        case(
            "L68",
            "Shape",
            "init: a start is (2, 2), expected 3×3",
            wasserstein_procrustes(
                &CpuBackend,
                x.view(),
                x.view(),
                &wp.clone().init(Init::Given(vec![Array2::eye(2)])),
            ),
        ),
        case(
            "L68",
            "Shape",
            "x: Kabsch needs 3-D points, got 2 coordinates",
            wasserstein_procrustes(
                &CpuBackend,
                x2.view(),
                x2.view(),
                &wp.clone().method(ProcrustesMethod::Kabsch),
            ),
        ),
        case(
            "L69",
            "Empty",
            "x: empty input",
            numerical_gradient(|v| v.iter().sum(), &[], 1e-6),
        ),
        case(
            "L69",
            "Parameter",
            "step = 0",
            numerical_gradient(|v| v.iter().sum(), &[1.0], 0.0),
        ),
        case(
            "L69",
            "Shape",
            "grad: has 1 entries but x has 2",
            check_gradient(
                |v| v.iter().sum(),
                &[1.0, 2.0],
                &[1.0],
                &GradCheckParams::default(),
            ),
        ),
        case(
            "L69",
            "Parameter",
            "rel_tol = -1",
            check_gradient(
                |v| v.iter().sum(),
                &[1.0],
                &[1.0],
                &GradCheckParams::default().rel_tol(-1.0).abs_floor(0.0),
            ),
        ),
    ]
}

fn backend_rows() -> Vec<Case> {
    let be = CpuBackend;
    let c = cost(4, 3);
    let prepared = Backend::<f64>::prepare_cost(&be, &CostSource::Dense(c.view())).unwrap();
    let f = be.filled(4, 0.0f64).unwrap();
    let log_nu = be.filled(3, (1.0f64 / 3.0).ln()).unwrap();
    let mut short = be.filled(2, 0.0f64).unwrap();
    let mut g = be.filled(3, 0.0f64).unwrap();
    vec![
        case(
            "L70",
            "Shape",
            "buffer length",
            be.sinkstep(&prepared, Side::Col, 0.1, &f, &log_nu, &mut short),
        ),
        case(
            "L70",
            "Shape",
            "sinkstep: potential of length 2",
            be.sinkstep(&prepared, Side::Col, 0.1, &short, &log_nu, &mut g),
        ),
        case(
            "L70",
            "Shape",
            "gemm: A",
            logot::linalg::LinalgKernels::<f64>::gemm(
                &be,
                logot::linalg::GemmShape::new(2, 2, 2),
                1.0,
                &vec![1.0; 3],
                &vec![1.0; 4],
                0.0,
                &mut vec![0.0; 4],
            ),
        ),
    ]
}

/// The CUDA rows (L71–L73) in a CUDA build on a machine without a GPU: the backend is
/// refused as unavailable. With a GPU (or in a build without CUDA) they are tested by
/// tests/cuda_reliability.rs, which the coverage check below reads.
fn cuda_rows() -> Vec<Case> {
    #[cfg(feature = "cuda")]
    {
        use logot::backend::cuda::CudaBackend;
        if let Err(e) = CudaBackend::new() {
            return vec![case("L71", "Unavailable", "", Err::<(), _>(e))];
        }
    }
    Vec::new()
}

/// The row ids of a section (`L` or `C`) of docs/input-checks.md.
pub fn table_ids(prefix: char) -> BTreeSet<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/input-checks.md"))
        .expect("docs/input-checks.md");
    doc.lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(' ').next())
        .filter(|id| id.starts_with(prefix) && id[1..].chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_library_row_is_refused_with_its_error() {
    let mut cases = sinkhorn_rows();
    cases.extend(impossible_plan_rows());
    cases.extend(numerical_rows());
    cases.extend(resolution_rows());
    cases.extend(pointcloud_rows());
    cases.extend(grid_rows());
    cases.extend(barycenter_rows());
    cases.extend(gradient_rows());
    cases.extend(bistochastic_rows());
    cases.extend(linalg_rows());
    cases.extend(backend_rows());
    cases.extend(cuda_rows());
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    for (id, variant, needle, r) in cases {
        seen.insert(id.to_string());
        match r {
            Ok(()) => failures.push(format!("{id}: accepted (expected {variant} {needle:?})")),
            Err(e) => {
                let debug = format!("{e:?}");
                let msg = e.to_string();
                if !debug.starts_with(variant) || !msg.contains(needle) {
                    failures.push(format!(
                        "{id}: got {debug} / {msg:?}, expected {variant} containing {needle:?}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    let table = table_ids('L');
    assert!(table.len() >= 70, "the table lost rows: {table:?}");
    // Rows tested on a GPU machine by tests/cuda_reliability.rs (named there).
    let cuda_tests = include_str!("cuda_reliability.rs");
    for id in ["L71", "L72", "L73"] {
        if cuda_tests.contains(&format!("\"{id}\"")) {
            seen.insert(id.to_string());
        }
    }
    if std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
        .map(|s| s.trim() == "1")
        .unwrap_or(false)
    {
        seen.insert("L20".into());
    }
    let untested: Vec<_> = table.difference(&seen).collect();
    assert!(untested.is_empty(), "rows without a test: {untested:?}");
    let unknown: Vec<_> = seen.difference(&table).collect();
    assert!(
        unknown.is_empty(),
        "tests for rows not in the table: {unknown:?}"
    );
}

/// Valid edge cases are accepted: zero-mass bins, one-point supports, a 1×1 bistochastic
/// matrix, a zero matrix for Newton–Schulz, masses equal within the tolerance.
#[test]
fn valid_edge_cases_are_accepted() {
    // Zero-mass bins on both sides: the distance equals the problem without those bins.
    let mu = array![0.0, 0.5, 0.5, 0.0];
    let nu = array![0.25, 0.0, 0.75];
    let c = cost(4, 3);
    let full = logot::wasserstein(mu.view(), nu.view(), c.view(), 0.1).unwrap();
    let sub_c = c.select(Axis(0), &[1, 2]).select(Axis(1), &[0, 2]);
    let sub = logot::wasserstein(
        array![0.5, 0.5].view(),
        array![0.25, 0.75].view(),
        sub_c.view(),
        0.1,
    )
    .unwrap();
    assert!((full.distance[0] - sub.distance[0]).abs() < 1e-9);
    // One point against one point: the distance is the one cost entry.
    let one = logot::wasserstein(
        array![2.0].view(),
        array![2.0].view(),
        array![[0.7]].view(),
        0.01,
    )
    .unwrap();
    assert!(
        (one.distance[0] - 1.4f64).abs() < 1e-12,
        "{}",
        one.distance[0]
    );
    // One point against many: the plan is the target marginal.
    let plan = logot::coupling(
        array![1.0].view(),
        uniform(3).view(),
        cost(1, 3).view(),
        0.1,
    )
    .unwrap()
    .plan;
    assert!((plan.index_axis(Axis(0), 0).row(0).to_owned() - uniform(3))
        .iter()
        .all(|d| d.abs() < 1e-12));
    // Masses equal within the f64 tolerance (relative 1e-9).
    logot::wasserstein(mu.view(), (&nu * (1.0 + 1e-12)).view(), c.view(), 0.1).unwrap();
    // A 1×1 bistochastic matrix is 1.
    let r = bistochastic(array![[[3.0]]].view(), &BistochasticParams::default()).unwrap();
    assert_eq!(r.r[[0, 0, 0]], 1.0);
    // Newton–Schulz of a zero matrix is zero; of a 1×1 matrix, close to ±1.
    let z = newton_schulz(
        &CpuBackend,
        Array2::<f64>::zeros((3, 2)).view(),
        &NewtonSchulzParams::default(),
    )
    .unwrap();
    assert!(z.iter().all(|&v| v == 0.0));
    // svd3 of a rank-deficient 1×3 matrix.
    let s = svd3(array![[3.0, 0.0, 4.0]].view()).unwrap();
    assert!((s.s[0] - 5.0f64).abs() < 1e-12 && s.s[1].abs() < 1e-12f64);
    // A barycenter of one input is that input, and of inputs with zero-mass bins.
    let h = array![[0.0, 0.5, 0.5, 0.0], [0.5, 0.5, 0.0, 0.0]];
    let b = common::bary::barycenter(
        h.view(),
        array![1.0, 0.0].view(),
        cost(4, 4).view(),
        &BarycenterParams::new(0.01),
        None,
    )
    .unwrap();
    assert!(b.histogram.iter().all(|v| v.is_finite()));
    // A grid of one point.
    GridCost::new(&[1]).unwrap();
    // Points in one dimension, one point each.
    wasserstein_points(
        array![1.0].view(),
        array![1.0].view(),
        array![[0.0]].view(),
        array![[2.0]].view(),
        0.1,
    )
    .unwrap();
}
