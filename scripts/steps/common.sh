#!/bin/bash
# common.sh — sourced by the step scripts (after they set LEFT_S): T0, `cap N` (the seconds the next
# command may take: at most N, never past LEFT_S less a margin for the kill, at least 5) and
# `build_sm90_dev LIB OUT` (bench/sm90_dev linked against a static libw8a8.a) and `need_sm90_dev STEP`.
T0=$(date +%s)
cap() {
  local t=$1 l=$((LEFT_S - ($(date +%s) - T0) - 8))
  [ "$t" -gt "$l" ] && t=$l
  [ "$t" -lt 5 ] && t=5
  echo "$t"
}
build_sm90_dev() {
  gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/local/cuda/include bench/sm90_dev.c "$1" \
    -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lm -fopenmp -lstdc++ \
    $(pkg-config --libs nccl 2>/dev/null || echo -lnccl) $(mpicc --showme:link 2>/dev/null) -o "$2"
}
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
