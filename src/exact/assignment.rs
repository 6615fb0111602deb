//! The linear assignment problem `min_σ Σ_i C_iσ(i)` over permutations σ of a square cost,
//! by Jonker and Volgenant's shortest augmenting paths (1987): transport between two
//! histograms of `n` equal weights is an assignment problem (its vertices are the
//! permutation matrices scaled by the weight).
//!
//! Column prices `v` and row duals `u_i = C_iσ(i) − v_σ(i)` keep every assigned row at a
//! minimum of its reduced row `C_ij − v_j`, so `u_i + v_j ≤ C_ij` for every pair (dual
//! feasibility) and `u_i + v_σ(i) = C_iσ(i)` on the assignment (complementary slackness).
//! Phases: column reduction (each column's cheapest row), reduction transfer, two rounds
//! of augmenting row reduction (a free row takes its cheapest column at the price of the
//! second cheapest, displacing its owner), then one Dijkstra shortest-path augmentation
//! per row still free, over reduced costs `C_ij − v_j − u_i ≥ 0`.
//!
//! The Dijkstra step scans every column each time it settles one (a dense `O(n)` pass the
//! compiler vectorises) rather than keeping a list of columns at the current distance.

use super::costs::{row_min, row_min_kernel, row_of, Costs};
use crate::backend::cpu::isa::isa_dispatch;
use crate::real::MulAdd;
use std::time::Instant;

const NONE: usize = usize::MAX;

/// An optimal assignment and its duals, or the partial one a limit stopped.
pub(crate) struct Assignment {
    /// The column of each row.
    pub(crate) col_of_row: Vec<usize>,
    /// Row duals `u`.
    pub(crate) u: Vec<f64>,
    /// Column duals `v`.
    pub(crate) v: Vec<f64>,
    /// Shortest-path augmentations made.
    pub(crate) augmentations: usize,
    /// Whether every row was assigned by the algorithm (false: a limit stopped it and the
    /// rows left were matched to the columns left in order, a feasible but not optimal
    /// assignment).
    pub(crate) optimal: bool,
}

/// Solve the assignment problem of the square cost `c` (n×n).
pub(crate) fn solve<C: Costs>(
    c: &C,
    max_augmentations: usize,
    deadline: Option<Instant>,
) -> Assignment {
    let n = c.rows();
    debug_assert_eq!(n, c.cols());
    let mut x = vec![NONE; n]; // column of row i
    let mut y = vec![NONE; n]; // row of column j
    let mut v = vec![0.0f64; n];
    let mut row = vec![0.0f64; n];

    // Column reduction: each column's price is its cheapest entry; a row that is the
    // cheapest of a single column takes it. Columns in reverse order (as in the paper).
    let mut col_min = vec![f64::INFINITY; n];
    let mut col_arg = vec![0usize; n];
    let mut buf = Vec::new();
    for i in 0..n {
        let r = row_of(c, i, &mut buf);
        for j in 0..n {
            if r[j] < col_min[j] {
                col_min[j] = r[j];
                col_arg[j] = i;
            }
        }
    }
    let mut multiple = vec![false; n];
    for j in (0..n).rev() {
        v[j] = col_min[j];
        let i = col_arg[j];
        if x[i] == NONE {
            x[i] = j;
            y[j] = i;
        } else {
            multiple[i] = true;
        }
    }

    // Reduction transfer: a row holding a single column lowers that column's price by its
    // second-best reduced cost, so the row keeps it at the price of its next choice.
    let mut free: Vec<usize> = Vec::new();
    for i in 0..n {
        if x[i] == NONE {
            free.push(i);
        } else if !multiple[i] {
            let j1 = x[i];
            c.row(i, &mut row);
            let keep = row[j1];
            row[j1] = f64::INFINITY;
            let (m, _) = row_min(&row, &v);
            row[j1] = keep;
            if m.is_finite() {
                v[j1] -= m;
            }
        }
    }

    // Augmenting row reduction, twice.
    for _ in 0..2 {
        let mut k = 0;
        let mut next_free: Vec<usize> = Vec::new();
        // Bound on re-processing a displaced row at once (each time a price strictly
        // drops; the bound only guards against a slow crawl on near-ties).
        let mut budget = 4 * n + 16;
        while k < free.len() {
            let i = free[k];
            k += 1;
            let (u1, j1, u2, j2) = two_smallest(row_of(c, i, &mut buf), &v);
            let mut j1 = j1;
            let mut i0 = y[j1];
            if u1 < u2 {
                v[j1] -= u2 - u1;
            } else if i0 != NONE {
                j1 = j2;
                i0 = y[j1];
            }
            if i0 != NONE {
                x[i0] = NONE;
                if u1 < u2 && budget > 0 {
                    budget -= 1;
                    k -= 1;
                    free[k] = i0;
                } else {
                    next_free.push(i0);
                }
            }
            x[i] = j1;
            y[j1] = i;
        }
        free = next_free;
    }

    // Shortest augmenting paths for the rows still free.
    let mut d = vec![0.0f64; n];
    let mut shut = vec![0.0f64; n]; // 0 for columns not yet settled, −∞ once settled
    let mut pred = vec![0u64; n];
    let mut settled: Vec<usize> = Vec::new();
    let mut settled_d: Vec<f64> = Vec::new();
    let mut augmentations = 0;
    let mut optimal = true;
    for &f in &free {
        if augmentations >= max_augmentations
            || deadline.is_some_and(|t| augmentations % 16 == 0 && Instant::now() >= t)
        {
            optimal = false;
            break;
        }
        d.iter_mut().for_each(|t| *t = f64::INFINITY);
        shut.iter_mut().for_each(|t| *t = 0.0);
        settled.clear();
        settled_d.clear();
        let (mut mu, mut j) = relax_min(
            row_of(c, f, &mut buf),
            &v,
            &shut,
            0.0,
            f as u64,
            &mut d,
            &mut pred,
        );
        while y[j] != NONE {
            // Settle column j and relax through its row.
            shut[j] = f64::NEG_INFINITY;
            settled.push(j);
            settled_d.push(mu);
            let i = y[j];
            let r = row_of(c, i, &mut buf);
            let u1 = r[j] - v[j] - mu;
            (mu, j) = relax_min(r, &v, &shut, u1, i as u64, &mut d, &mut pred);
        }
        // Prices of the settled columns: their distance below the path's length.
        for (&s, &ds) in settled.iter().zip(&settled_d) {
            v[s] += ds - mu;
        }
        // Flip the path.
        loop {
            let i = pred[j] as usize;
            y[j] = i;
            let next = x[i];
            x[i] = j;
            if i == f {
                break;
            }
            j = next;
        }
        augmentations += 1;
    }

    if !optimal {
        // Feasible completion: rows left take the columns left, in order.
        let free_cols: Vec<usize> = (0..n).filter(|&j| y[j] == NONE).collect();
        let mut cols = free_cols.into_iter();
        for (i, xi) in x.iter_mut().enumerate() {
            if *xi == NONE {
                let j = cols.next().expect("as many free columns as free rows");
                *xi = j;
                y[j] = i;
            }
        }
    }
    let u = (0..n).map(|i| c.at(i, x[i]) - v[x[i]]).collect();
    Assignment {
        col_of_row: x,
        u,
        v,
        augmentations,
        optimal,
    }
}

