"""w8a8 on torch tensors, registered as torch custom ops (torch.ops.w8a8.*).

CUDA tensors run on the CUDA backend, on the current stream of the tensors' device, with their
strides as given (no hidden copies: a layout w8a8 cannot describe is an error); the calls allocate
only their outputs (through torch's caching allocator), never synchronize, and can be captured in
CUDA graphs. CPU tensors run on the CPU backend. The ops have fake (meta) implementations, so
torch.compile traces them as single nodes. Eager calls on plain tensors skip the ops' dispatch (the
same library call, packed straight into the handle's argument block; see _mm_fast). Activations may be
[..., K]: the leading dimensions are viewed as rows (never copied), and outputs keep them.
The fused TP calls are ops too, torch.ops.w8a8.fused_all_gather_scaled_matmul and
fused_scaled_matmul_reduce_scatter with torch.ops.symm_mem's signatures (w8a8._torch_tp), their
communicator named through register_group.

Handles: one per (device, stream), created on first use and kept for the process. A handle owns a
split-K workspace that its kernels use in stream order, so two streams must not share one (calls
on different streams may run concurrently). A handle first needed while a graph is being captured
is created with the thread's capture mode relaxed (its cudaMalloc would otherwise be refused).
Graphs captured on one stream share that stream's handle, and so its workspace: torch.cuda.graph
captures on one internal stream unless given stream=, so replay such graphs one after another, or
capture each on a stream of its own to replay them concurrently.
"""
import ctypes
import threading
from typing import Optional

import torch

from . import _core
from ._lib import DType, DeviceKind, Fp8Accum, Handle, Kernel, Status, make_error

Tensor = torch.Tensor

_DT = {torch.int8: DType.INT8, torch.bfloat16: DType.BF16, torch.float16: DType.FP16, torch.float32: DType.FP32,
       torch.int32: DType.INT32}
_FP8 = getattr(torch, "float8_e4m3fn", None)
if _FP8 is not None:
    _DT[_FP8] = DType.FP8_E4M3
_TORCH_OF = {v: k for k, v in _DT.items()}

_handles = {}
_handles_lock = threading.Lock()
_kernel = Kernel.AUTO
_tls = threading.local()


def set_kernel(kernel):
    """Force a kernel (Kernel.AUTO / GENERIC / SM90 / REFERENCE on CPU) on every handle, present and
    future: for tests and benchmarks."""
    global _kernel
    with _handles_lock:
        _kernel = Kernel(kernel)
        hs = list(_handles.values())
    for h in hs + ([_tls.cpu] if getattr(_tls, "cpu", None) is not None else []):
        if _kernel_applies(h.kind, kernel):
            with h.lock:
                h.set_kernel(kernel)


def _kernel_applies(kind, kernel):
    """SM90 is a CUDA kernel and REFERENCE a CPU one: the other handles keep AUTO (the library refuses them)."""
    return kernel not in (Kernel.SM90, Kernel.REFERENCE) or (kind == DeviceKind.CUDA) == (kernel == Kernel.SM90)


# Handle settings applied to every CUDA handle, present and future: Handle method name -> value.
_cuda_settings = {}


def _set_on_cuda_handles(method, value):
    with _handles_lock:
        _cuda_settings[method] = value
        hs = list(_handles.values())
    for h in hs:
        with h.lock:
            getattr(h, method)(value)


def set_weights_constant(constant):
    """w8a8_set_weights_constant on every CUDA handle, present and future: the weights passed to
    scaled_mm are not written by the kernel right before each GEMM (inference weights)."""
    _set_on_cuda_handles("set_weights_constant", bool(constant))


def set_fp8_accum(accum):
    """w8a8_set_fp8_accum on every CUDA handle, present and future: w8a8.Fp8Accum.PRECISE (the
    default) or FAST (torch._scaled_mm's use_fast_accum=True; w8a8.h states the precision)."""
    _set_on_cuda_handles("set_fp8_accum", int(Fp8Accum(accum)))


class _RelaxedCapture:
    """cuThreadExchangeStreamCaptureMode(RELAXED) for the duration of a handle's creation."""

    def __enter__(self):
        self.mode = None
        try:
            cuda = ctypes.CDLL("libcuda.so.1")
            mode = ctypes.c_int(2)  # CU_STREAM_CAPTURE_MODE_RELAXED
            if cuda.cuThreadExchangeStreamCaptureMode(ctypes.byref(mode)) == 0:
                self.cuda, self.mode = cuda, mode
        except (OSError, AttributeError):
            pass
        return self

    def __exit__(self, *exc):
        if self.mode is not None:
            self.cuda.cuThreadExchangeStreamCaptureMode(ctypes.byref(self.mode))
        return False


