#!/bin/bash
# envab.sh — step "envab": an interleaved A/B of one library switch through bench/torch_compare.py. The
# variable ENVAB_VAR (e.g. W8A8_SM90_SPLIT_QUAD) is set to ENVAB_A (default 0) and ENVAB_B (default 1) in
# turn, ENVAB_ROUNDS rounds (default 2: A B A B, so neither side always runs on the cooler GPU), at
# ENVAB_M tokens (default 1,16,32,64,128), on ENVAB_SHAPES (default all). Each run writes $L/h200-torch-compare-envab-{a,b}N.{md,jsonl}
# (in logs.tgz: at most 8 files come back from $OUT); ENVAB_TB_MAX caps each run's torch_compare budget (40 s); bench/ab_compare.py compares every round, the pair of
# round N goes to $L/envab-ab-rN.txt. Env: L, BUILD, LEFT_S, ENVAB_*.
set -u
: "${L:?}" "${BUILD:?}" "${ENVAB_VAR:?envab: set ENVAB_VAR}"
LEFT_S=${LEFT_S:-150}
. "$(dirname "$0")/common.sh"
A=${ENVAB_A:-0} B=${ENVAB_B:-1} R=${ENVAB_ROUNDS:-2} MS=${ENVAB_M:-1,16,32,64,128}
SH=()  # ENVAB_SHAPES: torch_compare's --shapes (default every shape of its suites)
[ -n "${ENVAB_SHAPES:-}" ] && SH=(--shapes "$ENVAB_SHAPES")
case "$R" in '' | *[!0-9]* | 0) echo "envab: ENVAB_ROUNDS must be a positive integer (got '$R')"; exit 1 ;; esac
tb=$(((LEFT_S - 20) / (2 * R) - 25)); [ "$tb" -gt "${ENVAB_TB_MAX:-40}" ] && tb=${ENVAB_TB_MAX:-40}
[ "$tb" -lt 8 ] && { echo "envab: skipped (${LEFT_S} s left)"; exit 0; }
res=""
for r in $(seq 1 "$R"); do
  for side in a b; do
    val=$([ $side = a ] && echo "$A" || echo "$B")
    env "$ENVAB_VAR=$val" W8A8_LIBRARY=$PWD/$BUILD/lib/libw8a8.so PYTHONPATH=python \
      timeout -k 5 "$(cap $((tb + 20)))" python3 -u bench/torch_compare.py --budget-s "$tb" --m "$MS" "${SH[@]}" --no-cliffs \
      -o "$L/h200-torch-compare-envab-$side$r" >"$L/envab-$side$r.txt" 2>&1
    res="$res $side$r($ENVAB_VAR=$val): exit $?;"
  done
  python3 bench/ab_compare.py "$L/h200-torch-compare-envab-a$r.jsonl" "$L/h200-torch-compare-envab-b$r.jsonl" \
    --impls all >"$L/envab-ab-r$r.txt" 2>&1
  res="$res r$r: $(grep -E '^w8a8' "$L/envab-ab-r$r.txt" | tr '\n' ' ')"
done
echo "envab:$res"
