//! CPU kernel of the batched M×3 SVD: one matrix per rayon task, everything in `f64`.
//!
//! Per matrix `A` (`m×3`):
//! 1. scale `A` by a power of two so that `max|a| ∈ [1, 2)` (exact; no overflow in `AᵀA`);
//! 2. Gram `G = AᵀA` (6 sums, `f64`), cyclic Jacobi `G = V·Λ·Vᵀ`;
//! 3. `W = A·V` (kept in a per-thread scratch), then a one-sided (Hestenes) Jacobi polish
//!    of `W`'s columns, usually one sweep of three tiny rotations, so that `W`'s columns
//!    are orthogonal to working precision whatever the conditioning;
//! 4. `S_k = ‖w_k‖`, sorted descending; sign: the largest-|·| entry of each `v_k` positive;
//! 5. `U = W·diag(1/S)`, and for rank-deficient columns (`S_k ≤ tol·S_0`) an orthonormal
//!    completion by Gram–Schmidt against the canonical basis (zero columns when `m < 3`).

use crate::{Error, Real, Result};
use rayon::prelude::*;

/// Sweeps of the 3×3 Jacobi eigensolver (it converges quadratically; 10 is never reached
/// in practice, 4 to 5 is typical).
const JACOBI_SWEEPS: usize = 10;
/// Sweeps of the one-sided polish of `W = A·V` (one usually suffices).
const POLISH_SWEEPS: usize = 3;
/// Pairs rotated in each sweep, in this cyclic order.
const PAIRS: [(usize, usize); 3] = [(0, 1), (0, 2), (1, 2)];

/// Relative threshold under which a singular value counts as zero: `S_k ≤ tol·S_0` with
/// `tol = RANK_TOL_PER_SQRT_M·sqrt(m)`, the level where the direction of `A·v_k` is
/// lost in rounding (the computation runs in `f64` whatever `T`).
pub const RANK_TOL_PER_SQRT_M: f64 = 8.0 * f64::EPSILON;

/// Batched SVD of `batch` row-major `m×3` matrices; outputs as in
/// [`crate::backend::linalg::LinalgKernels::svd3`].
pub(crate) fn svd3_batch<T: Real>(
    a: &[T],
    batch: usize,
    m: usize,
    u: &mut [T],
    s: &mut [T],
    vt: &mut [T],
) -> Result<()> {
    let per = m * 3;
    if batch == 0 || m == 0 {
        return Err(Error::Empty {
            arg: "svd3: A".into(),
            detail: format!("a batch of {batch} matrices {m}×3"),
        });
    }
    if a.len() != batch * per
        || u.len() != batch * per
        || s.len() != batch * 3
        || vt.len() != batch * 9
    {
        return Err(Error::shape(
            "svd3",
            format!(
                "buffers of lengths A {}, U {}, S {}, Vt {} do not fit {batch} matrices {m}×3",
                a.len(),
                u.len(),
                s.len(),
                vt.len()
            ),
        ));
    }
    // Small matrices: group several per task so that scheduling stays cheap.
    let min_len = (4096 / per).max(1);
    u.par_chunks_mut(per)
        .zip(s.par_chunks_mut(3))
        .zip(vt.par_chunks_mut(9))
        .zip(a.par_chunks(per))
        .with_min_len(min_len)
        .for_each_init(Vec::new, |w, (((u, s), vt), a)| svd3_one(a, u, s, vt, w));
    if let Some(k) = s.iter().position(|v| !v.is_finite()) {
        return Err(Error::Numerical(format!(
            "svd3: singular value {} of matrix {} is not finite",
            k % 3,
            k / 3
        )));
    }
    Ok(())
}

/// A symmetric 3×3 matrix and the 3×3 matrix `V` of a Jacobi iteration, row-major.
type Mat3 = [[f64; 3]; 3];

/// Rotation `(c, s)` that zeroes the `(p, q)` entry: from `ζ = (a_qq − a_pp)/(2a_pq)`,
/// `t = sign(ζ)/(|ζ| + sqrt(1 + ζ²))`, `c = 1/sqrt(1 + t²)`, `s = c·t`.
#[inline]
fn rotation(app: f64, aqq: f64, apq: f64) -> (f64, f64, f64) {
    let zeta = (aqq - app) / (2.0 * apq);
    let t = zeta.signum() / (zeta.abs() + 1f64.hypot(zeta));
    let c = 1.0 / (1.0 + t * t).sqrt();
    (c, c * t, t)
}