def handle_for(device):
    """The handle for a tensor's device and, on CUDA, the device's current stream."""
    if device.type == "cpu":
        h = getattr(_tls, "cpu", None)
        if h is None:
            h = _tls.cpu = Handle(DeviceKind.CPU, 0)
            if _kernel_applies(DeviceKind.CPU, _kernel):
                h.set_kernel(_kernel)
        return h
    if device.type != "cuda":
        raise make_error(Status.ERROR_UNSUPPORTED_DEVICE, "w8a8: tensors on %s; w8a8 runs on cpu and cuda" % device)
    idx = device.index if device.index is not None else torch.cuda.current_device()
    stream = torch.cuda.current_stream(idx).cuda_stream
    key = (idx, stream)
    h = _handles.get(key)
    if h is not None:
        return h
    with _handles_lock:
        h = _handles.get(key)
        if h is None:
            if torch.cuda.is_current_stream_capturing():
                with _RelaxedCapture():
                    h = Handle(DeviceKind.CUDA, idx)
            else:
                h = Handle(DeviceKind.CUDA, idx)
            h.set_stream(stream)
            if _kernel != Kernel.AUTO and _kernel_applies(DeviceKind.CUDA, _kernel):
                h.set_kernel(_kernel)
            for method, value in _cuda_settings.items():
                getattr(h, method)(value)
            _handles[key] = h
    return h


_BAD = (("scale", Status.ERROR_INVALID_SCALE), ("bias", Status.ERROR_INVALID_BIAS),
        ("azp", Status.ERROR_INVALID_ZERO_POINT))


def _status_for(name):
    for k, v in _BAD:
        if k in name:
            return v
    return Status.ERROR_INVALID_DTYPE


def view(t, name, fn, device):
    """A View of a tensor, which must be on `device` (the library cannot check a CPU handle's
    pointers, and a CUDA handle's only for its own device)."""
    if not isinstance(t, torch.Tensor):
        raise make_error(_status_for(name), "%s: %s is a %s; expected a torch.Tensor" % (fn, name, type(t).__name__))
    if t.device != device:
        raise make_error(Status.ERROR_INVALID_POINTER, "%s: %s is on %s but a is on %s; every tensor must be on "
                         "the same device" % (fn, name, t.device, device))
    d = _DT.get(t.dtype)
    if d is None:
        raise make_error(_status_for(name), "%s: %s has dtype %s; w8a8 takes int8, float8_e4m3fn, bfloat16, "
                         "float16, float32, int32" % (fn, name, t.dtype))
    return _core.View(d, tuple(t.shape), tuple(t.stride()), t.data_ptr(), name)


def _opt(t, name, fn, device):
    return view(t, name, fn, device) if t is not None else None


# --------------------------------------------------------------------------- op bodies (real tensors)


def _mm_impl(a, b, scale_a, scale_b, out, bias, azp, azp_adj):
    if azp is None and azp_adj is None and _FAST and _mm_fast(a, b, scale_a, scale_b, None, bias, out) is not None:
        return
    fn = "w8a8.scaled_mm"
    dev = a.device
    vs = [view(a, "a", fn, dev), view(b, "b", fn, dev), view(scale_a, "scale_a", fn, dev),
          view(scale_b, "scale_b", fn, dev), view(out, "out", fn, dev)]
    _core.scaled_mm(handle_for(dev), vs[0], vs[1], vs[2], vs[3], vs[4], _opt(bias, "bias", fn, dev),
                    _opt(azp, "azp", fn, dev), _opt(azp_adj, "azp_adj", fn, dev), fn=fn)


def _quant_impl(x, q, mode, scale, azp, scale_ub, fn, silu_mul=False):
    if _FAST and _quant_fast(x, q, mode, scale, azp, scale_ub, fn, silu_mul):
        return
    dev = x.device
    ub = None
    if scale_ub is not None:
        v = view(scale_ub, "scale_ub", fn, dev)
        if v.dtype != DType.FP32 or scale_ub.numel() != 1:
            raise make_error(Status.ERROR_INVALID_SCALE, "%s: scale_ub must be one float32 element; got %s %s"
                             % (fn, scale_ub.dtype, tuple(scale_ub.shape)))
        ub = v.ptr
    _core.quantize(handle_for(dev), view(x, "x", fn, dev), view(q, "out", fn, dev), mode,
                   view(scale, "scale", fn, dev), _opt(azp, "azp", fn, dev), ub, fn=fn, silu_mul=silu_mul)


def _colsum_impl(b, out):
    fn = "w8a8.colsum"
    _core.colsum(handle_for(b.device), view(b, "b", fn, b.device), view(out, "azp_adj", fn, b.device), fn=fn)


def _blockwise_impl(a, b, scale_a, scale_b, out, bias):
    fn = "w8a8.scaled_mm_blockwise"
    dev = a.device
    _core.scaled_mm_blockwise(handle_for(dev), view(a, "a", fn, dev), view(b, "b", fn, dev),
                              view(scale_a, "scale_a", fn, dev), view(scale_b, "scale_b", fn, dev),
                              view(out, "out", fn, dev), view(bias, "bias", fn, dev) if bias is not None else None,
                              fn=fn)


