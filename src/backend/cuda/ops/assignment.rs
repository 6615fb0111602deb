//! Exact minibatch OT on the GPU: [`CudaBackend::emd_batch`] and
//! [`CudaBackend::emd_points_batch`], the CPU's [`exact::emd_batch`] and
//! [`exact::emd_points_batch`] with batches of square problems whose weights are all equal
//! (assignment problems, `n ≤ 4096`) solved on the device, every other problem on the CPU.
//!
//! The device runs the auction algorithm with ε-scaling (`cuda/assignment.cu`), one thread
//! block per problem and the whole batch in one launch. The auction suits the GPU where
//! shortest augmenting paths do not: a round is one independent `argmin_j C_ij − v_j` per
//! free row (a reduction over the columns, on the fly for point clouds), where a Dijkstra
//! search settles one column after another. ε-complementary slackness
//! (`C_iσ(i) − v_σ(i) ≤ min_j C_ij − v_j + ε`) bounds `Σ_i C_iσ(i)` within `n·ε` of the
//! optimum; prices are `f64`, so the last ε (`2⁻⁴⁵·max|C|`) is far below the spacing of
//! the permutations' costs in `f32` and `f64` data alike.
//!
//! Each result carries the certificate measured on the device in `f64` on what is handed
//! back: `f_i = C_iσ(i) − v_σ(i)` and `g = v` centred as the CPU solvers centre them, the
//! largest `f_i + g_j − C_ij` over every pair, `max |C|` and the slack on the assignment;
//! the duality gap `⟨P, C⟩ − ⟨a, f⟩ − ⟨b, g⟩` and the marginals are summed here. Since
//! `f − max_violation` is dual feasible, the returned cost is within `mass · max_violation`
//! of the optimum. A problem whose round limit stops it, or whose certificate does not hold
//! within [`EmdParams::certificate_tol`], is solved again on the CPU by the assignment
//! solver and reports [`ExactMethod::Assignment`]; those solved on the device report
//! [`ExactMethod::Auction`] (never a silent approximate answer).

use crate::backend::cuda::runtime::device::CudaBackend;
use crate::backend::cuda::runtime::kernels::{define, kernel_name, CudaReal, Module};
use crate::backend::cuda::runtime::launch::{to_i32, Launch};
use crate::exact::{
    self, check_cost_range, checked_batch, checked_points_batch, cost_bound, to_f64_rows,
    Certificate, EmdMethod, EmdParams, EmdResult, ExactMethod, Metric, SparsePlan,
};
use crate::Result;
use ndarray::{s, Array1, ArrayView2, ArrayView3, Axis};

const SRC: &str = Module::Assignment.text();
/// Threads per block (one block per problem).
const THREADS: usize = define(SRC, "AUC_THREADS");
/// The largest problem one block holds (its prices and assignment in shared memory).
pub const AUCTION_MAX_N: usize = define(SRC, "AUC_MAX_N");
/// Statistics per problem (violation, max |C|, slack, rounds, converged, phases).
const STATS: usize = define(SRC, "AUC_STATS");
/// Shared-memory bytes per point of a problem.
const SMEM_PER_N: usize = define(SRC, "AUC_SMEM_PER_N");
/// Bidding rounds a problem may take per point, beyond a fixed allowance: a problem that
/// reaches the limit goes to the CPU (each phase takes at most about `n` rounds on
/// costs that tie everywhere, and there are 15 phases).
const ROUNDS_PER_N: usize = 64;
const ROUNDS_FIXED: usize = 100_000;

/// What the device hands back for a batch of `b` problems of `n` points.
struct Solved {
    col_of: Vec<i32>,
    f: Vec<f64>,
    g: Vec<f64>,
    c_row: Vec<f64>,
    stats: Vec<f64>,
}

