//! Batched, matrix-free conjugate gradients for symmetric positive semi-definite systems.
//!
//! Solves `A_b x_b = r_b` for every problem `b` of a batch at once; each problem has its
//! own step sizes and stops on its own when `‖r_b − A_b x_b‖ ≤ tol·‖r_b‖`. `A` is only
//! applied ([`CgOperator`]), never formed. A known null vector `w` (for the OT adjoint
//! systems, the constant vector: potentials are defined up to `(+k, −k)`) is handled by
//! projection — the right-hand side and every residual are made orthogonal to `w`, and
//! the solution returned is the representative with `⟨x_b, w_b⟩ = 0` — never by adding a
//! ridge.
//!
//! The algorithm is written once over a [`CgSpace`] (the vector operations) and runs on a
//! backend's buffers ([`BackendSpace`](crate::grad::cg::BackendSpace), beside the kernels
//! it uses in `backend/grad.rs`; used by the OT gradients) as well as on small stack vectors
//! (one `n ≤ 32` problem at a time, used by the CPU bistochastic backward).
//!
//! This module sits below the backends, which report CG outcomes and run the small solves;
//! its public face is [`crate::grad::cg`].

// Per-problem / per-index loops over several parallel arrays read best with an index.
#![allow(clippy::needless_range_loop)]

use crate::{Error, Real, Result};

/// Parameters of the CG solver, set by builder methods (`CgParams::default().tol(1e-12)`).
/// `Default`: at most 1000 iterations, precision-dependent tolerance.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CgParams {
    /// Maximum number of CG iterations per problem.
    pub max_iters: usize,
    /// Target relative residual `‖r − A x‖ / ‖r‖`; `None` picks the precision's default
    /// (1e-10 for f64, 1e-5 for f32).
    pub tol: Option<f64>,
}

impl Default for CgParams {
    fn default() -> Self {
        CgParams {
            max_iters: 1000,
            tol: None,
        }
    }
}

impl CgParams {
    /// These parameters with at most `max_iters` iterations per problem.
    pub fn max_iters(self, max_iters: usize) -> Self {
        CgParams { max_iters, ..self }
    }
    /// These parameters with the relative tolerance `tol` (`None`: the precision's default).
    pub fn tol(self, tol: impl Into<Option<f64>>) -> Self {
        CgParams {
            tol: tol.into(),
            ..self
        }
    }

    /// The tolerance used in precision `T`.
    pub fn tol_for<T: Real>() -> f64 {
        if T::NAME == "float64" {
            1e-10
        } else {
            1e-5
        }
    }

    /// The tolerance in effect for precision `T`.
    pub fn effective_tol<T: Real>(&self) -> f64 {
        self.tol.unwrap_or_else(Self::tol_for::<T>)
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.max_iters == 0 {
            return Err(Error::parameter(
                "cg.max_iters",
                0,
                "at least one iteration is needed",
            ));
        }
        if let Some(t) = self.tol {
            if !(t.is_finite() && t >= 0.0) {
                return Err(Error::parameter("cg.tol", t, "must be finite and ≥ 0"));
            }
        }
        Ok(())
    }
}

/// How CG ended for one problem.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct CgOutcome {
    /// Iterations run.
    pub iterations: usize,
    /// Relative residual of the returned solution, `‖r − A x‖ / ‖r‖` (recomputed, not the
    /// recursive estimate; both sides projected off the null vector). 0 when `r = 0`.
    pub residual: f64,
    /// The recursive residual met the tolerance (otherwise the iteration limit was hit or
    /// the search direction lost positive curvature).
    pub converged: bool,
}

/// How CG ended for every problem of a batch.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CgReport {
    /// One entry per problem.
    pub problems: Vec<CgOutcome>,
    /// The tolerance that was asked for.
    pub tol: f64,
}

