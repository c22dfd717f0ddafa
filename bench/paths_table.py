#!/usr/bin/env python3
"""paths_table.py — the `paths` bench suite's summary: `w8a8 bench` run once per forced CUDA path (W8A8_DEV
CUDA_FORCE_PATH, in the order PATH_CCS gave, one JSON-lines header per run), each path's kernels and its time
against cuBLASLt's on the same shapes (geomean and worst row of baseline time / ours), per dtype.

  python3 bench/paths_table.py gemm-paths-h100.jsonl --ccs "90 89 80 75" > gemm-paths-h100.md
"""
import argparse
import json
import math


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--ccs", default="90 89 80 75", help="the forced capability of each run, in order")
    args = ap.parse_args()
    runs = []
    for line in open(args.jsonl):
        r = json.loads(line)
        if r.get("type") == "header":
            runs.append((r, []))
        elif r.get("type") == "row" and runs:
            runs[-1][1].append(r)
    ccs = args.ccs.split()
    print("| forced path | impl | dtype | kernels that ran | rows | wrong | geomean vs cuBLASLt | worst row |")
    print("|---|---|---|---|---|---|---|---|")
    for i, (_, rows) in enumerate(runs):
        cc = ccs[i] if i < len(ccs) else "?"
        groups = {}
        for r in rows:
            if r["impl"].startswith("w8a8") and r.get("vs_baseline"):
                groups.setdefault((r["impl"], r["dtype"]), []).append(r)
        for (impl, dt), rs in sorted(groups.items()):
            ratios = [r["vs_baseline"] for r in rs]
            g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
            kernels = ", ".join(sorted({r["kernel"] for r in rs}))
            print("| sm_%s | %s | %s | %s | %d | %d | %.3fx (%s) | %.3fx |" %
                  (cc, impl, dt, kernels, len(rs), sum(r.get("wrong") or 0 for r in rs), g, rs[0]["baseline"],
                   min(ratios)))
    print()
    print("Each row: ours against the named cuBLASLt kernel on the llama8b suite's shapes at the M values run; the "
          "forced path runs the kernels a GPU of that capability would (the SASS this build holds for them). A "
          "missing dtype is one that capability does not have (fp8 from 8.9).")


if __name__ == "__main__":
    main()