_GROUP_FN = {"groups": "w8a8.quantize_fp8_groups", "blocks": "w8a8.quantize_fp8_blocks",
             "silu_mul": "w8a8.silu_mul_quantize_fp8_groups"}


def _groups_impl(x, q, scale, kind, ue8m0):
    fn, dev = _GROUP_FN[kind], x.device
    _core.quantize_groups(handle_for(dev), view(x, "x", fn, dev), view(q, "out", fn, dev),
                          view(scale, "scale", fn, dev), 1 if ue8m0 else 0, kind=kind, fn=fn)


# --------------------------------------------------------------------------- custom ops

_custom_op = getattr(getattr(torch, "library", None), "custom_op", None)
HAVE_CUSTOM_OPS = _custom_op is not None

if HAVE_CUSTOM_OPS:
    @_custom_op("w8a8::scaled_mm", mutates_args=())
    def _op_scaled_mm(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: torch.dtype,
                      bias: Optional[Tensor] = None, azp: Optional[Tensor] = None,
                      azp_adj: Optional[Tensor] = None) -> Tensor:
        out = torch.empty((a.shape[0], b.shape[1]), dtype=out_dtype, device=a.device)
        _mm_impl(a, b, scale_a, scale_b, out, bias, azp, azp_adj)
        return out

    @_op_scaled_mm.register_fake
    def _(a, b, scale_a, scale_b, out_dtype, bias=None, azp=None, azp_adj=None):
        return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype)

    @_custom_op("w8a8::scaled_mm_out", mutates_args=("out",))
    def _op_scaled_mm_out(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out: Tensor,
                          bias: Optional[Tensor] = None, azp: Optional[Tensor] = None,
                          azp_adj: Optional[Tensor] = None) -> None:
        _mm_impl(a, b, scale_a, scale_b, out, bias, azp, azp_adj)

    @_op_scaled_mm_out.register_fake
    def _(a, b, scale_a, scale_b, out, bias=None, azp=None, azp_adj=None):
        return None

    # Static quantization reads scale (and azp); dynamic writes them: two ops, so that a static
    # scale is never declared as mutated.
    @_custom_op("w8a8::quantize_static_", mutates_args=("q",))
    def _op_quant_static(x: Tensor, q: Tensor, scale: Tensor, azp: Optional[Tensor] = None) -> None:
        _quant_impl(x, q, 0, scale, azp, None, "w8a8.quantize")

    @_op_quant_static.register_fake
    def _(x, q, scale, azp=None):
        return None

    # azp has numel 0 when the quantization is symmetric (a mutated argument cannot be optional).
    @_custom_op("w8a8::quantize_dynamic_", mutates_args=("q", "scale", "azp"))
    def _op_quant_dynamic(x: Tensor, q: Tensor, scale: Tensor, azp: Tensor, per_token: bool,
                          scale_ub: Optional[Tensor] = None) -> None:
        _quant_impl(x, q, 2 if per_token else 1, scale, azp if azp.numel() else None, scale_ub, "w8a8.quantize")

    @_op_quant_dynamic.register_fake
    def _(x, q, scale, azp, per_token, scale_ub=None):
        return None

    # The fused SiLU-and-mul quantizer (x [M, 2I] -> q [M, I]): the same pair of ops.
    @_custom_op("w8a8::silu_mul_quantize_static_", mutates_args=("q",))
    def _op_silu_static(x: Tensor, q: Tensor, scale: Tensor, azp: Optional[Tensor] = None) -> None:
        _quant_impl(x, q, 0, scale, azp, None, "w8a8.silu_mul_quantize", silu_mul=True)

    @_op_silu_static.register_fake
    def _(x, q, scale, azp=None):
        return None

    @_custom_op("w8a8::silu_mul_quantize_dynamic_", mutates_args=("q", "scale", "azp"))
    def _op_silu_dynamic(x: Tensor, q: Tensor, scale: Tensor, azp: Tensor, per_token: bool,
                         scale_ub: Optional[Tensor] = None) -> None:
        _quant_impl(x, q, 2 if per_token else 1, scale, azp if azp.numel() else None, scale_ub,
                    "w8a8.silu_mul_quantize", silu_mul=True)

    @_op_silu_dynamic.register_fake
    def _(x, q, scale, azp, per_token, scale_ub=None):
        return None

    @_custom_op("w8a8::colsum", mutates_args=())
    def _op_colsum(b: Tensor) -> Tensor:
        out = torch.empty((b.shape[1],), dtype=torch.int32, device=b.device)
        _colsum_impl(b, out)
        return out

    @_op_colsum.register_fake
    def _(b):
        return b.new_empty((b.shape[1],), dtype=torch.int32)

    # Block scales (w8a8_scaled_mm_blockwise and the group quantizers): ops that write into outputs the public
    # functions allocate, so that torch.compile graphs hold them.
    @_custom_op("w8a8::scaled_mm_blockwise_out", mutates_args=("out",))
    def _op_blockwise_out(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out: Tensor,
                          bias: Optional[Tensor] = None) -> None:
        _blockwise_impl(a, b, scale_a, scale_b, out, bias)

    @_op_blockwise_out.register_fake
    def _(a, b, scale_a, scale_b, out, bias=None):
        return None

    @_custom_op("w8a8::quantize_groups_", mutates_args=("q", "scale"))
    def _op_groups(x: Tensor, q: Tensor, scale: Tensor, kind: str, ue8m0: bool) -> None:
        _groups_impl(x, q, scale, kind, ue8m0)

    @_op_groups.register_fake
    def _(x, q, scale, kind, ue8m0):
        return None

    def _call_blockwise_out(a, b, sa, sb, out, bias):
        if _eager_ok(a, b, sa, sb, out, bias):
            _blockwise_impl(a, b, sa, sb, out, bias)
        else:
            torch.ops.w8a8.scaled_mm_blockwise_out(a, b, sa, sb, out, bias)

    def _call_groups(x, q, scale, kind, ue8m0):
        if _eager_ok(x, q, scale):
            _groups_impl(x, q, scale, kind, ue8m0)
        else:
            torch.ops.w8a8.quantize_groups_(x, q, scale, kind, ue8m0)

    def _call_mm(a, b, sa, sb, out_dtype, bias, azp, azp_adj):
        return torch.ops.w8a8.scaled_mm(a, b, sa, sb, out_dtype, bias, azp, azp_adj)

    def _call_mm_out(a, b, sa, sb, out, bias, azp, azp_adj):
        torch.ops.w8a8.scaled_mm_out(a, b, sa, sb, out, bias, azp, azp_adj)

    # Eager calls on plain tensors skip the ops' dispatch (as scaled_mm's fast path does): the same
    # library call on the same handle; tracing, modes and autograd still see the ops.
    def _call_quant_static(x, q, scale, azp, silu_mul=False):
        if _eager_ok(x, q, scale, azp):
            _quant_impl(x, q, 0, scale, azp, None, "w8a8.silu_mul_quantize" if silu_mul else "w8a8.quantize",
                        silu_mul=silu_mul)
        elif silu_mul:
            torch.ops.w8a8.silu_mul_quantize_static_(x, q, scale, azp)
        else:
            torch.ops.w8a8.quantize_static_(x, q, scale, azp)

    def _call_quant_dynamic(x, q, scale, azp, per_token, ub, silu_mul=False):
        if _eager_ok(x, q, scale, azp, ub):
            _quant_impl(x, q, 2 if per_token else 1, scale, azp if azp.numel() else None, ub,
                        "w8a8.silu_mul_quantize" if silu_mul else "w8a8.quantize", silu_mul=silu_mul)
        elif silu_mul:
            torch.ops.w8a8.silu_mul_quantize_dynamic_(x, q, scale, azp, per_token, ub)
        else:
            torch.ops.w8a8.quantize_dynamic_(x, q, scale, azp, per_token, ub)

    def _call_colsum(b):
        return torch.ops.w8a8.colsum(b)
