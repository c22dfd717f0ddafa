"""w8a8 on NumPy arrays: the library's CPU backend, synchronous.

dtypes: int8, int32, float16, float32 as themselves; fp8 e4m3fn as raw uint8 bit patterns (or
ml_dtypes.float8_e4m3fn), bf16 as raw uint16 bit patterns (or ml_dtypes.bfloat16). Outputs of those
two kinds are ml_dtypes arrays when ml_dtypes is importable, else uint8 / uint16; `.view(np.uint8)`
(or uint16) gives the bits either way. fp8_to_float32 / bf16_to_float32 / float32_to_bf16 convert.

Arrays are used with their strides as given (strided submatrices, w.T views); nothing is copied.
Each thread gets its own CPU handle (a handle is one thread at a time).
"""
import threading

import numpy as np

from . import _core
from ._lib import DType, DeviceKind, Handle, Status, make_error

try:  # optional: real fp8 / bf16 NumPy dtypes
    import ml_dtypes as _mld
except ImportError:  # pragma: no cover - depends on the environment
    _mld = None

_tls = threading.local()


def cpu_handle():
    """This thread's CPU handle (created on first use)."""
    h = getattr(_tls, "handle", None)
    if h is None:
        h = _tls.handle = Handle(DeviceKind.CPU, 0)
    return h


def _np_dtype(dt):
    """numpy dtype -> DType, or None."""
    dt = np.dtype(dt)
    if _mld is not None:
        if dt == np.dtype(_mld.float8_e4m3fn):
            return DType.FP8_E4M3
        if dt == np.dtype(_mld.bfloat16):
            return DType.BF16
    return {np.dtype(np.int8): DType.INT8, np.dtype(np.uint8): DType.FP8_E4M3, np.dtype(np.uint16): DType.BF16,
            np.dtype(np.float16): DType.FP16, np.dtype(np.float32): DType.FP32,
            np.dtype(np.int32): DType.INT32}.get(dt)


def fp8_dtype():
    return np.dtype(_mld.float8_e4m3fn) if _mld is not None else np.dtype(np.uint8)


def bf16_dtype():
    return np.dtype(_mld.bfloat16) if _mld is not None else np.dtype(np.uint16)


def np_dtype_of(d):
    d = DType(d)
    if d == DType.FP8_E4M3:
        return fp8_dtype()
    if d == DType.BF16:
        return bf16_dtype()
    return np.dtype({DType.INT8: np.int8, DType.FP16: np.float16, DType.FP32: np.float32,
                     DType.INT32: np.int32}[d])


_BAD = {"scale": Status.ERROR_INVALID_SCALE, "bias": Status.ERROR_INVALID_BIAS, "azp": Status.ERROR_INVALID_ZERO_POINT}


def _status_for(name):
    for k, v in _BAD.items():
        if k in name:
            return v
    return Status.ERROR_INVALID_DTYPE


def view(x, name, fn, writable=False):
    if not isinstance(x, np.ndarray):
        raise make_error(_status_for(name), "%s: %s is a %s; expected a numpy.ndarray (or pass torch tensors "
                         "for every argument)" % (fn, name, type(x).__name__))
    d = _np_dtype(x.dtype)
    if d is None:
        raise make_error(_status_for(name), "%s: %s has dtype %s; w8a8 takes int8, fp8 e4m3 (uint8 bits or "
                         "ml_dtypes.float8_e4m3fn), bf16 (uint16 bits or ml_dtypes.bfloat16), float16, float32, "
                         "int32" % (fn, name, x.dtype))
    if writable and not x.flags.writeable:
        raise make_error(Status.ERROR_INVALID_VALUE, "%s: %s is read-only" % (fn, name))
    isz = x.dtype.itemsize
    strides = []
    for s, n in zip(x.strides, x.shape):
        if s % isz and n > 1:
            raise make_error(Status.ERROR_MISALIGNED, "%s: %s has a stride of %d bytes, not a multiple of its "
                             "%d-byte elements" % (fn, name, s, isz))
        strides.append(s // isz)
    ptr = x.__array_interface__["data"][0]
    return _core.View(d, tuple(x.shape), tuple(strides), ptr, name)


def _scalar_or_array(x, dtype, name, fn):
    """Python numbers for scales / zero points / bounds become 1-element arrays (inputs only)."""
    if isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool):
        return np.array([x], dtype=dtype)
    return x


