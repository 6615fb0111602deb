//! [`GradKernels`] on the CPU: rayon over rows (mat-vecs) or over problems (reductions).

use super::CpuBackend;
use crate::backend::shape::{check_len, per_problem, weight_stride};
use crate::backend::{batch_of, grad::GradKernels};
use crate::{Real, Result};
use rayon::prelude::*;

/// Columns per task of the transposed mat-vec.
const COL_BLOCK: usize = 256;

fn check_plan<T>(plan: &[T], n: usize, m: usize) -> Result<usize> {
    batch_of(plan.len(), n * m, "plan")
}

impl<T: Real> GradKernels<T> for CpuBackend {
    fn plan_matvec(
        &self,
        plan: &Vec<T>,
        n: usize,
        m: usize,
        x: &Vec<T>,
        y: &mut Vec<T>,
    ) -> Result<()> {
        let batch = check_plan(plan, n, m)?;
        check_len("x", x.len(), batch * m)?;
        check_len("y", y.len(), batch * n)?;
        y.par_iter_mut()
            .with_min_len((4096 / m.max(1)).max(1))
            .enumerate()
            .for_each(|(bi, yi)| {
                let b = bi / n;
                let row = &plan[bi * m..(bi + 1) * m];
                let xb = &x[b * m..(b + 1) * m];
                let s = row
                    .iter()
                    .zip(xb)
                    .fold(0.0f64, |s, (&p, &v)| s + (p * v).f64());
                *yi = T::of(s);
            });
        Ok(())
    }

    fn plan_matvec_t(
        &self,
        plan: &Vec<T>,
        n: usize,
        m: usize,
        x: &Vec<T>,
        y: &mut Vec<T>,
    ) -> Result<()> {
        let batch = check_plan(plan, n, m)?;
        check_len("x", x.len(), batch * n)?;
        check_len("y", y.len(), batch * m)?;
        y.par_chunks_mut(m).enumerate().for_each(|(b, yb)| {
            let pb = &plan[b * n * m..(b + 1) * n * m];
            let xb = &x[b * n..(b + 1) * n];
            yb.par_chunks_mut(COL_BLOCK)
                .enumerate()
                .for_each(|(blk, ys)| {
                    let j0 = blk * COL_BLOCK;
                    let mut acc = [0.0f64; COL_BLOCK];
                    for (i, &xi) in xb.iter().enumerate() {
                        let row = &pb[i * m + j0..i * m + j0 + ys.len()];
                        for (a, &p) in acc.iter_mut().zip(row) {
                            *a += (p * xi).f64();
                        }
                    }
                    for (o, a) in ys.iter_mut().zip(acc) {
                        *o = T::of(a);
                    }
                });
        });
        Ok(())
    }

    fn weighted_marginals(
        &self,
        plan: &Vec<T>,
        n: usize,
        m: usize,
        weight: Option<&Vec<T>>,
    ) -> Result<(Vec<T>, Vec<T>)> {
        let batch = check_plan(plan, n, m)?;
        let per = n * m;
        let stride = match weight {
            Some(w) => weight_stride(w.len(), batch, per)?,
            None => 0,
        };
        let entry = |b: usize, k: usize| -> f64 {
            let p = plan[b * per + k];
            match weight {
                Some(w) => (w[b * stride + k] * p).f64(),
                None => p.f64(),
            }
        };
        let rows: Vec<T> = (0..batch * n)
            .into_par_iter()
            .with_min_len((4096 / m.max(1)).max(1))
            .map(|bi| {
                let (b, i) = (bi / n, bi % n);
                T::of((0..m).map(|j| entry(b, i * m + j)).sum())
            })
            .collect();
        let mut cols = vec![T::zero(); batch * m];
        cols.par_chunks_mut(m).enumerate().for_each(|(b, cb)| {
            cb.par_chunks_mut(COL_BLOCK)
                .enumerate()
                .for_each(|(blk, cs)| {
                    let j0 = blk * COL_BLOCK;
                    let mut acc = [0.0f64; COL_BLOCK];
                    for i in 0..n {
                        for (jj, a) in acc.iter_mut().take(cs.len()).enumerate() {
                            *a += entry(b, i * m + j0 + jj);
                        }
                    }
                    for (o, a) in cs.iter_mut().zip(acc) {
                        *o = T::of(a);
                    }
                });
        });
        Ok((rows, cols))
    }

