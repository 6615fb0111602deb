//! The tensor product `L(C1, C2) ⊗ T` of a decomposable loss on a backend, in
//! `O(n²m + nm²)` by two matrix products (Peyré, Cuturi & Solomon 2016, Prop. 1; POT's
//! `init_matrix` and `tensor_product`):
//!
//! `(L⊗T)_ij = Σ_kl L(C1_ik, C2_jl)·T_kl = a_i + b_j − (h1(C1)·T·h2(C2)ᵀ)_ij`,
//!
//! with `a = f1(C1)·p` and `b = f2(C2)·q` (POT's `constC = a·1ᵀ + 1·bᵀ`, exact for plans
//! with marginals `p` and `q`). The row and column terms `a`, `b` do not change a Sinkhorn
//! or linear-programming plan (they shift the potentials), so the solvers carry only the
//! cross term `X(T) = h1(C1)·T·h2(C2)ᵀ` on the device and `a`, `b` on the host.

use super::params::GwLoss;
use super::problem::GromovProblem;
use crate::backend::grad::GradKernels;
use crate::backend::linalg::{GemmPrecision, GemmShape, LinalgKernels, Transpose};
use crate::backend::Backend;
use crate::{CpuBackend, Real, Result};
use ndarray::{ArrayView2, Axis};
use rayon::prelude::*;

/// `h1(C1)`, `h2(C2)` on a backend and the row and column terms of `L⊗T`, for the
/// gradient of `F(T) = Σ L(C1_ik, C2_jl)·T_ij·T_kl`:
///
/// * symmetric structures: `∇F(T) = 2·(a ⊕ b) − 2·X(T)`, `X(T) = h1·T·h2ᵀ`;
/// * otherwise `∇F(T) = ½(L⊗T + Lᵀ⊗T)·2 = (a + aᵗ) ⊕ (b + bᵗ) − 2·X(T)` with
///   `X(T) = ½(h1·T·h2ᵀ + h1ᵀ·T·h2)` and `aᵗ = f1(C1)ᵀ·p`, `bᵗ = f2(C2)ᵀ·q` (POT's
///   `init_matrix(C1.T, C2.T, ...)`).
pub(crate) struct Structure<T: Real, B: LinalgKernels<T>> {
    pub n: usize,
    pub m: usize,
    h1: B::Buffer,
    h2: B::Buffer,
    /// `a_i = Σ_k f1(C1_ik)·p_k`.
    pub a: Vec<f64>,
    /// `b_j = Σ_l f2(C2_jl)·q_l`.
    pub b: Vec<f64>,
    /// Row and column terms of `∇F`: `2a`, `2b` (symmetric) or `a + aᵗ`, `b + bᵗ`.
    pub grad_rows: Vec<f64>,
    pub grad_cols: Vec<f64>,
    pub symmetric: bool,
    /// How the GEMMs of the cross term form their products.
    pub precision: GemmPrecision,
    /// `n×m` scratch for `h1·T`.
    scratch: B::Buffer,
}

