"""vLLM's names and signatures (vllm/_custom_ops.py) on w8a8: the W8A8 calls of vLLM's linear layers,

    from w8a8 import vllm as ops
    q, s = ops.scaled_fp8_quant(x, use_per_token_if_dynamic=True)       # x [M, K] bf16
    y = ops.cutlass_scaled_mm(q, w_q.t(), s, w_scale, torch.bfloat16)   # w_q [N, K] fp8, w_scale [N, 1]

with vLLM's conventions: a [..., K] int8 / float8_e4m3fn (leading dimensions flattened to M, the result
[..., N]); b [K, N] column-major (b.t() contiguous: the [N, K] weight passed as w.t()); scale_a fp32 with
1 (per-tensor) or M ([M, 1], per-token) elements; scale_b fp32 with 1 or N ([N, 1] or [1, N]) elements;
bias N elements of out_dtype; scaled_fp8_quant returns scales of shape [1] (per-tensor) or [rows, 1]
(per-token), scaled_int8_quant [M, 1]. torch tensors only (CUDA, or CPU through the CPU backend); every
call is the w8a8.torch custom op underneath, so torch.compile and CUDA graphs take them as they are.

Block-scaled fp8 (DeepSeek-V3 style) as vLLM passes it: cutlass_scaled_mm takes scale_a [M, ceil(K/128)] and
scale_b [ceil(K/128), ceil(N/128)] where the scales' sizes are not the per-tensor / per-token / per-channel ones
(vLLM's own test, scaled_mm_helper.hpp), and per_token_group_quant_fp8 makes such activations. These run on
w8a8's block-scaled kernels (the Hopper kernel on sm_90a, a portable one elsewhere) through the custom op
w8a8::scaled_mm_blockwise_out, so torch.compile takes them too.

Where w8a8 differs from vLLM:
  - scaled_fp8_quant's group_shape other than per-tensor is refused (use per_token_group_quant_fp8);
  - per_token_group_quant_fp8's smallest scale is 1 / (448 * 512) (w8a8's MIN_SCALE), not eps / 448;
  - nothing is copied: an input whose rows cannot be viewed as [M, K] raises InvalidLayoutError where
    vLLM would call .contiguous();
  - out_dtype may also be torch.float32 (vLLM asserts bf16 / fp16);
  - fp8 e4m3fn only (never ROCm's e4m3fnuz).
Bad arguments raise w8a8's errors (W8A8Error subclasses, also ValueError / TypeError) where vLLM asserts.
"""
import torch

from . import torch as _wt
from ._lib import Status, make_error

_FP8 = getattr(torch, "float8_e4m3fn", None)

__all__ = ["cutlass_scaled_mm", "cutlass_scaled_mm_azp", "scaled_fp8_quant", "scaled_int8_quant",
           "per_token_group_quant_fp8",
           "cutlass_scaled_mm_supports_fp8", "cutlass_scaled_mm_supports_block_fp8",
           "cutlass_scaled_mm_supports_fp4", "cutlass_group_gemm_supported"]


def cutlass_scaled_mm_supports_fp8(cuda_device_capability: int) -> bool:
    """fp8 GEMMs need compute capability 8.9 or newer (capability given as 10 * major + minor, e.g. 90)."""
    return int(cuda_device_capability) >= 89


def cutlass_scaled_mm_supports_block_fp8(cuda_device_capability: int) -> bool:
    """Block-scaled fp8 runs on every GPU w8a8 runs on: the Hopper kernel on sm_90a, a portable kernel (software
    e4m3 decoding) on the others."""
    return int(cuda_device_capability) >= 75


def cutlass_scaled_mm_supports_fp4(cuda_device_capability: int) -> bool:
    return False


def cutlass_group_gemm_supported(cuda_device_capability: int) -> bool:
    return False


def _no_group_scales(fn, a, scale_a, scale_b):
    blockwise_a = isinstance(scale_a, torch.Tensor) and scale_a.dim() >= 2 and scale_a.shape[-1] != 1
    blockwise_b = isinstance(scale_b, torch.Tensor) and scale_b.dim() == 2 and scale_b.shape[0] != 1 and \
        scale_b.shape[1] != 1
    if blockwise_a or blockwise_b:
        raise make_error(Status.ERROR_INVALID_SCALE, "%s: scale_a %s and scale_b %s are blockwise (group) scales, "
                         "which the zero-point GEMM does not take (as in vLLM); it takes per-tensor or per-token "
                         "scale_a and per-tensor or per-channel scale_b (block scales: cutlass_scaled_mm)"
                         % (fn, tuple(scale_a.shape), tuple(scale_b.shape)))


def _numel(t):
    return t.numel() if isinstance(t, torch.Tensor) else 1


def cutlass_scaled_mm(a, b, scale_a, scale_b, out_dtype, bias=None):
    """out = (scale_a * a) @ (scale_b * b) (+ bias), cast to out_dtype; a [..., K], b [K, N] column-major.
    Scales of other sizes than 1 / M and 1 / N are block scales, as vLLM decides: scale_a [M, ceil(K/128)],
    scale_b [ceil(K/128), ceil(N/128)]."""
    M = 1
    for d in (a.shape[:-1] if isinstance(a, torch.Tensor) else ()):
        M *= int(d)
    N = b.shape[1] if isinstance(b, torch.Tensor) and b.dim() == 2 else 0
    if _numel(scale_a) in (1, M) and _numel(scale_b) in (1, N):
        return _wt.scaled_mm(a, b, scale_a, scale_b, out_dtype, bias)
    fn = "cutlass_scaled_mm"
    if not (isinstance(scale_a, torch.Tensor) and isinstance(scale_b, torch.Tensor) and scale_a.dim() == 2 and
            scale_b.dim() == 2):
        raise make_error(Status.ERROR_INVALID_SCALE, "%s: block scales must be 2-D tensors: scale_a [M, ceil(K/128)],"
                         " scale_b [ceil(K/128), ceil(N/128)]" % fn)
    # vLLM's scale_b is [K blocks, N blocks]; w8a8's is [N blocks, K blocks]: the transposed view, no copy
    return _wt.scaled_mm_blockwise(a, b, scale_a, scale_b.t(), out_dtype, bias)


