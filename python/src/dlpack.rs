//! A DLPack reader: the CUDA tensors of another library (torch, CuPy, JAX...) borrowed in
//! place through the DLPack protocol, their device memory used without a copy.
//!
//! A tensor argument is a `"dltensor"` capsule (`torch.utils.dlpack.to_dlpack(t)`, or
//! `t.__dlpack__(stream=...)`) or an object with `__dlpack__` and `__dlpack_device__`, whose
//! capsule is taken here with the caller's stream (the producer orders its work before that
//! stream: [`CudaCall::stream_arg`]). Taking a capsule renames it `"used_dltensor"` and
//! makes this module the owner of its `DLManagedTensor`, whose deleter [`DlTensor`] calls
//! once, when dropped (after the call has queued its work: the producer's stream-ordered
//! allocator keeps the memory until the stream is past it).

use std::ffi::{c_void, CStr};
use std::ptr::NonNull;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict};

/// `DLDevice`.
#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

/// `DLDataType`: `code` (0 int, 1 uint, 2 float, 4 bfloat, 5 complex, 6 bool), `bits`,
/// `lanes`.
#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor`: `strides` null for a compact row-major tensor; the first element at
/// `data + byte_offset`.
#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

/// `DLManagedTensor` (the unversioned capsule's payload).
#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

const CAPSULE: &CStr = c"dltensor";
const USED_CAPSULE: &CStr = c"used_dltensor";

/// `kDLCPU`, `kDLCUDA`: the device types named here (others by number).
const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;

/// A device as DLPack names it, for messages: `cpu`, `cuda:N`, ...
fn device_name(device_type: i32, id: i32) -> String {
    match device_type {
        DL_CPU => "cpu".into(),
        DL_CUDA => format!("cuda:{id}"),
        3 => "cuda_host (pinned host memory)".into(),
        10 => format!("rocm:{id}"),
        13 => format!("cuda_managed:{id}"),
        t => format!("DLPack device type {t}:{id}"),
    }
}

/// The element types a tensor argument can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Element {
    F32,
    F64,
    /// Statistics words (`torch.int64`).
    I64,
}

impl Element {
    fn bytes(self) -> usize {
        match self {
            Element::F32 => 4,
            Element::F64 | Element::I64 => 8,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Element::F32 => "float32",
            Element::F64 => "float64",
            Element::I64 => "int64",
        }
    }
}

/// The element type of a `DLDataType`, or its name when it is none of [`Element`]'s.
fn element(dt: &DLDataType) -> Result<Element, String> {
    let name = match dt.code {
        0 => "int",
        1 => "uint",
        2 => "float",
        4 => "bfloat",
        5 => "complex",
        6 => "bool",
        _ => "opaque",
    };
    match (dt.code, dt.bits, dt.lanes) {
        (2, 32, 1) => Ok(Element::F32),
        (2, 64, 1) => Ok(Element::F64),
        (0, 64, 1) => Ok(Element::I64),
        (_, bits, 1) => Err(format!("{name}{bits}")),
        (_, bits, lanes) => Err(format!("{name}{bits}x{lanes}")),
    }
}

/// A tensor taken from a DLPack capsule: its device memory borrowed in place, the
/// `DLManagedTensor`'s deleter called when this is dropped. Checked when taken: one of
/// [`Element`]'s types, contiguous row-major, its first element aligned.
pub(crate) struct DlTensor {
    managed: NonNull<DLManagedTensor>,
    /// The argument's name, for messages.
    pub(crate) name: &'static str,
    /// `(DLPack device type, device id)`.
    device: (i32, i32),
    pub(crate) element: Element,
    pub(crate) shape: Vec<usize>,
    /// The first element's address (`data + byte_offset`).
    pub(crate) address: u64,
}

impl Drop for DlTensor {
    fn drop(&mut self) {
        // SAFETY: the capsule was renamed "used_dltensor" when taken, so this value is the
        // tensor's only owner and calls its deleter once, as the protocol asks.
        unsafe {
            let m = self.managed.as_ptr();
            if let Some(deleter) = (*m).deleter {
                deleter(m);
            }
        }
    }
}

