//! One way to launch a kernel: a [`Launch`] (grid, block, dynamic shared memory, and how
//! it starts: plainly, overlapping the previous kernel, or in thread-block clusters), a
//! typed argument tuple ([`KernelArgs`]), and [`CudaBackend::launch`]. Also the one error
//! context for driver calls ([`Context`]), the grid-size helper and the cluster-size probe.

use crate::{Error, Result};
use cudarc::driver::{result::DriverError, sys, DeviceRepr};
use std::ffi::c_void;

/// How a launch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// After the previous kernel in the stream has finished.
    Plain,
    /// Programmatic dependent launch (sm_90): the kernel's blocks may start while the
    /// previous kernel drains; the kernel waits (`griddepcontrol.wait`) before reading
    /// anything that kernel wrote.
    Overlap,
    /// Thread-block clusters of this many CTAs along x (sm_90).
    Cluster(u32),
}

/// Where and how a kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Blocks along x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block along x, y, z.
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, in bytes.
    pub smem: u32,
    /// How the launch starts.
    pub start: Start,
}

impl Launch {
    /// `grid` blocks of `block` threads, no dynamic shared memory, a plain start.
    pub fn new(grid: (u32, u32, u32), block: (u32, u32, u32)) -> Launch {
        Launch {
            grid,
            block,
            smem: 0,
            start: Start::Plain,
        }
    }

    /// `blocks` 1-D blocks (at least one) of `threads` threads.
    pub fn linear(blocks: u32, threads: u32) -> Launch {
        Launch::new((blocks.max(1), 1, 1), (threads, 1, 1))
    }

    /// With `bytes` of dynamic shared memory per block.
    pub fn shared(self, bytes: usize) -> Launch {
        Launch {
            smem: bytes as u32,
            ..self
        }
    }

    /// Starting as `start`.
    pub fn start(self, start: Start) -> Launch {
        Launch { start, ..self }
    }
}

/// A kernel's parameter list: a tuple of plain device values in the order of the kernel's
/// signature (device pointers as `u64`, `int` as `i32`, `long long` as `i64`, the
/// precision's scalars as `T`).
///
/// # Safety
/// `with_params` hands the callback one pointer per element, each to that element.
pub unsafe trait KernelArgs {
    /// Call `f` with the array of pointers to the parameters, as `cuLaunchKernel` reads it.
    fn with_params<R>(&mut self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R;
}

macro_rules! kernel_args {
    ($($t:ident $v:ident),+) => {
        // SAFETY: one pointer per element, to that element (borrowed for the call).
        unsafe impl<$($t: DeviceRepr),+> KernelArgs for ($($t,)+) {
            fn with_params<R>(&mut self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
                let ($($v,)+) = self;
                let mut params = [$($v as *mut $t as *mut c_void),+];
                f(&mut params)
            }
        }
    };
}
kernel_args!(A a);
kernel_args!(A a, B b);
kernel_args!(A a, B b, C c);
kernel_args!(A a, B b, C c, D d);
kernel_args!(A a, B b, C c, D d, E e);
kernel_args!(A a, B b, C c, D d, E e, F f);
kernel_args!(A a, B b, C c, D d, E e, F f, G g);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p, Q q);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p, Q q, S1 r);
kernel_args!(A a, B b, C c, D d, E e, F f, G g, H h, I i, J j, K k, L l, M m, N n, O o, P p, Q q, S1 r, S2 s);

/// The most parameters a [`Join`] passes.
const JOIN_MAX: usize = 32;

/// Two parameter lists one after the other: a part several entry points share, built once,
/// joined to what each adds before or after it (`Join(head, Join(shared, tail))`).
pub struct Join<A, B>(pub A, pub B);

// SAFETY: the pointers of `A`'s elements then `B`'s, each to its element, borrowed for the
// call (both halves are borrowed while `f` runs).
unsafe impl<A: KernelArgs, B: KernelArgs> KernelArgs for Join<A, B> {
    fn with_params<R>(&mut self, f: impl FnOnce(&mut [*mut c_void]) -> R) -> R {
        let Join(a, b) = self;
        a.with_params(|pa| {
            b.with_params(|pb| {
                let n = pa.len() + pb.len();
                assert!(n <= JOIN_MAX, "{n} kernel parameters (at most {JOIN_MAX})");
                let mut all = [std::ptr::null_mut(); JOIN_MAX];
                all[..pa.len()].copy_from_slice(pa);
                all[pa.len()..n].copy_from_slice(pb);
                f(&mut all[..n])
            })
        })
    }
}

