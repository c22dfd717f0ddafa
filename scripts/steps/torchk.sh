#!/bin/bash
# torchk.sh — step "torchk" (issue 4, session 18): bench/torch_kernels.py, the kernels torch launches
# (cuBLASLt's tile in the name) per shape and M (TORCHK_M, default 64..256 around the 128 -> 129 step).
# Env from device_session.sh: L, LEFT_S. Last line: summary.
set -u
: "${L:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
timeout -k 5 "$(cap 120)" python3 bench/torch_kernels.py --m "${TORCHK_M:-64,65,128,129,144,160,192,256}" \
  >"$L/torchk.txt" 2>&1
echo "torchk: exit $? $(grep -c ' us ' "$L/torchk.txt") rows"
