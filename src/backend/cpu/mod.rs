//! The CPU backend: buffers are `Vec<T>`, kernels run on rayon's thread pool with the
//! vectorised log-sum-exp of [`lse`].

mod barycenter;
mod bistochastic;
mod cross;
mod factored;
mod grad;
mod grid;
pub(crate) mod isa;
mod linalg;
pub mod lse;
pub(crate) mod matmul;
mod pointcloud;
mod report;
pub(crate) mod svd3;

use super::shape::{check_fg, check_marginal_error, check_sinkstep};
use super::{
    plan_report_from_half_steps, Backend, CostDims, CostSource, Marginals, PlanReport, Potentials,
    Side,
};
use crate::{Error, Real, Result};
use grid::CpuGrid;
use pointcloud::CpuPointCloud;
use rayon::prelude::*;
use std::sync::{Arc, Mutex};

/// Computes on the host CPU with rayon (all cores of rayon's global pool).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    /// The CPU backend.
    pub fn new() -> Self {
        CpuBackend
    }
}

/// A dense cost prepared for the CPU: the matrix, row-major, and its transpose, so that
/// both half-steps read contiguous rows. A symmetric square cost is stored once.
#[derive(Clone, Debug)]
pub struct CpuCost<T> {
    dims: CostDims,
    /// `C` as `[batch×]n×m`.
    c: Vec<T>,
    /// `Cᵀ` as `[batch×]m×n`; empty when `C` is symmetric.
    ct: Vec<T>,
    /// A separable grid cost (then `c` and `ct` are empty).
    grid: Option<Arc<CpuGrid>>,
    /// Point clouds whose cost is computed on the fly (then `c` and `ct` are empty).
    cloud: Option<Arc<CpuPointCloud<T>>>,
    /// The factors of a shared dense cost for batched half-steps ([`factored`]), per side
    /// and `ε`, built on first use.
    factors: Arc<FactorCache<T>>,
}

/// The factored forms of a cost built so far: the latest `ε` per side and its factors
/// (`None` where the cost is not factored at that `ε`), so an ε-scaling schedule builds
/// once per stage.
#[derive(Debug)]
struct FactorCache<T> {
    by_side: Mutex<[FactorSlot<T>; 2]>,
}

type FactorSlot<T> = Option<(T, Option<Arc<factored::Factors<T>>>)>;

impl<T> Default for FactorCache<T> {
    fn default() -> Self {
        FactorCache {
            by_side: Mutex::new([None, None]),
        }
    }
}

impl<T: Real> CpuCost<T> {
    /// Rows that a half-step on `side` reduces over: `C` for rows, `Cᵀ` for columns.
    fn rows(&self, side: Side) -> &[T] {
        match side {
            Side::Row => &self.c,
            Side::Col if self.ct.is_empty() => &self.c,
            Side::Col => &self.ct,
        }
    }

    /// Row `r` of problem `b` as seen from `side`.
    fn row(&self, side: Side, b: usize, r: usize) -> &[T] {
        let len = self.dims.len(other(side));
        let per = self.dims.n * self.dims.m;
        let base = if self.dims.batch.is_some() {
            b * per
        } else {
            0
        };
        &self.rows(side)[base + r * len..base + (r + 1) * len]
    }

    /// The factors of the shared dense cost on `side` for `eps`, built on first use; `None`
    /// for costs too large to factor, or not factored at this `ε` (see
    /// [`factored::Factors::new`]).
    fn factors(&self, side: Side, eps: T) -> Option<Arc<factored::Factors<T>>> {
        let dims = self.dims;
        if dims.batch.is_some() || dims.n * dims.m > factored::MAX_ENTRIES {
            return None;
        }
        // A symmetric cost (no stored transpose) has the same factors on both sides.
        let slot = match side {
            Side::Col if !self.ct.is_empty() => 1,
            _ => 0,
        };
        let mut cache = self.factors.by_side.lock().ok()?;
        match &cache[slot] {
            Some((e, f)) if *e == eps => f.clone(),
            _ => {
                let (len_out, len_red) = (dims.len(side), dims.len(other(side)));
                let f =
                    factored::Factors::new(self.rows(side), len_out, len_red, eps, factored::BLOCK)
                        .map(Arc::new);
                cache[slot] = Some((eps, f.clone()));
                f
            }
        }
    }
}

