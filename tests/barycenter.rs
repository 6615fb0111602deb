//! Barycenters (dense and grid) against POT, closed forms and their defining properties.
//!
//! Fixed values: tests/data/pot_*.npy, written by `python3 tests/data/make_pot_barycenters.py`
//! (POT 0.9.7); each test names the call that produced its file.

mod common;
use logot::{BarycenterParams, BarycenterProblem, BarycenterSolver, CpuBackend, Error, GridCost};
use logot_cli::problems::bary64_images;
use ndarray::{array, s, Array1, Array2, Array3, Axis};

fn l1(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
}

fn pot(name: &str) -> Array1<f64> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    if let Ok(a) = ndarray_npy::read_npy::<_, Array2<f64>>(&path) {
        return a.iter().copied().collect();
    }
    let a: Array1<f64> = ndarray_npy::read_npy(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    a
}

/// The dense cost of DESIGN.md's bary64 on n×n pixels: squared distances on
/// linspace(−5, 5)², divided by their maximum, i.e. half the unit-grid cost.
fn dense_cost(n: usize) -> Array2<f64> {
    GridCost::image(n, n).unwrap().to_dense::<f64>() * 0.5
}

const W: [f64; 3] = [0.3, 0.3, 0.4];

#[test]
fn grid_bary64_matches_pot_convolutional_barycenter() {
    // bar = ot.bregman.convolutional_barycenter2d(imgs, 0.004, weights=[.3,.3,.4],
    //           numItermax=100, stopThr=0.0, method="sinkhorn_log")      (imgs = shapes(64))
    let imgs = bary64_images(64);
    let want = pot("pot_grid64_eps0.004_it100.npy");
    let got = common::bary::grid_barycenter(
        imgs.view(),
        array![0.3, 0.3, 0.4].view(),
        &BarycenterParams::new(0.004).fixed_iterations(100),
        None,
    )
    .unwrap();
    assert_eq!(got.iterations, 100);
    let err = l1(got.histogram.as_slice().unwrap(), want.as_slice().unwrap());
    assert!(err < 1e-9, "L1 vs POT = {err:e}");
    // f32 inputs: the convolutions run in f64, so only the f32 potentials' rounding remains.
    let imgs32 = imgs.mapv(|v| v as f32);
    let got32 = common::bary::grid_barycenter(
        imgs32.view(),
        array![0.3f32, 0.3, 0.4].view(),
        &BarycenterParams::new(0.004).fixed_iterations(100),
        None,
    )
    .unwrap();
    let h32: Vec<f64> = got32.histogram.iter().map(|&v| v as f64).collect();
    let err32 = l1(&h32, want.as_slice().unwrap());
    assert!(err32 < 1e-3, "f32 L1 vs POT = {err32:e}");
}

#[test]
fn grid_default_stopping_matches_pot_schedule() {
    // bar, log = ot.bregman.convolutional_barycenter2d(shapes(24), 0.01, weights=[.3,.3,.4],
    //                method="sinkhorn_log", log=True)      → log["niter"] == 79 (0-based)
    let imgs = bary64_images(24);
    let want = pot("pot_grid24_eps0.01_default.npy");
    let got = common::bary::grid_barycenter(
        imgs.view(),
        array![0.3, 0.3, 0.4].view(),
        &BarycenterParams::new(0.01),
        None,
    )
    .unwrap();
    assert_eq!(got.iterations, 80);
    assert!(got.converged && got.error < 1e-4);
    let err = l1(got.histogram.as_slice().unwrap(), want.as_slice().unwrap());
    assert!(err < 1e-10, "L1 vs POT = {err:e}");
}

