"""w8a8: W8A8 (int8 / fp8-e4m3) scaled GEMM and quantizers from Python, through ctypes.

    import torch, w8a8
    q, s = w8a8.quantize_fp8(x, use_per_token_if_dynamic=True)         # x: [M, K] bf16 on cuda
    y = w8a8.scaled_mm(q, w_q.t(), s, w_scale, out_dtype=torch.bfloat16)  # w_q: [N, K] fp8, w_scale: (1, N)

The same calls take NumPy arrays (CPU backend) and other DLPack producers (CuPy, JAX, ...). Every
function dispatches on the type of its first array argument: torch tensors go to w8a8.torch (custom
ops torch.ops.w8a8.*, CUDA graphs, torch.compile), NumPy arrays to w8a8.numpy, other objects with
__dlpack__ to w8a8.dlpack (CPU ones as NumPy arrays over their memory; CUDA ones on the CUDA backend,
outputs passed with out=). w8a8.vllm answers to vLLM's _custom_ops names (cutlass_scaled_mm,
scaled_fp8_quant, ...); w8a8.torch also registers the fused TP calls as torch.ops.w8a8.fused_* with
torch.ops.symm_mem's signatures (register_group names their communicator). The library is the
package's own (an installed wheel carries it), else $W8A8_LIBRARY (a file or a directory), else the
repository's build/lib, else the system's loader path; w8a8.library_path() tells which.

Conventions (torch._scaled_mm / vLLM cutlass_scaled_mm):
  a [M, K] row-major int8 / fp8 (or [..., K]: the leading dimensions viewed as M rows, out [..., N]),
  b [K, N] column-major (the weights [N, K] passed as w.t()),
  scale_a: 1 or M fp32 elements (shape (), (1,), (M, 1)), scale_b: 1 or N (shape (), (1,), (1, N)),
  bias: N elements of out_dtype, azp / azp_adj: int32 zero point and correction (see colsum).
Strides are used as given; a layout w8a8 cannot describe raises InvalidLayoutError, never a copy.
Every failure raises a W8A8Error subclass carrying the library's status and message.
silu_mul_quantize_fp8 / _int8 take x [..., 2I] (gate, then up) and quantize silu(gate) * up in one pass.
"""
from . import _lib
from ._lib import (DeviceKind, DType, Fp8Accum, Kernel, Layout, QuantMode, Status, W8A8Error, cuda_device_count,
                   library_path, shard_rows, version, version_string)
from ._lib import ERROR_CLASSES as _ERROR_CLASSES
from ._tp import Comm, register_group, unregister_group

__version__ = "%d.%d.%d" % _lib.HEADER_VERSION

# Export the per-status exception classes (InvalidScaleError, NotBuiltError, ...).
for _cls in _ERROR_CLASSES.values():
    globals()[_cls.__name__] = _cls
del _cls


_fronts = {}
_ndarray = None  # numpy.ndarray once w8a8.numpy is loaded: the common case's test, one identity check
_numpy_front = None


def _front(x):
    """w8a8.torch for torch tensors (Tensor, Parameter, fake/functional tensors), w8a8.numpy for NumPy
    arrays and anything else without __dlpack__, w8a8.dlpack for other DLPack producers (CuPy, JAX, ...).
    Decided by the type, with the front modules cached at first use, so that torch.compile traces this
    without imports or sys.modules look-ups."""
    global _ndarray, _numpy_front
    t = type(x)
    if t is _ndarray:
        return _numpy_front
    if getattr(t, "__module__", "").startswith("torch"):
        kind = "torch"
    elif hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__") and not _is_ndarray(x):
        kind = "dlpack"
    else:
        kind = "numpy"
    f = _fronts.get(kind)
    if f is None:
        import importlib
        f = _fronts[kind] = importlib.import_module("w8a8." + kind)
        if kind == "numpy":
            import numpy
            _ndarray, _numpy_front = numpy.ndarray, f
    return f


def _is_ndarray(x):
    import numpy
    return isinstance(x, numpy.ndarray)


