"""ctypes bindings of include/w8a8.h: the library loader, the enums and structs (mirrored
field for field), the prototypes, and the exception classes (one per w8a8_status).

Nothing here knows about NumPy or torch; _core.py builds descriptors from array views.
tests/python/test_bindings.py compiles a C program against the header and checks that every
struct size, field offset and enum value here matches it.
"""
import ctypes
import ctypes.util
import enum
import os
import threading

# The header this module mirrors (W8A8_VERSION_MAJOR/MINOR). A library with another major, or an
# older minor, is refused at load: the struct layouts could differ.
HEADER_VERSION = (0, 1, 0)

# --------------------------------------------------------------------------- enums


class Status(enum.IntEnum):
    SUCCESS = 0
    ERROR_NULL_POINTER = 1
    ERROR_INVALID_HANDLE = 2
    ERROR_INVALID_VALUE = 3
    ERROR_INVALID_SHAPE = 4
    ERROR_INVALID_STRIDE = 5
    ERROR_INVALID_DTYPE = 6
    ERROR_INVALID_LAYOUT = 7
    ERROR_INVALID_SCALE = 8
    ERROR_INVALID_BIAS = 9
    ERROR_INVALID_ZERO_POINT = 10
    ERROR_OVERLAP = 11
    ERROR_INVALID_POINTER = 12
    ERROR_MISALIGNED = 13
    ERROR_UNSUPPORTED_DEVICE = 14
    ERROR_NOT_BUILT = 15
    ERROR_OUT_OF_MEMORY = 16
    ERROR_DEVICE = 17
    ERROR_INVALID_COMM = 18
    ERROR_COMM = 19
    ERROR_COMM_MISMATCH = 20
    ERROR_WORKSPACE = 21
    ERROR_INVALID_FILE = 22
    ERROR_INTERNAL = 23
    ERROR_STALE_TUNING = 24
    ERROR_BROKEN = 25
    ERROR_TIMEOUT = 26
    ERROR_ABORTED = 27


class DType(enum.IntEnum):
    INVALID = 0
    INT8 = 1
    FP8_E4M3 = 2
    BF16 = 3
    FP16 = 4
    FP32 = 5
    INT32 = 6


DTYPE_SIZE = {DType.INT8: 1, DType.FP8_E4M3: 1, DType.BF16: 2, DType.FP16: 2, DType.FP32: 4, DType.INT32: 4}


class Layout(enum.IntEnum):
    ROW_MAJOR = 0
    COL_MAJOR = 1


class DeviceKind(enum.IntEnum):
    CPU = 0
    CUDA = 1


class Kernel(enum.IntEnum):
    AUTO = 0
    REFERENCE = 1
    GENERIC = 2
    SM90 = 3


class Fp8Accum(enum.IntEnum):
    """w8a8_fp8_accum (w8a8_set_fp8_accum)."""
    PRECISE = 0
    FAST = 1


class QuantMode(enum.IntEnum):
    STATIC_PER_TENSOR = 0
    DYNAMIC_PER_TENSOR = 1
    DYNAMIC_PER_TOKEN = 2


UNIQUE_ID_BYTES = 128

# Bytes of a Handle's argument block: three matrices (40 bytes each), three vectors (24) and a zero
# point (48), the most any one call packs (_core.py lays them out).
ARG_BLOCK_BYTES = 256

# --------------------------------------------------------------------------- structs


class Matrix(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("layout", ctypes.c_int), ("rows", ctypes.c_int64),
                ("cols", ctypes.c_int64), ("ld", ctypes.c_int64), ("data", ctypes.c_void_p)]


class Vector(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("len", ctypes.c_int64), ("data", ctypes.c_void_p)]


class ZeroPoint(ctypes.Structure):
    _fields_ = [("azp", Vector), ("azp_adj", Vector)]


class HandleInfo(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("device_index", ctypes.c_int), ("cc_major", ctypes.c_int),
                ("cc_minor", ctypes.c_int), ("num_sms", ctypes.c_int), ("num_threads", ctypes.c_int),
                ("workspace_bytes", ctypes.c_size_t), ("name", ctypes.c_char * 128),
                ("features", ctypes.c_char * 128)]


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class TpOptions(ctypes.Structure):
    # reserved0: the padding of the first version of the struct (ignored by the library; see w8a8.h)
    _fields_ = [("struct_size", ctypes.c_size_t), ("overlap", ctypes.c_int), ("reserved0", ctypes.c_int),
                ("partials", ctypes.c_int)]


