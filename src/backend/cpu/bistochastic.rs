//! [`BistochasticKernels`] on the CPU: rayon over the batch, one matrix at a time in stack
//! arrays (`n ≤ 32`). The forward runs in the working precision with the vectorisable exp of
//! [`Real`]; the backward's CG runs in `f64` (cheap at this size, and it keeps `f32` inputs
//! from losing digits in the dot products).

// Per-problem / per-index loops over several parallel arrays read best with an index.
#![allow(clippy::needless_range_loop)]

use super::isa::isa_dispatch;
use super::CpuBackend;
use crate::backend::batch_of;
use crate::backend::bistochastic::{
    cg_summary_to_words, words, BistochasticKernels, ProjectionStats,
};
use crate::backend::shape::check_len;
use crate::cg::{conjugate_gradient, CgOperator, CgOutcome, CgSummary, SmallSpace, SMALL_MAX};
use crate::real::{MulAdd, LANES};
use crate::{Error, Real, Result};
use rayon::prelude::*;

const MAX_N: usize = SMALL_MAX;

/// Matrices per rayon task, so that a task holds at least a few thousand entries.
fn min_task(n: usize) -> usize {
    (4096 / (n * n).max(1)).max(1)
}

/// `out_j = −LSE_i(a[i·MAX_N + j] + pot_i)` for `j < n`: a column-wise log-sum-exp over the
/// `n` rows of a padded row-major matrix (row stride `MAX_N`, `w` a multiple of `LANES`),
/// vectorised across the columns. Padding columns hold 0; their sums are computed and dropped.
#[inline(always)]
fn neg_lse_cols<T: Real, M: MulAdd>(
    n: usize,
    w: usize,
    a: &[T; MAX_N * MAX_N],
    pot: &[T; MAX_N],
    out: &mut [T; MAX_N],
) {
    let mut mx = [T::neg_infinity(); MAX_N];
    for i in 0..n {
        let p = pot[i];
        let row = &a[i * MAX_N..i * MAX_N + w];
        for (m, &x) in mx[..w].iter_mut().zip(row) {
            let v = x + p;
            *m = if v > *m { v } else { *m };
        }
    }
    let mut s = [T::zero(); MAX_N];
    for i in 0..n {
        let p = pot[i];
        let row = &a[i * MAX_N..i * MAX_N + w];
        for ((acc, &m), &x) in s[..w].iter_mut().zip(&mx[..w]).zip(row) {
            *acc += T::exp_nonpos::<M>(x + p - m);
        }
    }
    for j in 0..n {
        out[j] = -(mx[j] + s[j].ln());
    }
}

/// One matrix: log-domain Sinkhorn–Knopp. Returns (iterations, column error of `r`, whether
/// the in-loop column error met `tol`).
#[inline(always)]
fn forward_one<T: Real, M: MulAdd>(
    n: usize,
    x: &[T],
    iters: usize,
    tol: f64,
    r: &mut [T],
) -> (usize, f64, bool) {
    let w = n.div_ceil(LANES) * LANES;
    // X and Xᵀ, row stride MAX_N, zero padding.
    let mut xs = [T::zero(); MAX_N * MAX_N];
    let mut xt = [T::zero(); MAX_N * MAX_N];
    for i in 0..n {
        for j in 0..n {
            xs[i * MAX_N + j] = x[i * n + j];
            xt[j * MAX_N + i] = x[i * n + j];
        }
    }
    let mut alpha = [T::zero(); MAX_N];
    let mut beta = [T::zero(); MAX_N];
    let mut next = [T::zero(); MAX_N];
    let mut done = 0;
    let mut met = false;
    for it in 0..iters {
        // Column half-step: β_j = −LSE_i(X_ij + α_i). The column sums of the current R are
        // exp(β_j − β'_j), so the error check costs n exponentials.
        neg_lse_cols::<T, M>(n, w, &xs, &alpha, &mut next);
        if it > 0 && tol > 0.0 {
            let err: f64 = (0..n)
                .map(|j| ((beta[j] - next[j]).f64().exp() - 1.0).abs())
                .sum();
            if err <= tol {
                met = true;
                break;
            }
        }
        beta = next;
        // Row half-step: α_i = −LSE_j(X_ij + β_j).
        neg_lse_cols::<T, M>(n, w, &xt, &beta, &mut alpha);
        done += 1;
    }
    let mut cols = [0.0f64; MAX_N];
    for i in 0..n {
        for j in 0..n {
            let v = T::exp_nonpos::<M>(x[i * n + j] + alpha[i] + beta[j]);
            r[i * n + j] = v;
            cols[j] += v.f64();
        }
    }
    (done, cols[..n].iter().map(|c| (c - 1.0).abs()).sum(), met)
}

