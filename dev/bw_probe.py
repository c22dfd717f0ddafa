#!/usr/bin/env python3
"""bw_probe.py — development probe of the block-scaled GEMM on one GPU: for each N,K,M case, which kernel and tile
the handle ran (its launch record) and eager times (CUDA events, 20 calls) of the block-scaled and the per-token x
per-channel GEMM on the same operands. Under ncu, --one N,K,M runs 6 block-scaled calls of one case only.

  python3 dev/bw_probe.py 32768,512,128 32768,512,4096 7168,16384,4096
  ncu --kernel-name regex:sm90_bw --launch-skip 3 --launch-count 1 python3 dev/bw_probe.py --one 32768,512,4096
"""
import sys

import torch
import w8a8
import w8a8.torch as wt


def operands(N, K, M):
    g = torch.Generator(device="cuda").manual_seed(1)
    KB, NB = (K + 127) // 128, (N + 127) // 128
    w = torch.randn(N, K, device="cuda", generator=g).to(torch.float8_e4m3fn)
    a = (torch.randn(M, K, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    sw = (torch.rand(NB, KB, device="cuda", generator=g) + 0.5) * 0.01
    sa_g = ((torch.rand(KB, M, device="cuda", generator=g) + 0.5) * 0.01).t()
    sa = (torch.rand(M, 1, device="cuda", generator=g) + 0.5) * 0.01
    sb = (torch.rand(1, N, device="cuda", generator=g) + 0.5) * 0.01
    return a, w, sa_g, sw, sa, sb


def timed(f, n=20):
    f()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(n):
        f()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) * 1000 / n


def main(argv):
    one = argv[:1] == ["--one"]
    cases = [tuple(int(x) for x in c.split(",")) for c in (argv[1:] if one else argv)]
    h = wt.handle_for(torch.device("cuda", 0))
    for N, K, M in cases:
        a, w, sa_g, sw, sa, sb = operands(N, K, M)
        blk = lambda: w8a8.scaled_mm_blockwise(a, w.t(), sa_g, sw, out_dtype=torch.bfloat16)  # noqa: E731
        row = lambda: w8a8.scaled_mm(a, w.t(), sa, sb, out_dtype=torch.bfloat16)  # noqa: E731
        if one:
            for _ in range(6):
                blk()
            torch.cuda.synchronize()
            continue
        blk()
        torch.cuda.synchronize()
        ll = h.last_launch()
        tb, tr = timed(blk), timed(row)
        fl = 2.0 * M * N * K
        print("N K M %d %d %d: %s %s split %d | block %.1f us (%.0f TFLOP/s) rowwise %.1f us (%.0f) ratio %.2f" %
              (N, K, M, ll["kernel"], ll["config"], ll["split_k"], tb, fl / tb / 1e6, tr, fl / tr / 1e6, tb / tr),
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
