//! Every GPU of the machine joined by NCCL against one GPU and against the CPU in f64: point
//! clouds (d = 3 and d = 64) and a shared dense cost split by target points, a batch of
//! dense costs and batched point clouds (a pair per problem) split by problems. Skips without a GPU or NCCL (fails under
//! `LOGOT_REQUIRE_GPU=1`); on a one-GPU machine the cluster has one member and the test
//! still runs NCCL.
#![cfg(feature = "cuda")]
mod common;

use common::clouds::{clouds, f64s, worst_above};
use common::gpu::{gpu, gpu_cluster};
use common::{bin_weights, Lcg};
use logot::backend::{Backend, Side};
use logot::{
    BarycenterProblem, CpuBackend, CudaCluster, PointCloudCost, Problem, Real, SinkhornParams,
    SinkhornResult, SinkhornSolver,
};
use ndarray::{Array2, Array3};

/// The largest difference relative to the largest magnitude of `b`, or to `floor`
/// ([`worst_above`]).
fn rel_diff<T: Real, U: Real>(a: &[T], b: &[U], floor: f64) -> f64 {
    worst_above(&f64s(a), &f64s(b), floor)
}

/// (distance, f, g) differences: distances relative to themselves; potentials (defined up
/// to a constant, often near 0) relative to the cost's scale, about 1 in these problems.
fn diff<T: Real, U: Real>(a: &SinkhornResult<T>, b: &SinkhornResult<U>, what: &str) -> [f64; 3] {
    let d = rel_diff(
        a.distance.as_slice().unwrap(),
        b.distance.as_slice().unwrap(),
        0.0,
    );
    let f = rel_diff(a.f.as_slice().unwrap(), b.f.as_slice().unwrap(), 1.0);
    let g = rel_diff(a.g.as_slice().unwrap(), b.g.as_slice().unwrap(), 1.0);
    eprintln!("{what}: distance {d:.2e}, f {f:.2e}, g {g:.2e} (relative)");
    [d, f, g]
}

/// Distances within `tol_d`, potentials within `tol_p`.
fn compare<T: Real, U: Real>(
    a: &SinkhornResult<T>,
    b: &SinkhornResult<U>,
    (tol_d, tol_p): (f64, f64),
    what: &str,
) {
    let [d, f, g] = diff(a, b, what);
    assert!(
        d <= tol_d && f <= tol_p && g <= tol_p,
        "{what}: beyond {tol_d:e} / {tol_p:e}"
    );
}

/// Fixed iterations (the same on every backend) of a problem cast to `T`.
fn solve<T: Real, B: Backend<T>>(
    be: B,
    mu: &Array2<f64>,
    nu: &Array2<f64>,
    x: &Array2<f64>,
    y: &Array2<f64>,
    iters: usize,
) -> SinkhornResult<T> {
    let (mu, nu, x, y) = (mu.mapv(T::of), nu.mapv(T::of), x.mapv(T::of), y.mapv(T::of));
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap();
    let problem = Problem::new(mu.view(), nu.view(), cost).unwrap();
    let params = SinkhornParams::new(0.05).fixed_iterations(iters);
    SinkhornSolver::new(be, params).solve(&problem).unwrap()
}

#[test]
fn cuda_cluster_point_clouds_equal_one_gpu() {
    let (Some(one), Some(many)) = (gpu(), gpu_cluster()) else {
        return;
    };
    eprintln!("{} members", many.size());
    for (n, m, d, iters) in [(3001, 2777, 3, 30), (1500, 1709, 64, 20)] {
        let (x, y) = clouds(n, m, d, 40 + d as u64);
        let scale = 1.0 / (d as f64).sqrt();
        let (x, y) = (x * scale, y * scale);
        // Two problems; the second has zero-mass bins in both marginals.
        let (mu, mut nu) = (bin_weights(2, n, 0, 1), bin_weights(2, m, 0, 2));
        nu.row_mut(1).iter_mut().take(40).for_each(|v| *v = 0.0);
        let s = nu.row(1).sum();
        nu.row_mut(1).mapv_inplace(|v| v / s);
        let reference = solve::<f64, _>(CpuBackend, &mu, &nu, &x, &y, iters);
        let single = solve::<f32, _>(one.clone(), &mu, &nu, &x, &y, iters);
        let split = solve::<f32, _>(
            CudaCluster::new(many.members().to_vec()).unwrap(),
            &mu,
            &nu,
            &x,
            &y,
            iters,
        );
        // Splitting changes the f32 rounding, not the accuracy: the cluster is as close to
        // the f64 result as one GPU is.
        compare(
            &single,
            &split,
            (1e-6, 4e-6),
            &format!("d = {d}, f32, cluster vs one GPU"),
        );
        let e1 = diff(
            &reference,
            &single,
            &format!("d = {d}, f32 one GPU vs CPU f64"),
        );
        let e2 = diff(
            &reference,
            &split,
            &format!("d = {d}, f32 cluster vs CPU f64"),
        );
        for (a, b) in e1.iter().zip(&e2) {
            assert!(
                *b <= 2.0 * a + 1e-6,
                "d = {d}: the cluster's error {b:e} against one GPU's {a:e}"
            );
        }
        let split64 = solve::<f64, _>(
            CudaCluster::new(many.members().to_vec()).unwrap(),
            &mu,
            &nu,
            &x,
            &y,
            iters,
        );
        compare(
            &reference,
            &split64,
            (1e-11, 1e-11),
            &format!("d = {d}, f64 cluster vs CPU f64"),
        );
    }
}

