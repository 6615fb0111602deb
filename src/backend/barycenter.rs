//! Device kernels for Wasserstein barycenters (iterative Bregman projections, log domain).
//!
//! The barycenter loop ([`crate::barycenter`](mod@crate::barycenter)) keeps, for `P` independent problems of `K`
//! inputs each, the scaled potentials `v = −ε·log K(u)` and `εG` (both `P·K×m`) and the
//! log-barycenters `ε·log b` (`P×m`) on the device. Besides [`Backend::sinkstep`] it needs
//! the three elementwise/reduction kernels below; a backend adds them by implementing
//! this trait, without touching the algorithm.

use super::{Backend, Side};
use crate::{Error, Real, Result};

/// Sizes of a batch of barycenter problems: `problems` (P) problems of `inputs` (K)
/// histograms each, barycenters of `m` bins. Buffers are row-major `P×K×m` (potentials),
/// `P×K` (weights) and `P×m` (log-barycenters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BaryLayout {
    /// Number of independent barycenter problems (P).
    pub problems: usize,
    /// Histograms per problem (K).
    pub inputs: usize,
    /// Bins of the barycenter (m).
    pub m: usize,
}

impl BaryLayout {
    /// Check a buffer length against `P·K·m` (`per_input`) or `P·m`; an error names `arg`.
    pub fn check(&self, arg: &str, len: usize, per_input: bool) -> Result<()> {
        let want = self.problems * self.m * if per_input { self.inputs } else { 1 };
        if len != want || want == 0 {
            let shape = if per_input { "P×K×m" } else { "P×m" };
            return Err(Error::shape(
                arg,
                format!(
                    "length {len}, expected {shape} = {want} for {} problems of {} inputs with {} bins",
                    self.problems, self.inputs, self.m
                ),
            ));
        }
        Ok(())
    }

    /// Check the weights buffer length against `P·K`; an error names `weights`.
    pub fn check_weights(&self, len: usize) -> Result<()> {
        if len != self.problems * self.inputs {
            return Err(Error::shape(
                "weights",
                format!("length {len}, expected {}×{}", self.problems, self.inputs),
            ));
        }
        Ok(())
    }
}

/// The device state of the barycenter loop (layouts of [`BaryLayout`]): the inputs
/// `log_a` (`P×K×n`, `log(a + stab)`), `weights` (`P×K`), `zeros` (`P×K×m`), and the
/// iterates `g` (εG), `f` (εf), `v` (−ε·log K(u)) and `bar` (ε·log b).
pub struct BaryBuffers<Buf> {
    /// `log(a + stab)` of the inputs, `P×K×n`.
    pub log_a: Buf,
    /// The barycentric weights, `P×K`.
    pub weights: Buf,
    /// Zeros, `P×K×m`.
    pub zeros: Buf,
    /// The iterate `εG`.
    pub g: Buf,
    /// The iterate `εf`.
    pub f: Buf,
    /// The iterate `−ε·log K(u)`.
    pub v: Buf,
    /// The iterate `ε·log b` (the log-barycenters).
    pub bar: Buf,
}

/// [`BarycenterKernels::bary_iterations`] one kernel at a time (the default; a backend
/// that fuses the loop falls back to it where its fused kernel does not apply).
pub fn bary_iterations_unfused<T: Real, B: BarycenterKernels<T> + ?Sized>(
    be: &B,
    cost: &B::Cost,
    layout: BaryLayout,
    eps: T,
    s: &mut BaryBuffers<B::Buffer>,
    iters: usize,
) -> Result<()> {
    for i in 0..iters {
        if i > 0 {
            be.bary_potential(layout, &s.bar, &s.v, &mut s.g)?;
        }
        be.sinkstep(cost, Side::Row, eps, &s.g, &s.log_a, &mut s.f)?;
        be.sinkstep(cost, Side::Col, eps, &s.f, &s.zeros, &mut s.v)?;
        be.bary_log_mean(layout, &s.weights, &s.v, &mut s.bar)?;
    }
    Ok(())
}

/// Kernels of the barycenter loop (see [`BaryLayout`] for the buffer layouts).
pub trait BarycenterKernels<T: Real>: Backend<T> {
    /// `iters` iterations of the loop: each runs `f = sinkstep(Row, g, log_a)`,
    /// `v = sinkstep(Col, f, 0)` and `bar = log_mean(v)`, and every one but the last starts
    /// with `g = bar + v` of the previous one, so the caller can measure the spread
    /// between the last `log_mean` and its own [`bary_potential`](Self::bary_potential).
    /// The default launches the kernels one by one; a backend may fuse them.
    fn bary_iterations(
        &self,
        cost: &Self::Cost,
        layout: BaryLayout,
        eps: T,
        state: &mut BaryBuffers<Self::Buffer>,
        iters: usize,
    ) -> Result<()> {
        bary_iterations_unfused(self, cost, layout, eps, state, iters)
    }