def _out_dtype(out_dtype, fn):
    if isinstance(out_dtype, str):
        d = _core.OUT_DTYPES.get(out_dtype.lower())
    else:
        try:
            d = _np_dtype(out_dtype)
        except TypeError:
            d = None
        if d == DType.BF16 or (d is not None and np.dtype(out_dtype) == np.uint16):
            d = DType.BF16
    if d not in (DType.BF16, DType.FP16, DType.FP32):
        raise make_error(Status.ERROR_INVALID_DTYPE, "%s: out_dtype %r; expected bf16 ('bf16', "
                         "ml_dtypes.bfloat16), float16 or float32" % (fn, out_dtype))
    return d


def scaled_mm(a, b, scale_a, scale_b, out_dtype="bf16", bias=None, azp=None, azp_adj=None, out=None):
    fn = "w8a8.scaled_mm"
    scale_a = _scalar_or_array(scale_a, np.float32, "scale_a", fn)
    scale_b = _scalar_or_array(scale_b, np.float32, "scale_b", fn)
    azp = _scalar_or_array(azp, np.int32, "azp", fn)
    va, vb = view(a, "a", fn), view(b, "b", fn)
    if out is None:
        d = _out_dtype(out_dtype, fn)
        if len(va.shape) != 2 or len(vb.shape) != 2:
            raise make_error(Status.ERROR_INVALID_SHAPE, "%s: a and b must be 2-D; got %s and %s"
                             % (fn, va.shape, vb.shape))
        out = np.empty((va.shape[0], vb.shape[1]), dtype=np_dtype_of(d))
    vo = view(out, "out", fn, writable=True)
    _core.scaled_mm(cpu_handle(), va, vb, view(scale_a, "scale_a", fn), view(scale_b, "scale_b", fn), vo,
                    view(bias, "bias", fn) if bias is not None else None,
                    view(azp, "azp", fn) if azp is not None else None,
                    view(azp_adj, "azp_adj", fn) if azp_adj is not None else None, fn=fn)
    return out


def _rows2d(x, name, fn):
    if not isinstance(x, np.ndarray):
        view(x, name, fn)  # raises the type error
    if x.ndim == 2:
        return x
    if x.ndim < 1:
        raise make_error(Status.ERROR_INVALID_SHAPE, "%s: %s must have at least 1 dimension" % (fn, name))
    try:  # [..., K] -> [M, K] without a copy (NumPy refuses instead of copying when it cannot)
        y = x.view()
        y.shape = (-1, x.shape[-1]) if x.shape[-1] else (int(np.prod(x.shape[:-1])), 0)
        return y
    except AttributeError:
        raise make_error(Status.ERROR_INVALID_LAYOUT, "%s: %s of shape %s and strides %s cannot be viewed as "
                         "[M, K] rows without a copy" % (fn, name, x.shape, x.strides))


