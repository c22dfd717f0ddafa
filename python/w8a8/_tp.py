"""Tensor parallelism: a thin wrapper of the w8a8_comm API.

Communicators:
  Comm.from_torch_distributed(group)  GPU ranks: rank 0 of the group makes a bootstrap id
                                      (w8a8_comm_unique_id), broadcasts it with its status over the
                                      process group, every rank calls w8a8_comm_create_nccl_id.
  Comm.world()                        CPU ranks under mpirun: w8a8_comm_create_world.
  Comm.from_mpi4py(mpi_comm)          CPU ranks over an mpi4py communicator (w8a8_comm_create_mpi).
The library decides what exists: where the NCCL transport is not built, the creation raises its
NotBuiltError on every rank (the status travels with the id, so no rank is left waiting in the
broadcast).
"""
import ctypes
import numbers
import threading

from . import _core
from ._lib import (DeviceKind, DType, Handle, Matrix, Status, UniqueId, UNIQUE_ID_BYTES, Vector, check,
                   load, make_error, shard_rows, tp_options)


class Comm:
    def __init__(self, ptr, handle, kind):
        self._c = ptr
        self.handle = handle  # must outlive the communicator
        self.kind = kind      # "cpu" or "cuda"
        self.lock = threading.Lock()
        self._reserved = (0, 0, 0)
        self._entered = False   # the current call reached the library's collective (_core sets it)
        self._captured = False  # a fused call of this communicator was captured into a CUDA graph
        self._used = False      # a fused call of this communicator reached the library (_core sets it)
        r, s = ctypes.c_int(), ctypes.c_int()
        check(load().w8a8_comm_rank(self.ptr, ctypes.byref(r)), "w8a8_comm_rank")
        check(load().w8a8_comm_size(self.ptr, ctypes.byref(s)), "w8a8_comm_size")
        self.rank, self.size = r.value, s.value

    @property
    def ptr(self):
        if self._c is None:
            raise make_error(Status.ERROR_INVALID_COMM, "w8a8 communicator was closed")
        return self._c

    # ---- creation

    @classmethod
    def world(cls, num_threads=0):
        """CPU ranks: MPI_COMM_WORLD (MPI initialised by the library if needed). Collective."""
        h = Handle(DeviceKind.CPU, 0)
        if num_threads:
            h.set_num_threads(num_threads)
        c = ctypes.c_void_p()
        check(load().w8a8_comm_create_world(ctypes.byref(c), h.ptr), "w8a8_comm_create_world")
        return cls(c, h, "cpu")

    @classmethod
    def from_mpi4py(cls, mpi_comm, num_threads=0):
        """CPU ranks over an mpi4py communicator (duplicated by the library). Collective."""
        from mpi4py import MPI  # noqa: F401  (optional dependency)
        h = Handle(DeviceKind.CPU, 0)
        if num_threads:
            h.set_num_threads(num_threads)
        addr = MPI._addressof(mpi_comm)
        c = ctypes.c_void_p()
        check(load().w8a8_comm_create_mpi(ctypes.byref(c), h.ptr, ctypes.c_void_p(addr)), "w8a8_comm_create_mpi")
        return cls(c, h, "cpu")

    @classmethod
    def from_torch_distributed(cls, group=None, device=None):
        """GPU ranks, one GPU each, over a torch.distributed process group. Collective."""
        import torch
        import torch.distributed as dist
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        if device is None:
            device = torch.device("cuda", torch.cuda.current_device())
        device = torch.device(device)
        if device.type != "cuda":
            raise make_error(Status.ERROR_UNSUPPORTED_DEVICE, "Comm.from_torch_distributed: device is %s; GPU "
                             "ranks need a cuda device (CPU ranks: Comm.world under mpirun)" % device)
        if device.index is None:  # "cuda": the current device (Handle needs an index)
            device = torch.device("cuda", torch.cuda.current_device())
        lib = load()
        uid = UniqueId()
        status, msg = 0, ""
        if rank == 0:
            status = lib.w8a8_comm_unique_id(ctypes.byref(uid))
            if status:
                msg = (lib.w8a8_last_error() or b"").decode(errors="replace")
        on_gpu = dist.get_backend(group) == "nccl"
        buf = torch.zeros(4 + UNIQUE_ID_BYTES, dtype=torch.uint8, device=device if on_gpu else "cpu")
        if rank == 0:
            head = int(status).to_bytes(4, "little", signed=True) + bytes(uid)  # the id's 128 raw bytes
            buf.copy_(torch.frombuffer(bytearray(head), dtype=torch.uint8))
        src = dist.get_global_rank(group, 0) if group is not None else 0
        dist.broadcast(buf, src=src, group=group)
        raw = bytes(buf.cpu().tolist())
        status = int.from_bytes(raw[:4], "little", signed=True)
        if status:
            if rank != 0:
                msg = "rank 0 of the process group could not make a bootstrap id (w8a8_comm_unique_id)"
            raise make_error(status, msg)
        ctypes.memmove(ctypes.byref(uid), raw[4:], UNIQUE_ID_BYTES)
        try:
            h = Handle(DeviceKind.CUDA, device.index)
        except Exception:
            # Still join the creation (a NULL handle: the library fails every rank together), or the peers would
            # wait in NCCL's bootstrap for this rank; then this rank's own error.
            lib.w8a8_comm_create_nccl_id(ctypes.byref(ctypes.c_void_p()), None, ctypes.byref(uid), size, rank)
            raise
        c = ctypes.c_void_p()
        check(lib.w8a8_comm_create_nccl_id(ctypes.byref(c), h.ptr, ctypes.byref(uid), size, rank),
              "w8a8_comm_create_nccl_id")
        return cls(c, h, "cuda")

    @classmethod
    def local(cls, nranks, device=None):
        """In-process GPU ranks (w8a8_comm_create_local): nranks communicators at once, rank i on a CUDA handle
        of its own. device: one GPU index for every rank (default 0: emulated ranks on one GPU, what single-GPU
        tests use) or a list of nranks indices. The fused calls are collective: drive each rank from its own
        thread, each on its own CUDA stream (torch.cuda.stream), and close them after every rank's work."""
        fn = "Comm.local"
        lib = load()
        create = getattr(lib, "w8a8_comm_create_local", None)
        if create is None or create.argtypes is None:
            raise make_error(Status.ERROR_NOT_BUILT, "%s: this libw8a8 has no w8a8_comm_create_local" % fn)
        if isinstance(nranks, bool) or not isinstance(nranks, numbers.Integral) or nranks < 1:
            raise make_error(Status.ERROR_INVALID_VALUE, "%s: nranks is %r; expected a positive int" % (fn, nranks))
        devs = list(device) if isinstance(device, (list, tuple)) else [device] * nranks
        if len(devs) != nranks:
            raise make_error(Status.ERROR_INVALID_VALUE, "%s: %d devices for %d ranks" % (fn, len(devs), nranks))
        devs = [0 if d is None else int(getattr(d, "index", d) or 0) for d in devs]
        handles = [Handle(DeviceKind.CUDA, d) for d in devs]
        hs = (ctypes.c_void_p * nranks)(*[h.ptr.value for h in handles])
        cs = (ctypes.c_void_p * nranks)()
        check(create(cs, hs, nranks), "w8a8_comm_create_local")
        return [cls(ctypes.c_void_p(cs[i]), handles[i], "cuda") for i in range(nranks)]

    # ---- use

    def reserve(self, max_m, max_n, max_k, _auto=False):
        """Grow the workspace (w8a8_comm_reserve; on GPUs call it on every rank, when no rank's fused call may still
        run). The fused calls grow it for their own sizes where that is safe: on CPU communicators, on one GPU rank,
        and on GPU ranks before the communicator's first fused call. Not inside a capture (the allocation is refused
        there), not after a fused call of this communicator was captured (a growing reserve frees the block those
        graphs hold), and not on GPU ranks once a fused call ran: a peer's copies may still read this rank's
        workspace, which growing frees. Call reserve yourself, on every rank, with the largest sizes before the
        first call (and before capturing); a reserve that grows invalidates earlier graphs."""
        m = tuple(max(a, b) for a, b in zip(self._reserved, (max_m, max_n, max_k)))
        if m != self._reserved:
            if _auto and self.kind == "cuda" and (self._captured or _capturing()):
                raise make_error(Status.ERROR_WORKSPACE, "w8a8: this call needs a workspace for M=%d N=%d K=%d, larger "
                                 "than reserved %s, and CUDA graphs hold this communicator's workspace (or one is being "
                                 "captured): call comm.reserve(max_m, max_n, max_k) on every rank before capturing, "
                                 "and capture again after it" % (m + (self._reserved,)))
            if _auto and self.kind == "cuda" and self.size > 1 and self._used:
                raise make_error(Status.ERROR_WORKSPACE, "w8a8: this call needs a workspace for M=%d N=%d K=%d, larger "
                                 "than reserved %s, and a fused call of this communicator ran already: its peers may "
                                 "still read the workspace that growing it would free. Call comm.reserve(max_m, max_n, "
                                 "max_k) on every rank with the largest sizes before the first call (or after "
                                 "synchronizing every rank's GPU work)" % (m + (self._reserved,)))
            check(load().w8a8_comm_reserve(self.ptr, *m), "w8a8_comm_reserve")
            self._reserved = m

    def workspace_bytes(self):
        n = ctypes.c_size_t()
        check(load().w8a8_comm_workspace_bytes(self.ptr, ctypes.byref(n)), "w8a8_comm_workspace_bytes")
        return n.value

    def set_timeout(self, seconds):
        """The deadline of each later call's waits (w8a8_comm_set_timeout; 0: none). A call past it returns
        W8A8_ERROR_TIMEOUT and breaks the communicator. Any thread, any time."""
        check(load().w8a8_comm_set_timeout(self.ptr, float(seconds)), "w8a8_comm_set_timeout")

    def timeout(self):
        t = ctypes.c_double()
        check(load().w8a8_comm_get_timeout(self.ptr, ctypes.byref(t)), "w8a8_comm_get_timeout")
        return t.value

    def abort(self):
        """Unblock every waiting call of this communicator (they raise the ABORTED status) and break it
        (w8a8_comm_abort). Any thread, any time."""
        check(load().w8a8_comm_abort(self.ptr), "w8a8_comm_abort")

    def async_error(self):
        """The status that broke the communicator, or Status.SUCCESS (w8a8_comm_get_async_error)."""
        return Status(load().w8a8_comm_get_async_error(self.ptr))

    def close(self):
        """Collective: destroy the communicator on every rank (after this rank's GPU work: the header asks that
        every rank's calls have finished; the peers' are their own close's to wait for)."""
        if self._c is None:
            return
        try:
            if self.kind == "cuda":
                import torch
                torch.cuda.synchronize(self.handle.index)
            if load() is not None:
                check(load().w8a8_comm_destroy(self._c), "w8a8_comm_destroy")
        finally:
            self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _frontend(comm, a, fn):
    """(view function, allocator, is_torch) for the arrays of a call."""
    mod = type(a).__module__
    if mod.startswith("torch"):
        from . import torch as wt
        import torch
        want = torch.device("cuda", comm.handle.index) if comm.kind == "cuda" else torch.device("cpu")
        if not isinstance(a, torch.Tensor) or a.device != want:
            raise make_error(Status.ERROR_INVALID_POINTER, "%s: a is on %s but the communicator's rank runs on %s"
                             % (fn, getattr(a, "device", "?"), want))
        if comm.kind == "cuda":
            comm.handle.set_stream(torch.cuda.current_stream(a.device).cuda_stream)
            comm._captured = comm._captured or torch.cuda.is_current_stream_capturing()

        def view(x, name):
            return wt.view(x, name, fn, a.device)

        def alloc(shape, dtype_enum):
            return torch.empty(shape, dtype=wt._TORCH_OF[dtype_enum], device=a.device)
        return view, alloc, lambda d: wt._DT[wt._out_dtype(d, fn)]
    from . import numpy as wn
    import numpy as np

    def view_np(x, name):
        return wn.view(x, name, fn, writable=name in ("out", "gathered_a", "gathered_scale_a", "gathered_azp"))

    def alloc_np(shape, dtype_enum):
        return np.empty(shape, dtype=wn.np_dtype_of(dtype_enum))
    return view_np, alloc_np, lambda d: wn._out_dtype(d, fn)


