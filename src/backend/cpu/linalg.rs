//! [`LinalgKernels`] for the CPU: GEMM and the symmetric product `X·Xᵀ` through faer
//! ([`super::matmul`]), split over rayon; transposed operands are strided views, never
//! copies.

use super::matmul;
use super::svd3::svd3_batch;
use super::CpuBackend;
use crate::backend::linalg::{check_square, GemmShape, LinalgKernels, SyrkShape};
use crate::{Error, Real, Result};
use rayon::prelude::*;

impl<T: Real> LinalgKernels<T> for CpuBackend {
    fn svd3(
        &self,
        a: &Vec<T>,
        batch: usize,
        m: usize,
        u: &mut Vec<T>,
        s: &mut Vec<T>,
        vt: &mut Vec<T>,
    ) -> Result<()> {
        svd3_batch(a, batch, m, u, s, vt)
    }

    fn gemm(
        &self,
        shape: GemmShape,
        alpha: T,
        a: &Vec<T>,
        b: &Vec<T>,
        beta: T,
        c: &mut Vec<T>,
    ) -> Result<()> {
        shape.check(a.len(), b.len(), c.len())?;
        let GemmShape {
            m, n, k, ta, tb, ..
        } = shape;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let (av, bv) = (matmul::view(a, m, k, ta), matmul::view(b, k, n, tb));
        matmul::gemm(alpha, av, bv, beta, c);
        Ok(())
    }

    fn syrk(&self, shape: SyrkShape, alpha: T, a: &Vec<T>, beta: T, c: &mut Vec<T>) -> Result<()> {
        shape.check(a.len(), c.len())?;
        let SyrkShape { n, k, ta } = shape;
        if n == 0 {
            return Ok(());
        }
        matmul::syrk(alpha, matmul::view(a, n, k, ta), beta, c);
        Ok(())
    }

    fn frobenius_norm(&self, a: &Vec<T>) -> Result<T> {
        const CHUNK: usize = 1 << 14;
        let amax = a
            .par_chunks(CHUNK)
            .map(|ch| ch.iter().fold(0.0f64, |m, x| m.max(x.f64().abs())))
            .reduce(|| 0.0, f64::max);
        if amax == 0.0 || !amax.is_finite() {
            return Ok(T::of(amax));
        }
        let inv = 1.0 / amax;
        // Fixed chunks summed in parallel, then in chunk order: the same bits whatever the
        // number of threads.
        let parts: Vec<f64> = a
            .par_chunks(CHUNK)
            .map(|ch| {
                ch.iter()
                    .map(|x| {
                        let y = x.f64() * inv;
                        y * y
                    })
                    .sum::<f64>()
            })
            .collect();
        let sum: f64 = parts.iter().sum();
        Ok(T::of(amax * sum.sqrt()))
    }

    fn scaled_copy(&self, alpha: T, src: &Vec<T>, dst: &mut Vec<T>) -> Result<()> {
        if src.len() != dst.len() {
            return Err(Error::shape(
                "scaled_copy",
                format!(
                    "source of length {} into destination of length {}",
                    src.len(),
                    dst.len()
                ),
            ));
        }
        if alpha == T::one() {
            dst.copy_from_slice(src);
        } else {
            dst.par_chunks_mut(1 << 14)
                .zip(src.par_chunks(1 << 14))
                .for_each(|(d, s)| {
                    for (d, &s) in d.iter_mut().zip(s) {
                        *d = alpha * s;
                    }
                });
        }
        Ok(())
    }

    fn shift_diagonal(&self, n: usize, alpha: T, c: &mut Vec<T>) -> Result<()> {
        check_square("shift_diagonal: C", c.len(), n)?;
        for i in 0..n {
            c[i * n + i] += alpha;
        }
        Ok(())
    }
}