    /// Weighted geometric mean in the log domain:
    /// `bar[p,x] = −Σ_k w[p,k]·v[p,k,x]` (i.e. `ε·log b = Σ_k w_k·ε·log K(u_k)`).
    fn bary_log_mean(
        &self,
        layout: BaryLayout,
        weights: &Self::Buffer,
        v: &Self::Buffer,
        bar: &mut Self::Buffer,
    ) -> Result<()>;

    /// Weighted power mean in the log domain, the barycenter step of unbalanced barycenters
    /// (`ε·log q = ε/(1−φ)·log Σ_k w_k·(Kᵀu_k)^{1−φ}` with `1 − φ = ε·t`):
    ///
    /// `bar[p,x] = (1/t)·log( Σ_k w[p,k]·exp(−t·v[p,k,x]) / Σ_k w[p,k] )`,
    ///
    /// computed as `x* + log1p(Σ_k w_k·expm1(t·(x_k − x*)) / Σ_k w_k)/t` with `x_k = −v[p,k,x]`
    /// and `x* = max_{k: w_k > 0} x_k`, so that it keeps its relative precision as `t → 0`;
    /// `t = 0` is the limit, the weighted mean `−Σ_k w_k·v_k / Σ_k w_k`. Inputs with `w_k = 0`
    /// do not take part; `−∞` where every `x_k` is (never NaN).
    ///
    /// The default downloads `weights` and `v`, computes on the host ([`log_power_mean`]) and
    /// uploads `bar`; a backend may compute it on the device.
    fn bary_log_power_mean(
        &self,
        layout: BaryLayout,
        weights: &Self::Buffer,
        v: &Self::Buffer,
        bar: &mut Self::Buffer,
        t: T,
    ) -> Result<()> {
        layout.check("v", self.len(v), true)?;
        layout.check("bar", self.len(bar), false)?;
        layout.check_weights(self.len(weights))?;
        let (k, m) = (layout.inputs, layout.m);
        let (w, v) = (self.download(weights)?, self.download(v)?);
        let mut out = vec![T::zero(); layout.problems * m];
        for ((b, vp), wp) in out.chunks_mut(m).zip(v.chunks(k * m)).zip(w.chunks(k)) {
            for (x, bx) in b.iter_mut().enumerate() {
                *bx = log_power_mean(wp, |j| vp[j * m + x], t);
            }
        }
        *bar = self.upload(&out)?;
        Ok(())
    }

    /// Projection onto the common marginal: `g[p,k,x] = bar[p,x] + v[p,k,x]`
    /// (i.e. `εG_k = ε·log b − ε·log K(u_k)`).
    fn bary_potential(
        &self,
        layout: BaryLayout,
        bar: &Self::Buffer,
        v: &Self::Buffer,
        g: &mut Self::Buffer,
    ) -> Result<()>;

    /// Disagreement of the `K` marginals on the barycenter side, per problem (POT's error):
    /// `err[p] = Σ_x std_k exp((g[p,k,x] − v[p,k,x])/ε)` (population standard deviation),
    /// with `g` the potential before this iteration's update. Only these `P` numbers
    /// cross to the host.
    fn bary_spread(
        &self,
        layout: BaryLayout,
        g: &Self::Buffer,
        v: &Self::Buffer,
        eps: T,
    ) -> Result<Vec<T>>;
}

/// One entry of [`BarycenterKernels::bary_log_power_mean`]: `(1/t)·log(Σ_k w_k·exp(−t·v_k) /
/// Σ_k w_k)` over the `w.len()` inputs (`v(k)` gives `v_k`), in f64 with `expm1`/`log1p` around
/// the largest `−v_k` of positive weight; `t = 0` gives the weighted mean `−Σ w_k v_k / Σ w_k`.
pub fn log_power_mean<T: Real>(w: &[T], v: impl Fn(usize) -> T, t: T) -> T {
    let t = t.f64();
    let mut top = f64::NEG_INFINITY;
    let mut total_w = 0.0f64;
    for (k, wk) in w.iter().enumerate() {
        let wk = wk.f64();
        if wk > 0.0 {
            top = top.max(-v(k).f64());
            total_w += wk;
        }
    }
    if !top.is_finite() || total_w <= 0.0 {
        // every input −∞ (or +∞, or no positive weight): nothing to average
        return T::of(if total_w > 0.0 {
            top
        } else {
            f64::NEG_INFINITY
        });
    }
    if t == 0.0 {
        let mean: f64 = w
            .iter()
            .enumerate()
            .filter(|(_, wk)| wk.f64() > 0.0)
            .map(|(k, wk)| wk.f64() * -v(k).f64())
            .sum();
        return T::of(mean / total_w);
    }
    let (mut below, mut sum) = (0.0f64, 0.0f64);
    for (k, wk) in w.iter().enumerate() {
        let wk = wk.f64();
        if wk > 0.0 {
            let d = t * (-v(k).f64() - top);
            below += wk * d.exp_m1();
            sum += wk * d.exp();
        }
    }
    let s = below / total_w;
    // log1p keeps the precision of a mean close to the top; far below it (s near −1) the
    // plain sum is the accurate one.
    let log_mean = if s > -0.5 {
        s.ln_1p()
    } else {
        (sum / total_w).ln()
    };
    T::of(top + log_mean / t)
}
