#!/usr/bin/env python3
"""hw_limits.py — what the H200 itself allows, measured in the harness of bench/torch_compare.py.

Two of the GEMM's targets are stated against the hardware, not against torch: fp8 >= 1400 TFLOP/s at
M >= 4096, and >= 85% of the measured HBM read bandwidth (4.30 TB/s) for the weight bytes at M <= 64.
This script measures the ceilings those targets meet on this machine, in one process, next to our
kernel and torch's:

1. The weight-read floor (--floor): per shape, the time of the fastest torch reduction that reads
   exactly the weight bytes (N x K, int8 viewed as int32 / fp32; the same rotated copies > 3x L2 and the
   same CUDA graph of 20 calls, median of 7 replays, as torch_compare), with our fp8 GEMM at M = 1, 16,
   32, 64 beside it: the fraction of 4.30 TB/s a pure read reaches at that size, and ours as a fraction
   of that read. Also a 4 GiB read (the figure 4.30 TB/s came from).
2. The clock under load (--clock): each GEMM (ours fp8, torch rowwise, torch tensorwise, ours int8) is
   replayed back to back for --seconds while nvidia-smi samples the SM clock, power draw, the enforced
   power limit and the clock-event (throttle) reasons every 50 ms. From the median clock: the tensor
   pipe's dense peak at that clock (the H200's 1979 TFLOP/s fp8 are 8192 flop per SM per cycle x 132 SMs
   x 1.83 GHz; int8 the same in ops) and the fraction of it each GEMM reaches.

  python3 bench/hw_limits.py -o bench/results/h200-hw-limits-DATE     # writes PREFIX.md and PREFIX.jsonl
  python3 bench/hw_limits.py --clock --clock-shapes 8b-gateup:8192 --seconds 3
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_compare as tc  # noqa: E402  (the runner, the shapes, the harness constants)

FLOP_PER_SM_CYCLE = 8192  # dense fp8 / int8 wgmma: 1979e12 / (132 SMs x 1.83e9)
SMI_FIELDS = "clocks.sm,power.draw,enforced.power.limit,clocks_event_reasons.active,temperature.gpu"
SMI_FIELDS_OLD = "clocks.sm,power.draw,enforced.power.limit,clocks_throttle_reasons.active,temperature.gpu"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def triton_reads(t):
    """Streaming reads written for the purpose (Triton, when torch has it): each of P programs xors BLOCK int32
    words per step over a grid-strided loop, one int32 out per program. Several (P, BLOCK, warps) variants; the
    caller keeps the fastest. {} without Triton."""
    try:
        import triton
        import triton.language as tl
    except Exception as e:  # noqa: BLE001  (any import failure: the torch reductions only)
        log("hw_limits: no Triton (%s): torch's reductions only" % e)
        return {}

    @triton.jit
    def _read(x_ptr, out_ptr, n_words, iters, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        nprog = tl.num_programs(0)
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for it in range(iters):
            offs = (it * nprog + pid).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
            acc ^= tl.load(x_ptr + offs, mask=offs < n_words, other=0)
        tl.store(out_ptr + pid, tl.xor_sum(acc, axis=0))

    out = t.empty(132 * 16, dtype=t.int32, device="cuda")
    ops = {}
    for progs, block, warps in ((132 * 2, 4096, 8), (132 * 4, 2048, 4), (132 * 8, 1024, 4), (132 * 4, 4096, 8),
                                (132 * 16, 512, 4)):
        def op(w, progs=progs, block=block, warps=warps):
            x = w.view(t.int32).reshape(-1)
            n = x.numel()
            iters = (n + progs * block - 1) // (progs * block)
            _read[(progs,)](x, out, n, iters, BLOCK=block, num_warps=warps)
            return out
        ops["triton_p%d_b%d_w%d" % (progs, block, warps)] = op
    return ops


def read_ops(t, with_triton=True):
    """Reads of every byte of an int8 [N, K] tensor once (K % 4 == 0): torch's reductions, and Triton's."""
    ops = {
        "sum_int32": lambda w: w.view(t.int32).sum(dtype=t.int32),
        "sum_fp32": lambda w: w.view(t.float32).sum(),  # (NaN / inf bit patterns: the value is not used)
        "amax_int32": lambda w: w.view(t.int32).amax(),
    }
    if with_triton:
        ops.update(triton_reads(t))
    return ops


def floor_part(r, args, rows):
    t = r.torch
    ops = read_ops(t)
    L = ["## 1. The weight-read floor (M <= 64)", "",
         "A pure read of the weight bytes: the fastest of %s over the same rotated int8 copies "
         "(> 3x L2) in the same harness (CUDA graph of %d calls, median of %d replays). `read frac` = bytes / time / "
         "4.30 TB/s; `ours / read` = the read's time / our fp8 GEMM's time (per-token x per-channel scales, bf16 out), "
         "i.e. the share of the floor our GEMM reaches." % (", ".join(ops), tc.CALLS, tc.REPLAYS), ""]
    # the 4 GiB read that 4.30 TB/s came from
    big = t.empty(1 << 32, dtype=t.int8, device=r.dev).random_(-128, 127)
    best = None
    for name, op in ops.items():
        try:
            g, _ = tc.graph_of(t, r.side, lambda i: op(big), 1)
            us = tc.time_graph(t, g, 1, 5)
            del g
        except Exception as e:  # noqa: BLE001
            log("4 GiB read: %s failed (%s); skipped" % (name, e))
            continue
        best = min(best or (us, name), (us, name))
    if best is None:
        raise SystemExit("hw_limits: no read kernel ran")
    del big
    t.cuda.empty_cache()
    bw_big = (1 << 32) / (best[0] * 1e-6)
    L.append("4 GiB read (%s): %.0f us, %.2f TB/s." % (best[1], best[0], bw_big / 1e12))
    L.append("")
    rows.append({"part": "read_4gib", "op": best[1], "us": best[0], "tbps": bw_big / 1e12})
    L.append("| shape | weight MB | read us | read frac | fastest read | ours fp8 M=1 us | ours / read | M=16 | ours / read | "
             "M=32 | ours / read | M=64 | ours / read |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, N, K in args.shape_list:
        r.set_shape(N, K)
        ws = r.w["int8"]
        best = None
        for name, op in ops.items():
            try:
                g, _ = tc.graph_of(t, r.side, lambda i: op(ws[i % len(ws)]), tc.CALLS)
                us = tc.time_graph(t, g, tc.CALLS, tc.REPLAYS)
                del g
            except Exception as e:  # noqa: BLE001  (a read that fails to compile or launch is skipped)
                log("floor %s: %s failed (%s); skipped" % (shape, name, e))
                continue
            best = min(best or (us, name), (us, name))
        if best is None:
            L.append("| %s | no read kernel ran |" % shape)
            continue
        frac = N * K / (best[0] * 1e-6) / tc.HBM_BYTES_PER_S
        cells = ["%s" % shape, "%.1f" % (N * K / 1e6), "%.2f" % best[0], "%.2f" % frac, best[1]]
        rec = {"part": "read_floor", "shape": shape, "N": N, "K": K, "read_us": best[0], "read_op": best[1],
               "read_frac": frac, "ours_fp8_us": {}}
        for M in (1, 16, 32, 64):
            r.set_m(M)
            us, wrong = r.measure("w8a8_cuda_fp8")
            rec["ours_fp8_us"][M] = us
            cells += ["%.2f%s" % (us, " (%d wrong)" % wrong if wrong else ""), "%.2f" % (best[0] / us)]
        rows.append(rec)
        L.append("| " + " | ".join(cells) + " |")
        log("floor %s: read %.2f us (%s), %.2f of 4.30 TB/s" % (shape, best[0], best[1], frac))
    L.append("")
    return L


def smi_sampler():
    for fields in (SMI_FIELDS, SMI_FIELDS_OLD):
        probe = subprocess.run(["nvidia-smi", "-i", "0", "--query-gpu=" + fields, "--format=csv,noheader,nounits"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return fields
    return None


def clock_part(r, args, rows):
    t = r.torch
    fields = smi_sampler()
    L = ["## 2. The clock under load", ""]
    if fields is None:
        L += ["nvidia-smi could not be queried: no clock figures.", ""]
        return L
    L.append("Each GEMM replayed back to back for %.1f s (CUDA graph of %d calls) while `nvidia-smi --query-gpu=%s "
             "-lms 50` samples; medians over the samples of the last %.0f%% of the run. `peak at clock` = 8192 flop "
             "per SM per cycle x 132 SMs x the median SM clock (the 1979 TFLOP/s dense fp8 figure is that at "
             "1.83 GHz); `of peak` = the GEMM's rate during the run / that." %
             (args.seconds, tc.CALLS, fields, 100 * (1 - args.skip)))
    L.append("")
    L.append("| shape | M | GEMM | TFLOP/s | SM MHz (p10..p90) | power W (limit) | events | peak at clock | of peak |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    # ours with fast accumulation (no promotion) too: whether the promotion's adds cost clock (power) or cycles
    impls = ["w8a8_cuda_fp8", "w8a8_cuda_fp8_fast", "torch_scaled_mm_rowwise", "torch_scaled_mm_rowwise_fast",
             "torch_scaled_mm_tensorwise", "w8a8_cuda_int8"]
    for spec in args.clock_shapes.split(","):
        shape, M = spec.split(":")
        M = int(M)
        N, K = {s: (n, k) for s, n, k in args.all_shapes}[shape]
        r.set_shape(N, K)
        r.set_m(M)
        for impl in impls:
            fast = impl == "w8a8_cuda_fp8_fast"  # the handle's setting, read when each call is enqueued (captured)
            if fast:
                r.w8a8_torch.set_fp8_accum(1)
            try:
                g, _ = tc.graph_of(t, r.side, lambda i: r.call(impl, i), tc.CALLS)
            finally:
                if fast:
                    r.w8a8_torch.set_fp8_accum(0)
            per = tc.time_graph(t, g, tc.CALLS, 2) * 1e-6 * tc.CALLS  # seconds per replay
            n = max(3, int(args.seconds / per))
            smi = subprocess.Popen(["nvidia-smi", "-i", "0", "--query-gpu=" + fields, "--format=csv,noheader,nounits",
                                    "-lms", "50"], stdout=subprocess.PIPE, text=True)
            time.sleep(0.2)
            e0, e1 = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(n):
                g.replay()
            e1.record()
            e1.synchronize()
            smi.terminate()
            out = smi.communicate()[0]
            del g
            us = e0.elapsed_time(e1) * 1e3 / (n * tc.CALLS)
            samples = []
            for line in out.strip().splitlines():
                p = [x.strip() for x in line.split(",")]
                try:
                    samples.append((float(p[0]), float(p[1]), float(p[2]), p[3], float(p[4])))
                except (ValueError, IndexError):
                    pass
            samples = samples[int(len(samples) * args.skip):]  # the ramp at the start
            tf = 2.0 * M * N * K / us * 1e-6
            rec = {"part": "clock", "shape": shape, "M": M, "N": N, "K": K, "impl": impl, "us": us, "tflops": tf,
                   "samples": len(samples)}
            if samples:
                clk = sorted(s[0] for s in samples)
                mhz = statistics.median(clk)
                pw = statistics.median(s[1] for s in samples)
                lim = statistics.median(s[2] for s in samples)
                ev = sorted({s[3] for s in samples})
                peak = FLOP_PER_SM_CYCLE * 132 * mhz * 1e6 / 1e12
                rec.update({"sm_mhz": mhz, "sm_mhz_p10": clk[len(clk) // 10], "sm_mhz_p90": clk[(len(clk) * 9) // 10],
                            "power_w": pw, "power_limit_w": lim, "events": ev, "peak_tflops_at_clock": peak,
                            "of_peak": tf / peak})
                L.append("| %s | %d | %s | %.0f | %.0f (%.0f..%.0f) | %.0f (%.0f) | %s | %.0f | %.2f |" %
                         (shape, M, impl, tf, mhz, rec["sm_mhz_p10"], rec["sm_mhz_p90"], pw, lim, " ".join(ev), peak,
                          tf / peak))
            else:
                L.append("| %s | %d | %s | %.0f | (no samples) | | | | |" % (shape, M, impl, tf))
            rows.append(rec)
            log("clock %s M=%d %s: %.0f TFLOP/s, %s" % (shape, M, impl, tf, rec.get("sm_mhz")))
    L.append("")
    return L


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", default=None, help="output prefix: PREFIX.md and PREFIX.jsonl")
    ap.add_argument("--floor", action="store_true", help="part 1 only (with --clock: both; neither: both)")
    ap.add_argument("--clock", action="store_true", help="part 2 only")
    ap.add_argument("--suites", default="llama8b,llama70b-tp4")
    ap.add_argument("--clock-shapes", default="8b-gateup:8192,70b-o-tp4:16384,8b-o:4096",
                    help="comma list of SHAPE:M for part 2")
    ap.add_argument("--seconds", type=float, default=3.0, help="part 2: seconds of load per GEMM")
    ap.add_argument("--skip", type=float, default=0.3, help="part 2: share of the samples dropped at the start")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    args.all_shapes = [s for suite in tc.SUITES.values() for s in suite]
    args.shape_list = [s for name in args.suites.split(",") for s in tc.SUITES[name]]
    both = args.floor == args.clock
    args.dry_run = False
    r = tc.TorchRunner(args)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    t0 = time.time()
    rows = []
    L = ["# What the %s allows — %s" % (r.device_name, stamp[:10]), "",
         "`bench/hw_limits.py` (%s), run %s." % (r.version, stamp), ""]
    if both or args.floor:
        L += floor_part(r, args, rows)
    if both or args.clock:
        L += clock_part(r, args, rows)
    L.append("Run time %.0f s." % (time.time() - t0))
    text = "\n".join(L) + "\n"
    print(text)
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(text)
        with open(args.out + ".jsonl", "w") as f:
            for rec in rows:
                rec.update({"device": r.device_name, "datetime": stamp, "script": "bench/hw_limits.py"})
                f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
