//! Permutation recovery: a rotated, shifted and permuted copy of a point cloud has the same
//! distance matrix up to the permutation, so the permutation is a GW plan of value 0. The
//! entropic solver's plan puts each point's largest mass on its image, and the exact solver
//! returns the permutation itself with a zero value.

use crate::common::Lcg;
use logot::gromov::{
    ConditionalGradient, ConditionalGradientParams, EntropicGwParams, GromovProblem, GromovSolver,
};
use logot::CpuBackend;
use ndarray::{array, Array1, Array2};

/// Squared Euclidean distances `|x_i − x_k|²`, formed here.
fn sqdist(x: &Array2<f64>) -> Array2<f64> {
    let n = x.nrows();
    Array2::from_shape_fn((n, n), |(i, k)| {
        x.row(i)
            .iter()
            .zip(x.row(k))
            .map(|(a, b)| (a - b) * (a - b))
            .sum()
    })
}

/// Both structures divided by the largest entry of the first (the same scale for both).
fn normalised(c1: Array2<f64>, c2: Array2<f64>) -> (Array2<f64>, Array2<f64>) {
    let s = c1.iter().fold(0.0f64, |a, &b| a.max(b));
    (c1 / s, c2 / s)
}

/// An anisotropic cloud (distinct distance profiles) of `n` points in 3-D and its copy
/// `y[perm[i]] = R·x[i] + shift`, with a seeded rotation and permutation.
fn cloud_and_copy(seed: u64, n: usize) -> (Array2<f64>, Array2<f64>, Vec<usize>) {
    let mut r = Lcg(seed);
    let x = Array2::from_shape_fn((n, 3), |(_, k)| [1.0, 0.5, 0.25][k] * r.normal());
    let (a, b) = (r.uniform(0.0, 6.0), r.uniform(0.0, 3.0));
    let rz = array![
        [a.cos(), -a.sin(), 0.0],
        [a.sin(), a.cos(), 0.0],
        [0.0, 0.0, 1.0]
    ];
    let rx = array![
        [1.0, 0.0, 0.0],
        [0.0, b.cos(), -b.sin()],
        [0.0, b.sin(), b.cos()]
    ];
    let rot = rz.dot(&rx);
    let mut perm: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = ((r.next() * (i + 1) as f64) as usize).min(i);
        perm.swap(i, j);
    }
    let mut y = Array2::zeros((n, 3));
    for (i, &pi) in perm.iter().enumerate() {
        let v = rot.dot(&x.row(i)) + 2.5;
        y.row_mut(pi).assign(&v);
    }
    (x, y, perm)
}

#[test]
fn entropic_gw_recovers_the_permutation() {
    for seed in [1u64, 17] {
        let n = 24;
        let (x, y, perm) = cloud_and_copy(seed, n);
        let (c1, c2) = normalised(sqdist(&x), sqdist(&y));
        let w = Array1::from_elem(n, 1.0 / n as f64);
        let problem = GromovProblem::new(c1.view(), c2.view(), w.view(), w.view()).unwrap();
        let params = EntropicGwParams::new(5e-4)
            .inner_tol(1e-7)
            .inner_max_iters(20_000)
            .max_iters(40);
        let r = GromovSolver::new(CpuBackend, params)
            .solve(&problem)
            .unwrap();
        eprintln!(
            "seed {seed}: entropic value {:.3e}, outer {}, converged {}, smallest image mass·n {:.3}",
            r.value,
            r.report.iterations,
            r.report.converged,
            (0..n).map(|i| r.plan[[i, perm[i]]]).fold(1.0f64, f64::min) * n as f64
        );
        for (i, &pi) in perm.iter().enumerate() {
            let row = r.plan.row(i);
            let best = (0..n).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
            assert_eq!(best, pi, "seed {seed}, point {i}");
            // The row's mass is 1/n; a uniform row would put 1/n² on each entry.
            assert!(
                row[best] > 0.2 / n as f64,
                "seed {seed}, point {i}: {}",
                row[best]
            );
        }
        // At this ε the inner solves approach the plan slowly; the plan handed back meets its
        // marginals to the reported error.
        assert!(r.report.marginal_error < 1e-5, "{:?}", r.report);
    }
}

#[test]
fn exact_gw_recovers_the_permutation() {
    for seed in [3u64, 17] {
        let n = 30;
        let (x, y, perm) = cloud_and_copy(seed, n);
        let (c1, c2) = normalised(sqdist(&x), sqdist(&y));
        let w = Array1::from_elem(n, 1.0 / n as f64);
        let problem = GromovProblem::new(c1.view(), c2.view(), w.view(), w.view()).unwrap();
        let r = ConditionalGradient::new(CpuBackend, ConditionalGradientParams::default())
            .solve_network_simplex(&problem)
            .unwrap();
        eprintln!(
            "seed {seed}: exact value {:.3e}, iterations {}, gap {:.2e}",
            r.value, r.report.iterations, r.report.gap
        );
        for (i, &pi) in perm.iter().enumerate() {
            for j in 0..n {
                let want = if j == pi { 1.0 / n as f64 } else { 0.0 };
                assert!(
                    (r.plan[[i, j]] - want).abs() < 1e-12,
                    "seed {seed}: plan[{i}, {j}] = {}",
                    r.plan[[i, j]]
                );
            }
        }
        // The structures are at most 1: the value and the gap are 0 up to rounding.
        assert!(r.value.abs() < 1e-12, "seed {seed}: value {}", r.value);
        assert!(
            r.report.converged && r.report.gap.abs() < 1e-12,
            "{:?}",
            r.report
        );
    }
}
