//! Bistochastic projection of batches of small matrices and its exact backward.
//!
//! **Forward.** `R = SinkhornKnopp(exp(X))` for each `n×n` matrix of a batch (`B×n×n`,
//! `n ≤ 32`, e.g. hyper-connection mixing matrices): in the log domain,
//! `log R = X + α·1ᵀ + 1·βᵀ` with `β ← −LSE_i(X_ij + α_i)` (columns), then
//! `α ← −LSE_j(X_ij + β_j)` (rows), from `α = 0`, for a fixed number of iterations or until
//! the column error `Σ_j |Σ_i R_ij − 1|` is below a tolerance. Rows of the result sum to 1
//! exactly (up to rounding); entries of `X` of any size stay finite (no `exp(X)` is formed).
//!
//! **Backward.** For `G = ∂L/∂R`, implicit differentiation of `R·1 = 1`, `Rᵀ·1 = 1` gives
//!
//! `∂L/∂X = (G − a·1ᵀ − 1·bᵀ) ⊙ R`, `(I − RᵀR)·b = (G⊙R)ᵀ·1 − Rᵀ(G⊙R)·1`, `a = (G⊙R)·1 − R·b`,
//!
//! the `μ = ν = 1` case of the OT adjoint system ([`crate::grad::ot`]). The Schur system is
//! symmetric PSD with null vector `1` (only `a_i + b_j` matters); it is solved per matrix by
//! [`crate::grad::cg`] with the null direction projected out, two mat-vecs a step (`R·x`, then
//! `Rᵀ·y`), `RᵀR` never formed. The implementation uses `R`'s own row and column sums `r`,
//! `c` in place of the ones (`diag(c) − Rᵀ diag(1/r) R`): identical for a bistochastic `R`,
//! and the system stays exactly singular along `1` and consistent when `R` is not. (With
//! `I − RᵀR` literally, a 20-iteration `R` with column error 2e-6 at n = 4 can give gradients
//! off by tens of percent: the system is then only nearly singular and its inconsistent part is
//! amplified; with the own sums the same `R` gives the exact gradient to 5e-7.)
//!
//! **Exactness.** The implicit gradient is the exact gradient of the *exact* projection. With
//! a fixed iteration count `R` is only approximately bistochastic (its column error is
//! reported in [`BistochasticResult::convergence`]), and the implicit gradient differs from the
//! derivative of the truncated iteration by about that error. For exact gradients, run the
//! forward to a tolerance ([`BistochasticParams::converged`]).
//!
//! ```
//! use logot::grad::{bistochastic, bistochastic_backward, BistochasticParams, CgParams};
//! use logot::ndarray::Array3;
//! let x = Array3::from_shape_fn((2, 3, 3), |(b, i, j)| ((b + 2 * i + 3 * j) % 5) as f64 * 0.7);
//! let fwd = bistochastic(x.view(), &BistochasticParams::default().converged(1e-13))?;
//! assert!(fwd.convergence.converged);
//! let g = Array3::from_shape_fn((2, 3, 3), |(b, i, j)| (b + i * j) as f64);
//! let bwd = bistochastic_backward(fwd.r.view(), g.view(), &CgParams::default())?;
//! assert!(bwd.cg.all_converged());
//! # Ok::<(), logot::Error>(())
//! ```

use crate::backend::bistochastic::{words, BistochasticKernels, ProjectionStats};
use crate::cg::{CgOutcome, CgParams, CgSummary};
use crate::entropic::sinkhorn::{Convergence, ProblemReport};
use crate::validate::check_finite;
use crate::{CpuBackend, Error, Real, Result};
use ndarray::{Array3, ArrayView3};

/// Parameters of the projection, set by builder methods
/// (`BistochasticParams::default().iters(50)`). `Default`: 20 iterations, no tolerance (the
/// usual setting for mixing matrices), the backward's CG reported as a [`CgSummary`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BistochasticParams {
    /// Maximum number of iterations (one column and one row normalisation each).
    pub iters: usize,
    /// Stop a matrix once its column error `Σ_j |Σ_i R_ij − 1|` is `≤ tol`; 0 runs all
    /// `iters` iterations.
    pub tol: f64,
    /// Backward: also return each matrix's CG outcome
    /// ([`BistochasticGradients::cg_outcomes`]). Off by default: the [`CgSummary`] is reduced
    /// by the backend, while per-matrix outcomes cost a GPU one word per matrix read back.
    pub cg_outcomes: bool,
}

