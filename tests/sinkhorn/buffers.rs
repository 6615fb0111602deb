//! Sinkhorn on a batch already on the backend (`SinkhornSolver::prepare` of a
//! `BufferProblem`, `solve_prepared` with `BufferOutputs`): the path a framework's device
//! tensors take. On the CPU backend (and a cluster of CPU members) it must give the host-array
//! path's potentials, distances, reports and gradients bit for bit — shared and per-problem
//! costs, costs far from 0 (the per-problem offsets), zero-mass bins, unbalanced problems —
//! and refuse bad input with the host path's errors, naming the argument and the entry.
use crate::common;

use common::{bin_weights, Lcg};
use logot::grad::{CgParams, GradientBuffers};
use logot::{
    Backend, BufferOutputs, BufferProblem, Cluster, CpuBackend, GradKernels, PointCloudKernels,
    Problem, Real, Relaxation, SinkhornParams, SinkhornSolver,
};
use ndarray::{Array2, Array3};

/// A seeded batch: `B` histograms on each side (the first `zeros` bins of each empty) and a
/// cost `U[0, 1) + offset`, one `n×m` shared or `B×n×m`.
struct Batch<T> {
    mu: Array2<T>,
    nu: Array2<T>,
    cost: Array3<T>,
    batched: bool,
    /// The relaxation of the marginals (`None`: balanced).
    relaxation: Option<Relaxation>,
}

fn batch<T: Real>(
    b: usize,
    n: usize,
    m: usize,
    zeros: usize,
    offset: f64,
    batched: bool,
) -> Batch<T> {
    let mut r = Lcg(17 + (b * 31 + n * 7 + m) as u64);
    let mats = if batched { b } else { 1 };
    Batch {
        mu: bin_weights(b, n, zeros, 3 + n as u64).mapv(T::of),
        nu: bin_weights(b, m, zeros, 5 + m as u64).mapv(T::of),
        cost: Array3::from_shape_fn((mats, n, m), |_| T::of(r.uniform(0.0, 1.0) + offset)),
        batched,
        relaxation: None,
    }
}

impl<T: Real> Batch<T> {
    /// This batch with its marginals relaxed.
    fn relaxed(self, r: Relaxation) -> Self {
        Batch {
            relaxation: Some(r),
            ..self
        }
    }

    fn problem(&self) -> Problem<'_, T> {
        let p = if self.batched {
            Problem::new(self.mu.view(), self.nu.view(), self.cost.view())
        } else {
            Problem::new(
                self.mu.view(),
                self.nu.view(),
                self.cost.index_axis(ndarray::Axis(0), 0),
            )
        };
        let p = p.unwrap();
        match self.relaxation {
            Some(r) => p.relaxed(r),
            None => p,
        }
    }

    fn dims(&self) -> (usize, usize, usize) {
        (self.mu.nrows(), self.mu.ncols(), self.nu.ncols())
    }

    /// `μ`, `ν` and the cost uploaded.
    fn upload<B: Backend<T>>(&self, be: &B) -> (B::Buffer, B::Buffer, B::Buffer) {
        let up = |a: &[T]| be.upload(a).unwrap();
        (
            up(self.mu.as_slice().unwrap()),
            up(self.nu.as_slice().unwrap()),
            up(self.cost.as_slice().unwrap()),
        )
    }

    /// The batch on the backend: `μ`, `ν` and the cost buffer `cost`, relaxed as this one.
    fn on_backend<'c, Buf>(&self, mu: Buf, nu: Buf, cost: &'c Buf) -> BufferProblem<'c, Buf> {
        let p = BufferProblem::dense(mu, nu, cost, self.dims(), self.batched);
        match self.relaxation {
            Some(r) => p.relaxed(r),
            None => p,
        }
    }
}