/// Columns `p, q` of `V` ← `(c·v_p − s·v_q, s·v_p + c·v_q)`.
#[inline]
fn rotate_columns(v: &mut Mat3, p: usize, q: usize, c: f64, s: f64) {
    for row in v.iter_mut() {
        let (vp, vq) = (row[p], row[q]);
        row[p] = c * vp - s * vq;
        row[q] = s * vp + c * vq;
    }
}

/// Cyclic Jacobi on the symmetric `g`: returns `V` with `g = V·diag(λ)·Vᵀ` (λ left on the
/// diagonal of `g`).
fn jacobi_eigen(g: &mut Mat3) -> Mat3 {
    let mut v = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    for _ in 0..JACOBI_SWEEPS {
        let mut rotated = false;
        for &(p, q) in &PAIRS {
            let apq = g[p][q];
            // G is PSD, so |g_pq| ≤ sqrt(g_pp·g_qq): a relative test is safe.
            if apq == 0.0 || apq.abs() <= f64::EPSILON * (g[p][p] * g[q][q]).abs().sqrt() {
                g[p][q] = 0.0;
                g[q][p] = 0.0;
                continue;
            }
            rotated = true;
            let (c, s, t) = rotation(g[p][p], g[q][q], apq);
            let r = 3 - p - q;
            let (arp, arq) = (g[r][p], g[r][q]);
            g[p][p] -= t * apq;
            g[q][q] += t * apq;
            g[p][q] = 0.0;
            g[q][p] = 0.0;
            g[r][p] = c * arp - s * arq;
            g[p][r] = g[r][p];
            g[r][q] = s * arp + c * arq;
            g[q][r] = g[r][q];
            rotate_columns(&mut v, p, q, c, s);
        }
        if !rotated {
            break;
        }
    }
    v
}

/// Squared norms of columns `p`, `q` of the `m×3` row-major `w`, and their dot product.
#[inline]
fn column_dots(w: &[f64], p: usize, q: usize) -> (f64, f64, f64) {
    let (mut a, mut b, mut g) = (0.0, 0.0, 0.0);
    for row in w.chunks_exact(3) {
        a += row[p] * row[p];
        b += row[q] * row[q];
        g += row[p] * row[q];
    }
    (a, b, g)
}

/// One-sided Jacobi on the columns of `w` (`m×3`), accumulating the rotations into `v`.
fn polish(w: &mut [f64], v: &mut Mat3, tol: f64) {
    for _ in 0..POLISH_SWEEPS {
        let mut rotated = false;
        for &(p, q) in &PAIRS {
            let (a, b, g) = column_dots(w, p, q);
            if g == 0.0 || g.abs() <= tol * (a * b).sqrt() {
                continue;
            }
            rotated = true;
            let (c, s, _) = rotation(a, b, g);
            for row in w.chunks_exact_mut(3) {
                let (wp, wq) = (row[p], row[q]);
                row[p] = c * wp - s * wq;
                row[q] = s * wp + c * wq;
            }
            rotate_columns(v, p, q, c, s);
        }
        if !rotated {
            break;
        }
    }
}

