#!/bin/bash
# stackvec.sh — step "stackvec": A/B of the 8-wide reduce kernel of the reduce-scatter
# (W8A8_TP_REDUCE_VEC=1) against the scalar one, on the layer stack with real GPU ranks, in one
# step, alternating off / on / off / on so that drift shows. Needs 2+ GPUs. Env: OUT, L, BUILD,
# NGPU, LEFT_S. JSON lines: $OUT/tp-stack-vec{0,1}-{a,b}.jsonl. Last line: summary.
set -u
: "${OUT:?}" "${L:?}" "${BUILD:?}"
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
LEFT_S=${LEFT_S:-150}
. "$(dirname "$0")/common.sh"
[ "$NGPU" -lt 2 ] && { echo "stackvec: skipped ($NGPU GPU)"; exit 0; }
W=$NGPU; [ "$W" -gt 8 ] && W=8
res=""
for run in a b; do
  for v in 0 1; do
    LOG="$L/tp-stack-vec$v-$run.txt"
    W8A8_TP_REDUCE_VEC=$v timeout -k 5 "$(cap 50)" stdbuf -oL "$BUILD/bin/w8a8" tp-stack --local "$W" --tokens 1024,8192 \
      --layers 2 -n 10 -w 2 -o "$OUT/tp-stack-vec$v-$run.jsonl" >"$LOG" 2>&1
    res="$res vec$v-$run:exit$?"
    grep -E '^# summary' "$LOG" | sed "s/^/vec$v-$run /"
  done
done
echo "stackvec:$res"
