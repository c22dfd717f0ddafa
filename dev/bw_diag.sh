#!/bin/bash
# bw_diag.sh — development: the block-scaled kernel's launch records and eager times (dev/bw_probe.py) and Nsight
# Compute profiles of a few cases, after scripts/device.sh's build step (BUILD, OUT as there). Logs to $OUT/bw-diag/.
set -u
cd "$(dirname "$0")/.."
D=$OUT/bw-diag
mkdir -p "$D"
export PYTHONPATH=$PWD/python W8A8_LIBRARY=$PWD/${BUILD:-build-dev}/lib/libw8a8.so
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout ${BW_PROBE_S:-120} python3 dev/bw_probe.py ${BW_CASES:-32768,512,128 32768,512,256 32768,512,4096 24576,1536,4096 \
  7168,16384,4096 7168,16384,128 4096,7168,64 4096,7168,16} >"$D/probe.txt" 2>&1
for c in ${BW_NCU-32768,512,4096 32768,512,128 4096,7168,64}; do
  timeout 90 "$NCU" --kernel-name regex:'sm90_bw|sm90_gemm' --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section SourceCounters --section LaunchStats python3 dev/bw_probe.py --one "$c" >"$D/ncu-${c//,/x}.txt" 2>&1
done
echo "bw_diag: $(grep -c 'N K M' "$D/probe.txt") probe rows; ncu files: $(ls "$D"/ncu-* 2>/dev/null | wc -l)"
