//! The plan report of a dense cost, evaluated entry by entry: `P_ij = exp((f_i + g_j −
//! C_ij)/ε)` in `f64` from the stored `f`, `g` and `C`, so the errors are those of the plan
//! the potentials define, not of a half-step that approximates it in `T`. Row sums, then
//! column sums (from `Cᵀ`), each output summed in a fixed order: the result does not depend
//! on the number of threads. The exponentials are [`exp_f64`] (vectorised, relative error
//! at most 2·2^−52).

use super::isa::isa_dispatch;
use super::{check_fg, other, CpuCost};
use crate::backend::{Marginals, PlanReport, Side};
use crate::real::{exp_f64, MulAdd, LANES};
use crate::{Real, Result};
use rayon::prelude::*;

/// Rows (or columns) per rayon task.
const ROWS_PER_TASK: usize = 16;

isa_dispatch! {
    /// `Σ_k exp((p + q_k − c_k)/ε)` and `Σ_k exp(…)·c_k` over one row of the cost, in `f64`
    /// (`p = −∞` or `q_k = −∞`: the entry is 0), lane by lane in a fixed order.
    fn row_sums<T: Real>(p: T, q: &[T], c: &[T], inv_eps: f64) -> (f64, f64) = row_sums_kernel up to AVX2;
}

#[inline(always)]
fn row_sums_kernel<T: Real, M: MulAdd>(p: T, q: &[T], c: &[T], inv_eps: f64) -> (f64, f64) {
    debug_assert_eq!(q.len(), c.len());
    if p == T::neg_infinity() {
        return (0.0, 0.0);
    }
    let p = p.f64();
    let (mut s, mut t) = ([0.0f64; LANES], [0.0f64; LANES]);
    let mut add = |l: usize, qk: T, ck: T| {
        let ck = ck.f64();
        let e = exp_f64::<M>((p + qk.f64() - ck) * inv_eps);
        s[l] += e;
        t[l] += e * ck;
    };
    let (qs, cs) = (q.chunks_exact(LANES), c.chunks_exact(LANES));
    let (q_tail, c_tail) = (qs.remainder(), cs.remainder());
    for (qg, cg) in qs.zip(cs) {
        for l in 0..LANES {
            add(l, qg[l], cg[l]);
        }
    }
    for (&qk, &ck) in q_tail.iter().zip(c_tail) {
        add(0, qk, ck);
    }
    (s.iter().sum(), t.iter().sum())
}

/// Per problem and output of `side`: `(Σ P, Σ P·C)` along the other side.
fn sums<T: Real>(
    cost: &CpuCost<T>,
    side: Side,
    own: &[T],
    other_pot: &[T],
    inv_eps: f64,
) -> Vec<(f64, f64)> {
    let dims = cost.dims;
    let (len, len_other) = (dims.len(side), dims.len(other(side)));
    let mut out = vec![(0.0, 0.0); own.len()];
    let chunk_sums = |(chunk, vals): (usize, &mut [(f64, f64)])| {
        for (k, v) in vals.iter_mut().enumerate() {
            let idx = chunk * ROWS_PER_TASK + k;
            let (b, r) = (idx / len, idx % len);
            let q = &other_pot[b * len_other..(b + 1) * len_other];
            *v = row_sums(own[idx], q, cost.row(side, b, r), inv_eps);
        }
    };
    // Small problems stay on the calling thread (no hand-off to the pool).
    if super::runs_serially(own.len() * len_other) {
        out.chunks_mut(ROWS_PER_TASK)
            .enumerate()
            .for_each(chunk_sums);
    } else {
        let min_chunks = (super::MIN_TASK_WORK / (ROWS_PER_TASK * len_other).max(1)).max(1);
        out.par_chunks_mut(ROWS_PER_TASK)
            .with_min_len(min_chunks)
            .enumerate()
            .for_each(chunk_sums);
    }
    out
}

/// [`crate::Backend::plan_report`] for a dense cost (shared or one per problem).
pub(super) fn dense<T: Real>(
    cost: &CpuCost<T>,
    f: &[T],
    g: &[T],
    marginals: &Marginals<'_, Vec<T>>,
    eps: T,
) -> Result<Vec<PlanReport>> {
    let batch = check_fg(&cost.dims, f.len(), g.len())?;
    let (n, m) = (cost.dims.n, cost.dims.m);
    let inv_eps = 1.0 / eps.f64();
    let rows = sums(cost, Side::Row, f, g, inv_eps);
    let cols = sums(cost, Side::Col, g, f, inv_eps);
    let error = |s: &[(f64, f64)], a: &[T]| -> f64 {
        s.iter().zip(a).map(|(s, a)| (s.0 - a.f64()).abs()).sum()
    };
    Ok((0..batch)
        .map(|b| {
            let r = &rows[b * n..(b + 1) * n];
            let c = &cols[b * m..(b + 1) * m];
            PlanReport {
                row_error: error(r, &marginals.mu[b * n..(b + 1) * n]),
                col_error: error(c, &marginals.nu[b * m..(b + 1) * m]),
                cost: r.iter().map(|s| s.1).sum(),
                mass: Some(r.iter().map(|s| s.0).sum()),
            }
        })
        .collect())
}
