//! Kernel strategies and build settings of a [`CudaBackend`](super::CudaBackend): the
//! defaults are what the backend runs; tests, benchmarks, examples and the command-line
//! tool may override them (from `LOGOT_CUDA_*` variables they read themselves, through
//! [`Tuning::from_vars`]) to compare kernels. Not part of the documented API: the library
//! never reads the environment, and these knobs may change with the kernels.

use std::path::PathBuf;

/// Kernel choices of a backend (see the module documentation; defaults only for users).
#[doc(hidden)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tuning {
    /// Run `Backend::iterate` as one fused launch when a problem fits in one block's
    /// shared memory.
    pub fused: bool,
    /// Lanes sharing one group of outputs in the fused small-problem kernel (a power of
    /// two ≤ 32); 0 picks about 16 reduction terms per lane.
    pub fused_lanes: usize,
    /// Let consecutive half-steps overlap their start with the previous one's end
    /// (programmatic dependent launch, Hopper and later).
    pub overlap_launches: bool,
    /// Outputs each lane of the fused small-problem kernel reduces (4 or 8; 8 is f32 only).
    pub fused_outputs: usize,
    /// CTAs (one thread-block cluster) per problem in the fused barycenter kernel on small
    /// grids, which runs every iteration in one launch; 0 disables it (kernels one by
    /// one). 16 is a non-portable size: where the GPU cannot schedule it, the largest
    /// smaller power of two that it can.
    pub bary_cluster: usize,
    /// Largest thread-block cluster per problem of the fused small-problem kernel when few
    /// problems would leave most SMs idle (each CTA computes a share of every half-step's
    /// outputs); ≤ 1 keeps one CTA per problem.
    pub fused_cluster: usize,
    /// Half-steps of 8 or more problems on a shared cost factor their exponentials where
    /// the previous result's shifts allow: `2^(p_bk − c_kj − u_b − v_j)`-terms as
    /// `A_bk·K_kj`, so a tile of BB problems × BJ outputs costs BB + BJ exponentials per
    /// reduction row and a matrix product instead of BB·BJ exponentials (cuda/sinkstep.cu,
    /// FACT). Where the shifts do not fit, those warps keep one exponential per term, about
    /// 11% slower than the kernel that `false` selects (otB on an H200 with every fit
    /// refused: 18.6 ms against 16.8 ms; factored: 8.25 ms).
    pub factored: bool,
    /// Single-product tensor-core half-steps (F16, TF32) with a streamed output tile take
    /// stages of 256 reduced points, 64×64 products per warp, where the GPU's shared memory
    /// holds their 100 KiB; `false`, or a GPU with less, 128 (64×32, the split kernels'
    /// shape). On an H200, otC1024 with F16 took 164 ms with 256 and 198 ms with 128.
    pub wide_stream: bool,
    /// The tensor-core half-steps of `|x − y|²` by warpgroup MMAs (`wgmma.mma_async`,
    /// Hopper's sm_90a) instead of `mma.sync`: F16, TF32 and F16x2 with a resident output
    /// tile (`pc_sinkstep_hw`, `_tcw`, `_h2w`), F16 and TF32 with a streamed one
    /// (`_hw_stream`, `_tcw_stream`); only where the kernels are compiled for sm_90a. On an
    /// H100, otC1024 with F16 took 87.6–87.8 ms against 159–161 with `false`, otC64 with
    /// TF32 34.4–34.5 against 57.
    pub warpgroup_mma: bool,
    /// The f32 norm-form point-cloud half-step at d = 3 and 4 (`|x − y|²` of centred
    /// clouds) by split-f16 `mma.sync` (`pc_sinkstep_tn_d*`: an exponential and an add a
    /// pair, a quarter of the exponentials on the FMA pipe) instead of d FMAs a pair
    /// (`pc_sinkstep_nf_d*`). On an H200, otC10 took 22.16–22.21 ms against the FMA
    /// kernel's 27.61 in the same run (21.70–21.73 with the stages of 1024 points).
    pub small_d_mma: bool,
    /// Print each fused launch's shape, and each point-cloud half-step's kernel, grid,
    /// split and blocks an SM, to standard error.
    pub verbose: bool,
    /// Extra `NAME=VALUE` macro definitions for NVRTC (kernel variants, e.g.
    /// `KW_UNROLL=8`, or `PC_POLY=N`: how many of the 32 exponentials of each f32 small-d
    /// point-cloud chunk (per thread) use the FMA-pipe polynomial instead of MUFU.EX2,
    /// default 0: on an H100, otC10 took 26.7 ms with 0, 28.9 ms with 2 and 28.3 ms with 4,
    /// see cuda/pointcloud.cu); part of the compiled-module cache keys.
    pub nvrtc_defines: Vec<String>,
    /// Where compiled modules are kept between processes (`None`: compiled once per
    /// process, nothing written).
    pub kernel_cache: Option<PathBuf>,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            fused: true,
            fused_lanes: 0,
            overlap_launches: true,
            fused_outputs: 4,
            bary_cluster: 16,
            fused_cluster: 8,
            factored: true,
            wide_stream: true,
            warpgroup_mma: true,
            small_d_mma: true,
            verbose: false,
            nvrtc_defines: Vec::new(),
            kernel_cache: None,
        }
    }
}

