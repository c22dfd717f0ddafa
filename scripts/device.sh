#!/bin/bash
# device.sh — one call on the GPU machine: the steps STEPS names, in that order, each a script in
# scripts/steps/ run under its own timeout, its log under $OUT/logs as it goes (a hung step loses
# nothing already written), a line per step in $OUT/summary.txt. Any number of GPUs.
#
#   OUT=/tmp/out STEPS="info build test bench" bash scripts/device.sh
#
# Steps: info, build, build_ptx, deepgemm, vllm, test, bench, plans, profile, ab (see each file's header for its variables).
# Env: BUILD (build-dev), BUDGET_S (no step starts after this many seconds; 570), TREE (the commit
# measured, written into every results file; default: git rev-parse HEAD, else "unknown").
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/w8a8-device-out} BUILD=${BUILD:-build-dev}
STEPS=${STEPS:-"info build test bench"}
BUDGET=${BUDGET_S:-570}
export L="$OUT/logs" S="$OUT/summary.txt"
mkdir -p "$L"
# the device tool returns a few files: the logs travel packed
trap 'tar czf "$OUT/logs.tgz" -C "$OUT" logs 2>/dev/null && rm -rf "$L"' EXIT
export PATH=$PATH:/usr/local/cuda/bin
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export T0=$(date +%s) TREE=${TREE:-$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
export NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
# GPU tag for results file names: h100, h200, h100x2, ...
model=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 | grep -oiE 'H100|H200|A100|L40S|L4|A10|T4' | head -n 1 | tr 'A-Z' 'a-z')
export GPU=${model:-gpu}$([ "$NGPU" -gt 1 ] && echo "x$NGPU")
log() { echo "== [$(($(date +%s) - T0)) s] $*" | tee -a "$S"; }
log "$(date -u +%FT%TZ) tree $TREE; steps: $STEPS; $NGPU GPU(s), tag $GPU"
for st in $STEPS; do
  f="scripts/steps/$st.sh"
  [ -f "$f" ] || { log "no step '$st' ($f)"; continue; }
  left=$((BUDGET - ($(date +%s) - T0)))
  [ "$left" -gt 20 ] || { log "budget spent: skipping $st"; continue; }
  LEFT_S=$((left - 10)) timeout -k 5 "$((left - 5))" bash "$f" >"$L/step-$st.txt" 2>&1
  rc=$?
  log "$st: exit $rc $([ $rc -ge 124 ] && echo '(TIMEOUT)') $(tail -n 1 "$L/step-$st.txt")"
  [ "$st" = build ] && [ $rc -ne 0 ] && { tail -n 30 "$L/step-$st.txt" | tee -a "$S"; exit 1; }
done
log "done"
