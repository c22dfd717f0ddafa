#!/bin/bash
# tppieces.sh — step "tppieces" (issue 6; session 10, run in session 11: no gain, default 1): the one-GEMM all-gather with each
# peer's rows (on another GPU) pulled in pieces of whole token tiles, one ready flag each
# (W8A8_TP_AG_PIECES, default 1), against the whole chunk.
#   1. the tp_gpu tests (tp_gpu_ag_one_gemm_pieces_w2 / _w4 cut the peers' rows into 3 pieces on 2+ GPUs);
#   2. with 2+ GPUs only: tp-bench --local NGPU at 1024 and 2048 tokens with W8A8_TP_AG_PIECES = 1, 2, 4,
#      two rounds, the second in reverse order (TPPIECES_VALUES overrides the list).
# Prediction: 70b-qkv ag at 1024 tokens 105 -> ~90 us (the peer half of the tiles starts when its first
# piece lands instead of after the whole 4 MB under the GEMM's load).
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
tp_tests tppieces 200 tp_gpu tp_ag_pieces
tp_env_ab tppieces W8A8_TP_AG_PIECES "${TPPIECES_VALUES:-1 2 4}" ag "$W"
echo "tppieces:$res"
