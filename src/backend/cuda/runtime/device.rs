//! The device: a CUDA context (the device's primary one) and the stream the backend
//! launches on (its own, or a caller's: [`CudaBackend::on_stream`]), the kernel modules,
//! each compiled and loaded at the first launch of one of its entry points, the device's
//! limits and the backend's tuning; buffers (the backend's own, or a caller's memory:
//! [`CudaBackend::borrow_buffer`]), allocation and copies.

use super::kernels::{kernel_name, module_of, tc_stream_stage, CudaReal, Module};
use super::launch::{
    cluster_attribute, driver_config, ClusterKey, Context, KernelArgs, Launch, Start,
};
use super::nvrtc;
use super::tuning::Tuning;
use crate::{Error, Result};
use cudarc::driver::{
    result as driver, sys, CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr,
};
use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// The entry points of one loaded module, by full name.
type Functions = HashMap<String, CudaFunction>;

pub(in crate::backend::cuda) struct Inner {
    pub ctx: Arc<CudaContext>,
    /// Each module's entry points (by [`Module::index`]), compiled and loaded at the first
    /// launch of one of them.
    modules: [OnceLock<Functions>; Module::ALL.len()],
    /// Held while a module is compiled and loaded, so that threads launching its kernels
    /// at once compile it once.
    loading: Mutex<()>,
    /// The NVRTC target of this GPU (`sm_90a`, `sm_89`, …).
    arch: String,
    /// Where compiled modules are kept between processes (`None`: once per process).
    kernel_cache: Option<PathBuf>,
    pub device: String,
    pub sm_count: usize,
    /// Opt-in shared memory per block, in bytes.
    pub max_smem: usize,
    /// Reduced points per stage of the single-product tensor-core half-steps with a
    /// streamed output tile, as compiled for this GPU.
    pub tc_stream_stage: usize,
    /// The tuning, as this device supports it ([`Tuning::for_device`]).
    pub tuning: Tuning,
    /// Whether consecutive half-steps may start while the previous one drains
    /// (programmatic dependent launch: Hopper and later).
    pub overlap_launches: bool,
    /// Cluster sizes found schedulable ([`CudaBackend::cluster_size`]).
    pub cluster_sizes: Mutex<HashMap<ClusterKey, usize>>,
}

/// Computes on an NVIDIA GPU through the CUDA driver API. Cheap to clone (shares the
/// context, stream and loaded kernels). Everything runs in order on one stream: the
/// backend's own, or a caller's ([`CudaBackend::on_stream`]).
#[derive(Clone)]
pub struct CudaBackend {
    pub(in crate::backend::cuda) inner: Arc<Inner>,
    /// The stream every launch, allocation, copy and free of this backend goes to.
    pub(in crate::backend::cuda) stream: Arc<CudaStream>,
}

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CudaBackend({}, {} SMs)",
            self.inner.device, self.inner.sm_count
        )
    }
}

/// A 1-D array of `T` in GPU memory: the backend's own (freed, stream-ordered, on drop) or
/// a caller's ([`CudaBackend::borrow_buffer`], never freed by logot).
pub struct CudaBuffer<T> {
    pub(in crate::backend::cuda) data: ManuallyDrop<CudaSlice<T>>,
    pub(in crate::backend::cuda) len: usize,
    /// Memory of the caller's: dropping the buffer forgets it instead of freeing it.
    borrowed: bool,
}

impl<T> CudaBuffer<T> {
    /// The backend's own buffer over the first `len` elements of `data`.
    pub(in crate::backend::cuda) fn new(data: CudaSlice<T>, len: usize) -> Self {
        CudaBuffer {
            data: ManuallyDrop::new(data),
            len,
            borrowed: false,
        }
    }

    /// Whether the memory is the caller's ([`CudaBackend::borrow_buffer`]).
    pub fn is_borrowed(&self) -> bool {
        self.borrowed
    }
}

