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
# Session 17: the fixed cost of one copy at the sizes of AG's chunks (TP = 2, 70B qkv: 512 tokens x 8192 =
# 4 MiB at 1024 tokens). tp-bench's comm fits ~29 us + 2.75 us/MiB for AG's pull but ~7 us + 2.55 us/MiB
# for RS's push: is the pull's fixed cost the copy engine's? One copy per direction, timed by events on
# the copying stream (launch to completion, as inside a fused op), median of 15; both GPUs idle before.
# torch's copy_ between GPUs always runs on the SOURCE device's stream (ATen's copy_device_to_device), so the
# copies here go through cudaMemcpyAsync on the chosen stream (the runtime loaded by ctypes shares the
# primary contexts, and so the peer access torch enabled; enabled again here, "already enabled" ignored).
import ctypes, glob
rt = None
for cand in ["libcudart.so"] + sorted(glob.glob("/usr/local/cuda/lib64/libcudart.so*")) + \
        sorted(glob.glob("/usr/local/cuda/targets/*/lib/libcudart.so*")):
    try:
        rt = ctypes.CDLL(cand)
        break
    except OSError:
        pass
for dev, other in ((0, 1), (1, 0)):
    rt.cudaSetDevice(dev)
    rt.cudaDeviceEnablePeerAccess(other, 0)
rt.cudaGetLastError()
rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
def copy_on(dst, src, m, st):
    err = rt.cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), m, 4, st.cuda_stream)  # cudaMemcpyDefault
    if err != 0:
        raise RuntimeError(f"cudaMemcpyAsync: error {err}")
def lat(mib, kind, both):
    m = mib << 20
    s0, s1 = torch.cuda.Stream(device=d0), torch.cuda.Stream(device=d1)
    # pull: the receiver's stream copies; push: the sender's
    plan = [(b1, a0, s1 if kind == "pull" else s0)]
    if both:
        plan.append((b0, a1, s0 if kind == "pull" else s1))
    ts = []
    for rep in range(17):
        torch.cuda.synchronize(d0); torch.cuda.synchronize(d1)
        evs = []
        for dst, src, st in plan:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(st):
                e0.record(st)
                copy_on(dst, src, m, st)
                e1.record(st)
            evs.append((e0, e1))
        torch.cuda.synchronize(d0); torch.cuda.synchronize(d1)
        if rep >= 2:
            ts.append(max(a.elapsed_time(b) for a, b in evs) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]
lines = []
for mib in (1, 2, 4, 8, 16, 32):
    row = [f"{mib:3d} MiB"]
    for kind in ("pull", "push"):
        for both in (False, True):
            row.append(f"{kind}{'2dir' if both else '1dir'} {lat(mib, kind, both):7.1f} us")
    lines.append("  ".join(row))
print("# one copy, launch to completion (median of 15):")
print("\n".join(lines))
res.append("lat4MiB " + lines[2].split("  ", 1)[1])
print("\n".join(res))
print("cebw: " + "; ".join(res))
PY
