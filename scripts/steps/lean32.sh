#!/bin/bash
# lean32.sh — step "lean32" (issue 4 / 6, session 14): fp32 outputs through the lean epilogue's TMA
# stores (W8A8_SM90_STAGED32, default 1) against the direct epilogue they replace (=0).
#   1. tests: sm90_lean_fp32_matches_direct (bits, and that the fp32 staged path engaged), then
#      LEAN32_TESTS (default: the every-config suites, whose rotation has fp8 fp32 cases on it);
#   2. w8a8 bench --out-dtype fp32 (no baselines) at LEAN32_M (1024,2048,8192) on both suites, both
#      dtypes, STAGED32 = 0 1 1 0 (ABBA), each to $L/lean32-bench-VAL-rN.{txt,jsonl}; bench/ab_compare.py of
#      each round to $L/lean32-ab-rN.txt;
#   3. with 2+ GPUs: tp-bench --local NGPU --shape 70b-o and 70b-down at LEAN32_TPM (1024,8192) tokens,
#      STAGED32 = 0 1 1 0 (common.sh's tp_env_ab; rows in lean32-tp-fused.txt): the reduce-scatter's GEMMs
#      write fp32 partials (gemm_us and fused_us).
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap 150)" "$BUILD/bin/w8a8_tests" sm90_lean_fp32_matches_direct \
  ${LEAN32_TESTS-sm90_fp8_every_config sm90_int8_every_config} >"$L/lean32-tests.txt" 2>&1
res=" tests [exit $? $(grep -E '^[0-9]+ passed' "$L/lean32-tests.txt" | tail -n 1)]"
r=0
for v in 0 1 1 0; do
  r=$((r + 1))
  W8A8_SM90_STAGED32=$v timeout -k 5 "$(cap 90)" "$BUILD/bin/w8a8" bench --gpu --no-baselines --out-dtype fp32 -q \
    --suite llama8b,llama70b-tp4 -m "${LEAN32_M:-1024,2048,8192}" -o "$L/lean32-bench-$v-r$r.jsonl" \
    >"$L/lean32-bench-$v-r$r.txt" 2>&1
  res="$res bench $v-r$r: exit $?;"
done
python3 bench/ab_compare.py "$L/lean32-bench-0-r1.jsonl" "$L/lean32-bench-1-r2.jsonl" --impls all >"$L/lean32-ab-r1.txt" 2>&1
python3 bench/ab_compare.py "$L/lean32-bench-0-r4.jsonl" "$L/lean32-bench-1-r3.jsonl" --impls all >"$L/lean32-ab-r2.txt" 2>&1
res="$res ab r1: $(grep -E '^w8a8' "$L/lean32-ab-r1.txt" | tr '\n' ' ') r2: $(grep -E '^w8a8' "$L/lean32-ab-r2.txt" | tr '\n' ' ')"
if [ "${NGPU:-1}" -ge 2 ]; then
  TPAB_SHAPES="70b-o 70b-down" TPAB_M="${LEAN32_TPM:-1024,8192}" TPAB_N=9 \
    tp_env_ab lean32-tp W8A8_SM90_STAGED32 "0 1" rs "$NGPU"  # rows in $L/lean32-tp-fused.txt
fi
echo "lean32:$res"
