//! Exact minibatch OT on the GPU: [`CudaBackend::emd_batch`] and
//! [`CudaBackend::emd_points_batch`], the CPU's [`emd_batch`] and [`emd_points_batch`] with
//! batches of square problems whose weights are all equal (assignment problems,
//! `n ≤ 4096`) solved on the device by the auction algorithm with ε-scaling (one thread
//! block per problem, the whole batch in one launch), every other batch on the CPU.
//!
//! Each result carries the certificate measured on the device in `f64` on what is handed
//! back (`f_i = C_iσ(i) − v_σ(i)` and `g = v`, centred as the CPU solvers centre them; the
//! largest `f_i + g_j − C_ij` over every pair, `max |C|`, the slack on the assignment); the
//! duality gap `⟨P, C⟩ − ⟨a, f⟩ − ⟨b, g⟩` and the marginals are summed here. Since
//! `f − max_violation` is dual feasible, the returned cost is within `mass · max_violation`
//! of the optimum. A problem whose round limit stops it, or whose certificate does not hold
//! within [`EmdParams::certificate_tol`], is solved again on the CPU by the assignment
//! solver and reports [`ExactMethod::Assignment`]; those solved on the device report
//! [`ExactMethod::Auction`] (never a silent approximate answer). [`EmdParams::max_iters`]
//! bounds the device's bidding rounds too; [`EmdParams::max_time`] applies to the CPU's
//! work only (the device's rounds are bounded by `100000 + 64·n`).

use super::emd::{check_cost_range, checked_batch, checked_points_batch, cost_bound, to_f64_rows};
use super::{
    emd_batch, emd_points_batch, Certificate, EmdMethod, EmdParams, EmdResult, ExactMethod, Metric,
    SparsePlan,
};
use crate::backend::cuda::{AuctionCost, Auctioned, CudaBackend, CudaReal, AUCTION_MAX_N};

// The public bound is the kernel's.
const _: () = assert!(super::AUCTION_MAX_N == AUCTION_MAX_N);
use crate::Result;
use ndarray::{s, Array1, ArrayView2, ArrayView3, Axis};

/// Bidding rounds a problem may take on the device, per point beyond a fixed allowance
/// (costs that tie everywhere take about `n` rounds a phase, and there are 15 phases); a
/// problem that reaches the limit goes to the CPU.
const ROUNDS_PER_N: usize = 64;
const ROUNDS_FIXED: usize = 100_000;

impl CudaBackend {
    /// [`emd_batch`] with the square problems whose weights are all equal solved on the GPU
    /// by the auction algorithm (`n ≤ 4096`; [`EmdMethod::Auto`] or
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
        if !on_device(params, &a, &b) {
            return emd_batch(mu, nu, cost, params);
        }
        let (batch, n) = mu.dim();
        let cost = cost.as_standard_layout();
        let shared = cost.dim().0 == 1;
        let c = cost.as_slice().expect("standard layout");
        let solved = self.auction(
            AuctionCost::Dense { c, shared },
            batch,
            n,
            rounds(params, n),
        )?;
        (0..batch)
            .map(|k| {
                finish(&solved, k, n, &a[k], &b[k], params, |on_cpu| {
                    let ck = cost.index_axis(Axis(0), if shared { 0 } else { k });
                    let (mu, nu) = (mu.slice(s![k..k + 1, ..]), nu.slice(s![k..k + 1, ..]));
                    emd_batch(mu, nu, ck.insert_axis(Axis(0)), on_cpu)
                })
            })
            .collect()
    }

    /// [`emd_points_batch`] with the square problems of uniform (or all equal) weights and
    /// the squared Euclidean cost solved on the GPU by the auction algorithm, the cost
    /// formed in `f64` on the fly (`n ≤ 4096`; [`EmdMethod::Auto`] or
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
        if !(metric.is_squared() && on_device(params, &a, &b)) {
            return emd_points_batch(mu, nu, x, y, metric, params);
        }
        let (batch, n, d) = x.dim();
        for k in 0..batch {
            let xs = to_f64_rows(x.index_axis(Axis(0), k));
            let ys = to_f64_rows(y.index_axis(Axis(0), k));
            check_cost_range(cost_bound(&xs, &ys, d, metric), "x")?;
        }
        let (xc, yc) = (x.as_standard_layout(), y.as_standard_layout());
        let cost = AuctionCost::Points {
            x: xc.as_slice().expect("standard layout"),
            y: yc.as_slice().expect("standard layout"),
            d,
        };
        let solved = self.auction(cost, batch, n, rounds(params, n))?;
        (0..batch)
            .map(|k| {
                finish(&solved, k, n, &a[k], &b[k], params, |on_cpu| {
                    let (xk, yk) = (x.slice(s![k..k + 1, .., ..]), y.slice(s![k..k + 1, .., ..]));
                    let mu = mu.as_ref().map(|v| v.slice(s![k..k + 1, ..]));
                    let nu = nu.as_ref().map(|v| v.slice(s![k..k + 1, ..]));
                    emd_points_batch(mu, nu, xk, yk, metric, on_cpu)
                })
            })
            .collect()
    }
}

