//! A (fused) Gromov–Wasserstein problem: structure matrices `C1` (`n×n`) and `C2` (`m×m`),
//! weights `p` and `q`, optionally a feature cost `M` (`n×m`) with the trade-off `α`, and
//! optionally the initial plan. Every check names the argument at fault.

use super::params::GwLoss;
use crate::validate::{check_finite, check_histograms};
use crate::{Error, Real, Result};
use ndarray::{Array2, ArrayView1, ArrayView2, Axis};
use rayon::prelude::*;

/// The inputs of a (fused) Gromov–Wasserstein problem, checked.
///
/// The objective of a plan `T` with `T·1 = p`, `Tᵀ·1 = q` is
///
/// `F(T) = (1 − α)·⟨M, T⟩ + α·Σ_{i,j,k,l} L(C1_ik, C2_jl)·T_ij·T_kl`
///
/// (`α = 1` and no `M` for plain Gromov–Wasserstein), POT's `fgw_dist` convention.
///
/// ```
/// use logot::gromov::GromovProblem;
/// use ndarray::array;
/// let c1 = array![[0.0, 1.0], [1.0, 0.0]];
/// let c2 = array![[0.0, 2.0, 1.0], [2.0, 0.0, 1.0], [1.0, 1.0, 0.0]];
/// let (p, q) = (array![0.5, 0.5], array![0.2, 0.3, 0.5]);
/// assert!(GromovProblem::new(c1.view(), c2.view(), p.view(), q.view()).is_ok());
/// // C2 against weights of the wrong length: the error names q.
/// let err = GromovProblem::new(c1.view(), c2.view(), p.view(), p.view()).unwrap_err();
/// assert!(err.to_string().starts_with("q:"), "{err}");
/// ```
#[derive(Clone, Debug)]
pub struct GromovProblem<'a, T> {
    pub(crate) c1: ArrayView2<'a, T>,
    pub(crate) c2: ArrayView2<'a, T>,
    pub(crate) p: ArrayView1<'a, T>,
    pub(crate) q: ArrayView1<'a, T>,
    /// The feature cost `M` of fused GW.
    pub(crate) feature: Option<ArrayView2<'a, T>>,
    /// The weight `α` of the structure term (1 without a feature cost).
    pub(crate) alpha: f64,
    /// The initial plan (`None`: `p·qᵀ`).
    pub(crate) init: Option<ArrayView2<'a, T>>,
}

impl<'a, T: Real> GromovProblem<'a, T> {
    /// Gromov–Wasserstein between `(C1, p)` and `(C2, q)`: `C1` `n×n`, `C2` `m×m`, `p`
    /// (`n`) and `q` (`m`) non-negative with equal positive totals, every entry finite.
    pub fn new(
        c1: ArrayView2<'a, T>,
        c2: ArrayView2<'a, T>,
        p: ArrayView1<'a, T>,
        q: ArrayView1<'a, T>,
    ) -> Result<Self> {
        let n = check_structure("c1", &c1)?;
        let m = check_structure("c2", &c2)?;
        let mass = check_weights("p", &p, n, "c1")?;
        let mass_q = check_weights("q", &q, m, "c2")?;
        if (mass - mass_q).abs() > T::MASS_TOL * mass.max(mass_q) {
            return Err(Error::parameter(
                "q",
                format!("total {mass_q}"),
                format!("the total mass must equal that of p ({mass})"),
            ));
        }
        Ok(GromovProblem {
            c1,
            c2,
            p,
            q,
            feature: None,
            alpha: 1.0,
            init: None,
        })
    }

    /// Fused Gromov–Wasserstein: [`GromovProblem::new`] with the feature cost `m` (`n×m`,
    /// finite) weighted by `1 − alpha` and the structure term by `alpha` (in `[0, 1]`).
    ///
    /// ```
    /// use logot::gromov::GromovProblem;
    /// use ndarray::array;
    /// let c = array![[0.0, 1.0], [1.0, 0.0]];
    /// let w = array![0.5, 0.5];
    /// let m = array![[0.0, 1.0], [1.0, 0.0]];
    /// assert!(GromovProblem::fused(m.view(), c.view(), c.view(), w.view(), w.view(), 0.5).is_ok());
    /// let err = GromovProblem::fused(m.view(), c.view(), c.view(), w.view(), w.view(), 1.5).unwrap_err();
    /// assert!(err.to_string().starts_with("alpha"), "{err}");
    /// ```
    pub fn fused(
        m: ArrayView2<'a, T>,
        c1: ArrayView2<'a, T>,
        c2: ArrayView2<'a, T>,
        p: ArrayView1<'a, T>,
        q: ArrayView1<'a, T>,
        alpha: f64,
    ) -> Result<Self> {
        let mut problem = Self::new(c1, c2, p, q)?;
        if !(0.0..=1.0).contains(&alpha) {
            return Err(Error::parameter("alpha", alpha, "must lie in [0, 1]"));
        }
        let (n, mm) = (problem.n(), problem.m());
        if m.dim() != (n, mm) {
            return Err(Error::shape(
                "m",
                format!(
                    "is {}×{} but c1 is {n}×{n} and c2 is {mm}×{mm}",
                    m.nrows(),
                    m.ncols()
                ),
            ));
        }
        check_finite("m", &m)?;
        problem.feature = Some(m);
        problem.alpha = alpha;
        Ok(problem)
    }