fn other(side: Side) -> Side {
    match side {
        Side::Row => Side::Col,
        Side::Col => Side::Row,
    }
}

/// `t = cᵀ` for an `n×m` row-major `c` (`t` is `m×n`).
fn transpose_into<T: Copy>(c: &[T], n: usize, m: usize, t: &mut [T]) {
    for (j, row) in t.chunks_exact_mut(n).enumerate().take(m) {
        for (i, v) in row.iter_mut().enumerate() {
            *v = c[i * m + j];
        }
    }
}

/// Whether every `n×n` matrix of `c` (row-major, one after another) is symmetric.
fn symmetric<T: PartialEq>(c: &[T], n: usize) -> bool {
    c.chunks(n * n)
        .all(|c| (0..n).all(|i| (0..i).all(|j| c[i * n + j] == c[j * n + i])))
}

/// Minimum number of exponentials a rayon task should hold so that scheduling stays cheap.
pub(super) const MIN_TASK_WORK: usize = 1 << 15;

/// Terms (exponentials) below which a dense kernel runs on the calling thread: handing a
/// call to rayon's pool and waiting for it costs tens of microseconds, more than a small
/// problem's whole half-step (otA, n = 100: 10⁴ terms). The crossover measured on a 2-core
/// AMD EPYC (Zen 4) is in benches/README ("Small problems on one thread").
pub(super) const SERIAL_WORK: usize = 1 << 17;

/// Whether a kernel of `work` terms runs on the calling thread.
pub(super) fn runs_serially(work: usize) -> bool {
    work < SERIAL_WORK || rayon::current_num_threads() == 1
}

impl<T: Real> Backend<T> for CpuBackend {
    type Buffer = Vec<T>;
    type Cost = CpuCost<T>;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn upload(&self, data: &[T]) -> Result<Vec<T>> {
        crate::alloc::copied("buffer", data)
    }

    fn download(&self, buf: &Vec<T>) -> Result<Vec<T>> {
        crate::alloc::copied("buffer", buf)
    }

    fn download_owned(&self, buf: Vec<T>) -> Result<Vec<T>> {
        Ok(buf)
    }

    fn filled(&self, len: usize, value: T) -> Result<Vec<T>> {
        crate::alloc::filled("buffer", len, value)
    }

    fn row_stats(&self, buf: &Vec<T>, rows: usize) -> Result<Vec<crate::backend::RowStats>> {
        crate::backend::row_stats_of(buf, rows)
    }

    fn len(&self, buf: &Vec<T>) -> usize {
        buf.len()
    }

    fn prepare_cost(&self, cost: &CostSource<'_, T>) -> Result<CpuCost<T>> {
        self.prepare_shifted_cost(cost, &[])
    }

