"""The Python package on NumPy arrays (the CPU backend), against the independent reference in
w8a8_ref.py on fresh random data. int8 results and the quantizers are compared bit for bit; fp8
GEMM results within a tight bound. Outputs are poisoned first, so an element the library did not
write is caught. Run: python3 -m unittest discover -s tests/python (tests/run_python.sh)."""
import os
import subprocess
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

SEED = int(os.environ.get("W8A8_TEST_SEED", "0")) or None
SHAPES = [(1, 7, 13), (17, 33, 64), (64, 48, 96), (5, 1, 1), (3, 4, 0)]
OUT_DTYPES = ["bf16", "fp16", "fp32"]
SCALES = [("tensor", "tensor"), ("token", "tensor"), ("tensor", "channel"), ("token", "channel")]
POISON = {"bf16": 0x7FC1, "fp16": np.float16(np.nan) if np else None, "fp32": np.float32(np.nan) if np else None}


def rng():
    r = np.random.default_rng(SEED)
    return r


def np_out_dtype(od):
    return {"bf16": wn.bf16_dtype(), "fp16": np.float16, "fp32": np.float32}[od]


def poisoned(shape, od):
    o = np.empty(shape, dtype=np_out_dtype(od))
    if od == "bf16":
        o.view(np.uint16)[...] = 0x7FC1
    else:
        o[...] = np.nan
    return o


def scales(r, kind_a, kind_b, M, N):
    sa = (r.uniform(0.5, 2.0, size=(M, 1)) if kind_a == "token" else r.uniform(0.5, 2.0, size=(1,))).astype(
        np.float32) * np.float32(2.0 ** -6)
    sb = (r.uniform(0.5, 2.0, size=(1, N)) if kind_b == "channel" else r.uniform(0.5, 2.0, size=(1,))).astype(
        np.float32) * np.float32(2.0 ** -5)
    return sa, sb


def bias_for(r, N, od):
    f = r.uniform(-4, 4, size=(N,)).astype(np.float32)
    if od == "bf16":
        bits = ref.bf16_encode(f)
        return bits.view(wn.bf16_dtype()), ref.bf16_decode(bits)
    if od == "fp16":
        h = f.astype(np.float16)
        return h, h.astype(np.float32)
    return f, f