impl Default for BistochasticParams {
    fn default() -> Self {
        BistochasticParams {
            iters: 20,
            tol: 0.0,
            cg_outcomes: false,
        }
    }
}

impl BistochasticParams {
    /// These parameters with at most `iters` iterations.
    pub fn iters(self, iters: usize) -> Self {
        BistochasticParams { iters, ..self }
    }
    /// These parameters with the column-error tolerance `tol` (`0` runs every iteration).
    pub fn tol(self, tol: f64) -> Self {
        BistochasticParams { tol, ..self }
    }
    /// Iterate to the column-error tolerance `tol`: `tol(tol).iters(100_000)`.
    pub fn converged(self, tol: f64) -> Self {
        self.tol(tol).iters(100_000)
    }
    /// These parameters with (or without) each matrix's CG outcome returned by the backward.
    pub fn cg_outcomes(self, cg_outcomes: bool) -> Self {
        BistochasticParams {
            cg_outcomes,
            ..self
        }
    }
    fn validate(&self) -> Result<()> {
        if self.iters == 0 {
            return Err(Error::parameter(
                "iters",
                0,
                "at least one iteration is needed",
            ));
        }
        if !(self.tol.is_finite() && self.tol >= 0.0) {
            return Err(Error::parameter("tol", self.tol, "must be finite and ≥ 0"));
        }
        Ok(())
    }
}

/// A projected batch.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BistochasticResult<T> {
    /// `R`, `B×n×n`: rows and columns sum to 1 within `convergence.marginal_error`.
    pub r: Array3<T>,
    /// Measured on the returned `r` in f64, per matrix ([`Convergence::problems`]): the
    /// larger of the row and column errors `Σ |Σ R − 1|`, and whether it is within `tol`
    /// (the precision's default, 1e-5 in f32 and 1e-9 in f64, when `tol = 0`). Iterations are
    /// the batch's largest count (matrices that met `tol` earlier stopped there).
    pub convergence: Convergence,
}

/// The backward of a batch.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BistochasticGradients<T> {
    /// `∂L/∂X`, `B×n×n`.
    pub dx: Array3<T>,
    /// How CG ended over the batch: largest iteration count and residual, the number of
    /// matrices that did not converge and the first of them.
    pub cg: CgSummary,
    /// How CG ended for each matrix, when asked for ([`BistochasticParams::cg_outcomes`]).
    pub cg_outcomes: Option<Vec<CgOutcome>>,
}

/// The bistochastic projection on a chosen backend with chosen parameters: the control
/// behind [`bistochastic()`] and [`bistochastic_backward`]. Host arrays:
/// [`forward`](Self::forward), [`backward`](Self::backward); buffers on the backend (on a
/// GPU, a framework's tensors on its stream, without a copy or a wait):
/// [`forward_buffers`](Self::forward_buffers), [`backward_buffers`](Self::backward_buffers).
#[derive(Clone, Debug)]
pub struct BistochasticSolver<B> {
    backend: B,
    params: BistochasticParams,
}

/// The logits as the kernels read them, each matrix less its largest entry: `R` does not
/// depend on a constant added to a matrix of `X`, but the potentials would carry it, and
/// `X_ij + α_i + β_j` would lose `X`'s variation to it (f32 logits + 1000: ulp 6e-5).
fn centred_logits<T: Real>(x: &ArrayView3<'_, T>) -> Vec<T> {
    let mut out = Vec::with_capacity(x.len());
    for m in x.outer_iter() {
        let top = m.iter().fold(T::neg_infinity(), |a, &v| a.max(v));
        out.extend(m.iter().map(|&v| v - top));
    }
    out
}

