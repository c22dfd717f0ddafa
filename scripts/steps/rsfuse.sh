#!/bin/bash
# rsfuse.sh — step "rsfuse" (issue 6, session 14): the fused reduce-scatter's sum in the own rows' GEMM
# epilogue (W8A8_TP_RS_FUSE, default 1) against the separate reduction (=0).
#   1. tests: RSFUSE_TESTS (default: tp_gpu_rs_fused_sum, the RS sweeps, partials_out, trace, graph
#      capture, back_to_back, reduce_kernels) — on 2+ GPUs the ranks are real GPUs, on one GPU emulated;
#   2. with 2+ GPUs: W8A8_TP_TRACE=1 tp-bench --local NGPU --shape 70b-o and 70b-down at RSFUSE_M
#      (1024,8192) tokens, W8A8_TP_RS_FUSE = 0 1 1 0 (ABBA), each to $L/rsfuse-tp-VAL-rN.txt; the rs rows
#      and their '# trace' lines of every run in $L/rsfuse-tp-rs.txt.
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap 200)" "$BUILD/bin/w8a8_tests" ${RSFUSE_TESTS-tp_gpu_rs_fused_sum tp_gpu_rs_w \
  tp_gpu_rs_partials_out tp_gpu_trace tp_gpu_graph_capture tp_gpu_back_to_back tp_gpu_rs_reduce_kernels \
  tp_gpu_rs_small_pieces} >"$L/rsfuse-tests.txt" 2>&1
res=" tests [exit $? $(grep -E '^[0-9]+ passed' "$L/rsfuse-tests.txt" | tail -n 1)]"
grep -E '^\[ FAIL|CHECK|failed:' "$L/rsfuse-tests.txt" | head -n 5 >"$L/rsfuse-fails.txt"
if [ "${NGPU:-1}" -ge 2 ]; then
  r=0
  for v in 0 1 1 0; do
    r=$((r + 1))
    for sh in 70b-o 70b-down; do
      W8A8_TP_TRACE=1 W8A8_TP_RS_FUSE=$v timeout -k 5 "$(cap 60)" "$BUILD/bin/w8a8" tp-bench --local "$NGPU" \
        --shape $sh -m "${RSFUSE_M:-1024,8192}" -n 9 -w 2 >>"$L/rsfuse-tp-$v-r$r.txt" 2>&1
      res="$res tp $sh $v-r$r: exit $?;"
    done
  done
  for f in "$L"/rsfuse-tp-*-r[1-4].txt; do
    echo "== $(basename "$f")"
    grep -E "^70b-[a-z_]+ +rs |^# trace 70b-[a-z_]+ rs .*rank 0" "$f"
  done >"$L/rsfuse-tp-rs.txt" 2>&1
fi
echo "rsfuse:$res"
