"""The NumPy-style front end (w8a8.scaled_mm, the quantizers, colsum) on DLPack producers: objects with
__dlpack__ / __dlpack_device__ that are neither NumPy arrays nor torch tensors (CuPy, JAX, ...).

CPU: NumPy arrays hidden behind a wrapper that exposes only the DLPack protocol (numpy.from_dlpack's
path), and a producer made here whose capsule this module builds with ctypes, carrying dtypes NumPy
cannot import (kDLBfloat, kDLFloat8_e4m3fn) and strided, N-D views (w8a8's own DLTensor reader). Every
element is compared with the reference arithmetic (w8a8_ref.py) or with w8a8.numpy on the same data.
CUDA (skips without torch and a GPU): torch CUDA tensors behind the same wrapper, so that they take the
DLPack path (DLTensor read with ctypes, CUDA backend), against w8a8.torch on the same tensors, bit for
bit; CuPy where it is installed. The errors of the CUDA path that need no GPU (outputs not given,
host arrays mixed in, dynamic quantization) are checked with producers that claim a CUDA device."""
import ctypes
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
sys.path.insert(0, HERE)

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None

if np is not None:
    import w8a8
    import w8a8.numpy as wn
    import w8a8_ref as ref

try:
    import torch
except ImportError:
    torch = None
try:
    import cupy
except ImportError:
    cupy = None


