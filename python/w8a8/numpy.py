"""w8a8 on NumPy arrays: the library's CPU backend, synchronous.

dtypes: int8, int32, float16, float32 as themselves; fp8 e4m3fn as raw uint8 bit patterns (or
ml_dtypes.float8_e4m3fn), bf16 as raw uint16 bit patterns (or ml_dtypes.bfloat16). Outputs of those
two kinds are ml_dtypes arrays when ml_dtypes is importable, else uint8 / uint16; `.view(np.uint8)`
(or uint16) gives the bits either way. fp8_to_float32 / bf16_to_float32 / float32_to_bf16 convert.

Arrays are used with their strides as given (strided submatrices, w.T views); nothing is copied.
Each thread gets its own CPU handle (a handle is one thread at a time).
"""
import ctypes
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
    """This thread's CPU handle (created on first use; no other thread uses it, so its calls take no lock)."""
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
    """a [..., K] (leading dimensions viewed as M rows, never copied), b [K, N] column-major: out [..., N]."""
    if azp is None and azp_adj is None and _FAST:
        r = _mm_fast(a, b, scale_a, scale_b, out_dtype, bias, out)
        if r is not None:
            return r
    fn = "w8a8.scaled_mm"
    scale_a = _scalar_or_array(scale_a, np.float32, "scale_a", fn)
    scale_b = _scalar_or_array(scale_b, np.float32, "scale_b", fn)
    azp = _scalar_or_array(azp, np.int32, "azp", fn)
    result = out
    if isinstance(a, np.ndarray) and a.ndim != 2:
        # [..., K] -> [M, K]; the result keeps a's leading dimensions: [..., N]
        lead = a.shape[:-1]
        a = _rows2d(a, "a", fn)
        if out is None and isinstance(b, np.ndarray) and b.ndim == 2:
            result = out = np.empty(lead + (b.shape[1],), dtype=np_dtype_of(_out_dtype(out_dtype, fn)))
    if isinstance(out, np.ndarray) and out.ndim != 2:
        out = _rows2d(out, "out", fn)
    va, vb = view(a, "a", fn), view(b, "b", fn)
    if out is None:
        d = _out_dtype(out_dtype, fn)
        if len(va.shape) != 2 or len(vb.shape) != 2:
            raise make_error(Status.ERROR_INVALID_SHAPE, "%s: b must be 2-D and a at least 1-D; got %s and %s"
                             % (fn, va.shape, vb.shape))
        result = out = np.empty((va.shape[0], vb.shape[1]), dtype=np_dtype_of(d))
    vo = view(out, "out", fn, writable=True)
    _core.scaled_mm(cpu_handle(), va, vb, view(scale_a, "scale_a", fn), view(scale_b, "scale_b", fn), vo,
                    view(bias, "bias", fn) if bias is not None else None,
                    view(azp, "azp", fn) if azp is not None else None,
                    view(azp_adj, "azp_adj", fn) if azp_adj is not None else None, fn=fn)
    return result


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
    if _FAST and _quant_fast(x2, q2, int(mode), scale_out, azp_out, ub_arr, scale is None, fn, silu_mul):
        return out, scale_out, azp_out
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


def scaled_mm_blockwise(a, b, scale_a, scale_b, out_dtype="bf16", bias=None, out=None):
    """Block-scaled fp8 (DeepSeek-V3 style): a [..., K] fp8, b [K, N] column-major fp8 (w.T of [N, K] weights),
    scale_a [M, ceil(K/128)] float32 (per token per 128 channels), scale_b [ceil(N/128), ceil(K/128)] float32
    (per 128 x 128 weight block), either layout. Returns out [..., N]."""
    fn = "w8a8.scaled_mm_blockwise"
    result = out
    lead = None
    if isinstance(a, np.ndarray) and a.ndim != 2:
        lead = a.shape[:-1]
        a = _rows2d(a, "a", fn)
    if out is None:
        d = _out_dtype(out_dtype, fn)
        n = b.shape[1] if isinstance(b, np.ndarray) and b.ndim == 2 else 0
        result = out = np.empty((lead if lead is not None else (a.shape[0],)) + (n,), dtype=np_dtype_of(d))
    o2 = _rows2d(out, "out", fn) if isinstance(out, np.ndarray) and out.ndim != 2 else out
    _core.scaled_mm_blockwise(cpu_handle(), view(a, "a", fn), view(b, "b", fn), view(scale_a, "scale_a", fn),
                              view(scale_b, "scale_b", fn), view(o2, "out", fn, writable=True),
                              view(bias, "bias", fn) if bias is not None else None, fn=fn)
    return result


