"""The Python package on torch tensors. Skips without torch; the CUDA tests skip without a GPU.

CPU tensors: the CPU backend through the custom ops (int8 bitwise against torch's own int64 matmul
and fp32 epilogue). CUDA tensors: against torch._scaled_mm (rowwise and tensorwise) and
torch._int_mm, the quantizers bitwise against the CPU backend, strided views, errors, CUDA-graph
capture and replay on new inputs, torch.compile (fullgraph) and torch.library.opcheck."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

try:
    import torch
except ImportError:
    torch = None

HAVE_CUDA = torch is not None and torch.cuda.is_available()
if torch is not None:
    import w8a8
    import w8a8.torch as wt

FP8 = getattr(torch, "float8_e4m3fn", None) if torch is not None else None
SEED = int(os.environ.get("W8A8_TEST_SEED", "0")) or None


def gen(device):
    g = torch.Generator(device="cpu")
    g.manual_seed(SEED if SEED is not None else int.from_bytes(os.urandom(4), "little"))
    return g


def rand_int8(shape, g, device):
    return torch.randint(-128, 128, shape, generator=g, dtype=torch.int8).to(device)


def rand_fp8(shape, g, device, scale=1.0):
    return (torch.randn(shape, generator=g) * scale).to(FP8).to(device)


def int8_ref(a, b, sa, sb, out_dtype):
    """The header's int8 epilogue without bias, in torch: exact int64 dot, fp32 sa*v then sb*t."""
    acc = (a.cpu().long() @ b.cpu().long())
    assert acc.abs().max() < 2 ** 31
    v = acc.to(torch.float32)
    t = sa.cpu().reshape(-1, 1).to(torch.float32) * v
    r = sb.cpu().reshape(1, -1).to(torch.float32) * t
    return r.to(out_dtype)


def assert_bits_equal(tc, got, want, msg=""):
    got, want = got.cpu(), want.cpu()
    tc.assertEqual(got.dtype, want.dtype)
    if got.dtype in (torch.bfloat16, torch.float16):
        got, want = got.view(torch.int16), want.view(torch.int16)
    elif got.dtype == torch.float32:
        got, want = got.view(torch.int32), want.view(torch.int32)
    diff = (got != want).nonzero()
    tc.assertEqual(diff.shape[0], 0, "%s: %d elements differ, first at %s" % (msg, diff.shape[0], diff[:1].tolist()))


