#!/bin/bash
# ncu.sh — step "ncu" of scripts/device_session.sh: where the Hopper kernel's time goes (issue 4).
# Session 2 left two unexplained costs (NOTES.md, "Hopper fast path", session 2): ~0.8 us per 128-deep
# K-block of a 128 x 256 int8 tile where the IGMMA peak allows 0.56 (L2 -> SM traffic? 48 KB per K-block),
# and ~10 us per tile outside the main loop. One Nsight Compute profile of each kind answers both:
#   1. int8 8b-qkv M = 8192 (int8_128x256, persistent): tensor-pipe utilisation, L2 throughput, stall reasons
#   2. fp8 8b-qkv M = 8192 (fp8_128x128_promote): the same with the double-buffered promotion
#   3. fp8 70b-o-tp4 M = 64 (the split-K tile, the slow case of v3)
# NCU_RUNS="name=sm90_dev args;..." profiles those instead (session 16's question: the one-box token tail on
# few CTAs, e.g. NCU_RUNS="t0=-c int8_128x128_tail -R 0 -d int8 -s 70b-down-tp4 -m 80;t3=-c int8_128x128_tail
# -R 3 -d int8 -s 70b-down-tp4 -m 80;pad=-P -c int8_128x128 -d int8 -s 70b-down-tp4 -m 80"; one mode per run).
# Built with `make lib tests cli` plus bench/sm90_dev (built here). Env from device_session.sh: OUT, L,
# BUILD, LEFT_S. Reports (text, --page details) go to $L; the last line is a summary. About 120 s.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-150}
. "$(dirname "$0")/common.sh"
need_sm90_dev ncu
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
res=""
prof() { # name sm90_dev-args...
  local name=$1
  shift
  timeout -k 5 "$(cap 45)" "$NCU" --kernel-name regex:'sm90_(gemm|skinny)_kernel' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
    "$DEV" "$@" >"$L/ncu-$name.txt" 2>&1
  res="$res $name:exit$?"
}
run() { prof "$1" -d "$2" -s "$3" -m "$4"; } # name dtype shape M
if [ -n "${NCU_RUNS:-}" ]; then
  IFS=';' read -r -a nruns <<<"$NCU_RUNS"
  for e in "${nruns[@]}"; do
    # shellcheck disable=SC2086  # the args are meant to split
    prof "${e%%=*}" ${e#*=}
  done
else
  run int8-8bqkv-8192 int8 8b-qkv 8192
  run fp8-8bqkv-8192 fp8 8b-qkv 8192
  run fp8-70bo-64 fp8 70b-o 64
fi
echo "ncu:$res (reports in logs/ncu-*.txt)"