else:  # torch < 2.4: plain calls (no torch.compile support)
    _call_blockwise_out = _blockwise_impl
    _call_groups = _groups_impl

    def _call_mm(a, b, sa, sb, out_dtype, bias, azp, azp_adj):
        out = torch.empty((a.shape[0], b.shape[1]), dtype=out_dtype, device=a.device)
        _mm_impl(a, b, sa, sb, out, bias, azp, azp_adj)
        return out

    def _call_mm_out(a, b, sa, sb, out, bias, azp, azp_adj):
        _mm_impl(a, b, sa, sb, out, bias, azp, azp_adj)

    def _call_quant_static(x, q, scale, azp, silu_mul=False):
        _quant_impl(x, q, 0, scale, azp, None, "w8a8.silu_mul_quantize" if silu_mul else "w8a8.quantize",
                    silu_mul=silu_mul)

    def _call_quant_dynamic(x, q, scale, azp, per_token, ub, silu_mul=False):
        _quant_impl(x, q, 2 if per_token else 1, scale, azp if azp.numel() else None, ub,
                    "w8a8.silu_mul_quantize" if silu_mul else "w8a8.quantize", silu_mul=silu_mul)

    def _call_colsum(b):
        out = torch.empty((b.shape[1],), dtype=torch.int32, device=b.device)
        _colsum_impl(b, out)
        return out


# --------------------------------------------------------------------------- public functions
# These do only what tracing allows (shapes, dtypes, allocation) and call the ops.


