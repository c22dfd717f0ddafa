#!/usr/bin/env python3
"""torch_tp_compare.py — w8a8's fused TP operations next to PyTorch's on the same GPUs, same script.

One process per GPU (this script starts them: fresh interpreters with RANK / WORLD_SIZE /
MASTER_ADDR / MASTER_PORT, never forked; under torchrun it is a rank itself). For the
Llama-3.1-70B tensor-parallel shapes at TP = W and M (total tokens) in 1024 .. 8192, fp8 e4m3
with per-token x per-channel fp32 scales and bf16 out, it times
  column-parallel (QKV: N = 10240/W, K = 8192; gate_up: N = 57344/W, K = 8192), out[M, N] = AG(A) . B_r:
    w8a8_ag_mm_fused       w8a8.all_gather_scaled_mm(overlap=True), Comm.from_torch_distributed
    w8a8_ag_mm_unfused     the same, overlap=False (the gather, then the GEMMs)
    torch_ag_mm_unfused    dist.all_gather_into_tensor of A and of its scales, torch._scaled_mm rowwise
    torch_symm_mem_ag_mm   torch.ops.symm_mem.fused_all_gather_scaled_matmul (row-wise-sharded scales)
  row-parallel (O: N = 8192, K = 8192/W; down: N = 8192, K = 28672/W), out_r[M/W, N] = RS(A_r . B_r):
    w8a8_mm_rs_fused       w8a8.scaled_mm_reduce_scatter(overlap=True)
    w8a8_mm_rs_unfused     the same, overlap=False
    torch_mm_rs_unfused    torch._scaled_mm rowwise, then dist.reduce_scatter_tensor (sum)
    torch_symm_mem_mm_rs   torch.ops.symm_mem.fused_scaled_matmul_reduce_scatter (reduce_op "sum")
Timing: eager calls between CUDA events (a communicator bootstrapped through torch.distributed
spans processes, and its fused calls agree over NCCL with a host round trip, which a CUDA graph
cannot hold), weights rotated over copies that exceed 3x the 60 MB L2; per rank the median of
--reps runs of --iters calls, and the figure is the max over ranks. Every impl's output is
checked on 32 sampled rows per rank against fp64 products of the same inputs (#wrong), and w8a8
fused against unfused bit for bit.

The symm_mem ops are called by argument name from their registered schema (it changed between
torch releases), each inside try/except: a failure is recorded in the output (JSON "error", the
markdown's error list) and that impl is left out of the rest of the run; nothing else stops.
Measured in two passes, w8a8 and the unfused torch baseline first and the symm_mem ops second, so
that a hang inside symm_mem still leaves the first pass written (JSON lines are flushed as they come,
the markdown is written after each pass).

  python3 bench/torch_tp_compare.py -o bench/results/h200-torch-tp-DATE      # every GPU
  python3 bench/torch_tp_compare.py --world 2 --m 1024,8192 -o /tmp/x
  python3 bench/torch_tp_compare.py --dry-run --world 4 -o /tmp/x           # no GPU: fake timings of
                                                                            # W simulated ranks
Env set here before anything CUDA starts: NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1 (no NVLink multicast on these machines).
"""
import os
import time

T_START = time.time()  # --budget-s counts from here (the launcher's limit too)

# Before torch / CUDA / NCCL are loaded, here and in every rank (they inherit the environment).
for _k, _v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ[_k] = _v

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import zlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = "bench/torch_tp_compare.py"
MS = [1024, 2048, 4096, 8192]
# (name, op, N(W), K(W)): per-rank dimensions of Llama-3.1-70B's linear layers at TP = W.
SHAPES = [("70b-qkv", "ag_mm", lambda W: (10240, W), lambda W: (8192, 1)),
          ("70b-o", "mm_rs", lambda W: (8192, 1), lambda W: (8192, W)),
          ("70b-gateup", "ag_mm", lambda W: (57344, W), lambda W: (8192, 1)),
          ("70b-down", "mm_rs", lambda W: (8192, 1), lambda W: (28672, W))]