def _capturing():
    try:
        import torch
        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    except ImportError:
        return False


def _join_failed(comm, op):
    """This rank's arguments failed a check of the bindings, before the library's collective call: take part in
    that call anyway, with a descriptor the library refuses on this rank (a dtype of 0), so that every peer fails with
    W8A8_ERROR_COMM_MISMATCH instead of waiting for this rank (the library's own checks fail every rank together;
    these are not the library's)."""
    try:
        ptr, lib = comm.ptr, load()
    except Exception:
        return
    m, v, opts = Matrix(), Vector(), tp_options(True)
    with comm.lock:
        if op == "ag":
            lib.w8a8_all_gather_scaled_mm(ptr, ctypes.byref(m), ctypes.byref(m), ctypes.byref(v), ctypes.byref(v), None,
                                          None, ctypes.byref(m), None, ctypes.byref(opts))
        else:
            lib.w8a8_scaled_mm_reduce_scatter(ptr, ctypes.byref(m), ctypes.byref(m), ctypes.byref(v), ctypes.byref(v),
                                              None, None, ctypes.byref(m), ctypes.byref(opts))


def _scalar(x, like_torch, dtype_np, device):
    if x is None or isinstance(x, bool) or not isinstance(x, numbers.Number):
        return x
    if like_torch:
        import torch
        return torch.full((1,), float(x) if dtype_np == "f" else int(x),
                          dtype=torch.float32 if dtype_np == "f" else torch.int32, device=device)
    import numpy as np
    return np.array([float(x) if dtype_np == "f" else int(x)], dtype=np.float32 if dtype_np == "f" else np.int32)