@unittest.skipIf(torch is None, "torch is not installed")
class TorchCPU(unittest.TestCase):
    def test_int8_every_scale_mode(self):
        g = gen("cpu")
        for M, N, K in [(1, 7, 13), (33, 40, 96)]:
            a, w = rand_int8((M, K), g, "cpu"), rand_int8((N, K), g, "cpu")
            for sa in (torch.rand(1, generator=g) + 0.5, torch.rand(M, 1, generator=g) + 0.5):
                for sb in (torch.rand(1, generator=g) + 0.5, torch.rand(1, N, generator=g) + 0.5):
                    for od in (torch.bfloat16, torch.float16, torch.float32):
                        y = w8a8.scaled_mm(a, w.t(), sa, sb, out_dtype=od)
                        assert_bits_equal(self, y, int8_ref(a, w.t(), sa, sb, od), "cpu %dx%dx%d %s" % (M, N, K, od))

    def test_errors_are_w8a8_errors(self):
        a = torch.zeros(4, 16, dtype=torch.int8)
        w = torch.zeros(6, 16, dtype=torch.int8)
        with self.assertRaises(w8a8.InvalidLayoutError) as cm:
            w8a8.scaled_mm(a, w.t().contiguous(), torch.ones(1), torch.ones(1))
        self.assertIn("b must be column-major", cm.exception.message)
        with self.assertRaises(w8a8.InvalidDtypeError):
            w8a8.scaled_mm(a.to(torch.int16), w.t(), torch.ones(1), torch.ones(1))
        with self.assertRaises(w8a8.InvalidScaleError) as cm:
            w8a8.scaled_mm(a, w.t(), torch.ones(3), torch.ones(1))
        self.assertIn("scale_a->len is 3", cm.exception.message)
        with self.assertRaises(w8a8.InvalidScaleError):
            w8a8.scaled_mm(a, w.t(), torch.ones(1, dtype=torch.float64), torch.ones(1))

    def test_quantizers_match_numpy_backend(self):
        try:
            import numpy as np  # noqa: F401
            import w8a8.numpy as wn
        except ImportError:
            self.skipTest("NumPy is not installed")
        g = gen("cpu")
        x = torch.randn(9, 70, generator=g) * 3
        for per_token in (False, True):
            q, s = w8a8.quantize_fp8(x, use_per_token_if_dynamic=per_token)
            qn, sn = wn.quantize_fp8(x.numpy(), use_per_token_if_dynamic=per_token)
            self.assertTrue((q.view(torch.uint8).numpy() == qn.view(np.uint8)).all())
            self.assertTrue((s.numpy() == sn).all())
        q, s, z = w8a8.quantize_int8(x, symmetric=False)
        qn, sn, zn = wn.quantize_int8(x.numpy(), symmetric=False)
        self.assertTrue((q.numpy() == qn).all() and (s.numpy() == sn).all() and (z.numpy() == zn).all())

    def test_silu_mul_matches_numpy_backend(self):
        try:
            import numpy as np  # noqa: F401
            import w8a8.numpy as wn
        except ImportError:
            self.skipTest("NumPy is not installed")
        g = gen("cpu")
        x = torch.randn(9, 2 * 35, generator=g) * 3
        for per_token in (False, True):
            q, s = w8a8.silu_mul_quantize_fp8(x, use_per_token_if_dynamic=per_token)
            qn, sn = wn.silu_mul_quantize_fp8(x.numpy(), use_per_token_if_dynamic=per_token)
            self.assertEqual(tuple(q.shape), (9, 35))
            self.assertTrue((q.view(torch.uint8).numpy() == qn.view(np.uint8)).all())
            self.assertTrue((s.numpy().view(np.uint32) == sn.view(np.uint32)).all())
        q, s, z = w8a8.silu_mul_quantize_int8(x, symmetric=False)
        qn, sn, zn = wn.silu_mul_quantize_int8(x.numpy(), symmetric=False)
        self.assertTrue((q.numpy() == qn).all() and (s.numpy() == sn).all() and (z.numpy() == zn).all())
        with self.assertRaises(w8a8.InvalidShapeError):
            w8a8.silu_mul_quantize_int8(torch.ones(3, 7))

    @unittest.skipUnless(wt.HAVE_CUSTOM_OPS if torch is not None else False, "torch < 2.4: no custom ops")
    def test_opcheck_and_compile_cpu(self):
        g = gen("cpu")
        a, w = rand_int8((8, 32), g, "cpu"), rand_int8((16, 32), g, "cpu")
        sa, sb = torch.rand(8, 1, generator=g) + 0.5, torch.rand(1, 16, generator=g) + 0.5
        torch.library.opcheck(torch.ops.w8a8.scaled_mm.default, (a, w.t(), sa, sb, torch.bfloat16))
        x = torch.randn(8, 32, generator=g)

        def f(x, w, sb):
            q, s, _ = w8a8.quantize_int8(x)
            return w8a8.scaled_mm(q, w.t(), s, sb, out_dtype=torch.bfloat16)

        cf = torch.compile(f, backend="aot_eager", fullgraph=True)
        assert_bits_equal(self, cf(x, w, sb), f(x, w, sb), "compiled (aot_eager) vs eager")


