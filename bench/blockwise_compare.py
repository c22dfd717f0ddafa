#!/usr/bin/env python3
"""blockwise_compare.py — block-scaled fp8 (DeepSeek-V3 style) on the GPU: libw8a8 next to torch and DeepGEMM,
same process, same data.

For the DeepSeek-V3 linear layers (N, K) and M in {1 .. 16384}, times
  w8a8_block        w8a8.scaled_mm_blockwise: 1 x 128 activation scales, 128 x 128 weight scales, bf16 out
  w8a8_rowwise      w8a8.scaled_mm, per-token x per-channel scales on the same operands (our own rate the
                    block-scaled one is held to)
  torch_block       torch._scaled_mm with the same block scales (cuBLASLt's 1x128 / 128x128 modes), where
                    this torch and GPU take them (else the reason is recorded)
  torch_rowwise     torch._scaled_mm, per-token x per-channel
  deepgemm          DeepGEMM's fp8_gemm_nt on the same block scales, where `import deep_gemm` works
with torch_compare.py's harness: a CUDA graph of 20 calls over rotated weight copies (3x the L2), replayed 7 times,
median / 20. Every timed block-scaled result is checked on up to 256 rows against a float64 sum of the header's
formula (w8a8.h: |out - ref| <= 2e-3 sum |sa sb a b| + the bf16 rounding).

  python3 bench/blockwise_compare.py -o bench/results/blockwise-h100      # .jsonl and .md
  python3 bench/blockwise_compare.py --m 1,64,4096 --shapes 7168x2048
"""
import argparse
import datetime
import json
import math
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_compare import CALLS, L2_BYTES, REPLAYS, geomean, graph_of, log, time_graph  # noqa: E402

# DeepSeek-V3's linear layers (N, K): attention (q_a / kv_a, q_b, kv_b, o), MLP (gate_up, down) and the shared
# expert's shapes, as issue lists and DeepGEMM's benchmarks use.
SHAPES = [(24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048), (2112, 7168), (18432, 7168),
          (7168, 18432)]