class Gathered(ctypes.Structure):
    _fields_ = [("a", Matrix), ("scale_a", Vector), ("azp", Vector)]


class LaunchInfo(ctypes.Structure):
    _fields_ = [("kernel", ctypes.c_char_p), ("config", ctypes.c_char_p), ("split_k", ctypes.c_int),
                ("m", ctypes.c_int64), ("n", ctypes.c_int64), ("k", ctypes.c_int64)]


class Setting(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p), ("default_value", ctypes.c_char_p),
                ("doc", ctypes.c_char_p), ("for_users", ctypes.c_int), ("is_set", ctypes.c_int)]


# w8a8_tp_options.partials: W8A8_TP_PARTIALS_FP32 / W8A8_TP_PARTIALS_OUT
TP_PARTIALS = {"fp32": 0, "out": 1}


# w8a8_tp_options.overlap: W8A8_TP_OVERLAP_OFF / _ON / _AUTO
TP_OVERLAP = {"off": 0, "on": 1, "auto": 2}


def tp_options(overlap="auto", partials="fp32", fn="w8a8"):
    """W8A8_TP_OPTIONS_INIT with the overlap choice and the reduce-scatter's partials set. overlap: "auto" (the
    default: fused or unfused per call, the same on every rank), True / "on" (fused), False / "off" (unfused).
    partials: "fp32" (the default: fp32 partials, one rounding after the sum) or "out" (each rank's partial
    rounded to out's dtype before it travels: half the bytes for bf16/fp16 out)."""
    if isinstance(overlap, bool):
        ov = TP_OVERLAP["on" if overlap else "off"]
    else:
        ov = TP_OVERLAP.get(overlap.lower()) if isinstance(overlap, str) else None
    if ov is None:
        raise make_error(Status.ERROR_INVALID_VALUE, "%s: overlap is %r; expected True, False, \"on\", \"off\" or "
                         "\"auto\"" % (fn, overlap))
    mode = TP_PARTIALS.get(partials.lower()) if isinstance(partials, str) else None
    if mode is None:
        raise make_error(Status.ERROR_INVALID_VALUE, "%s: partials is %r; expected \"fp32\" or \"out\"" % (fn, partials))
    return TpOptions(ctypes.sizeof(TpOptions), ov, 0, mode)


# --------------------------------------------------------------------------- errors


class W8A8Error(Exception):
    """A failed w8a8 call. status: the Status; name: "W8A8_ERROR_..."; message: the library's
    w8a8_last_error() detail (or the Python layer's, for checks made before the call)."""

    def __init__(self, status, name, message):
        self.status = Status(status) if int(status) in Status._value2member_map_ else int(status)
        self.name = name
        self.message = message
        super().__init__("%s: %s" % (name, message))

    def __reduce__(self):  # picklable across processes (torch.distributed, multiprocessing)
        return (type(self), (int(self.status), self.name, self.message))


def _camel(name):
    return "".join(p.capitalize() for p in name.split("_"))


# One subclass per status, e.g. InvalidScaleError for W8A8_ERROR_INVALID_SCALE. Argument errors
# are also ValueError, allocation failures MemoryError, missing features NotImplementedError, so
# code that catches the builtin kinds keeps working.
_EXTRA_BASE = {
    Status.ERROR_NULL_POINTER: ValueError, Status.ERROR_INVALID_VALUE: ValueError,
    Status.ERROR_INVALID_SHAPE: ValueError, Status.ERROR_INVALID_STRIDE: ValueError,
    Status.ERROR_INVALID_DTYPE: TypeError, Status.ERROR_INVALID_LAYOUT: ValueError,
    Status.ERROR_INVALID_SCALE: ValueError, Status.ERROR_INVALID_BIAS: ValueError,
    Status.ERROR_INVALID_ZERO_POINT: ValueError, Status.ERROR_OVERLAP: ValueError,
    Status.ERROR_INVALID_POINTER: ValueError, Status.ERROR_MISALIGNED: ValueError,
    Status.ERROR_OUT_OF_MEMORY: MemoryError, Status.ERROR_NOT_BUILT: NotImplementedError,
    Status.ERROR_TIMEOUT: TimeoutError,  # the builtin: w8a8.TimeoutError is also one
}
ERROR_CLASSES = {}
for _s in Status:
    if _s == Status.SUCCESS:
        continue
    _cls_name = _camel(_s.name[len("ERROR_"):]) + "Error"
    _bases = (W8A8Error, _EXTRA_BASE[_s]) if _s in _EXTRA_BASE else (W8A8Error,)
    ERROR_CLASSES[_s] = type(_cls_name, _bases, {"__module__": "w8a8", "__doc__": "W8A8_%s" % _s.name})
    globals()[_cls_name] = ERROR_CLASSES[_s]
