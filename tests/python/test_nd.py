"""N-D activations: a [..., K] for scaled_mm (the leading dimensions are viewed as M rows, out [..., N])
and x [..., K] for the quantizers, in the NumPy and torch front ends, with strided views that still merge
into evenly spaced rows; a view that cannot be merged without a copy is a clear error. Every element is
compared with the reference arithmetic (w8a8_ref.py) or with the 2-D call on the same rows.
The torch part runs on CPU tensors (and CUDA ones where torch sees a GPU); it skips without torch."""
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


def rng():
    seed = int(os.environ.get("W8A8_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    return np.random.default_rng(seed)


def u32(x):
    return np.asarray(x, np.float32).view(np.uint32)


@unittest.skipIf(np is None, "NumPy is not installed")
class NumpyND(unittest.TestCase):
    def test_scaled_mm(self):
        r = rng()
        B, S, K, N = 3, 5, 48, 24
        big = r.integers(-128, 128, (B, S, K + 8)).astype(np.int8)
        w = r.integers(-128, 128, (N, K)).astype(np.int8)
        sa = ((r.random((B, S, 1)) + 0.5) * 2.0 ** -6).astype(np.float32)
        sb = ((r.random((1, N)) + 0.5) * 2.0 ** -5).astype(np.float32)
        for a in (np.ascontiguousarray(big[:, :, :K]), big[:, :, 4:4 + K]):  # contiguous; rows K + 8 apart
            a2 = np.ascontiguousarray(a).reshape(B * S, K)
            want = ref.scaled_mm_int8(a2, w.T, sa.reshape(-1, 1), sb)
            y = w8a8.scaled_mm(a, w.T, sa, sb, out_dtype="fp32")
            self.assertEqual(y.shape, (B, S, N))
            np.testing.assert_array_equal(u32(y).reshape(B * S, N), u32(want))
            out = np.full((B, S, N), np.nan, np.float32)
            self.assertIs(w8a8.scaled_mm(a, w.T, sa, sb, out=out), out)
            np.testing.assert_array_equal(u32(out).reshape(B * S, N), u32(want))
            out2 = np.full((B * S, N), np.nan, np.float32)  # a 2-D out of the same rows is taken too
            w8a8.scaled_mm(a, w.T, sa, sb, out=out2)
            np.testing.assert_array_equal(u32(out2), u32(want))
        a1 = big[1, 2, :K]  # one token: [K] -> [N]
        y1 = w8a8.scaled_mm(a1, w.T, 0.5, sb, out_dtype="fp32")
        self.assertEqual(y1.shape, (N,))
        np.testing.assert_array_equal(u32(y1), u32(ref.scaled_mm_int8(a1.reshape(1, K), w.T, 0.5, sb)[0]))
        with self.assertRaises(w8a8.InvalidLayoutError) as cm:
            w8a8.scaled_mm(big[:, :3, :K].transpose(1, 0, 2), w.T, 1.0, 1.0)
        self.assertIn("without a copy", cm.exception.message)

    def test_quantizers(self):
        r = rng()
        x = (r.standard_normal((4, 3, 80)) * 3).astype(np.float32)
        x2 = x.reshape(12, 80)
        q, s = w8a8.quantize_fp8(x, use_per_token_if_dynamic=True)
        s_want = ref.scale_from(ref.amax_rows(x2), 448.0)
        self.assertEqual((q.shape, s.shape), (x.shape, (12, 1)))
        np.testing.assert_array_equal(u32(s).reshape(-1), u32(s_want))
        np.testing.assert_array_equal(q.view(np.uint8).reshape(12, 80), ref.quant_fp8(x2, s_want.reshape(-1, 1)))
        q, s, z = w8a8.quantize_int8(x)
        s_want = ref.scale_from(ref.amax_rows(x2), 127.0)
        self.assertIsNone(z)
        np.testing.assert_array_equal(u32(s).reshape(-1), u32(s_want))
        np.testing.assert_array_equal(q.reshape(12, 80), ref.quant_int8(x2, s_want.reshape(-1, 1)))
        with self.assertRaises(w8a8.InvalidLayoutError):
            w8a8.quantize_int8(x[:, :2, :].transpose(1, 0, 2))


def _devices():
    if torch is None:
        return []
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@unittest.skipIf(np is None or torch is None, "torch is not installed")
class TorchND(unittest.TestCase):
    def test_scaled_mm_and_quantizers(self):
        import w8a8.torch as wt
        r = rng()
        B, S, K, N = 2, 7, 64, 40
        for dev in _devices():
            big = r.integers(-128, 128, (B, S, K + 16)).astype(np.int8)
            w = r.integers(-128, 128, (N, K)).astype(np.int8)
            sa = ((r.random((B * S, 1)) + 0.5) * 2.0 ** -6).astype(np.float32)
            sb = ((r.random((1, N)) + 0.5) * 2.0 ** -5).astype(np.float32)
            tbig, tw = torch.from_numpy(big).to(dev), torch.from_numpy(w).to(dev)
            tsa, tsb = torch.from_numpy(sa).to(dev), torch.from_numpy(sb).to(dev)
            a = tbig[:, :, 8:8 + K]
            want = ref.scaled_mm_int8(np.ascontiguousarray(big[:, :, 8:8 + K]).reshape(B * S, K), w.T, sa, sb)
            y = wt.scaled_mm(a, tw.t(), tsa, tsb, torch.float32)
            self.assertEqual(tuple(y.shape), (B, S, N))
            np.testing.assert_array_equal(u32(y.cpu().numpy()).reshape(B * S, N), u32(want), dev)
            out = torch.full((B, S, N), float("nan"), device=dev)
            self.assertIs(w8a8.scaled_mm(a, tw.t(), tsa, tsb, out=out), out)
            np.testing.assert_array_equal(u32(out.cpu().numpy()).reshape(B * S, N), u32(want), dev)
            with self.assertRaises(w8a8.InvalidLayoutError) as cm:
                wt.scaled_mm(tbig[:, :3, :K].transpose(0, 1), tw.t(), tsa, tsb)
            self.assertIn("without a copy", cm.exception.message)
            x = torch.from_numpy((r.standard_normal((B, S, K)) * 3).astype(np.float32)).to(dev)
            q, s, _ = w8a8.quantize_int8(x)
            q2, s2, _ = w8a8.quantize_int8(x.reshape(B * S, K))
            self.assertEqual((tuple(q.shape), tuple(s.shape)), ((B, S, K), (B * S, 1)))
            self.assertTrue(torch.equal(q.reshape(B * S, K), q2) and torch.equal(s, s2), dev)

    @unittest.skipUnless(torch is not None and getattr(torch.library, "custom_op", None) is not None,
                         "torch < 2.4: no custom ops")
    def test_compile_nd(self):
        r = rng()
        B, S, K, N = 2, 3, 32, 16
        x = torch.from_numpy((r.standard_normal((B, S, K)) * 2).astype(np.float32))
        w = torch.from_numpy(r.integers(-128, 128, (N, K)).astype(np.int8))
        sb = torch.from_numpy(((r.random((1, N)) + 0.5) * 0.01).astype(np.float32))

        def f(x, w, sb):
            q, s, _ = w8a8.quantize_int8(x)
            return w8a8.scaled_mm(q, w.t(), s, sb, out_dtype=torch.float32)

        want = f(x, w, sb)
        got = torch.compile(f, backend="aot_eager", fullgraph=True)(x, w, sb)
        self.assertEqual(tuple(got.shape), (B, S, N))
        self.assertTrue(torch.equal(got.view(torch.int32), want.view(torch.int32)))


if __name__ == "__main__":
    unittest.main()
