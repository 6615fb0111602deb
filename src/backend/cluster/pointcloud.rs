//! Point gradients and plan products of a cluster split by target points: on
//! [`Side::Row`] each member sums its plan's columns, and the partial sums add up
//! ([`Member::shard_sum`] after an all-gather); on [`Side::Col`] each member's target points
//! are its own, and the shares are joined. Batched clouds (one pair per problem) are split
//! by problems: each member runs the kernels on its problems and the outputs are joined in
//! problem order.

use super::split::{even_ranges, Split};
use super::{Cluster, ClusterCost, Locals, Member, Replicated, Strided};
use crate::backend::{Backend, PointCloudKernels, Side};
use crate::{Error, Real, Result};
use std::ops::Range;

impl<B: super::Collective> Cluster<B> {
    /// `(batch, column ranges)` of a point-cloud cost split by target points.
    fn cloud_columns<'c, T: Real, C>(
        &self,
        cost: &'c ClusterCost<C>,
        f_len: usize,
        g_len: usize,
    ) -> Result<(usize, &'c [Range<usize>])>
    where
        B: Member<T>,
    {
        let batch = crate::backend::shape::check_fg(&cost.dims, f_len, g_len)?;
        match &cost.split {
            Split::Columns(ranges) => Ok((batch, ranges)),
            Split::Problems => Err(Error::Unavailable(
                "point-cloud kernels: the cost is not a point cloud".into(),
            )),
        }
    }

    /// Each member's output over its columns, joined: on [`Side::Row`] (`B×n×w` partial
    /// sums) added up, on [`Side::Col`] (`B×m_k×w`) placed at the member's columns.
    fn join_cloud<T: Real>(
        &self,
        side: Side,
        batch: usize,
        m: usize,
        ranges: &[Range<usize>],
        outs: Locals<B::Buffer>,
    ) -> Result<Replicated<B::Buffer>>
    where
        B: Member<T>,
    {
        let p = self.size();
        let (k0, first) = outs
            .iter()
            .enumerate()
            .find_map(|(k, o)| o.as_ref().map(|o| (k, o)))
            .ok_or_else(|| Error::shape("cluster", "no member holds target points"))?;
        let len0 = self.members[k0].len(first);
        match side {
            Side::Row => {
                let len = len0;
                let zeros: Locals<B::Buffer> = self.each(|(k, be)| match &outs[k] {
                    Some(_) => Ok(None),
                    None => be.filled(len, T::zero()).map(Some),
                })?;
                let send: Vec<&B::Buffer> = (0..p)
                    .map(|k| outs[k].as_ref().or(zeros[k].as_ref()).expect("share"))
                    .collect();
                let mut recv = self.each(|(_, be)| be.filled(p * len, T::zero()))?;
                B::all_gather(&self.group, &self.members, &send, &mut recv)?;
                let mut out = self.filled_any::<T>(len)?;
                for (k, be) in self.members.iter().enumerate() {
                    be.shard_sum(&recv[k], p, &mut out.copies[k])?;
                }
                Ok(out)
            }
            Side::Col => {
                let w = len0 / (batch * ranges[k0].len()).max(1);
                let scaled: Vec<Range<usize>> =
                    ranges.iter().map(|r| r.start * w..r.end * w).collect();
                let mut out = self.filled_any::<T>(batch * m * w)?;
                self.join(&outs, &scaled, batch, m * w, &mut out)?;
                Ok(out)
            }
        }
    }

    /// Batched clouds split by problems: `share(k, member's cost, its problems' f, g)` on
    /// every member holding problems, each output (a whole number of values per problem)
    /// joined in problem order on every member.
    #[allow(clippy::type_complexity)]
    fn on_problems<T: Real, const N: usize>(
        &self,
        cost: &ClusterCost<B::Cost>,
        f: &Replicated<B::Buffer>,
        g: &Replicated<B::Buffer>,
        share: &dyn Fn(
            usize,
            &Range<usize>,
            &B::Cost,
            &B::Buffer,
            &B::Buffer,
        ) -> Result<[B::Buffer; N]>,
    ) -> Result<[Replicated<B::Buffer>; N]>
    where
        B: Member<T>,
    {
        let (n, m) = (cost.dims.n, cost.dims.m);
        let batch = crate::backend::shape::check_fg(&cost.dims, self.len(f), self.len(g))?;
        let ranges = even_ranges(batch, self.size());
        let mut outs: [Locals<B::Buffer>; N] = std::array::from_fn(|_| vec![]);
        // Values per problem of each output (from any member's share).
        let mut per = [0usize; N];
        for (k, part) in cost.parts.iter().enumerate() {
            let r = &ranges[k];
            let got = match part.as_ref().filter(|_| !r.is_empty()) {
                Some(part) => {
                    let (fk, gk) = (self.problems(k, f, n, r)?, self.problems(k, g, m, r)?);
                    let got = share(k, r, part, &fk, &gk)?;
                    for (w, o) in per.iter_mut().zip(&got) {
                        *w = self.members[k].len(o) / r.len();
                    }
                    got.map(Some)
                }
                None => std::array::from_fn(|_| None),
            };
            for (o, x) in outs.iter_mut().zip(got) {
                o.push(x);
            }
        }
        let mut joined = Vec::with_capacity(N);
        for (o, w) in outs.into_iter().zip(per) {
            let scaled: Vec<Range<usize>> = ranges.iter().map(|r| r.start * w..r.end * w).collect();
            let mut out = self.filled_any::<T>(batch * w)?;
            self.join(&o, &scaled, 1, batch * w, &mut out)?;
            joined.push(out);
        }
        joined
            .try_into()
            .map_err(|_| Error::shape("cluster", "one output per kernel result"))
    }

    fn filled_any<T: Real>(&self, len: usize) -> Result<Replicated<B::Buffer>>
    where
        B: Member<T>,
    {
        let copies = self.each(|(_, be)| be.filled(len, T::zero()))?;
        Ok(Replicated { copies })
    }

    /// Run `share(k, member's cost, member's g)` on every member `k` with target points;
    /// each of its outputs is joined ([`Self::join_cloud`]).
    #[allow(clippy::type_complexity)]
    fn on_columns<T: Real, const N: usize>(
        &self,
        cost: &ClusterCost<B::Cost>,
        side: Side,
        f: &Replicated<B::Buffer>,
        g: &Replicated<B::Buffer>,
        share: &dyn Fn(usize, &B::Cost, &B::Buffer) -> Result<[B::Buffer; N]>,
    ) -> Result<[Replicated<B::Buffer>; N]>
    where
        B: Member<T>,
    {
        let (batch, ranges) = self.cloud_columns::<T, _>(cost, self.len(f), self.len(g))?;
        let m = cost.dims.m;
        let mut outs: [Locals<B::Buffer>; N] = std::array::from_fn(|_| vec![]);
        for (k, part) in cost.parts.iter().enumerate() {
            let got = match part {
                Some(part) => {
                    let gk = self.columns(k, g, batch, m, &ranges[k])?;
                    share(k, part, &gk)?.map(Some)
                }
                None => std::array::from_fn(|_| None),
            };
            for (o, x) in outs.iter_mut().zip(got) {
                o.push(x);
            }
        }
        let mut joined = Vec::with_capacity(N);
        for o in outs {
            joined.push(self.join_cloud::<T>(side, batch, cost.dims.m, ranges, o)?);
        }
        joined
            .try_into()
            .map_err(|_| Error::shape("cluster", "one output per kernel result"))
    }
}