impl<T> Drop for CudaBuffer<T> {
    fn drop(&mut self) {
        // SAFETY: `data` is not used after this point.
        let data = unsafe { ManuallyDrop::take(&mut self.data) };
        if self.borrowed {
            // Forget the caller's memory (no free; event tracking is off, so no event
            // waits are queued either).
            let _ = data.leak();
        } else {
            drop(data);
        }
    }
}

impl<T> CudaBuffer<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T> std::fmt::Debug for CudaBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBuffer(len {})", self.len)
    }
}

impl CudaBackend {
    /// The first GPU (ordinal 0). Each kernel module is compiled by NVRTC at the first
    /// launch of one of its kernels, once per process (see
    /// [`CudaBackend::with_kernel_cache`] to keep them between processes).
    pub fn new() -> Result<Self> {
        Self::with_device(0)
    }

    /// The GPU with this ordinal. Errors: [`Error::Unavailable`] when the CUDA driver or
    /// NVRTC cannot be loaded or there is no such GPU; [`Error::Cuda`] when a driver call
    /// fails. A kernel module that fails to compile or load is an [`Error::Cuda`] naming
    /// it, from the first call that launches one of its kernels.
    pub fn with_device(ordinal: usize) -> Result<Self> {
        Self::with_tuning(ordinal, Tuning::default(), None)
    }

    /// The GPU with this ordinal, keeping its compiled kernel modules as CUBIN files in
    /// `dir` (created if missing; one file per module, architecture and crate version), so
    /// that later processes load them instead of compiling them again. A cache that cannot
    /// be written is skipped. Errors as [`CudaBackend::with_device`].
    pub fn with_kernel_cache(ordinal: usize, dir: impl Into<PathBuf>) -> Result<Self> {
        Self::with_tuning(ordinal, Tuning::default(), Some(dir.into()))
    }