def _group_quant(x, kind, group_size, column_major_scales, scale_ue8m0, out, fn):
    if group_size != 128:
        raise make_error(Status.ERROR_INVALID_VALUE, "%s: group_size is %r; w8a8's groups and blocks are 128" %
                         (fn, group_size))
    x2 = _rows2d(x, "x", fn) if kind != "blocks" else x
    rows = x2.shape[0] if isinstance(x2, np.ndarray) else 0
    cols = (x2.shape[1] // 2 if kind == "silu_mul" else x2.shape[1]) if isinstance(x2, np.ndarray) else 0
    if out is None:
        qshape = (x.shape[:-1] + (cols,)) if kind == "silu_mul" else x.shape
        out = np.empty(qshape, dtype=np_dtype_of(DType.FP8_E4M3))
    q2 = _rows2d(out, "out", fn) if kind != "blocks" else out
    srows = (rows + 127) // 128 if kind == "blocks" else rows
    scols = (cols + 127) // 128
    scale = np.empty((scols, srows), dtype=np.float32).T if column_major_scales else \
        np.empty((srows, scols), dtype=np.float32)
    _core.quantize_groups(cpu_handle(), view(x2, "x", fn), view(q2, "out", fn, writable=True),
                          view(scale, "scale", fn, writable=True), 1 if scale_ue8m0 else 0, kind=kind, fn=fn)
    return out, scale


def quantize_fp8_groups(x, group_size=128, column_major_scales=False, scale_ue8m0=False, out=None):
    """vLLM's per_token_group_quant_fp8: x [..., K] -> (q [..., K] fp8 e4m3fn, scale [M, ceil(K/128)] float32,
    column-major when asked, powers of two with scale_ue8m0)."""
    return _group_quant(x, "groups", group_size, column_major_scales, scale_ue8m0, out, "w8a8.quantize_fp8_groups")


def quantize_fp8_blocks(w, block_size=128, scale_ue8m0=False, out=None):
    """128 x 128 block quantization of weights w [N, K]: (q [N, K] fp8 e4m3fn, scale [ceil(N/128), ceil(K/128)]);
    q.T is the b of scaled_mm_blockwise."""
    return _group_quant(w, "blocks", block_size, False, scale_ue8m0, out, "w8a8.quantize_fp8_blocks")


def silu_mul_quantize_fp8_groups(x, group_size=128, column_major_scales=False, scale_ue8m0=False, out=None):
    """silu(gate) * up for x [..., 2I], then quantize_fp8_groups' rules: (q [..., I], scale [M, ceil(I/128)])."""
    return _group_quant(x, "silu_mul", group_size, column_major_scales, scale_ue8m0, out,
                        "w8a8.silu_mul_quantize_fp8_groups")


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


# --------------------------------------------------------------------------- the fast path
# A warm scaled_mm on 2-D arrays spends its host time here: dtype codes from one dict, layouts from the
# strides, data addresses from __array_struct__ (the array interface's C struct, cheaper to read than
# __array_interface__'s dict), then _core.mm_fast. Whatever this does not recognise returns None and
# takes the general path above, which words the errors.

_FAST_DT = {}  # numpy dtype -> (DType code, itemsize)
for _d in (DType.INT8, DType.FP8_E4M3, DType.BF16, DType.FP16, DType.FP32, DType.INT32):
    _FAST_DT[np_dtype_of(_d)] = (int(_d), np_dtype_of(_d).itemsize)
_FAST_DT[np.dtype(np.uint8)] = (int(DType.FP8_E4M3), 1)
_FAST_DT[np.dtype(np.uint16)] = (int(DType.BF16), 2)
del _d
_OUT_FAST = {}  # an out_dtype argument seen before -> (DType code, itemsize, numpy dtype)

_read_ptr = ctypes.c_void_p.from_address


def _pick_data_offset():
    """Where an ndarray object holds its data pointer: PyArrayObject's `data` follows PyObject_HEAD (numpy's
    C ABI, 1.x and 2.x alike), and in CPython id() is the object's address. Used only where a probe agrees
    with __array_interface__ (else None: the dict is read instead)."""
    try:
        base = np.arange(24, dtype=np.int32).reshape(4, 6)
        probes = [base, base[1:, 2:], base.T, np.zeros((3, 5), np.uint8)[:, 1:]]
        off = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)  # ob_refcnt, ob_type
        if all(_read_ptr(id(x) + off).value == x.__array_interface__["data"][0] for x in probes):
            return off
    except Exception:  # pragma: no cover - depends on the interpreter
        pass
    return None