impl DlTensor {
    /// The tensor of an unused `"dltensor"` capsule named `name` in messages: the capsule
    /// renamed `"used_dltensor"`, its deleter called when the result is dropped (on error
    /// too).
    pub(crate) fn from_capsule(obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<Self> {
        let capsule = obj.cast::<PyCapsule>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{name}: expected a tensor with __dlpack__ or a DLPack capsule, got {}",
                type_name(obj)
            ))
        })?;
        let ptr = capsule.as_ptr();
        // SAFETY: `ptr` is a live capsule (held by `capsule`); these calls only read it.
        let (fresh, used) = unsafe {
            (
                ffi::PyCapsule_IsValid(ptr, CAPSULE.as_ptr()) == 1,
                ffi::PyCapsule_IsValid(ptr, USED_CAPSULE.as_ptr()) == 1,
            )
        };
        if !fresh {
            return Err(if used {
                PyValueError::new_err(format!(
                    "{name}: this DLPack capsule has been consumed already (a capsule is read once)"
                ))
            } else {
                PyTypeError::new_err(format!(
                    "{name}: expected a DLPack capsule named \"dltensor\", got another capsule"
                ))
            });
        }
        // SAFETY: a valid "dltensor" capsule (checked above) holds a DLManagedTensor.
        let raw = unsafe { ffi::PyCapsule_GetPointer(ptr, CAPSULE.as_ptr()) };
        let managed =
            NonNull::new(raw.cast::<DLManagedTensor>()).ok_or_else(|| PyErr::fetch(obj.py()))?;
        // SAFETY: a live capsule; the new name is a static string, as the capsule keeps it.
        if unsafe { ffi::PyCapsule_SetName(ptr, USED_CAPSULE.as_ptr()) } != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        // From here this value owns the managed tensor: dropping it (on any error below too)
        // calls the deleter.
        // SAFETY: the producer's DLTensor, live until its deleter is called.
        let t = unsafe { &(*managed.as_ptr()).dl_tensor };
        let mut out = DlTensor {
            managed,
            name,
            device: (t.device.device_type, t.device.device_id),
            element: Element::F32,
            shape: Vec::new(),
            address: 0,
        };
        out.element = element(&t.dtype).map_err(|dt| {
            PyTypeError::new_err(format!("{name}: dtype {dt} is neither float32 nor float64"))
        })?;
        let ndim = usize::try_from(t.ndim)
            .map_err(|_| PyValueError::new_err(format!("{name}: ndim = {} < 0", t.ndim)))?;
        let dims: &[i64] = if ndim == 0 {
            &[]
        } else {
            // SAFETY: DLPack: `shape` holds `ndim` values.
            unsafe { std::slice::from_raw_parts(t.shape, ndim) }
        };
        out.shape = dims
            .iter()
            .map(|&s| usize::try_from(s))
            .collect::<Result<_, _>>()
            .map_err(|_| PyValueError::new_err(format!("{name}: negative shape {dims:?}")))?;
        let bytes = out
            .shape
            .iter()
            .try_fold(out.element.bytes(), |acc, &d| acc.checked_mul(d))
            .filter(|&b| isize::try_from(b).is_ok());
        if bytes.is_none() {
            return Err(PyValueError::new_err(format!(
                "{name}: shape {:?} overflows",
                out.shape
            )));
        }
        if !t.strides.is_null() && ndim > 0 {
            // SAFETY: DLPack: non-null `strides` hold `ndim` values (in elements).
            let strides = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
            if !row_major(&out.shape, strides) {
                return Err(PyValueError::new_err(format!(
                    "{name}: expected a contiguous (row-major) tensor, got strides {strides:?} \
                     for shape {:?} (call .contiguous())",
                    out.shape
                )));
            }
        }
        let address = (t.data as u64).checked_add(t.byte_offset);
        out.address = address
            .filter(|a| a % out.element.bytes() as u64 == 0)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "{name}: data at {:#x} + byte offset {} is not aligned to its {}-byte elements",
                    t.data as u64,
                    t.byte_offset,
                    out.element.bytes()
                ))
            })?;
        Ok(out)
    }

    /// The number of elements (checked when taken).
    pub(crate) fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// The byte range `[start, end)` the tensor spans.
    fn bytes(&self) -> (u64, u64) {
        let len = (self.len() * self.element.bytes()) as u64;
        (self.address, self.address.saturating_add(len))
    }

    /// A `ValueError` naming the argument: `expected {what}, got shape (…)`.
    pub(crate) fn shape_error(&self, what: &str) -> PyErr {
        PyValueError::new_err(format!(
            "{}: expected {what}, got shape {:?}",
            self.name, self.shape
        ))
    }
}

