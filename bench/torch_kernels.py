#!/usr/bin/env python3
"""torch_kernels.py — which CUDA kernels torch launches for its fp8 / int8 GEMMs (our baselines),
per shape and M: the kernel name (cuBLASLt's names carry the tile, e.g. nvjet_..._128x192_..., or
sm90_xmma_..._tilesize...), its grid and block, and its duration from torch.profiler. Development tool:
it answers "what tile does cuBLASLt pick at M = 129?" before we design one; timings belong to
torch_compare.py.

  python3 bench/torch_kernels.py [--m 128,129,160,192,256] [--shapes 8b-gateup,70b-down-tp4]
"""
import argparse
import sys

import torch

SHAPES = {"8b-qkv": (6144, 4096), "8b-o": (4096, 4096), "8b-gateup": (28672, 4096), "8b-down": (4096, 14336),
          "70b-qkv-tp4": (2560, 8192), "70b-o-tp4": (8192, 2048), "70b-gateup-tp4": (14336, 8192),
          "70b-down-tp4": (8192, 7168)}


def kernels(fn):
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            d = out.setdefault(e.name, [])
            d.append(e.device_time if hasattr(e, "device_time") else e.cuda_time)
    return {k: sorted(v)[len(v) // 2] for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default="64,65,128,129,144,160,192,256")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    args = ap.parse_args()
    dev = torch.device("cuda")
    print("#", torch.cuda.get_device_name(0), "torch", torch.__version__)
    for name in args.shapes.split(","):
        N, K = SHAPES[name]
        b8 = torch.randn(N, K, device=dev).to(torch.float8_e4m3fn)
        bi = torch.randint(-128, 127, (N, K), device=dev, dtype=torch.int8)
        sb = torch.rand(1, N, device=dev) + 0.5
        one = torch.ones((), device=dev)
        for M in [int(m) for m in args.m.split(",")]:
            a8 = torch.randn(M, K, device=dev).to(torch.float8_e4m3fn)
            ai = torch.randint(-128, 127, (M, K), device=dev, dtype=torch.int8)
            sa = torch.rand(M, 1, device=dev) + 0.5
            cases = {
                "tensorwise": lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                "rowwise": lambda: torch._scaled_mm(a8, b8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
            }
            if M > 16:
                cases["int_mm"] = lambda: torch._int_mm(ai, bi.t())
            for impl, fn in cases.items():
                try:
                    for k, us in kernels(fn).items():
                        print("%-14s M=%-5d %-10s %8.2f us  %s" % (name, M, impl, us, k), flush=True)
                except Exception as ex:  # a baseline that refuses a shape says so and the sweep goes on
                    print("%-14s M=%-5d %-10s error %s" % (name, M, impl, str(ex).splitlines()[0]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