@unittest.skipIf(not HAVE_CUDA, "torch with CUDA is not available")
class TorchCUDA(unittest.TestCase):
    dev = "cuda"

    def fp8_ok(self):
        return FP8 is not None and torch.cuda.get_device_capability() >= (8, 9)

    def test_fp8_vs_torch_scaled_mm(self):
        if not self.fp8_ok():
            self.skipTest("fp8 needs sm_89+")
        g = gen(self.dev)
        for M, N, K in [(1, 256, 512), (16, 512, 1024), (64, 2560, 8192), (129, 1024, 2048), (512, 4096, 4096)]:
            a = rand_fp8((M, K), g, self.dev)
            w = rand_fp8((N, K), g, self.dev)
            sa = (torch.rand(M, 1, generator=g) + 0.5).to(self.dev)
            sb = (torch.rand(1, N, generator=g) + 0.5).to(self.dev)
            exact = (a.float().double() @ w.float().double().t()) * sa.double() * sb.double()
            mag = (a.float().double().abs() @ w.float().double().abs().t()) * sa.double() * sb.double()
            for name, (sa_, sb_) in (("rowwise", (sa, sb)), ("tensorwise", (sa[0, 0].clone(), sb[0, 0].clone()))):
                ex = exact if name == "rowwise" else (a.float().double() @ w.float().double().t()) * float(
                    sa_) * float(sb_)
                mg = mag if name == "rowwise" else (a.float().double().abs() @ w.float().double().abs().t()) * float(
                    sa_) * float(sb_)
                ours = w8a8.scaled_mm(a, w.t(), sa_, sb_, out_dtype=torch.bfloat16)
                theirs = torch._scaled_mm(a, w.t(), scale_a=sa_, scale_b=sb_, out_dtype=torch.bfloat16)
                torch.cuda.synchronize()
                # bf16 rounding (2^-8 relative) plus the accumulation bound of the GPU tests (2e-3 of sum|ab|)
                bound = ex.abs() * 2.0 ** -8 + mg * 2e-3 + 1e-30
                e_ours = (ours.double() - ex).abs()
                self.assertTrue(bool((e_ours <= bound).all()), "%s %dx%dx%d: max err %g" % (
                    name, M, N, K, float((e_ours / bound).max())))
                d = (ours.double() - theirs.double()).abs()
                self.assertTrue(bool((d <= 2 * bound).all()), "%s %dx%dx%d: ours vs torch._scaled_mm, max %g bounds"
                                % (name, M, N, K, float((d / bound).max())))

    def test_int8_vs_torch_int_mm(self):
        g = gen(self.dev)
        for M, N, K in [(17, 64, 128), (64, 2560, 1024), (256, 1024, 512)]:
            a, w = rand_int8((M, K), g, self.dev), rand_int8((N, K), g, self.dev)
            acc = torch._int_mm(a, w.t())
            one = torch.ones(1, device=self.dev)
            y = w8a8.scaled_mm(a, w.t(), one, one, out_dtype=torch.float32)
            self.assertTrue(bool((y == acc.float()).all()))  # |acc| < 2^24: exact in fp32
            sa = (torch.rand(M, 1, generator=g) + 0.5).to(self.dev)
            sb = (torch.rand(1, N, generator=g) + 0.5).to(self.dev)
            for od in (torch.bfloat16, torch.float16, torch.float32):
                y = w8a8.scaled_mm(a, w.t(), sa, sb, out_dtype=od)
                assert_bits_equal(self, y, int8_ref(a, w.t(), sa, sb, od), "cuda %dx%dx%d %s" % (M, N, K, od))

    def test_zero_point_and_bias(self):
        g = gen(self.dev)
        M, N, K = 33, 96, 160
        x = (torch.randn(M, K, generator=g) * 2 + 0.7).to(self.dev)
        w = rand_int8((N, K), g, self.dev)
        q, s, z = w8a8.quantize_int8(x, symmetric=False)
        adj = w8a8.colsum(w.t())
        self.assertTrue(bool((adj.cpu() == w.cpu().int().sum(1)).all()))
        sb = (torch.rand(1, N, generator=g) + 0.5).to(self.dev)
        bias = torch.randn(N, generator=g).to(torch.bfloat16).to(self.dev)
        y = w8a8.scaled_mm(q, w.t(), s, sb, torch.bfloat16, bias=bias, azp=z.reshape(-1), azp_adj=adj)
        y_cpu = w8a8.scaled_mm(q.cpu(), w.cpu().t(), s.cpu(), sb.cpu(), torch.bfloat16, bias=bias.cpu(),
                               azp=z.reshape(-1).cpu(), azp_adj=adj.cpu())
        assert_bits_equal(self, y, y_cpu, "zero point + bias, cuda vs cpu backend")

    def test_quantizers_bitwise_vs_cpu_backend(self):
        g = gen(self.dev)
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            x = (torch.randn(37, 300, generator=g) * 5).to(dt)
            xd = x.to(self.dev)
            cases = [("int8 token", lambda t: w8a8.quantize_int8(t)),
                     ("int8 token asym", lambda t: w8a8.quantize_int8(t, symmetric=False)),
                     ("int8 tensor", lambda t: w8a8.quantize_int8(t, use_per_token_if_dynamic=False)),
                     ("int8 static", lambda t: w8a8.quantize_int8(t, scale=0.03))]
            if self.fp8_ok():
                cases += [("fp8 tensor", lambda t: w8a8.quantize_fp8(t)),
                          ("fp8 token", lambda t: w8a8.quantize_fp8(t, use_per_token_if_dynamic=True)),
                          ("fp8 token ub", lambda t: w8a8.quantize_fp8(t, use_per_token_if_dynamic=True,
                                                                     scale_ub=torch.full((1,), 0.5, device=t.device))),
                          ("fp8 static", lambda t: w8a8.quantize_fp8(t, scale=0.02))]
            for name, f in cases:
                if name == "fp8 token ub":
                    got = w8a8.quantize_fp8(xd, use_per_token_if_dynamic=True, scale_ub=torch.full((1,), 0.5,
                                                                                                   device=self.dev))
                    want = w8a8.quantize_fp8(x, use_per_token_if_dynamic=True, scale_ub=torch.full((1,), 0.5))
                else:
                    got, want = f(xd), f(x)
                for gi, wi in zip(got, want):
                    if gi is None:
                        self.assertIsNone(wi)
                        continue
                    gi, wi = gi.cpu(), wi.cpu()
                    if gi.dtype == FP8:
                        gi, wi = gi.view(torch.uint8), wi.view(torch.uint8)
                    self.assertTrue(bool((gi == wi).all()), "%s %s" % (name, dt))

    def silu_mul_cases(self):
        """(name, f(x)) for every mode of the fused SiLU-and-mul quantizer."""
        cases = [("int8 token", lambda t: w8a8.silu_mul_quantize_int8(t)),
                 ("int8 token asym", lambda t: w8a8.silu_mul_quantize_int8(t, symmetric=False)),
                 ("int8 tensor", lambda t: w8a8.silu_mul_quantize_int8(t, use_per_token_if_dynamic=False)),
                 ("int8 static", lambda t: w8a8.silu_mul_quantize_int8(t, scale=0.03)),
                 ("int8 static asym", lambda t: w8a8.silu_mul_quantize_int8(t, scale=0.03, azp=-5))]
        if self.fp8_ok():
            cases += [("fp8 tensor", lambda t: w8a8.silu_mul_quantize_fp8(t)),
                      ("fp8 token", lambda t: w8a8.silu_mul_quantize_fp8(t, use_per_token_if_dynamic=True)),
                      ("fp8 token ub", lambda t: w8a8.silu_mul_quantize_fp8(
                          t, use_per_token_if_dynamic=True, scale_ub=torch.full((1,), 0.5, device=t.device))),
                      ("fp8 static", lambda t: w8a8.silu_mul_quantize_fp8(t, scale=0.02))]
        return cases

    def assert_quant_equal(self, got, want, msg):
        for gi, wi in zip(got, want):
            if gi is None or wi is None:
                self.assertIs(gi, wi, msg)
                continue
            self.assertEqual(gi.device.type, "cuda", msg)
            gi, wi = gi.cpu(), wi.cpu()
            self.assertEqual((gi.dtype, tuple(gi.shape)), (wi.dtype, tuple(wi.shape)), msg)
            if gi.dtype == FP8:
                gi, wi = gi.view(torch.uint8), wi.view(torch.uint8)
            elif gi.dtype == torch.float32:
                gi, wi = gi.view(torch.int32), wi.view(torch.int32)
            self.assertTrue(bool((gi == wi).all()), "%s: %d elements differ" % (msg, int((gi != wi).sum())))

    def test_silu_mul_bitwise_vs_cpu_backend(self):
        """The CUDA kernel against the CPU backend (the scalar reference), bit for bit: the header's
        expf is the same on both, so q, scales and zero points must match exactly."""
        g = gen(self.dev)
        for M, I in [(1, 1), (37, 300), (5, 3), (64, 1024), (3, 0)]:
            for dt in (torch.float32, torch.bfloat16, torch.float16):
                x = (torch.randn(M, 2 * I, generator=g) * 4).to(dt)
                if M > 1 and I >= 4:  # specials in the first row: NaN, infinities, huge gates (4 of each half)
                    x[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 200.0]).to(dt)
                    x[0, I:I + 4] = torch.tensor([1.0, 0.0, 2.0, -1.0]).to(dt)
                xd = x.to(self.dev)
                for name, f in self.silu_mul_cases():
                    if I == 0 and "asym" in name and "static" not in name:
                        continue
                    self.assert_quant_equal(f(xd), f(x), "%s %s %dx2*%d" % (name, dt, M, I))
        # strided: a submatrix of a larger buffer (ld = the parent's row), and an unaligned start
        big = (torch.randn(20, 2 * 77 + 13, generator=g) * 4).to(torch.bfloat16)
        big_d = big.to(self.dev)
        for r0, r1, c0, c1 in ((2, 17, 5, 5 + 2 * 77), (1, 9, 1, 1 + 2 * 64)):
            x, xd = big[r0:r1, c0:c1], big_d[r0:r1, c0:c1]
            self.assertEqual(xd.stride(), x.stride())
            for name, f in self.silu_mul_cases():
                self.assert_quant_equal(f(xd), f(x), "%s strided %s" % (name, tuple(x.shape)))
        # a strided out: nothing outside it is written
        x = (torch.randn(8, 2 * 40, generator=g) * 4).to(self.dev)
        obig = torch.full((10, 50), 99, dtype=torch.int8, device=self.dev)
        out = obig[1:9, 3:43]
        q, s, _ = w8a8.silu_mul_quantize_int8(x, out=out)
        self.assertIs(q, out)
        q_cpu, _, _ = w8a8.silu_mul_quantize_int8(x.cpu())
        self.assertTrue(bool((out.cpu() == q_cpu).all()))
        mask = torch.ones_like(obig, dtype=torch.bool)
        mask[1:9, 3:43] = False
        self.assertTrue(bool((obig[mask] == 99).all()), "written outside the out view")

    def test_silu_mul_errors(self):
        x = torch.randn(4, 16, device=self.dev)
        out = torch.full((4, 8), 99, dtype=torch.int8, device=self.dev)
        with self.assertRaises(w8a8.InvalidShapeError) as cm:
            w8a8.silu_mul_quantize_int8(torch.randn(4, 17, device=self.dev), scale=1.0, out=out)
        self.assertIn("even", cm.exception.message)
        with self.assertRaises(w8a8.InvalidShapeError):
            w8a8.silu_mul_quantize_int8(x[:, :14], out=out)
        with self.assertRaises(w8a8.InvalidDtypeError):
            w8a8.silu_mul_quantize_int8(x.to(torch.float64), out=out)
        with self.assertRaises(w8a8.InvalidZeroPointError):
            w8a8.silu_mul_quantize_int8(x, symmetric=False, use_per_token_if_dynamic=False, out=out)
        with self.assertRaises(w8a8.InvalidPointerError):
            w8a8.silu_mul_quantize_int8(x, scale=torch.ones(1), out=out)  # a host scale
        with self.assertRaises(w8a8.InvalidLayoutError):
            w8a8.silu_mul_quantize_int8(x.t().contiguous().t(), out=out)
        with self.assertRaises(w8a8.InvalidDtypeError):
            w8a8.silu_mul_quantize_int8(x, out=torch.zeros(4, 8, device=self.dev))
        torch.cuda.synchronize()
        self.assertTrue(bool((out == 99).all()), "q written on failure")

    def test_silu_mul_cuda_graph(self):
        """gate_up output -> fused SiLU-and-mul quantizer -> down projection, captured in a CUDA graph
        and replayed on new inputs."""
        g = gen(self.dev)
        M, I, N = 24, 512, 256
        fp8 = self.fp8_ok()
        x = (torch.randn(M, 2 * I, generator=g) * 3).to(torch.bfloat16).to(self.dev)
        wq = rand_fp8((N, I), g, self.dev) if fp8 else rand_int8((N, I), g, self.dev)
        sb = (torch.rand(1, N, generator=g) + 0.5).to(self.dev)

        def act(x):
            if fp8:
                return w8a8.silu_mul_quantize_fp8(x, use_per_token_if_dynamic=True)
            return w8a8.silu_mul_quantize_int8(x)[:2]

        def step(x):
            q, s = act(x)
            return q, s, w8a8.scaled_mm(q, wq.t(), s, sb, out_dtype=torch.bfloat16)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                step(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = step(x)
        for _ in range(3):
            x.copy_((torch.randn(M, 2 * I, generator=g) * 3).to(torch.bfloat16).to(self.dev))
            graph.replay()
            torch.cuda.synchronize()
            want = step(x)
            self.assert_quant_equal(outs[:2], want[:2], "graph replay: q, scale")
            assert_bits_equal(self, outs[2], want[2], "graph replay: down projection")
            self.assert_quant_equal(outs[:2], act(x.cpu()), "graph replay vs the CPU backend")

    @unittest.skipUnless(wt.HAVE_CUSTOM_OPS if torch is not None else False, "torch < 2.4: no custom ops")
    def test_silu_mul_compile_and_opcheck(self):
        g = gen(self.dev)
        M, I, N = 16, 256, 128
        x = (torch.randn(M, 2 * I, generator=g) * 3).to(torch.bfloat16).to(self.dev)
        w = rand_int8((N, I), g, self.dev)
        sb = (torch.rand(1, N, generator=g) + 0.5).to(self.dev)
        q = torch.empty(M, I, dtype=torch.int8, device=self.dev)
        torch.library.opcheck(torch.ops.w8a8.silu_mul_quantize_static_.default,
                              (x, q, torch.full((1,), 0.05, device=self.dev), None))
        torch.library.opcheck(torch.ops.w8a8.silu_mul_quantize_dynamic_.default,
                              (x, q, torch.empty(M, 1, device=self.dev),
                               torch.empty(M, 1, dtype=torch.int32, device=self.dev), True, None))

        def f(x, w, sb):
            q, s, z = w8a8.silu_mul_quantize_int8(x, symmetric=False)
            return w8a8.scaled_mm(q, w.t(), s, sb, torch.bfloat16, azp=z.reshape(-1), azp_adj=w8a8.colsum(w.t()))

        want = f(x, w, sb)
        cf = torch.compile(f, fullgraph=True)
        for _ in range(3):
            got = cf(x, w, sb)
        assert_bits_equal(self, got, want, "torch.compile(fullgraph) of silu_mul_quantize_int8 -> scaled_mm")
        if self.fp8_ok():
            wf = rand_fp8((N, I), g, self.dev)

            def h(x, w, sb):
                q, s = w8a8.silu_mul_quantize_fp8(x, use_per_token_if_dynamic=True)
                return w8a8.scaled_mm(q, w.t(), s, sb, out_dtype=torch.bfloat16)

            assert_bits_equal(self, torch.compile(h, fullgraph=True)(x, wf, sb), h(x, wf, sb),
                              "torch.compile(fullgraph) of silu_mul_quantize_fp8 -> scaled_mm")

    def test_strided_views_and_errors(self):
        g = gen(self.dev)
        M, N, K = 20, 48, 64
        abig = rand_int8((M + 3, K + 32), g, self.dev)
        wbig = rand_int8((N + 5, K + 16), g, self.dev)
        a, w = abig[1:1 + M, 16:16 + K], wbig[2:2 + N, 0:K]
        obig = torch.full((M + 2, N + 8), float("nan"), dtype=torch.bfloat16, device=self.dev)
        out = obig[1:1 + M, 4:4 + N]
        sa = (torch.rand(M, 1, generator=g) + 0.5).to(self.dev)
        sb = (torch.rand(1, N, generator=g) + 0.5).to(self.dev)
        w8a8.scaled_mm(a, w.t(), sa, sb, out=out)
        assert_bits_equal(self, out, int8_ref(a, w.t(), sa, sb, torch.bfloat16), "strided")
        mask = torch.ones_like(obig, dtype=torch.bool)
        mask[1:1 + M, 4:4 + N] = False
        self.assertTrue(bool(obig[mask].isnan().all()), "written outside the out view")
        with self.assertRaises(w8a8.InvalidLayoutError) as cm:
            w8a8.scaled_mm(a, w.t().contiguous(), sa, sb)
        self.assertIn("column-major", cm.exception.message)
        with self.assertRaises(w8a8.InvalidPointerError):
            w8a8.scaled_mm(a, w.t(), sa.cpu(), sb)
        with self.assertRaises(w8a8.InvalidScaleError):
            w8a8.scaled_mm(a, w.t(), sa.to(torch.bfloat16), sb)
        torch.cuda.synchronize()  # nothing was left broken on the device

    def test_side_stream(self):
        g = gen(self.dev)
        a, w = rand_int8((64, 128), g, self.dev), rand_int8((256, 128), g, self.dev)
        one = torch.ones(1, device=self.dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            y = w8a8.scaled_mm(a, w.t(), one, one, torch.float32)
        torch.cuda.current_stream().wait_stream(s)
        self.assertTrue(bool((y == torch._int_mm(a, w.t()).float()).all()))

    def test_cuda_graph_capture(self):
        """quantize -> scaled_mm captured in a CUDA graph, replayed on new inputs."""
        g = gen(self.dev)
        M, N, K = 48, 512, 1024
        fp8 = self.fp8_ok()
        x = torch.randn(M, K, generator=g).to(self.dev)
        if fp8:
            wq = rand_fp8((N, K), g, self.dev)
        else:
            wq = rand_int8((N, K), g, self.dev)
        sb = (torch.rand(1, N, generator=g) + 0.5).to(self.dev)

        def step(x):
            if fp8:
                q, s = w8a8.quantize_fp8(x, use_per_token_if_dynamic=True)
            else:
                q, s, _ = w8a8.quantize_int8(x)
            return w8a8.scaled_mm(q, wq.t(), s, sb, out_dtype=torch.bfloat16)

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                step(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = step(x)
        for _ in range(3):
            x.copy_(torch.randn(M, K, generator=g).to(self.dev))
            graph.replay()
            torch.cuda.synchronize()
            assert_bits_equal(self, y, step(x), "graph replay vs eager")

    @unittest.skipUnless(wt.HAVE_CUSTOM_OPS if torch is not None else False, "torch < 2.4: no custom ops")
    def test_torch_compile_and_opcheck(self):
        g = gen(self.dev)
        M, N, K = 32, 256, 512
        a, w = rand_int8((M, K), g, self.dev), rand_int8((N, K), g, self.dev)
        sa = (torch.rand(M, 1, generator=g) + 0.5).to(self.dev)
        sb = (torch.rand(1, N, generator=g) + 0.5).to(self.dev)
        torch.library.opcheck(torch.ops.w8a8.scaled_mm.default, (a, w.t(), sa, sb, torch.bfloat16))
        torch.library.opcheck(torch.ops.w8a8.colsum.default, (w.t(),))
        x = torch.randn(M, K, generator=g).to(self.dev)

        def f(x, w, sb):
            q, s, _ = w8a8.quantize_int8(x)
            return w8a8.scaled_mm(q, w.t(), s, sb, out_dtype=torch.bfloat16)

        want = f(x, w, sb)
        for mode in (None, "reduce-overhead"):  # inductor; then inductor with CUDA graphs
            cf = torch.compile(f, fullgraph=True, mode=mode)
            for _ in range(3):
                got = cf(x, w, sb)
            assert_bits_equal(self, got, want, "torch.compile mode=%s" % mode)


if __name__ == "__main__":
    unittest.main()
