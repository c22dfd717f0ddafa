#!/usr/bin/env python3
"""plot.py -- chart the JSON lines of `w8a8 bench / tp-bench / tp-stack / tune / demo` with matplotlib.

    python3 bench/plot.py bench.jsonl -o bench.png [--metric tflops] [--dtype int8] [--impl a,b] [--shape NAME]

One panel per shape, the metric against M (log2 axis), one line per series (implementation, operation, dtype,
world size); a p20..p80 band around p50 for time metrics. `w8a8 plot -o IMAGE` runs this script; without -o,
`w8a8 plot` draws the same charts in the terminal with nothing to install. The schema of the lines:
docs/CLI.md.

Exit status: 0 the image is written, 1 bad input (the line is named), 2 a bad command line, 3 matplotlib is
not installed (the message says how to install it).
"""
import argparse
import json
import math
import sys
from collections import OrderedDict

NO_MATPLOTLIB = 3


def no_constants(name):
    raise ValueError("%s is not JSON" % name)


def read_rows(path):
    """The "row" objects of a JSON-lines file (files from before the schema: objects with an "M")."""
    rows = []
    f = sys.stdin if path == "-" else open(path, encoding="utf-8")
    try:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line, parse_constant=no_constants)
            except ValueError as e:
                raise SystemExit("plot.py: %s:%d: not a JSON object: %s" % (path, i, e)) from None
            if not isinstance(obj, dict):
                raise SystemExit("plot.py: %s:%d: not a JSON object" % (path, i))
            kind = obj.get("type")
            if kind == "row" or (kind is None and "M" in obj):
                rows.append(obj)
    finally:
        if f is not sys.stdin:
            f.close()
    return rows


def num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def shape_label(r):
    sh, n, k = r.get("shape"), num(r.get("N")), num(r.get("K"))
    if sh and n is not None and k is not None:
        return "%s (%dx%d)" % (sh, n, k)
    if sh:
        return sh
    if n is not None and k is not None:
        return "%dx%d" % (n, k)
    return "all"


def series_label(r):
    parts = [str(r.get("impl", "?"))]
    if r.get("op") not in (None, "scaled_mm"):
        parts.append(str(r["op"]))
    parts.append(str(r.get("dtype", "?")))
    if r.get("scales") == "tensor":
        parts.append("tensor-scales")
    if num(r.get("world")) is not None:
        parts.append("W=%d" % r["world"])
    return " ".join(parts)


def select(rows, args):
    """{panel: {series: [(M, y, y_lo, y_hi)]}} of the rows that pass the filters and have the metric."""
    impls = set(args.impl.split(",")) if args.impl else None
    panels = OrderedDict()
    for r in rows:
        if args.dtype and r.get("dtype") != args.dtype and not (args.dtype == "fp8" and r.get("dtype") == "fp8_e4m3"):
            continue
        if impls and r.get("impl") not in impls:
            continue
        if args.shape and args.shape not in (r.get("shape"), "%sx%s" % (r.get("N"), r.get("K"))):
            continue
        m, y = num(r.get("M")), num(r.get(args.metric))
        if y is None and args.metric == "p50_us":
            y = num(r.get("us"))  # lines from before the schema: the median as "us"
        if m is None or m <= 0 or y is None:
            continue
        lo = hi = None
        if args.metric == "p50_us":
            lo, hi = num(r.get("p20_us")), num(r.get("p80_us"))
        panels.setdefault(shape_label(r), OrderedDict()).setdefault(series_label(r), []).append((m, y, lo, hi))
    return panels


def main(argv=None):
    ap = argparse.ArgumentParser(description="Chart the JSON lines of w8a8 bench / tp-bench / tp-stack / tune / demo.")
    ap.add_argument("file", help="the JSON lines ('-': stdin)")
    ap.add_argument("-o", "--out", required=True, help="the image to write (.png, .svg, .pdf: matplotlib's formats)")
    ap.add_argument("-y", "--metric", default="tflops", help="tflops (default), p50_us, vs_baseline, or any numeric key")
    ap.add_argument("-d", "--dtype", help="only rows of this dtype")
    ap.add_argument("--impl", help="only these implementations (comma list)")
    ap.add_argument("--shape", help="only this shape (a suite's name, or NxK)")
    ap.add_argument("--title", help="the figure's title")
    args = ap.parse_args(argv)

    panels = select(read_rows(args.file), args)
    if not panels:
        print("plot.py: %s: no rows with a numeric %r and M > 0 (after the filters)" % (args.file, args.metric),
              file=sys.stderr)
        return 1
    try:
        import matplotlib
        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError:
        print("plot.py: matplotlib is not installed for %s: pip install matplotlib (or apt install "
              "python3-matplotlib); `w8a8 plot FILE` draws the charts in the terminal without it" % sys.executable,
              file=sys.stderr)
        return NO_MATPLOTLIB

    n = len(panels)
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(7 * cols, 4.2 * rows), squeeze=False)
    for ax, (panel, series) in zip(axes.flat, panels.items()):
        for name, pts in series.items():
            pts.sort()
            xs = [p[0] for p in pts]
            ax.plot(xs, [p[1] for p in pts], marker="o", markersize=3, label=name)
            if all(p[2] is not None and p[3] is not None for p in pts):
                ax.fill_between(xs, [p[2] for p in pts], [p[3] for p in pts], alpha=0.2)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: "%g" % x))  # 4096, not 2^12
        ax.set_xlabel("M (tokens)")
        ax.set_ylabel(args.metric)
        ax.set_title(panel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out)
    print("plot.py: wrote %s (%d panel%s)" % (args.out, n, "" if n == 1 else "s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