/// Whether `strides` (in elements) are those of a compact row-major tensor of `shape` (axes
/// of length 1 may carry any stride, as DLPack producers write them differently) and the
/// element count does not overflow.
fn row_major(shape: &[usize], strides: &[i64]) -> bool {
    let mut expected: usize = 1;
    for (&len, &stride) in shape.iter().zip(strides).rev() {
        if len != 1 && usize::try_from(stride).ok() != Some(expected) {
            return shape.contains(&0);
        }
        match expected.checked_mul(len) {
            Some(e) => expected = e,
            None => return false,
        }
    }
    true
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "an object".into())
}

/// The CUDA tensors of one call, taken through DLPack: all on one GPU, the floating ones of
/// one dtype (float32 or float64), each named in its errors; the outputs overlapping no
/// other tensor of the call.
pub(crate) struct CudaCall {
    stream: usize,
    tensors: Vec<(DlTensor, bool)>,
    first_float: Option<usize>,
}

impl CudaCall {
    /// A call launching on `stream` (a `CUstream` as an integer: torch's current stream of
    /// the tensors' GPU), which the producers of tensors passed as objects order their work
    /// before.
    pub(crate) fn new(stream: usize) -> Self {
        CudaCall {
            stream,
            tensors: Vec::new(),
            first_float: None,
        }
    }

    /// The `stream` argument of `__dlpack__` for this call's stream: DLPack's `1` for the
    /// legacy default stream (the null `CUstream`, `0`, is not a DLPack stream), else the
    /// stream itself.
    fn stream_arg(&self) -> usize {
        if self.stream == 0 {
            1
        } else {
            self.stream
        }
    }

