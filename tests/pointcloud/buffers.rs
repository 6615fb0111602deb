//! Point-cloud OT on a batch already on the backend (`SinkhornSolver::prepare` of a
//! `BufferProblem::points`, `solve_prepared` with the point gradients and potentials asked
//! for): the path a framework's device tensors take. On the CPU backend it must give the
//! host-array path's (`SinkhornSolver::point_gradients`) `OT_ε`, potentials,
//! distances, reports and point gradients bit for bit — one pair, a shared pair for a batch
//! of weights, one pair per problem; d ≤ 16 and d > 16; both metrics; f32 and f64 — and refuse
//! bad input with the host path's errors.
use crate::common;

use common::{bin_weights, Lcg};
use logot::{
    Backend, BufferOutputs, BufferProblem, CloudLayout, CpuBackend, DivergenceConvention,
    PointCloudCost, PointMetric, Problem, Real, Relaxation, SinkhornParams, SinkhornSolver,
};
use ndarray::{Array2, Array3, Axis};

/// A seeded batch: `b` rows of weights on each side (the first bin of each empty when
/// `zeros`), and clouds `x` (`pairs×n×d`) in `[2, 3)^d`, `y` (`pairs×m×d`) in `[2.1, 3.1)^d`
/// (far enough from the origin that the CUDA backend's centring matters).
struct Clouds<T> {
    mu: Array2<T>,
    nu: Array2<T>,
    x: Array3<T>,
    y: Array3<T>,
    batched: bool,
    metric: PointMetric,
    /// The relaxation of the marginals (`None`: balanced).
    relaxation: Option<Relaxation>,
}

fn clouds<T: Real>(
    b: usize,
    (n, m, d): (usize, usize, usize),
    batched: bool,
    metric: PointMetric,
) -> Clouds<T> {
    let mut r = Lcg(3 + (b * 131 + n * 17 + m * 5 + d) as u64);
    let pairs = if batched { b } else { 1 };
    Clouds {
        mu: bin_weights(b, n, 1, 7 + n as u64).mapv(T::of),
        nu: bin_weights(b, m, 0, 11 + m as u64).mapv(T::of),
        x: Array3::from_shape_fn((pairs, n, d), |_| T::of(r.uniform(2.0, 3.0))),
        y: Array3::from_shape_fn((pairs, m, d), |_| T::of(r.uniform(2.1, 3.1))),
        batched,
        metric,
        relaxation: None,
    }
}

impl<T: Real> Clouds<T> {
    fn cost(&self) -> PointCloudCost<'_, T> {
        if self.batched {
            PointCloudCost::batched_with_metric(self.x.view(), self.y.view(), self.metric)
        } else {
            PointCloudCost::with_metric(
                self.x.index_axis(Axis(0), 0),
                self.y.index_axis(Axis(0), 0),
                self.metric,
            )
        }
        .unwrap()
    }

    /// The problem on the host arrays, relaxed as these clouds are.
    fn problem(&self) -> logot::Result<Problem<'_, T>> {
        let p = Problem::new(self.mu.view(), self.nu.view(), self.cost())?;
        Ok(match self.relaxation {
            Some(r) => p.relaxed(r),
            None => p,
        })
    }

    /// The problem on the buffers `[μ, ν, x, y]`, relaxed as these clouds are.
    fn on_backend<'c>(&self, [mu, nu, x, y]: &'c mut [Vec<T>; 4]) -> BufferProblem<'c, Vec<T>> {
        let (mu, nu) = (std::mem::take(mu), std::mem::take(nu));
        let p = BufferProblem::points(mu, nu, x, y, self.mu.nrows(), self.layout());
        match self.relaxation {
            Some(r) => p.relaxed(r),
            None => p,
        }
    }

    /// `[μ, ν, x, y]` in CPU backend buffers.
    fn uploaded(&self) -> logot::Result<[Vec<T>; 4]> {
        let up = |a: &Array3<T>| CpuBackend.upload(&flat(a.iter().copied()));
        let up2 = |a: &Array2<T>| CpuBackend.upload(&flat(a.iter().copied()));
        Ok([up2(&self.mu)?, up2(&self.nu)?, up(&self.x)?, up(&self.y)?])
    }

    fn layout(&self) -> CloudLayout {
        let (pairs, n, d) = self.x.dim();
        CloudLayout {
            n,
            m: self.y.dim().1,
            d,
            batch: self.batched.then_some(pairs),
            metric: self.metric,
            precision: Default::default(),
        }
    }
}