del _s, _cls_name, _bases


def make_error(status, message):
    """The exception for a status, with a message (Python-side checks use this too)."""
    try:
        st = Status(int(status))
    except ValueError:
        return W8A8Error(int(status), "W8A8_STATUS_%d" % int(status), message)
    return ERROR_CLASSES[st](st, "W8A8_" + st.name, message)


# --------------------------------------------------------------------------- loading

_lib = None
_lib_path = None
_lock = threading.Lock()


def _candidates():
    """The paths to try, in order, and whether $W8A8_LIBRARY chose them."""
    here = os.path.dirname(os.path.abspath(__file__))
    # The package's own library (a wheel built with `pip install .` carries it): built from the same
    # tree as these bindings, so it comes before any other copy on the machine.
    out = [os.path.join(here, "libw8a8.so")]
    env = os.environ.get("W8A8_LIBRARY")
    if env:
        # A file, or a directory holding libw8a8.so. When it is set (and the package has no library of
        # its own), nothing else is tried: a wrong path must be an error, not a fallback to another build.
        out.append(os.path.join(env, "libw8a8.so") if os.path.isdir(env) else env)
        return out, True
    # The repository's build, when the package runs from a source tree (python/w8a8 beside the Makefile).
    repo = os.path.dirname(os.path.dirname(here))
    if os.path.basename(os.path.dirname(here)) == "python" and os.path.exists(os.path.join(repo, "Makefile")):
        out.append(os.path.join(repo, "build", "lib", "libw8a8.so"))
    # The system: the dynamic loader's search path (ld.so.cache, LD_LIBRARY_PATH), then PREFIX/lib.
    found = ctypes.util.find_library("w8a8")
    if found:
        out.append(found)
    out += ["libw8a8.so.0", "libw8a8.so", "/usr/local/lib/libw8a8.so", "/usr/lib/libw8a8.so"]
    return out, False


# Entry points that a library built from an older tree may lack.
OPTIONAL_FUNCTIONS = ("w8a8_load_tuning", "w8a8_comm_create_local", "w8a8_get_last_launch", "w8a8_setting_count",
                      "w8a8_get_setting", "w8a8_scaled_mm_blockwise", "w8a8_quantize_groups", "w8a8_quantize_blocks",
                      "w8a8_silu_mul_quantize_groups", "w8a8_all_gather_scaled_mm_blockwise",
                      "w8a8_scaled_mm_reduce_scatter_blockwise")