    /// The capsule of `obj`: itself when it is one, else `obj.__dlpack__(stream=...)` for a
    /// CUDA tensor (`__dlpack_device__` checked first: the protocol passes a stream only for
    /// a device that has them).
    fn capsule<'py>(&self, obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        if obj.is_instance_of::<PyCapsule>() || !obj.hasattr("__dlpack__")? {
            return Ok(obj.clone());
        }
        let (device_type, id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
        if device_type != DL_CUDA {
            return Err(not_cuda(name, device_type, id));
        }
        let kwargs = PyDict::new(obj.py());
        kwargs.set_item("stream", self.stream_arg())?;
        obj.call_method("__dlpack__", (), Some(&kwargs))
    }

    /// Takes the tensor `obj` (a capsule or a tensor with `__dlpack__`) named `name`: a CUDA
    /// tensor of the call's GPU and `element` type (`None`: the call's floating dtype, the
    /// first one's), written when `output`. Returns its index for [`CudaCall::get`].
    fn take(
        &mut self,
        obj: &Bound<'_, PyAny>,
        name: &'static str,
        element: Option<Element>,
        output: bool,
    ) -> PyResult<usize> {
        let t = DlTensor::from_capsule(&self.capsule(obj, name)?, name)?;
        if t.device.0 != DL_CUDA {
            return Err(not_cuda(name, t.device.0, t.device.1));
        }
        if let Some((first, _)) = self.tensors.first() {
            if first.device != t.device {
                return Err(PyValueError::new_err(format!(
                    "{name}: on {}, expected {} like {}",
                    device_name(t.device.0, t.device.1),
                    device_name(first.device.0, first.device.1),
                    first.name
                )));
            }
        }
        match element {
            Some(e) if t.element != e => {
                return Err(PyTypeError::new_err(format!(
                    "{name}: dtype {}, expected {}",
                    t.element.name(),
                    e.name()
                )))
            }
            Some(_) => {}
            None => match self.first_float {
                _ if t.element == Element::I64 => {
                    return Err(PyTypeError::new_err(format!(
                        "{name}: dtype int64 is neither float32 nor float64"
                    )))
                }
                Some(k) if self.tensors[k].0.element != t.element => {
                    let first = &self.tensors[k].0;
                    return Err(PyTypeError::new_err(format!(
                        "{name}: dtype {}, expected {} like {}",
                        t.element.name(),
                        first.element.name(),
                        first.name
                    )));
                }
                Some(_) => {}
                None => self.first_float = Some(self.tensors.len()),
            },
        }
        self.tensors.push((t, output));
        Ok(self.tensors.len() - 1)
    }

    /// An input of the call's floating dtype.
    pub(crate) fn input(&mut self, obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<usize> {
        self.take(obj, name, None, false)
    }

    /// An output of the call's floating dtype (overlapping no other tensor of the call).
    pub(crate) fn output(&mut self, obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<usize> {
        self.take(obj, name, None, true)
    }

    /// An output of int64 words (statistics, scratch).
    pub(crate) fn words(&mut self, obj: &Bound<'_, PyAny>, name: &'static str) -> PyResult<usize> {
        self.take(obj, name, Some(Element::I64), true)
    }

    pub(crate) fn get(&self, k: usize) -> &DlTensor {
        &self.tensors[k].0
    }

    /// The GPU ordinal of the call's tensors (`None` before the first).
    pub(crate) fn device(&self) -> Option<usize> {
        self.tensors.first().map(|(t, _)| t.device.1 as usize)
    }

    /// Whether the call's floating tensors are float64.
    pub(crate) fn double(&self) -> bool {
        self.first_float
            .is_some_and(|k| self.tensors[k].0.element == Element::F64)
    }

    /// Checks that no output overlaps another tensor of the call (an output written while
    /// it is read, or two outputs in one place, would give wrong results silently).
    pub(crate) fn check_outputs(&self) -> PyResult<()> {
        for (k, (out, written)) in self.tensors.iter().enumerate() {
            if !*written || out.len() == 0 {
                continue;
            }
            let (s, e) = out.bytes();
            for (j, (other, _)) in self.tensors.iter().enumerate() {
                let (os, oe) = other.bytes();
                if j != k && other.len() > 0 && s < oe && os < e {
                    return Err(PyValueError::new_err(format!(
                        "{}: overlaps {} in memory (outputs must be fresh tensors)",
                        out.name, other.name
                    )));
                }
            }
        }
        Ok(())
    }
}

fn not_cuda(name: &str, device_type: i32, id: i32) -> PyErr {
    PyValueError::new_err(format!(
        "{name}: expected a CUDA tensor, got one on {}",
        device_name(device_type, id)
    ))
}

/// What [`DlTensor::from_capsule`] reads of a capsule or a tensor with `__dlpack__` (any
/// device): `(device, dtype, shape)`, the capsule consumed and its tensor released. Private:
/// the Python tests of the reader's checks call it, without a GPU.
#[pyfunction]
fn _dlpack_read(tensor: &Bound<'_, PyAny>) -> PyResult<(String, String, Vec<usize>)> {
    let capsule = if tensor.is_instance_of::<PyCapsule>() {
        tensor.clone()
    } else {
        tensor.call_method0("__dlpack__")?
    };
    let t = DlTensor::from_capsule(&capsule, "tensor")?;
    Ok((
        device_name(t.device.0, t.device.1),
        t.element.name().into(),
        t.shape.clone(),
    ))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_dlpack_read, m)?)?;
    Ok(())
}