fn flat<T: Clone>(a: impl IntoIterator<Item = T>) -> Vec<T> {
    a.into_iter().collect()
}

/// The buffer path's outputs, or its error.
#[allow(clippy::type_complexity)]
fn on_buffers<T: Real>(
    solver: &SinkhornSolver<CpuBackend>,
    c: &Clouds<T>,
) -> logot::Result<(logot::BufferResult, [Vec<T>; 4])> {
    let be = solver.backend();
    let (b, n) = c.mu.dim();
    let (m, d) = (c.nu.ncols(), c.x.dim().2);
    let mut bufs = c.uploaded()?;
    let prepared = solver.prepare(c.on_backend(&mut bufs))?;
    let nan = T::nan();
    let (mut f, mut g) = (be.filled(b * n, nan)?, be.filled(b * m, nan)?);
    let (mut gx, mut gy) = (be.filled(b * n * d, nan)?, be.filled(b * m * d, nan)?);
    let out = solver.solve_prepared(&prepared, outputs(&mut f, &mut g, &mut gx, &mut gy))?;
    Ok((out, [f, g, gx, gy]))
}

/// The outputs of a point-gradient solve: potentials and point gradients.
fn outputs<'o, T>(
    f: &'o mut Vec<T>,
    g: &'o mut Vec<T>,
    gx: &'o mut Vec<T>,
    gy: &'o mut Vec<T>,
) -> BufferOutputs<'o, Vec<T>> {
    BufferOutputs::new()
        .potentials(f, g)
        .point_gradients(gx, gy)
}

fn bits<T: Real>(v: &[T]) -> Vec<u64> {
    v.iter().map(|x| x.f64().to_bits()).collect()
}

fn check_equal<T: Real>(solver: &SinkhornSolver<CpuBackend>, c: &Clouds<T>, what: &str) {
    let host = solver.point_gradients(&c.problem().unwrap()).unwrap();
    let (out, [f, g, gx, gy]) = on_buffers(solver, c).unwrap();
    let value: Vec<T> = out
        .value
        .as_ref()
        .unwrap()
        .iter()
        .map(|&v| T::of(v))
        .collect();
    assert_eq!(
        bits(&value),
        bits(host.value.as_slice().unwrap()),
        "{what}: OT_ε"
    );
    assert_eq!(
        bits(&f),
        bits(&flat(host.result.f.iter().copied())),
        "{what}: f"
    );
    assert_eq!(
        bits(&g),
        bits(&flat(host.result.g.iter().copied())),
        "{what}: g"
    );
    assert_eq!(bits(&gx), bits(&flat(host.x.iter().copied())), "{what}: ∂x");
    assert_eq!(bits(&gy), bits(&flat(host.y.iter().copied())), "{what}: ∂y");
    let distance: Vec<T> = out.distance.iter().map(|&v| T::of(v)).collect();
    assert_eq!(
        bits(&distance),
        bits(host.result.distance.as_slice().unwrap()),
        "{what}: ⟨P, C⟩"
    );
    assert_eq!(
        format!("{:?}", out.convergence),
        format!("{:?}", host.result.convergence),
        "{what}: report"
    );
    // Not trivially equal: a real solve with moving points.
    assert!(host.result.convergence.iterations > 1, "{what}");
    assert!(host.x.iter().any(|v| v.f64().abs() > 1e-3), "{what}");
}

fn all_cases<T: Real>(eps_f32: f64) {
    for metric in [PointMetric::SqEuclidean, PointMetric::Euclidean] {
        for d in [3, 17] {
            let eps = eps_f32 * d as f64 / 6.0;
            let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(eps));
            for (b, batched) in [(1, false), (2, false), (3, true)] {
                let c = clouds::<T>(b, (9, 7, d), batched, metric);
                let what = format!("{} {metric:?} d={d} B={b} batched={batched}", T::NAME);
                check_equal(&solver, &c, &what);
            }
        }
    }
}

#[test]
fn buffers_give_the_host_path_bit_for_bit_f64() {
    all_cases::<f64>(0.05);
}

