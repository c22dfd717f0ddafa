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


def gate_up_inputs(r, M, I, dtypes=("fp32", "fp16", "bf16")):
    """x [M, 2I] in each input dtype, as (name, x, exact float32 value of x). Gate values whose
    exp(-g) lies within ref.TIE_MARGIN ulp of a float32 rounding midpoint (where the header allows
    either neighbour) are moved one step of their dtype until it does not."""
    base = (r.standard_normal((M, 2 * I)) * r.uniform(0.5, 6, size=(M, 1))).astype(np.float32)
    out = []
    for name in dtypes:
        if name == "fp32":
            x, bits, dec = base.copy(), None, lambda a: a
        elif name == "fp16":
            x, dec = base.astype(np.float16), lambda a: a.astype(np.float32)
        else:
            x, dec = ref.bf16_encode(base), ref.bf16_decode
        bits = x.view(np.uint32 if name == "fp32" else np.uint16)
        for _ in range(64):
            _, amb = ref.silu_mul_rows(dec(x))
            if not amb.any():
                break
            bits[:, :I][amb] += 1
        else:
            raise AssertionError("could not move the gate values off exp's rounding ties")
        if name == "bf16":
            out.append(("bf16-uint16", x, dec(x)))
            x = x.view(wn.bf16_dtype())
        out.append((name, x, dec(x if name != "bf16" else x.view(np.uint16))))
    return out


def assert_same_bits(tc, got, want, msg):
    got, want = np.asarray(got), np.asarray(want)
    tc.assertEqual(got.shape, want.shape, msg)
    view = {1: np.uint8, 4: np.uint32}[want.dtype.itemsize]
    g, w = got.view(view) if got.dtype.itemsize == want.dtype.itemsize else got, want.view(view)
    bad = np.argwhere(g != w)
    tc.assertEqual(len(bad), 0, "%s: %d elements differ, first at %s: got %r want %r" % (
        msg, len(bad), bad[:1].tolist(), g[tuple(bad[0])] if len(bad) else 0, w[tuple(bad[0])] if len(bad) else 0))