def _declare(lib):
    c_int, c_i64, c_vp, c_cp = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p
    P = ctypes.POINTER
    H = c_vp  # w8a8_handle *
    C = c_vp  # w8a8_comm *
    protos = {
        "w8a8_version": (c_int, []),
        "w8a8_version_string": (c_cp, []),
        "w8a8_status_string": (c_cp, [c_int]),
        "w8a8_status_name": (c_cp, [c_int]),
        "w8a8_last_error": (c_cp, []),
        "w8a8_dtype_size": (ctypes.c_size_t, [c_int]),
        "w8a8_dtype_name": (c_cp, [c_int]),
        "w8a8_create": (c_int, [P(H), c_int, c_int]),
        "w8a8_create_best": (c_int, [P(H)]),
        "w8a8_destroy": (c_int, [H]),
        "w8a8_set_stream": (c_int, [H, c_vp]),
        "w8a8_get_stream": (c_int, [H, P(c_vp)]),
        "w8a8_set_num_threads": (c_int, [H, c_int]),
        "w8a8_set_kernel": (c_int, [H, c_int]),
        "w8a8_set_weights_constant": (c_int, [H, c_int]),
        "w8a8_set_fp8_accum": (c_int, [H, c_int]),
        "w8a8_get_info": (c_int, [H, P(HandleInfo)]),
        "w8a8_cuda_device_count": (c_int, []),
        "w8a8_scaled_mm": (c_int, [H, P(Matrix), P(Matrix), P(Vector), P(Vector), P(Vector), P(ZeroPoint),
                                   P(Matrix)]),
        "w8a8_colsum": (c_int, [H, P(Matrix), P(Vector)]),
        "w8a8_quantize": (c_int, [H, P(Matrix), P(Matrix), c_int, P(Vector), P(Vector), c_vp]),
        "w8a8_silu_mul_quantize": (c_int, [H, P(Matrix), P(Matrix), c_int, P(Vector), P(Vector), c_vp]),
        "w8a8_comm_create_mpi": (c_int, [P(C), H, c_vp]),
        "w8a8_comm_create_world": (c_int, [P(C), H]),
        "w8a8_comm_create_nccl": (c_int, [P(C), H, c_vp]),
        "w8a8_comm_unique_id": (c_int, [P(UniqueId)]),
        "w8a8_comm_create_nccl_id": (c_int, [P(C), H, P(UniqueId), c_int, c_int]),
        "w8a8_comm_destroy": (c_int, [C]),
        "w8a8_comm_rank": (c_int, [C, P(c_int)]),
        "w8a8_comm_size": (c_int, [C, P(c_int)]),
        "w8a8_comm_reserve": (c_int, [C, c_i64, c_i64, c_i64]),
        "w8a8_comm_workspace_bytes": (c_int, [C, P(ctypes.c_size_t)]),
        "w8a8_comm_set_timeout": (c_int, [C, ctypes.c_double]),
        "w8a8_comm_get_timeout": (c_int, [C, P(ctypes.c_double)]),
        "w8a8_comm_abort": (c_int, [C]),
        "w8a8_comm_get_async_error": (c_int, [C]),
        "w8a8_tp_shard_rows": (c_int, [c_i64, c_int, c_int, P(c_i64), P(c_i64)]),
        "w8a8_all_gather_scaled_mm": (c_int, [C, P(Matrix), P(Matrix), P(Vector), P(Vector), P(Vector),
                                              P(ZeroPoint), P(Matrix), P(Gathered), P(TpOptions)]),
        "w8a8_scaled_mm_reduce_scatter": (c_int, [C, P(Matrix), P(Matrix), P(Vector), P(Vector), P(Vector),
                                                  P(ZeroPoint), P(Matrix), P(TpOptions)]),
    }
    for name, (res, args) in protos.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    # Newer entry points: declared where the loaded library has them.
    optional = {"w8a8_load_tuning": (c_int, [H, c_cp]),
                "w8a8_comm_create_local": (c_int, [P(C), P(H), c_int]),
                "w8a8_get_last_launch": (c_int, [H, P(LaunchInfo)]),
                "w8a8_setting_count": (c_int, []),
                "w8a8_get_setting": (c_int, [c_int, P(Setting)]),
                "w8a8_scaled_mm_blockwise": (c_int, [H, P(Matrix), P(Matrix), P(Matrix), P(Matrix), P(Vector),
                                                     P(Matrix)]),
                "w8a8_quantize_groups": (c_int, [H, P(Matrix), P(Matrix), P(Matrix), ctypes.c_uint]),
                "w8a8_quantize_blocks": (c_int, [H, P(Matrix), P(Matrix), P(Matrix), ctypes.c_uint]),
                "w8a8_silu_mul_quantize_groups": (c_int, [H, P(Matrix), P(Matrix), P(Matrix), ctypes.c_uint]),
                "w8a8_all_gather_scaled_mm_blockwise": (c_int, [C, P(Matrix), P(Matrix), P(Matrix), P(Matrix),
                                                                P(Vector), P(Matrix), P(TpOptions)]),
                "w8a8_scaled_mm_reduce_scatter_blockwise": (c_int, [C, P(Matrix), P(Matrix), P(Matrix), P(Matrix),
                                                                    P(Vector), P(Matrix), P(TpOptions)])}
    assert set(optional) == set(OPTIONAL_FUNCTIONS)
    for name, (res, args) in optional.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = res
            fn.argtypes = args


# Every pointer argument as c_void_p, so that the bindings' fast paths pass addresses (Python ints) into one
# preallocated argument block per handle instead of building ctypes structures per call (_core.py).
_FAST_PROTOS = {"w8a8_scaled_mm": 8, "w8a8_colsum": 3, "w8a8_quantize": (3, 3),
                "w8a8_silu_mul_quantize": (3, 3)}
