#!/bin/bash
# tppush.sh — step "tppush" (issue 6, session 17): the push all-gather (W8A8_TP_AG_PUSH=1, tp_gpu.c's
# ag_push: each rank's side stream copies its packed rows into the peers and sets their ready flags)
# against the pull (default), on real GPU ranks (--local NGPU).
#   1. the one-GEMM all-gather tests (pull, pieces, no-pack, push, the push transitions) and tp_gpu_trace;
#   2. with 2+ GPUs: tp-bench --local NGPU, the all-gather shapes at TPAB_M tokens (1024..8192), PUSH
#      TPPUSH_VALS in two rounds (the second reversed), with W8A8_TP_TRACE=1 (every rank's marks: with push,
#      W = the push's start, C = its flag written into the peer, so rank 1's C is the push INTO rank 0);
#   3. tp-stack --local NGPU at 1024..8192 tokens, PUSH TPPUSH_STACK_VALS (its ag_qkv / ag_gate_up columns).
# Prediction (session 17): ag_qkv at 1024 tokens 124 -> ~110 us (the peer rows land ~20 us after the
# fork instead of 37, before the GEMM's second wave); little at 8192 (32 MiB: 100 us pulled, 96 pushed).
# Session 19: push mode 2 (the push after the compute stream's pre-launch work; tp_gpu.c ag_push_env) and the
# trace's L mark (the one GEMM's launch reached): TPPUSH_VALS (the A/B's values, default "0 1 2"),
# TPPUSH_STACK_VALS (the stacks', "0 2 2 0"). Prediction (helper-47's H1): mode 2's L well before mode 1's
# (mode 1: L ~ C, the push's end), ag_qkv int8 8192 ~490 us or less (mode 1 ~580), 1024 ~110-120 us.
# TPPUSH_AB=0: the tests only. Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
tp_tests tppush 150 tp_gpu_ag_one_gemm tp_gpu_ag_push tp_gpu_trace
if [ "${TPPUSH_AB:-1}" = 0 ]; then  # the tests only
  echo "tppush:$res (TPPUSH_AB=0: no A/B)"
  exit 0
fi
TPAB_M=${TPAB_M:-1024,2048,4096,8192} TPAB_ENV="W8A8_TP_TRACE=1" TPAB_SHAPES="70b-qkv 70b-gate_up" \
  tp_env_ab tppush W8A8_TP_AG_PUSH "${TPPUSH_VALS:-0 1 2}" ag "$W"
tp_stack_env tppush W8A8_TP_AG_PUSH "${TPPUSH_STACK_VALS:-0 2 2 0}" "$W"
echo "tppush:$res"
