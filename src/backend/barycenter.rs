//! Device kernels for Wasserstein barycenters (iterative Bregman projections, log domain).
//!
//! The barycenter loop ([`crate::barycenter`](mod@crate::barycenter)) keeps, for `P` independent problems of `K`
//! inputs each, the scaled potentials `v = −ε·log K(u)` and `εG` (both `P·K×m`) and the
//! log-barycenters `ε·log b` (`P×m`) on the device. Besides [`Backend::sinkstep`] it needs
//! the three elementwise/reduction kernels below; a backend adds them by implementing
//! this trait, without touching the algorithm.

use super::Backend;
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
}

/// Kernels of the barycenter loop (see [`BaryLayout`] for the buffer layouts).
pub trait BarycenterKernels<T: Real>: Backend<T> {
    /// Weighted geometric mean in the log domain:
    /// `bar[p,x] = −Σ_k w[p,k]·v[p,k,x]` (i.e. `ε·log b = Σ_k w_k·ε·log K(u_k)`).
    fn bary_log_mean(
        &self,
        layout: BaryLayout,
        weights: &Self::Buffer,
        v: &Self::Buffer,
        bar: &mut Self::Buffer,
    ) -> Result<()>;

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
