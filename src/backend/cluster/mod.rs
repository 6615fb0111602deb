//! Several devices as one [`Backend`]: the problems or the target points are split over the
//! members, each member computes its share with its own kernels, and collectives over the
//! members (NCCL for CUDA) join the shares.
//!
//! Every [`Cluster`] buffer holds one full copy per member ([`Replicated`]), equal on all of
//! them after every call, so the algorithms ([`crate::SinkhornSolver`], the reports, the convergence
//! checks) run unchanged. The split depends on the cost:
//!
//! - **by columns** (a shared dense cost, point clouds): member `k` keeps the target points
//!   `J_k` (columns `J_k` of `C`, or `y[J_k]`) and its slice of `g`. The `g` half-step is
//!   local. The `f` half-step is local over `J_k` too, giving
//!   `f_k = ε·log μ − ε·LSE_{j∈J_k}((g_j − C_ij)/ε)`, and the full one is their soft minimum,
//!   `f = −ε·log Σ_k exp(−f_k/ε)`: one all-gather of `B×n` values per member and iteration
//!   (`O(n)` against `O(n·m/P)` work). `g` is gathered once at the end of
//!   [`Backend::iterate`].
//! - **by problems** (a batch of dense costs, grids): member `k` solves problems `B_k` with
//!   its own loop (fused or tiled, as on one device) and the potentials are gathered once at
//!   the end of [`Backend::iterate`].
//!
//! The results equal a single member's up to rounding: the column split changes the order of
//! the `f` half-step's sum (one soft minimum over `P` partial log-sum-exps), the problem
//! split nothing.

mod barycenter;
mod cpu;
mod grad;
mod ot;
mod pointcloud;
mod split;

use super::{Backend, CostDims, CostSource, Marginals, PlanReport, Potentials, Side};
use crate::backend::RelaxedSide;
use crate::{Error, Real, Result};
use split::{even_ranges, Split};
use std::ops::Range;

/// Where a block of `rows × width` elements sits in a buffer: element `(r, c)` is at
/// `offset + r·pitch + c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strided {
    /// Index of element `(0, 0)`.
    pub offset: usize,
    /// Distance between the starts of two rows.
    pub pitch: usize,
}

impl Strided {
    /// A block starting at `offset` with rows `pitch` apart.
    pub fn new(offset: usize, pitch: usize) -> Self {
        Strided { offset, pitch }
    }
}

/// A `rows × width` block at `at` lies inside a buffer of `len` values.
pub(crate) fn check_block(
    what: &str,
    len: usize,
    at: Strided,
    rows: usize,
    width: usize,
) -> Result<()> {
    let end = match rows {
        0 => Some(0),
        _ => (rows - 1)
            .checked_mul(at.pitch)
            .and_then(|e| e.checked_add(at.offset))
            .and_then(|e| e.checked_add(width)),
    };
    match end {
        Some(e) if e <= len && (rows <= 1 || width <= at.pitch) => Ok(()),
        _ => Err(Error::shape(
            what,
            format!(
                "a block of {rows}×{width} at offset {} and pitch {} does not fit in {len} values",
                at.offset, at.pitch
            ),
        )),
    }
}

/// `parts` stacks `shards` partial results of `len` values each ([`Member::shard_softmin`],
/// [`Member::shard_sum`]).
pub(crate) fn check_shards(parts: usize, shards: usize, len: usize) -> Result<()> {
    if parts != shards * len {
        return Err(Error::shape(
            "parts",
            format!("has {parts} values, not {shards}×{len}"),
        ));
    }
    Ok(())
}

/// What the members of a [`Cluster`] share: the communicator their collectives run over
/// (NCCL's for CUDA; nothing on the CPU, where the members share memory).
pub trait Collective: Sized {
    /// The members' communicator.
    type Group;
    /// Connect `members` (distinct devices, in rank order).
    fn connect(members: &[Self]) -> Result<Self::Group>;
}

/// What a backend provides to be a member of a [`Cluster`]: block copies, the soft minimum
/// that joins column shards, and an all-gather over every member at once.
pub trait Member<T: Real>: Backend<T> + Collective {
    /// `recv[k] = send[0] ‖ send[1] ‖ … ‖ send[P−1]` on every member `k`: the sends have one
    /// length `L`, each receive holds `P·L`. `send[k]` and `recv[k]` are member `k`'s.
    fn all_gather(
        group: &Self::Group,
        members: &[Self],
        send: &[&Self::Buffer],
        recv: &mut [Self::Buffer],
    ) -> Result<()>;

