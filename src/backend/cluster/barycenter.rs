//! The barycenter kernels on a cluster: the loop's half-steps are the cluster's own (split
//! by target points for a dense cost, by problems for a grid), and the log means, the
//! projection and the spread, element-wise over the barycenter's bins, run on every
//! member's copy, so the copies stay equal with no communication.

use super::{Cluster, Member, Replicated};
use crate::backend::{BaryLayout, BarycenterKernels};
use crate::{Real, Result};

impl<T: Real, B: Member<T> + BarycenterKernels<T>> BarycenterKernels<T> for Cluster<B> {
    fn bary_log_mean(
        &self,
        layout: BaryLayout,
        weights: &Self::Buffer,
        v: &Self::Buffer,
        bar: &mut Self::Buffer,
    ) -> Result<()> {
        self.each_copy(bar, |k, be, bar| {
            be.bary_log_mean(layout, &weights.copies[k], &v.copies[k], bar)
        })
    }

    fn bary_log_power_mean(
        &self,
        layout: BaryLayout,
        weights: &Self::Buffer,
        v: &Self::Buffer,
        bar: &mut Self::Buffer,
        t: T,
    ) -> Result<()> {
        self.each_copy(bar, |k, be, bar| {
            be.bary_log_power_mean(layout, &weights.copies[k], &v.copies[k], bar, t)
        })
    }

    fn bary_potential(
        &self,
        layout: BaryLayout,
        bar: &Self::Buffer,
        v: &Self::Buffer,
        g: &mut Self::Buffer,
    ) -> Result<()> {
        self.each_copy(g, |k, be, g| {
            be.bary_potential(layout, &bar.copies[k], &v.copies[k], g)
        })
    }

    /// Member 0's copies: the `P` numbers are the same on every member.
    fn bary_spread(
        &self,
        layout: BaryLayout,
        g: &Self::Buffer,
        v: &Self::Buffer,
        eps: T,
    ) -> Result<Vec<T>> {
        self.members[0].bary_spread(layout, &g.copies[0], &v.copies[0], eps)
    }
}

impl<B: super::Collective> Cluster<B> {
    /// `op(k, member k, its copy of out)` on every member.
    pub(super) fn each_copy<T: Real>(
        &self,
        out: &mut Replicated<B::Buffer>,
        op: impl Fn(usize, &B, &mut B::Buffer) -> Result<()>,
    ) -> Result<()>
    where
        B: Member<T>,
    {
        for (k, (be, copy)) in self.members.iter().zip(&mut out.copies).enumerate() {
            op(k, be, copy)?;
        }
        Ok(())
    }
}