def all_gather_scaled_mm(comm, a, b, scale_a, scale_b, out_dtype="bf16", bias=None, azp=None, azp_adj=None, out=None,
                         m_total=None, return_gathered=False, overlap="auto"):
    """Column-parallel linear: out[M, N_r] = all_gather(a)[M, K] . b. M = m_total (default: a.shape[0] *
    comm.size, even shards). With return_gathered, returns (out, (a_gathered, scale_a_gathered[, azp]))."""
    fn = "w8a8.all_gather_scaled_mm"
    comm._entered = False
    try:
        return _all_gather(comm, a, b, scale_a, scale_b, out_dtype, bias, azp, azp_adj, out, m_total, return_gathered,
                           overlap, fn)
    except Exception:
        if not comm._entered:
            _join_failed(comm, "ag")
        raise


def _all_gather(comm, a, b, scale_a, scale_b, out_dtype, bias, azp, azp_adj, out, m_total, return_gathered, overlap,
                fn):
    view, alloc, out_enum = _frontend(comm, a, fn)
    t = type(a).__module__.startswith("torch")
    dev = getattr(a, "device", None)
    scale_a, scale_b = _scalar(scale_a, t, "f", dev), _scalar(scale_b, t, "f", dev)
    azp = _scalar(azp, t, "i", dev)
    va, vb = view(a, "a"), view(b, "b")
    if len(va.shape) != 2 or len(vb.shape) != 2:
        raise make_error(Status.ERROR_INVALID_SHAPE, "%s: a and b must be 2-D" % fn)
    if out is None:
        M = int(m_total) if m_total is not None else va.shape[0] * comm.size
        out = alloc((M, vb.shape[1]), out_enum(out_dtype))
    vo = view(out, "out")
    # M: m_total, else out's rows, else even shards (the gathered arrays follow the layer's M)
    M = int(m_total) if m_total is not None else vo.shape[0]
    g = garr = None
    if return_gathered:
        K = va.shape[1]
        garr = (alloc((M, K), va.dtype), alloc((M,), DType.FP32), alloc((M,), DType.INT32) if azp is not None else None)
        g = (view(garr[0], "gathered_a"), view(garr[1], "gathered_scale_a"),
             view(garr[2], "gathered_azp") if garr[2] is not None else None)
    comm.reserve(vo.shape[0], vb.shape[1], va.shape[1], _auto=True)
    _core.all_gather_scaled_mm(comm, va, vb, view(scale_a, "scale_a"), view(scale_b, "scale_b"), vo,
                               view(bias, "bias") if bias is not None else None,
                               view(azp, "azp") if azp is not None else None,
                               view(azp_adj, "azp_adj") if azp_adj is not None else None, g, overlap, fn=fn)
    if return_gathered:
        return out, tuple(x for x in garr if x is not None)
    return out


