"""The fused tensor-parallel calls as torch custom ops, with the signatures of PyTorch's
torch.ops.symm_mem.fused_all_gather_scaled_matmul and fused_scaled_matmul_reduce_scatter
(torch/distributed/_symmetric_memory), so that a torch.compile graph holds each as one node:

  torch.ops.w8a8.fused_all_gather_scaled_matmul(A, Bs, A_scale, B_scales, gather_dim, group_name, biases,
      result_scales, out_dtypes, use_fast_accum) -> (A_gathered, [A_gathered @ B_i ...])
  torch.ops.w8a8.fused_scaled_matmul_reduce_scatter(A, B, A_scale, B_scale, reduce_op, orig_scatter_dim,
      scatter_dim_after_maybe_reshape, group_name, output_shape, bias=None, result_scale=None,
      out_dtype=None, use_fast_accum=False) -> this rank's rows of the sum over ranks of A_r @ B_r

group_name names a w8a8.Comm registered with w8a8.torch.register_group (which also carries the overlap
and partials options). Scales follow torch._scaled_mm: A_scale one element (tensor-wise) or one per row
([..., 1]; for the all-gather either this rank's rows or, replicated, every rank's), B_scale(s) one
element or one per column ([1, N]). Refused, each with a W8A8Error naming the argument:
  - result_scales / result_scale other than None (w8a8 writes no fp8 outputs for them to scale);
  - out_dtypes / out_dtype None (torch._scaled_mm would return A's fp8 dtype): pass bf16, fp16 or fp32;
  - gather_dim, orig_scatter_dim, scatter_dim_after_maybe_reshape other than 0 (w8a8 gathers and scatters
    rows: the leading dimension of [..., K]);
  - reduce_op other than "sum" (the reduction is an fp32 sum in rank order; "avg" is not provided).
use_fast_accum selects w8a8_set_fp8_accum(FAST) on the communicator's handle for that GEMM (fp8 only).
With several Bs, the first GEMM is fused with the all-gather and the others run on the gathered rows.
Shards are even, as symm_mem's (a 2-D reduce-scatter output may also split rows unevenly, w8a8_tp_shard_rows).
"""
import torch

from . import _core
from . import _tp
from . import torch as _wt
from ._lib import Fp8Accum, Status, make_error, shard_rows

AG_NAME = "w8a8::fused_all_gather_scaled_matmul"
RS_NAME = "w8a8::fused_scaled_matmul_reduce_scatter"
AG_SCHEMA = ("(Tensor A, Tensor[] Bs, Tensor A_scale, Tensor[] B_scales, int gather_dim, str group_name, "
             "Tensor?[] biases, Tensor?[] result_scales, ScalarType?[] out_dtypes, bool[] use_fast_accum) "
             "-> (Tensor, Tensor[])")
RS_SCHEMA = ("(Tensor A, Tensor B, Tensor A_scale, Tensor B_scale, str reduce_op, int orig_scatter_dim, "
             "int scatter_dim_after_maybe_reshape, str group_name, int[]? output_shape, Tensor? bias=None, "
             "Tensor? result_scale=None, ScalarType? out_dtype=None, bool use_fast_accum=False) -> Tensor")
AG_FN = "w8a8.fused_all_gather_scaled_matmul"
RS_FN = "w8a8.fused_scaled_matmul_reduce_scatter"


def _bad(status, fn, msg):
    return make_error(status, "%s: %s" % (fn, msg))


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def _out_dtype(d, what, fn):
    if d is None:
        raise _bad(Status.ERROR_INVALID_DTYPE, fn, "%s is None: torch._scaled_mm would return A's dtype (fp8), which "
                   "w8a8 does not write; pass torch.bfloat16, torch.float16 or torch.float32" % what)
    if isinstance(d, int) and not isinstance(d, bool):
        # a ScalarType?[] list reaches the op as c10::ScalarType codes (torch's own order: 5 half, 6 float,
        # 15 bfloat16), not as torch.dtype objects
        d = {5: torch.float16, 6: torch.float32, 15: torch.bfloat16}.get(d, d)
    return _wt._out_dtype(d, fn)