    /// The GPU with this ordinal, explicit kernel choices (not public API; see [`Tuning`])
    /// and, with `kernel_cache`, compiled modules kept there as
    /// [`CudaBackend::with_kernel_cache`] does.
    #[doc(hidden)]
    pub fn with_tuning(
        ordinal: usize,
        tuning: Tuning,
        kernel_cache: Option<PathBuf>,
    ) -> Result<Self> {
        // cudarc panics when a library is missing; check first, and catch anything else.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::Unavailable(
                "no CUDA driver: libcuda could not be loaded".into(),
            ));
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(Error::Unavailable(
                "no NVRTC: libnvrtc could not be loaded (put the CUDA toolkit's lib64 on LD_LIBRARY_PATH)".into(),
            ));
        }
        match std::panic::catch_unwind(|| Self::start(ordinal, tuning, kernel_cache)) {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                Err(Error::Unavailable(format!(
                    "the CUDA driver could not be used: {msg}"
                )))
            }
        }
    }

    fn start(ordinal: usize, tuning: Tuning, kernel_cache: Option<PathBuf>) -> Result<Self> {
        let count = match CudaContext::device_count() {
            Ok(c) => c,
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => 0,
            Err(e) => return Err(Error::Unavailable(format!("no usable CUDA driver: {e:?}"))),
        };
        if count <= 0 {
            return Err(Error::Unavailable("no CUDA GPU found".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::parameter(
                "ordinal",
                ordinal,
                format!("there are {count} CUDA devices"),
            ));
        }
        let ctx = CudaContext::new(ordinal).context("creating the context")?;
        // One stream per backend and every launch in order: cudarc's per-buffer event
        // tracking (made for several streams) would only add driver calls.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().context("creating a stream")?;
        let (major, minor) = ctx
            .compute_capability()
            .context("reading the compute capability")?;
        if major < 8 {
            return Err(Error::Unavailable(format!(
                "GPU compute capability {major}.{minor} is below 8.0 (the kernels use cp.async)"
            )));
        }
        let attr = |a| ctx.attribute(a).context("reading a device attribute");
        let sm_count =
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as usize;
        let max_smem =
            attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?
                as usize;
        let device = ctx.name().unwrap_or_else(|_| "CUDA GPU".into());
        // The single-product streamed stage this GPU's shared memory holds, compiled in.
        let tc_stream_stage = tc_stream_stage(tuning.wide_stream, max_smem);
        let arch = nvrtc_arch(major, minor);
        let tuning = tuning.for_device(major, &arch);
        Ok(CudaBackend {
            stream,
            inner: Arc::new(Inner {
                ctx,
                modules: std::array::from_fn(|_| OnceLock::new()),
                loading: Mutex::new(()),
                arch,
                kernel_cache,
                device,
                sm_count,
                max_smem,
                tc_stream_stage,
                tuning,
                overlap_launches: major >= 9,
                cluster_sizes: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The kernel modules this backend has compiled (or taken from a cache) and loaded so
    /// far, by file name (`sinkstep`, …): each one at the first launch of one of its
    /// kernels.
    pub fn loaded_modules(&self) -> Vec<&'static str> {
        Module::ALL
            .iter()
            .filter(|m| self.inner.modules[m.index()].get().is_some())
            .map(|m| m.name())
            .collect()
    }

    /// The GPU's name.
    pub fn device_name(&self) -> &str {
        &self.inner.device
    }

    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> usize {
        self.inner.sm_count
    }

    /// The same backend (same GPU, context and compiled kernels) launching on the caller's
    /// stream `stream`: every kernel, scratch allocation (stream-ordered), copy and free of
    /// the returned backend goes to `stream`, in order after the work already queued there,
    /// and the host waits only on that stream (`cuStreamSynchronize`) when it reads a report
    /// back; nothing synchronises the whole device. Cheap (no compilation, no driver call).
    /// This is how a framework's tensors are computed on in place (PyTorch's
    /// `torch.cuda.current_stream().cuda_stream`), together with
    /// [`CudaBackend::borrow_buffer`].
    ///
    /// # Safety
    /// `stream` must be a valid stream of this backend's context — the device's primary
    /// context, which the CUDA runtime (and so PyTorch) uses — or one of the special handles
    /// (null: the legacy default stream; `0x2`: the per-thread default stream), and must
    /// stay valid as long as the returned backend, a clone of it, or a buffer it allocated
    /// exists. logot never destroys it.
    pub unsafe fn on_stream(&self, stream: sys::CUstream) -> CudaBackend {
        CudaBackend {
            inner: self.inner.clone(),
            // SAFETY: the caller's contract above; a borrowed stream is not destroyed on drop.
            stream: unsafe { self.inner.ctx.wrap_borrowed_stream(stream) },
        }
    }

    /// The stream this backend launches on (its own, or the one of [`CudaBackend::on_stream`]).
    pub fn cu_stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    /// The ordinal of the backend's GPU.
    pub fn ordinal(&self) -> usize {
        self.inner.ctx.ordinal()
    }

    /// A buffer over `len` elements of `T` of the caller's GPU memory at `ptr`, to pass to
    /// the kernel traits ([`BistochasticKernels`](crate::backend::bistochastic::BistochasticKernels),
    /// …) as input or output without a copy. Dropping it does not free the memory.
    ///
    /// # Safety
    /// * `ptr` is the address of `len` contiguous, initialised values of `T` (row-major in the
    ///   layout the kernel documents), aligned for `T`, in memory of this backend's device
    ///   that this backend's context can address (the primary context's allocations,
    ///   including PyTorch's);
    /// * the memory stays allocated, and is neither written nor freed by anyone else, until
    ///   the work this backend queued on it has completed (the buffer dropped and the
    ///   backend's stream past that work) — work queued on the same stream before and after
    ///   is ordered with it;
    /// * a buffer passed as an output (`&mut`) is memory the caller lets logot write, and it
    ///   aliases no other buffer of the same call.
    pub unsafe fn borrow_buffer<T: CudaReal>(
        &self,
        ptr: sys::CUdeviceptr,
        len: usize,
    ) -> CudaBuffer<T> {
        // SAFETY: the caller's contract above.
        unsafe { self.borrow_raw(ptr, len) }
    }

    /// [`CudaBackend::borrow_buffer`] for 64-bit words: where the deferred bistochastic
    /// launches leave their statistics
    /// ([`BistochasticKernels::Words`](crate::backend::bistochastic::BistochasticKernels::Words);
    /// a framework's `int64` tensor), read by the caller when it chooses.
    ///
    /// # Safety
    /// As [`CudaBackend::borrow_buffer`], for `len` `u64`s (8-byte aligned; their initial
    /// values are not read).
    pub unsafe fn borrow_words(&self, ptr: sys::CUdeviceptr, len: usize) -> CudaBuffer<u64> {
        // SAFETY: the caller's contract above.
        unsafe { self.borrow_raw(ptr, len) }
    }

    /// Queue a copy of the first `len` words of `words` to the host memory at `host`, on
    /// the backend's stream, and return without waiting: how a caller collects the
    /// statistics a deferred launch left on the device when it chooses (it records an event
    /// on the same stream after this call, and reads `host` once the event has completed).
    ///
    /// # Safety
    /// `host` addresses `len` writable, 8-byte aligned `u64`s of page-locked host memory
    /// (for pageable memory the driver copies synchronously), neither read, written nor
    /// freed by anyone else until the stream is past the copy.
    pub unsafe fn queue_words_to_host(
        &self,
        words: &CudaBuffer<u64>,
        len: usize,
        host: *mut u64,
    ) -> Result<()> {
        if len > words.len {
            return Err(Error::parameter(
                "len",
                len,
                format!("the buffer holds {} words", words.len),
            ));
        }
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the caller's contract for `host`; `words` holds at least `len` words.
        unsafe {
            let dst = std::slice::from_raw_parts_mut(host, len);
            cudarc::driver::result::memcpy_dtoh_async(
                dst,
                self.ptr(&words.data),
                self.stream.cu_stream(),
            )
        }
        .context("queueing the statistics words' copy to the host")
    }

    unsafe fn borrow_raw<T: cudarc::driver::DeviceRepr>(
        &self,
        ptr: sys::CUdeviceptr,
        len: usize,
    ) -> CudaBuffer<T> {
        // SAFETY: the callers' contract; event tracking is off on this context, so the slice
        // records no events, and `CudaBuffer::drop` leaks it instead of freeing.
        let data = unsafe { self.stream.upgrade_device_ptr::<T>(ptr, len) };
        CudaBuffer {
            data: ManuallyDrop::new(data),
            len,
            borrowed: true,
        }
    }

    /// Wait for all queued work (kernel failures surface here at the latest).
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().context("kernel execution")
    }

    /// A timer on the backend's stream: CUDA events around `f`, in milliseconds of GPU time.
    pub fn time_ms<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<(R, f64)> {
        let event = || {
            self.inner
                .ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .context("creating an event")
        };
        let (start, stop) = (event()?, event()?);
        start.record(&self.stream).context("recording an event")?;
        let r = f()?;
        stop.record(&self.stream).context("recording an event")?;
        stop.synchronize().context("kernel execution")?;
        let ms = start.elapsed_ms(&stop).context("reading an event")?;
        Ok((r, ms as f64))
    }

    /// The entry point `name`, its module compiled and loaded first if this is the first
    /// launch of one of its kernels.
    pub(in crate::backend::cuda) fn func(&self, name: &str) -> Result<&CudaFunction> {
        let module = module_of(name)
            .ok_or_else(|| Error::Cuda(format!("kernel {name} is in no kernel module")))?;
        self.module(module)?.get(name).ok_or_else(|| {
            Error::Cuda(format!(
                "kernel {name} is missing from {}.cu",
                module.name()
            ))
        })
    }

    /// The entry points of `module`, compiled (or taken from the caches) and loaded at the
    /// first call; a failure is returned to that call and the next one tries again.
    fn module(&self, module: Module) -> Result<&Functions> {
        let cell = &self.inner.modules[module.index()];
        if let Some(funcs) = cell.get() {
            return Ok(funcs);
        }
        let _one_at_a_time = self
            .inner
            .loading
            .lock()
            .map_err(|_| Error::Cuda("the kernel module lock was poisoned".into()))?;
        if let Some(funcs) = cell.get() {
            return Ok(funcs);
        }
        let funcs = load_module(&self.inner, module)?;
        Ok(cell.get_or_init(|| funcs))
    }

    /// The backend's tuning (as the device supports it).
    pub(in crate::backend::cuda) fn tuning(&self) -> &Tuning {
        &self.inner.tuning
    }

    /// `len` uninitialised elements (one when `len = 0`, so every buffer has an address).
    pub(in crate::backend::cuda) fn alloc<T: CudaReal>(
        &self,
        len: usize,
        what: &str,
    ) -> Result<CudaSlice<T>> {
        self.alloc_raw::<T>(len, what, T::NAME)
    }

    /// `len` uninitialised `f64` partial sums.
    pub(in crate::backend::cuda) fn alloc_f64(
        &self,
        len: usize,
        what: &str,
    ) -> Result<CudaSlice<f64>> {
        self.alloc_raw::<f64>(len, what, "float64")
    }

    /// `len` uninitialised `i32` indices.
    pub(in crate::backend::cuda) fn alloc_i32(
        &self,
        len: usize,
        what: &str,
    ) -> Result<CudaSlice<i32>> {
        self.alloc_raw::<i32>(len, what, "int32")
    }

    /// `len` uninitialised `u64` sort keys.
    pub(in crate::backend::cuda) fn alloc_u64(
        &self,
        len: usize,
        what: &str,
    ) -> Result<CudaSlice<u64>> {
        self.alloc_raw::<u64>(len, what, "uint64")
    }

    /// `len` uninitialised `u32` indices.
    pub(in crate::backend::cuda) fn alloc_u32(
        &self,
        len: usize,
        what: &str,
    ) -> Result<CudaSlice<u32>> {
        self.alloc_raw::<u32>(len, what, "uint32")
    }

    fn alloc_raw<T: cudarc::driver::DeviceRepr>(
        &self,
        len: usize,
        what: &str,
        type_name: &str,
    ) -> Result<CudaSlice<T>> {
        let bytes = len.checked_mul(std::mem::size_of::<T>());
        if !matches!(bytes, Some(b) if b <= isize::MAX as usize) {
            return Err(Error::Cuda(format!(
                "{what}: {len} elements do not fit in memory"
            )));
        }
        // SAFETY: the memory is written before it is read (every caller's contract).
        unsafe { self.stream.alloc::<T>(len.max(1)) }.with_context(|| {
            let gib = (len * std::mem::size_of::<T>()) as f64 / (1u64 << 30) as f64;
            format!("allocating {what} ({len} {type_name} values, {gib:.3} GiB)")
        })
    }

    /// A new buffer holding `host`.
    pub(in crate::backend::cuda) fn upload_slice<T: CudaReal>(
        &self,
        host: &[T],
        what: &str,
    ) -> Result<CudaSlice<T>> {
        let mut s = self.alloc::<T>(host.len(), what)?;
        if !host.is_empty() {
            self.stream
                .memcpy_htod(host, &mut s)
                .with_context(|| format!("copying {what} to the GPU"))?;
        }
        Ok(s)
    }

    /// The first `len` elements of `s` on the host (waits for the stream).
    pub(in crate::backend::cuda) fn download_slice<
        T: cudarc::driver::DeviceRepr + Default + Clone,
    >(
        &self,
        s: &CudaSlice<T>,
        len: usize,
        what: &str,
    ) -> Result<Vec<T>> {
        // The host copy is allocated fallibly: a plan too large for the host is an error.
        let mut v = crate::alloc::filled(what, len, T::default())?;
        if len > 0 {
            self.stream
                .memcpy_dtoh(&s.slice(..len), &mut v)
                .with_context(|| format!("reading {what}"))?;
        }
        Ok(v)
    }

    /// The device address of `s`, as the kernels take it.
    pub(in crate::backend::cuda) fn ptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        s.device_ptr(&self.stream).0
    }

    /// `s[..len] = value`.
    pub(in crate::backend::cuda) fn fill_slice<T: CudaReal>(
        &self,
        s: &mut CudaSlice<T>,
        len: usize,
        value: T,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let blocks = self.stride_blocks(len, 256, 16);
        // SAFETY: `fill(T *out, long long len, T v)` writes `len` elements of `s`.
        unsafe {
            self.launch(
                &kernel_name::<T>("fill"),
                Launch::linear(blocks, 256),
                (self.ptr(s), len as i64, value),
            )
        }
    }

    /// `out[..len] = (1 − φ)·ε·lm + φ·out`, `−∞` where `lm = −∞` ([`crate::Backend::relax`]).
    pub(in crate::backend::cuda) fn relax_slice<T: CudaReal>(
        &self,
        out: &mut CudaSlice<T>,
        lm: &CudaSlice<T>,
        len: usize,
        eps: T,
        phi: T,
    ) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let blocks = self.stride_blocks(len, 256, 16);
        // SAFETY: `relax(T *out, const T *lm, long long len, T eps, T phi)` reads and writes
        // `len` elements of `out` and reads `len` of `lm` (the caller checked both lengths).
        unsafe {
            self.launch(
                &kernel_name::<T>("relax"),
                Launch::linear(blocks, 256),
                (self.ptr(out), self.ptr(lm), len as i64, eps, phi),
            )
        }
    }
}

/// The NVRTC target of a GPU of compute capability `major.minor`: its own `sm_XY`, and
/// `sm_90a` for Hopper (9.0), whose warpgroup MMAs (`wgmma`) exist only in that
/// architecture-specific target.
fn nvrtc_arch(major: i32, minor: i32) -> String {
    if (major, minor) == (9, 0) {
        "sm_90a".to_string()
    } else {
        format!("sm_{major}{minor}")
    }
}

/// Compile (or take from the caches) and load `module`, its point-cloud kernels with
/// single-product streamed stages of the GPU's `tc_stream_stage` points, and let each kernel
/// use the device's whole opt-in shared memory, less its static part.
fn load_module(inner: &Inner, module: Module) -> Result<Functions> {
    let defines = module.host_defines(inner.tc_stream_stage);
    let bin = nvrtc::cubin(module, &inner.arch, &defines, inner.kernel_cache.as_deref())?;
    let name = module.name();
    let m = inner
        .ctx
        .load_module(cudarc::nvrtc::Ptx::from_binary(bin.as_ref().clone()))
        .with_context(|| format!("loading the kernels of {name}.cu"))?;
    let opt_in = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    let static_smem = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES;
    let mut funcs = HashMap::new();
    for kernel in module.kernel_names() {
        let f = m
            .load_function(&kernel)
            .with_context(|| format!("finding kernel {kernel} in {name}.cu"))?;
        let fixed = f
            .get_attribute(static_smem)
            .with_context(|| format!("reading an attribute of {kernel}"))?;
        let bytes = (inner.max_smem as i32 - fixed).max(0);
        f.set_attribute(opt_in, bytes)
            .with_context(|| format!("raising the shared-memory limit of {kernel}"))?;
        funcs.insert(kernel, f);
    }
    Ok(funcs)
}

impl CudaBackend {
    /// Launch entry point `name` ([`kernel_name`](super::kernels::kernel_name)) with
    /// `args` under `cfg`, on the backend's stream.
    ///
    /// # Safety
    /// `args` must match the entry point's parameter list (see [`KernelArgs`]), and every
    /// buffer they point to must hold what the kernel reads and writes under `cfg`.
    pub(in crate::backend::cuda) unsafe fn launch<A: KernelArgs>(
        &self,
        name: &str,
        cfg: Launch,
        mut args: A,
    ) -> Result<()> {
        let func = self.func(name)?.cu_function();
        let stream = self.stream.cu_stream();
        self.inner
            .ctx
            .bind_to_thread()
            .context("binding the context")?;
        let (grid, block) = (cfg.grid, cfg.block);
        args.with_params(|params| {
            let mut attr = match cfg.start {
                Start::Plain => {
                    // SAFETY: a loaded function; the parameters are the caller's promise.
                    return unsafe {
                        driver::launch_kernel(func, grid, block, cfg.smem, stream, params)
                    };
                }
                Start::Overlap => {
                    // SAFETY: a plain C struct and union, valid when zeroed.
                    let mut a: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
                    a.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
                    a.value.programmaticStreamSerializationAllowed = 1;
                    a
                }
                Start::Cluster(size) => cluster_attribute(size),
            };
            let lc = driver_config(&cfg, stream, &mut attr);
            // SAFETY: a loaded function and a configuration whose attribute outlives the
            // call; the parameters are the caller's promise.
            unsafe {
                sys::cuLaunchKernelEx(&lc, func, params.as_mut_ptr(), std::ptr::null_mut())
            }
            .result()
        })
        .with_context(|| format!("launching {name}"))
    }

    /// Blocks of a grid-stride loop over `work` items of which a block takes `per_block`
    /// at a time: enough for every item, at most `waves` blocks per SM, at least one.
    pub(in crate::backend::cuda) fn stride_blocks(
        &self,
        work: usize,
        per_block: usize,
        waves: usize,
    ) -> u32 {
        work.div_ceil(per_block)
            .clamp(1, self.inner.sm_count * waves) as u32
    }

    /// The largest thread-block cluster size, among `want` and the powers of two below it,
    /// that the GPU can schedule for kernel `name` with `threads` threads and `smem` bytes of
    /// dynamic shared memory per CTA (sizes above 8 are non-portable and allowed
    /// explicitly); 1 when no cluster fits. Probed once per (kernel, threads, bytes, size).
    pub(in crate::backend::cuda) fn cluster_size(
        &self,
        name: &str,
        threads: u32,
        smem: u32,
        want: usize,
    ) -> Result<usize> {
        let key: ClusterKey = (name.to_string(), threads, smem, want);
        let poisoned = || Error::Cuda("the cluster-size cache lock was poisoned".into());
        if let Some(&c) = self
            .inner
            .cluster_sizes
            .lock()
            .map_err(|_| poisoned())?
            .get(&key)
        {
            return Ok(c);
        }
        let func = self.func(name)?.cu_function();
        self.inner
            .ctx
            .bind_to_thread()
            .context("binding the context")?;
        let mut chosen = 1;
        let mut cand = want.min(16);
        while cand >= 2 {
            // SAFETY: a valid function handle and a documented attribute.
            let allowed = unsafe {
                sys::cuFuncSetAttribute(
                    func,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                    i32::from(cand > 8),
                )
            };
            if allowed == sys::CUresult::CUDA_SUCCESS {
                let mut attr = cluster_attribute(cand as u32);
                let cfg = Launch::new((cand as u32, 1, 1), (threads, 1, 1)).shared(smem as usize);
                let lc = driver_config(&cfg, self.stream.cu_stream(), &mut attr);
                let mut clusters = 0i32;
                // SAFETY: a valid function and config whose attribute outlives the query.
                let r = unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, func, &lc) };
                if r == sys::CUresult::CUDA_SUCCESS && clusters >= 1 {
                    chosen = cand;
                    break;
                }
            }
            cand = if cand.is_power_of_two() {
                cand / 2
            } else {
                cand.next_power_of_two() / 2
            };
        }
        self.inner
            .cluster_sizes
            .lock()
            .map_err(|_| poisoned())?
            .insert(key, chosen);
        Ok(chosen)
    }
}

#[cfg(test)]
mod tests {
    use super::nvrtc_arch;

    #[test]
    fn hopper_compiles_for_its_architecture_specific_target() {
        assert_eq!(nvrtc_arch(9, 0), "sm_90a");
        assert_eq!(nvrtc_arch(8, 9), "sm_89");
        assert_eq!(nvrtc_arch(8, 0), "sm_80");
        assert_eq!(nvrtc_arch(10, 0), "sm_100");
    }
}