def scaled_mm_reduce_scatter(comm, a, b, scale_a, scale_b, out_dtype="bf16", bias=None, azp=None, azp_adj=None,
                             out=None, overlap="auto", partials="fp32"):
    """Row-parallel linear: this rank's rows (w8a8_tp_shard_rows of M = a.shape[0]) of sum_j a_j . b_j.
    partials: "fp32" (default: fp32 partials summed in rank order, + bias, rounded once) or "out" (each
    rank's partial rounded to out's dtype before it travels, then the same sum: half the bytes for
    bf16/fp16 out; W8A8_TP_PARTIALS_OUT in w8a8.h). Every rank must pass the same value."""
    fn = "w8a8.scaled_mm_reduce_scatter"
    comm._entered = False
    try:
        return _reduce_scatter(comm, a, b, scale_a, scale_b, out_dtype, bias, azp, azp_adj, out, overlap, partials, fn)
    except Exception:
        if not comm._entered:
            _join_failed(comm, "rs")
        raise


def _reduce_scatter(comm, a, b, scale_a, scale_b, out_dtype, bias, azp, azp_adj, out, overlap, partials, fn):
    view, alloc, out_enum = _frontend(comm, a, fn)
    t = type(a).__module__.startswith("torch")
    dev = getattr(a, "device", None)
    scale_a, scale_b = _scalar(scale_a, t, "f", dev), _scalar(scale_b, t, "f", dev)
    azp = _scalar(azp, t, "i", dev)
    va, vb = view(a, "a"), view(b, "b")
    if len(va.shape) != 2 or len(vb.shape) != 2:
        raise make_error(Status.ERROR_INVALID_SHAPE, "%s: a and b must be 2-D" % fn)
    if out is None:
        _, rows = shard_rows(va.shape[0], comm.size, comm.rank)
        out = alloc((rows, vb.shape[1]), out_enum(out_dtype))
    vo = view(out, "out")
    comm.reserve(va.shape[0], vb.shape[1], va.shape[1], _auto=True)
    _core.scaled_mm_reduce_scatter(comm, va, vb, view(scale_a, "scale_a"), view(scale_b, "scale_b"), vo,
                                   view(bias, "bias") if bias is not None else None,
                                   view(azp, "azp") if azp is not None else None,
                                   view(azp_adj, "azp_adj") if azp_adj is not None else None, overlap, fn=fn,
                                   partials=partials)
    return out