IMPLS = {"ag_mm": ["w8a8_ag_mm_fused", "w8a8_ag_mm_unfused", "torch_ag_mm_unfused", "torch_symm_mem_ag_mm"],
         "mm_rs": ["w8a8_mm_rs_fused", "w8a8_mm_rs_unfused", "torch_mm_rs_unfused", "torch_symm_mem_mm_rs"]}
ALL_IMPLS = IMPLS["ag_mm"] + IMPLS["mm_rs"]
L2_BYTES = 60e6
SAMPLE_ROWS = 32
# Verification bound, |got - ref| <= 2^-7 |ref| + 4e-3 sum_j sa sb sum|ab|: the tests' fp8 bound with
# room for torch's reduce-scatters, which round each rank's partial to bf16 before summing
# (2^-9 of sum |p_j| <= 2^-9 of the magnitude term).
REL, MAG = 2.0 ** -7, 4e-3


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def shapes_for(W, keep=None):
    """[(name, op, N, K)] with the per-rank dimensions; shapes that W does not divide are left out."""
    out = []
    for name, op, fn, fk in SHAPES:
        (n, dn), (k, dk) = fn(W), fk(W)
        if n % dn or k % dk or (keep and name not in keep):
            continue
        out.append((name, op, n // dn, k // dk))
    return out


def call_by_schema(op, values):
    """Call a torch op with the arguments its registered schema names, taken from values by name:
    positional while every argument is given, then by keyword. A required argument that values
    does not have raises TypeError naming it and the schema (recorded as the impl's error)."""
    schema = op.default._schema
    args, kwargs, positional = [], {}, True
    for a in schema.arguments:
        if a.name in values:
            v = values[a.name]() if callable(values[a.name]) else values[a.name]
            if positional and not a.kwarg_only:
                args.append(v)
            else:
                kwargs[a.name] = v
        else:
            has_default = a.has_default_value() if hasattr(a, "has_default_value") else a.default_value is not None
            if not has_default:
                raise TypeError("this script does not know the argument %r of %s" % (a.name, schema))
            positional = False
    return op(*args, **kwargs)


# --------------------------------------------------------------------------- one rank on a GPU


class GpuRank:
    """This process's rank: data, calls, timing, verification; collectives to agree with the others."""

    def __init__(self, args):
        import torch
        import torch.distributed as dist
        if os.path.join(ROOT, "python") not in sys.path:
            sys.path.append(os.path.join(ROOT, "python"))  # PYTHONPATH, where set, comes first
        import w8a8
        import w8a8.torch  # noqa: F401  (dtype tables)
        self.torch, self.dist, self.w8a8, self.args = torch, dist, w8a8, args
        self.rank, self.W = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.local = int(os.environ.get("LOCAL_RANK", self.rank))
        torch.cuda.set_device(self.local)
        self.dev = torch.device("cuda", self.local)
        to = datetime.timedelta(seconds=args.nccl_timeout_s)
        try:
            dist.init_process_group("nccl", rank=self.rank, world_size=self.W, timeout=to, device_id=self.dev)
        except TypeError:  # torch without device_id
            dist.init_process_group("nccl", rank=self.rank, world_size=self.W, timeout=to)
        self.group_name = dist.group.WORLD.group_name
        self.notes = []
        self.comm, self.comm_error = None, None
        try:  # collective; a failure is every rank's (its status travels with the bootstrap id)
            self.comm = w8a8.Comm.from_torch_distributed()
        except w8a8.W8A8Error as e:  # the w8a8 impls then fail with this; torch's still run
            self.comm_error = "Comm.from_torch_distributed: %s" % e
            self.notes.append(self.comm_error)
        self.fp8, self.bf16 = torch.float8_e4m3fn, torch.bfloat16
        self.device_name = "%s x%d" % (torch.cuda.get_device_name(self.dev), self.W)
        nv = torch.cuda.nccl.version()
        self.version = "%s; torch %s; nccl %s" % (w8a8.version_string(), torch.__version__,
                                                  ".".join(map(str, nv)) if isinstance(nv, tuple) else nv)
        self.symm = None
        try:
            import warnings
            import torch.distributed._symmetric_memory as symm
            self.symm = symm
            enable = getattr(symm, "enable_symm_mem_for_group", None)
            if enable is not None:  # needed up to some 2.x; deprecated (a no-op) later
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    enable(self.group_name)
            for name in ("fused_all_gather_scaled_matmul", "fused_scaled_matmul_reduce_scatter"):
                self.notes.append("torch.ops.symm_mem.%s" % getattr(torch.ops.symm_mem, name).default._schema)
        except Exception as e:  # recorded; the symm_mem impls then fail with their own error
            self.notes.append("symmetric memory setup: %s: %s" % (type(e).__name__, e))
        self.disabled = {}
        self.fused_out = None
        self.t0 = T_START

    # ---- agreement between ranks

    def all_max(self, x):
        t = self.torch.tensor([float(x)], dtype=self.torch.float64, device=self.dev)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def all_min(self, x):
        return -self.all_max(-float(x))

    def all_gather_floats(self, x):
        t = self.torch.tensor([float(x)], dtype=self.torch.float64, device=self.dev)
        out = self.torch.empty(self.W, dtype=self.torch.float64, device=self.dev)
        self.dist.all_gather_into_tensor(out, t)
        return out.tolist()

    def rank0_says(self, flag):
        t = self.torch.tensor([1 if flag else 0], dtype=self.torch.int32, device=self.dev)
        self.dist.broadcast(t, 0)
        return bool(t.item())

    # ---- data

    def _gen(self, *key):
        g = self.torch.Generator(device=self.dev)
        g.manual_seed(zlib.crc32(repr((self.args.seed,) + key).encode()))
        return g

    def setup(self, shape, op, N, K, M):
        """This rank's inputs, weights, outputs and the reference of its sampled rows. Collective
        (the reduce-scatter reference is reduce-scattered in fp64)."""
        t, W, r = self.torch, self.W, self.rank
        self.shape, self.op, self.N, self.K, self.M = shape, op, N, K, M
        self.data = None
        self.fused_out = None
        t.cuda.synchronize()
        t.cuda.empty_cache()
        d = {}
        gw = self._gen("w", shape, r)  # this rank's weight shard
        base = t.randn(N, K, device=self.dev, generator=gw)
        self.rot = max(1, min(4, math.ceil(3 * L2_BYTES / (N * K))))
        d["w"] = [(base * (0.5 + 0.1 * i)).to(self.fp8) for i in range(self.rot)]
        del base
        d["sb"] = (t.rand(1, N, device=self.dev, generator=gw) + 0.5) * 0.01
        if op == "ag_mm":
            ga = self._gen("a", shape, M)  # the whole layer's rows: the same on every rank
            A = (t.randn(M, K, device=self.dev, generator=ga) * 2).to(self.fp8)
            sa = (t.rand(M, 1, device=self.dev, generator=ga) + 0.5) * 0.01
            m = M // W
            d["a"], d["sa"] = A[r * m:(r + 1) * m], sa[r * m:(r + 1) * m]  # contiguous row blocks
            d["out_f"] = t.empty(M, N, dtype=self.bf16, device=self.dev)
            d["out_u"] = t.empty(M, N, dtype=self.bf16, device=self.dev)
            d["ag_a"] = t.empty(M, K, dtype=t.uint8, device=self.dev)
            d["ag_sa"] = t.empty(M, 1, dtype=t.float32, device=self.dev)
            rows = t.linspace(0, M - 1, SAMPLE_ROWS, device=self.dev).round().long()
            Af, Wf = self._rows(A, rows).float().double(), d["w"][0].float().double()
            s = sa[rows].double() * d["sb"].double()
            self.ref = ((Af @ Wf.t()) * s, (Af.abs() @ Wf.abs().t()) * s)
            self.rows = rows
            reserve = (M, N, K)
        else:
            ga = self._gen("a", shape, M, r)  # this rank's K slice of every row
            d["a"] = (t.randn(M, K, device=self.dev, generator=ga) * 2).to(self.fp8)
            d["sa"] = (t.rand(M, 1, device=self.dev, generator=ga) + 0.5) * 0.01
            m = M // W
            d["out_f"] = t.empty(m, N, dtype=self.bf16, device=self.dev)
            d["out_u"] = t.empty(m, N, dtype=self.bf16, device=self.dev)
            d["rs_out"] = t.empty(m, N, dtype=self.bf16, device=self.dev)
            local = t.linspace(0, m - 1, SAMPLE_ROWS, device=self.dev).round().long()
            rows_all = t.cat([local + j * m for j in range(W)])
            Af, Wf = self._rows(d["a"], rows_all).float().double(), d["w"][0].float().double()
            s = d["sa"][rows_all].double() * d["sb"].double()
            parts = ((Af @ Wf.t()) * s, (Af.abs() @ Wf.abs().t()) * s)
            self.ref = []
            for p in parts:  # sum over ranks of this rank's partials of everybody's sampled rows
                o = t.empty(SAMPLE_ROWS, N, dtype=t.float64, device=self.dev)
                self.dist.reduce_scatter_tensor(o, p.contiguous())
                self.ref.append(o)
            self.rows = local
            reserve = (M, N, K)
        self.data = d
        t.cuda.synchronize()
        self.dist.barrier()
        # The workspace grows outside the timed calls, while no fused call runs anywhere.
        if self.comm is not None:
            self.comm.reserve(*reserve)
            t.cuda.synchronize()
            self.dist.barrier()

    def _rows(self, x, rows):
        """x[rows] of an fp8 matrix, through a byte view (not every torch indexes float8)."""
        return x.view(self.torch.uint8)[rows].view(self.fp8)

    # ---- the calls (each returns its output)

    def call(self, impl, i):
        t, d, w8a8 = self.torch, self.data, self.w8a8
        w = d["w"][i % self.rot]
        if impl.startswith("w8a8_") and self.comm is None:
            raise RuntimeError(self.comm_error)
        if impl in ("w8a8_ag_mm_fused", "w8a8_ag_mm_unfused"):
            fused = impl.endswith("_fused")
            out = d["out_f"] if fused else d["out_u"]
            w8a8.all_gather_scaled_mm(self.comm, d["a"], w.t(), d["sa"], d["sb"], out=out, overlap=fused)
            return out
        if impl in ("w8a8_mm_rs_fused", "w8a8_mm_rs_unfused"):
            fused = impl.endswith("_fused")
            out = d["out_f"] if fused else d["out_u"]
            w8a8.scaled_mm_reduce_scatter(self.comm, d["a"], w.t(), d["sa"], d["sb"], out=out, overlap=fused)
            return out
        if impl == "torch_ag_mm_unfused":
            # fp8 travels as bytes (NCCL has no fp8 type in every version)
            self.dist.all_gather_into_tensor(d["ag_a"], d["a"].view(t.uint8))
            self.dist.all_gather_into_tensor(d["ag_sa"], d["sa"])
            return self._scaled_mm(d["ag_a"].view(self.fp8), w.t(), d["ag_sa"], d["sb"])
        if impl == "torch_mm_rs_unfused":
            y = self._scaled_mm(d["a"], w.t(), d["sa"], d["sb"])
            self.dist.reduce_scatter_tensor(d["rs_out"], y)
            return d["rs_out"]
        if impl == "torch_symm_mem_ag_mm":
            res = call_by_schema(t.ops.symm_mem.fused_all_gather_scaled_matmul, {
                "A": d["a"], "A_shard": d["a"], "Bs": [w.t()], "A_scale": d["sa"], "B_scales": [d["sb"]],
                "gather_dim": 0, "group_name": self.group_name, "biases": [None], "result_scales": [None],
                "out_dtypes": [self.bf16], "use_fast_accum": [False]})
            return res[1][0]
        if impl == "torch_symm_mem_mm_rs":
            return call_by_schema(t.ops.symm_mem.fused_scaled_matmul_reduce_scatter, {
                "A": d["a"], "B": w.t(), "A_scale": d["sa"], "B_scale": d["sb"], "reduce_op": "sum",
                "scatter_dim": 0, "orig_scatter_dim": 0, "scatter_dim_after_maybe_reshape": 0,
                "group_name": self.group_name,
                "output_shape": lambda: [self.M, self.N],  # a fresh list per call: the op edits it
                "bias": None, "result_scale": None, "out_dtype": self.bf16, "use_fast_accum": False})
        raise ValueError(impl)

    def _scaled_mm(self, a, b, sa, sb):
        y = self.torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=self.bf16)
        return y[0] if isinstance(y, tuple) else y  # torch < 2.5 returned (out, amax)

    def verify(self, out):
        """Wrong elements of this rank's sampled rows."""
        got = out[self.rows].double()
        want, mag = self.ref
        ok = (got - want).abs() <= want.abs() * REL + mag * MAG
        return int((~ok).sum())

    def time_impl(self, impl):
        t, a = self.torch, self.args
        for i in range(a.warmup):
            self.call(impl, i)
        e0, e1 = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        times = []
        for _ in range(a.reps):
            t.cuda.synchronize()
            self.dist.barrier()  # the ranks start each run together
            e0.record()
            for i in range(a.iters):
                self.call(impl, i)
            e1.record()
            e1.synchronize()
            times.append(e0.elapsed_time(e1) * 1e3 / a.iters)
        return statistics.median(times)

    def measure(self, impl):
        """{us, us_ranks, wrong, error, same_bits_as_fused}; agreed by every rank."""
        t = self.torch
        res = {"us": None, "us_ranks": None, "wrong": None, "error": None}
        if impl in self.disabled:
            res["error"] = "not run: " + self.disabled[impl]
            return res
        err, us, wrong, same = None, 0.0, 0, 1
        try:
            us = self.time_impl(impl)
            out = self.call(impl, 0)
            t.cuda.synchronize()
            wrong = self.verify(out)
            if impl.startswith("w8a8_") and impl.endswith("_fused"):
                self.fused_out = out.clone()
            elif impl.startswith("w8a8_") and self.fused_out is not None:
                same = int(t.equal(out.view(t.int16), self.fused_out.view(t.int16)))
        except Exception as e:
            err = "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0][:300] if str(e).strip() else "")
            log("[rank %d] %s %s M=%d: %s" % (self.rank, impl, self.shape, self.M, err))
            if self.rank == 0:
                import traceback
                log("".join(traceback.format_exc().splitlines(True)[-40:]))
            try:
                t.cuda.synchronize()
            except Exception:
                pass
        if self.all_min(0 if err else 1) < 1:
            if impl.startswith("w8a8_") and impl.endswith("_fused"):
                self.fused_out = None  # on every rank: the unfused row then skips its (collective) bit check
            res["error"] = err or "failed on another rank"
            self.disabled[impl] = "%s failed at %s M=%d (%s)" % (impl, self.shape, self.M, res["error"])
            return res
        res["us_ranks"] = [round(x, 3) for x in self.all_gather_floats(us)]
        res["us"] = max(res["us_ranks"])
        res["wrong"] = int(sum(self.all_gather_floats(wrong)))
        if impl.startswith("w8a8_") and not impl.endswith("_fused") and self.fused_out is not None:
            res["same_bits_as_fused"] = self.all_min(same) >= 1
        return res

    def finish(self):
        self.torch.cuda.synchronize()
        self.dist.barrier()
        if self.comm is not None:
            self.comm.close()
        self.dist.destroy_process_group()


# --------------------------------------------------------------------------- W simulated ranks (--dry-run)


class FakeRanks:
    """Fake timings from a roofline-ish model with per-rank jitter, so that the bookkeeping (rows,
    max over ranks, errors, JSON, markdown) can be tested without a GPU or torch."""

    rank = 0

    def __init__(self, args):
        import random
        self.rng = random.Random(args.seed)
        self.args, self.W = args, args.world or 2
        self.device_name = "dry-run (no GPU; FAKE timings) x%d" % self.W
        self.version = "dry-run"
        self.notes = ["dry run: no torch, no GPU"]
        self.disabled = {}
        self.t0 = T_START

    def rank0_says(self, flag):
        return flag

    def setup(self, shape, op, N, K, M):
        self.shape, self.op, self.N, self.K, self.M = shape, op, N, K, M

    def measure(self, impl):
        res = {"us": None, "us_ranks": None, "wrong": None, "error": None}
        if impl in self.disabled:
            res["error"] = "not run: " + self.disabled[impl]
            return res
        if impl == self.args.dry_run_fail:
            res["error"] = "TypeError: dry-run failure of %s" % impl
            self.disabled[impl] = "%s failed at %s M=%d (%s)" % (impl, self.shape, self.M, res["error"])
            return res
        flops = 2.0 * self.M * self.N * self.K
        gemm = flops / ({"w8a8": 1250e12}.get(impl.split("_")[0], 1150e12))
        comm_bytes = (self.M * self.K if self.op == "ag_mm" else 2 * self.M * self.N) * (self.W - 1) / self.W
        comm = comm_bytes / 300e9
        fused = impl.endswith("_fused") or "symm_mem" in impl
        base = (max(gemm, comm) + 0.1 * min(gemm, comm)) if fused else gemm + comm
        res["us_ranks"] = [round(base * 1e6 * self.rng.uniform(0.97, 1.03) + 8.0, 3) for _ in range(self.W)]
        res["us"] = max(res["us_ranks"])
        res["wrong"] = 0
        if impl.startswith("w8a8_") and "unfused" in impl and impl.replace("unfused", "fused") not in self.disabled:
            res["same_bits_as_fused"] = True
        return res

    def finish(self):
        pass


# --------------------------------------------------------------------------- bookkeeping (rank 0)


def row_for(runner, impl, shape, op, M, N, K, res, stamp):
    us = res["us"]
    r = {"impl": impl, "op": op, "shape": shape, "M": M, "N": N, "K": K, "world": runner.W,
         "us": round(us, 3) if us is not None else None, "us_ranks": res["us_ranks"],
         "tflops_per_gpu": 2.0 * M * N * K / us * 1e-6 if us else None,
         "dtype": "fp8_e4m3", "scales": "token*channel", "out_dtype": "bf16", "wrong": res["wrong"],
         "device": runner.device_name, "date": stamp[:10], "datetime": stamp, "host": socket.gethostname(),
         "version": runner.version, "script": SCRIPT}
    if "same_bits_as_fused" in res:
        r["same_bits_as_fused"] = res["same_bits_as_fused"]
    if res["error"]:
        r["error"] = res["error"]
    return r


def markdown(rows, args, runner, stamp, elapsed, skipped, final):
    W = runner.W
    by = {}
    for r in rows:
        by.setdefault((r["op"], r["shape"], r["M"]), {})[r["impl"]] = r
    L = ["# w8a8 vs PyTorch async TP on %s — %s" % (runner.device_name, stamp[:10]), ""]
    L.append("`%s` (%s), run %s, %.0f s%s. Llama-3.1-70B linear layers at TP=%d, fp8 e4m3, per-token x "
             "per-channel fp32 scales, bf16 out; N and K are per-rank. Each figure: eager calls between CUDA "
             "events, median of %d runs of %d calls, max over the %d ranks; weights rotated over copies > 3x L2. "
             "Every output checked on %d sampled rows per rank against fp64 products (#wrong)." %
             (SCRIPT, runner.version, stamp, elapsed, "" if final else " (first pass only: no symm_mem rows yet)",
              W, args.reps, args.iters, W, SAMPLE_ROWS))
    if args.dry_run:
        L += ["", "**Dry run: FAKE timings, not a measurement.**"]
    L.append("")

    def f(x, fmt="%.1f"):
        return fmt % x if x is not None else "—"

    def us(d, k):
        return d[k]["us"] if k in d and d[k]["us"] else None

    def cell(d, k):  # a time, "error" where the impl failed, "—" where it was not run
        return f(us(d, k)) if us(d, k) else ("error" if k in d else "—")

    def ratio(base, ours):
        return base / ours if base and ours else None

    gains = {}
    for op, title in (("ag_mm", "All-gather + GEMM (column-parallel: QKV, gate_up)"),
                      ("mm_rs", "GEMM + reduce-scatter (row-parallel: O, down)")):
        names = IMPLS[op]
        keys = [k for k in by if k[0] == op]
        if not keys:
            continue
        L += ["## " + title, ""]
        L.append("| shape | M | N | K | w8a8 fused us | TFLOP/s/GPU | w8a8 unfused us | torch unfused us | "
                 "torch symm_mem us | fused vs symm_mem | fused vs torch unfused | fused vs unfused | "
                 "fused == unfused bits | wrong |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for k in keys:
            d = by[k]
            any_r = next(iter(d.values()))
            fu, un, tu, sm = (us(d, n) for n in names)
            for name, v in (("symm_mem", ratio(sm, fu)), ("torch_unfused", ratio(tu, fu)), ("unfused", ratio(un, fu))):
                if v:
                    gains.setdefault((op, name), []).append((v, k[1], k[2]))
            same = d.get(names[1], {}).get("same_bits_as_fused")
            wrong = sum(r["wrong"] or 0 for r in d.values())
            L.append("| %s | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |" % (
                k[1], k[2], any_r["N"], any_r["K"], cell(d, names[0]),
                f(d[names[0]]["tflops_per_gpu"] if fu else None, "%.0f"), cell(d, names[1]), cell(d, names[2]),
                cell(d, names[3]), f(ratio(sm, fu), "%.2fx"),
                f(ratio(tu, fu), "%.2fx"), f(ratio(un, fu), "%.2fx"),
                {True: "yes", False: "**NO**"}.get(same, "—"), wrong))
        L.append("")
    L.append("\"fused vs X\" = X's time / w8a8 fused's (> 1: w8a8 fused is faster).")
    L.append("")
    L += ["## Summary", "", "| op | w8a8 fused vs | geomean | worst (shape, M) | best |", "|---|---|---|---|---|"]
    for (p, name), v in sorted(gains.items()):
        lo, hi = min(v), max(v)
        L.append("| %s | %s | %.2fx over %d | %.2fx (%s, %d) | %.2fx (%s, %d) |" % (
            p, name, geomean([x for x, _, _ in v]), len(v), lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]))
    wrong_total = sum(r["wrong"] or 0 for r in rows)
    L += ["", "Wrong elements in all checked outputs: %d." % wrong_total]
    errs = [r for r in rows if r.get("error")]
    if errs:
        L += ["", "## Errors", ""]
        seen = set()
        for r in errs:
            key = (r["impl"], r["error"])
            if key in seen:
                continue
            seen.add(key)
            L.append("- `%s` (%s, M=%d): %s" % (r["impl"], r["shape"], r["M"], r["error"].replace("|", "\\|")))
    if skipped:
        L += ["", "Not measured (over --budget-s %.0f s): %s" % (args.budget_s, ", ".join(
            "%s %s M=%d" % s for s in skipped))]
    L += ["", "## Notes", ""]
    L.append("- w8a8 here is `Comm.from_torch_distributed`: NCCL transport between processes, whose fused calls "
             "agree on their arguments through NCCL with one host round trip per call (included in the times).")
    L.append("- torch's reduce-scatters (unfused and symm_mem) round each rank's partial to bf16 before the sum; "
             "w8a8 sums fp32 partials in rank order and rounds once.")
    for n in getattr(runner, "notes", []):
        L.append("- " + n.replace("|", "\\|"))
    return "\n".join(L) + "\n"


def run(runner, args):
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    keep = set(args.shapes.split(",")) if args.shapes else None
    shapes = shapes_for(runner.W, keep)
    ms = [int(x) for x in args.m.split(",") if x]
    lead = runner.rank == 0
    jf = open(args.out + ".jsonl", "w") if (lead and args.out) else None
    rows, skipped = [], []
    md = ""
    # Pass 1: w8a8 and torch's unfused baseline; pass 2: torch symm_mem (see the docstring).
    passes = [("main", lambda i: "symm_mem" not in i, 0.7), ("symm_mem", lambda i: "symm_mem" in i, 1.0)]
    for pi, (pname, want, frac) in enumerate(passes):
        for shape, op, N, K in shapes:
            for M in ms:
                if M % runner.W:
                    continue
                go = runner.rank0_says(time.time() - runner.t0 < args.budget_s * frac)
                if not go:
                    skipped.append((pname, shape, M))
                    continue
                runner.setup(shape, op, N, K, M)
                line = []
                for impl in IMPLS[op]:
                    if not want(impl):
                        continue
                    res = runner.measure(impl)
                    r = row_for(runner, impl, shape, op, M, N, K, res, stamp)
                    rows.append(r)
                    line.append("%s %s" % (impl.replace("w8a8_", "").replace("torch_", "t_"),
                                           "%.1f us" % r["us"] if r["us"] else "ERROR"))
                    if jf:
                        jf.write(json.dumps(r) + "\n")
                        jf.flush()
                if lead:
                    log("[%5.0f s] %-10s M=%-5d %s" % (time.time() - runner.t0, shape, M, "  ".join(line)))
        if lead:
            md = markdown(rows, args, runner, stamp, time.time() - runner.t0, skipped, pi == len(passes) - 1)
            if args.out:
                with open(args.out + ".md", "w") as f:
                    f.write(md)
    if jf:
        jf.close()
    runner.finish()
    if lead:
        print(md, flush=True)
    bad = sum(r["wrong"] or 0 for r in rows)
    return 1 if bad else 0


# --------------------------------------------------------------------------- launcher


def launch(args):
    """Start one rank per GPU (fresh interpreters running this file) and wait for them."""
    W = args.world
    if not W:
        import torch  # device count only (NVML where available): nothing is forked from this process
        W = torch.cuda.device_count()
    if W < 1:
        raise SystemExit("torch_tp_compare: no CUDA device (use --dry-run to test the script without one)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env0 = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(W), PYTHONUNBUFFERED="1")
    py = os.path.join(ROOT, "python")
    env0["PYTHONPATH"] = py + (os.pathsep + env0["PYTHONPATH"] if env0.get("PYTHONPATH") else "")
    procs = []
    for r in range(W):
        env = dict(env0, RANK=str(r), LOCAL_RANK=str(r))
        procs.append(subprocess.Popen([sys.executable, "-u", os.path.abspath(__file__)] + sys.argv[1:], env=env))
    t0, dead, rc = T_START, None, 0
    limit = args.budget_s + args.grace_s
    while any(p.poll() is None for p in procs):
        now = time.time()
        if dead is None and any(p.poll() not in (None, 0) for p in procs):
            dead = now  # a rank died: its peers are likely stuck in a collective
        if now - t0 > limit or (dead is not None and now - dead > 20):
            log("torch_tp_compare: %s; killing the ranks still running" % (
                "over --budget-s + --grace-s" if now - t0 > limit else "a rank exited with an error"))
            for p in procs:
                if p.poll() is None:
                    p.kill()
            rc = 124
            break
        time.sleep(0.5)
    rcs = [p.wait() for p in procs]
    log("torch_tp_compare: ranks exited %s" % rcs)
    return rc or max(rcs, key=abs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", default=None, help="output prefix: PREFIX.jsonl and PREFIX.md")
    ap.add_argument("--world", type=int, default=0, help="ranks (GPUs); default every visible GPU")
    ap.add_argument("--m", default=",".join(map(str, MS)), help="comma list of M (total tokens)")
    ap.add_argument("--shapes", default="", help="comma list of %s (default all)" % ",".join(s[0] for s in SHAPES))
    ap.add_argument("--iters", type=int, default=10, help="calls per timed run (10)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs; the median is kept (5)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls first (3)")
    ap.add_argument("--budget-s", type=float, default=120.0, help="stop starting new (shape, M) after this many "
                    "seconds (pass 1 at 70%%); the markdown lists what was left out (120)")
    ap.add_argument("--grace-s", type=float, default=60.0, help="the launcher kills the ranks this long after "
                    "--budget-s (60)")
    ap.add_argument("--nccl-timeout-s", type=int, default=120)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--dry-run", action="store_true", help="no GPU, no torch: fake timings of --world simulated "
                    "ranks (default 2), to test the bookkeeping")
    ap.add_argument("--dry-run-fail", default="", help="with --dry-run: this impl fails (tests the error path)")
    args = ap.parse_args()
    for x in args.m.split(","):
        if x and int(x) < 1:
            raise SystemExit("bad --m")
    if args.dry_run:
        return run(FakeRanks(args), args)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return run(GpuRank(args), args)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
