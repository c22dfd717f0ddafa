"""From array views to w8a8 descriptors, and the library calls themselves.

A View is what the NumPy and torch front ends extract from an array: dtype (a DType), shape,
strides in elements (as given: never copied), the data address, and the argument's name for
messages. Layout and ld come from the strides; an array whose strides no w8a8 descriptor can
describe is an error here (INVALID_LAYOUT / INVALID_STRIDE), never a hidden copy. Everything
else (dtype combinations, lengths, overlap, device pointers) is left to the library's validator,
so the messages users see are the C library's own.
"""
import ctypes
import struct
from collections import namedtuple

from . import _lib
from ._lib import (DType, Gathered, Layout, Matrix, QuantMode, Status, Vector, ZeroPoint, check, load,
                   make_error, tp_options)

View = namedtuple("View", "dtype shape strides ptr name")


def _fail(status, fn, msg):
    raise make_error(status, "%s: %s" % (fn, msg))


def as_matrix(v, fn, want):
    """A w8a8_matrix for a 2-D view. want: Layout the call expects (a, out, x, q: ROW_MAJOR;
    b: COL_MAJOR). A view that is only the other layout gets that layout's descriptor, so that the
    library's validator reports it with its message (e.g. a row-major b)."""
    if len(v.shape) != 2:
        _fail(Status.ERROR_INVALID_SHAPE, fn, "%s must be 2-D; got shape %s" % (v.name, tuple(v.shape)))
    rows, cols = int(v.shape[0]), int(v.shape[1])
    if rows == 0 or cols == 0:  # empty: its strides are arbitrary (NumPy gives some (0, 0)); nothing is read
        return Matrix(int(v.dtype), int(want), rows, cols, cols if want == Layout.ROW_MAJOR else rows, v.ptr or None)
    s0, s1 = int(v.strides[0]), int(v.strides[1])
    if (rows > 1 and s0 < 0) or (cols > 1 and s1 < 0):
        _fail(Status.ERROR_INVALID_STRIDE, fn, "%s has negative strides %s (a reversed view); w8a8 makes no "
              "hidden copies: pass a copy" % (v.name, (s0, s1)))
    # Row-major: unit column stride, rows at least a row apart. Dimensions of size <= 1 put no
    # constraint on their stride (torch and NumPy leave those strides arbitrary).
    row_ok = (cols <= 1 or s1 == 1) and (rows <= 1 or s0 >= cols)
    col_ok = (rows <= 1 or s0 == 1) and (cols <= 1 or s1 >= rows)
    row_ld = s0 if rows > 1 else cols
    col_ld = s1 if cols > 1 else rows
    if want == Layout.ROW_MAJOR:
        order = [(row_ok, Layout.ROW_MAJOR, row_ld), (col_ok, Layout.COL_MAJOR, col_ld)]
    else:
        order = [(col_ok, Layout.COL_MAJOR, col_ld), (row_ok, Layout.ROW_MAJOR, row_ld)]
    for ok, layout, ld in order:
        if ok:
            return Matrix(int(v.dtype), int(layout), rows, cols, ld, v.ptr or None)
    if want == Layout.COL_MAJOR:
        hint = "pass the weights as a column-major view such as w.t() of a contiguous [N, K] w"
    else:
        hint = "pass a row-major (C-contiguous rows) array"
    _fail(Status.ERROR_INVALID_LAYOUT, fn, "%s (shape %s, strides %s in elements) is neither row-major nor "
          "column-major with a unit inner stride; w8a8 takes strided submatrices but makes no hidden copies: %s"
          % (v.name, (rows, cols), (s0, s1), hint))


def as_vector(v, fn, status):
    """A w8a8_vector for a view whose elements are contiguous (any shape: (), (n,), (n,1), (1,n))."""
    n = 1
    dense = True  # the elements in row-major order, one apart ([..., 1] per-token scales of N-D rows too)
    for size, stride in zip(reversed(v.shape), reversed(v.strides)):
        if size > 1 and stride != n:
            dense = False
        n *= int(size)
    if not dense and n:
        _fail(status, fn, "%s (shape %s, strides %s) is not a contiguous vector" % (v.name, tuple(v.shape),
                                                                                   tuple(v.strides)))
    return Vector(int(v.dtype), n, v.ptr or None)