@unittest.skipIf(np is None, "NumPy is not installed")
class ScaledMMInt8(unittest.TestCase):
    def check_case(self, M, N, K, od, ka, kb, with_bias, r):
        a = r.integers(-128, 128, size=(M, K)).astype(np.int8)
        w = r.integers(-128, 128, size=(N, K)).astype(np.int8)
        sa, sb = scales(r, ka, kb, M, N)
        bias, bias_f = bias_for(r, N, od) if with_bias else (None, None)
        out = poisoned((M, N), od)
        got = w8a8.scaled_mm(a, w.T, sa, sb, out_dtype=od, bias=bias, out=out)
        self.assertIs(got, out)
        want = ref.to_out(ref.scaled_mm_int8(a, w.T, sa, sb, bias_f), od)
        np.testing.assert_array_equal(ref.out_bits(got, od), ref.out_bits(want, od),
                                      err_msg="M,N,K=%d,%d,%d %s %s*%s bias=%s" % (M, N, K, od, ka, kb, with_bias))

    def test_every_mode(self):
        r = rng()
        for (M, N, K) in SHAPES:
            for od in OUT_DTYPES:
                for ka, kb in SCALES:
                    for with_bias in (False, True):
                        self.check_case(M, N, K, od, ka, kb, with_bias, r)

    def test_returns_new_array_of_out_dtype(self):
        r = rng()
        a = r.integers(-128, 128, size=(4, 16)).astype(np.int8)
        w = r.integers(-128, 128, size=(8, 16)).astype(np.int8)
        for od, dt in (("bf16", wn.bf16_dtype()), ("fp16", np.float16), ("fp32", np.float32),
                       (np.float32, np.float32), (np.float16, np.float16)):
            y = w8a8.scaled_mm(a, w.T, 1.0, 1.0, out_dtype=od)
            self.assertEqual(y.dtype, np.dtype(dt))
            self.assertEqual(y.shape, (4, 8))
        y = w8a8.scaled_mm(a, w.T, 1.0, 1.0, out_dtype="fp32")
        np.testing.assert_array_equal(y, (a.astype(np.int64) @ w.T.astype(np.int64)).astype(np.float32))

    def test_strided_views(self):
        """Submatrices of larger buffers, as given: nothing outside the view is read or written."""
        r = rng()
        M, N, K = 9, 11, 40
        abig = r.integers(-128, 128, size=(M + 5, K + 9)).astype(np.int8)
        wbig = r.integers(-128, 128, size=(N + 3, K + 7)).astype(np.int8)
        a = abig[2:2 + M, 3:3 + K]
        w = wbig[1:1 + N, 5:5 + K]
        for od in OUT_DTYPES:
            obig = poisoned((M + 4, N + 6), od)
            before = ref.out_bits(obig, od).copy()
            out = obig[1:1 + M, 2:2 + N]
            sa, sb = scales(r, "token", "channel", M, N)
            w8a8.scaled_mm(a, w.T, sa, sb, out=out)
            want = ref.to_out(ref.scaled_mm_int8(a, w.T, sa, sb), od)
            np.testing.assert_array_equal(ref.out_bits(out, od), ref.out_bits(want, od))
            mask = np.ones(obig.shape, bool)
            mask[1:1 + M, 2:2 + N] = False
            np.testing.assert_array_equal(ref.out_bits(obig, od)[mask], before[mask])
        # scale vectors as (M,1) / (1,N) views with unit stride, and per-tensor as 0-d arrays
        w8a8.scaled_mm(a, w.T, np.float32(0.25) * np.ones((), np.float32), np.ones((1, N), np.float32), "fp32")

    def test_zero_point(self):
        r = rng()
        for (M, N, K) in [(1, 5, 9), (13, 24, 70)]:
            for od in OUT_DTYPES:
                a = r.integers(-128, 128, size=(M, K)).astype(np.int8)
                w = r.integers(-128, 128, size=(N, K)).astype(np.int8)
                sa, sb = scales(r, "token", "channel", M, N)
                adj = w8a8.colsum(w.T)
                np.testing.assert_array_equal(adj, w.astype(np.int32).sum(axis=1))
                bias, bias_f = bias_for(r, N, od)
                azp_tok = r.integers(-30, 30, size=(M,)).astype(np.int32)
                azp_one = np.array([7], np.int32)
                for azp, adj_arg, ref_azp, ref_adj in (
                        (azp_tok, adj, azp_tok, adj),                  # per-token
                        (azp_one, adj, azp_one, adj),                  # per-tensor
                        (None, (adj * 7).astype(np.int32), None, adj * 7)):  # premultiplied
                    out = poisoned((M, N), od)
                    w8a8.scaled_mm(a, w.T, sa, sb, od, bias=bias, azp=azp, azp_adj=adj_arg, out=out)
                    want = ref.to_out(ref.scaled_mm_int8(a, w.T, sa, sb, bias_f, ref_azp, ref_adj), od)
                    np.testing.assert_array_equal(ref.out_bits(out, od), ref.out_bits(want, od))