FAST = {}


def _declare_fast(lib):
    vp = ctypes.c_void_p
    out = {}
    for name, n in _FAST_PROTOS.items():
        # quantize-like: (handle, x, q, int mode, scale, azp, scale_ub)
        args = [vp] * n[0] + [ctypes.c_int] + [vp] * n[1] if isinstance(n, tuple) else [vp] * n
        addr = ctypes.cast(getattr(lib, name), vp).value
        out[name] = ctypes.CFUNCTYPE(ctypes.c_int, *args)(addr)
    return out


def load():
    """The loaded library (ctypes.CDLL); loads it on first use. Order: the package's own libw8a8.so
    (an installed wheel's), then $W8A8_LIBRARY (a file or a directory) and nothing else when it is set,
    else the repository's build/lib (in a source tree) and the system's loader path."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        cands, from_env = _candidates()
        errors = []
        for path in cands:
            if os.path.sep in path and not os.path.exists(path):
                errors.append("%s: no such file" % path)
                continue
            try:
                # RTLD_GLOBAL: Open MPI's plugins (loaded by MPI_Init inside libw8a8) need libmpi's
                # symbols in the global namespace, as mpi4py arranges for the same reason.
                lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError as e:
                where = path if os.path.sep in path else "%s (the loader's search path)" % path
                errors.append("%s: %s" % (where, str(e).replace(path + ": ", "", 1)))
                continue
            try:
                _declare(lib)
            except AttributeError as e:
                errors.append("%s: not a libw8a8 (%s)" % (path, e))
                continue
            v = lib.w8a8_version()
            major, minor = v // 10000, (v // 100) % 100
            if major != HEADER_VERSION[0] or minor < HEADER_VERSION[1]:
                errors.append("%s: library version %d.%d does not match the bindings' header %d.%d"
                              % (path, major, minor, HEADER_VERSION[0], HEADER_VERSION[1]))
                continue
            FAST.update(_declare_fast(lib))
            _lib, _lib_path = lib, path
            return lib
        how = ("install the package from the repository with `pip install --no-build-isolation .` (it builds "
               "the library into the package), or run `make lib` there and set W8A8_LIBRARY to its "
               "build/lib/libw8a8.so")
        if from_env:
            how = "W8A8_LIBRARY is set to %r; unset it or fix it, or %s" % (os.environ["W8A8_LIBRARY"], how)
        raise make_error(Status.ERROR_NOT_BUILT, "could not load libw8a8. Tried: %s. To get it: %s"
                         % ("; ".join(errors), how))


def library_path():
    load()
    return _lib_path


def check(status, fn=None):
    """Raise the status's exception carrying w8a8_last_error() when status is not SUCCESS."""
    if status == 0:
        return
    lib = load()
    msg = lib.w8a8_last_error()
    msg = msg.decode("utf-8", "replace") if msg else ""
    if not msg:
        s = lib.w8a8_status_string(status)
        msg = "%s: %s" % (fn or "w8a8", s.decode() if s else "unknown status")
    raise make_error(status, msg)


def version():
    return load().w8a8_version()


def version_string():
    return load().w8a8_version_string().decode()


def cuda_device_count():
    return load().w8a8_cuda_device_count()


def _optional(name):
    fn = getattr(load(), name, None)
    if fn is None or fn.argtypes is None:
        raise make_error(Status.ERROR_NOT_BUILT, "%s: this libw8a8 is older than the bindings and lacks it" % name)
    return fn


def settings():
    """The library's settings (w8a8_setting_count / w8a8_get_setting): a list of dicts with name, value,
    default_value, doc, for_users, is_set."""
    count, get = _optional("w8a8_setting_count"), _optional("w8a8_get_setting")
    out = []
    for i in range(count()):
        st = Setting()
        check(get(i, ctypes.byref(st)), "w8a8_get_setting")
        out.append({f: (getattr(st, f).decode(errors="replace") if isinstance(getattr(st, f), bytes) else
                        getattr(st, f)) for f, _ in Setting._fields_})
    return out


def shard_rows(total, size, rank):
    """(offset, count) of rank's rows: w8a8_tp_shard_rows."""
    off, cnt = ctypes.c_int64(), ctypes.c_int64()
    check(load().w8a8_tp_shard_rows(int(total), int(size), int(rank), ctypes.byref(off), ctypes.byref(cnt)),
          "w8a8_tp_shard_rows")
    return off.value, cnt.value