impl CudaBackend {
    /// [`exact::emd_batch`] with the square problems whose weights are all equal solved on
    /// the GPU by the auction algorithm (`n ≤ 4096`; [`EmdMethod::Auto`] or
    /// [`EmdMethod::Assignment`]); other batches are solved on the CPU. The same checks,
    /// errors and results; each result's [`EmdResult::method`] says where it was solved.
    ///
    /// ```no_run
    /// use logot::exact::{EmdParams, ExactMethod};
    /// use logot::CudaBackend;
    /// use ndarray::{Array2, Array3};
    /// let gpu = CudaBackend::new()?;
    /// let (b, n) = (64, 256);
    /// let cost = Array3::from_shape_fn((b, n, n), |(k, i, j)| ((k + 3 * i + 7 * j) % 11) as f32);
    /// let w = Array2::from_elem((b, n), 1.0f32 / n as f32);
    /// let r = gpu.emd_batch(w.view(), w.view(), cost.view(), &EmdParams::default())?;
    /// assert!(r.iter().all(|r| r.exact && r.method == ExactMethod::Auction));
    /// # Ok::<(), logot::Error>(())
    /// ```
    pub fn emd_batch<T: CudaReal>(
        &self,
        mu: ArrayView2<'_, T>,
        nu: ArrayView2<'_, T>,
        cost: ArrayView3<'_, T>,
        params: &EmdParams,
    ) -> Result<Vec<EmdResult>> {
        let (a, b) = checked_batch(mu, nu, cost, params)?;
        let (batch, n) = mu.dim();
        if !on_device(params, &a, &b) {
            return exact::emd_batch(mu, nu, cost, params);
        }
        let cost = cost.as_standard_layout();
        let shared = cost.dim().0 == 1;
        let data = cost.as_slice().expect("standard layout");
        let c = self.upload_slice(data, "the costs")?;
        let cstride = if shared { 0 } else { (n * n) as i64 };
        let solved = self.run_auction::<T>(batch, n, params, |out, rounds| {
            // SAFETY: auction_dense(C, cstride, n, max_rounds, col_of, f, g, c_row, stats)
            // reads B (or one) n×n costs and writes B·n indices, potentials and costs and
            // B·AUC_STATS statistics (`run_auction`'s buffers).
            unsafe {
                self.launch(
                    &kernel_name::<T>("auction_dense"),
                    auction_launch(batch, n)?,
                    (
                        self.ptr(&c),
                        cstride,
                        to_i32(n, "n")?,
                        rounds,
                        out[0],
                        out[1],
                        out[2],
                        out[3],
                        out[4],
                    ),
                )
            }
        })?;
        (0..batch)
            .map(|k| {
                finish(&solved, k, n, &a[k], &b[k], params, |on_cpu| {
                    let ck = cost.index_axis(Axis(0), if shared { 0 } else { k });
                    let (mu, nu) = (mu.slice(s![k..k + 1, ..]), nu.slice(s![k..k + 1, ..]));
                    exact::emd_batch(mu, nu, ck.insert_axis(Axis(0)), on_cpu)
                })
            })
            .collect()
    }

