#!/usr/bin/env python3
"""ab_compare.py BASE.jsonl... -- NEW.jsonl...: the same rows of two trees' bench/torch_compare.py runs side
by side. For each (impl, shape, M): the median time over each side's passes and new/base speedup; then the
geometric mean per implementation. Markdown on stdout. Rows marked wrong on either side are listed, not timed."""
import json, math, statistics, sys
from collections import defaultdict


def load(paths):
    rows = defaultdict(list)
    wrong = set()
    for p in paths:
        with open(p) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                r = json.loads(line)
                key = (r["impl"], r.get("dtype", ""), r["shape"], int(r["M"]))
                rows[key].append(float(r["us"]))
                if r.get("wrong"):
                    wrong.add(key)
    return {k: statistics.median(v) for k, v in rows.items()}, wrong


def main(argv):
    if "--" not in argv:
        sys.exit("usage: ab_compare.py BASE.jsonl... -- NEW.jsonl...")
    i = argv.index("--")
    base, wb = load(argv[:i])
    new, wn = load(argv[i + 1:])
    keys = sorted(set(base) & set(new))
    print("| impl | dtype | shape | M | base us | new us | new/base speedup |")
    print("|---|---|---|---|---|---|---|")
    per = defaultdict(list)
    for k in keys:
        s = base[k] / new[k]
        per[k[0]].append(s)
        print("| %s | %s | %s | %d | %.2f | %.2f | %.3f |" % (k + (base[k], new[k], s)))
    print()
    for impl, v in sorted(per.items()):
        g = math.exp(sum(map(math.log, v)) / len(v))
        print("geomean %s: %.3f over %d rows (min %.3f, max %.3f)" % (impl, g, len(v), min(v), max(v)))
    bad = sorted(wb | wn)
    if bad:
        print("\nwrong rows (base or new):", ", ".join("%s/%s/%s/%d" % k for k in bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