def _ag_check(A, Bs, B_scales, gather_dim, biases, result_scales, out_dtypes, use_fast_accum, fn):
    n = len(Bs)
    if n < 1:
        raise _bad(Status.ERROR_INVALID_VALUE, fn, "Bs is empty; pass at least one weight")
    for name, lst in (("B_scales", B_scales), ("biases", biases), ("result_scales", result_scales),
                      ("out_dtypes", out_dtypes), ("use_fast_accum", use_fast_accum)):
        if len(lst) != n:
            raise _bad(Status.ERROR_INVALID_VALUE, fn, "len(%s) is %d but len(Bs) is %d" % (name, len(lst), n))
    for i, r in enumerate(result_scales):
        if r is not None:
            raise _bad(Status.ERROR_INVALID_SCALE, fn, "result_scales[%d] is given; w8a8 writes bf16/fp16/fp32 outputs "
                       "only and takes no result scale (pass None)" % i)
    if A.dim() < 2:
        raise _bad(Status.ERROR_INVALID_SHAPE, fn, "A must be [..., K] with at least 2 dimensions; got %s"
                   % (tuple(A.shape),))
    if gather_dim != 0:
        raise _bad(Status.ERROR_INVALID_VALUE, fn, "gather_dim is %d; w8a8 gathers the leading dimension of A "
                   "(gather_dim 0) only" % gather_dim)
    return [_out_dtype(d, "out_dtypes[%d]" % i, fn) for i, d in enumerate(out_dtypes)]


def _ag_fake(A, Bs, A_scale, B_scales, gather_dim, group_name, biases, result_scales, out_dtypes, use_fast_accum):
    fn = AG_FN
    comm = _tp.group(group_name, fn)[0]
    dts = _ag_check(A, Bs, B_scales, gather_dim, biases, result_scales, out_dtypes, use_fast_accum, fn)
    shape = [A.shape[0] * comm.size] + list(A.shape[1:])
    return A.new_empty(shape), [A.new_empty(shape[:-1] + [B.shape[1]], dtype=d) for B, d in zip(Bs, dts)]


def _row_scale(A_scale, A, fn, name, comm=None):
    """A_scale as a vector over the rows of A ([..., K] -> M rows): one element, or one per row ([..., 1]);
    with comm (the all-gather), also the replicated form: every rank's rows, of which this rank's are taken."""
    if A_scale.numel() == 1:
        return A_scale
    lead = tuple(A.shape[:-1])
    if A_scale.dim() == A.dim() and A_scale.shape[-1] == 1:
        s_lead = tuple(A_scale.shape[:-1])
        if s_lead == lead:
            return A_scale.reshape(-1) if A_scale.is_contiguous() else A_scale
        if comm is not None and s_lead == (lead[0] * comm.size,) + lead[1:]:
            m0 = lead[0]
            return A_scale.narrow(0, comm.rank * m0, m0)
    raise _bad(Status.ERROR_INVALID_SCALE, fn, "%s has shape %s for A of shape %s; expected one element (tensor-wise) "
               "or one per row: %s%s" % (name, tuple(A_scale.shape), tuple(A.shape), lead + (1,),
                                         "" if comm is None else " (this rank's rows) or %s (every rank's rows)"
                                         % ((lead[0] * comm.size,) + lead[1:] + (1,),)))


class _Accum:
    """w8a8_set_fp8_accum on the communicator's handle for one GEMM, restored afterwards (fp8 only)."""

    def __init__(self, comm, A, fast):
        self.h = comm.handle
        self.want = int(Fp8Accum.FAST if fast else Fp8Accum.PRECISE)
        self.on = A.dtype == _wt._FP8 and self.h.fp8_accum != self.want

    def __enter__(self):
        if self.on:
            self.prev = self.h.fp8_accum
            self.h.set_fp8_accum(self.want)
        return self

    def __exit__(self, *exc):
        if self.on:
            self.h.set_fp8_accum(self.prev)
        return False