#[test]
fn cuda_cluster_dense_costs_equal_one_gpu() {
    let (Some(one), Some(many)) = (gpu(), gpu_cluster()) else {
        return;
    };
    let (b, n, m) = (5, 700, 900);
    let mut r = Lcg(9);
    let shared = Array2::from_shape_vec((n, m), r.vec(n * m, 0.0, 1.0)).unwrap();
    let costs = Array3::from_shape_vec((b, n, m), r.vec(b * n * m, 0.0, 1.0)).unwrap();
    let (mu, nu) = (bin_weights(b, n, 3, 10), bin_weights(b, m, 0, 11));
    let params = SinkhornParams::new(0.02);
    for (what, shared_cost) in [
        ("shared cost (columns)", true),
        ("batch of costs (problems)", false),
    ] {
        let run = |be: &dyn Fn(&Problem<'_, f32>) -> SinkhornResult<f32>| {
            let (mu, nu) = (mu.mapv(|v| v as f32), nu.mapv(|v| v as f32));
            let (s, c) = (shared.mapv(|v| v as f32), costs.mapv(|v| v as f32));
            let problem = if shared_cost {
                Problem::new(mu.view(), nu.view(), s.view()).unwrap()
            } else {
                Problem::new(mu.view(), nu.view(), c.view()).unwrap()
            };
            be(&problem)
        };
        let single = run(&|p| {
            SinkhornSolver::new(one.clone(), params.clone())
                .solve(p)
                .unwrap()
        });
        let split = run(&|p| {
            let cluster = CudaCluster::new(many.members().to_vec()).unwrap();
            SinkhornSolver::new(cluster, params.clone())
                .solve(p)
                .unwrap()
        });
        assert_eq!(
            single.convergence.converged, split.convergence.converged,
            "{what}"
        );
        let (ea, eb) = (
            single.convergence.marginal_error,
            split.convergence.marginal_error,
        );
        assert!(
            (ea - eb).abs() <= 0.05 * ea + 1e-7,
            "{what}: marginal errors {ea:e} / {eb:e}"
        );
        compare(&single, &split, (1e-6, 4e-6), what);
    }
}

#[test]
fn cuda_cluster_half_steps_and_errors() {
    let Some(many) = gpu_cluster() else {
        return;
    };
    // One half-step of a batch on both sides against the CPU in f64.
    let (b, n, m, d) = (3, 1111, 1234, 5);
    let (x, y) = clouds(n, m, d, 3);
    let mut r = Lcg(4);
    let f = r.vec(b * n, -0.3, 0.3);
    let g = r.vec(b * m, -0.3, 0.3);
    let lm = |len, s| {
        bin_weights(b, len, 2, s)
            .mapv(f64::ln)
            .into_raw_vec_and_offset()
            .0
    };
    let (log_mu, log_nu) = (lm(n, 5), lm(m, 6));
    let cpu = CpuBackend;
    let cost = PointCloudCost::new(x.view(), y.view()).unwrap().into();
    let c1 = cpu.prepare_cost(&cost).unwrap();
    let c = many.prepare_cost(&cost).unwrap();
    for (side, other, lmv, len) in [(Side::Col, &f, &log_nu, m), (Side::Row, &g, &log_mu, n)] {
        let mut want = vec![0.0; b * len];
        cpu.sinkstep(&c1, side, 0.1, other, lmv, &mut want).unwrap();
        let (o, l) = (many.upload(other).unwrap(), many.upload(lmv).unwrap());
        let mut out = many.filled(b * len, 0.0).unwrap();
        many.sinkstep(&c, side, 0.1, &o, &l, &mut out).unwrap();
        let got = many.download(&out).unwrap();
        let e = rel_diff(&want, &got, 0.0);
        assert!(e < 1e-12, "{side:?}: {e:e}");
        for (k, member) in many.members().iter().enumerate() {
            let copy = member.download(&out.copies()[k]).unwrap();
            assert_eq!(copy, got, "{side:?}: member {k}'s copy differs");
        }
    }
    // A GPU named twice is refused before NCCL is asked.
    let err =
        CudaCluster::new(vec![many.members()[0].clone(), many.members()[0].clone()]).unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
}