impl CgReport {
    /// Every problem converged.
    pub fn all_converged(&self) -> bool {
        self.problems.iter().all(|p| p.converged)
    }
    /// Largest iteration count over the batch.
    pub fn max_iterations(&self) -> usize {
        self.problems
            .iter()
            .map(|p| p.iterations)
            .max()
            .unwrap_or(0)
    }
    /// Largest relative residual over the batch.
    pub fn max_residual(&self) -> f64 {
        self.problems.iter().map(|p| p.residual).fold(0.0, f64::max)
    }
    /// Number of problems that did not converge.
    pub fn failures(&self) -> usize {
        self.problems.iter().filter(|p| !p.converged).count()
    }
    /// The batch's [`CgSummary`].
    pub fn summary(&self) -> CgSummary {
        CgSummary::of(&self.problems, self.tol)
    }
}

/// How CG ended over a batch, as a few numbers: what a backend reduces where the problems were
/// solved (a GPU reads back these numbers, not one outcome per problem). Equal to
/// [`CgSummary::of`] the per-problem outcomes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct CgSummary {
    /// Number of problems.
    pub problems: usize,
    /// Largest iteration count.
    pub max_iterations: usize,
    /// Largest relative residual [`CgOutcome::residual`].
    pub max_residual: f64,
    /// Number of problems that did not converge (iteration limit, or no positive curvature
    /// left).
    pub unconverged: usize,
    /// Index of the first of them.
    pub first_unconverged: Option<usize>,
    /// The tolerance that was asked for.
    pub tol: f64,
}

impl CgSummary {
    /// The summary of per-problem outcomes.
    pub fn of(outcomes: &[CgOutcome], tol: f64) -> Self {
        CgSummary {
            problems: outcomes.len(),
            max_iterations: outcomes.iter().map(|p| p.iterations).max().unwrap_or(0),
            max_residual: outcomes.iter().map(|p| p.residual).fold(0.0, f64::max),
            unconverged: outcomes.iter().filter(|p| !p.converged).count(),
            first_unconverged: outcomes.iter().position(|p| !p.converged),
            tol,
        }
    }
    /// Every problem converged.
    pub fn all_converged(&self) -> bool {
        self.unconverged == 0
    }
}

/// The vector operations CG needs, over a batch of problems (each problem one vector).
pub trait CgSpace {
    /// A batch of vectors.
    type Vector;
    /// One `f64` per problem (host side).
    type Scalars: AsRef<[f64]> + AsMut<[f64]>;
    /// Number of problems.
    fn batch(&self) -> usize;
    /// Zeroed per-problem scalars.
    fn scalars(&self) -> Self::Scalars;
    /// A zero batch of vectors.
    fn zeros(&self) -> Result<Self::Vector>;
    /// A copy.
    fn duplicate(&self, v: &Self::Vector) -> Result<Self::Vector>;
    /// `out[b] = ⟨x_b, y_b⟩`.
    fn dot(&self, x: &Self::Vector, y: &Self::Vector, out: &mut [f64]) -> Result<()>;
    /// `y_b += alpha[b]·x_b`.
    fn axpy(&self, alpha: &[f64], x: &Self::Vector, y: &mut Self::Vector) -> Result<()>;
    /// `y_b = x_b + beta[b]·y_b`.
    fn xpby(&self, x: &Self::Vector, beta: &[f64], y: &mut Self::Vector) -> Result<()>;
}

/// A batch of symmetric positive semi-definite linear maps, applied matrix-free.
pub trait CgOperator<S: CgSpace> {
    /// `y_b = A_b x_b` for every problem.
    fn apply(&mut self, space: &S, x: &S::Vector, y: &mut S::Vector) -> Result<()>;
}

/// Remove from `v` its component along the null vectors `w` (`⟨w, w⟩` given per problem).
fn project<S: CgSpace>(
    space: &S,
    w: &S::Vector,
    ww: &[f64],
    v: &mut S::Vector,
    tmp: &mut S::Scalars,
) -> Result<()> {
    space.dot(v, w, tmp.as_mut())?;
    for (c, &n) in tmp.as_mut().iter_mut().zip(ww) {
        *c = if n > 0.0 { -*c / n } else { 0.0 };
    }
    space.axpy(tmp.as_ref(), w, v)
}