impl<T: Real, B: Member<T> + PointCloudKernels<T>> PointCloudKernels<T> for Cluster<B> {
    fn point_gradient(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
    ) -> Result<(Self::Buffer, Self::Buffer)> {
        if cost.split == Split::Problems {
            let [mass, grad] = self.on_problems(cost, f, g, &|k, _, part, fk, gk| {
                let (mass, grad) = self.members[k].point_gradient(part, side, fk, gk, eps)?;
                Ok([mass, grad])
            })?;
            return Ok((mass, grad));
        }
        let [mass, grad] = self.on_columns(cost, side, f, g, &|k, part, gk| {
            let (mass, grad) = self.members[k].point_gradient(part, side, &f.copies[k], gk, eps)?;
            Ok([mass, grad])
        })?;
        Ok((mass, grad))
    }

    fn plan_apply(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
        values: &Self::Buffer,
        k: usize,
    ) -> Result<Self::Buffer> {
        if cost.split == Split::Problems {
            let len_red = match side {
                Side::Row => cost.dims.m,
                Side::Col => cost.dims.n,
            };
            let per = len_red * k;
            let shared = self.len(values) == per;
            let [out] = self.on_problems(cost, f, g, &|q, r, part, fq, gq| {
                let vq = if shared {
                    None
                } else {
                    Some(self.problems(q, values, per, r)?)
                };
                let vals = vq.as_ref().unwrap_or(&values.copies[q]);
                Ok([self.members[q].plan_apply(part, side, fq, gq, eps, vals, k)?])
            })?;
            return Ok(out);
        }
        let (batch, ranges) = self.cloud_columns::<T, _>(cost, self.len(f), self.len(g))?;
        let (n, m) = (cost.dims.n, cost.dims.m);
        let len = self.len(values);
        let per = match side {
            Side::Row => m * k,
            Side::Col => n * k,
        };
        let rows = match len {
            _ if len == per => 1,
            _ if len == batch * per => batch,
            _ => {
                return Err(Error::shape(
                    "values",
                    format!("has {len} values, not {per} or {batch}×{per}"),
                ))
            }
        };
        let [out] = self.on_columns(cost, side, f, g, &|q, part, gk| {
            let be = &self.members[q];
            let out = match side {
                // P·V reads the member's rows of V (its target points).
                Side::Row => {
                    let r = &ranges[q];
                    let at = Strided::new(r.start * k, per);
                    let vq = self.take(q, values, at, rows, r.len() * k)?;
                    be.plan_apply(part, side, &f.copies[q], gk, eps, &vq, k)?
                }
                Side::Col => {
                    be.plan_apply(part, side, &f.copies[q], gk, eps, &values.copies[q], k)?
                }
            };
            Ok([out])
        })?;
        Ok(out)
    }