impl Tuning {
    /// The defaults overridden by the variables `var` returns (the caller's environment,
    /// read by the caller: `Tuning::from_vars(|k| std::env::var(k).ok())`):
    /// `LOGOT_CUDA_FUSED=0|1`, `LOGOT_CUDA_FUSED_LANES=G`, `LOGOT_CUDA_FUSED_OUTPUTS=4|8`,
    /// `LOGOT_CUDA_PDL=0|1`, `LOGOT_CUDA_BARY_CLUSTER=C`, `LOGOT_CUDA_FUSED_CLUSTER=C`,
    /// `LOGOT_CUDA_FACTORED=0|1`, `LOGOT_CUDA_TC_WIDE=0|1`, `LOGOT_CUDA_WGMMA=0|1`,
    /// `LOGOT_CUDA_SMALL_MMA=0|1`, `LOGOT_CUDA_VERBOSE` (set:
    /// verbose), and the build settings of [`Tuning::with_build_vars`].
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Tuning {
        let d = Tuning::default();
        let flag = |name: &str, default: bool| var(name).map_or(default, |v| v != "0");
        let number =
            |name: &str, default: usize| var(name).and_then(|v| v.parse().ok()).unwrap_or(default);
        Tuning {
            fused: flag("LOGOT_CUDA_FUSED", d.fused),
            fused_lanes: number("LOGOT_CUDA_FUSED_LANES", d.fused_lanes),
            overlap_launches: flag("LOGOT_CUDA_PDL", d.overlap_launches),
            fused_outputs: number("LOGOT_CUDA_FUSED_OUTPUTS", d.fused_outputs),
            bary_cluster: number("LOGOT_CUDA_BARY_CLUSTER", d.bary_cluster),
            fused_cluster: number("LOGOT_CUDA_FUSED_CLUSTER", d.fused_cluster),
            factored: flag("LOGOT_CUDA_FACTORED", d.factored),
            wide_stream: flag("LOGOT_CUDA_TC_WIDE", d.wide_stream),
            warpgroup_mma: flag("LOGOT_CUDA_WGMMA", d.warpgroup_mma),
            small_d_mma: flag("LOGOT_CUDA_SMALL_MMA", d.small_d_mma),
            verbose: var("LOGOT_CUDA_VERBOSE").is_some(),
            ..d
        }
        .with_build_vars(var)
    }

    /// These kernel choices with the build settings from the variables `var` returns:
    /// `LOGOT_CUDA_DEFINES="NAME=V …"` (extra NVRTC definitions) and the module cache,
    /// `LOGOT_CUDA_CACHE=DIR` (`off`: none), else `$XDG_CACHE_HOME/logot`, else
    /// `$HOME/.cache/logot`.
    pub fn with_build_vars(self, var: impl Fn(&str) -> Option<String>) -> Tuning {
        let kernel_cache = match var("LOGOT_CUDA_CACHE") {
            Some(dir) if dir == "off" => None,
            Some(dir) => Some(PathBuf::from(dir)),
            None => match var("XDG_CACHE_HOME") {
                Some(x) => Some(PathBuf::from(x).join("logot")),
                None => var("HOME").map(|h| PathBuf::from(h).join(".cache").join("logot")),
            },
        };
        Tuning {
            nvrtc_defines: var("LOGOT_CUDA_DEFINES")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect(),
            kernel_cache,
            ..self
        }
    }

