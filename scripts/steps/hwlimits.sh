#!/bin/bash
# hwlimits.sh — step "hwlimits" of scripts/device_session.sh (issue 4, session 22): bench/hw_limits.py, what the
# GPU allows next to our kernel and torch's: the weight-read floor per shape (part 1) and the SM clock, power and
# fraction of the clock's tensor peak under sustained load (part 2). HWLIMITS_ARGS passes options (e.g. "--clock
# --clock-shapes 8b-gateup:8192 --seconds 3"). About 60-110 s. Writes $OUT/h200-hw-limits.{md,jsonl}.
# Env from device_session.sh: OUT, L, BUILD, LEFT_S. Last line: summary.
set -u
: "${OUT:?}" "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-150}
. "$(dirname "$0")/common.sh"
# shellcheck disable=SC2086  # HWLIMITS_ARGS is meant to split
W8A8_LIBRARY=$PWD/$BUILD/lib/libw8a8.so PYTHONPATH=python timeout -k 5 "$(cap 180)" python3 -u bench/hw_limits.py \
  ${HWLIMITS_ARGS:-} -o "$OUT/h200-hw-limits" >"$L/hwlimits.txt" 2>&1
echo "hwlimits: exit $? $(grep -c '^| ' "$OUT/h200-hw-limits.md" 2>/dev/null || echo 0) table rows"