    /// The matrix is copied once, shifted as it is copied, and transposed into a second
    /// buffer (none for a symmetric cost).
    fn prepare_shifted_cost(&self, cost: &CostSource<'_, T>, shift: &[f64]) -> Result<CpuCost<T>> {
        let of = |b: usize| match shift.len() {
            0 => 0.0,
            1 => shift[0],
            _ => shift[b],
        };
        let copy = |c: ndarray::ArrayView2<'_, T>, s: f64, out: &mut Vec<T>| {
            if s != 0.0 {
                out.extend(c.iter().map(|&v| T::of(v.f64() - s)));
            } else if let Some(v) = c.as_slice() {
                out.extend_from_slice(v);
            } else {
                out.extend(c.iter().copied());
            }
        };
        let (dims, c) = match cost {
            CostSource::Grid(g) => {
                let n = g.len();
                let dims = CostDims {
                    n,
                    m: n,
                    batch: None,
                };
                return Ok(CpuCost {
                    dims,
                    c: Vec::new(),
                    ct: Vec::new(),
                    grid: Some(Arc::new(CpuGrid::new(g.clone()))),
                    cloud: None,
                    factors: Arc::default(),
                });
            }
            CostSource::PointCloud(p) => {
                let cloud = CpuPointCloud::new(p)?;
                let dims = cloud.dims();
                return Ok(CpuCost {
                    dims,
                    c: Vec::new(),
                    ct: Vec::new(),
                    grid: None,
                    cloud: Some(Arc::new(cloud)),
                    factors: Arc::default(),
                });
            }
            CostSource::Dense(c) => {
                let (n, m) = c.dim();
                let mut v = crate::alloc::with_shape("cost", &[n, m])?;
                copy(c.view(), of(0), &mut v);
                (CostDims { n, m, batch: None }, v)
            }
            CostSource::DenseBatch(c) => {
                let (b, n, m) = c.dim();
                if b == 0 {
                    return Err(Error::Empty {
                        arg: "cost".into(),
                        detail: "a batch of 0 cost matrices".into(),
                    });
                }
                let mut v = crate::alloc::with_shape("cost", &[b, n, m])?;
                for (k, c) in c.outer_iter().enumerate() {
                    copy(c, of(k), &mut v);
                }
                let dims = CostDims {
                    n,
                    m,
                    batch: Some(b),
                };
                (dims, v)
            }
        };
        if dims.n == 0 || dims.m == 0 {
            return Err(Error::Empty {
                arg: "cost".into(),
                detail: format!("a {}×{} matrix", dims.n, dims.m),
            });
        }
        let per = dims.n * dims.m;
        let ct = if dims.n == dims.m && symmetric(&c, dims.n) {
            Vec::new()
        } else {
            let mut ct = crate::alloc::with_shape("cost", &[c.len() / per, dims.m, dims.n])?;
            ct.resize(c.len(), T::zero());
            ct.par_chunks_mut(per)
                .zip(c.par_chunks(per))
                .with_min_len((MIN_TASK_WORK / per.max(1)).max(1))
                .for_each(|(t, c)| transpose_into(c, dims.n, dims.m, t));
            ct
        };
        Ok(CpuCost {
            dims,
            c,
            ct,
            grid: None,
            cloud: None,
            factors: Arc::default(),
        })
    }

    fn cost_dims(&self, cost: &CpuCost<T>) -> CostDims {
        cost.dims
    }

    fn host_cost_bytes(&self, cost: &CostSource<'_, T>) -> usize {
        let sym = |c: ndarray::ArrayView2<'_, T>| {
            let n = c.nrows();
            n == c.ncols() && (0..n).all(|i| (0..i).all(|j| c[[i, j]] == c[[j, i]]))
        };
        // `C` and `Cᵀ`, or `C` alone when every matrix is symmetric.
        let (len, symmetric) = match cost {
            CostSource::Dense(c) => (c.len(), sym(c.view())),
            CostSource::DenseBatch(c) => (c.len(), c.outer_iter().all(sym)),
            _ => return 0,
        };
        let copies = if symmetric { 1 } else { 2 };
        len.saturating_mul(copies)
            .saturating_mul(std::mem::size_of::<T>())
    }

    fn sinkstep(
        &self,
        cost: &CpuCost<T>,
        side: Side,
        eps: T,
        other_pot: &Vec<T>,
        log_marginal: &Vec<T>,
        out: &mut Vec<T>,
    ) -> Result<()> {
        if let Some(grid) = &cost.grid {
            return grid.sinkstep(eps, other_pot, log_marginal, out);
        }
        if let Some(cloud) = &cost.cloud {
            return cloud.sinkstep(side, eps, other_pot, log_marginal, out);
        }
        let dims = cost.dims;
        let len_out = dims.len(side);
        let len_red = dims.len(other(side));
        let batch = check_sinkstep(&dims, side, other_pot.len(), log_marginal.len(), out.len())?;
        if dims.batch.is_none() && batch >= factored::MIN_BATCH {
            if let Some(f) = cost.factors(side, eps) {
                factored::sinkstep(&f, cost.rows(side), batch, other_pot, log_marginal, out);
                return Ok(());
            }
        }
        let serial = runs_serially(batch * len_out * len_red);
        dense_sinkstep(cost, side, eps, other_pot, log_marginal, out, serial)
    }

    fn relax(&self, out: &mut Vec<T>, log_marginal: &Vec<T>, eps: T, phi: T) -> Result<()> {
        if log_marginal.len() != out.len() {
            return Err(crate::Error::shape(
                "log_marginal",
                format!(
                    "has {} entries but the potential has {}",
                    log_marginal.len(),
                    out.len()
                ),
            ));
        }
        let entry = |(o, &l): (&mut T, &T)| *o = crate::backend::relax_entry(*o, l, eps, phi);
        if runs_serially(out.len()) {
            out.iter_mut().zip(log_marginal.iter()).for_each(entry);
        } else {
            out.par_iter_mut()
                .with_min_len(MIN_TASK_WORK)
                .zip(log_marginal.par_iter())
                .for_each(entry);
        }
        Ok(())
    }

    fn marginal_error(
        &self,
        batch: usize,
        marginal: &Vec<T>,
        old: &Vec<T>,
        new: &Vec<T>,
        eps: T,
    ) -> Result<Vec<T>> {
        let per = check_marginal_error(batch, marginal.len(), old.len(), new.len())?;
        let problem = |((a, o), n): ((&[T], &[T]), &[T])| {
            let mut s = 0.0f64;
            for k in 0..per {
                if a[k] > T::zero() {
                    let got = a[k] * ((o[k] - n[k]) / eps).exp();
                    s += (a[k] - got).abs().f64();
                }
            }
            T::of(s)
        };
        if runs_serially(marginal.len()) {
            return Ok(marginal
                .chunks(per)
                .zip(old.chunks(per))
                .zip(new.chunks(per))
                .map(problem)
                .collect());
        }
        Ok(marginal
            .par_chunks(per)
            .zip(old.par_chunks(per))
            .zip(new.par_chunks(per))
            .with_min_len((MIN_TASK_WORK / per.max(1)).max(1))
            .map(problem)
            .collect())
    }

    fn plan_report(
        &self,
        cost: &CpuCost<T>,
        potentials: &Potentials<Vec<T>>,
        marginals: &Marginals<'_, Vec<T>>,
        eps: T,
    ) -> Result<Vec<PlanReport>> {
        let single = std::mem::size_of::<T>() == std::mem::size_of::<f32>();
        if let (Some(cloud), true) = (&cost.cloud, single) {
            // f32 clouds: the cost in f64, not the half-steps' rounded cross-term form
            // (in f64 that rounding is far below any tolerance).
            return cloud.exact_report(
                &potentials.f,
                &potentials.g,
                marginals.mu,
                marginals.nu,
                eps,
            );
        }
        if cost.grid.is_some() || cost.cloud.is_some() {
            return plan_report_from_half_steps(self, cost, potentials, marginals, eps);
        }
        report::dense(cost, &potentials.f, &potentials.g, marginals, eps)
    }

    fn transport_cost(&self, cost: &CpuCost<T>, f: &Vec<T>, g: &Vec<T>, eps: T) -> Result<Vec<T>> {
        if let Some(grid) = &cost.grid {
            return grid.transport_cost(f, g, eps);
        }
        if let Some(cloud) = &cost.cloud {
            return cloud.transport_cost(f, g, eps);
        }
        let dims = cost.dims;
        let batch = check_fg(&dims, f.len(), g.len())?;
        let (n, m) = (dims.n, dims.m);
        Ok((0..batch)
            .map(|b| {
                // Per-row sums in parallel, then their total in row order: the same bits
                // whatever the number of threads.
                let row_sum = |i: usize| {
                    let fi = f[b * n + i];
                    if fi == T::neg_infinity() {
                        return 0.0;
                    }
                    let row = cost.row(Side::Row, b, i);
                    let gb = &g[b * m..(b + 1) * m];
                    let mut s = T::zero();
                    for j in 0..m {
                        let p = ((fi + gb[j] - row[j]) / eps).exp();
                        s += p * row[j];
                    }
                    s.f64()
                };
                let rows: Vec<f64> = if runs_serially(n * m) {
                    (0..n).map(row_sum).collect()
                } else {
                    (0..n)
                        .into_par_iter()
                        .with_min_len((MIN_TASK_WORK / m.max(1)).max(1))
                        .map(row_sum)
                        .collect()
                };
                T::of(rows.iter().sum())
            })
            .collect())
    }

    fn plan(&self, cost: &CpuCost<T>, f: &Vec<T>, g: &Vec<T>, eps: T) -> Result<Vec<T>> {
        if let Some(grid) = &cost.grid {
            return grid.plan(f, g, eps);
        }
        if let Some(cloud) = &cost.cloud {
            return cloud.plan(f, g, eps);
        }
        let dims = cost.dims;
        let batch = check_fg(&dims, f.len(), g.len())?;
        let (n, m) = (dims.n, dims.m);
        let mut p = crate::alloc::filled("plan", batch * n * m, T::zero())?;
        p.par_chunks_mut(m).enumerate().for_each(|(bi, prow)| {
            let (b, i) = (bi / n, bi % n);
            let fi = f[bi];
            let row = cost.row(Side::Row, b, i);
            let gb = &g[b * m..(b + 1) * m];
            for j in 0..m {
                prow[j] = ((fi + gb[j] - row[j]) / eps).exp();
            }
        });
        Ok(p)
    }
}

