"""The fused TP calls as torch custom ops, torch.ops.w8a8.fused_all_gather_scaled_matmul and
torch.ops.w8a8.fused_scaled_matmul_reduce_scatter (symm_mem's signatures), on in-process GPU ranks
(w8a8.Comm.local: w8a8_comm_create_local) of one GPU, named through w8a8.torch.register_group:

  W = 1: every output element against the header's arithmetic (w8a8_ref.py; int8 bit for bit, fp8
         within the fp8 bound), several Bs (the first fused, the others on the gathered rows), N-D A,
         each refused argument (its error class, and the communicator still works after it),
         torch.library.opcheck of both ops, and torch.compile(fullgraph=True): each op one node of the
         graph, the compiled results equal to eager ones;
  W = 2: emulated ranks (one thread and one CUDA stream each) with the same element checks: all-gather
         (tensor-wise, row-wise sharded and row-wise replicated A_scale) and reduce-scatter (2-D and N-D).

Skips without torch >= 2.4, without a CUDA device, or where libw8a8 has no in-process GPU ranks."""
import os
import sys
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
sys.path.insert(0, HERE)

try:
    import numpy as np
    import torch
except ImportError:
    torch = None


def _skip_reason():
    if torch is None:
        return "torch is not installed"
    if getattr(torch.library, "custom_op", None) is None:
        return "torch < 2.4: no custom ops"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


SKIP = _skip_reason()
if SKIP is None:
    import w8a8
    import w8a8.torch as wt
    import w8a8_ref as ref
    AG = torch.ops.w8a8.fused_all_gather_scaled_matmul
    RS = torch.ops.w8a8.fused_scaled_matmul_reduce_scatter
    FP8 = getattr(torch, "float8_e4m3fn", None)