/// The error context of a driver call: `Error::Cuda("{what}: …")`, out-of-memory spelled
/// out.
pub trait Context<V> {
    /// With a fixed description of what failed.
    fn context(self, what: &str) -> Result<V>;
    /// With a description built only on failure.
    fn with_context(self, what: impl FnOnce() -> String) -> Result<V>;
}

impl<V> Context<V> for std::result::Result<V, DriverError> {
    fn context(self, what: &str) -> Result<V> {
        self.map_err(|e| cuda_error(what, e))
    }
    fn with_context(self, what: impl FnOnce() -> String) -> Result<V> {
        self.map_err(|e| cuda_error(&what(), e))
    }
}

pub(in crate::backend::cuda) fn cuda_error(what: &str, e: DriverError) -> Error {
    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        Error::Cuda(format!("{what}: out of GPU memory"))
    } else {
        Error::Cuda(format!("{what}: {e:?}"))
    }
}

/// `v` as a kernel's `int`, or an error naming `what`.
pub fn to_i32(v: usize, what: &str) -> Result<i32> {
    i32::try_from(v).map_err(|_| {
        Error::shape(
            what,
            format!("{v} exceeds the CUDA kernels' limit of {}", i32::MAX),
        )
    })
}

/// The driver's configuration of `cfg` on `stream` with one launch attribute.
pub(in crate::backend::cuda) fn driver_config(
    cfg: &Launch,
    stream: sys::CUstream,
    attr: &mut sys::CUlaunchAttribute,
) -> sys::CUlaunchConfig {
    sys::CUlaunchConfig {
        gridDimX: cfg.grid.0,
        gridDimY: cfg.grid.1,
        gridDimZ: cfg.grid.2,
        blockDimX: cfg.block.0,
        blockDimY: cfg.block.1,
        blockDimZ: cfg.block.2,
        sharedMemBytes: cfg.smem,
        hStream: stream,
        attrs: attr as *mut _,
        numAttrs: 1,
    }
}

/// The launch attribute of a clustered launch of `size` CTAs along x.
pub(in crate::backend::cuda) fn cluster_attribute(size: u32) -> sys::CUlaunchAttribute {
    // SAFETY: a plain C struct and union, valid when zeroed.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = size;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    attr
}

/// (kernel, threads, dynamic shared bytes, cluster size asked) of a cluster-size probe.
pub(in crate::backend::cuda) type ClusterKey = (String, u32, u32, usize);

#[cfg(test)]
mod tests {
    use super::*;

    /// The four parameters `(u64, i32, f32, i64)` that `args` passes.
    fn passed(args: &mut impl KernelArgs) -> (u64, i32, f32, i64) {
        args.with_params(|p| {
            assert_eq!(p.len(), 4);
            // SAFETY: the pointers point at the arguments' elements, of these types.
            unsafe {
                (
                    *(p[0] as *const u64),
                    *(p[1] as *const i32),
                    *(p[2] as *const f32),
                    *(p[3] as *const i64),
                )
            }
        })
    }

    #[test]
    fn arguments_are_passed_as_pointers_to_each_element_in_order() {
        assert_eq!(passed(&mut (1u64, -2i32, 3.5f32, 4i64)), (1, -2, 3.5, 4));
        // Joined lists: the head's elements, then the tail's, however nested.
        assert_eq!(
            passed(&mut Join((1u64,), Join((-2i32, 3.5f32), (4i64,)))),
            (1, -2, 3.5, 4)
        );
        assert_eq!(
            passed(&mut Join((1u64, -2i32, 3.5f32), (4i64,))),
            (1, -2, 3.5, 4)
        );
    }

    #[test]
    fn a_linear_launch_has_at_least_one_block() {
        let l = Launch::linear(0, 256).shared(1024).start(Start::Cluster(4));
        assert_eq!(l.grid, (1, 1, 1));
        assert_eq!(l.block, (256, 1, 1));
        assert_eq!((l.smem, l.start), (1024, Start::Cluster(4)));
    }
}