@unittest.skipIf(np is None, "NumPy is not installed")
class ScaledMMFp8(unittest.TestCase):
    def test_every_mode(self):
        r = rng()
        for (M, N, K) in SHAPES:
            for od in OUT_DTYPES:
                for ka, kb in SCALES:
                    for with_bias in (False, True):
                        a = ref.random_fp8(r, (M, K))
                        w = ref.random_fp8(r, (N, K))
                        sa, sb = scales(r, ka, kb, M, N)
                        bias, bias_f = bias_for(r, N, od) if with_bias else (None, None)
                        out = poisoned((M, N), od)
                        w8a8.scaled_mm(a.view(wn.fp8_dtype()), w.view(wn.fp8_dtype()).T, sa, sb, od, bias=bias,
                                       out=out)
                        got = ref.out_float(out, od).astype(np.float64)
                        want, mag = ref.scaled_mm_fp8(a, w.T, sa, sb, bias_f)
                        # fp32 accumulation in any order: K * 2^-24 of sum|ab|; then one rounding to out
                        eps_out = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11, "fp32": 2.0 ** -23}[od]
                        abs_out = {"bf16": 2.0 ** -133, "fp16": 2.0 ** -24, "fp32": 2.0 ** -149}[od]  # subnormal steps
                        bound = mag * max(K, 1) * 2.0 ** -23 + np.abs(want) * eps_out + abs_out
                        if with_bias:
                            bound = bound + np.abs(bias_f).reshape(1, -1) * 2.0 ** -23
                        err = np.abs(got - want)
                        self.assertFalse(np.isnan(got).any(), "unwritten (poisoned) or NaN outputs")
                        bad = np.argwhere(err > bound)
                        self.assertEqual(len(bad), 0, "M,N,K=%d,%d,%d %s %s*%s bias=%s: %d elements off, first "
                                         "%s got %r want %r" % (M, N, K, od, ka, kb, with_bias, len(bad),
                                                                bad[:1].tolist(), got[tuple(bad[0])] if len(bad) else 0,
                                                                want[tuple(bad[0])] if len(bad) else 0))

    def test_uint8_and_fp8_dtype_agree(self):
        r = rng()
        a, w = ref.random_fp8(r, (6, 32)), ref.random_fp8(r, (5, 32))
        y1 = w8a8.scaled_mm(a, w.T, 1.0, 1.0, "fp32")
        y2 = w8a8.scaled_mm(a.view(wn.fp8_dtype()), w.view(wn.fp8_dtype()).T, 1.0, 1.0, "fp32")
        np.testing.assert_array_equal(y1, y2)