def _ag_impl(A, Bs, A_scale, B_scales, gather_dim, group_name, biases, result_scales, out_dtypes, use_fast_accum):
    fn = AG_FN
    comm, overlap, _ = _tp.group(group_name, fn)
    comm._entered = False
    try:
        dts = _ag_check(A, Bs, B_scales, gather_dim, biases, result_scales, out_dtypes, use_fast_accum, fn)
        a2 = _wt._rows(A, "A", fn)
        sa = _row_scale(A_scale, A, fn, "A_scale", comm)
        with _Accum(comm, A, use_fast_accum[0]):
            out0, g = _tp._all_gather(comm, a2, Bs[0], sa, B_scales[0], dts[0], biases[0], None, None, None, None,
                                      True, overlap, fn)
        ga, gs = g[0], g[1]
        outs = [out0]
        dev = A.device
        for i in range(1, len(Bs)):  # the other weights, on the gathered rows, on the communicator's handle
            o = torch.empty((ga.shape[0], Bs[i].shape[1]), dtype=dts[i], device=dev)
            with _Accum(comm, A, use_fast_accum[i]):
                _core.scaled_mm(comm.handle, _wt.view(ga, "a", fn, dev), _wt.view(Bs[i], "Bs[%d]" % i, fn, dev),
                                _wt.view(gs, "A_scale", fn, dev), _wt.view(B_scales[i], "B_scales[%d]" % i, fn, dev),
                                _wt.view(o, "out", fn, dev), _wt._opt(biases[i], "biases[%d]" % i, fn, dev), fn=fn)
            outs.append(o)
    except Exception:
        if not comm._entered:
            _tp._join_failed(comm, "ag")
        raise
    lead = [ga.shape[0] // _prod(A.shape[1:-1])] + list(A.shape[1:-1])
    return ga.view(lead + [A.shape[-1]]), [o.view(lead + [o.shape[1]]) for o in outs]


def _rs_check(A, B, reduce_op, orig_scatter_dim, scatter_dim_after_maybe_reshape, output_shape, result_scale,
              out_dtype, comm, fn):
    """The result's shape, after the checks that need no data."""
    if reduce_op != "sum":
        raise _bad(Status.ERROR_INVALID_VALUE, fn, "reduce_op is %r; w8a8 reduces with an fp32 sum in rank order "
                   "(\"sum\") only" % (reduce_op,))
    if result_scale is not None:
        raise _bad(Status.ERROR_INVALID_SCALE, fn, "result_scale is given; w8a8 writes bf16/fp16/fp32 outputs only "
                   "and takes no result scale (pass None)")
    out_dtype = _out_dtype(out_dtype, "out_dtype", fn)
    if A.dim() < 2 or B.dim() != 2:
        raise _bad(Status.ERROR_INVALID_SHAPE, fn, "A must be [..., K] (at least 2-D) and B [K, N]; got %s and %s"
                   % (tuple(A.shape), tuple(B.shape)))
    if orig_scatter_dim != 0 or scatter_dim_after_maybe_reshape != 0:
        raise _bad(Status.ERROR_INVALID_VALUE, fn, "orig_scatter_dim %d, scatter_dim_after_maybe_reshape %d: w8a8 "
                   "scatters the leading dimension (0) only" % (orig_scatter_dim, scatter_dim_after_maybe_reshape))
    N = B.shape[1]
    shape = list(output_shape) if output_shape is not None else list(A.shape[:-1]) + [N]
    M = _prod(A.shape[:-1])
    if len(shape) < 2 or shape[-1] != N or _prod(shape[:-1]) != M:
        raise _bad(Status.ERROR_INVALID_SHAPE, fn, "output_shape %s does not hold A @ B of %d rows and %d columns"
                   % (tuple(shape), M, N))
    if len(shape) == 2:
        return [shard_rows(shape[0], comm.size, comm.rank)[1], N], out_dtype
    if shape[0] % comm.size:
        raise _bad(Status.ERROR_INVALID_SHAPE, fn, "output_shape[0] is %d, not a multiple of the group's %d ranks "
                   "(a 2-D output may be split unevenly; an N-D one cannot)" % (shape[0], comm.size))
    return [shape[0] // comm.size] + shape[1:], out_dtype


def _rs_fake(A, B, A_scale, B_scale, reduce_op, orig_scatter_dim, scatter_dim_after_maybe_reshape, group_name,
             output_shape, bias=None, result_scale=None, out_dtype=None, use_fast_accum=False):
    fn = RS_FN
    comm = _tp.group(group_name, fn)[0]
    shape, od = _rs_check(A, B, reduce_op, orig_scatter_dim, scatter_dim_after_maybe_reshape, output_shape,
                          result_scale, out_dtype, comm, fn)
    return A.new_empty(shape, dtype=od)


def _rs_impl(A, B, A_scale, B_scale, reduce_op, orig_scatter_dim, scatter_dim_after_maybe_reshape, group_name,
             output_shape, bias=None, result_scale=None, out_dtype=None, use_fast_accum=False):
    fn = RS_FN
    comm, overlap, partials = _tp.group(group_name, fn)
    comm._entered = False
    try:
        shape, od = _rs_check(A, B, reduce_op, orig_scatter_dim, scatter_dim_after_maybe_reshape, output_shape,
                              result_scale, out_dtype, comm, fn)
        a2 = _wt._rows(A, "A", fn)
        sa = _row_scale(A_scale, A, fn, "A_scale")
        with _Accum(comm, A, use_fast_accum):
            out = _tp._reduce_scatter(comm, a2, B, sa, B_scale, od, bias, None, None, None, overlap, partials, fn)
    except Exception:
        if not comm._entered:
            _tp._join_failed(comm, "rs")
        raise
    return out.view(shape)


fused_all_gather_scaled_matmul = torch.library.custom_op(AG_NAME, _ag_impl, mutates_args=(), schema=AG_SCHEMA)
fused_all_gather_scaled_matmul.register_fake(_ag_fake)
fused_scaled_matmul_reduce_scatter = torch.library.custom_op(RS_NAME, _rs_impl, mutates_args=(), schema=RS_SCHEMA)
fused_scaled_matmul_reduce_scatter.register_fake(_rs_fake)