def all_gather_scaled_mm_blockwise(comm, a, b, scale_a, scale_b, out_dtype="bf16", bias=None, out=None, m_total=None,
                                   overlap="auto"):
    """all_gather_scaled_mm with block scales (fp8): scale_a [M_r, ceil(K/128)] this rank's rows' group scales
    (they travel with the rows), scale_b [ceil(N_r/128), ceil(K/128)] its weight shard's block scales."""
    fn = "w8a8.all_gather_scaled_mm_blockwise"
    comm._entered = False
    try:
        return _blockwise(comm, "ag", a, b, scale_a, scale_b, out_dtype, bias, out, m_total, overlap, "fp32", fn)
    except Exception:
        if not comm._entered:
            _join_failed(comm, "ag")
        raise


def scaled_mm_reduce_scatter_blockwise(comm, a, b, scale_a, scale_b, out_dtype="bf16", bias=None, out=None,
                                       overlap="auto", partials="fp32"):
    """scaled_mm_reduce_scatter with block scales (fp8): a [M, K_r], scale_a [M, ceil(K_r/128)], scale_b
    [ceil(N/128), ceil(K_r/128)]: each rank's K shard is blocks of its own."""
    fn = "w8a8.scaled_mm_reduce_scatter_blockwise"
    comm._entered = False
    try:
        return _blockwise(comm, "rs", a, b, scale_a, scale_b, out_dtype, bias, out, None, overlap, partials, fn)
    except Exception:
        if not comm._entered:
            _join_failed(comm, "rs")
        raise


