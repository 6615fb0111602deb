//! The [`Backend`] impl of a cluster: each call on every member's copy, the half-steps
//! split by columns or by problems as the parent module's docs say, and the reports joined.

use super::*;

impl<T: Real, B: Member<T>> Backend<T> for Cluster<B> {
    type Buffer = Replicated<B::Buffer>;
    type Cost = ClusterCost<B::Cost>;

    fn name(&self) -> &'static str {
        "cluster"
    }

    fn upload(&self, data: &[T]) -> Result<Self::Buffer> {
        let copies = self.each(|(_, be)| be.upload(data))?;
        Ok(Replicated { copies })
    }

    fn download(&self, buf: &Self::Buffer) -> Result<Vec<T>> {
        self.members[0].download(&buf.copies[0])
    }

    fn filled(&self, len: usize, value: T) -> Result<Self::Buffer> {
        let copies = self.each(|(_, be)| be.filled(len, value))?;
        Ok(Replicated { copies })
    }

    fn len(&self, buf: &Self::Buffer) -> usize {
        self.members[0].len(&buf.copies[0])
    }

    /// Point clouds and a shared dense cost split by target points, a batch of dense costs
    /// and grids by problems.
    fn prepare_cost(&self, cost: &CostSource<'_, T>) -> Result<Self::Cost> {
        split::prepare(&self.members, cost)
    }

    fn cost_dims(&self, cost: &Self::Cost) -> CostDims {
        cost.dims
    }

    fn sinkstep(
        &self,
        cost: &Self::Cost,
        side: Side,
        eps: T,
        other: &Self::Buffer,
        log_marginal: &Self::Buffer,
        out: &mut Self::Buffer,
    ) -> Result<()> {
        let dims = cost.dims;
        let (len, len_other) = match side {
            Side::Row => (dims.n, dims.m),
            Side::Col => (dims.m, dims.n),
        };
        crate::backend::shape::check_sinkstep(
            &dims,
            side,
            self.len(other),
            self.len(log_marginal),
            self.len(out),
        )?;
        let batch = crate::backend::batch_of(self.len(out), dims.len(side), "out")?;
        match (&cost.split, side) {
            (Split::Columns(ranges), Side::Col) => {
                let mut g: Locals<B::Buffer> = vec![];
                for (k, be) in self.members.iter().enumerate() {
                    let Some(part) = &cost.parts[k] else {
                        g.push(None);
                        continue;
                    };
                    let lm = self.columns(k, log_marginal, batch, len, &ranges[k])?;
                    let mut gk = be.filled(batch * ranges[k].len(), T::zero())?;
                    be.sinkstep(part, side, eps, &other.copies[k], &lm, &mut gk)?;
                    g.push(Some(gk));
                }
                self.join(&g, ranges, batch, len, out)
            }
            (Split::Columns(ranges), Side::Row) => {
                let mut join = self.row_join_buffers::<T>(cost, batch * len)?;
                for (k, be) in self.members.iter().enumerate() {
                    let Some(part) = &cost.parts[k] else { continue };
                    let gk = self.columns(k, other, batch, len_other, &ranges[k])?;
                    let lm = &log_marginal.copies[k];
                    be.sinkstep(part, side, eps, &gk, lm, &mut join.parts[k])?;
                }
                self.join_row_parts(&mut join, eps, out)
            }
            (Split::Problems, _) => {
                let ranges = even_ranges(batch, self.size());
                let mut outs: Locals<B::Buffer> = vec![];
                for (k, be) in self.members.iter().enumerate() {
                    let r = &ranges[k];
                    let Some(part) = cost.parts[k].as_ref().filter(|_| !r.is_empty()) else {
                        outs.push(None);
                        continue;
                    };
                    let o = self.problems(k, other, len_other, r)?;
                    let lm = self.problems(k, log_marginal, len, r)?;
                    let mut local = be.filled(r.len() * len, T::zero())?;
                    be.sinkstep(part, side, eps, &o, &lm, &mut local)?;
                    outs.push(Some(local));
                }
                let scaled: Vec<_> = ranges.iter().map(|r| r.start * len..r.end * len).collect();
                self.join(&outs, &scaled, 1, batch * len, out)
            }
        }
    }

    /// Column split: the `g` half-step and the `f` soft minimum each iteration, `g` gathered
    /// at the end. Problem split: each member's own loop (fused where it fuses), both
    /// potentials gathered at the end.
    fn iterate(
        &self,
        cost: &Self::Cost,
        eps: T,
        marginals: &Marginals<'_, Self::Buffer>,
        potentials: &mut Potentials<Self::Buffer>,
        iters: usize,
    ) -> Result<()> {
        self.iterate_split(
            cost,
            eps,
            (T::one(), T::one()),
            marginals,
            potentials,
            iters,
        )
    }

    fn iterate_relaxed(
        &self,
        cost: &Self::Cost,
        eps: T,
        phi: (T, T),
        marginals: &Marginals<'_, Self::Buffer>,
        potentials: &mut Potentials<Self::Buffer>,
        iters: usize,
    ) -> Result<()> {
        self.iterate_split(cost, eps, phi, marginals, potentials, iters)
    }

    fn relax(
        &self,
        out: &mut Self::Buffer,
        log_marginal: &Self::Buffer,
        eps: T,
        phi: T,
    ) -> Result<()> {
        for (k, be) in self.members.iter().enumerate() {
            be.relax(&mut out.copies[k], &log_marginal.copies[k], eps, phi)?;
        }
        Ok(())
    }

    fn marginal_error(
        &self,
        batch: usize,
        marginal: &Self::Buffer,
        old: &Self::Buffer,
        new: &Self::Buffer,
        eps: T,
    ) -> Result<Vec<T>> {
        let [a, o, n] = [marginal, old, new].map(|b| &b.copies[0]);
        self.members[0].marginal_error(batch, a, o, n, eps)
    }

    fn relaxed_sides(
        &self,
        batch: usize,
        a: &Self::Buffer,
        pot: &Self::Buffer,
        half: &Self::Buffer,
        eps: T,
        rho: f64,
    ) -> Result<Vec<RelaxedSide>> {
        let [a, p, h] = [a, pot, half].map(|b| &b.copies[0]);
        self.members[0].relaxed_sides(batch, a, p, h, eps, rho)
    }

    /// Column split: each member reports its columns (column errors, costs and masses add
    /// up), the row errors come from the joined `f` half-step. Problem split: each member
    /// reports its problems.
    fn plan_report(
        &self,
        cost: &Self::Cost,
        potentials: &Potentials<Self::Buffer>,
        marginals: &Marginals<'_, Self::Buffer>,
        eps: T,
    ) -> Result<Vec<PlanReport>> {
        let dims = cost.dims;
        let (n, m) = (dims.n, dims.m);
        let (f, g) = (&potentials.f, &potentials.g);
        crate::backend::shape::check_fg(&dims, self.len(f), self.len(g))?;
        let batch = crate::backend::batch_of(self.len(f), dims.n, "f")?;
        match &cost.split {
            Split::Columns(ranges) => {
                let mut f_next = self.filled(batch * n, T::zero())?;
                self.sinkstep(cost, Side::Row, eps, g, marginals.log_mu, &mut f_next)?;
                let rows = self.marginal_error(batch, marginals.mu, f, &f_next, eps)?;
                let mut total: Vec<PlanReport> = rows
                    .iter()
                    .map(|r| PlanReport {
                        row_error: r.f64(),
                        col_error: 0.0,
                        cost: 0.0,
                        mass: Some(0.0),
                    })
                    .collect();
                for (k, be) in self.members.iter().enumerate() {
                    let Some(part) = &cost.parts[k] else { continue };
                    let cols = |b: &Replicated<B::Buffer>| self.columns(k, b, batch, m, &ranges[k]);
                    let (gk, nu, log_nu) = (cols(g)?, cols(marginals.nu)?, cols(marginals.log_nu)?);
                    let pot = Potentials {
                        f: self.take(k, f, Strided::new(0, batch * n), 1, batch * n)?,
                        g: gk,
                    };
                    let local = Marginals {
                        mu: &marginals.mu.copies[k],
                        nu: &nu,
                        log_mu: &marginals.log_mu.copies[k],
                        log_nu: &log_nu,
                    };
                    for (t, r) in total
                        .iter_mut()
                        .zip(be.plan_report(part, &pot, &local, eps)?)
                    {
                        t.col_error += r.col_error;
                        t.cost += r.cost;
                        t.mass = t.mass.zip(r.mass).map(|(a, b)| a + b);
                    }
                }
                Ok(total)
            }
            Split::Problems => {
                let ranges = even_ranges(batch, self.size());
                let mut all = Vec::with_capacity(batch);
                for (k, be) in self.members.iter().enumerate() {
                    let r = &ranges[k];
                    let Some(part) = cost.parts[k].as_ref().filter(|_| !r.is_empty()) else {
                        continue;
                    };
                    let sl = |b: &Replicated<B::Buffer>, per| self.problems(k, b, per, r);
                    let pot = Potentials {
                        f: sl(f, n)?,
                        g: sl(g, m)?,
                    };
                    let (mu, nu) = (sl(marginals.mu, n)?, sl(marginals.nu, m)?);
                    let (log_mu, log_nu) = (sl(marginals.log_mu, n)?, sl(marginals.log_nu, m)?);
                    let local = Marginals {
                        mu: &mu,
                        nu: &nu,
                        log_mu: &log_mu,
                        log_nu: &log_nu,
                    };
                    all.extend(be.plan_report(part, &pot, &local, eps)?);
                }
                Ok(all)
            }
        }
    }

    fn transport_cost(
        &self,
        cost: &Self::Cost,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
    ) -> Result<Vec<T>> {
        let dims = cost.dims;
        let batch = crate::backend::shape::check_fg(&dims, self.len(f), self.len(g))?;
        match &cost.split {
            Split::Columns(ranges) => {
                let mut total = vec![0.0f64; batch];
                for (k, be) in self.members.iter().enumerate() {
                    let Some(part) = &cost.parts[k] else { continue };
                    let gk = self.columns(k, g, batch, dims.m, &ranges[k])?;
                    for (t, c) in
                        total
                            .iter_mut()
                            .zip(be.transport_cost(part, &f.copies[k], &gk, eps)?)
                    {
                        *t += c.f64();
                    }
                }
                Ok(total.into_iter().map(T::of).collect())
            }
            Split::Problems => {
                let ranges = even_ranges(batch, self.size());
                let mut all = Vec::with_capacity(batch);
                for (k, be) in self.members.iter().enumerate() {
                    let r = &ranges[k];
                    let Some(part) = cost.parts[k].as_ref().filter(|_| !r.is_empty()) else {
                        continue;
                    };
                    let (fk, gk) = (
                        self.problems(k, f, dims.n, r)?,
                        self.problems(k, g, dims.m, r)?,
                    );
                    all.extend(be.transport_cost(part, &fk, &gk, eps)?);
                }
                Ok(all)
            }
        }
    }

    /// The plans, assembled on the host from every member's share and uploaded to every
    /// member (`B×n×m` on each: a cluster is for costs too large to store, so this is for
    /// checking small problems).
    fn plan(
        &self,
        cost: &Self::Cost,
        f: &Self::Buffer,
        g: &Self::Buffer,
        eps: T,
    ) -> Result<Self::Buffer> {
        let dims = cost.dims;
        let (n, m) = (dims.n, dims.m);
        let batch = crate::backend::shape::check_fg(&dims, self.len(f), self.len(g))?;
        let mut host = crate::alloc::filled("plan", batch * n * m, T::zero())?;
        match &cost.split {
            Split::Columns(ranges) => {
                for (k, be) in self.members.iter().enumerate() {
                    let Some(part) = &cost.parts[k] else { continue };
                    let r = &ranges[k];
                    let gk = self.columns(k, g, batch, m, r)?;
                    let pk = be.download_owned(be.plan(part, &f.copies[k], &gk, eps)?)?;
                    // Rows of `r.len()` entries, `batch·n` of them.
                    for (row, chunk) in pk.chunks(r.len()).enumerate() {
                        host[row * m + r.start..row * m + r.end].copy_from_slice(chunk);
                    }
                }
            }
            Split::Problems => {
                let ranges = even_ranges(batch, self.size());
                for (k, be) in self.members.iter().enumerate() {
                    let r = &ranges[k];
                    let Some(part) = cost.parts[k].as_ref().filter(|_| !r.is_empty()) else {
                        continue;
                    };
                    let (fk, gk) = (self.problems(k, f, n, r)?, self.problems(k, g, m, r)?);
                    let pk = be.download_owned(be.plan(part, &fk, &gk, eps)?)?;
                    host[r.start * n * m..r.end * n * m].copy_from_slice(&pk);
                }
            }
        }
        self.upload(&host)
    }
}