def scaled_mm(a, b, scale_a, scale_b, out_dtype=None, bias=None, azp=None, azp_adj=None, out=None):
    """out = scale_a * scale_b * (a @ b) (+ bias); with azp_adj, the int8 zero-point correction
    (azp per tensor / per token times azp_adj = colsum(b); azp None: azp_adj premultiplied).
    a: [M, K] or [..., K] (the leading dimensions are viewed as M rows, never copied; out is then [..., N]).
    out_dtype: bf16 (default), fp16 or fp32 (torch dtypes, NumPy dtypes or 'bf16'/'fp16'/'fp32')."""
    return _front(a).scaled_mm(a, b, scale_a, scale_b, "bf16" if out_dtype is None else out_dtype, bias, azp,
                               azp_adj, out)


def quantize_fp8(x, scale=None, scale_ub=None, use_per_token_if_dynamic=False, out=None):
    """fp8 e4m3fn quantization, as vLLM's scaled_fp8_quant. scale given: static per-tensor; else
    dynamic per-tensor (scale shape (1,)) or per-token (scale (M, 1), optionally bounded by scale_ub).
    Returns (q, scale)."""
    return _front(x).quantize_fp8(x, scale=scale, scale_ub=scale_ub,
                                  use_per_token_if_dynamic=use_per_token_if_dynamic, out=out)


def quantize_int8(x, scale=None, azp=None, symmetric=True, use_per_token_if_dynamic=True, out=None):
    """int8 quantization, as vLLM's scaled_int8_quant. scale given: static (azp: its zero point, for
    asymmetric); else dynamic per-token (default) or per-tensor, asymmetric when symmetric=False
    (per-token only). Returns (q, scale, azp or None)."""
    return _front(x).quantize_int8(x, scale=scale, azp=azp, symmetric=symmetric,
                                   use_per_token_if_dynamic=use_per_token_if_dynamic, out=out)


def silu_mul_quantize_fp8(x, scale=None, scale_ub=None, use_per_token_if_dynamic=False, out=None):
    """The gated MLP's activation, fused: quantize_fp8(silu(gate) * up) for x [..., 2I] with gate =
    x[..., :I] and up = x[..., I:] (vLLM's silu_and_mul layout), in one pass and with quantize_fp8's
    arguments. Returns (q [..., I] fp8 e4m3fn, scale)."""
    return _front(x).silu_mul_quantize_fp8(x, scale=scale, scale_ub=scale_ub,
                                           use_per_token_if_dynamic=use_per_token_if_dynamic, out=out)


def silu_mul_quantize_int8(x, scale=None, azp=None, symmetric=True, use_per_token_if_dynamic=True, out=None):
    """quantize_int8(silu(gate) * up) for x [..., 2I] (gate = x[..., :I], up = x[..., I:]) in one pass,
    with quantize_int8's arguments. Returns (q [..., I] int8, scale, azp or None)."""
    return _front(x).silu_mul_quantize_int8(x, scale=scale, azp=azp, symmetric=symmetric,
                                            use_per_token_if_dynamic=use_per_token_if_dynamic, out=out)


def scaled_mm_blockwise(a, b, scale_a, scale_b, out_dtype=None, bias=None, out=None):
    """Block-scaled fp8 (DeepSeek-V3 style): scale_a [M, ceil(K/128)] per token per 128 channels, scale_b
    [ceil(N/128), ceil(K/128)] per 128 x 128 weight block, either layout. NumPy arrays, or torch tensors on
    the CPU or a GPU (the Hopper kernel on sm_90a, a portable CUDA kernel on other GPUs)."""
    return _front(a).scaled_mm_blockwise(a, b, scale_a, scale_b, "bf16" if out_dtype is None else out_dtype, bias,
                                         out)


def quantize_fp8_groups(x, group_size=128, column_major_scales=False, scale_ue8m0=False, out=None):
    """vLLM's per_token_group_quant_fp8: (q, scale [M, ceil(K/128)])."""
    return _front(x).quantize_fp8_groups(x, group_size, column_major_scales, scale_ue8m0, out)


