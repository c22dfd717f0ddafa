#!/bin/bash
# tptrace.sh — step "tptrace" (issue 6; session 13, first run in session 14): where a fused TP op's time goes.
#   1. the test tp_gpu_trace (W8A8_TP_TRACE's marks on two emulated or real ranks);
#   2. with 2+ GPUs only: W8A8_TP_TRACE=1 w8a8 tp-bench --local NGPU at TPTRACE_M tokens (1024,8192) on every
#      shape: each row is preceded by '# trace' lines, the last fused call's marks per rank in microseconds
#      from its fork (E the call reached the stream and AG's K own rows packed: before the fork,
#      negative; RS: G a peer piece's GEMM done, P its push done, O an own GEMM done, A the peers'
#      partials in, R reduced; AG: C a chunk copied, G a GEMM done, J joined). Sessions 14-15's readings are
#      in NOTES (TP section): E and K (first run in session 15) put ~45 us of AG's ~55 before its fork at
#      8192 tokens in the own rows' pack copy; the tp_pack kernel has it at ~21.
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
tp_tests tptrace 60 tp_gpu_trace
W8A8_TP_TRACE=1 timeout -k 5 "$(cap 150)" "$BUILD/bin/w8a8" tp-bench --local "$W" -m "${TPTRACE_M:-1024,8192}" -n 9 -w 2 \
  >"$L/tptrace-bench.txt" 2>&1
res="$res bench: exit $? ($(grep -c '^# trace' "$L/tptrace-bench.txt") trace lines)"
echo "tptrace:$res"
