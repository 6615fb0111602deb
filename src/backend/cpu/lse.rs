//! The CPU hot loop: a one-pass, vectorised log-sum-exp over one row.
//!
//! `lse(p, c, 1/ε) = LSE_k((p_k − c_k)/ε)`, processed in chunks that stay in L1: each
//! chunk's maximum is found first, the running sum is rescaled only when the maximum
//! grows, then the chunk's exponentials are added. One `exp` per element, lane-parallel
//! accumulation (so the compiler can vectorise without reassociating a scalar sum).

use super::isa::isa_dispatch;
use crate::real::{MulAdd, Real, LANES};

const CHUNK: usize = 256;

isa_dispatch! {
    /// `LSE_k((pot[k] − cost[k]) · inv_eps)`; `-inf` when every term is `-inf`.
    /// Uses AVX2+FMA when the CPU has them (checked once, cached by std).
    #[inline]
    pub fn lse<T: Real>(pot: &[T], cost: &[T], inv_eps: T) -> T = lse_kernel up to AVX2;
}

#[inline(always)]
fn lse_kernel<T: Real, M: MulAdd>(pot: &[T], cost: &[T], inv_eps: T) -> T {
    debug_assert_eq!(pot.len(), cost.len());
    let ninf = T::neg_infinity();
    let mut run_max = ninf;
    let mut acc = [T::zero(); LANES];
    let mut buf = [ninf; CHUNK];
    for (pc, cc) in pot.chunks(CHUNK).zip(cost.chunks(CHUNK)) {
        let len = pc.len().min(cc.len());
        let padded = len.div_ceil(LANES) * LANES;
        let full = len / LANES * LANES;
        let (pc, cc) = (&pc[..len], &cc[..len]);
        let mut mx = [ninf; LANES];
        // Pass 1: scaled values and the chunk maximum, lane by lane (whole lane groups
        // as fixed-size slices, so that the loop compiles to vector instructions).
        for ((bg, pg), cg) in buf[..full]
            .chunks_exact_mut(LANES)
            .zip(pc.chunks_exact(LANES))
            .zip(cc.chunks_exact(LANES))
        {
            for l in 0..LANES {
                let v = (pg[l] - cg[l]) * inv_eps;
                bg[l] = v;
                mx[l] = if v > mx[l] { v } else { mx[l] };
            }
        }
        for k in full..len {
            let v = (pc[k] - cc[k]) * inv_eps;
            buf[k] = v;
            mx[0] = if v > mx[0] { v } else { mx[0] };
        }
        for slot in &mut buf[len..padded] {
            *slot = ninf;
        }
        let chunk_max = mx.iter().fold(ninf, |a, &b| if b > a { b } else { a });
        if chunk_max > run_max {
            // The sum so far in units of the new maximum (nothing to rescale before the
            // first finite term).
            if run_max > ninf {
                let scale = T::exp_nonpos::<M>(run_max - chunk_max);
                for a in acc.iter_mut() {
                    *a *= scale;
                }
            }
            run_max = chunk_max;
        }
        if run_max == ninf {
            continue;
        }
        // Pass 2: exponentials relative to the running maximum.
        for bg in buf[..padded].chunks_exact(LANES) {
            for l in 0..LANES {
                acc[l] += T::exp_nonpos::<M>(bg[l] - run_max);
            }
        }
    }
    if run_max == ninf {
        return ninf;
    }
    let s = acc.iter().fold(T::zero(), |a, &b| a + b);
    run_max + s.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(p: &[f64], c: &[f64], inv_eps: f64) -> f64 {
        let v: Vec<f64> = p.iter().zip(c).map(|(a, b)| (a - b) * inv_eps).collect();
        let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        m + v.iter().map(|x| (x - m).exp()).sum::<f64>().ln()
    }

    #[test]
    fn matches_two_pass_reference_across_lengths() {
        // Deterministic pseudo-random data; lengths cover partial lanes and chunks.
        let mut next = crate::test_rng::uniforms(12345);
        for &len in &[1usize, 3, 8, 9, 255, 256, 257, 1000, 3001] {
            let p: Vec<f64> = (0..len).map(|_| next() * 4.0 - 2.0).collect();
            let c: Vec<f64> = (0..len).map(|_| next()).collect();
            for &inv_eps in &[1.0, 100.0, 1e4] {
                let want = reference(&p, &c, inv_eps);
                let got = lse(&p, &c, inv_eps);
                assert!(
                    (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                    "len {len}: {got} vs {want}"
                );
                let p32: Vec<f32> = p.iter().map(|&x| x as f32).collect();
                let c32: Vec<f32> = c.iter().map(|&x| x as f32).collect();
                let got32 = lse(&p32, &c32, inv_eps as f32) as f64;
                assert!(
                    (got32 - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "f32 len {len}: {got32} vs {want}"
                );
            }
        }
    }

    #[test]
    fn negative_infinity_terms_are_ignored_and_all_infinite_gives_neg_infinity() {
        let p = [f64::NEG_INFINITY, 0.0, f64::NEG_INFINITY];
        let c = [0.0, 0.5, 1.0];
        assert!((lse(&p, &c, 2.0) - (-1.0)).abs() < 1e-14);
        let all = [f64::NEG_INFINITY; 5];
        assert_eq!(lse(&all, &[0.0; 5], 1.0), f64::NEG_INFINITY);
    }
}