def _blockwise(comm, op, a, b, scale_a, scale_b, out_dtype, bias, out, m_total, overlap, partials, fn):
    view, alloc, out_enum = _frontend(comm, a, fn)
    va, vb = view(a, "a"), view(b, "b")
    if len(va.shape) != 2 or len(vb.shape) != 2:
        raise make_error(Status.ERROR_INVALID_SHAPE, "%s: a and b must be 2-D" % fn)
    if out is None:
        if op == "ag":
            rows = int(m_total) if m_total is not None else va.shape[0] * comm.size
        else:
            _, rows = shard_rows(va.shape[0], comm.size, comm.rank)
        out = alloc((rows, vb.shape[1]), out_enum(out_dtype))
    vo = view(out, "out")
    comm.reserve(vo.shape[0] if op == "ag" else va.shape[0], vb.shape[1], va.shape[1], _auto=True)
    _core.tp_blockwise(op, comm, va, vb, view(scale_a, "scale_a"), view(scale_b, "scale_b"), vo,
                       view(bias, "bias") if bias is not None else None, overlap, partials, fn=fn)
    return out


# --------------------------------------------------------------------------- process-group names
# The torch custom ops (torch.ops.w8a8.fused_*) name their communicator by a string, as
# torch.ops.symm_mem's ops name a process group: register_group binds a name to a Comm, together
# with the options those ops' signatures have no room for.

_groups = {}
_groups_lock = threading.Lock()


def register_group(name, comm, overlap="auto", partials="fp32"):
    """Bind a group name (a str, or a torch.distributed ProcessGroup: its group_name) to a Comm for the ops
    torch.ops.w8a8.fused_all_gather_scaled_matmul / fused_scaled_matmul_reduce_scatter. overlap and partials:
    as in all_gather_scaled_mm / scaled_mm_reduce_scatter (the same on every rank). Rebinding a name replaces it.
    Emulated ranks in one process register one name per rank."""
    fn = "w8a8.register_group"
    name = getattr(name, "group_name", name)
    if not isinstance(name, str) or not name:
        raise make_error(Status.ERROR_INVALID_VALUE, "%s: name is %r; expected a non-empty str or a ProcessGroup"
                         % (fn, name))
    if not isinstance(comm, Comm):
        raise make_error(Status.ERROR_INVALID_COMM, "%s: comm is a %s; expected a w8a8.Comm" % (fn, type(comm).__name__))
    tp_options(overlap, partials, fn=fn)  # refuses bad values now rather than at the first call
    with _groups_lock:
        _groups[name] = (comm, overlap, partials)


def unregister_group(name):
    with _groups_lock:
        _groups.pop(getattr(name, "group_name", name), None)


def group(name, fn="w8a8"):
    """(comm, overlap, partials) registered under name."""
    g = _groups.get(name)
    if g is None:
        raise make_error(Status.ERROR_INVALID_COMM, "%s: no communicator is registered as group_name %r (registered: "
                         "%s); call w8a8.torch.register_group(%r, comm) on this rank first"
                         % (fn, name, sorted(_groups) or "none", name))
    if g[0]._c is None:
        raise make_error(Status.ERROR_INVALID_COMM, "%s: the communicator registered as %r was closed" % (fn, name))
    return g
