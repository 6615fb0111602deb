//! The CPU backend as a cluster member: members share host memory, so the collectives are
//! copies. A `Cluster<CpuBackend>` computes what a GPU cluster computes, in the same order,
//! which is how the splitting is tested without GPUs.

use super::{check_block, check_shards, Collective, Member, Strided};
use crate::backend::cpu::CpuBackend;
use crate::{Error, Real, Result};

impl Collective for CpuBackend {
    type Group = ();

    fn connect(_members: &[Self]) -> Result<()> {
        Ok(())
    }
}

impl<T: Real> Member<T> for CpuBackend {
    fn all_gather(
        _group: &(),
        _members: &[Self],
        send: &[&Vec<T>],
        recv: &mut [Vec<T>],
    ) -> Result<()> {
        let len = send.first().map_or(0, |s| s.len());
        if send.iter().any(|s| s.len() != len) || send.len() != recv.len() {
            return Err(Error::shape(
                "all_gather",
                "every member sends one buffer of one length",
            ));
        }
        for r in recv.iter_mut() {
            if r.len() != len * send.len() {
                return Err(Error::shape(
                    "all_gather",
                    format!(
                        "a receive holds {} values, not {}",
                        r.len(),
                        len * send.len()
                    ),
                ));
            }
            for (k, s) in send.iter().enumerate() {
                r[k * len..(k + 1) * len].copy_from_slice(s);
            }
        }
        Ok(())
    }

    fn copy_block(
        &self,
        src: &Vec<T>,
        from: Strided,
        dst: &mut Vec<T>,
        to: Strided,
        rows: usize,
        width: usize,
    ) -> Result<()> {
        check_block("src", src.len(), from, rows, width)?;
        check_block("dst", dst.len(), to, rows, width)?;
        for r in 0..rows {
            let (a, b) = (from.offset + r * from.pitch, to.offset + r * to.pitch);
            dst[b..b + width].copy_from_slice(&src[a..a + width]);
        }
        Ok(())
    }

    fn shard_softmin(&self, parts: &Vec<T>, shards: usize, eps: T, out: &mut Vec<T>) -> Result<()> {
        let len = out.len();
        check_shards(parts.len(), shards, len)?;
        for (i, o) in out.iter_mut().enumerate() {
            *o = softmin((0..shards).map(|k| parts[k * len + i]), eps);
        }
        Ok(())
    }

    fn shard_sum(&self, parts: &Vec<T>, shards: usize, out: &mut Vec<T>) -> Result<()> {
        let len = out.len();
        check_shards(parts.len(), shards, len)?;
        for (i, o) in out.iter_mut().enumerate() {
            *o = (0..shards).fold(T::zero(), |s, k| s + parts[k * len + i]);
        }
        Ok(())
    }
}

/// `−ε·log Σ_k exp(−p_k/ε)`, from the smallest part: `+∞` parts add nothing, `−∞` wins.
pub(super) fn softmin<T: Real>(parts: impl Iterator<Item = T> + Clone, eps: T) -> T {
    let lo = parts.clone().fold(T::infinity(), |a, p| a.min(p));
    if !lo.is_finite() {
        return lo;
    }
    let sum = parts.fold(T::zero(), |s, p| s + ((lo - p) / eps).exp());
    lo - eps * sum.ln()
}

#[cfg(test)]
mod tests {
    use super::softmin;

    #[test]
    fn softmin_matches_the_direct_formula() {
        let eps = 0.3f64;
        let parts = [1.0f64, 1.7, -0.4];
        let direct = -eps * parts.iter().map(|p| (-p / eps).exp()).sum::<f64>().ln();
        assert!((softmin(parts.iter().copied(), eps) - direct).abs() < 1e-14);
        // A shard without mass (+∞) adds nothing; a zero-mass bin (all −∞) stays −∞.
        let with_empty = [1.0f64, f64::INFINITY, -0.4];
        let without = -eps
            * [1.0f64, -0.4]
                .iter()
                .map(|p| (-p / eps).exp())
                .sum::<f64>()
                .ln();
        assert!((softmin(with_empty.iter().copied(), eps) - without).abs() < 1e-14);
        assert_eq!(
            softmin([f64::NEG_INFINITY; 2].iter().copied(), eps),
            f64::NEG_INFINITY
        );
        assert_eq!(
            softmin([f64::INFINITY; 2].iter().copied(), eps),
            f64::INFINITY
        );
    }
}