    /// `dst[to.offset + r·to.pitch + c] = src[from.offset + r·from.pitch + c]` for
    /// `r < rows`, `c < width`, on this member.
    fn copy_block(
        &self,
        src: &Self::Buffer,
        from: Strided,
        dst: &mut Self::Buffer,
        to: Strided,
        rows: usize,
        width: usize,
    ) -> Result<()>;

    /// The half-step over the union of `shards` column shards from each shard's own
    /// (stacked in `parts`, `shards × out.len()`):
    /// `out[i] = −ε·log Σ_k exp(−parts[k,i]/ε)`. A part `+∞` (a shard without mass) adds
    /// nothing; parts all `−∞` (a zero-mass bin) give `−∞`.
    fn shard_softmin(
        &self,
        parts: &Self::Buffer,
        shards: usize,
        eps: T,
        out: &mut Self::Buffer,
    ) -> Result<()>;

    /// The sum of `shards` stacked partial sums (`shards × out.len()`), in shard order:
    /// `out[i] = Σ_k parts[k,i]` (row sums of a plan split by columns).
    fn shard_sum(&self, parts: &Self::Buffer, shards: usize, out: &mut Self::Buffer) -> Result<()>;
}

/// Several devices of one host as one backend (see the [module](self) documentation).
/// `Cluster<CudaBackend>` runs over NCCL; `Cluster<CpuBackend>` shares host memory and is
/// what the tests check the splitting against.
pub struct Cluster<B: Collective> {
    members: Vec<B>,
    group: B::Group,
}

impl<B: Collective> std::fmt::Debug for Cluster<B>
where
    B: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("members", &self.members)
            .finish()
    }
}

impl<B: Collective> Cluster<B> {
    /// A cluster of `members` (rank order). Errors: no member, or the communicator could
    /// not be created (for CUDA: NCCL missing, or two members on one device).
    pub fn new(members: Vec<B>) -> Result<Self> {
        if members.is_empty() {
            return Err(Error::parameter(
                "members",
                0,
                "a cluster needs at least one member",
            ));
        }
        let group = B::connect(&members)?;
        Ok(Cluster { members, group })
    }

    /// The members, in rank order.
    pub fn members(&self) -> &[B] {
        &self.members
    }

    /// Number of members.
    pub fn size(&self) -> usize {
        self.members.len()
    }
}

/// A cluster buffer: one full copy on each member, equal after every [`Backend`] call.
pub struct Replicated<Buf> {
    copies: Vec<Buf>,
}

impl<Buf> Replicated<Buf> {
    /// The copies, one per member in rank order.
    pub fn copies(&self) -> &[Buf] {
        &self.copies
    }
}

impl<Buf> std::fmt::Debug for Replicated<Buf> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Replicated({} copies)", self.copies.len())
    }
}

/// A cost split over the members: each member's share, prepared by the member (`None` for a
/// member with an empty share).
pub struct ClusterCost<C> {
    parts: Vec<Option<C>>,
    dims: CostDims,
    split: Split,
}

impl<C> std::fmt::Debug for ClusterCost<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterCost({:?}, {:?})", self.dims, self.split)
    }
}

/// Member-local buffers of one call.
type Locals<Buf> = Vec<Option<Buf>>;

/// The buffers of the `f` join ([`Cluster::row_join_buffers`]).
struct RowJoin<Buf> {
    parts: Vec<Buf>,
    recv: Vec<Buf>,
}

impl<B: Collective> Cluster<B> {
    fn each<R>(&self, f: impl FnMut((usize, &B)) -> Result<R>) -> Result<Vec<R>> {
        self.members.iter().enumerate().map(f).collect()
    }
}

impl<B: Collective> Cluster<B> {
    /// Member `k`'s block `rows × width` of `buf` at `from`, as a new contiguous buffer.
    fn take<T: Real>(
        &self,
        k: usize,
        buf: &Replicated<B::Buffer>,
        from: Strided,
        rows: usize,
        width: usize,
    ) -> Result<B::Buffer>
    where
        B: Member<T>,
    {
        let be = &self.members[k];
        let mut out = be.filled(rows * width, T::zero())?;
        be.copy_block(
            &buf.copies[k],
            from,
            &mut out,
            Strided::new(0, width),
            rows,
            width,
        )?;
        Ok(out)
    }

