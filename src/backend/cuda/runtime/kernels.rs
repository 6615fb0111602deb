//! The kernel registry: every compiled module (`cuda/NAME.cu`) with its source and the
//! entry points the host launches, the headers the sources include, the definitions the
//! host passes to NVRTC, the name of an entry point for a precision, and the numbers the
//! host shares with the kernels, read from the sources' `#define` lines.
//!
//! An entry point `base` that exists in both precisions is named `base_f32` / `base_f64`
//! ([`kernel_name`]); the registry lists each base once with the precisions it is compiled
//! for. A module is compiled and loaded at the first launch of one of its entry points,
//! with every entry point it lists (a missing one is an error then).

use crate::Real;
use cudarc::driver::{DeviceRepr, ValidAsZeroBits};
use std::collections::HashMap;
use std::sync::OnceLock;

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

/// A compiled module: one file `cuda/NAME.cu`, compiled by NVRTC with the headers of
/// [`HEADERS`] available to its `#include` lines.
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
    /// Batched assignment problems by the auction algorithm (exact minibatch OT).
    Assignment,
    /// 1-D and sliced Wasserstein: projections, segmented sorts, the merge on the line.
    Sliced,
}

const SINKSTEP_SRC: &str = include_str!("../../../../cuda/sinkstep.cu");
const POINTCLOUD_SRC: &str = include_str!("../../../../cuda/pointcloud.cu");
const GRID_SRC: &str = include_str!("../../../../cuda/grid.cu");
const BARYCENTER_SRC: &str = include_str!("../../../../cuda/barycenter.cu");
const BISTOCHASTIC_SRC: &str = include_str!("../../../../cuda/bistochastic.cu");
const GRAD_SRC: &str = include_str!("../../../../cuda/grad.cu");
const LINALG_SRC: &str = include_str!("../../../../cuda/linalg.cu");
const REPORT_SRC: &str = include_str!("../../../../cuda/report.cu");
const ASSIGNMENT_SRC: &str = include_str!("../../../../cuda/assignment.cu");
const SLICED_SRC: &str = include_str!("../../../../cuda/sliced.cu");
const COMMON_SRC: &str = include_str!("../../../../cuda/common.cuh");

/// The text of the file `cuda/NAME`, embedded at build time.
macro_rules! cuda_file {
    ($name:literal) => {
        include_str!(concat!("../../../../cuda/", $name))
    };
}

/// The headers a kernel source may include, by name: `common.cuh`, and the parts of the
/// modules kept in several files (by kernel family). NVRTC has no include path here, so the
/// host hands it their text.
pub const HEADERS: [(&str, &str); 11] = [
    ("common.cuh", COMMON_SRC),
    ("sinkstep_tiled.cuh", cuda_file!("sinkstep_tiled.cuh")),
    ("sinkstep_fused.cuh", cuda_file!("sinkstep_fused.cuh")),
    ("sinkstep_plans.cuh", cuda_file!("sinkstep_plans.cuh")),
    ("pointcloud_fma.cuh", cuda_file!("pointcloud_fma.cuh")),
    ("pointcloud_anyd.cuh", cuda_file!("pointcloud_anyd.cuh")),
    (
        "pointcloud_entries.cuh",
        cuda_file!("pointcloud_entries.cuh"),
    ),
    ("pointcloud_mma.cuh", cuda_file!("pointcloud_mma.cuh")),
    ("pointcloud_tc.cuh", cuda_file!("pointcloud_tc.cuh")),
    ("pointcloud_wg.cuh", cuda_file!("pointcloud_wg.cuh")),
    ("linalg_mma.cuh", cuda_file!("linalg_mma.cuh")),
];

/// The Sinkhorn module's source and the parts it includes: the text its numbers are read
/// from ([`Module::text`]).
const SINKSTEP_TEXT: &str = concat!(
    cuda_file!("sinkstep.cu"),
    cuda_file!("sinkstep_tiled.cuh"),
    cuda_file!("sinkstep_fused.cuh"),
    cuda_file!("sinkstep_plans.cuh"),
);