/// The plain dense half-step: one log-sum-exp per output ([`lse`]), on the calling thread
/// when `serial`, else over rayon; each output is computed by the same code either way, so
/// the bits do not depend on `serial` or on the number of threads.
fn dense_sinkstep<T: Real>(
    cost: &CpuCost<T>,
    side: Side,
    eps: T,
    other_pot: &[T],
    log_marginal: &[T],
    out: &mut [T],
    serial: bool,
) -> Result<()> {
    let dims = cost.dims;
    let (len_out, len_red) = (dims.len(side), dims.len(other(side)));
    let batch = out.len() / len_out.max(1);
    let inv_eps = T::one() / eps;
    let update = |b: usize, r: usize| -> T {
        let lm = log_marginal[b * len_out + r];
        if lm == T::neg_infinity() {
            return lm;
        }
        let pot = &other_pot[b * len_red..(b + 1) * len_red];
        eps * (lm - lse::lse(pot, cost.row(side, b, r), inv_eps))
    };
    let min_len = (MIN_TASK_WORK / len_red.max(1)).max(1);
    if dims.batch.is_none() && batch > 1 {
        // Shared cost: each task takes a cost row and applies it to every problem, so
        // the row is read from memory once per half-step, not once per problem.
        let mut by_row = crate::alloc::filled("buffer", out.len(), T::zero())?;
        let row = |(r, vals): (usize, &mut [T])| {
            for (b, v) in vals.iter_mut().enumerate() {
                *v = update(b, r);
            }
        };
        if serial {
            by_row.chunks_mut(batch).enumerate().for_each(row);
        } else {
            by_row
                .par_chunks_mut(batch)
                .with_min_len(min_len.div_ceil(batch))
                .enumerate()
                .for_each(row);
        }
        for (r, vals) in by_row.chunks(batch).enumerate() {
            for (b, &v) in vals.iter().enumerate() {
                out[b * len_out + r] = v;
            }
        }
    } else if serial {
        out.iter_mut()
            .enumerate()
            .for_each(|(idx, o)| *o = update(idx / len_out, idx % len_out));
    } else {
        out.par_iter_mut()
            .with_min_len(min_len)
            .enumerate()
            .for_each(|(idx, o)| *o = update(idx / len_out, idx % len_out));
    }
    Ok(())
}

