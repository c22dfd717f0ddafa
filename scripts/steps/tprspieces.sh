#!/bin/bash
# tprspieces.sh — step "tprspieces" (issue 6; session 12, run in session 13): the fused reduce-scatter with
# each peer's rows computed and pushed in smaller pieces (W8A8_TP_RS_MIN_ROWS: a piece's least rows; unset,
# since session 13, 256 where the rank's K <= 4096 and 1024 above; at 1024 tokens on 2 GPUs a rank's chunk is
# 512 rows, which at 1024 was one piece whose push waited for the whole chunk's GEMM).
#   1. the tp_gpu tests of the pieces (tp_gpu_rs_small_pieces_w2 / _w3: pieces of >= 16 rows, counted);
#   2. with 2+ GPUs only: tp-bench --local NGPU at 1024 and 2048 tokens with W8A8_TP_RS_MIN_ROWS = 1024,
#      256, 128, two rounds (the second in reverse order; TPRSPIECES_VALUES overrides the list).
# Session 13 (h200x2-tp-rspieces-2026-11-30.txt): 70b-o rs at 1024 tokens 138 -> 100-102 us with 256
# (predicted ~115), 70b-down (K = 14336) fp8 lost 7-13%: hence the rule on K.
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
tp_tests tprspieces 120 tp_gpu_rs_small_pieces
tp_env_ab tprspieces W8A8_TP_RS_MIN_ROWS "${TPRSPIECES_VALUES:-1024 256 128}" rs "$W"
echo "tprspieces:$res"
