#!/bin/bash
# lib.sh — sourced by every step: `cap N` (seconds the next command may take: at most N, never past the
# step's LEFT_S), `run_tests NAME SECONDS ARGS...` (the test binary, its log in $L/NAME.txt, a summary
# line), `build_bench SRC OUT` (a bench/*.c tool linked against this build's static library),
# `header TITLE COMMAND` (the first lines of a results file: what, where, when, which tree, how) and
# `headed FILE TITLE COMMAND` (those lines put above a results file a script wrote).
set -u
: "${OUT:?}" "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
NGPU=${NGPU:-1}
GPU=${GPU:-gpu}
TREE=${TREE:-unknown}
STEP_T0=$(date +%s)
TBIN="$BUILD/bin/w8a8_tests"
MPIRUN="mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS"
export W8A8_LIBRARY=$PWD/$BUILD/lib/libw8a8.so PYTHONPATH=$PWD/python
cap() {
  local t=$1 l=$((LEFT_S - ($(date +%s) - STEP_T0) - 5))
  [ "$t" -gt "$l" ] && t=$l
  [ "$t" -lt 5 ] && t=5
  echo "$t"
}
run_tests() {
  local name=$1 t=$2
  shift 2
  W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap "$t")" stdbuf -oL "$TBIN" "$@" >"$L/$name.txt" 2>&1
  local rc=$?
  echo "$name: exit $rc $([ $rc -ge 124 ] && echo '(TIMEOUT)') $(grep -E '^[0-9]+ passed' "$L/$name.txt" | tail -n 1)"
  grep -E 'FAIL' "$L/$name.txt" | head -n 12
  return $rc
}
build_bench() {
  gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/local/cuda/include "$1" "$BUILD/lib/libw8a8.a" \
    -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lm -fopenmp -lstdc++ \
    $(pkg-config --libs nccl 2>/dev/null || echo -lnccl) $(mpicc --showme:link 2>/dev/null) -o "$2"
}
header() {
  echo "# $1"
  echo "# machine: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | head -n 1) x $NGPU; $(nproc) CPU cores"
  echo "# date: $(date -u +%F); tree: $TREE"
  echo "# command: $2"
}
# headed FILE TITLE CMD: put header's lines (and a blank one) above a results file a script wrote, where it exists.
headed() {
  [ -f "$1" ] || return 0
  { header "$2" "$3"; echo; cat "$1"; } >"$1.tmp" && mv "$1.tmp" "$1"
}
