#!/bin/bash
# profile.sh — step "profile": Nsight Compute profiles of the Hopper kernel through bench/sm90_dev, one per
# entry of NCU_RUNS ("name=sm90_dev arguments;..."; default: fp8 and int8 8b-qkv at 8192 tokens and fp8
# 70b-o-tp4 at 64), the launch after three warm-ups, the sections that say where the time goes -> $L/ncu-NAME.txt.
. "$(dirname "$0")/lib.sh"
DEV=$BUILD/bin/sm90_dev
[ -x "$DEV" ] || build_bench bench/sm90_dev.c "$DEV" >"$L/profile-build.txt" 2>&1 || { echo "profile: no sm90_dev"; exit 1; }
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
RUNS=${NCU_RUNS:-"fp8-8192=-d fp8 -s 8b-qkv -m 8192;int8-8192=-d int8 -s 8b-qkv -m 8192;fp8-64=-d fp8 -s 70b-o-tp4 -m 64"}
res=""
IFS=';' read -r -a runs <<<"$RUNS"
for r in "${runs[@]}"; do
  name=${r%%=*}
  timeout -k 5 "$(cap 60)" "$NCU" --kernel-name regex:'sm90_(gemm|skinny)_kernel' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
    "$DEV" ${r#*=} >"$L/ncu-$name.txt" 2>&1
  res="$res $name:exit$?"
done
echo "profile:$res"