/// Each matrix's `max(Σ_i |Σ_j R_ij − 1|, Σ_j |Σ_i R_ij − 1|)`, in f64.
fn marginal_errors<T: Real>(r: &Array3<T>) -> Vec<f64> {
    use rayon::prelude::*;
    let n = r.dim().1;
    (0..r.dim().0)
        .into_par_iter()
        .map(|b| {
            let m = r.index_axis(ndarray::Axis(0), b);
            let mut cols = vec![0.0f64; n];
            let mut rows = 0.0;
            for row in m.rows() {
                let mut s = 0.0;
                for (c, v) in cols.iter_mut().zip(row) {
                    s += v.f64();
                    *c += v.f64();
                }
                rows += (s - 1.0).abs();
            }
            rows.max(cols.iter().map(|c| (c - 1.0).abs()).sum())
        })
        .collect()
}

fn square_batch<T>(arg: &str, a: &ArrayView3<'_, T>) -> Result<(usize, usize)> {
    let (b, n, m) = a.dim();
    if b == 0 || n == 0 {
        return Err(Error::Empty {
            arg: arg.into(),
            detail: format!("shape {b}×{n}×{m}"),
        });
    }
    if n != m {
        return Err(Error::shape(
            arg,
            format!("holds {n}×{m} matrices; square matrices are needed"),
        ));
    }
    Ok((b, n))
}

impl<B> BistochasticSolver<B> {
    /// The projection on `backend` with `params`.
    pub fn new(backend: B, params: BistochasticParams) -> Self {
        BistochasticSolver { backend, params }
    }
    /// The parameters.
    pub fn params(&self) -> &BistochasticParams {
        &self.params
    }
    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// `R = SinkhornKnopp(exp(X))` for each matrix of `x` (`B×n×n`): columns, then rows,
    /// normalised in the log domain.
    ///
    /// ```
    /// use logot::grad::{BistochasticParams, BistochasticSolver};
    /// use logot::ndarray::Array3;
    /// // exp(X) = a·bᵀ (rank one) is projected in one iteration onto the uniform matrix 1/n.
    /// let x = Array3::from_shape_fn((1, 4, 4), |(_, i, j)| 0.3 * i as f64 - 0.7 * j as f64);
    /// let proj = BistochasticSolver::new(logot::CpuBackend, BistochasticParams::default().iters(1));
    /// let r = proj.forward(x.view())?.r;
    /// assert!(r.iter().all(|v| (v - 0.25).abs() < 1e-12));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn forward<T: Real>(&self, x: ArrayView3<'_, T>) -> Result<BistochasticResult<T>>
    where
        B: BistochasticKernels<T>,
    {
        self.params.validate()?;
        let (batch, n) = square_batch("x", &x)?;
        let max_n = self.backend.bistochastic_max_n();
        if n > max_n {
            return Err(Error::parameter(
                "x",
                format!("{n}×{n} matrices"),
                format!("this backend handles n ≤ {max_n}"),
            ));
        }
        check_finite("x", &x)?;
        let be = &self.backend;
        let xb = be.upload(&centred_logits(&x))?;
        let mut rb = be.filled(batch * n * n, T::zero())?;
        let stats = be.bistochastic_forward(n, &xb, self.params.iters, self.params.tol, &mut rb)?;
        let r = be.download(&rb)?;
        if let Some(k) = r.iter().position(|v| !v.is_finite()) {
            return Err(Error::Numerical(format!(
                "bistochastic forward: non-finite entry at flat index {k}"
            )));
        }
        if stats.marginal_error.is_nan() {
            return Err(Error::Numerical(
                "bistochastic forward: the column error is NaN".into(),
            ));
        }
        let tol = if self.params.tol > 0.0 {
            self.params.tol
        } else {
            T::DEFAULT_TOL
        };
        let r = Array3::from_shape_vec((batch, n, n), r)
            .map_err(|e| Error::Numerical(e.to_string()))?;
        // The report of the matrices handed back, measured on them in f64.
        let problems = marginal_errors(&r)
            .into_iter()
            .map(|e| ProblemReport {
                marginal_error: e,
                // The tolerance is on the rows' and columns' sums of 1 each.
                mass: 1.0,
                mass_gap: 0.0,
                converged: e <= tol,
                iterations: stats.iterations,
            })
            .collect();
        let convergence = Convergence::of_problems(stats.iterations, tol, problems);
        Ok(BistochasticResult { r, convergence })
    }

