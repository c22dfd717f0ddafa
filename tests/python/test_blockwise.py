"""Block-scaled fp8 from NumPy: the group / block quantizers and scaled_mm_blockwise against NumPy's own
arithmetic on fresh random data (partial groups and blocks, both scale layouts)."""
import unittest

import numpy as np

import w8a8
import w8a8.numpy as wn

MIN_SCALE = np.float32(1.0 / (448.0 * 512.0))


def group_amax(y, rows_per_block):
    """amax per (row block, 128-column group) of a 2-D float array."""
    M, K = y.shape
    R, G = -(-M // rows_per_block), -(-K // 128)
    out = np.zeros((R, G), np.float32)
    for r in range(R):
        for g in range(G):
            out[r, g] = np.abs(y[r * rows_per_block:(r + 1) * rows_per_block, g * 128:(g + 1) * 128]).max(initial=0)
    return out


def expected_scales(amax, ue8m0):
    s = np.maximum(amax / np.float32(448.0), MIN_SCALE).astype(np.float32)
    if ue8m0:
        s = np.exp2(np.ceil(np.log2(s.astype(np.float64)))).astype(np.float32)
    return s


class Blockwise(unittest.TestCase):
    def setUp(self):
        self.rng = np.random.default_rng()

    def check_quant(self, x, q, s, rows_per_block, ue8m0, y=None):
        y = x if y is None else y
        want = expected_scales(group_amax(y, rows_per_block), ue8m0)
        np.testing.assert_array_equal(s, want)
        # dequantized: within e4m3's half-ulp (2^-4 relative) plus the smallest step
        full = np.repeat(np.repeat(s, rows_per_block, 0)[:y.shape[0]], 128, 1)[:, :y.shape[1]]
        deq = wn.fp8_to_float32(q) * full
        np.testing.assert_array_less(np.abs(deq - y), np.abs(y) / 15.0 + full * 2.0 ** -9 + 1e-30)

    def test_groups(self):
        for (M, K) in [(1, 1), (5, 300), (3, 128), (17, 513)]:
            for ue8m0 in (False, True):
                for colmajor in (False, True):
                    x = (self.rng.standard_normal((M, K)) * 10.0 ** self.rng.integers(-3, 3, (M, 1))).astype(
                        np.float32)
                    q, s = w8a8.quantize_fp8_groups(x, column_major_scales=colmajor, scale_ue8m0=ue8m0)
                    self.assertEqual(s.shape, (M, -(-K // 128)))
                    self.assertEqual(s.flags.f_contiguous and not s.flags.c_contiguous and M > 1 and s.shape[1] > 1,
                                     colmajor and M > 1 and s.shape[1] > 1)
                    self.check_quant(x, q, s, 1, ue8m0)

    def test_blocks(self):
        for (N, K) in [(1, 1), (200, 300), (128, 256), (129, 127)]:
            w = (self.rng.standard_normal((N, K)) * 0.02).astype(np.float32)
            q, s = w8a8.quantize_fp8_blocks(w)
            self.assertEqual(s.shape, (-(-N // 128), -(-K // 128)))
            self.check_quant(w, q, s, 128, False)

    def test_silu_mul_groups(self):
        x = self.rng.standard_normal((6, 2 * 260)).astype(np.float32)
        q, s = w8a8.silu_mul_quantize_fp8_groups(x)
        g, u = x[:, :260].astype(np.float64), x[:, 260:].astype(np.float64)
        y = (g / (1.0 + np.exp(-g)) * u).astype(np.float32)
        self.assertEqual(q.shape, (6, 260))
        # y here is NumPy's exp: the scales may differ from the library's by an ulp, so compare loosely
        np.testing.assert_allclose(s, expected_scales(group_amax(y, 1), False), rtol=1e-5)
        deq = wn.fp8_to_float32(q) * np.repeat(s, 128, 1)[:, :260]
        np.testing.assert_allclose(deq, y, rtol=0.07, atol=float(s.max()) * 2.0 ** -9)

    def test_gemm(self):
        for (M, N, K) in [(1, 1, 1), (7, 200, 300), (33, 256, 128), (4, 129, 257)]:
            x = self.rng.standard_normal((M, K)).astype(np.float32)
            w = (self.rng.standard_normal((N, K)) * 0.05).astype(np.float32)
            xq, sx = w8a8.quantize_fp8_groups(x, column_major_scales=bool(M % 2))
            wq, sw = w8a8.quantize_fp8_blocks(w)
            bias = self.rng.standard_normal(N).astype(np.float32)
            out = w8a8.scaled_mm_blockwise(xq, wq.T, sx, sw, out_dtype="fp32", bias=bias)
            self.assertEqual(out.shape, (M, N))
            # the header's formula in float64 over the dequantized operands: blocks summed, then scaled
            xd, wd = wn.fp8_to_float32(xq).astype(np.float64), wn.fp8_to_float32(wq).astype(np.float64)
            ref = np.zeros((M, N))
            mag = np.zeros((M, N))
            for kb in range(-(-K // 128)):
                ks = slice(kb * 128, (kb + 1) * 128)
                part = xd[:, ks] @ wd[:, ks].T
                scale = sx[:, kb:kb + 1].astype(np.float64) * np.repeat(sw[:, kb], 128)[:N][None, :]
                ref += part * scale
                mag += (np.abs(xd[:, ks]) @ np.abs(wd[:, ks]).T) * scale
            ref += bias
            np.testing.assert_array_less(np.abs(out - ref), 1e-5 * mag + 1e-5 * np.abs(ref) + 1e-6)
            # and close to the unquantized product
            np.testing.assert_allclose(out - bias, x.astype(np.float64) @ w.T.astype(np.float64),
                                       atol=0.1 * float(np.abs(x).max() * np.abs(w).max()) * K ** 0.5)

    def test_nd_and_errors(self):
        x = self.rng.standard_normal((2, 3, 200)).astype(np.float32)
        q, s = w8a8.quantize_fp8_groups(x)
        self.assertEqual(q.shape, (2, 3, 200))
        self.assertEqual(s.shape, (6, 2))
        with self.assertRaises(w8a8.W8A8Error) as e:
            w8a8.quantize_fp8_groups(x, group_size=64)
        self.assertEqual(e.exception.status, w8a8.Status.ERROR_INVALID_VALUE)
        a = np.zeros((4, 256), np.int8)
        b = np.zeros((8, 256), np.int8).T
        with self.assertRaises(w8a8.W8A8Error) as e:
            w8a8.scaled_mm_blockwise(a, b, np.ones((4, 2), np.float32), np.ones((1, 2), np.float32))
        self.assertEqual(e.exception.status, w8a8.Status.ERROR_INVALID_DTYPE)
        fa = np.zeros((4, 256), np.uint8)
        fb = np.zeros((8, 256), np.uint8).T
        with self.assertRaises(w8a8.W8A8Error) as e:
            w8a8.scaled_mm_blockwise(fa, fb, np.ones((4, 1), np.float32), np.ones((1, 2), np.float32))
        self.assertEqual(e.exception.status, w8a8.Status.ERROR_INVALID_SCALE)
        self.assertIn("scaled_mm_blockwise", str(e.exception))


try:
    import torch
except ImportError:
    torch = None


@unittest.skipIf(torch is None or not hasattr(torch, "float8_e4m3fn"), "torch with float8 is not installed")
class BlockwiseTorchCPU(unittest.TestCase):
    """The torch front end on CPU tensors gives the NumPy front end's bits (the same library calls)."""

    def test_same_as_numpy(self):
        import w8a8.torch as wt
        rng = np.random.default_rng()
        x = rng.standard_normal((5, 300)).astype(np.float32)
        w = (rng.standard_normal((200, 300)) * 0.05).astype(np.float32)
        xq, sx = w8a8.quantize_fp8_groups(x)
        wq, sw = w8a8.quantize_fp8_blocks(w)
        ref = w8a8.scaled_mm_blockwise(xq, wq.T, sx, sw, out_dtype="fp32")
        txq, tsx = wt.quantize_fp8_groups(torch.from_numpy(x))
        twq, tsw = wt.quantize_fp8_blocks(torch.from_numpy(w))
        np.testing.assert_array_equal(txq.view(torch.uint8).numpy(), xq.view(np.uint8))
        np.testing.assert_array_equal(tsw.numpy(), sw)
        out = wt.scaled_mm_blockwise(txq, twq.t(), tsx, tsw, out_dtype=torch.float32)
        np.testing.assert_array_equal(out.numpy(), ref)


if __name__ == "__main__":
    unittest.main()