def _zero_point(fn, azp, azp_adj):
    if azp_adj is None:
        if azp is not None:
            _fail(Status.ERROR_INVALID_ZERO_POINT, fn, "azp is given without azp_adj; pass azp_adj = colsum(b) "
                  "(w8a8.colsum), or azp_adj premultiplied by a per-tensor zero point and azp = None")
        return None
    zp = ZeroPoint()
    zp.azp_adj = as_vector(azp_adj, fn, Status.ERROR_INVALID_ZERO_POINT)
    zp.azp = as_vector(azp, fn, Status.ERROR_INVALID_ZERO_POINT) if azp is not None else Vector(
        int(DType.INT32), 0, None)
    return zp


def _ref(x):
    return ctypes.byref(x) if x is not None else None


def scaled_mm(handle, a, b, scale_a, scale_b, out, bias=None, azp=None, azp_adj=None, fn="w8a8.scaled_mm"):
    am = as_matrix(a, fn, Layout.ROW_MAJOR)
    bm = as_matrix(b, fn, Layout.COL_MAJOR)
    om = as_matrix(out, fn, Layout.ROW_MAJOR)
    sa = as_vector(scale_a, fn, Status.ERROR_INVALID_SCALE)
    sb = as_vector(scale_b, fn, Status.ERROR_INVALID_SCALE)
    bv = as_vector(bias, fn, Status.ERROR_INVALID_BIAS) if bias is not None else None
    zp = _zero_point(fn, azp, azp_adj)
    lib = load()
    with handle.lock:
        st = lib.w8a8_scaled_mm(handle.ptr, ctypes.byref(am), ctypes.byref(bm), ctypes.byref(sa),
                                ctypes.byref(sb), _ref(bv), _ref(zp), ctypes.byref(om))
        check(st, fn)


def quantize(handle, x, q, mode, scale, azp=None, scale_ub_ptr=None, fn="w8a8.quantize", silu_mul=False):
    """w8a8_quantize, or with silu_mul w8a8_silu_mul_quantize (x [M, 2I] -> q [M, I]): the two calls
    take the same arguments, and the library checks the shapes."""
    xm = as_matrix(x, fn, Layout.ROW_MAJOR)
    qm = as_matrix(q, fn, Layout.ROW_MAJOR)
    sv = as_vector(scale, fn, Status.ERROR_INVALID_SCALE)
    zv = as_vector(azp, fn, Status.ERROR_INVALID_ZERO_POINT) if azp is not None else None
    lib = load()
    call = lib.w8a8_silu_mul_quantize if silu_mul else lib.w8a8_quantize
    with handle.lock:
        st = call(handle.ptr, ctypes.byref(xm), ctypes.byref(qm), int(QuantMode(mode)), ctypes.byref(sv), _ref(zv),
                  ctypes.c_void_p(scale_ub_ptr) if scale_ub_ptr else None)
        check(st, fn)


def silu_mul_quantize(handle, x, q, mode, scale, azp=None, scale_ub_ptr=None, fn="w8a8.silu_mul_quantize"):
    quantize(handle, x, q, mode, scale, azp, scale_ub_ptr, fn, silu_mul=True)


def _block_args(a, b, scale_a, scale_b, bias, out, fn):
    """The by-reference arguments of the block-scaled calls, in their order: a, b, scale_a, scale_b (matrices, either
    layout), bias (or NULL), out."""
    bv = as_vector(bias, fn, Status.ERROR_INVALID_BIAS) if bias is not None else None
    row, col = Layout.ROW_MAJOR, Layout.COL_MAJOR
    return (ctypes.byref(as_matrix(a, fn, row)), ctypes.byref(as_matrix(b, fn, col)),
            ctypes.byref(as_matrix(scale_a, fn, row)), ctypes.byref(as_matrix(scale_b, fn, row)), _ref(bv),
            ctypes.byref(as_matrix(out, fn, row)))


def scaled_mm_blockwise(handle, a, b, scale_a, scale_b, out, bias=None, fn="w8a8.scaled_mm_blockwise"):
    """w8a8_scaled_mm_blockwise: scale_a [M, ceil(K/128)], scale_b [ceil(N/128), ceil(K/128)], either layout."""
    args = _block_args(a, b, scale_a, scale_b, bias, out, fn)
    call = _lib._optional("w8a8_scaled_mm_blockwise")
    with handle.lock:
        check(call(handle.ptr, *args), fn)


def quantize_groups(handle, x, q, scale, flags, kind="groups", fn="w8a8.quantize_fp8_groups"):
    """w8a8_quantize_groups (kind "groups"), w8a8_quantize_blocks ("blocks") or w8a8_silu_mul_quantize_groups
    ("silu_mul"): scale is a [rows, ceil(K/128)] matrix, either layout."""
    xm = as_matrix(x, fn, Layout.ROW_MAJOR)
    qm = as_matrix(q, fn, Layout.ROW_MAJOR)
    sm = as_matrix(scale, fn, Layout.ROW_MAJOR)
    call = _lib._optional({"groups": "w8a8_quantize_groups", "blocks": "w8a8_quantize_blocks",
                           "silu_mul": "w8a8_silu_mul_quantize_groups"}[kind])
    with handle.lock:
        check(call(handle.ptr, ctypes.byref(xm), ctypes.byref(qm), ctypes.byref(sm), int(flags)), fn)