#[test]
fn dense_matches_pot_barycenter_fixed_iterations_and_default_stopping() {
    // A = shapes(16).reshape(3, -1).T, M = normalised squared distances (dense_cost below)
    // ot.bregman.barycenter(A, M, 1e-3, weights=w, method="sinkhorn_log", numItermax=100, stopThr=0.0)
    let imgs = bary64_images(16).into_shape_with_order((3, 256)).unwrap();
    let cost = dense_cost(16);
    let w = Array1::from(W.to_vec());
    let want = pot("pot_dense16_eps0.001_it100.npy");
    let got = common::bary::barycenter(
        imgs.view(),
        w.view(),
        cost.view(),
        &BarycenterParams::new(1e-3).fixed_iterations(100),
        None,
    )
    .unwrap();
    let err = l1(got.histogram.as_slice().unwrap(), want.as_slice().unwrap());
    assert!(err < 1e-9, "L1 vs POT = {err:e}");

    // ot.bregman.barycenter(A, M, 1e-2, weights=w, method="sinkhorn_log", log=True) → niter 41
    let want = pot("pot_dense16_eps0.01_default.npy");
    let got = common::bary::barycenter(
        imgs.view(),
        w.view(),
        cost.view(),
        &BarycenterParams::new(1e-2),
        None,
    )
    .unwrap();
    assert_eq!(got.iterations, 42);
    assert!(got.converged);
    let err = l1(got.histogram.as_slice().unwrap(), want.as_slice().unwrap());
    assert!(err < 1e-10, "L1 vs POT = {err:e}");
}

#[test]
fn non_square_images_and_asymmetric_dense_costs_match_pot() {
    // rng = np.random.default_rng(0); imgs = rng.random((3, 12, 20)) + 0.05, normalised
    // ot.bregman.convolutional_barycenter2d(imgs, 0.02, weights=[.5,.2,.3], numItermax=50,
    //     stopThr=0.0, method="sinkhorn_log")
    let dir = format!("{}/tests/data", env!("CARGO_MANIFEST_DIR"));
    let imgs: Array3<f64> =
        ndarray_npy::read_npy(format!("{dir}/pot_nonsquare_inputs.npy")).unwrap();
    let want: Array2<f64> =
        ndarray_npy::read_npy(format!("{dir}/pot_grid12x20_eps0.02_it50.npy")).unwrap();
    let got = common::bary::grid_barycenter(
        imgs.view(),
        array![0.5, 0.2, 0.3].view(),
        &BarycenterParams::new(0.02).fixed_iterations(50),
        None,
    )
    .unwrap();
    assert_eq!(got.histogram.len(), 12 * 20);
    let err = l1(got.histogram.as_slice().unwrap(), want.as_slice().unwrap());
    assert!(err < 1e-12, "12×20 grid: L1 vs POT = {err:e}");
    // A9 = rng.random((9, 2)) + 0.1 normalised per column, M = rng.random((9, 9)) (not symmetric)
    // ot.bregman.barycenter(A9, M, 0.05, weights=[.7,.3], method="sinkhorn_log", numItermax=30, stopThr=0.0)
    let h: Array2<f64> = ndarray_npy::read_npy(format!("{dir}/pot_dense9_inputs.npy")).unwrap();
    let cost: Array2<f64> = ndarray_npy::read_npy(format!("{dir}/pot_dense9_cost.npy")).unwrap();
    let want: Array1<f64> =
        ndarray_npy::read_npy(format!("{dir}/pot_dense9_eps0.05_it30.npy")).unwrap();
    let got = common::bary::barycenter(
        h.view(),
        array![0.7, 0.3].view(),
        cost.view(),
        &BarycenterParams::new(0.05).fixed_iterations(30),
        None,
    )
    .unwrap();
    let err = l1(got.histogram.as_slice().unwrap(), want.as_slice().unwrap());
    assert!(err < 1e-13, "asymmetric dense cost: L1 vs POT = {err:e}");
}

#[test]
fn identical_inputs_give_the_one_step_blur_and_the_input_for_small_eps() {
    // With a_k = a for all k, every G_k stays 0 and b = Kᵀ(a ⊘ K·1) exactly, K = exp(−C/ε).
    let n = 30;
    let x: Vec<f64> = (0..n).map(|i| i as f64 / (n - 1) as f64).collect();
    let cost = Array2::from_shape_fn((n, n), |(i, j)| (x[i] - x[j]).powi(2));
    let a: Array1<f64> = x
        .iter()
        .map(|&t| (-(t - 0.4f64).powi(2) / 0.02).exp() + 0.05)
        .collect();
    let a = &a / a.sum();
    let inputs = ndarray::stack![Axis(0), a, a, a];
    for eps in [0.05, 2e-4] {
        let got = common::bary::barycenter(
            inputs.view(),
            array![0.2, 0.5, 0.3].view(),
            cost.view(),
            &BarycenterParams::new(eps),
            None,
        )
        .unwrap();
        let k = cost.mapv(|c| (-c / eps).exp());
        let row_sums = k.sum_axis(Axis(1));
        let want: Vec<f64> = (0..n)
            .map(|j| {
                (0..n)
                    .map(|i| k[[i, j]] * (a[i] + 1e-16) / row_sums[i])
                    .sum::<f64>()
            })
            .collect();
        let err = l1(got.histogram.as_slice().unwrap(), &want);
        assert!(err < 1e-12, "eps {eps}: L1 vs closed form {err:e}");
        assert!(
            got.converged && got.iterations == 2,
            "stops at the first check"
        );
        if eps < 0.01 {
            let dist = l1(got.histogram.as_slice().unwrap(), a.as_slice().unwrap());
            assert!(
                dist < 0.02,
                "small eps: barycenter of identical inputs ≈ the input ({dist})"
            );
        }
    }
}

