//! The kernel registry: every compiled module (`cuda/NAME.cu`) with its source and the
//! entry points the host launches, the name of an entry point for a precision, and the
//! numbers the host shares with the kernels, read from the sources' `#define` lines.
//!
//! An entry point `base` that exists in both precisions is named `base_f32` / `base_f64`
//! ([`kernel_name`]); the registry lists each base once with the precisions it is compiled
//! for, and the backend loads every listed entry point when it starts (a missing one is an
//! error then, not at its first launch).

use crate::Real;
use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

/// The precision of a kernel instantiation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// `float`.
    F32,
    /// `double`.
    F64,
}

impl Precision {
    /// The suffix of its entry points (`"f32"`, `"f64"`).
    pub const fn suffix(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F64 => "f64",
        }
    }
}

/// A precision the CUDA kernels exist for (`f32`, `f64`).
pub trait CudaReal: Real + DeviceRepr + ValidAsZeroBits {
    /// Which of the two it is.
    const PRECISION: Precision;
}
impl CudaReal for f32 {
    const PRECISION: Precision = Precision::F32;
}
impl CudaReal for f64 {
    const PRECISION: Precision = Precision::F64;
}

/// The entry point `base` in precision `T`: `base_f32` or `base_f64` (as candle's
/// `kernel_name::<T>`).
pub fn kernel_name<T: CudaReal>(base: &str) -> String {
    format!("{base}_{}", T::PRECISION.suffix())
}

/// The precisions an entry point is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Instances {
    /// `base_f32` and `base_f64`.
    Both,
    /// `base_f32` only.
    F32,
    /// `base`, no suffix (precision-independent).
    Plain,
}
use Instances::{Both, Plain, F32};

/// A compiled module: one file `cuda/NAME.cu`, compiled by NVRTC with `cuda/common.cuh`
/// prepended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Module {
    /// Half-steps (tiled, fused), reports, marginal errors, transport costs, plans, fill,
    /// transpose.
    Sinkstep,
    /// Point-cloud costs computed on the fly.
    PointCloud,
    /// Separable grid costs and the fused grid barycenter.
    Grid,
    /// The elementwise kernels of the barycenter loop.
    Barycenter,
    /// Bistochastic projection forward and backward.
    Bistochastic,
    /// Plan mat-vecs and CG vector operations of the implicit OT gradients.
    Grad,
    /// svd3, GEMM, syrk, Frobenius norm and small elementwise kernels.
    Linalg,
    /// The plan report of a dense cost, entry by entry in f64.
    Report,
}

const SINKSTEP_SRC: &str = include_str!("../../../../cuda/sinkstep.cu");
const POINTCLOUD_SRC: &str = include_str!("../../../../cuda/pointcloud.cu");
const GRID_SRC: &str = include_str!("../../../../cuda/grid.cu");
const BARYCENTER_SRC: &str = include_str!("../../../../cuda/barycenter.cu");
const BISTOCHASTIC_SRC: &str = include_str!("../../../../cuda/bistochastic.cu");
const GRAD_SRC: &str = include_str!("../../../../cuda/grad.cu");
const LINALG_SRC: &str = include_str!("../../../../cuda/linalg.cu");
const REPORT_SRC: &str = include_str!("../../../../cuda/report.cu");
/// The shared header every module is compiled with.
pub const COMMON_SRC: &str = include_str!("../../../../cuda/common.cuh");

impl Module {
    /// Every module, in the order the backend loads them.
    pub const ALL: [Module; 8] = [
        Module::Sinkstep,
        Module::PointCloud,
        Module::Grid,
        Module::Barycenter,
        Module::Bistochastic,
        Module::Grad,
        Module::Linalg,
        Module::Report,
    ];

