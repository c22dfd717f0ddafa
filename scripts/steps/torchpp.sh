#!/bin/bash
# torchpp.sh — step "torchpp": bench/torch_compare.py a second time with W8A8_SM90_PP=1 (the pingpong tiles
# where the plan has >= 2 tiles per SM: int8, and fp8 under fast accumulation), M >= 1024 only, into
# $OUT/h200-torch-compare-pp.{jsonl,md}: with "torchcmp" in the same call, an A/B of the pingpong tiles
# against torch and against the cooperative tiles. Env: OUT, L, BUILD, LEFT_S. Last line: summary.
set -u
: "${OUT:?}" "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-150}
tb=$((LEFT_S - 40))
[ "$tb" -gt 150 ] && tb=150
[ "$tb" -lt 20 ] && { echo "torchpp: skipped (${LEFT_S} s left)"; exit 0; }
W8A8_SM90_PP=1 W8A8_LIBRARY=$PWD/$BUILD/lib/libw8a8.so PYTHONPATH=python timeout -k 5 $((tb + 30)) python3 -u \
  bench/torch_compare.py --budget-s "$tb" --m 1024,2048,4096,8192,16384 --no-cliffs -o "$OUT/h200-torch-compare-pp" \
  >"$L/torchpp.txt" 2>&1
rc=$?
grep -iE 'geomean|target|TFLOP|TOP/s' "$OUT/h200-torch-compare-pp.md" 2>/dev/null | head -n 12
echo "torchpp: exit $rc"
