//! Sinkhorn on a [`GridCost`] (separable log-convolutions) against the same problem with
//! the dense cost matrix of the grid (the existing, independent dense kernels).

use crate::common;
use logot::{CpuBackend, Error, GridCost, Problem, SinkhornParams, SinkhornSolver};
use ndarray::{Array2, Axis};

/// `b` random histograms of `n` bins; bins listed in `zeros` are empty.
fn histograms(b: usize, n: usize, seed: u64, zeros: &[usize]) -> Array2<f64> {
    let mut rnd = common::uniforms(seed);
    let mut h = Array2::from_shape_fn((b, n), |_| rnd() + 0.05);
    for mut row in h.rows_mut() {
        for &z in zeros {
            row[z] = 0.0;
        }
        let s = row.sum();
        row /= s;
    }
    h
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| if x == y { 0.0 } else { (x - y).abs() })
        .fold(0.0, f64::max)
}

#[test]
fn grid_solver_matches_dense_solver_in_1d_2d_3d() {
    for (shape, eps) in [
        (vec![50usize], 1e-3),
        (vec![7, 9], 0.01),
        (vec![4, 5, 3], 0.05),
    ] {
        let grid = GridCost::new(&shape).unwrap();
        let n = grid.len();
        let (mu, nu) = (histograms(2, n, 1, &[]), histograms(2, n, 2, &[]));
        let dense = grid.to_dense::<f64>();
        let params = SinkhornParams::new(eps).fixed_iterations(200);
        let solver = SinkhornSolver::new(CpuBackend, params);
        let on_grid = solver
            .coupling(&Problem::new(mu.view(), nu.view(), grid.clone()).unwrap())
            .unwrap();
        let on_dense = solver
            .coupling(&Problem::new(mu.view(), nu.view(), dense.view()).unwrap())
            .unwrap();
        let (rg, rd) = (&on_grid.result, &on_dense.result);
        assert!(
            max_abs_diff(rg.f.as_slice().unwrap(), rd.f.as_slice().unwrap()) < 1e-11,
            "{shape:?}: f"
        );
        assert!(
            max_abs_diff(rg.g.as_slice().unwrap(), rd.g.as_slice().unwrap()) < 1e-11,
            "{shape:?}: g"
        );
        for b in 0..2 {
            let rel = (rg.distance[b] - rd.distance[b]).abs() / rd.distance[b];
            assert!(
                rel < 1e-11,
                "{shape:?}: distance {} vs {}",
                rg.distance[b],
                rd.distance[b]
            );
        }
        let dp = max_abs_diff(
            on_grid.plan.as_slice().unwrap(),
            on_dense.plan.as_slice().unwrap(),
        );
        assert!(dp < 1e-14, "{shape:?}: plan differs by {dp:e}");
        assert!((rg.convergence.marginal_error - rd.convergence.marginal_error).abs() < 1e-10);
    }
}

#[test]
fn zero_mass_bins_and_empty_image_columns_on_a_grid() {
    // Empty bins give −∞ potentials; whole empty columns and rows of an image exercise the
    // all-−∞ lines of the 2-D convolution.
    let shape = [6usize, 8];
    let grid = GridCost::new(&shape).unwrap();
    let n = grid.len();
    let empty_column: Vec<usize> = (0..6).map(|r| r * 8 + 3).collect();
    let empty_row: Vec<usize> = (16..24).collect();
    let mu = histograms(1, n, 3, &empty_column);
    let nu = histograms(1, n, 4, &empty_row);
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.02));
    let on_grid = solver
        .solve(&Problem::new(mu.view(), nu.view(), grid.clone()).unwrap())
        .unwrap();
    let dense = grid.to_dense::<f64>();
    let on_dense = solver
        .solve(&Problem::new(mu.view(), nu.view(), dense.view()).unwrap())
        .unwrap();
    assert!(on_grid.convergence.converged && on_dense.convergence.converged);
    assert_eq!(
        on_grid.convergence.iterations,
        on_dense.convergence.iterations
    );
    assert!(on_grid
        .f
        .iter()
        .zip(&on_dense.f)
        .all(|(a, b)| (a == b) || (a - b).abs() < 1e-11));
    assert!(empty_column
        .iter()
        .all(|&k| on_grid.f[[0, k]] == f64::NEG_INFINITY));
    let rel = (on_grid.distance[0] - on_dense.distance[0]).abs() / on_dense.distance[0];
    assert!(
        rel < 1e-11,
        "{} vs {}",
        on_grid.distance[0],
        on_dense.distance[0]
    );
}

#[test]
fn f32_on_a_grid_agrees_with_f64() {
    let grid = GridCost::image(16, 16).unwrap();
    let (mu, nu) = (histograms(1, 256, 5, &[]), histograms(1, 256, 6, &[]));
    let p = SinkhornParams::new(5e-3).fixed_iterations(300);
    let r64 = SinkhornSolver::new(CpuBackend, p.clone())
        .solve(&Problem::new(mu.view(), nu.view(), grid.clone()).unwrap())
        .unwrap();
    let (mu32, nu32) = (mu.mapv(|v| v as f32), nu.mapv(|v| v as f32));
    let r32 = SinkhornSolver::new(CpuBackend, p)
        .solve(&Problem::new(mu32.view(), nu32.view(), grid).unwrap())
        .unwrap();
    let rel = (r32.distance[0] as f64 - r64.distance[0]).abs() / r64.distance[0];
    assert!(
        rel < 1e-4,
        "f32 {} vs f64 {}",
        r32.distance[0],
        r64.distance[0]
    );
}

#[test]
fn grid_plans_too_large_to_store_are_an_error_not_an_allocation() {
    let grid = GridCost::image(128, 128).unwrap(); // n² = 2^28 entries per plan
    let h = histograms(1, grid.len(), 7, &[]);
    let solver = SinkhornSolver::new(CpuBackend, SinkhornParams::new(0.01).fixed_iterations(2));
    let problem = Problem::new(h.view(), h.view(), grid).unwrap();
    let solved = solver.solve(&problem).unwrap();
    assert!(solved.distance[0].is_finite() && solved.distance[0] >= 0.0);
    match solver.coupling(&problem) {
        Err(Error::Unavailable(msg)) => assert!(msg.contains("potentials"), "{msg}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert_eq!(h.len_of(Axis(1)), 16384);
}
