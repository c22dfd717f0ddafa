"""w8a8.vllm: vLLM's _custom_ops names and conventions on w8a8, against the reference arithmetic
(w8a8_ref.py, written from w8a8.h) on fresh random data, every element compared bit for bit:
cutlass_scaled_mm (scale_a [1] / [M, 1], scale_b [1] / [N, 1] / [1, N], bias, bf16 / fp16, a [..., K]),
cutlass_scaled_mm_azp (per-token and per-tensor zero points), scaled_fp8_quant (static, dynamic
per-tensor and per-token, scale_ub, num_token_padding, output=), scaled_int8_quant (static and dynamic,
symmetric and asymmetric), the capability queries, the refusals (blockwise scales, 3-D fp8 input,
padding with output=), and a torch.compile(fullgraph=True) of quantize -> GEMM.
Runs on CPU tensors (the CPU backend) and on CUDA where torch sees a GPU; skips without torch."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
sys.path.insert(0, HERE)

try:
    import numpy as np
    import torch
except ImportError:
    torch = None

if torch is not None:
    import w8a8
    import w8a8.torch as wt
    import w8a8_ref as ref
    from w8a8 import vllm as ops

FP8 = getattr(torch, "float8_e4m3fn", None) if torch is not None else None


def rng():
    seed = int(os.environ.get("W8A8_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    return np.random.default_rng(seed)


OD = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def out_bits(t, od):
    """A torch output as the bits w8a8_ref.to_out gives (bf16: uint16; fp16 / fp32: viewed as integers)."""
    t = t.detach().cpu()
    if od == "bf16":
        return t.view(torch.int16).numpy().view(np.uint16)
    if od == "fp16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.view(torch.int32).numpy().view(np.uint32)


def want_bits(r, od):
    w = ref.to_out(r, od)
    return w.view(np.uint16) if od in ("bf16", "fp16") else w.view(np.uint32)


class _Base:
    dev = "cpu"

    def T(self, x):
        return torch.from_numpy(np.ascontiguousarray(x)).to(self.dev)

    def fp8_ok(self):
        return FP8 is not None and (self.dev == "cpu" or torch.cuda.get_device_capability() >= (8, 9))

    def test_cutlass_scaled_mm(self):
        r = rng()
        for M, N, K in ((1, 32, 48), (37, 64, 96)):
            a = r.integers(-128, 128, (M, K)).astype(np.int8)
            w = r.integers(-128, 128, (N, K)).astype(np.int8)
            ta, tw = self.T(a), self.T(w)
            for sa_shape in ((1,), (M, 1)):
                for sb_shape in ((1,), (N, 1), (1, N)):
                    sa = ((r.random(sa_shape) + 0.5) * 2.0 ** -6).astype(np.float32)
                    sb = ((r.random(sb_shape) + 0.5) * 2.0 ** -5).astype(np.float32)
                    for od in ("bf16", "fp16"):
                        bias = r.uniform(-4, 4, N).astype(np.float32) if sb_shape == (N, 1) else None
                        tbias = None
                        if bias is not None:
                            tbias = self.T(bias).to(getattr(torch, OD[od]))
                            bias = tbias.float().cpu().numpy()  # the reference adds the rounded bias
                        y = ops.cutlass_scaled_mm(ta, tw.t(), self.T(sa), self.T(sb), getattr(torch, OD[od]),
                                                  bias=tbias)
                        want = ref.scaled_mm_int8(a, w.T, sa.reshape(-1, 1), sb.reshape(1, -1), bias)
                        what = "%s M=%d sa%s sb%s %s bias=%s" % (self.dev, M, sa_shape, sb_shape, od, bias is not None)
                        self.assertEqual(tuple(y.shape), (M, N), what)
                        np.testing.assert_array_equal(out_bits(y, od), want_bits(want, od), what)
        # a [..., K]: the result is [..., N]
        a3 = r.integers(-128, 128, (2, 5, 64)).astype(np.int8)
        w = r.integers(-128, 128, (32, 64)).astype(np.int8)
        sa = ((r.random((10, 1)) + 0.5) * 2.0 ** -6).astype(np.float32)
        y = ops.cutlass_scaled_mm(self.T(a3), self.T(w).t(), self.T(sa), self.T(np.float32([0.5])), torch.bfloat16)
        self.assertEqual(tuple(y.shape), (2, 5, 32))
        np.testing.assert_array_equal(out_bits(y, "bf16").reshape(10, 32),
                                      want_bits(ref.scaled_mm_int8(a3.reshape(10, 64), w.T, sa, 0.5), "bf16"))

    def test_cutlass_scaled_mm_fp8(self):
        if not self.fp8_ok():
            self.skipTest("no fp8 here")
        r = rng()
        M, N, K = 19, 48, 128
        a, w = ref.random_fp8(r, (M, K)), ref.random_fp8(r, (N, K))
        sa = ((r.random((M, 1)) + 0.5) * 2.0 ** -4).astype(np.float32)
        sb = ((r.random((N, 1)) + 0.5) * 2.0 ** -4).astype(np.float32)
        ta, tw = self.T(a).view(FP8), self.T(w).view(FP8)
        y = ops.cutlass_scaled_mm(ta, tw.t(), self.T(sa), self.T(sb), torch.float32)
        want, mag = ref.scaled_mm_fp8(a, w.T, sa, sb.reshape(1, -1))
        err = np.abs(y.cpu().numpy().astype(np.float64) - want)
        # CPU: fp32 sums in any order (K terms) and three fp32 roundings of the epilogue; CUDA: the Hopper tensor
        # core's truncating accumulation inside a 128-deep block, the bound w8a8.h states (2e-3 of sum |a b|)
        bound = K * 2.0 ** -23 if self.dev == "cpu" else 2e-3
        self.assertTrue(np.all(err <= np.abs(want) * 2.0 ** -20 + mag * bound), "fp8 %s: worst err/mag %g" %
                        (self.dev, float(np.max(err / np.maximum(mag, 1e-30)))))

    def test_cutlass_scaled_mm_azp(self):
        r = rng()
        M, N, K = 23, 32, 80
        a = r.integers(-128, 128, (M, K)).astype(np.int8)
        w = r.integers(-128, 128, (N, K)).astype(np.int8)
        sa = ((r.random((M, 1)) + 0.5) * 2.0 ** -6).astype(np.float32)
        sb = ((r.random((1, N)) + 0.5) * 2.0 ** -5).astype(np.float32)
        adj = w.astype(np.int64).sum(axis=1).astype(np.int32).reshape(1, N)  # vLLM's azp_adj: [1, N] int32
        azp = r.integers(-20, 20, (M,)).astype(np.int32)
        bias = ref.bf16_decode(ref.bf16_encode(r.uniform(-2, 2, N).astype(np.float32)))
        tbias = self.T(bias).to(torch.bfloat16)
        y = ops.cutlass_scaled_mm_azp(self.T(a), self.T(w).t(), self.T(sa), self.T(sb), torch.bfloat16,
                                      self.T(adj), azp=self.T(azp), bias=tbias)
        want = ref.scaled_mm_int8(a, w.T, sa, sb, bias, azp=azp, azp_adj=adj)
        np.testing.assert_array_equal(out_bits(y, "bf16"), want_bits(want, "bf16"), "per-token azp")
        z0 = 7  # per-tensor: azp_adj premultiplied, azp None
        y = ops.cutlass_scaled_mm_azp(self.T(a), self.T(w).t(), self.T(sa), self.T(sb), torch.float16,
                                      self.T(adj * z0))
        want = ref.scaled_mm_int8(a, w.T, sa, sb, None, azp=None, azp_adj=adj * z0)
        np.testing.assert_array_equal(out_bits(y, "fp16"), want_bits(want, "fp16"), "per-tensor azp")

    def test_scaled_fp8_quant(self):
        if not self.fp8_ok():
            self.skipTest("no fp8 here")
        r = rng()
        M, K = 13, 96
        x = (r.standard_normal((M, K)) * 3).astype(np.float32)
        tx = self.T(x)

        def q_bits(q):
            return q.cpu().view(torch.uint8).numpy()

        # dynamic per-tensor: scale [1]
        q, s = ops.scaled_fp8_quant(tx)
        s_want = ref.scale_from(np.abs(x).max(), 448.0).reshape(1)
        self.assertEqual((tuple(q.shape), tuple(s.shape), q.dtype), ((M, K), (1,), FP8))
        np.testing.assert_array_equal(s.cpu().numpy().view(np.uint32), s_want.view(np.uint32))
        np.testing.assert_array_equal(q_bits(q), ref.quant_fp8(x, s_want))
        # dynamic per-token, bounded by scale_ub: scale [M, 1]
        amax = ref.amax_rows(x)
        ub = np.float32(np.median(amax))
        q, s = ops.scaled_fp8_quant(tx, scale_ub=self.T(np.float32([ub])), use_per_token_if_dynamic=True)
        s_want = ref.scale_from(np.minimum(amax, ub), 448.0)
        self.assertEqual(tuple(s.shape), (M, 1))
        np.testing.assert_array_equal(s.cpu().numpy().reshape(-1).view(np.uint32), s_want.view(np.uint32))
        np.testing.assert_array_equal(q_bits(q), ref.quant_fp8(x, s_want.reshape(-1, 1)))
        # static: the given scale comes back; scale_ub is ignored there, as in vLLM
        scale = self.T(np.float32([0.0125]))
        q, s = ops.scaled_fp8_quant(tx, scale, scale_ub=self.T(np.float32([1.0])))
        self.assertIs(s, scale)
        np.testing.assert_array_equal(q_bits(q), ref.quant_fp8(x, np.float32(0.0125)))
        # num_token_padding: rows = max(padding, M); the first M rows (and scales) are the quantization
        for per_token in (False, True):
            q, s = ops.scaled_fp8_quant(tx, num_token_padding=32, use_per_token_if_dynamic=per_token)
            self.assertEqual(tuple(q.shape), (32, K))
            self.assertEqual(tuple(s.shape), (32, 1) if per_token else (1,))
            sw = ref.scale_from(ref.amax_rows(x), 448.0).reshape(-1, 1) if per_token else \
                ref.scale_from(np.abs(x).max(), 448.0).reshape(1, 1)
            np.testing.assert_array_equal(q_bits(q)[:M], ref.quant_fp8(x, sw))
            np.testing.assert_array_equal(s.cpu().numpy()[:M if per_token else 1].reshape(-1).view(np.uint32),
                                          sw.reshape(-1).view(np.uint32))
        q, s = ops.scaled_fp8_quant(tx, scale, num_token_padding=8)  # padding below M: no padding
        self.assertEqual(tuple(q.shape), (M, K))
        # output= given
        out = torch.empty((M, K), dtype=FP8, device=self.dev)
        q, _ = ops.scaled_fp8_quant(tx, scale, output=out)
        self.assertIs(q, out)
        np.testing.assert_array_equal(q_bits(out), ref.quant_fp8(x, np.float32(0.0125)))
        # refusals
        with self.assertRaises(w8a8.InvalidValueError):
            ops.scaled_fp8_quant(tx, scale, num_token_padding=32, output=out)
        with self.assertRaises(w8a8.InvalidShapeError):
            ops.scaled_fp8_quant(tx.reshape(1, M, K))
        with self.assertRaises(w8a8.InvalidScaleError):
            ops.scaled_fp8_quant(tx, self.T(np.ones((M, 1), np.float32)), group_shape=(1, -1))
        with self.assertRaises(w8a8.InvalidDtypeError):
            ops.scaled_fp8_quant(tx, scale, output=torch.empty((M, K), dtype=torch.int8, device=self.dev))

    def test_scaled_int8_quant(self):
        r = rng()
        x = (r.standard_normal((3, 7, 64)) * 3).astype(np.float32)
        x2 = x.reshape(21, 64)
        tx = self.T(x)
        # dynamic symmetric: scale [M, 1], azp None
        q, s, z = ops.scaled_int8_quant(tx)
        s_want = ref.scale_from(ref.amax_rows(x2), 127.0)
        self.assertIsNone(z)
        self.assertEqual((tuple(q.shape), tuple(s.shape), q.dtype), ((3, 7, 64), (21, 1), torch.int8))
        np.testing.assert_array_equal(s.cpu().numpy().reshape(-1).view(np.uint32), s_want.view(np.uint32))
        np.testing.assert_array_equal(q.cpu().numpy().reshape(21, 64), ref.quant_int8(x2, s_want.reshape(-1, 1)))
        # dynamic asymmetric: azp [M, 1] int32
        q, s, z = ops.scaled_int8_quant(tx, symmetric=False)
        s_want, z_want = ref.asym_params(x2)
        self.assertEqual((tuple(z.shape), z.dtype), ((21, 1), torch.int32))
        np.testing.assert_array_equal(s.cpu().numpy().reshape(-1).view(np.uint32), s_want.view(np.uint32))
        np.testing.assert_array_equal(z.cpu().numpy().reshape(-1), z_want)
        np.testing.assert_array_equal(q.cpu().numpy().reshape(21, 64),
                                      ref.quant_int8(x2, s_want.reshape(-1, 1), z_want.reshape(-1, 1)))
        # static symmetric and asymmetric: the given scale and azp come back
        scale, azp = self.T(np.float32([0.031])), self.T(np.int32([5]))
        q, s, z = ops.scaled_int8_quant(tx, scale)
        self.assertTrue(s is scale and z is None)
        np.testing.assert_array_equal(q.cpu().numpy().reshape(21, 64), ref.quant_int8(x2, np.float32(0.031)))
        q, s, z = ops.scaled_int8_quant(tx, scale, azp, symmetric=False)
        self.assertTrue(s is scale and z is azp)
        np.testing.assert_array_equal(q.cpu().numpy().reshape(21, 64), ref.quant_int8(x2, np.float32(0.031), 5))
        with self.assertRaises(w8a8.InvalidZeroPointError):
            ops.scaled_int8_quant(tx, scale, azp)  # azp with symmetric=True

    def test_capabilities_and_refusals(self):
        self.assertTrue(ops.cutlass_scaled_mm_supports_fp8(90) and ops.cutlass_scaled_mm_supports_fp8(89))
        self.assertFalse(ops.cutlass_scaled_mm_supports_fp8(80) or ops.cutlass_scaled_mm_supports_fp8(86))
        self.assertTrue(ops.cutlass_scaled_mm_supports_block_fp8(90))
        self.assertFalse(ops.cutlass_scaled_mm_supports_fp4(100) or ops.cutlass_group_gemm_supported(90))
        a = torch.zeros((4, 256), dtype=torch.int8, device=self.dev)
        w = torch.zeros((128, 256), dtype=torch.int8, device=self.dev)
        with self.assertRaises(w8a8.W8A8Error) as cm:  # DeepSeek-style [M, K/128] x [K/128, N/128], but int8
            ops.cutlass_scaled_mm(a, w.t(), torch.ones((4, 2), device=self.dev), torch.ones((2, 1), device=self.dev),
                                  torch.bfloat16)
        self.assertEqual(cm.exception.status, w8a8.Status.ERROR_INVALID_DTYPE)
        self.assertIn("fp8", cm.exception.message)
        with self.assertRaises(w8a8.InvalidLayoutError):  # b row-major: vLLM's b is column-major
            ops.cutlass_scaled_mm(a, w.t().contiguous(), torch.ones(1, device=self.dev),
                                  torch.ones(1, device=self.dev), torch.bfloat16)

    def test_block_scaled(self):
        """per_token_group_quant_fp8 + cutlass_scaled_mm with vLLM's block-scale shapes: the NumPy front end's
        result (the same library: the CPU reference's bits; a GPU's kernel within the header's fp8 bound)."""
        r = rng()
        M, N, K = 5, 200, 300
        x = (r.standard_normal((M, K))).astype(np.float32)
        wq_np, sw_np = w8a8.quantize_fp8_blocks((r.standard_normal((N, K)) * 0.05).astype(np.float32))
        xq, xs = ops.per_token_group_quant_fp8(self.T(x), 128, column_major_scales=True)
        self.assertEqual(tuple(xs.shape), (M, 3))
        wq = self.T(np.ascontiguousarray(wq_np.view(np.uint8))).view(torch.float8_e4m3fn)
        sw = self.T(np.ascontiguousarray(sw_np.T))  # vLLM's b_scales: [K/128, N/128]
        y = ops.cutlass_scaled_mm(xq, wq.t(), xs, sw, torch.float32)
        xq_np, xs_np = w8a8.quantize_fp8_groups(x)
        ref = w8a8.scaled_mm_blockwise(xq_np, wq_np.T, xs_np, sw_np, out_dtype="fp32")
        if self.dev == "cpu":
            np.testing.assert_array_equal(y.cpu().numpy(), ref)
        else:  # the header's bound: 2e-3 of sum over k of |sa sb a b|
            xa = xq.float().abs().cpu().numpy() * np.repeat(xs_np, 128, axis=1)[:, :K]
            wa = wq.float().abs().cpu().numpy() * np.repeat(np.repeat(sw_np, 128, axis=0)[:N], 128, axis=1)[:, :K]
            self.assertTrue(np.all(np.abs(y.cpu().numpy() - ref) <= 2e-3 * (xa @ wa.T) + 1e-6))

    @unittest.skipUnless(torch is not None and getattr(torch.library, "custom_op", None) is not None,
                         "torch < 2.4: no custom ops")
    def test_compile_fullgraph(self):
        r = rng()
        M, N, K = 16, 64, 128
        x = self.T((r.standard_normal((M, K)) * 2).astype(np.float32))
        w = self.T(r.integers(-128, 128, (N, K)).astype(np.int8))
        sb = self.T(((r.random((N, 1)) + 0.5) * 0.01).astype(np.float32))

        def f(x, w, sb):
            q, s, _ = ops.scaled_int8_quant(x)
            return ops.cutlass_scaled_mm(q, w.t(), s, sb, torch.bfloat16)

        want = f(x, w, sb)
        cf = torch.compile(f, fullgraph=True, backend="aot_eager" if self.dev == "cpu" else "inductor")
        got = cf(x, w, sb)
        self.assertTrue(torch.equal(got.view(torch.int16), want.view(torch.int16)))
        if self.fp8_ok() and self.dev == "cuda":
            wf = w.to(torch.float16).div(16).to(FP8)

            def g(x, wf, sb):
                q, s = ops.scaled_fp8_quant(x, use_per_token_if_dynamic=True, num_token_padding=32)
                return ops.cutlass_scaled_mm(q[:M], wf.t(), s[:M], sb, torch.bfloat16)

            want = g(x, wf, sb)
            got = torch.compile(g, fullgraph=True)(x, wf, sb)
            self.assertTrue(torch.equal(got.view(torch.int16), want.view(torch.int16)))

    @unittest.skipUnless(torch is not None and getattr(torch.library, "custom_op", None) is not None,
                         "torch < 2.4: no custom ops")
    def test_compile_block_scaled(self):
        """per_token_group_quant_fp8 + cutlass_scaled_mm with block scales inside one fullgraph torch.compile graph
        (the w8a8::quantize_groups_ and w8a8::scaled_mm_blockwise_out ops): the eager result, bit for bit."""
        if not self.fp8_ok():
            self.skipTest("no fp8 on this device")
        r = rng()
        M, N, K = 9, 256, 384
        x = self.T(r.standard_normal((M, K)).astype(np.float32))
        wq_np, sw_np = w8a8.quantize_fp8_blocks((r.standard_normal((N, K)) * 0.05).astype(np.float32))
        wq = self.T(np.ascontiguousarray(wq_np.view(np.uint8))).view(torch.float8_e4m3fn)
        sw = self.T(np.ascontiguousarray(sw_np.T))  # vLLM's b_scales: [K/128, N/128]

        def f(x, wq, sw):
            q, s = ops.per_token_group_quant_fp8(x, 128, column_major_scales=True)
            return ops.cutlass_scaled_mm(q, wq.t(), s, sw, torch.bfloat16)

        want = f(x, wq, sw)
        got = torch.compile(f, fullgraph=True, backend="aot_eager" if self.dev == "cpu" else "inductor")(x, wq, sw)
        self.assertTrue(torch.equal(got.view(torch.int16), want.view(torch.int16)))


if torch is not None:
    class VllmCPU(_Base, unittest.TestCase):
        dev = "cpu"

    @unittest.skipUnless(torch.cuda.is_available(), "torch sees no CUDA device")
    class VllmCUDA(_Base, unittest.TestCase):
        dev = "cuda"
else:
    class VllmSkipped(unittest.TestCase):
        @unittest.skip("torch is not installed")
        def test_vllm(self):
            pass


if __name__ == "__main__":
    unittest.main()
