"""w8a8 on any DLPack producer: CuPy, JAX, NumPy >= 1.22 and others that have __dlpack__ and
__dlpack_device__ (torch tensors go to w8a8.torch). The arrays' memory is used as the producer holds it,
with its strides; nothing is copied.

CPU arrays become NumPy arrays over the same memory (numpy.from_dlpack, or this module's reading of the
capsule for the dtypes NumPy lacks: bf16, fp8 e4m3fn) and run as w8a8.numpy does; outputs that are not
given are NumPy arrays, and an output that is given is written in place and returned as passed.
CUDA arrays: each capsule's DLTensor (data, shape, strides, dtype, device) is read with ctypes and the
call runs on the CUDA backend, on the CUDA legacy default stream of the arrays' device (each capsule is
requested with stream=1, so the producer orders its pending work before it). w8a8 allocates no CUDA
memory of its own here: every output must be given (out=, and the scale of a static quantization),
and dynamic quantization, which would have to allocate its scales, is refused; use w8a8.torch for that.
"""
import ctypes
import threading

import numpy as np

from . import _core
from . import numpy as _wn
from ._lib import DType, DeviceKind, Handle, Status, make_error

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST = 1, 2, 3


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


# (DLDataTypeCode, bits) -> DType. uint8 / uint16 are w8a8.numpy's fp8 / bf16 bit patterns.
_DL_DTYPES = {(0, 8): DType.INT8, (0, 32): DType.INT32, (1, 8): DType.FP8_E4M3, (1, 16): DType.BF16,
              (2, 16): DType.FP16, (2, 32): DType.FP32, (4, 16): DType.BF16, (10, 8): DType.FP8_E4M3}
_SIZES = {DType.INT8: 1, DType.FP8_E4M3: 1, DType.BF16: 2, DType.FP16: 2, DType.FP32: 4, DType.INT32: 4}

_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

_STATUS_OF = (("scale", Status.ERROR_INVALID_SCALE), ("bias", Status.ERROR_INVALID_BIAS),
              ("azp", Status.ERROR_INVALID_ZERO_POINT))


def _status_for(name):
    for k, v in _STATUS_OF:
        if k in name:
            return v
    return Status.ERROR_INVALID_DTYPE


def is_dlpack(x):
    return hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__") and not isinstance(x, np.ndarray)


def device_of(x, name, fn):
    """(DLPack device type, device id) of an array argument."""
    if not hasattr(x, "__dlpack_device__"):
        raise make_error(_status_for(name), "%s: %s is a %s, which has no __dlpack_device__; pass arrays of one "
                         "kind (DLPack producers such as CuPy or JAX arrays, NumPy arrays, or torch tensors)"
                         % (fn, name, type(x).__name__))
    try:
        t, i = x.__dlpack_device__()
        return int(t), int(i)
    except Exception as e:
        raise make_error(_status_for(name), "%s: %s.__dlpack_device__() failed: %s" % (fn, name, e))


class _Capsule:
    """A DLPack capsule and the DLTensor it holds. The producer's memory stays valid while this object
    lives; the capsule is never consumed (renamed), so dropping it runs the producer's deleter."""

    def __init__(self, x, name, fn, stream):
        try:
            self.cap = x.__dlpack__() if stream is None else x.__dlpack__(stream=stream)
        except Exception as e:
            raise make_error(_status_for(name), "%s: %s.__dlpack__(%s) failed: %s"
                             % (fn, name, "" if stream is None else "stream=%d" % stream, e))
        try:
            p = _capsule_pointer(self.cap, b"dltensor")
        except Exception:
            raise make_error(_status_for(name), "%s: %s.__dlpack__() did not return a \"dltensor\" capsule "
                             "(DLPack < 1.0 form); got %r" % (fn, name, self.cap))
        t = _DLTensor.from_address(p)  # DLManagedTensor starts with its DLTensor
        self.ndim = int(t.ndim)
        self.shape = tuple(int(t.shape[i]) for i in range(self.ndim))
        code, bits, lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
        self.dtype = _DL_DTYPES.get((code, bits)) if lanes == 1 else None
        if self.dtype is None:
            raise make_error(_status_for(name), "%s: %s has DLPack dtype (code %d, bits %d, lanes %d); w8a8 takes "
                             "int8, float8_e4m3fn (or uint8 bits), bfloat16 (or uint16 bits), float16, float32, "
                             "int32" % (fn, name, code, bits, lanes))
        if t.strides:
            self.strides = tuple(int(t.strides[i]) for i in range(self.ndim))
        else:  # NULL: compact row-major
            st, acc = [], 1
            for n in reversed(self.shape):
                st.append(acc)
                acc *= n
            self.strides = tuple(reversed(st))
        self.ptr = (t.data or 0) + int(t.byte_offset)
        self.device = (int(t.device.device_type), int(t.device.device_id))