    /// Columns `r` of a `batch × width` buffer on member `k`.
    fn columns<T: Real>(
        &self,
        k: usize,
        buf: &Replicated<B::Buffer>,
        batch: usize,
        width: usize,
        r: &Range<usize>,
    ) -> Result<B::Buffer>
    where
        B: Member<T>,
    {
        self.take(k, buf, Strided::new(r.start, width), batch, r.len())
    }

    /// Problems `r` of a buffer of `per` values a problem, on member `k`.
    fn problems<T: Real>(
        &self,
        k: usize,
        buf: &Replicated<B::Buffer>,
        per: usize,
        r: &Range<usize>,
    ) -> Result<B::Buffer>
    where
        B: Member<T>,
    {
        self.take(k, buf, Strided::new(r.start * per, per), r.len(), per)
    }

    /// Every member's block joined into `out` on every member: member `s` holds
    /// `locals[s]`, `rows × ranges[s].len()` contiguous, which goes to columns
    /// `ranges[s]` of each `rows × width` copy of `out`. With `rows = 1` and `width` the
    /// total this places consecutive ranges, so it also joins problem shards.
    fn join<T: Real>(
        &self,
        locals: &Locals<B::Buffer>,
        ranges: &[Range<usize>],
        rows: usize,
        width: usize,
        out: &mut Replicated<B::Buffer>,
    ) -> Result<()>
    where
        B: Member<T>,
    {
        let p = self.size();
        let chunk = ranges.iter().map(|r| r.len()).max().unwrap_or(0);
        if chunk == 0 {
            return Ok(());
        }
        // Equal sends: a share narrower than the widest is padded.
        let padded: Locals<B::Buffer> = self.each(|(k, be)| {
            let w = ranges[k].len();
            match &locals[k] {
                Some(_) if w == chunk => Ok(None),
                local => {
                    let mut pad = be.filled(rows * chunk, T::zero())?;
                    if let Some(l) = local {
                        be.copy_block(
                            l,
                            Strided::new(0, w),
                            &mut pad,
                            Strided::new(0, chunk),
                            rows,
                            w,
                        )?;
                    }
                    Ok(Some(pad))
                }
            }
        })?;
        let send: Vec<&B::Buffer> = (0..p)
            .map(|k| padded[k].as_ref().or(locals[k].as_ref()).expect("padded"))
            .collect();
        let mut recv = self.each(|(_, be)| be.filled(p * rows * chunk, T::zero()))?;
        B::all_gather(&self.group, &self.members, &send, &mut recv)?;
        for (k, be) in self.members.iter().enumerate() {
            for (s, r) in ranges.iter().enumerate() {
                if !r.is_empty() {
                    be.copy_block(
                        &recv[k],
                        Strided::new(s * rows * chunk, chunk),
                        &mut out.copies[k],
                        Strided::new(r.start, width),
                        rows,
                        r.len(),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// The buffers of the `f` join, allocated once per call: each member's partial
    /// half-step (`len` values; `+∞`, which adds nothing, for a member without target
    /// points, which never writes it) and each member's all-gather receive (`P·len`).
    fn row_join_buffers<T: Real>(
        &self,
        cost: &ClusterCost<B::Cost>,
        len: usize,
    ) -> Result<RowJoin<B::Buffer>>
    where
        B: Member<T>,
    {
        let p = self.size();
        let parts = self.each(|(k, be)| match cost.parts[k] {
            Some(_) => be.filled(len, T::zero()),
            None => be.filled(len, T::infinity()),
        })?;
        let recv = self.each(|(_, be)| be.filled(p * len, T::zero()))?;
        Ok(RowJoin { parts, recv })
    }

    /// `out = f` half-step from every member's partial one over its columns
    /// (`join.parts[k]`, `B×n`): an all-gather, then the soft minimum on every member.
    fn join_row_parts<T: Real>(
        &self,
        join: &mut RowJoin<B::Buffer>,
        eps: T,
        out: &mut Replicated<B::Buffer>,
    ) -> Result<()>
    where
        B: Member<T>,
    {
        let p = self.size();
        let send: Vec<&B::Buffer> = join.parts.iter().collect();
        B::all_gather(&self.group, &self.members, &send, &mut join.recv)?;
        for (k, be) in self.members.iter().enumerate() {
            be.shard_softmin(&join.recv[k], p, eps, &mut out.copies[k])?;
        }
        Ok(())
    }

    /// The iterations of [`Backend::iterate`] and [`Backend::iterate_relaxed`] (`φ = 1`:
    /// balanced).
    fn iterate_split<T: Real>(
        &self,
        cost: &ClusterCost<B::Cost>,
        eps: T,
        (phi_mu, phi_nu): (T, T),
        marginals: &Marginals<'_, Replicated<B::Buffer>>,
        potentials: &mut Potentials<Replicated<B::Buffer>>,
        iters: usize,
    ) -> Result<()>
    where
        B: Member<T>,
    {
        let dims = cost.dims;
        let (n, m) = (dims.n, dims.m);
        let batch = super::batch_of(self.len(&potentials.f), dims.n, "f")?;
        super::shape::check_fg(&dims, self.len(&potentials.f), self.len(&potentials.g))?;
        if iters == 0 {
            return Ok(());
        }
        let balanced = phi_mu == T::one() && phi_nu == T::one();
        match &cost.split {
            Split::Columns(ranges) => {
                let log_nu =
                    self.each(|(k, _)| self.columns(k, marginals.log_nu, batch, m, &ranges[k]))?;
                let mut g: Locals<B::Buffer> = self.each(|(k, _)| match ranges[k].is_empty() {
                    true => Ok(None),
                    false => self
                        .columns(k, &potentials.g, batch, m, &ranges[k])
                        .map(Some),
                })?;
                let mut join = self.row_join_buffers::<T>(cost, batch * n)?;
                for _ in 0..iters {
                    for (k, be) in self.members.iter().enumerate() {
                        let (Some(part), Some(gk)) = (&cost.parts[k], g[k].as_mut()) else {
                            continue;
                        };
                        let out = &mut join.parts[k];
                        let f = &potentials.f.copies[k];
                        be.sinkstep(part, Side::Col, eps, f, &log_nu[k], gk)?;
                        if phi_nu != T::one() {
                            be.relax(gk, &log_nu[k], eps, phi_nu)?;
                        }
                        be.sinkstep(part, Side::Row, eps, gk, &marginals.log_mu.copies[k], out)?;
                    }
                    self.join_row_parts(&mut join, eps, &mut potentials.f)?;
                    if phi_mu != T::one() {
                        self.relax(&mut potentials.f, marginals.log_mu, eps, phi_mu)?;
                    }
                }
                self.join(&g, ranges, batch, m, &mut potentials.g)
            }
            Split::Problems => {
                let ranges = even_ranges(batch, self.size());
                let slice = |k: usize, buf: &Replicated<B::Buffer>, per: usize| {
                    self.problems(k, buf, per, &ranges[k])
                };
                let mut f: Locals<B::Buffer> = vec![];
                let mut g: Locals<B::Buffer> = vec![];
                for (k, be) in self.members.iter().enumerate() {
                    let Some(part) = cost.parts[k].as_ref().filter(|_| !ranges[k].is_empty())
                    else {
                        f.push(None);
                        g.push(None);
                        continue;
                    };
                    let (mu, nu) = (slice(k, marginals.mu, n)?, slice(k, marginals.nu, m)?);
                    let log_mu = slice(k, marginals.log_mu, n)?;
                    let log_nu = slice(k, marginals.log_nu, m)?;
                    let local = Marginals {
                        mu: &mu,
                        nu: &nu,
                        log_mu: &log_mu,
                        log_nu: &log_nu,
                    };
                    let mut pot = Potentials {
                        f: slice(k, &potentials.f, n)?,
                        g: slice(k, &potentials.g, m)?,
                    };
                    if balanced {
                        be.iterate(part, eps, &local, &mut pot, iters)?;
                    } else {
                        be.iterate_relaxed(part, eps, (phi_mu, phi_nu), &local, &mut pot, iters)?;
                    }
                    f.push(Some(pot.f));
                    g.push(Some(pot.g));
                }
                let scaled = |per: usize| -> Vec<Range<usize>> {
                    ranges.iter().map(|r| r.start * per..r.end * per).collect()
                };
                self.join(&f, &scaled(n), 1, batch * n, &mut potentials.f)?;
                self.join(&g, &scaled(m), 1, batch * m, &mut potentials.g)
            }
        }
    }
}