    /// The file name without `.cu`.
    pub const fn name(self) -> &'static str {
        match self {
            Module::Sinkstep => "sinkstep",
            Module::PointCloud => "pointcloud",
            Module::Grid => "grid",
            Module::Barycenter => "barycenter",
            Module::Bistochastic => "bistochastic",
            Module::Grad => "grad",
            Module::Linalg => "linalg",
            Module::Report => "report",
        }
    }

    /// The source text (embedded at build time).
    pub const fn source(self) -> &'static str {
        match self {
            Module::Sinkstep => SINKSTEP_SRC,
            Module::PointCloud => POINTCLOUD_SRC,
            Module::Grid => GRID_SRC,
            Module::Barycenter => BARYCENTER_SRC,
            Module::Bistochastic => BISTOCHASTIC_SRC,
            Module::Grad => GRAD_SRC,
            Module::Linalg => LINALG_SRC,
            Module::Report => REPORT_SRC,
        }
    }

    /// The entry points the host launches, by base name.
    const fn entries(self) -> &'static [(&'static str, Instances)] {
        match self {
            Module::Sinkstep => &[
                ("sinkstep_s16", Both),
                ("sinkstep_s16_factored", Both),
                ("sinkstep_s4", Both),
                ("sinkstep_b1", Both),
                ("sinkstep_finish", Both),
                ("report_s16", Both),
                ("report_b1", Both),
                ("report_sum", Both),
                ("sinkhorn_fused", Both),
                ("sinkhorn_fused8", F32),
                ("marginal_error", Both),
                ("transport_cost", Both),
                ("plan", Both),
                ("fill", Both),
                ("relax", Both),
                ("copy_block", Both),
                ("shard_softmin", Both),
                ("shard_sum", Both),
                ("relaxed_side", Both),
                ("transpose", Both),
                ("row_stats", Both),
                ("elem_log", Both),
                ("start_potential", Both),
                ("offset_rows", Both),
                ("where_empty", Both),
            ],
            Module::PointCloud => &[
                ("pc_sinkstep_d1", Both),
                ("pc_sinkstep_d2", Both),
                ("pc_sinkstep_d3", Both),
                ("pc_sinkstep_d4", Both),
                ("pc_sinkstep_d16", Both),
                ("pc_sinkstep_nf_d1", F32),
                ("pc_sinkstep_nf_d2", F32),
                ("pc_sinkstep_nf_d3", F32),
                ("pc_sinkstep_nf_d4", F32),
                ("pc_sinkstep_nf_d16", F32),
                ("pc_sinkstep_tn_d3", F32),
                ("pc_sinkstep_tn_d4", F32),
                ("pc_exp2_poly", F32),
                ("pc_rows_d4", Both),
                ("pc_rows_d16", Both),
                ("pc_adjoint_d4", Both),
                ("pc_adjoint_d16", Both),
                ("pc_reduce", Both),
                ("pc_plan", Both),
                ("pc_sinkstep_dn", Both),
                ("pc_rows_dn", Both),
                ("pc_sqnorms", Both),
                ("pc_coord_stats", Both),
                ("pc_centre_soa", Both),
                ("pc_cloud_radii", Both),
                ("pc_sinkstep_tc", F32),
                ("pc_sinkstep_tc3", F32),
                ("pc_sinkstep_h", F32),
                ("pc_sinkstep_h2", F32),
                ("pc_sinkstep_hw", F32),
                ("pc_sinkstep_h2w", F32),
                ("pc_sinkstep_tcw", F32),
                ("pc_sinkstep_hw_stream", F32),
                ("pc_sinkstep_tcw_stream", F32),
                ("pc_sinkstep_tc_stream", F32),
                ("pc_sinkstep_tc3_stream", F32),
                ("pc_sinkstep_h_stream", F32),
                ("pc_sinkstep_h2_stream", F32),
                ("pc_tc_split", F32),
            ],
            Module::Grid => &[
                ("grid_pass", Both),
                ("grid_cost_sum", Both),
                ("grid_bary_fused", Both),
            ],
            Module::Barycenter => &[
                ("bary_log_mean", Both),
                ("bary_log_power_mean", Both),
                ("bary_potential", Both),
                ("bary_spread", Both),
            ],
            Module::Bistochastic => &[
                ("bisto_fwd_n2", Both),
                ("bisto_fwd_n4", Both),
                ("bisto_fwd_n8", Both),
                ("bisto_fwd_n16", Both),
                ("bisto_fwd_n32", Both),
                ("bisto_bwd_n2", Both),
                ("bisto_bwd_n4", Both),
                ("bisto_bwd_n8", Both),
                ("bisto_bwd_n16", Both),
                ("bisto_bwd_n32", Both),
                ("bisto_fix_n2", F32),
                ("bisto_fix_n4", F32),
                ("bisto_fix_n8", F32),
                ("bisto_fix_n16", F32),
                ("bisto_fix_n32", F32),
            ],
            Module::Grad => &[
                ("grad_rows", Both),
                ("grad_cols", Both),
                ("grad_assemble", Both),
                ("grad_dot", Both),
                ("grad_scaled", Both),
                ("grad_elementwise", Both),
            ],
            Module::Linalg => &[
                ("gemm_nn", Both),
                ("gemm_nt", Both),
                ("gemm_tn", Both),
                ("gemm_tt", Both),
                ("syrk_n", Both),
                ("syrk_t", Both),
                ("svd3_c0", Both),
                ("svd3_c1", F32),
                ("svd3_c2", F32),
                ("svd3_c4", F32),
                ("svd3_c8", F32),
                ("frob_partial", Both),
                ("frob_finish", Plain),
                ("scaled_copy", Both),
                ("shift_diagonal", Both),
            ],
            Module::Report => &[
                ("report_tiles", Both),
                ("report_slices", Both),
                ("report_finish_all", Plain),
            ],
        }
    }

    /// The full names of the module's entry points.
    pub fn kernel_names(self) -> impl Iterator<Item = String> {
        self.entries().iter().flat_map(|&(base, inst)| {
            let names: &[&str] = match inst {
                Both => &["_f32", "_f64"],
                F32 => &["_f32"],
                Plain => &[""],
            };
            names.iter().map(move |suffix| format!("{base}{suffix}"))
        })
    }
}