#[test]
fn buffers_give_the_host_path_bit_for_bit_f32() {
    all_cases::<f32>(0.05);
}

#[test]
fn eps_scaling_and_unbalanced_solves_match_too() {
    let c = clouds::<f64>(2, (8, 6, 2), true, PointMetric::SqEuclidean);
    let max_cost = c.cost().max_cost();
    let annealed = SinkhornParams::new(1e-3).eps_scaling(c.cost().eps_scaling());
    check_equal(&SinkhornSolver::new(CpuBackend, annealed), &c, "ε-scaling");
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05));
    let relaxed = Clouds {
        relaxation: Some(Relaxation::kl(0.5)),
        ..clouds::<f64>(2, (8, 6, 2), true, PointMetric::SqEuclidean)
    };
    check_equal(&solver, &relaxed, "unbalanced");
    // The prepared batch reports the clouds' largest cost (the ε-scaling's start).
    let mut bufs = c.uploaded().unwrap();
    let prepared = solver.prepare(c.on_backend(&mut bufs)).unwrap();
    assert_eq!(prepared.max_cost(), max_cost);
}

/// The host path's error for the same data (the cost is built first, as a caller would).
fn host_error<T: Real>(solver: &SinkhornSolver<CpuBackend>, c: &Clouds<T>) -> String {
    let cost = if c.batched {
        PointCloudCost::batched_with_metric(c.x.view(), c.y.view(), c.metric)
    } else {
        PointCloudCost::with_metric(
            c.x.index_axis(Axis(0), 0),
            c.y.index_axis(Axis(0), 0),
            c.metric,
        )
    };
    let e = cost
        .and_then(|cost| Problem::new(c.mu.view(), c.nu.view(), cost))
        .and_then(|p| solver.point_gradients(&p).map(|_| ()))
        .unwrap_err();
    e.to_string()
}

#[test]
fn bad_input_gives_the_host_path_errors() {
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1));
    let base = || clouds::<f64>(2, (5, 4, 3), true, PointMetric::SqEuclidean);
    type Spoil = Box<dyn Fn(&mut Clouds<f64>)>;
    let cases: Vec<(&str, Spoil)> = vec![
        ("NaN in x", Box::new(|c| c.x[[1, 2, 0]] = f64::NAN)),
        ("∞ in y", Box::new(|c| c.y[[0, 3, 2]] = f64::INFINITY)),
        ("negative weight", Box::new(|c| c.mu[[1, 2]] = -0.1)),
        ("NaN weight", Box::new(|c| c.nu[[0, 1]] = f64::NAN)),
        ("unequal masses", Box::new(|c| c.nu[[1, 0]] += 0.5)),
    ];
    for (what, spoil) in cases {
        let mut c = base();
        spoil(&mut c);
        let want = host_error(&solver, &c);
        let got = on_buffers(&solver, &c).map(|_| ()).unwrap_err().to_string();
        assert_eq!(got, want, "{what}");
    }
    // Shapes: lengths against the layout, and pairs against problems.
    let c = base();
    let be = solver.backend();
    let up = |a: &[f64]| be.upload(a).unwrap();
    let (mu, nu) = (flat(c.mu.iter().copied()), flat(c.nu.iter().copied()));
    let (x, y) = (flat(c.x.iter().copied()), flat(c.y.iter().copied()));
    let prepare = |mu: &[f64], nu: &[f64], x: &[f64], y: &[f64], batch, layout| {
        let (x, y) = (up(x), up(y));
        solver
            .prepare::<f64>(BufferProblem::points(up(mu), up(nu), &x, &y, batch, layout))
            .map(|_| ())
    };
    let e = prepare(&mu, &nu, &x[1..], &y, 2, c.layout()).unwrap_err();
    assert!(
        matches!(&e, logot::Error::Shape { arg, .. } if arg == "x"),
        "{e}"
    );
    let e = prepare(&mu[5..], &nu[4..], &x, &y, 1, c.layout()).unwrap_err();
    assert!(
        matches!(&e, logot::Error::Shape { arg, .. } if arg == "x")
            && e.to_string()
                .contains("holds 2 pairs of point clouds but there are 1 problems"),
        "{e}"
    );
    // Outputs of the wrong length are refused, naming them.
    let (xb, yb) = (up(&x), up(&y));
    let prepared = solver
        .prepare::<f64>(BufferProblem::points(
            up(&mu),
            up(&nu),
            &xb,
            &yb,
            2,
            c.layout(),
        ))
        .unwrap();
    let z = |len: usize| be.filled(len, 0.0).unwrap();

    let (mut f, mut g, mut gx, mut gy) = (z(10), z(8), z(30), z(24));
    for (arg, lens) in [
        ("f", [9, 8, 30, 24]),
        ("g", [10, 9, 30, 24]),
        ("grad_x", [10, 8, 29, 24]),
        ("grad_y", [10, 8, 30, 25]),
    ] {
        let [mut f2, mut g2, mut gx2, mut gy2] = lens.map(z);
        let e = solver
            .solve_prepared(&prepared, outputs(&mut f2, &mut g2, &mut gx2, &mut gy2))
            .unwrap_err();
        assert!(
            matches!(&e, logot::Error::Shape { arg: a, .. } if a == arg),
            "{arg}: {e}"
        );
    }
    solver
        .solve_prepared(&prepared, outputs(&mut f, &mut g, &mut gx, &mut gy))
        .unwrap();
    let empty = CloudLayout { d: 0, ..c.layout() };
    let e = prepare(&mu, &nu, &[], &[], 2, empty).unwrap_err();
    assert!(
        matches!(&e, logot::Error::Empty { arg, .. } if arg == "x"),
        "{e}"
    );
}