    /// These choices on a GPU of compute capability `major`: clusters and programmatic
    /// dependent launch need 9.0 (Hopper); cluster sizes are capped at 16 and the fused
    /// kernel's outputs per lane are 4 or 8.
    pub(in crate::backend::cuda) fn for_device(mut self, major: i32) -> Tuning {
        let hopper = major >= 9;
        self.overlap_launches &= hopper;
        self.fused_outputs = if self.fused_outputs >= 8 { 8 } else { 4 };
        self.bary_cluster = if hopper { self.bary_cluster.min(16) } else { 0 };
        self.fused_cluster = if hopper {
            self.fused_cluster.min(16)
        } else {
            1
        };
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
/// bound is a worst case; the measured distance errors at otC, ε = 0.05 on the unit cube,
/// where the bound is 2.1e-5, are printed by tests/cuda_pointcloud_fast.rs).
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
    use std::collections::HashMap;

    fn from(vars: &[(&str, &str)]) -> Tuning {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Tuning::from_vars(|k| map.get(k).cloned())
    }

    #[test]
    fn no_variables_give_the_defaults_without_a_cache() {
        assert_eq!(from(&[]), Tuning::default());
    }

    #[test]
    fn variables_override_each_choice() {
        let t = from(&[
            ("LOGOT_CUDA_FUSED", "0"),
            ("LOGOT_CUDA_FUSED_LANES", "8"),
            ("LOGOT_CUDA_FUSED_OUTPUTS", "8"),
            ("LOGOT_CUDA_PDL", "0"),
            ("LOGOT_CUDA_BARY_CLUSTER", "4"),
            ("LOGOT_CUDA_FUSED_CLUSTER", "2"),
            ("LOGOT_CUDA_FACTORED", "0"),
            ("LOGOT_CUDA_TC_WIDE", "0"),
            ("LOGOT_CUDA_WGMMA", "0"),
            ("LOGOT_CUDA_SMALL_MMA", "0"),
            ("LOGOT_CUDA_VERBOSE", ""),
            ("LOGOT_CUDA_DEFINES", "KW_UNROLL=8  FIT_SPREAD=-1"),
            ("HOME", "/h/u"),
        ]);
        assert!(!t.fused && !t.overlap_launches && !t.factored && !t.wide_stream && t.verbose);
        assert!(!t.warpgroup_mma && !t.small_d_mma);
        assert_eq!(
            (
                t.fused_lanes,
                t.fused_outputs,
                t.bary_cluster,
                t.fused_cluster
            ),
            (8, 8, 4, 2)
        );
        assert_eq!(t.nvrtc_defines, ["KW_UNROLL=8", "FIT_SPREAD=-1"]);
        assert_eq!(t.kernel_cache, Some(PathBuf::from("/h/u/.cache/logot")));
    }

    #[test]
    fn the_cache_location_follows_the_variables_in_order() {
        let xdg = from(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(xdg.kernel_cache, Some(PathBuf::from("/x/logot")));
        let own = from(&[("LOGOT_CUDA_CACHE", "/c"), ("XDG_CACHE_HOME", "/x")]);
        assert_eq!(own.kernel_cache, Some(PathBuf::from("/c")));
        let off = from(&[("LOGOT_CUDA_CACHE", "off"), ("HOME", "/h")]);
        assert_eq!(off.kernel_cache, None);
        // Build settings only: the kernel choices stay as given.
        let own = Tuning {
            factored: false,
            ..Tuning::default()
        }
        .with_build_vars(|k| (k == "LOGOT_CUDA_FACTORED" || k == "HOME").then(|| "1".into()));
        assert!(!own.factored);
        assert_eq!(own.kernel_cache, Some(PathBuf::from("1/.cache/logot")));
    }

    #[test]
    fn older_gpus_get_no_clusters_and_no_overlap() {
        let t = Tuning::default().for_device(8);
        assert!(!t.overlap_launches);
        assert_eq!((t.bary_cluster, t.fused_cluster), (0, 1));
        let h = Tuning {
            bary_cluster: 64,
            fused_outputs: 5,
            ..Tuning::default()
        }
        .for_device(9);
        assert!(h.overlap_launches);
        assert_eq!(
            (h.bary_cluster, h.fused_cluster, h.fused_outputs),
            (16, 8, 4)
        );
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