def colsum(handle, b, azp_adj, fn="w8a8.colsum"):
    bm = as_matrix(b, fn, Layout.COL_MAJOR)
    av = as_vector(azp_adj, fn, Status.ERROR_INVALID_ZERO_POINT)
    lib = load()
    with handle.lock:
        check(lib.w8a8_colsum(handle.ptr, ctypes.byref(bm), ctypes.byref(av)), fn)


def all_gather_scaled_mm(comm, a, b, scale_a, scale_b, out, bias=None, azp=None, azp_adj=None, gathered=None,
                         overlap=True, fn="w8a8.all_gather_scaled_mm"):
    """gathered: None or (a_view or None, scale_view or None, azp_view or None)."""
    am = as_matrix(a, fn, Layout.ROW_MAJOR)
    bm = as_matrix(b, fn, Layout.COL_MAJOR)
    om = as_matrix(out, fn, Layout.ROW_MAJOR)
    sa = as_vector(scale_a, fn, Status.ERROR_INVALID_SCALE)
    sb = as_vector(scale_b, fn, Status.ERROR_INVALID_SCALE)
    bv = as_vector(bias, fn, Status.ERROR_INVALID_BIAS) if bias is not None else None
    zp = _zero_point(fn, azp, azp_adj)
    g = None
    if gathered is not None:
        g = Gathered()
        ga, gs, gz = gathered
        g.a = as_matrix(ga, fn, Layout.ROW_MAJOR) if ga is not None else Matrix(int(DType.INT8), 0, 0, 0, 0, None)
        g.scale_a = as_vector(gs, fn, Status.ERROR_INVALID_SCALE) if gs is not None else Vector(
            int(DType.FP32), 0, None)
        g.azp = as_vector(gz, fn, Status.ERROR_INVALID_ZERO_POINT) if gz is not None else Vector(
            int(DType.INT32), 0, None)
    opts = tp_options(overlap, fn=fn)
    with comm.lock:
        comm._entered = True  # (the bindings' own checks are behind: w8a8._tp joins the collective if they fail)
        comm._used = True
        st = load().w8a8_all_gather_scaled_mm(comm.ptr, ctypes.byref(am), ctypes.byref(bm), ctypes.byref(sa),
                                              ctypes.byref(sb), _ref(bv), _ref(zp), ctypes.byref(om), _ref(g),
                                              ctypes.byref(opts))
        check(st, fn)


def scaled_mm_reduce_scatter(comm, a, b, scale_a, scale_b, out, bias=None, azp=None, azp_adj=None, overlap=True,
                             fn="w8a8.scaled_mm_reduce_scatter", partials="fp32"):
    am = as_matrix(a, fn, Layout.ROW_MAJOR)
    bm = as_matrix(b, fn, Layout.COL_MAJOR)
    om = as_matrix(out, fn, Layout.ROW_MAJOR)
    sa = as_vector(scale_a, fn, Status.ERROR_INVALID_SCALE)
    sb = as_vector(scale_b, fn, Status.ERROR_INVALID_SCALE)
    bv = as_vector(bias, fn, Status.ERROR_INVALID_BIAS) if bias is not None else None
    zp = _zero_point(fn, azp, azp_adj)
    opts = tp_options(overlap, partials, fn=fn)
    with comm.lock:
        comm._entered = True
        comm._used = True
        st = load().w8a8_scaled_mm_reduce_scatter(comm.ptr, ctypes.byref(am), ctypes.byref(bm), ctypes.byref(sa),
                                                  ctypes.byref(sb), _ref(bv), _ref(zp), ctypes.byref(om),
                                                  ctypes.byref(opts))
        check(st, fn)


def tp_blockwise(op, comm, a, b, scale_a, scale_b, out, bias=None, overlap=True, partials="fp32", fn=None):
    """w8a8_all_gather_scaled_mm_blockwise (op "ag") or w8a8_scaled_mm_reduce_scatter_blockwise ("rs"): scale_a and
    scale_b are matrices (block scales), either layout."""
    args = _block_args(a, b, scale_a, scale_b, bias, out, fn)
    opts = tp_options(overlap, partials, fn=fn)
    call = _lib._optional("w8a8_all_gather_scaled_mm_blockwise" if op == "ag" else
                          "w8a8_scaled_mm_reduce_scatter_blockwise")
    with comm.lock:
        comm._entered = True
        comm._used = True
        check(call(comm.ptr, *args, ctypes.byref(opts)), fn)