    fn assemble_gradient(
        &self,
        plan: &Vec<T>,
        n: usize,
        m: usize,
        weight: &Vec<T>,
        a: &Vec<T>,
        c: &Vec<T>,
        alpha: T,
        beta: T,
    ) -> Result<Vec<T>> {
        let batch = check_plan(plan, n, m)?;
        let per = n * m;
        let stride = weight_stride(weight.len(), batch, per)?;
        check_len("a", a.len(), batch * n)?;
        check_len("c", c.len(), batch * m)?;
        let mut out = vec![T::zero(); plan.len()];
        out.par_chunks_mut(m).enumerate().for_each(|(bi, orow)| {
            let (b, i) = (bi / n, bi % n);
            let prow = &plan[bi * m..(bi + 1) * m];
            let wrow = &weight[b * stride + i * m..b * stride + (i + 1) * m];
            let cb = &c[b * m..(b + 1) * m];
            let ai = a[bi];
            for j in 0..m {
                orow[j] = (alpha + beta * (wrow[j] - ai - cb[j])) * prow[j];
            }
        });
        Ok(out)
    }

    fn batched_dot(&self, batch: usize, x: &Vec<T>, y: &Vec<T>) -> Result<Vec<f64>> {
        check_len("y", y.len(), x.len())?;
        let per = per_problem(x.len(), batch, "x")?;
        if per == 0 {
            return Ok(vec![0.0; batch]);
        }
        Ok(x.par_chunks(per)
            .zip(y.par_chunks(per))
            .map(|(a, b)| a.iter().zip(b).map(|(&u, &v)| u.f64() * v.f64()).sum())
            .collect())
    }

    fn batched_axpy(&self, alpha: &[f64], x: &Vec<T>, y: &mut Vec<T>) -> Result<()> {
        check_len("y", y.len(), x.len())?;
        let per = per_problem(x.len(), alpha.len(), "x")?;
        if per == 0 {
            return Ok(());
        }
        y.par_chunks_mut(per)
            .zip(x.par_chunks(per))
            .zip(alpha.par_iter())
            .for_each(|((yb, xb), &a)| {
                if a != 0.0 {
                    let a = T::of(a);
                    for (o, &v) in yb.iter_mut().zip(xb) {
                        *o += a * v;
                    }
                }
            });
        Ok(())
    }

    fn batched_xpby(&self, x: &Vec<T>, beta: &[f64], y: &mut Vec<T>) -> Result<()> {
        check_len("y", y.len(), x.len())?;
        let per = per_problem(x.len(), beta.len(), "x")?;
        if per == 0 {
            return Ok(());
        }
        y.par_chunks_mut(per)
            .zip(x.par_chunks(per))
            .zip(beta.par_iter())
            .for_each(|((yb, xb), &bt)| {
                let bt = T::of(bt);
                for (o, &v) in yb.iter_mut().zip(xb) {
                    *o = v + bt * *o;
                }
            });
        Ok(())
    }

    fn hadamard(&self, a: &Vec<T>, x: &Vec<T>, beta: T, y: &mut Vec<T>) -> Result<()> {
        check_len("a", a.len(), x.len())?;
        check_len("y", y.len(), x.len())?;
        if beta == T::zero() {
            y.par_iter_mut()
                .zip(a.par_iter().zip(x.par_iter()))
                .for_each(|(o, (&u, &v))| *o = u * v);
        } else {
            y.par_iter_mut()
                .zip(a.par_iter().zip(x.par_iter()))
                .for_each(|(o, (&u, &v))| *o = u * v + beta * *o);
        }
        Ok(())
    }

    fn recip_or_zero(&self, x: &Vec<T>) -> Result<Vec<T>> {
        Ok(x.par_iter()
            .map(|&v| {
                let r = T::one() / v;
                if v > T::zero() && r.is_finite() {
                    r
                } else {
                    T::zero()
                }
            })
            .collect())
    }

    fn support(&self, x: &Vec<T>) -> Result<Vec<T>> {
        Ok(x.par_iter()
            .map(|&v| if v > T::zero() { T::one() } else { T::zero() })
            .collect())
    }
}
