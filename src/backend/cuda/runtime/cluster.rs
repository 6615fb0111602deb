//! The CUDA backend as a [`Cluster`] member: one GPU a member, NCCL's collectives on each
//! member's own stream (so they queue behind its kernels, with no host synchronisation).
//! NCCL is loaded at run time, as the driver is: building needs no NCCL installed.

use super::device::{CudaBackend, CudaBuffer};
use super::kernels::{kernel_name, CudaReal};
use super::launch::Launch;
use crate::backend::cluster::{check_block, check_shards, Cluster, Collective, Member, Strided};
use crate::{Error, Result};
use cudarc::nccl::{group_end, group_start, result::NcclError, Comm, NcclType};

/// GPUs of one host as one backend, joined by NCCL (see [`Cluster`]).
///
/// ```no_run
/// use logot::{CudaCluster, Problem, SinkhornParams, SinkhornSolver};
/// let cluster = CudaCluster::with_devices(&[0, 1])?;
/// # let (mu, nu, c) = (logot::ndarray::array![1.0f32], logot::ndarray::array![1.0f32], logot::ndarray::array![[0.0f32]]);
/// let r = SinkhornSolver::new(cluster, SinkhornParams::new(0.05)).solve(&Problem::new(mu.view(), nu.view(), c.view())?)?;
/// # Ok::<(), logot::Error>(())
/// ```
pub type CudaCluster = Cluster<CudaBackend>;

impl Cluster<CudaBackend> {
    /// A cluster of the GPUs with these ordinals (distinct; rank order as given), each with
    /// the default kernels. Errors: as [`CudaBackend::with_device`] for each GPU, and
    /// [`Error::Unavailable`] when NCCL cannot be loaded.
    pub fn with_devices(ordinals: &[usize]) -> Result<Self> {
        let members = ordinals
            .iter()
            .map(|&o| CudaBackend::with_device(o))
            .collect::<Result<Vec<_>>>()?;
        Cluster::new(members)
    }
}

/// The members' NCCL communicators, one per member in rank order.
pub struct NcclGroup {
    comms: Vec<Comm>,
}

fn nccl_error(what: &str, e: NcclError) -> Error {
    Error::Cuda(format!("NCCL: {what}: {:?}", e.0))
}

impl Collective for CudaBackend {
    type Group = NcclGroup;

    fn connect(members: &[Self]) -> Result<NcclGroup> {
        let ordinals: Vec<usize> = members.iter().map(|m| m.inner.ctx.ordinal()).collect();
        for (k, o) in ordinals.iter().enumerate() {
            if ordinals[..k].contains(o) {
                return Err(Error::parameter(
                    "devices",
                    format!("{ordinals:?}"),
                    format!("GPU {o} is listed twice: each member must be a different GPU"),
                ));
            }
        }
        // cudarc panics when a library is missing; check first, and catch anything else.
        if !unsafe { cudarc::nccl::sys::is_culib_present() } {
            return Err(Error::Unavailable(
                "NCCL could not be loaded: no libnccl.so on the library path (PyTorch's CUDA \
                 wheels ship it as nvidia/nccl/lib/libnccl.so.2: link it as libnccl.so in a \
                 directory of LD_LIBRARY_PATH)"
                    .into(),
            ));
        }
        let streams = members.iter().map(|m| m.stream.clone()).collect();
        match std::panic::catch_unwind(|| Comm::from_devices(streams)) {
            Ok(Ok(comms)) => Ok(NcclGroup { comms }),
            Ok(Err(e)) => Err(nccl_error(
                &format!("creating the communicators of GPUs {ordinals:?}"),
                e,
            )),
            Err(_) => Err(Error::Unavailable(
                "NCCL could not be used: a symbol is missing from libnccl".into(),
            )),
        }
    }
}