def cutlass_scaled_mm_azp(a, b, scale_a, scale_b, out_dtype, azp_adj, azp=None, bias=None):
    """Asymmetric int8 a: azp_adj = colsum(b) (per-channel, int32; premultiplied by the zero point in the
    per-tensor case), azp the per-token zero points (int32, M elements) or None."""
    _no_group_scales("cutlass_scaled_mm_azp", a, scale_a, scale_b)
    return _wt.scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, azp, azp_adj)


def scaled_fp8_quant(input, scale=None, num_token_padding=None, scale_ub=None, use_per_token_if_dynamic=False,
                     output=None, group_shape=None):
    """Static (scale given) or dynamic (per-tensor, or per-token with use_per_token_if_dynamic, bounded by
    scale_ub) fp8 quantization of input [M, K]. Returns (output, scale): output float8_e4m3fn
    [max(num_token_padding, M), K] (padding rows are left unwritten, as in vLLM), scale [1] or [rows, 1]
    (dynamic) or the given scale (static)."""
    fn = "scaled_fp8_quant"
    _wt._check_tensor(input, "input", fn)
    if input.dim() != 2:
        raise make_error(Status.ERROR_INVALID_SHAPE, "%s: input must be 2-D [M, K] (vLLM's convention); got shape %s"
                         % (fn, tuple(input.shape)))
    per_tensor = scale is None or tuple(group_shape or (-1, -1)) == (-1, -1) or \
        (scale.numel() if isinstance(scale, torch.Tensor) else 1) == 1
    if not per_tensor:  # (vLLM reads group_shape for static scales only)
        raise make_error(Status.ERROR_INVALID_SCALE, "%s: group_shape %s: w8a8 quantizes with one static scale per "
                         "tensor only (group_shape None or (-1, -1))" % (fn, tuple(group_shape)))
    M, K = input.shape
    rows = max(int(num_token_padding), M) if num_token_padding else M
    if output is None:
        output = torch.empty((rows, K), dtype=_FP8, device=input.device)
    else:
        _wt._check_tensor(output, "output", fn)
        if num_token_padding:
            raise make_error(Status.ERROR_INVALID_VALUE, "%s: num_token_padding is not supported with output "
                             "(as in vLLM)" % fn)
        if output.dtype != _FP8:
            raise make_error(Status.ERROR_INVALID_DTYPE, "%s: output has dtype %s; expected torch.float8_e4m3fn"
                             % (fn, output.dtype))
    q = output if rows == M else output.narrow(0, 0, M)
    if scale is not None:
        scale = _wt._const(scale, torch.float32, input.device)
        _wt._call_quant_static(input, q, scale, None)
        return output, scale
    per_token = bool(use_per_token_if_dynamic)
    s = torch.empty((rows, 1) if per_token else (1,), dtype=torch.float32, device=input.device)
    sv = s.narrow(0, 0, M) if per_token and rows != M else s
    z = torch.empty((0,), dtype=torch.int32, device=input.device)
    ub = _wt._const(scale_ub, torch.float32, input.device) if per_token else None  # vLLM bounds per-token only
    _wt._call_quant_dynamic(input, q, sv, z, per_token, ub)
    return output, s


def scaled_int8_quant(input, scale=None, azp=None, symmetric=True):
    """Static (scale given; azp with it for asymmetric) or dynamic per-token int8 quantization of input
    [..., K]. Returns (output int8 of input's shape, scale, azp or None); dynamic scales and zero points
    are [M, 1] with M = input.numel() // K."""
    fn = "scaled_int8_quant"
    if scale is not None:
        if symmetric != (azp is None):
            raise make_error(Status.ERROR_INVALID_ZERO_POINT, "%s: azp must be given for asymmetric static "
                             "quantization and only then (symmetric=%s, azp %s)"
                             % (fn, symmetric, "given" if azp is not None else "None"))
        return _wt.quantize_int8(input, scale=scale, azp=azp)
    return _wt.quantize_int8(input, symmetric=symmetric, use_per_token_if_dynamic=True)


def per_token_group_quant_fp8(x, group_size, eps=1e-10, dtype=None, column_major_scales=False, out_q=None,
                              use_ue8m0=False):
    """vLLM's per_token_group_quant_fp8 (group_size 128): (x_q [..., K] float8_e4m3fn, x_s [M, ceil(K/128)]
    float32, column-major with column_major_scales, powers of two with use_ue8m0). eps and dtype are accepted
    for the signature: the smallest scale is w8a8's MIN_SCALE, the output float8_e4m3fn."""
    if dtype is not None and dtype != _FP8:
        raise make_error(Status.ERROR_INVALID_DTYPE, "per_token_group_quant_fp8: dtype %s; w8a8 writes "
                         "torch.float8_e4m3fn" % (dtype,))
    return _wt.quantize_fp8_groups(x, group_size, column_major_scales, bool(use_ue8m0), out_q)