#[test]
fn mass_is_one_and_swapping_inputs_with_weights_is_a_symmetry() {
    let imgs = bary64_images(20);
    let p = BarycenterParams::new(0.005).tol(1e-8);
    let got =
        common::bary::grid_barycenter(imgs.view(), array![0.2, 0.5, 0.3].view(), &p, None).unwrap();
    assert!(got.converged, "error {}", got.error);
    assert!(
        (got.histogram.sum() - 1.0).abs() < 1e-6,
        "mass {}",
        got.histogram.sum()
    );
    let swapped = ndarray::stack![
        Axis(0),
        imgs.index_axis(Axis(0), 2),
        imgs.index_axis(Axis(0), 0),
        imgs.index_axis(Axis(0), 1)
    ];
    let got2 =
        common::bary::grid_barycenter(swapped.view(), array![0.3, 0.2, 0.5].view(), &p, None)
            .unwrap();
    assert_eq!(got.iterations, got2.iterations);
    let err = l1(
        got.histogram.as_slice().unwrap(),
        got2.histogram.as_slice().unwrap(),
    );
    assert!(err < 1e-12, "swap: {err:e}");
    // Dense, f32: mass within f32 rounding.
    let flat = imgs
        .mapv(|v| v as f32)
        .into_shape_with_order((3, 400))
        .unwrap();
    let cost = GridCost::image(20, 20).unwrap().to_dense::<f32>();
    let got = common::bary::barycenter(
        flat.view(),
        array![0.2f32, 0.5, 0.3].view(),
        cost.view(),
        &BarycenterParams::new(0.01),
        None,
    )
    .unwrap();
    assert!(got.converged);
    assert!(
        (got.histogram.sum() - 1.0).abs() < 1e-3,
        "f32 mass {}",
        got.histogram.sum()
    );
}

#[test]
fn grid_and_dense_agree_on_the_same_grid_in_1d_2d_and_3d() {
    let mut rnd = common::uniforms(99);
    for shape in [vec![40usize], vec![12, 9], vec![5, 4, 6]] {
        let grid = GridCost::new(&shape).unwrap();
        let n = grid.len();
        let mut h = Array2::from_shape_fn((3, n), |_| rnd() + 0.01);
        for mut row in h.rows_mut() {
            let s = row.sum();
            row /= s;
        }
        let w = array![0.25, 0.45, 0.3];
        let p = BarycenterParams::new(0.01).fixed_iterations(60);
        let via_grid =
            common::bary::barycenter(h.view(), w.view(), grid.clone(), &p, None).unwrap();
        let via_dense =
            common::bary::barycenter(h.view(), w.view(), grid.to_dense::<f64>().view(), &p, None)
                .unwrap();
        let err = l1(
            via_grid.histogram.as_slice().unwrap(),
            via_dense.histogram.as_slice().unwrap(),
        );
        assert!(err < 1e-12, "{shape:?}: grid vs dense L1 {err:e}");
    }
}

