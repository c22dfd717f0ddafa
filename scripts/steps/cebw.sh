#!/bin/bash
# cebw.sh — step "cebw" of scripts/device_session.sh: copy-engine bandwidth between two GPUs (the
# transport of the fused TP ops), one stream vs two streams per direction, one direction vs both at
# once; 128 MiB per copy (the size of a 70B o-proj partial at 8192 tokens, TP=2). torch drives the
# copies (cudaMemcpyPeerAsync); CUDA events time them. Needs 2+ GPUs. Last line: the summary.
set -u
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
[ "$NGPU" -lt 2 ] && { echo "cebw: skipped ($NGPU GPU)"; exit 0; }
timeout -k 5 60 python3 - <<'PY'
import torch
n = 128 << 20
d0, d1 = torch.device("cuda:0"), torch.device("cuda:1")
a0 = torch.empty(n, dtype=torch.uint8, device=d0); b1 = torch.empty(n, dtype=torch.uint8, device=d1)
a1 = torch.empty(n, dtype=torch.uint8, device=d1); b0 = torch.empty(n, dtype=torch.uint8, device=d0)
def run(pairs, nstreams, reps=10):
    # pairs: list of (dst, src, device whose stream copies); each copy split over nstreams streams
    streams = {}
    for dst, src, dev in pairs:
        streams[dev] = [torch.cuda.Stream(device=dev) for _ in range(nstreams)]
    def once():
        for dst, src, dev in pairs:
            h = n // nstreams
            for i, s in enumerate(streams[dev]):
                with torch.cuda.stream(s):
                    dst[i * h:(i + 1) * h].copy_(src[i * h:(i + 1) * h], non_blocking=True)
    once(); torch.cuda.synchronize(d0); torch.cuda.synchronize(d1)
    import time
    t = time.perf_counter()
    for _ in range(reps): once()
    torch.cuda.synchronize(d0); torch.cuda.synchronize(d1)
    dt = (time.perf_counter() - t) / reps
    return n / dt / 1e9, dt * 1e6
res = []
for ns in (1, 2, 3):
    gbs, us = run([(b1, a0, d1)], ns)   # pull 0 -> 1 on GPU 1's streams
    res.append(f"pull1dir s{ns} {gbs:.0f}GB/s")
    gbs, us = run([(b1, a0, d0)], ns)   # push 0 -> 1 on GPU 0's streams
    res.append(f"push1dir s{ns} {gbs:.0f}GB/s")
    gbs, us = run([(b1, a0, d0), (b0, a1, d1)], ns)  # both directions at once (per direction)
    res.append(f"push2dir s{ns} {gbs:.0f}GB/s/dir")
print("\n".join(res))
print("cebw: " + "; ".join(res))
PY