/// The SVD of one `m×3` matrix (see the module docs); `w` is scratch.
fn svd3_one<T: Real>(a: &[T], u: &mut [T], s: &mut [T], vt: &mut [T], w: &mut Vec<f64>) {
    let m = a.len() / 3;
    let amax = a.iter().fold(0.0f64, |mx, x| mx.max(x.f64().abs()));
    let mut v: Mat3 = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    w.clear();
    w.resize(3 * m, 0.0);
    if amax > 0.0 {
        // Power-of-two scaling: exact, and keeps AᵀA (and the S returned) in range.
        let scale = 2f64.powi(-(amax.log2().floor() as i32).clamp(-1000, 1000));
        let mut g = [[0.0f64; 3]; 3];
        let (mut g00, mut g01, mut g02, mut g11, mut g12, mut g22) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        for row in a.chunks_exact(3) {
            let (x0, x1, x2) = (
                row[0].f64() * scale,
                row[1].f64() * scale,
                row[2].f64() * scale,
            );
            g00 += x0 * x0;
            g01 += x0 * x1;
            g02 += x0 * x2;
            g11 += x1 * x1;
            g12 += x1 * x2;
            g22 += x2 * x2;
        }
        g[0] = [g00, g01, g02];
        g[1] = [g01, g11, g12];
        g[2] = [g02, g12, g22];
        v = jacobi_eigen(&mut g);
        for (row, wr) in a.chunks_exact(3).zip(w.chunks_exact_mut(3)) {
            let x = [
                row[0].f64() * scale,
                row[1].f64() * scale,
                row[2].f64() * scale,
            ];
            for (k, wk) in wr.iter_mut().enumerate() {
                *wk = x[0] * v[0][k] + x[1] * v[1][k] + x[2] * v[2][k];
            }
        }
        let tol = RANK_TOL_PER_SQRT_M * (m as f64).sqrt();
        polish(w, &mut v, tol);
        let mut norms = [0.0f64; 3];
        for row in w.chunks_exact(3) {
            for k in 0..3 {
                norms[k] += row[k] * row[k];
            }
        }
        // Sort descending (stable: ties keep their order) and permute W and V alike.
        let mut order = [0usize, 1, 2];
        order.sort_by(|&i, &j| norms[j].total_cmp(&norms[i]));
        let v_old = v;
        let mut sv = [0.0f64; 3];
        for (k, &o) in order.iter().enumerate() {
            sv[k] = norms[o].sqrt();
            for i in 0..3 {
                v[i][k] = v_old[i][o];
            }
        }
        // Sign convention: the entry of largest magnitude of each v_k is positive
        // (the first one on ties).
        let mut sign = [1.0f64; 3];
        for k in 0..3 {
            let mut big = 0;
            for i in 1..3 {
                if v[i][k].abs() > v[big][k].abs() {
                    big = i;
                }
            }
            if v[big][k] < 0.0 {
                sign[k] = -1.0;
                for row in v.iter_mut() {
                    row[k] = -row[k];
                }
            }
        }
        // U = W·diag(sign/S) for the columns above the rank threshold.
        let inv: Vec<f64> = (0..3)
            .map(|k| {
                if k < m && sv[k] > tol * sv[0] {
                    sign[k] / sv[k]
                } else {
                    0.0
                }
            })
            .collect();
        for (ur, wr) in u.chunks_exact_mut(3).zip(w.chunks_exact(3)) {
            for k in 0..3 {
                ur[k] = T::of(wr[order[k]] * inv[k]);
            }
        }
        for k in 0..3 {
            s[k] = if inv[k] != 0.0 {
                T::of(sv[k] / scale)
            } else {
                T::zero()
            };
        }
        complete_u(u, &inv.iter().map(|&x| x != 0.0).collect::<Vec<_>>(), w);
    } else {
        s.fill(T::zero());
        u.fill(T::zero());
        complete_u(u, &[false; 3], w);
    }
    for k in 0..3 {
        for i in 0..3 {
            vt[k * 3 + i] = T::of(v[i][k]);
        }
    }
}

/// Fill the columns `k` of `u` (`m×3`) with `!keep[k]` by an orthonormal completion: the
/// canonical vector `e_i` with the largest residual against the columns already set,
/// orthogonalised twice (Gram–Schmidt) and normalised; a zero column when the columns
/// already span `R^m` (`m < 3`). `scratch` is reused for the candidate vector in `f64`.
fn complete_u<T: Real>(u: &mut [T], keep: &[bool], scratch: &mut Vec<f64>) {
    let m = u.len() / 3;
    let mut set: Vec<usize> = (0..3).filter(|&k| keep[k]).collect();
    for k in 0..3 {
        if keep[k] {
            continue;
        }
        let mut best = (0usize, -1.0f64);
        for (i, row) in u.chunks_exact(3).enumerate() {
            let r = 1.0
                - set
                    .iter()
                    .map(|&j| row[j].f64() * row[j].f64())
                    .sum::<f64>();
            if r > best.1 {
                best = (i, r);
            }
        }
        if best.1 <= 0.25 {
            for row in u.chunks_exact_mut(3) {
                row[k] = T::zero();
            }
            set.push(k);
            continue;
        }
        scratch.clear();
        scratch.resize(m, 0.0);
        scratch[best.0] = 1.0;
        for _ in 0..2 {
            for &j in &set {
                let d: f64 = u
                    .chunks_exact(3)
                    .zip(scratch.iter())
                    .map(|(row, x)| row[j].f64() * x)
                    .sum();
                for (row, x) in u.chunks_exact(3).zip(scratch.iter_mut()) {
                    *x -= d * row[j].f64();
                }
            }
        }
        let norm = scratch.iter().map(|x| x * x).sum::<f64>().sqrt();
        for (row, x) in u.chunks_exact_mut(3).zip(scratch.iter()) {
            row[k] = T::of(x / norm);
        }
        set.push(k);
    }
}
