//! The kernel choices of a [`CudaBackend`](super::CudaBackend) that depend on the GPU or
//! the shape: each default is what the backend runs where the GPU allows it, and each
//! other value is a path the backend takes on other GPUs or shapes, so that the tests run
//! it on theirs. Not part of the documented API: [`CudaBackend::new`](super::CudaBackend::new)
//! runs the defaults, and the library never reads the environment.

/// Kernel choices of a backend (see the module documentation).
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Run `Backend::iterate` as one fused launch when a problem fits in one block's
    /// shared memory (`false`: the per-half-step kernels that larger problems take).
    pub fused: bool,
    /// Largest thread-block cluster per problem of the fused small-problem kernel when few
    /// problems would leave most SMs idle (each CTA computes a share of every half-step's
    /// outputs); ≤ 1 keeps one CTA per problem, as on GPUs before Hopper.
    pub fused_cluster: usize,
    /// CTAs (one thread-block cluster) per problem in the fused barycenter kernel on small
    /// grids, which runs every iteration in one launch; 0 runs the kernels one by one, as on
    /// GPUs before Hopper and on larger grids. 16 is a non-portable size: where the GPU
    /// cannot schedule it, the largest smaller power of two that it can.
    pub bary_cluster: usize,
    /// Single-product tensor-core half-steps (F16, TF32) with a streamed output tile take
    /// stages of 256 reduced points, 64×64 products per warp, where the GPU's shared memory
    /// holds their 100 KiB; `false` gives the 128-point stage (64×32) of GPUs with less.
    pub wide_stream: bool,
    /// The tensor-core half-steps of `|x − y|²` by warpgroup MMAs (`wgmma.mma_async`,
    /// Hopper's sm_90a) where the kernels are compiled for sm_90a; `false` gives the
    /// `mma.sync` kernels of the other GPUs.
    pub warpgroup_mma: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            fused: true,
            fused_cluster: 8,
            bary_cluster: 16,
            wide_stream: true,
            warpgroup_mma: true,
        }
    }
}

impl Tuning {
    /// These choices on a GPU of compute capability `major` and NVRTC target `arch`:
    /// clusters need 9.0 (Hopper) and are capped at 16; warpgroup MMAs need sm_90a.
    pub(in crate::backend::cuda) fn for_device(mut self, major: i32, arch: &str) -> Tuning {
        let hopper = major >= 9;
        self.bary_cluster = if hopper { self.bary_cluster.min(16) } else { 0 };
        self.fused_cluster = if hopper {
            self.fused_cluster.min(16)
        } else {
            1
        };
        self.warpgroup_mma &= arch == "sm_90a";
        self
    }
}

/// How the small-d point-cloud half-step (`d ≤ 16`, cuda/pointcloud.cu) forms its
/// exponents `v = (other_k − c_lk)·s`, `s = log2(e)/ε`; chosen per call by
/// [`CloudForm::choose`] (not public API: kernels may change).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloudForm {
    /// From the coordinate differences: `d` subtractions and `d` FMAs per pair, any metric
    /// and precision, accurate to the rounding of `c` itself.
    Direct,
    /// `|x − y|² = |x|² + |y|² − 2·x·y` on the centred clouds with the row term
    /// `−s·|x_l|²` taken out of the log-sum-exp: `d` FMAs per pair (f32, squared Euclidean).
    Norm,
}

/// Largest worst-case rounding error of the norm form's exponents, in natural-log units,
/// for which it is chosen: plan entries then move by at most this relative amount (the
/// bound is a worst case; tests/cuda_pointcloud_fast.rs prints the distance errors at otC,
/// ε = 0.05 on the unit cube, where the bound is 2.1e-5).
pub(in crate::backend::cuda) const NORM_FORM_MAX_ERROR: f64 = 1e-4;

