#!/bin/bash
# common.sh — sourced by the step scripts (after they set LEFT_S): T0, `cap N` (the seconds the next
# command may take: at most N, never past LEFT_S less a margin for the kill, at least 5) and
# `build_sm90_dev LIB OUT` (bench/sm90_dev linked against a static libw8a8.a).
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