/// The device's round limit: [`EmdParams::max_iters`], at most `100000 + 64·n`.
fn rounds(params: &EmdParams, n: usize) -> usize {
    params.max_iters.min(ROUNDS_FIXED + ROUNDS_PER_N * n)
}

/// Whether the batch goes to the device: the method allows it, and every problem is square,
/// of at most `AUCTION_MAX_N` points, with all weights of each side equal.
fn on_device(params: &EmdParams, a: &[Vec<f64>], b: &[Vec<f64>]) -> bool {
    let method = matches!(params.method, EmdMethod::Auto | EmdMethod::Assignment);
    let equal = |w: &Vec<f64>| w.iter().all(|&v| v == w[0] && v > 0.0);
    method
        && a.iter()
            .zip(b)
            .all(|(a, b)| a.len() == b.len() && a.len() <= AUCTION_MAX_N && equal(a) && equal(b))
}

/// Problem `k`'s result from the device, or from `cpu` (the CPU's assignment solver, on
/// that problem alone) when the device's is not exact.
fn finish(
    solved: &Auctioned,
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

/// Problem `k`'s [`EmdResult`] from the device's outputs, its certificate completed in
/// `f64`; `None` when the assignment is not a permutation or a sum is not finite.
fn device_result(
    solved: &Auctioned,
    k: usize,
    n: usize,
    a: &[f64],
    b: &[f64],
    params: &EmdParams,
) -> Option<EmdResult> {
    let at = k * n..(k + 1) * n;
    let st = solved.stats_of(k);
    let col_of = &solved.col_of[at.clone()];
    let mut seen = vec![false; n];
    let mut sigma = Vec::with_capacity(n);
    for &j in col_of {
        let j = usize::try_from(j).ok().filter(|&j| j < n)?;
        if std::mem::replace(&mut seen[j], true) {
            return None;
        }
        sigma.push(j);
    }
    let (f, g, c_row) = (
        &solved.f[at.clone()],
        &solved.g[at.clone()],
        &solved.c_row[at],
    );
    let dot = |w: &[f64], p: &[f64]| w.iter().zip(p).map(|(x, y)| x * y).sum::<f64>();
    let primal = dot(a, c_row);
    let dual = dot(a, f) + dot(b, g);
    if !(primal.is_finite() && dual.is_finite()) {
        return None;
    }
    let mass: f64 = a.iter().sum();
    let mass_b: f64 = b.iter().sum();
    // The plan puts a_i on (i, σ(i)): its rows meet a exactly, column σ(i) receives a_i.
    let col_error = sigma
        .iter()
        .enumerate()
        .map(|(i, &j)| (a[i] - b[j]).abs())
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
    let exact = converged && certificate.holds(params.certificate_tol);
    let triples = sigma
        .iter()
        .enumerate()
        .map(|(i, &j)| (i, j, a[i]))
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
