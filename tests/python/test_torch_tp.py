"""The fused TP operations through torch.distributed: w8a8.Comm.from_torch_distributed,
then w8a8.all_gather_scaled_mm and w8a8.scaled_mm_reduce_scatter, fused and unfused, on W GPU
ranks that are separate processes (one GPU each) started fresh with RANK / WORLD_SIZE /
MASTER_ADDR / MASTER_PORT in their environment: never forked from this process, which may
already have initialised CUDA (a CUDA process's forked child hangs).

Each rank runs int8 and fp8 (sm_89+), per-token x per-channel scales, bf16 out, with and without
bias, even and uneven shards (w8a8.shard_rows), plus int8 with fp32 out (bf16 rounding hides most
single-rounding differences, such as the order of the reduce-scatter's sum; fp32 out does not),
into outputs poisoned with NaN, and checks every element of its own output against a reference
built from every rank's inputs (each rank regenerates the whole layer from the case's seeds, i.e.
the all-gathered inputs):
  all-gather, int8:      the header's epilogue bit for bit: exact dot, v = (float)acc,
                         t = sa*v, r = bias ? fmaf(sb, t, bias) : sb*t, RNE to bf16 once
                         (tests/python/w8a8_ref.py, written from the header);
  reduce-scatter, int8:  p_j = sb_j*(sa_j*v_j) in fp32, s = ((p_0 + p_1) + ...) in rank order,
                         + bias, RNE once (the header's RS arithmetic); int8 references are
                         exact, compared bit for bit;
  fp8:                   |got - want| <= 2^-7 |want| + 2e-3 * sum_j sa_j sb_j sum|a b|, want in fp64;
and fused == unfused bit for bit, the gathered activations and scales (return_gathered) bit for
bit, and an argument error on rank 0 failing every rank (rank 0 its own status, the others
COMM_MISMATCH) with the outputs untouched and the communicator still usable.
W = 1 (one process) always; W = torch.cuda.device_count() where that is 2 or more.

Skips (never fails) without torch, without a CUDA device, without torch's NCCL backend, or where
libw8a8 has no NCCL transport (the workers report NOT_BUILT and exit 77).

The bench/torch_tp_compare.py dry run (no GPU, no torch) runs here too: its bookkeeping.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYDIR = os.path.join(ROOT, "python")
COMPARE = os.path.join(ROOT, "bench", "torch_tp_compare.py")
SKIP_RC = 77
# Per launch of W processes (both launches together normally take 15-40 s).
LAUNCH_TIMEOUT_S = float(os.environ.get("W8A8_TORCH_TP_TIMEOUT_S", "100"))

try:
    import torch
except ImportError:
    torch = None


def _skip_reason():
    if torch is None:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_nccl_available():
        return "torch.distributed has no NCCL backend"
    return None


SKIP_REASON = _skip_reason()


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(W, timeout_s=LAUNCH_TIMEOUT_S):
    """Start W worker processes of this file; (return codes, their output). A worker that
    outlives timeout_s is killed (with its peers: a dead rank leaves the others in a collective)."""
    port = _free_port()
    env0 = dict(os.environ)
    env0["PYTHONPATH"] = PYDIR + (os.pathsep + env0["PYTHONPATH"] if env0.get("PYTHONPATH") else "")
    env0.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(W), PYTHONUNBUFFERED="1",
                W8A8_TORCH_TP_WORKER="1", NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
                NVSHMEM_DISABLE_NVLS="1")
    with tempfile.TemporaryDirectory() as d:
        procs, logs = [], []
        for r in range(W):
            env = dict(env0, RANK=str(r), LOCAL_RANK=str(r))
            f = open(os.path.join(d, "rank%d.txt" % r), "w+")
            logs.append(f)
            procs.append(subprocess.Popen([sys.executable, "-u", os.path.abspath(__file__)], env=env, stdout=f,
                                          stderr=subprocess.STDOUT, cwd=ROOT))
        t0 = time.time()
        first_dead, killed = None, ""
        while any(p.poll() is None for p in procs):
            now = time.time()
            if first_dead is None and any(p.poll() not in (None, 0, SKIP_RC) for p in procs):
                first_dead = now
            if now - t0 > timeout_s or (first_dead is not None and now - first_dead > 20):
                killed = "KILLED %s: ranks still running after %.0f s%s\n" % (
                    [r for r, p in enumerate(procs) if p.poll() is None], now - t0,
                    "" if first_dead is None else " (another rank had exited with an error)")
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                break
            time.sleep(0.2)
        rcs = [p.wait() for p in procs]
        texts = []
        for r, f in enumerate(logs):
            f.seek(0)
            texts.append("---- rank %d (exit %s, %.0f s)\n%s" % (r, rcs[r], time.time() - t0, f.read()))
            f.close()
    return rcs, killed + "\n".join(texts)


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class TorchDistributedTP(unittest.TestCase):
    def run_world(self, W):
        rcs, text = launch(W)
        if all(rc == SKIP_RC for rc in rcs):
            reason = [ln for ln in text.splitlines() if ln.startswith("SKIP")]
            self.skipTest(reason[0] if reason else "workers skipped")
        sys.stderr.write("\n" + "\n".join(ln for ln in text.splitlines() if "FAIL" in ln or "checks" in ln) + "\n")
        self.assertTrue(all(rc == 0 for rc in rcs), "W=%d: exit codes %s\n%s" % (W, rcs, text[-12000:]))

    def test_one_rank(self):
        self.run_world(1)

    def test_every_gpu(self):
        W = torch.cuda.device_count()
        if W < 2:
            self.skipTest("one GPU: W = 1 is test_one_rank")
        self.run_world(W)


class CompareDryRun(unittest.TestCase):
    """bench/torch_tp_compare.py --dry-run: fake timings of W simulated ranks, no GPU, no torch."""

    def test_dry_run_bookkeeping(self):
        with tempfile.TemporaryDirectory() as d:
            prefix = os.path.join(d, "x")
            p = subprocess.run([sys.executable, COMPARE, "--dry-run", "--world", "4", "--m", "1024,8192",
                                "--dry-run-fail", "torch_symm_mem_mm_rs", "-o", prefix],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout[-3000:] + p.stderr[-3000:])
            with open(prefix + ".jsonl") as f:
                rows = [json.loads(line) for line in f]
            with open(prefix + ".md") as f:
                md = f.read()
        # 4 shapes x 2 M x 4 impls each (AG shapes: the ag impls; RS shapes: the rs impls)
        self.assertEqual(len(rows), 4 * 2 * 4)
        keys = {(r["impl"], r["shape"], r["M"]) for r in rows}
        self.assertEqual(len(keys), len(rows))
        ag = {"w8a8_ag_mm_fused", "w8a8_ag_mm_unfused", "torch_ag_mm_unfused", "torch_symm_mem_ag_mm"}
        rs = {"w8a8_mm_rs_fused", "w8a8_mm_rs_unfused", "torch_mm_rs_unfused", "torch_symm_mem_mm_rs"}
        self.assertEqual({r["impl"] for r in rows}, ag | rs)
        dims = {"70b-qkv": (2560, 8192), "70b-o": (8192, 2048), "70b-gateup": (14336, 8192),
                "70b-down": (8192, 7168)}
        for r in rows:
            for k in ("shape", "M", "N", "K", "world", "us", "impl", "op", "wrong", "device", "date"):
                self.assertIn(k, r)
            self.assertEqual(r["world"], 4)
            self.assertEqual((r["N"], r["K"]), dims[r["shape"]], r)
            self.assertIn(r["impl"], ag if r["op"] == "ag_mm" else rs)
            if r["impl"] == "torch_symm_mem_mm_rs":
                self.assertIsNone(r["us"])
                self.assertIn("dry-run failure", r["error"])
            else:
                self.assertGreater(r["us"], 0)
                self.assertEqual(len(r["us_ranks"]), 4)
                self.assertEqual(r["us"], max(r["us_ranks"]))
        self.assertIn("| 70b-gateup | 8192 |", md)
        self.assertIn("FAKE", md)
        self.assertIn("dry-run failure", md)


# --------------------------------------------------------------------------- the worker (one rank)


def _worker():
    import datetime

    import numpy as np
    import torch
    import torch.distributed as dist

    import w8a8
    import w8a8_ref as ref

    rank, W = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    pre = "[rank %d/%d]" % (rank, W)
    dist.init_process_group("nccl", rank=rank, world_size=W, timeout=datetime.timedelta(seconds=60))
    try:
        comm = w8a8.Comm.from_torch_distributed()
    except w8a8.NotBuiltError as e:
        print("SKIP: libw8a8 has no NCCL transport: %s" % e.message, flush=True)
        dist.destroy_process_group()
        return SKIP_RC
    print("%s comm rank %d size %d on %s, %s" % (pre, comm.rank, comm.size, torch.cuda.get_device_name(dev),
                                                 w8a8.version_string()), flush=True)
    assert (comm.rank, comm.size) == (rank, W)
    # The largest sizes of the cases below, before the first call: on GPU ranks the fused calls grow the workspace
    # only before the communicator's first call (a peer's copies may read it after).
    comm.reserve(64 * W + 3, 192, 256)
    FP8 = getattr(torch, "float8_e4m3fn", None)
    dtypes = ["int8"] + (["fp8"] if FP8 is not None and torch.cuda.get_device_capability(dev) >= (8, 9) else [])
    failures = []
    nchecks = [0]

    def check(ok, what):
        nchecks[0] += 1
        if not ok:
            failures.append(what)
            print("%s FAIL %s" % (pre, what), flush=True)

    def gen(*seed):
        # crc32, not hash(): str hashes differ between processes, and every rank must make the same data
        g = torch.Generator()
        g.manual_seed(zlib.crc32(repr(seed).encode()))
        return g

    def q8(shape, dt, g):
        if dt == "int8":
            return torch.randint(-128, 128, shape, generator=g, dtype=torch.int8)
        return (torch.randn(shape, generator=g) * 2).to(FP8)

    def scales(shape, g):
        return (torch.rand(shape, generator=g) + 0.5) * 0.05

    OUT = {"bf16": torch.bfloat16, "fp32": torch.float32}

    def bits(t):
        if t.dtype == torch.float32:
            return t.cpu().view(torch.int32).numpy().view(np.uint32)
        return t.cpu().view(torch.int16).numpy().view(np.uint16)

    def want_bits(r, od):
        w = ref.to_out(r, od)
        return w.view(np.uint32) if od == "fp32" else w

    def nan_out(rows, cols, od="bf16"):
        return torch.full((rows, cols), float("nan"), dtype=OUT[od], device=dev)

    def same_bits(x, y):
        return torch.equal(x.view(torch.int16), y.view(torch.int16))

    def compare(got, exact_bits, want, mag, what):
        """got: [rows, N] bf16 or fp32. int8: exact_bits (uint16 / uint32); fp8: want, mag (fp64)."""
        if exact_bits is not None:
            g = bits(got)
            bad = g != exact_bits
            n = int(bad.sum())
            where = np.argwhere(bad)[:1].tolist()
            check(n == 0, "%s: %d of %d elements differ from the header's arithmetic, first at %s (got 0x%s want "
                  "0x%s)" % (what, n, g.size, where, "%x" % g[tuple(where[0])] if n else "-",
                             "%x" % exact_bits[tuple(where[0])] if n else "-"))
        else:
            err = (got.cpu().double() - want).abs()
            bound = want.abs() * 2.0 ** -7 + mag * 2e-3
            ok = err <= bound  # NaN (an element never written) compares False
            n = int((~ok).sum())
            check(n == 0, "%s: %d of %d elements outside the fp8 bound (worst %.3g bounds)" % (
                what, n, ok.numel(), float(torch.nan_to_num((err / bound), nan=float("inf")).max())))

    # ---- all-gather: out[M, N] = all_gather(A)[M, K] . B_r
    def ag_case(dt, M, K, N, with_bias, seed, gathered=False, od="bf16"):
        g = gen(seed, "A")
        A, sa = q8((M, K), dt, g), scales((M, 1), g)  # the whole layer's rows: every rank makes the same
        gw = gen(seed, "B", rank)  # this rank's weight shard
        w, sb = q8((N, K), dt, gw), scales((1, N), gw)
        bias = (torch.randn(N, generator=gw) * 4).to(torch.bfloat16).to(OUT[od]) if with_bias else None
        off, cnt = w8a8.shard_rows(M, W, rank)
        a_d, sa_d = A[off:off + cnt].contiguous().to(dev), sa[off:off + cnt].contiguous().to(dev)
        w_d, sb_d = w.to(dev), sb.to(dev)
        b_d = bias.to(dev) if bias is not None else None
        what = "AG %s->%s M=%d K=%d N=%d bias=%d W=%d" % (dt, od, M, K, N, with_bias, W)
        outs = {}
        for overlap in (True, False):
            out = nan_out(M, N, od)
            res = w8a8.all_gather_scaled_mm(comm, a_d, w_d.t(), sa_d, sb_d, bias=b_d, out=out, m_total=M,
                                            overlap=overlap, return_gathered=gathered and overlap)
            if gathered and overlap:
                got_out, garr = res
                check(got_out is out and len(garr) == 2, what + ": return_gathered returns (out, (a, scale_a))")
                ga, gs = garr
            outs[overlap] = out
        torch.cuda.synchronize(dev)
        if dt == "int8":
            acc = A.double() @ w.double().t()  # exact: |acc| < 2^31 < 2^53
            assert float(acc.abs().max()) < 2 ** 31
            r = ref.epilogue(acc.numpy().astype(np.float32), sa.numpy(), sb.numpy(),
                             bias.float().numpy() if bias is not None else None)
            compare(outs[True], want_bits(r, od), None, None, what + " fused")
        else:
            Af, Wf = A.float().double(), w.float().double()
            s = sa.double() * sb.double()
            want = (Af @ Wf.t()) * s + (bias.double().reshape(1, N) if bias is not None else 0)
            compare(outs[True], None, want, (Af.abs() @ Wf.abs().t()) * s, what + " fused")
        check(same_bits(outs[True], outs[False]), what + ": fused and unfused differ")
        if gathered:
            check(torch.equal(ga.cpu().view(torch.uint8), A.view(torch.uint8)), what + ": gathered a differs")
            check(torch.equal(gs.cpu(), sa.reshape(-1)), what + ": gathered scale_a differs")
        return a_d, w_d, sa_d, sb_d, b_d, outs[True]

    # ---- reduce-scatter: out_r = rows of rank r of sum_j A_j[M, K_j] . B_j
    def rs_case(dt, M, K, N, with_bias, seed, od="bf16"):
        layer = []
        for j in range(W):  # every rank's inputs, from that rank's seed
            g = gen(seed, "rank", j)
            layer.append((q8((M, K), dt, g), scales((M, 1), g), q8((N, K), dt, g), scales((1, N), g)))
        bias = (torch.randn(N, generator=gen(seed, "bias")) * 4).to(torch.bfloat16).to(OUT[od]) if with_bias else None
        off, cnt = w8a8.shard_rows(M, W, rank)
        A, sa, w, sb = layer[rank]
        a_d, sa_d, w_d, sb_d = A.to(dev), sa.to(dev), w.to(dev), sb.to(dev)
        b_d = bias.to(dev) if bias is not None else None
        what = "RS %s->%s M=%d K=%d N=%d bias=%d W=%d rows %d..%d" % (dt, od, M, K, N, with_bias, W, off, off + cnt)
        outs = {}
        for overlap in (True, False):
            out = nan_out(cnt, N, od)
            w8a8.scaled_mm_reduce_scatter(comm, a_d, w_d.t(), sa_d, sb_d, bias=b_d, out=out, overlap=overlap)
            outs[overlap] = out
        torch.cuda.synchronize(dev)
        rows = slice(off, off + cnt)
        if dt == "int8":
            s = None
            for Aj, saj, wj, sbj in layer:
                acc = Aj[rows].double() @ wj.double().t()
                p = ref.epilogue(acc.numpy().astype(np.float32), saj[rows].numpy(), sbj.numpy(), None)
                s = p if s is None else (s + p).astype(np.float32)  # fp32 additions in rank order
            if bias is not None:
                s = (s + bias.float().numpy().reshape(1, N)).astype(np.float32)
            compare(outs[True], want_bits(s, od), None, None, what + " fused")
        else:
            want, mag = 0, 0
            for Aj, saj, wj, sbj in layer:
                Af, Wf = Aj[rows].float().double(), wj.float().double()
                sc = saj[rows].double() * sbj.double()
                want = want + (Af @ Wf.t()) * sc
                mag = mag + (Af.abs() @ Wf.abs().t()) * sc
            if bias is not None:
                want = want + bias.double().reshape(1, N)
            compare(outs[True], None, want, mag, what + " fused")
        check(same_bits(outs[True], outs[False]), what + ": fused and unfused differ")

    t0 = time.time()
    seed = 0
    # M: every rank the same number of rows, then uneven shards (the first M % W ranks one more).
    for dt in dtypes:
        for M in (64 * W, 64 * W + 3):
            for with_bias in (False, True):
                seed += 1
                ag_case(dt, M, 256, 160, with_bias, seed, gathered=with_bias)
                rs_case(dt, M, 128, 192, with_bias, seed)
    # int8 with fp32 out: exact comparisons that see a single fp32 rounding (bf16 hides most of them,
    # e.g. the order of the reduce-scatter's sum and where its bias is added).
    for M in (64 * W, 64 * W + 3):
        seed += 1
        ag_case("int8", M, 256, 160, True, seed, od="fp32")
        rs_case("int8", M, 128, 192, True, seed, od="fp32")

    # ---- an argument error on rank 0 only: every rank fails (no hang), nothing is written, and the
    # communicator still works afterwards.
    a_d, w_d, sa_d, sb_d, b_d, good = ag_case(dtypes[-1], 32 * W, 128, 64, True, 1000)
    bad_sb = torch.ones((1, 65), dtype=torch.float32, device=dev) if rank == 0 else sb_d
    out = nan_out(32 * W, 64)
    want_cls = w8a8.InvalidScaleError if rank == 0 else w8a8.CommMismatchError
    try:
        w8a8.all_gather_scaled_mm(comm, a_d, w_d.t(), sa_d, bad_sb, bias=b_d, out=out)
        check(False, "AG with rank 0's scale_b of length 65: no error on rank %d" % rank)
    except w8a8.W8A8Error as e:
        check(isinstance(e, want_cls), "AG with rank 0's bad scale_b: rank %d raised %s (%s), expected %s" % (
            rank, type(e).__name__, e.message, want_cls.__name__))
    torch.cuda.synchronize(dev)
    check(bool(out.isnan().all()), "AG that failed wrote into out")
    w8a8.all_gather_scaled_mm(comm, a_d, w_d.t(), sa_d, sb_d, bias=b_d, out=out)
    torch.cuda.synchronize(dev)
    check(same_bits(out, good), "AG after a failed call differs")

    # A device without an index ("cuda") means the current device.
    comm2 = w8a8.Comm.from_torch_distributed(device="cuda")
    check((comm2.rank, comm2.size, comm2.handle.index) == (rank, W, local), "Comm.from_torch_distributed("
          "device='cuda'): rank %d size %d GPU %d" % (comm2.rank, comm2.size, comm2.handle.index))
    comm2.close()

    comm.close()
    dist.barrier()
    dist.destroy_process_group()
    print("%s %d checks, %d failed, %.1f s (%s)" % (pre, nchecks[0], len(failures), time.time() - t0,
                                                     ", ".join(dtypes)), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    if os.environ.get("W8A8_TORCH_TP_WORKER") == "1" and "RANK" in os.environ:
        sys.exit(_worker())
    unittest.main()