impl<T: CudaReal + NcclType> Member<T> for CudaBackend {
    fn all_gather(
        group: &NcclGroup,
        members: &[Self],
        send: &[&CudaBuffer<T>],
        recv: &mut [CudaBuffer<T>],
    ) -> Result<()> {
        let p = members.len();
        let len = send.first().map_or(0, |s| s.len);
        if send.len() != p || recv.len() != p || group.comms.len() != p {
            return Err(Error::shape(
                "all_gather",
                "one send and one receive a member",
            ));
        }
        if let Some(r) = send
            .iter()
            .map(|s| s.len)
            .chain(recv.iter().map(|r| r.len / p))
            .find(|&l| l != len)
        {
            return Err(Error::shape(
                "all_gather",
                format!("a member sends or receives {r} values a rank, not {len}"),
            ));
        }
        if len == 0 {
            return Ok(());
        }
        group_start().map_err(|e| nccl_error("starting a group", e))?;
        let mut issued = Ok(());
        for ((comm, s), r) in group.comms.iter().zip(send).zip(recv.iter_mut()) {
            let (sv, mut rv) = (s.data.slice(0..len), r.data.slice_mut(0..len * p));
            if let Err(e) = comm.all_gather(&sv, &mut rv) {
                issued = Err(nccl_error("all-gather", e));
                break;
            }
        }
        // The group is closed even when a call failed.
        let ended = group_end()
            .map(|_| ())
            .map_err(|e| nccl_error("ending a group", e));
        issued.and(ended)
    }

    fn copy_block(
        &self,
        src: &CudaBuffer<T>,
        from: Strided,
        dst: &mut CudaBuffer<T>,
        to: Strided,
        rows: usize,
        width: usize,
    ) -> Result<()> {
        check_block("src", src.len, from, rows, width)?;
        check_block("dst", dst.len, to, rows, width)?;
        let len = rows * width;
        if len == 0 {
            return Ok(());
        }
        let size = std::mem::size_of::<T>() as u64;
        let at = |p: u64, s: Strided| p + s.offset as u64 * size;
        let cfg = Launch::linear(self.stride_blocks(len, 256, 16), 256);
        // SAFETY: copy_block(const T *src, long long src_pitch, T *dst, long long dst_pitch,
        // long long rows, long long width) reads and writes the two blocks, checked above to
        // lie inside `src` and `dst`.
        unsafe {
            self.launch(
                &kernel_name::<T>("copy_block"),
                cfg,
                (
                    at(self.ptr(&src.data), from),
                    from.pitch as i64,
                    at(self.ptr(&dst.data), to),
                    to.pitch as i64,
                    rows as i64,
                    width as i64,
                ),
            )
        }
    }

    fn shard_softmin(
        &self,
        parts: &CudaBuffer<T>,
        shards: usize,
        eps: T,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let len = out.len;
        check_shards(parts.len, shards, len)?;
        if len == 0 {
            return Ok(());
        }
        let cfg = Launch::linear(self.stride_blocks(len, 256, 16), 256);
        // SAFETY: shard_softmin(const T *parts, T *out, long long len, int shards, T eps)
        // reads shards·len values of `parts` and writes len of `out` (checked above).
        unsafe {
            self.launch(
                &kernel_name::<T>("shard_softmin"),
                cfg,
                (
                    self.ptr(&parts.data),
                    self.ptr(&out.data),
                    len as i64,
                    shards as i32,
                    eps,
                ),
            )
        }
    }

    fn shard_sum(
        &self,
        parts: &CudaBuffer<T>,
        shards: usize,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        let len = out.len;
        check_shards(parts.len, shards, len)?;
        if len == 0 {
            return Ok(());
        }
        let cfg = Launch::linear(self.stride_blocks(len, 256, 16), 256);
        // SAFETY: shard_sum(const T *parts, T *out, long long len, int shards) reads
        // shards·len values of `parts` and writes len of `out` (checked above).
        unsafe {
            self.launch(
                &kernel_name::<T>("shard_sum"),
                cfg,
                (
                    self.ptr(&parts.data),
                    self.ptr(&out.data),
                    len as i64,
                    shards as i32,
                ),
            )
        }
    }
}