/// The buffer path's potentials, distances and report equal the host path's bit for bit.
fn solve_matches_host<T: Real, B: PointCloudKernels<T> + GradKernels<T>>(
    be: B,
    data: &Batch<T>,
    params: SinkhornParams,
) {
    let solver = SinkhornSolver::new(be, params);
    let be = solver.backend();
    let want = solver.solve(&data.problem()).unwrap();
    let (mu, nu, cost) = data.upload(be);
    let prepared = solver.prepare(data.on_backend(mu, nu, &cost)).unwrap();
    let (b, n, m) = data.dims();
    let mut f = be.filled(b * n, T::zero()).unwrap();
    let mut g = be.filled(b * m, T::zero()).unwrap();
    let got = solver
        .solve_prepared(&prepared, BufferOutputs::new().potentials(&mut f, &mut g))
        .unwrap();
    let bits = |v: &[T]| v.iter().map(|x| x.f64().to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&be.download(&f).unwrap()),
        bits(want.f.as_slice().unwrap()),
        "f"
    );
    assert_eq!(
        bits(&be.download(&g).unwrap()),
        bits(want.g.as_slice().unwrap()),
        "g"
    );
    let dist: Vec<T> = got.distance.iter().map(|&d| T::of(d)).collect();
    assert_eq!(
        bits(&dist),
        bits(want.distance.as_slice().unwrap()),
        "distance"
    );
    assert_eq!(got.convergence, want.convergence);
    match (&got.objective, &want.objective) {
        (None, None) => {}
        (Some(a), Some(w)) => {
            let a: Vec<T> = a.iter().map(|&d| T::of(d)).collect();
            assert_eq!(bits(&a), bits(w.as_slice().unwrap()), "objective");
        }
        _ => panic!("objective on one path only"),
    }
    // The same batch prepared from the host arrays.
    let host = solver.prepare(&data.problem()).unwrap();
    let (mut f2, mut g2) = (
        be.filled(b * n, T::zero()).unwrap(),
        be.filled(b * m, T::zero()).unwrap(),
    );
    let again = solver
        .solve_prepared(&host, BufferOutputs::new().potentials(&mut f2, &mut g2))
        .unwrap();
    assert_eq!(
        bits(&be.download(&f2).unwrap()),
        bits(want.f.as_slice().unwrap())
    );
    assert_eq!(
        bits(&be.download(&g2).unwrap()),
        bits(want.g.as_slice().unwrap())
    );
    assert_eq!(again.convergence, want.convergence);
}

/// Every shape on one backend, in one precision.
fn every_shape<T: Real, B: PointCloudKernels<T> + GradKernels<T> + Clone>(be: B) {
    let exact = |eps| SinkhornParams::new(eps).tol(1e-5).max_iters(500);
    // One problem, shared cost.
    solve_matches_host(
        be.clone(),
        &batch::<T>(1, 13, 9, 0, 0.0, false),
        exact(0.05),
    );
    // A batch against one shared cost, zero-mass bins, a cost far from 0 (offset removed).
    solve_matches_host(
        be.clone(),
        &batch::<T>(3, 17, 11, 2, 400.0, false),
        exact(0.05),
    );
    // A batch of costs, each with its own offset; fixed iterations.
    solve_matches_host(
        be.clone(),
        &batch::<T>(4, 8, 12, 1, -50.0, true),
        SinkhornParams::new(0.1).fixed_iterations(37),
    );
    // Unbalanced (the cost kept as given), zero-mass bins.
    solve_matches_host(
        be.clone(),
        &batch::<T>(2, 10, 14, 1, 0.5, true).relaxed(Relaxation::kl_each(0.7, f64::INFINITY)),
        SinkhornParams::new(0.1),
    );
}

#[test]
fn cpu_buffers_equal_the_host_path_bit_for_bit() {
    every_shape::<f64, _>(CpuBackend);
    every_shape::<f32, _>(CpuBackend);
}