/// The integer `V` of the line `#define NAME V` in `src`, at compile time (a missing or
/// malformed line fails the build where a constant uses it).
pub const fn define(src: &str, name: &str) -> usize {
    let [v] = define_list::<1>(src, name);
    v
}

/// The `N` integers of the line `#define NAME a, b, …` in `src`, at compile time.
pub const fn define_list<const N: usize>(src: &str, name: &str) -> [usize; N] {
    let s = src.as_bytes();
    let key = name.as_bytes();
    let mut at = 0;
    while at < s.len() {
        // `at` is the start of a line.
        if starts_with(s, at, b"#define ") && starts_with(s, at + 8, key) {
            let mut p = at + 8 + key.len();
            if p < s.len() && (s[p] == b' ' || s[p] == b'\t') {
                let mut out = [0usize; N];
                let mut k = 0;
                while k < N {
                    while p < s.len() && (s[p] == b' ' || s[p] == b'\t' || s[p] == b',') {
                        p += 1;
                    }
                    if p >= s.len() || !s[p].is_ascii_digit() {
                        panic!("a #define the host reads holds fewer integers than expected");
                    }
                    let mut v = 0usize;
                    while p < s.len() && s[p].is_ascii_digit() {
                        v = v * 10 + (s[p] - b'0') as usize;
                        p += 1;
                    }
                    out[k] = v;
                    k += 1;
                }
                while p < s.len() && (s[p] == b' ' || s[p] == b'\t') {
                    p += 1;
                }
                if p < s.len() && s[p] != b'\n' && s[p] != b'/' {
                    panic!("a #define the host reads holds more than the integers expected");
                }
                return out;
            }
        }
        while at < s.len() && s[at] != b'\n' {
            at += 1;
        }
        at += 1;
    }
    panic!("a #define the host reads is missing from its kernel source")
}

const fn starts_with(s: &[u8], at: usize, prefix: &[u8]) -> bool {
    if at + prefix.len() > s.len() {
        return false;
    }
    let mut i = 0;
    while i < prefix.len() {
        if s[at + i] != prefix[i] {
            return false;
        }
        i += 1;
    }
    true
}

