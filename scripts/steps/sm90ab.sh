#!/bin/bash
# sm90ab.sh — step "sm90ab" of scripts/device_session.sh (issue 4, session 4): A/B timings of the
# Hopper kernel's variants with bench/sm90_dev, the '*' row being the heuristic's choice:
#   1. large M, every configuration (-a): the 2-CTA B-multicast configs (fp8_128x128_promote_mc2,
#      int8_128x256_mc2) next to the plain tiles they would replace;
#   2. small M: the heuristic's split-K configuration at splits 1, 2, 4, 8 (-k): how the fixed cost
#      per GEMM depends on the split;
#   3. when build-v2/lib/libw8a8.a exists (the same library built with -DW8A8_SM90_EPILOGUE_V2, e.g. in
#      the background of the same device call), M <= 64 with both epilogues.
# Env from device_session.sh: L, BUILD, LEFT_S. About 3 minutes. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
T0=$(date +%s)
cap() { local t=$1 l=$((LEFT_S - ($(date +%s) - T0) - 5)); [ "$t" -gt "$l" ] && t=$l; [ "$t" -lt 5 ] && t=5; echo "$t"; }
devbuild() { # lib out
  gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/local/cuda/include bench/sm90_dev.c "$1" \
    -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lm -fopenmp -lstdc++ \
    $(pkg-config --libs nccl 2>/dev/null || echo -lnccl) $(mpicc --showme:link 2>/dev/null) -o "$2"
}
DEV="$BUILD/bin/sm90_dev"
devbuild "$BUILD/lib/libw8a8.a" "$DEV" >"$L/sm90ab-build.txt" 2>&1 || { echo "sm90ab: sm90_dev did not build"; exit 1; }
timeout -k 5 "$(cap 100)" "$DEV" -a -d fp8 -s 8b-qkv,8b-o,8b-gateup,70b-qkv -m 1024,4096,8192 >"$L/sm90ab-mc-fp8.txt" 2>&1
timeout -k 5 "$(cap 100)" "$DEV" -a -d int8 -s 8b-qkv,8b-o,8b-gateup,70b-qkv -m 1024,4096,8192 >"$L/sm90ab-mc-int8.txt" 2>&1
timeout -k 5 "$(cap 60)" "$DEV" -d fp8 -s 8b-qkv,8b-o,70b-o,8b-down -m 1,16 -k 1,2,4,8 >"$L/sm90ab-split.txt" 2>&1
r="mc/split done"
if [ -f build-v2/lib/libw8a8.a ]; then
  V2=build-v2/bin/sm90_dev
  mkdir -p build-v2/bin
  if devbuild build-v2/lib/libw8a8.a "$V2" >>"$L/sm90ab-build.txt" 2>&1; then
    for d in fp8 int8; do
      timeout -k 5 "$(cap 40)" "$DEV" -d $d -m 1,16,32,64 >"$L/sm90ab-epi-v1-$d.txt" 2>&1
      timeout -k 5 "$(cap 40)" "$V2" -d $d -m 1,16,32,64 >"$L/sm90ab-epi-v2-$d.txt" 2>&1
    done
    timeout -k 5 "$(cap 40)" "$V2" -d fp8 -s 8b-qkv,8b-o,70b-o,8b-down -m 1,16 -k 1,2,4,8 >"$L/sm90ab-split-v2.txt" 2>&1
    r="$r; epilogue v1/v2 done"
  else
    r="$r; v2 sm90_dev did not build"
  fi
else
  r="$r; no build-v2 library"
fi
echo "sm90ab: $r (logs/sm90ab-*.txt)"