#[test]
fn cluster_buffers_equal_the_host_path_bit_for_bit() {
    let cluster = || Cluster::new(vec![CpuBackend; 2]).unwrap();
    solve_matches_host::<f64, _>(
        cluster(),
        &batch(3, 17, 11, 2, 400.0, false),
        SinkhornParams::new(0.05),
    );
    solve_matches_host::<f32, _>(
        cluster(),
        &batch(4, 8, 12, 1, -50.0, true),
        SinkhornParams::new(0.1).fixed_iterations(21),
    );
}

/// `BufferOutputs::wasserstein_gradients` writes the host path's `∂C`, `∂μ`, `∂ν` bit for
/// bit.
fn gradients_match_host<T: Real, B: PointCloudKernels<T> + GradKernels<T> + Clone>(
    be: B,
    data: &Batch<T>,
    params: SinkhornParams,
) {
    let solver = SinkhornSolver::new(be.clone(), params);
    let cg = CgParams::default();
    let want = solver.wasserstein_gradients(&data.problem(), &cg).unwrap();
    let (mu, nu, cost) = data.upload(&be);
    let prepared = solver.prepare(data.on_backend(mu, nu, &cost)).unwrap();
    let (b, n, m) = data.dims();
    let mut dc = be.filled(b * n * m, T::zero()).unwrap();
    let mut dmu = be.filled(b * n, T::zero()).unwrap();
    let mut dnu = be.filled(b * m, T::zero()).unwrap();
    let out = GradientBuffers {
        cost: &mut dc,
        mu: &mut dmu,
        nu: &mut dnu,
    };
    let sol = solver
        .solve_prepared(
            &prepared,
            BufferOutputs::new().wasserstein_gradients(&cost, &cg, out),
        )
        .unwrap();
    let report = sol.cg.clone().unwrap();
    let bits = |v: &[T]| v.iter().map(|x| x.f64().to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&be.download(&dc).unwrap()),
        bits(want.cost.as_slice().unwrap()),
        "cost"
    );
    assert_eq!(
        bits(&be.download(&dmu).unwrap()),
        bits(want.mu.as_slice().unwrap()),
        "mu"
    );
    assert_eq!(
        bits(&be.download(&dnu).unwrap()),
        bits(want.nu.as_slice().unwrap()),
        "nu"
    );
    let dist: Vec<T> = sol.distance.iter().map(|&d| T::of(d)).collect();
    assert_eq!(bits(&dist), bits(want.result.distance.as_slice().unwrap()));
    assert_eq!(sol.convergence, want.result.convergence);
    assert_eq!(report.summary(), want.cg.summary());
    // Balanced: the zero-mean representative, per problem.
    if data.relaxation.is_none() {
        for row in want.mu.rows() {
            let s: f64 = row.iter().map(|v| v.f64()).sum();
            assert!(
                s.abs() <= 1e-4 * row.len() as f64 * T::epsilon().f64().sqrt(),
                "{s}"
            );
        }
    }
}

#[test]
fn cpu_gradient_buffers_equal_the_host_gradients() {
    let p = |eps| SinkhornParams::new(eps).tol(1e-6);
    gradients_match_host::<f64, _>(CpuBackend, &batch(1, 9, 7, 0, 0.0, false), p(0.1));
    gradients_match_host::<f64, _>(CpuBackend, &batch(3, 12, 10, 2, 100.0, false), p(0.1));
    gradients_match_host::<f64, _>(CpuBackend, &batch(2, 8, 6, 1, -3.0, true), p(0.2));
    gradients_match_host::<f32, _>(CpuBackend, &batch(2, 8, 6, 1, 0.0, true), p(0.2));
    gradients_match_host::<f64, _>(
        CpuBackend,
        &batch(2, 8, 6, 1, 0.0, true).relaxed(Relaxation::kl(0.5)),
        p(0.2),
    );
}

/// The error of the buffer path for a batch, as text (`None`: accepted).
fn buffer_error<T: Real>(data: &Batch<T>, params: SinkhornParams) -> Option<String> {
    let be = CpuBackend;
    let solver = SinkhornSolver::new(be, params);
    let (mu, nu, cost) = data.upload(&be);
    solver
        .prepare(data.on_backend(mu, nu, &cost))
        .err()
        .map(|e| e.to_string())
}