def _check_tensor(t, name, fn):
    if not isinstance(t, torch.Tensor):
        raise make_error(_status_for(name), "%s: %s is a %s; expected a torch.Tensor" % (fn, name, type(t).__name__))


def _out_dtype(d, fn):
    if isinstance(d, str):
        d = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16,
             "half": torch.float16, "fp32": torch.float32, "float32": torch.float32}.get(d.lower(), d)
    if d not in (torch.bfloat16, torch.float16, torch.float32):
        raise make_error(Status.ERROR_INVALID_DTYPE, "%s: out_dtype is %r; expected torch.bfloat16, torch.float16 "
                         "or torch.float32" % (fn, d))
    return d


def _const(v, dtype, device):
    """A Python number as a 1-element tensor on device (a device fill: capturable)."""
    if isinstance(v, torch.Tensor) or v is None:
        return v
    return torch.full((1,), v, dtype=dtype, device=device)


def scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, bias=None, azp=None, azp_adj=None, out=None):
    """a [..., K] (leading dimensions viewed as M rows, never copied), b [K, N] column-major: out [..., N]."""
    if azp is None and azp_adj is None and _FAST:
        r = _mm_fast(a, b, scale_a, scale_b, out_dtype, bias, out)
        if r is not None:
            return r
    fn = "w8a8.scaled_mm"
    _check_tensor(a, "a", fn)
    _check_tensor(b, "b", fn)
    if a.dim() < 1 or b.dim() != 2:
        raise make_error(Status.ERROR_INVALID_SHAPE, "%s: b must be 2-D and a at least 1-D ([..., K]); got %s and %s"
                         % (fn, tuple(a.shape), tuple(b.shape)))
    lead = None
    if a.dim() != 2:
        lead = tuple(a.shape[:-1])
        a = _rows(a, "a", fn)
    scale_a = _const(scale_a, torch.float32, a.device)
    scale_b = _const(scale_b, torch.float32, a.device)
    azp = _const(azp, torch.int32, a.device)
    if out is not None:
        _check_tensor(out, "out", fn)
        _call_mm_out(a, b, scale_a, scale_b, out if out.dim() == 2 else _rows(out, "out", fn), bias, azp, azp_adj)
        return out
    y = _call_mm(a, b, scale_a, scale_b, _out_dtype(out_dtype, fn), bias, azp, azp_adj)
    return y if lead is None else y.view(lead + (b.shape[1],))


# ---- the eager fast path: what a warm call costs on the host (bench/host_cost.py)
# Outside tracing (torch.compile, export, fake or functional tensors, any dispatch mode), with plain
# tensors and nothing that needs autograd, the call packs its descriptors straight into the handle's
# argument block (_core.mm_fast): the custom op's dispatch, which tracing needs, costs more than the
# call itself. The op and this path run the same library call on the same handle and stream.
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
_dispatch_depth = getattr(torch._C, "_len_torch_dispatch_stack", None)
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_FAST = _core.FAST_OK and _is_compiling is not None and _dispatch_depth is not None
_CODE = {k: int(v) for k, v in _DT.items()}
_OUT_CODE = {d: (d, int(_DT[d])) for d in (torch.bfloat16, torch.float16, torch.float32)}
for _k, _d in (("bf16", torch.bfloat16), ("bfloat16", torch.bfloat16), ("fp16", torch.float16),
               ("float16", torch.float16), ("half", torch.float16), ("fp32", torch.float32),
               ("float32", torch.float32)):
    _OUT_CODE[_k] = _OUT_CODE[_d]
del _k, _d


def _stream_of(idx):
    if _raw_stream is not None:
        return _raw_stream(idx)
    return torch.cuda.current_stream(idx).cuda_stream


def _fast_handle(t, dev):
    """The handle handle_for(t.device) returns, from the cache without building a torch.device."""
    if dev < 0:
        h = getattr(_tls, "cpu", None)
        return h if h is not None else handle_for(t.device)
    h = _handles.get((dev, _stream_of(dev)))
    return h if h is not None else handle_for(t.device)


def _eager_ok(*ts):
    """True outside tracing and dispatch modes, for plain tensors that need no autograd (None skipped)."""
    if not _FAST or _is_compiling() or _dispatch_depth():
        return False
    for t in ts:
        if t is not None and (type(t) is not Tensor or t.requires_grad):
            return False
    return True