fn forward_chunk<T: Real, M: MulAdd>(
    n: usize,
    x: &[T],
    iters: usize,
    tol: f64,
    r: &mut [T],
) -> ProjectionStats {
    let per = n * n;
    let mut st = ProjectionStats::default();
    for (xm, rm) in x.chunks(per).zip(r.chunks_mut(per)) {
        let (it, err, met) = forward_one::<T, M>(n, xm, iters, tol, rm);
        st.iterations = st.iterations.max(it);
        st.marginal_error = st.marginal_error.max(err);
        st.unconverged += usize::from(!met);
    }
    st
}

isa_dispatch! {
    /// [`forward_chunk`] with AVX2 + FMA where the CPU has them.
    fn forward_dispatch<T: Real>(
        n: usize,
        x: &[T],
        iters: usize,
        tol: f64,
        r: &mut [T],
    ) -> ProjectionStats = forward_chunk up to AVX2;
}

/// The Schur operator of one matrix, `b ↦ c⊙b − Rᵀ diag(1/r) R b`, in `f64`.
struct SmallSchur<'a> {
    n: usize,
    r: &'a [f64; MAX_N * MAX_N],
    inv_row: [f64; MAX_N],
    col: [f64; MAX_N],
}

impl CgOperator<SmallSpace> for SmallSchur<'_> {
    #[inline]
    fn apply(&mut self, _: &SmallSpace, x: &[f64; MAX_N], y: &mut [f64; MAX_N]) -> Result<()> {
        let n = self.n;
        let mut t = [0.0f64; MAX_N];
        for i in 0..n {
            let row = &self.r[i * n..(i + 1) * n];
            t[i] = self.inv_row[i] * row.iter().zip(&x[..n]).map(|(a, b)| a * b).sum::<f64>();
        }
        for j in 0..n {
            y[j] = self.col[j] * x[j];
        }
        for i in 0..n {
            let row = &self.r[i * n..(i + 1) * n];
            let ti = t[i];
            for (o, &rij) in y[..n].iter_mut().zip(row) {
                *o -= rij * ti;
            }
        }
        Ok(())
    }
}

/// One matrix: implicit backward.
fn backward_one<T: Real>(
    n: usize,
    r: &[T],
    g: &[T],
    tol: f64,
    max_iters: usize,
    dx: &mut [T],
) -> Result<CgOutcome> {
    let mut rr = [0.0f64; MAX_N * MAX_N];
    let mut sr = [0.0f64; MAX_N];
    let mut sc = [0.0f64; MAX_N];
    let mut rows = [0.0f64; MAX_N];
    let mut cols = [0.0f64; MAX_N];
    for i in 0..n {
        for j in 0..n {
            let v = r[i * n + j].f64();
            let gv = g[i * n + j].f64() * v;
            rr[i * n + j] = v;
            rows[i] += v;
            cols[j] += v;
            sr[i] += gv;
            sc[j] += gv;
        }
    }
    let mut inv_row = [0.0f64; MAX_N];
    let mut support = [0.0f64; MAX_N];
    for k in 0..n {
        inv_row[k] = if rows[k] > 0.0 { 1.0 / rows[k] } else { 0.0 };
        support[k] = if cols[k] > 0.0 { 1.0 } else { 0.0 };
    }
    // rhs = s_c − Rᵀ diag(1/r) s_r
    let mut rhs = [0.0f64; MAX_N];
    rhs[..n].copy_from_slice(&sc[..n]);
    for i in 0..n {
        let t = inv_row[i] * sr[i];
        for j in 0..n {
            rhs[j] -= rr[i * n + j] * t;
        }
    }
    let space = SmallSpace { n };
    let mut op = SmallSchur {
        n,
        r: &rr,
        inv_row,
        col: cols,
    };
    let mut out = [CgOutcome::default()];
    let b = conjugate_gradient(
        &space,
        &mut op,
        &rhs,
        Some(&support),
        tol,
        max_iters,
        &mut out,
    )?;
    for i in 0..n {
        let row = &rr[i * n..(i + 1) * n];
        let a = inv_row[i] * (sr[i] - row.iter().zip(&b[..n]).map(|(p, q)| p * q).sum::<f64>());
        for j in 0..n {
            dx[i * n + j] = T::of((g[i * n + j].f64() - a - b[j]) * row[j]);
        }
    }
    Ok(out[0])
}