@unittest.skipIf(np is None, "NumPy is not installed")
class Quantizers(unittest.TestCase):
    def inputs(self, r, M, K):
        x = (r.standard_normal((M, K)) * r.uniform(0.1, 50, size=(M, 1))).astype(np.float32)
        out = [("fp32", x, x)]
        h = x.astype(np.float16)
        out.append(("fp16", h, h.astype(np.float32)))
        bits = ref.bf16_encode(x)
        out.append(("bf16-uint16", bits, ref.bf16_decode(bits)))
        out.append(("bf16", bits.view(wn.bf16_dtype()), ref.bf16_decode(bits)))
        return out

    def test_fp8(self):
        r = rng()
        for M, K in [(1, 1), (7, 33), (32, 256)]:
            for name, x, xf in self.inputs(r, M, K):
                msg = "%s %dx%d" % (name, M, K)
                # dynamic per-tensor
                q, s = w8a8.quantize_fp8(x)
                self.assertEqual(s.shape, (1,))
                s_want = ref.scale_from(ref.amax_rows(xf).max(initial=0), 448.0)
                np.testing.assert_array_equal(s.view(np.uint32), np.array([s_want], np.float32).view(np.uint32), msg)
                np.testing.assert_array_equal(q.view(np.uint8), ref.quant_fp8(xf, s_want), msg)
                # dynamic per-token, with and without an upper bound
                for ub in (None, 0.75):
                    q, s = w8a8.quantize_fp8(x, use_per_token_if_dynamic=True, scale_ub=ub)
                    self.assertEqual(s.shape, (M, 1))
                    am = ref.amax_rows(xf)
                    if ub is not None:
                        am = np.minimum(am, np.float32(ub))
                    s_want = ref.scale_from(am, 448.0).reshape(M, 1)
                    np.testing.assert_array_equal(s.view(np.uint32), s_want.view(np.uint32), msg)
                    np.testing.assert_array_equal(q.view(np.uint8), ref.quant_fp8(xf, s_want), msg)
                # static
                q, s = w8a8.quantize_fp8(x, scale=0.02)
                np.testing.assert_array_equal(q.view(np.uint8), ref.quant_fp8(xf, np.float32(0.02)), msg)

    def test_int8(self):
        r = rng()
        for M, K in [(1, 1), (7, 33), (32, 256)]:
            for name, x, xf in self.inputs(r, M, K):
                msg = "%s %dx%d" % (name, M, K)
                q, s, z = w8a8.quantize_int8(x)  # dynamic per-token symmetric
                self.assertIsNone(z)
                s_want = ref.scale_from(ref.amax_rows(xf), 127.0).reshape(M, 1)
                np.testing.assert_array_equal(s.view(np.uint32), s_want.view(np.uint32), msg)
                np.testing.assert_array_equal(q, ref.quant_int8(xf, s_want), msg)
                q, s, z = w8a8.quantize_int8(x, symmetric=False)  # dynamic per-token asymmetric
                s_want, z_want = ref.asym_params(xf)
                np.testing.assert_array_equal(s.reshape(-1).view(np.uint32), s_want.view(np.uint32), msg)
                np.testing.assert_array_equal(z.reshape(-1), z_want, msg)
                np.testing.assert_array_equal(q, ref.quant_int8(xf, s_want.reshape(M, 1), z_want.reshape(M, 1)), msg)
                q, s, z = w8a8.quantize_int8(x, use_per_token_if_dynamic=False)  # dynamic per-tensor
                s_want = ref.scale_from(ref.amax_rows(xf).max(initial=0), 127.0)
                np.testing.assert_array_equal(q, ref.quant_int8(xf, s_want), msg)
                q, s, z = w8a8.quantize_int8(x, scale=0.05)  # static symmetric
                np.testing.assert_array_equal(q, ref.quant_int8(xf, np.float32(0.05)), msg)
                q, s, z = w8a8.quantize_int8(x, scale=0.05, azp=-9)  # static asymmetric
                np.testing.assert_array_equal(q, ref.quant_int8(xf, np.float32(0.05), -9), msg)

    def test_special_values(self):
        x = np.array([[0.0, -0.0, np.nan, np.inf, -np.inf, 1e30, -1e-30, 3.0]], np.float32)
        q, _ = w8a8.quantize_fp8(x, scale=1.0)
        want = ref.quant_fp8(x, np.float32(1.0))
        self.assertTrue((q.view(np.uint8)[0, 2] & 0x7F) == 0x7F)  # NaN stays NaN
        keep = np.ones(x.shape[1], bool)
        keep[2] = False
        np.testing.assert_array_equal(q.view(np.uint8)[0, keep], want[0, keep])
        q, _, _ = w8a8.quantize_int8(x, scale=1.0)
        np.testing.assert_array_equal(q, ref.quant_int8(x, np.float32(1.0)))

    def test_strided_and_nd_inputs(self):
        r = rng()
        big = r.standard_normal((10, 50)).astype(np.float32)
        x = big[1:8, 3:43]
        q, s = w8a8.quantize_fp8(x, use_per_token_if_dynamic=True)
        np.testing.assert_array_equal(q.view(np.uint8), ref.quant_fp8(x, ref.scale_from(ref.amax_rows(x), 448.0)
                                                                      .reshape(-1, 1)))
        x3 = r.standard_normal((2, 3, 16)).astype(np.float32)
        q, s, _ = w8a8.quantize_int8(x3)
        self.assertEqual(q.shape, x3.shape)
        self.assertEqual(s.shape, (6, 1))
        x2 = x3.reshape(6, 16)
        np.testing.assert_array_equal(q.reshape(6, 16), ref.quant_int8(x2, ref.scale_from(ref.amax_rows(x2), 127.0)
                                                                       .reshape(-1, 1)))
        outbig = np.full((9, 60), 99, np.int8)
        out = outbig[1:8, 5:45]
        w8a8.quantize_int8(x, scale=0.1, out=out)
        np.testing.assert_array_equal(out, ref.quant_int8(x, np.float32(0.1)))
        self.assertTrue((outbig[0] == 99).all() and (outbig[:, :5] == 99).all() and (outbig[:, 45:] == 99).all())

    def test_quantize_then_mm(self):
        """The README's NumPy flow end to end: per-token fp8 activations x per-channel fp8 weights."""
        r = rng()
        x = r.standard_normal((16, 128)).astype(np.float32)
        w = r.standard_normal((24, 128)).astype(np.float32)
        qx, sx = w8a8.quantize_fp8(x, use_per_token_if_dynamic=True)
        qw, sw = w8a8.quantize_fp8(w, use_per_token_if_dynamic=True)
        y = w8a8.scaled_mm(qx, qw.T, sx, sw.reshape(1, -1), out_dtype="fp32")
        exact = x.astype(np.float64) @ w.T.astype(np.float64)
        rel = np.abs(y - exact).max() / np.abs(exact).max()
        self.assertLess(rel, 0.08)


