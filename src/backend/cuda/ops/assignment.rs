//! Batched assignment problems on the GPU (`cuda/assignment.cu`): the auction algorithm
//! with ε-scaling, one thread block per problem, the whole batch in one launch, on a
//! stored cost (B×n×n or one shared n×n) or on the squared Euclidean cost of two clouds
//! formed in `f64` on the fly. The host side of exact OT (checks, results, certificates,
//! the CPU re-solve) is `crate::exact::gpu`.
//!
//! The auction suits the GPU where shortest augmenting paths do not: a round is one
//! independent `argmin_j C_ij − v_j` per free row (a reduction over the columns), where a
//! Dijkstra search settles one column after another. ε-complementary slackness
//! (`C_iσ(i) − v_σ(i) ≤ min_j C_ij − v_j + ε`) bounds `Σ_i C_iσ(i)` within `n·ε` of the
//! optimum; prices are `f64`, so the last ε (`2⁻⁴⁵·max|C|`) is far below the spacing of the
//! permutations' costs in `f32` and `f64` data alike. The kernel ends with the certificate
//! of what it hands back, in `f64`: `f_i = C_iσ(i) − v_σ(i)` and `g = v` centred, the largest
//! `f_i + g_j − C_ij` over every pair, `max |C|` and the slack on the assignment.

use crate::backend::cuda::runtime::device::CudaBackend;
use crate::backend::cuda::runtime::kernels::{define, kernel_name, CudaReal, Module};
use crate::backend::cuda::runtime::launch::{to_i32, Launch};
use crate::validate::check_len;
use crate::{Error, Result};

const SRC: &str = Module::Assignment.text();
/// Threads per block (one block per problem).
const THREADS: usize = define(SRC, "AUC_THREADS");
/// The largest problem one block holds (its prices and assignment in shared memory).
pub(crate) const AUCTION_MAX_N: usize = define(SRC, "AUC_MAX_N");
/// Statistics per problem (violation, max |C|, slack, rounds, converged, phases).
const STATS: usize = define(SRC, "AUC_STATS");
/// Shared-memory bytes per point of a problem.
const SMEM_PER_N: usize = define(SRC, "AUC_SMEM_PER_N");

/// What the device hands back for a batch of `B` problems of `n` points, problem by problem.
pub(crate) struct Auctioned {
    /// `σ(i)` (B×n).
    pub(crate) col_of: Vec<i32>,
    /// Source potentials `f` (B×n), centred.
    pub(crate) f: Vec<f64>,
    /// Target potentials `g` (B×n), centred.
    pub(crate) g: Vec<f64>,
    /// `C_iσ(i)` (B×n).
    pub(crate) c_row: Vec<f64>,
    /// Per problem: `max f_i + g_j − C_ij`, `max |C_ij|`, `max |C_iσ(i) − f_i − g_σ(i)|`,
    /// bidding rounds, 1 when every phase finished (0: the round limit stopped it), phases.
    pub(crate) stats: Vec<f64>,
}

impl Auctioned {
    /// Problem `k`'s statistics.
    pub(crate) fn stats_of(&self, k: usize) -> &[f64] {
        &self.stats[k * STATS..(k + 1) * STATS]
    }
}

/// The cost of a batch for [`CudaBackend::auction`].
pub(crate) enum AuctionCost<'a, T> {
    /// B×n×n costs (or one n×n shared by the batch: `shared`), row-major.
    Dense { c: &'a [T], shared: bool },
    /// B×n×d clouds `x` and `y`, row-major: `C_ij = |x_i − y_j|²`.
    Points { x: &'a [T], y: &'a [T], d: usize },
}

impl CudaBackend {
    /// Solve `batch` assignment problems of `n ≤ AUCTION_MAX_N` points on the device, each
    /// stopped after `max_rounds` bidding rounds at most.
    pub(crate) fn auction<T: CudaReal>(
        &self,
        cost: AuctionCost<'_, T>,
        batch: usize,
        n: usize,
        max_rounds: usize,
    ) -> Result<Auctioned> {
        if n == 0 || n > AUCTION_MAX_N {
            return Err(Error::shape(
                "cost",
                format!("{n} points a problem (the auction takes 1 to {AUCTION_MAX_N})"),
            ));
        }
        let blocks = u32::try_from(batch)
            .map_err(|_| Error::shape("mu", "too many problems for one launch"))?;
        let cfg = Launch::linear(blocks, THREADS as u32).shared(SMEM_PER_N * n);
        let len = batch * n;
        let col_of = self.alloc_i32(len, "the assignments")?;
        let f = self.alloc_f64(len, "the source potentials")?;
        let g = self.alloc_f64(len, "the target potentials")?;
        let c_row = self.alloc_f64(len, "the assigned costs")?;
        let stats = self.alloc_f64(batch * STATS, "the certificates")?;
        let rounds = max_rounds.min(i64::MAX as usize) as i64;
        let out = (
            self.ptr(&col_of),
            self.ptr(&f),
            self.ptr(&g),
            self.ptr(&c_row),
            self.ptr(&stats),
        );
        let ni = to_i32(n, "n")?;
        match cost {
            AuctionCost::Dense { c, shared } => {
                let need = if shared { n * n } else { len * n };
                check_len("cost", c.len(), need)?;
                let cd = self.upload_slice(c, "the costs")?;
                let cstride = if shared { 0 } else { (n * n) as i64 };
                // SAFETY: auction_dense(C, cstride, n, max_rounds, col_of, f, g, c_row,
                // stats) reads B (or one) n×n costs and writes B·n indices, potentials and
                // costs and B·AUC_STATS statistics, the buffers above.
                unsafe {
                    self.launch(
                        &kernel_name::<T>("auction_dense"),
                        cfg,
                        (
                            self.ptr(&cd),
                            cstride,
                            ni,
                            rounds,
                            out.0,
                            out.1,
                            out.2,
                            out.3,
                            out.4,
                        ),
                    )
                }?;
            }
            AuctionCost::Points { x, y, d } => {
                check_len("x", x.len(), len * d)?;
                check_len("y", y.len(), len * d)?;
                let xd = self.upload_slice(x, "x")?;
                let yd = self.upload_slice(y, "y")?;
                let di = to_i32(d, "d")?;
                // SAFETY: auction_points(x, y, n, d, max_rounds, col_of, f, g, c_row, stats)
                // reads B×n×d points of each cloud and writes B·n indices, potentials and
                // costs and B·AUC_STATS statistics, the buffers above.
                unsafe {
                    self.launch(
                        &kernel_name::<T>("auction_points"),
                        cfg,
                        (
                            self.ptr(&xd),
                            self.ptr(&yd),
                            ni,
                            di,
                            rounds,
                            out.0,
                            out.1,
                            out.2,
                            out.3,
                            out.4,
                        ),
                    )
                }?;
            }
        }
        Ok(Auctioned {
            col_of: self.download_slice(&col_of, len, "the assignments")?,
            f: self.download_slice(&f, len, "the source potentials")?,
            g: self.download_slice(&g, len, "the target potentials")?,
            c_row: self.download_slice(&c_row, len, "the assigned costs")?,
            stats: self.download_slice(&stats, batch * STATS, "the certificates")?,
        })
    }
}