// --- The Sinkhorn divergence on buffers (`prepare_divergence` of a `BufferProblem`,
// `sinkhorn_divergence_prepared`) against `SinkhornSolver::sinkhorn_divergence`. ---

/// The divergence's buffer path: its solution and `[∂x, ∂y]`, or its error.
fn divergence_on_buffers<T: Real>(
    solver: &SinkhornSolver<CpuBackend>,
    c: &Clouds<T>,
) -> logot::Result<(logot::DivergenceBufferResult, [Vec<T>; 2])> {
    let be = solver.backend();
    let (b, n) = c.mu.dim();
    let (m, d) = (c.nu.ncols(), c.x.dim().2);
    let mut bufs = c.uploaded()?;
    let prepared = solver.prepare_divergence(c.on_backend(&mut bufs))?;
    assert_eq!(prepared.dims(), (b, n, m));
    let nan = T::nan();
    let (mut gx, mut gy) = (be.filled(b * n * d, nan)?, be.filled(b * m * d, nan)?);
    let outputs = BufferOutputs::new().point_gradients(&mut gx, &mut gy);
    let out = solver.sinkhorn_divergence_prepared(&prepared, outputs)?;
    Ok((out, [gx, gy]))
}

fn check_divergence_equal<T: Real>(solver: &SinkhornSolver<CpuBackend>, c: &Clouds<T>, what: &str) {
    let host = solver
        .sinkhorn_divergence(&c.problem().unwrap(), DivergenceConvention::Objective)
        .unwrap();
    let (out, [gx, gy]) = divergence_on_buffers(solver, c).unwrap();
    let of = |v: &[f64]| -> Vec<T> { v.iter().map(|&v| T::of(v)).collect() };
    assert_eq!(
        bits(&of(&out.value)),
        bits(host.value.as_slice().unwrap()),
        "{what}: S_ε"
    );
    for (k, terms) in host.terms.rows().into_iter().enumerate() {
        assert_eq!(
            bits(&of(&out.terms[k])),
            bits(&terms.to_vec()),
            "{what}: terms of problem {k}"
        );
    }
    assert_eq!(out.convergence, host.convergence, "{what}: reports");
    let grad = |g: &Option<Array3<T>>| flat(g.as_ref().unwrap().iter().copied());
    assert_eq!(bits(&gx), bits(&grad(&host.grad_x)), "{what}: ∂x");
    assert_eq!(bits(&gy), bits(&grad(&host.grad_y)), "{what}: ∂y");
    // Not trivially equal: real solves, moving points, S_ε > 0 between different clouds.
    assert!(out.convergence.iter().all(|c| c.iterations > 1), "{what}");
    assert!(gx.iter().any(|v| v.f64().abs() > 1e-4), "{what}");
    assert!(
        out.value.iter().all(|&v| v > 0.0),
        "{what}: {:?}",
        out.value
    );
}