    fn cost_marginals(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
    ) -> Result<(Self::Buffer, Self::Buffer)> {
        if cost.split == Split::Problems {
            let [mass, weighted] = self.on_problems(cost, f, g, &|k, _, part, fk, gk| {
                let (mass, c) = self.members[k].cost_marginals(part, side, fk, gk, eps)?;
                Ok([mass, c])
            })?;
            return Ok((mass, weighted));
        }
        let [mass, weighted] = self.on_columns(cost, side, f, g, &|k, part, gk| {
            let (mass, c) = self.members[k].cost_marginals(part, side, &f.copies[k], gk, eps)?;
            Ok([mass, c])
        })?;
        Ok((mass, weighted))
    }

    fn adjoint_point_gradient(
        &self,
        cost: &Self::Cost,
        side: Side,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
        a: &Self::Buffer,
        b: &Self::Buffer,
        alpha: T,
    ) -> Result<Self::Buffer> {
        if self.len(b) != self.len(g) || self.len(a) != self.len(f) {
            return Err(Error::shape(
                "adjoint",
                "a and b must have the lengths of f and g",
            ));
        }
        if cost.split == Split::Problems {
            let (n, m) = (cost.dims.n, cost.dims.m);
            let [out] = self.on_problems(cost, f, g, &|k, r, part, fk, gk| {
                let (ak, bk) = (self.problems(k, a, n, r)?, self.problems(k, b, m, r)?);
                Ok([self.members[k]
                    .adjoint_point_gradient(part, side, fk, gk, eps, &ak, &bk, alpha)?])
            })?;
            return Ok(out);
        }
        let (batch, ranges) = self.cloud_columns::<T, _>(cost, self.len(f), self.len(g))?;
        let m = cost.dims.m;
        let [out] =
            self.on_columns(cost, side, f, g, &|k, part, gk| {
                let bk = self.columns(k, b, batch, m, &ranges[k])?;
                let (fk, ak) = (&f.copies[k], &a.copies[k]);
                Ok([self.members[k]
                    .adjoint_point_gradient(part, side, fk, gk, eps, ak, &bk, alpha)?])
            })?;
        Ok(out)
    }
}