def gen():
    g = torch.Generator()
    g.manual_seed(int(os.environ.get("W8A8_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little"))
    return g


def i8(shape, g):
    return torch.randint(-128, 128, shape, generator=g, dtype=torch.int8)


def scales(shape, g):
    return (torch.rand(shape, generator=g) + 0.5) * 0.02


def bits(t, od):
    t = t.detach().cpu()
    return t.view(torch.int32).numpy().view(np.uint32) if od == "fp32" else t.view(torch.int16).numpy().view(np.uint16)


def want_bits(r, od):
    w = ref.to_out(r, od)
    return w.view(np.uint32) if od == "fp32" else w.view(np.uint16)


TORCH_OD = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def tdt(od):
    return getattr(torch, TORCH_OD[od])


def local_comms(n):
    try:
        return w8a8.Comm.local(n, torch.cuda.current_device())
    except w8a8.NotBuiltError as e:
        raise unittest.SkipTest("libw8a8 has no in-process GPU ranks: %s" % e.message)


@unittest.skipIf(SKIP is not None, SKIP or "")
class OneRank(unittest.TestCase):
    NAME = "w8a8-test-tp1"

    @classmethod
    def setUpClass(cls):
        cls.dev = torch.device("cuda", torch.cuda.current_device())
        cls.comm = local_comms(1)[0]
        cls.comm.set_timeout(120)
        wt.register_group(cls.NAME, cls.comm)

    @classmethod
    def tearDownClass(cls):
        wt.unregister_group(cls.NAME)
        cls.comm.close()

    def case(self, g, M=24, K=128, Ns=(64, 32)):
        d = self.dev
        A = i8((M, K), g)
        ws = [i8((n, K), g) for n in Ns]
        sa = scales((M, 1), g)
        sbs = [scales((1, n), g) for n in Ns]
        return A, ws, sa, sbs, [x.to(d) for x in (A, sa)], [w.to(d) for w in ws], [s.to(d) for s in sbs]

    def test_all_gather_int8(self):
        g = gen()
        A, ws, sa, sbs, (Ad, sad), wds, sbds = self.case(g)
        bias = (torch.randn(ws[0].shape[0], generator=g) * 3).to(torch.bfloat16)
        sb1 = sbs[1][:, :1].contiguous()  # tensor-wise B_scale for the second weight
        ag, outs = AG(Ad, [wds[0].t(), wds[1].t()], sad, [sbds[0], sb1.to(self.dev)], 0, self.NAME,
                      [bias.to(self.dev), None], [None, None], [torch.bfloat16, torch.float32], [False, False])
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(ag.cpu(), A), "gathered A")
        r0 = ref.scaled_mm_int8(A.numpy(), ws[0].numpy().T, sa.numpy(), sbs[0].numpy(), bias.float().numpy())
        r1 = ref.scaled_mm_int8(A.numpy(), ws[1].numpy().T, sa.numpy(), sb1.numpy())
        np.testing.assert_array_equal(bits(outs[0], "bf16"), want_bits(r0, "bf16"))
        np.testing.assert_array_equal(bits(outs[1], "fp32"), want_bits(r1, "fp32"))
        # A [..., K]: the outputs are [..., N]; scales [..., 1]
        ag3, outs3 = AG(Ad.view(2, 12, -1), [wds[0].t()], sad.view(2, 12, 1), [sbds[0]], 0, self.NAME, [None],
                        [None], [torch.bfloat16], [False])
        torch.cuda.synchronize()
        self.assertEqual((tuple(ag3.shape), tuple(outs3[0].shape)), ((2, 12, 128), (2, 12, ws[0].shape[0])))
        r = ref.scaled_mm_int8(A.numpy(), ws[0].numpy().T, sa.numpy(), sbs[0].numpy())
        np.testing.assert_array_equal(bits(outs3[0], "bf16").reshape(24, -1), want_bits(r, "bf16"))
        # symm_mem's Python defaults through w8a8.torch's wrapper
        _, outs = wt.fused_all_gather_scaled_matmul(Ad, [wds[0].t()], sad, [sbds[0]], 0, self.NAME,
                                                    out_dtypes=[torch.bfloat16])
        torch.cuda.synchronize()
        np.testing.assert_array_equal(bits(outs[0], "bf16"), want_bits(r, "bf16"))

    def test_all_gather_fp8(self):
        if FP8 is None or torch.cuda.get_device_capability(self.dev) < (8, 9):
            self.skipTest("no fp8 on this GPU")
        g = gen()
        M, K, N = 32, 256, 96
        A = (torch.randn(M, K, generator=g) * 2).to(FP8)
        w = (torch.randn(N, K, generator=g) * 2).to(FP8)
        sa, sb = scales((M, 1), g), scales((1, N), g)
        for fast in (False, True):
            _, outs = AG(A.to(self.dev), [w.to(self.dev).t()], sa.to(self.dev), [sb.to(self.dev)], 0, self.NAME,
                         [None], [None], [torch.bfloat16], [fast])
            torch.cuda.synchronize()
            Af, Wf = A.float().double(), w.float().double()
            s = sa.double() * sb.double()
            want = (Af @ Wf.t()) * s
            mag = (Af.abs() @ Wf.abs().t()) * s
            err = (outs[0].cpu().double() - want).abs()
            self.assertTrue(bool((err <= want.abs() * 2.0 ** -7 + mag * 2e-3).all()), "fp8 fast_accum=%s" % fast)

    def test_reduce_scatter_int8(self):
        g = gen()
        A, ws, sa, sbs, (Ad, sad), wds, sbds = self.case(g, Ns=(48,))
        bias = (torch.randn(48, generator=g) * 3).to(torch.bfloat16)
        for od in ("bf16", "fp32"):
            b = bias.to(tdt(od))
            y = RS(Ad, wds[0].t(), sad, sbds[0], "sum", 0, 0, self.NAME, [24, 48], b.to(self.dev), None, tdt(od),
                   False)
            torch.cuda.synchronize()
            p = ref.scaled_mm_int8(A.numpy(), ws[0].numpy().T, sa.numpy(), sbs[0].numpy())  # no bias: added after
            s = (p + b.float().numpy().reshape(1, -1)).astype(np.float32)
            np.testing.assert_array_equal(bits(y, od), want_bits(s, od), od)
        # N-D: A [2, 12, K], output_shape [2, 12, N]; output_shape None: A's leading dimensions
        y3 = RS(Ad.view(2, 12, -1), wds[0].t(), sad.view(2, 12, 1), sbds[0], "sum", 0, 0, self.NAME, [2, 12, 48],
                None, None, torch.bfloat16, False)
        yn = wt.fused_scaled_matmul_reduce_scatter(Ad, wds[0].t(), sad, sbds[0], "sum", 0, 0, self.NAME,
                                                   out_dtype=torch.bfloat16)
        torch.cuda.synchronize()
        self.assertEqual((tuple(y3.shape), tuple(yn.shape)), ((2, 12, 48), (24, 48)))
        w_ = want_bits(ref.scaled_mm_int8(A.numpy(), ws[0].numpy().T, sa.numpy(), sbs[0].numpy()), "bf16")
        np.testing.assert_array_equal(bits(y3, "bf16").reshape(24, 48), w_)
        np.testing.assert_array_equal(bits(yn, "bf16"), w_)

    def test_refusals_leave_the_communicator_usable(self):
        g = gen()
        A, ws, sa, sbs, (Ad, sad), wds, sbds = self.case(g, Ns=(32,))
        B, sb = wds[0].t(), sbds[0]
        one = torch.ones(1, device=self.dev)
        cases = [
            (w8a8.InvalidScaleError, "result_scales", lambda: AG(Ad, [B], sad, [sb], 0, self.NAME, [None], [one],
                                                                  [torch.bfloat16], [False])),
            (w8a8.InvalidDtypeError, "out_dtypes[0] is None", lambda: AG(Ad, [B], sad, [sb], 0, self.NAME, [None],
                                                                          [None], [None], [False])),
            (w8a8.InvalidValueError, "gather_dim", lambda: AG(Ad, [B], sad, [sb], 1, self.NAME, [None], [None],
                                                               [torch.bfloat16], [False])),
            (w8a8.InvalidValueError, "len(biases)", lambda: AG(Ad, [B], sad, [sb], 0, self.NAME, [], [None],
                                                                [torch.bfloat16], [False])),
            (w8a8.InvalidScaleError, "A_scale", lambda: AG(Ad, [B], sad[:5], [sb], 0, self.NAME, [None], [None],
                                                            [torch.bfloat16], [False])),
            (w8a8.InvalidValueError, "reduce_op", lambda: RS(Ad, B, sad, sb, "avg", 0, 0, self.NAME, [24, 32],
                                                              None, None, torch.bfloat16, False)),
            (w8a8.InvalidScaleError, "result_scale", lambda: RS(Ad, B, sad, sb, "sum", 0, 0, self.NAME, [24, 32],
                                                                 None, one, torch.bfloat16, False)),
            (w8a8.InvalidValueError, "scatter", lambda: RS(Ad, B, sad, sb, "sum", 1, 1, self.NAME, [24, 32], None,
                                                            None, torch.bfloat16, False)),
            (w8a8.InvalidShapeError, "output_shape", lambda: RS(Ad, B, sad, sb, "sum", 0, 0, self.NAME, [25, 32],
                                                                 None, None, torch.bfloat16, False)),
            (w8a8.InvalidDtypeError, "out_dtype", lambda: RS(Ad, B, sad, sb, "sum", 0, 0, self.NAME, [24, 32], None,
                                                              None, None, False)),
            (w8a8.InvalidCommError, "no communicator", lambda: RS(Ad, B, sad, sb, "sum", 0, 0, "no-such-group",
                                                                   [24, 32], None, None, torch.bfloat16, False)),
            (w8a8.InvalidScaleError, "scale_b", lambda: RS(Ad, B, sad, torch.ones(1, 31, device=self.dev), "sum", 0,
                                                            0, self.NAME, [24, 32], None, None, torch.bfloat16,
                                                            False)),
        ]
        for cls, fragment, call in cases:
            with self.assertRaises(cls, msg=fragment) as cm:
                call()
            self.assertIn(fragment, cm.exception.message)
        y = RS(Ad, B, sad, sb, "sum", 0, 0, self.NAME, [24, 32], None, None, torch.bfloat16, False)
        torch.cuda.synchronize()
        r = ref.scaled_mm_int8(A.numpy(), ws[0].numpy().T, sa.numpy(), sbs[0].numpy())
        np.testing.assert_array_equal(bits(y, "bf16"), want_bits(r, "bf16"))

    def test_opcheck(self):
        g = gen()
        A, ws, sa, sbs, (Ad, sad), wds, sbds = self.case(g)
        torch.library.opcheck(AG.default, (Ad, [wds[0].t(), wds[1].t()], sad, sbds, 0, self.NAME,
                                           [None, None], [None, None], [torch.bfloat16, torch.float16],
                                           [False, False]))
        torch.library.opcheck(RS.default, (Ad, wds[1].t(), sad, sbds[1], "sum", 0, 0, self.NAME, [24, 32], None,
                                           None, torch.bfloat16, False))

    def test_compile_fullgraph_one_node_each(self):
        g = gen()
        M, K = 32, 128
        x = (torch.randn(M, K, generator=g) * 2).to(self.dev)
        w1, w2 = i8((64, K), g).to(self.dev), i8((48, K), g).to(self.dev)
        sb1, sb2 = scales((1, 64), g).to(self.dev), scales((1, 48), g).to(self.dev)
        name = self.NAME

        def f(x, w1, w2, sb1, sb2):
            q, s, _ = w8a8.quantize_int8(x)
            _, outs = torch.ops.w8a8.fused_all_gather_scaled_matmul(q, [w1.t(), w2.t()], s, [sb1, sb2], 0, name,
                                                                    [None, None], [None, None],
                                                                    [torch.bfloat16, torch.bfloat16], [False, False])
            z = torch.ops.w8a8.fused_scaled_matmul_reduce_scatter(q, w2.t(), s, sb2, "sum", 0, 0, name, [M, 48],
                                                                  None, None, torch.bfloat16, False)
            return outs[0], outs[1], z

        want = f(x, w1, w2, sb1, sb2)
        graphs = []

        def record(gm, example_inputs):
            graphs.append(gm)
            return gm.forward

        got = torch.compile(f, fullgraph=True, backend=record)(x, w1, w2, sb1, sb2)
        targets = [str(n.target) for gm in graphs for n in gm.graph.nodes if n.op == "call_function"]
        self.assertEqual(len(graphs), 1)
        self.assertEqual(sum("fused_all_gather_scaled_matmul" in t for t in targets), 1, targets)
        self.assertEqual(sum("fused_scaled_matmul_reduce_scatter" in t for t in targets), 1, targets)
        got2 = torch.compile(f, fullgraph=True)(x, w1, w2, sb1, sb2)  # inductor
        torch.cuda.synchronize()
        for a, b, c in zip(got, got2, want):
            self.assertTrue(torch.equal(a.view(torch.int16), c.view(torch.int16)))
            self.assertTrue(torch.equal(b.view(torch.int16), c.view(torch.int16)))


