#!/bin/bash
# pdloff.sh — step "pdloff": bench/torch_compare.py with programmatic dependent launch turned off
# (W8A8_SM90_PDL=0), for the A/B against the "torchcmp" step's run (on by default). Writes
# $OUT/h200-torch-compare-nopdl.{md,jsonl}. Env: OUT, L, BUILD, LEFT_S, TORCH_M.
set -u
: "${OUT:?}" "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-120}
tb=$((LEFT_S - 30)); [ "$tb" -gt 150 ] && tb=150
W8A8_SM90_PDL=0 W8A8_LIBRARY=$PWD/$BUILD/lib/libw8a8.so PYTHONPATH=python timeout -k 5 $((tb + 25)) python3 -u \
  bench/torch_compare.py --budget-s "$tb" ${TORCH_M:+--m "$TORCH_M"} -o "$OUT/h200-torch-compare-nopdl" >"$L/pdloff.txt" 2>&1
echo "pdloff: exit $? $(grep -E 'geomean vs torch._scaled_mm rowwise|int8 geomean' "$OUT/h200-torch-compare-nopdl.md" 2>/dev/null | tr '\n' ' ')"