// ---- The point-cloud module's streamed stage -------------------------------------------
//
// The single-product tensor-core half-steps stream their output tile in stages whose
// width the backend compiles in as it starts, from the GPU's shared memory a block
// (`CudaBackend::with_tuning`); the operations (`ops/pointcloud`) size their launches with
// the same numbers.

/// Output points per block of the tensor-core half-step.
pub(in crate::backend::cuda) const PC_TC_BL: usize =
    define(Module::PointCloud.source(), "PC_TC_BL");
/// Reduced points per stage of the tensor-core half-step with a streamed output tile, split
/// products (TF32x3, F16x2).
pub(in crate::backend::cuda) const PC_TC_BKS: usize =
    define(Module::PointCloud.source(), "PC_TC_BKS");
/// Reduced points per stage of the tensor-core half-step with a streamed output tile, single
/// products (TF32, F16).
pub(in crate::backend::cuda) const PC_TC_BKS1: usize =
    define(Module::PointCloud.source(), "PC_TC_BKS1");
/// 32-bit words (one TF32 or two f16 coordinates each) per shared chunk of the tensor-core
/// operands (their padded width is a multiple).
pub(in crate::backend::cuda) const PC_TC_DC: usize =
    define(Module::PointCloud.source(), "PC_TC_DC");

/// Shared bytes of `pc_sinkstep_tc_body` with `parts` parts an operand, `a_chunks` chunks of
/// the output tile (all of them resident, or two slots streamed), `slots` slots of reduced
/// chunks and stages of `bk` reduced points: the A chunks, the B chunks, and the potentials
/// and norms of `slots` stages.
pub(in crate::backend::cuda) fn tc_smem(
    parts: usize,
    a_chunks: usize,
    slots: usize,
    bk: usize,
    size: usize,
) -> usize {
    (parts * PC_TC_BL * PC_TC_DC * a_chunks + slots * (parts * bk * PC_TC_DC + 2 * bk)) * size
}

/// Reduced points per stage of the single-product tensor-core half-steps with a streamed
/// output tile on a GPU with `max_smem` bytes of shared memory a block: `PC_TC_BKS1` (64×64
/// products per warp) where `wide` and its layout fits, else `PC_TC_BKS` (64×32).
pub(in crate::backend::cuda) fn tc_stream_stage(wide: bool, max_smem: usize) -> usize {
    if wide && tc_smem(1, 2, 2, PC_TC_BKS1, 4) <= max_smem {
        PC_TC_BKS1
    } else {
        PC_TC_BKS
    }
}

/// The NVRTC definition that compiles stages of `stage` points into the single-product
/// streamed kernels (none for the source's own `PC_TC_BKS1`).
pub(in crate::backend::cuda) fn tc_stream_define(stage: usize) -> Option<String> {
    (stage != PC_TC_BKS1).then(|| format!("PC_TC_BKS1={stage}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_are_read_from_the_line_that_names_them() {
        let src = "// x\n#define AB 7\n#define A 3 /* three */\n#define LIST 4, 2,16\n";
        assert_eq!(define(src, "A"), 3);
        assert_eq!(define(src, "AB"), 7);
        assert_eq!(define_list::<3>(src, "LIST"), [4, 2, 16]);
    }

    #[test]
    #[should_panic(expected = "missing")]
    fn a_missing_define_is_an_error() {
        define("#define AB 7\n", "A");
    }

    #[test]
    fn entry_points_are_named_per_precision() {
        let names: Vec<String> = Module::Linalg.kernel_names().collect();
        assert!(names.contains(&"gemm_nn_f32".to_string()));
        assert!(names.contains(&"gemm_nn_f64".to_string()));
        assert!(names.contains(&"svd3_c8_f32".to_string()));
        assert!(!names.contains(&"svd3_c8_f64".to_string()));
        assert!(names.contains(&"frob_finish".to_string()));
        assert_eq!(kernel_name::<f64>("plan"), "plan_f64");
        let all: Vec<String> = Module::ALL.iter().flat_map(|m| m.kernel_names()).collect();
        let unique: std::collections::HashSet<&String> = all.iter().collect();
        assert_eq!(
            unique.len(),
            all.len(),
            "an entry point is registered twice"
        );
    }
}