_DATA_OFFSET = _pick_data_offset()


def _addr(x):
    """The data address of an ndarray."""
    if _DATA_OFFSET is not None:
        return _read_ptr(id(x) + _DATA_OFFSET).value or 0
    return x.__array_interface__["data"][0]


_FAST = _core.FAST_OK and _DATA_OFFSET is not None


def _out_fast(out_dtype):
    try:
        o = _OUT_FAST.get(out_dtype)
    except TypeError:  # unhashable: the general path words the error
        return None
    if o is None:
        try:
            d = _out_dtype(out_dtype, "w8a8.scaled_mm")
        except Exception:
            return None
        npd = np_dtype_of(d)
        o = _OUT_FAST[out_dtype] = (int(d), npd.itemsize, npd)
    return o


def _quant_fast(x, q, mode, scale, azp, ub, writes_scale, fn, silu_mul):
    """w8a8_quantize with packed descriptors for 2-D rows with unit inner strides and contiguous vectors;
    False (nothing done) for anything else."""
    nd = np.ndarray
    if type(x) is not nd or type(q) is not nd or type(scale) is not nd or x.ndim != 2 or q.ndim != 2:
        return False
    get = _FAST_DT.get
    tx, tq, ts = get(x.dtype), get(q.dtype), get(scale.dtype)
    if (tx is None or tq is None or ts is None or not scale.flags.c_contiguous or not q.flags.writeable
            or (writes_scale and not scale.flags.writeable)):
        return False
    M, K = x.shape
    Mq, Kq = q.shape
    xs0, xs1 = x.strides
    qs0, qs1 = q.strides
    isx, isq = tx[1], tq[1]
    if xs1 != isx or xs0 % isx or xs0 < K * isx or qs1 != isq or qs0 < Kq * isq or not (M and K):
        return False
    vazp = None
    if azp is not None:
        ta = get(azp.dtype) if type(azp) is nd else None
        if ta is None or not azp.flags.c_contiguous or (writes_scale and not azp.flags.writeable):
            return False
        vazp = (ta[0], azp.size, _addr(azp))
    _core.quantize_fast(cpu_handle(), (tx[0], 0, M, K, xs0 // isx, _addr(x), tq[0], 0, Mq, Kq, qs0 // isq, _addr(q),
                                       ts[0], scale.size, _addr(scale)),
                        mode, vazp, _addr(ub) if ub is not None else None, fn, silu_mul, locked=False)
    return True


def _mm_fast(a, b, sa, sb, out_dtype, bias, out):
    nd = np.ndarray
    if type(a) is not nd or type(b) is not nd or type(sa) is not nd or type(sb) is not nd:
        return None
    get = _FAST_DT.get
    ta, tb, tsa, tsb = get(a.dtype), get(b.dtype), get(sa.dtype), get(sb.dtype)
    if (ta is None or tb is None or tsa is None or tsb is None or a.ndim != 2 or b.ndim != 2 or ta[1] != 1
            or tb[1] != 1 or not sa.flags.c_contiguous or not sb.flags.c_contiguous):
        return None
    M, K = a.shape
    Kb, N = b.shape
    as0, as1 = a.strides  # 1-byte elements: strides in bytes are strides in elements
    bs0, bs1 = b.strides
    if as1 != 1 or as0 < K or bs0 != 1 or bs1 < Kb or not (M and K and N):
        return None
    vbias = None
    if bias is not None:
        tbias = get(bias.dtype) if type(bias) is nd else None
        if tbias is None or not bias.flags.c_contiguous:
            return None
        vbias = (tbias[0], bias.size, _addr(bias))
    if out is None:
        o = _out_fast(out_dtype)
        if o is None:
            return None
        out = np.empty((M, N), dtype=o[2])
        od, ld = o[0], N
    else:
        to = get(out.dtype) if type(out) is nd else None
        if to is None or out.ndim != 2 or not out.flags.writeable:
            return None
        isz = to[1]
        os0, os1 = out.strides
        if os1 != isz or os0 % isz or os0 < N * isz or out.shape[0] != M:
            return None
        od, ld = to[0], os0 // isz
    rd, off = _read_ptr, _DATA_OFFSET
    _core.mm_fast(cpu_handle(), (ta[0], 0, M, K, as0, rd(id(a) + off).value, tb[0], 1, Kb, N, bs1,
                                 rd(id(b) + off).value, od, 0, M, N, ld, rd(id(out) + off).value, tsa[0], sa.size,
                                 rd(id(sa) + off).value or 0, tsb[0], sb.size, rd(id(sb) + off).value or 0),
                  vbias, locked=False)
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
