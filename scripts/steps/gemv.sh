#!/bin/bash
# gemv.sh — step "gemv" (the CUDA-core kernel for the fewest tokens, src/cuda/gemv.cu): the gemv tests first
# (cuda_gemv_matches_reference), then bench/torch_compare.py at M = 1, 2, 4, 8 with W8A8_GEMV=${GEMV_ON:-2}
# (2, anything but 0 or 1: the default rule; 1: wherever it takes) and with W8A8_GEMV=0, one after the
# other in this step (since session 21 the default rule leaves fp8 out: export W8A8_GEMV_FP8=1 in the
# device_session call to time fp8's one token on this kernel too). Writes
# $OUT/h200-torch-compare-gemv{,-off}.{md,jsonl}. Env: OUT, L, BUILD, LEFT_S.
set -u
: "${OUT:?}" "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-150}
. "$(dirname "$0")/common.sh"
timeout -k 5 "$(cap 60)" "$BUILD/bin/w8a8_tests" cuda_gemv >"$L/gemv-tests.txt" 2>&1
res="tests: exit $? $(grep -E '^[0-9]+ passed' "$L/gemv-tests.txt" | tail -n 1)"
left=$((LEFT_S - ($(date +%s) - T0)))
tb=$(((left - 60) / 2)); [ "$tb" -gt 60 ] && tb=60
[ "${GEMV_ON:-2}" = 0 ] && { echo "gemv: GEMV_ON=0 would compare off with off"; exit 1; }
if [ "$tb" -ge 15 ]; then
  for v in "${GEMV_ON:-2}" 0; do
    suf=$([ "$v" != 0 ] && echo gemv || echo gemv-off)
    W8A8_GEMV=$v W8A8_LIBRARY=$PWD/$BUILD/lib/libw8a8.so PYTHONPATH=python timeout -k 5 "$(cap $((tb + 20)))" python3 -u \
      bench/torch_compare.py --budget-s "$tb" --m 1,2,4,8 --no-cliffs -o "$OUT/h200-torch-compare-$suf" >"$L/$suf.txt" 2>&1
    res="$res; $suf: exit $?"
  done
fi
python3 bench/ab_compare.py "$OUT/h200-torch-compare-gemv-off.jsonl" "$OUT/h200-torch-compare-gemv.jsonl" --impls all \
  >"$L/gemv-ab.txt" 2>&1 && grep -E "^w8a8" "$L/gemv-ab.txt" | head -n 4
echo "gemv: $res"