    /// [`exact::emd_points_batch`] with the square problems of uniform (or all equal)
    /// weights and the squared Euclidean cost solved on the GPU by the auction algorithm,
    /// the cost formed in `f64` on the fly (`n ≤ 4096`; [`EmdMethod::Auto`] or
    /// [`EmdMethod::Assignment`]); other batches are solved on the CPU. Each result's
    /// [`EmdResult::method`] says where it was solved.
    pub fn emd_points_batch<T: CudaReal>(
        &self,
        mu: Option<ArrayView2<'_, T>>,
        nu: Option<ArrayView2<'_, T>>,
        x: ArrayView3<'_, T>,
        y: ArrayView3<'_, T>,
        metric: Metric,
        params: &EmdParams,
    ) -> Result<Vec<EmdResult>> {
        let (a, b) = checked_points_batch(mu, nu, x, y, metric, params)?;
        let (batch, n, d) = x.dim();
        let squared = matches!(metric, Metric::SqEuclidean)
            || matches!(metric, Metric::EuclideanPow(p) if p == 2.0);
        if !(squared && on_device(params, &a, &b)) {
            return exact::emd_points_batch(mu, nu, x, y, metric, params);
        }
        for k in 0..batch {
            let xs = to_f64_rows(x.index_axis(Axis(0), k));
            let ys = to_f64_rows(y.index_axis(Axis(0), k));
            check_cost_range(cost_bound(&xs, &ys, d, metric), "x")?;
        }
        let (x, y) = (x.as_standard_layout(), y.as_standard_layout());
        let xd = self.upload_slice(x.as_slice().expect("standard layout"), "x")?;
        let yd = self.upload_slice(y.as_slice().expect("standard layout"), "y")?;
        let solved = self.run_auction::<T>(batch, n, params, |out, rounds| {
            // SAFETY: auction_points(x, y, n, d, max_rounds, col_of, f, g, c_row, stats)
            // reads B×n×d points of each cloud and writes B·n indices, potentials and costs
            // and B·AUC_STATS statistics (`run_auction`'s buffers).
            unsafe {
                self.launch(
                    &kernel_name::<T>("auction_points"),
                    auction_launch(batch, n)?,
                    (
                        self.ptr(&xd),
                        self.ptr(&yd),
                        to_i32(n, "n")?,
                        to_i32(d, "d")?,
                        rounds,
                        out[0],
                        out[1],
                        out[2],
                        out[3],
                        out[4],
                    ),
                )
            }
        })?;
        (0..batch)
            .map(|k| {
                finish(&solved, k, n, &a[k], &b[k], params, |on_cpu| {
                    let (xk, yk) = (x.slice(s![k..k + 1, .., ..]), y.slice(s![k..k + 1, .., ..]));
                    let mu = mu.as_ref().map(|v| v.slice(s![k..k + 1, ..]));
                    let nu = nu.as_ref().map(|v| v.slice(s![k..k + 1, ..]));
                    exact::emd_points_batch(mu, nu, xk, yk, metric, on_cpu)
                })
            })
            .collect()
    }

    /// The output buffers of a batch, the launch (`launch(buffers, max_rounds)`), and what
    /// it wrote, read back.
    fn run_auction<T: CudaReal>(
        &self,
        batch: usize,
        n: usize,
        params: &EmdParams,
        launch: impl FnOnce([u64; 5], i64) -> Result<()>,
    ) -> Result<Solved> {
        let len = batch * n;
        let col_of = self.alloc_i32(len, "the assignments")?;
        let f = self.alloc_f64(len, "the source potentials")?;
        let g = self.alloc_f64(len, "the target potentials")?;
        let c_row = self.alloc_f64(len, "the assigned costs")?;
        let stats = self.alloc_f64(batch * STATS, "the certificates")?;
        let rounds = params
            .max_iters
            .min(ROUNDS_FIXED + ROUNDS_PER_N * n)
            .min(i64::MAX as usize) as i64;
        let out = [
            self.ptr(&col_of),
            self.ptr(&f),
            self.ptr(&g),
            self.ptr(&c_row),
            self.ptr(&stats),
        ];
        launch(out, rounds)?;
        Ok(Solved {
            col_of: self.download_slice(&col_of, len, "the assignments")?,
            f: self.download_slice(&f, len, "the source potentials")?,
            g: self.download_slice(&g, len, "the target potentials")?,
            c_row: self.download_slice(&c_row, len, "the assigned costs")?,
            stats: self.download_slice(&stats, batch * STATS, "the certificates")?,
        })
    }
}

