//! [`BarycenterKernels`] on the CPU.

use super::CpuBackend;
use crate::backend::barycenter::{log_power_mean, BaryLayout, BarycenterKernels};
use crate::{Real, Result};
use rayon::prelude::*;

/// Below this many elements the elementwise kernels run on the calling thread: a rayon
/// round trip costs more than the work.
const PAR_MIN: usize = 1 << 18;

impl<T: Real> BarycenterKernels<T> for CpuBackend {
    fn bary_log_mean(
        &self,
        layout: BaryLayout,
        weights: &Vec<T>,
        v: &Vec<T>,
        bar: &mut Vec<T>,
    ) -> Result<()> {
        layout.check("v", v.len(), true)?;
        layout.check("bar", bar.len(), false)?;
        layout.check_weights(weights.len())?;
        let (k, m) = (layout.inputs, layout.m);
        let body = |((b, vp), w): ((&mut [T], &[T]), &[T])| {
            b.fill(T::zero());
            for (vk, &wk) in vp.chunks_exact(m).zip(w) {
                for (bx, &vx) in b.iter_mut().zip(vk) {
                    *bx -= wk * vx;
                }
            }
        };
        if v.len() < PAR_MIN {
            bar.chunks_mut(m)
                .zip(v.chunks(k * m))
                .zip(weights.chunks(k))
                .for_each(body);
        } else {
            bar.par_chunks_mut(m)
                .zip(v.par_chunks(k * m))
                .zip(weights.par_chunks(k))
                .for_each(body);
        }
        Ok(())
    }

    fn bary_log_power_mean(
        &self,
        layout: BaryLayout,
        weights: &Vec<T>,
        v: &Vec<T>,
        bar: &mut Vec<T>,
        t: T,
    ) -> Result<()> {
        layout.check("v", v.len(), true)?;
        layout.check("bar", bar.len(), false)?;
        layout.check_weights(weights.len())?;
        let (k, m) = (layout.inputs, layout.m);
        let body = |((b, vp), w): ((&mut [T], &[T]), &[T])| {
            for (x, bx) in b.iter_mut().enumerate() {
                *bx = log_power_mean(w, |j| vp[j * m + x], t);
            }
        };
        if v.len() < PAR_MIN {
            bar.chunks_mut(m)
                .zip(v.chunks(k * m))
                .zip(weights.chunks(k))
                .for_each(body);
        } else {
            bar.par_chunks_mut(m)
                .zip(v.par_chunks(k * m))
                .zip(weights.par_chunks(k))
                .for_each(body);
        }
        Ok(())
    }

    fn bary_potential(
        &self,
        layout: BaryLayout,
        bar: &Vec<T>,
        v: &Vec<T>,
        g: &mut Vec<T>,
    ) -> Result<()> {
        layout.check("v", v.len(), true)?;
        layout.check("g", g.len(), true)?;
        layout.check("bar", bar.len(), false)?;
        let (k, m) = (layout.inputs, layout.m);
        let body = |((gp, vp), b): ((&mut [T], &[T]), &[T])| {
            for (gk, vk) in gp.chunks_exact_mut(m).zip(vp.chunks_exact(m)) {
                for ((gx, &vx), &bx) in gk.iter_mut().zip(vk).zip(b) {
                    *gx = bx + vx;
                }
            }
        };
        if v.len() < PAR_MIN {
            g.chunks_mut(k * m)
                .zip(v.chunks(k * m))
                .zip(bar.chunks(m))
                .for_each(body);
        } else {
            g.par_chunks_mut(k * m)
                .zip(v.par_chunks(k * m))
                .zip(bar.par_chunks(m))
                .for_each(body);
        }
        Ok(())
    }

    fn bary_spread(&self, layout: BaryLayout, g: &Vec<T>, v: &Vec<T>, eps: T) -> Result<Vec<T>> {
        layout.check("v", v.len(), true)?;
        layout.check("g", g.len(), true)?;
        let (k, m) = (layout.inputs, layout.m);
        let inv_eps = 1.0 / eps.f64();
        let spread = |(gp, vp): (&[T], &[T])| {
            let mut total = 0.0f64;
            for x in 0..m {
                // Two-pass population variance over the K inputs, in f64.
                let val = |j: usize| ((gp[j * m + x].f64() - vp[j * m + x].f64()) * inv_eps).exp();
                let mean = (0..k).map(val).sum::<f64>() / k as f64;
                let var = (0..k).map(|j| (val(j) - mean).powi(2)).sum::<f64>() / k as f64;
                total += var.sqrt();
            }
            T::of(total)
        };
        Ok(if v.len() < PAR_MIN {
            g.chunks(k * m).zip(v.chunks(k * m)).map(spread).collect()
        } else {
            g.par_chunks(k * m)
                .zip(v.par_chunks(k * m))
                .map(spread)
                .collect()
        })
    }
}