@unittest.skipIf(np is None, "NumPy is not installed")
class Errors(unittest.TestCase):
    """Bad input raises a W8A8Error subclass with the library's message, writes nothing, never crashes."""

    def setUp(self):
        r = rng()
        self.a = r.integers(-128, 128, size=(4, 16)).astype(np.int8)
        self.w = r.integers(-128, 128, size=(6, 16)).astype(np.int8)
        self.out = poisoned((4, 6), "bf16")

    def assertRaisesW8A8(self, cls, fragment, fn, *args, **kw):
        with self.assertRaises(cls) as cm:
            fn(*args, **kw)
        e = cm.exception
        self.assertIsInstance(e, w8a8.W8A8Error)
        self.assertIn(fragment, e.message)
        self.assertEqual(e.name, "W8A8_" + w8a8.Status(e.status).name)
        self.assertIn(fragment, str(e))
        np.testing.assert_array_equal(self.out.view(np.uint16), 0x7FC1)  # nothing written
        return e

    def test_row_major_b_is_a_clear_error(self):
        e = self.assertRaisesW8A8(w8a8.InvalidLayoutError, "b must be column-major", w8a8.scaled_mm, self.a,
                                  np.ascontiguousarray(self.w.T), 1.0, 1.0, out=self.out)
        self.assertEqual(e.status, w8a8.Status.ERROR_INVALID_LAYOUT)
        self.assertIsInstance(e, ValueError)

    def test_layouts_without_unit_stride(self):
        wbig = np.zeros((12, 32), np.int8)
        self.assertRaisesW8A8(w8a8.InvalidLayoutError, "no hidden copies", w8a8.scaled_mm, self.a,
                              wbig[::2, ::2].T, 1.0, 1.0, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidStrideError, "negative strides", w8a8.scaled_mm, self.a[::-1], self.w.T,
                              1.0, 1.0, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidLayoutError, "a must be row-major", w8a8.scaled_mm,
                              np.asfortranarray(self.a), self.w.T, 1.0, 1.0, out=self.out)

    def test_dtypes(self):
        self.assertRaisesW8A8(w8a8.InvalidDtypeError, "float64", w8a8.scaled_mm, self.a.astype(np.float64),
                              self.w.T, 1.0, 1.0, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidDtypeError, "both must be int8 or both fp8", w8a8.scaled_mm, self.a,
                              self.w.view(np.uint8).T, 1.0, 1.0, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidScaleError, "float64", w8a8.scaled_mm, self.a, self.w.T,
                              np.ones(4, np.float64), 1.0, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidScaleError, "scale_a->dtype", w8a8.scaled_mm, self.a, self.w.T,
                              np.ones(4, np.float16), 1.0, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidBiasError, "bias->dtype", w8a8.scaled_mm, self.a, self.w.T, 1.0, 1.0,
                              bias=np.zeros(6, np.float32), out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidDtypeError, "out_dtype", w8a8.scaled_mm, self.a, self.w.T, 1.0, 1.0,
                              out_dtype="int32")
        self.assertRaisesW8A8(w8a8.InvalidDtypeError, "out->dtype", w8a8.scaled_mm, self.a, self.w.T, 1.0, 1.0,
                              out=np.zeros((4, 6), np.int32))
        with self.assertRaises(w8a8.W8A8Error):
            w8a8.scaled_mm([[1, 2]], self.w.T, 1.0, 1.0)

    def test_shapes_and_lengths(self):
        self.assertRaisesW8A8(w8a8.InvalidShapeError, "b->rows must be K", w8a8.scaled_mm, self.a,
                              self.w[:, :15].T, 1.0, 1.0, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidShapeError, "out is", w8a8.scaled_mm, self.a, self.w.T, 1.0, 1.0,
                              out=poisoned((4, 5), "bf16"))
        self.assertRaisesW8A8(w8a8.InvalidScaleError, "scale_a->len is 3", w8a8.scaled_mm, self.a, self.w.T,
                              np.ones(3, np.float32), 1.0, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidScaleError, "scale_b->len is 4", w8a8.scaled_mm, self.a, self.w.T, 1.0,
                              np.ones(4, np.float32), out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidScaleError, "not a contiguous vector", w8a8.scaled_mm, self.a, self.w.T,
                              np.ones((4, 2), np.float32)[:, 0], 1.0, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidShapeError, "must be 2-D", w8a8.scaled_mm, self.a.reshape(2, 2, 16),
                              self.w.T, 1.0, 1.0, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidZeroPointError, "azp_adj", w8a8.scaled_mm, self.a, self.w.T, 1.0, 1.0,
                              azp=3, out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidZeroPointError, "azp_adj.len", w8a8.scaled_mm, self.a, self.w.T, 1.0, 1.0,
                              azp=3, azp_adj=np.zeros(5, np.int32), out=self.out)
        self.assertRaisesW8A8(w8a8.InvalidZeroPointError, "int8 only", w8a8.scaled_mm, self.a.view(np.uint8),
                              self.w.view(np.uint8).T, 1.0, 1.0, azp=3, azp_adj=np.zeros(6, np.int32), out=self.out)

    def test_overlap_and_readonly(self):
        buf = np.zeros(4096, np.uint8)
        a = buf[:64].view(np.int8).reshape(4, 16)
        out = buf[32:32 + 48].view(np.uint16).reshape(4, 6)
        with self.assertRaises(w8a8.OverlapError) as cm:
            w8a8.scaled_mm(a, self.w.T, 1.0, 1.0, out=out)
        self.assertIn("overlap", cm.exception.message)
        ro = poisoned((4, 6), "bf16")
        ro.flags.writeable = False
        self.assertRaisesW8A8(w8a8.InvalidValueError, "read-only", w8a8.scaled_mm, self.a, self.w.T, 1.0, 1.0, out=ro)

    def test_quantizer_errors(self):
        x = np.ones((3, 8), np.float32)
        with self.assertRaises(w8a8.InvalidScaleError) as cm:
            w8a8.quantize_fp8(x, scale=0.0)
        self.assertIn("static scale", cm.exception.message)
        with self.assertRaises(w8a8.InvalidScaleError):
            w8a8.quantize_fp8(x, scale=float("nan"))
        with self.assertRaises(w8a8.InvalidZeroPointError) as cm:
            w8a8.quantize_int8(x, symmetric=False, use_per_token_if_dynamic=False)
        self.assertIn("symmetric only", cm.exception.message)
        with self.assertRaises(w8a8.InvalidDtypeError):
            w8a8.quantize_fp8(x.astype(np.float64))
        with self.assertRaises(w8a8.InvalidScaleError):
            w8a8.quantize_fp8(x, scale_ub=0.5)  # per-tensor: the bound is per-token only
        with self.assertRaises(w8a8.InvalidShapeError):
            w8a8.quantize_int8(x, scale=1.0, out=np.zeros((3, 7), np.int8))
        with self.assertRaises(w8a8.InvalidDtypeError):
            w8a8.colsum(np.zeros((4, 3), np.uint8).T)

    def test_exception_classes(self):
        for st in w8a8.Status:
            if st == w8a8.Status.SUCCESS:
                continue
            cls = w8a8._lib.ERROR_CLASSES[st]
            self.assertTrue(issubclass(cls, w8a8.W8A8Error))
            self.assertIs(getattr(w8a8, cls.__name__), cls)
            e = w8a8._lib.make_error(st, "m")
            self.assertEqual((e.status, e.name, e.message), (st, "W8A8_" + st.name, "m"))
            lib_name = w8a8._lib.load().w8a8_status_name(int(st)).decode()
            if "UNKNOWN" not in lib_name:  # a library built before a status was added
                self.assertEqual(lib_name, e.name)
        import pickle
        e = pickle.loads(pickle.dumps(w8a8._lib.make_error(8, "x")))
        self.assertIsInstance(e, w8a8.InvalidScaleError)


