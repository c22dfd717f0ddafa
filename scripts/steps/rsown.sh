#!/bin/bash
# rsown.sh — step "rsown" (issue 6, session 14): the reduce-scatter's own rows in one GEMM launch
# (W8A8_TP_RS_OWN_WHOLE, default 1) against the own rows in pieces like the peers' (=0).
#   1. tests: RSOWN_TESTS (default: the RS sweeps, small pieces (both ways), partials_out, trace, graph
#      capture, back_to_back, reduce_kernels) — on 2+ GPUs the ranks are real GPUs, on one GPU emulated;
#   2. with 2+ GPUs: W8A8_TP_TRACE=1 tp-bench --local NGPU --shape RSOWN_SHAPES (70b-o 70b-down) at RSOWN_M
#      (1024,8192) tokens, W8A8_TP_RS_OWN_WHOLE = 0 1 1 0 (common.sh's tp_env_ab), each to
#      $L/rsown-tp-VAL-rN.txt; the rs rows and their '# trace' lines (every rank) in $L/rsown-tp-fused.txt.
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap 200)" "$BUILD/bin/w8a8_tests" ${RSOWN_TESTS-tp_gpu_rs_w \
  tp_gpu_rs_partials_out tp_gpu_trace tp_gpu_graph_capture tp_gpu_back_to_back tp_gpu_rs_reduce_kernels \
  tp_gpu_rs_small_pieces} >"$L/rsown-tests.txt" 2>&1
res=" tests [exit $? $(grep -E '^[0-9]+ passed' "$L/rsown-tests.txt" | tail -n 1)]"
grep -E '^\[ FAIL|CHECK|failed:' "$L/rsown-tests.txt" | head -n 5 >"$L/rsown-fails.txt"
if [ "${NGPU:-1}" -ge 2 ]; then
  TPAB_SHAPES="${RSOWN_SHAPES:-70b-o 70b-down}" TPAB_M="${RSOWN_M:-1024,8192}" TPAB_N=9 TPAB_ENV=W8A8_TP_TRACE=1 \
    tp_env_ab rsown-tp W8A8_TP_RS_OWN_WHOLE "0 1" rs "$NGPU"  # rows and traces in $L/rsown-tp-fused.txt
fi
echo "rsown:$res"