/// Solve `A_b x_b = rhs_b` for every problem of the batch by conjugate gradients from
/// `x = 0`, projecting off the null vectors `null` (one per problem, e.g. the support
/// indicator) when given. Writes one [`CgOutcome`] per problem into `outcomes` and returns
/// `x` (with `⟨x_b, w_b⟩ = 0` when a null vector is given).
///
/// `tol` is the relative residual target; non-convergence is reported in `outcomes`, not an
/// error. Errors: a non-finite right-hand side or a backend failure.
///
/// ```
/// use logot::grad::{conjugate_gradient, BackendSpace, CgOperator, CgOutcome};
/// use logot::CpuBackend;
/// /// Diagonal maps `A_b = diag(d_b)`, applied entry by entry (CPU buffers are `Vec`s).
/// struct Diagonal(Vec<f64>);
/// impl CgOperator<BackendSpace<'_, f64, CpuBackend>> for Diagonal {
///     fn apply(&mut self, _: &BackendSpace<'_, f64, CpuBackend>, x: &Vec<f64>, y: &mut Vec<f64>) -> logot::Result<()> {
///         y.iter_mut().zip(x).zip(&self.0).for_each(|((y, x), d)| *y = d * x);
///         Ok(())
///     }
/// }
/// // Two problems of 3 unknowns, solved together.
/// let space = BackendSpace::new(&CpuBackend, 2, 3);
/// let mut op = Diagonal(vec![1.0, 2.0, 4.0, 3.0, 3.0, 3.0]);
/// let rhs = vec![1.0, 2.0, 4.0, 3.0, 6.0, 9.0];
/// let mut outcomes = vec![CgOutcome::default(); 2];
/// let x = conjugate_gradient(&space, &mut op, &rhs, None, 1e-12, 10, &mut outcomes)?;
/// let expected = [1.0, 1.0, 1.0, 1.0, 2.0, 3.0];
/// assert!(x.iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-12));
/// assert!(outcomes.iter().all(|o| o.converged && o.iterations <= 3)); // ≤ distinct eigenvalues
/// # Ok::<(), logot::Error>(())
/// ```
pub fn conjugate_gradient<S: CgSpace, A: CgOperator<S>>(
    space: &S,
    op: &mut A,
    rhs: &S::Vector,
    null: Option<&S::Vector>,
    tol: f64,
    max_iters: usize,
    outcomes: &mut [CgOutcome],
) -> Result<S::Vector> {
    let batch = space.batch();
    if outcomes.len() != batch {
        return Err(Error::shape(
            "outcomes",
            format!("has {} entries for {batch} problems", outcomes.len()),
        ));
    }
    let mut tmp = space.scalars();
    let mut ww = space.scalars();
    if let Some(w) = null {
        space.dot(w, w, ww.as_mut())?;
    }
    let mut r = space.duplicate(rhs)?;
    if let Some(w) = null {
        project(space, w, ww.as_ref(), &mut r, &mut tmp)?;
    }
    let mut rs = space.scalars();
    space.dot(&r, &r, rs.as_mut())?;
    let mut bnorm = space.scalars();
    let mut active = vec![false; batch];
    for b in 0..batch {
        let v = rs.as_ref()[b];
        if !v.is_finite() {
            return Err(Error::Numerical(format!(
                "CG: the right-hand side of problem {b} is not finite"
            )));
        }
        bnorm.as_mut()[b] = v.sqrt();
        active[b] = v > 0.0 && tol < 1.0;
        outcomes[b] = CgOutcome {
            iterations: 0,
            residual: 0.0,
            converged: !active[b],
        };
    }
    let mut x = space.zeros()?;
    let mut p = space.duplicate(&r)?;
    let mut q = space.zeros()?;
    let mut alpha = space.scalars();
    let mut beta = space.scalars();
    let mut rs_new = space.scalars();
    for _ in 0..max_iters {
        if !active.iter().any(|&a| a) {
            break;
        }
        op.apply(space, &p, &mut q)?;
        space.dot(&p, &q, tmp.as_mut())?;
        for b in 0..batch {
            let pq = tmp.as_ref()[b];
            alpha.as_mut()[b] = 0.0;
            if active[b] {
                if pq > 0.0 && pq.is_finite() {
                    alpha.as_mut()[b] = rs.as_ref()[b] / pq;
                } else {
                    // No positive curvature left along p: stop this problem, unconverged.
                    active[b] = false;
                }
            }
        }
        space.axpy(alpha.as_ref(), &p, &mut x)?;
        for a in alpha.as_mut() {
            *a = -*a;
        }
        space.axpy(alpha.as_ref(), &q, &mut r)?;
        if let Some(w) = null {
            project(space, w, ww.as_ref(), &mut r, &mut tmp)?;
        }
        space.dot(&r, &r, rs_new.as_mut())?;
        for b in 0..batch {
            beta.as_mut()[b] = 0.0;
            if !active[b] || alpha.as_ref()[b] == 0.0 {
                continue;
            }
            outcomes[b].iterations += 1;
            let new = rs_new.as_ref()[b];
            if new.sqrt() <= tol * bnorm.as_ref()[b] {
                active[b] = false;
                outcomes[b].converged = true;
            } else {
                beta.as_mut()[b] = new / rs.as_ref()[b];
            }
            rs.as_mut()[b] = new;
        }
        space.xpby(&r, beta.as_ref(), &mut p)?;
    }
    if let Some(w) = null {
        project(space, w, ww.as_ref(), &mut x, &mut tmp)?;
    }
    // True residual of the returned solution.
    op.apply(space, &x, &mut q)?;
    let minus_one = {
        let mut s = space.scalars();
        s.as_mut().fill(-1.0);
        s
    };
    space.xpby(rhs, minus_one.as_ref(), &mut q)?;
    if let Some(w) = null {
        project(space, w, ww.as_ref(), &mut q, &mut tmp)?;
    }
    space.dot(&q, &q, tmp.as_mut())?;
    for b in 0..batch {
        let bn = bnorm.as_ref()[b];
        outcomes[b].residual = if bn > 0.0 {
            tmp.as_ref()[b].sqrt() / bn
        } else {
            0.0
        };
        if outcomes[b].residual.is_nan() {
            return Err(Error::Numerical(format!(
                "CG: the residual of problem {b} is NaN"
            )));
        }
    }
    Ok(x)
}