impl<T: Real> super::PointCloudKernels<T> for CpuBackend {
    fn point_gradient(
        &self,
        cost: &CpuCost<T>,
        side: Side,
        f: &Vec<T>,
        g: &Vec<T>,
        eps: T,
    ) -> Result<(Vec<T>, Vec<T>)> {
        match &cost.cloud {
            Some(cloud) => cloud.point_gradient(side, f, g, eps),
            None => Err(Error::Unavailable(
                "point gradients need a point-cloud cost (CostSource::PointCloud)".into(),
            )),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn plan_apply(
        &self,
        cost: &CpuCost<T>,
        side: Side,
        f: &Vec<T>,
        g: &Vec<T>,
        eps: T,
        values: &Vec<T>,
        k: usize,
    ) -> Result<Vec<T>> {
        match &cost.cloud {
            Some(cloud) => cloud.plan_apply(side, f, g, eps, values, k),
            None => Err(Error::Unavailable(
                "plan_apply needs a point-cloud cost (CostSource::PointCloud)".into(),
            )),
        }
    }

    fn cost_marginals(
        &self,
        cost: &CpuCost<T>,
        side: Side,
        f: &Vec<T>,
        g: &Vec<T>,
        eps: T,
    ) -> Result<(Vec<T>, Vec<T>)> {
        match &cost.cloud {
            Some(cloud) => cloud.cost_marginals(side, f, g, eps),
            None => Err(Error::Unavailable(
                "cost_marginals needs a point-cloud cost (CostSource::PointCloud)".into(),
            )),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn adjoint_point_gradient(
        &self,
        cost: &CpuCost<T>,
        side: Side,
        f: &Vec<T>,
        g: &Vec<T>,
        eps: T,
        a: &Vec<T>,
        b: &Vec<T>,
        alpha: T,
    ) -> Result<Vec<T>> {
        match &cost.cloud {
            Some(cloud) => cloud.adjoint_point_gradient(side, f, g, eps, a, b, alpha),
            None => Err(Error::Unavailable(
                "adjoint_point_gradient needs a point-cloud cost (CostSource::PointCloud)".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array3};

    /// The serial and the parallel plain half-step give the same bits, for one problem and
    /// for a batch on a shared cost, at sizes on both sides of [`SERIAL_WORK`].
    #[test]
    fn serial_and_parallel_half_steps_give_the_same_bits() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let mut next = crate::test_rng::uniforms(31);
        for &(n, m, batch) in &[(100usize, 100usize, 1usize), (300, 517, 1), (64, 90, 3)] {
            let c: Vec<f64> = (0..n * m).map(|_| next()).collect();
            let cost = CpuBackend
                .prepare_cost(&CostSource::Dense(
                    ndarray::ArrayView2::from_shape((n, m), &c).unwrap(),
                ))
                .unwrap();
            for side in [Side::Row, Side::Col] {
                let (lo, lr) = (cost.dims.len(side), cost.dims.len(other(side)));
                let pot: Vec<f64> = (0..batch * lr).map(|_| next() - 0.5).collect();
                let mut lm: Vec<f64> = (0..batch * lo).map(|_| -(lo as f64).ln()).collect();
                lm[1] = f64::NEG_INFINITY; // a zero-mass output
                let run = |serial: bool| {
                    let mut out = vec![0.0; batch * lo];
                    pool.install(|| {
                        dense_sinkstep(&cost, side, 0.05, &pot, &lm, &mut out, serial).unwrap()
                    });
                    out.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                assert_eq!(run(true), run(false), "{n}×{m}, batch {batch}, {side:?}");
            }
        }
    }

    /// The host bytes a coupling's peak counts beside the plan are the copies
    /// `prepare_cost` keeps: `C` and `Cᵀ`, or `C` alone when every matrix is symmetric,
    /// and nothing for costs computed on the fly.
    #[test]
    fn host_cost_bytes_count_the_prepared_copies() {
        let be = CpuBackend;
        let kept = |c: &CostSource<'_, f64>| {
            let p = Backend::<f64>::prepare_cost(&be, c).unwrap();
            (p.c.len() + p.ct.len()) * 8
        };
        let skew = array![
            [0.0, 1.0, 2.0, 3.0],
            [4.0, 5.0, 6.0, 7.0],
            [8.0, 9.0, 1.0, 2.0]
        ];
        let c = CostSource::Dense(skew.view());
        assert_eq!(be.host_cost_bytes(&c), 2 * 3 * 4 * 8);
        assert_eq!(be.host_cost_bytes(&c), kept(&c));
        let sym = array![[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]];
        let c = CostSource::Dense(sym.view());
        assert_eq!(be.host_cost_bytes(&c), 3 * 3 * 8);
        assert_eq!(be.host_cost_bytes(&c), kept(&c));
        let sym32 = sym.mapv(|v| v as f32);
        assert_eq!(
            be.host_cost_bytes(&CostSource::Dense(sym32.view())),
            3 * 3 * 4
        );
        // A batch keeps the transposes when one matrix is not symmetric.
        let mut batch = Array3::<f64>::zeros((2, 3, 3));
        batch.index_axis_mut(ndarray::Axis(0), 0).assign(&sym);
        batch[[1, 0, 1]] = 1.0;
        let c = CostSource::DenseBatch(batch.view());
        assert_eq!(be.host_cost_bytes(&c), 2 * 2 * 3 * 3 * 8);
        assert_eq!(be.host_cost_bytes(&c), kept(&c));
        let grid = crate::GridCost::new(&[4, 5]).unwrap();
        assert_eq!(be.host_cost_bytes(&CostSource::<f64>::Grid(grid)), 0);
    }
}