def _quantize(x, qdtype, scale, azp, per_token, scale_ub, out, fn, want_azp, silu_mul=False):
    x2 = _rows2d(x, "x", fn)
    M = x2.shape[0]
    if out is None:
        # silu_mul: x [..., 2I] -> q [..., I]; an odd last dimension is the library's error to report
        out = np.empty(x.shape[:-1] + (x.shape[-1] // 2,) if silu_mul else x.shape, dtype=np_dtype_of(qdtype))
    elif not isinstance(out, np.ndarray) or _np_dtype(out.dtype) != qdtype:
        # (the library quantizes to out's dtype: an out of the other 8-bit format would silently change the format)
        raise make_error(Status.ERROR_INVALID_DTYPE, "%s: out has dtype %s; this quantizer writes %s" %
                         (fn, getattr(out, "dtype", type(out).__name__), "int8" if qdtype == DType.INT8 else
                          "fp8 e4m3 (ml_dtypes.float8_e4m3fn or uint8 bit patterns)"))
    q2 = _rows2d(out, "out", fn)
    mode = _core.quant_mode(scale is not None, per_token)
    if scale is not None:
        scale = _scalar_or_array(scale, np.float32, "scale", fn)
        if azp is not None:
            azp = _scalar_or_array(azp, np.int32, "azp", fn)
        scale_out, azp_out = scale, azp
    else:
        if azp is not None:
            raise make_error(Status.ERROR_INVALID_ZERO_POINT, "%s: azp is an input of static quantization "
                             "only; dynamic asymmetric quantization computes it (symmetric=False)" % fn)
        shape = (M, 1) if per_token else (1,)
        scale_out = np.empty(shape, dtype=np.float32)
        azp_out = np.empty(shape, dtype=np.int32) if want_azp else None
    ub_arr = None
    if scale_ub is not None:
        ub_arr = _scalar_or_array(scale_ub, np.float32, "scale_ub", fn)
        vu = view(ub_arr, "scale_ub", fn)
        if vu.dtype != DType.FP32 or int(np.prod(vu.shape)) != 1:
            raise make_error(Status.ERROR_INVALID_SCALE, "%s: scale_ub must be one float32" % fn)
    _core.quantize(cpu_handle(), view(x2, "x", fn), view(q2, "out", fn, writable=True), mode,
                   view(scale_out, "scale", fn, writable=scale is None),
                   view(azp_out, "azp", fn) if azp_out is not None else None,
                   ub_arr.__array_interface__["data"][0] if ub_arr is not None else None, fn=fn,
                   silu_mul=silu_mul)
    return out, scale_out, azp_out


def quantize_fp8(x, scale=None, scale_ub=None, use_per_token_if_dynamic=False, out=None):
    """vLLM's scaled_fp8_quant: static when scale is given, else dynamic per-tensor (scale shape (1,))
    or per-token (scale shape (M, 1)). Returns (q, scale); q has x's shape, fp8 e4m3fn."""
    q, s, _ = _quantize(x, DType.FP8_E4M3, scale, None, use_per_token_if_dynamic, scale_ub, out,
                        "w8a8.quantize_fp8", False)
    return q, s


def quantize_int8(x, scale=None, azp=None, symmetric=True, use_per_token_if_dynamic=True, out=None):
    """vLLM's scaled_int8_quant: static (scale, and azp for asymmetric, given) or dynamic per-token
    (default; symmetric=False computes a per-token zero point). Returns (q, scale, azp or None)."""
    q, s, z = _quantize(x, DType.INT8, scale, azp, use_per_token_if_dynamic, None, out, "w8a8.quantize_int8",
                        scale is None and not symmetric)
    return q, s, z


def silu_mul_quantize_fp8(x, scale=None, scale_ub=None, use_per_token_if_dynamic=False, out=None):
    """quantize_fp8(silu(x[..., :I]) * x[..., I:]) in one pass (vLLM's silu_and_mul followed by
    scaled_fp8_quant, without the intermediate): x [..., 2I] -> (q [..., I] fp8 e4m3fn, scale)."""
    q, s, _ = _quantize(x, DType.FP8_E4M3, scale, None, use_per_token_if_dynamic, scale_ub, out,
                        "w8a8.silu_mul_quantize_fp8", False, silu_mul=True)
    return q, s


def silu_mul_quantize_int8(x, scale=None, azp=None, symmetric=True, use_per_token_if_dynamic=True, out=None):
    """quantize_int8(silu(x[..., :I]) * x[..., I:]) in one pass: x [..., 2I] -> (q [..., I] int8, scale,
    azp or None), with quantize_int8's arguments."""
    return _quantize(x, DType.INT8, scale, azp, use_per_token_if_dynamic, None, out, "w8a8.silu_mul_quantize_int8",
                     scale is None and not symmetric, silu_mul=True)


def colsum(b, out=None):
    """azp_adj[n] = sum_k b[k, n] (int32) of an int8 column-major b [K, N] (pass w.T)."""
    fn = "w8a8.colsum"
    vb = view(b, "b", fn)
    if out is None:
        if len(vb.shape) != 2:
            raise make_error(Status.ERROR_INVALID_SHAPE, "%s: b must be 2-D; got %s" % (fn, vb.shape))
        out = np.empty((vb.shape[1],), dtype=np.int32)
    _core.colsum(cpu_handle(), vb, view(out, "azp_adj", fn, writable=True), fn=fn)
    return out


# --------------------------------------------------------------------------- conversions (pure NumPy)


def fp8_to_float32(q):
    """Decode e4m3fn bit patterns (uint8 or ml_dtypes) to float32, exactly."""
    u = np.asarray(q).view(np.uint8).astype(np.int32)
    sign = np.where(u & 0x80, -1.0, 1.0).astype(np.float32)
    e = (u >> 3) & 0xF
    m = (u & 7).astype(np.float32)
    val = np.where(e == 0, m * np.float32(2.0 ** -9), (1.0 + m / 8.0) * np.exp2(e - 7.0)).astype(np.float32)
    val = np.where((u & 0x7F) == 0x7F, np.float32(np.nan), val)
    return (sign * val).astype(np.float32)


def bf16_to_float32(x):
    u = np.asarray(x).view(np.uint16).astype(np.uint32) << 16
    return u.view(np.float32)


def float32_to_bf16(x):
    """Round to nearest even; NaN stays NaN. Returns bf16 (ml_dtypes) or uint16 bits."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r = np.where(np.isnan(np.asarray(x, dtype=np.float32)), ((u >> 16) | 0x40).astype(np.uint16), r)
    return r.astype(np.uint16).view(bf16_dtype())