/// The point-cloud module's source and the parts it includes ([`Module::text`]).
const POINTCLOUD_TEXT: &str = concat!(
    cuda_file!("pointcloud.cu"),
    cuda_file!("pointcloud_fma.cuh"),
    cuda_file!("pointcloud_anyd.cuh"),
    cuda_file!("pointcloud_entries.cuh"),
    cuda_file!("pointcloud_mma.cuh"),
    cuda_file!("pointcloud_tc.cuh"),
    cuda_file!("pointcloud_wg.cuh"),
);

/// The linear-algebra module's source and its tensor-core part ([`Module::text`]).
const LINALG_TEXT: &str = concat!(cuda_file!("linalg.cu"), cuda_file!("linalg_mma.cuh"));

impl Module {
    /// Every module (in the order of [`Module::index`]).
    pub const ALL: [Module; 10] = [
        Module::Sinkstep,
        Module::PointCloud,
        Module::Grid,
        Module::Barycenter,
        Module::Bistochastic,
        Module::Grad,
        Module::Linalg,
        Module::Report,
        Module::Assignment,
        Module::Sliced,
    ];

    /// The module's place in [`Module::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

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
            Module::Assignment => "assignment",
            Module::Sliced => "sliced",
        }
    }

    /// The module's whole text: its source and the parts it includes (the Sinkhorn,
    /// point-cloud and linear-algebra modules), in order. [`define`] reads the numbers shared with the host here.
    pub const fn text(self) -> &'static str {
        match self {
            Module::Sinkstep => SINKSTEP_TEXT,
            Module::PointCloud => POINTCLOUD_TEXT,
            Module::Linalg => LINALG_TEXT,
            _ => self.source(),
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
            Module::Assignment => ASSIGNMENT_SRC,
            Module::Sliced => SLICED_SRC,
        }
    }

    /// The entry points the host launches, by base name.
    const fn entries(self) -> &'static [(&'static str, Instances)] {
        match self {
            Module::Sinkstep => &[
                ("sinkstep_s16_factored", Both),
                ("sinkstep_s4", Both),
                ("sinkstep_b1", Both),
                ("sinkstep_finish", Both),
                ("report_s16", Both),
                ("report_b1", Both),
                ("report_sum", Both),
                ("sinkhorn_fused", Both),
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
                ("pc_sinkstep_nf_d16", F32),
                ("pc_sinkstep_tn_d3", F32),
                ("pc_sinkstep_tn_d4", F32),
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
                ("gemm_tf32_nn", Plain),
                ("gemm_tf32_nt", Plain),
                ("gemm_tf32_tn", Plain),
                ("gemm_tf32_tt", Plain),
                ("gemm_tf32x3_nn", Plain),
                ("gemm_tf32x3_nt", Plain),
                ("gemm_tf32x3_tn", Plain),
                ("gemm_tf32x3_tt", Plain),
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
                ("report_cloud_tiles", F32),
            ],
            Module::Assignment => &[("auction_dense", Both), ("auction_points", Both)],
            Module::Sliced => &[
                ("sw_project", Plain),
                ("sw_sort_tiles", Plain),
                ("sw_merge_tiles", Plain),
                ("sw_merge_step", Plain),
                ("sw_cumulate", Plain),
                ("sw_line", Plain),
                ("sw_sum_rows", Plain),
                ("sw_grad_points", Plain),
            ],
        }
    }

    /// The NVRTC definitions (`NAME=VALUE`) the host compiles the module with, on a GPU
    /// whose single-product streamed tensor-core stage is `tc_stream_stage` points
    /// ([`tc_stream_stage`]). Every definition the host passes is made here.
    pub fn host_defines(self, tc_stream_stage: usize) -> Vec<String> {
        match self {
            Module::PointCloud => tc_stream_define(tc_stream_stage).into_iter().collect(),
            _ => Vec::new(),
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

/// The module that holds entry point `name` (a full name: `plan_f32`), if any.
pub fn module_of(name: &str) -> Option<Module> {
    static BY_NAME: OnceLock<HashMap<String, Module>> = OnceLock::new();
    BY_NAME
        .get_or_init(|| {
            Module::ALL
                .iter()
                .flat_map(|&m| m.kernel_names().map(move |k| (k, m)))
                .collect()
        })
        .get(name)
        .copied()
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
// width the backend compiles in ([`Module::host_defines`]), from the GPU's shared memory a
// block; the operations (`ops/pointcloud`) size their launches with the same numbers.

/// Output points per block of the tensor-core half-step.
pub(in crate::backend::cuda) const PC_TC_BL: usize = define(Module::PointCloud.text(), "PC_TC_BL");
/// Reduced points per stage of the tensor-core half-step with a streamed output tile, split
/// products (TF32x3, F16x2).
pub(in crate::backend::cuda) const PC_TC_BKS: usize =
    define(Module::PointCloud.text(), "PC_TC_BKS");
/// Reduced points per stage of the tensor-core half-step with a streamed output tile, single
/// products (TF32, F16).
pub(in crate::backend::cuda) const PC_TC_BKS1: usize =
    define(Module::PointCloud.text(), "PC_TC_BKS1");
/// 32-bit words (one TF32 or two f16 coordinates each) per shared chunk of the tensor-core
/// operands (their padded width is a multiple).
pub(in crate::backend::cuda) const PC_TC_DC: usize = define(Module::PointCloud.text(), "PC_TC_DC");

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
        assert_eq!(module_of("plan_f64"), Some(Module::Sinkstep));
        assert_eq!(module_of("gemm_nn_f32"), Some(Module::Linalg));
        assert_eq!(module_of("gemm_nn"), None);
        for (i, m) in Module::ALL.iter().enumerate() {
            assert_eq!(m.index(), i);
        }
        let all: Vec<String> = Module::ALL.iter().flat_map(|m| m.kernel_names()).collect();
        let unique: std::collections::HashSet<&String> = all.iter().collect();
        assert_eq!(
            unique.len(),
            all.len(),
            "an entry point is registered twice"
        );
    }

    /// Every `#include "NAME"` of a kernel source or header names a header the host hands
    /// to NVRTC, and every registered entry point is named in its module's text.
    #[test]
    fn includes_and_entry_points_are_in_the_sources() {
        let texts = Module::ALL
            .iter()
            .map(|m| m.source())
            .chain(HEADERS.iter().map(|&(_, t)| t));
        for text in texts {
            for line in text.lines() {
                if let Some(rest) = line.trim().strip_prefix("#include") {
                    let name = rest.trim().trim_matches('"');
                    assert!(
                        HEADERS.iter().any(|&(n, _)| n == name),
                        "{name} is included but not handed to NVRTC"
                    );
                }
            }
        }
        // A module's text holds every part its source includes.
        for m in Module::ALL {
            for line in m.source().lines() {
                if let Some(rest) = line.trim().strip_prefix("#include") {
                    let name = rest.trim().trim_matches('"');
                    let (_, part) = HEADERS.iter().find(|&&(n, _)| n == name).unwrap();
                    assert!(
                        name == "common.cuh" || m.text().contains(part),
                        "{name} is missing from the text of {}.cu",
                        m.name()
                    );
                }
            }
        }
        for m in Module::ALL {
            for &(base, _) in m.entries() {
                // Or pasted from a stem and a number (`pc_sinkstep_tn_d##D`).
                let stem = base.trim_end_matches(|c: char| c.is_ascii_digit());
                assert!(
                    m.text().contains(base) || m.text().contains(&format!("{stem}##")),
                    "{base} is registered but not in {}.cu",
                    m.name()
                );
            }
        }
    }

    /// The kernels have no build-time hooks except the definitions the host passes: every
    /// `#ifndef NAME` names a definition of [`Module::host_defines`] (on a GPU whose
    /// streamed stage is not the source's own).
    #[test]
    fn the_only_build_hooks_are_the_host_definitions() {
        for m in Module::ALL {
            let passed = m.host_defines(PC_TC_BKS);
            for line in m.text().lines() {
                if let Some(name) = line.trim().strip_prefix("#ifndef ") {
                    let name = name.trim();
                    assert!(
                        passed.iter().any(|d| d.split('=').next() == Some(name)),
                        "{}.cu: #ifndef {name} is not a definition the host passes",
                        m.name()
                    );
                }
            }
        }
    }
}