impl<T: Real, B: LinalgKernels<T>> Structure<T, B> {
    /// The terms of `problem` under `loss` on `be` (the loss's entry checks done by the
    /// caller).
    pub fn new(
        be: &B,
        problem: &GromovProblem<'_, T>,
        loss: GwLoss,
        symmetric: bool,
    ) -> Result<Self> {
        let (n, m) = (problem.n(), problem.m());
        let (c1, c2) = (problem.c1, problem.c2);
        let p: Vec<f64> = problem.p.iter().map(|v| v.f64()).collect();
        let q: Vec<f64> = problem.q.iter().map(|v| v.f64()).collect();
        let map = |c: &ArrayView2<'_, T>, f: &(dyn Fn(f64) -> f64 + Sync)| -> Vec<T> {
            let mut out = vec![T::zero(); c.len()];
            let k = c.ncols().max(1);
            out.par_chunks_mut(k)
                .zip(c.axis_iter(Axis(0)).into_par_iter())
                .for_each(|(o, row)| {
                    o.iter_mut()
                        .zip(row.iter())
                        .for_each(|(o, v)| *o = T::of(f(v.f64())))
                });
            out
        };
        let h1 = be.upload(&map(&c1, &|v| loss.h1(v)))?;
        let h2 = be.upload(&map(&c2, &|v| loss.h2(v)))?;
        // Row sums of f(C)·w and of f(C)ᵀ·w, in f64 (rows in parallel).
        let weighted =
            |c: &ArrayView2<'_, T>, f: &(dyn Fn(f64) -> f64 + Sync), w: &[f64], t: bool| {
                let k = c.nrows();
                (0..k)
                    .into_par_iter()
                    .map(|i| {
                        (0..k)
                            .map(|j| {
                                let v = if t { c[[j, i]] } else { c[[i, j]] };
                                f(v.f64()) * w[j]
                            })
                            .sum::<f64>()
                    })
                    .collect::<Vec<f64>>()
            };
        let a = weighted(&c1, &|v| loss.f1(v), &p, false);
        let b = weighted(&c2, &|v| loss.f2(v), &q, false);
        let (grad_rows, grad_cols) = if symmetric {
            (
                a.iter().map(|v| 2.0 * v).collect(),
                b.iter().map(|v| 2.0 * v).collect(),
            )
        } else {
            let at = weighted(&c1, &|v| loss.f1(v), &p, true);
            let bt = weighted(&c2, &|v| loss.f2(v), &q, true);
            (
                a.iter().zip(&at).map(|(x, y)| x + y).collect(),
                b.iter().zip(&bt).map(|(x, y)| x + y).collect(),
            )
        };
        Ok(Structure {
            n,
            m,
            h1,
            h2,
            a,
            b,
            grad_rows,
            grad_cols,
            symmetric,
            precision: GemmPrecision::Exact,
            scratch: be.filled(n * m, T::zero())?,
        })
    }

    /// `out ← alpha·X(t) + beta·out` for a plan `t` (`n×m`): two GEMMs (four when the
    /// structures are not symmetric).
    pub fn cross(
        &mut self,
        be: &B,
        t: &B::Buffer,
        alpha: T,
        beta: T,
        out: &mut B::Buffer,
    ) -> Result<()> {
        if self.symmetric {
            return self.product(be, t, false, alpha, beta, out);
        }
        let half = alpha * T::of(0.5);
        self.product(be, t, false, half, beta, out)?;
        self.product(be, t, true, half, T::one(), out)
    }

    /// `out ← alpha·h1·t·h2ᵀ + beta·out`, or with `transposed` `alpha·h1ᵀ·t·h2 + beta·out`
    /// (the product of `C1ᵀ`, `C2ᵀ`): `h1·t` into scratch, then the second GEMM.
    pub fn product(
        &mut self,
        be: &B,
        t: &B::Buffer,
        transposed: bool,
        alpha: T,
        beta: T,
        out: &mut B::Buffer,
    ) -> Result<()> {
        let (n, m) = (self.n, self.m);
        let (first, second) = if transposed {
            (Transpose::Yes, Transpose::No)
        } else {
            (Transpose::No, Transpose::Yes)
        };
        be.gemm(
            GemmShape::new(n, m, n)
                .with_transposes(first, Transpose::No)
                .with_precision(self.precision),
            T::one(),
            &self.h1,
            t,
            T::zero(),
            &mut self.scratch,
        )?;
        be.gemm(
            GemmShape::new(n, m, m)
                .with_transposes(Transpose::No, second)
                .with_precision(self.precision),
            alpha,
            &self.scratch,
            &self.h2,
            beta,
            out,
        )
    }

    /// `⟨L⊗T, T⟩ = Σ_i a_i·(T·1)_i + Σ_j b_j·(Tᵀ·1)_j − ⟨X(T), T⟩` (POT's `gwloss`) from the
    /// plan's marginals and `⟨X(T), T⟩` (for non-symmetric structures both products of
    /// `X` have the same inner product with `T`).
    pub fn loss_value(&self, rows: &[f64], cols: &[f64], cross_dot: f64) -> f64 {
        let lin: f64 = self.a.iter().zip(rows).map(|(a, r)| a * r).sum::<f64>()
            + self.b.iter().zip(cols).map(|(b, c)| b * c).sum::<f64>();
        lin - cross_dot
    }
}

/// The objective the solvers report for a plan `t` (`n×m`) of `problem`:
/// `(1 − α)·⟨M, T⟩ + α·⟨L(C1, C2)⊗T, T⟩`, the second term as POT's `gwloss`
/// (`Σ_i a_i·(T·1)_i + Σ_j b_j·(Tᵀ·1)_j − ⟨h1(C1)·T·h2(C2)ᵀ, T⟩`, equal to
/// `Σ_ijkl L(C1_ik, C2_jl)·T_ij·T_kl` when `T` has marginals `p` and `q`), on the CPU.
///
/// ```
/// use logot::gromov::{objective, GromovProblem, GwLoss};
/// use ndarray::array;
/// // Two points at distance 1 matched to two points at distance 3: each of the two
/// // ordered pairs of distinct points costs (1 − 3)² = 4, with weight 1/2 · 1/2.
/// let (c1, c2) = (array![[0.0, 1.0], [1.0, 0.0]], array![[0.0, 3.0], [3.0, 0.0]]);
/// let w = array![0.5, 0.5];
/// let problem = GromovProblem::new(c1.view(), c2.view(), w.view(), w.view())?;
/// let identity = array![[0.5, 0.0], [0.0, 0.5]];
/// assert!((objective(&problem, GwLoss::Square, identity.view())? - 2.0).abs() < 1e-15);
/// # Ok::<(), logot::Error>(())
/// ```
pub fn objective<'a, T: Real>(
    problem: &GromovProblem<'a, T>,
    loss: GwLoss,
    t: ArrayView2<'a, T>,
) -> Result<f64> {
    let problem = problem.clone().with_init(t)?;
    problem.check_loss(loss)?;
    let be = CpuBackend;
    let symmetric = problem.looks_symmetric();
    let mut st = Structure::new(&be, &problem, loss, symmetric)?;
    let (n, m) = (problem.n(), problem.m());
    let tb = be.upload(&problem.initial_plan().iter().copied().collect::<Vec<T>>())?;
    let mut x = be.filled(n * m, T::zero())?;
    st.cross(&be, &tb, T::one(), T::zero(), &mut x)?;
    let (rows, cols) = be.weighted_marginals(&tb, n, m, None)?;
    let f64s = |v: &[T]| v.iter().map(|x| x.f64()).collect::<Vec<f64>>();
    let cross_dot = be.batched_dot(1, &x, &tb)?[0];
    let structure = st.loss_value(&f64s(&rows), &f64s(&cols), cross_dot);
    let linear = match problem.feature {
        Some(mf) => mf
            .iter()
            .zip(t.iter())
            .map(|(a, b)| a.f64() * b.f64())
            .sum(),
        None => 0.0,
    };
    Ok((1.0 - problem.alpha) * linear + problem.alpha * structure)
}