/// Quantile function of a histogram on points x (piecewise-linear CDF), at levels q.
fn quantiles(x: &[f64], h: &[f64], q: &[f64]) -> Vec<f64> {
    let total: f64 = h.iter().sum();
    let mut cdf = Vec::with_capacity(h.len());
    let mut acc = 0.0;
    for &v in h {
        acc += v / total;
        cdf.push(acc);
    }
    q.iter()
        .map(|&level| {
            let k = cdf.partition_point(|&c| c < level).min(x.len() - 1);
            let (c0, x0) = if k == 0 {
                (0.0, x[0])
            } else {
                (cdf[k - 1], x[k - 1])
            };
            let t = if cdf[k] > c0 {
                (level - c0) / (cdf[k] - c0)
            } else {
                0.0
            };
            x0 + t * (x[k] - x0)
        })
        .collect()
}

#[test]
fn one_dimensional_barycenter_is_the_quantile_average_for_small_eps() {
    // In 1-D the W2 barycenter has quantile function Σ_k w_k Q_k. Compare the computed
    // barycenter's quantiles with that average (an L1 distance between quantile
    // functions = W1 between the measures).
    let n = 400;
    let x: Vec<f64> = (0..n).map(|i| GridCost::coordinate(n, i)).collect();
    let bump = |m: f64, s: f64| -> Array1<f64> {
        let h: Array1<f64> = x
            .iter()
            .map(|&t| (-0.5 * ((t - m) / s).powi(2)).exp() + 1e-12)
            .collect();
        &h / h.sum()
    };
    let a = bump(0.2, 0.04);
    let b = bump(0.7, 0.08);
    let w = [0.35, 0.65];
    let inputs = ndarray::stack![Axis(0), a, b];
    let got = common::bary::grid_barycenter(
        inputs.view(),
        array![w[0], w[1]].view(),
        &BarycenterParams::new(2e-5),
        None,
    )
    .unwrap();
    assert!(got.converged);
    let levels: Vec<f64> = (1..200).map(|k| k as f64 / 200.0).collect();
    let qa = quantiles(&x, a.as_slice().unwrap(), &levels);
    let qb = quantiles(&x, b.as_slice().unwrap(), &levels);
    let qbar = quantiles(&x, got.histogram.as_slice().unwrap(), &levels);
    let w1 = levels
        .iter()
        .enumerate()
        .map(|(k, _)| (qbar[k] - (w[0] * qa[k] + w[1] * qb[k])).abs())
        .sum::<f64>()
        / levels.len() as f64;
    // The exact barycenter is N(0.525, 0.066²); the mixture of the inputs would be ≈ 0.2 away.
    assert!(w1 < 5e-4, "W1 to the quantile average = {w1:e}");
    let mean: f64 = x.iter().zip(got.histogram.iter()).map(|(t, h)| t * h).sum();
    assert!(
        (mean - (w[0] * 0.2 + w[1] * 0.7)).abs() < 1e-3,
        "mean {mean}"
    );
}

#[test]
fn batched_problems_match_one_at_a_time() {
    let imgs = bary64_images(16).into_shape_with_order((3, 256)).unwrap();
    let ws = array![[1.0, 0.0, 0.0], [0.3, 0.3, 0.4], [0.0, 0.5, 0.5]];
    let batch: Array3<f64> = ndarray::stack![Axis(0), imgs, imgs, imgs];
    let grid = GridCost::image(16, 16).unwrap();
    let p = BarycenterParams::new(0.01);
    let all = BarycenterSolver::new(CpuBackend, p)
        .solve(
            &BarycenterProblem::new(batch.view(), ws.view()).unwrap(),
            grid.clone(),
        )
        .unwrap();
    for (k, one) in all.iter().enumerate() {
        let alone = BarycenterParams::new(0.01).fixed_iterations(one.iterations);
        let want =
            common::bary::barycenter(imgs.view(), ws.row(k), grid.clone(), &alone, None).unwrap();
        let err = l1(
            one.histogram.as_slice().unwrap(),
            want.histogram.as_slice().unwrap(),
        );
        assert!(err < 1e-13, "problem {k}: {err:e}");
    }
    assert!(all.iter().all(|b| b.converged));
}