    /// `∂L/∂X` from the projected `r` (`B×n×n`, as returned by [`BistochasticSolver::forward`])
    /// and `g = ∂L/∂R` (same shape), by implicit differentiation (see the module docs). How
    /// the per-matrix CGs ended is summarised in [`BistochasticGradients::cg`] (matrices that
    /// did not converge are counted there, never dropped); each matrix's outcome is returned
    /// as well with [`BistochasticParams::cg_outcomes`].
    ///
    /// ```
    /// use logot::grad::{BistochasticParams, BistochasticSolver, CgParams};
    /// use logot::ndarray::Array3;
    /// let x = Array3::from_shape_fn((2, 3, 3), |(b, i, j)| ((b + i * j) % 4) as f64);
    /// let proj = BistochasticSolver::new(logot::CpuBackend, BistochasticParams::default().converged(1e-14));
    /// let r = proj.forward(x.view())?.r;
    /// // L = Σ_ij (c_i + d_j)·R_ij = Σ c + Σ d for every bistochastic R: ∂L/∂X = 0.
    /// let g = Array3::from_shape_fn((2, 3, 3), |(_, i, j)| i as f64 - 2.0 * j as f64);
    /// let dx = proj.backward(r.view(), g.view(), &CgParams::default())?.dx;
    /// assert!(dx.iter().all(|v| v.abs() < 1e-12));
    /// // Per-matrix outcomes on request; the summary is their reduction.
    /// let proj = BistochasticSolver::new(logot::CpuBackend, BistochasticParams::default().cg_outcomes(true));
    /// let bwd = proj.backward(r.view(), g.view(), &CgParams::default().max_iters(1).tol(1e-12))?;
    /// let each = bwd.cg_outcomes.unwrap();
    /// assert_eq!(bwd.cg, logot::grad::CgSummary::of(&each, 1e-12));
    /// assert_eq!(bwd.cg.unconverged, each.iter().filter(|o| !o.converged).count());
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn backward<T: Real>(
        &self,
        r: ArrayView3<'_, T>,
        g: ArrayView3<'_, T>,
        cg: &CgParams,
    ) -> Result<BistochasticGradients<T>>
    where
        B: BistochasticKernels<T>,
    {
        cg.validate()?;
        let (batch, n) = square_batch("r", &r)?;
        if g.dim() != r.dim() {
            return Err(Error::shape(
                "g",
                format!("is {:?} but r is {:?}", g.dim(), r.dim()),
            ));
        }
        let max_n = self.backend.bistochastic_max_n();
        if n > max_n {
            return Err(Error::parameter(
                "r",
                format!("{n}×{n} matrices"),
                format!("this backend handles n ≤ {max_n}"),
            ));
        }
        check_finite("r", &r)?;
        check_finite("g", &g)?;
        if let Some((idx, v)) = r.indexed_iter().find(|(_, v)| **v < T::zero()) {
            return Err(Error::NegativeMass {
                arg: "r".into(),
                index: format!("{idx:?}"),
                value: v.to_string(),
            });
        }
        let be = &self.backend;
        let rb = be.upload(&r.iter().copied().collect::<Vec<T>>())?;
        let gb = be.upload(&g.iter().copied().collect::<Vec<T>>())?;
        let mut db = be.filled(batch * n * n, T::zero())?;
        let tol = cg.effective_tol::<T>();
        let mut outcomes = self
            .params
            .cg_outcomes
            .then(|| vec![CgOutcome::default(); batch]);
        let summary = be.bistochastic_backward(
            n,
            &rb,
            &gb,
            tol,
            cg.max_iters,
            &mut db,
            outcomes.as_deref_mut(),
        )?;
        let dx = be.download(&db)?;
        if let Some(k) = dx.iter().position(|v| !v.is_finite()) {
            return Err(Error::Numerical(format!(
                "bistochastic backward: non-finite entry at flat index {k}"
            )));
        }
        let dx = Array3::from_shape_vec((batch, n, n), dx)
            .map_err(|e| Error::Numerical(e.to_string()))?;
        Ok(BistochasticGradients {
            dx,
            cg: summary,
            cg_outcomes: outcomes,
        })
    }