# --------------------------------------------------------------------------- CPU: NumPy arrays


def _np_dtype(d):
    return _wn.np_dtype_of(d)


def to_numpy(x, name, fn):
    """A NumPy array over a CPU DLPack array's memory: numpy.from_dlpack for inputs of the dtypes NumPy
    knows; the capsule read here for the others (bf16, fp8) and for outputs (numpy.from_dlpack's arrays are
    read-only)."""
    if x is None or isinstance(x, np.ndarray) or not hasattr(x, "__dlpack__"):
        return x
    from_dlpack = getattr(np, "from_dlpack", None)
    if from_dlpack is not None and name not in _OUTPUTS:
        try:
            return from_dlpack(x)
        except Exception:  # a dtype NumPy lacks (bf16, fp8), or an older protocol: read the capsule below
            pass
    c = _Capsule(x, name, fn, None)
    if c.device[0] not in (KDL_CPU, KDL_CUDA_HOST):
        raise make_error(Status.ERROR_INVALID_POINTER, "%s: %s is on DLPack device %s, not the CPU"
                         % (fn, name, c.device))
    size = _SIZES[c.dtype]
    if any(s < 0 for s in c.strides):
        raise make_error(Status.ERROR_INVALID_STRIDE, "%s: %s has negative strides %s; w8a8 makes no hidden copies"
                         % (fn, name, c.strides))
    span = 0 if 0 in c.shape else (sum((n - 1) * s for n, s in zip(c.shape, c.strides)) + 1) * size
    buf = (ctypes.c_char * max(span, 1)).from_address(c.ptr) if c.ptr else bytearray(1)
    if c.ptr:
        buf._w8a8_capsule = c  # the producer's memory lives as long as this array
    return np.ndarray(c.shape, dtype=_np_dtype(c.dtype), buffer=buf,
                      strides=tuple(s * size for s in c.strides))


_OUTPUTS = ("out", "azp_adj_out")


def _numpy_args(args, fn):
    return [to_numpy(x, name, fn) for name, x in args]


# --------------------------------------------------------------------------- CUDA: DLTensor views

_tls = threading.local()


def cuda_handle(index):
    """This thread's CUDA handle for a device, on the legacy default stream (created on first use)."""
    hs = getattr(_tls, "handles", None)
    if hs is None:
        hs = _tls.handles = {}
    h = hs.get(index)
    if h is None:
        h = hs[index] = Handle(DeviceKind.CUDA, index)
    return h


def _cuda_view(x, name, fn, dev, keep):
    """A _core.View of a CUDA DLPack array on device dev; its capsule is appended to keep."""
    if x is None:
        return None
    if not hasattr(x, "__dlpack__"):
        raise make_error(_status_for(name) if name != "out" else Status.ERROR_INVALID_POINTER,
                         "%s: %s is a %s; a call on CUDA DLPack arrays takes CUDA DLPack arrays for every array "
                         "argument (Python numbers and NumPy arrays live on the host)" % (fn, name, type(x).__name__))
    d = device_of(x, name, fn)
    if d != dev:
        raise make_error(Status.ERROR_INVALID_POINTER, "%s: %s is on DLPack device %s but a is on %s; every array "
                         "must be on the same CUDA device" % (fn, name, d, dev))
    c = _Capsule(x, name, fn, 1)
    keep.append(c)
    return _core.View(c.dtype, c.shape, c.strides, c.ptr, name)