/// The error of the host path (the `Problem`'s checks, then the solve's).
fn host_error<T: Real>(data: &Batch<T>, params: SinkhornParams) -> Option<String> {
    let mats = data.cost.view();
    let p = if data.batched {
        Problem::new(data.mu.view(), data.nu.view(), mats)
    } else {
        Problem::new(
            data.mu.view(),
            data.nu.view(),
            mats.index_axis(ndarray::Axis(0), 0),
        )
    };
    match p {
        Err(e) => Some(e.to_string()),
        Ok(p) => SinkhornSolver::new(CpuBackend, params)
            .prepare(&p)
            .err()
            .map(|e| e.to_string()),
    }
}

#[test]
fn bad_buffers_give_the_host_errors_naming_the_argument() {
    let params = || SinkhornParams::new(0.1);
    let base = || batch::<f64>(3, 6, 5, 0, 0.0, true);
    let cases: Vec<(&str, Batch<f64>)> = vec![
        ("mu", {
            let mut d = base();
            d.mu[[1, 4]] = f64::NAN;
            d
        }),
        ("nu", {
            let mut d = base();
            d.nu[[2, 0]] = -0.25;
            d
        }),
        ("nu", {
            let mut d = base();
            d.nu[[0, 3]] = f64::INFINITY;
            d
        }),
        ("cost", {
            let mut d = base();
            d.cost[[2, 5, 1]] = f64::NEG_INFINITY;
            d
        }),
        ("mu", {
            let mut d = base();
            d.mu.row_mut(1).fill(0.0);
            d
        }),
        ("unequal", {
            let mut d = base();
            d.nu.row_mut(2).mapv_inplace(|v| 1.5 * v);
            d
        }),
    ];
    for (what, d) in &cases {
        let got = buffer_error(d, params()).unwrap_or_else(|| panic!("{what}: accepted"));
        let want = host_error(d, params()).unwrap();
        assert_eq!(got, want, "{what}");
        if *what != "unequal" {
            assert!(got.contains(what), "{what}: {got}");
        } else {
            assert!(got.contains("problem 2"), "{got}");
        }
    }
    // Unequal masses are accepted when a marginal is relaxed.
    let d = cases
        .into_iter()
        .nth(5)
        .unwrap()
        .1
        .relaxed(Relaxation::kl(1.0));
    assert_eq!(buffer_error(&d, params()), None);
    // A non-finite entry of a shared cost names its (row, column).
    let mut d = batch::<f32>(2, 4, 3, 0, 0.0, false);
    d.cost[[0, 3, 2]] = f32::NAN;
    let got = buffer_error(&d, params()).unwrap();
    assert_eq!(Some(got.clone()), host_error(&d, params()));
    assert!(got.contains("cost") && got.contains("(3, 2)"), "{got}");
    // Buffers of the wrong length name the argument.
    let d = base();
    let (mu, nu, cost) = d.upload(&CpuBackend);
    let err = SinkhornSolver::new(CpuBackend, params())
        .prepare(BufferProblem::dense(mu, nu, &cost, (3, 6, 5), false))
        .unwrap_err();
    assert!(err.to_string().contains("cost"), "{err}");
    let (mu, nu, cost) = d.upload(&CpuBackend);
    let err = SinkhornSolver::new(CpuBackend, params())
        .prepare(BufferProblem::dense(mu, nu, &cost, (3, 5, 5), true))
        .unwrap_err();
    assert!(err.to_string().contains("mu"), "{err}");
}