/// Point gradients (envelope and implicit) and the Sinkhorn divergence with its gradient on
/// the cluster, against one GPU (f32) and the CPU in f64.
#[test]
fn cuda_cluster_point_gradients_equal_one_gpu() {
    use logot::{CgParams, DivergenceConvention};
    let (Some(one), Some(many)) = (gpu(), gpu_cluster()) else {
        return;
    };
    let (n, m, d) = (1200, 1500, 3);
    let (x, y) = clouds(n, m, d, 77);
    let (mu, nu) = (bin_weights(1, n, 0, 78), bin_weights(1, m, 5, 79));
    let params = SinkhornParams::new(0.05);
    let flat = |a: &ndarray::Array3<f32>| a.iter().copied().collect::<Vec<f32>>();
    let (x32, y32, mu32, nu32) = (
        x.mapv(|v| v as f32),
        y.mapv(|v| v as f32),
        mu.mapv(|v| v as f32),
        nu.mapv(|v| v as f32),
    );
    let cost = PointCloudCost::new(x32.view(), y32.view()).unwrap();
    let problem = Problem::new(mu32.view(), nu32.view(), cost.clone()).unwrap();
    let single = SinkhornSolver::new(one, params.clone());
    let split = SinkhornSolver::new(
        CudaCluster::new(many.members().to_vec()).unwrap(),
        params.clone(),
    );
    let (e1, e2) = (
        single.point_gradients(&problem).unwrap(),
        split.point_gradients(&problem).unwrap(),
    );
    let cg = CgParams::default();
    let (i1, i2) = (
        single.transport_point_gradients(&problem, &cg).unwrap(),
        split.transport_point_gradients(&problem, &cg).unwrap(),
    );
    let conv = DivergenceConvention::Objective;
    let first = Problem::new(mu32.row(0), nu32.row(0), cost.clone()).unwrap();
    let (d1, d2) = (
        single.sinkhorn_divergence(&first, conv).unwrap(),
        split.sinkhorn_divergence(&first, conv).unwrap(),
    );
    // The f64 reference on the CPU.
    let cpu = SinkhornSolver::new(CpuBackend, params.clone());
    let cost64 = PointCloudCost::new(x.view(), y.view()).unwrap();
    let e64 = cpu
        .point_gradients(&Problem::new(mu.view(), nu.view(), cost64.clone()).unwrap())
        .unwrap();
    for (what, a, b, r) in [
        (
            "envelope x",
            flat(&e1.x),
            flat(&e2.x),
            e64.x.iter().copied().collect::<Vec<f64>>(),
        ),
        (
            "envelope y",
            flat(&e1.y),
            flat(&e2.y),
            e64.y.iter().copied().collect(),
        ),
    ] {
        let (ab, rb, ra) = (
            rel_diff(&a, &b, 0.0),
            rel_diff(&r, &b, 0.0),
            rel_diff(&r, &a, 0.0),
        );
        eprintln!("{what}: cluster vs one GPU {ab:.2e}, vs CPU f64 {rb:.2e} (one GPU: {ra:.2e})");
        assert!(ab <= 1e-5 && rb <= 2.0 * ra + 1e-5, "{what}");
    }
    for (what, a, b) in [
        ("implicit x", flat(&i1.x), flat(&i2.x)),
        ("implicit y", flat(&i1.y), flat(&i2.y)),
    ] {
        let ab = rel_diff(&a, &b, 0.0);
        eprintln!("{what}: cluster vs one GPU {ab:.2e}");
        assert!(ab <= 1e-4, "{what}: {ab:e}");
    }
    let dv = (d1.value[0] - d2.value[0]).abs() / d1.value[0].abs();
    let dg = rel_diff(
        d1.grad_x.as_ref().unwrap().as_slice().unwrap(),
        d2.grad_x.as_ref().unwrap().as_slice().unwrap(),
        0.0,
    );
    eprintln!("divergence: value {dv:.2e}, gradient {dg:.2e}");
    assert!(dv <= 1e-5 && dg <= 1e-5, "divergence");
}