impl CloudForm {
    /// The worst-case rounding error, in natural-log units, of the norm form's exponent
    /// for dimension `d`, largest squared norms `r2x`, `r2y` of the centred clouds and
    /// regularisation `eps`, in f32: each of the `d + 3` roundings (q_k, its shift, the d
    /// FMAs) is at most `u·s·(|x| + |y|)²` in base-2 units (u = 2⁻²⁴), i.e.
    /// `(d + 3)·u·(|x| + |y|)²/ε` in natural-log units.
    pub fn norm_error_bound(d: usize, r2x: f64, r2y: f64, eps: f64) -> f64 {
        let r = r2x.sqrt() + r2y.sqrt();
        (d + 3) as f64 * f64::powi(2.0, -24) * r * r / eps
    }

    /// The norm form for f32 squared-Euclidean costs whose
    /// [`norm_error_bound`](Self::norm_error_bound) is within [`NORM_FORM_MAX_ERROR`] (a
    /// NaN or infinite bound refuses it), else the direct form.
    pub(in crate::backend::cuda) fn choose(
        f32: bool,
        root: bool,
        d: usize,
        r2x: f64,
        r2y: f64,
        eps: f64,
    ) -> Self {
        let bound = CloudForm::norm_error_bound(d, r2x, r2y, eps);
        if f32 && !root && bound <= NORM_FORM_MAX_ERROR {
            CloudForm::Norm
        } else {
            CloudForm::Direct
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_gpus_get_no_clusters_and_no_warpgroup_mma() {
        let t = Tuning::default().for_device(8, "sm_86");
        assert_eq!((t.bary_cluster, t.fused_cluster), (0, 1));
        assert!(!t.warpgroup_mma && t.fused && t.wide_stream);
        let h = Tuning {
            bary_cluster: 64,
            fused_cluster: 32,
            ..Tuning::default()
        }
        .for_device(9, "sm_90a");
        assert_eq!((h.bary_cluster, h.fused_cluster), (16, 16));
        assert!(h.warpgroup_mma);
        // Blackwell compiles for its own sm_100: no warpgroup MMAs there.
        assert!(!Tuning::default().for_device(10, "sm_100").warpgroup_mma);
        assert_eq!(Tuning::default().for_device(9, "sm_90a"), Tuning::default());
    }

    #[test]
    fn the_norm_form_only_where_its_error_bound_allows() {
        // otC: centred unit cube (|x|² ≤ 3/4), d = 3, ε = 0.05: bound 2.1e-5.
        let b = CloudForm::norm_error_bound(3, 0.75, 0.75, 0.05);
        assert!(
            (b - 6.0 * 3.0 * f64::powi(2.0, -24) / 0.05).abs() < 1e-12,
            "{b:e}"
        );
        assert_eq!(
            CloudForm::choose(true, false, 3, 0.75, 0.75, 0.05),
            CloudForm::Norm
        );
        // Small ε, a cloud 1e3 away from the other, f64, |x − y| or a NaN: direct.
        assert_eq!(
            CloudForm::choose(true, false, 3, 0.75, 0.75, 1e-3),
            CloudForm::Direct
        );
        assert_eq!(
            CloudForm::choose(true, false, 3, 7.5e5, 7.5e5, 0.05),
            CloudForm::Direct
        );
        assert_eq!(
            CloudForm::choose(false, false, 3, 0.75, 0.75, 0.05),
            CloudForm::Direct
        );
        assert_eq!(
            CloudForm::choose(true, true, 3, 0.75, 0.75, 0.05),
            CloudForm::Direct
        );
        assert_eq!(
            CloudForm::choose(true, false, 3, f64::NAN, 0.75, 0.05),
            CloudForm::Direct
        );
        // d = 16 on the centred unit cube (|x|² ≤ 4): from ε ≈ 0.18 on.
        assert_eq!(
            CloudForm::choose(true, false, 16, 4.0, 4.0, 0.2),
            CloudForm::Norm
        );
        assert_eq!(
            CloudForm::choose(true, false, 16, 4.0, 4.0, 0.1),
            CloudForm::Direct
        );
    }
}
