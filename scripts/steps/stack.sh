#!/bin/bash
# stack.sh — step "stack" of scripts/device_session.sh (STEPS="build stack"; built with
# `make lib tests cli`): the fused SiLU-and-mul quantizer's GPU tests, then the Llama-3.1-70B-FP8
# layer-stack benchmark `w8a8 tp-stack --local W` (issue 6).
#   NGPU >= 2: W = NGPU (at most 8) real GPU ranks, tokens 1024,2048,4096,8192, 2 layers;
#   NGPU == 1: W = 2 ranks EMULATED on the one GPU, tokens 1024,4096 (mechanism only, not TP timings).
# Env from device_session.sh: OUT, L (log dir, packed into logs.tgz), BUILD, T (the test binary),
# NGPU, MPIRUN, LEFT_S (seconds this step may take). JSON lines: $OUT/tp-stack-w$NGPU.jsonl.
# Everything runs under `timeout` within LEFT_S; about 60-120 s in all.
set -u
: "${OUT:?}" "${L:?}" "${BUILD:?}" "${T:?}"
NGPU=${NGPU:-1}
LEFT_S=${LEFT_S:-150}
. "$(dirname "$0")/common.sh"

W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap 60)" stdbuf -oL "$T" act_ >"$L/stack-act-tests.txt" 2>&1
arc=$?
echo "act_ tests: exit $arc $([ $arc -ge 124 ] && echo '(TIMEOUT)') $(grep -E '^[0-9]+ passed' "$L/stack-act-tests.txt" | tail -n 1)"
grep -E 'FAIL|SKIP|cases' "$L/stack-act-tests.txt" | head -n 16

if [ "$NGPU" -ge 2 ]; then
  W=$NGPU
  [ "$W" -gt 8 ] && W=8
  TOK=1024,2048,4096,8192
else
  W=2
  TOK=1024,4096
fi
LOG="$L/tp-stack-w$W.txt"
timeout -k 5 "$(cap 110)" stdbuf -oL "$BUILD/bin/w8a8" tp-stack --local "$W" --tokens "$TOK" --layers 2 -n 10 -w 2 \
  -o "$OUT/tp-stack-w$NGPU.jsonl" >"$LOG" 2>&1
rc=$?
echo "tp-stack --local $W (tokens $TOK): exit $rc $([ $rc -ge 124 ] && echo '(TIMEOUT)')"
grep -E '^# (EMULATED|summary|  )' "$LOG"
grep -vE '^#' "$LOG" | grep -iE 'error|fail' | head -n 8
# the last line is what device_session.sh's summary shows
echo "stack: act tests $(grep -E '^[0-9]+ passed' "$L/stack-act-tests.txt" | tail -n 1); tp-stack exit $rc; $(grep -E '^# summary' "$LOG" | tail -n 1 | cut -c 3-)"
[ "$arc" -eq 0 ] && [ "$rc" -eq 0 ]