    /// The same problem started from the plan `g0` (`n×m`, finite, non-negative) instead of
    /// `p·qᵀ` (POT's `G0`). The entropic solver takes any such plan; the conditional
    /// gradient needs its marginals to be `p` and `q` (checked there).
    pub fn with_init(mut self, g0: ArrayView2<'a, T>) -> Result<Self> {
        if g0.dim() != (self.n(), self.m()) {
            return Err(Error::shape(
                "g0",
                format!(
                    "is {}×{} but the plan is {}×{}",
                    g0.nrows(),
                    g0.ncols(),
                    self.n(),
                    self.m()
                ),
            ));
        }
        check_finite("g0", &g0)?;
        if let Some((idx, v)) = g0.indexed_iter().find(|(_, v)| **v < T::zero()) {
            return Err(Error::NegativeMass {
                arg: "g0".into(),
                index: format!("{idx:?}"),
                value: v.to_string(),
            });
        }
        self.init = Some(g0);
        Ok(self)
    }

    /// Points of the first space (`n`).
    pub fn n(&self) -> usize {
        self.c1.nrows()
    }
    /// Points of the second space (`m`).
    pub fn m(&self) -> usize {
        self.c2.nrows()
    }
    /// `C1`.
    pub fn c1(&self) -> ArrayView2<'a, T> {
        self.c1
    }
    /// `C2`.
    pub fn c2(&self) -> ArrayView2<'a, T> {
        self.c2
    }
    /// `p`.
    pub fn p(&self) -> ArrayView1<'a, T> {
        self.p
    }
    /// `q`.
    pub fn q(&self) -> ArrayView1<'a, T> {
        self.q
    }
    /// The feature cost `M` of fused GW.
    pub fn feature(&self) -> Option<ArrayView2<'a, T>> {
        self.feature
    }
    /// The weight `α` of the structure term (1 for plain GW).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// The initial plan: the given one, or `p·qᵀ`.
    pub(crate) fn initial_plan(&self) -> Array2<T> {
        match self.init {
            Some(g0) => g0.to_owned(),
            None => {
                let (p, q) = (self.p, self.q);
                Array2::from_shape_fn((self.n(), self.m()), |(i, j)| p[i] * q[j])
            }
        }
    }

    /// The structure matrices are symmetric as POT's test decides:
    /// `|C − Cᵀ| ≤ 1e-10 + 1e-5·|Cᵀ|` entrywise, for both (NumPy's `allclose(C, C.T,
    /// atol=1e-10)`).
    pub fn looks_symmetric(&self) -> bool {
        // Rows in parallel, each against the column it mirrors.
        let close = |c: &ArrayView2<'_, T>| {
            let n = c.nrows();
            (0..n).into_par_iter().all(|i| {
                let (row, col) = (c.row(i), c.column(i));
                row.iter().zip(col.iter()).all(|(a, b)| {
                    let (a, b) = (a.f64(), b.f64());
                    (a - b).abs() <= 1e-10 + 1e-5 * b.abs()
                })
            })
        };
        close(&self.c1) && close(&self.c2)
    }

    /// The entries the loss needs: for the KL loss, `C1 ≥ 0` and `C2 > 0`.
    pub(crate) fn check_loss(&self, loss: GwLoss) -> Result<()> {
        if loss != GwLoss::Kl {
            return Ok(());
        }
        if let Some((idx, v)) = self.c1.indexed_iter().find(|(_, v)| **v < T::zero()) {
            return Err(Error::parameter(
                "c1",
                format!("{v} at {idx:?}"),
                "the KL loss needs C1 ≥ 0",
            ));
        }
        if let Some((idx, v)) = self.c2.indexed_iter().find(|(_, v)| **v <= T::zero()) {
            return Err(Error::parameter(
                "c2",
                format!("{v} at {idx:?}"),
                "the KL loss needs C2 > 0 (L(a, 0) is infinite for a > 0)",
            ));
        }
        Ok(())
    }
}

/// A square, non-empty, finite structure matrix; returns its size.
fn check_structure<T: Real>(arg: &str, c: &ArrayView2<'_, T>) -> Result<usize> {
    let (r, k) = c.dim();
    if r == 0 || k == 0 {
        return Err(Error::Empty {
            arg: arg.into(),
            detail: format!("a {r}×{k} structure matrix"),
        });
    }
    if r != k {
        return Err(Error::shape(arg, format!("is {r}×{k}, not square")));
    }
    check_finite(arg, c)?;
    Ok(r)
}

/// Weights of the right length, finite, non-negative, positive total; returns the total.
fn check_weights<T: Real>(arg: &str, w: &ArrayView1<'_, T>, len: usize, of: &str) -> Result<f64> {
    if w.len() != len {
        return Err(Error::shape(
            arg,
            format!("has {} entries but {of} is {len}×{len}", w.len()),
        ));
    }
    Ok(check_histograms(arg, &w.view().insert_axis(Axis(0)))?[0])
}
