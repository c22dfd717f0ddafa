#!/bin/bash
# ab.sh — step "ab": this tree against another (AB_TREE, default .dev/base: `git archive REF | tar -x -C
# .dev/base`, carried to the machine), built side by side and timed interleaved in this one call
# (base, new, base, new), so a change is judged against the same GPU's same minute:
#   1. bench/torch_compare.py with our implementations only (AB_IMPLS, default w8a8_cuda_fp8,w8a8_cuda_int8;
#      AB_M, AB_SUITES), each pass to $L/ab-{base,new}-rN.jsonl, then bench/ab_compare.py's table of
#      per-row and geomean ratios -> $OUT/ab-$GPU.md
#   2. AB_SM90_DEV (optional): ';'-separated bench/sm90_dev argument lists, both trees' sm90_dev in turn.
# AB_ENV="VAR=VALUE ..." instead: one tree, the same passes without (base) and with (new) those switches.
. "$(dirname "$0")/lib.sh"
NEWLIB=$PWD/$BUILD/lib/libw8a8.so
if [ -n "${AB_ENV:-}" ]; then
  B="this tree without $AB_ENV"
  BASELIB=$NEWLIB
else
  B=${AB_TREE:-.dev/base}
  [ -d "$B/src" ] || { echo "ab: no tree at $B (carry it)"; exit 1; }
  (cd "$B" && timeout -k 5 "$(cap 300)" make BUILD=build-ab CUDA_ARCHS=90a -j"$(nproc)" lib) >"$L/ab-build.txt" 2>&1 ||
    { echo "ab: the base tree did not build (ab-build.txt)"; exit 1; }
  BASELIB=$PWD/$B/build-ab/lib/libw8a8.so
fi
IMPLS=${AB_IMPLS:-w8a8_cuda_fp8,w8a8_cuda_int8}
args="--impls $IMPLS --budget-s ${AB_BUDGET_S:-60} ${AB_M:+--m $AB_M} ${AB_SUITES:+--suites $AB_SUITES}"
for r in 1 2; do
  for side in base new; do
    lib=$NEWLIB env=""; [ $side = base ] && lib=$BASELIB || env=${AB_ENV:-}
    env $env W8A8_LIBRARY=$lib timeout -k 5 "$(cap 120)" python3 bench/torch_compare.py $args -o "$L/ab-$side-r$r" \
      >"$L/ab-$side-r$r.txt" 2>&1 || echo "ab: $side pass $r exit $?"
  done
done
cmd="bash scripts/device.sh with STEPS=ab, AB_TREE=$B; torch_compare.py $args"
{ header "A/B: this tree (new) against $B (base), interleaved base/new/base/new in one call" "$cmd"; echo;
  python3 bench/ab_compare.py "$L"/ab-base-r*.jsonl -- "$L"/ab-new-r*.jsonl; } >"$OUT/ab-$GPU.md"
if [ -n "${AB_SM90_DEV:-}" ] && [ -z "${AB_ENV:-}" ]; then
  build_bench bench/sm90_dev.c "$BUILD/bin/sm90_dev" >/dev/null 2>&1
  (cd "$B" && BUILD=build-ab build_bench bench/sm90_dev.c build-ab/sm90_dev) >/dev/null 2>&1
  IFS=';' read -r -a runs <<<"$AB_SM90_DEV"
  for a in "${runs[@]}"; do
    for side in base new base new; do
      d=$BUILD/bin/sm90_dev; [ $side = base ] && d=$B/build-ab/sm90_dev
      echo "# $side: sm90_dev $a"; timeout -k 5 "$(cap 90)" "$d" $a
    done
  done >"$OUT/ab-sm90-dev-$GPU.txt" 2>&1
fi
echo "ab: $(grep -iE '^geomean' "$OUT/ab-$GPU.md" | tr '\n' ' ')"