fn check_n(n: usize) -> Result<()> {
    if n == 0 || n > MAX_N {
        return Err(Error::parameter(
            "n",
            n,
            format!("the CPU bistochastic kernels handle 1 ≤ n ≤ {MAX_N}"),
        ));
    }
    Ok(())
}

/// Copy `src` into the start of `dst`, which must hold it.
fn put_words(dst: &mut [u64], src: &[u64], arg: &str) -> Result<()> {
    if dst.len() < src.len() {
        return Err(Error::shape(
            arg,
            format!("has {} words, {} needed", dst.len(), src.len()),
        ));
    }
    dst[..src.len()].copy_from_slice(src);
    Ok(())
}

impl<T: Real> BistochasticKernels<T> for CpuBackend {
    /// The words on the host (the kernels have finished when the deferred call returns).
    type Words = Vec<u64>;

    fn bistochastic_max_n(&self) -> usize {
        MAX_N
    }

    fn words(&self, len: usize) -> Result<Vec<u64>> {
        Ok(vec![0; len])
    }

    fn read_words(&self, w: &Vec<u64>, len: usize) -> Result<Vec<u64>> {
        w.get(..len)
            .map(<[u64]>::to_vec)
            .ok_or_else(|| Error::shape("words", format!("has {} words, {len} asked for", w.len())))
    }

    fn bistochastic_backward_words(&self, _batch: usize) -> usize {
        words::CG_SUMMARY
    }

    fn bistochastic_forward_deferred(
        &self,
        n: usize,
        x: &Vec<T>,
        iters: usize,
        tol: f64,
        r: &mut Vec<T>,
        stats: &mut Vec<u64>,
    ) -> Result<()> {
        check_n(n)?;
        let per = n * n;
        batch_of(x.len(), per, "x")?;
        check_len("r", r.len(), x.len())?;
        let chunk = per * min_task(n);
        let s = x
            .par_chunks(chunk)
            .zip(r.par_chunks_mut(chunk))
            .map(|(xc, rc)| forward_dispatch(n, xc, iters, tol, rc))
            .reduce(ProjectionStats::default, |a, b| ProjectionStats {
                iterations: a.iterations.max(b.iterations),
                marginal_error: a.marginal_error.max(b.marginal_error),
                unconverged: a.unconverged + b.unconverged,
            });
        put_words(stats, &s.to_words(), "stats")
    }

    fn bistochastic_backward_deferred(
        &self,
        n: usize,
        r: &Vec<T>,
        g: &Vec<T>,
        tol: f64,
        max_iters: usize,
        dx: &mut Vec<T>,
        words: &mut Vec<u64>,
    ) -> Result<()> {
        let s = self.bistochastic_backward(n, r, g, tol, max_iters, dx, None)?;
        put_words(words, &cg_summary_to_words(&s), "words")
    }

    fn bistochastic_backward(
        &self,
        n: usize,
        r: &Vec<T>,
        g: &Vec<T>,
        tol: f64,
        max_iters: usize,
        dx: &mut Vec<T>,
        outcomes: Option<&mut [CgOutcome]>,
    ) -> Result<CgSummary> {
        check_n(n)?;
        let per = n * n;
        let batch = batch_of(r.len(), per, "r")?;
        check_len("g", g.len(), r.len())?;
        check_len("dx", dx.len(), r.len())?;
        // The outcomes are computed per matrix here in any case; the summary reduces them.
        let mut local = Vec::new();
        let slots: &mut [CgOutcome] = match outcomes {
            Some(o) if o.len() != batch => {
                return Err(Error::shape(
                    "outcomes",
                    format!("has {} slots for {batch} matrices", o.len()),
                ))
            }
            Some(o) => o,
            None => {
                local.resize(batch, CgOutcome::default());
                &mut local
            }
        };
        dx.par_chunks_mut(per)
            .zip(r.par_chunks(per))
            .zip(g.par_chunks(per))
            .zip(slots.par_iter_mut())
            .enumerate()
            .with_min_len(min_task(n))
            .try_for_each(|(k, (((d, rm), gm), o))| -> Result<()> {
                // CG solved this matrix as a batch of one ("problem 0"): name the matrix.
                *o = backward_one(n, rm, gm, tol, max_iters, d).map_err(|e| match e {
                    Error::Numerical(msg) => {
                        Error::Numerical(msg.replacen("problem 0", &format!("problem {k}"), 1))
                    }
                    e => e,
                })?;
                Ok(())
            })?;
        Ok(CgSummary::of(slots, tol))
    }
}
