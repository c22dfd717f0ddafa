#!/bin/bash
# prmab.sh — step "prmab": A/B of the epilogue's scale slot (sm90_args.prm, session 5) in one binary:
# bench/sm90_dev with W8A8_SM90_PRM=1 / 0 / 1 / 0 on the large-M shapes (the heuristic's configuration),
# so that drift between runs shows. PRMAB_ARGS replaces the sm90_dev arguments. Env: L, BUILD, LEFT_S.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-200}
. "$(dirname "$0")/common.sh"
need_sm90_dev prmab
ARGS=${PRMAB_ARGS:-"-s 8b-qkv,70b-o,8b-gateup,70b-qkv,8b-down -m 256,1024,4096,8192"}
res=""
for run in a b; do
  for v in 1 0; do
    for d in fp8 int8; do
      W8A8_SM90_PRM=$v timeout -k 5 "$(cap 60)" "$DEV" -d $d $ARGS >"$L/prmab-prm$v-$d-$run.txt" 2>&1
      res="$res prm$v-$d-$run:exit$?"
    done
  done
done
# per row: the four times side by side (prm1 a, prm0 a, prm1 b, prm0 b) and the ratio of the means
python3 - "$L" <<'PY' | tee "$L/prmab-summary.txt"
import sys, glob, math
L = sys.argv[1]
rows = {}
for f in sorted(glob.glob(L + "/prmab-prm*-*-*.txt")):
    tag = f.split("prmab-")[1][:-4]  # prm1-fp8-a
    prm, d, run = tag.split("-")
    for line in open(f):
        p = line.split()
        if len(p) < 12 or line.startswith("#"): continue
        try: us = float(p[7])
        except ValueError: continue
        rows.setdefault((p[0], p[1], p[2], p[5]), {})[prm + run] = us
ratios = []
for k, v in sorted(rows.items()):
    on = [v[x] for x in ("prm1a", "prm1b") if x in v]; off = [v[x] for x in ("prm0a", "prm0b") if x in v]
    if not on or not off: continue
    r = (sum(off) / len(off)) / (sum(on) / len(on)); ratios.append(r)
    print("%-5s %-12s %6s %-22s prm1 %s  prm0 %s  speedup %.3f" % (k[0], k[1], k[2], k[3], on, off, r))
if ratios:
    print("geomean speedup (prm0 / prm1): %.3f over %d rows" % (math.exp(sum(map(math.log, ratios)) / len(ratios)), len(ratios)))
PY
echo "prmab:$res $(tail -n 1 "$L/prmab-summary.txt")"