def _rows_view(v, fn):
    """[..., K] -> [M, K] as a view, or a clear error where the leading dimensions do not merge."""
    if v is None or len(v.shape) == 2:
        return v
    if len(v.shape) < 1:
        raise make_error(Status.ERROR_INVALID_SHAPE, "%s: %s must have at least 1 dimension" % (fn, v.name))
    K = v.shape[-1]
    lead = [(n, s) for n, s in zip(v.shape[:-1], v.strides[:-1]) if n != 1]
    M = 1
    for n, _ in lead:
        M *= n
    # rows are evenly spaced when each leading dimension steps over whole copies of the next one
    for (n_out, s_out), (n_in, s_in) in zip(lead, lead[1:]):
        if M and s_out != s_in * n_in:
            raise make_error(Status.ERROR_INVALID_LAYOUT, "%s: %s of shape %s and strides %s cannot be viewed as "
                             "[M, K] rows without a copy" % (fn, v.name, v.shape, v.strides))
    row_stride = lead[-1][1] if lead else max(K, 1)
    return _core.View(v.dtype, (M, K), (row_stride, v.strides[-1]), v.ptr, v.name)


def _need_out(fn, what):
    return make_error(Status.ERROR_INVALID_VALUE, "%s: the inputs are CUDA DLPack arrays and %s is not given: "
                      "w8a8 allocates no CUDA memory for DLPack callers. Pass %s (a CUDA array of the right shape "
                      "and dtype), or use torch tensors (w8a8.torch allocates through torch)" % (fn, what, what))


# --------------------------------------------------------------------------- the calls