# --------------------------------------------------------------------------- handles


class Handle:
    """An owned w8a8_handle. Calls through one Handle are serialised by its lock (the header: one
    thread at a time per handle; ctypes releases the GIL during the call)."""

    def __init__(self, kind, index=0):
        lib = load()
        h = ctypes.c_void_p()
        check(lib.w8a8_create(ctypes.byref(h), int(kind), int(index)), "w8a8_create")
        self._h = h
        self.addr = h.value  # the w8a8_handle * as an int, for the fast paths (None once closed)
        self.kind = DeviceKind(kind)
        self.index = int(index)
        self.lock = threading.Lock()
        self._stream = None
        # The descriptors of one call, packed in place under self.lock (a handle is one thread at a time).
        self.args = ctypes.create_string_buffer(ARG_BLOCK_BYTES)
        self.args_addr = ctypes.addressof(self.args)
        self.fp8_accum = int(Fp8Accum.PRECISE)

    @property
    def ptr(self):
        if self._h is None:
            raise make_error(Status.ERROR_INVALID_HANDLE, "w8a8 handle was closed")
        return self._h

    def set_stream(self, stream):
        """stream: a cudaStream_t as an int (0 = legacy default). Cheap when unchanged."""
        if stream != self._stream:
            check(load().w8a8_set_stream(self.ptr, ctypes.c_void_p(stream or None)), "w8a8_set_stream")
            self._stream = stream

    def set_kernel(self, kernel):
        check(load().w8a8_set_kernel(self.ptr, int(kernel)), "w8a8_set_kernel")

    def set_weights_constant(self, constant):
        """w8a8_set_weights_constant: promise that b (the weights) is not written by the kernel
        enqueued right before a GEMM on this handle's stream; the Hopper kernel may then start
        loading it early (programmatic dependent launch)."""
        check(load().w8a8_set_weights_constant(self.ptr, int(bool(constant))), "w8a8_set_weights_constant")

    def set_fp8_accum(self, accum):
        """w8a8_set_fp8_accum: Fp8Accum.PRECISE (the default: fp32 promotion every 128-deep K-block) or
        Fp8Accum.FAST (the Hopper kernel's large tiles accumulate in the tensor core, as
        torch._scaled_mm(use_fast_accum=True)); w8a8.h states the precision of each."""
        check(load().w8a8_set_fp8_accum(self.ptr, int(accum)), "w8a8_set_fp8_accum")
        self.fp8_accum = int(accum)

    def set_num_threads(self, n):
        check(load().w8a8_set_num_threads(self.ptr, int(n)), "w8a8_set_num_threads")

    def load_tuning(self, path):
        """w8a8_load_tuning: a `w8a8 tune` table for this (CUDA) handle; None drops it."""
        fn = getattr(load(), "w8a8_load_tuning", None)
        if fn is None or fn.argtypes is None:
            raise make_error(Status.ERROR_NOT_BUILT, "w8a8_load_tuning: this libw8a8 has no tuning tables")
        check(fn(self.ptr, None if path is None else os.fsencode(path)), "w8a8_load_tuning")

    def info(self):
        inf = HandleInfo()
        check(load().w8a8_get_info(self.ptr, ctypes.byref(inf)), "w8a8_get_info")
        return {"kind": DeviceKind(inf.kind).name.lower(), "device_index": inf.device_index,
                "cc": (inf.cc_major, inf.cc_minor), "num_sms": inf.num_sms, "num_threads": inf.num_threads,
                "workspace_bytes": inf.workspace_bytes, "name": inf.name.decode(errors="replace"),
                "features": inf.features.decode(errors="replace")}

    def last_launch(self):
        """What this handle's last GEMM ran (w8a8_get_last_launch): kernel, config, split_k, m, n, k."""
        inf = LaunchInfo()
        check(_optional("w8a8_get_last_launch")(self.ptr, ctypes.byref(inf)), "w8a8_get_last_launch")
        return {"kernel": (inf.kernel or b"").decode(), "config": (inf.config or b"").decode(),
                "split_k": inf.split_k, "m": inf.m, "n": inf.n, "k": inf.k}

    def close(self):
        self.addr = None
        if self._h is not None and _lib is not None:
            _lib.w8a8_destroy(self._h)
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
