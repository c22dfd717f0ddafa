#!/bin/bash
# partials.sh — step "partials": the reduce-scatter with partials in the output dtype
# (w8a8_tp_options.partials = W8A8_TP_PARTIALS_OUT, `--partials out`), measured the way tpipc.sh and
# stack.sh measure the fp32 default: tp-bench over the IPC transport (processes) and the layer stack
# (threads). Needs 2+ GPUs. Env: OUT, L, BUILD, NGPU, MPIRUN, LEFT_S. Last line: summary.
set -u
: "${OUT:?}" "${L:?}" "${BUILD:?}"
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
LEFT_S=${LEFT_S:-150}
. "$(dirname "$0")/common.sh"
[ "$NGPU" -lt 2 ] && { echo "partials: skipped ($NGPU GPU)"; exit 0; }
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
W8A8_TP_IPC=1 W8A8_TP_TIMEOUT_S=40 timeout -k 5 "$(cap 60)" $MPIRUN -x W8A8_TP_IPC -x W8A8_TP_TIMEOUT_S -np "$NGPU" \
  stdbuf -oL "$BUILD/bin/w8a8" tp-bench --nccl --partials out -m 1024,8192 -n 10 -w 2 -o "$OUT/tpipc-bench-pout.jsonl" \
  >"$L/tpipc-bench-pout.txt" 2>&1
r1=$?
grep -E ' rs ' "$L/tpipc-bench-pout.txt"
W=$NGPU; [ "$W" -gt 8 ] && W=8
timeout -k 5 "$(cap 90)" stdbuf -oL "$BUILD/bin/w8a8" tp-stack --local "$W" --partials out --tokens 1024,8192 --layers 2 \
  -n 10 -w 2 -o "$OUT/tp-stack-pout.jsonl" >"$L/tp-stack-pout.txt" 2>&1
r2=$?
grep -E '^# summary|fused op' "$L/tp-stack-pout.txt"
echo "partials: tp-bench ipc exit $r1; tp-stack exit $r2; $(grep -E '^# summary' "$L/tp-stack-pout.txt" | tail -n 1 | cut -c 3-)"
