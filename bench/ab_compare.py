#!/usr/bin/env python3
"""ab_compare.py — side by side of two bench/torch_compare.py runs (A/B of a switch, e.g. the device
step gemv: W8A8_GEMV=2 (the default rule) or 1 in run B, 0 in run A).

    python3 bench/ab_compare.py A.jsonl B.jsonl [--impls w8a8_cuda,w8a8_cuda_weights_constant]

For every row present in both (impl, dtype, shape, M): time in A, time in B, and A / B (> 1: B faster),
then the geometric mean per impl and dtype. torch's rows are listed too (--impls all): they did not
change between the runs, so their ratio shows how much of a difference is the machine (clocks)."""
import argparse
import json
import math
import sys


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            # a row with wrong outputs is not a time to compare: NaN, listed but left out of the geomeans
            bad = int(r.get("wrong", 0) or 0) > 0
            rows[(r["impl"], r["dtype"], r["shape"], int(r["M"]))] = float("nan") if bad else float(r["us"])
    return rows


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--impls", default="w8a8_cuda,w8a8_cuda_weights_constant",
                    help="comma list of impl names, or 'all'")
    ap.add_argument("--ranges", default="1-16,17-64,65-256,257-",
                    help="M ranges for the per-range geomeans printed last ('' for none)")
    args = ap.parse_args(argv)
    A, B = load(args.a), load(args.b)
    keys = sorted(k for k in A if k in B and (args.impls == "all" or k[0] in args.impls.split(",")))
    if not keys:
        print("no rows in common")
        return 1
    print("| impl | dtype | shape | M | A us | B us | A / B |")
    print("|---|---|---|---|---|---|---|")
    groups = {}
    for k in keys:
        a, b = A[k], B[k]
        if a != a or b != b:
            print("| %s | %s | %s | %d | %s | %s | wrong outputs |" % (k[0], k[1], k[2], k[3], a, b))
            continue
        if a <= 0 or b <= 0:
            continue
        print("| %s | %s | %s | %d | %.1f | %.1f | %.3f |" % (k[0], k[1], k[2], k[3], a, b, a / b))
        groups.setdefault((k[0], k[1]), []).append(math.log(a / b))
    print()
    for (impl, dt), v in sorted(groups.items()):
        print("%s %s: geomean A/B %.3f over %d rows (min %.3f, max %.3f)" %
              (impl, dt, math.exp(sum(v) / len(v)), len(v), math.exp(min(v)), math.exp(max(v))))
    if args.ranges:
        print()
        for rg in args.ranges.split(","):
            lo, _, hi = rg.partition("-")
            lo, hi = int(lo), (int(hi) if hi else 1 << 62)
            per = {}
            for k in keys:
                a, b = A[k], B[k]
                if lo <= k[3] <= hi and a == a and b == b and a > 0 and b > 0:
                    per.setdefault((k[0], k[1]), []).append(math.log(a / b))
            for (impl, dt), v in sorted(per.items()):
                print("M %s: %s %s: geomean A/B %.3f over %d rows" % (rg, impl, dt, math.exp(sum(v) / len(v)), len(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
