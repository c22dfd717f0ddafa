#!/usr/bin/env python3
"""Host time of one eager w8a8 call from Python, against the raw ctypes call of the same library
function, on a warm handle (time.perf_counter around many calls; the best of several repeats).

NumPy (CPU backend, tiny shapes, one thread: what is measured is the Python around the call):
  raw ctypes          w8a8_scaled_mm through the declared prototypes, ctypes structs built once, byref
  raw fast prototype  the c_void_p prototype with the argument block packed once (the floor of the bindings)
  w8a8.numpy / w8a8.scaled_mm, with out= and allocating the output, and the general (descriptor) path
torch (when torch sees CUDA; the GPU work of a tiny GEMM is shorter than its host time, and each batch
of calls is followed by an untimed synchronize so the launch queue never fills):
  raw ctypes on the CUDA handle that w8a8.torch uses, w8a8.torch.scaled_mm with out= and allocating,
  w8a8.scaled_mm, torch.ops.w8a8.scaled_mm (the custom op's dispatch, what torch.compile graphs call),
  torch._scaled_mm for comparison where the GPU has fp8.
Before timing, every wrapper's output is checked against the raw call's, element for element.

    python3 bench/host_cost.py [--iters 20000] [--repeat 7] [--json FILE]
"""
import argparse
import ctypes
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import numpy as np  # noqa: E402

import w8a8  # noqa: E402
import w8a8.numpy as wn  # noqa: E402
from w8a8 import _core, _lib  # noqa: E402


def per_call_us(f, iters, repeat, sync=None, batch=None):
    """Best of `repeat` timings of `iters` calls, in microseconds per call. With batch, sync() runs
    (untimed) after every batch calls."""
    f()
    if sync:
        sync()
    best = float("inf")
    batch = batch or iters
    for _ in range(repeat):
        total, done = 0.0, 0
        while done < iters:
            n = min(batch, iters - done)
            t0 = time.perf_counter()
            for _ in range(n):
                f()
            total += time.perf_counter() - t0
            done += n
            if sync:
                sync()
        best = min(best, total / iters * 1e6)
    return best


def raw_structs(h, a_ptr, a_ld, b_ptr, b_ld, out_ptr, out_ld, out_dtype, M, N, K, in_dtype, sa, sb):
    """(call, keep): the raw ctypes call through the declared prototypes, structs built once."""
    lib = _lib.load()
    am = _lib.Matrix(in_dtype, int(_lib.Layout.ROW_MAJOR), M, K, a_ld, a_ptr)
    bm = _lib.Matrix(in_dtype, int(_lib.Layout.COL_MAJOR), K, N, b_ld, b_ptr)
    om = _lib.Matrix(out_dtype, int(_lib.Layout.ROW_MAJOR), M, N, out_ld, out_ptr)
    sav = _lib.Vector(int(_lib.DType.FP32), sa[0], sa[1])
    sbv = _lib.Vector(int(_lib.DType.FP32), sb[0], sb[1])
    fn, hp, br = lib.w8a8_scaled_mm, h.ptr, ctypes.byref

    def call():
        st = fn(hp, br(am), br(bm), br(sav), br(sbv), None, None, br(om))
        if st:
            _lib.check(st, "w8a8_scaled_mm")
    return call, (am, bm, om, sav, sbv)


def raw_fast(h, fields):
    """The c_void_p prototype with the argument block packed once."""
    _core.PACK_MM.pack_into(h.args, 0, *fields)
    p, hp, fn = h.args_addr, h.addr, _lib.FAST["w8a8_scaled_mm"]

    def call():
        st = fn(hp, p, p + 40, p + 120, p + 144, None, None, p + 80)
        if st:
            _lib.check(st, "w8a8_scaled_mm")
    return call


def _general(a, b, sa, sb, out):
    """The path every call took before the fast path (and that unusual layouts still take)."""
    wn._FAST = False
    try:
        return wn.scaled_mm(a, b, sa, sb, "fp32", None, None, None, out)
    finally:
        wn._FAST = True


def numpy_rows(iters, repeat, M, N, K):
    r = np.random.default_rng(1)
    a = r.integers(-128, 128, (M, K)).astype(np.int8)
    w = r.integers(-128, 128, (N, K)).astype(np.int8)
    sa = (r.random((M, 1)) + 0.5).astype(np.float32)
    sb = (r.random((1, N)) + 0.5).astype(np.float32)
    b = w.T
    h = wn.cpu_handle()
    h.set_num_threads(1)  # (the numbers are the host's; one thread keeps the library's own part steady)
    addr = wn._addr
    out_raw = np.zeros((M, N), np.float32)
    raw, keep = raw_structs(h, addr(a), K, addr(w), K, addr(out_raw), N, int(_lib.DType.FP32), M, N, K,
                            int(_lib.DType.INT8), (M, addr(sa)), (N, addr(sb)))
    fields = (int(_lib.DType.INT8), 0, M, K, K, addr(a), int(_lib.DType.INT8), 1, K, N, K, addr(w),
              int(_lib.DType.FP32), 0, M, N, N, addr(out_raw), int(_lib.DType.FP32), M, addr(sa),
              int(_lib.DType.FP32), N, addr(sb))
    fast = raw_fast(h, fields)
    raw()
    want = out_raw.copy()
    out = np.zeros((M, N), np.float32)
    cases = [
        ("raw ctypes (structs built once, byref)", raw),
        ("raw fast prototype (argument block packed once)", fast),
        ("w8a8.numpy.scaled_mm(out=)", lambda: wn.scaled_mm(a, b, sa, sb, "fp32", None, None, None, out)),
        ("w8a8.scaled_mm(out=)", lambda: w8a8.scaled_mm(a, b, sa, sb, out=out)),
        ("w8a8.scaled_mm (allocates out)", lambda: w8a8.scaled_mm(a, b, sa, sb, out_dtype="fp32")),
        ("w8a8.numpy.scaled_mm(out=), general path (views, ctypes structs)", lambda: _general(a, b, sa, sb, out)),
    ]
    for name, f in cases[2:]:
        out[:] = np.nan
        got = f()
        got = out if got is None else got
        if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            raise SystemExit("host_cost: %s differs from the raw call" % name)
    rows = [(name, per_call_us(f, iters, repeat)) for name, f in cases]
    del keep
    return rows, "numpy, cpu backend, M=%d N=%d K=%d int8 -> fp32, 1 thread" % (M, N, K)