    /// [`BistochasticSolver::forward`] on buffers of the backend (`x` and `r`: `B×n×n`,
    /// row-major), queued without waiting: no copy, nothing read back — the path for data
    /// already on the device (on a GPU, with `CudaBackend::borrow_buffer` and
    /// `CudaBackend::on_stream`, feature `cuda`: the caller's tensors on the caller's stream,
    /// as a framework's operator runs). Writes `r`, the matrices the host-array path
    /// returns (bit for bit when each matrix of `x` has its largest entry 0, as the host path
    /// makes it; else to rounding), and the batch's [`ProjectionStats`] into the first [`words::PROJECTION`]
    /// words of `stats` (on a GPU: device memory, the backend's or a caller's, written in
    /// stream order), read when the caller chooses with
    /// [`BistochasticSolver::read_stats`] (or its own copy and
    /// [`ProjectionStats::from_words`]). `x` is not checked entry by entry: non-finite
    /// logits surface as a non-finite column error, which `read_stats` reports as an
    /// [`Error::Numerical`].
    ///
    /// ```
    /// use logot::backend::bistochastic::{words, BistochasticKernels};
    /// use logot::grad::{bistochastic, BistochasticParams, BistochasticSolver};
    /// use logot::ndarray::Array3;
    /// use logot::{Backend, CpuBackend};
    /// let x = Array3::from_shape_fn((3, 4, 4), |(b, i, j)| ((b + 2 * i + j) % 5) as f64 * 0.3);
    /// let proj = BistochasticSolver::new(CpuBackend, BistochasticParams::default());
    /// let be = proj.backend();
    /// let xb = be.upload(x.as_slice().unwrap())?;
    /// let mut r = be.filled(x.len(), 0.0)?;
    /// let mut stats = BistochasticKernels::<f64>::words(be, words::PROJECTION)?;
    /// proj.forward_buffers::<f64>(4, &xb, &mut r, &mut stats)?;
    /// assert_eq!(proj.read_stats::<f64>(&stats)?.iterations, 20);
    /// // The matrices of the host-array path, to rounding.
    /// let host = bistochastic(x.view(), &BistochasticParams::default())?;
    /// assert!(be.download(&r)?.iter().zip(host.r.iter()).all(|(a, b)| (a - b).abs() < 1e-12));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn forward_buffers<T: Real>(
        &self,
        n: usize,
        x: &B::Buffer,
        r: &mut B::Buffer,
        stats: &mut B::Words,
    ) -> Result<()>
    where
        B: BistochasticKernels<T>,
    {
        self.params.validate()?;
        self.check_n(n, "x")?;
        self.backend.bistochastic_forward_deferred(
            n,
            x,
            self.params.iters,
            self.params.tol,
            r,
            stats,
        )
    }

    /// The [`ProjectionStats`] a [`BistochasticSolver::forward_buffers`] left in `stats` (a
    /// GPU waits for its stream); a non-finite column error (non-finite logits) is an
    /// [`Error::Numerical`].
    pub fn read_stats<T: Real>(&self, stats: &B::Words) -> Result<ProjectionStats>
    where
        B: BistochasticKernels<T>,
    {
        let w = BistochasticKernels::<T>::read_words(&self.backend, stats, words::PROJECTION)?;
        ProjectionStats::from_words(&w)?.checked()
    }

    /// [`BistochasticSolver::backward`] on buffers of the backend (`r`, `g`, `dx`: `B×n×n`,
    /// row-major), queued without waiting: no copy, nothing read back. Writes `dx`, and the
    /// [`CgSummary`] into the first [`words::CG_SUMMARY`] words of `words`, which holds
    /// [`BistochasticKernels::bistochastic_backward_words`] (the rest is the backend's
    /// scratch), for the caller to decode when it chooses
    /// ([`cg_summary_from_words`](crate::backend::bistochastic::cg_summary_from_words), with
    /// the tolerance [`CgParams::effective_tol`]). `r` is not checked entry by entry (pass
    /// the `r` of [`BistochasticSolver::forward_buffers`]).
    pub fn backward_buffers<T: Real>(
        &self,
        n: usize,
        r: &B::Buffer,
        g: &B::Buffer,
        cg: &CgParams,
        dx: &mut B::Buffer,
        words: &mut B::Words,
    ) -> Result<()>
    where
        B: BistochasticKernels<T>,
    {
        cg.validate()?;
        self.check_n(n, "r")?;
        let tol = cg.effective_tol::<T>();
        self.backend
            .bistochastic_backward_deferred(n, r, g, tol, cg.max_iters, dx, words)
    }

    fn check_n<T: Real>(&self, n: usize, arg: &str) -> Result<()>
    where
        B: BistochasticKernels<T>,
    {
        let max_n = BistochasticKernels::<T>::bistochastic_max_n(&self.backend);
        if n == 0 || n > max_n {
            return Err(Error::parameter(
                arg,
                format!("{n}×{n} matrices"),
                format!("this backend handles 1 ≤ n ≤ {max_n}"),
            ));
        }
        Ok(())
    }
}