@unittest.skipIf(SKIP is not None, SKIP or "")
class TwoEmulatedRanks(unittest.TestCase):
    W = 2

    def run_ranks(self, body):
        """body(rank, comm, name) on one thread per rank, each on its own stream; returns the results."""
        comms = local_comms(self.W)
        names = ["w8a8-test-tp%d-r%d" % (self.W, r) for r in range(self.W)]
        for c, n in zip(comms, names):
            c.set_timeout(120)
            c.reserve(256, 256, 256)  # before the first call, on every rank
            wt.register_group(n, c)
        dev = torch.device("cuda", torch.cuda.current_device())
        streams = [torch.cuda.Stream(dev) for _ in range(self.W)]
        results, errors = [None] * self.W, []

        def run(r):
            try:
                torch.cuda.set_device(dev)
                with torch.cuda.stream(streams[r]):
                    results[r] = body(r, comms[r], names[r])
                    torch.cuda.current_stream().synchronize()
            except BaseException as e:  # reported by the main thread
                errors.append((r, e))

        threads = [threading.Thread(target=run, args=(r,)) for r in range(self.W)]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(300)
            if any(t.is_alive() for t in threads):
                for c in comms:  # unblock the ranks still waiting, so that the communicators can be destroyed
                    c.abort()
                for t in threads:
                    t.join(60)
                self.fail("a rank did not finish within 300 s")
            if errors:
                raise errors[0][1]
        finally:
            torch.cuda.synchronize()
            for c, n in zip(comms, names):
                wt.unregister_group(n)
                c.close()
        return results

    def test_all_gather(self):
        g = gen()
        W, m, K = self.W, 16, 128
        Ns = [64, 80]
        A = [i8((m, K), g) for _ in range(W)]
        sa = [scales((m, 1), g) for _ in range(W)]
        ws = [i8((Ns[r], K), g) for r in range(W)]
        sbs = [scales((1, Ns[r]), g) for r in range(W)]
        biases = [(torch.randn(Ns[r], generator=g) * 3).to(torch.bfloat16) for r in range(W)]
        A_all, sa_all = torch.cat(A), torch.cat(sa)
        dev = torch.device("cuda", torch.cuda.current_device())

        def body(r, comm, name):
            out = {}
            for mode in ("sharded", "replicated", "tensorwise"):
                s = {"sharded": sa[r], "replicated": sa_all, "tensorwise": sa[0][:1]}[mode].to(dev)
                ag, outs = AG(A[r].to(dev), [ws[r].to(dev).t()], s, [sbs[r].to(dev)], 0, name, [biases[r].to(dev)],
                              [None], [torch.bfloat16], [False])
                out[mode] = (ag.cpu(), outs[0].cpu())
            return out

        res = self.run_ranks(body)
        for r in range(W):
            for mode, (ag, y) in res[r].items():
                self.assertTrue(torch.equal(ag, A_all), "rank %d %s: gathered A" % (r, mode))
                s = sa[0][:1].numpy() if mode == "tensorwise" else sa_all.numpy()
                want = ref.scaled_mm_int8(A_all.numpy(), ws[r].numpy().T, s, sbs[r].numpy(),
                                          biases[r].float().numpy())
                np.testing.assert_array_equal(bits(y, "bf16"), want_bits(want, "bf16"), "rank %d %s" % (r, mode))

    def test_reduce_scatter(self):
        g = gen()
        W, M, N = self.W, 32, 48
        Ks = [64, 96]
        A = [i8((M, Ks[r]), g) for r in range(W)]
        sa = [scales((M, 1), g) for _ in range(W)]
        ws = [i8((N, Ks[r]), g) for r in range(W)]
        sbs = [scales((1, N), g) for _ in range(W)]
        bias = (torch.randn(N, generator=g) * 3).to(torch.bfloat16)
        dev = torch.device("cuda", torch.cuda.current_device())

        def body(r, comm, name):
            y2 = RS(A[r].to(dev), ws[r].to(dev).t(), sa[r].to(dev), sbs[r].to(dev), "sum", 0, 0, name, [M, N],
                    bias.to(dev), None, torch.bfloat16, False)
            y3 = RS(A[r].to(dev).view(4, 8, -1), ws[r].to(dev).t(), sa[r].to(dev).view(4, 8, 1), sbs[r].to(dev),
                    "sum", 0, 0, name, [4, 8, N], None, None, torch.float32, False)
            return y2.cpu(), y3.cpu()

        res = self.run_ranks(body)
        s = None
        for r in range(W):  # fp32 partials summed in rank order
            p = ref.scaled_mm_int8(A[r].numpy(), ws[r].numpy().T, sa[r].numpy(), sbs[r].numpy())
            s = p if s is None else (s + p).astype(np.float32)
        sb_ = (s + bias.float().numpy().reshape(1, N)).astype(np.float32)
        for r in range(W):
            y2, y3 = res[r]
            rows = slice(r * M // W, (r + 1) * M // W)
            self.assertEqual((tuple(y2.shape), tuple(y3.shape)), ((M // W, N), (4 // W, 8, N)))
            np.testing.assert_array_equal(bits(y2, "bf16"), want_bits(sb_[rows], "bf16"), "rank %d 2-D" % r)
            np.testing.assert_array_equal(bits(y3, "fp32").reshape(M // W, N), want_bits(s[rows], "fp32"),
                                          "rank %d N-D" % r)


if __name__ == "__main__":
    unittest.main()