fn all_divergence_cases<T: Real>() {
    for metric in [PointMetric::SqEuclidean, PointMetric::Euclidean] {
        for d in [3, 17] {
            let solver =
                SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05 * d as f64 / 6.0));
            for (b, batched) in [(1, false), (2, false), (3, true)] {
                let c = clouds::<T>(b, (9, 7, d), batched, metric);
                let what = format!(
                    "divergence {} {metric:?} d={d} B={b} batched={batched}",
                    T::NAME
                );
                check_divergence_equal(&solver, &c, &what);
            }
        }
    }
}

#[test]
fn divergence_buffers_give_the_host_path_bit_for_bit_f64() {
    all_divergence_cases::<f64>();
}

#[test]
fn divergence_buffers_give_the_host_path_bit_for_bit_f32() {
    all_divergence_cases::<f32>();
}

#[test]
fn divergence_buffers_with_eps_scaling_and_unbalanced_match_too() {
    let c = clouds::<f64>(2, (8, 6, 2), true, PointMetric::SqEuclidean);
    let annealed = SinkhornParams::new(1e-2).eps_scaling(c.cost().eps_scaling());
    check_divergence_equal(&SinkhornSolver::new(CpuBackend, annealed), &c, "ε-scaling");
    // Unbalanced: different masses on the two sides.
    let mut c = c;
    c.nu.mapv_inplace(|v| 1.5 * v);
    c.relaxation = Some(Relaxation::kl(0.5));
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.05));
    check_divergence_equal(&solver, &c, "unbalanced");
}

#[test]
fn divergence_buffers_refuse_bad_input_as_the_host_path() {
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.1));
    let base = || clouds::<f64>(2, (5, 4, 3), true, PointMetric::SqEuclidean);
    type Spoil = Box<dyn Fn(&mut Clouds<f64>)>;
    let cases: Vec<(&str, Spoil)> = vec![
        ("NaN in x", Box::new(|c| c.x[[1, 2, 0]] = f64::NAN)),
        ("∞ in y", Box::new(|c| c.y[[0, 3, 2]] = f64::INFINITY)),
        ("negative weight", Box::new(|c| c.mu[[1, 2]] = -0.1)),
        ("unequal masses", Box::new(|c| c.nu[[1, 0]] += 0.5)),
    ];
    for (what, spoil) in cases {
        let mut c = base();
        spoil(&mut c);
        let want = host_error(&solver, &c);
        let got = divergence_on_buffers(&solver, &c)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert_eq!(got, want, "{what}");
    }
    // Gradients of the wrong length are refused before any solve, naming them.
    let c = base();
    let be = solver.backend();
    let up = |a: &[f64]| be.upload(a).unwrap();
    let (x, y) = (
        up(&flat(c.x.iter().copied())),
        up(&flat(c.y.iter().copied())),
    );
    let prepared = solver
        .prepare_divergence::<f64>(BufferProblem::points(
            up(&flat(c.mu.iter().copied())),
            up(&flat(c.nu.iter().copied())),
            &x,
            &y,
            2,
            c.layout(),
        ))
        .unwrap();
    let z = |len: usize| be.filled(len, 0.0).unwrap();
    for (arg, [lx, ly]) in [("grad_x", [29, 24]), ("grad_y", [30, 25])] {
        let (mut gx, mut gy) = (z(lx), z(ly));
        let e = solver
            .sinkhorn_divergence_prepared(
                &prepared,
                BufferOutputs::new().point_gradients(&mut gx, &mut gy),
            )
            .unwrap_err();
        assert!(
            matches!(&e, logot::Error::Shape { arg: a, .. } if a == arg),
            "{arg}: {e}"
        );
    }
    // A warm start is refused, as by the host path.
    let warm = SinkhornSolver::new(
        CpuBackend,
        SinkhornParams::new(0.1).warm_start(logot::WarmStart::new(
            Array2::zeros((2, 5)),
            Array2::zeros((2, 4)),
        )),
    );
    let (mut gx, mut gy) = (z(30), z(24));
    let e = warm
        .sinkhorn_divergence_prepared(
            &prepared,
            BufferOutputs::new().point_gradients(&mut gx, &mut gy),
        )
        .unwrap_err();
    assert!(
        matches!(&e, logot::Error::Parameter { arg, .. } if arg == "warm_start"),
        "{e}"
    );
}