/// Problem `k`'s result from the device, or from `cpu` (the CPU's assignment solver, on
/// that problem alone) when the device's is not exact.
#[allow(clippy::too_many_arguments)]
fn finish(
    solved: &Solved,
    k: usize,
    n: usize,
    a: &[f64],
    b: &[f64],
    params: &EmdParams,
    cpu: impl FnOnce(&EmdParams) -> Result<Vec<EmdResult>>,
) -> Result<EmdResult> {
    match device_result(solved, k, n, a, b, params) {
        Some(r) if r.exact => Ok(r),
        _ => {
            let on_cpu = params.clone().method(EmdMethod::Assignment);
            Ok(cpu(&on_cpu)?.pop().expect("one problem"))
        }
    }
}

/// Whether the batch goes to the device: the method allows it, and every problem is square,
/// of at most [`AUCTION_MAX_N`] points, with all weights of each side equal.
fn on_device(params: &EmdParams, a: &[Vec<f64>], b: &[Vec<f64>]) -> bool {
    let method = matches!(params.method, EmdMethod::Auto | EmdMethod::Assignment);
    let equal = |w: &Vec<f64>| w.iter().all(|&v| v == w[0] && v > 0.0);
    method
        && a.iter()
            .zip(b)
            .all(|(a, b)| a.len() == b.len() && a.len() <= AUCTION_MAX_N && equal(a) && equal(b))
}

/// One block of [`THREADS`] per problem, with the shared memory of `n` points.
fn auction_launch(batch: usize, n: usize) -> Result<Launch> {
    let blocks = u32::try_from(batch)
        .map_err(|_| crate::Error::shape("mu", "too many problems for one launch"))?;
    Ok(Launch::linear(blocks, THREADS as u32).shared(SMEM_PER_N * n))
}

/// Problem `k`'s [`EmdResult`] from the device's outputs, its certificate completed in
/// `f64`; `None` when the assignment is not a permutation.
fn device_result(
    solved: &Solved,
    k: usize,
    n: usize,
    a: &[f64],
    b: &[f64],
    params: &EmdParams,
) -> Option<EmdResult> {
    let at = k * n..(k + 1) * n;
    let st = &solved.stats[k * STATS..(k + 1) * STATS];
    let col_of = &solved.col_of[at.clone()];
    let mut seen = vec![false; n];
    for &j in col_of {
        let j = usize::try_from(j).ok().filter(|&j| j < n)?;
        if std::mem::replace(&mut seen[j], true) {
            return None;
        }
    }
    let (f, g, c_row) = (
        &solved.f[at.clone()],
        &solved.g[at.clone()],
        &solved.c_row[at],
    );
    let dot = |w: &[f64], p: &[f64]| w.iter().zip(p).map(|(x, y)| x * y).sum::<f64>();
    let primal = dot(a, c_row);
    let dual = dot(a, f) + dot(b, g);
    let mass: f64 = a.iter().sum();
    let mass_b: f64 = b.iter().sum();
    // The plan puts a_i on (i, σ(i)): its rows meet a exactly, column σ(i) receives a_i.
    let col_error = col_of
        .iter()
        .enumerate()
        .map(|(i, &j)| (a[i] - b[j as usize]).abs())
        .sum::<f64>()
        / mass_b;
    let certificate = Certificate {
        primal,
        dual,
        duality_gap: (primal - dual).abs(),
        max_violation: st[0].max(0.0),
        max_slack_on_support: st[2],
        marginal_error_a: 0.0,
        marginal_error_b: col_error,
        mass,
        max_abs_cost: st[1],
    };
    let converged = st[4] == 1.0;
    if !(primal.is_finite() && dual.is_finite()) {
        return None;
    }
    let exact = converged && certificate.holds(params.certificate_tol);
    let triples = col_of
        .iter()
        .enumerate()
        .map(|(i, &j)| (i, j as usize, a[i]))
        .collect();
    Some(EmdResult {
        cost: primal,
        plan: SparsePlan::from_triples(n, n, triples),
        f: Array1::from(f.to_vec()),
        g: Array1::from(g.to_vec()),
        certificate,
        iterations: st[3] as usize,
        converged,
        exact,
        method: ExactMethod::Auction,
    })
}