def rng():
    seed = int(os.environ.get("W8A8_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    return np.random.default_rng(seed)


class DL:
    """Only the DLPack protocol of the array it wraps (stream passed through where the producer takes one)."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, stream=None):
        if isinstance(self.x, np.ndarray):
            return self.x.__dlpack__()
        return self.x.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
_NAME = ctypes.create_string_buffer(b"dltensor")  # the capsule keeps this pointer: module lifetime


class Producer:
    """A DLPack producer over a NumPy array's memory with a chosen (code, bits) and device: the capsule is
    built here (no destructor; this object owns the memory and the DLTensor)."""

    def __init__(self, base, code, bits, device=(1, 0), shape=None, strides=None, offset_elems=0):
        self.base = base
        self.shape_arr = (ctypes.c_int64 * base.ndim)(*(shape or base.shape))
        st = strides if strides is not None else [s // base.itemsize for s in base.strides]
        self.strides_arr = (ctypes.c_int64 * len(st))(*st)
        self.m = _DLManaged()
        t = self.m.dl_tensor
        t.data = base.__array_interface__["data"][0]
        t.device_type, t.device_id = device
        t.ndim = len(shape or base.shape)
        t.code, t.bits, t.lanes = code, bits, 1
        t.shape = self.shape_arr
        t.strides = self.strides_arr
        t.byte_offset = offset_elems * base.itemsize
        self.device = device

    def __dlpack__(self, stream=None):
        return _capsule_new(ctypes.addressof(self.m), ctypes.addressof(_NAME), None)

    def __dlpack_device__(self):
        return self.device


def bits_of(x):
    return np.asarray(x).view(np.uint16 if np.asarray(x).dtype.itemsize == 2 else np.uint32)


@unittest.skipIf(np is None, "NumPy is not installed")
class CPU(unittest.TestCase):
    def test_scaled_mm_through_numpy_dlpack(self):
        r = rng()
        for shape_a, N in (((13, 48), 24), ((2, 5, 64), 40)):
            K = shape_a[-1]
            a = r.integers(-128, 128, shape_a).astype(np.int8)
            w = r.integers(-128, 128, (N, K)).astype(np.int8)
            M = int(np.prod(shape_a[:-1]))
            sa = ((r.random((M, 1)) + 0.5) * 2.0 ** -6).astype(np.float32)
            sb = ((r.random((1, N)) + 0.5) * 2.0 ** -5).astype(np.float32)
            bias = r.uniform(-4, 4, N).astype(np.float32)
            want = ref.scaled_mm_int8(a.reshape(M, K), w.T, sa, sb, bias)
            y = w8a8.scaled_mm(DL(a), DL(w.T), DL(sa), DL(sb), out_dtype="fp32", bias=DL(bias))
            self.assertIsInstance(y, np.ndarray)
            self.assertEqual(y.shape, shape_a[:-1] + (N,))
            np.testing.assert_array_equal(bits_of(y.reshape(M, N)), bits_of(want))
            # out= given as a DLPack array: written in place, returned as passed
            out = np.full(shape_a[:-1] + (N,), np.nan, np.float32)
            wrapped = DL(out)
            got = w8a8.scaled_mm(DL(a), DL(w.T), DL(sa), DL(sb), bias=DL(bias), out=wrapped)
            self.assertIs(got, wrapped)
            np.testing.assert_array_equal(bits_of(out.reshape(M, N)), bits_of(want))
            # Python numbers for the scales, as the NumPy front end takes them
            y1 = w8a8.scaled_mm(DL(a), DL(w.T), 0.25, 0.5, out_dtype="fp32")
            np.testing.assert_array_equal(bits_of(y1.reshape(M, N)),
                                          bits_of(ref.scaled_mm_int8(a.reshape(M, K), w.T, 0.25, 0.5)))

    def test_quantizers_and_colsum_through_dlpack(self):
        r = rng()
        x = (r.standard_normal((3, 7, 96)) * 3).astype(np.float32)
        for per_token in (False, True):
            q, s = w8a8.quantize_fp8(DL(x), use_per_token_if_dynamic=per_token)
            qn, sn = wn.quantize_fp8(x, use_per_token_if_dynamic=per_token)
            np.testing.assert_array_equal(q.view(np.uint8), qn.view(np.uint8))
            np.testing.assert_array_equal(s.view(np.uint32), sn.view(np.uint32))
        x2 = x.reshape(21, 96)
        s_want, z_want = ref.asym_params(x2)
        q, s, z = w8a8.quantize_int8(DL(x), symmetric=False)
        np.testing.assert_array_equal(s.reshape(-1).view(np.uint32), s_want.view(np.uint32))
        np.testing.assert_array_equal(z.reshape(-1), z_want)
        np.testing.assert_array_equal(q.reshape(21, 96), ref.quant_int8(x2, s_want.reshape(-1, 1),
                                                                        z_want.reshape(-1, 1)))
        # static, into a DLPack out
        out = np.zeros(x.shape, np.int8)
        scale = np.array([0.03], np.float32)
        q, s, z = w8a8.quantize_int8(DL(x), scale=DL(scale), out=DL(out))
        np.testing.assert_array_equal(out.reshape(21, 96), ref.quant_int8(x2, scale))
        # fused SiLU-and-mul quantizer: same as w8a8.numpy on the same memory
        g = (r.standard_normal((5, 2 * 40)) * 2).astype(np.float32)
        q, s = w8a8.silu_mul_quantize_fp8(DL(g), use_per_token_if_dynamic=True)
        qn, sn = wn.silu_mul_quantize_fp8(g, use_per_token_if_dynamic=True)
        np.testing.assert_array_equal(q.view(np.uint8), qn.view(np.uint8))
        np.testing.assert_array_equal(s.view(np.uint32), sn.view(np.uint32))
        w = r.integers(-128, 128, (24, 64)).astype(np.int8)
        np.testing.assert_array_equal(w8a8.colsum(DL(w.T)), w.astype(np.int64).sum(axis=1))
        adj = np.zeros(24, np.int32)
        w8a8.colsum(DL(w.T), out=DL(adj))
        np.testing.assert_array_equal(adj, w.astype(np.int64).sum(axis=1))

    def test_capsules_numpy_cannot_import(self):
        """bf16 (kDLBfloat) and fp8 (kDLFloat8_e4m3fn) producers, strided and N-D: w8a8's own DLTensor reader."""
        r = rng()
        M, N, K = 9, 20, 64
        a_bits = ref.random_fp8(r, (M, K))
        big = np.zeros((N + 3, K + 16), np.uint8)  # the weights as a strided submatrix of a larger buffer
        w_bits = ref.random_fp8(r, (N, K))
        big[2:2 + N, 8:8 + K] = w_bits
        sa = ((r.random((M, 1)) + 0.5) * 2.0 ** -4).astype(np.float32)
        sb = ((r.random((1, N)) + 0.5) * 2.0 ** -4).astype(np.float32)
        bias_bits = ref.bf16_encode(r.uniform(-2, 2, N).astype(np.float32))
        a_p = Producer(a_bits, 10, 8)
        # b = w.T: [K, N] with strides (1, K + 16), starting at row 2, column 8 of big
        b_p = Producer(big, 10, 8, shape=(K, N), strides=(1, K + 16), offset_elems=2 * (K + 16) + 8)
        bias_p = Producer(bias_bits, 4, 16)
        y = w8a8.scaled_mm(a_p, b_p, sa, sb, out_dtype="bf16", bias=bias_p)
        want = wn.scaled_mm(a_bits, w_bits.T, sa, sb, "bf16", bias=bias_bits)
        np.testing.assert_array_equal(y.view(np.uint16), want.view(np.uint16))
        # a bf16 activation (kDLBfloat) into the quantizer, 3-D
        xb = ref.bf16_encode((r.standard_normal((2, 3, 32)) * 4).astype(np.float32))
        q, s = w8a8.quantize_fp8(Producer(xb, 4, 16), use_per_token_if_dynamic=True)
        qn, sn = wn.quantize_fp8(xb.view(wn.bf16_dtype()), use_per_token_if_dynamic=True)
        np.testing.assert_array_equal(q.view(np.uint8), qn.view(np.uint8))
        np.testing.assert_array_equal(s.view(np.uint32), sn.view(np.uint32))
        # a bf16 output written through the reader (numpy.from_dlpack's arrays are read-only)
        out = np.zeros((M, N), np.uint16)
        w8a8.scaled_mm(a_p, b_p, sa, sb, bias=bias_p, out=Producer(out, 4, 16))
        np.testing.assert_array_equal(out, want.view(np.uint16))

    def test_errors(self):
        a = np.zeros((4, 16), np.int8)
        w = np.zeros((6, 16), np.int8)
        with self.assertRaises(w8a8.InvalidDtypeError) as cm:  # float8_e5m2 (kDLFloat8_e5m2): no w8a8 dtype
            w8a8.scaled_mm(Producer(a.view(np.uint8), 12, 8), DL(w.T), 1.0, 1.0)
        self.assertIn("DLPack dtype (code 12, bits 8", cm.exception.message)
        with self.assertRaises(w8a8.InvalidDtypeError) as cm:  # one NumPy imports: the NumPy front end's words
            w8a8.scaled_mm(DL(np.zeros((4, 16), np.complex64)), DL(w.T), 1.0, 1.0)
        self.assertIn("complex64", cm.exception.message)
        with self.assertRaises(w8a8.UnsupportedDeviceError):  # a device type w8a8 has no backend for
            w8a8.scaled_mm(Producer(a, 0, 8, device=(8, 0)), DL(w.T), 1.0, 1.0)
        # claims of a CUDA device, checked before any GPU is needed
        cu = (2, 0)
        a_c, w_c = Producer(a, 0, 8, device=cu), Producer(w, 0, 8, device=cu, shape=(16, 6), strides=(1, 16))
        s_c = Producer(np.ones(1, np.float32), 2, 32, device=cu)
        with self.assertRaises(w8a8.InvalidValueError) as cm:
            w8a8.scaled_mm(a_c, w_c, s_c, s_c)
        self.assertIn("out", cm.exception.message)
        out_c = Producer(np.zeros((4, 6), np.uint16), 4, 16, device=cu)
        with self.assertRaises(w8a8.InvalidScaleError) as cm:
            w8a8.scaled_mm(a_c, w_c, 1.0, s_c, out=out_c)
        self.assertIn("host", cm.exception.message)
        with self.assertRaises(w8a8.InvalidPointerError):  # a NumPy (host) scale with CUDA arrays
            w8a8.scaled_mm(a_c, w_c, np.ones(1, np.float32), s_c, out=out_c)
        with self.assertRaises(w8a8.InvalidPointerError):  # another GPU
            w8a8.scaled_mm(a_c, w_c, Producer(np.ones(1, np.float32), 2, 32, device=(2, 1)), s_c, out=out_c)
        x_c = Producer(np.zeros((4, 16), np.float32), 2, 32, device=cu)
        with self.assertRaises(w8a8.InvalidValueError) as cm:
            w8a8.quantize_fp8(x_c, use_per_token_if_dynamic=True)
        self.assertIn("dynamic", cm.exception.message)
        a3 = np.zeros((2, 3, 16), np.int8)
        with self.assertRaises(w8a8.InvalidLayoutError):  # [..., K] rows that are not evenly spaced
            w8a8.scaled_mm(Producer(a3, 0, 8, device=cu, shape=(2, 2, 16), strides=(48, 16, 1)), w_c, s_c, s_c,
                           out=out_c)


def _torch_cuda():
    return torch is not None and torch.cuda.is_available()


@unittest.skipIf(np is None or not _torch_cuda(), "torch with CUDA is not available")
class CUDAViaTorch(unittest.TestCase):
    """torch CUDA tensors behind DL(): the DLPack path (legacy default stream), against w8a8.torch."""

    def test_scaled_mm_quantize_colsum(self):
        import w8a8.torch as wt
        dev = torch.device("cuda", torch.cuda.current_device())
        g = torch.Generator().manual_seed(int.from_bytes(os.urandom(4), "little"))
        M, N, K = 2 * 17, 96, 128
        a = torch.randint(-128, 128, (2, 17, K), generator=g, dtype=torch.int8).to(dev)
        w = torch.randint(-128, 128, (N, K), generator=g, dtype=torch.int8).to(dev)
        sa = (torch.rand(M, 1, generator=g) + 0.5).to(dev) * 0.01
        sb = (torch.rand(1, N, generator=g) + 0.5).to(dev) * 0.01
        bias = (torch.randn(N, generator=g) * 3).to(torch.bfloat16).to(dev)
        want = wt.scaled_mm(a, w.t(), sa, sb, torch.bfloat16, bias)
        out = torch.full((2, 17, N), float("nan"), dtype=torch.bfloat16, device=dev)
        got = w8a8.scaled_mm(DL(a), DL(w.t()), DL(sa), DL(sb), bias=DL(bias), out=DL(out))
        torch.cuda.synchronize()
        self.assertIsInstance(got, DL)
        self.assertTrue(torch.equal(out.view(torch.int16), want.view(torch.int16)))
        x = torch.randn(M, K, generator=g).to(dev) * 3
        scale = torch.tensor([0.02], device=dev)
        fp8 = getattr(torch, "float8_e4m3fn", None)
        dts = [(torch.int8, w8a8.quantize_int8)]
        if fp8 is not None and torch.cuda.get_device_capability(dev) >= (8, 9):
            dts.append((fp8, w8a8.quantize_fp8))
        for qd, fn in dts:
            q = torch.zeros(M, K, dtype=qd, device=dev)
            # (fp8 as uint8 bits: not every torch exports float8 through DLPack)
            fn(DL(x), scale=DL(scale), out=DL(q.view(torch.uint8) if qd != torch.int8 else q))
            qw = fn(x, scale=scale)[0]
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(q.view(torch.int8), qw.view(torch.int8)), str(qd))
        adj = torch.zeros(N, dtype=torch.int32, device=dev)
        w8a8.colsum(DL(w.t()), out=DL(adj))
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(adj.cpu(), w.cpu().long().sum(dim=1).int()))
        with self.assertRaises(w8a8.InvalidValueError):
            w8a8.scaled_mm(DL(a), DL(w.t()), DL(sa), DL(sb))


@unittest.skipIf(np is None or cupy is None, "CuPy is not installed")
class CUDAViaCuPy(unittest.TestCase):
    def test_scaled_mm(self):
        r = rng()
        M, N, K = 33, 64, 96
        a = r.integers(-128, 128, (M, K)).astype(np.int8)
        w = r.integers(-128, 128, (N, K)).astype(np.int8)
        sa = ((r.random((M, 1)) + 0.5) * 2.0 ** -6).astype(np.float32)
        sb = ((r.random((1, N)) + 0.5) * 2.0 ** -5).astype(np.float32)
        out = cupy.full((M, N), cupy.nan, dtype=cupy.float32)
        w8a8.scaled_mm(cupy.asarray(a), cupy.asarray(w).T, cupy.asarray(sa), cupy.asarray(sb), out=out)
        cupy.cuda.runtime.deviceSynchronize()
        np.testing.assert_array_equal(bits_of(cupy.asnumpy(out)), bits_of(ref.scaled_mm_int8(a, w.T, sa, sb)))


if __name__ == "__main__":
    unittest.main()