def quantize_fp8_blocks(w, block_size=128, scale_ue8m0=False, out=None):
    """128 x 128 block quantization of weights [N, K]: (q, scale [ceil(N/128), ceil(K/128)])."""
    return _front(w).quantize_fp8_blocks(w, block_size, scale_ue8m0, out)


def silu_mul_quantize_fp8_groups(x, group_size=128, column_major_scales=False, scale_ue8m0=False, out=None):
    """silu(gate) * up for x [..., 2I], quantized per token per 128 channels: (q [..., I], scale)."""
    return _front(x).silu_mul_quantize_fp8_groups(x, group_size, column_major_scales, scale_ue8m0, out)


def colsum(b, out=None):
    """azp_adj[n] = sum_k b[k, n] (int32) of an int8 column-major b [K, N] (pass w.t()); into out (N int32)
    when given."""
    return _front(b).colsum(b) if out is None else _front(b).colsum(b, out=out)


def all_gather_scaled_mm(comm, a, b, scale_a, scale_b, out_dtype="bf16", bias=None, azp=None, azp_adj=None,
                         out=None, m_total=None, return_gathered=False, overlap=True):
    from . import _tp
    return _tp.all_gather_scaled_mm(comm, a, b, scale_a, scale_b, out_dtype, bias, azp, azp_adj, out, m_total,
                                    return_gathered, overlap)


def scaled_mm_reduce_scatter(comm, a, b, scale_a, scale_b, out_dtype="bf16", bias=None, azp=None, azp_adj=None,
                             out=None, overlap=True, partials="fp32"):
    from . import _tp
    return _tp.scaled_mm_reduce_scatter(comm, a, b, scale_a, scale_b, out_dtype, bias, azp, azp_adj, out, overlap,
                                        partials)


def all_gather_scaled_mm_blockwise(comm, a, b, scale_a, scale_b, out_dtype="bf16", bias=None, out=None, m_total=None,
                                   overlap="auto"):
    from . import _tp
    return _tp.all_gather_scaled_mm_blockwise(comm, a, b, scale_a, scale_b, out_dtype, bias, out, m_total, overlap)


def scaled_mm_reduce_scatter_blockwise(comm, a, b, scale_a, scale_b, out_dtype="bf16", bias=None, out=None,
                                       overlap="auto", partials="fp32"):
    from . import _tp
    return _tp.scaled_mm_reduce_scatter_blockwise(comm, a, b, scale_a, scale_b, out_dtype, bias, out, overlap,
                                                  partials)


from . import _tp as _tp_mod  # noqa: E402

all_gather_scaled_mm.__doc__ = _tp_mod.all_gather_scaled_mm.__doc__
scaled_mm_reduce_scatter.__doc__ = _tp_mod.scaled_mm_reduce_scatter.__doc__
all_gather_scaled_mm_blockwise.__doc__ = _tp_mod.all_gather_scaled_mm_blockwise.__doc__
scaled_mm_reduce_scatter_blockwise.__doc__ = _tp_mod.scaled_mm_reduce_scatter_blockwise.__doc__

__all__ = ["scaled_mm", "scaled_mm_blockwise", "quantize_fp8_groups", "quantize_fp8_blocks",
           "silu_mul_quantize_fp8_groups", "quantize_fp8", "quantize_int8", "silu_mul_quantize_fp8", "silu_mul_quantize_int8",
           "colsum", "all_gather_scaled_mm", "scaled_mm_reduce_scatter", "all_gather_scaled_mm_blockwise",
           "scaled_mm_reduce_scatter_blockwise", "Comm", "register_group", "unregister_group",
           "W8A8Error", "Status", "DType",
           "Layout", "Kernel", "Fp8Accum", "QuantMode", "DeviceKind", "version", "version_string", "library_path", "cuda_device_count", "shard_rows"] + [
    c.__name__ for c in _ERROR_CLASSES.values()]