def scaled_mm(a, b, scale_a, scale_b, out_dtype="bf16", bias=None, azp=None, azp_adj=None, out=None):
    fn = "w8a8.scaled_mm"
    dev = device_of(a, "a", fn)
    if dev[0] in (KDL_CPU, KDL_CUDA_HOST):
        a, b, scale_a, scale_b, bias, azp, azp_adj, o = _numpy_args(
            [("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("bias", bias), ("azp", azp),
             ("azp_adj", azp_adj), ("out", out)], fn)
        r = _wn.scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, azp, azp_adj, o)
        return out if out is not None else r
    _cuda_only(dev, "a", fn)
    if out is None:
        raise _need_out(fn, "out")
    keep = []  # the capsules, alive until the call has been enqueued
    views = [_cuda_view(x, name, fn, dev, keep) for name, x in (
        ("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("out", out), ("bias", bias), ("azp", azp),
        ("azp_adj", azp_adj))]
    views[0], views[4] = _rows_view(views[0], fn), _rows_view(views[4], fn)
    _core.scaled_mm(cuda_handle(dev[1]), *views[:5], *views[5:], fn=fn)
    return out


def _cuda_only(dev, name, fn):
    if dev[0] != KDL_CUDA:
        raise make_error(Status.ERROR_UNSUPPORTED_DEVICE, "%s: %s is on DLPack device type %d (id %d); w8a8 runs on "
                         "the CPU (1, 3) and CUDA (2)" % (fn, name, dev[0], dev[1]))


def _quantize(x, qdtype, scale, azp, per_token, scale_ub, out, fn, symmetric, silu_mul=False):
    keep = []
    dev = device_of(x, "x", fn)
    _cuda_only(dev, "x", fn)
    if scale is None:
        raise make_error(Status.ERROR_INVALID_VALUE, "%s: dynamic quantization of CUDA DLPack arrays would allocate "
                         "its scales (and zero points) on the device, which w8a8 does not do for DLPack callers: "
                         "quantize statically (pass scale, a CUDA array, and out), or use torch tensors" % fn)
    if out is None:
        raise _need_out(fn, "out")
    vx = _rows_view(_cuda_view(x, "x", fn, dev, keep), fn)
    vq = _rows_view(_cuda_view(out, "out", fn, dev, keep), fn)
    if vq.dtype != qdtype:
        raise make_error(Status.ERROR_INVALID_DTYPE, "%s: out has dtype %s; this quantizer writes %s"
                         % (fn, vq.dtype.name, qdtype.name))
    if scale_ub is not None:
        raise make_error(Status.ERROR_INVALID_SCALE, "%s: scale_ub is given with a static scale; it bounds dynamic "
                         "per-token scales only" % fn)
    vs, vz = _cuda_view(scale, "scale", fn, dev, keep), _cuda_view(azp, "azp", fn, dev, keep)
    _core.quantize(cuda_handle(dev[1]), vx, vq, 0, vs, vz, None, fn=fn, silu_mul=silu_mul)
    return out, scale, azp


def _cpu(x):
    return device_of(x, "x", "w8a8")[0] in (KDL_CPU, KDL_CUDA_HOST)


def _cpu_quant(call, x, scale, azp, scale_ub, out, fn, **kw):
    x, scale, azp, scale_ub, o = _numpy_args([("x", x), ("scale", scale), ("azp", azp), ("scale_ub", scale_ub),
                                              ("out", out)], fn)
    if azp is not None:
        kw["azp"] = azp
    if scale_ub is not None:
        kw["scale_ub"] = scale_ub
    r = call(x, scale=scale, out=o, **kw)
    return (out if out is not None else r[0],) + tuple(r[1:])


def quantize_fp8(x, scale=None, scale_ub=None, use_per_token_if_dynamic=False, out=None):
    fn = "w8a8.quantize_fp8"
    if _cpu(x):
        return _cpu_quant(_wn.quantize_fp8, x, scale, None, scale_ub, out, fn,
                          use_per_token_if_dynamic=use_per_token_if_dynamic)
    q, s, _ = _quantize(x, DType.FP8_E4M3, scale, None, use_per_token_if_dynamic, scale_ub, out, fn, True)
    return q, s


def quantize_int8(x, scale=None, azp=None, symmetric=True, use_per_token_if_dynamic=True, out=None):
    fn = "w8a8.quantize_int8"
    if _cpu(x):
        return _cpu_quant(_wn.quantize_int8, x, scale, azp, None, out, fn, symmetric=symmetric,
                          use_per_token_if_dynamic=use_per_token_if_dynamic)
    return _quantize(x, DType.INT8, scale, azp, use_per_token_if_dynamic, None, out, fn, symmetric)


def silu_mul_quantize_fp8(x, scale=None, scale_ub=None, use_per_token_if_dynamic=False, out=None):
    fn = "w8a8.silu_mul_quantize_fp8"
    if _cpu(x):
        return _cpu_quant(_wn.silu_mul_quantize_fp8, x, scale, None, scale_ub, out, fn,
                          use_per_token_if_dynamic=use_per_token_if_dynamic)
    q, s, _ = _quantize(x, DType.FP8_E4M3, scale, None, use_per_token_if_dynamic, scale_ub, out, fn, True,
                        silu_mul=True)
    return q, s


def silu_mul_quantize_int8(x, scale=None, azp=None, symmetric=True, use_per_token_if_dynamic=True, out=None):
    fn = "w8a8.silu_mul_quantize_int8"
    if _cpu(x):
        return _cpu_quant(_wn.silu_mul_quantize_int8, x, scale, azp, None, out, fn, symmetric=symmetric,
                          use_per_token_if_dynamic=use_per_token_if_dynamic)
    return _quantize(x, DType.INT8, scale, azp, use_per_token_if_dynamic, None, out, fn, symmetric, silu_mul=True)


def colsum(b, out=None):
    fn = "w8a8.colsum"
    dev = device_of(b, "b", fn)
    if dev[0] in (KDL_CPU, KDL_CUDA_HOST):
        bb, o = _numpy_args([("b", b), ("azp_adj_out", out)], fn)
        r = _wn.colsum(bb, out=o)
        return out if out is not None else r
    _cuda_only(dev, "b", fn)
    if out is None:
        raise _need_out(fn, "out")
    keep = []
    vb, vo = _cuda_view(b, "b", fn, dev, keep), _cuda_view(out, "azp_adj", fn, dev, keep)
    _core.colsum(cuda_handle(dev[1]), vb, vo, fn=fn)
    return out