@unittest.skipIf(np is None, "NumPy is not installed")
class Misc(unittest.TestCase):
    def test_conversion_helpers(self):
        codes = np.arange(256, dtype=np.uint8)
        got, want = wn.fp8_to_float32(codes), ref.fp8_decode(codes)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(got[ok], want[ok])
        r = rng()
        x = (r.standard_normal(5000) * 10.0 ** r.integers(-10, 10, 5000)).astype(np.float32)
        np.testing.assert_array_equal(wn.float32_to_bf16(x).view(np.uint16), ref.bf16_encode(x))
        np.testing.assert_array_equal(wn.bf16_to_float32(ref.bf16_encode(x)), ref.bf16_decode(ref.bf16_encode(x)))

    def test_version_and_info(self):
        self.assertEqual(w8a8.version() // 100, 1)  # 0.1.x
        self.assertIn("cpu", w8a8.version_string())
        info = wn.cpu_handle().info()
        self.assertEqual(info["kind"], "cpu")
        self.assertEqual(w8a8.shard_rows(10, 4, 1), (3, 3))
        self.assertEqual(w8a8.shard_rows(10, 4, 3), (8, 2))
        with self.assertRaises(w8a8.W8A8Error):
            w8a8.shard_rows(10, 0, 0)

    def test_library_not_found_is_an_error(self):
        code = ("import sys; sys.path.insert(0, %r); import w8a8\n"
                "try:\n    w8a8.version()\nexcept w8a8.NotBuiltError as e:\n    print('OK', e.message)\n"
                % os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
        env = dict(os.environ, W8A8_LIBRARY="/nonexistent/libw8a8.so")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertIn("OK could not load libw8a8", p.stdout, p.stderr)
        self.assertIn("/nonexistent/libw8a8.so", p.stdout)

    def test_tp_nccl_bootstrap_is_not_built(self):
        """The GPU communicator is a stub in this version of the library: its NOT_BUILT status
        surfaces unchanged (the Python layer invents nothing)."""
        import ctypes
        uid = w8a8._lib.UniqueId()
        st = w8a8._lib.load().w8a8_comm_unique_id(ctypes.byref(uid))
        if st == 0:
            self.skipTest("this libw8a8 has the NCCL transport")
        with self.assertRaises(w8a8.NotBuiltError):
            w8a8._lib.check(st)


if __name__ == "__main__":
    unittest.main()