/// `BufferOutputs::plan` writes `SinkhornSolver::coupling`'s plan bit for bit;
/// `plan_gradients_buffers` on that plan writes `plan_gradients`'s gradients bit for bit, and
/// refuses a bad plan or upstream with its errors.
fn coupling_matches_host<T: Real>(data: &Batch<T>, params: SinkhornParams) {
    let be = CpuBackend;
    let solver = SinkhornSolver::new(be, params.clone());
    let want = solver.coupling(&data.problem()).unwrap();
    let (mu, nu, cost) = data.upload(&be);
    let (b, n, m) = data.dims();
    let prepared = solver.prepare(data.on_backend(mu, nu, &cost)).unwrap();
    let mut plan = be.filled(b * n * m, T::zero()).unwrap();
    let sol = solver
        .solve_prepared(&prepared, BufferOutputs::new().plan(&mut plan))
        .unwrap();
    let bits = |v: &[T]| v.iter().map(|x| x.f64().to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&plan), bits(want.plan.as_slice().unwrap()), "plan");
    assert_eq!(
        sol.convergence.iterations,
        want.result.convergence.iterations
    );
    // An upstream gradient: a seeded field.
    let mut r = Lcg(41);
    let up = Array3::from_shape_fn((b, n, m), |_| T::of(r.uniform(-1.0, 1.0)));
    let cg = CgParams::default();
    let host = solver
        .plan_gradients(want.plan.view(), up.view(), &cg)
        .unwrap();
    let g = be.upload(up.as_slice().unwrap()).unwrap();
    let (mut dc, mut dmu, mut dnu) = (
        be.filled(b * n * m, T::zero()).unwrap(),
        be.filled(b * n, T::zero()).unwrap(),
        be.filled(b * m, T::zero()).unwrap(),
    );
    let out = GradientBuffers {
        cost: &mut dc,
        mu: &mut dmu,
        nu: &mut dnu,
    };
    let report = solver
        .plan_gradients_buffers(&plan, (b, n, m), &g, &cg, out)
        .unwrap();
    assert_eq!(bits(&dc), bits(host.cost.as_slice().unwrap()), "cost");
    assert_eq!(bits(&dmu), bits(host.mu.as_slice().unwrap()), "mu");
    assert_eq!(bits(&dnu), bits(host.nu.as_slice().unwrap()), "nu");
    assert_eq!(report.summary(), host.cg.summary());
    // Zero mean per problem.
    for row in host.mu.rows() {
        let s: f64 = row.iter().map(|v| v.f64()).sum();
        assert!(s.abs() <= 10.0 * n as f64 * T::epsilon().f64(), "{s}");
    }
    // Bad plans and upstreams: the host errors, naming the argument and the entry.
    for (what, k, v) in [
        ("plan", 5, T::nan()),
        ("plan", 7, -T::one()),
        ("upstream", 3, T::infinity()),
    ] {
        let (mut p, mut u) = (want.plan.clone(), up.clone());
        let target = if what == "plan" { &mut p } else { &mut u };
        target.as_slice_mut().unwrap()[k] = v;
        let host = solver.plan_gradients(p.view(), u.view(), &cg).unwrap_err();
        let (pb, ub) = (
            be.upload(p.as_slice().unwrap()).unwrap(),
            be.upload(u.as_slice().unwrap()).unwrap(),
        );
        let (mut dc, mut dmu, mut dnu) = (dc.clone(), dmu.clone(), dnu.clone());
        let out = GradientBuffers {
            cost: &mut dc,
            mu: &mut dmu,
            nu: &mut dnu,
        };
        let got = solver
            .plan_gradients_buffers(&pb, (b, n, m), &ub, &cg, out)
            .unwrap_err();
        assert_eq!(got.to_string(), host.to_string());
        assert!(got.to_string().starts_with(what), "{got}");
    }
}

#[test]
fn cpu_coupling_and_plan_gradient_buffers_equal_the_host_path() {
    let p = SinkhornParams::new(0.1).tol(1e-7);
    coupling_matches_host::<f64>(&batch(3, 9, 7, 1, 20.0, false), p.clone());
    coupling_matches_host::<f32>(&batch(2, 6, 8, 0, 0.0, true), p);
}
