//! The implicit-gradient kernels on a cluster: every member applies them to its own copy,
//! so the copies stay equal with no communication. They are element-wise, or products with
//! a dense plan that [`crate::Backend::plan`] already gathered on every member: linear in
//! the plan's size, against the solve's many passes over the cost (point clouds split
//! their plan products by target points in [`crate::PointCloudKernels`] instead).

use super::{Cluster, Member, Replicated};
use crate::backend::grad::GradKernels;
use crate::{Real, Result};

impl<B: super::Collective> Cluster<B> {
    /// `op(member k, its copies)` on every member, each returning its copy of the result.
    fn on_copies<T: Real>(
        &self,
        op: impl Fn(usize, &B) -> Result<B::Buffer>,
    ) -> Result<Replicated<B::Buffer>>
    where
        B: Member<T>,
    {
        Ok(Replicated {
            copies: self.each(|(k, be)| op(k, be))?,
        })
    }
}

impl<T: Real, B: Member<T> + GradKernels<T>> GradKernels<T> for Cluster<B> {
    fn plan_matvec(
        &self,
        plan: &Self::Buffer,
        n: usize,
        m: usize,
        x: &Self::Buffer,
        y: &mut Self::Buffer,
    ) -> Result<()> {
        self.each_copy(y, |k, be, y| {
            be.plan_matvec(&plan.copies[k], n, m, &x.copies[k], y)
        })
    }

    fn plan_matvec_t(
        &self,
        plan: &Self::Buffer,
        n: usize,
        m: usize,
        x: &Self::Buffer,
        y: &mut Self::Buffer,
    ) -> Result<()> {
        self.each_copy(y, |k, be, y| {
            be.plan_matvec_t(&plan.copies[k], n, m, &x.copies[k], y)
        })
    }

    fn weighted_marginals(
        &self,
        plan: &Self::Buffer,
        n: usize,
        m: usize,
        weight: Option<&Self::Buffer>,
    ) -> Result<(Self::Buffer, Self::Buffer)> {
        let (mut rows, mut cols) = (vec![], vec![]);
        for (k, be) in self.members.iter().enumerate() {
            let w = weight.map(|w| &w.copies[k]);
            let (r, c) = be.weighted_marginals(&plan.copies[k], n, m, w)?;
            rows.push(r);
            cols.push(c);
        }
        Ok((Replicated { copies: rows }, Replicated { copies: cols }))
    }

    fn assemble_gradient(
        &self,
        plan: &Self::Buffer,
        n: usize,
        m: usize,
        weight: &Self::Buffer,
        a: &Self::Buffer,
        c: &Self::Buffer,
        alpha: T,
        beta: T,
    ) -> Result<Self::Buffer> {
        self.on_copies(|k, be| {
            let [p, w, a, c] = [plan, weight, a, c].map(|b| &b.copies[k]);
            be.assemble_gradient(p, n, m, w, a, c, alpha, beta)
        })
    }

    /// Member 0's copies: the `B` numbers are the same on every member.
    fn batched_dot(&self, batch: usize, x: &Self::Buffer, y: &Self::Buffer) -> Result<Vec<f64>> {
        self.members[0].batched_dot(batch, &x.copies[0], &y.copies[0])
    }

    fn batched_axpy(&self, alpha: &[f64], x: &Self::Buffer, y: &mut Self::Buffer) -> Result<()> {
        self.each_copy(y, |k, be, y| be.batched_axpy(alpha, &x.copies[k], y))
    }

    fn batched_xpby(&self, x: &Self::Buffer, beta: &[f64], y: &mut Self::Buffer) -> Result<()> {
        self.each_copy(y, |k, be, y| be.batched_xpby(&x.copies[k], beta, y))
    }

    fn hadamard(
        &self,
        a: &Self::Buffer,
        x: &Self::Buffer,
        beta: T,
        y: &mut Self::Buffer,
    ) -> Result<()> {
        self.each_copy(y, |k, be, y| {
            be.hadamard(&a.copies[k], &x.copies[k], beta, y)
        })
    }

    fn recip_or_zero(&self, x: &Self::Buffer) -> Result<Self::Buffer> {
        self.on_copies(|k, be| be.recip_or_zero(&x.copies[k]))
    }

    fn support(&self, x: &Self::Buffer) -> Result<Self::Buffer> {
        self.on_copies(|k, be| be.support(&x.copies[k]))
    }
}