/// Barycenters on the cluster (a dense cost split by target points, a grid by problems)
/// against one GPU, f32.
#[test]
fn cuda_cluster_barycenters_equal_one_gpu() {
    use logot::{BarycenterParams, BarycenterSolver, CostSource, GridCost};
    let (Some(one), Some(many)) = (gpu(), gpu_cluster()) else {
        return;
    };
    let grid = GridCost::image(24, 20).unwrap();
    let dense = grid.to_dense::<f32>();
    let imgs = bin_weights(3, 480, 0, 51).mapv(|v| v as f32);
    let w = ndarray::array![0.2f32, 0.5, 0.3];
    let params = BarycenterParams::new(0.01).fixed_iterations(50);
    for cost in [
        CostSource::Grid(grid.clone()),
        CostSource::Dense(dense.view()),
    ] {
        let a = BarycenterSolver::new(one.clone(), params.clone())
            .solve(
                &BarycenterProblem::new(imgs.view(), w.view()).unwrap(),
                cost.clone(),
            )
            .unwrap()
            .remove(0);
        let cluster = CudaCluster::new(many.members().to_vec()).unwrap();
        let b = BarycenterSolver::new(cluster, params.clone())
            .solve(
                &BarycenterProblem::new(imgs.view(), w.view()).unwrap(),
                cost.clone(),
            )
            .unwrap()
            .remove(0);
        let d = rel_diff(
            a.histogram.as_slice().unwrap(),
            b.histogram.as_slice().unwrap(),
            0.0,
        );
        eprintln!("barycenter: cluster vs one GPU {d:.2e}");
        assert!(d <= 1e-4, "histograms differ by {d:e}");
    }
}

/// Batched clouds (one pair per problem, d = 3 and 64) split by problems: the cluster's
/// potentials, distances, plans' point gradients (envelope, and exact at d = 3) equal one
/// GPU's in f64.
#[test]
fn cuda_cluster_batched_point_clouds_equal_one_gpu() {
    use logot::CgParams;
    let (Some(one), Some(many)) = (gpu(), gpu_cluster()) else {
        return;
    };
    for d in [3, 64] {
        let (b, n, m) = (5, 300, 257);
        let mut r = Lcg(600 + d as u64);
        let x = Array3::from_shape_fn((b, n, d), |(k, _, _)| 0.2 * k as f64 + r.next());
        let y = Array3::from_shape_fn((b, m, d), |_| r.next());
        let (mu, nu) = (bin_weights(b, n, 0, 601), bin_weights(b, m, 4, 602));
        let cost = PointCloudCost::batched(x.view(), y.view()).unwrap();
        let problem = Problem::new(mu.view(), nu.view(), cost).unwrap();
        let params = SinkhornParams::new(0.05 * d as f64 / 6.0).fixed_iterations(100);
        let single = SinkhornSolver::new(one.clone(), params.clone());
        let split = SinkhornSolver::new(CudaCluster::new(many.members().to_vec()).unwrap(), params);
        let what = format!("batched clouds d={d}");
        compare(
            &single.solve(&problem).unwrap(),
            &split.solve(&problem).unwrap(),
            (1e-10, 1e-10),
            &what,
        );
        let flat = |a: &Array3<f64>| a.iter().copied().collect::<Vec<f64>>();
        let (e1, e2) = (
            single.point_gradients(&problem).unwrap(),
            split.point_gradients(&problem).unwrap(),
        );
        let ex = rel_diff(&flat(&e2.x), &flat(&e1.x), 0.0);
        let ey = rel_diff(&flat(&e2.y), &flat(&e1.y), 0.0);
        eprintln!("{what}: envelope gradients {ex:.2e} {ey:.2e}");
        assert!(ex < 1e-10 && ey < 1e-10, "{what}: envelope gradients");
        if d <= 16 {
            let cg = CgParams::default();
            let (i1, i2) = (
                single.transport_point_gradients(&problem, &cg).unwrap(),
                split.transport_point_gradients(&problem, &cg).unwrap(),
            );
            let ix = rel_diff(&flat(&i2.x), &flat(&i1.x), 0.0);
            eprintln!("{what}: transport gradients {ix:.2e}");
            assert!(ix < 1e-8, "{what}: transport gradients");
        }
    }
}