#[test]
fn invalid_inputs_are_errors_naming_the_argument() {
    let h = array![[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]];
    let cost = array![[0.0, 1.0, 4.0], [1.0, 0.0, 1.0], [4.0, 1.0, 0.0]];
    let p = BarycenterParams::new(0.1);
    let msg = |r: Result<logot::BarycenterResult<f64>, Error>| {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    };
    assert!(msg(common::bary::barycenter(
        h.view(),
        array![0.5, 0.6].view(),
        cost.view(),
        &p,
        None
    ))
    .contains("weights"));
    assert!(msg(common::bary::barycenter(
        h.view(),
        array![1.5, -0.5].view(),
        cost.view(),
        &p,
        None
    ))
    .contains("weights"));
    assert!(msg(common::bary::barycenter(
        h.view(),
        array![1.0].view(),
        cost.view(),
        &p,
        None
    ))
    .contains("weights"));
    assert!(msg(common::bary::barycenter(
        h.view(),
        array![0.5, 0.5].view(),
        cost.slice(s![.., ..2]).t(),
        &p,
        None
    ))
    .contains("cost"));
    let bad = array![[0.5, 0.5, 0.0], [0.0, -0.5, 1.5]];
    assert!(msg(common::bary::barycenter(
        bad.view(),
        array![0.5, 0.5].view(),
        cost.view(),
        &p,
        None
    ))
    .contains("histograms"));
    let unequal = array![[0.5, 0.5, 0.0], [0.0, 1.5, 0.5]];
    assert!(msg(common::bary::barycenter(
        unequal.view(),
        array![0.5, 0.5].view(),
        cost.view(),
        &p,
        None
    ))
    .contains("histograms"));
    let nan = array![[0.5, f64::NAN, 0.0], [0.0, 0.5, 0.5]];
    assert!(msg(common::bary::barycenter(
        nan.view(),
        array![0.5, 0.5].view(),
        cost.view(),
        &p,
        None
    ))
    .contains("histograms"));
    assert!(msg(common::bary::barycenter(
        h.view(),
        array![0.5, 0.5].view(),
        cost.view(),
        &BarycenterParams::new(0.0),
        None
    ))
    .contains("eps"));
    assert!(msg(common::bary::barycenter(
        h.view(),
        array![0.5, 0.5].view(),
        GridCost::new(&[4]).unwrap(),
        &p,
        None
    ))
    .contains("cost"));
    let three = Array3::<f64>::ones((2, 3, 3));
    assert!(matches!(
        common::bary::barycenter(h.view(), array![0.5, 0.5].view(), three.view(), &p, None),
        Err(Error::Shape { .. })
    ));
}

/// A cost prepared once gives the same barycenters as solving with the cost each time,
/// for a grid and a dense cost, one problem and a batch; a prepared cost whose rows do not
/// match the histograms is refused with a message naming the cost.
#[test]
fn prepared_cost_gives_the_same_barycenters_and_checks_sizes() {
    use logot::CostSource;
    let imgs = bary64_images(12).into_shape_with_order((3, 144)).unwrap();
    let w = array![0.3, 0.3, 0.4];
    let grid = GridCost::image(12, 12).unwrap();
    let dense = grid.to_dense::<f64>();
    let solver =
        BarycenterSolver::new(CpuBackend, BarycenterParams::new(0.01).fixed_iterations(25));
    for cost in [
        CostSource::Grid(grid.clone()),
        CostSource::Dense(dense.view()),
    ] {
        let problem = BarycenterProblem::new(imgs.view(), w.view()).unwrap();
        let once = solver.solve(&problem, cost.clone()).unwrap().remove(0);
        let prepared = solver.prepare(cost).unwrap();
        assert_eq!(prepared.dims(), (144, 144));
        for _ in 0..2 {
            let again = solver.solve(&problem, &prepared).unwrap().remove(0);
            assert_eq!(again.histogram, once.histogram);
            assert_eq!(
                (again.iterations, again.error),
                (once.iterations, once.error)
            );
        }
        let batch = imgs.clone().insert_axis(Axis(0));
        let bw = w.clone().insert_axis(Axis(0));
        let b = solver
            .solve(
                &BarycenterProblem::new(batch.view(), bw.view()).unwrap(),
                &prepared,
            )
            .unwrap();
        assert_eq!(b[0].histogram, once.histogram);
        let small = Array2::from_elem((3, 100), 0.01);
        let err = solver
            .solve(
                &BarycenterProblem::new(small.view(), w.view()).unwrap(),
                &prepared,
            )
            .unwrap_err();
        assert!(
            matches!(err, Error::Shape { .. }) && err.to_string().contains("cost"),
            "{err}"
        );
    }
}
