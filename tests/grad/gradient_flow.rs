//! The gradient flow of `examples/gradient_flow.rs` (the example's own `flow`, `clouds` and
//! `solver`, included as a module), on small seeded problems at several dimensions: the
//! Sinkhorn divergence decreases at every step for a small step size, ends far below its
//! start, and its first decrease is the one the gradient predicts to first order,
//! `S(x) − S(x − h·g) ≈ h·|g|²` with `h = lr·n` and `g = (x_k − x_{k+1})/h` read back
//! from the iterates.
#![cfg(feature = "plot")]

#[allow(dead_code)]
#[path = "../../examples/gradient_flow.rs"]
mod example;

use logot::{CpuBackend, CrossPrecision};
use ndarray::Array2;

/// The divergences and the iterates of `steps` steps of the flow at dimension `dim`.
fn run(dim: usize, n: usize, lr: f64, steps: usize) -> (Vec<f64>, Vec<Array2<f64>>) {
    let (mut x, y) = example::clouds(dim, n, 11 + dim as u64);
    let eps = 0.02 * dim as f64;
    let solver = example::solver(CpuBackend, &x, &y, eps).unwrap();
    let mut iterates = Vec::new();
    let values = example::flow(
        &solver,
        &mut x,
        y.view(),
        (lr, steps),
        CrossPrecision::Exact,
        |_, _, xk| {
            iterates.push(xk.to_owned());
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(values.len(), steps + 1);
    assert_eq!(iterates.len(), steps + 1);
    (values, iterates)
}

#[test]
fn the_divergence_decreases_at_every_step_and_ends_low() {
    for dim in [2, 7] {
        let (values, _) = run(dim, 40, 0.1, 12);
        for (k, w) in values.windows(2).enumerate() {
            assert!(w[1] < w[0], "d = {dim}, step {k}: {} → {}", w[0], w[1]);
        }
        let (first, last) = (values[0], values[values.len() - 1]);
        assert!(first > 1.0, "d = {dim}: S_ε starts at {first}");
        assert!(
            last < 0.05 * first,
            "d = {dim}: S_ε went from {first} to {last}"
        );
    }
}

#[test]
fn the_first_decrease_is_the_gradients_first_order_prediction() {
    let (n, lr) = (30, 0.002);
    for dim in [2, 5] {
        let (values, xs) = run(dim, n, lr, 1);
        let h = lr * n as f64;
        // h·|g|² with g = (x₀ − x₁)/h.
        let predicted = (&xs[0] - &xs[1]).mapv(|v| v * v).sum() / h;
        let actual = values[0] - values[1];
        let ratio = actual / predicted;
        assert!(
            (ratio - 1.0).abs() < 0.03,
            "d = {dim}: S decreased by {actual}, the gradient predicts {predicted} (ratio {ratio})"
        );
    }
}
