#!/bin/bash
# plans.sh — step "plans": the sm_90a planner's choice for every variant, dtype, shape and M = 1..PLANS_MAX_M
# (16384) on this GPU (bench/plan_dump.c, built by the build step) -> $OUT/plans-$GPU.tsv. No kernel runs.
. "$(dirname "$0")/lib.sh"
P="$BUILD/bin/plan_dump"
[ -x "$P" ] || { echo "plans: $P not built"; exit 1; }
cmd="$P -m ${PLANS_MAX_M:-16384}"
{ header "sm_90a plans: (variant, dtype, N, K, M range) -> path, configuration, split" "$cmd"; timeout -k 5 "$(cap 200)" $cmd; } \
  >"$OUT/plans-$GPU.tsv" 2>"$L/plans.txt"
echo "plans: exit $? $(grep -vc '^#' "$OUT/plans-$GPU.tsv") rows"