def _quant_fast(x, q, mode, scale, azp, ub, fn, silu_mul):
    """w8a8_quantize with packed descriptors (2-D x and q with unit inner strides, contiguous vectors);
    False (nothing done) for anything else."""
    if _is_compiling():
        return False
    T, get = Tensor, _CODE.get
    if type(x) is not T or type(q) is not T or type(scale) is not T or x.dim() != 2 or q.dim() != 2:
        return False
    tx, tq, ts = get(x.dtype), get(q.dtype), get(scale.dtype)
    dev = x.get_device()
    if (tx is None or tq is None or ts is None or q.get_device() != dev or scale.get_device() != dev
            or not scale.is_contiguous() or (dev < 0 and not (x.is_cpu and q.is_cpu and scale.is_cpu))):
        return False
    M, K = x.shape
    Mq, Kq = q.shape
    xs0, xs1 = x.stride()
    qs0, qs1 = q.stride()
    if xs1 != 1 or xs0 < K or qs1 != 1 or qs0 < Kq or not (M and K):
        return False
    vazp = None
    if azp is not None:
        ta = get(azp.dtype) if type(azp) is T else None
        if ta is None or azp.get_device() != dev or not azp.is_contiguous() or (dev < 0 and not azp.is_cpu):
            return False
        vazp = (ta, azp.numel(), azp.data_ptr())
    ubp = None
    if ub is not None:
        if (type(ub) is not T or ub.dtype != torch.float32 or ub.numel() != 1 or ub.get_device() != dev
                or (dev < 0 and not ub.is_cpu)):
            return False
        ubp = ub.data_ptr()
    _core.quantize_fast(_fast_handle(x, dev), (tx, 0, M, K, xs0, x.data_ptr(), tq, 0, Mq, Kq, qs0, q.data_ptr(),
                                               ts, scale.numel(), scale.data_ptr()),
                        mode, vazp, ubp, fn, silu_mul, locked=dev >= 0)
    return True


def _mm_fast(a, b, sa, sb, out_dtype, bias, out):
    if _is_compiling():  # (first: under dynamo this folds to True and nothing below is traced)
        return None
    T = Tensor
    if type(a) is not T or type(b) is not T or type(sa) is not T or type(sb) is not T or _dispatch_depth():
        return None
    get = _CODE.get
    ta, tb, tsa, tsb = get(a.dtype), get(b.dtype), get(sa.dtype), get(sb.dtype)
    if ta is None or tb is None or tsa is None or tsb is None or a.dim() != 2 or b.dim() != 2:
        return None
    dev = a.get_device()
    if (b.get_device() != dev or sa.get_device() != dev or sb.get_device() != dev or sa.requires_grad
            or sb.requires_grad or (dev < 0 and not (a.is_cpu and b.is_cpu and sa.is_cpu and sb.is_cpu))):
        return None
    M, K = a.shape
    Kb, N = b.shape
    as0, as1 = a.stride()
    bs0, bs1 = b.stride()
    if (as1 != 1 or as0 < K or bs0 != 1 or bs1 < Kb or not (M and K and N) or not sa.is_contiguous()
            or not sb.is_contiguous()):
        return None
    vbias = None
    if bias is not None:
        tbias = get(bias.dtype) if type(bias) is T else None
        if (tbias is None or bias.get_device() != dev or bias.requires_grad or not bias.is_contiguous()
                or (dev < 0 and not bias.is_cpu)):
            return None
        vbias = (tbias, bias.numel(), bias.data_ptr())
    if out is None:
        try:
            o = _OUT_CODE.get(out_dtype)
        except TypeError:
            return None
        if o is None:
            return None
        h = _fast_handle(a, dev)
        out = a.new_empty((M, N), dtype=o[0])
        od, ld = o[1], N
    else:
        od = get(out.dtype) if type(out) is T else None
        if od is None or out.dim() != 2 or out.get_device() != dev or (dev < 0 and not out.is_cpu):
            return None
        os0, os1 = out.stride()
        if os1 != 1 or os0 < N or out.shape[0] != M:
            return None
        h = _fast_handle(a, dev)
        ld = os0
    _core.mm_fast(h, (ta, 0, M, K, as0, a.data_ptr(), tb, 1, Kb, N, bs1, b.data_ptr(), od, 0, M, N, ld,
                      out.data_ptr(), tsa, sa.numel(), sa.data_ptr(), tsb, sb.numel(), sb.data_ptr()),
                  vbias, locked=dev >= 0)
    return out


def _rows(x, name, fn):
    _check_tensor(x, name, fn)
    if x.dim() == 2:
        return x
    if x.dim() < 1:
        raise make_error(Status.ERROR_INVALID_SHAPE, "%s: %s must have at least 1 dimension" % (fn, name))
    try:
        rows = 1
        for d in x.shape[:-1]:
            rows *= d
        return x.view(rows, x.shape[-1])  # (not view(-1, K): K = 0 leaves -1 ambiguous)
    except RuntimeError:
        raise make_error(Status.ERROR_INVALID_LAYOUT, "%s: %s of shape %s and strides %s cannot be viewed as "
                         "[M, K] rows without a copy" % (fn, name, tuple(x.shape), x.stride()))


