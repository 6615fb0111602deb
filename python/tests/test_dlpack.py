"""The DLPack reader of the compiled module: what it reads of a capsule (against the
producer's own shape and dtype), the protocol (the capsule renamed ``used_dltensor``, its
deleter called exactly once, on errors too) and the checks of the private CUDA functions
(a CPU tensor, another GPU, another dtype, a non-contiguous tensor, a wrong shape, an output
overlapping an input: each refused naming the argument, before any GPU work). The
capsules of "CUDA" tensors here are built by hand with ctypes and never reach a device:
every one of them fails a check. The last tests need a GPU and torch."""

import ctypes

import numpy as np
import pytest

import logot
from logot import _logot

# --- DLPack's C structures, to build capsules by hand --------------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]

FLOAT32, FLOAT64, INT64, INT32 = (2, 32), (2, 64), (0, 64), (0, 32)
CUDA, CPU = 2, 1
DLTENSOR = b"dltensor"  # kept alive: the capsule keeps a pointer to its name


class Producer:
    """Hand-made DLPack capsules, recording the managed tensors whose deleter was called
    (each capsule's parts are kept alive by this object)."""

    def __init__(self):
        self.keep = []
        self.deleted = []
        self.deleter = DELETER(lambda p: self.deleted.append(p))
        self.next_address = 1 << 20

    def capsule(self, shape, dtype=FLOAT32, device=(CUDA, 0), strides=None, address=None, name=DLTENSOR):
        shape_arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        strides_arr = None if strides is None else (ctypes.c_int64 * len(strides))(*strides)
        bits = dtype[1]
        if address is None:
            # Distinct, disjoint, aligned addresses: never dereferenced (every call fails a check).
            address = self.next_address
            self.next_address += (int(np.prod(shape)) * bits // 8 + 4096) // 4096 * 4096
        m = DLManagedTensor()
        m.dl_tensor.data = address
        m.dl_tensor.device = DLDevice(*device)
        m.dl_tensor.ndim = len(shape)
        m.dl_tensor.dtype = DLDataType(dtype[0], bits, 1)
        m.dl_tensor.shape = shape_arr
        m.dl_tensor.strides = strides_arr
        m.dl_tensor.byte_offset = 0
        m.deleter = self.deleter
        self.keep += [shape_arr, strides_arr, m]
        return _capsule_new(ctypes.addressof(m), name, None), ctypes.addressof(m)


@pytest.fixture
def producer():
    return Producer()


PARAMS = (0.1, 100, None, 10, None)

# --- What the reader reads ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reads_device_dtype_and_shape_as_the_producer_has_them(dtype):
    a = np.arange(24, dtype=dtype).reshape(2, 3, 4)
    assert _logot._dlpack_read(a) == ("cpu", np.dtype(dtype).name, [2, 3, 4])
    assert _logot._dlpack_read(a[1:]) == ("cpu", np.dtype(dtype).name, [1, 3, 4])
    assert _logot._dlpack_read(np.array(2.0)) == ("cpu", "float64", [])


@pytest.mark.parametrize("dtype", [np.int32, np.float16, np.complex64, np.bool_, np.uint8])
def test_another_dtype_is_refused_by_name(dtype):
    a = np.zeros((2, 3), dtype=dtype)
    name = {np.bool_: "bool8"}.get(dtype, np.dtype(dtype).name)
    with pytest.raises(TypeError, match=f"tensor: dtype {name} is neither float32 nor float64"):
        _logot._dlpack_read(a)


def test_a_non_contiguous_tensor_is_refused_with_its_strides():
    a = np.zeros((3, 4), dtype=np.float64)
    with pytest.raises(ValueError, match=r"tensor: expected a contiguous \(row-major\) tensor, got strides"):
        _logot._dlpack_read(a.T)
    with pytest.raises(ValueError, match="contiguous"):
        _logot._dlpack_read(a[:, ::2])
    # Axes of length one may carry any stride; an empty tensor has no layout to check.
    assert _logot._dlpack_read(a[:1, :])[2] == [1, 4]
    assert _logot._dlpack_read(a[:, :0])[2] == [3, 0]


def test_strides_written_out_for_a_row_major_tensor_are_accepted(producer):
    cap, _ = producer.capsule((2, 3, 4), FLOAT64, device=(CPU, 0), strides=(12, 4, 1))
    assert _logot._dlpack_read(cap) == ("cpu", "float64", [2, 3, 4])
    cap, _ = producer.capsule((2, 3, 4), FLOAT64, device=(CPU, 0), strides=(12, 1, 3))
    with pytest.raises(ValueError, match=r"strides \[12, 1, 3\] for shape \[2, 3, 4\]"):
        _logot._dlpack_read(cap)


def test_a_misaligned_address_is_refused(producer):
    cap, _ = producer.capsule((4,), FLOAT32, device=(CPU, 0), address=(1 << 20) + 2)
    with pytest.raises(ValueError, match="not aligned to its 4-byte elements"):
        _logot._dlpack_read(cap)


# --- The protocol --------------------------------------------------------------------------


def test_a_capsule_is_renamed_used_and_read_once():
    cap = np.zeros(5).__dlpack__()
    assert _capsule_valid(cap, b"dltensor") == 1
    _logot._dlpack_read(cap)
    assert _capsule_valid(cap, b"used_dltensor") == 1 and _capsule_valid(cap, b"dltensor") == 0
    with pytest.raises(ValueError, match="tensor: this DLPack capsule has been consumed already"):
        _logot._dlpack_read(cap)


def test_the_deleter_is_called_once_when_read_and_when_refused(producer):
    cap, addr = producer.capsule((2, 2), FLOAT32, device=(CPU, 0))
    _logot._dlpack_read(cap)
    assert producer.deleted == [addr]
    cap, addr = producer.capsule((2, 2), INT32, device=(CPU, 0))
    with pytest.raises(TypeError):
        _logot._dlpack_read(cap)
    assert producer.deleted[1:] == [addr]
    del cap
    assert len(producer.deleted) == 2


def test_another_capsule_or_object_is_a_type_error(producer):
    cap, _ = producer.capsule((2,), FLOAT32, name=b"something_else")
    with pytest.raises(TypeError, match='expected a DLPack capsule named "dltensor"'):
        _logot._dlpack_read(cap)
    assert producer.deleted == []  # not taken: the producer's to release
    with pytest.raises(TypeError, match=r"x: expected a tensor with __dlpack__ or a DLPack capsule, got list"):
        _logot._bistochastic_cuda([1.0], (None, None), 20, 0.0, 0, False)


# --- The CUDA functions' checks --------------------------------------------------------------


def test_a_cpu_tensor_is_refused_where_a_cuda_one_is_required():
    x, r, words = np.zeros((2, 3, 3), np.float32), np.zeros((2, 3, 3), np.float32), np.zeros(3, np.int64)
    # The tensor itself (its device is asked before its capsule) and its capsule.
    for arg in (x, x.__dlpack__()):
        with pytest.raises(ValueError, match="x: expected a CUDA tensor, got one on cpu"):
            _logot._bistochastic_cuda(arg, (r, words), 20, 0.0, 0, False)


def test_a_cpu_torch_capsule_is_refused_where_a_cuda_one_is_required():
    torch = pytest.importorskip("torch")
    cap = torch.utils.dlpack.to_dlpack(torch.zeros(2, 3, dtype=torch.float64))
    cost = torch.utils.dlpack.to_dlpack(torch.zeros(3, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="mu: expected a CUDA tensor, got one on cpu"):
        _logot._wasserstein_cuda((cap, cap, cost), None, PARAMS, (None, 10), 0)


def test_tensors_on_two_gpus_are_refused(producer):
    x, _ = producer.capsule((2, 3, 3), device=(CUDA, 0))
    r, _ = producer.capsule((2, 3, 3), device=(CUDA, 1))
    w, _ = producer.capsule((3,), INT64)
    with pytest.raises(ValueError, match="r: on cuda:1, expected cuda:0 like x"):
        _logot._bistochastic_cuda(x, (r, w), 20, 0.0, 0, False)
    # The capsules taken before the refusal are released; the one after it is untouched.
    assert len(producer.deleted) == 2


def test_mixed_dtypes_and_float_words_are_refused(producer):
    x, _ = producer.capsule((2, 3, 3), FLOAT32)
    r, _ = producer.capsule((2, 3, 3), FLOAT64)
    w, _ = producer.capsule((3,), INT64)
    with pytest.raises(TypeError, match="r: dtype float64, expected float32 like x"):
        _logot._bistochastic_cuda(x, (r, w), 20, 0.0, 0, False)
    x, _ = producer.capsule((2, 3, 3), FLOAT32)
    r, _ = producer.capsule((2, 3, 3), FLOAT32)
    w, _ = producer.capsule((3,), FLOAT32)
    with pytest.raises(TypeError, match="stats: dtype float32, expected int64"):
        _logot._bistochastic_cuda(x, (r, w), 20, 0.0, 0, False)
    x, _ = producer.capsule((2, 3, 3), INT64)
    with pytest.raises(TypeError, match="x: dtype int64 is neither float32 nor float64"):
        _logot._bistochastic_cuda(x, (r, w), 20, 0.0, 0, False)


def test_a_non_contiguous_cuda_tensor_is_refused_by_name(producer):
    mu, _ = producer.capsule((2, 3), FLOAT64)
    nu, _ = producer.capsule((2, 4), FLOAT64)
    cost, _ = producer.capsule((3, 4), FLOAT64, strides=(1, 3))
    with pytest.raises(ValueError, match=r"cost: expected a contiguous \(row-major\) tensor"):
        _logot._wasserstein_cuda((mu, nu, cost), None, PARAMS, (None, 10), 0)


def test_shapes_are_checked_against_each_other(producer):
    def dense(mu, nu, cost):
        return tuple(producer.capsule(s, FLOAT64)[0] for s in (mu, nu, cost))

    with pytest.raises(ValueError, match=r"nu: expected 2×m like mu, got shape \[3, 4\]"):
        _logot._wasserstein_cuda(dense((2, 3), (3, 4), (3, 4)), None, PARAMS, (None, 10), 0)
    with pytest.raises(ValueError, match=r"cost: expected 3×4 or 2×3×4, got shape \[4, 3\]"):
        _logot._wasserstein_cuda(dense((2, 3), (2, 4), (4, 3)), None, PARAMS, (None, 10), 0)
    plan, _ = producer.capsule((2, 3, 5), FLOAT64)
    with pytest.raises(ValueError, match=r"plan: expected shape \[2, 3, 4\], got shape \[2, 3, 5\]"):
        _logot._coupling_cuda(dense((2, 3), (2, 4), (2, 3, 4)), plan, PARAMS, 0)
    clouds = tuple(producer.capsule(s)[0] for s in ((2, 5, 3), (2, 6, 2), (2, 5), (2, 6))) + ("sqeuclidean", None)
    outs = tuple(producer.capsule(s)[0] for s in ((2, 5), (2, 6), (2, 5, 3), (2, 6, 3)))
    with pytest.raises(ValueError, match=r"y: expected 2×m×3 like x, got shape \[2, 6, 2\]"):
        _logot._point_gradients_cuda(clouds, outs, PARAMS, 0)
    clouds = tuple(producer.capsule(s)[0] for s in ((5, 3), (6, 3), (1, 5), (1, 6))) + ("sqeuclidean", None)
    outs = tuple(producer.capsule(s)[0] for s in ((1, 6, 3), (1, 6, 3)))
    with pytest.raises(ValueError, match=r"grad_x: expected shape \[1, 5, 3\], got shape \[1, 6, 3\]"):
        _logot._sinkhorn_divergence_cuda(clouds, outs, PARAMS, 0)
    x, _ = producer.capsule((2, 3, 4))
    r, _ = producer.capsule((2, 3, 4))
    w, _ = producer.capsule((3,), INT64)
    with pytest.raises(ValueError, match=r"x: expected square matrices …×n×n, got shape \[2, 3, 4\]"):
        _logot._bistochastic_cuda(x, (r, w), 20, 0.0, 0, False)
    x, _ = producer.capsule((2, 3, 3))
    r, _ = producer.capsule((2, 3, 3))
    w, _ = producer.capsule((2,), INT64)
    with pytest.raises(ValueError, match=r"stats: expected 3 int64 words or more, got shape \[2\]"):
        _logot._bistochastic_cuda(x, (r, w), 20, 0.0, 0, False)
    r, g, dx = (producer.capsule(s)[0] for s in ((2, 3, 3), (2, 4, 4), (2, 3, 3)))
    w, _ = producer.capsule((64,), INT64)
    with pytest.raises(ValueError, match=r"g: expected shape \[2, 3, 3\], got shape \[2, 4, 4\]"):
        _logot._bistochastic_backward_cuda(r, g, (dx, w), (None, 100), 0, False)


def test_an_output_overlapping_an_input_is_refused(producer):
    mu, _ = producer.capsule((2, 3), FLOAT64)
    nu, _ = producer.capsule((2, 4), FLOAT64)
    cost, _ = producer.capsule((2, 3, 4), FLOAT64, address=1 << 30)
    # The plan starts inside the cost's last row.
    plan, _ = producer.capsule((2, 3, 4), FLOAT64, address=(1 << 30) + 8 * 20)
    with pytest.raises(ValueError, match="plan: overlaps cost in memory"):
        _logot._coupling_cuda((mu, nu, cost), plan, PARAMS, 0)
    assert len(producer.deleted) == 4


# --- On a GPU ----------------------------------------------------------------------------------


def _gpu_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not logot.cuda_available():
        pytest.skip("no CUDA GPU")
    return torch


def test_cuda_tensors_themselves_are_taken_on_the_call_stream():
    """Tensors passed themselves are taken by ``__dlpack__(stream=...)``: the producer's
    stream (a side stream, busy for a while before it writes the logits) is ordered before
    the call's (the default stream), so the projection reads the finished logits: equal to
    the host-array path on the CUDA backend bit for bit."""
    torch = _gpu_torch()
    gen = torch.Generator(device="cuda").manual_seed(13)
    base = 4 * torch.rand(300, 8, 8, device="cuda", generator=gen)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    x = torch.empty_like(base)
    r = torch.empty_like(base)
    stats = torch.zeros(3, dtype=torch.int64, device="cuda")
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        x.copy_(base)
        # The call launches on the default stream (0: DLPack's 1), not the current one.
        _logot._bistochastic_cuda(x, (r, stats), 20, 0.0, 0, False)
    torch.cuda.synchronize()
    want = logot.bistochastic(base.cpu().numpy(), 20, backend="cuda").r
    np.testing.assert_array_equal(r.cpu().numpy(), want)


def test_a_non_contiguous_cuda_tensor_is_refused():
    torch = _gpu_torch()
    x = torch.rand(4, 5, 5, device="cuda")
    stats = torch.zeros(3, dtype=torch.int64, device="cuda")
    cap = torch.utils.dlpack.to_dlpack
    with pytest.raises(ValueError, match=r"x: expected a contiguous \(row-major\) tensor"):
        _logot._bistochastic_cuda(cap(x.transpose(-1, -2)), (cap(torch.empty_like(x)), cap(stats)), 20, 0.0, 0,
                                  False)


def test_cuda_tensors_of_two_gpus_are_refused():
    torch = _gpu_torch()
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    cap = torch.utils.dlpack.to_dlpack
    x = torch.rand(4, 5, 5, device="cuda:0")
    r = torch.empty(4, 5, 5, device="cuda:1")
    stats = torch.zeros(3, dtype=torch.int64, device="cuda:0")
    with pytest.raises(ValueError, match="r: on cuda:1, expected cuda:0 like x"):
        _logot._bistochastic_cuda(cap(x), (cap(r), cap(stats)), 20, 0.0, 0, False)