/// Largest problem size of [`SmallSpace`].
pub(crate) const SMALL_MAX: usize = 32;

/// One problem of `n ≤ 32` entries in an `f64` stack array (entries past `n` stay 0).
pub(crate) struct SmallSpace {
    pub n: usize,
}

impl CgSpace for SmallSpace {
    type Vector = [f64; SMALL_MAX];
    type Scalars = [f64; 1];
    #[inline]
    fn batch(&self) -> usize {
        1
    }
    #[inline]
    fn scalars(&self) -> [f64; 1] {
        [0.0]
    }
    #[inline]
    fn zeros(&self) -> Result<Self::Vector> {
        Ok([0.0; SMALL_MAX])
    }
    #[inline]
    fn duplicate(&self, v: &Self::Vector) -> Result<Self::Vector> {
        Ok(*v)
    }
    #[inline]
    fn dot(&self, x: &Self::Vector, y: &Self::Vector, out: &mut [f64]) -> Result<()> {
        out[0] = x[..self.n]
            .iter()
            .zip(&y[..self.n])
            .map(|(a, b)| a * b)
            .sum();
        Ok(())
    }
    #[inline]
    fn axpy(&self, alpha: &[f64], x: &Self::Vector, y: &mut Self::Vector) -> Result<()> {
        let a = alpha[0];
        for (o, v) in y[..self.n].iter_mut().zip(&x[..self.n]) {
            *o += a * v;
        }
        Ok(())
    }
    #[inline]
    fn xpby(&self, x: &Self::Vector, beta: &[f64], y: &mut Self::Vector) -> Result<()> {
        let b = beta[0];
        for (o, v) in y[..self.n].iter_mut().zip(&x[..self.n]) {
            *o = v + b * *o;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::grad::{BackendSpace, GradKernels};
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
