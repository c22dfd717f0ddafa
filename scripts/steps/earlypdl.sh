#!/bin/bash
# earlypdl.sh — step "earlypdl" (session 6's untested switches, issue 4's small-M target): bench/torch_compare.py
# at M <= 256 twice in one step, interleaved by run order: first with W8A8_SM90_EARLY_PDL=1 W8A8_SM90_L2PF=1 (the
# dependent launch triggered at each CTA's start; with the weights-constant hint, the first tile's weights
# prefetched into L2 before griddepcontrol.wait), then with both off. The "with the hint" rows are the ones
# these switches are for. Writes $OUT/h200-torch-compare-earlypdl.{md,jsonl} and -earlypdl-off. Env: OUT, L,
# BUILD, LEFT_S.
set -u
: "${OUT:?}" "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-160}
tb=$(((LEFT_S - 40) / 2)); [ "$tb" -gt 75 ] && tb=75
[ "$tb" -lt 15 ] && { echo "earlypdl: skipped (${LEFT_S} s left)"; exit 0; }
res=""
for v in 1 0; do
  suf=$([ $v = 1 ] && echo earlypdl || echo earlypdl-off)
  W8A8_SM90_EARLY_PDL=$v W8A8_SM90_L2PF=$v W8A8_LIBRARY=$PWD/$BUILD/lib/libw8a8.so PYTHONPATH=python \
    timeout -k 5 $((tb + 20)) python3 -u bench/torch_compare.py --budget-s "$tb" --m 1,16,32,64,128,256 --no-cliffs \
    -o "$OUT/h200-torch-compare-$suf" >"$L/$suf.txt" 2>&1
  res="$res $suf: exit $? $(grep -E 'With the hint|HBM' "$OUT/h200-torch-compare-$suf.md" 2>/dev/null | head -n 2 | tr '\n' ' ')"
done
python3 bench/ab_compare.py "$OUT/h200-torch-compare-earlypdl-off.jsonl" "$OUT/h200-torch-compare-earlypdl.jsonl" --impls all \
  >"$L/earlypdl-ab.txt" 2>&1 && grep -E "^w8a8" "$L/earlypdl-ab.txt" | head -n 4
echo "earlypdl:$res"