/// The smallest and second smallest `c_j − v_j`: `(u1, j1, u2, j2)` (first indices on ties).
fn two_smallest(c: &[f64], v: &[f64]) -> (f64, usize, f64, usize) {
    let (mut u1, mut j1, mut u2, mut j2) = (f64::INFINITY, 0, f64::INFINITY, 0);
    for j in 0..c.len() {
        let h = c[j] - v[j];
        if h < u2 {
            if h >= u1 {
                u2 = h;
                j2 = j;
            } else {
                u2 = u1;
                j2 = j1;
                u1 = h;
                j1 = j;
            }
        }
    }
    (u1, j1, u2, j2)
}

isa_dispatch! {
    /// One Dijkstra step over every column: `d_j ← min(d_j, c_j − v_j − u1)` where
    /// `shut_j = 0` (unsettled; `pred_j ← i` where it improves; settled columns have
    /// `shut_j = −∞`), then `(min_j d_j − shut_j, the first j attaining it)`: the next
    /// column to settle.
    #[inline]
    fn relax_min(c: &[f64], v: &[f64], shut: &[f64], u1: f64, i: u64, d: &mut [f64], pred: &mut [u64]) -> (f64, usize) = relax_min_kernel up to AVX512;
}

#[inline(always)]
fn relax_min_kernel<M: MulAdd>(
    c: &[f64],
    v: &[f64],
    shut: &[f64],
    u1: f64,
    i: u64,
    d: &mut [f64],
    pred: &mut [u64],
) -> (f64, usize) {
    const L: usize = 8;
    let n = d.len();
    let (c, v, shut, pred) = (&c[..n], &v[..n], &shut[..n], &mut pred[..n]);
    for ((((cc, vv), ss), dd), pr) in c
        .chunks_exact(L)
        .zip(v.chunks_exact(L))
        .zip(shut.chunks_exact(L))
        .zip(d.chunks_exact_mut(L))
        .zip(pred.chunks_exact_mut(L))
    {
        for l in 0..L {
            let h = cc[l] - vv[l] - u1 - ss[l];
            let better = h < dd[l];
            dd[l] = if better { h } else { dd[l] };
            pr[l] = if better { i } else { pr[l] };
        }
    }
    for k in n / L * L..n {
        let h = c[k] - v[k] - u1 - shut[k];
        if h < d[k] {
            d[k] = h;
            pred[k] = i;
        }
    }
    // d − shut is +∞ on settled columns.
    row_min_kernel::<M>(d, shut)
}