def torch_rows(iters, repeat, M, N, K):
    try:
        import torch
    except ImportError:
        return None, "torch is not installed"
    if not torch.cuda.is_available():
        return None, "torch sees no CUDA device"
    import w8a8.torch as wt
    dev = torch.device("cuda", torch.cuda.current_device())
    g = torch.Generator().manual_seed(1)
    a = torch.randint(-128, 128, (M, K), generator=g, dtype=torch.int8).to(dev)
    w = torch.randint(-128, 128, (N, K), generator=g, dtype=torch.int8).to(dev)
    sa = (torch.rand(M, 1, generator=g) + 0.5).to(dev)
    sb = (torch.rand(1, N, generator=g) + 0.5).to(dev)
    b = w.t()
    h = wt.handle_for(dev)
    out_raw = torch.zeros(M, N, dtype=torch.bfloat16, device=dev)
    raw, keep = raw_structs(h, a.data_ptr(), K, w.data_ptr(), K, out_raw.data_ptr(), N, int(_lib.DType.BF16), M, N,
                            K, int(_lib.DType.INT8), (M, sa.data_ptr()), (N, sb.data_ptr()))
    raw()
    torch.cuda.synchronize()
    want = out_raw.clone()
    out = torch.zeros(M, N, dtype=torch.bfloat16, device=dev)
    cases = [
        ("raw ctypes (structs built once, byref)", raw),
        ("w8a8.torch.scaled_mm(out=)", lambda: wt.scaled_mm(a, b, sa, sb, out=out)),
        ("w8a8.torch.scaled_mm (allocates out)", lambda: wt.scaled_mm(a, b, sa, sb, torch.bfloat16)),
        ("w8a8.scaled_mm (allocates out)", lambda: w8a8.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)),
    ]
    if wt.HAVE_CUSTOM_OPS:
        cases.append(("torch.ops.w8a8.scaled_mm (custom op dispatch)",
                      lambda: torch.ops.w8a8.scaled_mm(a, b, sa, sb, torch.bfloat16)))
    for name, f in cases[1:]:
        out.fill_(float("nan"))
        got = f()
        got = out if got is None else got
        torch.cuda.synchronize()
        if not torch.equal(got.view(torch.int16), want.view(torch.int16)):
            raise SystemExit("host_cost: %s differs from the raw call" % name)
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is not None and torch.cuda.get_device_capability(dev) >= (8, 9):
        af, wf = a.to(torch.float16).div(8).to(fp8), w.to(torch.float16).div(8).to(fp8)
        saf, sbf = sa.contiguous(), sb.contiguous()

        def ref_mm():
            return torch._scaled_mm(af, wf.t(), saf, sbf, out_dtype=torch.bfloat16)
        try:
            ref_mm()
            cases.append(("torch._scaled_mm (fp8 rowwise, for comparison)", ref_mm))
        except RuntimeError as e:  # rowwise scaling is not on every GPU
            print("torch._scaled_mm row left out: %s" % str(e).splitlines()[0])
    sync = torch.cuda.synchronize
    rows = [(name, per_call_us(f, iters, repeat, sync=sync, batch=200)) for name, f in cases]
    del keep
    return rows, "torch, %s, M=%d N=%d K=%d int8 -> bf16" % (torch.cuda.get_device_name(dev), M, N, K)


def table(title, rows):
    base = rows[0][1]
    lines = ["%s" % title, "| call | us / call | over raw ctypes |", "|---|---:|---:|"]
    for name, us in rows:
        lines.append("| %s | %.2f | %+.2f |" % (name, us, us - base))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json", help="also write the rows here (one JSON object)")
    ap.add_argument("--skip-torch", action="store_true")
    args = ap.parse_args()
    report = {"library": _lib.library_path(), "version": w8a8.version_string(), "iters": args.iters,
              "repeat": args.repeat}
    rows, title = numpy_rows(args.iters, args.repeat, 8, 16, 32)
    print(table(title, rows))
    report["numpy"] = {"title": title, "rows": rows}
    if not args.skip_torch:
        rows, title = torch_rows(args.iters, args.repeat, 16, 64, 128)
        print()
        if rows is None:
            print("torch: skipped (%s)" % title)
        else:
            print(table(title, rows))
        report["torch"] = {"title": title, "rows": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
