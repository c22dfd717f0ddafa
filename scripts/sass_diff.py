#!/usr/bin/env python3
"""sass_diff.py SASS_FILE [--pairs] [A B] — compare kernels' SASS from `cuobjdump -sass OBJ`.

With A and B (substrings of two mangled kernel names, each matching exactly one function): a unified
diff of their instruction lists, addresses and encodings stripped, so that what differs between, e.g.,
a kernel and its token-tail twin (whose code should differ in the producer only) shows as a few
lines. With --pairs: for every kernel whose TAIL switch is set (found by its mangled-name
suffix; see the hazard note in main), the count of differing lines against its twin without it, and whether
the consumers' instructions (everything but the producer's TMA issue and its branches) look the same:
the length of the longest common prefix and suffix of the two listings; the stream-K twins (SK set) too,
labelled."""
import difflib
import re
import sys


def functions(path):
    """name -> [normalized instruction lines] from cuobjdump -sass output."""
    out, name = {}, None
    for line in open(path, errors="replace"):
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
            continue
        if name is None:
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;?\s*(/\*.*\*/)?\s*$", line)
        if m and m.group(1):
            ins = re.sub(r"\s+", " ", m.group(1)).strip().rstrip(";").strip()
            ins = re.sub(r"0x[0-9a-f]+", "0x?", ins) if ins.startswith(("BRA", "BSSY", "CALL", "JMP", "BSYNC")) else ins
            out[name].append(ins)
    return out


def pick(funcs, sub):
    hits = [n for n in funcs if sub in n]
    if len(hits) != 1:
        sys.exit("%r matches %d functions: %s" % (sub, len(hits), ", ".join(hits[:5])))
    return hits[0]


def common_ends(a, b):
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    return p, s


def main():
    args = [x for x in sys.argv[1:] if not x.startswith("--")]
    if not args:
        sys.exit(__doc__)
    funcs = functions(args[0])
    if "--pairs" in sys.argv:
        n = 0
        # With (..., TAIL, SK) as the last template arguments, a token-tail twin ends in ELb1ELb0EEv and a
        # stream-K twin in ELb0ELb1EEv. Hazard: sm90_gemm_kernel ends with (TAIL, STREAMK, HALVES_TWO_TEMPS), so these
        # suffixes match (STREAMK, HALVES_TWO_TEMPS) instead; fix them before trusting --pairs on a current build.
        for name in sorted(funcs):
            kind = "tail" if "ELb1ELb0EEv" in name else "streamk" if "ELb0ELb1EEv" in name else None
            if kind is None:
                continue
            twin = name.replace("ELb1ELb0EEv" if kind == "tail" else "ELb0ELb1EEv", "ELb0ELb0EEv", 1)
            if twin not in funcs:
                continue
            a, b = funcs[twin], funcs[name]
            diff = sum(1 for l in difflib.unified_diff(a, b, lineterm="", n=0) if l[:1] in "+-" and l[:3] not in ("+++", "---"))
            p, s = common_ends(a, b)
            print("%-8s %-90s %6d -> %6d instructions, %5d lines differ; common prefix %d, suffix %d" % (kind, twin, len(a), len(b), diff, p, s))
            n += 1
        print("%d pairs" % n)
        return 0
    if len(args) != 3:
        sys.exit(__doc__)
    a, b = pick(funcs, args[1]), pick(funcs, args[2])
    for l in difflib.unified_diff(funcs[a], funcs[b], a, b, lineterm="", n=2):
        print(l)
    return 0


if __name__ == "__main__":
    sys.exit(main())
