#!/bin/bash
# tpscales.sh — step "tpscales" (issue 6, session 20): the scale push (W8A8_TP_AG_SCALES=1 when the
# communicators are created: each rank's all-gather pack writes its scales into every peer's gathered buffer,
# and nobody copies a peer's scales; tp_gpu.c ag_scales_push) against the copies, on real GPU ranks.
#   1. its tests and the pack kernel's (tp_gpu_pack_kernel, tp_gpu_ag_one_gemm*, tp_gpu_ag_scales*,
#      tp_gpu_graph_capture*: the default path's pack kernel changed too), cap 150 s;
#   2. with 2+ GPUs: tp-bench --local NGPU, 70b-qkv and 70b-gate_up all-gathers at TPAB_M tokens, SCALES
#      TPSCALES_VALS ("0 1") in two rounds (the second reversed), once per push mode in TPSCALES_PUSH ("0 2"),
#      with W8A8_TP_TRACE=1 (the L mark: the GEMM's launch reached);
#   3. tp-stack --local NGPU at 1024..8192 tokens with SCALES TPSCALES_STACK_VALS ("0 1 1 0").
# Prediction (session 20): L 19-32 -> < 8 us after the fork; ag_qkv int8 1024 120-127 -> ~105 us, 8192
# 503-508 -> ~485. TPSCALES_AB=0: the tests only. TPSCALES_STACK_VALS="": no stacks. TPSCALES_GRAPH=1: the A/B
# again under tp-bench --graph (captured replays) with TPSCALES_GVALS ("1 2"; 2 = captured calls push too).
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
tp_tests tpscales 150 tp_gpu_pack_kernel tp_gpu_ag_one_gemm tp_gpu_ag_scales tp_gpu_graph_capture
if [ "${TPSCALES_AB:-1}" = 0 ]; then
  echo "tpscales:$res (TPSCALES_AB=0: no A/B)"
  exit 0
fi
for pm in ${TPSCALES_PUSH:-0 2}; do
  TPAB_M=${TPAB_M:-1024,8192} TPAB_ENV="W8A8_TP_TRACE=1 W8A8_TP_AG_PUSH=$pm" TPAB_SHAPES="70b-qkv 70b-gate_up" \
    tp_env_ab "tpscales-p$pm" W8A8_TP_AG_SCALES "${TPSCALES_VALS:-0 1}" ag "$W"
done
sv=${TPSCALES_STACK_VALS-0 1 1 0}
[ -n "$sv" ] && tp_stack_env tpscales W8A8_TP_AG_SCALES "$sv" "$W"
# TPSCALES_GRAPH=1 (session 21): the same A/B as replays of one captured graph (tp-bench --graph), values
# TPSCALES_GVALS (default "1 2": captured calls copy the scales / push them, W8A8_TP_AG_SCALES=2)
if [ "${TPSCALES_GRAPH:-0}" = 1 ]; then
  TPAB_ARGS=--graph TPAB_M=${TPAB_M:-1024,8192} TPAB_ENV="W8A8_TP_TRACE=0" TPAB_SHAPES="70b-qkv 70b-gate_up" \
    tp_env_ab "tpscales-g" W8A8_TP_AG_SCALES "${TPSCALES_GVALS:-1 2}" ag "$W"
fi
echo "tpscales:$res"
