#!/bin/bash
# common.sh — sourced by the step scripts (after they set LEFT_S): T0, `cap N` (the seconds the next
# command may take: at most N, never past LEFT_S less a margin for the kill, at least 5) and
# `build_bench SRC LIB OUT`, `build_sm90_dev LIB OUT` (bench/sm90_dev linked against a static libw8a8.a), `need_sm90_dev STEP`,
# `tp_tests STEP SECONDS FILTER...`, `tp_env_ab STEP VAR "VALUES" OPS W` (an interleaved A/B of one
# library switch through tp-bench) and `tp_stack_env STEP VAR "VALUES" W` (tp-stack once per value).
T0=$(date +%s)
cap() {
  local t=$1 l=$((LEFT_S - ($(date +%s) - T0) - 8))
  [ "$t" -gt "$l" ] && t=$l
  [ "$t" -lt 5 ] && t=5
  echo "$t"
}
# build_bench SRC LIB OUT: a development bench (bench/*.c) linked against a static libw8a8.a
build_bench() {
  gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/local/cuda/include "$1" "$2" \
    -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lm -fopenmp -lstdc++ \
    $(pkg-config --libs nccl 2>/dev/null || echo -lnccl) $(mpicc --showme:link 2>/dev/null) -o "$3"
}
build_sm90_dev() { build_bench bench/sm90_dev.c "$1" "$2"; }
# need_sm90_dev STEP: DEV = $BUILD/bin/sm90_dev, built against this call's $BUILD/lib/libw8a8.a (always:
# a warm machine keeps an older one), log in $L/STEP-build.txt; if it does not build, the step ends
# with that as its summary line.
need_sm90_dev() {
  DEV="$BUILD/bin/sm90_dev"
  build_sm90_dev "$BUILD/lib/libw8a8.a" "$DEV" >"$L/$1-build.txt" 2>&1 || {
    echo "$1: sm90_dev did not build (see $1-build.txt)"
    exit 1
  }
}
# tp_tests STEP SECONDS FILTER...: w8a8_tests FILTER... (at most SECONDS) to $L/STEP-tests.txt; sets res
# (its exit and count) and W (NGPU); with fewer than 2 GPUs the step ends there with res as its summary.
tp_tests() {
  local step=$1 secs=$2
  shift 2
  W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap "$secs")" "$BUILD/bin/w8a8_tests" "$@" >"$L/$step-tests.txt" 2>&1
  res="tests [exit $? $(grep -E '^[0-9]+ passed' "$L/$step-tests.txt" | tail -n 1)]"
  W=${NGPU:-1}
  if [ "$W" -lt 2 ]; then
    echo "$step:$res tp-bench skipped ($W GPU)"
    exit 0
  fi
}
# tp_env_ab STEP VAR "VALUES" OPS W: tp-bench --local W at 1024 and 2048 tokens once per value of the
# environment variable VAR, two rounds (the second in reverse order), each run to $L/STEP-VALUE-rN.txt (and
# .jsonl); then the rows of the ops matching OPS (a regex: ag, rs, ag|rs), with every rank's '# trace' lines,
# of every run in $L/STEP-fused.txt. Appends "VALUE-rN: exit E;" per run to $res. Optional env: TPAB_M
# (tokens, default 1024,2048), TPAB_N (timed iterations, 18), TPAB_SHAPES (one run per --shape, appended to
# the same .txt, each its own .jsonl; default every shape in one run), TPAB_ENV (more VAR=VALUE for the
# runs, e.g. W8A8_TP_TRACE=1), TPAB_ARGS (more tp-bench arguments, e.g. --graph).
tp_env_ab() {
  local step=$1 var=$2 vals=$3 ops=$4 w=$5 round v order f sh
  for round in 1 2; do
    order=$vals
    [ "$round" = 2 ] && order=$(echo "$vals" | tr ' ' '\n' | tac | tr '\n' ' ')
    for v in $order; do
      : >"$L/$step-$v-r$round.txt"
      for sh in ${TPAB_SHAPES:-all}; do
        local sa=() js="$L/$step-$v-r$round.jsonl"
        [ "$sh" != all ] && sa=(--shape "$sh") && js="$L/$step-$v-r$round-$sh.jsonl"
        env "$var=$v" ${TPAB_ENV:-} timeout -k 5 "$(cap 90)" "$BUILD/bin/w8a8" tp-bench --local "$w" "${sa[@]}" \
          -m "${TPAB_M:-1024,2048}" -n "${TPAB_N:-18}" -w 2 ${TPAB_ARGS:-} -o "$js" >>"$L/$step-$v-r$round.txt" 2>&1
        res="$res $step/$v-r$round${sa[1]:+ $sh}: exit $?;"
      done
    done
  done
  for f in "$L/$step"-*-r[12].txt; do
    echo "== $(basename "$f")"
    grep -E "^[0-9a-z_-]+ +($ops) |^# (trace|host) +[0-9a-z_-]+ ($ops) " "$f"
  done >"$L/$step-fused.txt" 2>&1
}
# tp_stack_env STEP VAR "VALUES" W: tp-stack --local W at 1024..8192 tokens once per value of the environment
# variable VAR, in the order given, all to $L/STEP-stack.txt (each run after a "== VAR=value" line); the
# fused rows and per-op ratios of every run in $L/STEP-stack-fused.txt. Appends "stackVALUE: exit E;" to $res.
tp_stack_env() {
  local step=$1 var=$2 vals=$3 w=$4 v
  for v in $vals; do
    echo "== $var=$v" >>"$L/$step-stack.txt"
    env "$var=$v" timeout -k 5 "$(cap 60)" "$BUILD/bin/w8a8" tp-stack --local "$w" --tokens 1024,2048,4096,8192 \
      --layers 2 -n 10 -w 2 >>"$L/$step-stack.txt" 2>&1
    res="$res stack$v: exit $?;"
  done
  grep -E '^== |^ +[0-9]+ +[0-9]+ fused|fused op /' "$L/$step-stack.txt" >"$L/$step-stack-fused.txt"
}