MS = [1, 16, 32, 64, 65, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
IMPLS = ["w8a8_block", "w8a8_rowwise", "torch_block", "torch_rowwise", "deepgemm"]
BLOCK_IMPLS = ("w8a8_block", "torch_block", "deepgemm")


class Runner:
    def __init__(self, args):
        import torch
        import w8a8
        import w8a8.torch  # noqa: F401  (the torch front end)
        self.t, self.w8a8 = torch, w8a8
        if not torch.cuda.is_available():
            raise SystemExit("blockwise_compare: no CUDA device")
        self.dev = torch.device("cuda", 0)
        self.gen = torch.Generator(device=self.dev)
        self.gen.manual_seed(args.seed)
        self.side = torch.cuda.Stream(self.dev)
        self.device_name = torch.cuda.get_device_name(self.dev)
        self.version = "%s; torch %s" % (w8a8.version_string(), torch.__version__)
        try:
            import deep_gemm
            self.dg = deep_gemm
            self.dg_why = None
        except Exception as e:  # noqa: BLE001
            self.dg, self.dg_why = None, "import deep_gemm failed: %s" % e
        self.unsupported = {}  # impl -> reason, learnt on first failure

    def set_shape(self, N, K):
        t, g = self.t, self.gen
        self.w = None
        t.cuda.empty_cache()
        self.N, self.K = N, K
        self.KB, self.NB = (K + 127) // 128, (N + 127) // 128
        self.rot = max(2, math.ceil(3 * L2_BYTES / (N * K)))
        base = t.randn(N, K, device=self.dev, generator=g)
        self.w = [(base * (0.5 + 0.1 * i)).to(t.float8_e4m3fn) for i in range(self.rot)]
        del base
        # block scales [NB, KB] row-major (a checkpoint's weight_scale_inv); per-channel [1, N]
        self.sw = (t.rand(self.NB, self.KB, device=self.dev, generator=g) + 0.5) * 0.01
        self.sb = (t.rand(1, N, device=self.dev, generator=g) + 0.5) * 0.01

    def set_m(self, M):
        t, g = self.t, self.gen
        self.M = M
        self.a = (t.randn(M, self.K, device=self.dev, generator=g) * 2).to(t.float8_e4m3fn)
        # group scales [M, KB] column-major (stride (1, M): torch's and DeepGEMM's layout; ours takes either)
        self.sa_g = ((t.rand(self.KB, M, device=self.dev, generator=g) + 0.5) * 0.01).t()
        self.sa = (t.rand(M, 1, device=self.dev, generator=g) + 0.5) * 0.01
        self.rows = (t.arange(M, device=self.dev) if M <= 256 else
                     t.randperm(M, device=self.dev, generator=g)[:256].sort().values)
        # DeepGEMM's own activation-scale layout (MN-major, TMA-aligned), made once here as a caller would have it
        # from its quantizer, so that its calls time the GEMM alone
        self.dg_sa = self.sa_g
        align = self.dg and (getattr(self.dg, "get_mn_major_tma_aligned_tensor", None) or
                             getattr(getattr(self.dg, "_C", None), "get_mn_major_tma_aligned_tensor", None))
        if align:
            try:
                self.dg_sa = align(self.sa_g)
            except Exception as e:  # noqa: BLE001
                log("deepgemm: get_mn_major_tma_aligned_tensor failed (%s); its scales as they are" % e)

    def call(self, impl, i):
        t = self.t
        w = self.w[i % self.rot]
        if impl == "w8a8_block":
            return self.w8a8.scaled_mm_blockwise(self.a, w.t(), self.sa_g, self.sw, out_dtype=t.bfloat16)
        if impl == "w8a8_rowwise":
            return self.w8a8.scaled_mm(self.a, w.t(), self.sa, self.sb, out_dtype=t.bfloat16)
        if impl == "torch_block":  # scale_b as [KB, NB], the transpose of the row-major [NB, KB]
            return t._scaled_mm(self.a, w.t(), scale_a=self.sa_g, scale_b=self.sw.t(), out_dtype=t.bfloat16)
        if impl == "torch_rowwise":
            return t._scaled_mm(self.a, w.t(), scale_a=self.sa, scale_b=self.sb, out_dtype=t.bfloat16)
        if impl == "deepgemm":
            out = t.empty(self.M, self.N, dtype=t.bfloat16, device=self.dev)
            if hasattr(self.dg, "fp8_gemm_nt"):  # (fp32 scales as they are: no UE8M0 rounding on Hopper)
                self.dg.fp8_gemm_nt((self.a, self.dg_sa), (w, self.sw), out, disable_ue8m0_cast=True)
            else:
                self.dg.gemm_fp8_fp8_bf16_nt((self.a, self.dg_sa), (w, self.sw), out)
            return out
        raise ValueError(impl)

    def launch(self, impl):
        """What our last call ran (the handle's launch record: kernel, tile, K split), {} for the baselines."""
        if not impl.startswith("w8a8"):
            return {}
        try:
            with self.t.cuda.stream(self.side):  # (the timed graphs are captured on the side stream: its handle)
                ll = self.w8a8.torch.handle_for(self.dev).last_launch()
            return {"kernel": ll["kernel"], "config": ll["config"], "split_k": ll["split_k"]}
        except Exception:  # noqa: BLE001  (a library without launch records)
            return {}

    def measure(self, impl):
        """(us, wrong) or (None, reason)."""
        if impl in self.unsupported:
            return None, self.unsupported[impl]
        if impl == "deepgemm" and self.dg is None:
            return None, self.dg_why
        t = self.t
        try:
            graph, out = graph_of(t, self.side, lambda i: self.call(impl, i), CALLS)
        except Exception as e:  # noqa: BLE001
            t.cuda.synchronize()
            why = "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:200])
            # a missing feature is recorded once; cuBLASLt's refusals (NOT_SUPPORTED at some M) are per shape
            if impl in ("torch_block", "deepgemm") and "CUDA error" not in why:
                self.unsupported[impl] = why
            return None, why
        us = time_graph(t, graph, CALLS, REPLAYS)
        wrong = self.verify(impl, out, CALLS - 1)
        del graph, out
        return us, wrong

    def verify(self, impl, out, i):
        t = self.t
        w = self.w[i % self.rot].double()
        a = self.a[self.rows].double()
        got = out[self.rows].double()
        if impl in BLOCK_IMPLS:
            ref = t.zeros(a.shape[0], self.N, dtype=t.float64, device=self.dev)
            mag = t.zeros_like(ref)
            sbn = self.sw.double().repeat_interleave(128, dim=0)[:self.N]  # [N, KB]
            sa = self.sa_g[self.rows].double()  # [R, KB]
            for kb in range(self.KB):
                ks = slice(128 * kb, min(self.K, 128 * kb + 128))
                s = sa[:, kb:kb + 1] * sbn[:, kb][None, :]
                ref += s * (a[:, ks] @ w[:, ks].t())
                mag += s * (a[:, ks].abs() @ w[:, ks].abs().t())
        else:
            s = self.sa[self.rows].double() * self.sb.double()
            ref, mag = s * (a @ w.t()), s * (a.abs() @ w.abs().t())
        bound = ref.abs() * 2.0 ** -8 + mag * 2e-3 + 1e-30
        return int(((got - ref).abs() > bound).sum() + got.isnan().sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", default=None, help="output prefix: PREFIX.jsonl and PREFIX.md")
    ap.add_argument("--m", default=",".join(map(str, MS)))
    ap.add_argument("--shapes", default="", help="comma list of NxK (default: the DeepSeek-V3 set)")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--budget-s", type=float, default=240.0, help="no new (shape, M) after this many seconds")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    shapes = SHAPES if not args.shapes else [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    ms = [int(x) for x in args.m.split(",") if x]
    impls = [x for x in args.impls.split(",") if x]
    run = Runner(args)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    jf = open(args.out + ".jsonl", "w") if args.out else None
    rows, skipped, t0 = [], [], time.time()
    for N, K in shapes:
        run.set_shape(N, K)
        for M in ms:
            if time.time() - t0 > args.budget_s:
                skipped.append("%dx%d M=%d" % (N, K, M))
                continue
            run.set_m(M)
            line = []
            for impl in impls:
                us, wrong = run.measure(impl)
                r = {"impl": impl, "op": "scaled_mm", "dtype": "fp8_e4m3",
                     "scales": "block" if impl in BLOCK_IMPLS else "token*channel", "out_dtype": "bf16",
                     "shape": "%dx%d" % (N, K), "M": M, "N": N, "K": K, "device": run.device_name,
                     "date": stamp[:10], "datetime": stamp, "host": socket.gethostname(), "version": run.version,
                     "iters": CALLS, "replays": REPLAYS, "rotate": run.rot, "script": "bench/blockwise_compare.py"}
                if us is None:
                    r.update({"us": None, "why": wrong, "wrong": 0})
                    line.append("%s -" % impl)
                else:
                    r.update({"us": round(us, 4), "tflops": 2.0 * M * N * K / us * 1e-6, "wrong": wrong})
                    r.update(run.launch(impl))
                    line.append("%s %.1f us%s%s" % (impl, us, " WRONG %d" % wrong if wrong else "",
                                                    " [%s]" % r["config"] if r.get("config") else ""))
                rows.append(r)
                if jf:
                    jf.write(json.dumps(r) + "\n")
                    jf.flush()
            log("[%5.0f s] %dx%d M=%-5d %s" % (time.time() - t0, N, K, M, "  ".join(line)))
    if jf:
        jf.close()
    md = markdown(rows, run, stamp, time.time() - t0, impls, skipped)
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(md)
    print(md, flush=True)
    return 1 if sum(r["wrong"] for r in rows) else 0


def markdown(rows, run, stamp, elapsed, impls, skipped):
    by = {}
    for r in rows:
        by.setdefault((r["shape"], r["M"]), {})[r["impl"]] = r
    L = ["# Block-scaled fp8 GEMM: w8a8 next to torch and DeepGEMM (bench/blockwise_compare.py)", "",
         "%s, %s, %s; %.0f s. bf16 out; times in us (CUDA graph of %d calls, median of %d replays), TFLOP/s in "
         "brackets; ratios are the baseline's time over ours." % (run.device_name, stamp, run.version, elapsed, CALLS,
                                                                 REPLAYS), ""]
    why = {}
    for r in rows:
        if r.get("us") is None:
            why.setdefault(r["impl"], {}).setdefault(r["why"], []).append("%s M=%d" % (r["shape"], r["M"]))
    for k, reasons in why.items():
        for v, where in reasons.items():
            L.append("- %s not measured on %d rows (%s%s): %s" % (k, len(where), ", ".join(where[:4]),
                                                                ", ..." if len(where) > 4 else "", v))
    if why:
        L.append("")
    L.append("| shape | M | " + " | ".join(impls) + " | vs torch_block | vs deepgemm | block / rowwise (ours) | our tile |")
    L.append("|" + "---|" * (len(impls) + 6))
    ratios = {"torch_block": [], "deepgemm": [], "w8a8_rowwise": [], "deepgemm_big": [], "deepgemm_small": []}
    for (shape, M), d in by.items():
        cells = []
        for impl in impls:
            r = d.get(impl)
            cells.append("-" if not r or r.get("us") is None else "%.1f (%.0f)%s" % (
                r["us"], r["tflops"], " WRONG" if r["wrong"] else ""))
        ours = d.get("w8a8_block", {}).get("us")

        def ratio(base):
            b = d.get(base, {}).get("us")
            return b / ours if ours and b else None
        rt, rd, rr = ratio("torch_block"), ratio("deepgemm"), ratio("w8a8_rowwise")
        for k, v in (("torch_block", rt), ("deepgemm", rd), ("w8a8_rowwise", rr)):
            if v:
                ratios[k].append(v)
        if rd and M >= 1024:
            ratios["deepgemm_big"].append(rd)
        if rd and M <= 64:
            ratios["deepgemm_small"].append(rd)
        f = lambda v: "%.2fx" % v if v else "-"  # noqa: E731
        ob = d.get("w8a8_block", {})
        tile = "%s split %s" % (ob["config"], ob.get("split_k")) if ob.get("config") else "-"
        L.append("| %s | %d | %s | %s | %s | %s | %s |" % (shape, M, " | ".join(cells), f(rt), f(rd),
                                                           "%.2f" % (1 / rr) if rr else "-", tile))
    L += ["", "Geomeans of ours against each: torch_block %.3fx (%d rows); deepgemm %.3fx (%d), at M >= 1024 %.3fx, "
          "at M <= 64 %.3fx; our block-scaled time over our per-token x per-channel time %.3f." % (
              geomean(ratios["torch_block"]), len(ratios["torch_block"]), geomean(ratios["deepgemm"]),
              len(ratios["deepgemm"]), geomean(ratios["deepgemm_big"]), geomean(ratios["deepgemm_small"]),
              1 / geomean(ratios["w8a8_rowwise"]) if ratios["w8a8_rowwise"] else float("nan"))]
    if skipped:
        L += ["", "Not measured (over the budget): " + ", ".join(skipped)]
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
