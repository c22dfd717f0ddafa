#!/bin/bash
# agpack.sh — step "agpack" (issue 6, session 15): the all-gather's own-row pack as one kernel (tp_pack:
# rows, scales and ready flags; W8A8_TP_AG_PACK default 1) against the copy engine's 2D copy + expand +
# two memsets (=0). Session 15's trace put ~45 us of 70b-qkv's fused 530 us at 8192 tokens between the
# call's entry (E) and the packed rows (K).
#   1. tests: tp_gpu_pack_kernel and the all-gather sweeps / one-GEMM cases / trace (AGPACK_TESTS);
#   2. with 2+ GPUs: W8A8_TP_TRACE=1 tp-bench --local NGPU --shape AGPACK_SHAPES (70b-qkv 70b-gate_up) at
#      AGPACK_M (1024,8192) tokens, W8A8_TP_AG_PACK = 0 1 1 0 (common.sh's tp_env_ab); the ag rows and their
#      '# trace' lines of every rank (E and K before the fork F) in $L/agpack-tp-fused.txt.
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap 200)" "$BUILD/bin/w8a8_tests" ${AGPACK_TESTS:-tp_gpu_pack_kernel tp_gpu_ag_ \
  tp_gpu_trace tp_gpu_graph_capture tp_gpu_back_to_back} >"$L/agpack-tests.txt" 2>&1
res=" tests [exit $? $(grep -E '^[0-9]+ passed' "$L/agpack-tests.txt" | tail -n 1)]"
if [ "${NGPU:-1}" -ge 2 ]; then
  TPAB_SHAPES="${AGPACK_SHAPES:-70b-qkv 70b-gate_up}" TPAB_M="${AGPACK_M:-1024,8192}" TPAB_N=9 TPAB_ENV=W8A8_TP_TRACE=1 \
    tp_env_ab agpack-tp W8A8_TP_AG_PACK "0 1" ag "$NGPU"
fi
echo "agpack:$res"
