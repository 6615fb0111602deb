//! Batched, matrix-free conjugate gradients for symmetric positive semi-definite systems
//! (the algorithm in `src/cg.rs`, below the backends), and [`BackendSpace`]: its vectors on
//! a backend's buffers.
//!
//! Solves `A_b x_b = r_b` for every problem `b` of a batch at once; each problem has its
//! own step sizes and stops on its own when `‖r_b − A_b x_b‖ ≤ tol·‖r_b‖`. `A` is only
//! applied ([`CgOperator`]), never formed. A known null vector `w` (for the OT adjoint
//! systems, the constant vector: potentials are defined up to `(+k, −k)`) is handled by
//! projection — the right-hand side and every residual are made orthogonal to `w`, and
//! the solution returned is the representative with `⟨x_b, w_b⟩ = 0` — never by adding a
//! ridge.

pub use crate::cg::{
    conjugate_gradient, CgOperator, CgOutcome, CgParams, CgReport, CgSpace, CgSummary,
};

use crate::backend::{grad::GradKernels, Backend};
use crate::{Real, Result};
use std::marker::PhantomData;

/// Batched vectors resident on a backend: `batch` problems of `len` entries, `B×len`.
pub struct BackendSpace<'a, T: Real, B: GradKernels<T>> {
    backend: &'a B,
    batch: usize,
    len: usize,
    _t: PhantomData<T>,
}

impl<'a, T: Real, B: GradKernels<T>> BackendSpace<'a, T, B> {
    /// `batch` problems of `len` entries each, on `backend`.
    pub fn new(backend: &'a B, batch: usize, len: usize) -> Self {
        BackendSpace {
            backend,
            batch,
            len,
            _t: PhantomData,
        }
    }
    /// The backend.
    pub fn backend(&self) -> &'a B {
        self.backend
    }
}

impl<T: Real, B: GradKernels<T>> CgSpace for BackendSpace<'_, T, B> {
    type Vector = <B as Backend<T>>::Buffer;
    type Scalars = Vec<f64>;
    fn batch(&self) -> usize {
        self.batch
    }
    fn scalars(&self) -> Vec<f64> {
        vec![0.0; self.batch]
    }
    fn zeros(&self) -> Result<Self::Vector> {
        self.backend.filled(self.batch * self.len, T::zero())
    }
    fn duplicate(&self, v: &Self::Vector) -> Result<Self::Vector> {
        let mut out = self.backend.filled(self.backend.len(v), T::zero())?;
        let zeros = vec![0.0; self.batch];
        self.backend.batched_xpby(v, &zeros, &mut out)?;
        Ok(out)
    }
    fn dot(&self, x: &Self::Vector, y: &Self::Vector, out: &mut [f64]) -> Result<()> {
        let d = self.backend.batched_dot(self.batch, x, y)?;
        out.copy_from_slice(&d);
        Ok(())
    }
    fn axpy(&self, alpha: &[f64], x: &Self::Vector, y: &mut Self::Vector) -> Result<()> {
        self.backend.batched_axpy(alpha, x, y)
    }
    fn xpby(&self, x: &Self::Vector, beta: &[f64], y: &mut Self::Vector) -> Result<()> {
        self.backend.batched_xpby(x, beta, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;

    /// Dense symmetric operator on the CPU backend, batch of `B` `n×n` matrices.
    struct Dense {
        a: Vec<f64>,
        n: usize,
    }
    impl CgOperator<BackendSpace<'_, f64, CpuBackend>> for Dense {
        fn apply(
            &mut self,
            s: &BackendSpace<'_, f64, CpuBackend>,
            x: &Vec<f64>,
            y: &mut Vec<f64>,
        ) -> Result<()> {
            s.backend().plan_matvec(&self.a, self.n, self.n, x, y)
        }
    }

    /// A graph Laplacian (PSD, null vector 1) and an SPD matrix; compare with a dense solve.
    #[test]
    fn solves_spd_and_singular_laplacian_batch_with_per_problem_convergence() {
        let n = 6;
        let mut a = vec![0.0; 2 * n * n];
        // Problem 0: SPD, A = M Mᵀ + I.
        let mut uniform = crate::test_rng::uniforms(7);
        let mut next = || uniform() - 0.5;
        let mmat: Vec<f64> = (0..n * n).map(|_| next()).collect();
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = (0..n)
                    .map(|k| mmat[i * n + k] * mmat[j * n + k])
                    .sum::<f64>()
                    + if i == j { 1.0 } else { 0.0 };
            }
        }
        // Problem 1: Laplacian of a weighted complete graph.
        let w: Vec<f64> = (0..n * n).map(|_| next() + 0.6).collect();
        for i in 0..n {
            for j in 0..n {
                if i != j {
                    let wij = 0.5 * (w[i * n + j] + w[j * n + i]);
                    a[n * n + i * n + j] = -wij;
                    a[n * n + i * n + i] += wij;
                }
            }
        }
        let rhs: Vec<f64> = (0..2 * n).map(|_| next()).collect();
        let mut null = vec![0.0; 2 * n];
        null[n..].fill(1.0); // problem 0 has no null space: w = 0 disables the projection
        let be = CpuBackend;
        let space = BackendSpace::<f64, _>::new(&be, 2, n);
        let mut out = vec![CgOutcome::default(); 2];
        let x = conjugate_gradient(
            &space,
            &mut Dense { a: a.clone(), n },
            &rhs,
            Some(&null),
            1e-12,
            100,
            &mut out,
        )
        .unwrap();
        assert!(
            out.iter().all(|o| o.converged && o.residual < 1e-11),
            "{out:?}"
        );
        // Problem 0: A x = rhs exactly.
        for i in 0..n {
            let ax: f64 = (0..n).map(|j| a[i * n + j] * x[j]).sum();
            assert!((ax - rhs[i]).abs() < 1e-10);
        }
        // Problem 1: A x = rhs − mean(rhs), and x has zero mean.
        let mean = rhs[n..].iter().sum::<f64>() / n as f64;
        for i in 0..n {
            let ax: f64 = (0..n).map(|j| a[n * n + i * n + j] * x[n + j]).sum();
            assert!((ax - (rhs[n + i] - mean)).abs() < 1e-10);
        }
        assert!(x[n..].iter().sum::<f64>().abs() < 1e-12);
        // A zero right-hand side converges at once to 0.
        let zero = vec![0.0; 2 * n];
        let x0 = conjugate_gradient(
            &space,
            &mut Dense { a, n },
            &zero,
            Some(&null),
            1e-12,
            100,
            &mut out,
        )
        .unwrap();
        assert!(
            x0.iter().all(|&v| v == 0.0) && out.iter().all(|o| o.converged && o.iterations == 0)
        );
    }

    #[test]
    fn reports_non_convergence_at_the_iteration_limit() {
        let n = 8;
        let a: Vec<f64> = (0..n * n)
            .map(|k| {
                if k % (n + 1) == 0 {
                    1.0 + (k / (n + 1)) as f64 * 10.0
                } else {
                    0.0
                }
            })
            .collect();
        let rhs = vec![1.0; n];
        let be = CpuBackend;
        let space = BackendSpace::<f64, _>::new(&be, 1, n);
        let mut out = vec![CgOutcome::default(); 1];
        conjugate_gradient(&space, &mut Dense { a, n }, &rhs, None, 1e-12, 2, &mut out).unwrap();
        assert!(
            !out[0].converged && out[0].iterations == 2 && out[0].residual > 1e-6,
            "{out:?}"
        );
    }
}