# --------------------------------------------------------------------------- argument helpers

OUT_DTYPES = {"bf16": DType.BF16, "bfloat16": DType.BF16, "fp16": DType.FP16, "float16": DType.FP16,
              "half": DType.FP16, "fp32": DType.FP32, "float32": DType.FP32, "float": DType.FP32}


def quant_mode(scale_given, per_token):
    if scale_given:
        return QuantMode.STATIC_PER_TENSOR
    return QuantMode.DYNAMIC_PER_TOKEN if per_token else QuantMode.DYNAMIC_PER_TENSOR


# --------------------------------------------------------------------------- the fast paths
# The front ends' common case (2-D row-major a and out, column-major b, contiguous vectors) packs the
# descriptors with one struct.pack_into into the handle's argument block and calls the library through
# c_void_p prototypes (_lib.FAST): no ctypes structures, enums or layout analysis per call. Anything
# else takes the descriptor path above, which also words the bindings' own errors; the library
# validates every call either way.

_MAT = "iiqqqQ"  # w8a8_matrix: dtype, layout, rows, cols, ld, data (40 bytes)
_VEC = "i4xqQ"   # w8a8_vector: dtype, len, data (24 bytes)
PACK_MM = struct.Struct("=" + _MAT * 3 + _VEC * 2)       # a, b, out, scale_a, scale_b
PACK_MM_BIAS = struct.Struct("=" + _MAT * 3 + _VEC * 3)  # ... and bias
PACK_Q = struct.Struct("=" + _MAT * 2 + _VEC)            # x, q, scale
PACK_Q_AZP = struct.Struct("=" + _MAT * 2 + _VEC * 2)    # ... and azp
FAST_OK = (ctypes.sizeof(ctypes.c_void_p) == 8 and ctypes.sizeof(Matrix) == 40 and ctypes.sizeof(Vector) == 24
           and PACK_MM_BIAS.size <= _lib.ARG_BLOCK_BYTES)


def _closed():
    return make_error(Status.ERROR_INVALID_HANDLE, "w8a8 handle was closed")


def _mm_call(h, fields, bias, fn):
    hp = h.addr
    if hp is None:
        raise _closed()
    p = h.args_addr
    if bias is None:
        PACK_MM.pack_into(h.args, 0, *fields)
        st = _lib.FAST["w8a8_scaled_mm"](hp, p, p + 40, p + 120, p + 144, None, None, p + 80)
    else:
        PACK_MM_BIAS.pack_into(h.args, 0, *fields, *bias)
        st = _lib.FAST["w8a8_scaled_mm"](hp, p, p + 40, p + 120, p + 144, p + 168, None, p + 80)
    if st:
        check(st, fn)


def mm_fast(h, fields, bias, fn="w8a8.scaled_mm", locked=True):
    """w8a8_scaled_mm with a, b, out, scale_a, scale_b given as PACK_MM's 24 field values; bias: None or
    (dtype, len, data). locked=False for a handle that only the calling thread uses."""
    if locked:
        with h.lock:
            _mm_call(h, fields, bias, fn)
    else:
        _mm_call(h, fields, bias, fn)


def _quant_call(h, fields, mode, azp, scale_ub_ptr, fn, silu_mul):
    hp = h.addr
    if hp is None:
        raise _closed()
    p = h.args_addr
    call = _lib.FAST["w8a8_silu_mul_quantize" if silu_mul else "w8a8_quantize"]
    if azp is None:
        PACK_Q.pack_into(h.args, 0, *fields)
        st = call(hp, p, p + 40, mode, p + 80, None, scale_ub_ptr)
    else:
        PACK_Q_AZP.pack_into(h.args, 0, *fields, *azp)
        st = call(hp, p, p + 40, mode, p + 80, p + 104, scale_ub_ptr)
    if st:
        check(st, fn)


def quantize_fast(h, fields, mode, azp, scale_ub_ptr, fn, silu_mul=False, locked=True):
    """w8a8_quantize (or w8a8_silu_mul_quantize) with x, q, scale as PACK_Q's 15 field values; azp: None or
    (dtype, len, data); scale_ub_ptr: None or the address of one fp32."""
    if locked:
        with h.lock:
            _quant_call(h, fields, mode, azp, scale_ub_ptr, fn, silu_mul)
    else:
        _quant_call(h, fields, mode, azp, scale_ub_ptr, fn, silu_mul)