def _quantize(x, qdtype, scale, azp, per_token, scale_ub, out, fn, want_azp, silu_mul=False):
    x2 = _rows(x, "x", fn)
    M = x2.shape[0]
    if out is None:
        # silu_mul: x [..., 2I] -> q [..., I]; an odd last dimension is the library's error to report
        shape = tuple(x.shape[:-1]) + (x.shape[-1] // 2,) if silu_mul else x.shape
        out = torch.empty(shape, dtype=qdtype, device=x.device)
    elif not isinstance(out, torch.Tensor) or out.dtype != qdtype:
        # (the library quantizes to out's dtype: an out of the other 8-bit format would silently change the format)
        raise make_error(Status.ERROR_INVALID_DTYPE, "%s: out has dtype %s; this quantizer writes %s"
                         % (fn, getattr(out, "dtype", type(out).__name__), qdtype))
    q2 = _rows(out, "out", fn)
    if scale is not None:
        scale = _const(scale, torch.float32, x.device)
        azp = _const(azp, torch.int32, x.device)
        if scale_ub is not None:
            raise make_error(Status.ERROR_INVALID_SCALE, "%s: scale_ub is given with a static scale; it bounds "
                             "dynamic per-token scales only" % fn)
        _call_quant_static(x2, q2, scale, azp, silu_mul)
        return out, scale, azp
    if azp is not None:
        raise make_error(Status.ERROR_INVALID_ZERO_POINT, "%s: azp is an input of static quantization only; "
                         "dynamic asymmetric quantization computes it (symmetric=False)" % fn)
    shape = (M, 1) if per_token else (1,)
    s = torch.empty(shape, dtype=torch.float32, device=x.device)
    z = torch.empty(shape if want_azp else (0,), dtype=torch.int32, device=x.device)
    _call_quant_dynamic(x2, q2, s, z, bool(per_token), _const(scale_ub, torch.float32, x.device), silu_mul)
    return out, s, (z if want_azp else None)


def quantize_fp8(x, scale=None, scale_ub=None, use_per_token_if_dynamic=False, out=None):
    """vLLM's scaled_fp8_quant: returns (q float8_e4m3fn of x's shape, scale: (1,) or (M, 1))."""
    q, s, _ = _quantize(x, _FP8, scale, None, use_per_token_if_dynamic, scale_ub, out, "w8a8.quantize_fp8", False)
    return q, s


def quantize_int8(x, scale=None, azp=None, symmetric=True, use_per_token_if_dynamic=True, out=None):
    """vLLM's scaled_int8_quant: returns (q int8, scale, azp or None)."""
    return _quantize(x, torch.int8, scale, azp, use_per_token_if_dynamic, None, out, "w8a8.quantize_int8",
                     scale is None and not symmetric)


def silu_mul_quantize_fp8(x, scale=None, scale_ub=None, use_per_token_if_dynamic=False, out=None):
    """quantize_fp8(silu(x[..., :I]) * x[..., I:]) in one kernel: x [..., 2I] -> (q [..., I]
    float8_e4m3fn, scale: (1,) or (M, 1))."""
    q, s, _ = _quantize(x, _FP8, scale, None, use_per_token_if_dynamic, scale_ub, out,
                        "w8a8.silu_mul_quantize_fp8", False, silu_mul=True)
    return q, s


def silu_mul_quantize_int8(x, scale=None, azp=None, symmetric=True, use_per_token_if_dynamic=True, out=None):
    """quantize_int8(silu(x[..., :I]) * x[..., I:]) in one kernel: returns (q [..., I] int8, scale,
    azp or None)."""
    return _quantize(x, torch.int8, scale, azp, use_per_token_if_dynamic, None, out,
                     "w8a8.silu_mul_quantize_int8", scale is None and not symmetric, silu_mul=True)


def colsum(b, out=None):
    """azp_adj = colsum(b) (int32 [N]); into out when given (an eager call: the traceable form returns a new
    tensor)."""
    _check_tensor(b, "b", "w8a8.colsum")
    if b.dim() != 2:
        raise make_error(Status.ERROR_INVALID_SHAPE, "w8a8.colsum: b must be 2-D; got %s" % (tuple(b.shape),))
    if out is not None:
        _check_tensor(out, "azp_adj", "w8a8.colsum")
        _colsum_impl(b, out)
        return out
    return _call_colsum(b)


# --------------------------------------------------------------------------- tensor parallelism as custom ops

from ._tp import register_group, unregister_group  # noqa: E402  (group names for the TP ops)

if HAVE_CUSTOM_OPS:
    from . import _torch_tp  # noqa: E402,F401  (registers torch.ops.w8a8.fused_*)

    def fused_all_gather_scaled_matmul(A, Bs, A_scale, B_scales, gather_dim, group_name, biases=None,
                                       result_scales=None, out_dtypes=None, use_fast_accum=None):
        """torch.ops.w8a8.fused_all_gather_scaled_matmul, with symm_mem's Python defaults (None lists: one None
        or False per B); see w8a8._torch_tp. Returns (A_gathered, [out per B])."""
        n = len(Bs)
        return torch.ops.w8a8.fused_all_gather_scaled_matmul(
            A, Bs, A_scale, B_scales, gather_dim, group_name, biases if biases is not None else [None] * n,
            result_scales if result_scales is not None else [None] * n,
            out_dtypes if out_dtypes is not None else [None] * n,
            use_fast_accum if use_fast_accum is not None else [False] * n)

    def fused_scaled_matmul_reduce_scatter(A, B, A_scale, B_scale, reduce_op, orig_scatter_dim,
                                           scatter_dim_after_maybe_reshape, group_name, output_shape=None, bias=None,
                                           result_scale=None, out_dtype=None, use_fast_accum=False):
        """torch.ops.w8a8.fused_scaled_matmul_reduce_scatter; see w8a8._torch_tp."""
        return torch.ops.w8a8.fused_scaled_matmul_reduce_scatter(
            A, B, A_scale, B_scale, reduce_op, orig_scatter_dim, scatter_dim_after_maybe_reshape, group_name,
            output_shape, bias, result_scale, out_dtype, use_fast_accum)


__all__ = ["scaled_mm", "quantize_fp8", "quantize_int8", "silu_mul_quantize_fp8", "silu_mul_quantize_int8", "colsum",
           "set_kernel", "set_weights_constant", "set_fp8_accum", "handle_for", "HAVE_CUSTOM_OPS", "register_group",
           "unregister_group"] + (["fused_all_gather_scaled_matmul", "fused_scaled_matmul_reduce_scatter"]
                                  if HAVE_CUSTOM_OPS else [])


# ---- block-scaled fp8 (the custom op w8a8::scaled_mm_blockwise_out underneath where torch has custom ops)

def scaled_mm_blockwise(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, bias=None, out=None):
    """Block-scaled fp8: a [..., K], b [K, N] column-major, scale_a [M, ceil(K/128)], scale_b
    [ceil(N/128), ceil(K/128)] (either layout). Returns out [..., N]."""
    fn = "w8a8.scaled_mm_blockwise"
    _check_tensor(a, "a", fn)
    _check_tensor(b, "b", fn)
    lead = tuple(a.shape[:-1]) if a.dim() != 2 else None
    a2 = _rows(a, "a", fn)
    if out is None:
        out = torch.empty(a2.shape[0], b.shape[1] if b.dim() == 2 else 0, dtype=_out_dtype(out_dtype, fn),
                          device=a.device)
        result = out if lead is None else out.view(lead + (out.shape[1],))
    else:
        _check_tensor(out, "out", fn)
        result, out = out, _rows(out, "out", fn)
    _call_blockwise_out(a2, b, scale_a, scale_b, out, bias)
    return result


def _group_quant(x, kind, group_size, column_major_scales, scale_ue8m0, out, fn):
    _check_tensor(x, "x", fn)
    if group_size != 128:
        raise make_error(Status.ERROR_INVALID_VALUE, "%s: group_size is %r; w8a8's groups and blocks are 128" %
                         (fn, group_size))
    x2 = _rows(x, "x", fn)
    rows, cols = x2.shape[0], x2.shape[1] // 2 if kind == "silu_mul" else x2.shape[1]
    if out is None:
        out = torch.empty(tuple(x.shape[:-1]) + (cols,), dtype=_FP8, device=x.device)
    q2 = _rows(out, "out", fn)
    srows = (rows + 127) // 128 if kind == "blocks" else rows
    scols = (cols + 127) // 128
    scale = (torch.empty(scols, srows, dtype=torch.float32, device=x.device).t() if column_major_scales else
             torch.empty(srows, scols, dtype=torch.float32, device=x.device))
    _call_groups(x2, q2, scale, kind, bool(scale_ue8m0))
    return out, scale


def quantize_fp8_groups(x, group_size=128, column_major_scales=False, scale_ue8m0=False, out=None):
    """vLLM's per_token_group_quant_fp8: (q, scale [M, ceil(K/128)])."""
    return _group_quant(x, "groups", group_size, column_major_scales, scale_ue8m0, out, "w8a8.quantize_fp8_groups")


def quantize_fp8_blocks(w, block_size=128, scale_ue8m0=False, out=None):
    """128 x 128 block quantization of weights [N, K]: (q, scale [ceil(N/128), ceil(K/128)])."""
    return _group_quant(w, "blocks", block_size, False, scale_ue8m0, out, "w8a8.quantize_fp8_blocks")


def silu_mul_quantize_fp8_groups(x, group_size=128, column_major_scales=False, scale_ue8m0=False, out=None):
    """silu(gate) * up for x [..., 2I], quantized per token per 128 channels: (q [..., I], scale)."""
    return _group_quant(x, "silu_mul", group_size, column_major_scales, scale_ue8m0, out,
                        "w8a8.silu_mul_quantize_fp8_groups")