@unittest.skipIf(np is None, "NumPy is not installed")
class SiluMulQuantize(unittest.TestCase):
    """w8a8.silu_mul_quantize_fp8 / _int8: q = quantize(silu(gate) * up) for x [M, 2I], every byte of q
    and every scale / zero point against w8a8_ref (y = silu(g) * u in float32 as the header spells it,
    with exp correctly rounded: see w8a8_ref.exp_f32 for why that is exact on the inputs used here)."""

    SIZES = [(1, 1), (5, 3), (7, 33), (32, 256), (3, 0), (0, 8)]

    def check_fp8(self, x, xf, msg, out=None):
        M, I = xf.shape[0], xf.shape[1] // 2
        y, _ = ref.silu_mul_rows(xf)
        q, s = w8a8.silu_mul_quantize_fp8(x, out=out)  # dynamic per-tensor
        s_want = np.array([ref.scale_from(ref.amax_rows(y).max(initial=0), 448.0)], np.float32)
        if M > 0:  # M == 0 writes nothing (w8a8.h), the per-tensor scale included
            assert_same_bits(self, s, s_want, msg + " fp8 per-tensor scale")
        assert_same_bits(self, q, ref.quant_fp8(y, s_want[0]), msg + " fp8 per-tensor q")
        for ub in (None, 0.75):
            q, s = w8a8.silu_mul_quantize_fp8(x, use_per_token_if_dynamic=True, scale_ub=ub, out=out)
            am = ref.amax_rows(y)
            if ub is not None:
                am = np.minimum(am, np.float32(ub))
            s_want = ref.scale_from(am, 448.0).reshape(M, 1)
            assert_same_bits(self, s, s_want, msg + " fp8 per-token scale ub=%s" % ub)
            assert_same_bits(self, q, ref.quant_fp8(y, s_want), msg + " fp8 per-token q ub=%s" % ub)
        q, s = w8a8.silu_mul_quantize_fp8(x, scale=0.02, out=out)  # static
        assert_same_bits(self, q, ref.quant_fp8(y, np.float32(0.02)), msg + " fp8 static q")
        return y

    def check_int8(self, x, xf, msg, out=None):
        M, I = xf.shape[0], xf.shape[1] // 2
        y, _ = ref.silu_mul_rows(xf)
        q, s, z = w8a8.silu_mul_quantize_int8(x, out=out)  # dynamic per-token symmetric (the default)
        self.assertIsNone(z)
        s_want = ref.scale_from(ref.amax_rows(y), 127.0).reshape(M, 1)
        assert_same_bits(self, s, s_want, msg + " int8 per-token scale")
        assert_same_bits(self, q, ref.quant_int8(y, s_want), msg + " int8 per-token q")
        q, s, z = w8a8.silu_mul_quantize_int8(x, use_per_token_if_dynamic=False, out=out)  # dynamic per-tensor
        s_want = np.array([ref.scale_from(ref.amax_rows(y).max(initial=0), 127.0)], np.float32)
        if M > 0:
            assert_same_bits(self, s, s_want, msg + " int8 per-tensor scale")
        assert_same_bits(self, q, ref.quant_int8(y, s_want[0]), msg + " int8 per-tensor q")
        if I > 0:  # dynamic asymmetric per-token (min / max of an empty row is not defined)
            q, s, z = w8a8.silu_mul_quantize_int8(x, symmetric=False, out=out)
            s_want, z_want = ref.asym_params(y)
            assert_same_bits(self, s.reshape(-1), s_want, msg + " int8 asym scale")
            assert_same_bits(self, z.reshape(-1), z_want, msg + " int8 asym azp")
            assert_same_bits(self, q, ref.quant_int8(y, s_want.reshape(M, 1), z_want.reshape(M, 1)),
                             msg + " int8 asym q")
        q, s, z = w8a8.silu_mul_quantize_int8(x, scale=0.05, out=out)  # static symmetric
        assert_same_bits(self, q, ref.quant_int8(y, np.float32(0.05)), msg + " int8 static q")
        q, s, z = w8a8.silu_mul_quantize_int8(x, scale=0.05, azp=-9, out=out)  # static asymmetric
        assert_same_bits(self, q, ref.quant_int8(y, np.float32(0.05), -9), msg + " int8 static asym q")
        return y

    def test_every_mode(self):
        r = rng()
        for M, I in self.SIZES:
            for name, x, xf in gate_up_inputs(r, M, I):
                msg = "%s %dx2*%d" % (name, M, I)
                self.check_fp8(x, xf, msg)
                self.check_int8(x, xf, msg)

    def test_one_column_exposes_every_y(self):
        """With I = 1 the per-token int8 scale is fl(|y| / 127), which takes a different value for each
        float32 |y| > 1/512 outside [1.984, 2) * 2^k: the scales pin y to the bit, so an exp or an
        operation order that is off by one ulp anywhere fails here (q alone, 8 bits, would hide it)."""
        r = rng()
        M = 4000
        for name, x, xf in gate_up_inputs(r, M, 1, ("fp32", "bf16")):
            y, _ = ref.silu_mul_rows(xf)
            _, s, _ = w8a8.silu_mul_quantize_int8(x)
            s_want = ref.scale_from(ref.amax_rows(y), 127.0).reshape(M, 1)
            assert_same_bits(self, s, s_want, name + " per-token scale of one y per row")
            # the comparison does resolve one ulp of y: a reference one ulp off disagrees on most rows
            y_off = np.nextafter(y, np.float32(np.inf))
            s_off = ref.scale_from(ref.amax_rows(y_off), 127.0).reshape(M, 1)
            self.assertGreater(int((s_off.view(np.uint32) != s.view(np.uint32)).sum()), M // 2)

    def test_same_as_quantize_of_y(self):
        """The two-step definition through the library's own quantizer: silu_mul_quantize(x) gives the
        bytes and scales that quantize_*(y) gives for the reference y."""
        r = rng()
        for name, x, xf in gate_up_inputs(r, 9, 70):
            y, _ = ref.silu_mul_rows(xf)
            for per_token in (False, True):
                a = w8a8.silu_mul_quantize_fp8(x, use_per_token_if_dynamic=per_token)
                b = w8a8.quantize_fp8(y, use_per_token_if_dynamic=per_token)
                for ai, bi in zip(a, b):
                    assert_same_bits(self, ai, bi, "%s fp8 per_token=%s" % (name, per_token))
            a = w8a8.silu_mul_quantize_int8(x, symmetric=False)
            b = w8a8.quantize_int8(y, symmetric=False)
            for ai, bi in zip(a, b):
                assert_same_bits(self, ai, bi, "%s int8 asym" % name)

    def test_special_values(self):
        v = [0.0, -0.0, np.nan, np.inf, -np.inf, 200.0, -200.0, 3.0, -3.0, 1e-30, 90.0, -90.0]
        g, u = np.meshgrid(np.array(v, np.float32), np.array(v, np.float32), indexing="ij")
        x = np.concatenate([g, u], axis=1).astype(np.float32)  # row m: gate v[m] against every up value
        y, amb = ref.silu_mul_rows(x)
        self.assertFalse(amb.any())
        q, _ = w8a8.silu_mul_quantize_fp8(x, scale=1.0)
        with np.errstate(invalid="ignore"):  # inf / inf in the reference's y / s: NaN, as in the library
            assert_same_bits(self, q, ref.quant_fp8(y, np.float32(1.0)), "fp8 specials")
        self.assertTrue(((q.view(np.uint8) == 0x7F) == np.isnan(y)).all())  # NaN is the positive NaN
        q, _, _ = w8a8.silu_mul_quantize_int8(x, scale=1.0)
        assert_same_bits(self, q, ref.quant_int8(y, np.float32(1.0)), "int8 specials")
        q, s, _ = w8a8.silu_mul_quantize_int8(x)
        s_want = ref.scale_from(ref.amax_rows(y), 127.0).reshape(-1, 1)
        assert_same_bits(self, s, s_want, "int8 per-token scale with specials")
        with np.errstate(invalid="ignore"):
            assert_same_bits(self, q, ref.quant_int8(y, s_want), "int8 per-token q with specials")

    def test_strided_and_nd(self):
        r = rng()
        M, I = 7, 19
        for name, xb, _ in gate_up_inputs(r, M + 4, 2 * I + 5, ("fp32", "fp16")):
            x = xb[2:2 + M, 3:3 + 2 * I]  # a submatrix: ld = the parent's row, gate and up inside it
            xf = x.astype(np.float32)
            y, amb = ref.silu_mul_rows(xf)
            if amb.any():
                continue  # the parent was moved off ties for its own gate columns, not this view's
            for qdt, poison in ((np.int8, 99), (np.uint8, 0x7E)):
                obig = np.full((M + 3, I + 9), poison, qdt)
                out = obig[1:1 + M, 4:4 + I]
                if qdt == np.int8:
                    q, s, _ = w8a8.silu_mul_quantize_int8(x, out=out)
                    want = ref.quant_int8(y, ref.scale_from(ref.amax_rows(y), 127.0).reshape(M, 1))
                else:
                    q, s = w8a8.silu_mul_quantize_fp8(x, use_per_token_if_dynamic=True, out=out)
                    want = ref.quant_fp8(y, ref.scale_from(ref.amax_rows(y), 448.0).reshape(M, 1))
                self.assertIs(q, out)
                assert_same_bits(self, out, want, name + " strided")
                mask = np.ones(obig.shape, bool)
                mask[1:1 + M, 4:4 + I] = False
                self.assertTrue((obig[mask] == poison).all(), "written outside the out view")
        x3 = gate_up_inputs(r, 6, 16, ("fp32",))[0][1].reshape(2, 3, 32)
        q, s, _ = w8a8.silu_mul_quantize_int8(x3)
        self.assertEqual((q.shape, s.shape), ((2, 3, 16), (6, 1)))
        y, _ = ref.silu_mul_rows(x3.reshape(6, 32))
        assert_same_bits(self, q.reshape(6, 16), ref.quant_int8(y, ref.scale_from(ref.amax_rows(y), 127.0)
                                                                .reshape(6, 1)), "3-D")

    def test_errors_write_nothing(self):
        x = np.ones((4, 16), np.float32)
        cases = [
            (w8a8.InvalidShapeError, "even", lambda o: w8a8.silu_mul_quantize_int8(np.ones((4, 17), np.float32),
                                                                                  scale=1.0, out=o)),
            (w8a8.InvalidShapeError, "q must be", lambda o: w8a8.silu_mul_quantize_int8(x[:, :14], scale=1.0,
                                                                                       out=o)),
            (w8a8.InvalidShapeError, "q must be", lambda o: w8a8.silu_mul_quantize_int8(x[:3], out=o)),
            (w8a8.InvalidDtypeError, "x->dtype", lambda o: w8a8.silu_mul_quantize_int8(x.astype(np.int8),
                                                                                      scale=1.0, out=o)),
            (w8a8.InvalidDtypeError, "float64", lambda o: w8a8.silu_mul_quantize_int8(x.astype(np.float64),
                                                                                     out=o)),
            (w8a8.InvalidScaleError, "static scale", lambda o: w8a8.silu_mul_quantize_int8(x, scale=0.0, out=o)),
            (w8a8.InvalidScaleError, "static scale", lambda o: w8a8.silu_mul_quantize_int8(x, scale=np.inf,
                                                                                          out=o)),
            (w8a8.InvalidZeroPointError, "", lambda o: w8a8.silu_mul_quantize_int8(
                x, symmetric=False, use_per_token_if_dynamic=False, out=o)),
            (w8a8.InvalidZeroPointError, "static", lambda o: w8a8.silu_mul_quantize_int8(x, azp=3, out=o)),
            (w8a8.InvalidLayoutError, "row-major", lambda o: w8a8.silu_mul_quantize_int8(np.asfortranarray(x),
                                                                                        out=o)),
            (w8a8.InvalidDtypeError, "out has dtype", lambda o: w8a8.silu_mul_quantize_int8(
                x, out=np.zeros((4, 8), np.float32))),
        ]
        for cls, frag, call in cases:
            out = np.full((4, 8), 99, np.int8)
            with self.assertRaises(cls) as cm:
                call(out)
            self.assertIsInstance(cm.exception, w8a8.W8A8Error)
            self.assertIn(frag, cm.exception.message)
            self.assertTrue((out == 99).all(), "%s: q written on failure" % cls.__name__)
        # fp8: scale_ub bounds per-token scales only; a read-only out; an out that overlaps x
        out = np.full((4, 8), 0x7E, np.uint8)
        with self.assertRaises(w8a8.InvalidScaleError):
            w8a8.silu_mul_quantize_fp8(x, scale_ub=0.5, out=out)
        ro = out.copy()
        ro.flags.writeable = False
        with self.assertRaises(w8a8.InvalidValueError):
            w8a8.silu_mul_quantize_fp8(x, out=ro)
        buf = np.ones(4 * 16, np.float32)
        with self.assertRaises(w8a8.OverlapError):
            w8a8.silu_mul_quantize_fp8(buf.reshape(4, 16), scale=1.0, out=buf.view(np.uint8)[32:64].reshape(4, 8))
        self.assertTrue((out == 0x7E).all() and (buf == 1.0).all())


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
        self.assertRaisesW8A8(w8a8.InvalidShapeError, "must be 2-D", w8a8.scaled_mm, self.a, self.w.T[None],
                              1.0, 1.0, out=self.out)
        # [..., K] activations are viewed as rows; one whose rows are not evenly spaced cannot be
        a3 = np.zeros((2, 3, 16), np.int8)[:, :2, :]
        self.assertRaisesW8A8(w8a8.InvalidLayoutError, "without a copy", w8a8.scaled_mm, a3, self.w.T, 1.0, 1.0,
                              out=self.out)
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

    def test_quantizer_out_of_the_other_format(self):
        # The out's dtype must be the quantizer's, and nothing is written otherwise: the library quantizes to out's
        # dtype, so an int8 out would make quantize_fp8 write int8 with an int8 scale, silently.
        x = np.array([[1.0, -2.0, 100.0, 0.3]], np.float32)
        for f, dt in ((w8a8.quantize_fp8, np.int8), (w8a8.quantize_int8, np.uint8),
                      (w8a8.quantize_int8, w8a8.numpy.fp8_dtype()), (w8a8.quantize_fp8, np.float32)):
            out = np.full(x.shape, 0x5A, np.uint8).view(dt) if np.dtype(dt).itemsize == 1 else np.zeros(x.shape, dt)
            before = out.copy()
            with self.assertRaises(w8a8.InvalidDtypeError) as cm:
                f(x, out=out)
            self.assertIn("out has dtype", cm.exception.message)
            self.assertTrue(np.array_equal(out.view(np.uint8), before.view(np.uint8)), "a refused call wrote out")
        w8a8.quantize_fp8(x, out=np.empty(x.shape, w8a8.numpy.fp8_dtype()))  # the right ones still work
        w8a8.quantize_int8(x, out=np.empty(x.shape, np.int8))

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

    def test_weights_constant_binding(self):
        """Handle.set_weights_constant reaches w8a8_set_weights_constant (a CPU handle takes and
        ignores it); a value other than 0 or 1 at the C level is the library's INVALID_VALUE."""
        h = w8a8._lib.Handle(w8a8.DeviceKind.CPU, 0)
        h.set_weights_constant(True)
        h.set_weights_constant(False)
        st = w8a8._lib.load().w8a8_set_weights_constant(h.ptr, 2)
        self.assertEqual(st, w8a8.Status.ERROR_INVALID_VALUE)
        with self.assertRaises(w8a8.W8A8Error) as cm:
            w8a8._lib.check(st, "w8a8_set_weights_constant")
        self.assertIn("constant is 2", cm.exception.message)

    def test_fp8_accum_binding(self):
        """Handle.set_fp8_accum reaches w8a8_set_fp8_accum: a CPU handle takes both modes (and ignores
        them: test_badinput's badinput_fp8_accum checks its bits); another value is INVALID_VALUE."""
        h = w8a8._lib.Handle(w8a8.DeviceKind.CPU, 0)
        h.set_fp8_accum(w8a8.Fp8Accum.FAST)
        h.set_fp8_accum(w8a8.Fp8Accum.PRECISE)
        with self.assertRaises(ValueError):
            w8a8.Fp8Accum(2)
        st = w8a8._lib.load().w8a8_set_fp8_accum(h.ptr, 2)
        self.assertEqual(st, w8a8.Status.ERROR_INVALID_VALUE)
        with self.assertRaises(w8a8.W8A8Error) as cm:
            w8a8._lib.check(st, "w8a8_set_fp8_accum")
        self.assertIn("accum is 2", cm.exception.message)

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