/// [`BistochasticSolver::forward`] on the CPU.
///
/// ```
/// use logot::grad::{bistochastic, BistochasticParams};
/// use logot::ndarray::{Array3, Axis};
/// let x = Array3::from_shape_fn((100, 5, 5), |(b, i, j)| ((7 * b + 3 * i + j) % 11) as f64 * 0.4);
/// let out = bistochastic(x.view(), &BistochasticParams::default().converged(1e-12))?;
/// assert!(out.convergence.converged);
/// for r in out.r.outer_iter() {
///     assert!(r.sum_axis(Axis(0)).iter().chain(&r.sum_axis(Axis(1))).all(|s| (s - 1.0).abs() < 1e-11));
/// }
/// # Ok::<(), logot::Error>(())
/// ```
pub fn bistochastic<T: Real>(
    x: ArrayView3<'_, T>,
    params: &BistochasticParams,
) -> Result<BistochasticResult<T>> {
    BistochasticSolver::new(CpuBackend, params.clone()).forward(x)
}

/// [`BistochasticSolver::backward`] on the CPU.
///
/// ```
/// use logot::grad::{bistochastic, bistochastic_backward, check_gradient, BistochasticParams, CgParams, GradCheckParams};
/// use logot::ndarray::Array3;
/// // L(X) = ⟨G, R(X)⟩ for one 3×3 matrix: the implicit gradient against central differences.
/// let x = Array3::from_shape_fn((1, 3, 3), |(_, i, j)| ((i + 2 * j) % 3) as f64 * 0.8);
/// let g = Array3::from_shape_fn((1, 3, 3), |(_, i, j)| (i as f64 - 1.0) * (j as f64 + 0.5));
/// let params = BistochasticParams::default().converged(1e-14);
/// let r = bistochastic(x.view(), &params)?.r;
/// let dx = bistochastic_backward(r.view(), g.view(), &CgParams::default())?.dx;
/// let loss = |flat: &[f64]| {
///     let xs = Array3::from_shape_vec((1, 3, 3), flat.to_vec()).unwrap();
///     (&bistochastic(xs.view(), &params).unwrap().r * &g).sum()
/// };
/// let flat: Vec<f64> = x.iter().copied().collect();
/// let grad: Vec<f64> = dx.iter().copied().collect();
/// // Relative error 1e-6, absolute below 1e-3 (an entry here is 0: central differences give 6e-11).
/// let report = check_gradient(loss, &flat, &grad, &GradCheckParams::default().abs_floor(1e-3))?;
/// assert!(report.passed, "{report}");
/// # Ok::<(), logot::Error>(())
/// ```
pub fn bistochastic_backward<T: Real>(
    r: ArrayView3<'_, T>,
    g: ArrayView3<'_, T>,
    cg: &CgParams,
) -> Result<BistochasticGradients<T>> {
    BistochasticSolver::new(CpuBackend, BistochasticParams::default()).backward(r, g, cg)
}
